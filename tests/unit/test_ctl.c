/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control request dispatcher against a fake switch: every command with
 * good and bad input; a malformed request never reaches an operation.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl.h"
#include "../common/ctl_fake.h"

/* Dispatch a JSON text; returns the code, err holds the message. */
static int
run(const char *text, struct ctl_err *err, json_t **res)
{
	json_error_t je;
	json_t *req = json_loads(text, JSON_DECODE_ANY, &je);
	json_t *r = NULL;
	int rc;

	if (!req)
		fail_msg("test JSON does not parse: %s", text);
	rc = ctl_dispatch(&ops, req, &r, err);
	json_decref(req);
	if (res)
		*res = r;
	else
		json_decref(r);
	return rc;
}

/* A malformed request: -EINVAL, a message naming the field, no operation called. */
static void
bad(const char *text, const char *field)
{
	struct ctl_err err;
	int calls = F.calls;

	assert_int_equal(run(text, &err, NULL), -EINVAL);
	assert_int_equal(err.code, EINVAL);
	if (!strstr(err.msg, field))
		fail_msg("message '%s' does not name '%s' (request %s)", err.msg, field, text);
	assert_int_equal(F.calls, calls);
}

static void
ok(const char *text, const char *op)
{
	struct ctl_err err;
	int calls = F.calls;
	int rc = run(text, &err, NULL);

	if (rc)
		fail_msg("%s: %s", text, err.msg);
	assert_int_equal(F.calls, calls + 1);
	assert_string_equal(F.last, op);
}

#define SESSION_ARGS(extra, members)                                                               \
	"{\"cmd\":\"session.add\",\"args\":{\"tenant\":3,\"session\":4,\"n\":2,\"slots\":16,"      \
	"\"elems_per_packet\":256" extra ",\"members\":" members "}}"
#define TWO_MEMBERS                                                                                \
	"[{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":4001},"           \
	"{\"rank\":0,\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.1\",\"port\":4000}]"

static void
t_session_add(void **state)
{
	(void)state;
	ok(SESSION_ARGS(",\"priority\":1", TWO_MEMBERS), "session.add");
	assert_int_equal(F.s.tenant, 3);
	assert_int_equal(F.s.session, 4);
	assert_int_equal(F.s.n, 2);
	assert_int_equal(F.s.slots, 16);
	assert_int_equal(F.s.elems, 256);
	assert_int_equal(F.s.priority, 1);
	assert_int_equal(F.s.loss_hints, 0);
	assert_int_equal(F.s.members[0].port, 4000);
	assert_int_equal(F.s.members[1].port, 4001);
	assert_int_equal(F.s.members[1].mac[5], 2);
	assert_int_equal(F.s.members[0].ip, htonl(0x0A000001));

	bad(SESSION_ARGS(",\"priority\":2", TWO_MEMBERS), "priority");
	ok(SESSION_ARGS(",\"loss_hints\":1", TWO_MEMBERS), "session.add");
	assert_int_equal(F.s.loss_hints, 1);
	bad(SESSION_ARGS(",\"loss_hints\":2", TWO_MEMBERS), "loss_hints");
	bad(SESSION_ARGS(",\"loss_hints\":true", TWO_MEMBERS), "loss_hints");
	bad(SESSION_ARGS(",\"bogus\":1", TWO_MEMBERS), "bogus");
	bad("{\"cmd\":\"session.add\",\"args\":{\"session\":1}}", "tenant");
	bad("{\"cmd\":\"session.add\",\"args\":{\"tenant\":\"1\",\"session\":1}}", "tenant");
	bad("{\"cmd\":\"session.add\",\"args\":{\"tenant\":70000,\"session\":1}}", "tenant");
	bad("{\"cmd\":\"session.add\",\"args\":{\"tenant\":-1,\"session\":1}}", "tenant");
	bad("{\"cmd\":\"session.add\",\"args\":{\"tenant\":1.5,\"session\":1}}", "tenant");
	bad("{\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":0}}", "'n'");
	bad("{\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":256}}", "'n'");
	bad("{\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":2,\"slots\":12,"
	    "\"elems_per_packet\":8,\"members\":[]}}",
	    "slots");
	bad("{\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":2,\"slots\":65536,"
	    "\"elems_per_packet\":8,\"members\":[]}}",
	    "slots");
	bad("{\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":2,\"slots\":8,"
	    "\"elems_per_packet\":2049,\"members\":[]}}",
	    "elems_per_packet");
	bad("{\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":2,\"slots\":8,"
	    "\"elems_per_packet\":0,\"members\":[]}}",
	    "elems_per_packet");
	bad(SESSION_ARGS("", "{}"), "members");
	bad(SESSION_ARGS("", "[]"), "members");
	bad("{\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":2,\"slots\":8,"
	    "\"elems_per_packet\":8}}",
	    "members");
	bad(SESSION_ARGS("", "[{\"rank\":0,\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.1\","
			     "\"port\":4000},{\"rank\":0,\"mac\":\"02:00:00:00:00:02\",\"ip\":"
			     "\"10.0.0.2\",\"port\":4001}]"),
	    "rank");
	bad(SESSION_ARGS("", "[{\"rank\":0,\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.1\","
			     "\"port\":4000},{\"rank\":2,\"mac\":\"02:00:00:00:00:02\",\"ip\":"
			     "\"10.0.0.2\",\"port\":4001}]"),
	    "rank");
	bad(SESSION_ARGS("", "[{\"rank\":0,\"mac\":\"01:00:00:00:00:01\",\"ip\":\"10.0.0.1\","
			     "\"port\":4000},{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":"
			     "\"10.0.0.2\",\"port\":4001}]"),
	    "mac");
	bad(SESSION_ARGS("", "[{\"rank\":0,\"mac\":\"02:00:00:00:00\",\"ip\":\"10.0.0.1\","
			     "\"port\":4000},{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":"
			     "\"10.0.0.2\",\"port\":4001}]"),
	    "mac");
	bad(SESSION_ARGS("", "[{\"rank\":0,\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.300\","
			     "\"port\":4000},{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":"
			     "\"10.0.0.2\",\"port\":4001}]"),
	    "ip");
	bad(SESSION_ARGS("", "[{\"rank\":0,\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.1\","
			     "\"port\":0},{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":"
			     "\"10.0.0.2\",\"port\":4001}]"),
	    "port");
	bad(SESSION_ARGS("",
			 "[{\"rank\":0,\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.1\","
			 "\"port\":4000,\"x\":1},{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":"
			 "\"10.0.0.2\",\"port\":4001}]"),
	    "'x'");
	bad(SESSION_ARGS("", "[1, 2]"), "members[0]");
}

static void
t_other_commands(void **state)
{
	json_t *res;
	struct ctl_err err;

	(void)state;
	ok("{\"cmd\":\"session.del\",\"args\":{\"tenant\":1,\"session\":65535}}", "session.del");
	assert_int_equal(F.session, 65535);
	bad("{\"cmd\":\"session.del\",\"args\":{\"tenant\":1}}", "session");

	ok("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":4294967295,"
	   "\"op\":\"max\",\"scale\":0.5}}",
	   "tensor.add");
	assert_int_equal(F.t.tensor, 4294967295u);
	assert_int_equal(F.t.op, CAIS_OP_MAX);
	assert_true(F.t.scale == 0.5);
	ok("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":1,"
	   "\"op\":\"avg\",\"scale\":1024}}",
	   "tensor.add");
	assert_int_equal(F.t.op, CAIS_OP_AVG);
	bad("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":1,"
	    "\"op\":\"prod\",\"scale\":1}}",
	    "op");
	bad("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":1,"
	    "\"op\":\"sum\",\"scale\":0}}",
	    "scale");
	bad("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":1,"
	    "\"op\":\"sum\",\"scale\":-3}}",
	    "scale");
	bad("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":1,"
	    "\"op\":\"sum\",\"scale\":\"1\"}}",
	    "scale");
	bad("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":4294967296,"
	    "\"op\":\"sum\",\"scale\":1}}",
	    "tensor");
	bad("{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":1,"
	    "\"op\":7,\"scale\":1}}",
	    "op");

	ok("{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":9}}",
	   "tensor.del");
	assert_int_equal(F.tensor, 9);
	bad("{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,\"session\":2}}", "tensor");

	ok("{\"cmd\":\"lease\",\"args\":{\"ttl_ms\":1500}}", "lease");
	assert_int_equal(F.ttl, 1500);
	bad("{\"cmd\":\"lease\",\"args\":{\"ttl_ms\":0}}", "ttl_ms");
	bad("{\"cmd\":\"lease\",\"args\":{}}", "ttl_ms");
	bad("{\"cmd\":\"lease\",\"args\":{\"ttl_ms\":true}}", "ttl_ms");

	ok("{\"cmd\":\"mode.set\",\"args\":{\"mode\":\"forward_only\"}}", "mode.set");
	assert_int_equal(F.mode, CTL_MODE_FORWARD_ONLY);
	ok("{\"cmd\":\"mode.set\",\"args\":{\"mode\":\"compute\"}}", "mode.set");
	assert_int_equal(F.mode, CTL_MODE_COMPUTE);
	bad("{\"cmd\":\"mode.set\",\"args\":{\"mode\":\"fast\"}}", "mode");

	ok("{\"cmd\":\"thresholds.set\",\"args\":{\"slot_usage\":0.75}}", "thresholds.set");
	assert_true(F.th.has_slot_usage && !F.th.has_queue_depth && F.th.slot_usage == 0.75);
	ok("{\"cmd\":\"thresholds.set\",\"args\":{\"queue_depth\":100,\"slot_usage\":1}}",
	   "thresholds.set");
	assert_true(F.th.has_queue_depth && F.th.queue_depth == 100 && F.th.slot_usage == 1.0);
	bad("{\"cmd\":\"thresholds.set\",\"args\":{\"slot_usage\":1.5}}", "slot_usage");
	bad("{\"cmd\":\"thresholds.set\",\"args\":{}}", "queue_depth");

	assert_int_equal(run("{\"cmd\":\"ping\"}", &err, &res), 0);
	assert_string_equal(json_string_value(json_object_get(res, "mode")), "compute");
	json_decref(res);
	assert_int_equal(run("{\"id\":5,\"ts\":1,\"cmd\":\"stats.get\",\"args\":{}}", &err, &res),
			 0);
	assert_int_equal(json_integer_value(json_object_get(res, "rounds")), 3);
	json_decref(res);
	bad("{\"cmd\":\"ping\",\"args\":{\"x\":1}}", "'x'");
}

static void
t_envelope(void **state)
{
	(void)state;
	bad("[1,2]", "object");
	bad("\"ping\"", "object");
	bad("{}", "cmd");
	bad("{\"cmd\":5}", "cmd");
	bad("{\"cmd\":\"reboot\"}", "reboot");
	bad("{\"cmd\":\"ping\",\"args\":[]}", "args");
}

/* An operation's own error comes back unchanged. */
static void
t_op_errors(void **state)
{
	struct ctl_err err;
	static const int codes[] = {ENOENT, EEXIST, ENOSPC, EBUSY, EPERM};

	(void)state;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		F.ret = codes[i];
		assert_int_equal(
		    run("{\"cmd\":\"session.del\",\"args\":{\"tenant\":1,\"session\":1}}", &err,
			NULL),
		    -codes[i]);
		assert_int_equal(err.code, codes[i]);
		assert_non_null(strstr(err.msg, "refused"));
	}
	F.ret = 0;
	assert_string_equal(ctl_errname(-ENOENT), "ENOENT");
	assert_string_equal(ctl_errname(EEXIST), "EEXIST");
	assert_string_equal(ctl_errname(ENOSPC), "ENOSPC");
	assert_string_equal(ctl_errname(EBUSY), "EBUSY");
	assert_string_equal(ctl_errname(EPERM), "EPERM");
	assert_string_equal(ctl_errname(EINVAL), "EINVAL");
	assert_string_equal(cais_op_name(CAIS_OP_MIN), "min");
	assert_string_equal(ctl_mode_name(CTL_MODE_FORWARD_ONLY), "forward_only");
}

static char *
write_tmp(const char *text)
{
	static char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/cais-test-ctl-%d.json", (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static void
t_apply_file(void **state)
{
	struct ctl_err err;
	char *p;
	int calls;

	(void)state;
	p = write_tmp("[{\"cmd\":\"lease\",\"args\":{\"ttl_ms\":10}},"
		      "{\"cmd\":\"mode.set\",\"args\":{\"mode\":\"compute\"}}]");
	calls = F.calls;
	assert_int_equal(ctl_apply_file(&ops, p, &err), 0);
	assert_int_equal(F.calls, calls + 2);

	/* the first failure stops: request #2 fails, #3 never runs */
	p = write_tmp("[{\"cmd\":\"lease\",\"args\":{\"ttl_ms\":10}},"
		      "{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1}},"
		      "{\"cmd\":\"mode.set\",\"args\":{\"mode\":\"compute\"}}]");
	calls = F.calls;
	assert_int_equal(ctl_apply_file(&ops, p, &err), -EINVAL);
	assert_int_equal(F.calls, calls + 1);
	assert_non_null(strstr(err.msg, "request #2 (tensor.del)"));
	assert_non_null(strstr(err.msg, "session"));

	p = write_tmp("{\"cmd\":\"ping\"}");
	assert_int_equal(ctl_apply_file(&ops, p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "array"));
	p = write_tmp("[{\"cmd\":\"ping\"},");
	assert_int_equal(ctl_apply_file(&ops, p, &err), -EINVAL);
	unlink(p);
	assert_int_equal(ctl_apply_file(&ops, "/nonexistent/cais.json", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "/nonexistent/cais.json"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_session_add), cmocka_unit_test(t_other_commands),
	    cmocka_unit_test(t_envelope),    cmocka_unit_test(t_op_errors),
	    cmocka_unit_test(t_apply_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
