/*
 * cache_guard.c - whether a file kiln is asked to write would land on a
 * kiln cache (kiln_cache_check_output).
 *
 * A command that writes a file of its own (an exported archive) renames it
 * over its path at the end. Aimed at programs.kpc it would lose every
 * record; aimed at a cache another process writes, that process would go on
 * writing a file no one will read again and report success. Names cannot
 * tell ("C/../C/programs.kpc", a link), so the files themselves are
 * compared: device and file id (cache_sys_*.c).
 *
 * Invariants:
 * - A path is refused when it is any entry of the cache's folder (every
 *   entry, not a list of names: files a later kiln keeps there are covered
 *   too), or when its folder is the cache's or one that holds a kiln cache.
 *   The second test covers any name in such a folder, so the first one only
 *   adds links from outside it.
 * - The check only reads. A missing folder or target is no conflict: the
 *   write that follows fails, or makes a new file, on its own.
 * - It is a check before a write, not a lock: a cache first made in an
 *   empty folder after it ran (a prepare started that very moment) is not
 *   seen. kiln_foz_export checks again before its rename to keep that
 *   window short (the archive's sync).
 */
#include "cache_internal.h"

/* The files that make a folder a kiln cache's, whoever holds it. */
static const char *const cache_names[] = {KILN_CACHE_RECORDS_FILE, KILN_CACHE_INDEX_FILE,
                                          KILN_CACHE_DICT_FILE, KILN_CACHE_DICT_COPY_FILE,
                                          KILN_CACHE_USE_FILE};

/* @return 1 when folder `dir` holds a kiln cache's file, 0, or KILN_ERANGE. */
static int holds_a_cache(const char *dir)
{
    for (size_t i = 0; i < KILN_ARRAY_LEN(cache_names); i++) {
        char path[KILN__CACHE_PATH_MAX];
        struct kiln__file_id id;
        KILN_TRY(kiln__path_join(path, sizeof(path), dir, cache_names[i]));
        if (kiln__file_id_of(path, &id) == KILN_OK)
            return 1;
    }
    return 0;
}

static int check_output_body(const struct kiln_cache *c, const char *path)
{
    if (!path || !*path)
        return KILN_EINVAL;
    char folder[KILN__CACHE_PATH_MAX];
    KILN_TRY(kiln__path_dir(folder, sizeof(folder), path));
    struct kiln__file_id target, in, own;
    bool target_there = kiln__file_id_of(path, &target) == KILN_OK;
    if (kiln__file_id_of(folder, &in) != KILN_OK)
        return KILN_OK; /* no folder: nothing of a cache's there */
    if (c && kiln__file_id_of(c->dir, &own) == KILN_OK && kiln__file_id_equal(in, own))
        return KILN_ECACHE_FILE;
    int rc = holds_a_cache(folder);
    if (rc != 0)
        return rc < 0 ? rc : KILN_ECACHE_FILE;
    if (c && target_there) {
        rc = kiln__dir_holds(c->dir, target);
        if (rc != 0)
            return rc < 0 ? rc : KILN_ECACHE_FILE;
    }
    return KILN_OK;
}

int kiln_cache_check_output(const struct kiln_cache *c, const char *path)
{
    uint64_t m = kiln__err_mark();
    return KILN__CACHE_END(c, m, "kiln_cache_check_output", check_output_body(c, path));
}
