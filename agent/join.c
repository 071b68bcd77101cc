/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Joining through cais-manager (docs/PROTOCOL.md E3), tensor registration,
 * and the once-per-step exchange: report the last step's statistics, take
 * this step's offload list and scales.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <math.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/ioctl.h>

#include "clock.h"
#include "cmn_addr.h"
#include "comm.h"
#include "ctl_client.h"
#include "managed.h"

#define AG_CALL_MS		5000
/* once per step, on the training's critical path: a manager that is not there
 * costs little (the step's tensors take the ring) */
#define AG_STEP_MS		500
/* a manager that did not answer is asked again after 1, 2, 4, ... steps, at
 * most this many (cais_step_begin()) */
#define AG_STEP_SKIP_MAX	64u
#define AG_JOIN_POLL_US		100000
#define AG_MAX_TENSORS_REPORTED 1024

/* The MAC of the interface that holds addr. */
static int
mac_of(const struct in_addr *addr, char out[18])
{
	struct ifaddrs *ifs, *i;
	int rc = -EADDRNOTAVAIL;

	if (getifaddrs(&ifs) != 0)
		return -errno;
	for (i = ifs; i; i = i->ifa_next) {
		struct ifreq ifr;
		int fd;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr != addr->s_addr)
			continue;
		memset(&ifr, 0, sizeof(ifr));
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", i->ifa_name);
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) {
			const uint8_t *m = (const uint8_t *)ifr.ifr_hwaddr.sa_data;

			snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3],
				 m[4], m[5]);
			rc = 0;
		}
		if (fd >= 0)
			close(fd);
		break;
	}
	freeifaddrs(ifs);
	return rc;
}

/* A request to the manager; a refusal is printed, and said in *err. */
static int
call_err(const struct ag_managed *m, const char *cmd, json_t *args, json_t **res, int ms,
	 struct ctl_err *err)
{
	int rc = ctl_call(&m->mgr, &m->key, cmd, args, ms, res, err);

	json_decref(args);
	if (rc)
		fprintf(stderr, "libcais: manager %s: %s: %s\n", cmd, ctl_errname(err->code),
			err->msg);
	return rc;
}

static int
call_ms(const struct ag_managed *m, const char *cmd, json_t *args, json_t **res, int ms)
{
	struct ctl_err err;

	return call_err(m, cmd, args, res, ms, &err);
}

static int
call(const struct ag_managed *m, const char *cmd, json_t *args, json_t **res)
{
	return call_ms(m, cmd, args, res, AG_CALL_MS);
}

static int
str_to_addr(const char *s, struct sockaddr_in *a)
{
	return s && cmn_parse_addr(s, CAIS_UDP_PORT, a) == 0 ? 0 : -EPROTO;
}

/*
 * The ready job.status reply into a configuration. The switch this rank
 * sends to (docs/PROTOCOL.md E10): its member's "switch" (a tree's leaf),
 * else "stripes" (stripes[], AG_MAX_FLOWS entries), else "switch".
 */
static int
config_from_status(const json_t *st, struct cais_config *cfg, struct sockaddr_in *stripes,
		   struct sockaddr_in **peers_out, bool *offload)
{
	const json_t *members = json_object_get(st, "members"), *m;
	const json_t *sl = json_object_get(st, "stripes");
	struct sockaddr_in *peers;
	size_t i;

	if (!json_is_integer(json_object_get(st, "tenant")) ||
	    !json_is_integer(json_object_get(st, "session")) || !json_is_array(members) ||
	    json_array_size(members) != cfg->world ||
	    str_to_addr(json_string_value(json_object_get(st, "switch")), &cfg->switch_addr) != 0)
		return -EPROTO;
	cfg->tenant = (uint16_t)json_integer_value(json_object_get(st, "tenant"));
	cfg->session = (uint16_t)json_integer_value(json_object_get(st, "session"));
	cfg->stripes = NULL;
	cfg->nstripes = 0;
	if (sl && (!json_is_array(sl) || json_array_size(sl) > AG_MAX_FLOWS))
		return -EPROTO;
	for (i = 0; i < json_array_size(sl); i++)
		if (str_to_addr(json_string_value(json_array_get(sl, i)), &stripes[i]))
			return -EPROTO;
	if (json_array_size(sl) > 1) {
		cfg->stripes = stripes;
		cfg->nstripes = (unsigned int)json_array_size(sl);
	}
	if (json_is_integer(json_object_get(st, "slots")))
		cfg->slots = (uint32_t)json_integer_value(json_object_get(st, "slots"));
	if (json_is_integer(json_object_get(st, "elems_per_packet")))
		cfg->elems = (uint16_t)json_integer_value(json_object_get(st, "elems_per_packet"));
	if (json_is_integer(json_object_get(st, "first_seq")))
		cfg->first_seq = (uint32_t)json_integer_value(json_object_get(st, "first_seq"));
	*offload = json_is_true(json_object_get(st, "offload"));
	peers = calloc(cfg->world, sizeof(*peers));
	if (!peers)
		return -ENOMEM;
	json_array_foreach (members, i, m) {
		json_int_t rank = json_integer_value(json_object_get(m, "rank"));
		const char *ip = json_string_value(json_object_get(m, "ip"));
		json_int_t port = json_integer_value(json_object_get(m, "port"));

		if (rank < 0 || (unsigned int)rank >= cfg->world || !ip || port <= 0 ||
		    port > 65535 || inet_pton(AF_INET, ip, &peers[rank].sin_addr) != 1) {
			free(peers);
			return -EPROTO;
		}
		peers[rank].sin_family = AF_INET;
		peers[rank].sin_port = htons((uint16_t)port);
		if ((unsigned int)rank == cfg->rank && json_object_get(m, "switch") &&
		    str_to_addr(json_string_value(json_object_get(m, "switch")),
				&cfg->switch_addr)) {
			free(peers);
			return -EPROTO;
		}
	}
	*peers_out = peers;
	return 0;
}

int
cais_comm_join(const struct cais_join *j, const struct cais_config *tmpl, struct cais_comm **out)
{
	struct ag_managed *m;
	struct cais_config cfg;
	struct sockaddr_in *peers = NULL, stripes[AG_MAX_FLOWS];
	char mac[18], ip[INET_ADDRSTRLEN];
	json_t *res = NULL, *args;
	uint64_t deadline;
	bool offload = false;
	unsigned int flows;
	int rc;

	if (!j || !out || !j->manager || !j->job || !j->tenant || !j->world ||
	    j->world > CAIS_MAX_WORLD || j->rank >= j->world || strlen(j->job) == 0 ||
	    strlen(j->job) > 64 || strlen(j->tenant) == 0 || strlen(j->tenant) > 64 ||
	    j->data.sin_family != AF_INET || j->data.sin_port == 0)
		return -EINVAL;
	m = ag_managed_new();
	if (!m)
		return -ENOMEM;
	if (cmn_parse_addr(j->manager, CAIS_MGR_PORT, &m->mgr) != 0 ||
	    (j->key_file && ctl_key_load(j->key_file, &m->key) != 0)) {
		ag_managed_free(m);
		return -EINVAL;
	}
	snprintf(m->job, sizeof(m->job), "%s", j->job);
	m->rank = j->rank;
	rc = mac_of(&j->data.sin_addr, mac);
	if (rc) {
		ag_managed_free(m);
		return rc;
	}
	inet_ntop(AF_INET, &j->data.sin_addr, ip, sizeof(ip));
	args = json_pack("{s:s, s:s, s:i}", "job", j->job, "tenant", j->tenant, "world",
			 (int)j->world);
	if (j->slots)
		json_object_set_new(args, "slots", json_integer(j->slots));
	if (j->elems)
		json_object_set_new(args, "elems_per_packet", json_integer(j->elems));
	if (j->priority)
		json_object_set_new(args, "priority", json_integer(j->priority));
	rc = call(m, "job.register", args, &res);
	/* the flows (docs/PROTOCOL.md E7), registered with the manager: ports p..p+flows-1 */
	if (tmpl && tmpl->threads) {
		flows = tmpl->threads;
	} else {
		json_int_t slots = json_integer_value(json_object_get(res, "slots"));

		flows = ag_comm_auto_flows(
		    slots > 0 ? (uint32_t)slots : j->slots ? j->slots : 64,
		    (unsigned int)json_integer_value(json_object_get(res, "lcores")));
	}
	json_decref(res);
	res = NULL;
	if (rc == 0)
		rc =
		    call(m, "job.join",
			 json_pack("{s:s, s:i, s:s, s:s, s:i, s:i}", "job", j->job, "rank",
				   (int)j->rank, "mac", mac, "ip", ip, "port",
				   (int)ntohs(j->data.sin_port), "ports", (int)flows),
			 &res);
	deadline = ag_now_ns() + (uint64_t)(j->timeout_ms ? j->timeout_ms : 60000) * 1000000ull;
	while (rc == 0) {
		const char *state = json_string_value(json_object_get(res, "state"));

		if (state && strcmp(state, "ready") == 0)
			break;
		if (!state || strcmp(state, "waiting") != 0) {
			rc = -EPROTO;
			break;
		}
		if (ag_now_ns() > deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		usleep(AG_JOIN_POLL_US);
		json_decref(res);
		res = NULL;
		rc = call(m, "job.status", json_pack("{s:s}", "job", j->job), &res);
	}
	if (rc) {
		json_decref(res);
		ag_managed_free(m);
		return rc < 0 ? rc : -EPROTO;
	}
	if (tmpl)
		cfg = *tmpl;
	else
		cais_config_init(&cfg);
	cfg.rank = j->rank;
	cfg.world = j->world;
	rc = config_from_status(res, &cfg, stripes, &peers, &offload);
	json_decref(res);
	if (rc) {
		ag_managed_free(m);
		return rc;
	}
	cfg.peers = peers;
	cfg.threads = flows;
	/* this rank's address as given: the manager's copy is the same */
	peers[j->rank] = j->data;
	rc = cais_comm_create(&cfg, out);
	free(peers);
	if (rc) {
		ag_managed_free(m);
		return rc;
	}
	(*out)->managed = m;
	if (!offload)
		cais_set_path(*out, CAIS_PATH_RING); /* admission refused: the ring only */
	return 0;
}

int
cais_tensor_register(struct cais_comm *c, uint32_t tensor, enum cais_redop op,
		     enum cais_datatype dtype)
{
	json_t *res = NULL;
	int rc;

	if (!c || !c->managed || (unsigned int)op > CAIS_OP_MIN || cais_datatype_size(dtype) == 0)
		return -EINVAL;
	rc = call(c->managed, "tensor.register",
		  json_pack("{s:s, s:I, s:s, s:s}", "job", c->managed->job, "tensor",
			    (json_int_t)tensor, "op", cais_redop_name(op), "dtype",
			    cais_datatype_name(dtype)),
		  &res);
	json_decref(res);
	return rc;
}

/* The statistics of the step that ends, for the manager. */
static json_t *
report(struct cais_comm *c, struct ag_managed *m)
{
	struct cais_metrics now;
	json_t *tensors = json_array();
	uint64_t fb = 0;

	cais_metrics_get(c, &now);
	for (unsigned int i = 1; i < CAIS_FB_COUNT; i++)
		fb += now.fallback[i] - m->last.fallback[i];
	pthread_mutex_lock(&m->lock);
	for (unsigned int i = 0; i < m->n_maxabs; i++)
		json_array_append_new(tensors, json_pack("{s:I, s:f}", "tensor",
							 (json_int_t)m->maxabs[i].tensor, "max_abs",
							 (double)m->maxabs[i].value));
	m->n_maxabs = 0;
	pthread_mutex_unlock(&m->lock);
	m->last = now;
	return json_pack("{s:s, s:i, s:I, s:o, s:I, s:I, s:I, s:I}", "job", m->job, "rank",
			 (int)m->rank, "step", (json_int_t)c->step, "tensors", tensors,
			 "collectives", (json_int_t)(now.collectives - m->reported.collectives),
			 "fallbacks", (json_int_t)fb, "errors",
			 (json_int_t)(now.errors - m->reported.errors), "congested",
			 (json_int_t)(now.congested - m->reported.congested));
}

/* stats.report: a step's report by itself, for managers before E13. */
static void
report_apart(const struct ag_managed *m, json_t *r)
{
	json_t *res = NULL;

	call_ms(m, "stats.report", r, &res, AG_STEP_MS);
	json_decref(res);
}

int
cais_step_begin(struct cais_comm *c, uint64_t step)
{
	struct ag_managed *m;
	json_t *res = NULL, *r = NULL, *args, *offload = NULL, *scales = NULL, *v;
	struct ctl_err err;
	size_t i;
	bool ask;
	int rc;

	if (!c || !(m = c->managed))
		return -EINVAL;
	/*
	 * The manager did not answer lately (m->skip): this step does not ask,
	 * and goes as a step without an answer, so that a manager that is down
	 * costs AG_STEP_MS once per up to AG_STEP_SKIP_MAX steps, not every
	 * step. The report waits for the next request, which covers these
	 * steps: the max |x| table keeps each tensor's largest, the counts run
	 * on.
	 */
	ask = !m->skip || step >= m->ask_at;
	if (ask && m->started && step > c->step) {
		r = report(c, m);
		m->reported = m->last;
	}
	m->started = true;
	ag_comm_step(c, step);
	if (!ask) {
		ag_comm_offload_none(c);
		return -EAGAIN;
	}
	args = json_pack("{s:s, s:i, s:I}", "job", m->job, "rank", (int)m->rank, "step",
			 (json_int_t)step);
	/* the report of the step that ends rides in step.begin (E13): one round
	 * trip a step. A lost report only costs a scale update */
	if (r && m->report_apart)
		report_apart(m, json_incref(r));
	else if (r)
		json_object_set(args, "report", r);
	rc = call_err(m, "step.begin", json_incref(args), &res, AG_STEP_MS, &err);
	if (rc == -EINVAL && json_object_get(args, "report")) {
		if (strstr(err.msg, "unknown field 'report'")) {
			/* a manager before E13: the report apart, from now on */
			m->report_apart = true;
			report_apart(m, json_incref(r));
		}
		/* else a report it refused (said on stderr): the answer without it */
		if (m->report_apart || strncmp(err.msg, "report:", 7) == 0) {
			json_object_del(args, "report");
			rc = call_ms(m, "step.begin", json_incref(args), &res, AG_STEP_MS);
		}
	}
	json_decref(r);
	json_decref(args);
	if (rc == -ETIMEDOUT) {
		m->skip = m->skip ? 2 * m->skip : 1;
		if (m->skip > AG_STEP_SKIP_MAX)
			m->skip = AG_STEP_SKIP_MAX;
		m->ask_at = step + m->skip + 1;
	} else {
		m->skip = 0; /* an answer, a refusal included */
	}
	if (rc == 0 && (!json_is_array(offload = json_object_get(res, "offload")) ||
			!json_is_array(scales = json_object_get(res, "scales"))))
		rc = -EPROTO;
	if (rc) {
		/* No answer: the other ranks may have this step's scales, and
		 * this rank's in-network sums would mix its old ones with
		 * theirs. Its tensors go on the ring until a step's answer; its
		 * ring's join request takes the others' collective there too
		 * (req.c on_ring_req()): every element right. */
		ag_comm_offload_none(c);
		json_decref(res);
		return rc;
	}
	json_array_foreach (scales, i, v) {
		json_int_t t = json_integer_value(json_object_get(v, "tensor"));
		double s = json_number_value(json_object_get(v, "scale"));
		int wire = cais_dtype_parse(json_string_value(json_object_get(v, "wire")));
		bool on = false;
		size_t k;
		json_t *o;

		json_array_foreach (offload, k, o)
			on |= json_integer_value(o) == t;
		if (t < 0 || t > UINT32_MAX || !(s > 0) || !isfinite(s))
			continue;
		/* the wire first: the scale is the one for it */
		if (wire >= 0)
			cais_tensor_wire(c, (uint32_t)t, (enum cais_wire_dtype)wire);
		cais_tensor_set(c, (uint32_t)t, s, on);
	}
	json_decref(res);
	return 0;
}
