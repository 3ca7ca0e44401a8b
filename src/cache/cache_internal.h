/*
 * cache_internal.h - the cache handle and the helpers the cache's files
 * share (private to src/cache).
 */
#ifndef KILN_CACHE_INTERNAL_H
#define KILN_CACHE_INTERNAL_H

#include "cache_format.h"
#include "kiln/pack.h"

#include <pthread.h>

#define KILN__CACHE_PATH_MAX 4096
/* The smallest size cap (kiln_cache_options.max_size): the records header. */
#define KILN__CACHE_MIN_CAP 64u
/* What an eviction goes down to: half the cap (cache_life.c says why). */
#define KILN__CACHE_LOW_WATER(cap) ((cap) / 2)

/* Reports `done` of `total` of the operation c->progress_what names to the
 * handle's progress callback, at most ten times a second, and always when
 * done == total (cache.c). */
struct kiln_cache;
void kiln__cache_progress(struct kiln_cache *c, uint64_t done, uint64_t total);

struct kiln_cache {
    const struct kiln_io *io;
    kiln_cache_progress_fn progress; /* kiln_cache_set_progress; NULL: none */
    void *progress_user;
    uint64_t progress_ns;      /* the last report, for the 0.1 s throttle */
    const char *progress_what; /* the operation running: "compact", ... */
    unsigned flags;
    unsigned threads; /* default for load_many, already resolved */
    char rec_path[KILN__CACHE_PATH_MAX];
    char idx_path[KILN__CACHE_PATH_MAX];
    char dir[KILN__CACHE_PATH_MAX];
    int rec_fd; /* -1 when the cache is empty and read-only with no file */
    int idx_fd; /* writers only; -1 otherwise */
    struct kiln__cache_header header;

    /* The gate between the calls that run side by side (put, sync, get,
     * load_many, save_use: read) and an eviction, which rewrites the file
     * under them (write; cache_life.c). Taken before every other lock. */
    pthread_rwlock_t gate;
    /* The size cap (kiln_cache_options.max_size, remembered in programs.kpm;
     * 0: none): set by the open, read by the evictions (cache_life.c). */
    uint64_t max_size;
    /* The worker passes kiln_cache_load_many ran on this handle (atomic):
     * one a call, whatever its layers (cache_load.c); the tests read it. */
    uint64_t load_passes;

    /* Stores from many threads (see cache.c): a put reserves its bytes and
     * a ticket under put_lock, writes outside any lock, and waits for its
     * ticket's turn to publish, so the table holds records in file order. */
    pthread_mutex_t put_lock;
    pthread_cond_t put_turn;
    uint64_t append_at;   /* where the next reservation starts (put_lock) */
    uint64_t next_ticket; /* the next reservation's ticket (put_lock) */
    uint64_t turn;        /* the ticket that publishes next (put_lock) */
    /* One sync at a time; guards idx_fd, idx_end, idx_count, idx_behind. */
    pthread_mutex_t sync_lock;
    size_t idx_count; /* table entries the index file holds */

    /* Guards everything below: publishing takes it for writing, lookups for reading. */
    pthread_rwlock_t lock;
    struct kiln_cache_entry *entries; /* every record in file order, superseded ones too */
    size_t count, cap;
    uint32_t *slots; /* open addressing: entry index + 1, 0 when empty */
    size_t nslots;   /* a power of two, at least twice the live records */
    size_t live;
    uint64_t live_bytes;
    uint64_t rec_end; /* end of the last published record (holes of failed puts included) */
    uint64_t idx_end; /* where the next index entry goes */
    int failed;       /* a records sync failed: the error every later put/sync returns (atomic) */

    struct kiln_cache_stats st; /* how the open went (records/bytes are filled on demand) */

    /* Dictionary and last use (cache_life.c). */
    struct kiln_pack_dict *dict; /* loaded programs.kpd, or NULL */
    uint32_t today;              /* the day uses are marked with */
    uint32_t *last_use;          /* per entry (same positions and capacity as entries) */
    uint8_t *run_used;           /* per entry: stored, loaded or found by this handle (atomic) */

    /* kiln_cache_options.executor, for load_many (has_executor: one was given). */
    struct kiln_executor executor;
    /* The last failure's text (kiln_cache_errmsg). */
    struct kiln__errbuf err;

    /* Read-only layers beneath this cache (kiln_cache_options.layers), in
     * search order; set by the open, never changed after it. */
    struct kiln_cache *layers[KILN_CACHE_MAX_LAYERS];
    unsigned nlayers;
    unsigned layers_left_out;

    /* The flags, together at the end so that they pack; each names its guard. */
    bool cap_spent;    /* every record left is this handle's: nothing to evict (atomic) */
    bool renewed;      /* this handle gave the records a new identity (cache_format.h) */
    bool idx_behind;   /* an index append failed: the index is rewritten at sync (sync_lock) */
    bool use_dirty;    /* a mark changed since programs.kpu was written (atomic) */
    bool has_executor; /* kiln_cache_options.executor was given (set by the open) */
};

/* Ends a public call on handle `c` (may be NULL) through kiln__err_end:
 * a failure's text goes to the handle's kiln_cache_errmsg and the thread's
 * kiln_last_errmsg. */
#define KILN__CACHE_END(c, mark, fn, rc)                                       \
    kiln__err_end((c) ? (struct kiln__errbuf *)&(c)->err : NULL, (mark), (fn), \
                  (c) ? (c)->dir : NULL, (rc))

/*
 * Which of this cache (0) and its first `below - 1` layers (1..) holds a
 * live record of `key` first, with the entry in *entry (may be NULL).
 * @return that index, or -1 when none of them does (and when below is 0).
 * Thread-safe like a lookup.
 */
int kiln__cache_holder(struct kiln_cache *c, struct kiln_key key, unsigned below,
                       struct kiln_cache_entry *entry);

/* Initialises the handle's locks (cache.c); kiln_cache_close destroys them.
 * @return 0 or KILN_ENOMEM (none left initialised). */
int kiln__cache_locks_init(struct kiln_cache *c);

/*
 * Puts a rewritten records file in place of the handle's (cache.c): `fd`
 * (locked, synced, already renamed over the records path) with header `h`
 * and its `n` entries in file order with their last-use days, ending at
 * `end` (with their marks of use by this handle). The old descriptor is closed; the index is marked
 * behind (the caller rewrites it). The handle is held alone.
 * @return 0, or the table's error (the handle then refuses puts: reopen).
 */
struct kiln__cache_kept {
    const struct kiln_cache_entry *entries;
    const uint32_t *uses; /* last-use days */
    const uint8_t *run;   /* used by this handle (kiln__cache_mark_run) */
    size_t n;
};
int kiln__cache_switch(struct kiln_cache *c, int fd, const struct kiln__cache_header *h,
                       const struct kiln__cache_kept *kept, uint64_t end);

/* Sets the last use of `key` to `day` (only when later, with only_raise).
 * Thread-safe like a lookup. */
void kiln__cache_set_use(struct kiln_cache *c, struct kiln_key key, uint32_t day, bool only_raise);

/* Empties the table (the handle is held alone). */
void kiln__cache_table_clear(struct kiln_cache *c);

/* What names one file or folder whatever the path that reaches it: the
 * device and inode on Unix, the volume serial number and file index on
 * Windows. */
struct kiln__file_id {
    uint64_t volume;
    uint64_t file;
};

static inline bool kiln__file_id_equal(struct kiln__file_id a, struct kiln__file_id b)
{
    return a.volume == b.volume && a.file == b.file;
}

/* The id of the file or folder at `path`, links followed (cache_sys_*.c).
 * @return 0 with *id, KILN_ENOENT when nothing is there, or the error. */
int kiln__file_id_of(const char *path, struct kiln__file_id *id);

/* Whether an entry of folder `dir` (links followed) is the file `id`
 * (cache_sys_*.c). @return 1, 0, or the error listing the folder. */
int kiln__dir_holds(const char *dir, struct kiln__file_id id);

/* Whether the file open as c->rec_fd is still the one at c->rec_path (equal
 * header bytes, and sizes with `sizes`: each records file has its own random
 * file id). Without `sizes` only the header's bytes count (for a handle
 * whose puts may be growing the file). The caller keeps the
 * header still (it holds the lock or the sync lock).
 * @return 0 with *same (false also when the path is gone), or the error. */
int kiln__cache_still_at_path(struct kiln_cache *c, bool sizes, bool *same);

/* Makes folder `dir` and its parents (cache_sys_*.c).
 * @return 0 when it is a folder now, or the error. */
int kiln__cache_make_dirs(const char *dir);

/* Adds a record to the table (a later record of the same key wins).
 * Caller holds the write lock or owns the cache alone. @return 0 or KILN_ENOMEM. */
int kiln__cache_add(struct kiln_cache *c, const struct kiln_cache_entry *e);

/* Looks a key up; @return the entry's index or -1. Caller holds the lock. */
int64_t kiln__cache_lookup(const struct kiln_cache *c, struct kiln_key key);

/* What kiln__cache_scan found. */
struct kiln__cache_scan {
    uint64_t end;           /* end of the last whole record (where valid data stops) */
    uint64_t records;       /* whole heads seen */
    uint64_t bad_records;   /* whole heads whose payload failed its checksum (verify only) */
    uint64_t damaged_bytes; /* bytes skipped between records */
    uint64_t tail_bytes;    /* bytes of a torn tail after `end` */
};

/* Called for each record the scan finds; `ok` is false for a record whose
 * payload failed its checksum (only when verifying). @return 0 or an error
 * that stops the scan. */
typedef int (*kiln__cache_scan_fn)(void *user, const struct kiln_cache_entry *e, bool ok);

/*
 * Reads records from `from` to `size` head by head through a window of
 * large reads (payloads are skipped unless `verify`, which reads and checks
 * every payload). A head that is not whole starts a search for the next
 * whole head (damage in the middle); when none follows, the rest is a torn
 * tail. `path` names the file in log lines.
 * @return 0 or the I/O error (or the callback's error).
 */
int kiln__cache_scan(const struct kiln_io *io, int fd, const char *path, uint64_t from,
                     uint64_t size, bool verify, kiln__cache_scan_fn fn, void *user,
                     struct kiln__cache_scan *out);

/*
 * Counts the record heads in [from, to) of the records file, bytes no
 * table entry names: records a repair left out of the index (damaged), or
 * none (holes, damaged bytes). A head counts when it is whole and its
 * record ends by `to`. @return 0 or the I/O error.
 */
int kiln__cache_scan_gap(const struct kiln_io *io, int fd, uint64_t from, uint64_t to,
                         uint64_t *records);

/*
 * Checks the record an index's last entry names when no whole record head
 * follows it: a crash may have kept its head but not its payload.
 * @return 1 when a whole head follows or its payload checks out, 0 when it
 * does not, or an I/O error.
 */
int kiln__cache_last_ok(const struct kiln_io *io, int fd, const struct kiln_cache_entry *e,
                        uint64_t size);

/* Allocates a buffer that is filled at once (large ones with their pages
 * populated up front); free it with kiln__cache_free_big(p, n). */
void *kiln__cache_alloc_big(size_t n);
void kiln__cache_free_big(void *p, size_t n);

/* Writes the whole index through a temporary file (cache.c). The records
 * must be synced first. @return 0 or the error (the index is then behind). */
int kiln__cache_index_write_whole(struct kiln_cache *c);

/* ---- cache_use.c and cache_dict.c: units below the store ------------------- */

/* Grows last_use and run_used to `cap` entries (called where entries
 * grows). @return 0 or KILN_ENOMEM. */
int kiln__cache_use_reserve(struct kiln_cache *c, size_t cap);

/* Marks entry `i` used by this handle: never evicted by the cap (under
 * the read or write lock). */
static inline void kiln__cache_mark_run(struct kiln_cache *c, size_t i)
{
    if (!__atomic_load_n(&c->run_used[i], __ATOMIC_RELAXED))
        __atomic_store_n(&c->run_used[i], 1, __ATOMIC_RELAXED);
}

/* Marks entry `i` used today (under the read or write lock), and used by
 * this handle. */
static inline void kiln__cache_touch(struct kiln_cache *c, size_t i)
{
    kiln__cache_mark_run(c, i);
    if (__atomic_load_n(&c->last_use[i], __ATOMIC_RELAXED) != c->today) {
        __atomic_store_n(&c->last_use[i], c->today, __ATOMIC_RELAXED);
        __atomic_store_n(&c->use_dirty, true, __ATOMIC_RELAXED);
    }
}

/* Writes programs.kpu when a mark changed (kiln_cache_save_use without
 * the gate: for sync, close and the rewrites, which hold it or need none).
 * @return 0 or the error (logged). */
int kiln__cache_save_use(struct kiln_cache *c);

/* Reads programs.kpm (cache_meta.c) into c->max_size: 0 when there is no
 * file, or one that cannot be used (one info line says why: a damaged
 * settings file costs the cap, never a record). */
void kiln__cache_meta_load(struct kiln_cache *c);

/* Writes programs.kpm with cap `max_size` (0: no cap, written as such),
 * crash-safely, and sets c->max_size. @return 0 or the error. */
int kiln__cache_meta_write(struct kiln_cache *c, uint64_t max_size);

/* Appends a record as kiln_cache_put does, without keeping the cap
 * (cache.c; kiln_cache_put in cache_cap.c adds that). */
int kiln__cache_put_record(struct kiln_cache *c, struct kiln_key key, const void *payload,
                           size_t size, uint32_t raw_size, uint8_t codec, uint16_t stages);

/* Keeps the cap after a put (cache_life.c): when programs.kpc is over it,
 * takes the gate for writing and evicts. @return 0 or the rewrite's error
 * (the records put are kept either way). */
int kiln__cache_keep_cap(struct kiln_cache *c);

/* Reads programs.kpu into last_use (entries it does not cover keep today). */
void kiln__cache_use_load(struct kiln_cache *c);

/*
 * Loads the dictionary the records header names (programs.kpd, a pending
 * programs.kpd.new, or opt->dict when its id matches; a writer puts the
 * right file in place). @return 0, or KILN_ECORRUPT (one error line) when
 * no dictionary of that id is to be had, or KILN_ENOMEM.
 */
int kiln__cache_dict_open(struct kiln_cache *c, const struct kiln_cache_options *opt);

/* Writes `dict` as programs.kpd (crash-safely) and keeps a copy as c->dict.
 * @return 0 or the error. */
int kiln__cache_dict_write(struct kiln_cache *c, const struct kiln_pack_dict *dict);

/* After a rewrite's commit point: puts the new dictionary in place
 * (programs.kpd.new renamed, the second copy written; NULL: both copies
 * removed) and keeps it as c->dict. @return 0 or the error (the next open
 * finishes the switch). */
int kiln__cache_dict_switch(struct kiln_cache *c, const struct kiln_pack_dict *dict);

/*
 * Checks both copies of dictionary `want` (0: none) in folder `dir`, and with
 * `repair` writes a missing or damaged copy again from the whole one.
 * *whole: whole copies (2 when none is named); *damaged: no whole copy, or a
 * copy of other bytes (a missing copy beside a whole one is not damage);
 * `text` says which. @return 0 or KILN_ENOMEM.
 */
int kiln__cache_dict_check(const struct kiln_io *io, const char *dir, uint64_t want, bool repair,
                           unsigned *whole, bool *damaged, char *text, size_t cap);

/* Keeps a copy of `dict` (NULL: none) as c->dict. @return 0 or KILN_ENOMEM
 * (c->dict is then NULL). */
int kiln__cache_dict_set(struct kiln_cache *c, const struct kiln_pack_dict *dict);

/* @return today's day number from the system clock. */
uint32_t kiln__cache_clock_day(void);

#endif /* KILN_CACHE_INTERNAL_H */
