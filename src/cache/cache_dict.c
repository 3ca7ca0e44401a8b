/*
 * cache_dict.c - the cache's dictionary file (programs.kpd).
 *
 * The records header names the dictionary id the payloads were packed
 * with; programs.kpd holds that dictionary in kiln_pack_dict_bytes form
 * (which carries its own id and is checked on load). It is written with
 * kiln_io_replace_file before any records file that names it is put in
 * place. A rewrite that changes the dictionary writes the new one as
 * programs.kpd.new first, renames the new records file into place (the
 * commit point), then renames programs.kpd.new over programs.kpd and writes
 * the second copy; an open that finds no copy of the right id but a
 * programs.kpd.new of it finishes that switch. A dictionary that cannot be
 * found is an error, never a wrong unpack (every blob also carries the id it
 * needs), and never a reason to drop records.
 *
 * Kept twice. programs.kpd2 holds the same bytes, so one damaged copy
 * (each checks itself: the id is a hash of the content) loses nothing: an
 * open uses the whole one, a writer's open and `check --repair` write the
 * other again from it.
 *
 * A unit below the store: it calls nothing of the store's.
 */
#include "cache_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int side_path(const struct kiln_cache *c, const char *name, char *out, size_t cap)
{
    return kiln__path_join(out, cap, c->dir, name);
}

const struct kiln_pack_dict *kiln_cache_dict(struct kiln_cache *c)
{
    if (!c)
        return NULL;
    return c->dict;
}

const char *kiln_cache_dir(const struct kiln_cache *c)
{
    return c ? c->dir : NULL;
}

static int dict_copy(const struct kiln_pack_dict *d, struct kiln_pack_dict **out)
{
    size_t n = 0;
    const void *b = kiln_pack_dict_bytes(d, &n);
    return kiln_pack_dict_load(b, n, out);
}

/* Reads a dictionary file. @return 0 with the dictionary when its id is
 * `want`; KILN_ESTAMP (another id, in *found), KILN_ECORRUPT, KILN_ENOENT
 * (also for an empty file: *found is then 1), or another read error. */
static int dict_read(const struct kiln_io *io, const char *path, uint64_t want,
                     struct kiln_pack_dict **out, uint64_t *found)
{
    *out = NULL;
    void *data = NULL;
    size_t n = 0;
    *found = 0;
    KILN_TRY(kiln__io_read_file(io, path, KILN_IO_NOFOLLOW, (size_t)64 << 20, &data, &n));
    if (n == 0) {
        /* No bytes disagree with the other copy: lost like a missing one. */
        kiln__free(data);
        *found = 1;
        return KILN_ENOENT;
    }
    struct kiln_pack_dict *d = NULL;
    int rc = kiln_pack_dict_load(data, n, &d);
    kiln__free(data);
    if (rc < 0)
        return rc == KILN_ENOMEM ? rc : KILN_ECORRUPT;
    *found = kiln_pack_dict_id(d);
    if (*found != want) {
        kiln_pack_dict_destroy(d);
        return KILN_ESTAMP;
    }
    *out = d;
    return KILN_OK;
}

/* Writes the dictionary bytes as both copies (each crash-safely). */
static int write_copies(const struct kiln_io *io, const char *dir, const void *b, size_t n,
                        unsigned which)
{
    static const char *const names[2] = {KILN_CACHE_DICT_FILE, KILN_CACHE_DICT_COPY_FILE};
    for (unsigned i = 0; i < 2; i++) {
        if (!(which & (1u << i)))
            continue;
        char path[KILN__CACHE_PATH_MAX];
        KILN_TRY(kiln__path_join(path, sizeof(path), dir, names[i]));
        int rc = kiln_io_replace_file(io, path, b, n);
        if (rc < 0) {
            KILN_WARN("cache", "%s: cannot write the dictionary: %s", path, kiln_strerror(rc));
            return rc;
        }
    }
    return KILN_OK;
}

int kiln__cache_dict_write(struct kiln_cache *c, const struct kiln_pack_dict *dict)
{
    size_t n = 0;
    const void *b = kiln_pack_dict_bytes(dict, &n);
    KILN_TRY(write_copies(c->io, c->dir, b, n, 3));
    if (c->dict && kiln_pack_dict_id(c->dict) == kiln_pack_dict_id(dict))
        return KILN_OK;
    struct kiln_pack_dict *copy = NULL;
    KILN_TRY(dict_copy(dict, &copy));
    kiln_pack_dict_destroy(c->dict);
    c->dict = copy;
    return KILN_OK;
}

/* What reading both copies of a dictionary found. */
struct copies {
    struct kiln_pack_dict *d; /* the dictionary, from the first whole copy */
    int rc[2];                /* each copy's dict_read result */
    uint64_t found[2];        /* each copy's id when it was another; 1 for an empty file */
    bool from_pending;        /* read from programs.kpd.new */
};

static void copies_free(struct copies *k)
{
    kiln_pack_dict_destroy(k->d);
    k->d = NULL;
}

/* Reads both copies, and the pending programs.kpd.new when neither is
 * whole. @return 0 (k->d NULL when no whole copy), or KILN_ENOMEM. */
static int read_copies(const struct kiln_io *io, const char *dir, uint64_t want, struct copies *k)
{
    static const char *const names[2] = {KILN_CACHE_DICT_FILE, KILN_CACHE_DICT_COPY_FILE};
    memset(k, 0, sizeof(*k));
    for (unsigned i = 0; i < 2; i++) {
        char path[KILN__CACHE_PATH_MAX];
        KILN_TRY(kiln__path_join(path, sizeof(path), dir, names[i]));
        struct kiln_pack_dict *d = NULL;
        k->rc[i] = dict_read(io, path, want, &d, &k->found[i]);
        if (k->rc[i] == KILN_ENOMEM) {
            copies_free(k);
            return KILN_ENOMEM;
        }
        if (d && !k->d)
            k->d = d;
        else
            kiln_pack_dict_destroy(d);
    }
    if (!k->d) {
        /* A rewrite that was cut short after its commit point left the
         * dictionary its records name under the pending name. */
        char kpd_new[KILN__CACHE_PATH_MAX + 8];
        snprintf(kpd_new, sizeof(kpd_new), "%s/%s.new", dir, KILN_CACHE_DICT_FILE);
        uint64_t found = 0;
        int rc = dict_read(io, kpd_new, want, &k->d, &found);
        if (rc == KILN_ENOMEM)
            return rc;
        k->from_pending = k->d != NULL;
    }
    return KILN_OK;
}

/* Says what is wrong with one copy, into `out`. */
static void copy_problem(const struct copies *k, unsigned i, char *out, size_t cap)
{
    if (k->rc[i] == KILN_ESTAMP)
        snprintf(out, cap, "holds dictionary %016" PRIx64, k->found[i]);
    else
        snprintf(out, cap, "%s",
                 k->rc[i] != KILN_ENOENT ? "is damaged"
                 : k->found[i]           ? "is empty"
                                         : "is missing");
}

/* Writes the copies that are not whole from `k->d` (the pending file is
 * removed once both copies hold it). @return the copies restored (bits). */
static unsigned restore_copies(const struct kiln_io *io, const char *dir, const struct copies *k)
{
    unsigned which = (k->rc[0] != KILN_OK ? 1u : 0u) | (k->rc[1] != KILN_OK ? 2u : 0u);
    if (!which || !k->d)
        return 0;
    size_t n = 0;
    const void *b = kiln_pack_dict_bytes(k->d, &n);
    if (write_copies(io, dir, b, n, which) < 0)
        return 0;
    if (k->from_pending) {
        char kpd_new[KILN__CACHE_PATH_MAX + 8];
        snprintf(kpd_new, sizeof(kpd_new), "%s/%s.new", dir, KILN_CACHE_DICT_FILE);
        io->unlink(io, kpd_new);
    }
    return which;
}

int kiln__cache_dict_open(struct kiln_cache *c, const struct kiln_cache_options *opt)
{
    bool ro = c->flags & KILN_CACHE_READ_ONLY;
    uint64_t want = c->header.dict_id;
    struct copies k;
    KILN_TRY(read_copies(c->io, c->dir, want, &k));
    if (!k.d && opt->dict && kiln_pack_dict_id(opt->dict) == want) {
        /* The caller has the very dictionary: put the files right. */
        if (!ro && kiln__cache_dict_write(c, opt->dict) == KILN_OK)
            return KILN_OK;
        KILN_TRY(dict_copy(opt->dict, &k.d));
        k.rc[0] = k.rc[1] = KILN_OK;
    }
    if (!k.d) {
        char p0[64], p1[64];
        copy_problem(&k, 0, p0, sizeof(p0));
        copy_problem(&k, 1, p1, sizeof(p1));
        KILN_ERROR("cache",
                   "%s: the records were packed with dictionary %016" PRIx64 " but %s %s and %s "
                   "%s; they cannot be unpacked (the records are kept)",
                   c->dir, want, KILN_CACHE_DICT_FILE, p0, KILN_CACHE_DICT_COPY_FILE, p1);
        return KILN_ECORRUPT;
    }
    if (!ro && restore_copies(c->io, c->dir, &k))
        KILN_INFO("cache", "%s: dictionary %016" PRIx64 " restored from its whole copy", c->dir,
                  want);
    kiln_pack_dict_destroy(c->dict);
    c->dict = k.d;
    return KILN_OK;
}

int kiln__cache_dict_switch(struct kiln_cache *c, const struct kiln_pack_dict *dict)
{
    const struct kiln_io *io = c->io;
    char kpd[KILN__CACHE_PATH_MAX], kpd2[KILN__CACHE_PATH_MAX], kpd_new[KILN__CACHE_PATH_MAX + 8];
    KILN_TRY(side_path(c, KILN_CACHE_DICT_FILE, kpd, sizeof(kpd)));
    KILN_TRY(side_path(c, KILN_CACHE_DICT_COPY_FILE, kpd2, sizeof(kpd2)));
    snprintf(kpd_new, sizeof(kpd_new), "%s.new", kpd);
    int rc;
    if (dict) {
        rc = io->rename(io, kpd_new, kpd);
        if (rc == KILN_OK) {
            size_t n = 0;
            const void *b = kiln_pack_dict_bytes(dict, &n);
            rc = write_copies(io, c->dir, b, n, 2);
        }
    } else {
        rc = io->unlink(io, kpd);
        if (rc == KILN_OK || rc == KILN_ENOENT)
            rc = io->unlink(io, kpd2);
        if (rc == KILN_ENOENT)
            rc = KILN_OK;
    }
    if (rc == KILN_OK)
        rc = io->fsync_dir(io, c->dir);
    if (rc < 0)
        KILN_WARN("cache", "%s: cannot put the new dictionary in place (%s); the next open does",
                  kpd, kiln_strerror(rc));
    if (kiln__cache_dict_set(c, dict) < 0)
        KILN_WARN("cache", "%s: the new dictionary is written but not kept in memory; reopen",
                  c->dir);
    return rc;
}

int kiln__cache_dict_check(const struct kiln_io *io, const char *dir, uint64_t want, bool repair,
                           unsigned *whole, bool *damaged, char *text, size_t cap)
{
    *whole = 2;
    *damaged = false;
    snprintf(text, cap, "%s", want ? "both copies whole" : "none");
    if (!want)
        return KILN_OK;
    struct copies k;
    KILN_TRY(read_copies(io, dir, want, &k));
    *whole = (k.rc[0] == KILN_OK) + (k.rc[1] == KILN_OK);
    /* A missing or empty copy beside a whole one is an older cache or a
     * cut-short write, not damage (nothing in it disagrees, and a repair or
     * a writer's open writes it again); a copy of other bytes is damage. */
    *damaged = !k.d || (k.rc[0] != KILN_OK && k.rc[0] != KILN_ENOENT) ||
               (k.rc[1] != KILN_OK && k.rc[1] != KILN_ENOENT);
    char p0[64], p1[64];
    copy_problem(&k, 0, p0, sizeof(p0));
    copy_problem(&k, 1, p1, sizeof(p1));
    if (!k.d)
        snprintf(text, cap, "%s %s, %s %s: the records cannot be unpacked", KILN_CACHE_DICT_FILE,
                 p0, KILN_CACHE_DICT_COPY_FILE, p1);
    else if (*whole < 2)
        snprintf(text, cap, "%s %s%s",
                 k.rc[0] != KILN_OK ? KILN_CACHE_DICT_FILE : KILN_CACHE_DICT_COPY_FILE,
                 k.rc[0] != KILN_OK ? p0 : p1,
                 k.from_pending ? " (a pending switch holds it)" : "");
    if (repair && k.d) {
        unsigned fixed = restore_copies(io, dir, &k);
        if (fixed) {
            *whole = 2;
            *damaged = false;
            size_t len = strlen(text);
            snprintf(text + len, cap - len, "; restored from the whole copy");
        }
    }
    copies_free(&k);
    return KILN_OK;
}

int kiln__cache_dict_set(struct kiln_cache *c, const struct kiln_pack_dict *dict)
{
    struct kiln_pack_dict *copy = NULL;
    int rc = dict ? dict_copy(dict, &copy) : KILN_OK;
    kiln_pack_dict_destroy(c->dict);
    c->dict = copy;
    return rc;
}
