/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writes the seed corpus of fuzz_ctl into a directory: one file per case,
 * in fuzz_ctl.c's input format (a mode byte, a source byte, then one
 * datagram or several separated by NUL bytes). No DPDK.
 *
 *   cais-gen-corpus-ctl DIR
 *
 * The seeds in tests/fuzz/corpus_ctl/ are this program's output: a valid
 * request per command (keyed and signed by the target, keyed with the MAC
 * made here, unkeyed), the error cases of tests/unit/test_endpoint.c
 * (envelope, every command's bad arguments, MAC, ts window and replay,
 * the operations' errors) and the reproducers of the defects reported
 * there (seed-bug-*). Regenerate them after changing the input format.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl_auth.h"

/* As in fuzz_ctl.c. */
#define FZ_NOW 1700000000000LL
#define FZ_KEY "cais-fuzz-ctl-key: 32 bytes ...."

/* fuzz_ctl.c's mode byte */
#define KEYED	 0x01
#define SIGN	 0x02
#define SPLIT	 0x04
#define OPRET(i) ((i) << 3) /* 0, 0, ENOENT, EEXIST, ENOSPC, EBUSY, EPERM, ETIMEDOUT */
#define STEP(i)	 ((i) << 6) /* 0, +1 ms, +30 s, -30.001 s */

#define MAX_INPUT (64 * 1024)

struct input {
	uint8_t b[MAX_INPUT];
	size_t len;
};

static const char *dir;
static struct ctl_key key;
static int count;

static void
save(const char *name, const struct input *in)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(in->b, 1, in->len, f) != in->len || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
		exit(1);
	}
	count++;
}

/* srcs: the source of datagram i in bits 2(i%4)..: 0 none, 1..3 10.0.0.1..3 */
static void
start_from(struct input *in, uint8_t mode, uint8_t srcs)
{
	in->b[0] = mode;
	in->b[1] = srcs;
	in->len = 2;
}

static void
start(struct input *in, uint8_t mode)
{
	start_from(in, mode, 0);
}

static void
add(struct input *in, const void *d, size_t n)
{
	if (in->len + n > sizeof(in->b)) {
		fprintf(stderr, "seed too large\n");
		exit(1);
	}
	memcpy(in->b + in->len, d, n);
	in->len += n;
}

static void
addf(struct input *in, const char *fmt, ...)
{
	char buf[MAX_INPUT];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	add(in, buf, (size_t)n);
}

static void
sep(struct input *in)
{
	add(in, "", 1);
}

/* One datagram, the target frames it (SIGN) or not. */
static void
one(const char *name, uint8_t mode, const char *json)
{
	struct input in;

	start(&in, mode);
	add(&in, json, strlen(json));
	save(name, &in);
}

/* One datagram framed here with k (raw keyed mode). */
static void
framed(const char *name, const struct ctl_key *k, const char *json)
{
	struct input in;
	int n;

	start(&in, KEYED);
	n = ctl_frame(k, json, strlen(json), in.b + in.len, sizeof(in.b) - in.len);
	if (n < 0)
		exit(1);
	in.len += (size_t)n;
	save(name, &in);
}

static const char *
req(long long id, long long ts, const char *body)
{
	static char b[4][32768];
	static int i;
	char *p = b[i++ & 3];

	snprintf(p, sizeof(b[0]), "{\"id\":%lld,\"ts\":%lld,%s}", id, ts, body);
	return p;
}

static const char *
req_nots(long long id, const char *body)
{
	static char b[4][32768];
	static int i;
	char *p = b[i++ & 3];

	snprintf(p, sizeof(b[0]), "{\"id\":%lld,%s}", id, body);
	return p;
}

#define MEMBERS2                                                                                   \
	"[{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":4001},"           \
	"{\"rank\":0,\"mac\":\"0a:1B:2c:3D:4e:5F\",\"ip\":\"10.0.0.1\",\"port\":4000}]"
#define SESS(extra, members)                                                                       \
	"\"cmd\":\"session.add\",\"args\":{\"tenant\":3,\"session\":4,\"n\":2,\"slots\":16,"       \
	"\"elems_per_packet\":256" extra ",\"members\":" members "}"
#define M1(m) "[{\"rank\":0,\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.1\",\"port\":4000}," m "]"
#define MB(m) SESS("", M1(m))

static const struct {
	const char *name, *body;
} good[] = {
    {"ping", "\"cmd\":\"ping\""},
    {"ping-args", "\"cmd\":\"ping\",\"args\":{}"},
    {"stats", "\"cmd\":\"stats.get\""},
    {"session-add", SESS(",\"priority\":1", MEMBERS2)},
    {"session-add-1", "\"cmd\":\"session.add\",\"args\":{\"tenant\":0,\"session\":65535,\"n\":1,"
		      "\"slots\":1,\"elems_per_packet\":1,\"members\":[{\"rank\":0,\"mac\":"
		      "\"fe:ff:ff:ff:ff:ff\",\"ip\":\"223.255.255.255\",\"port\":65535}]}"},
    {"session-add-switch-port",
     MB("{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":4001,"
	"\"switch_port\":32767}")},
    /* a leaf (E9): its ranks from 4, its spine */
    {"session-add-leaf",
     "\"cmd\":\"session.add\",\"args\":{\"tenant\":3,\"session\":4,\"n\":2,\"slots\":16,"
     "\"elems_per_packet\":256,\"first_rank\":4,\"members\":[{\"rank\":5,\"mac\":"
     "\"02:00:00:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":4001},{\"rank\":4,\"mac\":"
     "\"02:00:00:00:00:01\",\"ip\":\"10.0.0.1\",\"port\":4000}],\"uplink\":{\"ip\":"
     "\"10.0.0.253\",\"mac\":\"02:00:00:00:00:fd\",\"rank\":1,\"switch_port\":4,"
     "\"port\":51733}}"},
    {"stats-after", "\"cmd\":\"stats.get\",\"args\":{\"after\":4294967295}"},
    {"session-del", "\"cmd\":\"session.del\",\"args\":{\"tenant\":65535,\"session\":0}"},
    {"tensor-add", "\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":"
		   "4294967295,\"op\":\"min\",\"scale\":1e-300}"},
    {"tensor-add-avg",
     "\"cmd\":\"tensor.add\",\"args\":{\"scale\":1024,\"op\":\"avg\",\"tensor\":0,"
     "\"session\":9,\"tenant\":8}"},
    {"tensor-del", "\"cmd\":\"tensor.del\",\"args\":{\"tenant\":5,\"session\":6,\"tensor\":7}"},
    {"lease", "\"cmd\":\"lease\",\"args\":{\"ttl_ms\":1500}"},
    {"lease-max", "\"cmd\":\"lease\",\"args\":{\"ttl_ms\":86400000}"},
    {"mode-fwd", "\"cmd\":\"mode.set\",\"args\":{\"mode\":\"forward_only\"}"},
    {"mode-compute", "\"cmd\":\"mode.set\",\"args\":{\"mode\":\"compute\"}"},
    {"thresholds", "\"cmd\":\"thresholds.set\",\"args\":{\"queue_depth\":4294967295,"
		   "\"slot_usage\":0.75}"},
    {"thresholds-su", "\"cmd\":\"thresholds.set\",\"args\":{\"slot_usage\":0}"},
    {"thresholds-qd", "\"cmd\":\"thresholds.set\",\"args\":{\"queue_depth\":0}"},
};

static const struct {
	const char *name, *body;
} bad[] = {
    {"cmd-unknown", "\"cmd\":\"reboot\""},
    {"cmd-empty", "\"cmd\":\"\""},
    {"cmd-number", "\"cmd\":5"},
    {"cmd-missing", "\"args\":{}"},
    {"args-array", "\"cmd\":\"ping\",\"args\":[]"},
    {"args-null", "\"cmd\":\"lease\",\"args\":null"},
    {"ping-arg", "\"cmd\":\"ping\",\"args\":{\"x\":1}"},
    {"member-zero-mac",
     MB("{\"rank\":1,\"mac\":\"00:00:00:00:00:00\",\"ip\":\"10.0.0.2\",\"port\":4001}")},
    {"member-bcast-ip",
     MB("{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"255.255.255.255\",\"port\":4001}")},
    {"member-zero-ip", MB("{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"0.0.0.0\",\"port\":4001}")},
    {"member-same-addr",
     MB("{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"10.0.0.1\",\"port\":4000}")},
    {"stats-after-neg", "\"cmd\":\"stats.get\",\"args\":{\"after\":-1}"},
    {"stats-arg", "\"cmd\":\"stats.get\",\"args\":{\"verbose\":true}"},
    {"sadd-missing", "\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":2}"},
    {"sadd-tenant-str", "\"cmd\":\"session.add\",\"args\":{\"tenant\":\"1\",\"session\":1}"},
    {"sadd-tenant-big", "\"cmd\":\"session.add\",\"args\":{\"tenant\":65536,\"session\":1}"},
    {"sadd-n-0", "\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":0}"},
    {"sadd-n-256", "\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":256}"},
    {"sadd-slots-12", "\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":2,"
		      "\"slots\":12,\"elems_per_packet\":8,\"members\":" MEMBERS2 "}"},
    {"sadd-slots-65536", "\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":2,"
			 "\"slots\":65536,\"elems_per_packet\":8,\"members\":" MEMBERS2 "}"},
    {"sadd-elems-2049", "\"cmd\":\"session.add\",\"args\":{\"tenant\":1,\"session\":1,\"n\":2,"
			"\"slots\":8,\"elems_per_packet\":2049,\"members\":" MEMBERS2 "}"},
    {"sadd-priority-2", SESS(",\"priority\":2", MEMBERS2)},
    {"sadd-unknown", SESS(",\"bogus\":1", MEMBERS2)},
    {"sadd-members-obj", SESS("", "{}")},
    {"sadd-members-count", SESS("", "[]")},
    {"sadd-member-int", SESS("", "[1,2]")},
    {"sadd-rank-dup",
     MB("{\"rank\":0,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":4001}")},
    {"sadd-rank-n",
     MB("{\"rank\":2,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":4001}")},
    {"sadd-mac-group",
     MB("{\"rank\":1,\"mac\":\"01:00:5e:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":4001}")},
    {"sadd-mac-short",
     MB("{\"rank\":1,\"mac\":\"02:00:00:00:00\",\"ip\":\"10.0.0.2\",\"port\":4001}")},
    {"sadd-mac-dash",
     MB("{\"rank\":1,\"mac\":\"02-00-00-00-00-02\",\"ip\":\"10.0.0.2\",\"port\":4001}")},
    {"sadd-mac-space",
     MB("{\"rank\":1,\"mac\":\" 2:00:00:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":4001}")},
    {"sadd-ip-300",
     MB("{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"10.0.0.300\",\"port\":4001}")},
    {"sadd-ip-v6", MB("{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"::1\",\"port\":4001}")},
    {"sadd-port-0",
     MB("{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":0}")},
    {"sadd-member-unknown",
     MB("{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":4001,\"vlan\":3}")},
    {"sadd-member-missing", MB("{\"rank\":1,\"ip\":\"10.0.0.2\",\"port\":4001}")},
    {"sdel-missing", "\"cmd\":\"session.del\",\"args\":{\"tenant\":1}"},
    {"sdel-neg", "\"cmd\":\"session.del\",\"args\":{\"tenant\":1,\"session\":-1}"},
    {"tadd-op", "\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":3,"
		"\"op\":\"prod\",\"scale\":1}"},
    {"tadd-scale-0", "\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":3,"
		     "\"op\":\"sum\",\"scale\":0}"},
    {"tadd-scale-neg", "\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":3,"
		       "\"op\":\"sum\",\"scale\":-0.5}"},
    {"tadd-scale-str", "\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":3,"
		       "\"op\":\"sum\",\"scale\":\"1\"}"},
    {"tadd-scale-big", "\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":3,"
		       "\"op\":\"sum\",\"scale\":1e301}"},
    {"tadd-tensor-big", "\"cmd\":\"tensor.add\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":"
			"4294967296,\"op\":\"sum\",\"scale\":1}"},
    {"tdel-real", "\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,\"session\":2,\"tensor\":1.5}"},
    {"lease-0", "\"cmd\":\"lease\",\"args\":{\"ttl_ms\":0}"},
    {"lease-big", "\"cmd\":\"lease\",\"args\":{\"ttl_ms\":86400001}"},
    {"lease-bool", "\"cmd\":\"lease\",\"args\":{\"ttl_ms\":true}"},
    {"mode-bad", "\"cmd\":\"mode.set\",\"args\":{\"mode\":\"fast\"}"},
    {"mode-int", "\"cmd\":\"mode.set\",\"args\":{\"mode\":1}"},
    {"thr-empty", "\"cmd\":\"thresholds.set\",\"args\":{}"},
    {"thr-su", "\"cmd\":\"thresholds.set\",\"args\":{\"slot_usage\":1.5}"},
    {"thr-qd", "\"cmd\":\"thresholds.set\",\"args\":{\"queue_depth\":-1}"},
    {"thr-unknown", "\"cmd\":\"thresholds.set\",\"args\":{\"queue_depth\":1,\"slots\":3}"},
};

static const struct {
	const char *name, *text;
} envelope[] = {
    {"env-empty", ""},
    {"env-garbage", "ping"},
    {"env-truncated", "{\"id\":1,\"cmd\":\"ping\""},
    {"env-trailing", "{\"id\":1,\"cmd\":\"ping\"} {}"},
    {"env-array", "[{\"id\":1,\"cmd\":\"ping\"}]"},
    {"env-number", "5"},
    {"env-dup-cmd", "{\"id\":1,\"cmd\":\"ping\",\"cmd\":\"mode.set\"}"},
    {"env-nul-escape", "{\"id\":1,\"cmd\":\"ping\\u0000\"}"},
    {"env-bad-utf8", "{\"id\":1,\"cmd\":\"\xff\"}"},
    {"env-id-missing", "{\"cmd\":\"ping\"}"},
    {"env-id-string", "{\"id\":\"1\",\"cmd\":\"ping\"}"},
    {"env-id-real", "{\"id\":1.0,\"cmd\":\"ping\"}"},
    {"env-id-null", "{\"id\":null,\"cmd\":\"ping\"}"},
    {"env-id-huge", "{\"id\":99999999999999999999,\"cmd\":\"ping\"}"},
    {"env-id-max", "{\"id\":9223372036854775807,\"cmd\":\"ping\"}"},
    {"env-ts-string", "{\"id\":1,\"ts\":\"now\",\"cmd\":\"ping\"}"},
    {"env-ts-real", "{\"id\":1,\"ts\":1.7e12,\"cmd\":\"ping\"}"},
};

int
main(int argc, char **argv)
{
	struct input in;
	char big[32768];
	size_t o;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		return 1;
	}
	key.len = strlen(FZ_KEY);
	memcpy(key.bytes, FZ_KEY, key.len);

	/* every command, valid: signed by the target, framed here, unkeyed */
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char name[64];

		snprintf(name, sizeof(name), "ok-%s", good[i].name);
		one(name, KEYED | SIGN, req((long long)i + 1, FZ_NOW, good[i].body));
		snprintf(name, sizeof(name), "mac-ok-%s", good[i].name);
		framed(name, &key, req((long long)i + 1, FZ_NOW, good[i].body));
		snprintf(name, sizeof(name), "unkeyed-%s", good[i].name);
		one(name, 0, req_nots((long long)i + 1, good[i].body));
	}
	/* the largest session: 255 members */
	o = (size_t)snprintf(big, sizeof(big),
			     "\"cmd\":\"session.add\",\"args\":{\"tenant\":65535,\"session\":0,"
			     "\"n\":255,\"slots\":32768,\"elems_per_packet\":2048,\"members\":[");
	for (unsigned int r = 0; r < 255; r++)
		o += (size_t)snprintf(big + o, sizeof(big) - o,
				      "%s{\"rank\":%u,\"mac\":\"02:00:00:00:00:%02x\",\"ip\":"
				      "\"10.1.0.%u\",\"port\":%u}",
				      r ? "," : "", 254 - r, 254 - r, r, 1000 + r);
	snprintf(big + o, sizeof(big) - o, "]}");
	one("ok-session-add-255", KEYED | SIGN, req(100, FZ_NOW, big));

	/* bad arguments: signed (keyed), and unkeyed */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char name[64];

		snprintf(name, sizeof(name), "bad-%s", bad[i].name);
		one(name, KEYED | SIGN, req((long long)i + 200, FZ_NOW, bad[i].body));
		snprintf(name, sizeof(name), "unkeyed-bad-%s", bad[i].name);
		one(name, 0, req_nots((long long)i + 200, bad[i].body));
	}
	/* envelopes: signed, and unkeyed */
	for (size_t i = 0; i < sizeof(envelope) / sizeof(envelope[0]); i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s", envelope[i].name);
		one(name, KEYED | SIGN, envelope[i].text);
		snprintf(name, sizeof(name), "unkeyed-%s", envelope[i].name);
		one(name, 0, envelope[i].text);
	}

	/* MAC: none, upper-case hex, other bytes, another key, truncated */
	{
		const char *js = req(1, FZ_NOW, "\"cmd\":\"lease\",\"args\":{\"ttl_ms\":100}");
		struct ctl_key other = key;
		uint8_t d[1024];
		int n = ctl_frame(&key, js, strlen(js), d, sizeof(d));

		one("mac-none", KEYED, js);
		for (int i = 4; i < 68; i++)
			if (d[i] >= 'a' && d[i] <= 'f')
				d[i] = (uint8_t)(d[i] - 'a' + 'A');
		start(&in, KEYED);
		add(&in, d, (size_t)n);
		save("mac-upper", &in);
		n = ctl_frame(&key, js, strlen(js), d, sizeof(d));
		d[CTL_MAC_LINE + 30] ^= 1;
		start(&in, KEYED);
		add(&in, d, (size_t)n);
		save("mac-other-bytes", &in);
		other.bytes[0] ^= 1;
		framed("mac-other-key", &other, js);
		start(&in, KEYED);
		add(&in, d, CTL_MAC_LINE - 1);
		save("mac-short", &in);
		start(&in, KEYED);
		add(&in, d, CTL_MAC_LINE);
		save("mac-line-only", &in);
		/* a signed datagram to a keyless endpoint */
		one("unkeyed-signed", SIGN, js);
	}

	/* ts: a sequence on one endpoint: accepted, replayed (equal, older), stale both ways,
	 * missing, not an integer, the window's edges; then accepted again */
	start(&in, KEYED | SIGN | SPLIT);
	addf(&in, "%s", req(1, FZ_NOW, "\"cmd\":\"ping\""));
	sep(&in);
	addf(&in, "%s", req(2, FZ_NOW, "\"cmd\":\"lease\",\"args\":{\"ttl_ms\":5}"));
	sep(&in);
	addf(&in, "%s", req(3, FZ_NOW - 1, "\"cmd\":\"ping\""));
	sep(&in);
	addf(&in, "%s", req(4, FZ_NOW + 30001, "\"cmd\":\"ping\""));
	sep(&in);
	addf(&in, "%s", req(5, FZ_NOW - 30001, "\"cmd\":\"ping\""));
	sep(&in);
	addf(&in, "%s", req_nots(6, "\"cmd\":\"ping\""));
	sep(&in);
	addf(&in, "{\"id\":7,\"ts\":\"%lld\",\"cmd\":\"ping\"}", FZ_NOW + 1);
	sep(&in);
	addf(&in, "{\"ts\":%lld,\"cmd\":\"ping\"}", FZ_NOW + 1);
	sep(&in);
	addf(&in, "%s", req(9, FZ_NOW + 1, "\"cmd\":\"ping\""));
	sep(&in);
	addf(&in, "%s", req(10, FZ_NOW + 30000, "\"cmd\":\"stats.get\""));
	sep(&in);
	addf(&in, "%s", req(11, FZ_NOW + 30000, "\"cmd\":\"ping\""));
	save("ts-sequence", &in);
	/* the clock moves between datagrams */
	for (int s = 1; s < 4; s++) {
		char name[32];

		start(&in, (uint8_t)(KEYED | SIGN | SPLIT | STEP(s)));
		for (int i = 0; i < 4; i++) {
			if (i)
				sep(&in);
			addf(&in, "%s", req(i, FZ_NOW + i * 1000, "\"cmd\":\"ping\""));
		}
		snprintf(name, sizeof(name), "ts-clock-%d", s);
		save(name, &in);
	}
	/* per client: 10.0.0.1 accepted, 10.0.0.2 the same ts accepted, 10.0.0.1 replay
	 * refused, none (handle()) accepted: sources 1, 2, 1, 0 */
	start_from(&in, KEYED | SIGN | SPLIT, 1 | 2 << 2 | 1 << 4 | 0 << 6);
	for (int i = 0; i < 4; i++) {
		if (i)
			sep(&in);
		addf(&in, "%s", req(i, FZ_NOW, "\"cmd\":\"ping\""));
	}
	save("ts-per-client", &in);
	/* the same signed bytes from 10.0.0.1, then from 10.0.0.3 */
	{
		const char *js =
		    req(1, FZ_NOW, "\"cmd\":\"mode.set\",\"args\":{\"mode\":\"forward_only\"}");

		start_from(&in, KEYED | SIGN | SPLIT, 1 | 3 << 2);
		addf(&in, "%s", js);
		sep(&in);
		addf(&in, "%s", js);
		save("ts-replay-other-address", &in);
	}
	/* unkeyed sequence: ts optional and not checked */
	start(&in, SPLIT);
	addf(&in, "%s", req(1, 5, "\"cmd\":\"ping\""));
	sep(&in);
	addf(&in, "%s", req(2, 5, "\"cmd\":\"ping\""));
	sep(&in);
	addf(&in, "%s", req_nots(3, "\"cmd\":\"lease\",\"args\":{\"ttl_ms\":7}"));
	save("unkeyed-sequence", &in);

	/* the operations' errors */
	for (int r = 2; r < 8; r++) {
		char name[32];

		snprintf(name, sizeof(name), "op-error-%d", r);
		one(name, (uint8_t)(KEYED | SIGN | OPRET(r)),
		    req(r, FZ_NOW,
			"\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,\"session\":2,"
			"\"tensor\":3}"));
	}

	/* the defects reported by tests/unit/test_endpoint.c (t_bug_*) */
	o = (size_t)snprintf(big, sizeof(big), "{\"id\":1,\"cmd\":\"a");
	for (int i = 0; i < 200; i++)
		o += (size_t)snprintf(big + o, sizeof(big) - o, "\xc3\xa9");
	snprintf(big + o, sizeof(big) - o, "\"}");
	one("bug-message-utf8", 0, big);
	one("bug-mac-0x", 0,
	    req_nots(1, SESS("", "[{\"rank\":0,\"mac\":\"0x:00:00:00:00:01\",\"ip\":\"10.0.0.1\","
				 "\"port\":4000},{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":"
				 "\"10.0.0.2\",\"port\":4001}]")));
	one("bug-mac-tab", KEYED | SIGN,
	    req(1, FZ_NOW,
		SESS("", "[{\"rank\":0,\"mac\":\"\\t2:00:00:00:00:01\",\"ip\":\"10.0.0.1\","
			 "\"port\":4000},{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":"
			 "\"10.0.0.2\",\"port\":4001}]")));

	printf("%d seeds in %s\n", count, dir);
	return 0;
}
