/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent/peer.c against a listener of the test's own on loopback: a connect
 * whose SYN is dropped starts over after AG_CONNECT_SYN_US (then twice
 * that), where Linux would send the SYN again only after 1 s. The
 * listener's accept queue is full (backlog 0 and one connection not
 * accepted), so the kernel drops the channel's SYNs; the test frees it at
 * 150 ms, and the channel's fresh SYN at 100 + 200 ms gets through.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "../../agent/peer.h"

#define MS 1000000ull /* ns */

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

static void
t_syn_lost(void **state)
{
	struct sockaddr_in addrs[2] = {0};
	socklen_t l = sizeof(addrs[1]);
	struct ag_peer_handler h = {.message = on_message, .ring_sent = on_ring_sent};
	struct ag_peers *p;
	struct ag_msg m, hello;
	int lfd, filler, conn = -1;
	uint64_t t0, t_conn = 0;

	(void)state;
	for (int i = 0; i < 2; i++) {
		addrs[i].sin_family = AF_INET;
		addrs[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
	/* the peer: a listener whose accept queue one connection fills */
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&addrs[1], sizeof(addrs[1])), 0);
	assert_int_equal(listen(lfd, 0), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&addrs[1], &l), 0);
	filler = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(filler, (struct sockaddr *)&addrs[1], sizeof(addrs[1])), 0);

	assert_int_equal(ag_peers_open(&p, 0, 2, addrs, 1024, &h), 0);
	ag_msg_init(&m, 0, AG_FETCH, 0, 7, 1, 0, 0);
	t0 = now_ns();
	ag_peers_progress(p, t0);
	assert_int_equal(ag_peers_send(p, 1, &m, NULL, 0), 0); /* connects: the SYN is dropped */
	while (now_ns() - t0 < 3000 * MS) {
		struct pollfd pfd[8];
		uint64_t now = now_ns(), next = ag_peers_next_timer(p);
		unsigned int n = ag_peers_pollfds(p, pfd, 8);
		int wait_ms = 5;

		if (next != UINT64_MAX && next > now && (next - now) / MS < (uint64_t)wait_ms)
			wait_ms = (int)((next - now) / MS);
		poll(pfd, n, wait_ms);
		ag_peers_polled(p, pfd, n);
		ag_peers_progress(p, now_ns());
		if (filler >= 0 && now_ns() - t0 >= 150 * MS) {
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
	print_message("connected after %.0f ms\n", (double)t_conn / MS);
	/* a fresh SYN at 300 ms (100 + 200), not Linux's own at 1 s */
	assert_true(t_conn >= 250 * MS && t_conn < 800 * MS);
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_syn_lost),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
