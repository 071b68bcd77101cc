/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Argument checks of the manager's commands beyond ctl_fields.h's
 * (ctl_check_fields, ctl_get_uint, ctl_get_number, ctl_get_string, shared
 * with the switch's requests): every failure is EINVAL with a message naming
 * the field; nothing is changed before every argument has passed.
 */
#ifndef MGR_ARGS_H
#define MGR_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ctl_err.h"

/**
 * A name: a string of 1..MGR_NAME_CHARS characters, none of them a control
 * character. @return 0, -EINVAL
 */
int mgr_get_name(const json_t *obj, const char *field, const char **out, struct ctl_err *err);

/** "aa:bb:cc:dd:ee:ff", a member's (ctl_parse_member_mac()), into canonical lowercase text. @return 0, -1 */
int mgr_parse_mac(const char *s, char out[18]);

/** A dotted IPv4 address a member may have (ctl_host_ip()), into canonical text. @return 0, -1 */
int mgr_parse_ip(const char *s, char out[16]);

#endif /* MGR_ARGS_H */
