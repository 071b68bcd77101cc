/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A command's words into its request's arguments: KEY=VALUE words checked
 * against the command's fields (ctl_cli_cmds.c), KEY:=JSON and JSON files
 * taken as given. Everything wrong here is a usage error: nothing is sent.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "ctl_cli.h"

void
cli_usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("cais-ctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(cais-ctl --help for usage; nothing was sent)\n", stderr);
	exit(EX_USAGE);
}

/* Longest KEY of a word, and one more. */
#define NAME_SIZE 64

bool
cli_parse_ll(const char *s, long long *out)
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

	if (!cli_parse_ll(v, &x))
		cli_usage_error("%s: %s: '%s' is not an integer", cmd, what, v);
	if (x < min || x > max)
		cli_usage_error("%s: %s: %lld is out of range [%lld, %lld]", cmd, what, x, min,
				max);
	if (pow2 && (x & (x - 1)) != 0)
		cli_usage_error("%s: %s: %lld is not a power of two", cmd, what, x);
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
		cli_usage_error("%s: member: '%s' is too long", cmd, v);
	snprintf(buf, sizeof(buf), "%s", v);
	for (p = strtok_r(buf, ",", &save); p && n < 5; p = strtok_r(NULL, ",", &save))
		parts[n++] = p;
	if (n != 4)
		cli_usage_error("%s: member: '%s' is not RANK,MAC,IP,PORT", cmd, v);
	/* every check before anything is allocated: a usage error exits */
	if (!mac_ok(parts[1]))
		cli_usage_error("%s: member %s: '%s' is not a unicast MAC (aa:bb:cc:dd:ee:ff)", cmd,
				parts[0], parts[1]);
	if (!ip_ok(parts[2]))
		cli_usage_error("%s: member %s: '%s' is not an IPv4 address", cmd, parts[0],
				parts[2]);
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
		cli_usage_error("%s: tensor: '%s' is not TENSOR,MAX_ABS", cmd, v);
	memcpy(id, v, (size_t)(comma - v));
	id[comma - v] = '\0';
	o = json_object();
	json_object_set_new(o, "tensor", int_value(cmd, "tensor id", id, 0, 4294967295LL, false));
	if (!parse_num(comma + 1, &x) || x < 0)
		cli_usage_error("%s: tensor %s: max_abs '%s' is not a number >= 0", cmd, id,
				comma + 1);
	json_object_set_new(o, "max_abs", json_real(x));
	return o;
}

static json_t *
num_value(const char *cmd, const struct field *f, const char *v)
{
	double x;

	if (!parse_num(v, &x))
		cli_usage_error("%s: %s: '%s' is not a number", cmd, f->word, v);
	if ((f->flags & F_POS) ? !(x > f->dmin) : x < f->dmin)
		cli_usage_error("%s: %s: %s must be %s %g", cmd, f->word, v,
				(f->flags & F_POS) ? "greater than" : "at least", f->dmin);
	if (x > f->dmax)
		cli_usage_error("%s: %s: %s must be at most %g", cmd, f->word, v, f->dmax);
	return json_real(x);
}

static json_t *
str_value(const char *cmd, const struct field *f, const char *v)
{
	size_t l = strlen(v);

	if ((long long)l < f->imin || (long long)l > f->imax)
		cli_usage_error("%s: %s: '%s' must have %lld..%lld characters", cmd, f->word, v,
				f->imin, f->imax);
	return json_string(v);
}

/* One of the field's choices ("a|b|c"). */
static json_t *
enum_value(const char *cmd, const struct field *f, const char *v)
{
	size_t l = strlen(v);
	const char *p = f->choices;

	while (p) {
		const char *bar = strchr(p, '|');
		size_t pl = bar ? (size_t)(bar - p) : strlen(p);

		if (pl == l && strncmp(p, v, l) == 0)
			return json_string(v);
		p = bar ? bar + 1 : NULL;
	}
	cli_usage_error("%s: %s: '%s' is not one of %s", cmd, f->word, v, f->choices);
}

static json_t *
field_value(const char *cmd, const struct field *f, const char *v)
{
	switch (f->type) {
	case FT_INT:
		return int_value(cmd, f->word, v, f->imin, f->imax, f->flags & F_POW2);
	case FT_NUM:
		return num_value(cmd, f, v);
	case FT_STR:
		return str_value(cmd, f, v);
	case FT_ENUM:
		return enum_value(cmd, f, v);
	case FT_MAC:
		if (!mac_ok(v))
			cli_usage_error("%s: %s: '%s' is not a unicast MAC (aa:bb:cc:dd:ee:ff)",
					cmd, f->word, v);
		return json_string(v);
	case FT_IP:
		if (!ip_ok(v))
			cli_usage_error("%s: %s: '%s' is not an IPv4 address", cmd, f->word, v);
		return json_string(v);
	case FT_MEMBER:
		return member_value(cmd, v);
	case FT_MAXABS:
		return maxabs_value(cmd, v);
	}
	return NULL;
}

json_t *
cli_load_json_object(const char *what, const char *text, bool is_file)
{
	json_error_t je;
	json_t *o = is_file ? json_load_file(text, JSON_REJECT_DUPLICATES, &je)
			    : json_loads(text, JSON_REJECT_DUPLICATES, &je);

	if (!o) {
		if (is_file)
			cli_usage_error("%s %s: %s (line %d)", what, text, je.text, je.line);
		cli_usage_error("%s: not JSON: %s (at character %d)", what, je.text, je.position);
	}
	if (!json_is_object(o)) {
		json_decref(o);
		cli_usage_error("%s%s%s: must be a JSON object {...}", what, is_file ? " " : "",
				is_file ? text : "");
	}
	return o;
}

void
cli_merge(json_t *dst, json_t *src)
{
	json_object_update(dst, src);
	json_decref(src);
}

/* --args-json, then the @FILE words, into args. @return whether there were any */
static bool
load_json_args(json_t *args, int nw, char **words, const char *args_json)
{
	bool have_json = args_json != NULL;

	if (args_json)
		cli_merge(args, cli_load_json_object("--args-json", args_json, false));
	for (int i = 0; i < nw; i++)
		if (words[i][0] == '@') {
			cli_merge(args, cli_load_json_object("arguments file", words[i] + 1, true));
			have_json = true;
		}
	return have_json;
}

static void unknown_argument(const struct command *cmd, const char *name) __attribute__((noreturn));

static void
unknown_argument(const struct command *cmd, const char *name)
{
	fprintf(stderr, "cais-ctl: %s: unknown argument '%s'; it takes:", cmd->name, name);
	if (!cmd->f[0].word)
		fprintf(stderr, " no arguments");
	for (const struct field *g = cmd->f; g->word; g++)
		fprintf(stderr, " %s", g->word);
	fprintf(stderr, "\n(cais-ctl help %s; --args-json sends anything; nothing was sent)\n",
		cmd->name);
	exit(EX_USAGE);
}

/*
 * The field a KEY=VALUE or KEY:=JSON word names (its index in cmd->f), its
 * name, its value and whether the value is JSON.
 */
static int
word_field(const struct command *cmd, const char *w, char name[NAME_SIZE], const char **value,
	   bool *json)
{
	const char *eq = strchr(w, '=');
	size_t len;
	int fi;

	if (!eq || eq == w)
		cli_usage_error("%s: '%s' is not KEY=VALUE", cmd->name, w);
	*json = eq[-1] == ':';
	len = (size_t)(eq - w) - *json;
	if (len >= NAME_SIZE)
		cli_usage_error("%s: '%s': name too long", cmd->name, w);
	memcpy(name, w, len);
	name[len] = '\0';
	*value = eq + 1;
	for (fi = 0; cmd->f[fi].word; fi++)
		if (strcmp(cmd->f[fi].word, name) == 0 ||
		    strcmp(cli_field_key(&cmd->f[fi]), name) == 0)
			return fi;
	unknown_argument(cmd, name);
}

/* KEY:=JSON: the value as given. */
static json_t *
json_value(const char *cmd, const char *name, const char *v)
{
	json_error_t je;
	json_t *j = json_loads(v, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);

	if (!j)
		cli_usage_error("%s: %s:=: not JSON: %s", cmd, name, je.text);
	return j;
}

/* session.add: n from the members; every rank once, below n. */
static void
check_members(json_t *args, bool have_json)
{
	json_t *members = json_object_get(args, "members");
	json_t *n = json_object_get(args, "n");
	bool have[256] = {false};
	size_t i;
	json_t *m;

	if (!n && json_is_array(members) && json_array_size(members) > 0 &&
	    json_array_size(members) <= 255)
		json_object_set_new(args, "n", json_integer((json_int_t)json_array_size(members)));
	n = json_object_get(args, "n");
	if (!json_is_array(members) || !json_is_integer(n) || have_json)
		return;
	if (json_array_size(members) != (size_t)json_integer_value(n))
		cli_usage_error("session.add: n=%lld but %zu member= words",
				(long long)json_integer_value(n), json_array_size(members));
	json_array_foreach (members, i, m) {
		json_int_t r = json_integer_value(json_object_get(m, "rank"));

		if (!json_is_integer(json_object_get(m, "rank")))
			continue; /* given as JSON: the switch checks */
		if (r < 0 || r >= json_integer_value(n))
			cli_usage_error("session.add: member rank %lld is not below n=%lld",
					(long long)r, (long long)json_integer_value(n));
		if (r >= (json_int_t)sizeof(have))
			continue; /* n given as JSON: past any world, the switch refuses it */
		if (have[r])
			cli_usage_error("session.add: member rank %lld given twice", (long long)r);
		have[r] = true;
	}
}

/* Without JSON arguments, every required field must have a word. */
static void
check_required(const struct command *cmd, const json_t *args)
{
	for (const struct field *f = cmd->f; f->word; f++)
		if ((f->flags & F_REQ) && !json_object_get(args, cli_field_key(f)))
			cli_usage_error("%s: missing %s=%s (cais-ctl help %s)", cmd->name, f->word,
					cli_type_text(f), cmd->name);
	if (strcmp(cmd->name, "thresholds.set") == 0 && json_object_size(args) == 0)
		cli_usage_error("thresholds.set: give queue_depth=N, slot_usage=X or both");
}

json_t *
cli_build_args(const struct command *cmd, int nw, char **words, const char *args_json)
{
	json_t *args = json_object(), *lists[MAX_FIELDS] = {0};
	bool seen[MAX_FIELDS] = {false};
	bool have_json = load_json_args(args, nw, words, args_json);
	int fi;

	for (int i = 0; i < nw; i++) {
		const struct field *f;
		const char *v;
		char name[NAME_SIZE];
		bool json;

		if (words[i][0] == '@')
			continue;
		fi = word_field(cmd, words[i], name, &v, &json);
		f = &cmd->f[fi];
		if (seen[fi] && (json || !cli_repeated(f)))
			cli_usage_error("%s: '%s' given twice", cmd->name, name);
		seen[fi] = true;
		if (json) {
			json_object_set_new(args, cli_field_key(f), json_value(cmd->name, name, v));
		} else if (cli_repeated(f)) {
			if (!lists[fi])
				lists[fi] = json_array();
			json_array_append_new(lists[fi], field_value(cmd->name, f, v));
		} else {
			json_object_set_new(args, cli_field_key(f), field_value(cmd->name, f, v));
		}
	}
	for (fi = 0; cmd->f[fi].word; fi++)
		if (lists[fi])
			json_object_set_new(args, cli_field_key(&cmd->f[fi]), lists[fi]);
	if (strcmp(cmd->name, "session.add") == 0)
		check_members(args, have_json);
	if (!have_json)
		check_required(cmd, args);
	return args;
}
