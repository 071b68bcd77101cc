/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-manager's core (control/manager/) without its sockets: every command
 * with good and bad input (a refused request must leave the store exactly
 * as it was and make no switch call), ids that are never granted twice
 * across restarts and job.end, exhaustion, the job lifecycle against a fake
 * switch (a ctl_endpoint on loopback in a thread, with fake table
 * operations that record what they are asked), admission refusals, lease
 * renewal, step.begin (identical for every rank, the scale rule, the
 * congestion policy, the bounded history) and the options.
 */
#include <errno.h>
#include <math.h>
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
#include <sqlite3.h>

#include "cmn_addr.h"
#include "ctl_client.h"
#include "ctl_endpoint.h"
#include "mgr.h"
#include "mgr_internal.h"

/* ---- the fake switch ---- */

struct fake {
	pthread_mutex_t lock;
	struct ctl_endpoint *ep;
	pthread_t tid;
	atomic_bool run, silent, silent_ack;
	uint16_t port;
	/* what the manager asked */
	unsigned int session_add, session_del, tensor_add, lease, stats_get, ping;
	struct ctl_session last_session;
	uint16_t del_tenant, del_session;
	struct ctl_tensor tensors[16];
	uint32_t last_ttl;
	/* what it answers */
	int session_add_rc;
	double slot_usage;
	long slots_used, slot_capacity, queue_depth;
	double uptime;
	unsigned int n_sessions; /* installed: (tenant << 16) | session */
	uint32_t sessions[64];
};

static struct fake F;

#define FAKE_COUNT(field)                                                                          \
	({                                                                                         \
		pthread_mutex_lock(&F.lock);                                                       \
		unsigned int v_ = F.field;                                                         \
		pthread_mutex_unlock(&F.lock);                                                     \
		v_;                                                                                \
	})

/* Set what the fake switch answers; its thread reads it under the lock. */
#define FAKE_SET(field, value)                                                                     \
	do {                                                                                       \
		pthread_mutex_lock(&F.lock);                                                       \
		F.field = (value);                                                                 \
		pthread_mutex_unlock(&F.lock);                                                     \
	} while (0)

static int
f_ping(void *ctx, json_t *res, struct ctl_err *err)
{
	(void)ctx, (void)err;
	pthread_mutex_lock(&F.lock);
	F.ping++;
	pthread_mutex_unlock(&F.lock);
	json_object_set_new(res, "mode", json_string("compute"));
	return 0;
}

static int
f_session_add(void *ctx, const struct ctl_session *s, struct ctl_err *err)
{
	int rc;

	(void)ctx;
	pthread_mutex_lock(&F.lock);
	F.session_add++;
	F.last_session = *s;
	rc = F.session_add_rc;
	for (unsigned int i = 0; i < F.n_sessions && !rc; i++)
		if (F.sessions[i] == ((uint32_t)s->tenant << 16 | s->session))
			rc = EEXIST;
	if (!rc && F.n_sessions < 64)
		F.sessions[F.n_sessions++] = (uint32_t)s->tenant << 16 | s->session;
	pthread_mutex_unlock(&F.lock);
	return rc ? ctl_fail(err, rc, "fake switch refuses session.add") : 0;
}

static int
f_session_del(void *ctx, uint16_t t, uint16_t s, struct ctl_err *err)
{
	(void)ctx, (void)err;
	pthread_mutex_lock(&F.lock);
	F.session_del++;
	F.del_tenant = t;
	F.del_session = s;
	for (unsigned int i = 0; i < F.n_sessions; i++)
		if (F.sessions[i] == ((uint32_t)t << 16 | s))
			F.sessions[i] = F.sessions[--F.n_sessions];
	pthread_mutex_unlock(&F.lock);
	return 0;
}

static int
f_tensor_add(void *ctx, const struct ctl_tensor *t, struct ctl_err *err)
{
	(void)ctx, (void)err;
	pthread_mutex_lock(&F.lock);
	if (F.tensor_add < 16)
		F.tensors[F.tensor_add] = *t;
	F.tensor_add++;
	pthread_mutex_unlock(&F.lock);
	return 0;
}

static int
f_tensor_del(void *ctx, uint16_t t, uint16_t s, uint32_t x, struct ctl_err *err)
{
	(void)ctx, (void)t, (void)s, (void)x;
	return ctl_fail(err, EPERM, "the manager never deletes tensors");
}

static int
f_lease(void *ctx, uint32_t ttl, struct ctl_err *err)
{
	(void)ctx, (void)err;
	pthread_mutex_lock(&F.lock);
	F.lease++;
	F.last_ttl = ttl;
	pthread_mutex_unlock(&F.lock);
	return 0;
}

static int
f_mode_set(void *ctx, enum ctl_mode m, struct ctl_err *err)
{
	(void)ctx, (void)m;
	return ctl_fail(err, EPERM, "the manager never sets the mode");
}

static int
f_thresholds(void *ctx, const struct ctl_thresholds *t, struct ctl_err *err)
{
	(void)ctx, (void)t;
	return ctl_fail(err, EPERM, "the manager never sets thresholds");
}

static int
f_stats(void *ctx, int64_t after, json_t *res, struct ctl_err *err)
{
	(void)after;
	json_t *sessions;

	(void)ctx, (void)err;
	pthread_mutex_lock(&F.lock);
	F.stats_get++;
	json_object_set_new(res, "mode", json_string("compute"));
	json_object_set_new(res, "slot_usage", json_real(F.slot_usage));
	json_object_set_new(res, "slots_used", json_integer(F.slots_used));
	json_object_set_new(res, "slot_capacity", json_integer(F.slot_capacity));
	json_object_set_new(res, "queue_depth", json_integer(F.queue_depth));
	json_object_set_new(res, "uptime_s", json_real(F.uptime));
	sessions = json_array();
	for (unsigned int i = 0; i < F.n_sessions; i++)
		json_array_append_new(sessions,
				      json_pack("{s:i, s:i}", "tenant", (int)(F.sessions[i] >> 16),
						"session", (int)(F.sessions[i] & 0xffff)));
	json_object_set_new(res, "sessions", sessions);
	pthread_mutex_unlock(&F.lock);
	return 0;
}

static const struct ctl_ops fake_ops = {
    .ping = f_ping,
    .session_add = f_session_add,
    .session_del = f_session_del,
    .tensor_add = f_tensor_add,
    .tensor_del = f_tensor_del,
    .lease = f_lease,
    .mode_set = f_mode_set,
    .thresholds_set = f_thresholds,
    .stats_get = f_stats,
};

static void *
fake_main(void *arg)
{
	(void)arg;
	while (atomic_load(&F.run)) {
		if (atomic_load(&F.silent)) {
			char buf[CTL_MAX_DGRAM];

			atomic_store(&F.silent_ack, true);
			/* lost, not late: nothing sent meanwhile may be applied afterwards */
			while (recv(ctl_endpoint_fd(F.ep), buf, sizeof(buf), MSG_DONTWAIT) > 0)
				;
			usleep(5000);
			continue;
		}
		ctl_endpoint_poll(F.ep, 20);
	}
	return NULL;
}

/* Stop answering, once the thread has seen it (it may be inside a poll). */
static void
fake_silence(bool on)
{
	atomic_store(&F.silent_ack, false);
	atomic_store(&F.silent, on);
	while (on && !atomic_load(&F.silent_ack))
		usleep(1000);
}

static char tmpdir[64];
static struct ctl_key fake_key;

static void
write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void
fake_start(void)
{
	struct ctl_endpoint_conf ec = {.ops = &fake_ops, .key = &fake_key};
	char path[128];

	memset(&F, 0, sizeof(F));
	pthread_mutex_init(&F.lock, NULL);
	F.slot_capacity = 65536;
	snprintf(path, sizeof(path), "%s/switch.key", tmpdir);
	write_file(path, "the fake switch's key", 21);
	assert_int_equal(ctl_key_load(path, &fake_key), 0);
	for (int tries = 0; tries < 20; tries++) {
		struct sockaddr_in a = {.sin_family = AF_INET};
		socklen_t al = sizeof(a);
		int fd = socket(AF_INET, SOCK_DGRAM, 0);

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
		close(fd);
		ec.addr = a;
		if (ctl_endpoint_open(&ec, &F.ep) == 0) {
			F.port = ntohs(a.sin_port);
			break;
		}
	}
	assert_non_null(F.ep);
	atomic_store(&F.run, true);
	assert_int_equal(pthread_create(&F.tid, NULL, fake_main, NULL), 0);
}

static void
fake_stop(void)
{
	atomic_store(&F.run, false);
	pthread_join(F.tid, NULL);
	ctl_endpoint_close(F.ep);
	pthread_mutex_destroy(&F.lock);
}

/* ---- the manager under test ---- */

static struct mgr_conf conf;

static void
conf_default(void)
{
	mgr_conf_init(&conf);
	conf.log_level = getenv("MGR_TEST_LOG") ? MGR_LOG_DEBUG : MGR_LOG_ERROR;
	assert_int_equal(cmn_parse_addr("10.0.0.254", 51733, &conf.agg), 0);
	conf.has_agg = true;
	conf.switch_ctl.sin_port = htons(F.port);
	snprintf(conf.switch_key_file, sizeof(conf.switch_key_file), "%s/switch.key", tmpdir);
	snprintf(conf.db, sizeof(conf.db), "%s/manager.db", tmpdir);
	conf.switch_timeout_ms = 150;
}

static struct mgr *
open_mgr(void)
{
	struct ctl_err err = {0};
	struct mgr *m = NULL;
	int rc = mgr_open(&conf, &m, &err);

	if (rc)
		fprintf(stderr, "mgr_open: %s\n", err.msg);
	assert_int_equal(rc, 0);
	return m;
}

/* One request; returns rc, *res the result (or NULL), err the error. */
static int
call(struct mgr *m, const char *cmd, const char *args, json_t **res, struct ctl_err *err)
{
	json_t *req = json_pack("{s:s}", "cmd", cmd), *r = json_object();
	int rc;

	if (args) {
		json_error_t je;
		json_t *a = json_loads(args, JSON_DECODE_ANY, &je);

		if (!a)
			fail_msg("bad test JSON %s: %s", args, je.text);
		json_object_set_new(req, "args", a);
	}
	rc = mgr_handle(m, req, r, err);
	json_decref(req);
	if (rc) {
		json_decref(r);
		r = NULL;
	}
	if (res)
		*res = r;
	else
		json_decref(r);
	return rc;
}

/* A request that must succeed; its result. */
static json_t *
ok(struct mgr *m, const char *cmd, const char *fmt, ...)
{
	struct ctl_err err = {0};
	char args[2048];
	json_t *res;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	rc = call(m, cmd, fmt[0] ? args : NULL, &res, &err);
	if (rc)
		fail_msg("%s %s: %s %s", cmd, args, ctl_errname(rc), err.msg);
	return res;
}

/* mgr_handle() on a request built by hand (the result is dropped). */
static int
handle_raw(struct mgr *m, const json_t *req, struct ctl_err *err)
{
	json_t *res = json_object();
	int rc = mgr_handle(m, req, res, err);

	json_decref(res);
	return rc;
}

static char *
snapshot(struct mgr *m)
{
	char *text = NULL;

	assert_int_equal(mgr_store_dump(m->store, &text), 0);
	return text;
}

static unsigned int
switch_calls(void)
{
	pthread_mutex_lock(&F.lock);
	unsigned int n = F.session_add + F.session_del + F.tensor_add + F.lease + F.stats_get;
	pthread_mutex_unlock(&F.lock);
	return n;
}

/* A request that must fail with code and a message containing what; nothing changes. */
static void
refused(struct mgr *m, const char *cmd, const char *args, int code, const char *what)
{
	char *before = snapshot(m), *after;
	unsigned int calls = switch_calls();
	struct ctl_err err = {0};
	json_t *res = NULL;
	int rc = call(m, cmd, args, &res, &err);

	if (rc != -code || !strstr(err.msg, what))
		fail_msg("%s %s: got %s '%s', want %s '...%s...'", cmd, args ? args : "",
			 rc ? ctl_errname(rc) : "ok", err.msg, ctl_errname(code), what);
	assert_null(res);
	after = snapshot(m);
	if (strcmp(before, after))
		fail_msg("%s %s changed the store:\n%s\n---\n%s", cmd, args, before, after);
	assert_int_equal(switch_calls(), calls);
	free(before);
	free(after);
}

static json_int_t
geti(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	if (!json_is_integer(v))
		fail_msg("no integer '%s'", k);
	return json_integer_value(v);
}

static const char *
gets_(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	if (!json_is_string(v))
		fail_msg("no string '%s'", k);
	return json_string_value(v);
}

static void
join_all(struct mgr *m, const char *job, unsigned int world)
{
	for (unsigned int r = 0; r < world; r++)
		json_decref(ok(m, "job.join",
			       "{\"job\": \"%s\", \"rank\": %u, \"mac\": \"02:ca:15:01:00:%02x\","
			       " \"ip\": \"198.18.1.%u\", \"port\": 47000}",
			       job, r, r + 1, r + 1));
}

/* Job "j" of 2 ranks with tensor 1 (sum); both ranks joined when join. */
static void
job_j2(struct mgr *m, bool join)
{
	json_decref(ok(m, "job.register", "{\"job\": \"j\", \"tenant\": \"t\", \"world\": 2}"));
	json_decref(ok(m, "tensor.register", "{\"job\": \"j\", \"tensor\": 1, \"op\": \"sum\"}"));
	if (join)
		join_all(m, "j", 2);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_manager.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	fake_start();
	conf_default();
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	fake_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		return -1;
	return 0;
}

/* ---- tests ---- */

static void
test_scale_rule(void **state)
{
	(void)state;
	/* n x max_abs x s x 2 < 2^31 */
	assert_true(mgr_scale_rule(4, 1.0, CAIS_DT_FIXED32) == ldexp(1, 27));
	assert_true(mgr_scale_rule(1, 3.0, CAIS_DT_FIXED32) == ldexp(1, 28));
	assert_true(mgr_scale_rule(4, 3.0, CAIS_DT_FIXED32) == ldexp(1, 26));
	assert_true(mgr_scale_rule(8, 1024.0, CAIS_DT_FIXED32) == ldexp(1, 16));
	/* clamps */
	assert_true(mgr_scale_rule(4, 0.0, CAIS_DT_FIXED32) == ldexp(1, 30));
	assert_true(mgr_scale_rule(1, 0.25, CAIS_DT_FIXED32) == ldexp(1, 30));
	assert_true(mgr_scale_rule(255, 1e300, CAIS_DT_FIXED32) == ldexp(1, -24));
	assert_true(mgr_scale_rule(2, 1e12, CAIS_DT_FIXED32) == ldexp(1, -11));
	assert_true(mgr_scale_rule(2, 1e20, CAIS_DT_FIXED32) == ldexp(1, -24));
	/* the exact boundary: equal is not below */
	assert_true(mgr_scale_rule(1, 0.5, CAIS_DT_FIXED32) == ldexp(1, 30));
	assert_true(mgr_scale_rule(2, 1.0, CAIS_DT_FIXED32) == ldexp(1, 28));
	/* the definition, on many values */
	srand(7);
	for (int i = 0; i < 100000; i++) {
		unsigned int n = 1 + (unsigned int)rand() % 255;
		double m = ldexp((double)rand() / RAND_MAX, rand() % 60 - 30);
		double s = mgr_scale_rule(n, m, CAIS_DT_FIXED32);
		long double p = (long double)n * m * 2;
		int e;

		assert_true(frexp(s, &e) == 0.5); /* a power of two */
		if (s > ldexp(1, -24))
			assert_true(p * s < 2147483648.0L);
		if (s < ldexp(1, 30))
			assert_true(p * s * 2 >= 2147483648.0L);
	}
	/* BLOCK16: max_abs x s x 2 < 2^55 whatever n, clamped to [2^-24, 2^54] */
	assert_true(mgr_scale_rule(4, 1.0, CAIS_DT_BLOCK16) == ldexp(1, 53));
	assert_true(mgr_scale_rule(255, 1.0, CAIS_DT_BLOCK16) == ldexp(1, 53));
	assert_true(mgr_scale_rule(4, 3.0, CAIS_DT_BLOCK16) == ldexp(1, 52));
	assert_true(mgr_scale_rule(4, 0.0, CAIS_DT_BLOCK16) == ldexp(1, 54));
	assert_true(mgr_scale_rule(4, 1e-300, CAIS_DT_BLOCK16) == ldexp(1, 54));
	assert_true(mgr_scale_rule(4, 1e30, CAIS_DT_BLOCK16) == ldexp(1, -24));
	for (int i = 0; i < 100000; i++) {
		double m = ldexp((double)rand() / RAND_MAX, rand() % 120 - 60);
		double s = mgr_scale_rule(1 + (unsigned int)rand() % 255, m, CAIS_DT_BLOCK16);
		long double p = (long double)m * 2;
		int e;

		assert_true(frexp(s, &e) == 0.5);
		if (s > ldexp(1, -24))
			assert_true(p * s < ldexpl(1.0L, 55));
		if (s < ldexp(1, 54))
			assert_true(p * s * 2 >= ldexpl(1.0L, 55));
	}
}

static void
test_bad_input(void **state)
{
	struct mgr *m;
	struct ctl_err err;
	json_t *req;
	char name65[80];

	(void)state;
	m = open_mgr();
	json_decref(ok(m, "job.register", "{\"job\": \"j\", \"tenant\": \"t\", \"world\": 2}"));
	json_decref(ok(m, "tensor.register", "{\"job\": \"j\", \"tensor\": 5, \"op\": \"sum\"}"));

	/* the request itself */
	req = json_array();
	assert_int_equal(handle_raw(m, req, &err), -EINVAL);
	json_decref(req);
	refused(m, "nope", NULL, EINVAL, "unknown command 'nope'");
	refused(m, "ping", "[]", EINVAL, "field 'args' must be an object");
	refused(m, "ping", "{\"x\": 1}", EINVAL, "unknown field 'x'");
	req = json_pack("{s:i}", "args", 1);
	assert_int_equal(handle_raw(m, req, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "missing field 'cmd'"));
	json_decref(req);
	req = json_pack("{s:i}", "cmd", 1);
	assert_int_equal(handle_raw(m, req, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "field 'cmd' must be a string"));
	json_decref(req);
	req = json_pack("{s:s, s:i}", "cmd", "ping", "extra", 1);
	assert_int_equal(handle_raw(m, req, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "unknown field 'extra'"));
	json_decref(req);

	/* job.register */
	memset(name65, 'a', 65);
	name65[65] = '\0';
	refused(m, "job.register", "{\"tenant\": \"t\", \"world\": 2}", EINVAL,
		"missing field 'job'");
	refused(m, "job.register", "{\"job\": 1, \"tenant\": \"t\", \"world\": 2}", EINVAL,
		"field 'job' must be a string");
	refused(m, "job.register", "{\"job\": \"\", \"tenant\": \"t\", \"world\": 2}", EINVAL,
		"field 'job' must have 1 to 64");
	{
		char a[200];

		snprintf(a, sizeof(a), "{\"job\": \"%s\", \"tenant\": \"t\", \"world\": 2}",
			 name65);
		refused(m, "job.register", a, EINVAL, "field 'job' must have 1 to 64");
		name65[64] = '\0'; /* 64 is fine */
		snprintf(a, sizeof(a), "{\"job\": \"%s\", \"tenant\": \"t\", \"world\": 2}",
			 name65);
		json_decref(ok(m, "job.register", "%s", a));
	}
	refused(m, "job.register", "{\"job\": \"a\\u0001\", \"tenant\": \"t\", \"world\": 2}",
		EINVAL, "field 'job' has a control character");
	refused(m, "job.register", "{\"job\": \"k\", \"world\": 2}", EINVAL,
		"missing field 'tenant'");
	refused(m, "job.register", "{\"job\": \"k\", \"tenant\": [], \"world\": 2}", EINVAL,
		"field 'tenant' must be a string");
	refused(m, "job.register", "{\"job\": \"k\", \"tenant\": \"t\"}", EINVAL,
		"missing field 'world'");
	refused(m, "job.register", "{\"job\": \"k\", \"tenant\": \"t\", \"world\": 0}", EINVAL,
		"field 'world' out of range");
	refused(m, "job.register", "{\"job\": \"k\", \"tenant\": \"t\", \"world\": 256}", EINVAL,
		"field 'world' out of range");
	refused(m, "job.register", "{\"job\": \"k\", \"tenant\": \"t\", \"world\": \"4\"}", EINVAL,
		"field 'world' must be an integer");
	refused(m, "job.register", "{\"job\": \"k\", \"tenant\": \"t\", \"world\": 4.0}", EINVAL,
		"field 'world' must be an integer");
	refused(m, "job.register", "{\"job\": \"k\", \"tenant\": \"t\", \"world\": -1}", EINVAL,
		"field 'world' out of range");
	refused(m, "job.register",
		"{\"job\": \"k\", \"tenant\": \"t\", \"world\": 2, \"slots\": 3}", EINVAL,
		"field 'slots' must be a power of two");
	refused(m, "job.register",
		"{\"job\": \"k\", \"tenant\": \"t\", \"world\": 2, \"slots\": 65536}", EINVAL,
		"field 'slots' out of range");
	refused(m, "job.register",
		"{\"job\": \"k\", \"tenant\": \"t\", \"world\": 2, \"elems_per_packet\": 0}",
		EINVAL, "field 'elems_per_packet' out of range");
	refused(m, "job.register",
		"{\"job\": \"k\", \"tenant\": \"t\", \"world\": 2, \"elems_per_packet\": 2049}",
		EINVAL, "field 'elems_per_packet' out of range");
	refused(m, "job.register",
		"{\"job\": \"k\", \"tenant\": \"t\", \"world\": 2, \"priority\": 2}", EINVAL,
		"field 'priority' out of range");
	refused(m, "job.register",
		"{\"job\": \"k\", \"tenant\": \"t\", \"world\": 2, \"priority\": true}", EINVAL,
		"field 'priority' must be an integer");
	refused(m, "job.register", "{\"job\": \"k\", \"tenant\": \"t\", \"world\": 2, \"n\": 2}",
		EINVAL, "unknown field 'n'");
	/* the same name with other values */
	refused(m, "job.register", "{\"job\": \"j\", \"tenant\": \"t\", \"world\": 3}", EEXIST,
		"another 'world'");
	refused(m, "job.register", "{\"job\": \"j\", \"tenant\": \"u\", \"world\": 2}", EEXIST,
		"another 'tenant'");
	refused(m, "job.register",
		"{\"job\": \"j\", \"tenant\": \"t\", \"world\": 2, \"slots\": 64}", EEXIST,
		"another 'slots'");

	/* job.join */
	refused(m, "job.join",
		"{\"job\": \"nope\", \"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": "
		"\"10.0.0.1\", \"port\": 1}",
		ENOENT, "no job 'nope'");
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 2, \"mac\": \"02:00:00:00:00:01\", \"ip\": "
		"\"10.0.0.1\", \"port\": 1}",
		EINVAL, "field 'rank' out of range [0, 1]");
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 255, \"mac\": \"02:00:00:00:00:01\", \"ip\": "
		"\"10.0.0.1\", \"port\": 1}",
		EINVAL, "field 'rank' out of range");
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 0, \"mac\": \"01:00:5e:00:00:01\", \"ip\": "
		"\"10.0.0.1\", \"port\": 1}",
		EINVAL, "field 'mac'");
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 0, \"mac\": \"02:00:00:00:00\", \"ip\": "
		"\"10.0.0.1\", \"port\": 1}",
		EINVAL, "field 'mac'");
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 0, \"mac\": \"02:00:00:00:00:0g\", \"ip\": "
		"\"10.0.0.1\", \"port\": 1}",
		EINVAL, "field 'mac'");
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": "
		"\"10.0.0.256\", \"port\": 1}",
		EINVAL, "field 'ip'");
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": 167772161, "
		"\"port\": 1}",
		EINVAL, "field 'ip' must be a string");
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": "
		"\"10.0.0.1\", \"port\": 0}",
		EINVAL, "field 'port' out of range");
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": "
		"\"10.0.0.1\", \"port\": 65536}",
		EINVAL, "field 'port' out of range");
	refused(m, "job.join", "{\"job\": \"j\", \"rank\": 0, \"ip\": \"10.0.0.1\", \"port\": 1}",
		EINVAL, "missing field 'mac'");
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": "
		"\"10.0.0.1\", \"port\": 1, \"vlan\": 3}",
		EINVAL, "unknown field 'vlan'");
	json_decref(ok(m, "job.join",
		       "{\"job\": \"j\", \"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": "
		       "\"10.0.0.1\", \"port\": 1}"));
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": "
		"\"10.0.0.1\", \"port\": 2}",
		EEXIST, "rank 0 of job 'j' has joined");
	refused(m, "job.join",
		"{\"job\": \"j\", \"rank\": 1, \"mac\": \"02:00:00:00:00:02\", \"ip\": "
		"\"10.0.0.1\", \"port\": 1}",
		EEXIST, "has 10.0.0.1:1 already");

	/* job.status */
	refused(m, "job.status", "{}", EINVAL, "missing field 'job'");
	refused(m, "job.status", "{\"job\": \"nope\"}", ENOENT, "no job 'nope'");
	refused(m, "job.status", "{\"job\": \"j\", \"rank\": 0}", EINVAL, "unknown field 'rank'");

	/* tensor.register */
	refused(m, "tensor.register", "{\"job\": \"j\", \"tensor\": -1, \"op\": \"sum\"}", EINVAL,
		"field 'tensor' out of range");
	refused(m, "tensor.register", "{\"job\": \"j\", \"tensor\": 4294967296, \"op\": \"sum\"}",
		EINVAL, "field 'tensor' out of range");
	refused(m, "tensor.register", "{\"job\": \"j\", \"tensor\": 1, \"op\": \"prod\"}", EINVAL,
		"field 'op' must be sum, avg, max or min");
	refused(m, "tensor.register", "{\"job\": \"j\", \"tensor\": 1, \"op\": 0}", EINVAL,
		"field 'op' must be a string");
	refused(m, "tensor.register", "{\"job\": \"j\", \"tensor\": 1}", EINVAL,
		"missing field 'op'");
	refused(m, "tensor.register", "{\"job\": \"nope\", \"tensor\": 1, \"op\": \"sum\"}", ENOENT,
		"no job 'nope'");
	refused(m, "tensor.register", "{\"job\": \"j\", \"tensor\": 5, \"op\": \"max\"}", EEXIST,
		"registered with op sum");

	/* step.begin, stats.report: the job is not ready */
	refused(m, "step.begin", "{\"job\": \"j\", \"rank\": 0, \"step\": 0}", EBUSY,
		"is not ready");
	refused(m, "step.begin", "{\"job\": \"j\", \"rank\": 0, \"step\": -1}", EINVAL,
		"field 'step' out of range");
	refused(m, "step.begin", "{\"job\": \"j\", \"rank\": 0}", EINVAL, "missing field 'step'");
	refused(m, "step.begin", "{\"job\": \"j\", \"step\": 0}", EINVAL, "missing field 'rank'");
	refused(m, "step.begin", "{\"job\": \"j\", \"rank\": 9, \"step\": 0}", EINVAL,
		"field 'rank' out of range");
	refused(m, "stats.report", "{\"job\": \"j\", \"rank\": 0, \"step\": 0}", EBUSY,
		"is not ready");

	/* job.end, jobs.list, switch.status, ping */
	refused(m, "job.end", "{\"job\": \"nope\"}", ENOENT, "no job 'nope'");
	refused(m, "job.end", "{\"job\": 3}", EINVAL, "field 'job' must be a string");
	refused(m, "jobs.list", "{\"all\": true}", EINVAL, "unknown field 'all'");
	refused(m, "switch.status", "{\"x\": 0}", EINVAL, "unknown field 'x'");
	mgr_close(m);
}

static void
test_stats_report_input(void **state)
{
	struct mgr *m;
	json_t *r;

	(void)state;
	m = open_mgr();
	job_j2(m, true);
	refused(m, "stats.report", "{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"tensors\": {}}",
		EINVAL, "field 'tensors' must be an array");
	refused(m, "stats.report", "{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"tensors\": [1]}",
		EINVAL, "field 'tensors[0]' must be an object");
	refused(m, "stats.report",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"tensors\": [{\"tensor\": 1}]}",
		EINVAL, "tensors[0]: missing field 'max_abs'");
	refused(m, "stats.report",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"tensors\": [{\"tensor\": 1, "
		"\"max_abs\": -1}]}",
		EINVAL, "tensors[0]: field 'max_abs' out of range");
	refused(m, "stats.report",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"tensors\": [{\"tensor\": 1, "
		"\"max_abs\": \"1\"}]}",
		EINVAL, "tensors[0]: field 'max_abs' must be a number");
	refused(m, "stats.report",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"tensors\": [{\"tensor\": 1, "
		"\"max_abs\": 1, \"norm\": 2}]}",
		EINVAL, "tensors[0]: unknown field 'norm'");
	refused(m, "stats.report",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"tensors\": [{\"tensor\": 1, "
		"\"max_abs\": 1}, {\"tensor\": 1, \"max_abs\": 2}]}",
		EINVAL, "tensors[1]: tensor 1 given twice");
	refused(m, "stats.report",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"tensors\": [{\"tensor\": 2, "
		"\"max_abs\": 1}]}",
		ENOENT, "tensor 2 of job 'j' is not registered");
	refused(m, "stats.report",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"collectives\": -1}", EINVAL,
		"field 'collectives' out of range");
	refused(m, "stats.report", "{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"fallbacks\": 0.5}",
		EINVAL, "field 'fallbacks' must be an integer");
	refused(m, "stats.report",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"congested\": \"y\"}", EINVAL,
		"field 'congested' must be a boolean or a count");
	refused(m, "stats.report", "{\"job\": \"j\", \"rank\": 2, \"step\": 0}", EINVAL,
		"field 'rank' out of range");
	refused(m, "stats.report", "{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"x\": 0}", EINVAL,
		"unknown field 'x'");
	r = ok(m, "stats.report",
	       "{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"tensors\": [{\"tensor\": 1, "
	       "\"max_abs\": 2.5}], \"collectives\": 10, \"fallbacks\": 0, \"errors\": 0, "
	       "\"congested\": false}");
	assert_int_equal(json_object_size(r), 0);
	json_decref(r);
	mgr_close(m);
}

static uint16_t
register_job(struct mgr *m, const char *job, const char *tenant, uint16_t *tenant_id)
{
	json_t *r = ok(m, "job.register", "{\"job\": \"%s\", \"tenant\": \"%s\", \"world\": 4}",
		       job, tenant);
	uint16_t s = (uint16_t)geti(r, "session");

	if (tenant_id)
		*tenant_id = (uint16_t)geti(r, "tenant");
	assert_string_equal(gets_(r, "state"), "waiting");
	json_decref(r);
	return s;
}

struct walk {
	struct mgr_store *st;
	unsigned int outer, inner[8];
};

static int
walk_inner(void *arg, const struct mgr_job *job)
{
	struct walk *w = arg;

	(void)job;
	return ++w->inner[w->outer - 1] > 8; /* bounded */
}

/* Each job: all of them again, from inside the walk (the same statement). */
static int
walk_outer(void *arg, const struct mgr_job *job)
{
	struct walk *w = arg;

	(void)job;
	if (++w->outer > 8)
		return 1; /* bounded */
	assert_int_equal(mgr_store_jobs(w->st, walk_inner, w), 0);
	return 0;
}

/*
 * The store keeps its statements prepared: one in use is not handed out
 * again (a walk of the jobs inside a walk of the jobs sees them all, each
 * time), and what is used again gives fresh rows (the dump's statements,
 * built in one buffer, each show their own table; a job read again after
 * a change shows the change).
 */
static void
test_store_kept_statements(void **state)
{
	struct walk w = {0};
	struct mgr *m;
	char *text;
	json_t *r;

	(void)state;
	m = open_mgr();
	register_job(m, "a", "alice", NULL);
	register_job(m, "b", "alice", NULL);
	register_job(m, "c", "bob", NULL);
	json_decref(ok(m, "tensor.register", "{\"job\": \"a\", \"tensor\": 7, \"op\": \"max\"}"));
	w.st = m->store;
	assert_int_equal(mgr_store_jobs(m->store, walk_outer, &w), 0);
	assert_int_equal(w.outer, 3);
	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(w.inner[i], 3);
	text = snapshot(m);
	assert_non_null(strstr(text, "[tenants]\nalice|1\nbob|2\n"));
	assert_non_null(strstr(text, "[tensors]\na|7|"));
	free(text);
	for (int i = 0; i < 2; i++) {
		r = ok(m, "job.status", "{\"job\": \"b\"}");
		assert_string_equal(gets_(r, "state"), i ? "ended" : "waiting");
		json_decref(r);
		json_decref(ok(m, "job.end", "{\"job\": \"b\"}"));
	}
	mgr_close(m);
}

static void
test_ids_never_reused(void **state)
{
	struct mgr *m;
	uint16_t s[8], t[8];
	json_t *r;

	(void)state;
	m = open_mgr();
	s[0] = register_job(m, "a", "alice", &t[0]);
	s[1] = register_job(m, "b", "alice", &t[1]);
	s[2] = register_job(m, "c", "bob", &t[2]);
	assert_int_equal(t[0], 1);
	assert_int_equal(t[1], 1); /* one id per tenant name */
	assert_int_equal(t[2], 2);
	assert_int_equal(s[0], 1);
	assert_int_equal(s[1], 2);
	assert_int_equal(s[2], 3);
	/* the same registration again: the same answer */
	assert_int_equal(register_job(m, "a", "alice", NULL), s[0]);
	json_decref(ok(m, "job.end", "{\"job\": \"b\"}"));
	r = ok(m, "job.end", "{\"job\": \"b\"}"); /* ending twice is harmless */
	assert_string_equal(gets_(r, "state"), "ended");
	json_decref(r);
	mgr_close(m);

	/* a restart: the jobs are there, new jobs get new ids */
	m = open_mgr();
	r = ok(m, "job.status", "{\"job\": \"a\"}");
	assert_int_equal(geti(r, "session"), s[0]);
	assert_string_equal(gets_(r, "state"), "waiting");
	json_decref(r);
	r = ok(m, "job.status", "{\"job\": \"b\"}");
	assert_string_equal(gets_(r, "state"), "ended");
	json_decref(r);
	s[3] = register_job(m, "d", "carol", &t[3]);
	assert_int_equal(t[3], 3);
	assert_int_equal(s[3], 4);
	/* an ended job's name again: a new run, new session id; its tenant keeps its id */
	s[4] = register_job(m, "b", "alice", &t[4]);
	assert_int_equal(t[4], 1);
	assert_int_equal(s[4], 5);
	json_decref(ok(m, "job.end", "{\"job\": \"d\"}"));
	mgr_close(m);
	m = open_mgr();
	s[5] = register_job(m, "e", "bob", &t[5]);
	assert_int_equal(t[5], 2);
	assert_int_equal(s[5], 6);
	for (int i = 0; i < 6; i++)
		for (int k = 0; k < i; k++)
			assert_int_not_equal(s[i], s[k]);
	r = ok(m, "jobs.list", "");
	assert_int_equal(json_array_size(json_object_get(r, "jobs")), 5);
	json_decref(r);
	r = ok(m, "ping", "");
	assert_int_equal(geti(r, "jobs"), 4);
	assert_string_equal(gets_(r, "version"), CAIS_VERSION_STRING);
	json_decref(r);
	mgr_close(m);
}

/* jobs.list pages (docs/PROTOCOL.md E5): every job once, oldest first, each page a datagram. */
static void
test_jobs_pages(void **state)
{
	const unsigned int n = 700;
	struct mgr *m;
	unsigned int seen = 0, pages = 0;
	long long after = -1;

	(void)state;
	m = open_mgr();
	for (unsigned int i = 0; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "job-%04u-with-a-longer-name", i);
		json_decref(ok(m, "job.register", "{\"job\": \"%s\", \"tenant\": \"t%u\", \"world\": 2}",
			       name, i % 3));
	}
	for (;;) {
		json_t *r = after < 0 ? ok(m, "jobs.list", "") : ok(m, "jobs.list", "{\"after\": %lld}", after);
		json_t *jobs = json_object_get(r, "jobs"), *next = json_object_get(r, "next");

		pages++;
		assert_true(json_dumpb(r, NULL, 0, JSON_COMPACT) < 60000);
		for (size_t i = 0; i < json_array_size(jobs); i++) {
			char want[32];

			snprintf(want, sizeof(want), "job-%04u-with-a-longer-name", seen++);
			assert_string_equal(
			    json_string_value(json_object_get(json_array_get(jobs, i), "job")), want);
		}
		if (!next) {
			json_decref(r);
			break;
		}
		assert_true(json_integer_value(next) > after);
		after = json_integer_value(next);
		json_decref(r);
	}
	print_message("%u jobs in %u pages\n", seen, pages);
	assert_int_equal(seen, n);
	assert_true(pages > 1);
	refused(m, "jobs.list", "{\"after\": -1}", EINVAL, "after");
	mgr_close(m);
}

static void
set_counter(const char *kind, long next)
{
	char sql[128];
	sqlite3 *db;

	assert_int_equal(sqlite3_open(conf.db, &db), SQLITE_OK);
	snprintf(sql, sizeof(sql), "UPDATE counters SET next = %ld WHERE name = '%s'", next, kind);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

static void
test_ids_exhausted(void **state)
{
	struct mgr *m;
	uint16_t t;

	(void)state;
	m = open_mgr();
	register_job(m, "a", "alice", NULL);
	mgr_close(m);
	set_counter("session", 65535);
	m = open_mgr();
	assert_int_equal(register_job(m, "b", "alice", &t), 65535);
	refused(m, "job.register", "{\"job\": \"c\", \"tenant\": \"alice\", \"world\": 4}", ENOSPC,
		"every session id");
	/* the job that got the last id can end; its id is not granted again */
	json_decref(ok(m, "job.end", "{\"job\": \"b\"}"));
	refused(m, "job.register", "{\"job\": \"c\", \"tenant\": \"alice\", \"world\": 4}", ENOSPC,
		"every session id");
	mgr_close(m);
	set_counter("session", 100);
	set_counter("tenant", 65536);
	m = open_mgr();
	refused(m, "job.register", "{\"job\": \"c\", \"tenant\": \"zed\", \"world\": 4}", ENOSPC,
		"every tenant id");
	assert_int_equal(register_job(m, "c", "alice", NULL), 100); /* a known tenant still works */
	mgr_close(m);
}

static void
test_lifecycle(void **state)
{
	struct mgr *m;
	json_t *r, *mb;
	uint16_t t, s;

	(void)state;
	m = open_mgr();
	r = ok(m, "job.register",
	       "{\"job\": \"train\", \"tenant\": \"lab\", \"world\": 4, \"slots\": 64, "
	       "\"elems_per_packet\": 1024, \"priority\": 1}");
	t = (uint16_t)geti(r, "tenant");
	s = (uint16_t)geti(r, "session");
	json_decref(r);
	r = ok(m, "tensor.register", "{\"job\": \"train\", \"tensor\": 7, \"op\": \"sum\"}");
	assert_false(json_is_true(json_object_get(r, "installed")));
	json_decref(r);
	json_decref(
	    ok(m, "tensor.register", "{\"job\": \"train\", \"tensor\": 3, \"op\": \"max\"}"));
	for (unsigned int rank = 0; rank < 3; rank++) {
		r = ok(
		    m, "job.join",
		    "{\"job\": \"train\", \"rank\": %u, \"mac\": \"02:CA:15:01:00:%02x\", \"ip\": "
		    "\"198.18.1.%u\", \"port\": %u}",
		    rank, rank + 1, rank + 1, 47000 + rank);
		assert_string_equal(gets_(r, "state"), "waiting");
		assert_int_equal(geti(r, "joined"), rank + 1);
		json_decref(r);
	}
	assert_int_equal(FAKE_COUNT(session_add), 0);
	r = ok(m, "job.join",
	       "{\"job\": \"train\", \"rank\": 3, \"mac\": \"02:ca:15:01:00:04\", \"ip\": "
	       "\"198.18.1.4\", \"port\": 47003}");
	assert_string_equal(gets_(r, "state"), "ready");
	assert_true(json_is_true(json_object_get(r, "offload")));
	assert_string_equal(gets_(r, "switch"), "10.0.0.254:51733");
	assert_int_equal(geti(r, "first_seq"), 0);
	assert_int_equal(geti(r, "slots"), 64);
	assert_int_equal(geti(r, "elems_per_packet"), 1024);
	mb = json_object_get(r, "members");
	assert_int_equal(json_array_size(mb), 4);
	assert_string_equal(gets_(json_array_get(mb, 2), "ip"), "198.18.1.3");
	assert_int_equal(geti(json_array_get(mb, 2), "port"), 47002);
	json_decref(r);

	/* what the switch got */
	pthread_mutex_lock(&F.lock);
	assert_int_equal(F.session_add, 1);
	assert_int_equal(F.last_session.tenant, t);
	assert_int_equal(F.last_session.session, s);
	assert_int_equal(F.last_session.n, 4);
	assert_int_equal(F.last_session.slots, 64);
	assert_int_equal(F.last_session.elems, 1024);
	assert_int_equal(F.last_session.priority, 1);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(F.last_session.members[i].mac[5], i + 1);
		assert_int_equal(ntohl(F.last_session.members[i].ip), 0xC6120101u + (unsigned)i);
		assert_int_equal(F.last_session.members[i].port, 47000 + i);
	}
	assert_int_equal(F.tensor_add, 2);
	assert_int_equal(F.tensors[0].tensor, 3); /* in id order */
	assert_int_equal(F.tensors[0].op, CAIS_OP_MAX);
	assert_true(F.tensors[0].scale == 1024.0);
	assert_int_equal(F.tensors[1].tensor, 7);
	assert_int_equal(F.tensors[1].tenant, t);
	assert_int_equal(F.tensors[1].session, s);
	pthread_mutex_unlock(&F.lock);

	/* a tensor registered now is installed at once */
	r = ok(m, "tensor.register", "{\"job\": \"train\", \"tensor\": 9, \"op\": \"avg\"}");
	assert_true(json_is_true(json_object_get(r, "installed")));
	json_decref(r);
	assert_int_equal(FAKE_COUNT(tensor_add), 3);
	r = ok(m, "tensor.register", "{\"job\": \"train\", \"tensor\": 9, \"op\": \"avg\"}");
	assert_true(json_is_true(json_object_get(r, "installed")));
	json_decref(r);
	assert_int_equal(FAKE_COUNT(tensor_add), 3);

	/* joining again with the same values (a lost reply) changes nothing */
	{
		char *before = snapshot(m), *after;

		r = ok(m, "job.join",
		       "{\"job\": \"train\", \"rank\": 1, \"mac\": \"02:ca:15:01:00:02\", \"ip\": "
		       "\"198.18.1.2\", \"port\": 47001}");
		assert_string_equal(gets_(r, "state"), "ready");
		json_decref(r);
		after = snapshot(m);
		assert_string_equal(before, after);
		free(before);
		free(after);
	}
	assert_int_equal(FAKE_COUNT(session_add), 1);
	r = ok(m, "job.register",
	       "{\"job\": \"train\", \"tenant\": \"lab\", \"world\": 4, \"slots\": 64, "
	       "\"elems_per_packet\": 1024, \"priority\": 1}");
	assert_string_equal(gets_(r, "state"), "ready");
	assert_int_equal(geti(r, "session"), s);
	json_decref(r);
	r = ok(m, "step.begin", "{\"job\": \"train\", \"rank\": 0, \"step\": 0}");
	assert_int_equal(json_array_size(json_object_get(r, "offload")), 3);
	json_decref(r);

	/* a restart keeps the ready job; the switch is not asked again */
	mgr_close(m);
	m = open_mgr();
	r = ok(m, "job.status", "{\"job\": \"train\"}");
	assert_string_equal(gets_(r, "state"), "ready");
	assert_true(json_is_true(json_object_get(r, "offload")));
	json_decref(r);
	assert_int_equal(FAKE_COUNT(session_add), 1);

	/* the end */
	r = ok(m, "job.end", "{\"job\": \"train\"}");
	assert_string_equal(gets_(r, "state"), "ended");
	json_decref(r);
	pthread_mutex_lock(&F.lock);
	assert_int_equal(F.session_del, 1);
	assert_int_equal(F.del_tenant, t);
	assert_int_equal(F.del_session, s);
	pthread_mutex_unlock(&F.lock);
	json_decref(ok(m, "job.end", "{\"job\": \"train\"}"));
	assert_int_equal(FAKE_COUNT(session_del), 1);
	refused(m, "step.begin", "{\"job\": \"train\", \"rank\": 0, \"step\": 1}", ENOENT,
		"has ended");
	refused(m, "job.join",
		"{\"job\": \"train\", \"rank\": 1, \"mac\": \"02:ca:15:01:00:02\", \"ip\": "
		"\"198.18.1.2\", \"port\": 47001}",
		ENOENT, "has ended");
	refused(m, "tensor.register", "{\"job\": \"train\", \"tensor\": 1, \"op\": \"sum\"}",
		ENOENT, "has ended");
	refused(m, "stats.report", "{\"job\": \"train\", \"rank\": 0, \"step\": 0}", ENOENT,
		"has ended");
	mgr_close(m);
}

static json_t *
ready_job(struct mgr *m, const char *job)
{
	json_decref(ok(m, "job.register",
		       "{\"job\": \"%s\", \"tenant\": \"t\", \"world\": 4, \"slots\": 128}", job));
	join_all(m, job, 4);
	return ok(m, "job.status", "{\"job\": \"%s\"}", job);
}

static void
expect_refused_job(struct mgr *m, const char *job, const char *reason)
{
	json_t *r = ready_job(m, job);

	assert_string_equal(gets_(r, "state"), "ready");
	assert_false(json_is_true(json_object_get(r, "offload")));
	if (!strstr(gets_(r, "reason"), reason))
		fail_msg("reason '%s', want '...%s...'", gets_(r, "reason"), reason);
	json_decref(r);
}

static void
test_admission(void **state)
{
	struct mgr *m;
	json_t *r;

	(void)state;
	m = open_mgr();
	/* slot usage above the threshold */
	FAKE_SET(slot_usage, 0.95);
	FAKE_SET(slots_used, 62259);
	expect_refused_job(m, "a", "slot usage 0.950 above the threshold 0.900");
	assert_int_equal(FAKE_COUNT(session_add), 0);
	/* below it, but not with the job's 128 slots: 58900 + 128 > 0.9 x 65536 */
	FAKE_SET(slot_usage, 0.8987);
	FAKE_SET(slots_used, 58900);
	mgr_tick(m, mgr_now_ms()); /* the next poll sees it */
	expect_refused_job(m, "b", "would pass 0.900");
	/* queue depth */
	FAKE_SET(slot_usage, 0.1);
	FAKE_SET(slots_used, 6553);
	FAKE_SET(queue_depth, 600);
	mgr_tick(m, mgr_now_ms() + 5000);
	expect_refused_job(m, "c", "queue depth 600 above the threshold 512");
	assert_int_equal(FAKE_COUNT(session_add), 0);
	/* the switch itself refuses */
	FAKE_SET(queue_depth, 0);
	FAKE_SET(session_add_rc, ENOSPC);
	mgr_tick(m, mgr_now_ms() + 10000);
	expect_refused_job(m, "d", "refused session.add: ENOSPC");
	/* EEXIST: session ids are never granted twice, so it is this job's own entry,
	 * added by a try whose reply was lost */
	FAKE_SET(session_add_rc, EEXIST);
	r = ready_job(m, "e");
	assert_true(json_is_true(json_object_get(r, "offload")));
	json_decref(r);
	assert_int_equal(FAKE_COUNT(session_add), 2);
	/* a refused job gets no tensors on the switch, but keeps its registry */
	r = ok(m, "tensor.register", "{\"job\": \"d\", \"tensor\": 1, \"op\": \"sum\"}");
	assert_false(json_is_true(json_object_get(r, "installed")));
	json_decref(r);
	assert_int_equal(FAKE_COUNT(tensor_add), 0);
	r = ok(m, "step.begin", "{\"job\": \"d\", \"rank\": 0, \"step\": 0}");
	assert_int_equal(json_array_size(json_object_get(r, "offload")), 0);
	assert_int_equal(json_array_size(json_object_get(r, "scales")), 1);
	json_decref(r);
	/* admitted when all is well */
	FAKE_SET(session_add_rc, 0);
	r = ready_job(m, "f");
	assert_true(json_is_true(json_object_get(r, "offload")));
	json_decref(r);
	/* a switch that does not answer */
	fake_silence(true);
	mgr_tick(m, mgr_now_ms() + 20000);
	expect_refused_job(m, "g", "unreachable");
	fake_silence(false);
	mgr_close(m);
}

static void
test_lease(void **state)
{
	struct mgr *m;
	int64_t t0 = 1000000;
	json_t *r, *l;

	(void)state;
	conf.lease_ms = 3000;
	conf.poll_ms = 1000;
	m = open_mgr();
	mgr_tick(m, t0);
	assert_int_equal(FAKE_COUNT(lease), 1);
	assert_int_equal(F.last_ttl, 3000);
	assert_int_equal(FAKE_COUNT(stats_get), 1);
	mgr_tick(m, t0 + 500);
	assert_int_equal(FAKE_COUNT(lease), 1);
	mgr_tick(m, t0 + 1000); /* every lease / 3 */
	assert_int_equal(FAKE_COUNT(lease), 2);
	assert_int_equal(FAKE_COUNT(stats_get), 2);
	mgr_tick(m, t0 + 2000);
	assert_int_equal(FAKE_COUNT(lease), 3);
	r = ok(m, "switch.status", "");
	assert_true(json_is_true(json_object_get(r, "reachable")));
	l = json_object_get(r, "lease");
	assert_int_equal(geti(l, "renewals"), 3);
	assert_int_equal(geti(l, "failures"), 0);
	assert_int_equal(geti(l, "ttl_ms"), 3000);
	assert_true(json_is_object(json_object_get(r, "stats")));
	json_decref(r);
	/* the switch goes silent: failures are counted (and logged) */
	fake_silence(true);
	mgr_tick(m, t0 + 3000);
	r = ok(m, "switch.status", "");
	assert_false(json_is_true(json_object_get(r, "reachable")));
	l = json_object_get(r, "lease");
	assert_int_equal(geti(l, "failures"), 1);
	assert_int_equal(geti(l, "failing"), 1);
	assert_non_null(strstr(gets_(l, "error"), "ETIMEDOUT"));
	json_decref(r);
	fake_silence(false);
	mgr_tick(m, t0 + 4000);
	r = ok(m, "switch.status", "");
	l = json_object_get(r, "lease");
	assert_int_equal(geti(l, "failing"), 0);
	assert_int_equal(geti(l, "renewals"), 4);
	json_decref(r);
	mgr_close(m);

	/* --lease-ms 0: no lease is ever sent */
	conf.lease_ms = 0;
	m = open_mgr();
	mgr_tick(m, t0 + 10000);
	mgr_tick(m, t0 + 20000);
	assert_int_equal(FAKE_COUNT(lease), 4);
	mgr_close(m);
}

static void
test_end_while_switch_silent(void **state)
{
	struct mgr *m;
	json_t *r;

	(void)state;
	m = open_mgr();
	r = ready_job(m, "a");
	assert_true(json_is_true(json_object_get(r, "offload")));
	json_decref(r);
	fake_silence(true);
	json_decref(ok(m, "job.end", "{\"job\": \"a\"}"));
	assert_int_equal(FAKE_COUNT(session_del), 0);
	fake_silence(false);
	/* a restart in between: the delete is still owed */
	mgr_close(m);
	m = open_mgr();
	mgr_tick(m, mgr_now_ms());
	pthread_mutex_lock(&F.lock);
	assert_int_equal(F.session_del, 1);
	assert_int_equal(F.del_session, 1);
	pthread_mutex_unlock(&F.lock);
	mgr_tick(m, mgr_now_ms() + 5000);
	assert_int_equal(FAKE_COUNT(session_del), 1);
	mgr_close(m);
}

static void
test_interrupted_install(void **state)
{
	struct mgr *m;
	sqlite3 *db;
	json_t *r;

	(void)state;
	m = open_mgr();
	json_decref(ok(m, "job.register", "{\"job\": \"a\", \"tenant\": \"t\", \"world\": 2}"));
	json_decref(ok(m, "job.join",
		       "{\"job\": \"a\", \"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": "
		       "\"10.0.0.1\", \"port\": 1}"));
	mgr_close(m);
	/* as a crash between the last join and the end of the install leaves it */
	assert_int_equal(sqlite3_open(conf.db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
				      "INSERT INTO members(job, rank, mac, ip, port) VALUES('a', 1, "
				      "'02:00:00:00:00:02', '10.0.0.2', 1); UPDATE jobs SET "
				      "installing = 1",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	m = open_mgr();
	mgr_tick(m, mgr_now_ms());
	r = ok(m, "job.status", "{\"job\": \"a\"}");
	assert_string_equal(gets_(r, "state"), "ready");
	assert_true(json_is_true(json_object_get(r, "offload")));
	json_decref(r);
	assert_int_equal(FAKE_COUNT(session_del), 1); /* what it may have left, first */
	assert_int_equal(FAKE_COUNT(session_add), 1);
	mgr_close(m);
}

/* The fake switch restarts: a smaller uptime, no sessions. */
static void
fake_restart(double uptime)
{
	pthread_mutex_lock(&F.lock);
	F.uptime = uptime;
	F.n_sessions = 0;
	pthread_mutex_unlock(&F.lock);
}

static void
test_switch_restart(void **state)
{
	struct mgr *m;
	int64_t t0 = mgr_now_ms();
	json_t *r;

	(void)state;
	FAKE_SET(uptime, 100);
	m = open_mgr();
	json_decref(ok(m, "job.register", "{\"job\": \"a\", \"tenant\": \"t\", \"world\": 2}"));
	json_decref(ok(m, "tensor.register", "{\"job\": \"a\", \"tensor\": 1, \"op\": \"sum\"}"));
	json_decref(ok(m, "tensor.register", "{\"job\": \"a\", \"tensor\": 2, \"op\": \"min\"}"));
	join_all(m, "a", 2);
	json_decref(ok(m, "job.register", "{\"job\": \"w\", \"tenant\": \"t\", \"world\": 2}"));
	assert_int_equal(FAKE_COUNT(session_add), 1);
	assert_int_equal(FAKE_COUNT(tensor_add), 2);
	mgr_tick(m, t0);
	FAKE_SET(uptime, 101);
	mgr_tick(m, t0 + 2000);
	assert_int_equal(FAKE_COUNT(session_add), 1);
	/* the switch restarted (uptime down, tables lost): the ready job goes back on it */
	fake_restart(1);
	mgr_tick(m, t0 + 4000);
	assert_int_equal(FAKE_COUNT(session_add), 2);
	assert_int_equal(FAKE_COUNT(tensor_add), 4);
	pthread_mutex_lock(&F.lock);
	assert_int_equal(F.last_session.n, 2);
	assert_int_equal(F.last_session.session, 1);
	pthread_mutex_unlock(&F.lock);
	FAKE_SET(uptime, 3);
	mgr_tick(m, t0 + 6000);
	assert_int_equal(FAKE_COUNT(session_add), 2);
	/* another restart */
	fake_restart(0.5);
	mgr_tick(m, t0 + 8000);
	assert_int_equal(FAKE_COUNT(session_add), 3);
	/* a switch that refuses it now: the job offloads nothing from the next step on */
	fake_restart(0.1);
	FAKE_SET(session_add_rc, ENOSPC);
	mgr_tick(m, t0 + 10000);
	assert_int_equal(FAKE_COUNT(session_add), 4);
	r = ok(m, "job.status", "{\"job\": \"a\"}");
	assert_false(json_is_true(json_object_get(r, "offload")));
	assert_non_null(
	    strstr(gets_(r, "reason"), "lost the session and refused it again: ENOSPC"));
	json_decref(r);
	r = ok(m, "step.begin", "{\"job\": \"a\", \"rank\": 0, \"step\": 0}");
	assert_int_equal(json_array_size(json_object_get(r, "offload")), 0);
	json_decref(r);
	FAKE_SET(session_add_rc, 0);
	fake_restart(0.05);
	mgr_tick(m, t0 + 12000);
	assert_int_equal(FAKE_COUNT(session_add), 4);
	mgr_close(m);

	/* a manager started while its job's session went missing (an operator's
	 * session.del, a switch restart while the manager was down): the first poll
	 * puts it back */
	m = open_mgr();
	r = ready_job(m, "b");
	assert_true(json_is_true(json_object_get(r, "offload")));
	json_decref(r);
	assert_int_equal(FAKE_COUNT(session_add), 5);
	mgr_close(m);
	pthread_mutex_lock(&F.lock);
	F.n_sessions = 0;
	pthread_mutex_unlock(&F.lock);
	m = open_mgr();
	mgr_tick(m, t0 + 14000);
	assert_int_equal(FAKE_COUNT(session_add), 6);
	pthread_mutex_lock(&F.lock);
	assert_int_equal(F.n_sessions, 1);
	pthread_mutex_unlock(&F.lock);
	mgr_tick(m, t0 + 16000);
	assert_int_equal(FAKE_COUNT(session_add), 6);
	mgr_close(m);
}

static json_t *
step(struct mgr *m, const char *job, unsigned int rank, int64_t s)
{
	return ok(m, "step.begin", "{\"job\": \"%s\", \"rank\": %u, \"step\": %lld}", job, rank,
		  (long long)s);
}

static void
report(struct mgr *m, unsigned int rank, int64_t s, const char *tensors, int congested)
{
	json_decref(ok(m, "stats.report",
		       "{\"job\": \"j\", \"rank\": %u, \"step\": %lld, \"tensors\": [%s], "
		       "\"collectives\": 4, \"fallbacks\": 0, \"errors\": 0, \"congested\": %d}",
		       rank, (long long)s, tensors, congested));
}

static char *
dump(const json_t *j)
{
	return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
}

static unsigned int
n_offload(const json_t *r)
{
	return (unsigned int)json_array_size(json_object_get(r, "offload"));
}

static double
scale_of(const json_t *r, uint32_t tensor)
{
	size_t i;
	json_t *e;

	json_array_foreach (json_object_get(r, "scales"), i, e)
		if (geti(e, "tensor") == tensor)
			return json_number_value(json_object_get(e, "scale"));
	fail_msg("no scale for tensor %u", tensor);
	return 0;
}

/* Every rank of job "j" (world of them) gets step s's answer exactly as first. */
static void
same_for_every_rank(struct mgr *m, const json_t *first, unsigned int world, int64_t s)
{
	char *a = dump(first);

	for (unsigned int rank = 0; rank < world; rank++) {
		json_t *r = step(m, "j", rank, s);
		char *b = dump(r);

		assert_string_equal(a, b);
		free(b);
		json_decref(r);
	}
	free(a);
}

/*
 * While the switch does not answer two polls in a row, a step offloads
 * nothing (and names it); once it answers again, everything.
 */
static void
test_step_switch_down(void **state)
{
	struct mgr *m;
	json_t *r;
	int64_t now = mgr_now_ms();

	(void)state;
	conf.poll_ms = 1000;
	m = open_mgr();
	job_j2(m, true);
	r = step(m, "j", 0, 0);
	assert_int_equal(n_offload(r), 1);
	assert_null(json_object_get(r, "unreachable"));
	json_decref(r);
	fake_silence(true);
	mgr_tick(m, now); /* one poll unanswered: not yet */
	r = step(m, "j", 1, 1);
	assert_int_equal(n_offload(r), 1);
	json_decref(r);
	mgr_tick(m, now + 1000); /* two */
	r = step(m, "j", 1, 2);
	assert_int_equal(n_offload(r), 0);
	assert_non_null(strstr(json_string_value(json_object_get(r, "unreachable")), "127.0.0.1:"));
	json_decref(r);
	fake_silence(false);
	mgr_tick(m, now + 2000);
	r = step(m, "j", 0, 3);
	assert_int_equal(n_offload(r), 1);
	assert_null(json_object_get(r, "unreachable"));
	json_decref(r);
	mgr_close(m);
}

/*
 * Scales come from each rank's latest report (of the previous step, else
 * of the one before); while a rank has neither, a scale may go down (the
 * reports so far need it) but not up (that rank may hold larger values).
 */
static void
test_step_partial_reports(void **state)
{
	struct mgr *m;
	json_t *r;

	(void)state;
	m = open_mgr();
	job_j2(m, false);
	json_decref(ok(m, "tensor.register",
		       "{\"job\": \"j\", \"tensor\": 2, \"op\": \"sum\", \"dtype\": \"bf16\"}"));
	join_all(m, "j", 2);
	json_decref(step(m, "j", 0, 0));
	/* rank 0 alone: its values would allow larger scales; kept */
	report(m, 0, 0, "{\"tensor\": 1, \"max_abs\": 1.0}, {\"tensor\": 2, \"max_abs\": 1.0}", 0);
	r = step(m, "j", 0, 1);
	assert_true(scale_of(r, 1) == 1024.0);
	assert_true(scale_of(r, 2) == ldexp(1, CAIS_B16_DEFAULT_SCALE_EXP));
	json_decref(r);
	/* rank 0 alone again, with values the current scales do not fit: lowered */
	report(m, 0, 1, "{\"tensor\": 1, \"max_abs\": 1e6}, {\"tensor\": 2, \"max_abs\": 1e12}", 0);
	r = step(m, "j", 0, 2);
	assert_true(scale_of(r, 1) == 512.0); /* 2 x 1e6 x s x 2 < 2^31 */
	assert_true(scale_of(r, 2) == mgr_scale_rule(2, 1e12, CAIS_DT_BLOCK16));
	assert_true(scale_of(r, 2) < ldexp(1, CAIS_B16_DEFAULT_SCALE_EXP));
	json_decref(r);
	/* both ranks: up again */
	report(m, 0, 2, "{\"tensor\": 1, \"max_abs\": 1.0}", 0);
	report(m, 1, 2, "{\"tensor\": 1, \"max_abs\": 2.0}, {\"tensor\": 2, \"max_abs\": 2.0}", 0);
	r = step(m, "j", 1, 3);
	assert_true(scale_of(r, 1) == ldexp(1, 27)); /* 2 x 2 x s x 2 < 2^31 */
	assert_true(scale_of(r, 2) == ldexp(1, 52)); /* 2 x s x 2 < 2^55 */
	json_decref(r);
	/* rank 0 reports step 3, rank 1 not yet: rank 1's latest is its step 2's (2.0) */
	report(m, 0, 3, "{\"tensor\": 1, \"max_abs\": 0.5}", 0);
	r = step(m, "j", 0, 4);
	assert_true(scale_of(r, 1) == ldexp(1, 27));
	json_decref(r);
	/* rank 1 reports step 4, rank 0 not yet: rank 0's latest is its step 3's (0.5) */
	report(m, 1, 4, "{\"tensor\": 1, \"max_abs\": 0.25}", 0);
	r = step(m, "j", 1, 5);
	assert_true(scale_of(r, 1) == ldexp(1, 29)); /* 2 x 0.5 x s x 2 < 2^31 */
	json_decref(r);
	mgr_close(m);
}

static void
test_step_begin(void **state)
{
	struct mgr *m;
	json_t *r, *first;
	char *a, *b;

	(void)state;
	m = open_mgr();
	json_decref(ok(m, "job.register", "{\"job\": \"j\", \"tenant\": \"t\", \"world\": 4}"));
	for (int t = 1; t <= 3; t++)
		json_decref(ok(m, "tensor.register",
			       "{\"job\": \"j\", \"tensor\": %d, \"op\": \"sum\"}", t));
	join_all(m, "j", 4);

	/* step 0: the default scale, every installed tensor, the same for every rank */
	first = step(m, "j", 2, 0);
	assert_int_equal(geti(first, "step"), 0);
	assert_int_equal(n_offload(first), 3);
	for (uint32_t t = 1; t <= 3; t++)
		assert_true(scale_of(first, t) == 1024.0);
	same_for_every_rank(m, first, 4, 0);
	json_decref(first);

	/* the max over ranks of step 0's max_abs gives step 1's scales (every rank reported) */
	report(m, 0, 0, "{\"tensor\": 1, \"max_abs\": 1.0}, {\"tensor\": 2, \"max_abs\": 0}", 0);
	report(m, 1, 0, "{\"tensor\": 1, \"max_abs\": 3.0}", 0);
	report(m, 2, 0, "", 0);
	report(m, 3, 0, "", 0);
	first = step(m, "j", 3, 1);
	assert_true(scale_of(first, 1) == ldexp(1, 26)); /* 4 x 3 x 2^26 x 2 < 2^31 */
	assert_true(scale_of(first, 2) == ldexp(1, 30)); /* max_abs 0: the clamp */
	assert_true(scale_of(first, 3) == 1024.0);	 /* no report: unchanged */
	assert_int_equal(n_offload(first), 3);
	/* a late report does not change an answer already given */
	report(m, 2, 0, "{\"tensor\": 1, \"max_abs\": 1000.0}", 0);
	same_for_every_rank(m, first, 4, 1);
	json_decref(first);

	/* congestion: halve, halve, then double back */
	report(m, 1, 1, "{\"tensor\": 3, \"max_abs\": 0.5}", 3);
	report(m, 0, 1, "", 0);
	report(m, 2, 1, "", 0);
	report(m, 3, 1, "", 0);
	r = step(m, "j", 0, 2);
	assert_int_equal(n_offload(r), 1);
	assert_true(json_is_true(json_object_get(r, "congested")));
	assert_int_equal(json_integer_value(json_array_get(json_object_get(r, "offload"), 0)), 1);
	assert_true(scale_of(r, 3) == ldexp(1, 28)); /* 4 x 0.5 x s x 2 < 2^31 */
	assert_true(scale_of(r, 1) == ldexp(1, 26)); /* kept from step 1 */
	json_decref(r);
	report(m, 0, 2, "", 1);
	r = step(m, "j", 0, 3);
	assert_int_equal(n_offload(r), 0);
	json_decref(r);
	r = step(m, "j", 0, 4);
	assert_int_equal(n_offload(r), 1);
	assert_false(json_is_true(json_object_get(r, "congested")));
	json_decref(r);
	r = step(m, "j", 0, 5);
	assert_int_equal(n_offload(r), 2);
	json_decref(r);
	r = step(m, "j", 0, 6);
	assert_int_equal(n_offload(r), 3);
	json_decref(r);

	/* the answers survive a restart */
	r = step(m, "j", 1, 6);
	a = dump(r);
	json_decref(r);
	mgr_close(m);
	m = open_mgr();
	r = step(m, "j", 2, 6);
	b = dump(r);
	assert_string_equal(a, b);
	free(a);
	free(b);
	json_decref(r);

	/* a bounded history: 8 steps */
	for (int64_t s = 7; s <= 20; s++)
		json_decref(step(m, "j", 0, s));
	refused(m, "step.begin", "{\"job\": \"j\", \"rank\": 1, \"step\": 12}", ENOENT,
		"older than the 8 steps kept");
	r = step(m, "j", 1, 13);
	assert_int_equal(geti(r, "step"), 13);
	json_decref(r);
	mgr_close(m);
}

/*
 * step.begin with the report of the step that ends (docs/PROTOCOL.md E13):
 * stored before the answer is computed, as if stats.report had come first;
 * a report that is not this rank's, not of an earlier step or that
 * stats.report would refuse refuses the whole request and stores nothing.
 */
static void
test_step_begin_report(void **state)
{
	struct mgr *m;
	json_t *r;

	(void)state;
	m = open_mgr();
	job_j2(m, true);
	json_decref(step(m, "j", 0, 0));
	json_decref(step(m, "j", 1, 0));

	refused(m, "step.begin", "{\"job\": \"j\", \"rank\": 0, \"step\": 1, \"report\": 1}",
		EINVAL, "field 'report' must be an object");
	refused(m, "step.begin",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 1, \"report\": "
		"{\"job\": \"j\", \"rank\": 1, \"step\": 0}}",
		EINVAL, "report: not of job 'j' rank 0");
	refused(m, "step.begin",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 1, \"report\": "
		"{\"job\": \"k\", \"rank\": 0, \"step\": 0}}",
		EINVAL, "report: not of job 'j' rank 0");
	refused(m, "step.begin",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 1, \"report\": "
		"{\"job\": \"j\", \"rank\": 0, \"step\": 1}}",
		EINVAL, "report: its step must come before step 1");
	refused(m, "step.begin",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 1, \"report\": "
		"{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"tensors\": "
		"[{\"tensor\": 9, \"max_abs\": 1.0}]}}",
		ENOENT, "report: tensors[0]: tensor 9 of job 'j' is not registered");
	refused(m, "step.begin",
		"{\"job\": \"j\", \"rank\": 0, \"step\": 1, \"report\": "
		"{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"x\": 1}}",
		EINVAL, "report: unknown field 'x'");

	/* rank 0's report of step 0 with a large max |x|: step 1's scale goes down
	 * from the default (rank 1 has not reported: it may not go up) */
	r = ok(m, "step.begin",
	       "{\"job\": \"j\", \"rank\": 0, \"step\": 1, \"report\": "
	       "{\"job\": \"j\", \"rank\": 0, \"step\": 0, \"tensors\": "
	       "[{\"tensor\": 1, \"max_abs\": 1000000.0}], \"collectives\": 1, "
	       "\"fallbacks\": 0, \"errors\": 0, \"congested\": false}}");
	assert_true(scale_of(r, 1) == 512.0); /* 2 x 1e6 x 512 x 2 < 2^31 */
	same_for_every_rank(m, r, 2, 1);
	json_decref(r);
	/* both reports in, both small: step 2's scale goes up */
	json_decref(ok(m, "step.begin",
		       "{\"job\": \"j\", \"rank\": 1, \"step\": 2, \"report\": "
		       "{\"job\": \"j\", \"rank\": 1, \"step\": 1, \"tensors\": "
		       "[{\"tensor\": 1, \"max_abs\": 3.0}]}}"));
	r = ok(m, "step.begin",
	       "{\"job\": \"j\", \"rank\": 0, \"step\": 2, \"report\": "
	       "{\"job\": \"j\", \"rank\": 0, \"step\": 1, \"tensors\": "
	       "[{\"tensor\": 1, \"max_abs\": 1.0}]}}");
	/* rank 1 asked first: its report and rank 0's of step 0 (1e6) */
	assert_true(scale_of(r, 1) == 512.0);
	json_decref(r);
	r = step(m, "j", 0, 3);
	assert_true(scale_of(r, 1) == ldexp(1, 27)); /* 2 x 3 x 2^27 x 2 < 2^31 */
	json_decref(r);
	mgr_close(m);
}

/* The wire of a step answer's tensor ("" when absent). */
static const char *
wire_of(const json_t *r, uint32_t tensor)
{
	const json_t *v;
	size_t i;

	json_array_foreach (json_object_get(r, "scales"), i, v)
		if (json_integer_value(json_object_get(v, "tensor")) == tensor)
			return json_string_value(json_object_get(v, "wire"));
	return "";
}

/*
 * Wire types (docs/PROTOCOL.md E4): bf16 and fp16 tensors go as BLOCK16 by
 * default, at 2^24 and then the BLOCK16 scale rule; the switch's tensor.add
 * and step.begin say so; int32 is FIXED32 only; a tensor keeps its wire.
 */
static void
test_tensor_wire(void **state)
{
	struct mgr *m;
	json_t *r;

	(void)state;
	m = open_mgr();
	json_decref(ok(m, "job.register", "{\"job\": \"j\", \"tenant\": \"t\", \"world\": 4}"));
	r = ok(m, "tensor.register", "{\"job\": \"j\", \"tensor\": 1, \"op\": \"sum\", "
				     "\"dtype\": \"bf16\"}");
	assert_string_equal(gets_(r, "wire"), "block16");
	assert_true(json_real_value(json_object_get(r, "scale")) == ldexp(1, 24));
	json_decref(r);
	r = ok(m, "tensor.register",
	       "{\"job\": \"j\", \"tensor\": 2, \"op\": \"max\", \"dtype\": \"f32\"}");
	assert_string_equal(gets_(r, "wire"), "fixed32");
	json_decref(r);
	r = ok(m, "tensor.register", "{\"job\": \"j\", \"tensor\": 3, \"op\": \"sum\", "
				     "\"dtype\": \"f16\", \"wire\": \"fixed32\"}");
	assert_string_equal(gets_(r, "wire"), "fixed32");
	json_decref(r);
	r = ok(m, "tensor.register", "{\"job\": \"j\", \"tensor\": 4, \"op\": \"sum\", "
				     "\"dtype\": \"f32\", \"wire\": \"block16\"}");
	assert_string_equal(gets_(r, "wire"), "block16");
	json_decref(r);
	refused(m, "tensor.register",
		"{\"job\": \"j\", \"tensor\": 5, \"op\": \"sum\", \"dtype\": \"i32\", "
		"\"wire\": \"block16\"}",
		EINVAL, "i32 tensors go as fixed32");
	refused(m, "tensor.register",
		"{\"job\": \"j\", \"tensor\": 5, \"op\": \"sum\", \"dtype\": \"f64\"}", EINVAL,
		"field 'dtype'");
	refused(m, "tensor.register",
		"{\"job\": \"j\", \"tensor\": 5, \"op\": \"sum\", \"wire\": \"block8\"}", EINVAL,
		"field 'wire'");
	/* the same tensor again: the same values, or EEXIST */
	json_decref(ok(m, "tensor.register",
		       "{\"job\": \"j\", \"tensor\": 1, \"op\": \"sum\", \"dtype\": \"bf16\"}"));
	refused(m, "tensor.register",
		"{\"job\": \"j\", \"tensor\": 1, \"op\": \"sum\", \"dtype\": \"f32\"}", EEXIST,
		"wire block16");
	join_all(m, "j", 4);

	/* the switch's entries carry the wire */
	pthread_mutex_lock(&F.lock);
	assert_int_equal(F.tensor_add, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(F.tensors[i].wire,
				 F.tensors[i].tensor == 1 || F.tensors[i].tensor == 4
				     ? CAIS_DT_BLOCK16
				     : CAIS_DT_FIXED32);
	pthread_mutex_unlock(&F.lock);

	/* step.begin: each tensor's wire, the BLOCK16 scale rule from the reports */
	r = step(m, "j", 0, 0);
	assert_string_equal(wire_of(r, 1), "block16");
	assert_string_equal(wire_of(r, 2), "fixed32");
	assert_true(scale_of(r, 1) == ldexp(1, 24));
	assert_true(scale_of(r, 2) == 1024.0);
	json_decref(r);
	report(m, 0, 0, "{\"tensor\": 1, \"max_abs\": 3.0}, {\"tensor\": 2, \"max_abs\": 3.0}", 0);
	for (unsigned int rank = 1; rank < 4; rank++)
		report(m, rank, 0, "", 0);
	r = step(m, "j", 1, 1);
	assert_true(scale_of(r, 1) == ldexp(1, 52)); /* 3 x s x 2 < 2^55 */
	assert_true(scale_of(r, 2) == ldexp(1, 26)); /* 4 x 3 x s x 2 < 2^31 */
	json_decref(r);
	mgr_close(m);

	/* --half-wire fixed32: bf16 tensors go as FIXED32 unless told otherwise */
	conf.half_wire = CAIS_DT_FIXED32;
	m = open_mgr();
	json_decref(ok(m, "job.register", "{\"job\": \"k\", \"tenant\": \"t\", \"world\": 2}"));
	r = ok(m, "tensor.register", "{\"job\": \"k\", \"tensor\": 1, \"op\": \"sum\", "
				     "\"dtype\": \"bf16\"}");
	assert_string_equal(gets_(r, "wire"), "fixed32");
	json_decref(r);
	mgr_close(m);
	conf.half_wire = CAIS_DT_BLOCK16;
}

/* A store of schema 1 (before wire types) is upgraded: its tensors are FIXED32. */
static void
test_store_upgrade(void **state)
{
	struct mgr *m;
	sqlite3 *db;
	json_t *r;

	(void)state;
	m = open_mgr();
	json_decref(ok(m, "job.register", "{\"job\": \"j\", \"tenant\": \"t\", \"world\": 1}"));
	json_decref(ok(m, "tensor.register", "{\"job\": \"j\", \"tensor\": 1, \"op\": \"sum\"}"));
	mgr_close(m);
	/* what schema 1 had: tensors without wire, members without ports */
	assert_int_equal(sqlite3_open(conf.db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
				      "CREATE TABLE t1(job TEXT NOT NULL, tensor INTEGER NOT NULL,"
				      " op INTEGER NOT NULL, installed INTEGER NOT NULL, scale REAL"
				      " NOT NULL, PRIMARY KEY(job, tensor));"
				      "INSERT INTO t1 SELECT job, tensor, op, installed, scale FROM "
				      "tensors; DROP TABLE tensors; ALTER TABLE t1 RENAME TO "
				      "tensors; ALTER TABLE members DROP COLUMN ports; "
				      "PRAGMA user_version=1;",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	m = open_mgr();
	join_all(m, "j", 1);
	r = step(m, "j", 0, 0);
	assert_string_equal(wire_of(r, 1), "fixed32");
	json_decref(r);
	mgr_close(m);
	assert_int_equal(sqlite3_open(conf.db, &db), SQLITE_OK);
	{
		sqlite3_stmt *s;

		assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL),
				 SQLITE_OK);
		assert_int_equal(sqlite3_step(s), SQLITE_ROW);
		assert_int_equal(sqlite3_column_int(s, 0), 3);
		sqlite3_finalize(s);
	}
	sqlite3_close(db);
}

/* The most tensors a job may have, with the longest ids and scales: the
 * step.begin reply still fits one datagram. */
static void
test_tensor_limit(void **state)
{
	struct ctl_endpoint_conf ec = {.handler = mgr_handle};
	struct ctl_endpoint *ep;
	static char reply[CTL_MAX_DGRAM];
	const char *req = "{\"id\": 1, \"cmd\": \"step.begin\", \"args\": {\"job\": \"big\", "
			  "\"rank\": 0, \"step\": 0}}";
	struct mgr *m;
	sqlite3 *db;
	json_t *r, *res;
	size_t n;

	(void)state;
	m = open_mgr();
	json_decref(ok(m, "job.register", "{\"job\": \"big\", \"tenant\": \"t\", \"world\": 1}"));
	mgr_close(m);
	assert_int_equal(sqlite3_open(conf.db, &db), SQLITE_OK);
	assert_int_equal(
	    sqlite3_exec(db,
			 "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM "
			 "k WHERE i < 766) INSERT INTO tensors SELECT 'big', "
			 "4294967295 - i, 0, 0, 5.9604644775390625e-08, 1 FROM k",
			 NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	m = open_mgr();
	json_decref(ok(m, "tensor.register",
		       "{\"job\": \"big\", \"tensor\": 1000000000, \"op\": \"sum\"}"));
	refused(m, "tensor.register", "{\"job\": \"big\", \"tensor\": 1000000001, \"op\": \"sum\"}",
		ENOSPC, "has 768 tensors");
	join_all(m, "big", 1);
	assert_int_equal(FAKE_COUNT(tensor_add), MGR_MAX_TENSORS);
	ec.handler_ctx = m;
	assert_int_equal(ctl_endpoint_open(&ec, &ep), 0);
	n = ctl_endpoint_handle(ep, (const uint8_t *)req, strlen(req), reply, sizeof(reply));
	r = json_loadb(reply, n, 0, NULL);
	assert_non_null(r);
	if (!json_is_true(json_object_get(r, "ok")))
		fail_msg("step.begin: %.300s", reply);
	res = json_object_get(r, "result");
	assert_int_equal(json_array_size(json_object_get(res, "offload")), MGR_MAX_TENSORS);
	assert_int_equal(json_array_size(json_object_get(res, "scales")), MGR_MAX_TENSORS);
	assert_true(n > 60000); /* the bound above is near */
	json_decref(r);
	ctl_endpoint_close(ep);
	mgr_close(m);
}

static void
test_conf(void **state)
{
	struct mgr_conf c;
	struct ctl_err err;
	char path[128], json[256];
	FILE *devnull = fopen("/dev/null", "w");

	(void)state;
	snprintf(path, sizeof(path), "%s/manager.json", tmpdir);
	snprintf(json, sizeof(json),
		 "{\"agg\": \"10.1.2.3:6000\", \"lease-ms\": 1200, \"max-slot-usage\": 0.5, "
		 "\"log-level\": \"debug\", \"db\": \"/tmp/x.db\"}");
	write_file(path, json, strlen(json));
	{
		char *argv[] = {"cais-manager", "--config", path, "--lease-ms", "900", NULL};

		mgr_conf_init(&c);
		assert_int_equal(mgr_conf_parse(&c, 5, argv, devnull, &err), 0);
		assert_int_equal(c.lease_ms, 900); /* the command line wins */
		assert_true(c.max_slot_usage == 0.5);
		assert_int_equal(c.log_level, MGR_LOG_DEBUG);
		assert_int_equal(ntohs(c.agg.sin_port), 6000);
		assert_string_equal(c.db, "/tmp/x.db");
		assert_int_equal(c.poll_ms, 1000);
		assert_int_equal(ntohs(c.listen.sin_port), CAIS_MGR_PORT);
	}
	{
		char *argv[] = {"cais-manager", "--help", NULL};

		mgr_conf_init(&c);
		assert_int_equal(mgr_conf_parse(&c, 2, argv, devnull, &err), 1);
	}
	{
		char *argv[] = {"cais-manager", NULL};

		mgr_conf_init(&c);
		assert_int_equal(mgr_conf_parse(&c, 1, argv, devnull, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "--agg"));
	}
	{
		static const char *const bad[][2] = {
		    {"lease-ms", "abc"},
		    {"lease-ms", "10"},
		    {"poll-ms", "-5"},
		    {"max-slot-usage", "1.5"},
		    {"default-scale", "0"},
		    {"default-slots", "3"},
		    {"log-level", "verbose"},
		    {"agg", "10.0.0"},
		    {"listen", "1.2.3.4:0"},
		    {"switch-ctl", "x:1"},
		    {"history", "0"},
		    {"default-priority", "2"},
		    {"nope", "1"},
		    {"default-elems", "4096"},
		    {"agg", "0.0.0.0"},
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			mgr_conf_init(&c);
			if (mgr_conf_set(&c, bad[i][0], bad[i][1], &err) != -EINVAL)
				fail_msg("--%s %s accepted", bad[i][0], bad[i][1]);
			assert_non_null(strstr(err.msg, bad[i][0]));
		}
	}
	{
		char *argv[] = {"cais-manager", "--config", path, NULL};
		static const char *const bad[] = {
		    "{\"agg\": \"1.2.3.4\", \"bogus\": 1}",
		    "{\"agg\": \"1.2.3.4\", \"config\": \"x\"}",
		    "{\"agg\": \"1.2.3.4\", \"lease-ms\": true}",
		    "[\"agg\"]",
		    "{\"agg\": ",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			write_file(path, bad[i], strlen(bad[i]));
			mgr_conf_init(&c);
			if (mgr_conf_parse(&c, 3, argv, devnull, &err) != -EINVAL)
				fail_msg("config %s accepted", bad[i]);
		}
	}
	fclose(devnull);
}

static void
test_store_locked(void **state)
{
	struct mgr *m, *m2 = NULL;
	struct ctl_err err;

	(void)state;
	m = open_mgr();
	/* a second manager on the same store is refused */
	assert_int_not_equal(mgr_open(&conf, &m2, &err), 0);
	assert_null(m2);
	mgr_close(m);
	/* a file that is not a store */
	write_file(conf.db, "not a database, certainly not a store of ours......", 52);
	assert_int_not_equal(mgr_open(&conf, &m2, &err), 0);
	assert_null(m2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scale_rule),
	    cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stats_report_input, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ids_never_reused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_kept_statements, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ids_exhausted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_jobs_pages, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_admission, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lease, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_end_while_switch_silent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_interrupted_install, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_switch_restart, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_step_begin, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_step_begin_report, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_step_partial_reports, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_step_switch_down, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tensor_limit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tensor_wire, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_upgrade, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_conf, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_locked, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
