/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The match tables: the table operations' errors, and adds/deletes by the
 * control side while another lcore looks entries up and runs traffic
 * through the pipeline (lock-free readers, RCU reclamation).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <rte_launch.h>

#include "dp_rcu.h"
#include "test_env.h"

static struct tenv *E;
static struct tf_end AGG, H[4];

static int ctl(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static struct ctl_err last_err;

static int
ctl(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return tenv_ctl(E, buf, &last_err);
}

#define MEMBERS4                                                                                   \
	"[{\"rank\":0,\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.1\",\"port\":40000},"          \
	"{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":40001},"           \
	"{\"rank\":2,\"mac\":\"02:00:00:00:00:03\",\"ip\":\"10.0.0.3\",\"port\":40002},"           \
	"{\"rank\":3,\"mac\":\"02:00:00:00:00:04\",\"ip\":\"10.0.0.4\",\"port\":40003}]"

static int
add_session(unsigned int t, unsigned int s, unsigned int slots, unsigned int elems)
{
	return ctl("{\"cmd\":\"session.add\",\"args\":{\"tenant\":%u,\"session\":%u,\"n\":4,"
		   "\"slots\":%u,\"elems_per_packet\":%u,\"members\":" MEMBERS4 "}}",
		   t, s, slots, elems);
}

static int
add_tensor(unsigned int t, unsigned int s, unsigned int x)
{
	return ctl("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":%u,\"session\":%u,\"tensor\":%u,"
		   "\"op\":\"sum\",\"scale\":64}}",
		   t, s, x);
}

static int
setup(void **state)
{
	(void)state;
	E = tenv_create(&AGG, 4, 2);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	tenv_free(E);
	return 0;
}

static void
t_errors(void **state)
{
	(void)state;
	assert_int_equal(add_session(1, 1, 128, 64), 0);
	assert_int_equal(E->sw->tables.slots_used, 128);
	assert_int_equal(add_session(1, 1, 8, 64), -EEXIST);
	assert_int_equal(add_tensor(1, 2, 1), -ENOENT);
	assert_int_equal(add_tensor(1, 1, 1), 0);
	assert_int_equal(add_tensor(1, 1, 1), -EEXIST);
	assert_int_equal(add_tensor(1, 1, 2), 0);
	assert_non_null(dp_tensor_lookup(&E->sw->tables, dp_tensor_key(1, 1, 2)));
	assert_int_equal(ctl("{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,\"session\":1,"
			     "\"tensor\":3}}"),
			 -ENOENT);
	assert_int_equal(ctl("{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,\"session\":1,"
			     "\"tensor\":2}}"),
			 0);
	assert_null(dp_tensor_lookup(&E->sw->tables, dp_tensor_key(1, 1, 2)));
	assert_int_equal(E->sw->tables.n_tensors, 1);
	assert_int_equal(ctl("{\"cmd\":\"session.del\",\"args\":{\"tenant\":9,\"session\":1}}"),
			 -ENOENT);

	/* slot-usage threshold: 0.003 of 65536 = 196 slots; 128 used, 128 more is refused */
	assert_int_equal(ctl("{\"cmd\":\"thresholds.set\",\"args\":{\"slot_usage\":0.003}}"), 0);
	assert_int_equal(add_session(2, 1, 128, 64), -ENOSPC);
	assert_non_null(strstr(last_err.msg, "slots"));
	assert_int_equal(E->sw->tables.n_sessions, 1);
	assert_int_equal(E->sw->tables.slots_used, 128);
	assert_int_equal(add_session(2, 1, 64, 64), 0);
	assert_int_equal(E->sw->tables.slots_used, 192);

	/* deleting a session frees its slots and removes its tensors */
	assert_int_equal(ctl("{\"cmd\":\"session.del\",\"args\":{\"tenant\":1,\"session\":1}}"), 0);
	assert_null(dp_tensor_lookup(&E->sw->tables, dp_tensor_key(1, 1, 1)));
	assert_int_equal(E->sw->tables.n_tensors, 0);
	assert_int_equal(E->sw->tables.slots_used, 64);
	assert_int_equal(add_session(2, 2, 128, 64), 0);

	/* the pool is split between the lcores: slot i belongs to lcore i mod 2 */
	{
		const struct dp_tensor *t;

		assert_int_equal(add_tensor(2, 1, 5), 0);
		t = dp_tensor_lookup(&E->sw->tables, dp_tensor_key(2, 1, 5));
		assert_non_null(t);
		assert_int_equal(t->s->part[0].n_local, 32);
		assert_int_equal(t->s->part[1].n_local, 32);
	}
}

/* The wire dtype of a tensor entry: from tensor.add, checked, shown by stats.get. */
static void
t_wire(void **state)
{
	struct dp_tensor_conf c = {.tenant = 1, .session = 1, .tensor = 9, .op = CAIS_OP_SUM};
	struct dp_err why;
	const struct dp_tensor *t;
	json_t *st, *tensors, *x;
	size_t i;

	(void)state;
	assert_int_equal(add_session(1, 1, 8, 64), 0);
	assert_int_equal(add_tensor(1, 1, 1), 0);
	assert_int_equal(ctl("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":1,"
			     "\"tensor\":2,\"op\":\"max\",\"scale\":1,\"wire\":\"block16\"}}"),
			 0);
	assert_int_equal(ctl("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":1,"
			     "\"tensor\":3,\"op\":\"sum\",\"scale\":1,\"wire\":\"fixed32\"}}"),
			 0);
	assert_int_equal(ctl("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":1,"
			     "\"tensor\":4,\"op\":\"sum\",\"scale\":1,\"wire\":\"block8\"}}"),
			 -EINVAL);
	t = dp_tensor_lookup(&E->sw->tables, dp_tensor_key(1, 1, 1));
	assert_int_equal(t->wire, CAIS_DT_FIXED32); /* the default */
	t = dp_tensor_lookup(&E->sw->tables, dp_tensor_key(1, 1, 2));
	assert_int_equal(t->wire, CAIS_DT_BLOCK16);
	assert_int_equal(t->op, CAIS_OP_MAX);
	t = dp_tensor_lookup(&E->sw->tables, dp_tensor_key(1, 1, 3));
	assert_int_equal(t->wire, CAIS_DT_FIXED32);
	assert_null(dp_tensor_lookup(&E->sw->tables, dp_tensor_key(1, 1, 4)));
	/* the table operation refuses a dtype it has no kernels for, whoever calls it */
	c.wire = CAIS_DT_COUNT;
	assert_int_equal(dp_tensor_add(&E->sw->tables, &c, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "wire"));
	assert_null(dp_tensor_lookup(&E->sw->tables, dp_tensor_key(1, 1, 9)));
	assert_int_equal(E->sw->tables.n_tensors, 3);
	/* stats.get names it per tensor */
	st = json_object();
	assert_int_equal(dp_stats_json(E->sw, -1, st), 0);
	tensors = json_object_get(json_array_get(json_object_get(st, "sessions"), 0), "tensors");
	assert_int_equal(json_array_size(tensors), 3);
	json_array_foreach (tensors, i, x) {
		json_int_t id = json_integer_value(json_object_get(x, "tensor"));

		assert_string_equal(json_string_value(json_object_get(x, "wire")),
				    id == 2 ? "block16" : "fixed32");
	}
	json_decref(st);
}

/* ---- concurrency ---- */

#define CHURN_KEYS 64

static volatile int stop;
static uint64_t reader_loops, reader_hits, reader_errors, rounds_ok, rounds_bad;

static void
round_on_lcore1(uint32_t seq)
{
	static uint8_t f[CAIS_FRAME_OVERHEAD + 4 * 64];
	int32_t v[64], want[64];
	struct cais_fields cf;
	size_t len;

	for (unsigned int i = 0; i < 64; i++)
		want[i] = 0;
	for (unsigned int r = 0; r < 4; r++) {
		for (unsigned int i = 0; i < 64; i++) {
			/* seq wraps at 2^16 here: four of them summed stay within int32 */
			v[i] = (int32_t)((seq & 0xFFFF) * 131 + r * 7 + i);
			want[i] += v[i];
		}
		cais_data_fields(&cf, 1, 1, 1, seq, 8, (uint8_t)r, 64);
		len = tf_cais_frame(f, &H[r], &AGG, &cf, v, 64);
		tenv_send_on(E, 1, (uint16_t)r, f, len);
	}
	/* four RESULTs with the exact sum */
	if (E->n_cap != 4) {
		rounds_bad++;
	} else {
		bool good = true;

		for (unsigned int k = 0; k < 4; k++) {
			const uint8_t *p = E->cap[k].data + CAIS_FRAME_OVERHEAD;

			for (unsigned int i = 0; i < 64 && good; i++) {
				uint32_t w;

				memcpy(&w, p + 4 * i, 4);
				good = (int32_t)ntohl(w) == want[i];
			}
		}
		if (good)
			rounds_ok++;
		else
			rounds_bad++;
	}
	tenv_clear(E);
}

/* Lcore 1: traffic on a stable session and lookups of entries being churned. */
static int
reader(void *arg)
{
	uint32_t seq = 0;

	(void)arg;
	dp_rcu_online(E->sw->rcu, 1);
	while (!stop) {
		for (uint32_t k = 0; k < CHURN_KEYS; k++) {
			uint64_t key = dp_tensor_key((uint16_t)(100 + k % 4), 7, k);
			const struct dp_tensor *t = dp_tensor_lookup(&E->sw->tables, key);

			if (!t)
				continue;
			reader_hits++;
			/* an entry seen is complete and not yet freed */
			if (t->key != key || t->tensor != k || t->s->tenant != 100 + k % 4 ||
			    t->s->session != 7 || t->s->n != 4 || t->s->pool != 16 ||
			    t->s->members[3].port != htons(40003) ||
			    t->s->part[1].slots[0].state > DP_SLOT_DONE)
				reader_errors++;
		}
		round_on_lcore1(2 * seq++ + 1); /* odd slots: lcore 1 owns them */
		reader_loops++;
		dp_rcu_quiescent(E->sw->rcu, 1);
	}
	dp_rcu_offline(E->sw->rcu, 1);
	return 0;
}

static void
t_concurrent(void **state)
{
	const unsigned int iters = 300;

	(void)state;
	assert_int_equal(add_session(1, 1, 8, 64), 0);
	assert_int_equal(add_tensor(1, 1, 1), 0);
	stop = 0;
	assert_int_equal(rte_eal_remote_launch(reader, NULL, 1), 0);
	for (unsigned int i = 0; i < iters; i++) {
		unsigned int t = 100 + i % 4;

		assert_int_equal(add_session(t, 7, 16, 32), 0);
		for (unsigned int k = t - 100; k < CHURN_KEYS; k += 4)
			assert_int_equal(add_tensor(t, 7, k), 0);
		/* delete half the tensors one by one, then the session with the rest */
		for (unsigned int k = t - 100; k < CHURN_KEYS; k += 8)
			assert_int_equal(ctl("{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":%u,"
					     "\"session\":7,\"tensor\":%u}}",
					     t, k),
					 0);
		assert_int_equal(ctl("{\"cmd\":\"session.del\",\"args\":{\"tenant\":%u,"
				     "\"session\":7}}",
				     t),
				 0);
		/* and churn the tensor the traffic uses: its rounds may be REJECTed meanwhile */
		if (i % 50 == 49) {
			assert_int_equal(ctl("{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,"
					     "\"session\":1,\"tensor\":2}}"),
					 -ENOENT);
			assert_int_equal(add_tensor(1, 1, 2), 0);
			assert_int_equal(ctl("{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,"
					     "\"session\":1,\"tensor\":2}}"),
					 0);
		}
	}
	stop = 1;
	rte_eal_wait_lcore(1);
	print_message("reader: %" PRIu64 " loops, %" PRIu64 " hits, %" PRIu64
		      " rounds right, %" PRIu64 " wrong\n",
		      reader_loops, reader_hits, rounds_ok, rounds_bad);
	assert_int_equal(reader_errors, 0);
	assert_int_equal(rounds_bad, 0);
	assert_true(rounds_ok > 0);
	assert_int_equal(E->sw->tables.n_sessions, 1);
	assert_int_equal(E->sw->tables.n_tensors, 1);
}

/*
 * The rule of mode and lease (docs/PROTOCOL.md E5, dp_switch.h): an expired
 * lease means forward-only until the next lease or mode.set compute;
 * mode.set forward_only holds whatever leases come; mode.set compute ends
 * the lease.
 */
static void
t_lease_mode(void **state)
{
	struct dp_switch *sw = E->sw;
	uint64_t ms = sw->hz / 1000, now;

	(void)state;
	assert_int_equal(sw->mode, DP_MODE_COMPUTE);
	/* a lease that runs out, then a renewal */
	dp_lease(sw, 10);
	now = rte_rdtsc();
	dp_lease_check(sw, now + 5 * ms);
	assert_int_equal(sw->mode, DP_MODE_COMPUTE);
	dp_lease_check(sw, now + 20 * ms);
	assert_int_equal(sw->mode, DP_MODE_FWD_ONLY);
	dp_lease(sw, 10);
	assert_int_equal(sw->mode, DP_MODE_COMPUTE);
	/* a lease, then mode.set compute: the lease is over, nothing expires */
	dp_mode_set(sw, DP_MODE_COMPUTE);
	assert_int_equal(sw->lease_deadline, 0);
	dp_lease_check(sw, rte_rdtsc() + 1000 * ms);
	assert_int_equal(sw->mode, DP_MODE_COMPUTE);
	/* an expired lease, then mode.set compute: compute */
	dp_lease(sw, 1);
	dp_lease_check(sw, rte_rdtsc() + 5 * ms);
	assert_int_equal(sw->mode, DP_MODE_FWD_ONLY);
	dp_mode_set(sw, DP_MODE_COMPUTE);
	assert_int_equal(sw->mode, DP_MODE_COMPUTE);
	/* mode.set forward_only holds through renewals and expiries */
	dp_lease(sw, 10);
	dp_mode_set(sw, DP_MODE_FWD_ONLY);
	dp_lease(sw, 1000);
	assert_int_equal(sw->mode, DP_MODE_FWD_ONLY);
	dp_lease_check(sw, rte_rdtsc() + 2000 * ms);
	assert_int_equal(sw->mode, DP_MODE_FWD_ONLY);
	dp_lease(sw, 1000);
	assert_int_equal(sw->mode, DP_MODE_FWD_ONLY);
	/* until mode.set compute, which also ends the lease */
	dp_mode_set(sw, DP_MODE_COMPUTE);
	assert_int_equal(sw->mode, DP_MODE_COMPUTE);
	dp_lease_check(sw, rte_rdtsc() + 2000 * ms);
	assert_int_equal(sw->mode, DP_MODE_COMPUTE);
	/* and through the control requests, as an operator gives them */
	assert_int_equal(ctl("{\"cmd\": \"lease\", \"args\": {\"ttl_ms\": 1}}"), 0);
	assert_int_equal(ctl("{\"cmd\": \"mode.set\", \"args\": {\"mode\": \"compute\"}}"), 0);
	dp_lease_check(sw, rte_rdtsc() + 50 * ms);
	assert_int_equal(sw->mode, DP_MODE_COMPUTE);
}

/* stats.get pages (docs/PROTOCOL.md E5): every session once, in key order, each page a datagram. */
static void
t_stats_pages(void **state)
{
	struct ctl_ops ops;
	unsigned int seen = 0, pages = 0;
	int64_t after = -1;
	const unsigned int n = DP_MAX_SESSIONS;

	(void)state;
	for (unsigned int i = 0; i < n; i++)
		assert_int_equal(ctl("{\"cmd\":\"session.add\",\"args\":{\"tenant\":%u,\"session\":%u,"
				     "\"n\":1,\"slots\":1,\"elems_per_packet\":1,\"members\":[{\"rank\":0,"
				     "\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.1\",\"port\":40000}]}}",
				     (n - i) % 7, i),
				 0);
	dp_switch_ctl_ops(E->sw, &ops);
	for (;;) {
		char req[128];
		json_t *r = NULL, *q, *ss, *next;
		struct ctl_err err;
		size_t i, bytes;

		if (after < 0)
			snprintf(req, sizeof(req), "{\"cmd\":\"stats.get\"}");
		else
			snprintf(req, sizeof(req), "{\"cmd\":\"stats.get\",\"args\":{\"after\":%lld}}",
				 (long long)after);
		q = json_loads(req, 0, NULL);
		assert_int_equal(ctl_dispatch(&ops, q, &r, &err), 0);
		json_decref(q);
		pages++;
		bytes = json_dumpb(r, NULL, 0, JSON_COMPACT);
		assert_true(bytes < 60000);
		ss = json_object_get(r, "sessions");
		assert_true(json_array_size(ss) > 0);
		for (i = 0; i < json_array_size(ss); i++) {
			const json_t *o = json_array_get(ss, i);
			int64_t key = json_integer_value(json_object_get(o, "tenant")) << 16 |
				      json_integer_value(json_object_get(o, "session"));

			assert_true(key > after); /* in key order, none twice */
			after = key;
			seen++;
		}
		next = json_object_get(r, "next");
		if (!next) {
			json_decref(r);
			break;
		}
		assert_int_equal(json_integer_value(next), after);
		json_decref(r);
	}
	print_message("%u sessions in %u pages\n", seen, pages);
	assert_int_equal(seen, n);
	assert_true(pages > 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_wire, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_concurrent, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_lease_mode, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_stats_pages, setup, teardown),
	};

	tenv_addrs(&AGG, H, 4);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
