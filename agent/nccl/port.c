/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Data ports of CollNet communicators. listen() takes a block of them, one
 * per libcais flow (CAIS_THREADS), and holds each with a bound UDP socket
 * until connect() hands them to libcais, so that a second
 * communicator (PyTorch subgroups, ncclCommSplit), in this process or in
 * another on the host, takes another. The hold socket does not set
 * SO_REUSEADDR: its bind fails while any socket has the port, and while it
 * is there libcais's own bind (which sets SO_REUSEADDR) cannot share it.
 * The process's list closes the short gap between the hand-over and
 * libcais's bind for the other threads of this process (NCCL runs a proxy
 * thread per communicator); another process could still slip in there, and
 * the communicator would then fail on every rank (agree.c).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "plugin.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint16_t taken[NP_MAX_PORTS]; /* 0: a free entry */

static bool
is_taken(uint16_t port)
{
	for (unsigned int i = 0; i < NP_MAX_PORTS; i++)
		if (taken[i] == port)
			return true;
	return false;
}

static int
remember(uint16_t port)
{
	for (unsigned int i = 0; i < NP_MAX_PORTS; i++)
		if (taken[i] == 0) {
			taken[i] = port;
			return 0;
		}
	return -ENOSPC;
}

/* Bind a hold socket on addr:port (0: any); the TCP port must be free as well
 * (libcais's ring listens there). @return the socket or -errno */
static int
hold(struct in_addr addr, uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = addr, .sin_port = htons(*port)};
	socklen_t alen = sizeof(a);
	int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), t = -1, one = 1, err = 0;

	if (u < 0)
		return -errno;
	if (bind(u, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(u, (struct sockaddr *)&a, &alen) != 0)
		err = -errno;
	if (!err) {
		t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (t < 0)
			err = -errno;
	}
	if (!err) {
		/* as libcais binds it: fails only where a socket listens (an earlier
		 * ring's connections in TIME_WAIT do not count) */
		setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(t, (struct sockaddr *)&a, sizeof(a)) != 0)
			err = -errno;
	}
	if (t >= 0)
		close(t);
	if (err) {
		close(u);
		return err;
	}
	*port = ntohs(a.sin_port);
	return u;
}

/* Drop ports[0..n) from the process's list. Caller holds the lock. */
static void
forget(uint16_t first, unsigned int n)
{
	for (unsigned int i = 0; i < NP_MAX_PORTS; i++)
		if (taken[i] && (unsigned int)(taken[i] - first) < n)
			taken[i] = 0;
}

/* Close the hold sockets of p. */
static void
release_holds(struct np_port *p)
{
	for (unsigned int i = 0; i < NP_MAX_THREADS; i++) {
		if (p->fd[i] >= 0)
			close(p->fd[i]);
		p->fd[i] = -1;
	}
}

/*
 * Hold the n ports from first (0: an ephemeral first port, then the n - 1
 * after it) and put them in the process's list. Caller holds the lock.
 * @return 0 or -errno; on failure nothing is held
 */
static int
take_block(struct in_addr addr, uint16_t first, unsigned int n, struct np_port *p)
{
	int rc = 0;

	for (unsigned int i = 0; i < n && rc == 0; i++) {
		uint16_t port = first ? (uint16_t)(first + i) : 0;

		if ((first && (uint32_t)first + i > 65535) || (port && is_taken(port))) {
			rc = -EADDRINUSE;
			break;
		}
		rc = hold(addr, &port);
		if (rc < 0)
			break;
		p->fd[i] = rc;
		rc = 0;
		if (i == 0)
			first = port;
		if (is_taken(port)) /* an ephemeral one that is ours */
			rc = -EADDRINUSE;
	}
	for (unsigned int i = 0; i < n && rc == 0; i++)
		if (remember((uint16_t)(first + i)) != 0) {
			forget(first, i);
			rc = -ENOSPC;
		}
	if (rc) {
		release_holds(p);
		return rc;
	}
	p->port = first;
	p->n = n;
	return 0;
}

void
np_port_init(struct np_port *p)
{
	p->port = 0;
	p->n = 0;
	for (unsigned int i = 0; i < NP_MAX_THREADS; i++)
		p->fd[i] = -1;
}

int
np_port_take(struct in_addr addr, uint16_t base, unsigned int n, struct np_port *p)
{
	int rc = -EADDRINUSE;

	np_port_init(p);
	if (n == 0 || n > NP_MAX_THREADS)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	for (unsigned int k = 0; k < (base ? NP_MAX_COLL_COMMS : 20u) && !p->port; k++)
		rc = take_block(addr, base ? (uint16_t)(base + k * n) : 0, n, p);
	pthread_mutex_unlock(&lock);
	return p->port ? 0 : rc;
}

void
np_port_hand_over(struct np_port *p)
{
	release_holds(p);
}

void
np_port_give_back(struct np_port *p)
{
	release_holds(p);
	if (!p->port)
		return;
	pthread_mutex_lock(&lock);
	forget(p->port, p->n);
	pthread_mutex_unlock(&lock);
	p->port = 0;
	p->n = 0;
}
