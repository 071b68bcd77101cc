/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A reply's result as text (without --json): "ok" for an empty result,
 * key: value lines with arrays of objects as tables, ping as one line,
 * stats.get (and the stats in switch.status) through ctl_stats_print(),
 * jobs.list as a table.
 */
#include <stdlib.h>
#include <string.h>

#include "ctl_cli.h"
#include "ctl_stats.h"
#include "ctl_table.h"

/* Most columns of a table of objects. */
#define MAX_COLS CTL_TABLE_MAX_COLS

static void out_of_memory(void) __attribute__((noreturn));

static void
out_of_memory(void)
{
	fputs("cais-ctl: out of memory\n", stderr);
	exit(EX_LOCAL);
}

/* A scalar as text (strings bare, null "-"): malloc'ed. */
static char *
scalar_text(const json_t *v)
{
	char *s = ctl_json_text(v);

	if (!s)
		out_of_memory();
	return s;
}

static void
print_table(struct ctl_table *t, const char *indent)
{
	if (ctl_table_print(t, stdout, indent) != 0)
		out_of_memory();
}

static bool
is_scalar(const json_t *v)
{
	return !json_is_object(v) && !json_is_array(v);
}

/* The columns of a table of objects: first the preferred present, then the others as met. */
static size_t
table_columns(const json_t *arr, const char *const *preferred, const char *cols[MAX_COLS])
{
	size_t ncol = 0, i;
	const char *k;
	json_t *o, *v;

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
			if (c == ncol && ncol < MAX_COLS)
				cols[ncol++] = k;
		}
	}
	return ncol;
}

/* An array of objects as a table; columns holding text are left-aligned. */
static void
print_object_table(const json_t *arr, const char *const *preferred, const char *indent)
{
	const char *cols[MAX_COLS];
	size_t ncol = table_columns(arr, preferred, cols), i;
	struct ctl_table t;
	json_t *o, *v;

	if (ncol == 0)
		return;
	ctl_table_init(&t, ncol);
	for (size_t c = 0; c < ncol; c++) {
		ctl_table_add(&t, "%s", cols[c]);
		json_array_foreach (arr, i, o) {
			v = json_object_get(o, cols[c]);
			if (json_is_string(v) || json_is_object(v) || json_is_array(v))
				t.left[c] = true;
		}
	}
	json_array_foreach (arr, i, o)
		for (size_t c = 0; c < ncol; c++) {
			char *s = scalar_text(json_object_get(o, cols[c]));

			ctl_table_add(&t, "%s", s);
			free(s);
		}
	print_table(&t, indent);
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

/* " a, b, c" */
static void
print_list(const json_t *arr)
{
	size_t i;
	json_t *x;

	json_array_foreach (arr, i, x) {
		char *s = scalar_text(x);

		printf("%s%s", i ? ", " : " ", s);
		free(s);
	}
	fputc('\n', stdout);
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
			print_list(v);
		}
	}
}

void
cli_show_generic(const struct cli *c, const json_t *res)
{
	(void)c;
	if (json_object_size(res) == 0)
		printf("ok\n");
	else
		print_tree(res, 0);
}

void
cli_show_ping(const struct cli *c, const json_t *res)
{
	const char *k;
	json_t *v;
	int n = 0;

	printf("%s %s:", cli_target_name(c->target), c->addr_text);
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

static void
print_stats(const json_t *stats, const char *title)
{
	if (ctl_stats_print(stdout, stats, title) != 0)
		out_of_memory();
}

void
cli_show_stats(const struct cli *c, const json_t *res)
{
	char title[128];

	snprintf(title, sizeof(title), "%s %s", cli_target_name(c->target), c->addr_text);
	print_stats(res, title);
}

static bool
looks_like_stats(const json_t *o)
{
	return json_is_object(o) && json_is_array(json_object_get(o, "ports")) &&
	       json_object_get(o, "drops");
}

/*
 * switch.status: the scalars, then the stats where the counters look like
 * stats.get's; over a fabric (docs/PROTOCOL.md E10) so for each switch.
 */
void
cli_show_switch_status(const struct cli *c, const json_t *res)
{
	const json_t *all = json_object_get(res, "switches"), *one;
	const char *k;
	json_t *v, *rest = json_object();
	size_t i;

	if (json_is_array(all)) {
		json_object_foreach ((json_t *)res, k, v)
			if (strcmp(k, "switches"))
				json_object_set(rest, k, v);
		print_tree(rest, 0);
		json_decref(rest);
		json_array_foreach (all, i, one) {
			printf("\nswitch %zu of %zu:\n", i + 1, json_array_size(all));
			cli_show_switch_status(c, one);
		}
		return;
	}
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

void
cli_show_jobs(const struct cli *c, const json_t *res)
{
	static const char *const cols[] = {"job",    "tenant", "session", "world",
					   "joined", "state",  NULL};
	const json_t *jobs = json_object_get(res, "jobs");
	json_t *rest;

	if (!json_is_array(jobs)) {
		cli_show_generic(c, res);
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
