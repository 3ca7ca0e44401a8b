/*
 * topo_internal.h - what topo.c (portable) and topo_<platform>.c share.
 *
 * topo.c holds everything that does not touch the system: CPU-set
 * arithmetic, the text parsers, the choice and the opt-in rule. A platform
 * file (topo_unix.c, topo_win.c) implements kiln_topo_read(),
 * kiln_topo_allowed() and kiln_process_set_affinity(), and finishes every
 * topology it builds with kiln__topo_finish(). topo_slpi.c, portable too,
 * parses the records of Windows' GetLogicalProcessorInformationEx.
 */
#ifndef KILN_TOPO_INTERNAL_H
#define KILN_TOPO_INTERNAL_H

#include "kiln/topo.h"
#include "kiln_internal.h"

/* Grows *set so that it can hold CPU `ncpus - 1`. @return 0 or KILN_ENOMEM. */
int kiln__cpuset_reserve(struct kiln_cpuset *set, uint32_t ncpus);

/* Adds one CPU (< KILN_TOPO_MAX_CPUS). @return 0, KILN_ERANGE or KILN_ENOMEM. */
int kiln__cpuset_add(struct kiln_cpuset *set, uint32_t cpu);

/* *set &= *other, in place. */
void kiln__cpuset_and(struct kiln_cpuset *set, const struct kiln_cpuset *other);

/* @return whether the two sets hold the same CPUs. */
bool kiln__cpuset_equal(const struct kiln_cpuset *a, const struct kiln_cpuset *b);

/* @return whether every CPU of a is in b. */
bool kiln__cpuset_subset(const struct kiln_cpuset *a, const struct kiln_cpuset *b);

/* @return whether a and b share a CPU. */
bool kiln__cpuset_intersects(const struct kiln_cpuset *a, const struct kiln_cpuset *b);

/* @return the highest CPU in the set + 1, 0 for the empty set. */
uint32_t kiln__cpuset_span(const struct kiln_cpuset *set);

/* How a cache clashes with one already known (kiln__topo_add_domain). */
enum kiln__domain_clash {
    KILN__DOMAIN_OVERLAP = 1, /* its CPUs overlap one of its level and type, not equal */
    KILN__DOMAIN_SIZE = 2,    /* the same CPUs as one of its level and type, another size */
};

/*
 * Adds *d to topo's domains (an array of *cap), taking its CPU set, unless
 * the same cache is known already (same level, type and CPUs: then its set
 * is freed). The readers of sysfs and of Windows' records both use it, and
 * word the clashes for their own source.
 * @return 0, a kiln__domain_clash (*d untouched), or KILN_ENOMEM.
 */
int kiln__topo_add_domain(struct kiln_topo *topo, size_t *cap, struct kiln_cpu_cache_domain *d);

/*
 * Sorts the domains, sets last_level and largest, and writes the note for a
 * topology without domains (`where` names what was read).
 */
void kiln__topo_finish(struct kiln_topo *topo, const char *where);

/* Formats a byte count as "96 MiB" / "512 KiB" into buf. @return buf. */
const char *kiln__topo_size_text(char *buf, size_t cap, uint64_t bytes);

/*
 * The thread ids a pin has set already (a thread may show up in several
 * passes over the process's threads). Portable: a platform's id fits a
 * uint64_t.
 */
struct kiln__tid_list {
    uint64_t *v;
    size_t n, cap;
};

/* @return whether `tid` is in the list. */
bool kiln__tid_seen(const struct kiln__tid_list *l, uint64_t tid);

/* Adds `tid` to the list. @return 0 or KILN_ENOMEM. */
int kiln__tid_add(struct kiln__tid_list *l, uint64_t tid);

/* Frees the list's array and empties it. */
void kiln__tid_list_free(struct kiln__tid_list *l);

/*
 * The first check of every kiln_process_set_affinity(): writes the set as
 * text for its log lines into `text` (cut with "..." when it does not fit;
 * cap at least 4) and refuses an empty set.
 * @return 0, or KILN_EINVAL for an empty set (logged).
 */
int kiln__pin_text(const struct kiln_cpuset *cpus, char *text, size_t cap);

/*
 * Builds a topology from the records GetLogicalProcessorInformationEx
 * (RelationAll or RelationCache) wrote into `buf` (`len` bytes, no
 * alignment needed). CPU c is processor (c % 64) of group c / 64. `flags`
 * as for kiln_topo_read(). Malformed records refuse the whole buffer with
 * one logged error naming the record's byte offset.
 * @return 0 with *out to kiln_topo_free(), KILN_EPARSE, KILN_EINVAL or
 * KILN_ENOMEM (*out NULL). Pure and thread-safe; portable, for tests.
 */
int kiln__topo_parse_slpi(const void *buf, size_t len, unsigned flags, struct kiln_topo **out);

/* Gives the library's full plan to the caller's `out` (NULL: none), only
 * the bytes its size covers (docs/abi.md); plan's CPU set moves over, or
 * is freed when out's size does not hold it. (topo.c) */
void kiln__pin_plan_out(struct kiln_pin_plan *out, struct kiln_pin_plan *plan);

#endif /* KILN_TOPO_INTERNAL_H */
