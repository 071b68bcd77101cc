/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The parser: a frame from the RX burst (dp_lcore.c) is classified here on
 * plain bytes; dp_lcore.c then learns its source MAC and hands it on by
 * class: ARP and L2 to dp_fwd.c, DATA to the match (dp_match.c).
 */
#include <string.h>

#include "dp_frame.h"
#include "dp_parse.h"

#define ETHERTYPE_VLAN 0x8100u
#define ETHERTYPE_QINQ 0x88A8u

#define DP_X_NAME(name, text) #name,
static const char *const drop_enum_names[] = {"NONE", DP_DROPS(DP_X_NAME)};
#undef DP_X_NAME

/* The enum names in lower case ("ip_options"), made once before main(). */
static char drop_names[DP_DROP_MAX][24];

__attribute__((constructor)) static void
drop_names_init(void)
{
	for (unsigned int d = 0; d < DP_DROP_MAX; d++)
		for (unsigned int i = 0; i + 1 < sizeof(drop_names[d]) && drop_enum_names[d][i];
		     i++) {
			char c = drop_enum_names[d][i];

			drop_names[d][i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
		}
}

const char *
dp_drop_name(enum dp_drop d)
{
	return (unsigned int)d < DP_DROP_MAX ? drop_names[d] : "?";
}

static inline uint16_t
rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/*
 * The ones' complement sum does not depend on byte order (RFC 1071 2.B):
 * summed as 32-bit words in the CPU's order, folded, and swapped once into
 * network order at the end, it is the sum of the big-endian 16-bit words.
 * Inline, so that the parser's constant length unrolls it.
 */
static inline uint16_t
ip_csum(const void *hdr, unsigned int hlen)
{
	const uint8_t *p = hdr;
	uint64_t sum = 0;
	unsigned int i;

#pragma GCC unroll 16
	for (i = 0; i + 4 <= hlen; i += 4) {
		uint32_t w;

		memcpy(&w, p + i, 4);
		sum += w;
	}
	if (i + 2 <= hlen) {
		uint16_t w;

		memcpy(&w, p + i, 2);
		sum += w;
	}
	sum = (sum & 0xFFFFFFFFu) + (sum >> 32);
	sum = (sum & 0xFFFFu) + (sum >> 16);
	sum = (sum & 0xFFFFu) + (sum >> 16);
	sum = (sum & 0xFFFFu) + (sum >> 16);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	sum = __builtin_bswap16((uint16_t)sum);
#endif
	return (uint16_t)~sum;
}

uint16_t
dp_ip_csum(const void *hdr, unsigned int hlen)
{
	return ip_csum(hdr, hlen);
}

static inline void
drop(struct dp_parsed *out, enum dp_drop why)
{
	out->cls = DP_CLASS_DROP;
	out->drop = why;
}

/*
 * An ARP request (Ethernet/IPv4) asking for the aggregator's address, whose
 * sender hardware address is the frame's (unicast) source: the reply goes
 * there, so it must never be a group address.
 */
static bool
arp_for_agg(const uint8_t *frame, uint32_t len, uint32_t agg_ip)
{
	const uint8_t *arp = frame + CAIS_ETH_HLEN;

	if (len < CAIS_ETH_HLEN + DP_ARP_LEN)
		return false;
	if (rd16(arp) != 1 || rd16(arp + 2) != DP_ETHERTYPE_IPV4 || arp[4] != 6 || arp[5] != 4)
		return false;
	if (rd16(arp + 6) != 1) /* request */
		return false;
	return dp_eq4(arp + 24, &agg_ip) && dp_eq6(arp + 8, frame + 6);
}

/*
 * An ARP packet (Ethernet/IPv4, request or reply) whose sender protocol
 * address is the aggregator's: only the switch may say where that address is.
 */
static bool
arp_claims(const uint8_t *frame, uint32_t len, uint32_t agg_ip)
{
	const uint8_t *arp = frame + CAIS_ETH_HLEN;

	return len >= CAIS_ETH_HLEN + DP_ARP_LEN && rd16(arp + 2) == DP_ETHERTYPE_IPV4 &&
	       arp[5] == 4 && dp_eq4(arp + 14, &agg_ip);
}

/* Why a CAIS header failed cais_hdr_check(). */
static enum dp_drop
cais_drop(enum cais_hdr_check hc)
{
	switch (hc) {
	case CAIS_HDR_SHORT:
		return DP_DROP_CAIS_SHORT;
	case CAIS_HDR_BAD_MAGIC:
		return DP_DROP_CAIS_MAGIC;
	case CAIS_HDR_BAD_VERSION:
		return DP_DROP_CAIS_VERSION;
	case CAIS_HDR_BAD_TYPE:
		return DP_DROP_CAIS_TYPE;
	default:
		return DP_DROP_CAIS_FLAGS;
	}
}

/* UDP to the aggregator, in the room an IPv4 payload leaves: CAIS DATA to its port. */
static void
parse_udp(const uint8_t *udp, uint32_t room, const struct dp_parse_cfg *cfg, struct dp_parsed *out)
{
	const uint8_t *cais = udp + CAIS_UDP_HLEN;
	enum cais_hdr_check hc;
	uint32_t udp_len;

	if (room < CAIS_UDP_HLEN)
		return drop(out, DP_DROP_UDP_LEN);
	udp_len = rd16(udp + 4);
	if (udp_len < CAIS_UDP_HLEN || udp_len > room)
		return drop(out, DP_DROP_UDP_LEN);
	if (!dp_eq2(udp + 2, &cfg->udp_port))
		return drop(out, DP_DROP_UDP_PORT);
	hc = cais_hdr_check(cais, udp_len - CAIS_UDP_HLEN);
	if (hc != CAIS_HDR_OK)
		return drop(out, cais_drop(hc));
	out->cls = cais_hdr_type((const struct cais_hdr *)cais) == CAIS_TYPE_DATA ? DP_CLASS_DATA
										  : DP_CLASS_ANSWER;
}

/* IPv4 to the aggregator MAC: to its address, no options, no fragment, UDP. */
static void
parse_ipv4(const uint8_t *frame, uint32_t len, const struct dp_parse_cfg *cfg,
	   struct dp_parsed *out)
{
	const uint8_t *ip = frame + CAIS_ETH_HLEN;
	uint32_t ip_len;
	unsigned int ihl;

	if (len < CAIS_ETH_HLEN + CAIS_IP_HLEN)
		return drop(out, DP_DROP_IP_SHORT);
	if ((ip[0] >> 4) != 4)
		return drop(out, DP_DROP_IP_VERSION);
	ihl = (ip[0] & 0x0Fu) * 4u;
	if (ihl < CAIS_IP_HLEN)
		return drop(out, DP_DROP_IP_HDRLEN);
	if (ihl > CAIS_IP_HLEN)
		return drop(out, DP_DROP_IP_OPTIONS);
	ip_len = rd16(ip + 2);
	if (ip_len < CAIS_IP_HLEN || ip_len > len - CAIS_ETH_HLEN)
		return drop(out, DP_DROP_IP_LEN);
	if (ip_csum(ip, CAIS_IP_HLEN) != 0)
		return drop(out, DP_DROP_IP_CSUM);
	if (!dp_eq4(ip + 16, &cfg->agg_ip))
		return drop(out, DP_DROP_TO_AGG_OTHER);
	if (rd16(ip + 6) & 0x3FFFu) /* MF or a fragment offset */
		return drop(out, DP_DROP_IP_FRAGMENT);
	if (ip[9] != DP_IPPROTO_UDP)
		return drop(out, DP_DROP_NOT_UDP);
	parse_udp(ip + CAIS_IP_HLEN, ip_len - CAIS_IP_HLEN, cfg, out);
}

void
dp_parse(const uint8_t *frame, uint32_t len, const struct dp_parse_cfg *cfg, struct dp_parsed *out)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	uint16_t type;
	bool to_agg;

	out->cls = DP_CLASS_L2;
	out->drop = DP_DROP_NONE;

	if (len < CAIS_ETH_HLEN)
		return drop(out, DP_DROP_RUNT);
	if ((frame[6] & 1) || !(frame[6] | frame[7] | frame[8] | frame[9] | frame[10] | frame[11]))
		return drop(out, DP_DROP_BAD_SRC_MAC);
	if (!cfg->agg_enabled)
		return;
	if (!cfg->unguarded && dp_eq6(frame + 6, cfg->agg_mac))
		return drop(out, DP_DROP_AGG_SRC_MAC);
	type = rd16(frame + 12);
	to_agg = dp_eq6(frame, cfg->agg_mac);
	if (type == DP_ETHERTYPE_ARP) {
		bool want;

		if (!cfg->unguarded && arp_claims(frame, len, cfg->agg_ip))
			return drop(out, DP_DROP_AGG_ARP);
		want = (to_agg || dp_eq6(frame, bcast)) && arp_for_agg(frame, len, cfg->agg_ip);
		if (want)
			out->cls = DP_CLASS_ARP_AGG;
		else if (to_agg)
			drop(out, DP_DROP_ARP_OTHER);
		return;
	}
	if (!cfg->unguarded && type == DP_ETHERTYPE_IPV4 && len >= CAIS_ETH_HLEN + CAIS_IP_HLEN &&
	    dp_eq4(frame + CAIS_ETH_HLEN + 12, &cfg->agg_ip))
		return drop(out, DP_DROP_AGG_SRC_IP);
	if (!to_agg)
		return;
	if (type == DP_ETHERTYPE_IPV4)
		return parse_ipv4(frame, len, cfg, out);
	if (type == ETHERTYPE_VLAN || type == ETHERTYPE_QINQ)
		return drop(out, DP_DROP_VLAN);
	drop(out, DP_DROP_TO_AGG_OTHER);
}
