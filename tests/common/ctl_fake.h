/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Test helper: a fake switch for the control request path, a struct ctl_ops
 * (ops) whose operations record their arguments in F, count the calls, name
 * the last one and return F.ret (0 or a positive errno) as a ctl_fail().
 * Shared by test_ctl.c and test_endpoint.c; one copy per test program.
 *
 * Define CTL_FAKE_VERSION (a string) before including to have ping's result
 * carry a "version" as well as the "mode".
 */
#ifndef CAIS_TEST_CTL_FAKE_H
#define CAIS_TEST_CTL_FAKE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

struct fake {
	int calls;
	char last[32];
	int ret; /* what the next operations return: 0 or a positive errno */
	struct ctl_session s;
	struct ctl_tensor t;
	struct ctl_thresholds th;
	uint32_t ttl;
	enum ctl_mode mode;
	uint16_t tenant, session;
	uint32_t tensor;
	size_t stats_pad; /* stats.get puts a string of this many bytes in its result */
};

static struct fake F;

#define FAKE_RET(name)                                                                             \
	do {                                                                                       \
		F.calls++;                                                                         \
		snprintf(F.last, sizeof(F.last), "%s", name);                                      \
		if (F.ret)                                                                         \
			return ctl_fail(err, F.ret, "fake %s refused", name);                      \
		return 0;                                                                          \
	} while (0)

static int
f_ping(void *ctx, json_t *res, struct ctl_err *err)
{
	(void)ctx;
	json_object_set_new(res, "mode", json_string("compute"));
#ifdef CTL_FAKE_VERSION
	json_object_set_new(res, "version", json_string(CTL_FAKE_VERSION));
#endif
	FAKE_RET("ping");
}

static int
f_session_add(void *ctx, const struct ctl_session *s, struct ctl_err *err)
{
	(void)ctx;
	F.s = *s;
	FAKE_RET("session.add");
}

static int
f_session_del(void *ctx, uint16_t t, uint16_t s, struct ctl_err *err)
{
	(void)ctx;
	F.tenant = t;
	F.session = s;
	FAKE_RET("session.del");
}

static int
f_tensor_add(void *ctx, const struct ctl_tensor *t, struct ctl_err *err)
{
	(void)ctx;
	F.t = *t;
	FAKE_RET("tensor.add");
}

static int
f_tensor_del(void *ctx, uint16_t t, uint16_t s, uint32_t x, struct ctl_err *err)
{
	(void)ctx;
	F.tenant = t;
	F.session = s;
	F.tensor = x;
	FAKE_RET("tensor.del");
}

static int
f_lease(void *ctx, uint32_t ttl, struct ctl_err *err)
{
	(void)ctx;
	F.ttl = ttl;
	FAKE_RET("lease");
}

static int
f_mode_set(void *ctx, enum ctl_mode m, struct ctl_err *err)
{
	(void)ctx;
	F.mode = m;
	FAKE_RET("mode.set");
}

static int
f_thresholds(void *ctx, const struct ctl_thresholds *t, struct ctl_err *err)
{
	(void)ctx;
	F.th = *t;
	FAKE_RET("thresholds.set");
}

static int
f_stats(void *ctx, int64_t after, json_t *res, struct ctl_err *err)
{
	(void)after;
	(void)ctx;
	json_object_set_new(res, "rounds", json_integer(3));
	if (F.stats_pad) {
		char *pad = malloc(F.stats_pad + 1);

		memset(pad, 'x', F.stats_pad);
		pad[F.stats_pad] = '\0';
		json_object_set_new(res, "pad", json_string(pad));
		free(pad);
	}
	FAKE_RET("stats.get");
}

static const struct ctl_ops ops = {
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

#endif /* CAIS_TEST_CTL_FAKE_H */
