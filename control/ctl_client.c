/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "ctl_client.h"

/* Replies that refuse a ts as replayed, taken before giving up. */
#define CTL_MAX_REPLAYS 5

/* ids and ts are per process: an endpoint refuses a ts not newer than the last it accepted */
static pthread_mutex_t seq_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t last_ts;

static int64_t
fresh_ts(void)
{
	int64_t now = ctl_now_ms();

	pthread_mutex_lock(&seq_lock);
	if (now <= last_ts)
		now = last_ts + 1;
	last_ts = now;
	pthread_mutex_unlock(&seq_lock);
	return now;
}

/*
 * The id before a call's first try: random. Two clients that send the same
 * command in the same millisecond (ranks polling job.status) would
 * otherwise send the same bytes, and a keyed endpoint takes the second for
 * a replay of the first.
 */
static json_int_t
id_base(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint32_t)getpid() * 2654435761u ^ (uint32_t)ctl_now_ms();
	return (json_int_t)(r >> 1);
}

/* An error code by name; EPROTO for a name outside the protocol's set. */
static int
code_of(const char *name)
{
#define CTL_X_MATCH(n)                                                                             \
	if (strcmp(name, #n) == 0)                                                                 \
		return n;
	CTL_ERRORS(CTL_X_MATCH)
#undef CTL_X_MATCH
	return EPROTO;
}

/*
 * A reply datagram: 1 the answer (result or err set), 0 not ours (keep
 * waiting), 2 refused as a replayed ts (try again with a fresh one).
 */
static int
take_reply(const char *rx, size_t n, json_int_t first_id, json_int_t id, json_t **result,
	   struct ctl_err *err, struct ctl_call_info *info)
{
	json_error_t je;
	json_t *rep = json_loadb(rx, n, 0, &je), *rid, *e;
	const char *code, *msg;
	int c;

	rid = json_object_get(rep, "id");
	if (!json_is_object(rep) ||
	    !(json_is_null(rid) || (json_is_integer(rid) && json_integer_value(rid) >= first_id &&
				    json_integer_value(rid) <= id))) {
		json_decref(rep);
		return 0;
	}
	if (json_is_true(json_object_get(rep, "ok")) && !json_is_null(rid)) {
		*result = json_incref(json_object_get(rep, "result"));
		if (!*result)
			*result = json_object();
		json_decref(rep);
		return 1;
	}
	e = json_object_get(rep, "error");
	code = json_string_value(json_object_get(e, "code"));
	msg = json_string_value(json_object_get(e, "message"));
	if (!json_is_false(json_object_get(rep, "ok")) || !code) {
		ctl_fail(err, EPROTO, "a reply that is not the protocol's: %.200s", rx);
		snprintf(info->code_name, sizeof(info->code_name), "EPROTO");
		json_decref(rep);
		return 1;
	}
	snprintf(info->code_name, sizeof(info->code_name), "%s", code);
	c = code_of(code);
	ctl_fail(err, c, "%s", msg ? msg : "(no message)");
	json_decref(rep);
	if (c == EPERM && strstr(err->msg, "replay"))
		return 2;
	return 1;
}

/*
 * One try: {"id", "ts", "cmd", "args"} in req, with a fresh id and ts,
 * framed and sent. @return 0, or -code with err
 */
static int
send_try(int fd, const struct ctl_key *key, json_t *req, json_int_t id, const char *cmd,
	 json_t *args, uint8_t *dgram, struct ctl_err *err, struct ctl_call_info *info)
{
	char *json;
	int len;

	json_object_set_new(req, "id", json_integer(id));
	json_object_set_new(req, "ts", json_integer(fresh_ts()));
	json_object_set_new(req, "cmd", json_string(cmd));
	if (args)
		json_object_set(req, "args", args);
	json = json_dumps(req, JSON_COMPACT);
	len = json ? ctl_frame(key, json, strlen(json), dgram, CTL_MAX_DGRAM) : -ENOMEM;
	free(json);
	if (len < 0)
		return ctl_fail(err, EMSGSIZE, "request larger than %u bytes", CTL_MAX_DGRAM);
	if (send(fd, dgram, (size_t)len, 0) < 0) {
		if (errno != ECONNREFUSED)
			return ctl_fail(err, errno, "send: %s", strerror(errno));
		info->refused = true;
	}
	return 0;
}

/*
 * Wait until `until` (ctl_now_ms()) for a reply to the tries first_id..id.
 * @return take_reply()'s verdict on the last datagram: 1 the answer, 2 a
 *         replayed ts, 0 nothing of ours came
 */
static int
wait_reply(int fd, int64_t until, char *rx, json_int_t first_id, json_int_t id, json_t **result,
	   struct ctl_err *err, struct ctl_call_info *info)
{
	int64_t now;
	int got = 0;

	while (!got && (now = ctl_now_ms()) < until) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, (int)(until - now)) <= 0)
			continue;
		n = recv(fd, rx, CTL_MAX_DGRAM, MSG_DONTWAIT);
		if (n < 0) {
			/* an ICMP port unreachable, consumed: wait out the interval */
			if (errno == ECONNREFUSED)
				info->refused = true;
			continue;
		}
		got = take_reply(rx, (size_t)n, first_id, id, result, err, info);
	}
	return got;
}

int
ctl_call_info(const struct sockaddr_in *addr, const struct ctl_key *key, const char *cmd,
	      json_t *args, int timeout_ms, json_t **result, struct ctl_err *err,
	      struct ctl_call_info *info)
{
	/* on the heap: this runs inside libraries that are dlopen()ed (the NCCL plugin) */
	uint8_t *dgram = malloc(CTL_MAX_DGRAM);
	char *rx = malloc(CTL_MAX_DGRAM + 1);
	int64_t start = ctl_now_ms(), deadline = start + timeout_ms;
	struct ctl_call_info local;
	json_t *req = json_object();
	json_int_t id = id_base(), first_id = id + 1;
	int fd = -1, replays = 0, rc = 0;

	if (!info)
		info = &local;
	memset(info, 0, sizeof(*info));
	*result = NULL;
	err->code = 0;
	err->msg[0] = '\0';
	if (!dgram || !rx || !req) {
		rc = ctl_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0) {
		rc = ctl_fail(err, errno ? errno : EIO, "socket: %s", strerror(errno));
		goto out;
	}
	for (;;) {
		int64_t now = ctl_now_ms();
		int got;

		if (now >= deadline) {
			rc = ctl_fail(err, ETIMEDOUT, "no reply to '%s' within %d ms (%d tries%s)",
				      cmd, timeout_ms, info->tries,
				      info->refused ? ", the port was unreachable" : "");
			snprintf(info->code_name, sizeof(info->code_name), "ETIMEDOUT");
			goto out;
		}
		/* a fresh ts every time: a lost request may have been accepted */
		info->tries++;
		if ((rc = send_try(fd, key, req, ++id, cmd, args, dgram, err, info)) != 0)
			goto out;
		got = wait_reply(fd, now + CTL_RETRY_MS < deadline ? now + CTL_RETRY_MS : deadline,
				 rx, first_id, id, result, err, info);
		if (got == 1) {
			rc = *result ? 0 : -err->code;
			goto out;
		}
		if (got == 2 && replays++ >= CTL_MAX_REPLAYS) {
			rc = -err->code;
			goto out;
		}
	}
out:
	info->rtt_ms = (double)(ctl_now_ms() - start);
	json_decref(req);
	free(dgram);
	free(rx);
	if (fd >= 0)
		close(fd);
	return rc;
}

int
ctl_call(const struct sockaddr_in *addr, const struct ctl_key *key, const char *cmd, json_t *args,
	 int timeout_ms, json_t **result, struct ctl_err *err)
{
	return ctl_call_info(addr, key, cmd, args, timeout_ms, result, err, NULL);
}

int
ctl_call_pages(const struct sockaddr_in *addr, const struct ctl_key *key, const char *cmd,
	       json_t *args, const char *list, int timeout_ms, json_t **result,
	       struct ctl_err *err)
{
	return ctl_call_pages_info(addr, key, cmd, args, list, timeout_ms, result, err, NULL);
}

int
ctl_call_pages_info(const struct sockaddr_in *addr, const struct ctl_key *key, const char *cmd,
		    json_t *args, const char *list, int timeout_ms, json_t **result,
		    struct ctl_err *err, struct ctl_call_info *info)
{
	json_t *all = NULL, *req = args ? json_deep_copy(args) : json_object();
	int rc = 0;

	*result = NULL;
	if (!req)
		return ctl_fail(err, ENOMEM, "out of memory");
	for (int page = 0;; page++) {
		json_t *res, *next;

		if (page == CTL_MAX_PAGES) {
			rc = ctl_fail(err, EOVERFLOW, "'%s': more than %d pages", cmd, CTL_MAX_PAGES);
			break;
		}
		if ((rc = ctl_call_info(addr, key, cmd, req, timeout_ms, &res, err, info)))
			break;
		if (!all)
			all = res;
		else if (json_array_extend(json_object_get(all, list), json_object_get(res, list)))
			rc = ctl_fail(err, EPROTO, "'%s': a page without the list '%s'", cmd, list);
		next = json_object_get(res, "next");
		if (rc == 0 && next && !json_is_null(next))
			json_object_set(req, "after", next); /* a reference of its own */
		else
			next = NULL;
		if (res != all)
			json_decref(res);
		if (rc || !next)
			break;
	}
	json_decref(req);
	if (rc) {
		json_decref(all);
		return rc;
	}
	json_object_del(all, "next");
	*result = all;
	return 0;
}
