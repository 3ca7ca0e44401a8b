/*
 * corpus_unix.c - the folder walk of a corpus listing, over opendir.
 *
 * Hidden entries (a leading '.') are left out, so a corpus under version
 * control lists the same as a copy of it. Symbolic links to files are
 * followed; links to folders are not, so a link cycle cannot make the walk
 * endless, and the depth is bounded as well.
 */
#include "gen_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DEPTH 32

static int walk(const char *root, const char *rel, unsigned depth,
                int (*fn)(void *user, const char *rel), void *user)
{
    char path[4096];
    if (kiln__path_join(path, sizeof(path), root, rel) < 0) {
        KILN_ERROR("prep", "corpus %s: path of %s too long", root, rel);
        return KILN_ERANGE;
    }
    DIR *d = opendir(path);
    if (!d) {
        int rc = kiln_error_from_errno(errno, KILN_EIO_OPEN);
        KILN_ERROR("prep", "corpus folder %s: cannot open: %s", path, strerror(errno));
        return rc;
    }
    int rc = KILN_OK;
    struct dirent *e;
    while (rc == 0 && (errno = 0, e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4096], full[4096];
        int n = rel[0] ? snprintf(sub, sizeof(sub), "%s/%s", rel, e->d_name)
                       : snprintf(sub, sizeof(sub), "%s", e->d_name);
        if (n < 0 || (size_t)n >= sizeof(sub) ||
            kiln__path_join(full, sizeof(full), root, sub) < 0) {
            KILN_ERROR("prep", "corpus %s: path of %s/%s too long", root, rel, e->d_name);
            rc = KILN_ERANGE;
            break;
        }
        struct stat st;
        if (lstat(full, &st) != 0) {
            rc = kiln_error_from_errno(errno, KILN_EIO_STAT);
            KILN_ERROR("prep", "corpus file %s: cannot stat: %s", full, strerror(errno));
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            if (depth + 1 >= MAX_DEPTH) {
                KILN_ERROR("prep", "corpus folder %s: deeper than %d levels", full, MAX_DEPTH);
                rc = KILN_ERANGE;
                break;
            }
            rc = walk(root, sub, depth + 1, fn, user);
            continue;
        }
        if (S_ISLNK(st.st_mode) && (stat(full, &st) != 0 || !S_ISREG(st.st_mode)))
            continue; /* a dangling link or a link to a folder */
        if (!S_ISREG(st.st_mode))
            continue;
        rc = fn(user, sub);
    }
    if (rc == 0 && errno != 0 && e == NULL) {
        rc = kiln_error_from_errno(errno, KILN_EIO_READ);
        KILN_ERROR("prep", "corpus folder %s: cannot list: %s", path, strerror(errno));
    }
    closedir(d);
    return rc;
}

int kiln__prep_walk(const char *dir, int (*fn)(void *user, const char *rel), void *user)
{
    return walk(dir, "", 0, fn, user);
}
