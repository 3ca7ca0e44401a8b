/*
 * kt_cli.h - running the built kiln command (KILN_CLI) from a test through
 * the shell, and reading its --json output: one home for what the cases
 * that drive whole kiln runs (tests/cli/test_cli_foz.c,
 * tests/reliability/test_recorded_state.c, tests/prep/test_stop.c and
 * test_isolate.c) each need.
 *
 * kt_cli.c is built into each test that uses it (a SOURCES entry, as
 * foz_writer.c), with that test's KILN_CLI and json-c. POSIX: system().
 * A helper whose precondition fails ends the case (KT_NEED), so every one
 * may be called from a helper of the case as from the case itself.
 */
#ifndef KILN_KT_CLI_H
#define KILN_KT_CLI_H

#include "kiln_test.h"

#include <json.h>
#include <stdint.h>

/* Runs `kiln ARGS` (ARGS as the shell reads them) with stdout in the file
 * `out` and stderr in `out`.err. A run other than `kiln import` (which
 * makes no Vulkan context) checks no leaks under AddressSanitizer.
 * @return the exit code, or 128 + the signal that ended it. */
int kt_cli_run(const char *out, const char *args);

/* @return the JSON object in file `path` (release with json_object_put);
 * without one, shows the head of `path` and `path`.err and ends the case. */
struct json_object *kt_cli_json(const char *path);

/* @return the number at a dotted path of `o` ("kinds.foz.graphics.built"),
 * or UINT64_MAX when it is missing. */
uint64_t kt_json_num(struct json_object *o, const char *dotted);

/* @return the integer member `key` of the JSON object in `text` (a run's
 * stdout), or -1 with a failure recorded when there is none. */
int64_t kt_json_text_int(const char *text, const char *key);

/* Ends the case as skipped (exit 77, `o` released) when the run whose
 * output is `o` found no Vulkan device ("error_step": "vulkan"; the
 * command's own line is in `out`.err). */
void kt_cli_require_vulkan(struct json_object *o, const char *out);

#endif /* KILN_KT_CLI_H */
