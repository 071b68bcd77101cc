/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-ctl's commands: for each, its target, its fields (what the
 * KEY=VALUE words may say, with their ranges) and its help; and the help
 * texts made from them.
 */
#include <limits.h>
#include <string.h>

#include <cais/proto.h>

#include "ctl_cli.h"
#include "ctl_client.h"

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
    {"ping", TG_SWITCH, "mode, uptime, version", NULL, "cais-ctl ping", cli_show_ping, {{0}}},
    {"session.add",
     TG_SWITCH,
     "install a session and grant its slot pool",
     "n defaults to the number of member= words; each rank 0..n-1 once.\n"
     "ENOSPC when the pool would pass the slot-usage threshold, EEXIST when the\n"
     "session exists.",
     "cais-ctl session.add tenant=1 session=1 slots=64 elems_per_packet=2048 \\\n"
     "      member=0,02:ca:15:01:00:01,198.18.1.1,47000 "
     "member=1,02:ca:15:01:00:02,198.18.1.2,47000",
     cli_show_generic,
     {U16("tenant", "tenant id (0..65535)"),
      U16("session", "session id within the tenant (0..65535)"),
      {"n", NULL, FT_INT, 0, 1, 255, 0, 0, NULL, "world size (1..255; default: member count)"},
      {"slots", NULL, FT_INT, F_REQ | F_POW2, 1, 32768, 0, 0, NULL,
       "slot pool size (power of two, 1..32768)"},
      {"elems_per_packet", NULL, FT_INT, F_REQ, 1, 2048, 0, 0, NULL,
       "elements per packet (1..2048)"},
      {"priority", NULL, FT_INT, 0, 0, 1, 0, 0, NULL, "0 normal (default), 1 high"},
      {"loss_hints", NULL, FT_INT, 0, 0, 1, 0, 0, NULL,
       "1: WAIT and NACK to the members (PROTOCOL.md E11), 0 not (default)"},
      {"member", "members", FT_MEMBER, F_REQ, 0, 0, 0, 0, NULL,
       "one per rank: RANK,MAC,IP,PORT (the rank's MAC, IPv4 address, UDP port)"}}},
    {"session.del",
     TG_SWITCH,
     "remove a session, its tensors, and free its slots",
     NULL,
     "cais-ctl session.del tenant=1 session=1",
     cli_show_generic,
     {U16("tenant", "tenant id"), U16("session", "session id")}},
    {"tensor.add",
     TG_SWITCH,
     "install a tensor entry",
     "ENOENT when the session does not exist, EEXIST when the tensor does.",
     "cais-ctl tensor.add tenant=1 session=1 tensor=7 op=sum scale=1024",
     cli_show_generic,
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
     cli_show_generic,
     {U16("tenant", "tenant id"), U16("session", "session id"), U32("tensor", "tensor id")}},
    {"lease",
     TG_SWITCH,
     "grant the control session's lease",
     "When it runs out the switch goes to forward-only mode until the next lease\n"
     "or mode.set.",
     "cais-ctl lease ttl_ms=5000",
     cli_show_generic,
     {{"ttl_ms", NULL, FT_INT, F_REQ, 1, 86400000, 0, 0, NULL, "lease length (1..86400000 ms)"}}},
    {"mode.set",
     TG_SWITCH,
     "compute, or forward-only (no aggregation, DATA gets REJECT fwd_only)",
     NULL,
     "cais-ctl mode.set mode=forward_only",
     cli_show_generic,
     {{"mode", NULL, FT_ENUM, F_REQ, 0, 0, 0, 0, "compute|forward_only", "the switch's mode"}}},
    {"thresholds.set",
     TG_SWITCH,
     "set the admission thresholds (either or both)",
     NULL,
     "cais-ctl thresholds.set queue_depth=512 slot_usage=0.9",
     cli_show_generic,
     {{"queue_depth", NULL, FT_INT, 0, 0, 4294967295LL, 0, 0, NULL,
       "queue depth (packets) above which RESULTs carry CONGESTED"},
      {"slot_usage", NULL, FT_NUM, 0, 0, 0, 0.0, 1.0, NULL,
       "share of the slot capacity (0..1) session.add may use"}}},
    {"stats.get",
     TG_SWITCH,
     "counters: ports, drops, REJECTs, sessions (a table; --json: the object)",
     NULL,
     "cais-ctl stats.get",
     cli_show_stats,
     {{0}},
     "sessions"},
    /* the manager (section E3) */
    {"ping",
     TG_MANAGER,
     "version, uptime, jobs",
     NULL,
     "cais-ctl --manager 127.0.0.1 ping",
     cli_show_ping,
     {{0}}},
    {"job.register",
     TG_MANAGER,
     "register a job (the same answer to every rank that registers it alike)",
     "slots, elems_per_packet and priority default to the manager's settings.",
     "cais-ctl job.register job=llama tenant=lab world=4 slots=64 elems_per_packet=2048",
     cli_show_generic,
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
     cli_show_generic,
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
     cli_show_generic,
     {JOB}},
    {"tensor.register",
     TG_MANAGER,
     "register a tensor of a job",
     NULL,
     "cais-ctl tensor.register job=llama tensor=7 op=sum",
     cli_show_generic,
     {JOB, U32("tensor", "tensor id (0..4294967295)"), OP}},
    {"step.begin",
     TG_MANAGER,
     "begin a step: the tensors to offload and their scales",
     NULL,
     "cais-ctl step.begin job=llama rank=0 step=12",
     cli_show_generic,
     {JOB, RANK, {"step", NULL, FT_INT, F_REQ, 0, LLONG_MAX, 0, 0, NULL, "step number (>= 0)"}}},
    {"stats.report",
     TG_MANAGER,
     "report a rank's statistics of a step",
     NULL,
     "cais-ctl stats.report job=llama rank=0 step=12 tensor=7,3.5 collectives=40 fallbacks=0",
     cli_show_generic,
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
     cli_show_generic,
     {JOB}},
    {"jobs.list",
     TG_MANAGER,
     "every job (a table)",
     NULL,
     "cais-ctl jobs.list",
     cli_show_jobs,
     {{0}},
     "jobs"},
    {"switch.status",
     TG_MANAGER,
     "the switch's last polled counters, lease state",
     NULL,
     "cais-ctl switch.status",
     cli_show_switch_status,
     {{0}}},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

const struct command *
cli_find_command(const char *name, enum target t)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0 && (commands[i].target & t))
			return &commands[i];
	return NULL;
}

const char *
cli_field_key(const struct field *f)
{
	return f->key ? f->key : f->word;
}

const char *
cli_type_text(const struct field *f)
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

bool
cli_repeated(const struct field *f)
{
	return f->type == FT_MEMBER || f->type == FT_MAXABS;
}

/* "tenant=N session=N [priority=N] member=RANK,MAC,IP,PORT..." */
static void
print_synopsis(FILE *out, const struct command *cmd)
{
	fprintf(out, "%s", cmd->name);
	for (const struct field *f = cmd->f; f->word; f++)
		fprintf(out, " %s%s=%s%s%s", f->flags & F_REQ ? "" : "[", f->word, cli_type_text(f),
			cli_repeated(f) ? "..." : "", f->flags & F_REQ ? "" : "]");
}

void
cli_print_help(FILE *out)
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
		CAIS_CTL_PORT, CAIS_MGR_PORT, CLI_DEFAULT_TIMEOUT_MS, CTL_RETRY_MS);
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

void
cli_print_command_help(FILE *out, const struct command *cmd)
{
	const struct command *other = NULL;

	for (size_t i = 0; i < N_COMMANDS; i++)
		if (&commands[i] != cmd && strcmp(commands[i].name, cmd->name) == 0)
			other = &commands[i];
	fprintf(out, "Usage: cais-ctl%s ",
		cmd->target == TG_MANAGER ? " [--manager ADDR:PORT]" : "");
	print_synopsis(out, cmd);
	fprintf(out, "\n\n%s: %s.\n", cli_target_name(cmd->target), cmd->summary);
	if (cmd->details)
		fprintf(out, "%s\n", cmd->details);
	if (cmd->f[0].word) {
		fprintf(out, "\nArguments:\n");
		for (const struct field *f = cmd->f; f->word; f++) {
			char lhs[64];

			snprintf(lhs, sizeof(lhs), "%s=%s", f->word, cli_type_text(f));
			fprintf(out, "  %-28s %s%s\n", lhs, f->help,
				(f->flags & F_REQ)
				    ? (cli_repeated(f) ? " (repeated)" : "")
				    : (cli_repeated(f) ? " (optional, repeated)" : " (optional)"));
		}
	} else {
		fprintf(out, "\nNo arguments.\n");
	}
	fprintf(out, "\nExample:\n  %s\n", cmd->example);
	if (other)
		fprintf(out, "\n(%s also has '%s': cais-ctl%s help %s)\n",
			cli_target_name(other->target), other->name,
			other->target == TG_MANAGER ? " --manager 127.0.0.1"
						    : " --switch 127.0.0.1",
			other->name);
}

void
cli_print_raw_help(FILE *out)
{
	fprintf(out, "Usage: cais-ctl [--switch ADDR:PORT | --manager ADDR:PORT] raw CMD "
		     "['{JSON args}' | @FILE.json]\n\n"
		     "Send any command with its arguments as given (nothing checked here) and\n"
		     "print the result as JSON. Example:\n"
		     "  cais-ctl raw tensor.add '{\"tenant\": 1, \"session\": 1, \"tensor\": 7, "
		     "\"op\": \"sum\", \"scale\": 1024}'\n");
}
