/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * libnccl-net-cais.so internals: one network device (the interface that
 * carries the data network), the configuration read from the environment,
 * logging through NCCL's logger, and the three parts that share them:
 *  - net.c:   ncclNet, a TCP transport for NCCL's point-to-point traffic;
 *  - coll.c:  ncclCollNet, all-reduce through libcais and the switch;
 *  - tuner.c: an NCCL tuner that sends all-reduces at or above the offload
 *             threshold to CollNet and the rest to NCCL's own algorithms;
 * and two helpers of coll.c: port.c (each CollNet communicator's data port)
 * and agree.c (every rank ends a CollNet connect with the same outcome).
 * What the ranks send each other is in wire.h. Only the versioned tables
 * are exported (nccl.map).
 */
#ifndef CAIS_NCCL_PLUGIN_H
#define CAIS_NCCL_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <net/if.h>
#include <netinet/in.h>

#include "nccl_abi.h"
#include "wire.h"

/** The name NCCL shows for the plugin's tables (and NCCL_NET=CAIS would select). */
#define NP_NAME		  "CAIS"
/** Default data port of a rank in static mode: what the switch's session lists. */
#define NP_DEFAULT_PORT	  47000
/** Default pool size S: 128 slots per session, as cais_config_init() has it. */
#define NP_DEFAULT_SLOTS  128u
/** Managed mode: CollNet collectives of a communicator per manager step
 * (CAIS_STEP_EVERY): how often the scales follow what the tensors hold, and
 * how often NCCL's proxy thread waits for the manager (docs/NCCL.md). */
#define NP_STEP_EVERY	  1000u
/** Largest elements per packet: a 9000-byte MTU (PROTOCOL.md section 2). */
#define NP_MAX_ELEMS	  2048u
/** Reported link speed when the interface does not say (veth): 10 Gb/s. */
#define NP_DEFAULT_SPEED  10000
/** Largest isend/irecv and CollNet operation NCCL may hand over. */
#define NP_MAX_P2P_BYTES  (1ull << 30)
#define NP_MAX_COLL_BYTES (512ull << 20)
/** Seqs per second of the time-derived first seq of static mode (see coll.c). */
#define NP_SEQ_PER_SEC	  (1u << 18)
/** Bound on establishing an ncclNet connection (refused connects are retried
 * until then) and on the hello of an accepted one. */
#define NP_CONNECT_MS	  30000
/** CollNet communicators of one process at once in static mode: ports
 * CAIS_PORT .. CAIS_PORT + 15, sessions CAIS_SESSION .. + 15. */
#define NP_MAX_COLL_COMMS 16u
/** Data ports one process holds at once (static slots and managed ports). */
#define NP_MAX_PORTS	  256u
/** libcais flows (and so data ports) per communicator at most: CAIS_THREADS. */
#define NP_MAX_THREADS	  16u
/** What a CollNet connect's agreement allows beyond the slowest rank's own
 * bound (libcais's timeout): the ranks do not enter connect at one instant. */
#define NP_AGREE_SLACK_MS 5000u

/** Only the versioned tables leave the library (nccl.map says the same). */
#define NP_EXPORT __attribute__((visibility("default")))

/** The plugin's one device. */
struct np_dev {
	char name[IF_NAMESIZE]; /**< interface name: also NCCL's name for the device */
	char *pci_path;		/**< realpath of /sys/class/net/<if>/device, or NULL */
	struct in_addr addr;	/**< its IPv4 address */
	int mtu;
	int speed; /**< Mb/s */
	uint64_t guid;
};

/** Settings from the environment (docs/NCCL.md lists them). */
struct np_conf {
	bool have_switch;	  /**< CAIS_SWITCH: static mode */
	struct sockaddr_in sw;	  /**< the aggregator */
	const char *manager;	  /**< CAIS_MANAGER: managed mode (wins over static) */
	const char *key_file;	  /**< CAIS_MANAGER_KEY */
	const char *tenant_name;  /**< CAIS_TENANT_NAME (managed) */
	uint16_t tenant, session; /**< CAIS_TENANT, CAIS_SESSION (static) */
	uint32_t tensor_sum, tensor_max, tensor_min; /**< CAIS_TENSOR_SUM/MAX/MIN */
	uint32_t slots;				     /**< CAIS_SLOTS */
	uint16_t elems; /**< CAIS_ELEMS; default from the interface's MTU */
	double scale;	/**< CAIS_SCALE */
	uint16_t port;	/**< CAIS_PORT; 0: any free port (managed mode's default) */
	uint32_t threads; /**< CAIS_THREADS: libcais flows (data ports) per communicator, a
			   * power of two 1..16 dividing CAIS_SLOTS, default 1; static
			   * mode's switch must list "ports" to match */
	bool have_first_seq;
	uint32_t first_seq;   /**< CAIS_FIRST_SEQ */
	uint64_t threshold;   /**< CAIS_THRESHOLD: the tuner's offload threshold (bytes) */
	uint32_t timeout_ms;  /**< CAIS_TIMEOUT_MS */
	uint32_t retries;     /**< CAIS_RETRIES */
	uint32_t retx_us;     /**< CAIS_RETX_US */
	uint32_t check_every; /**< CAIS_CHECK_EVERY */
	uint32_t step_every;  /**< CAIS_STEP_EVERY: managed, CollNet collectives a step, >= 1 */
	int rto_min_us;	      /**< CAIS_TCP_RTO_MIN_US: ncclNet's TCP floor (peer.h) */
	bool test_fail_probe; /**< CAIS_NCCL_TEST_FAIL=probe: this rank's probe counts as
			       * failed (tests of the agreement; docs/NCCL.md) */
};

/**
 * Once per process: read the environment, find the device. Later calls
 * only update the logger (a NULL logger keeps the one there is).
 * @return ncclSuccess; ncclSystemError when no usable interface exists
 */
ncclResult_t np_setup(ncclDebugLogger_t logger);
const struct np_dev *np_device(void);
const struct np_conf *np_conf(void);
/** Is CollNet configured (CAIS_SWITCH or CAIS_MANAGER)? */
bool np_coll_enabled(void);
/** The device's properties in the newest layout; older ones are copied from it. */
void np_props(ncclNetProperties_v11_t *p, bool coll);

/** CLOCK_MONOTONIC in ms. */
uint64_t np_now_ms(void);

/**
 * The data ports held for a CollNet communicator (port.c): n consecutive
 * ports, one per libcais flow (CAIS_THREADS; docs/PROTOCOL.md E6), the first
 * also the TCP port of libcais's ring.
 */
struct np_port {
	uint16_t port;		   /**< the first, host order; 0: none */
	unsigned int n;		   /**< how many */
	int fd[NP_MAX_THREADS];	   /**< the hold sockets until libcais binds; -1 after */
};

/**
 * Take n consecutive ports on addr free for UDP and TCP, none held by
 * another communicator of this process, and hold them: the k-th block
 * base + k x n for the first free k < NP_MAX_COLL_COMMS, or any block
 * (base 0).
 * @return 0; -EADDRINUSE (none free); another error of socket() or bind()
 */
int np_port_take(struct in_addr addr, uint16_t base, unsigned int n, struct np_port *p);
/** An empty p: no port, no hold socket. */
void np_port_init(struct np_port *p);
/** Let libcais bind the ports: close the hold sockets (the ports stay taken). */
void np_port_hand_over(struct np_port *p);
/** Free the ports (also when never handed over). */
void np_port_give_back(struct np_port *p);

/** A rank's agreement listener (agree.c), from CollNet listen() to the end of connect(). */
struct np_agree {
	int fd;
	uint16_t port; /**< network order */
};

/** Open the listener on addr, any port. @return 0 or -errno */
int np_agree_open(struct np_agree *a, struct in_addr addr);
void np_agree_close(struct np_agree *a);

/**
 * Agree on a CollNet connect's outcome with every rank (agree.c).
 * @param rank0 collnet rank 0's agreement address
 * @param job collnet rank 0's handle nonce: names the communicator
 * @param local this rank's outcome: 0 or -errno
 * @param wait_ms how much later than this rank the slowest rank may report
 * @param who set to the rank the verdict blames; UINT32_MAX when every rank
 *        succeeded or no verdict came
 * @return 0 when every rank succeeded; with a verdict, the blamed rank's
 *         -errno (-ETIMEDOUT: it did not report in time); without one,
 *         -ECANCELED (rank 0 decided without this rank), -ETIMEDOUT, or the
 *         socket error that kept this rank from rank 0
 */
int np_agree(struct np_agree *a, const struct sockaddr_in *rank0, uint64_t job, unsigned int rank,
	     unsigned int nranks, int local, uint32_t wait_ms, unsigned int *who);

/** What regMr returns: nothing to register in host memory, but NCCL wants a handle. */
struct np_mr {
	void *data;
	size_t size;
};

/**
 * regMr of host memory, shared by ncclNet and ncclCollNet: a new np_mr in
 * *mhandle (deregMr frees it). what names the caller in the warning.
 * @return ncclSuccess; ncclInternalError for other memory; ncclSystemError
 */
ncclResult_t np_reg_host_mr(const char *what, void *data, size_t size, int type, void **mhandle);

void np_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
	    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define NP_WARN(...)	    np_log(NCCL_LOG_WARN, NCCL_ALL_FLAGS, __FILE__, __LINE__, __VA_ARGS__)
#define NP_INFO(flags, ...) np_log(NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__)
#define NCCL_ALL_FLAGS	    (~0ul)

/** Copy the v11 properties into an older layout. */
void np_props_v6(const ncclNetProperties_v11_t *p, ncclNetProperties_v6_t *o);
void np_props_v7(const ncclNetProperties_v11_t *p, ncclNetProperties_v7_t *o);
void np_props_v8(const ncclNetProperties_v11_t *p, ncclNetProperties_v8_t *o);
void np_props_v9(const ncclNetProperties_v11_t *p, ncclNetProperties_v9_t *o);

/** getProperties of ABI version v from fn_v11 (v = 6..9; v10 shares v11's struct). */
#define NP_PROPS_ADAPTER(fn, v)                                                                    \
	static ncclResult_t fn##_v##v(int d, ncclNetProperties_v##v##_t *o)                        \
	{                                                                                          \
		ncclNetProperties_v11_t p;                                                         \
		ncclResult_t rc = fn##_v11(d, &p);                                                 \
                                                                                                   \
		if (rc == ncclSuccess)                                                             \
			np_props_v##v(&p, o);                                                      \
		return rc;                                                                         \
	}

#endif /* CAIS_NCCL_PLUGIN_H */
