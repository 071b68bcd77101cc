/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-nccl-harness: drives libnccl-net-cais.so as NCCL's proxy threads do
 * on the host path, one process per rank (one "node" each), no GPU:
 *   init, devices, getProperties, reduceSupport for every type and op;
 *   ncclNet: listen, handles out of band, and before anyone connects a
 *     silent TCP connection to the next rank's listener (no hello) and one
 *     accept() that must return NULL at once; then connect/accept called
 *     again and again until both exist, counting the calls that returned
 *     NULL and timing the longest (NCCL's contract: neither may block);
 *     regMr, isend/irecv around a ring (several sizes, all in flight), test
 *     until done, deregMr, close;
 *   ncclCollNet, --comms K communicators at once (K contexts, listened in
 *     order, then a thread each, as NCCL's proxy threads): listen, handles
 *     out of band (NCCL's collnet ranks are the process ranks rotated by
 *     one, so the plugin's own order is exercised), connect, closeListen,
 *     regMr of one host region, then for every type and op the plugin
 *     claims: all-reduces cut into pieces of at most --piece elements with
 *     up to 8 in flight (NCCL_STEPS), test in order, every element checked;
 *     avg refused (NCCL sends avg as a sum); deregMr, closeColl, finalize;
 *   with --finalize-race: a communicator listens, a second one is created
 *     and finalized (NCCL's path for a failed init) while the first is still
 *     connecting; the first must connect, reduce and close on memory that is
 *     still its own (run it under MALLOC_PERTURB_ and MALLOC_CHECK_).
 * With --expect-fail, connect must fail on this rank within the bound (also
 * when this rank's own part succeeded: the ranks agree) and NCCL's clean-up
 * path (finalize, no closeListen) must work.
 *
 *   cais-nccl-harness --plugin SO --rank R --world N --dir DIR [--expect-fail]
 *                     [--comms K] [--finalize-race] [--piece ELEMS] [--timeout S]
 * DIR is shared by the ranks (the out-of-band channel: one file per handle).
 * Exit 0 when every check passed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "../../agent/nccl/nccl_abi.h"
#include "../../agent/nccl/wire.h"

#define MAX_INFLIGHT 8 /* NCCL_STEPS */

static int rank, world;
static const char *dir;
static double t_limit = 60;
static int failures; /* all-reduces with wrong elements, every thread's (atomic) */

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
       ...)
{
	va_list ap;

	(void)flags;
	fprintf(stderr, "[rank %d] NCCL %s %s:%d ", rank, level == NCCL_LOG_WARN ? "WARN" : "INFO",
		file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "[rank %d] FAIL %s:%d: ", rank, __FILE__, __LINE__);       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* ---- the out-of-band channel: files in dir ---- */

static void
oob_put(const char *what, int r, const void *data, size_t len)
{
	char tmp[512], path[512];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, what, r);
	snprintf(path, sizeof(path), "%s/%s.%d", dir, what, r);
	f = fopen(tmp, "wb");
	CHECK(f && fwrite(data, 1, len, f) == len && fclose(f) == 0, "writing %s", tmp);
	CHECK(rename(tmp, path) == 0, "rename %s: %s", path, strerror(errno));
}

static void
oob_get(const char *what, int r, void *data, size_t len)
{
	char path[512];
	double t0 = now_s();
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.%d", dir, what, r);
	while (!(f = fopen(path, "rb"))) {
		CHECK(now_s() - t0 < t_limit, "rank %d's %s never came", r, what);
		usleep(10000);
	}
	CHECK(fread(data, 1, len, f) == len, "reading %s", path);
	fclose(f);
}

static void
barrier(const char *name)
{
	char b = 1;

	oob_put(name, rank, &b, 1);
	for (int r = 0; r < world; r++)
		oob_get(name, r, &b, 1);
}

/* ---- ncclNet ---- */

static uint8_t
pattern(int src, int msg, size_t off)
{
	return (uint8_t)(src * 31 + msg * 7 + off * 13 + (off >> 8));
}

/* A TCP connection to a listen handle's address that never says hello: a
 * stray, a port scanner, a peer that died. @return the socket */
static int
silent_connection(const char *handle)
{
	const struct np_net_handle *h = (const struct np_net_handle *)handle;
	struct sockaddr_in a = {
	    .sin_family = AF_INET, .sin_addr.s_addr = h->ip, .sin_port = h->port};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(h->magic == NP_NET_MAGIC, "not a CAIS net handle");
	CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0,
	      "silent connection: %s", strerror(errno));
	return fd;
}

static void
test_net(ncclNet_v11_t *net, void *ctx)
{
	static const size_t sizes[] = {0, 1, 4099, (1u << 20) + 13, 65536};
	enum { NMSG = sizeof(sizes) / sizeof(sizes[0]) };
	char handle[NCCL_NET_HANDLE_MAXSIZE] = {0}, peer[NCCL_NET_HANDLE_MAXSIZE];
	void *lcomm = NULL, *scomm = NULL, *rcomm = NULL, *sreq[NMSG] = {0}, *rreq[NMSG] = {0};
	uint8_t *sbuf[NMSG], *rbuf[NMSG];
	void *smh[NMSG], *rmh[NMSG];
	ncclNetDeviceHandle_t *dh = NULL;
	int prev = (rank + world - 1) % world, next = (rank + 1) % world, left = 2 * NMSG;
	int silent, connect_nulls = 0, accept_nulls = 0;
	double t0, t, longest = 0;

	CHECK(net->listen(ctx, 0, handle, &lcomm) == ncclSuccess && lcomm, "net listen");
	oob_put("net", rank, handle, sizeof(handle));
	oob_get("net", next, peer, sizeof(peer));
	silent = silent_connection(peer);
	barrier("net-silent");
	/* only the silent connection is there: accept must not wait for its hello */
	t = now_s();
	CHECK(net->accept(lcomm, &rcomm, &dh) == ncclSuccess, "net accept");
	t = now_s() - t;
	CHECK(!rcomm, "accept returned a comm for a connection that sent no hello");
	CHECK(t < 1.0, "accept blocked %.3f s on a connection without a hello", t);
	accept_nulls++;
	longest = t;
	barrier("net-polled");
	t0 = now_s();
	while (!scomm || !rcomm) {
		if (!scomm) {
			t = now_s();
			CHECK(net->connect(ctx, 0, peer, &scomm, &dh) == ncclSuccess,
			      "net connect");
			t = now_s() - t;
			connect_nulls += !scomm;
			longest = t > longest ? t : longest;
		}
		if (!rcomm) {
			t = now_s();
			CHECK(net->accept(lcomm, &rcomm, &dh) == ncclSuccess, "net accept");
			t = now_s() - t;
			accept_nulls += !rcomm;
			longest = t > longest ? t : longest;
		}
		CHECK(now_s() - t0 < t_limit, "net connect/accept did not finish");
	}
	CHECK(connect_nulls >= 1, "connect completed on its first call: it waited for the peer");
	CHECK(longest < 1.0, "a connect or accept call took %.3f s: it blocked", longest);
	printf("rank %d: ncclNet: connect returned NULL %d times and accept %d times (one "
	       "connection silent) before both completed in %.1f ms; longest call %.3f ms\n",
	       rank, connect_nulls, accept_nulls, (now_s() - t0) * 1e3, longest * 1e3);
	close(silent);
	for (int m = 0; m < NMSG; m++) {
		sbuf[m] = malloc(sizes[m] + 1);
		rbuf[m] = calloc(1, sizes[m] + 64); /* a receive may be larger than the send */
		for (size_t i = 0; i < sizes[m]; i++)
			sbuf[m][i] = pattern(rank, m, i);
		CHECK(net->regMr(scomm, sbuf[m], sizes[m] + 1, NCCL_PTR_HOST, &smh[m]) ==
			  ncclSuccess,
		      "net regMr");
		CHECK(net->regMr(rcomm, rbuf[m], sizes[m] + 64, NCCL_PTR_HOST, &rmh[m]) ==
			  ncclSuccess,
		      "net regMr");
	}
	/* everything in flight at once, then test in order (the proxy's way) */
	for (int m = 0; m < NMSG; m++) {
		size_t rsize = sizes[m] + 64;
		int tag = 0;
		void *data = rbuf[m];

		while (!sreq[m]) {
			CHECK(net->isend(scomm, sbuf[m], sizes[m], 0, smh[m], NULL, &sreq[m]) ==
				  ncclSuccess,
			      "isend");
			CHECK(now_s() - t0 < t_limit, "isend never accepted");
		}
		while (!rreq[m]) {
			CHECK(net->irecv(rcomm, 1, &data, &rsize, &tag, &rmh[m], NULL, &rreq[m]) ==
				  ncclSuccess,
			      "irecv");
			CHECK(now_s() - t0 < t_limit, "irecv never accepted");
		}
	}
	while (left > 0) {
		for (int m = 0; m < NMSG; m++) {
			int done, size;

			if (sreq[m]) {
				CHECK(net->test(sreq[m], &done, &size) == ncclSuccess, "test send");
				if (done) {
					sreq[m] = NULL;
					left--;
				}
			}
			if (rreq[m]) {
				CHECK(net->test(rreq[m], &done, &size) == ncclSuccess, "test recv");
				if (done) {
					CHECK((size_t)size == sizes[m],
					      "message %d: %d bytes, not %zu", m, size, sizes[m]);
					for (size_t i = 0; i < sizes[m]; i++)
						CHECK(rbuf[m][i] == pattern(prev, m, i),
						      "message %d byte %zu wrong", m, i);
					rreq[m] = NULL;
					left--;
				}
			}
		}
		CHECK(now_s() - t0 < t_limit, "net messages did not complete (%d left)", left);
	}
	for (int m = 0; m < NMSG; m++) {
		CHECK(net->deregMr(scomm, smh[m]) == ncclSuccess, "deregMr");
		CHECK(net->deregMr(rcomm, rmh[m]) == ncclSuccess, "deregMr");
		free(sbuf[m]);
		free(rbuf[m]);
	}
	CHECK(net->closeSend(scomm) == ncclSuccess && net->closeRecv(rcomm) == ncclSuccess &&
		  net->closeListen(lcomm) == ncclSuccess,
	      "net close");
	printf("rank %d: ncclNet: %d messages (0 B .. 1 MiB) to rank %d and from rank %d, all "
	       "right, %.3f s\n",
	       rank, NMSG, next, prev, now_s() - t0);
	barrier("net-done"); /* the peer's silent connection is gone before the next test */
}

/* ---- ncclCollNet ---- */

static const char *dt_name[] = {"int8",	   "uint8",   "int32",	 "uint32",   "int64",	"uint64",
				"float16", "float32", "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
static const char *op_name[] = {"sum", "prod", "max", "min", "avg"};

static size_t
dt_size(int dt)
{
	return dt == ncclInt32 || dt == ncclFloat32 ? 4 : 2;
}

static float
half_to_float(uint16_t h)
{
	uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
	float f;

	if (e == 0) {
		f = ldexpf((float)m, -24);
		return s ? -f : f;
	}
	u = s | ((e + 112) << 23) | (m << 13);
	memcpy(&f, &u, 4);
	return f;
}

/* Inputs that every conversion carries exactly: multiples of 1/8, |x| <= 60. */
static double
input(int r, size_t i, int it)
{
	return (double)((r + 1) * ((long)((i * 7 + it) % 61) - 30)) / 8.0;
}

static void
put(void *buf, int dt, size_t i, double v)
{
	float f = (float)v;
	uint32_t u;

	switch (dt) {
	case ncclInt32:
		((int32_t *)buf)[i] = (int32_t)(v * 8); /* integers, the same pattern */
		break;
	case ncclFloat32:
		((float *)buf)[i] = f;
		break;
	case ncclBfloat16:
		memcpy(&u, &f, 4);
		((uint16_t *)buf)[i] = (uint16_t)(u >> 16); /* exact: few mantissa bits */
		break;
	default: { /* float16: |v| <= 60, multiples of 1/8: exact */
		uint32_t e, m;
		uint16_t h = f < 0 ? 0x8000 : 0;

		f = fabsf(f);
		if (f != 0) {
			memcpy(&u, &f, 4);
			e = ((u >> 23) & 0xff) - 112;
			m = (u >> 13) & 0x3ff;
			h |= (uint16_t)(e << 10 | m);
		}
		((uint16_t *)buf)[i] = h;
	}
	}
}

static double
get(const void *buf, int dt, size_t i)
{
	uint32_t u;
	float f;

	switch (dt) {
	case ncclInt32:
		return ((const int32_t *)buf)[i];
	case ncclFloat32:
		return ((const float *)buf)[i];
	case ncclBfloat16:
		u = (uint32_t)((const uint16_t *)buf)[i] << 16;
		memcpy(&f, &u, 4);
		return f;
	default:
		return half_to_float(((const uint16_t *)buf)[i]);
	}
}

static double
expected(int dt, int op, size_t i, int it)
{
	double acc = op == ncclMax ? -1e300 : op == ncclMin ? 1e300 : 0;

	for (int r = 0; r < world; r++) {
		double v = input(r, i, it) * (dt == ncclInt32 ? 8 : 1);

		acc = op == ncclMax ? fmax(acc, v) : op == ncclMin ? fmin(acc, v) : acc + v;
	}
	return acc;
}

struct coll_stats {
	double bytes, seconds;
	long elements;
};

/* One all-reduce of count elements the way the proxy issues it. */
static void
allreduce(ncclCollNet_v11_t *coll, void *comm, void *mh, uint8_t *send, uint8_t *recv, size_t count,
	  int dt, int op, size_t piece, int it, struct coll_stats *st)
{
	size_t esz = dt_size(dt), next = 0, done_elems = 0, pieces = (count + piece - 1) / piece;
	void *req[MAX_INFLIGHT] = {0};
	size_t head = 0, tail = 0; /* pieces issued / completed */
	double t0 = now_s(), scale = 1024, eps;
	long bad = 0;

	for (size_t i = 0; i < count; i++)
		put(send, dt, i, input(rank, i, it));
	memset(recv, 0xEE, count * esz);
	while (tail < pieces) {
		while (head < pieces && head - tail < MAX_INFLIGHT) {
			size_t n = count - next < piece ? count - next : piece;
			void **r = &req[head % MAX_INFLIGHT];

			CHECK(coll->iallreduce(comm, send + next * esz, recv + next * esz, n, dt,
					       op, mh, mh, r) == ncclSuccess,
			      "iallreduce");
			if (!*r)
				break; /* would block: again later */
			next += n;
			head++;
		}
		if (tail < head) {
			int done = 0, size = 0;

			CHECK(coll->test(req[tail % MAX_INFLIGHT], &done, &size) == ncclSuccess,
			      "test of %s %s, %zu elements", dt_name[dt], op_name[op], count);
			if (done) {
				size_t n = count - done_elems < piece ? count - done_elems : piece;

				CHECK((size_t)size == n * esz, "test size %d, not %zu", size,
				      n * esz);
				done_elems += n;
				tail++;
			}
		}
		CHECK(now_s() - t0 < t_limit, "all-reduce of %s %s (%zu) did not finish",
		      dt_name[dt], op_name[op], count);
	}
	st->seconds += now_s() - t0;
	st->bytes += (double)(count * esz);
	eps = dt == ncclFloat32 ? 0x1p-24 : dt == ncclFloat16 ? 0x1p-11 : 0x1p-8;
	for (size_t i = 0; i < count; i++) {
		double want = expected(dt, op, i, it), got = get(recv, dt, i);
		double tol = dt == ncclInt32 ? 0 : world / scale + fabs(want) * eps * 2;

		if (!(fabs(got - want) <= tol) && bad++ < 5)
			fprintf(stderr, "[rank %d] %s %s count %zu: [%zu] = %g, want %g\n", rank,
				dt_name[dt], op_name[op], count, i, got, want);
	}
	st->elements += (long)count;
	if (bad) {
		fprintf(stderr, "[rank %d] FAIL %s %s count %zu: %ld wrong elements\n", rank,
			dt_name[dt], op_name[op], count, bad);
		__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
	}
}

/* One CollNet communicator of this process, as NCCL's proxy thread for it sees it. */
struct collcomm {
	ncclCollNet_v11_t *coll;
	int k; /* which of the process's communicators */
	char tag[16];
	size_t piece;
	void *ctx, *lcomm, *comm;
	char (*all)[NCCL_NET_HANDLE_MAXSIZE];
	void **hp;
};

/* init and listen; the handle goes out of band. */
static void
cc_listen(struct collcomm *cc, ncclCollNet_v11_t *coll, int k, const char *tag, size_t piece)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};

	memset(cc, 0, sizeof(*cc));
	cc->coll = coll;
	cc->k = k;
	cc->piece = piece;
	snprintf(cc->tag, sizeof(cc->tag), "%s", tag);
	cc->all = calloc((size_t)world, NCCL_NET_HANDLE_MAXSIZE);
	cc->hp = calloc((size_t)world, sizeof(void *));
	CHECK(cc->all && cc->hp, "no memory");
	CHECK(coll->init(&cc->ctx, 100 + (uint64_t)k, logger) == ncclSuccess && cc->ctx,
	      "collnet init (%s)", tag);
	CHECK(coll->listen(cc->ctx, 0, handle, &cc->lcomm) == ncclSuccess && cc->lcomm,
	      "collnet listen (%s)", tag);
	oob_put(tag, rank, handle, sizeof(handle));
}

/* connect with every rank's handle. @return NCCL's result of connect */
static ncclResult_t
cc_connect(struct collcomm *cc, double *secs)
{
	int coll_rank = (rank + 1) % world;
	ncclResult_t rc;
	double t0;

	/* NCCL's collnet rank c is process (c - 1) mod world here */
	for (int c = 0; c < world; c++) {
		oob_get(cc->tag, (c + world - 1) % world, cc->all[c], NCCL_NET_HANDLE_MAXSIZE);
		cc->hp[c] = cc->all[c];
	}
	t0 = now_s();
	rc = cc->coll->connect(cc->hp, world, coll_rank, cc->lcomm, &cc->comm);
	*secs = now_s() - t0;
	return rc;
}

static void
cc_free(struct collcomm *cc)
{
	free(cc->all);
	free(cc->hp);
}

/* Every type and op the plugin claims, at several sizes, then a timed one
 * (full); or f32 sum at those sizes only. */
static void
cc_traffic(struct collcomm *cc, bool full)
{
	static const size_t counts[] = {1, 2047, 2049, 100003};
	ncclCollNet_v11_t *coll = cc->coll;
	size_t max_count = 1u << 20, region = 2 * max_count * 4;
	struct coll_stats st = {0}, big = {0};
	void *mh = NULL, *req = NULL;
	int claimed = 0;
	uint8_t *buf = aligned_alloc(4096, region);
	char barrier_name[32];

	CHECK(buf, "no memory");
	CHECK(coll->regMr(cc->comm, buf, region, NCCL_PTR_HOST, &mh) == ncclSuccess, "regMr");
	for (int dt = 0; dt < ncclNumTypes; dt++)
		for (int op = 0; op < ncclNumOps; op++) {
			int sup = -1;

			CHECK(coll->reduceSupport(dt, op, &sup) == ncclSuccess, "reduceSupport");
			if (!sup || (!full && (dt != ncclFloat32 || op != ncclSum)))
				continue;
			claimed++;
			for (unsigned int k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
				allreduce(coll, cc->comm, mh, buf, buf + region / 2, counts[k], dt,
					  op, cc->piece, (int)k, &st);
			printf(
			    "rank %d: %s: collnet %s %s: 1, 2047, 2049, 100003 elements checked\n",
			    rank, cc->tag, dt_name[dt], op_name[op]);
		}
	/* NCCL hands avg over as a sum: the plugin has no avg of its own */
	CHECK(coll->iallreduce(cc->comm, buf, buf + region / 2, 16, ncclFloat32, ncclAvg, mh, mh,
			       &req) != ncclSuccess &&
		  !req,
	      "iallreduce of avg was accepted");
	if (full) { /* a larger one, timed */
		for (int it = 0; it < 3; it++)
			allreduce(coll, cc->comm, mh, buf, buf + region / 2, max_count, ncclFloat32,
				  ncclSum, cc->piece, it, &big);
		printf("rank %d: %s: collnet: %d type/op pairs, %ld elements checked; 3 x %zu "
		       "MiB f32 sum: %.1f ms each, %.1f MB/s algbw\n",
		       rank, cc->tag, claimed, st.elements + big.elements, max_count * 4 >> 20,
		       big.seconds / 3 * 1e3, big.bytes / big.seconds / 1e6);
	} else {
		printf("rank %d: %s: collnet: f32 sum, %ld elements checked in %.2f s\n", rank,
		       cc->tag, st.elements, st.seconds);
	}
	/* no rank leaves while a peer may still fetch results from it */
	snprintf(barrier_name, sizeof(barrier_name), "%s-done", cc->tag);
	barrier(barrier_name);
	CHECK(coll->deregMr(cc->comm, mh) == ncclSuccess, "deregMr");
	CHECK(coll->closeColl(cc->comm) == ncclSuccess, "closeColl");
	cc->comm = NULL;
	free(buf);
}

/* A proxy thread: connect, close the listen comm, traffic, finalize. */
static void *
cc_run(void *arg)
{
	struct collcomm *cc = arg;
	ncclResult_t rc;
	double secs;

	rc = cc_connect(cc, &secs);
	CHECK(rc == ncclSuccess && cc->comm, "collnet connect of %s failed (%d)", cc->tag, rc);
	CHECK(cc->coll->closeListen(cc->lcomm) == ncclSuccess, "closeListen");
	printf("rank %d: %s: collnet connect as collnet rank %d in %.2f s\n", rank, cc->tag,
	       (rank + 1) % world, secs);
	cc_traffic(cc, cc->k == 0);
	CHECK(cc->coll->finalize(cc->ctx) == ncclSuccess, "finalize");
	cc_free(cc);
	return NULL;
}

static void
test_coll(ncclCollNet_v11_t *coll, int ncomms, size_t piece)
{
	struct collcomm cc[8];
	pthread_t th[8];
	char tag[16];

	/* the communicators come into being in the same order on every rank
	 * (static mode gives the k-th of a host session + k) ... */
	for (int k = 0; k < ncomms; k++) {
		snprintf(tag, sizeof(tag), "coll%d", k);
		cc_listen(&cc[k], coll, k, tag, piece);
	}
	/* ... and then connect and run at once, a proxy thread each */
	for (int k = 0; k < ncomms; k++)
		CHECK(pthread_create(&th[k], NULL, cc_run, &cc[k]) == 0, "pthread_create");
	for (int k = 0; k < ncomms; k++)
		pthread_join(th[k], NULL);
	if (ncomms > 1)
		printf("rank %d: %d CollNet communicators at once: all right\n", rank, ncomms);
}

/* connect must fail, on this rank as on every other. */
static void
test_coll_fail(ncclCollNet_v11_t *coll)
{
	struct collcomm cc;
	ncclResult_t rc;
	double secs;

	cc_listen(&cc, coll, 0, "coll0", 1);
	rc = cc_connect(&cc, &secs);
	CHECK(rc != ncclSuccess && cc.comm == NULL,
	      "connect succeeded: it should fail on every rank");
	CHECK(secs < t_limit, "connect took %.1f s to fail", secs);
	/* NCCL forgets the listen comm of a failed connect; finalize must free it */
	CHECK(coll->finalize(cc.ctx) == ncclSuccess, "finalize");
	printf("rank %d: collnet connect failed cleanly in %.2f s (error %d), as expected\n", rank,
	       secs, rc);
	cc_free(&cc);
}

/* One communicator initialises while another is finalised (NCCL's path for
 * a communicator whose init failed): the first keeps its listen comm. */
static void
test_finalize_race(ncclCollNet_v11_t *coll, size_t piece)
{
	struct collcomm a, b;
	double secs;
	ncclResult_t rc;

	cc_listen(&a, coll, 0, "race-a", piece);
	cc_listen(&b, coll, 1, "race-b", piece);
	/* b goes away before connecting: finalize without closeListen */
	CHECK(coll->finalize(b.ctx) == ncclSuccess, "finalize of the second context");
	cc_free(&b);
	rc = cc_connect(&a, &secs);
	CHECK(rc == ncclSuccess && a.comm, "collnet connect after another context's finalize (%d)",
	      rc);
	CHECK(coll->closeListen(a.lcomm) == ncclSuccess, "closeListen");
	cc_traffic(&a, false);
	CHECK(coll->finalize(a.ctx) == ncclSuccess, "finalize");
	cc_free(&a);
	printf("rank %d: a communicator connected, reduced and closed while another one's "
	       "context was finalized (connect %.2f s)\n",
	       rank, secs);
}

/* reduceSupport: exactly f32, f16, bf16, i32 x sum, max, min (libcais's set; NCCL
 * sends avg as a sum and never asks about it). */
static void
check_support(ncclCollNet_v11_t *coll)
{
	for (int dt = 0; dt < ncclNumTypes; dt++)
		for (int op = 0; op < ncclNumOps; op++) {
			bool want = (dt == ncclInt32 || dt == ncclFloat16 || dt == ncclFloat32 ||
				     dt == ncclBfloat16) &&
				    (op == ncclSum || op == ncclMax || op == ncclMin);
			int sup = -1;

			CHECK(coll->reduceSupport(dt, op, &sup) == ncclSuccess && sup == want,
			      "reduceSupport(%s, %s) = %d", dt_name[dt], op_name[op], sup);
		}
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"plugin", required_argument, NULL, 'p'},  {"rank", required_argument, NULL, 'r'},
	    {"world", required_argument, NULL, 'w'},   {"dir", required_argument, NULL, 'd'},
	    {"expect-fail", no_argument, NULL, 'f'},   {"piece", required_argument, NULL, 'e'},
	    {"timeout", required_argument, NULL, 't'}, {"comms", required_argument, NULL, 'k'},
	    {"finalize-race", no_argument, NULL, 'z'}, {NULL, 0, NULL, 0},
	};
	const char *plugin = NULL;
	bool expect_fail = false, race = false;
	size_t piece = 65536;
	ncclNet_v11_t *net;
	ncclCollNet_v11_t *coll;
	ncclNetProperties_v11_t np, cp;
	ncclNetCommConfig_t cfg = {.trafficClass = -1};
	void *lib, *nctx = NULL, *cctx = NULL;
	int n, c, ncomms = 1;

	rank = -1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			plugin = optarg;
			break;
		case 'r':
			rank = atoi(optarg);
			break;
		case 'w':
			world = atoi(optarg);
			break;
		case 'd':
			dir = optarg;
			break;
		case 'f':
			expect_fail = true;
			break;
		case 'e':
			piece = strtoul(optarg, NULL, 0);
			break;
		case 't':
			t_limit = atof(optarg);
			break;
		case 'k':
			ncomms = atoi(optarg);
			break;
		case 'z':
			race = true;
			break;
		default:
			return 2;
		}
	}
	if (!plugin || !dir || world < 2 || rank < 0 || rank >= world || piece == 0 || ncomms < 1 ||
	    ncomms > 8) {
		fprintf(stderr,
			"usage: %s --plugin SO --rank R --world N --dir DIR [--expect-fail] "
			"[--comms 1..8] [--finalize-race] [--piece ELEMS] [--timeout S]\n",
			argv[0]);
		return 2;
	}
	lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
	CHECK(lib, "dlopen: %s", dlerror());
	net = dlsym(lib, "ncclNetPlugin_v11");
	coll = dlsym(lib, "ncclCollNetPlugin_v11");
	CHECK(net && coll, "the v11 tables are missing");
	CHECK(net->init(&nctx, 1, &cfg, logger, NULL) == ncclSuccess, "net init");
	CHECK(net->devices(&n) == ncclSuccess && n == 1, "net devices: %d", n);
	CHECK(net->getProperties(0, &np) == ncclSuccess && np.name &&
		  np.ptrSupport == NCCL_PTR_HOST && np.maxRecvs == 1 && np.maxP2pBytes > 0,
	      "net getProperties");
	CHECK(coll->init(&cctx, 1, logger) == ncclSuccess && cctx, "collnet init");
	CHECK(coll->devices(&n) == ncclSuccess && n == 1, "collnet devices: %d", n);
	CHECK(coll->getProperties(0, &cp) == ncclSuccess && strcmp(cp.name, np.name) == 0 &&
		  cp.maxCollBytes > 0 && cp.maxCollBytes <= NCCL_MAX_NET_SIZE_BYTES,
	      "collnet getProperties (NCCL pairs the devices by name)");
	printf("rank %d: device %s, %d Mb/s, host pointers\n", rank, np.name, np.speed);
	check_support(coll);
	test_net(net, nctx);
	if (expect_fail)
		test_coll_fail(coll);
	else
		test_coll(coll, ncomms, piece);
	if (race && !expect_fail)
		test_finalize_race(coll, piece);
	/* this context saw every other come and go */
	CHECK(coll->finalize(cctx) == ncclSuccess && net->finalize(nctx) == ncclSuccess,
	      "finalize");
	dlclose(lib);
	if (failures) {
		printf("rank %d: FAIL: %d all-reduce(s) with wrong elements\n", rank, failures);
		return 1;
	}
	printf("rank %d: PASS\n", rank);
	return 0;
}
