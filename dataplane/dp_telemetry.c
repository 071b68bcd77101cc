/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rte_telemetry commands under /cais/, mirroring stats.get (readable with
 * DPDK's dpdk-telemetry.py): telemetry dicts hold numbers and strings, and
 * containers only of those, so nested objects are flattened ("thresholds"
 * -> "thresholds_slot_usage"), reals are strings, and the per-port and
 * per-session objects have commands of their own.
 *
 *   /cais/stats                 the switch-wide counters
 *   /cais/drops, /cais/rejects  drops and REJECTs by reason
 *   /cais/ports, /cais/port,N   port ids; port N's counters
 *   /cais/sessions              "tenant/session" of every session
 *   /cais/session,T/S           that session's counters and percentiles
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_telemetry.h>

#include "dp_ctl.h"
#include "dp_switch.h"
#include "dp_telemetry.h"

static struct dp_switch *tel_sw;

/* One JSON object into a telemetry dict; objects flattened under prefix_, arrays left out. */
static void
flatten(struct rte_tel_data *d, const json_t *o, const char *prefix)
{
	const char *k;
	json_t *v;

	json_object_foreach ((json_t *)o, k, v) {
		char name[RTE_TEL_MAX_STRING_LEN], num[64];

		snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "_" : "", k);
		switch (json_typeof(v)) {
		case JSON_INTEGER:
			if (json_integer_value(v) >= 0)
				rte_tel_data_add_dict_u64(d, name, (uint64_t)json_integer_value(v));
			else
				rte_tel_data_add_dict_int(d, name, (int)json_integer_value(v));
			break;
		case JSON_REAL:
			snprintf(num, sizeof(num), "%.6g", json_real_value(v));
			rte_tel_data_add_dict_string(d, name, num);
			break;
		case JSON_STRING:
			rte_tel_data_add_dict_string(d, name, json_string_value(v));
			break;
		case JSON_TRUE:
		case JSON_FALSE:
			rte_tel_data_add_dict_int(d, name, json_is_true(v));
			break;
		case JSON_OBJECT:
			flatten(d, v, name);
			break;
		default:
			break;
		}
	}
}

static json_t *
stats_now(void)
{
	json_t *o = json_object();

	dp_stats_json(tel_sw, -1, o);
	return o;
}

static int
cmd_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	json_t *o = stats_now();

	(void)cmd;
	(void)params;
	json_object_del(o, "drops");
	json_object_del(o, "rejects");
	rte_tel_data_start_dict(d);
	flatten(d, o, "");
	json_decref(o);
	return 0;
}

static int
cmd_part(const char *cmd, const char *params, struct rte_tel_data *d)
{
	json_t *o = stats_now();

	(void)params;
	rte_tel_data_start_dict(d);
	flatten(d, json_object_get(o, strcmp(cmd, "/cais/drops") == 0 ? "drops" : "rejects"), "");
	json_decref(o);
	return 0;
}

static int
cmd_ports(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
	for (uint16_t p = 0; p < tel_sw->n_ports; p++)
		rte_tel_data_add_array_int(d, p);
	return 0;
}

static int
cmd_port(const char *cmd, const char *params, struct rte_tel_data *d)
{
	json_t *o, *ports;
	char *end;
	unsigned long p;

	(void)cmd;
	if (!params || !*params)
		return -EINVAL;
	p = strtoul(params, &end, 10);
	if (*end || p >= tel_sw->n_ports)
		return -EINVAL;
	o = stats_now();
	ports = json_object_get(o, "ports");
	rte_tel_data_start_dict(d);
	flatten(d, json_array_get(ports, p), "");
	json_decref(o);
	return 0;
}

static int
cmd_sessions(const char *cmd, const char *params, struct rte_tel_data *d)
{
	json_t *o = stats_now(), *s;
	size_t i;

	(void)cmd;
	(void)params;
	rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
	json_array_foreach (json_object_get(o, "sessions"), i, s) {
		char id[32];

		snprintf(id, sizeof(id), "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT,
			 json_integer_value(json_object_get(s, "tenant")),
			 json_integer_value(json_object_get(s, "session")));
		rte_tel_data_add_array_string(d, id);
	}
	json_decref(o);
	return 0;
}

static int
cmd_session(const char *cmd, const char *params, struct rte_tel_data *d)
{
	unsigned int t, s;
	char tail;
	json_t *o, *e;
	size_t i;
	int rc = -ENOENT;

	(void)cmd;
	if (!params || sscanf(params, "%u/%u%c", &t, &s, &tail) != 2)
		return -EINVAL;
	o = stats_now();
	json_array_foreach (json_object_get(o, "sessions"), i, e) {
		if (json_integer_value(json_object_get(e, "tenant")) != t ||
		    json_integer_value(json_object_get(e, "session")) != s)
			continue;
		rte_tel_data_start_dict(d);
		flatten(d, e, "");
		rc = 0;
		break;
	}
	json_decref(o);
	return rc;
}

int
dp_telemetry_register(struct dp_switch *sw)
{
	static const struct {
		const char *cmd;
		telemetry_cb fn;
		const char *help;
	} cmds[] = {
	    {"/cais/stats", cmd_stats, "CAIS switch counters (as stats.get). No parameters"},
	    {"/cais/drops", cmd_part, "CAIS drops by reason. No parameters"},
	    {"/cais/rejects", cmd_part, "CAIS REJECTs sent by reason. No parameters"},
	    {"/cais/ports", cmd_ports, "CAIS switch ports. No parameters"},
	    {"/cais/port", cmd_port, "CAIS port counters. Parameter: port id"},
	    {"/cais/sessions", cmd_sessions, "CAIS sessions (tenant/session). No parameters"},
	    {"/cais/session", cmd_session, "CAIS session counters. Parameter: tenant/session"},
	};

	tel_sw = sw;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		int rc = rte_telemetry_register_cmd(cmds[i].cmd, cmds[i].fn, cmds[i].help);

		if (rc)
			return rc;
	}
	return 0;
}
