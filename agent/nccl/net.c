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
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "plugin.h"

/** Requests in flight per comm: NCCL's NCCL_NET_MAX_REQUESTS. */
#define NP_NET_REQS	  32u
#define NP_NET_MAGIC	  0xCA15AE7Bu
/** Bound on connect()/the first bytes of an accepted connection. */
#define NP_CONNECT_MS	  30000
/** Socket buffers: a few of NCCL's 512 KiB net chunks in flight. */
#define NP_SOCK_BUF_BYTES (4 << 20)

/** The listen handle, in NCCL's 128 bytes; addresses in network order. */
struct np_net_handle {
	uint32_t magic;
	uint32_t ip;
	uint16_t port;
	uint16_t pad;
	uint32_t pad2;
	uint64_t nonce; /**< identifies the listener in the connection's hello */
};
_Static_assert(sizeof(struct np_net_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle fits NCCL's");

/** The first bytes on a connection. */
struct np_hello {
	uint32_t magic;
	uint32_t pad;
	uint64_t nonce;
};

struct np_listen {
	int fd;
	uint64_t nonce;
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

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
tune_socket(int fd)
{
	int one = 1, buf = NP_SOCK_BUF_BYTES;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

/* Move len bytes with a deadline (blocking use of a non-blocking socket). */
static int
io_all(int fd, void *p, size_t len, bool out, uint64_t deadline)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = out ? send(fd, (char *)p + got, len - got, MSG_NOSIGNAL)
				: recv(fd, (char *)p + got, len - got, 0);
		struct pollfd pfd = {.fd = fd, .events = out ? POLLOUT : POLLIN};

		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return n == 0 ? -ECONNRESET : -errno;
		if (now_ms() > deadline)
			return -ETIMEDOUT;
		poll(&pfd, 1, 100);
	}
	return 0;
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
		l->nonce = now_ms() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)l;
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

/* Connecting to a listening socket completes in one round trip (the kernel
 * accepts for the listener), so this blocks that long, not until the peer
 * calls accept(); refused connections are retried while the peer starts. */
static ncclResult_t
net_connect(int d, void *handle, void **send_comm)
{
	const struct np_net_handle *h = handle;
	struct sockaddr_in a = {
	    .sin_family = AF_INET, .sin_addr.s_addr = h->ip, .sin_port = h->port};
	struct np_hello hello = {.magic = NP_NET_MAGIC, .nonce = h->nonce};
	uint64_t deadline = now_ms() + NP_CONNECT_MS;
	int fd = -1, rc = 0;

	*send_comm = NULL;
	if (d != 0 || h->magic != NP_NET_MAGIC) {
		NP_WARN("CAIS: net connect: not a CAIS handle");
		return ncclInternalError;
	}
	for (;;) {
		struct pollfd pfd;
		int err = 0;
		socklen_t elen = sizeof(err);

		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			break;
		}
		tune_socket(fd);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS) {
			err = errno;
		} else {
			pfd.fd = fd;
			pfd.events = POLLOUT;
			while ((rc = poll(&pfd, 1, 100)) == 0 && now_ms() < deadline)
				;
			if (rc <= 0)
				err = ETIMEDOUT;
			else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
				err = errno;
		}
		rc = 0;
		if (err == 0)
			break;
		close(fd);
		fd = -1;
		rc = -err;
		if ((err != ECONNREFUSED && err != EAGAIN) || now_ms() > deadline)
			break;
		usleep(20000);
	}
	if (rc == 0)
		rc = io_all(fd, &hello, sizeof(hello), true, deadline);
	if (rc == 0 && !(*send_comm = comm_new(fd, true)))
		rc = -ENOMEM;
	if (rc) {
		NP_WARN("CAIS: net connect to %s:%u: %s", inet_ntoa(a.sin_addr), ntohs(a.sin_port),
			strerror(-rc));
		if (fd >= 0)
			close(fd);
		return ncclSystemError;
	}
	return ncclSuccess;
}

static ncclResult_t
net_accept(void *listen_comm, void **recv_comm)
{
	struct np_listen *l = listen_comm;
	struct np_hello hello;
	int fd, rc;

	*recv_comm = NULL;
	fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return ncclSuccess; /* not yet: NCCL calls again */
		NP_WARN("CAIS: net accept: %s", strerror(errno));
		return ncclSystemError;
	}
	tune_socket(fd);
	/* the connector sends its hello right after connecting */
	rc = io_all(fd, &hello, sizeof(hello), false, now_ms() + NP_CONNECT_MS);
	if (rc == 0 && (hello.magic != NP_NET_MAGIC || hello.nonce != l->nonce))
		rc = -EPROTO;
	if (rc == 0 && !(*recv_comm = comm_new(fd, false)))
		rc = -ENOMEM;
	if (rc) {
		NP_WARN("CAIS: net accept: the connection's hello: %s", strerror(-rc));
		close(fd);
		return ncclSystemError;
	}
	return ncclSuccess;
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

	if (l) {
		close(l->fd);
		free(l);
	}
	return ncclSuccess;
}

static ncclResult_t
net_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle)
{
	(void)comm;
	(void)mhandle;
	*dptr_mhandle = NULL;
	return ncclInternalError; /* no device offload */
}

static ncclResult_t
net_irecv_consumed(void *recv_comm, int n, void *request)
{
	(void)recv_comm;
	(void)n;
	(void)request;
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

/* v11 contexts: the plugin keeps no per-communicator state of its own. */
static ncclResult_t
net_init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config, ncclDebugLogger_t log,
	     ncclProfilerCallback_t prof)
{
	static int context;

	(void)comm_id;
	(void)config;
	(void)prof;
	*ctx = &context;
	return np_setup(log);
}

static ncclResult_t
net_finalize_v11(void *ctx)
{
	(void)ctx;
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
	(void)ctx;
	(void)dev_comm;
	return net_connect(d, handle, send_comm);
}

static ncclResult_t
net_connect_v10(int d, ncclNetCommConfig_t *config, void *handle, void **send_comm,
		ncclNetDeviceHandle_t **dev_comm)
{
	(void)config;
	(void)dev_comm;
	return net_connect(d, handle, send_comm);
}

static ncclResult_t
net_connect_v7(int d, void *handle, void **send_comm, ncclNetDeviceHandle_t **dev_comm)
{
	(void)dev_comm;
	return net_connect(d, handle, send_comm);
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
	return net_connect(d, handle, send_comm);
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

/* ... and those of v7 on */
#define NET_TABLE_COMMON_V7                                                                        \
	NET_TABLE_COMMON,                                                                          \
	.accept = net_accept_v7,                                                                   \
	.getDeviceMr = net_get_device_mr,                                                          \
	.irecvConsumed = net_irecv_consumed
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
