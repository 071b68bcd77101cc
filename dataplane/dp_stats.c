/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counters: summed over the lcores' private copies into one JSON object
 * (the stats.get result), which the periodic printout formats as well.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "dp_switch.h"

/* Percentiles of a histogram of TSC cycles, in microseconds. */
static json_t *
percentiles(const struct dp_switch *sw, const uint64_t *hist)
{
	static const struct {
		const char *name;
		double q;
	} qs[] = {{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}, {"max", 1.0}};
	uint64_t total = cmn_hist_total(hist);
	json_t *o = json_object();

	json_object_set_new(o, "samples", json_integer((json_int_t)total));
	if (total == 0)
		return o;
	for (size_t k = 0; k < RTE_DIM(qs); k++)
		json_object_set_new(
		    o, qs[k].name,
		    json_real((double)cmn_hist_quantile(hist, qs[k].q) * 1e6 / (double)sw->hz));
	return o;
}

static json_t *
reasons_json(const uint64_t *rejects)
{
	json_t *o = json_object();

	for (unsigned int r = 1; r < CAIS_R_MAX; r++)
		json_object_set_new(o, cais_reason_name(r), json_integer((json_int_t)rejects[r]));
	return o;
}

#define SC_FIELDS(X)                                                                               \
	X(data_rx)                                                                                 \
	X(rounds)                                                                                  \
	X(results_tx)                                                                              \
	X(retx)                                                                                    \
	X(resends)                                                                                 \
	X(duplicates)                                                                              \
	X(stale)                                                                                   \
	X(inconsistent)                                                                            \
	X(slot_mismatch)                                                                           \
	X(abandoned)                                                                               \
	X(overflow)

static void
session_sum(const struct dp_session *s, struct dp_session_counters *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (unsigned int k = 0; k < s->n_lcores; k++) {
		const struct dp_session_counters *c = &s->part[k].c;

#define SC_ADD(f) sum->f += c->f;
		SC_FIELDS(SC_ADD)
#undef SC_ADD
		for (unsigned int r = 0; r < CAIS_R_MAX; r++)
			sum->rejects[r] += c->rejects[r];
		for (unsigned int b = 0; b < CMN_HIST_BUCKETS; b++)
			sum->hist[b] += c->hist[b];
	}
}

static json_t *
session_json(const struct dp_switch *sw, const struct dp_session *s,
	     struct dp_session_counters *total)
{
	struct dp_session_counters c;
	const struct dp_tensor *t;
	json_t *o = json_object(), *tensors = json_array();

	session_sum(s, &c);
	json_object_set_new(o, "tenant", json_integer(s->tenant));
	json_object_set_new(o, "session", json_integer(s->session));
	json_object_set_new(o, "n", json_integer(s->n));
	json_object_set_new(o, "slots", json_integer(s->pool));
	json_object_set_new(o, "elems_per_packet", json_integer(s->elems));
	json_object_set_new(o, "priority", json_integer(s->priority));
	LIST_FOREACH (t, &s->tensors, link) {
		json_t *to = json_object();

		json_object_set_new(to, "tensor", json_integer(t->tensor));
		json_object_set_new(to, "op", json_string(cais_op_name(t->op)));
		json_object_set_new(to, "scale", json_real(t->scale));
		json_array_append_new(tensors, to);
	}
	json_object_set_new(o, "tensors", tensors);
#define SC_JSON(f) json_object_set_new(o, #f, json_integer((json_int_t)c.f));
	SC_FIELDS(SC_JSON)
#undef SC_JSON
	json_object_set_new(o, "rejects", reasons_json(c.rejects));
	json_object_set_new(o, "completion_us", percentiles(sw, c.hist));
#define SC_ADD(f) total->f += c.f;
	SC_FIELDS(SC_ADD)
#undef SC_ADD
	for (unsigned int b = 0; b < CMN_HIST_BUCKETS; b++)
		total->hist[b] += c.hist[b];
	return o;
}

static json_t *
ports_json(const struct dp_switch *sw)
{
	json_t *arr = json_array();

	for (uint16_t p = 0; p < sw->n_ports; p++) {
		struct dp_port_counters c = {0};
		struct rte_eth_stats es;
		json_t *o = json_object();
		char name[RTE_ETH_NAME_MAX_LEN];

		for (unsigned int k = 0; k < sw->n_lcores; k++) {
			const struct dp_port_counters *pc = &sw->lcores[k].port[p];

			c.rx_pkts += pc->rx_pkts;
			c.rx_bytes += pc->rx_bytes;
			c.tx_pkts += pc->tx_pkts;
			c.tx_bytes += pc->tx_bytes;
			c.tx_dropped += pc->tx_dropped;
		}
		json_object_set_new(o, "port", json_integer(p));
		if (rte_eth_dev_get_name_by_port(p, name) == 0)
			json_object_set_new(o, "name", json_string(name));
		json_object_set_new(o, "rx_packets", json_integer((json_int_t)c.rx_pkts));
		json_object_set_new(o, "rx_bytes", json_integer((json_int_t)c.rx_bytes));
		json_object_set_new(o, "tx_packets", json_integer((json_int_t)c.tx_pkts));
		json_object_set_new(o, "tx_bytes", json_integer((json_int_t)c.tx_bytes));
		json_object_set_new(o, "tx_dropped", json_integer((json_int_t)c.tx_dropped));
		if (!sw->tx && rte_eth_stats_get(p, &es) == 0)
			json_object_set_new(o, "rx_missed",
					    json_integer((json_int_t)(es.imissed + es.rx_nombuf)));
		json_array_append_new(arr, o);
	}
	return arr;
}

int
dp_stats_json(struct dp_switch *sw, json_t *out)
{
	struct dp_lcore_counters lc = {0};
	struct dp_session_counters total = {0};
	const struct dp_session *s;
	json_t *drops = json_object(), *sessions = json_array(), *th = json_object();
	uint64_t now = rte_rdtsc(), deadline, depth = 0;

	for (unsigned int k = 0; k < sw->n_lcores; k++) {
		const struct dp_lcore *l = &sw->lcores[k];

		for (unsigned int d = 0; d < DP_DROP_MAX; d++)
			lc.drops[d] += l->c.drops[d];
		for (unsigned int r = 0; r < CAIS_R_MAX; r++)
			lc.rejects[r] += l->c.rejects[r];
		lc.arp_replies += l->c.arp_replies;
		lc.l2_forwarded += l->c.l2_forwarded;
		lc.l2_flooded += l->c.l2_flooded;
		lc.data_rx += l->c.data_rx;
		lc.handoffs += l->c.handoffs;
		if (l->qdepth > depth)
			depth = l->qdepth;
	}
	json_object_set_new(out, "uptime_s", json_real((double)(now - sw->start_tsc) / sw->hz));
	json_object_set_new(
	    out, "mode", json_string(ctl_mode_name(__atomic_load_n(&sw->mode, __ATOMIC_RELAXED))));
	deadline = __atomic_load_n(&sw->lease_deadline, __ATOMIC_RELAXED);
	if (deadline)
		json_object_set_new(
		    out, "lease_left_ms",
		    json_integer((int64_t)(deadline - now) > 0
				     ? (json_int_t)((deadline - now) * 1000 / sw->hz)
				     : 0));
	json_object_set_new(out, "ports", ports_json(sw));
	for (unsigned int d = 1; d < DP_DROP_MAX; d++)
		json_object_set_new(drops, dp_drop_name(d), json_integer((json_int_t)lc.drops[d]));
	json_object_set_new(out, "drops", drops);
	json_object_set_new(out, "rejects", reasons_json(lc.rejects));
	json_object_set_new(out, "data_rx", json_integer((json_int_t)lc.data_rx));
	json_object_set_new(out, "arp_replies", json_integer((json_int_t)lc.arp_replies));
	json_object_set_new(out, "l2_forwarded", json_integer((json_int_t)lc.l2_forwarded));
	json_object_set_new(out, "l2_flooded", json_integer((json_int_t)lc.l2_flooded));
	json_object_set_new(out, "handoffs", json_integer((json_int_t)lc.handoffs));
	json_object_set_new(out, "macs", json_integer(dp_l2_count(sw->l2, now)));
	json_object_set_new(out, "queue_depth", json_integer((json_int_t)depth));

	pthread_mutex_lock(&sw->ctl_lock);
	LIST_FOREACH (s, &sw->sessions, link)
		json_array_append_new(sessions, session_json(sw, s, &total));
	json_object_set_new(out, "slots_used", json_integer(sw->slots_used));
	json_object_set_new(out, "slot_capacity", json_integer(sw->slot_capacity));
	json_object_set_new(out, "slot_usage",
			    json_real((double)sw->slots_used / sw->slot_capacity));
	json_object_set_new(th, "queue_depth", json_integer(sw->queue_depth_threshold));
	json_object_set_new(th, "slot_usage", json_real(sw->slot_usage_threshold));
	pthread_mutex_unlock(&sw->ctl_lock);
	json_object_set_new(out, "thresholds", th);
	json_object_set_new(out, "sessions", sessions);
	json_object_set_new(out, "rounds", json_integer((json_int_t)total.rounds));
	json_object_set_new(out, "retransmissions", json_integer((json_int_t)total.retx));
	json_object_set_new(out, "resends", json_integer((json_int_t)total.resends));
	json_object_set_new(out, "duplicates", json_integer((json_int_t)total.duplicates));
	json_object_set_new(out, "stale", json_integer((json_int_t)total.stale));
	json_object_set_new(out, "completion_us", percentiles(sw, total.hist));
	return 0;
}

static json_int_t
geti(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* "name count, ..." for the non-zero members of an object of counters. */
static void
print_nonzero(FILE *f, const char *title, const json_t *o)
{
	const char *k;
	json_t *v;
	int n = 0;

	json_object_foreach ((json_t *)o, k, v) {
		if (json_integer_value(v) == 0)
			continue;
		fprintf(f, "%s%s %" JSON_INTEGER_FORMAT, n++ ? ", " : title, k,
			json_integer_value(v));
	}
	if (n)
		fputc('\n', f);
}

static void
print_lat(FILE *f, const json_t *lat)
{
	if (geti(lat, "samples") == 0)
		return;
	fprintf(f, ", completion p50 %.1f p99 %.1f max %.1f us",
		json_real_value(json_object_get(lat, "p50")),
		json_real_value(json_object_get(lat, "p99")),
		json_real_value(json_object_get(lat, "max")));
}

void
dp_stats_print(struct dp_switch *sw, FILE *f)
{
	json_t *o = json_object(), *v;
	size_t i;

	dp_stats_json(sw, o);
	fprintf(f, "\n  ---------- cais-switch statistics: uptime %.1f s, mode %s ----------\n",
		json_real_value(json_object_get(o, "uptime_s")),
		json_string_value(json_object_get(o, "mode")));
	fprintf(f, "  %-4s %12s %14s %10s %12s %14s %10s\n", "port", "RX-packets", "RX-bytes",
		"RX-missed", "TX-packets", "TX-bytes", "TX-dropped");
	json_array_foreach (json_object_get(o, "ports"), i, v)
		fprintf(f,
			"  %-4" JSON_INTEGER_FORMAT " %12" JSON_INTEGER_FORMAT
			" %14" JSON_INTEGER_FORMAT " %10" JSON_INTEGER_FORMAT
			" %12" JSON_INTEGER_FORMAT " %14" JSON_INTEGER_FORMAT
			" %10" JSON_INTEGER_FORMAT "\n",
			geti(v, "port"), geti(v, "rx_packets"), geti(v, "rx_bytes"),
			geti(v, "rx_missed"), geti(v, "tx_packets"), geti(v, "tx_bytes"),
			geti(v, "tx_dropped"));
	fprintf(f,
		"  CAIS: DATA %" JSON_INTEGER_FORMAT ", rounds %" JSON_INTEGER_FORMAT
		", retransmissions %" JSON_INTEGER_FORMAT ", resends %" JSON_INTEGER_FORMAT
		", duplicates %" JSON_INTEGER_FORMAT ", stale %" JSON_INTEGER_FORMAT,
		geti(o, "data_rx"), geti(o, "rounds"), geti(o, "retransmissions"),
		geti(o, "resends"), geti(o, "duplicates"), geti(o, "stale"));
	print_lat(f, json_object_get(o, "completion_us"));
	fprintf(f,
		"\n  L2: forwarded %" JSON_INTEGER_FORMAT ", flooded %" JSON_INTEGER_FORMAT
		", ARP replies %" JSON_INTEGER_FORMAT ", MACs %" JSON_INTEGER_FORMAT
		"; slots %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT "\n",
		geti(o, "l2_forwarded"), geti(o, "l2_flooded"), geti(o, "arp_replies"),
		geti(o, "macs"), geti(o, "slots_used"), geti(o, "slot_capacity"));
	print_nonzero(f, "  REJECTs sent: ", json_object_get(o, "rejects"));
	print_nonzero(f, "  drops: ", json_object_get(o, "drops"));
	json_array_foreach (json_object_get(o, "sessions"), i, v) {
		fprintf(f,
			"  session %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT
			" (n %" JSON_INTEGER_FORMAT ", S %" JSON_INTEGER_FORMAT
			", E %" JSON_INTEGER_FORMAT "): rounds %" JSON_INTEGER_FORMAT
			", DATA %" JSON_INTEGER_FORMAT ", retx %" JSON_INTEGER_FORMAT
			", resends %" JSON_INTEGER_FORMAT ", dup %" JSON_INTEGER_FORMAT
			", stale %" JSON_INTEGER_FORMAT ", overflow %" JSON_INTEGER_FORMAT,
			geti(v, "tenant"), geti(v, "session"), geti(v, "n"), geti(v, "slots"),
			geti(v, "elems_per_packet"), geti(v, "rounds"), geti(v, "data_rx"),
			geti(v, "retx"), geti(v, "resends"), geti(v, "duplicates"),
			geti(v, "stale"), geti(v, "overflow"));
		print_lat(f, json_object_get(v, "completion_us"));
		fputc('\n', f);
	}
	fprintf(f, "  ------------------------------------------------------------------------\n");
	fflush(f);
	json_decref(o);
}
