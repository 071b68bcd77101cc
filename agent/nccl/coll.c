/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ncclCollNet: all-reduce through the switch, with libcais.
 *
 * listen() takes this rank's data port (port.c) and opens its agreement
 * listener (agree.c), and publishes both in the handle; NCCL hands every
 * rank all the handles, and connect() builds a libcais communicator from
 * them:
 *  - static mode (CAIS_SWITCH): the switch's session lists its members by
 *    address, so a rank's libcais rank is the position of its address among
 *    all the handles' addresses in ascending order, whatever NCCL's ranks.
 *    The k-th CollNet communicator open at once in a process (k from 0)
 *    uses port CAIS_PORT + k and session CAIS_SESSION + k;
 *  - managed mode (CAIS_MANAGER): the ranks join cais-manager under a job
 *    named after collnet rank 0's handle, which every rank sees alike, from
 *    a port of their own, and begin a manager step every CAIS_STEP_EVERY
 *    collectives (next_step()): the manager's scales follow what the
 *    tensors hold, and a float tensor takes libcais's ring in its first two
 *    steps, before the manager has its magnitude from every rank.
 * A one-element all-reduce on the switch-only path proves the switch serves
 * the session before NCCL relies on it. Then the ranks agree (agree.c): if
 * any rank failed, connect() fails on every rank, says why, and NCCL keeps
 * its own algorithms for the communicator.
 *
 * NCCL's proxy calls iallreduce() on host (staging) buffers and test()s the
 * requests in order; every iallreduce is one libcais collective, with
 * libcais's own offload threshold at 0 (NCCL cuts all-reduces into pieces;
 * the tuner applies CAIS_THRESHOLD to the whole all-reduce). Requests come
 * from a fixed pool per communicator: a full pool answers "would block".
 *
 * State lives in the comms and in the v11 context of the NCCL communicator
 * that made them (the listen comms NCCL may leave behind); the tables of
 * v6..v10, which have no contexts, share one that lives as long as the
 * process.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cais/cais.h>

#include "plugin.h"

/** Collectives in flight per communicator: NCCL keeps NCCL_STEPS (8) per group of channels. */
#define NP_COLL_REQS 128u

_Static_assert(sizeof(struct np_coll_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle fits NCCL's");

struct np_coll_ctx;

/* From listen() to closeListen(), or to the context's finalize when NCCL
 * forgets it (it does not close the listen comm of a failed connect). */
struct np_coll_listen {
	struct np_coll_ctx *ctx;
	LIST_ENTRY(np_coll_listen) link;
	struct np_coll_handle h;
	struct np_port port;   /**< held until connect() hands it to libcais */
	struct np_agree agree; /**< open until connect() returns */
};

/** What a CollNet context owns: the listen comms made through it. */
struct np_coll_ctx {
	uint64_t comm_id;
	pthread_mutex_t lock;
	LIST_HEAD(, np_coll_listen) listens;
};

struct np_coll_req {
	struct np_coll *c;
	bool used;
	struct cais_request *creq; /**< NULL: nothing to do (count 0) */
	size_t bytes;
};

struct np_coll {
	struct cais_comm *comm;
	struct np_port port;	  /**< the data port, given back at close */
	unsigned int rank, world; /**< libcais's */
	unsigned int nccl_rank;
	uint64_t issued, in_network, ring, mrs;
	uint64_t steps; /**< manager steps begun (managed mode; 0: static) */
	bool step_warned;
	struct np_coll_req req[NP_COLL_REQS];
};

/* The context of the tables without contexts (v6..v10). */
static struct np_coll_ctx legacy_ctx = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .listens = LIST_HEAD_INITIALIZER(legacy_ctx.listens),
};

/* ---- mapping NCCL's types ---- */

static bool
map_dtype(ncclDataType_t t, enum cais_datatype *out)
{
	switch (t) {
	case ncclFloat32:
		*out = CAIS_FLOAT32;
		return true;
	case ncclFloat16:
		*out = CAIS_FLOAT16;
		return true;
	case ncclBfloat16:
		*out = CAIS_BFLOAT16;
		return true;
	case ncclInt32:
		*out = CAIS_INT32;
		return true;
	default:
		return false;
	}
}

static bool
map_op(ncclRedOp_t op, enum cais_redop *out)
{
	switch (op) {
	case ncclSum: /* also NCCL's avg: the network sees a sum, the GPU divides */
		*out = CAIS_OP_SUM;
		return true;
	case ncclMax:
		*out = CAIS_OP_MAX;
		return true;
	case ncclMin:
		*out = CAIS_OP_MIN;
		return true;
	default:
		return false;
	}
}

/* The switch's tensor entry for an op. */
static uint32_t
tensor_of(enum cais_redop op)
{
	const struct np_conf *cf = np_conf();

	return op == CAIS_OP_MAX   ? cf->tensor_max
	       : op == CAIS_OP_MIN ? cf->tensor_min
				   : cf->tensor_sum;
}

static ncclResult_t
coll_reduce_support(ncclDataType_t dt, ncclRedOp_t op, int *supported)
{
	enum cais_datatype d;
	enum cais_redop o;

	*supported = map_dtype(dt, &d) && map_op(op, &o);
	return ncclSuccess;
}

/* ---- devices, listen ---- */

static ncclResult_t
coll_devices(int *ndev)
{
	*ndev = np_coll_enabled() ? 1 : 0;
	if (!*ndev)
		NP_INFO(NCCL_INIT | NCCL_NET,
			"CAIS: CollNet has no device: set CAIS_SWITCH or CAIS_MANAGER");
	return ncclSuccess;
}

static ncclResult_t
coll_props_v11(int d, ncclNetProperties_v11_t *p)
{
	if (d != 0 || !np_coll_enabled())
		return ncclInvalidArgument;
	np_props(p, true);
	return ncclSuccess;
}

/* Give back what a listen comm holds; the struct stays. */
static void
listen_release(struct np_coll_listen *l)
{
	np_port_give_back(&l->port);
	np_agree_close(&l->agree);
}

static ncclResult_t
coll_listen(struct np_coll_ctx *ctx, int d, void *handle, void **listen_comm)
{
	const struct np_dev *dev = np_device();
	const struct np_conf *cf = np_conf();
	struct np_coll_handle *h = handle;
	struct np_coll_listen *l;
	struct timespec ts;
	int rc;

	*listen_comm = NULL;
	if (d != 0 || !np_coll_enabled())
		return ncclInternalError;
	l = calloc(1, sizeof(*l));
	if (!l)
		return ncclSystemError;
	l->ctx = ctx;
	l->agree.fd = -1;
	rc = np_port_take(dev->addr, cf->port, cf->threads, &l->port);
	if (rc) {
		if (cf->port)
			NP_WARN(
			    "CAIS: CollNet listen: ports %u..%u of %s are all taken (%s): at most "
			    "%u CollNet communicators of %u port(s) at once per host",
			    cf->port, cf->port + NP_MAX_COLL_COMMS * cf->threads - 1, dev->name,
			    cais_strerror(rc), NP_MAX_COLL_COMMS, cf->threads);
		else
			NP_WARN("CAIS: CollNet listen: no %u free consecutive port(s) on %s: %s",
				cf->threads, dev->name, cais_strerror(rc));
		free(l);
		return ncclSystemError;
	}
	rc = np_agree_open(&l->agree, dev->addr);
	if (rc) {
		NP_WARN("CAIS: CollNet listen: agreement listener on %s: %s", dev->name,
			cais_strerror(rc));
		listen_release(l);
		free(l);
		return ncclSystemError;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	memset(h, 0, sizeof(*h));
	h->magic = NP_COLL_MAGIC;
	h->ip = dev->addr.s_addr;
	h->port = htons(l->port.port);
	h->agree_port = l->agree.port;
	h->slot = cf->port ? (uint16_t)((l->port.port - cf->port) / cf->threads) : 0;
	/* A switch keeps the seqs of its slots: a job that reuses a session of a
	 * running switch must start past them, or its chunks count as stale.
	 * Time does that without a shared counter, as long as earlier jobs used
	 * fewer than NP_SEQ_PER_SEC chunks per second (2 GB/s of fp32 at 2048
	 * elements per packet) and the switch saw the session within the last
	 * 2^31 / NP_SEQ_PER_SEC s (2.3 h); else set CAIS_FIRST_SEQ. */
	h->seq_hint = cf->have_first_seq
			  ? cf->first_seq
			  : (uint32_t)((uint64_t)ts.tv_sec * NP_SEQ_PER_SEC +
				       (uint64_t)ts.tv_nsec / (1000000000 / NP_SEQ_PER_SEC));
	if (getrandom(&h->nonce, sizeof(h->nonce), 0) != sizeof(h->nonce))
		h->nonce = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)getpid() ^ (uintptr_t)l;
	l->h = *h;
	pthread_mutex_lock(&ctx->lock);
	LIST_INSERT_HEAD(&ctx->listens, l, link);
	pthread_mutex_unlock(&ctx->lock);
	*listen_comm = l;
	return ncclSuccess;
}

static ncclResult_t
coll_close_listen(void *listen_comm)
{
	struct np_coll_listen *l = listen_comm;

	if (!l)
		return ncclSuccess;
	pthread_mutex_lock(&l->ctx->lock);
	LIST_REMOVE(l, link);
	pthread_mutex_unlock(&l->ctx->lock);
	listen_release(l);
	free(l);
	return ncclSuccess;
}

/* ---- connect ---- */

static int
addr_cmp(const struct np_coll_handle *a, const struct np_coll_handle *b)
{
	uint32_t ia = ntohl(a->ip), ib = ntohl(b->ip);
	uint16_t pa = ntohs(a->port), pb = ntohs(b->port);

	return ia != ib ? (ia < ib ? -1 : 1) : pa != pb ? (pa < pb ? -1 : 1) : 0;
}

static void
fill_config(struct cais_config *cfg)
{
	const struct np_conf *cf = np_conf();

	cais_config_init(cfg);
	cfg->tenant = cf->tenant;
	cfg->session = cf->session;
	cfg->switch_addr = cf->sw;
	cfg->slots = cf->slots;
	cfg->elems = cf->elems;
	cfg->scale = cf->scale;
	cfg->threshold = 0;
	cfg->retx_timeout_us = cf->retx_us;
	cfg->retries = cf->retries;
	cfg->timeout_ms = cf->timeout_ms;
	cfg->check_every = cf->check_every;
	cfg->threads = cf->threads;
}

/* Static mode: ranks by address, session by slot. @return 0 or -errno */
static int
create_static(struct np_coll_handle **hs, int nranks, int rank, struct np_coll *c)
{
	struct sockaddr_in *peers = calloc((size_t)nranks, sizeof(*peers));
	struct cais_config cfg;
	int rc;

	if (!peers)
		return -ENOMEM;
	fill_config(&cfg);
	cfg.session = (uint16_t)(np_conf()->session + hs[0]->slot);
	for (int i = 0; i < nranks; i++) {
		unsigned int pos = 0;

		for (int k = 0; k < nranks; k++)
			pos += addr_cmp(hs[k], hs[i]) < 0;
		for (int k = 0; k < i; k++)
			if (addr_cmp(hs[k], hs[i]) == 0) {
				free(peers);
				return -EADDRINUSE; /* two ranks, one address */
			}
		peers[pos].sin_family = AF_INET;
		peers[pos].sin_addr.s_addr = hs[i]->ip;
		peers[pos].sin_port = hs[i]->port;
		if (i == rank)
			cfg.rank = pos;
	}
	cfg.world = (unsigned int)nranks;
	cfg.peers = peers;
	cfg.first_seq = hs[0]->seq_hint;
	c->rank = cfg.rank;
	rc = cais_comm_create(&cfg, &c->comm);
	free(peers);
	return rc;
}

/* Managed mode: join the job named after rank 0's nonce. @return 0 or -errno */
static int
create_managed(struct np_coll_handle **hs, int nranks, int rank, struct np_coll *c)
{
	const struct np_conf *cf = np_conf();
	struct cais_config tmpl;
	struct cais_join j = {0};
	char job[32];
	int rc;

	fill_config(&tmpl);
	snprintf(job, sizeof(job), "nccl-%016llx", (unsigned long long)hs[0]->nonce);
	j.manager = cf->manager;
	j.key_file = cf->key_file;
	j.job = job;
	j.tenant = cf->tenant_name;
	j.rank = (unsigned int)rank;
	j.world = (unsigned int)nranks;
	j.data.sin_family = AF_INET;
	j.data.sin_addr.s_addr = hs[rank]->ip;
	j.data.sin_port = hs[rank]->port;
	j.slots = cf->slots;
	j.elems = cf->elems;
	j.timeout_ms = cf->timeout_ms;
	rc = cais_comm_join(&j, &tmpl, &c->comm);
	if (rc)
		return rc;
	c->rank = (unsigned int)rank;
	/* every rank registers the same tensors; the step's list sets their scales */
	if ((rc = cais_tensor_register(c->comm, cf->tensor_sum, CAIS_OP_SUM, CAIS_FLOAT32)) != 0 ||
	    (rc = cais_tensor_register(c->comm, cf->tensor_max, CAIS_OP_MAX, CAIS_FLOAT32)) != 0 ||
	    (rc = cais_tensor_register(c->comm, cf->tensor_min, CAIS_OP_MIN, CAIS_FLOAT32)) != 0 ||
	    (rc = cais_step_begin(c->comm, 1)) != 0) {
		cais_comm_destroy(c->comm);
		c->comm = NULL;
	}
	c->steps = rc == 0;
	return rc;
}

/* One element through the switch only: does the switch serve this session? */
static int
probe(struct np_coll *c)
{
	int32_t one = 1, sum = 0;
	int rc;

	cais_set_path(c->comm, CAIS_PATH_SWITCH);
	rc = cais_allreduce(c->comm, np_conf()->tensor_sum, &one, &sum, 1, CAIS_INT32, CAIS_OP_SUM);
	if (rc == 0 && sum != (int32_t)c->world)
		rc = -EPROTO;
	cais_set_path(c->comm, CAIS_PATH_AUTO);
	return rc;
}

/* What every rank can check alike from the handles. @return 0 or -errno, why in *why */
static int
check_handles(struct np_coll_handle **hs, int nranks, int rank, char *why, size_t len)
{
	if (nranks < 1 || nranks > 255 || rank < 0 || rank >= nranks) {
		snprintf(why, len, "rank %d of %d is out of range", rank, nranks);
		return -EINVAL;
	}
	for (int i = 0; i < nranks; i++) {
		if (!hs[i] || hs[i]->magic != NP_COLL_MAGIC) {
			snprintf(why, len, "collnet rank %d's handle is not this plugin's", i);
			return -EPROTO;
		}
		/* static mode: the k-th communicator of every host is session + k */
		if (!np_conf()->manager && hs[i]->slot != hs[0]->slot) {
			snprintf(
			    why, len,
			    "collnet rank %d is its host's CollNet communicator %u, rank 0's is "
			    "%u: static mode needs the same on every host (the communicators "
			    "opened in the same order; else CAIS_MANAGER)",
			    i, hs[i]->slot, hs[0]->slot);
			return -EXDEV;
		}
	}
	if (!np_conf()->manager && np_conf()->session + hs[0]->slot > 65535) {
		snprintf(why, len, "session %u + %u is past 65535", np_conf()->session,
			 hs[0]->slot);
		return -ERANGE;
	}
	return 0;
}

/* This rank's part: the communicator and the probe. @return 0 or -errno, why in *why */
static int
connect_local(struct np_coll_listen *l, struct np_coll_handle **hs, int nranks, int rank,
	      struct np_coll *c, char *why, size_t len)
{
	const struct np_conf *cf = np_conf();
	int rc = check_handles(hs, nranks, rank, why, len);

	if (rc)
		return rc;
	c->world = (unsigned int)nranks;
	c->nccl_rank = (unsigned int)rank;
	for (unsigned int i = 0; i < NP_COLL_REQS; i++)
		c->req[i].c = c;
	/* the port goes to the communicator, and is given back with it */
	np_port_hand_over(&l->port);
	c->port = l->port;
	l->port.port = 0;
	rc = cf->manager ? create_managed(hs, nranks, rank, c) : create_static(hs, nranks, rank, c);
	if (rc) {
		snprintf(why, len, "%s: %s",
			 cf->manager ? "joining through the manager" : "creating the communicator",
			 cais_strerror(rc));
		return rc;
	}
	rc = probe(c);
	if (rc) {
		snprintf(why, len, "the switch did not aggregate a probe: %s", cais_strerror(rc));
		return rc;
	}
	if (cf->test_fail_probe) {
		/* as a switch that does not serve this host would */
		snprintf(why, len, "the probe counts as failed (CAIS_NCCL_TEST_FAIL=probe)");
		return -ECONNREFUSED;
	}
	return 0;
}

/* How long rank 0 waits for the slowest rank's outcome beyond its own. */
static uint32_t
agree_wait_ms(void)
{
	const struct np_conf *cf = np_conf();

	/* the probe is bounded by libcais's timeout; joining the manager too */
	return (cf->manager ? 2 : 1) * cf->timeout_ms + NP_AGREE_SLACK_MS;
}

static ncclResult_t
coll_connect(void *handles[], int nranks, int rank, void *listen_comm, void **coll_comm)
{
	const struct np_conf *cf = np_conf();
	struct np_coll_handle **hs = (struct np_coll_handle **)handles;
	struct np_coll_listen *l = listen_comm;
	struct sockaddr_in rank0 = {.sin_family = AF_INET};
	char where[INET_ADDRSTRLEN + 64];
	uint64_t t0 = np_now_ms(), t1;
	struct np_coll *c;
	char why[256] = "";
	unsigned int who = UINT32_MAX;
	int local, rc;

	*coll_comm = NULL;
	if (!l)
		return ncclInternalError;
	if (cf->manager) {
		snprintf(where, sizeof(where), "manager %s", cf->manager);
	} else {
		inet_ntop(AF_INET, &cf->sw.sin_addr, where, INET_ADDRSTRLEN);
		snprintf(where + strlen(where), sizeof(where) - strlen(where), " session %u/%u",
			 cf->tenant, cf->session + (hs[0] ? hs[0]->slot : 0));
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		listen_release(l); /* the others fail too: rank 0 never hears from this one */
		return ncclSystemError;
	}
	np_port_init(&c->port);
	local = connect_local(l, hs, nranks, rank, c, why, sizeof(why));
	t1 = np_now_ms();
	rc = local;
	/* every rank sees the same handles: where rank 0's is unusable, all fail here */
	if (rank >= 0 && rank < nranks && hs[0] && hs[0]->magic == NP_COLL_MAGIC) {
		rank0.sin_addr.s_addr = hs[0]->ip;
		rank0.sin_port = hs[0]->agree_port;
		rc = np_agree(&l->agree, &rank0, hs[0]->nonce, (unsigned int)rank,
			      (unsigned int)nranks, local, agree_wait_ms(), &who);
	}
	np_agree_close(&l->agree);
	if (rc) {
		if (!local && who == UINT32_MAX)
			snprintf(why, sizeof(why), "no verdict from collnet rank 0: %s",
				 rc == -ECANCELED ? "it decided without this rank"
						  : cais_strerror(rc));
		else if (!local)
			snprintf(why, sizeof(why), "collnet rank %u %s%s", who,
				 rc == -ETIMEDOUT ? "did not report in time" : "failed: ",
				 rc == -ETIMEDOUT ? "" : cais_strerror(rc));
		NP_WARN("CAIS: CollNet unavailable on rank %d of %d (%s%s): %s; every rank falls "
			"back to NCCL's own algorithms",
			rank, nranks, cf->manager ? "" : "switch ", where, why);
		if (c->comm)
			cais_comm_destroy(c->comm);
		np_port_give_back(&c->port);
		free(c);
		listen_release(l); /* NCCL forgets l: its context frees it */
		return ncclInvalidUsage;
	}
	NP_INFO(NCCL_INIT | NCCL_NET,
		"CAIS: CollNet rank %d of %d is CAIS rank %u (communicator %016llx; %s%s, port %u, "
		"%u slots x %u elements, scale %g); connect %llu ms, agreement %llu ms",
		rank, nranks, c->rank, (unsigned long long)l->ctx->comm_id,
		cf->manager ? "" : "switch ", where, c->port.port, cf->slots, cf->elems, cf->scale,
		(unsigned long long)(t1 - t0), (unsigned long long)(np_now_ms() - t1));
	*coll_comm = c;
	return ncclSuccess;
}

/* ---- memory, collectives ---- */

static ncclResult_t
coll_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle)
{
	struct np_coll *c = coll_comm;
	ncclResult_t rc = np_reg_host_mr("CollNet", data, size, type, mhandle);

	if (rc == ncclSuccess)
		c->mrs++;
	return rc;
}

static ncclResult_t
coll_reg_mr_dmabuf(void *coll_comm, void *data, size_t size, int type, uint64_t offset, int fd,
		   void **mhandle)
{
	(void)offset;
	(void)fd;
	return coll_reg_mr(coll_comm, data, size, type, mhandle);
}

static ncclResult_t
coll_dereg_mr(void *coll_comm, void *mhandle)
{
	struct np_coll *c = coll_comm;

	if (mhandle) {
		c->mrs--;
		free(mhandle);
	}
	return ncclSuccess;
}

/*
 * Managed mode: a manager step every CAIS_STEP_EVERY collectives (at the same
 * collective on every rank: NCCL issues the same ones in the same order),
 * which reports the max |x| of the last one's tensors and takes the scales
 * for the next. One request to the manager on NCCL's proxy thread, a
 * millisecond or a few. Without an answer libcais takes the ring for the step.
 */
static void
next_step(struct np_coll *c)
{
	uint64_t step = 1 + c->issued / np_conf()->step_every;
	int rc = cais_step_begin(c->comm, step);

	c->steps++;
	if (rc && !c->step_warned) {
		c->step_warned = true;
		NP_WARN("CAIS: CollNet manager step %llu: %s; the ring until a step's answer",
			(unsigned long long)step, cais_strerror(rc));
	}
}

static ncclResult_t
coll_iallreduce(void *coll_comm, void *send, void *recv, size_t count, ncclDataType_t dtype,
		ncclRedOp_t redop, void *send_mh, void *recv_mh, void **request)
{
	struct np_coll *c = coll_comm;
	struct np_coll_req *r = NULL;
	enum cais_datatype dt;
	enum cais_redop op;
	int rc;

	(void)send_mh;
	(void)recv_mh;
	*request = NULL;
	if (!map_dtype(dtype, &dt) || !map_op(redop, &op)) {
		NP_WARN("CAIS: CollNet iallreduce: type %d op %d not supported", dtype, redop);
		return ncclInvalidArgument;
	}
	for (unsigned int i = 0; i < NP_COLL_REQS && !r; i++)
		if (!c->req[i].used)
			r = &c->req[i];
	if (!r)
		return ncclSuccess; /* the pool is full: NCCL tries again */
	r->creq = NULL;
	r->bytes = count * cais_datatype_size(dt);
	if (c->steps && c->issued && c->issued % np_conf()->step_every == 0)
		next_step(c);
	if (count) {
		rc = cais_iallreduce(c->comm, tensor_of(op), send, recv, count, dt, op, &r->creq);
		if (rc) {
			NP_WARN("CAIS: CollNet iallreduce of %zu %s: %s", count,
				cais_datatype_name(dt), cais_strerror(rc));
			return ncclSystemError;
		}
	}
	r->used = true;
	c->issued++;
	*request = r;
	return ncclSuccess;
}

static ncclResult_t
coll_test(void *request, int *done, int *size)
{
	struct np_coll_req *r = request;
	struct cais_status st;
	int rc = 0;

	*done = 1;
	if (r->creq) {
		rc = cais_test_status(r->creq, done, &st);
		if (!*done)
			return ncclSuccess;
		r->creq = NULL;
		if (st.path == CAIS_PATH_SWITCH) {
			if (r->c->in_network++ == 0)
				NP_INFO(
				    NCCL_INIT | NCCL_NET,
				    "CAIS: first all-reduce through the switch: %zu B in %.0f us",
				    r->bytes, st.time_us);
		} else if (r->c->ring++ == 0) {
			NP_INFO(NCCL_INIT | NCCL_NET,
				"CAIS: an all-reduce took the ring fallback: %s",
				cais_fallback_name(st.fallback));
		}
	}
	r->used = false;
	if (rc) {
		NP_WARN("CAIS: CollNet all-reduce failed: %s", cais_strerror(rc));
		return ncclSystemError;
	}
	if (size)
		*size = (int)r->bytes;
	return ncclSuccess;
}

static ncclResult_t
coll_iflush(void *coll_comm, void *data, int size, void *mhandle, void **request)
{
	(void)coll_comm;
	(void)data;
	(void)size;
	(void)mhandle;
	*request = NULL; /* host memory: nothing to flush */
	return ncclSuccess;
}

static ncclResult_t
coll_close(void *coll_comm)
{
	struct np_coll *c = coll_comm;
	struct cais_metrics m;

	if (!c)
		return ncclSuccess;
	if (cais_metrics_get(c->comm, &m) == 0)
		NP_INFO(NCCL_INIT | NCCL_NET,
			"CAIS: CollNet rank %u closing: %llu all-reduces, %llu in-network, %llu on "
			"the ring; %llu retransmissions; p50 %.0f us, p99 %.0f us; %llu manager "
			"steps",
			c->nccl_rank, (unsigned long long)c->issued,
			(unsigned long long)c->in_network, (unsigned long long)c->ring,
			(unsigned long long)m.retransmissions, m.p50_us, m.p99_us,
			(unsigned long long)c->steps);
	/* requests NCCL never tested end with the communicator */
	cais_comm_destroy(c->comm);
	np_port_give_back(&c->port);
	free(c);
	return ncclSuccess;
}

/* ---- init, finalize, versions ---- */

static ncclResult_t
coll_init_v6(ncclDebugLogger_t log)
{
	np_setup(log);
	return ncclSuccess; /* no device is "0 devices", not an error */
}

/* v11: a context per NCCL communicator, holding its listen comms. */
static ncclResult_t
coll_init_v11(void **ctx, uint64_t comm_id, ncclDebugLogger_t log)
{
	struct np_coll_ctx *x = calloc(1, sizeof(*x));

	*ctx = NULL;
	if (!x)
		return ncclSystemError;
	coll_init_v6(log);
	x->comm_id = comm_id;
	pthread_mutex_init(&x->lock, NULL);
	LIST_INIT(&x->listens);
	*ctx = x;
	return ncclSuccess;
}

/* Free the listen comms NCCL left behind in this context (those of failed
 * connects); other communicators' contexts are not touched. */
static ncclResult_t
coll_finalize_v11(void *ctx)
{
	struct np_coll_ctx *x = ctx;
	struct np_coll_listen *l;

	if (!x)
		return ncclSuccess;
	pthread_mutex_lock(&x->lock);
	while ((l = LIST_FIRST(&x->listens)) != NULL) {
		LIST_REMOVE(l, link);
		listen_release(l);
		free(l);
	}
	pthread_mutex_unlock(&x->lock);
	pthread_mutex_destroy(&x->lock);
	free(x);
	return ncclSuccess;
}

static ncclResult_t
coll_listen_v11(void *ctx, int d, void *handle, void **listen_comm)
{
	if (!ctx)
		return ncclInternalError;
	return coll_listen(ctx, d, handle, listen_comm);
}

static ncclResult_t
coll_listen_v6(int d, void *handle, void **listen_comm)
{
	return coll_listen(&legacy_ctx, d, handle, listen_comm);
}

NP_PROPS_ADAPTER(coll_props, 9)
NP_PROPS_ADAPTER(coll_props, 8)
NP_PROPS_ADAPTER(coll_props, 7)
NP_PROPS_ADAPTER(coll_props, 6)

static ncclResult_t
coll_reg_mr_int(void *coll_comm, void *data, int size, int type, void **mhandle)
{
	return coll_reg_mr(coll_comm, data, (size_t)size, type, mhandle);
}

static ncclResult_t
coll_iallreduce_int(void *coll_comm, void *send, void *recv, int count, ncclDataType_t dtype,
		    ncclRedOp_t redop, void *send_mh, void *recv_mh, void **request)
{
	if (count < 0)
		return ncclInvalidArgument;
	return coll_iallreduce(coll_comm, send, recv, (size_t)count, dtype, redop, send_mh, recv_mh,
			       request);
}

/* clang-format off */ /* one table entry per line */
/* The entries every version's table shares; the tables below add the rest. */
#define COLL_TABLE_COMMON                                                                          \
	.name = NP_NAME,                                                                           \
	.devices = coll_devices,                                                                   \
	.connect = coll_connect,                                                                   \
	.reduceSupport = coll_reduce_support,                                                      \
	.regMrDmaBuf = coll_reg_mr_dmabuf,                                                         \
	.deregMr = coll_dereg_mr,                                                                  \
	.iflush = coll_iflush,                                                                     \
	.test = coll_test,                                                                         \
	.closeColl = coll_close,                                                                   \
	.closeListen = coll_close_listen

/* ... and those of v6 to v10, which differ only in the properties and the size types */
#define COLL_TABLE_OLD(props_fn, reg_mr_fn, allreduce_fn)                                          \
	{                                                                                          \
		COLL_TABLE_COMMON,                                                                 \
		.init = coll_init_v6,                                                              \
		.getProperties = props_fn,                                                         \
		.listen = coll_listen_v6,                                                          \
		.regMr = reg_mr_fn,                                                                \
		.iallreduce = allreduce_fn,                                                        \
	}

NP_EXPORT ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
    COLL_TABLE_COMMON,
    .init = coll_init_v11,
    .getProperties = coll_props_v11,
    .listen = coll_listen_v11,
    .regMr = coll_reg_mr,
    .iallreduce = coll_iallreduce,
    .iallgather = NULL, /* NCCL then keeps all-gather and reduce-scatter off CollNet */
    .ireducescatter = NULL,
    .makeVDevice = NULL,
    .finalize = coll_finalize_v11,
};

/* v10 and v9 share a layout */
NP_EXPORT ncclCollNet_v10_t ncclCollNetPlugin_v10 =
    COLL_TABLE_OLD(coll_props_v9, coll_reg_mr, coll_iallreduce);
NP_EXPORT ncclCollNet_v9_t ncclCollNetPlugin_v9 =
    COLL_TABLE_OLD(coll_props_v9, coll_reg_mr, coll_iallreduce);
NP_EXPORT ncclCollNet_v8_t ncclCollNetPlugin_v8 =
    COLL_TABLE_OLD(coll_props_v8, coll_reg_mr, coll_iallreduce_int);
NP_EXPORT ncclCollNet_v7_t ncclCollNetPlugin_v7 =
    COLL_TABLE_OLD(coll_props_v7, coll_reg_mr_int, coll_iallreduce_int);
NP_EXPORT ncclCollNet_v6_t ncclCollNetPlugin_v6 =
    COLL_TABLE_OLD(coll_props_v6, coll_reg_mr_int, coll_iallreduce_int);
/* clang-format on */
