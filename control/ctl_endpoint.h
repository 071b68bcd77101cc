/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The control endpoint (PROTOCOL.md section 4): one JSON request per UDP
 * datagram, one reply to its source. ctl_endpoint_handle() is the whole
 * request path as a pure function (framing, MAC, ts, JSON, dispatch), so
 * that tests and the fuzzer drive it without sockets; ctl_endpoint_poll()
 * puts it on a socket. The switch runs it on a control thread; cais-manager
 * runs the same code with its own table of commands.
 */
#ifndef CTL_ENDPOINT_H
#define CTL_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include "ctl.h"
#include "ctl_auth.h"

/**
 * A command table other than the switch's (cais-manager's): called with the
 * whole request object; fills result or err.
 */
typedef int (*ctl_handler_fn)(void *ctx, const json_t *req, json_t *result, struct ctl_err *err);

struct ctl_endpoint_conf {
	struct sockaddr_in addr;   /**< where to listen */
	const struct ctl_key *key; /**< NULL or len 0: no authentication, loopback only */
	const struct ctl_ops *ops; /**< the switch's operations (ctl_dispatch), or NULL */
	ctl_handler_fn handler;	   /**< or a handler of its own */
	void *handler_ctx;
	int64_t (*clock_ms)(void); /**< NULL: ctl_now_ms (tests give their own) */
};

struct ctl_endpoint;

/**
 * Create an endpoint; binds a UDP socket unless addr.sin_port is 0 (then
 * only ctl_endpoint_handle() is used).
 * @return 0; -EPERM (a non-loopback address without a key), -EINVAL, -ENOMEM,
 *         or the -errno of socket()/bind()
 */
int ctl_endpoint_open(const struct ctl_endpoint_conf *conf, struct ctl_endpoint **ep);

void ctl_endpoint_close(struct ctl_endpoint *ep);

/**
 * Handle one request datagram and write the reply JSON into reply.
 * Checks, in order: size (at most 64 KiB), MAC (with a key), JSON, "id",
 * "ts" (with a key: within 30 s of the clock and newer than the last one
 * accepted from the same client), then the command. A request refused before dispatch never
 * changes state; the reply says why ({"ok": false, "error": {"code", "message"}}).
 * @return the reply length (always > 0; a reply that would not fit cap is
 *         replaced by an ENOSPC error)
 */
size_t ctl_endpoint_handle(struct ctl_endpoint *ep, const uint8_t *dgram, size_t len, char *reply,
			   size_t cap);

/**
 * ctl_endpoint_handle() for a datagram from `from`: the replay check ("ts"
 * newer than the last accepted one) is kept per client IPv4 address
 * (ctl_endpoint_handle() is one client of its own).
 */
size_t ctl_endpoint_handle_from(struct ctl_endpoint *ep, const struct sockaddr_in *from,
				const uint8_t *dgram, size_t len, char *reply, size_t cap);

/**
 * Serve datagrams for up to timeout_ms (0: what is there now).
 * @return requests handled, or -errno of the socket
 */
int ctl_endpoint_poll(struct ctl_endpoint *ep, int timeout_ms);

/** The endpoint's socket (for poll loops of its own), -1 without one. */
int ctl_endpoint_fd(const struct ctl_endpoint *ep);

/** Counters: requests handled, refused by authentication, malformed. */
struct ctl_endpoint_stats {
	uint64_t requests, auth_failures, malformed, errors;
};
void ctl_endpoint_stats(const struct ctl_endpoint *ep, struct ctl_endpoint_stats *st);

#endif /* CTL_ENDPOINT_H */
