/*
 * test_windows.c - what only the Windows build has: kiln.exe's manifest and
 * a start of kiln.exe from a folder whose name is not ASCII.
 *
 * The manifest is read back from the built exe the way the loader finds it
 * (resource 1 of type RT_MANIFEST), so a build that drops kiln.rc, or a
 * manifest that loses the segment heap, fails here rather than on a player's
 * machine with a slower heap.
 */
#include "kiln_test.h"
#include "kiln_internal.h"

#include <windows.h>

/* The folder name used for the non-ASCII start: "kiln-tëst-ü" in UTF-8. */
#define UTF8_FOLDER "kiln-t\xc3\xabst-\xc3\xbc"

/* Copies resource 1 of type RT_MANIFEST out of the exe at `path`. */
static int read_manifest(const char *path, char **text)
{
    wchar_t *w;
    KILN_TRY(kiln__win_path(path, &w));
    HMODULE mod =
        LoadLibraryExW(w, NULL, LOAD_LIBRARY_AS_DATAFILE | LOAD_LIBRARY_AS_IMAGE_RESOURCE);
    free(w);
    if (!mod)
        return KILN_ENOENT;
    int rc = KILN_ENOTFOUND;
    HRSRC res = FindResourceW(mod, MAKEINTRESOURCEW(CREATEPROCESS_MANIFEST_RESOURCE_ID),
                              MAKEINTRESOURCEW(24)); /* RT_MANIFEST */
    HGLOBAL data = res ? LoadResource(mod, res) : NULL;
    const void *bytes = data ? LockResource(data) : NULL;
    DWORD size = res ? SizeofResource(mod, res) : 0;
    if (bytes && size > 0) {
        *text = malloc((size_t)size + 1);
        rc = *text ? KILN_OK : KILN_ENOMEM;
        if (*text) {
            memcpy(*text, bytes, size);
            (*text)[size] = '\0';
        }
    }
    FreeLibrary(mod);
    return rc;
}

/* @return whether `xml` has an element `name` whose text is `value`. */
static bool has_setting(const char *xml, const char *name, const char *value)
{
    char open[64], close[64];
    snprintf(open, sizeof(open), "<%s", name);
    snprintf(close, sizeof(close), ">%s</%s>", value, name);
    const char *at = strstr(xml, open);
    if (!at)
        return false;
    const char *end = strchr(at, '>');
    return end && strncmp(end, close, strlen(close)) == 0;
}

KT_CASE(manifest_segment_heap)
{
    char *xml = NULL;
    KT_REQUIRE_OK(read_manifest(KILN_EXE_PATH, &xml));
    KT_CHECK(has_setting(xml, "heapType", "SegmentHeap"));
    KT_CHECK(has_setting(xml, "activeCodePage", "UTF-8"));
    KT_CHECK(strstr(xml, "http://schemas.microsoft.com/SMI/2020/WindowsSettings") != NULL);
    KT_CHECK(!has_setting(xml, "heapType", "NtHeap"));
    free(xml);
}

/* Runs `cmdline` in folder `cwd` and collects its standard output. */
static int run_in(const wchar_t *exe, wchar_t *cmdline, const wchar_t *cwd, char *out, size_t cap,
                  DWORD *code)
{
    SECURITY_ATTRIBUTES sa = {sizeof(sa), NULL, TRUE};
    HANDLE rd, wr;
    if (!CreatePipe(&rd, &wr, &sa, 0))
        return KILN_EIO;
    SetHandleInformation(rd, HANDLE_FLAG_INHERIT, 0);
    STARTUPINFOW si;
    memset(&si, 0, sizeof(si));
    si.cb = sizeof(si);
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdOutput = wr;
    si.hStdError = GetStdHandle(STD_ERROR_HANDLE);
    si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
    PROCESS_INFORMATION pi;
    BOOL ok = CreateProcessW(exe, cmdline, NULL, NULL, TRUE, 0, NULL, cwd, &si, &pi);
    CloseHandle(wr);
    if (!ok) {
        CloseHandle(rd);
        return KILN_EIO;
    }
    size_t used = 0;
    DWORD got;
    while (used + 1 < cap && ReadFile(rd, out + used, (DWORD)(cap - 1 - used), &got, NULL) &&
           got > 0)
        used += got;
    out[used] = '\0';
    CloseHandle(rd);
    WaitForSingleObject(pi.hProcess, INFINITE);
    GetExitCodeProcess(pi.hProcess, code);
    CloseHandle(pi.hProcess);
    CloseHandle(pi.hThread);
    return KILN_OK;
}

KT_CASE(exe_from_utf8_folder)
{
    char dir[4200], exe[4300];
    KT_REQUIRE_OK(kiln__path_join(dir, sizeof(dir), kt_tmpdir(), UTF8_FOLDER));
    KT_REQUIRE(kt_mkdir(dir) == 0);
    KT_REQUIRE_OK(kiln__path_join(exe, sizeof(exe), dir, "kiln.exe"));

    wchar_t *wsrc, *wexe, *wdir;
    KT_REQUIRE_OK(kiln__win_path(KILN_EXE_PATH, &wsrc));
    KT_REQUIRE_OK(kiln__win_path(exe, &wexe));
    KT_REQUIRE_OK(kiln__win_path(dir, &wdir));
    /* The folder's name reached the file system as UTF-16 "ë" and "ü", not as
     * the bytes of some code page. */
    KT_CHECK(wcsstr(wdir, L"kiln-t\u00ebst-\u00fc") != NULL);
    KT_CHECK(CopyFileW(wsrc, wexe, TRUE));

    wchar_t cmd[64] = L"kiln.exe --version";
    char out[256];
    DWORD code = 1;
    KT_CHECK_OK(run_in(wexe, cmd, wdir, out, sizeof(out), &code));
    KT_CHECK_EQ(code, 0);
    KT_CHECK(strstr(out, KILN_VERSION_STRING) != NULL);
    free(wsrc);
    free(wexe);
    free(wdir);
}

KT_MAIN(KT_ENTRY(manifest_segment_heap), KT_ENTRY(exe_from_utf8_folder))
