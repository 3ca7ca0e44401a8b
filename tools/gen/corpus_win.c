/*
 * corpus_win.c - the folder walk of a corpus listing on Windows, over
 * FindFirstFileExW.
 *
 * It lists what corpus_unix.c lists: names with a leading '.' are left out,
 * so a corpus under version control lists the same as a copy of it; links
 * to files are followed (a dangling one is skipped) and links to folders
 * (symbolic links and junctions, both reparse points) are not, so a cycle
 * cannot make the walk endless; the depth is bounded as well. Names are
 * UTF-8 both ways (kiln__win_path, kiln__win_utf8), so folders named
 * outside ASCII work, and relative paths come back '/' separated as on
 * every platform.
 */
#include "gen_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#define MAX_DEPTH 32

/* Whether the file a link names is there (opening follows the link). */
static bool link_target_is_file(const char *full)
{
    wchar_t *w = NULL;
    if (kiln__win_path(full, &w) < 0)
        return false;
    HANDLE h = CreateFileW(w, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                           OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    kiln__free(w);
    if (h == INVALID_HANDLE_VALUE)
        return false;
    BY_HANDLE_FILE_INFORMATION info;
    bool file =
        GetFileInformationByHandle(h, &info) && !(info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY);
    CloseHandle(h);
    return file;
}

static int walk(const char *root, const char *rel, unsigned depth,
                int (*fn)(void *user, const char *rel), void *user)
{
    char path[4096], pattern[4096];
    if (kiln__path_join(path, sizeof(path), root, rel) < 0 ||
        kiln__path_join(pattern, sizeof(pattern), path, "*") < 0) {
        KILN_ERROR("prep", "corpus %s: path of %s too long", root, rel);
        return KILN_ERANGE;
    }
    wchar_t *wpattern = NULL;
    KILN_TRY(kiln__win_path(pattern, &wpattern));
    WIN32_FIND_DATAW fd;
    HANDLE find = FindFirstFileExW(wpattern, FindExInfoBasic, &fd, FindExSearchNameMatch, NULL,
                                   FIND_FIRST_EX_LARGE_FETCH);
    kiln__free(wpattern);
    if (find == INVALID_HANDLE_VALUE) {
        DWORD err = GetLastError();
        KILN_ERROR("prep", "corpus folder %s: cannot open: error %lu", path, (unsigned long)err);
        return err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND ? KILN_ENOENT
               : err == ERROR_ACCESS_DENIED                               ? KILN_EACCES
               : err == ERROR_DIRECTORY                                   ? KILN_EINVAL
                                                                          : KILN_EIO_OPEN;
    }
    int rc = KILN_OK;
    do {
        if (fd.cFileName[0] == L'.')
            continue; /* ".", ".." and hidden names */
        char *name = NULL;
        rc = kiln__win_utf8(fd.cFileName, &name);
        if (rc < 0) {
            KILN_ERROR("prep", "corpus folder %s: a name that is not UTF-16", path);
            break;
        }
        char sub[4096], full[4096];
        int n = rel[0] ? snprintf(sub, sizeof(sub), "%s/%s", rel, name)
                       : snprintf(sub, sizeof(sub), "%s", name);
        bool fits = n >= 0 && (size_t)n < sizeof(sub) &&
                    kiln__path_join(full, sizeof(full), root, sub) == 0;
        if (!fits)
            KILN_ERROR("prep", "corpus %s: path of %s/%s too long", root, rel, name);
        kiln__free(name);
        if (!fits) {
            rc = KILN_ERANGE;
            break;
        }
        DWORD attr = fd.dwFileAttributes;
        bool reparse = (attr & FILE_ATTRIBUTE_REPARSE_POINT) != 0;
        if (attr & FILE_ATTRIBUTE_DIRECTORY) {
            if (reparse)
                continue; /* a link to a folder, or a junction */
            if (depth + 1 >= MAX_DEPTH) {
                KILN_ERROR("prep", "corpus folder %s: deeper than %d levels", full, MAX_DEPTH);
                rc = KILN_ERANGE;
                break;
            }
            rc = walk(root, sub, depth + 1, fn, user);
            continue;
        }
        if (attr & FILE_ATTRIBUTE_DEVICE)
            continue;
        if (reparse && !link_target_is_file(full))
            continue; /* a dangling link */
        rc = fn(user, sub);
    } while (rc == KILN_OK && FindNextFileW(find, &fd));
    if (rc == KILN_OK && GetLastError() != ERROR_NO_MORE_FILES) {
        KILN_ERROR("prep", "corpus folder %s: cannot list: error %lu", path,
                   (unsigned long)GetLastError());
        rc = KILN_EIO_READ;
    }
    FindClose(find);
    return rc;
}

int kiln__prep_walk(const char *dir, int (*fn)(void *user, const char *rel), void *user)
{
    return walk(dir, "", 0, fn, user);
}
