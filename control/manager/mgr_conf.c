/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Options: the command line, and --config FILE (a JSON object whose keys
 * are the long option names), both through mgr_conf_set(); the command
 * line wins.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cais/proto.h>

#include "cmn_addr.h"
#include "ctl.h"
#include "mgr.h"

enum {
	OPT_LISTEN = 256,
	OPT_KEY,
	OPT_SWITCH_CTL,
	OPT_SWITCH_KEY,
	OPT_AGG,
	OPT_DB,
	OPT_LEASE_MS,
	OPT_POLL_MS,
	OPT_SWITCH_TIMEOUT_MS,
	OPT_MAX_SLOT_USAGE,
	OPT_MAX_QUEUE_DEPTH,
	OPT_DEFAULT_SCALE,
	OPT_HALF_WIRE,
	OPT_DEFAULT_SLOTS,
	OPT_DEFAULT_ELEMS,
	OPT_DEFAULT_PRIORITY,
	OPT_HISTORY,
	OPT_LOG_LEVEL,
	OPT_CONFIG,
	OPT_FABRIC,
};

static const struct option long_opts[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"key", required_argument, NULL, OPT_KEY},
    {"switch-ctl", required_argument, NULL, OPT_SWITCH_CTL},
    {"switch-key", required_argument, NULL, OPT_SWITCH_KEY},
    {"agg", required_argument, NULL, OPT_AGG},
    {"db", required_argument, NULL, OPT_DB},
    {"lease-ms", required_argument, NULL, OPT_LEASE_MS},
    {"poll-ms", required_argument, NULL, OPT_POLL_MS},
    {"switch-timeout-ms", required_argument, NULL, OPT_SWITCH_TIMEOUT_MS},
    {"max-slot-usage", required_argument, NULL, OPT_MAX_SLOT_USAGE},
    {"max-queue-depth", required_argument, NULL, OPT_MAX_QUEUE_DEPTH},
    {"default-scale", required_argument, NULL, OPT_DEFAULT_SCALE},
    {"half-wire", required_argument, NULL, OPT_HALF_WIRE},
    {"default-slots", required_argument, NULL, OPT_DEFAULT_SLOTS},
    {"default-elems", required_argument, NULL, OPT_DEFAULT_ELEMS},
    {"default-priority", required_argument, NULL, OPT_DEFAULT_PRIORITY},
    {"history", required_argument, NULL, OPT_HISTORY},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"fabric", required_argument, NULL, OPT_FABRIC},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

void
mgr_conf_init(struct mgr_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->listen.sin_family = AF_INET;
	c->listen.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c->listen.sin_port = htons(CAIS_MGR_PORT);
	c->switch_ctl = c->listen;
	c->switch_ctl.sin_port = htons(CAIS_CTL_PORT);
	snprintf(c->db, sizeof(c->db), "cais-manager.db");
	c->lease_ms = 3000;
	c->poll_ms = 1000;
	c->switch_timeout_ms = 500;
	c->max_slot_usage = 0.9;
	c->max_queue_depth = 512;
	c->default_scale = 1024;
	c->half_wire = CAIS_DT_BLOCK16;
	c->default_slots = 128;
	c->default_elems = CAIS_MAX_ELEMS;
	c->default_priority = CTL_PRIO_NORMAL;
	c->history = 8;
	c->log_level = MGR_LOG_INFO;
}

void
mgr_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: cais-manager (--agg A.B.C.D[:PORT] | --fabric FILE) [options]\n"
	    "\n"
	    "The CAIS cluster's control daemon (docs/PROTOCOL.md E3): grants tenant and\n"
	    "session ids from a store that survives restarts, installs jobs' sessions and\n"
	    "tensors on cais-switch, renews its lease, polls its counters, and tells agents\n"
	    "once per step which tensors go in-network and with which scale.\n"
	    "\n"
	    "Options (every one may also be a key of the --config file; the command line\n"
	    "wins):\n"
	    "  --agg A.B.C.D[:PORT]     the aggregator address agents send DATA to (required;\n"
	    "                           port default %u); job.status returns it\n"
	    "  --listen ADDR:PORT       this manager's endpoint (default 127.0.0.1:%u)\n"
	    "  --key FILE               HMAC-SHA256 key of the endpoint (the file's raw bytes);\n"
	    "                           without one, only a loopback --listen is allowed\n"
	    "  --switch-ctl ADDR:PORT   the switch's control endpoint (default 127.0.0.1:%u)\n"
	    "  --switch-key FILE        the key of the switch's endpoint\n"
	    "  --fabric FILE            several switch servers instead of --agg, --switch-ctl\n"
	    "                           and --switch-key (docs/PROTOCOL.md E10): a JSON\n"
	    "                           object {\"mode\": \"tree\" | \"stripes\", \"spine\": "
	    "NAME,\n"
	    "                           \"switches\": [{\"name\", \"ctl\", \"agg\", \"mac\", "
	    "\"key\",\n"
	    "                           \"hosts\": [A.B.C.D[/LEN], ...], \"uplink_port\"}]}. A "
	    "tree:\n"
	    "                           each rank goes to the leaf that holds its host, the\n"
	    "                           leaves' partial sums to the spine (E9); stripes: every\n"
	    "                           switch holds the session, flow i sends to switch\n"
	    "                           i mod m (E8)\n"
	    "  --switch-timeout-ms N    wait at most N ms for each switch reply (default 500)\n"
	    "  --db FILE                the SQLite store (default ./cais-manager.db; created\n"
	    "                           when absent; one manager per store)\n"
	    "  --lease-ms N             the switch's lease (default 3000), renewed every N/3 ms;\n"
	    "                           0 sends none (the switch keeps its mode)\n"
	    "  --poll-ms N              poll the switch's stats.get every N ms (default 1000)\n"
	    "  --max-slot-usage F       admission: refuse a job when the switch's slot usage is\n"
	    "                           above F, or would be with the job's slots (default 0.9)\n"
	    "  --max-queue-depth N      admission: refuse a job when the switch's queue depth is\n"
	    "                           above N packets (default 512)\n"
	    "  --default-scale F        a FIXED32 tensor's scale before any report (default\n"
	    "                           1024; BLOCK16 tensors start at 2^24)\n"
	    "  --half-wire W            the wire of bf16 and fp16 tensors registered without\n"
	    "                           one: block16 (default; 2 bytes an element,\n"
	    "                           docs/PROTOCOL.md E4) or fixed32\n"
	    "  --default-slots N        job.register's slots when not given (default 128)\n"
	    "  --default-elems N        ... elems_per_packet when not given (default %u)\n"
	    "  --default-priority N     ... priority when not given, 0 or 1 (default 0)\n"
	    "  --history N              steps whose answers and reports are kept (default 8)\n"
	    "  --log-level LEVEL        error, warn, info (default) or debug; to stderr\n"
	    "  --config FILE            a JSON object of options, e.g. {\"agg\": \"10.0.0.254\",\n"
	    "                           \"lease-ms\": 3000}\n"
	    "  -h, --help               this text\n"
	    "\n"
	    "Admission: when every rank of a job has joined, the job is admitted unless the\n"
	    "switch's last stats.get is above a threshold; a refused job (or one the switch\n"
	    "refuses: ENOSPC, no answer) is ready without offload, with the reason,\n"
	    "and its agents use the ring only.\n"
	    "\n"
	    "step.begin (computed when the first rank asks, then the same for every rank):\n"
	    "  scales   per tensor, the largest power of two s with n x max_abs x s x 2 < 2^31,\n"
	    "           from the largest max_abs of each rank's latest report (the previous\n"
	    "           step's, else the one before),\n"
	    "           clamped to [2^-24, 2^30]; BLOCK16 tensors: max_abs x s x 2 < 2^55,\n"
	    "           clamped to [2^-24, 2^54]; a tensor without a report keeps its scale;\n"
	    "           while some rank has reported neither, a scale only goes down (that\n"
	    "           rank may hold larger values)\n"
	    "  offload  the job's tensors installed on the switch, in id order. Congestion:\n"
	    "           when any rank reported CONGESTED for the previous step, the number\n"
	    "           offloaded halves (down to 0); each step without congestion doubles it\n"
	    "           (from at least 1) until every tensor is offloaded again. While a\n"
	    "           switch of the job has not answered two polls in a row, nothing is\n"
	    "           offloaded (the answer's \"unreachable\" names it).\n"
	    "\n"
	    "Switch restarts: at the manager's first poll, and whenever a switch's uptime\n"
	    "goes down, a ready job whose session is missing from its stats.get is installed\n"
	    "there again (its tensors too); if the switch now refuses it, the job offloads\n"
	    "nothing. Every switch of a fabric has its lease, its poll and its admission.\n"
	    "\n"
	    "Ids: tenant ids (one per tenant name) and session ids (one per job) are 16-bit,\n"
	    "granted from counters in the store and never granted twice, also after job.end\n"
	    "and across restarts; when all 65535 are used, registrations get ENOSPC.\n"
	    "SIGINT and SIGTERM stop it cleanly; the switch's lease then runs out.\n",
	    CAIS_UDP_PORT, CAIS_MGR_PORT, CAIS_CTL_PORT, CAIS_MAX_ELEMS);
}

static int
parse_u32(const char *opt, const char *v, uint32_t min, uint32_t max, uint32_t *out,
	  struct ctl_err *err)
{
	unsigned long long x;
	char *end;

	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || x < min || x > max)
		return ctl_fail(err, EINVAL, "--%s: '%.60s' is not an integer in [%u, %u]", opt, v,
				min, max);
	*out = (uint32_t)x;
	return 0;
}

static int
parse_double(const char *opt, const char *v, double min, double max, bool open_min, double *out,
	     struct ctl_err *err)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (errno || end == v || *end || !isfinite(x) || x < min || x > max ||
	    (open_min && x == min))
		return ctl_fail(err, EINVAL, "--%s: '%.60s' is not a number in %s%g, %g]", opt, v,
				open_min ? "(" : "[", min, max);
	*out = x;
	return 0;
}

static int
parse_path(const char *opt, const char *v, char *out, size_t cap, struct ctl_err *err)
{
	if (!v[0] || strlen(v) >= cap)
		return ctl_fail(err, EINVAL, "--%s: the path must have 1 to %zu characters", opt,
				cap - 1);
	memcpy(out, v, strlen(v) + 1);
	return 0;
}

static int
parse_addr(const char *opt, const char *v, uint16_t port, struct sockaddr_in *out,
	   struct ctl_err *err)
{
	if (cmn_parse_addr(v, port, out) != 0)
		return ctl_fail(err, EINVAL, "--%s: '%.60s' is not A.B.C.D%s", opt, v,
				port ? "[:PORT]" : ":PORT");
	if (!port && !strchr(v, ':'))
		return ctl_fail(err, EINVAL, "--%s: '%.60s' has no :PORT", opt, v);
	return 0;
}

static int
set_opt(struct mgr_conf *c, int id, const char *name, const char *v, struct ctl_err *err)
{
	uint32_t u;
	int rc;

	switch (id) {
	case OPT_LISTEN:
		return parse_addr(name, v, CAIS_MGR_PORT, &c->listen, err);
	case OPT_KEY:
		return parse_path(name, v, c->key_file, sizeof(c->key_file), err);
	case OPT_SWITCH_CTL:
		return parse_addr(name, v, CAIS_CTL_PORT, &c->switch_ctl, err);
	case OPT_SWITCH_KEY:
		return parse_path(name, v, c->switch_key_file, sizeof(c->switch_key_file), err);
	case OPT_AGG:
		if ((rc = parse_addr(name, v, CAIS_UDP_PORT, &c->agg, err)))
			return rc;
		if (c->agg.sin_addr.s_addr == htonl(INADDR_ANY))
			return ctl_fail(err, EINVAL, "--agg: 0.0.0.0 is not an address to send to");
		c->has_agg = true;
		return 0;
	case OPT_DB:
		return parse_path(name, v, c->db, sizeof(c->db), err);
	case OPT_LEASE_MS:
		if ((rc = parse_u32(name, v, 0, CTL_LEASE_MAX_MS, &c->lease_ms, err)))
			return rc;
		if (c->lease_ms && c->lease_ms < 30)
			return ctl_fail(err, EINVAL, "--lease-ms: 0 (no lease) or at least 30");
		return 0;
	case OPT_POLL_MS:
		return parse_u32(name, v, 10, 3600000, &c->poll_ms, err);
	case OPT_SWITCH_TIMEOUT_MS:
		return parse_u32(name, v, 10, 60000, &c->switch_timeout_ms, err);
	case OPT_MAX_SLOT_USAGE:
		return parse_double(name, v, 0, 1, false, &c->max_slot_usage, err);
	case OPT_MAX_QUEUE_DEPTH:
		return parse_u32(name, v, 0, UINT32_MAX, &c->max_queue_depth, err);
	case OPT_DEFAULT_SCALE:
		return parse_double(name, v, 0, 1e30, true, &c->default_scale, err);
	case OPT_HALF_WIRE:
		if (cais_dtype_parse(v) < 0)
			return ctl_fail(err, EINVAL, "--half-wire: fixed32 or block16, not '%.60s'",
					v);
		c->half_wire = (uint8_t)cais_dtype_parse(v);
		return 0;
	case OPT_DEFAULT_SLOTS:
		if ((rc = parse_u32(name, v, 1, CAIS_MAX_SLOTS, &u, err)))
			return rc;
		if (!cais_pool_size_ok(u))
			return ctl_fail(err, EINVAL, "--default-slots: a power of two in [1, %u]",
					CAIS_MAX_SLOTS);
		c->default_slots = u;
		return 0;
	case OPT_DEFAULT_ELEMS:
		return parse_u32(name, v, 1, CAIS_MAX_ELEMS, &c->default_elems, err);
	case OPT_DEFAULT_PRIORITY:
		return parse_u32(name, v, CTL_PRIO_NORMAL, CTL_PRIO_HIGH, &c->default_priority,
				 err);
	case OPT_HISTORY:
		return parse_u32(name, v, 1, 1000, &c->history, err);
	case OPT_LOG_LEVEL:
		for (int l = MGR_LOG_ERROR; l <= MGR_LOG_DEBUG; l++)
			if (strcmp(v, mgr_log_level_name((enum mgr_log_level)l)) == 0) {
				c->log_level = (enum mgr_log_level)l;
				return 0;
			}
		return ctl_fail(err, EINVAL,
				"--log-level: '%.60s' is not error, warn, info or debug", v);
	case OPT_CONFIG:
		return parse_path(name, v, c->config, sizeof(c->config), err);
	case OPT_FABRIC:
		return parse_path(name, v, c->fabric, sizeof(c->fabric), err);
	default:
		return ctl_fail(err, EINVAL, "unknown option '--%.60s'", name);
	}
}

int
mgr_conf_set(struct mgr_conf *c, const char *name, const char *value, struct ctl_err *err)
{
	for (const struct option *o = long_opts; o->name; o++)
		if (strcmp(o->name, name) == 0 && o->has_arg == required_argument)
			return set_opt(c, o->val, o->name, value, err);
	return ctl_fail(err, EINVAL, "unknown option '--%.60s'", name);
}

static int
load_config(struct mgr_conf *c, const char *path, struct ctl_err *err)
{
	json_error_t je;
	json_t *obj = json_load_file(path, JSON_REJECT_DUPLICATES, &je), *v;
	const char *key;
	int rc = 0;

	if (!obj)
		return ctl_fail(err, EINVAL, "--config %.200s:%d:%d: %.100s", path, je.line,
				je.column, je.text);
	if (!json_is_object(obj)) {
		json_decref(obj);
		return ctl_fail(err, EINVAL, "--config %.200s: must hold a JSON object of options",
				path);
	}
	json_object_foreach (obj, key, v) {
		char text[64];
		const char *s = text;

		if (strcmp(key, "config") == 0)
			rc = ctl_fail(err, EINVAL, "--config %.200s: 'config' cannot be nested",
				      path);
		else if (json_is_string(v))
			s = json_string_value(v);
		else if (json_is_integer(v))
			snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT,
				 json_integer_value(v));
		else if (json_is_real(v))
			snprintf(text, sizeof(text), "%.17g", json_real_value(v));
		else
			rc = ctl_fail(err, EINVAL,
				      "--config %.200s: '%.60s' must be a string or a number", path,
				      key);
		if (!rc && (rc = mgr_conf_set(c, key, s, err))) {
			char inner[sizeof(err->msg)];

			snprintf(inner, sizeof(inner), "%s", err->msg);
			ctl_fail(err, EINVAL, "--config %.100s: %.150s", path, inner);
		}
		if (rc)
			break;
	}
	json_decref(obj);
	return rc;
}

int
mgr_conf_parse(struct mgr_conf *c, int argc, char **argv, FILE *out, struct ctl_err *err)
{
	struct {
		int id;
		const char *name, *value;
	} *given = calloc((size_t)argc + 1, sizeof(*given));
	const char *config = NULL;
	int n = 0, opt, idx, rc = 0;

	if (!given)
		return ctl_fail(err, ENOMEM, "out of memory");
	optind = 0; /* glibc: start afresh (the tests parse more than once) */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "h", long_opts, &idx)) != -1) {
		if (opt == 'h') {
			mgr_usage(out);
			free(given);
			return 1;
		}
		if (opt == '?' || opt == ':') {
			rc = ctl_fail(err, EINVAL, "%s '%.60s' (see --help)",
				      opt == ':' || optopt ? "bad or incomplete option"
							   : "unknown option",
				      argv[optind - 1]);
			goto out;
		}
		if (opt == OPT_CONFIG)
			config = optarg;
		given[n].id = opt;
		given[n].name = long_opts[idx].name;
		given[n++].value = optarg;
	}
	if (optind < argc) {
		rc =
		    ctl_fail(err, EINVAL, "unexpected argument '%.60s' (see --help)", argv[optind]);
		goto out;
	}
	if (config && (rc = load_config(c, config, err)))
		goto out;
	for (int i = 0; i < n && !rc; i++)
		rc = set_opt(c, given[i].id, given[i].name, given[i].value, err);
	if (!rc && !c->has_agg && !c->fabric[0])
		rc = ctl_fail(err, EINVAL,
			      "--agg A.B.C.D[:PORT] (or --fabric FILE) is required (see --help)");
	if (!rc && c->has_agg && c->fabric[0])
		rc = ctl_fail(err, EINVAL,
			      "--agg and --fabric: one or the other (a fabric names each switch's "
			      "aggregator)");
out:
	free(given);
	return rc;
}
