/*
 * cache.c - the store: the key table, appending records from any number of
 * threads, syncing, the index file, lookups and closing. Opening is in
 * cache_open.c; the dictionary and last-use files are units below
 * (cache_dict.c, cache_use.c); the rewrites sit on top (cache_life.c).
 *
 * Invariants and why they hold:
 *
 * - Puts from any number of threads never overlap and never lose a record.
 *   A put reserves its bytes (the end of the file, advanced by its length)
 *   and a ticket under put_lock, then writes its record outside any lock:
 *   no two records share a byte. It publishes (adds its entry to the table)
 *   only when every earlier ticket has published, so the table holds the
 *   records in file order whatever order the writes finished in - the
 *   order the index, the last-use file and compaction rely on. A put that
 *   fails gives back its bytes when nothing was reserved after it, else
 *   leaves a hole with no whole record head in it (written last).
 *
 * - The index never gets ahead of the synced records. Only sync appends
 *   index entries, and only for the records published before it synced
 *   the records file (each was written before it was published, so that
 *   sync covers it); then it syncs the index. An open that appends entries
 *   or rewrites the index syncs the records first. An index entry that
 *   survives a crash without its record (a copied or damaged file) is
 *   caught at the next open: every entry must lie inside the records file
 *   and the last one must equal that record's head, else the index is
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
 * - A replaced file is never half there. The index is rewritten under a
 *   temporary name, synced and renamed (kiln_io_replace_file); a records
 *   file is replaced the same way (cache_open.c, cache_life.c).
 *
 * - One writer process. A writer holds an exclusive lock on the records
 *   file's open file description for as long as the cache is open; a new
 *   records file is locked before it is renamed into place, so a second
 *   writer that opens the path at any moment finds the lock.
 *
 * - A cap's eviction never moves a record under a call. An eviction
 *   (cache_life.c) rewrites the file, so it takes the gate for writing;
 *   puts (from the reservation to the publication), syncs, gets, loads and
 *   save_use hold it for reading, so none of them sees the file switched
 *   under it. Records this handle stored, loaded or found are marked
 *   (run_used) and never evicted by it.
 *
 * Lock order: the gate first; then put_lock, then the table's rwlock;
 * sync_lock, then the rwlock. No lock but the gate (for reading) is held
 * across a record's write.
 */
#include "cache_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    uint32_t *s = kiln__calloc(n, sizeof(*s));
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
    kiln__free(c->slots);
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
        struct kiln_cache_entry *n = kiln__realloc(c->entries, cap * sizeof(*n));
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
    c->run_used[c->count] = 0;
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

void kiln__cache_table_clear(struct kiln_cache *c)
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
    unsigned char *buf = kiln__malloc(bytes);
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
    kiln__free(buf);
    if (rc == KILN_OK)
        rc = c->io->open(c->io, c->idx_path, KILN_IO_RDWR | KILN_IO_NOFOLLOW, &c->idx_fd);
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
int kiln__cache_switch(struct kiln_cache *c, int fd, const struct kiln__cache_header *h,
                       const struct kiln__cache_kept *kept, uint64_t end)
{
    pthread_rwlock_wrlock(&c->lock);
    c->io->close(c->io, c->rec_fd); /* drops the old file's lock; the new one holds it */
    c->rec_fd = fd;
    c->header = *h;
    kiln__cache_table_clear(c);
    int rc = KILN_OK;
    for (size_t i = 0; i < kept->n && rc == KILN_OK; i++) {
        rc = kiln__cache_add(c, &kept->entries[i]);
        if (rc == KILN_OK) {
            c->last_use[i] = kept->uses[i];
            c->run_used[i] = kept->run ? kept->run[i] : 0;
        }
    }
    c->rec_end = end;
    c->append_at = end;
    c->idx_count = 0; /* the old index names the old file */
    c->idx_behind = true;
    c->st.stamp = h->stamp;
    c->st.dict_id = h->dict_id;
    pthread_rwlock_unlock(&c->lock);
    if (rc < 0) {
        __atomic_store_n(&c->failed, rc, __ATOMIC_RELEASE); /* the table is short: reopen */
        return rc;
    }
    __atomic_store_n(&c->use_dirty, true, __ATOMIC_RELAXED);
    return KILN_OK;
}

int kiln__cache_locks_init(struct kiln_cache *c)
{
    if (pthread_rwlock_init(&c->gate, NULL) != 0)
        return KILN_ENOMEM;
    if (pthread_rwlock_init(&c->lock, NULL) != 0) {
        pthread_rwlock_destroy(&c->gate);
        return KILN_ENOMEM;
    }
    if (pthread_mutex_init(&c->put_lock, NULL) != 0) {
        pthread_rwlock_destroy(&c->lock);
        pthread_rwlock_destroy(&c->gate);
        return KILN_ENOMEM;
    }
    if (pthread_mutex_init(&c->sync_lock, NULL) != 0) {
        pthread_mutex_destroy(&c->put_lock);
        pthread_rwlock_destroy(&c->lock);
        pthread_rwlock_destroy(&c->gate);
        return KILN_ENOMEM;
    }
    if (pthread_cond_init(&c->put_turn, NULL) != 0) {
        pthread_mutex_destroy(&c->sync_lock);
        pthread_mutex_destroy(&c->put_lock);
        pthread_rwlock_destroy(&c->lock);
        pthread_rwlock_destroy(&c->gate);
        return KILN_ENOMEM;
    }
    return KILN_OK;
}

void kiln_cache_close(struct kiln_cache *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < c->nlayers; i++)
        kiln_cache_close(c->layers[i]);
    if (!(c->flags & KILN_CACHE_READ_ONLY) && c->rec_fd >= 0 &&
        !__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE))
        kiln__cache_save_use(c);
    if (c->idx_fd >= 0)
        c->io->close(c->io, c->idx_fd);
    if (c->rec_fd >= 0) {
        if (!(c->flags & KILN_CACHE_READ_ONLY))
            c->io->lock(c->io, c->rec_fd, KILN_IO_UNLOCK);
        c->io->close(c->io, c->rec_fd);
    }
    pthread_rwlock_destroy(&c->lock);
    pthread_rwlock_destroy(&c->gate);
    pthread_mutex_destroy(&c->put_lock);
    pthread_mutex_destroy(&c->sync_lock);
    pthread_cond_destroy(&c->put_turn);
    kiln_pack_dict_destroy(c->dict);
    kiln__free(c->last_use);
    kiln__free(c->run_used);
    kiln__free(c->entries);
    kiln__free(c->slots);
    kiln__free(c);
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
        if (rc == KILN_OK)
            c->run_used[c->count - 1] = 1; /* stored by this handle: never evicted by it */
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

int kiln__cache_put_record(struct kiln_cache *c, struct kiln_key key, const void *payload,
                           size_t size, uint32_t raw_size, uint8_t codec, uint16_t stages)
{
    if (!c)
        return KILN_EINVAL;
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
    /* From the reservation to the publication the record's offset is the
     * file's: no eviction may rewrite the file in between. */
    pthread_rwlock_rdlock(&c->gate);
    reserve(c, kiln__cache_rec_len(e.size), &e.offset, &ticket);
    int rc = write_record(c, &e, payload);
    if (rc < 0)
        KILN_WARN("cache", "%s: writing a record of %zu bytes at offset %" PRIu64 " failed: %s",
                  c->rec_path, size, e.offset, kiln_strerror(rc));
    rc = publish(c, &e, ticket, rc);
    pthread_rwlock_unlock(&c->gate);
    return rc;
}

/*
 * Gives the records file a new identity before the first index entries of
 * this handle's records are written (cache_format.h): a sibling copy of the
 * cache gets another at its own first sync, so neither takes the other's
 * index. Written in place; the records sync that follows makes it durable.
 * A failed or torn write only makes the index not fit: rebuilt at the next
 * open.
 */
static void renew_identity(struct kiln_cache *c)
{
    uint32_t session;
    if (c->renewed || c->header.version != KILN__CACHE_VERSION ||
        kiln_random_bytes(&session, sizeof(session)) < 0)
        return;
    struct kiln__cache_header h = c->header;
    h.previous = h.session;
    h.session = session;
    h.generation++;
    unsigned char b[KILN__CACHE_IDENTITY_LEN];
    kiln__cache_identity_encode(b, &h);
    int rc = kiln_io_write_full(c->io, c->rec_fd, b, sizeof(b), KILN__CACHE_IDENTITY_AT);
    if (rc < 0) {
        KILN_WARN("cache", "%s: cannot write a new identity: %s", c->rec_path, kiln_strerror(rc));
        return;
    }
    /* Field by field: loader threads read the file id beside them. */
    c->header.previous = h.previous;
    c->header.session = h.session;
    c->header.generation = h.generation;
    c->renewed = true;
}

/* Appends index entries [idx_count, n) after the records they name were
 * synced, with the records' identity in the index header.
 * @return 0 or the error (the index is then behind). */
static int index_append(struct kiln_cache *c, size_t n)
{
    if (n == c->idx_count)
        return KILN_OK;
    unsigned char id[KILN__CACHE_IDENTITY_LEN];
    kiln__cache_identity_encode(id, &c->header);
    if (c->header.version == KILN__CACHE_VERSION)
        KILN_TRY(kiln_io_write_full(c->io, c->idx_fd, id, sizeof(id), KILN__CACHE_IDENTITY_AT));
    size_t bytes = (n - c->idx_count) * KILN__CACHE_ENTRY_SIZE;
    unsigned char *buf = kiln__malloc(bytes);
    if (!buf)
        return KILN_ENOMEM;
    pthread_rwlock_rdlock(&c->lock);
    for (size_t i = c->idx_count; i < n; i++)
        kiln__cache_entry_encode(buf + (i - c->idx_count) * KILN__CACHE_ENTRY_SIZE, &c->entries[i]);
    pthread_rwlock_unlock(&c->lock);
    int rc = kiln_io_write_full(c->io, c->idx_fd, buf, bytes, c->idx_end);
    kiln__free(buf);
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
/*
 * Whether the file locked as c->rec_fd is still the one at c->rec_path. A
 * writer that rewrote the cache (compact, prune, repack) renames a new
 * records file over the path and then drops its lock on the old one; a
 * writer that opened the old file just before and locks it just after would
 * otherwise append to a file no longer in the folder. Two records files
 * never share their header bytes (each has its own random file id), so
 * equal headers and sizes mean the same file.
 */
int kiln__cache_still_at_path(struct kiln_cache *c, bool sizes, bool *same)
{
    const struct kiln_io *io = c->io;
    unsigned char a[KILN__CACHE_HEADER_SIZE], b[KILN__CACHE_HEADER_SIZE];
    uint64_t size_a, size_b;
    int fd;
    *same = false;
    int rc = io->open(io, c->rec_path, KILN_IO_READ | KILN_IO_NOFOLLOW, &fd);
    if (rc == KILN_ENOENT)
        return KILN_OK; /* moved aside: not the same */
    KILN_TRY(rc);
    rc = io->file_size(io, c->rec_fd, &size_a);
    if (rc == KILN_OK)
        rc = io->file_size(io, fd, &size_b);
    if (rc == KILN_OK && !sizes) {
        /* Puts may grow the file meanwhile: only the headers' part counts. */
        size_a = KILN_MIN(size_a, (uint64_t)sizeof(a));
        size_b = KILN_MIN(size_b, (uint64_t)sizeof(b));
    }
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
    if (n > c->idx_count)
        renew_identity(c);
    rc = io->fsync(io, c->rec_fd);
    if (rc < 0) {
        __atomic_store_n(&c->failed, rc, __ATOMIC_RELEASE);
        KILN_ERROR("cache",
                   "%s: sync failed (%s): records written since the last sync may be "
                   "lost; reopen the cache",
                   c->rec_path, kiln_strerror(rc));
        return rc;
    }
    /* Synced, but into the file this handle holds: one renamed over its
     * path since (an archive exported over programs.kpc, say) would keep
     * these records out of the folder while every call succeeds. A failed
     * check proves nothing and is let pass. Headers only: puts on other
     * threads may grow the file between the two sizes. */
    bool same = true;
    if (kiln__cache_still_at_path(c, false, &same) == KILN_OK && !same) {
        rc = KILN_EIO_SYNC;
        __atomic_store_n(&c->failed, rc, __ATOMIC_RELEASE);
        KILN_ERROR("cache",
                   "%s: the records file was replaced under this writer: records written "
                   "since it was are not in the folder; reopen the cache",
                   c->rec_path);
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
    kiln__cache_save_use(c); /* advisory: a failure is logged, not returned */
    return KILN_OK;
}

static int sync_body(struct kiln_cache *c)
{
    if (!c)
        return KILN_EINVAL;
    if (c->flags & KILN_CACHE_READ_ONLY)
        return KILN_OK;
    pthread_rwlock_rdlock(&c->gate);
    pthread_mutex_lock(&c->sync_lock);
    int rc = sync_locked(c);
    pthread_mutex_unlock(&c->sync_lock);
    pthread_rwlock_unlock(&c->gate);
    return rc;
}

int kiln_cache_sync(struct kiln_cache *c)
{
    uint64_t m = kiln__err_mark();
    return KILN__CACHE_END(c, m, "kiln_cache_sync", sync_body(c));
}

/* ---- lookups ------------------------------------------------------------ */

/* This handle's own live record of `key` into *entry (may be NULL). */
static bool find_own(struct kiln_cache *c, struct kiln_key key, struct kiln_cache_entry *entry)
{
    pthread_rwlock_rdlock(&c->lock);
    int64_t i = kiln__cache_lookup(c, key);
    if (i >= 0 && entry)
        *entry = c->entries[i];
    if (i >= 0)
        kiln__cache_mark_run(c, (size_t)i); /* found by this handle: never evicted by it */
    pthread_rwlock_unlock(&c->lock);
    return i >= 0;
}

int kiln__cache_holder(struct kiln_cache *c, struct kiln_key key, unsigned below,
                       struct kiln_cache_entry *entry)
{
    if (below == 0)
        return -1;
    if (find_own(c, key, entry))
        return 0;
    for (unsigned l = 0; l + 1 < below && l < c->nlayers; l++)
        if (find_own(c->layers[l], key, entry))
            return (int)l + 1;
    return -1;
}

static int find_body(struct kiln_cache *c, struct kiln_key key, size_t entry_size,
                     struct kiln_cache_entry *entry)
{
    if (!c || (entry && entry_size == 0))
        return KILN_EINVAL;
    struct kiln_cache_entry e;
    if (kiln__cache_holder(c, key, c->nlayers + 1, &e) < 0)
        return KILN_ENOTFOUND;
    if (entry)
        kiln__elem_out(entry, entry_size, 0, &e, sizeof(e));
    return KILN_OK;
}

int kiln_cache_find_sized(struct kiln_cache *c, struct kiln_key key, size_t entry_size,
                          struct kiln_cache_entry *entry)
{
    uint64_t m = kiln__err_mark();
    int rc = find_body(c, key, entry_size, entry);
    return rc == KILN_ENOTFOUND ? rc : KILN__CACHE_END(c, m, "kiln_cache_find", rc);
}

/* Calls fn(user, e) for each live record of layer `l` that neither this
 * cache nor an earlier layer holds, in the layer's file order. */
static int each_visible(struct kiln_cache *c, unsigned l,
                        int (*fn)(void *user, const struct kiln_cache_entry *e), void *user)
{
    struct kiln_cache *layer = c->layers[l];
    int rc = KILN_OK;
    pthread_rwlock_rdlock(&layer->lock);
    for (size_t i = 0; rc == KILN_OK && i < layer->count; i++)
        if (kiln__cache_lookup(layer, layer->entries[i].key) == (int64_t)i &&
            kiln__cache_holder(c, layer->entries[i].key, l + 1, NULL) < 0)
            rc = fn(user, &layer->entries[i]);
    pthread_rwlock_unlock(&layer->lock);
    return rc;
}

static int count_one(void *user, const struct kiln_cache_entry *e)
{
    (void)e;
    (*(size_t *)user)++;
    return KILN_OK;
}

/* The records the layers add: their live records this cache and earlier
 * layers do not hold. */
static size_t layer_records(struct kiln_cache *c)
{
    size_t n = 0;
    for (unsigned l = 0; l < c->nlayers; l++)
        each_visible(c, l, count_one, &n);
    return n;
}

size_t kiln_cache_count(struct kiln_cache *c)
{
    if (!c)
        return 0;
    pthread_rwlock_rdlock(&c->lock);
    size_t n = c->live;
    pthread_rwlock_unlock(&c->lock);
    return n + layer_records(c);
}

struct entries_out {
    struct kiln_cache_entry *out;
    size_t entry_size, n, cap;
};

static int entry_append(void *user, const struct kiln_cache_entry *e)
{
    struct entries_out *o = user;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        void *p = kiln__realloc(o->out, cap * o->entry_size);
        if (!p)
            return KILN_ENOMEM;
        memset((unsigned char *)p + o->cap * o->entry_size, 0, (cap - o->cap) * o->entry_size);
        o->out = p;
        o->cap = cap;
    }
    kiln__elem_out(o->out, o->entry_size, o->n++, e, sizeof(*e));
    return KILN_OK;
}

/* Appends the layers' visible records to *entries (this cache's own, *n of
 * them, in an array of *n elements). */
static int entries_of_layers(struct kiln_cache *c, size_t entry_size,
                             struct kiln_cache_entry **entries, size_t *n)
{
    struct entries_out o = {.out = *entries, .entry_size = entry_size, .n = *n, .cap = *n};
    int rc = KILN_OK;
    for (unsigned l = 0; rc == KILN_OK && l < c->nlayers; l++)
        rc = each_visible(c, l, entry_append, &o);
    if (rc < 0) {
        kiln__free(o.out);
        *entries = NULL;
        *n = 0;
        return rc;
    }
    *entries = o.out;
    *n = o.n;
    return KILN_OK;
}

static int entries_body(struct kiln_cache *c, size_t entry_size, struct kiln_cache_entry **entries,
                        size_t *n)
{
    if (!c || !entries || !n)
        return KILN_EINVAL;
    *entries = NULL;
    *n = 0;
    if (entry_size == 0) {
        KILN_ERROR("abi", "kiln_cache_entry: element size %zu is too small", entry_size);
        return KILN_EINVAL;
    }
    pthread_rwlock_rdlock(&c->lock);
    int rc = KILN_OK;
    if (c->live) {
        struct kiln_cache_entry *out = kiln__calloc(c->live, entry_size);
        if (!out) {
            rc = KILN_ENOMEM;
        } else {
            size_t k = 0;
            for (size_t i = 0; i < c->count; i++)
                if (kiln__cache_lookup(c, c->entries[i].key) == (int64_t)i)
                    kiln__elem_out(out, entry_size, k++, &c->entries[i], sizeof(c->entries[i]));
            *entries = out;
            *n = k;
        }
    }
    pthread_rwlock_unlock(&c->lock);
    if (rc == KILN_OK && c->nlayers)
        rc = entries_of_layers(c, entry_size, entries, n);
    return rc;
}

int kiln_cache_entries_sized(struct kiln_cache *c, size_t entry_size,
                             struct kiln_cache_entry **entries, size_t *n)
{
    uint64_t m = kiln__err_mark();
    return KILN__CACHE_END(c, m, "kiln_cache_entries", entries_body(c, entry_size, entries, n));
}

static int last_use_body(struct kiln_cache *c, struct kiln_key key, uint32_t *day)
{
    if (!c)
        return KILN_EINVAL;
    pthread_rwlock_rdlock(&c->lock);
    int64_t i = kiln__cache_lookup(c, key);
    if (i >= 0 && day)
        *day = __atomic_load_n(&c->last_use[i], __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&c->lock);
    /* A layer's record: the mark the layer carries (never written). */
    for (unsigned l = 0; i < 0 && l < c->nlayers; l++)
        if (last_use_body(c->layers[l], key, day) == KILN_OK)
            return KILN_OK;
    return i >= 0 ? KILN_OK : KILN_ENOTFOUND;
}

int kiln_cache_last_use(struct kiln_cache *c, struct kiln_key key, uint32_t *day)
{
    uint64_t m = kiln__err_mark();
    int rc = last_use_body(c, key, day);
    return rc == KILN_ENOTFOUND ? rc : KILN__CACHE_END(c, m, "kiln_cache_last_use", rc);
}

void kiln__cache_set_use(struct kiln_cache *c, struct kiln_key key, uint32_t day, bool only_raise)
{
    pthread_rwlock_rdlock(&c->lock);
    int64_t i = kiln__cache_lookup(c, key);
    if (i >= 0 && (!only_raise || __atomic_load_n(&c->last_use[i], __ATOMIC_RELAXED) < day)) {
        __atomic_store_n(&c->last_use[i], day, __ATOMIC_RELAXED);
        __atomic_store_n(&c->use_dirty, true, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&c->lock);
}

void kiln_cache_entries_free(struct kiln_cache_entry *entries)
{
    kiln__free(entries);
}

static int get_stats_body(struct kiln_cache *c, struct kiln_cache_stats *stats)
{
    if (!c || !stats)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(stats, "kiln_cache_stats"));
    pthread_rwlock_rdlock(&c->lock);
    struct kiln_cache_stats st = c->st;
    st.size = sizeof(st);
    st.records = c->live;
    st.bytes = c->live_bytes;
    st.file_bytes = c->rec_end;
    st.max_size = c->max_size;
    pthread_rwlock_unlock(&c->lock);
    st.layers = c->nlayers;
    st.layers_left_out = c->layers_left_out;
    st.layer_records = layer_records(c);
    KILN_STRUCT_OUT(stats, &st);
    return KILN_OK;
}

int kiln_cache_get_stats(struct kiln_cache *c, struct kiln_cache_stats *stats)
{
    uint64_t m = kiln__err_mark();
    return KILN__CACHE_END(c, m, "kiln_cache_get_stats", get_stats_body(c, stats));
}

/* The name before 0.2, kept exported (include/kiln/cache.h). */
int kiln_cache_stats(struct kiln_cache *c, struct kiln_cache_stats *stats)
{
    return kiln_cache_get_stats(c, stats);
}

void kiln_cache_set_progress(struct kiln_cache *c, kiln_cache_progress_fn fn, void *user)
{
    if (!c)
        return;
    c->progress = fn;
    c->progress_user = user;
    c->progress_ns = 0;
}

void kiln__cache_progress(struct kiln_cache *c, uint64_t done, uint64_t total)
{
    if (!c->progress || !c->progress_what)
        return;
    uint64_t now = kiln_now_ns();
    if (done < total && now - c->progress_ns < 100000000u)
        return;
    c->progress_ns = now;
    c->progress(c->progress_user, c->progress_what, done, total);
}
