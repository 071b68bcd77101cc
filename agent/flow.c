/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A flow (flow.h): its thread's loop takes the commands, receives (window
 * events), puts its chunks in the window as it has room, sends, and sleeps
 * until a socket, a command or a timer. Reading order: commands, the
 * results of chunks, the window's events, the pump, the loop.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <cais/proto.h>

#include "clock.h"
#include "flow.h"

enum cmd_type { CMD_ADD, CMD_STOP, CMD_RESOLVE, CMD_DECODE, CMD_REDO, CMD_DROP };

struct cmd {
	STAILQ_ENTRY(cmd) link;
	enum cmd_type type;
	struct cais_request *r;
	uint32_t idx;
	uint32_t len;
	uint16_t count;
	uint8_t flags;
	uint8_t payload[]; /**< CMD_RESOLVE: the result */
};

/** A collective as this flow carries it. */
struct flow_req {
	TAILQ_ENTRY(flow_req) link;
	struct cais_request *r;
	uint32_t next_idx; /**< the next of this flow's chunks to put in the window */
	bool stopped;	   /**< off the switch path: nothing more is sent */
	bool bad_wire;	   /**< AG_FE_BAD_WIRE sent */
};

struct ag_flow {
	struct ag_flow_conf conf;
	struct ag_window *w;
	struct cais_rng rng;
	TAILQ_HEAD(, flow_req) reqs; /**< in seq order */
	uint64_t now;
	uint64_t congested;
	int wake_fd;
	bool wake_ready, rx_ready; /**< what the last poll found readable: wake_fd, the window's */
	atomic_bool quit;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock; /**< the inbox */
	STAILQ_HEAD(, cmd) inbox;
};

static void
post(struct ag_flow *f, enum ag_flow_event_type type, struct cais_request *r, uint8_t fb,
     uint32_t seq)
{
	struct ag_flow_event ev = {.type = (uint8_t)type, .fb = fb, .seq = seq, .r = r};

	f->conf.host.post(f->conf.host.ctx, &ev);
}

/* Count down one of r's counters; the flow that reaches 0 says so. */
static void
count_down(struct ag_flow *f, atomic_uint *left, enum ag_flow_event_type ev,
	   struct cais_request *r)
{
	if (atomic_fetch_sub_explicit(left, 1, memory_order_acq_rel) == 1)
		post(f, ev, r, 0, 0);
}

static struct flow_req *
find(struct ag_flow *f, const struct cais_request *r)
{
	struct flow_req *fr;

	TAILQ_FOREACH (fr, &f->reqs, link)
		if (fr->r == r)
			return fr;
	return NULL;
}

static inline uint8_t *
stage_of(const struct ag_flow *f, const struct cais_request *r, uint32_t idx)
{
	return r->stage + (size_t)idx * f->conf.stride;
}

/* The first of this flow's chunk indices of r at or after idx. */
static inline uint32_t
own_from(const struct ag_flow *f, const struct cais_request *r, uint32_t idx)
{
	unsigned int k = f->conf.nflows;

	return idx + ((f->conf.idx - (r->seq0 + idx)) & (k - 1));
}

/* ---- the results of chunks ---- */

/* Decode chunk idx of r (count elements, in wire dtype) into recv. */
static void
decode_chunk(struct ag_flow *f, const struct cais_request *r, uint32_t idx, const uint8_t *p,
	     uint16_t count, uint8_t wire)
{
	size_t esz = cais_datatype_size(r->dt);
	uint8_t *out = (uint8_t *)r->recv + (size_t)idx * f->conf.elems * esz;
	float scale = atomic_load_explicit(&r->scale, memory_order_relaxed);
	float inv = 1.0f / scale;
	unsigned int avg_n = 1;

	if (r->op == CAIS_OP_AVG) {
		if (r->dt == CAIS_INT32)
			avg_n = f->conf.world;
		else
			inv = (float)(1.0 / ((double)scale * f->conf.world));
	}
	if (wire == CAIS_DT_BLOCK16)
		f->conf.q->decode_b16(out, p, count, r->dt, inv);
	else
		f->conf.q->decode(out, p, count, r->dt, inv, avg_n);
}

/*
 * Chunk idx of r has its result (from the switch or a peer): into recv or
 * staging, into the cache, the flags told; the last chunk says DONE.
 */
static void
resolved(struct ag_flow *f, struct cais_request *r, uint32_t idx, const uint8_t *payload,
	 uint32_t len, uint16_t count, uint8_t flags)
{
	uint32_t seq = r->seq0 + idx;
	uint8_t wire = atomic_load_explicit(&r->wire, memory_order_acquire);
	struct ag_result res = {
	    .payload = payload, .len = len, .count = count, .dtype = wire, .flags = flags};

	if (atomic_load_explicit(&r->resolved[idx], memory_order_relaxed))
		return;
	if (r->direct)
		decode_chunk(f, r, idx, payload, count, wire);
	else
		memcpy(stage_of(f, r, idx), payload, len);
	ag_cache_put(f->conf.cache, seq, &res);
	atomic_store_explicit(&r->resolved[idx], 1, memory_order_release);
	ag_window_resolved(f->w, seq);
	if (flags & CAIS_F_CONGESTED)
		__atomic_fetch_add(&f->congested, 1, __ATOMIC_RELAXED);
	if (flags & CAIS_F_OVERFLOW)
		post(f, AG_FE_RING, r, CAIS_FB_OVERFLOW, 0);
	else if (flags & CAIS_F_FWD_ONLY)
		post(f, AG_FE_RING, r, CAIS_FB_FWD_ONLY, 0);
	if (atomic_fetch_add_explicit(&r->n_resolved, 1, memory_order_acq_rel) + 1 == r->nchunks)
		post(f, AG_FE_DONE, r, 0, 0);
}

/* ---- the window's events ---- */

static void
on_result(void *ctx, void *owner, uint32_t idx, const uint8_t *payload, uint16_t count,
	  uint32_t len, uint8_t flags)
{
	resolved(ctx, owner, idx, payload, len, count, flags);
}

static void
on_reject(void *ctx, void *owner, uint32_t seq, uint16_t reason, uint8_t dtype)
{
	struct ag_flow *f = ctx;
	struct cais_request *r = owner;
	struct flow_req *fr;

	(void)seq;
	if (reason == CAIS_R_BAD_DTYPE && dtype == CAIS_DT_BLOCK16) {
		/* the progress thread moves r to FIXED32 (or the ring) once; the
		 * REJECTs of BLOCK16 DATA sent before say nothing new */
		fr = find(f, r);
		if (fr && !fr->bad_wire &&
		    atomic_load_explicit(&r->wire, memory_order_acquire) == CAIS_DT_BLOCK16) {
			fr->bad_wire = true;
			post(f, AG_FE_BAD_WIRE, r, 0, 0);
		}
		return;
	}
	post(f, AG_FE_RING, r, reason == CAIS_R_FWD_ONLY ? CAIS_FB_FWD_ONLY : CAIS_FB_REJECT, 0);
}

static void
on_silent(void *ctx, void *owner, uint32_t seq)
{
	post(ctx, AG_FE_SILENT, owner, 0, seq);
}

/* ---- the pump ---- */

/* Encode chunk idx of r into its staging bytes. @return the wire, or -1 when a value saturated */
static int
encode_chunk(struct ag_flow *f, struct cais_request *r, uint32_t idx)
{
	size_t esz = cais_datatype_size(r->dt);
	const uint8_t *src = (const uint8_t *)r->send + (size_t)idx * f->conf.elems * esz;
	uint16_t n = ag_chunk_count(r, f->conf.elems, idx);
	uint8_t wire = atomic_load_explicit(&r->wire, memory_order_acquire);
	float scale = atomic_load_explicit(&r->scale, memory_order_relaxed);
	const struct cais_quant_ops *q = f->conf.q;
	size_t sat;

	if (r->dt == CAIS_INT32)
		sat = q->encode(stage_of(f, r, idx), src, n, r->dt, 1.0f, true, &f->rng);
	else if (wire == CAIS_DT_BLOCK16)
		sat = q->encode_b16(stage_of(f, r, idx), src, n, r->dt, scale,
				    f->conf.round_nearest, &f->rng);
	else
		sat = q->encode(stage_of(f, r, idx), src, n, r->dt, scale, f->conf.round_nearest,
				&f->rng);
	return sat ? -1 : wire;
}

/* Put up to a batch of fr's chunks in the window. @return how many */
static unsigned int
push(struct ag_flow *f, struct flow_req *fr)
{
	struct cais_request *r = fr->r;
	unsigned int n = 0;
	uint32_t idx;

	for (idx = own_from(f, r, fr->next_idx); n < AG_BATCH && idx < r->nchunks;
	     idx += f->conf.nflows) {
		uint32_t seq = r->seq0 + idx;
		int wire;

		if (!ag_window_room(f->w, seq))
			break;
		fr->next_idx = idx + 1;
		if (atomic_load_explicit(&r->resolved[idx], memory_order_acquire))
			continue;
		wire = encode_chunk(f, r, idx);
		if (wire < 0) {
			/* a value beyond the scale's range: the switch cannot sum it right;
			 * the ring pulls every rank in (none can finish without this chunk) */
			fr->stopped = true;
			post(f, AG_FE_RING, r, CAIS_FB_OVERFLOW, 0);
			return n + 1;
		}
		ag_window_send(f->w, seq, r->tensor, (uint8_t)wire, ag_chunk_count(r, f->conf.elems, idx),
			       stage_of(f, r, idx), r, idx, &r->retx);
		n++;
	}
	if (idx >= r->nchunks)
		fr->next_idx = r->nchunks;
	return n;
}

/* The first collective with chunks of this flow to send (they are in seq order). */
static struct flow_req *
sending(const struct ag_flow *f)
{
	struct flow_req *fr;

	TAILQ_FOREACH (fr, &f->reqs, link)
		if (!fr->stopped && fr->next_idx < fr->r->nchunks)
			return fr;
	return NULL;
}

static void
pump(struct ag_flow *f)
{
	struct flow_req *fr;

	/* a batch at a time: the window's events may stop collectives */
	while ((fr = sending(f))) {
		unsigned int n = push(f, fr);

		if (n)
			ag_window_tx(f->w, f->now);
		else if (!fr->stopped && fr->next_idx < fr->r->nchunks)
			break; /* the window is full */
	}
	ag_window_tx(f->w, f->now);
}

/* ---- commands ---- */

static void
cmd_post(struct ag_flow *f, struct cmd *c)
{
	uint64_t one = 1;

	pthread_mutex_lock(&f->lock);
	STAILQ_INSERT_TAIL(&f->inbox, c, link);
	pthread_mutex_unlock(&f->lock);
	if (write(f->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is already non-zero: the flow wakes anyway */
	}
}

static void
cmd_simple(struct ag_flow *f, enum cmd_type type, struct cais_request *r)
{
	struct cmd *c = calloc(1, sizeof(*c));

	/* a command lost to memory exhaustion would hang its collective: such a
	 * process is done for anyway */
	if (!c)
		abort();
	c->type = type;
	c->r = r;
	cmd_post(f, c);
}

void
ag_flow_add(struct ag_flow *f, struct cais_request *r)
{
	cmd_simple(f, CMD_ADD, r);
}

void
ag_flow_stop_req(struct ag_flow *f, struct cais_request *r)
{
	cmd_simple(f, CMD_STOP, r);
}

void
ag_flow_decode(struct ag_flow *f, struct cais_request *r)
{
	cmd_simple(f, CMD_DECODE, r);
}

void
ag_flow_redo(struct ag_flow *f, struct cais_request *r)
{
	cmd_simple(f, CMD_REDO, r);
}

void
ag_flow_drop(struct ag_flow *f, struct cais_request *r)
{
	cmd_simple(f, CMD_DROP, r);
}

void
ag_flow_resolve(struct ag_flow *f, struct cais_request *r, uint32_t idx, const uint8_t *payload,
		uint32_t len, uint16_t count, uint8_t flags)
{
	struct cmd *c = calloc(1, sizeof(*c) + len);

	if (!c)
		abort();
	c->type = CMD_RESOLVE;
	c->r = r;
	c->idx = idx;
	c->len = len;
	c->count = count;
	c->flags = flags;
	memcpy(c->payload, payload, len);
	cmd_post(f, c);
}

/* Encode this flow's chunks of fr in the window again, in r's wire type now, and send them. */
static void
redo(struct ag_flow *f, struct flow_req *fr)
{
	struct cais_request *r = fr->r;

	for (uint32_t idx = own_from(f, r, 0); idx < fr->next_idx; idx += f->conf.nflows) {
		int wire;

		if (ag_window_state(f->w, r->seq0 + idx) == AG_W_FREE)
			continue;
		wire = encode_chunk(f, r, idx);
		if (wire < 0) {
			ag_window_forget(f->w, r);
			fr->stopped = true;
			post(f, AG_FE_RING, r, CAIS_FB_OVERFLOW, 0);
			return;
		}
		ag_window_redo(f->w, r->seq0 + idx, (uint8_t)wire);
	}
}

static void
decode_own(struct ag_flow *f, struct cais_request *r)
{
	uint8_t wire = atomic_load_explicit(&r->wire, memory_order_acquire);

	for (uint32_t idx = own_from(f, r, 0); idx < r->nchunks; idx += f->conf.nflows)
		decode_chunk(f, r, idx, stage_of(f, r, idx), ag_chunk_count(r, f->conf.elems, idx),
			     wire);
}

static void
run_cmd(struct ag_flow *f, struct cmd *c)
{
	struct flow_req *fr = c->type == CMD_ADD ? NULL : find(f, c->r);

	switch (c->type) {
	case CMD_ADD:
		fr = calloc(1, sizeof(*fr));
		if (!fr)
			abort();
		fr->r = c->r;
		TAILQ_INSERT_TAIL(&f->reqs, fr, link);
		break;
	case CMD_STOP:
		if (fr) {
			ag_window_forget(f->w, c->r);
			fr->stopped = true;
		}
		count_down(f, &c->r->stop_left, AG_FE_STOPPED, c->r);
		break;
	case CMD_RESOLVE:
		resolved(f, c->r, c->idx, c->payload, c->len, c->count, c->flags);
		break;
	case CMD_DECODE:
		decode_own(f, c->r);
		count_down(f, &c->r->decode_left, AG_FE_DECODED, c->r);
		break;
	case CMD_REDO:
		if (fr && !fr->stopped)
			redo(f, fr);
		break;
	case CMD_DROP:
		if (fr) {
			ag_window_forget(f->w, c->r);
			TAILQ_REMOVE(&f->reqs, fr, link);
			free(fr);
		}
		count_down(f, &c->r->held, AG_FE_RELEASED, c->r);
		break;
	}
}

static void
take_commands(struct ag_flow *f)
{
	STAILQ_HEAD(, cmd) batch = STAILQ_HEAD_INITIALIZER(batch);
	struct cmd *c;
	uint64_t v;

	/* only what the last poll found; the inbox is taken either way */
	if (f->wake_ready && read(f->wake_fd, &v, sizeof(v)) < 0) {
		/* nothing pending (EAGAIN) */
	}
	f->wake_ready = false;
	pthread_mutex_lock(&f->lock);
	STAILQ_CONCAT(&batch, &f->inbox);
	pthread_mutex_unlock(&f->lock);
	while ((c = STAILQ_FIRST(&batch))) {
		STAILQ_REMOVE_HEAD(&batch, link);
		run_cmd(f, c);
		free(c);
	}
}

/* ---- the loop ---- */

static void
wait_for_work(struct ag_flow *f)
{
	struct pollfd pfd[2] = {
	    {.fd = f->wake_fd, .events = POLLIN},
	    {.fd = ag_window_fd(f->w), .events = POLLIN},
	};
	uint64_t now = ag_now_ns(), t = ag_window_next_timer(f->w, now);
	const struct flow_req *fr = sending(f);
	struct timespec ts = {.tv_sec = 1};

	if (ag_window_blocked(f->w))
		pfd[1].events |= POLLOUT;
	/* more to send and room in the window: no sleeping */
	if (fr && ag_window_room(f->w, fr->r->seq0 + own_from(f, fr->r, fr->next_idx)))
		t = now;
	if (t != UINT64_MAX) {
		uint64_t d = (int64_t)(t - now) > 0 ? t - now : 0;

		ts.tv_sec = (time_t)(d / 1000000000ull);
		ts.tv_nsec = (long)(d % 1000000000ull);
	}
	if (ppoll(pfd, 2, &ts, NULL) < 0) /* EINTR: look at both */
		pfd[0].revents = pfd[1].revents = POLLIN;
	f->wake_ready = pfd[0].revents != 0;
	f->rx_ready = (pfd[1].revents & ~POLLOUT) != 0;
}

static void *
flow_main(void *arg)
{
	struct ag_flow *f = arg;
	sigset_t all;

	/* signals belong to the application's threads */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!atomic_load(&f->quit)) {
		take_commands(f);
		f->now = ag_now_ns();
		if (f->rx_ready) /* a receive that finds nothing is a system call for nothing */
			ag_window_rx(f->w, f->now);
		f->rx_ready = false;
		f->now = ag_now_ns();
		pump(f);
		wait_for_work(f);
	}
	return NULL;
}

int
ag_flow_start(struct ag_flow **out, const struct ag_flow_conf *conf)
{
	struct ag_flow *f = calloc(1, sizeof(*f));
	struct ag_window_events ev = {
	    .result = on_result, .reject = on_reject, .silent = on_silent};
	int rc;

	if (!f)
		return -ENOMEM;
	f->conf = *conf;
	ev.ctx = f;
	TAILQ_INIT(&f->reqs);
	STAILQ_INIT(&f->inbox);
	pthread_mutex_init(&f->lock, NULL);
	cais_rng_seed(&f->rng, conf->seed);
	f->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	f->wake_ready = f->rx_ready = true;
	if (f->wake_fd < 0) {
		ag_flow_stop(f);
		return -ENOMEM;
	}
	rc = ag_window_open(&f->w, &conf->w, &ev);
	if (rc == 0 && pthread_create(&f->thread, NULL, flow_main, f) != 0)
		rc = -ENOMEM;
	if (rc) {
		ag_flow_stop(f);
		return rc;
	}
	f->started = true;
	*out = f;
	return 0;
}

void
ag_flow_stop(struct ag_flow *f)
{
	struct flow_req *fr;
	struct cmd *c;
	uint64_t one = 1;

	if (!f)
		return;
	if (f->started) {
		atomic_store(&f->quit, true);
		if (write(f->wake_fd, &one, sizeof(one)) < 0) {
			/* the flow wakes within its timer anyway */
		}
		pthread_join(f->thread, NULL);
	}
	while ((fr = TAILQ_FIRST(&f->reqs))) {
		TAILQ_REMOVE(&f->reqs, fr, link);
		free(fr);
	}
	while ((c = STAILQ_FIRST(&f->inbox))) {
		STAILQ_REMOVE_HEAD(&f->inbox, link);
		free(c);
	}
	ag_window_close(f->w);
	if (f->wake_fd >= 0)
		close(f->wake_fd);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

enum ag_window_state
ag_flow_chunk_state(const struct ag_flow *f, uint32_t seq)
{
	return ag_window_state(f->w, seq);
}

uint32_t
ag_flow_next_seq(const struct ag_flow *f)
{
	return ag_window_next_seq(f->w);
}

void
ag_flow_stats(const struct ag_flow *f, struct ag_window_stats *st, uint64_t *congested)
{
	struct ag_window_stats w;

	ag_window_stats(f->w, &w);
	st->chunks_sent += w.chunks_sent;
	st->retransmissions += w.retransmissions;
	st->results_ignored += w.results_ignored;
	st->acks += w.acks;
	st->nacks += w.nacks;
	st->queries += w.queries;
	st->send_errors += w.send_errors;
	*congested += __atomic_load_n(&f->congested, __ATOMIC_RELAXED);
}
