/* SPDX-License-Identifier: BSD-3-Clause */
#include <math.h>

#include "cmn_hist.h"

uint64_t
cmn_hist_total(const uint64_t *h)
{
	uint64_t total = 0;

	for (unsigned int b = 0; b < CMN_HIST_BUCKETS; b++)
		total += h[b];
	return total;
}

uint64_t
cmn_hist_quantile(const uint64_t *h, double q)
{
	uint64_t total = cmn_hist_total(h), want, cum = 0;
	unsigned int b = 0;

	if (total == 0)
		return 0;
	want = (uint64_t)ceil(q * (double)total);
	if (want == 0)
		want = 1;
	if (want > total)
		want = total;
	while (cum + h[b] < want)
		cum += h[b++];
	return cmn_hist_upper(b);
}
