/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The communicator: API, issue and completion of collectives, metrics,
 * and the progress thread's loop.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "agent.h"

#define CAIS_X_TEXT(name, text) text,
static const char *const fallback_names[] = {CAIS_FALLBACKS(CAIS_X_TEXT)};
#undef CAIS_X_TEXT

const char *
cais_fallback_name(enum cais_fallback fb)
{
	return (unsigned int)fb < CAIS_FB_COUNT ? fallback_names[fb] : "?";
}

const char *
cais_datatype_name(enum cais_datatype dt)
{
	static const char *const n[] = {"f32", "bf16", "f16", "i32"};

	return (unsigned int)dt < 4 ? n[dt] : "?";
}

const char *
cais_redop_name(enum cais_redop op)
{
	return cais_op_name(op);
}

const char *
cais_path_name(enum cais_path p)
{
	static const char *const n[] = {"auto", "switch", "ring"};

	return (unsigned int)p < 3 ? n[p] : "?";
}

size_t
cais_datatype_size(enum cais_datatype dt)
{
	switch (dt) {
	case CAIS_FLOAT32:
	case CAIS_INT32:
		return 4;
	case CAIS_BFLOAT16:
	case CAIS_FLOAT16:
		return 2;
	}
	return 0;
}

const char *
cais_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EINVAL:
		return "invalid argument";
	case ENOMEM:
		return "out of memory";
	case ETIMEDOUT:
		return "the collective did not complete within the configured bound (timeout_ms)";
	case ECONNREFUSED:
		return "the switch cannot serve this collective and the path is switch-only";
	case ECANCELED:
		return "the communicator was destroyed before the collective completed";
	case EPROTO:
		return "a peer broke the agent protocol (mismatched collectives across ranks?)";
	case ENETDOWN:
		return "network error on the data network";
	case EADDRINUSE:
		return "this rank's data address (UDP or TCP port) is already in use";
	case EADDRNOTAVAIL:
		return "this rank's data address is not an address of this host";
	case EMSGSIZE:
		return "elems_per_packet does not fit the MTU of the route to the switch";
	default:
		return strerror(err);
	}
}

uint64_t
ag_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void
cais_config_init(struct cais_config *c)
{
	memset(c, 0, sizeof(*c));
	c->world = 1;
	c->slots = 128;
	c->elems = 2048;
	c->scale = 1024.0;
	c->threshold = CAIS_DEFAULT_THRESHOLD;
	c->retx_timeout_us = CAIS_DEFAULT_RETX_US;
	c->retries = CAIS_DEFAULT_RETRIES;
	c->timeout_ms = CAIS_DEFAULT_TIMEOUT_MS;
	c->check_every = CAIS_DEFAULT_CHECK_EVERY;
	c->error_alarm = CAIS_DEFAULT_ERROR_ALARM;
}

/* ---- buffers ---- */

void *
ag_buf_get(struct cais_comm *c, size_t size)
{
	unsigned int best = AG_POOL_BUFS;
	void *p;

	for (unsigned int i = 0; i < AG_POOL_BUFS; i++)
		if (c->pool[i].p && c->pool[i].size >= size &&
		    (best == AG_POOL_BUFS || c->pool[i].size < c->pool[best].size))
			best = i;
	if (best == AG_POOL_BUFS)
		return malloc(size);
	p = c->pool[best].p;
	c->pool[best].p = NULL;
	return p;
}

void
ag_buf_put(struct cais_comm *c, void *p, size_t size)
{
	unsigned int slot = AG_POOL_BUFS;

	if (!p)
		return;
	/* an empty place, else the smallest buffer if it is smaller than this one */
	for (unsigned int i = 0; i < AG_POOL_BUFS; i++) {
		if (!c->pool[i].p) {
			slot = i;
			break;
		}
		if (c->pool[i].size < size &&
		    (slot == AG_POOL_BUFS || c->pool[i].size < c->pool[slot].size))
			slot = i;
	}
	if (slot == AG_POOL_BUFS) {
		free(p);
		return;
	}
	free(c->pool[slot].p);
	c->pool[slot].p = p;
	c->pool[slot].size = size;
}

/* ---- tensors ---- */

static struct ag_tensor *
tensor_find(struct cais_comm *c, uint32_t id)
{
	struct ag_tensor *t;

	LIST_FOREACH (t, &c->tensors, link)
		if (t->id == id)
			return t;
	return NULL;
}

int
cais_tensor_set(struct cais_comm *c, uint32_t tensor, double scale, bool offload)
{
	struct ag_tensor *t;

	if (!c || !(scale > 0) || !isfinite(scale))
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	t = tensor_find(c, tensor);
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&c->lock);
			return -ENOMEM;
		}
		t->id = tensor;
		LIST_INSERT_HEAD(&c->tensors, t, link);
	}
	t->scale = scale;
	t->offload = offload;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int
cais_set_threshold(struct cais_comm *c, size_t bytes)
{
	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	c->threshold = bytes;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int
cais_set_path(struct cais_comm *c, enum cais_path path)
{
	if (!c || (unsigned int)path > CAIS_PATH_RING)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	c->path = path;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* ---- issue ---- */

static void
wake(struct cais_comm *c)
{
	uint64_t one = 1;

	if (write(c->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is already non-zero: the thread wakes anyway */
	}
}

static bool
overlap_bad(const void *send, const void *recv, size_t bytes)
{
	const uint8_t *s = send, *r = recv;

	return s != r && s < r + bytes && r < s + bytes;
}

int
cais_iallreduce(struct cais_comm *c, uint32_t tensor, const void *send, void *recv, size_t count,
		enum cais_datatype dt, enum cais_redop op, struct cais_request **out)
{
	size_t esz = cais_datatype_size(dt), bytes;
	struct cais_request *r;
	struct ag_tensor *t;
	uint64_t nchunks;

	if (!c || !send || !recv || !out || count == 0 || esz == 0 || (unsigned int)op > 3)
		return -EINVAL;
	bytes = count * esz;
	if (bytes / esz != count || overlap_bad(send, recv, bytes))
		return -EINVAL;
	nchunks = (count + c->cfg.elems - 1) / c->cfg.elems;
	if (nchunks > (1u << 30))
		return -EINVAL;
	if (c->managed)
		ag_note_maxabs(c, tensor, send, count, dt);
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->c = c;
	r->tensor = tensor;
	r->send = send;
	r->recv = recv;
	r->count = count;
	r->dt = dt;
	r->op = op;
	r->nchunks = (uint32_t)nchunks;
	r->fetch_from = -1;
	r->rel_error = -1;
	r->t_issue = ag_now_ns();
	r->deadline = r->t_issue + (uint64_t)c->cfg.timeout_ms * 1000000ull;

	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->stop)) {
		pthread_mutex_unlock(&c->lock);
		free(r);
		return -ECANCELED;
	}
	t = tensor_find(c, tensor);
	r->scale = (float)(t ? t->scale : c->cfg.scale);
	/* the offload decision: the same inputs on every rank, so the same answer */
	if (c->path == CAIS_PATH_RING)
		r->fb = CAIS_FB_FORCED;
	else if (c->path == CAIS_PATH_AUTO && bytes < c->threshold)
		r->fb = CAIS_FB_THRESHOLD;
	else if (t && !t->offload)
		r->fb = CAIS_FB_TENSOR_OFF;
	else if (c->path == CAIS_PATH_AUTO && t && t->disabled)
		r->fb = CAIS_FB_ERROR_ALARM;
	else
		r->fb = CAIS_FB_NONE;
	r->switch_only = c->path == CAIS_PATH_SWITCH;
	if (r->fb == CAIS_FB_NONE) {
		c->innet_issued++;
		/* int32 goes through the switch exactly: nothing to sample; a few
		 * elements say little about a tensor's error (and cost a ring) */
		r->check = c->cfg.check_every && !r->switch_only && c->cfg.world > 1 &&
			   dt != CAIS_INT32 && count >= AG_CHECK_MIN_COUNT &&
			   c->innet_issued % c->cfg.check_every == 0;
	}
	r->seq0 = c->next_seq;
	c->next_seq += r->nchunks;
	TAILQ_INSERT_TAIL(&c->submitted, r, link);
	pthread_mutex_unlock(&c->lock);
	wake(c);
	*out = r;
	return 0;
}

/* A submitted request enters the progress thread's world. */
static void
issue(struct cais_comm *c, struct cais_request *r)
{
	TAILQ_INSERT_TAIL(&c->active, r, link);
	if (r->fb == CAIS_FB_NONE) {
		r->stage_size = (size_t)r->nchunks * c->cfg.elems * CAIS_ELEM_SIZE;
		r->stage = ag_buf_get(c, r->stage_size);
		r->resolved = calloc(r->nchunks, 1);
		if (!r->stage || !r->resolved) {
			ag_complete(c, r, -ENOMEM);
			return;
		}
		r->state = AG_RQ_INNET;
		ag_ring_adopt_pending(c, r, false);
		return;
	}
	if (r->switch_only) {
		ag_complete(c, r, -ECONNREFUSED);
		return;
	}
	ag_to_ring(c, r, r->fb);
}

struct cais_request *
ag_req_of_seq(struct cais_comm *c, uint32_t seq)
{
	struct cais_request *r;

	TAILQ_FOREACH (r, &c->active, link)
		if (seq - r->seq0 < r->nchunks)
			return r;
	return NULL;
}

struct cais_request *
ag_req_by_seq0(struct cais_comm *c, uint32_t seq0)
{
	struct cais_request *r;

	TAILQ_FOREACH (r, &c->active, link)
		if (r->seq0 == seq0)
			return r;
	return NULL;
}

bool
ag_finished_innet(const struct cais_comm *c, uint32_t seq0)
{
	unsigned int n = c->n_finished < AG_FINISHED_LOG ? c->n_finished : AG_FINISHED_LOG;

	for (unsigned int i = 0; i < n; i++)
		if (c->finished[(c->n_finished - 1 - i) % AG_FINISHED_LOG].seq0 == seq0)
			return true;
	return false;
}

void
ag_to_ring(struct cais_comm *c, struct cais_request *r, enum cais_fallback fb)
{
	if (r->state == AG_RQ_RING || r->state == AG_RQ_FETCH || r->state == AG_RQ_DONE)
		return;
	if (r->switch_only) {
		ag_window_release(c, r);
		ag_complete(c, r, -ECONNREFUSED);
		return;
	}
	if (r->state == AG_RQ_INNET)
		ag_window_release(c, r);
	if (r->fb == CAIS_FB_NONE || r->state == AG_RQ_INNET)
		r->fb = fb;
	r->state = AG_RQ_RING;
	ag_ring_progress(c, r);
}

/* ---- completion ---- */

void
ag_decode_stage(struct cais_comm *c, struct cais_request *r)
{
	size_t esz = cais_datatype_size(r->dt);
	unsigned int n = c->cfg.world;
	float inv = 1.0f / r->scale;
	unsigned int avg_n = 1;

	if (r->op == CAIS_OP_AVG) {
		if (r->dt == CAIS_INT32)
			avg_n = n;
		else
			inv = (float)(1.0 / ((double)r->scale * n));
	}
	for (uint32_t i = 0; i < r->nchunks; i++) {
		size_t first = (size_t)i * c->cfg.elems;
		size_t cnt = r->count - first < c->cfg.elems ? r->count - first : c->cfg.elems;

		c->q->decode((uint8_t *)r->recv + first * esz, r->stage + first * CAIS_ELEM_SIZE,
			     cnt, r->dt, inv, avg_n);
	}
}

void
ag_innet_done(struct cais_comm *c, struct cais_request *r)
{
	c->finished[c->n_finished % AG_FINISHED_LOG].seq0 = r->seq0;
	c->finished[c->n_finished % AG_FINISHED_LOG].nchunks = r->nchunks;
	c->n_finished++;
	r->via_switch = true;
	if (r->check) {
		/* the same collective on the ring, from the intact input, as the float
		 * reference; recv gets the switch's result after the comparison */
		r->state = AG_RQ_RING;
		r->in_check = true;
		ag_ring_progress(c, r);
		ag_ring_adopt_pending(c, r, true);
		return;
	}
	ag_decode_stage(c, r);
	ag_complete(c, r, 0);
}

void
ag_complete(struct cais_comm *c, struct cais_request *r, int err)
{
	uint64_t t = ag_now_ns() - r->t_issue;
	bool innet = err == 0 && r->via_switch;

	if (r->state == AG_RQ_INNET)
		ag_window_release(c, r);
	r->state = AG_RQ_DONE;
	TAILQ_REMOVE(&c->active, r, link);
	ag_ring_free(r);
	ag_buf_put(c, r->stage, r->stage_size);
	free(r->resolved);
	r->stage = NULL;
	r->resolved = NULL;
	r->error = err;
	r->st.error = err;
	r->st.path = innet ? CAIS_PATH_SWITCH : CAIS_PATH_RING;
	r->st.fallback = innet ? CAIS_FB_NONE : r->fb;
	r->st.retransmissions = r->retx;
	r->st.peer_chunks = r->peer_chunks;
	r->st.time_us = (double)t / 1000.0;
	r->st.rel_error = r->rel_error;

	pthread_mutex_lock(&c->lock);
	if (err) {
		c->m.errors++;
	} else {
		c->m.collectives++;
		if (innet)
			c->m.in_network++;
		else
			c->m.fallback[r->fb]++;
		c->hist[cmn_hist_bucket(t)]++;
	}
	if (r->rel_error >= 0) {
		c->m.error_checks++;
		if (r->rel_error > c->m.max_rel_error)
			c->m.max_rel_error = r->rel_error;
		if (r->rel_error > c->cfg.error_alarm) {
			struct ag_tensor *tt = tensor_find(c, r->tensor);

			if (!tt && (tt = calloc(1, sizeof(*tt)))) {
				tt->id = r->tensor;
				tt->scale = r->scale;
				tt->offload = true;
				LIST_INSERT_HEAD(&c->tensors, tt, link);
			}
			if (tt && !tt->disabled) {
				tt->disabled = true;
				c->m.tensors_disabled++;
			}
		}
	}
	atomic_store_explicit(&r->done, 1, memory_order_release);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* ---- test, wait ---- */

static int
reap(struct cais_request *r, struct cais_status *st)
{
	int err = r->error;

	if (st)
		*st = r->st;
	free(r);
	return err;
}

int
cais_test_status(struct cais_request *r, int *done, struct cais_status *st)
{
	if (!r || !done)
		return -EINVAL;
	*done = atomic_load_explicit(&r->done, memory_order_acquire);
	if (!*done)
		return 0;
	return reap(r, st);
}

int
cais_test(struct cais_request *r, int *done)
{
	return cais_test_status(r, done, NULL);
}

int
cais_wait_status(struct cais_request *r, struct cais_status *st)
{
	struct cais_comm *c;

	if (!r)
		return -EINVAL;
	c = r->c;
	pthread_mutex_lock(&c->lock);
	/* the progress thread bounds every collective by its deadline */
	while (!atomic_load_explicit(&r->done, memory_order_acquire))
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	return reap(r, st);
}

int
cais_wait(struct cais_request *r)
{
	return cais_wait_status(r, NULL);
}

int
cais_allreduce(struct cais_comm *c, uint32_t tensor, const void *send, void *recv, size_t count,
	       enum cais_datatype dt, enum cais_redop op)
{
	struct cais_request *r;
	int rc = cais_iallreduce(c, tensor, send, recv, count, dt, op, &r);

	return rc ? rc : cais_wait(r);
}

int
cais_metrics_get(struct cais_comm *c, struct cais_metrics *m)
{
	if (!c || !m)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	*m = c->m;
	if (cmn_hist_total(c->hist)) {
		m->p50_us = (double)cmn_hist_quantile(c->hist, 0.5) / 1000.0;
		m->p90_us = (double)cmn_hist_quantile(c->hist, 0.9) / 1000.0;
		m->p99_us = (double)cmn_hist_quantile(c->hist, 0.99) / 1000.0;
	}
	m->fallback_rate =
	    m->collectives ? (double)(m->collectives - m->in_network) / m->collectives : 0;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* ---- the progress thread ---- */

static void
take_submitted(struct cais_comm *c)
{
	struct ag_req_list batch = TAILQ_HEAD_INITIALIZER(batch);
	struct cais_request *r;
	uint64_t v;

	if (read(c->wake_fd, &v, sizeof(v)) < 0) {
		/* nothing pending (EAGAIN) */
	}
	pthread_mutex_lock(&c->lock);
	TAILQ_CONCAT(&batch, &c->submitted, link);
	pthread_mutex_unlock(&c->lock);
	while ((r = TAILQ_FIRST(&batch))) {
		TAILQ_REMOVE(&batch, r, link);
		issue(c, r);
	}
}

/* In-network requests whose chunks are all in; requests past their deadline. */
static void
check_requests(struct cais_comm *c)
{
	struct cais_request *r, *next;

	for (r = TAILQ_FIRST(&c->active); r; r = next) {
		next = TAILQ_NEXT(r, link);
		if ((r->state == AG_RQ_INNET || r->state == AG_RQ_FETCH) &&
		    r->n_resolved == r->nchunks) {
			if (r->state == AG_RQ_INNET)
				ag_window_release(c, r);
			ag_innet_done(c, r);
			continue;
		}
		if (r->state == AG_RQ_RING)
			ag_ring_progress(c, r);
		if (r->state != AG_RQ_DONE && (int64_t)(c->now - r->deadline) >= 0)
			ag_complete(c, r, -ETIMEDOUT);
	}
}

static uint64_t
next_deadline(const struct cais_comm *c)
{
	const struct cais_request *r;
	uint64_t t = ag_switch_next_timer(c), p = ag_peer_next_timer(c);

	if (p < t)
		t = p;
	TAILQ_FOREACH (r, &c->active, link)
		if (r->deadline < t)
			t = r->deadline;
	return t;
}

static void *
progress_main(void *arg)
{
	struct cais_comm *c = arg;
	struct pollfd *pfd = c->pfd;
	sigset_t all;

	/* signals belong to the application's threads */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!atomic_load(&c->stop)) {
		unsigned int n = 0;
		uint64_t t;
		struct timespec ts;

		c->now = ag_now_ns();
		take_submitted(c);
		ag_switch_rx(c);
		ag_peer_progress(c);
		check_requests(c);
		ag_switch_tx(c);
		ag_peer_progress(c);

		pfd[n++] = (struct pollfd){.fd = c->wake_fd, .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = c->udp, .events = POLLIN};
		n += ag_peer_pollfds(c, pfd + n, AG_MAX_POLL - n);
		t = next_deadline(c);
		c->now = ag_now_ns();
		if (t == UINT64_MAX) {
			ts.tv_sec = 1;
			ts.tv_nsec = 0;
		} else if ((int64_t)(t - c->now) <= 0) {
			ts.tv_sec = 0;
			ts.tv_nsec = 0;
		} else {
			uint64_t d = t - c->now;

			ts.tv_sec = (time_t)(d / 1000000000ull);
			ts.tv_nsec = (long)(d % 1000000000ull);
		}
		ppoll(pfd, n, &ts, NULL);
	}
	return NULL;
}

/* ---- create, destroy ---- */

static int
check_config(const struct cais_config *cfg)
{
	if (cfg->world == 0 || cfg->world > CAIS_MAX_WORLD || cfg->rank >= cfg->world ||
	    !cfg->peers || !cais_pool_size_ok(cfg->slots) || cfg->elems == 0 ||
	    cfg->elems > CAIS_MAX_ELEMS || !(cfg->scale > 0) || !isfinite(cfg->scale) ||
	    cfg->timeout_ms == 0 || cfg->retx_timeout_us == 0 || cfg->retries > 1000)
		return -EINVAL;
	for (unsigned int i = 0; i < cfg->world; i++)
		if (cfg->peers[i].sin_family != AF_INET || cfg->peers[i].sin_port == 0)
			return -EINVAL;
	return 0;
}

static void
comm_free(struct cais_comm *c)
{
	struct ag_tensor *t;
	struct ag_pending_join *pj;

	ag_peer_close(c);
	if (c->udp >= 0)
		close(c->udp);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	while ((t = LIST_FIRST(&c->tensors))) {
		LIST_REMOVE(t, link);
		free(t);
	}
	while ((pj = LIST_FIRST(&c->pending_joins))) {
		LIST_REMOVE(pj, link);
		free(pj->joined);
		free(pj);
	}
	for (unsigned int i = 0; i < AG_POOL_BUFS; i++)
		free(c->pool[i].p);
	free(c->managed);
	free(c->win);
	free(c->cache);
	free(c->cached);
	free(c->rxbuf);
	free(c->pfd);
	free(c->peers);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

int
cais_comm_create(const struct cais_config *cfg, struct cais_comm **out)
{
	struct cais_comm *c;
	int rc;

	if (!cfg || !out || check_config(cfg) != 0)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	c->udp = -1;
	c->listen_fd = -1;
	c->wake_fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	TAILQ_INIT(&c->submitted);
	TAILQ_INIT(&c->active);
	LIST_INIT(&c->tensors);
	LIST_INIT(&c->pending_joins);
	c->threshold = cfg->threshold;
	c->next_seq = cfg->first_seq;
	c->next_send = c->base = cfg->first_seq;
	c->q = cais_quant_best();
	cais_rng_seed(&c->rng, ((uint64_t)cfg->rank << 32) ^ (uint64_t)getpid() ^ ag_now_ns());
	c->sw = cfg->switch_addr;
	if (c->sw.sin_port == 0)
		c->sw.sin_port = htons(CAIS_UDP_PORT);
	c->peers = calloc(cfg->world, sizeof(*c->peers));
	c->win = calloc(cfg->slots, sizeof(*c->win));
	c->cached = calloc(2u * cfg->slots, sizeof(*c->cached));
	c->cache = malloc((size_t)2 * cfg->slots * cfg->elems * CAIS_ELEM_SIZE);
	c->rxbuf = malloc((size_t)AG_BATCH * AG_DGRAM);
	c->pfd = calloc(AG_MAX_POLL, sizeof(*c->pfd));
	c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!c->peers || !c->win || !c->cached || !c->cache || !c->rxbuf || !c->pfd ||
	    c->wake_fd < 0) {
		comm_free(c);
		return -ENOMEM;
	}
	memcpy(c->peers, cfg->peers, cfg->world * sizeof(*c->peers));
	c->cfg.peers = c->peers;
	rc = ag_switch_open(c);
	if (rc == 0)
		rc = ag_peer_open(c);
	if (rc == 0 && pthread_create(&c->thread, NULL, progress_main, c) != 0)
		rc = -ENOMEM;
	if (rc) {
		comm_free(c);
		return rc;
	}
	c->thread_started = true;
	*out = c;
	return 0;
}

int
cais_comm_destroy(struct cais_comm *c)
{
	struct cais_request *r;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	atomic_store(&c->stop, true);
	pthread_mutex_unlock(&c->lock);
	wake(c);
	if (c->thread_started)
		pthread_join(c->thread, NULL);
	/* the thread is gone: what it held is freed (the API says: not to be used) */
	TAILQ_CONCAT(&c->active, &c->submitted, link);
	while ((r = TAILQ_FIRST(&c->active))) {
		TAILQ_REMOVE(&c->active, r, link);
		ag_ring_free(r);
		free(r->stage);
		free(r->resolved);
		free(r);
	}
	comm_free(c);
	return 0;
}
