/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "ctl_fields.h"
#include "mgr.h"
#include "mgr_args.h"

int
mgr_get_name(const json_t *obj, const char *field, const char **out, struct ctl_err *err)
{
	const json_t *v = json_object_get(obj, field);
	const unsigned char *p;
	size_t chars = 0;
	int rc;

	if ((rc = ctl_get_string(obj, field, out, err)))
		return rc;
	/* jansson has checked the UTF-8; count the bytes that start a character */
	for (p = (const unsigned char *)*out; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			return ctl_fail(err, EINVAL, "field '%s' has a control character", field);
		if ((*p & 0xc0) != 0x80)
			chars++;
	}
	if (json_string_length(v) != strlen(*out))
		return ctl_fail(err, EINVAL, "field '%s' has a NUL character", field);
	if (chars < 1 || chars > MGR_NAME_CHARS)
		return ctl_fail(err, EINVAL, "field '%s' must have 1 to %u characters", field,
				MGR_NAME_CHARS);
	return 0;
}

int
mgr_parse_mac(const char *s, char out[18])
{
	uint8_t b[6];

	if (ctl_parse_member_mac(s, b) != 0)
		return -1;
	snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
	return 0;
}

int
mgr_parse_ip(const char *s, char out[16])
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1 || !ctl_host_ip(a.s_addr) ||
	    !inet_ntop(AF_INET, &a, out, 16))
		return -1;
	return 0;
}
