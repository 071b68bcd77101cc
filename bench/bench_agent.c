/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_agent: libcais's own rate, with no switch in the way. A sink on
 * loopback answers every DATA with its RESULT at once (a session of one
 * rank: the sum of one contribution is the contribution), so what is
 * measured is the agent: encoding, its sockets, the window, decoding. One
 * communicator of one rank runs all-reduces of B bytes back to back for T
 * seconds per row, with K flows (cais_config.threads); the rate is tensor
 * bits per second (B x 8 / time), and "scale" the rate against the same row
 * with K = 1, measured in the same run.
 *
 * The sink has as many threads as the largest K, each a UDP socket on the
 * same port (SO_REUSEPORT: the kernel spreads the flows over them).
 * --gso-ab measures every row twice, first with the flows' UDP GSO off
 * (CAIS_UDP_GSO=0, agent/window.h), then on, and prints on / off.
 *
 *   bench_agent [--threads 1,2] [--bytes 64M] [--dtype f32,bf16]
 *               [--wire fixed32,block16] [--seconds T] [--csv FILE] [--gso-ab] [--quick]
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
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

#include <cais/cais.h>
#include <cais/proto.h>

#include "bench_args.h"
#include "cmn_cpu.h"

#define PROG	      "bench_agent"
#define MAX_LIST      8
#define SINK_BATCH    64
#define SINK_DGRAM    9216
#define MAX_SINKS     16

struct sink {
	int fd[MAX_SINKS];
	unsigned int n;
	pthread_t th[MAX_SINKS];
	atomic_bool stop;
	struct sockaddr_in addr;
	atomic_ulong answered;
};

struct sink_arg {
	struct sink *s;
	int fd;
};

/* DATA in, RESULT out: the header turned around, the payload kept. */
static void *
sink_main(void *p)
{
	struct sink_arg *a = p;
	static __thread uint8_t buf[SINK_BATCH][SINK_DGRAM];
	struct mmsghdr m[SINK_BATCH];
	struct iovec iov[SINK_BATCH];
	struct sockaddr_in from[SINK_BATCH];

	while (!atomic_load(&a->s->stop)) {
		int n;

		for (int i = 0; i < SINK_BATCH; i++) {
			iov[i] = (struct iovec){.iov_base = buf[i], .iov_len = SINK_DGRAM};
			memset(&m[i].msg_hdr, 0, sizeof(m[i].msg_hdr));
			m[i].msg_hdr.msg_iov = &iov[i];
			m[i].msg_hdr.msg_iovlen = 1;
			m[i].msg_hdr.msg_name = &from[i];
			m[i].msg_hdr.msg_namelen = sizeof(from[i]);
		}
		n = recvmmsg(a->fd, m, SINK_BATCH, MSG_WAITFORONE, NULL);
		if (n <= 0)
			continue; /* the receive timeout: look at stop */
		for (int i = 0; i < n; i++) {
			struct cais_hdr *h = (struct cais_hdr *)buf[i];

			h->ver_type = (uint8_t)(CAIS_VERSION << 4 | CAIS_TYPE_RESULT);
			h->flags = 0;
			h->rank = CAIS_RANK_NONE;
			iov[i].iov_len = m[i].msg_len;
		}
		for (int sent = 0; sent < n;) {
			int k = sendmmsg(a->fd, m + sent, (unsigned int)(n - sent), 0);

			if (k <= 0)
				break;
			sent += k;
		}
		atomic_fetch_add(&a->s->answered, (unsigned long)n);
	}
	return NULL;
}

static int
sink_start(struct sink *s, unsigned int n, struct sink_arg *args)
{
	struct timeval tv = {0, 100000};
	int one = 1, big = 16 << 20;

	s->n = n;
	s->addr.sin_family = AF_INET;
	s->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (unsigned int i = 0; i < n; i++) {
		socklen_t l = sizeof(s->addr);

		s->fd[i] = socket(AF_INET, SOCK_DGRAM, 0);
		if (s->fd[i] < 0)
			return -errno;
		setsockopt(s->fd[i], SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
		setsockopt(s->fd[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (setsockopt(s->fd[i], SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) != 0)
			setsockopt(s->fd[i], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		if (bind(s->fd[i], (struct sockaddr *)&s->addr, sizeof(s->addr)) != 0)
			return -errno;
		getsockname(s->fd[i], (struct sockaddr *)&s->addr, &l);
		args[i] = (struct sink_arg){.s = s, .fd = s->fd[i]};
		if (pthread_create(&s->th[i], NULL, sink_main, &args[i]) != 0)
			return -ENOMEM;
	}
	return 0;
}

static void
sink_stop(struct sink *s)
{
	atomic_store(&s->stop, true);
	for (unsigned int i = 0; i < s->n; i++) {
		pthread_join(s->th[i], NULL);
		close(s->fd[i]);
	}
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A loopback port followed by k - 1 free ones (UDP), for a rank's k flows. */
static uint16_t
free_ports(unsigned int k)
{
	for (uint16_t base = 40000 + (uint16_t)(getpid() % 8000);; base += 16) {
		bool ok = true;

		for (unsigned int i = 0; ok && i < k; i++) {
			struct sockaddr_in a = {.sin_family = AF_INET,
						.sin_port = htons((uint16_t)(base + i))};
			int u = socket(AF_INET, SOCK_DGRAM, 0), t = socket(AF_INET, SOCK_STREAM, 0);

			a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			ok = bind(u, (struct sockaddr *)&a, sizeof(a)) == 0 &&
			     bind(t, (struct sockaddr *)&a, sizeof(a)) == 0;
			close(u);
			close(t);
		}
		if (ok)
			return base;
	}
}

struct row {
	unsigned int threads;
	enum cais_datatype dt;
	enum cais_wire_dtype wire;
	double gbps, seconds;
	double cpu_ns_b; /* the process's CPU time (agent and sink) per tensor byte */
	unsigned long iters;
};

/* Whether the flows use UDP GSO, as the environment leaves it (window.h AG_GSO_ENV). */
static unsigned int
gso_env_on(void)
{
	const char *v = getenv("CAIS_UDP_GSO");

	return !v || strcmp(v, "0") != 0;
}

/* All-reduces of bytes for about seconds with k flows. @return 0, or the library's error */
static int
measure(const struct sink *s, struct row *row, size_t bytes, double seconds)
{
	size_t count = bytes / cais_datatype_size(row->dt);
	struct sockaddr_in me = {.sin_family = AF_INET};
	struct cais_config cfg;
	struct cais_comm *c;
	void *x = malloc(bytes), *y = malloc(bytes);
	double t0, t, c0;
	int rc;

	if (!x || !y)
		return -ENOMEM;
	memset(x, 0x3c, bytes); /* 1.0-ish in every type, far from saturating */
	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	me.sin_port = htons(free_ports(row->threads));
	cais_config_init(&cfg);
	cfg.world = 1;
	cfg.switch_addr = s->addr;
	cfg.peers = &me;
	cfg.threshold = 0;
	cfg.check_every = 0;
	cfg.threads = row->threads;
	cfg.wire = row->wire;
	rc = cais_comm_create(&cfg, &c);
	if (rc == 0)
		rc = cais_set_path(c, CAIS_PATH_SWITCH);
	for (int w = 0; rc == 0 && w < 2; w++) /* warm-up: page faults, buffers */
		rc = cais_allreduce(c, 1, x, y, count, row->dt, CAIS_OP_SUM);
	c0 = cmn_cpu_s();
	t0 = now_s();
	row->iters = 0;
	for (t = t0; rc == 0 && (t - t0 < seconds || row->iters < 3); t = now_s()) {
		rc = cais_allreduce(c, 1, x, y, count, row->dt, CAIS_OP_SUM);
		row->iters++;
	}
	row->seconds = t - t0;
	row->gbps = (double)bytes * 8 * (double)row->iters / row->seconds / 1e9;
	row->cpu_ns_b = (cmn_cpu_s() - c0) * 1e9 / ((double)bytes * (double)row->iters);
	if (c)
		cais_comm_destroy(c);
	free(x);
	free(y);
	return rc;
}

static void
usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [--threads 1,2] [--bytes B] [--dtype f32,bf16]\n"
		"                   [--wire fixed32,block16] [--seconds T] [--csv FILE] [--gso-ab]\n"
		"                   [--quick]\n"
		"\n"
		"libcais's rate against a loopback sink that answers every DATA with its\n"
		"RESULT (no switch): one rank, all-reduces of B bytes (default 64M; K, M, G)\n"
		"back to back for T seconds (default 3) per row, with K flows each\n"
		"(--threads); Gb/s of tensor, the scaling against K = 1 in the same run, and\n"
		"the process's CPU time (agent and sink: user + system) per tensor byte, which\n"
		"a shared machine disturbs less than the rate.\n"
		"--gso-ab: every row twice, the flows' UDP GSO off (CAIS_UDP_GSO=0), then on;\n"
		"the second line's last columns are on / off of the rate and off / on of the CPU.\n"
		"--quick: 1M, 0.3 s (a smoke run).\n");
}

static size_t
parse_bytes(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;

	if (end == s || (shift && end[1]) || (!shift && *end) || v == 0) {
		fprintf(stderr, PROG ": --bytes '%s': a positive size (K, M, G)\n", s);
		exit(2);
	}
	return (size_t)v << shift;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"threads", required_argument, NULL, 't'}, {"bytes", required_argument, NULL, 'b'},
	    {"dtype", required_argument, NULL, 'd'},   {"wire", required_argument, NULL, 'w'},
	    {"seconds", required_argument, NULL, 's'}, {"csv", required_argument, NULL, 'c'},
	    {"quick", no_argument, NULL, 'q'},	       {"help", no_argument, NULL, 'h'},
	    {"gso-ab", no_argument, NULL, 'g'},	       {NULL, 0, NULL, 0}};
	unsigned int threads[MAX_LIST] = {1, 2}, nt = 2, maxk = 1;
	enum cais_datatype dts[2] = {CAIS_FLOAT32, CAIS_BFLOAT16};
	enum cais_wire_dtype wires[2] = {CAIS_DT_FIXED32, CAIS_DT_BLOCK16};
	unsigned int ndt = 2, nw = 2;
	size_t bytes = 64u << 20;
	double seconds = 3;
	const char *csv = NULL;
	struct sink_arg sa[MAX_SINKS];
	struct sink s = {0};
	FILE *cf = NULL;
	bool ab = false;
	int o, rc = 0;

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 't':
			nt = bench_parse_list(PROG, "--threads", optarg, threads, MAX_LIST);
			break;
		case 'b':
			bytes = parse_bytes(optarg);
			break;
		case 'd':
			ndt = 0;
			if (strstr(optarg, "f32"))
				dts[ndt++] = CAIS_FLOAT32;
			if (strstr(optarg, "bf16"))
				dts[ndt++] = CAIS_BFLOAT16;
			if (ndt == 0) {
				fprintf(stderr, PROG ": --dtype '%s': f32, bf16\n", optarg);
				return 2;
			}
			break;
		case 'w':
			nw = 0;
			if (strstr(optarg, "fixed32"))
				wires[nw++] = CAIS_DT_FIXED32;
			if (strstr(optarg, "block16"))
				wires[nw++] = CAIS_DT_BLOCK16;
			if (nw == 0) {
				fprintf(stderr, PROG ": --wire '%s': fixed32, block16\n", optarg);
				return 2;
			}
			break;
		case 's':
			seconds = atof(optarg);
			if (!(seconds > 0)) {
				fprintf(stderr, PROG ": --seconds '%s': a positive number\n", optarg);
				return 2;
			}
			break;
		case 'c':
			csv = optarg;
			break;
		case 'g':
			ab = true;
			break;
		case 'q':
			bytes = 1u << 20;
			seconds = 0.3;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	for (unsigned int i = 0; i < nt; i++) {
		if (threads[i] > 16 || (threads[i] & (threads[i] - 1))) {
			fprintf(stderr, PROG ": --threads: powers of two up to 16\n");
			return 2;
		}
		maxk = threads[i] > maxk ? threads[i] : maxk;
	}
	if (sink_start(&s, maxk, sa) != 0) {
		fprintf(stderr, PROG ": the sink: %s\n", strerror(errno));
		return 3;
	}
	if (csv && !(cf = fopen(csv, "w"))) {
		fprintf(stderr, PROG ": %s: %s\n", csv, strerror(errno));
		return 3;
	}
	if (cf)
		fprintf(cf,
			"dtype,wire,threads,gso,bytes,iters,seconds,gbps,scale,cpu_ns_per_byte\n");
	printf("# " PROG ": one rank against a loopback sink (%u sink threads), %zu bytes a "
	       "collective, %.1f s a row\n",
	       maxk, bytes, seconds);
	printf("# %-5s %-8s %7s %4s %8s %10s %8s %9s%s\n", "dtype", "wire", "threads", "gso",
	       "iters", "Gb/s", "scale", "cpu ns/B", ab ? "   on/off  cpu off/on" : "");
	for (unsigned int d = 0; d < ndt && rc == 0; d++)
		for (unsigned int w = 0; w < nw && rc == 0; w++) {
			double base[2] = {0, 0}, off = 0, off_cpu = 0;

			for (unsigned int i = 0; i < nt && rc == 0; i++)
				for (unsigned int g = 0; g < (ab ? 2u : 1u) && rc == 0; g++) {
					struct row r = {
					    .threads = threads[i], .dt = dts[d], .wire = wires[w]};

					/* GSO off, then on; without --gso-ab as the caller's
					 * environment has it. Read when a flow opens. */
					unsigned int on = ab ? g : gso_env_on();

					if (ab && !on)
						setenv("CAIS_UDP_GSO", "0", 1);
					else if (ab)
						unsetenv("CAIS_UDP_GSO");
					rc = measure(&s, &r, bytes, seconds);
					if (rc) {
						fprintf(stderr, PROG ": %u threads: %s\n",
							r.threads, cais_strerror(rc));
						break;
					}
					if (r.threads == 1)
						base[on] = r.gbps;
					printf("  %-5s %-8s %7u %4s %8lu %10.2f %8.2f %9.3f",
					       cais_datatype_name(r.dt), cais_dtype_name(r.wire),
					       r.threads, on ? "on" : "off", r.iters, r.gbps,
					       base[on] > 0 ? r.gbps / base[on] : 0, r.cpu_ns_b);
					if (ab && on)
						printf(" %8.2f %11.2f", off > 0 ? r.gbps / off : 0,
						       r.cpu_ns_b > 0 ? off_cpu / r.cpu_ns_b : 0);
					printf("\n");
					off = r.gbps;
					off_cpu = r.cpu_ns_b;
					if (cf)
						fprintf(
						    cf, "%s,%s,%u,%s,%zu,%lu,%.3f,%.3f,%.3f,%.4f\n",
						    cais_datatype_name(r.dt),
						    cais_dtype_name(r.wire), r.threads,
						    on ? "on" : "off", bytes, r.iters, r.seconds,
						    r.gbps, base[on] > 0 ? r.gbps / base[on] : 0,
						    r.cpu_ns_b);
				}
		}
	sink_stop(&s);
	if (cf)
		fclose(cf);
	return rc ? 1 : 0;
}
