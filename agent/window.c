/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch window (window.h). Entries are indexed by seq mod S, so the
 * entry of chunk seq + S is the one chunk seq held: the window's invariant
 * (S in flight at most) is what makes that safe. Transmission is batched
 * with sendmmsg, consecutive chunks of one length as one UDP GSO message
 * where the socket takes it; reception with recvmmsg.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cais/proto.h>

#include "window.h"

/**
 * Lanes the window tells apart (E11: a switch's data lcores, which its
 * RESULTs name); a switch with more is heard as one lane, as before E11's
 * lanes: needless retransmissions, never a missed one.
 */
#define AG_MAX_LANES   128
/** QUERYs at most in one pass: one for each of the newest lanes' chunks. */
#define AG_QUERY_LANES 16

/** A chunk in the window, at index seq & (S - 1). */
struct ag_window_entry {
	uint32_t seq;	  /**< written before state; both read by other threads as hints */
	uint8_t state;	  /**< enum ag_window_state */
	bool unsent;	  /**< queued: its first transmission has not left yet */
	uint16_t tries;	  /**< retransmissions so far (the backoff) */
	uint16_t strikes; /**< retransmissions the switch has not acknowledged (silence) */
	bool acked;	  /**< an ACK said the DATA is in: the round waits for others */
	bool probe;	  /**< retransmitted as the window's probe (retransmit_now()) */
	bool nacked;	  /**< a NACK said its DATA is missing: sent again at once */
	uint64_t t_query; /**< its last QUERY (0: none): its RESULT is then no RTT sample */
	uint16_t count;	  /**< elements */
	uint8_t dtype;	  /**< wire dtype */
	uint32_t len;	  /**< payload bytes */
	uint32_t tensor;
	void *owner;
	uint32_t idx;
	atomic_uint *retx; /**< the owner's retransmission counter */
	const uint8_t *payload;
	uint64_t deadline;  /**< next (re)transmission */
	uint64_t t_first;   /**< first transmission, for the RTT estimate */
	uint64_t t_sent;    /**< last transmission */
	uint64_t res_mark;  /**< w->results when it was last sent or ACKed (loss_evident()) */
	uint64_t ack_until; /**< ACKed: not sent again before, but on evidence of a loss */
	struct cais_hdr hdr;
};

/** What the RESULTs of one lane said (E11). */
struct ag_lane {
	bool cleared;	    /**< one came without WAIT ... */
	uint32_t clear_seq; /**< ... and this is the seq of the latest of those */
	uint64_t answered;  /**< when the switch last answered about one of its chunks */
};

struct ag_window {
	struct ag_window_conf conf;
	struct ag_window_events ev;
	int fd;
	struct ag_window_entry *e; /**< S entries */
	uint32_t base;		   /**< oldest seq the window may still hold */
	uint32_t next;		   /**< the seq after the last one put in */
	uint64_t srtt, rttvar;	   /**< round trip of chunks (ns), Jacobson/Karels */
	unsigned int backoff;	   /**< bursts since the last RTT sample: the timer's doublings */
	uint64_t heard;		   /**< when the switch last sent this flow anything, 0: never */
	uint64_t first_tx;	   /**< when its first DATA went (cold()), 0: not yet */
	uint64_t results;	   /**< RESULTs of chunks in the window, ever */
	unsigned int lanes;	   /**< the switch's, from its latest RESULT (E11); 1 above
				    * AG_MAX_LANES */
	bool hints;		   /**< ... which named them: the session has loss_hints */
	struct ag_lane lane[AG_MAX_LANES];
	uint64_t heard_result;	    /**< when the last RESULT came */
	uint64_t heard_first;	    /**< ... and when its chunk's first DATA went */
	uint64_t last_probe;	    /**< when the last probe went (retransmit_now()) */
	bool probe_out;		    /**< ... and it has had no answer yet */
	bool probe_missed;	    /**< ... nor had the one before it */
	bool probe_chain;	    /**< a probe's RESULT came: the next due chunk probes at once */
	uint64_t burst_until;	    /**< a probe found a loss: every chunk due goes until then */
	uint64_t last_query;	    /**< when the last QUERY went (E12) */
	unsigned int query_backoff; /**< QUERYs since the last RESULT: the interval's doublings */
	bool blocked;		    /**< the socket refused a send */
	bool gso;		    /**< send runs of chunks with UDP GSO (AG_GSO_*) */
	uint8_t *rxbuf;		    /**< AG_BATCH x AG_DGRAM */
	struct ag_window_stats st;  /**< updated with relaxed atomics */
};

static inline void
count(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static inline struct ag_window_entry *
entry(const struct ag_window *w, uint32_t seq)
{
	return &w->e[seq & (w->conf.slots - 1)];
}

static inline bool
holds(const struct ag_window_entry *e, uint32_t seq)
{
	return e->state != AG_W_FREE && e->seq == seq;
}

/* state, for other threads to read (ag_window_state()) */
static inline void
set_state(struct ag_window_entry *e, uint8_t state)
{
	__atomic_store_n(&e->state, state, __ATOMIC_RELEASE);
}

/* The MTU of the route to the switch, or 0 when it cannot be known. */
static int
path_mtu(const struct sockaddr_in *sw)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), mtu = 0;
	socklen_t l = sizeof(mtu);

	if (fd < 0)
		return 0;
	if (connect(fd, (const struct sockaddr *)sw, sizeof(*sw)) != 0 ||
	    getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &l) != 0)
		mtu = 0;
	close(fd);
	return mtu;
}

static int
socket_open(const struct ag_window_conf *conf)
{
	int fd, buf = 16 << 20, one = 1, pmtu = IP_PMTUDISC_DO;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a fragment is not CAIS to the switch: never fragment, the packet fits or fails */
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	/* a window of RESULTs arrives in one burst: room for all of it (the FORCE
	 * variants pass net.core.rmem_max where we may, e.g. as root) */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) != 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) != 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&conf->local, sizeof(conf->local)) != 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int
ag_window_open(struct ag_window **out, const struct ag_window_conf *conf,
	       const struct ag_window_events *ev)
{
	struct ag_window *w;
	const char *gso;
	int mtu = path_mtu(&conf->sw);

	if (mtu > 0 && CAIS_IP_HLEN + CAIS_UDP_HLEN + CAIS_HDR_LEN +
			       (unsigned int)conf->elems * CAIS_ELEM_SIZE >
			   (unsigned int)mtu)
		return -EMSGSIZE;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->conf = *conf;
	w->ev = *ev;
	w->base = w->next = conf->first_seq;
	w->e = calloc(conf->slots, sizeof(*w->e));
	w->rxbuf = malloc((size_t)AG_BATCH * AG_DGRAM);
	w->fd = -1;
	gso = getenv(AG_GSO_ENV);
	w->gso = !gso || strcmp(gso, "0") != 0;
	if (!w->e || !w->rxbuf) {
		ag_window_close(w);
		return -ENOMEM;
	}
	w->fd = socket_open(conf);
	if (w->fd < 0) {
		int err = w->fd;

		ag_window_close(w);
		return err;
	}
	*out = w;
	return 0;
}

void
ag_window_close(struct ag_window *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	free(w->e);
	free(w->rxbuf);
	free(w);
}

int
ag_window_fd(const struct ag_window *w)
{
	return w->fd;
}

/* ---- the timer ---- */

/* The configured timer (ns): the RTO's floor, and how long a sent chunk is left alone. */
static inline uint64_t
retx_floor(const struct ag_window *w)
{
	return (uint64_t)w->conf.retx_timeout_us * 1000;
}

/*
 * The retransmission timer after tries retransmissions: the RTT estimate
 * (it learns how long rounds wait for other ranks, see handle_result();
 * before its first sample the first timer), at least the configured
 * floor, at most AG_RTO_MAX_US; doubled per try, and per burst since the
 * last RTT sample (w->backoff), up to AG_RETX_CAP_US or the estimate,
 * whichever is larger.
 */
static uint64_t
rto(const struct ag_window *w, unsigned int tries)
{
	uint64_t floor_ns = retx_floor(w);
	uint64_t cap = (uint64_t)AG_RETX_CAP_US * 1000, max = (uint64_t)AG_RTO_MAX_US * 1000;
	uint64_t first_ns = (uint64_t)w->conf.first_timeout_us * 1000;
	uint64_t t = w->srtt ? w->srtt + 4 * w->rttvar : first_ns;
	unsigned int shift = tries + w->backoff;

	if (t < floor_ns)
		t = floor_ns;
	if (t > max)
		t = max;
	if (cap < t)
		cap = t;
	t <<= shift < 6 ? shift : 6;
	return t < cap ? t : cap;
}

/*
 * How long a chunk whose DATA the switch acknowledged waits before its next
 * retransmission: twice what it has waited so far (the round is waiting for
 * other ranks, as long again is a fair guess), at least one timer, at most
 * AG_ACK_WAIT_MAX_US.
 */
static uint64_t
ack_wait(const struct ag_window *w, const struct ag_window_entry *e, uint64_t now)
{
	uint64_t t = 2 * (now - e->t_first), lo = rto(w, 0);
	uint64_t hi = (uint64_t)AG_ACK_WAIT_MAX_US * 1000;

	if (t < lo)
		t = lo;
	return t < hi ? t : hi;
}

static void
rtt_sample(struct ag_window *w, uint64_t sample)
{
	uint64_t err;

	w->backoff = 0;
	if (!w->srtt) {
		w->srtt = sample;
		w->rttvar = sample / 2;
		return;
	}
	err = sample > w->srtt ? sample - w->srtt : w->srtt - sample;
	w->rttvar = (3 * w->rttvar + err) / 4;
	w->srtt = (7 * w->srtt + sample) / 8;
}

/* ---- entries ---- */

/* Move base over seqs the window no longer holds. */
static void
advance_base(struct ag_window *w)
{
	while (w->base != w->next && !holds(entry(w, w->base), w->base))
		w->base++;
}

static void
release(struct ag_window *w, struct ag_window_entry *e)
{
	set_state(e, AG_W_FREE);
	advance_base(w);
}

bool
ag_window_room(const struct ag_window *w, uint32_t seq)
{
	uint32_t base = w->base;

	while (base != w->next && !holds(entry(w, base), base))
		base++;
	/* an empty window skips to seq */
	return base == w->next || seq - base < w->conf.slots;
}

void
ag_window_send(struct ag_window *w, uint32_t seq, uint32_t tensor, uint8_t dtype, uint16_t count,
	       const uint8_t *payload, void *owner, uint32_t idx, atomic_uint *retx)
{
	struct ag_window_entry *e = entry(w, seq);
	struct cais_fields f;

	advance_base(w);
	if (w->base == w->next)
		w->base = seq;
	__atomic_store_n(&w->next, seq + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, seq, __ATOMIC_RELAXED);
	set_state(e, AG_W_INFLIGHT);
	e->unsent = true;
	e->tries = e->strikes = 0;
	e->acked = e->probe = e->nacked = false;
	e->t_query = 0;
	e->count = count;
	e->dtype = dtype;
	e->len = cais_payload_bytes(dtype, count);
	e->tensor = tensor;
	e->owner = owner;
	e->idx = idx;
	e->retx = retx;
	e->payload = payload;
	e->deadline = 0;
	cais_data_fields(&f, w->conf.tenant, w->conf.session, tensor, seq, w->conf.slots,
			 w->conf.rank, count);
	f.dtype = dtype;
	cais_hdr_build(&e->hdr, &f);
}

void
ag_window_redo(struct ag_window *w, uint32_t seq, uint8_t dtype)
{
	struct ag_window_entry *e = entry(w, seq);

	if (!holds(e, seq))
		return;
	set_state(e, AG_W_INFLIGHT);
	e->unsent = true;
	e->tries = e->strikes = 0;
	e->acked = e->probe = e->nacked = false;
	e->t_query = 0;
	e->dtype = dtype;
	e->len = cais_payload_bytes(dtype, e->count);
	e->hdr.dtype = dtype;
	e->hdr.flags &= (uint8_t)~CAIS_F_RETX;
}

void
ag_window_resolved(struct ag_window *w, uint32_t seq)
{
	struct ag_window_entry *e = entry(w, seq);

	if (holds(e, seq))
		release(w, e);
}

void
ag_window_forget(struct ag_window *w, const void *owner)
{
	for (uint32_t seq = w->base; seq != w->next; seq++) {
		struct ag_window_entry *e = entry(w, seq);

		if (holds(e, seq) && e->owner == owner)
			set_state(e, AG_W_FREE);
	}
	advance_base(w);
}

enum ag_window_state
ag_window_state(const struct ag_window *w, uint32_t seq)
{
	const struct ag_window_entry *e = entry(w, seq);
	uint8_t state = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);

	return state != AG_W_FREE && __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == seq
		   ? (enum ag_window_state)state
		   : AG_W_FREE;
}

uint32_t
ag_window_next_seq(const struct ag_window *w)
{
	return __atomic_load_n(&w->next, __ATOMIC_RELAXED);
}

bool
ag_window_blocked(const struct ag_window *w)
{
	return w->blocked;
}

/* ---- receive ---- */

/*
 * An ACKed chunk stalls AG_STALL_US after its first DATA without a RESULT.
 * The ACKs say that its round waits for other ranks; the peers' answers to
 * the FETCH that silence starts (fetch.h) tell whether one of them has not
 * sent yet (wait) or every DATA is in and the switch will never finish the
 * round, a restart having forgotten earlier contributions while later ones
 * were ACKed (the ring). Without this, ranks whose ACK waits never line up
 * between two restarts would wait for the round until timeout_ms.
 */
static bool
stalled(const struct ag_window_entry *e, uint64_t now)
{
	return e->acked && now - e->t_first >= (uint64_t)AG_STALL_US * 1000;
}

/*
 * The newest chunk sent of each lane that holds one (E11), newest first, at
 * most max of them: each lane's QUERY answers for that lane's older rounds
 * only, as its lcore holds no other.
 */
static unsigned int
newest_per_lane(const struct ag_window *w, struct ag_window_entry **out, unsigned int max)
{
	unsigned int n = 0, lanes = w->lanes > 1 ? w->lanes : 1;
	uint64_t seen[AG_MAX_LANES / 64] = {0};

	for (uint32_t seq = w->next; seq != w->base && n < max && n < lanes; seq--) {
		struct ag_window_entry *e = entry(w, seq - 1);
		unsigned int l;

		if (!holds(e, seq - 1) || e->unsent)
			continue;
		l = cais_lane(seq - 1, w->conf.slots, lanes);
		if ((seen[l / 64] >> (l % 64)) & 1)
			continue;
		seen[l / 64] |= 1ull << (l % 64);
		out[n++] = e;
	}
	return n;
}

/* The newest chunk sent, of any lane, or NULL. */
static struct ag_window_entry *
newest_sent(const struct ag_window *w)
{
	struct ag_window_entry *e;

	return newest_per_lane(w, &e, 1) ? e : NULL;
}

/*
 * Whether e, the first chunk of its collective, is the only chunk the window
 * holds: a collective of one chunk (or a cold flow's first DATA, cold()).
 */
static inline bool
alone(const struct ag_window *w, const struct ag_window_entry *e)
{
	return e->idx == 0 && w->base == e->seq && w->next == e->seq + 1;
}

/*
 * When the next QUERY about e, the newest chunk sent, is due: a round trip
 * after the later of its send, the last RESULT and the last QUERY, doubled
 * per QUERY since that RESULT. At most AG_QUERY_SOON_TIMERS timers
 * - when the last RESULT came after e went and was for a chunk whose first
 *   DATA went with e's, in one send: every rank sends its chunks in seq
 *   order, so each rank's DATA of e's round left right behind the DATA that
 *   completed that round, and e's RESULT is due with it, not a round trip
 *   later (one that holds the waits for other ranks: lost, its RESULT would
 *   cost the collective that wait again);
 * - and when e is a collective's only chunk (alone()): no other RESULT will
 *   say when its round is due, and the round trip holds the waits for other
 *   ranks, among them their repairs of losses, each a round trip long.
 *   Its QUERYs then go 4, 8, 16, ... timers apart while the round waits
 *   (answered with ACKs, header-sized), and a DATA or RESULT of it that was
 *   lost is asked about within about twice the round's own wait.
 */
static uint64_t
query_due(const struct ag_window *w, const struct ag_window_entry *e)
{
	uint64_t since = e->t_sent, gap = w->srtt > retx_floor(w) ? w->srtt : retx_floor(w);
	uint64_t most = (uint64_t)AG_QUERY_IV_MAX_US * 1000, iv;
	uint64_t soon = AG_QUERY_SOON_TIMERS * retx_floor(w);
	bool sibling = w->heard_result > e->t_sent && w->heard_first == e->t_first;

	if ((sibling || alone(w, e)) && gap > soon)
		gap = soon;
	iv = gap << w->query_backoff;
	if (w->heard_result > since)
		since = w->heard_result;
	if (w->last_query > since)
		since = w->last_query;
	if (most < gap)
		most = gap;
	return since + (iv < most ? iv : most);
}

/* When the answer to the flow's next QUERY is due: a timer after it goes (0: none to go). */
static uint64_t
next_answer_due(const struct ag_window *w)
{
	const struct ag_window_entry *n = newest_sent(w);

	return n ? query_due(w, n) + rto(w, 0) : 0;
}

/*
 * An ACK: the chunk's DATA is in, its round waits for other ranks (E6). The
 * retransmission it answers does not count towards silence, and the next
 * one waits in proportion to the wait so far, unless RESULTs of later
 * rounds say that its own RESULT was lost.
 */
static void
handle_ack(struct ag_window *w, struct ag_window_entry *e, uint64_t now)
{
	count(&w->st.acks, 1);
	if (e->unsent)
		return; /* an answer to a transmission before a redo */
	e->acked = true;
	e->strikes = 0;
	/* peers' FETCH recovery asks (fetch.h AG_HAVE_ACKED); a stalled chunk
	 * stays silent, its question to the peers open (judged_silent()) */
	if (e->state != AG_W_SILENT || !stalled(e, now))
		set_state(e, AG_W_ACKED);
	/* looked at every timer: later rounds' RESULTs would say ours was lost */
	e->ack_until = now + ack_wait(w, e, now);
	/* the answer to a QUERY (or to a DATA that went before one) lasts until the
	 * next QUERY's answer is due at least: while QUERYs are answered, they ask
	 * for the flow, and no DATA needs to go again (probe_allowed()) */
	if (e->t_query && e->t_sent <= e->t_query) {
		uint64_t q = next_answer_due(w);

		if (q > e->ack_until)
			e->ack_until = q;
	}
	e->deadline = now + rto(w, 0);
	e->res_mark = w->results;
	/* the probe is answered: its round waits for other ranks */
	if (e->probe) {
		e->probe = false;
		w->probe_out = w->probe_missed = false;
	}
}

/*
 * A NACK (E11): rounds after the chunk's completed while its own misses this
 * rank's DATA, which was lost (or the switch restarted and forgot it): it
 * goes again at once (retransmit_now()), not after the evidence of three
 * RESULTs that every rank would see. A chunk sent once goes at once
 * whenever the NACK comes: its DATA went before those of the later rounds,
 * on the same flow, so the NACK cannot have crossed it. A NACK that comes
 * within a configured timer of a retransmission may have crossed that one:
 * ignored (the switch NACKs again 2, 4, 8, ... rounds later).
 */
static void
handle_nack(struct ag_window *w, struct ag_window_entry *e, uint64_t now)
{
	count(&w->st.nacks, 1);
	if (e->unsent || (e->tries > 0 && now - e->t_sent < retx_floor(w)))
		return;
	if (e->acked) { /* the DATA it ACKed is gone: a restarted switch */
		e->acked = false;
		if (e->state == AG_W_ACKED)
			set_state(e, AG_W_INFLIGHT);
	}
	e->nacked = true;
	e->deadline = now;
}

/*
 * The lane of a RESULT of seq whose reason field says `lanes` (E11: the
 * switch's data lcores, 0 from a switch that does not say). A switch whose
 * lanes change (a restart) starts the window's lanes afresh.
 */
static unsigned int
lane_of(struct ag_window *w, uint32_t seq, uint16_t lanes)
{
	unsigned int l = lanes >= 1 && lanes <= AG_MAX_LANES ? lanes : 1;

	if (l != w->lanes) {
		w->lanes = l;
		memset(w->lane, 0, sizeof(w->lane));
	}
	return cais_lane(seq, w->conf.slots, l);
}

/*
 * The RESULT of a chunk in the window. Its round trip since the first DATA
 * is a sample for the timer when the chunk was never retransmitted nor
 * asked about (a QUERY's answer may be its RESULT lost and sent again), or
 * when the switch acknowledged one of its retransmissions or QUERYs: a DATA
 * of it was in and the round waited for other ranks, which is what the
 * timer has to learn on machines whose cores ranks share. (Karn's rule
 * alone would keep exactly those rounds out: when every chunk of a
 * collective waits for a late rank, every one is probed or burst, and the
 * timer would never learn the wait. Where the first DATA was lost the
 * sample is one timer long.)
 */
static void
handle_result(struct ag_window *w, struct ag_window_entry *e, const uint8_t *p,
	      const struct cais_fields *f, uint64_t now)
{
	void *owner = e->owner;
	uint32_t idx = e->idx;
	unsigned int l;

	if ((e->tries == 0 && !e->t_query) || e->acked)
		rtt_sample(w, now - e->t_first);
	w->results++;
	w->query_backoff = 0;
	l = lane_of(w, e->seq, f->reason);
	w->hints = f->reason != 0;
	/* WAIT: older rounds that hold this rank's DATA wait for others (loss_evident()) */
	if (!(f->flags & CAIS_F_WAIT)) {
		w->lane[l].cleared = true;
		w->lane[l].clear_seq = e->seq;
	}
	w->heard_result = now;
	w->heard_first = e->t_first;
	if (e->probe) { /* a loss, or the probe crossed its RESULT: ask the next */
		w->probe_chain = true;
		w->probe_out = w->probe_missed = false;
	}
	release(w, e);
	w->ev.result(w->ev.ctx, owner, idx, p + CAIS_HDR_LEN, f->count,
		     cais_payload_bytes(f->dtype, f->count), f->flags);
}

static void
handle_dgram(struct ag_window *w, const uint8_t *p, size_t len, const struct sockaddr_in *from,
	     uint64_t now)
{
	const struct cais_hdr *h = (const struct cais_hdr *)p;
	struct ag_window_entry *e;
	struct cais_fields f;

	if (from->sin_addr.s_addr != w->conf.sw.sin_addr.s_addr ||
	    from->sin_port != w->conf.sw.sin_port)
		return; /* not from the aggregator */
	if (cais_hdr_check(p, len) != CAIS_HDR_OK)
		return;
	cais_hdr_read(h, &f);
	if (f.tenant != w->conf.tenant || f.session != w->conf.session)
		return;
	w->heard = now;
	e = entry(w, f.seq);
	if (!holds(e, f.seq) || e->tensor != f.tensor ||
	    ntohs(h->slot) != cais_slot_field(f.seq, w->conf.slots))
		goto ignored;
	w->lane[cais_lane(f.seq, w->conf.slots, w->lanes)].answered = now;
	switch (f.type) {
	case CAIS_TYPE_REJECT:
		w->ev.reject(w->ev.ctx, e->owner, f.seq, f.reason, f.dtype);
		return;
	case CAIS_TYPE_ACK:
		if (f.dtype == e->dtype)
			handle_ack(w, e, now);
		return;
	case CAIS_TYPE_NACK:
		if (f.dtype == e->dtype)
			handle_nack(w, e, now);
		return;
	case CAIS_TYPE_RESULT:
		if (f.count == e->count && f.dtype == e->dtype &&
		    len >= CAIS_HDR_LEN + (size_t)e->len) {
			handle_result(w, e, p, &f, now);
			return;
		}
		break;
	default:
		break;
	}
ignored:
	count(&w->st.results_ignored, 1);
}

void
ag_window_rx(struct ag_window *w, uint64_t now)
{
	struct mmsghdr msgs[AG_BATCH];
	struct iovec iov[AG_BATCH];
	struct sockaddr_in from[AG_BATCH];

	for (int round = 0; round < 64; round++) {
		int n;

		for (int i = 0; i < AG_BATCH; i++) {
			iov[i].iov_base = w->rxbuf + (size_t)i * AG_DGRAM;
			iov[i].iov_len = AG_DGRAM;
			memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_name = &from[i];
			msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
		}
		n = recvmmsg(w->fd, msgs, AG_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++)
			handle_dgram(w, iov[i].iov_base, msgs[i].msg_len, &from[i], now);
		if (n < AG_BATCH)
			return;
	}
}

/* ---- transmit ---- */

struct tx_batch {
	unsigned int n;
	struct iovec iov[AG_BATCH][2]; /* chunk i: its header, its payload */
	struct ag_window_entry *e[AG_BATCH];
	bool fresh[AG_BATCH];
	/* the messages (batch_msgs()): message m carries the chunks before end[m] */
	struct mmsghdr msgs[AG_BATCH];
	unsigned int end[AG_BATCH];
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} seg[AG_BATCH];
};

static void
batch_add(struct tx_batch *b, struct ag_window_entry *e)
{
	unsigned int i = b->n++;

	b->iov[i][0].iov_base = &e->hdr;
	b->iov[i][0].iov_len = CAIS_HDR_LEN;
	b->iov[i][1].iov_base = (void *)e->payload;
	b->iov[i][1].iov_len = e->len;
	b->e[i] = e;
	b->fresh[i] = e->unsent;
}

/*
 * The batch's chunks from `from` on as messages: with gso, runs of
 * consecutive chunks of one length (the last may be shorter), each one
 * message whose iovecs are its chunks' header and payload in turn and whose
 * UDP_SEGMENT is that length, so that the kernel cuts it into the same
 * datagrams as one message each would be; without, one chunk a message.
 * @return the messages
 */
static unsigned int
batch_msgs(struct ag_window *w, struct tx_batch *b, unsigned int from, bool gso)
{
	const unsigned int most = gso ? AG_GSO_SEGS : 1;
	unsigned int n = 0;

	for (unsigned int i = from; i < b->n; n++) {
		size_t seg = CAIS_HDR_LEN + b->iov[i][1].iov_len, total = seg;
		struct msghdr *mh = &b->msgs[n].msg_hdr;
		unsigned int j = i + 1;

		while (j < b->n && j - i < most) {
			size_t len = CAIS_HDR_LEN + b->iov[j][1].iov_len;

			if (len > seg || total + len > AG_GSO_BYTES)
				break;
			total += len;
			j++;
			if (len < seg)
				break; /* a shorter chunk ends its run */
		}
		memset(mh, 0, sizeof(*mh));
		mh->msg_name = &w->conf.sw;
		mh->msg_namelen = sizeof(w->conf.sw);
		mh->msg_iov = b->iov[i];
		mh->msg_iovlen = 2 * (size_t)(j - i);
		if (j - i > 1) {
			struct cmsghdr *c;

			mh->msg_control = b->seg[n].buf;
			mh->msg_controllen = sizeof(b->seg[n].buf);
			c = CMSG_FIRSTHDR(mh);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
			memcpy(CMSG_DATA(c), &(uint16_t){(uint16_t)seg}, sizeof(uint16_t));
		}
		b->end[n] = j;
		i = j;
	}
	return n;
}

/* The errors of a GSO message that mean its path takes no GSO (an old
 * kernel, no checksum offload there, SO_NO_CHECK). */
static bool
gso_refused(int err)
{
	return err == EIO || err == EINVAL || err == EOPNOTSUPP || err == ENOPROTOOPT;
}

/*
 * sendmmsg() of the n messages batch_msgs() made of the chunks from `from`
 * on. Stops where the socket is full, and where it refuses GSO (*refused).
 * @return the chunk after the last whose message went or was refused for
 *         good (counted in send_errors: lost on the wire)
 */
static unsigned int
send_msgs(struct ag_window *w, struct tx_batch *b, unsigned int n, unsigned int from, bool *refused)
{
	unsigned int done = 0, sent = from; /* messages, and the chunks they carried */

	while (done < n) {
		int k = sendmmsg(w->fd, b->msgs + done, n - done, MSG_DONTWAIT);

		if (k < 0 && gso_refused(errno) && b->msgs[done].msg_hdr.msg_controllen != 0) {
			*refused = true;
			break;
		}
		if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS &&
		    errno != EINTR) {
			count(&w->st.send_errors, b->end[done] - sent);
			k = 1;
		}
		if (k <= 0)
			break;
		for (unsigned int m = done; m < done + (unsigned int)k; m++)
			if (b->msgs[m].msg_hdr.msg_controllen)
				count(&w->st.gso_sends, 1);
		done += (unsigned int)k;
		sent = b->end[done - 1];
	}
	return sent;
}

/*
 * Send a batch. What the socket refused for now stays due (a fresh chunk
 * stays unsent, a retransmission is undone); what it refused for good (a
 * firewall's EPERM) counts as lost on the wire, so the timers, the retries
 * and the peers decide, as for loss. sendmmsg() reports such an error only
 * for a call's first message: a later one refused ends the call short, and
 * the next call sends it again. Runs of chunks go as GSO messages until
 * the socket refuses one; then that run and the rest one chunk a message.
 * @return false when the socket is full
 */
static bool
batch_flush(struct ag_window *w, struct tx_batch *b, uint64_t now)
{
	unsigned int sent, fresh = 0, retx = 0;
	bool refused = false;

	sent = send_msgs(w, b, batch_msgs(w, b, 0, w->gso), 0, &refused);
	if (refused) {
		w->gso = false; /* for good: the rest, and every later batch, one message each */
		count(&w->st.gso_refused, 1);
		sent = send_msgs(w, b, batch_msgs(w, b, sent, false), sent, &refused);
	}
	for (unsigned int i = 0; i < b->n; i++) {
		struct ag_window_entry *e = b->e[i];

		if (i < sent) {
			e->res_mark = w->results;
			e->t_sent = now;
			if (b->fresh[i]) {
				if (!w->first_tx)
					w->first_tx = now;
				e->unsent = false;
				e->t_first = now;
				e->deadline = now + rto(w, 0);
				fresh++;
			} else {
				retx++;
			}
		} else if (!b->fresh[i]) {
			e->deadline = now;
			e->tries--;
			e->strikes--;
			atomic_fetch_sub_explicit(e->retx, 1, memory_order_relaxed);
		}
	}
	w->blocked = sent < b->n;
	count(&w->st.chunks_sent, fresh);
	count(&w->st.retransmissions, retx);
	b->n = 0;
	return !w->blocked;
}

/* The switch has sent this flow nothing for AG_QUIET_US since chunk e first went. */
static bool
quiet(const struct ag_window *w, const struct ag_window_entry *e, uint64_t now)
{
	uint64_t since = w->heard > e->t_first ? w->heard : e->t_first;

	return now - since >= (uint64_t)AG_QUIET_US * 1000;
}

/*
 * Has the switch gone silent for chunk e, due again? Its retransmissions
 * since the last ACK used up the retries, and either the switch has sent
 * this flow nothing for AG_QUIET_US (quiet(): it is gone, not just
 * descheduled) or twice the retries went unanswered (an ACK resets them).
 * Or the chunk is stalled (stalled()).
 */
static bool
judged_silent(const struct ag_window *w, const struct ag_window_entry *e, uint64_t now)
{
	if (stalled(e, now))
		return true;
	if (e->strikes < w->conf.retries)
		return false;
	return quiet(w, e, now) || e->strikes >= 2 * w->conf.retries;
}

/*
 * Is chunk e's DATA or RESULT probably lost? The latest RESULT without WAIT
 * of its lane (docs/PROTOCOL.md E11: the switch lcore that holds its round)
 * is of a round after its own: every rank's DATA of that round came
 * through, and no round of that lane before it that holds this rank's DATA
 * was still open, so its own round either completed (and its RESULT was
 * lost) or misses this rank's DATA. Another lane's RESULTs say nothing of
 * it: that lcore completes its rounds at its own pace. A RESULT with WAIT
 * says that such older rounds wait for another rank, which gets NACKs: no
 * evidence. (A switch without WAIT, the P4 profile, sends every RESULT
 * without it and names no lanes: any later round's RESULT is evidence, as
 * it was before E11.) And, against reordering, LOSS_EVIDENCE RESULTs came
 * since it was last sent (or ACKed). Checked on every pass, due or not
 * (ag_window_tx()), so a loss is repaired as soon as the RESULTs say so,
 * at most once per configured timer.
 */
#define LOSS_EVIDENCE 3

static bool
loss_evident(const struct ag_window *w, const struct ag_window_entry *e, uint64_t now)
{
	unsigned int l = cais_lane(e->seq, w->conf.slots, w->lanes);

	return w->results - e->res_mark >= LOSS_EVIDENCE && w->lane[l].cleared &&
	       cais_seq_before(e->seq, w->lane[l].clear_seq) && now - e->t_sent >= retx_floor(w);
}

/*
 * Whether chunk e may go as the probe. With a switch that answers QUERYs
 * (a session with loss_hints: its RESULTs name the lanes, E11), the QUERY
 * is the probe, 66 bytes where a probe is a whole DATA: before its ACK the
 * switch NACKed every older round of the lane, open there, that misses
 * this rank's DATA (E12), and a lost RESULT of a complete round is evidence
 * for loss_evident() once later rounds complete, or the RESULT of a QUERY
 * once the chunk is the newest left. (A DATA lost in a round that had not
 * begun, no rank's DATA in yet, is found the same ways once the others
 * come.) So a DATA goes as the probe only once the lane's last QUERY went
 * unanswered for a timer: lost, or a switch gone quiet. Where ranks reach
 * a collective at different times, as in a training step, probes were
 * most of the DATA sent twice, each only to be ACKed. Without QUERYs, a
 * probe may always go.
 */
static bool
probe_allowed(const struct ag_window *w, const struct ag_window_entry *e, uint64_t now)
{
	const struct ag_lane *l = &w->lane[cais_lane(e->seq, w->conf.slots, w->lanes)];

	if (w->conf.no_query || !w->hints)
		return true;
	return w->last_query && l->answered < w->last_query && now - w->last_query >= rto(w, 0);
}

/*
 * Whether a chunk whose timer ran out is sent again now. On evidence of a
 * loss, yes. Otherwise the round may only wait for a rank that is slow or
 * descheduled (cores shared with ranks and switch), so only one chunk goes,
 * a probe: the oldest due and not acknowledged, when no RESULT came for a
 * timer, at most one per timer. The probe's answer tells the cases apart:
 * an ACK (the DATA is in, its round waits for other ranks: the next probe,
 * a timer later, goes to the next chunk); its RESULT without an ACK (the
 * DATA or the RESULT was lost, or the probe crossed the round's RESULT on
 * its way: which, the host cannot tell), and then the next due chunk is a
 * probe at once (probe_chain), one a round trip, until an ACK or no chunk
 * due ends the chain; or nothing for a timer and then nothing for two
 * timers after one more probe (lost again; one timer is often only a switch
 * or host descheduled on shared cores), and then every chunk due goes for
 * two timers (burst_until).
 * A switch quiet for AG_QUIET_US since the chunk first went gets every chunk
 * again, as before: that is how a silent switch is judged (judged_silent());
 * a flow idle between collectives is not quiet.
 */
static bool
retransmit_now(struct ag_window *w, struct ag_window_entry *e, uint64_t now, bool *probed)
{
	if (e->nacked || loss_evident(w, e, now))
		return true;
	if ((int64_t)(now - w->burst_until) < 0 || quiet(w, e, now))
		return true;
	if (*probed || !probe_allowed(w, e, now))
		return false;
	if (!w->probe_chain && (now - w->heard_result < rto(w, 0) ||
				now - w->last_probe < rto(w, w->probe_missed ? 1 : 0)))
		return false;
	if (w->probe_out && w->probe_missed) { /* two probes without an answer: a loss */
		w->probe_out = w->probe_missed = false;
		w->burst_until = now + 2 * rto(w, 0);
		/* or a switch or ranks slower than the timer: until a RESULT
		 * gives a sample again, the timer doubles (Karn's backoff) */
		if (w->backoff < 6)
			w->backoff++;
		return true;
	}
	/* a probe; after one unanswered for a timer, one more, given twice the wait */
	w->probe_missed = w->probe_out;
	w->probe_out = true;
	w->probe_chain = false;
	*probed = true;
	e->probe = true;
	w->last_probe = now;
	return true;
}

/*
 * Whether an ACKed chunk whose timer ran out still waits: until its ACK's
 * wait ends (handle_ack()), unless RESULTs are evidence of a loss, or
 * unless it has just stalled (AG_STALL_US): then it goes once, and is
 * judged silent on the way (judged_silent()), which an ACK that every
 * answered QUERY renews would otherwise put off for good.
 */
static bool
ack_holds(const struct ag_window *w, const struct ag_window_entry *e, uint64_t now)
{
	if (loss_evident(w, e, now) || (e->state != AG_W_SILENT && stalled(e, now)))
		return false;
	return (int64_t)(now - e->ack_until) < 0;
}

/*
 * Whether chunks waiting for their first transmission must wait: a flow's
 * first DATA goes alone, and the others wait until the switch answers the
 * flow at all, or for a timer at most. The first packets to an address
 * wait in the kernel's neighbour queue while ARP resolves it, and that
 * queue holds only a few (sysctl net.ipv4.neigh.*.unres_qlen_bytes,
 * 208 KiB: a dozen DATA of 8 KiB): a window's burst would lose the rest,
 * and every lost chunk would wait a timer. The one chunk's RESULT (or ACK,
 * or REJECT) opens the window; so does its timer, answered or not (a host
 * that gets nothing back, a firewall, is not held to one chunk at a time),
 * and so does its leaving the window (its collective went another way).
 */
static bool
cold(const struct ag_window *w, uint64_t now)
{
	if (w->heard || !w->first_tx || now - w->first_tx >= rto(w, 0))
		return false;
	for (uint32_t seq = w->base; seq != w->next; seq++) {
		const struct ag_window_entry *e = entry(w, seq);

		if (holds(e, seq) && !e->unsent)
			return true;
	}
	return false;
}

/*
 * QUERY (docs/PROTOCOL.md E12). A rank that hears no RESULT for a while
 * cannot tell a round that waits for a slow rank from a DATA of its own
 * that was lost, and at a collective's end no later round completes to
 * NACK it (E11): only a timer would tell. So it asks: a header-only copy
 * of the newest chunk it sent, flagged QUERY, on the same flow behind that
 * DATA and every earlier one; on a switch of several lanes (E11), one for
 * the newest chunk of each lane (newest_per_lane()). The switch answers
 * from the round's state: an ACK (in, the round waits; and a NACK of each
 * older round of its lane that misses this rank's DATA), a NACK (not in:
 * lost, sent again at once), or the RESULT again (the round is complete:
 * the RESULT was lost). The first goes the flow's smoothed round trip (its
 * RESULTs' time, waits for other ranks included; the configured timer at
 * least) after the later of the last RESULT, the last QUERY and the newest
 * chunk's last send: sooner, most QUERYs would only cross their RESULT.
 * A few timers at most when that RESULT was for a chunk sent with the
 * newest one (its round's RESULT is due with it) or when the newest is its
 * collective's only chunk (query_due()).
 * The interval doubles per QUERY until a RESULT comes, six times and
 * AG_QUERY_IV_MAX_US (or the round trip) at most;
 * not while the socket holds datagrams not read yet (a thread descheduled
 * past the timer reads the RESULTs that came meanwhile first). A switch
 * that does not answer QUERYs (the P4 profile drops them as malformed)
 * leaves the timers of E6 to do it.
 */
static void
query(struct ag_window *w, uint64_t now)
{
	struct ag_window_entry *e = newest_sent(w), *ask[AG_QUERY_LANES];
	struct pollfd in = {.fd = w->fd, .events = POLLIN};
	unsigned int n, sent = 0;

	if (w->conf.no_query || !e || (int64_t)(now - query_due(w, e)) < 0)
		return;
	/* answers not read yet (the thread was descheduled): read them first */
	if (poll(&in, 1, 0) > 0)
		return;
	w->last_query = now;
	n = newest_per_lane(w, ask, AG_QUERY_LANES);
	for (; sent < n; sent++) {
		struct cais_hdr h = ask[sent]->hdr;

		h.flags = CAIS_F_QUERY;
		if (sendto(w->fd, &h, CAIS_HDR_LEN, MSG_DONTWAIT,
			   (const struct sockaddr *)&w->conf.sw,
			   sizeof(w->conf.sw)) != CAIS_HDR_LEN)
			break; /* the socket is full: asked again an interval later */
		ask[sent]->t_query = now;
	}
	if (!sent)
		return;
	if (w->query_backoff < 6)
		w->query_backoff++;
	count(&w->st.queries, sent);
}

void
ag_window_tx(struct ag_window *w, uint64_t now)
{
	struct tx_batch b;
	bool probed = false; /* this call sent its probe (retransmit_now()) */
	struct {
		void *owner;
		uint32_t seq;
	} silent[AG_BATCH];
	unsigned int n_silent = 0;
	bool wait_first;

	b.n = 0;
	advance_base(w);
	wait_first = cold(w, now);
	for (uint32_t seq = w->base; seq != w->next; seq++) {
		struct ag_window_entry *e = entry(w, seq);

		if (!holds(e, seq) ||
		    (!e->unsent && (int64_t)(now - e->deadline) < 0 && !loss_evident(w, e, now)))
			continue;
		if (e->unsent) {
			if (wait_first)
				continue;
			if (!w->heard && !w->first_tx)
				wait_first = true; /* the flow's first DATA goes alone (cold()) */
		}
		if (!e->unsent &&
		    (e->acked /* ACKED, or silent when stalled */
			 ? ack_holds(w, e, now)
			 : !retransmit_now(w, e, now, &probed))) {
			e->deadline = now + rto(w, 0); /* not now: look again in a timer */
			continue;
		}
		if (!e->unsent) {
			if (e->state != AG_W_SILENT && judged_silent(w, e, now)) {
				/* reported after the batch is out: the owner may forget
				 * chunks that the batch still points at */
				if (n_silent == AG_BATCH)
					continue; /* the next call reports it */
				set_state(e, AG_W_SILENT);
				silent[n_silent].owner = e->owner;
				silent[n_silent++].seq = seq;
			}
			e->hdr.flags |= CAIS_F_RETX;
			e->nacked = false;
			e->tries++;
			e->strikes++;
			atomic_fetch_add_explicit(e->retx, 1, memory_order_relaxed);
			e->deadline = now + rto(w, e->strikes);
		}
		batch_add(&b, e);
		if (b.n == AG_BATCH && !batch_flush(w, &b, now))
			break;
	}
	batch_flush(w, &b, now);
	query(w, now);
	for (unsigned int i = 0; i < n_silent; i++)
		if (ag_window_state(w, silent[i].seq) == AG_W_SILENT)
			w->ev.silent(w->ev.ctx, silent[i].owner, silent[i].seq);
}

uint64_t
ag_window_next_timer(const struct ag_window *w, uint64_t now)
{
	uint64_t t = UINT64_MAX;
	bool wait_first = cold(w, now);
	const struct ag_window_entry *newest = newest_sent(w);

	if (w->blocked)
		return now + 100000; /* a tenth of a millisecond: try the socket again */
	if (newest && !w->conf.no_query)
		t = query_due(w, newest);
	for (uint32_t seq = w->base; seq != w->next; seq++) {
		const struct ag_window_entry *e = entry(w, seq);

		if (!holds(e, seq))
			continue;
		if (e->unsent) {
			uint64_t open = w->first_tx + rto(w, 0); /* the answer, or this (cold()) */

			if (!wait_first)
				return now;
			if (open < t)
				t = open;
			continue;
		}
		if (e->deadline < t)
			t = e->deadline;
	}
	return t;
}

void
ag_window_stats(const struct ag_window *w, struct ag_window_stats *out)
{
	out->chunks_sent = __atomic_load_n(&w->st.chunks_sent, __ATOMIC_RELAXED);
	out->retransmissions = __atomic_load_n(&w->st.retransmissions, __ATOMIC_RELAXED);
	out->results_ignored = __atomic_load_n(&w->st.results_ignored, __ATOMIC_RELAXED);
	out->acks = __atomic_load_n(&w->st.acks, __ATOMIC_RELAXED);
	out->send_errors = __atomic_load_n(&w->st.send_errors, __ATOMIC_RELAXED);
	out->nacks = __atomic_load_n(&w->st.nacks, __ATOMIC_RELAXED);
	out->queries = __atomic_load_n(&w->st.queries, __ATOMIC_RELAXED);
	out->gso_sends = __atomic_load_n(&w->st.gso_sends, __ATOMIC_RELAXED);
	out->gso_refused = __atomic_load_n(&w->st.gso_refused, __ATOMIC_RELAXED);
}
