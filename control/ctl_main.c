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
 *
 * This file: the options, the target, the call and the exit status; the
 * commands, their words and the output are in ctl_cli_*.c (ctl_cli.h).
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <cais/proto.h>

#include "cmn_addr.h"
#include "ctl_cli.h"
#include "ctl_client.h"

#ifndef CAIS_VERSION_STRING
#define CAIS_VERSION_STRING "?"
#endif

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

/* An option: its names, and what its value sets in struct cli (at off). */
struct cli_option {
	const char *name;
	int short_name;
	int has_arg;
	void (*parse)(struct cli *c, size_t off, const char *arg);
	size_t off;
};

static void
set_string(struct cli *c, size_t off, const char *arg)
{
	*(const char **)((char *)c + off) = arg;
}

static void
set_flag(struct cli *c, size_t off, const char *arg)
{
	(void)arg;
	*(bool *)((char *)c + off) = true;
}

static void
set_timeout(struct cli *c, size_t off, const char *arg)
{
	long long x;

	if (!cli_parse_ll(arg, &x) || x < 1 || x > 3600000)
		cli_usage_error("--timeout-ms: '%s' is not a number of ms in [1, 3600000]", arg);
	*(int *)((char *)c + off) = (int)x;
}

static void
print_version(struct cli *c, size_t off, const char *arg)
{
	(void)c;
	(void)off;
	(void)arg;
	printf("cais-ctl %s\n", CAIS_VERSION_STRING);
	exit(EX_OK);
}

#define CLI_OPT(name, short_name, has_arg, parse, member)                                          \
	{                                                                                          \
		name, short_name, has_arg, parse, offsetof(struct cli, member)                     \
	}

static const struct cli_option options[] = {
    CLI_OPT("switch", 's', required_argument, set_string, switch_addr),
    CLI_OPT("manager", 'm', required_argument, set_string, manager_addr),
    CLI_OPT("key", 'k', required_argument, set_string, key_file),
    CLI_OPT("json", 'j', no_argument, set_flag, json),
    CLI_OPT("timeout-ms", 't', required_argument, set_timeout, timeout_ms),
    CLI_OPT("args-json", 'a', required_argument, set_string, args_json),
    CLI_OPT("help", 'h', no_argument, set_flag, help),
    {"version", 'V', no_argument, print_version, 0},
};

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

/*
 * The options, anywhere on the line (getopt_long permutes). The short
 * options string is made from the table: ':' first, so that a missing value
 * is told apart from an unknown option, then each letter, with ':' when it
 * takes a value ("s:m:k:jt:a:hV").
 */
static void
parse_options(int argc, char **argv, struct cli *c)
{
	struct option longs[N_OPTIONS + 1] = {{0}};
	char shorts[2 * N_OPTIONS + 2] = ":", *p = shorts + 1;
	int opt;

	for (size_t i = 0; i < N_OPTIONS; i++) {
		longs[i] = (struct option){options[i].name, options[i].has_arg, NULL,
					   options[i].short_name};
		*p++ = (char)options[i].short_name;
		if (options[i].has_arg == required_argument)
			*p++ = ':';
	}
	opterr = 0;
	while ((opt = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		size_t i;

		if (opt == ':')
			cli_usage_error("option '%s' needs a value", argv[optind - 1]);
		for (i = 0; i < N_OPTIONS && options[i].short_name != opt; i++)
			;
		if (i == N_OPTIONS)
			cli_usage_error("unknown option '%s'", argv[optind - 1]);
		options[i].parse(c, options[i].off, optarg);
	}
	if (c->switch_addr && c->manager_addr)
		cli_usage_error("--switch and --manager: give one target");
	c->target = c->manager_addr ? TG_MANAGER : TG_SWITCH;
	c->target_given = c->switch_addr || c->manager_addr;
}

/* ------------------------------------------------------------------------ */
/* The command                                                               */

/* What is sent. */
struct request {
	const char *name;	   /* the command */
	const struct command *cmd; /* its entry; NULL with raw */
	bool raw;		   /* raw CMD [JSON]: sent as given, printed as JSON */
	json_t *args;
};

static void help_exit(const struct command *cmd, bool raw) __attribute__((noreturn));

static void
help_exit(const struct command *cmd, bool raw)
{
	if (raw)
		cli_print_raw_help(stdout);
	else if (cmd)
		cli_print_command_help(stdout, cmd);
	else
		cli_print_help(stdout);
	exit(EX_OK);
}

/* The command of that name for the target; a manager-only one moves an unset target. */
static const struct command *
pick_command(struct cli *c, const char *name)
{
	const struct command *cmd = cli_find_command(name, c->target), *other;

	if (!cmd && !c->target_given && (cmd = cli_find_command(name, TG_MANAGER)))
		c->target = TG_MANAGER;
	if (cmd)
		return cmd;
	other = cli_find_command(name, c->target == TG_SWITCH ? TG_MANAGER : TG_SWITCH);
	if (other)
		cli_usage_error("'%s' is a %s command, not a %s one (raw %s sends it anyway)", name,
				cli_target_name(other->target), cli_target_name(c->target), name);
	cli_usage_error("unknown command '%s'", name);
}

/* raw CMD ['{JSON}' | @FILE], with --args-json on top. */
static void
read_raw(int argc, char **argv, const struct cli *c, struct request *rq)
{
	if (optind >= argc)
		cli_usage_error("raw: give the command name: raw CMD ['{JSON args}']");
	rq->name = argv[optind++];
	if (optind < argc) {
		const char *a = argv[optind++];

		rq->args = a[0] == '@' ? cli_load_json_object("arguments file", a + 1, true)
				       : cli_load_json_object("raw arguments", a, false);
	}
	if (optind < argc)
		cli_usage_error("raw: unexpected '%s' after the JSON arguments", argv[optind]);
	if (c->args_json) {
		if (!rq->args)
			rq->args = json_object();
		cli_merge(rq->args, cli_load_json_object("--args-json", c->args_json, false));
	}
}

/* The command word: `help [COMMAND]` and --help print and exit; raw reads its JSON. */
static void
read_command(int argc, char **argv, struct cli *c, struct request *rq)
{
	bool help = c->help;

	if (optind >= argc) {
		if (help)
			help_exit(NULL, false);
		cli_usage_error("no command given");
	}
	rq->name = argv[optind++];
	if (strcmp(rq->name, "help") == 0) {
		if (optind >= argc)
			help_exit(NULL, false);
		rq->name = argv[optind++];
		help = true;
	}
	rq->raw = strcmp(rq->name, "raw") == 0;
	if (rq->raw) {
		if (help)
			help_exit(NULL, true);
		read_raw(argc, argv, c, rq);
		return;
	}
	rq->cmd = pick_command(c, rq->name);
	if (help)
		help_exit(rq->cmd, false);
}

/* The target's address (127.0.0.1 and its port by default), as "A.B.C.D:port" too. */
static void
set_address(struct cli *c)
{
	bool sw = c->target == TG_SWITCH;
	const char *given = sw ? c->switch_addr : c->manager_addr;
	const char *text = given ? given : "127.0.0.1";
	size_t l;

	if (cmn_parse_addr(text, sw ? CAIS_CTL_PORT : CAIS_MGR_PORT, &c->addr) != 0)
		cli_usage_error("--%s: '%s' is not A.B.C.D[:PORT]", sw ? "switch" : "manager",
				text);
	inet_ntop(AF_INET, &c->addr.sin_addr, c->addr_buf, sizeof(c->addr_buf));
	l = strlen(c->addr_buf);
	snprintf(c->addr_buf + l, sizeof(c->addr_buf) - l, ":%u", ntohs(c->addr.sin_port));
	c->addr_text = c->addr_buf;
}

static void
load_key(struct cli *c)
{
	int rc = ctl_key_load(c->key_file, &c->key);

	if (rc == -EINVAL)
		cli_usage_error("--key %s: the file is empty or larger than %u bytes (a key file "
				"holds the key's raw bytes)",
				c->key_file, CTL_MAX_KEY);
	if (rc)
		cli_usage_error("--key %s: cannot read it: %s", c->key_file, strerror(-rc));
}

/* ------------------------------------------------------------------------ */
/* One request, one reply                                                    */

struct reply {
	int code;	    /* 0, or the errno value of the error (EPROTO: unknown) */
	char code_name[32]; /* as the reply said */
	char msg[512];
	bool refused; /* ICMP port unreachable seen */
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

/*
 * One request, one reply: ctl_call_info(), and what cais-ctl reports of it;
 * a paged list (pages: its field) is followed to its end.
 */
static int
call(struct cli *c, const char *cmd, const char *pages, json_t *args, json_t **result,
     struct reply *r)
{
	struct ctl_call_info info;
	struct ctl_err err;
	int rc = pages ? ctl_call_pages_info(&c->addr, &c->key, cmd, args, pages, c->timeout_ms,
					     result, &err, &info)
		       : ctl_call_info(&c->addr, &c->key, cmd, args, c->timeout_ms, result, &err,
				       &info);

	memset(r, 0, sizeof(*r));
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

/* What an authentication error most likely means. */
static void
print_hint(const struct cli *c, const struct reply *r)
{
	bool keyed = c->key.len > 0;

	if (r->code == EPERM && strstr(r->msg, "MAC")) {
		if (keyed)
			fprintf(stderr,
				"  the MAC does not verify: is --key %s the file %s was given "
				"(%s)?\n",
				c->key_file, cli_target_name(c->target),
				c->target == TG_SWITCH ? "--ctl-key" : "--key");
		else
			fprintf(stderr, "  %s requires a key: give --key FILE\n",
				cli_target_name(c->target));
	} else if (r->code == EPERM && strstr(r->msg, "clock")) {
		fprintf(stderr, "  this host's clock and %s's differ by more than 30 s\n",
			cli_target_name(c->target));
	} else if (r->code == EINVAL && keyed && strstr(r->msg, "not JSON")) {
		fprintf(stderr, "  %s may have no key: try without --key\n",
			cli_target_name(c->target));
	}
}

static void
print_error(const struct cli *c, const char *cmd, const struct reply *r)
{
	if (r->code == ETIMEDOUT) {
		fprintf(stderr, "cais-ctl: %s: no reply from %s at %s within %d ms", cmd,
			cli_target_name(c->target), c->addr_text, c->timeout_ms);
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
	print_hint(c, r);
}

/* Send the request; print the result (or the error). @return the exit status */
static int
send_request(struct cli *c, struct request *rq)
{
	json_t *result = NULL;
	struct reply r;

	/* raw requests go as given: "after" is the caller's */
	if (call(c, rq->name, rq->raw ? NULL : rq->cmd->pages, rq->args, &result, &r) != 0) {
		print_error(c, rq->name, &r);
		json_decref(rq->args);
		return exit_for(r.code);
	}
	if (c->json || rq->raw) {
		char *s =
		    json_dumps(result, JSON_INDENT(2) | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));

		printf("%s\n", s ? s : "null");
		free(s);
	} else {
		rq->cmd->show(c, result);
	}
	json_decref(result);
	json_decref(rq->args);
	return EX_OK;
}

int
main(int argc, char **argv)
{
	struct cli c = {.timeout_ms = CLI_DEFAULT_TIMEOUT_MS};
	struct request rq = {0};

	parse_options(argc, argv, &c);
	read_command(argc, argv, &c, &rq);
	set_address(&c);
	if (c.key_file)
		load_key(&c);
	if (!rq.raw)
		rq.args = cli_build_args(rq.cmd, argc - optind, argv + optind, c.args_json);
	return send_request(&c, &rq);
}
