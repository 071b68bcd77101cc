/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The communicator (comm.h): the API of cais.h, the submission of
 * collectives with the offload decision, completion as the callers see it
 * (metrics, the error alarm, the wake-up), and the progress thread's loop,
 * which hands the work to the modules: the window (switch traffic), the peer
 * channel, FETCH recovery and the requests.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>
#include <sys/eventfd.h>

#include "clock.h"
#include "comm.h"

void
cais_config_init(struct cais_config *c)
{
	memset(c, 0, sizeof(*c));
	c->world = 1;
	c->slots = 128;
	c->elems = 2048;
	c->scale = 1024.0;
	c->wire = CAIS_DT_FIXED32;
	c->b16_scale = CAIS_DEFAULT_B16_SCALE;
	c->threads = 0; /* managed: one flow per CPU; static: one (cais.h) */
	c->threshold = CAIS_DEFAULT_THRESHOLD;
	c->retx_timeout_us = CAIS_DEFAULT_RETX_US;
	c->retries = CAIS_DEFAULT_RETRIES;
	c->timeout_ms = CAIS_DEFAULT_TIMEOUT_MS;
	c->check_every = CAIS_DEFAULT_CHECK_EVERY;
	c->error_alarm = CAIS_DEFAULT_ERROR_ALARM;
}

/* ---- settings ---- */

static struct ag_tensor *
tensor_find(struct cais_comm *c, uint32_t id)
{
	struct ag_tensor *t;

	LIST_FOREACH (t, &c->tensors, link)
		if (t->id == id)
			return t;
	return NULL;
}

/* The tensor's entry, created with the defaults when new (under lock). */
static struct ag_tensor *
tensor_get(struct cais_comm *c, uint32_t id)
{
	struct ag_tensor *t = tensor_find(c, id);

	if (!t && (t = calloc(1, sizeof(*t)))) {
		t->id = id;
		t->wire = (uint8_t)c->cfg.wire;
		t->offload = true;
		LIST_INSERT_HEAD(&c->tensors, t, link);
	}
	return t;
}

/* The scale of a tensor's collectives on wire (t may be NULL; under lock). */
static double
tensor_scale(const struct cais_comm *c, const struct ag_tensor *t, uint8_t wire)
{
	if (t && t->has_scale)
		return t->scale;
	return wire == CAIS_DT_BLOCK16 ? c->cfg.b16_scale : c->cfg.scale;
}

int
cais_tensor_set(struct cais_comm *c, uint32_t tensor, double scale, bool offload)
{
	struct ag_tensor *t;

	if (!c || !(scale > 0) || !isfinite(scale))
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	t = tensor_get(c, tensor);
	if (t) {
		t->scale = scale;
		t->has_scale = true;
		t->offload = offload;
	}
	pthread_mutex_unlock(&c->lock);
	return t ? 0 : -ENOMEM;
}

void
ag_comm_offload_none(struct cais_comm *c)
{
	struct ag_tensor *t;

	pthread_mutex_lock(&c->lock);
	LIST_FOREACH (t, &c->tensors, link)
		t->offload = false;
	pthread_mutex_unlock(&c->lock);
}

void
ag_comm_step(struct cais_comm *c, uint64_t step)
{
	pthread_mutex_lock(&c->lock);
	c->step = step;
	pthread_mutex_unlock(&c->lock);
}

int
cais_tensor_wire(struct cais_comm *c, uint32_t tensor, enum cais_wire_dtype wire)
{
	struct ag_tensor *t;

	if (!c || (wire != CAIS_DT_FIXED32 && wire != CAIS_DT_BLOCK16))
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	t = tensor_get(c, tensor);
	if (t)
		t->wire = (uint8_t)wire;
	pthread_mutex_unlock(&c->lock);
	return t ? 0 : -ENOMEM;
}

/*
 * The requests' report that the switch refused tensor as BLOCK16: FIXED32
 * from now on, at the FIXED32 scale the same max |x| would get (the
 * manager's rules: 2^55 x 2^-24 / 2^ceil(log2 n) of BLOCK16's headroom), or
 * the configured default for a tensor without a scale of its own. The same
 * on every rank.
 */
static float
wire_refused(void *ctx, uint32_t tensor)
{
	struct cais_comm *c = ctx;
	struct ag_tensor *t;
	double scale;

	pthread_mutex_lock(&c->lock);
	t = tensor_get(c, tensor);
	if (t && t->wire == CAIS_DT_BLOCK16) {
		unsigned int shift = 24;

		while ((1u << (shift - 24)) < c->cfg.world)
			shift++;
		t->wire = CAIS_DT_FIXED32;
		if (t->has_scale)
			t->scale = ldexp(t->scale, -(int)shift);
		c->m.wire_fallbacks++;
	}
	scale = tensor_scale(c, t, CAIS_DT_FIXED32);
	pthread_mutex_unlock(&c->lock);
	return (float)scale;
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

/* ---- submission ---- */

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

/*
 * The offload decision: the same inputs on every rank, so the same answer
 * (under lock). A managed float tensor takes the ring in the manager step of
 * its first collective and the next: the manager has its max |x| from every
 * rank only from the step after (the first rank to begin that one brings
 * its own report only, and no scale goes up before each rank's is in:
 * docs/PROTOCOL.md E3), and before that its scale is the default, blind to
 * what the tensor holds. int32 goes through the switch exactly; a path of
 * CAIS_PATH_SWITCH asks for the switch whatever the scale.
 */
static enum cais_fallback
offload_decision(const struct cais_comm *c, const struct ag_tensor *t, enum cais_datatype dt,
		 size_t bytes)
{
	if (c->path == CAIS_PATH_RING)
		return CAIS_FB_FORCED;
	if (c->path == CAIS_PATH_AUTO && bytes < c->threshold)
		return CAIS_FB_THRESHOLD;
	if (t && !t->offload)
		return CAIS_FB_TENSOR_OFF;
	if (c->path == CAIS_PATH_AUTO && c->managed && dt != CAIS_INT32 &&
	    (!t || c->step < t->first_step + 2))
		return CAIS_FB_TENSOR_OFF;
	if (c->path == CAIS_PATH_AUTO && t && t->disabled)
		return CAIS_FB_ERROR_ALARM;
	return CAIS_FB_NONE;
}

int
cais_iallreduce(struct cais_comm *c, uint32_t tensor, const void *send, void *recv, size_t count,
		enum cais_datatype dt, enum cais_redop op, struct cais_request **out)
{
	size_t esz = cais_datatype_size(dt), bytes;
	struct cais_request *r;
	struct ag_tensor *t;
	uint64_t nchunks;

	if (!c || !send || !recv || !out || count == 0 || esz == 0 ||
	    (unsigned int)op >= CAIS_OP_COUNT)
		return -EINVAL;
	bytes = count * esz;
	if (bytes / esz != count || overlap_bad(send, recv, bytes))
		return -EINVAL;
	nchunks = (count + c->cfg.elems - 1) / c->cfg.elems;
	if (nchunks > (1u << 30))
		return -EINVAL;
	if (c->managed)
		ag_managed_note(c->managed, tensor, ag_maxabs(c->q, send, count, dt));
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
	r->t_issue = ag_now_ns();
	r->deadline = r->t_issue + (uint64_t)c->cfg.timeout_ms * 1000000ull;

	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->stop)) {
		pthread_mutex_unlock(&c->lock);
		free(r);
		return -ECANCELED;
	}
	t = c->managed ? tensor_get(c, tensor) : tensor_find(c, tensor);
	if (t && c->managed && !t->used) {
		t->used = true;
		t->first_step = c->step;
	}
	r->wire = dt == CAIS_INT32 ? CAIS_DT_FIXED32 : t ? t->wire : (uint8_t)c->cfg.wire;
	r->scale = (float)tensor_scale(c, t, r->wire);
	r->fb = offload_decision(c, t, dt, bytes);
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

/* ---- completion ---- */

/* The error alarm: a sampled error above it moves the tensor off the switch (under lock). */
static void
error_alarm(struct cais_comm *c, const struct cais_request *r)
{
	struct ag_tensor *t;

	c->m.error_checks++;
	if (r->rel_error > c->m.max_rel_error)
		c->m.max_rel_error = r->rel_error;
	if (r->rel_error <= c->cfg.error_alarm)
		return;
	t = tensor_get(c, r->tensor);
	if (t && !t->disabled) {
		t->disabled = true;
		c->m.tensors_disabled++;
	}
}

/* The requests' completion callback: account, then hand the request over. */
static void
completed(void *ctx, struct cais_request *r)
{
	struct cais_comm *c = ctx;

	pthread_mutex_lock(&c->lock);
	if (r->error) {
		c->m.errors++;
	} else {
		c->m.collectives++;
		if (r->st.path == CAIS_PATH_SWITCH)
			c->m.in_network++;
		else
			c->m.fallback[r->st.fallback]++;
		c->hist[cmn_hist_bucket((uint64_t)(r->st.time_us * 1000.0))]++;
	}
	if (r->rel_error >= 0)
		error_alarm(c, r);
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
	struct ag_window_stats ws = {0};
	uint64_t congested = 0;

	if (!c || !m)
		return -EINVAL;
	for (unsigned int i = 0; i < c->nflows; i++)
		ag_flow_stats(c->flows[i], &ws, &congested);
	pthread_mutex_lock(&c->lock);
	*m = c->m;
	if (cmn_hist_total(c->hist)) {
		m->p50_us = (double)cmn_hist_quantile(c->hist, 0.5) / 1000.0;
		m->p90_us = (double)cmn_hist_quantile(c->hist, 0.9) / 1000.0;
		m->p99_us = (double)cmn_hist_quantile(c->hist, 0.99) / 1000.0;
	}
	pthread_mutex_unlock(&c->lock);
	m->chunks_sent = ws.chunks_sent;
	m->retransmissions = ws.retransmissions;
	m->results_ignored = ws.results_ignored;
	m->acks = ws.acks;
	m->nacks = ws.nacks;
	m->queries = ws.queries;
	m->send_errors = ws.send_errors;
	m->peer_chunks = ag_req_peer_chunks(&c->reqs);
	m->congested = congested;
	m->peer_chunks_served = ag_fetch_served(c->fetch);
	m->fallback_rate =
	    m->collectives ? (double)(m->collectives - m->in_network) / m->collectives : 0;
	return 0;
}

/* ---- the progress thread ---- */

static void
take_submitted(struct cais_comm *c)
{
	struct ag_req_list batch = TAILQ_HEAD_INITIALIZER(batch);
	struct cais_request *r;
	uint64_t v;

	/* only what the last poll found (a read of nothing is a system call for nothing);
	 * the queue is taken either way: a submission's write may follow the poll */
	if (c->wake_ready && read(c->wake_fd, &v, sizeof(v)) < 0) {
		/* nothing pending (EAGAIN) */
	}
	c->wake_ready = false;
	pthread_mutex_lock(&c->lock);
	TAILQ_CONCAT(&batch, &c->submitted, link);
	pthread_mutex_unlock(&c->lock);
	while ((r = TAILQ_FIRST(&batch))) {
		TAILQ_REMOVE(&batch, r, link);
		ag_req_issue(&c->reqs, r);
	}
}

static uint64_t
earliest(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Wait for a peer socket, a submission, a flow's event or the next timer. */
static void
wait_for_work(struct cais_comm *c)
{
	struct pollfd *pfd = c->pfd;
	unsigned int n = 0;
	uint64_t now = ag_now_ns(), t;
	struct timespec ts = {.tv_sec = 1};

	t = earliest(ag_req_next_timer(&c->reqs),
		     earliest(ag_peers_next_timer(c->net), ag_fetch_next_timer(c->fetch)));
	if (t != UINT64_MAX) {
		uint64_t d = (int64_t)(t - now) > 0 ? t - now : 0;

		ts.tv_sec = (time_t)(d / 1000000000ull);
		ts.tv_nsec = (long)(d % 1000000000ull);
	}
	pfd[n++] = (struct pollfd){.fd = c->wake_fd, .events = POLLIN};
	n += ag_peers_pollfds(c->net, pfd + n, AG_MAX_POLL - n);
	if (ppoll(pfd, n, &ts, NULL) < 0) { /* EINTR: look at everything */
		for (unsigned int i = 0; i < n; i++)
			pfd[i].revents = POLLIN;
	}
	c->wake_ready = pfd[0].revents != 0;
	ag_peers_polled(c->net, pfd + 1, n - 1);
}

static void *
progress_main(void *arg)
{
	struct cais_comm *c = arg;
	sigset_t all;

	/* signals belong to the application's threads */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!atomic_load(&c->stop)) {
		take_submitted(c);
		ag_peers_progress(c->net, ag_now_ns());
		ag_req_progress(&c->reqs, ag_now_ns());
		ag_fetch_tick(c->fetch, ag_now_ns());
		ag_peers_progress(c->net, ag_now_ns());
		wait_for_work(c);
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
	    (cfg->wire != CAIS_DT_FIXED32 && cfg->wire != CAIS_DT_BLOCK16) ||
	    !(cfg->b16_scale > 0) || !isfinite(cfg->b16_scale) ||
	    cfg->threads > AG_MAX_FLOWS || (cfg->threads & (cfg->threads - 1)) ||
	    cfg->threads > cfg->slots ||
	    cfg->timeout_ms == 0 || cfg->retx_timeout_us == 0 || cfg->retries > 1000)
		return -EINVAL;
	for (unsigned int i = 0; i < cfg->world; i++)
		if (cfg->peers[i].sin_family != AF_INET || cfg->peers[i].sin_port == 0)
			return -EINVAL;
	if (cfg->nstripes > 1) { /* a stripe per flow at least (cais.h) */
		if (!cfg->stripes || (cfg->nstripes & (cfg->nstripes - 1)) ||
		    cfg->nstripes > (cfg->threads ? cfg->threads : 1))
			return -EINVAL;
		for (unsigned int j = 0; j < cfg->nstripes; j++)
			if (cfg->stripes[j].sin_family != AF_INET)
				return -EINVAL;
	}
	return 0;
}

static void
comm_free(struct cais_comm *c)
{
	struct ag_tensor *t;

	/* the flows first: they hold requests */
	for (unsigned int i = 0; i < c->nflows; i++)
		ag_flow_stop(c->flows[i]);
	ag_req_discard(&c->reqs);
	ag_rings_close(c->rings);
	ag_fetch_close(c->fetch);
	ag_peers_close(c->net);
	ag_cache_close(c->cache);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	while ((t = LIST_FIRST(&c->tensors))) {
		LIST_REMOVE(t, link);
		free(t);
	}
	ag_pool_free(&c->pool);
	ag_managed_free(c->managed);
	free(c->pfd);
	free(c->peers);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

/* Wake the progress thread: a flow posted an event. */
static void
wake_progress(void *ctx)
{
	wake(ctx);
}

/* The flows: one per thread, each on the rank's port + its index. */
static int
flows_open(struct cais_comm *c)
{
	const struct cais_config *cfg = &c->cfg;
	struct ag_flow_conf fc = {
	    .nflows = c->nflows,
	    .w = {.tenant = cfg->tenant,
		  .session = cfg->session,
		  .rank = (uint8_t)cfg->rank,
		  .slots = cfg->slots,
		  .elems = cfg->elems,
		  .first_seq = cfg->first_seq,
		  .retx_timeout_us = cfg->retx_timeout_us,
		  .first_timeout_us = AG_FIRST_RTO_US,
		  .retries = cfg->retries,
		  .sw = cfg->switch_addr},
	    .world = cfg->world,
	    .elems = cfg->elems,
	    .stride = c->reqs.stride,
	    .round_nearest = cfg->round_nearest,
	    .q = c->q,
	    .cache = c->cache,
	};
	uint64_t seed = ((uint64_t)cfg->rank << 32) ^ (uint64_t)getpid() ^ ag_now_ns();
	int rc;

	ag_req_flow_host(&c->reqs, &fc.host);
	for (unsigned int i = 0; i < c->nflows; i++) {
		fc.idx = i;
		fc.seed = seed + i;
		if (c->nstripes > 1) /* stripe i mod k: the seqs of this flow (cais.h) */
			fc.w.sw = c->stripes[i % c->nstripes];
		if (fc.w.sw.sin_port == 0)
			fc.w.sw.sin_port = htons(CAIS_UDP_PORT);
		fc.w.local = c->peers[cfg->rank];
		fc.w.local.sin_port = htons((uint16_t)(ntohs(fc.w.local.sin_port) + i));
		if ((rc = ag_flow_start(&c->flows[i], &fc)))
			return rc;
	}
	return 0;
}

/* The modules, bottom up; the requests hear from each. */
static int
modules_open(struct cais_comm *c)
{
	const struct cais_config *cfg = &c->cfg;
	uint32_t chunk = (uint32_t)cfg->elems * CAIS_ELEM_SIZE;
	struct ag_peer_handler ph;
	struct ag_fetch_source src;
	struct ag_reqs *q = &c->reqs;
	int rc;

	q->rank = cfg->rank;
	q->world = cfg->world;
	q->slots = cfg->slots;
	q->elems = cfg->elems;
	q->stride = cais_payload_bytes(CAIS_DT_FIXED32, cfg->elems);
	if (q->stride < cais_payload_bytes(CAIS_DT_BLOCK16, cfg->elems))
		q->stride = cais_payload_bytes(CAIS_DT_BLOCK16, cfg->elems);
	q->q = c->q;
	q->pool = &c->pool;
	q->flows = c->flows;
	q->nflows = c->nflows;
	q->completed = completed;
	q->wire_refused = wire_refused;
	q->wake = wake_progress;
	q->ctx = c;
	if ((rc = ag_req_init(q)))
		return rc;
	ag_req_peer_handler(q, &ph);
	ag_req_fetch_source(q, &src);
	if ((rc = ag_cache_open(&c->cache, cfg->slots, q->stride)) ||
	    (rc = ag_peers_open(&c->net, cfg->rank, cfg->world, c->peers,
				chunk > AG_RING_PIECE ? chunk : AG_RING_PIECE, &ph)))
		return rc;
	q->cache = c->cache;
	q->peers = c->net;
	if ((rc = ag_fetch_open(&c->fetch,
				&(struct ag_fetch_conf){.rank = cfg->rank,
							.world = cfg->world,
							.slots = cfg->slots,
							.stride = q->stride,
							.peers = c->net,
							.cache = c->cache,
							.flows = c->flows,
							.nflows = c->nflows},
				&src)) ||
	    (rc = ag_rings_open(&c->rings, &(struct ag_rings_conf){.rank = cfg->rank,
								   .world = cfg->world,
								   .peers = c->net,
								   .pool = &c->pool,
								   .q = c->q})))
		return rc;
	q->f = c->fetch;
	q->rings = c->rings;
	return flows_open(c);
}

unsigned int
ag_comm_auto_flows(uint32_t slots, unsigned int lcores)
{
	cpu_set_t set;
	unsigned int cpus = 1, k = 1;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		cpus = (unsigned int)CPU_COUNT(&set);
	while (2 * k <= cpus && 2 * k <= AG_MAX_FLOWS && 2 * k <= slots)
		k *= 2;
	if (lcores > k && (lcores & (lcores - 1)) == 0 && lcores <= AG_MAX_FLOWS && lcores <= slots)
		k = lcores;
	return k;
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
	c->wake_fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	TAILQ_INIT(&c->submitted);
	TAILQ_INIT(&c->reqs.active);
	LIST_INIT(&c->tensors);
	c->threshold = cfg->threshold;
	c->next_seq = cfg->first_seq;
	c->q = cais_quant_best();
	/* static: the switch's session lists the member's ports; without a count, one */
	c->nflows = cfg->threads ? cfg->threads : 1;
	c->cfg.threads = c->nflows;
	c->peers = calloc(cfg->world, sizeof(*c->peers));
	c->pfd = calloc(AG_MAX_POLL, sizeof(*c->pfd));
	c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	c->wake_ready = true;
	if (!c->peers || !c->pfd || c->wake_fd < 0) {
		comm_free(c);
		return -ENOMEM;
	}
	memcpy(c->peers, cfg->peers, cfg->world * sizeof(*c->peers));
	c->cfg.peers = c->peers;
	c->nstripes = cfg->nstripes > 1 ? cfg->nstripes : 1;
	if (cfg->nstripes > 1)
		memcpy(c->stripes, cfg->stripes, cfg->nstripes * sizeof(*c->stripes));
	c->cfg.stripes = cfg->nstripes > 1 ? c->stripes : NULL;
	c->cfg.nstripes = c->nstripes;
	rc = modules_open(c);
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
	while ((r = TAILQ_FIRST(&c->submitted))) {
		TAILQ_REMOVE(&c->submitted, r, link);
		free(r);
	}
	comm_free(c);
	return 0;
}
