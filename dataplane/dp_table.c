/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch object and its match tables: the operations behind the
 * control requests (session.add/del, tensor.add/del, lease, mode.set,
 * thresholds.set), one function each, all under ctl_lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "dp_switch.h"

static struct rte_mempool *
pool_create(const struct dp_switch_conf *c, const char *what, unsigned int n, unsigned int data)
{
	char name[RTE_MEMPOOL_NAMESIZE];

	snprintf(name, sizeof(name), "%s_%s", c->name, what);
	/* a cache may hold at most n / 1.5 mbufs */
	return rte_pktmbuf_pool_create(name, n, RTE_MIN((unsigned int)DP_MBUF_CACHE, n / 4), 0,
				       (uint16_t)(data + RTE_PKTMBUF_HEADROOM), c->socket);
}

static int
lcores_create(struct dp_switch *sw, const struct dp_switch_conf *c)
{
	unsigned int i;

	sw->lcores = rte_zmalloc_socket("dp_lcores", sizeof(struct dp_lcore) * c->n_lcores,
					RTE_CACHE_LINE_SIZE, c->socket);
	if (!sw->lcores)
		return -ENOMEM;
	for (i = 0; i < c->n_lcores; i++) {
		struct dp_lcore *lc = &sw->lcores[i];
		char name[RTE_RING_NAMESIZE];

		lc->sw = sw;
		lc->idx = i;
		lc->lcore_id = c->lcore_ids[i];
		lc->out = rte_zmalloc_socket("dp_handoff", sizeof(*lc->out) * c->n_lcores,
					     RTE_CACHE_LINE_SIZE, c->socket);
		if (!lc->out)
			return -ENOMEM;
		if (c->n_lcores > 1) {
			snprintf(name, sizeof(name), "%s_ho%u", c->name, i);
			lc->ring = rte_ring_create(name, DP_HANDOFF_RING, c->socket, RING_F_SC_DEQ);
			if (!lc->ring)
				return -rte_errno;
		}
	}
	return 0;
}

/* rte_hash's key compare for the 8-byte tensor key: one load, not a memcmp call. */
static int
key64_eq(const void *a, const void *b, size_t len)
{
	uint64_t x, y;

	(void)len;
	memcpy(&x, a, sizeof(x));
	memcpy(&y, b, sizeof(y));
	return x != y;
}


struct dp_switch *
dp_switch_create(const struct dp_switch_conf *c)
{
	struct rte_hash_parameters hp = {0};
	struct dp_switch *sw;
	char name[RTE_HASH_NAMESIZE];
	size_t sz;

	if (c->n_lcores == 0 || c->n_lcores > RTE_MAX_LCORE || c->n_ports > DP_MAX_PORTS ||
	    !c->name) {
		rte_errno = EINVAL;
		return NULL;
	}
	sw = rte_zmalloc_socket("dp_switch", sizeof(*sw), RTE_CACHE_LINE_SIZE, c->socket);
	if (!sw) {
		rte_errno = ENOMEM;
		return NULL;
	}
	snprintf(sw->name, sizeof(sw->name), "%s", c->name);
	sw->pcfg.agg_enabled = c->agg_enabled;
	sw->pcfg.agg_ip = c->agg_ip;
	memcpy(sw->pcfg.agg_mac, c->agg_mac.addr_bytes, 6);
	sw->udp_port_be = rte_cpu_to_be_16(c->udp_port);
	sw->pcfg.udp_port = sw->udp_port_be;
	sw->n_ports = c->n_ports;
	sw->n_lcores = c->n_lcores;
	sw->hz = rte_get_tsc_hz();
	sw->start_tsc = rte_rdtsc();
	sw->agg = c->agg ? c->agg : dp_agg_best();
	sw->tx = c->tx;
	sw->tx_ctx = c->tx_ctx;
	sw->mode = DP_MODE_COMPUTE;
	sw->slot_capacity = c->slot_capacity ? c->slot_capacity : DP_DEFAULT_SLOT_CAPACITY;
	sw->slot_usage_threshold = DP_DEFAULT_SLOT_USAGE;
	sw->queue_depth_threshold = DP_DEFAULT_QUEUE_DEPTH;
	{
		unsigned int share = c->high_share ? c->high_share : DP_DEFAULT_HIGH_SHARE;

		if (share > 90)
			share = 90;
		sw->normal_cap = (uint16_t)(DP_TX_BUF * (100 - share) / 100);
		if (sw->normal_cap == 0)
			sw->normal_cap = 1;
	}
	pthread_mutex_init(&sw->ctl_lock, NULL);
	LIST_INIT(&sw->sessions);

	sw->pool = pool_create(c, "pkt", c->mbufs ? c->mbufs : DP_MBUFS,
			       c->mbuf_data ? c->mbuf_data : DP_MBUF_DATA);
	sw->hdr_pool =
	    pool_create(c, "hdr", c->hdr_mbufs ? c->hdr_mbufs : DP_HDR_MBUFS, DP_HDR_MBUF_DATA);
	if (!sw->pool || !sw->hdr_pool)
		goto fail;

	snprintf(name, sizeof(name), "%s_tensors", c->name);
	hp.name = name;
	hp.entries = DP_MAX_TENSORS;
	hp.key_len = sizeof(uint64_t);
	hp.hash_func = rte_hash_crc;
	hp.socket_id = c->socket;
	hp.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF;
	sw->tensors = rte_hash_create(&hp);
	if (!sw->tensors)
		goto fail;
	rte_hash_set_cmp_func(sw->tensors, key64_eq);

	sz = rte_rcu_qsbr_get_memsize(c->n_lcores);
	sw->rcu = rte_zmalloc_socket("dp_rcu", sz, RTE_CACHE_LINE_SIZE, c->socket);
	if (!sw->rcu || rte_rcu_qsbr_init(sw->rcu, c->n_lcores) != 0)
		goto fail;

	sw->l2 = rte_zmalloc_socket("dp_l2", sizeof(*sw->l2), RTE_CACHE_LINE_SIZE, c->socket);
	if (!sw->l2)
		goto fail;
	dp_l2_init(sw->l2, (uint64_t)(c->mac_age_s ? c->mac_age_s : DP_L2_DEFAULT_AGE_S) * sw->hz);

	if (lcores_create(sw, c) != 0)
		goto fail;
	return sw;
fail:
	dp_switch_free(sw);
	rte_errno = ENOMEM;
	return NULL;
}

static void
session_free(struct dp_session *s)
{
	if (!s)
		return;
	if (s->part)
		for (unsigned int i = 0; i < s->n_lcores; i++) {
			free(s->part[i].slots);
			free(s->part[i].acc);
		}
	free(s->part);
	free(s->members);
	free(s);
}

void
dp_switch_free(struct dp_switch *sw)
{
	struct dp_session *s;
	struct dp_tensor *t;

	if (!sw)
		return;
	while ((s = LIST_FIRST(&sw->sessions))) {
		while ((t = LIST_FIRST(&s->tensors))) {
			LIST_REMOVE(t, link);
			free(t);
		}
		LIST_REMOVE(s, link);
		session_free(s);
	}
	if (sw->lcores) {
		for (unsigned int i = 0; i < sw->n_lcores; i++) {
			rte_ring_free(sw->lcores[i].ring);
			rte_free(sw->lcores[i].out);
		}
		rte_free(sw->lcores);
	}
	rte_hash_free(sw->tensors);
	rte_free(sw->rcu);
	rte_free(sw->l2);
	rte_mempool_free(sw->pool);
	rte_mempool_free(sw->hdr_pool);
	pthread_mutex_destroy(&sw->ctl_lock);
	rte_free(sw);
}

void
dp_rcu_online(struct dp_switch *sw, unsigned int idx)
{
	rte_rcu_qsbr_thread_register(sw->rcu, idx);
	rte_rcu_qsbr_thread_online(sw->rcu, idx);
}

void
dp_rcu_offline(struct dp_switch *sw, unsigned int idx)
{
	rte_rcu_qsbr_thread_offline(sw->rcu, idx);
	rte_rcu_qsbr_thread_unregister(sw->rcu, idx);
}

void
dp_rcu_quiescent(struct dp_switch *sw, unsigned int idx)
{
	rte_rcu_qsbr_quiescent(sw->rcu, idx);
}

const struct dp_tensor *
dp_tensor_lookup(const struct dp_switch *sw, uint64_t key)
{
	void *data;

	if (rte_hash_lookup_data(sw->tensors, &key, &data) < 0)
		return NULL;
	return data;
}

static struct dp_session *
session_find(struct dp_switch *sw, uint16_t tenant, uint16_t session)
{
	struct dp_session *s;

	LIST_FOREACH (s, &sw->sessions, link)
		if (s->tenant == tenant && s->session == session)
			return s;
	return NULL;
}

/* Ethernet/IPv4/UDP from the aggregator to a member; lengths and checksum left 0. */
static void
member_template(const struct dp_switch *sw, struct dp_member *m)
{
	dp_frame_hdr(m->hdr, m->mac.addr_bytes, sw->pcfg.agg_mac, sw->pcfg.agg_ip, m->ip,
		     sw->udp_port_be, m->port);
}

/* Slots and accumulators of the part of a session that lcore k owns. */
static int
part_alloc(struct dp_session_part *pt, uint32_t pool, unsigned int k, unsigned int nl,
	   uint16_t elems)
{
	size_t n_sets;

	pt->n_local = pool > k ? (pool - k + nl - 1) / nl : 0;
	if (pt->n_local == 0)
		return 0;
	n_sets = (size_t)pt->n_local * 2;
	pt->slots = aligned_alloc(64, n_sets * sizeof(struct dp_slot));
	/* touched now, by the control thread, so the data path takes no page fault */
	pt->acc = malloc(n_sets * elems * sizeof(int64_t));
	if (!pt->slots || !pt->acc)
		return -ENOMEM;
	memset(pt->slots, 0, n_sets * sizeof(struct dp_slot));
	memset(pt->acc, 0, n_sets * elems * sizeof(int64_t));
	return 0;
}

int
dp_session_add(struct dp_switch *sw, const struct ctl_session *cs, struct ctl_err *err)
{
	struct dp_session *s;
	double limit;
	int rc = 0;

	pthread_mutex_lock(&sw->ctl_lock);
	if (session_find(sw, cs->tenant, cs->session)) {
		rc = ctl_fail(err, EEXIST, "session %u/%u exists", cs->tenant, cs->session);
		goto out;
	}
	if (sw->n_sessions >= DP_MAX_SESSIONS) {
		rc = ctl_fail(err, ENOSPC, "session table full (%u sessions)", DP_MAX_SESSIONS);
		goto out;
	}
	limit = sw->slot_usage_threshold * sw->slot_capacity;
	if ((double)sw->slots_used + cs->slots > limit) {
		rc = ctl_fail(err, ENOSPC,
			      "field 'slots': %u more slots would pass the slot-usage threshold "
			      "(%u of %u used, threshold %.2f)",
			      cs->slots, sw->slots_used, sw->slot_capacity,
			      sw->slot_usage_threshold);
		goto out;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		goto nomem;
	s->tenant = cs->tenant;
	s->session = cs->session;
	s->n = cs->n;
	s->elems = cs->elems;
	s->pool = cs->slots;
	s->priority = cs->priority;
	s->n_lcores = sw->n_lcores;
	LIST_INIT(&s->tensors);
	s->members = calloc(cs->n, sizeof(*s->members));
	s->part = aligned_alloc(RTE_CACHE_LINE_SIZE, sizeof(*s->part) * sw->n_lcores);
	if (!s->members || !s->part) {
		session_free(s);
		goto nomem;
	}
	memset(s->part, 0, sizeof(*s->part) * sw->n_lcores);
	for (unsigned int k = 0; k < sw->n_lcores; k++)
		if (part_alloc(&s->part[k], s->pool, k, sw->n_lcores, s->elems) != 0) {
			session_free(s);
			goto nomem;
		}
	for (unsigned int r = 0; r < cs->n; r++) {
		struct dp_member *m = &s->members[r];

		memcpy(m->mac.addr_bytes, cs->members[r].mac, 6);
		m->ip = cs->members[r].ip;
		m->port = rte_cpu_to_be_16(cs->members[r].port);
		member_template(sw, m);
	}
	LIST_INSERT_HEAD(&sw->sessions, s, link);
	sw->n_sessions++;
	sw->slots_used += s->pool;
	goto out;
nomem:
	rc = ctl_fail(err, ENOSPC, "cannot allocate the slot memory of session %u/%u", cs->tenant,
		      cs->session);
out:
	pthread_mutex_unlock(&sw->ctl_lock);
	return rc;
}

/* Wait until every data lcore has passed a quiescent point. */
static void
rcu_sync(struct dp_switch *sw)
{
	rte_rcu_qsbr_synchronize(sw->rcu, RTE_QSBR_THRID_INVALID);
}

/* Remove a tensor from the hash; freeing waits for the grace period. */
static void
tensor_unpublish(struct dp_switch *sw, struct dp_tensor *t)
{
	t->pos = rte_hash_del_key(sw->tensors, &t->key);
	LIST_REMOVE(t, link);
	sw->n_tensors--;
}

static void
tensor_reclaim(struct dp_switch *sw, struct dp_tensor *t)
{
	if (t->pos >= 0)
		rte_hash_free_key_with_position(sw->tensors, t->pos);
	free(t);
}

int
dp_session_del(struct dp_switch *sw, uint16_t tenant, uint16_t session, struct ctl_err *err)
{
	LIST_HEAD(, dp_tensor) gone = LIST_HEAD_INITIALIZER(gone);
	struct dp_session *s;
	struct dp_tensor *t;
	int rc = 0;

	pthread_mutex_lock(&sw->ctl_lock);
	s = session_find(sw, tenant, session);
	if (!s) {
		rc = ctl_fail(err, ENOENT, "no session %u/%u", tenant, session);
		goto out;
	}
	while ((t = LIST_FIRST(&s->tensors))) {
		tensor_unpublish(sw, t);
		LIST_INSERT_HEAD(&gone, t, link);
	}
	LIST_REMOVE(s, link);
	sw->n_sessions--;
	sw->slots_used -= s->pool;
	rcu_sync(sw);
	while ((t = LIST_FIRST(&gone))) {
		LIST_REMOVE(t, link);
		tensor_reclaim(sw, t);
	}
	session_free(s);
out:
	pthread_mutex_unlock(&sw->ctl_lock);
	return rc;
}

int
dp_tensor_add(struct dp_switch *sw, const struct ctl_tensor *ct, struct ctl_err *err)
{
	struct dp_session *s;
	struct dp_tensor *t;
	int rc = 0, pos;

	pthread_mutex_lock(&sw->ctl_lock);
	s = session_find(sw, ct->tenant, ct->session);
	if (!s) {
		rc = ctl_fail(err, ENOENT, "no session %u/%u", ct->tenant, ct->session);
		goto out;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		rc = ctl_fail(err, ENOSPC, "out of memory");
		goto out;
	}
	t->key = dp_tensor_key(ct->tenant, ct->session, ct->tensor);
	t->s = s;
	t->tensor = ct->tensor;
	t->op = (uint8_t)ct->op;
	t->scale = ct->scale;
	if (rte_hash_lookup(sw->tensors, &t->key) >= 0) {
		free(t);
		rc = ctl_fail(err, EEXIST, "tensor %u of session %u/%u exists", ct->tensor,
			      ct->tenant, ct->session);
		goto out;
	}
	/* the entry is complete before it is published */
	pos = rte_hash_add_key_data(sw->tensors, &t->key, t);
	if (pos < 0) {
		free(t);
		rc = ctl_fail(err, ENOSPC, "tensor table full (%u tensors)", DP_MAX_TENSORS);
		goto out;
	}
	LIST_INSERT_HEAD(&s->tensors, t, link);
	sw->n_tensors++;
out:
	pthread_mutex_unlock(&sw->ctl_lock);
	return rc;
}

int
dp_tensor_del(struct dp_switch *sw, uint16_t tenant, uint16_t session, uint32_t tensor,
	      struct ctl_err *err)
{
	struct dp_session *s;
	struct dp_tensor *t = NULL;
	int rc = 0;

	pthread_mutex_lock(&sw->ctl_lock);
	s = session_find(sw, tenant, session);
	if (s)
		LIST_FOREACH (t, &s->tensors, link)
			if (t->tensor == tensor)
				break;
	if (!t) {
		rc =
		    ctl_fail(err, ENOENT, "no tensor %u in session %u/%u", tensor, tenant, session);
		goto out;
	}
	tensor_unpublish(sw, t);
	rcu_sync(sw);
	tensor_reclaim(sw, t);
out:
	pthread_mutex_unlock(&sw->ctl_lock);
	return rc;
}

int
dp_lease(struct dp_switch *sw, uint32_t ttl_ms, struct ctl_err *err)
{
	uint64_t deadline = rte_rdtsc() + (uint64_t)ttl_ms * sw->hz / 1000;

	(void)err;
	__atomic_store_n(&sw->lease_deadline, deadline, __ATOMIC_RELEASE);
	__atomic_store_n(&sw->mode, DP_MODE_COMPUTE, __ATOMIC_RELEASE);
	return 0;
}

int
dp_mode_set(struct dp_switch *sw, enum ctl_mode mode, struct ctl_err *err)
{
	(void)err;
	__atomic_store_n(&sw->mode, (int)mode, __ATOMIC_RELEASE);
	return 0;
}

void
dp_lease_check(struct dp_switch *sw, uint64_t now)
{
	uint64_t deadline = __atomic_load_n(&sw->lease_deadline, __ATOMIC_ACQUIRE);

	if (deadline && (int64_t)(now - deadline) > 0 &&
	    __atomic_load_n(&sw->mode, __ATOMIC_RELAXED) == DP_MODE_COMPUTE) {
		/* only this expiry may switch modes: a renewal in between wins */
		if (__atomic_compare_exchange_n(&sw->lease_deadline, &deadline, 0, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			__atomic_store_n(&sw->mode, DP_MODE_FWD_ONLY, __ATOMIC_RELEASE);
	}
}

int
dp_thresholds_set(struct dp_switch *sw, const struct ctl_thresholds *t, struct ctl_err *err)
{
	(void)err;
	pthread_mutex_lock(&sw->ctl_lock);
	if (t->has_queue_depth)
		__atomic_store_n(&sw->queue_depth_threshold, t->queue_depth, __ATOMIC_RELAXED);
	if (t->has_slot_usage)
		sw->slot_usage_threshold = t->slot_usage;
	pthread_mutex_unlock(&sw->ctl_lock);
	return 0;
}

static int
op_ping(void *ctx, json_t *res, struct ctl_err *err)
{
	struct dp_switch *sw = ctx;

	(void)err;
	json_object_set_new(
	    res, "mode", json_string(ctl_mode_name(__atomic_load_n(&sw->mode, __ATOMIC_RELAXED))));
	json_object_set_new(res, "uptime_s",
			    json_real((double)(rte_rdtsc() - sw->start_tsc) / (double)sw->hz));
	json_object_set_new(res, "version", json_string(CAIS_VERSION_STRING));
	return 0;
}

static int
op_session_add(void *ctx, const struct ctl_session *s, struct ctl_err *err)
{
	return dp_session_add(ctx, s, err);
}

static int
op_session_del(void *ctx, uint16_t tenant, uint16_t session, struct ctl_err *err)
{
	return dp_session_del(ctx, tenant, session, err);
}

static int
op_tensor_add(void *ctx, const struct ctl_tensor *t, struct ctl_err *err)
{
	return dp_tensor_add(ctx, t, err);
}

static int
op_tensor_del(void *ctx, uint16_t tenant, uint16_t session, uint32_t tensor, struct ctl_err *err)
{
	return dp_tensor_del(ctx, tenant, session, tensor, err);
}

static int
op_lease(void *ctx, uint32_t ttl_ms, struct ctl_err *err)
{
	return dp_lease(ctx, ttl_ms, err);
}

static int
op_mode_set(void *ctx, enum ctl_mode mode, struct ctl_err *err)
{
	return dp_mode_set(ctx, mode, err);
}

static int
op_thresholds_set(void *ctx, const struct ctl_thresholds *t, struct ctl_err *err)
{
	return dp_thresholds_set(ctx, t, err);
}

static int
op_stats_get(void *ctx, json_t *res, struct ctl_err *err)
{
	(void)err;
	return dp_stats_json(ctx, res);
}

void
dp_switch_ctl_ops(struct dp_switch *sw, struct ctl_ops *ops)
{
	ops->ctx = sw;
	ops->ping = op_ping;
	ops->session_add = op_session_add;
	ops->session_del = op_session_del;
	ops->tensor_add = op_tensor_add;
	ops->tensor_del = op_tensor_del;
	ops->lease = op_lease;
	ops->mode_set = op_mode_set;
	ops->thresholds_set = op_thresholds_set;
	ops->stats_get = op_stats_get;
}
