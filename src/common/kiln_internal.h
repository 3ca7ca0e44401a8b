/*
 * kiln_internal.h - the library-internal helpers of `common`.
 *
 * This is the one private header every module may include: the error
 * forwarding macro, the logging entry point and a few small utilities.
 * Nothing here is part of the public API; names carry the kiln__ prefix.
 */
#ifndef KILN_INTERNAL_H
#define KILN_INTERNAL_H

#include "kiln/common.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <wchar.h>

/* Forwards a negative kiln error to the caller. */
#define KILN_TRY(expr)         \
    do {                       \
        int kiln__rc = (expr); \
        if (kiln__rc < 0)      \
            return kiln__rc;   \
    } while (0)

#define KILN_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define KILN_MIN(a, b)    ((a) < (b) ? (a) : (b))
#define KILN_MAX(a, b)    ((a) > (b) ? (a) : (b))

#if defined(__MINGW32__)
/* gnu_printf under __USE_MINGW_ANSI_STDIO, which the Windows build sets:
 * plain `printf` would check against the Microsoft runtime's formats. */
#define KILN__PRINTF_KIND gnu_printf
#else
#define KILN__PRINTF_KIND printf
#endif

/* KILN_INLINE: a small helper of a hot loop, inlined at every call whatever
 * the compiler estimates; that estimate flips with unrelated edits to the
 * caller (pack_spirv2.c says what a flip cost). */
#if defined(__GNUC__)
#define KILN_PRINTF(fmt, args) __attribute__((format(KILN__PRINTF_KIND, fmt, args)))
#define KILN_LIKELY(x)         __builtin_expect(!!(x), 1)
#define KILN_UNLIKELY(x)       __builtin_expect(!!(x), 0)
#define KILN_INLINE            static inline __attribute__((always_inline))
#else
#define KILN_PRINTF(fmt, args)
#define KILN_LIKELY(x)   (x)
#define KILN_UNLIKELY(x) (x)
#define KILN_INLINE      static inline
#endif

/* @return whether events of `level` are logged now (a relaxed atomic load). */
bool kiln__log_enabled(enum kiln_log_level level);

/* Logs one event as one line. Use through KILN_LOG so that the format
 * arguments are not evaluated for a level that is off. */
void kiln__log(enum kiln_log_level level, const char *module, const char *fmt, ...)
    KILN_PRINTF(3, 4);

/* Warnings and errors are always formatted, even when the log is quieter:
 * their line is also the detail of the calling thread's error text
 * (kiln__err_end, errmsg.c). */
#define KILN_LOG(level, module, ...)                              \
    do {                                                          \
        if ((level) <= KILN_LOG_WARN || kiln__log_enabled(level)) \
            kiln__log((level), (module), __VA_ARGS__);            \
    } while (0)

#define KILN_ERROR(module, ...) KILN_LOG(KILN_LOG_ERROR, module, __VA_ARGS__)
#define KILN_WARN(module, ...)  KILN_LOG(KILN_LOG_WARN, module, __VA_ARGS__)
#define KILN_INFO(module, ...)  KILN_LOG(KILN_LOG_INFO, module, __VA_ARGS__)
#define KILN_DEBUG(module, ...) KILN_LOG(KILN_LOG_DEBUG, module, __VA_ARGS__)

/*
 * Every allocation of the library goes through these (alloc.c): the
 * allocator the application set with kiln_set_allocator, else libc's.
 * They behave as malloc, calloc, realloc, free and strdup (a size of 0
 * gives NULL or a unique pointer, as the allocator does); kiln__free(NULL)
 * does nothing. Never call libc's directly in src/ (layout.alloc checks).
 */
void *kiln__malloc(size_t n);
void *kiln__calloc(size_t count, size_t n);
void *kiln__realloc(void *p, size_t n);
void kiln__free(void *p);
char *kiln__strdup(const char *s);

/*
 * Makes room for one more element in an array that grows by doubling: when
 * `n` has reached *cap, `items` is reallocated to twice *cap elements of
 * `size` bytes (`first` when it is empty) and *cap is updated.
 * @return the array (moved or not), or NULL when memory ran out or the size
 * would overflow; then `items` and *cap are as they were.
 */
static inline void *kiln__grow(void *items, size_t n, size_t *cap, size_t size, size_t first)
{
    if (n < *cap)
        return items;
    size_t ncap = *cap ? *cap * 2 : first;
    if (ncap < *cap || ncap > SIZE_MAX / size)
        return NULL;
    void *grown = kiln__realloc(items, ncap * size);
    if (grown)
        *cap = ncap;
    return grown;
}

/*
 * Growable structs (kiln/common.h, docs/abi.md), defined in abi.c.
 *
 * kiln__struct_in copies the caller's struct `src` into the library's own
 * `dst` of `dst_size` bytes: the bytes the caller's size covers, the rest
 * zeroed, dst's size set to dst_size. A NULL `src` gives the defaults (all
 * zero but size). `what` names the struct in the error line.
 * @return 0, or KILN_EINVAL (logged) for a size of 0, a size smaller than
 * the size field, or bytes past dst_size that are not zero.
 *
 * kiln__struct_check says whether the caller's struct `p` may be read by a
 * library whose own type is `own_size` bytes (the rules of kiln__struct_in),
 * for a struct the library keeps a pointer to instead of copying (a
 * callback table such as kiln_io): slots past p's size are then absent.
 *
 * kiln__struct_out_check refuses (KILN_EINVAL, logged) a struct to fill
 * whose size is 0 or smaller than its size field.
 *
 * kiln__struct_out copies the library's full struct `src` back into the
 * caller's `dst`, only the bytes dst's size covers (zeroing the bytes past
 * src_size that a newer caller has), and leaves dst's size as the caller
 * set it. A NULL `dst`, or one of size 0, gets nothing.
 *
 * kiln__elem_out writes element `i` of an array the library allocated (and
 * zeroed) for a caller whose elements are `stride` bytes (its sizeof, which
 * the header's inline wrapper passed): the first min(stride, src_size)
 * bytes of the library's element `src` (docs/abi.md, "Arrays").
 *
 * kiln__struct_elem returns element `i` of a caller's array of growable
 * structs, whose stride is its first element's size (the caller checked
 * that with kiln__struct_in on element 0).
 */
int kiln__struct_check(const void *p, size_t own_size, const char *what);
int kiln__struct_in(void *dst, size_t dst_size, const void *src, const char *what);
int kiln__struct_out_check(const void *dst, const char *what);
void kiln__struct_out(void *dst, const void *src, size_t src_size);
void kiln__elem_out(void *array, size_t stride, size_t i, const void *src, size_t src_size);
static inline const void *kiln__struct_elem(const void *array, size_t i)
{
    size_t stride = *(const size_t *)array;
    return (const unsigned char *)array + i * stride;
}

/*
 * A caller's program (program.c) as this release lays it out: *use is `in`
 * itself when its sizes are this release's, else a copy in *own (the
 * caller destroys it). @return 0, KILN_EINVAL (logged) for sizes kiln
 * cannot read, or KILN_ENOMEM.
 */
struct kiln_program;
int kiln__program_in(const struct kiln_program *in, const struct kiln_program **use,
                     struct kiln_program **own);

/* Reads a caller's growable struct into a local of the library's own type:
 * KILN_STRUCT_IN(&local, user_ptr, "kiln_cache_options"). */
#define KILN_STRUCT_IN(dst, src, what)   kiln__struct_in((dst), sizeof(*(dst)), (src), (what))
#define KILN_STRUCT_OUT(dst, src)        kiln__struct_out((dst), (src), sizeof(*(src)))
#define KILN_STRUCT_CHECK(p, type, what) kiln__struct_check((p), sizeof(type), (what))

/*
 * Error text (errmsg.c): what kiln_last_errmsg, kiln_cache_errmsg and
 * kiln_vk_errmsg return. A handle embeds a struct kiln__errbuf (zeroed with
 * the handle: no init or destroy); a public function that can fail takes a
 * mark on entry and ends through kiln__err_end:
 *
 *     uint64_t m = kiln__err_mark();
 *     return kiln__err_end(c ? &c->err : NULL, m, "kiln_cache_put", c ? c->dir : NULL,
 *                          put_body(c, ...));
 *
 * For rc < 0 it writes "<fn>: <detail> (<KILN_E name>)" into `eb` (may be
 * NULL) and into the calling thread's last text. The detail is the last
 * warning or error line this thread logged since the mark (kiln__log keeps
 * it: the log line and the text come from one formatting), else
 * "<where>: <kiln_strerror(rc)>" (or just the description when `where` is
 * NULL). Success leaves both texts. `ok` codes that are answers, not
 * failures (KILN_ENOTFOUND of a lookup), go through kiln__err_end_ok.
 * The buffer is guarded by a spin flag: a writer and a reader copy at most
 * KILN__ERRMSG_MAX bytes under it.
 */
#define KILN__ERRMSG_MAX 512
struct kiln__errbuf {
    atomic_flag busy;
    int code;
    char text[KILN__ERRMSG_MAX];
};
uint64_t kiln__err_mark(void);
int kiln__err_end(struct kiln__errbuf *eb, uint64_t mark, const char *fn, const char *where,
                  int rc);
static inline int kiln__err_end_ok(struct kiln__errbuf *eb, uint64_t mark, const char *fn,
                                   const char *where, int rc, int ok)
{
    return rc == ok ? rc : kiln__err_end(eb, mark, fn, where, rc);
}
/* Copies a handle's text into the calling thread's buffer (for the public
 * *_errmsg getters). @return that buffer; "" when the handle has none. */
const char *kiln__err_text(struct kiln__errbuf *eb);
/* Keeps `line` as the calling thread's detail (called by kiln__log). */
void kiln__err_detail(const char *module, const char *line);

/*
 * Runs `n` workers fn(arg) at once (exec.c) and returns when the work is
 * done: on the application's executor when `ex` is set (n cut to its
 * concurrency; a task it refuses runs on the calling thread; a task that
 * has not started when the calling thread's run returns never calls fn),
 * else on n - 1 threads started here; the calling thread always runs one.
 * So fn must take its work from shared state (an atomic counter) and
 * return when none is left: then every piece is taken when the calling
 * thread's run returns, and only workers still in fn are waited for. `ex` is a struct
 * already read with KILN_STRUCT_IN (its submit is not NULL).
 * @return how many workers ran on the executor (0 without one).
 */
unsigned kiln__exec_run(const struct kiln_executor *ex, unsigned n, void (*fn)(void *), void *arg);

/*
 * Reads a caller's optional executor: *out gets a copy and *set whether
 * one is there. @return 0, or KILN_EINVAL (logged) for a struct whose size
 * is wrong or whose submit is NULL.
 */
int kiln__exec_in(struct kiln_executor *out, bool *set, const struct kiln_executor *ex);

/* @return the value of a hexadecimal digit (either case), or -1. */
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

/* @return the number of CPUs in this process's affinity mask (on Windows:
 * every active processor when its threads span processor groups), or 0 when
 * it cannot be read. */
unsigned kiln__affinity_cpus(void);

/* Little-endian loads and stores: every kiln file is little-endian. */
static inline uint32_t kiln__load_le32(const void *p)
{
    const unsigned char *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline uint64_t kiln__load_le64(const void *p)
{
    const unsigned char *b = p;
    return (uint64_t)kiln__load_le32(b) | (uint64_t)kiln__load_le32(b + 4) << 32;
}

static inline uint16_t kiln__load_le16(const void *p)
{
    const unsigned char *b = p;
    return (uint16_t)(b[0] | b[1] << 8);
}

static inline void kiln__store_le16(void *p, uint16_t v)
{
    unsigned char *b = p;
    b[0] = (unsigned char)v;
    b[1] = (unsigned char)(v >> 8);
}

static inline void kiln__store_le32(void *p, uint32_t v)
{
    unsigned char *b = p;
    b[0] = (unsigned char)v;
    b[1] = (unsigned char)(v >> 8);
    b[2] = (unsigned char)(v >> 16);
    b[3] = (unsigned char)(v >> 24);
}

static inline void kiln__store_le64(void *p, uint64_t v)
{
    kiln__store_le32(p, (uint32_t)v);
    kiln__store_le32((unsigned char *)p + 4, (uint32_t)(v >> 32));
}

/*
 * Creates the file at `path` new, for a temporary name kiln owns: with
 * KILN_IO_CREATE | KILN_IO_EXCL | KILN_IO_NOFOLLOW, after removing whatever
 * was there (a leftover or a planted link). The caller makes sure no one
 * else writes that name at the same time.
 * @return 0 with the descriptor in *fd, or the error.
 */
/*
 * Checks a caller's I/O table before kiln keeps a pointer to it (io.c,
 * docs/abi.md): its size must hold every slot of libkiln.so.2's table
 * (KILN__IO_SLOTS_SIZE; all are required), and bytes past this library's
 * table must be zero. A slot added later is used only when io->size holds
 * it, with a fallback otherwise. @return 0 or KILN_EINVAL (logged).
 */
#define KILN__IO_SLOTS_SIZE (offsetof(struct kiln_io, unlink) + sizeof(void (*)(void)))
int kiln__io_check(const struct kiln_io *io);
int kiln__io_create_new(const struct kiln_io *io, const char *path, int *fd);

/* @return this process's id, for log lines and files that name their
 * writer. Thread-safe. */
long kiln__process_id(void);

/* Sleeps `ms` milliseconds (all of them: a signal does not cut it short).
 * Thread-safe. */
void kiln__sleep_ms(unsigned ms);

/* Makes the folder `path` (not its parents).
 * @return 0, or -1 with errno set (EEXIST when it is there). */
int kiln__make_dir(const char *path);

/* @return the last folder separator of `path` ('/', and on Windows also
 * '\\'), or NULL when it has none. */
const char *kiln__path_last_sep(const char *path);

/* @return the first place `needle` (m bytes) occurs in `hay` (n bytes), or
 * NULL; `hay` itself for m == 0 (the C library's memmem where it has one). */
void *kiln__memmem(const void *hay, size_t n, const void *needle, size_t m);

/* kiln_io_read_file with more open flags (KILN_IO_NOFOLLOW). */
int kiln__io_read_file(const struct kiln_io *io, const char *path, int flags, size_t max,
                       void **data, size_t *n);

/*
 * Joins a folder and a file name into `out` (size `cap`).
 * @return 0 or KILN_ERANGE when it does not fit.
 */
int kiln__path_join(char *out, size_t cap, const char *dir, const char *name);

/*
 * The folder part of `path` into `out` (size `cap`): "." when it has none,
 * the root for a file in it.
 * @return 0 or KILN_ERANGE when it does not fit.
 */
int kiln__path_dir(char *out, size_t cap, const char *path);

/*
 * The memory budget's worker processes (defined in src/pool/budget.c):
 * the resident memory of a registered process counts toward every pool's
 * budget (kiln_pool_resident_bytes) until it is removed. Register a child
 * right after it starts and remove it once it was waited for.
 * kiln__budget_add_pid @return 0, KILN_EINVAL for pid <= 0, or KILN_ERANGE
 * when KILN__BUDGET_MAX_PIDS are registered. Removing a pid that is not
 * registered is a no-op. Both thread-safe.
 */
#define KILN__BUDGET_MAX_PIDS 256
int kiln__budget_add_pid(long pid);
void kiln__budget_remove_pid(long pid);

/*
 * Puts the calling thread at idle CPU and I/O priority (defined in
 * src/pool's platform files; the pool's threads in background mode, and
 * the thread that starts an isolated run's workers, call it). @return 0 or
 * the first error (the thread keeps what could be set).
 */
int kiln__pool_thread_background(void);

/* ---- Windows only (defined in io_win.c; the *_win.c files call them) ---- */

/*
 * Converts a UTF-8 path to the UTF-16 form the wide Win32 calls take; a path
 * too long for MAX_PATH comes back absolute with the "\\?\" prefix.
 * @return 0 with *out to free(), KILN_EINVAL for bytes that are not UTF-8,
 * KILN_ENOENT for an empty path, or KILN_ENOMEM.
 */
int kiln__win_path(const char *path, wchar_t **out);

/*
 * Converts a UTF-16 string from a Win32 call (a file name from
 * FindFirstFileW, say) to UTF-8.
 * @return 0 with *out to free(), KILN_EINVAL or KILN_ENOMEM.
 */
int kiln__win_utf8(const wchar_t *w, char **out);

/*
 * The core's own builder for a state kind kiln records itself
 * (KILN_STATE_FOZ: the Fossilize builder, src/foz/foz_builder_kiln.c), for
 * the preparation and the warm start to use when the caller gives none of
 * that kind. The one call that goes up the layers: prep, below foz, names
 * it here rather than including kiln/foz.h (foz fills a struct
 * kiln_builder, which prep defines), and libkiln links both. @return 1 with the builder in *out
 * (release it with kiln__default_builder_destroy), 0 when the core has none
 * of `kind` (*out cleared), or KILN_ENOMEM.
 */
struct kiln_builder;
int kiln__default_builder_create(uint32_t kind, struct kiln_builder *out);
void kiln__default_builder_destroy(struct kiln_builder *b);

/*
 * The builders a run uses (src/prep/prep_abi.c; prep's runs and foz's
 * replay): kiln__prep_builders_in reads an array of n builders whose stride
 * is the first one's size (every one must have it, docs/abi.md) into a new
 * array of the library's layout in *out, then appends the core's builder of
 * each state kind the caller gave none of (kiln__default_builder_create).
 * out->list is NULL when there are none, or when n builders are said and
 * `in` is NULL (kiln__prep_check_builders refuses that). @return 0,
 * KILN_EINVAL (logged) or KILN_ENOMEM. Release with kiln__prep_builders_free,
 * after a failure too.
 */
struct kiln__prep_builders {
    struct kiln_builder *list; /* the caller's, then the core's */
    size_t n;                  /* all of them */
    size_t ndefaults;          /* the core's, at the end */
};
int kiln__prep_builders_in(const struct kiln_builder *in, size_t n,
                           struct kiln__prep_builders *out);
void kiln__prep_builders_free(struct kiln__prep_builders *b);

/*
 * kiln_vk_create with the extra extensions asked late (vk_context.c):
 * late->fn is called once, on the creating thread, after the instance is
 * made and the device chosen and right before the device is made, and
 * sets the extra_extensions list and its count (names that stay valid
 * until kiln__vk_create_late returns). A negative answer stops the
 * creation there with that error; the half-made context is destroyed.
 * So kiln_prepare makes the slow first part beside its translation, whose
 * programs decide the extensions (start.c). Not with `external`
 * (KILN_EINVAL). @return as kiln_vk_create.
 */
struct kiln_vk;
struct kiln_vk_options;
struct kiln__vk_late {
    int (*fn)(void *user, const char *const **names, uint32_t *count);
    void *user;
};
int kiln__vk_create_late(const struct kiln_vk_options *o, const struct kiln__vk_late *late,
                         struct kiln_vk **out);

/* The detail this thread logged since `mark` (kiln__err_mark), or "": a
 * worker thread's failure handed to the thread that reports it, which
 * keeps it with kiln__err_detail. */
const char *kiln__err_detail_since(uint64_t mark);

/*
 * The host tier of driver binaries (src/prep/binaries.c stores them,
 * src/vk/vk_binary.c talks to the driver, VK_KHR_pipeline_binary): a
 * provider is what the tier asks of a device, so that tests drive the
 * tier's storage, staleness and pruning with a fake one where the device
 * has no such extension (lavapipe). Every callback is thread-safe.
 */
#define KILN__BIN_KEY_MAX 32u /* VK_MAX_PIPELINE_BINARY_KEY_SIZE_KHR */

/* The device and its driver's global key: binaries are valid only for it. */
struct kiln__bin_global {
    uint32_t vendor_id;
    uint32_t device_id;
    uint32_t key_size; /* at most KILN__BIN_KEY_MAX */
    uint8_t key[KILN__BIN_KEY_MAX];
};

/* One binary of a pipeline: its driver key and its data (borrowed). */
struct kiln__bin_entry {
    const uint8_t *key;
    const uint8_t *data;
    uint64_t data_size;
    uint32_t key_size;
};

/* Called by a provider's capture for each binary: copies it. */
typedef int (*kiln__bin_add_fn)(void *ctx, const struct kiln__bin_entry *e);

struct kiln_vk;
struct kiln_vk_pipeline;
struct kiln_key;

struct kiln__bin_provider {
    void *user;
    /* The device's global key (vkGetPipelineKeyKHR without create info). */
    int (*global_key)(void *user, struct kiln__bin_global *out);
    /* Hands each binary of `pipeline` (a VkPipeline as an integer, built
     * with KILN__VK_PIPELINE_CAPTURE or a builder's capture_flags2) to
     * add(ctx, ...), then lets the driver release its captured data.
     * `key` is the program's (a fake provider derives its binaries from
     * it). @return 0 or the error (nothing kept then). */
    int (*capture)(void *user, const struct kiln_key *key, uint64_t pipeline, kiln__bin_add_fn add,
                   void *ctx);
    /* Makes the pipeline of program `key` (kiln's own shapes: compute, or
     * a vertex and a fragment stage in kiln's layout) from its `n`
     * binaries, already parsed and checked; no SPIR-V. @return 0 with
     * *out (NULL: made, nothing to hand out; the tests' fake), or the
     * error: the program is then built from its SPIR-V. */
    int (*create_from)(void *user, const struct kiln_key *key, bool compute,
                       const struct kiln__bin_entry *bins, uint32_t n,
                       struct kiln_vk_pipeline **out);
    /* For a builder's pipeline (kiln_build_request.tier_*): makes the
     * driver's binary objects from the `n` checked binaries of program
     * `key` and a VkPipelineBinaryInfoKHR over them (*info, its pNext
     * NULL) for the builder to chain into its create; unbind destroys
     * them after the create. *info may be NULL (the tests' fake: checked,
     * nothing to chain). @return 0, or the error: the program is then
     * built from its SPIR-V. */
    int (*bind)(void *user, const struct kiln_key *key, const struct kiln__bin_entry *bins,
                uint32_t n, void **info);
    void (*unbind)(void *user, void *info);
    /* The VkPipelineCreateFlags2KHR a builder adds to a create whose
     * binaries are to be captured (VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR;
     * 0 for the tests' fake, which needs none). */
    uint64_t capture_flags2;
};

/* Lets the driver free the pipelines destroyed so far on kiln's own device
 * (a wait on its idle queue; vk_context.c says why). Thread-safe; nothing
 * on an application's device. @return 0 or KILN_EVULKAN (logged). */
int kiln__vk_settle(struct kiln_vk *vk);

/*
 * The real provider of `vk`'s device (src/vk/vk_binary.c): only where kiln
 * was built with headers that know VK_KHR_pipeline_binary and the device
 * enabled it with maintenance5. @return 0 with *out filled, or
 * KILN_ENOTSUP with `why` saying why (a line for the log).
 */
int kiln__vk_binary_provider(struct kiln_vk *vk, struct kiln__bin_provider *out, char *why,
                             size_t cap);

/* A kiln_vk_pipeline_desc flag only the tier sets: build with the driver's
 * data captured (VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR) and without the
 * VkPipelineCache (a captured build leaves it empty; the tier is the one
 * path). Ignored where the provider is absent. */
#define KILN__VK_PIPELINE_CAPTURE (1u << 31)

/*
 * Drops every live record of `c` for whose key drop(user, key) says true,
 * with the prune's crash-safe rewrite (src/cache/cache_life.c); nothing is
 * written when nothing is dropped. report (may be NULL; the library's own
 * layout, not read for a size) says what the rewrite did, damaged records
 * it left out among them. `c` must be writable; no other call on it may
 * run meanwhile. @return 0 or the rewrite's error (the cache is then left
 * as it was, as kiln_cache_prune says).
 */
struct kiln_cache;
struct kiln_cache_rewrite_report;
typedef bool (*kiln__cache_drop_fn)(void *user, const struct kiln_key *key);
int kiln__cache_drop_where(struct kiln_cache *c, kiln__cache_drop_fn drop, void *user,
                           struct kiln_cache_rewrite_report *report);

/* The platform's atomic rename that never replaces (io_unix.c, io_win.c):
 * KILN_EEXIST when `to` exists. */
int kiln__io_rename_noreplace(const char *from, const char *to);

#endif /* KILN_INTERNAL_H */
