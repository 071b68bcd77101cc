/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Argument checks of the manager's commands, in the manner of
 * control/ctl_request.c: every failure is EINVAL with a message naming the
 * field; nothing is changed before every argument has passed.
 */
#ifndef MGR_ARGS_H
#define MGR_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ctl.h"

/** Every member of obj must be one of allowed (NULL-ended). @return 0, -EINVAL */
int mgr_check_fields(const json_t *obj, const char *const *allowed, struct ctl_err *err);

/**
 * An integer field in [min, max] (max at most INT64_MAX); when optional and
 * absent, *out is kept. @return 0, -EINVAL
 */
int mgr_get_uint(const json_t *obj, const char *name, uint64_t min, uint64_t max, bool required,
		 uint64_t *out, struct ctl_err *err);

/** A number (integer or real) in [min, max], finite. @return 0, -EINVAL */
int mgr_get_number(const json_t *obj, const char *name, double min, double max, bool required,
		   bool *present, double *out, struct ctl_err *err);

/** A string field. @return 0, -EINVAL */
int mgr_get_string(const json_t *obj, const char *name, const char **out, struct ctl_err *err);

/**
 * A name: a string of 1..MGR_NAME_CHARS characters, none of them a control
 * character. @return 0, -EINVAL
 */
int mgr_get_name(const json_t *obj, const char *field, const char **out, struct ctl_err *err);

/** "aa:bb:cc:dd:ee:ff", unicast, into canonical lowercase text. @return 0, -1 */
int mgr_parse_mac(const char *s, char out[18]);

/** A dotted IPv4 address, into canonical text. @return 0, -1 */
int mgr_parse_ip(const char *s, char out[16]);

#endif /* MGR_ARGS_H */
