/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The peer channel: TCP among the ranks' data addresses (through the switch,
 * as ordinary forwarded traffic). Every rank listens on its data IP and
 * port. Control connections (FETCH, RING_REQ, FINISHED) are opened on first
 * use by whichever side needs one; ring data goes on a connection of its
 * own from each rank to the next, so small control messages never wait
 * behind megabytes of ring data. Messages are a 32-byte header and a
 * payload; sockets are non-blocking, with a queue per connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <endian.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "agent.h"

static uint32_t
in_cap(const struct cais_comm *c)
{
	uint32_t chunk = (uint32_t)c->cfg.elems * CAIS_ELEM_SIZE;

	return chunk > AG_RING_PIECE ? chunk : AG_RING_PIECE;
}

void
ag_msg_init(struct ag_msg *h, const struct cais_comm *c, enum ag_msg_type type, uint8_t flags,
	    uint32_t seq, uint32_t n, uint64_t off, uint32_t len)
{
	h->magic = htonl(AG_MSG_MAGIC);
	h->type = (uint8_t)type;
	h->flags = flags;
	h->rank = htons((uint16_t)c->cfg.rank);
	h->seq = htonl(seq);
	h->n = htonl(n);
	h->off = htobe64(off);
	h->len = htonl(len);
	h->pad = 0;
}

static struct ag_conn *
conn_new(struct cais_comm *c, int fd, int peer, int kind, bool outbound)
{
	struct ag_conn *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->in_buf = malloc(in_cap(c));
	if (!k->in_buf) {
		free(k);
		return NULL;
	}
	k->fd = fd;
	k->peer = peer;
	k->kind = kind;
	k->outbound = outbound;
	STAILQ_INIT(&k->outq);
	return k;
}

static void
outq_free(struct ag_conn *k)
{
	struct ag_out *o;

	while ((o = STAILQ_FIRST(&k->outq))) {
		STAILQ_REMOVE_HEAD(&k->outq, link);
		free(o);
	}
}

static void
conn_free(struct ag_conn *k)
{
	if (!k)
		return;
	if (k->fd >= 0)
		close(k->fd);
	outq_free(k);
	free(k->in_buf);
	free(k);
}

int
ag_peer_open(struct cais_comm *c)
{
	const struct sockaddr_in *me = &c->peers[c->cfg.rank];
	int fd, one = 1;

	c->ctl = calloc(c->cfg.world, sizeof(*c->ctl));
	if (!c->ctl)
		return -ENOMEM;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)me, sizeof(*me)) != 0 || listen(fd, 256) != 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	c->listen_fd = fd;
	return 0;
}

void
ag_peer_close(struct cais_comm *c)
{
	/* accepted connections may also be ctl[] or ring_in: free each once */
	if (c->ctl)
		for (unsigned int i = 0; i < c->cfg.world; i++)
			if (c->ctl[i] && c->ctl[i]->outbound)
				conn_free(c->ctl[i]);
	for (unsigned int i = 0; i < c->n_accepted; i++)
		conn_free(c->accepted[i]);
	conn_free(c->ring_out);
	free(c->ctl);
	free(c->accepted);
	c->ctl = NULL;
	c->accepted = NULL;
	c->ring_out = c->ring_in = NULL;
	c->n_accepted = 0;
	if (c->listen_fd >= 0)
		close(c->listen_fd);
	c->listen_fd = -1;
}

/* ---- output ---- */

static int
enqueue(struct cais_comm *c, struct ag_conn *k, const struct ag_msg *h, const void *data,
	uint32_t len, bool copy)
{
	struct ag_out *o = malloc(sizeof(*o) + (copy ? len : 0));

	(void)c;
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

/* Start a non-blocking connect of k to peer (k->fd replaced); a new stream starts with HELLO. */
static void
conn_connect(struct cais_comm *c, struct ag_conn *k)
{
	const struct sockaddr_in *to = &c->peers[k->peer];
	struct sockaddr_in src = c->peers[c->cfg.rank];
	struct ag_out *head = STAILQ_FIRST(&k->outq);
	int fd, one = 1;

	if (!head || head->h.type != AG_HELLO || head->done) {
		struct ag_out *hello = calloc(1, sizeof(*hello));

		if (!hello)
			return;
		if (head)
			head->done = 0; /* a half-written message starts over on the new stream */
		ag_msg_init(&hello->h, c, AG_HELLO, (uint8_t)k->kind, 0, 0, 0, 0);
		hello->data = hello->own;
		STAILQ_INSERT_HEAD(&k->outq, hello, link);
	}

	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	k->connecting = false;
	k->retry_at = c->now + (uint64_t)AG_CONNECT_RETRY_US * 1000;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* from this rank's data address, so the traffic takes the data network */
	src.sin_port = 0;
	bind(fd, (const struct sockaddr *)&src, sizeof(src));
	if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) != 0 && errno != EINPROGRESS) {
		close(fd);
		return;
	}
	k->fd = fd;
	k->connecting = true;
	k->in_got = 0;
	k->in_pay_got = 0;
	k->in_len = 0;
}

/* An outbound connection to peer of the given kind, HELLO queued first. */
static struct ag_conn *
outbound(struct cais_comm *c, int peer, int kind)
{
	struct ag_conn *k = conn_new(c, -1, peer, kind, true);

	if (!k)
		return NULL;
	conn_connect(c, k);
	return k;
}

int
ag_peer_send(struct cais_comm *c, int peer, const struct ag_msg *h, const void *data, uint32_t len)
{
	if (peer < 0 || (unsigned int)peer >= c->cfg.world || (unsigned int)peer == c->cfg.rank)
		return -EINVAL;
	if (!c->ctl[peer]) {
		c->ctl[peer] = outbound(c, peer, AG_CONN_CTL);
		if (!c->ctl[peer])
			return -ENOMEM;
	}
	return enqueue(c, c->ctl[peer], h, data, len, true);
}

int
ag_ring_send(struct cais_comm *c, const struct ag_msg *h, const void *data, uint32_t len)
{
	if (!c->ring_out) {
		c->ring_out = outbound(c, (int)((c->cfg.rank + 1) % c->cfg.world), AG_CONN_RING);
		if (!c->ring_out)
			return -ENOMEM;
	}
	return enqueue(c, c->ring_out, h, data, len, false);
}

/* Write what the socket takes. @return false when the connection failed */
static bool
conn_write(struct cais_comm *c, struct ag_conn *k)
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
	/* after the loop: finishing a ring may change the queues */
	for (unsigned int i = 0; i < n_ring; i++)
		ag_ring_sent(c, ring_done[i]);
	return ok;
}

void
ag_ring_purge(struct cais_comm *c, uint32_t seq0)
{
	struct ag_conn *k = c->ring_out;
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
			k->retry_at = c->now;
		}
		STAILQ_REMOVE(&k->outq, o, ag_out, link);
		free(o);
	}
}

/* ---- input ---- */

static int
dispatch(struct cais_comm *c, struct ag_conn *k, const struct ag_msg *h, const uint8_t *pay)
{
	uint32_t seq = ntohl(h->seq), n = ntohl(h->n);
	uint64_t off = be64toh(h->off);
	int peer = ntohs(h->rank);

	if ((unsigned int)peer >= c->cfg.world || (unsigned int)peer == c->cfg.rank)
		return -EPROTO;
	if (h->type == AG_HELLO) {
		if (k->peer >= 0 && k->peer != peer)
			return -EPROTO;
		k->peer = peer;
		k->kind = h->flags;
		if (h->flags == AG_CONN_CTL && !c->ctl[peer])
			c->ctl[peer] = k;
		else if (h->flags == AG_CONN_RING &&
			 (unsigned int)peer == (c->cfg.rank + c->cfg.world - 1) % c->cfg.world)
			c->ring_in = k;
		else if (h->flags != AG_CONN_CTL)
			return -EPROTO;
		return 0;
	}
	if (k->peer != peer)
		return -EPROTO;
	switch (h->type) {
	case AG_FETCH:
		ag_on_fetch(c, peer, seq, n);
		return 0;
	case AG_FETCH_OK:
		if (n > c->cfg.elems || ntohl(h->len) != n * CAIS_ELEM_SIZE)
			return -EPROTO;
		ag_on_fetch_ok(c, peer, seq, (uint16_t)n, h->flags, pay);
		return 0;
	case AG_FETCH_NO:
		ag_on_fetch_no(c, peer, seq, (enum ag_have)h->flags);
		return 0;
	case AG_RING_REQ:
		ag_ring_on_req(c, peer, seq, n, off, h->flags);
		return 0;
	case AG_FINISHED:
		ag_ring_on_finished(c, peer, seq);
		return 0;
	case AG_RING_DATA:
		return ag_ring_on_data(c, h, pay);
	default:
		return -EPROTO;
	}
}

/* Read and dispatch whole messages. @return false when the connection is done */
static bool
conn_read(struct cais_comm *c, struct ag_conn *k)
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
			if (ntohl(k->in.magic) != AG_MSG_MAGIC || k->in_len > in_cap(c))
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
		if (dispatch(c, k, &k->in, k->in_buf) != 0)
			return false;
	}
	return true;
}

/* ---- the loop's part ---- */

static void
accept_new(struct cais_comm *c)
{
	for (;;) {
		int fd = accept4(c->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
		struct ag_conn *k, **a;

		if (fd < 0)
			return;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		a = realloc(c->accepted, (c->n_accepted + 1) * sizeof(*a));
		k = a ? conn_new(c, fd, -1, AG_CONN_NEW, false) : NULL;
		if (a)
			c->accepted = a;
		if (!k) {
			close(fd);
			return;
		}
		c->accepted[c->n_accepted++] = k;
	}
}

/* Drop a failed connection; outbound ones with data to send connect again. */
static void
conn_failed(struct cais_comm *c, struct ag_conn *k)
{
	if (k->outbound) {
		close(k->fd);
		k->fd = -1;
		k->connecting = false;
		k->retry_at = c->now + (uint64_t)AG_CONNECT_RETRY_US * 1000;
		return;
	}
	close(k->fd);
	k->fd = -1;
}

static void
service(struct cais_comm *c, struct ag_conn *k)
{
	if (!k)
		return;
	if (k->fd < 0) {
		if (k->outbound && !STAILQ_EMPTY(&k->outq) && (int64_t)(c->now - k->retry_at) >= 0)
			conn_connect(c, k);
		return;
	}
	if (k->connecting) {
		int err = 0;
		socklen_t l = sizeof(err);
		struct pollfd p = {.fd = k->fd, .events = POLLOUT};

		if (poll(&p, 1, 0) <= 0)
			return;
		getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err) {
			conn_failed(c, k);
			return;
		}
		k->connecting = false;
	}
	if (!conn_read(c, k) || !conn_write(c, k))
		conn_failed(c, k);
}

/* Forget accepted connections the peer closed, and every reference to them. */
static void
reap_accepted(struct cais_comm *c)
{
	for (unsigned int i = 0; i < c->n_accepted; i++) {
		struct ag_conn *k = c->accepted[i];

		if (k->fd >= 0)
			continue;
		if (k == c->ring_in)
			c->ring_in = NULL;
		if (k->peer >= 0 && c->ctl[k->peer] == k)
			c->ctl[k->peer] = NULL;
		c->accepted[i] = c->accepted[--c->n_accepted];
		conn_free(k);
		i--;
	}
}

void
ag_peer_progress(struct cais_comm *c)
{
	unsigned int i;

	c->now = ag_now_ns();
	accept_new(c);
	/* outbound connections (control and ring) */
	for (i = 0; i < c->cfg.world; i++)
		if (c->ctl[i] && c->ctl[i]->outbound)
			service(c, c->ctl[i]);
	service(c, c->ring_out);
	/* accepted ones, adopted as control or ring_in by their HELLO or not */
	for (i = 0; i < c->n_accepted; i++)
		service(c, c->accepted[i]);
	reap_accepted(c);
}

static unsigned int
add_fd(struct pollfd *p, unsigned int n, unsigned int max, const struct ag_conn *k)
{
	if (!k || k->fd < 0 || n >= max)
		return n;
	p[n].fd = k->fd;
	p[n].events = POLLIN;
	if (k->connecting || !STAILQ_EMPTY(&k->outq))
		p[n].events |= POLLOUT;
	return n + 1;
}

unsigned int
ag_peer_pollfds(struct cais_comm *c, struct pollfd *p, unsigned int max)
{
	unsigned int n = 0, i;

	if (max) {
		p[n].fd = c->listen_fd;
		p[n++].events = POLLIN;
	}
	for (i = 0; i < c->cfg.world; i++)
		if (c->ctl[i] && c->ctl[i]->outbound)
			n = add_fd(p, n, max, c->ctl[i]);
	n = add_fd(p, n, max, c->ring_out);
	for (i = 0; i < c->n_accepted; i++)
		n = add_fd(p, n, max, c->accepted[i]);
	return n;
}

uint64_t
ag_peer_next_timer(const struct cais_comm *c)
{
	uint64_t t = UINT64_MAX;
	const struct ag_conn *ks[2] = {c->ring_out, NULL};

	for (unsigned int i = 0; i < c->cfg.world; i++) {
		const struct ag_conn *k = c->ctl[i];

		if (k && k->fd < 0 && k->outbound && !STAILQ_EMPTY(&k->outq) && k->retry_at < t)
			t = k->retry_at;
	}
	for (unsigned int i = 0; ks[i]; i++)
		if (ks[i]->fd < 0 && !STAILQ_EMPTY(&ks[i]->outq) && ks[i]->retry_at < t)
			t = ks[i]->retry_at;
	return t;
}
