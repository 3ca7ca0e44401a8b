/*
 * kiln/cache.h - the program cache: an append-only records file and an
 * index beside it, in one folder.
 *
 *     DIR/programs.kpc   records: a header, then records (head + payload)
 *     DIR/programs.kpx   index: a header, then one entry per record, in file order
 *
 * A record is written before its index entry, so the index may fall behind
 * the records but never gets ahead of them. Opening reads the index in one
 * go when it matches the records (stamp, file id, every entry inside the
 * records file, last entry equal to that record's head); records past the
 * index's end are read head by head and appended to it; in every other case
 * the records are scanned and the index is written again whole. A torn last
 * record is cut off. A record whose head or checksum does not match its
 * index entry is reported missing, never returned.
 *
 * Typical use (the warm start):
 *
 *     struct kiln_cache_options opt = {.stamp = TRANSLATOR_STAMP,
 *                                      .flags = KILN_CACHE_CREATE};
 *     struct kiln_cache *c;
 *     int rc = kiln_cache_open("cache", &opt, &c);
 *     struct kiln_cache_entry *all; size_t n;
 *     kiln_cache_entries(c, &all, &n);                 // every live record
 *     struct kiln_key *keys = ...;                     // all[i].key
 *     struct kiln_cache_result *res;
 *     kiln_cache_load_many(c, keys, n, 0, &res);       // 0: the default thread count
 *     ...                                              // res[i].data unless res[i].status < 0
 *     kiln_cache_results_free(res, n);
 *     kiln_cache_entries_free(all);
 *     kiln_cache_put(c, key, blob, size, raw, codec, stages);  // a new program
 *     kiln_cache_sync(c);                                     // durable from here on
 *     kiln_cache_close(c);
 *
 * The format and the crash-safety argument are in docs/cache-format.md.
 */
#ifndef KILN_CACHE_H
#define KILN_CACHE_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The file names inside a cache folder. */
#define KILN_CACHE_RECORDS_FILE "programs.kpc"
#define KILN_CACHE_INDEX_FILE   "programs.kpx"

/* The largest payload one record may hold (1 GiB). */
#define KILN_CACHE_MAX_PAYLOAD (1u << 30)

/* The most threads kiln_cache_load_many uses. */
#define KILN_CACHE_MAX_THREADS 16

/* Flags for kiln_cache_options.flags. */
enum {
    /* Open for reading only: the files are never modified, no lock is
     * taken, a stale index is made up for in memory. */
    KILN_CACHE_READ_ONLY = 1 << 0,
    /* Create the folder's files when they are missing (the folder itself
     * must exist). Without it a missing cache is KILN_ENOENT. */
    KILN_CACHE_CREATE = 1 << 1,
    /* On a stamp or dictionary mismatch, keep the old files under
     * "programs.kpc.<stamp>.old" / "programs.kpx.<stamp>.old" instead of
     * removing them. */
    KILN_CACHE_MOVE_ASIDE = 1 << 2,
    /* Accept whatever stamp and dictionary the records file carries
     * (inspection tools; only with KILN_CACHE_READ_ONLY). */
    KILN_CACHE_ANY_STAMP = 1 << 3,
};

/* How kiln_cache_open opens a cache. */
struct kiln_cache_options {
    /* The caller's translator stamp: a cache written with another stamp is
     * started over (or refused with KILN_ESTAMP when read-only). */
    uint64_t stamp;
    /* The packing dictionary's id, 0 for none. A mismatch is treated
     * exactly like a stamp mismatch. */
    uint64_t dict_id;
    /* KILN_CACHE_* flags. */
    unsigned flags;
    /* The file I/O table; NULL means kiln_io_default(). Must outlive the
     * cache. */
    const struct kiln_io *io;
    /* Threads kiln_cache_load_many uses when asked for 0: 0 means the
     * usable CPUs (sched affinity), at most KILN_CACHE_MAX_THREADS. */
    unsigned threads;
};

/* How the last kiln_cache_open went. */
enum kiln_cache_open_kind {
    KILN_CACHE_OPENED_NEW = 0,        /* there was no cache: a new one was made (or is empty) */
    KILN_CACHE_OPENED_INDEX = 1,      /* the index matched the records and was used as it is */
    KILN_CACHE_OPENED_INDEX_TAIL = 2, /* the index was used; records past its end were scanned */
    KILN_CACHE_OPENED_REBUILT = 3, /* the index was not usable: records scanned, index rewritten */
    KILN_CACHE_OPENED_RESTARTED = 4, /* stamp or dictionary mismatch: the cache started over */
};

/* One record as the index describes it. */
struct kiln_cache_entry {
    struct kiln_key key;
    uint64_t offset;   /* where the record's head starts in programs.kpc */
    uint32_t size;     /* payload bytes */
    uint32_t raw_size; /* bytes the payload unpacks to (the caller's figure) */
    uint64_t checksum; /* XXH3 over the head fields and the payload */
    uint8_t codec;     /* enum kiln_codec (the cache treats payloads as opaque bytes) */
    uint16_t stages;   /* number of shader stages in the program */
};

/* What kiln_cache_stats reports. */
struct kiln_cache_stats {
    uint64_t records;    /* live records (a superseded record does not count) */
    uint64_t bytes;      /* payload bytes of the live records */
    uint64_t superseded; /* records replaced by a later record of the same key */
    uint64_t file_bytes; /* size of programs.kpc as the cache sees it */
    uint64_t stamp;      /* translator stamp of the files */
    uint64_t dict_id;    /* dictionary id of the files */
    bool read_only;      /* opened with KILN_CACHE_READ_ONLY */
    enum kiln_cache_open_kind open_kind;
    uint64_t tail_records;  /* records read past the index's end at open */
    uint64_t cut_bytes;     /* torn tail bytes cut at open (ignored when read-only) */
    uint64_t damaged_bytes; /* bytes skipped at open between records (damage) */
    uint64_t open_ns;       /* how long the open took */
    /* One line saying how the open went, as logged (the why of a rebuild,
     * a cut tail, a restart). */
    char open_text[256];
};

/* A cache. Opaque. */
struct kiln_cache;

/*
 * Opens (or creates) the cache in folder `dir`. See the top of this file for
 * what an open checks and repairs; the outcome is logged as one line (info
 * when the index was used, warning otherwise) and kept for kiln_cache_stats.
 * A writer (no KILN_CACHE_READ_ONLY) takes an exclusive lock on the records
 * file: while another writer holds it the open fails with KILN_EBUSY (open
 * read-only then). `opt` may be NULL only with a zero stamp and no flags.
 * @return 0 and the cache in *out, or a negative error: KILN_ENOENT (no
 * cache and no KILN_CACHE_CREATE), KILN_EBUSY, KILN_ESTAMP (read-only and
 * another stamp), KILN_EFORMAT (not a kiln cache, or a newer format),
 * KILN_ECORRUPT_HEADER, or the I/O error of the step that failed. A failed
 * open leaves the files as openable as they were.
 */
KILN_API int kiln_cache_open(const char *dir, const struct kiln_cache_options *opt,
                             struct kiln_cache **out);

/*
 * Closes the cache and releases its lock. It does not sync: call
 * kiln_cache_sync first for what must be durable. NULL is a no-op. No other
 * call on the cache may be running.
 */
KILN_API void kiln_cache_close(struct kiln_cache *c);

/*
 * Appends a record (its payload first, then its index entry). A later
 * record with the same key replaces the earlier one. The record is durable
 * after the next successful kiln_cache_sync.
 * @return 0; KILN_EINVAL on a read-only cache; KILN_ERANGE for a payload
 * over KILN_CACHE_MAX_PAYLOAD; the I/O error of the failed write (the cache
 * stays usable and openable; the record is not stored); or the earlier
 * sync failure that made this cache unusable (reopen it). When only the
 * index entry could not be written the record is stored and the index is
 * left behind (the next sync or open catches it up). Not thread-safe with
 * kiln_cache_sync/close; safe with find/entries/load_many/stats.
 */
KILN_API int kiln_cache_put(struct kiln_cache *c, struct kiln_key key, const void *payload,
                            size_t size, uint32_t raw_size, uint8_t codec, uint16_t stages);

/*
 * Makes every record put so far durable: the records file is synced first,
 * then the index (rewritten whole if an earlier append to it failed).
 * @return 0 or the error. A failed records sync may have lost writes
 * without telling which: the cache then refuses further puts and syncs with
 * that error (reopen it; every record synced before is kept). Not
 * thread-safe with put/close.
 */
KILN_API int kiln_cache_sync(struct kiln_cache *c);

/*
 * Looks a key up in O(1) (no file access).
 * @return 0 with the entry in *entry (may be NULL), or KILN_ENOTFOUND.
 * Thread-safe (also with kiln_cache_put).
 */
KILN_API int kiln_cache_find(struct kiln_cache *c, struct kiln_key key,
                             struct kiln_cache_entry *entry);

/* @return the number of live records. Thread-safe. */
KILN_API size_t kiln_cache_count(struct kiln_cache *c);

/*
 * Lists every live record, in file order (no file access).
 * @return 0 with a new array in *entries of *n entries (free it with
 * kiln_cache_entries_free; NULL when *n is 0), or KILN_ENOMEM. Thread-safe.
 */
KILN_API int kiln_cache_entries(struct kiln_cache *c, struct kiln_cache_entry **entries, size_t *n);

/* Frees an array from kiln_cache_entries. NULL is a no-op. */
KILN_API void kiln_cache_entries_free(struct kiln_cache_entry *entries);

/* One record loaded by kiln_cache_load_many. */
struct kiln_cache_result {
    struct kiln_key key;
    /* 0 when loaded; KILN_ENOTFOUND when the key is not in the cache;
     * KILN_ECORRUPT_RECORD when the record's head or checksum did not match
     * (it is missing: put it again); or the I/O error reading it. */
    int status;
    uint8_t codec;
    uint16_t stages;
    uint32_t raw_size;
    /* The payload, 8-byte aligned (NULL unless status is 0; also NULL for
     * an empty payload). Owned by the result: kiln_cache_results_free frees
     * it. To keep it beyond the results, take the pointer, set data to NULL,
     * and free it later with kiln_cache_payload_free (never with free():
     * payloads read together share memory, released with the last one). */
    void *data;
    size_t size;
};

/*
 * Reads the records of `keys` (n of them) on up to `threads` threads (0:
 * the open's default), each with its own file descriptor and large pread
 * calls in file order, and checks each record's head against its index
 * entry and its checksum. Results come in the order asked.
 * @return the number of records loaded (status 0) and a new array of n
 * results in *results (free it with kiln_cache_results_free), or a negative
 * error (KILN_ENOMEM, or KILN_EIO_OPEN when the records file cannot be
 * opened) with *results NULL. Thread-safe.
 */
KILN_API int64_t kiln_cache_load_many(struct kiln_cache *c, const struct kiln_key *keys, size_t n,
                                      unsigned threads, struct kiln_cache_result **results);

/* Frees results from kiln_cache_load_many and every payload they still
 * own. NULL is a no-op. */
KILN_API void kiln_cache_results_free(struct kiln_cache_result *results, size_t n);

/* Frees a payload taken out of a kiln_cache_result. NULL is a no-op.
 * Thread-safe (payloads of one load may be freed on different threads). */
KILN_API void kiln_cache_payload_free(void *data);

/* @return the thread count kiln_cache_load_many uses by default: the usable
 * CPUs, at most KILN_CACHE_MAX_THREADS, at least 1. Thread-safe. */
KILN_API unsigned kiln_cache_default_threads(void);

/*
 * Fills *stats. Thread-safe.
 * @return 0.
 */
KILN_API int kiln_cache_stats(struct kiln_cache *c, struct kiln_cache_stats *stats);

/* @return a short name for an open kind: "new", "index", "index+tail",
 * "rebuilt", "restarted". */
KILN_API const char *kiln_cache_open_kind_name(enum kiln_cache_open_kind kind);

/* The index's state as kiln_cache_check finds it. */
enum kiln_cache_index_state {
    KILN_CACHE_INDEX_OK = 0,      /* one entry per record, all matching */
    KILN_CACHE_INDEX_BEHIND = 1,  /* matching, but records past its end are missing from it */
    KILN_CACHE_INDEX_INVALID = 2, /* not usable (see index_text) */
    KILN_CACHE_INDEX_MISSING = 3, /* no index file */
};

/* What kiln_cache_check found (and did). */
struct kiln_cache_check_report {
    uint64_t stamp;
    uint64_t dict_id;
    uint64_t file_bytes;      /* size of programs.kpc before any repair */
    uint64_t records;         /* records whose head and checksum are whole */
    uint64_t bad_records;     /* records with a whole head but a wrong checksum */
    uint64_t damaged_bytes;   /* bytes between records that hold no record head */
    uint64_t torn_tail_bytes; /* bytes of a torn last record */
    uint64_t index_entries;   /* whole entries in the index file */
    enum kiln_cache_index_state index_state;
    char index_text[160]; /* why the index is not OK, or "ok" */
    bool whole;           /* nothing wrong was found */
    bool repaired;        /* --repair cut the tail and rewrote the index */
};

/*
 * Reads every record of the cache in `dir` and checks its head and its
 * checksum, and checks the index against the records (whatever the stamp).
 * With `repair`, a torn tail is cut and the index rewritten from the whole
 * records (records with a wrong checksum are left out of it); this takes
 * the writer lock (KILN_EBUSY while a writer holds the cache). `io` may be
 * NULL (kiln_io_default()).
 * @return 0 when the cache is whole (or repair left it whole: only the index
 * or a torn tail were wrong), KILN_ECORRUPT when damage remains (damaged
 * records cannot be repaired, only written again), or another negative
 * error when the check could not run. *report is filled in both of the
 * first two cases.
 */
KILN_API int kiln_cache_check(const char *dir, const struct kiln_io *io, bool repair,
                              struct kiln_cache_check_report *report);

#ifdef __cplusplus
}
#endif

#endif /* KILN_CACHE_H */
