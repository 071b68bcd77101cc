/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fabric cais-manager drives (docs/PROTOCOL.md E10): its switches from
 * the command line or a --fabric file, and a job's sessions over them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <cais/proto.h>

#include "cmn_addr.h"
#include "ctl_fields.h"
#include "mgr_args.h"
#include "mgr_fabric.h"

const char *
mgr_fabric_mode_name(enum mgr_fabric_mode mode)
{
	return mode == MGR_FABRIC_TREE ? "tree" : mode == MGR_FABRIC_STRIPES ? "stripes" : "one";
}

void
mgr_fabric_one(struct mgr_fabric *f, const struct mgr_conf *conf)
{
	memset(f, 0, sizeof(*f));
	f->mode = MGR_FABRIC_ONE;
	f->n = 1;
	snprintf(f->sw[0].name, sizeof(f->sw[0].name), "switch");
	f->sw[0].ctl = conf->switch_ctl;
	f->sw[0].agg = conf->agg;
	snprintf(f->sw[0].key_file, sizeof(f->sw[0].key_file), "%s", conf->switch_key_file);
}

static bool
name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > MGR_SW_NAME)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' || *s == '-'))
			return false;
	return true;
}

/* "A.B.C.D" or "A.B.C.D/LEN" (LEN 0..32; host bits must be zero). */
static int
parse_prefix(const char *s, uint32_t *net, uint32_t *mask)
{
	char ip[INET_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t len = slash ? (size_t)(slash - s) : strlen(s);
	unsigned int bits = 32;
	struct in_addr a;

	if (len >= sizeof(ip))
		return -EINVAL;
	memcpy(ip, s, len);
	ip[len] = '\0';
	if (inet_pton(AF_INET, ip, &a) != 1)
		return -EINVAL;
	if (slash) {
		char *end;
		unsigned long b = strtoul(slash + 1, &end, 10);

		if (!slash[1] || *end || b > 32)
			return -EINVAL;
		bits = (unsigned int)b;
	}
	*mask = bits ? ~0u << (32 - bits) : 0;
	*net = ntohl(a.s_addr);
	return (*net & ~*mask) ? -EINVAL : 0;
}

/* Switch i's entry: every field checked, err naming switches[i].field. */
static int
parse_switch(const json_t *e, unsigned int i, bool tree, struct mgr_fabric_switch *s,
	     struct ctl_err *err)
{
	static const char *const fields[] = {"name", "ctl",   "agg",	     "mac",
					     "key",  "hosts", "uplink_port", NULL};
	const json_t *hosts = json_object_get(e, "hosts");
	const char *name, *ctl, *agg, *mac = NULL, *key = NULL;
	uint64_t up = 0;
	char inner[sizeof(err->msg)];
	int rc;

	if (!json_is_object(e))
		return ctl_fail(err, EINVAL, "field 'switches[%u]' must be an object", i);
	if ((rc = ctl_check_fields(e, fields, err)) ||
	    (rc = ctl_get_string(e, "name", &name, err)) ||
	    (rc = ctl_get_string(e, "ctl", &ctl, err)) ||
	    (rc = ctl_get_string(e, "agg", &agg, err)) ||
	    (json_object_get(e, "mac") && (rc = ctl_get_string(e, "mac", &mac, err))) ||
	    (json_object_get(e, "key") && (rc = ctl_get_string(e, "key", &key, err))) ||
	    (rc = ctl_get_uint(e, "uplink_port", 0, UINT16_MAX, false, &up, err)))
		goto named;
	if (!name_ok(name))
		return ctl_fail(err, EINVAL,
				"field 'switches[%u].name' must be 1..%u characters of "
				"[A-Za-z0-9_.-]",
				i, MGR_SW_NAME);
	snprintf(s->name, sizeof(s->name), "%s", name);
	if (cmn_parse_addr(ctl, CAIS_CTL_PORT, &s->ctl))
		return ctl_fail(err, EINVAL, "field 'switches[%u].ctl' is not A.B.C.D[:PORT]", i);
	if (cmn_parse_addr(agg, CAIS_UDP_PORT, &s->agg) || !ctl_host_ip(s->agg.sin_addr.s_addr))
		return ctl_fail(err, EINVAL,
				"field 'switches[%u].agg' is not a host's A.B.C.D[:PORT]", i);
	if (mac && mgr_parse_mac(mac, s->mac))
		return ctl_fail(err, EINVAL, "field 'switches[%u].mac' is not a unicast MAC", i);
	if (tree && !mac)
		return ctl_fail(err, EINVAL,
				"field 'switches[%u].mac' is required in a tree (the spine's "
				"members and the leaves' uplink name it)",
				i);
	if (key && (!key[0] || strlen(key) >= sizeof(s->key_file)))
		return ctl_fail(err, EINVAL, "field 'switches[%u].key' must be a file name", i);
	snprintf(s->key_file, sizeof(s->key_file), "%s", key ? key : "");
	s->uplink_port = (uint16_t)up;
	if (hosts && (!json_is_array(hosts) || json_array_size(hosts) == 0 ||
		      json_array_size(hosts) > MGR_MAX_NETS))
		return ctl_fail(err, EINVAL,
				"field 'switches[%u].hosts' must be an array of 1..%u "
				"addresses or prefixes",
				i, MGR_MAX_NETS);
	for (size_t h = 0; h < json_array_size(hosts); h++) {
		const char *p = json_string_value(json_array_get(hosts, h));

		if (!p || parse_prefix(p, &s->net[h], &s->mask[h]))
			return ctl_fail(err, EINVAL,
					"field 'switches[%u].hosts[%zu]' is not A.B.C.D or "
					"A.B.C.D/LEN (host bits zero)",
					i, h);
	}
	s->nnets = (unsigned int)json_array_size(hosts);
	return 0;
named:
	snprintf(inner, sizeof(inner), "%s", err->msg);
	return ctl_fail(err, EINVAL, "switches[%u]: %.200s", i, inner);
}

int
mgr_fabric_parse(const json_t *doc, struct mgr_fabric *f, struct ctl_err *err)
{
	static const char *const fields[] = {"mode", "spine", "switches", NULL};
	const json_t *sws = json_object_get(doc, "switches");
	const char *mode, *spine = NULL;
	bool tree;
	int rc;

	memset(f, 0, sizeof(*f));
	if (!json_is_object(doc))
		return ctl_fail(err, EINVAL, "the fabric must be a JSON object");
	if ((rc = ctl_check_fields(doc, fields, err)) ||
	    (rc = ctl_get_string(doc, "mode", &mode, err)) ||
	    (json_object_get(doc, "spine") && (rc = ctl_get_string(doc, "spine", &spine, err))))
		return rc;
	if (strcmp(mode, "tree") == 0)
		f->mode = MGR_FABRIC_TREE;
	else if (strcmp(mode, "stripes") == 0)
		f->mode = MGR_FABRIC_STRIPES;
	else
		return ctl_fail(err, EINVAL, "field 'mode' must be tree or stripes");
	tree = f->mode == MGR_FABRIC_TREE;
	if (!json_is_array(sws) || json_array_size(sws) == 0 ||
	    json_array_size(sws) > MGR_MAX_SWITCHES)
		return ctl_fail(err, EINVAL, "field 'switches' must be an array of 1..%u switches",
				MGR_MAX_SWITCHES);
	f->n = (unsigned int)json_array_size(sws);
	for (unsigned int i = 0; i < f->n; i++) {
		struct mgr_fabric_switch *s = &f->sw[i];

		if ((rc = parse_switch(json_array_get(sws, i), i, tree, s, err)))
			return rc;
		for (unsigned int k = 0; k < i; k++) {
			if (strcmp(f->sw[k].name, s->name) == 0)
				return ctl_fail(err, EINVAL,
						"field 'switches[%u].name': '%s' is switches[%u]'s",
						i, s->name, k);
			if (f->sw[k].agg.sin_addr.s_addr == s->agg.sin_addr.s_addr &&
			    f->sw[k].agg.sin_port == s->agg.sin_port)
				return ctl_fail(err, EINVAL,
						"field 'switches[%u].agg' is switches[%u]'s", i, k);
			for (unsigned int a = 0; a < s->nnets; a++)
				for (unsigned int b = 0; b < f->sw[k].nnets; b++) {
					uint32_t m = s->mask[a] & f->sw[k].mask[b];

					if ((s->net[a] & m) == (f->sw[k].net[b] & m))
						return ctl_fail(err, EINVAL,
								"field 'switches[%u].hosts[%u]' "
								"overlaps switches[%u]'s hosts",
								i, a, k);
				}
		}
	}
	if (!tree) {
		if (spine)
			return ctl_fail(err, EINVAL, "field 'spine': stripes have none");
		if (f->n & (f->n - 1))
			return ctl_fail(err, EINVAL,
					"field 'switches': %u stripes; a power of two (E8)", f->n);
		for (unsigned int i = 0; i < f->n; i++)
			if (f->sw[i].nnets)
				return ctl_fail(err, EINVAL,
						"field 'switches[%u].hosts': stripes hold every "
						"host",
						i);
		return 0;
	}
	if (!spine)
		return ctl_fail(err, EINVAL, "field 'spine' is required in a tree");
	for (f->spine = 0; f->spine < f->n && strcmp(f->sw[f->spine].name, spine); f->spine++)
		;
	if (f->spine == f->n)
		return ctl_fail(err, EINVAL, "field 'spine': no switch is named '%.32s'", spine);
	if (f->n < 2)
		return ctl_fail(err, EINVAL,
				"field 'switches': a tree needs a leaf beside the spine");
	for (unsigned int i = 0; i < f->n; i++) {
		if (i == f->spine && f->sw[i].nnets)
			return ctl_fail(err, EINVAL,
					"field 'switches[%u].hosts': the spine holds no hosts", i);
		if (i != f->spine && !f->sw[i].nnets)
			return ctl_fail(err, EINVAL,
					"field 'switches[%u].hosts' is required (a leaf's hosts)",
					i);
	}
	return 0;
}

int
mgr_fabric_load(const char *path, struct mgr_fabric *f, struct ctl_err *err)
{
	json_error_t jerr;
	json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	int rc;

	if (!doc) {
		FILE *fp = fopen(path, "r");

		if (!fp)
			return ctl_fail(err, errno ? errno : ENOENT, "--fabric %s: %s", path,
					strerror(errno));
		fclose(fp);
		return ctl_fail(err, EINVAL, "--fabric %s: line %d: %.160s", path, jerr.line,
				jerr.text);
	}
	rc = mgr_fabric_parse(doc, f, err);
	json_decref(doc);
	if (rc) {
		char inner[sizeof(err->msg)];

		snprintf(inner, sizeof(inner), "%s", err->msg);
		return ctl_fail(err, EINVAL, "--fabric %.200s: %.200s", path, inner);
	}
	return 0;
}

/* The leaf whose hosts hold ip, or -1. */
static int
leaf_of(const struct mgr_fabric *f, const char *ip)
{
	struct in_addr a;

	if (inet_pton(AF_INET, ip, &a) != 1)
		return -1;
	for (unsigned int i = 0; i < f->n; i++)
		for (unsigned int k = 0; k < f->sw[i].nnets; k++)
			if ((ntohl(a.s_addr) & f->sw[i].mask[k]) == f->sw[i].net[k])
				return (int)i;
	return -1;
}

static int
plan_tree(const struct mgr_fabric *f, const struct mgr_job *j, const struct mgr_member *mb,
	  unsigned int n, struct mgr_plan *p, char *reason, size_t cap)
{
	unsigned int lo[MGR_MAX_SWITCHES], hi[MGR_MAX_SWITCHES], cnt[MGR_MAX_SWITCHES] = {0};
	unsigned int leaves = 0;

	for (unsigned int i = 0; i < n; i++) {
		int l = leaf_of(f, mb[i].ip);
		unsigned int r = mb[i].rank;

		if (l < 0) {
			snprintf(reason, cap, "rank %u (%s) is under no leaf of the fabric", r,
				 mb[i].ip);
			return -EINVAL;
		}
		if (!cnt[l]++)
			lo[l] = hi[l] = r;
		lo[l] = r < lo[l] ? r : lo[l];
		hi[l] = r > hi[l] ? r : hi[l];
		p->sw_of_rank[r] = (uint8_t)l;
	}
	for (unsigned int l = 0; l < f->n; l++) {
		if (!cnt[l])
			continue;
		if (hi[l] - lo[l] + 1 != cnt[l]) {
			snprintf(reason, cap,
				 "the ranks under leaf %s (%u of them, %u..%u) are not consecutive",
				 f->sw[l].name, cnt[l], lo[l], hi[l]);
			return -EINVAL;
		}
		p->part[p->n++] = (struct mgr_part){.sw = (uint8_t)l,
						    .role = MGR_ROLE_LEAF,
						    .first = (uint16_t)lo[l],
						    .count = (uint16_t)cnt[l],
						    .up_rank = (uint8_t)leaves++};
	}
	if (leaves == 1) { /* every rank under one leaf: no level above it */
		p->part[0] = (struct mgr_part){.sw = p->part[0].sw, .role = MGR_ROLE_FLAT};
		return 0;
	}
	if (j->elems > CAIS_UPLINK_MAX_ELEMS) {
		snprintf(reason, cap,
			 "elems_per_packet %u: a session over several leaves carries at most %u "
			 "(E9)",
			 j->elems, CAIS_UPLINK_MAX_ELEMS);
		return -EINVAL;
	}
	p->part[p->n++] = (struct mgr_part){.sw = (uint8_t)f->spine, .role = MGR_ROLE_SPINE};
	return 0;
}

int
mgr_fabric_plan(const struct mgr_fabric *f, const struct mgr_job *j, const struct mgr_member *mb,
		unsigned int n, struct mgr_plan *p, char *reason, size_t cap)
{
	memset(p, 0, sizeof(*p));
	if (f->mode == MGR_FABRIC_TREE)
		return plan_tree(f, j, mb, n, p, reason, cap);
	for (unsigned int k = 0; k < f->n; k++)
		p->part[p->n++] = (struct mgr_part){
		    .sw = (uint8_t)k,
		    .role = f->mode == MGR_FABRIC_STRIPES ? MGR_ROLE_STRIPE : MGR_ROLE_FLAT};
	for (unsigned int i = 0; f->mode == MGR_FABRIC_STRIPES && i < n; i++)
		if (mb[i].ports < f->n) {
			snprintf(reason, cap,
				 "rank %u has %u flows; a session striped over %u switch "
				 "servers needs that many (E8)",
				 mb[i].rank, mb[i].ports, f->n);
			return -EINVAL;
		}
	return 0;
}

static json_t *
member_json(const struct mgr_member *m)
{
	return json_pack("{s:i, s:s, s:s, s:i, s:i}", "rank", m->rank, "mac", m->mac, "ip", m->ip,
			 "port", m->port, "ports", m->ports);
}

json_t *
mgr_plan_session(const struct mgr_fabric *f, const struct mgr_plan *p, unsigned int k,
		 const struct mgr_job *j, const struct mgr_member *mb, unsigned int n)
{
	const struct mgr_part *pt = &p->part[k];
	json_t *members = json_array(), *args;
	unsigned int count = j->world;
	char ip[INET_ADDRSTRLEN];

	if (pt->role == MGR_ROLE_SPINE) {
		count = 0;
		for (unsigned int i = 0; i < p->n; i++) {
			const struct mgr_fabric_switch *l = &f->sw[p->part[i].sw];

			if (p->part[i].role != MGR_ROLE_LEAF)
				continue;
			inet_ntop(AF_INET, &l->agg.sin_addr, ip, sizeof(ip));
			json_array_append_new(members,
					      json_pack("{s:i, s:s, s:s, s:i}", "rank",
							p->part[i].up_rank, "mac", l->mac, "ip", ip,
							"port", ntohs(l->agg.sin_port)));
			count++;
		}
	} else {
		for (unsigned int i = 0; i < n; i++)
			if (pt->role != MGR_ROLE_LEAF ||
			    (mb[i].rank >= pt->first && mb[i].rank < pt->first + pt->count))
				json_array_append_new(members, member_json(&mb[i]));
		if (pt->role == MGR_ROLE_LEAF)
			count = pt->count;
	}
	/* its members are libcais agents: WAIT and NACK (E11) */
	args = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:o}", "tenant", j->tenant, "session",
			 j->session, "n", count, "slots", (int)j->slots, "elems_per_packet",
			 j->elems, "priority", j->priority, "loss_hints", 1, "members", members);
	if (args && pt->role == MGR_ROLE_LEAF) {
		const struct mgr_fabric_switch *s = &f->sw[f->spine];

		inet_ntop(AF_INET, &s->agg.sin_addr, ip, sizeof(ip));
		json_object_set_new(args, "first_rank", json_integer(pt->first));
		json_object_set_new(args, "uplink",
				    json_pack("{s:s, s:s, s:i, s:i, s:i}", "ip", ip, "mac", s->mac,
					      "rank", pt->up_rank, "switch_port",
					      f->sw[pt->sw].uplink_port, "port",
					      ntohs(s->agg.sin_port)));
	}
	return args;
}
