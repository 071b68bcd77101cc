/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "ctl.h"
#include "ctl_fields.h"

const char *
ctl_mode_name(enum ctl_mode mode)
{
	return mode == CTL_MODE_FORWARD_ONLY ? "forward_only" : "compute";
}

/* The (tenant, session) pair every table command names. */
static int
get_ids(const json_t *args, uint16_t *tenant, uint16_t *session, struct ctl_err *err)
{
	uint64_t t = 0, s = 0;
	int rc;

	if ((rc = ctl_get_uint(args, "tenant", 0, UINT16_MAX, true, &t, err)) ||
	    (rc = ctl_get_uint(args, "session", 0, UINT16_MAX, true, &s, err)))
		return rc;
	*tenant = (uint16_t)t;
	*session = (uint16_t)s;
	return 0;
}

/* members[i] of a session whose ranks are s->first_rank .. + n - 1, into s->members. */
static int
parse_member(const json_t *m, size_t i, uint16_t n, struct ctl_session *s, bool *have,
	     struct ctl_err *err)
{
	static const char *const fields[] = {"rank", "mac",	    "ip",    "port",
					     "switch_port", "ports", NULL};
	uint64_t rank = 0, port = 0, sw_port = UINT64_MAX, ports = 1;
	const char *mac, *ip;
	struct ctl_member *mb;
	int rc;

	if (!json_is_object(m))
		return ctl_fail(err, EINVAL, "field 'members[%zu]' must be an object", i);
	if ((rc = ctl_check_fields(m, fields, err)) ||
	    (rc = ctl_get_uint(m, "rank", s->first_rank, (uint64_t)s->first_rank + n - 1, true,
			       &rank, err)) ||
	    (rc = ctl_get_string(m, "mac", &mac, err)) ||
	    (rc = ctl_get_string(m, "ip", &ip, err)) ||
	    (rc = ctl_get_uint(m, "port", 1, UINT16_MAX, true, &port, err)) ||
	    (rc = ctl_get_uint(m, "switch_port", 0, INT16_MAX, false, &sw_port, err)) ||
	    (rc = ctl_get_uint(m, "ports", 1, CTL_MAX_MEMBER_PORTS, false, &ports, err))) {
		char inner[sizeof(err->msg)];

		snprintf(inner, sizeof(inner), "%s", err->msg);
		return ctl_fail(err, EINVAL, "members[%zu]: %.200s", i, inner);
	}
	rank -= s->first_rank;
	if (have[rank])
		return ctl_fail(err, EINVAL, "members[%zu]: field 'rank' %u given twice", i,
				(unsigned int)(rank + s->first_rank));
	have[rank] = true;
	mb = &s->members[rank];
	if (ctl_parse_member_mac(mac, mb->mac) != 0)
		return ctl_fail(err, EINVAL,
				"members[%zu]: field 'mac' is not a unicast MAC (nor all-zero)", i);
	if (inet_pton(AF_INET, ip, &mb->ip) != 1)
		return ctl_fail(err, EINVAL, "members[%zu]: field 'ip' is not an IPv4 address", i);
	if (!ctl_host_ip(mb->ip))
		return ctl_fail(err, EINVAL,
				"members[%zu]: field 'ip' %s is not a host's unicast address "
				"(0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/4 and 240.0.0.0/4 are not)",
				i, ip);
	if (ports & (ports - 1))
		return ctl_fail(err, EINVAL, "members[%zu]: field 'ports' must be a power of two", i);
	if (port + ports - 1 > UINT16_MAX)
		return ctl_fail(err, EINVAL,
				"members[%zu]: fields 'port' + 'ports' pass the last UDP port", i);
	mb->port = (uint16_t)port;
	mb->switch_port = sw_port == UINT64_MAX ? -1 : (int16_t)sw_port;
	mb->ports = (uint8_t)ports;
	return 0;
}

/* session.add's "uplink" object (E9), into s->uplink. */
static int
parse_uplink(const json_t *u, struct ctl_session *s, struct ctl_err *err)
{
	static const char *const fields[] = {"ip", "mac", "port", "rank", "switch_port", NULL};
	uint64_t rank = 0, port = 0, sw_port = 0;
	const char *mac, *ip;
	int rc;

	if (!json_is_object(u))
		return ctl_fail(err, EINVAL, "field 'uplink' must be an object");
	if ((rc = ctl_check_fields(u, fields, err)) || (rc = ctl_get_string(u, "mac", &mac, err)) ||
	    (rc = ctl_get_string(u, "ip", &ip, err)) ||
	    (rc = ctl_get_uint(u, "port", 1, UINT16_MAX, false, &port, err)) ||
	    (rc = ctl_get_uint(u, "rank", 0, CAIS_MAX_WORLD - 1, true, &rank, err)) ||
	    (rc = ctl_get_uint(u, "switch_port", 0, INT16_MAX, true, &sw_port, err))) {
		char inner[sizeof(err->msg)];

		snprintf(inner, sizeof(inner), "%s", err->msg);
		return ctl_fail(err, EINVAL, "uplink: %.200s", inner);
	}
	if (ctl_parse_member_mac(mac, s->uplink.mac) != 0)
		return ctl_fail(err, EINVAL,
				"uplink: field 'mac' is not a unicast MAC (nor all-zero)");
	if (inet_pton(AF_INET, ip, &s->uplink.ip) != 1 || !ctl_host_ip(s->uplink.ip))
		return ctl_fail(err, EINVAL,
				"uplink: field 'ip' is not a host's unicast IPv4 address");
	s->uplink.on = true;
	s->uplink.port = (uint16_t)port;
	s->uplink.rank = (uint8_t)rank;
	s->uplink.switch_port = (uint16_t)sw_port;
	return 0;
}

/* Two members with one address could not be told apart. @return 0 or -EINVAL */
static int
members_distinct(const struct ctl_session *s, struct ctl_err *err)
{
	for (unsigned int a = 0; a < s->n; a++)
		for (unsigned int b = a + 1; b < s->n; b++)
			if (s->members[a].ip == s->members[b].ip &&
			    s->members[a].port < s->members[b].port + s->members[b].ports &&
			    s->members[b].port < s->members[a].port + s->members[a].ports)
				return ctl_fail(err, EINVAL,
						"members: ranks %u and %u have the same 'ip' and "
						"'port'",
						a + s->first_rank, b + s->first_rank);
	return 0;
}

static int
cmd_session_add(const struct ctl_ops *ops, const json_t *args, struct ctl_err *err)
{
	static const char *const fields[] = {
	    "tenant",  "session", "n",		"slots",      "elems_per_packet", "priority",
	    "members", "uplink",  "first_rank", "loss_hints", NULL};
	/* 5 KiB, on the stack: endpoints polled by several threads must not share it */
	struct ctl_session s;
	bool have[CAIS_MAX_WORLD] = {false};
	uint64_t n = 0, slots = 0, elems = 0, prio = CTL_PRIO_NORMAL, first = 0, hints = 0;
	const json_t *members;
	size_t i;
	int rc;

	memset(&s, 0, sizeof(s));
	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = get_ids(args, &s.tenant, &s.session, err)) ||
	    (rc = ctl_get_uint(args, "n", 1, CAIS_MAX_WORLD, true, &n, err)) ||
	    (rc = ctl_get_uint(args, "slots", 1, CAIS_MAX_SLOTS, true, &slots, err)) ||
	    (rc = ctl_get_uint(args, "elems_per_packet", 1, CAIS_MAX_ELEMS, true, &elems, err)) ||
	    (rc = ctl_get_uint(args, "priority", CTL_PRIO_NORMAL, CTL_PRIO_HIGH, false, &prio,
			       err)) ||
	    (rc = ctl_get_uint(args, "first_rank", 0, CAIS_MAX_WORLD - 1, false, &first, err)) ||
	    (rc = ctl_get_uint(args, "loss_hints", 0, 1, false, &hints, err)))
		return rc;
	if (first + n > CAIS_MAX_WORLD)
		return ctl_fail(err, EINVAL, "fields 'first_rank' + 'n' pass rank %u",
				CAIS_MAX_WORLD - 1);
	if (!cais_pool_size_ok((uint32_t)slots))
		return ctl_fail(err, EINVAL, "field 'slots' must be a power of two in [1, %u]",
				CAIS_MAX_SLOTS);
	members = json_object_get(args, "members");
	if (!members)
		return ctl_fail(err, EINVAL, "missing field 'members'");
	if (!json_is_array(members))
		return ctl_fail(err, EINVAL, "field 'members' must be an array");
	if (json_array_size(members) != n)
		return ctl_fail(err, EINVAL, "field 'members' must have n = %u entries, has %zu",
				(unsigned int)n, json_array_size(members));
	s.n = (uint16_t)n;
	s.slots = (uint32_t)slots;
	s.elems = (uint16_t)elems;
	s.priority = (uint8_t)prio;
	s.first_rank = (uint8_t)first;
	s.loss_hints = (uint8_t)hints;
	for (i = 0; i < n; i++)
		if ((rc = parse_member(json_array_get(members, i), i, s.n, &s, have, err)))
			return rc;
	if ((rc = members_distinct(&s, err)))
		return rc;
	if (json_object_get(args, "uplink") &&
	    (rc = parse_uplink(json_object_get(args, "uplink"), &s, err)))
		return rc;
	return ops->session_add(ops->ctx, &s, err);
}

static int
cmd_session_del(const struct ctl_ops *ops, const json_t *args, struct ctl_err *err)
{
	static const char *const fields[] = {"tenant", "session", NULL};
	uint16_t tenant, session;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = get_ids(args, &tenant, &session, err)))
		return rc;
	return ops->session_del(ops->ctx, tenant, session, err);
}

static int
get_tensor_id(const json_t *args, uint32_t *tensor, struct ctl_err *err)
{
	uint64_t t = 0;
	int rc = ctl_get_uint(args, "tensor", 0, UINT32_MAX, true, &t, err);

	*tensor = (uint32_t)t;
	return rc;
}

static int
cmd_tensor_add(const struct ctl_ops *ops, const json_t *args, struct ctl_err *err)
{
	static const char *const fields[] = {"tenant", "session", "tensor", "op",
					     "scale",  "wire",	  NULL};
	struct ctl_tensor t = {.wire = CAIS_DT_FIXED32};
	const char *op, *wire = NULL;
	bool present;
	int rc, i;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = get_ids(args, &t.tenant, &t.session, err)) ||
	    (rc = get_tensor_id(args, &t.tensor, err)) ||
	    (rc = ctl_get_string(args, "op", &op, err)) ||
	    (rc = ctl_get_number(args, "scale", 0, 1e300, true, &present, &t.scale, err)) ||
	    (json_object_get(args, "wire") && (rc = ctl_get_string(args, "wire", &wire, err))))
		return rc;
	if (!(t.scale > 0))
		return ctl_fail(err, EINVAL, "field 'scale' must be greater than 0");
	if ((i = cais_op_parse(op)) < 0)
		return ctl_fail(err, EINVAL, "field 'op' must be sum, avg, max or min");
	t.op = (enum cais_redop)i;
	if (wire && (i = cais_dtype_parse(wire)) < 0)
		return ctl_fail(err, EINVAL, "field 'wire' must be fixed32 or block16");
	if (wire)
		t.wire = (uint8_t)i;
	return ops->tensor_add(ops->ctx, &t, err);
}

static int
cmd_tensor_del(const struct ctl_ops *ops, const json_t *args, struct ctl_err *err)
{
	static const char *const fields[] = {"tenant", "session", "tensor", NULL};
	uint16_t tenant, session;
	uint32_t tensor;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = get_ids(args, &tenant, &session, err)) ||
	    (rc = get_tensor_id(args, &tensor, err)))
		return rc;
	return ops->tensor_del(ops->ctx, tenant, session, tensor, err);
}

static int
cmd_lease(const struct ctl_ops *ops, const json_t *args, struct ctl_err *err)
{
	static const char *const fields[] = {"ttl_ms", NULL};
	uint64_t ttl = 0;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = ctl_get_uint(args, "ttl_ms", 1, CTL_LEASE_MAX_MS, true, &ttl, err)))
		return rc;
	return ops->lease(ops->ctx, (uint32_t)ttl, err);
}

static int
cmd_mode_set(const struct ctl_ops *ops, const json_t *args, struct ctl_err *err)
{
	static const char *const fields[] = {"mode", NULL};
	enum ctl_mode mode;
	const char *m;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = ctl_get_string(args, "mode", &m, err)))
		return rc;
	if (strcmp(m, "compute") == 0)
		mode = CTL_MODE_COMPUTE;
	else if (strcmp(m, "forward_only") == 0)
		mode = CTL_MODE_FORWARD_ONLY;
	else
		return ctl_fail(err, EINVAL, "field 'mode' must be compute or forward_only");
	return ops->mode_set(ops->ctx, mode, err);
}

static int
cmd_thresholds_set(const struct ctl_ops *ops, const json_t *args, struct ctl_err *err)
{
	static const char *const fields[] = {"queue_depth", "slot_usage", NULL};
	struct ctl_thresholds t = {0};
	uint64_t qd = UINT64_MAX;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = ctl_get_uint(args, "queue_depth", 0, UINT32_MAX, false, &qd, err)) ||
	    (rc = ctl_get_number(args, "slot_usage", 0.0, 1.0, false, &t.has_slot_usage,
				 &t.slot_usage, err)))
		return rc;
	t.has_queue_depth = qd != UINT64_MAX;
	t.queue_depth = t.has_queue_depth ? (uint32_t)qd : 0;
	if (!t.has_queue_depth && !t.has_slot_usage)
		return ctl_fail(err, EINVAL, "missing field 'queue_depth' or 'slot_usage'");
	return ops->thresholds_set(ops->ctx, &t, err);
}

static int
cmd_no_args(const json_t *args, struct ctl_err *err)
{
	static const char *const none[] = {NULL};

	return ctl_check_fields(args, none, err);
}

/* stats.get [after: the cursor of a paged reply, a session key tenant << 16 | session] */
static int
cmd_stats_get(const struct ctl_ops *ops, const json_t *args, json_t *res, struct ctl_err *err)
{
	static const char *const fields[] = {"after", NULL};
	uint64_t after = UINT64_MAX;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = ctl_get_uint(args, "after", 0, UINT32_MAX, false, &after, err)))
		return rc;
	return ops->stats_get(ops->ctx, after == UINT64_MAX ? -1 : (int64_t)after, res, err);
}

int
ctl_dispatch(const struct ctl_ops *ops, const json_t *req, json_t **result, struct ctl_err *err)
{
	const json_t *cmdv, *args;
	const char *cmd;
	json_t *res, *empty;
	int rc;

	*result = NULL;
	err->code = 0;
	err->msg[0] = '\0';
	if (!json_is_object(req))
		return ctl_fail(err, EINVAL, "request must be a JSON object");
	cmdv = json_object_get(req, "cmd");
	if (!cmdv)
		return ctl_fail(err, EINVAL, "missing field 'cmd'");
	if (!json_is_string(cmdv))
		return ctl_fail(err, EINVAL, "field 'cmd' must be a string");
	cmd = json_string_value(cmdv);
	args = json_object_get(req, "args");
	if (args && !json_is_object(args))
		return ctl_fail(err, EINVAL, "field 'args' must be an object");
	res = json_object();
	empty = args ? NULL : json_object();
	if (!res || (!args && !empty)) {
		json_decref(res);
		return ctl_fail(err, ENOSPC, "out of memory");
	}
	if (!args)
		args = empty;

	if (strcmp(cmd, "ping") == 0) {
		rc = cmd_no_args(args, err);
		if (rc == 0)
			rc = ops->ping(ops->ctx, res, err);
	} else if (strcmp(cmd, "stats.get") == 0) {
		rc = cmd_stats_get(ops, args, res, err);
	} else if (strcmp(cmd, "session.add") == 0)
		rc = cmd_session_add(ops, args, err);
	else if (strcmp(cmd, "session.del") == 0)
		rc = cmd_session_del(ops, args, err);
	else if (strcmp(cmd, "tensor.add") == 0)
		rc = cmd_tensor_add(ops, args, err);
	else if (strcmp(cmd, "tensor.del") == 0)
		rc = cmd_tensor_del(ops, args, err);
	else if (strcmp(cmd, "lease") == 0)
		rc = cmd_lease(ops, args, err);
	else if (strcmp(cmd, "mode.set") == 0)
		rc = cmd_mode_set(ops, args, err);
	else if (strcmp(cmd, "thresholds.set") == 0)
		rc = cmd_thresholds_set(ops, args, err);
	else
		rc = ctl_fail(err, EINVAL, "unknown command '%s'", cmd);
	json_decref(empty);
	if (rc) {
		json_decref(res);
		if (err->code == 0)
			ctl_fail(err, rc, "%s failed", cmd);
		return rc;
	}
	*result = res;
	return 0;
}

int
ctl_apply_file(const struct ctl_ops *ops, const char *path, struct ctl_err *err)
{
	json_error_t jerr;
	json_t *arr, *req, *res;
	size_t i;
	int rc = 0;

	arr = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!arr)
		return ctl_fail(err, EINVAL, "%s:%d:%d: %s", path, jerr.line, jerr.column,
				jerr.text);
	if (!json_is_array(arr)) {
		json_decref(arr);
		return ctl_fail(err, EINVAL, "%s: must hold a JSON array of requests", path);
	}
	json_array_foreach (arr, i, req) {
		rc = ctl_dispatch(ops, req, &res, err);
		if (rc) {
			const json_t *cmd =
			    json_is_object(req) ? json_object_get(req, "cmd") : NULL;
			char inner[sizeof(err->msg)];

			snprintf(inner, sizeof(inner), "%s", err->msg);
			snprintf(err->msg, sizeof(err->msg), "%.60s: request #%zu (%.30s): %.100s",
				 path, i + 1, json_is_string(cmd) ? json_string_value(cmd) : "?",
				 inner);
			break;
		}
		json_decref(res);
	}
	json_decref(arr);
	return rc;
}
