/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The NCCL plugin ABI (agent/nccl/nccl_abi.h) against NCCL 2.28.9's
 * (src/include/plugin/net/net_v6..v11.h, nccl_net.h, tuner/tuner_v4..v5.h,
 * nccl_common.h, nccl.h, nccl_device/net_device.h), transcribed here a
 * second time, independently of nccl_abi.h, so that a change to either
 * shows (LP64):
 *  - every constant and enum value the plugin uses;
 *  - every member of every struct the tables pass: offset, type, and the
 *    struct's size;
 *  - every entry of every table (ncclNet v6..v11, ncclCollNet v6..v11,
 *    tuner v4, v5): its position and its full prototype, and the table's
 *    size (no entry missing or extra).
 * Then the built library: the tables it exports, their names and entry
 * points, the entries it leaves absent, the v11 contexts, the data ports of
 * CollNet listens, ncclNet's connect and accept that never wait, its
 * connect's fresh SYN when one is lost, the
 * properties of each version, reduceSupport, and the tuner's choices.
 *   test_nccl_abi PATH_TO_libnccl-net-cais.so
 */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "../../agent/nccl/nccl_abi.h"
#include "../../agent/nccl/wire.h"
#include "../../agent/peer.h"

static const char *plugin_path;
static void *lib;
static unsigned int checks; /* layout checks made */
static unsigned int port_base;

#define CHK(cond)                                                                                  \
	do {                                                                                       \
		checks++;                                                                          \
		assert_true(cond);                                                                 \
	} while (0)
#define SZ(T, n)     CHK(sizeof(T) == (size_t)(n))
#define VAL(name, v) CHK((long long)(name) == (long long)(v))
/* member m of struct T at offset off, of type `type` */
#define MEM(T, m, off, type)                                                                       \
	do {                                                                                       \
		CHK(offsetof(T, m) == (size_t)(off));                                              \
		CHK(__builtin_types_compatible_p(__typeof__(((T *)0)->m), type));                  \
	} while (0)
/* table entry m of T in pointer slot i, with NCCL's prototype P */
#define FN(T, i, m, P) MEM(T, m, (i) * sizeof(void *), P)

static void
test_constants(void **state)
{
	(void)state;
	SZ(ncclResult_t, 4);
	SZ(ncclDataType_t, 4);
	SZ(ncclRedOp_t, 4);
	SZ(ncclNetDeviceType, 4);
	SZ(ncclFunc_t, 4);
	SZ(ncclDebugLogLevel, 4);
	VAL(ncclSuccess, 0);
	VAL(ncclUnhandledCudaError, 1);
	VAL(ncclSystemError, 2);
	VAL(ncclInternalError, 3);
	VAL(ncclInvalidArgument, 4);
	VAL(ncclInvalidUsage, 5);
	VAL(ncclRemoteError, 6);
	VAL(ncclInProgress, 7);
	VAL(ncclInt8, 0);
	VAL(ncclUint8, 1);
	VAL(ncclInt32, 2);
	VAL(ncclUint32, 3);
	VAL(ncclInt64, 4);
	VAL(ncclUint64, 5);
	VAL(ncclFloat16, 6);
	VAL(ncclFloat32, 7);
	VAL(ncclFloat64, 8);
	VAL(ncclBfloat16, 9);
	VAL(ncclFloat8e4m3, 10);
	VAL(ncclFloat8e5m2, 11);
	VAL(ncclNumTypes, 12);
	VAL(ncclSum, 0);
	VAL(ncclProd, 1);
	VAL(ncclMax, 2);
	VAL(ncclMin, 3);
	VAL(ncclAvg, 4);
	VAL(ncclNumOps, 5);
	VAL(ncclMaxRedOp, 0x7fffffff);
	VAL(NCCL_LOG_NONE, 0);
	VAL(NCCL_LOG_VERSION, 1);
	VAL(NCCL_LOG_WARN, 2);
	VAL(NCCL_LOG_INFO, 3);
	VAL(NCCL_LOG_ABORT, 4);
	VAL(NCCL_LOG_TRACE, 5);
	VAL(NCCL_INIT, 0x1);
	VAL(NCCL_COLL, 0x2);
	VAL(NCCL_NET, 0x10);
	VAL(NCCL_TUNING, 0x40);
	VAL(NCCL_ENV, 0x80);
	VAL(ncclFuncBroadcast, 0);
	VAL(ncclFuncReduce, 1);
	VAL(ncclFuncAllGather, 2);
	VAL(ncclFuncReduceScatter, 3);
	VAL(ncclFuncAllReduce, 4);
	VAL(ncclFuncSendRecv, 5);
	VAL(ncclFuncSend, 6);
	VAL(ncclFuncRecv, 7);
	VAL(NCCL_NET_HANDLE_MAXSIZE, 128);
	VAL(NCCL_PTR_HOST, 1);
	VAL(NCCL_PTR_CUDA, 2);
	VAL(NCCL_PTR_DMABUF, 4);
	VAL(NCCL_NET_MAX_DEVS_PER_NIC, 4);
	VAL(NCCL_MAX_NET_SIZE_BYTES, 1ll << 40);
	VAL(NCCL_NET_DEVICE_HOST, 0);
	VAL(NCCL_NET_DEVICE_UNPACK, 1);
	VAL(NCCL_ALGO_TREE, 0);
	VAL(NCCL_ALGO_RING, 1);
	VAL(NCCL_ALGO_COLLNET_DIRECT, 2);
	VAL(NCCL_ALGO_COLLNET_CHAIN, 3);
	VAL(NCCL_ALGO_NVLS, 4);
	VAL(NCCL_ALGO_NVLS_TREE, 5);
	VAL(NCCL_ALGO_PAT, 6);
	VAL(NCCL_PROTO_LL, 0);
	VAL(NCCL_PROTO_LL128, 1);
	VAL(NCCL_PROTO_SIMPLE, 2);
	CHK(NCCL_ALGO_PROTO_IGNORE == -1.0f);
	VAL(NCCL_NUM_ALGORITHMS_V5, 7);
	VAL(NCCL_NUM_PROTOCOLS_V5, 3);
	VAL(NCCL_NUM_HW_LINKS_V5, 3);
	VAL(NCCL_NUM_COMPCAPS_V5, 4);
	VAL(NCCL_NUM_TUNING_SCALES_V5, 3);
	/* the logger and the profiler callback */
	CHK(__builtin_types_compatible_p(
	    ncclDebugLogger_t,
	    void (*)(ncclDebugLogLevel, unsigned long, const char *, int, const char *, ...)));
	CHK(__builtin_types_compatible_p(ncclProfilerCallback_t,
					 ncclResult_t(*)(void **, int, void *, int64_t, void *)));
}

/* The members every properties layout starts with. */
#define PROPS_HEAD(T)                                                                              \
	do {                                                                                       \
		MEM(T, name, 0, char *);                                                           \
		MEM(T, pciPath, 8, char *);                                                        \
		MEM(T, guid, 16, uint64_t);                                                        \
		MEM(T, ptrSupport, 24, int);                                                       \
	} while (0)

static void
test_structs(void **state)
{
	(void)state;
	PROPS_HEAD(ncclNetProperties_v6_t);
	MEM(ncclNetProperties_v6_t, speed, 28, int);
	MEM(ncclNetProperties_v6_t, port, 32, int);
	MEM(ncclNetProperties_v6_t, latency, 36, float);
	MEM(ncclNetProperties_v6_t, maxComms, 40, int);
	MEM(ncclNetProperties_v6_t, maxRecvs, 44, int);
	SZ(ncclNetProperties_v6_t, 48);

	PROPS_HEAD(ncclNetProperties_v7_t);
	MEM(ncclNetProperties_v7_t, speed, 28, int);
	MEM(ncclNetProperties_v7_t, port, 32, int);
	MEM(ncclNetProperties_v7_t, latency, 36, float);
	MEM(ncclNetProperties_v7_t, maxComms, 40, int);
	MEM(ncclNetProperties_v7_t, maxRecvs, 44, int);
	MEM(ncclNetProperties_v7_t, netDeviceType, 48, ncclNetDeviceType);
	MEM(ncclNetProperties_v7_t, netDeviceVersion, 52, int);
	SZ(ncclNetProperties_v7_t, 56);

	PROPS_HEAD(ncclNetProperties_v8_t);
	MEM(ncclNetProperties_v8_t, regIsGlobal, 28, int);
	MEM(ncclNetProperties_v8_t, speed, 32, int);
	MEM(ncclNetProperties_v8_t, port, 36, int);
	MEM(ncclNetProperties_v8_t, latency, 40, float);
	MEM(ncclNetProperties_v8_t, maxComms, 44, int);
	MEM(ncclNetProperties_v8_t, maxRecvs, 48, int);
	MEM(ncclNetProperties_v8_t, netDeviceType, 52, ncclNetDeviceType);
	MEM(ncclNetProperties_v8_t, netDeviceVersion, 56, int);
	SZ(ncclNetProperties_v8_t, 64);

	/* v10's properties are v9's, member for member (nccl_abi.h has one struct) */
	PROPS_HEAD(ncclNetProperties_v9_t);
	MEM(ncclNetProperties_v9_t, regIsGlobal, 28, int);
	MEM(ncclNetProperties_v9_t, forceFlush, 32, int);
	MEM(ncclNetProperties_v9_t, speed, 36, int);
	MEM(ncclNetProperties_v9_t, port, 40, int);
	MEM(ncclNetProperties_v9_t, latency, 44, float);
	MEM(ncclNetProperties_v9_t, maxComms, 48, int);
	MEM(ncclNetProperties_v9_t, maxRecvs, 52, int);
	MEM(ncclNetProperties_v9_t, netDeviceType, 56, ncclNetDeviceType);
	MEM(ncclNetProperties_v9_t, netDeviceVersion, 60, int);
	MEM(ncclNetProperties_v9_t, vProps, 64, ncclNetVDeviceProps_t);
	MEM(ncclNetProperties_v9_t, maxP2pBytes, 88, size_t);
	MEM(ncclNetProperties_v9_t, maxCollBytes, 96, size_t);
	SZ(ncclNetProperties_v9_t, 104);

	PROPS_HEAD(ncclNetProperties_v11_t);
	MEM(ncclNetProperties_v11_t, regIsGlobal, 28, int);
	MEM(ncclNetProperties_v11_t, forceFlush, 32, int);
	MEM(ncclNetProperties_v11_t, speed, 36, int);
	MEM(ncclNetProperties_v11_t, port, 40, int);
	MEM(ncclNetProperties_v11_t, latency, 44, float);
	MEM(ncclNetProperties_v11_t, maxComms, 48, int);
	MEM(ncclNetProperties_v11_t, maxRecvs, 52, int);
	MEM(ncclNetProperties_v11_t, netDeviceType, 56, ncclNetDeviceType);
	MEM(ncclNetProperties_v11_t, netDeviceVersion, 60, int);
	MEM(ncclNetProperties_v11_t, vProps, 64, ncclNetVDeviceProps_t);
	MEM(ncclNetProperties_v11_t, maxP2pBytes, 88, size_t);
	MEM(ncclNetProperties_v11_t, maxCollBytes, 96, size_t);
	MEM(ncclNetProperties_v11_t, maxMultiRequestSize, 104, int);
	SZ(ncclNetProperties_v11_t, 112);

	MEM(ncclNetVDeviceProps_t, ndevs, 0, int);
	MEM(ncclNetVDeviceProps_t, devs, 4, int[4]);
	SZ(ncclNetVDeviceProps_t, 20);
	MEM(ncclNetDeviceHandle_t, netDeviceType, 0, ncclNetDeviceType);
	MEM(ncclNetDeviceHandle_t, netDeviceVersion, 4, int);
	MEM(ncclNetDeviceHandle_t, handle, 8, void *);
	MEM(ncclNetDeviceHandle_t, size, 16, size_t);
	MEM(ncclNetDeviceHandle_t, needsProxyProgress, 24, int);
	SZ(ncclNetDeviceHandle_t, 32);
	MEM(ncclNetCommConfig_t, trafficClass, 0, int);
	SZ(ncclNetCommConfig_t, 4);
	MEM(ncclNetCommAttr_v11_t, maxConcurrentPeers, 0, int32_t);
	MEM(ncclNetCommAttr_v11_t, minConcurrentPeers, 4, int32_t);
	MEM(ncclNetCommAttr_v11_t, maxFlowsPerPeer, 8, int32_t);
	MEM(ncclNetCommAttr_v11_t, minFlowsPerPeer, 12, int32_t);
	SZ(ncclNetCommAttr_v11_t, 16);
	MEM(ncclNetAttr_v11_t, sendCommAttr, 0, ncclNetCommAttr_v11_t);
	MEM(ncclNetAttr_v11_t, recvCommAttr, 16, ncclNetCommAttr_v11_t);
	MEM(ncclNetAttr_v11_t, op, 32, uint32_t);
	MEM(ncclNetAttr_v11_t, algo, 36, uint32_t);
	MEM(ncclNetAttr_v11_t, proto, 40, uint32_t);
	SZ(ncclNetAttr_v11_t, 44);
	MEM(ncclNetSGE_v8_t, mhandle, 0, void *);
	MEM(ncclNetSGE_v8_t, address, 8, void *);
	MEM(ncclNetSGE_v8_t, size, 16, uint32_t);
	SZ(ncclNetSGE_v8_t, 24);
	/* v9, v10 and v11 share this one */
	MEM(ncclNetSGE_v9_t, mhandle, 0, void *);
	MEM(ncclNetSGE_v9_t, address, 8, void *);
	MEM(ncclNetSGE_v9_t, size, 16, size_t);
	SZ(ncclNetSGE_v9_t, 24);

	MEM(ncclNvlDomainInfo_v5_t, nNvlDomains, 0, int);
	MEM(ncclNvlDomainInfo_v5_t, minRanksPerNvlDomain, 4, int);
	MEM(ncclNvlDomainInfo_v5_t, maxRanksPerNvlDomain, 8, int);
	SZ(ncclNvlDomainInfo_v5_t, 12);
	MEM(ncclTunerConstants_v5_t, baseLatencies, 0, double[7][3]);
	MEM(ncclTunerConstants_v5_t, hwLatencies, 168, double[3][7][3]);
	MEM(ncclTunerConstants_v5_t, llMaxBws, 672, double[4][3]);
	MEM(ncclTunerConstants_v5_t, perChMaxRingLL128Bws, 768, double[4][3]);
	MEM(ncclTunerConstants_v5_t, perChMaxTreeLL128Bws, 864, double[4][3]);
	MEM(ncclTunerConstants_v5_t, perChMaxTreeBws, 960, double[4][3]);
	MEM(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws, 1056, double[4][3]);
	SZ(ncclTunerConstants_v5_t, 1152);
}

/* ---- the prototypes of NCCL's tables, written out once more ---- */

typedef ncclResult_t (*p_init6)(ncclDebugLogger_t);
typedef ncclResult_t (*p_init10)(ncclDebugLogger_t, ncclProfilerCallback_t);
typedef ncclResult_t (*p_init11)(void **, uint64_t, ncclNetCommConfig_t *, ncclDebugLogger_t,
				 ncclProfilerCallback_t);
typedef ncclResult_t (*p_devices)(int *);
typedef ncclResult_t (*p_props6)(int, ncclNetProperties_v6_t *);
typedef ncclResult_t (*p_props7)(int, ncclNetProperties_v7_t *);
typedef ncclResult_t (*p_props8)(int, ncclNetProperties_v8_t *);
typedef ncclResult_t (*p_props9)(int, ncclNetProperties_v9_t *);
typedef ncclResult_t (*p_props11)(int, ncclNetProperties_v11_t *);
typedef ncclResult_t (*p_listen6)(int, void *, void **);
typedef ncclResult_t (*p_listen11)(void *, int, void *, void **);
typedef ncclResult_t (*p_connect6)(int, void *, void **);
typedef ncclResult_t (*p_connect7)(int, void *, void **, ncclNetDeviceHandle_t **);
typedef ncclResult_t (*p_connect10)(int, ncclNetCommConfig_t *, void *, void **,
				    ncclNetDeviceHandle_t **);
typedef ncclResult_t (*p_connect11)(void *, int, void *, void **, ncclNetDeviceHandle_t **);
typedef ncclResult_t (*p_accept6)(void *, void **);
typedef ncclResult_t (*p_accept7)(void *, void **, ncclNetDeviceHandle_t **);
typedef ncclResult_t (*p_regmr_int)(void *, void *, int, int, void **);
typedef ncclResult_t (*p_regmr)(void *, void *, size_t, int, void **);
typedef ncclResult_t (*p_dmabuf)(void *, void *, size_t, int, uint64_t, int, void **);
typedef ncclResult_t (*p_dereg)(void *, void *);
typedef ncclResult_t (*p_isend_int)(void *, void *, int, int, void *, void **);
typedef ncclResult_t (*p_isend9)(void *, void *, size_t, int, void *, void **);
typedef ncclResult_t (*p_isend10)(void *, void *, size_t, int, void *, void *, void **);
typedef ncclResult_t (*p_irecv_int)(void *, int, void **, int *, int *, void **, void **);
typedef ncclResult_t (*p_irecv9)(void *, int, void **, size_t *, int *, void **, void **);
typedef ncclResult_t (*p_irecv10)(void *, int, void **, size_t *, int *, void **, void **, void **);
typedef ncclResult_t (*p_iflush)(void *, int, void **, int *, void **, void **);
typedef ncclResult_t (*p_test)(void *, int *, int *);
typedef ncclResult_t (*p_close)(void *);
typedef ncclResult_t (*p_devmr)(void *, void *, void **);
typedef ncclResult_t (*p_consumed)(void *, int, void *);
typedef ncclResult_t (*p_vdev)(int *, ncclNetVDeviceProps_t *);
typedef ncclResult_t (*p_setattr)(void *, ncclNetAttr_v11_t *);
typedef ncclResult_t (*p_cinit11)(void **, uint64_t, ncclDebugLogger_t);
typedef ncclResult_t (*p_cconnect)(void **, int, int, void *, void **);
typedef ncclResult_t (*p_support)(ncclDataType_t, ncclRedOp_t, int *);
typedef ncclResult_t (*p_allreduce_int)(void *, void *, void *, int, ncclDataType_t, ncclRedOp_t,
					void *, void *, void **);
typedef ncclResult_t (*p_allreduce)(void *, void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
				    void *, void *, void **);
typedef ncclResult_t (*p_allgather8)(void *, void *, int, ncclNetSGE_v8_t *, size_t, size_t, size_t,
				     void *, void **);
typedef ncclResult_t (*p_allgather9)(void *, void *, int, ncclNetSGE_v9_t *, size_t, size_t, size_t,
				     void *, void **);
typedef ncclResult_t (*p_rs8)(void *, int, ncclNetSGE_v8_t *, void *, size_t, size_t, size_t,
			      ncclDataType_t, ncclRedOp_t, void *, void **);
typedef ncclResult_t (*p_rs9)(void *, int, ncclNetSGE_v9_t *, void *, size_t, size_t, size_t,
			      ncclDataType_t, ncclRedOp_t, void *, void **);
typedef ncclResult_t (*p_cflush)(void *, void *, int, void *, void **);
typedef ncclResult_t (*p_tinit4)(size_t, size_t, ncclDebugLogger_t, void **);
typedef ncclResult_t (*p_tinit5)(void **, uint64_t, size_t, size_t, ncclDebugLogger_t,
				 ncclNvlDomainInfo_v5_t *, ncclTunerConstants_v5_t *);
typedef ncclResult_t (*p_collinfo)(void *, ncclFunc_t, size_t, int, float **, int, int, int, int *);

/* ncclNet v7..v11 from closeListen on (slot 16) */
#define NET_TAIL(T)                                                                                \
	do {                                                                                       \
		FN(T, 17, getDeviceMr, p_devmr);                                                   \
		FN(T, 18, irecvConsumed, p_consumed);                                              \
	} while (0)

/* The entries of slots 7..16 that differ only in the size types. */
#define NET_MIDDLE(T, P_REGMR, P_ISEND, P_IRECV)                                                   \
	do {                                                                                       \
		FN(T, 7, regMr, P_REGMR);                                                          \
		FN(T, 8, regMrDmaBuf, p_dmabuf);                                                   \
		FN(T, 9, deregMr, p_dereg);                                                        \
		FN(T, 10, isend, P_ISEND);                                                         \
		FN(T, 11, irecv, P_IRECV);                                                         \
		FN(T, 12, iflush, p_iflush);                                                       \
		FN(T, 13, test, p_test);                                                           \
		FN(T, 14, closeSend, p_close);                                                     \
		FN(T, 15, closeRecv, p_close);                                                     \
		FN(T, 16, closeListen, p_close);                                                   \
	} while (0)

static void
test_net_tables(void **state)
{
	(void)state;
	FN(ncclNet_v6_t, 0, name, const char *);
	FN(ncclNet_v6_t, 1, init, p_init6);
	FN(ncclNet_v6_t, 2, devices, p_devices);
	FN(ncclNet_v6_t, 3, getProperties, p_props6);
	FN(ncclNet_v6_t, 4, listen, p_listen6);
	FN(ncclNet_v6_t, 5, connect, p_connect6);
	FN(ncclNet_v6_t, 6, accept, p_accept6);
	NET_MIDDLE(ncclNet_v6_t, p_regmr_int, p_isend_int, p_irecv_int);
	SZ(ncclNet_v6_t, 17 * 8);

	FN(ncclNet_v7_t, 0, name, const char *);
	FN(ncclNet_v7_t, 1, init, p_init6);
	FN(ncclNet_v7_t, 2, devices, p_devices);
	FN(ncclNet_v7_t, 3, getProperties, p_props7);
	FN(ncclNet_v7_t, 4, listen, p_listen6);
	FN(ncclNet_v7_t, 5, connect, p_connect7);
	FN(ncclNet_v7_t, 6, accept, p_accept7);
	NET_MIDDLE(ncclNet_v7_t, p_regmr_int, p_isend_int, p_irecv_int);
	NET_TAIL(ncclNet_v7_t);
	SZ(ncclNet_v7_t, 19 * 8);

	FN(ncclNet_v8_t, 0, name, const char *);
	FN(ncclNet_v8_t, 1, init, p_init6);
	FN(ncclNet_v8_t, 2, devices, p_devices);
	FN(ncclNet_v8_t, 3, getProperties, p_props8);
	FN(ncclNet_v8_t, 4, listen, p_listen6);
	FN(ncclNet_v8_t, 5, connect, p_connect7);
	FN(ncclNet_v8_t, 6, accept, p_accept7);
	NET_MIDDLE(ncclNet_v8_t, p_regmr, p_isend_int, p_irecv_int);
	NET_TAIL(ncclNet_v8_t);
	SZ(ncclNet_v8_t, 19 * 8);

	FN(ncclNet_v9_t, 0, name, const char *);
	FN(ncclNet_v9_t, 1, init, p_init6);
	FN(ncclNet_v9_t, 2, devices, p_devices);
	FN(ncclNet_v9_t, 3, getProperties, p_props9);
	FN(ncclNet_v9_t, 4, listen, p_listen6);
	FN(ncclNet_v9_t, 5, connect, p_connect7);
	FN(ncclNet_v9_t, 6, accept, p_accept7);
	NET_MIDDLE(ncclNet_v9_t, p_regmr, p_isend9, p_irecv9);
	NET_TAIL(ncclNet_v9_t);
	FN(ncclNet_v9_t, 19, makeVDevice, p_vdev);
	SZ(ncclNet_v9_t, 20 * 8);

	FN(ncclNet_v10_t, 0, name, const char *);
	FN(ncclNet_v10_t, 1, init, p_init10);
	FN(ncclNet_v10_t, 2, devices, p_devices);
	FN(ncclNet_v10_t, 3, getProperties, p_props9);
	FN(ncclNet_v10_t, 4, listen, p_listen6);
	FN(ncclNet_v10_t, 5, connect, p_connect10);
	FN(ncclNet_v10_t, 6, accept, p_accept7);
	NET_MIDDLE(ncclNet_v10_t, p_regmr, p_isend10, p_irecv10);
	NET_TAIL(ncclNet_v10_t);
	FN(ncclNet_v10_t, 19, makeVDevice, p_vdev);
	SZ(ncclNet_v10_t, 20 * 8);

	FN(ncclNet_v11_t, 0, name, const char *);
	FN(ncclNet_v11_t, 1, init, p_init11);
	FN(ncclNet_v11_t, 2, devices, p_devices);
	FN(ncclNet_v11_t, 3, getProperties, p_props11);
	FN(ncclNet_v11_t, 4, listen, p_listen11);
	FN(ncclNet_v11_t, 5, connect, p_connect11);
	FN(ncclNet_v11_t, 6, accept, p_accept7);
	NET_MIDDLE(ncclNet_v11_t, p_regmr, p_isend10, p_irecv10);
	NET_TAIL(ncclNet_v11_t);
	FN(ncclNet_v11_t, 19, makeVDevice, p_vdev);
	FN(ncclNet_v11_t, 20, finalize, p_close);
	FN(ncclNet_v11_t, 21, setNetAttr, p_setattr);
	SZ(ncclNet_v11_t, 22 * 8);
}

/* ncclCollNet: slots 0..9 of every version; then the collectives differ */
#define COLL_HEAD(T, P_INIT, P_PROPS, P_LISTEN, P_REGMR)                                           \
	do {                                                                                       \
		FN(T, 0, name, const char *);                                                      \
		FN(T, 1, init, P_INIT);                                                            \
		FN(T, 2, devices, p_devices);                                                      \
		FN(T, 3, getProperties, P_PROPS);                                                  \
		FN(T, 4, listen, P_LISTEN);                                                        \
		FN(T, 5, connect, p_cconnect);                                                     \
		FN(T, 6, reduceSupport, p_support);                                                \
		FN(T, 7, regMr, P_REGMR);                                                          \
		FN(T, 8, regMrDmaBuf, p_dmabuf);                                                   \
		FN(T, 9, deregMr, p_dereg);                                                        \
	} while (0)

/* iflush .. closeListen from slot i on */
#define COLL_END(T, i)                                                                             \
	do {                                                                                       \
		FN(T, (i), iflush, p_cflush);                                                      \
		FN(T, (i) + 1, test, p_test);                                                      \
		FN(T, (i) + 2, closeColl, p_close);                                                \
		FN(T, (i) + 3, closeListen, p_close);                                              \
	} while (0)

static void
test_coll_tables(void **state)
{
	(void)state;
	COLL_HEAD(ncclCollNet_v6_t, p_init6, p_props6, p_listen6, p_regmr_int);
	FN(ncclCollNet_v6_t, 10, iallreduce, p_allreduce_int);
	COLL_END(ncclCollNet_v6_t, 11);
	SZ(ncclCollNet_v6_t, 15 * 8);

	COLL_HEAD(ncclCollNet_v7_t, p_init6, p_props7, p_listen6, p_regmr_int);
	FN(ncclCollNet_v7_t, 10, iallreduce, p_allreduce_int);
	COLL_END(ncclCollNet_v7_t, 11);
	SZ(ncclCollNet_v7_t, 15 * 8);

	COLL_HEAD(ncclCollNet_v8_t, p_init6, p_props8, p_listen6, p_regmr);
	FN(ncclCollNet_v8_t, 10, iallreduce, p_allreduce_int);
	FN(ncclCollNet_v8_t, 11, iallgather, p_allgather8);
	FN(ncclCollNet_v8_t, 12, ireducescatter, p_rs8);
	COLL_END(ncclCollNet_v8_t, 13);
	SZ(ncclCollNet_v8_t, 17 * 8);

	/* v10 is v9 with v10's names for the same layouts */
	COLL_HEAD(ncclCollNet_v9_t, p_init6, p_props9, p_listen6, p_regmr);
	FN(ncclCollNet_v9_t, 10, iallreduce, p_allreduce);
	FN(ncclCollNet_v9_t, 11, iallgather, p_allgather9);
	FN(ncclCollNet_v9_t, 12, ireducescatter, p_rs9);
	COLL_END(ncclCollNet_v9_t, 13);
	FN(ncclCollNet_v9_t, 17, makeVDevice, p_vdev);
	SZ(ncclCollNet_v9_t, 18 * 8);

	COLL_HEAD(ncclCollNet_v10_t, p_init6, p_props9, p_listen6, p_regmr);
	FN(ncclCollNet_v10_t, 10, iallreduce, p_allreduce);
	FN(ncclCollNet_v10_t, 11, iallgather, p_allgather9);
	FN(ncclCollNet_v10_t, 12, ireducescatter, p_rs9);
	COLL_END(ncclCollNet_v10_t, 13);
	FN(ncclCollNet_v10_t, 17, makeVDevice, p_vdev);
	SZ(ncclCollNet_v10_t, 18 * 8);

	COLL_HEAD(ncclCollNet_v11_t, p_cinit11, p_props11, p_listen11, p_regmr);
	FN(ncclCollNet_v11_t, 10, iallreduce, p_allreduce);
	FN(ncclCollNet_v11_t, 11, iallgather, p_allgather9);
	FN(ncclCollNet_v11_t, 12, ireducescatter, p_rs9);
	COLL_END(ncclCollNet_v11_t, 13);
	FN(ncclCollNet_v11_t, 17, makeVDevice, p_vdev);
	FN(ncclCollNet_v11_t, 18, finalize, p_close);
	SZ(ncclCollNet_v11_t, 19 * 8);
}

static void
test_tuner_tables(void **state)
{
	(void)state;
	FN(ncclTuner_v4_t, 0, name, const char *);
	FN(ncclTuner_v4_t, 1, init, p_tinit4);
	FN(ncclTuner_v4_t, 2, getCollInfo, p_collinfo);
	FN(ncclTuner_v4_t, 3, destroy, p_close);
	SZ(ncclTuner_v4_t, 4 * 8);
	FN(ncclTuner_v5_t, 0, name, const char *);
	FN(ncclTuner_v5_t, 1, init, p_tinit5);
	FN(ncclTuner_v5_t, 2, getCollInfo, p_collinfo);
	FN(ncclTuner_v5_t, 3, finalize, p_close);
	SZ(ncclTuner_v5_t, 4 * 8);
}

static int
report_checks(void **state)
{
	(void)state;
	printf("nccl_abi_layout: %u checks against NCCL 2.28.9's plugin ABI\n", checks);
	return 0;
}

static void
test_exports(void **state)
{
	static const char *const names[] = {
	    "ncclNetPlugin_v6",	    "ncclNetPlugin_v7",	     "ncclNetPlugin_v8",
	    "ncclNetPlugin_v9",	    "ncclNetPlugin_v10",     "ncclNetPlugin_v11",
	    "ncclCollNetPlugin_v6", "ncclCollNetPlugin_v7",  "ncclCollNetPlugin_v8",
	    "ncclCollNetPlugin_v9", "ncclCollNetPlugin_v10", "ncclCollNetPlugin_v11",
	    "ncclTunerPlugin_v4",   "ncclTunerPlugin_v5",
	};

	(void)state;
	for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *const *name = dlsym(lib, names[i]);

		assert_non_null(name);
		assert_string_equal(*name, "CAIS"); /* every table starts with its name */
	}
	/* nothing of libcais leaks out */
	assert_null(dlsym(lib, "cais_comm_create"));
	assert_null(dlsym(lib, "np_setup"));
}

static void
test_v11(void **state)
{
	ncclNet_v11_t *net = dlsym(lib, "ncclNetPlugin_v11");
	ncclCollNet_v11_t *coll = dlsym(lib, "ncclCollNetPlugin_v11");
	ncclNetCommConfig_t cfg = {.trafficClass = -1};
	ncclNetProperties_v11_t p, cp;
	void *ctx = NULL, *cctx = NULL;
	int n = -1, sup;

	(void)state;
	assert_non_null(net);
	assert_non_null(coll);
	assert_int_equal(net->init(&ctx, 7, &cfg, NULL, NULL), ncclSuccess);
	assert_int_equal(net->devices(&n), ncclSuccess);
	assert_int_equal(n, 1);
	assert_int_equal(net->getProperties(0, &p), ncclSuccess);
	assert_string_equal(p.name, "lo");
	assert_int_equal(p.ptrSupport, NCCL_PTR_HOST);
	assert_int_equal(p.maxRecvs, 1);
	assert_true(p.maxP2pBytes > 0 && p.maxCollBytes > 0);
	assert_int_equal(net->getProperties(1, &p), ncclInvalidArgument);
	assert_int_equal(coll->init(&cctx, 7, NULL), ncclSuccess);
	assert_int_equal(coll->devices(&n), ncclSuccess);
	assert_int_equal(n, 1);
	assert_int_equal(coll->getProperties(0, &cp), ncclSuccess);
	assert_string_equal(cp.name, p.name);
	assert_int_equal(cp.guid, p.guid);
	/* avg reaches a network as a sum (NCCL divides on the GPU): not claimed */
	for (int dt = 0; dt < ncclNumTypes; dt++)
		for (int op = 0; op < ncclNumOps; op++) {
			bool want = (dt == ncclInt32 || dt == ncclFloat16 || dt == ncclFloat32 ||
				     dt == ncclBfloat16) &&
				    (op == ncclSum || op == ncclMax || op == ncclMin);

			assert_int_equal(coll->reduceSupport(dt, op, &sup), ncclSuccess);
			assert_int_equal(sup, want);
		}
	/* absent, not failing: NCCL calls these only where they are there */
	assert_null(net->getDeviceMr);
	assert_null(net->irecvConsumed);
	assert_null(net->makeVDevice);
	assert_null(coll->makeVDevice);
	assert_null(coll->iallgather);
	assert_null(coll->ireducescatter);
	assert_int_equal(coll->finalize(cctx), ncclSuccess);
	assert_int_equal(net->finalize(ctx), ncclSuccess);
}

/* v11 contexts are the communicators': distinct, and one's finalize leaves
 * another's listen comm alone (NCCL finalizes a communicator whose init
 * failed while others go on). */
static void
test_contexts(void **state)
{
	ncclCollNet_v11_t *coll = dlsym(lib, "ncclCollNetPlugin_v11");
	ncclNet_v11_t *net = dlsym(lib, "ncclNetPlugin_v11");
	char ha[NCCL_NET_HANDLE_MAXSIZE], hb[NCCL_NET_HANDLE_MAXSIZE];
	void *a = NULL, *b = NULL, *la = NULL, *lb = NULL, *n1 = NULL, *n2 = NULL;

	(void)state;
	assert_int_equal(net->init(&n1, 1, NULL, NULL, NULL), ncclSuccess);
	assert_int_equal(net->init(&n2, 2, NULL, NULL, NULL), ncclSuccess);
	assert_true(n1 && n2 && n1 != n2);
	assert_int_equal(coll->init(&a, 1, NULL), ncclSuccess);
	assert_int_equal(coll->init(&b, 2, NULL), ncclSuccess);
	assert_true(a && b && a != b);
	assert_int_equal(coll->listen(a, 0, ha, &la), ncclSuccess);
	assert_int_equal(coll->listen(b, 0, hb, &lb), ncclSuccess);
	assert_int_equal(coll->finalize(b), ncclSuccess); /* frees lb, not la */
	memset(hb, 0x5a, sizeof(hb));			  /* reuse what b's finalize freed */
	assert_int_equal(coll->closeListen(la), ncclSuccess);
	assert_int_equal(coll->finalize(a), ncclSuccess);
	assert_int_equal(net->finalize(n1), ncclSuccess);
	assert_int_equal(net->finalize(n2), ncclSuccess);
}

/* Is UDP port p on loopback free? */
static bool
udp_free(unsigned int p)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons((uint16_t)p)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	bool ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

	close(fd);
	return ok;
}

/* Are ports p..p+n-1 on loopback free for UDP and TCP? */
static bool
ports_free(unsigned int p, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
					.sin_port = htons((uint16_t)(p + i))};
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		bool ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

		close(fd);
		if (!ok || !udp_free(p + i))
			return false;
	}
	return true;
}

/* Every CollNet listen holds data ports of its own, T = CAIS_THREADS of them
 * (meson runs this test with 1 and 4): the k-th open at once gets CAIS_PORT
 * + k x T .. + T - 1 (static mode's session + k); a closed one's are free again. */
static void
test_ports(void **state)
{
	ncclCollNet_v11_t *coll = dlsym(lib, "ncclCollNetPlugin_v11");
	char h[3][NCCL_NET_HANDLE_MAXSIZE];
	struct np_coll_handle *ch[3];
	void *ctx = NULL, *l[3];
	unsigned int t = getenv("CAIS_THREADS") ? (unsigned int)atoi(getenv("CAIS_THREADS")) : 1;

	(void)state;
	assert_int_equal(coll->init(&ctx, 3, NULL), ncclSuccess);
	for (int i = 0; i < 3; i++) {
		ch[i] = (struct np_coll_handle *)h[i];
		assert_int_equal(coll->listen(ctx, 0, h[i], &l[i]), ncclSuccess);
		assert_int_equal(ch[i]->magic, NP_COLL_MAGIC);
		assert_int_equal(ntohs(ch[i]->port), port_base + (unsigned int)i * t);
		assert_int_equal(ch[i]->slot, i);
		assert_true(ch[i]->agree_port != 0);
		for (unsigned int k = 0; k < t; k++) /* held, every one */
			assert_false(udp_free(port_base + (unsigned int)i * t + k));
	}
	assert_true(udp_free(port_base + 3 * t));
	assert_int_equal(coll->closeListen(l[1]), ncclSuccess);
	for (unsigned int k = 0; k < t; k++)
		assert_true(udp_free(port_base + t + k));
	assert_int_equal(coll->listen(ctx, 0, h[1], &l[1]), ncclSuccess);
	assert_int_equal(ntohs(ch[1]->port), port_base + t);
	assert_int_equal(coll->closeListen(l[0]), ncclSuccess);
	/* l[1] and l[2] are left to finalize, as NCCL leaves those of failed connects */
	assert_int_equal(coll->finalize(ctx), ncclSuccess);
	assert_int_equal(coll->init(&ctx, 4, NULL), ncclSuccess);
	assert_int_equal(coll->listen(ctx, 0, h[0], &l[0]), ncclSuccess);
	assert_int_equal(ntohs(ch[0]->port), port_base); /* finalize gave them back */
	assert_int_equal(coll->finalize(ctx), ncclSuccess);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ncclNet on loopback: neither connect nor accept waits for the peer, not
 * even for a connection that never says hello. */
static void
test_net_nonblocking(void **state)
{
	ncclNet_v11_t *net = dlsym(lib, "ncclNetPlugin_v11");
	char h[NCCL_NET_HANDLE_MAXSIZE];
	struct np_net_handle *nh = (struct np_net_handle *)h;
	struct sockaddr_in a = {.sin_family = AF_INET};
	void *ctx = NULL, *l = NULL, *sc = NULL, *rc = NULL, *req = NULL;
	int silent, done = 0, size = -1, nulls = 0;
	char msg[5] = "ping", got[8] = "";
	double t, t0 = now_s(), longest = 0;

	(void)state;
	assert_int_equal(net->init(&ctx, 5, NULL, NULL, NULL), ncclSuccess);
	assert_int_equal(net->listen(ctx, 0, h, &l), ncclSuccess);
	a.sin_addr.s_addr = nh->ip;
	a.sin_port = nh->port;
	silent = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(silent, (struct sockaddr *)&a, sizeof(a)), 0);
	t = now_s();
	assert_int_equal(net->accept(l, &rc, NULL), ncclSuccess);
	assert_null(rc); /* the silent one is no comm, and accept did not wait for it */
	assert_true(now_s() - t < 0.5);
	while (!sc || !rc) {
		t = now_s();
		if (!sc)
			assert_int_equal(net->connect(ctx, 0, h, &sc, NULL), ncclSuccess);
		if (!rc)
			assert_int_equal(net->accept(l, &rc, NULL), ncclSuccess);
		t = now_s() - t;
		longest = t > longest ? t : longest;
		nulls += !sc || !rc;
		assert_true(now_s() - t0 < 10);
	}
	assert_true(nulls >= 1); /* the first connect call only starts the handshake */
	assert_true(longest < 0.5);
	assert_null(nh->stage);
	close(silent);
	assert_int_equal(net->isend(sc, msg, 5, 0, NULL, NULL, &req), ncclSuccess);
	assert_non_null(req);
	while (!done)
		assert_int_equal(net->test(req, &done, &size), ncclSuccess);
	void *data = got;
	size_t rsize = sizeof(got);
	int tag = 0;

	req = NULL;
	assert_int_equal(net->irecv(rc, 1, &data, &rsize, &tag, NULL, NULL, &req), ncclSuccess);
	for (done = 0; !done;)
		assert_int_equal(net->test(req, &done, &size), ncclSuccess);
	assert_int_equal(size, 5);
	assert_string_equal(got, "ping");
	assert_int_equal(net->closeSend(sc), ncclSuccess);
	assert_int_equal(net->closeRecv(rc), ncclSuccess);
	assert_int_equal(net->closeListen(l), ncclSuccess);
	assert_int_equal(net->finalize(ctx), ncclSuccess);
	printf("net on loopback: %d calls returned NULL before both ends existed; longest call "
	       "%.3f ms\n",
	       nulls, longest * 1e3);
}

/* ncclNet's connect whose SYN is dropped starts over with a fresh SYN
 * (agent/peer.h ag_connect_wait_us(): after 20 ms, then twice as long up to
 * 320 ms, eight times), where Linux would send the SYN again only after
 * 1 s, and again 1 s or more after that. The listener is the test's own,
 * its accept queue full (backlog 0 and one connection not accepted), so the
 * kernel drops the SYNs; the test frees it at 1 s, and the next fresh SYN
 * (at 1.26 s) gets through, not one of the kernel's own (1 s after a
 * connect's last fresh SYN, and each 1 s after that). */
static void
test_net_syn_lost(void **state)
{
	ncclNet_v11_t *net = dlsym(lib, "ncclNetPlugin_v11");
	char h[NCCL_NET_HANDLE_MAXSIZE];
	struct np_net_handle *nh = (struct np_net_handle *)h;
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	struct np_hello hello;
	void *ctx = NULL, *l = NULL, *sc = NULL;
	int lfd, filler, conn = -1;
	double t0, t_conn, t_syn = 0;

	(void)state;
	assert_int_equal(net->init(&ctx, 6, NULL, NULL, NULL), ncclSuccess);
	assert_int_equal(net->listen(ctx, 0, h, &l), ncclSuccess);
	/* the handle's address replaced by the test's listener */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 0), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
	filler = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(filler, (struct sockaddr *)&a, sizeof(a)), 0);
	nh->ip = a.sin_addr.s_addr;
	nh->port = a.sin_port;

	t0 = now_s();
	while (!sc && now_s() - t0 < 4) {
		assert_int_equal(net->connect(ctx, 0, h, &sc, NULL), ncclSuccess);
		if (filler >= 0 && now_s() - t0 >= 1.0) {
			int q = accept(lfd, NULL, NULL); /* the queue has room again */

			assert_true(q >= 0);
			close(q);
			close(filler);
			filler = -1;
		}
		usleep(1000);
	}
	t_conn = now_s() - t0;
	assert_non_null(sc);
	/* the first fresh SYN after the queue has room */
	for (unsigned int r = 0; t_syn <= 1.0; r++)
		t_syn += ag_connect_wait_us(r) / 1e6;
	print_message("connected after %.0f ms (a fresh SYN at %.0f ms)\n", t_conn * 1e3,
		      t_syn * 1e3);
	assert_true(t_syn < 1.5);
	/* on that SYN: not on one of the kernel's, earlier or later */
	assert_true(t_conn >= t_syn - 0.02 && t_conn < t_syn + 0.4);
	assert_null(nh->stage);
	/* and the connection starts with the hello of the handle's listener */
	for (int i = 0; i < 100 && conn < 0; i++, usleep(1000))
		conn = accept(lfd, NULL, NULL);
	assert_true(conn >= 0);
	assert_int_equal(recv(conn, &hello, sizeof(hello), MSG_WAITALL), (ssize_t)sizeof(hello));
	assert_int_equal(hello.magic, NP_NET_MAGIC);
	assert_true(hello.nonce == nh->nonce);
	close(conn);
	close(lfd);
	assert_int_equal(net->closeSend(sc), ncclSuccess);
	assert_int_equal(net->closeListen(l), ncclSuccess);
	assert_int_equal(net->finalize(ctx), ncclSuccess);
}

static void
test_old_versions(void **state)
{
	ncclNet_v6_t *n6 = dlsym(lib, "ncclNetPlugin_v6");
	ncclNet_v8_t *n8 = dlsym(lib, "ncclNetPlugin_v8");
	ncclNet_v10_t *n10 = dlsym(lib, "ncclNetPlugin_v10");
	ncclCollNet_v8_t *c8 = dlsym(lib, "ncclCollNetPlugin_v8");
	ncclNetProperties_v6_t p6;
	ncclNetProperties_v8_t p8;
	ncclNetProperties_v9_t p9;

	(void)state;
	assert_int_equal(n6->init(NULL), ncclSuccess);
	assert_int_equal(n6->getProperties(0, &p6), ncclSuccess);
	assert_string_equal(p6.name, "lo");
	assert_int_equal(p6.ptrSupport, NCCL_PTR_HOST);
	assert_int_equal(p6.maxRecvs, 1);
	assert_int_equal(n8->getProperties(0, &p8), ncclSuccess);
	assert_int_equal(p8.maxRecvs, 1);
	assert_int_equal(p8.netDeviceType, NCCL_NET_DEVICE_HOST);
	assert_int_equal(n10->init(NULL, NULL), ncclSuccess);
	assert_int_equal(n10->getProperties(0, &p9), ncclSuccess);
	assert_int_equal(p9.maxRecvs, 1);
	assert_true(p9.maxCollBytes > 0);
	assert_non_null(c8->iallreduce);
	assert_int_equal(c8->getProperties(0, &p8), ncclSuccess);
	assert_null(n8->getDeviceMr);
	assert_null(n8->irecvConsumed);
}

static void
test_tuner(void **state)
{
	ncclTuner_v5_t *t = dlsym(lib, "ncclTunerPlugin_v5");
	float table[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
	float *tp = &table[0][0];
	void *ctx = NULL;

	(void)state;
	assert_non_null(t);
	assert_int_equal(t->init(&ctx, 1, 4, 4, NULL, NULL, NULL), ncclSuccess);
	/* large: CollNet chain, simple, wins */
	for (int a = 0; a < NCCL_NUM_ALGORITHMS_V5; a++)
		for (int p = 0; p < NCCL_NUM_PROTOCOLS_V5; p++)
			table[a][p] = 100.0f;
	assert_int_equal(t->getCollInfo(ctx, ncclFuncAllReduce, 4u << 20, 1, (float **)tp,
					NCCL_NUM_ALGORITHMS_V5, NCCL_NUM_PROTOCOLS_V5, 0, NULL),
			 ncclSuccess);
	assert_true(table[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] == 0.0f);
	/* small: CollNet closed, the rest untouched */
	for (int a = 0; a < NCCL_NUM_ALGORITHMS_V5; a++)
		for (int p = 0; p < NCCL_NUM_PROTOCOLS_V5; p++)
			table[a][p] = 100.0f;
	assert_int_equal(t->getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, (float **)tp,
					NCCL_NUM_ALGORITHMS_V5, NCCL_NUM_PROTOCOLS_V5, 0, NULL),
			 ncclSuccess);
	assert_true(table[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] == NCCL_ALGO_PROTO_IGNORE);
	assert_true(table[NCCL_ALGO_COLLNET_DIRECT][NCCL_PROTO_LL] == NCCL_ALGO_PROTO_IGNORE);
	assert_true(table[NCCL_ALGO_RING][NCCL_PROTO_LL] == 100.0f);
	/* small, but only CollNet is open (NCCL_ALGO=allreduce:collnetchain): left alone */
	for (int a = 0; a < NCCL_NUM_ALGORITHMS_V5; a++)
		for (int p = 0; p < NCCL_NUM_PROTOCOLS_V5; p++)
			table[a][p] = NCCL_ALGO_PROTO_IGNORE;
	table[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] = 5.0f;
	assert_int_equal(t->getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, (float **)tp,
					NCCL_NUM_ALGORITHMS_V5, NCCL_NUM_PROTOCOLS_V5, 0, NULL),
			 ncclSuccess);
	assert_true(table[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] == 5.0f);
	/* other collectives: untouched */
	table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 7.0f;
	assert_int_equal(t->getCollInfo(ctx, ncclFuncAllGather, 4u << 20, 1, (float **)tp,
					NCCL_NUM_ALGORITHMS_V5, NCCL_NUM_PROTOCOLS_V5, 0, NULL),
			 ncclSuccess);
	assert_true(table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] == 7.0f);
	assert_int_equal(t->finalize(ctx), ncclSuccess);
}

static int
open_lib(void **state)
{
	char port[16];

	(void)state;
	/* the loopback device, and a switch address so that CollNet has a device */
	setenv("CAIS_IFNAME", "lo", 1);
	setenv("CAIS_SWITCH", "127.0.0.1", 1);
	setenv("CAIS_THRESHOLD", "1M", 1);
	/* the CollNet data ports of test_ports: away from other tests', and a run of
	 * them free now for UDP and TCP (a TCP port in TIME_WAIT after an earlier test
	 * would move the plugin on to the next block) */
	port_base = 40000 + (unsigned int)(getpid() % 1000) * NCCL_NET_HANDLE_MAXSIZE / 8;
	while (!ports_free(port_base, 4 * 4 + 4) && port_base < 60000)
		port_base += 4 * 4 + 4;
	snprintf(port, sizeof(port), "%u", port_base);
	setenv("CAIS_PORT", port, 1);
	lib = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		fprintf(stderr, "dlopen %s: %s\n", plugin_path, dlerror());
	return lib ? 0 : -1;
}

static int
close_lib(void **state)
{
	(void)state;
	return lib ? dlclose(lib) : 0;
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest layout[] = {
	    cmocka_unit_test(test_constants),	 cmocka_unit_test(test_structs),
	    cmocka_unit_test(test_net_tables),	 cmocka_unit_test(test_coll_tables),
	    cmocka_unit_test(test_tuner_tables),
	};
	const struct CMUnitTest library[] = {
	    cmocka_unit_test(test_exports),	    cmocka_unit_test(test_v11),
	    cmocka_unit_test(test_contexts),	    cmocka_unit_test(test_ports),
	    cmocka_unit_test(test_net_nonblocking), cmocka_unit_test(test_net_syn_lost),
	    cmocka_unit_test(test_old_versions),    cmocka_unit_test(test_tuner),
	};
	int rc;

	rc = cmocka_run_group_tests_name("nccl_abi_layout", layout, NULL, report_checks);
	if (argc < 2) {
		fprintf(stderr, "usage: %s libnccl-net-cais.so\n", argv[0]);
		return rc ? rc : 1;
	}
	plugin_path = argv[1];
	return rc + cmocka_run_group_tests_name("nccl_plugin", library, open_lib, close_lib);
}
