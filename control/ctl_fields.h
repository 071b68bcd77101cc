/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Checked fields of a JSON request object, for the servers: the switch's
 * requests (ctl_request.c) and cais-manager's commands. Each function
 * returns 0, or ctl_fail(err, EINVAL, ...) with a message naming the field;
 * nothing is written to *out on failure.
 */
#ifndef CTL_FIELDS_H
#define CTL_FIELDS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ctl_err.h"

/**
 * Every member of obj must be one of the names in allowed (NULL-ended).
 * @return 0, -EINVAL (an unknown field, named)
 */
int ctl_check_fields(const json_t *obj, const char *const *allowed, struct ctl_err *err);

/**
 * An integer field in [min, max]; when optional and absent, *out is kept.
 * @return 0, -EINVAL (missing when required, not an integer, out of range)
 */
int ctl_get_uint(const json_t *obj, const char *name, uint64_t min, uint64_t max, bool required,
		 uint64_t *out, struct ctl_err *err);

/**
 * A finite number in [min, max]; *present says whether the field was there.
 * @return 0, -EINVAL (missing when required, not a number, out of range)
 */
int ctl_get_number(const json_t *obj, const char *name, double min, double max, bool required,
		   bool *present, double *out, struct ctl_err *err);

/**
 * A string field (required).
 * @return 0 with *out pointing into obj, -EINVAL (missing, not a string)
 */
int ctl_get_string(const json_t *obj, const char *name, const char **out, struct ctl_err *err);

#endif /* CTL_FIELDS_H */
