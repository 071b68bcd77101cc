/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "ctl_client.h"

#define CTL_RETRY_MS 200

int
ctl_parse_addr(const char *s, uint16_t default_port, struct sockaddr_in *out)
{
	char host[INET_ADDRSTRLEN];
	const char *colon = strchr(s, ':');
	size_t hl = colon ? (size_t)(colon - s) : strlen(s);
	unsigned long port = default_port;

	memset(out, 0, sizeof(*out));
	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (colon) {
		char *end;

		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (errno || end == colon + 1 || *end || port == 0 || port > 65535)
			return -EINVAL;
	}
	if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
		return -EINVAL;
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	return 0;
}

/* ids and ts are per process: a receiver refuses a ts not newer than the last */
static pthread_mutex_t seq_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t last_ts;
static json_int_t next_id = 1;

static void
fresh_id_ts(json_int_t *id, int64_t *ts)
{
	int64_t now = ctl_now_ms();

	pthread_mutex_lock(&seq_lock);
	if (now <= last_ts)
		now = last_ts + 1;
	last_ts = now;
	*ts = now;
	*id = next_id++;
	pthread_mutex_unlock(&seq_lock);
}

int
ctl_call(const struct sockaddr_in *addr, const struct ctl_key *key, const char *cmd,
	 json_t *args, int timeout_ms, json_t **result, struct ctl_err *err)
{
	/* on the heap: this runs inside libraries that are dlopen()ed (the NCCL plugin) */
	uint8_t *dgram = malloc(CTL_MAX_DGRAM);
	char *rx = malloc(CTL_MAX_DGRAM + 1);
	json_t *req = json_object(), *rep = NULL;
	int64_t deadline = ctl_now_ms() + timeout_ms, ts;
	json_int_t id;
	char *json = NULL;
	int fd = -1, len, rc = 0;

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
		int64_t now = ctl_now_ms(), wait;
		struct pollfd p = {.fd = fd, .events = POLLIN};

		if (now >= deadline) {
			rc = ctl_fail(err, ETIMEDOUT, "no reply to '%s' within %d ms", cmd, timeout_ms);
			goto out;
		}
		/* a new ts for every (re)transmission: a lost request may have been accepted */
		fresh_id_ts(&id, &ts);
		json_object_set_new(req, "id", json_integer(id));
		json_object_set_new(req, "ts", json_integer(ts));
		json_object_set_new(req, "cmd", json_string(cmd));
		if (args)
			json_object_set(req, "args", args);
		free(json);
		json = json_dumps(req, JSON_COMPACT);
		len = json ? ctl_frame(key, json, strlen(json), dgram, CTL_MAX_DGRAM) : -ENOMEM;
		if (len < 0) {
			rc = ctl_fail(err, -len, "request too large");
			goto out;
		}
		if (send(fd, dgram, (size_t)len, 0) < 0 && errno != ECONNREFUSED) {
			rc = ctl_fail(err, errno, "send: %s", strerror(errno));
			goto out;
		}
		wait = deadline - now < CTL_RETRY_MS ? deadline - now : CTL_RETRY_MS;
		while (poll(&p, 1, (int)wait) > 0) {
			ssize_t n = recv(fd, rx, CTL_MAX_DGRAM, MSG_DONTWAIT);
			json_error_t je;
			json_t *rid, *ok;

			if (n <= 0)
				break; /* ECONNREFUSED: nobody listens yet; retry */
			rep = json_loadb(rx, (size_t)n, 0, &je);
			rid = rep ? json_object_get(rep, "id") : NULL;
			if (!json_is_integer(rid) || json_integer_value(rid) != id) {
				json_decref(rep); /* a late reply to an earlier try */
				rep = NULL;
				continue;
			}
			ok = json_object_get(rep, "ok");
			if (json_is_true(ok)) {
				*result = json_incref(json_object_get(rep, "result"));
				if (!*result)
					*result = json_object();
				goto out;
			}
			{
				json_t *e = json_object_get(rep, "error");
				const char *code = json_string_value(json_object_get(e, "code"));
				const char *msg = json_string_value(json_object_get(e, "message"));
				int c = EPROTO;

#define CTL_X_MATCH(name)                                                                          \
	if (code && strcmp(code, #name) == 0)                                                      \
		c = name;
				CTL_ERRORS(CTL_X_MATCH)
#undef CTL_X_MATCH
				rc = ctl_fail(err, c, "%s", msg ? msg : "error without a message");
			}
			goto out;
		}
	}
out:
	json_decref(rep);
	json_decref(req);
	free(json);
	if (fd >= 0)
		close(fd);
	free(dgram);
	free(rx);
	return rc;
}
