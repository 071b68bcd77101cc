/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "ctl_endpoint.h"

/* Replay state is per client address: clients are many (agents, cais-ctl, the manager). */
#define CTL_CLIENTS 1024u
#define CTL_PROBE   8u

struct ctl_client_ts {
	uint32_t ip; /**< network order; 0 with ctl_endpoint_handle() */
	bool used;
	int64_t last; /**< newest ts accepted from it */
};

/*
 * MACs of requests accepted in the last two ts windows: a signed request
 * replayed from another client address (the MAC covers the JSON, not the
 * address) is refused too.
 */
#define CTL_SEEN 16384u

struct ctl_seen {
	uint8_t mac[16]; /**< the first half of the MAC */
	int64_t at;	 /**< when accepted (the endpoint's clock); 0: free */
};

struct ctl_endpoint {
	struct ctl_endpoint_conf conf;
	struct ctl_key key;
	int fd;
	struct ctl_client_ts clients[CTL_CLIENTS];
	struct ctl_seen seen[CTL_SEEN];
	struct ctl_endpoint_stats st;
	uint8_t rx[CTL_MAX_DGRAM + 1];
	char tx[CTL_MAX_DGRAM];
};

int
ctl_endpoint_open(const struct ctl_endpoint_conf *conf, struct ctl_endpoint **out)
{
	struct ctl_endpoint *ep;
	bool keyed;

	if (!conf || !out || (!conf->ops && !conf->handler))
		return -EINVAL;
	keyed = conf->key && conf->key->len;
	if (!keyed && conf->addr.sin_port && (ntohl(conf->addr.sin_addr.s_addr) >> 24) != 127)
		return -EPERM; /* without a key, only loopback may reach it */
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->conf = *conf;
	if (keyed)
		ep->key = *conf->key;
	ep->conf.key = &ep->key;
	if (!ep->conf.clock_ms)
		ep->conf.clock_ms = ctl_now_ms;
	ep->fd = -1;
	if (conf->addr.sin_port) {
		/* no SO_REUSEADDR: a second endpoint on the port must fail, not share it */
		ep->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (ep->fd < 0 ||
		    bind(ep->fd, (const struct sockaddr *)&conf->addr, sizeof(conf->addr)) != 0) {
			int err = -errno;

			ctl_endpoint_close(ep);
			return err;
		}
	}
	*out = ep;
	return 0;
}

void
ctl_endpoint_close(struct ctl_endpoint *ep)
{
	if (!ep)
		return;
	if (ep->fd >= 0)
		close(ep->fd);
	free(ep);
}

int
ctl_endpoint_fd(const struct ctl_endpoint *ep)
{
	return ep->fd;
}

void
ctl_endpoint_stats(const struct ctl_endpoint *ep, struct ctl_endpoint_stats *st)
{
	*st = ep->st;
}

/* Serialise a reply; one that does not fit becomes an ENOSPC error (with the id). */
static size_t
reply_dump(json_t *rep, char *out, size_t cap)
{
	size_t n = json_dumpb(rep, out, cap, JSON_COMPACT);
	json_t *id = json_object_get(rep, "id");

	if (n == 0 || n > cap) {
		char idtxt[32] = "null";

		if (json_is_integer(id))
			snprintf(idtxt, sizeof(idtxt), "%" JSON_INTEGER_FORMAT,
				 json_integer_value(id));
		n = (size_t)snprintf(out, cap,
				     "{\"id\":%s,\"ok\":false,\"error\":{\"code\":\"ENOSPC\","
				     "\"message\":\"reply larger than %zu bytes\"}}",
				     idtxt, cap);
		if (n >= cap)
			n = cap ? cap - 1 : 0;
	}
	json_decref(rep);
	return n;
}

/*
 * A message as valid UTF-8: truncations (of a field name quoted from the
 * request, say) may cut a character; bad bytes become '?'.
 */
static void
utf8_clean(const char *in, char *out, size_t cap)
{
	size_t i = 0, o = 0;

	while (in[i] && o + 1 < cap) {
		unsigned char c = (unsigned char)in[i];
		size_t len = c < 0x80	      ? 1
			     : (c >> 5) == 6  ? 2
			     : (c >> 4) == 14 ? 3
			     : (c >> 3) == 30 ? 4
					      : 0;
		size_t k;

		for (k = 1; len && k < len; k++)
			if (((unsigned char)in[i + k] & 0xC0) != 0x80)
				len = 0;
		if (len == 0 || o + len >= cap) {
			out[o++] = '?';
			i++;
			continue;
		}
		memcpy(out + o, in + i, len);
		o += len;
		i += len;
	}
	out[o] = '\0';
}

static size_t
reply_error(json_t *id, int code, const char *msg, char *out, size_t cap)
{
	json_t *rep = json_object(), *e = json_object();
	char clean[512];

	utf8_clean(msg, clean, sizeof(clean));
	json_object_set(rep, "id", id ? id : json_null());
	json_object_set_new(rep, "ok", json_false());
	json_object_set_new(e, "code", json_string(ctl_errname(code)));
	json_object_set_new(e, "message", json_string(clean));
	json_object_set_new(rep, "error", e);
	return reply_dump(rep, out, cap);
}

/* The replay state of a client; a full neighbourhood gives up its oldest entry. */
static struct ctl_client_ts *
client_ts(struct ctl_endpoint *ep, uint32_t ip)
{
	uint32_t h = (ip * 0x9E3779B1u) >> 22, i;
	struct ctl_client_ts *victim = NULL;

	for (i = 0; i < CTL_PROBE; i++) {
		struct ctl_client_ts *c = &ep->clients[(h + i) % CTL_CLIENTS];

		if (c->used && c->ip == ip)
			return c;
		if (!c->used) {
			c->used = true;
			c->ip = ip;
			c->last = 0;
			return c;
		}
		if (!victim || c->last < victim->last)
			victim = c;
	}
	/* an evicted client's replays stay bounded by the 30 s window */
	victim->ip = ip;
	victim->last = 0;
	return victim;
}

static int
hexnib(uint8_t c)
{
	return c <= '9' ? c - '0' : c - 'a' + 10;
}

/*
 * Was this MAC (of a verified datagram) accepted within the last two
 * windows? With record, remember it (a full neighbourhood forgets its oldest).
 */
static bool
mac_seen(struct ctl_endpoint *ep, const uint8_t *dgram, int64_t now, bool record)
{
	uint8_t m[16];
	uint64_t h = 0;
	struct ctl_seen *victim = NULL;
	bool victim_live = true;

	for (int i = 0; i < 16; i++)
		m[i] = (uint8_t)(hexnib(dgram[4 + 2 * i]) << 4 | hexnib(dgram[5 + 2 * i]));
	memcpy(&h, m, sizeof(h));
	for (unsigned int i = 0; i < 16; i++) {
		struct ctl_seen *e = &ep->seen[(h + i) % CTL_SEEN];
		bool live = e->at && now - e->at <= 2 * CTL_TS_WINDOW_MS;

		if (live && memcmp(e->mac, m, sizeof(m)) == 0)
			return true;
		/* the place to record: a free or expired one, else the oldest */
		if (!live && victim_live) {
			victim = e;
			victim_live = false;
		} else if (live && victim_live && (!victim || e->at < victim->at)) {
			victim = e;
		}
	}
	if (record) {
		memcpy(victim->mac, m, sizeof(m));
		victim->at = now ? now : 1;
	}
	return false;
}

size_t
ctl_endpoint_handle(struct ctl_endpoint *ep, const uint8_t *dgram, size_t len, char *out,
		    size_t cap)
{
	return ctl_endpoint_handle_from(ep, NULL, dgram, len, out, cap);
}

/* Reply with an error, count it in *counter and release the request. */
static size_t
refuse(uint64_t *counter, json_t *req, json_t *id, int code, const char *msg, char *out, size_t cap)
{
	size_t n = reply_error(id, code, msg, out, cap);

	(*counter)++;
	json_decref(req);
	return n;
}

/* A request must be an object with an integer "id". @return NULL, or why not */
static const char *
check_id(const json_t *req, const json_t *id)
{
	if (!json_is_object(req))
		return "request must be a JSON object";
	if (!id)
		return "missing field 'id'";
	return json_is_integer(id) ? NULL : "field 'id' must be an integer";
}

/*
 * The "ts" of a request: with a key, an integer within the window of the
 * clock, newer than the last one accepted from the client, on a MAC not
 * accepted before (then both are recorded); without a key, an integer when
 * it is there at all.
 * @return NULL when accepted, else why, with *code EINVAL or EPERM
 */
static const char *
check_ts(struct ctl_endpoint *ep, const struct sockaddr_in *from, const uint8_t *dgram,
	 const json_t *ts, int *code)
{
	bool keyed = ep->key.len > 0;
	struct ctl_client_ts *client;
	int64_t now, t;

	if (!keyed && !ts)
		return NULL;
	now = ep->conf.clock_ms();
	*code = EINVAL;
	if (!json_is_integer(ts))
		return ts ? "field 'ts' must be an integer" : "missing field 'ts'";
	if (!keyed)
		return NULL;
	*code = EPERM;
	t = (int64_t)json_integer_value(ts);
	if (t > now + CTL_TS_WINDOW_MS || t < now - CTL_TS_WINDOW_MS)
		return "field 'ts' is more than 30 s off the clock";
	client = client_ts(ep, from ? from->sin_addr.s_addr : 0);
	if (t <= client->last)
		return "field 'ts' is not newer than the last (replay)";
	if (mac_seen(ep, dgram, now, false))
		return "request already accepted (replay of 'ts')";
	client->last = t;
	mac_seen(ep, dgram, now, true);
	return NULL;
}

/* Carry out a checked request: the switch's operations, or the handler. */
static int
run(struct ctl_endpoint *ep, const json_t *req, json_t **res, struct ctl_err *err)
{
	int rc;

	if (ep->conf.ops)
		return ctl_dispatch(ep->conf.ops, req, res, err);
	*res = json_object();
	rc = ep->conf.handler(ep->conf.handler_ctx, req, *res, err);
	if (rc) {
		json_decref(*res);
		*res = NULL;
	}
	return rc;
}

size_t
ctl_endpoint_handle_from(struct ctl_endpoint *ep, const struct sockaddr_in *from,
			 const uint8_t *dgram, size_t len, char *out, size_t cap)
{
	struct ctl_err err = {0};
	const char *js, *why;
	size_t jlen;
	json_error_t je;
	json_t *req, *id, *res = NULL, *rep;
	int rc, code;

	ep->st.requests++;
	if (len > CTL_MAX_DGRAM)
		return refuse(&ep->st.malformed, NULL, NULL, EINVAL, "datagram larger than 64 KiB",
			      out, cap);
	if (ctl_unframe(&ep->key, dgram, len, &js, &jlen) != 0)
		return refuse(&ep->st.auth_failures, NULL, NULL, EPERM, "missing or bad MAC", out,
			      cap);
	req = json_loadb(js, jlen, JSON_REJECT_DUPLICATES, &je);
	if (!req) {
		char msg[200];

		snprintf(msg, sizeof(msg), "not JSON: %s (at %d)", je.text, je.position);
		return refuse(&ep->st.malformed, NULL, NULL, EINVAL, msg, out, cap);
	}
	id = json_is_object(req) ? json_object_get(req, "id") : NULL;
	if ((why = check_id(req, id)) != NULL)
		return refuse(&ep->st.malformed, req, NULL, EINVAL, why, out, cap);
	if ((why = check_ts(ep, from, dgram, json_object_get(req, "ts"), &code)) != NULL)
		return refuse(code == EPERM ? &ep->st.auth_failures : &ep->st.malformed, req, id,
			      code, why, out, cap);
	if ((rc = run(ep, req, &res, &err)) != 0)
		return refuse(&ep->st.errors, req, id, err.code ? err.code : -rc,
			      err.msg[0] ? err.msg : "failed", out, cap);
	rep = json_object();
	json_object_set(rep, "id", id);
	json_object_set_new(rep, "ok", json_true());
	json_object_set_new(rep, "result", res);
	json_decref(req);
	return reply_dump(rep, out, cap);
}

int
ctl_endpoint_poll(struct ctl_endpoint *ep, int timeout_ms)
{
	struct pollfd p = {.fd = ep->fd, .events = POLLIN};
	int handled = 0;

	if (ep->fd < 0)
		return -EINVAL;
	if (poll(&p, 1, timeout_ms) < 0)
		return errno == EINTR ? 0 : -errno;
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(ep->fd, ep->rx, sizeof(ep->rx), MSG_DONTWAIT | MSG_TRUNC,
				     (struct sockaddr *)&from, &fl);
		size_t r;

		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? handled : -errno;
		r = ctl_endpoint_handle_from(ep, &from, ep->rx, (size_t)n, ep->tx, CTL_MAX_REPLY);
		sendto(ep->fd, ep->tx, r, MSG_DONTWAIT, (struct sockaddr *)&from, fl);
		handled++;
	}
}
