/*
 * cache_dict.c - the cache's dictionary file (programs.kpd).
 *
 * The records header names the dictionary id the payloads were packed
 * with; programs.kpd holds that dictionary in kiln_pack_dict_bytes form
 * (which carries its own id and is checked on load). It is written with
 * kiln_io_replace_file before any records file that names it is put in
 * place. A rewrite that changes the dictionary writes the new one as
 * programs.kpd.new first, renames the new records file into place (the
 * commit point), then renames programs.kpd.new over programs.kpd; an open
 * that finds programs.kpd of another id but a programs.kpd.new of the right
 * one finishes that switch. A dictionary that cannot be found is an error,
 * never a wrong unpack: every blob also carries the id it needs.
 *
 * A unit below the store: it calls nothing of the store's.
 */
#include "cache_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static int side_path(const struct kiln_cache *c, const char *name, char *out, size_t cap)
{
    return kiln__path_join(out, cap, c->dir, name);
}

const struct kiln_pack_dict *kiln_cache_dict(struct kiln_cache *c)
{
    return c->dict;
}

static int dict_copy(const struct kiln_pack_dict *d, struct kiln_pack_dict **out)
{
    size_t n = 0;
    const void *b = kiln_pack_dict_bytes(d, &n);
    return kiln_pack_dict_load(b, n, out);
}

/* Reads a dictionary file. @return 0 with the dictionary when its id is
 * `want`; KILN_ESTAMP (another id, in *found), KILN_ECORRUPT, KILN_ENOENT,
 * or another read error. */
static int dict_read(const struct kiln_io *io, const char *path, uint64_t want,
                     struct kiln_pack_dict **out, uint64_t *found)
{
    *out = NULL;
    void *data = NULL;
    size_t n = 0;
    KILN_TRY(kiln__io_read_file(io, path, KILN_IO_NOFOLLOW, (size_t)64 << 20, &data, &n));
    struct kiln_pack_dict *d = NULL;
    int rc = kiln_pack_dict_load(data, n, &d);
    free(data);
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

int kiln__cache_dict_write(struct kiln_cache *c, const struct kiln_pack_dict *dict)
{
    char path[KILN__CACHE_PATH_MAX];
    KILN_TRY(side_path(c, KILN_CACHE_DICT_FILE, path, sizeof(path)));
    size_t n = 0;
    const void *b = kiln_pack_dict_bytes(dict, &n);
    int rc = kiln_io_replace_file(c->io, path, b, n);
    if (rc < 0) {
        KILN_WARN("cache", "%s: cannot write the dictionary: %s", path, kiln_strerror(rc));
        return rc;
    }
    if (c->dict && kiln_pack_dict_id(c->dict) == kiln_pack_dict_id(dict))
        return KILN_OK;
    struct kiln_pack_dict *copy = NULL;
    KILN_TRY(dict_copy(dict, &copy));
    kiln_pack_dict_destroy(c->dict);
    c->dict = copy;
    return KILN_OK;
}

int kiln__cache_dict_open(struct kiln_cache *c, const struct kiln_cache_options *opt)
{
    const struct kiln_io *io = c->io;
    bool ro = c->flags & KILN_CACHE_READ_ONLY;
    uint64_t want = c->header.dict_id;
    char kpd[KILN__CACHE_PATH_MAX], kpd_new[KILN__CACHE_PATH_MAX + 8];
    KILN_TRY(side_path(c, KILN_CACHE_DICT_FILE, kpd, sizeof(kpd)));
    snprintf(kpd_new, sizeof(kpd_new), "%s.new", kpd);
    struct kiln_pack_dict *d = NULL;
    uint64_t found = 0, found_new = 0;
    int rc = dict_read(io, kpd, want, &d, &found);
    if (rc == KILN_ENOMEM)
        return rc;
    int rc_main = rc;
    if (!d) {
        /* A rewrite that was cut short after its commit point left the
         * dictionary its records name under the pending name. */
        int rc_new = dict_read(io, kpd_new, want, &d, &found_new);
        if (rc_new == KILN_ENOMEM)
            return rc_new;
        if (d && !ro) {
            int r = io->rename(io, kpd_new, kpd);
            if (r == KILN_OK)
                r = io->fsync_dir(io, c->dir);
            if (r < 0)
                KILN_WARN("cache", "%s: cannot put the pending dictionary in place: %s", kpd,
                          kiln_strerror(r));
            else
                KILN_INFO("cache", "%s: finished switching to dictionary %016" PRIx64, kpd, want);
        }
    }
    if (!d && opt->dict && kiln_pack_dict_id(opt->dict) == want) {
        /* The caller has the very dictionary: put the file right. */
        if (!ro && kiln__cache_dict_write(c, opt->dict) == KILN_OK)
            return KILN_OK;
        KILN_TRY(dict_copy(opt->dict, &d));
    }
    if (!d) {
        char what[64];
        if (rc_main == KILN_ESTAMP)
            snprintf(what, sizeof(what), "holds dictionary %016" PRIx64, found);
        else
            snprintf(what, sizeof(what), "%s",
                     rc_main == KILN_ENOENT ? "is missing" : "is damaged or unreadable");
        KILN_ERROR("cache",
                   "%s: the records were packed with dictionary %016" PRIx64 " but %s %s; "
                   "they cannot be unpacked",
                   c->dir, want, kpd, what);
        return KILN_ECORRUPT;
    }
    kiln_pack_dict_destroy(c->dict);
    c->dict = d;
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
