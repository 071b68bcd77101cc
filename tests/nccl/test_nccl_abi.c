/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The NCCL plugin ABI (agent/nccl/nccl_abi.h): sizes and offsets pinned to
 * NCCL's layouts (LP64), member for member; then the built library: the
 * tables it exports, their names and entry points, the properties of each
 * version, reduceSupport, and the tuner's choices on a cost table.
 *   test_nccl_abi PATH_TO_libnccl-net-cais.so
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/nccl/nccl_abi.h"

static const char *plugin_path;
static void *lib;

#define OFF(type, member, want) assert_int_equal(offsetof(type, member), want)
#define SZ(type, want)		assert_int_equal(sizeof(type), want)

static void
test_enums(void **state)
{
	(void)state;
	SZ(ncclResult_t, 4);
	SZ(ncclDataType_t, 4);
	SZ(ncclRedOp_t, 4);
	SZ(ncclNetDeviceType, 4);
	assert_int_equal(ncclInvalidUsage, 5);
	assert_int_equal(ncclFloat32, 7);
	assert_int_equal(ncclBfloat16, 9);
	assert_int_equal(ncclAvg, 4);
	assert_int_equal(ncclFuncAllReduce, 4);
	assert_int_equal(NCCL_NET_HANDLE_MAXSIZE, 128);
}

static void
test_properties(void **state)
{
	(void)state;
	SZ(ncclNetProperties_v6_t, 48);
	OFF(ncclNetProperties_v6_t, guid, 16);
	OFF(ncclNetProperties_v6_t, ptrSupport, 24);
	OFF(ncclNetProperties_v6_t, latency, 36);
	OFF(ncclNetProperties_v6_t, maxRecvs, 44);
	SZ(ncclNetProperties_v7_t, 56);
	OFF(ncclNetProperties_v7_t, netDeviceType, 48);
	OFF(ncclNetProperties_v7_t, netDeviceVersion, 52);
	SZ(ncclNetProperties_v8_t, 64);
	OFF(ncclNetProperties_v8_t, regIsGlobal, 28);
	OFF(ncclNetProperties_v8_t, speed, 32);
	OFF(ncclNetProperties_v8_t, netDeviceVersion, 56);
	SZ(ncclNetProperties_v9_t, 104);
	OFF(ncclNetProperties_v9_t, forceFlush, 32);
	OFF(ncclNetProperties_v9_t, speed, 36);
	OFF(ncclNetProperties_v9_t, netDeviceType, 56);
	OFF(ncclNetProperties_v9_t, vProps, 64);
	OFF(ncclNetProperties_v9_t, maxP2pBytes, 88);
	OFF(ncclNetProperties_v9_t, maxCollBytes, 96);
	SZ(ncclNetProperties_v11_t, 112);
	OFF(ncclNetProperties_v11_t, maxMultiRequestSize, 104);
	SZ(ncclNetVDeviceProps_t, 20);
	SZ(ncclNetDeviceHandle_t, 32);
	OFF(ncclNetDeviceHandle_t, handle, 8);
	OFF(ncclNetDeviceHandle_t, size, 16);
	OFF(ncclNetDeviceHandle_t, needsProxyProgress, 24);
	SZ(ncclNetCommConfig_t, 4);
	SZ(ncclNetAttr_v11_t, 44);
	OFF(ncclNetAttr_v11_t, op, 32);
	SZ(ncclNetSGE_v8_t, 24);
	SZ(ncclNetSGE_v9_t, 24);
	OFF(ncclNetSGE_v9_t, size, 16);
}

static void
test_tables(void **state)
{
	(void)state;
	SZ(ncclNet_v6_t, 17 * 8);
	SZ(ncclNet_v7_t, 19 * 8);
	SZ(ncclNet_v8_t, 19 * 8);
	SZ(ncclNet_v9_t, 20 * 8);
	SZ(ncclNet_v10_t, 20 * 8);
	SZ(ncclNet_v11_t, 22 * 8);
	OFF(ncclNet_v11_t, isend, 10 * 8);
	OFF(ncclNet_v11_t, test, 13 * 8);
	OFF(ncclNet_v11_t, makeVDevice, 19 * 8);
	OFF(ncclNet_v11_t, finalize, 20 * 8);
	OFF(ncclNet_v11_t, setNetAttr, 21 * 8);
	SZ(ncclCollNet_v6_t, 15 * 8);
	SZ(ncclCollNet_v7_t, 15 * 8);
	SZ(ncclCollNet_v8_t, 17 * 8);
	SZ(ncclCollNet_v9_t, 18 * 8);
	SZ(ncclCollNet_v10_t, 18 * 8);
	SZ(ncclCollNet_v11_t, 19 * 8);
	OFF(ncclCollNet_v11_t, iallreduce, 10 * 8);
	OFF(ncclCollNet_v11_t, iflush, 13 * 8);
	OFF(ncclCollNet_v11_t, test, 14 * 8);
	OFF(ncclCollNet_v11_t, closeListen, 16 * 8);
	OFF(ncclCollNet_v11_t, finalize, 18 * 8);
	OFF(ncclCollNet_v6_t, iflush, 11 * 8);
	SZ(ncclTuner_v4_t, 32);
	SZ(ncclTuner_v5_t, 32);
	SZ(ncclNvlDomainInfo_v5_t, 12);
	SZ(ncclTunerConstants_v5_t, (21 + 63 + 5 * 12) * 8);
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
	for (int dt = 0; dt < ncclNumTypes; dt++)
		for (int op = 0; op < ncclNumOps; op++) {
			bool want = (dt == ncclInt32 || dt == ncclFloat16 || dt == ncclFloat32 ||
				     dt == ncclBfloat16) &&
				    op != ncclProd;

			assert_int_equal(coll->reduceSupport(dt, op, &sup), ncclSuccess);
			assert_int_equal(sup, want);
		}
	assert_null(coll->iallgather);
	assert_null(coll->ireducescatter);
	assert_int_equal(coll->finalize(cctx), ncclSuccess);
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
	(void)state;
	/* the loopback device, and a switch address so that CollNet has a device */
	setenv("CAIS_IFNAME", "lo", 1);
	setenv("CAIS_SWITCH", "127.0.0.1", 1);
	setenv("CAIS_THRESHOLD", "1M", 1);
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
	    cmocka_unit_test(test_enums),
	    cmocka_unit_test(test_properties),
	    cmocka_unit_test(test_tables),
	};
	const struct CMUnitTest library[] = {
	    cmocka_unit_test(test_exports),
	    cmocka_unit_test(test_v11),
	    cmocka_unit_test(test_old_versions),
	    cmocka_unit_test(test_tuner),
	};
	int rc;

	rc = cmocka_run_group_tests_name("nccl_abi_layout", layout, NULL, NULL);
	if (argc < 2) {
		fprintf(stderr, "usage: %s libnccl-net-cais.so\n", argv[0]);
		return rc ? rc : 1;
	}
	plugin_path = argv[1];
	return rc + cmocka_run_group_tests_name("nccl_plugin", library, open_lib, close_lib);
}
