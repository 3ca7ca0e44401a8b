/*
 * cache.c - opening, appending to, syncing and looking up a program cache.
 *
 * Invariants and why they hold:
 *
 * - The index never gets ahead of the records. put() writes the record
 *   first and its index entry second; sync() syncs the records file before
 *   the index; an open that appends entries or rewrites the index syncs the
 *   records first. An index entry that survives a crash without its record
 *   is caught at the next open: every entry must lie inside the records
 *   file and the last one must equal that record's head, else the index is
 *   rebuilt from the records; a record damaged behind a matching entry is
 *   caught by its checksum at load time and reported missing.
 *
 * - The index is a cache of the records, never the truth. Whenever it cannot
 *   be used, written or appended to, the records alone say what the cache
 *   holds; a failed index write only marks the index behind (rewritten whole
 *   at the next sync, or rebuilt at the next open). So no index failure can
 *   lose a record.
 *
 * - Nothing synced is lost. Records are only ever appended; bytes are cut
 *   only from a torn tail (after the last record whose head is whole and
 *   whose extent fits in the file), and a record that was synced is whole.
 *   A failed records sync may have dropped writes silently (the kernel
 *   forgets the error once reported), so the handle then refuses further
 *   puts and syncs: a reopen scans what is really there.
 *
 * - A replaced file is never half there. The records file is created (and
 *   re-created on a stamp mismatch) under a temporary name, synced, then
 *   renamed; the index is rewritten the same way (kiln_io_replace_file).
 *
 * - One writer. A writer holds an exclusive lock on the records file's open
 *   file description for as long as the cache is open; a new records file is
 *   locked before it is renamed into place, so a second writer that opens
 *   the path at any moment finds the lock.
 */
#include "cache_internal.h"
#include "kiln/pool.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"new", "index", "index+tail", "rebuilt", "restarted"};

const char *kiln_cache_open_kind_name(enum kiln_cache_open_kind kind)
{
    return (unsigned)kind < KILN_ARRAY_LEN(kind_names) ? kind_names[kind] : "?";
}

/* ---- the key table ------------------------------------------------------ */

static size_t slot_of(struct kiln_key k, size_t mask)
{
    /* Keys are usually hashes already, but callers may pick any key: mix. */
    uint64_t h = (k.lo ^ (k.hi * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
    return (size_t)(h ^ (h >> 29)) & mask;
}

static int table_grow(struct kiln_cache *c)
{
    size_t n = c->nslots ? c->nslots * 2 : 1024;
    uint32_t *s = calloc(n, sizeof(*s));
    if (!s)
        return KILN_ENOMEM;
    for (size_t i = 0; i < c->nslots; i++) {
        uint32_t v = c->slots[i];
        if (!v)
            continue;
        size_t j = slot_of(c->entries[v - 1].key, n - 1);
        while (s[j])
            j = (j + 1) & (n - 1);
        s[j] = v;
    }
    free(c->slots);
    c->slots = s;
    c->nslots = n;
    return KILN_OK;
}

int64_t kiln__cache_lookup(const struct kiln_cache *c, struct kiln_key key)
{
    if (!c->nslots)
        return -1;
    size_t mask = c->nslots - 1;
    for (size_t i = slot_of(key, mask);; i = (i + 1) & mask) {
        uint32_t v = c->slots[i];
        if (!v)
            return -1;
        if (kiln_key_equal(c->entries[v - 1].key, key))
            return (int64_t)v - 1;
    }
}

int kiln__cache_add(struct kiln_cache *c, const struct kiln_cache_entry *e)
{
    if (c->count >= UINT32_MAX - 1)
        return KILN_ERANGE;
    if (c->count == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1024;
        struct kiln_cache_entry *n = realloc(c->entries, cap * sizeof(*n));
        if (!n)
            return KILN_ENOMEM;
        c->entries = n;
        KILN_TRY(kiln__cache_use_reserve(c, cap));
        c->cap = cap;
    }
    if ((c->live + 1) * 2 > c->nslots)
        KILN_TRY(table_grow(c));
    c->entries[c->count] = *e;
    c->last_use[c->count] = c->today;
    __atomic_store_n(&c->use_dirty, true, __ATOMIC_RELAXED);
    size_t mask = c->nslots - 1;
    size_t i = slot_of(e->key, mask);
    while (c->slots[i] && !kiln_key_equal(c->entries[c->slots[i] - 1].key, e->key))
        i = (i + 1) & mask;
    if (c->slots[i]) {
        c->live_bytes -= c->entries[c->slots[i] - 1].size;
        c->st.superseded++;
    } else {
        c->live++;
    }
    c->live_bytes += e->size;
    c->slots[i] = (uint32_t)(c->count + 1);
    c->count++;
    return KILN_OK;
}

static void table_clear(struct kiln_cache *c)
{
    c->count = 0;
    c->live = 0;
    c->live_bytes = 0;
    c->st.superseded = 0;
    if (c->slots)
        memset(c->slots, 0, c->nslots * sizeof(*c->slots));
}

/* ---- files -------------------------------------------------------------- */

/* Writes the first `n` entries of the table as the whole index, through a
 * temporary file. The records they name must be synced first. */
static int index_write_upto(struct kiln_cache *c, size_t n)
{
    size_t bytes = KILN__CACHE_HEADER_SIZE + n * (size_t)KILN__CACHE_ENTRY_SIZE;
    unsigned char *buf = malloc(bytes);
    if (!buf)
        return KILN_ENOMEM;
    struct kiln__cache_header h = c->header;
    h.unit = KILN__CACHE_ENTRY_SIZE;
    kiln__cache_header_encode(buf, KILN__CACHE_IDX_MAGIC, &h);
    /* Puts on other threads may grow the table meanwhile. */
    pthread_rwlock_rdlock(&c->lock);
    for (size_t i = 0; i < n; i++)
        kiln__cache_entry_encode(buf + KILN__CACHE_HEADER_SIZE + i * KILN__CACHE_ENTRY_SIZE,
                                 &c->entries[i]);
    pthread_rwlock_unlock(&c->lock);
    if (c->idx_fd >= 0) {
        c->io->close(c->io, c->idx_fd);
        c->idx_fd = -1;
    }
    int rc = kiln_io_replace_file(c->io, c->idx_path, buf, bytes);
    free(buf);
    if (rc == KILN_OK)
        rc = c->io->open(c->io, c->idx_path, KILN_IO_RDWR, &c->idx_fd);
    if (rc == KILN_OK) {
        c->idx_end = bytes;
        c->idx_count = n;
        c->idx_behind = false;
    } else {
        c->idx_fd = -1;
        c->idx_behind = true;
    }
    return rc;
}

int kiln__cache_index_write_whole(struct kiln_cache *c)
{
    return index_write_upto(c, c->count);
}

/* Moves or removes the files of a cache being started over. */
static int set_aside(struct kiln_cache *c, const char *path, uint64_t old_stamp, bool required)
{
    int rc;
    if (c->flags & KILN_CACHE_MOVE_ASIDE) {
        char aside[KILN__CACHE_PATH_MAX + 32];
        snprintf(aside, sizeof(aside), "%s.%016" PRIx64 ".old", path, old_stamp);
        rc = c->io->rename(c->io, path, aside);
    } else {
        rc = c->io->unlink(c->io, path);
    }
    return rc == KILN_ENOENT && !required ? KILN_OK : rc;
}

/*
 * Makes a new, empty records file with the caller's stamp: written and
 * locked under a temporary name, synced, then renamed over the records
 * path. With `old` set the old files are moved aside (or removed) first.
 * On success c->rec_fd is the new file, locked.
 */
static int create_records(struct kiln_cache *c, const struct kiln_cache_options *opt,
                          const struct kiln__cache_header *old)
{
    const struct kiln_io *io = c->io;
    char tmp[KILN__CACHE_PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.new", c->rec_path);
    int fd;
    KILN_TRY(io->open(io, tmp, KILN_IO_RDWR | KILN_IO_CREATE, &fd));
    /* Lock before truncating: a second creator racing us must not clobber
     * the file we are writing. */
    int rc = io->lock(io, fd, KILN_IO_LOCK_EXCLUSIVE);
    if (rc < 0) {
        io->close(io, fd);
        return rc;
    }
    if (!old) {
        /* Someone may have finished creating the cache while we opened. */
        int probe;
        if (io->open(io, c->rec_path, KILN_IO_READ, &probe) == KILN_OK) {
            io->close(io, probe);
            io->close(io, fd);
            return KILN_EEXIST;
        }
    }
    c->header.version = KILN__CACHE_VERSION;
    c->header.unit = KILN__CACHE_HEAD_SIZE;
    c->header.stamp = opt->stamp;
    c->header.dict_id = opt->dict_id;
    rc = kiln_random_bytes(c->header.file_id, sizeof(c->header.file_id));
    unsigned char hb[KILN__CACHE_HEADER_SIZE];
    kiln__cache_header_encode(hb, KILN__CACHE_REC_MAGIC, &c->header);
    if (rc == KILN_OK)
        rc = io->truncate(io, fd, 0);
    if (rc == KILN_OK)
        rc = kiln_io_write_full(io, fd, hb, sizeof(hb), 0);
    if (rc == KILN_OK)
        rc = io->fsync(io, fd);
    /* The old index goes first: a crash after it leaves old records with no
     * index (started over again at the next open), never a stale index
     * beside new records. */
    if (rc == KILN_OK && old)
        rc = set_aside(c, c->idx_path, old->stamp, false);
    if (rc == KILN_OK && old && (c->flags & KILN_CACHE_MOVE_ASIDE))
        rc = set_aside(c, c->rec_path, old->stamp, true);
    /* The dictionary the new records name goes in place before them. */
    if (rc == KILN_OK && opt->dict) {
        rc = kiln__cache_dict_write(c, opt->dict);
    } else if (rc == KILN_OK) {
        kiln_pack_dict_destroy(c->dict);
        c->dict = NULL;
    }
    if (rc == KILN_OK)
        rc = io->rename(io, tmp, c->rec_path);
    if (rc == KILN_OK)
        rc = io->fsync_dir(io, c->dir);
    if (rc < 0) {
        KILN_WARN("cache", "%s: could not create the records file: %s", c->rec_path,
                  kiln_strerror(rc));
        io->close(io, fd);
        io->unlink(io, tmp);
        return rc;
    }
    if (c->rec_fd >= 0)
        io->close(io, c->rec_fd);
    c->rec_fd = fd;
    c->rec_end = KILN__CACHE_HEADER_SIZE;
    c->append_at = c->rec_end;
    /* An empty index; if it cannot be written the next sync or open makes it. */
    table_clear(c);
    if (kiln__cache_index_write_whole(c) < 0)
        KILN_WARN("cache", "%s: could not write the new index; it will be rebuilt", c->idx_path);
    return KILN_OK;
}

/* ---- open --------------------------------------------------------------- */

struct scan_add {
    struct kiln_cache *c;
    uint64_t added;
};

static int scan_add_fn(void *user, const struct kiln_cache_entry *e, bool ok)
{
    (void)ok;
    struct scan_add *s = user;
    s->added++;
    return kiln__cache_add(s->c, e);
}

/*
 * Reads the index and, when it is usable, fills the table from it.
 * @return 1 when used, 0 when not (with *why set), or an error.
 */
static int load_index(struct kiln_cache *c, uint64_t rec_size, const char **why, size_t *partial)
{
    void *data = NULL;
    size_t n = 0;
    *partial = 0;
    uint64_t max_entries = (rec_size - KILN__CACHE_HEADER_SIZE) / KILN__CACHE_HEAD_SIZE;
    size_t max = (size_t)(KILN__CACHE_HEADER_SIZE + (max_entries + 1) * KILN__CACHE_ENTRY_SIZE);
    int rc = kiln_io_read_file(c->io, c->idx_path, max, &data, &n);
    if (rc == KILN_ENOENT) {
        *why = "it is missing";
        return 0;
    }
    if (rc == KILN_ERANGE) {
        *why = "it holds more entries than the records could";
        return 0;
    }
    if (rc == KILN_ENOMEM)
        return rc;
    if (rc < 0) {
        *why = "it could not be read";
        return 0;
    }
    size_t cap =
        n > KILN__CACHE_HEADER_SIZE ? (n - KILN__CACHE_HEADER_SIZE) / KILN__CACHE_ENTRY_SIZE : 0;
    struct kiln_cache_entry *es = malloc((cap ? cap : 1) * sizeof(*es));
    if (!es) {
        free(data);
        return KILN_ENOMEM;
    }
    struct kiln__cache_index_parse p;
    rc = kiln__cache_index_parse(data, n, rec_size, es, &p);
    free(data);
    int used = 0;
    if (rc < 0) {
        *why = p.problem;
    } else if (p.header.stamp != c->header.stamp || p.header.dict_id != c->header.dict_id) {
        *why = "it has another stamp or dictionary";
    } else if (memcmp(p.header.file_id, c->header.file_id, sizeof(p.header.file_id)) != 0) {
        *why = "it belongs to another records file";
    } else {
        used = 1;
        /* The last entry must be the record it names: this catches an index
         * written for records that were later cut or replaced. When nothing
         * whole follows that record, its payload must check out too (a
         * crash can keep an unsynced head and lose its payload); entries
         * for such records are dropped and their bytes scanned again. */
        for (int dropped = 0; used && p.whole > 0; dropped++) {
            const struct kiln_cache_entry *last = &es[p.whole - 1];
            unsigned char hb[KILN__CACHE_HEAD_SIZE];
            struct kiln_cache_entry head;
            rc = kiln_io_read_full(c->io, c->rec_fd, hb, sizeof(hb), last->offset);
            if (rc < 0 || kiln__cache_head_decode(hb, sizeof(hb), &head) < 0 ||
                !kiln__cache_head_matches(&head, last) || dropped == 16) {
                *why = "its last entry does not match its record";
                used = 0;
                break;
            }
            rc = kiln__cache_last_ok(c->io, c->rec_fd, last, rec_size);
            if (rc < 0) {
                free(es);
                return rc;
            }
            if (rc == 1)
                break;
            p.whole--;
            p.partial = 1; /* the index file holds more than is used */
        }
        for (size_t i = 0; used && i < p.whole; i++) {
            rc = kiln__cache_add(c, &es[i]);
            if (rc < 0) {
                free(es);
                return rc;
            }
        }
        *partial = p.partial;
    }
    free(es);
    return used;
}

/* Appends to the open's one-line account (cut short when it is long). */
static void say(char *text, size_t cap, const char *fmt, ...) KILN_PRINTF(3, 4);

static void say(char *text, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(text);
    if (len + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text + len, cap - len, fmt, ap);
    va_end(ap);
}

/*
 * Whether the file locked as c->rec_fd is still the one at c->rec_path. A
 * writer that rewrote the cache (compact, prune, repack) renames a new
 * records file over the path and then drops its lock on the old one; a
 * writer that opened the old file just before and locks it just after would
 * otherwise append to a file no longer in the folder. Two records files
 * never share their header bytes (each has its own random file id), so
 * equal headers and sizes mean the same file.
 */
static int still_at_path(struct kiln_cache *c, bool *same)
{
    const struct kiln_io *io = c->io;
    unsigned char a[KILN__CACHE_HEADER_SIZE], b[KILN__CACHE_HEADER_SIZE];
    uint64_t size_a, size_b;
    int fd;
    *same = false;
    int rc = io->open(io, c->rec_path, KILN_IO_READ, &fd);
    if (rc == KILN_ENOENT)
        return KILN_OK; /* moved aside: not the same */
    KILN_TRY(rc);
    rc = io->size(io, c->rec_fd, &size_a);
    if (rc == KILN_OK)
        rc = io->size(io, fd, &size_b);
    if (rc == KILN_OK && size_a == size_b) {
        size_t n = (size_t)KILN_MIN(size_a, (uint64_t)sizeof(a));
        rc = n ? kiln_io_read_full(io, c->rec_fd, a, n, 0) : KILN_OK;
        if (rc == KILN_OK && n)
            rc = kiln_io_read_full(io, fd, b, n, 0);
        *same = rc == KILN_OK && (n == 0 || memcmp(a, b, n) == 0);
    }
    io->close(io, fd);
    return rc;
}

static int open_files(struct kiln_cache *c, const struct kiln_cache_options *opt, char *text,
                      size_t text_cap, bool *warn)
{
    const struct kiln_io *io = c->io;
    bool ro = c->flags & KILN_CACHE_READ_ONLY;
    int rc;
    for (int attempt = 0;; attempt++) {
        c->rec_fd = -1;
        rc = io->open(io, c->rec_path, ro ? KILN_IO_READ : KILN_IO_RDWR, &c->rec_fd);
        if (rc < 0 || ro)
            break;
        rc = io->lock(io, c->rec_fd, KILN_IO_LOCK_EXCLUSIVE);
        bool same = true;
        if (rc == KILN_OK && attempt < 8)
            rc = still_at_path(c, &same);
        if (rc < 0 || same)
            break;
        /* Replaced while we waited for the lock: open the new file. */
        io->lock(io, c->rec_fd, KILN_IO_UNLOCK);
        io->close(io, c->rec_fd);
        c->rec_fd = -1;
    }
    if (rc == KILN_ENOENT) {
        c->rec_fd = -1;
        if (ro || !(c->flags & KILN_CACHE_CREATE)) {
            /* Failures returned to the caller are logged at info only: the
             * caller reports them, so a command prints one line, not two. */
            KILN_INFO("cache", "%s: no cache here", c->rec_path);
            return KILN_ENOENT;
        }
        KILN_TRY(create_records(c, opt, NULL));
        c->st.open_kind = KILN_CACHE_OPENED_NEW;
        say(text, text_cap, "%s: new cache created", c->dir);
        return KILN_OK;
    }
    if (rc < 0 && c->rec_fd < 0) {
        KILN_INFO("cache", "%s: cannot open: %s", c->rec_path, kiln_strerror(rc));
        return rc;
    }
    if (!ro) {
        if (rc == KILN_EBUSY) {
            KILN_INFO("cache", "%s: another writer holds this cache; open it read-only or later",
                      c->rec_path);
            return rc;
        }
        if (rc < 0) {
            KILN_INFO("cache", "%s: cannot lock: %s", c->rec_path, kiln_strerror(rc));
            return rc;
        }
    }

    uint64_t size;
    KILN_TRY(io->size(io, c->rec_fd, &size));
    unsigned char hb[KILN__CACHE_HEADER_SIZE] = {0};
    size_t hn = (size_t)KILN_MIN(size, (uint64_t)sizeof(hb));
    if (hn)
        KILN_TRY(kiln_io_read_full(io, c->rec_fd, hb, hn, 0));
    enum kiln__cache_header_verdict v =
        kiln__cache_header_decode(hb, hn, KILN__CACHE_REC_MAGIC, &c->header);
    if (v == KILN__HEADER_ZERO && size <= KILN__CACHE_HEADER_SIZE) {
        /* A records file that was never finished (empty or a zero header):
         * nothing in it was ever a record. */
        if (ro) {
            memset(&c->header, 0, sizeof(c->header));
            c->header.stamp = opt->stamp;
            c->header.dict_id = opt->dict_id;
            c->rec_end = size;
            c->st.open_kind = KILN_CACHE_OPENED_NEW;
            say(text, text_cap, "%s: records file is empty", c->rec_path);
            return KILN_OK;
        }
        KILN_TRY(create_records(c, opt, &c->header));
        c->st.open_kind = KILN_CACHE_OPENED_NEW;
        say(text, text_cap, "%s: unfinished records file replaced by a new cache", c->rec_path);
        *warn = true;
        return KILN_OK;
    }
    if (v == KILN__HEADER_FOREIGN || v == KILN__HEADER_VERSION) {
        KILN_INFO("cache", "%s: %s; left untouched", c->rec_path,
                  v == KILN__HEADER_FOREIGN ? "not a kiln records file"
                                            : "written in another format version");
        return KILN_EFORMAT;
    }
    if (v != KILN__HEADER_OK) {
        KILN_INFO("cache", "%s: the file header is damaged; left untouched", c->rec_path);
        return KILN_ECORRUPT_HEADER;
    }
    bool dict_ok = (c->flags & KILN_CACHE_USE_DICT) || c->header.dict_id == opt->dict_id;
    if (!(c->flags & (KILN_CACHE_ANY_STAMP | KILN_CACHE_KEEP_STAMP)) &&
        (c->header.stamp != opt->stamp || !dict_ok)) {
        if (ro) {
            KILN_INFO("cache",
                      "%s: written with stamp %016" PRIx64 " dictionary %016" PRIx64
                      ", not %016" PRIx64 "/%016" PRIx64 "; not opened (read-only)",
                      c->rec_path, c->header.stamp, c->header.dict_id, opt->stamp, opt->dict_id);
            return KILN_ESTAMP;
        }
        struct kiln__cache_header old = c->header;
        KILN_TRY(create_records(c, opt, &old));
        c->st.open_kind = KILN_CACHE_OPENED_RESTARTED;
        say(text, text_cap,
            "%s: written with stamp %016" PRIx64 " dictionary %016" PRIx64 ", not %016" PRIx64
            "/%016" PRIx64 "; old files %s, cache started over",
            c->dir, old.stamp, old.dict_id, opt->stamp, opt->dict_id,
            (c->flags & KILN_CACHE_MOVE_ASIDE) ? "moved aside (*.old)" : "removed");
        *warn = true;
        return KILN_OK;
    }

    /* The dictionary the records name, when the caller unpacks with it. */
    if (c->header.dict_id && ((c->flags & KILN_CACHE_USE_DICT) || opt->dict)) {
        rc = kiln__cache_dict_open(c, opt);
        if (rc == KILN_ECORRUPT && !ro && !(c->flags & KILN_CACHE_KEEP_STAMP)) {
            struct kiln__cache_header old = c->header;
            KILN_TRY(create_records(c, opt, &old));
            c->st.open_kind = KILN_CACHE_OPENED_RESTARTED;
            say(text, text_cap,
                "%s: the dictionary %016" PRIx64 " of the records is missing or "
                "damaged; cache started over",
                c->dir, old.dict_id);
            *warn = true;
            return KILN_OK;
        }
        if (rc < 0)
            return rc;
    }

    /* The index, then whatever the records hold past it. */
    const char *why = NULL;
    size_t partial = 0;
    int used = load_index(c, size, &why, &partial);
    if (used < 0)
        return used;
    if (!used)
        table_clear(c);
    uint64_t from = c->count ? c->entries[c->count - 1].offset +
                                   kiln__cache_rec_len(c->entries[c->count - 1].size)
                             : KILN__CACHE_HEADER_SIZE;
    size_t indexed = c->count;
    struct scan_add sa = {.c = c};
    struct kiln__cache_scan s;
    rc = kiln__cache_scan(io, c->rec_fd, c->rec_path, from, size, false, scan_add_fn, &sa, &s);
    if (rc < 0) {
        KILN_WARN("cache", "%s: reading records at open failed: %s", c->rec_path,
                  kiln_strerror(rc));
        return rc;
    }
    c->rec_end = s.end;
    c->st.tail_records = used ? sa.added : 0;
    c->st.damaged_bytes = s.damaged_bytes;
    c->st.cut_bytes = s.tail_bytes;

    if (!used) {
        c->st.open_kind = KILN_CACHE_OPENED_REBUILT;
        say(text, text_cap, "%s: index not used (%s): %zu records scanned%s", c->dir, why, c->count,
            ro ? " (read-only: index left as it is)" : ", index rewritten");
        *warn = true;
    } else if (sa.added || partial) {
        c->st.open_kind = KILN_CACHE_OPENED_INDEX_TAIL;
        say(text, text_cap,
            "%s: index used for %zu records%s; %" PRIu64 " more read past its end%s", c->dir,
            indexed, partial ? " (cut short)" : "", sa.added,
            ro ? " (read-only: index left behind)" : " and indexed");
    } else {
        c->st.open_kind = KILN_CACHE_OPENED_INDEX;
        say(text, text_cap, "%s: index used, %zu records", c->dir, indexed);
    }
    if (s.tail_bytes) {
        say(text, text_cap, "; torn tail of %" PRIu64 " bytes at offset %" PRIu64 " %s",
            s.tail_bytes, s.end, ro ? "ignored (read-only)" : "cut");
        *warn = true;
    }
    if (s.damaged_bytes) {
        say(text, text_cap, "; %" PRIu64 " damaged bytes between records skipped", s.damaged_bytes);
        *warn = true;
    }
    if (ro)
        return KILN_OK;

    /* Repairs. Records first: cut the torn tail and make the records durable
     * before any index entry names them. */
    if (s.tail_bytes) {
        rc = io->truncate(io, c->rec_fd, s.end);
        if (rc < 0) {
            KILN_WARN("cache", "%s: cannot cut the torn tail at %" PRIu64 ": %s", c->rec_path,
                      s.end, kiln_strerror(rc));
            return rc;
        }
    }
    bool index_dirty = !used || sa.added || partial;
    if (s.tail_bytes || index_dirty) {
        rc = io->fsync(io, c->rec_fd);
        if (rc < 0) {
            KILN_WARN("cache", "%s: sync failed: %s", c->rec_path, kiln_strerror(rc));
            return rc;
        }
    }
    if (!used) {
        rc = kiln__cache_index_write_whole(c);
    } else {
        rc = io->open(io, c->idx_path, KILN_IO_RDWR, &c->idx_fd);
        if (rc < 0)
            c->idx_fd = -1;
        c->idx_end = KILN__CACHE_HEADER_SIZE + indexed * (uint64_t)KILN__CACHE_ENTRY_SIZE;
        if (rc == KILN_OK && partial)
            rc = io->truncate(io, c->idx_fd, c->idx_end);
        if (rc == KILN_OK && sa.added) {
            size_t n = (c->count - indexed) * KILN__CACHE_ENTRY_SIZE;
            unsigned char *buf = malloc(n);
            rc = buf ? KILN_OK : KILN_ENOMEM;
            for (size_t i = indexed; buf && i < c->count; i++)
                kiln__cache_entry_encode(buf + (i - indexed) * KILN__CACHE_ENTRY_SIZE,
                                         &c->entries[i]);
            if (rc == KILN_OK)
                rc = kiln_io_write_full(io, c->idx_fd, buf, n, c->idx_end);
            free(buf);
            if (rc == KILN_OK)
                c->idx_end += n;
        }
        if (rc == KILN_OK && index_dirty)
            rc = io->fsync(io, c->idx_fd);
        if (rc < 0)
            c->idx_behind = true;
    }
    if (rc < 0)
        KILN_WARN("cache",
                  "%s: could not bring the index up to date (%s); it is rewritten at "
                  "the next sync",
                  c->idx_path, kiln_strerror(rc));
    return KILN_OK;
}

int kiln_cache_open(const char *dir, const struct kiln_cache_options *opt, struct kiln_cache **out)
{
    static const struct kiln_cache_options none = {0};
    *out = NULL;
    if (!opt)
        opt = &none;
    /* A dictionary given names the dictionary id. */
    struct kiln_cache_options eff = *opt;
    if (opt->dict) {
        eff.dict_id = kiln_pack_dict_id(opt->dict);
        if (opt->dict_id && opt->dict_id != eff.dict_id)
            return KILN_EINVAL;
    }
    if (eff.flags & KILN_CACHE_KEEP_STAMP)
        eff.flags |= KILN_CACHE_USE_DICT;
    opt = &eff;
    if (!dir || ((opt->flags & KILN_CACHE_ANY_STAMP) && !(opt->flags & KILN_CACHE_READ_ONLY)))
        return KILN_EINVAL;
    uint64_t t0 = kiln_now_ns();
    struct kiln_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return KILN_ENOMEM;
    c->io = opt->io ? opt->io : kiln_io_default();
    c->flags = opt->flags;
    c->today = opt->today ? opt->today : kiln__cache_clock_day();
    c->threads = kiln_pool_auto_workers(KILN_POOL_WORK_READ, opt->threads, NULL);
    c->rec_fd = -1;
    c->idx_fd = -1;
    c->st.read_only = opt->flags & KILN_CACHE_READ_ONLY;
    if (kiln__path_join(c->rec_path, sizeof(c->rec_path), dir, KILN_CACHE_RECORDS_FILE) < 0 ||
        kiln__path_join(c->idx_path, sizeof(c->idx_path), dir, KILN_CACHE_INDEX_FILE) < 0 ||
        snprintf(c->dir, sizeof(c->dir), "%s", dir) >= (int)sizeof(c->dir)) {
        free(c);
        return KILN_ERANGE;
    }
    if (pthread_rwlock_init(&c->lock, NULL) != 0) {
        free(c);
        return KILN_ENOMEM;
    }
    if (pthread_mutex_init(&c->put_lock, NULL) != 0 ||
        pthread_mutex_init(&c->sync_lock, NULL) != 0 ||
        pthread_cond_init(&c->put_turn, NULL) != 0) {
        /* Practically never: these only fail for want of memory. */
        pthread_rwlock_destroy(&c->lock);
        free(c);
        return KILN_ENOMEM;
    }
    char text[sizeof(c->st.open_text)];
    bool warn = false;
    int rc;
    /* A racing creator can make the records file appear between our open
     * and our create: then open what it made. */
    for (int attempt = 0;; attempt++) {
        text[0] = '\0';
        rc = open_files(c, opt, text, sizeof(text), &warn);
        if (rc != KILN_EEXIST || attempt == 2)
            break;
        table_clear(c);
    }
    if (rc < 0) {
        kiln_cache_close(c);
        return rc;
    }
    if (c->idx_end == 0)
        c->idx_end = KILN__CACHE_HEADER_SIZE + c->count * (uint64_t)KILN__CACHE_ENTRY_SIZE;
    c->idx_count = c->count;
    c->append_at = c->rec_end;
    kiln__cache_use_load(c);
    c->st.stamp = c->header.stamp;
    c->st.dict_id = c->header.dict_id;
    c->st.open_ns = kiln_now_ns() - t0;
    memcpy(c->st.open_text, text, sizeof(text));
    if (warn)
        KILN_WARN("cache", "%s", text);
    else
        KILN_INFO("cache", "%s (%.1f ms)", text, (double)c->st.open_ns / 1e6);
    *out = c;
    return KILN_OK;
}

void kiln_cache_close(struct kiln_cache *c)
{
    if (!c)
        return;
    if (!(c->flags & KILN_CACHE_READ_ONLY) && c->rec_fd >= 0 &&
        !__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE))
        kiln_cache_save_use(c);
    if (c->idx_fd >= 0)
        c->io->close(c->io, c->idx_fd);
    if (c->rec_fd >= 0) {
        if (!(c->flags & KILN_CACHE_READ_ONLY))
            c->io->lock(c->io, c->rec_fd, KILN_IO_UNLOCK);
        c->io->close(c->io, c->rec_fd);
    }
    pthread_rwlock_destroy(&c->lock);
    pthread_mutex_destroy(&c->put_lock);
    pthread_mutex_destroy(&c->sync_lock);
    pthread_cond_destroy(&c->put_turn);
    kiln_pack_dict_destroy(c->dict);
    free(c->last_use);
    free(c->entries);
    free(c->slots);
    free(c);
}

/* ---- put and sync ------------------------------------------------------- */

/*
 * Reserves `len` bytes at the end of the records and the next ticket.
 * Under KILN_CACHE_BROKEN_RESERVE (the negative control of the threads
 * test, never a real build) the offset is read without being reserved, as
 * before issue 13: concurrent puts then write over each other.
 */
static void reserve(struct kiln_cache *c, uint64_t len, uint64_t *offset, uint64_t *ticket)
{
#ifdef KILN_CACHE_BROKEN_RESERVE
    *offset = __atomic_load_n(&c->append_at, __ATOMIC_RELAXED);
    pthread_mutex_lock(&c->put_lock);
#else
    pthread_mutex_lock(&c->put_lock);
    *offset = c->append_at;
    c->append_at += len;
#endif
    *ticket = c->next_ticket++;
    pthread_mutex_unlock(&c->put_lock);
}

/* Writes record `e` at its offset: payload and padding first, the head
 * last, so a write that fails leaves no whole head behind. */
static int write_record(struct kiln_cache *c, const struct kiln_cache_entry *e, const void *payload)
{
    const struct kiln_io *io = c->io;
    uint64_t body = kiln__cache_rec_len(e->size) - KILN__CACHE_HEAD_SIZE;
    uint64_t at = e->offset + KILN__CACHE_HEAD_SIZE;
    unsigned char small[4096];
    int rc = KILN_OK;
    if (body && body <= sizeof(small)) {
        /* One write for a small payload and its padding. */
        memcpy(small, payload, e->size);
        memset(small + e->size, 0, (size_t)body - e->size);
        rc = kiln_io_write_full(io, c->rec_fd, small, (size_t)body, at);
    } else if (body) {
        static const unsigned char pad[8];
        rc = kiln_io_write_full(io, c->rec_fd, payload, e->size, at);
        if (rc == KILN_OK && body > e->size)
            rc = kiln_io_write_full(io, c->rec_fd, pad, (size_t)body - e->size, at + e->size);
    }
    unsigned char head[KILN__CACHE_HEAD_SIZE];
    kiln__cache_head_encode(head, e);
    if (rc == KILN_OK)
        rc = kiln_io_write_full(io, c->rec_fd, head, sizeof(head), e->offset);
    return rc;
}

/*
 * Publishes a written record (or gives up a failed one's bytes) when its
 * ticket's turn comes, so the table and the index get records in file order
 * whatever order the writes finished in.
 * @return `rc`, or the table's error.
 */
static int publish(struct kiln_cache *c, const struct kiln_cache_entry *e, uint64_t ticket, int rc)
{
    uint64_t end = e->offset + kiln__cache_rec_len(e->size);
    pthread_mutex_lock(&c->put_lock);
#ifdef KILN_CACHE_BROKEN_RESERVE
    (void)ticket;
    if (c->append_at < end)
        c->append_at = end;
#else
    while (c->turn != ticket)
        pthread_cond_wait(&c->put_turn, &c->put_lock);
#endif
    if (rc < 0) {
        if (c->append_at == end) {
            /* Nothing was reserved after it, and every earlier put is
             * published: what follows the last published record is only
             * failed puts' bytes. Cut them; if the cut fails too, the next
             * record overwrites them or the next open cuts a torn tail. */
            c->io->truncate(c->io, c->rec_fd, c->rec_end);
            c->append_at = c->rec_end;
        } else {
            /* Later puts are writing past it: its bytes stay as a hole (no
             * whole head: see write_record) that scans count as damage and
             * a compaction drops. */
            KILN_WARN("cache", "%s: %" PRIu64 " bytes at offset %" PRIu64 " left unused",
                      c->rec_path, end - e->offset, e->offset);
        }
    } else {
        pthread_rwlock_wrlock(&c->lock);
        rc = kiln__cache_add(c, e);
        /* Even when the table is full, the record is in the file: the next
         * open finds it. */
        if (c->rec_end < end)
            c->rec_end = end;
        pthread_rwlock_unlock(&c->lock);
    }
    c->turn++;
    pthread_cond_broadcast(&c->put_turn);
    pthread_mutex_unlock(&c->put_lock);
    return rc;
}

int kiln_cache_put(struct kiln_cache *c, struct kiln_key key, const void *payload, size_t size,
                   uint32_t raw_size, uint8_t codec, uint16_t stages)
{
    if (c->flags & KILN_CACHE_READ_ONLY)
        return KILN_EINVAL;
    if (size > KILN_CACHE_MAX_PAYLOAD)
        return KILN_ERANGE;
    if (size && !payload)
        return KILN_EINVAL;
    int failed = __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE);
    if (failed)
        return failed;
    struct kiln_cache_entry e = {
        .key = key, .size = (uint32_t)size, .raw_size = raw_size, .codec = codec, .stages = stages};
    e.checksum = kiln__cache_record_checksum(&e, payload);
    uint64_t ticket;
    reserve(c, kiln__cache_rec_len(e.size), &e.offset, &ticket);
    int rc = write_record(c, &e, payload);
    if (rc < 0)
        KILN_WARN("cache", "%s: writing a record of %zu bytes at offset %" PRIu64 " failed: %s",
                  c->rec_path, size, e.offset, kiln_strerror(rc));
    return publish(c, &e, ticket, rc);
}

/* Appends index entries [idx_count, n) after the records they name were
 * synced. @return 0 or the error (the index is then behind). */
static int index_append(struct kiln_cache *c, size_t n)
{
    if (n == c->idx_count)
        return KILN_OK;
    size_t bytes = (n - c->idx_count) * KILN__CACHE_ENTRY_SIZE;
    unsigned char *buf = malloc(bytes);
    if (!buf)
        return KILN_ENOMEM;
    pthread_rwlock_rdlock(&c->lock);
    for (size_t i = c->idx_count; i < n; i++)
        kiln__cache_entry_encode(buf + (i - c->idx_count) * KILN__CACHE_ENTRY_SIZE, &c->entries[i]);
    pthread_rwlock_unlock(&c->lock);
    int rc = kiln_io_write_full(c->io, c->idx_fd, buf, bytes, c->idx_end);
    free(buf);
    if (rc < 0) {
        /* No later entry may follow a gap: cut what was written. */
        c->io->truncate(c->io, c->idx_fd, c->idx_end);
        return rc;
    }
    c->idx_end += bytes;
    c->idx_count = n;
    return KILN_OK;
}

/* The sync itself, under sync_lock. */
static int sync_locked(struct kiln_cache *c)
{
    int rc = __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE);
    if (rc)
        return rc;
    const struct kiln_io *io = c->io;
    /* The records this sync makes durable: those published now. Each was
     * written before it was published, so the records sync below covers
     * it; records published later get their entries at a later sync, so
     * the index never names a record that is not synced. */
    pthread_rwlock_rdlock(&c->lock);
    size_t n = c->count;
    pthread_rwlock_unlock(&c->lock);
    rc = io->fsync(io, c->rec_fd);
    if (rc < 0) {
        __atomic_store_n(&c->failed, rc, __ATOMIC_RELEASE);
        KILN_ERROR("cache",
                   "%s: sync failed (%s): records written since the last sync may be "
                   "lost; reopen the cache",
                   c->rec_path, kiln_strerror(rc));
        return rc;
    }
    if (!c->idx_behind && c->idx_fd >= 0) {
        rc = index_append(c, n);
        if (rc < 0) {
            c->idx_behind = true;
            KILN_WARN("cache", "%s: appending index entries failed (%s); rewriting it whole",
                      c->idx_path, kiln_strerror(rc));
        }
    }
    if (c->idx_behind || c->idx_fd < 0) {
        rc = index_write_upto(c, n);
        if (rc < 0) {
            KILN_WARN("cache",
                      "%s: rewriting the index failed (%s); the records are synced and "
                      "the next sync or open rebuilds it",
                      c->idx_path, kiln_strerror(rc));
            return rc;
        }
    } else {
        rc = io->fsync(io, c->idx_fd);
        if (rc < 0) {
            c->idx_behind = true;
            KILN_WARN("cache",
                      "%s: sync failed (%s); the records are synced, the index is rewritten "
                      "at the next sync",
                      c->idx_path, kiln_strerror(rc));
            return rc;
        }
    }
    kiln_cache_save_use(c); /* advisory: a failure is logged, not returned */
    return KILN_OK;
}

int kiln_cache_sync(struct kiln_cache *c)
{
    if (c->flags & KILN_CACHE_READ_ONLY)
        return KILN_OK;
    pthread_mutex_lock(&c->sync_lock);
    int rc = sync_locked(c);
    pthread_mutex_unlock(&c->sync_lock);
    return rc;
}

/* ---- lookups ------------------------------------------------------------ */

int kiln_cache_find(struct kiln_cache *c, struct kiln_key key, struct kiln_cache_entry *entry)
{
    pthread_rwlock_rdlock(&c->lock);
    int64_t i = kiln__cache_lookup(c, key);
    if (i >= 0 && entry)
        *entry = c->entries[i];
    pthread_rwlock_unlock(&c->lock);
    return i >= 0 ? KILN_OK : KILN_ENOTFOUND;
}

size_t kiln_cache_count(struct kiln_cache *c)
{
    pthread_rwlock_rdlock(&c->lock);
    size_t n = c->live;
    pthread_rwlock_unlock(&c->lock);
    return n;
}

int kiln_cache_entries(struct kiln_cache *c, struct kiln_cache_entry **entries, size_t *n)
{
    *entries = NULL;
    *n = 0;
    pthread_rwlock_rdlock(&c->lock);
    int rc = KILN_OK;
    if (c->live) {
        struct kiln_cache_entry *out = malloc(c->live * sizeof(*out));
        if (!out) {
            rc = KILN_ENOMEM;
        } else {
            size_t k = 0;
            for (size_t i = 0; i < c->count; i++)
                if (kiln__cache_lookup(c, c->entries[i].key) == (int64_t)i)
                    out[k++] = c->entries[i];
            *entries = out;
            *n = k;
        }
    }
    pthread_rwlock_unlock(&c->lock);
    return rc;
}

void kiln_cache_entries_free(struct kiln_cache_entry *entries)
{
    free(entries);
}

int kiln_cache_stats(struct kiln_cache *c, struct kiln_cache_stats *stats)
{
    pthread_rwlock_rdlock(&c->lock);
    *stats = c->st;
    stats->records = c->live;
    stats->bytes = c->live_bytes;
    stats->file_bytes = c->rec_end;
    pthread_rwlock_unlock(&c->lock);
    return KILN_OK;
}
