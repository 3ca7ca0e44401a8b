/*
 * bench_child.h - what the benchmarks share: the --threads list, the
 * generated archive, and one measurement run in a forked child process
 * that reports a fixed-size result through a pipe (bench_child_unix.c;
 * bench_child_win.c says there is no fork).
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

/*
 * Resets this process's resident high-water mark to its resident set now
 * (Linux 4.0 and later: "5" written to /proc/self/clear_refs), so a
 * child's peak is its own and not its parent's. @return whether it did
 * (false where there is no such file).
 */
bool bench_child_reset_peak(void);

/* This process's peak resident bytes: VmHWM when `reset` (the mark was
 * reset by bench_child_reset_peak), else, or when it cannot be read,
 * kiln_peak_rss_bytes (getrusage). */
uint64_t bench_child_peak_rss(bool reset);

/* Turns the drivers' disk caches off in this (child) process, so every
 * pipeline build in it compiles. */
void bench_child_no_disk_cache(void);

/* The rest is POSIX only (bench_child_unix.c): only the benchmarks that
 * measure in forked children use it, and they are not in the Windows
 * build (bench_fork_win.c). */

/*
 * Makes a measurement's Vulkan context: its VkPipelineCache in memory only
 * and empty, with the extensions kiln's own context has for Fossilize
 * graphics closures, and the ray-tracing set only when `raytracing` (the
 * driver can hold much memory for it, which would count in every peak).
 * @return 0 and the context in *out, or kiln_vk_create's error.
 */
int bench_child_vk(bool use_device, unsigned device, bool raytracing, struct kiln_vk **out);

/*
 * Makes a private temporary folder "$TMPDIR/kiln-TAG-XXXXXX" (mkdtemp)
 * into buf. @return 0, or KILN_EIO after one error line.
 */
int bench_tmpdir(const char *name, const char *tag, char *buf, size_t cap);

/*
 * Generates `count` programs of kiln's generator (GLSL, kiln's GLSL
 * translator), prepares them without Vulkan into "TMP/generated" and
 * exports that cache as one Fossilize archive (kiln_foz_export) at `keep`,
 * or at "TMP/generated-COUNT.foz" (removed with the folder), so any
 * replayer can be given the same set (`kiln bench replay`, `kiln bench
 * peer`). @return 0 with the archive's path in `archive`, or the error,
 * reported in one line naming `name`.
 */
int bench_generated_archive(const char *name, const char *tmp, uint32_t count, uint64_t seed,
                            const char *keep, char *archive, size_t cap);

/* Removes a folder bench_tmpdir made and what the run wrote in it.
 * @return 0, or -1 with errno set. */
int bench_remove_tree(const char *dir);

#endif /* KILN_BENCH_CHILD_H */
