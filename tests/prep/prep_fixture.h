/*
 * prep_fixture.h - what the preparation's tests share: small GLSL corpus
 * folders, and a Vulkan context that skips the test where there is none.
 */
#ifndef KILN_PREP_FIXTURE_H
#define KILN_PREP_FIXTURE_H

#include "kiln.h"

/* The programs pf_write_corpus writes when `broken` is false. */
#define PF_GOOD_PROGRAMS 3

/*
 * Writes a small corpus into `dir` (which must exist): two compute programs
 * (a.comp, sub/b.comp) and one graphics pair (tri.vert + tri.frag), each
 * small enough to translate and build in a few milliseconds; with `broken`,
 * also bad.comp, which does not compile.
 * @return 0 or -1 (a test failure is recorded).
 */
int pf_write_corpus(const char *dir, bool broken);

/* Makes `path` (one level). @return 0 or -1. */
int pf_mkdir(const char *path);

/*
 * A Vulkan context over `cache_dir` (NULL: a pipeline cache in memory), or
 * exit(77) (ctest's skip) when Vulkan is not available. Every library loaded
 * by then (the driver, LLVM) is kept loaded to the end of the process, so
 * that LeakSanitizer can name the driver library a leak inside it comes
 * from (tests/support/lsan.supp suppresses those).
 */
struct kiln_vk *pf_vk(const char *cache_dir);

/* Keeps every library loaded so far loaded for good (see pf_vk). */
void pf_pin_loaded_libraries(void);

#endif /* KILN_PREP_FIXTURE_H */
