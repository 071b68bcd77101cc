/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * IPv4 socket addresses as text, "A.B.C.D[:PORT]": the one parser of every
 * command line, configuration file and environment variable of CAIS.
 */
#ifndef CMN_ADDR_H
#define CMN_ADDR_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

/**
 * Parse "A.B.C.D[:PORT]" (dotted quad, port 1..65535 in decimal).
 * @param s            the text
 * @param default_port the port when s has none (host order); 0: a port is required
 * @param out          the address (AF_INET); zeroed first
 * @return 0; -EINVAL (NULL, empty, not an IPv4 address, a port that is not
 *         1..65535 or has trailing characters, no port where one is required)
 */
int cmn_parse_addr(const char *s, uint16_t default_port, struct sockaddr_in *out);

/** Format an address as "A.B.C.D:PORT" into buf (at least CMN_ADDR_TEXT bytes). @return buf */
#define CMN_ADDR_TEXT 22
char *cmn_format_addr(const struct sockaddr_in *a, char *buf, size_t len);

#endif /* CMN_ADDR_H */
