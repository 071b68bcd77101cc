/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "mgr.h"

static enum mgr_log_level log_level = MGR_LOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};

void
mgr_log_set_level(enum mgr_log_level level)
{
	log_level = level;
}

const char *
mgr_log_level_name(enum mgr_log_level level)
{
	return (unsigned int)level <= MGR_LOG_DEBUG ? level_names[level] : "?";
}

void
mgr_log(enum mgr_log_level level, const char *fmt, ...)
{
	char line[1024], stamp[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	if (level > log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof(line), "%s.%03ldZ cais-manager[%d] %s: ", stamp,
		     ts.tv_nsec / 1000000, (int)getpid(), level_names[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* one event, one line: a message never carries its own newline */
	for (char *p = line + n; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	fprintf(stderr, "%s\n", line);
}
