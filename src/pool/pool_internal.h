/*
 * pool_internal.h - the pool module's private parsers, shared by the probe,
 * the tests and the fuzz target. Each takes the bytes of a whole file (not
 * NUL-terminated) and never reads past `n`.
 */
#ifndef KILN_POOL_INTERNAL_H
#define KILN_POOL_INTERNAL_H

#include "kiln/pool.h"

/*
 * Parses a cgroup v2 cpu.max: "<quota|max> <period>\n".
 * @return 0 with *quota_us = 0 for "max" (no quota), or KILN_EPARSE.
 */
int kiln__pool_parse_cpu_max(const char *text, size_t n, uint64_t *quota_us, uint64_t *period_us);

/*
 * Finds "MemAvailable: <n> kB" in /proc/meminfo text.
 * @return 0 with the value in bytes, KILN_ENOTFOUND when there is no such
 * line (kernels before 3.14), or KILN_EPARSE for a malformed one.
 */
int kiln__pool_parse_meminfo(const char *text, size_t n, uint64_t *bytes);

/* The first line of `text` that starts with `key` ("Pss:", "MemAvailable:"),
 * as /proc/meminfo and /proc/<pid>/smaps_rollup write it ("<key> <n> kB"),
 * in bytes. @return 0, KILN_ENOTFOUND (no such line) or KILN_EPARSE. */
int kiln__pool_parse_kb_line(const char *text, size_t n, const char *key, uint64_t *bytes);

/*
 * Finds the cgroup v2 line ("0::/path") of /proc/self/cgroup and copies the
 * path (starting with '/') into `path`.
 * @return 0, KILN_ENOTFOUND when there is no v2 line (cgroup v1 only),
 * KILN_ERANGE when the path does not fit, or KILN_EPARSE for a malformed
 * file or a path with "." or ".." parts (outside this namespace's mount).
 */
int kiln__pool_parse_cgroup(const char *text, size_t n, char *path, size_t cap);

/*
 * Parses a cgroup v2 memory.max: "max" (no limit: *bytes = 0) or a byte
 * count, then optional blanks and newline.
 * @return 0 or KILN_EPARSE.
 */
int kiln__pool_parse_memory_max(const char *text, size_t n, uint64_t *bytes);

/*
 * Parses /proc/<pid>/statm ("size resident shared ..." in pages) into the
 * resident bytes (resident x page_size).
 * @return 0 or KILN_EPARSE.
 */
int kiln__pool_parse_statm(const char *text, size_t n, uint64_t page_size, uint64_t *bytes);

/*
 * The resident bytes of process `pid` (0: this process), or 0 when it
 * cannot be read (gone, another platform). Platform file.
 */
uint64_t kiln__pool_rss_of(long pid);

/*
 * The proportional set size of process `pid` (0: this process): Pss of
 * /proc/<pid>/smaps_rollup (Linux 4.14 and later), where a page shared by
 * several processes counts a share in each. 0 when it cannot be read (no
 * such file, Windows). Costly (the kernel walks the page tables): the
 * budget reads it at most every KILN__PSS_REFRESH_NS per process and
 * follows the cheap resident count between reads. Platform file.
 */
uint64_t kiln__pool_pss_of(long pid);
#define KILN__PSS_REFRESH_NS 50000000ull

/*
 * The tightest cgroup v2 memory.max from this process's cgroup up to the
 * root, under `proc_root` / `cgroup_root` (NULL: the real ones).
 * @return 0 with the bytes (0: no limit), or KILN_ENOTSUP where there are
 * no cgroups. Platform file.
 */
int kiln__pool_memory_max(const char *proc_root, const char *cgroup_root, uint64_t *bytes);

/* Gives the heap's free memory back to the system (glibc malloc_trim,
 * only where glibc's malloc is the process's; nothing elsewhere), so what
 * finished jobs freed is not counted against the next phase's budget.
 * @return whether it trimmed. Platform file. */
bool kiln__pool_trim_heap(void);

/* The platform's probe (pool_unix.c / pool_win.c) into a zeroed machine of
 * the library's own; kiln_pool_probe (pool_size.c) hands it to the caller. */
int kiln__pool_probe(const char *proc_root, const char *cgroup_root, struct kiln_pool_machine *m);

/*
 * Tells the Windows heap kind from the first `n` bytes of a heap's header
 * (the 32-bit signature at offset 0x10: 0xFFEEFFEE NT heap, 0xDDEEDDEE
 * segment heap). *signature (when not NULL) gets the word read.
 * @return 0 with *kind KILN_HEAP_NT or KILN_HEAP_SEGMENT; KILN_ENOTFOUND
 * (*kind KILN_HEAP_DEFAULT) for any other signature; KILN_EINVAL when the
 * header is shorter than 0x14 bytes. Pure; portable, for tests.
 */
int kiln__pool_heap_kind(const void *header, size_t n, enum kiln_heap_kind *kind,
                         uint32_t *signature);

/*
 * Reads the kind of this process's heap (GetProcessHeap()) with
 * kiln__pool_heap_kind(); same returns. Windows only (pool_win.c).
 */
int kiln__pool_process_heap_kind(enum kiln_heap_kind *kind, uint32_t *signature);

/* ---- the memory budget (budget.c), as the pool's workers use it ---------- */

/* One pool's budget. Every field is guarded by the pool's lock. */
struct kiln__budget {
    uint64_t limit;    /* bytes; 0: none */
    uint64_t base;     /* counted bytes no job accounts for (see budget.c) */
    uint64_t growth;   /* the most one job was seen to add; 0 until a job finished */
    unsigned nworkers; /* the arrays' length */
    uint64_t *start;   /* per worker: resident bytes when its job started */
    uint64_t *peak;    /* per worker: the most resident bytes seen during its job */
    bool *busy;        /* per worker: runs a job */
    bool *shared;      /* per worker: another job ran at some time during its job */
    bool logged;       /* the first hold was logged */
    /* With a memory model (kiln_pool_options.memory_model): */
    bool has_model;
    struct kiln_pool_memory_model model;
    uint64_t *pred;     /* per worker: what its job was predicted to need */
    uint64_t *seen;     /* per worker: the most of the reading its job was given */
    uint64_t committed; /* the predictions of the running jobs, summed */
};

/* Makes the per-worker arrays; `model` may be NULL (copied). @return 0 or
 * KILN_ENOMEM. */
int kiln__budget_init(struct kiln__budget *b, uint64_t limit, unsigned workers,
                      const struct kiln_pool_memory_model *model);

/* Frees them. */
void kiln__budget_free(struct kiln__budget *b);

/* Notes a reading of resident memory: the peak of every running job, and
 * with a model each running job's share of it. */
void kiln__budget_sample(struct kiln__budget *b, uint64_t rss);

/* What the next job (argument `arg`) is expected to need: the model's
 * prediction, or without one (or when it says 0) the largest growth seen. */
uint64_t kiln__budget_need(const struct kiln__budget *b, void *arg);

/*
 * Whether a worker should hold back from taking a job that needs `need`
 * bytes while `running` jobs run and `rss` bytes are resident: when it
 * would pass the limit by the reading (rss + need) or by the model,
 * whichever is larger: without a memory model base + need x (running + 1),
 * with one base + what the running jobs hold (each the larger of its
 * prediction and the share it was seen to grow so far) + need. The model
 * covers jobs that started but have not grown yet. Logs the first hold once.
 */
bool kiln__budget_hold(struct kiln__budget *b, unsigned running, uint64_t rss, uint64_t need);

/* A job that needs `need` bytes starts on `worker` with `rss` bytes
 * resident. */
void kiln__budget_start(struct kiln__budget *b, unsigned worker, uint64_t rss, uint64_t need);

/* The job on `worker` ends with `rss` bytes resident; `*predicted` and
 * `*grown` get what it was predicted and what it was seen to need (for
 * kiln_pool_memory_model.observe). */
void kiln__budget_end(struct kiln__budget *b, unsigned worker, uint64_t rss, uint64_t *predicted,
                      uint64_t *grown);

#endif /* KILN_POOL_INTERNAL_H */
