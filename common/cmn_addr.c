/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "cmn_addr.h"

int
cmn_parse_addr(const char *s, uint16_t default_port, struct sockaddr_in *out)
{
	char host[INET_ADDRSTRLEN];
	const char *colon;
	size_t hl;
	unsigned long port = default_port;

	memset(out, 0, sizeof(*out));
	if (!s)
		return -EINVAL;
	colon = strchr(s, ':');
	hl = colon ? (size_t)(colon - s) : strlen(s);
	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (colon) {
		char *end;

		/* digits only: strtoul would take a sign or leading blanks */
		if (colon[1] < '0' || colon[1] > '9')
			return -EINVAL;
		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (errno || *end || port == 0 || port > 65535)
			return -EINVAL;
	} else if (port == 0) {
		return -EINVAL;
	}
	if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
		return -EINVAL;
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	return 0;
}

char *
cmn_format_addr(const struct sockaddr_in *a, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u", ip, (unsigned int)ntohs(a->sin_port));
	return buf;
}
