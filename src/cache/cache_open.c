/*
 * cache_open.c - opening a program cache: named steps over the store.
 *
 * kiln_cache_open runs these steps in order, each a function below:
 *
 *   1. folder   KILN_CACHE_CREATE (or RESET) makes the folder and its parents.
 *   2. lock     open the records file; a writer locks it and makes sure the
 *               file it locked is still the one at the path.
 *   3. header   read and decode the records header; a missing or unfinished
 *               file becomes a new cache (with CREATE).
 *   4. stamp    the caller's stamp and dictionary id against the header's.
 *   5. dict     load the dictionary the header names.
 *   6. records  the index (when it matches) or a scan, then what lies past it.
 *   7. repair   a writer cuts a torn tail, syncs, and brings the index up.
 *   8. layers   the read-only layers beneath it, each opened on a worker of
 *               its own, beside steps 1 to 7 when their stamp is known
 *               before (see "read-only layers" below).
 *
 * Invariants and why they hold:
 *
 * - An open never removes or restarts a cache the caller did not ask to
 *   reset. Another stamp, another dictionary id, a header of another version
 *   or a damaged one are refused with an error that names what differs; the
 *   only steps that replace a records file are KILN_CACHE_RESET (asked for)
 *   and an unfinished file (empty, or a zero header and nothing after it),
 *   which never held a record. A cache with a dictionary is opened with it,
 *   whatever the flags, so no caller can mistake its records for another's.
 *
 * - The index never gets ahead of the records: a repair cuts the torn tail
 *   and syncs the records before an index entry names them.
 *
 * - A replaced file is never half there: a new records file is written
 *   and locked under a temporary name, synced, then renamed into place.
 */
#include "cache_internal.h"
#include "kiln/pool.h"

#include <assert.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"new", "index", "index+tail", "rebuilt", "restarted"};

const char *kiln_cache_open_kind_name(enum kiln_cache_open_kind kind)
{
    return (unsigned)kind < KILN_ARRAY_LEN(kind_names) ? kind_names[kind] : "?";
}

/* The open's one-line account, logged and kept for kiln_cache_get_stats. */
struct account {
    char text[sizeof(((struct kiln_cache_stats *)0)->open_text)];
    bool warn;
};

static void say(struct account *a, const char *fmt, ...) KILN_PRINTF(2, 3);

/* Appends to the account (cut short when it is long). */
static void say(struct account *a, const char *fmt, ...)
{
    size_t len = strlen(a->text);
    if (len + 1 >= sizeof(a->text))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->text + len, sizeof(a->text) - len, fmt, ap);
    va_end(ap);
}

/* ---- making a new records file --------------------------------------------- */

/* Moves (KILN_CACHE_MOVE_ASIDE: to `path` + `suffix`, never over a file
 * there) or removes a file of a cache being reset. */
static int set_aside(struct kiln_cache *c, const char *path, const char *suffix, bool required)
{
    int rc;
    if (c->flags & KILN_CACHE_MOVE_ASIDE) {
        char aside[KILN__CACHE_PATH_MAX + 48];
        snprintf(aside, sizeof(aside), "%s%s", path, suffix);
        rc = kiln_io_rename_new(c->io, path, aside);
    } else {
        rc = c->io->unlink(c->io, path);
    }
    return rc == KILN_ENOENT && !required ? KILN_OK : rc;
}

/* Whether `path` + `suffix` may be taken: nothing is there (an error other
 * than a missing file counts as taken). */
static bool aside_free(struct kiln_cache *c, const char *path, const char *suffix)
{
    char aside[KILN__CACHE_PATH_MAX + 48];
    snprintf(aside, sizeof(aside), "%s%s", path, suffix);
    int fd;
    int rc = c->io->open(c->io, aside, KILN_IO_READ | KILN_IO_NOFOLLOW, &fd);
    if (rc == KILN_OK)
        c->io->close(c->io, fd);
    return rc == KILN_ENOENT;
}

/*
 * Sets the old files aside before a reset's new records go in place. The
 * index goes first: a crash after it leaves old records with no index
 * (rebuilt at the next open), never a stale index beside new records.
 * Moved aside, they all take one suffix, ".<stamp>.old", or ".<stamp>.old.N"
 * (the first N from 1 that no file of the set holds yet), so a second reset
 * of a cache of the same stamp never writes over what the first set aside.
 */
static int set_aside_old(struct kiln_cache *c, const struct kiln__cache_header *old)
{
    char kpd[KILN__CACHE_PATH_MAX], kpd2[KILN__CACHE_PATH_MAX];
    KILN_TRY(kiln__path_join(kpd, sizeof(kpd), c->dir, KILN_CACHE_DICT_FILE));
    KILN_TRY(kiln__path_join(kpd2, sizeof(kpd2), c->dir, KILN_CACHE_DICT_COPY_FILE));
    char suffix[48];
    snprintf(suffix, sizeof(suffix), ".%016" PRIx64 ".old", old->stamp);
    for (unsigned n = 1;
         (c->flags & KILN_CACHE_MOVE_ASIDE) &&
         !(aside_free(c, c->rec_path, suffix) && aside_free(c, c->idx_path, suffix) &&
           aside_free(c, kpd, suffix) && aside_free(c, kpd2, suffix));
         n++) {
        if (n > 9999)
            return KILN_EEXIST;
        snprintf(suffix, sizeof(suffix), ".%016" PRIx64 ".old.%u", old->stamp, n);
    }
    KILN_TRY(set_aside(c, c->idx_path, suffix, false));
    if (!(c->flags & KILN_CACHE_MOVE_ASIDE))
        return KILN_OK;
    if (old->dict_id) {
        /* The old records cannot be unpacked without their dictionary. */
        KILN_TRY(set_aside(c, kpd, suffix, false));
        KILN_TRY(set_aside(c, kpd2, suffix, false));
    }
    return set_aside(c, c->rec_path, suffix, true);
}

/*
 * Opens the temporary name of a new records file, never through a link.
 * A writer that holds the cache's lock (a reset) is the only one to write
 * it: whatever is there goes. Without the lock (the first creation) another
 * creator may be writing it: a regular file there is opened as it is and
 * the lock taken next decides; a link or special file, never a creator's,
 * is removed.
 */
static int open_new_records(struct kiln_cache *c, const char *tmp, bool first, int *fd)
{
    const struct kiln_io *io = c->io;
    if (!first)
        return kiln__io_create_new(io, tmp, fd);
    const int excl = KILN_IO_RDWR | KILN_IO_CREATE | KILN_IO_EXCL | KILN_IO_NOFOLLOW;
    int rc = io->open(io, tmp, excl, fd);
    if (rc != KILN_EEXIST)
        return rc;
    rc = io->open(io, tmp, KILN_IO_RDWR | KILN_IO_NOFOLLOW, fd);
    if (rc != KILN_EFORMAT)
        return rc == KILN_ENOENT ? io->open(io, tmp, excl, fd) : rc;
    KILN_WARN("cache", "%s: not a regular file (a link or a special file); removed", tmp);
    KILN_TRY(io->unlink(io, tmp));
    return io->open(io, tmp, excl, fd);
}

/* Writes, locks and syncs a new records file under `tmp`. @return 0 with
 * the locked descriptor in *fd, KILN_EEXIST when a racing creator finished
 * first (only when there was no file: `old` NULL), or the error. */
static int write_new_records(struct kiln_cache *c, const struct kiln_cache_options *opt,
                             const char *tmp, bool expect_none, int *fd)
{
    const struct kiln_io *io = c->io;
    KILN_TRY(open_new_records(c, tmp, expect_none, fd));
    /* Lock before truncating: a second creator racing us must not clobber
     * the file we are writing. */
    int rc = io->lock(io, *fd, KILN_IO_LOCK_EXCLUSIVE);
    int probe;
    if (rc == KILN_OK && expect_none &&
        io->open(io, c->rec_path, KILN_IO_READ | KILN_IO_NOFOLLOW, &probe) == KILN_OK) {
        io->close(io, probe);
        rc = KILN_EEXIST; /* someone finished creating the cache while we opened */
    }
    if (rc < 0) {
        /* Not ours to remove: a racing creator may be writing it. */
        io->close(io, *fd);
        return rc;
    }
    c->header = (struct kiln__cache_header){.version = KILN__CACHE_VERSION,
                                            .unit = KILN__CACHE_HEAD_SIZE,
                                            .stamp = opt->stamp,
                                            .dict_id = opt->dict_id};
    rc = kiln_random_bytes(c->header.file_id, sizeof(c->header.file_id));
    if (rc == KILN_OK)
        rc = kiln_random_bytes(&c->header.session, sizeof(c->header.session));
    unsigned char hb[KILN__CACHE_HEADER_SIZE];
    kiln__cache_header_encode(hb, KILN__CACHE_REC_MAGIC, &c->header);
    if (rc == KILN_OK)
        rc = io->truncate(io, *fd, 0);
    if (rc == KILN_OK)
        rc = kiln_io_write_full(io, *fd, hb, sizeof(hb), 0);
    if (rc == KILN_OK)
        rc = io->fsync(io, *fd);
    if (rc < 0) {
        io->close(io, *fd);
        io->unlink(io, tmp);
    }
    return rc;
}

/*
 * Makes a new, empty records file with the caller's stamp and puts it in
 * place (see write_new_records). With `old` set (a reset) the old files are
 * set aside first. On success c->rec_fd is the new file, locked.
 */
static int create_records(struct kiln_cache *c, const struct kiln_cache_options *opt,
                          const struct kiln__cache_header *old)
{
    const struct kiln_io *io = c->io;
    char tmp[KILN__CACHE_PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.new", c->rec_path);
    int fd;
    KILN_TRY(write_new_records(c, opt, tmp, !old, &fd));
    int rc = old ? set_aside_old(c, old) : KILN_OK;
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
    kiln__cache_table_clear(c);
    /* An empty index; if it cannot be written the next sync or open makes it. */
    if (kiln__cache_index_write_whole(c) < 0)
        KILN_WARN("cache", "%s: could not write the new index; it will be rebuilt", c->idx_path);
    return KILN_OK;
}

/* ---- step 2: open and lock --------------------------------------------------- */

/* Opens the records file into c->rec_fd (-1 when missing: KILN_ENOENT); a
 * writer locks it. Failures are logged at info only: the caller reports
 * them, so a command prints one line, not two. */
static int open_and_lock(struct kiln_cache *c)
{
    const struct kiln_io *io = c->io;
    bool ro = c->flags & KILN_CACHE_READ_ONLY;
    int rc;
    for (int attempt = 0;; attempt++) {
        c->rec_fd = -1;
        rc = io->open(io, c->rec_path, (ro ? KILN_IO_READ : KILN_IO_RDWR) | KILN_IO_NOFOLLOW,
                      &c->rec_fd);
        if (rc < 0) {
            c->rec_fd = -1;
            if (rc == KILN_EFORMAT)
                KILN_INFO("cache",
                          "%s: not a regular file (a link, FIFO, device or folder); refused",
                          c->rec_path);
            else if (rc != KILN_ENOENT)
                KILN_INFO("cache", "%s: cannot open: %s", c->rec_path, kiln_strerror(rc));
            return rc;
        }
        if (ro)
            return KILN_OK;
        rc = io->lock(io, c->rec_fd, KILN_IO_LOCK_EXCLUSIVE);
        bool same = true;
        if (rc == KILN_OK && attempt < 8)
            rc = kiln__cache_still_at_path(c, true, &same);
        if (rc == KILN_EBUSY)
            KILN_INFO("cache", "%s: another writer holds this cache; open it read-only or later",
                      c->rec_path);
        else if (rc < 0)
            KILN_INFO("cache", "%s: cannot lock: %s", c->rec_path, kiln_strerror(rc));
        if (rc < 0 || same)
            return rc;
        /* Replaced while we waited for the lock: open the new file. */
        io->lock(io, c->rec_fd, KILN_IO_UNLOCK);
        io->close(io, c->rec_fd);
    }
}

/* ---- step 3: the header ---------------------------------------------------------- */

/* Reads and decodes the records header. @return its verdict (c->header
 * filled when OK), or an I/O error. */
static int read_header(struct kiln_cache *c, uint64_t *size)
{
    const struct kiln_io *io = c->io;
    KILN_TRY(io->file_size(io, c->rec_fd, size));
    unsigned char hb[KILN__CACHE_HEADER_SIZE] = {0};
    size_t hn = (size_t)KILN_MIN(*size, (uint64_t)sizeof(hb));
    if (hn)
        KILN_TRY(kiln_io_read_full(io, c->rec_fd, hb, hn, 0));
    enum kiln__cache_header_verdict v =
        kiln__cache_header_decode(hb, hn, KILN__CACHE_REC_MAGIC, &c->header);
    if (v == KILN__HEADER_ZERO && *size > KILN__CACHE_HEADER_SIZE)
        v = KILN__HEADER_DAMAGED; /* a zero header with bytes after it */
    return (int)v;
}

/* Handles a header that is not OK. @return 1 when the open is complete, or
 * the error that refuses it. */
static int header_not_ok(struct kiln_cache *c, const struct kiln_cache_options *opt,
                         enum kiln__cache_header_verdict v, uint64_t size, struct account *a)
{
    bool ro = c->flags & KILN_CACHE_READ_ONLY;
    if (v == KILN__HEADER_FOREIGN) {
        KILN_INFO("cache", "%s: not a kiln records file; left untouched", c->rec_path);
        return KILN_EFORMAT;
    }
    if (v == KILN__HEADER_ZERO && ro) {
        /* Never finished: nothing in it was ever a record. */
        memset(&c->header, 0, sizeof(c->header));
        c->header.stamp = opt->stamp;
        c->header.dict_id = opt->dict_id;
        c->rec_end = size;
        c->st.open_kind = KILN_CACHE_OPENED_NEW;
        say(a, "%s: records file is empty", c->rec_path);
        return 1;
    }
    if (v == KILN__HEADER_ZERO) {
        struct kiln__cache_header old = {0};
        KILN_TRY(create_records(c, opt, &old));
        c->st.open_kind = KILN_CACHE_OPENED_NEW;
        say(a, "%s: unfinished records file replaced by a new cache", c->rec_path);
        a->warn = true;
        return 1;
    }
    if (c->flags & KILN_CACHE_RESET) {
        struct kiln__cache_header old = {0};
        KILN_TRY(create_records(c, opt, &old));
        c->st.open_kind = KILN_CACHE_OPENED_RESTARTED;
        say(a,
            "%s: records file of another format version or with a damaged header %s; "
            "cache reset",
            c->dir, (c->flags & KILN_CACHE_MOVE_ASIDE) ? "moved aside" : "removed");
        a->warn = true;
        return 1;
    }
    if (v == KILN__HEADER_VERSION) {
        KILN_INFO("cache", "%s: written in another format version; left untouched", c->rec_path);
        return KILN_EFORMAT;
    }
    KILN_INFO("cache", "%s: the file header is damaged; left untouched", c->rec_path);
    return KILN_ECORRUPT_HEADER;
}

/* ---- step 4: the stamp ------------------------------------------------------------ */

/* Compares the caller's stamp and dictionary id with the header's; a reset
 * starts over here. @return 0 to go on, 1 when the open is complete
 * (reset), or KILN_ESTAMP. */
static int check_stamp(struct kiln_cache *c, const struct kiln_cache_options *opt,
                       struct account *a)
{
    const struct kiln__cache_header old = c->header;
    if (c->flags & KILN_CACHE_RESET) {
        KILN_TRY(create_records(c, opt, &old));
        c->st.open_kind = KILN_CACHE_OPENED_RESTARTED;
        say(a, "%s: reset as asked: old files (stamp %016" PRIx64 " dictionary %016" PRIx64 ") %s",
            c->dir, old.stamp, old.dict_id,
            (c->flags & KILN_CACHE_MOVE_ASIDE) ? "moved aside (*.old)" : "removed");
        a->warn = true;
        return 1;
    }
    if (c->flags & (KILN_CACHE_ANY_STAMP | KILN_CACHE_KEEP_STAMP))
        return KILN_OK;
    /* A caller that names no dictionary opens with the cache's own. */
    bool dict_ok = !opt->dict_id || opt->dict_id == old.dict_id;
    if (old.stamp == opt->stamp && dict_ok)
        return KILN_OK;
    KILN_INFO("cache",
              "%s: written with stamp %016" PRIx64 " dictionary %016" PRIx64
              ", not stamp %016" PRIx64 " dictionary %016" PRIx64
              "; left untouched (open it with KILN_CACHE_RESET, or kiln's --reset, to start over)",
              c->rec_path, old.stamp, old.dict_id, opt->stamp, opt->dict_id);
    return KILN_ESTAMP;
}

/* ---- step 5: the dictionary ---------------------------------------------------------- */

/* Loads the dictionary the header names. Inspection opens (ANY_STAMP) go on
 * without it when it cannot be loaded; every other open fails then, so no
 * caller packs or unpacks the cache's records without it. */
static int open_dict(struct kiln_cache *c, const struct kiln_cache_options *opt, struct account *a)
{
    if (!c->header.dict_id)
        return KILN_OK;
    if (opt->dict_id == c->header.dict_id && !opt->dict) {
        /* A caller that names the id and never gave kiln the dictionary
         * keeps its own: no programs.kpd is then expected. */
        char kpd[KILN__CACHE_PATH_MAX];
        int fd;
        KILN_TRY(kiln__path_join(kpd, sizeof(kpd), c->dir, KILN_CACHE_DICT_FILE));
        int rc = c->io->open(c->io, kpd, KILN_IO_READ | KILN_IO_NOFOLLOW, &fd);
        if (rc == KILN_ENOENT)
            return KILN_OK;
        if (rc == KILN_OK)
            c->io->close(c->io, fd);
    }
    int rc = kiln__cache_dict_open(c, opt);
    if (rc == KILN_ECORRUPT && (c->flags & KILN_CACHE_ANY_STAMP)) {
        say(a, "%s: dictionary %016" PRIx64 " not loaded; ", c->dir, c->header.dict_id);
        a->warn = true;
        return KILN_OK;
    }
    return rc;
}

/* ---- step 6: the index or a scan ------------------------------------------------------ */

/* Reads and parses the index file. @return 1 with its entries in *es and
 * the parse in *p, 0 when it cannot be used (*why), or KILN_ENOMEM. */
static int read_index(struct kiln_cache *c, uint64_t rec_size, struct kiln_cache_entry **es,
                      struct kiln__cache_index_parse *p, const char **why)
{
    void *data = NULL;
    size_t n = 0;
    uint64_t max_entries = (rec_size - KILN__CACHE_HEADER_SIZE) / KILN__CACHE_HEAD_SIZE;
    size_t max = (size_t)(KILN__CACHE_HEADER_SIZE + (max_entries + 1) * KILN__CACHE_ENTRY_SIZE);
    int rc = kiln__io_read_file(c->io, c->idx_path, KILN_IO_NOFOLLOW, max, &data, &n);
    if (rc == KILN_ENOMEM)
        return rc;
    if (rc < 0) {
        *why = rc == KILN_ENOENT   ? "it is missing"
               : rc == KILN_ERANGE ? "it holds more entries than the records could"
                                   : "it could not be read";
        return 0;
    }
    size_t cap =
        n > KILN__CACHE_HEADER_SIZE ? (n - KILN__CACHE_HEADER_SIZE) / KILN__CACHE_ENTRY_SIZE : 0;
    *es = kiln__malloc((cap ? cap : 1) * sizeof(**es));
    if (!*es) {
        kiln__free(data);
        return KILN_ENOMEM;
    }
    rc = kiln__cache_index_parse(data, n, rec_size, *es, p);
    kiln__free(data);
    if (rc < 0)
        *why = p->problem;
    else if (p->header.stamp != c->header.stamp || p->header.dict_id != c->header.dict_id)
        *why = "it has another stamp or dictionary";
    else if (memcmp(p->header.file_id, c->header.file_id, sizeof(p->header.file_id)) != 0)
        *why = "it belongs to another records file";
    else if (!kiln__cache_identity_fits(&p->header, &c->header))
        *why = "it belongs to another copy of the records (identity)";
    else
        return 1;
    kiln__free(*es);
    *es = NULL;
    return 0;
}

/*
 * The last entry must be the record it names: this catches an index written
 * for records that were later cut or replaced. When nothing whole follows
 * that record, its payload must check out too (a crash can keep an unsynced
 * head and lose its payload); entries for such records are dropped (at most
 * 16) and their bytes scanned again. @return 1 when usable, 0 when not, or
 * an I/O error.
 */
static int check_last_entries(struct kiln_cache *c, const struct kiln_cache_entry *es,
                              struct kiln__cache_index_parse *p, uint64_t rec_size)
{
    for (int dropped = 0; p->whole > 0; dropped++) {
        const struct kiln_cache_entry *last = &es[p->whole - 1];
        unsigned char hb[KILN__CACHE_HEAD_SIZE];
        struct kiln_cache_entry head;
        int rc = kiln_io_read_full(c->io, c->rec_fd, hb, sizeof(hb), last->offset);
        if (rc < 0 || kiln__cache_head_decode(hb, sizeof(hb), &head) < 0 ||
            !kiln__cache_head_matches(&head, last) || dropped == 16)
            return 0;
        rc = kiln__cache_last_ok(c->io, c->rec_fd, last, rec_size);
        if (rc != 0)
            return rc;
        p->whole--;
        p->partial = 1; /* the index file holds more than is used */
    }
    return 1;
}

/* Up to 16 entries spread over the index must match the heads of the
 * records they name: an index of another copy of the records (older than
 * identities, or with a torn identity) fails here even when its last entry
 * happens to match. @return 1 when they match, 0 when not, or an error. */
static int check_sampled_entries(struct kiln_cache *c, const struct kiln_cache_entry *es, size_t n)
{
    enum { SAMPLES = 16 };
    for (size_t k = 0; n > 1 && k < SAMPLES; k++) {
        size_t i = (size_t)((uint64_t)k * (n - 1) / SAMPLES);
        if (k && i == (size_t)((uint64_t)(k - 1) * (n - 1) / SAMPLES))
            continue;
        unsigned char hb[KILN__CACHE_HEAD_SIZE];
        struct kiln_cache_entry head;
        int rc = kiln_io_read_full(c->io, c->rec_fd, hb, sizeof(hb), es[i].offset);
        if (rc == KILN_EIO_SHORTREAD)
            return 0;
        KILN_TRY(rc);
        if (kiln__cache_head_decode(hb, sizeof(hb), &head) < 0 ||
            !kiln__cache_head_matches(&head, &es[i]))
            return 0;
    }
    return 1;
}

/* Fills the table from the index when it is usable.
 * @return 1 when used, 0 when not (with *why set), or an error. */
static int load_index(struct kiln_cache *c, uint64_t rec_size, const char **why, size_t *partial,
                      bool *identity_behind)
{
    struct kiln_cache_entry *es = NULL;
    struct kiln__cache_index_parse p;
    *partial = 0;
    int used = read_index(c, rec_size, &es, &p, why);
    if (used == 1) {
        used = check_last_entries(c, es, &p, rec_size);
        if (used == 0)
            *why = "its last entry does not match its record";
    }
    if (used == 1) {
        used = check_sampled_entries(c, es, p.whole);
        if (used == 0)
            *why = "its entries do not match the records they name";
    }
    for (size_t i = 0; used == 1 && i < p.whole; i++) {
        int rc = kiln__cache_add(c, &es[i]);
        if (rc < 0)
            used = rc;
    }
    if (used == 1) {
        *partial = p.partial;
        *identity_behind =
            p.header.session != c->header.session || p.header.generation != c->header.generation;
    }
    kiln__free(es);
    return used;
}

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

/* What the records step found, for the repair step. */
struct found {
    bool used;            /* the index was used */
    size_t indexed;       /* entries taken from the index */
    size_t partial;       /* the index file holds more than was used */
    uint64_t added;       /* records read past the index's end */
    uint64_t end;         /* end of the last whole record */
    uint64_t tail_cut;    /* torn tail bytes */
    const char *why;      /* why the index was not used */
    bool identity_behind; /* the index carries the records' previous identity */
};

/* Fills the table from the index and whatever lies past its end. */
static int load_records(struct kiln_cache *c, uint64_t size, struct found *f)
{
    int used = load_index(c, size, &f->why, &f->partial, &f->identity_behind);
    if (used < 0)
        return used;
    f->used = used == 1;
    if (!f->used)
        kiln__cache_table_clear(c);
    const struct kiln_cache_entry *last = c->count ? &c->entries[c->count - 1] : NULL;
    uint64_t from = last ? last->offset + kiln__cache_rec_len(last->size) : KILN__CACHE_HEADER_SIZE;
    f->indexed = c->count;
    struct scan_add sa = {.c = c};
    struct kiln__cache_scan s;
    int rc =
        kiln__cache_scan(c->io, c->rec_fd, c->rec_path, from, size, false, scan_add_fn, &sa, &s);
    if (rc < 0) {
        KILN_WARN("cache", "%s: reading records at open failed: %s", c->rec_path,
                  kiln_strerror(rc));
        return rc;
    }
    f->added = sa.added;
    f->end = s.end;
    f->tail_cut = s.tail_bytes;
    c->rec_end = s.end;
    c->st.tail_records = f->used ? sa.added : 0;
    c->st.damaged_bytes = s.damaged_bytes;
    c->st.cut_bytes = s.tail_bytes;
    return KILN_OK;
}

/* Says how the records step went. */
static void tell_records(struct kiln_cache *c, const struct found *f, struct account *a)
{
    bool ro = c->flags & KILN_CACHE_READ_ONLY;
    if (!f->used) {
        c->st.open_kind = KILN_CACHE_OPENED_REBUILT;
        say(a, "%s: index not used (%s): %zu record%s scanned%s", c->dir, f->why, c->count,
            c->count == 1 ? "" : "s",
            ro ? " (read-only: index left as it is)" : ", index rewritten");
        a->warn = true;
    } else if (f->added || f->partial) {
        c->st.open_kind = KILN_CACHE_OPENED_INDEX_TAIL;
        say(a, "%s: index used for %zu record%s%s; %" PRIu64 " more read past its end%s", c->dir,
            f->indexed, f->indexed == 1 ? "" : "s", f->partial ? " (cut short)" : "", f->added,
            ro ? " (read-only: index left behind)" : " and indexed");
    } else {
        c->st.open_kind = KILN_CACHE_OPENED_INDEX;
        say(a, "%s: index used, %zu record%s", c->dir, f->indexed, f->indexed == 1 ? "" : "s");
    }
    if (f->tail_cut) {
        say(a, "; torn tail of %" PRIu64 " bytes at offset %" PRIu64 " %s", f->tail_cut, f->end,
            ro ? "ignored (read-only)" : "cut");
        a->warn = true;
    }
    if (c->st.damaged_bytes) {
        say(a, "; %" PRIu64 " damaged bytes between records skipped", c->st.damaged_bytes);
        a->warn = true;
    }
}

/* ---- step 7: repair ---------------------------------------------------------------- */

/* Appends the entries the scan found past the index's end. */
static int index_catch_up(struct kiln_cache *c, const struct found *f)
{
    const struct kiln_io *io = c->io;
    int rc = io->open(io, c->idx_path, KILN_IO_RDWR | KILN_IO_NOFOLLOW, &c->idx_fd);
    if (rc < 0)
        c->idx_fd = -1;
    c->idx_end = KILN__CACHE_HEADER_SIZE + f->indexed * (uint64_t)KILN__CACHE_ENTRY_SIZE;
    if (rc == KILN_OK && f->partial)
        rc = io->truncate(io, c->idx_fd, c->idx_end);
    if (rc == KILN_OK && f->added) {
        size_t n = (c->count - f->indexed) * KILN__CACHE_ENTRY_SIZE;
        unsigned char *buf = kiln__malloc(n);
        rc = buf ? KILN_OK : KILN_ENOMEM;
        for (size_t i = f->indexed; buf && i < c->count; i++)
            kiln__cache_entry_encode(buf + (i - f->indexed) * KILN__CACHE_ENTRY_SIZE,
                                     &c->entries[i]);
        if (rc == KILN_OK)
            rc = kiln_io_write_full(io, c->idx_fd, buf, n, c->idx_end);
        kiln__free(buf);
        if (rc == KILN_OK)
            c->idx_end += n;
    }
    if (rc == KILN_OK && f->identity_behind) {
        unsigned char b[KILN__CACHE_IDENTITY_LEN];
        kiln__cache_identity_encode(b, &c->header);
        rc = kiln_io_write_full(io, c->idx_fd, b, sizeof(b), KILN__CACHE_IDENTITY_AT);
    }
    if (rc == KILN_OK && (f->added || f->partial || f->identity_behind))
        rc = io->fsync(io, c->idx_fd);
    return rc;
}

/* Records first: cut the torn tail and make the records durable before any
 * index entry names them; then the index. Only the records' failures fail
 * the open: an index that cannot be brought up is rewritten at the next sync. */
static int repair(struct kiln_cache *c, const struct found *f)
{
    const struct kiln_io *io = c->io;
    if (f->tail_cut) {
        int rc = io->truncate(io, c->rec_fd, f->end);
        if (rc < 0) {
            KILN_WARN("cache", "%s: cannot cut the torn tail at %" PRIu64 ": %s", c->rec_path,
                      f->end, kiln_strerror(rc));
            return rc;
        }
    }
    bool index_dirty = !f->used || f->added || f->partial || f->identity_behind;
    if (f->tail_cut || index_dirty) {
        int rc = io->fsync(io, c->rec_fd);
        if (rc < 0) {
            KILN_WARN("cache", "%s: sync failed: %s", c->rec_path, kiln_strerror(rc));
            return rc;
        }
    }
    int rc = f->used ? index_catch_up(c, f) : kiln__cache_index_write_whole(c);
    if (rc < 0) {
        c->idx_behind = true;
        KILN_WARN("cache",
                  "%s: could not bring the index up to date (%s); it is rewritten at "
                  "the next sync",
                  c->idx_path, kiln_strerror(rc));
    }
    return KILN_OK;
}

/* ---- the steps together ------------------------------------------------------------- */

/* Steps 2 to 7. @return 0, or the error (KILN_EEXIST: a racing creator
 * made the cache: open it again). */
static int open_files(struct kiln_cache *c, const struct kiln_cache_options *opt, struct account *a)
{
    bool ro = c->flags & KILN_CACHE_READ_ONLY;
    int rc = open_and_lock(c);
    if (rc == KILN_ENOENT) {
        if (ro || !(c->flags & (KILN_CACHE_CREATE | KILN_CACHE_RESET))) {
            KILN_INFO("cache", "%s: no cache here", c->rec_path);
            return KILN_ENOENT;
        }
        KILN_TRY(create_records(c, opt, NULL));
        c->st.open_kind = KILN_CACHE_OPENED_NEW;
        say(a, "%s: new cache created", c->dir);
        return KILN_OK;
    }
    KILN_TRY(rc);
    uint64_t size;
    rc = read_header(c, &size);
    if (rc > KILN__HEADER_OK)
        rc = header_not_ok(c, opt, (enum kiln__cache_header_verdict)rc, size, a);
    else if (rc == KILN__HEADER_OK)
        rc = check_stamp(c, opt, a);
    if (rc != KILN_OK)
        return rc < 0 ? rc : KILN_OK;
    KILN_TRY(open_dict(c, opt, a));
    struct found f = {0};
    KILN_TRY(load_records(c, size, &f));
    tell_records(c, &f, a);
    return ro ? KILN_OK : repair(c, &f);
}

/* Folds the options into one effective set. @return 0 or KILN_EINVAL. */
static int effective_options(const struct kiln_cache_options *opt, struct kiln_cache_options *eff)
{
    KILN_TRY(KILN_STRUCT_IN(eff, opt, "kiln_cache_options"));
    if (eff->io)
        KILN_TRY(kiln__io_check(eff->io));
    /* A dictionary given names the dictionary id. */
    if (eff->dict) {
        uint64_t id = kiln_pack_dict_id(eff->dict);
        if (eff->dict_id && eff->dict_id != id)
            return KILN_EINVAL;
        eff->dict_id = id;
    }
    unsigned f = eff->flags;
    if ((f & KILN_CACHE_ANY_STAMP) && !(f & KILN_CACHE_READ_ONLY))
        return KILN_EINVAL;
    if ((f & KILN_CACHE_RESET) && (f & (KILN_CACHE_READ_ONLY | KILN_CACHE_KEEP_STAMP)))
        return KILN_EINVAL;
    if (eff->max_size && eff->max_size != KILN_CACHE_NO_CAP && eff->max_size < KILN__CACHE_MIN_CAP)
        return KILN_EINVAL;
    return KILN_OK;
}

/* Allocates a handle with its paths and locks. */
static int handle_new(const char *dir, const struct kiln_cache_options *opt,
                      struct kiln_cache **out)
{
    struct kiln_cache *c = kiln__calloc(1, sizeof(*c));
    if (!c)
        return KILN_ENOMEM;
    c->io = opt->io ? opt->io : kiln_io_default();
    c->flags = opt->flags;
    c->today = opt->today ? opt->today : kiln__cache_clock_day();
    c->threads = kiln_pool_auto_workers(KILN_POOL_WORK_READ, opt->threads, NULL);
    if (kiln__exec_in(&c->executor, &c->has_executor, opt->executor) < 0) {
        kiln__free(c);
        return KILN_EINVAL;
    }
    c->rec_fd = -1;
    c->idx_fd = -1;
    c->st.read_only = opt->flags & KILN_CACHE_READ_ONLY;
    if (kiln__path_join(c->rec_path, sizeof(c->rec_path), dir, KILN_CACHE_RECORDS_FILE) < 0 ||
        kiln__path_join(c->idx_path, sizeof(c->idx_path), dir, KILN_CACHE_INDEX_FILE) < 0 ||
        snprintf(c->dir, sizeof(c->dir), "%s", dir) >= (int)sizeof(c->dir)) {
        kiln__free(c);
        return KILN_ERANGE;
    }
    if (kiln__cache_locks_init(c) < 0) {
        kiln__free(c);
        return KILN_ENOMEM;
    }
    *out = c;
    return KILN_OK;
}

/* ---- the cache itself ------------------------------------------------------ */

/* Steps 1 to 7 for the cache at `dir` (its layers aside). */
static int open_top(const char *dir, const struct kiln_cache_options *eff, struct kiln_cache **out)
{
    uint64_t t0 = kiln_now_ns();
    if ((eff->flags & (KILN_CACHE_CREATE | KILN_CACHE_RESET)) &&
        !(eff->flags & KILN_CACHE_READ_ONLY)) {
        int rc = kiln__cache_make_dirs(dir);
        if (rc < 0) {
            KILN_INFO("cache", "%s: cannot make the folder: %s", dir, kiln_strerror(rc));
            return rc;
        }
    }
    struct kiln_cache *c;
    KILN_TRY(handle_new(dir, eff, &c));
    struct account a;
    int rc;
    /* A racing creator can make the records file appear between our open
     * and our create: then open what it made. */
    for (int attempt = 0;; attempt++) {
        a.text[0] = '\0';
        a.warn = false;
        rc = open_files(c, eff, &a);
        if (rc != KILN_EEXIST || attempt == 2)
            break;
        kiln__cache_table_clear(c);
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
    kiln__cache_meta_load(c);
    uint64_t cap = eff->max_size == KILN_CACHE_NO_CAP ? 0 : eff->max_size;
    if (eff->max_size && !(c->flags & KILN_CACHE_READ_ONLY) && cap != c->max_size) {
        /* The caller's new cap (or none), remembered for the opens after. */
        rc = kiln__cache_meta_write(c, cap);
        if (rc < 0) {
            kiln_cache_close(c);
            return rc;
        }
    }
    c->st.stamp = c->header.stamp;
    c->st.dict_id = c->header.dict_id;
    c->st.open_ns = kiln_now_ns() - t0;
    memcpy(c->st.open_text, a.text, sizeof(a.text));
    if (a.warn)
        KILN_WARN("cache", "%s", a.text);
    else
        KILN_INFO("cache", "%s (%.1f ms)", a.text, (double)c->st.open_ns / 1e6);
    *out = c;
    return KILN_OK;
}

/* ---- read-only layers ------------------------------------------------------ */

/*
 * The layers open side by side, each on a worker of its own, and beside
 * the cache itself when their stamp is known before it opens: when the
 * open takes neither KILN_CACHE_ANY_STAMP nor KILN_CACHE_KEEP_STAMP, a
 * cache that opens carries the options' stamp (check_stamp), so that is
 * the layers' stamp too. Otherwise they open after it, with its header's
 * stamp. Each open reads its own folder and its own handle; what is
 * shared is the job below, each slot written by the one worker that took
 * it, read after every worker returned. The cache itself always opens on
 * the calling thread, so that its failure's text is that thread's
 * (kiln_last_errmsg).
 */
struct opening {
    const char *dir;                      /* the cache itself, when with_top */
    const struct kiln_cache_options *eff; /* its options; the layers' paths */
    struct kiln_cache_options lo;         /* a layer's options */
    struct kiln_cache *top;               /* with_top: what the open gave */
    struct kiln_cache *got[KILN_CACHE_MAX_LAYERS];
    int rc[KILN_CACHE_MAX_LAYERS];
    atomic_uint next;        /* the next layer to open */
    atomic_bool top_failed;  /* no more layers to open: the open fails */
    struct kiln_executor ex; /* has_ex: the options' executor, read */
    pthread_t caller;
    int top_rc;
    bool with_top;
    bool has_ex;
};

static void opener(void *arg)
{
    struct opening *o = arg;
    if (o->with_top && pthread_equal(pthread_self(), o->caller)) {
        o->top_rc = open_top(o->dir, o->eff, &o->top);
        /* A layer's open would log after the failure, and its line would
         * become the calling thread's error text. */
        if (o->top_rc < 0)
            atomic_store(&o->top_failed, true);
    }
    while (!atomic_load(&o->top_failed)) {
        unsigned i = atomic_fetch_add(&o->next, 1);
        if (i >= o->eff->nlayers)
            break;
        const char *dir = o->eff->layers[i];
        o->got[i] = NULL;
        o->rc[i] = dir ? kiln_cache_open(dir, &o->lo, &o->got[i]) : KILN_EINVAL;
        if (o->rc[i] == KILN_OK && !o->got[i])
            o->rc[i] =
                KILN_EINVAL; /* an open that succeeds gives a handle; the analyser cannot see it */
    }
}

/* Opens the layers (and, with o->with_top, the cache itself beside them)
 * on one worker each. */
static void open_side_by_side(struct opening *o, uint64_t stamp, uint32_t today)
{
    const struct kiln_cache_options *eff = o->eff;
    o->lo = (struct kiln_cache_options)KILN_CACHE_OPTIONS_INIT;
    o->lo.stamp = stamp;
    o->lo.flags = KILN_CACHE_READ_ONLY;
    o->lo.io = eff->io;
    o->lo.threads = eff->threads;
    o->lo.executor = eff->executor;
    o->lo.today = today;
    o->caller = pthread_self();
    atomic_init(&o->next, 0);
    atomic_init(&o->top_failed, false);
    kiln__exec_run(o->has_ex ? &o->ex : NULL, (unsigned)eff->nlayers + o->with_top, opener, o);
}

/*
 * Keeps the layers that opened beneath `c`, in the options' order: a layer
 * that could not be opened, or whose stamp or dictionary is not c's (a
 * payload is unpacked with c's dictionary), is left out with one warning
 * line. Never an error of the open: a shipped cache that no longer fits
 * costs its records, not the user's own.
 */
static void keep_layers(struct kiln_cache *c, struct opening *o)
{
    for (size_t i = 0; i < o->eff->nlayers; i++) {
        const char *dir = o->eff->layers[i];
        struct kiln_cache *l = o->got[i];
        int rc = o->rc[i];
        if (rc == KILN_OK && l->header.dict_id != c->header.dict_id) {
            KILN_WARN("cache",
                      "%s: layer %s left out: its dictionary %016" PRIx64
                      " is not this cache's (%016" PRIx64 ")",
                      c->dir, dir, l->header.dict_id, c->header.dict_id);
        } else if (rc < 0) {
            KILN_WARN("cache", "%s: layer %s left out: %s", c->dir, dir ? dir : "(null)",
                      rc == KILN_ESTAMP ? "it carries another stamp" : kiln_strerror(rc));
        } else {
            c->layers[c->nlayers++] = l;
            continue;
        }
        kiln_cache_close(l);
        c->layers_left_out++;
    }
}

static int open_body(const char *dir, const struct kiln_cache_options *opt, struct kiln_cache **out)
{
    if (!out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_cache_options eff = KILN_CACHE_OPTIONS_INIT;
    if (!dir || effective_options(opt, &eff) < 0)
        return KILN_EINVAL;
    if (eff.nlayers > KILN_CACHE_MAX_LAYERS || (eff.nlayers && !eff.layers)) {
        KILN_ERROR("cache", "%s: %zu layers (at most %u, in an array)", dir, eff.nlayers,
                   KILN_CACHE_MAX_LAYERS);
        return KILN_EINVAL;
    }
    if (!eff.nlayers)
        return open_top(dir, &eff, out);
    if (!eff.today)
        eff.today = kiln__cache_clock_day(); /* one day for the cache and its layers */
    struct opening o = {.dir = dir, .eff = &eff};
    if (kiln__exec_in(&o.ex, &o.has_ex, eff.executor) < 0)
        return KILN_EINVAL;
    o.with_top = !(eff.flags & (KILN_CACHE_ANY_STAMP | KILN_CACHE_KEEP_STAMP));
    struct kiln_cache *c = NULL;
    int rc = KILN_OK;
    if (o.with_top) {
        open_side_by_side(&o, eff.stamp, eff.today);
        c = o.top;
        rc = o.top_rc;
    } else {
        rc = open_top(dir, &eff, &c);
        if (rc == KILN_OK)
            open_side_by_side(&o, c->header.stamp, eff.today);
    }
    if (rc == KILN_OK) {
        assert(c->header.stamp == o.lo.stamp); /* check_stamp: see struct opening */
        keep_layers(c, &o);
    } else {
        for (size_t i = 0; o.with_top && i < eff.nlayers; i++)
            kiln_cache_close(o.got[i]);
    }
    *out = rc == KILN_OK ? c : NULL;
    return rc;
}

/* No handle comes back from a failed open: its text is the thread's
 * (kiln_last_errmsg). */
int kiln_cache_open(const char *dir, const struct kiln_cache_options *opt, struct kiln_cache **out)
{
    uint64_t m = kiln__err_mark();
    return kiln__err_end(NULL, m, "kiln_cache_open", dir, open_body(dir, opt, out));
}

const char *kiln_cache_errmsg(const struct kiln_cache *c)
{
    return c ? kiln__err_text((struct kiln__errbuf *)&c->err) : "kiln_cache_errmsg: no cache";
}
