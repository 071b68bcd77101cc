/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-rawhost: one host of a CAIS session over a plain UDP socket, to test
 * the switch without the agent library. Links nothing but libc.
 *
 * It streams K chunks (seq Q .. Q+K-1) through the window of PROTOCOL.md
 * section 3 (at most S in flight; chunk q+S only after the RESULT of q),
 * retransmits on a timer, and checks every RESULT byte for byte against
 * what it computes itself: every rank's values are a deterministic function
 * of (rank, seq, index), so each host knows the whole reduction.
 *
 * Fault injection (seeded by --seed and the rank): DATA not sent (--loss),
 * DATA sent twice (--dup), RESULTs discarded as if lost (--drop-results),
 * random datagrams to the aggregator port (--garbage).
 *
 * --expect-reject REASON sends one DATA the switch must refuse and checks
 * the REJECT.
 *
 * Exit status: 0 all rounds arrived and were right (or the expected REJECT
 * came back), 1 failure or deadline, 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cais/proto.h>

#include "cmn_addr.h"

#define PROG		  "cais-rawhost"
#define BATCH		  64 /* datagrams per sendmmsg/recvmmsg */
#define RX_BUF		  (CAIS_HDR_LEN + 4u * CAIS_MAX_ELEMS + 64u) /* a longer datagram is an error */
#define GARBAGE_MAX	  1500u
#define BACKOFF_MAX_SHIFT 4 /* retransmission timeout doubles up to 16x */
#define NS_PER_S	  1000000000ull
#define VALUE_RANGE	  1000000 /* values in [-VALUE_RANGE, VALUE_RANGE] */
#define MAX_PAYLOAD_ELEMS ((9000u - 20u - 8u - CAIS_HDR_LEN) / 4u) /* fits a 9000 MTU */

enum op { OP_SUM, OP_MAX, OP_MIN };
static const char *const op_names[] = {"sum", "max", "min"};

struct options {
	int rank, world;
	struct sockaddr_in agg, bind;
	bool have_agg, have_bind;
	long tenant, session;
	long long tensor;
	long slots, elems;
	long long rounds;
	uint32_t first_seq;
	enum op op;
	bool varied;
	double loss, dup, drop_results, garbage; /* percent */
	uint64_t timeout_ns;
	double deadline_s;
	uint64_t seed;
	int expect_reject; /* reason code, 0: normal run */
	long count;	   /* --count, -1: not given */
	bool quiet;
};

static struct options o = {
    .rank = -1,
    .world = -1,
    .tenant = -1,
    .session = -1,
    .tensor = -1,
    .slots = -1,
    .elems = -1,
    .rounds = -1,
    .timeout_ns = 500000,
    .deadline_s = 60,
    .seed = 1,
    .count = -1,
};

static volatile sig_atomic_t g_stop;

/* ---- utilities ---- */

static void __attribute__((noreturn, format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '" PROG " --help'.\n");
	exit(2);
}

static void __attribute__((noreturn, format(printf, 1, 2))) fatal(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": rank %d: ", o.rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* splitmix64's finaliser: a good 64-bit mix. */
static uint64_t
mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* xorshift64* for fault injection */
static uint64_t g_rng;

static uint64_t
rnd(void)
{
	g_rng ^= g_rng >> 12;
	g_rng ^= g_rng << 25;
	g_rng ^= g_rng >> 27;
	return g_rng * 0x2545F4914F6CDD1Dull;
}

/* true with probability pct percent */
static bool
chance(double pct)
{
	if (pct <= 0)
		return false;
	return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0) * 100.0 < pct;
}

/*
 * ---- the data: a deterministic function of (rank, seq, index) ----
 *
 * v(r, q, i) = T[(off(r, q) + i) mod 8192] + c(r, q): T a fixed table of
 * random values in [-R/2, R/2], off and c drawn per (rank, chunk) from a
 * hash, so every rank's chunk is a different random-looking vector in
 * [-R, R]. Cheap (a load and an add), so four hosts that generate and check
 * every element do not starve a two-core machine.
 */
#define VTAB  8192u
#define VHALF (VALUE_RANGE / 2)
static int32_t g_vtab[VTAB];

struct vparam {
	uint32_t off;
	int32_t c;
};

static void
vtab_init(void)
{
	for (unsigned int i = 0; i < VTAB; i++)
		g_vtab[i] = (int32_t)(mix64(i ^ 0xCA15CA15ull << 20) % (2u * VHALF + 1u)) - VHALF;
}

static struct vparam
vparam(unsigned int rank, uint32_t seq)
{
	uint64_t h = mix64(((uint64_t)seq << 8 | rank) ^ 0x7AB1E5ull << 40);
	struct vparam p = {
	    .off = (uint32_t)h & (VTAB - 1),
	    .c = (int32_t)((h >> 32) % (2u * VHALF + 1u)) - VHALF,
	};
	return p;
}

static inline int32_t
vvalue(struct vparam p, unsigned int i)
{
	return g_vtab[(p.off + i) & (VTAB - 1)] + p.c;
}

/* count(q): E, or for --counts varied 1..E (1 and E both occur every 8 chunks) */
static uint16_t
chunk_count(uint32_t seq)
{
	uint32_t e = (uint32_t)o.elems;

	if (!o.varied)
		return (uint16_t)e;
	switch (seq % 8) {
	case 0:
		return 1;
	case 1:
		return (uint16_t)e;
	default:
		return (uint16_t)(1 + mix64(seq ^ 0x5EEDull << 40) % e);
	}
}

static void
put_be32(uint8_t *p, int32_t v)
{
	uint32_t w = htonl((uint32_t)v);

	memcpy(p, &w, 4);
}

/* Expected elements 0..count-1 of the reduction of chunk seq over every rank, big-endian. */
static void
expected_payload(uint8_t *out, uint32_t seq, unsigned int count)
{
	static struct vparam p[CAIS_MAX_WORLD];

	for (int r = 0; r < o.world; r++)
		p[r] = vparam((unsigned int)r, seq);
	for (unsigned int i = 0; i < count; i++) {
		int64_t acc = vvalue(p[0], i);

		for (int r = 1; r < o.world; r++) {
			int64_t v = vvalue(p[r], i);

			switch (o.op) {
			case OP_SUM:
				acc += v;
				break;
			case OP_MAX:
				acc = v > acc ? v : acc;
				break;
			case OP_MIN:
				acc = v < acc ? v : acc;
				break;
			}
		}
		if (acc > INT32_MAX) /* cannot happen: 255 x 10^6 fits */
			acc = INT32_MAX;
		if (acc < INT32_MIN)
			acc = INT32_MIN;
		put_be32(out + 4u * i, (int32_t)acc);
	}
}

/* This rank's elements 0..count-1 of chunk seq, big-endian. */
static void
data_payload(uint8_t *out, uint32_t seq, unsigned int count)
{
	struct vparam p = vparam((unsigned int)o.rank, seq);

	for (unsigned int i = 0; i < count; i++)
		put_be32(out + 4u * i, vvalue(p, i));
}

/* ---- option parsing ---- */

static long long
parse_int(const char *opt, const char *s, long long min, long long max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno || end == s || *end || v < min || v > max)
		usage_error("%s: '%s' is not an integer in [%lld, %lld]", opt, s, min, max);
	return v;
}

static double
parse_pct(const char *opt, const char *s, double max)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0 && v <= max))
		usage_error("%s: '%s' is not a percentage in [0, %g]", opt, s, max);
	return v;
}

/* IP[:PORT]; port required when default_port is 0 */
static void
parse_addr(const char *opt, const char *s, uint16_t default_port, struct sockaddr_in *out)
{
	if (cmn_parse_addr(s, default_port, out) != 0)
		usage_error("%s: '%s' is not IP%s", opt, s, default_port ? "[:PORT]" : ":PORT");
}

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: " PROG " --rank R --world N --agg IP[:PORT] --bind IP:PORT\n"
	    "         --tenant T --session S --tensor X --slots S --elems E --rounds K [options]\n"
	    "       " PROG
	    " --expect-reject REASON [--count C] --rank R --agg IP[:PORT] --bind IP:PORT\n"
	    "         --tenant T --session S --tensor X --slots S --elems E [options]\n"
	    "\n"
	    "One host of a CAIS session over a plain UDP socket: streams K chunks through\n"
	    "the switch (window of S chunks, timer retransmission) and checks every RESULT\n"
	    "byte for byte against the reduction it computes itself.\n"
	    "\n"
	    "  --rank R              this host's rank, 0..N-1\n"
	    "  --world N             world size, 1..%u\n"
	    "  --agg IP[:PORT]       the aggregator (default port %u)\n"
	    "  --bind IP:PORT        local address: the one registered for this rank\n"
	    "  --tenant T --session S --tensor X   the ids of the tensor entry\n"
	    "  --slots S             the session's pool size (power of two, 1..%u)\n"
	    "  --elems E             the session's elements per packet, 1..%u\n"
	    "  --rounds K            chunks to reduce\n"
	    "  --first-seq Q         seq of the first chunk (default 0; wraps mod 2^32)\n"
	    "  --op sum|max|min      the tensor's reduce op (default sum)\n"
	    "  --counts full|varied  elements per chunk: always E, or 1..E by seq (default full)\n"
	    "  --loss PCT            do not send PCT%% of DATA transmissions (0..90)\n"
	    "  --dup PCT             send PCT%% of DATA twice (0..100)\n"
	    "  --drop-results PCT    discard PCT%% of received RESULTs as if lost (0..90)\n"
	    "  --garbage PCT         for PCT%% of DATA, also send a random datagram to the\n"
	    "                        aggregator port (0..100)\n"
	    "  --timeout-us US       initial and smallest retransmission timeout (default 500);\n"
	    "                        above it the timer follows the measured round time\n"
	    "                        (srtt + 4 rttvar, at most 20 ms); it doubles per retry\n"
	    "                        (up to %ux, at most 20 ms or US)\n"
	    "  --deadline-s S        give up after S seconds, reporting what is missing (default "
	    "60)\n"
	    "  --seed N              seed of the fault injection (default 1; mixed with the rank)\n"
	    "  --expect-reject REASON  send one bad DATA and expect a REJECT with REASON:\n"
	    "                        unknown_tensor, not_member, no_slot, bad_count, bad_dtype,\n"
	    "                        fwd_only (bad_dtype sends dtype 1, no_slot slot index S)\n"
	    "  --count C             with --expect-reject: the DATA's count (0..65535; default E)\n"
	    "  --quiet               no progress line (each second, on stderr): the summary and\n"
	    "                        errors only\n"
	    "  --help                this text\n"
	    "\n"
	    "Values: element i of rank r's chunk q is a deterministic int32 in [-%d, %d].\n"
	    "Exit status: 0 all rounds right (or the expected REJECT), 1 failure or deadline,\n"
	    "2 bad usage.\n",
	    CAIS_MAX_WORLD, CAIS_UDP_PORT, CAIS_MAX_SLOTS, CAIS_MAX_ELEMS, 1u << BACKOFF_MAX_SHIFT,
	    VALUE_RANGE, VALUE_RANGE);
}

static int
reason_code(const char *s)
{
	for (unsigned int r = 1; r < CAIS_R_MAX; r++)
		if (strcmp(s, cais_reason_name(r)) == 0)
			return (int)r;
	return 0;
}

enum {
	O_RANK = 256,
	O_WORLD,
	O_AGG,
	O_BIND,
	O_TENANT,
	O_SESSION,
	O_TENSOR,
	O_SLOTS,
	O_ELEMS,
	O_ROUNDS,
	O_FIRST_SEQ,
	O_OP,
	O_COUNTS,
	O_LOSS,
	O_DUP,
	O_DROP_RESULTS,
	O_GARBAGE,
	O_TIMEOUT,
	O_DEADLINE,
	O_SEED,
	O_EXPECT_REJECT,
	O_COUNT,
	O_QUIET,
	O_HELP,
};

static void
parse_args(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"rank", required_argument, NULL, O_RANK},
	    {"world", required_argument, NULL, O_WORLD},
	    {"agg", required_argument, NULL, O_AGG},
	    {"bind", required_argument, NULL, O_BIND},
	    {"tenant", required_argument, NULL, O_TENANT},
	    {"session", required_argument, NULL, O_SESSION},
	    {"tensor", required_argument, NULL, O_TENSOR},
	    {"slots", required_argument, NULL, O_SLOTS},
	    {"elems", required_argument, NULL, O_ELEMS},
	    {"rounds", required_argument, NULL, O_ROUNDS},
	    {"first-seq", required_argument, NULL, O_FIRST_SEQ},
	    {"op", required_argument, NULL, O_OP},
	    {"counts", required_argument, NULL, O_COUNTS},
	    {"loss", required_argument, NULL, O_LOSS},
	    {"dup", required_argument, NULL, O_DUP},
	    {"drop-results", required_argument, NULL, O_DROP_RESULTS},
	    {"garbage", required_argument, NULL, O_GARBAGE},
	    {"timeout-us", required_argument, NULL, O_TIMEOUT},
	    {"deadline-s", required_argument, NULL, O_DEADLINE},
	    {"seed", required_argument, NULL, O_SEED},
	    {"expect-reject", required_argument, NULL, O_EXPECT_REJECT},
	    {"count", required_argument, NULL, O_COUNT},
	    {"quiet", no_argument, NULL, O_QUIET},
	    {"help", no_argument, NULL, O_HELP},
	    {NULL, 0, NULL, 0},
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case O_RANK:
			o.rank = (int)parse_int("--rank", optarg, 0, CAIS_MAX_WORLD - 1);
			break;
		case O_WORLD:
			o.world = (int)parse_int("--world", optarg, 1, CAIS_MAX_WORLD);
			break;
		case O_AGG:
			parse_addr("--agg", optarg, CAIS_UDP_PORT, &o.agg);
			o.have_agg = true;
			break;
		case O_BIND:
			parse_addr("--bind", optarg, 0, &o.bind);
			o.have_bind = true;
			break;
		case O_TENANT:
			o.tenant = (long)parse_int("--tenant", optarg, 0, UINT16_MAX);
			break;
		case O_SESSION:
			o.session = (long)parse_int("--session", optarg, 0, UINT16_MAX);
			break;
		case O_TENSOR:
			o.tensor = parse_int("--tensor", optarg, 0, UINT32_MAX);
			break;
		case O_SLOTS:
			o.slots = (long)parse_int("--slots", optarg, 1, CAIS_MAX_SLOTS);
			if (!cais_pool_size_ok((uint32_t)o.slots))
				usage_error("--slots: '%s' is not a power of two in [1, %u]",
					    optarg, CAIS_MAX_SLOTS);
			break;
		case O_ELEMS:
			o.elems = (long)parse_int("--elems", optarg, 1, CAIS_MAX_ELEMS);
			break;
		case O_ROUNDS:
			o.rounds = parse_int("--rounds", optarg, 1, INT32_MAX);
			break;
		case O_FIRST_SEQ:
			o.first_seq = (uint32_t)parse_int("--first-seq", optarg, 0, UINT32_MAX);
			break;
		case O_OP:
			if (strcmp(optarg, "sum") == 0)
				o.op = OP_SUM;
			else if (strcmp(optarg, "max") == 0)
				o.op = OP_MAX;
			else if (strcmp(optarg, "min") == 0)
				o.op = OP_MIN;
			else
				usage_error("--op: '%s' is not sum, max or min", optarg);
			break;
		case O_COUNTS:
			if (strcmp(optarg, "full") == 0)
				o.varied = false;
			else if (strcmp(optarg, "varied") == 0)
				o.varied = true;
			else
				usage_error("--counts: '%s' is not full or varied", optarg);
			break;
		case O_LOSS:
			o.loss = parse_pct("--loss", optarg, 90);
			break;
		case O_DUP:
			o.dup = parse_pct("--dup", optarg, 100);
			break;
		case O_DROP_RESULTS:
			o.drop_results = parse_pct("--drop-results", optarg, 90);
			break;
		case O_GARBAGE:
			o.garbage = parse_pct("--garbage", optarg, 100);
			break;
		case O_TIMEOUT:
			o.timeout_ns =
			    (uint64_t)parse_int("--timeout-us", optarg, 1, 10000000) * 1000u;
			break;
		case O_DEADLINE: {
			char *end;

			errno = 0;
			o.deadline_s = strtod(optarg, &end);
			if (errno || end == optarg || *end ||
			    !(o.deadline_s > 0 && o.deadline_s <= 86400))
				usage_error(
				    "--deadline-s: '%s' is not a number of seconds in (0, 86400]",
				    optarg);
			break;
		}
		case O_SEED:
			o.seed = (uint64_t)parse_int("--seed", optarg, 0, LLONG_MAX);
			break;
		case O_EXPECT_REJECT:
			o.expect_reject = reason_code(optarg);
			if (!o.expect_reject)
				usage_error(
				    "--expect-reject: '%s' is not unknown_tensor, not_member, "
				    "no_slot, bad_count, bad_dtype or fwd_only",
				    optarg);
			break;
		case O_COUNT:
			o.count = (long)parse_int("--count", optarg, 0, UINT16_MAX);
			break;
		case O_QUIET:
			o.quiet = true;
			break;
		case O_HELP:
			usage(stdout);
			exit(0);
		default:
			if (optopt)
				usage_error("option '%s' is unknown or needs a value",
					    argv[optind - 1]);
			usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc)
		usage_error("unexpected argument '%s'", argv[optind]);

#define REQUIRE(cond, name)                                                                        \
	do {                                                                                       \
		if (!(cond))                                                                       \
			usage_error("%s is required", name);                                       \
	} while (0)
	REQUIRE(o.rank >= 0, "--rank");
	REQUIRE(o.have_agg, "--agg");
	REQUIRE(o.have_bind, "--bind");
	REQUIRE(o.tenant >= 0, "--tenant");
	REQUIRE(o.session >= 0, "--session");
	REQUIRE(o.tensor >= 0, "--tensor");
	REQUIRE(o.slots >= 0, "--slots");
	REQUIRE(o.elems >= 0, "--elems");
	if (o.expect_reject) {
		if (o.world < 0)
			o.world = o.rank + 1;
		if (o.expect_reject == CAIS_R_NO_SLOT && o.slots >= (long)CAIS_MAX_SLOTS)
			usage_error(
			    "--expect-reject no_slot needs --slots below %u (the slot index "
			    "sent is S)",
			    CAIS_MAX_SLOTS);
	} else {
		REQUIRE(o.world >= 0, "--world");
		REQUIRE(o.rounds >= 0, "--rounds");
		if (o.count >= 0)
			usage_error("--count goes with --expect-reject");
	}
#undef REQUIRE
	if (o.rank >= o.world)
		usage_error("--rank %d must be below --world %d", o.rank, o.world);
}

/* ---- the socket ---- */

static int g_fd = -1;

static void
open_socket(void)
{
	int one = 1, big = 8 << 20, pmtu = IP_PMTUDISC_DO;
	char a[INET_ADDRSTRLEN];

	g_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (g_fd < 0)
		fatal("socket: %s", strerror(errno));
	setsockopt(g_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* large buffers: a window of S jumbo RESULTs may arrive at once (FORCE needs root) */
	if (setsockopt(g_fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) != 0)
		setsockopt(g_fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (setsockopt(g_fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) != 0)
		setsockopt(g_fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	/* never fragment: the switch drops fragments; EMSGSIZE tells us instead */
	setsockopt(g_fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	if (bind(g_fd, (const struct sockaddr *)&o.bind, sizeof(o.bind)) != 0)
		fatal("bind %s:%u: %s", inet_ntop(AF_INET, &o.bind.sin_addr, a, sizeof(a)),
		      ntohs(o.bind.sin_port), strerror(errno));
}

/* ---- building DATA ---- */

static struct cais_fields
data_fields(uint32_t seq, uint16_t count, bool retx)
{
	struct cais_fields f;

	cais_data_fields(&f, (uint16_t)o.tenant, (uint16_t)o.session, (uint32_t)o.tensor, seq,
			 (uint32_t)o.slots, (uint8_t)o.rank, count);
	if (retx)
		f.flags |= CAIS_F_RETX;
	return f;
}

/* DATA for chunk seq into buf; @return its length */
static size_t
build_data(uint8_t *buf, uint32_t seq, bool retx)
{
	uint16_t count = chunk_count(seq);
	struct cais_fields f = data_fields(seq, count, retx);

	cais_hdr_build((struct cais_hdr *)buf, &f);
	data_payload(buf + CAIS_HDR_LEN, seq, count);
	return CAIS_HDR_LEN + 4u * count;
}

/* The RESULT we expect for chunk seq into buf; @return its length */
static size_t
build_expected(uint8_t *buf, uint32_t seq)
{
	uint16_t count = chunk_count(seq);
	struct cais_fields f = data_fields(seq, count, false);

	f.type = CAIS_TYPE_RESULT;
	f.rank = CAIS_RANK_NONE;
	cais_hdr_build((struct cais_hdr *)buf, &f);
	expected_payload(buf + CAIS_HDR_LEN, seq, count);
	return CAIS_HDR_LEN + 4u * count;
}

/* A random datagram; sometimes with a valid magic (and version/type), never our triple. */
static size_t
build_garbage(uint8_t *buf)
{
	size_t len = (size_t)(rnd() % (GARBAGE_MAX + 1));
	unsigned int kind = (unsigned int)(rnd() % 4);

	for (size_t i = 0; i < len; i += 8) {
		uint64_t r = rnd();

		memcpy(buf + i, &r, len - i < 8 ? len - i : 8);
	}
	if (kind >= 2 && len >= 2) {
		buf[0] = 0xCA;
		buf[1] = 0x15;
		if (kind == 3 && len >= 3)
			buf[2] =
			    (uint8_t)(CAIS_VERSION << 4 | (1 + rnd() % 3)); /* DATA/RESULT/REJECT */
		/* a random triple could only hit ours by a 2^-64 chance; rule it out anyway */
		if (len >= 12) {
			struct cais_hdr *h = (struct cais_hdr *)buf;

			if (ntohs(h->tenant) == o.tenant && ntohs(h->session) == o.session)
				h->tenant = htons((uint16_t)(o.tenant + 1));
		}
	}
	return len;
}

/* ---- sending ---- */

struct txq {
	unsigned int n;
	struct mmsghdr msg[3 * BATCH];
	struct iovec iov[3 * BATCH];
};

static struct txq g_tx;
static uint8_t g_data_buf[BATCH][CAIS_HDR_LEN + 4u * CAIS_MAX_ELEMS];
static uint8_t g_garbage_buf[BATCH][GARBAGE_MAX];
static unsigned int g_data_used, g_garbage_used;

struct counters {
	uint64_t data_sent, data_lost, data_dup, garbage_sent, retx;
	uint64_t results_dropped, results_ignored, rejects_ignored, foreign, acks;
	uint64_t elements_checked, errors, send_errors;
};
static struct counters g_c;

static void
txq_add(const void *buf, size_t len)
{
	struct mmsghdr *m = &g_tx.msg[g_tx.n];

	g_tx.iov[g_tx.n].iov_base = (void *)buf;
	g_tx.iov[g_tx.n].iov_len = len;
	memset(m, 0, sizeof(*m));
	m->msg_hdr.msg_name = &o.agg;
	m->msg_hdr.msg_namelen = sizeof(o.agg);
	m->msg_hdr.msg_iov = &g_tx.iov[g_tx.n];
	m->msg_hdr.msg_iovlen = 1;
	g_tx.n++;
}

static void
tx_flush(void)
{
	unsigned int done = 0;

	while (done < g_tx.n) {
		int rc = sendmmsg(g_fd, g_tx.msg + done, g_tx.n - done, 0);

		if (rc > 0) {
			done += (unsigned int)rc;
			continue;
		}
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0 && errno == EMSGSIZE)
			fatal("a datagram of %zu bytes does not fit the path MTU to the aggregator "
			      "(give the data interface MTU 9000, or use smaller --elems)",
			      g_tx.iov[done].iov_len);
		/* ENOBUFS, EAGAIN, ...: skip this one, the timer resends it */
		g_c.send_errors++;
		done++;
	}
	g_tx.n = 0;
	g_data_used = 0;
	g_garbage_used = 0;
}

/* One DATA transmission of chunk seq, through the fault injection. */
static void
send_data(uint32_t seq, bool retx)
{
	uint8_t *buf;
	size_t len;

	if (g_data_used == BATCH)
		tx_flush();
	if (retx)
		g_c.retx++;
	if (chance(o.loss)) {
		g_c.data_lost++;
		return;
	}
	buf = g_data_buf[g_data_used++];
	len = build_data(buf, seq, retx);
	txq_add(buf, len);
	g_c.data_sent++;
	if (chance(o.dup)) {
		txq_add(buf, len);
		g_c.data_dup++;
	}
	if (chance(o.garbage)) {
		uint8_t *gb = g_garbage_buf[g_garbage_used++];

		txq_add(gb, build_garbage(gb));
		g_c.garbage_sent++;
	}
}

/* ---- receiving ---- */

struct rxq {
	struct mmsghdr msg[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_in from[BATCH];
};
static struct rxq g_rx;
static uint8_t g_rx_buf[BATCH][RX_BUF];

/* Receive what is there (without blocking); @return datagrams received, -1 on error */
static int
rx_burst(void)
{
	int n;

	for (unsigned int i = 0; i < BATCH; i++) {
		g_rx.iov[i].iov_base = g_rx_buf[i];
		g_rx.iov[i].iov_len = RX_BUF;
		memset(&g_rx.msg[i], 0, sizeof(g_rx.msg[i]));
		g_rx.msg[i].msg_hdr.msg_iov = &g_rx.iov[i];
		g_rx.msg[i].msg_hdr.msg_iovlen = 1;
		g_rx.msg[i].msg_hdr.msg_name = &g_rx.from[i];
		g_rx.msg[i].msg_hdr.msg_namelen = sizeof(g_rx.from[i]);
	}
	n = recvmmsg(g_fd, g_rx.msg, BATCH, MSG_DONTWAIT, NULL);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return 0;
		/* ECONNREFUSED and the like come from ICMP errors: nothing to receive */
		if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH)
			return 0;
		fatal("recvmmsg: %s", strerror(errno));
	}
	return n;
}

static bool
from_agg(const struct sockaddr_in *a)
{
	return a->sin_addr.s_addr == o.agg.sin_addr.s_addr && a->sin_port == o.agg.sin_port;
}

static const char *
hdr_text(const uint8_t *p, size_t len, char *out, size_t n)
{
	struct cais_fields f;

	if (cais_hdr_check(p, len) != CAIS_HDR_OK) {
		snprintf(out, n, "%zu bytes, not a CAIS header (%s)", len,
			 cais_hdr_check_name(cais_hdr_check(p, len)));
		return out;
	}
	cais_hdr_read((const struct cais_hdr *)p, &f);
	snprintf(out, n,
		 "%zu bytes: %s flags 0x%02x tenant %u session %u tensor %" PRIu32 " seq %" PRIu32
		 " slot %u set %u rank %u dtype %u count %u reason %u (%s)",
		 len, cais_type_name(f.type), f.flags, f.tenant, f.session, f.tensor, f.seq, f.slot,
		 f.set, f.rank, f.dtype, f.count, f.reason, cais_reason_name(f.reason));
	return out;
}

/* ---- the streaming run ---- */

struct chunk {
	uint64_t sent;	/* first transmission, ns */
	uint64_t due;	/* next retransmission, ns */
	uint16_t tries; /* transmissions so far */
	bool done;
};

static uint8_t g_expect[CAIS_HDR_LEN + 4u * CAIS_MAX_ELEMS];

/*
 * Retransmission timeout: --timeout-us is the initial value and the floor;
 * above it the timer follows the measured round time (srtt + 4 rttvar, as
 * TCP does), so a loaded switch does not drown in spurious retransmissions.
 * Every RESULT gives a sample, measured from the chunk's first transmission:
 * with Karn's rule (retransmitted chunks give none) the estimate only sees
 * the fast rounds and stays too low on a loaded machine, where most of the
 * spread is CPU scheduling; measuring from the first send errs the other
 * way, by a timeout, for chunks whose DATA was lost. The round time includes
 * the other ranks' stalls, so it is capped (RTO_CAP_NS); each retry of a
 * chunk doubles its timer, up to the same cap.
 */
#define RTO_CAP_NS (20 * 1000000ull)
static uint64_t g_rto, g_rto_cap, g_srtt, g_rttvar;

static void
rtt_sample(uint64_t rtt)
{
	uint64_t rto;

	if (g_srtt == 0) {
		g_srtt = rtt ? rtt : 1;
		g_rttvar = rtt / 2;
	} else {
		uint64_t d = rtt > g_srtt ? rtt - g_srtt : g_srtt - rtt;

		g_rttvar = (3 * g_rttvar + d) / 4;
		g_srtt = (7 * g_srtt + rtt) / 8;
	}
	rto = g_srtt + 4 * g_rttvar;
	g_rto = rto < o.timeout_ns ? o.timeout_ns : rto > g_rto_cap ? g_rto_cap : rto;
}

static void
on_signal(int sig)
{
	g_stop = sig;
}

/* Check a RESULT for chunk seq (in flight) byte for byte; @return true when right */
static bool
check_result(uint32_t seq, const uint8_t *p, size_t len)
{
	size_t elen = build_expected(g_expect, seq), n = len < elen ? len : elen, off;
	const struct cais_hdr *h = (const struct cais_hdr *)p;
	struct cais_hdr *eh = (struct cais_hdr *)g_expect;
	char t1[256], t2[256];

	/* CONGESTED is the switch's queue at that moment, advice, not content */
	eh->flags |= h->flags & CAIS_F_CONGESTED;
	if (len == elen && memcmp(p, g_expect, len) == 0)
		return true;
	for (off = 0; off < n && p[off] == g_expect[off]; off++)
		;
	fprintf(stderr,
		PROG ": rank %d: RESULT for seq %" PRIu32 " differs at byte %zu"
		     " (got %zu bytes, expected %zu)\n  got      %s\n  expected %s\n",
		o.rank, seq, off, len, elen, hdr_text(p, len, t1, sizeof(t1)),
		hdr_text(g_expect, elen, t2, sizeof(t2)));
	if (off >= CAIS_HDR_LEN && off < n) {
		size_t i = (off - CAIS_HDR_LEN) / 4;
		uint32_t g, e;

		memcpy(&g, p + CAIS_HDR_LEN + 4 * i, 4);
		memcpy(&e, g_expect + CAIS_HDR_LEN + 4 * i, 4);
		fprintf(stderr, "  element %zu: got %" PRId32 ", expected %" PRId32 "\n", i,
			(int32_t)ntohl(g), (int32_t)ntohl(e));
	}
	return false;
}

static int
run_stream(void)
{
	const uint32_t S = (uint32_t)o.slots, K = (uint32_t)o.rounds, Q = o.first_seq;
	struct chunk *win = calloc(S, sizeof(*win));
	uint32_t lo = 0, next = 0, completed = 0; /* chunk indexes: seq = Q + index */
	uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)(o.deadline_s * 1e9);
	uint64_t next_timer = UINT64_MAX, next_progress = t0 + NS_PER_S, elapsed;
	char a[INET_ADDRSTRLEN], t[256];

	if (!win)
		fatal("out of memory");
	g_rto = o.timeout_ns;
	g_rto_cap = o.timeout_ns > RTO_CAP_NS ? o.timeout_ns : RTO_CAP_NS;
	while (completed < K) {
		uint64_t now = now_ns();
		bool busy = false;
		int n;

		if (g_stop || now >= deadline)
			break;
		if (!o.quiet && now >= next_progress) {
			fprintf(stderr,
				PROG ": rank %d: %" PRIu32 "/%" PRIu32 " rounds, %" PRIu64
				     " retransmissions\n",
				o.rank, completed, K, g_c.retx);
			next_progress = now + NS_PER_S;
		}
		/* new chunks: index k may go once every chunk below k - S + 1 has its RESULT */
		while (next < K && next - lo < S) {
			struct chunk *c = &win[next % S];

			c->done = false;
			c->tries = 1;
			c->sent = now;
			c->due = now + g_rto;
			if (c->due < next_timer)
				next_timer = c->due;
			send_data(Q + next, false);
			next++;
			busy = true;
		}
		/* retransmissions */
		if (now >= next_timer) {
			next_timer = UINT64_MAX;
			for (uint32_t k = lo; k != next; k++) {
				struct chunk *c = &win[k % S];
				unsigned int shift;

				if (c->done)
					continue;
				if (now >= c->due) {
					shift = c->tries < BACKOFF_MAX_SHIFT ? c->tries
									     : BACKOFF_MAX_SHIFT;
					c->tries++;
					c->due =
					    now + ((g_rto << shift) < g_rto_cap ? g_rto << shift
										: g_rto_cap);
					send_data(Q + k, true);
					busy = true;
				}
				if (c->due < next_timer)
					next_timer = c->due;
			}
		}
		if (g_tx.n)
			tx_flush();

		/* RESULTs */
		n = rx_burst();
		for (int i = 0; i < n; i++) {
			const uint8_t *p = g_rx_buf[i];
			size_t len = g_rx.msg[i].msg_len;
			const struct cais_hdr *h = (const struct cais_hdr *)p;
			uint32_t seq, k;
			unsigned int type;

			busy = true;
			if (!from_agg(&g_rx.from[i]) || cais_hdr_check(p, len) != CAIS_HDR_OK ||
			    (g_rx.msg[i].msg_hdr.msg_flags & MSG_TRUNC)) {
				g_c.foreign++;
				g_c.errors++;
				fprintf(
				    stderr, PROG ": rank %d: unexpected datagram from %s:%u: %s\n",
				    o.rank,
				    inet_ntop(AF_INET, &g_rx.from[i].sin_addr, a, sizeof(a)),
				    ntohs(g_rx.from[i].sin_port), hdr_text(p, len, t, sizeof(t)));
				continue;
			}
			type = cais_hdr_type(h);
			seq = ntohl(h->seq);
			k = seq - Q;
			if (type == CAIS_TYPE_REJECT) {
				if (k - lo < next - lo && ntohs(h->tenant) == o.tenant &&
				    ntohs(h->session) == o.session &&
				    ntohl(h->tensor) == o.tensor) {
					g_c.errors++;
					fprintf(stderr,
						PROG ": rank %d: the switch refused our DATA: %s\n",
						o.rank, hdr_text(p, len, t, sizeof(t)));
					if (!win[k % S].done) { /* fail, but do not hang on it */
						win[k % S].done = true;
						completed++;
					}
				} else {
					g_c.rejects_ignored++; /* provoked by --garbage */
				}
				continue;
			}
			if (type == CAIS_TYPE_ACK) {
				/*
				 * PROTOCOL.md E6: our retransmission was already counted.
				 * It must name us and our tensor; the round stays open
				 * until its RESULT, so the timer keeps running.
				 */
				if (h->rank != o.rank || ntohs(h->tenant) != o.tenant ||
				    ntohs(h->session) != o.session || ntohl(h->tensor) != o.tensor ||
				    len != CAIS_HDR_LEN) {
					g_c.errors++;
					fprintf(stderr, PROG ": rank %d: ACK not for us: %s\n",
						o.rank, hdr_text(p, len, t, sizeof(t)));
				} else {
					g_c.acks++;
				}
				continue;
			}
			if (type != CAIS_TYPE_RESULT) {
				g_c.errors++;
				fprintf(stderr, PROG ": rank %d: unexpected %s\n", o.rank,
					hdr_text(p, len, t, sizeof(t)));
				continue;
			}
			if (chance(o.drop_results)) {
				g_c.results_dropped++;
				continue;
			}
			if (!(k - lo < next - lo) || win[k % S].done) {
				g_c.results_ignored++; /* duplicate or stale */
				continue;
			}
			rtt_sample(now_ns() - win[k % S].sent);
			if (check_result(seq, p, len))
				g_c.elements_checked += chunk_count(seq);
			else
				g_c.errors++;
			win[k % S].done = true;
			completed++;
		}
		while (lo != next && win[lo % S].done)
			lo++;

		if (!busy && completed < K) {
			/* wait for a RESULT, the next timer or the deadline */
			uint64_t until = next_timer < deadline ? next_timer : deadline;
			struct pollfd pfd = {.fd = g_fd, .events = POLLIN};
			struct timespec ts;

			now = now_ns();
			if (until > now + 100 * 1000000ull)
				until =
				    now + 100 * 1000000ull; /* wake up for progress and signals */
			if (until > now) {
				ts.tv_sec = (time_t)((until - now) / NS_PER_S);
				ts.tv_nsec = (long)((until - now) % NS_PER_S);
				ppoll(&pfd, 1, &ts, NULL);
			}
		}
	}
	elapsed = now_ns() - t0;

	if (completed < K) {
		uint32_t missing = K - completed, shown = 0;

		fprintf(stderr,
			PROG ": rank %d: FAILED: %s after %.3f s: %" PRIu32 " of %" PRIu32
			     " rounds missing (next to send: seq %" PRIu32 ", %" PRIu32
			     " in flight); %" PRIu64 " retransmissions, %" PRIu64
			     " RESULTs dropped on purpose, %" PRIu64 " ignored, %" PRIu64
			     " send errors\n",
			o.rank, g_stop ? "interrupted" : "deadline", (double)elapsed / 1e9, missing,
			K, Q + next, next - lo, g_c.retx, g_c.results_dropped, g_c.results_ignored,
			g_c.send_errors);
		for (uint32_t k = lo; k != next && shown < 8; k++)
			if (!win[k % S].done) {
				fprintf(stderr,
					"  missing: seq %" PRIu32
					" (slot %u set %u, count %u), sent %u "
					"time(s)\n",
					Q + k, (unsigned int)((Q + k) & (S - 1)),
					(unsigned int)(((Q + k) / S) & 1), chunk_count(Q + k),
					win[k % S].tries);
				shown++;
			}
		if (next < K)
			fprintf(stderr, "  never sent: seq %" PRIu32 " .. %" PRIu32 "\n", Q + next,
				Q + K - 1);
		free(win);
		return 1;
	}
	free(win);
	printf("rank %d: %s %s %" PRIu32 " rounds, %" PRIu64 " elements checked, %" PRIu64
	       " errors, %" PRIu64 " retransmissions, %" PRIu64
	       " RESULTs dropped on purpose, %" PRIu64
	       " duplicate/stale RESULTs ignored, %.3f s (seq %" PRIu32 "..%" PRIu32
	       ", srtt %.0f us, DATA lost %" PRIu64 ", duplicated %" PRIu64 ", garbage %" PRIu64
	       ", REJECTs ignored %" PRIu64 ", ACKs %" PRIu64 ")\n",
	       o.rank, g_c.errors ? "FAILED" : "ok", op_names[o.op], K, g_c.elements_checked,
	       g_c.errors, g_c.retx, g_c.results_dropped, g_c.results_ignored,
	       (double)elapsed / 1e9, Q, Q + K - 1, (double)g_srtt / 1e3, g_c.data_lost,
	       g_c.data_dup, g_c.garbage_sent, g_c.rejects_ignored, g_c.acks);
	fflush(stdout);
	return g_c.errors ? 1 : 0;
}

/* ---- --expect-reject ---- */

static int
run_expect_reject(void)
{
	const uint32_t seq = o.first_seq, S = (uint32_t)o.slots;
	uint16_t count = o.count >= 0 ? (uint16_t)o.count : (uint16_t)o.elems;
	unsigned int n_payload = count;
	struct cais_fields f = data_fields(seq, count, false);
	uint16_t slotf;
	size_t len;
	uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)(o.deadline_s * 1e9), next_send = 0;
	unsigned int sends = 0;
	char t[256];

	if (o.expect_reject == CAIS_R_BAD_DTYPE)
		f.dtype = 1;
	if (o.expect_reject == CAIS_R_NO_SLOT)
		f.slot = (uint16_t)S; /* index S: outside the pool; set still from seq */
	slotf = (uint16_t)(f.slot | (f.set ? CAIS_SET_BIT : 0));
	if (n_payload > MAX_PAYLOAD_ELEMS) /* count > E: as much as a jumbo frame holds */
		n_payload = MAX_PAYLOAD_ELEMS;
	cais_hdr_build((struct cais_hdr *)g_data_buf[0], &f);
	data_payload(g_data_buf[0] + CAIS_HDR_LEN, seq, n_payload);
	len = CAIS_HDR_LEN + 4u * n_payload;

	while (!g_stop) {
		uint64_t now = now_ns();
		struct pollfd pfd = {.fd = g_fd, .events = POLLIN};
		int n;

		if (now >= deadline)
			break;
		if (now >= next_send) {
			/* a REJECT may be lost too: resend every 200 ms (the switch rate-limits) */
			if (sendto(g_fd, g_data_buf[0], len, 0, (const struct sockaddr *)&o.agg,
				   sizeof(o.agg)) < 0) {
				if (errno == EMSGSIZE && n_payload > (unsigned int)o.elems) {
					n_payload = (unsigned int)o.elems; /* path MTU too small */
					len = CAIS_HDR_LEN + 4u * n_payload;
					continue;
				}
				if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
					fatal("sendto: %s", strerror(errno));
			}
			sends++;
			next_send = now + 200 * 1000000ull;
		}
		poll(&pfd, 1, 20);
		n = rx_burst();
		for (int i = 0; i < n; i++) {
			const uint8_t *p = g_rx_buf[i];
			size_t rlen = g_rx.msg[i].msg_len;
			struct cais_fields r;
			const char *why = NULL;

			if (!from_agg(&g_rx.from[i]) || cais_hdr_check(p, rlen) != CAIS_HDR_OK) {
				fprintf(stderr, PROG ": rank %d: ignoring a datagram: %s\n", o.rank,
					hdr_text(p, rlen, t, sizeof(t)));
				continue;
			}
			cais_hdr_read((const struct cais_hdr *)p, &r);
			if (r.type != CAIS_TYPE_REJECT)
				why = "not a REJECT";
			else if (r.reason != o.expect_reject)
				why = "wrong reason";
			else if (r.tenant != f.tenant || r.session != f.session ||
				 r.tensor != f.tensor || r.seq != seq ||
				 ntohs(((const struct cais_hdr *)p)->slot) != slotf)
				why = "does not echo tenant/session/tensor/seq/slot";
			else if (r.rank != CAIS_RANK_NONE)
				why = "rank is not 0xFF";
			else if (r.count != 0)
				why = "count is not 0";
			else if (rlen != CAIS_HDR_LEN)
				why = "carries a payload";
			else if (r.flags !=
				 (o.expect_reject == CAIS_R_FWD_ONLY ? CAIS_F_FWD_ONLY : 0))
				why = "unexpected flags";
			if (why) {
				char sent[256];

				fprintf(
				    stderr,
				    PROG
				    ": rank %d: FAILED: expected REJECT %s, got a reply that %s\n"
				    "  sent %s\n  got  %s\n",
				    o.rank, cais_reason_name((unsigned int)o.expect_reject), why,
				    hdr_text(g_data_buf[0], len, sent, sizeof(sent)),
				    hdr_text(p, rlen, t, sizeof(t)));
				return 1;
			}
			printf("rank %d: ok REJECT %s for seq %" PRIu32 " (count %u, %u payload "
			       "elements, sent %u time(s)), %.3f s\n",
			       o.rank, cais_reason_name(r.reason), seq, count, n_payload, sends,
			       (double)(now_ns() - t0) / 1e9);
			fflush(stdout);
			return 0;
		}
	}
	fprintf(stderr,
		PROG
		": rank %d: FAILED: %s: no REJECT %s within %.1f s (DATA sent %u time(s): %s)\n",
		o.rank, g_stop ? "interrupted" : "deadline",
		cais_reason_name((unsigned int)o.expect_reject), o.deadline_s, sends,
		hdr_text(g_data_buf[0], len, t, sizeof(t)));
	return 1;
}

int
main(int argc, char **argv)
{
	struct sigaction sa;

	parse_args(argc, argv);
	vtab_init();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	g_rng = mix64(o.seed * 0x100000001B3ull ^ (uint64_t)o.rank << 56 ^ 0xFA17ull);
	if (!g_rng)
		g_rng = 1;
	open_socket();
	return o.expect_reject ? run_expect_reject() : run_stream();
}
