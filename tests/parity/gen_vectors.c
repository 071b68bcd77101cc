/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gen_vectors: the parity test vectors, made by the real cais-switch
 * pipeline (dataplane/, driven without ports as tests/unit/test_pipeline.c
 * does) from inputs this program builds.
 *
 *   gen_vectors --out DIR
 *
 * writes DIR/<file>.txt (the vectors) and DIR/<config>.json (the control
 * requests each file's switch starts with, applied through ctl_apply_file(),
 * the code behind cais-switch --config). Format of a vector file, one
 * item per line:
 *
 *   # comment
 *   agg MAC IP              the aggregator's address (--agg-mac, --agg-ip)
 *   ports N                 switch ports 0..N-1
 *   config FILE             the JSON requests (same directory)
 *   station PORT MAC        a host behind PORT; the replayer first sends one
 *                           learning frame from each (broadcast, ethertype
 *                           0x88b5, 60 bytes) and ignores what comes out
 *   case NAME               a group of inputs (a # line says what it checks)
 *   in PORT HEX             a frame received on PORT ...
 *   out PORT HEX            ... and each frame the switch sends for it
 *                           (order between out lines carries no meaning)
 *
 * Inputs are replayed in order, each after the previous one's outputs.
 * Only what the P4 profile (dataplane/p4/cais.p4) also does is here: 64
 * elements per packet at most, pools of at most 128 slots, at most 32
 * ranks, fewer REJECTs per sender than the rate limit's burst, sums whose
 * saturation does not depend on the order of additions, hosts that never
 * move between ports (DATA from another port than a member's is REJECTed,
 * E5; no member's first DATA comes from another port than its own), no
 * frame shorter than an Ethernet header, fewer ACKs (E6) per sender than
 * their budget's burst, FIXED32 tensors only (the P4 profile installs a
 * BLOCK16 tensor as FIXED32: BLOCK16 DATA to a FIXED32 tensor is here, and
 * gets BAD_DTYPE from both), one flow per member (no E7 "ports").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/b16.h"
#include "../unit/test_env.h"

#define N_PORTS	    4
#define N_HOSTS	    5
#define MAX_FRAME   1024
#define ETH_P_LEARN 0x88B5

/* The aggregator and the hosts: h0..h3 on ports 0..3, h4 behind port 1 with h1. */
static struct tf_end AGG;
static struct tf_end H[N_HOSTS];
static const uint16_t H_PORT[N_HOSTS] = {0, 1, 2, 3, 1};
static const uint8_t MAC_NOWHERE[6] = {0x02, 0, 0, 0, 0, 0x99}; /* never a source: flooded */
static const uint8_t MAC_BCAST[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

/* A session of the configs: members' hosts by rank, UDP port base + rank. */
struct sess {
	uint16_t tenant, session;
	uint32_t pool;
	uint16_t n, elems;
	uint8_t host[4];
	uint16_t port_base;
	bool bind; /* session.add gives every member's "switch_port" (E5) */
};

static const struct sess S11 = {1, 1, 8, 4, 64, {0, 1, 2, 3}, 40000, false};
static const struct sess S12 = {1, 2, 1, 1, 16, {0}, 41000, false};
static const struct sess S27 = {2, 7, 4, 3, 16, {3, 1, 2}, 42000, true};

/* The vector file being written and its switch. */
static struct {
	const char *dir;
	FILE *f;
	struct tenv *e;
	unsigned int n_in, n_out, n_files;
} V;

static uint8_t frame[MAX_FRAME];

static void
die(const char *what)
{
	fprintf(stderr, "gen_vectors: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void
hexline(const char *tag, unsigned int port, const uint8_t *p, size_t len)
{
	fprintf(V.f, "%s %u ", tag, port);
	for (size_t i = 0; i < len; i++)
		fprintf(V.f, "%02x", p[i]);
	fputc('\n', V.f);
}

static void
mac_str(char *buf, const uint8_t *m)
{
	sprintf(buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

static void
ip_str(char *buf, uint32_t ip_be)
{
	const uint8_t *b = (const uint8_t *)&ip_be;

	sprintf(buf, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
}

/* Run one frame through the pipeline; record it and every frame it caused. */
static void
vin(uint16_t port, const uint8_t *f, size_t len)
{
	hexline("in", port, f, len);
	tenv_send(V.e, port, f, len);
	for (unsigned int k = 0; k < V.e->n_cap; k++)
		hexline("out", V.e->cap[k].port, V.e->cap[k].data, V.e->cap[k].len);
	V.n_in++;
	V.n_out += V.e->n_cap;
	tenv_clear(V.e);
}

static void
vcase(const char *name, const char *what)
{
	fprintf(V.f, "\ncase %s\n# %s\n", name, what);
}

/* The frame every station sends first, so that the switch learns where it is. */
static size_t
learn_frame(uint8_t *buf, const uint8_t *mac)
{
	memset(buf, 0, 60);
	memcpy(buf, MAC_BCAST, 6);
	memcpy(buf + 6, mac, 6);
	buf[12] = ETH_P_LEARN >> 8;
	buf[13] = ETH_P_LEARN & 0xFF;
	return 60;
}

static void
members_json(char *buf, size_t len, const struct sess *s)
{
	size_t k = 0;

	for (unsigned int r = 0; r < s->n; r++) {
		char mac[18], ip[16], sw_port[32] = "";

		mac_str(mac, H[s->host[r]].mac);
		ip_str(ip, H[s->host[r]].ip);
		if (s->bind)
			snprintf(sw_port, sizeof(sw_port), ", \"switch_port\": %u",
				 H_PORT[s->host[r]]);
		k += (size_t)snprintf(buf + k, len - k,
				      "%s\n      {\"rank\": %u, \"mac\": \"%s\", \"ip\": \"%s\", "
				      "\"port\": %u%s}",
				      r ? "," : "", r, mac, ip, s->port_base + r, sw_port);
	}
}

static int
session_json(char *buf, size_t len, const struct sess *s, unsigned int prio)
{
	char members[2048];

	members_json(members, sizeof(members), s);
	return snprintf(buf, len,
			"  {\"cmd\": \"session.add\", \"args\": {\"tenant\": %u, \"session\": %u, "
			"\"n\": %u, \"slots\": %u, \"elems_per_packet\": %u, \"priority\": %u,\n"
			"    \"members\": [%s]}},\n",
			s->tenant, s->session, s->n, s->pool, s->elems, prio, members);
}

/* A tensor entry; wire: its "wire" field (E4), or NULL for none (FIXED32). */
static int
tensor_json(char *buf, size_t len, const struct sess *s, uint32_t tensor, const char *op,
	    const char *wire)
{
	char w[32] = "";

	if (wire)
		snprintf(w, sizeof(w), ", \"wire\": \"%s\"", wire);
	return snprintf(buf, len,
			"  {\"cmd\": \"tensor.add\", \"args\": {\"tenant\": %u, \"session\": %u, "
			"\"tensor\": %u, \"op\": \"%s\", \"scale\": 1024%s}},\n",
			s->tenant, s->session, tensor, op, w);
}

/* The two configurations: the main one, and the same in forward-only mode. */
static void
write_config(const char *name, bool fwd_only)
{
	char path[512], buf[16384];
	int k = 0;
	FILE *f;

	k += snprintf(buf + k, sizeof(buf) - (size_t)k, "[\n");
	k += session_json(buf + k, sizeof(buf) - (size_t)k, &S11, 0);
	k += tensor_json(buf + k, sizeof(buf) - (size_t)k, &S11, 1, "sum", NULL);
	k += tensor_json(buf + k, sizeof(buf) - (size_t)k, &S11, 2, "max", "fixed32");
	k += tensor_json(buf + k, sizeof(buf) - (size_t)k, &S11, 3, "min", NULL);
	k += tensor_json(buf + k, sizeof(buf) - (size_t)k, &S11, 4, "avg", NULL);
	k += session_json(buf + k, sizeof(buf) - (size_t)k, &S12, 0);
	k += tensor_json(buf + k, sizeof(buf) - (size_t)k, &S12, 5, "sum", NULL);
	k += session_json(buf + k, sizeof(buf) - (size_t)k, &S27, 1);
	k += tensor_json(buf + k, sizeof(buf) - (size_t)k, &S27, 70, "max", "fixed32");
	k += snprintf(buf + k, sizeof(buf) - (size_t)k,
		      "  {\"cmd\": \"thresholds.set\", \"args\": {\"queue_depth\": 512, "
		      "\"slot_usage\": 0.9}}%s\n",
		      fwd_only ? "," : "");
	if (fwd_only)
		k +=
		    snprintf(buf + k, sizeof(buf) - (size_t)k,
			     "  {\"cmd\": \"mode.set\", \"args\": {\"mode\": \"forward_only\"}}\n");
	snprintf(buf + k, sizeof(buf) - (size_t)k, "]\n");
	snprintf(path, sizeof(path), "%s/%s", V.dir, name);
	f = fopen(path, "w");
	if (!f || fputs(buf, f) < 0 || fclose(f) != 0)
		die(path);
}

static void
file_begin(const char *name, const char *config, const char *title)
{
	char path[512], mac[18], ip[16];
	struct ctl_ops ops;
	struct ctl_err err;

	snprintf(path, sizeof(path), "%s/%s", V.dir, name);
	V.f = fopen(path, "w");
	if (!V.f)
		die(path);
	V.e = tenv_create(&AGG, N_PORTS, 1);
	snprintf(path, sizeof(path), "%s/%s", V.dir, config);
	dp_switch_ctl_ops(V.e->sw, &ops);
	if (ctl_apply_file(&ops, path, &err) != 0) {
		fprintf(stderr, "gen_vectors: %s: %s\n", ctl_errname(err.code), err.msg);
		exit(1);
	}
	mac_str(mac, AGG.mac);
	ip_str(ip, AGG.ip);
	fprintf(
	    V.f,
	    "# CAIS parity vectors: %s\n"
	    "# Generated by tests/parity/gen_vectors from the cais-switch pipeline; do not edit.\n"
	    "# Format: tests/parity/gen_vectors.c; replayed by tests/parity/run-parity.sh.\n"
	    "agg %s %s\nports %u\nconfig %s\n",
	    title, mac, ip, N_PORTS, config);
	for (unsigned int h = 0; h < N_HOSTS; h++) {
		size_t len = learn_frame(frame, H[h].mac);

		mac_str(mac, H[h].mac);
		fprintf(V.f, "station %u %s\n", H_PORT[h], mac);
		tenv_send(V.e, H_PORT[h], frame, len);
		tenv_clear(V.e);
	}
	V.n_in = V.n_out = 0;
}

static void
file_end(const char *name)
{
	if (fclose(V.f) != 0)
		die(name);
	tenv_free(V.e);
	printf("gen_vectors: %-14s %3u inputs, %3u outputs\n", name, V.n_in, V.n_out);
	V.n_files++;
}

/* ---- frames ---- */

static int32_t
val(unsigned int rank, uint32_t seq, unsigned int i)
{
	return (int32_t)(((rank + 1) * 100003u + seq * 7919u + i * 31u) % 200001u) - 100000;
}

/* The sender of rank r in session s: its host's MAC and IP, the registered UDP port. */
static struct tf_end
sender(const struct sess *s, unsigned int r)
{
	struct tf_end e = H[s->host[r]];

	e.port = (uint16_t)(s->port_base + r);
	return e;
}

/* Fill the IPv4 checksum of the frame in buf. */
static void
ip_fix(uint8_t *buf)
{
	uint16_t c;

	buf[CAIS_ETH_HLEN + 10] = buf[CAIS_ETH_HLEN + 11] = 0;
	c = tf_csum(buf + CAIS_ETH_HLEN, CAIS_IP_HLEN);
	buf[CAIS_ETH_HLEN + 10] = (uint8_t)(c >> 8);
	buf[CAIS_ETH_HLEN + 11] = (uint8_t)c;
}

/* DATA of rank r for chunk seq (values vals, or val(r, seq, i)) into frame; returns its length. */
static size_t
data(const struct sess *s, uint32_t tensor, uint32_t seq, unsigned int r, uint16_t count,
     const int32_t *vals, uint8_t flags)
{
	int32_t v[CAIS_P4_ELEMS * 2];
	struct cais_fields f;
	struct tf_end src = sender(s, r);

	if (!vals) {
		for (unsigned int i = 0; i < count && i < CAIS_P4_ELEMS * 2; i++)
			v[i] = val(r, seq, i);
		vals = v;
	}
	cais_data_fields(&f, s->tenant, s->session, tensor, seq, s->pool, (uint8_t)r, count);
	f.flags = flags;
	return tf_cais_frame(frame, &src, &AGG, &f, vals, count);
}

/*
 * BLOCK16 DATA (E4) of rank r for chunk seq into frame, its payload cut to
 * plen bytes (0: whole); returns its length.
 */
static size_t
data_b16(const struct sess *s, uint32_t tensor, uint32_t seq, unsigned int r, uint16_t count,
	 size_t plen)
{
	uint8_t exps[CAIS_P4_ELEMS * 2 / CAIS_B16_BLOCK];
	int16_t m[CAIS_P4_ELEMS * 2];
	struct cais_fields f;
	struct tf_end src = sender(s, r);
	size_t full;

	for (unsigned int b = 0; b * CAIS_B16_BLOCK < count; b++)
		exps[b] = (uint8_t)(5 * b + r);
	for (unsigned int i = 0; i < count; i++)
		m[i] = (int16_t)(val(r, seq, i) / 4);
	cais_data_fields(&f, s->tenant, s->session, tensor, seq, s->pool, (uint8_t)r, count);
	f.dtype = CAIS_DT_BLOCK16;
	full = tb16_encode(frame + CAIS_FRAME_OVERHEAD, exps, m, count);
	plen = plen ? plen : full;
	tf_udp_headers(frame, &src, &AGG, CAIS_HDR_LEN + plen);
	cais_hdr_build((struct cais_hdr *)(frame + CAIS_FRAME_HDR_OFF), &f);
	return CAIS_FRAME_OVERHEAD + plen;
}

static void
send_data(const struct sess *s, uint32_t tensor, uint32_t seq, unsigned int r, uint16_t count,
	  const int32_t *vals, uint8_t flags)
{
	size_t len = data(s, tensor, seq, r, count, vals, flags);

	vin(H_PORT[s->host[r]], frame, len);
}

/* A whole round: every rank in order. */
static void
round_all(const struct sess *s, uint32_t tensor, uint32_t seq, uint16_t count)
{
	for (unsigned int r = 0; r < s->n; r++)
		send_data(s, tensor, seq, r, count, NULL, 0);
}

/* Header fields of the frame in buf: write the CAIS header back from f. */
static struct cais_hdr *
hdr_of(uint8_t *buf)
{
	return (struct cais_hdr *)(buf + CAIS_FRAME_HDR_OFF);
}

/* ---- rounds.txt: PROTOCOL.md sections 2 and 3 ---- */

static void
gen_rounds(void)
{
	int32_t v[4][CAIS_P4_ELEMS];

	file_begin("rounds.txt", "main.json", "every round outcome (PROTOCOL.md 2-3)");

	vcase("sum_in_order", "4 ranks, sum, 64 elements: RESULT to every member on completion");
	round_all(&S11, 1, 0, 64);

	vcase("seq_wrap",
	      "seq 0xfffffff9 (slot 1, set 1, unused so far), then seq 9 (the same slot and set, "
	      "newer modulo 2^32), then 0xfffffff9 is stale");
	round_all(&S11, 1, 0xFFFFFFF9u, 64);
	round_all(&S11, 1, 9, 64);
	send_data(&S11, 1, 0xFFFFFFF9u, 0, 64, NULL, 0);

	vcase("sum_any_order", "arrival order 2, 0, 3, 1");
	send_data(&S11, 1, 1, 2, 64, NULL, 0);
	send_data(&S11, 1, 1, 0, 64, NULL, 0);
	send_data(&S11, 1, 1, 3, 64, NULL, 0);
	send_data(&S11, 1, 1, 1, 64, NULL, 0);

	vcase("duplicate", "a rank counted in the open round sends again (with and without RETX): "
			   "dropped, never added");
	send_data(&S11, 1, 2, 0, 64, NULL, 0);
	send_data(&S11, 1, 2, 1, 64, NULL, 0);
	send_data(&S11, 1, 2, 1, 64, NULL, CAIS_F_RETX);
	send_data(&S11, 1, 2, 1, 64, NULL, 0);
	send_data(&S11, 1, 2, 2, 64, NULL, 0);
	send_data(&S11, 1, 2, 3, 64, NULL, 0);

	vcase("resend",
	      "retransmission into a complete round: the stored RESULT to that rank only");
	send_data(&S11, 1, 2, 1, 64, NULL, CAIS_F_RETX);
	send_data(&S11, 1, 2, 3, 64, NULL, 0);

	vcase("new_round_then_stale", "seq 18 takes over (slot 2, set 0) from seq 2; "
				      "seq 2 is then stale");
	round_all(&S11, 1, 18, 64);
	send_data(&S11, 1, 2, 0, 64, NULL, 0);
	send_data(&S11, 1, 2, 1, 64, NULL, CAIS_F_RETX);

	vcase("abandoned_round", "an open round (seq 4, ranks 0-1) overwritten by seq 20");
	send_data(&S11, 1, 4, 0, 64, NULL, 0);
	send_data(&S11, 1, 4, 1, 64, NULL, 0);
	round_all(&S11, 1, 20, 64);
	send_data(&S11, 1, 4, 2, 64, NULL, 0);

	vcase("set_alternation", "seq 5 (set 0) and 13 (set 1) of slot 5 interleaved");
	for (unsigned int r = 0; r < 4; r++) {
		send_data(&S11, 1, 5, r, 64, NULL, 0);
		send_data(&S11, 1, 13, r, 64, NULL, 0);
	}

	vcase("short_counts", "count 1 and count 17");
	round_all(&S11, 1, 6, 1);
	round_all(&S11, 1, 7, 17);

	vcase("count_mismatch", "a DATA whose count differs from its round's is dropped");
	send_data(&S11, 1, 24, 0, 16, NULL, 0);
	send_data(&S11, 1, 24, 1, 8, NULL, 0);
	send_data(&S11, 1, 24, 1, 16, NULL, 0);
	send_data(&S11, 1, 24, 2, 16, NULL, 0);
	send_data(&S11, 1, 24, 3, 16, NULL, 0);

	vcase("tensor_mismatch", "a DATA of another tensor for an open round's seq is dropped");
	send_data(&S11, 1, 25, 0, 64, NULL, 0);
	send_data(&S11, 2, 25, 1, 64, NULL, 0);
	for (unsigned int r = 1; r < 4; r++)
		send_data(&S11, 1, 25, r, 64, NULL, 0);

	vcase("ops", "max (tensor 2), min (tensor 3), avg aggregated as sum (tensor 4)");
	round_all(&S11, 2, 26, 64);
	round_all(&S11, 3, 27, 64);
	round_all(&S11, 4, 28, 64);

	vcase("saturate_high", "even elements pass INT32_MAX (all contributions >= 0): "
			       "INT32_MAX and OVERFLOW");
	for (unsigned int r = 0; r < 4; r++)
		for (unsigned int i = 0; i < CAIS_P4_ELEMS; i++)
			v[r][i] = (i % 2 == 0) ? (r == 0 || r == 3 ? INT32_MAX : (int32_t)(r + i))
					       : val(r, 29, i);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&S11, 1, 29, r, 64, v[r], 0);

	vcase("overflow_resend", "the stored RESULT of a saturated round keeps OVERFLOW");
	send_data(&S11, 1, 29, 0, 64, v[0], CAIS_F_RETX);

	vcase("saturate_low", "all contributions <= 0 past INT32_MIN: INT32_MIN and OVERFLOW");
	for (unsigned int r = 0; r < 4; r++)
		for (unsigned int i = 0; i < CAIS_P4_ELEMS; i++)
			v[r][i] = r == 1 ? INT32_MIN + (int32_t)i : -(int32_t)(r * 1000 + i + 1);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&S11, 1, 30, r, 64, v[r], 0);

	vcase("exact_limit", "contributions summing to exactly INT32_MAX / INT32_MIN: no OVERFLOW");
	for (unsigned int r = 0; r < 4; r++)
		for (unsigned int i = 0; i < CAIS_P4_ELEMS; i++)
			v[r][i] =
			    r == 0 ? (i % 2 ? INT32_MIN + 3 : INT32_MAX - 3) : (i % 2 ? -1 : 1);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&S11, 1, 31, r, 64, v[r], 0);

	vcase("extremes_max_min", "max and min over INT32_MIN..INT32_MAX");
	for (unsigned int r = 0; r < 4; r++)
		for (unsigned int i = 0; i < CAIS_P4_ELEMS; i++)
			v[r][i] = (i + r) % 4 == 0   ? INT32_MIN
				  : (i + r) % 4 == 1 ? INT32_MAX
						     : val(r, 32, i);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&S11, 2, 34, r, 64, v[r], 0);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&S11, 3, 35, r, 64, v[r], 0);

	vcase("retx_first", "the first contribution of a round carries RETX: counted normally");
	send_data(&S11, 1, 32, 0, 64, NULL, CAIS_F_RETX);
	for (unsigned int r = 1; r < 4; r++)
		send_data(&S11, 1, 32, r, 64, NULL, CAIS_F_RETX);

	vcase("slot_mismatch", "slot index or set bit that disagree with seq: dropped");
	{
		size_t len = data(&S11, 1, 33, 0, 64, NULL, 0);

		hdr_of(frame)->slot = htons(2);
		vin(0, frame, len);
		len = data(&S11, 1, 33, 0, 64, NULL, 0);
		hdr_of(frame)->slot = htons(1 | CAIS_SET_BIT);
		vin(0, frame, len);
	}

	vcase("trailer_and_ip_fields", "DATA with an Ethernet trailer and unusual TOS, id, TTL, "
				       "flags: the RESULT has canonical headers and no trailer");
	for (unsigned int r = 0; r < 4; r++) {
		size_t len = data(&S11, 1, 36, r, 64, NULL, 0);
		uint8_t *ip = frame + CAIS_ETH_HLEN;

		memset(frame + len, 0xA5, 8);
		ip[1] = 0x28;
		ip[4] = 0x12;
		ip[5] = (uint8_t)(0x34 + r);
		ip[6] = 0;
		ip[8] = 17;
		ip_fix(frame);
		vin(H_PORT[S11.host[r]], frame, len + 8);
	}

	vcase("session_n1", "a one-rank session: RESULT on the first DATA, then a resend");
	round_all(&S12, 5, 0, 16);
	send_data(&S12, 5, 0, 0, 16, NULL, CAIS_F_RETX);
	round_all(&S12, 5, 1, 3);

	vcase("session_n3", "ranks on hosts h3, h1, h2 (ports 3, 1, 2), max, its own slots");
	round_all(&S27, 70, 0, 16);
	send_data(&S27, 70, 5, 2, 16, NULL, 0);
	send_data(&S11, 1, 37, 0, 64, NULL, 0);
	send_data(&S27, 70, 5, 0, 16, NULL, 0);
	send_data(&S11, 1, 37, 1, 64, NULL, 0);
	send_data(&S27, 70, 5, 1, 16, NULL, 0);
	send_data(&S11, 1, 37, 2, 64, NULL, 0);
	send_data(&S11, 1, 37, 3, 64, NULL, 0);

	vcase("ack_fields",
	      "E6: RETX duplicates in an open round get an ACK to the sender: type 4, tenant, "
	      "session, tensor, seq, slot (set 1 here), the DATA's rank and dtype, count 0, "
	      "reason 0; again for a second RETX; then the round completes and a RETX gets the "
	      "stored RESULT");
	send_data(&S27, 70, 6, 0, 16, NULL, 0);
	send_data(&S27, 70, 6, 2, 16, NULL, 0);
	send_data(&S27, 70, 6, 2, 16, NULL, CAIS_F_RETX);
	send_data(&S27, 70, 6, 0, 16, NULL, CAIS_F_RETX);
	send_data(&S27, 70, 6, 2, 16, NULL, CAIS_F_RETX);
	send_data(&S27, 70, 6, 1, 16, NULL, 0);
	send_data(&S27, 70, 6, 1, 16, NULL, CAIS_F_RETX);

	vcase("ack_no_overflow",
	      "E6: an ACK into a round whose sum has saturated carries no OVERFLOW (only a "
	      "RESULT does; an ACK's flags are CONGESTED at most); the RESULT then has it");
	for (unsigned int r = 0; r < 4; r++)
		for (unsigned int i = 0; i < CAIS_P4_ELEMS; i++)
			v[r][i] = (r == 0 || r == 3) ? INT32_MAX - (int32_t)i : (int32_t)(r * i);
	send_data(&S11, 1, 38, 0, 64, v[0], 0);
	send_data(&S11, 1, 38, 3, 64, v[3], 0);
	send_data(&S11, 1, 38, 3, 64, v[3], CAIS_F_RETX);
	send_data(&S11, 1, 38, 1, 64, v[1], 0);
	send_data(&S11, 1, 38, 2, 64, v[2], 0);
	file_end("rounds.txt");
}

/* ---- reject.txt: every REJECT reason and their order ---- */

static void
gen_reject(void)
{
	file_begin("reject.txt", "main.json", "every REJECT reason and the order of the checks");

	vcase("unknown_tensor", "no tensor entry for the triple: REJECT 1 to the sender");
	send_data(&S11, 99, 40, 0, 64, NULL, 0);
	{
		struct sess other = S11;

		other.tenant = 9;
		send_data(&other, 1, 40, 1, 64, NULL, 0);
	}

	vcase("not_member", "wrong source IP, wrong source UDP port, rank >= n, another member's "
			    "rank: REJECT 2");
	{
		size_t len = data(&S11, 1, 41, 0, 64, NULL, 0);
		uint32_t ip = htonl(0x0A00004D); /* 10.0.0.77 */

		memcpy(frame + CAIS_ETH_HLEN + 12, &ip, 4);
		ip_fix(frame);
		vin(0, frame, len);
		len = data(&S11, 1, 41, 0, 64, NULL, 0);
		frame[CAIS_ETH_HLEN + CAIS_IP_HLEN + 1] ^= 0x09; /* UDP source port 40009 */
		vin(0, frame, len);
		len = data(&S11, 1, 41, 3, 64, NULL, 0);
		hdr_of(frame)->rank = 4;
		vin(3, frame, len);
		len = data(&S11, 1, 41, 0, 64, NULL, 0);
		hdr_of(frame)->rank = 1;
		vin(0, frame, len);
	}

	vcase("bad_dtype", "dtype 1 and dtype 255 (no wire type) with int32 values: REJECT 6, "
			   "echoing the DATA's dtype");
	{
		size_t len = data(&S11, 1, 42, 2, 64, NULL, 0);

		hdr_of(frame)->dtype = 1;
		vin(2, frame, len);
		len = data(&S27, 70, 42, 1, 16, NULL, 0);
		hdr_of(frame)->dtype = 0xFF;
		vin(1, frame, len);
	}

	vcase("bad_dtype_block16",
	      "BLOCK16 DATA (E4) to FIXED32 tensors: REJECT 6, echoing dtype 1, also when the "
	      "payload is shorter than count int32 (a whole BLOCK16 payload: 4 + 2 x 64 bytes) "
	      "or than count BLOCK16 elements: dtype is checked before count");
	vin(0, frame, data_b16(&S11, 1, 42, 0, 64, 0));
	vin(1, frame, data_b16(&S11, 2, 42, 1, 33, 0));
	vin(3, frame, data_b16(&S11, 1, 42, 3, 64, 100));
	vin(0, frame, data_b16(&S12, 5, 42, 0, 16, 3));
	vin(1, frame, data_b16(&S11, 4, 42, 1, 1, 0));

	vcase("bad_count", "count 0, count 65 > E = 64, count 17 > the session's E = 16, "
			   "count 8 with 4 values: REJECT 5");
	send_data(&S11, 1, 43, 1, 0, NULL, 0);
	send_data(&S11, 1, 43, 1, 65, NULL, 0);
	send_data(&S27, 70, 43, 1, 17, NULL, 0);
	{
		int32_t four[4] = {1, 2, 3, 4};
		struct cais_fields f;
		struct tf_end src = sender(&S11, 2);
		size_t len;

		cais_data_fields(&f, 1, 1, 1, 43, 8, 2, 8);
		len = tf_cais_frame(frame, &src, &AGG, &f, four, 4);
		vin(2, frame, len);
	}

	vcase("no_slot", "slot index outside the pool (8 of 8; 1 of 1): REJECT 3");
	{
		size_t len = data(&S11, 1, 44, 3, 64, NULL, 0);

		hdr_of(frame)->slot = htons(8);
		vin(3, frame, len);
		len = data(&S12, 5, 44, 0, 16, NULL, 0);
		hdr_of(frame)->slot = htons(1 | CAIS_SET_BIT);
		vin(0, frame, len);
	}

	vcase("check_order", "unknown tensor before dtype; not member before dtype; dtype before "
			     "count; count before slot");
	{
		size_t len = data(&S11, 98, 45, 0, 64, NULL, 0);

		hdr_of(frame)->dtype = 2;
		vin(0, frame, len);
		len = data(&S11, 1, 45, 1, 64, NULL, 0);
		hdr_of(frame)->rank = 7;
		hdr_of(frame)->dtype = 2;
		vin(1, frame, len);
		len = data(&S11, 1, 45, 2, 0, NULL, 0);
		hdr_of(frame)->dtype = 3;
		vin(2, frame, len);
		len = data(&S11, 1, 45, 3, 0, NULL, 0);
		hdr_of(frame)->slot = htons(9);
		vin(3, frame, len);
	}

	vcase("not_member_mac",
	      "E5: a member's IPv4 address and UDP port from another source MAC (h4's, behind "
	      "the same port as rank 1's h1; an unknown one on rank 0's port): REJECT 2 to that "
	      "MAC, the slot untouched");
	{
		static const uint8_t other[6] = {0x02, 0, 0, 0, 0, 0x77};
		size_t len = data(&S11, 1, 46, 1, 64, NULL, 0);

		memcpy(frame + 6, H[4].mac, 6);
		vin(1, frame, len);
		len = data(&S11, 1, 46, 0, 64, NULL, CAIS_F_RETX);
		memcpy(frame + 6, other, 6);
		vin(0, frame, len);
	}

	vcase("not_member_port",
	      "E5: a member's address, UDP port and MAC from another switch port than the one "
	      "its first DATA pinned (rank 0 on port 0 above; rank 3 on port 3): REJECT 2 out "
	      "of the port it came in on");
	{
		size_t len = data(&S11, 1, 46, 0, 64, NULL, 0);

		vin(2, frame, len);
		len = data(&S11, 1, 46, 3, 64, NULL, 0);
		vin(1, frame, len);
	}

	vcase("switch_port_bound",
	      "E5: session 2/7's members are bound by session.add's switch_port (3, 1, 2): DATA "
	      "of rank 0 from port 0 and of rank 2 from port 1, before any DATA of theirs on "
	      "their own ports: REJECT 2");
	{
		size_t len = data(&S27, 70, 46, 0, 16, NULL, 0);

		vin(0, frame, len);
		len = data(&S27, 70, 46, 2, 16, NULL, 0);
		vin(1, frame, len);
	}

	vcase("reject_fields",
	      "a REJECT echoes tenant, session, tensor, seq and slot (set bit too), "
	      "clears RETX, has canonical IP headers");
	{
		size_t len = data(&S11, 97, 0x89ABCDEFu, 2, 64, NULL, CAIS_F_RETX);
		uint8_t *ip = frame + CAIS_ETH_HLEN;

		ip[1] = 0x10;
		ip[5] = 0x77;
		ip[8] = 3;
		ip_fix(frame);
		memset(frame + len, 0x5A, 6);
		vin(2, frame, len + 6);
	}

	vcase("state_untouched", "after every REJECT above, a round completes as usual");
	round_all(&S11, 1, 41, 64);
	round_all(&S11, 1, 42, 64);
	round_all(&S11, 1, 43, 64);
	round_all(&S11, 1, 46, 64);
	round_all(&S27, 70, 46, 16);
	file_end("reject.txt");
}

/* ---- malformed.txt: frames to the aggregator that are dropped, never answered ---- */

static void
ip_frame(size_t *len, uint32_t seq)
{
	*len = data(&S11, 1, seq, 0, 4, NULL, 0);
}

static void
gen_malformed(void)
{
	uint8_t *ip = frame + CAIS_ETH_HLEN, *udp = ip + CAIS_IP_HLEN;
	size_t len;

	file_begin("malformed.txt", "main.json", "malformed input: dropped, no output");

	vcase("bad_source_mac", "multicast and all-zero source MACs");
	ip_frame(&len, 50);
	frame[6] = 0x03;
	vin(0, frame, len);
	ip_frame(&len, 50);
	memset(frame + 6, 0, 6);
	vin(0, frame, len);

	vcase("to_agg_not_ip", "to the aggregator MAC: VLAN-tagged, IPv6 ethertype");
	ip_frame(&len, 50);
	memmove(frame + 16, frame + 12, len - 12);
	frame[12] = 0x81;
	frame[13] = 0x00;
	frame[14] = 0x00;
	frame[15] = 0x05;
	vin(0, frame, len + 4);
	ip_frame(&len, 50);
	frame[12] = 0x86;
	frame[13] = 0xDD;
	vin(0, frame, len);

	vcase("arp_to_agg_other", "ARP to the aggregator MAC: a reply; a request for another "
				  "address; a request whose sender MAC is not the frame's");
	len = tf_arp_request(frame, &H[0], AGG.ip);
	memcpy(frame, AGG.mac, 6);
	frame[CAIS_ETH_HLEN + 7] = 2;
	vin(0, frame, len);
	len = tf_arp_request(frame, &H[0], H[1].ip);
	memcpy(frame, AGG.mac, 6);
	vin(0, frame, len);
	len = tf_arp_request(frame, &H[0], AGG.ip);
	memcpy(frame, AGG.mac, 6);
	frame[CAIS_ETH_HLEN + 13] ^= 0x40;
	vin(0, frame, len);

	vcase("ip_header", "IPv4 truncated, version 6, IHL 4, IHL 6 (options), total length "
			   "past the frame and below 20, bad checksum, another destination, "
			   "fragments (MF, offset), not UDP");
	ip_frame(&len, 51);
	vin(0, frame, CAIS_ETH_HLEN + 10);
	ip_frame(&len, 51);
	ip[0] = 0x65;
	ip_fix(frame);
	vin(0, frame, len);
	ip_frame(&len, 51);
	ip[0] = 0x44;
	ip_fix(frame);
	vin(0, frame, len);
	ip_frame(&len, 51);
	ip[0] = 0x46;
	ip_fix(frame);
	vin(0, frame, len);
	ip_frame(&len, 51);
	ip[3] = (uint8_t)(ip[3] + 1);
	ip_fix(frame);
	vin(0, frame, len);
	ip_frame(&len, 51);
	ip[2] = 0;
	ip[3] = 19;
	ip_fix(frame);
	vin(0, frame, len);
	ip_frame(&len, 51);
	ip[11] ^= 0x01;
	vin(0, frame, len);
	ip_frame(&len, 51);
	ip[19] = 0x63;
	ip_fix(frame);
	vin(0, frame, len);
	ip_frame(&len, 51);
	ip[6] = 0x20;
	ip_fix(frame);
	vin(0, frame, len);
	ip_frame(&len, 51);
	ip[7] = 0x01;
	ip_fix(frame);
	vin(0, frame, len);
	ip_frame(&len, 51);
	ip[9] = 6;
	ip_fix(frame);
	vin(0, frame, len);

	vcase("udp_header", "UDP length below 8 and past the IPv4 length, another port of the "
			    "aggregator");
	ip_frame(&len, 52);
	udp[4] = 0;
	udp[5] = 7;
	vin(0, frame, len);
	ip_frame(&len, 52);
	udp[5] = (uint8_t)(udp[5] + 1);
	vin(0, frame, len);
	ip_frame(&len, 52);
	udp[3] ^= 0x01;
	vin(0, frame, len);

	vcase("cais_header", "UDP payload shorter than 24 bytes; bad magic; version 2; types 0, 4 "
			     "and 15; a reserved flag; RESULT and REJECT to the switch");
	{
		struct tf_end src = sender(&S11, 0);
		uint8_t short_payload[10] = {0xCA, 0x15, 0x11};

		tf_udp_headers(frame, &src, &AGG, sizeof(short_payload));
		memcpy(frame + CAIS_FRAME_HDR_OFF, short_payload, sizeof(short_payload));
		vin(0, frame, CAIS_FRAME_HDR_OFF + sizeof(short_payload));
	}
	ip_frame(&len, 53);
	frame[CAIS_FRAME_HDR_OFF] = 0xCB;
	vin(0, frame, len);
	{
		static const uint8_t vt[] = {0x21, 0x10, 0x14, 0x1F};

		for (unsigned int k = 0; k < sizeof(vt); k++) {
			ip_frame(&len, 53);
			hdr_of(frame)->ver_type = vt[k];
			vin(0, frame, len);
		}
	}
	ip_frame(&len, 53);
	hdr_of(frame)->flags = 0x10;
	vin(0, frame, len);
	ip_frame(&len, 53);
	hdr_of(frame)->ver_type = 0x12;
	vin(0, frame, len);
	ip_frame(&len, 53);
	hdr_of(frame)->ver_type = 0x13;
	vin(0, frame, len);

	vcase("still_works", "after all of the above, a round completes as usual");
	round_all(&S11, 1, 50, 4);
	file_end("malformed.txt");
}

/* ---- arp_l2.txt: ARP for the aggregator and ordinary L2 traffic ---- */

static void
gen_arp_l2(void)
{
	uint8_t *ip = frame + CAIS_ETH_HLEN;
	size_t len;

	file_begin("arp_l2.txt", "main.json", "ARP replies for the aggregator, L2 forwarding");

	vcase("arp_reply", "ARP requests for the aggregator address (broadcast, 42 bytes and "
			   "60 bytes zero-padded; unicast to the aggregator MAC): a 60-byte reply");
	len = tf_arp_request(frame, &H[1], AGG.ip);
	vin(1, frame, len);
	memset(frame + len, 0, 60 - len);
	vin(1, frame, 60);
	len = tf_arp_request(frame, &H[2], AGG.ip);
	memcpy(frame, AGG.mac, 6);
	vin(2, frame, len);

	vcase("arp_reply_padding", "a request with non-zero padding, and a 64-byte one: the reply "
				   "is zero-padded to 60 bytes");
	len = tf_arp_request(frame, &H[3], AGG.ip);
	memset(frame + len, 0xEE, 22);
	vin(3, frame, 60);
	vin(3, frame, 64);

	vcase("arp_other", "broadcast ARP for another address, and for the aggregator with a "
			   "sender MAC that is not the frame's: ordinary traffic, flooded");
	len = tf_arp_request(frame, &H[0], H[2].ip);
	vin(0, frame, len);
	len = tf_arp_request(frame, &H[0], AGG.ip);
	frame[CAIS_ETH_HLEN + 13] ^= 0x40;
	vin(0, frame, len);

	vcase("agg_guards",
	      "E5: the aggregator's addresses are the switch's: gratuitous ARP for the aggregator "
	      "address (broadcast request, broadcast and unicast replies), a request for it whose "
	      "sender address is it, frames from the aggregator MAC (broadcast, unicast IPv4), "
	      "IPv4 from the aggregator address (a forged RESULT to h1, a DATA-like one to the "
	      "aggregator, broadcast): all dropped, never forwarded");
	{
		struct tf_end forger = H[0], victim = H[1];
		struct cais_fields f;
		int32_t four[4] = {7, 7, 7, 7};

		len = tf_arp_request(frame, &H[0], AGG.ip);
		memcpy(frame + CAIS_ETH_HLEN + 14, &AGG.ip, 4);
		vin(0, frame, len);
		frame[CAIS_ETH_HLEN + 7] = 2;
		vin(0, frame, len);
		memcpy(frame, H[1].mac, 6);
		memcpy(frame + CAIS_ETH_HLEN + 18, H[1].mac, 6);
		memcpy(frame + CAIS_ETH_HLEN + 24, &H[1].ip, 4);
		vin(0, frame, len);
		len = tf_arp_request(frame, &H[2], AGG.ip);
		memcpy(frame, AGG.mac, 6);
		memcpy(frame + CAIS_ETH_HLEN + 14, &AGG.ip, 4);
		vin(2, frame, len);
		len = learn_frame(frame, AGG.mac);
		vin(3, frame, len);
		forger.ip = H[0].ip;
		forger.port = 5000;
		victim.port = 6000;
		memcpy(forger.mac, AGG.mac, 6);
		tf_udp_headers(frame, &forger, &victim, 20);
		memset(frame + CAIS_FRAME_HDR_OFF, 0x42, 20);
		vin(0, frame, CAIS_FRAME_HDR_OFF + 20);
		/* a RESULT in the aggregator's name, from h0's MAC */
		forger = AGG;
		memcpy(forger.mac, H[0].mac, 6);
		victim = sender(&S11, 1);
		cais_data_fields(&f, 1, 1, 1, 60, 8, 1, 4);
		len = tf_cais_frame(frame, &forger, &victim, &f, four, 4);
		hdr_of(frame)->ver_type = (uint8_t)(CAIS_VERSION << 4 | CAIS_TYPE_RESULT);
		hdr_of(frame)->rank = CAIS_RANK_NONE;
		vin(0, frame, len);
		len = tf_cais_frame(frame, &forger, &AGG, &f, four, 4);
		vin(0, frame, len);
		memcpy(victim.mac, MAC_BCAST, 6);
		victim.ip = htonl(0xFFFFFFFFu);
		len = tf_cais_frame(frame, &forger, &victim, &f, four, 4);
		vin(0, frame, len);
	}

	vcase("arp_after_guards", "ARP for the aggregator is still answered");
	len = tf_arp_request(frame, &H[1], AGG.ip);
	vin(1, frame, len);

	vcase("l2_unicast", "to a known station on another port: forwarded unchanged");
	{
		struct tf_end a = H[0], b = H[2];
		struct cais_fields f;
		int32_t four[4] = {1, -2, 3, -4};

		a.port = 5000;
		b.port = 6000;
		tf_udp_headers(frame, &a, &b, 20);
		memset(frame + CAIS_FRAME_HDR_OFF, 0x42, 20);
		vin(0, frame, CAIS_FRAME_HDR_OFF + 20);
		/* UDP to port 51733 of another address, a valid DATA at that: L2 traffic */
		cais_data_fields(&f, 1, 1, 1, 60, 8, 0, 4);
		b.port = CAIS_UDP_PORT;
		len = tf_cais_frame(frame, &a, &b, &f, four, 4);
		vin(0, frame, len);
		/* a bad IPv4 checksum and IPv4 options are not the switch's business */
		len = tf_cais_frame(frame, &a, &b, &f, four, 4);
		ip[10] ^= 0xFF;
		vin(0, frame, len);
		len = tf_cais_frame(frame, &a, &b, &f, four, 4);
		ip[0] = 0x46;
		vin(0, frame, len);
		/* VLAN-tagged */
		len = tf_cais_frame(frame, &a, &b, &f, four, 4);
		memmove(frame + 16, frame + 12, len - 12);
		frame[12] = 0x81;
		frame[13] = 0x00;
		frame[14] = 0x00;
		frame[15] = 0x07;
		vin(0, frame, len + 4);
		/* h4 -> h3 */
		len = tf_arp_request(frame, &H[4], H[3].ip);
		memcpy(frame, H[3].mac, 6);
		frame[CAIS_ETH_HLEN + 7] = 2;
		vin(1, frame, len);
	}

	vcase("l2_flood", "broadcast and an unknown unicast MAC: to every other port");
	len = tf_arp_request(frame, &H[3], H[1].ip);
	vin(3, frame, len);
	len = tf_arp_request(frame, &H[1], H[0].ip);
	memcpy(frame, MAC_NOWHERE, 6);
	vin(1, frame, len);

	vcase("l2_same_port", "h1 -> h4, both behind port 1: dropped");
	len = tf_arp_request(frame, &H[1], H[4].ip);
	memcpy(frame, H[4].mac, 6);
	vin(1, frame, len);
	file_end("arp_l2.txt");
}

/* ---- fwd_only.txt: forward-only (safe) mode ---- */

static void
gen_fwd_only(void)
{
	size_t len;

	file_begin("fwd_only.txt", "fwd_only.json", "forward-only mode");

	vcase("reject_fwd_only", "every DATA gets REJECT 4 with the FWD_ONLY flag, before any "
				 "other check");
	send_data(&S11, 1, 0, 0, 64, NULL, 0);
	send_data(&S11, 99, 0, 1, 64, NULL, 0);
	send_data(&S11, 1, 0, 2, 0, NULL, CAIS_F_RETX);

	vcase("still_forwarding", "ARP for the aggregator is answered, L2 traffic forwarded");
	len = tf_arp_request(frame, &H[0], AGG.ip);
	vin(0, frame, len);
	len = tf_arp_request(frame, &H[0], H[3].ip);
	memcpy(frame, H[3].mac, 6);
	frame[CAIS_ETH_HLEN + 7] = 2;
	vin(0, frame, len);
	file_end("fwd_only.txt");
}

static void
usage(FILE *f)
{
	fprintf(f, "Usage: gen_vectors --out DIR\n"
		   "Write the CAIS parity vectors (*.txt) and their configs (*.json) into DIR,\n"
		   "made by the cais-switch pipeline. See tests/parity/gen_vectors.c.\n");
}

int
main(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc != 3 || strcmp(argv[1], "--out") != 0) {
		usage(stderr);
		return 2;
	}
	V.dir = argv[2];
	if (mkdir(V.dir, 0755) != 0 && errno != EEXIST)
		die(V.dir);
	tenv_addrs(&AGG, H, N_HOSTS);
	write_config("main.json", false);
	write_config("fwd_only.json", true);
	gen_rounds();
	gen_reject();
	gen_malformed();
	gen_arp_l2();
	gen_fwd_only();
	printf("gen_vectors: %u files in %s\n", V.n_files, V.dir);
	return 0;
}
