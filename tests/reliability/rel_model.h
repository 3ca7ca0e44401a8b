/*
 * rel_model.h - what the reliability tests write into a cache, what they
 * may expect back, and the check that compares the two.
 *
 * Every payload is made from a key id and a version number: its first eight
 * bytes are the id and the version, the rest a pseudo-random stream seeded
 * by both, and its size is a function of both too. So any payload a load
 * returns names the put it came from, and the check can rebuild that put
 * byte for byte: a payload that matches no put that was ever attempted is
 * damage returned to the caller.
 *
 * The model keeps, per key id, the newest version acknowledged by a
 * completed kiln_cache_sync ("acked": it must load, at that version or a
 * later one) and the newest version ever attempted (no load may return a
 * version past it).
 */
#ifndef KILN_REL_MODEL_H
#define KILN_REL_MODEL_H

#include "kiln_test.h"

#include <stdbool.h>
#include <stdint.h>

/* The translator stamp every reliability cache is written with. */
#define REL_STAMP 0x52454c4941424c45ull

/* The most key ids a model tracks. */
#define REL_MAX_IDS 512

struct rel_model {
    uint32_t acked[REL_MAX_IDS];     /* newest synced version, 0: none */
    uint32_t pending[REL_MAX_IDS];   /* newest version put since the last sync, 0: none */
    uint32_t attempted[REL_MAX_IDS]; /* newest version ever attempted, 0: none */
};

/* The key of id `id`. */
struct kiln_key rel_key(uint32_t id);

/* The payload size of (id, version): 8 to 2,300 bytes. */
size_t rel_size(uint32_t id, uint32_t version);

/* Writes the payload of (id, version) into buf (rel_size bytes). */
void rel_payload(uint32_t id, uint32_t version, void *buf);

/* Puts (id, version) into the cache and records the attempt in the model. */
int rel_put(struct kiln_cache *c, struct rel_model *m, uint32_t id, uint32_t version);

/* Marks every pending version acked (after a completed sync). */
void rel_acked(struct rel_model *m);

/* What a writer run did, for the printed totals. */
struct rel_writer_stats {
    unsigned opens_failed;
    unsigned puts_failed;
    unsigned syncs_failed;
    unsigned syncs_done;
};

/*
 * The writer loop of the fault and power-cut sweeps: opens the cache in
 * `dir` through `io`, puts `nrec` records (some of them new versions of
 * earlier keys) with a sync after every fourth, closes and reopens halfway,
 * and closes at the end. After a failed open, put or sync it closes the
 * handle and reopens before the next record, as an emulator restarting its
 * cache would. Versions are numbered from `*version` on.
 */
void rel_writer(const char *dir, const struct kiln_io *io, unsigned nrec, struct rel_model *m,
                uint32_t *version, struct rel_writer_stats *st);

/*
 * The full check after a fault, a kill or a power cut, with the plain I/O
 * table: the index on disk names only whole records (it is never ahead of
 * them); the cache opens as a writer; every live record loads as exactly
 * some attempted version, never newer than attempted; every acked record
 * loads at its acked version or later; and afterwards kiln_cache_check finds
 * the cache whole. Failures are reported with kt_fail, prefixed by `what`.
 * @return the number of problems found.
 */
int rel_check(const char *dir, const struct rel_model *m, const char *what);

/*
 * The first step of rel_check on its own: the index file in `dir`, read as
 * it is (before any open repairs it), names only records that are whole in
 * the records file. @return the number of problems found (0 or 1).
 */
int rel_index_not_ahead(const char *dir, const char *what);

/* rel_check that only counts: for the tests that damage a cache on purpose
 * to show the check sees it. */
int rel_count_problems(const char *dir, const struct rel_model *m);

/* Sets the log level to errors only while sweeps provoke warnings. */
void rel_quiet(bool quiet);

/* Whether KILN_RELIABILITY_LONG asks for the long runs. */
bool rel_long_run(void);

#ifndef _WIN32
/* Helpers of the tests that fork writer processes and talk through pipes. */

/* Sleeps `us` microseconds, through signals. */
void rel_sleep_us(unsigned us);

/* Writes all n bytes to a pipe; a child that cannot report exits (5). */
void rel_write_all(int fd, const void *buf, size_t n);

/* Reads exactly n bytes. @return true when they all came. */
bool rel_read_all(int fd, void *buf, size_t n);
#endif

#endif /* KILN_REL_MODEL_H */
