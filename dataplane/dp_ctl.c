/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control requests on the switch: each struct ctl_ops function converts
 * the checked request (control/ctl.h) to the data path's own settings and
 * calls the one operation that serves it (dp_table.h, dp_switch.h); and the
 * JSON of ping and stats.get, the lcores' private counters summed up.
 */
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "ctl_fields.h"
#include "dp_ctl.h"
#include "dp_switch.h"

/* ---- conversions ---- */

static enum ctl_mode
mode_to_ctl(int mode)
{
	return mode == DP_MODE_FWD_ONLY ? CTL_MODE_FORWARD_ONLY : CTL_MODE_COMPUTE;
}

static const char *
mode_name(const struct dp_switch *sw)
{
	return ctl_mode_name(mode_to_ctl(__atomic_load_n(&sw->mode, __ATOMIC_RELAXED)));
}

static void
session_conf(struct dp_session_conf *c, const struct ctl_session *cs)
{
	c->tenant = cs->tenant;
	c->session = cs->session;
	c->n = cs->n;
	c->slots = cs->slots;
	c->elems = cs->elems;
	c->priority = cs->priority == CTL_PRIO_HIGH ? DP_PRIO_HIGH : DP_PRIO_NORMAL;
	c->first_rank = cs->first_rank;
	c->loss_hints = cs->loss_hints != 0;
	for (unsigned int r = 0; r < cs->n; r++) {
		memcpy(c->members[r].mac, cs->members[r].mac, 6);
		c->members[r].ip = cs->members[r].ip;
		c->members[r].port = cs->members[r].port;
		c->members[r].sw_port = cs->members[r].switch_port;
		c->members[r].ports = cs->members[r].ports;
	}
	c->uplink.on = cs->uplink.on;
	if (cs->uplink.on) {
		memcpy(c->uplink.mac, cs->uplink.mac, 6);
		c->uplink.ip = cs->uplink.ip;
		c->uplink.port = cs->uplink.port;
		c->uplink.rank = cs->uplink.rank;
		c->uplink.sw_port = cs->uplink.switch_port;
	}
}

/* A table operation's result as the request's: its code, its reason. */
static int
table_result(int rc, const struct dp_err *why, struct ctl_err *err)
{
	return rc ? ctl_fail(err, -rc, "%s", why->msg) : 0;
}

/* ---- the operations ---- */

static int
op_ping(void *ctx, json_t *res, struct ctl_err *err)
{
	struct dp_switch *sw = ctx;

	(void)err;
	json_object_set_new(res, "mode", json_string(mode_name(sw)));
	json_object_set_new(res, "uptime_s",
			    json_real((double)(rte_rdtsc() - sw->start_tsc) / (double)sw->hz));
	json_object_set_new(res, "version", json_string(CAIS_VERSION_STRING));
	json_object_set_new(res, "lcores", json_integer(sw->n_lcores));
	return 0;
}

static int
op_session_add(void *ctx, const struct ctl_session *cs, struct ctl_err *err)
{
	struct dp_switch *sw = ctx;
	struct dp_session_conf c;
	struct dp_err why;

	session_conf(&c, cs);
	if (c.uplink.on && c.uplink.sw_port >= sw->n_ports)
		return ctl_fail(err, EINVAL,
				"uplink: field 'switch_port' %u: the switch has ports 0..%u",
				c.uplink.sw_port, sw->n_ports - 1u);
	if (c.uplink.on && c.uplink.port == 0)
		c.uplink.port = rte_be_to_cpu_16(sw->pcfg.udp_port);
	for (unsigned int r = 0; r < c.n; r++)
		if (c.members[r].sw_port >= (int)sw->n_ports)
			return ctl_fail(err, EINVAL,
					"members[%u]: field 'switch_port' %d: the switch has ports "
					"0..%u",
					r, c.members[r].sw_port, sw->n_ports - 1u);
	return table_result(dp_session_add(&sw->tables, &c, &why), &why, err);
}

static int
op_session_del(void *ctx, uint16_t tenant, uint16_t session, struct ctl_err *err)
{
	struct dp_switch *sw = ctx;
	struct dp_err why;

	return table_result(dp_session_del(&sw->tables, tenant, session, &why), &why, err);
}

static int
op_tensor_add(void *ctx, const struct ctl_tensor *ct, struct ctl_err *err)
{
	struct dp_switch *sw = ctx;
	const struct dp_tensor_conf c = {
	    .tenant = ct->tenant,
	    .session = ct->session,
	    .tensor = ct->tensor,
	    .op = ct->op,
	    .wire = ct->wire,
	    .scale = ct->scale,
	};
	struct dp_err why;

	return table_result(dp_tensor_add(&sw->tables, &c, &why), &why, err);
}

static int
op_tensor_del(void *ctx, uint16_t tenant, uint16_t session, uint32_t tensor, struct ctl_err *err)
{
	struct dp_switch *sw = ctx;
	struct dp_err why;

	return table_result(dp_tensor_del(&sw->tables, tenant, session, tensor, &why), &why, err);
}

static int
op_lease(void *ctx, uint32_t ttl_ms, struct ctl_err *err)
{
	(void)err;
	dp_lease(ctx, ttl_ms);
	return 0;
}

static int
op_mode_set(void *ctx, enum ctl_mode mode, struct ctl_err *err)
{
	(void)err;
	dp_mode_set(ctx, mode == CTL_MODE_FORWARD_ONLY ? DP_MODE_FWD_ONLY : DP_MODE_COMPUTE);
	return 0;
}

static int
op_thresholds_set(void *ctx, const struct ctl_thresholds *ct, struct ctl_err *err)
{
	const struct dp_thresholds t = {
	    .has_queue_depth = ct->has_queue_depth,
	    .has_slot_usage = ct->has_slot_usage,
	    .queue_depth = ct->queue_depth,
	    .slot_usage = ct->slot_usage,
	};

	(void)err;
	dp_thresholds_set(ctx, &t);
	return 0;
}

static int
op_stats_get(void *ctx, int64_t after, json_t *res, struct ctl_err *err)
{
	(void)err;
	return dp_stats_json(ctx, after, res);
}

void
dp_switch_ctl_ops(struct dp_switch *sw, struct ctl_ops *ops)
{
	*ops = (struct ctl_ops){
	    .ctx = sw,
	    .ping = op_ping,
	    .session_add = op_session_add,
	    .session_del = op_session_del,
	    .tensor_add = op_tensor_add,
	    .tensor_del = op_tensor_del,
	    .lease = op_lease,
	    .mode_set = op_mode_set,
	    .thresholds_set = op_thresholds_set,
	    .stats_get = op_stats_get,
	};
}

/* ---- stats.get ---- */

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
	X(spoofed)                                                                                 \
	X(abandoned)                                                                               \
	X(overflow)                                                                                \
	X(up_tx)                                                                                   \
	X(up_resent)                                                                               \
	X(up_results)                                                                              \
	X(up_rejects)

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
tensors_json(const struct dp_session *s)
{
	const struct dp_tensor *t;
	json_t *tensors = json_array();

	LIST_FOREACH (t, &s->tensors, link) {
		json_t *to = json_object();

		json_object_set_new(to, "tensor", json_integer(t->tensor));
		json_object_set_new(to, "op", json_string(cais_op_name(t->op)));
		json_object_set_new(to, "wire", json_string(cais_dtype_name(t->wire)));
		json_object_set_new(to, "scale", json_real(t->scale));
		json_array_append_new(tensors, to);
	}
	return tensors;
}

/* The switch port each member is bound to (docs/PROTOCOL.md E5), by rank; -1: not yet. */
static json_t *
bound_json(const struct dp_session *s)
{
	json_t *a = json_array();

	for (unsigned int r = 0; r < s->n; r++)
		json_array_append_new(
		    a, json_integer((json_int_t)__atomic_load_n(&s->members[r].bound,
								__ATOMIC_RELAXED) -
				    1));
	return a;
}

/* Each member's flows (E7), by rank. */
static json_t *
flows_json(const struct dp_session *s)
{
	json_t *a = json_array();

	for (unsigned int r = 0; r < s->n; r++)
		json_array_append_new(a, json_integer(s->members[r].n_ports));
	return a;
}

/* A session's settings, tensors and counters (c: its counters summed). */
static json_t *
session_json(const struct dp_switch *sw, const struct dp_session *s,
	     const struct dp_session_counters *c)
{
	json_t *o = json_object();

	json_object_set_new(o, "tenant", json_integer(s->tenant));
	json_object_set_new(o, "session", json_integer(s->session));
	json_object_set_new(o, "n", json_integer(s->n));
	json_object_set_new(o, "slots", json_integer(s->pool));
	json_object_set_new(o, "elems_per_packet", json_integer(s->elems));
	json_object_set_new(o, "priority", json_integer(s->priority));
	json_object_set_new(o, "first_rank", json_integer(s->first_rank));
	json_object_set_new(o, "loss_hints", json_integer(s->loss_hints));
	json_object_set_new(o, "tensors", tensors_json(s));
	json_object_set_new(o, "switch_ports", bound_json(s));
	json_object_set_new(o, "flows", flows_json(s));
	if (s->up.on) {
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &s->up.ip, ip, sizeof(ip));
		json_object_set_new(o, "uplink",
				    json_pack("{s:s, s:i, s:i, s:i}", "ip", ip, "port",
					      rte_be_to_cpu_16(s->up.port), "rank", s->up.rank,
					      "switch_port", s->up.sw_port));
	}
#define SC_JSON(f) json_object_set_new(o, #f, json_integer((json_int_t)c->f));
	SC_FIELDS(SC_JSON)
#undef SC_JSON
	json_object_set_new(o, "rejects", reasons_json(c->rejects));
	json_object_set_new(o, "completion_us", percentiles(sw, c->hist));
	return o;
}

static void
total_add(struct dp_session_counters *total, const struct dp_session_counters *c)
{
#define SC_ADD(f) total->f += c->f;
	SC_FIELDS(SC_ADD)
#undef SC_ADD
	for (unsigned int b = 0; b < CMN_HIST_BUCKETS; b++)
		total->hist[b] += c->hist[b];
}

static json_t *
port_json(const struct dp_switch *sw, uint16_t p)
{
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
	return o;
}

static json_t *
ports_json(const struct dp_switch *sw)
{
	json_t *arr = json_array();

	for (uint16_t p = 0; p < sw->n_ports; p++)
		json_array_append_new(arr, port_json(sw, p));
	return arr;
}

/* The switch-wide counters of every lcore summed; *depth: the deepest lcore queue. */
static void
lcore_sum(const struct dp_switch *sw, struct dp_lcore_counters *sum, uint64_t *depth)
{
	for (unsigned int k = 0; k < sw->n_lcores; k++) {
		const struct dp_lcore *l = &sw->lcores[k];

		for (unsigned int d = 0; d < DP_DROP_MAX; d++)
			sum->drops[d] += l->c.drops[d];
		for (unsigned int r = 0; r < CAIS_R_MAX; r++)
			sum->rejects[r] += l->c.rejects[r];
		sum->arp_replies += l->c.arp_replies;
		sum->l2_forwarded += l->c.l2_forwarded;
		sum->l2_flooded += l->c.l2_flooded;
		sum->data_rx += l->c.data_rx;
		sum->handoffs += l->c.handoffs;
		sum->acks += l->c.acks;
		sum->idle_sleeps += l->c.idle_sleeps;
		sum->idle_tsc += l->c.idle_tsc;
		sum->acks_limited += l->c.acks_limited;
		sum->nacks += l->c.nacks;
		sum->queries += l->c.queries;
		sum->keep_refused += l->c.keep_refused;
		if (l->qdepth > *depth)
			*depth = l->qdepth;
	}
}

/* uptime_s, mode, lease_left_ms (with a lease). */
static void
state_json(const struct dp_switch *sw, uint64_t now, json_t *out)
{
	uint64_t deadline = __atomic_load_n(&sw->lease_deadline, __ATOMIC_RELAXED);

	json_object_set_new(out, "uptime_s", json_real((double)(now - sw->start_tsc) / sw->hz));
	json_object_set_new(out, "mode", json_string(mode_name(sw)));
	json_object_set_new(out, "lcores", json_integer(sw->n_lcores));
	json_object_set_new(out, "mode_held", json_boolean(__atomic_load_n(&sw->held, __ATOMIC_RELAXED)));
	if (deadline)
		json_object_set_new(
		    out, "lease_left_ms",
		    json_integer((int64_t)(deadline - now) > 0
				     ? (json_int_t)((deadline - now) * 1000 / sw->hz)
				     : 0));
}

/* The switch-wide counters, from drops to queue_depth. */
static void
counters_json(const struct dp_switch *sw, uint64_t now, json_t *out)
{
	struct dp_lcore_counters lc = {0};
	uint64_t depth = 0;
	json_t *drops = json_object();

	lcore_sum(sw, &lc, &depth);
	for (unsigned int d = 1; d < DP_DROP_MAX; d++)
		json_object_set_new(drops, dp_drop_name(d), json_integer((json_int_t)lc.drops[d]));
	json_object_set_new(out, "drops", drops);
	json_object_set_new(out, "rejects", reasons_json(lc.rejects));
	json_object_set_new(out, "data_rx", json_integer((json_int_t)lc.data_rx));
	json_object_set_new(out, "arp_replies", json_integer((json_int_t)lc.arp_replies));
	json_object_set_new(out, "l2_forwarded", json_integer((json_int_t)lc.l2_forwarded));
	json_object_set_new(out, "l2_flooded", json_integer((json_int_t)lc.l2_flooded));
	json_object_set_new(out, "handoffs", json_integer((json_int_t)lc.handoffs));
	json_object_set_new(out, "acks", json_integer((json_int_t)lc.acks));
	json_object_set_new(out, "idle_sleep_us", json_integer(sw->idle_sleep_us));
	json_object_set_new(out, "idle_sleeps", json_integer((json_int_t)lc.idle_sleeps));
	json_object_set_new(out, "idle_s", json_real((double)lc.idle_tsc / (double)sw->hz));
	json_object_set_new(out, "acks_limited", json_integer((json_int_t)lc.acks_limited));
	json_object_set_new(out, "nacks", json_integer((json_int_t)lc.nacks));
	json_object_set_new(out, "queries", json_integer((json_int_t)lc.queries));
	json_object_set_new(out, "keep_refused", json_integer((json_int_t)lc.keep_refused));
	json_object_set_new(out, "mbufs", json_integer(sw->pool->size));
	json_object_set_new(out, "mbufs_free", json_integer(rte_mempool_avail_count(sw->pool)));
	json_object_set_new(out, "macs", json_integer(dp_l2_count(sw->l2, now)));
	json_object_set_new(out, "queue_depth", json_integer((json_int_t)depth));
}

static int
session_key_cmp(const void *a, const void *b)
{
	uint32_t x = (*(const struct dp_session *const *)a)->tenant << 16 |
		     (*(const struct dp_session *const *)a)->session;
	uint32_t y = (*(const struct dp_session *const *)b)->tenant << 16 |
		     (*(const struct dp_session *const *)b)->session;

	return x < y ? -1 : x > y;
}

/*
 * The sessions after key after (-1: all) in key order, a page of them
 * (control/ctl_fields.h), with "next" when more follow. The counters of
 * every session go to total, listed or not. Under the tables' lock.
 */
static void
sessions_json(struct dp_switch *sw, int64_t after, json_t *out, struct dp_session_counters *total)
{
	static const struct dp_session *sorted[DP_MAX_SESSIONS]; /* the control thread's */
	struct ctl_page page = {.arr = json_array()};
	struct dp_session_counters c;
	const struct dp_session *s;
	unsigned int n = 0, last = 0;

	LIST_FOREACH (s, &sw->tables.sessions, link)
		if (n < DP_MAX_SESSIONS)
			sorted[n++] = s;
	qsort(sorted, n, sizeof(sorted[0]), session_key_cmp);
	for (unsigned int i = 0; i < n; i++) {
		uint32_t key = (uint32_t)sorted[i]->tenant << 16 | sorted[i]->session;

		session_sum(sorted[i], &c);
		total_add(total, &c);
		if ((int64_t)key > after && !page.full &&
		    ctl_page_add(&page, session_json(sw, sorted[i], &c)))
			last = key;
	}
	json_object_set_new(out, "sessions", page.arr);
	if (page.full)
		json_object_set_new(out, "next", json_integer(last));
}

/* Slot usage and memory, thresholds and sessions, read under the tables' lock; total: the sessions' sum. */
static void
tables_json(struct dp_switch *sw, int64_t after, json_t *out, struct dp_session_counters *total)
{
	struct dp_tables *t = &sw->tables;
	json_t *th = json_object();

	dp_tables_lock(t);
	sessions_json(sw, after, out, total);
	json_object_set_new(out, "slots_used", json_integer(t->slots_used));
	json_object_set_new(out, "slot_capacity", json_integer(t->slot_capacity));
	json_object_set_new(out, "slot_usage", json_real((double)t->slots_used / t->slot_capacity));
	json_object_set_new(out, "slot_mem_used", json_integer((json_int_t)t->slot_mem_used));
	json_object_set_new(out, "slot_mem", json_integer((json_int_t)t->slot_mem_cap));
	json_object_set_new(
	    th, "queue_depth",
	    json_integer(__atomic_load_n(&sw->queue_depth_threshold, __ATOMIC_RELAXED)));
	json_object_set_new(th, "slot_usage", json_real(t->slot_usage_threshold));
	dp_tables_unlock(t);
	json_object_set_new(out, "thresholds", th);
}

int
dp_stats_json(struct dp_switch *sw, int64_t after, json_t *out)
{
	struct dp_session_counters total = {0};
	uint64_t now = rte_rdtsc();

	state_json(sw, now, out);
	json_object_set_new(out, "ports", ports_json(sw));
	counters_json(sw, now, out);
	tables_json(sw, after, out, &total);
	json_object_set_new(out, "rounds", json_integer((json_int_t)total.rounds));
	json_object_set_new(out, "retransmissions", json_integer((json_int_t)total.retx));
	json_object_set_new(out, "resends", json_integer((json_int_t)total.resends));
	json_object_set_new(out, "duplicates", json_integer((json_int_t)total.duplicates));
	json_object_set_new(out, "stale", json_integer((json_int_t)total.stale));
	json_object_set_new(out, "completion_us", percentiles(sw, total.hist));
	return 0;
}
