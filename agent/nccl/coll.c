/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ncclCollNet: all-reduce through the switch, with libcais.
 *
 * listen() publishes this rank's data address (the plugin's device, the
 * rank's CAIS port) in the handle; NCCL hands every rank all the handles,
 * and connect() builds a libcais communicator from them:
 *  - static mode (CAIS_SWITCH): the switch's session lists its members by
 *    address, so a rank's libcais rank is the position of its address among
 *    all the handles' addresses in ascending order, whatever NCCL's ranks;
 *  - managed mode (CAIS_MANAGER): the ranks join cais-manager under a job
 *    named after collnet rank 0's handle, which every rank sees alike.
 * A one-element all-reduce on the switch-only path proves the switch serves
 * the session before NCCL relies on it; if it does not, connect() fails, says
 * why, and NCCL keeps its own algorithms.
 *
 * NCCL's proxy calls iallreduce() on host (staging) buffers and test()s the
 * requests in order; every iallreduce is one libcais collective, with
 * libcais's own offload threshold at 0 (NCCL cuts all-reduces into pieces;
 * the tuner applies CAIS_THRESHOLD to the whole all-reduce). Requests come
 * from a fixed pool per communicator: a full pool answers "would block".
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

#define NP_COLL_MAGIC 0xCA15C011u
/** Collectives in flight per communicator: NCCL keeps NCCL_STEPS (8) per group of channels. */
#define NP_COLL_REQS  128u

/** The CollNet listen handle; addresses in network order. */
struct np_coll_handle {
	uint32_t magic;
	uint32_t ip;
	uint16_t port;
	uint16_t pad;
	uint32_t seq_hint; /**< rank 0's is everyone's first seq (static mode) */
	uint64_t nonce;	   /**< rank 0's names the job (managed mode) */
};
_Static_assert(sizeof(struct np_coll_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle fits NCCL's");

/* NCCL does not close a listen comm whose connect failed: finalize does. */
struct np_coll_listen {
	struct np_coll_handle h;
	LIST_ENTRY(np_coll_listen) link;
};

struct np_coll_req {
	struct np_coll *c;
	bool used;
	struct cais_request *creq; /**< NULL: nothing to do (count 0) */
	size_t bytes;
};

struct np_coll {
	struct cais_comm *comm;
	unsigned int rank, world; /**< libcais's */
	unsigned int nccl_rank;
	uint64_t issued, in_network, ring, mrs;
	struct np_coll_req req[NP_COLL_REQS];
};

static pthread_mutex_t listens_lock = PTHREAD_MUTEX_INITIALIZER;
static LIST_HEAD(, np_coll_listen) listens = LIST_HEAD_INITIALIZER(listens);

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
	case ncclSum:
		*out = CAIS_OP_SUM;
		return true;
	case ncclAvg:
		*out = CAIS_OP_AVG;
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

/* The switch's tensor entry for an op (avg is aggregated as a sum). */
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

/* A port free for both UDP and TCP on addr (libcais binds both). */
static uint16_t
free_port(struct in_addr addr)
{
	for (int tries = 0; tries < 20; tries++) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = addr};
		socklen_t alen = sizeof(a);
		int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		uint16_t port = 0;

		if (t >= 0 && u >= 0 && bind(t, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		    getsockname(t, (struct sockaddr *)&a, &alen) == 0 &&
		    bind(u, (struct sockaddr *)&a, sizeof(a)) == 0)
			port = ntohs(a.sin_port);
		if (t >= 0)
			close(t);
		if (u >= 0)
			close(u);
		if (port)
			return port;
	}
	return 0;
}

static ncclResult_t
coll_listen(int d, void *handle, void **listen_comm)
{
	const struct np_dev *dev = np_device();
	const struct np_conf *cf = np_conf();
	struct np_coll_handle *h = handle;
	struct np_coll_listen *l;
	struct timespec ts;
	uint16_t port = cf->port;

	if (d != 0 || !np_coll_enabled())
		return ncclInternalError;
	if (port == 0 && (port = free_port(dev->addr)) == 0) {
		NP_WARN("CAIS: CollNet listen: no free port on %s", dev->name);
		return ncclSystemError;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return ncclSystemError;
	clock_gettime(CLOCK_REALTIME, &ts);
	memset(h, 0, sizeof(*h));
	h->magic = NP_COLL_MAGIC;
	h->ip = dev->addr.s_addr;
	h->port = htons(port);
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
	pthread_mutex_lock(&listens_lock);
	LIST_INSERT_HEAD(&listens, l, link);
	pthread_mutex_unlock(&listens_lock);
	*listen_comm = l;
	return ncclSuccess;
}

static ncclResult_t
coll_close_listen(void *listen_comm)
{
	struct np_coll_listen *l = listen_comm;

	if (!l)
		return ncclSuccess;
	pthread_mutex_lock(&listens_lock);
	LIST_REMOVE(l, link);
	pthread_mutex_unlock(&listens_lock);
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
}

/* Static mode: ranks by address. @return 0 or -errno */
static int
create_static(struct np_coll_handle **hs, int nranks, int rank, struct np_coll *c)
{
	struct sockaddr_in *peers = calloc((size_t)nranks, sizeof(*peers));
	struct cais_config cfg;
	int rc;

	if (!peers)
		return -ENOMEM;
	fill_config(&cfg);
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
	if ((rc = cais_tensor_register(c->comm, cf->tensor_sum, CAIS_OP_SUM)) != 0 ||
	    (rc = cais_tensor_register(c->comm, cf->tensor_max, CAIS_OP_MAX)) != 0 ||
	    (rc = cais_tensor_register(c->comm, cf->tensor_min, CAIS_OP_MIN)) != 0 ||
	    (rc = cais_step_begin(c->comm, 1)) != 0) {
		cais_comm_destroy(c->comm);
		c->comm = NULL;
	}
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

static ncclResult_t
coll_connect(void *handles[], int nranks, int rank, void *listen_comm, void **coll_comm)
{
	const struct np_conf *cf = np_conf();
	struct np_coll_handle **hs = (struct np_coll_handle **)handles;
	const char *where = cf->manager ? cf->manager : inet_ntoa(cf->sw.sin_addr);
	struct np_coll *c;
	const char *stage = "handles";
	int rc = 0;

	(void)listen_comm;
	*coll_comm = NULL;
	if (nranks < 1 || nranks > 255 || rank < 0 || rank >= nranks) {
		rc = -EINVAL;
	} else {
		for (int i = 0; i < nranks; i++)
			if (!hs[i] || hs[i]->magic != NP_COLL_MAGIC)
				rc = -EPROTO;
	}
	c = rc ? NULL : calloc(1, sizeof(*c));
	if (!rc && !c)
		rc = -ENOMEM;
	if (!rc) {
		c->world = (unsigned int)nranks;
		c->nccl_rank = (unsigned int)rank;
		for (unsigned int i = 0; i < NP_COLL_REQS; i++)
			c->req[i].c = c;
		stage = cf->manager ? "joining through the manager" : "creating the communicator";
		rc = cf->manager ? create_managed(hs, nranks, rank, c)
				 : create_static(hs, nranks, rank, c);
	}
	if (!rc) {
		stage = "the switch did not aggregate a probe";
		rc = probe(c);
	}
	if (rc) {
		NP_WARN("CAIS: CollNet unavailable on rank %d of %d (%s %s): %s: %s; NCCL falls "
			"back to its own algorithms",
			rank, nranks, cf->manager ? "manager" : "switch", where, stage,
			cais_strerror(rc));
		if (c && c->comm)
			cais_comm_destroy(c->comm);
		free(c);
		return ncclInvalidUsage;
	}
	NP_INFO(NCCL_INIT | NCCL_NET,
		"CAIS: CollNet rank %d of %d is CAIS rank %u (%s %s, %u slots x %u elements, "
		"scale %g)",
		rank, nranks, c->rank, cf->manager ? "manager" : "switch", where, cf->slots,
		cf->elems, cf->scale);
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
			"the ring; %llu retransmissions; p50 %.0f us, p99 %.0f us",
			c->nccl_rank, (unsigned long long)c->issued,
			(unsigned long long)c->in_network, (unsigned long long)c->ring,
			(unsigned long long)m.retransmissions, m.p50_us, m.p99_us);
	/* requests NCCL never tested end with the communicator */
	cais_comm_destroy(c->comm);
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

static ncclResult_t
coll_init_v11(void **ctx, uint64_t comm_id, ncclDebugLogger_t log)
{
	static int context;

	(void)comm_id;
	*ctx = &context;
	return coll_init_v6(log);
}

/* Free the listen comms NCCL left behind (those of failed connects). */
static ncclResult_t
coll_finalize_v11(void *ctx)
{
	struct np_coll_listen *l;

	(void)ctx;
	pthread_mutex_lock(&listens_lock);
	while ((l = LIST_FIRST(&listens)) != NULL) {
		LIST_REMOVE(l, link);
		free(l);
	}
	pthread_mutex_unlock(&listens_lock);
	return ncclSuccess;
}

static ncclResult_t
coll_listen_v11(void *ctx, int d, void *handle, void **listen_comm)
{
	(void)ctx;
	return coll_listen(d, handle, listen_comm);
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
		.listen = coll_listen,                                                             \
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
