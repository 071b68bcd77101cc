/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The manager's side of the switches: every call goes through
 * mgr_switch_call() (one at a time per switch), each switch's lease is
 * renewed every lease/3 and its stats.get polled every poll period, from
 * mgr_switch_tick(); admission reads the last poll. It knows nothing of the
 * store: mgr_core.c calls down into it, never the other way.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl_client.h"
#include "ctl_fields.h"
#include "mgr_internal.h"

int64_t
mgr_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One request to the switch, a paged list (pages: its field) followed to its end. */
static int
call_once(struct mgr *m, unsigned int k, const char *cmd, const char *pages, json_t *args,
	  json_t **res, struct ctl_err *err)
{
	const struct sockaddr_in *to = &m->fabric.sw[k].ctl;
	int timeout = (int)m->conf.switch_timeout_ms;

	return pages ? ctl_call_pages(to, &m->sw[k].key, cmd, args, pages, timeout, res, err)
		     : ctl_call(to, &m->sw[k].key, cmd, args, timeout, res, err);
}

int
mgr_switch_call(struct mgr *m, unsigned int k, const char *cmd, json_t *args, json_t **result,
		struct ctl_err *err)
{
	/* stats.get pages its sessions (docs/PROTOCOL.md E5): the manager needs them all */
	const char *pages = strcmp(cmd, "stats.get") == 0 ? "sessions" : NULL;
	json_t *res = NULL;
	int rc;

	pthread_mutex_lock(&m->sw[k].call_lock);
	rc = call_once(m, k, cmd, pages, args, &res, err);
	/* EPERM: refused before dispatch (another client's newer ts): harmless to repeat */
	if (rc == -EPERM)
		rc = call_once(m, k, cmd, pages, args, &res, err);
	pthread_mutex_unlock(&m->sw[k].call_lock);
	json_decref(args);
	mgr_log(rc ? MGR_LOG_INFO : MGR_LOG_DEBUG, "switch %s %s: %s%s%s", m->sw[k].text, cmd,
		rc ? mgr_errname(rc) : "ok", rc ? ": " : "", rc ? err->msg : "");
	if (result)
		*result = res;
	else
		json_decref(res);
	return rc;
}

/* stats.get now; the result replaces the last one. */
static int
poll_stats(struct mgr *m, unsigned int k, int64_t now)
{
	struct mgr_switch_state *st = &m->sw[k].st;
	struct ctl_err err;
	json_t *res;
	int rc = mgr_switch_call(m, k, "stats.get", NULL, &res, &err);
	bool was, restarted = false;

	pthread_mutex_lock(&m->st_lock);
	was = st->reachable || !st->polled_ms;
	st->polled_ms = now ? now : 1;
	st->reachable = rc == 0;
	st->poll_fail_run = rc == 0 ? 0 : st->poll_fail_run + 1;
	if (rc == 0) {
		const json_t *up = json_object_get(res, "uptime_s");

		/* a switch that restarted has lost every table the manager installed */
		if (json_is_number(up)) {
			restarted = json_number_value(up) < st->uptime_s;
			st->uptime_s = json_number_value(up);
		}
		st->check |= restarted || !st->checked;
		st->checked = true;
		json_decref(st->stats);
		st->stats = res;
		st->poll_error[0] = '\0';
	} else {
		snprintf(st->poll_error, sizeof(st->poll_error), "%s: %.200s", mgr_errname(rc),
			 err.msg);
	}
	pthread_mutex_unlock(&m->st_lock);
	if (rc && was)
		mgr_log(MGR_LOG_WARN, "switch %s: stats.get failed: %s: %s", m->sw[k].text,
			mgr_errname(rc), err.msg);
	else if (!rc && !was)
		mgr_log(MGR_LOG_INFO, "switch %s answers stats.get again", m->sw[k].text);
	if (restarted)
		mgr_log(MGR_LOG_WARN,
			"switch %s restarted: installing the ready jobs' sessions again",
			m->sw[k].text);
	return rc;
}

static void
renew_lease(struct mgr *m, unsigned int k, int64_t now)
{
	struct mgr_switch_state *st = &m->sw[k].st;
	struct ctl_err err;
	json_t *args = json_pack("{s:I}", "ttl_ms", (json_int_t)m->conf.lease_ms);
	int rc = mgr_switch_call(m, k, "lease", args, NULL, &err);
	unsigned int run;
	bool first = false;

	pthread_mutex_lock(&m->st_lock);
	run = st->lease_fail_run;
	if (rc == 0) {
		first = st->leases++ == 0;
		st->lease_ok_ms = now ? now : 1;
		st->lease_fail_run = 0;
	} else {
		st->lease_failures++;
		st->lease_fail_run++;
		snprintf(st->lease_error, sizeof(st->lease_error), "%s: %.200s", mgr_errname(rc),
			 err.msg);
	}
	pthread_mutex_unlock(&m->st_lock);
	if (rc)
		mgr_log(MGR_LOG_WARN,
			"switch %s: lease renewal failed (%u in a row): %s: %s; the switch goes "
			"forward-only %u ms after the last renewal",
			m->sw[k].text, run + 1, mgr_errname(rc), err.msg, m->conf.lease_ms);
	else if (run)
		mgr_log(MGR_LOG_INFO, "switch %s: lease renewed again after %u failures",
			m->sw[k].text, run);
	else if (first)
		mgr_log(MGR_LOG_INFO, "switch %s: lease held (ttl %u ms, renewed every %u ms)",
			m->sw[k].text, m->conf.lease_ms, m->conf.lease_ms / 3);
}

/*
 * Every switch's lease first, then the polls: a silent switch costs its
 * calls' timeout (--switch-timeout-ms) twice a round, and the others'
 * leases must not wait behind its poll.
 */
void
mgr_switch_tick(struct mgr *m, int64_t now, int64_t *next)
{
	const unsigned int n = m->fabric.n;
	int64_t lease_due[MGR_MAX_SWITCHES], poll_due[MGR_MAX_SWITCHES];

	pthread_mutex_lock(&m->st_lock);
	for (unsigned int k = 0; k < n; k++) {
		struct mgr_switch_state *st = &m->sw[k].st;

		if (!st->started) {
			st->started = true;
			st->next_lease_ms = st->next_poll_ms = now;
		}
		lease_due[k] = st->next_lease_ms;
		poll_due[k] = st->next_poll_ms;
	}
	pthread_mutex_unlock(&m->st_lock);
	for (unsigned int k = 0; k < n && m->conf.lease_ms; k++)
		if (now >= lease_due[k]) {
			renew_lease(m, k, now);
			lease_due[k] = now + m->conf.lease_ms / 3;
		}
	for (unsigned int k = 0; k < n; k++)
		if (now >= poll_due[k]) {
			poll_stats(m, k, now);
			poll_due[k] = now + m->conf.poll_ms;
		}
	*next = INT64_MAX;
	pthread_mutex_lock(&m->st_lock);
	for (unsigned int k = 0; k < n; k++) {
		m->sw[k].st.next_lease_ms = lease_due[k];
		m->sw[k].st.next_poll_ms = poll_due[k];
		if (poll_due[k] < *next)
			*next = poll_due[k];
		if (m->conf.lease_ms && lease_due[k] < *next)
			*next = lease_due[k];
	}
	pthread_mutex_unlock(&m->st_lock);
}

static bool
get_num(const json_t *o, const char *k, double *v)
{
	const json_t *x = json_object_get(o, k);

	if (!json_is_number(x))
		return false;
	*v = json_number_value(x);
	return isfinite(*v);
}

bool
mgr_admit(struct mgr *m, unsigned int k, uint32_t slots, char *reason, size_t cap)
{
	struct mgr_switch_state *sw = &m->sw[k].st;
	double usage, used, capacity, depth;
	bool fresh;
	json_t *st;

	pthread_mutex_lock(&m->st_lock);
	fresh = sw->stats && sw->reachable;
	pthread_mutex_unlock(&m->st_lock);
	if (!fresh)
		poll_stats(m, k, mgr_now_ms());
	pthread_mutex_lock(&m->st_lock);
	if (!sw->reachable || !sw->stats) {
		snprintf(reason, cap, "switch %s unreachable: %s", m->sw[k].text, sw->poll_error);
		pthread_mutex_unlock(&m->st_lock);
		return false;
	}
	st = sw->stats;
	if (get_num(st, "slot_usage", &usage) && usage > m->conf.max_slot_usage) {
		snprintf(reason, cap,
			 "admission: switch %s: slot usage %.3f above the threshold %.3f",
			 m->sw[k].text, usage, m->conf.max_slot_usage);
		goto refuse;
	}
	if (get_num(st, "slots_used", &used) && get_num(st, "slot_capacity", &capacity) &&
	    used + slots > m->conf.max_slot_usage * capacity) {
		snprintf(reason, cap,
			 "admission: %.0f + %u slots would pass %.3f of switch %s's %.0f", used,
			 slots, m->conf.max_slot_usage, m->sw[k].text, capacity);
		goto refuse;
	}
	if (get_num(st, "queue_depth", &depth) && depth > m->conf.max_queue_depth) {
		snprintf(reason, cap,
			 "admission: switch %s: queue depth %.0f above the threshold %u",
			 m->sw[k].text, depth, m->conf.max_queue_depth);
		goto refuse;
	}
	pthread_mutex_unlock(&m->st_lock);
	return true;
refuse:
	pthread_mutex_unlock(&m->st_lock);
	return false;
}

/*
 * The switch's last stats for switch.status: all of it but the sessions
 * that would not fit one reply (the switch pages them, the manager keeps
 * them all): those are left out and counted in "sessions_omitted".
 */
static json_t *
stats_page(const json_t *stats)
{
	json_t *out = json_deep_copy(stats), *all = json_object_get(stats, "sessions");
	struct ctl_page page = {.arr = json_array()};
	size_t i;

	if (!json_is_array(all)) {
		json_decref(page.arr);
		return out;
	}
	for (i = 0; i < json_array_size(all); i++)
		if (!ctl_page_add(&page, json_deep_copy(json_array_get(all, i))))
			break;
	json_object_set_new(out, "sessions", page.arr);
	if (page.full)
		json_object_set_new(out, "sessions_omitted",
				    json_integer((json_int_t)(json_array_size(all) - i)));
	return out;
}

/* One switch's status; its stats whole (the one switch) or without the sessions (a fabric). */
static void
status_one(struct mgr *m, unsigned int k, bool sessions, json_t *res)
{
	const struct mgr_switch_state *st = &m->sw[k].st;
	int64_t now = mgr_now_ms();
	json_t *lease = json_object(), *stats = json_null();
	char ctl[CMN_ADDR_TEXT];

	pthread_mutex_lock(&m->st_lock);
	if (m->fabric.mode != MGR_FABRIC_ONE)
		json_object_set_new(res, "name", json_string(m->fabric.sw[k].name));
	json_object_set_new(res, "switch",
			    json_string(cmn_format_addr(&m->fabric.sw[k].ctl, ctl, sizeof(ctl))));
	json_object_set_new(res, "aggregator", json_string(m->sw[k].agg_text));
	json_object_set_new(res, "reachable", json_boolean(st->reachable));
	if (st->polled_ms)
		json_object_set_new(res, "polled_ms_ago", json_integer(now - st->polled_ms));
	if (!st->reachable && st->poll_error[0])
		json_object_set_new(res, "error", json_string(st->poll_error));
	if (st->stats && sessions) {
		stats = stats_page(st->stats);
	} else if (st->stats) {
		stats = json_deep_copy(st->stats);
		json_object_set_new(stats, "sessions",
				    json_integer((json_int_t)json_array_size(
					json_object_get(st->stats, "sessions"))));
	}
	json_object_set_new(res, "stats", stats);
	json_object_set_new(lease, "ttl_ms", json_integer(m->conf.lease_ms));
	json_object_set_new(lease, "renew_ms", json_integer(m->conf.lease_ms / 3));
	json_object_set_new(lease, "held",
			    json_boolean(m->conf.lease_ms && st->lease_ok_ms &&
					 now - st->lease_ok_ms < (int64_t)m->conf.lease_ms));
	if (st->lease_ok_ms)
		json_object_set_new(lease, "renewed_ms_ago", json_integer(now - st->lease_ok_ms));
	json_object_set_new(lease, "renewals", json_integer((json_int_t)st->leases));
	json_object_set_new(lease, "failures", json_integer((json_int_t)st->lease_failures));
	json_object_set_new(lease, "failing", json_integer(st->lease_fail_run));
	if (st->lease_fail_run)
		json_object_set_new(lease, "error", json_string(st->lease_error));
	pthread_mutex_unlock(&m->st_lock);
	json_object_set_new(res, "lease", lease);
}

void
mgr_switch_status(struct mgr *m, json_t *res)
{
	json_t *all;

	if (m->fabric.mode == MGR_FABRIC_ONE) {
		status_one(m, 0, true, res);
		return;
	}
	all = json_array();
	for (unsigned int k = 0; k < m->fabric.n; k++) {
		json_t *one = json_object();

		status_one(m, k, false, one);
		json_array_append_new(all, one);
	}
	json_object_set_new(res, "fabric", json_string(mgr_fabric_mode_name(m->fabric.mode)));
	if (m->fabric.mode == MGR_FABRIC_TREE)
		json_object_set_new(res, "spine", json_string(m->fabric.sw[m->fabric.spine].name));
	json_object_set_new(res, "switches", all);
}

bool
mgr_switch_reachable(struct mgr *m, unsigned int k)
{
	bool r;

	pthread_mutex_lock(&m->st_lock);
	r = m->sw[k].st.poll_fail_run < 2;
	pthread_mutex_unlock(&m->st_lock);
	return r;
}

unsigned int
mgr_switch_lcores(struct mgr *m, unsigned int k)
{
	json_int_t l = 0;

	pthread_mutex_lock(&m->st_lock);
	if (m->sw[k].st.stats)
		l = json_integer_value(json_object_get(m->sw[k].st.stats, "lcores"));
	pthread_mutex_unlock(&m->st_lock);
	return l > 0 ? (unsigned int)l : 1;
}

unsigned int
mgr_switch_lcores_max(struct mgr *m)
{
	unsigned int most = 1;

	for (unsigned int k = 0; k < m->fabric.n; k++) {
		unsigned int l = mgr_switch_lcores(m, k);

		most = l > most ? l : most;
	}
	return most;
}
