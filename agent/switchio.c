/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch side of the agent: one UDP socket, the window of PROTOCOL.md
 * section 3 (at most S chunks in flight; chunk seq+S only after the result
 * of seq), retransmission with backoff, RESULT/REJECT handling, the result
 * cache served to peers, and the FETCH exchange for chunks the switch stays
 * silent about.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/ip.h>
#include <sys/socket.h>

#include "agent.h"

/* The MTU of the route to the switch, or 0 when it cannot be known. */
static int
path_mtu(const struct cais_comm *c)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), mtu = 0;
	socklen_t l = sizeof(mtu);

	if (fd < 0)
		return 0;
	if (connect(fd, (const struct sockaddr *)&c->sw, sizeof(c->sw)) != 0 ||
	    getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &l) != 0)
		mtu = 0;
	close(fd);
	return mtu;
}

int
ag_switch_open(struct cais_comm *c)
{
	const struct sockaddr_in *me = &c->peers[c->cfg.rank];
	int fd, buf = 16 << 20, one = 1, pmtu = IP_PMTUDISC_DO;
	int mtu = path_mtu(c);

	/* a fragment is not CAIS to the switch: the packet must fit the MTU */
	if (mtu > 0 && CAIS_IP_HLEN + CAIS_UDP_HLEN + CAIS_HDR_LEN + c->cfg.elems * CAIS_ELEM_SIZE >
			   (unsigned int)mtu)
		return -EMSGSIZE;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	/* a window of RESULTs arrives in one burst: room for all of it (the FORCE
	 * variants pass net.core.rmem_max where we may, e.g. as root) */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) != 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) != 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)me, sizeof(*me)) != 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	c->udp = fd;
	return 0;
}

uint16_t
ag_chunk_count(const struct cais_comm *c, const struct cais_request *r, uint32_t idx)
{
	size_t first = (size_t)idx * c->cfg.elems;

	return (uint16_t)(r->count - first < c->cfg.elems ? r->count - first : c->cfg.elems);
}

static inline struct ag_slot *
slot_of(const struct cais_comm *c, uint32_t seq)
{
	return &c->win[seq & (c->cfg.slots - 1)];
}

static inline uint8_t *
stage_of(const struct cais_comm *c, const struct cais_request *r, uint32_t idx)
{
	return r->stage + (size_t)idx * c->cfg.elems * CAIS_ELEM_SIZE;
}

static uint64_t
rto(const struct cais_comm *c, unsigned int tries)
{
	uint64_t floor_ns = (uint64_t)c->cfg.retx_timeout_us * 1000;
	uint64_t cap = (uint64_t)AG_RETX_CAP_US * 1000;
	uint64_t t = c->srtt ? c->srtt + 4 * c->rttvar : floor_ns;

	if (cap < floor_ns)
		cap = floor_ns;
	if (t < floor_ns)
		t = floor_ns;
	t <<= tries < 6 ? tries : 6;
	return t < cap ? t : cap;
}

static void
rtt_sample(struct cais_comm *c, uint64_t sample)
{
	if (!c->srtt) {
		c->srtt = sample;
		c->rttvar = sample / 2;
		return;
	}
	uint64_t err = sample > c->srtt ? sample - c->srtt : c->srtt - sample;

	c->rttvar = (3 * c->rttvar + err) / 4;
	c->srtt = (7 * c->srtt + sample) / 8;
}

/* Move the window's base over seqs that no longer hold anything. */
static void
advance_base(struct cais_comm *c)
{
	while (c->base != c->next_send) {
		const struct ag_slot *s = slot_of(c, c->base);

		if (s->state != AG_CH_FREE && s->seq == c->base)
			break;
		c->base++;
	}
}

void
ag_window_release(struct cais_comm *c, struct cais_request *r)
{
	for (uint32_t seq = c->base; seq != c->next_send; seq++) {
		struct ag_slot *s = slot_of(c, seq);

		if (s->state != AG_CH_FREE && s->seq == seq && s->req == r)
			s->state = AG_CH_FREE;
	}
	if (c->send_req == r) {
		c->next_send = r->seq0 + r->nchunks;
		c->send_req = NULL;
	}
	advance_base(c);
}

/* ---- the result cache ---- */

static inline uint32_t
cache_index(const struct cais_comm *c, uint32_t seq)
{
	return seq & (2 * c->cfg.slots - 1);
}

const uint8_t *
ag_cache_get(const struct cais_comm *c, uint32_t seq, uint16_t *count, uint8_t *flags)
{
	uint32_t i = cache_index(c, seq);
	const struct ag_cached *e = &c->cached[i];

	if (!e->valid || e->seq != seq)
		return NULL;
	*count = e->count;
	*flags = e->flags;
	return c->cache + (size_t)i * c->cfg.elems * CAIS_ELEM_SIZE;
}

static void
cache_put(struct cais_comm *c, uint32_t seq, const void *payload, uint16_t count, uint8_t flags)
{
	uint32_t i = cache_index(c, seq);

	memcpy(c->cache + (size_t)i * c->cfg.elems * CAIS_ELEM_SIZE, payload,
	       (size_t)count * CAIS_ELEM_SIZE);
	c->cached[i] =
	    (struct ag_cached){.seq = seq, .count = count, .flags = flags, .valid = true};
}

void
ag_chunk_resolved(struct cais_comm *c, struct cais_request *r, uint32_t idx, const void *payload_be,
		  uint16_t count, uint8_t flags)
{
	uint32_t seq = r->seq0 + idx;
	struct ag_slot *s = slot_of(c, seq);

	if (r->resolved[idx])
		return;
	memcpy(stage_of(c, r, idx), payload_be, (size_t)count * CAIS_ELEM_SIZE);
	cache_put(c, seq, payload_be, count, flags);
	r->resolved[idx] = 1;
	r->n_resolved++;
	if (s->state != AG_CH_FREE && s->seq == seq) {
		s->state = AG_CH_FREE;
		advance_base(c);
	}
	if (flags & CAIS_F_CONGESTED) {
		pthread_mutex_lock(&c->lock);
		c->m.congested++;
		pthread_mutex_unlock(&c->lock);
	}
	if (flags & CAIS_F_OVERFLOW) {
		r->overflow = true;
		ag_to_ring(c, r, CAIS_FB_OVERFLOW);
	} else if (flags & CAIS_F_FWD_ONLY) {
		ag_to_ring(c, r, CAIS_FB_FWD_ONLY);
	}
}

/* ---- receive ---- */

static void
count_ignored(struct cais_comm *c)
{
	pthread_mutex_lock(&c->lock);
	c->m.results_ignored++;
	pthread_mutex_unlock(&c->lock);
}

static void
handle_dgram(struct cais_comm *c, const uint8_t *p, size_t len, const struct sockaddr_in *from)
{
	const struct cais_hdr *h = (const struct cais_hdr *)p;
	struct cais_fields f;
	struct cais_request *r;
	struct ag_slot *s;

	if (from->sin_addr.s_addr != c->sw.sin_addr.s_addr || from->sin_port != c->sw.sin_port)
		return; /* not from the aggregator */
	if (cais_hdr_check(p, len) != CAIS_HDR_OK)
		return;
	cais_hdr_read(h, &f);
	if (f.tenant != c->cfg.tenant || f.session != c->cfg.session)
		return;
	s = slot_of(c, f.seq);
	if (s->state == AG_CH_FREE || s->seq != f.seq || s->req->tensor != f.tensor ||
	    ntohs(h->slot) != cais_slot_field(f.seq, c->cfg.slots)) {
		count_ignored(c);
		return;
	}
	r = s->req;
	if (f.type == CAIS_TYPE_REJECT) {
		ag_to_ring(c, r, f.reason == CAIS_R_FWD_ONLY ? CAIS_FB_FWD_ONLY : CAIS_FB_REJECT);
		return;
	}
	if (f.type != CAIS_TYPE_RESULT || f.count != s->count ||
	    len < CAIS_HDR_LEN + (size_t)f.count * CAIS_ELEM_SIZE) {
		count_ignored(c);
		return;
	}
	if (s->tries == 0)
		rtt_sample(c, c->now - s->t_first);
	ag_chunk_resolved(c, r, s->idx, p + CAIS_HDR_LEN, f.count, f.flags);
}

void
ag_switch_rx(struct cais_comm *c)
{
	struct mmsghdr msgs[AG_BATCH];
	struct iovec iov[AG_BATCH];
	struct sockaddr_in from[AG_BATCH];

	for (int round = 0; round < 64; round++) {
		int n;

		for (int i = 0; i < AG_BATCH; i++) {
			iov[i].iov_base = c->rxbuf + (size_t)i * AG_DGRAM;
			iov[i].iov_len = AG_DGRAM;
			memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_name = &from[i];
			msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
		}
		n = recvmmsg(c->udp, msgs, AG_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		c->now = ag_now_ns();
		for (int i = 0; i < n; i++)
			handle_dgram(c, iov[i].iov_base, msgs[i].msg_len, &from[i]);
		if (n < AG_BATCH)
			return;
	}
}

/* ---- peers: FETCH ---- */

static void
query_peers(struct cais_comm *c, struct ag_slot *s)
{
	struct ag_msg h;

	memset(s->answered, 0, sizeof(s->answered));
	s->n_answered = 0;
	s->any_waiting = false;
	s->next_query = c->now + (uint64_t)AG_QUERY_US * 1000;
	if (c->cfg.world == 1) {
		/* nobody to ask: the switch is all there is */
		ag_to_ring(c, s->req, CAIS_FB_SILENT);
		return;
	}
	ag_msg_init(&h, c, AG_FETCH, 0, s->seq, 1, 0, 0);
	for (unsigned int p = 0; p < c->cfg.world; p++)
		if (p != c->cfg.rank)
			ag_peer_send(c, (int)p, &h, NULL, 0);
}

enum ag_have
ag_have_state(struct cais_comm *c, uint32_t seq)
{
	struct cais_request *r = ag_req_of_seq(c, seq);
	const struct ag_slot *s = slot_of(c, seq);

	if (!r)
		/* not issued here yet, or long done (then the asker is confused) */
		return cais_seq_before(seq, c->next_send) ? AG_HAVE_STUCK : AG_HAVE_NOT_SENT;
	if (r->state == AG_RQ_RING)
		return AG_HAVE_RING;
	if (r->state != AG_RQ_INNET)
		return AG_HAVE_STUCK;
	if (s->state == AG_CH_FREE || s->seq != seq)
		return r->resolved[seq - r->seq0] ? AG_HAVE_STUCK : AG_HAVE_NOT_SENT;
	return s->state == AG_CH_SILENT ? AG_HAVE_STUCK : AG_HAVE_INFLIGHT;
}

void
ag_on_fetch(struct cais_comm *c, int peer, uint32_t seq, uint32_t n)
{
	struct ag_msg h;

	if (n > 2 * c->cfg.slots)
		n = 2 * c->cfg.slots;
	for (uint32_t k = 0; k < n; k++, seq++) {
		uint16_t count;
		uint8_t flags;
		const uint8_t *d = ag_cache_get(c, seq, &count, &flags);
		struct cais_request *r;

		if (!d && (r = ag_req_of_seq(c, seq)) && r->resolved &&
		    r->resolved[seq - r->seq0] && !r->overflow) {
			/* an active collective's result, older than the cache */
			d = stage_of(c, r, seq - r->seq0);
			count = ag_chunk_count(c, r, seq - r->seq0);
			flags = 0;
		}

		if (d) {
			ag_msg_init(&h, c, AG_FETCH_OK, flags, seq, count, 0,
				    (uint32_t)count * CAIS_ELEM_SIZE);
			if (ag_peer_send(c, peer, &h, d, (uint32_t)count * CAIS_ELEM_SIZE) == 0) {
				pthread_mutex_lock(&c->lock);
				c->m.peer_chunks_served++;
				pthread_mutex_unlock(&c->lock);
			}
		} else {
			ag_msg_init(&h, c, AG_FETCH_NO, (uint8_t)ag_have_state(c, seq), seq, 0, 0,
				    0);
			ag_peer_send(c, peer, &h, NULL, 0);
		}
	}
}

void
ag_on_fetch_ok(struct cais_comm *c, int peer, uint32_t seq, uint16_t count, uint8_t flags,
	       const uint8_t *data)
{
	struct cais_request *r = ag_req_of_seq(c, seq);
	uint32_t idx;

	(void)peer;
	if (!r || (r->state != AG_RQ_INNET && r->state != AG_RQ_FETCH))
		return;
	idx = seq - r->seq0;
	if (r->resolved[idx] || count != ag_chunk_count(c, r, idx))
		return;
	r->peer_chunks++;
	pthread_mutex_lock(&c->lock);
	c->m.peer_chunks++;
	pthread_mutex_unlock(&c->lock);
	ag_chunk_resolved(c, r, idx, data, count, flags);
}

void
ag_on_fetch_no(struct cais_comm *c, int peer, uint32_t seq, enum ag_have have)
{
	struct ag_slot *s = slot_of(c, seq);
	struct cais_request *r = ag_req_of_seq(c, seq);

	if (r && r->state == AG_RQ_FETCH && r->fetch_from == peer) {
		/* it said FINISHED, yet lacks a chunk: not the protocol */
		ag_complete(c, r, -EPROTO);
		return;
	}

	if (s->state != AG_CH_SILENT || s->seq != seq || peer < 0 || (unsigned int)peer >= 256 ||
	    (s->answered[peer / 8] & (1u << (peer % 8))))
		return;
	s->answered[peer / 8] |= (uint8_t)(1u << (peer % 8));
	s->n_answered++;
	if (have == AG_HAVE_NOT_SENT || have == AG_HAVE_INFLIGHT)
		s->any_waiting = true;
	if (have == AG_HAVE_RING) {
		/* that peer's collective is on the ring: so is ours */
		ag_to_ring(c, s->req, CAIS_FB_SILENT);
		return;
	}
	if (s->n_answered == c->cfg.world - 1 && !s->any_waiting)
		/* every peer gave up on this chunk too and none has its result: the
		 * switch lost the round */
		ag_to_ring(c, s->req, CAIS_FB_SILENT);
}

/* ---- transmit ---- */

struct tx_batch {
	unsigned int n;
	struct mmsghdr msgs[AG_BATCH];
	struct iovec iov[AG_BATCH][2];
	uint32_t seq[AG_BATCH];
	bool fresh[AG_BATCH];
};

static void
batch_add(struct cais_comm *c, struct tx_batch *b, struct ag_slot *s, bool fresh)
{
	unsigned int i = b->n++;

	b->iov[i][0].iov_base = &s->hdr;
	b->iov[i][0].iov_len = CAIS_HDR_LEN;
	b->iov[i][1].iov_base = stage_of(c, s->req, s->idx);
	b->iov[i][1].iov_len = (size_t)s->count * CAIS_ELEM_SIZE;
	memset(&b->msgs[i].msg_hdr, 0, sizeof(b->msgs[i].msg_hdr));
	b->msgs[i].msg_hdr.msg_iov = b->iov[i];
	b->msgs[i].msg_hdr.msg_iovlen = 2;
	b->msgs[i].msg_hdr.msg_name = &c->sw;
	b->msgs[i].msg_hdr.msg_namelen = sizeof(c->sw);
	b->seq[i] = s->seq;
	b->fresh[i] = fresh;
}

/* Send a batch; what the socket refused is undone (fresh chunks) or retried at once. */
static bool
batch_flush(struct cais_comm *c, struct tx_batch *b)
{
	int sent = 0;
	unsigned int fresh = 0, retx = 0;

	if (b->n == 0)
		return true;
	while ((unsigned int)sent < b->n) {
		int k = sendmmsg(c->udp, b->msgs + sent, b->n - (unsigned int)sent, MSG_DONTWAIT);

		if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS &&
		    errno != EINTR) {
			/* refused for good (a firewall's EPERM, EMSGSIZE): as if lost on the
			 * wire, so the timers, the retries and the peers decide, as for loss */
			pthread_mutex_lock(&c->lock);
			c->m.send_errors++;
			pthread_mutex_unlock(&c->lock);
			k = 1;
		}
		if (k <= 0)
			break;
		sent += k;
	}
	for (unsigned int i = 0; i < b->n; i++) {
		struct ag_slot *s = slot_of(c, b->seq[i]);

		if (i < (unsigned int)sent) {
			if (b->fresh[i])
				fresh++;
			else
				retx++;
			continue;
		}
		if (b->fresh[i]) {
			/* never left: the chunk goes again as new (its bytes are not out yet) */
			s->state = AG_CH_FREE;
			if (s->idx < s->req->next_idx)
				s->req->next_idx = s->idx;
			if (cais_seq_before(b->seq[i], c->next_send)) {
				c->next_send = b->seq[i];
				c->send_req = s->req;
			}
		} else {
			s->deadline = c->now;
			s->tries--;
			s->req->retx--;
		}
	}
	c->udp_blocked = (unsigned int)sent < b->n;
	pthread_mutex_lock(&c->lock);
	c->m.chunks_sent += fresh;
	c->m.retransmissions += retx;
	pthread_mutex_unlock(&c->lock);
	b->n = 0;
	return !c->udp_blocked;
}

static void
retransmit_due(struct cais_comm *c, struct tx_batch *b)
{
	for (uint32_t seq = c->base; seq != c->next_send; seq++) {
		struct ag_slot *s = slot_of(c, seq);

		if (s->state == AG_CH_FREE || s->seq != seq)
			continue;
		if (s->state == AG_CH_SILENT && (int64_t)(c->now - s->next_query) >= 0)
			query_peers(c, s);
		if (s->state == AG_CH_FREE || (int64_t)(c->now - s->deadline) < 0)
			continue;
		if (s->state == AG_CH_INFLIGHT && s->tries >= c->cfg.retries) {
			s->state = AG_CH_SILENT;
			query_peers(c, s);
			if (s->state == AG_CH_FREE)
				continue;
		}
		s->hdr.flags |= CAIS_F_RETX;
		s->tries++;
		s->req->retx++;
		s->deadline = c->now + rto(c, s->tries);
		batch_add(c, b, s, false);
		if (b->n == AG_BATCH && !batch_flush(c, b))
			return;
	}
}

/* The request that owns next_send, skipping those not on the switch path. */
static struct cais_request *
sending_request(struct cais_comm *c)
{
	struct cais_request *r = c->send_req;

	if (r && r->state == AG_RQ_INNET && r->next_idx < r->nchunks)
		return r;
	TAILQ_FOREACH (r, &c->active, link) {
		if (cais_seq_before(r->seq0 + r->nchunks - 1, c->next_send))
			continue; /* behind us */
		if (cais_seq_before(c->next_send, r->seq0))
			c->next_send = r->seq0; /* seqs of collectives already done */
		if (r->state != AG_RQ_INNET || r->next_idx >= r->nchunks) {
			c->next_send = r->seq0 + r->nchunks;
			continue;
		}
		c->send_req = r;
		return r;
	}
	c->send_req = NULL;
	return NULL;
}

/* Quantize chunk idx of r into its staging bytes. @return the elements that saturated */
static size_t
encode_chunk(struct cais_comm *c, struct cais_request *r, uint32_t idx)
{
	size_t esz = cais_datatype_size(r->dt);
	const uint8_t *src = (const uint8_t *)r->send + (size_t)idx * c->cfg.elems * esz;
	uint16_t n = ag_chunk_count(c, r, idx);

	if (r->dt == CAIS_INT32)
		return c->q->encode(stage_of(c, r, idx), src, n, r->dt, 1.0f, true, &c->rng);
	return c->q->encode(stage_of(c, r, idx), src, n, r->dt, r->scale, c->cfg.round_nearest,
			    &c->rng);
}

void
ag_switch_tx(struct cais_comm *c)
{
	struct tx_batch b;

	b.n = 0;
	c->now = ag_now_ns();
	retransmit_due(c, &b);
	if (c->udp_blocked && !batch_flush(c, &b))
		return;
	advance_base(c);
	while (c->next_send - c->base < c->cfg.slots) {
		struct cais_request *r = sending_request(c);
		struct ag_slot *s;
		struct cais_fields f;
		uint32_t idx;

		advance_base(c);
		if (!r || c->next_send - c->base >= c->cfg.slots)
			break;
		idx = c->next_send - r->seq0;
		if (!r->resolved[idx] && encode_chunk(c, r, idx) != 0) {
			/* a value beyond the scale's range: the switch cannot sum it right;
			 * the ring pulls every rank in (none can finish without this chunk) */
			ag_to_ring(c, r, CAIS_FB_OVERFLOW);
			continue;
		}
		s = slot_of(c, c->next_send);
		s->seq = c->next_send;
		s->req = r;
		s->idx = idx;
		s->count = ag_chunk_count(c, r, idx);
		s->tries = 0;
		s->state = AG_CH_INFLIGHT;
		s->t_first = c->now;
		s->deadline = c->now + rto(c, 0);
		cais_data_fields(&f, c->cfg.tenant, c->cfg.session, r->tensor, s->seq, c->cfg.slots,
				 (uint8_t)c->cfg.rank, s->count);
		cais_hdr_build(&s->hdr, &f);
		c->next_send++;
		r->next_idx = idx + 1;
		batch_add(c, &b, s, true);
		if (b.n == AG_BATCH && !batch_flush(c, &b))
			return;
	}
	batch_flush(c, &b);
}

uint64_t
ag_switch_next_timer(const struct cais_comm *c)
{
	uint64_t t = UINT64_MAX;

	if (c->udp_blocked)
		return c->now + 100000; /* a tenth of a millisecond: try the socket again */
	for (uint32_t seq = c->base; seq != c->next_send; seq++) {
		const struct ag_slot *s = slot_of(c, seq);

		if (s->state == AG_CH_FREE || s->seq != seq)
			continue;
		if (s->deadline < t)
			t = s->deadline;
		if (s->state == AG_CH_SILENT && s->next_query < t)
			t = s->next_query;
	}
	/* more to send and room in the window: no sleeping */
	if (c->next_send - c->base < c->cfg.slots) {
		const struct cais_request *r;

		TAILQ_FOREACH (r, &c->active, link)
			if (r->state == AG_RQ_INNET && r->next_idx < r->nchunks)
				return c->now;
	}
	return t;
}
