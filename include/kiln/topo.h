/*
 * kiln/topo.h - CPU cache topology, and pinning to the CPUs that share the
 * largest last-level cache.
 *
 * Why: on a part whose dies carry last-level caches of different sizes (an
 * AMD 9950X3D: 96 MB on one die, 32 MB on the other) a recompiler pinned to
 * the larger cache runs faster and steadier; on a part whose dies are alike
 * (a 5900X: 32 MB each) the same pinning only halves the usable cores. So
 * kiln pins only when one last-level domain really is larger, and only when
 * the caller opts in (see kiln_affinity_decide()).
 *
 * The flow: kiln_topo_read() reads the cache domains from sysfs,
 * kiln_topo_allowed() says which CPUs this process may use,
 * kiln_topo_choose() turns both into a kiln_pin_plan, and
 * kiln_process_set_affinity() applies it to every thread.
 * kiln_pin_largest_cache() does all four.
 *
 * NULL arguments (0.2): a NULL set, text of len > 0, output, topology or
 * decision is KILN_EINVAL (assertions before); the queries read a NULL set
 * as empty (kiln_cpuset_has false, _count 0, _next -1, _format ""), and
 * kiln_cpuset_format with a NULL buffer only returns the length it needs.
 */
#ifndef KILN_TOPO_H
#define KILN_TOPO_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * CPU sets
 *
 * Thread safety for this section: a CPU set is a plain value. Any number of
 * threads may read one set at once (has, count, next, format, or as the
 * source of a copy); a call that writes a set (parse, copy into it, free)
 * must be the only one using that set.
 * ------------------------------------------------------------------------ */

/* The highest CPU number + 1 kiln accepts from any input. */
#define KILN_TOPO_MAX_CPUS 65536u

/*
 * A set of CPU numbers of any size (more than 1024 CPUs work): bit (c % 64)
 * of words[c / 64] is CPU c. A zeroed struct is the empty set and needs no
 * free; any other set owns `words` and is released with kiln_cpuset_free().
 */
struct kiln_cpuset {
    uint64_t *words;
    uint32_t nwords;
};

/*
 * Parses a Linux CPU list ("0-7,16-23", a trailing newline allowed; empty
 * text is the empty set) into *set, which must be zeroed or freed before.
 * @return 0; KILN_EPARSE for malformed text ("0-", "5-3", "a", "1,,2");
 * KILN_ERANGE for a CPU at or over KILN_TOPO_MAX_CPUS; KILN_ENOMEM. On
 * failure *set is left empty. Thread-safe.
 */
KILN_API int kiln_cpuset_parse_list(struct kiln_cpuset *set, const char *text, size_t len);

/*
 * Parses a Linux CPU mask ("00000000,0000ff0f": comma-separated groups of up
 * to 8 hex digits, most significant first) into *set. Same contract and
 * returns as kiln_cpuset_parse_list(). Thread-safe.
 */
KILN_API int kiln_cpuset_parse_mask(struct kiln_cpuset *set, const char *text, size_t len);

/*
 * Makes *dst (zeroed or freed before) a copy of *src.
 * @return 0 or KILN_ENOMEM (then *dst is empty). Thread-safe, with no other
 * thread writing *src or using *dst.
 */
KILN_API int kiln_cpuset_copy(struct kiln_cpuset *dst, const struct kiln_cpuset *src);

/* Frees the words of *set and leaves it empty. NULL is a no-op.
 * Thread safety: no other thread may use the set meanwhile. */
KILN_API void kiln_cpuset_free(struct kiln_cpuset *set);

/* @return whether `cpu` is in the set. Thread-safe (reads only). */
KILN_API bool kiln_cpuset_has(const struct kiln_cpuset *set, uint32_t cpu);

/* @return the number of CPUs in the set. Thread-safe (reads only). */
KILN_API uint32_t kiln_cpuset_count(const struct kiln_cpuset *set);

/* @return the lowest CPU in the set that is >= `from`, or -1 when none.
 * Thread-safe (reads only). */
KILN_API int64_t kiln_cpuset_next(const struct kiln_cpuset *set, uint32_t from);

/*
 * Writes the set as a CPU list ("0-7,16-23"; "" for the empty set) into buf,
 * always NUL-terminated when cap > 0.
 * @return the length the whole list needs (without the NUL), like snprintf.
 * Thread-safe (reads only the set).
 */
KILN_API size_t kiln_cpuset_format(const struct kiln_cpuset *set, char *buf, size_t cap);

/* ---------------------------------------------------------------------------
 * Topology
 * ------------------------------------------------------------------------ */

enum kiln_cpu_cache_type {
    KILN_CPU_CACHE_DATA = 1,
    KILN_CPU_CACHE_INSTRUCTION = 2,
    KILN_CPU_CACHE_UNIFIED = 3,
};

/* @return "data", "instruction", "unified" or "?" (a static string).
 * Thread-safe. */
KILN_API const char *kiln_cpu_cache_type_name(enum kiln_cpu_cache_type type);

/*
 * Parses a sysfs cache size ("32K", "32768K", "96M", "1G", or bare bytes; a
 * trailing newline allowed) into bytes.
 * @return 0, KILN_EPARSE for malformed text, KILN_ERANGE on overflow.
 * Thread-safe (pure).
 */
KILN_API int kiln_topo_parse_size(const char *text, size_t len, uint64_t *bytes);

/* One cache and the online CPUs that share it. */
struct kiln_cpu_cache_domain {
    uint32_t level;                /* from the cache's `level` file */
    enum kiln_cpu_cache_type type; /* from its `type` file */
    uint64_t size;                 /* bytes */
    int64_t id;                    /* its `id` file, -1 when the kernel gives none */
    struct kiln_cpuset cpus;       /* the online CPUs that share it (never empty) */
};

/* Flags for kiln_topo_read(). */
enum {
    /*
     * Read every cache level. Without it only each CPU's last-level caches
     * are read: all that choosing needs, and far fewer files.
     */
    KILN_TOPO_ALL_LEVELS = 1 << 0,
};

/*
 * What kiln_topo_read() found. Read-only for the caller; free it with
 * kiln_topo_free().
 */
struct kiln_topo {
    struct kiln_cpuset online;             /* the online CPUs */
    struct kiln_cpu_cache_domain *domains; /* sorted by level, type, lowest CPU */
    size_t ndomains;
    uint32_t last_level; /* the highest level with a data or unified cache; 0: none */
    int64_t largest;     /* index of the largest last-level domain; -1: none */
    bool all_levels;     /* whether KILN_TOPO_ALL_LEVELS was given */
    uint32_t files_read; /* how many sysfs files were read (for benchmarks) */
    char note[256];      /* when there are no domains: why, in one sentence */
};

/*
 * Reads the cache topology under `sysfs_root` (NULL: the platform's own;
 * on Linux "/sys/devices/system/cpu", a parameter so that tests use fixture
 * trees). It reads `cache/index*` of every online CPU: `level`, `type`,
 * `size`, `shared_cpu_list` (`shared_cpu_map` when the list is missing) and
 * `id`. A cache is read whole through the lowest online CPU that shares it;
 * every other CPU that shares it reads its own entry for it and must list
 * the same online CPUs (in the all-levels read, also the same size), or the
 * read fails naming that CPU's file. Without KILN_TOPO_ALL_LEVELS a CPU
 * already inside a known last-level domain checks that entry only (caches
 * nest). Offline CPUs are left out of every domain.
 *
 * On success *out holds the topology; a tree with no cache entries at all
 * (common in virtual machines) is a success with ndomains 0 and a `note`.
 * Malformed or unreadable input is never half-used: *out is NULL, one error
 * is logged that names the file, and the code is returned.
 * @return 0, KILN_EPARSE (malformed text), an I/O code naming the failed
 * step, or KILN_ENOMEM. Thread-safe.
 */
KILN_API int kiln_topo_read(const char *sysfs_root, unsigned flags, struct kiln_topo **out);

/* Frees a topology. NULL is a no-op. Thread safety: no other thread may
 * use the topology during or after the call. */
KILN_API void kiln_topo_free(struct kiln_topo *topo);

/*
 * Where kiln looks at the running system. NULL fields mean the real system;
 * tests point them at fixture trees.
 */
struct kiln_topo_env {
    size_t size;             /* sizeof, as KILN_TOPO_ENV_INIT sets it (docs/abi.md) */
    const char *sysfs_root;  /* as for kiln_topo_read() */
    const char *proc_root;   /* "/proc": self/cgroup, self/mountinfo, self/task */
    const char *cgroup_root; /* the cgroup v2 mount; NULL: found in mountinfo */
    /* The process's affinity; NULL: sched_getaffinity() of this process. */
    const struct kiln_cpuset *affinity;
};
#define KILN_TOPO_ENV_INIT KILN_STRUCT_INIT(kiln_topo_env)

/*
 * The CPUs this process may use: its affinity mask (sched_getaffinity,
 * grown past 1024 CPUs as needed) intersected with its cgroup v2
 * `cpuset.cpus.effective` (the nearest one up the cgroup's path; none
 * means no limit). *out must be zeroed or freed before.
 * @return 0, or the error (logged with the file or call that failed);
 * KILN_ENOTSUP where the platform has no affinity. Thread-safe.
 */
KILN_API int kiln_topo_allowed(const struct kiln_topo_env *env, struct kiln_cpuset *out);

/* What kiln_topo_choose() decided. */
enum kiln_pin_verdict {
    KILN_PIN_APPLY = 0,        /* pin to plan.cpus */
    KILN_PIN_NO_CACHES = 1,    /* the system reports no caches: nothing to choose */
    KILN_PIN_NO_CANDIDATE = 2, /* no allowed CPU has a known last-level cache */
    KILN_PIN_SYMMETRIC = 3,    /* every usable last-level domain is the same size */
    KILN_PIN_ALREADY = 4,      /* the process may use only the chosen domain already */
    KILN_PIN_OFF = 5,          /* pinning was not asked for (kiln_affinity_apply()) */
    KILN_PIN_FAILED = 6,       /* reading the system or pinning failed (see reason) */
};

/*
 * @return "apply", "no-caches", "no-candidate", "symmetric", "already",
 * "off", "failed" or "?" (a static string). Thread-safe.
 */
KILN_API const char *kiln_pin_verdict_name(enum kiln_pin_verdict verdict);

/* A pinning decision. Free with kiln_pin_plan_free(). */
struct kiln_pin_plan {
    size_t size; /* sizeof, as KILN_PIN_PLAN_INIT sets it (docs/abi.md) */
    enum kiln_pin_verdict verdict;
    int64_t domain;          /* the largest usable last-level domain, -1: none */
    struct kiln_cpuset cpus; /* KILN_PIN_APPLY: that domain's allowed CPUs; else empty */
    char reason[256];        /* why, in one sentence */
};
#define KILN_PIN_PLAN_INIT KILN_STRUCT_INIT(kiln_pin_plan)

/* Frees the CPU set of a plan. NULL is a no-op. Thread safety: no other
 * thread may use the plan during or after the call. */
KILN_API void kiln_pin_plan_free(struct kiln_pin_plan *plan);

/*
 * Chooses where to pin. The candidates are the last-level data or unified
 * domains with at least one CPU in `allowed` (NULL: every online CPU). The
 * largest candidate by size wins, ties to the one with the lowest CPU.
 * Then, in order: no domains at all -> KILN_PIN_NO_CACHES; no candidate ->
 * KILN_PIN_NO_CANDIDATE; `allowed` inside the winner, or a single candidate
 * -> KILN_PIN_ALREADY; all candidates the same size -> KILN_PIN_SYMMETRIC
 * (symmetric parts measured a loss); else KILN_PIN_APPLY with the winner's
 * allowed CPUs. *plan is always filled (free it even on error).
 * @return 0 or KILN_ENOMEM. Pure: reads nothing from the system.
 * Thread-safe, with no other thread writing `topo`, `allowed` or `plan`.
 */
KILN_API int kiln_topo_choose(const struct kiln_topo *topo, const struct kiln_cpuset *allowed,
                              struct kiln_pin_plan *plan);

/*
 * Sets the CPU affinity of every thread of this process to `cpus`: it walks
 * `<proc_root>/self/task` (NULL: "/proc") until a pass finds no thread it has
 * not set, so threads made before the call are moved and threads made after
 * inherit the mask.
 * @return 0; KILN_EINVAL for an empty set or one the kernel refuses;
 * KILN_EACCES; KILN_ENOTSUP where the platform cannot. Logged.
 * Thread safety: any thread, but not while another thread changes
 * affinities at the same moment.
 */
KILN_API int kiln_process_set_affinity(const char *proc_root, const struct kiln_cpuset *cpus);

/*
 * Reads the topology and the allowed CPUs of `env` (NULL: the real system),
 * chooses, and pins every thread when the verdict is KILN_PIN_APPLY. The
 * plan and its reason are logged at info level ("topo"). When `plan` is not
 * NULL it receives the decision (free it with kiln_pin_plan_free()); on
 * failure its verdict is KILN_PIN_FAILED and its reason names the step.
 * @return 0 when it pinned or had nothing to do, or the error of the step
 * that failed (nothing is pinned then, or, when setting a thread failed,
 * the threads set before it stay set).
 * Thread safety: any thread, but not beside another thread that sets
 * affinities (another pin included), as kiln_process_set_affinity.
 */
KILN_API int kiln_pin_largest_cache(const struct kiln_topo_env *env, struct kiln_pin_plan *plan);

/* ---------------------------------------------------------------------------
 * The opt-in rule
 * ------------------------------------------------------------------------ */

/* The name of the environment variable of the opt-in rule. */
#define KILN_CPU_CACHE_AFFINITY_ENV "KILN_CACHE_AFFINITY"

/* Who had the say in kiln_affinity_decide(). */
enum kiln_affinity_source {
    KILN_AFFINITY_DEFAULT = 0, /* neither flag nor variable: off */
    KILN_AFFINITY_FLAG = 1,    /* --cache-affinity / --no-cache-affinity */
    KILN_AFFINITY_ENV = 2,     /* KILN_CACHE_AFFINITY */
};

struct kiln_affinity_decision {
    size_t size; /* sizeof, as KILN_AFFINITY_DECISION_INIT sets it (docs/abi.md) */
    bool on;
    enum kiln_affinity_source source;
    bool env_malformed; /* the variable held something other than "1" or "0" */
    char reason[160];   /* one sentence for the log */
};
#define KILN_AFFINITY_DECISION_INIT KILN_STRUCT_INIT(kiln_affinity_decision)

/*
 * The opt-in rule every command shares. `flag` is -1 when no flag was
 * given, 1 for --cache-affinity, 0 for --no-cache-affinity; `env_value` is
 * the value of KILN_CACHE_AFFINITY (NULL or "" when unset). The flag wins
 * over the variable in both directions; the variable's "1" turns pinning on
 * and "0" off; the default is off. Any other value is malformed: with a
 * flag it is ignored (and said in the reason), without one the decision is
 * off and KILN_EINVAL is returned.
 * @return 0 or KILN_EINVAL; *out is always filled. Pure and thread-safe.
 */
KILN_API int kiln_affinity_decide(int flag, const char *env_value,
                                  struct kiln_affinity_decision *out);

/*
 * Logs `decision` at info level ("topo") and, when it is on, calls
 * kiln_pin_largest_cache(env, plan). When it is off nothing is read and
 * `plan` (if not NULL) gets verdict KILN_PIN_OFF with the decision's reason.
 * @return what kiln_pin_largest_cache() returned, or 0 when off.
 * Thread safety: as kiln_pin_largest_cache().
 */
KILN_API int kiln_affinity_apply(const struct kiln_affinity_decision *decision,
                                 const struct kiln_topo_env *env, struct kiln_pin_plan *plan);

#ifdef __cplusplus
}
#endif

#endif /* KILN_TOPO_H */
