/* SPDX-License-Identifier: BSD-3-Clause */
/* The API's names and error texts (cais.h). */
#include <errno.h>
#include <string.h>

#include <cais/cais.h>

#define CAIS_X_TEXT(name, text) text,
static const char *const fallback_names[] = {CAIS_FALLBACKS(CAIS_X_TEXT)};
#undef CAIS_X_TEXT

const char *
cais_fallback_name(enum cais_fallback fb)
{
	return (unsigned int)fb < CAIS_FB_COUNT ? fallback_names[fb] : "?";
}

const char *
cais_datatype_name(enum cais_datatype dt)
{
	static const char *const n[] = {"f32", "bf16", "f16", "i32"};

	return (unsigned int)dt < 4 ? n[dt] : "?";
}

const char *
cais_redop_name(enum cais_redop op)
{
	return cais_op_name(op);
}

const char *
cais_path_name(enum cais_path p)
{
	static const char *const n[] = {"auto", "switch", "ring"};

	return (unsigned int)p < 3 ? n[p] : "?";
}

size_t
cais_datatype_size(enum cais_datatype dt)
{
	switch (dt) {
	case CAIS_FLOAT32:
	case CAIS_INT32:
		return 4;
	case CAIS_BFLOAT16:
	case CAIS_FLOAT16:
		return 2;
	}
	return 0;
}

const char *
cais_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EINVAL:
		return "invalid argument";
	case ENOMEM:
		return "out of memory";
	case ETIMEDOUT:
		return "the collective did not complete within the configured bound (timeout_ms)";
	case ECONNREFUSED:
		return "the switch cannot serve this collective and the path is switch-only";
	case ECANCELED:
		return "the communicator was destroyed before the collective completed";
	case EPROTO:
		return "a peer broke the agent protocol (mismatched collectives across ranks?)";
	case ENETDOWN:
		return "network error on the data network";
	case EADDRINUSE:
		return "this rank's data address (UDP or TCP port) is already in use";
	case EADDRNOTAVAIL:
		return "this rank's data address is not an address of this host";
	case EMSGSIZE:
		return "elems_per_packet does not fit the MTU of the route to the switch";
	default:
		return strerror(err);
	}
}
