/*
 * tool_internal.h - what kiln's tool units (tools/glsl, tools/gen,
 * the kiln command) share. Private to tools/.
 *
 * The tools sit above libkiln and see only its public headers; the core's
 * own private header (src/common/kiln_internal.h) is not theirs. So the
 * few helpers they need are here: the same names as the core's, so that
 * code reads alike on both sides, with logging through the public
 * kiln_log, so a tool's lines go where kiln's go (level, sink).
 */
#ifndef KILN_TOOL_INTERNAL_H
#define KILN_TOOL_INTERNAL_H

#include "kiln/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define KILN_TRY(expr)         \
    do {                       \
        int kiln_rc_ = (expr); \
        if (kiln_rc_ < 0)      \
            return kiln_rc_;   \
    } while (0)

#define KILN_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define KILN_MIN(a, b)    ((a) < (b) ? (a) : (b))
#define KILN_MAX(a, b)    ((a) > (b) ? (a) : (b))

#if defined(__MINGW32__)
#define KILN_PRINTF(fmt, args) __attribute__((format(gnu_printf, fmt, args)))
#elif defined(__GNUC__)
#define KILN_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define KILN_PRINTF(fmt, args)
#endif

/* The level test first, so that arguments are not evaluated for a level
 * that is off. */
#define KILN_LOG(level, module, ...)                   \
    do {                                               \
        if ((int)(level) <= (int)kiln_log_get_level()) \
            kiln_log((level), (module), __VA_ARGS__);  \
    } while (0)

#define KILN_ERROR(module, ...) KILN_LOG(KILN_LOG_ERROR, module, __VA_ARGS__)
#define KILN_WARN(module, ...)  KILN_LOG(KILN_LOG_WARN, module, __VA_ARGS__)
#define KILN_INFO(module, ...)  KILN_LOG(KILN_LOG_INFO, module, __VA_ARGS__)
#define KILN_DEBUG(module, ...) KILN_LOG(KILN_LOG_DEBUG, module, __VA_ARGS__)

/* Every allocation of the tools goes through kiln's allocator (the public
 * kiln_malloc and siblings, kiln/common.h), under the core's names: what a
 * tool hands to kiln (a program's words and strings) is freed by kiln with
 * that allocator, and tests/layout/check_alloc.sh checks the tool units
 * have no other. */
static inline void *kiln__malloc(size_t n)
{
    return kiln_malloc(n);
}

static inline void *kiln__calloc(size_t count, size_t n)
{
    return kiln_calloc(count, n);
}

static inline void *kiln__realloc(void *p, size_t n)
{
    return kiln_realloc(p, n);
}

static inline void kiln__free(void *p)
{
    kiln_free(p);
}

static inline char *kiln__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = kiln_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Grows an array by doubling (from `first`); @return the new array or NULL
 * (the old one is kept). */
static inline void *kiln__grow(void *items, size_t n, size_t *cap, size_t size, size_t first)
{
    if (n < *cap)
        return items;
    size_t want = *cap ? *cap * 2 : first;
    if (want < *cap || want > SIZE_MAX / size)
        return NULL;
    void *p = kiln__realloc(items, want * size);
    if (p)
        *cap = want;
    return p;
}

/* @return the value of a hexadecimal digit, or -1. */
static inline int kiln__hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static inline uint32_t kiln__load_le32(const void *p)
{
    const unsigned char *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline void kiln__store_le32(void *p, uint32_t v)
{
    unsigned char *b = p;
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static inline void kiln__store_le64(void *p, uint64_t v)
{
    unsigned char *b = p;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

/* Joins a folder and a name with one '/'. @return 0 or KILN_ERANGE. */
static inline int kiln__path_join(char *out, size_t cap, const char *dir, const char *name)
{
    size_t d = strlen(dir);
    int slash = d > 0 && (dir[d - 1] == '/' || dir[d - 1] == '\\');
    int n = snprintf(out, cap, "%s%s%s", dir, (slash || d == 0) ? "" : "/", name);
    return (n < 0 || (size_t)n >= cap) ? KILN_ERANGE : KILN_OK;
}

/* UTF-8 path to a wide (long-path-safe) one, and back: the core's, from
 * its static library (common/io_win.c), for the Windows folder walk
 * (Windows only). */
int kiln__win_path(const char *path, wchar_t **out);
int kiln__win_utf8(const wchar_t *w, char **out);

#endif /* KILN_TOOL_INTERNAL_H */
