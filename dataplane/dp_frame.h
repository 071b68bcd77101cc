/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The Ethernet/IPv4/UDP headers of what the switch sends (RESULT, REJECT),
 * on plain bytes as the parser reads them (dp_parse.h): no DPDK.
 *
 * Headers toward a session's member are written once, when the session is
 * added (dp_frame_hdr() into the member's template, its IPv4 checksum
 * included: the parser's dp_ip_csum()); per packet only the lengths
 * change, and the checksum by the length's word (dp_frame_lengths()).
 * IPv4 without options, don't fragment, TTL 64; UDP checksum 0, which
 * IPv4 allows.
 */
#ifndef DP_FRAME_H
#define DP_FRAME_H

#include <stdint.h>
#include <string.h>

#include <cais/proto.h>

/* Wire values the parser matches and the builders write. */
#define DP_ETHERTYPE_IPV4 0x0800u
#define DP_ETHERTYPE_ARP  0x0806u
#define DP_IPPROTO_UDP	  17u
#define DP_ARP_LEN	  28u /**< an ARP message for IPv4 over Ethernet */
#define DP_ETH_MIN_FRAME  60u /**< the Ethernet minimum, without the FCS */

/**
 * Write Ethernet/IPv4/UDP headers (CAIS_FRAME_HDR_OFF bytes) at p with
 * lengths 0 and the IPv4 checksum of that header (dp_frame_lengths() then
 * sets the lengths and updates the checksum).
 * @param dst_mac, src_mac  6 bytes each
 * @param src_ip, dst_ip    network order
 * @param sport_be, dport_be UDP ports, network order
 */
void dp_frame_hdr(uint8_t *p, const uint8_t *dst_mac, const uint8_t *src_mac, uint32_t src_ip,
		  uint32_t dst_ip, uint16_t sport_be, uint16_t dport_be);

/** Store v big-endian at p. */
static inline void
dp_frame_wr16(uint8_t *p, unsigned int v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/**
 * Set the IPv4 and UDP lengths of a frame carrying cais_bytes after its UDP
 * header, whose headers are as dp_frame_hdr() wrote them (lengths 0, the
 * checksum of that): the IPv4 checksum is updated for the one word that
 * changes (RFC 1624, eqn. 3, with the old word 0), not summed again; UDP
 * checksum 0.
 */
static inline void
dp_frame_lengths(uint8_t *frame, unsigned int cais_bytes)
{
	uint8_t *ip = frame + CAIS_ETH_HLEN, *udp = ip + CAIS_IP_HLEN;
	uint16_t csum, len;
	uint32_t sum;

	dp_frame_wr16(ip + 2, CAIS_IP_HLEN + CAIS_UDP_HLEN + cais_bytes);
	memcpy(&len, ip + 2, 2);
	memcpy(&csum, ip + 10, 2);
	sum = (uint32_t)(uint16_t)~csum + len;
	sum = (sum & 0xFFFF) + (sum >> 16);
	csum = (uint16_t)~sum;
	memcpy(ip + 10, &csum, 2);
	dp_frame_wr16(udp + 4, CAIS_UDP_HLEN + cais_bytes);
}

#endif /* DP_FRAME_H */
