/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "ctl_auth.h"

int
ctl_key_load(const char *path, struct ctl_key *key)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	uint8_t extra;

	key->len = 0;
	if (fd < 0)
		return -errno;
	n = read(fd, key->bytes, sizeof(key->bytes));
	if (n > 0 && (size_t)n == sizeof(key->bytes) && read(fd, &extra, 1) == 1)
		n = -2; /* larger than CTL_MAX_KEY */
	close(fd);
	if (n < 0)
		return n == -2 ? -EINVAL : -EIO;
	if (n == 0)
		return -EINVAL;
	key->len = (size_t)n;
	return 0;
}

static void
hmac(const struct ctl_key *key, const void *data, size_t len, uint8_t out[32])
{
	unsigned int l = 32;

	HMAC(EVP_sha256(), key->bytes, (int)key->len, data, len, out, &l);
}

int
ctl_frame(const struct ctl_key *key, const char *json, size_t json_len, uint8_t *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t total = json_len + (key && key->len ? CTL_MAC_LINE : 0);
	uint8_t mac[32];
	uint8_t *p = out;

	if (total > cap || total > CTL_MAX_DGRAM)
		return -EMSGSIZE;
	if (key && key->len) {
		hmac(key, json, json_len, mac);
		memcpy(p, "mac ", 4);
		p += 4;
		for (int i = 0; i < 32; i++) {
			*p++ = (uint8_t)hex[mac[i] >> 4];
			*p++ = (uint8_t)hex[mac[i] & 15];
		}
		*p++ = '\n';
	}
	memcpy(p, json, json_len);
	return (int)total;
}

static int
unhex(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1; /* upper case is not the protocol's */
}

int
ctl_unframe(const struct ctl_key *key, const uint8_t *dgram, size_t len, const char **json,
	    size_t *json_len)
{
	uint8_t want[32], got[32];

	if (!key || key->len == 0) {
		*json = (const char *)dgram;
		*json_len = len;
		return 0;
	}
	if (len < CTL_MAC_LINE || memcmp(dgram, "mac ", 4) != 0 || dgram[CTL_MAC_LINE - 1] != '\n')
		return -EPERM;
	for (int i = 0; i < 32; i++) {
		int hi = unhex(dgram[4 + 2 * i]), lo = unhex(dgram[5 + 2 * i]);

		if (hi < 0 || lo < 0)
			return -EPERM;
		got[i] = (uint8_t)(hi << 4 | lo);
	}
	hmac(key, dgram + CTL_MAC_LINE, len - CTL_MAC_LINE, want);
	if (CRYPTO_memcmp(want, got, 32) != 0)
		return -EPERM;
	*json = (const char *)dgram + CTL_MAC_LINE;
	*json_len = len - CTL_MAC_LINE;
	return 0;
}

int64_t
ctl_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
