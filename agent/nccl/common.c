/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the plugin's three parts share: the device, the environment, the
 * logger, the properties NCCL asks for.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cais/cais.h>

#include "../peer.h"
#include "cmn_addr.h"
#include "plugin.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static ncclDebugLogger_t logger;
static struct np_dev dev;
static struct np_conf conf;
static bool dev_ok;

void
np_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
       ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (logger)
		logger(level, flags, file, line, "%s", msg);
	else if (level == NCCL_LOG_WARN || getenv("CAIS_NCCL_DEBUG"))
		fprintf(stderr, "CAIS NCCL plugin %s: %s\n",
			level == NCCL_LOG_WARN ? "WARN" : "INFO", msg);
}

uint64_t
np_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- environment ---- */

static bool
env_u64(const char *name, uint64_t max, uint64_t *out)
{
	const char *s = getenv(name);
	unsigned long long v;
	char *end;

	if (!s || !*s)
		return false;
	errno = 0;
	v = strtoull(s, &end, 0);
	/* a size may carry K, M or G */
	if (end != s && (*end == 'K' || *end == 'k' || *end == 'M' || *end == 'G')) {
		v <<= *end == 'G' ? 30 : *end == 'M' ? 20 : 10;
		end++;
	}
	if (errno || end == s || *end || v > max) {
		NP_WARN("CAIS: %s='%s' is not a number in 0..%llu; ignored", name, s,
			(unsigned long long)max);
		return false;
	}
	*out = v;
	return true;
}

static void
env_u32(const char *name, uint32_t max, uint32_t *out)
{
	uint64_t v;

	if (env_u64(name, max, &v))
		*out = (uint32_t)v;
}

static void
env_u16(const char *name, uint16_t max, uint16_t *out)
{
	uint64_t v;

	if (env_u64(name, max, &v))
		*out = (uint16_t)v;
}

static void
read_conf(void)
{
	const char *sw = getenv("CAIS_SWITCH");
	double d;
	char *end;

	conf.tenant = 1;
	conf.session = 1;
	conf.tensor_sum = 1;
	conf.tensor_max = 2;
	conf.tensor_min = 3;
	conf.slots = NP_DEFAULT_SLOTS;
	conf.scale = 1024;
	conf.threshold = CAIS_DEFAULT_THRESHOLD;
	conf.timeout_ms = 30000;
	conf.retries = 8;
	conf.retx_us = 500;
	conf.check_every = 100;
	conf.step_every = NP_STEP_EVERY;
	if (sw && *sw) {
		conf.have_switch = cmn_parse_addr(sw, CAIS_UDP_PORT, &conf.sw) == 0;
		if (!conf.have_switch)
			NP_WARN("CAIS: CAIS_SWITCH='%s' is not A.B.C.D[:PORT]; CollNet is off", sw);
	}
	conf.manager = getenv("CAIS_MANAGER");
	if (conf.manager && !*conf.manager)
		conf.manager = NULL;
	conf.key_file = getenv("CAIS_MANAGER_KEY");
	conf.tenant_name = getenv("CAIS_TENANT_NAME");
	if (!conf.tenant_name || !*conf.tenant_name)
		conf.tenant_name = "nccl";
	conf.port = conf.manager ? 0 : NP_DEFAULT_PORT;
	env_u16("CAIS_PORT", 65535, &conf.port);
	env_u16("CAIS_TENANT", 65535, &conf.tenant);
	env_u16("CAIS_SESSION", 65535, &conf.session);
	env_u32("CAIS_TENSOR_SUM", UINT32_MAX, &conf.tensor_sum);
	env_u32("CAIS_TENSOR_MAX", UINT32_MAX, &conf.tensor_max);
	env_u32("CAIS_TENSOR_MIN", UINT32_MAX, &conf.tensor_min);
	env_u32("CAIS_SLOTS", 32768, &conf.slots);
	env_u16("CAIS_ELEMS", NP_MAX_ELEMS, &conf.elems);
	env_u64("CAIS_THRESHOLD", UINT64_MAX, &conf.threshold);
	env_u32("CAIS_TIMEOUT_MS", 3600000, &conf.timeout_ms);
	env_u32("CAIS_RETRIES", 1000, &conf.retries);
	env_u32("CAIS_RETX_US", 10000000, &conf.retx_us);
	env_u32("CAIS_CHECK_EVERY", UINT32_MAX, &conf.check_every);
	env_u32("CAIS_STEP_EVERY", UINT32_MAX, &conf.step_every);
	if (conf.step_every == 0) {
		NP_WARN("CAIS: CAIS_STEP_EVERY=0: a step needs at least 1 collective; using %u",
			NP_STEP_EVERY);
		conf.step_every = NP_STEP_EVERY;
	}
	conf.rto_min_us = ag_tcp_rto_min_conf();
	conf.threads = 1;
	env_u32("CAIS_THREADS", NP_MAX_THREADS, &conf.threads);
	if (conf.threads == 0 || (conf.threads & (conf.threads - 1)) ||
	    conf.slots % conf.threads) {
		NP_WARN("CAIS: CAIS_THREADS=%u is not a power of two 1..%u dividing CAIS_SLOTS "
			"(%u); using 1",
			conf.threads, NP_MAX_THREADS, conf.slots);
		conf.threads = 1;
	}
	if (getenv("CAIS_FIRST_SEQ")) {
		conf.first_seq = 0;
		env_u32("CAIS_FIRST_SEQ", UINT32_MAX, &conf.first_seq);
		conf.have_first_seq = true;
	}
	if (getenv("CAIS_NCCL_TEST_FAIL")) {
		conf.test_fail_probe = strcmp(getenv("CAIS_NCCL_TEST_FAIL"), "probe") == 0;
		NP_WARN("CAIS: CAIS_NCCL_TEST_FAIL=%s: %s", getenv("CAIS_NCCL_TEST_FAIL"),
			conf.test_fail_probe ? "this rank's CollNet probes count as failed (a test)"
					     : "unknown; ignored");
	}
	if (getenv("CAIS_SCALE")) {
		d = strtod(getenv("CAIS_SCALE"), &end);
		if (*end || !(d > 0) || d > 1e12)
			NP_WARN("CAIS: CAIS_SCALE='%s' is not a positive number; using %g",
				getenv("CAIS_SCALE"), conf.scale);
		else
			conf.scale = d;
	}
}

/* ---- the device ---- */

/* Does ifname match NCCL_SOCKET_IFNAME-style spec (a prefix list, '=' exact, '^' excluding)? */
static bool
if_matches(const char *ifname, const char *spec)
{
	char buf[256], *tok, *save = NULL;
	bool exclude = false, exact = false, hit = false;

	if (*spec == '^') {
		exclude = true;
		spec++;
	}
	if (*spec == '=') {
		exact = true;
		spec++;
	}
	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (exact ? strcmp(ifname, tok) == 0 : strncmp(ifname, tok, strlen(tok)) == 0)
			hit = true;
	return exclude ? !hit : hit;
}

static int
if_mtu(const char *ifname)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), mtu = 1500;

	if (fd < 0)
		return mtu;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFMTU, &ifr) == 0)
		mtu = ifr.ifr_mtu;
	close(fd);
	return mtu;
}

static int
if_speed(const char *ifname)
{
	char path[128];
	FILE *f;
	int speed = -1;

	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%d", &speed) != 1)
			speed = -1;
		fclose(f);
	}
	return speed > 0 ? speed : NP_DEFAULT_SPEED;
}

static void
find_device(void)
{
	const char *spec = getenv("CAIS_IFNAME");
	struct ifaddrs *ifa, *i;
	char path[128], real[PATH_MAX];
	uint64_t h = 1469598103934665603ull;

	if (!spec || !*spec)
		spec = getenv("NCCL_SOCKET_IFNAME");
	if (getifaddrs(&ifa) != 0) {
		NP_WARN("CAIS: getifaddrs: %s", strerror(errno));
		return;
	}
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
			continue;
		if (spec && *spec ? !if_matches(i->ifa_name, spec) : (i->ifa_flags & IFF_LOOPBACK))
			continue;
		snprintf(dev.name, sizeof(dev.name), "%s", i->ifa_name);
		dev.addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
		dev_ok = true;
		break;
	}
	freeifaddrs(ifa);
	if (!dev_ok) {
		NP_WARN("CAIS: no IPv4 interface %s%s is up: the plugin has no device",
			spec ? "matching " : "", spec ? spec : "(other than loopback)");
		return;
	}
	dev.mtu = if_mtu(dev.name);
	dev.speed = if_speed(dev.name);
	snprintf(path, sizeof(path), "/sys/class/net/%s/device", dev.name);
	dev.pci_path = realpath(path, real) ? strdup(real) : NULL;
	for (const char *c = dev.name; *c; c++)
		h = (h ^ (uint8_t)*c) * 1099511628211ull;
	dev.guid = h ^ dev.addr.s_addr;
}

static void
setup_once(void)
{
	char ip[INET_ADDRSTRLEN];
	int max_elems;

	read_conf();
	find_device();
	if (!dev_ok)
		return;
	/* what one packet of the data interface carries: IPv4 20 + UDP 8 + CAIS 24 */
	max_elems = (dev.mtu - 52) / 4;
	if (max_elems > (int)NP_MAX_ELEMS)
		max_elems = NP_MAX_ELEMS;
	if (max_elems < 1)
		max_elems = 1;
	if (conf.elems == 0)
		conf.elems = (uint16_t)max_elems;
	inet_ntop(AF_INET, &dev.addr, ip, sizeof(ip));
	NP_INFO(NCCL_INIT | NCCL_NET,
		"CAIS: device %s %s (MTU %d, %d Mb/s); CollNet %s%s; threshold %llu B", dev.name,
		ip, dev.mtu, dev.speed,
		conf.manager	   ? "through the manager at "
		: conf.have_switch ? "with the switch at "
				   : "off (set CAIS_SWITCH or CAIS_MANAGER)",
		conf.manager	   ? conf.manager
		: conf.have_switch ? inet_ntoa(conf.sw.sin_addr)
				   : "",
		(unsigned long long)conf.threshold);
}

ncclResult_t
np_setup(ncclDebugLogger_t log)
{
	if (log)
		logger = log;
	pthread_once(&once, setup_once);
	return dev_ok ? ncclSuccess : ncclSystemError;
}

const struct np_dev *
np_device(void)
{
	return dev_ok ? &dev : NULL;
}

const struct np_conf *
np_conf(void)
{
	return &conf;
}

bool
np_coll_enabled(void)
{
	return dev_ok && (conf.manager || conf.have_switch);
}

void
np_props(ncclNetProperties_v11_t *p, bool coll)
{
	memset(p, 0, sizeof(*p));
	/* the same name and PCI path for both tables: that is how NCCL's topology
	 * learns that the net device also does collectives */
	p->name = dev.name;
	p->pciPath = dev.pci_path;
	p->guid = dev.guid;
	p->ptrSupport = NCCL_PTR_HOST;
	p->speed = dev.speed;
	p->port = 1;
	p->maxComms = 65536;
	p->maxRecvs = 1;
	p->netDeviceType = NCCL_NET_DEVICE_HOST;
	p->vProps.ndevs = 1;
	p->vProps.devs[0] = 0;
	p->maxP2pBytes = NP_MAX_P2P_BYTES;
	p->maxCollBytes = NP_MAX_COLL_BYTES;
	p->maxMultiRequestSize = 1;
	(void)coll;
}

ncclResult_t
np_reg_host_mr(const char *what, void *data, size_t size, int type, void **mhandle)
{
	struct np_mr *mr;

	if (type != NCCL_PTR_HOST) {
		NP_WARN("CAIS: %s regMr: only host memory (type %d)", what, type);
		return ncclInternalError;
	}
	mr = malloc(sizeof(*mr));
	if (!mr)
		return ncclSystemError;
	mr->data = data;
	mr->size = size;
	*mhandle = mr;
	return ncclSuccess;
}

/* The members every version has, from the v11 properties (the rest zeroed). */
#define NP_PROPS_BASE(o, p)                                                                        \
	do {                                                                                       \
		memset(o, 0, sizeof(*o));                                                          \
		o->name = p->name;                                                                 \
		o->pciPath = p->pciPath;                                                           \
		o->guid = p->guid;                                                                 \
		o->ptrSupport = p->ptrSupport;                                                     \
		o->speed = p->speed;                                                               \
		o->port = p->port;                                                                 \
		o->latency = p->latency;                                                           \
		o->maxComms = p->maxComms;                                                         \
		o->maxRecvs = p->maxRecvs;                                                         \
	} while (0)

void
np_props_v9(const ncclNetProperties_v11_t *p, ncclNetProperties_v9_t *o)
{
	NP_PROPS_BASE(o, p);
	o->regIsGlobal = p->regIsGlobal;
	o->forceFlush = p->forceFlush;
	o->netDeviceType = p->netDeviceType;
	o->netDeviceVersion = p->netDeviceVersion;
	o->vProps = p->vProps;
	o->maxP2pBytes = p->maxP2pBytes;
	o->maxCollBytes = p->maxCollBytes;
}

void
np_props_v8(const ncclNetProperties_v11_t *p, ncclNetProperties_v8_t *o)
{
	NP_PROPS_BASE(o, p);
	o->regIsGlobal = p->regIsGlobal;
	o->netDeviceType = p->netDeviceType;
	o->netDeviceVersion = p->netDeviceVersion;
}

void
np_props_v7(const ncclNetProperties_v11_t *p, ncclNetProperties_v7_t *o)
{
	NP_PROPS_BASE(o, p);
	o->netDeviceType = p->netDeviceType;
	o->netDeviceVersion = p->netDeviceVersion;
}

void
np_props_v6(const ncclNetProperties_v11_t *p, ncclNetProperties_v6_t *o)
{
	NP_PROPS_BASE(o, p);
}
