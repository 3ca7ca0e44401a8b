/*
 * kiln_test.c - the test harness: case selection, failures, temp folders.
 *
 * The folder helpers have a POSIX side (mkdtemp, nftw) and a Windows side
 * (wide Win32 calls on UTF-8 paths, as the library's own I/O table does), so
 * the same tests run on both.
 */
#include "kiln_test.h"
#include "kiln_internal.h"

#include <stdarg.h>
#include <sys/stat.h>

#ifdef _WIN32
#include <windows.h>
#else
#include <ftw.h>
#include <unistd.h>
#endif

int kt_failures;
/* The test program's name, in its folders' names ("kiln-test-NAME-XXXXXX"),
 * so a folder left behind says whose it is. */
static char kt_program[64] = "case";
static char kt_dir[4096];
static bool kt_dir_made;

void kt_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    kt_failures++;
}

#ifdef _WIN32
/* Removes the tree under the wide path `w` (a folder or a file). */
static int rmtree_wide(const wchar_t *w)
{
    DWORD attr = GetFileAttributesW(w);
    if (attr == INVALID_FILE_ATTRIBUTES)
        return -1;
    if (!(attr & FILE_ATTRIBUTE_DIRECTORY) || (attr & FILE_ATTRIBUTE_REPARSE_POINT)) {
        if (attr & FILE_ATTRIBUTE_READONLY)
            SetFileAttributesW(w, attr & ~(DWORD)FILE_ATTRIBUTE_READONLY);
        if (attr & FILE_ATTRIBUTE_DIRECTORY)
            return RemoveDirectoryW(w) ? 0 : -1;
        return DeleteFileW(w) ? 0 : -1;
    }
    size_t len = wcslen(w);
    wchar_t *pattern = malloc((len + 3) * sizeof(*pattern));
    if (!pattern)
        return -1;
    swprintf(pattern, len + 3, L"%ls\\*", w);
    int rc = 0;
    WIN32_FIND_DATAW fd;
    HANDLE find = FindFirstFileW(pattern, &fd);
    free(pattern);
    if (find != INVALID_HANDLE_VALUE) {
        do {
            if (wcscmp(fd.cFileName, L".") == 0 || wcscmp(fd.cFileName, L"..") == 0)
                continue;
            size_t n = len + wcslen(fd.cFileName) + 2;
            wchar_t *child = malloc(n * sizeof(*child));
            if (!child) {
                rc = -1;
                break;
            }
            swprintf(child, n, L"%ls\\%ls", w, fd.cFileName);
            if (rmtree_wide(child) != 0)
                rc = -1;
            free(child);
        } while (FindNextFileW(find, &fd));
        FindClose(find);
    }
    return RemoveDirectoryW(w) && rc == 0 ? 0 : -1;
}

int kt_rmtree(const char *path)
{
    wchar_t *w;
    if (kiln__win_path(path, &w) != KILN_OK)
        return -1;
    int rc = rmtree_wide(w);
    free(w);
    return rc;
}

int kt_mkdir(const char *path)
{
    wchar_t *w;
    if (kiln__win_path(path, &w) != KILN_OK)
        return -1;
    BOOL ok = CreateDirectoryW(w, NULL);
    free(w);
    return ok ? 0 : -1;
}

/* The folder for temporary files: $TMPDIR, else the system's (%TEMP%). */
static void temp_base(char *out, size_t cap)
{
    const char *env = getenv("TMPDIR");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return;
    }
    wchar_t w[MAX_PATH + 1];
    char *u = NULL;
    DWORD n = GetTempPathW(MAX_PATH + 1, w);
    if (n == 0 || n > MAX_PATH || kiln__win_utf8(w, &u) != KILN_OK) {
        snprintf(out, cap, ".");
        return;
    }
    size_t len = strlen(u);
    if (len > 1 && (u[len - 1] == '\\' || u[len - 1] == '/'))
        u[len - 1] = '\0';
    snprintf(out, cap, "%s", u);
    free(u);
}

/* mkdtemp for Windows: a random suffix, retried while the name is taken. */
static char *make_temp_dir(char *templ)
{
    size_t len = strlen(templ);
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned char r[6];
        if (kiln_random_bytes(r, sizeof(r)) != KILN_OK)
            return NULL;
        for (size_t i = 0; i < 6; i++)
            templ[len - 6 + i] = digits[r[i] % 36];
        if (kt_mkdir(templ) == 0)
            return templ;
        if (GetLastError() != ERROR_ALREADY_EXISTS)
            return NULL;
    }
    return NULL;
}

static long this_process(void)
{
    return (long)GetCurrentProcessId();
}
#else
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int kt_rmtree(const char *path)
{
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int kt_mkdir(const char *path)
{
    return mkdir(path, 0755);
}

static void temp_base(char *out, size_t cap)
{
    const char *env = getenv("TMPDIR");
    snprintf(out, cap, "%s", env && *env ? env : "/tmp");
}

static char *make_temp_dir(char *templ)
{
    return mkdtemp(templ);
}

static long this_process(void)
{
    return (long)getpid();
}
#endif

/* The process that made kt_dir: a forked child that exits does not remove
 * its parent's folder. */
static long kt_dir_owner;

/* A case that ends the process (a skip's exit(77), a failed setup's
 * exit(1)) leaves no folder behind either. */
static void remove_at_exit(void)
{
    if (kt_dir_made && kt_dir_owner == this_process() && !getenv("KT_KEEP"))
        kt_rmtree(kt_dir);
}

/* The folders a later kt_tmpdir() removed during the running case: one
 * that exists again when the case ends was written through a path kept
 * from before that call, and would be left behind (kt_run fails it). */
static char kt_removed[8][sizeof(kt_dir)];
static size_t kt_nremoved;

const char *kt_tmpdir(void)
{
    if (kt_dir_made && !getenv("KT_KEEP")) {
        kt_rmtree(kt_dir);
        if (kt_nremoved < sizeof(kt_removed) / sizeof(kt_removed[0]))
            snprintf(kt_removed[kt_nremoved++], sizeof(kt_dir), "%s", kt_dir);
    }
    char base[2048];
    temp_base(base, sizeof(base));
    snprintf(kt_dir, sizeof(kt_dir), "%s/kiln-test-%s-XXXXXX", base, kt_program);
    if (!make_temp_dir(kt_dir)) {
        fprintf(stderr, "kt_tmpdir: cannot make a folder like %s\n", kt_dir);
        exit(1);
    }
    kt_dir_made = true;
    static bool registered;
    if (!registered)
        registered = atexit(remove_at_exit) == 0;
    kt_dir_owner = this_process();
    return kt_dir;
}

const char *kt_case_dir(void)
{
    static char dir[sizeof(kt_dir)];
    if (!dir[0])
        snprintf(dir, sizeof(dir), "%s", kt_tmpdir());
    return dir;
}

void kt_slurp(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

const char *kt_corpus_dir(void)
{
    const char *env = getenv("KILN_CORPUS");
    return env && *env ? env : KILN_SOURCE_DIR "/../shared/corpus";
}

void kt_require_corpus(const char *sub)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", kt_corpus_dir(), sub);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        printf("skipped: no shared corpus at %s (set KILN_CORPUS)\n", path);
        fflush(stdout);
        exit(77);
    }
}

static const char *kt_current; /* the case running now */

#ifdef _WIN32
/* An unhandled exception (an access violation, a stack overflow) ends a
 * Windows process without a word; this says which case it ended, and how. */
static LONG WINAPI kt_crashed(EXCEPTION_POINTERS *e)
{
    fprintf(stderr, "CRASH %s: exception 0x%08lx at %p\n", kt_current ? kt_current : "(none)",
            (unsigned long)e->ExceptionRecord->ExceptionCode, e->ExceptionRecord->ExceptionAddress);
    return EXCEPTION_EXECUTE_HANDLER;
}
#endif

int kt_run(const struct kt_case *cases, size_t n, int argc, char **argv)
{
    /* Every line out before the next step, so that a crash or a timeout
     * still shows how far the case got. */
    setvbuf(stderr, NULL, _IONBF, 0);
#ifdef _WIN32
    SetUnhandledExceptionFilter(kt_crashed);
#endif
    if (argc > 0 && argv[0]) {
        const char *base = argv[0];
        for (const char *c = argv[0]; *c; c++)
            if (*c == '/' || *c == '\\')
                base = c + 1;
        size_t len = strcspn(base, ".");
        if (len > 0 && len < sizeof(kt_program))
            snprintf(kt_program, sizeof(kt_program), "%.*s", (int)len, base);
    }
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < n; i++)
            printf("%s\n", cases[i].name);
        return 0;
    }
    size_t ran = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
            continue;
        int before = kt_failures;
        fprintf(stderr, "run  %s\n", cases[i].name);
        kt_current = cases[i].name;
        cases[i].fn();
        if (kt_dir_made && !getenv("KT_KEEP")) {
            kt_rmtree(kt_dir);
            kt_dir_made = false;
        }
        for (size_t k = 0; k < kt_nremoved; k++) {
            struct stat st;
            if (stat(kt_removed[k], &st) == 0) {
                kt_fail(__FILE__, __LINE__,
                        "%s: made again after a later kt_tmpdir() removed it (one kt_tmpdir() "
                        "per case, or kt_case_dir())",
                        kt_removed[k]);
                kt_rmtree(kt_removed[k]);
            }
        }
        kt_nremoved = 0;
        ran++;
        bool ok = kt_failures == before;
        failed += !ok;
        fprintf(stderr, "%s %s\n", ok ? "ok  " : "FAIL", cases[i].name);
    }
    if (ran == 0) {
        fprintf(stderr, "no case named '%s'\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    return failed ? 1 : 0;
}
