/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Checked fields of a JSON request object, for the servers: the switch's
 * requests (ctl_request.c) and cais-manager's commands. Each function
 * returns 0, or ctl_fail(err, EINVAL, ...) with a message naming the field;
 * nothing is written to *out on failure.
 */
#ifndef CTL_FIELDS_H
#define CTL_FIELDS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ctl_err.h"

/**
 * Every member of obj must be one of the names in allowed (NULL-ended).
 * @return 0, -EINVAL (an unknown field, named)
 */
int ctl_check_fields(const json_t *obj, const char *const *allowed, struct ctl_err *err);

/**
 * An integer field in [min, max]; when optional and absent, *out is kept.
 * @return 0, -EINVAL (missing when required, not an integer, out of range)
 */
int ctl_get_uint(const json_t *obj, const char *name, uint64_t min, uint64_t max, bool required,
		 uint64_t *out, struct ctl_err *err);

/**
 * A finite number in [min, max]; *present says whether the field was there.
 * @return 0, -EINVAL (missing when required, not a number, out of range)
 */
int ctl_get_number(const json_t *obj, const char *name, double min, double max, bool required,
		   bool *present, double *out, struct ctl_err *err);

/**
 * A string field (required).
 * @return 0 with *out pointing into obj, -EINVAL (missing, not a string)
 */
int ctl_get_string(const json_t *obj, const char *name, const char **out, struct ctl_err *err);

/**
 * A member's MAC as session.add and job.join take it: exactly
 * "hh:hh:hh:hh:hh:hh" (hex digits of either case), unicast, not all-zero.
 * @return 0, or -1 (mac unchanged or partly written)
 */
int ctl_parse_member_mac(const char *s, uint8_t mac[6]);

/**
 * Whether a member may have this IPv4 address (network order): a host's
 * unicast address, so not 0/8 ("this network", 0.0.0.0 too), 127/8
 * (loopback), 224/4 (multicast) or 240/4 (reserved, 255.255.255.255 too).
 */
bool ctl_host_ip(uint32_t ip_be);

/*
 * Paged list replies (docs/PROTOCOL.md E5): a list that can grow past one
 * datagram is answered a page at a time. The request may carry "after", the
 * cursor of the last entry the client has; the reply lists the entries
 * after it, in a fixed order, as many as fit in CTL_PAGE_BYTES, and carries
 * "next" (the cursor of its last entry) when more follow. Clients follow
 * with ctl_call_pages().
 */

/** Bytes a page's entries may take (compact JSON): a reply stays well inside a datagram. */
#define CTL_PAGE_BYTES 48000u

/** A page being filled. */
struct ctl_page {
	json_t *arr;  /**< the entries (owned by the caller) */
	size_t used;  /**< bytes so far */
	bool full;    /**< an entry did not fit: the reply needs "next" */
};

/**
 * Append entry (a new reference, taken) to the page if it fits; else drop it
 * and mark the page full. The first entry always fits.
 * @return whether it was appended
 */
bool ctl_page_add(struct ctl_page *p, json_t *entry);

#endif /* CTL_FIELDS_H */
