/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Test harness for the dataplane without ports: EAL without hugepages, a
 * switch whose TX hook captures frames, and helpers to inject frames.
 */
#ifndef CAIS_TEST_ENV_H
#define CAIS_TEST_ENV_H

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "dp_ctl.h"
#include "dp_switch.h"
#include "../common/frames.h"

#define TENV_MAX_CAP 8192

/** A frame the switch sent: port and linear bytes. */
struct tenv_frame {
	uint16_t port;
	uint16_t queue;
	uint32_t len;
	uint8_t *data;
};

struct tenv {
	struct dp_switch *sw;
	struct rte_mempool *in;
	unsigned int n_cap;
	struct tenv_frame cap[TENV_MAX_CAP];
	unsigned int refuse_tx; /**< when > 0, TX takes nothing (counts down per call) */
};

/** The CPUs this process may run on, as an EAL cpuset: "(0,1,5)". */
static inline void
tenv_cpus(char *buf, size_t len)
{
	cpu_set_t set;
	size_t k = 0;

	buf[k++] = '(';
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int c = 0; c < CPU_SETSIZE && k + 8 < len; c++)
			if (CPU_ISSET(c, &set))
				k +=
				    (size_t)snprintf(buf + k, len - k, "%s%d", k > 1 ? "," : "", c);
	if (k == 1)
		buf[k++] = '0';
	snprintf(buf + k, len - k, ")");
}

/* EAL's runtime directory (empty with --no-shconf --no-telemetry) goes with the process. */
static inline void
tenv_eal_cleanup(void)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	rmdir(dir);
}

/** Start EAL once per process: no hugepages, no PCI, lcores 0..n-1 floating on our CPUs. */
static inline void
tenv_eal(unsigned int n_lcores)
{
	static int done;
	char prefix[64], lcores[600], cpus[512];
	char *argv[] = {
	    "test", "--no-huge",	 "-m",	 "512", "--no-pci", "--no-shconf", "--no-telemetry",
	    prefix, "--log-level=error", lcores, NULL};

	if (done)
		return;
	snprintf(prefix, sizeof(prefix), "--file-prefix=cais-test-%d", (int)getpid());
	tenv_cpus(cpus, sizeof(cpus));
	snprintf(lcores, sizeof(lcores), "--lcores=(0-%u)@%s", n_lcores - 1, cpus);
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0) {
		fprintf(stderr, "EAL init failed: %s\n", rte_strerror(rte_errno));
		exit(1);
	}
	done = 1;
	atexit(tenv_eal_cleanup);
}

static inline uint16_t
tenv_tx(void *ctx, uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	struct tenv *e = ctx;
	uint16_t i;

	if (e->refuse_tx) {
		e->refuse_tx--;
		return 0;
	}
	for (i = 0; i < n && e->n_cap < TENV_MAX_CAP; i++) {
		struct tenv_frame *f = &e->cap[e->n_cap++];
		const void *p;

		f->port = port;
		f->queue = queue;
		f->len = pkts[i]->pkt_len;
		f->data = malloc(f->len);
		/* returns a pointer into the mbuf, without copying, when contiguous */
		p = rte_pktmbuf_read(pkts[i], 0, f->len, f->data);
		if (p != f->data)
			memcpy(f->data, p, f->len);
		rte_pktmbuf_free(pkts[i]);
	}
	return i;
}

/**
 * The addresses the tests use: the aggregator 10.0.0.254 (MAC 02:aa:00:00:00:fe,
 * UDP 51733) and host r at 10.0.0.(r+1), MAC 02:00:00:00:00:(r+1), UDP 40000+r,
 * as the sessions the tests install register them.
 */
static inline void
tenv_addrs(struct tf_end *agg, struct tf_end *hosts, unsigned int n)
{
	static const uint8_t agg_mac[6] = {0x02, 0xaa, 0, 0, 0, 0xfe};

	memcpy(agg->mac, agg_mac, 6);
	agg->ip = htonl(0x0A0000FE);
	agg->port = CAIS_UDP_PORT;
	for (unsigned int r = 0; r < n; r++) {
		uint8_t mac[6] = {0x02, 0, 0, 0, 0, (uint8_t)(r + 1)};

		memcpy(hosts[r].mac, mac, 6);
		hosts[r].ip = htonl(0x0A000001 + r);
		hosts[r].port = (uint16_t)(40000 + r);
	}
}

/** Forget captured frames. */
static inline void
tenv_clear(struct tenv *e)
{
	for (unsigned int i = 0; i < e->n_cap; i++)
		free(e->cap[i].data);
	e->n_cap = 0;
}

static unsigned int tenv_seq;

/**
 * Create a switch with the aggregator at agg (MAC, IP, port) and a capture
 * TX hook. n_lcores data lcore contexts (only idx 0 is driven by tenv_send).
 */
static inline struct tenv *
tenv_create(const struct tf_end *agg, uint16_t n_ports, unsigned int n_lcores)
{
	struct tenv *e = calloc(1, sizeof(*e));
	struct dp_switch_conf c = {0};
	char name[16], pool[RTE_MEMPOOL_NAMESIZE];

	tenv_eal(n_lcores > 2 ? n_lcores : 2);
	snprintf(name, sizeof(name), "t%u", tenv_seq++);
	c.agg_enabled = true;
	c.agg_ip = agg->ip;
	memcpy(c.agg_mac.addr_bytes, agg->mac, 6);
	c.udp_port = agg->port;
	c.n_ports = n_ports;
	c.n_lcores = n_lcores;
	for (unsigned int i = 0; i < n_lcores; i++)
		c.lcore_ids[i] = i;
	c.mbufs = 2048;
	c.hdr_mbufs = 4096;
	c.socket = SOCKET_ID_ANY;
	c.name = name;
	c.tx = tenv_tx;
	c.tx_ctx = e;
	e->sw = dp_switch_create(&c);
	if (!e->sw) {
		fprintf(stderr, "dp_switch_create: %s\n", rte_strerror(rte_errno));
		exit(1);
	}
	snprintf(pool, sizeof(pool), "%s_in", name);
	e->in =
	    rte_pktmbuf_pool_create(pool, 4096, 0, 0, RTE_PKTMBUF_HEADROOM + 16384, SOCKET_ID_ANY);
	if (!e->in) {
		fprintf(stderr, "input pool: %s\n", rte_strerror(rte_errno));
		exit(1);
	}
	return e;
}

/*
 * Free the switch and the input pool; every input mbuf must be back in it
 * by then (sent, dropped, or kept by an open round and freed with its
 * session): a leak fails the test.
 */
static inline void
tenv_free(struct tenv *e)
{
	unsigned int back;

	tenv_clear(e);
	dp_switch_free(e->sw);
	back = rte_mempool_avail_count(e->in);
	if (back != e->in->size) {
		fprintf(stderr, "tenv_free: %u input mbufs not returned\n", e->in->size - back);
		abort();
	}
	rte_mempool_free(e->in);
	free(e);
}

/** An mbuf holding a copy of frame, as received on port. */
static inline struct rte_mbuf *
tenv_mbuf(struct tenv *e, uint16_t port, const void *frame, size_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(e->in);

	if (!m || !rte_pktmbuf_append(m, (uint16_t)len)) {
		fprintf(stderr, "tenv_mbuf: no mbuf\n");
		exit(1);
	}
	memcpy(rte_pktmbuf_mtod(m, void *), frame, len);
	m->port = port;
	return m;
}

/** Run one frame through lcore idx's pipeline and flush its output. */
static inline void
tenv_send_on(struct tenv *e, unsigned int idx, uint16_t port, const void *frame, size_t len)
{
	struct rte_mbuf *m = tenv_mbuf(e, port, frame, len);
	struct dp_lcore *lc = &e->sw->lcores[idx];

	dp_lcore_input(lc, &m, 1);
	dp_lcore_flush(lc);
}

static inline void
tenv_send(struct tenv *e, uint16_t port, const void *frame, size_t len)
{
	tenv_send_on(e, 0, port, frame, len);
}

/** Apply one JSON control request; returns its code, its result in *res unless res is NULL. */
static inline int
tenv_request(struct tenv *e, const char *json, struct ctl_err *err, json_t **res)
{
	struct ctl_ops ops;
	json_error_t jerr;
	json_t *req = json_loads(json, 0, &jerr), *r = NULL;
	int rc;

	if (!req) {
		fprintf(stderr, "bad test JSON: %s: %s\n", jerr.text, json);
		exit(1);
	}
	dp_switch_ctl_ops(e->sw, &ops);
	rc = ctl_dispatch(&ops, req, &r, err);
	json_decref(req);
	if (res)
		*res = r;
	else
		json_decref(r);
	return rc;
}

/** Apply one JSON control request; returns its code. */
static inline int
tenv_ctl(struct tenv *e, const char *json, struct ctl_err *err)
{
	return tenv_request(e, json, err, NULL);
}

/** The switch's stats.get result (the caller json_decref()s it). */
static inline json_t *
tenv_stats(struct tenv *e)
{
	struct ctl_err err;
	json_t *res = NULL;

	if (tenv_request(e, "{\"cmd\":\"stats.get\"}", &err, &res) != 0) {
		fprintf(stderr, "stats.get: %s\n", err.msg);
		exit(1);
	}
	return res;
}

/** Counter of a drop reason summed over lcores. */
static inline uint64_t
tenv_drops(const struct tenv *e, enum dp_drop d)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < e->sw->n_lcores; i++)
		n += e->sw->lcores[i].c.drops[d];
	return n;
}

#endif /* CAIS_TEST_ENV_H */
