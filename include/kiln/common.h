/*
 * kiln/common.h - errors, logging, file I/O table, hashing and time.
 *
 * Everything else in kiln builds on these. Errors are negative integers with
 * fixed values (they are part of the ABI: never renumber one), 0 is success.
 * Functions that return a count return it as a non-negative value and an
 * error as a negative one.
 *
 * NULL arguments (0.2): the I/O helpers refuse a NULL table, path, output,
 * or buffer of n > 0 bytes with KILN_EINVAL, as kiln_random_bytes does a
 * NULL buffer; kiln_hash64 and kiln_hash128 hash a NULL `data` as no bytes;
 * kiln_log does nothing for a NULL format.
 */
#ifndef KILN_COMMON_H
#define KILN_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * KILN_API marks the public functions. The shared library exports exactly
 * these (everything else is built with hidden visibility). On Windows the
 * DLL is built with KILN_BUILDING_DLL (dllexport) and its users import;
 * users of the static library define KILN_STATIC (kiln.pc's Cflags and the
 * kiln::kiln_static target do) so that nothing is imported.
 */
#if defined(_WIN32)
#if defined(KILN_BUILDING_DLL)
#define KILN_API __declspec(dllexport)
#elif defined(KILN_STATIC)
#define KILN_API
#else
#define KILN_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

/*
 * KILN_DEPRECATED(msg), after a declaration's parameters, marks a function
 * kept only for programs built against an older kiln: its symbol is still
 * exported, a new call warns (GCC and clang). Deprecated names that clash
 * with a struct's in C++ (docs/api.md, "Renamed functions") are declared
 * for C only.
 */
#if defined(__GNUC__) || defined(__clang__)
#define KILN_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define KILN_DEPRECATED(msg)
#endif

/* KILN_VERSION_MAJOR, _MINOR, _PATCH, _STRING and _NUMBER: the version of
 * these headers. */
#include "kiln/version.h"

/*
 * The version of the library linked at run time, as KILN_VERSION_NUMBER
 * (major * 10000 + minor * 100 + patch); compare it with the headers' to
 * catch a mismatched shared library.
 * @return the number. Thread-safe.
 */
KILN_API unsigned kiln_version(void);

/*
 * The version of the library linked at run time, as "major.minor.patch".
 * @return a static string. Thread-safe.
 */
KILN_API const char *kiln_version_string(void);

/* ---------------------------------------------------------------------------
 * Growable structs (docs/abi.md)
 *
 * Every struct a caller allocates and hands to kiln (options, a report or
 * summary to fill, a callback table) begins with `size_t size`: the struct's
 * size as the caller's headers know it. Set it with the struct's INIT macro
 * (`struct kiln_cache_options o = KILN_CACHE_OPTIONS_INIT;`) or by hand
 * (`o.size = sizeof o;`). kiln reads only the bytes `size` covers (a field
 * past it keeps its default, which is always its zero) and writes back only
 * those. A `size` of 0 (a struct zeroed but not initialised) is refused with
 * KILN_EINVAL, and so is a struct larger than this library knows whose extra
 * bytes are not all zero: a field this library cannot honour. An array of
 * such structs is read with its first element's `size` as the stride. An
 * array kiln allocates for the caller (kiln_cache_entries, ...) is laid out
 * at the element size the caller's headers know, which the header's inline
 * wrapper passes. Fixed-size values (kiln_key, kiln_cpuset) never change
 * within a SONAME. docs/abi.md gives every struct's rule.
 * ------------------------------------------------------------------------ */

/* The initialiser of any growable struct: `size` set, every field at its
 * default. Designated in C (so -Wextra's missing-field-initializers stays
 * quiet), positional in C++ (designators need C++20). */
#if defined(__cplusplus)
#define KILN_STRUCT_INIT(tag) \
    {                         \
        sizeof(struct tag)    \
    }
#else
#define KILN_STRUCT_INIT(tag)      \
    {                              \
        .size = sizeof(struct tag) \
    }
#endif

/* ---------------------------------------------------------------------------
 * The application's executor (docs/api.md, "Executor")
 *
 * Set one in kiln_pool_options, kiln_cache_options, kiln_prepare_options
 * or kiln_start_options to run kiln's workers on the application's job
 * system instead of threads kiln starts. kiln hands it N tasks, N the
 * threads it would have started cut to `concurrency`, and waits for them on
 * a condition variable; the calling thread works too. An executor may run
 * a task inline, inside submit (a one-thread job system, or none). Thread
 * priority (background) does not apply to the executor's threads.
 * ------------------------------------------------------------------------ */

struct kiln_executor {
    size_t size; /* KILN_EXECUTOR_INIT */
    /*
     * Runs fn(arg) once, on any thread, now or later, or inline before it
     * returns. @return 0 when it took the task: then it must run it some
     * time (a task that starts after the work is done returns at once;
     * kiln never waits for a task that has not started, since the thread
     * waiting does the work itself); non-zero when it did not: kiln runs
     * that share of the work on the calling thread instead.
     * Called from any thread kiln works on, also from inside a task: it
     * must be thread-safe.
     */
    int (*submit)(void (*fn)(void *arg), void *arg, void *user);
    void *user; /* given to submit */
    /* Tasks it can run at once; kiln asks for at most this many. 0: no
     * bound (kiln's own count). */
    unsigned concurrency;
};

#define KILN_EXECUTOR_INIT KILN_STRUCT_INIT(kiln_executor)

/* ---------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */

/*
 * Error codes. Values are fixed forever. The extended I/O and format codes
 * say which step failed, so a caller (and a log line) can tell a full disk
 * from a damaged file.
 */
enum kiln_error {
    KILN_OK = 0,
    KILN_EINVAL = -1,      /* an argument is out of range or malformed */
    KILN_ENOMEM = -2,      /* an allocation failed */
    KILN_EIO = -3,         /* an I/O call failed (errno had no better match) */
    KILN_ENOENT = -4,      /* a file or folder does not exist */
    KILN_EEXIST = -5,      /* it exists already */
    KILN_EACCES = -6,      /* permission denied */
    KILN_ENOSPC = -7,      /* no space left on the device */
    KILN_EBUSY = -8,       /* held by someone else (a cache's writer lock) */
    KILN_ENOTSUP = -9,     /* not supported on this platform or build */
    KILN_ECANCELED = -10,  /* the work was cancelled */
    KILN_ERANGE = -11,     /* a value does not fit (a size over a limit) */
    KILN_ENOTFOUND = -12,  /* a key or record is not there */
    KILN_EFORMAT = -13,    /* input of another kind (wrong magic, not ours) */
    KILN_ESTAMP = -14,     /* the cache was written by another translator */
    KILN_EVULKAN = -15,    /* a Vulkan call failed */
    KILN_ETRANSLATE = -16, /* the translator could not translate a program */
    KILN_EPARSE = -17,     /* text from a file or the OS could not be parsed */
    KILN_ECRASH = -18,     /* a worker process died (a signal, or an exit before answering) */
    KILN_ETIMEDOUT = -19,  /* a worker passed its time limit (and was killed) */
    KILN_EROFS = -20,      /* the file system is mounted read-only */
    /* A file to write is a kiln cache's, or lies in a cache's folder. */
    KILN_ECACHE_FILE = -21,
    /* Asked to build only what the driver's caches hold (a probe:
     * KILN_BUILD_PROBE, KILN_VK_PIPELINE_NO_COMPILE), and the driver
     * answered VK_PIPELINE_COMPILE_REQUIRED: nothing was built, and
     * building it means a compile. Not a failure of the program. */
    KILN_ECOMPILE_REQUIRED = -22,

    /* Extended I/O codes: which step of an I/O sequence failed. */
    KILN_EIO_OPEN = -32,       /* open() failed */
    KILN_EIO_READ = -33,       /* read() failed */
    KILN_EIO_SHORTREAD = -34,  /* the file ended before the bytes asked for */
    KILN_EIO_WRITE = -35,      /* write() failed */
    KILN_EIO_SHORTWRITE = -36, /* fewer bytes were written than asked for */
    KILN_EIO_SYNC = -37,       /* fsync() failed: what was written may be lost */
    KILN_EIO_RENAME = -38,     /* rename() failed */
    KILN_EIO_TRUNCATE = -39,   /* truncate() failed */
    KILN_EIO_LOCK = -40,       /* lock() failed for a reason other than contention */
    KILN_EIO_STAT = -41,       /* the size of a file could not be read */
    KILN_EIO_UNLINK = -42,     /* unlink() failed */

    /* Damage found in data kiln wrote. */
    KILN_ECORRUPT = -48,        /* damaged data, no more precise code */
    KILN_ECORRUPT_HEADER = -49, /* a file header is damaged */
    KILN_ECORRUPT_INDEX = -50,  /* the index does not match its records */
    KILN_ECORRUPT_RECORD = -51, /* a record's head or checksum does not match */
    KILN_ECORRUPT_BLOB = -52,   /* a packed blob is truncated or damaged */
};

/*
 * The symbolic name of an error code, for example "KILN_ENOSPC".
 * @return a static string; "KILN_E?" for an unknown code. Thread-safe.
 */
KILN_API const char *kiln_errname(int code);

/*
 * A short English description of an error code, for example
 * "no space left on device".
 * @return a static string, never NULL. Thread-safe.
 */
KILN_API const char *kiln_strerror(int code);

/*
 * The text of the last failure of a kiln call on the calling thread, "what
 * and where" with the code's name, for example
 * "kiln_cache_open: cache/programs.kpc: not a kiln cache (KILN_EFORMAT)".
 * This is how a failed kiln_cache_open or kiln_vk_create (which give no
 * handle) or kiln_pool_create explain themselves; a handle's own text is
 * kiln_cache_errmsg / kiln_vk_errmsg. A call that succeeds leaves the text
 * as it was (as errno); "" before any failure on this thread. The same
 * detail is in the log line the failure wrote (one formatting, two homes
 * for its result).
 * @return a string owned by the calling thread, valid until its next kiln
 * call. Thread-safe: each thread has its own.
 */
KILN_API const char *kiln_last_errmsg(void);

/*
 * Maps an errno value to the nearest kiln code; `fallback` is returned when
 * errno has no closer match (for example KILN_EIO_WRITE for a write).
 * Thread-safe (pure).
 */
KILN_API int kiln_error_from_errno(int err, int fallback);

/* ---------------------------------------------------------------------------
 * Memory (docs/api.md, "Memory")
 *
 * Every allocation kiln makes (its own structs, buffers, zstd's contexts)
 * goes through one allocator: libc's, or the application's, set once with
 * kiln_set_allocator before any other kiln call. Memory kiln hands out for
 * the caller to free (kiln_io_read_file's buffer) is freed with kiln_free,
 * and memory a caller hands over for kiln to free (a program's words, a
 * translator's words without `release`) comes from kiln_malloc: both use
 * the allocator in force. With libc's allocator (the default) these are
 * malloc and free, so a program written for earlier releases keeps working.
 * ------------------------------------------------------------------------ */

/*
 * An application's allocator. malloc_fn, realloc_fn and free_fn are
 * required and behave as C's malloc, realloc and free (realloc_fn(user,
 * NULL, n) allocates; kiln never asks for 0 bytes, nor frees NULL through
 * free_fn); calloc_fn is optional (NULL: malloc_fn then zeroing). Every
 * pointer must be aligned for any type (max_align_t). They are called from
 * any thread kiln runs, many at once: they must be thread-safe. The struct
 * is copied; `user` must outlive the allocator's use.
 */
struct kiln_allocator {
    size_t size; /* KILN_ALLOCATOR_INIT */
    void *(*malloc_fn)(void *user, size_t n);
    void *(*realloc_fn)(void *user, void *p, size_t n);
    void (*free_fn)(void *user, void *p);
    void *(*calloc_fn)(void *user, size_t count, size_t n);
    void *user;
};

#define KILN_ALLOCATOR_INIT KILN_STRUCT_INIT(kiln_allocator)

/*
 * Sets the allocator every later allocation of kiln goes through; NULL
 * restores libc's. Like sqlite3_config(SQLITE_CONFIG_MALLOC): set it once,
 * before any other kiln call.
 * @return 0; KILN_EINVAL for a struct of a bad size or without malloc_fn,
 * realloc_fn or free_fn; KILN_EBUSY while memory kiln allocated through
 * the allocator in force is still held (a live handle, a buffer not yet
 * given to kiln_free, a worker thread's compression contexts, which live
 * until that thread ends): kiln counts its live allocations, so it never
 * frees a block through another allocator than the one that made it.
 * Thread safety: not thread-safe: no other thread may call kiln during
 * the call (the count cannot see an allocation starting meanwhile).
 */
KILN_API int kiln_set_allocator(const struct kiln_allocator *a);

/*
 * Copies the allocator in force into *out, as much as out->size covers
 * (libc's: its functions are kiln's wrappers of malloc, realloc, free and
 * calloc, user NULL).
 * @return 0, or KILN_EINVAL for a NULL `out` or a bad size. Thread-safe
 * (reads only; not during kiln_set_allocator).
 */
KILN_API int kiln_get_allocator(struct kiln_allocator *out);

/*
 * Allocates `n` bytes through kiln's allocator (the one in force), as C's
 * malloc: for memory the caller hands over for kiln to free (a program's
 * strings and words). kiln_malloc(0) gives a unique pointer.
 * @return the block, or NULL when memory ran out. Thread-safe.
 */
KILN_API void *kiln_malloc(size_t n);

/*
 * As kiln_malloc, for `count` zeroed elements of `n` bytes.
 * @return the block, or NULL when memory ran out or count * n overflows.
 * Thread-safe.
 */
KILN_API void *kiln_calloc(size_t count, size_t n);

/*
 * Resizes a block made by kiln's allocator, as C's realloc;
 * kiln_realloc(NULL, n) is kiln_malloc(n).
 * @return the block (moved or not), or NULL when memory ran out (the old
 * block is kept). Thread-safe.
 */
KILN_API void *kiln_realloc(void *p, size_t n);

/*
 * Frees a block made by kiln's allocator: one kiln handed out for the
 * caller to free (kiln_io_read_file's buffer), or one from kiln_malloc.
 * NULL does nothing. Thread-safe.
 */
KILN_API void kiln_free(void *p);

/*
 * How many blocks kiln allocated and has not freed yet (what
 * kiln_set_allocator checks; a test's leak check).
 * @return the count. Thread-safe (an atomic load).
 */
KILN_API long long kiln_allocations_live(void);

/* ---------------------------------------------------------------------------
 * Logging
 * ------------------------------------------------------------------------ */

enum kiln_log_level {
    KILN_LOG_ERROR = 0,
    KILN_LOG_WARN = 1,
    KILN_LOG_INFO = 2,
    KILN_LOG_DEBUG = 3,
};

/*
 * Receives one log event: one line, no trailing newline. `module` is the
 * kiln module that logs ("cache", "pack", ...).
 */
typedef void (*kiln_log_fn)(void *user, enum kiln_log_level level, const char *module,
                            const char *line);

/*
 * Sets the most verbose level that is logged. The default is KILN_LOG_WARN:
 * kiln is quiet unless something went wrong. Thread-safe (an atomic store).
 */
KILN_API void kiln_log_set_level(enum kiln_log_level level);

/* @return the current level. Thread-safe. */
KILN_API enum kiln_log_level kiln_log_get_level(void);

/*
 * Sends log events to `fn` instead of stderr; NULL restores stderr. The
 * sink may be called from any kiln thread at once: it must be thread-safe.
 * Thread safety: not thread-safe (a plain store): call it before starting
 * threads, never while another thread may log.
 */
KILN_API void kiln_log_set_sink(kiln_log_fn fn, void *user);

/*
 * Logs one event the way kiln logs its own: one line (newlines folded), to
 * the sink or stderr, when `level` is on. For kiln's tools, and for callers
 * that want their lines in the same stream. Thread-safe.
 */
KILN_API void kiln_log(enum kiln_log_level level, const char *module, const char *fmt, ...)
#if defined(__MINGW32__)
    __attribute__((format(gnu_printf, 3, 4))) /* C99 formats, as __USE_MINGW_ANSI_STDIO */
#elif defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---------------------------------------------------------------------------
 * File I/O table
 * ------------------------------------------------------------------------ */

/* Flags for kiln_io.open. */
enum {
    KILN_IO_READ = 1 << 0,   /* open for reading only */
    KILN_IO_RDWR = 1 << 1,   /* open for reading and writing */
    KILN_IO_CREATE = 1 << 2, /* create when missing */
    KILN_IO_TRUNC = 1 << 3,  /* cut to 0 bytes */
    KILN_IO_EXCL = 1 << 4,   /* fail with KILN_EEXIST when it exists */
    /* Refuse a symbolic link (a reparse point on Windows) as the last
     * component with KILN_EFORMAT: for files kiln owns, such as a cache's. */
    KILN_IO_NOFOLLOW = 1 << 5,
};

/* Modes for kiln_io.lock. */
enum kiln_io_lock_mode {
    KILN_IO_UNLOCK = 0,
    KILN_IO_LOCK_SHARED = 1,    /* several holders; fails while an exclusive one holds */
    KILN_IO_LOCK_EXCLUSIVE = 2, /* one holder */
};

/*
 * The file I/O kiln's cache files go through. Every function returns 0 (or
 * a byte count) on success and a negative kiln error on failure; none of
 * them sets errno for the caller. `self` is the table itself, so a test can
 * embed it in a larger struct and keep state beside it (see
 * tests/support/faultio.h).
 *
 * A replacement must be thread-safe: the cache calls pread from many
 * threads at once.
 */
struct kiln_io {
    size_t size; /* sizeof, as KILN_IO_INIT sets it (docs/abi.md) */
    /* Opens `path`; on success stores a descriptor in *fd. The default
     * table opens only regular files (anything else, a folder, a FIFO or a
     * device, is KILN_EFORMAT) and never blocks doing so. */
    int (*open)(const struct kiln_io *self, const char *path, int flags, int *fd);
    int (*close)(const struct kiln_io *self, int fd);
    /* Reads up to n bytes at off: the count read (0 at the end) or an error. */
    int64_t (*pread)(const struct kiln_io *self, int fd, void *buf, size_t n, uint64_t off);
    /* Writes up to n bytes at off: the count written or an error. */
    int64_t (*pwrite)(const struct kiln_io *self, int fd, const void *buf, size_t n, uint64_t off);
    int (*fsync)(const struct kiln_io *self, int fd);
    /* Syncs a folder, so that a rename or a new file in it is durable. */
    int (*fsync_dir)(const struct kiln_io *self, const char *path);
    /* Replaces `to` with `from` atomically. */
    int (*rename)(const struct kiln_io *self, const char *from, const char *to);
    int (*truncate)(const struct kiln_io *self, int fd, uint64_t size);
    /* Takes or drops an advisory lock without waiting: KILN_EBUSY when held. */
    int (*lock)(const struct kiln_io *self, int fd, enum kiln_io_lock_mode mode);
    /* The file's size in bytes (named size before libkiln.so.2). */
    int (*file_size)(const struct kiln_io *self, int fd, uint64_t *size);
    int (*unlink)(const struct kiln_io *self, const char *path);
};
#define KILN_IO_INIT KILN_STRUCT_INIT(kiln_io)

/*
 * The platform's own I/O table (POSIX calls on Unix).
 * @return a static table, valid for the life of the process. Thread-safe,
 * and so is every function of the table.
 */
KILN_API const struct kiln_io *kiln_io_default(void);

/*
 * Reads exactly n bytes at off through `io`, retrying short reads.
 * @return 0, KILN_EIO_SHORTREAD when the file ends first, or the error.
 * Thread-safe when `io` is (reads at an offset, no shared position).
 */
KILN_API int kiln_io_read_full(const struct kiln_io *io, int fd, void *buf, size_t n, uint64_t off);

/*
 * Writes exactly n bytes at off through `io`, retrying short writes.
 * @return 0, KILN_EIO_SHORTWRITE when the writer stops making progress, or
 * the error. Thread-safe when `io` is; writes that overlap in one file
 * leave either's bytes there.
 */
KILN_API int kiln_io_write_full(const struct kiln_io *io, int fd, const void *buf, size_t n,
                                uint64_t off);

/*
 * Renames `from` to `to` only if no file is named `to`: never replaces one.
 * With the default table (io NULL or kiln_io_default()) it is atomic:
 * rename with RENAME_NOREPLACE, or a hard link then unlink where that is
 * missing (Linux), MoveFileExW without MOVEFILE_REPLACE_EXISTING
 * (Windows), so a file made at `to` meanwhile (a cache another kiln
 * creates there) is never written over. With another table: a check that
 * `to` is absent, then io->rename (not atomic; such a table is a test's).
 * @return 0, KILN_EEXIST when `to` exists (nothing moved), KILN_EINVAL
 * for a NULL path, or the rename's error.
 * Thread-safe when `io` is.
 */
KILN_API int kiln_io_rename_new(const struct kiln_io *io, const char *from, const char *to);

/*
 * Replaces the file at `path` with `n` bytes, crash-safely: they are written
 * to "<path>.tmp", synced, renamed over `path`, and the folder is synced.
 * At every moment the file at `path` is either the old one or the new one.
 * The temporary file is always made new (KILN_IO_CREATE | KILN_IO_EXCL |
 * KILN_IO_NOFOLLOW): whatever lies under its name (a leftover, or a link
 * planted there) is removed first, never written through.
 * @return 0 or the error of the step that failed (the temporary file is
 * removed then).
 * Thread safety: any thread, but two replaces of one path must not run at
 * once (they share "<path>.tmp"), in one process or several.
 */
KILN_API int kiln_io_replace_file(const struct kiln_io *io, const char *path, const void *data,
                                  size_t n);

/*
 * Reads a whole file into a new buffer (at most `max` bytes, else
 * KILN_ERANGE). On success *data must be freed with kiln_free() (free()
 * while libc's allocator is in force, as in earlier releases).
 * Thread-safe when `io` is.
 */
KILN_API int kiln_io_read_file(const struct kiln_io *io, const char *path, size_t max, void **data,
                               size_t *n);

/* ---------------------------------------------------------------------------
 * Hashing, time and randomness
 * ------------------------------------------------------------------------ */

/* A 128-bit key: programs are named by one. */
struct kiln_key {
    uint64_t lo;
    uint64_t hi;
};

/* @return XXH3-64 of the bytes (seed 0). Thread-safe. */
KILN_API uint64_t kiln_hash64(const void *data, size_t n);

/* @return XXH3-128 of the bytes (seed 0), as a key. Thread-safe. */
KILN_API struct kiln_key kiln_hash128(const void *data, size_t n);

/* @return whether two keys are equal. */
static inline bool kiln_key_equal(struct kiln_key a, struct kiln_key b)
{
    return a.lo == b.lo && a.hi == b.hi;
}

/* @return nanoseconds from a monotonic clock (not wall time). Thread-safe. */
KILN_API uint64_t kiln_now_ns(void);

/*
 * Fills `buf` with bytes from the operating system's random source.
 * @return 0 or KILN_EIO. Thread-safe.
 */
KILN_API int kiln_random_bytes(void *buf, size_t n);

/*
 * @return the peak resident set size of this process in bytes, or 0 when
 * the platform does not say. Thread-safe.
 */
KILN_API uint64_t kiln_peak_rss_bytes(void);

/* @return the current resident set size of this process in bytes, or 0.
 * Thread-safe. */
KILN_API uint64_t kiln_rss_bytes(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_COMMON_H */
