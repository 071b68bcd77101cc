/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Aligned text tables for the tools' output (cais-ctl, the switch's and
 * cais-ctl's stats): cells are added row by row, the first row being the
 * header; each column is as wide as its widest cell, numbers right-aligned
 * and the columns marked left (names) left-aligned.
 */
#ifndef CTL_TABLE_H
#define CTL_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/** Most columns a table has. */
#define CTL_TABLE_MAX_COLS 32

/** A table being filled; its members are ctl_table.c's. */
struct ctl_table {
	size_t ncol, n, cap;
	char **cells;		       /**< row-major, malloc'ed */
	bool failed;		       /**< a cell could not be stored */
	bool left[CTL_TABLE_MAX_COLS]; /**< left-aligned columns (set by the caller) */
};

/** Start a table of ncol (at most CTL_TABLE_MAX_COLS) columns. */
void ctl_table_init(struct ctl_table *t, size_t ncol);

/** Add the next cell (printf-style). Out of memory is told by ctl_table_print(). */
void ctl_table_add(struct ctl_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/**
 * Print the table to f, each row after indent, columns two spaces apart,
 * and free its cells (t can be filled again after ctl_table_init()).
 * @return 0; -ENOMEM when a cell could not be stored (nothing printed)
 */
int ctl_table_print(struct ctl_table *t, FILE *f, const char *indent);

/**
 * A JSON value as a cell shows it: strings bare, integers, reals with %g,
 * true, false, "-" for null or NULL, anything else as compact JSON.
 * @return a malloc'ed string, NULL when out of memory
 */
char *ctl_json_text(const json_t *v);

#endif /* CTL_TABLE_H */
