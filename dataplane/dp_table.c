/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The match tables' control side: the operations behind session.add/del and
 * tensor.add/del, one function each, all under the tables' lock. The data
 * path reads only the tensor hash (dp_tensor_lookup(), from dp_match.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_hash_crc.h>
#include <rte_mbuf.h>

#include "dp_frame.h"
#include "dp_rcu.h"
#include "dp_table.h"

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

int
dp_tables_init(struct dp_tables *t, const struct dp_tables_conf *c)
{
	char name[RTE_HASH_NAMESIZE];
	struct rte_hash_parameters hp = {
	    .name = name,
	    .entries = DP_MAX_TENSORS,
	    .key_len = sizeof(uint64_t),
	    .hash_func = rte_hash_crc,
	    .socket_id = c->socket,
	    .extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF,
	};

	t->rcu = c->rcu;
	t->n_lcores = c->n_lcores;
	t->agg = *c->agg;
	t->slot_capacity = c->slot_capacity ? c->slot_capacity : DP_DEFAULT_SLOT_CAPACITY;
	t->slot_mem_cap = c->slot_mem ? c->slot_mem : DP_DEFAULT_SLOT_MEM;
	t->slot_usage_threshold = DP_DEFAULT_SLOT_USAGE;
	pthread_mutex_init(&t->lock, NULL);
	LIST_INIT(&t->sessions);
	snprintf(name, sizeof(name), "%s_tensors", c->name);
	t->tensors = rte_hash_create(&hp);
	if (!t->tensors)
		return -ENOMEM;
	rte_hash_set_cmp_func(t->tensors, key64_eq);
	return 0;
}

static void
session_free(struct dp_session *s)
{
	if (!s)
		return;
	if (s->part)
		for (unsigned int i = 0; i < s->n_lcores; i++) {
			struct dp_session_part *pt = &s->part[i];

			/* rounds still open keep DATA: back to their pools */
			for (size_t k = 0; pt->kept && k < (size_t)pt->n_local * 2 * s->keep; k++)
				rte_pktmbuf_free(pt->kept[k]);
			free(pt->kept);
			free(pt->slots);
			free(pt->acc);
		}
	free(s->part);
	free(s->members);
	free(s);
}

void
dp_tables_fini(struct dp_tables *t)
{
	struct dp_session *s;
	struct dp_tensor *tn;

	while ((s = LIST_FIRST(&t->sessions))) {
		while ((tn = LIST_FIRST(&s->tensors))) {
			LIST_REMOVE(tn, link);
			free(tn);
		}
		LIST_REMOVE(s, link);
		session_free(s);
	}
	rte_hash_free(t->tensors);
	t->tensors = NULL;
	pthread_mutex_destroy(&t->lock);
}

/* Say why an operation refused. @return -code */
static int __attribute__((format(printf, 3, 4)))
refuse(struct dp_err *why, int code, const char *fmt, ...)
{
	va_list ap;

	if (why) {
		va_start(ap, fmt);
		vsnprintf(why->msg, sizeof(why->msg), fmt, ap);
		va_end(ap);
	}
	return -code;
}

static struct dp_session *
session_find(struct dp_tables *t, uint16_t tenant, uint16_t session)
{
	struct dp_session *s;

	LIST_FOREACH (s, &t->sessions, link)
		if (s->tenant == tenant && s->session == session)
			return s;
	return NULL;
}

/*
 * Members whose DATA a round of a session so configured keeps (DP_KEEP_*):
 * all n with at most DP_KEEP_RANKS and no uplink (a leaf's round goes up
 * and completes on the spine's RESULT), else none.
 */
static uint16_t
keep_of(const struct dp_session_conf *c)
{
	return c->n <= DP_KEEP_RANKS && !c->uplink.on ? c->n : 0;
}

/* Slots and accumulators of the part of a session that lcore k owns. */
static int
part_alloc(struct dp_session_part *pt, uint32_t pool, unsigned int k, unsigned int nl,
	   uint16_t elems, uint16_t keep)
{
	size_t n_sets;

	pt->n_local = pool > k ? (pool - k + nl - 1) / nl : 0;
	if (pt->n_local == 0)
		return 0;
	n_sets = (size_t)pt->n_local * 2;
	pt->slots = aligned_alloc(64, n_sets * sizeof(struct dp_slot));
	/* touched now, by the control thread, so the data path takes no page fault */
	pt->acc = malloc(n_sets * elems * sizeof(int64_t));
	pt->kept = keep ? calloc(n_sets * keep, sizeof(*pt->kept)) : NULL;
	if (!pt->slots || !pt->acc || (keep && !pt->kept))
		return -ENOMEM;
	memset(pt->slots, 0, n_sets * sizeof(struct dp_slot));
	memset(pt->acc, 0, n_sets * elems * sizeof(int64_t));
	return 0;
}

/* A member as DATA binds it and RESULTs address it: its headers from the aggregator, built once. */
static void
member_set(const struct dp_tables *t, struct dp_member *m, const struct dp_member_conf *c)
{
	memcpy(m->mac, c->mac, 6);
	m->ip = c->ip;
	m->port = rte_cpu_to_be_16(c->port);
	m->port_h = c->port;
	m->n_ports = c->ports ? c->ports : 1;
	m->bound = c->sw_port >= 0 ? (uint32_t)c->sw_port + 1 : 0;
	dp_frame_hdr(m->hdr, m->mac, t->agg.agg_mac, t->agg.agg_ip, m->ip, t->agg.udp_port,
		     m->port);
}

/* A session entry with its members and slot arrays, not yet in the list; NULL: no memory. */
static struct dp_session *
session_new(const struct dp_tables *t, const struct dp_session_conf *c)
{
	struct dp_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->tenant = c->tenant;
	s->session = c->session;
	s->n = c->n;
	s->elems = c->elems;
	s->pool = c->slots;
	s->priority = c->priority;
	s->first_rank = c->first_rank;
	s->loss_hints = c->loss_hints;
	s->keep = keep_of(c);
	s->n_lcores = t->n_lcores;
	s->lanes_be = rte_cpu_to_be_16(s->loss_hints ? (uint16_t)t->n_lcores : 0);
	LIST_INIT(&s->tensors);
	s->members = calloc(c->n, sizeof(*s->members));
	s->part = aligned_alloc(RTE_CACHE_LINE_SIZE, sizeof(*s->part) * t->n_lcores);
	if (!s->members || !s->part)
		goto nomem;
	memset(s->part, 0, sizeof(*s->part) * t->n_lcores);
	for (unsigned int k = 0; k < t->n_lcores; k++)
		if (part_alloc(&s->part[k], s->pool, k, t->n_lcores, s->elems, s->keep) != 0)
			goto nomem;
	for (unsigned int r = 0; r < c->n; r++)
		member_set(t, &s->members[r], &c->members[r]);
	if (c->uplink.on) {
		s->up.on = true;
		s->up.rank = c->uplink.rank;
		s->up.sw_port = c->uplink.sw_port;
		s->up.ip = c->uplink.ip;
		s->up.port = rte_cpu_to_be_16(c->uplink.port);
		memcpy(s->up.mac, c->uplink.mac, 6);
		dp_frame_hdr(s->up.hdr, s->up.mac, t->agg.agg_mac, t->agg.agg_ip, s->up.ip,
			     t->agg.udp_port, s->up.port);
	}
	return s;
nomem:
	session_free(s);
	return NULL;
}

uint64_t
dp_session_mem(uint32_t pool, uint16_t elems, uint16_t keep, unsigned int n_lcores)
{
	uint64_t sets = 0;

	/* what part_alloc() takes for every lcore's part */
	for (unsigned int k = 0; k < n_lcores; k++)
		sets += pool > k ? 2 * (uint64_t)((pool - k + n_lcores - 1) / n_lcores) : 0;
	return sets * (sizeof(struct dp_slot) + (uint64_t)elems * sizeof(int64_t) +
		       (uint64_t)keep * sizeof(struct rte_mbuf *));
}

/*
 * Members the switch itself answers for cannot be hosts (the ctl side
 * checked what needs no switch: unicast, host addresses, distinct).
 */
static int
members_usable(const struct dp_tables *t, const struct dp_session_conf *c, struct dp_err *why)
{
	for (unsigned int r = 0; r < c->n; r++) {
		if (c->members[r].ip == t->agg.agg_ip)
			return refuse(why, EINVAL,
				      "members[%u]: field 'ip' is the aggregator's address", r);
		if (memcmp(c->members[r].mac, t->agg.agg_mac, 6) == 0)
			return refuse(why, EINVAL, "members[%u]: field 'mac' is the aggregator's MAC",
				      r);
		if (c->members[r].ports > 1 && c->slots % c->members[r].ports)
			return refuse(why, EINVAL,
				      "members[%u]: field 'ports' (%u) must divide 'slots' (%u)", r,
				      c->members[r].ports, c->slots);
	}
	if (!c->uplink.on)
		return 0;
	if (c->uplink.ip == t->agg.agg_ip || memcmp(c->uplink.mac, t->agg.agg_mac, 6) == 0)
		return refuse(
		    why, EINVAL,
		    "uplink: fields 'ip' and 'mac' are the spine's, not this switch's own");
	if (c->elems > CAIS_UPLINK_MAX_ELEMS)
		return refuse(why, EINVAL,
			      "field 'elems_per_packet' %u: a session with an uplink carries at "
			      "most %u (its partial sums go up as 8-byte PARTIAL64)",
			      c->elems, CAIS_UPLINK_MAX_ELEMS);
	return 0;
}

int
dp_session_add(struct dp_tables *t, const struct dp_session_conf *c, struct dp_err *why)
{
	struct dp_session *s;
	uint64_t mem;
	int rc = 0;

	pthread_mutex_lock(&t->lock);
	if (session_find(t, c->tenant, c->session)) {
		rc = refuse(why, EEXIST, "session %u/%u exists", c->tenant, c->session);
		goto out;
	}
	if (t->n_sessions >= DP_MAX_SESSIONS) {
		rc = refuse(why, ENOSPC, "session table full (%u sessions)", DP_MAX_SESSIONS);
		goto out;
	}
	if ((rc = members_usable(t, c, why)))
		goto out;
	mem = dp_session_mem(c->slots, c->elems, keep_of(c), t->n_lcores);
	if (t->slot_mem_used + mem > t->slot_mem_cap) {
		rc = refuse(why, ENOSPC,
			    "fields 'slots' x 'elems_per_packet': the slot arrays would take %" PRIu64
			    " MiB, %" PRIu64 " MiB of the switch's %" PRIu64
			    " MiB are free (cais-switch --slot-mem)",
			    mem >> 20, (t->slot_mem_cap - t->slot_mem_used) >> 20,
			    t->slot_mem_cap >> 20);
		goto out;
	}
	if ((double)t->slots_used + c->slots > t->slot_usage_threshold * t->slot_capacity) {
		rc = refuse(why, ENOSPC,
			    "field 'slots': %u more slots would pass the slot-usage threshold "
			    "(%u of %u used, threshold %.2f)",
			    c->slots, t->slots_used, t->slot_capacity, t->slot_usage_threshold);
		goto out;
	}
	s = session_new(t, c);
	if (!s) {
		rc = refuse(why, ENOSPC, "cannot allocate the slot memory of session %u/%u",
			    c->tenant, c->session);
		goto out;
	}
	LIST_INSERT_HEAD(&t->sessions, s, link);
	t->n_sessions++;
	t->slots_used += s->pool;
	t->slot_mem_used += mem;
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* Remove a tensor from the hash; freeing waits for the grace period. */
static void
tensor_unpublish(struct dp_tables *t, struct dp_tensor *tn)
{
	tn->pos = rte_hash_del_key(t->tensors, &tn->key);
	LIST_REMOVE(tn, link);
	t->n_tensors--;
}

static void
tensor_reclaim(struct dp_tables *t, struct dp_tensor *tn)
{
	if (tn->pos >= 0)
		rte_hash_free_key_with_position(t->tensors, tn->pos);
	free(tn);
}

int
dp_session_del(struct dp_tables *t, uint16_t tenant, uint16_t session, struct dp_err *why)
{
	LIST_HEAD(, dp_tensor) gone = LIST_HEAD_INITIALIZER(gone);
	struct dp_session *s;
	struct dp_tensor *tn;
	int rc = 0;

	pthread_mutex_lock(&t->lock);
	s = session_find(t, tenant, session);
	if (!s) {
		rc = refuse(why, ENOENT, "no session %u/%u", tenant, session);
		goto out;
	}
	while ((tn = LIST_FIRST(&s->tensors))) {
		tensor_unpublish(t, tn);
		LIST_INSERT_HEAD(&gone, tn, link);
	}
	LIST_REMOVE(s, link);
	t->n_sessions--;
	t->slots_used -= s->pool;
	t->slot_mem_used -= dp_session_mem(s->pool, s->elems, s->keep, s->n_lcores);
	dp_rcu_synchronize(t->rcu);
	while ((tn = LIST_FIRST(&gone))) {
		LIST_REMOVE(tn, link);
		tensor_reclaim(t, tn);
	}
	session_free(s);
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int
dp_tensor_add(struct dp_tables *t, const struct dp_tensor_conf *c, struct dp_err *why)
{
	struct dp_session *s;
	struct dp_tensor *tn;
	int rc = 0;

	/* the data path indexes its kernels by it */
	if (c->wire >= CAIS_DT_COUNT)
		return refuse(why, EINVAL, "field 'wire': unknown wire dtype %u", c->wire);
	pthread_mutex_lock(&t->lock);
	s = session_find(t, c->tenant, c->session);
	if (!s) {
		rc = refuse(why, ENOENT, "no session %u/%u", c->tenant, c->session);
		goto out;
	}
	tn = calloc(1, sizeof(*tn));
	if (!tn) {
		rc = refuse(why, ENOSPC, "out of memory");
		goto out;
	}
	tn->key = dp_tensor_key(c->tenant, c->session, c->tensor);
	tn->s = s;
	tn->tensor = c->tensor;
	tn->op = (uint8_t)c->op;
	tn->wire = c->wire;
	tn->scale = c->scale;
	if (rte_hash_lookup(t->tensors, &tn->key) >= 0) {
		free(tn);
		rc = refuse(why, EEXIST, "tensor %u of session %u/%u exists", c->tensor, c->tenant,
			    c->session);
		goto out;
	}
	/* the entry is complete before it is published */
	if (rte_hash_add_key_data(t->tensors, &tn->key, tn) < 0) {
		free(tn);
		rc = refuse(why, ENOSPC, "tensor table full (%u tensors)", DP_MAX_TENSORS);
		goto out;
	}
	LIST_INSERT_HEAD(&s->tensors, tn, link);
	t->n_tensors++;
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int
dp_tensor_del(struct dp_tables *t, uint16_t tenant, uint16_t session, uint32_t tensor,
	      struct dp_err *why)
{
	struct dp_session *s;
	struct dp_tensor *tn = NULL;
	int rc = 0;

	pthread_mutex_lock(&t->lock);
	s = session_find(t, tenant, session);
	if (s)
		LIST_FOREACH (tn, &s->tensors, link)
			if (tn->tensor == tensor)
				break;
	if (!tn) {
		rc = refuse(why, ENOENT, "no tensor %u in session %u/%u", tensor, tenant, session);
		goto out;
	}
	tensor_unpublish(t, tn);
	dp_rcu_synchronize(t->rcu);
	tensor_reclaim(t, tn);
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void
dp_tables_set_slot_usage(struct dp_tables *t, double share)
{
	pthread_mutex_lock(&t->lock);
	t->slot_usage_threshold = share;
	pthread_mutex_unlock(&t->lock);
}
