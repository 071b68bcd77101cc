/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent/window.c on a clock of the test's own: the window takes `now` as an
 * argument, so the retransmission rules (retransmit_now(): probes, bursts,
 * quiet) are checked to the nanosecond, with no scheduler in the way. The
 * switch is a UDP socket of the test that reads the window's DATA and
 * answers by hand (ACK, RESULT: the DATA's own header and payload sent
 * back).
 *
 * Timer floor 1 ms, and the same before the first RTT sample (but in
 * t_first_timer), which most tests never give (no chunk is answered
 * unambiguously), so the timer is 1 ms and twice that after one
 * retransmission.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cmocka.h>

#include <cais/proto.h>

#include "../../agent/window.h"

#define MS     1000000ull	   /* ns */
#define T0     (10ull * 1000 * MS) /* 10 s: the flow has heard nothing since 0 */
#define NCHUNK 4
#define ELEMS  4

struct fixture {
	int sw;			 /* the test's switch socket */
	struct sockaddr_in host; /* the window's address */
	struct ag_window *w;
	uint8_t payload[NCHUNK][4 * ELEMS];
	uint8_t last[NCHUNK][CAIS_HDR_LEN + 4 * ELEMS]; /* the last DATA of each seq */
	atomic_uint retx;
	unsigned int results, silent;
	unsigned int queries;	 /* QUERYs the window sent (E12) */
	uint32_t query_seq;	 /* ... the last one's seq */
	unsigned int query_seqs; /* ... the seqs asked about since the test last cleared it */
	unsigned int retx_seqs;	 /* the seqs retransmitted since the test last cleared it */
	uint16_t lanes;		 /* the reason field of the test switch's RESULTs (E11) */
	uint64_t silent_at;	 /* the clock at the first silent event */
	uint64_t now;
};

static void
on_result(void *ctx, void *owner, uint32_t idx, const uint8_t *payload, uint16_t count,
	  uint32_t len, uint8_t flags)
{
	struct fixture *f = ctx;

	(void)owner, (void)idx, (void)payload, (void)count, (void)len, (void)flags;
	f->results++;
}

static void
on_reject(void *ctx, void *owner, uint32_t seq, uint16_t reason, uint8_t dtype)
{
	(void)ctx, (void)owner, (void)seq, (void)reason, (void)dtype;
	fail_msg("no REJECT is sent in these tests");
}

static void
on_silent(void *ctx, void *owner, uint32_t seq)
{
	struct fixture *f = ctx;

	(void)owner, (void)seq;
	if (f->silent++ == 0)
		f->silent_at = f->now;
}

/* ag_window_conf.first_timeout_us of the next fixture (0: the floor), and no_query */
static uint32_t first_timeout_us;
static bool no_query;

static int
open_window(void **state)
{
	static struct fixture f;
	struct ag_window_conf conf = {.tenant = 1,
				      .session = 1,
				      .rank = 0,
				      .slots = 16,
				      .elems = ELEMS,
				      .retx_timeout_us = 1000,
				      .first_timeout_us = first_timeout_us,
				      .retries = 8,
				      .no_query = no_query};
	struct ag_window_events ev = {
	    .ctx = &f, .result = on_result, .reject = on_reject, .silent = on_silent};
	socklen_t l = sizeof(conf.sw);

	memset(&f, 0, sizeof(f));
	f.sw = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	assert_true(f.sw >= 0);
	conf.sw.sin_family = AF_INET;
	conf.sw.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(f.sw, (struct sockaddr *)&conf.sw, sizeof(conf.sw)), 0);
	assert_int_equal(getsockname(f.sw, (struct sockaddr *)&conf.sw, &l), 0);
	conf.local.sin_family = AF_INET;
	conf.local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(ag_window_open(&f.w, &conf, &ev), 0);
	l = sizeof(f.host);
	assert_int_equal(getsockname(ag_window_fd(f.w), (struct sockaddr *)&f.host, &l), 0);
	*state = &f;
	return 0;
}

static void answer_at(struct fixture *f, uint32_t seq, uint8_t type, double t_ms);
static void answer_flags_at(struct fixture *f, uint32_t seq, uint8_t type, uint8_t flags,
			    double t_ms);

/*
 * A window that has heard the switch: an ACK for a seq it does not hold,
 * 10 s before T0 (so not recent: the flow was idle since). Before the
 * switch answers anything, one chunk goes at a time (t_first_alone).
 */
static int
setup(void **state)
{
	struct fixture *f;
	struct cais_fields h;

	open_window(state);
	f = *state;
	cais_data_fields(&h, 1, 1, 1, 1000, 16, 0, 0);
	cais_hdr_build((struct cais_hdr *)f->last[0], &h);
	answer_at(f, 0, CAIS_TYPE_ACK, -9999.0);
	memset(f->last[0], 0, sizeof(f->last[0]));
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	ag_window_close(f->w);
	close(f->sw);
	first_timeout_us = 0;
	no_query = false;
	return 0;
}

/* The timers of chunks alone (they are what next_timer() gives): no QUERY. */
static int
setup_no_query(void **state)
{
	no_query = true;
	return setup(state);
}

static int
setup_first_timer(void **state)
{
	first_timeout_us = 5000;
	return setup_no_query(state);
}

/*
 * The DATA the window sent since the last call: how many were
 * retransmissions. QUERYs (header only: E12) are counted apart.
 */
static unsigned int
retransmitted(struct fixture *f, unsigned int *fresh)
{
	uint8_t buf[2048];
	unsigned int r = 0, n = 0;
	ssize_t len;

	while ((len = recv(f->sw, buf, sizeof(buf), 0)) > 0) {
		struct cais_fields h;

		assert_int_equal(cais_hdr_check(buf, (size_t)len), CAIS_HDR_OK);
		cais_hdr_read((const struct cais_hdr *)buf, &h);
		assert_int_equal(h.type, CAIS_TYPE_DATA);
		assert_true(h.seq < NCHUNK);
		if (h.flags & CAIS_F_QUERY) {
			/* only the flag, the chunk's fields, no payload */
			assert_int_equal(h.flags, CAIS_F_QUERY);
			assert_int_equal(h.count, ELEMS);
			assert_int_equal((size_t)len, CAIS_HDR_LEN);
			f->queries++;
			f->query_seq = h.seq;
			f->query_seqs |= 1u << h.seq;
			continue;
		}
		assert_int_equal((size_t)len, sizeof(f->last[0]));
		memcpy(f->last[h.seq], buf, (size_t)len);
		if (h.flags & CAIS_F_RETX) {
			r++;
			f->retx_seqs |= 1u << h.seq;
		} else {
			n++;
		}
	}
	assert_int_equal(errno, EAGAIN);
	if (fresh)
		*fresh = n;
	return r;
}

/* Send tx at time t (ms after T0) and count what went again. */
static unsigned int
tx_at(struct fixture *f, double t_ms)
{
	f->now = T0 + (uint64_t)(t_ms * MS);
	ag_window_tx(f->w, f->now);
	return retransmitted(f, NULL);
}

/* The switch answers seq (ACK, NACK or RESULT, with flags); the window has it to read. */
static void
answer_send(struct fixture *f, uint32_t seq, uint8_t type, uint8_t flags)
{
	uint8_t buf[sizeof(f->last[0])];
	struct cais_fields h;
	struct pollfd p = {.fd = ag_window_fd(f->w), .events = POLLIN};
	size_t len = sizeof(buf);

	memcpy(buf, f->last[seq], sizeof(buf));
	cais_hdr_read((const struct cais_hdr *)buf, &h);
	h.type = type;
	h.flags = flags;
	h.rank = CAIS_RANK_NONE;
	if (type == CAIS_TYPE_ACK || type == CAIS_TYPE_NACK) {
		h.count = 0;
		len = CAIS_HDR_LEN;
	}
	if (type == CAIS_TYPE_RESULT)
		h.reason = f->lanes;
	cais_hdr_build((struct cais_hdr *)buf, &h);
	assert_int_equal(
	    sendto(f->sw, buf, len, 0, (const struct sockaddr *)&f->host, sizeof(f->host)),
	    (ssize_t)len);
	assert_int_equal(poll(&p, 1, 1000), 1);
}

/* The switch answers seq (ACK, NACK or RESULT, with flags) at time t; the window reads it. */
static void
answer_flags_at(struct fixture *f, uint32_t seq, uint8_t type, uint8_t flags, double t_ms)
{
	answer_send(f, seq, type, flags);
	f->now = (uint64_t)((double)T0 + t_ms * MS);
	ag_window_rx(f->w, f->now);
}

static void
answer_at(struct fixture *f, uint32_t seq, uint8_t type, double t_ms)
{
	answer_flags_at(f, seq, type, 0, t_ms);
}

/* Chunk seq into the window, not sent yet. */
static void
queue_one(struct fixture *f, uint32_t seq)
{
	ag_window_send(f->w, seq, 1, CAIS_DT_FIXED32, ELEMS, f->payload[seq], f, seq, &f->retx);
}

/* NCHUNK chunks into the window, none sent yet. */
static void
queue_chunks(struct fixture *f)
{
	for (uint32_t s = 0; s < NCHUNK; s++)
		queue_one(f, s);
}

/* Chunk seq into the window and sent at t_ms (ms after T0), nothing sent again. */
static void
send_one_at(struct fixture *f, uint32_t seq, double t_ms)
{
	queue_one(f, seq);
	assert_int_equal(tx_at(f, t_ms), 0);
}

/* NCHUNK chunks at T0: want of them go (all; one on a flow never answered, t_first_*). */
static void
send_chunks_n(struct fixture *f, unsigned int want)
{
	unsigned int fresh = 0;

	queue_chunks(f);
	f->now = T0;
	ag_window_tx(f->w, f->now);
	assert_int_equal(retransmitted(f, &fresh), 0);
	assert_int_equal(fresh, want);
}

/* NCHUNK chunks at T0, all sent. */
static void
send_chunks(struct fixture *f)
{
	send_chunks_n(f, NCHUNK);
}

/*
 * NCHUNK chunks at T0, nothing comes back: a probe after a timer, one more
 * probe, twice the wait, then every due chunk (at 4.5 ms).
 */
static void
until_burst(struct fixture *f)
{
	send_chunks(f);
	assert_int_equal(tx_at(f, 0.5), 0);
	assert_int_equal(tx_at(f, 1.1), 1);	 /* the probe (not all four: not quiet) */
	assert_int_equal(tx_at(f, 2.2), 1);	 /* one more probe (not a burst) */
	assert_int_equal(tx_at(f, 3.3), 0);	 /* its wait is two timers */
	assert_int_equal(tx_at(f, 4.5), NCHUNK); /* nothing: every due chunk goes */
}

/*
 * A probe without an answer for a timer: one more probe, twice the wait,
 * then (still nothing) every due chunk. Starts 10 s after the flow last
 * heard the switch: a flow idle between collectives, not a quiet switch.
 */
static void
t_unanswered_probe(void **state)
{
	struct fixture *f = *state;

	until_burst(f);
	assert_int_equal(f->results, 0);
}

/* The same, and the first probe's ACK comes late: no burst. */
static void
t_late_ack(void **state)
{
	struct fixture *f = *state;

	send_chunks(f);
	assert_int_equal(tx_at(f, 1.1), 1);
	assert_int_equal(tx_at(f, 2.2), 1);
	answer_at(f, 0, CAIS_TYPE_ACK, 3.0); /* the first probe's, 1.9 ms late */
	assert_int_equal(ag_window_state(f->w, 0), AG_W_ACKED);
	assert_true(tx_at(f, 4.5) <= 1); /* at most the next probe */
	assert_true(tx_at(f, 5.7) <= 1);
}

/* A probe answered by its RESULT: the next due chunk probes at once, one at a time. */
static void
t_probe_chain(void **state)
{
	struct fixture *f = *state;

	send_chunks(f);
	assert_int_equal(tx_at(f, 1.1), 1); /* probe: seq 0 */
	answer_at(f, 0, CAIS_TYPE_RESULT, 1.2);
	assert_int_equal(f->results, 1);
	/* seqs 1-3 are due again at 2.1 (a RESULT 0.95 ms ago: no probe
	 * would go yet without the chain; a burst would send all three) */
	assert_int_equal(tx_at(f, 2.15), 1);
	answer_at(f, 1, CAIS_TYPE_RESULT, 2.2);
	assert_int_equal(tx_at(f, 3.2), 1);  /* seq 2, and seq 3 waits */
	answer_at(f, 2, CAIS_TYPE_ACK, 3.3); /* in, waiting for others: the chain ends */
	assert_int_equal(tx_at(f, 3.35), 0);
	assert_int_equal(f->results, 2);
}

/*
 * Two probes unanswered, a burst: until a RESULT gives an RTT sample the
 * timer doubles (Karn's backoff), so a switch or ranks slower than the
 * timer do not get a burst every few timers. The RESULT of a chunk whose
 * retransmission was ACKed is a sample (its round waited for others), and
 * it ends the backoff.
 */
static void
t_burst_backoff(void **state)
{
	struct fixture *f = *state;

	until_burst(f);
	/* seqs 2, 3: one retransmission and one burst, four timers (not two) */
	assert_int_equal(ag_window_next_timer(f->w, f->now), T0 + 8500000ull);
	answer_at(f, 2, CAIS_TYPE_ACK, 5.0);
	answer_at(f, 2, CAIS_TYPE_RESULT, 5.5); /* a sample of 5.5 ms */
	assert_int_equal(f->results, 1);
	assert_int_equal(tx_at(f, 6.6), 0);
	/* seq 3 is due, a RESULT came 3 ms ago: look again a timer later,
	 * 5.5 + 4 x 2.75 = 16.5 ms (were the backoff left: 20, the cap) */
	assert_int_equal(tx_at(f, 8.5), 0);
	assert_int_equal(tx_at(f, 12.5), 0); /* seqs 0 and 1 due, the same */
	assert_int_equal(ag_window_next_timer(f->w, f->now), T0 + 25000000ull);
}

/*
 * docs/PROTOCOL.md E11: RESULTs of three later rounds are evidence that a
 * chunk's DATA or RESULT was lost, and it goes again once its timer ran
 * out; not RESULTs with WAIT (its DATA is in, older rounds wait for
 * another rank), and then only the probe rules apply.
 */
static void
t_wait_evidence(void **state)
{
	struct fixture *f = *state;

	send_chunks(f);
	for (uint32_t s = 1; s < NCHUNK; s++)
		answer_flags_at(f, s, CAIS_TYPE_RESULT, CAIS_F_WAIT, 0.5);
	assert_int_equal(f->results, NCHUNK - 1);
	/* seq 0 due, RESULTs 0.6 ms ago: no probe, and no evidence */
	assert_int_equal(tx_at(f, 1.1), 0);
	/* looked at again a timer later (about 1 ms: the RESULTs' samples),
	 * and then it goes, as the probe: one chunk */
	assert_int_equal(tx_at(f, 3.0), 1);
}

/* The same RESULTs without WAIT: evidence, seq 0 goes as soon as its timer ran out. */
static void
t_evidence(void **state)
{
	struct fixture *f = *state;

	send_chunks(f);
	for (uint32_t s = 1; s < NCHUNK; s++)
		answer_at(f, s, CAIS_TYPE_RESULT, 0.5);
	assert_int_equal(tx_at(f, 0.9), 0); /* sent 0.9 ms ago: within the timer */
	assert_int_equal(tx_at(f, 1.1), 1);
}

/*
 * NCHUNK chunks at T0 to a switch whose RESULTs name `lanes` (E11); at
 * 0.5 ms the RESULTs of seqs a and b come without WAIT, and of seq waited
 * with WAIT: seq 0's is missing.
 */
static void
lane_results(struct fixture *f, uint16_t lanes, uint32_t a, uint32_t b, uint32_t waited)
{
	f->lanes = lanes;
	send_chunks(f);
	answer_at(f, a, CAIS_TYPE_RESULT, 0.5);
	answer_at(f, b, CAIS_TYPE_RESULT, 0.5);
	answer_flags_at(f, waited, CAIS_TYPE_RESULT, CAIS_F_WAIT, 0.5);
	assert_int_equal(f->results, NCHUNK - 1);
}

/*
 * Lanes (E11): a switch of two lcores, seq 0 on lane 0. RESULTs of lane 1
 * without WAIT say nothing of it: no evidence, only the probe a timer
 * later (QUERYs off: with them, the QUERY is the probe, t_query_is_probe).
 * With one lane (a switch that names none) the same RESULTs are evidence,
 * and so is, with two, a RESULT of lane 0 without WAIT.
 */
static void
t_lanes(void **state)
{
	struct fixture *f = *state;

	lane_results(f, 2, 1, 3, 2);
	assert_int_equal(tx_at(f, 1.1), 0);
	assert_int_equal(tx_at(f, 3.0), 1);
}

static void
t_one_lane(void **state)
{
	struct fixture *f = *state;

	lane_results(f, 0, 1, 3, 2);
	assert_int_equal(tx_at(f, 1.1), 1);
}

static void
t_lanes_evidence(void **state)
{
	struct fixture *f = *state;

	lane_results(f, 2, 1, 2, 3);
	assert_int_equal(tx_at(f, 0.9), 0); /* sent 0.9 ms ago: within the timer */
	assert_int_equal(tx_at(f, 1.1), 1);
}

/*
 * A switch whose lanes change (restarted with 4 lcores): what lane 0 said
 * with 2 is forgotten; with 4, seqs 1 and 3 are lanes 1 and 3. (QUERYs
 * off, as in t_lanes.)
 */
static void
t_lanes_change(void **state)
{
	struct fixture *f = *state;

	f->lanes = 2;
	send_chunks(f);
	answer_at(f, 2, CAIS_TYPE_RESULT, 0.5);
	f->lanes = 4;
	answer_at(f, 1, CAIS_TYPE_RESULT, 0.5);
	answer_at(f, 3, CAIS_TYPE_RESULT, 0.5);
	assert_int_equal(tx_at(f, 1.1), 0);
	assert_int_equal(tx_at(f, 3.0), 1);
}

/*
 * A NACK (E11): the chunk's DATA is missing from its round while later ones
 * completed: it goes again at once, beside the one probe of a timer, and a
 * chunk sent once goes at once however soon the NACK comes; a NACK within a
 * timer of the chunk's last retransmission may have crossed it, and is
 * ignored.
 */
static void
t_nack(void **state)
{
	struct fixture *f = *state;

	send_chunks(f);
	answer_at(f, 3, CAIS_TYPE_NACK, 0.1); /* sent once, 0.1 ms ago */
	assert_int_equal(tx_at(f, 0.1), 1);
	assert_memory_equal(f->last[3] + 12, "\0\0\0\3", 4);
	answer_at(f, 3, CAIS_TYPE_NACK, 0.2); /* 0.1 ms after its retransmission */
	assert_int_equal(tx_at(f, 0.2), 0);
	assert_int_equal(tx_at(f, 1.1), 1); /* the probe: seq 0 */
	assert_int_equal(tx_at(f, 1.2), 0); /* one probe a timer */
	answer_at(f, 2, CAIS_TYPE_NACK, 1.3);
	assert_int_equal(tx_at(f, 1.3), 1);
	assert_memory_equal(f->last[2] + 12, "\0\0\0\2", 4); /* seq 2 went */
	answer_at(f, 0, CAIS_TYPE_NACK, 1.4);		     /* 0.3 ms after seq 0's probe */
	assert_int_equal(tx_at(f, 1.4), 0);
	answer_at(f, 1, CAIS_TYPE_NACK, 1.5);
	assert_int_equal(tx_at(f, 1.5), 1);
	assert_int_equal(atomic_load(&f->retx), 4);
}

#define ANY_SEQ UINT32_MAX

/* tx at time t (ms): the window has sent n QUERYs in all, the last one of seq (or ANY_SEQ). */
static void
queries_at(struct fixture *f, double t_ms, unsigned int n, uint32_t seq)
{
	tx_at(f, t_ms);
	assert_int_equal(f->queries, n);
	if (seq != ANY_SEQ)
		assert_int_equal(f->query_seq, seq);
}

/*
 * QUERY (E12): a timer (1 ms) without a RESULT since the newest chunk went,
 * the window asks about that chunk; the interval doubles per QUERY until a
 * RESULT, after which the newest chunk still held is asked about a timer
 * later. A NACK sends it again at once, an ACK marks it ACKED.
 */
static void
t_query(void **state)
{
	struct fixture *f = *state;
	struct ag_window_stats st;

	send_chunks(f);
	queries_at(f, 0.9, 0, ANY_SEQ);
	queries_at(f, 1.0, 1, 3);
	queries_at(f, 2.9, 1, ANY_SEQ); /* the next after two timers */
	queries_at(f, 3.0, 2, 3);
	answer_at(f, 3, CAIS_TYPE_RESULT, 3.5); /* back to one timer, after the RESULT */
	queries_at(f, 4.4, 2, ANY_SEQ);
	queries_at(f, 4.5, 3, 2); /* the newest still in flight */
	f->retx_seqs = 0;
	answer_at(f, 2, CAIS_TYPE_NACK, 4.6); /* not in: lost */
	tx_at(f, 4.6);
	assert_true(f->retx_seqs & (1u << 2));
	answer_at(f, 1, CAIS_TYPE_ACK, 4.7);
	assert_int_equal(ag_window_state(f->w, 1), AG_W_ACKED);
	ag_window_stats(f->w, &st);
	assert_int_equal(st.queries, 3);
}

/*
 * QUERY on a switch of two lanes (E11): one for the newest chunk of each
 * lane, as each lcore answers for its own rounds only; the next pass, an
 * interval later, asks the same two.
 */
static void
t_query_lanes(void **state)
{
	struct fixture *f = *state;

	f->lanes = 2;
	send_chunks(f);
	answer_flags_at(f, 0, CAIS_TYPE_RESULT, CAIS_F_WAIT, 0.5); /* a 0.5 ms sample */
	queries_at(f, 1.4, 0, ANY_SEQ);				   /* a timer after the RESULT */
	queries_at(f, 1.5, 2, ANY_SEQ);
	assert_int_equal(f->query_seqs, 1u << 2 | 1u << 3);
	f->query_seqs = 0;
	queries_at(f, 3.4, 2, ANY_SEQ); /* then two timers */
	queries_at(f, 3.5, 4, ANY_SEQ);
	assert_int_equal(f->query_seqs, 1u << 2 | 1u << 3);
}

/*
 * With a switch that answers QUERYs (E12, a session with loss_hints), the
 * QUERY is the probe (probe_allowed()): while the QUERYs of a lane are
 * answered no DATA goes again (a rank that waits for a late one sends
 * nothing twice), and a NACK still sends its chunk at once. f->lanes: the
 * switch's lanes (0: a session without loss_hints, whose QUERYs NACK
 * nothing older). RESULT of seq 0 at 0.5 ms (a 0.5 ms sample: the timer
 * 1.5 ms, the QUERY's interval 1 ms); QUERY at 1.5 ms, its ACK at 1.6 ms.
 */
static void
query_acked(struct fixture *f, uint16_t lanes)
{
	f->lanes = lanes;
	send_chunks(f);
	answer_at(f, 0, CAIS_TYPE_RESULT, 0.5);
	assert_int_equal(tx_at(f, 1.0), 0); /* seqs 1-3 due: a RESULT 0.5 ms ago */
	queries_at(f, 1.5, lanes == 2 ? 2 : 1, lanes == 2 ? ANY_SEQ : 3);
	answer_at(f, 3, CAIS_TYPE_ACK, 1.6);
	f->retx_seqs = 0;
}

/*
 * tx at time t (ms), as a switch that ACKs every QUERY about seq 3 0.1 ms
 * after it came. @return the DATA sent again
 */
static unsigned int
tx_query_acked(struct fixture *f, double t_ms)
{
	unsigned int asked = f->queries, r = tx_at(f, t_ms);

	if (f->queries != asked)
		answer_at(f, 3, CAIS_TYPE_ACK, t_ms + 0.1);
	return r;
}

static void
t_query_is_probe(void **state)
{
	struct fixture *f = *state;

	query_acked(f, 1);
	assert_int_equal(tx_at(f, 2.5), 0);
	assert_int_equal(tx_at(f, 3.0), 0);
	queries_at(f, 3.5, 2, 3); /* the interval doubled */
	answer_at(f, 3, CAIS_TYPE_ACK, 3.6);
	/* the switch ACKs every QUERY: nothing goes again, seq 3 not either
	 * (its ACK lasts until the next QUERY's answer is due) */
	for (double t = 4.0; t < 40.0; t += 0.5)
		assert_int_equal(tx_query_acked(f, t), 0);
	assert_int_equal(f->queries, 5);       /* at 1.5, 3.5, 7.5, 15.5, 31.5 */
	answer_at(f, 2, CAIS_TYPE_NACK, 40.0); /* seq 2 was lost after all */
	assert_int_equal(tx_at(f, 40.0), 1);
	assert_int_equal(f->retx_seqs, 1u << 2);
	for (uint32_t s = 1; s < NCHUNK; s++)
		answer_at(f, s, CAIS_TYPE_RESULT, 40.5);
	assert_int_equal(f->results, NCHUNK);
	assert_int_equal(atomic_load(&f->retx), 1);
}

/*
 * The ACK of the QUERY at 1.5 ms (seq 3) lasts until the next QUERY's
 * answer is due, 3.5 + 1.5 ms, not only twice its wait (4.8 ms); that QUERY
 * unanswered for a timer, seq 3 goes again and seq 1 is the probe. (Looked
 * at 3.4 ms, every chunk is due again a timer later, at 4.9 ms.)
 */
static void
t_query_ack_lasts(void **state)
{
	struct fixture *f = *state;

	query_acked(f, 1);
	assert_int_equal(tx_at(f, 3.4), 0);
	queries_at(f, 3.5, 2, 3);
	assert_int_equal(tx_at(f, 4.9), 0);
	assert_int_equal(tx_at(f, 6.4), 2);
	assert_int_equal(f->retx_seqs, 1u << 1 | 1u << 3);
}

/*
 * QUERYs answered with ACKs and no RESULT ever (a switch that lost the
 * rounds between the ranks' contributions, a rank gone): no probe goes,
 * yet the ACKed chunk is silent once it stalled, AG_STALL_US after its
 * first DATA (to the timer), so that the peers are asked (fetch.h).
 */
static void
t_query_stall(void **state)
{
	struct fixture *f = *state;

	query_acked(f, 1);
	for (double t = 2.0; t < 1100.0 && !f->silent; t += 0.5)
		tx_query_acked(f, t);
	assert_true(f->silent >= 1);
	assert_true(f->silent_at >= T0 + (uint64_t)AG_STALL_US * 1000);
	assert_true(f->silent_at <= T0 + (uint64_t)AG_STALL_US * 1000 + 5 * MS);
}

/* Without loss_hints the switch NACKs nothing older: the probe goes, seq 1. */
static void
t_query_probe_hints(void **state)
{
	struct fixture *f = *state;

	query_acked(f, 0);
	assert_int_equal(tx_at(f, 2.5), 1);
	assert_int_equal(f->retx_seqs, 1u << 1);
}

/*
 * Two lanes: the QUERYs of 1.5 ms ask about seqs 2 (lane 0) and 3 (lane 1),
 * and only seq 3's is answered: lane 0's probe, seq 2, goes once its QUERY
 * went unanswered for a timer (at 4 ms, seq 2 due again), lane 1's not.
 */
static void
t_query_probe_lane(void **state)
{
	struct fixture *f = *state;

	query_acked(f, 2);
	assert_int_equal(tx_at(f, 2.5), 0);
	assert_int_equal(tx_at(f, 4.0), 1);
	assert_int_equal(f->retx_seqs, 1u << 2);
}

/*
 * Once a RESULT gave an RTT sample longer than the timer, the QUERY waits
 * that long: a round trip without a RESULT is no news. (seq 0's RESULT
 * after an ACK is a sample of 3 ms.)
 */
static void
t_query_srtt(void **state)
{
	struct fixture *f = *state;

	send_one_at(f, 0, 0);
	answer_at(f, 0, CAIS_TYPE_ACK, 0.5); /* its timer: 1.5 ms */
	queries_at(f, 1.0, 1, ANY_SEQ);
	answer_at(f, 0, CAIS_TYPE_RESULT, 3.0);
	send_one_at(f, 1, 3.0);
	queries_at(f, 5.9, 1, ANY_SEQ);
	queries_at(f, 6.0, 2, 1);
}

/*
 * A RESULT of a chunk whose first DATA went with the newest one's: the ranks'
 * DATA of that send are in (each sends in seq order), so the newest's RESULT
 * is due with it, and the QUERY goes AG_QUERY_SOON_TIMERS timers (4 ms)
 * after that RESULT, not the round trip after it (10 ms from seq 0, with a
 * wait for others in it). A RESULT of a chunk sent before the newest one
 * says nothing of its round: the round trip again. seq 0's RESULT at
 * 10 ms: srtt 10 ms, 9 ms after seq 1's 2 ms.
 */
static void
t_query_sibling(void **state)
{
	struct fixture *f = *state;
	const double sib = AG_QUERY_SOON_TIMERS * 1.0; /* ms */

	_Static_assert(AG_QUERY_SOON_TIMERS < 9, "shorter than the 9 ms round trip below");

	send_one_at(f, 0, 0);
	answer_at(f, 0, CAIS_TYPE_RESULT, 10.0);
	queue_one(f, 1);
	queue_one(f, 2);
	assert_int_equal(tx_at(f, 10.0), 0); /* 1 and 2 in one send */
	answer_at(f, 1, CAIS_TYPE_RESULT, 12.0);
	queries_at(f, 12.0 + sib - 0.1, 0, ANY_SEQ);
	queries_at(f, 12.0 + sib, 1, 2); /* after seq 1's RESULT, not 9 ms */
	send_one_at(f, 3, 12.5 + sib);
	answer_at(f, 2, CAIS_TYPE_RESULT, 13.0 + sib); /* seq 3 went after seq 2 */
	queries_at(f, 21.9 + sib, 1, ANY_SEQ);
	queries_at(f, 22.0 + sib, 2, 3); /* the round trip, 9 ms, after that RESULT */
}

/*
 * A collective's only chunk (its first, alone in the window) is asked about
 * AG_QUERY_SOON_TIMERS timers (4 ms) after it went, then at twice that
 * interval, not the round trip (10 ms, learned from seq 0's RESULT): no
 * other RESULT will say when its round is due. A chunk alone that is not
 * its collective's first (seq 1), and a collective's first chunk sent while
 * an older one is held (seq 3), wait the round trip.
 */
static void
t_query_lone(void **state)
{
	struct fixture *f = *state;
	const double soon = AG_QUERY_SOON_TIMERS * 1.0; /* ms */

	_Static_assert(AG_QUERY_SOON_TIMERS * 3 < 20, "three intervals inside the two round trips");

	send_one_at(f, 0, 0);
	answer_at(f, 0, CAIS_TYPE_RESULT, 10.0);
	send_one_at(f, 1, 10.0);
	queries_at(f, 19.9, 0, ANY_SEQ);
	queries_at(f, 20.0, 1, 1); /* idx 1: the round trip */
	answer_at(f, 1, CAIS_TYPE_RESULT, 20.5);
	ag_window_send(f->w, 2, 1, CAIS_DT_FIXED32, ELEMS, f->payload[2], f, 0, &f->retx);
	assert_int_equal(tx_at(f, 21.0), 0);
	queries_at(f, 21.0 + soon - 0.1, 1, ANY_SEQ);
	queries_at(f, 21.0 + soon, 2, 2);
	answer_at(f, 2, CAIS_TYPE_ACK, 21.1 + soon);
	queries_at(f, 21.0 + 3 * soon - 0.1, 2, ANY_SEQ);
	queries_at(f, 21.0 + 3 * soon, 3, 2); /* twice the interval */
	/* seq 3, a collective's only chunk, behind seq 2 (held): the round
	 * trip, doubled twice since the last RESULT, 40 ms after its send,
	 * which its timer sends again first (at 63.5 ms) */
	ag_window_send(f->w, 3, 1, CAIS_DT_FIXED32, ELEMS, f->payload[3], f, 0, &f->retx);
	tx_at(f, 21.5 + 3 * soon);
	queries_at(f, 61.5, 3, ANY_SEQ); /* alone, it would go at 33.5 + 16 ms */
}

/*
 * A round that waits long for the others (every QUERY ACKed): the interval
 * doubles from the 1 ms timer, 2, 4, ... 32 ms, then stays at
 * AG_QUERY_IV_MAX_US (50 ms), not 64: a RESULT lost after the wait is asked
 * for within 50 ms.
 */
static void
t_query_capped(void **state)
{
	struct fixture *f = *state;
	double at[12];
	unsigned int n = 0;

	query_acked(f, 1); /* the first QUERY at 1.5 ms */
	at[n++] = 1.5;
	for (double t = 2.0; t < 300.0 && n < 12; t += 0.5) {
		unsigned int before = f->queries;

		tx_query_acked(f, t);
		if (f->queries != before)
			at[n++] = t;
	}
	assert_int_equal(n, 10); /* 1.5, 3.5, 7.5, 15.5, 31.5, 63.5, 113.5, ... 263.5 */
	for (unsigned int i = 1; i < n; i++) {
		double want = i < 6 ? (double)(1u << i) : AG_QUERY_IV_MAX_US / 1000.0;

		print_message("QUERY %u at %.1f ms, %.1f after the last\n", i, at[i],
			      at[i] - at[i - 1]);
		assert_true(at[i] - at[i - 1] >= want && at[i] - at[i - 1] <= want + 0.5);
	}
}

/* No QUERY while answers wait in the socket: they are read first. */
static void
t_query_reads_first(void **state)
{
	struct fixture *f = *state;

	send_chunks(f);
	answer_send(f, 0, CAIS_TYPE_ACK, 0); /* not read yet */
	queries_at(f, 1.0, 0, ANY_SEQ);
	f->now = T0 + MS;
	ag_window_rx(f->w, f->now);
	queries_at(f, 1.0, 1, 3);
}

/* The poll loop's timer covers the QUERY: an ACKed chunk looks again after the floor. */
static void
t_query_timer(void **state)
{
	struct fixture *f = *state;

	send_one_at(f, 0, 0);
	answer_at(f, 0, CAIS_TYPE_ACK, 0.2); /* its timer: 1.2 ms */
	assert_int_equal(ag_window_next_timer(f->w, f->now), T0 + MS);
}

/*
 * Before the switch has answered the flow at all, one chunk is in flight:
 * the others would wait in the kernel's neighbour queue while ARP resolves
 * the switch's address, and most would be lost. Its RESULT opens the
 * window; a chunk forgotten (its collective went elsewhere) lets the next go.
 */
static void
t_first_alone(void **state)
{
	struct fixture *f = *state;
	unsigned int fresh = 0;

	send_chunks_n(f, 1);
	assert_int_equal(ag_window_state(f->w, 0), AG_W_INFLIGHT);
	assert_int_equal(ag_window_next_timer(f->w, f->now), T0 + MS); /* not now: no spin */
	assert_int_equal(tx_at(f, 0.5), 0);
	answer_at(f, 0, CAIS_TYPE_RESULT, 0.6);
	f->now = T0 + 600000;
	ag_window_tx(f->w, f->now);
	assert_int_equal(retransmitted(f, &fresh), 0);
	assert_int_equal(fresh, NCHUNK - 1);
}

/* The switch never answers: after the lone chunk's timer the others go (and its probe). */
static void
t_first_unanswered(void **state)
{
	struct fixture *f = *state;
	unsigned int fresh = 0;

	send_chunks_n(f, 1);
	f->now = T0 + 1100000;
	ag_window_tx(f->w, f->now);
	assert_int_equal(retransmitted(f, &fresh), 1); /* seq 0's probe */
	assert_int_equal(fresh, NCHUNK - 1);
}

static void
t_first_forgotten(void **state)
{
	struct fixture *f = *state;
	unsigned int fresh = 0;

	ag_window_send(f->w, 0, 1, CAIS_DT_FIXED32, ELEMS, f->payload[0], f, 0, &f->retx);
	ag_window_send(f->w, 1, 1, CAIS_DT_FIXED32, ELEMS, f->payload[1], f + 1, 1, &f->retx);
	f->now = T0;
	ag_window_tx(f->w, f->now);
	assert_int_equal(retransmitted(f, &fresh), 0);
	assert_int_equal(fresh, 1);
	ag_window_forget(f->w, f); /* seq 0's owner */
	ag_window_tx(f->w, f->now);
	assert_int_equal(retransmitted(f, &fresh), 0);
	assert_int_equal(fresh, 1);
	assert_int_equal(ag_window_state(f->w, 1), AG_W_INFLIGHT);
}

/* Before the first RTT sample the timer is the first timer (5 ms), not the floor. */
static void
t_first_timer(void **state)
{
	struct fixture *f = *state;

	send_chunks(f);
	assert_int_equal(tx_at(f, 1.1), 0);
	assert_int_equal(tx_at(f, 4.9), 0);
	assert_int_equal(tx_at(f, 5.1), 1);	/* the probe */
	answer_at(f, 1, CAIS_TYPE_RESULT, 5.2); /* never retransmitted: a sample */
	/* seqs 2, 3 due at 10.1 (a timer after the probe): a RESULT 5 ms ago,
	 * and the timer is 5.2 + 4 x 2.6 = 15.6 ms now: no probe */
	assert_int_equal(tx_at(f, 10.2), 0);
	/* seq 0's, from its probe: twice the first timer */
	assert_int_equal(ag_window_next_timer(f->w, f->now), T0 + 15100000ull);
}

/*
 * Nothing ever comes back: silent once twice the retries went unanswered
 * (judged_silent(); 16 at a backoff capped at 20 ms: about 0.3 s), not at
 * the first timers, and within AG_QUIET_US at the latest.
 */
static void
t_silent(void **state)
{
	struct fixture *f = *state;
	unsigned int total = 0;

	send_chunks(f);
	for (double t = 0.25; t < 3000 && f->silent == 0; t += 0.25)
		total += tx_at(f, t);
	assert_true(f->silent > 0);
	print_message("silent after %.1f ms, %u retransmissions\n",
		      (double)(f->silent_at - T0) / MS, total);
	assert_true(f->silent_at - T0 >= 100 * MS);
	assert_true(f->silent_at - T0 < (uint64_t)AG_QUIET_US * 1000 + 100 * MS);
	assert_true(total >= 2 * 8);
}

/*
 * UDP GSO (window.h AG_GSO_*): the four chunks of one length leave as one
 * message, and the test's socket (no UDP_GRO) still reads four datagrams,
 * each exactly one chunk (send_chunks() checks the lengths).
 */
static void
t_gso(void **state)
{
	struct fixture *f = *state;
	struct ag_window_stats st;

	send_chunks(f);
	ag_window_stats(f->w, &st);
	assert_int_equal(st.gso_sends, 1);
	assert_int_equal(st.gso_refused, 0);
	assert_int_equal(st.send_errors, 0);
	assert_int_equal(tx_at(f, 1.1), 1); /* a probe: alone, no GSO */
	assert_int_equal(tx_at(f, 2.2), 1);
	assert_int_equal(tx_at(f, 4.5), NCHUNK); /* a burst: one message again */
	ag_window_stats(f->w, &st);
	assert_int_equal(st.gso_sends, 2);
}

/* A shorter chunk ends its run: 0, 1 and the half-length 2 are one message, 3 goes alone. */
static void
t_gso_runs(void **state)
{
	struct fixture *f = *state;
	const uint16_t counts[NCHUNK] = {ELEMS, ELEMS, ELEMS / 2, ELEMS};
	struct ag_window_stats st;
	uint8_t buf[2048];

	for (uint32_t q = 0; q < NCHUNK; q++)
		ag_window_send(f->w, q, 1, CAIS_DT_FIXED32, counts[q], f->payload[q], f, q,
			       &f->retx);
	ag_window_tx(f->w, T0);
	for (uint32_t q = 0; q < NCHUNK; q++) {
		ssize_t len = recv(f->sw, buf, sizeof(buf), 0);
		struct cais_fields h;

		assert_int_equal(len, (ssize_t)(CAIS_HDR_LEN + 4u * counts[q]));
		assert_int_equal(cais_hdr_check(buf, (size_t)len), CAIS_HDR_OK);
		cais_hdr_read((const struct cais_hdr *)buf, &h);
		assert_int_equal(h.seq, q);
		assert_int_equal(h.count, counts[q]);
		assert_memory_equal(buf + CAIS_HDR_LEN, f->payload[q], 4u * counts[q]);
	}
	assert_int_equal(recv(f->sw, buf, sizeof(buf), 0), -1);
	ag_window_stats(f->w, &st);
	assert_int_equal(st.gso_sends, 1);
}

/*
 * A socket that refuses GSO (here SO_NO_CHECK: the kernel takes GSO only
 * with UDP checksums; an old kernel or a path without checksum offload
 * refuses it the same way): the window sends each chunk on its own from
 * then on, and nothing is lost or counted as a send error.
 */
static void
t_gso_refused(void **state)
{
	struct fixture *f = *state;
	struct ag_window_stats st;
	int one = 1;

	assert_int_equal(setsockopt(ag_window_fd(f->w), SOL_SOCKET, SO_NO_CHECK, &one, sizeof(one)),
			 0);
	send_chunks(f);
	ag_window_stats(f->w, &st);
	assert_int_equal(st.gso_refused, 1);
	assert_int_equal(st.gso_sends, 0);
	assert_int_equal(st.send_errors, 0);
	assert_int_equal(tx_at(f, 1.1), 1);
	assert_int_equal(tx_at(f, 2.2), 1);
	assert_int_equal(tx_at(f, 4.5), NCHUNK);
	ag_window_stats(f->w, &st);
	assert_int_equal(st.gso_refused, 1); /* not tried again */
}

/* CAIS_UDP_GSO=0 in the environment: one message per chunk from the start. */
static int
setup_no_gso(void **state)
{
	int rc;

	setenv(AG_GSO_ENV, "0", 1);
	rc = setup(state);
	unsetenv(AG_GSO_ENV);
	return rc;
}

static void
t_gso_off(void **state)
{
	struct fixture *f = *state;
	struct ag_window_stats st;

	send_chunks(f);
	ag_window_stats(f->w, &st);
	assert_int_equal(st.gso_sends, 0);
	assert_int_equal(st.gso_refused, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_unanswered_probe, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_late_ack, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_probe_chain, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_silent, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_burst_backoff, setup_no_query, teardown),
	    cmocka_unit_test_setup_teardown(t_wait_evidence, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_evidence, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_lanes, setup_no_query, teardown),
	    cmocka_unit_test_setup_teardown(t_lanes_evidence, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_lanes_change, setup_no_query, teardown),
	    cmocka_unit_test_setup_teardown(t_one_lane, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_nack, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_timer, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_reads_first, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_lanes, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_is_probe, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_ack_lasts, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_stall, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_probe_hints, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_probe_lane, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_srtt, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_capped, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_sibling, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_lone, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_first_alone, open_window, teardown),
	    cmocka_unit_test_setup_teardown(t_first_unanswered, open_window, teardown),
	    cmocka_unit_test_setup_teardown(t_first_forgotten, open_window, teardown),
	    cmocka_unit_test_setup_teardown(t_first_timer, setup_first_timer, teardown),
	    cmocka_unit_test_setup_teardown(t_gso, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_gso_runs, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_gso_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_gso_off, setup_no_gso, teardown),
	};

	unsetenv(AG_GSO_ENV); /* GSO as by default; t_gso_off sets it */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
