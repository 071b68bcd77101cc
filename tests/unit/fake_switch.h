/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A model of the switch for agent tests: one UDP socket on loopback, the
 * slot rules of PROTOCOL.md section 3 (exact 64-bit sums, saturation with
 * OVERFLOW, stored RESULTs resent to a rank that retransmits), and faults
 * on demand: DATA loss, RESULT loss (per rank, for a while), duplicated and
 * reordered RESULTs, REJECT of a tensor, silence, a restart that forgets
 * every slot, rounds that never end while every DATA is ACKed, corrupted sums. A retransmitted DATA already counted in an
 * open round gets an ACK (E5) unless no_ack is set (a switch without ACKs). It also checks the hosts' window: DATA of
 * seq q is a violation unless the round of q - S was completed here. Runs in its own thread. Tensor
 * 2 reduces by max, tensor 3 by min, every other tensor by sum (FS_TENSOR_*).
 * FIXED32 and BLOCK16 (docs/PROTOCOL.md E4, written here from the page, not
 * from the switch's code), or REJECT BAD_DTYPE for BLOCK16 on demand. A
 * round's RESULT goes to the address each rank's DATA came from, so ranks
 * with several flows (one port each) get each RESULT on the flow that sent.
 */
#ifndef CAIS_TEST_FAKE_SWITCH_H
#define CAIS_TEST_FAKE_SWITCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cais/proto.h>

#define FS_MAX_RANKS  8
#define FS_TENSOR_MAX 2u
#define FS_TENSOR_MIN 3u
#define FS_MAX_SLOTS  1024

struct fs_slot {
	bool used, done;
	uint32_t seq, tensor;
	uint16_t count;
	uint8_t dtype;
	uint32_t seen;
	uint8_t ovf;
	struct sockaddr_in from[FS_MAX_RANKS]; /**< each rank's flow that sent this round */
	int64_t acc[CAIS_MAX_ELEMS];
};

struct fake_switch {
	int fd;
	struct sockaddr_in addr;
	unsigned int n, slots;
	pthread_t thread;
	atomic_bool stop;
	pthread_mutex_t lock;
	struct fs_slot *sl; /* slots x 2 */
	struct sockaddr_in member[FS_MAX_RANKS];
	bool member_known[FS_MAX_RANKS];
	/* faults (set any time) */
	atomic_int data_loss_pct;   /**< DATA dropped on arrival */
	atomic_int result_loss_pct; /**< each RESULT copy dropped */
	atomic_int dup_pct;	    /**< each RESULT copy sent twice */
	atomic_int silent;	    /**< drop everything */
	atomic_uint reject_tensor;  /**< REJECT UNKNOWN_TENSOR for this tensor (0: none) */
	atomic_int fwd_only;	    /**< REJECT FWD_ONLY everything */
	atomic_int drop_results_to; /**< rank whose RESULTs are dropped, -1: none */
	atomic_int drop_data_from;  /**< rank whose DATA never arrives, -1: none */
	atomic_int corrupt;	    /**< add this to every summed element */
	atomic_int reorder_pct;	    /**< RESULT copies held back behind later ones */
	atomic_int refuse_b16;	    /**< REJECT BAD_DTYPE every BLOCK16 DATA (the P4 profile) */
	atomic_int no_ack;	    /**< never ACK (a switch from before E5) */
	atomic_int ack_only;	    /**< ACK every retransmission, count nothing: rounds
				         never end (restarts between contributions) */
	/* counters */
	atomic_ulong data_rx, results_tx, rounds, rejects, retx_seen, window_violations;
	atomic_ulong b16_rounds; /**< rounds in BLOCK16 */
	atomic_ulong acks_tx;	 /**< ACKs sent */
	uint16_t ports[FS_MAX_RANKS][16]; /**< the source ports each rank's DATA came from */
	unsigned int n_ports[FS_MAX_RANKS];
	/* RESULTs held back for reordering */
	unsigned int n_held;
	struct {
		uint8_t buf[CAIS_HDR_LEN + 4 * CAIS_MAX_ELEMS + 64];
		size_t len;
		struct sockaddr_in to;
		unsigned int age;
	} held[4];
	uint64_t rng;
};

static inline uint32_t
fs_rand(struct fake_switch *s)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return (uint32_t)(s->rng >> 11);
}

static inline bool
fs_chance(struct fake_switch *s, int pct)
{
	return pct > 0 && (int)(fs_rand(s) % 100) < pct;
}

/* Release held RESULTs that have waited for enough later sends (all when force). */
static void
fs_release(struct fake_switch *s, bool force)
{
	for (unsigned int i = 0; i < s->n_held; i++) {
		if (!force && ++s->held[i].age < 3)
			continue;
		sendto(s->fd, s->held[i].buf, s->held[i].len, 0,
		       (const struct sockaddr *)&s->held[i].to, sizeof(s->held[i].to));
		s->held[i--] = s->held[--s->n_held];
	}
}

static void
fs_send(struct fake_switch *s, const uint8_t *buf, size_t len, const struct sockaddr_in *to)
{
	if (s->n_held < 4 && fs_chance(s, atomic_load(&s->reorder_pct))) {
		memcpy(s->held[s->n_held].buf, buf, len);
		s->held[s->n_held].len = len;
		s->held[s->n_held].to = *to;
		s->held[s->n_held++].age = 0;
		return;
	}
	sendto(s->fd, buf, len, 0, (const struct sockaddr *)to, sizeof(*to));
	fs_release(s, false);
}

/* acc / 2^e rounded to nearest, ties to even. */
static int64_t
fs_round_shift(int64_t acc, unsigned int e)
{
	int64_t q, rem, half;

	if (e == 0)
		return acc;
	q = acc >> e; /* floor */
	rem = acc - q * ((int64_t)1 << e);
	half = (int64_t)1 << (e - 1);
	if (rem > half || (rem == half && (q & 1)))
		q++;
	return q;
}

/* A BLOCK16 RESULT payload of the slot's sums: per block the smallest fitting exponent. */
static size_t
fs_b16_payload(uint8_t *out, const struct fs_slot *sl)
{
	uint32_t n = sl->count, eb = cais_b16_exp_bytes(n);

	memset(out, 0, eb);
	for (uint32_t b = 0; b * CAIS_B16_BLOCK < n; b++) {
		uint32_t i0 = b * CAIS_B16_BLOCK;
		uint32_t m = n - i0 < CAIS_B16_BLOCK ? n - i0 : CAIS_B16_BLOCK;
		unsigned int e = 0;
		bool fits;

		do {
			fits = true;
			for (uint32_t k = 0; k < m && fits; k++) {
				int64_t q = fs_round_shift(sl->acc[i0 + k], e);

				fits = q <= CAIS_B16_MMAX && q >= -CAIS_B16_MMAX;
			}
		} while (!fits && ++e < CAIS_B16_EMAX);
		out[b] = (uint8_t)e;
		for (uint32_t k = 0; k < m; k++) {
			uint16_t w = htons((uint16_t)(int16_t)fs_round_shift(sl->acc[i0 + k], e));

			memcpy(out + eb + 2 * (i0 + k), &w, 2);
		}
	}
	return cais_payload_bytes(CAIS_DT_BLOCK16, n);
}

static void
fs_result(struct fake_switch *s, const struct cais_fields *in, const struct fs_slot *sl,
	  unsigned int rank)
{
	uint8_t buf[CAIS_HDR_LEN + 4 * CAIS_MAX_ELEMS + 64];
	struct cais_fields f = *in;
	size_t plen = 4u * sl->count;

	if (!s->member_known[rank] || atomic_load(&s->drop_results_to) == (int)rank ||
	    fs_chance(s, atomic_load(&s->result_loss_pct)))
		return;
	if (!(sl->seen & (1u << rank)))
		return;
	f.type = CAIS_TYPE_RESULT;
	f.flags = sl->ovf ? CAIS_F_OVERFLOW : 0;
	f.rank = CAIS_RANK_NONE;
	f.reason = 0;
	f.count = sl->count;
	f.dtype = sl->dtype;
	cais_hdr_build((struct cais_hdr *)buf, &f);
	if (sl->dtype == CAIS_DT_BLOCK16)
		plen = fs_b16_payload(buf + CAIS_HDR_LEN, sl);
	else
		for (unsigned int i = 0; i < sl->count; i++) {
			int64_t v = sl->acc[i];
			uint32_t w;

			v = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : v;
			w = htonl((uint32_t)(int32_t)v);
			memcpy(buf + CAIS_HDR_LEN + 4 * i, &w, 4);
		}
	fs_send(s, buf, CAIS_HDR_LEN + plen, &sl->from[rank]);
	atomic_fetch_add(&s->results_tx, 1);
	if (fs_chance(s, atomic_load(&s->dup_pct)))
		fs_send(s, buf, CAIS_HDR_LEN + plen, &sl->from[rank]);
}

/* Element i of a DATA payload in accumulator units; *ovf set for a BLOCK16 exponent above 40. */
static int64_t
fs_elem(const uint8_t *payload, const struct cais_fields *f, unsigned int i, uint8_t *ovf)
{
	if (f->dtype == CAIS_DT_BLOCK16) {
		unsigned int e = payload[i / CAIS_B16_BLOCK];
		uint16_t w;

		memcpy(&w, payload + cais_b16_exp_bytes(f->count) + 2 * i, 2);
		if (e > CAIS_B16_EMAX_DATA) {
			*ovf = 1;
			e = CAIS_B16_EMAX_DATA;
		}
		return (int64_t)(int16_t)ntohs(w) * ((int64_t)1 << e);
	} else {
		uint32_t w;

		memcpy(&w, payload + 4 * i, 4);
		return (int32_t)ntohl(w);
	}
}

static void
fs_reject(struct fake_switch *s, const struct cais_fields *in, uint16_t reason,
	  const struct sockaddr_in *to)
{
	uint8_t buf[CAIS_HDR_LEN];
	struct cais_fields f = *in;

	f.type = CAIS_TYPE_REJECT;
	f.flags = reason == CAIS_R_FWD_ONLY ? CAIS_F_FWD_ONLY : 0;
	f.rank = CAIS_RANK_NONE;
	f.count = 0;
	f.reason = reason;
	cais_hdr_build((struct cais_hdr *)buf, &f);
	fs_send(s, buf, sizeof(buf), to);
	atomic_fetch_add(&s->rejects, 1);
}

/* E5: the DATA (a retransmission) is already in the open round. */
static void
fs_ack(struct fake_switch *s, const struct cais_fields *in, const struct sockaddr_in *to)
{
	uint8_t buf[CAIS_HDR_LEN];
	struct cais_fields f = *in;

	f.type = CAIS_TYPE_ACK;
	f.flags = 0;
	f.count = 0;
	f.reason = 0;
	cais_hdr_build((struct cais_hdr *)buf, &f);
	fs_send(s, buf, sizeof(buf), to);
	atomic_fetch_add(&s->acks_tx, 1);
}

static void
fs_data(struct fake_switch *s, const uint8_t *p, size_t len, const struct sockaddr_in *from)
{
	const struct cais_hdr *h = (const struct cais_hdr *)p;
	struct cais_fields f;
	struct fs_slot *sl;
	int32_t corrupt = atomic_load(&s->corrupt);

	if (cais_hdr_check(p, len) != CAIS_HDR_OK || cais_hdr_type(h) != CAIS_TYPE_DATA)
		return;
	cais_hdr_read(h, &f);
	if (f.rank >= s->n || f.count == 0 ||
	    len < CAIS_HDR_LEN + cais_payload_bytes(f.dtype, f.count))
		return;
	atomic_fetch_add(&s->data_rx, 1);
	if (f.flags & CAIS_F_RETX)
		atomic_fetch_add(&s->retx_seen, 1);
	if (fs_chance(s, atomic_load(&s->data_loss_pct)) ||
	    atomic_load(&s->drop_data_from) == (int)f.rank)
		return;
	if (atomic_load(&s->fwd_only))
		return fs_reject(s, &f, CAIS_R_FWD_ONLY, from);
	if (atomic_load(&s->reject_tensor) && f.tensor == atomic_load(&s->reject_tensor))
		return fs_reject(s, &f, CAIS_R_UNKNOWN_TENSOR, from);
	if (f.dtype >= CAIS_DT_COUNT ||
	    (f.dtype == CAIS_DT_BLOCK16 && atomic_load(&s->refuse_b16)))
		return fs_reject(s, &f, CAIS_R_BAD_DTYPE, from);
	s->member[f.rank] = *from;
	s->member_known[f.rank] = true;
	{
		unsigned int k = 0;

		while (k < s->n_ports[f.rank] && s->ports[f.rank][k] != from->sin_port)
			k++;
		if (k == s->n_ports[f.rank] && k < 16)
			s->ports[f.rank][s->n_ports[f.rank]++] = from->sin_port;
	}
	if (f.slot >= s->slots || cais_slot_field(f.seq, s->slots) != ntohs(h->slot))
		return;
	sl = &s->sl[f.slot * 2 + f.set];
	{
		/* the window: q - S must have completed here (its slot, the other set) */
		uint32_t prev = f.seq - s->slots;
		const struct fs_slot *o = &s->sl[f.slot * 2 + (f.set ^ 1)];

		if (o->used && (cais_seq_before(o->seq, prev) || (o->seq == prev && !o->done)))
			atomic_fetch_add(&s->window_violations, 1);
	}
	if (atomic_load(&s->ack_only)) {
		if (f.flags & CAIS_F_RETX)
			fs_ack(s, &f, from);
		return;
	}
	if (!sl->used || cais_seq_before(sl->seq, f.seq)) {
		sl->used = true;
		sl->done = false;
		sl->seq = f.seq;
		sl->tensor = f.tensor;
		sl->count = f.count;
		sl->dtype = f.dtype;
		sl->seen = 0;
		sl->ovf = 0;
		memset(sl->acc, 0, sizeof(int64_t) * f.count);
	} else if (f.seq != sl->seq || f.count != sl->count || f.tensor != sl->tensor ||
		   f.dtype != sl->dtype) {
		return; /* stale or inconsistent */
	}
	if (sl->seen & (1u << f.rank)) {
		if (sl->done) {
			sl->from[f.rank] = *from;
			fs_result(s, &f, sl, f.rank); /* a lost RESULT: unicast */
		} else if ((f.flags & CAIS_F_RETX) && !atomic_load(&s->no_ack)) {
			fs_ack(s, &f, from);
		}
		return;
	}
	sl->from[f.rank] = *from;
	for (unsigned int i = 0; i < f.count; i++) {
		int64_t v = fs_elem(p + CAIS_HDR_LEN, &f, i, &sl->ovf);

		if (!sl->seen)
			sl->acc[i] = v;
		else if (f.tensor == FS_TENSOR_MAX)
			sl->acc[i] = v > sl->acc[i] ? v : sl->acc[i];
		else if (f.tensor == FS_TENSOR_MIN)
			sl->acc[i] = v < sl->acc[i] ? v : sl->acc[i];
		else
			sl->acc[i] += v;
	}
	sl->seen |= 1u << f.rank;
	if ((unsigned int)__builtin_popcount(sl->seen) == s->n) {
		sl->done = true;
		for (unsigned int i = 0; i < f.count; i++) {
			sl->acc[i] += corrupt;
			if (sl->dtype == CAIS_DT_FIXED32 &&
			    (sl->acc[i] > INT32_MAX || sl->acc[i] < INT32_MIN))
				sl->ovf = 1;
		}
		atomic_fetch_add(&s->rounds, 1);
		if (sl->dtype == CAIS_DT_BLOCK16)
			atomic_fetch_add(&s->b16_rounds, 1);
		for (unsigned int r = 0; r < s->n; r++)
			fs_result(s, &f, sl, r);
	}
}

static void *
fs_main(void *arg)
{
	struct fake_switch *s = arg;
	uint8_t buf[16384];

	while (!atomic_load(&s->stop)) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(s->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);

		if (n <= 0) {
			pthread_mutex_lock(&s->lock);
			fs_release(s, true); /* quiet for a while: let the held ones go */
			pthread_mutex_unlock(&s->lock);
			continue;
		}
		if (atomic_load(&s->silent))
			continue;
		pthread_mutex_lock(&s->lock);
		fs_data(s, buf, (size_t)n, &from);
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

/** Forget every slot (a restarted switch). */
static inline void
fs_restart(struct fake_switch *s)
{
	pthread_mutex_lock(&s->lock);
	memset(s->sl, 0, sizeof(*s->sl) * s->slots * 2);
	memset(s->member_known, 0, sizeof(s->member_known));
	pthread_mutex_unlock(&s->lock);
}

/** Start a fake switch for n ranks and a pool of slots on 127.0.0.1, any free port. */
static inline struct fake_switch *
fs_start(unsigned int n, unsigned int slots)
{
	struct fake_switch *s = calloc(1, sizeof(*s));
	socklen_t l = sizeof(s->addr);
	struct timeval tv = {0, 20000};
	int buf = 8 << 20;

	s->n = n;
	s->slots = slots;
	s->sl = calloc((size_t)slots * 2, sizeof(*s->sl));
	s->rng = 0x9E3779B97F4A7C15ull;
	atomic_store(&s->drop_results_to, -1);
	atomic_store(&s->drop_data_from, -1);
	pthread_mutex_init(&s->lock, NULL);
	s->fd = socket(AF_INET, SOCK_DGRAM, 0);
	setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	s->addr.sin_family = AF_INET;
	s->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(s->fd, (struct sockaddr *)&s->addr, sizeof(s->addr));
	getsockname(s->fd, (struct sockaddr *)&s->addr, &l);
	pthread_create(&s->thread, NULL, fs_main, s);
	return s;
}

static inline void
fs_stop(struct fake_switch *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->thread, NULL);
	close(s->fd);
	free(s->sl);
	free(s);
}

#endif /* CAIS_TEST_FAKE_SWITCH_H */
