/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-manager's fabric (control/manager/mgr_fabric.c, docs/PROTOCOL.md
 * E10) without switches: every refusal of a --fabric document names its
 * field; the plans of a tree (leaves with their ranks, first_rank and
 * uplink; the spine with the leaves as members; one leaf alone without a
 * spine), of stripes and of one switch, as the session.add arguments each
 * switch gets; and the reasons a job is not laid out. Then the manager's
 * core over fake switches (ctl_endpoints on loopback, one thread each): a
 * tree's sessions and tensors on each, job.status's switches, one leaf's
 * restart (its part alone installed again), a spine that refuses (the
 * leaves' parts removed), switch.status and job.end; stripes likewise.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <jansson.h>

#include "ctl.h"
#include "ctl_endpoint.h"
#include "mgr.h"
#include "mgr_fabric.h"

#define TREE                                                                                       \
	"{\"mode\": \"tree\", \"spine\": \"sp\", \"switches\": ["                                  \
	"{\"name\": \"la\", \"ctl\": \"10.1.0.1\", \"agg\": \"10.1.0.251\", \"mac\": "             \
	"\"02:00:00:00:00:0a\", \"hosts\": [\"10.0.0.0/30\"]},"                                    \
	"{\"name\": \"lb\", \"ctl\": \"10.1.0.2:6000\", \"agg\": \"10.1.0.252:7000\", \"mac\": "   \
	"\"02:00:00:00:00:0b\", \"hosts\": [\"10.0.0.4/30\", \"10.0.9.9\"], \"uplink_port\": 2},"  \
	"{\"name\": \"sp\", \"ctl\": \"10.1.0.3\", \"agg\": \"10.1.0.253\", \"mac\": "             \
	"\"02:00:00:00:00:05\", \"key\": \"/k\"}]}"

static json_t *
doc(const char *text)
{
	json_error_t e;
	json_t *d = json_loads(text, 0, &e);

	if (!d)
		fail_msg("bad test JSON: %s: %s", e.text, text);
	return d;
}

static void
expect_refused(const char *text, const char *needle)
{
	struct mgr_fabric f;
	struct ctl_err err = {0};
	json_t *d = doc(text);
	int rc = mgr_fabric_parse(d, &f, &err);

	json_decref(d);
	if (rc != -EINVAL || !strstr(err.msg, needle))
		fail_msg("want EINVAL naming '%s', got %d '%s' for %s", needle, rc, err.msg, text);
}

static void
parse_ok(const char *text, struct mgr_fabric *f)
{
	struct ctl_err err = {0};
	json_t *d = doc(text);
	int rc = mgr_fabric_parse(d, f, &err);

	json_decref(d);
	if (rc)
		fail_msg("refused: %s", err.msg);
}

static void
test_parse(void **state)
{
	struct mgr_fabric f;

	(void)state;
	parse_ok(TREE, &f);
	assert_int_equal(f.mode, MGR_FABRIC_TREE);
	assert_int_equal(f.n, 3);
	assert_int_equal(f.spine, 2);
	assert_string_equal(f.sw[1].name, "lb");
	assert_int_equal(ntohs(f.sw[0].ctl.sin_port), CAIS_CTL_PORT);
	assert_int_equal(ntohs(f.sw[1].ctl.sin_port), 6000);
	assert_int_equal(ntohs(f.sw[0].agg.sin_port), CAIS_UDP_PORT);
	assert_int_equal(ntohs(f.sw[1].agg.sin_port), 7000);
	assert_int_equal(f.sw[1].uplink_port, 2);
	assert_int_equal(f.sw[1].nnets, 2);
	assert_int_equal(f.sw[1].mask[0], 0xfffffffcu);
	assert_int_equal(f.sw[1].mask[1], 0xffffffffu);
	assert_string_equal(f.sw[2].key_file, "/k");
	assert_string_equal(f.sw[0].key_file, "");
	parse_ok("{\"mode\": \"stripes\", \"switches\": [{\"name\": \"a\", \"ctl\": \"1.1.1.1\", "
		 "\"agg\": \"1.1.1.2\"}, {\"name\": \"b\", \"ctl\": \"1.1.1.3\", \"agg\": "
		 "\"1.1.1.4\"}]}",
		 &f);
	assert_int_equal(f.mode, MGR_FABRIC_STRIPES);
	assert_int_equal(f.n, 2);

	expect_refused("[]", "JSON object");
	expect_refused("{\"mode\": \"ring\", \"switches\": []}", "'mode'");
	expect_refused("{\"switches\": []}", "mode");
	expect_refused("{\"mode\": \"tree\", \"spine\": \"x\", \"switches\": [], \"x\": 1}", "x");
	expect_refused("{\"mode\": \"stripes\", \"switches\": []}", "'switches'");
	expect_refused("{\"mode\": \"stripes\", \"switches\": [1]}", "switches[0]");
	expect_refused("{\"mode\": \"stripes\", \"switches\": [{\"name\": \"a b\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.2\"}]}",
		       "switches[0].name");
	expect_refused("{\"mode\": \"stripes\", \"switches\": [{\"name\": \"a\", \"ctl\": "
		       "\"1.1.1\", \"agg\": \"1.1.1.2\"}]}",
		       "switches[0].ctl");
	expect_refused("{\"mode\": \"stripes\", \"switches\": [{\"name\": \"a\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"127.0.0.1\"}]}",
		       "switches[0].agg");
	expect_refused("{\"mode\": \"stripes\", \"switches\": [{\"name\": \"a\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.2\", \"mac\": \"ff:ff:ff:ff:ff:ff\"}]}",
		       "switches[0].mac");
	expect_refused("{\"mode\": \"stripes\", \"switches\": [{\"name\": \"a\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.2\", \"port\": 1}]}",
		       "switches[0]: ");
	expect_refused("{\"mode\": \"stripes\", \"switches\": [{\"name\": \"a\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.2\"}, {\"name\": \"a\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.3\"}]}",
		       "switches[1].name");
	expect_refused("{\"mode\": \"stripes\", \"switches\": [{\"name\": \"a\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.2\"}, {\"name\": \"b\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.2\"}]}",
		       "switches[1].agg");
	expect_refused("{\"mode\": \"stripes\", \"switches\": [{\"name\": \"a\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.2\"}, {\"name\": \"b\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.3\"}, {\"name\": \"c\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.4\"}]}",
		       "power of two");
	expect_refused("{\"mode\": \"stripes\", \"spine\": \"a\", \"switches\": [{\"name\": "
		       "\"a\", \"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.2\"}]}",
		       "'spine'");
	expect_refused("{\"mode\": \"stripes\", \"switches\": [{\"name\": \"a\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.2\", \"hosts\": [\"1.0.0.1\"]}]}",
		       "switches[0].hosts");
	/* a tree: the spine, MACs, hosts on every leaf and none on the spine, no overlaps */
	expect_refused("{\"mode\": \"tree\", \"switches\": [{\"name\": \"a\", \"ctl\": "
		       "\"1.1.1.1\", \"agg\": \"1.1.1.2\", \"mac\": \"02:00:00:00:00:01\"}]}",
		       "'spine' is required");
	expect_refused("{\"mode\": \"tree\", \"spine\": \"z\", \"switches\": [{\"name\": \"a\", "
		       "\"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.2\", \"mac\": "
		       "\"02:00:00:00:00:01\"}]}",
		       "no switch is named 'z'");
	expect_refused("{\"mode\": \"tree\", \"spine\": \"a\", \"switches\": [{\"name\": \"a\", "
		       "\"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.2\"}]}",
		       "switches[0].mac");
	expect_refused("{\"mode\": \"tree\", \"spine\": \"a\", \"switches\": [{\"name\": \"a\", "
		       "\"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.2\", \"mac\": "
		       "\"02:00:00:00:00:01\"}]}",
		       "a leaf beside the spine");
	expect_refused("{\"mode\": \"tree\", \"spine\": \"a\", \"switches\": [{\"name\": \"a\", "
		       "\"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.2\", \"mac\": "
		       "\"02:00:00:00:00:01\"}, {\"name\": \"b\", \"ctl\": \"1.1.1.1\", \"agg\": "
		       "\"1.1.1.3\", \"mac\": \"02:00:00:00:00:02\"}]}",
		       "switches[1].hosts' is required");
	expect_refused("{\"mode\": \"tree\", \"spine\": \"a\", \"switches\": [{\"name\": \"a\", "
		       "\"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.2\", \"mac\": "
		       "\"02:00:00:00:00:01\", \"hosts\": [\"1.0.0.0/8\"]}, {\"name\": \"b\", "
		       "\"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.3\", \"mac\": "
		       "\"02:00:00:00:00:02\", \"hosts\": [\"2.0.0.0/8\"]}]}",
		       "switches[0].hosts': the spine");
	expect_refused("{\"mode\": \"tree\", \"spine\": \"s\", \"switches\": [{\"name\": \"a\", "
		       "\"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.2\", \"mac\": "
		       "\"02:00:00:00:00:01\", \"hosts\": [\"10.0.0.0/16\"]}, {\"name\": \"b\", "
		       "\"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.3\", \"mac\": "
		       "\"02:00:00:00:00:02\", \"hosts\": [\"10.0.5.0/24\"]}, {\"name\": \"s\", "
		       "\"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.4\", \"mac\": "
		       "\"02:00:00:00:00:03\"}]}",
		       "switches[1].hosts[0]' overlaps switches[0]");
	expect_refused("{\"mode\": \"tree\", \"spine\": \"s\", \"switches\": [{\"name\": \"a\", "
		       "\"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.2\", \"mac\": "
		       "\"02:00:00:00:00:01\", \"hosts\": [\"10.0.0.1/16\"]}]}",
		       "switches[0].hosts[0]");
	expect_refused("{\"mode\": \"tree\", \"spine\": \"s\", \"switches\": [{\"name\": \"a\", "
		       "\"ctl\": \"1.1.1.1\", \"agg\": \"1.1.1.2\", \"mac\": "
		       "\"02:00:00:00:00:01\", \"hosts\": [\"10.0.0.0/33\"]}]}",
		       "switches[0].hosts[0]");
}

/* n members: rank i at ip, 2 flows. */
static void
members(struct mgr_member *mb, unsigned int n, const char *const *ips)
{
	memset(mb, 0, n * sizeof(*mb));
	for (unsigned int i = 0; i < n; i++) {
		mb[i].rank = (uint16_t)i;
		snprintf(mb[i].mac, sizeof(mb[i].mac), "02:00:00:00:01:%02x", i);
		snprintf(mb[i].ip, sizeof(mb[i].ip), "%s", ips[i]);
		mb[i].port = 47000;
		mb[i].ports = 2;
	}
}

static struct mgr_job
job(unsigned int world, unsigned int elems)
{
	struct mgr_job j;

	memset(&j, 0, sizeof(j));
	snprintf(j.name, sizeof(j.name), "j");
	j.tenant = 3;
	j.session = 7;
	j.world = (uint16_t)world;
	j.slots = 64;
	j.elems = (uint16_t)elems;
	return j;
}

/* json_integer_value of a path "a.b" in o. */
static json_int_t
num(const json_t *o, const char *a, const char *b)
{
	const json_t *x = json_object_get(o, a);

	if (b)
		x = json_object_get(x, b);
	if (!json_is_integer(x))
		fail_msg("no integer %s%s%s", a, b ? "." : "", b ? b : "");
	return json_integer_value(x);
}

static void
test_plan_tree(void **state)
{
	static const char *const ips[] = {"10.0.0.4", "10.0.0.5", "10.0.0.1",
					  "10.0.0.0", "10.0.9.9", "10.0.0.2"};
	struct mgr_member mb[6];
	struct mgr_fabric f;
	struct mgr_plan p;
	struct mgr_job j = job(6, 1024);
	char why[256] = "";
	json_t *a;

	(void)state;
	parse_ok(TREE, &f);
	/* ranks 0, 1, 4 under lb; 2, 3, 5 under la: not consecutive */
	members(mb, 6, ips);
	assert_int_equal(mgr_fabric_plan(&f, &j, mb, 6, &p, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "under leaf la (3 of them, 2..5) are not consecutive"));
	/* ranks 0-2 under lb, 3-5 under la */
	{
		static const char *const ok[] = {"10.0.0.4", "10.0.0.5", "10.0.9.9",
						 "10.0.0.1", "10.0.0.0", "10.0.0.2"};
		members(mb, 6, ok);
	}
	assert_int_equal(mgr_fabric_plan(&f, &j, mb, 6, &p, why, sizeof(why)), 0);
	assert_int_equal(p.n, 3);
	assert_int_equal(p.part[0].sw, 0); /* la: the fabric's order */
	assert_int_equal(p.part[0].role, MGR_ROLE_LEAF);
	assert_int_equal(p.part[0].first, 3);
	assert_int_equal(p.part[0].count, 3);
	assert_int_equal(p.part[0].up_rank, 0);
	assert_int_equal(p.part[1].sw, 1);
	assert_int_equal(p.part[1].first, 0);
	assert_int_equal(p.part[1].up_rank, 1);
	assert_int_equal(p.part[2].sw, 2);
	assert_int_equal(p.part[2].role, MGR_ROLE_SPINE);
	assert_int_equal(p.sw_of_rank[0], 1);
	assert_int_equal(p.sw_of_rank[5], 0);

	/* leaf lb: its three ranks from 0, the uplink to the spine through port 2 */
	a = mgr_plan_session(&f, &p, 1, &j, mb, 6);
	assert_int_equal(num(a, "tenant", NULL), 3);
	assert_int_equal(num(a, "session", NULL), 7);
	assert_int_equal(num(a, "n", NULL), 3);
	assert_int_equal(num(a, "first_rank", NULL), 0);
	assert_int_equal(num(a, "slots", NULL), 64);
	assert_int_equal(num(a, "elems_per_packet", NULL), 1024);
	assert_int_equal(json_array_size(json_object_get(a, "members")), 3);
	assert_int_equal(num(json_array_get(json_object_get(a, "members"), 2), "rank", NULL), 2);
	assert_int_equal(num(json_array_get(json_object_get(a, "members"), 2), "ports", NULL), 2);
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(a, "members"), 2), "ip")),
			    "10.0.9.9");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "uplink"), "ip")),
			    "10.1.0.253");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "uplink"), "mac")),
			    "02:00:00:00:00:05");
	assert_int_equal(num(a, "uplink", "rank"), 1);
	assert_int_equal(num(a, "uplink", "switch_port"), 2);
	assert_int_equal(num(a, "uplink", "port"), CAIS_UDP_PORT);
	json_decref(a);
	/* leaf la: ranks 3..5 */
	a = mgr_plan_session(&f, &p, 0, &j, mb, 6);
	assert_int_equal(num(a, "first_rank", NULL), 3);
	assert_int_equal(num(a, "uplink", "rank"), 0);
	assert_int_equal(num(a, "uplink", "switch_port"), 0);
	assert_int_equal(num(json_array_get(json_object_get(a, "members"), 0), "rank", NULL), 3);
	json_decref(a);
	/* the spine: the two leaves' aggregators as members 0 and 1 */
	a = mgr_plan_session(&f, &p, 2, &j, mb, 6);
	assert_int_equal(num(a, "n", NULL), 2);
	assert_null(json_object_get(a, "uplink"));
	assert_null(json_object_get(a, "first_rank"));
	{
		const json_t *m1 = json_array_get(json_object_get(a, "members"), 1);

		assert_int_equal(num(m1, "rank", NULL), 1);
		assert_string_equal(json_string_value(json_object_get(m1, "ip")), "10.1.0.252");
		assert_string_equal(json_string_value(json_object_get(m1, "mac")),
				    "02:00:00:00:00:0b");
		assert_int_equal(num(m1, "port", NULL), 7000);
	}
	json_decref(a);

	/* more than an uplink carries */
	j.elems = 2048;
	assert_int_equal(mgr_fabric_plan(&f, &j, mb, 6, &p, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "elems_per_packet 2048"));
	/* every rank under one leaf: one flat session there, no spine, any elems */
	{
		static const char *const one[] = {"10.0.0.1", "10.0.0.3", "10.0.0.0"};

		members(mb, 3, one);
	}
	j = job(3, 2048);
	assert_int_equal(mgr_fabric_plan(&f, &j, mb, 3, &p, why, sizeof(why)), 0);
	assert_int_equal(p.n, 1);
	assert_int_equal(p.part[0].sw, 0);
	assert_int_equal(p.part[0].role, MGR_ROLE_FLAT);
	a = mgr_plan_session(&f, &p, 0, &j, mb, 3);
	assert_int_equal(num(a, "n", NULL), 3);
	assert_null(json_object_get(a, "uplink"));
	assert_int_equal(json_array_size(json_object_get(a, "members")), 3);
	json_decref(a);
	/* a host under no leaf */
	{
		static const char *const out[] = {"10.0.0.1", "10.0.0.8", "10.0.0.0"};

		members(mb, 3, out);
	}
	assert_int_equal(mgr_fabric_plan(&f, &j, mb, 3, &p, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "rank 1 (10.0.0.8) is under no leaf"));
}

static void
test_plan_stripes_and_one(void **state)
{
	static const char *const ips[] = {"10.0.0.1", "10.0.0.2", "10.0.0.3"};
	struct mgr_member mb[3];
	struct mgr_fabric f;
	struct mgr_plan p;
	struct mgr_job j = job(3, 2048);
	struct mgr_conf conf;
	char why[256] = "";
	json_t *a;

	(void)state;
	parse_ok("{\"mode\": \"stripes\", \"switches\": [{\"name\": \"a\", \"ctl\": \"1.1.1.1\", "
		 "\"agg\": \"1.1.1.2\"}, {\"name\": \"b\", \"ctl\": \"1.1.1.3\", \"agg\": "
		 "\"1.1.1.4\"}]}",
		 &f);
	members(mb, 3, ips);
	assert_int_equal(mgr_fabric_plan(&f, &j, mb, 3, &p, why, sizeof(why)), 0);
	assert_int_equal(p.n, 2);
	for (unsigned int k = 0; k < 2; k++) {
		assert_int_equal(p.part[k].sw, k);
		assert_int_equal(p.part[k].role, MGR_ROLE_STRIPE);
		a = mgr_plan_session(&f, &p, k, &j, mb, 3);
		assert_int_equal(num(a, "n", NULL), 3);
		assert_int_equal(num(a, "elems_per_packet", NULL), 2048);
		assert_int_equal(json_array_size(json_object_get(a, "members")), 3);
		assert_null(json_object_get(a, "uplink"));
		json_decref(a);
	}
	/* a rank with fewer flows than stripes */
	mb[2].ports = 1;
	assert_int_equal(mgr_fabric_plan(&f, &j, mb, 3, &p, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "rank 2 has 1 flows"));

	/* one switch: --switch-ctl, --agg */
	mgr_conf_init(&conf);
	conf.agg.sin_family = AF_INET;
	conf.agg.sin_addr.s_addr = htonl(0x0a0000fe);
	conf.agg.sin_port = htons(CAIS_UDP_PORT);
	mgr_fabric_one(&f, &conf);
	assert_int_equal(f.n, 1);
	assert_int_equal(f.mode, MGR_FABRIC_ONE);
	assert_int_equal(mgr_fabric_plan(&f, &j, mb, 3, &p, why, sizeof(why)), 0);
	assert_int_equal(p.n, 1);
	assert_int_equal(p.part[0].role, MGR_ROLE_FLAT);
	a = mgr_plan_session(&f, &p, 0, &j, mb, 3);
	assert_int_equal(num(a, "n", NULL), 3);
	assert_int_equal(json_array_size(json_object_get(a, "members")), 3);
	json_decref(a);
}

/* ---- the manager over a fabric of fake switches ---- */

/* A fake switch: a ctl_endpoint on loopback in a thread, recording what it is asked. */
struct fsw {
	pthread_mutex_t lock;
	struct ctl_ops ops;
	struct ctl_endpoint *ep;
	pthread_t tid;
	atomic_bool run;
	uint16_t port;
	unsigned int session_add, session_del, tensor_add, lease, stats_get;
	int refuse; /* session.add's answer (an errno), 0: accepted */
	struct ctl_session last;
	unsigned int n_sessions;
	uint32_t sessions[16]; /* (tenant << 16) | session */
	double uptime;
};

static struct fsw FS[3];

#define FS_COUNT(k, field)                                                                         \
	({                                                                                         \
		pthread_mutex_lock(&FS[k].lock);                                                   \
		unsigned int v_ = FS[k].field;                                                     \
		pthread_mutex_unlock(&FS[k].lock);                                                 \
		v_;                                                                                \
	})

/* Set what fake k answers; its thread reads it under the lock. */
#define FS_SET(k, field, value)                                                                    \
	do {                                                                                       \
		pthread_mutex_lock(&FS[k].lock);                                                   \
		FS[k].field = (value);                                                             \
		pthread_mutex_unlock(&FS[k].lock);                                                 \
	} while (0)

static int
fs_ping(void *ctx, json_t *res, struct ctl_err *err)
{
	(void)ctx, (void)err;
	json_object_set_new(res, "mode", json_string("compute"));
	return 0;
}

static int
fs_session_add(void *ctx, const struct ctl_session *s, struct ctl_err *err)
{
	struct fsw *f = ctx;
	int rc;

	pthread_mutex_lock(&f->lock);
	f->session_add++;
	f->last = *s;
	rc = f->refuse;
	if (!rc && f->n_sessions < 16)
		f->sessions[f->n_sessions++] = (uint32_t)s->tenant << 16 | s->session;
	pthread_mutex_unlock(&f->lock);
	return rc ? ctl_fail(err, rc, "fake switch refuses session.add") : 0;
}

static int
fs_session_del(void *ctx, uint16_t t, uint16_t s, struct ctl_err *err)
{
	struct fsw *f = ctx;
	bool found = false;

	pthread_mutex_lock(&f->lock);
	f->session_del++;
	for (unsigned int i = 0; i < f->n_sessions && !found; i++)
		if (f->sessions[i] == ((uint32_t)t << 16 | s)) {
			f->sessions[i] = f->sessions[--f->n_sessions];
			found = true;
		}
	pthread_mutex_unlock(&f->lock);
	return found ? 0 : ctl_fail(err, ENOENT, "no such session");
}

static int
fs_tensor_add(void *ctx, const struct ctl_tensor *t, struct ctl_err *err)
{
	struct fsw *f = ctx;

	(void)t, (void)err;
	pthread_mutex_lock(&f->lock);
	f->tensor_add++;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int
fs_refused(void *ctx, struct ctl_err *err)
{
	(void)ctx;
	return ctl_fail(err, EPERM, "the manager never calls this");
}

static int
fs_tensor_del(void *ctx, uint16_t t, uint16_t s, uint32_t x, struct ctl_err *err)
{
	(void)t, (void)s, (void)x;
	return fs_refused(ctx, err);
}

static int
fs_mode_set(void *ctx, enum ctl_mode m, struct ctl_err *err)
{
	(void)m;
	return fs_refused(ctx, err);
}

static int
fs_thresholds(void *ctx, const struct ctl_thresholds *t, struct ctl_err *err)
{
	(void)t;
	return fs_refused(ctx, err);
}

static int
fs_lease(void *ctx, uint32_t ttl, struct ctl_err *err)
{
	struct fsw *f = ctx;

	(void)ttl, (void)err;
	pthread_mutex_lock(&f->lock);
	f->lease++;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int
fs_stats(void *ctx, int64_t after, json_t *res, struct ctl_err *err)
{
	struct fsw *f = ctx;
	json_t *sessions = json_array();

	(void)after, (void)err;
	pthread_mutex_lock(&f->lock);
	f->stats_get++;
	json_object_set_new(res, "slot_usage", json_real(0));
	json_object_set_new(res, "slots_used", json_integer(0));
	json_object_set_new(res, "slot_capacity", json_integer(65536));
	json_object_set_new(res, "queue_depth", json_integer(0));
	json_object_set_new(res, "uptime_s", json_real(f->uptime));
	json_object_set_new(res, "lcores", json_integer(2));
	for (unsigned int i = 0; i < f->n_sessions; i++)
		json_array_append_new(sessions,
				      json_pack("{s:i, s:i}", "tenant", (int)(f->sessions[i] >> 16),
						"session", (int)(f->sessions[i] & 0xffff)));
	json_object_set_new(res, "sessions", sessions);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static void *
fs_main(void *arg)
{
	struct fsw *f = arg;

	while (atomic_load(&f->run))
		ctl_endpoint_poll(f->ep, 20);
	return NULL;
}

static void
fs_start(struct fsw *f)
{
	struct ctl_endpoint_conf ec = {.ops = &f->ops};

	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	f->uptime = 100;
	f->ops = (struct ctl_ops){.ctx = f,
				  .ping = fs_ping,
				  .session_add = fs_session_add,
				  .session_del = fs_session_del,
				  .tensor_add = fs_tensor_add,
				  .tensor_del = fs_tensor_del,
				  .lease = fs_lease,
				  .mode_set = fs_mode_set,
				  .thresholds_set = fs_thresholds,
				  .stats_get = fs_stats};
	ec.addr.sin_family = AF_INET;
	ec.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int tries = 0; tries < 20 && !f->ep; tries++) {
		struct sockaddr_in a = ec.addr;
		socklen_t al = sizeof(a);
		int fd = socket(AF_INET, SOCK_DGRAM, 0);

		assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
		close(fd);
		ec.addr.sin_port = a.sin_port;
		if (ctl_endpoint_open(&ec, &f->ep) == 0)
			f->port = ntohs(a.sin_port);
	}
	assert_non_null(f->ep);
	atomic_store(&f->run, true);
	assert_int_equal(pthread_create(&f->tid, NULL, fs_main, f), 0);
}

static void
fs_stop(struct fsw *f)
{
	atomic_store(&f->run, false);
	pthread_join(f->tid, NULL);
	ctl_endpoint_close(f->ep);
	pthread_mutex_destroy(&f->lock);
}

static char tmp[64];

/* A manager over a fabric of the first n fakes: "tree" (la, lb, spine sp) or "stripes". */
static struct mgr *
fabric_mgr(const char *mode, unsigned int n)
{
	static const char *const names[] = {"la", "lb", "sp"};
	static const char *const hosts[] = {", \"hosts\": [\"10.0.0.1\", \"10.0.0.2\"]",
					    ", \"hosts\": [\"10.0.0.3/32\", \"10.0.0.4\"]", ""};
	char path[128], text[2048];
	size_t len;
	struct mgr_conf conf;
	struct ctl_err err = {0};
	struct mgr *m = NULL;
	bool tree = strcmp(mode, "tree") == 0;
	FILE *fp;

	len = (size_t)snprintf(text, sizeof(text), "{\"mode\": \"%s\"%s, \"switches\": [", mode,
			       tree ? ", \"spine\": \"sp\"" : "");
	for (unsigned int k = 0; k < n; k++) {
		fs_start(&FS[k]);
		len += (size_t)snprintf(text + len, sizeof(text) - len,
					"%s{\"name\": \"%s\", \"ctl\": \"127.0.0.1:%u\", \"agg\": "
					"\"10.9.0.%u\", \"mac\": \"02:00:00:00:09:%02x\"%s}",
					k ? ", " : "", names[k], FS[k].port, k + 1, k + 1,
					tree ? hosts[k] : "");
	}
	snprintf(text + len, sizeof(text) - len, "]}");
	snprintf(tmp, sizeof(tmp), "/tmp/cais-test-fabric.XXXXXX");
	assert_non_null(mkdtemp(tmp));
	snprintf(path, sizeof(path), "%s/fabric.json", tmp);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	mgr_conf_init(&conf);
	conf.log_level = getenv("MGR_TEST_LOG") ? MGR_LOG_DEBUG : MGR_LOG_ERROR;
	snprintf(conf.fabric, sizeof(conf.fabric), "%s", path);
	snprintf(conf.db, sizeof(conf.db), "%s/manager.db", tmp);
	conf.switch_timeout_ms = 150;
	if (mgr_open(&conf, &m, &err))
		fail_msg("mgr_open: %s (%s)", err.msg, text);
	return m;
}

static void
fabric_done(struct mgr *m, unsigned int n)
{
	char cmd[160];

	mgr_close(m);
	for (unsigned int k = 0; k < n; k++)
		fs_stop(&FS[k]);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
}

/* mgr_handle() of cmd with args (JSON text) that must succeed: the result. */
static json_t *
req_ok(struct mgr *m, const char *cmd, const char *args)
{
	json_t *req = json_pack("{s:s, s:o}", "cmd", cmd, "args", json_loads(args, 0, NULL));
	json_t *res = json_object();
	struct ctl_err err = {0};
	int rc = mgr_handle(m, req, res, &err);

	json_decref(req);
	if (rc)
		fail_msg("%s %s: %d %s", cmd, args, rc, err.msg);
	return res;
}

/* A job of n ranks at 10.0.0.1.., each with `ports` flows; its job.status once all joined. */
static json_t *
join_all(struct mgr *m, const char *job, unsigned int n, unsigned int ports)
{
	char args[256];
	json_t *r;

	snprintf(args, sizeof(args),
		 "{\"job\": \"%s\", \"tenant\": \"t\", \"world\": %u, \"slots\": 8, "
		 "\"elems_per_packet\": 512}",
		 job, n);
	json_decref(req_ok(m, "job.register", args));
	for (unsigned int i = 0; i < n; i++) {
		snprintf(
		    args, sizeof(args),
		    "{\"job\": \"%s\", \"rank\": %u, \"mac\": \"02:00:00:00:01:%02x\", \"ip\": "
		    "\"10.0.0.%u\", \"port\": 47000, \"ports\": %u}",
		    job, i, i + 1, i + 1, ports);
		json_decref(req_ok(m, "job.join", args));
	}
	snprintf(args, sizeof(args), "{\"job\": \"%s\"}", job);
	r = req_ok(m, "job.status", args);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "ready");
	return r;
}

static void
test_core_tree(void **state)
{
	struct mgr *m;
	json_t *st, *r;
	char ip[INET_ADDRSTRLEN];

	(void)state;
	m = fabric_mgr("tree", 3);
	mgr_tick(m, 1000000);
	for (unsigned int k = 0; k < 3; k++) {
		assert_int_equal(FS_COUNT(k, lease), 1);
		assert_int_equal(FS_COUNT(k, stats_get), 1);
	}
	/* ranks 0, 1 under la, 2, 3 under lb: a session on each leaf, the spine's of the two */
	st = join_all(m, "t", 4, 1);
	assert_true(json_is_true(json_object_get(st, "offload")));
	assert_string_equal(json_string_value(json_object_get(st, "fabric")), "tree");
	for (unsigned int i = 0; i < 4; i++) {
		const json_t *mb = json_array_get(json_object_get(st, "members"), i);
		unsigned int rank = (unsigned int)json_integer_value(json_object_get(mb, "rank"));

		assert_string_equal(json_string_value(json_object_get(mb, "switch")),
				    rank < 2 ? "10.9.0.1:51733" : "10.9.0.2:51733");
	}
	json_decref(st);
	for (unsigned int k = 0; k < 3; k++)
		assert_int_equal(FS_COUNT(k, session_add), 1);
	assert_int_equal(FS[0].last.n, 2);
	assert_int_equal(FS[0].last.first_rank, 0);
	assert_true(FS[0].last.uplink.on);
	assert_int_equal(FS[0].last.uplink.rank, 0);
	inet_ntop(AF_INET, &FS[0].last.uplink.ip, ip, sizeof(ip));
	assert_string_equal(ip, "10.9.0.3");
	assert_int_equal(FS[1].last.first_rank, 2);
	assert_int_equal(FS[1].last.uplink.rank, 1);
	assert_int_equal(FS[1].last.members[1].port, 47000);
	assert_int_equal(FS[2].last.n, 2);
	assert_false(FS[2].last.uplink.on);
	assert_int_equal(FS[2].last.members[1].ip, htonl(0x0a090002));
	assert_int_equal(FS[2].last.elems, 512);

	/* a tensor: on every switch of the layout */
	r = req_ok(m, "tensor.register",
		   "{\"job\": \"t\", \"tensor\": 1, \"op\": \"sum\", \"dtype\": \"bf16\"}");
	assert_true(json_is_true(json_object_get(r, "installed")));
	assert_string_equal(json_string_value(json_object_get(r, "wire")), "block16");
	json_decref(r);
	for (unsigned int k = 0; k < 3; k++)
		assert_int_equal(FS_COUNT(k, tensor_add), 1);

	/* lb restarts (its uptime goes down, its tables empty): its part alone comes back */
	pthread_mutex_lock(&FS[1].lock);
	FS[1].n_sessions = 0;
	FS[1].uptime = 1;
	pthread_mutex_unlock(&FS[1].lock);
	mgr_tick(m, 1001000);
	mgr_tick(m, 1002000);
	assert_int_equal(FS_COUNT(1, session_add), 2);
	assert_int_equal(FS[1].last.first_rank, 2);
	assert_true(FS[1].last.uplink.on);
	assert_int_equal(FS_COUNT(0, session_add), 1);
	assert_int_equal(FS_COUNT(2, session_add), 1);
	assert_true(FS_COUNT(1, tensor_add) >= 2);
	assert_int_equal(FS_COUNT(1, n_sessions), 1);

	/* the spine refuses the next job: ready without offload, the leaves' parts removed */
	FS_SET(2, refuse, ENOSPC);
	st = join_all(m, "u", 4, 1);
	assert_false(json_is_true(json_object_get(st, "offload")));
	assert_non_null(
	    strstr(json_string_value(json_object_get(st, "reason")), "switch sp (127.0.0.1:"));
	assert_non_null(strstr(json_string_value(json_object_get(st, "reason")), "ENOSPC"));
	json_decref(st);
	assert_int_equal(FS_COUNT(0, session_add), 2);
	assert_int_equal(FS_COUNT(0, n_sessions), 1); /* t's only */
	assert_int_equal(FS_COUNT(1, n_sessions), 1);
	assert_int_equal(FS_COUNT(2, n_sessions), 1);
	FS_SET(2, refuse, 0);

	/* ranks 0, 2 under la: not consecutive; the ring, nothing installed */
	{
		char args[256];

		r = req_ok(m, "job.register", "{\"job\": \"v\", \"tenant\": \"t\", \"world\": 3}");
		/* the most lcores of the switches polled (each says 2): the ranks' flows */
		assert_int_equal(json_integer_value(json_object_get(r, "lcores")), 2);
		json_decref(r);
		for (unsigned int i = 0; i < 3; i++) {
			static const unsigned int host[] = {1, 3, 2};

			snprintf(args, sizeof(args),
				 "{\"job\": \"v\", \"rank\": %u, \"mac\": \"02:00:00:00:02:%02x\", "
				 "\"ip\": \"10.0.0.%u\", \"port\": 48000}",
				 i, i + 1, host[i]);
			json_decref(req_ok(m, "job.join", args));
		}
		st = req_ok(m, "job.status", "{\"job\": \"v\"}");
		assert_false(json_is_true(json_object_get(st, "offload")));
		assert_non_null(
		    strstr(json_string_value(json_object_get(st, "reason")), "not consecutive"));
		assert_null(
		    json_object_get(json_array_get(json_object_get(st, "members"), 0), "switch"));
		json_decref(st);
		assert_int_equal(FS_COUNT(0, session_add), 2);
	}

	/* switch.status: each switch */
	r = req_ok(m, "switch.status", "{}");
	assert_string_equal(json_string_value(json_object_get(r, "fabric")), "tree");
	assert_string_equal(json_string_value(json_object_get(r, "spine")), "sp");
	assert_int_equal(json_array_size(json_object_get(r, "switches")), 3);
	for (unsigned int k = 0; k < 3; k++) {
		const json_t *s = json_array_get(json_object_get(r, "switches"), k);

		assert_true(json_is_true(json_object_get(s, "reachable")));
		assert_true(json_integer_value(
				json_object_get(json_object_get(s, "lease"), "renewals")) >= 2);
		assert_int_equal(
		    json_integer_value(json_object_get(json_object_get(s, "stats"), "sessions")),
		    1);
	}
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(r, "switches"), 1), "name")),
			    "lb");
	json_decref(r);

	/* job.end: t's session off all three */
	json_decref(req_ok(m, "job.end", "{\"job\": \"t\"}"));
	for (unsigned int k = 0; k < 3; k++)
		assert_int_equal(FS_COUNT(k, n_sessions), 0);
	fabric_done(m, 3);
}

static void
test_core_stripes(void **state)
{
	struct mgr *m;
	json_t *st, *sl;

	(void)state;
	m = fabric_mgr("stripes", 2);
	st = join_all(m, "s", 3, 2);
	assert_true(json_is_true(json_object_get(st, "offload")));
	sl = json_object_get(st, "stripes");
	assert_int_equal(json_array_size(sl), 2);
	assert_string_equal(json_string_value(json_array_get(sl, 0)), "10.9.0.1:51733");
	assert_string_equal(json_string_value(json_array_get(sl, 1)), "10.9.0.2:51733");
	assert_string_equal(json_string_value(json_object_get(st, "switch")), "10.9.0.1:51733");
	json_decref(st);
	for (unsigned int k = 0; k < 2; k++) {
		assert_int_equal(FS_COUNT(k, session_add), 1);
		assert_int_equal(FS[k].last.n, 3);
		assert_int_equal(FS[k].last.members[2].ports, 2);
	}
	/* one flow per rank: fewer than the stripes */
	st = join_all(m, "s1", 2, 1);
	assert_false(json_is_true(json_object_get(st, "offload")));
	assert_non_null(strstr(json_string_value(json_object_get(st, "reason")), "has 1 flows"));
	json_decref(st);
	assert_int_equal(FS_COUNT(0, session_add), 1);
	json_decref(req_ok(m, "job.end", "{\"job\": \"s\"}"));
	assert_int_equal(FS_COUNT(0, n_sessions), 0);
	assert_int_equal(FS_COUNT(1, n_sessions), 0);
	fabric_done(m, 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_plan_tree),
	    cmocka_unit_test(test_plan_stripes_and_one),
	    cmocka_unit_test(test_core_tree),
	    cmocka_unit_test(test_core_stripes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
