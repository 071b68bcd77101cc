/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * cais-ctl's parts, for its own files only, each calling only those below
 * it: the options, the call and the exit status (ctl_main.c); KEY=VALUE
 * words into a request's arguments (ctl_cli_args.c); the commands and
 * their fields with the help texts (ctl_cli_cmds.c); the reply's result as
 * text (ctl_cli_show.c, named by the commands).
 *
 * Anything wrong on the command line is a usage error (cli_usage_error():
 * a message, exit status 2): nothing is sent then.
 */
#ifndef CTL_CLI_H
#define CTL_CLI_H

#include <stdbool.h>
#include <stdio.h>
#include <netinet/in.h>

#include <jansson.h>

#include "ctl_auth.h"

#define CLI_DEFAULT_TIMEOUT_MS 2000

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

/* "cais-switch", "cais-manager" */
static inline const char *
cli_target_name(enum target t)
{
	return t == TG_MANAGER ? "cais-manager" : "cais-switch";
}

/* State of one invocation: what the options set, then the target and its key. */
struct cli {
	const char *switch_addr, *manager_addr; /* --switch, --manager */
	const char *key_file;			/* --key */
	const char *args_json;			/* --args-json */
	bool json;				/* --json */
	bool help;				/* --help */
	int timeout_ms;				/* --timeout-ms */
	enum target target;
	bool target_given;
	const char *addr_text; /* "A.B.C.D:port" of addr */
	char addr_buf[64];
	struct sockaddr_in addr;
	struct ctl_key key;
	double rtt_ms; /* of the call */
};

/* Commands and their fields */

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

/* How a command's result is printed (without --json). */
typedef void (*show_fn)(const struct cli *c, const json_t *res);

#define MAX_FIELDS 10

struct command {
	const char *name;
	enum target target;
	const char *summary;
	const char *details; /* NULL or more lines for `help COMMAND` */
	const char *example;
	show_fn show;
	struct field f[MAX_FIELDS]; /* ended by one without a word */
	const char *pages;	    /* a paged list reply: the list's field (ctl_call_pages()) */
};

/* ctl_cli_cmds.c */

/* The command of that name for target t (either target when t has both bits), or NULL. */
const struct command *cli_find_command(const char *name, enum target t);
/* The JSON member a field sets. */
const char *cli_field_key(const struct field *f);
/* What a field's value looks like in help: "N", "NAME", "RANK,MAC,IP,PORT"... */
const char *cli_type_text(const struct field *f);
/* A field given once per element of a list (member=, tensor=). */
bool cli_repeated(const struct field *f);
void cli_print_help(FILE *out);
void cli_print_command_help(FILE *out, const struct command *cmd);
void cli_print_raw_help(FILE *out);

/* ctl_cli_args.c */

/* Print "cais-ctl: MESSAGE" and the hint to stderr; exit EX_USAGE. */
void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A whole decimal integer. */
bool cli_parse_ll(const char *s, long long *out);
/* A JSON object from text or from the file of that name (a usage error if it is not one). */
json_t *cli_load_json_object(const char *what, const char *text, bool is_file);
/* Merge src into dst (src's members win); src is consumed. */
void cli_merge(json_t *dst, json_t *src);
/*
 * The arguments of cmd from its words (KEY=VALUE, KEY:=JSON, @FILE) and
 * --args-json, checked against its fields.
 */
json_t *cli_build_args(const struct command *cmd, int nw, char **words, const char *args_json);

/* ctl_cli_show.c: the show_fn of the commands. */

void cli_show_generic(const struct cli *c, const json_t *res);
void cli_show_ping(const struct cli *c, const json_t *res);
void cli_show_stats(const struct cli *c, const json_t *res);
void cli_show_jobs(const struct cli *c, const json_t *res);
void cli_show_switch_status(const struct cli *c, const json_t *res);

#endif /* CTL_CLI_H */
