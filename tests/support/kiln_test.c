/*
 * kiln_test.c - the test harness: case selection, failures, temp folders.
 */
#include "kiln_test.h"

#include <ftw.h>
#include <stdarg.h>
#include <unistd.h>

int kt_failures;
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

const char *kt_tmpdir(void)
{
    if (kt_dir_made && !getenv("KT_KEEP"))
        kt_rmtree(kt_dir);
    const char *base = getenv("TMPDIR");
    snprintf(kt_dir, sizeof(kt_dir), "%s/kiln-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(kt_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    kt_dir_made = true;
    return kt_dir;
}

const char *kt_corpus_dir(void)
{
    const char *env = getenv("KILN_CORPUS");
    return env && *env ? env : KILN_SOURCE_DIR "/../shared/corpus";
}

int kt_run(const struct kt_case *cases, size_t n, int argc, char **argv)
{
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
        cases[i].fn();
        if (kt_dir_made && !getenv("KT_KEEP")) {
            kt_rmtree(kt_dir);
            kt_dir_made = false;
        }
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
