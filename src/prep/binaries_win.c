/*
 * binaries_win.c - what the tier of driver binaries asks of Windows: the
 * entries of a folder and removing an empty one. Reparse points (links)
 * are not listed, so a removal never leaves the tier's folder.
 */
#include "binaries.h"

#include <string.h>
#include <windows.h>

int kiln__bin_list(const char *dir, bool dirs, void (*fn)(void *user, const char *name), void *user)
{
    char pattern[1024];
    KILN_TRY(kiln__path_join(pattern, sizeof(pattern), dir, "*"));
    wchar_t *w = NULL;
    KILN_TRY(kiln__win_path(pattern, &w));
    WIN32_FIND_DATAW fd;
    HANDLE find = FindFirstFileExW(w, FindExInfoBasic, &fd, FindExSearchNameMatch, NULL, 0);
    kiln__free(w);
    if (find == INVALID_HANDLE_VALUE) {
        DWORD err = GetLastError();
        return err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND ? KILN_ENOENT
                                                                          : KILN_EIO_OPEN;
    }
    do {
        char *name = NULL;
        DWORD a = fd.dwFileAttributes;
        bool is_dir = (a & FILE_ATTRIBUTE_DIRECTORY) != 0;
        if (wcscmp(fd.cFileName, L".") == 0 || wcscmp(fd.cFileName, L"..") == 0 ||
            (a & FILE_ATTRIBUTE_REPARSE_POINT) || is_dir != dirs ||
            kiln__win_utf8(fd.cFileName, &name) < 0)
            continue;
        fn(user, name);
        kiln__free(name);
    } while (FindNextFileW(find, &fd));
    FindClose(find);
    return KILN_OK;
}

int kiln__bin_rmdir(const char *dir)
{
    wchar_t *w = NULL;
    KILN_TRY(kiln__win_path(dir, &w));
    BOOL ok = RemoveDirectoryW(w);
    kiln__free(w);
    return ok ? KILN_OK : KILN_EIO;
}
