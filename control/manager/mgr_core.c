/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The commands of docs/PROTOCOL.md E3. Each checks every argument, then
 * reads the job, then changes the store in one transaction; calls to the
 * switch happen outside transactions, and what they did is recorded after
 * (with a flag first where a restart in between must be repaired:
 * `installing`, `pending_del`).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cais/proto.h>

#include "ctl.h"
#include "ctl_fields.h"
#include "mgr_args.h"
#include "mgr_internal.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* A store failure is the manager's, not the request's: EBUSY, try again. */
static int
store_fail(struct mgr *m, struct ctl_err *err)
{
	mgr_store_rollback(m->store);
	return ctl_fail(err, EBUSY, "the manager's store failed (see its log)");
}

double
mgr_scale_rule(unsigned int n, double max_abs, uint8_t wire)
{
	bool b16 = wire == CAIS_DT_BLOCK16;
	/* n (8 bits) x max_abs (53 bits) is exact in long double (64 bits) */
	long double prod = (long double)(b16 ? 1 : n) * (long double)max_abs * 2.0L;
	const long double lim = ldexpl(1.0L, b16 ? 55 : 31);
	const int max_exp = b16 ? MGR_B16_SCALE_MAX_EXP : MGR_SCALE_MAX_EXP;
	long double s;
	int e;

	if (!(prod > 0))
		return ldexp(1.0, max_exp);
	if (!isfinite((double)max_abs))
		return ldexp(1.0, MGR_SCALE_MIN_EXP);
	frexpl(lim / prod, &e);
	s = ldexpl(1.0L, e - 1); /* within a factor 2 of the answer; make it exact */
	while (prod * s >= lim && s > 0)
		s /= 2;
	while (prod * s * 2 < lim)
		s *= 2;
	if (s < ldexpl(1.0L, MGR_SCALE_MIN_EXP))
		s = ldexpl(1.0L, MGR_SCALE_MIN_EXP);
	if (s > ldexpl(1.0L, max_exp))
		s = ldexpl(1.0L, max_exp);
	return (double)s;
}

static int
no_args(const json_t *args, struct ctl_err *err)
{
	static const char *const none[] = {NULL};

	return ctl_check_fields(args, none, err);
}

/* The job named by field "job", which must exist (and be live unless any). */
static int
load_job(struct mgr *m, const char *name, bool any, struct mgr_job *j, struct ctl_err *err)
{
	int rc = mgr_store_job_get(m->store, name, j);

	if (rc == -ENOENT)
		return ctl_fail(err, ENOENT, "no job '%.64s'", name);
	if (rc)
		return store_fail(m, err);
	if (!any && j->state == MGR_ENDED)
		return ctl_fail(err, ENOENT, "job '%.64s' has ended", name);
	return 0;
}

static int
check_rank(const struct mgr_job *j, uint64_t rank, struct ctl_err *err)
{
	if (rank >= j->world)
		return ctl_fail(err, EINVAL, "field 'rank' out of range [0, %u] (world %u)",
				j->world - 1u, j->world);
	return 0;
}

static int
save_job(struct mgr *m, const struct mgr_job *j)
{
	int rc;

	if ((rc = mgr_store_begin(m->store)) || (rc = mgr_store_job_put(m->store, j, mgr_now_ms())))
		goto fail;
	if (j->state == MGR_ENDED && (rc = mgr_store_prune_ended(m->store, MGR_ENDED_KEPT)))
		goto fail;
	return mgr_store_commit(m->store);
fail:
	mgr_store_rollback(m->store);
	return rc;
}

/* ---- the switch side of a job ---- */

/* A job's members and its plan over the fabric. */
struct job_layout {
	struct mgr_member mb[CAIS_MAX_WORLD];
	unsigned int n;
	struct mgr_plan plan;
};

/*
 * Lay out j: 0; -EINVAL when the fabric cannot hold it (reason set);
 * -EIO when the store failed.
 */
static int
layout(struct mgr *m, const struct mgr_job *j, struct job_layout *l, char *reason, size_t cap)
{
	if (mgr_store_members(m->store, j->name, l->mb, CAIS_MAX_WORLD, &l->n)) {
		snprintf(reason, cap, "the manager's store failed");
		return -EIO;
	}
	return mgr_fabric_plan(&m->fabric, j, l->mb, l->n, &l->plan, reason, cap);
}

/* The switches that hold (or may hold) j's sessions: its plan's, else all of them. */
static unsigned int
job_switches(struct mgr *m, const struct mgr_job *j, uint8_t sw[MGR_MAX_SWITCHES])
{
	struct job_layout l;
	char why[256];
	unsigned int n = 0;

	if (layout(m, j, &l, why, sizeof(why)) == 0) {
		for (; n < l.plan.n; n++)
			sw[n] = l.plan.part[n].sw;
		return n;
	}
	for (; n < m->fabric.n; n++)
		sw[n] = (uint8_t)n;
	return n;
}

/* tensor.add on every switch of the plan (an entry there already is ours). */
static int
tensor_add(struct mgr *m, const struct mgr_job *j, const struct mgr_plan *p,
	   const struct mgr_tensor *t, struct ctl_err *err)
{
	for (unsigned int k = 0; k < p->n; k++) {
		json_t *args =
		    json_pack("{s:i, s:i, s:I, s:s, s:f, s:s}", "tenant", j->tenant, "session",
			      j->session, "tensor", (json_int_t)t->id, "op", cais_op_name(t->op),
			      "scale", t->scale, "wire", cais_dtype_name(t->wire));
		int rc = mgr_switch_call(m, p->part[k].sw, "tensor.add", args, NULL, err);

		/* the session is ours alone (ids are never reused): an entry there is ours too */
		if (rc && rc != -EEXIST)
			return rc;
	}
	return 0;
}

/* Install the job's tensors not on its switches yet; stops at a silent switch. */
static void
install_tensors(struct mgr *m, const struct mgr_job *j, const struct mgr_plan *p)
{
	struct mgr_tensor t[MGR_MAX_TENSORS];
	struct ctl_err err;
	unsigned int n, i;
	bool changed = false;
	int rc = 0;

	if (mgr_store_tensors(m->store, j->name, t, MGR_MAX_TENSORS, &n))
		return;
	for (i = 0; i < n && rc != -ETIMEDOUT; i++) {
		if (t[i].installed)
			continue;
		rc = tensor_add(m, j, p, &t[i], &err);
		if (rc == 0) {
			t[i].installed = changed = true;
		} else {
			mgr_log(MGR_LOG_WARN, "job '%s': tensor %u not installed: %s: %s", j->name,
				t[i].id, mgr_errname(rc), err.msg);
		}
	}
	if (!changed || mgr_store_begin(m->store))
		return;
	for (i = 0, rc = 0; i < n && !rc; i++)
		if (t[i].installed)
			rc = mgr_store_tensor_put(m->store, j->name, &t[i]);
	if (rc || mgr_store_commit(m->store))
		mgr_store_rollback(m->store);
}

/* session.del of j on every switch that may hold it; 0 once each confirmed. */
static int
session_del(struct mgr *m, struct mgr_job *j)
{
	uint8_t sw[MGR_MAX_SWITCHES];
	unsigned int n = job_switches(m, j, sw);
	int failed = 0;

	for (unsigned int k = 0; k < n; k++) {
		struct ctl_err err;
		json_t *args = json_pack("{s:i, s:i}", "tenant", j->tenant, "session", j->session);
		int rc = mgr_switch_call(m, sw[k], "session.del", args, NULL, &err);

		if (rc && rc != -ENOENT) {
			mgr_log(MGR_LOG_WARN,
				"job '%s': session.del %u/%u on switch %s failed: %s: %s; retried "
				"later",
				j->name, j->tenant, j->session, m->sw[sw[k]].text, mgr_errname(rc),
				err.msg);
			failed = rc;
		}
	}
	if (failed)
		return failed;
	j->on_switch = j->pending_del = false;
	return 0;
}

/*
 * session.add of the plan's parts on their switches, in order (the spine
 * last). @return 0, or the first refusal (reason set; *applied: a part
 * that may be on a switch, to be removed)
 */
static int
sessions_add(struct mgr *m, struct mgr_job *j, const struct job_layout *l, bool *applied)
{
	for (unsigned int k = 0; k < l->plan.n; k++) {
		unsigned int sw = l->plan.part[k].sw;
		json_t *args = mgr_plan_session(&m->fabric, &l->plan, k, j, l->mb, l->n);
		struct ctl_err err;
		int rc = args ? mgr_switch_call(m, sw, "session.add", args, NULL, &err) : -ENOMEM;

		/* (EEXIST: session ids are never granted twice, so the entry is ours,
		 * applied by a try whose reply was lost) */
		if (rc && rc != -EEXIST) {
			snprintf(j->reason, sizeof(j->reason),
				 "switch %s refused session.add: %s: %.160s", m->sw[sw].text,
				 rc == -ETIMEDOUT ? "unreachable" : mgr_errname(rc),
				 args ? err.msg : "out of memory");
			/* a silent switch may have applied it, and the parts before are there */
			*applied = k > 0 || rc == -ETIMEDOUT;
			return rc;
		}
	}
	return 0;
}

/*
 * Every rank has joined: the plan, admission on each of its switches,
 * session.add, tensor.add; the job is then ready, with offload or without
 * (and the reason).
 */
static void
install(struct mgr *m, struct mgr_job *j)
{
	struct job_layout l;
	bool cleaned = true, applied = false, admitted = true;
	int rc;

	j->reason[0] = '\0';
	if (j->installing) {
		/* a restart cut an install short: what it may have left goes first */
		mgr_log(MGR_LOG_INFO, "job '%s': finishing an interrupted install", j->name);
		if (session_del(m, j)) {
			j->pending_del = true;
			cleaned = false;
			snprintf(j->reason, sizeof(j->reason),
				 "a switch is unreachable (cleaning up an interrupted install)");
		}
	}
	j->installing = true;
	if (save_job(m, j))
		return;
	j->on_switch = false;
	rc = cleaned ? layout(m, j, &l, j->reason, sizeof(j->reason)) : -EAGAIN;
	for (unsigned int k = 0; rc == 0 && k < l.plan.n && admitted; k++)
		admitted = mgr_admit(m, l.plan.part[k].sw, j->slots, j->reason, sizeof(j->reason));
	if (rc == 0 && admitted) {
		rc = sessions_add(m, j, &l, &applied);
		j->on_switch = rc == 0;
		/* what went on before a refusal comes off (now, else at the next settle) */
		j->pending_del = applied;
	}
	j->state = MGR_READY;
	j->offload = j->on_switch;
	j->first_seq = 0; /* a session is never reused: no seq of it was ever seen */
	j->installing = false;
	if (save_job(m, j))
		return;
	if (j->on_switch) {
		install_tensors(m, j, &l.plan);
		if (m->fabric.mode == MGR_FABRIC_ONE)
			mgr_log(MGR_LOG_INFO,
				"job '%s' ready: session %u/%u on the switch, %u ranks", j->name,
				j->tenant, j->session, j->world);
		else
			mgr_log(MGR_LOG_INFO,
				"job '%s' ready: session %u/%u on %u switches (%s), %u ranks",
				j->name, j->tenant, j->session, l.plan.n,
				l.plan.part[l.plan.n - 1].role == MGR_ROLE_SPINE ? "a tree"
				: l.plan.part[0].role == MGR_ROLE_STRIPE	 ? "stripes"
										 : "one leaf",
				j->world);
	} else {
		mgr_log(MGR_LOG_WARN, "job '%s' ready without offload (the ring only): %s", j->name,
			j->reason);
		if (applied && session_del(m, j) == 0)
			save_job(m, j);
	}
}

/*
 * Jobs that need the switches again: unconfirmed deletes, interrupted
 * installs, and after a switch restart every job that was on it.
 */
struct settle_todo {
	char (*names)[MGR_NAME_BYTES + 1];
	unsigned int n, cap;
	json_t *present[MGR_MAX_SWITCHES]; /**< the sessions of a switch's last poll, when
					    *   they are to be checked */
	bool any;			   /**< some switch is to be checked */
};

/* Is (tenant, session) in the sessions array of a stats.get? */
static bool
on_the_switch(const json_t *sessions, uint16_t tenant, uint16_t session)
{
	size_t i;
	json_t *s;

	json_array_foreach ((json_t *)sessions, i, s)
		if (json_integer_value(json_object_get(s, "tenant")) == tenant &&
		    json_integer_value(json_object_get(s, "session")) == session)
			return true;
	return false;
}

static int
settle_collect(void *arg, const struct mgr_job *job)
{
	struct settle_todo *t = arg;

	if (!job->pending_del && !(job->state == MGR_WAITING && job->joined == job->world) &&
	    !(t->any && job->state == MGR_READY && job->on_switch))
		return 0;
	if (t->n == t->cap) {
		unsigned int cap = t->cap ? 2 * t->cap : 16;
		void *p = realloc(t->names, cap * sizeof(*t->names));

		if (!p)
			return 1;
		t->names = p;
		t->cap = cap;
	}
	snprintf(t->names[t->n++], sizeof(t->names[0]), "%s", job->name);
	return 0;
}

/*
 * The job's session is not on switch sw (it restarted): its parts there
 * and the tensors again. @return 0, -ETIMEDOUT (retried at the next
 * poll), -EIO
 */
static int
reinstall(struct mgr *m, struct mgr_job *j, const struct job_layout *l, unsigned int sw)
{
	struct mgr_tensor t[MGR_MAX_TENSORS];
	struct ctl_err err;
	unsigned int n;
	int rc = 0;

	for (unsigned int k = 0; k < l->plan.n && !rc; k++) {
		json_t *args;

		if (l->plan.part[k].sw != sw)
			continue;
		if (!(args = mgr_plan_session(&m->fabric, &l->plan, k, j, l->mb, l->n)))
			return -EIO;
		rc = mgr_switch_call(m, sw, "session.add", args, NULL, &err);
	}
	if (rc == -ETIMEDOUT)
		return rc;
	if (rc && rc != -EEXIST) {
		/* refused for good: the job's steps offload nothing from now on */
		snprintf(j->reason, sizeof(j->reason),
			 "switch %s lost the session and refused it again: %s: %.150s",
			 m->sw[sw].text, mgr_errname(rc), err.msg);
		mgr_log(MGR_LOG_WARN, "job '%s': %s", j->name, j->reason);
		j->on_switch = j->offload = false;
		j->pending_del = true; /* the other switches' parts come off */
		if (save_job(m, j))
			return -EIO;
		if (session_del(m, j) == 0 && save_job(m, j))
			return -EIO;
		return 0;
	}
	if (mgr_store_tensors(m->store, j->name, t, MGR_MAX_TENSORS, &n) ||
	    mgr_store_begin(m->store))
		return -EIO;
	for (unsigned int i = 0; i < n && !rc; i++) {
		t[i].installed = false;
		rc = mgr_store_tensor_put(m->store, j->name, &t[i]);
	}
	if (rc || mgr_store_commit(m->store)) {
		mgr_store_rollback(m->store);
		return -EIO;
	}
	install_tensors(m, j, &l->plan);
	mgr_log(MGR_LOG_INFO, "job '%s': session %u/%u was not on switch %s: installed again",
		j->name, j->tenant, j->session, m->sw[sw].text);
	return 0;
}

/* A ready job on its switches: put back what a switch's restart lost. */
static void
settle_present(struct mgr *m, struct settle_todo *todo, struct mgr_job *j, bool *again)
{
	struct job_layout l;
	char why[256];

	if (layout(m, j, &l, why, sizeof(why)))
		return; /* not laid out now (a fabric changed under it): left as it is */
	for (unsigned int k = 0; k < l.plan.n && j->on_switch; k++) {
		unsigned int sw = l.plan.part[k].sw;

		if (todo->present[sw] && !on_the_switch(todo->present[sw], j->tenant, j->session))
			again[sw] |= reinstall(m, j, &l, sw) != 0;
	}
}

/*
 * The store side of mgr_tick(), under the manager's lock: remove the
 * sessions of ended jobs the switches did not confirm, install jobs whose
 * ranks have all joined, and put back what a switch restart lost.
 */
static void
settle(struct mgr *m)
{
	struct settle_todo todo = {.n = 0};
	bool again[MGR_MAX_SWITCHES] = {false};
	struct mgr_job j;
	bool failed;

	pthread_mutex_lock(&m->st_lock);
	for (unsigned int k = 0; k < m->fabric.n; k++) {
		struct mgr_switch_state *st = &m->sw[k].st;

		if (st->check && st->reachable && st->stats) {
			json_t *p = json_deep_copy(json_object_get(st->stats, "sessions"));

			if (json_is_array(
				p)) /* (a switch that does not list them is not checked) */
				todo.present[k] = p, todo.any = true;
			else
				json_decref(p);
		}
		st->check = false;
	}
	pthread_mutex_unlock(&m->st_lock);
	failed = mgr_store_jobs(m->store, settle_collect, &todo) != 0;
	for (unsigned int i = 0; i < todo.n; i++) {
		if (mgr_store_job_get(m->store, todo.names[i], &j))
			continue;
		if (j.pending_del) {
			if (session_del(m, &j) == 0) {
				save_job(m, &j);
				mgr_log(MGR_LOG_INFO, "job '%s': session %u/%u removed", j.name,
					j.tenant, j.session);
			}
		} else if (j.state == MGR_WAITING && j.joined == j.world) {
			install(m, &j);
		} else if (j.state == MGR_READY && j.on_switch) {
			settle_present(m, &todo, &j, again);
		}
	}
	free(todo.names);
	pthread_mutex_lock(&m->st_lock);
	for (unsigned int k = 0; k < m->fabric.n; k++) {
		/* the next poll of a switch not fully settled is checked again */
		if (todo.present[k] && (again[k] || failed))
			m->sw[k].st.check = true;
		json_decref(todo.present[k]);
	}
	pthread_mutex_unlock(&m->st_lock);
}

int64_t
mgr_tick(struct mgr *m, int64_t now)
{
	int64_t next, due = m->next_settle_ms;

	mgr_switch_tick(m, now, &next);
	/* the store's part waits for no request: it is retried next time */
	if (now >= due && pthread_mutex_trylock(&m->lock) == 0) {
		settle(m);
		pthread_mutex_unlock(&m->lock);
		due = m->next_settle_ms = now + m->conf.poll_ms;
	}
	if (due <= now)
		due = now + 50; /* a request held the lock: soon again */
	if (due < next)
		next = due;
	return next > now ? next - now : 0;
}

static int
count_live(void *arg, const struct mgr_job *j)
{
	*(unsigned int *)arg += j->state != MGR_ENDED;
	return 0;
}

static int
cmd_ping(struct mgr *m, const json_t *args, json_t *res, struct ctl_err *err)
{
	unsigned int live = 0;
	int rc;

	if ((rc = no_args(args, err)))
		return rc;
	if (mgr_store_jobs(m->store, count_live, &live))
		return store_fail(m, err);
	json_object_set_new(res, "version", json_string(CAIS_VERSION_STRING));
	json_object_set_new(res, "uptime_s", json_real((double)(mgr_now_ms() - m->start_ms) / 1e3));
	json_object_set_new(res, "jobs", json_integer(live));
	return 0;
}

static void
register_result(struct mgr *m, const struct mgr_job *j, json_t *res)
{
	json_object_set_new(res, "job", json_string(j->name));
	json_object_set_new(res, "tenant", json_integer(j->tenant));
	json_object_set_new(res, "session", json_integer(j->session));
	json_object_set_new(res, "state", json_string(mgr_state_name(j->state)));
	json_object_set_new(res, "world", json_integer(j->world));
	json_object_set_new(res, "slots", json_integer(j->slots));
	json_object_set_new(res, "elems_per_packet", json_integer(j->elems));
	json_object_set_new(res, "priority", json_integer(j->priority));
	/* for the ranks' flows (E7): a multiple of it keeps each flow on one lcore */
	json_object_set_new(res, "lcores", json_integer(mgr_switch_lcores_max(m)));
}

static int
cmd_job_register(struct mgr *m, const json_t *args, json_t *res, struct ctl_err *err)
{
	static const char *const fields[] = {
	    "job", "tenant", "world", "slots", "elems_per_packet", "priority", NULL};
	uint64_t world = 0, slots = m->conf.default_slots, elems = m->conf.default_elems,
		 prio = m->conf.default_priority;
	const char *name, *tenant;
	struct mgr_job j;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = mgr_get_name(args, "job", &name, err)) ||
	    (rc = mgr_get_name(args, "tenant", &tenant, err)) ||
	    (rc = ctl_get_uint(args, "world", 1, CAIS_MAX_WORLD, true, &world, err)) ||
	    (rc = ctl_get_uint(args, "slots", 1, CAIS_MAX_SLOTS, false, &slots, err)) ||
	    (rc = ctl_get_uint(args, "elems_per_packet", 1, CAIS_MAX_ELEMS, false, &elems, err)) ||
	    (rc =
		 ctl_get_uint(args, "priority", CTL_PRIO_NORMAL, CTL_PRIO_HIGH, false, &prio, err)))
		return rc;
	if (!cais_pool_size_ok((uint32_t)slots))
		return ctl_fail(err, EINVAL, "field 'slots' must be a power of two in [1, %u]",
				CAIS_MAX_SLOTS);
	if (mgr_store_begin(m->store))
		return store_fail(m, err);
	rc = mgr_store_job_get(m->store, name, &j);
	if (rc == 0 && j.state != MGR_ENDED) {
		const char *diff = strcmp(j.tenant_name, tenant) ? "tenant"
				   : j.world != world		 ? "world"
				   : j.slots != slots		 ? "slots"
				   : j.elems != elems		 ? "elems_per_packet"
				   : j.priority != prio		 ? "priority"
								 : NULL;

		mgr_store_rollback(m->store);
		if (diff)
			return ctl_fail(err, EEXIST,
					"job '%.64s' is registered with another '%s' (tenant "
					"'%.64s', world %u, slots %u, elems_per_packet %u, "
					"priority %u)",
					name, diff, j.tenant_name, j.world, j.slots, j.elems,
					j.priority);
		register_result(m, &j, res);
		return 0;
	}
	if (rc && rc != -ENOENT)
		return store_fail(m, err);
	/* a new job, or a new run of an ended one's name: new ids either way */
	if (rc == 0 && mgr_store_job_delete(m->store, name))
		return store_fail(m, err);
	memset(&j, 0, sizeof(j));
	snprintf(j.name, sizeof(j.name), "%s", name);
	snprintf(j.tenant_name, sizeof(j.tenant_name), "%s", tenant);
	j.world = (uint16_t)world;
	j.slots = (uint32_t)slots;
	j.elems = (uint16_t)elems;
	j.priority = (uint8_t)prio;
	j.state = MGR_WAITING;
	j.limit = -1;
	j.last_step = -1;
	rc = mgr_store_tenant(m->store, tenant, name, &j.tenant);
	if (rc == -ENOSPC) {
		mgr_store_rollback(m->store);
		return ctl_fail(err, ENOSPC, "every tenant id (1..%u) has been granted",
				MGR_ID_MAX);
	}
	if (rc == 0)
		rc = mgr_store_grant_session(m->store, name, &j.session);
	if (rc == -ENOSPC) {
		mgr_store_rollback(m->store);
		return ctl_fail(err, ENOSPC, "every session id (1..%u) has been granted",
				MGR_ID_MAX);
	}
	if (rc || mgr_store_job_put(m->store, &j, mgr_now_ms()) || mgr_store_commit(m->store))
		return store_fail(m, err);
	mgr_log(MGR_LOG_INFO,
		"job '%s' registered: tenant '%s' = %u, session %u, world %u, slots %u, "
		"elems_per_packet %u, priority %u",
		j.name, j.tenant_name, j.tenant, j.session, j.world, j.slots, j.elems, j.priority);
	register_result(m, &j, res);
	return 0;
}

/*
 * The switches a ready job's agents send to: "switch" (the one switch, or
 * the first of the plan), each member's "switch" in a tree, "stripes" in
 * stripes (docs/PROTOCOL.md E10).
 */
static int
status_result(struct mgr *m, const struct mgr_job *j, json_t *res, struct ctl_err *err)
{
	struct job_layout l;
	char why[256];
	unsigned int first = 0;
	json_t *members;
	int rc;

	json_object_set_new(res, "job", json_string(j->name));
	json_object_set_new(res, "state", json_string(mgr_state_name(j->state)));
	json_object_set_new(res, "joined", json_integer(j->joined));
	json_object_set_new(res, "world", json_integer(j->world));
	json_object_set_new(res, "tenant", json_integer(j->tenant));
	json_object_set_new(res, "session", json_integer(j->session));
	if (j->state != MGR_READY)
		return 0;
	rc = layout(m, j, &l, why, sizeof(why));
	if (rc == -EIO)
		return store_fail(m, err);
	if (rc == 0)
		first = l.plan.part[0].sw;
	json_object_set_new(res, "switch", json_string(m->sw[first].agg_text));
	if (m->fabric.mode != MGR_FABRIC_ONE)
		json_object_set_new(res, "fabric",
				    json_string(mgr_fabric_mode_name(m->fabric.mode)));
	if (rc == 0 && m->fabric.mode == MGR_FABRIC_STRIPES) {
		json_t *stripes = json_array();

		for (unsigned int k = 0; k < l.plan.n; k++)
			json_array_append_new(stripes,
					      json_string(m->sw[l.plan.part[k].sw].agg_text));
		json_object_set_new(res, "stripes", stripes);
	}
	json_object_set_new(res, "slots", json_integer(j->slots));
	json_object_set_new(res, "elems_per_packet", json_integer(j->elems));
	json_object_set_new(res, "priority", json_integer(j->priority));
	json_object_set_new(res, "first_seq", json_integer(j->first_seq));
	json_object_set_new(res, "offload", json_boolean(j->offload));
	if (!j->offload)
		json_object_set_new(res, "reason", json_string(j->reason));
	json_object_set_new(res, "lcores", json_integer(mgr_switch_lcores(m, first)));
	members = json_array();
	for (unsigned int i = 0; i < l.n; i++) {
		const struct mgr_member *mb = &l.mb[i];
		json_t *e = json_pack("{s:i, s:s, s:i, s:i}", "rank", mb->rank, "ip", mb->ip,
				      "port", mb->port, "ports", mb->ports);

		if (rc == 0 && m->fabric.mode == MGR_FABRIC_TREE)
			json_object_set_new(
			    e, "switch", json_string(m->sw[l.plan.sw_of_rank[mb->rank]].agg_text));
		json_array_append_new(members, e);
	}
	json_object_set_new(res, "members", members);
	return 0;
}

static int
cmd_job_join(struct mgr *m, const json_t *args, json_t *res, struct ctl_err *err)
{
	static const char *const fields[] = {"job", "rank", "mac", "ip", "port", "ports", NULL};
	struct mgr_member mb[CAIS_MAX_WORLD];
	uint64_t rank = 0, port = 0, ports = 1;
	const char *name, *mac, *ip;
	struct mgr_member me = {0};
	struct mgr_job j;
	unsigned int n;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = mgr_get_name(args, "job", &name, err)) ||
	    (rc = ctl_get_uint(args, "rank", 0, CAIS_MAX_WORLD - 1, true, &rank, err)) ||
	    (rc = ctl_get_string(args, "mac", &mac, err)) ||
	    (rc = ctl_get_string(args, "ip", &ip, err)) ||
	    (rc = ctl_get_uint(args, "port", 1, UINT16_MAX, true, &port, err)) ||
	    (rc = ctl_get_uint(args, "ports", 1, CTL_MAX_MEMBER_PORTS, false, &ports, err)))
		return rc;
	if ((ports & (ports - 1)) || port + ports - 1 > UINT16_MAX)
		return ctl_fail(err, EINVAL,
				"field 'ports' must be a power of two, and port + ports - 1 a UDP "
				"port");
	if (mgr_parse_mac(mac, me.mac))
		return ctl_fail(err, EINVAL,
				"field 'mac' is not a unicast MAC (aa:bb:cc:dd:ee:ff, not all-zero)");
	if (mgr_parse_ip(ip, me.ip))
		return ctl_fail(err, EINVAL,
				"field 'ip' is not a host's IPv4 address (0.0.0.0/8, 127.0.0.0/8, "
				"224.0.0.0/4 and 240.0.0.0/4 are not)");
	me.rank = (uint16_t)rank;
	me.port = (uint16_t)port;
	me.ports = (uint8_t)ports;
	if ((rc = load_job(m, name, false, &j, err)) || (rc = check_rank(&j, rank, err)))
		return rc;
	if (j.slots % me.ports)
		return ctl_fail(err, EINVAL, "field 'ports' (%u) must divide the job's slots (%u)",
				me.ports, j.slots);
	if (mgr_store_members(m->store, name, mb, CAIS_MAX_WORLD, &n))
		return store_fail(m, err);
	for (unsigned int i = 0; i < n; i++) {
		if (mb[i].rank == rank) {
			if (strcmp(mb[i].mac, me.mac) || strcmp(mb[i].ip, me.ip) ||
			    mb[i].port != me.port || mb[i].ports != me.ports)
				return ctl_fail(err, EEXIST,
						"rank %u of job '%.64s' has joined from %s %s:%u",
						mb[i].rank, name, mb[i].mac, mb[i].ip, mb[i].port);
			goto joined; /* the same join again (a lost reply) */
		}
		if (strcmp(mb[i].ip, me.ip) == 0 && mb[i].port < me.port + me.ports &&
		    me.port < mb[i].port + mb[i].ports)
			return ctl_fail(err, EEXIST, "rank %u of job '%.64s' has %s:%u already",
					mb[i].rank, name, me.ip, me.port);
	}
	if (mgr_store_begin(m->store) || mgr_store_member_put(m->store, name, &me) ||
	    mgr_store_commit(m->store))
		return store_fail(m, err);
	j.joined++;
	mgr_log(MGR_LOG_INFO, "job '%s': rank %u joined from %s %s:%u (%u of %u)", name, me.rank,
		me.mac, me.ip, me.port, j.joined, j.world);
joined:
	if (j.state == MGR_WAITING && j.joined == j.world)
		install(m, &j);
	return status_result(m, &j, res, err);
}

static int
cmd_job_status(struct mgr *m, const json_t *args, json_t *res, struct ctl_err *err)
{
	static const char *const fields[] = {"job", NULL};
	const char *name;
	struct mgr_job j;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = mgr_get_name(args, "job", &name, err)) || (rc = load_job(m, name, true, &j, err)))
		return rc;
	if (j.state == MGR_WAITING && j.joined == j.world)
		install(m, &j); /* an install a restart interrupted */
	return status_result(m, &j, res, err);
}

static int
parse_op(const json_t *args, enum cais_redop *op, struct ctl_err *err)
{
	const char *s;
	int rc;

	if ((rc = ctl_get_string(args, "op", &s, err)))
		return rc;
	if ((rc = cais_op_parse(s)) < 0)
		return ctl_fail(err, EINVAL, "field 'op' must be sum, avg, max or min");
	*op = (enum cais_redop)rc;
	return 0;
}

/*
 * The wire of a tensor being registered: "wire" when given, else BLOCK16
 * (--half-wire) for a "dtype" of bf16 or fp16, else FIXED32. int32 is
 * FIXED32 only (BLOCK16 would round it).
 */
static int
parse_wire(const struct mgr *m, const json_t *args, uint8_t *wire, struct ctl_err *err)
{
	static const char *const dtypes[] = {"f32", "bf16", "f16", "i32"};
	const char *dt = NULL, *w = NULL;
	int d = -1, rc;

	if ((json_object_get(args, "dtype") && (rc = ctl_get_string(args, "dtype", &dt, err))) ||
	    (json_object_get(args, "wire") && (rc = ctl_get_string(args, "wire", &w, err))))
		return rc;
	for (int i = 0; dt && i < 4; i++)
		if (strcmp(dt, dtypes[i]) == 0)
			d = i;
	if (dt && d < 0)
		return ctl_fail(err, EINVAL, "field 'dtype' must be f32, bf16, f16 or i32");
	if (w && cais_dtype_parse(w) < 0)
		return ctl_fail(err, EINVAL, "field 'wire' must be fixed32 or block16");
	if (w)
		*wire = (uint8_t)cais_dtype_parse(w);
	else
		*wire = d == 1 || d == 2 ? m->conf.half_wire : (uint8_t)CAIS_DT_FIXED32;
	if (d == 3 && *wire != CAIS_DT_FIXED32)
		return ctl_fail(err, EINVAL, "field 'wire': i32 tensors go as fixed32");
	return 0;
}

static int
cmd_tensor_register(struct mgr *m, const json_t *args, json_t *res, struct ctl_err *err)
{
	static const char *const fields[] = {"job", "tensor", "op", "dtype", "wire", NULL};
	struct mgr_tensor t[MGR_MAX_TENSORS];
	struct mgr_tensor x = {0}, *cur = NULL;
	struct ctl_err serr = {0};
	uint64_t id = 0;
	const char *name;
	struct mgr_job j;
	unsigned int n;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = mgr_get_name(args, "job", &name, err)) ||
	    (rc = ctl_get_uint(args, "tensor", 0, UINT32_MAX, true, &id, err)) ||
	    (rc = parse_op(args, &x.op, err)) || (rc = parse_wire(m, args, &x.wire, err)) ||
	    (rc = load_job(m, name, false, &j, err)))
		return rc;
	if (mgr_store_tensors(m->store, name, t, MGR_MAX_TENSORS, &n))
		return store_fail(m, err);
	for (unsigned int i = 0; i < n; i++)
		if (t[i].id == id)
			cur = &t[i];
	if (cur && (cur->op != x.op || cur->wire != x.wire))
		return ctl_fail(err, EEXIST,
				"tensor %u of job '%.64s' is registered with op %s, wire %s",
				cur->id, name, cais_op_name(cur->op), cais_dtype_name(cur->wire));
	if (!cur && n >= MGR_MAX_TENSORS)
		return ctl_fail(err, ENOSPC, "job '%.64s' has %u tensors, the most a job may have",
				name, MGR_MAX_TENSORS);
	if (!cur) {
		x.id = (uint32_t)id;
		x.scale = x.wire == CAIS_DT_BLOCK16 ? ldexp(1.0, CAIS_B16_DEFAULT_SCALE_EXP)
						    : m->conf.default_scale;
		if (mgr_store_begin(m->store) || mgr_store_tensor_put(m->store, name, &x) ||
		    mgr_store_commit(m->store))
			return store_fail(m, err);
		mgr_log(MGR_LOG_INFO, "job '%s': tensor %u registered (%s, %s)", name, x.id,
			cais_op_name(x.op), cais_dtype_name(x.wire));
		cur = &x;
	}
	if (j.on_switch && !cur->installed) {
		struct job_layout l;
		char why[256];

		rc = layout(m, &j, &l, why, sizeof(why));
		if (rc == -EIO)
			return store_fail(m, err);
		rc = rc ? ctl_fail(&serr, EINVAL, "%s", why)
			: tensor_add(m, &j, &l.plan, cur, &serr);
		if (rc == 0) {
			cur->installed = true;
			if (mgr_store_begin(m->store) ||
			    mgr_store_tensor_put(m->store, name, cur) || mgr_store_commit(m->store))
				return store_fail(m, err);
		} else {
			mgr_log(MGR_LOG_WARN, "job '%s': tensor %u not installed: %s: %s", name,
				cur->id, mgr_errname(rc), serr.msg);
		}
	}
	json_object_set_new(res, "job", json_string(name));
	json_object_set_new(res, "tensor", json_integer(cur->id));
	json_object_set_new(res, "op", json_string(cais_op_name(cur->op)));
	json_object_set_new(res, "installed", json_boolean(cur->installed));
	json_object_set_new(res, "scale", json_real(cur->scale));
	json_object_set_new(res, "wire", json_string(cais_dtype_name(cur->wire)));
	if (!cur->installed)
		json_object_set_new(res, "reason",
				    json_string(serr.code ? serr.msg
						: j.state == MGR_WAITING
						    ? "the job is not ready yet"
						: j.offload ? "not on the switch"
							    : j.reason));
	return 0;
}

/*
 * The answer of (job, step), computed when the first rank asks:
 * - scales: per tensor, mgr_scale_rule() on the max over ranks of the
 *   max_abs of each rank's latest report (of step - 1, else of step - 2);
 *   a tensor without a report keeps its current scale (the default before
 *   any report). The first rank may ask before the others have reported
 *   step - 1 (each reports just before its own step.begin), but all have
 *   reported step - 2 (they took part in step - 1's collectives since).
 *   While some rank has neither, the scale may go down, never up: that
 *   rank may hold larger values;
 * - offload: the tensors installed on the switch, in id order, the first
 *   `limit` of them. Congestion policy: when any rank reported CONGESTED
 *   for step - 1, limit halves (from what the previous step offloaded,
 *   down to 0); a step without congestion doubles it back (at least 1)
 *   until every tensor is offloaded again. While a switch of the job's
 *   layout does not answer the manager's polls, nothing is offloaded (and
 *   the answer names it): once its lease runs out it forwards only, and
 *   every collective sent to it would first wait to judge it silent.
 */
static int
compute_step(struct mgr *m, struct mgr_job *j, int64_t step, json_t **out)
{
	struct mgr_tensor t[MGR_MAX_TENSORS];
	unsigned int n, installed = 0, limit, taken = 0;
	json_t *ans, *offload = json_array(), *scales = json_array();
	bool congested = false, newest = step > j->last_step;
	unsigned int reported = 0;
	const char *down = NULL;
	struct job_layout l;
	char why[256];
	int rc;

	if ((rc = mgr_store_tensors(m->store, j->name, t, MGR_MAX_TENSORS, &n)) ||
	    (step > 0 &&
	     ((rc = mgr_store_step_congested(m->store, j->name, step - 1, &congested)) ||
	      (rc = mgr_store_latest_ranks(m->store, j->name, step - 1, &reported)))))
		goto fail;
	for (unsigned int i = 0; i < n; i++) {
		double max_abs = -1;

		if (step > 0 &&
		    (rc = mgr_store_latest_max_abs(m->store, j->name, step - 1, t[i].id, &max_abs)))
			goto fail;
		if (max_abs >= 0) {
			double s = mgr_scale_rule(j->world, max_abs, t[i].wire);

			if (reported >= j->world || s < t[i].scale)
				t[i].scale = s;
		}
		installed += j->offload && t[i].installed;
	}
	if (j->limit < 0 || (unsigned int)j->limit > installed)
		limit = installed;
	else
		limit = (unsigned int)j->limit;
	if (congested)
		limit /= 2;
	else if (j->limit >= 0)
		limit = limit ? 2 * limit : 1;
	if (limit > installed)
		limit = installed;
	if (j->offload && layout(m, j, &l, why, sizeof(why)) == 0)
		for (unsigned int k = 0; k < l.plan.n && !down; k++)
			if (!mgr_switch_reachable(m, l.plan.part[k].sw))
				down = m->sw[l.plan.part[k].sw].text;
	for (unsigned int i = 0; i < n; i++) {
		if (j->offload && !down && t[i].installed && taken < limit) {
			json_array_append_new(offload, json_integer(t[i].id));
			taken++;
		}
		json_array_append_new(scales,
				      json_pack("{s:I, s:f, s:s}", "tensor", (json_int_t)t[i].id,
						"scale", t[i].scale, "wire", cais_dtype_name(t[i].wire)));
	}
	ans = json_pack("{s:I, s:o, s:o, s:b}", "step", (json_int_t)step, "offload", offload,
			"scales", scales, "congested", congested);
	if (ans && down)
		json_object_set_new(ans, "unreachable", json_string(down));
	if (newest) {
		j->limit = !congested && limit == installed ? -1 : (int32_t)limit;
		j->last_step = step;
	}
	/*
	 * The answer waits for the disk (unlike the reports): every rank of the
	 * step must get the same one, also one that asks after a crash of the
	 * manager's machine and its reboot while the others wait in the step's
	 * collectives. Once per step and job, by its first rank to ask.
	 */
	if ((rc = mgr_store_begin(m->store)))
		goto fail_ans;
	{
		char *text = json_dumps(ans, JSON_COMPACT);

		rc = text ? mgr_store_answer_put(m->store, j->name, step, text) : -ENOMEM;
		free(text);
	}
	for (unsigned int i = 0; i < n && !rc && newest; i++)
		rc = mgr_store_tensor_put(m->store, j->name, &t[i]);
	if (!rc && newest)
		rc = mgr_store_job_put(m->store, j, mgr_now_ms());
	if (!rc && newest)
		rc = mgr_store_prune_steps(m->store, j->name, step - (int64_t)m->conf.history + 1);
	if (rc || (rc = mgr_store_commit(m->store)))
		goto fail_ans;
	if (congested)
		mgr_log(MGR_LOG_INFO,
			"job '%s' step %lld: congestion reported, %u of %u tensors "
			"offloaded",
			j->name, (long long)step, taken, installed);
	if (down)
		mgr_log(MGR_LOG_WARN,
			"job '%s' step %lld: switch %s unreachable: nothing offloaded", j->name,
			(long long)step, down);
	*out = ans;
	return 0;
fail_ans:
	mgr_store_rollback(m->store);
	json_decref(ans);
	return rc;
fail:
	json_decref(offload);
	json_decref(scales);
	return rc;
}

static int take_report(struct mgr *m, const json_t *args, struct ctl_err *err);

static int
cmd_step_begin(struct mgr *m, const json_t *args, json_t *res, struct ctl_err *err)
{
	static const char *const fields[] = {"job", "rank", "step", "report", NULL};
	const json_t *report = json_object_get(args, "report");
	uint64_t rank = 0, step = 0;
	const char *name;
	struct mgr_job j;
	json_t *ans = NULL;
	char *text;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = mgr_get_name(args, "job", &name, err)) ||
	    (rc = ctl_get_uint(args, "rank", 0, CAIS_MAX_WORLD - 1, true, &rank, err)) ||
	    (rc = ctl_get_uint(args, "step", 0, INT64_MAX, true, &step, err)) ||
	    (rc = load_job(m, name, false, &j, err)) || (rc = check_rank(&j, rank, err)))
		return rc;
	if (j.state != MGR_READY)
		return ctl_fail(err, EBUSY, "job '%.64s' is not ready (%u of %u ranks joined)",
				name, j.joined, j.world);
	/* the report of the step that ends (E13): stored before this step's answer */
	if (report) {
		const json_t *rj = json_object_get(report, "job");
		const json_t *rr = json_object_get(report, "rank");
		const json_t *rs = json_object_get(report, "step");

		if (!json_is_object(report))
			return ctl_fail(err, EINVAL, "field 'report' must be an object");
		if (!json_is_string(rj) || strcmp(json_string_value(rj), name) != 0 ||
		    !json_is_integer(rr) || json_integer_value(rr) != (json_int_t)rank)
			return ctl_fail(err, EINVAL, "report: not of job '%.64s' rank %llu", name,
					(unsigned long long)rank);
		if (!json_is_integer(rs) || json_integer_value(rs) >= (json_int_t)step)
			return ctl_fail(err, EINVAL, "report: its step must come before step %llu",
					(unsigned long long)step);
		if ((rc = take_report(m, report, err))) {
			char inner[sizeof(err->msg)];

			snprintf(inner, sizeof(inner), "%s", err->msg);
			return ctl_fail(err, err->code, "report: %.200s", inner);
		}
	}
	rc = mgr_store_answer_get(m->store, name, (int64_t)step, &text);
	if (rc == 0) {
		ans = json_loads(text, 0, NULL);
		free(text);
	} else if (rc != -ENOENT) {
		return store_fail(m, err);
	} else if ((int64_t)step <= j.last_step - (int64_t)m->conf.history) {
		return ctl_fail(err, ENOENT,
				"step %llu of job '%.64s' is older than the %u steps kept",
				(unsigned long long)step, name, m->conf.history);
	} else if (compute_step(m, &j, (int64_t)step, &ans)) {
		return store_fail(m, err);
	}
	if (!ans)
		return store_fail(m, err);
	json_object_update(res, ans);
	json_decref(ans);
	return 0;
}

static int
get_count(const json_t *args, const char *name, int64_t *out, struct ctl_err *err)
{
	uint64_t v = 0;
	int rc = ctl_get_uint(args, name, 0, INT64_MAX, false, &v, err);

	*out = (int64_t)v;
	return rc;
}

/*
 * A rank's statistics of a step (stats.report's arguments, or step.begin's
 * "report"): stored for the scales of the steps after it (compute_step()).
 */
static int
take_report(struct mgr *m, const json_t *args, struct ctl_err *err)
{
	static const char *const fields[] = {"job",	"rank",	       "step",
					     "tensors", "collectives", "fallbacks",
					     "errors",	"congested",   NULL};
	static const char *const tfields[] = {"tensor", "max_abs", NULL};
	uint32_t ids[MGR_MAX_TENSORS];
	double max_abs[MGR_MAX_TENSORS];
	struct mgr_tensor t[MGR_MAX_TENSORS];
	struct mgr_report r = {.tensor = ids, .max_abs = max_abs};
	uint64_t rank = 0, step = 0;
	const json_t *tensors = json_object_get(args, "tensors");
	const json_t *cong = json_object_get(args, "congested");
	const char *name;
	struct mgr_job j;
	unsigned int n;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = mgr_get_name(args, "job", &name, err)) ||
	    (rc = ctl_get_uint(args, "rank", 0, CAIS_MAX_WORLD - 1, true, &rank, err)) ||
	    (rc = ctl_get_uint(args, "step", 0, INT64_MAX, true, &step, err)) ||
	    (rc = get_count(args, "collectives", &r.collectives, err)) ||
	    (rc = get_count(args, "fallbacks", &r.fallbacks, err)) ||
	    (rc = get_count(args, "errors", &r.errors, err)))
		return rc;
	if (json_is_boolean(cong))
		r.congested = json_is_true(cong);
	else if ((rc = get_count(args, "congested", &r.congested, err)))
		return ctl_fail(err, EINVAL, "field 'congested' must be a boolean or a count");
	if (tensors && !json_is_array(tensors))
		return ctl_fail(err, EINVAL, "field 'tensors' must be an array");
	if (json_array_size(tensors) > MGR_MAX_TENSORS)
		return ctl_fail(err, EINVAL, "field 'tensors' has more than %u entries",
				MGR_MAX_TENSORS);
	for (size_t i = 0; i < json_array_size(tensors); i++) {
		const json_t *e = json_array_get(tensors, i);
		uint64_t id = 0;
		bool present;

		if (!json_is_object(e))
			return ctl_fail(err, EINVAL, "field 'tensors[%zu]' must be an object", i);
		if ((rc = ctl_check_fields(e, tfields, err)) ||
		    (rc = ctl_get_uint(e, "tensor", 0, UINT32_MAX, true, &id, err)) ||
		    (rc = ctl_get_number(e, "max_abs", 0, INFINITY, true, &present, &max_abs[i],
					 err))) {
			char inner[sizeof(err->msg)];

			snprintf(inner, sizeof(inner), "%s", err->msg);
			return ctl_fail(err, EINVAL, "tensors[%zu]: %.200s", i, inner);
		}
		ids[i] = (uint32_t)id;
		for (size_t k = 0; k < i; k++)
			if (ids[k] == id)
				return ctl_fail(err, EINVAL, "tensors[%zu]: tensor %u given twice",
						i, ids[i]);
	}
	r.n_tensors = (unsigned int)json_array_size(tensors);
	r.rank = (uint16_t)rank;
	r.step = (int64_t)step;
	if ((rc = load_job(m, name, false, &j, err)) || (rc = check_rank(&j, rank, err)))
		return rc;
	if (j.state != MGR_READY)
		return ctl_fail(err, EBUSY, "job '%.64s' is not ready (%u of %u ranks joined)",
				name, j.joined, j.world);
	if (mgr_store_tensors(m->store, name, t, MGR_MAX_TENSORS, &n))
		return store_fail(m, err);
	for (unsigned int i = 0; i < r.n_tensors; i++) {
		unsigned int k;

		for (k = 0; k < n && t[k].id != ids[i]; k++)
			;
		if (k == n)
			return ctl_fail(err, ENOENT,
					"tensors[%u]: tensor %u of job '%.64s' is not "
					"registered",
					i, ids[i], name);
	}
	/* a report lost with the manager's machine only costs a scale update:
	 * no wait for the disk */
	if (mgr_store_begin_lazy(m->store) || mgr_store_report_put(m->store, name, &r) ||
	    mgr_store_commit(m->store))
		return store_fail(m, err);
	/* alarms: more than 10% fallbacks (to the ring) means the thresholds do not fit the load */
	if (r.collectives > 0 && r.fallbacks * 10 > r.collectives)
		mgr_log(MGR_LOG_WARN, "job '%s' rank %u step %lld: fallback rate %.0f%% (> 10%%)",
			name, r.rank, (long long)r.step,
			100.0 * (double)r.fallbacks / (double)r.collectives);
	if (r.errors > 0)
		mgr_log(MGR_LOG_WARN, "job '%s' rank %u step %lld: %lld numerical error alarms",
			name, r.rank, (long long)r.step, (long long)r.errors);
	return 0;
}

static int
cmd_stats_report(struct mgr *m, const json_t *args, json_t *res, struct ctl_err *err)
{
	(void)res;
	return take_report(m, args, err);
}

static int
cmd_job_end(struct mgr *m, const json_t *args, json_t *res, struct ctl_err *err)
{
	static const char *const fields[] = {"job", NULL};
	const char *name;
	struct mgr_job j;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = mgr_get_name(args, "job", &name, err)) || (rc = load_job(m, name, true, &j, err)))
		return rc;
	if (j.state != MGR_ENDED) {
		j.state = MGR_ENDED;
		/* an install a restart cut short may have left the session there too */
		j.pending_del = j.pending_del || j.on_switch || j.installing;
		j.installing = false;
		if (save_job(m, &j))
			return store_fail(m, err);
		if (j.pending_del && session_del(m, &j) == 0 && save_job(m, &j))
			return store_fail(m, err);
		mgr_log(MGR_LOG_INFO, "job '%s' ended: session %u/%u retired%s", name, j.tenant,
			j.session, j.pending_del ? " (session.del to be retried)" : "");
	}
	json_object_set_new(res, "job", json_string(j.name));
	json_object_set_new(res, "state", json_string(mgr_state_name(j.state)));
	return 0;
}

/* One jobs.list page being filled. */
struct list_page {
	struct ctl_page page;
	int64_t last; /**< the row of its last job */
};

static int
list_add(void *arg, const struct mgr_job *j)
{
	struct list_page *lp = arg;

	if (!ctl_page_add(&lp->page,
			  json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:s, s:b}", "job", j->name,
				    "tenant_name", j->tenant_name, "tenant", j->tenant, "session",
				    j->session, "world", j->world, "joined", j->joined, "state",
				    mgr_state_name(j->state), "offload", j->offload)))
		return 1; /* the page is full */
	lp->last = j->row;
	return 0;
}

/* jobs.list [after]: a page of the jobs after the cursor, oldest first (docs/PROTOCOL.md E5). */
static int
cmd_jobs_list(struct mgr *m, const json_t *args, json_t *res, struct ctl_err *err)
{
	static const char *const fields[] = {"after", NULL};
	struct list_page lp = {.page = {.arr = json_array()}, .last = -1};
	uint64_t after = UINT64_MAX;
	int rc;

	if ((rc = ctl_check_fields(args, fields, err)) ||
	    (rc = ctl_get_uint(args, "after", 0, INT64_MAX, false, &after, err)) ||
	    (rc = mgr_store_jobs_after(m->store, after == UINT64_MAX ? -1 : (int64_t)after,
				       list_add, &lp)
		      ? -EIO
		      : 0)) {
		json_decref(lp.page.arr);
		return rc == -EIO ? store_fail(m, err) : rc;
	}
	json_object_set_new(res, "jobs", lp.page.arr);
	if (lp.page.full)
		json_object_set_new(res, "next", json_integer(lp.last));
	return 0;
}

static int
cmd_switch_status(struct mgr *m, const json_t *args, json_t *res, struct ctl_err *err)
{
	int rc = no_args(args, err);

	if (rc == 0)
		mgr_switch_status(m, res);
	return rc;
}

static const struct {
	const char *name;
	int (*fn)(struct mgr *m, const json_t *args, json_t *res, struct ctl_err *err);
} commands[] = {
    {"ping", cmd_ping},
    {"job.register", cmd_job_register},
    {"job.join", cmd_job_join},
    {"job.status", cmd_job_status},
    {"tensor.register", cmd_tensor_register},
    {"step.begin", cmd_step_begin},
    {"stats.report", cmd_stats_report},
    {"job.end", cmd_job_end},
    {"jobs.list", cmd_jobs_list},
    {"switch.status", cmd_switch_status},
};

int
mgr_handle(void *ctx, const json_t *req, json_t *res, struct ctl_err *err)
{
	static const char *const top[] = {"id", "ts", "cmd", "args", NULL};
	struct mgr *m = ctx;
	const json_t *cmdv, *args;
	json_t *empty = NULL;
	const char *cmd;
	size_t i;
	int rc;

	err->code = 0;
	err->msg[0] = '\0';
	if (!json_is_object(req))
		return ctl_fail(err, EINVAL, "request must be a JSON object");
	if ((rc = ctl_check_fields(req, top, err)))
		return rc;
	cmdv = json_object_get(req, "cmd");
	if (!cmdv)
		return ctl_fail(err, EINVAL, "missing field 'cmd'");
	if (!json_is_string(cmdv))
		return ctl_fail(err, EINVAL, "field 'cmd' must be a string");
	cmd = json_string_value(cmdv);
	args = json_object_get(req, "args");
	if (args && !json_is_object(args))
		return ctl_fail(err, EINVAL, "field 'args' must be an object");
	for (i = 0; i < ARRAY_SIZE(commands); i++)
		if (strcmp(cmd, commands[i].name) == 0)
			break;
	if (i == ARRAY_SIZE(commands))
		return ctl_fail(err, EINVAL, "unknown command '%.60s'", cmd);
	if (!args && !(args = empty = json_object()))
		return ctl_fail(err, ENOSPC, "out of memory");
	pthread_mutex_lock(&m->lock);
	rc = commands[i].fn(m, args, res, err);
	mgr_store_rollback(m->store); /* nothing half-done survives a refusal */
	pthread_mutex_unlock(&m->lock);
	json_decref(empty);
	if (rc && !err->code)
		ctl_fail(err, rc, "%s failed", cmd);
	mgr_log(MGR_LOG_DEBUG, "request %s: %s%s%s", cmd, rc ? mgr_errname(rc) : "ok",
		rc ? ": " : "", rc ? err->msg : "");
	return rc;
}

int
mgr_open(const struct mgr_conf *conf, struct mgr **out, struct ctl_err *err)
{
	struct mgr *m;
	int rc;

	*out = NULL;
	mgr_log_set_level(conf->log_level);
	if (!conf->has_agg && !conf->fabric[0])
		return ctl_fail(err, EINVAL,
				"--agg A.B.C.D[:PORT] is required (the aggregator "
				"address agents send to), or --fabric FILE");
	m = calloc(1, sizeof(*m));
	if (!m)
		return ctl_fail(err, ENOMEM, "out of memory");
	m->conf = *conf;
	if (conf->fabric[0]) {
		if ((rc = mgr_fabric_load(conf->fabric, &m->fabric, err))) {
			free(m);
			return rc;
		}
	} else {
		mgr_fabric_one(&m->fabric, conf);
	}
	if (m->fabric.mode == MGR_FABRIC_TREE && m->conf.default_elems > CAIS_UPLINK_MAX_ELEMS) {
		/* what a session over several leaves carries (E9) */
		m->conf.default_elems = CAIS_UPLINK_MAX_ELEMS;
		mgr_log(MGR_LOG_INFO, "a tree: jobs' elems_per_packet default to %u",
			CAIS_UPLINK_MAX_ELEMS);
	}
	for (unsigned int k = 0; k < m->fabric.n; k++) {
		const struct mgr_fabric_switch *f = &m->fabric.sw[k];
		struct mgr_sw *sw = &m->sw[k];
		char ctl[CMN_ADDR_TEXT];

		if (f->key_file[0] && (rc = ctl_key_load(f->key_file, &sw->key)) != 0) {
			rc = ctl_fail(
			    err, rc, "%s %s: %s",
			    conf->fabric[0] ? "a switch's key" : "--switch-key", f->key_file,
			    rc == -EINVAL ? "empty or larger than 4096 bytes" : strerror(-rc));
			free(m);
			return rc;
		}
		cmn_format_addr(&f->ctl, ctl, sizeof(ctl));
		if (m->fabric.mode == MGR_FABRIC_ONE)
			snprintf(sw->text, sizeof(sw->text), "%s", ctl);
		else
			snprintf(sw->text, sizeof(sw->text), "%s (%s)", f->name, ctl);
		cmn_format_addr(&f->agg, sw->agg_text, sizeof(sw->agg_text));
	}
	if ((rc = mgr_store_open(conf->db, &m->store, err))) {
		free(m);
		return rc;
	}
	for (unsigned int k = 0; k < m->fabric.n; k++)
		pthread_mutex_init(&m->sw[k].call_lock, NULL);
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->st_lock, NULL);
	m->start_ms = mgr_now_ms();
	if (m->fabric.mode != MGR_FABRIC_ONE)
		mgr_log(MGR_LOG_INFO, "fabric %s: %s of %u switches", conf->fabric,
			mgr_fabric_mode_name(m->fabric.mode), m->fabric.n);
	*out = m;
	return 0;
}

void
mgr_close(struct mgr *m)
{
	if (!m)
		return;
	mgr_store_close(m->store);
	for (unsigned int k = 0; k < m->fabric.n; k++) {
		json_decref(m->sw[k].st.stats);
		pthread_mutex_destroy(&m->sw[k].call_lock);
	}
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->st_lock);
	free(m);
}
