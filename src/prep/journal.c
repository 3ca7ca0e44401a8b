/*
 * journal.c - the crash journal: which programs a run is building right
 * now, so that a run that dies in the driver (a crash in vkCreate*Pipelines
 * takes the whole process when builds are not isolated) costs that one run
 * and not every later one.
 *
 * The files (inflight-0.kpj ... inflight-7.kpj in the cache folder; one per
 * run building at once) are a 128-byte header, then one 128-byte slot per
 * pool worker, each with its own XXH3-64 checksum:
 *
 *   header: "KILNJRNL", u32 version 1, u32 slot size 128, u32 slots,
 *           u32 pid, u32 vendorID, u32 deviceID, u32 driverVersion,
 *           u8 pipelineCacheUUID[16], zeros, u64 checksum of bytes 0..120
 *   slot:   u32 tag "KJIF", u32 state (0 idle, 1 in flight), u64 key lo,
 *           u64 key hi, char name[96] (NUL-padded), u64 checksum of 0..120
 *
 * Invariants and why they hold:
 *
 * - A live run's file is never read as a dead one's. A run holds its file's
 *   exclusive lock (kiln_io.lock: flock, LockFileEx) from its claim to its
 *   end, and the operating system drops the lock when the process ends,
 *   however it ends. So a file whose lock can be taken belongs to no
 *   running process; if a slot in it says "in flight", that run died
 *   during that build.
 *
 * - A clean end is never mistaken for a crash. Each worker writes its slot
 *   idle after every build, and kiln__journal_close empties the file
 *   before dropping the lock; a run that dies outside the pipeline phase
 *   has every slot idle.
 *
 * - Cheap: one pwrite of one slot before a build and one after, no sync.
 *   Written bytes sit in the kernel's page cache, which outlives the
 *   process: a process crash, the case this is for, loses none of them. A
 *   power cut may lose the last writes, and then a program is either not
 *   suspected or suspected once too often (a skipped build, never a wrong
 *   pipeline). Slots are 128-byte aligned with a 128-byte header, so none
 *   straddles a page, and each has its checksum: a torn one is counted
 *   as damage and ignored.
 *
 * - Nothing is written through a planted name: every open has
 *   KILN_IO_NOFOLLOW (and the default table opens regular files only); a
 *   link or other kind of file at a journal's name is skipped, never
 *   followed or removed.
 *
 * - A dead run's file is emptied only after its suspects are in the
 *   ledger (kiln__journal_settle(j, true), which the caller calls after a
 *   good ledger sync), and until then the scanning run holds its lock, so
 *   no other run records them twice or empties them early.
 *
 * - Files are never removed: unlinking a file another process has open
 *   and locked would let a third one create a new file under the name and
 *   lock that, and two runs would then share a name.
 */
#include "kiln_internal.h"
#include "journal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOURNAL_VERSION 1u
#define SLOT_TAG        0x46494a4bu /* "KJIF" little-endian */
#define SLOT_IDLE       0u
#define SLOT_IN_FLIGHT  1u
#define JOURNAL_MAX_BYTES \
    ((uint64_t)KILN__JOURNAL_HEADER + (uint64_t)KILN__JOURNAL_MAX_SLOTS * KILN__JOURNAL_SLOT)

static const char MAGIC[8] = {'K', 'I', 'L', 'N', 'J', 'R', 'N', 'L'};

void kiln__journal_header(const struct kiln__journal_head *h, unsigned char *out)
{
    memset(out, 0, KILN__JOURNAL_HEADER);
    memcpy(out, MAGIC, 8);
    kiln__store_le32(out + 8, JOURNAL_VERSION);
    kiln__store_le32(out + 12, KILN__JOURNAL_SLOT);
    kiln__store_le32(out + 16, h->nslots);
    kiln__store_le32(out + 20, h->pid);
    kiln__store_le32(out + 24, h->driver.vendor_id);
    kiln__store_le32(out + 28, h->driver.device_id);
    kiln__store_le32(out + 32, h->driver.driver_version);
    memcpy(out + 36, h->driver.cache_uuid, 16);
    kiln__store_le64(out + 120, kiln_hash64(out, 120));
}

void kiln__journal_slot(const struct kiln__journal_entry *e, unsigned char *out)
{
    memset(out, 0, KILN__JOURNAL_SLOT);
    kiln__store_le32(out, SLOT_TAG);
    kiln__store_le32(out + 4, e ? SLOT_IN_FLIGHT : SLOT_IDLE);
    if (e) {
        kiln__store_le64(out + 8, e->key.lo);
        kiln__store_le64(out + 16, e->key.hi);
        memcpy(out + 24, e->name, strnlen(e->name, KILN__JOURNAL_NAME - 1));
    }
    kiln__store_le64(out + 120, kiln_hash64(out, 120));
}

int kiln__journal_parse(const void *bytes, size_t n, struct kiln__journal_head *head,
                        kiln__journal_visit_fn visit, void *user, struct kiln__journal_scan *scan)
{
    const unsigned char *b = bytes;
    memset(scan, 0, sizeof(*scan));
    memset(head, 0, sizeof(*head));
    if (n == 0)
        return KILN_OK; /* emptied at a clean end */
    if (n < sizeof(MAGIC) || memcmp(b, MAGIC, sizeof(MAGIC)) != 0)
        return n < sizeof(MAGIC) && memcmp(b, MAGIC, n) == 0 ? KILN_ECORRUPT_HEADER : KILN_EFORMAT;
    if (n < KILN__JOURNAL_HEADER || kiln__load_le64(b + 120) != kiln_hash64(b, 120) ||
        kiln__load_le32(b + 8) != JOURNAL_VERSION ||
        kiln__load_le32(b + 12) != KILN__JOURNAL_SLOT ||
        kiln__load_le32(b + 16) > KILN__JOURNAL_MAX_SLOTS)
        return KILN_ECORRUPT_HEADER;
    head->nslots = kiln__load_le32(b + 16);
    head->pid = kiln__load_le32(b + 20);
    head->driver.vendor_id = kiln__load_le32(b + 24);
    head->driver.device_id = kiln__load_le32(b + 28);
    head->driver.driver_version = kiln__load_le32(b + 32);
    memcpy(head->driver.cache_uuid, b + 36, 16);
    size_t whole = (n - KILN__JOURNAL_HEADER) / KILN__JOURNAL_SLOT;
    if (whole > head->nslots)
        whole = head->nslots;
    for (size_t i = 0; i < whole; i++) {
        const unsigned char *s = b + KILN__JOURNAL_HEADER + i * KILN__JOURNAL_SLOT;
        uint32_t state = kiln__load_le32(s + 4);
        if (kiln__load_le32(s) != SLOT_TAG || kiln__load_le64(s + 120) != kiln_hash64(s, 120) ||
            state > SLOT_IN_FLIGHT) {
            scan->damaged++;
            continue;
        }
        if (state == SLOT_IDLE)
            continue;
        scan->in_flight++;
        if (visit) {
            struct kiln__journal_entry e;
            e.key.lo = kiln__load_le64(s + 8);
            e.key.hi = kiln__load_le64(s + 16);
            memcpy(e.name, s + 24, KILN__JOURNAL_NAME - 1);
            e.name[KILN__JOURNAL_NAME - 1] = '\0';
            visit(user, &e);
        }
    }
    return KILN_OK;
}

/* ---- one folder's journals, as one run sees them -------------------------- */

struct kiln__journal {
    const struct kiln_io *io;
    const char *dir;
    /* The dead runs' files, locked until settled (-1: none or let go). */
    int dead[KILN__JOURNAL_FILES];
    struct kiln__journal_suspect *suspects;
    size_t nsuspects, cap;
    /* This run's file (-1: none) and its slot count. */
    int fd;
    unsigned slots;
};

static int journal_path(const struct kiln__journal *j, unsigned i, char *out, size_t cap)
{
    char name[32];
    snprintf(name, sizeof(name), "inflight-%u.kpj", i);
    return kiln__path_join(out, cap, j->dir, name);
}

struct collect {
    struct kiln__journal *j;
    const struct kiln__journal_head *head;
    uint32_t in_flight;
    int rc;
};

static void collect_one(void *user, const struct kiln__journal_entry *e)
{
    struct collect *c = user;
    struct kiln__journal *j = c->j;
    if (c->rc < 0)
        return;
    if (j->nsuspects == j->cap) {
        void *p = kiln__grow(j->suspects, j->nsuspects, &j->cap, sizeof(*j->suspects), 8);
        if (!p) {
            c->rc = KILN_ENOMEM;
            return;
        }
        j->suspects = p;
    }
    struct kiln__journal_suspect *s = &j->suspects[j->nsuspects++];
    memset(s, 0, sizeof(*s));
    s->key = e->key;
    memcpy(s->name, e->name, sizeof(s->name));
    s->driver = c->head->driver;
    s->pid = c->head->pid;
    s->in_flight = c->in_flight;
}

/* Reads the locked file `fd` whole (at most JOURNAL_MAX_BYTES). */
static int read_locked(const struct kiln_io *io, int fd, unsigned char **data, size_t *n)
{
    uint64_t size = 0;
    *data = NULL;
    *n = 0;
    KILN_TRY(io->file_size(io, fd, &size));
    if (size > JOURNAL_MAX_BYTES)
        size = JOURNAL_MAX_BYTES; /* what lies past the largest journal is not read */
    unsigned char *buf = kiln__malloc(size ? (size_t)size : 1);
    if (!buf)
        return KILN_ENOMEM;
    int rc = size ? kiln_io_read_full(io, fd, buf, (size_t)size, 0) : KILN_OK;
    if (rc < 0) {
        kiln__free(buf);
        return rc;
    }
    *data = buf;
    *n = (size_t)size;
    return KILN_OK;
}

/* Reads one unlocked journal file; keeps it locked in j->dead when its run
 * died with programs in flight. @return 0 or KILN_ENOMEM. */
static int scan_one(struct kiln__journal *j, unsigned i, const char *path, int fd)
{
    const struct kiln_io *io = j->io;
    unsigned char *data = NULL;
    size_t n = 0;
    int rc = read_locked(io, fd, &data, &n);
    struct kiln__journal_head head;
    struct kiln__journal_scan scan = {0};
    if (rc == KILN_OK)
        rc = kiln__journal_parse(data, n, &head, NULL, NULL, &scan);
    if (rc == KILN_OK && scan.in_flight) {
        struct collect c = {.j = j, .head = &head, .in_flight = scan.in_flight};
        kiln__journal_parse(data, n, &head, collect_one, &c, &scan);
        rc = c.rc;
        if (rc == KILN_OK) {
            j->dead[i] = fd;
            fd = -1;
        }
    } else if (rc == KILN_ENOMEM) {
        /* stays an error */
    } else if (rc < 0) {
        /* A file of ours damaged (a power cut in the middle of a header):
         * no suspects to read; a claim writes over it. */
        KILN_WARN("prep", "%s: not a crash journal (%s): ignored", path, kiln_strerror(rc));
        rc = KILN_OK;
    }
    if (scan.damaged)
        KILN_WARN("prep", "%s: %" PRIu32 " damaged slot%s skipped", path, scan.damaged,
                  scan.damaged == 1 ? "" : "s");
    kiln__free(data);
    if (fd >= 0) {
        io->lock(io, fd, KILN_IO_UNLOCK);
        io->close(io, fd);
    }
    return rc == KILN_ENOMEM ? rc : KILN_OK;
}

int kiln__journal_scan(const char *dir, const struct kiln_io *io, struct kiln__journal **out)
{
    *out = NULL;
    struct kiln__journal *j = kiln__calloc(1, sizeof(*j));
    if (!j)
        return KILN_ENOMEM;
    j->io = io ? io : kiln_io_default();
    j->dir = dir;
    j->fd = -1;
    for (unsigned i = 0; i < KILN__JOURNAL_FILES; i++)
        j->dead[i] = -1;
    int rc = KILN_OK;
    for (unsigned i = 0; i < KILN__JOURNAL_FILES && rc == KILN_OK; i++) {
        char path[4096];
        rc = journal_path(j, i, path, sizeof(path));
        int fd = -1;
        if (rc < 0)
            continue;
        /* Read-only where the folder is (a start on a read-only mount still
         * skips what a dead run had in flight; it cannot empty the file). */
        if (j->io->open(j->io, path, KILN_IO_RDWR | KILN_IO_NOFOLLOW, &fd) < 0 &&
            j->io->open(j->io, path, KILN_IO_READ | KILN_IO_NOFOLLOW, &fd) < 0)
            continue; /* none there, or a link: nothing to read */
        if (j->io->lock(j->io, fd, KILN_IO_LOCK_EXCLUSIVE) < 0) {
            j->io->close(j->io, fd); /* a running process's */
            continue;
        }
        rc = scan_one(j, i, path, fd);
    }
    if (rc < 0) {
        kiln__journal_close(j);
        return rc;
    }
    *out = j;
    return KILN_OK;
}

size_t kiln__journal_suspects(const struct kiln__journal *j,
                              const struct kiln__journal_suspect **out)
{
    *out = j ? j->suspects : NULL;
    return j ? j->nsuspects : 0;
}

void kiln__journal_settle(struct kiln__journal *j, bool recorded)
{
    for (unsigned i = 0; j && i < KILN__JOURNAL_FILES; i++) {
        int fd = j->dead[i];
        if (fd < 0)
            continue;
        if (recorded) {
            int rc = j->io->truncate(j->io, fd, 0);
            if (rc < 0)
                KILN_WARN("prep", "%s: cannot empty a dead run's crash journal (%s)", j->dir,
                          kiln_strerror(rc));
        }
        j->io->lock(j->io, fd, KILN_IO_UNLOCK);
        j->io->close(j->io, fd);
        j->dead[i] = -1;
    }
}

/* Takes file i for this run when no process holds it and it holds no dead
 * run's programs. @return the locked descriptor, or -1. */
static int take_one(struct kiln__journal *j, unsigned i)
{
    char path[4096];
    int fd = -1;
    if (j->dead[i] >= 0 || journal_path(j, i, path, sizeof(path)) < 0 ||
        j->io->open(j->io, path, KILN_IO_RDWR | KILN_IO_CREATE | KILN_IO_NOFOLLOW, &fd) < 0)
        return -1;
    if (j->io->lock(j->io, fd, KILN_IO_LOCK_EXCLUSIVE) < 0) {
        j->io->close(j->io, fd);
        return -1;
    }
    unsigned char *data = NULL;
    size_t n = 0;
    struct kiln__journal_head head;
    struct kiln__journal_scan scan = {0};
    /* A dead run's programs appeared since the scan (or could not be
     * recorded): left for a run that records them. */
    bool keep = read_locked(j->io, fd, &data, &n) == KILN_OK &&
                kiln__journal_parse(data, n, &head, NULL, NULL, &scan) == KILN_OK &&
                scan.in_flight == 0;
    kiln__free(data);
    if (!keep) {
        j->io->lock(j->io, fd, KILN_IO_UNLOCK);
        j->io->close(j->io, fd);
        return -1;
    }
    return fd;
}

void kiln__journal_claim(struct kiln__journal *j, const struct kiln__ledger_driver *driver,
                         unsigned slots)
{
    if (!j || j->fd >= 0)
        return;
    if (slots == 0)
        slots = 1;
    if (slots > KILN__JOURNAL_MAX_SLOTS)
        slots = KILN__JOURNAL_MAX_SLOTS;
    int fd = -1;
    for (unsigned i = 0; i < KILN__JOURNAL_FILES && fd < 0; i++)
        fd = take_one(j, i);
    if (fd < 0) {
        KILN_INFO("prep", "%s: no crash journal for this run (none could be made or taken)",
                  j->dir);
        return;
    }
    size_t n = KILN__JOURNAL_HEADER + (size_t)slots * KILN__JOURNAL_SLOT;
    unsigned char *buf = kiln__malloc(n);
    int rc = buf ? KILN_OK : KILN_ENOMEM;
    if (rc == KILN_OK) {
        struct kiln__journal_head h = {
            .nslots = slots, .pid = (uint32_t)kiln__process_id(), .driver = *driver};
        kiln__journal_header(&h, buf);
        for (unsigned s = 0; s < slots; s++)
            kiln__journal_slot(NULL, buf + KILN__JOURNAL_HEADER + (size_t)s * KILN__JOURNAL_SLOT);
        /* Idle slots first, then the length: no moment shows old slots
         * under the new header. */
        rc = j->io->truncate(j->io, fd, 0);
        if (rc == KILN_OK)
            rc = kiln_io_write_full(j->io, fd, buf, n, 0);
    }
    kiln__free(buf);
    if (rc < 0) {
        KILN_INFO("prep", "%s: no crash journal for this run (%s)", j->dir, kiln_strerror(rc));
        j->io->truncate(j->io, fd, 0);
        j->io->lock(j->io, fd, KILN_IO_UNLOCK);
        j->io->close(j->io, fd);
        return;
    }
    j->fd = fd;
    j->slots = slots;
}

static void write_slot(struct kiln__journal *j, unsigned worker,
                       const struct kiln__journal_entry *e)
{
    if (!j || j->fd < 0 || worker >= j->slots)
        return;
    unsigned char slot[KILN__JOURNAL_SLOT];
    kiln__journal_slot(e, slot);
    /* A failed write costs only the next run's knowledge of this build. */
    (void)kiln_io_write_full(j->io, j->fd, slot, sizeof(slot),
                             KILN__JOURNAL_HEADER + (uint64_t)worker * KILN__JOURNAL_SLOT);
}

void kiln__journal_note(struct kiln__journal *j, unsigned worker, struct kiln_key key,
                        const char *name)
{
    if (!j || j->fd < 0)
        return;
    struct kiln__journal_entry e = {.key = key};
    if (name)
        snprintf(e.name, sizeof(e.name), "%s", name);
    write_slot(j, worker, &e);
}

void kiln__journal_done(struct kiln__journal *j, unsigned worker)
{
    write_slot(j, worker, NULL);
}

void kiln__journal_close(struct kiln__journal *j)
{
    if (!j)
        return;
    kiln__journal_settle(j, false);
    if (j->fd >= 0) {
        /* Empty before the lock goes: a clean end leaves nothing in flight. */
        j->io->truncate(j->io, j->fd, 0);
        j->io->lock(j->io, j->fd, KILN_IO_UNLOCK);
        j->io->close(j->io, j->fd);
    }
    kiln__free(j->suspects);
    kiln__free(j);
}
