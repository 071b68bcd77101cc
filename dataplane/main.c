/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-switch: EAL, options, ports, the switch, --config, the control
 * endpoint, the lcores.
 *
 *   cais-switch [EAL options] -- [options]
 *
 * Every port EAL probes is a switch port. Every enabled lcore (the main one
 * included) is a data lcore; the main lcore also prints the counters.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_rcu_qsbr.h>

#include "cmn_addr.h"
#include "ctl_endpoint.h"
#include "dp_ctl.h"
#include "dp_stats.h"
#include "dp_switch.h"
#include "dp_telemetry.h"

RTE_LOG_REGISTER_DEFAULT(cais_switch_logtype, INFO);
#define LOG(level, fmt, ...)                                                                       \
	rte_log(RTE_LOG_##level, cais_switch_logtype, "cais-switch: " fmt "\n", ##__VA_ARGS__)

struct options {
	bool agg_enabled;
	uint32_t agg_ip;
	bool agg_mac_set;
	struct rte_ether_addr agg_mac;
	uint32_t udp_port;
	const char *config;
	struct sockaddr_in ctl; /**< sin_port 0: no endpoint */
	const char *ctl_key;
	uint32_t stats_period;
	uint32_t max_slots;
	uint32_t slot_mem_mib;
	uint32_t mac_age;
	uint32_t mtu;
	uint32_t mbufs;
	uint32_t high_share;
	uint32_t idle_sleep_us;
	uint32_t rx_loss_pct;
};

static struct dp_switch *g_sw;
static volatile sig_atomic_t g_signal;

static void
usage(FILE *f, const char *prog)
{
	fprintf(f,
		"Usage: %s [EAL options] -- [options]\n"
		"\n"
		"CAIS in-network aggregation switch: every port EAL probes (PCI NICs, --vdev\n"
		"devices) is a switch port; CAIS DATA to the aggregator address is summed,\n"
		"everything else is L2-forwarded with MAC learning.\n"
		"\n"
		"Options (after --):\n"
		"  --agg-ip A.B.C.D     the aggregator's IPv4 address (without it: forward only)\n"
		"  --agg-mac MAC        the aggregator's MAC (default: port 0's)\n"
		"  --udp-port N         CAIS data port (default %u)\n"
		"  --config FILE        JSON array of control requests applied at start;\n"
		"                       the first failure stops the start\n"
		"  --ctl ADDR:PORT      control endpoint, JSON over UDP (default 127.0.0.1:%u);\n"
		"                       'none': no endpoint (tables from --config only)\n"
		"  --ctl-key FILE       HMAC-SHA256 key (the file's raw bytes) of the endpoint;\n"
		"                       without one the endpoint must be on loopback\n"
		"  --stats-period S     print counters every S seconds (0: only at exit)\n"
		"  --max-slots N        slot capacity of the switch (default %u)\n"
		"  --slot-mem MIB       memory the sessions' slot arrays may take in all\n"
		"                       (S x 2 x (E x 8 + 64 + n x 8) bytes a session, the\n"
		"                       n x 8 only for n <= 64 without uplink; default %llu)\n"
		"  --mac-age S          MAC table ageing in seconds (default %u)\n"
		"  --mtu N              MTU requested of devices that accept it (default %u)\n"
		"  --mbufs N            packet mbufs (default %u; each holds %u bytes)\n"
		"  --high-share PCT     share of TX buffering reserved for high-priority\n"
		"                       sessions' RESULTs, which also leave first (default %u)\n"
		"  --idle-sleep-us N    an lcore whose queues stay empty sleeps in steps of up\n"
		"                       to N us, leaving the CPU to others (default %u);\n"
		"                       0: busy polling, for dedicated cores\n"
		"  --rx-loss PCT        tests and benchmarks only: drop PCT percent (0..99) of\n"
		"                       the frames received, at random, ARP excepted (loss on\n"
		"                       the way in, where the testbed has no netem and\n"
		"                       nftables does not see the frames)\n"
		"  --help               this text\n"
		"\n"
		"Example (veth testbed, no hugepages):\n"
		"  %s --no-huge -m 512 --no-pci --file-prefix=sw1 -l 0 \\\n"
		"    --vdev=net_af_packet0,iface=sw-p1,blocksz=16384,framesz=16384 \\\n"
		"    --vdev=net_af_packet1,iface=sw-p2,blocksz=16384,framesz=16384 \\\n"
		"    -- --agg-ip 10.0.0.254 --config sessions.json --stats-period 5\n"
		"With several lcores, give af_packet devices qpairs=<number of lcores>.\n",
		prog, CAIS_UDP_PORT, CAIS_CTL_PORT, DP_DEFAULT_SLOT_CAPACITY,
		(unsigned long long)(DP_DEFAULT_SLOT_MEM >> 20), DP_L2_DEFAULT_AGE_S,
		DP_DEFAULT_MTU, DP_MBUFS, DP_MBUF_DATA, DP_DEFAULT_HIGH_SHARE,
		DP_DEFAULT_IDLE_SLEEP_US, prog);
}

/* ---- options ---- */

struct opt;

/* Check an option's argument and store it in o; says why not on stderr. @return 0 or -1 */
typedef int (*opt_parse_fn)(const struct opt *opt, const char *arg, struct options *o);

/* An option after --: its name, its parse helper (NULL: --help), an integer's range and field. */
struct opt {
	const char *name;
	opt_parse_fn parse;
	unsigned long min, max;
	size_t field; /* offsetof the uint32_t in struct options */
};

/* An argument refused: "cais-switch: --NAME: 'ARG' is not WHAT". @return -1 */
static int
refuse(const struct opt *opt, const char *arg, const char *what)
{
	fprintf(stderr, "cais-switch: --%s: '%s' is not %s\n", opt->name, arg, what);
	return -1;
}

static int
parse_u32(const struct opt *opt, const char *arg, struct options *o)
{
	char *end, what[64];
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v < opt->min || v > opt->max) {
		snprintf(what, sizeof(what), "an integer in [%lu, %lu]", opt->min, opt->max);
		return refuse(opt, arg, what);
	}
	*(uint32_t *)((char *)o + opt->field) = (uint32_t)v;
	return 0;
}

static int
parse_agg_ip(const struct opt *opt, const char *arg, struct options *o)
{
	if (inet_pton(AF_INET, arg, &o->agg_ip) != 1)
		return refuse(opt, arg, "an IPv4 address");
	o->agg_enabled = true;
	return 0;
}

static int
parse_agg_mac(const struct opt *opt, const char *arg, struct options *o)
{
	if (rte_ether_unformat_addr(arg, &o->agg_mac) != 0 ||
	    !rte_is_unicast_ether_addr(&o->agg_mac))
		return refuse(opt, arg, "a unicast MAC");
	o->agg_mac_set = true;
	return 0;
}

static int
parse_config(const struct opt *opt, const char *arg, struct options *o)
{
	(void)opt;
	o->config = arg;
	return 0;
}

/* A.B.C.D[:PORT], or "none": no endpoint. */
static int
parse_ctl(const struct opt *opt, const char *arg, struct options *o)
{
	if (strcmp(arg, "none") == 0)
		o->ctl.sin_port = 0;
	else if (cmn_parse_addr(arg, CAIS_CTL_PORT, &o->ctl) != 0)
		return refuse(opt, arg, "A.B.C.D:PORT");
	return 0;
}

static int
parse_ctl_key(const struct opt *opt, const char *arg, struct options *o)
{
	if (access(arg, R_OK) != 0) {
		fprintf(stderr, "cais-switch: --%s: cannot read '%s': %s\n", opt->name, arg,
			strerror(errno));
		return -1;
	}
	o->ctl_key = arg;
	return 0;
}

/* Long options only: getopt_long returns OPT_FIRST + the index in opts[]. */
#define OPT_FIRST 256

static const struct opt opts[] = {
    {"agg-ip", parse_agg_ip, 0, 0, 0},
    {"agg-mac", parse_agg_mac, 0, 0, 0},
    {"udp-port", parse_u32, 1, 65535, offsetof(struct options, udp_port)},
    {"config", parse_config, 0, 0, 0},
    {"ctl", parse_ctl, 0, 0, 0},
    {"ctl-key", parse_ctl_key, 0, 0, 0},
    {"stats-period", parse_u32, 0, 86400, offsetof(struct options, stats_period)},
    {"max-slots", parse_u32, 1, 1u << 24, offsetof(struct options, max_slots)},
    {"slot-mem", parse_u32, 1, 1u << 20, offsetof(struct options, slot_mem_mib)},
    {"mac-age", parse_u32, 1, 86400, offsetof(struct options, mac_age)},
    {"mtu", parse_u32, 68, 9600, offsetof(struct options, mtu)},
    {"mbufs", parse_u32, 1024, 1u << 22, offsetof(struct options, mbufs)},
    {"high-share", parse_u32, 1, DP_MAX_HIGH_SHARE, offsetof(struct options, high_share)},
    {"idle-sleep-us", parse_u32, 0, DP_MAX_IDLE_SLEEP_US, offsetof(struct options, idle_sleep_us)},
    {"rx-loss", parse_u32, 0, 99, offsetof(struct options, rx_loss_pct)},
    {"help", NULL, 0, 0, 0},
};

static void
options_default(struct options *o)
{
	memset(o, 0, sizeof(*o));
	o->udp_port = CAIS_UDP_PORT;
	o->mtu = DP_DEFAULT_MTU;
	o->idle_sleep_us = DP_DEFAULT_IDLE_SLEEP_US;
	o->ctl.sin_family = AF_INET;
	o->ctl.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	o->ctl.sin_port = htons(CAIS_CTL_PORT);
}

/* The options after -- (argv[0] is the program); --help prints usage and exits. */
static int
parse_args(int argc, char **argv, struct options *o)
{
	struct option longopts[RTE_DIM(opts) + 1] = {0};
	int c;

	for (size_t i = 0; i < RTE_DIM(opts); i++)
		longopts[i] =
		    (struct option){opts[i].name, opts[i].parse ? required_argument : no_argument,
				    NULL, OPT_FIRST + (int)i};
	optind = 1;
	/* no short options: "" */
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		const struct opt *opt;

		if (c < OPT_FIRST || c >= OPT_FIRST + (int)RTE_DIM(opts)) {
			usage(stderr, argv[0]);
			return -1;
		}
		opt = &opts[c - OPT_FIRST];
		if (!opt->parse) {
			usage(stdout, argv[0]);
			exit(EXIT_SUCCESS);
		}
		if (opt->parse(opt, optarg, o) != 0)
			return -1;
	}
	if (optind != argc) {
		fprintf(stderr, "cais-switch: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}

static bool
wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

/* EAL from the arguments before --, then the options after it; exits on an error. */
static void
init(int argc, char **argv, struct options *o)
{
	int ret;

	if (wants_help(argc, argv)) {
		usage(stdout, argv[0]);
		exit(EXIT_SUCCESS);
	}
	ret = rte_eal_init(argc, argv);
	if (ret < 0)
		rte_exit(EXIT_FAILURE, "EAL initialisation failed: %s\n", rte_strerror(rte_errno));
	argc -= ret;
	argv += ret;
	argv[0] = "cais-switch";
	options_default(o);
	if (parse_args(argc, argv, o) != 0)
		rte_exit(EXIT_FAILURE, "bad options (see --help)\n");
}

/* ---- ports ---- */

/* How many ports EAL probed; exits unless they are 1..DP_MAX_PORTS, numbered from 0. */
static uint16_t
ports_count(void)
{
	uint16_t n_ports = rte_eth_dev_count_avail();

	if (n_ports == 0)
		rte_exit(EXIT_FAILURE, "no ports: give PCI NICs or --vdev devices (see --help)\n");
	if (n_ports > DP_MAX_PORTS)
		rte_exit(EXIT_FAILURE, "%u ports, at most %u supported\n", n_ports, DP_MAX_PORTS);
	for (uint16_t p = 0; p < n_ports; p++)
		if (!rte_eth_dev_is_valid_port(p))
			rte_exit(EXIT_FAILURE, "ports must be numbered 0..%u\n", n_ports - 1);
	return n_ports;
}

/*
 * A port's configuration: RSS over its RX queues, multi-segment TX where
 * offered, jumbo frames where the device takes them (af_packet follows its
 * interface's MTU).
 */
static void
port_conf(const struct rte_eth_dev_info *info, uint16_t nrx, uint32_t want_mtu,
	  struct rte_eth_conf *conf)
{
	uint32_t overhead, mtu;

	memset(conf, 0, sizeof(*conf));
	if (nrx > 1 && info->flow_type_rss_offloads) {
		conf->rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf->rx_adv_conf.rss_conf.rss_hf =
		    info->flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP);
	}
	if (info->tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		conf->txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	overhead = info->max_rx_pktlen > info->max_mtu ? info->max_rx_pktlen - info->max_mtu
						       : RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
	mtu = RTE_MIN(want_mtu, (uint32_t)info->max_mtu);
	if (info->max_rx_pktlen > overhead)
		mtu = RTE_MIN(mtu, info->max_rx_pktlen - overhead);
	mtu = RTE_MIN(mtu, (uint32_t)DP_MBUF_DATA - overhead);
	if (mtu > RTE_ETHER_MTU)
		conf->rxmode.mtu = mtu;
}

/* nrx RX queues on the switch's packet pool, ntx TX queues, then start. */
static int
port_queues_start(struct dp_switch *sw, uint16_t p, const char *name,
		  const struct rte_eth_dev_info *info, const struct rte_eth_conf *conf,
		  uint16_t nrx, uint16_t ntx)
{
	struct rte_eth_txconf txc = info->default_txconf;
	uint16_t q;
	int rc;

	for (q = 0; q < nrx; q++) {
		rc = rte_eth_rx_queue_setup(p, q, DP_RX_DESC, rte_eth_dev_socket_id(p), NULL,
					    sw->pool);
		if (rc) {
			LOG(ERR, "port %u (%s): RX queue %u: %s", p, name, q, rte_strerror(-rc));
			return rc;
		}
	}
	txc.offloads = conf->txmode.offloads;
	for (q = 0; q < ntx; q++) {
		rc = rte_eth_tx_queue_setup(p, q, DP_TX_DESC, rte_eth_dev_socket_id(p), &txc);
		if (rc) {
			LOG(ERR, "port %u (%s): TX queue %u: %s", p, name, q, rte_strerror(-rc));
			return rc;
		}
	}
	rc = rte_eth_dev_start(p);
	if (rc)
		LOG(ERR, "port %u (%s): start failed: %s", p, name, rte_strerror(-rc));
	return rc;
}

/* Configure and start port p: one TX queue per lcore, RX queues up to one per lcore. */
static int
port_init(struct dp_switch *sw, uint16_t p, const struct options *o, uint16_t *nb_rxq)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	uint16_t nrx, ntx = (uint16_t)sw->n_lcores;
	uint16_t cur_mtu;
	char name[RTE_ETH_NAME_MAX_LEN];
	int rc;

	rte_eth_dev_get_name_by_port(p, name);
	rc = rte_eth_dev_info_get(p, &info);
	if (rc)
		return rc;
	if (info.max_tx_queues < ntx) {
		LOG(ERR,
		    "port %u (%s) has %u TX queues, %u lcores need one each "
		    "(af_packet: add qpairs=%u to its --vdev, or use fewer lcores)",
		    p, name, info.max_tx_queues, ntx, ntx);
		return -EINVAL;
	}
	nrx = (uint16_t)RTE_MIN((unsigned int)info.max_rx_queues, sw->n_lcores);
	port_conf(&info, nrx, o->mtu, &conf);
	rc = rte_eth_dev_configure(p, nrx, ntx, &conf);
	if (rc) {
		LOG(ERR, "port %u (%s): configure failed: %s", p, name, rte_strerror(-rc));
		return rc;
	}
	rc = port_queues_start(sw, p, name, &info, &conf, nrx, ntx);
	if (rc)
		return rc;
	rc = rte_eth_promiscuous_enable(p);
	if (rc && rc != -ENOTSUP)
		LOG(WARNING, "port %u (%s): promiscuous mode: %s", p, name, rte_strerror(-rc));
	if (!(conf.txmode.offloads & RTE_ETH_TX_OFFLOAD_MULTI_SEGS))
		LOG(INFO, "port %u (%s): no multi-segment TX offload advertised", p, name);
	if (rte_eth_dev_get_mtu(p, &cur_mtu) != 0)
		cur_mtu = 0;
	LOG(INFO, "port %u: %s, %u RX / %u TX queues, MTU %u", p, name, nrx, ntx, cur_mtu);
	*nb_rxq = nrx;
	return 0;
}

/*
 * Discard what the RX queues hold before the switch runs. A port's first
 * frames must be its own: members are bound to the switch port of their first
 * DATA (docs/PROTOCOL.md E5). net_af_packet opens its ETH_P_ALL socket before
 * binding it to its interface, and in between the socket takes frames from
 * every interface, so a restarted switch on veths found other hosts' DATA in
 * a port's ring and bound them there. What is discarded is retransmitted.
 */
static void
drain_stale_rx(const uint16_t *nb_rxq, uint16_t n_ports)
{
	struct rte_mbuf *pkts[DP_BURST];
	unsigned int n = 0;

	for (uint16_t p = 0; p < n_ports; p++)
		for (uint16_t q = 0; q < nb_rxq[p]; q++)
			for (unsigned int k = 0; k < 4 * DP_RX_DESC / DP_BURST; k++) {
				uint16_t got = rte_eth_rx_burst(p, q, pkts, DP_BURST);

				if (!got)
					break;
				rte_pktmbuf_free_bulk(pkts, got);
				n += got;
			}
	if (n)
		LOG(INFO, "discarded %u frames received before the ports were bound", n);
}

/* Spread every (port, RX queue) over the lcores, round robin. */
static int
assign_queues(struct dp_switch *sw, const uint16_t *nb_rxq, uint16_t n_ports)
{
	unsigned int next = 0;

	for (uint16_t p = 0; p < n_ports; p++)
		for (uint16_t q = 0; q < nb_rxq[p]; q++) {
			struct dp_lcore *lc = &sw->lcores[next++ % sw->n_lcores];

			if (lc->n_rxq == DP_MAX_RXQ_PER_LCORE)
				return -ENOSPC;
			lc->rxq[lc->n_rxq].port = p;
			lc->rxq[lc->n_rxq].queue = q;
			lc->n_rxq++;
		}
	return 0;
}

/* Every port started and its RX queues given to the lcores; exits on an error. */
static void
ports_start(struct dp_switch *sw, const struct options *o, uint16_t n_ports)
{
	uint16_t nb_rxq[DP_MAX_PORTS];

	for (uint16_t p = 0; p < n_ports; p++)
		if (port_init(sw, p, o, &nb_rxq[p]) != 0)
			rte_exit(EXIT_FAILURE, "cannot set up port %u\n", p);
	drain_stale_rx(nb_rxq, n_ports);
	if (assign_queues(sw, nb_rxq, n_ports) != 0)
		rte_exit(EXIT_FAILURE, "too many RX queues for the lcores\n");
}

static void
ports_stop(uint16_t n_ports)
{
	for (uint16_t p = 0; p < n_ports; p++) {
		rte_eth_dev_stop(p);
		rte_eth_dev_close(p);
	}
}

/* ---- the switch ---- */

/* The aggregator's MAC: --agg-mac, else port 0's. */
static void
agg_mac(const struct options *o, struct rte_ether_addr *mac)
{
	if (o->agg_mac_set)
		*mac = o->agg_mac;
	else if (rte_eth_macaddr_get(0, mac) != 0 || !rte_is_valid_assigned_ether_addr(mac)) {
		/* ring/null devices have no MAC: a locally administered one from the address */
		const uint8_t *ip = (const uint8_t *)&o->agg_ip;
		const uint8_t local[6] = {0x02, 0xca, ip[0], ip[1], ip[2], ip[3]};

		memcpy(mac->addr_bytes, local, 6);
	}
}

/* The switch of the options: every lcore a data lcore, the main one first. */
static struct dp_switch *
switch_create(const struct options *o, uint16_t n_ports, struct dp_switch_conf *conf)
{
	struct dp_switch *sw;
	unsigned int lcore;

	memset(conf, 0, sizeof(*conf));
	conf->agg_enabled = o->agg_enabled;
	conf->agg_ip = o->agg_ip;
	agg_mac(o, &conf->agg_mac);
	conf->udp_port = (uint16_t)o->udp_port;
	conf->n_ports = n_ports;
	conf->lcore_ids[conf->n_lcores++] = rte_get_main_lcore();
	RTE_LCORE_FOREACH_WORKER (lcore)
		conf->lcore_ids[conf->n_lcores++] = lcore;
	conf->slot_capacity = o->max_slots;
	conf->slot_mem = (uint64_t)o->slot_mem_mib << 20;
	conf->mac_age_s = o->mac_age;
	conf->mbufs = o->mbufs;
	conf->high_share = o->high_share;
	conf->idle_sleep_us = o->idle_sleep_us;
	conf->rx_loss_pct = o->rx_loss_pct;
	conf->socket = (int)rte_socket_id();
	conf->name = "cais";
	sw = dp_switch_create(conf);
	if (!sw)
		rte_exit(EXIT_FAILURE,
			 "cannot create the switch (mbuf pools, tables): %s; "
			 "give EAL more memory (-m) or fewer --mbufs\n",
			 rte_strerror(rte_errno));
	return sw;
}

static void
announce(const struct dp_switch *sw, const struct options *o, const struct dp_switch_conf *conf)
{
	char ip[INET_ADDRSTRLEN], mac[RTE_ETHER_ADDR_FMT_SIZE];

	if (!o->agg_enabled) {
		LOG(INFO, "no --agg-ip: forwarding only, %u data lcore(s)", sw->n_lcores);
		return;
	}
	inet_ntop(AF_INET, &o->agg_ip, ip, sizeof(ip));
	rte_ether_format_addr(mac, sizeof(mac), &conf->agg_mac);
	LOG(INFO, "aggregator %s (%s), UDP port %u, %u data lcore(s), %s kernels", ip, mac,
	    o->udp_port, sw->n_lcores, sw->agg->name);
}

/* --config: the requests applied in order; exits at the first failure. */
static void
apply_config(const struct dp_switch *sw, const struct options *o, const struct ctl_ops *ops)
{
	struct ctl_err err;

	if (!o->config)
		return;
	if (ctl_apply_file(ops, o->config, &err) != 0)
		rte_exit(EXIT_FAILURE, "%s: %s\n", ctl_errname(err.code), err.msg);
	LOG(INFO, "applied %s: %u session(s), %u tensor(s)", o->config, sw->tables.n_sessions,
	    sw->tables.n_tensors);
}

/* ---- the control endpoint ---- */

static struct ctl_endpoint *g_ep;

/* The control thread: the endpoint, never on a data lcore. */
static void *
ctl_main(void *arg)
{
	struct dp_switch *sw = arg;

	while (!sw->quit) {
		int rc = ctl_endpoint_poll(g_ep, 100);

		if (rc < 0) {
			LOG(ERR, "control endpoint: %s", strerror(-rc));
			break;
		}
	}
	return NULL;
}

static int
start_endpoint(struct dp_switch *sw, const struct options *o, const struct ctl_ops *ops,
	       pthread_t *tid)
{
	static struct ctl_key key;
	struct ctl_endpoint_conf ec = {.addr = o->ctl, .ops = ops, .key = &key};
	char addr[INET_ADDRSTRLEN];
	int rc;

	if (o->ctl.sin_port == 0) {
		LOG(INFO, "no control endpoint (--ctl none)");
		return 0;
	}
	if (o->ctl_key && (rc = ctl_key_load(o->ctl_key, &key)) != 0) {
		LOG(ERR, "--ctl-key %s: %s", o->ctl_key,
		    rc == -EINVAL ? "empty or larger than 4096 bytes" : strerror(-rc));
		return rc;
	}
	rc = ctl_endpoint_open(&ec, &g_ep);
	inet_ntop(AF_INET, &o->ctl.sin_addr, addr, sizeof(addr));
	if (rc == -EPERM) {
		LOG(ERR, "--ctl %s:%u is not a loopback address: that needs --ctl-key", addr,
		    ntohs(o->ctl.sin_port));
		return rc;
	}
	if (rc) {
		LOG(ERR, "control endpoint %s:%u: %s", addr, ntohs(o->ctl.sin_port), strerror(-rc));
		return rc;
	}
	rc = rte_ctrl_thread_create(tid, "cais-ctl", NULL, ctl_main, sw);
	if (rc) {
		LOG(ERR, "control thread: %s", strerror(-rc));
		return rc;
	}
	LOG(INFO, "control endpoint on %s:%u (%s)", addr, ntohs(o->ctl.sin_port),
	    key.len ? "HMAC-SHA256" : "no key: loopback only");
	return 0;
}

/* ---- running ---- */

static void
on_signal(int sig)
{
	g_signal = sig;
	if (g_sw)
		g_sw->quit = true;
}

struct periodic_state {
	uint64_t period;
	uint64_t next;
};

/* Runs on the main lcore between bursts: counters every --stats-period. */
static void
periodic(struct dp_switch *sw, void *arg)
{
	struct periodic_state *ps = arg;
	uint64_t now = rte_rdtsc();

	if (ps->period == 0 || (int64_t)(now - ps->next) < 0)
		return;
	ps->next = now + ps->period;
	/* offline while printing: the control side may wait for a grace period meanwhile */
	rte_rcu_qsbr_thread_offline(sw->rcu, 0);
	dp_stats_print(sw, stdout);
	rte_rcu_qsbr_thread_online(sw->rcu, 0);
}

/* Every data lcore polls until SIGINT or SIGTERM; the main lcore is data lcore 0. */
static void
run(struct dp_switch *sw, const struct options *o)
{
	struct periodic_state ps = {0};

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	ps.period = (uint64_t)o->stats_period * sw->hz;
	ps.next = rte_rdtsc() + ps.period;
	sw->periodic = periodic;
	sw->periodic_arg = &ps;
	for (unsigned int i = 1; i < sw->n_lcores; i++)
		rte_eal_remote_launch(dp_lcore_run, &sw->lcores[i], sw->lcores[i].lcore_id);
	LOG(INFO, "running; Ctrl-C to stop");
	fflush(stdout);
	dp_lcore_run(&sw->lcores[0]);
	rte_eal_mp_wait_lcore();
	sw->periodic = NULL;
}

int
main(int argc, char **argv)
{
	struct options o;
	struct dp_switch_conf conf;
	struct ctl_ops ops;
	pthread_t ctl_thread;
	uint16_t n_ports;

	init(argc, argv, &o);
	n_ports = ports_count();
	g_sw = switch_create(&o, n_ports, &conf);
	ports_start(g_sw, &o, n_ports);
	announce(g_sw, &o, &conf);
	if (dp_telemetry_register(g_sw) != 0)
		LOG(WARNING, "telemetry: cannot register the /cais/ commands");
	dp_switch_ctl_ops(g_sw, &ops);
	apply_config(g_sw, &o, &ops);
	if (start_endpoint(g_sw, &o, &ops, &ctl_thread) != 0)
		rte_exit(EXIT_FAILURE, "cannot start the control endpoint\n");

	run(g_sw, &o);

	if (g_ep) {
		pthread_join(ctl_thread, NULL);
		ctl_endpoint_close(g_ep);
	}
	printf("\ncais-switch: stopping (%s)\n", g_signal == SIGTERM ? "SIGTERM" : "SIGINT");
	dp_stats_print(g_sw, stdout);
	ports_stop(n_ports);
	dp_switch_free(g_sw);
	g_sw = NULL;
	rte_eal_cleanup();
	return EXIT_SUCCESS;
}
