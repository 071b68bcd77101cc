/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The peer channel (peer.h): connections and framing. Messages are a 32-byte
 * header and a payload, written with sendmsg from a queue per connection and
 * read back into a buffer per connection; whole messages go to the owner.
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "peer.h"

#ifndef TCP_RTO_MIN_US
#define TCP_RTO_MIN_US 45 /* Linux 6.15 uapi; glibc's headers may predate it */
#endif

/** Connection kinds (the flags of HELLO). */
enum ag_conn_kind { AG_CONN_NEW = 0, AG_CONN_CTL = 1, AG_CONN_RING = 2 };

/** One queued output: a header, and a payload either owned (copied) or borrowed. */
struct ag_out {
	STAILQ_ENTRY(ag_out) link;
	struct ag_msg h;
	const uint8_t *data; /**< borrowed (ring data) or own[] */
	uint32_t len;
	uint32_t done; /**< bytes of header + payload written */
	uint8_t own[];
};

struct ag_conn {
	int fd;
	int peer; /**< rank, -1 until HELLO */
	int kind; /**< enum ag_conn_kind */
	bool outbound;
	bool connecting;   /**< non-blocking connect in progress */
	uint8_t restarts;  /**< connects started over since the last one answered (saturates) */
	uint64_t retry_at; /**< connect again (fd < 0); start over (connecting) */
	STAILQ_HEAD(, ag_out) outq;
	/* input */
	struct ag_msg in;
	uint32_t in_got;     /**< header bytes read */
	uint8_t *in_buf;     /**< payload buffer (max_payload bytes) */
	uint32_t in_len;     /**< payload bytes expected */
	uint32_t in_pay_got; /**< payload bytes read */
	/** the last poll said it may be read (POLLIN, HUP, ERR), or it was not polled yet */
	bool readable;
};

struct ag_peers {
	unsigned int rank, world;
	struct sockaddr_in *addrs;
	uint32_t max_payload;
	int rto_min_us; /**< TCP_RTO_MIN_US of every connection (0: the kernel's) */
	struct ag_peer_handler h;
	uint64_t now;
	int listen_fd;
	bool listen_ready;	   /**< the last poll found a connection to accept */
	struct ag_conn **ctl;	   /**< world: the control connection with each peer */
	struct ag_conn *ring_out;  /**< to rank + 1 */
	struct ag_conn *ring_in;   /**< from rank - 1 */
	struct ag_conn **accepted; /**< every inbound connection (also ctl[] or ring_in) */
	unsigned int n_accepted;
};

void
ag_msg_init(struct ag_msg *h, unsigned int rank, enum ag_msg_type type, uint8_t flags,
	    uint32_t seq, uint32_t n, uint64_t off, uint32_t len)
{
	h->magic = htonl(AG_MSG_MAGIC);
	h->type = (uint8_t)type;
	h->flags = flags;
	h->rank = htons((uint16_t)rank);
	h->seq = htonl(seq);
	h->n = htonl(n);
	h->off = htobe64(off);
	h->len = htonl(len);
	h->pad = 0;
}

static struct ag_conn *
conn_new(struct ag_peers *p, int fd, int peer, int kind, bool outbound)
{
	struct ag_conn *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->in_buf = malloc(p->max_payload);
	if (!k->in_buf) {
		free(k);
		return NULL;
	}
	k->fd = fd;
	k->peer = peer;
	k->kind = kind;
	k->outbound = outbound;
	k->readable = true;
	STAILQ_INIT(&k->outq);
	return k;
}

static void
conn_free(struct ag_conn *k)
{
	struct ag_out *o;

	if (!k)
		return;
	if (k->fd >= 0)
		close(k->fd);
	while ((o = STAILQ_FIRST(&k->outq))) {
		STAILQ_REMOVE_HEAD(&k->outq, link);
		free(o);
	}
	free(k->in_buf);
	free(k);
}

int
ag_tcp_rto_min_conf(void)
{
	const char *v = getenv(AG_RTO_MIN_ENV);
	char *end;
	unsigned long us;

	if (!v)
		return AG_RTO_MIN_US;
	errno = 0;
	us = strtoul(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || us > 1000000) {
		fprintf(stderr,
			"libcais: %s='%s' is not a number of microseconds in 0..1000000; "
			"%u instead\n",
			AG_RTO_MIN_ENV, v, AG_RTO_MIN_US);
		return AG_RTO_MIN_US;
	}
	return (int)us;
}

void
ag_tcp_tune(int fd, int rto_min_us)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (rto_min_us)
		setsockopt(fd, IPPROTO_TCP, TCP_RTO_MIN_US, &rto_min_us, sizeof(rto_min_us));
}

int
ag_peers_open(struct ag_peers **out, unsigned int rank, unsigned int world,
	      const struct sockaddr_in *addrs, uint32_t max_payload,
	      const struct ag_peer_handler *h)
{
	struct ag_peers *p = calloc(1, sizeof(*p));
	int fd, one = 1;

	if (!p)
		return -ENOMEM;
	p->rank = rank;
	p->world = world;
	p->max_payload = max_payload;
	p->h = *h;
	p->listen_fd = -1;
	p->rto_min_us = ag_tcp_rto_min_conf();
	p->addrs = calloc(world, sizeof(*p->addrs));
	p->ctl = calloc(world, sizeof(*p->ctl));
	if (!p->addrs || !p->ctl) {
		ag_peers_close(p);
		return -ENOMEM;
	}
	memcpy(p->addrs, addrs, world * sizeof(*addrs));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int err = -errno;

		ag_peers_close(p);
		return err;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&addrs[rank], sizeof(addrs[rank])) != 0 ||
	    listen(fd, 256) != 0) {
		int err = -errno;

		close(fd);
		ag_peers_close(p);
		return err;
	}
	p->listen_fd = fd;
	p->listen_ready = true;
	*out = p;
	return 0;
}

void
ag_peers_close(struct ag_peers *p)
{
	if (!p)
		return;
	/* accepted connections may also be ctl[] or ring_in: free each once */
	if (p->ctl)
		for (unsigned int i = 0; i < p->world; i++)
			if (p->ctl[i] && p->ctl[i]->outbound)
				conn_free(p->ctl[i]);
	for (unsigned int i = 0; i < p->n_accepted; i++)
		conn_free(p->accepted[i]);
	conn_free(p->ring_out);
	if (p->listen_fd >= 0)
		close(p->listen_fd);
	free(p->accepted);
	free(p->ctl);
	free(p->addrs);
	free(p);
}

/* ---- output ---- */

static int
enqueue(struct ag_conn *k, const struct ag_msg *h, const void *data, uint32_t len, bool copy)
{
	struct ag_out *o = malloc(sizeof(*o) + (copy ? len : 0));

	if (!o)
		return -ENOMEM;
	o->h = *h;
	o->len = len;
	o->done = 0;
	if (copy) {
		if (len)
			memcpy(o->own, data, len);
		o->data = o->own;
	} else {
		o->data = data;
	}
	STAILQ_INSERT_TAIL(&k->outq, o, link);
	return 0;
}

/* Start a non-blocking connect of k to its peer (k->fd replaced); a new stream starts with HELLO. */
static void
conn_connect(struct ag_peers *p, struct ag_conn *k)
{
	struct sockaddr_in src = p->addrs[p->rank];
	struct ag_out *head = STAILQ_FIRST(&k->outq);
	int fd;

	if (!head || head->h.type != AG_HELLO || head->done) {
		struct ag_out *hello = calloc(1, sizeof(*hello));

		if (!hello)
			return;
		if (head)
			head->done = 0; /* a half-written message starts over on the new stream */
		ag_msg_init(&hello->h, p->rank, AG_HELLO, (uint8_t)k->kind, 0, 0, 0, 0);
		hello->data = hello->own;
		STAILQ_INSERT_HEAD(&k->outq, hello, link);
	}

	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	k->connecting = false;
	k->retry_at = p->now + (uint64_t)AG_CONNECT_RETRY_US * 1000;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	ag_tcp_tune(fd, p->rto_min_us);
	/* from this rank's data address, so the traffic takes the data network */
	src.sin_port = 0;
	bind(fd, (const struct sockaddr *)&src, sizeof(src));
	if (connect(fd, (const struct sockaddr *)&p->addrs[k->peer], sizeof(p->addrs[k->peer])) !=
		0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return;
	}
	k->fd = fd;
	k->connecting = true;
	k->retry_at = p->now + (uint64_t)ag_connect_wait_us(k->restarts) * 1000;
	k->readable = true;
	k->in_got = 0;
	k->in_pay_got = 0;
	k->in_len = 0;
}

/* An outbound connection to peer of the given kind, HELLO queued first. */
static struct ag_conn *
outbound(struct ag_peers *p, int peer, int kind)
{
	struct ag_conn *k = conn_new(p, -1, peer, kind, true);

	if (k)
		conn_connect(p, k);
	return k;
}

int
ag_peers_send(struct ag_peers *p, int peer, const struct ag_msg *h, const void *data, uint32_t len)
{
	if (peer < 0 || (unsigned int)peer >= p->world || (unsigned int)peer == p->rank)
		return -EINVAL;
	if (!p->ctl[peer]) {
		p->ctl[peer] = outbound(p, peer, AG_CONN_CTL);
		if (!p->ctl[peer])
			return -ENOMEM;
	}
	return enqueue(p->ctl[peer], h, data, len, true);
}

int
ag_peers_send_ring(struct ag_peers *p, const struct ag_msg *h, const void *data, uint32_t len)
{
	if (!p->ring_out) {
		p->ring_out = outbound(p, (int)((p->rank + 1) % p->world), AG_CONN_RING);
		if (!p->ring_out)
			return -ENOMEM;
	}
	return enqueue(p->ring_out, h, data, len, false);
}

/* Write what the socket takes. @return false when the connection failed */
static bool
conn_write(struct ag_peers *p, struct ag_conn *k)
{
	uint32_t ring_done[64];
	unsigned int n_ring = 0;
	struct ag_out *o;
	bool ok = true;

	while (ok && n_ring < 64 && (o = STAILQ_FIRST(&k->outq))) {
		struct iovec iov[2];
		struct msghdr mh = {.msg_iov = iov};
		uint32_t total = (uint32_t)sizeof(o->h) + o->len;
		ssize_t w;

		if (o->done < sizeof(o->h)) {
			iov[mh.msg_iovlen].iov_base = (uint8_t *)&o->h + o->done;
			iov[mh.msg_iovlen++].iov_len = sizeof(o->h) - o->done;
			if (o->len) {
				iov[mh.msg_iovlen].iov_base = (void *)o->data;
				iov[mh.msg_iovlen++].iov_len = o->len;
			}
		} else {
			iov[mh.msg_iovlen].iov_base = (void *)(o->data + (o->done - sizeof(o->h)));
			iov[mh.msg_iovlen++].iov_len = total - o->done;
		}
		/* MSG_NOSIGNAL: a peer that went away is an error here, not a SIGPIPE */
		w = sendmsg(k->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			ok = errno == EAGAIN || errno == EINTR;
			break;
		}
		o->done += (uint32_t)w;
		if (o->done < total)
			break;
		STAILQ_REMOVE_HEAD(&k->outq, link);
		if (o->h.type == AG_RING_DATA)
			ring_done[n_ring++] = ntohl(o->h.seq);
		free(o);
	}
	/* after the loop: the owner may queue or purge ring data in its handler */
	for (unsigned int i = 0; i < n_ring; i++)
		p->h.ring_sent(p->h.ctx, ring_done[i]);
	return ok;
}

void
ag_peers_purge_ring(struct ag_peers *p, uint32_t seq0)
{
	struct ag_conn *k = p->ring_out;
	struct ag_out *o, *next;

	if (!k)
		return;
	for (o = STAILQ_FIRST(&k->outq); o; o = next) {
		next = STAILQ_NEXT(o, link);
		if (o->h.type != AG_RING_DATA || ntohl(o->h.seq) != seq0)
			continue;
		if (o->done && o == STAILQ_FIRST(&k->outq) && k->fd >= 0) {
			/* half on the wire: only a new stream gets the framing back (the next
			 * rank's copy of this ring fails, as this one did) */
			close(k->fd);
			k->fd = -1;
			k->connecting = false;
			k->retry_at = p->now;
		}
		STAILQ_REMOVE(&k->outq, o, ag_out, link);
		free(o);
	}
}

/* ---- input ---- */

/* HELLO names the peer and the connection's kind; the rest goes to the owner. */
static int
dispatch(struct ag_peers *p, struct ag_conn *k, const struct ag_msg *h, const uint8_t *pay)
{
	int peer = ntohs(h->rank);

	if ((unsigned int)peer >= p->world || (unsigned int)peer == p->rank)
		return -EPROTO;
	if (h->type == AG_HELLO) {
		if (k->peer >= 0 && k->peer != peer)
			return -EPROTO;
		k->peer = peer;
		k->kind = h->flags;
		if (h->flags == AG_CONN_CTL && !p->ctl[peer])
			p->ctl[peer] = k;
		else if (h->flags == AG_CONN_RING &&
			 (unsigned int)peer == (p->rank + p->world - 1) % p->world)
			p->ring_in = k;
		else if (h->flags != AG_CONN_CTL)
			return -EPROTO;
		return 0;
	}
	if (k->peer != peer)
		return -EPROTO;
	return p->h.message(p->h.ctx, peer, h, pay);
}

/* Read and dispatch whole messages. @return false when the connection is done */
static bool
conn_read(struct ag_peers *p, struct ag_conn *k)
{
	size_t budget = 8u << 20; /* then let the others have a turn */

	while (budget) {
		ssize_t r;

		if (k->in_got < sizeof(k->in)) {
			r = read(k->fd, (uint8_t *)&k->in + k->in_got, sizeof(k->in) - k->in_got);
			if (r == 0)
				return false;
			if (r < 0)
				return errno == EAGAIN || errno == EINTR;
			k->in_got += (uint32_t)r;
			if (k->in_got < sizeof(k->in))
				continue;
			k->in_len = ntohl(k->in.len);
			k->in_pay_got = 0;
			if (ntohl(k->in.magic) != AG_MSG_MAGIC || k->in_len > p->max_payload)
				return false;
		}
		if (k->in_pay_got < k->in_len) {
			r = read(k->fd, k->in_buf + k->in_pay_got, k->in_len - k->in_pay_got);
			if (r == 0)
				return false;
			if (r < 0)
				return errno == EAGAIN || errno == EINTR;
			k->in_pay_got += (uint32_t)r;
			budget -= (size_t)r < budget ? (size_t)r : budget;
			if (k->in_pay_got < k->in_len)
				continue;
		}
		k->in_got = 0;
		if (dispatch(p, k, &k->in, k->in_buf) != 0)
			return false;
	}
	return true;
}

/* ---- the loop's part ---- */

static void
accept_new(struct ag_peers *p)
{
	if (!p->listen_ready)
		return;
	p->listen_ready = false;
	for (;;) {
		int fd = accept4(p->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ag_conn *k, **a;

		if (fd < 0)
			return;
		ag_tcp_tune(fd, p->rto_min_us);
		a = realloc(p->accepted, (p->n_accepted + 1) * sizeof(*a));
		k = a ? conn_new(p, fd, -1, AG_CONN_NEW, false) : NULL;
		if (a)
			p->accepted = a;
		if (!k) {
			close(fd);
			return;
		}
		p->accepted[p->n_accepted++] = k;
	}
}

/* Drop a failed connection; outbound ones with data to send connect again. */
static void
conn_failed(struct ag_peers *p, struct ag_conn *k)
{
	close(k->fd);
	k->fd = -1;
	if (k->outbound) {
		k->connecting = false;
		k->retry_at = p->now + (uint64_t)AG_CONNECT_RETRY_US * 1000;
	}
}

/* Is k's connect, unanswered, due to start over (ag_connect_wait_us())? */
static bool
restart_due(const struct ag_peers *p, const struct ag_conn *k)
{
	return k->connecting && (int64_t)(p->now - k->retry_at) >= 0;
}

static void
service(struct ag_peers *p, struct ag_conn *k)
{
	if (!k)
		return;
	if (k->fd < 0) {
		if (k->outbound && !STAILQ_EMPTY(&k->outq) && (int64_t)(p->now - k->retry_at) >= 0)
			conn_connect(p, k);
		return;
	}
	if (k->connecting) {
		int err = 0;
		socklen_t l = sizeof(err);
		struct pollfd pf = {.fd = k->fd, .events = POLLOUT};

		if (poll(&pf, 1, 0) <= 0) {
			if (restart_due(p, k)) { /* no SYN-ACK: a fresh SYN, not Linux's 1 s */
				if (k->restarts < UINT8_MAX)
					k->restarts++;
				conn_connect(p, k);
			}
			return;
		}
		getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err) {
			conn_failed(p, k);
			return;
		}
		k->connecting = false;
		k->restarts = 0;
	}
	/* read only what the last poll found readable: a read that finds nothing is a
	 * system call for nothing, on every pass of the loop */
	if (k->readable) {
		k->readable = false;
		if (!conn_read(p, k)) {
			conn_failed(p, k);
			return;
		}
	}
	if (!conn_write(p, k))
		conn_failed(p, k);
}

/* Forget accepted connections the peer closed, and every reference to them. */
static void
reap_accepted(struct ag_peers *p)
{
	for (unsigned int i = 0; i < p->n_accepted; i++) {
		struct ag_conn *k = p->accepted[i];

		if (k->fd >= 0)
			continue;
		if (k == p->ring_in)
			p->ring_in = NULL;
		if (k->peer >= 0 && p->ctl[k->peer] == k)
			p->ctl[k->peer] = NULL;
		p->accepted[i] = p->accepted[--p->n_accepted];
		conn_free(k);
		i--;
	}
}

void
ag_peers_progress(struct ag_peers *p, uint64_t now)
{
	unsigned int i;

	p->now = now;
	accept_new(p);
	/* outbound connections (control and ring) */
	for (i = 0; i < p->world; i++)
		if (p->ctl[i] && p->ctl[i]->outbound)
			service(p, p->ctl[i]);
	service(p, p->ring_out);
	/* accepted ones, adopted as control or ring_in by their HELLO or not */
	for (i = 0; i < p->n_accepted; i++)
		service(p, p->accepted[i]);
	reap_accepted(p);
}

/* The connection at position i of the poll order (ag_peers_pollfds()), or NULL past it. */
static struct ag_conn *
poll_order(const struct ag_peers *p, unsigned int i, bool *end)
{
	*end = false;
	if (i < p->world)
		return p->ctl[i] && p->ctl[i]->outbound ? p->ctl[i] : NULL;
	if (i == p->world)
		return p->ring_out;
	if (i - p->world - 1 < p->n_accepted)
		return p->accepted[i - p->world - 1];
	*end = true;
	return NULL;
}

static unsigned int
add_fd(struct pollfd *pfd, unsigned int n, unsigned int max, const struct ag_conn *k)
{
	if (!k || k->fd < 0 || n >= max)
		return n;
	pfd[n].fd = k->fd;
	pfd[n].events = POLLIN;
	if (k->connecting || !STAILQ_EMPTY(&k->outq))
		pfd[n].events |= POLLOUT;
	return n + 1;
}

unsigned int
ag_peers_pollfds(const struct ag_peers *p, struct pollfd *pfd, unsigned int max)
{
	unsigned int n = 0, i;
	bool end = false;

	if (max) {
		pfd[n].fd = p->listen_fd;
		pfd[n++].events = POLLIN;
	}
	for (i = 0; !end; i++) /* the order ag_peers_polled() reads them back in */
		n = add_fd(pfd, n, max, poll_order(p, i, &end));
	return n;
}

void
ag_peers_polled(struct ag_peers *p, const struct pollfd *pfd, unsigned int n)
{
	unsigned int j = 0;
	bool end = false;

	if (j < n && pfd[j].fd == p->listen_fd)
		p->listen_ready = pfd[j++].revents != 0;
	for (unsigned int i = 0; j < n; i++) {
		struct ag_conn *k = poll_order(p, i, &end);

		if (end)
			break;
		if (k && k->fd >= 0 && pfd[j].fd == k->fd)
			k->readable = pfd[j++].revents != 0;
	}
}

static uint64_t
retry_time(const struct ag_conn *k, uint64_t t)
{
	if (k && k->outbound && k->retry_at < t &&
	    ((k->fd < 0 && !STAILQ_EMPTY(&k->outq)) || k->connecting))
		return k->retry_at;
	return t;
}

uint64_t
ag_peers_next_timer(const struct ag_peers *p)
{
	uint64_t t = retry_time(p->ring_out, UINT64_MAX);

	for (unsigned int i = 0; i < p->world; i++)
		t = retry_time(p->ctl[i], t);
	return t;
}
