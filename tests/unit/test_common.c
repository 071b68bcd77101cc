/* SPDX-License-Identifier: BSD-3-Clause */
/* common/: address text and the log-linear histogram. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "cmn_addr.h"
#include "cmn_hist.h"

static void
test_addr_ok(void **state)
{
	struct sockaddr_in a;
	char buf[CMN_ADDR_TEXT];

	(void)state;
	assert_int_equal(cmn_parse_addr("10.0.0.1:47000", 51733, &a), 0);
	assert_int_equal(a.sin_family, AF_INET);
	assert_int_equal(ntohs(a.sin_port), 47000);
	assert_int_equal(ntohl(a.sin_addr.s_addr), 0x0A000001u);
	assert_int_equal(cmn_parse_addr("10.0.0.254", 51733, &a), 0);
	assert_int_equal(ntohs(a.sin_port), 51733);
	assert_string_equal(cmn_format_addr(&a, buf, sizeof(buf)), "10.0.0.254:51733");
	assert_int_equal(cmn_parse_addr("255.255.255.255:65535", 0, &a), 0);
	assert_string_equal(cmn_format_addr(&a, buf, sizeof(buf)), "255.255.255.255:65535");
	assert_int_equal(cmn_parse_addr("127.0.0.1:1", 0, &a), 0);
	assert_int_equal(ntohs(a.sin_port), 1);
}

static void
test_addr_bad(void **state)
{
	static const char *const bad[] = {
	    "",		  ":1",		   "10.0.0.1:",	     "10.0.0.1:0",	 "10.0.0.1:65536",
	    "10.0.0.1:-1", "10.0.0.1:+80", "10.0.0.1: 80",  "10.0.0.1:80x",	 "10.0.0:80",
	    "host:80",	  "10.0.0.1.5",	   "1.2.3.4:80:90", "1234567890123456789:1",
	};
	struct sockaddr_in a;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&a, 0x5A, sizeof(a));
		assert_int_equal(cmn_parse_addr(bad[i], 51733, &a), -EINVAL);
		assert_int_equal(a.sin_family, 0); /* zeroed: nothing half-parsed */
	}
	assert_int_equal(cmn_parse_addr(NULL, 1, &a), -EINVAL);
	/* a port is required when there is no default */
	assert_int_equal(cmn_parse_addr("10.0.0.1", 0, &a), -EINVAL);
}

static void
test_hist_buckets(void **state)
{
	(void)state;
	/* small values have a bucket each */
	for (uint64_t v = 0; v < CMN_HIST_SUB; v++) {
		assert_int_equal(cmn_hist_bucket(v), v);
		assert_int_equal(cmn_hist_upper((unsigned int)v), v + 1);
	}
	/* every value lies below its bucket's bound, and above the previous one's */
	for (unsigned int s = 0; s < 64; s++)
		for (int d = -2; d <= 2; d++) {
			uint64_t v = (1ull << s) + (uint64_t)(int64_t)d;
			unsigned int b = cmn_hist_bucket(v);

			if (s == 0 && d < 0)
				continue;
			assert_true(b < CMN_HIST_BUCKETS);
			assert_true(v < cmn_hist_upper(b) || cmn_hist_upper(b) == UINT64_MAX);
			if (b)
				assert_true(v >= cmn_hist_upper(b - 1));
			/* within 1/SUB of the bound */
			assert_true((double)cmn_hist_upper(b) <= (double)v * (1.0 + 1.0 / CMN_HIST_SUB) + 1);
		}
	assert_int_equal(cmn_hist_bucket(UINT64_MAX), CMN_HIST_BUCKETS - 1);
	assert_true(cmn_hist_upper(CMN_HIST_BUCKETS - 1) == UINT64_MAX);
	/* buckets are monotonic */
	for (unsigned int b = 1; b < CMN_HIST_BUCKETS; b++)
		assert_true(cmn_hist_upper(b) > cmn_hist_upper(b - 1));
}

static void
test_hist_quantile(void **state)
{
	static uint64_t h[CMN_HIST_BUCKETS];

	(void)state;
	memset(h, 0, sizeof(h));
	assert_int_equal(cmn_hist_quantile(h, 0.5), 0);
	assert_int_equal(cmn_hist_total(h), 0);
	/* 1..100 once each: p50 is 50's bucket, p99 99's, max 100's */
	for (uint64_t v = 1; v <= 100; v++)
		h[cmn_hist_bucket(v)]++;
	assert_int_equal(cmn_hist_total(h), 100);
	assert_int_equal(cmn_hist_quantile(h, 0.5), cmn_hist_upper(cmn_hist_bucket(50)));
	assert_int_equal(cmn_hist_quantile(h, 0.99), cmn_hist_upper(cmn_hist_bucket(99)));
	assert_int_equal(cmn_hist_quantile(h, 1.0), cmn_hist_upper(cmn_hist_bucket(100)));
	assert_int_equal(cmn_hist_quantile(h, 0.0), cmn_hist_upper(cmn_hist_bucket(1)));
	assert_true(cmn_hist_quantile(h, 0.5) > 50 && cmn_hist_quantile(h, 0.5) <= 57);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_addr_ok),
	    cmocka_unit_test(test_addr_bad),
	    cmocka_unit_test(test_hist_buckets),
	    cmocka_unit_test(test_hist_quantile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
