/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais-mgr-call: one control request (PROTOCOL.md section 4 framing; the
 * switch's commands or cais-manager's of E3) for the integration tests.
 *
 *   cais-mgr-call ADDR:PORT [--key FILE] [--timeout MS] [--get PATH] CMD [ARGS_JSON]
 *
 * Prints the result (compact JSON), or with --get a.b.0.c the value there
 * (strings unquoted); exit 0. An error reply prints "CODE: message" and
 * exits 1; no reply (or a bad command line) exits 2. A request refused for
 * its ts (another client of the endpoint sent a newer one in the same
 * millisecond) is sent again with a fresh ts, a few times.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmn_addr.h"
#include "ctl_client.h"

static const json_t *
walk(const json_t *v, const char *path)
{
	char buf[256], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save)) {
		char *end;
		long i = strtol(tok, &end, 10);

		v = json_is_array(v) && !*end ? json_array_get(v, (size_t)i)
					      : json_object_get(v, tok);
	}
	return v;
}

int
main(int argc, char **argv)
{
	static struct ctl_key key;
	const char *get = NULL, *cmd, *args_text = NULL;
	struct sockaddr_in addr;
	struct ctl_err err = {0};
	json_t *args = NULL, *res = NULL;
	int timeout = 3000, i = 2, rc;

	if (argc < 3 || cmn_parse_addr(argv[1], 0, &addr) != 0 || !addr.sin_port) {
		fprintf(stderr,
			"usage: %s ADDR:PORT [--key FILE] [--timeout MS] [--get PATH] CMD "
			"[ARGS_JSON]\n",
			argv[0]);
		return 2;
	}
	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		if (strcmp(argv[i], "--key") == 0 && ctl_key_load(argv[i + 1], &key) == 0)
			continue;
		if (strcmp(argv[i], "--timeout") == 0 && (timeout = atoi(argv[i + 1])) > 0)
			continue;
		if (strcmp(argv[i], "--get") == 0) {
			get = argv[i + 1];
			continue;
		}
		fprintf(stderr, "%s: bad option %s %s\n", argv[0], argv[i], argv[i + 1]);
		return 2;
	}
	if (i >= argc) {
		fprintf(stderr, "%s: no command\n", argv[0]);
		return 2;
	}
	cmd = argv[i++];
	if (i < argc)
		args_text = argv[i++];
	if (args_text) {
		json_error_t je;

		if (!(args = json_loads(args_text, 0, &je))) {
			fprintf(stderr, "%s: ARGS_JSON: %s\n", argv[0], je.text);
			return 2;
		}
	}
	for (int tries = 0;; tries++) {
		rc = ctl_call(&addr, &key, cmd, args, timeout, &res, &err);
		if (rc != -EPERM || !strstr(err.msg, "'ts'") || tries == 5)
			break;
		usleep(3000);
	}
	json_decref(args);
	if (rc) {
		printf("%s: %s\n", rc == -ETIMEDOUT ? "ETIMEDOUT" : ctl_errname(rc), err.msg);
		return rc == -ETIMEDOUT ? 2 : 1;
	}
	if (get) {
		const json_t *v = walk(res, get);

		if (json_is_string(v))
			printf("%s\n", json_string_value(v));
		else if (v) {
			char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

			printf("%s\n", s);
			free(s);
		} else {
			printf("null\n");
		}
	} else {
		char *s = json_dumps(res, JSON_COMPACT);

		printf("%s\n", s);
		free(s);
	}
	json_decref(res);
	return 0;
}
