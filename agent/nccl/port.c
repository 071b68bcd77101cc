/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Data ports of CollNet communicators. listen() takes one and holds it with
 * a bound UDP socket until connect() hands it to libcais, so that a second
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

int
np_port_take(struct in_addr addr, uint16_t base, struct np_port *p)
{
	int rc = -EADDRINUSE;

	p->port = 0;
	p->fd = -1;
	pthread_mutex_lock(&lock);
	for (unsigned int i = 0; i < (base ? NP_MAX_COLL_COMMS : 20u) && p->fd < 0; i++) {
		uint16_t port = base ? (uint16_t)(base + i) : 0;

		if ((base && (uint32_t)base + i > 65535) || (port && is_taken(port)))
			continue;
		rc = hold(addr, &port);
		if (rc < 0)
			continue;
		if (is_taken(port) || remember(port) != 0) { /* an ephemeral one that is ours */
			close(rc);
			rc = -EADDRINUSE;
			continue;
		}
		p->fd = rc;
		p->port = port;
	}
	pthread_mutex_unlock(&lock);
	return p->fd >= 0 ? 0 : rc;
}

void
np_port_hand_over(struct np_port *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

void
np_port_give_back(struct np_port *p)
{
	np_port_hand_over(p);
	if (!p->port)
		return;
	pthread_mutex_lock(&lock);
	for (unsigned int i = 0; i < NP_MAX_PORTS; i++)
		if (taken[i] == p->port)
			taken[i] = 0;
	pthread_mutex_unlock(&lock);
	p->port = 0;
}
