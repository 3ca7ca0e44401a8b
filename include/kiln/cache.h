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
 * Threads. One handle may be used from any number of threads at once:
 * kiln_cache_put, kiln_cache_sync, kiln_cache_get, kiln_cache_load_many
 * and every lookup run side by side (puts reserve their place in the file
 * under a lock and write outside it). What may not overlap anything else on
 * the same handle: kiln_cache_close and the rewrites (compact, prune,
 * repack, merge into it). Each declaration below says which it is.
 *
 * The format and the crash-safety argument are in docs/cache-format.md.
 *
 * NULL arguments (0.2): every function refuses a NULL cache, folder or
 * output it needs with KILN_EINVAL (kiln_cache_open(dir, opt, NULL) crashed
 * before); for a NULL cache kiln_cache_count and kiln_cache_today answer 0
 * and kiln_cache_dict NULL; kiln_cache_close and the frees do nothing.
 */
#ifndef KILN_CACHE_H
#define KILN_CACHE_H

#include "kiln/common.h"
#include "kiln/pack.h"
#include "kiln/program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The file names inside a cache folder. */
#define KILN_CACHE_RECORDS_FILE "programs.kpc"
#define KILN_CACHE_INDEX_FILE   "programs.kpx"
/* The packing dictionary the records were packed with (kiln_pack_dict_bytes),
 * when the header names one. */
#define KILN_CACHE_DICT_FILE "programs.kpd"
/* The dictionary's second copy: the same bytes, so that one damaged copy
 * loses nothing (an open uses the whole one and a writer restores the other). */
#define KILN_CACHE_DICT_COPY_FILE "programs.kpd2"
/* Last use of each record, in days (see kiln_cache_last_use). */
#define KILN_CACHE_USE_FILE "programs.kpu"
/* (0.2) The cache's remembered settings: its size cap
 * (kiln_cache_options.max_size). No file: no cap. */
#define KILN_CACHE_META_FILE "programs.kpm"

/* (0.2) kiln_cache_options.max_size that clears a remembered cap. */
#define KILN_CACHE_NO_CAP UINT64_MAX

/* The largest payload one record may hold (1 GiB). */
#define KILN_CACHE_MAX_PAYLOAD (1u << 30)

/* Flags for kiln_cache_options.flags. */
enum {
    /* Open for reading only: the files are never modified, no lock is
     * taken, a stale index is made up for in memory. */
    KILN_CACHE_READ_ONLY = 1 << 0,
    /* Create the cache when it is missing: the folder and its parents,
     * then its files. Without it a missing cache is KILN_ENOENT. It never
     * replaces a cache that is there. */
    KILN_CACHE_CREATE = 1 << 1,
    /* With KILN_CACHE_RESET, keep the old files under
     * "programs.kpc.<stamp>.old" / "programs.kpx.<stamp>.old" (and the
     * dictionary's copies under "programs.kpd.<stamp>.old",
     * "programs.kpd2.<stamp>.old") instead of removing them; where a file of
     * that set is there already (an earlier reset of a cache of the same
     * stamp), the suffix is ".<stamp>.old.N", the first N free for all, so
     * nothing set aside is ever written over. */
    KILN_CACHE_MOVE_ASIDE = 1 << 2,
    /* Accept whatever stamp and dictionary the records file carries
     * (inspection tools; only with KILN_CACHE_READ_ONLY). */
    KILN_CACHE_ANY_STAMP = 1 << 3,
    /* Accepted for compatibility; it changes nothing. Every open of a cache
     * whose records name a dictionary loads it (see kiln_cache_open). */
    KILN_CACHE_USE_DICT = 1 << 4,
    /* A writer that keeps whatever stamp and dictionary the records file
     * carries (maintenance: prune, compact, repack, merge). A cache made
     * new gets the options' stamp. */
    KILN_CACHE_KEEP_STAMP = 1 << 5,
    /* Start over: whatever kiln cache the folder holds (any stamp,
     * dictionary, format version, or a damaged header) is removed (or moved
     * aside with KILN_CACHE_MOVE_ASIDE) and a new, empty cache with the
     * options' stamp and dictionary takes its place; a missing one is
     * created as with KILN_CACHE_CREATE. The only way an open drops
     * records. Not with KILN_CACHE_READ_ONLY or KILN_CACHE_KEEP_STAMP. */
    KILN_CACHE_RESET = 1 << 6,
};

/* The most read-only layers a cache opens beneath it (kiln_cache_options.layers). */
#define KILN_CACHE_MAX_LAYERS 8u

/* How kiln_cache_open opens a cache. */
struct kiln_cache_options {
    size_t size; /* sizeof, as KILN_CACHE_OPTIONS_INIT sets it (docs/abi.md) */
    /* The caller's translator stamp: a cache written with another stamp is
     * refused with KILN_ESTAMP and left as it is (KILN_CACHE_RESET starts
     * it over). */
    uint64_t stamp;
    /* The packing dictionary the caller expects, 0 for whichever the cache
     * has: a cache with another (non-zero) id is refused like another
     * stamp. */
    uint64_t dict_id;
    /* KILN_CACHE_* flags. */
    unsigned flags;
    /* The file I/O table; NULL means kiln_io_default(). Must outlive the
     * cache. */
    const struct kiln_io *io;
    /* Threads kiln_cache_load_many uses when asked for 0: 0 means
     * kiln_pool_auto_workers(KILN_POOL_WORK_READ, 0) decides (CPUs, quota,
     * memory; at most KILN_POOL_MAX_READERS). */
    unsigned threads;
    /* The dictionary to write records with (may be NULL). Its id is the
     * cache's dictionary id (dict_id must then be 0 or the same); it is
     * written to programs.kpd before a new records file is put in place,
     * and written again when that file is missing or stale. Copied: it need
     * not outlive the open. */
    const struct kiln_pack_dict *dict;
    /* Today, in days since 1970-01-01 UTC, for last-use marks; 0: the
     * system clock's day. Tests set it to age records. */
    uint32_t today;
    /* (0.2) Runs kiln_cache_load_many's readers on the application's job
     * system instead of threads kiln starts (see struct kiln_executor);
     * NULL: kiln's threads. Copied; its `user` must outlive the cache. */
    const struct kiln_executor *executor;
    /* (0.2) Read-only layers beneath this cache: caches an emulator ships
     * (one per title, or one shared), searched after this cache's own
     * records and in their order. Lookups and loads (kiln_cache_find,
     * _get, _load_many, _entries, _count, _last_use, and so the warm start
     * and the pipeline service) see this cache, then layers[0],
     * layers[1], ...; a key held twice is the first one's. Stores, syncs,
     * last-use marks and every rewrite (compact, prune, repack, merge,
     * check) touch this cache alone. A layer is opened read-only: never
     * written, never locked. One that cannot be opened (missing, not a
     * cache, a damaged header) or carries another stamp or dictionary than
     * this cache is left out with one warning line saying why
     * (kiln_cache_stats.layers_left_out counts them); the open itself
     * succeeds. At most KILN_CACHE_MAX_LAYERS; the paths are read during
     * the open only. The layers open at once, each on a thread of its own
     * (on `executor` when given; `io` is then called from those threads),
     * beside this cache unless the open takes KILN_CACHE_ANY_STAMP or
     * KILN_CACHE_KEEP_STAMP (then after it); kiln_cache_load_many reads
     * this cache's records and the layers' in one pass of its readers. */
    const char *const *layers;
    size_t nlayers;
    /* (0.2) A size cap the cache keeps itself, in bytes of programs.kpc:
     * 0 keeps the cap the cache remembers (none for a cache that never had
     * one); KILN_CACHE_NO_CAP clears it; any other value (at least 64, the records header) is
     * the new cap. A writer's open remembers it in programs.kpm (read-only
     * opens only read it). A put that makes programs.kpc pass the cap
     * evicts least recently used records (last-use day, then the earliest
     * in the file) down to half the cap in one crash-safe rewrite, so
     * the puts until the next pass cost nothing extra. Records this
     * handle stored, loaded or found are never evicted: when they alone
     * are over the cap the put still succeeds and the overflow is counted
     * (kiln_cache_stats.cap_overflows). Layers are never evicted from. */
    uint64_t max_size;
};
#define KILN_CACHE_OPTIONS_INIT KILN_STRUCT_INIT(kiln_cache_options)

/* How the last kiln_cache_open went. */
enum kiln_cache_open_kind {
    KILN_CACHE_OPENED_NEW = 0,        /* there was no cache: a new one was made (or is empty) */
    KILN_CACHE_OPENED_INDEX = 1,      /* the index matched the records and was used as it is */
    KILN_CACHE_OPENED_INDEX_TAIL = 2, /* the index was used; records past its end were scanned */
    KILN_CACHE_OPENED_REBUILT = 3, /* the index was not usable: records scanned, index rewritten */
    KILN_CACHE_OPENED_RESTARTED = 4, /* KILN_CACHE_RESET: the cache started over, as asked */
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
    size_t size;         /* sizeof, as KILN_CACHE_STATS_INIT sets it (docs/abi.md) */
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
    /* (0.2) The read-only layers (kiln_cache_options.layers): how many are
     * used, how many were left out, and the records they add (their live
     * records that neither this cache nor an earlier layer holds). The
     * fields above are this cache's own. */
    unsigned layers;
    unsigned layers_left_out;
    uint64_t layer_records;
    /* (0.2) The size cap (kiln_cache_options.max_size; 0: none) and what
     * keeping it did through this handle: evictions (one rewrite each),
     * the records and the record bytes (heads, payloads, padding) they
     * evicted, and the evictions that could not get under the cap because
     * the rest was used by this handle (nothing of it is evicted). */
    uint64_t max_size;
    uint64_t evictions;
    uint64_t evicted_records;
    uint64_t evicted_bytes;
    uint64_t cap_overflows;
};
#define KILN_CACHE_STATS_INIT KILN_STRUCT_INIT(kiln_cache_stats)

/* A cache. Opaque. */
struct kiln_cache;

/*
 * Opens (or creates) the cache in folder `dir`. See the top of this file for
 * what an open checks and repairs; the outcome is logged as one line (info
 * when the index was used, warning otherwise) and kept for kiln_cache_stats.
 * A writer (no KILN_CACHE_READ_ONLY) takes an exclusive lock on the records
 * file: while another writer holds it the open fails with KILN_EBUSY (open
 * read-only then). `opt` NULL means a zero stamp and no flags.
 *
 * An open never removes or restarts a cache unless asked with
 * KILN_CACHE_RESET: a cache of another stamp, or of another dictionary id
 * than a non-zero opt->dict_id, is refused with KILN_ESTAMP (the log line,
 * at info level, names both stamps and dictionaries). A cache whose records
 * name a dictionary is opened with it whatever the flags (kiln_cache_dict).
 * @return 0 and the cache in *out, or a negative error: KILN_ENOENT (no
 * cache and no KILN_CACHE_CREATE), KILN_EBUSY, KILN_ESTAMP, KILN_EFORMAT
 * (not a kiln cache, or another format version), KILN_ECORRUPT_HEADER,
 * KILN_ECORRUPT (the dictionary the records name is missing or damaged;
 * KILN_CACHE_ANY_STAMP opens without it), KILN_EINVAL (flags that do not go
 * together), or the I/O error of the step that failed. A failed open leaves
 * the files as openable as they were.
 * Thread safety: any number of opens may run at once, in one process or
 * several (the lock decides which writer wins).
 */
KILN_API int kiln_cache_open(const char *dir, const struct kiln_cache_options *opt,
                             struct kiln_cache **out);

/*
 * (0.2) The text of the last failure of a call on this handle, "what and
 * where" with the code's name, like SQLite's sqlite3_errmsg: for example
 * "kiln_cache_put: cache/programs.kpc: writing a record at offset 4096
 * failed: short write (KILN_EIO_SHORTWRITE)". The detail is the line that
 * failure logged (also when the log level hides it). Every function of this
 * header that returns an error sets it when it fails (a lookup's
 * KILN_ENOTFOUND is an answer, not a failure); a call that succeeds leaves
 * it as it was. "" before any failure. A failed kiln_cache_open has no
 * handle: read kiln_last_errmsg() on the same thread.
 * @return a string owned by the calling thread, valid until it calls this
 * again ("kiln_cache_errmsg: no cache" for NULL).
 * Thread-safe: calls failing on other threads at the same time replace the
 * handle's text (the latest failure wins) but never the returned copy.
 */
KILN_API const char *kiln_cache_errmsg(const struct kiln_cache *c);

/*
 * Closes the cache and releases its lock. It does not sync: call
 * kiln_cache_sync first for what must be durable (records put since the
 * last sync are in the file, and the next open finds them past the index's
 * end, but a power cut may lose them). NULL is a no-op.
 * Thread safety: no other call on the cache may be running or follow.
 */
KILN_API void kiln_cache_close(struct kiln_cache *c);

/*
 * Appends a record. A later record with the same key replaces the earlier
 * one (of two puts of one key racing on two threads, the one that reserved
 * its place in the file last wins). When the call returns 0 the record is
 * found by every lookup; it is durable after the next successful
 * kiln_cache_sync, which also writes its index entry. `payload` is only
 * read during the call. (0.2) With a size cap (kiln_cache_options.max_size)
 * a put that leaves programs.kpc over it evicts the least recently used
 * records down to half the cap in one crash-safe rewrite, never a record
 * this handle stored, loaded or found; it waits for the handle's running
 * puts, syncs, gets and loads first. A failed eviction is logged and does
 * not fail the put (the record is stored; the next put tries again).
 * @return 0; KILN_EINVAL on a read-only cache; KILN_ERANGE for a payload
 * over KILN_CACHE_MAX_PAYLOAD; the I/O error of the failed write (the cache
 * stays usable and openable; the record is not stored); or the earlier
 * sync failure that made this cache unusable (reopen it).
 * Thread safety: safe from any number of threads, with each other and with
 * sync, get, load_many and every lookup; not with close or a rewrite.
 */
KILN_API int kiln_cache_put(struct kiln_cache *c, struct kiln_key key, const void *payload,
                            size_t size, uint32_t raw_size, uint8_t codec, uint16_t stages);

/*
 * Makes every record whose put returned before this call durable: the
 * records file is synced first, then the index entries of those records
 * are appended and the index synced (rewritten whole if an earlier append
 * to it failed). So the index never names a record that was not synced.
 * @return 0 or the error. A failed records sync may have lost writes
 * without telling which: the cache then refuses further puts and syncs with
 * that error (reopen it; every record synced before is kept). So does a
 * records file that another program renamed over the path since the open
 * (KILN_EIO_SYNC, one error line): what was written into the old file is
 * no longer in the folder.
 * Thread safety: safe with puts on other threads (a put that returns while
 * a sync runs is made durable by the next sync) and with every lookup;
 * syncs on several threads run one after another. Not with close or a
 * rewrite.
 */
KILN_API int kiln_cache_sync(struct kiln_cache *c);

/*
 * Looks a key up in O(1) (no file access).
 * @return 0 with the entry in *entry (may be NULL), or KILN_ENOTFOUND.
 * Thread safety: safe from any thread, also beside put and sync.
 */
KILN_API int kiln_cache_find_sized(struct kiln_cache *c, struct kiln_key key, size_t entry_size,
                                   struct kiln_cache_entry *entry);
/* kiln_cache_find_sized with the caller's sizeof(struct kiln_cache_entry):
 * only that many bytes of *entry are written (docs/abi.md, "Arrays"). */
static inline int kiln_cache_find(struct kiln_cache *c, struct kiln_key key,
                                  struct kiln_cache_entry *entry)
{
    return kiln_cache_find_sized(c, key, sizeof(struct kiln_cache_entry), entry);
}

/* @return the number of live records. Thread safety: as kiln_cache_find. */
KILN_API size_t kiln_cache_count(struct kiln_cache *c);

/*
 * Lists every live record, in file order (no file access).
 * `entry_size` is sizeof(struct kiln_cache_entry) as the caller's headers
 * know it: the array has that stride, each element's `size` says it, and
 * each holds the fields that size covers (docs/abi.md, "Arrays"). Call it
 * through kiln_cache_entries, which passes it.
 * @return 0 with a new array in *entries of *n entries (free it with
 * kiln_cache_entries_free; NULL when *n is 0), KILN_ENOMEM, or KILN_EINVAL
 * (also for an entry_size smaller than a size_t).
 * Thread safety: as kiln_cache_find.
 */
KILN_API int kiln_cache_entries_sized(struct kiln_cache *c, size_t entry_size,
                                      struct kiln_cache_entry **entries, size_t *n);
static inline int kiln_cache_entries(struct kiln_cache *c, struct kiln_cache_entry **entries,
                                     size_t *n)
{
    return kiln_cache_entries_sized(c, sizeof(struct kiln_cache_entry), entries, n);
}

/* Frees an array from kiln_cache_entries. NULL is a no-op. Thread safety:
 * any thread; the array is the caller's, not the cache's. */
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
     * and free it later with kiln_cache_payload_free (never with free()).
     * Memory: kiln_cache_load_many reads neighbouring records with one
     * read into one block (up to 8 MiB) that their payloads share, and the
     * block is released with the last of them; so one payload kept from a
     * load holds its whole block alive. Copy a payload that is kept long
     * while the others are freed, or read it with kiln_cache_get, whose
     * payload holds only its own record. */
    void *data;
    size_t size;
};

/*
 * Reads the records of `keys` (n of them) on up to `threads` threads (0:
 * the open's default), each with its own file descriptor and large pread
 * calls in file order, and checks each record's head against its index
 * entry and its checksum. Results come in the order asked. Records put
 * while it runs may or may not be found. A handle always reads the file it
 * opened, also after another process rewrote the cache (compact, prune,
 * repack): it then loads what it opened, not the new file.
 * @return the number of records loaded (status 0) and a new array of n
 * results in *results (free it with kiln_cache_results_free), or a negative
 * error (KILN_ENOMEM, or KILN_EIO_OPEN when the records file cannot be
 * opened) with *results NULL.
 * Thread safety: safe from any thread, also beside put and sync; not with
 * close or a rewrite.
 */
KILN_API int64_t kiln_cache_load_many_sized(struct kiln_cache *c, const struct kiln_key *keys,
                                            size_t n, unsigned threads, size_t result_size,
                                            struct kiln_cache_result **results);
/* kiln_cache_load_many_sized with the caller's sizeof(struct
 * kiln_cache_result) as the results' stride (docs/abi.md, "Arrays"). */
static inline int64_t kiln_cache_load_many(struct kiln_cache *c, const struct kiln_key *keys,
                                           size_t n, unsigned threads,
                                           struct kiln_cache_result **results)
{
    return kiln_cache_load_many_sized(c, keys, n, threads, sizeof(struct kiln_cache_result),
                                      results);
}

/* Frees results from kiln_cache_load_many and every payload they still
 * own. NULL is a no-op. Thread safety: any thread, also after the cache
 * was closed (results do not refer to the cache). */
KILN_API void kiln_cache_results_free_sized(struct kiln_cache_result *results, size_t n,
                                            size_t result_size);
/* kiln_cache_results_free_sized with the caller's stride, as the load got. */
static inline void kiln_cache_results_free(struct kiln_cache_result *results, size_t n)
{
    kiln_cache_results_free_sized(results, n, sizeof(struct kiln_cache_result));
}

/*
 * Reads the record of one key on the calling thread (one pread on the
 * cache's own descriptor) and checks it as kiln_cache_load_many does. Its
 * payload is a block of its own: keeping it holds only this record.
 * @return 0 with the record in *result (free result->data, NULL for an
 * empty payload, with kiln_cache_payload_free; it outlives the cache), or
 * KILN_ENOTFOUND, KILN_ECORRUPT_RECORD (reported missing: put it again),
 * KILN_ENOMEM or the read's I/O error, with result->data NULL. In every
 * case result->status holds the same value and result->key the key.
 * Thread safety: as kiln_cache_load_many.
 */
KILN_API int kiln_cache_get_sized(struct kiln_cache *c, struct kiln_key key, size_t result_size,
                                  struct kiln_cache_result *result);
/* kiln_cache_get_sized with the caller's sizeof(struct kiln_cache_result):
 * only that many bytes of *result are written (docs/abi.md, "Arrays"). */
static inline int kiln_cache_get(struct kiln_cache *c, struct kiln_key key,
                                 struct kiln_cache_result *result)
{
    return kiln_cache_get_sized(c, key, sizeof(struct kiln_cache_result), result);
}

/*
 * Stores a program in one call: seals it (kiln_program_seal: checks every
 * stage's SPIR-V, packs it with the cache's dictionary unless `opt` names
 * one, joins and keys it, marks it validated) and puts the record
 * (kiln_cache_put, with its sizes, codec and stage count). What an
 * emulator calls for a program it meets during play; durable after the
 * next kiln_cache_sync (or kiln_cache_close). `opt` may be NULL.
 * @return 0, with the key in *key_out when it is not NULL;
 * kiln_program_seal's errors (KILN_EFORMAT for a stage that is not valid
 * SPIR-V: nothing is stored); kiln_cache_put's.
 * Thread safety: as kiln_cache_put.
 */
KILN_API int kiln_cache_put_program(struct kiln_cache *c, const struct kiln_program *p,
                                    const struct kiln_program_seal_options *opt,
                                    struct kiln_key *key_out);

/*
 * Opens a stored program in one call: reads its record (kiln_cache_get)
 * and opens the payload (kiln_program_open: parse, unpack each stage once,
 * check it once) with the cache's dictionary unless `opt` names one. The
 * open program keeps its own copy of the payload: it outlives the cache.
 * `opt` may be NULL.
 * @return 0 and the program in *out (free it with
 * kiln_program_opened_free); kiln_cache_get's errors (KILN_ENOTFOUND,
 * KILN_ECORRUPT_RECORD, ...); kiln_program_open's (KILN_ECORRUPT_BLOB for
 * a damaged payload, KILN_EFORMAT for a stage that is not valid SPIR-V).
 * Thread safety: as kiln_cache_get.
 */
KILN_API int kiln_cache_get_program(struct kiln_cache *c, struct kiln_key key,
                                    const struct kiln_program_open_options *opt,
                                    struct kiln_program_opened **out);

/* Frees a payload taken out of a kiln_cache_result (from load_many or
 * get). NULL is a no-op. Thread safety: any thread (payloads of one load
 * may be freed on different threads), also after the cache was closed. */
KILN_API void kiln_cache_payload_free(void *data);

/*
 * Fills *stats. (Named kiln_cache_stats before 0.2, a name C++ took for
 * the struct's.)
 * @return 0, or KILN_EINVAL for a NULL argument.
 * Thread safety: as kiln_cache_find.
 */
KILN_API int kiln_cache_get_stats(struct kiln_cache *c, struct kiln_cache_stats *stats);

#ifndef __cplusplus
/* Deprecated: kiln_cache_get_stats's name before 0.2, still exported for
 * programs built against 0.1; C only (in C++ it hid the struct).
 * Thread safety: as kiln_cache_get_stats. */
KILN_API int kiln_cache_stats(struct kiln_cache *c, struct kiln_cache_stats *stats)
    KILN_DEPRECATED("use kiln_cache_get_stats");
#endif

/* @return a short name for an open kind: "new", "index", "index+tail",
 * "rebuilt", "restarted" (a static string). Thread safety: any thread. */
KILN_API const char *kiln_cache_open_kind_name(enum kiln_cache_open_kind kind);

/* The index's state as kiln_cache_check finds it. */
enum kiln_cache_index_state {
    KILN_CACHE_INDEX_OK = 0,      /* one entry per whole record, all matching (a damaged
                                   * record may be named or left out: see the report) */
    KILN_CACHE_INDEX_BEHIND = 1,  /* matching, but records past its end are missing from it */
    KILN_CACHE_INDEX_INVALID = 2, /* not usable (see index_text) */
    KILN_CACHE_INDEX_MISSING = 3, /* no index file */
};

/* The one step that makes a checked cache whole (kiln_cache_check). */
enum kiln_cache_next_step {
    KILN_CACHE_NEXT_NONE = 0,    /* whole; or nothing kiln can do (no whole dictionary copy) */
    KILN_CACHE_NEXT_REPAIR = 1,  /* the index, a torn tail or a dictionary copy: a repair */
    KILN_CACHE_NEXT_COMPACT = 2, /* damaged records or bytes in the file: a compaction */
};

/* What kiln_cache_check found (and did). */
struct kiln_cache_check_report {
    size_t size; /* sizeof, as KILN_CACHE_CHECK_REPORT_INIT sets it (docs/abi.md) */
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
    bool repaired; /* --repair cut the tail, rewrote the index, or restored a dictionary copy */
    /* The dictionary the records name: whole copies of it (programs.kpd and
     * programs.kpd2; 2 when the records name none), and what is wrong. A
     * missing or empty copy beside a whole one keeps the cache whole
     * (caches made before the second copy have one; nothing in it
     * disagrees, and a repair or a writer's open writes it again); a copy
     * of other bytes does not. */
    unsigned dict_copies;
    char dict_text[160];
    /* Of bad_records, those the index names (a load reports them missing
     * and a repair leaves them out), and those it leaves out already (they
     * read as missing; only their bytes remain, until a compaction). Index
     * entries that name damaged bytes with no whole head count as named. */
    uint64_t damaged_indexed;
    uint64_t damaged_left_out;
    uint64_t bad_record_bytes; /* bytes of the bad records (heads, payloads, padding) */
    /* What makes the cache whole now, after the repair when one ran: a
     * cache whose index names only whole records but whose file still
     * holds damaged ones is safe to use but not whole (compaction). */
    enum kiln_cache_next_step next;
};
#define KILN_CACHE_CHECK_REPORT_INIT KILN_STRUCT_INIT(kiln_cache_check_report)

/*
 * Reads every record of the cache in `dir` and checks its head and its
 * checksum, checks the index against the records (whatever the stamp), and
 * both copies of the dictionary the records name. With `repair`, a torn
 * tail is cut, the index rewritten from the whole records (records with a
 * wrong checksum are left out of it), and a damaged or missing dictionary
 * copy written again from the whole one; no record is ever dropped over a
 * dictionary problem. A repair takes
 * the writer lock (KILN_EBUSY while a writer holds the cache). `io` may be
 * NULL (kiln_io_default()).
 * @return 0 when the cache is whole (or repair left it whole: only the index
 * or a torn tail were wrong), KILN_ECORRUPT when it is not (a repair leaves
 * damaged records out of the index, where they read as missing, but their
 * bytes stay until kiln_cache_compact; report->next names the step), or
 * another negative error when the check could not run. After a repair, the
 * return and report->next are what a check without repair would now give.
 * *report is filled in both of the first two cases.
 * Thread safety: any thread; it opens the files itself (a repair waits for
 * no writer: it fails with KILN_EBUSY while one holds the cache).
 */
KILN_API int kiln_cache_check(const char *dir, const struct kiln_io *io, bool repair,
                              struct kiln_cache_check_report *report);

/*
 * Checks, before a file of the caller's own (an exported archive) is made
 * or renamed over `path`, that no kiln cache is written over: refused when
 * `path`, links followed, is the same file (device and file id, whatever
 * the spelling: "..", a symbolic or a hard link) as any entry of the
 * folder of cache `c`, or when its folder is c's folder or one that holds
 * any kiln cache (programs.kpc, programs.kpx, either dictionary copy or
 * programs.kpu is there), whoever holds it. Every entry of c's folder
 * counts, not a list of names: the ledger, pipelines.vkc, temporary files
 * too. `c` may be NULL (only the folder test). Only reads; logs nothing.
 * @return 0 when the path is clear, KILN_EINVAL without a path,
 * KILN_ECACHE_FILE when it is refused,
 * KILN_ERANGE for a path too long, or the error listing c's folder.
 * Thread-safe (c is only read).
 */
KILN_API int kiln_cache_check_output(const struct kiln_cache *c, const char *path);

/* ---------------------------------------------------------------------------
 * Dictionary, last use and the cache's life cycle (src/cache/cache_life.c;
 * docs/cache-format.md, "Life cycle").
 *
 * Every rewrite (compact, prune, repack) writes a whole new records file
 * under "programs.kpc.new", locked and synced, and renames it over the old
 * one: until that rename the old cache is whole and in use; after it the
 * index, the dictionary and the last-use file follow, and a crash between
 * the two is caught by the next open (an index of another records file is
 * rebuilt; a pending "programs.kpd.new" whose id the records name is put in
 * place). The handle goes on with the new file.
 * ------------------------------------------------------------------------ */

/*
 * @return the dictionary the cache's records were packed with, loaded from
 * programs.kpd (or the options' dictionary), owned by the cache and valid
 * until the next rewrite or close; NULL when the cache has none (or an
 * inspection open, KILN_CACHE_ANY_STAMP, could not load it, or the caller
 * named the id in opt->dict_id and keeps the dictionary itself). Pass it
 * to kiln_unpack.
 * Thread safety: any thread; the dictionary may be used from many threads.
 */
KILN_API const struct kiln_pack_dict *kiln_cache_dict(struct kiln_cache *c);

/*
 * @return the folder the cache was opened in (as kiln_cache_open was
 * given it), owned by the cache and valid until kiln_cache_close; NULL
 * for a NULL cache. The pipeline service finds the build ledger there.
 * Thread-safe.
 */
KILN_API const char *kiln_cache_dir(const struct kiln_cache *c);

/*
 * The day a record was last loaded (kiln_cache_load_many) or stored, in
 * days since 1970-01-01 UTC. Marks are kept in memory and written to
 * programs.kpu by kiln_cache_sync and kiln_cache_close of a writer (or
 * kiln_cache_save_use), so a load costs no write. A record with no mark on
 * disk (new since, or a lost programs.kpu) counts as used on the day of
 * the open.
 * @return 0 with the day in *day, or KILN_ENOTFOUND.
 * Thread safety: as kiln_cache_find.
 */
KILN_API int kiln_cache_last_use(struct kiln_cache *c, struct kiln_key key, uint32_t *day);

/* @return the day the cache marks uses with (the options' `today`, or the
 * system clock's day at the open). Thread safety: any thread. */
KILN_API uint32_t kiln_cache_today(struct kiln_cache *c);

/*
 * Writes programs.kpu now when a mark changed (crash-safely, through a
 * temporary file). Writers do this at sync and close; a read-only handle
 * (a warm start) writes it only through this call. A failure changes
 * nothing else: last use is advisory.
 * @return 0 or the I/O error.
 * Thread safety: safe beside puts and lookups; not beside another
 * save_use, sync, close or a rewrite.
 */
KILN_API int kiln_cache_save_use(struct kiln_cache *c);

/* What a rewrite (compact, prune, repack) did. */
struct kiln_cache_rewrite_report {
    size_t size;             /* sizeof, as KILN_CACHE_REWRITE_REPORT_INIT sets it (docs/abi.md) */
    bool rewritten;          /* false: there was nothing to do, the files are unchanged */
    uint64_t records_before; /* live records before */
    uint64_t records_after;  /* live records after */
    uint64_t superseded;     /* superseded records left out */
    uint64_t dropped;        /* live records dropped (prune) */
    uint64_t damaged;        /* records whose head or checksum failed: left out */
    uint64_t repacked;       /* records unpacked and packed again (repack) */
    uint64_t kept_as_is;     /* records copied as they were (not a program payload) */
    uint64_t file_bytes_before;    /* programs.kpc before */
    uint64_t file_bytes_after;     /* programs.kpc after */
    uint64_t payload_bytes_before; /* payloads of the live records before */
    uint64_t payload_bytes_after;  /* payloads of the records kept */
    uint64_t spirv_bytes;          /* repack: SPIR-V the repacked records unpack to */
    uint64_t dict_id_before;
    uint64_t dict_id_after;
    /* Every record the rewrite met: the table's (live and superseded) and
     * the record heads in the bytes no entry names (records a repair left
     * out of the index). records_read = records_after + dropped +
     * superseded + damaged. */
    uint64_t records_read;
    uint64_t damaged_bytes; /* bytes left out that no whole record held, or a damaged one */
};
#define KILN_CACHE_REWRITE_REPORT_INIT KILN_STRUCT_INIT(kiln_cache_rewrite_report)

/*
 * Progress of a handle's long operations: called with what runs
 * ("compact", "prune", "repack", "merge"), the records done and their
 * total, from the thread that called the operation, at most ten times a
 * second and always once at the end (done == total); never while a lock
 * of the handle is taken by another thread.
 */
typedef void (*kiln_cache_progress_fn)(void *user, const char *what, uint64_t done, uint64_t total);

/*
 * Sets (or with NULL clears) the progress callback of `c`'s compact,
 * prune, repack and merge (as their output, for merge). NULL `c`: nothing.
 * Thread safety: not while an operation of `c` runs.
 */
KILN_API void kiln_cache_set_progress(struct kiln_cache *c, kiln_cache_progress_fn fn, void *user);

/*
 * Rewrites the records file without superseded records, damaged records
 * (those the index names and those a repair left out of it) and dead
 * bytes, and its index and last-use file with it (see the top of this
 * section). Nothing is done when the file holds only live records and each
 * passes its checksum (all are read to know).
 * @return 0 with *report filled; KILN_EINVAL for a read-only cache; or
 * the error of the step that failed: before the rename the old cache is
 * untouched and the handle usable; after it (only the index, dictionary or
 * last-use file failed) the next open completes the switch.
 * Thread safety: no other call on the handle may run meanwhile (the same
 * holds for prune, repack and merge into the handle).
 */
KILN_API int kiln_cache_compact(struct kiln_cache *c, struct kiln_cache_rewrite_report *report);

/* What kiln_cache_prune keeps. */
struct kiln_cache_prune_options {
    size_t size; /* sizeof, as KILN_CACHE_PRUNE_OPTIONS_INIT sets it (docs/abi.md) */
    /* Drop records not used in the last `older_than_days` days (last use
     * before today - older_than_days); UINT32_MAX: no age limit. */
    uint32_t older_than_days;
    /* Then drop the least recently used records (ties: the earliest in the
     * file first) until programs.kpc is at most this many bytes; 0: no size
     * limit. */
    uint64_t max_file_bytes;
};
#define KILN_CACHE_PRUNE_OPTIONS_INIT KILN_STRUCT_INIT(kiln_cache_prune_options)

/*
 * Drops records by age and size (least recently used first), then rewrites
 * the cache like kiln_cache_compact. Nothing is done when nothing is to be
 * dropped and the file is compact.
 * @return as kiln_cache_compact. Thread safety: as kiln_cache_compact.
 */
KILN_API int kiln_cache_prune(struct kiln_cache *c, const struct kiln_cache_prune_options *o,
                              struct kiln_cache_rewrite_report *report);

/* Why a prune drops a record. */
enum kiln_cache_prune_reason {
    KILN_CACHE_PRUNE_OLD = 1,  /* last used before today - older_than_days */
    KILN_CACHE_PRUNE_SIZE = 2, /* least recently used while the file is over max_file_bytes */
};

/* One record a prune drops. */
struct kiln_cache_prune_item {
    struct kiln_key key;
    uint64_t offset;       /* of its head in programs.kpc */
    uint64_t record_bytes; /* head, payload and padding */
    uint32_t size;         /* payload bytes */
    uint32_t last_use;     /* day of last use (kiln_cache_last_use) */
    enum kiln_cache_prune_reason reason;
};

/* What kiln_cache_prune would drop (kiln_cache_plan_prune). */
struct kiln_cache_prune_plan {
    size_t size; /* sizeof, as KILN_CACHE_PRUNE_PLAN_INIT sets it (docs/abi.md) */
    struct kiln_cache_prune_item *items; /* in the order a prune picks them: oldest use first */
    size_t count;
    uint64_t records_before;    /* live records */
    uint64_t records_after;     /* live records a prune keeps */
    uint64_t dropped_bytes;     /* record_bytes of the items */
    uint64_t file_bytes_before; /* programs.kpc now */
    uint64_t file_bytes_after;  /* programs.kpc after the prune's rewrite */
    uint32_t today;             /* the day the ages are counted from */
    uint32_t cutoff;            /* records last used before this day are old (0: no age limit) */
};
#define KILN_CACHE_PRUNE_PLAN_INIT KILN_STRUCT_INIT(kiln_cache_prune_plan)

/*
 * Says what kiln_cache_prune(c, o) would drop, from the same selection,
 * and writes nothing: no file is touched and no use is marked, so a
 * read-only handle will do. Free it with kiln_cache_prune_plan_free.
 * @return 0 with *plan filled, KILN_EINVAL without `c`, `o` or `plan`, or KILN_ENOMEM.
 * Thread safety: as kiln_cache_find (the handle's read lock is taken).
 */
KILN_API int kiln_cache_plan_prune_sized(struct kiln_cache *c,
                                         const struct kiln_cache_prune_options *o, size_t item_size,
                                         struct kiln_cache_prune_plan *plan);
/* kiln_cache_plan_prune_sized with the caller's sizeof(struct
 * kiln_cache_prune_item) as the items' stride (docs/abi.md, "Arrays"). */
static inline int kiln_cache_plan_prune(struct kiln_cache *c,
                                        const struct kiln_cache_prune_options *o,
                                        struct kiln_cache_prune_plan *plan)
{
    return kiln_cache_plan_prune_sized(c, o, sizeof(struct kiln_cache_prune_item), plan);
}

/* Frees what kiln_cache_plan_prune allocated (NULL, or a zeroed plan: a
 * no-op). Thread safety: any thread, on a plan no other thread uses. */
KILN_API void kiln_cache_prune_plan_free(struct kiln_cache_prune_plan *plan);

/* The dictionary a repack packs with. */
enum kiln_cache_dict_mode {
    KILN_CACHE_DICT_KEEP = 0,  /* the cache's own (KILN_CODEC_KILN only; none otherwise) */
    KILN_CACHE_DICT_NONE = 1,  /* no dictionary */
    KILN_CACHE_DICT_TRAIN = 2, /* train one from the cache's programs (KILN_CODEC_KILN only) */
};

/*
 * Rewrites every program payload (kiln_program_payload_parse) with another
 * codec: each stage is unpacked (with kiln_cache_dict) and packed again with
 * `codec` (enum kiln_codec) and the dictionary `mode` asks for; the records
 * file and the dictionary are switched crash-safely (see above). Records
 * that are not program payloads are copied as they are. The cache must be
 * opened with its dictionary loaded (every open but an inspection one does).
 * @return as kiln_cache_compact; also KILN_EINVAL for an unknown codec or a
 * dictionary asked with another codec than kiln or too few programs to
 * train one (fewer than 8 stages), KILN_ECORRUPT_BLOB when a stored stage
 * does not unpack (nothing is changed then).
 * Thread safety: as kiln_cache_compact.
 */
KILN_API int kiln_cache_repack(struct kiln_cache *c, enum kiln_codec codec,
                               enum kiln_cache_dict_mode mode,
                               struct kiln_cache_rewrite_report *report);

/* (0.2) How kiln_cache_repack_with repacks. Growable (kiln/common.h): set it
 * with KILN_CACHE_REPACK_OPTIONS_INIT. */
struct kiln_cache_repack_options {
    size_t size;    /* sizeof, as KILN_CACHE_REPACK_OPTIONS_INIT sets it (docs/abi.md) */
    uint32_t codec; /* enum kiln_codec; 0 is KILN_CODEC_RAW */
    uint32_t dict;  /* enum kiln_cache_dict_mode */
    /* kiln_pack_options.level: KILN_PACK_LEVEL_DEFAULT, 1 to 22, or
     * KILN_PACK_LEVEL_MAX, the shipping level for a layer packed once and
     * read by every user (about a hundred times slower to pack). */
    int32_t level;
};
#define KILN_CACHE_REPACK_OPTIONS_INIT KILN_STRUCT_INIT(kiln_cache_repack_options)

/*
 * (0.2) kiln_cache_repack with options: the codec, the dictionary mode and
 * the packing level. kiln_cache_repack(c, codec, mode, r) is this with
 * level KILN_PACK_LEVEL_DEFAULT.
 * @return as kiln_cache_repack; also KILN_EINVAL for a NULL `o` or a bad
 * `size`, or a bad level (kiln_pack_with's, when a stage is packed: nothing
 * is changed then). Thread safety: as kiln_cache_compact.
 */
KILN_API int kiln_cache_repack_with(struct kiln_cache *c, const struct kiln_cache_repack_options *o,
                                    struct kiln_cache_rewrite_report *report);

/* What kiln_cache_merge did. */
struct kiln_cache_merge_report {
    size_t size;            /* sizeof, as KILN_CACHE_MERGE_REPORT_INIT sets it (docs/abi.md) */
    uint64_t inputs;        /* caches read */
    uint64_t records_read;  /* live records in the inputs */
    uint64_t added;         /* records appended to the output */
    uint64_t replaced;      /* of those, keys the output had with another record */
    uint64_t same;          /* records the output already held byte for byte */
    uint64_t damaged;       /* input records that did not load (left out) */
    uint64_t records_after; /* live records in the output */
    uint64_t file_bytes_after;
    /* Input records whose key a later input also holds (its record wins).
     * records_read = added + superseded + same + damaged. */
    uint64_t superseded;
};
#define KILN_CACHE_MERGE_REPORT_INIT KILN_STRUCT_INIT(kiln_cache_merge_report)

/*
 * Joins the caches in `in_dirs` into `out`: each input is opened read-only
 * (through out's I/O table) and must have out's stamp and dictionary id,
 * else nothing is merged and KILN_ESTAMP is returned (an input that does
 * not open, or has another stamp, is logged at info only, naming it: the
 * caller reports it). For each key the newest record wins: inputs count as newer
 * than `out` and later inputs as newer than earlier ones. Winning payloads
 * are appended as they are (no unpack), carry their input's last use, and
 * are synced at the end. Appending keeps `out` whole at every moment
 * (compact it afterwards to drop what was superseded).
 * @return 0 with *report filled, KILN_ESTAMP, or an input's open error or
 * out's write error (records appended before it are kept).
 * Thread safety: as kiln_cache_compact for `out`; the inputs are opened by
 * the call itself.
 */
KILN_API int kiln_cache_merge(struct kiln_cache *out, const char *const *in_dirs, size_t n,
                              struct kiln_cache_merge_report *report);

#ifdef __cplusplus
}
#endif

#endif /* KILN_CACHE_H */
