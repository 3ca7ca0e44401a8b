/*
 * cache_sys_unix.c - what the cache asks of the operating system beyond
 * file I/O: memory for large blocks, making a cache's folder, and the ids
 * of files (kiln_cache_check_output).
 */
#include "cache_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* Large blocks are mapped with their pages populated up front: one call
 * instead of a page fault per 4 KiB as a pread fills them, which was most of
 * a load's CPU time. (Transparent huge pages were tried too: in "madvise"
 * mode a fault may compact memory first, which stalled loads for seconds
 * right after a large cache had been written.) */
#define BIG_MIN (256u << 10)

void *kiln__cache_alloc_big(size_t n)
{
    if (n < BIG_MIN)
        return kiln__malloc(n);
#ifdef MAP_POPULATE
    void *p =
        mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
#else
    return kiln__malloc(n);
#endif
}

void kiln__cache_free_big(void *p, size_t n)
{
    if (!p)
        return;
#ifdef MAP_POPULATE
    if (n >= BIG_MIN) {
        munmap(p, n);
        return;
    }
#endif
    kiln__free(p);
}

int kiln__cache_make_dirs(const char *dir)
{
    size_t len = strlen(dir);
    if (!len)
        return KILN_ENOENT;
    char *p = kiln__malloc(len + 1);
    if (!p)
        return KILN_ENOMEM;
    memcpy(p, dir, len + 1);
    /* Each parent in turn; a failure there shows in the last one. */
    for (size_t i = 1; i < len; i++) {
        if (p[i] != '/' || p[i - 1] == '/')
            continue;
        p[i] = '\0';
        mkdir(p, 0777);
        p[i] = '/';
    }
    int rc = KILN_OK;
    struct stat st;
    if ((mkdir(p, 0777) != 0 && errno != EEXIST) || stat(p, &st) != 0)
        rc = kiln_error_from_errno(errno, KILN_EIO);
    else if (!S_ISDIR(st.st_mode))
        rc = kiln_error_from_errno(ENOTDIR, KILN_EIO); /* as opening a file in it says */
    kiln__free(p);
    return rc;
}

int kiln__file_id_of(const char *path, struct kiln__file_id *id)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return kiln_error_from_errno(errno, KILN_EIO_STAT);
    id->volume = (uint64_t)st.st_dev;
    id->file = (uint64_t)st.st_ino;
    return KILN_OK;
}

int kiln__dir_holds(const char *dir, struct kiln__file_id id)
{
    DIR *d = opendir(dir);
    if (!d)
        return kiln_error_from_errno(errno, KILN_EIO_OPEN);
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        char path[KILN__CACHE_PATH_MAX];
        struct kiln__file_id f = {0, 0};
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            kiln__path_join(path, sizeof(path), dir, e->d_name) < 0)
            continue;
        found = kiln__file_id_of(path, &f) == KILN_OK && kiln__file_id_equal(f, id);
    }
    closedir(d);
    return found;
}
