/*
 * binaries_unix.c - what the tier of driver binaries asks of a POSIX
 * system: the entries of a folder and removing an empty one. Links are
 * neither followed nor listed (lstat), so a removal never leaves the
 * tier's folder.
 */
#include "binaries.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int kiln__bin_list(const char *dir, bool dirs, void (*fn)(void *user, const char *name), void *user)
{
    DIR *d = opendir(dir);
    if (!d)
        return kiln_error_from_errno(errno, KILN_EIO_OPEN);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[1024];
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            kiln__path_join(path, sizeof(path), dir, e->d_name) < 0 || lstat(path, &st) != 0)
            continue;
        if (dirs ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))
            fn(user, e->d_name);
    }
    closedir(d);
    return KILN_OK;
}

int kiln__bin_rmdir(const char *dir)
{
    return rmdir(dir) == 0 ? KILN_OK : kiln_error_from_errno(errno, KILN_EIO);
}
