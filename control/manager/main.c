/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-manager: mgr_handle() behind a ctl_endpoint on the main thread,
 * mgr_tick() (lease, polling) on a thread of its own so that a slow request
 * never delays a lease renewal. SIGINT/SIGTERM stop both and close the store.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#include "ctl_endpoint.h"
#include "mgr.h"

static atomic_bool stop;

static void
on_signal(int sig)
{
	(void)sig;
	atomic_store(&stop, true);
}

static void *
ticker(void *arg)
{
	struct mgr *m = arg;

	while (!atomic_load(&stop)) {
		int64_t wait = mgr_tick(m, mgr_now_ms());
		struct timespec ts;

		/* short naps: a stop is noticed within 50 ms */
		wait = wait < 1 ? 1 : wait > 50 ? 50 : wait;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)wait * 1000000L;
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	static struct ctl_key key;
	struct ctl_endpoint_conf ec = {0};
	struct ctl_endpoint *ep = NULL;
	struct sigaction sa = {0};
	struct mgr_conf conf;
	struct ctl_err err = {0};
	struct mgr *m = NULL;
	sigset_t all, old;
	pthread_t tid;
	char addr[INET_ADDRSTRLEN];
	int rc;

	mgr_conf_init(&conf);
	rc = mgr_conf_parse(&conf, argc, argv, stdout, &err);
	if (rc == 1)
		return 0;
	if (rc) {
		fprintf(stderr, "cais-manager: %s\n", err.msg);
		return 2;
	}
	mgr_log_set_level(conf.log_level);
	if (conf.key_file[0] && (rc = ctl_key_load(conf.key_file, &key)) != 0) {
		mgr_log(MGR_LOG_ERROR, "--key %s: %s", conf.key_file,
			rc == -EINVAL ? "empty or larger than 4096 bytes" : strerror(-rc));
		return 1;
	}
	if ((rc = mgr_open(&conf, &m, &err)) != 0) {
		mgr_log(MGR_LOG_ERROR, "%s", err.msg);
		return 1;
	}
	ec.addr = conf.listen;
	ec.key = &key;
	ec.handler = mgr_handle;
	ec.handler_ctx = m;
	inet_ntop(AF_INET, &conf.listen.sin_addr, addr, sizeof(addr));
	if ((rc = ctl_endpoint_open(&ec, &ep)) != 0) {
		mgr_log(MGR_LOG_ERROR, "--listen %s:%u: %s", addr, ntohs(conf.listen.sin_port),
			rc == -EPERM ? "not a loopback address: that needs --key" : strerror(-rc));
		mgr_close(m);
		return 1;
	}
	sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns at once */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* the signals go to this thread */
	rc = pthread_create(&tid, NULL, ticker, m);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		mgr_log(MGR_LOG_ERROR, "thread: %s", strerror(rc));
		ctl_endpoint_close(ep);
		mgr_close(m);
		return 1;
	}
	mgr_log(MGR_LOG_INFO, "listening on %s:%u (%s), switch %s, store %s", addr,
		ntohs(conf.listen.sin_port), key.len ? "HMAC" : "loopback, no key",
		conf.switch_key_file[0] ? "with a key" : "without a key", conf.db);
	while (!atomic_load(&stop)) {
		rc = ctl_endpoint_poll(ep, 200);
		if (rc < 0) {
			mgr_log(MGR_LOG_ERROR, "endpoint: %s", strerror(-rc));
			atomic_store(&stop, true);
		}
	}
	pthread_join(tid, NULL);
	ctl_endpoint_close(ep);
	mgr_close(m);
	mgr_log(MGR_LOG_INFO, "stopped");
	return rc < 0 ? 1 : 0;
}
