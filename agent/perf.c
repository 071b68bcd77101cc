/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-allreduce-perf: the agent's test and benchmark client (PROTOCOL.md
 * section 6), in the spirit of nccl-tests' all_reduce_perf. One process per
 * rank, each on its own host; every rank runs the same sizes in the same
 * order, so every rank issues the same collectives.
 *
 * With --check, the input of rank r at element i of iteration g is a
 * deterministic function of (r, i, g, size), so every rank computes every
 * rank's input, hence the expected result, itself, and checks every element
 * it gets back against PROTOCOL.md section 6's bound for the path the
 * collective took.
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
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

#include <cais/cais.h>
#include <cais/proto.h>

#include "cmn_addr.h"
#include "cmn_cpu.h"

#define PROG "cais-allreduce-perf"

/** Exit statuses. */
enum {
	EXIT_PASS = 0,
	EXIT_FAILED = 1, /* a wrong element or a failed collective */
	EXIT_USAGE = 2,	 /* bad options */
	EXIT_SETUP = 3,	 /* the communicator could not be made, out of memory */
};

/** Sizes of a --min-bytes/--max-bytes sweep or a --bytes list, at most. */
#define MAX_SIZES	64
/** Wrong elements printed per size (the count covers all of them). */
#define MAX_WRONG_SHOWN 5
/** After the closing collective, keep the communicator this long before destroying it. */
#define LINGER_MS	100

/* Short names of the fallback reasons, for the path column. */
#define X_NAME(name, text) #name,
static const char *const fb_short[] = {CAIS_FALLBACKS(X_NAME)};
#undef X_NAME

struct opts {
	unsigned int rank, world;
	bool have_rank, have_world;
	struct sockaddr_in sw;
	bool have_switch;
	struct sockaddr_in *peers;
	unsigned int n_peers;
	struct sockaddr_in *stripes; /* --stripes: in place of --switch */
	unsigned int n_stripes;
	uint16_t tenant, session;
	uint32_t tensor;
	uint32_t slots;
	uint16_t elems;
	double scale, b16_scale;
	enum cais_datatype dt;
	enum cais_redop op;
	enum cais_wire_dtype wire;
	size_t sizes[MAX_SIZES];
	unsigned int n_sizes;
	uint64_t min_bytes, max_bytes; /* 0: not given */
	unsigned int iters, warmup;
	enum cais_path path;
	bool check;
	size_t threshold;
	uint32_t retx_us, retries, timeout_ms, check_every, first_seq;
	unsigned int threads;
	unsigned int delay_ms;
	bool interleave;
	bool sync;
	bool quiet;
	const char *manager; /* joining through cais-manager: */
	const char *manager_key, *job, *tenant_name;
	struct sockaddr_in data;
	bool have_data;
	bool have_bytes;
};

/* Managed runs: one training "step" per collective, as cais_step_begin() wants. */
static uint64_t step_no;

/* ---- usage ---- */

static void
usage_communicator(FILE *f, const struct cais_config *d)
{
	fprintf(f,
		"Communicator (static mode; every value must match the switch's session):\n"
		"  --rank R              this process's rank, 0..N-1\n"
		"  --world N             the world size, 1..%u\n"
		"  --switch IP[:PORT]    the aggregator address (port default %u)\n"
		"  --stripes LIST        in place of --switch: the switch servers the session is\n"
		"                        striped over, comma-separated IP[:PORT], a power of two\n"
		"                        up to --threads; flow i sends to entry i mod k, so each\n"
		"                        carries the seqs q with q mod k = its index; every one\n"
		"                        holds the same session (docs/PROTOCOL.md E8)\n"
		"  --peers LIST          every rank's data address in rank order, comma-separated\n"
		"                        IP[:PORT] (port default %u); the port of this rank's entry\n"
		"                        is its UDP port registered with the switch, and the ring\n"
		"                        fallback listens on the same TCP port\n"
		"  --tenant T            tenant id (default 1)\n"
		"  --session S           session id (default 1)\n"
		"  --tensor X            tensor id (default 1); the switch's entry gives the op\n"
		"                        (avg needs a tensor the switch sums)\n"
		"  --slots S             the session's pool size, power of two (default %u)\n"
		"  --elems E             elements per packet, 1..%u (default %u)\n"
		"  --scale F             fixed-point scale of FIXED32 (default %g)\n"
		"  --b16-scale F         scale of BLOCK16 (--wire block16; default 2^%d: blocks\n"
		"                        carry the magnitude, the scale only the floor)\n"
		"  --manager IP:PORT     join through cais-manager instead: tenant, session,\n"
		"                        aggregator, peers, slots, elems and first seq come from it;\n"
		"                        every collective is a step (cais_step_begin: the manager's\n"
		"                        offload list and scale; with --path auto a float tensor's\n"
		"                        first two take the ring, before the manager has every\n"
		"                        rank's max |x|); --switch, --peers, --tenant, --session,\n"
		"                        --first-seq are then not used\n"
		"  --manager-key FILE    the manager's HMAC key\n"
		"  --job NAME            the job's name at the manager (default cais-perf)\n"
		"  --tenant-name NAME    the tenant's name at the manager (default default)\n"
		"  --data IP:PORT        this rank's data address with --manager (default: its\n"
		"                        --peers entry)\n\n",
		CAIS_MAX_WORLD, CAIS_UDP_PORT, CAIS_UDP_PORT, d->slots, CAIS_MAX_ELEMS, d->elems,
		d->scale, ilogb(d->b16_scale));
}

static void
usage_collectives(FILE *f, const struct cais_config *d)
{
	fprintf(f,
		"Collectives:\n"
		"  --dtype T             f32 | bf16 | f16 | i32 (default f32)\n"
		"  --op OP               sum | avg | max | min (default sum)\n"
		"  --wire W              fixed32 | block16: how float elements cross the wire\n"
		"                        (docs/PROTOCOL.md E4; int32 is always fixed32; with\n"
		"                        --manager the manager decides; default fixed32)\n"
		"  --bytes B[,B...]      one size (or a list of sizes), in bytes (default 1M)\n"
		"  --min-bytes B --max-bytes B\n"
		"                        every doubling from B_min up to B_max\n"
		"                        (sizes take suffixes K, M, G: powers of 1024; each must be\n"
		"                        a multiple of the element size; the smallest is 1 element)\n"
		"  --iters K             timed iterations per size (default 20)\n"
		"  --warmup W            untimed iterations per size, before the timed ones "
		"(default 5)\n"
		"  --path P              auto: the library decides (threshold, fallbacks);\n"
		"                        switch: in-network only, a collective the switch cannot\n"
		"                        serve fails; ring: the fallback ring only (default auto)\n"
		"  --threshold B         offload threshold of --path auto in bytes (K, M, G):\n"
		"                        smaller collectives take the ring (default %zu, the\n"
		"                        library's)\n"
		"  --check               inputs are a function of (rank, element, iteration, size),\n"
		"                        so every rank computes the expected result; every element\n"
		"                        of every iteration (warm-up included) is checked against\n"
		"                        PROTOCOL.md section 6's bound for the path it took\n"
		"  --delay-ms D          sleep D ms before each collective (plays a slow rank)\n"
		"  --interleave          steps: iteration after iteration, each one all-reduce of\n"
		"                        every size in turn (like the layers of a training step),\n"
		"                        instead of size after size; a '# step' line after each\n"
		"                        step, the table at the end\n"
		"  --sync                before each collective, an untimed 1-element all-reduce on\n"
		"                        the ring, which ends only when every rank has issued it:\n"
		"                        the ranks start each timed collective together, so its\n"
		"                        time does not include the others' input filling and\n"
		"                        checking; with --check another after it, before the\n"
		"                        check, so that no rank checks (a CPU-bound pass) while\n"
		"                        another's collective is timed on shared cores (one seq\n"
		"                        each)\n\n",
		d->threshold);
}

static void
usage_library(FILE *f, const struct cais_config *d)
{
	fprintf(f,
		"Library settings (struct cais_config):\n"
		"  --retx-us US          retransmission timer (default %u)\n"
		"  --retries N           retransmissions before the switch counts as silent "
		"(default %u)\n"
		"  --timeout-ms MS       bound on one collective (default %u)\n"
		"  --threads K           flows: worker threads, each with its own UDP socket on\n"
		"                        this rank's port + i, carrying the seqs i modulo K; a\n"
		"                        power of two up to 16; the switch's member entry must\n"
		"                        cover the K ports. 0 (default %u): with --manager one\n"
		"                        per CPU, registered at the join; static: 1\n"
		"  --check-every K       the library samples the error of every K-th in-network\n"
		"                        collective against a ring (and may turn the tensor off "
		"above\n"
		"                        1e-3); 0: never (default %u)\n"
		"  --first-seq Q         seq of the first chunk (default 0). The switch keeps its\n"
		"                        slots' seqs: consecutive runs on one session of a running\n"
		"                        switch must continue the seqs, or their chunks are stale\n"
		"                        there and every collective falls back. Pass the previous\n"
		"                        run's next_seq (its summary line) to the next run.\n\n",
		d->retx_timeout_us, d->retries, d->timeout_ms, d->threads, d->check_every);
}

static void
usage_output(FILE *f)
{
	fputs("Output:\n"
	      "  --quiet               print only the summary line (and errors)\n"
	      "  --help                this text\n"
	      "\n"
	      "Output: a header with the parameters, then one line per size: bytes, count,\n"
	      "dtype, op; path: switch, ring(REASON) or mixed(K/N,REASON) -- K of the N\n"
	      "collectives of that size (warm-up included) in-network, REASON the most\n"
	      "frequent fallback reason (THRESHOLD, TENSOR_OFF, ERROR_ALARM, FORCED, REJECT,\n"
	      "FWD_ONLY, OVERFLOW, SILENT); time(us): the median over the timed iterations of\n"
	      "this rank's cais_iallreduce + cais_wait_status, issue to completion; there is\n"
	      "no barrier, so it includes waiting for the slowest rank to issue (with --check,\n"
	      "the other ranks' checking and input filling), unless --sync, and never this\n"
	      "rank's own --delay-ms sleep; algbw = bytes / time and busbw = algbw x 2(N-1)/N,\n"
	      "in GB/s as nccl-tests define them; retx: DATA retransmissions; #wrong: elements\n"
	      "outside the bound (--check); max_rel_err: max |got - expected| / |expected|\n"
	      "(float types, --check); max(us): the slowest timed iteration. Then a summary\n"
	      "line, '# summary rank=R ... next_seq=Q cpu_ns_per_byte=C warmup_max_ms=U\n"
	      "warmup_max_bytes=B closing_ms=V wall_s=W result=PASS|FAIL' (C: this process's\n"
	      "CPU time, all threads, user and system, over the timed iterations, per byte of\n"
	      "their tensors; U and B: the slowest warm-up iteration and its size; V: the\n"
	      "closing collective), and the library's metrics (which also count the --sync\n"
	      "and closing collectives).\n"
	      "\n"
	      "After the last size every rank takes part in one more collective (1 int32, sum, on\n"
	      "the ring: it ends only when every rank has finished every size, so no rank leaves\n"
	      "while a peer may still need its results); it takes one seq, counted in next_seq.\n"
	      "\n"
	      "Bounds (--check): i32 exact; sum and avg in-network |got - expected| <= N/scale +\n"
	      "|expected| x eps (eps 2^-24 f32, 2^-11 f16, 2^-8 bf16), max and min in-network\n"
	      "1/scale + |expected| x eps; block16 in-network 4 x 2^-14 (sum: x N) + |expected|\n"
	      "x eps; on the ring (fp32 sums of N terms) (N+1) x 2^-24 x\n"
	      "sum|inputs| (avg: / N) + |expected| x eps. Inputs: floats of magnitude in\n"
	      "[0.25, 2) as the dtype represents them, the sign a function of (element,\n"
	      "iteration) only, so no expected value is near 0; i32 of magnitude 1..2^31/N.\n"
	      "\n"
	      "Exit status: 0 every collective completed and every checked element was within\n"
	      "its bound; 1 a collective failed (the run stops there; the library's error is\n"
	      "printed) or an element was wrong; 2 bad options; 3 set-up failed (the\n"
	      "communicator, memory).\n",
	      f);
}

static void
usage(FILE *f)
{
	struct cais_config d;

	cais_config_init(&d);
	fputs("Usage: " PROG " --rank R --world N --switch IP[:PORT] --peers IP[:PORT],... "
	      "[options]\n"
	      "\n"
	      "All-reduce benchmark and checker of libcais, in the spirit of nccl-tests'\n"
	      "all_reduce_perf: run one process per rank, each on its own host, all with the\n"
	      "same options except --rank. Every rank prints its own table (--quiet: only the\n"
	      "summary line); errors go to stderr, prefixed with the rank.\n\n",
	      f);
	usage_communicator(f, &d);
	usage_collectives(f, &d);
	usage_library(f, &d);
	usage_output(f);
}

static void __attribute__((noreturn, format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '" PROG " --help'.\n");
	exit(EXIT_USAGE);
}

static void __attribute__((noreturn)) out_of_memory(void)
{
	fprintf(stderr, PROG ": out of memory\n");
	exit(EXIT_SETUP);
}

/* ---- option parsing: one checked helper per kind of value ---- */

static uint64_t
parse_uint(const char *opt, const char *s, uint64_t min, uint64_t max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		usage_error("%s '%s': not a non-negative integer", opt, s);
	v = strtoull(s, &end, 0);
	if (errno || *end)
		usage_error("%s '%s': not a non-negative integer", opt, s);
	if (v < min || v > max)
		usage_error("%s %llu: out of range %" PRIu64 "..%" PRIu64, opt, v, min, max);
	return v;
}

/* A byte count with an optional K/M/G suffix (powers of 1024); 0 when zero_ok. */
static uint64_t
parse_size(const char *opt, const char *s, bool zero_ok)
{
	char *end;
	unsigned long long v;
	unsigned int shift = 0;

	errno = 0;
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		usage_error("%s '%s': not a byte count", opt, s);
	v = strtoull(s, &end, 10);
	if (errno)
		usage_error("%s '%s': not a byte count", opt, s);
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	else if (*end == 'G' || *end == 'g')
		shift = 30;
	if (shift)
		end++;
	if (*end)
		usage_error("%s '%s': not a byte count (digits, then K, M or G)", opt, s);
	if (v == 0 && !zero_ok)
		usage_error("%s '%s': must be at least 1 element", opt, s);
	if (v > (UINT64_C(1) << 40) >> shift)
		usage_error("%s '%s': too large", opt, s);
	return (uint64_t)v << shift;
}

static uint64_t
parse_bytes(const char *opt, const char *s)
{
	return parse_size(opt, s, false);
}

static double
parse_scale(const char *opt, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || !(v > 0))
		usage_error("%s '%s': a positive number", opt, s);
	return v;
}

/* IP[:PORT] into a; port default_port when absent. */
static void
parse_addr(const char *opt, const char *s, uint16_t default_port, struct sockaddr_in *a)
{
	if (cmn_parse_addr(s, default_port, a) != 0)
		usage_error("%s '%s': expected IPv4[:PORT] (port 1..65535)", opt, s);
}

/* A comma-separated IP[:PORT] list of at most max entries into *list and *n. */
static void
parse_addr_list(const char *name, const char *s, unsigned int max, struct sockaddr_in **list,
		unsigned int *n_out)
{
	char *copy = strdup(s), *save = NULL, *tok;
	unsigned int n = 1;

	if (!copy)
		out_of_memory();
	for (const char *p = s; *p; p++)
		n += *p == ',';
	if (n > max)
		usage_error("%s: %u entries, at most %u", name, n, max);
	free(*list);
	*list = calloc(n, sizeof(**list));
	if (!*list)
		out_of_memory();
	*n_out = 0;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		parse_addr(name, tok, CAIS_UDP_PORT, &(*list)[(*n_out)++]);
	if (*n_out != n)
		usage_error("%s '%s': an empty entry", name, s);
	free(copy);
}

static void
parse_bytes_list(struct opts *o, const char *s)
{
	char *copy = strdup(s), *save = NULL, *tok;

	if (!copy)
		out_of_memory();
	o->n_sizes = 0;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->n_sizes == MAX_SIZES)
			usage_error("--bytes: at most %u sizes", MAX_SIZES);
		o->sizes[o->n_sizes++] = (size_t)parse_bytes("--bytes", tok);
	}
	if (o->n_sizes == 0)
		usage_error("--bytes '%s': no size", s);
	free(copy);
}

/* fn(s): the value of type in first..last whose name_of() is s, else a usage error. */
#define PARSE_NAMED(fn, type, first, last, name_of, opt, choices)                                  \
	static type fn(const char *s)                                                              \
	{                                                                                          \
		for (int v = (first); v <= (last); v++)                                            \
			if (strcmp(s, name_of((type)v)) == 0)                                      \
				return (type)v;                                                    \
		usage_error(opt " '%s': one of " choices, s);                                      \
	}

PARSE_NAMED(parse_dtype, enum cais_datatype, CAIS_FLOAT32, CAIS_INT32, cais_datatype_name,
	    "--dtype", "f32, bf16, f16, i32")
PARSE_NAMED(parse_op, enum cais_redop, CAIS_OP_SUM, CAIS_OP_MIN, cais_redop_name, "--op",
	    "sum, avg, max, min")
PARSE_NAMED(parse_path, enum cais_path, CAIS_PATH_AUTO, CAIS_PATH_RING, cais_path_name, "--path",
	    "auto, switch, ring")

/*
 * The options: one row each, parsed by the checked helper of its kind into
 * its field of struct opts (and its have_ flag, where it has one).
 */
enum opt_kind {
	K_RANK,	       /* unsigned int 0..254 */
	K_WORLD,       /* unsigned int 1..255 */
	K_U16,	       /* uint16_t in min..max */
	K_U32,	       /* uint32_t in min..max */
	K_UINT,	       /* unsigned int in min..max */
	K_SLOTS,       /* uint32_t, a power of two */
	K_SCALE,       /* double > 0 */
	K_ADDR,	       /* struct sockaddr_in, port default 51733 */
	K_PEERS,       /* the --peers list */
	K_STRIPES,     /* the --stripes list */
	K_STRING,      /* const char * */
	K_DTYPE,       /* enum cais_datatype */
	K_OP,	       /* enum cais_redop */
	K_PATH,	       /* enum cais_path */
	K_WIRE,	       /* enum cais_wire_dtype */
	K_BYTES_LIST,  /* the --bytes list */
	K_BYTES,       /* uint64_t byte count >= 1 */
	K_SIZE,	       /* size_t byte count >= 0 */
	K_FLAG,	       /* bool */
};

#define NO_HAVE SIZE_MAX
#define OPT(name, kind, field, min, max)                                                           \
	{name, kind, offsetof(struct opts, field), NO_HAVE, min, max}
#define OPT_HAVE(name, kind, field, have)                                                          \
	{name, kind, offsetof(struct opts, field), offsetof(struct opts, have), 0, 0}

static const struct opt_def {
	const char *name;
	enum opt_kind kind;
	size_t off;  /* the field */
	size_t have; /* its bool have_ flag, or NO_HAVE */
	uint64_t min, max;
} opt_defs[] = {
    OPT_HAVE("rank", K_RANK, rank, have_rank),
    OPT_HAVE("world", K_WORLD, world, have_world),
    OPT_HAVE("switch", K_ADDR, sw, have_switch),
    OPT("peers", K_PEERS, peers, 0, 0),
    OPT("stripes", K_STRIPES, stripes, 0, 0),
    OPT("tenant", K_U16, tenant, 0, UINT16_MAX),
    OPT("session", K_U16, session, 0, UINT16_MAX),
    OPT("tensor", K_U32, tensor, 0, UINT32_MAX),
    OPT("slots", K_SLOTS, slots, 1, CAIS_MAX_SLOTS),
    OPT("elems", K_U16, elems, 1, CAIS_MAX_ELEMS),
    OPT("scale", K_SCALE, scale, 0, 0),
    OPT("b16-scale", K_SCALE, b16_scale, 0, 0),
    OPT("manager", K_STRING, manager, 0, 0),
    OPT("manager-key", K_STRING, manager_key, 0, 0),
    OPT("job", K_STRING, job, 0, 0),
    OPT("tenant-name", K_STRING, tenant_name, 0, 0),
    OPT_HAVE("data", K_ADDR, data, have_data),
    OPT("dtype", K_DTYPE, dt, 0, 0),
    OPT("op", K_OP, op, 0, 0),
    OPT("wire", K_WIRE, wire, 0, 0),
    OPT_HAVE("bytes", K_BYTES_LIST, sizes, have_bytes),
    OPT("min-bytes", K_BYTES, min_bytes, 0, 0),
    OPT("max-bytes", K_BYTES, max_bytes, 0, 0),
    OPT("iters", K_UINT, iters, 1, 1000000),
    OPT("warmup", K_UINT, warmup, 0, 1000000),
    OPT("path", K_PATH, path, 0, 0),
    OPT("check", K_FLAG, check, 0, 0),
    OPT("threshold", K_SIZE, threshold, 0, 0),
    OPT("retx-us", K_U32, retx_us, 1, 10000000),
    OPT("retries", K_U32, retries, 0, 255),
    OPT("timeout-ms", K_U32, timeout_ms, 1, 86400000),
    OPT("check-every", K_U32, check_every, 0, UINT32_MAX),
    OPT("first-seq", K_U32, first_seq, 0, UINT32_MAX),
    OPT("threads", K_UINT, threads, 0, 16),
    OPT("delay-ms", K_UINT, delay_ms, 0, 600000),
    OPT("interleave", K_FLAG, interleave, 0, 0),
    OPT("sync", K_FLAG, sync, 0, 0),
    OPT("quiet", K_FLAG, quiet, 0, 0),
};
#define N_OPTS (sizeof(opt_defs) / sizeof(opt_defs[0]))

/* Parse the value of option d (given as --name) into its field. */
static void
apply_opt(struct opts *o, const struct opt_def *d, const char *v)
{
	void *f = (char *)o + d->off;
	char name[32];

	snprintf(name, sizeof(name), "--%s", d->name);
	if (d->have != NO_HAVE)
		*(bool *)((char *)o + d->have) = true;
	switch (d->kind) {
	case K_RANK:
		*(unsigned int *)f = (unsigned int)parse_uint(name, v, 0, CAIS_MAX_WORLD - 1);
		break;
	case K_WORLD:
		*(unsigned int *)f = (unsigned int)parse_uint(name, v, 1, CAIS_MAX_WORLD);
		break;
	case K_U16:
		*(uint16_t *)f = (uint16_t)parse_uint(name, v, d->min, d->max);
		break;
	case K_U32:
		*(uint32_t *)f = (uint32_t)parse_uint(name, v, d->min, d->max);
		break;
	case K_UINT:
		*(unsigned int *)f = (unsigned int)parse_uint(name, v, d->min, d->max);
		break;
	case K_SLOTS:
		*(uint32_t *)f = (uint32_t)parse_uint(name, v, d->min, d->max);
		if (!cais_pool_size_ok(*(uint32_t *)f))
			usage_error("%s %s: a power of two in 1..%u", name, v, CAIS_MAX_SLOTS);
		break;
	case K_SCALE:
		*(double *)f = parse_scale(name, v);
		break;
	case K_ADDR:
		parse_addr(name, v, CAIS_UDP_PORT, f);
		break;
	case K_PEERS:
		parse_addr_list(name, v, CAIS_MAX_WORLD, &o->peers, &o->n_peers);
		break;
	case K_STRIPES:
		parse_addr_list(name, v, 16, &o->stripes, &o->n_stripes);
		break;
	case K_STRING:
		*(const char **)f = v;
		break;
	case K_DTYPE:
		*(enum cais_datatype *)f = parse_dtype(v);
		break;
	case K_OP:
		*(enum cais_redop *)f = parse_op(v);
		break;
	case K_PATH:
		*(enum cais_path *)f = parse_path(v);
		break;
	case K_WIRE:
		if (cais_dtype_parse(v) < 0)
			usage_error("%s '%s': one of fixed32, block16", name, v);
		*(enum cais_wire_dtype *)f = (enum cais_wire_dtype)cais_dtype_parse(v);
		break;
	case K_BYTES_LIST:
		parse_bytes_list(o, v);
		break;
	case K_BYTES:
		*(uint64_t *)f = parse_bytes(name, v);
		break;
	case K_SIZE:
		*(size_t *)f = (size_t)parse_size(name, v, true);
		break;
	case K_FLAG:
		*(bool *)f = true;
		break;
	}
}

/* The defaults: the library's (cais_config_init()) where it has them. */
static void
opts_defaults(struct opts *o)
{
	struct cais_config d;

	cais_config_init(&d);
	memset(o, 0, sizeof(*o));
	o->tenant = 1;
	o->session = 1;
	o->tensor = 1;
	o->slots = d.slots;
	o->elems = d.elems;
	o->scale = d.scale;
	o->b16_scale = d.b16_scale;
	o->dt = CAIS_FLOAT32;
	o->op = CAIS_OP_SUM;
	o->iters = 20;
	o->warmup = 5;
	o->path = CAIS_PATH_AUTO;
	o->threshold = d.threshold;
	o->retx_us = d.retx_timeout_us;
	o->retries = d.retries;
	o->timeout_ms = d.timeout_ms;
	o->check_every = d.check_every;
	o->threads = d.threads;
}

/* What the options say together: required ones, conflicts, the list of sizes. */
static void
check_args(struct opts *o)
{
	size_t esz = cais_datatype_size(o->dt);

	if (!o->have_rank || !o->have_world)
		usage_error("--rank and --world are required");
	if (o->rank >= o->world)
		usage_error("--rank %u: must be below --world %u", o->rank, o->world);
	if (o->manager) {
		if (!o->have_data && o->peers && o->n_peers == o->world) {
			o->data = o->peers[o->rank];
			o->have_data = true;
		}
		if (!o->have_data)
			usage_error(
			    "--manager needs this rank's address: --data IP:PORT (or --peers)");
	} else {
		if ((!o->have_switch && !o->stripes) || !o->peers)
			usage_error("--switch (or --stripes) and --peers are required (or "
				    "--manager)");
		if (o->have_switch && o->stripes)
			usage_error("--switch and --stripes: one or the other");
		if (o->stripes)
			o->sw = o->stripes[0]; /* the summary's first switch */
		if (o->n_peers != o->world)
			usage_error("--peers has %u entries, --world is %u: one per rank",
				    o->n_peers, o->world);
	}
	if (o->have_bytes && (o->min_bytes || o->max_bytes))
		usage_error("--bytes and --min-bytes/--max-bytes: one or the other");
	if (!o->have_bytes && (!o->min_bytes != !o->max_bytes))
		usage_error("--min-bytes and --max-bytes go together");
	if (o->min_bytes) {
		if (o->max_bytes < o->min_bytes)
			usage_error("--max-bytes %" PRIu64 " is below --min-bytes %" PRIu64,
				    o->max_bytes, o->min_bytes);
		for (uint64_t b = o->min_bytes; b <= o->max_bytes; b *= 2) {
			if (o->n_sizes == MAX_SIZES)
				usage_error("--min-bytes..--max-bytes: more than %u sizes",
					    MAX_SIZES);
			o->sizes[o->n_sizes++] = (size_t)b;
		}
	} else if (!o->have_bytes) {
		o->sizes[o->n_sizes++] = 1u << 20;
	}
	if (o->threads & (o->threads - 1) || o->threads > o->slots)
		usage_error("--threads %u: 0, or a power of two up to --slots %u", o->threads,
			    o->slots);
	if (o->stripes && o->manager)
		usage_error("--stripes: static mode only (with --manager, the manager names the "
			    "switches)");
	if (o->n_stripes & (o->n_stripes - 1) || o->n_stripes > (o->threads ? o->threads : 1))
		usage_error("--stripes: %u switches; a power of two, at most --threads (%u): "
			    "every stripe needs a flow",
			    o->n_stripes, o->threads ? o->threads : 1);
	for (unsigned int i = 0; i < o->n_sizes; i++)
		if (o->sizes[i] % esz)
			usage_error(
			    "%zu bytes is not a multiple of the %s element size (%zu bytes)",
			    o->sizes[i], cais_datatype_name(o->dt), esz);
}

static void
parse_args(int argc, char **argv, struct opts *o)
{
	struct option long_opts[N_OPTS + 2];
	int c, idx;

	for (size_t i = 0; i < N_OPTS; i++)
		long_opts[i] = (struct option){opt_defs[i].name,
					       opt_defs[i].kind == K_FLAG ? no_argument
									  : required_argument,
					       NULL, 256 + (int)i};
	long_opts[N_OPTS] = (struct option){"help", no_argument, NULL, 'h'};
	long_opts[N_OPTS + 1] = (struct option){NULL, 0, NULL, 0};
	opts_defaults(o);
	/* "h": --help's short form; everything else is long-only */
	while ((c = getopt_long(argc, argv, "h", long_opts, &idx)) != -1) {
		if (c >= 256 && c < 256 + (int)N_OPTS) {
			apply_opt(o, &opt_defs[c - 256], optarg);
		} else if (c == 'h') {
			usage(stdout);
			exit(EXIT_PASS);
		} else {
			fprintf(stderr, "Try '" PROG " --help'.\n");
			exit(EXIT_USAGE);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	check_args(o);
}

/* ---- element types ---- */

static float
bits_to_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t
f32_to_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static uint16_t
f32_to_bf16(float f)
{
	uint32_t u = f32_to_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
	u += 0x7fffu + ((u >> 16) & 1);		     /* round to nearest even */
	return (uint16_t)(u >> 16);
}

static double
bf16_to_double(uint16_t h)
{
	return bits_to_f32((uint32_t)h << 16);
}

static uint16_t
f32_to_f16(float f)
{
	uint32_t u = f32_to_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;

	if (a > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u);
	if (a >= 0x477ff000u) /* 65520 and above round to infinity */
		return (uint16_t)(sign | 0x7c00u);
	if (a < 0x38800000u) /* below 2^-14: subnormal, in units of 2^-24 */
		return (uint16_t)(sign | (uint32_t)nearbyintf(bits_to_f32(a) * 0x1p24f));
	a -= 0x38000000u; /* rebias the exponent, 127 -> 15 */
	a += 0xfffu + ((a >> 13) & 1);
	return (uint16_t)(sign | (a >> 13));
}

static double
f16_to_double(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;

	if (e == 0) /* zero or subnormal: m x 2^-24, exact in float */
		return bits_to_f32(sign) + (h & 0x8000u ? -1.0 : 1.0) * (double)m * 0x1p-24;
	if (e == 31)
		return bits_to_f32(sign | 0x7f800000u | (m << 13));
	return bits_to_f32(sign | ((e + 112) << 23) | (m << 13));
}

/* ---- the inputs: a function of (rank, element, iteration, size) ---- */

static uint64_t
mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The key of an (iteration, size): every rank derives the same one. */
static uint64_t
iter_key(uint64_t iter, size_t bytes)
{
	return mix64(iter * 0x2545f4914f6cdd1dull ^ (uint64_t)bytes);
}

/* Element i's sign: the same on every rank, so no sum is near 0. */
static bool
negative(uint64_t key, size_t i)
{
	return mix64(key ^ ((uint64_t)i << 1)) & 1;
}

/* Rank r's input at element i (sign neg), as the dtype represents it; its bits in *raw. */
static double
input(const struct opts *o, uint64_t key, unsigned int r, size_t i, bool neg, uint32_t *raw)
{
	uint64_t h =
	    mix64(key + (uint64_t)i * 0xd6e8feb86659fd93ull + (uint64_t)r * 0xa0761d6478bd642full);

	if (o->dt == CAIS_INT32) {
		int64_t mag = 1 + (int64_t)(h % (uint64_t)(INT32_MAX / o->world));
		int32_t v = (int32_t)(neg ? -mag : mag);

		*raw = (uint32_t)v;
		return v;
	}
	/* magnitude in [0.25, 2) with 24 random bits: not on the fixed-point grid */
	float f = (float)(0.25 + 1.75 * (double)(h >> 40) / 16777216.0);

	if (neg)
		f = -f;
	switch (o->dt) {
	case CAIS_BFLOAT16:
		*raw = f32_to_bf16(f);
		return bf16_to_double((uint16_t)*raw);
	case CAIS_FLOAT16:
		*raw = f32_to_f16(f);
		return f16_to_double((uint16_t)*raw);
	default:
		*raw = f32_to_bits(f);
		return f;
	}
}

static void
fill_input(const struct opts *o, void *buf, size_t count, uint64_t key)
{
	uint32_t raw;

	for (size_t i = 0; i < count; i++) {
		input(o, key, o->rank, i, negative(key, i), &raw);
		if (cais_datatype_size(o->dt) == 4)
			((uint32_t *)buf)[i] = raw;
		else
			((uint16_t *)buf)[i] = (uint16_t)raw;
	}
}

static double
element(const struct opts *o, const void *buf, size_t i)
{
	switch (o->dt) {
	case CAIS_FLOAT32:
		return ((const float *)buf)[i];
	case CAIS_BFLOAT16:
		return bf16_to_double(((const uint16_t *)buf)[i]);
	case CAIS_FLOAT16:
		return f16_to_double(((const uint16_t *)buf)[i]);
	case CAIS_INT32:
		return ((const int32_t *)buf)[i];
	}
	return NAN;
}

static double
dtype_eps(enum cais_datatype dt)
{
	switch (dt) {
	case CAIS_BFLOAT16:
		return 0x1p-8;
	case CAIS_FLOAT16:
		return 0x1p-11;
	case CAIS_FLOAT32:
		return 0x1p-24;
	default:
		return 0;
	}
}

struct check_result {
	uint64_t checked, wrong;
	double max_rel;
};

/* The expected value of element i and its bound, for a collective that went as st says. */
static double
expected(const struct opts *o, uint64_t key, size_t i, const struct cais_status *st,
	 double *bound)
{
	unsigned int n = o->world;
	double e = 0, mag = 0, eps = dtype_eps(o->dt);
	int64_t isum = 0;
	uint32_t raw;
	bool neg = negative(key, i);

	for (unsigned int r = 0; r < n; r++) {
		double v = input(o, key, r, i, neg, &raw);

		mag += fabs(v);
		if (o->dt == CAIS_INT32)
			isum += (int32_t)raw;
		if (r == 0 || o->op == CAIS_OP_SUM || o->op == CAIS_OP_AVG)
			e = r == 0 ? v : e + v;
		else if (o->op == CAIS_OP_MAX)
			e = v > e ? v : e;
		else
			e = v < e ? v : e;
	}
	if (o->dt == CAIS_INT32) {
		*bound = 0;
		if (o->op == CAIS_OP_SUM)
			return (double)isum;
		if (o->op == CAIS_OP_AVG)
			return (double)(isum / (int64_t)n); /* toward zero, as the library */
		return e;
	}
	if (o->op == CAIS_OP_AVG) {
		e /= n;
		mag /= n;
	}
	if (st->path == CAIS_PATH_SWITCH && st->wire == CAIS_DT_BLOCK16) {
		/* inputs below 2: each rounded within 2^-13 (or the scale's
		 * floor), the block of sums (below 2n) within n x 2^-14 */
		double q = o->op == CAIS_OP_SUM ? n : 1;

		*bound = q * (4 * 0x1p-14 + 2 / o->b16_scale) + fabs(e) * eps;
	} else if (st->path == CAIS_PATH_SWITCH) {
		double q = (o->op == CAIS_OP_SUM || o->op == CAIS_OP_AVG) ? n : 1;

		*bound = q / o->scale + fabs(e) * eps;
	} else if (o->op == CAIS_OP_SUM || o->op == CAIS_OP_AVG) {
		*bound = (n + 1) * 0x1p-24 * mag + fabs(e) * eps;
	} else {
		*bound = fabs(e) * eps;
	}
	return e;
}

static void
check(const struct opts *o, const void *recv, size_t count, uint64_t key,
      const struct cais_status *st, size_t bytes, unsigned int it, struct check_result *res)
{
	enum cais_path p = st->path;
	unsigned int shown = 0;

	for (size_t i = 0; i < count; i++) {
		double bound, e = expected(o, key, i, st, &bound), got = element(o, recv, i);
		double d = fabs(got - e);

		res->checked++;
		if (!(d <= bound)) {
			res->wrong++;
			if (shown++ < MAX_WRONG_SHOWN)
				fprintf(stderr,
					PROG
					": rank %u: %zu bytes, iteration %u (%s path): element "
					"%zu: got %.9g, expected %.9g (|diff| %.3g > bound %.3g)\n",
					o->rank, bytes, it, cais_path_name(p), i, got, e, d, bound);
		}
		if (o->dt != CAIS_INT32 && e != 0 && d / fabs(e) > res->max_rel)
			res->max_rel = d / fabs(e);
		else if (o->dt != CAIS_INT32 && e == 0 && d > res->max_rel)
			res->max_rel = d;
	}
}

/* ---- timing ---- */

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void
sleep_ms(unsigned int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double
median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the run ---- */

struct totals {
	uint64_t collectives, in_network, fb[CAIS_FB_COUNT];
	uint64_t retx, peer_chunks;
	/* the process's CPU time over the timed collectives (s), and their bytes */
	double cpu_s, timed_bytes;
	/* the untimed ones: the slowest warm-up (us, and its size) and the closing collective */
	double warm_max_us, closing_us;
	size_t warm_max_bytes;
	struct check_result chk;
	uint32_t next_seq;
	bool failed;
};

/* One size's collectives so far. */
struct size_run {
	size_t bytes, count;
	uint32_t nchunks;
	uint64_t sw, n, fb[CAIS_FB_COUNT], retx;
	struct check_result chk;
	double *times; /* the timed iterations' times (us) */
	unsigned int timed;
};

/* The path column: switch, ring(REASON) or mixed(K/N,REASON). */
static void
path_text(char *buf, size_t len, uint64_t sw, uint64_t total, const uint64_t *fb)
{
	unsigned int top = 1;

	for (unsigned int f = 2; f < CAIS_FB_COUNT; f++)
		if (fb[f] > fb[top])
			top = f;
	if (sw == total)
		snprintf(buf, len, "switch");
	else if (sw == 0)
		snprintf(buf, len, "ring(%s)", fb_short[top]);
	else
		snprintf(buf, len, "mixed(%" PRIu64 "/%" PRIu64 ",%s)", sw, total, fb_short[top]);
}

static void
print_header(const struct opts *o, size_t max_bytes)
{
	char ip[INET_ADDRSTRLEN];

	const struct sockaddr_in *me = o->manager ? &o->data : &o->peers[o->rank];

	if (o->manager) {
		printf("# " PROG
		       ": rank %u of %u, job '%s' of tenant '%s' through manager %s, tensor "
		       "%" PRIu32 " (session, slots, elems, scales: the manager's)\n",
		       o->rank, o->world, o->job ? o->job : "cais-perf",
		       o->tenant_name ? o->tenant_name : "default", o->manager, o->tensor);
	} else {
		inet_ntop(AF_INET, &o->sw.sin_addr, ip, sizeof(ip));
		printf("# " PROG
		       ": rank %u of %u, switch %s:%u, tenant %u session %u tensor %" PRIu32
		       ", slots %" PRIu32 " elems %u scale %g\n",
		       o->rank, o->world, ip, ntohs(o->sw.sin_port), o->tenant, o->session,
		       o->tensor, o->slots, o->elems, o->scale);
		for (unsigned int j = 0; j < o->n_stripes; j++) {
			inet_ntop(AF_INET, &o->stripes[j].sin_addr, ip, sizeof(ip));
			printf("#   stripe %u of %u: switch %s:%u\n", j, o->n_stripes, ip,
			       ntohs(o->stripes[j].sin_port));
		}
	}
	inet_ntop(AF_INET, &me->sin_addr, ip, sizeof(ip));
	printf("#   this rank's data address %s:%u (UDP to the switch, TCP for the ring)\n", ip,
	       ntohs(me->sin_port));
	printf("#   dtype %s op %s wire %s, %u size(s) up to %zu bytes, iters %u warmup %u%s, "
	       "path %s, threshold %zu, check %s\n",
	       cais_datatype_name(o->dt), cais_redop_name(o->op),
	       o->dt == CAIS_INT32 ? "fixed32" : cais_dtype_name(o->wire), o->n_sizes, max_bytes,
	       o->iters,
	       o->warmup, o->interleave ? " (interleaved: steps of every size)" : "",
	       cais_path_name(o->path), o->threshold, o->check ? "on" : "off");
	printf("#   retx %" PRIu32 " us, retries %" PRIu32 ", timeout %" PRIu32
	       " ms, check-every %" PRIu32 ", first seq %" PRIu32 ", delay %u ms, threads %u%s\n",
	       o->retx_us, o->retries, o->timeout_ms, o->check_every, o->first_seq, o->delay_ms,
	       o->threads, o->threads ? "" : (o->manager ? " (one per CPU)" : " (one)"));
	printf("#   time: median of this rank's issue-to-completion times (%s);\n"
	       "#   path counts include the warm-up iterations\n",
	       o->sync ? "each after a 1-element ring all-reduce that lines the ranks up"
		       : "no barrier: it includes waiting for the slowest rank");
	fflush(stdout);
}

static void
print_columns(void)
{
	printf("#\n#%11s %10s %5s %4s %-26s %11s %12s %12s %7s %7s %12s %11s\n", "bytes", "count",
	       "type", "op", "path", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "retx", "#wrong",
	       "max_rel_err", "max(us)");
	fflush(stdout);
}

/*
 * A 1-element int32 sum on the ring: it ends on a rank only when every rank
 * has joined it, so the collective after it starts on every rank at about
 * the same time. The path goes back to the user's choice after it.
 */
static int
line_up(const struct opts *o, struct cais_comm *comm, struct totals *t)
{
	int32_t one = 1, sum = 0;
	struct cais_request *req;
	int rc = cais_set_path(comm, CAIS_PATH_RING);

	if (rc == 0)
		rc = cais_iallreduce(comm, o->tensor, &one, &sum, 1, CAIS_INT32, CAIS_OP_SUM, &req);
	if (rc == 0) {
		t->next_seq++;
		rc = cais_wait(req);
	}
	if (rc == 0 && sum != (int32_t)o->world)
		rc = -EPROTO;
	if (rc == 0)
		rc = cais_set_path(comm, o->path);
	return rc;
}

/* What failed in iteration it of a size, said; the run stops. @return false */
static bool
stop_run(const struct opts *o, const struct size_run *sr, unsigned int it, const char *what, int rc,
	 struct totals *t)
{
	fprintf(stderr, PROG ": rank %u: %zu bytes, iteration %u: %s failed: %s (%d); stopping\n",
		o->rank, sr->bytes, it, what, cais_strerror(rc), rc);
	t->failed = true;
	return false;
}

/* line_up() for iteration it of a size; a failure stops the run. */
static bool
synced(const struct opts *o, struct cais_comm *comm, const struct size_run *sr, unsigned int it,
       struct totals *t)
{
	int rc = line_up(o, comm, t);

	return rc == 0 || stop_run(o, sr, it, "the --sync all-reduce", rc, t);
}

/* Iteration it of one size: fill, all-reduce, check. @return false when it failed */
static bool
one_collective(const struct opts *o, struct cais_comm *comm, struct size_run *sr, unsigned int it,
	       void *send, void *recv, uint64_t *iter, struct totals *t)
{
	uint64_t key = iter_key(*iter, sr->bytes);
	struct cais_request *req;
	struct cais_status st;
	double t0, t1, c0, c1;
	int rc;

	(*iter)++;
	if (o->check) {
		fill_input(o, send, sr->count, key);
		memset(recv, 0xff, sr->bytes); /* NaN or -1: a result never written shows */
	}
	if (o->sync && !synced(o, comm, sr, it, t))
		return false;
	if (o->delay_ms)
		sleep_ms(o->delay_ms);
	/* -EAGAIN: a step that does not ask, the manager having not answered lately */
	if (o->manager && (rc = cais_step_begin(comm, step_no++)) != 0 && rc != -EAGAIN)
		fprintf(stderr,
			PROG ": rank %u: step %llu: the manager did not answer (%s); "
			     "the tensors take the ring until a step's answer\n",
			o->rank, (unsigned long long)(step_no - 1), cais_strerror(rc));
	c0 = cmn_cpu_s();
	t0 = now_us();
	rc = cais_iallreduce(comm, o->tensor, send, recv, sr->count, o->dt, o->op, &req);
	if (rc == 0) {
		t->next_seq += sr->nchunks; /* issued: its seqs are taken, whatever the outcome */
		rc = cais_wait_status(req, &st);
	}
	t1 = now_us();
	c1 = cmn_cpu_s();
	if (rc != 0)
		return stop_run(o, sr, it, "all-reduce", rc, t);
	sr->n++;
	sr->retx += st.retransmissions;
	t->peer_chunks += st.peer_chunks;
	if (st.path == CAIS_PATH_SWITCH)
		sr->sw++;
	else
		sr->fb[st.fallback < CAIS_FB_COUNT ? st.fallback : 0]++;
	if (it >= o->warmup) {
		sr->times[sr->timed++] = t1 - t0;
		t->cpu_s += c1 - c0;
		t->timed_bytes += (double)sr->bytes;
	} else if (t1 - t0 > t->warm_max_us) {
		t->warm_max_us = t1 - t0;
		t->warm_max_bytes = sr->bytes;
	}
	if (o->check) {
		/* with --sync, no rank checks beside another's timed collective */
		if (o->sync && !synced(o, comm, sr, it, t))
			return false;
		check(o, recv, sr->count, key, &st, sr->bytes, it, &sr->chk);
	}
	return true;
}

/* A size's line, and its counts into the totals. */
static void
finish_size(const struct opts *o, struct size_run *sr, struct totals *t)
{
	char path[64], wrong[24], rel[24];

	if (sr->timed && !o->quiet) {
		double us = median(sr->times, sr->timed), algbw = (double)sr->bytes / us / 1e3;
		double max_us = sr->times[sr->timed - 1]; /* median() sorted them */
		double busbw = algbw * 2.0 * (o->world - 1) / o->world;

		path_text(path, sizeof(path), sr->sw, sr->n, sr->fb);
		snprintf(wrong, sizeof(wrong), o->check ? "%" PRIu64 : "-", sr->chk.wrong);
		if (o->check && o->dt != CAIS_INT32)
			snprintf(rel, sizeof(rel), "%.3e", sr->chk.max_rel);
		else
			snprintf(rel, sizeof(rel), "-");
		printf(" %11zu %10zu %5s %4s %-26s %11.1f %12.3f %12.3f %7" PRIu64
		       " %7s %12s %11.1f\n",
		       sr->bytes, sr->count, cais_datatype_name(o->dt), cais_redop_name(o->op),
		       path, us, algbw, busbw, sr->retx, wrong, rel, max_us);
		fflush(stdout);
	}
	t->collectives += sr->n;
	t->in_network += sr->sw;
	for (unsigned int f = 0; f < CAIS_FB_COUNT; f++)
		t->fb[f] += sr->fb[f];
	t->retx += sr->retx;
	t->chk.checked += sr->chk.checked;
	t->chk.wrong += sr->chk.wrong;
	if (sr->chk.max_rel > t->chk.max_rel)
		t->chk.max_rel = sr->chk.max_rel;
}

/* Every size, size after size (or step after step with --interleave). */
static void
run_all(const struct opts *o, struct cais_comm *comm, struct size_run *runs, void *send, void *recv,
	struct totals *t)
{
	unsigned int total = o->warmup + o->iters;
	uint64_t iter = 0;

	if (!o->interleave) {
		print_columns();
		for (unsigned int i = 0; i < o->n_sizes && !t->failed; i++) {
			for (unsigned int it = 0; it < total; it++)
				if (!one_collective(o, comm, &runs[i], it, send, recv, &iter, t))
					break;
			finish_size(o, &runs[i], t);
		}
		return;
	}
	for (unsigned int it = 0; it < total && !t->failed; it++) {
		double t0 = now_us();

		for (unsigned int i = 0; i < o->n_sizes; i++)
			if (!one_collective(o, comm, &runs[i], it, send, recv, &iter, t))
				break;
		if (!o->quiet && !t->failed)
			printf("# step %u/%u%s: %u all-reduces, %.3f s\n", it + 1, total,
			       it < o->warmup ? " (warm-up)" : "", o->n_sizes,
			       (now_us() - t0) / 1e6);
	}
	print_columns();
	for (unsigned int i = 0; i < o->n_sizes; i++)
		finish_size(o, &runs[i], t);
}

/* The closing collective: every rank has finished every size when it ends. */
static int
closing_collective(const struct opts *o, struct cais_comm *comm, struct totals *t)
{
	int32_t one = 1, sum = 0;
	struct cais_request *req;
	double t0 = now_us();
	int rc = cais_set_path(comm, CAIS_PATH_RING);

	if (rc == 0)
		rc = cais_iallreduce(comm, o->tensor, &one, &sum, 1, CAIS_INT32, CAIS_OP_SUM, &req);
	if (rc == 0) {
		t->next_seq++;
		rc = cais_wait(req);
	}
	t->closing_us = now_us() - t0;
	if (rc != 0) {
		fprintf(stderr, PROG ": rank %u: the closing collective failed: %s (%d)\n", o->rank,
			cais_strerror(rc), rc);
		return rc;
	}
	if (sum != (int32_t)o->world) {
		fprintf(stderr, PROG ": rank %u: the closing collective summed %d, expected %u\n",
			o->rank, sum, o->world);
		return -EPROTO;
	}
	return 0;
}

static void
print_summary(const struct opts *o, struct cais_comm *comm, const struct totals *t, double wall_s,
	      bool pass)
{
	struct cais_metrics m;
	char fbs[256] = "";
	size_t len = 0;

	for (unsigned int f = 1; f < CAIS_FB_COUNT; f++)
		if (t->fb[f] && len < sizeof(fbs))
			len += (size_t)snprintf(fbs + len, sizeof(fbs) - len, "%s%s:%" PRIu64,
						len ? "," : "", fb_short[f], t->fb[f]);
	printf("# summary rank=%u world=%u dtype=%s op=%s sizes=%u collectives=%" PRIu64
	       " in_network=%" PRIu64 " ring=%" PRIu64 " fallbacks=%s failed=%d",
	       o->rank, o->world, cais_datatype_name(o->dt), cais_redop_name(o->op), o->n_sizes,
	       t->collectives, t->in_network, t->collectives - t->in_network, len ? fbs : "none",
	       t->failed ? 1 : 0);
	if (o->check && o->dt != CAIS_INT32)
		printf(" checked=%" PRIu64 " wrong=%" PRIu64 " max_rel_err=%.3e", t->chk.checked,
		       t->chk.wrong, t->chk.max_rel);
	else if (o->check)
		printf(" checked=%" PRIu64 " wrong=%" PRIu64 " max_rel_err=-", t->chk.checked,
		       t->chk.wrong);
	printf(" retx=%" PRIu64 " peer_chunks=%" PRIu64 " next_seq=%" PRIu32
	       " cpu_ns_per_byte=%.3f warmup_max_ms=%.2f warmup_max_bytes=%zu closing_ms=%.2f"
	       " wall_s=%.2f result=%s\n",
	       t->retx, t->peer_chunks, t->next_seq,
	       t->timed_bytes > 0 ? t->cpu_s * 1e9 / t->timed_bytes : 0, t->warm_max_us / 1e3,
	       t->warm_max_bytes, t->closing_us / 1e3, wall_s, pass ? "PASS" : "FAIL");
	if (comm && cais_metrics_get(comm, &m) == 0 && !o->quiet)
		printf("# metrics: collectives %" PRIu64 " in-network %" PRIu64
		       " fallback-rate %.3f errors %" PRIu64 ", chunks %" PRIu64
		       " retransmitted %" PRIu64 " acked %" PRIu64 " nacked %" PRIu64
		       " queries %" PRIu64 " ignored-results %" PRIu64
		       ", peer chunks %" PRIu64 " served %" PRIu64 ", congested %" PRIu64
		       ", error checks %" PRIu64 " max %.2e, tensors disabled %u, wire fallbacks %u,"
		       " p50 %.0f us p90 %.0f us p99 %.0f us\n",
		       m.collectives, m.in_network, m.fallback_rate, m.errors, m.chunks_sent,
		       m.retransmissions, m.acks, m.nacks, m.queries, m.results_ignored,
		       m.peer_chunks,
		       m.peer_chunks_served, m.congested, m.error_checks, m.max_rel_error,
		       m.tensors_disabled, m.wire_fallbacks, m.p50_us, m.p90_us, m.p99_us);
	fflush(stdout);
}

/* The library's configuration from the options. */
static void
config_from_opts(const struct opts *o, struct cais_config *cfg)
{
	cais_config_init(cfg);
	cfg->tenant = o->tenant;
	cfg->session = o->session;
	cfg->rank = o->rank;
	cfg->world = o->world;
	cfg->switch_addr = o->sw;
	cfg->stripes = o->stripes;
	cfg->nstripes = o->n_stripes;
	cfg->peers = o->peers;
	cfg->slots = o->slots;
	cfg->elems = o->elems;
	cfg->scale = o->scale;
	cfg->b16_scale = o->b16_scale;
	cfg->threshold = o->threshold;
	cfg->retx_timeout_us = o->retx_us;
	cfg->retries = o->retries;
	cfg->timeout_ms = o->timeout_ms;
	cfg->check_every = o->check_every;
	cfg->first_seq = o->first_seq;
	cfg->wire = o->wire;
	cfg->threads = o->threads;
}

/* One record per size, with room for its timed iterations; NULL when out of memory. */
static struct size_run *
runs_new(const struct opts *o)
{
	struct size_run *runs = calloc(o->n_sizes, sizeof(*runs));

	for (unsigned int i = 0; runs && i < o->n_sizes; i++) {
		runs[i].bytes = o->sizes[i];
		runs[i].count = o->sizes[i] / cais_datatype_size(o->dt);
		runs[i].nchunks = (uint32_t)((runs[i].count + o->elems - 1) / o->elems);
		runs[i].times = calloc(o->iters, sizeof(double));
		if (!runs[i].times)
			return NULL; /* the process exits */
	}
	return runs;
}

/* The communicator: created (static) or joined (--manager), path and tensor set. */
static struct cais_comm *
comm_open(const struct opts *o, const struct cais_config *cfg)
{
	struct cais_comm *comm = NULL;
	int rc;

	if (o->manager) {
		struct cais_join j = {.manager = o->manager,
				      .key_file = o->manager_key,
				      .job = o->job ? o->job : "cais-perf",
				      .tenant = o->tenant_name ? o->tenant_name : "default",
				      .rank = o->rank,
				      .world = o->world,
				      .data = o->data,
				      .slots = o->slots,
				      .elems = o->elems};

		rc = cais_comm_join(&j, cfg, &comm);
		if (rc == 0)
			rc = cais_tensor_register(comm, o->tensor, o->op, o->dt);
	} else {
		rc = cais_comm_create(cfg, &comm);
	}
	if (rc != 0) {
		char addr[CMN_ADDR_TEXT];

		fprintf(stderr, PROG ": rank %u: %s (data address %s): %s\n", o->rank,
			o->manager ? "joining through the manager" : "cais_comm_create",
			cmn_format_addr(o->manager ? &o->data : &o->peers[o->rank], addr,
					sizeof(addr)),
			cais_strerror(rc));
		if (comm)
			cais_comm_destroy(comm);
		return NULL;
	}
	rc = cais_set_path(comm, o->path);
	/* static mode: the tensor's FIXED32 scale; a BLOCK16 tensor keeps the
	 * library's (--b16-scale), and should the switch refuse BLOCK16 it goes
	 * as FIXED32 at --scale */
	if (rc == 0 && !o->manager && (o->wire != CAIS_DT_BLOCK16 || o->dt == CAIS_INT32))
		rc = cais_tensor_set(comm, o->tensor, o->scale, true);
	if (rc != 0) {
		fprintf(stderr, PROG ": rank %u: set-up: %s\n", o->rank, cais_strerror(rc));
		cais_comm_destroy(comm);
		return NULL;
	}
	return comm;
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct cais_config cfg;
	struct cais_comm *comm;
	struct totals t = {0};
	size_t max_bytes = 0;
	void *send, *recv;
	struct size_run *runs;
	double t0;
	bool pass;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_args(argc, argv, &o);
	for (unsigned int i = 0; i < o.n_sizes; i++)
		if (o.sizes[i] > max_bytes)
			max_bytes = o.sizes[i];
	config_from_opts(&o, &cfg);
	t.next_seq = o.first_seq;
	send = malloc(max_bytes);
	recv = malloc(max_bytes);
	runs = runs_new(&o);
	if (!send || !recv || !runs) {
		fprintf(stderr, PROG ": rank %u: out of memory (%zu bytes per buffer)\n", o.rank,
			max_bytes);
		return EXIT_SETUP;
	}
	comm = comm_open(&o, &cfg);
	if (!comm)
		return EXIT_SETUP;
	if (!o.quiet)
		print_header(&o, max_bytes);
	/* managed: every rank has registered its tensor before any asks for step 0 */
	if (o.manager && line_up(&o, comm, &t) != 0) {
		fprintf(stderr, PROG ": rank %u: the first line-up all-reduce failed\n", o.rank);
		cais_comm_destroy(comm);
		return EXIT_SETUP;
	}
	if (!o.check) /* the values do not matter: fill once */
		fill_input(&o, send, max_bytes / cais_datatype_size(o.dt), iter_key(0, max_bytes));
	t0 = now_us();
	run_all(&o, comm, runs, send, recv, &t);
	if (!t.failed && closing_collective(&o, comm, &t) != 0)
		t.failed = true;
	pass = !t.failed && t.chk.wrong == 0;
	print_summary(&o, comm, &t, (now_us() - t0) / 1e6, pass);
	if (!t.failed)
		sleep_ms(LINGER_MS);
	cais_comm_destroy(comm);
	for (unsigned int i = 0; i < o.n_sizes; i++)
		free(runs[i].times);
	free(runs);
	free(send);
	free(recv);
	free(o.peers);
	free(o.stripes);
	return pass ? EXIT_PASS : EXIT_FAILED;
}
