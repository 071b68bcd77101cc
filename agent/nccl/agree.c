/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agreement of a CollNet connect: every rank ends connect() with the
 * same outcome. NCCL checks only within a node that CollNet came up, so a
 * rank whose connect fails while its peers' succeed leaves NCCL with a
 * CollNet half set up: a hang, or errors on some ranks and a hang on others.
 *
 * Every rank opens a TCP listener in listen() and puts its port in the
 * handle; NCCL hands every rank all the handles. At the end of connect(),
 * each rank reports its outcome to collnet rank 0, which waits for every
 * report (bounded), and answers every rank with one verdict: success when
 * every rank succeeded, else the first failed rank and its error (a rank
 * that did not report in time counts as failed with -ETIMEDOUT). Rank 0's
 * listener exists before any rank has the handles, so a refused connection
 * means rank 0 has decided without this rank: it fails too.
 *
 * What remains: rank 0 dying after sending some verdicts and not others;
 * then NCCL itself fails on the communicator.
 */
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "plugin.h"

/** Reports rank 0 reads at once: every other rank's, at most 254. */
#define NP_AGREE_BACKLOG 256

int
np_agree_open(struct np_agree *a, struct in_addr addr)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_addr = addr};
	socklen_t slen = sizeof(s);
	int err = 0;

	a->port = 0;
	a->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->fd < 0)
		return -errno;
	if (bind(a->fd, (struct sockaddr *)&s, sizeof(s)) != 0 ||
	    listen(a->fd, NP_AGREE_BACKLOG) != 0 ||
	    getsockname(a->fd, (struct sockaddr *)&s, &slen) != 0) {
		err = -errno;
		close(a->fd);
		a->fd = -1;
		return err;
	}
	a->port = s.sin_port;
	return 0;
}

void
np_agree_close(struct np_agree *a)
{
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
}

static void
msg_make(struct np_agree_msg *m, uint64_t job, uint32_t rank, int rc)
{
	memset(m, 0, sizeof(*m));
	m->magic = htonl(NP_AGREE_MAGIC);
	m->rank = htonl(rank);
	m->rc = (int32_t)htonl((uint32_t)rc);
	m->job = htobe64(job);
}

/* Move len bytes on a non-blocking socket by the deadline. @return 0 or -errno */
static int
io_by(int fd, void *p, size_t len, bool out, uint64_t deadline)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = out ? send(fd, (char *)p + got, len - got, MSG_NOSIGNAL)
				: recv(fd, (char *)p + got, len - got, 0);
		struct pollfd pfd = {.fd = fd, .events = out ? POLLOUT : POLLIN};
		uint64_t now = np_now_ms();

		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return n == 0 ? -ECONNRESET : -errno;
		if (now >= deadline)
			return -ETIMEDOUT;
		poll(&pfd, 1, (int)(deadline - now < 100 ? deadline - now : 100));
	}
	return 0;
}

/* Rank 0: collect the reports, answer every rank. */
static int
root(struct np_agree *a, uint64_t job, unsigned int nranks, int local, uint32_t wait_ms,
     unsigned int *who)
{
	struct pend {
		int fd;
		size_t got;
		struct np_agree_msg m;
	} *pend = calloc(nranks, sizeof(*pend));
	int *rcs = malloc(nranks * sizeof(*rcs)), *fds = malloc(nranks * sizeof(*fds));
	struct pollfd *pfd = calloc(nranks + 1, sizeof(*pfd));
	uint64_t deadline = np_now_ms() + wait_ms;
	unsigned int reported = 1;
	int verdict = 0;

	if (!pend || !rcs || !fds || !pfd) {
		free(pend);
		free(rcs);
		free(fds);
		free(pfd);
		return -ENOMEM; /* the others then time out: the same outcome */
	}
	for (unsigned int i = 0; i < nranks; i++) {
		rcs[i] = INT_MIN; /* not reported */
		fds[i] = -1;
		pend[i].fd = -1;
	}
	rcs[0] = local;
	while (reported < nranks && np_now_ms() < deadline) {
		unsigned int np = 0;
		int fd;

		pfd[np++] = (struct pollfd){.fd = a->fd, .events = POLLIN};
		for (unsigned int i = 0; i < nranks; i++)
			if (pend[i].fd >= 0)
				pfd[np++] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
		poll(pfd, np, 100);
		for (unsigned int i = 0; i < nranks; i++) {
			if (pend[i].fd >= 0)
				continue;
			fd = accept4(a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd < 0)
				break;
			pend[i].fd = fd;
			pend[i].got = 0;
		}
		for (unsigned int i = 0; i < nranks; i++) {
			struct pend *p = &pend[i];
			ssize_t n;
			uint32_t r;

			if (p->fd < 0)
				continue;
			n = recv(p->fd, (char *)&p->m + p->got, sizeof(p->m) - p->got, 0);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (n > 0 && (p->got += (size_t)n) < sizeof(p->m))
				continue;
			r = ntohl(p->m.rank);
			if (n > 0 && ntohl(p->m.magic) == NP_AGREE_MAGIC &&
			    be64toh(p->m.job) == job && r > 0 && r < nranks && rcs[r] == INT_MIN) {
				rcs[r] = (int)ntohl((uint32_t)p->m.rc);
				fds[r] = p->fd;
				reported++;
			} else {
				/* a stray connection, a duplicate or a lost peer */
				close(p->fd);
			}
			p->fd = -1;
		}
	}
	*who = UINT32_MAX;
	for (unsigned int r = 0; r < nranks && !verdict; r++)
		if (rcs[r] != 0) {
			verdict = rcs[r] == INT_MIN ? -ETIMEDOUT : rcs[r];
			*who = r;
		}
	for (unsigned int r = 1; r < nranks; r++) {
		struct np_agree_msg m;

		if (fds[r] < 0)
			continue;
		msg_make(&m, job, *who, verdict);
		/* 24 bytes into an idle connection's empty buffer: at once */
		io_by(fds[r], &m, sizeof(m), true, np_now_ms() + 1000);
		close(fds[r]);
	}
	for (unsigned int i = 0; i < nranks; i++)
		if (pend[i].fd >= 0)
			close(pend[i].fd);
	free(pend);
	free(rcs);
	free(fds);
	free(pfd);
	return verdict;
}

/* Every other rank: report to rank 0, wait for the verdict. */
static int
member(const struct sockaddr_in *to, uint64_t job, unsigned int rank, int local, uint32_t wait_ms,
       unsigned int *who)
{
	struct np_agree_msg m;
	uint64_t deadline = np_now_ms() + wait_ms;
	struct pollfd pfd;
	int fd, err = 0, one = 1;
	socklen_t elen = sizeof(err);

	*who = UINT32_MAX; /* no verdict yet */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) != 0 && errno != EINPROGRESS) {
		err = -errno;
	} else {
		pfd = (struct pollfd){.fd = fd, .events = POLLOUT};
		while (poll(&pfd, 1, 100) == 0 && np_now_ms() < deadline)
			;
		if (!(pfd.revents & (POLLOUT | POLLERR | POLLHUP)))
			err = -ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
			err = -errno;
		else
			err = -err;
	}
	if (!err) {
		msg_make(&m, job, rank, local);
		err = io_by(fd, &m, sizeof(m), true, deadline);
	}
	if (!err)
		err = io_by(fd, &m, sizeof(m), false, deadline);
	close(fd);
	/* refused or reset: rank 0 decided without this rank (or is gone) */
	if (err)
		return err == -ECONNREFUSED || err == -ECONNRESET ? -ECANCELED : err;
	if (ntohl(m.magic) != NP_AGREE_MAGIC || be64toh(m.job) != job)
		return -EPROTO;
	*who = ntohl(m.rank);
	return (int)ntohl((uint32_t)m.rc);
}

int
np_agree(struct np_agree *a, const struct sockaddr_in *rank0, uint64_t job, unsigned int rank,
	 unsigned int nranks, int local, uint32_t wait_ms, unsigned int *who)
{
	if (nranks == 1) {
		*who = local ? 0 : UINT32_MAX;
		return local;
	}
	/* rank 0 waits wait_ms for the slowest report; the others wait for rank 0
	 * to be that late and then to wait that long */
	return rank == 0 ? root(a, job, nranks, local, wait_ms, who)
			 : member(rank0, job, rank, local, 2 * wait_ms, who);
}
