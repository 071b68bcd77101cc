/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Test helper: build Ethernet/IPv4/UDP/CAIS frames from host-order fields,
 * without DPDK, for unit tests, the fuzzer's seeds and the parity vectors.
 */
#ifndef CAIS_TEST_FRAMES_H
#define CAIS_TEST_FRAMES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>

#include <cais/proto.h>

/** One end of a frame: MAC, IPv4 (network order), UDP port (host order). */
struct tf_end {
	uint8_t mac[6];
	uint32_t ip;
	uint16_t port;
};

static inline uint16_t
tf_csum(const uint8_t *p, size_t len)
{
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	return (uint16_t)~sum;
}

/**
 * Write Ethernet/IPv4/UDP headers for udp_payload bytes at buf (42 bytes),
 * with a valid IPv4 checksum and UDP checksum 0.
 */
static inline void
tf_udp_headers(uint8_t *buf, const struct tf_end *src, const struct tf_end *dst, size_t udp_payload)
{
	uint8_t *ip = buf + CAIS_ETH_HLEN, *udp = ip + CAIS_IP_HLEN;
	uint16_t ip_len = (uint16_t)(CAIS_IP_HLEN + CAIS_UDP_HLEN + udp_payload);
	uint16_t udp_len = (uint16_t)(CAIS_UDP_HLEN + udp_payload), c;

	memcpy(buf, dst->mac, 6);
	memcpy(buf + 6, src->mac, 6);
	buf[12] = 0x08;
	buf[13] = 0x00;
	memset(ip, 0, CAIS_IP_HLEN + CAIS_UDP_HLEN);
	ip[0] = 0x45;
	ip[2] = (uint8_t)(ip_len >> 8);
	ip[3] = (uint8_t)ip_len;
	ip[6] = 0x40;
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &src->ip, 4);
	memcpy(ip + 16, &dst->ip, 4);
	c = tf_csum(ip, CAIS_IP_HLEN);
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
	udp[0] = (uint8_t)(src->port >> 8);
	udp[1] = (uint8_t)src->port;
	udp[2] = (uint8_t)(dst->port >> 8);
	udp[3] = (uint8_t)dst->port;
	udp[4] = (uint8_t)(udp_len >> 8);
	udp[5] = (uint8_t)udp_len;
}

/**
 * Build a CAIS frame: headers, the CAIS header of f, and n_values int32
 * (host order; written big-endian). n_values may differ from f->count to
 * build malformed frames.
 * @return the frame length
 */
static inline size_t
tf_cais_frame(uint8_t *buf, const struct tf_end *src, const struct tf_end *dst,
	      const struct cais_fields *f, const int32_t *values, size_t n_values)
{
	uint8_t *p = buf + CAIS_FRAME_OVERHEAD;

	tf_udp_headers(buf, src, dst, CAIS_HDR_LEN + 4 * n_values);
	cais_hdr_build((struct cais_hdr *)(buf + CAIS_FRAME_HDR_OFF), f);
	for (size_t i = 0; i < n_values; i++) {
		uint32_t v = htonl((uint32_t)values[i]);
		memcpy(p + 4 * i, &v, 4);
	}
	return CAIS_FRAME_OVERHEAD + 4 * n_values;
}

/** Build an ARP request from src asking for ip (network order); 42 bytes. */
static inline size_t
tf_arp_request(uint8_t *buf, const struct tf_end *src, uint32_t ip)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	uint8_t *a = buf + CAIS_ETH_HLEN;

	memcpy(buf, bcast, 6);
	memcpy(buf + 6, src->mac, 6);
	buf[12] = 0x08;
	buf[13] = 0x06;
	a[0] = 0;
	a[1] = 1; /* Ethernet */
	a[2] = 0x08;
	a[3] = 0x00; /* IPv4 */
	a[4] = 6;
	a[5] = 4;
	a[6] = 0;
	a[7] = 1; /* request */
	memcpy(a + 8, src->mac, 6);
	memcpy(a + 14, &src->ip, 4);
	memset(a + 18, 0, 6);
	memcpy(a + 24, &ip, 4);
	return CAIS_ETH_HLEN + 28;
}

#endif /* CAIS_TEST_FRAMES_H */
