/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ncclNet: NCCL's point-to-point traffic (rings, trees, send/recv) over TCP
 * on the plugin's device. One connection per send/receive comm pair; every
 * message is an 8-byte length and the bytes, so a receive learns the size
 * that was sent. Requests of a comm complete in the order they were posted
 * (the socket is a stream): a fixed pool of NP_NET_REQS per comm, progress
 * made in test(). Host memory only (NCCL stages GPU data through host
 * buffers), one receive per irecv (maxRecvs 1).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "../peer.h"
#include "plugin.h"

/** Requests in flight per comm: NCCL's NCCL_NET_MAX_REQUESTS. */
#define NP_NET_REQS	  32u
/** Socket buffers: a few of NCCL's 512 KiB net chunks in flight. */
#define NP_SOCK_BUF_BYTES (4 << 20)
/** Connections a listen comm reads hellos from at once (one is NCCL's; the
 * rest are strays or stale, dropped after NP_CONNECT_MS). */
#define NP_ACCEPT_PENDING 8u
/** Wait before connecting again to a refusing listener. */
#define NP_RETRY_MS	  20u
/* A connect not answered for a while starts over with a fresh SYN, as
 * libcais's ranks do: agent/peer.h ag_connect_wait_us(). */

_Static_assert(sizeof(struct np_net_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle fits NCCL's");

/** An accepted connection whose hello has not all arrived. */
struct np_accepting {
	int fd; /**< -1: a free entry */
	uint64_t since;
	size_t got;
	struct np_hello hello;
};

struct np_listen {
	int fd;
	uint64_t nonce;
	struct np_accepting pend[NP_ACCEPT_PENDING];
};

/** A connect in progress, between NCCL's calls (in the handle's stage). */
struct np_connecting {
	int fd;		       /**< -1: waiting to try again */
	uint64_t deadline;     /**< give up then */
	uint64_t retry_at;     /**< the next attempt after a refusal; with fd >= 0
				*   and nothing sent: when the SYN starts over */
	unsigned int restarts; /**< unanswered SYNs started over (ag_connect_wait_us()) */
	size_t sent;	       /**< hello bytes sent */
	struct np_hello hello;
};

enum np_req_state { NP_REQ_FREE = 0, NP_REQ_PENDING, NP_REQ_DONE };

struct np_comm;

struct np_req {
	struct np_comm *c;
	int state;
	bool send;
	char *data;
	size_t size;  /**< bytes to send, or the receive buffer's size */
	uint64_t len; /**< the message's length (the header) */
	size_t hdr_done;
	size_t done; /**< payload bytes moved */
};

struct np_comm {
	int fd;
	bool send;
	bool failed;
	uint64_t issued, completed; /**< requests posted / finished, in order */
	struct np_req req[NP_NET_REQS];
};

/** A v11 context: one per NCCL communicator. Every comm is its own (a socket
 * and its requests): the context only names the communicator. */
struct np_net_ctx {
	uint64_t comm_id;
};

static void
tune_socket(int fd)
{
	int buf = NP_SOCK_BUF_BYTES;

	ag_tcp_tune(fd, np_conf()->rto_min_us);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

static ncclResult_t
net_listen(int d, void *handle, void **listen_comm)
{
	const struct np_dev *dev = np_device();
	struct np_net_handle *h = handle;
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	struct np_listen *l;

	if (!dev || d != 0)
		return ncclInternalError;
	l = calloc(1, sizeof(*l));
	if (!l)
		return ncclSystemError;
	for (unsigned int i = 0; i < NP_ACCEPT_PENDING; i++)
		l->pend[i].fd = -1;
	a.sin_addr = dev->addr;
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(l->fd, 64) != 0 || getsockname(l->fd, (struct sockaddr *)&a, &alen) != 0) {
		NP_WARN("CAIS: net listen on %s: %s", dev->name, strerror(errno));
		if (l->fd >= 0)
			close(l->fd);
		free(l);
		return ncclSystemError;
	}
	if (getrandom(&l->nonce, sizeof(l->nonce), 0) != sizeof(l->nonce))
		l->nonce = np_now_ms() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)l;
	memset(h, 0, sizeof(*h));
	h->magic = NP_NET_MAGIC;
	h->ip = a.sin_addr.s_addr;
	h->port = a.sin_port;
	h->nonce = l->nonce;
	*listen_comm = l;
	return ncclSuccess;
}

static struct np_comm *
comm_new(int fd, bool send)
{
	struct np_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->send = send;
	for (unsigned int i = 0; i < NP_NET_REQS; i++)
		c->req[i].c = c;
	return c;
}

/* Start a TCP connect without waiting. @return 0 (under way or done) or -errno */
static int
connect_start(struct np_connecting *s, const struct sockaddr_in *a)
{
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return -errno;
	tune_socket(s->fd);
	if (connect(s->fd, (const struct sockaddr *)a, sizeof(*a)) != 0 && errno != EINPROGRESS) {
		int err = -errno;

		close(s->fd);
		s->fd = -1;
		return err;
	}
	s->sent = 0;
	s->retry_at = np_now_ms() + ag_connect_wait_us(s->restarts) / 1000;
	return 0;
}

/* One step of a connect. @return 1 connected and hello sent, 0 not yet, -errno */
static int
connect_step(struct np_connecting *s, const struct sockaddr_in *a)
{
	struct pollfd pfd = {.fd = s->fd, .events = POLLOUT};
	int err = 0;
	socklen_t elen = sizeof(err);
	ssize_t n;

	if (s->fd < 0) {
		/* the first attempt, or again after a refusal; a later call looks */
		if (np_now_ms() < s->retry_at)
			return 0;
		err = connect_start(s, a);
		if (!err)
			return 0;
	} else if (s->sent == 0) {
		if (poll(&pfd, 1, 0) == 0) {
			/* the handshake is under way; unanswered too long, it starts over */
			if (np_now_ms() < s->retry_at)
				return 0;
			close(s->fd);
			s->restarts++;
			err = connect_start(s, a);
			if (!err)
				return 0;
		} else if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) {
			err = -errno;
		} else {
			err = -err;
		}
	}
	if (err == -ECONNREFUSED || err == -EAGAIN) {
		/* the listener's queue is full, or it is gone: again until the deadline */
		if (s->fd >= 0)
			close(s->fd);
		s->fd = -1;
		s->retry_at = np_now_ms() + NP_RETRY_MS;
		return np_now_ms() < s->deadline ? 0 : -ETIMEDOUT;
	}
	if (err)
		return err;
	n = send(s->fd, (char *)&s->hello + s->sent, sizeof(s->hello) - s->sent, MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	s->sent += (size_t)n;
	return s->sent == sizeof(s->hello);
}

/* NCCL calls connect with the same handle until it returns a comm: the
 * progress lives in the handle (h->stage), and no call waits for the peer.
 * comm_id names the NCCL communicator in warnings (0: unknown, before v11). */
static ncclResult_t
net_connect(int d, void *handle, void **send_comm, uint64_t comm_id)
{
	struct np_net_handle *h = handle;
	struct sockaddr_in a = {
	    .sin_family = AF_INET, .sin_addr.s_addr = h->ip, .sin_port = h->port};
	struct np_connecting *s = h->stage;
	char ip[INET_ADDRSTRLEN];
	int rc;

	*send_comm = NULL;
	if (d != 0 || h->magic != NP_NET_MAGIC) {
		NP_WARN("CAIS: net connect: not a CAIS handle");
		return ncclInternalError;
	}
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return ncclSystemError;
		s->fd = -1;
		s->deadline = np_now_ms() + NP_CONNECT_MS;
		s->hello.magic = NP_NET_MAGIC;
		s->hello.nonce = h->nonce;
		h->stage = s;
	}
	rc = connect_step(s, &a);
	if (rc == 0 && np_now_ms() > s->deadline)
		rc = -ETIMEDOUT;
	if (rc == 0)
		return ncclSuccess; /* not yet: NCCL calls again */
	if (rc == 1 && !(*send_comm = comm_new(s->fd, true)))
		rc = -ENOMEM;
	h->stage = NULL;
	if (rc == 1) {
		free(s);
		return ncclSuccess;
	}
	inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
	NP_WARN("CAIS: net connect to %s:%u (communicator %016llx): %s", ip, ntohs(a.sin_port),
		(unsigned long long)comm_id, strerror(-rc));
	if (s->fd >= 0)
		close(s->fd);
	free(s);
	return ncclSystemError;
}

/* Read what has come of a pending hello. @return 1 complete, 0 not yet, -errno */
static int
hello_step(struct np_accepting *p)
{
	ssize_t n = recv(p->fd, (char *)&p->hello + p->got, sizeof(p->hello) - p->got, 0);

	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	p->got += (size_t)n;
	return p->got == sizeof(p->hello);
}

/* Take the connections the kernel has accepted, read their hellos without
 * waiting: the first whose hello names this listener is NCCL's. */
static ncclResult_t
net_accept(void *listen_comm, void **recv_comm)
{
	struct np_listen *l = listen_comm;
	uint64_t now = np_now_ms();

	*recv_comm = NULL;
	for (unsigned int i = 0; i < NP_ACCEPT_PENDING; i++) {
		struct np_accepting *p = &l->pend[i];
		int fd;

		if (p->fd >= 0)
			continue;
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
			    errno == ECONNABORTED)
				break;
			NP_WARN("CAIS: net accept: %s", strerror(errno));
			return ncclSystemError;
		}
		tune_socket(fd);
		*p = (struct np_accepting){.fd = fd, .since = now};
	}
	for (unsigned int i = 0; i < NP_ACCEPT_PENDING; i++) {
		struct np_accepting *p = &l->pend[i];
		int rc;

		if (p->fd < 0)
			continue;
		rc = hello_step(p);
		if (rc == 0 && now - p->since > NP_CONNECT_MS)
			rc = -ETIMEDOUT;
		if (rc == 1 && (p->hello.magic != NP_NET_MAGIC || p->hello.nonce != l->nonce))
			rc = -EPROTO;
		if (rc == 0)
			continue;
		if (rc == 1) {
			*recv_comm = comm_new(p->fd, false);
			if (!*recv_comm)
				return ncclSystemError; /* the entry stays: NCCL may call again */
			p->fd = -1;
			return ncclSuccess;
		}
		/* not NCCL's connection (or one that died): drop it, keep listening */
		NP_INFO(NCCL_NET, "CAIS: net accept: dropped a connection: %s", strerror(-rc));
		close(p->fd);
		p->fd = -1;
	}
	return ncclSuccess; /* not yet: NCCL calls again */
}

static ncclResult_t
net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	(void)comm;
	return np_reg_host_mr("net", data, size, type, mhandle);
}

static ncclResult_t
net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
		  void **mhandle)
{
	(void)offset;
	(void)fd;
	return net_reg_mr(comm, data, size, type, mhandle);
}

static ncclResult_t
net_dereg_mr(void *comm, void *mhandle)
{
	(void)comm;
	free(mhandle);
	return ncclSuccess;
}

static struct np_req *
req_post(struct np_comm *c, bool send, void *data, size_t size)
{
	struct np_req *r = &c->req[c->issued % NP_NET_REQS];

	if (r->state != NP_REQ_FREE)
		return NULL; /* the pool is full: NCCL tries again */
	r->state = NP_REQ_PENDING;
	r->send = send;
	r->data = data;
	r->size = size;
	r->len = size;
	r->hdr_done = 0;
	r->done = 0;
	c->issued++;
	return r;
}

/* Work on r; @return 1 finished, 0 blocked, -errno */
static int
req_step(struct np_comm *c, struct np_req *r)
{
	while (r->hdr_done < sizeof(r->len)) {
		ssize_t n = r->send ? send(c->fd, (char *)&r->len + r->hdr_done,
					   sizeof(r->len) - r->hdr_done, MSG_NOSIGNAL | MSG_MORE)
				    : recv(c->fd, (char *)&r->len + r->hdr_done,
					   sizeof(r->len) - r->hdr_done, 0);

		if (n <= 0)
			return n == 0				     ? -ECONNRESET
			       : (errno == EAGAIN || errno == EINTR) ? 0
								     : -errno;
		r->hdr_done += (size_t)n;
		if (r->hdr_done == sizeof(r->len) && !r->send && r->len > r->size) {
			NP_WARN("CAIS: net: a message of %llu bytes for a receive of %zu",
				(unsigned long long)r->len, r->size);
			return -EMSGSIZE;
		}
	}
	while (r->done < r->len) {
		size_t want = (size_t)r->len - r->done;
		ssize_t n = r->send ? send(c->fd, r->data + r->done, want, MSG_NOSIGNAL)
				    : recv(c->fd, r->data + r->done, want, 0);

		if (n <= 0)
			return n == 0				     ? -ECONNRESET
			       : (errno == EAGAIN || errno == EINTR) ? 0
								     : -errno;
		r->done += (size_t)n;
	}
	return 1;
}

/* Advance the comm's requests in posting order. */
static int
comm_progress(struct np_comm *c)
{
	while (!c->failed && c->completed < c->issued) {
		struct np_req *r = &c->req[c->completed % NP_NET_REQS];
		int rc = req_step(c, r);

		if (rc == 0)
			return 0;
		if (rc < 0) {
			NP_WARN("CAIS: net %s: %s", c->send ? "send" : "receive", strerror(-rc));
			c->failed = true;
			return rc;
		}
		r->state = NP_REQ_DONE;
		c->completed++;
	}
	return c->failed ? -EIO : 0;
}

static ncclResult_t
net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
	  void **request)
{
	struct np_comm *c = send_comm;

	(void)tag;
	(void)mhandle;
	(void)phandle;
	if (c->failed)
		return ncclSystemError;
	*request = req_post(c, true, data, size);
	return ncclSuccess;
}

static ncclResult_t
net_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
	  void **phandles, void **request)
{
	struct np_comm *c = recv_comm;

	(void)tags;
	(void)mhandles;
	(void)phandles;
	if (n != 1 || c->failed)
		return n != 1 ? ncclInternalError : ncclSystemError;
	*request = req_post(c, false, data[0], sizes[0]);
	return ncclSuccess;
}

static ncclResult_t
net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request)
{
	(void)recv_comm;
	(void)n;
	(void)data;
	(void)sizes;
	(void)mhandles;
	*request = NULL; /* host memory: nothing to flush */
	return ncclSuccess;
}

static ncclResult_t
net_test(void *request, int *done, int *sizes)
{
	struct np_req *r = request;

	*done = 0;
	if (comm_progress(r->c) < 0)
		return ncclSystemError;
	if (r->state != NP_REQ_DONE)
		return ncclSuccess;
	*done = 1;
	if (sizes)
		*sizes = (int)r->len;
	r->state = NP_REQ_FREE;
	return ncclSuccess;
}

static ncclResult_t
net_close(void *comm)
{
	struct np_comm *c = comm;

	if (c) {
		close(c->fd);
		free(c);
	}
	return ncclSuccess;
}

static ncclResult_t
net_close_listen(void *listen_comm)
{
	struct np_listen *l = listen_comm;

	if (!l)
		return ncclSuccess;
	for (unsigned int i = 0; i < NP_ACCEPT_PENDING; i++)
		if (l->pend[i].fd >= 0)
			close(l->pend[i].fd);
	close(l->fd);
	free(l);
	return ncclSuccess;
}

static ncclResult_t
net_devices(int *ndev)
{
	*ndev = np_device() ? 1 : 0;
	return ncclSuccess;
}

/* ---- the versioned entry points ---- */

static ncclResult_t
net_init_v6(ncclDebugLogger_t log)
{
	return np_setup(log);
}

static ncclResult_t
net_init_v10(ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
	(void)prof;
	return np_setup(log);
}

/* v11: a context per NCCL communicator. */
static ncclResult_t
net_init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config, ncclDebugLogger_t log,
	     ncclProfilerCallback_t prof)
{
	struct np_net_ctx *x;
	ncclResult_t rc = np_setup(log);

	(void)config;
	(void)prof;
	*ctx = NULL;
	if (rc != ncclSuccess)
		return rc;
	x = calloc(1, sizeof(*x));
	if (!x)
		return ncclSystemError;
	x->comm_id = comm_id;
	*ctx = x;
	return ncclSuccess;
}

static ncclResult_t
net_finalize_v11(void *ctx)
{
	free(ctx);
	return ncclSuccess;
}

static ncclResult_t
net_set_attr_v11(void *ctx, ncclNetAttr_v11_t *attr)
{
	(void)ctx;
	(void)attr;
	return ncclSuccess;
}

static ncclResult_t
net_props_v11(int d, ncclNetProperties_v11_t *p)
{
	if (d != 0 || !np_device())
		return ncclInvalidArgument;
	np_props(p, false);
	return ncclSuccess;
}

NP_PROPS_ADAPTER(net_props, 9)
NP_PROPS_ADAPTER(net_props, 8)
NP_PROPS_ADAPTER(net_props, 7)
NP_PROPS_ADAPTER(net_props, 6)

static ncclResult_t
net_listen_v11(void *ctx, int d, void *handle, void **listen_comm)
{
	(void)ctx;
	return net_listen(d, handle, listen_comm);
}

static ncclResult_t
net_connect_v11(void *ctx, int d, void *handle, void **send_comm, ncclNetDeviceHandle_t **dev_comm)
{
	(void)dev_comm;
	return net_connect(d, handle, send_comm, ((struct np_net_ctx *)ctx)->comm_id);
}

static ncclResult_t
net_connect_v10(int d, ncclNetCommConfig_t *config, void *handle, void **send_comm,
		ncclNetDeviceHandle_t **dev_comm)
{
	(void)config;
	(void)dev_comm;
	return net_connect(d, handle, send_comm, 0);
}

static ncclResult_t
net_connect_v7(int d, void *handle, void **send_comm, ncclNetDeviceHandle_t **dev_comm)
{
	(void)dev_comm;
	return net_connect(d, handle, send_comm, 0);
}

static ncclResult_t
net_accept_v7(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_t **dev_comm)
{
	(void)dev_comm;
	return net_accept(listen_comm, recv_comm);
}

static ncclResult_t
net_reg_mr_int(void *comm, void *data, int size, int type, void **mhandle)
{
	return net_reg_mr(comm, data, (size_t)size, type, mhandle);
}

static ncclResult_t
net_isend_v9(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request)
{
	return net_isend(send_comm, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t
net_irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
	     void **request)
{
	return net_irecv(recv_comm, n, data, sizes, tags, mhandles, NULL, request);
}

static ncclResult_t
net_isend_int(void *send_comm, void *data, int size, int tag, void *mhandle, void **request)
{
	if (size < 0)
		return ncclInvalidArgument;
	return net_isend(send_comm, data, (size_t)size, tag, mhandle, NULL, request);
}

static ncclResult_t
net_irecv_int(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhandles,
	      void **request)
{
	size_t size;

	if (n != 1 || sizes[0] < 0)
		return ncclInternalError;
	size = (size_t)sizes[0];
	return net_irecv(recv_comm, n, data, &size, tags, mhandles, NULL, request);
}

static ncclResult_t
net_connect_v6(int d, void *handle, void **send_comm)
{
	return net_connect(d, handle, send_comm, 0);
}

/* clang-format off */ /* one table entry per line */
/* The entries every version's table shares; the tables below add the rest. */
#define NET_TABLE_COMMON                                                                           \
	.name = NP_NAME,                                                                           \
	.devices = net_devices,                                                                    \
	.regMrDmaBuf = net_reg_mr_dmabuf,                                                          \
	.deregMr = net_dereg_mr,                                                                   \
	.iflush = net_iflush,                                                                      \
	.test = net_test,                                                                          \
	.closeSend = net_close,                                                                    \
	.closeRecv = net_close,                                                                    \
	.closeListen = net_close_listen

/* ... and those of v7 on: no device offload, so no getDeviceMr or
 * irecvConsumed (NCCL calls them only where they are there) */
#define NET_TABLE_COMMON_V7                                                                        \
	NET_TABLE_COMMON,                                                                          \
	.accept = net_accept_v7,                                                                   \
	.getDeviceMr = NULL,                                                                       \
	.irecvConsumed = NULL
/* clang-format on */

NP_EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
    NET_TABLE_COMMON_V7,
    .init = net_init_v11,
    .getProperties = net_props_v11,
    .listen = net_listen_v11,
    .connect = net_connect_v11,
    .regMr = net_reg_mr,
    .isend = net_isend,
    .irecv = net_irecv,
    .makeVDevice = NULL, /* physical devices only */
    .finalize = net_finalize_v11,
    .setNetAttr = net_set_attr_v11,
};

NP_EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
    NET_TABLE_COMMON_V7,  .init = net_init_v10,	      .getProperties = net_props_v9,
    .listen = net_listen, .connect = net_connect_v10, .regMr = net_reg_mr,
    .isend = net_isend,	  .irecv = net_irecv,	      .makeVDevice = NULL,
};

NP_EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
    NET_TABLE_COMMON_V7,   .init = net_init_v6,	      .getProperties = net_props_v9,
    .listen = net_listen,  .connect = net_connect_v7, .regMr = net_reg_mr,
    .isend = net_isend_v9, .irecv = net_irecv_v9,     .makeVDevice = NULL,
};

NP_EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
    NET_TABLE_COMMON_V7,    .init = net_init_v6,       .getProperties = net_props_v8,
    .listen = net_listen,   .connect = net_connect_v7, .regMr = net_reg_mr,
    .isend = net_isend_int, .irecv = net_irecv_int,
};

NP_EXPORT ncclNet_v7_t ncclNetPlugin_v7 = {
    NET_TABLE_COMMON_V7,    .init = net_init_v6,       .getProperties = net_props_v7,
    .listen = net_listen,   .connect = net_connect_v7, .regMr = net_reg_mr_int,
    .isend = net_isend_int, .irecv = net_irecv_int,
};

NP_EXPORT ncclNet_v6_t ncclNetPlugin_v6 = {
    NET_TABLE_COMMON,	     .init = net_init_v6,	.getProperties = net_props_v6,
    .listen = net_listen,    .connect = net_connect_v6, .accept = net_accept,
    .regMr = net_reg_mr_int, .isend = net_isend_int,	.irecv = net_irecv_int,
};
