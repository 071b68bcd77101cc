/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: the control request path (PROTOCOL.md section 4),
 * ctl_endpoint_handle() on arbitrary datagrams, against a reference model.
 *
 * An input is a mode byte, a source byte, then the data:
 *
 *   bit 0     1: the endpoint has a key (MAC and ts rules), 0: none
 *   bit 1     1: the target frames each request itself with the key (the
 *             MAC line, so the fuzzer explores what lies behind the MAC);
 *             0: the data are the datagrams as they come
 *   bit 2     1: the data are several datagrams separated by NUL bytes,
 *             sent in turn to the same endpoint (replay, the last ts);
 *             0: the whole data are one datagram
 *   bits 3-5  what the fake operations return: 0, ENOENT, EEXIST, ENOSPC,
 *             EBUSY, EPERM or ETIMEDOUT (a code outside the documented set)
 *   bits 6-7  how the fake clock moves after each datagram: 0, +1 ms,
 *             +30 s, -30.001 s (it starts at FZ_NOW)
 *
 * The source byte says where datagram i comes from: bits 2(i%4)..2(i%4)+1,
 * 0: ctl_endpoint_handle() (no address), 1..3: ctl_endpoint_handle_from()
 * with 10.0.0.1..3 (the replay state is per client address; port 1000+i,
 * which must not matter).
 *
 * Every input starts from an endpoint as good as new (no last ts accepted;
 * its counters are compared as differences). For each datagram
 * the model predicts, independently of control/: the size rule, the MAC
 * (HMAC-SHA256 computed here with OpenSSL, lower-case hex only), the JSON,
 * the id, the ts rules (the model keeps its own last accepted ts per
 * client), then every
 * argument rule of section 4 and ctl.h (ranges, types, unknown fields,
 * members: ranks 0..n-1 once each, unicast MAC as six hex pairs, IPv4,
 * port 1..65535), and from that: whether one operation must be called and
 * with which values, the reply (ok, id or null, error.code), and the
 * endpoint's counters. The fake operations check their arguments' invariants
 * and compare them with the model's values. Every reply must be JSON with
 * "id" and "ok", a "result" object when ok, else "error" with a documented
 * "code" and a non-empty "message" that names the field (one of the fields
 * the model found wrong). Any difference abort()s.
 *
 * Environment:
 *   CAIS_FUZZ_VERBOSE=1          each datagram, the prediction and the reply
 *
 * Built only with clang (tests/fuzz/meson.build): control/ctl_request.c,
 * ctl_auth.c and ctl_endpoint.c are compiled into the target with
 * -fsanitize=fuzzer,address,undefined. No DPDK.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "ctl.h"
#include "ctl_auth.h"
#include "ctl_endpoint.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The fake clock's start and the key; the seed generator uses the same. */
#define FZ_NOW	   1700000000000LL
#define FZ_KEY	   "cais-fuzz-ctl-key: 32 bytes ...."
#define FZ_MAX_REQ 64

static struct ctl_key key;
static int64_t now_ms;
static bool verbose;

static int64_t
fake_clock(void)
{
	return now_ms;
}

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_ctl: %s:%d: check failed: %s: ", __FILE__, __LINE__, \
				#cond);                                                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fprintf(stderr, "\n");                                                     \
			dump_context();                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* ---- the current datagram, for reports ---- */

static const uint8_t *cur_dgram;
static size_t cur_len;
static const char *cur_reply;
static size_t cur_reply_len;

static void
dump_context(void)
{
	fprintf(stderr, "  datagram (%zu bytes): %.*s\n", cur_len,
		(int)(cur_len > 2000 ? 2000 : cur_len), cur_dgram ? (const char *)cur_dgram : "");
	if (cur_reply)
		fprintf(stderr, "  reply: %.*s\n", (int)cur_reply_len, cur_reply);
}

/* ---- the model's view of one request ---- */

enum cmd { C_NONE, C_PING, C_STATS, C_SADD, C_SDEL, C_TADD, C_TDEL, C_LEASE, C_MODE, C_THR };

static const char *const cmd_names[] = {
    "",		  "ping",	"stats.get", "session.add", "session.del",
    "tensor.add", "tensor.del", "lease",     "mode.set",    "thresholds.set"};

#define MAX_BAD 16
struct model {
	enum cmd cmd; /* the command, when valid */
	bool valid;   /* every argument rule holds */
	int nbad;     /* the fields found wrong (names the message may give) */
	char bad[MAX_BAD][64];
	struct ctl_session s;
	struct ctl_tensor t;
	struct ctl_thresholds th;
	uint32_t ttl;
	enum ctl_mode mode;
	uint16_t tenant, session;
	uint32_t tensor;
};

static struct model M; /* what the operation must receive */

static void
flag(const char *fmt, ...)
{
	va_list ap;

	M.valid = false;
	if (M.nbad >= MAX_BAD)
		return;
	va_start(ap, fmt);
	vsnprintf(M.bad[M.nbad++], sizeof(M.bad[0]), fmt, ap);
	va_end(ap);
}

/* Every member of obj is one of names (NULL-ended); the others are flagged. */
static void
only(const json_t *obj, const char *const *names)
{
	const char *k;
	json_t *v;

	json_object_foreach ((json_t *)obj, k, v) {
		const char *const *a;

		(void)v;
		for (a = names; *a; a++)
			if (strcmp(*a, k) == 0)
				break;
		if (!*a)
			flag("%s", k);
	}
}

/* An integer member in [lo, hi]: 1 present and good, 0 absent, -1 wrong (flagged). */
static int
int_field(const json_t *obj, const char *name, long long lo, long long hi, bool required,
	  long long *out)
{
	const json_t *v = json_object_get(obj, name);
	long long x;

	if (!v) {
		if (required)
			flag("%s", name);
		return required ? -1 : 0;
	}
	if (!json_is_integer(v)) {
		flag("%s", name);
		return -1;
	}
	x = (long long)json_integer_value(v);
	if (x < lo || x > hi) {
		flag("%s", name);
		return -1;
	}
	*out = x;
	return 1;
}

static const char *
str_field(const json_t *obj, const char *name)
{
	const json_t *v = json_object_get(obj, name);

	if (!json_is_string(v)) {
		flag("%s", name);
		return NULL;
	}
	return json_string_value(v);
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* "hh:hh:hh:hh:hh:hh", hex digits of either case. */
static bool
mac_ok(const char *s, uint8_t mac[6])
{
	if (strlen(s) != 17)
		return false;
	for (int i = 0; i < 6; i++) {
		const char *p = s + 3 * i;
		int hi = hexval(p[0]), lo = hexval(p[1]);

		if (i < 5 && p[2] != ':')
			return false;
		if (hi < 0 || lo < 0)
			return false;
		mac[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

static bool
pow2_slots(long long s)
{
	return s >= 1 && s <= CAIS_MAX_SLOTS && (s & (s - 1)) == 0;
}

/* session.add's "uplink" (E9); every fault named as "uplink" (the messages' prefix). */
static void
model_uplink(const json_t *u)
{
	static const char *const unames[] = {"ip", "mac", "port", "rank", "switch_port", NULL};
	long long rank = 0, port = 0, sw_port = 0;
	const char *mac, *ip;
	int nbad = M.nbad;

	if (!json_is_object(u)) {
		flag("uplink");
		return;
	}
	only(u, unames);
	mac = str_field(u, "mac");
	ip = str_field(u, "ip");
	int_field(u, "port", 1, 65535, false, &port);
	int_field(u, "rank", 0, CAIS_MAX_WORLD - 1, true, &rank);
	int_field(u, "switch_port", 0, 32767, true, &sw_port);
	if (mac && (!mac_ok(mac, M.s.uplink.mac) || (M.s.uplink.mac[0] & 1) ||
		    !(M.s.uplink.mac[0] | M.s.uplink.mac[1] | M.s.uplink.mac[2] |
		      M.s.uplink.mac[3] | M.s.uplink.mac[4] | M.s.uplink.mac[5])))
		flag("mac");
	if (ip && (inet_pton(AF_INET, ip, &M.s.uplink.ip) != 1 ||
		   (ntohl(M.s.uplink.ip) >> 24) == 0 || (ntohl(M.s.uplink.ip) >> 24) == 127 ||
		   (ntohl(M.s.uplink.ip) >> 24) >= 224))
		flag("ip");
	if (M.nbad != nbad) {
		flag("uplink");
		return;
	}
	M.s.uplink.on = true;
	M.s.uplink.port = (uint16_t)port;
	M.s.uplink.rank = (uint8_t)rank;
	M.s.uplink.switch_port = (uint16_t)sw_port;
}

static void
model_session_add(const json_t *a)
{
	static const char *const names[] = {"tenant",	"session",	    "n",
					    "slots",	"elems_per_packet", "priority",
					    "members", "uplink",	    "first_rank", NULL};
	static const char *const mnames[] = {"rank",	    "mac",   "ip", "port",
					     "switch_port", "ports", NULL};
	long long tenant = 0, session = 0, n = 0, slots = 0, elems = 0, prio = 0, first = 0;
	int rn;
	const json_t *members;
	bool have[CAIS_MAX_WORLD] = {false};

	only(a, names);
	int_field(a, "tenant", 0, 65535, true, &tenant);
	int_field(a, "session", 0, 65535, true, &session);
	rn = int_field(a, "n", 1, CAIS_MAX_WORLD, true, &n);
	if (int_field(a, "slots", 1, CAIS_MAX_SLOTS, true, &slots) == 1 && !pow2_slots(slots))
		flag("slots");
	int_field(a, "elems_per_packet", 1, CAIS_MAX_ELEMS, true, &elems);
	int_field(a, "priority", 0, 1, false, &prio);
	/* a leaf's ranks (E9): first_rank .. first_rank + n - 1, below 255 */
	int_field(a, "first_rank", 0, CAIS_MAX_WORLD - 1, false, &first);
	if (rn == 1 && first + n > CAIS_MAX_WORLD)
		flag("first_rank");
	members = json_object_get(a, "members");
	if (!json_is_array(members)) {
		flag("members");
		return;
	}
	if (rn != 1)
		return; /* the members cannot be judged without n */
	if (json_array_size(members) != (size_t)n) {
		flag("members");
		return;
	}
	M.s.tenant = (uint16_t)tenant;
	M.s.session = (uint16_t)session;
	M.s.n = (uint16_t)n;
	M.s.slots = (uint32_t)slots;
	M.s.elems = (uint16_t)elems;
	M.s.priority = (uint8_t)prio;
	M.s.first_rank = (uint8_t)first;
	for (size_t i = 0; i < (size_t)n; i++) {
		const json_t *m = json_array_get(members, i);
		long long rank = -1, port = 0, sw_port = -1, ports = 1;
		const char *mac, *ip;
		struct ctl_member mb = {0};
		int nbad = M.nbad;

		if (!json_is_object(m)) {
			flag("members[%zu]", i);
			continue;
		}
		only(m, mnames);
		if (int_field(m, "rank", first, first + n - 1, true, &rank) == 1)
			rank -= first;
		mac = str_field(m, "mac");
		ip = str_field(m, "ip");
		int_field(m, "port", 1, 65535, true, &port);
		int_field(m, "switch_port", 0, 32767, false, &sw_port);
		/* E7: 1..16 flows, a power of two, within the UDP ports */
		if (int_field(m, "ports", 1, 16, false, &ports) == 1 &&
		    ((ports & (ports - 1)) || (port && port + ports - 1 > 65535)))
			flag("ports");
		/* unicast, not all-zero (docs/PROTOCOL.md E5) */
		if (mac && (!mac_ok(mac, mb.mac) || (mb.mac[0] & 1) ||
			    !(mb.mac[0] | mb.mac[1] | mb.mac[2] | mb.mac[3] | mb.mac[4] | mb.mac[5])))
			flag("mac");
		/* a host's unicast address: not 0/8, 127/8, 224/4 or 240/4 */
		if (ip && (inet_pton(AF_INET, ip, &mb.ip) != 1 || (ntohl(mb.ip) >> 24) == 0 ||
			   (ntohl(mb.ip) >> 24) == 127 || (ntohl(mb.ip) >> 24) >= 224))
			flag("ip");
		if (rank < 0)
			continue;
		/* a rank given twice counts whatever else is wrong with either member
		 * (the switch checks it before the MAC and the IP address) */
		if (have[rank]) {
			flag("rank");
			continue;
		}
		have[rank] = true;
		if (M.nbad != nbad)
			continue;
		mb.port = (uint16_t)port;
		mb.switch_port = (int16_t)sw_port;
		mb.ports = (uint8_t)ports;
		M.s.members[rank] = mb;
	}
	if (json_object_get(a, "uplink"))
		model_uplink(json_object_get(a, "uplink"));
	/* two ranks at one address: the message names both fields */
	for (unsigned int x = 0; M.valid && x < M.s.n; x++)
		for (unsigned int y = x + 1; y < M.s.n; y++)
			if (M.s.members[x].ip == M.s.members[y].ip &&
			    M.s.members[x].port < M.s.members[y].port + M.s.members[y].ports &&
			    M.s.members[y].port < M.s.members[x].port + M.s.members[x].ports) {
				flag("ip");
				flag("port");
				return;
			}
}

static void
model_tensor_ids(const json_t *a, bool with_tensor)
{
	long long tenant = 0, session = 0, tensor = 0;

	int_field(a, "tenant", 0, 65535, true, &tenant);
	int_field(a, "session", 0, 65535, true, &session);
	if (with_tensor)
		int_field(a, "tensor", 0, UINT32_MAX, true, &tensor);
	M.tenant = (uint16_t)tenant;
	M.session = (uint16_t)session;
	M.tensor = (uint32_t)tensor;
}

static void
model_tensor_add(const json_t *a)
{
	static const char *const names[] = {"tenant", "session", "tensor", "op", "scale", NULL};
	const char *op;
	const json_t *sc;
	int i;

	only(a, names);
	model_tensor_ids(a, true);
	M.t.tenant = M.tenant;
	M.t.session = M.session;
	M.t.tensor = M.tensor;
	op = str_field(a, "op");
	if (op) {
		for (i = 0; i < CAIS_OP_COUNT; i++)
			if (strcmp(op, cais_op_name((enum cais_redop)i)) == 0)
				break;
		if (i == CAIS_OP_COUNT)
			flag("op");
		M.t.op = (enum cais_redop)i;
	}
	sc = json_object_get(a, "scale");
	/* > 0 and finite; the switch also bounds it by 1e300 (ctl_request.c) */
	if (!json_is_number(sc) || !(json_number_value(sc) > 0) ||
	    !isfinite(json_number_value(sc)) || json_number_value(sc) > 1e300)
		flag("scale");
	else
		M.t.scale = json_number_value(sc);
}

static void
model_args(const char *cmd, const json_t *a)
{
	static const char *const none[] = {NULL};
	static const char *const after[] = {"after", NULL};
	static const char *const ids[] = {"tenant", "session", NULL};
	static const char *const tids[] = {"tenant", "session", "tensor", NULL};
	static const char *const lease[] = {"ttl_ms", NULL};
	static const char *const mode[] = {"mode", NULL};
	static const char *const thr[] = {"queue_depth", "slot_usage", NULL};
	long long v = 0;
	int i;

	for (i = C_PING; i <= C_THR; i++)
		if (strcmp(cmd, cmd_names[i]) == 0)
			break;
	if (i > C_THR) {
		flag("%s", cmd); /* "unknown command '<cmd>'" */
		return;
	}
	M.cmd = (enum cmd)i;
	switch (M.cmd) {
	case C_PING:
		only(a, none);
		break;
	case C_STATS:
		only(a, after);
		int_field(a, "after", 0, UINT32_MAX, false, &v);
		break;
	case C_SADD:
		model_session_add(a);
		break;
	case C_SDEL:
		only(a, ids);
		model_tensor_ids(a, false);
		break;
	case C_TADD:
		model_tensor_add(a);
		break;
	case C_TDEL:
		only(a, tids);
		model_tensor_ids(a, true);
		break;
	case C_LEASE:
		only(a, lease);
		if (int_field(a, "ttl_ms", 1, CTL_LEASE_MAX_MS, true, &v) == 1)
			M.ttl = (uint32_t)v;
		break;
	case C_MODE: {
		const char *m;

		only(a, mode);
		m = str_field(a, "mode");
		if (m && strcmp(m, "compute") == 0)
			M.mode = CTL_MODE_COMPUTE;
		else if (m && strcmp(m, "forward_only") == 0)
			M.mode = CTL_MODE_FORWARD_ONLY;
		else if (m)
			flag("mode");
		break;
	}
	case C_THR: {
		const json_t *su = json_object_get(a, "slot_usage");

		only(a, thr);
		if (int_field(a, "queue_depth", 0, UINT32_MAX, false, &v) == 1) {
			M.th.has_queue_depth = true;
			M.th.queue_depth = (uint32_t)v;
		}
		if (su) {
			double x = json_number_value(su);

			if (!json_is_number(su) || !isfinite(x) || x < 0 || x > 1)
				flag("slot_usage");
			M.th.has_slot_usage = true;
			M.th.slot_usage = x;
		}
		if (!json_object_get(a, "queue_depth") && !su) {
			flag("queue_depth");
			flag("slot_usage");
		}
		break;
	}
	default:
		break;
	}
}

/* The request object (id and ts already judged): the command and its arguments. */
static void
model_request(const json_t *req)
{
	const json_t *cmd = json_object_get(req, "cmd"), *args = json_object_get(req, "args");
	json_t *empty = NULL;

	memset(&M, 0, sizeof(M));
	M.valid = true;
	if (!json_is_string(cmd)) {
		flag("cmd");
		return;
	}
	if (args && !json_is_object(args)) {
		flag("args");
		return;
	}
	if (!args)
		args = empty = json_object();
	model_args(json_string_value(cmd), args);
	json_decref(empty);
}

/* ---- the fake switch: invariants, and the model's values ---- */

static int op_ret; /* what the operations return (positive errno or 0) */
static int op_calls;
static enum cmd op_last;

static int
op_done(enum cmd c, struct ctl_err *err)
{
	op_calls++;
	op_last = c;
	CHECK(M.valid && M.cmd == c, "operation %s called; the model expected %s", cmd_names[c],
	      M.valid ? cmd_names[M.cmd] : "none (invalid request)");
	if (op_ret)
		return ctl_fail(err, op_ret, "fake %s refused", cmd_names[c]);
	return 0;
}

static int
f_ping(void *ctx, json_t *res, struct ctl_err *err)
{
	(void)ctx;
	CHECK(json_is_object(res) && json_object_size(res) == 0, "ping: result not empty");
	json_object_set_new(res, "mode", json_string("compute"));
	return op_done(C_PING, err);
}

static int
f_stats(void *ctx, int64_t after, json_t *res, struct ctl_err *err)
{
	(void)ctx, (void)after;
	CHECK(json_is_object(res) && json_object_size(res) == 0, "stats.get: result not empty");
	json_object_set_new(res, "rounds", json_integer(7));
	return op_done(C_STATS, err);
}

static int
f_session_add(void *ctx, const struct ctl_session *s, struct ctl_err *err)
{
	(void)ctx;
	/* invariants of section 4, whatever the model says */
	CHECK(s->n >= 1 && s->n <= CAIS_MAX_WORLD, "n %u", s->n);
	CHECK(pow2_slots(s->slots), "slots %u", s->slots);
	CHECK(s->elems >= 1 && s->elems <= CAIS_MAX_ELEMS, "elems %u", s->elems);
	CHECK(s->priority <= CTL_PRIO_HIGH, "priority %u", s->priority);
	for (unsigned int r = 0; r < CAIS_MAX_WORLD; r++) {
		const struct ctl_member *m = &s->members[r];

		if (r < s->n) { /* every rank 0..n-1 given (once: n entries, n ranks) */
			CHECK(m->port >= 1, "rank %u: no member (port 0)", r);
			CHECK(!(m->mac[0] & 1), "rank %u: group MAC", r);
			CHECK(m->ip != 0 && (ntohl(m->ip) >> 24) < 224, "rank %u: no host address",
			      r);
		} else {
			static const struct ctl_member zero;

			CHECK(memcmp(m->mac, zero.mac, 6) == 0 && m->ip == 0 && m->port == 0,
			      "member %u beyond n = %u", r, s->n);
		}
	}
	if (M.valid && M.cmd == C_SADD) {
		CHECK(s->tenant == M.s.tenant && s->session == M.s.session,
		      "ids %u/%u, model %u/%u", s->tenant, s->session, M.s.tenant, M.s.session);
		CHECK(s->n == M.s.n && s->slots == M.s.slots && s->elems == M.s.elems &&
			  s->priority == M.s.priority && s->first_rank == M.s.first_rank,
		      "n/slots/elems/priority/first_rank differ from the model");
		CHECK(s->uplink.on == M.s.uplink.on &&
			  (!s->uplink.on ||
			   (memcmp(s->uplink.mac, M.s.uplink.mac, 6) == 0 &&
			    s->uplink.ip == M.s.uplink.ip && s->uplink.port == M.s.uplink.port &&
			    s->uplink.rank == M.s.uplink.rank &&
			    s->uplink.switch_port == M.s.uplink.switch_port)),
		      "uplink differs from the model");
		for (unsigned int r = 0; r < s->n; r++)
			CHECK(memcmp(s->members[r].mac, M.s.members[r].mac, 6) == 0 &&
				  s->members[r].ip == M.s.members[r].ip &&
				  s->members[r].port == M.s.members[r].port &&
				  s->members[r].switch_port == M.s.members[r].switch_port &&
				  s->members[r].ports == M.s.members[r].ports,
			      "member of rank %u differs from the model", r);
	}
	return op_done(C_SADD, err);
}

static int
f_session_del(void *ctx, uint16_t t, uint16_t s, struct ctl_err *err)
{
	(void)ctx;
	if (M.valid && M.cmd == C_SDEL)
		CHECK(t == M.tenant && s == M.session, "session.del %u/%u, model %u/%u", t, s,
		      M.tenant, M.session);
	return op_done(C_SDEL, err);
}

static int
f_tensor_add(void *ctx, const struct ctl_tensor *t, struct ctl_err *err)
{
	(void)ctx;
	CHECK((unsigned int)t->op < CAIS_OP_COUNT, "op %d", (int)t->op);
	CHECK(t->scale > 0 && isfinite(t->scale), "scale %g", t->scale);
	if (M.valid && M.cmd == C_TADD)
		CHECK(t->tenant == M.t.tenant && t->session == M.t.session &&
			  t->tensor == M.t.tensor && t->op == M.t.op && t->scale == M.t.scale,
		      "tensor.add %u/%u/%u %d %g, model %u/%u/%u %d %g", t->tenant, t->session,
		      t->tensor, (int)t->op, t->scale, M.t.tenant, M.t.session, M.t.tensor,
		      (int)M.t.op, M.t.scale);
	return op_done(C_TADD, err);
}

static int
f_tensor_del(void *ctx, uint16_t t, uint16_t s, uint32_t x, struct ctl_err *err)
{
	(void)ctx;
	if (M.valid && M.cmd == C_TDEL)
		CHECK(t == M.tenant && s == M.session && x == M.tensor,
		      "tensor.del %u/%u/%u, model %u/%u/%u", t, s, x, M.tenant, M.session,
		      M.tensor);
	return op_done(C_TDEL, err);
}

static int
f_lease(void *ctx, uint32_t ttl, struct ctl_err *err)
{
	(void)ctx;
	CHECK(ttl >= 1 && ttl <= CTL_LEASE_MAX_MS, "ttl %u", ttl);
	if (M.valid && M.cmd == C_LEASE)
		CHECK(ttl == M.ttl, "ttl %u, model %u", ttl, M.ttl);
	return op_done(C_LEASE, err);
}

static int
f_mode_set(void *ctx, enum ctl_mode m, struct ctl_err *err)
{
	(void)ctx;
	CHECK(m == CTL_MODE_COMPUTE || m == CTL_MODE_FORWARD_ONLY, "mode %d", (int)m);
	if (M.valid && M.cmd == C_MODE)
		CHECK(m == M.mode, "mode %d, model %d", (int)m, (int)M.mode);
	return op_done(C_MODE, err);
}

static int
f_thresholds(void *ctx, const struct ctl_thresholds *t, struct ctl_err *err)
{
	(void)ctx;
	CHECK(t->has_queue_depth || t->has_slot_usage, "thresholds.set with neither");
	CHECK(!t->has_slot_usage || (t->slot_usage >= 0 && t->slot_usage <= 1), "slot_usage %g",
	      t->slot_usage);
	if (M.valid && M.cmd == C_THR)
		CHECK(t->has_queue_depth == M.th.has_queue_depth &&
			  t->has_slot_usage == M.th.has_slot_usage &&
			  (!t->has_queue_depth || t->queue_depth == M.th.queue_depth) &&
			  (!t->has_slot_usage || t->slot_usage == M.th.slot_usage),
		      "thresholds differ from the model");
	return op_done(C_THR, err);
}

static const struct ctl_ops ops = {
    .ping = f_ping,
    .session_add = f_session_add,
    .session_del = f_session_del,
    .tensor_add = f_tensor_add,
    .tensor_del = f_tensor_del,
    .lease = f_lease,
    .mode_set = f_mode_set,
    .thresholds_set = f_thresholds,
    .stats_get = f_stats,
};

/* ---- the envelope model ---- */

enum stage {
	S_SIZE,
	S_MAC,
	S_JSON,
	S_OBJECT,
	S_ID,
	S_TS_TYPE,
	S_TS_WINDOW,
	S_REPLAY,
	S_ARGS,
	S_OP,
	S_OK
};

struct prediction {
	enum stage stage; /* where the request stops */
	const char *code; /* the error's name, NULL when ok */
	bool id_null;
	json_int_t id;
};

struct counters {
	uint64_t requests, auth_failures, malformed, errors;
};

/* The MAC line of section 4, checked here with OpenSSL: lower-case hex only. */
static bool
model_mac(const uint8_t *d, size_t len)
{
	uint8_t want[32];
	unsigned int wl = sizeof(want);

	if (len < CTL_MAC_LINE || memcmp(d, "mac ", 4) != 0 || d[CTL_MAC_LINE - 1] != '\n')
		return false;
	HMAC(EVP_sha256(), key.bytes, (int)key.len, d + CTL_MAC_LINE, len - CTL_MAC_LINE, want,
	     &wl);
	for (int i = 0; i < 32; i++) {
		static const char hex[] = "0123456789abcdef";

		if (d[4 + 2 * i] != hex[want[i] >> 4] || d[5 + 2 * i] != hex[want[i] & 15])
			return false;
	}
	return true;
}

/* The MACs the endpoint accepted during this input (a replay from any address is refused). */
static struct {
	char mac[64];
	int64_t at;
} accepted[FZ_MAX_REQ];
static unsigned int n_accepted;

static bool
mac_accepted_before(const uint8_t *d)
{
	for (unsigned int i = 0; i < n_accepted; i++)
		if (memcmp(accepted[i].mac, d + 4, 64) == 0 &&
		    now_ms - accepted[i].at <= 2 * CTL_TS_WINDOW_MS)
			return true;
	return false;
}

static struct prediction
predict(bool keyed, const uint8_t *d, size_t len, int64_t *last_ts, struct counters *c)
{
	/* last_ts: the model's last accepted ts of the datagram's client */
	struct prediction p = {.id_null = true};
	const char *js = (const char *)d;
	size_t jl = len;
	json_t *req, *id, *ts;

	c->requests++;
	memset(&M, 0, sizeof(M));
	if (len > CTL_MAX_DGRAM) {
		c->malformed++;
		p.stage = S_SIZE;
		p.code = "EINVAL";
		return p;
	}
	if (keyed) {
		if (!model_mac(d, len)) {
			c->auth_failures++;
			p.stage = S_MAC;
			p.code = "EPERM";
			return p;
		}
		js += CTL_MAC_LINE;
		jl -= CTL_MAC_LINE;
	}
	req = json_loadb(js, jl, JSON_REJECT_DUPLICATES, NULL);
	if (!req || !json_is_object(req) || !json_is_integer(json_object_get(req, "id"))) {
		c->malformed++;
		p.stage = !req ? S_JSON : !json_is_object(req) ? S_OBJECT : S_ID;
		p.code = "EINVAL";
		json_decref(req);
		return p;
	}
	id = json_object_get(req, "id");
	p.id_null = false;
	p.id = json_integer_value(id);
	ts = json_object_get(req, "ts");
	if (keyed || ts) {
		if (!json_is_integer(ts)) {
			c->malformed++;
			p.stage = S_TS_TYPE;
			p.code = "EINVAL";
			json_decref(req);
			return p;
		}
		if (keyed) {
			json_int_t t = json_integer_value(ts);

			if (t > now_ms + CTL_TS_WINDOW_MS || t < now_ms - CTL_TS_WINDOW_MS ||
			    t <= *last_ts) {
				c->auth_failures++;
				p.stage = t <= *last_ts && t >= now_ms - CTL_TS_WINDOW_MS &&
						  t <= now_ms + CTL_TS_WINDOW_MS
					      ? S_REPLAY
					      : S_TS_WINDOW;
				p.code = "EPERM";
				json_decref(req);
				return p;
			}
			if (mac_accepted_before(d)) {
				c->auth_failures++;
				p.stage = S_REPLAY;
				p.code = "EPERM";
				json_decref(req);
				return p;
			}
			*last_ts = t;
			if (n_accepted < FZ_MAX_REQ) {
				memcpy(accepted[n_accepted].mac, d + 4, 64);
				accepted[n_accepted++].at = now_ms;
			}
		}
	}
	model_request(req);
	json_decref(req);
	if (!M.valid) {
		c->errors++;
		p.stage = S_ARGS;
		p.code = "EINVAL";
		return p;
	}
	if (op_ret) {
		c->errors++;
		p.stage = S_OP;
		p.code = ctl_errname(op_ret);
		return p;
	}
	p.stage = S_OK;
	return p;
}

/* ---- the reply ---- */

static bool
names_one(const char *msg, const char *const *names, int n)
{
	for (int i = 0; i < n; i++) {
		char head[48];

		/* long names may be cut in the message: their first bytes will do */
		snprintf(head, sizeof(head), "%s", names[i]);
		if (strstr(msg, head))
			return true;
	}
	return false;
}

static void
check_reply(const struct prediction *p, const char *out, size_t n)
{
	static const char *const documented[] = {"EINVAL", "ENOENT", "EEXIST",
						 "ENOSPC", "EPERM",  "EBUSY"};
	json_error_t je;
	json_t *rep = json_loadb(out, n, 0, &je);
	const json_t *id, *ok, *e;
	const char *code, *msg;
	bool known = false;

	CHECK(rep && json_is_object(rep), "reply is not a JSON object (%s)", rep ? "" : je.text);
	id = json_object_get(rep, "id");
	ok = json_object_get(rep, "ok");
	CHECK(id && json_is_boolean(ok), "reply without id or ok");
	if (p->id_null)
		CHECK(json_is_null(id), "id should be null");
	else
		CHECK(json_is_integer(id) && json_integer_value(id) == p->id, "id %lld not echoed",
		      (long long)p->id);
	CHECK(json_is_true(ok) == (p->stage == S_OK), "ok is %s, the model says stage %d",
	      json_is_true(ok) ? "true" : "false", (int)p->stage);
	if (json_is_true(ok)) {
		CHECK(json_is_object(json_object_get(rep, "result")), "ok without a result object");
		CHECK(!json_object_get(rep, "error"), "ok with an error");
		json_decref(rep);
		return;
	}
	e = json_object_get(rep, "error");
	CHECK(json_is_object(e), "error reply without an error object");
	code = json_string_value(json_object_get(e, "code"));
	for (size_t i = 0; code && i < sizeof(documented) / sizeof(documented[0]); i++)
		known |= strcmp(code, documented[i]) == 0;
	CHECK(known, "error.code %s not documented", code ? code : "(none)");
	CHECK(strcmp(code, p->code) == 0, "error.code %s, the model says %s (stage %d)", code,
	      p->code, (int)p->stage);
	msg = json_string_value(json_object_get(e, "message"));
	CHECK(msg && *msg, "error without a message");
	switch (p->stage) {
	case S_SIZE:
		CHECK(strstr(msg, "64 KiB"), "size message: %s", msg);
		break;
	case S_MAC:
		CHECK(strstr(msg, "MAC"), "MAC message: %s", msg);
		break;
	case S_JSON:
		CHECK(strstr(msg, "not JSON"), "JSON message: %s", msg);
		break;
	case S_OBJECT:
		CHECK(strstr(msg, "object"), "object message: %s", msg);
		break;
	case S_ID:
		CHECK(strstr(msg, "'id'"), "id message: %s", msg);
		break;
	case S_TS_TYPE:
	case S_TS_WINDOW:
		CHECK(strstr(msg, "'ts'"), "ts message: %s", msg);
		break;
	case S_REPLAY:
		CHECK(strstr(msg, "'ts'") && strstr(msg, "replay"), "replay message: %s", msg);
		break;
	case S_ARGS: {
		const char *names[MAX_BAD];

		for (int i = 0; i < M.nbad; i++)
			names[i] = M.bad[i];
		CHECK(names_one(msg, names, M.nbad),
		      "message '%s' names none of the %d wrong fields (first: %s)", msg, M.nbad,
		      M.nbad ? M.bad[0] : "-");
		break;
	}
	case S_OP:
		CHECK(strstr(msg, "fake") && strstr(msg, "refused"), "operation message: %s", msg);
		break;
	case S_OK:
		break;
	}
	json_decref(rep);
}

/* ---- one input ---- */

static const int op_rets[8] = {0, 0, ENOENT, EEXIST, ENOSPC, EBUSY, EPERM, ETIMEDOUT};
static const int64_t clock_steps[4] = {0, 1, 30000, -30001};

static void
one(struct ctl_endpoint *ep, bool keyed, bool sign, const struct sockaddr_in *from,
    const uint8_t *d, size_t len, int64_t *last_ts, struct counters *c)
{
	static uint8_t framed[CTL_MAX_DGRAM];
	static char out[CTL_MAX_DGRAM];
	const uint8_t *dg = d;
	size_t dl = len, n;
	struct prediction p;
	struct ctl_endpoint_stats st;
	int calls = op_calls;

	if (sign) {
		int r = ctl_frame(&key, (const char *)d, len, framed, sizeof(framed));
		const char *js;
		size_t jl;

		CHECK(r == (int)(len + CTL_MAC_LINE) ||
			  (r == -EMSGSIZE && len + CTL_MAC_LINE > CTL_MAX_DGRAM),
		      "ctl_frame: %d for %zu bytes", r, len);
		if (r < 0)
			return;
		/* framing round trip */
		CHECK(ctl_unframe(&key, framed, (size_t)r, &js, &jl) == 0 && jl == len &&
			  memcmp(js, d, len) == 0,
		      "ctl_unframe does not undo ctl_frame");
		dg = framed;
		dl = (size_t)r;
	}
	cur_dgram = dg;
	cur_len = dl;
	cur_reply = NULL;
	p = predict(keyed, dg, dl, last_ts, c);
	n = from ? ctl_endpoint_handle_from(ep, from, dg, dl, out, sizeof(out))
		 : ctl_endpoint_handle(ep, dg, dl, out, sizeof(out));
	cur_reply = out;
	cur_reply_len = n;
	if (verbose)
		fprintf(stderr, "fuzz_ctl: %s%s from %s, %zu bytes: stage %d %s -> %.*s\n",
			keyed ? "keyed" : "unkeyed", sign ? " signed" : "",
			from ? inet_ntoa(from->sin_addr) : "-", dl, (int)p.stage,
			p.code ? p.code : "ok", (int)n, out);
	CHECK(n > 0 && n <= sizeof(out), "reply length %zu", n);
	check_reply(&p, out, n);
	CHECK(op_calls == calls + (p.stage >= S_OP), "%d operations called, the model says %d",
	      op_calls - calls, p.stage >= S_OP);
	if (p.stage >= S_OP)
		CHECK(op_last == M.cmd, "called %s, not %s", cmd_names[op_last], cmd_names[M.cmd]);
	ctl_endpoint_stats(ep, &st);
	CHECK(st.requests == c->requests && st.auth_failures == c->auth_failures &&
		  st.malformed == c->malformed && st.errors == c->errors,
	      "counters %llu/%llu/%llu/%llu, the model's %llu/%llu/%llu/%llu",
	      (unsigned long long)st.requests, (unsigned long long)st.auth_failures,
	      (unsigned long long)st.malformed, (unsigned long long)st.errors,
	      (unsigned long long)c->requests, (unsigned long long)c->auth_failures,
	      (unsigned long long)c->malformed, (unsigned long long)c->errors);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *v = getenv("CAIS_FUZZ_VERBOSE");

	(void)argc;
	(void)argv;
	verbose = v && *v && strcmp(v, "0") != 0;
	key.len = strlen(FZ_KEY);
	memcpy(key.bytes, FZ_KEY, key.len);
	return 0;
}

/*
 * The endpoints: opening one per input costs a large allocation (its 192 KiB
 * of buffers: an mmap/munmap under ASan) and halves the speed. An endpoint
 * is reused while it is as good as new: a keyless one always (its only state
 * is its counters, which are compared as differences), a keyed one until it
 * has accepted a ts (then it is closed and the next input opens another).
 */
static struct ctl_endpoint *eps[2];

static struct ctl_endpoint *
endpoint(bool keyed, struct counters *base)
{
	struct ctl_endpoint_conf conf = {0};
	struct ctl_endpoint_stats st;

	if (!eps[keyed]) {
		conf.ops = &ops;
		conf.key = keyed ? &key : NULL;
		conf.clock_ms = fake_clock;
		CHECK(ctl_endpoint_open(&conf, &eps[keyed]) == 0, "ctl_endpoint_open");
	}
	ctl_endpoint_stats(eps[keyed], &st);
	base->requests = st.requests;
	base->auth_failures = st.auth_failures;
	base->malformed = st.malformed;
	base->errors = st.errors;
	return eps[keyed];
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_endpoint *ep;
	struct counters c;
	int64_t last_ts[4] = {0}; /* per source: none, 10.0.0.1..3 */
	bool keyed, sign, split, used = false;
	uint8_t mode, srcs;
	int64_t step;
	size_t start = 0;
	int k = 0;

	if (size < 2)
		return 0;
	mode = data[0];
	srcs = data[1];
	keyed = mode & 1;
	sign = mode & 2;
	split = mode & 4;
	op_ret = op_rets[(mode >> 3) & 7];
	step = clock_steps[mode >> 6];
	data += 2;
	size -= 2;

	now_ms = FZ_NOW;
	n_accepted = 0;
	ep = endpoint(keyed, &c);
	for (size_t i = 0; i <= size && k < FZ_MAX_REQ; i++) {
		int src = (srcs >> (2 * (k % 4))) & 3;
		struct sockaddr_in from = {.sin_family = AF_INET};

		if (split ? i < size && data[i] != '\0' : i < size)
			continue;
		from.sin_addr.s_addr = htonl(0x0A000000u + (uint32_t)src);
		from.sin_port = htons((uint16_t)(1000 + k));
		one(ep, keyed, sign, src ? &from : NULL, data + start, i - start, &last_ts[src],
		    &c);
		now_ms += step;
		start = i + 1;
		k++;
	}
	for (int i = 0; i < 4; i++)
		used |= last_ts[i] != 0;
	if (used) { /* it has accepted a ts: not new any more */
		ctl_endpoint_close(ep);
		eps[keyed] = NULL;
	}
	cur_dgram = NULL;
	cur_reply = NULL;
	return 0;
}
