/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <arpa/inet.h>

#include "ctl_fields.h"

int
ctl_check_fields(const json_t *args, const char *const *allowed, struct ctl_err *err)
{
	const char *key;
	json_t *val;

	json_object_foreach ((json_t *)args, key, val) {
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
ctl_get_uint(const json_t *obj, const char *name, uint64_t min, uint64_t max, bool required,
	     uint64_t *out, struct ctl_err *err)
{
	const json_t *v = json_object_get(obj, name);
	json_int_t x;

	if (!v) {
		if (required)
			return ctl_fail(err, EINVAL, "missing field '%s'", name);
		return 0;
	}
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
ctl_get_number(const json_t *obj, const char *name, double min, double max, bool required,
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
ctl_get_string(const json_t *obj, const char *name, const char **out, struct ctl_err *err)
{
	const json_t *v = json_object_get(obj, name);

	if (!v)
		return ctl_fail(err, EINVAL, "missing field '%s'", name);
	if (!json_is_string(v))
		return ctl_fail(err, EINVAL, "field '%s' must be a string", name);
	*out = json_string_value(v);
	return 0;
}

bool
ctl_page_add(struct ctl_page *p, json_t *entry)
{
	size_t n = json_dumpb(entry, NULL, 0, JSON_COMPACT) + 1; /* and a comma */

	if (p->full || (p->used > 0 && p->used + n > CTL_PAGE_BYTES)) {
		json_decref(entry);
		p->full = true;
		return false;
	}
	p->used += n;
	json_array_append_new(p->arr, entry);
	return true;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
ctl_parse_member_mac(const char *s, uint8_t mac[6])
{
	if (strlen(s) != 17)
		return -1;
	for (int i = 0; i < 6; i++) {
		int hi = hexval(s[3 * i]), lo = hexval(s[3 * i + 1]);

		if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':'))
			return -1;
		mac[i] = (uint8_t)(hi << 4 | lo);
	}
	if ((mac[0] & 1) || !(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]))
		return -1;
	return 0;
}

bool
ctl_host_ip(uint32_t ip_be)
{
	uint8_t first = (uint8_t)(ntohl(ip_be) >> 24);

	return first != 0 && first != 127 && first < 224;
}
