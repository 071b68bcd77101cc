/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdbool.h>
#include <stdlib.h>

#include "ctl_stats.h"
#include "ctl_table.h"

/* Rules off the printout: 72 dashes, what scripts cut the switch's log at. */
#define RULE "------------------------------------------------------------------------"

static json_int_t
geti(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static double
getd(const json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

static const char *
gets_or(const json_t *o, const char *k, const char *absent)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : absent;
}

/* "  ---------- TITLE: uptime, mode, lease ----------" */
static void
print_title(FILE *f, const json_t *o, const char *title)
{
	fprintf(f, "  ---------- %s: uptime %.1f s, mode %s", title, getd(o, "uptime_s"),
		gets_or(o, "mode", "?"));
	if (json_object_get(o, "lease_left_ms"))
		fprintf(f, ", lease %" JSON_INTEGER_FORMAT " ms left", geti(o, "lease_left_ms"));
	else
		fprintf(f, ", no lease (static)");
	fprintf(f, " ----------\n");
}

static int
print_ports(FILE *f, const json_t *ports)
{
	static const char *const cols[] = {"port",	"name",	      "RX-packets", "RX-bytes",
					   "RX-missed", "TX-packets", "TX-bytes",   "TX-dropped"};
	static const char *const keys[] = {"port",	"name",	      "rx_packets", "rx_bytes",
					   "rx_missed", "tx_packets", "tx_bytes",   "tx_dropped"};
	const size_t ncol = sizeof(cols) / sizeof(cols[0]);
	struct ctl_table t;
	const json_t *p;
	size_t i;

	ctl_table_init(&t, ncol);
	t.left[1] = true;
	for (size_t k = 0; k < ncol; k++)
		ctl_table_add(&t, "%s", cols[k]);
	json_array_foreach (ports, i, p)
		for (size_t k = 0; k < ncol; k++) {
			char *s = ctl_json_text(json_object_get(p, keys[k]));

			ctl_table_add(&t, "%s", s ? s : "?");
			free(s);
		}
	return ctl_table_print(&t, f, "  ");
}

/*
 * "LEADcompletion p50 .. p90 .. p99 .. max .. us (N rounds)" when there
 * were rounds. @return whether it printed
 */
static bool
print_percentiles(FILE *f, const char *lead, const json_t *lat)
{
	if (!lat || geti(lat, "samples") == 0)
		return false;
	fprintf(f,
		"%scompletion p50 %.1f p90 %.1f p99 %.1f max %.1f us (%" JSON_INTEGER_FORMAT
		" rounds)",
		lead, getd(lat, "p50"), getd(lat, "p90"), getd(lat, "p99"), getd(lat, "max"),
		geti(lat, "samples"));
	return true;
}

/* The switch-wide counters: CAIS, L2, slots and thresholds. */
static void
print_totals(FILE *f, const json_t *o)
{
	const json_t *th = json_object_get(o, "thresholds");

	fprintf(f,
		"  CAIS: DATA %" JSON_INTEGER_FORMAT ", rounds %" JSON_INTEGER_FORMAT
		", retransmissions %" JSON_INTEGER_FORMAT ", resends %" JSON_INTEGER_FORMAT
		", duplicates %" JSON_INTEGER_FORMAT ", stale %" JSON_INTEGER_FORMAT,
		geti(o, "data_rx"), geti(o, "rounds"), geti(o, "retransmissions"),
		geti(o, "resends"), geti(o, "duplicates"), geti(o, "stale"));
	if (json_object_get(o, "acks"))
		fprintf(f, ", ACKs %" JSON_INTEGER_FORMAT, geti(o, "acks"));
	if (json_object_get(o, "nacks"))
		fprintf(f, ", NACKs %" JSON_INTEGER_FORMAT, geti(o, "nacks"));
	if (json_object_get(o, "queries"))
		fprintf(f, ", QUERYs %" JSON_INTEGER_FORMAT, geti(o, "queries"));
	print_percentiles(f, ", ", json_object_get(o, "completion_us"));
	fprintf(f,
		"\n  L2: forwarded %" JSON_INTEGER_FORMAT ", flooded %" JSON_INTEGER_FORMAT
		", ARP replies %" JSON_INTEGER_FORMAT ", MACs %" JSON_INTEGER_FORMAT
		", handoffs %" JSON_INTEGER_FORMAT "\n",
		geti(o, "l2_forwarded"), geti(o, "l2_flooded"), geti(o, "arp_replies"),
		geti(o, "macs"), geti(o, "handoffs"));
	fprintf(f,
		"  slots %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT
		" (%.2f%%), queue depth %" JSON_INTEGER_FORMAT,
		geti(o, "slots_used"), geti(o, "slot_capacity"), 100.0 * getd(o, "slot_usage"),
		geti(o, "queue_depth"));
	if (json_object_get(o, "slot_mem"))
		fprintf(f, ", slot memory %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT " MiB",
			geti(o, "slot_mem_used") >> 20, geti(o, "slot_mem") >> 20);
	if (json_object_get(o, "mbufs"))
		fprintf(f, ", mbufs free %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT,
			geti(o, "mbufs_free"), geti(o, "mbufs"));
	if (geti(o, "keep_refused"))
		fprintf(f, " (DATA not kept: %" JSON_INTEGER_FORMAT ")", geti(o, "keep_refused"));
	if (th)
		fprintf(f, "; thresholds: queue depth %" JSON_INTEGER_FORMAT ", slot usage %.3g",
			geti(th, "queue_depth"), getd(th, "slot_usage"));
	fputc('\n', f);
}

/*
 * "TITLE name n, name n" for the non-zero counters of o; with none, the
 * line says "none", or is left out when none_line is NULL.
 */
static void
print_nonzero(FILE *f, const char *title, const json_t *o, const char *none_line)
{
	const char *k;
	json_t *v;
	int n = 0;

	json_object_foreach ((json_t *)o, k, v) {
		if (!json_is_integer(v) || json_integer_value(v) == 0)
			continue;
		fprintf(f, "%s %s %" JSON_INTEGER_FORMAT, n++ ? "," : title, k,
			json_integer_value(v));
	}
	if (n)
		fputc('\n', f);
	else if (none_line)
		fprintf(f, "%s %s\n", title, none_line);
}

static void
print_tensors(FILE *f, const json_t *tensors)
{
	const json_t *t;
	size_t j;

	if (json_array_size(tensors) == 0)
		return;
	fprintf(f, "    tensors:");
	json_array_foreach (tensors, j, t)
		fprintf(f, "%s %" JSON_INTEGER_FORMAT " (%s, scale %g)", j ? "," : "",
			geti(t, "tensor"), gets_or(t, "op", "?"), getd(t, "scale"));
	fputc('\n', f);
}

/* A session's line, then its completion times, tensors and REJECTs. */
static void
print_session(FILE *f, const json_t *s)
{
	static const char *const rare[] = {"inconsistent", "slot_mismatch", "abandoned",
					   "spoofed"};
	const json_t *tensors = json_object_get(s, "tensors");

	fprintf(f,
		"  session %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT
		" (n %" JSON_INTEGER_FORMAT ", slots %" JSON_INTEGER_FORMAT
		", elems %" JSON_INTEGER_FORMAT ", priority %" JSON_INTEGER_FORMAT
		", tensors %zu): DATA %" JSON_INTEGER_FORMAT ", rounds %" JSON_INTEGER_FORMAT
		", retx %" JSON_INTEGER_FORMAT ", resends %" JSON_INTEGER_FORMAT
		", dup %" JSON_INTEGER_FORMAT ", stale %" JSON_INTEGER_FORMAT
		", overflow %" JSON_INTEGER_FORMAT,
		geti(s, "tenant"), geti(s, "session"), geti(s, "n"), geti(s, "slots"),
		geti(s, "elems_per_packet"), geti(s, "priority"), json_array_size(tensors),
		geti(s, "data_rx"), geti(s, "rounds"), geti(s, "retx"), geti(s, "resends"),
		geti(s, "duplicates"), geti(s, "stale"), geti(s, "overflow"));
	for (size_t k = 0; k < sizeof(rare) / sizeof(rare[0]); k++)
		if (geti(s, rare[k]))
			fprintf(f, ", %s %" JSON_INTEGER_FORMAT, rare[k], geti(s, rare[k]));
	fputc('\n', f);
	if (print_percentiles(f, "    ", json_object_get(s, "completion_us")))
		fputc('\n', f);
	print_tensors(f, tensors);
	print_nonzero(f, "    REJECTs:", json_object_get(s, "rejects"), NULL);
}

int
ctl_stats_print(FILE *f, const json_t *stats, const char *title)
{
	const json_t *sessions = json_object_get(stats, "sessions"), *s;
	size_t i;
	int rc;

	print_title(f, stats, title);
	rc = print_ports(f, json_object_get(stats, "ports"));
	print_totals(f, stats);
	print_nonzero(f, "  REJECTs sent:", json_object_get(stats, "rejects"), "none");
	print_nonzero(f, "  drops:", json_object_get(stats, "drops"), "none");
	if (json_is_integer(sessions)) /* a count only (cais-manager's fabric view) */
		fprintf(f,
			"  sessions: %" JSON_INTEGER_FORMAT " (listed by the switch's stats.get)\n",
			json_integer_value(sessions));
	else
		fprintf(f, "  sessions: %zu\n", json_array_size(sessions));
	json_array_foreach (sessions, i, s)
		print_session(f, s);
	fprintf(f, "  " RULE "\n");
	return rc;
}
