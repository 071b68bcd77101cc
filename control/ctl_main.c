/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-ctl: the operator's command line for cais-switch's control endpoint
 * (docs/PROTOCOL.md section 4) and for cais-manager (section E3).
 *
 * A command and its KEY=VALUE words become one request; the words are
 * checked against the command's fields before anything is sent, so a typo
 * never reaches the switch. The reply's result is printed readably (tables
 * for stats.get and jobs.list), or as JSON with --json; an error reply goes
 * to stderr and becomes a distinct exit status per error code.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <jansson.h>

#include "cmn_addr.h"
#include "ctl.h"
#include "ctl_auth.h"
#include "ctl_client.h"

#ifndef CAIS_VERSION_STRING
#define CAIS_VERSION_STRING "?"
#endif

#define DEFAULT_TIMEOUT_MS 2000
#define RETRY_MS	   200

/* Exit statuses (documented in --help). */
enum {
	EX_OK = 0,
	EX_EINVAL = 1,
	EX_USAGE = 2,
	EX_NOREPLY = 3,
	EX_ENOENT = 4,
	EX_EEXIST = 5,
	EX_ENOSPC = 6,
	EX_EPERM = 7,
	EX_EBUSY = 8,
	EX_PROTO = 9,
	EX_LOCAL = 10,
};

enum target { TG_SWITCH = 1, TG_MANAGER = 2 };

/* ------------------------------------------------------------------------ */
/* Commands and their fields                                                 */

enum ftype {
	FT_INT,	   /* integer in [imin, imax] */
	FT_NUM,	   /* finite number in [dmin, dmax] */
	FT_STR,	   /* string of imin..imax characters */
	FT_ENUM,   /* one of choices ("a|b|c") */
	FT_MAC,	   /* unicast MAC aa:bb:cc:dd:ee:ff */
	FT_IP,	   /* IPv4 A.B.C.D */
	FT_MEMBER, /* repeated RANK,MAC,IP,PORT -> members[] */
	FT_MAXABS, /* repeated TENSOR,MAX_ABS -> tensors[] */
};

#define F_REQ  0x1 /* required (when no JSON arguments are given) */
#define F_POW2 0x2 /* FT_INT: a power of two */
#define F_POS  0x4 /* FT_NUM: greater than dmin (exclusive) */

struct field {
	const char *word; /* name on the command line */
	const char *key;  /* JSON member, when it differs from word */
	enum ftype type;
	unsigned int flags;
	long long imin, imax;
	double dmin, dmax;
	const char *choices;
	const char *help;
};

struct cli;
typedef void (*show_fn)(const struct cli *c, const json_t *res);

#define MAX_FIELDS 10

struct command {
	const char *name;
	enum target target;
	const char *summary;
	const char *details; /* NULL or more lines for `help COMMAND` */
	const char *example;
	show_fn show;
	struct field f[MAX_FIELDS];
};

static void show_ok(const struct cli *c, const json_t *res);
static void show_ping(const struct cli *c, const json_t *res);
static void show_stats(const struct cli *c, const json_t *res);
static void show_jobs(const struct cli *c, const json_t *res);
static void show_generic(const struct cli *c, const json_t *res);
static void show_switch_status(const struct cli *c, const json_t *res);

#define U16(w, h)                                                                                  \
	{                                                                                          \
		w, NULL, FT_INT, F_REQ, 0, 65535, 0, 0, NULL, h                                    \
	}
#define U32(w, h)                                                                                  \
	{                                                                                          \
		w, NULL, FT_INT, F_REQ, 0, 4294967295LL, 0, 0, NULL, h                             \
	}
#define JOB                                                                                        \
	{                                                                                          \
		"job", NULL, FT_STR, F_REQ, 1, 64, 0, 0, NULL, "the job's name (1..64 characters)" \
	}
#define RANK                                                                                       \
	{                                                                                          \
		"rank", NULL, FT_INT, F_REQ, 0, 254, 0, 0, NULL, "the caller's rank (0..254)"      \
	}
#define COUNT(w, h)                                                                                \
	{                                                                                          \
		w, NULL, FT_INT, 0, 0, LLONG_MAX, 0, 0, NULL, h                                    \
	}
#define OP                                                                                         \
	{                                                                                          \
		"op", NULL, FT_ENUM, F_REQ, 0, 0, 0, 0, "sum|avg|max|min", "reduce operation"      \
	}

static const struct command commands[] = {
    /* the switch (section 4) */
    {"ping", TG_SWITCH, "mode, uptime, version", NULL, "cais-ctl ping", show_ping, {{0}}},
    {"session.add",
     TG_SWITCH,
     "install a session and grant its slot pool",
     "n defaults to the number of member= words; each rank 0..n-1 once.\n"
     "ENOSPC when the pool would pass the slot-usage threshold, EEXIST when the\n"
     "session exists.",
     "cais-ctl session.add tenant=1 session=1 slots=64 elems_per_packet=2048 \\\n"
     "      member=0,02:ca:15:01:00:01,198.18.1.1,47000 "
     "member=1,02:ca:15:01:00:02,198.18.1.2,47000",
     show_ok,
     {U16("tenant", "tenant id (0..65535)"),
      U16("session", "session id within the tenant (0..65535)"),
      {"n", NULL, FT_INT, 0, 1, 255, 0, 0, NULL, "world size (1..255; default: member count)"},
      {"slots", NULL, FT_INT, F_REQ | F_POW2, 1, 32768, 0, 0, NULL,
       "slot pool size (power of two, 1..32768)"},
      {"elems_per_packet", NULL, FT_INT, F_REQ, 1, 2048, 0, 0, NULL,
       "elements per packet (1..2048)"},
      {"priority", NULL, FT_INT, 0, 0, 1, 0, 0, NULL, "0 normal (default), 1 high"},
      {"member", "members", FT_MEMBER, F_REQ, 0, 0, 0, 0, NULL,
       "one per rank: RANK,MAC,IP,PORT (the rank's MAC, IPv4 address, UDP port)"}}},
    {"session.del",
     TG_SWITCH,
     "remove a session, its tensors, and free its slots",
     NULL,
     "cais-ctl session.del tenant=1 session=1",
     show_ok,
     {U16("tenant", "tenant id"), U16("session", "session id")}},
    {"tensor.add",
     TG_SWITCH,
     "install a tensor entry",
     "ENOENT when the session does not exist, EEXIST when the tensor does.",
     "cais-ctl tensor.add tenant=1 session=1 tensor=7 op=sum scale=1024",
     show_ok,
     {U16("tenant", "tenant id"),
      U16("session", "session id"),
      U32("tensor", "tensor id (0..4294967295)"),
      OP,
      {"scale", NULL, FT_NUM, F_REQ | F_POS, 0, 0, 0, 1e300, NULL,
       "fixed-point scale the hosts use (> 0)"}}},
    {"tensor.del",
     TG_SWITCH,
     "remove a tensor entry",
     NULL,
     "cais-ctl tensor.del tenant=1 session=1 tensor=7",
     show_ok,
     {U16("tenant", "tenant id"), U16("session", "session id"), U32("tensor", "tensor id")}},
    {"lease",
     TG_SWITCH,
     "grant the control session's lease",
     "When it runs out the switch goes to forward-only mode until the next lease\n"
     "or mode.set.",
     "cais-ctl lease ttl_ms=5000",
     show_ok,
     {{"ttl_ms", NULL, FT_INT, F_REQ, 1, 86400000, 0, 0, NULL, "lease length (1..86400000 ms)"}}},
    {"mode.set",
     TG_SWITCH,
     "compute, or forward-only (no aggregation, DATA gets REJECT fwd_only)",
     NULL,
     "cais-ctl mode.set mode=forward_only",
     show_ok,
     {{"mode", NULL, FT_ENUM, F_REQ, 0, 0, 0, 0, "compute|forward_only", "the switch's mode"}}},
    {"thresholds.set",
     TG_SWITCH,
     "set the admission thresholds (either or both)",
     NULL,
     "cais-ctl thresholds.set queue_depth=512 slot_usage=0.9",
     show_ok,
     {{"queue_depth", NULL, FT_INT, 0, 0, 4294967295LL, 0, 0, NULL,
       "queue depth (packets) above which RESULTs carry CONGESTED"},
      {"slot_usage", NULL, FT_NUM, 0, 0, 0, 0.0, 1.0, NULL,
       "share of the slot capacity (0..1) session.add may use"}}},
    {"stats.get",
     TG_SWITCH,
     "counters: ports, drops, REJECTs, sessions (a table; --json: the object)",
     NULL,
     "cais-ctl stats.get",
     show_stats,
     {{0}}},
    /* the manager (section E3) */
    {"ping",
     TG_MANAGER,
     "version, uptime, jobs",
     NULL,
     "cais-ctl --manager 127.0.0.1 ping",
     show_ping,
     {{0}}},
    {"job.register",
     TG_MANAGER,
     "register a job (the same answer to every rank that registers it alike)",
     "slots, elems_per_packet and priority default to the manager's settings.",
     "cais-ctl job.register job=llama tenant=lab world=4 slots=64 elems_per_packet=2048",
     show_generic,
     {JOB,
      {"tenant", NULL, FT_STR, F_REQ, 1, 64, 0, 0, NULL, "the tenant's name (1..64 characters)"},
      {"world", NULL, FT_INT, F_REQ, 1, 255, 0, 0, NULL, "number of ranks (1..255)"},
      {"slots", NULL, FT_INT, F_POW2, 1, 32768, 0, 0, NULL,
       "slot pool size (power of two, 1..32768)"},
      {"elems_per_packet", NULL, FT_INT, 0, 1, 2048, 0, 0, NULL, "elements per packet (1..2048)"},
      {"priority", NULL, FT_INT, 0, 0, 1, 0, 0, NULL, "0 normal, 1 high"}}},
    {"job.join",
     TG_MANAGER,
     "join a rank to a job (answers as job.status)",
     NULL,
     "cais-ctl job.join job=llama rank=0 mac=02:ca:15:01:00:01 ip=198.18.1.1 port=47000",
     show_generic,
     {JOB,
      RANK,
      {"mac", NULL, FT_MAC, F_REQ, 0, 0, 0, 0, NULL, "the rank's MAC"},
      {"ip", NULL, FT_IP, F_REQ, 0, 0, 0, 0, NULL, "the rank's IPv4 address"},
      {"port", NULL, FT_INT, F_REQ, 1, 65535, 0, 0, NULL, "the rank's UDP port"}}},
    {"job.status",
     TG_MANAGER,
     "a job's state, and its switch session when ready",
     NULL,
     "cais-ctl job.status job=llama",
     show_generic,
     {JOB}},
    {"tensor.register",
     TG_MANAGER,
     "register a tensor of a job",
     NULL,
     "cais-ctl tensor.register job=llama tensor=7 op=sum",
     show_generic,
     {JOB, U32("tensor", "tensor id (0..4294967295)"), OP}},
    {"step.begin",
     TG_MANAGER,
     "begin a step: the tensors to offload and their scales",
     NULL,
     "cais-ctl step.begin job=llama rank=0 step=12",
     show_generic,
     {JOB, RANK, {"step", NULL, FT_INT, F_REQ, 0, LLONG_MAX, 0, 0, NULL, "step number (>= 0)"}}},
    {"stats.report",
     TG_MANAGER,
     "report a rank's statistics of a step",
     NULL,
     "cais-ctl stats.report job=llama rank=0 step=12 tensor=7,3.5 collectives=40 fallbacks=0",
     show_generic,
     {JOB,
      RANK,
      {"step", NULL, FT_INT, F_REQ, 0, LLONG_MAX, 0, 0, NULL, "step number (>= 0)"},
      {"tensor", "tensors", FT_MAXABS, 0, 0, 0, 0, 0, NULL,
       "repeated TENSOR,MAX_ABS: the largest |value| seen per tensor"},
      COUNT("collectives", "collectives run in the step"),
      COUNT("fallbacks", "collectives that went to the ring"),
      COUNT("errors", "errors seen"),
      COUNT("congested", "RESULTs with CONGESTED seen")}},
    {"job.end",
     TG_MANAGER,
     "end a job (its session leaves the switch)",
     NULL,
     "cais-ctl job.end job=llama",
     show_generic,
     {JOB}},
    {"jobs.list", TG_MANAGER, "every job (a table)", NULL, "cais-ctl jobs.list", show_jobs, {{0}}},
    {"switch.status",
     TG_MANAGER,
     "the switch's last polled counters, lease state",
     NULL,
     "cais-ctl switch.status",
     show_switch_status,
     {{0}}},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

/* ------------------------------------------------------------------------ */
/* State of one invocation                                                   */

struct cli {
	enum target target;
	bool target_given;
	const char *addr_text;
	struct sockaddr_in addr;
	const char *key_file;
	struct ctl_key key;
	bool json;
	int timeout_ms;
	double rtt_ms;
};

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void
usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("cais-ctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(cais-ctl --help for usage; nothing was sent)\n", stderr);
	exit(EX_USAGE);
}

static const char *
target_name(enum target t)
{
	return t == TG_MANAGER ? "cais-manager" : "cais-switch";
}

static const struct command *
find_command(const char *name, enum target t)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0 && (commands[i].target & t))
			return &commands[i];
	return NULL;
}

static const char *
fkey(const struct field *f)
{
	return f->key ? f->key : f->word;
}

static const char *
type_text(const struct field *f)
{
	switch (f->type) {
	case FT_INT:
		return "N";
	case FT_NUM:
		return "X";
	case FT_STR:
		return "NAME";
	case FT_ENUM:
		return f->choices;
	case FT_MAC:
		return "MAC";
	case FT_IP:
		return "A.B.C.D";
	case FT_MEMBER:
		return "RANK,MAC,IP,PORT";
	case FT_MAXABS:
		return "TENSOR,MAX_ABS";
	}
	return "?";
}

static bool
repeated(const struct field *f)
{
	return f->type == FT_MEMBER || f->type == FT_MAXABS;
}

/* "tenant=N session=N [priority=N] member=RANK,MAC,IP,PORT..." */
static void
print_synopsis(FILE *out, const struct command *cmd)
{
	fprintf(out, "%s", cmd->name);
	for (const struct field *f = cmd->f; f->word; f++)
		fprintf(out, " %s%s=%s%s%s", f->flags & F_REQ ? "" : "[", f->word, type_text(f),
			repeated(f) ? "..." : "", f->flags & F_REQ ? "" : "]");
}

static void
print_help(FILE *out)
{
	fprintf(out,
		"Usage: cais-ctl [OPTIONS] COMMAND [KEY=VALUE...]\n"
		"       cais-ctl [OPTIONS] raw CMD ['{JSON args}' | @FILE.json]\n"
		"       cais-ctl help [COMMAND]\n"
		"\n"
		"The operator's command line for cais-switch's control endpoint and for\n"
		"cais-manager (JSON over UDP, docs/PROTOCOL.md section 4 and E3).\n"
		"\n"
		"Options (anywhere on the line):\n"
		"  -s, --switch ADDR[:PORT]   talk to cais-switch (default 127.0.0.1:%u)\n"
		"  -m, --manager ADDR[:PORT]  talk to cais-manager (default 127.0.0.1:%u); the\n"
		"                             manager's own commands go there without it\n"
		"  -k, --key FILE             HMAC-SHA256 key: the file given to the switch's\n"
		"                             --ctl-key or the manager's --key (raw bytes)\n"
		"  -j, --json                 print the reply's result as JSON (for scripts)\n"
		"  -t, --timeout-ms N         give up after N ms without a reply (default %d;\n"
		"                             the request is resent every %d ms)\n"
		"  -a, --args-json JSON       arguments as a JSON object, sent as given\n"
		"  -h, --help                 this help; after a command, the command's help\n"
		"  -V, --version              print cais-ctl's version\n"
		"\n"
		"Arguments: KEY=VALUE words (numbers, strings, enums) are checked against the\n"
		"command's fields before anything is sent; KEY:=JSON gives a field as JSON\n"
		"(e.g. members:='[...]'); @FILE.json and --args-json give a JSON object of\n"
		"arguments, sent as given (checked by the receiver only), with the KEY=VALUE\n"
		"words on top. `raw` sends any command with JSON arguments and prints the\n"
		"result as JSON.\n"
		"\n"
		"Switch commands (default target):\n",
		CAIS_CTL_PORT, CAIS_MGR_PORT, DEFAULT_TIMEOUT_MS, RETRY_MS);
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (commands[i].target == TG_SWITCH)
			fprintf(out, "  %-16s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nManager commands (with --manager; manager-only ones go there anyway):\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (commands[i].target == TG_MANAGER)
			fprintf(out, "  %-16s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n`cais-ctl help COMMAND` shows a command's arguments.\n"
		     "\n"
		     "Output: stats.get and jobs.list as tables, ping as one line, table changes\n"
		     "as \"ok\"; --json prints the result object instead. Errors go to stderr as\n"
		     "\"CODE: message\".\n"
		     "\n"
		     "Exit status:\n"
		     "  0   success\n"
		     "  1   EINVAL: the receiver refused the request as malformed\n"
		     "  2   usage: cais-ctl refused its command line (unknown option or command,\n"
		     "      bad argument, unreadable key or JSON file); nothing was sent\n"
		     "  3   no reply within --timeout-ms (not running? another port? firewall?)\n"
		     "  4   ENOENT (no such session, tensor or job)\n"
		     "  5   EEXIST (already there, or registered with other values)\n"
		     "  6   ENOSPC (slot-usage threshold, capacity)\n"
		     "  7   EPERM (authentication: missing or wrong key, clock off by > 30 s)\n"
		     "  8   EBUSY\n"
		     "  9   a reply that is not the protocol's, or an unknown error code\n"
		     "  10  local failure (socket, memory)\n");
}

static void
print_command_help(FILE *out, const struct command *cmd)
{
	const struct command *other = NULL;

	for (size_t i = 0; i < N_COMMANDS; i++)
		if (&commands[i] != cmd && strcmp(commands[i].name, cmd->name) == 0)
			other = &commands[i];
	fprintf(out, "Usage: cais-ctl%s ",
		cmd->target == TG_MANAGER ? " [--manager ADDR:PORT]" : "");
	print_synopsis(out, cmd);
	fprintf(out, "\n\n%s: %s.\n", target_name(cmd->target), cmd->summary);
	if (cmd->details)
		fprintf(out, "%s\n", cmd->details);
	if (cmd->f[0].word) {
		fprintf(out, "\nArguments:\n");
		for (const struct field *f = cmd->f; f->word; f++) {
			char lhs[64];

			snprintf(lhs, sizeof(lhs), "%s=%s", f->word, type_text(f));
			fprintf(out, "  %-28s %s%s\n", lhs, f->help,
				(f->flags & F_REQ)
				    ? (repeated(f) ? " (repeated)" : "")
				    : (repeated(f) ? " (optional, repeated)" : " (optional)"));
		}
	} else {
		fprintf(out, "\nNo arguments.\n");
	}
	fprintf(out, "\nExample:\n  %s\n", cmd->example);
	if (other)
		fprintf(out, "\n(%s also has '%s': cais-ctl%s help %s)\n",
			target_name(other->target), other->name,
			other->target == TG_MANAGER ? " --manager 127.0.0.1"
						    : " --switch 127.0.0.1",
			other->name);
}

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */

static bool
parse_ll(const char *s, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	return *s && !errno && !*end;
}

static bool
parse_num(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return *s && !errno && !*end && isfinite(*out);
}

static bool
mac_ok(const char *s)
{
	if (strlen(s) != 17)
		return false;
	for (int i = 0; i < 17; i++) {
		bool colon = i % 3 == 2;

		if (colon ? s[i] != ':'
			  : !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
			      (s[i] >= 'A' && s[i] <= 'F')))
			return false;
	}
	{
		unsigned int b0 = (unsigned int)strtoul(s, NULL, 16);

		return (b0 & 1) == 0 && strcmp(s, "00:00:00:00:00:00") != 0;
	}
}

static bool
ip_ok(const char *s)
{
	struct in_addr a;

	return inet_pton(AF_INET, s, &a) == 1;
}

/* An integer word within [min, max] (and a power of two with F_POW2). */
static json_t *
int_value(const char *cmd, const char *what, const char *v, long long min, long long max, bool pow2)
{
	long long x;

	if (!parse_ll(v, &x))
		usage_error("%s: %s: '%s' is not an integer", cmd, what, v);
	if (x < min || x > max)
		usage_error("%s: %s: %lld is out of range [%lld, %lld]", cmd, what, x, min, max);
	if (pow2 && (x & (x - 1)) != 0)
		usage_error("%s: %s: %lld is not a power of two", cmd, what, x);
	return json_integer((json_int_t)x);
}

/* "RANK,MAC,IP,PORT" -> {rank, mac, ip, port} */
static json_t *
member_value(const char *cmd, const char *v)
{
	char buf[128], *parts[5], *save = NULL, *p;
	int n = 0;
	json_t *m;

	if (strlen(v) >= sizeof(buf))
		usage_error("%s: member: '%s' is too long", cmd, v);
	snprintf(buf, sizeof(buf), "%s", v);
	for (p = strtok_r(buf, ",", &save); p && n < 5; p = strtok_r(NULL, ",", &save))
		parts[n++] = p;
	if (n != 4)
		usage_error("%s: member: '%s' is not RANK,MAC,IP,PORT", cmd, v);
	/* every check before anything is allocated: a usage error exits */
	if (!mac_ok(parts[1]))
		usage_error("%s: member %s: '%s' is not a unicast MAC (aa:bb:cc:dd:ee:ff)", cmd,
			    parts[0], parts[1]);
	if (!ip_ok(parts[2]))
		usage_error("%s: member %s: '%s' is not an IPv4 address", cmd, parts[0], parts[2]);
	json_decref(int_value(cmd, "member RANK", parts[0], 0, 254, false));
	json_decref(int_value(cmd, "member PORT", parts[3], 1, 65535, false));
	m = json_object();
	json_object_set_new(m, "rank", int_value(cmd, "member RANK", parts[0], 0, 254, false));
	json_object_set_new(m, "mac", json_string(parts[1]));
	json_object_set_new(m, "ip", json_string(parts[2]));
	json_object_set_new(m, "port", int_value(cmd, "member PORT", parts[3], 1, 65535, false));
	return m;
}

/* "TENSOR,MAX_ABS" -> {tensor, max_abs} */
static json_t *
maxabs_value(const char *cmd, const char *v)
{
	const char *comma = strchr(v, ',');
	char id[32];
	double x;
	json_t *o;

	if (!comma || (size_t)(comma - v) >= sizeof(id))
		usage_error("%s: tensor: '%s' is not TENSOR,MAX_ABS", cmd, v);
	memcpy(id, v, (size_t)(comma - v));
	id[comma - v] = '\0';
	o = json_object();
	json_object_set_new(o, "tensor", int_value(cmd, "tensor id", id, 0, 4294967295LL, false));
	if (!parse_num(comma + 1, &x) || x < 0)
		usage_error("%s: tensor %s: max_abs '%s' is not a number >= 0", cmd, id, comma + 1);
	json_object_set_new(o, "max_abs", json_real(x));
	return o;
}

static json_t *
field_value(const char *cmd, const struct field *f, const char *v)
{
	switch (f->type) {
	case FT_INT:
		return int_value(cmd, f->word, v, f->imin, f->imax, f->flags & F_POW2);
	case FT_NUM: {
		double x;

		if (!parse_num(v, &x))
			usage_error("%s: %s: '%s' is not a number", cmd, f->word, v);
		if ((f->flags & F_POS) ? !(x > f->dmin) : x < f->dmin)
			usage_error("%s: %s: %s must be %s %g", cmd, f->word, v,
				    (f->flags & F_POS) ? "greater than" : "at least", f->dmin);
		if (x > f->dmax)
			usage_error("%s: %s: %s must be at most %g", cmd, f->word, v, f->dmax);
		return json_real(x);
	}
	case FT_STR: {
		size_t l = strlen(v);

		if ((long long)l < f->imin || (long long)l > f->imax)
			usage_error("%s: %s: '%s' must have %lld..%lld characters", cmd, f->word, v,
				    f->imin, f->imax);
		return json_string(v);
	}
	case FT_ENUM: {
		size_t l = strlen(v);
		const char *p = f->choices;

		while (p) {
			const char *bar = strchr(p, '|');
			size_t pl = bar ? (size_t)(bar - p) : strlen(p);

			if (pl == l && strncmp(p, v, l) == 0)
				return json_string(v);
			p = bar ? bar + 1 : NULL;
		}
		usage_error("%s: %s: '%s' is not one of %s", cmd, f->word, v, f->choices);
	}
	case FT_MAC:
		if (!mac_ok(v))
			usage_error("%s: %s: '%s' is not a unicast MAC (aa:bb:cc:dd:ee:ff)", cmd,
				    f->word, v);
		return json_string(v);
	case FT_IP:
		if (!ip_ok(v))
			usage_error("%s: %s: '%s' is not an IPv4 address", cmd, f->word, v);
		return json_string(v);
	case FT_MEMBER:
		return member_value(cmd, v);
	case FT_MAXABS:
		return maxabs_value(cmd, v);
	}
	return NULL;
}

static json_t *
load_json_object(const char *what, const char *text, bool is_file)
{
	json_error_t je;
	json_t *o = is_file ? json_load_file(text, JSON_REJECT_DUPLICATES, &je)
			    : json_loads(text, JSON_REJECT_DUPLICATES, &je);

	if (!o) {
		if (is_file)
			usage_error("%s %s: %s (line %d)", what, text, je.text, je.line);
		usage_error("%s: not JSON: %s (at character %d)", what, je.text, je.position);
	}
	if (!json_is_object(o)) {
		json_decref(o);
		usage_error("%s%s%s: must be a JSON object {...}", what, is_file ? " " : "",
			    is_file ? text : "");
	}
	return o;
}

/* Merge src into dst (src's members win). */
static void
merge(json_t *dst, json_t *src)
{
	json_object_update(dst, src);
	json_decref(src);
}

/*
 * Build the arguments of cmd from words (KEY=VALUE, KEY:=JSON, @FILE) and
 * --args-json. Everything wrong here is a usage error: nothing is sent.
 */
static json_t *
build_args(const struct command *cmd, int nw, char **words, const char *args_json)
{
	json_t *args = json_object(), *lists[MAX_FIELDS] = {0};
	bool seen[MAX_FIELDS] = {false}, have_json = args_json != NULL;
	int fi;

	if (args_json)
		merge(args, load_json_object("--args-json", args_json, false));
	for (int i = 0; i < nw; i++)
		if (words[i][0] == '@') {
			merge(args, load_json_object("arguments file", words[i] + 1, true));
			have_json = true;
		}
	for (int i = 0; i < nw; i++) {
		const char *w = words[i], *eq;
		const struct field *f = NULL;
		bool raw_json;
		char name[64];

		if (w[0] == '@')
			continue;
		eq = strchr(w, '=');
		if (!eq || eq == w)
			usage_error("%s: '%s' is not KEY=VALUE", cmd->name, w);
		raw_json = eq[-1] == ':';
		if ((size_t)(eq - w) - raw_json >= sizeof(name))
			usage_error("%s: '%s': name too long", cmd->name, w);
		memcpy(name, w, (size_t)(eq - w) - raw_json);
		name[(eq - w) - raw_json] = '\0';
		for (fi = 0; cmd->f[fi].word; fi++)
			if (strcmp(cmd->f[fi].word, name) == 0 ||
			    strcmp(fkey(&cmd->f[fi]), name) == 0)
				break;
		f = &cmd->f[fi];
		if (!f->word) {
			fprintf(stderr, "cais-ctl: %s: unknown argument '%s'; it takes:", cmd->name,
				name);
			if (!cmd->f[0].word)
				fprintf(stderr, " no arguments");
			for (const struct field *g = cmd->f; g->word; g++)
				fprintf(stderr, " %s", g->word);
			fprintf(stderr,
				"\n(cais-ctl help %s; --args-json sends anything; nothing "
				"was sent)\n",
				cmd->name);
			exit(EX_USAGE);
		}
		if (seen[fi] && (raw_json || !repeated(f)))
			usage_error("%s: '%s' given twice", cmd->name, name);
		seen[fi] = true;
		if (raw_json) {
			json_error_t je;
			json_t *v =
			    json_loads(eq + 1, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);

			if (!v)
				usage_error("%s: %s:=: not JSON: %s", cmd->name, name, je.text);
			json_object_set_new(args, fkey(f), v);
			continue;
		}
		if (repeated(f)) {
			if (!lists[fi])
				lists[fi] = json_array();
			json_array_append_new(lists[fi], field_value(cmd->name, f, eq + 1));
		} else {
			json_object_set_new(args, fkey(f), field_value(cmd->name, f, eq + 1));
		}
	}
	for (fi = 0; cmd->f[fi].word; fi++)
		if (lists[fi])
			json_object_set_new(args, fkey(&cmd->f[fi]), lists[fi]);

	/* session.add: n from the members; every rank once */
	if (strcmp(cmd->name, "session.add") == 0) {
		json_t *members = json_object_get(args, "members");
		json_t *n = json_object_get(args, "n");

		if (!n && json_is_array(members) && json_array_size(members) > 0 &&
		    json_array_size(members) <= 255)
			json_object_set_new(args, "n",
					    json_integer((json_int_t)json_array_size(members)));
		n = json_object_get(args, "n");
		if (json_is_array(members) && json_is_integer(n) && !have_json) {
			bool have[256] = {false};
			size_t i;
			json_t *m;

			if (json_array_size(members) != (size_t)json_integer_value(n))
				usage_error("session.add: n=%lld but %zu member= words",
					    (long long)json_integer_value(n),
					    json_array_size(members));
			json_array_foreach (members, i, m) {
				json_int_t r = json_integer_value(json_object_get(m, "rank"));

				if (!json_is_integer(json_object_get(m, "rank")))
					continue; /* given as JSON: the switch checks */
				if (r < 0 || r >= json_integer_value(n))
					usage_error(
					    "session.add: member rank %lld is not below n=%lld",
					    (long long)r, (long long)json_integer_value(n));
				if (have[r])
					usage_error("session.add: member rank %lld given twice",
						    (long long)r);
				have[r] = true;
			}
		}
	}
	if (!have_json) {
		for (const struct field *f = cmd->f; f->word; f++)
			if ((f->flags & F_REQ) && !json_object_get(args, fkey(f)))
				usage_error("%s: missing %s=%s (cais-ctl help %s)", cmd->name,
					    f->word, type_text(f), cmd->name);
		if (strcmp(cmd->name, "thresholds.set") == 0 && json_object_size(args) == 0)
			usage_error("thresholds.set: give queue_depth=N, slot_usage=X or both");
	}
	return args;
}

/* ------------------------------------------------------------------------ */
/* One request, one reply                                                    */

struct reply {
	int code;	    /* 0, or the errno value of the error (EPROTO: unknown) */
	char code_name[32]; /* as the reply said */
	char msg[512];
	bool refused; /* ICMP port unreachable seen */
	int tries;
};

static int
exit_for(int code)
{
	switch (code) {
	case 0:
		return EX_OK;
	case EINVAL:
		return EX_EINVAL;
	case ETIMEDOUT:
		return EX_NOREPLY;
	case ENOENT:
		return EX_ENOENT;
	case EEXIST:
		return EX_EEXIST;
	case ENOSPC:
		return EX_ENOSPC;
	case EPERM:
		return EX_EPERM;
	case EBUSY:
		return EX_EBUSY;
	case EPROTO:
		return EX_PROTO;
	default:
		return EX_LOCAL;
	}
}

/* One request, one reply: ctl_call_info(), and what cais-ctl reports of it. */
static int
call(struct cli *c, const char *cmd, json_t *args, json_t **result, struct reply *r)
{
	struct ctl_call_info info;
	struct ctl_err err;
	int rc = ctl_call_info(&c->addr, &c->key, cmd, args, c->timeout_ms, result, &err, &info);

	memset(r, 0, sizeof(*r));
	r->tries = info.tries;
	r->refused = info.refused;
	c->rtt_ms = info.rtt_ms;
	if (rc == 0)
		return 0;
	r->code = err.code;
	snprintf(r->code_name, sizeof(r->code_name), "%s",
		 info.code_name[0] ? info.code_name : ctl_errname(err.code));
	snprintf(r->msg, sizeof(r->msg), "%s", err.msg);
	return -1;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */

/* A table of ncol columns: cells are malloc'd strings, row-major, the first row the header. */
struct tbl {
	size_t ncol, n, cap;
	char **cells;
	bool left[32]; /* left-aligned columns (the others right-aligned) */
};

static void
tbl_init(struct tbl *b, size_t ncol)
{
	memset(b, 0, sizeof(*b));
	b->ncol = ncol;
}

static void tbl_add(struct tbl *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
tbl_add(struct tbl *b, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	if (b->n + 1 > b->cap) {
		b->cap = b->cap ? 2 * b->cap : 64;
		b->cells = realloc(b->cells, b->cap * sizeof(*b->cells));
		if (!b->cells) {
			fputs("cais-ctl: out of memory\n", stderr);
			exit(EX_LOCAL);
		}
	}
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	b->cells[b->n++] = s ? s : strdup("?");
}

static void
tbl_print(struct tbl *b, const char *indent)
{
	size_t ncol = b->ncol, nrow = b->n / ncol, w[32] = {0};

	for (size_t i = 0; i < nrow * ncol; i++) {
		size_t l = strlen(b->cells[i]);

		if (l > w[i % ncol])
			w[i % ncol] = l;
	}
	for (size_t r = 0; r < nrow; r++) {
		fputs(indent, stdout);
		for (size_t k = 0; k < ncol; k++) {
			const char *s = b->cells[r * ncol + k];
			bool last = k + 1 == ncol;

			if (b->left[k])
				printf("%-*s", last ? 0 : (int)w[k], s);
			else
				printf("%*s", (int)w[k], s);
			if (!last)
				fputs("  ", stdout);
		}
		fputc('\n', stdout);
	}
	for (size_t i = 0; i < b->n; i++)
		free(b->cells[i]);
	free(b->cells);
	b->cells = NULL;
	b->n = 0;
}

/* A scalar as text (strings bare). */
static char *
scalar_text(const json_t *v)
{
	char *s = NULL;

	if (json_is_string(v))
		return strdup(json_string_value(v));
	if (json_is_integer(v)) {
		if (asprintf(&s, "%" JSON_INTEGER_FORMAT, json_integer_value(v)) < 0)
			s = NULL;
	} else if (json_is_real(v)) {
		if (asprintf(&s, "%g", json_real_value(v)) < 0)
			s = NULL;
	} else if (json_is_true(v)) {
		s = strdup("true");
	} else if (json_is_false(v)) {
		s = strdup("false");
	} else if (json_is_null(v)) {
		s = strdup("-");
	} else {
		s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	}
	return s ? s : strdup("?");
}

static bool
is_scalar(const json_t *v)
{
	return !json_is_object(v) && !json_is_array(v);
}

/* An array of objects as a table; columns: first the preferred, then the rest. */
static void
print_object_table(const json_t *arr, const char *const *preferred, const char *indent)
{
	const char *cols[32];
	size_t ncol = 0, i;
	const char *k;
	json_t *o, *v;
	struct tbl b;

	for (const char *const *p = preferred; p && *p; p++)
		json_array_foreach (arr, i, o)
			if (json_object_get(o, *p)) {
				cols[ncol++] = *p;
				break;
			}
	json_array_foreach (arr, i, o) {
		json_object_foreach ((json_t *)o, k, v) {
			size_t c;

			for (c = 0; c < ncol; c++)
				if (strcmp(cols[c], k) == 0)
					break;
			if (c == ncol && ncol < 32)
				cols[ncol++] = k;
		}
	}
	if (ncol == 0)
		return;
	tbl_init(&b, ncol);
	for (size_t c = 0; c < ncol; c++) {
		tbl_add(&b, "%s", cols[c]);
		json_array_foreach (arr, i, o) {
			v = json_object_get(o, cols[c]);
			if (json_is_string(v) || json_is_object(v) || json_is_array(v))
				b.left[c] = true;
		}
	}
	json_array_foreach (arr, i, o)
		for (size_t c = 0; c < ncol; c++) {
			v = json_object_get(o, cols[c]);
			char *s = v ? scalar_text(v) : strdup("-");

			tbl_add(&b, "%s", s ? s : "?");
			free(s);
		}
	tbl_print(&b, indent);
}

static bool
all_objects(const json_t *arr)
{
	size_t i;
	json_t *v;

	json_array_foreach (arr, i, v)
		if (!json_is_object(v))
			return false;
	return json_array_size(arr) > 0;
}

/* key: value lines; nested objects indented; arrays of objects as tables. */
static void
print_tree(const json_t *o, int depth)
{
	const char *k;
	json_t *v;
	char indent[64];

	snprintf(indent, sizeof(indent), "%*s", 2 * depth + 2, "");
	json_object_foreach ((json_t *)o, k, v) {
		printf("%*s%s:", 2 * depth, "", k);
		if (is_scalar(v)) {
			char *s = scalar_text(v);

			printf(" %s\n", s);
			free(s);
		} else if (json_is_object(v)) {
			if (json_object_size(v) == 0) {
				printf(" {}\n");
			} else {
				fputc('\n', stdout);
				print_tree(v, depth + 1);
			}
		} else if (json_array_size(v) == 0) {
			printf(" (none)\n");
		} else if (all_objects(v)) {
			fputc('\n', stdout);
			print_object_table(v, NULL, indent);
		} else {
			size_t i;
			json_t *x;

			json_array_foreach (v, i, x) {
				char *s = scalar_text(x);

				printf("%s%s", i ? ", " : " ", s);
				free(s);
			}
			fputc('\n', stdout);
		}
	}
}

static void
show_generic(const struct cli *c, const json_t *res)
{
	(void)c;
	if (json_object_size(res) == 0)
		printf("ok\n");
	else
		print_tree(res, 0);
}

static void
show_ok(const struct cli *c, const json_t *res)
{
	show_generic(c, res);
}

static void
show_ping(const struct cli *c, const json_t *res)
{
	const char *k;
	json_t *v;
	int n = 0;

	printf("%s %s:", target_name(c->target), c->addr_text);
	json_object_foreach ((json_t *)res, k, v) {
		if (!is_scalar(v))
			continue;
		if (strcmp(k, "uptime_s") == 0 && json_is_number(v)) {
			printf("%s uptime %.1f s", n++ ? "," : "", json_number_value(v));
		} else {
			char *s = scalar_text(v);

			printf("%s %s %s", n++ ? "," : "", k, s);
			free(s);
		}
	}
	printf(" (reply in %.0f ms)\n", c->rtt_ms);
}

static json_int_t
geti(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* An integer member as text, "-" when absent. */
static char *
itext(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	return v ? scalar_text(v) : strdup("-");
}

/* "  title name n, name n" for the non-zero members; "none" when all are 0. */
static void
print_nonzero(const char *title, const json_t *o)
{
	const char *k;
	json_t *v;
	int n = 0;

	printf("%s", title);
	json_object_foreach ((json_t *)o, k, v) {
		if (!json_is_number(v) || json_number_value(v) == 0)
			continue;
		printf("%s%s %" JSON_INTEGER_FORMAT, n++ ? ", " : " ", k, json_integer_value(v));
	}
	printf("%s\n", n ? "" : " none");
}

static void
print_percentiles(const json_t *lat)
{
	if (!lat || geti(lat, "samples") == 0)
		return;
	printf(", completion p50 %.1f p90 %.1f p99 %.1f max %.1f us (%" JSON_INTEGER_FORMAT
	       " rounds)",
	       json_number_value(json_object_get(lat, "p50")),
	       json_number_value(json_object_get(lat, "p90")),
	       json_number_value(json_object_get(lat, "p99")),
	       json_number_value(json_object_get(lat, "max")), geti(lat, "samples"));
}

static void
lat_cell(struct tbl *b, const json_t *lat, const char *q)
{
	if (!lat || geti(lat, "samples") == 0 || !json_object_get(lat, q))
		tbl_add(b, "-");
	else
		tbl_add(b, "%.1f", json_number_value(json_object_get(lat, q)));
}

/* The stats.get object, testpmd-style (as the switch prints it, plus tables). */
static void
print_stats(const json_t *o, const char *title)
{
	static const char *const pcols[] = {"port",	 "name",       "RX-packets", "RX-bytes",
					    "RX-missed", "TX-packets", "TX-bytes",   "TX-dropped"};
	static const char *const pkeys[] = {"port",	 "name",       "rx_packets", "rx_bytes",
					    "rx_missed", "tx_packets", "tx_bytes",   "tx_dropped"};
	static const char *const scols[] = {
	    "tenant", "session", "n",	"slots", "elems", "prio",  "tensors", "DATA",  "rounds",
	    "retx",   "resends", "dup", "stale", "ovfl",  "p50us", "p90us",   "p99us", "maxus"};
	static const char *const skeys[] = {
	    "tenant",  "session", "n",	  "slots",   "elems_per_packet", "priority", NULL,
	    "data_rx", "rounds",  "retx", "resends", "duplicates",	 "stale",    "overflow"};
	const json_t *ports = json_object_get(o, "ports"),
		     *sessions = json_object_get(o, "sessions");
	const json_t *th = json_object_get(o, "thresholds"), *v;
	struct tbl b;
	size_t i;

	printf("  ---------- %s: uptime %.1f s, mode %s", title,
	       json_number_value(json_object_get(o, "uptime_s")),
	       json_string_value(json_object_get(o, "mode"))
		   ? json_string_value(json_object_get(o, "mode"))
		   : "?");
	if (json_object_get(o, "lease_left_ms"))
		printf(", lease %" JSON_INTEGER_FORMAT " ms left", geti(o, "lease_left_ms"));
	else
		printf(", no lease (static)");
	printf(" ----------\n");

	tbl_init(&b, 8);
	b.left[1] = true;
	for (size_t k = 0; k < 8; k++)
		tbl_add(&b, "%s", pcols[k]);
	json_array_foreach (ports, i, v)
		for (size_t k = 0; k < 8; k++) {
			char *s = itext(v, pkeys[k]);

			tbl_add(&b, "%s", s);
			free(s);
		}
	tbl_print(&b, "  ");

	printf("  CAIS: DATA %" JSON_INTEGER_FORMAT ", rounds %" JSON_INTEGER_FORMAT
	       ", retransmissions %" JSON_INTEGER_FORMAT ", resends %" JSON_INTEGER_FORMAT
	       ", duplicates %" JSON_INTEGER_FORMAT ", stale %" JSON_INTEGER_FORMAT,
	       geti(o, "data_rx"), geti(o, "rounds"), geti(o, "retransmissions"),
	       geti(o, "resends"), geti(o, "duplicates"), geti(o, "stale"));
	print_percentiles(json_object_get(o, "completion_us"));
	printf("\n  L2: forwarded %" JSON_INTEGER_FORMAT ", flooded %" JSON_INTEGER_FORMAT
	       ", ARP replies %" JSON_INTEGER_FORMAT ", MACs %" JSON_INTEGER_FORMAT
	       ", handoffs %" JSON_INTEGER_FORMAT "\n",
	       geti(o, "l2_forwarded"), geti(o, "l2_flooded"), geti(o, "arp_replies"),
	       geti(o, "macs"), geti(o, "handoffs"));
	printf("  slots %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT
	       " (%.2f%%), queue depth %" JSON_INTEGER_FORMAT,
	       geti(o, "slots_used"), geti(o, "slot_capacity"),
	       100.0 * json_number_value(json_object_get(o, "slot_usage")), geti(o, "queue_depth"));
	if (th)
		printf("; thresholds: queue depth %" JSON_INTEGER_FORMAT ", slot usage %.3g",
		       geti(th, "queue_depth"),
		       json_number_value(json_object_get(th, "slot_usage")));
	printf("\n");
	print_nonzero("  REJECTs sent:", json_object_get(o, "rejects"));
	print_nonzero("  drops:", json_object_get(o, "drops"));

	printf("  sessions: %zu\n", json_array_size(sessions));
	if (json_array_size(sessions) == 0)
		return;
	tbl_init(&b, 18);
	for (size_t k = 0; k < 18; k++)
		tbl_add(&b, "%s", scols[k]);
	json_array_foreach (sessions, i, v) {
		const json_t *lat = json_object_get(v, "completion_us");

		for (size_t k = 0; k < 14; k++) {
			char *s;

			if (!skeys[k]) {
				tbl_add(&b, "%zu", json_array_size(json_object_get(v, "tensors")));
				continue;
			}
			s = itext(v, skeys[k]);
			tbl_add(&b, "%s", s);
			free(s);
		}
		lat_cell(&b, lat, "p50");
		lat_cell(&b, lat, "p90");
		lat_cell(&b, lat, "p99");
		lat_cell(&b, lat, "max");
	}
	tbl_print(&b, "  ");
	/* per session: tensors, REJECTs and the rarer counters, when there are any */
	json_array_foreach (sessions, i, v) {
		static const char *const rare[] = {"inconsistent", "slot_mismatch", "abandoned"};
		const json_t *tensors = json_object_get(v, "tensors"), *t;
		const char *k;
		json_t *x;
		size_t j;
		int n = 0;

		if (json_array_size(tensors)) {
			printf("  %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT " tensors:",
			       geti(v, "tenant"), geti(v, "session"));
			json_array_foreach (tensors, j, t)
				printf("%s %" JSON_INTEGER_FORMAT " (%s, scale %g)", j ? "," : "",
				       geti(t, "tensor"),
				       json_string_value(json_object_get(t, "op"))
					   ? json_string_value(json_object_get(t, "op"))
					   : "?",
				       json_number_value(json_object_get(t, "scale")));
			printf("\n");
		}
		json_object_foreach ((json_t *)json_object_get(v, "rejects"), k, x)
			if (json_integer_value(x)) {
				if (!n++)
					printf("  %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT
					       " REJECTs:",
					       geti(v, "tenant"), geti(v, "session"));
				printf("%s %s %" JSON_INTEGER_FORMAT, n > 1 ? "," : "", k,
				       json_integer_value(x));
			}
		if (n)
			printf("\n");
		n = 0;
		for (j = 0; j < 3; j++)
			if (geti(v, rare[j])) {
				if (!n++)
					printf("  %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT
					       ":",
					       geti(v, "tenant"), geti(v, "session"));
				printf("%s %s %" JSON_INTEGER_FORMAT, n > 1 ? "," : "", rare[j],
				       geti(v, rare[j]));
			}
		if (n)
			printf("\n");
	}
}

static void
show_stats(const struct cli *c, const json_t *res)
{
	char title[128];

	snprintf(title, sizeof(title), "%s %s", target_name(c->target), c->addr_text);
	print_stats(res, title);
}

static bool
looks_like_stats(const json_t *o)
{
	return json_is_object(o) && json_is_array(json_object_get(o, "ports")) &&
	       json_object_get(o, "drops");
}

/* switch.status: the scalars, then a stats table where the counters look like stats.get's. */
static void
show_switch_status(const struct cli *c, const json_t *res)
{
	const char *k;
	json_t *v, *rest = json_object();

	(void)c;
	if (looks_like_stats(res)) {
		print_stats(res, "switch (as the manager last polled it)");
		json_decref(rest);
		return;
	}
	json_object_foreach ((json_t *)res, k, v)
		if (!looks_like_stats(v))
			json_object_set(rest, k, v);
	if (json_object_size(rest))
		print_tree(rest, 0);
	json_object_foreach ((json_t *)res, k, v)
		if (looks_like_stats(v)) {
			char title[96];

			snprintf(title, sizeof(title), "%s (as the manager last polled it)", k);
			print_stats(v, title);
		}
	json_decref(rest);
}

static void
show_jobs(const struct cli *c, const json_t *res)
{
	static const char *const cols[] = {"job",    "tenant", "session", "world",
					   "joined", "state",  NULL};
	const json_t *jobs = json_object_get(res, "jobs");
	json_t *rest;

	(void)c;
	if (!json_is_array(jobs)) {
		show_generic(c, res);
		return;
	}
	if (json_array_size(jobs) == 0)
		printf("no jobs\n");
	else
		print_object_table(jobs, cols, "");
	rest = json_deep_copy(res);
	json_object_del(rest, "jobs");
	if (json_object_size(rest))
		print_tree(rest, 0);
	json_decref(rest);
}

/* ------------------------------------------------------------------------ */

static void
print_error(const struct cli *c, const char *cmd, const struct reply *r)
{
	bool keyed = c->key.len > 0;

	if (r->code == ETIMEDOUT) {
		fprintf(stderr, "cais-ctl: %s: no reply from %s at %s within %d ms", cmd,
			target_name(c->target), c->addr_text, c->timeout_ms);
		if (r->refused)
			fprintf(stderr, " (port unreachable: nothing listens there)");
		if (c->target == TG_SWITCH)
			fprintf(stderr, "\n  is cais-switch running, and is its --ctl this address "
					"and port? (--switch ADDR:PORT)\n");
		else
			fprintf(stderr,
				"\n  is cais-manager running, listening on this address and "
				"port? (--manager ADDR:PORT)\n");
		return;
	}
	if (!r->code_name[0]) {
		fprintf(stderr, "cais-ctl: %s: %s\n", cmd, r->msg);
		return;
	}
	fprintf(stderr, "cais-ctl: %s: %s: %s\n", cmd, r->code_name, r->msg);
	if (r->code == EPERM && strstr(r->msg, "MAC")) {
		if (keyed)
			fprintf(stderr,
				"  the MAC does not verify: is --key %s the file %s was given "
				"(%s)?\n",
				c->key_file, target_name(c->target),
				c->target == TG_SWITCH ? "--ctl-key" : "--key");
		else
			fprintf(stderr, "  %s requires a key: give --key FILE\n",
				target_name(c->target));
	} else if (r->code == EPERM && strstr(r->msg, "clock")) {
		fprintf(stderr, "  this host's clock and %s's differ by more than 30 s\n",
			target_name(c->target));
	} else if (r->code == EINVAL && keyed && strstr(r->msg, "not JSON")) {
		fprintf(stderr, "  %s may have no key: try without --key\n",
			target_name(c->target));
	}
}

static const struct option long_opts[] = {
    {"switch", required_argument, NULL, 's'},
    {"manager", required_argument, NULL, 'm'},
    {"key", required_argument, NULL, 'k'},
    {"json", no_argument, NULL, 'j'},
    {"timeout-ms", required_argument, NULL, 't'},
    {"args-json", required_argument, NULL, 'a'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

int
main(int argc, char **argv)
{
	struct cli c = {.target = TG_SWITCH, .timeout_ms = DEFAULT_TIMEOUT_MS};
	const char *switch_addr = NULL, *manager_addr = NULL, *args_json = NULL, *name;
	const struct command *cmd = NULL;
	bool help = false, raw = false;
	json_t *args = NULL, *result = NULL;
	struct reply r;
	char addr_buf[64];
	int opt, rc;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":s:m:k:jt:a:hV", long_opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			switch_addr = optarg;
			break;
		case 'm':
			manager_addr = optarg;
			break;
		case 'k':
			c.key_file = optarg;
			break;
		case 'j':
			c.json = true;
			break;
		case 't': {
			long long x;

			if (!parse_ll(optarg, &x) || x < 1 || x > 3600000)
				usage_error(
				    "--timeout-ms: '%s' is not a number of ms in [1, 3600000]",
				    optarg);
			c.timeout_ms = (int)x;
			break;
		}
		case 'a':
			args_json = optarg;
			break;
		case 'h':
			help = true;
			break;
		case 'V':
			printf("cais-ctl %s\n", CAIS_VERSION_STRING);
			return EX_OK;
		case ':':
			usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (switch_addr && manager_addr)
		usage_error("--switch and --manager: give one target");
	if (manager_addr)
		c.target = TG_MANAGER;
	c.target_given = switch_addr || manager_addr;

	if (optind >= argc) {
		if (help) {
			print_help(stdout);
			return EX_OK;
		}
		usage_error("no command given");
	}
	name = argv[optind++];
	if (strcmp(name, "help") == 0) {
		if (optind >= argc) {
			print_help(stdout);
			return EX_OK;
		}
		name = argv[optind++];
		help = true;
	}
	raw = strcmp(name, "raw") == 0;
	if (raw && help) {
		printf("Usage: cais-ctl [--switch ADDR:PORT | --manager ADDR:PORT] raw CMD "
		       "['{JSON args}' | @FILE.json]\n\n"
		       "Send any command with its arguments as given (nothing checked here) and\n"
		       "print the result as JSON. Example:\n"
		       "  cais-ctl raw tensor.add '{\"tenant\": 1, \"session\": 1, \"tensor\": 7, "
		       "\"op\": \"sum\", \"scale\": 1024}'\n");
		return EX_OK;
	}
	if (!raw) {
		cmd = find_command(name, c.target);
		if (!cmd && !c.target_given && find_command(name, TG_MANAGER)) {
			c.target = TG_MANAGER; /* a manager-only command */
			cmd = find_command(name, TG_MANAGER);
		}
		if (!cmd) {
			const struct command *other =
			    find_command(name, c.target == TG_SWITCH ? TG_MANAGER : TG_SWITCH);

			if (other)
				usage_error("'%s' is a %s command, not a %s one (raw %s sends it "
					    "anyway)",
					    name, target_name(other->target), target_name(c.target),
					    name);
			usage_error("unknown command '%s'", name);
		}
		if (help) {
			print_command_help(stdout, cmd);
			return EX_OK;
		}
	} else {
		if (optind >= argc)
			usage_error("raw: give the command name: raw CMD ['{JSON args}']");
		name = argv[optind++];
		if (optind < argc) {
			const char *a = argv[optind++];

			args = a[0] == '@' ? load_json_object("arguments file", a + 1, true)
					   : load_json_object("raw arguments", a, false);
		}
		if (optind < argc)
			usage_error("raw: unexpected '%s' after the JSON arguments", argv[optind]);
		if (args_json) {
			if (!args)
				args = json_object();
			merge(args, load_json_object("--args-json", args_json, false));
		}
	}

	if (c.target == TG_SWITCH)
		c.addr_text = switch_addr ? switch_addr : "127.0.0.1";
	else
		c.addr_text = manager_addr ? manager_addr : "127.0.0.1";
	if (cmn_parse_addr(c.addr_text, c.target == TG_SWITCH ? CAIS_CTL_PORT : CAIS_MGR_PORT,
			   &c.addr) != 0)
		usage_error("--%s: '%s' is not A.B.C.D[:PORT]",
			    c.target == TG_SWITCH ? "switch" : "manager", c.addr_text);
	inet_ntop(AF_INET, &c.addr.sin_addr, addr_buf, sizeof(addr_buf));
	snprintf(addr_buf + strlen(addr_buf), sizeof(addr_buf) - strlen(addr_buf), ":%u",
		 ntohs(c.addr.sin_port));
	c.addr_text = addr_buf;

	if (c.key_file) {
		rc = ctl_key_load(c.key_file, &c.key);
		if (rc == -EINVAL)
			usage_error(
			    "--key %s: the file is empty or larger than %u bytes (a key file "
			    "holds the key's raw bytes)",
			    c.key_file, CTL_MAX_KEY);
		if (rc)
			usage_error("--key %s: cannot read it: %s", c.key_file, strerror(-rc));
	}
	if (!raw)
		args = build_args(cmd, argc - optind, argv + optind, args_json);

	if (call(&c, name, args, &result, &r) != 0) {
		print_error(&c, name, &r);
		json_decref(args);
		return exit_for(r.code);
	}
	if (c.json || raw) {
		char *s =
		    json_dumps(result, JSON_INDENT(2) | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));

		printf("%s\n", s ? s : "null");
		free(s);
	} else {
		cmd->show(&c, result);
	}
	json_decref(result);
	json_decref(args);
	return EX_OK;
}
