/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Frame headers, written where a session is added (dp_table.c: a member's
 * template) and where a REJECT turns the offending DATA around (dp_reply.c).
 */
#include <string.h>

#include "dp_frame.h"
#include "dp_parse.h"

#define IPV4_DONT_FRAG 0x40u /* first byte of the flags/offset field */
#define IPV4_TTL       64u

void
dp_frame_hdr(uint8_t *p, const uint8_t *dst_mac, const uint8_t *src_mac, uint32_t src_ip,
	     uint32_t dst_ip, uint16_t sport_be, uint16_t dport_be)
{
	memcpy(p, dst_mac, 6);
	memcpy(p + 6, src_mac, 6);
	dp_frame_wr16(p + 12, DP_ETHERTYPE_IPV4);
	p += CAIS_ETH_HLEN;
	memset(p, 0, CAIS_IP_HLEN + CAIS_UDP_HLEN);
	p[0] = 0x45; /* version 4, no options */
	p[6] = IPV4_DONT_FRAG;
	p[8] = IPV4_TTL;
	p[9] = DP_IPPROTO_UDP;
	memcpy(p + 12, &src_ip, 4);
	memcpy(p + 16, &dst_ip, 4);
	dp_frame_wr16(p + 10, dp_ip_csum(p, CAIS_IP_HLEN));
	p += CAIS_IP_HLEN;
	memcpy(p, &sport_be, 2);
	memcpy(p + 2, &dport_be, 2);
}
