/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The client side of the control protocol (PROTOCOL.md section 4, and the
 * manager's of docs/PROTOCOL.md E3): one request, one reply, over UDP, with
 * the MAC line when a key is given, a fresh id and a ts newer than the last
 * one this process sent, and retransmission until a reply with that id
 * comes or the time is up.
 */
#ifndef CTL_CLIENT_H
#define CTL_CLIENT_H

#include <stdbool.h>
#include <netinet/in.h>

#include <jansson.h>

#include "ctl_auth.h"
#include "ctl_err.h"

/** A request without a reply is sent again after this long. */
#define CTL_RETRY_MS 200

/** How a call went, for tools that report it (cais-ctl). */
struct ctl_call_info {
	int tries;	    /**< datagrams sent */
	bool refused;	    /**< an ICMP port unreachable came back: nobody listens */
	char code_name[32]; /**< the error code as the reply gave it */
	double rtt_ms;	    /**< first try to answer */
};

/**
 * Send {"id", "ts", "cmd", "args"} to addr and wait for its reply. Resent every
 * 200 ms with a fresh ts; a reply to any try is the answer, and so is an error
 * reply with "id": null (the endpoint's answer to a datagram it could not
 * authenticate or parse: the socket is connected, only the target's replies
 * arrive); an EPERM for a replayed ts (another client's was newer) is retried
 * with a fresh ts, a few times.
 * @param args    may be NULL (no "args")
 * @param result  on success the reply's "result" (a new reference), else NULL
 * @param err     on failure: the reply's error (code and message), or the
 *                local cause (ETIMEDOUT: no reply within timeout_ms; EPROTO: a
 *                reply that is not the protocol's)
 * @return 0, or -code
 */
int ctl_call(const struct sockaddr_in *addr, const struct ctl_key *key, const char *cmd,
	     json_t *args, int timeout_ms, json_t **result, struct ctl_err *err);

/** ctl_call() that also says how it went (info may be NULL). */
int ctl_call_info(const struct sockaddr_in *addr, const struct ctl_key *key, const char *cmd,
		  json_t *args, int timeout_ms, json_t **result, struct ctl_err *err,
		  struct ctl_call_info *info);

/**
 * ctl_call() of a paged list (docs/PROTOCOL.md E5): while a reply carries
 * "next", ask again with "after": next, and append the array field list of
 * each later reply to the first reply's; the result is the first reply with
 * the whole list and without "next". args is not changed. Stops after
 * CTL_MAX_PAGES pages (-EOVERFLOW).
 */
int ctl_call_pages(const struct sockaddr_in *addr, const struct ctl_key *key, const char *cmd,
		   json_t *args, const char *list, int timeout_ms, json_t **result,
		   struct ctl_err *err);

/** ctl_call_pages() that also says how its last call went (info may be NULL). */
int ctl_call_pages_info(const struct sockaddr_in *addr, const struct ctl_key *key,
			const char *cmd, json_t *args, const char *list, int timeout_ms,
			json_t **result, struct ctl_err *err, struct ctl_call_info *info);

/** Pages ctl_call_pages() follows at most (a list of some 10^5 entries). */
#define CTL_MAX_PAGES 4096

#endif /* CTL_CLIENT_H */
