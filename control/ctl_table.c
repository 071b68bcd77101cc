/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_table.h"

void
ctl_table_init(struct ctl_table *t, size_t ncol)
{
	memset(t, 0, sizeof(*t));
	t->ncol = ncol < CTL_TABLE_MAX_COLS ? ncol : CTL_TABLE_MAX_COLS;
}

void
ctl_table_add(struct ctl_table *t, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		char **cells = realloc(t->cells, cap * sizeof(*cells));

		if (!cells) {
			t->failed = true;
			return;
		}
		t->cells = cells;
		t->cap = cap;
	}
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (!s)
		t->failed = true;
	t->cells[t->n++] = s;
}

static void
free_cells(struct ctl_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->n = t->cap = 0;
}

int
ctl_table_print(struct ctl_table *t, FILE *f, const char *indent)
{
	size_t ncol = t->ncol, nrow = ncol ? t->n / ncol : 0, w[CTL_TABLE_MAX_COLS] = {0};

	if (t->failed) {
		free_cells(t);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nrow * ncol; i++) {
		size_t l = strlen(t->cells[i]);

		if (l > w[i % ncol])
			w[i % ncol] = l;
	}
	for (size_t r = 0; r < nrow; r++) {
		fputs(indent, f);
		for (size_t k = 0; k < ncol; k++) {
			const char *s = t->cells[r * ncol + k];
			bool last = k + 1 == ncol;

			/* no padding after the last column */
			if (t->left[k])
				fprintf(f, "%-*s", last ? 0 : (int)w[k], s);
			else
				fprintf(f, "%*s", (int)w[k], s);
			if (!last)
				fputs("  ", f);
		}
		fputc('\n', f);
	}
	free_cells(t);
	return 0;
}

char *
ctl_json_text(const json_t *v)
{
	char *s = NULL;

	if (!v || json_is_null(v))
		return strdup("-");
	if (json_is_string(v))
		return strdup(json_string_value(v));
	if (json_is_integer(v)) {
		if (asprintf(&s, "%" JSON_INTEGER_FORMAT, json_integer_value(v)) < 0)
			s = NULL;
		return s;
	}
	if (json_is_real(v)) {
		if (asprintf(&s, "%g", json_real_value(v)) < 0)
			s = NULL;
		return s;
	}
	if (json_is_boolean(v))
		return strdup(json_is_true(v) ? "true" : "false");
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}
