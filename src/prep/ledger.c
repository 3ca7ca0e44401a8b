/*
 * ledger.c - the build ledger: per driver, which programs were built and
 * which failed, so a second preparation compiles nothing again.
 *
 * The file (ledger.kpl in the cache folder) is a 32-byte header, then
 * 128-byte records appended in order, each with its own XXH3-64 checksum:
 *
 *   header: "KILNLDGR", u32 version 1, u32 record size 128, u64 0,
 *           u64 checksum of the 24 bytes before it
 *   record: u32 tag "KLPR", u16 state, u16 0, u32 vendorID, u32 deviceID,
 *           u32 driverVersion, i32 error, u8 pipelineCacheUUID[16],
 *           u64 key lo, u64 key hi, char reason[64] (NUL-padded),
 *           u64 checksum of the 120 bytes before it
 *   run:    u32 tag "KLPD", u16 run kind, u16 0, u32 vendorID, u32 deviceID,
 *           u32 driverVersion, u32 0, u8 pipelineCacheUUID[16], u64 time
 *           (seconds since 1970), u64 pipelines, u64 with feedback, u64
 *           driver cache hits, u64 driver ns, u64 probed, u64 probe hits,
 *           u8 0[24], u64 checksum of the 120 bytes before it
 *
 * A run record (the driver's word on one prepare, start or service run,
 * added after version 1 shipped) is a slot of its own tag, so the version
 * stays 1: a ledger of older kiln reads as before, and older kiln reading
 * a newer ledger counts a run record as damaged and skips it (one warning
 * line; the program records are read as ever). Opened for a driver, the
 * ledger keeps that driver's last run with creation feedback, whose mean
 * driver time per pipeline starts isolation's worker sizing
 * (kiln__ledger_build_ns).
 *
 * A record of state 3 (KILN__LEDGER_MEMORY, from 0.2) is no program's: its
 * key holds a memory class (lo) and what a build of it needs per KiB of
 * SPIR-V on that driver (hi), the pipeline budget's learned figure
 * (prep_memory.c). An older kiln skips it as a damaged record (one warning
 * line; every build record is still read), so the version stays 1.
 *
 * Invariants and why they hold:
 *
 * - A crash loses at most what was not yet synced, and never makes the
 *   file unreadable. Records are appended at the end of the last whole
 *   slot and synced; a torn append leaves less than a slot (ignored) or a
 *   slot whose checksum fails (skipped), and the next append writes over
 *   it. A new file, or one whose header is damaged, is written whole under
 *   a temporary name and renamed (kiln_io_replace_file), so the file at
 *   the ledger's name always has a whole header.
 *
 * - The ledger never touches the cache's own files, and a damaged ledger
 *   costs only builds: it is read as empty and replaced, so every program
 *   is built again and recorded anew.
 *
 * - One writer: kiln_prepare holds the cache's writer lock for as long as
 *   it has the ledger open, so no two processes append at once; within
 *   the process only the thread that called kiln_prepare uses it.
 *
 * - Nothing is written through a planted name: appends open the file with
 *   KILN_IO_NOFOLLOW (the default table opens regular files only), and the
 *   replace makes its temporary file with O_CREAT|O_EXCL|O_NOFOLLOW.
 *
 * - Later records win: a build that fails after one that worked (or the
 *   other way round) is appended, and the parse keeps the last.
 */
#include "kiln_internal.h"
#include "kiln/prep.h"
#include "ledger.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEDGER_VERSION 1u
#define RECORD_TAG     0x52504c4bu /* "KLPR" little-endian */
#define RUN_TAG        0x44504c4bu /* "KLPD" little-endian */
/* A ledger larger than this is not read (half a million records). */
#define LEDGER_MAX_BYTES (64u << 20)

static const char MAGIC[8] = {'K', 'I', 'L', 'N', 'L', 'D', 'G', 'R'};

uint32_t kiln__ledger_test_version_xor;

void kiln__ledger_header(unsigned char *h)
{
    memset(h, 0, KILN__LEDGER_HEADER);
    memcpy(h, MAGIC, 8);
    kiln__store_le32(h + 8, LEDGER_VERSION);
    kiln__store_le32(h + 12, KILN__LEDGER_RECORD);
    kiln__store_le64(h + 24, kiln_hash64(h, 24));
}

/* The fields a run record shares with a program's: its driver. */
static void write_driver(const struct kiln__ledger_driver *d, unsigned char *r)
{
    kiln__store_le32(r + 8, d->vendor_id);
    kiln__store_le32(r + 12, d->device_id);
    kiln__store_le32(r + 16, d->driver_version);
    memcpy(r + 24, d->cache_uuid, 16);
}

static void read_driver(const unsigned char *r, struct kiln__ledger_driver *d)
{
    d->vendor_id = kiln__load_le32(r + 8);
    d->device_id = kiln__load_le32(r + 12);
    d->driver_version = kiln__load_le32(r + 16);
    memcpy(d->cache_uuid, r + 24, 16);
}

static void record_run(const struct kiln__ledger_entry *e, unsigned char *r)
{
    const struct kiln__ledger_run *u = &e->run;
    kiln__store_le32(r, RUN_TAG);
    kiln__store_le16(r + 4, (uint16_t)u->kind);
    write_driver(&e->driver, r);
    kiln__store_le64(r + 40, u->when);
    kiln__store_le64(r + 48, u->pipelines);
    kiln__store_le64(r + 56, u->feedback);
    kiln__store_le64(r + 64, u->cache_hits);
    kiln__store_le64(r + 72, u->driver_ns);
    kiln__store_le64(r + 80, u->probed);
    kiln__store_le64(r + 88, u->probe_hits);
    kiln__store_le64(r + 120, kiln_hash64(r, 120));
}

static void read_run(const unsigned char *r, struct kiln__ledger_entry *e)
{
    struct kiln__ledger_run *u = &e->run;
    e->state = KILN__LEDGER_RUN;
    read_driver(r, &e->driver);
    u->kind = kiln__load_le16(r + 4);
    u->when = kiln__load_le64(r + 40);
    u->pipelines = kiln__load_le64(r + 48);
    u->feedback = kiln__load_le64(r + 56);
    u->cache_hits = kiln__load_le64(r + 64);
    u->driver_ns = kiln__load_le64(r + 72);
    u->probed = kiln__load_le64(r + 80);
    u->probe_hits = kiln__load_le64(r + 88);
}

void kiln__ledger_record(const struct kiln__ledger_entry *e, unsigned char *r)
{
    memset(r, 0, KILN__LEDGER_RECORD);
    if (e->state == KILN__LEDGER_RUN) {
        record_run(e, r);
        return;
    }
    kiln__store_le32(r, RECORD_TAG);
    kiln__store_le16(r + 4, (uint16_t)e->state);
    write_driver(&e->driver, r);
    kiln__store_le32(r + 20, (uint32_t)e->error);
    kiln__store_le64(r + 40, e->key.lo);
    kiln__store_le64(r + 48, e->key.hi);
    size_t len = strnlen(e->reason, KILN__LEDGER_REASON - 1);
    memcpy(r + 56, e->reason, len);
    kiln__store_le64(r + 120, kiln_hash64(r, 120));
}

/* Reads one slot. @return whether it is a whole, good record. */
static bool read_record(const unsigned char *r, struct kiln__ledger_entry *e)
{
    uint32_t tag = kiln__load_le32(r);
    if ((tag != RECORD_TAG && tag != RUN_TAG) || kiln__load_le64(r + 120) != kiln_hash64(r, 120))
        return false;
    if (tag == RUN_TAG) {
        memset(e, 0, sizeof(*e));
        read_run(r, e);
        return e->run.kind >= KILN_LEDGER_RUN_PREPARE && e->run.kind <= KILN_LEDGER_RUN_SERVICE;
    }
    uint16_t state = kiln__load_le16(r + 4);
    if (state != KILN__LEDGER_BUILT && state != KILN__LEDGER_FAILED && state != KILN__LEDGER_MEMORY)
        return false;
    memset(e, 0, sizeof(*e));
    e->state = state;
    read_driver(r, &e->driver);
    e->error = (int32_t)kiln__load_le32(r + 20);
    e->key.lo = kiln__load_le64(r + 40);
    e->key.hi = kiln__load_le64(r + 48);
    memcpy(e->reason, r + 56, KILN__LEDGER_REASON - 1);
    e->reason[KILN__LEDGER_REASON - 1] = '\0';
    return true;
}

int kiln__ledger_parse(const void *bytes, size_t n, kiln__ledger_visit_fn visit, void *user,
                       struct kiln__ledger_scan *scan)
{
    const unsigned char *b = bytes;
    memset(scan, 0, sizeof(*scan));
    if (n < sizeof(MAGIC) || memcmp(b, MAGIC, sizeof(MAGIC)) != 0)
        return n < sizeof(MAGIC) && memcmp(b, MAGIC, n) == 0 ? KILN_ECORRUPT_HEADER : KILN_EFORMAT;
    if (n < KILN__LEDGER_HEADER || kiln__load_le64(b + 24) != kiln_hash64(b, 24) ||
        kiln__load_le32(b + 8) != LEDGER_VERSION || kiln__load_le32(b + 12) != KILN__LEDGER_RECORD)
        return KILN_ECORRUPT_HEADER;
    size_t off = KILN__LEDGER_HEADER;
    for (; n - off >= KILN__LEDGER_RECORD; off += KILN__LEDGER_RECORD) {
        struct kiln__ledger_entry e;
        if (!read_record(b + off, &e)) {
            scan->damaged++;
            continue;
        }
        scan->records++;
        if (visit)
            visit(user, &e);
    }
    scan->end = off;
    return KILN_OK;
}

/* ---- the ledger of one folder and driver ------------------------------------ */

struct slot {
    struct kiln_key key;
    uint32_t state; /* 0: empty slot */
    int32_t error;
};

struct kiln__ledger {
    const struct kiln_io *io;
    char path[4096];
    struct kiln__ledger_driver driver;
    /* Open addressing over the driver's keys; a power of two. */
    struct slot *table;
    size_t cap;
    size_t used;
    /* Records noted since the last sync, KILN__LEDGER_RECORD bytes each. */
    unsigned char *pending;
    size_t npending;
    size_t pending_cap;
    /* The driver's memory figures (KILN__LEDGER_MEMORY records); 0: none. */
    uint64_t memory[KILN__LEDGER_MEMORY_CLASSES];
    /* The driver's last run with creation feedback: its driver time and
     * the pipelines it was measured over (0: none). */
    uint64_t run_driver_ns, run_feedback;
    /* Where the next append goes; `fresh`: the file must be written whole. */
    uint64_t end;
    bool fresh;
};

static size_t slot_of(const struct kiln__ledger *l, struct kiln_key key)
{
    size_t i = (size_t)(key.lo ^ (key.hi >> 7)) & (l->cap - 1);
    while (l->table[i].state && !kiln_key_equal(l->table[i].key, key))
        i = (i + 1) & (l->cap - 1);
    return i;
}

static int grow(struct kiln__ledger *l)
{
    size_t cap = l->cap ? l->cap * 2 : 1024;
    struct slot *old = l->table;
    size_t oldcap = l->cap;
    l->table = kiln__calloc(cap, sizeof(*l->table));
    if (!l->table) {
        l->table = old;
        return KILN_ENOMEM;
    }
    l->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].state)
            l->table[slot_of(l, old[i].key)] = old[i];
    kiln__free(old);
    return KILN_OK;
}

/* Sets the table's state of `key`. @return 0 or KILN_ENOMEM. */
static int put(struct kiln__ledger *l, struct kiln_key key, uint32_t state, int32_t error)
{
    if ((l->used + 1) * 2 > l->cap)
        KILN_TRY(grow(l));
    size_t i = slot_of(l, key);
    if (!l->table[i].state)
        l->used++;
    l->table[i] = (struct slot){.key = key, .state = state, .error = error};
    return KILN_OK;
}

static bool same_driver(const struct kiln__ledger_driver *a, const struct kiln__ledger_driver *b)
{
    return a->vendor_id == b->vendor_id && a->device_id == b->device_id &&
           a->driver_version == b->driver_version && memcmp(a->cache_uuid, b->cache_uuid, 16) == 0;
}

struct load_ctx {
    struct kiln__ledger *l;
    int rc;
};

static void keep_mine(void *user, const struct kiln__ledger_entry *e)
{
    struct load_ctx *c = user;
    if (c->rc != KILN_OK || !same_driver(&e->driver, &c->l->driver))
        return;
    if (e->state == KILN__LEDGER_RUN) {
        if (e->run.feedback && e->run.driver_ns) {
            c->l->run_driver_ns = e->run.driver_ns;
            c->l->run_feedback = e->run.feedback;
        }
        return;
    }
    if (e->state == KILN__LEDGER_MEMORY) {
        if (e->key.lo < KILN__LEDGER_MEMORY_CLASSES)
            c->l->memory[e->key.lo] = e->key.hi;
        return;
    }
    c->rc = put(c->l, e->key, e->state, e->error);
}

int kiln__ledger_open(const char *dir, const struct kiln_io *io,
                      const struct kiln__ledger_driver *driver, struct kiln__ledger **out)
{
    *out = NULL;
    struct kiln__ledger *l = kiln__calloc(1, sizeof(*l));
    if (!l)
        return KILN_ENOMEM;
    l->io = io ? io : kiln_io_default();
    l->driver = *driver;
    int rc = kiln__path_join(l->path, sizeof(l->path), dir, KILN__LEDGER_FILE);
    if (rc == KILN_OK)
        rc = grow(l);
    if (rc < 0) {
        kiln__ledger_close(l);
        return rc;
    }
    void *data = NULL;
    size_t n = 0;
    rc = kiln__io_read_file(l->io, l->path, KILN_IO_NOFOLLOW, LEDGER_MAX_BYTES, &data, &n);
    if (rc == KILN_ENOENT) {
        l->fresh = true;
        *out = l;
        return KILN_OK;
    }
    struct kiln__ledger_scan scan = {0};
    if (rc == KILN_OK) {
        struct load_ctx c = {.l = l};
        rc = kiln__ledger_parse(data, n, keep_mine, &c, &scan);
        if (rc == KILN_OK && c.rc < 0) {
            kiln__free(data);
            kiln__ledger_close(l);
            return c.rc;
        }
    }
    kiln__free(data);
    if (rc < 0) {
        /* Only builds are lost: every program is built and recorded again. */
        KILN_WARN("prep", "%s: not a usable build ledger (%s): starting a new one", l->path,
                  kiln_strerror(rc));
        l->used = 0;
        memset(l->table, 0, l->cap * sizeof(*l->table));
        l->fresh = true;
    } else {
        l->end = scan.end;
        if (scan.damaged)
            KILN_WARN("prep", "%s: %" PRIu64 " damaged record%s skipped", l->path, scan.damaged,
                      scan.damaged == 1 ? "" : "s");
        KILN_INFO("prep", "%s: %" PRIu64 " records, %zu for this driver", l->path, scan.records,
                  l->used);
    }
    *out = l;
    return KILN_OK;
}

uint32_t kiln__ledger_lookup(const struct kiln__ledger *l, struct kiln_key key, int *error)
{
    if (!l)
        return KILN__LEDGER_NONE;
    const struct slot *s = &l->table[slot_of(l, key)];
    if (error)
        *error = s->state ? s->error : 0;
    return s->state;
}

/* Room for one more pending record. @return 0 or KILN_ENOMEM. */
static int pending_room(struct kiln__ledger *l)
{
    if (l->npending < l->pending_cap)
        return KILN_OK;
    size_t cap = l->pending_cap ? l->pending_cap * 2 : 64;
    unsigned char *p = kiln__realloc(l->pending, cap * KILN__LEDGER_RECORD);
    if (!p)
        return KILN_ENOMEM;
    l->pending = p;
    l->pending_cap = cap;
    return KILN_OK;
}

int kiln__ledger_note_run(struct kiln__ledger *l, const struct kiln__ledger_run *run)
{
    KILN_TRY(pending_room(l));
    struct kiln__ledger_entry e = {.driver = l->driver, .state = KILN__LEDGER_RUN, .run = *run};
    kiln__ledger_record(&e, l->pending + l->npending * KILN__LEDGER_RECORD);
    l->npending++;
    return KILN_OK;
}

int kiln__ledger_note(struct kiln__ledger *l, struct kiln_key key, uint32_t state, int error,
                      const char *reason)
{
    int old_error = 0;
    uint32_t old = kiln__ledger_lookup(l, key, &old_error);
    if (old == state && (state != KILN__LEDGER_FAILED || old_error == error))
        return KILN_OK;
    KILN_TRY(pending_room(l));
    KILN_TRY(put(l, key, state, error));
    struct kiln__ledger_entry e = {.driver = l->driver, .key = key, .state = state, .error = error};
    if (reason)
        snprintf(e.reason, sizeof(e.reason), "%s", reason);
    kiln__ledger_record(&e, l->pending + l->npending * KILN__LEDGER_RECORD);
    l->npending++;
    return KILN_OK;
}

uint64_t kiln__ledger_memory(const struct kiln__ledger *l, unsigned cls)
{
    return l && cls < KILN__LEDGER_MEMORY_CLASSES ? l->memory[cls] : 0;
}

uint64_t kiln__ledger_build_ns(const struct kiln__ledger *l)
{
    return l && l->run_feedback ? l->run_driver_ns / l->run_feedback : 0;
}

int kiln__ledger_note_memory(struct kiln__ledger *l, unsigned cls, uint64_t per_kib)
{
    if (!l || cls >= KILN__LEDGER_MEMORY_CLASSES || l->memory[cls] == per_kib)
        return KILN_OK;
    KILN_TRY(pending_room(l));
    l->memory[cls] = per_kib;
    struct kiln__ledger_entry e = {.driver = l->driver,
                                   .key = {.lo = cls, .hi = per_kib},
                                   .state = KILN__LEDGER_MEMORY,
                                   .error = 0};
    snprintf(e.reason, sizeof(e.reason), "memory per KiB of SPIR-V");
    kiln__ledger_record(&e, l->pending + l->npending * KILN__LEDGER_RECORD);
    l->npending++;
    return KILN_OK;
}

int kiln__ledger_sync(struct kiln__ledger *l)
{
    if (!l || (l->npending == 0 && !l->fresh))
        return KILN_OK;
    size_t bytes = l->npending * KILN__LEDGER_RECORD;
    int rc;
    if (l->fresh) {
        unsigned char *all = kiln__malloc(KILN__LEDGER_HEADER + bytes);
        if (!all)
            return KILN_ENOMEM;
        kiln__ledger_header(all);
        if (bytes)
            memcpy(all + KILN__LEDGER_HEADER, l->pending, bytes);
        rc = kiln_io_replace_file(l->io, l->path, all, KILN__LEDGER_HEADER + bytes);
        kiln__free(all);
        if (rc == KILN_OK) {
            l->fresh = false;
            l->end = KILN__LEDGER_HEADER + bytes;
            l->npending = 0;
        }
        return rc;
    }
    int fd;
    KILN_TRY(l->io->open(l->io, l->path, KILN_IO_RDWR | KILN_IO_NOFOLLOW, &fd));
    rc = kiln_io_write_full(l->io, fd, l->pending, bytes, l->end);
    if (rc == KILN_OK)
        rc = l->io->fsync(l->io, fd);
    int crc = l->io->close(l->io, fd);
    if (rc == KILN_OK)
        rc = crc;
    if (rc == KILN_OK) {
        l->end += bytes;
        l->npending = 0;
    }
    return rc;
}

void kiln__ledger_close(struct kiln__ledger *l)
{
    if (!l)
        return;
    kiln__free(l->table);
    kiln__free(l->pending);
    kiln__free(l);
}

/* ---- the driver's word, for reports (kiln_ledger_last_run) ------------------- */

struct last_run {
    uint32_t kind;
    struct kiln__ledger_entry e;
    bool found;
};

static void keep_last_run(void *user, const struct kiln__ledger_entry *e)
{
    struct last_run *c = user;
    if (e->state == KILN__LEDGER_RUN && e->run.kind == c->kind) {
        c->e = *e;
        c->found = true;
    }
}

static int last_run_body(const char *cache_dir, uint32_t kind, struct kiln_ledger_run *out)
{
    char path[4096];
    KILN_TRY(kiln__path_join(path, sizeof(path), cache_dir, KILN__LEDGER_FILE));
    void *data = NULL;
    size_t n = 0;
    KILN_TRY(
        kiln__io_read_file(kiln_io_default(), path, KILN_IO_NOFOLLOW, LEDGER_MAX_BYTES, &data, &n));
    struct last_run c = {.kind = kind};
    struct kiln__ledger_scan scan;
    int rc = kiln__ledger_parse(data, n, keep_last_run, &c, &scan);
    kiln__free(data);
    if (rc < 0)
        return rc;
    if (!c.found)
        return KILN_ENOTFOUND;
    const struct kiln__ledger_run *u = &c.e.run;
    struct kiln_ledger_run r = {.size = sizeof(r),
                                .kind = u->kind,
                                .vendor_id = c.e.driver.vendor_id,
                                .device_id = c.e.driver.device_id,
                                .driver_version = c.e.driver.driver_version,
                                .when = u->when,
                                .pipelines = u->pipelines,
                                .feedback = u->feedback,
                                .cache_hits = u->cache_hits,
                                .driver_ns = u->driver_ns,
                                .probed = u->probed,
                                .probe_hits = u->probe_hits};
    memcpy(r.pipeline_cache_uuid, c.e.driver.cache_uuid, 16);
    KILN_STRUCT_OUT(out, &r);
    return KILN_OK;
}

int kiln_ledger_last_run(const char *cache_dir, uint32_t kind, struct kiln_ledger_run *out)
{
    if (!cache_dir || !out)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(out, "kiln_ledger_run"));
    if (kind < KILN_LEDGER_RUN_PREPARE || kind > KILN_LEDGER_RUN_SERVICE)
        return KILN_EINVAL;
    return last_run_body(cache_dir, kind, out);
}
