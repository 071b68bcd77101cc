/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Errors of the control protocol (docs/PROTOCOL.md section 4): an errno
 * code and a message naming the field or the reason, as every control
 * request's reply carries them. Shared by both ends: the clients
 * (ctl_client.h) read them from replies, the servers (ctl.h,
 * ctl_endpoint.h, cais-manager) fill them in.
 */
#ifndef CTL_ERR_H
#define CTL_ERR_H

/** The protocol's error codes (errno values); a reply names one of them. */
#define CTL_ERRORS(X)                                                                              \
	X(EINVAL)                                                                                  \
	X(ENOENT)                                                                                  \
	X(EEXIST)                                                                                  \
	X(ENOSPC)                                                                                  \
	X(EPERM)                                                                                   \
	X(EBUSY)

/** An error: its errno code and a message naming the field or the reason. */
struct ctl_err {
	int code; /**< positive errno value, 0 when none */
	char msg[256];
};

/**
 * Record an error.
 * @param err  may be NULL (then only the code is returned)
 * @param code an errno value, either sign
 * @return -code, so that `return ctl_fail(err, EINVAL, "...")` reads well
 */
int ctl_fail(struct ctl_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * The name a reply gives a code: the CTL_ERRORS names; ENOMEM is ENOSPC,
 * ETIMEDOUT, ECONNREFUSED and EPROTO (something the server depends on is
 * not there) are EBUSY.
 * @return "EINVAL", ... for a code (either sign); "EINVAL" for any other
 */
const char *ctl_errname(int code);

#endif /* CTL_ERR_H */
