/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "ctl_err.h"

int
ctl_fail(struct ctl_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (code < 0)
		code = -code;
	if (err) {
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -code;
}

const char *
ctl_errname(int code)
{
	if (code < 0)
		code = -code;
	switch (code) {
#define CTL_X_CASE(name)                                                                           \
	case name:                                                                                 \
		return #name;
		CTL_ERRORS(CTL_X_CASE)
#undef CTL_X_CASE
	case ENOMEM:
		return "ENOSPC";
	case ETIMEDOUT:
	case ECONNREFUSED:
	case EPROTO:
		return "EBUSY"; /* something this one depends on (the switch) is not there */
	default:
		return "EINVAL";
	}
}
