/*
 * bench_child.h - what `kiln bench prepare` and `kiln bench replay` share:
 * the --threads list, and one measurement run in a forked child process
 * that reports a fixed-size result through a pipe.
 */
#ifndef KILN_BENCH_CHILD_H
#define KILN_BENCH_CHILD_H

#include "cli.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most thread counts one --threads list holds. */
#define BENCH_MAX_RUNS 32

/*
 * Parses "--threads LIST": comma-separated counts in 1..1024, at most
 * BENCH_MAX_RUNS of them, into list[0..*n). @return 0, or prints one usage
 * line naming the flag and returns KILN_EXIT_USAGE.
 */
int bench_parse_threads(const char *name, const char *text, unsigned *list, unsigned *n);

/* Writes the "threads" array of a report: the counts in `list`. */
void bench_json_threads(struct cli_json *j, const unsigned *list, unsigned n);

/* One measurement: fills `result` (bench_child_run's `size` bytes). */
typedef void (*bench_child_fn)(void *arg, void *result);

/*
 * Runs fn(arg, result) in a child process of its own (fork) and copies the
 * child's `size` bytes of result back into `result`. The child ends with
 * _exit after writing, so no atexit work or driver teardown runs there.
 * `what` names the child in the error line ("a measuring process").
 * @return 0 with the whole result read, or KILN_EIO after one error line:
 * pipe or fork failed, or the child died before reporting; KILN_ENOTSUP
 * after one line where there is no fork (Windows).
 */
int bench_child_run(const char *name, const char *what, bench_child_fn fn, void *arg, void *result,
                    size_t size);

/* Resets this process's resident high-water mark to its resident set now
 * (/proc/self/clear_refs, Linux 4.0 and later;
 * false elsewhere). @return whether it did. */
bool bench_child_reset_peak(void);

/* @return the field `key` ("VmHWM:") of /proc/self/status in bytes, or 0 (0 also
 * where there is no /proc). */
uint64_t bench_child_status_bytes(const char *key);

#ifndef _WIN32

/* Turns the drivers' disk caches off in this (child) process, so every
 * pipeline build in it compiles. */
void bench_child_no_disk_cache(void);

#endif /* !_WIN32 */

#endif /* KILN_BENCH_CHILD_H */
