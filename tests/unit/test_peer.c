/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent/peer.c against a listener of the test's own on loopback: a connect
 * whose SYN is dropped starts over with a fresh SYN (ag_connect_wait_us():
 * after 20 ms, then twice as long up to 320 ms, eight times), where Linux
 * would send the SYN again only after 1 s, and again 1 s or more after
 * that. The listener's accept queue is full (backlog 0 and one connection
 * not accepted), so the kernel drops the channel's SYNs; the test frees it
 * at 1 s, and the channel's next fresh SYN (at 1.26 s) gets through. A
 * channel that stopped starting over after three times (with the first
 * three of these waits, or 100, 200 and 400 ms as it did before) would
 * connect on the kernel's own SYN: 1 s after its last fresh one, and each
 * 1 s after that. And the schedule of those waits (t_connect_waits), and
 * the ranks' TCP retransmission floor (AG_RTO_MIN_US, or AG_RTO_MIN_ENV's
 * value) on the channel's outbound and accepted connections.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "../../agent/peer.h"

#define MS 1000000ull /* ns */
#define SYN_FREED_MS 1000u	/* the listener's accept queue has room again then */

static uint64_t
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int
on_message(void *ctx, int peer, const struct ag_msg *h, const uint8_t *payload)
{
	(void)ctx, (void)peer, (void)h, (void)payload;
	return 0;
}

static void
on_ring_sent(void *ctx, uint32_t seq0)
{
	(void)ctx, (void)seq0;
}

/*
 * Rank 0 and rank 1 on loopback: the test plays rank 1 with a listener of
 * the given backlog (and socket flags) on a free port, into addrs[1].
 * @return the listener
 */
static int
peer_listener(struct sockaddr_in addrs[2], int flags, int backlog)
{
	socklen_t l = sizeof(addrs[1]);
	int lfd;

	for (int i = 0; i < 2; i++) {
		memset(&addrs[i], 0, sizeof(addrs[i]));
		addrs[i].sin_family = AF_INET;
		addrs[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
	lfd = socket(AF_INET, SOCK_STREAM | flags, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&addrs[1], sizeof(addrs[1])), 0);
	assert_int_equal(listen(lfd, backlog), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&addrs[1], &l), 0);
	return lfd;
}

/*
 * ag_connect_wait_us(): the first AG_CONNECT_FAST_RESTARTS waits each under
 * Linux's 1 s (the kernel never sends one of those SYNs again), none
 * shorter than the one before; after them, a path whose answer takes
 * longer than that still connects: the waits grow to seconds, and stay
 * bounded.
 */
static void
t_connect_waits(void **state)
{
	uint32_t prev = 0;

	(void)state;
	assert_int_equal(ag_connect_wait_us(0), 20000);
	for (unsigned int r = 0; r < 64; r++) {
		uint32_t w = ag_connect_wait_us(r);

		assert_true(w >= prev);
		if (r < AG_CONNECT_FAST_RESTARTS)
			assert_true(w <= AG_CONNECT_SYN_MAX_US && w < 1000000);
		prev = w;
	}
	assert_true(ag_connect_wait_us(AG_CONNECT_FAST_RESTARTS) > AG_CONNECT_SYN_MAX_US);
	assert_true(prev >= 5000000 && prev <= 20000000);
	assert_int_equal(ag_connect_wait_us(UINT_MAX), prev);
}

static void
t_syn_lost(void **state)
{
	struct sockaddr_in addrs[2];
	struct ag_peer_handler h = {.message = on_message, .ring_sent = on_ring_sent};
	struct ag_peers *p;
	struct ag_msg m, hello;
	int lfd, filler, conn = -1;
	uint64_t t0, t_conn = 0, t_syn = 0;

	(void)state;
	/* the peer: a listener whose accept queue one connection fills */
	lfd = peer_listener(addrs, SOCK_NONBLOCK, 0);
	filler = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(filler, (struct sockaddr *)&addrs[1], sizeof(addrs[1])), 0);

	assert_int_equal(ag_peers_open(&p, 0, 2, addrs, 1024, &h), 0);
	ag_msg_init(&m, 0, AG_FETCH, 0, 7, 1, 0, 0);
	t0 = now_ns();
	ag_peers_progress(p, t0);
	assert_int_equal(ag_peers_send(p, 1, &m, NULL, 0), 0); /* connects: the SYN is dropped */
	while (now_ns() - t0 < 4000 * MS) {
		struct pollfd pfd[8];
		uint64_t now = now_ns(), next = ag_peers_next_timer(p);
		unsigned int n = ag_peers_pollfds(p, pfd, 8);
		int wait_ms = 5;

		if (next != UINT64_MAX && next > now && (next - now) / MS < (uint64_t)wait_ms)
			wait_ms = (int)((next - now) / MS);
		poll(pfd, n, wait_ms);
		ag_peers_polled(p, pfd, n);
		ag_peers_progress(p, now_ns());
		if (filler >= 0 && now_ns() - t0 >= SYN_FREED_MS * MS) {
			int a = accept(lfd, NULL, NULL); /* the queue has room again */

			assert_true(a >= 0);
			close(a);
			close(filler);
			filler = -1;
		}
		if (filler < 0 && (conn = accept(lfd, NULL, NULL)) >= 0) {
			t_conn = now_ns() - t0;
			break;
		}
	}
	assert_true(conn >= 0);
	/* the first fresh SYN after the queue has room */
	for (unsigned int r = 0; t_syn <= SYN_FREED_MS * MS; r++)
		t_syn += (uint64_t)ag_connect_wait_us(r) * 1000;
	print_message("connected after %.0f ms (a fresh SYN at %.0f ms)\n", (double)t_conn / MS,
		      (double)t_syn / MS);
	assert_true(t_syn < 1500 * MS);
	/* on that SYN, not on one of the kernel's: those come 1 s after a
	 * connect's last fresh SYN (1.14 s after three of these waits, 1.7 s
	 * after 100, 200 and 400 ms) */
	assert_true(t_conn >= t_syn - 20 * MS && t_conn < t_syn + 400 * MS);
	/* and the stream starts with HELLO, as any */
	for (int i = 0; i < 100; i++) {
		struct pollfd pfd[8];
		unsigned int n = ag_peers_pollfds(p, pfd, 8);

		poll(pfd, n, 5);
		ag_peers_polled(p, pfd, n);
		ag_peers_progress(p, now_ns());
	}
	assert_int_equal(recv(conn, &hello, sizeof(hello), MSG_DONTWAIT), (ssize_t)sizeof(hello));
	assert_int_equal(ntohl(hello.magic), AG_MSG_MAGIC);
	assert_int_equal(hello.type, AG_HELLO);
	close(conn);
	ag_peers_close(p);
	close(lfd);
}

#ifndef TCP_RTO_MIN_US
#define TCP_RTO_MIN_US 45
#endif

/* One pass of the channel's loop, waiting at most ms. */
static void
spin(struct ag_peers *p, int ms)
{
	struct pollfd pfd[8];
	unsigned int n = ag_peers_pollfds(p, pfd, 8);

	poll(pfd, n, ms);
	ag_peers_polled(p, pfd, n);
	ag_peers_progress(p, now_ns());
}

/* The TCP_RTO_MIN_US of every connection the channel polls, into us[]. @return how many */
static unsigned int
conn_rto_min(struct ag_peers *p, int *us, unsigned int max)
{
	struct pollfd pfd[8];
	unsigned int n = ag_peers_pollfds(p, pfd, 8), got = 0;

	for (unsigned int i = 0; i < n && got < max; i++) {
		int listening = 0, v = -1;
		socklen_t l = sizeof(listening);

		assert_int_equal(getsockopt(pfd[i].fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l),
				 0);
		if (listening)
			continue;
		l = sizeof(v);
		assert_int_equal(getsockopt(pfd[i].fd, IPPROTO_TCP, TCP_RTO_MIN_US, &v, &l), 0);
		us[got++] = v;
	}
	return got;
}

/*
 * With env (NULL: unset) as AG_RTO_MIN_ENV: rank 0's channel connects out
 * to the test's listener, and the test connects in to it; both of the
 * channel's connections must have a floor of want us (the kernel rounds it
 * up to a whole jiffy: at most 10 ms more).
 */
static void
check_rto_min(const char *env, int want)
{
	struct sockaddr_in addrs[2], mine;
	socklen_t l;
	struct ag_peer_handler h = {.message = on_message, .ring_sent = on_ring_sent};
	struct ag_peers *p;
	struct ag_msg m;
	int lfd, in, out = -1, us[4];
	unsigned int n = 0;

	lfd = peer_listener(addrs, 0, 4);
	if (env)
		setenv(AG_RTO_MIN_ENV, env, 1);
	else
		unsetenv(AG_RTO_MIN_ENV);
	assert_int_equal(ag_peers_open(&p, 0, 2, addrs, 1024, &h), 0);
	unsetenv(AG_RTO_MIN_ENV);
	/* the channel's listener: its port, for the inbound connection */
	{
		struct pollfd pfd[8];
		unsigned int k = ag_peers_pollfds(p, pfd, 8);

		assert_true(k >= 1);
		l = sizeof(mine);
		assert_int_equal(getsockname(pfd[0].fd, (struct sockaddr *)&mine, &l), 0);
	}
	ag_msg_init(&m, 0, AG_FETCH, 0, 7, 1, 0, 0);
	ag_peers_progress(p, now_ns());
	assert_int_equal(ag_peers_send(p, 1, &m, NULL, 0), 0);
	in = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(in, (struct sockaddr *)&mine, sizeof(mine)), 0);
	for (int i = 0; i < 200 && (out < 0 || n < 2); i++) {
		spin(p, 5);
		if (out < 0)
			out = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		n = conn_rto_min(p, us, 4);
	}
	assert_true(out >= 0);
	assert_int_equal(n, 2); /* the outbound and the accepted connection */
	for (unsigned int i = 0; i < n; i++) {
		print_message("%s=%s: connection %u: TCP_RTO_MIN_US %d\n", AG_RTO_MIN_ENV,
			      env ? env : "(unset)", i, us[i]);
		assert_true(us[i] >= want && us[i] <= want + 10000);
	}
	close(in);
	close(out);
	ag_peers_close(p);
	close(lfd);
}

/* The kernel's default floor: net.ipv4.tcp_rto_min_us where it has one, else 200 ms. */
static int
kernel_rto_min_us(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_rto_min_us", "r");
	int us = 200000;

	if (f) {
		assert_int_equal(fscanf(f, "%d", &us), 1);
		fclose(f);
	}
	return us;
}

static void
t_rto_min(void **state)
{
	const char *bad[] = {"", "abc", "5ms", "-1", "1000001", "99999999999999999999"};
	int probe = socket(AF_INET, SOCK_STREAM, 0), v = 5000;

	(void)state;
	/* what the channel and the NCCL plugin read: a value that is not one
	 * is said (stderr) and the default taken */
	assert_int_equal(ag_tcp_rto_min_conf(), AG_RTO_MIN_US);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv(AG_RTO_MIN_ENV, bad[i], 1);
		assert_int_equal(ag_tcp_rto_min_conf(), AG_RTO_MIN_US);
	}
	setenv(AG_RTO_MIN_ENV, "1000000", 1);
	assert_int_equal(ag_tcp_rto_min_conf(), 1000000);
	setenv(AG_RTO_MIN_ENV, "0", 1);
	assert_int_equal(ag_tcp_rto_min_conf(), 0);
	unsetenv(AG_RTO_MIN_ENV);
	if (setsockopt(probe, IPPROTO_TCP, TCP_RTO_MIN_US, &v, sizeof(v)) != 0) {
		/* said, not skipped silently: the floor needs Linux 6.15 */
		print_message("this kernel has no TCP_RTO_MIN_US (%s): only the parsing checked\n",
			      strerror(errno));
		close(probe);
		return;
	}
	close(probe);
	check_rto_min(NULL, AG_RTO_MIN_US);
	check_rto_min("abc", AG_RTO_MIN_US);
	check_rto_min("20000", 20000);
	check_rto_min("0", kernel_rto_min_us()); /* the kernel's own */
	/* the NCCL plugin's sockets (agent/nccl/net.c) through ag_tcp_tune() too */
	for (int i = 0; i < 2; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0), got = -1,
		    want = i ? 20000 : kernel_rto_min_us();
		socklen_t gl = sizeof(got);

		ag_tcp_tune(fd, i ? 20000 : 0);
		assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_RTO_MIN_US, &got, &gl), 0);
		assert_true(got >= want && got <= want + 10000);
		close(fd);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_connect_waits),
	    cmocka_unit_test(t_syn_lost),
	    cmocka_unit_test(t_rto_min),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
