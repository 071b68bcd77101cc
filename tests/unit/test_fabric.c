/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-manager's fabric (control/manager/mgr_fabric.c, docs/PROTOCOL.md
 * E10) without switches: every refusal of a --fabric document names its
 * field; the plans of a tree (leaves with their ranks, first_rank and
 * uplink; the spine with the leaves as members; one leaf alone without a
 * spine), of stripes and of one switch, as the session.add arguments each
 * switch gets; and the reasons a job is not laid out.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

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

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_plan_tree),
	    cmocka_unit_test(test_plan_stripes_and_one),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
