/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "mgr.h"
#include "mgr_args.h"

int
mgr_check_fields(const json_t *obj, const char *const *allowed, struct ctl_err *err)
{
	const char *key;
	json_t *val;

	json_object_foreach ((json_t *)obj, key, val) {
		const char *const *a;

		(void)val;
		for (a = allowed; *a; a++)
			if (strcmp(*a, key) == 0)
				break;
		if (!*a)
			return ctl_fail(err, EINVAL, "unknown field '%.60s'", key);
	}
	return 0;
}

int
mgr_get_uint(const json_t *obj, const char *name, uint64_t min, uint64_t max, bool required,
	     uint64_t *out, struct ctl_err *err)
{
	const json_t *v = json_object_get(obj, name);
	json_int_t x;

	if (!v)
		return required ? ctl_fail(err, EINVAL, "missing field '%s'", name) : 0;
	if (!json_is_integer(v))
		return ctl_fail(err, EINVAL, "field '%s' must be an integer", name);
	x = json_integer_value(v);
	if (x < 0 || (uint64_t)x < min || (uint64_t)x > max)
		return ctl_fail(err, EINVAL, "field '%s' out of range [%llu, %llu]", name,
				(unsigned long long)min, (unsigned long long)max);
	*out = (uint64_t)x;
	return 0;
}

int
mgr_get_number(const json_t *obj, const char *name, double min, double max, bool required,
	       bool *present, double *out, struct ctl_err *err)
{
	const json_t *v = json_object_get(obj, name);
	double x;

	*present = v != NULL;
	if (!v)
		return required ? ctl_fail(err, EINVAL, "missing field '%s'", name) : 0;
	if (!json_is_number(v))
		return ctl_fail(err, EINVAL, "field '%s' must be a number", name);
	x = json_number_value(v);
	if (!isfinite(x) || x < min || x > max)
		return ctl_fail(err, EINVAL, "field '%s' out of range [%g, %g]", name, min, max);
	*out = x;
	return 0;
}

int
mgr_get_string(const json_t *obj, const char *name, const char **out, struct ctl_err *err)
{
	const json_t *v = json_object_get(obj, name);

	if (!v)
		return ctl_fail(err, EINVAL, "missing field '%s'", name);
	if (!json_is_string(v))
		return ctl_fail(err, EINVAL, "field '%s' must be a string", name);
	*out = json_string_value(v);
	return 0;
}

int
mgr_get_name(const json_t *obj, const char *field, const char **out, struct ctl_err *err)
{
	const json_t *v = json_object_get(obj, field);
	const unsigned char *p;
	size_t chars = 0;
	int rc;

	if ((rc = mgr_get_string(obj, field, out, err)))
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
	unsigned int b[6];
	char tail;

	if (strlen(s) != 17 || sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3],
				      &b[4], &b[5], &tail) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		if (!isxdigit((unsigned char)s[3 * i]) || !isxdigit((unsigned char)s[3 * i + 1]) ||
		    (i < 5 && s[3 * i + 2] != ':'))
			return -1;
	if (b[0] & 1)
		return -1; /* a group address cannot be a member */
	snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", (unsigned char)b[0], (unsigned char)b[1],
		 (unsigned char)b[2], (unsigned char)b[3], (unsigned char)b[4],
		 (unsigned char)b[5]);
	return 0;
}

int
mgr_parse_ip(const char *s, char out[16])
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1 || !inet_ntop(AF_INET, &a, out, 16))
		return -1;
	return 0;
}
