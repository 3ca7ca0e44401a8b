/*
 * kiln_test.h - the small harness every kiln test is written in.
 *
 * A test file defines its cases with KT_CASE and lists them in KT_MAIN, the
 * only list: kiln_test() in tests/CMakeLists.txt reads the KT_ENTRY names
 * from the file. The executable runs every case, or only the one named on
 * its command line (ctest registers one test per case, so
 * `ctest -R cache.torn_tail` runs one alone). A failed check prints
 * file:line and the values, and fails the case; the process exits non-zero
 * when any case failed.
 */
#ifndef KILN_TEST_H
#define KILN_TEST_H

#include "kiln.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kt_case {
    const char *name;
    void (*fn)(void);
};

extern int kt_failures;

#ifdef __MINGW32__
#define KT_PRINTF_FORMAT gnu_printf
#else
#define KT_PRINTF_FORMAT printf
#endif

void kt_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(KT_PRINTF_FORMAT, 3, 4)));

#define KT_CASE(name) static void kt_case_##name(void)

#define KT_CHECK(cond)                                              \
    do {                                                            \
        if (!(cond))                                                \
            kt_fail(__FILE__, __LINE__, "check failed: %s", #cond); \
    } while (0)

/* Like KT_CHECK, but stops the case (use when later steps would crash). */
#define KT_REQUIRE(cond)                                        \
    do {                                                        \
        if (!(cond)) {                                          \
            kt_fail(__FILE__, __LINE__, "required: %s", #cond); \
            return;                                             \
        }                                                       \
    } while (0)

/* Like KT_REQUIRE, but ends the whole case (exit 1): for a helper's
 * precondition, where KT_REQUIRE's return would not stop the case. */
#define KT_NEED(cond)                                                 \
    do {                                                              \
        if (!(cond)) {                                                \
            printf("%s:%d: needed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                  \
        }                                                             \
    } while (0)

#define KT_CHECK_EQ(a, b)                                                                \
    do {                                                                                 \
        long long kt_a_ = (long long)(a), kt_b_ = (long long)(b);                        \
        if (kt_a_ != kt_b_)                                                              \
            kt_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, kt_a_, kt_b_); \
    } while (0)

/* Checks a kiln call returned KILN_OK, naming the error otherwise. */
#define KT_CHECK_OK(expr)                                                           \
    do {                                                                            \
        int kt_rc_ = (expr);                                                        \
        if (kt_rc_ < 0)                                                             \
            kt_fail(__FILE__, __LINE__, "%s: %s (%s)", #expr, kiln_errname(kt_rc_), \
                    kiln_strerror(kt_rc_));                                         \
    } while (0)

#define KT_REQUIRE_OK(expr)                                                         \
    do {                                                                            \
        int kt_rc_ = (expr);                                                        \
        if (kt_rc_ < 0) {                                                           \
            kt_fail(__FILE__, __LINE__, "%s: %s (%s)", #expr, kiln_errname(kt_rc_), \
                    kiln_strerror(kt_rc_));                                         \
            return;                                                                 \
        }                                                                           \
    } while (0)

#define KT_ENTRY(name)        \
    {                         \
#name, kt_case_##name \
    }

#define KT_MAIN(...)                                                                 \
    int main(int argc, char **argv)                                                  \
    {                                                                                \
        static const struct kt_case kt_cases[] = {__VA_ARGS__};                      \
        return kt_run(kt_cases, sizeof(kt_cases) / sizeof(kt_cases[0]), argc, argv); \
    }

int kt_run(const struct kt_case *cases, size_t n, int argc, char **argv);

/*
 * Makes a fresh empty folder under $TMPDIR (or /tmp) for one case and
 * returns its path (static storage, valid until the next call). It and
 * everything in it is removed when the case ends, unless KT_KEEP is set.
 */
const char *kt_tmpdir(void);

/* The case's one folder: kt_tmpdir's at the first call, the same path at
 * every later one (for helpers that each need it, in a file whose cases
 * each run in their own process). */
const char *kt_case_dir(void);

/* Reads file `path` into `buf` (at most cap - 1 bytes, NUL-terminated):
 * empty when it cannot be opened, as a log not yet written. */
void kt_slurp(const char *path, char *buf, size_t cap);

/* Removes a folder tree. @return 0 or -1. */
int kt_rmtree(const char *path);

/* Makes one folder (UTF-8 path, on Windows too). @return 0 or -1. */
int kt_mkdir(const char *path);

/* The folder of the shared corpus ($KILN_CORPUS, else ../shared/corpus
 * relative to the source tree). */
const char *kt_corpus_dir(void);

/* Ends the case as skipped (one "skipped:" line, exit 77, ctest's
 * SKIP_RETURN_CODE) when kt_corpus_dir()/sub is not a folder: a bare clone
 * has no shared corpus. */
void kt_require_corpus(const char *sub);

/* A small, fast, seedable random generator (splitmix64) for tests. */
static inline uint64_t kt_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif /* KILN_TEST_H */
