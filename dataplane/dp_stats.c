/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The counters as text: the stats.get result (dp_ctl.c) rendered by the
 * control plane's renderer (control/ctl_stats.h), for the periodic printout
 * and the one at exit.
 */
#include <stdio.h>

#include "ctl_stats.h"
#include "dp_ctl.h"
#include "dp_stats.h"

void
dp_stats_print(struct dp_switch *sw, FILE *f)
{
	json_t *o = json_object();

	dp_stats_json(sw, -1, o);
	fputc('\n', f);
	ctl_stats_print(f, o, "cais-switch statistics");
	fflush(f);
	json_decref(o);
}
