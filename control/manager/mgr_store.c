/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "mgr_store.h"

/* "CA15" + 1: PRAGMA application_id of a store of this manager. */
#define STORE_APP_ID 0x43413135
/* 2: tensors.wire (BLOCK16); 3: members.ports (flows); older stores are upgraded when opened */
#define STORE_SCHEMA 3

/*
 * Statements kept prepared for the store's life, found by the address of
 * their SQL (a string literal of this file): a manager's requests run the
 * same few dozen again and again, and preparing one costs about 30 us where
 * running it again costs about 1 (Debian 12's SQLite, this machine).
 */
#define STORE_KEPT 64

struct kept_stmt {
	const char *sql;
	sqlite3_stmt *s;
	bool busy; /**< between prep() and done() */
};

struct mgr_store {
	sqlite3 *db;
	bool lazy; /**< in a mgr_store_begin_lazy() transaction */
	unsigned int n_kept;
	struct kept_stmt kept[STORE_KEPT];
};

static const char schema[] =
    "CREATE TABLE counters(name TEXT PRIMARY KEY, next INTEGER NOT NULL);"
    "INSERT INTO counters VALUES('tenant', 1), ('session', 1);"
    /* every id ever granted: the primary key refuses a second grant */
    "CREATE TABLE granted(kind TEXT NOT NULL, id INTEGER NOT NULL, job TEXT NOT NULL,"
    " PRIMARY KEY(kind, id));"
    "CREATE TABLE tenants(name TEXT PRIMARY KEY, id INTEGER NOT NULL UNIQUE);"
    "CREATE TABLE jobs(name TEXT PRIMARY KEY, tenant_name TEXT NOT NULL,"
    " tenant INTEGER NOT NULL, session INTEGER NOT NULL UNIQUE, world INTEGER NOT NULL,"
    " slots INTEGER NOT NULL, elems INTEGER NOT NULL, priority INTEGER NOT NULL,"
    " state TEXT NOT NULL, offload INTEGER NOT NULL, reason TEXT NOT NULL,"
    " first_seq INTEGER NOT NULL, on_switch INTEGER NOT NULL, installing INTEGER NOT NULL,"
    " pending_del INTEGER NOT NULL, lim INTEGER NOT NULL, last_step INTEGER NOT NULL,"
    " created_ms INTEGER NOT NULL, ended_ms INTEGER);"
    "CREATE TABLE members(job TEXT NOT NULL, rank INTEGER NOT NULL, mac TEXT NOT NULL,"
    " ip TEXT NOT NULL, port INTEGER NOT NULL, ports INTEGER NOT NULL DEFAULT 1,"
    " PRIMARY KEY(job, rank));"
    "CREATE TABLE tensors(job TEXT NOT NULL, tensor INTEGER NOT NULL, op INTEGER NOT NULL,"
    " installed INTEGER NOT NULL, scale REAL NOT NULL, wire INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY(job, tensor));"
    "CREATE TABLE reports(job TEXT NOT NULL, step INTEGER NOT NULL, rank INTEGER NOT NULL,"
    " collectives INTEGER NOT NULL, fallbacks INTEGER NOT NULL, errors INTEGER NOT NULL,"
    " congested INTEGER NOT NULL, PRIMARY KEY(job, step, rank));"
    "CREATE TABLE report_tensors(job TEXT NOT NULL, step INTEGER NOT NULL,"
    " rank INTEGER NOT NULL, tensor INTEGER NOT NULL, max_abs REAL NOT NULL,"
    " PRIMARY KEY(job, step, rank, tensor));"
    "CREATE TABLE answers(job TEXT NOT NULL, step INTEGER NOT NULL, answer TEXT NOT NULL,"
    " PRIMARY KEY(job, step));";

static int
sql_fail(struct mgr_store *st, const char *what)
{
	mgr_log(MGR_LOG_ERROR, "store: %s: %s", what, sqlite3_errmsg(st->db));
	return -EIO;
}

/* The end of a statement of prep(): a kept one is reset for its next use,
 * another finalized. */
static void
done(struct mgr_store *st, sqlite3_stmt *s)
{
	for (unsigned int i = 0; i < st->n_kept; i++)
		if (st->kept[i].s == s) {
			sqlite3_reset(s);
			sqlite3_clear_bindings(s);
			st->kept[i].busy = false;
			return;
		}
	sqlite3_finalize(s);
}

/*
 * The statement of sql, its parameters bound: fmt has one letter per '?':
 * t text, i int64, d double. sql must be a string literal: the statement is
 * kept by its address (a second one is prepared while the kept one is in
 * use). done() ends it.
 */
static int
prep(struct mgr_store *st, sqlite3_stmt **s, const char *sql, const char *fmt, ...)
{
	struct kept_stmt *k = NULL;
	va_list ap;
	int rc = SQLITE_OK;

	for (unsigned int i = 0; i < st->n_kept && !k; i++)
		if (st->kept[i].sql == sql)
			k = &st->kept[i];
	if (k && !k->busy) {
		*s = k->s;
		k->busy = true;
	} else {
		bool keep = !k && st->n_kept < STORE_KEPT;

		if (sqlite3_prepare_v3(st->db, sql, -1, keep ? SQLITE_PREPARE_PERSISTENT : 0, s,
				       NULL) != SQLITE_OK)
			return sql_fail(st, sql);
		if (keep)
			st->kept[st->n_kept++] =
			    (struct kept_stmt){.sql = sql, .s = *s, .busy = true};
	}
	va_start(ap, fmt);
	for (int i = 1; fmt[i - 1] && rc == SQLITE_OK; i++) {
		switch (fmt[i - 1]) {
		case 't':
			rc = sqlite3_bind_text(*s, i, va_arg(ap, const char *), -1,
					       SQLITE_TRANSIENT);
			break;
		case 'i':
			rc = sqlite3_bind_int64(*s, i, va_arg(ap, int64_t));
			break;
		default:
			rc = sqlite3_bind_double(*s, i, va_arg(ap, double));
			break;
		}
	}
	va_end(ap);
	if (rc != SQLITE_OK) {
		done(st, *s);
		*s = NULL;
		return sql_fail(st, sql);
	}
	return 0;
}

/* Run a prepared statement that returns no rows, and finalize it. */
static int
run(struct mgr_store *st, sqlite3_stmt *s, const char *what)
{
	int rc = sqlite3_step(s);

	done(st, s);
	return rc == SQLITE_DONE ? 0 : sql_fail(st, what);
}

#define EXEC(st, sql, ...)                                                                         \
	({                                                                                         \
		sqlite3_stmt *s_;                                                                  \
		int r_ = prep(st, &s_, sql, __VA_ARGS__);                                          \
		r_ ? r_ : run(st, s_, sql);                                                        \
	})

static int
exec_plain(struct mgr_store *st, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		mgr_log(MGR_LOG_ERROR, "store: %.60s: %s", sql, msg ? msg : "?");
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

static int
pragma_int(struct mgr_store *st, const char *sql, int64_t *out)
{
	sqlite3_stmt *s;
	int rc = prep(st, &s, sql, "");

	if (rc)
		return rc;
	rc = sqlite3_step(s);
	*out = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
	done(st, s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : sql_fail(st, sql);
}

/* Before closing the database: it closes only without statements. */
static void
forget_kept(struct mgr_store *st)
{
	for (unsigned int i = 0; i < st->n_kept; i++)
		sqlite3_finalize(st->kept[i].s);
	st->n_kept = 0;
}

int
mgr_store_open(const char *path, struct mgr_store **out, struct ctl_err *err)
{
	struct mgr_store *st = calloc(1, sizeof(*st));
	int64_t app = 0, tables = 0, version = 0;
	int rc;

	*out = NULL;
	if (!st)
		return ctl_fail(err, ENOMEM, "out of memory");
	rc = sqlite3_open_v2(path, &st->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		rc = ctl_fail(err, EACCES, "--db %s: %s", path,
			      st->db ? sqlite3_errmsg(st->db) : "cannot open");
		goto fail;
	}
	sqlite3_busy_timeout(st->db, 2000);
	/* one manager per store: the first write takes the lock until close */
	if (exec_plain(st, "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL;"
			   "PRAGMA synchronous=FULL; BEGIN IMMEDIATE; COMMIT;") ||
	    pragma_int(st, "PRAGMA application_id", &app) ||
	    pragma_int(st, "PRAGMA user_version", &version) ||
	    pragma_int(st, "SELECT count(*) FROM sqlite_master", &tables)) {
		rc = ctl_fail(err, EIO, "--db %s: %s (is another cais-manager using it?)", path,
			      sqlite3_errmsg(st->db));
		goto fail;
	}
	if (app == 0 && tables == 0) {
		char init[64];

		snprintf(init, sizeof(init), "PRAGMA application_id=%d; PRAGMA user_version=%d;",
			 STORE_APP_ID, STORE_SCHEMA);
		if (exec_plain(st, "BEGIN IMMEDIATE") || exec_plain(st, schema) ||
		    exec_plain(st, init) || exec_plain(st, "COMMIT")) {
			rc = ctl_fail(err, EIO, "--db %s: cannot create the store", path);
			goto fail;
		}
		mgr_log(MGR_LOG_INFO, "store %s created", path);
	} else if (app == STORE_APP_ID && (version == 1 || version == 2)) {
		/* every tensor of a schema 1 store was FIXED32, every member of a
		 * schema 1 or 2 store one flow */
		if (exec_plain(st, "BEGIN IMMEDIATE") ||
		    (version == 1 &&
		     exec_plain(st, "ALTER TABLE tensors ADD COLUMN wire INTEGER NOT NULL DEFAULT 0;")) ||
		    exec_plain(st, "ALTER TABLE members ADD COLUMN ports INTEGER NOT NULL DEFAULT 1;"
				   "PRAGMA user_version=3;") ||
		    exec_plain(st, "COMMIT")) {
			rc = ctl_fail(err, EIO, "--db %s: cannot upgrade the store to schema 3", path);
			goto fail;
		}
		mgr_log(MGR_LOG_INFO, "store %s upgraded from schema %d to 3", path, (int)version);
	} else if (app != STORE_APP_ID || version != STORE_SCHEMA) {
		rc = ctl_fail(err, EINVAL, "--db %s is not a cais-manager store (schema %d)", path,
			      STORE_SCHEMA);
		goto fail;
	}
	*out = st;
	return 0;
fail:
	forget_kept(st);
	sqlite3_close(st->db);
	free(st);
	return rc;
}

void
mgr_store_close(struct mgr_store *st)
{
	if (!st)
		return;
	forget_kept(st);
	if (sqlite3_close(st->db) != SQLITE_OK)
		mgr_log(MGR_LOG_ERROR, "store: close: %s", sqlite3_errmsg(st->db));
	free(st);
}

int
mgr_store_begin(struct mgr_store *st)
{
	return exec_plain(st, "BEGIN IMMEDIATE");
}

/*
 * synchronous=NORMAL for one transaction (the store runs in WAL mode):
 * its commit appends to the WAL without waiting for the disk. A crash of
 * the process loses nothing; one of the machine may lose the lazy commits
 * since the last full one, whole and in order (never a part of one, never
 * one before a full commit that followed it: that commit's sync of the WAL
 * covers them).
 */
int
mgr_store_begin_lazy(struct mgr_store *st)
{
	int rc = exec_plain(st, "PRAGMA synchronous=NORMAL");

	if (rc)
		return rc;
	st->lazy = true;
	if ((rc = mgr_store_begin(st)))
		mgr_store_rollback(st);
	return rc;
}

/* After a lazy transaction: every commit waits for the disk again. */
static void
end_lazy(struct mgr_store *st)
{
	if (st->lazy && exec_plain(st, "PRAGMA synchronous=FULL") == 0)
		st->lazy = false;
}

int
mgr_store_commit(struct mgr_store *st)
{
	int rc = exec_plain(st, "COMMIT");

	if (rc)
		mgr_store_rollback(st);
	end_lazy(st);
	return rc;
}

void
mgr_store_rollback(struct mgr_store *st)
{
	if (!sqlite3_get_autocommit(st->db))
		exec_plain(st, "ROLLBACK");
	end_lazy(st);
}

static int
grant(struct mgr_store *st, const char *kind, const char *job, uint16_t *id)
{
	sqlite3_stmt *s;
	int64_t next;
	int rc;

	if ((rc = prep(st, &s, "SELECT next FROM counters WHERE name = ?", "t", kind)))
		return rc;
	rc = sqlite3_step(s);
	next = sqlite3_column_int64(s, 0);
	done(st, s);
	if (rc != SQLITE_ROW)
		return sql_fail(st, "counters");
	if (next < 1 || next > MGR_ID_MAX)
		return -ENOSPC;
	if ((rc = EXEC(st, "INSERT INTO granted(kind, id, job) VALUES(?, ?, ?)", "tit", kind, next,
		       job)) ||
	    (rc = EXEC(st, "UPDATE counters SET next = next + 1 WHERE name = ?", "t", kind)))
		return rc;
	*id = (uint16_t)next;
	return 0;
}

int
mgr_store_next_id(struct mgr_store *st, const char *kind, int64_t *next)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = prep(st, &s, "SELECT next FROM counters WHERE name = ?", "t", kind)))
		return rc;
	rc = sqlite3_step(s);
	*next = sqlite3_column_int64(s, 0);
	done(st, s);
	return rc == SQLITE_ROW ? 0 : -ENOENT;
}

int
mgr_store_tenant(struct mgr_store *st, const char *name, const char *job, uint16_t *id)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = prep(st, &s, "SELECT id FROM tenants WHERE name = ?", "t", name)))
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*id = (uint16_t)sqlite3_column_int(s, 0);
	done(st, s);
	if (rc == SQLITE_ROW)
		return 0;
	if (rc != SQLITE_DONE)
		return sql_fail(st, "tenants");
	if ((rc = grant(st, "tenant", job, id)))
		return rc;
	return EXEC(st, "INSERT INTO tenants(name, id) VALUES(?, ?)", "ti", name, (int64_t)*id);
}

int
mgr_store_grant_session(struct mgr_store *st, const char *job, uint16_t *id)
{
	return grant(st, "session", job, id);
}

static const char *const state_names[] = {"waiting", "ready", "ended"};

const char *
mgr_state_name(enum mgr_state s)
{
	return (unsigned int)s <= MGR_ENDED ? state_names[s] : "?";
}

static enum mgr_state
state_of(const char *s)
{
	for (int i = 0; i <= MGR_ENDED; i++)
		if (s && strcmp(s, state_names[i]) == 0)
			return (enum mgr_state)i;
	return MGR_ENDED;
}

#define JOB_COLUMNS                                                                                \
	"name, tenant_name, tenant, session, world, slots, elems, priority, state, offload, "      \
	"reason, first_seq, on_switch, installing, pending_del, lim, last_step, "                  \
	"(SELECT count(*) FROM members WHERE members.job = jobs.name), rowid"

static void
copy_text(char *dst, size_t cap, sqlite3_stmt *s, int col)
{
	const unsigned char *t = sqlite3_column_text(s, col);

	snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static void
job_row(sqlite3_stmt *s, struct mgr_job *j)
{
	memset(j, 0, sizeof(*j));
	copy_text(j->name, sizeof(j->name), s, 0);
	copy_text(j->tenant_name, sizeof(j->tenant_name), s, 1);
	j->tenant = (uint16_t)sqlite3_column_int(s, 2);
	j->session = (uint16_t)sqlite3_column_int(s, 3);
	j->world = (uint16_t)sqlite3_column_int(s, 4);
	j->slots = (uint32_t)sqlite3_column_int64(s, 5);
	j->elems = (uint16_t)sqlite3_column_int(s, 6);
	j->priority = (uint8_t)sqlite3_column_int(s, 7);
	j->state = state_of((const char *)sqlite3_column_text(s, 8));
	j->offload = sqlite3_column_int(s, 9) != 0;
	copy_text(j->reason, sizeof(j->reason), s, 10);
	j->first_seq = (uint32_t)sqlite3_column_int64(s, 11);
	j->on_switch = sqlite3_column_int(s, 12) != 0;
	j->installing = sqlite3_column_int(s, 13) != 0;
	j->pending_del = sqlite3_column_int(s, 14) != 0;
	j->limit = sqlite3_column_int(s, 15);
	j->last_step = sqlite3_column_int64(s, 16);
	j->joined = (unsigned int)sqlite3_column_int(s, 17);
	j->row = sqlite3_column_int64(s, 18);
}

int
mgr_store_job_get(struct mgr_store *st, const char *name, struct mgr_job *job)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = prep(st, &s, "SELECT " JOB_COLUMNS " FROM jobs WHERE name = ?", "t", name)))
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		job_row(s, job);
	done(st, s);
	if (rc == SQLITE_ROW)
		return 0;
	return rc == SQLITE_DONE ? -ENOENT : sql_fail(st, "jobs");
}

int
mgr_store_job_put(struct mgr_store *st, const struct mgr_job *j, int64_t now_ms)
{
	return EXEC(st,
		    "INSERT INTO jobs(name, tenant_name, tenant, session, world, slots, elems,"
		    " priority, state, offload, reason, first_seq, on_switch, installing,"
		    " pending_del, lim, last_step, created_ms, ended_ms)"
		    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,"
		    " ?17, ?18, CASE WHEN ?9 = 'ended' THEN ?18 END)"
		    " ON CONFLICT(name) DO UPDATE SET state = ?9, offload = ?10, reason = ?11,"
		    " first_seq = ?12, on_switch = ?13, installing = ?14, pending_del = ?15,"
		    " lim = ?16, last_step = ?17,"
		    " ended_ms = CASE WHEN ?9 = 'ended' THEN coalesce(ended_ms, ?18) END",
		    "ttiiiiiititiiiiiii", j->name, j->tenant_name, (int64_t)j->tenant,
		    (int64_t)j->session, (int64_t)j->world, (int64_t)j->slots, (int64_t)j->elems,
		    (int64_t)j->priority, mgr_state_name(j->state), (int64_t)j->offload, j->reason,
		    (int64_t)j->first_seq, (int64_t)j->on_switch, (int64_t)j->installing,
		    (int64_t)j->pending_del, (int64_t)j->limit, j->last_step, now_ms);
}

int
mgr_store_job_delete(struct mgr_store *st, const char *name)
{
	static const char *const sql[] = {
	    "DELETE FROM members WHERE job = ?", "DELETE FROM tensors WHERE job = ?",
	    "DELETE FROM reports WHERE job = ?", "DELETE FROM report_tensors WHERE job = ?",
	    "DELETE FROM answers WHERE job = ?", "DELETE FROM jobs WHERE name = ?",
	};
	int rc = 0;

	for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]) && !rc; i++)
		rc = EXEC(st, sql[i], "t", name);
	return rc;
}

int
mgr_store_jobs(struct mgr_store *st, int (*fn)(void *arg, const struct mgr_job *job), void *arg)
{
	return mgr_store_jobs_after(st, -1, fn, arg);
}

int
mgr_store_jobs_after(struct mgr_store *st, int64_t after,
		     int (*fn)(void *arg, const struct mgr_job *job), void *arg)
{
	struct mgr_job j;
	sqlite3_stmt *s;
	int rc;

	if ((rc = prep(st, &s, "SELECT " JOB_COLUMNS " FROM jobs WHERE rowid > ? ORDER BY rowid",
		       "i", after)))
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		job_row(s, &j);
		if (fn(arg, &j))
			break;
	}
	done(st, s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : sql_fail(st, "jobs");
}

int
mgr_store_prune_ended(struct mgr_store *st, unsigned int keep)
{
	char *names[64];
	unsigned int n = 0;
	sqlite3_stmt *s;
	int rc;

	if ((rc = prep(st, &s,
		       "SELECT name FROM jobs WHERE state = 'ended' AND pending_del = 0"
		       " ORDER BY ended_ms DESC, rowid DESC LIMIT 64 OFFSET ?",
		       "i", (int64_t)keep)))
		return rc;
	while (sqlite3_step(s) == SQLITE_ROW && n < 64)
		names[n++] = strdup((const char *)sqlite3_column_text(s, 0));
	done(st, s);
	for (unsigned int i = 0; i < n; i++) {
		if (!rc && names[i])
			rc = mgr_store_job_delete(st, names[i]);
		free(names[i]);
	}
	return rc;
}

int
mgr_store_members(struct mgr_store *st, const char *job, struct mgr_member *m, unsigned int cap,
		  unsigned int *n)
{
	sqlite3_stmt *s;
	int rc;

	*n = 0;
	if ((rc =
		 prep(st, &s,
		      "SELECT rank, mac, ip, port, ports FROM members WHERE job = ? ORDER BY rank",
		      "t", job)))
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW && *n < cap) {
		struct mgr_member *x = &m[(*n)++];

		x->rank = (uint16_t)sqlite3_column_int(s, 0);
		copy_text(x->mac, sizeof(x->mac), s, 1);
		copy_text(x->ip, sizeof(x->ip), s, 2);
		x->port = (uint16_t)sqlite3_column_int(s, 3);
		x->ports = (uint8_t)sqlite3_column_int(s, 4);
	}
	done(st, s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : sql_fail(st, "members");
}

int
mgr_store_member_put(struct mgr_store *st, const char *job, const struct mgr_member *m)
{
	return EXEC(st,
		    "INSERT INTO members(job, rank, mac, ip, port, ports) VALUES(?, ?, ?, ?, ?, ?)",
		    "tittii", job, (int64_t)m->rank, m->mac, m->ip, (int64_t)m->port,
		    (int64_t)(m->ports ? m->ports : 1));
}

int
mgr_store_tensors(struct mgr_store *st, const char *job, struct mgr_tensor *t, unsigned int cap,
		  unsigned int *n)
{
	sqlite3_stmt *s;
	int rc;

	*n = 0;
	if ((rc = prep(st, &s,
		       "SELECT tensor, op, installed, scale, wire FROM tensors WHERE job = ?"
		       " ORDER BY tensor",
		       "t", job)))
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW && *n < cap) {
		struct mgr_tensor *x = &t[(*n)++];

		x->id = (uint32_t)sqlite3_column_int64(s, 0);
		x->op = (enum cais_redop)sqlite3_column_int(s, 1);
		x->installed = sqlite3_column_int(s, 2) != 0;
		x->scale = sqlite3_column_double(s, 3);
		x->wire = (uint8_t)sqlite3_column_int(s, 4);
	}
	done(st, s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : sql_fail(st, "tensors");
}

int
mgr_store_tensor_put(struct mgr_store *st, const char *job, const struct mgr_tensor *t)
{
	return EXEC(st,
		    "INSERT INTO tensors(job, tensor, op, installed, scale, wire)"
		    " VALUES(?, ?, ?, ?, ?, ?)"
		    " ON CONFLICT(job, tensor) DO UPDATE SET installed = excluded.installed,"
		    " scale = excluded.scale",
		    "tiiidi", job, (int64_t)t->id, (int64_t)t->op, (int64_t)t->installed, t->scale,
		    (int64_t)t->wire);
}

int
mgr_store_report_put(struct mgr_store *st, const char *job, const struct mgr_report *r)
{
	int rc;

	if ((rc = EXEC(st,
		       "INSERT OR REPLACE INTO reports(job, step, rank, collectives, fallbacks,"
		       " errors, congested) VALUES(?, ?, ?, ?, ?, ?, ?)",
		       "tiiiiii", job, r->step, (int64_t)r->rank, r->collectives, r->fallbacks,
		       r->errors, r->congested)) ||
	    (rc = EXEC(st, "DELETE FROM report_tensors WHERE job = ? AND step = ? AND rank = ?",
		       "tii", job, r->step, (int64_t)r->rank)))
		return rc;
	for (unsigned int i = 0; i < r->n_tensors && !rc; i++)
		rc = EXEC(st,
			  "INSERT INTO report_tensors(job, step, rank, tensor, max_abs)"
			  " VALUES(?, ?, ?, ?, ?)",
			  "tiiid", job, r->step, (int64_t)r->rank, (int64_t)r->tensor[i],
			  r->max_abs[i]);
	return rc;
}

int
mgr_store_step_congested(struct mgr_store *st, const char *job, int64_t step, bool *congested)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = prep(st, &s,
		       "SELECT count(*) FROM reports WHERE job = ? AND step = ? AND congested > 0",
		       "ti", job, step)))
		return rc;
	rc = sqlite3_step(s);
	*congested = rc == SQLITE_ROW && sqlite3_column_int64(s, 0) > 0;
	done(st, s);
	return rc == SQLITE_ROW ? 0 : sql_fail(st, "reports");
}

int
mgr_store_latest_ranks(struct mgr_store *st, const char *job, int64_t step, unsigned int *ranks)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = prep(st, &s,
		       "SELECT count(DISTINCT rank) FROM reports WHERE job = ? AND step >= ?"
		       " AND step <= ?",
		       "tii", job, step - 1, step)))
		return rc;
	rc = sqlite3_step(s);
	*ranks = rc == SQLITE_ROW ? (unsigned int)sqlite3_column_int64(s, 0) : 0;
	done(st, s);
	return rc == SQLITE_ROW ? 0 : sql_fail(st, "reports");
}

int
mgr_store_latest_max_abs(struct mgr_store *st, const char *job, int64_t step, uint32_t tensor,
			 double *max_abs)
{
	sqlite3_stmt *s;
	int rc;

	if ((rc = prep(st, &s,
		       "SELECT max(max_abs) FROM report_tensors WHERE job = ? AND tensor = ?"
		       " AND (step = ? OR (step = ? AND rank NOT IN"
		       " (SELECT rank FROM reports WHERE job = ? AND step = ?)))",
		       "tiiiti", job, (int64_t)tensor, step, step - 1, job, step)))
		return rc;
	rc = sqlite3_step(s);
	*max_abs = rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL
		       ? sqlite3_column_double(s, 0)
		       : -1.0;
	done(st, s);
	return rc == SQLITE_ROW ? 0 : sql_fail(st, "report_tensors");
}

int
mgr_store_answer_get(struct mgr_store *st, const char *job, int64_t step, char **text)
{
	sqlite3_stmt *s;
	int rc;

	*text = NULL;
	if ((rc = prep(st, &s, "SELECT answer FROM answers WHERE job = ? AND step = ?", "ti", job,
		       step)))
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*text = strdup((const char *)sqlite3_column_text(s, 0));
	done(st, s);
	if (rc == SQLITE_ROW)
		return *text ? 0 : -ENOMEM;
	return rc == SQLITE_DONE ? -ENOENT : sql_fail(st, "answers");
}

int
mgr_store_answer_put(struct mgr_store *st, const char *job, int64_t step, const char *text)
{
	return EXEC(st, "INSERT INTO answers(job, step, answer) VALUES(?, ?, ?)", "tit", job, step,
		    text);
}

int
mgr_store_prune_steps(struct mgr_store *st, const char *job, int64_t first)
{
	int rc;

	if ((rc = EXEC(st, "DELETE FROM reports WHERE job = ? AND step < ?", "ti", job, first)) ||
	    (rc = EXEC(st, "DELETE FROM report_tensors WHERE job = ? AND step < ?", "ti", job,
		       first)))
		return rc;
	return EXEC(st, "DELETE FROM answers WHERE job = ? AND step < ?", "ti", job, first);
}

int
mgr_store_dump(struct mgr_store *st, char **text)
{
	static const char *const tables[] = {"counters", "granted",	   "tenants",
					     "jobs",	 "members",	   "tensors",
					     "reports",	 "report_tensors", "answers"};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int rc = 0;

	*text = NULL;
	if (!f)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]) && !rc; i++) {
		char sql[64];
		sqlite3_stmt *s;

		/* built here, not a literal: prepared for this once */
		snprintf(sql, sizeof(sql), "SELECT * FROM %s ORDER BY rowid", tables[i]);
		if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
			rc = sql_fail(st, sql);
			break;
		}
		fprintf(f, "[%s]\n", tables[i]);
		while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
			for (int c = 0; c < sqlite3_column_count(s); c++) {
				const unsigned char *v = sqlite3_column_text(s, c);

				fprintf(f, "%s%s", c ? "|" : "", v ? (const char *)v : "NULL");
			}
			fputc('\n', f);
		}
		rc = rc == SQLITE_DONE ? 0 : sql_fail(st, sql);
		sqlite3_finalize(s);
	}
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	*text = buf;
	return 0;
}
