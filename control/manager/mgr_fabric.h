/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The switch servers cais-manager drives and how a job's session is laid
 * over them (docs/PROTOCOL.md E10): one switch (--switch-ctl, --agg), or a
 * --fabric file naming several, as a tree (leaves that hold the hosts'
 * ranks under one spine, E9) or as stripes (every server holds the whole
 * session and carries 1/m of its seqs, E8).
 *
 * mgr_fabric_plan() is a pure function of the fabric and the job's members:
 * which switch gets which session.add. The manager computes it again
 * whenever it needs it (install, reinstall, delete, job.status), so nothing
 * of it is stored.
 */
#ifndef MGR_FABRIC_H
#define MGR_FABRIC_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <netinet/in.h>

#include <jansson.h>

#include "ctl_err.h"
#include "mgr.h"
#include "mgr_store.h"

/** Switch servers of a fabric: a stripe per agent flow at most (AG_MAX_FLOWS). */
#define MGR_MAX_SWITCHES 16u
/** A switch's name: 1..31 characters of [A-Za-z0-9_.-]. */
#define MGR_SW_NAME	 31u
/** Host prefixes per leaf. */
#define MGR_MAX_NETS	 64u

enum mgr_fabric_mode {
	MGR_FABRIC_ONE,	    /**< one switch: every job's session on it */
	MGR_FABRIC_TREE,    /**< leaves under a spine (E9) */
	MGR_FABRIC_STRIPES, /**< the same session on every switch, seqs striped (E8) */
};

/** One switch server as configured. */
struct mgr_fabric_switch {
	char name[MGR_SW_NAME + 1];
	struct sockaddr_in ctl;	     /**< its control endpoint */
	struct sockaddr_in agg;	     /**< its aggregator address (agents' DATA) */
	char key_file[MGR_PATH_MAX]; /**< its endpoint's key, "" for none */
	char mac[18];		     /**< its aggregator's MAC ("" unless given) */
	uint16_t uplink_port;	     /**< a leaf's switch port toward the spine */
	uint32_t net[MGR_MAX_NETS];  /**< a leaf's hosts: prefixes (host order) */
	uint32_t mask[MGR_MAX_NETS];
	unsigned int nnets;
};

struct mgr_fabric {
	enum mgr_fabric_mode mode;
	unsigned int n; /**< switches */
	struct mgr_fabric_switch sw[MGR_MAX_SWITCHES];
	unsigned int spine; /**< TREE: the spine's index */
};

/** The one switch of --switch-ctl, --switch-key and --agg. */
void mgr_fabric_one(struct mgr_fabric *f, const struct mgr_conf *conf);

/**
 * A --fabric document (docs/PROTOCOL.md E10):
 *   {"mode": "tree" | "stripes",
 *    "spine": NAME,                         (tree)
 *    "switches": [{"name", "ctl", "agg", "mac", "key", "hosts", "uplink_port"}]}
 * Every refusal names the field.
 * @return 0 or -EINVAL
 */
int mgr_fabric_parse(const json_t *doc, struct mgr_fabric *f, struct ctl_err *err);

/** mgr_fabric_parse() of a file. @return 0, -EINVAL, -ENOENT (or another -errno) */
int mgr_fabric_load(const char *path, struct mgr_fabric *f, struct ctl_err *err);

/** @return "one", "tree", "stripes" */
const char *mgr_fabric_mode_name(enum mgr_fabric_mode mode);

/** What a switch holds of a job. */
enum mgr_role {
	MGR_ROLE_FLAT,	 /**< every rank (one switch, or a tree whose ranks share a leaf) */
	MGR_ROLE_LEAF,	 /**< the ranks first..first+count-1, with an uplink */
	MGR_ROLE_SPINE,	 /**< the leaves, as members */
	MGR_ROLE_STRIPE, /**< every rank; the seqs q with q mod m = stripe */
};

struct mgr_part {
	uint8_t sw; /**< index in the fabric */
	enum mgr_role role;
	uint16_t first, count; /**< LEAF: its ranks */
	uint8_t up_rank;       /**< LEAF: its rank in the spine's session */
};

/** The sessions of one job over the fabric. */
struct mgr_plan {
	unsigned int n; /**< parts, each on a switch of its own; the spine last */
	struct mgr_part part[MGR_MAX_SWITCHES];
	uint8_t sw_of_rank[CAIS_MAX_WORLD]; /**< the switch each rank sends to (not STRIPES) */
};

/**
 * Lay the job's session over the fabric. mb: its n (= world) members.
 * @return 0, or -EINVAL with the reason the job cannot be offloaded (a
 *         rank under no leaf, a leaf's ranks not consecutive, elems beyond
 *         what an uplink carries, fewer flows than stripes)
 */
int mgr_fabric_plan(const struct mgr_fabric *f, const struct mgr_job *j,
		    const struct mgr_member *mb, unsigned int n, struct mgr_plan *p, char *reason,
		    size_t cap);

/** The session.add arguments of part k of the plan (a new reference). */
json_t *mgr_plan_session(const struct mgr_fabric *f, const struct mgr_plan *p, unsigned int k,
			 const struct mgr_job *j, const struct mgr_member *mb, unsigned int n);

#endif /* MGR_FABRIC_H */
