/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_pipeline: the switch's pipeline on one lcore, without the kernel.
 *
 * Synthetic n-worker DATA streams: pre-built mbufs of every rank's chunks,
 * seq after seq, run through dp_lcore_input() + dp_lcore_flush() exactly as
 * the poll loop does (RESULT generation included: one payload, n headers);
 * the TX hook frees what the switch sends, as a PMD does after transmission.
 * Refilling the mbufs between batches is not timed (a NIC writes them).
 * In the same run, two baselines on the same packets:
 *   io      plain forwarding: the burst goes straight to the TX hook
 *   kernel  the bare register action: each payload added into a 64-bit
 *           accumulator array as large as the session's slot arrays (the
 *           memory-bound limit of one core for this work); for BLOCK16,
 *           whose RESULT takes a search for each block's exponent, each
 *           round's RESULT payload stored as well
 * for each wire dtype asked for (the tensor's, and its DATA's: E4); and
 *   open    the pipeline with the guards of docs/PROTOCOL.md E5 off (the
 *           aggregator's addresses, member binding): what they cost per packet
 *           is the difference;
 *   copies  the pipeline with rounds keeping no DATA (dp_config.h DP_KEEP_*,
 *           struct dp_switch no_keep): each DATA freed as it comes, each
 *           RESULT but the completing DATA's a copy from the header pool.
 * Prints a testpmd-like table and writes CSV.
 *
 *   bench_pipeline [--elems 64,256,1024,2048] [--ranks 2,4,8,16] [--seconds S]
 *                  [--wire fixed32,block16] [--csv FILE] [--quick] [--lcores 1,2]
 *
 * --lcores: the scaling table instead (measure_lcores()): the pipeline on k
 * lcores at once, each lcore its share of every batch as RSS would spread the
 * flows (first in its own cache: own_cache()), handoffs between them
 * included; and, between the batches, what k lcores of this machine give
 * work bound by instructions (probe_worker()).
 */
#include <errno.h>
#include <stdatomic.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_mbuf.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "bench_args.h"
#include "dp_ctl.h"
#include "dp_switch.h"
#include "../tests/common/b16.h"
#include "../tests/common/frames.h"

#define BATCH	 4096 /* mbufs prepared per timed batch */
#define SLOTS	 1024 /* the session's pool: rounds in flight in the slot arrays */
#define MAX_LIST 16
#define MAX_PAYLOAD (4 * CAIS_MAX_ELEMS)
#define MAX_LC	 4 /* lcores of the scaling table */

struct tx_count {
	uint64_t pkts, bytes;
	const uint8_t *want; /* the RESULT payload of every round (they add the same packets) */
	size_t plen;
	bool check; /* sample what is sent (the pipeline's RESULTs) */
	uint64_t checked, bad;
	uint8_t pb[MAX_PAYLOAD]; /* a sampled RESULT's payload */
} __rte_cache_aligned;

static uint16_t
tx_free(void *ctx, uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	struct tx_count *t = ctx;

	(void)port;
	(void)queue;
	for (uint16_t i = 0; i < n; i++) {
		t->bytes += pkts[i]->pkt_len;
		if (t->check && ((t->pkts + i) & 1023) == 0) { /* a sample: is it the sum? */
			uint8_t *pb = t->pb;
			struct cais_hdr hb;
			const struct cais_hdr *h =
			    rte_pktmbuf_read(pkts[i], CAIS_FRAME_HDR_OFF, sizeof(hb), &hb);
			const uint8_t *p =
			    rte_pktmbuf_read(pkts[i], CAIS_FRAME_OVERHEAD, (uint32_t)t->plen, pb);

			t->checked++;
			if (!h || !p || cais_hdr_type(h) != CAIS_TYPE_RESULT ||
			    pkts[i]->pkt_len != CAIS_FRAME_OVERHEAD + t->plen ||
			    memcmp(p, t->want, t->plen) != 0)
				t->bad++;
		}
	}
	t->pkts += n;
	rte_pktmbuf_free_bulk(pkts, n);
	return n;
}

/* With several lcores: the TX queue is the lcore's index, each its own counters. */
static uint16_t
tx_free_q(void *ctx, uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return tx_free((struct tx_count *)ctx + queue, port, queue, pkts, n);
}

static struct tf_end agg, host[16];

static void
addresses(void)
{
	static const uint8_t m[6] = {0x02, 0xaa, 0, 0, 0, 0xfe};

	memcpy(agg.mac, m, 6);
	agg.ip = htonl(0x0A0000FE);
	agg.port = CAIS_UDP_PORT;
	for (unsigned int r = 0; r < 16; r++) {
		uint8_t hm[6] = {0x02, 0, 0, 0, 0, (uint8_t)(r + 1)};

		memcpy(host[r].mac, hm, 6);
		host[r].ip = htonl(0x0A000001 + r);
		host[r].port = (uint16_t)(40000 + r);
	}
}

static void
eal(bool huge, unsigned int lcores)
{
	char prefix[64], cores[16];
	char *argv[] = {"bench_pipeline",
			"--no-pci",
			"--no-shconf",
			"--no-telemetry",
			prefix,
			"--log-level=error",
			"-l",
			cores,
			"--no-huge",
			"-m",
			"1536",
			NULL};
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;

	snprintf(prefix, sizeof(prefix), "--file-prefix=cais-bench-%d", (int)getpid());
	snprintf(cores, sizeof(cores), "0-%u", lcores - 1);
	if (huge)
		argc -= 3; /* what the machine has reserved (/proc/sys/vm/nr_hugepages) */
	if (rte_eal_init(argc, argv) < 0) {
		fprintf(stderr, "bench_pipeline: EAL: %s\n", rte_strerror(rte_errno));
		exit(1);
	}
}

struct setup {
	struct dp_switch *sw;
	struct rte_mempool *in;
	struct tx_count tx;
	struct tx_count txq[MAX_LC]; /* with k lcores (measure_lcores()) */
	unsigned int n, e, k;
	int spread; /* enum spread, with k lcores */
	uint8_t wire;		   /* CAIS_DT_* of the tensor and the DATA */
	size_t plen;		   /* DATA and RESULT payload bytes */
	uint8_t want[MAX_PAYLOAD]; /* the RESULT payload */
	uint8_t tmpl[16][CAIS_FRAME_OVERHEAD + MAX_PAYLOAD];
	size_t len;
};

static int
ctl(struct dp_switch *sw, const char *json)
{
	struct ctl_ops ops;
	struct ctl_err err;
	json_t *req = json_loads(json, 0, NULL), *res = NULL;
	int rc;

	dp_switch_ctl_ops(sw, &ops);
	rc = ctl_dispatch(&ops, req, &res, &err);
	if (rc)
		fprintf(stderr, "bench_pipeline: %s: %s\n", json, err.msg);
	json_decref(req);
	json_decref(res);
	return rc;
}

/*
 * Rank r's DATA for tensor 1 (seq and slot are refill()'s) and s->want, the
 * RESULT payload of the round: FIXED32 values r x 1000 + i and their sums;
 * BLOCK16 values of every magnitude, block exponents 0..8, and the model's
 * RESULT (tests/common/b16.h).
 */
static void
templates(struct setup *s)
{
	static int64_t acc[CAIS_MAX_ELEMS];
	uint8_t exps[CAIS_MAX_ELEMS / CAIS_B16_BLOCK];
	int16_t m[CAIS_MAX_ELEMS];
	int32_t v[CAIS_MAX_ELEMS];

	memset(acc, 0, sizeof(acc));
	for (unsigned int r = 0; r < s->n; r++) {
		uint8_t *f = s->tmpl[r];
		struct cais_fields cf;
		bool sat = false;

		cais_data_fields(&cf, 1, 1, 1, 0, SLOTS, (uint8_t)r, (uint16_t)s->e);
		cf.dtype = s->wire;
		for (unsigned int i = 0; i < s->e; i++) {
			v[i] = (int32_t)(r * 1000 + i);
			m[i] = (int16_t)((r * 7919u + i * 31u) % 65535u - 32767);
		}
		for (unsigned int b = 0; b * CAIS_B16_BLOCK < s->e; b++)
			exps[b] = (uint8_t)((b + r) % 9);
		if (s->wire == CAIS_DT_BLOCK16) {
			s->plen = tb16_encode(f + CAIS_FRAME_OVERHEAD, exps, m, s->e);
			tf_udp_headers(f, &host[r], &agg, CAIS_HDR_LEN + s->plen);
			cais_hdr_build((struct cais_hdr *)(f + CAIS_FRAME_HDR_OFF), &cf);
		} else {
			s->plen =
			    tf_cais_frame(f, &host[r], &agg, &cf, v, s->e) - CAIS_FRAME_OVERHEAD;
		}
		for (unsigned int i = 0; i < s->e; i++)
			acc[i] += s->wire == CAIS_DT_BLOCK16
				      ? tb16_elem(f + CAIS_FRAME_OVERHEAD, s->e, i, &sat)
				      : v[i];
	}
	s->len = CAIS_FRAME_OVERHEAD + s->plen;
	if (s->wire == CAIS_DT_BLOCK16) {
		tb16_store(s->want, acc, s->e);
	} else {
		for (unsigned int i = 0; i < s->e; i++) {
			uint32_t w = htonl((uint32_t)(int32_t)acc[i]);

			memcpy(s->want + 4 * i, &w, 4);
		}
	}
	s->tx.want = s->want;
	s->tx.plen = s->plen;
}

static int
setup(struct setup *s, uint8_t wire, unsigned int n, unsigned int e, unsigned int lcores,
      unsigned int id)
{
	struct dp_switch_conf c = {0};
	char name[32], json[4096];
	int k = 0;
	unsigned int lc;

	memset(s, 0, offsetof(struct setup, want));
	s->k = lcores;
	s->n = n;
	s->e = e;
	s->wire = wire;
	snprintf(name, sizeof(name), "b%u", id);
	c.agg_enabled = true;
	c.agg_ip = agg.ip;
	memcpy(c.agg_mac.addr_bytes, agg.mac, 6);
	c.udp_port = CAIS_UDP_PORT;
	c.n_ports = (uint16_t)n;
	c.n_lcores = lcores;
	RTE_LCORE_FOREACH(lc) /* the first ones of -l 0-(k-1) */
		if (k < (int)lcores)
			c.lcore_ids[k++] = lc;
	k = 0;
	c.mbufs = 2048;
	c.hdr_mbufs = 16384;
	c.socket = SOCKET_ID_ANY;
	c.name = name;
	c.tx = lcores > 1 ? tx_free_q : tx_free;
	c.tx_ctx = lcores > 1 ? (void *)s->txq : (void *)&s->tx;
	s->sw = dp_switch_create(&c);
	snprintf(name, sizeof(name), "b%u_in", id);
	s->in = rte_pktmbuf_pool_create(
	    name, 2 * BATCH, 256, 0,
	    (uint16_t)(RTE_PKTMBUF_HEADROOM + CAIS_FRAME_OVERHEAD + MAX_PAYLOAD), SOCKET_ID_ANY);
	if (!s->sw || !s->in) {
		fprintf(stderr, "bench_pipeline: set-up: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	k = snprintf(json, sizeof(json),
		     "{\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":%u,"
		     "\"slots\":%u,\"elems_per_packet\":%u,\"loss_hints\":1,\"members\":[",
		     n, SLOTS, e);
	for (unsigned int r = 0; r < n; r++)
		k += snprintf(json + k, sizeof(json) - (size_t)k,
			      "%s{\"rank\":%u,\"mac\":\"02:00:00:00:00:%02x\",\"ip\":\"10.0.0.%u\","
			      "\"port\":%u}",
			      r ? "," : "", r, r + 1, r + 1, 40000 + r);
	snprintf(json + k, sizeof(json) - (size_t)k, "]}}");
	if (ctl(s->sw, json))
		return -1;
	snprintf(json, sizeof(json),
		 "{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":1,\"tensor\":1,"
		 "\"op\":\"sum\",\"scale\":1024,\"wire\":\"%s\"}}",
		 cais_dtype_name(wire));
	if (ctl(s->sw, json))
		return -1;
	templates(s);
	for (unsigned int q = 0; q < MAX_LC; q++) {
		s->txq[q].want = s->want;
		s->txq[q].plen = s->plen;
		s->txq[q].check = true;
	}
	return 0;
}

static void
teardown(struct setup *s)
{
	dp_switch_free(s->sw);
	rte_mempool_free(s->in);
}

/*
 * --cold: after each refill, the mbufs' first lines and their frames are
 * written back to memory and dropped from every cache (CLFLUSHOPT, or
 * CLFLUSH where the CPU lacks it), where a NIC that writes to memory (no
 * DDIO) leaves what it receives. Without it they sit in the caches of the
 * core that wrote them. Untimed.
 */
static bool cold;

#if defined(__x86_64__)
static void
flush_lines(void *p, size_t len, bool opt)
{
	volatile char *c = p;

	for (size_t off = 0; off < len; off += RTE_CACHE_LINE_SIZE)
		if (opt)
			__asm__ volatile("clflushopt %0" : "+m"(c[off]));
		else
			__asm__ volatile("clflush %0" : "+m"(c[off]));
}

static void
make_cold(struct rte_mbuf **m, unsigned int n)
{
	static int opt = -1; /* CPUID.(EAX=7,ECX=0):EBX bit 23 */
	unsigned int a, b, c, d;

	if (opt < 0)
		opt = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 23 & 1);
	for (unsigned int i = 0; i < n; i++) {
		flush_lines(m[i], sizeof(struct rte_mbuf), opt);
		flush_lines(rte_pktmbuf_mtod(m[i], void *), m[i]->data_len, opt);
	}
	__asm__ volatile("mfence" ::: "memory"); /* every flush done before the timed batch */
}
#endif

/* BATCH mbufs: rounds seq0.. in order, every rank's chunk of a round in a row. */
static void
refill(struct setup *s, struct rte_mbuf **m, uint32_t seq0)
{
	unsigned int rounds = BATCH / s->n;

	if (rte_pktmbuf_alloc_bulk(s->in, m, rounds * s->n) != 0) {
		fprintf(stderr, "bench_pipeline: input pool empty\n");
		exit(1);
	}
	for (unsigned int q = 0; q < rounds; q++)
		for (unsigned int r = 0; r < s->n; r++) {
			struct rte_mbuf *b = m[q * s->n + r];
			uint8_t *p = (uint8_t *)rte_pktmbuf_append(b, (uint16_t)s->len);
			struct cais_hdr *h = (struct cais_hdr *)(p + CAIS_FRAME_HDR_OFF);
			uint32_t seq = seq0 + q;

			memcpy(p, s->tmpl[r], s->len);
			h->seq = htonl(seq);
			h->slot = htons(cais_slot_field(seq, SLOTS));
			b->port = (uint16_t)r;
		}
#if defined(__x86_64__)
	if (cold)
		make_cold(m, rounds * s->n);
#endif
}

enum mode { M_PIPELINE, M_IO, M_KERNEL, M_OPEN, M_COPIES, M_COUNT };

/* The modes' names, as --only takes them. */
static const char *const mode_names[M_COUNT] = {"pipeline", "io", "kernel", "open", "copies"};

/* The modes that run the switch's pipeline (and so send RESULTs). */
static inline bool
runs_pipeline(enum mode md)
{
	return md == M_PIPELINE || md == M_OPEN || md == M_COPIES;
}

struct result {
	double mpps; /* DATA packets per second, millions */
	double gbps; /* DATA payload per second, Gb/s */
	uint64_t pkts;
	uint64_t results;      /* RESULT copies sent (pipeline) */
	uint64_t checked, bad; /* sampled RESULTs, and those not the right sum */
};

static int64_t
    acc_store[SLOTS * 2 * CAIS_MAX_ELEMS]; /* laid out as the switch's: (slot, set) x elems */

/*
 * The kernel baseline on a batch of rounds from seq: each payload into its
 * round's accumulator; for BLOCK16 each round's RESULT payload stored too,
 * into its last packet, where the pipeline writes it. With --cold it
 * prefetches the mbufs and frames ahead as the RX loop does
 * (dp_lcore_input()), which from memory makes it faster (in the caches,
 * slower): the baseline is the faster kernel of each placement.
 */
static void
kernel_batch(const struct setup *s, struct rte_mbuf **m, unsigned int per, uint32_t seq)
{
	const struct dp_agg_ops *k = dp_agg_best()->wire[s->wire];
	bool store = s->wire == CAIS_DT_BLOCK16;

	if (cold)
		dp_lcore_prefetch_first(m, per);
	for (unsigned int i = 0; i < per; i++) {
		uint8_t *p = rte_pktmbuf_mtod(m[i], uint8_t *) + CAIS_FRAME_OVERHEAD;
		uint32_t q = seq + i / s->n;
		int64_t *acc = acc_store + ((q % SLOTS) * 2 + (q / SLOTS) % 2) * s->e;

		if (cold)
			dp_lcore_prefetch_ahead(m, i, per);
		if (i % s->n == 0)
			k->load(acc, p, s->e);
		else
			k->sum(acc, p, s->e);
		if (store && i % s->n == s->n - 1)
			k->store(p, acc, s->e);
	}
}

/* One timed batch of BATCH packets in one mode; @return its TSC cycles. */
static uint64_t
batch(struct setup *s, enum mode mode, uint32_t *seq)
{
	struct rte_mbuf *m[BATCH];
	struct dp_lcore *lc = &s->sw->lcores[0];
	unsigned int per = (BATCH / s->n) * s->n;
	uint64_t t0, dt;

	refill(s, m, *seq);
	s->sw->pcfg.unguarded = mode == M_OPEN;
	s->sw->no_keep = mode == M_COPIES;
	dp_lcore_keep_check(lc);
	t0 = rte_rdtsc();
	if (runs_pipeline(mode)) {
		for (unsigned int i = 0; i < per; i += DP_BURST) {
			uint16_t nb = (uint16_t)(per - i < DP_BURST ? per - i : DP_BURST);

			dp_lcore_input(lc, m + i, nb);
			dp_lcore_flush(lc);
		}
	} else if (mode == M_IO) {
		for (unsigned int i = 0; i < per; i += DP_BURST) {
			uint16_t nb = (uint16_t)(per - i < DP_BURST ? per - i : DP_BURST);

			tx_free(&s->tx, 0, 0, m + i, nb);
		}
	} else {
		kernel_batch(s, m, per, *seq);
	}
	dt = rte_rdtsc() - t0;
	s->sw->pcfg.unguarded = false;
	if (mode == M_KERNEL)
		rte_pktmbuf_free_bulk(m, per); /* not timed: the kernel has no packets */
	*seq += per / s->n;
	return dt;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

#define MAX_BATCHES 8192

/*
 * The modes in want[], batch after batch in turn (so that whatever else the
 * machine does slows them alike), until each has run for `seconds`; a mode's
 * rate is the median batch's (robust to preemption).
 */
static void
run(struct setup *s, const bool want[M_COUNT], double seconds, struct result out[M_COUNT])
{
	static uint32_t seq = 1; /* continues across runs: the slots never see an old seq */
	static uint64_t samples[M_COUNT][MAX_BATCHES];
	unsigned int nb[M_COUNT] = {0}, per = (BATCH / s->n) * s->n;
	uint64_t spent[M_COUNT] = {0}, budget = (uint64_t)(seconds * (double)rte_get_tsc_hz());
	bool more = true;

	memset(out, 0, M_COUNT * sizeof(*out));
	s->tx.checked = s->tx.bad = 0;
	while (more) {
		more = false;
		for (int md = 0; md < M_COUNT; md++) {
			uint64_t tx0 = s->tx.pkts, dt;

			if (!want[md] || spent[md] >= budget || nb[md] == MAX_BATCHES)
				continue;
			s->tx.check = md == M_PIPELINE;
			dt = batch(s, (enum mode)md, &seq);
			spent[md] += dt;
			samples[md][nb[md]++] = dt;
			out[md].pkts += per;
			if (runs_pipeline((enum mode)md))
				out[md].results += s->tx.pkts - tx0;
			more = true;
		}
	}
	for (int md = 0; md < M_COUNT; md++) {
		if (!nb[md])
			continue;
		qsort(samples[md], nb[md], sizeof(uint64_t), cmp_u64);
		out[md].mpps = (double)per /
			       ((double)samples[md][nb[md] / 2] / (double)rte_get_tsc_hz()) / 1e6;
		out[md].gbps = out[md].mpps * 1e6 * (double)s->plen * 8 / 1e9;
	}
	out[M_PIPELINE].checked = s->tx.checked;
	out[M_PIPELINE].bad = s->tx.bad;
}

static void
usage(void)
{
	printf("Usage: bench_pipeline [--elems LIST] [--ranks LIST] [--wire LIST] [--seconds S]\n"
	       "                      [--csv FILE] [--quick] [--lcores 1,2] [--cold]\n"
	       "The switch's pipeline on one lcore (dp_lcore_input + flush, RESULT generation\n"
	       "included) against plain forwarding of the same packets and the bare add kernel\n"
	       "(the memory-bound limit; for BLOCK16 with each round's RESULT stored): Mpps,\n"
	       "payload Gb/s and pipeline/kernel for every wire dtype x elements-per-packet x\n"
	       "ranks. Defaults: --wire fixed32 --elems 64,256,1024,2048 --ranks 2,4,8,16\n"
	       "--seconds 0.15; --wire fixed32,block16 measures both; --quick: 256,2048 x 4\n"
	       "for 0.02 s (a smoke run).\n"
	       "--only pipeline|io|kernel|open|copies runs that mode alone, its warm-up too\n"
	       "(to profile it: perf record, valgrind --tool=callgrind).\n"
	       "--huge: DPDK memory in the hugepages the machine has reserved (default:\n"
	       "--no-huge, as CI runs; 4 KiB pages cost the pipeline TLB misses).\n"
	       "--cold: the packets flushed from the caches to memory before each batch, as\n"
	       "a NIC without DDIO leaves them (default: in the caches of the core that\n"
	       "wrote them; a NIC with DDIO leaves them in the shared cache). x86 only.\n"
	       "--lcores 1,2: instead, the scaling table: the pipeline on each k lcores of\n"
	       "the list (it starts with 1, at most the CPUs), traffic spread as RSS would by\n"
	       "flow, with aligned flows (E7) and with one flow per rank (handoffs), each\n"
	       "lcore's share in its own cache (as its RX queue leaves it; --cold: in\n"
	       "memory); beside it the machine's own scaling, an integer loop on k lcores\n"
	       "against one.\n");
}

/* "fixed32,block16" into out[]; @return the count; exit(2) on a bad list. */
static unsigned int
parse_wires(const char *list, uint8_t *out, unsigned int max)
{
	char buf[256], *save = NULL, *tok;
	unsigned int n = 0;

	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int dt = cais_dtype_parse(tok);

		if (dt < 0 || n == max) {
			fprintf(stderr, "bench_pipeline: --wire '%s': fixed32 and/or block16\n",
				list);
			exit(2);
		}
		out[n++] = (uint8_t)dt;
	}
	if (!n) {
		fprintf(stderr, "bench_pipeline: --wire: at least one of fixed32, block16\n");
		exit(2);
	}
	return n;
}

/* What main() asks of measure(). */
struct plan {
	double seconds;
	int only; /* a mode alone, or -1 */
	FILE *csv;
};

/*
 * One wire dtype x ranks x elements: its own switch, warmed, then every mode
 * interleaved; a line of the table (and the CSV). @return 0, or 1 when the
 * pipeline's output was wrong
 */
static int
measure(const struct plan *pl, uint8_t wire, unsigned int n, unsigned int e, unsigned int id)
{
	static const bool all[M_COUNT] = {true, true, true, true, true},
			  warm[M_COUNT] = {true, false, true, false, true};
	struct setup *s = calloc(1, sizeof(*s));
	struct result p, io, kr, op, cp, res[M_COUNT];
	double guard;
	const char *wn = cais_dtype_name(wire);

	if (!s || setup(s, wire, n, e, 1, id) != 0)
		return 1;
	if (pl->only >= 0) { /* one mode alone, warm-up too: a profile sees nothing else */
		bool one[M_COUNT] = {false};

		one[pl->only] = true;
		run(s, one, pl->seconds / 4, res);
		run(s, one, pl->seconds, res);
		printf("  %7s %5u %5u | %s %.2f Mpps\n", wn, e, n, mode_names[pl->only],
		       res[pl->only].mpps);
		teardown(s);
		free(s);
		return 0;
	}
	/* warm: every slot's accumulator faulted in, MAC table, caches */
	run(s, warm, pl->seconds / 4, res);
	run(s, all, pl->seconds, res);
	p = res[M_PIPELINE];
	io = res[M_IO];
	kr = res[M_KERNEL];
	op = res[M_OPEN];
	cp = res[M_COPIES];
	guard = 1 - p.mpps / op.mpps; /* the share of a packet's time the guards take */
	printf("  %7s %5u %5u | %9.2f %9.1f | %9.2f | %9.2f %9.1f | %8.2f %8.2f | %6.1f%% %6.1f "
	       "| %9.2f %8.2f\n",
	       wn, e, n, p.mpps, p.gbps, io.mpps, kr.mpps, kr.gbps, p.mpps / kr.mpps,
	       p.mpps / io.mpps, 100 * guard, 1e3 / p.mpps - 1e3 / op.mpps, cp.mpps,
	       p.mpps / cp.mpps);
	if (pl->csv)
		fprintf(pl->csv,
			"%u,%u,%.4f,%.3f,%.4f,%.4f,%.3f,%.4f,%.4f,%.3f,%s,%.4f,%.4f,%.4f\n", e, n,
			p.mpps, p.gbps, io.mpps, kr.mpps, kr.gbps, p.mpps / kr.mpps,
			p.mpps / io.mpps, (double)p.results / ((double)p.pkts / n), wn, op.mpps,
			guard, cp.mpps);
	fflush(stdout);
	teardown(s);
	free(s);
	if (p.results != p.pkts || cp.results != cp.pkts || p.bad || !p.checked) {
		fprintf(stderr,
			"bench_pipeline: wrong output: %" PRIu64 " RESULTs for %" PRIu64
			" DATA (want equal; copies: %" PRIu64 " for %" PRIu64 "), %" PRIu64
			" of %" PRIu64 " sampled RESULTs not the expected payload\n",
			p.results, p.pkts, cp.results, cp.pkts, p.bad, p.checked);
		return 1;
	}
	return 0;
}

/* ---- several lcores: how the pipeline scales ---- */

/*
 * How packets reach the lcores, as a NIC's RSS would spread them by flow:
 * SPREAD_FLOWS, every rank k flows (PROTOCOL.md E7), flow i carrying the seqs
 * i mod k, so the lcore that receives a packet owns its slot; SPREAD_RANKS,
 * one flow per rank, rank r on lcore r mod k, so most packets are handed to
 * their slot's owner over its ring.
 */
enum spread { SPREAD_FLOWS, SPREAD_RANKS };

struct lc_work {
	struct dp_lcore *lc;
	struct rte_mbuf **pk;
	unsigned int n;
};

static atomic_uint lc_go, lc_ready, lc_finished;
static unsigned int lc_count;
static _Atomic uint64_t lc_end; /* the TSC when the last of them was done */

/* Packets other lcores handed to this one: into the pipeline. @return how many */
static unsigned int
drain(struct dp_lcore *lc)
{
	struct rte_mbuf *pkts[DP_BURST];
	unsigned int n;

	if (!lc->ring)
		return 0;
	n = rte_ring_dequeue_burst(lc->ring, (void **)pkts, DP_BURST, NULL);
	if (n)
		dp_lcore_input_owned(lc, pkts, (uint16_t)n);
	return n;
}

/* A worker's start: ready, then spin until the go (on_lcores()). */
static void
start_line(void)
{
	atomic_fetch_add_explicit(&lc_ready, 1, memory_order_acq_rel);
	while (!atomic_load_explicit(&lc_go, memory_order_acquire))
		rte_pause();
}

/* A worker's end: its TSC into lc_end, if the latest so far. */
static void
finish_line(void)
{
	uint64_t now = rte_rdtsc(), end = atomic_load(&lc_end);

	while (now > end && !atomic_compare_exchange_weak(&lc_end, &end, now))
		;
}

/*
 * Each line of an lcore's share of a batch (its mbufs and frames) written
 * once by that lcore, untimed: its own cache then holds them, as its RX
 * queue's poll would leave them (the PMD writes every mbuf it hands out)
 * and as k = 1's are (refill() runs on lcore 0). Without it, the lcores
 * after the first read lines that lcore 0 wrote and still holds, which no
 * RX queue does, and two lcores gave 0.74-0.85 of the machine's own
 * scaling at E = 64 instead of 0.94-0.98 (bench/README.md "The machine's
 * own scaling"). Not with --cold: there the lines stay in memory.
 */
static void
own_cache(struct rte_mbuf *const *pk, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		volatile uint8_t *mb = (volatile uint8_t *)pk[i];
		volatile uint8_t *d = rte_pktmbuf_mtod(pk[i], volatile uint8_t *);

		for (size_t off = 0; off < sizeof(struct rte_mbuf); off += RTE_CACHE_LINE_SIZE)
			mb[off] = mb[off];
		for (size_t off = 0; off < pk[i]->data_len; off += RTE_CACHE_LINE_SIZE)
			d[off] = d[off];
		d[pk[i]->data_len - 1] = d[pk[i]->data_len - 1]; /* a frame's last line */
	}
}

/*
 * One lcore's share of a batch, as its poll loop runs it (bursts, then the
 * handoffs it got, then the flush); then the handoffs until every lcore is
 * through and its ring is empty. Its share first into its own cache
 * (own_cache()); then it says it is ready and spins until the start, so
 * that a batch's time holds no thread's wake-up (a poll loop never sleeps
 * through a burst).
 */
static int
lc_worker(void *arg)
{
	struct lc_work *w = arg;

	if (!cold)
		own_cache(w->pk, w->n);
	start_line();
	for (unsigned int i = 0; i < w->n; i += DP_BURST) {
		uint16_t nb = (uint16_t)(w->n - i < DP_BURST ? w->n - i : DP_BURST);

		dp_lcore_input(w->lc, w->pk + i, nb);
		drain(w->lc);
		dp_lcore_flush(w->lc);
	}
	atomic_fetch_add_explicit(&lc_finished, 1, memory_order_acq_rel);
	while (atomic_load_explicit(&lc_finished, memory_order_acquire) < lc_count) {
		drain(w->lc);
		dp_lcore_flush(w->lc);
	}
	while (drain(w->lc))
		dp_lcore_flush(w->lc);
	dp_lcore_flush(w->lc);
	finish_line();
	return 0;
}

/*
 * fn(arg[j]) on the first k lcores of -l 0-(k-1) at once, j = 0 on this one
 * (the main lcore), each fn starting with start_line() and ending with
 * finish_line(); @return the TSC cycles from the start to the last one done
 */
static uint64_t
on_lcores(unsigned int k, lcore_function_t *fn, void *const *arg)
{
	unsigned int j = 0, lc;
	uint64_t t0;

	lc_count = k;
	atomic_store(&lc_go, 0);
	atomic_store(&lc_ready, 0);
	atomic_store(&lc_finished, 0);
	atomic_store(&lc_end, 0);
	RTE_LCORE_FOREACH_WORKER (lc) {
		if (++j >= k)
			break;
		if (rte_eal_remote_launch(fn, arg[j], lc) != 0) {
			fprintf(stderr, "bench_pipeline: lcore %u busy\n", lc);
			exit(1);
		}
	}
	while (atomic_load_explicit(&lc_ready, memory_order_acquire) < k - 1)
		rte_pause(); /* the other lcores spin at the start */
	t0 = rte_rdtsc();
	atomic_store_explicit(&lc_go, 1, memory_order_release);
	fn(arg[0]);
	rte_eal_mp_wait_lcore();
	return atomic_load(&lc_end) - t0;
}

/* One batch over s->k lcores; @return the TSC cycles from the start to the last lcore done */
static uint64_t
batch_lcores(struct setup *s, enum spread sp, uint32_t *seq)
{
	static struct rte_mbuf *m[BATCH], *part[MAX_LC][BATCH];
	struct lc_work w[MAX_LC];
	void *arg[MAX_LC];
	unsigned int per = (BATCH / s->n) * s->n, j;
	uint64_t dt;

	refill(s, m, *seq);
	for (j = 0; j < s->k; j++) {
		/* s->sw->lcores[j] is lcore j of -l 0-(k-1) (setup()), where on_lcores() runs it */
		w[j] = (struct lc_work){.lc = &s->sw->lcores[j], .pk = part[j]};
		arg[j] = &w[j];
	}
	for (unsigned int i = 0; i < per; i++) {
		uint32_t q = *seq + i / s->n;

		j = sp == SPREAD_FLOWS ? q % s->k : (i % s->n) % s->k;
		w[j].pk[w[j].n++] = m[i];
	}
	dt = on_lcores(s->k, lc_worker, arg);
	*seq += per / s->n;
	return dt;
}

/*
 * The machine's own scaling, beside the pipeline's (issue 16 goal 1): two
 * vCPUs of a VM may be two cores, or two hardware threads of one core
 * that the host shares out, and which they are can change from one moment
 * to the next. So the same integer work, eight independent chains of adds,
 * shifts and xors in registers (no memory), runs on k lcores at once
 * between the batches; k times its time on one lcore over its time on k is
 * what k lcores of this machine give work bound by instructions, as the
 * pipeline is at E = 64 (bench/README.md "Instructions per DATA").
 */
#define PROBE_ITERS 65536 /* about a batch's time: 0.1-0.3 ms */

static int
probe_worker(void *arg)
{
	uint64_t *sink = arg;
	uint64_t a = (uintptr_t)sink, b = a * 3, c = a * 5, d = a * 7, e = a * 11, f = a * 13,
		 g = a * 17, h = a * 19;

	start_line();
	for (unsigned int i = 0; i < PROBE_ITERS; i++) {
		a += b ^ (a >> 3);
		b += c ^ (b << 5);
		c += d ^ (c >> 7);
		d += e ^ (d << 3);
		e += f ^ (e >> 5);
		f += g ^ (f << 7);
		g += h ^ (g >> 3);
		h += a ^ (h << 5);
		/* kept in registers, each step done: no vectorizing or folding */
		__asm__ volatile(""
				 : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f), "+r"(g),
				   "+r"(h));
	}
	*sink = a ^ b ^ c ^ d ^ e ^ f ^ g ^ h;
	finish_line();
	return 0;
}

/* The probe on k lcores at once; @return the TSC cycles to the last one done */
static uint64_t
probe_lcores(unsigned int k)
{
	uint64_t sink[MAX_LC];
	void *arg[MAX_LC];

	for (unsigned int j = 0; j < k; j++)
		arg[j] = &sink[j];
	return on_lcores(k, probe_worker, arg);
}

/*
 * The scaling table: for each wire x elems x ranks, the pipeline on 1..K
 * lcores with both spreads, batch after batch in turn, and after each round
 * of batches the probe on each k; Mpps (median batch), the ratio to one
 * lcore, the probe's (the machine's), and the share of packets handed over.
 */
static int
measure_lcores(const struct plan *pl, uint8_t wire, unsigned int n, unsigned int e,
	       const unsigned int *ks, unsigned int nk, unsigned int *id)
{
	static uint64_t samples[2 * MAX_LIST][MAX_BATCHES], probes[MAX_LIST][MAX_BATCHES];
	static uint32_t seq = 1;
	struct setup *s[2 * MAX_LIST];
	unsigned int nb[2 * MAX_LIST] = {0}, nc = 0, np = 0, per = (BATCH / n) * n;
	uint64_t spent[2 * MAX_LIST] = {0}, budget = (uint64_t)(pl->seconds * (double)rte_get_tsc_hz());
	double one = 0, cpu[MAX_LIST];
	bool more = true;
	int rc = 0;

	for (unsigned int a = 0; a < nk; a++)
		for (int sp = 0; sp < (ks[a] > 1 ? 2 : 1); sp++) {
			s[nc] = calloc(1, sizeof(struct setup));
			if (!s[nc] || setup(s[nc], wire, n, e, ks[a], (*id)++) != 0)
				return 1;
			s[nc]->spread = sp;
			s[nc]->tx.check = true;
			nc++;
		}
	while (more) {
		more = false;
		for (unsigned int c = 0; c < nc; c++) {
			uint64_t dt;

			if (spent[c] >= budget || nb[c] == MAX_BATCHES)
				continue;
			dt = batch_lcores(s[c], (enum spread)s[c]->spread, &seq);
			spent[c] += dt;
			samples[c][nb[c]++] = dt;
			more = true;
		}
		if (more && np < MAX_BATCHES) {
			for (unsigned int a = 0; a < nk; a++)
				probes[a][np] = probe_lcores(ks[a]);
			np++;
		}
	}
	for (unsigned int a = 0; a < nk; a++) { /* ks[0] is 1: probes[0] sorted first */
		qsort(probes[a], np, sizeof(uint64_t), cmp_u64);
		cpu[a] = (double)ks[a] * (double)probes[0][np / 2] / (double)probes[a][np / 2];
	}
	for (unsigned int c = 0; c < nc; c++) {
		struct dp_lcore_counters sum = {0};
		uint64_t res = 0, bad = 0, checked = 0;
		double mpps, cpu_k = 1;
		const char *spread;

		qsort(samples[c], nb[c], sizeof(uint64_t), cmp_u64);
		mpps = (double)per / ((double)samples[c][nb[c] / 2] / (double)rte_get_tsc_hz()) / 1e6;
		if (s[c]->k == 1)
			one = mpps;
		for (unsigned int a = 0; a < nk; a++)
			if (ks[a] == s[c]->k)
				cpu_k = cpu[a];
		for (unsigned int q = 0; q < s[c]->k; q++) {
			const struct tx_count *t = s[c]->k > 1 ? &s[c]->txq[q] : &s[c]->tx;

			res += t->pkts;
			bad += t->bad;
			checked += t->checked;
			sum.handoffs += s[c]->sw->lcores[q].c.handoffs;
			sum.data_rx += s[c]->sw->lcores[q].c.data_rx;
		}
		spread = s[c]->k == 1 ? "-" : s[c]->spread == SPREAD_RANKS ? "ranks" : "flows";
		printf("  %7s %5u %5u | %6u %6s | %9.2f %9.1f | %7.2f %7.2f %7.2f | %7.1f%%\n",
		       cais_dtype_name(wire), e, n, s[c]->k, spread, mpps,
		       mpps * 1e6 * (double)s[c]->plen * 8 / 1e9, one > 0 ? mpps / one : 0, cpu_k,
		       one > 0 ? mpps / one / cpu_k : 0,
		       sum.data_rx ? 100.0 * (double)sum.handoffs / (double)sum.data_rx : 0);
		if (pl->csv)
			fprintf(pl->csv, "%s,%u,%u,%u,%s,%.4f,%.4f,%.4f,%.4f\n",
				cais_dtype_name(wire), e, n, s[c]->k, spread, mpps,
				one > 0 ? mpps / one : 0, cpu_k,
				sum.data_rx ? (double)sum.handoffs / (double)sum.data_rx : 0);
		if (res != (uint64_t)nb[c] * per || bad || !checked) {
			fprintf(stderr,
				"bench_pipeline: %u lcores: wrong output: %" PRIu64
				" RESULTs for %" PRIu64 " DATA, %" PRIu64 " of %" PRIu64
				" sampled RESULTs wrong\n",
				s[c]->k, res, (uint64_t)nb[c] * per, bad, checked);
			rc = 1;
		}
		teardown(s[c]);
		free(s[c]);
	}
	fflush(stdout);
	return rc;
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"elems", required_argument, NULL, 'e'},  {"ranks", required_argument, NULL, 'n'},
	    {"wire", required_argument, NULL, 'w'},   {"seconds", required_argument, NULL, 's'},
	    {"csv", required_argument, NULL, 'c'},    {"quick", no_argument, NULL, 'q'},
	    {"only", required_argument, NULL, 'o'},   {"huge", no_argument, NULL, 'H'},
	    {"lcores", required_argument, NULL, 'l'}, {"cold", no_argument, NULL, 'C'},
	    {"help", no_argument, NULL, 'h'},	      {NULL, 0, NULL, 0}};
	unsigned int lcs[MAX_LIST] = {1}, nl = 0, maxk = 1;
	unsigned int elems[MAX_LIST] = {64, 256, 1024, 2048}, ranks[MAX_LIST] = {2, 4, 8, 16};
	uint8_t wires[CAIS_DT_COUNT] = {CAIS_DT_FIXED32};
	unsigned int ne = 4, nr = 4, nw = 1, id = 0;
	struct plan pl = {.seconds = 0.15, .only = -1};
	bool huge = false;
	const char *csv_path = NULL;
	int o;

	while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (o) {
		case 'e':
			ne = bench_parse_list("bench_pipeline", "--elems", optarg, elems, MAX_LIST);
			break;
		case 'n':
			nr = bench_parse_list("bench_pipeline", "--ranks", optarg, ranks, MAX_LIST);
			break;
		case 'w':
			nw = parse_wires(optarg, wires, CAIS_DT_COUNT);
			break;
		case 's':
			pl.seconds = strtod(optarg, NULL);
			break;
		case 'c':
			csv_path = optarg;
			break;
		case 'H':
			huge = true;
			break;
		case 'C':
#if defined(__x86_64__)
			cold = true;
			break;
#else
			fprintf(stderr, "bench_pipeline: --cold: x86 only\n");
			return 2;
#endif
		case 'l':
			nl = bench_parse_list("bench_pipeline", "--lcores", optarg, lcs, MAX_LIST);
			break;
		case 'o':
			pl.only = -1;
			for (int md = 0; md < M_COUNT; md++)
				if (!strcmp(optarg, mode_names[md]))
					pl.only = md;
			if (pl.only < 0) {
				fprintf(stderr,
					"bench_pipeline: --only pipeline|io|kernel|open|copies\n");
				return 2;
			}
			break;
		case 'q':
			elems[0] = 256;
			elems[1] = 2048;
			ne = 2;
			ranks[0] = 4;
			nr = 1;
			pl.seconds = 0.02;
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}
	for (unsigned int i = 0; i < ne; i++)
		if (elems[i] < 1 || elems[i] > CAIS_MAX_ELEMS) {
			fprintf(stderr, "bench_pipeline: --elems %u: 1..%u\n", elems[i],
				CAIS_MAX_ELEMS);
			return 2;
		}
	for (unsigned int i = 0; i < nr; i++)
		if (ranks[i] < 1 || ranks[i] > 16) {
			fprintf(stderr, "bench_pipeline: --ranks %u: 1..16\n", ranks[i]);
			return 2;
		}
	for (unsigned int i = 0; i < nl; i++) {
		if (lcs[i] < 1 || lcs[i] > MAX_LC || rte_is_power_of_2(lcs[i]) == 0) {
			fprintf(stderr, "bench_pipeline: --lcores %u: 1, 2 or 4\n", lcs[i]);
			return 2;
		}
		if (lcs[i] > maxk)
			maxk = lcs[i];
	}
	if (nl && lcs[0] != 1) {
		fprintf(stderr, "bench_pipeline: --lcores: the list starts with 1 (the baseline)\n");
		return 2;
	}
	if (maxk > (unsigned int)sysconf(_SC_NPROCESSORS_ONLN)) {
		fprintf(stderr, "bench_pipeline: --lcores %u: this machine has %ld CPUs\n", maxk,
			sysconf(_SC_NPROCESSORS_ONLN));
		return 2;
	}
	if (!(pl.seconds > 0)) {
		fprintf(stderr, "bench_pipeline: --seconds must be > 0\n");
		return 2;
	}
	addresses();
	eal(huge, maxk);
	memset(acc_store, 0, sizeof(acc_store)); /* faulted in before any timing */
	if (csv_path && !(pl.csv = fopen(csv_path, "w"))) {
		perror(csv_path);
		return 1;
	}
	if (nl) { /* the scaling table alone */
		if (pl.csv)
			fprintf(pl.csv, "wire,elems,ranks,lcores,spread,pipeline_mpps,vs_one_lcore,"
					"probe_vs_one_lcore,handoff_share\n");
		printf(
		    "\n  ---------- cais-switch pipeline on k lcores (%s kernels%s) ----------\n",
		    dp_agg_best()->name, cold ? ", packets cold" : "");
		printf("  %7s %5s %5s | %6s %6s | %9s %9s | %7s %7s %7s | %8s\n", "wire", "elems",
		       "ranks", "lcores", "spread", "pipe Mpps", "pipe Gb/s", "vs k=1", "cpu",
		       "of cpu", "handoff");
		for (unsigned int w = 0; w < nw; w++)
			for (unsigned int a = 0; a < ne; a++)
				for (unsigned int b = 0; b < nr; b++)
					if (measure_lcores(&pl, wires[w], ranks[b], elems[a], lcs, nl,
							   &id) != 0)
						return 1;
		printf(
		    "  (k lcores, each running its share of every batch as its poll loop would,\n"
		    "   handoffs included, the share first in its own cache as its RX queue\n"
		    "   leaves it (--cold: in memory); flows: each rank k flows, flow i the\n"
		    "   seqs i mod k (E7), so each lcore owns what it receives; ranks: one flow\n"
		    "   per rank on lcore rank mod k; cpu: the machine's own scaling, an\n"
		    "   integer loop on k lcores at once against one, run between the batches\n"
		    "   (two vCPUs may share a core); of cpu: vs k=1 over cpu; handoff: the\n"
		    "   share of DATA passed to the slot's owner)\n");
		if (pl.csv)
			fclose(pl.csv);
		rte_eal_cleanup();
		return 0;
	}
	if (pl.csv)
		fprintf(pl.csv, "elems,ranks,pipeline_mpps,pipeline_gbps,io_mpps,kernel_mpps,"
				"kernel_gbps,pipeline_vs_kernel,pipeline_vs_io,results_per_round,"
				"wire,open_mpps,guard_cost,copies_mpps\n");
	printf("\n  ------------------ cais-switch pipeline, one lcore (%s kernels%s) "
	       "------------------\n",
	       dp_agg_best()->name, cold ? ", packets cold" : "");
	printf("  %7s %5s %5s | %9s %9s | %9s | %9s %9s | %8s %8s | %7s %6s | %9s %8s\n", "wire",
	       "elems", "ranks", "pipe Mpps", "pipe Gb/s", "io Mpps", "kern Mpps", "kern Gb/s",
	       "pipe/krn", "pipe/io", "guards", "ns", "copy Mpps", "pipe/cp");
	for (unsigned int w = 0; w < nw; w++)
		for (unsigned int a = 0; a < ne; a++)
			for (unsigned int b = 0; b < nr; b++)
				if (measure(&pl, wires[w], ranks[b], elems[a], id++) != 0)
					return 1;
	printf("  (Mpps: DATA packets in per second; Gb/s: their payload; pipe: parse, match,\n"
	       "   action, RESULT to every member; io: the same packets forwarded as they are;\n"
	       "   kern: the payloads added into the slot arrays and nothing else; for\n"
	       "   block16 also each round's RESULT payload stored; guards: the share of a\n"
	       "   packet's time, and the ns, that the E5 checks take, against the pipeline\n"
	       "   with them off; copy: the pipeline with rounds keeping no DATA, every\n"
	       "   RESULT but one a copy, as before DP_KEEP_*)\n");
	if (pl.csv)
		fclose(pl.csv);
	rte_eal_cleanup();
	return 0;
}
