/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-py-layout: prints the size and every member's offset of the structs of
 * <cais/cais.h> that the Python package (python/cais/_lib.py) mirrors with
 * ctypes, one "struct.member offset" line each, so that test_lib.py can
 * compare them with the ctypes layout: a field added to cais.h without the
 * binding fails the test instead of corrupting memory.
 */
#include <stddef.h>
#include <stdio.h>

#include <cais/cais.h>

#define SZ(s)	   printf("%s.sizeof %zu\n", #s, sizeof(struct s))
#define OFF(s, m)  printf("%s.%s %zu\n", #s, #m, offsetof(struct s, m))

int
main(void)
{
	SZ(cais_config);
	OFF(cais_config, tenant);
	OFF(cais_config, session);
	OFF(cais_config, rank);
	OFF(cais_config, world);
	OFF(cais_config, switch_addr);
	OFF(cais_config, peers);
	OFF(cais_config, slots);
	OFF(cais_config, elems);
	OFF(cais_config, scale);
	OFF(cais_config, wire);
	OFF(cais_config, b16_scale);
	OFF(cais_config, threads);
	OFF(cais_config, threshold);
	OFF(cais_config, retx_timeout_us);
	OFF(cais_config, retries);
	OFF(cais_config, timeout_ms);
	OFF(cais_config, check_every);
	OFF(cais_config, error_alarm);
	OFF(cais_config, round_nearest);
	OFF(cais_config, first_seq);
	OFF(cais_config, stripes);
	OFF(cais_config, nstripes);
	SZ(cais_status);
	OFF(cais_status, error);
	OFF(cais_status, path);
	OFF(cais_status, wire);
	OFF(cais_status, fallback);
	OFF(cais_status, retransmissions);
	OFF(cais_status, peer_chunks);
	OFF(cais_status, time_us);
	OFF(cais_status, rel_error);
	SZ(cais_metrics);
	OFF(cais_metrics, collectives);
	OFF(cais_metrics, in_network);
	OFF(cais_metrics, fallback);
	OFF(cais_metrics, errors);
	OFF(cais_metrics, chunks_sent);
	OFF(cais_metrics, retransmissions);
	OFF(cais_metrics, results_ignored);
	OFF(cais_metrics, acks);
	OFF(cais_metrics, send_errors);
	OFF(cais_metrics, peer_chunks);
	OFF(cais_metrics, peer_chunks_served);
	OFF(cais_metrics, congested);
	OFF(cais_metrics, error_checks);
	OFF(cais_metrics, max_rel_error);
	OFF(cais_metrics, tensors_disabled);
	OFF(cais_metrics, wire_fallbacks);
	OFF(cais_metrics, p50_us);
	OFF(cais_metrics, p90_us);
	OFF(cais_metrics, p99_us);
	OFF(cais_metrics, fallback_rate);
	OFF(cais_metrics, nacks);
	OFF(cais_metrics, queries);
	SZ(cais_join);
	OFF(cais_join, manager);
	OFF(cais_join, key_file);
	OFF(cais_join, job);
	OFF(cais_join, tenant);
	OFF(cais_join, rank);
	OFF(cais_join, world);
	OFF(cais_join, data);
	OFF(cais_join, slots);
	OFF(cais_join, elems);
	OFF(cais_join, priority);
	OFF(cais_join, timeout_ms);
	printf("CAIS_FB_COUNT %d\n", (int)CAIS_FB_COUNT);
	printf("CAIS_DEFAULT_THRESHOLD %u\n", CAIS_DEFAULT_THRESHOLD);
	return 0;
}
