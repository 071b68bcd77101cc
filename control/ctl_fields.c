/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <math.h>
#include <string.h>

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
