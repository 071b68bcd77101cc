/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcais end to end in one process: n communicators (one thread per rank)
 * on loopback, a model of the switch (fake_switch.h) with faults on demand.
 * Every element of every result is checked against a double-precision
 * reference, within PROTOCOL.md section 6's bounds.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <cais/cais.h>

#include "ctl_endpoint.h"
#include "fake_switch.h"
#include "../../agent/quant.h"

#define MAXN 8

static struct fake_switch *SW;
/* The second switch server of striped communicators (setup_opts.stripes), or NULL. */
static struct fake_switch *SW2;
static struct sockaddr_in PEERS[MAXN];
static struct cais_comm *COMM[MAXN];
static unsigned int N;

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Flows per rank of the next communicators (t_flows sets it). */
static unsigned int THREADS = 1;

/* Is port free on loopback for UDP and TCP at the time of asking? */
static bool
port_free(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	int u = socket(AF_INET, SOCK_DGRAM, 0), t = socket(AF_INET, SOCK_STREAM, 0);
	bool ok;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = bind(u, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	     bind(t, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(u);
	close(t);
	return ok;
}

/*
 * A free loopback port followed by THREADS - 1 more (a rank's flows use
 * them). Chosen at random below Linux's ephemeral range (32768 and up by
 * default): a port is free when asked and bound only later, and in the
 * ephemeral range any connect of this or a parallel test may take it in
 * between (a join then fails with EADDRINUSE).
 */
static uint16_t
free_port(void)
{
	static uint32_t x;

	if (!x)
		x = ((uint32_t)getpid() * 2654435761u ^ (uint32_t)now_ms()) | 1u;
	for (;;) {
		uint16_t port;
		bool ok = true;

		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		port = (uint16_t)(20000 + x % (32768 - 20000 - THREADS));
		for (unsigned int i = 0; ok && i < THREADS; i++)
			ok = port_free((uint16_t)(port + i));
		if (ok)
			return port;
	}
}

struct setup_opts {
	unsigned int n, slots, elems;
	size_t threshold;
	uint32_t retries, timeout_ms, check_every;
	double scale;
	enum cais_wire_dtype wire;
	bool stripes; /**< striped over SW and SW2 (flows i mod 2) */
};

/* PEERS[0..N-1] on loopback, each rank's range of span ports (its flows) its own. */
static void
peers_apart(unsigned int span)
{
	for (unsigned int r = 0; r < N; r++) {
		uint16_t p;
		bool clash;

		do {
			p = free_port();
			clash = false;
			for (unsigned int j = 0; j < r; j++)
				clash |= p < ntohs(PEERS[j].sin_port) + span &&
					 ntohs(PEERS[j].sin_port) < p + span;
		} while (clash);
		PEERS[r].sin_family = AF_INET;
		PEERS[r].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		PEERS[r].sin_port = htons(p);
	}
}

static void
setup_comms(const struct setup_opts *o)
{
	struct cais_config cfg;

	struct sockaddr_in stripes[2];

	N = o->n;
	SW = fs_start(N, o->slots);
	SW2 = o->stripes ? fs_start(N, o->slots) : NULL;
	if (SW2) {
		stripes[0] = SW->addr;
		stripes[1] = SW2->addr;
	}
	peers_apart(THREADS);
	for (unsigned int r = 0; r < N; r++) {
		cais_config_init(&cfg);
		cfg.tenant = 1;
		cfg.session = 1;
		cfg.rank = r;
		cfg.world = N;
		cfg.switch_addr = SW->addr;
		cfg.peers = PEERS;
		cfg.slots = o->slots;
		cfg.elems = (uint16_t)o->elems;
		cfg.threshold = o->threshold;
		cfg.scale = o->scale ? o->scale : 1024;
		if (o->retries)
			cfg.retries = o->retries;
		if (o->timeout_ms)
			cfg.timeout_ms = o->timeout_ms;
		cfg.check_every = o->check_every;
		cfg.wire = o->wire;
		cfg.threads = THREADS;
		if (SW2) {
			cfg.stripes = stripes;
			cfg.nstripes = 2;
		}
		assert_int_equal(cais_comm_create(&cfg, &COMM[r]), 0);
	}
}

/* The fake switches that run. */
static void
stop_switches(void)
{
	if (SW)
		fs_stop(SW);
	if (SW2)
		fs_stop(SW2);
	SW = SW2 = NULL;
}

static void
teardown_comms(void)
{
	for (unsigned int r = 0; r < N; r++) {
		assert_int_equal(cais_comm_destroy(COMM[r]), 0);
		COMM[r] = NULL;
	}
	stop_switches();
}

/* ---- values and bounds ---- */

static float
value(unsigned int rank, size_t i, unsigned int iter)
{
	/* multiples of 1/16 up to about 32: exact in bf16, fp16 and at scale 1024 */
	return (float)((int)((rank * 7919u + i * 104729u + iter * 31u) % 1001u) - 500) / 16.0f;
}

static void
fill(void *buf, enum cais_datatype dt, unsigned int rank, size_t count, unsigned int iter)
{
	for (size_t i = 0; i < count; i++) {
		float v = value(rank, i, iter);

		switch (dt) {
		case CAIS_FLOAT32:
			((float *)buf)[i] = v;
			break;
		case CAIS_BFLOAT16:
			((uint16_t *)buf)[i] = cais_f32_to_bf16(v);
			break;
		case CAIS_FLOAT16:
			((uint16_t *)buf)[i] = cais_f32_to_f16(v);
			break;
		case CAIS_INT32:
			((int32_t *)buf)[i] = (int32_t)(v * 16);
			break;
		}
	}
}

/* Rank r's element i as the dtype holds it. */
static double
input(enum cais_datatype dt, unsigned int r, size_t i, unsigned int iter)
{
	float v = value(r, i, iter);

	switch (dt) {
	case CAIS_BFLOAT16:
		return cais_bf16_to_f32(cais_f32_to_bf16(v));
	case CAIS_FLOAT16:
		return cais_f16_to_f32(cais_f32_to_f16(v));
	case CAIS_INT32:
		return (int32_t)(v * 16);
	default:
		return v;
	}
}

static double
expected(enum cais_datatype dt, enum cais_redop op, size_t i, unsigned int iter)
{
	double acc = 0;

	for (unsigned int r = 0; r < N; r++) {
		double v = input(dt, r, i, iter);

		if (r == 0 || op == CAIS_OP_SUM || op == CAIS_OP_AVG)
			acc = (r == 0) ? v : acc + v;
		else if (op == CAIS_OP_MAX)
			acc = v > acc ? v : acc;
		else
			acc = v < acc ? v : acc;
	}
	if (op == CAIS_OP_AVG)
		acc = dt == CAIS_INT32 ? (double)((int64_t)acc / (int64_t)N) : acc / N;
	return acc;
}

static double
got_value(const void *buf, enum cais_datatype dt, size_t i)
{
	switch (dt) {
	case CAIS_FLOAT32:
		return ((const float *)buf)[i];
	case CAIS_BFLOAT16:
		return cais_bf16_to_f32(((const uint16_t *)buf)[i]);
	case CAIS_FLOAT16:
		return cais_f16_to_f32(((const uint16_t *)buf)[i]);
	default:
		return ((const int32_t *)buf)[i];
	}
}

/* Wrong elements of a result, by PROTOCOL.md section 6 (switch or ring bound). */
static size_t
check(const void *buf, enum cais_datatype dt, enum cais_redop op, size_t count, unsigned int iter,
      double scale)
{
	double eps = dt == CAIS_FLOAT32 ? 0x1p-24 : dt == CAIS_FLOAT16 ? 0x1p-11 : 0x1p-8;
	size_t bad = 0;

	for (size_t i = 0; i < count; i++) {
		double e = expected(dt, op, i, iter), g = got_value(buf, dt, i);
		double bound = dt == CAIS_INT32 ? 0 : N / scale + fabs(e) * eps * (N + 1);

		if (fabs(g - e) > bound) {
			if (bad < 3)
				print_message("element %zu: got %.9g, want %.9g (bound %.3g)\n", i,
					      g, e, bound);
			bad++;
		}
	}
	return bad;
}

/* ---- running the ranks ---- */

typedef int (*rank_fn)(unsigned int rank, void *arg);

struct rank_job {
	rank_fn fn;
	void *arg;
	unsigned int rank;
	int rc;
};

static void *
rank_thread(void *p)
{
	struct rank_job *j = p;

	j->rc = j->fn(j->rank, j->arg);
	return NULL;
}

static void
run_ranks(rank_fn fn, void *arg)
{
	pthread_t t[MAXN];
	struct rank_job j[MAXN];

	for (unsigned int r = 0; r < N; r++) {
		int rc;

		j[r] = (struct rank_job){.fn = fn, .arg = arg, .rank = r};
		/* a rank that never started would leave the others waiting for it:
		 * say so (the process's threads may be short for a moment) */
		for (int tries = 0;
		     (rc = pthread_create(&t[r], NULL, rank_thread, &j[r])) == EAGAIN && tries < 50;
		     tries++)
			usleep(20000);
		if (rc)
			fail_msg("rank %u: pthread_create: %s", r, strerror(rc));
	}
	for (unsigned int r = 0; r < N; r++) {
		pthread_join(t[r], NULL);
		if (j[r].rc)
			fail_msg("rank %u failed: %d", r, j[r].rc);
	}
}

struct coll {
	enum cais_datatype dt;
	enum cais_redop op;
	size_t count;
	unsigned int iters;
	uint32_t tensor;
	bool in_place;
	enum cais_path want_path;   /**< checked when not AUTO */
	enum cais_fallback want_fb; /**< checked when want_path is RING */
	unsigned int slow_rank;	    /**< this rank sleeps slow_ms before each collective */
	unsigned int slow_ms;
	double scale;
	uint64_t max_ms; /**< when > 0: each collective within this time */
};

static int
run_coll(unsigned int rank, void *arg)
{
	const struct coll *k = arg;
	size_t esz = cais_datatype_size(k->dt);
	void *send = malloc(k->count * esz), *recv = malloc(k->count * esz);
	double scale = k->scale ? k->scale : 1024;
	int rc = 0;

	for (unsigned int it = 0; it < k->iters && rc == 0; it++) {
		struct cais_request *req;
		struct cais_status st;
		void *out = k->in_place ? send : recv;
		uint64_t t0;
		size_t bad;

		fill(send, k->dt, rank, k->count, it);
		if (k->slow_ms && rank == k->slow_rank)
			usleep(k->slow_ms * 1000);
		t0 = now_ms();
		rc =
		    cais_iallreduce(COMM[rank], k->tensor, send, out, k->count, k->dt, k->op, &req);
		if (rc == 0)
			rc = cais_wait_status(req, &st);
		if (rc) {
			print_message("rank %u iter %u: %s\n", rank, it, cais_strerror(rc));
			break;
		}
		if (getenv("CAIS_TEST_VERBOSE"))
			print_message("rank %u iter %u: path %s (%s) %llu ms\n", rank, it,
				      cais_path_name(st.path), cais_fallback_name(st.fallback),
				      (unsigned long long)(now_ms() - t0));
		bad = check(out, k->dt, k->op, k->count, it, scale);
		if (bad) {
			print_message("rank %u iter %u %s %s count %zu path %s: %zu wrong\n", rank,
				      it, cais_datatype_name(k->dt), cais_redop_name(k->op),
				      k->count, cais_path_name(st.path), bad);
			rc = -1000;
		} else if (k->want_path != CAIS_PATH_AUTO && st.path != k->want_path) {
			print_message("rank %u iter %u: path %s (%s), want %s\n", rank, it,
				      cais_path_name(st.path), cais_fallback_name(st.fallback),
				      cais_path_name(k->want_path));
			rc = -1001;
		} else if (k->want_path == CAIS_PATH_RING && k->want_fb != CAIS_FB_NONE &&
			   st.fallback != k->want_fb) {
			print_message("rank %u iter %u: fallback '%s', want '%s'\n", rank, it,
				      cais_fallback_name(st.fallback),
				      cais_fallback_name(k->want_fb));
			rc = -1002;
		} else if (k->max_ms && now_ms() - t0 > k->max_ms) {
			print_message("rank %u iter %u: %llu ms, want at most %llu\n", rank, it,
				      (unsigned long long)(now_ms() - t0),
				      (unsigned long long)k->max_ms);
			rc = -1003;
		}
	}
	free(send);
	free(recv);
	return rc;
}

/* The fake switch's tensor for an op (the real switch: a tensor entry per op). */
static uint32_t
tensor_for(enum cais_redop op)
{
	return op == CAIS_OP_MAX ? FS_TENSOR_MAX : op == CAIS_OP_MIN ? FS_TENSOR_MIN : 1;
}

static const struct setup_opts default_opts = {
    .n = 4,
    .slots = 64,
    .elems = 256,
    .threshold = 0,
    .timeout_ms = 20000,
};

/* Every dtype and op at every count, two iterations each, on the path given. */
static void
every_dt_op(const size_t *counts, size_t n, enum cais_path want_path, enum cais_fallback want_fb)
{
	for (int dt = 0; dt < 4; dt++)
		for (int op = 0; op < 4; op++)
			for (size_t c = 0; c < n; c++) {
				struct coll k = {.dt = dt,
						 .op = op,
						 .count = counts[c],
						 .iters = 2,
						 .tensor = tensor_for(op),
						 .want_path = want_path,
						 .want_fb = want_fb};

				run_ranks(run_coll, &k);
			}
}

/* Every dtype and op, sizes around the packet size, through the switch. */
static void
t_basic(void **state)
{
	static const size_t counts[] = {1, 255, 256, 257, 1000, 5000};

	(void)state;
	setup_comms(&default_opts);
	every_dt_op(counts, sizeof(counts) / sizeof(counts[0]), CAIS_PATH_SWITCH, CAIS_FB_NONE);
	assert_int_equal(atomic_load(&SW->window_violations), 0);
	teardown_comms();
}

/* The ring: every dtype and op, sizes below the world size too (empty segments). */
static void
t_ring(void **state)
{
	static const size_t counts[] = {1, 3, 4, 5, 257, 5000, 100003};

	(void)state;
	setup_comms(&default_opts);
	for (unsigned int r = 0; r < N; r++)
		assert_int_equal(cais_set_path(COMM[r], CAIS_PATH_RING), 0);
	every_dt_op(counts, sizeof(counts) / sizeof(counts[0]), CAIS_PATH_RING, CAIS_FB_FORCED);
	teardown_comms();
}

/* Below the offload threshold: the ring, and the seqs still advance alike. */
static void
t_threshold(void **state)
{
	struct setup_opts o = default_opts;
	struct coll small = {.dt = CAIS_FLOAT32,
			     .count = 1000,
			     .iters = 3,
			     .tensor = 1,
			     .want_path = CAIS_PATH_RING,
			     .want_fb = CAIS_FB_THRESHOLD};
	struct coll big = {.dt = CAIS_FLOAT32,
			   .count = 300000,
			   .iters = 2,
			   .tensor = 1,
			   .want_path = CAIS_PATH_SWITCH};

	(void)state;
	o.threshold = 1 << 20;
	setup_comms(&o);
	run_ranks(run_coll, &small);
	run_ranks(run_coll, &big);
	run_ranks(run_coll, &small);
	teardown_comms();
}

static uint64_t
metric_sum(size_t off)
{
	uint64_t total = 0;

	for (unsigned int r = 0; r < N; r++) {
		struct cais_metrics m;

		assert_int_equal(cais_metrics_get(COMM[r], &m), 0);
		total += *(const uint64_t *)((const uint8_t *)&m + off);
	}
	return total;
}
#define METRIC(field) metric_sum(offsetof(struct cais_metrics, field))

/* DATA and RESULTs lost, RESULTs duplicated and reordered: retransmissions recover, on the switch.
 */
static void
t_loss(void **state)
{
	struct coll k = {.dt = CAIS_FLOAT32,
			 .count = 20000,
			 .iters = 20,
			 .tensor = 1,
			 .want_path = CAIS_PATH_SWITCH};

	(void)state;
	setup_comms(&default_opts);
	atomic_store(&SW->data_loss_pct, 5);
	atomic_store(&SW->result_loss_pct, 5);
	atomic_store(&SW->dup_pct, 10);
	atomic_store(&SW->reorder_pct, 10);
	run_ranks(run_coll, &k);
	k.dt = CAIS_BFLOAT16;
	k.op = CAIS_OP_MAX;
	k.tensor = FS_TENSOR_MAX;
	run_ranks(run_coll, &k);
	print_message("retransmissions %llu, RESULTs ignored %llu, chunks from peers %llu\n",
		      (unsigned long long)METRIC(retransmissions),
		      (unsigned long long)METRIC(results_ignored),
		      (unsigned long long)METRIC(peer_chunks));
	assert_true(METRIC(retransmissions) > 0);
	assert_true(METRIC(results_ignored) > 0);
	assert_int_equal(METRIC(in_network), 4 * 40);
	assert_int_equal(atomic_load(&SW->window_violations), 0);
	teardown_comms();
}

/* What each rank got, to see that every rank got the same bits. */
static uint64_t RESULT_HASH[MAXN];

static uint64_t
fnv1a(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* One bf16 sum of awkward data (outliers beside small values), hashed per rank. */
static int
run_b16_hash(unsigned int rank, void *arg)
{
	size_t count = *(const size_t *)arg;
	uint16_t *x = calloc(count, 2);
	int rc;

	if (!x)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		double v = ((double)((i * 2654435761u + rank * 40503u) % 20001) - 10000) / 7.0;

		x[i] = cais_f32_to_bf16((float)(i % 37 == 0 ? v * 1000 : v / 1000));
	}
	rc = cais_allreduce(COMM[rank], 1, x, x, count, CAIS_BFLOAT16, CAIS_OP_SUM);
	RESULT_HASH[rank] = fnv1a(x, count * 2);
	free(x);
	return rc;
}

/*
 * BLOCK16 (docs/PROTOCOL.md E4) on the wire: every dtype and op through the
 * switch (int32 goes as FIXED32), under loss, duplication and reordering;
 * every rank gets the same bits.
 */
static void
t_block16(void **state)
{
	static const size_t counts[] = {1, 31, 32, 33, 255, 256, 257, 5000};
	struct setup_opts o = default_opts;
	size_t hcount = 100003;

	(void)state;
	o.wire = CAIS_DT_BLOCK16;
	setup_comms(&o);
	every_dt_op(counts, sizeof(counts) / sizeof(counts[0]), CAIS_PATH_SWITCH, CAIS_FB_NONE);
	assert_true(atomic_load(&SW->b16_rounds) > 0);
	assert_true(atomic_load(&SW->b16_rounds) < atomic_load(&SW->rounds)); /* int32 */
	atomic_store(&SW->data_loss_pct, 5);
	atomic_store(&SW->result_loss_pct, 5);
	atomic_store(&SW->dup_pct, 10);
	atomic_store(&SW->reorder_pct, 10);
	for (int it = 0; it < 3; it++) {
		run_ranks(run_b16_hash, &hcount);
		for (unsigned int r = 1; r < N; r++)
			assert_true(RESULT_HASH[r] == RESULT_HASH[0]);
	}
	assert_int_equal(METRIC(in_network), METRIC(collectives));
	assert_int_equal(atomic_load(&SW->window_violations), 0);
	for (unsigned int r = 0; r < N; r++) {
		struct cais_metrics m;

		assert_int_equal(cais_metrics_get(COMM[r], &m), 0);
		assert_int_equal(m.wire_fallbacks, 0);
	}
	teardown_comms();
}

/*
 * A switch without BLOCK16 (REJECT BAD_DTYPE): the tensor goes on as
 * FIXED32, in-network, from the first collective; once per rank.
 */
static void
t_block16_refused(void **state)
{
	struct setup_opts o = default_opts;
	struct coll k = {.dt = CAIS_BFLOAT16,
			 .count = 20000,
			 .iters = 3,
			 .tensor = 1,
			 .want_path = CAIS_PATH_SWITCH};

	(void)state;
	o.wire = CAIS_DT_BLOCK16;
	o.retries = 30; /* a fallback by timer would take seconds */
	setup_comms(&o);
	atomic_store(&SW->refuse_b16, 1);
	run_ranks(run_coll, &k);
	k.dt = CAIS_FLOAT32;
	run_ranks(run_coll, &k);
	assert_true(atomic_load(&SW->rejects) > 0);
	assert_int_equal(atomic_load(&SW->b16_rounds), 0);
	for (unsigned int r = 0; r < N; r++) {
		struct cais_metrics m;

		assert_int_equal(cais_metrics_get(COMM[r], &m), 0);
		assert_int_equal(m.wire_fallbacks, 1);
		assert_int_equal(m.in_network, 6);
	}
	teardown_comms();
}

/* A tensor the switch does not have: REJECT, the ring at once (no timeout wait). */
static void
t_reject(void **state)
{
	struct setup_opts o = default_opts;
	struct coll k = {.dt = CAIS_FLOAT32,
			 .count = 3000,
			 .iters = 3,
			 .tensor = 7,
			 .want_path = CAIS_PATH_RING,
			 .want_fb = CAIS_FB_REJECT,
			 .max_ms = 300};
	struct coll ok = {.dt = CAIS_FLOAT32,
			  .count = 3000,
			  .iters = 2,
			  .tensor = 1,
			  .want_path = CAIS_PATH_SWITCH};

	(void)state;
	o.retries = 30; /* a fallback by timer would take seconds */
	setup_comms(&o);
	atomic_store(&SW->reject_tensor, 7);
	run_ranks(run_coll, &k);
	run_ranks(run_coll, &ok);
	assert_true(atomic_load(&SW->rejects) > 0);
	teardown_comms();
}

/* With one of the switch's faults on (an atomic_int of struct fake_switch), k; off again, ok. */
static void
fault_then_recover(size_t fault_off, struct coll *k, struct coll *ok)
{
	atomic_int *fault;

	setup_comms(&default_opts);
	fault = (atomic_int *)((uint8_t *)SW + fault_off);
	atomic_store(fault, 1);
	run_ranks(run_coll, k);
	atomic_store(fault, 0);
	run_ranks(run_coll, ok);
	teardown_comms();
}
#define FAULT(field) offsetof(struct fake_switch, field)

/* Forward-only: REJECT FWD_ONLY, the ring; computing again afterwards. */
static void
t_fwd_only(void **state)
{
	struct coll k = {.dt = CAIS_FLOAT16,
			 .count = 3000,
			 .iters = 2,
			 .tensor = 1,
			 .want_path = CAIS_PATH_RING,
			 .want_fb = CAIS_FB_FWD_ONLY};
	struct coll ok = {.dt = CAIS_FLOAT16,
			  .count = 3000,
			  .iters = 2,
			  .tensor = 1,
			  .want_path = CAIS_PATH_SWITCH};

	(void)state;
	fault_then_recover(FAULT(fwd_only), &k, &ok);
}

/* A silent switch: after the retries every rank asks its peers, none has it: the ring. */
static void
t_silent(void **state)
{
	struct coll k = {.dt = CAIS_FLOAT32,
			 .count = 3000,
			 .iters = 2,
			 .tensor = 1,
			 .want_path = CAIS_PATH_RING,
			 .want_fb = CAIS_FB_SILENT,
			 .max_ms = 5000};
	struct coll ok = {.dt = CAIS_FLOAT32,
			  .count = 3000,
			  .iters = 2,
			  .tensor = 1,
			  .want_path = CAIS_PATH_SWITCH};

	(void)state;
	fault_then_recover(FAULT(silent), &k, &ok);
}

/*
 * A switch that ACKs every retransmission and never ends a round (what
 * restarts between the ranks' contributions look like): the chunks stall
 * (AG_STALL_US), every peer says its DATA is in or stuck, the ring.
 */
static void
t_acked_never_done(void **state)
{
	struct coll k = {.dt = CAIS_FLOAT32,
			 .count = 3000,
			 .iters = 2,
			 .tensor = 1,
			 .want_path = CAIS_PATH_RING,
			 .want_fb = CAIS_FB_SILENT,
			 .max_ms = 5000};
	struct coll ok = k;

	(void)state;
	ok.want_path = CAIS_PATH_SWITCH;
	ok.want_fb = CAIS_FB_NONE;
	ok.max_ms = 0;
	setup_comms(&default_opts);
	atomic_store(&SW->ack_only, 1);
	run_ranks(run_coll, &k);
	assert_true(atomic_load(&SW->acks_tx) > 0);
	atomic_store(&SW->ack_only, 0);
	run_ranks(run_coll, &ok);
	teardown_comms();
}

/* One rank's RESULTs all lost (and the stored ones too): it gets them from its peers. */
static void
t_results_lost_one_rank(void **state)
{
	struct coll k = {.dt = CAIS_FLOAT32,
			 .count = 5000,
			 .iters = 3,
			 .tensor = 1,
			 .want_path = CAIS_PATH_SWITCH};
	struct cais_metrics m;

	(void)state;
	setup_comms(&default_opts);
	atomic_store(&SW->drop_results_to, 2);
	run_ranks(run_coll, &k);
	assert_int_equal(cais_metrics_get(COMM[2], &m), 0);
	print_message("rank 2: %llu chunks from peers, %llu retransmissions\n",
		      (unsigned long long)m.peer_chunks, (unsigned long long)m.retransmissions);
	assert_int_equal(m.peer_chunks, 3 * 20);
	assert_int_equal(m.in_network, 3);
	atomic_store(&SW->drop_results_to, -1);
	teardown_comms();
}

/*
 * One rank's DATA never reaches the switch (a firewall on its way): the
 * others' retransmissions get ACKs (E6) and they never judge the switch
 * silent; the silent rank's FETCHes find its peers' DATA in (FETCH_NO 5), so
 * it takes the ring, and the peers follow it there: every rank right.
 */
static void
t_data_lost_one_rank(void **state)
{
	struct coll k = {.dt = CAIS_FLOAT32,
			 .count = 5000,
			 .iters = 2,
			 .tensor = 1,
			 .want_path = CAIS_PATH_AUTO};

	(void)state;
	setup_comms(&default_opts);
	atomic_store(&SW->drop_data_from, 1);
	run_ranks(run_coll, &k);
	print_message("rank 1's DATA lost: in-network %llu of %llu, ACKs %llu\n",
		      (unsigned long long)METRIC(in_network),
		      (unsigned long long)METRIC(collectives), (unsigned long long)METRIC(acks));
	assert_int_equal(METRIC(in_network), 0);
	assert_true(METRIC(acks) > 0);
	atomic_store(&SW->drop_data_from, -1);
	teardown_comms();
}

/* The fixed-point sum overflows: OVERFLOW, the ring in float, the right answer. */
static void
t_overflow(void **state)
{
	struct setup_opts o = default_opts;
	struct coll k = {.dt = CAIS_FLOAT32,
			 .count = 2000,
			 .iters = 2,
			 .tensor = 1,
			 .want_path = CAIS_PATH_RING,
			 .want_fb = CAIS_FB_OVERFLOW,
			 .scale = 0x1p25};

	(void)state;
	o.scale = 0x1p25; /* 31.25 x 2^25 < 2^31, four of them are not */
	setup_comms(&o);
	run_ranks(run_coll, &k);
	teardown_comms();
}

/* Inputs beyond the scale's range saturate in conversion: the ring, never a wrong max. */
static void
t_saturated_input(void **state)
{
	struct setup_opts o = default_opts;
	struct coll k = {.dt = CAIS_FLOAT32,
			 .op = CAIS_OP_MAX,
			 .count = 2000,
			 .iters = 2,
			 .tensor = FS_TENSOR_MAX,
			 .want_path = CAIS_PATH_RING,
			 .want_fb = CAIS_FB_OVERFLOW,
			 .scale = 0x1p27};

	(void)state;
	o.scale = 0x1p27; /* 31.25 x 2^27 > 2^31 */
	setup_comms(&o);
	run_ranks(run_coll, &k);
	teardown_comms();
}

static void
t_in_place(void **state)
{
	(void)state;
	setup_comms(&default_opts);
	for (int dt = 0; dt < 4; dt++) {
		struct coll k = {.dt = dt,
				 .op = CAIS_OP_AVG,
				 .count = 3001,
				 .iters = 2,
				 .tensor = 1,
				 .in_place = true,
				 .want_path = CAIS_PATH_SWITCH};

		run_ranks(run_coll, &k);
		for (unsigned int r = 0; r < N; r++)
			cais_set_path(COMM[r], CAIS_PATH_RING);
		k.want_path = CAIS_PATH_RING;
		run_ranks(run_coll, &k);
		/* in place and overflowing: the ring needs the input the switch could not sum */
		for (unsigned int r = 0; r < N; r++)
			cais_set_path(COMM[r], CAIS_PATH_AUTO);
	}
	teardown_comms();
}

/* Several collectives outstanding on each communicator, completed out of order. */
static int
run_outstanding(unsigned int rank, void *arg)
{
	enum { K = 6 };
	static const size_t counts[K] = {100, 70000, 1, 2048, 30000, 511};
	float *buf[K];
	struct cais_request *req[K];
	int rc = 0;

	(void)arg;
	for (int j = 0; j < K; j++) {
		buf[j] = malloc(counts[j] * sizeof(float));
		fill(buf[j], CAIS_FLOAT32, rank, counts[j], (unsigned int)j);
		rc = cais_iallreduce(COMM[rank], 1, buf[j], buf[j], counts[j], CAIS_FLOAT32,
				     CAIS_OP_SUM, &req[j]);
		if (rc)
			return rc;
	}
	for (int j = K - 1; j >= 0; j--) {
		int err = cais_wait(req[j]);

		if (err)
			rc = err;
		else if (check(buf[j], CAIS_FLOAT32, CAIS_OP_SUM, counts[j], (unsigned int)j, 1024))
			rc = -1000;
		free(buf[j]);
	}
	return rc;
}

static void
t_outstanding(void **state)
{
	struct setup_opts o = default_opts;

	(void)state;
	o.slots = 8; /* a window smaller than one collective */
	setup_comms(&o);
	for (int i = 0; i < 3; i++)
		run_ranks(run_outstanding, NULL);
	assert_int_equal(atomic_load(&SW->window_violations), 0);
	teardown_comms();
}

/* One rank late to every collective: the others wait for it, on the switch. */
static void
t_slow_rank(void **state)
{
	struct coll k = {.dt = CAIS_FLOAT32,
			 .count = 5000,
			 .iters = 3,
			 .tensor = 1,
			 .want_path = CAIS_PATH_SWITCH,
			 .slow_rank = 3,
			 .slow_ms = 300};

	(void)state;
	setup_comms(&default_opts);
	run_ranks(run_coll, &k);
	teardown_comms();
}

/*
 * One rank stalls 1.5 s before each collective, longer than a switch may
 * stay quiet (AG_QUIET_US): run with ACKs, then on a switch without them.
 * With ACKs the waiting ranks stay on the switch and back off: each waiting
 * chunk is retransmitted about log2(stall / timer) times, not once per
 * capped timer (20 ms); without, they retransmit at the cap all along.
 */
static uint64_t
stall_run(bool acks)
{
	struct coll k = {.dt = CAIS_FLOAT32,
			 .count = 2048, /* 8 chunks of 256 */
			 .iters = 2,
			 .tensor = 1,
			 .want_path = acks ? CAIS_PATH_SWITCH : CAIS_PATH_AUTO,
			 .slow_rank = 3,
			 .slow_ms = 1500};
	uint64_t retx;

	setup_comms(&default_opts);
	atomic_store(&SW->no_ack, !acks);
	run_ranks(run_coll, &k);
	retx = METRIC(retransmissions);
	print_message("stall %s ACKs: %llu retransmissions, %llu ACKs, in-network %llu of %llu\n",
		      acks ? "with" : "without", (unsigned long long)retx,
		      (unsigned long long)METRIC(acks), (unsigned long long)METRIC(in_network),
		      (unsigned long long)METRIC(collectives));
	if (acks) {
		assert_true(METRIC(acks) > 0);
		assert_int_equal(METRIC(acks), atomic_load(&SW->acks_tx));
	} else {
		assert_int_equal(METRIC(acks), 0);
	}
	teardown_comms();
	return retx;
}

static void
t_stall(void **state)
{
	/* 3 waiting ranks x 8 chunks x 2 collectives; 1.5 s / 20 ms = 75 without */
	uint64_t with = stall_run(true), without = stall_run(false);

	(void)state;
	assert_true(with <= 3 * 8 * 2 * 20);
	assert_true(without > 4 * with);
}

/* The switch restarts (forgets every slot) again and again during a stream. */
static void *
restarter(void *arg)
{
	atomic_bool *stop = arg;

	while (!atomic_load(stop)) {
		usleep(30000);
		fs_restart(SW);
	}
	return NULL;
}

static void
t_restart(void **state)
{
	struct coll k = {.dt = CAIS_BFLOAT16, .count = 40000, .iters = 15, .tensor = 1};
	atomic_bool stop = false;
	pthread_t t;

	(void)state;
	setup_comms(&default_opts);
	assert_int_equal(pthread_create(&t, NULL, restarter, &stop), 0);
	run_ranks(run_coll, &k);
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	print_message("restarts: in-network %llu, ring %llu, chunks from peers %llu\n",
		      (unsigned long long)METRIC(in_network),
		      (unsigned long long)(METRIC(collectives) - METRIC(in_network)),
		      (unsigned long long)METRIC(peer_chunks));
	teardown_comms();
}

/* One collective on a corrupting switch: the sampled error must be above the alarm. */
static int
run_corrupt(unsigned int rank, void *arg)
{
	float *b = malloc(3000 * sizeof(float));
	struct cais_request *req;
	struct cais_status st;
	int rc;

	(void)arg;
	fill(b, CAIS_FLOAT32, rank, 3000, 0);
	rc = cais_iallreduce(COMM[rank], 1, b, b, 3000, CAIS_FLOAT32, CAIS_OP_SUM, &req);
	if (rc == 0)
		rc = cais_wait_status(req, &st);
	if (rc == 0 && (st.path != CAIS_PATH_SWITCH || !(st.rel_error > 1e-3))) {
		print_message("rank %u: path %s, relative error %g\n", rank,
			      cais_path_name(st.path), st.rel_error);
		rc = -1;
	}
	free(b);
	return rc;
}

/* Sampled error against the ring; a switch that corrupts sums trips the alarm. */
static void
t_error_alarm(void **state)
{
	struct setup_opts o = default_opts;
	struct coll k = {.dt = CAIS_FLOAT32,
			 .count = 3000,
			 .iters = 2,
			 .tensor = 1,
			 .want_path = CAIS_PATH_SWITCH};
	struct cais_metrics m;

	(void)state;
	o.check_every = 1;
	setup_comms(&o);
	run_ranks(run_coll, &k);
	/* bf16 and fp16 outputs: their own rounding is not the switch's error */
	k.dt = CAIS_BFLOAT16;
	run_ranks(run_coll, &k);
	k.dt = CAIS_FLOAT16;
	run_ranks(run_coll, &k);
	k.dt = CAIS_FLOAT32;
	assert_int_equal(cais_metrics_get(COMM[0], &m), 0);
	print_message("sampled relative error: at most %g\n", m.max_rel_error);
	assert_int_equal(m.error_checks, 6);
	assert_true(m.max_rel_error < 1e-3);
	assert_int_equal(m.tensors_disabled, 0);
	/* now the switch adds 1.0 (1024 at scale 1024) to every element */
	atomic_store(&SW->corrupt, 1024);
	run_ranks(run_corrupt, NULL);
	for (unsigned int r = 0; r < N; r++) {
		assert_int_equal(cais_metrics_get(COMM[r], &m), 0);
		assert_int_equal(m.tensors_disabled, 1);
	}
	/* every rank saw the same error: tensor 1 leaves the switch everywhere */
	k.want_path = CAIS_PATH_RING;
	k.want_fb = CAIS_FB_ERROR_ALARM;
	run_ranks(run_coll, &k);
	teardown_comms();
}

/* A rank that never comes: the others end with -ETIMEDOUT within the bound. */
static int
run_timeout(unsigned int rank, void *arg)
{
	float b[100];
	uint64_t t0 = now_ms();
	int rc;

	(void)arg;
	if (rank == 1)
		return 0;
	fill(b, CAIS_FLOAT32, rank, 100, 0);
	rc = cais_allreduce(COMM[rank], 1, b, b, 100, CAIS_FLOAT32, CAIS_OP_SUM);
	if (rc != -ETIMEDOUT || now_ms() - t0 > 3000) {
		print_message("rank %u: %s after %llu ms\n", rank, cais_strerror(rc),
			      (unsigned long long)(now_ms() - t0));
		return -1;
	}
	return 0;
}

static void
t_timeout(void **state)
{
	struct setup_opts o = default_opts;

	(void)state;
	o.n = 2;
	o.timeout_ms = 1000;
	setup_comms(&o);
	run_ranks(run_timeout, NULL);
	teardown_comms();
}

/* Bad configurations and arguments. */
static void
t_errors(void **state)
{
	struct cais_config cfg;
	struct cais_comm *c;
	struct sockaddr_in peers[2];
	float x[4] = {0};
	struct cais_request *req;

	(void)state;
	setup_comms(&default_opts);
	for (int i = 0; i < 2; i++) {
		peers[i].sin_family = AF_INET;
		peers[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		peers[i].sin_port = htons(free_port());
	}
	cais_config_init(&cfg);
	/* the documented defaults (the threshold is bench/e2e.sh's crossover) */
	assert_int_equal(cfg.threshold, 512 * 1024);
	assert_int_equal(cfg.retx_timeout_us, 500);
	assert_int_equal(cfg.retries, 8);
	assert_int_equal(cfg.timeout_ms, 30000);
	cfg.world = 2;
	cfg.peers = peers;
	cfg.switch_addr = SW->addr;
	cfg.rank = 2;
	assert_int_equal(cais_comm_create(&cfg, &c), -EINVAL);
	cfg.rank = 0;
	cfg.slots = 12;
	assert_int_equal(cais_comm_create(&cfg, &c), -EINVAL);
	cfg.slots = 8;
	cfg.elems = 4096;
	assert_int_equal(cais_comm_create(&cfg, &c), -EINVAL);
	cfg.elems = 64;
	cfg.scale = 0;
	assert_int_equal(cais_comm_create(&cfg, &c), -EINVAL);
	cfg.scale = 1;
	cfg.peers = NULL;
	assert_int_equal(cais_comm_create(&cfg, &c), -EINVAL);
	{ /* stripes: a power of two, at most the flows, each an address */
		struct sockaddr_in st[3] = {SW->addr, SW->addr, SW->addr};

		cfg.stripes = st;
		cfg.nstripes = 2; /* one flow */
		assert_int_equal(cais_comm_create(&cfg, &c), -EINVAL);
		cfg.threads = 4;
		cfg.nstripes = 3;
		assert_int_equal(cais_comm_create(&cfg, &c), -EINVAL);
		cfg.nstripes = 2;
		cfg.stripes = NULL;
		assert_int_equal(cais_comm_create(&cfg, &c), -EINVAL);
		st[1].sin_family = AF_UNSPEC;
		cfg.stripes = st;
		assert_int_equal(cais_comm_create(&cfg, &c), -EINVAL);
		cfg.stripes = NULL;
		cfg.nstripes = 0;
		cfg.threads = 0;
	}
	cfg.peers = PEERS; /* rank 0's address is taken by COMM[0] */
	assert_int_equal(cais_comm_create(&cfg, &c), -EADDRINUSE);
	assert_int_equal(cais_iallreduce(COMM[0], 1, x, x, 0, CAIS_FLOAT32, CAIS_OP_SUM, &req),
			 -EINVAL);
	assert_int_equal(
	    cais_iallreduce(COMM[0], 1, x, x, 4, (enum cais_datatype)9, CAIS_OP_SUM, &req),
	    -EINVAL);
	assert_int_equal(cais_iallreduce(COMM[0], 1, x, x + 1, 3, CAIS_FLOAT32, CAIS_OP_SUM, &req),
			 -EINVAL);
	assert_int_equal(cais_tensor_set(COMM[0], 1, -1, true), -EINVAL);
	assert_int_equal(cais_set_path(COMM[0], (enum cais_path)7), -EINVAL);
	assert_string_equal(cais_strerror(-ETIMEDOUT),
			    "the collective did not complete within the configured bound "
			    "(timeout_ms)");
	assert_string_equal(cais_datatype_name(CAIS_BFLOAT16), "bf16");
	assert_string_equal(
	    cais_fallback_name(CAIS_FB_OVERFLOW),
	    "fixed point overflowed (OVERFLOW, or a value beyond the scale's range)");
	teardown_comms();
}

/* ---- joining through a (fake) manager ---- */

/* The steps of run_joined(); fail: rank 1's step.begin of FM_FAIL_STEP fails. */
#define FM_STEPS     6u
#define FM_FAIL_STEP 3u

struct fake_mgr {
	struct ctl_endpoint *ep;
	pthread_t thread;
	bool running; /**< its thread started and not yet joined */
	atomic_bool stop;
	pthread_mutex_t lock;
	unsigned int joined, registered, reports;
	unsigned int step_calls;    /**< step.begin requests, refused ones included */
	unsigned int stats_reports; /**< of reports: those by stats.report */
	bool old;		    /**< a manager before E13: no "report" in step.begin */
	bool fail;		    /**< scales per step; rank 1 fails FM_FAIL_STEP */
	bool silent;		    /**< no answer from SILENT_FROM (run_silent()) */
	bool silenced;		    /**< silent: the silence has been kept */
	uint64_t asked[CAIS_MAX_WORLD]; /**< the steps each rank asked for (bit s) */
	unsigned int lcores;	  /**< job.register's answer */
	unsigned int ports[CAIS_MAX_WORLD]; /**< each rank's job.join "ports" */
	json_t *members;
	uint64_t last_step;
	double last_maxabs;
};

/*
 * run_silent(): the manager answers no step.begin from step SILENT_FROM until
 * every rank is in step SILENT_TO - 1; a rank asks again after 1, 2, 4, ...
 * steps, so at SILENT_FROM, 5 and 8, and then at SILENT_TO, answered.
 */
#define SILENT_FROM  3u
#define SILENT_TO    13u
#define SILENT_STEPS 15u

/* The step each rank of run_silent() is in. */
static atomic_uint RANK_STEP[MAXN];

/* The rank a request names, or CAIS_MAX_WORLD. */
static unsigned int
rank_of(const json_t *a)
{
	json_int_t r = json_integer_value(json_object_get(a, "rank"));

	return r >= 0 && r < CAIS_MAX_WORLD ? (unsigned int)r : CAIS_MAX_WORLD;
}

/*
 * The manager's thread stops until every rank is in step SILENT_TO - 1 (60 s
 * at most): the requests meanwhile wait in its socket, and their answers,
 * when it goes on, find no one waiting.
 */
static void
fm_keep_silent(void)
{
	for (unsigned int ms = 0; ms < 60000; ms++) {
		unsigned int r;

		for (r = 0; r < N && atomic_load(&RANK_STEP[r]) >= SILENT_TO - 1; r++)
			;
		if (r == N)
			return;
		usleep(1000);
	}
	print_message("the silent manager: the ranks did not reach step %u in 60 s\n",
		      SILENT_TO - 1);
}

/* A step's report, by stats.report or in step.begin (E13). */
static void
fm_take_report(struct fake_mgr *f, const json_t *r)
{
	const json_t *t = json_array_get(json_object_get(r, "tensors"), 0);

	f->reports++;
	if (t)
		f->last_maxabs = json_number_value(json_object_get(t, "max_abs"));
}

static int
fm_handle(void *ctx, const json_t *req, json_t *res, struct ctl_err *err)
{
	struct fake_mgr *f = ctx;
	const char *cmd = json_string_value(json_object_get(req, "cmd"));
	const json_t *a = json_object_get(req, "args");
	int rc = 0;

	pthread_mutex_lock(&f->lock);
	if (!strcmp(cmd, "job.register")) {
		f->registered++;
		json_object_set_new(res, "lcores", json_integer(f->lcores));
	} else if (!strcmp(cmd, "job.join") || !strcmp(cmd, "job.status")) {
		if (!strcmp(cmd, "job.join")) {
			unsigned int r = rank_of(a);

			/* a join sent again (its answer was late) counts once, as the
			 * manager's does */
			if (r < CAIS_MAX_WORLD && !f->ports[r]) {
				f->ports[r] = (unsigned int)json_integer_value(
				    json_object_get(a, "ports"));
				json_array_append_new(f->members,
						      json_pack("{s:O, s:O, s:O}", "rank",
								json_object_get(a, "rank"), "ip",
								json_object_get(a, "ip"), "port",
								json_object_get(a, "port")));
				f->joined++;
			}
		}
		if (f->joined < N) {
			json_object_set_new(res, "state", json_string("waiting"));
		} else {
			char sw[64];

			snprintf(sw, sizeof(sw), "127.0.0.1:%u", ntohs(SW->addr.sin_port));
			json_object_set_new(res, "state", json_string("ready"));
			json_object_set_new(res, "tenant", json_integer(1));
			json_object_set_new(res, "session", json_integer(1));
			json_object_set_new(res, "switch", json_string(sw));
			json_object_set_new(res, "slots", json_integer(64));
			json_object_set_new(res, "elems_per_packet", json_integer(256));
			json_object_set_new(res, "first_seq", json_integer(1000));
			json_object_set_new(res, "offload", json_true());
			json_object_set(res, "members", f->members);
		}
	} else if (!strcmp(cmd, "tensor.register")) {
		/* nothing to keep */
	} else if (!strcmp(cmd, "step.begin")) {
		uint64_t step = (uint64_t)json_integer_value(json_object_get(a, "step"));
		const json_t *r = json_object_get(a, "report");
		unsigned int rank = rank_of(a);

		f->step_calls++;
		if (rank < CAIS_MAX_WORLD && step < 64)
			f->asked[rank] |= 1ull << step;
		if (f->silent && step == SILENT_FROM && !f->silenced) {
			f->silenced = true;
			pthread_mutex_unlock(&f->lock);
			fm_keep_silent();
			pthread_mutex_lock(&f->lock);
		}
		if (f->fail && step == FM_FAIL_STEP && rank == 1) {
			pthread_mutex_unlock(&f->lock);
			return ctl_fail(err, EIO, "the store failed (injected)");
		}
		if (r && f->old) {
			pthread_mutex_unlock(&f->lock);
			return ctl_fail(err, EINVAL, "unknown field 'report'");
		}
		if (r) {
			/* the step that ends, of this rank */
			if (json_integer_value(json_object_get(r, "step")) + 1 !=
				(json_int_t)step ||
			    json_integer_value(json_object_get(r, "rank")) !=
				json_integer_value(json_object_get(a, "rank"))) {
				pthread_mutex_unlock(&f->lock);
				return ctl_fail(err, EINVAL, "report: not the step before");
			}
			fm_take_report(f, r);
		}
		f->last_step = step;
		/* even steps: tensor 1 on the switch at scale 2048; odd: off the
		 * switch. fail: always on it, at 2048 x 2^step; silent: always on
		 * it, at 2048 */
		json_object_set_new(res, "step", json_integer((json_int_t)step));
		json_object_set_new(res, "offload",
				    step % 2 && !f->fail && !f->silent ? json_array()
								       : json_pack("[i]", 1));
		json_object_set_new(res, "scales",
				    json_pack("[{s:i, s:f}]", "tensor", 1, "scale",
					      f->fail ? ldexp(2048.0, (int)step) : 2048.0));
	} else if (!strcmp(cmd, "stats.report")) {
		f->stats_reports++;
		fm_take_report(f, a);
	} else {
		rc = ctl_fail(err, EINVAL, "unknown command '%s'", cmd);
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static void *
fm_main(void *arg)
{
	struct fake_mgr *f = arg;

	while (!atomic_load(&f->stop))
		ctl_endpoint_poll(f->ep, 20);
	return NULL;
}

static struct fake_mgr FM;

/* An int32 all-reduce of tensor 1 in its first step: on the switch, exact
 * (the ring of a float tensor's first steps is for the scale). */
static int
int32_first(struct cais_comm *c)
{
	int32_t v[300];
	struct cais_request *req;
	struct cais_status st;
	int rc;

	for (unsigned int i = 0; i < 300; i++)
		v[i] = (int32_t)i - 100;
	rc = cais_iallreduce(c, 1, v, v, 300, CAIS_INT32, CAIS_OP_SUM, &req);
	if (rc == 0)
		rc = cais_wait_status(req, &st);
	if (rc == 0 && st.path != CAIS_PATH_SWITCH)
		return -1004;
	for (unsigned int i = 0; i < 300 && rc == 0; i++)
		if (v[i] != ((int32_t)i - 100) * (int32_t)N)
			rc = -1005;
	return rc;
}

/*
 * Rank `rank` joins job-a through the manager at addr into COMM[rank] and
 * registers tensor 1 (sum, float32). @return rc
 */
static int
join_job(unsigned int rank, const char *addr)
{
	struct cais_join j = {.manager = addr,
			      .job = "job-a",
			      .tenant = "team-b",
			      .rank = rank,
			      .world = N,
			      .data = PEERS[rank],
			      /* every rank joined: a bound, not a wait (one CI run
			       * under ASan saw rank 0 wait 10 s; not reproduced) */
			      .timeout_ms = 30000};
	struct cais_config tmpl;
	cpu_set_t cpus;
	int rc;

	/* one CPU: the flows one per CPU would be 1, fewer than the lcores */
	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) {
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &cpus)) {
				CPU_ZERO(&cpus);
				CPU_SET(c, &cpus);
				break;
			}
		sched_setaffinity(0, sizeof(cpus), &cpus);
	}
	cais_config_init(&tmpl);
	tmpl.threshold = 0;
	tmpl.check_every = 0;
	rc = cais_comm_join(&j, &tmpl, &COMM[rank]);
	if (rc) {
		print_message("rank %u: cais_comm_join: %d\n", rank, rc);
		return rc;
	}
	return cais_tensor_register(COMM[rank], 1, CAIS_OP_SUM, CAIS_FLOAT32);
}

/*
 * Step `step`'s all-reduce of tensor 1 (5000 floats in b) on COMM[rank]: its
 * result right (scale 2048), and on the switch if innet, else on the ring.
 * @return rc
 */
static int
step_allreduce(unsigned int rank, float *b, unsigned int step, bool innet, struct cais_status *st)
{
	struct cais_request *req;
	int rc;

	fill(b, CAIS_FLOAT32, rank, 5000, step);
	rc = cais_iallreduce(COMM[rank], 1, b, b, 5000, CAIS_FLOAT32, CAIS_OP_SUM, &req);
	if (rc == 0)
		rc = cais_wait_status(req, st);
	if (rc == 0 && check(b, CAIS_FLOAT32, CAIS_OP_SUM, 5000, step, 2048))
		rc = -1000;
	if (rc == 0 && st->path != (innet ? CAIS_PATH_SWITCH : CAIS_PATH_RING))
		rc = -1001;
	return rc;
}

static int
run_joined(unsigned int rank, void *arg)
{
	float *b;
	int rc = join_job(rank, arg);

	if (rc)
		return rc;
	b = malloc(5000 * sizeof(float));
	for (unsigned int step = 0; step < FM_STEPS && rc == 0; step++) {
		struct cais_status st;
		/* the ring in the tensor's first two steps, whatever the manager's
		 * list; then the list decides, the same on every rank (fail: on
		 * the switch but at FM_FAIL_STEP, where rank 1 had no answer and
		 * took the ring, and the others with it) */
		bool innet = step >= 2 && (FM.fail ? step != FM_FAIL_STEP : step % 2 == 0);

		rc = cais_step_begin(COMM[rank], step);
		if (FM.fail && rank == 1 && step == FM_FAIL_STEP)
			rc = rc ? 0 : -1002; /* it must fail; the step goes on */
		if (rc == 0 && step == 0)
			rc = int32_first(COMM[rank]);
		if (rc == 0)
			rc = step_allreduce(rank, b, step, innet, &st);
		if (rc == 0 && !innet && st.fallback != CAIS_FB_TENSOR_OFF &&
		    !(FM.fail && step == FM_FAIL_STEP))
			rc = -1003;
		if (rc)
			print_message("rank %u: step %u: %d\n", rank, step, rc);
	}
	free(b);
	return rc;
}

/*
 * Four ranks, the fake switch, and the fake manager FM (set to `old`, `fail`
 * or `silent`) on its thread; addr: the manager's address.
 */
static void
fm_start(bool old, bool fail, bool silent, char addr[64])
{
	struct ctl_endpoint_conf ec = {.handler = fm_handle, .handler_ctx = &FM};

	N = 4;
	SW = fs_start(N, 64);
	peers_apart(4); /* each rank's 4 flows (below) */
	memset(&FM, 0, sizeof(FM));
	FM.old = old;
	FM.fail = fail;
	FM.silent = silent;
	/* a switch of 4 lcores: each rank's flows at least 4, a multiple of it */
	FM.lcores = 4;
	pthread_mutex_init(&FM.lock, NULL);
	FM.members = json_array();
	ec.addr.sin_family = AF_INET;
	ec.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ec.addr.sin_port = htons(free_port());
	assert_int_equal(ctl_endpoint_open(&ec, &FM.ep), 0);
	assert_int_equal(pthread_create(&FM.thread, NULL, fm_main, &FM), 0);
	FM.running = true;
	snprintf(addr, 64, "127.0.0.1:%u", ntohs(ec.addr.sin_port));
}

/* The fake manager's thread and endpoint, if they run. */
static void
fm_end(void)
{
	if (!FM.running)
		return;
	atomic_store(&FM.stop, true);
	pthread_join(FM.thread, NULL);
	FM.running = false;
	ctl_endpoint_close(FM.ep);
	json_decref(FM.members);
}

static void
fm_stop(void)
{
	fm_end();
	teardown_comms();
}

/*
 * After every test, what a failed one left running (one that passed has
 * stopped it all): the fake manager, the ranks' communicators, the fake
 * switches. The next test would otherwise run beside them, and fail too.
 */
static int
leftovers(void **state)
{
	(void)state;
	fm_end();
	for (unsigned int r = 0; r < MAXN; r++) {
		if (COMM[r])
			cais_comm_destroy(COMM[r]);
		COMM[r] = NULL;
	}
	stop_switches();
	return 0;
}

/*
 * Four ranks join a job through a (fake) manager and run FM_STEPS steps:
 * tensor 1 on the ring in its first two steps, then where the manager's
 * list says (int32 on the switch from the first). Every step's report
 * reaches the manager: in step.begin (one request a step), or, from a
 * manager before E13 (`old`: it refuses the field), by stats.report after
 * the first refusal.
 */
static void
join_manager(bool old, bool fail)
{
	char addr[64];

	fm_start(old, fail, false, addr);
	run_ranks(run_joined, addr);
	assert_int_equal(FM.registered, N);
	assert_int_equal(FM.joined, N);
	for (unsigned int r = 0; r < N; r++)
		if (FM.ports[r] < 4 || FM.ports[r] % 4)
			fail_msg("rank %u joined with %u flows; the switch has 4 lcores", r,
				 FM.ports[r]);
	/* steps 1.. report the step before (fail: rank 1's of FM_FAIL_STEP - 1
	 * went with its failed step.begin) */
	assert_int_equal(FM.reports, (FM_STEPS - 1) * N - fail);
	assert_true(FM.last_maxabs > 0);
	if (old) {
		/* step 1's refused, then every report apart */
		assert_int_equal(FM.step_calls, (FM_STEPS + 1) * N);
		assert_int_equal(FM.stats_reports, (FM_STEPS - 1) * N);
	} else {
		assert_int_equal(FM.step_calls, FM_STEPS * N);
		assert_int_equal(FM.stats_reports, 0);
	}
	fm_stop();
}

static void
t_join_manager(void **state)
{
	(void)state;
	join_manager(false, false);
}

static void
t_join_manager_old(void **state)
{
	(void)state;
	join_manager(true, false);
}

/*
 * Rank 1 gets no answer to step 3's step.begin, the others do, at a scale
 * of their own (each step's is another): rank 1's collective of that step
 * must not go to the switch at its old scale beside theirs. Every rank's
 * result right at every step.
 */
static void
t_join_manager_step_fails(void **state)
{
	(void)state;
	join_manager(false, true);
}

/*
 * The steps of run_silent(): cais_step_begin's rc (the manager answers
 * none from SILENT_FROM; asked at 3, 5 and 8, not at the steps between),
 * and whether tensor 1 goes to the switch (the ring in its first two steps,
 * and without an answer).
 */
static int
silent_rc(unsigned int step)
{
	if (step < SILENT_FROM || step >= SILENT_TO)
		return 0;
	return step == 3 || step == 5 || step == 8 ? -ETIMEDOUT : -EAGAIN;
}

static int
run_silent(unsigned int rank, void *arg)
{
	float *b;
	int rc = join_job(rank, arg);

	if (rc)
		return rc;
	b = malloc(5000 * sizeof(float));
	for (unsigned int step = 0; step < SILENT_STEPS && rc == 0; step++) {
		struct cais_status st;
		int src;

		atomic_store(&RANK_STEP[rank], step);
		src = cais_step_begin(COMM[rank], step);
		if (src != silent_rc(step)) {
			print_message("rank %u: step %u: cais_step_begin %d, want %d\n", rank, step,
				      src, silent_rc(step));
			rc = -1006;
		}
		if (rc == 0)
			rc = step_allreduce(rank, b, step, step == 2 || step >= SILENT_TO, &st);
		if (rc)
			print_message("rank %u: step %u: %d\n", rank, step, rc);
	}
	free(b);
	return rc;
}

/*
 * The manager stops answering at step 3 and is back by step 13: each rank
 * asks at 3, 5 and 8 (each 0.5 s without an answer), not at the steps
 * between, nor at 9-12 (AG_STEP_SKIP_MAX: a manager that is down costs one
 * wait per up to 64 steps, not one per step); at 13 it asks and is answered,
 * and tensor 1 is back on the switch. Every result right, on the ring while
 * there is no answer.
 */
static void
t_join_manager_silent(void **state)
{
	const uint64_t want = 1ull << 0 | 1ull << 1 | 1ull << 2 | 1ull << 3 | 1ull << 5 |
			      1ull << 8 | 1ull << 13 | 1ull << 14;
	char addr[64];

	(void)state;
	for (unsigned int r = 0; r < MAXN; r++)
		atomic_store(&RANK_STEP[r], 0);
	fm_start(false, false, true, addr);
	run_ranks(run_silent, addr);
	assert_true(FM.silenced);
	for (unsigned int r = 0; r < N; r++)
		if (FM.asked[r] != want)
			fail_msg("rank %u asked for the steps %#llx, want %#llx", r,
				 (unsigned long long)FM.asked[r], (unsigned long long)want);
	fm_stop();
}

/* Did each rank's flows i send to stripe i mod 2 only (their ports p + i)? */
static void
assert_stripe_ports(const struct fake_switch *s, unsigned int stripe)
{
	for (unsigned int r = 0; r < N; r++) {
		assert_int_equal(s->n_ports[r], THREADS / 2);
		for (unsigned int k = 0; k < s->n_ports[r]; k++)
			assert_int_equal((ntohs(s->ports[r][k]) - ntohs(PEERS[r].sin_port)) % 2,
					 stripe);
	}
}

/*
 * One session striped over two switch servers (docs/PROTOCOL.md E8): four
 * flows per rank, flows 0 and 2 to the first, 1 and 3 to the second, each
 * switch the seqs of its parity. Every dtype and op, loss at one stripe,
 * then one stripe silent: the ring, every rank right; then both again.
 */
static void
t_stripes(void **state)
{
	static const size_t counts[] = {1, 256, 257, 5000};
	struct setup_opts o = default_opts;
	struct coll k = {.dt = CAIS_FLOAT32,
			 .count = 20000,
			 .iters = 3,
			 .tensor = 1,
			 .want_path = CAIS_PATH_SWITCH};
	uint64_t r1, r2;

	(void)state;
	THREADS = 4;
	o.stripes = true;
	setup_comms(&o);
	every_dt_op(counts, sizeof(counts) / sizeof(counts[0]), CAIS_PATH_SWITCH, CAIS_FB_NONE);
	r1 = atomic_load(&SW->rounds);
	r2 = atomic_load(&SW2->rounds);
	print_message("stripes: %llu and %llu rounds\n", (unsigned long long)r1,
		      (unsigned long long)r2);
	/* 4 dtypes x 4 ops x 2 iterations of 1 + 1 + 2 + 20 chunks; seqs run on across
	 * collectives, so each server gets about half */
	assert_int_equal(r1 + r2, 4 * 4 * 2 * (1 + 1 + 2 + 20));
	assert_true(r1 >= 300 && r2 >= 300);
	assert_stripe_ports(SW, 0);
	assert_stripe_ports(SW2, 1);
	atomic_store(&SW2->data_loss_pct, 5);
	atomic_store(&SW2->result_loss_pct, 5);
	atomic_store(&SW2->dup_pct, 10);
	run_ranks(run_coll, &k);
	atomic_store(&SW2->data_loss_pct, 0);
	atomic_store(&SW2->result_loss_pct, 0);
	atomic_store(&SW2->dup_pct, 0);
	assert_int_equal(METRIC(in_network), METRIC(collectives));
	assert_int_equal(atomic_load(&SW->window_violations), 0);
	assert_int_equal(atomic_load(&SW2->window_violations), 0);
	/* the second server gone: its chunks are silent, nobody has them, the ring */
	atomic_store(&SW2->silent, 1);
	k.want_path = CAIS_PATH_RING;
	k.want_fb = CAIS_FB_SILENT;
	k.iters = 1;
	run_ranks(run_coll, &k);
	atomic_store(&SW2->silent, 0);
	k.want_path = CAIS_PATH_SWITCH;
	k.want_fb = CAIS_FB_NONE;
	run_ranks(run_coll, &k);
	teardown_comms();
	THREADS = 1;
}

/*
 * Four flows per rank (cais_config.threads): each its own socket and port,
 * carrying the seqs that are its index modulo 4; the guarantees of one
 * flow, with loss, duplicates, lost RESULTs, a silent and a restarted
 * switch, BLOCK16, in place, the error check.
 */
static void
t_flows(void **state)
{
	struct coll k = {.dt = CAIS_BFLOAT16,
			 .count = 100000,
			 .iters = 2,
			 .tensor = 1,
			 .want_path = CAIS_PATH_SWITCH};

	THREADS = 4;
	setup_comms(&default_opts);
	run_ranks(run_coll, &k);
	for (unsigned int r = 0; r < N; r++) /* every rank sent from its 4 ports */
		assert_int_equal(SW->n_ports[r], 4);
	assert_int_equal(atomic_load(&SW->window_violations), 0);
	teardown_comms();
	t_basic(state);
	t_block16(state);
	t_loss(state);
	t_results_lost_one_rank(state);
	t_silent(state);
	t_acked_never_done(state);
	t_restart(state);
	t_in_place(state);
	t_error_alarm(state);
	THREADS = 1;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(t_basic, leftovers),
	    cmocka_unit_test_teardown(t_ring, leftovers),
	    cmocka_unit_test_teardown(t_block16, leftovers),
	    cmocka_unit_test_teardown(t_block16_refused, leftovers),
	    cmocka_unit_test_teardown(t_threshold, leftovers),
	    cmocka_unit_test_teardown(t_loss, leftovers),
	    cmocka_unit_test_teardown(t_reject, leftovers),
	    cmocka_unit_test_teardown(t_fwd_only, leftovers),
	    cmocka_unit_test_teardown(t_silent, leftovers),
	    cmocka_unit_test_teardown(t_acked_never_done, leftovers),
	    cmocka_unit_test_teardown(t_results_lost_one_rank, leftovers),
	    cmocka_unit_test_teardown(t_data_lost_one_rank, leftovers),
	    cmocka_unit_test_teardown(t_overflow, leftovers),
	    cmocka_unit_test_teardown(t_saturated_input, leftovers),
	    cmocka_unit_test_teardown(t_in_place, leftovers),
	    cmocka_unit_test_teardown(t_outstanding, leftovers),
	    cmocka_unit_test_teardown(t_slow_rank, leftovers),
	    cmocka_unit_test_teardown(t_stall, leftovers),
	    cmocka_unit_test_teardown(t_restart, leftovers),
	    cmocka_unit_test_teardown(t_error_alarm, leftovers),
	    cmocka_unit_test_teardown(t_timeout, leftovers),
	    cmocka_unit_test_teardown(t_errors, leftovers),
	    cmocka_unit_test_teardown(t_join_manager, leftovers),
	    cmocka_unit_test_teardown(t_flows, leftovers),
	    cmocka_unit_test_teardown(t_stripes, leftovers),
	    cmocka_unit_test_teardown(t_join_manager_old, leftovers),
	    cmocka_unit_test_teardown(t_join_manager_step_fails, leftovers),
	    cmocka_unit_test_teardown(t_join_manager_silent, leftovers),
	};

	signal(SIGPIPE, SIG_IGN);
	/* when debugging: CAIS_TEST_FILTER, one test or a pattern; CAIS_TEST_VERBOSE,
	 * each collective's path and time */
	if (getenv("CAIS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("CAIS_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
