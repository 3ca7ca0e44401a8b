/*
 * test_cache.c - the program cache, each case a real open of a real cache
 * folder in a fresh temporary folder.
 *
 * Payloads are made from their key (fill()), so any loaded record can be
 * checked byte for byte without keeping a copy. Damage is made by editing
 * the files directly, the way a crash or a bad disk would; faults in the
 * I/O calls come through a wrapping struct kiln_io (struct faultio).
 */
#ifdef _WIN32
#define _FILE_OFFSET_BITS 64 /* 64-bit off_t and st_size in the Windows runtime */
#endif
#include "kiln_test.h"
#include "cache_format.h"
#include "cache_internal.h" /* load_passes: the one-pass load of layers */

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _WIN32
#include <sys/utime.h>
#else
#include <utime.h>
#endif

#ifdef _WIN32
#include <io.h>
/* The Windows C runtime has no pread/pwrite: seek, then read or write (each
 * helper owns its descriptor). */
static ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    return _lseeki64(fd, off, SEEK_SET) < 0 ? -1 : read(fd, buf, (unsigned)n);
}

static ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return _lseeki64(fd, off, SEEK_SET) < 0 ? -1 : write(fd, buf, (unsigned)n);
}
#else
#define O_BINARY 0 /* the Windows runtime's text mode would rewrite newlines */
#endif

#define STAMP 0x5354414d50000001ull

/* ---- helpers ------------------------------------------------------------ */

static void fill(struct kiln_key key, void *buf, size_t n)
{
    uint64_t s = key.lo ^ (key.hi << 1) ^ n;
    unsigned char *p = buf;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = kt_rand(&s);
        memcpy(p + i, &v, KILN_MIN((size_t)8, n - i));
    }
}

static struct kiln_key key_of(uint64_t i)
{
    return (struct kiln_key){.lo = i * 0x9e3779b97f4a7c15ull + 1, .hi = i ^ 0xabcdefull};
}

static int open_cache(const char *dir, uint64_t stamp, unsigned flags, struct kiln_cache **c)
{
    struct kiln_cache_options opt = {.size = sizeof(opt), .stamp = stamp, .flags = flags};
    return kiln_cache_open(dir, &opt, c);
}

static int put_rec(struct kiln_cache *c, struct kiln_key key, size_t size)
{
    unsigned char *buf = malloc(size ? size : 1);
    fill(key, buf, size);
    int rc = kiln_cache_put(c, key, buf, size, (uint32_t)size * 3, (uint8_t)(key.lo % 3),
                            (uint16_t)(1 + key.lo % 5));
    free(buf);
    return rc;
}

/* Checks that a result is the record put for `key`. */
static bool result_ok(const struct kiln_cache_result *r, struct kiln_key key)
{
    if (r->status != KILN_OK || !kiln_key_equal(r->key, key))
        return false;
    if (r->raw_size != r->size * 3 || r->codec != key.lo % 3 || r->stages != 1 + key.lo % 5)
        return false;
    if (r->size == 0)
        return r->data == NULL;
    unsigned char *want = malloc(r->size);
    fill(key, want, r->size);
    bool same = memcmp(want, r->data, r->size) == 0;
    free(want);
    return same;
}

/* Loads keys[0..n) and returns how many came back whole; *ok[i] says which. */
static size_t load_check(struct kiln_cache *c, const struct kiln_key *keys, size_t n,
                         unsigned threads, bool *ok)
{
    struct kiln_cache_result *res;
    int64_t loaded = kiln_cache_load_many(c, keys, n, threads, &res);
    if (loaded < 0)
        return 0;
    size_t good = 0;
    for (size_t i = 0; i < n; i++) {
        bool g = result_ok(&res[i], keys[i]);
        if (ok)
            ok[i] = g;
        good += g;
        if (res[i].status != KILN_OK && res[i].data)
            kt_fail(__FILE__, __LINE__, "a failed result carries data");
    }
    if ((int64_t)good != loaded)
        kt_fail(__FILE__, __LINE__, "loaded %lld but %zu checked out", (long long)loaded, good);
    kiln_cache_results_free(res, n);
    return good;
}

static void path_of(char *out, const char *dir, const char *name)
{
    if (snprintf(out, 4096, "%s/%s", dir, name) >= 4096)
        kt_fail(__FILE__, __LINE__, "path too long");
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : UINT64_MAX;
}

static void *read_all(const char *path, size_t *n)
{
    void *data;
    if (kiln_io_read_file(kiln_io_default(), path, SIZE_MAX, &data, n) < 0)
        return NULL;
    return data;
}

static void write_all(const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_BINARY, 0644);
    if (fd < 0 || write(fd, data, n) != (ssize_t)n)
        kt_fail(__FILE__, __LINE__, "cannot write %s", path);
    if (fd >= 0)
        close(fd);
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    void *d = read_all(from, &n);
    if (!d) {
        kt_fail(__FILE__, __LINE__, "cannot read %s", from);
        return;
    }
    write_all(to, d, n);
    free(d);
}

static void cut_file(const char *path, uint64_t size)
{
    if (truncate(path, (off_t)size) != 0)
        kt_fail(__FILE__, __LINE__, "cannot truncate %s", path);
}

static void patch_file(const char *path, uint64_t off, const void *bytes, size_t n)
{
    int fd = open(path, O_WRONLY | O_BINARY);
    if (fd < 0 || pwrite(fd, bytes, n, (off_t)off) != (ssize_t)n)
        kt_fail(__FILE__, __LINE__, "cannot patch %s", path);
    if (fd >= 0)
        close(fd);
}

static void flip_bit(const char *path, uint64_t off, unsigned bit)
{
    int fd = open(path, O_RDWR | O_BINARY);
    unsigned char b = 0;
    if (fd < 0 || pread(fd, &b, 1, (off_t)off) != 1)
        kt_fail(__FILE__, __LINE__, "cannot read %s", path);
    b ^= (unsigned char)(1u << bit);
    if (fd < 0 || pwrite(fd, &b, 1, (off_t)off) != 1)
        kt_fail(__FILE__, __LINE__, "cannot write %s", path);
    if (fd >= 0)
        close(fd);
}

/* Makes a cache of n records of sizes from `sizes` (cycled) and keeps the
 * keys and offsets. */
static void make_cache(const char *dir, size_t n, const size_t *sizes, size_t nsizes,
                       struct kiln_key *keys, uint64_t *offsets)
{
    struct kiln_cache *c;
    if (open_cache(dir, STAMP, KILN_CACHE_CREATE, &c) < 0) {
        kt_fail(__FILE__, __LINE__, "cannot create a cache in %s", dir);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        keys[i] = key_of(i);
        KT_CHECK_OK(put_rec(c, keys[i], sizes[i % nsizes]));
        struct kiln_cache_entry e;
        KT_CHECK_OK(kiln_cache_find(c, keys[i], &e));
        if (offsets)
            offsets[i] = e.offset;
    }
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
}

static enum kiln_cache_open_kind kind_of(struct kiln_cache *c)
{
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    return st.open_kind;
}

/* ---- fault injection ----------------------------------------------------- */

struct faultio {
    struct kiln_io io;
    const struct kiln_io *base;
    int rec_fd, idx_fd;   /* the last descriptors opened on each file */
    int rec_write_fail;   /* fail the next record write with this error */
    bool rec_write_short; /* ...after writing part of it */
    int idx_write_fail;   /* fail every index write with this error */
    int rec_fsync_fail;   /* fail the next records sync */
    int rename_fail;      /* fail every rename */
};

static struct faultio *F(const struct kiln_io *self)
{
    return (struct faultio *)(uintptr_t)self;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int f_open(const struct kiln_io *self, const char *path, int flags, int *fd)
{
    int rc = F(self)->base->open(F(self)->base, path, flags, fd);
    if (rc == KILN_OK && (ends_with(path, ".kpc") || ends_with(path, ".kpc.new")) &&
        (flags & KILN_IO_RDWR))
        F(self)->rec_fd = *fd;
    if (rc == KILN_OK && ends_with(path, ".kpx") && (flags & KILN_IO_RDWR))
        F(self)->idx_fd = *fd;
    return rc;
}
static int f_close(const struct kiln_io *self, int fd)
{
    return F(self)->base->close(F(self)->base, fd);
}
static int64_t f_pread(const struct kiln_io *self, int fd, void *buf, size_t n, uint64_t off)
{
    return F(self)->base->pread(F(self)->base, fd, buf, n, off);
}
static int64_t f_pwrite(const struct kiln_io *self, int fd, const void *buf, size_t n, uint64_t off)
{
    struct faultio *f = F(self);
    if (fd == f->rec_fd && f->rec_write_fail) {
        int err = f->rec_write_fail;
        if (f->rec_write_short && n > 1) {
            f->rec_write_short = false;
            return f->base->pwrite(f->base, fd, buf, n / 2, off);
        }
        f->rec_write_fail = 0;
        return err;
    }
    if (fd == f->idx_fd && f->idx_write_fail)
        return f->idx_write_fail;
    return f->base->pwrite(f->base, fd, buf, n, off);
}
static int f_fsync(const struct kiln_io *self, int fd)
{
    struct faultio *f = F(self);
    if (fd == f->rec_fd && f->rec_fsync_fail) {
        int err = f->rec_fsync_fail;
        f->rec_fsync_fail = 0;
        return err;
    }
    return f->base->fsync(f->base, fd);
}
static int f_fsync_dir(const struct kiln_io *self, const char *path)
{
    return F(self)->base->fsync_dir(F(self)->base, path);
}
static int f_rename(const struct kiln_io *self, const char *from, const char *to)
{
    if (F(self)->rename_fail)
        return F(self)->rename_fail;
    return F(self)->base->rename(F(self)->base, from, to);
}
static int f_truncate(const struct kiln_io *self, int fd, uint64_t size)
{
    return F(self)->base->truncate(F(self)->base, fd, size);
}
static int f_lock(const struct kiln_io *self, int fd, enum kiln_io_lock_mode mode)
{
    return F(self)->base->lock(F(self)->base, fd, mode);
}
static int f_size(const struct kiln_io *self, int fd, uint64_t *size)
{
    return F(self)->base->file_size(F(self)->base, fd, size);
}
static int f_unlink(const struct kiln_io *self, const char *path)
{
    return F(self)->base->unlink(F(self)->base, path);
}

static void faultio_init(struct faultio *f)
{
    memset(f, 0, sizeof(*f));
    f->io = (struct kiln_io){sizeof(struct kiln_io),
                             f_open,
                             f_close,
                             f_pread,
                             f_pwrite,
                             f_fsync,
                             f_fsync_dir,
                             f_rename,
                             f_truncate,
                             f_lock,
                             f_size,
                             f_unlink};
    f->base = kiln_io_default();
    f->rec_fd = f->idx_fd = -1;
}

/* ---- cases --------------------------------------------------------------- */

KT_CASE(round_trip)
{
    const char *dir = kt_tmpdir();
    enum { N = 1000 };
    static struct kiln_key keys[N];
    static size_t sizes[N];
    uint64_t rng = 42, bytes = 0;
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_NEW);
    for (size_t i = 0; i < N; i++) {
        keys[i] = key_of(i);
        /* One in ten programs is empty; the rest up to 6 KiB. */
        sizes[i] = kt_rand(&rng) % 10 == 0 ? 0 : kt_rand(&rng) % 6000;
        bytes += sizes[i];
        KT_REQUIRE_OK(put_rec(c, keys[i], sizes[i]));
    }
    KT_CHECK_EQ(kiln_cache_count(c), N);
    KT_CHECK_EQ(load_check(c, keys, N, 2, NULL), N); /* before any reopen */
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);

    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(st.records, N);
    KT_CHECK_EQ(st.bytes, bytes);
    KT_CHECK_EQ(st.stamp, STAMP);
    KT_CHECK(strstr(st.open_text, "index used") != NULL);
    struct kiln_cache_entry *all;
    size_t n;
    KT_REQUIRE_OK(kiln_cache_entries(c, &all, &n));
    KT_CHECK_EQ(n, N);
    for (size_t i = 0; i < n; i++) {
        KT_CHECK(kiln_key_equal(all[i].key, keys[i])); /* file order */
        KT_CHECK_EQ(all[i].size, sizes[i]);
    }
    kiln_cache_entries_free(all);
    /* Ask in a shuffled order, with some keys that are not there. */
    static struct kiln_key ask[N + 10];
    for (size_t i = 0; i < N; i++)
        ask[i] = keys[(i * 7919) % N];
    for (size_t i = N; i < N + 10; i++)
        ask[i] = key_of(100000 + i);
    struct kiln_cache_result *res;
    int64_t loaded = kiln_cache_load_many(c, ask, N + 10, 0, &res);
    KT_CHECK_EQ(loaded, N);
    for (size_t i = 0; res && i < N + 10; i++) {
        if (i < N)
            KT_CHECK(result_ok(&res[i], ask[i]));
        else
            KT_CHECK_EQ(res[i].status, KILN_ENOTFOUND);
    }
    /* A payload can be taken out of the results. */
    size_t taken = sizes[(0 * 7919) % N] ? 0 : 1;
    void *keep = res ? res[taken].data : NULL;
    if (res)
        res[taken].data = NULL;
    kiln_cache_results_free(res, N + 10);
    kiln_cache_payload_free(keep);
    KT_CHECK_EQ(kiln_cache_find(c, key_of(999999), NULL), KILN_ENOTFOUND);
    kiln_cache_close(c);
}

KT_CASE(later_record_wins)
{
    const char *dir = kt_tmpdir();
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c));
    struct kiln_key k = key_of(7);
    KT_CHECK_OK(put_rec(c, k, 100));
    KT_CHECK_OK(put_rec(c, key_of(8), 10));
    KT_CHECK_OK(put_rec(c, k, 300));
    struct kiln_cache_entry e;
    KT_CHECK_OK(kiln_cache_find(c, k, &e));
    KT_CHECK_EQ(e.size, 300);
    KT_CHECK_EQ(kiln_cache_count(c), 2);
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    /* The same after an open from the index and after a rebuild. */
    for (int pass = 0; pass < 2; pass++) {
        char idx[4096];
        path_of(idx, dir, KILN_CACHE_INDEX_FILE);
        if (pass == 1)
            unlink(idx);
        KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
        KT_CHECK_EQ(kind_of(c), pass ? KILN_CACHE_OPENED_REBUILT : KILN_CACHE_OPENED_INDEX);
        KT_CHECK_OK(kiln_cache_find(c, k, &e));
        KT_CHECK_EQ(e.size, 300);
        struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
        kiln_cache_get_stats(c, &st);
        KT_CHECK_EQ(st.records, 2);
        KT_CHECK_EQ(st.superseded, 1);
        KT_CHECK_EQ(st.bytes, 310);
        struct kiln_key both[2] = {k, key_of(8)};
        KT_CHECK_EQ(load_check(c, both, 2, 1, NULL), 2);
        kiln_cache_close(c);
    }
}

enum { SMALL_N = 20 };
static const size_t small_sizes[] = {0, 17, 40, 3, 64, 1, 29};

KT_CASE(index_cut_short)
{
    const char *dir = kt_tmpdir();
    struct kiln_key keys[SMALL_N];
    make_cache(dir, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, NULL);
    char idx[4096], saved[4096];
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    path_of(saved, dir, "saved.kpx");
    copy_file(idx, saved);
    uint64_t full = file_size(idx);
    KT_CHECK_EQ(full, KILN__CACHE_HEADER_SIZE + SMALL_N * KILN__CACHE_ENTRY_SIZE);
    for (uint64_t cut = 1; cut <= 50; cut++) {
        copy_file(saved, idx);
        cut_file(idx, full - cut);
        struct kiln_cache *c;
        KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
        struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
        kiln_cache_get_stats(c, &st);
        KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_INDEX_TAIL);
        KT_CHECK_EQ(st.tail_records, cut <= KILN__CACHE_ENTRY_SIZE ? 1 : 2);
        KT_CHECK_EQ(load_check(c, keys, SMALL_N, 1, NULL), SMALL_N);
        kiln_cache_close(c);
        KT_CHECK_EQ(file_size(idx), full); /* the tail was appended */
        KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
        KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
        kiln_cache_close(c);
    }
}

KT_CASE(last_entry_changed)
{
    const char *dir = kt_tmpdir();
    struct kiln_key keys[SMALL_N];
    make_cache(dir, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, NULL);
    char idx[4096], saved[4096];
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    path_of(saved, dir, "saved.kpx");
    copy_file(idx, saved);
    uint64_t last = KILN__CACHE_HEADER_SIZE + (SMALL_N - 1) * KILN__CACHE_ENTRY_SIZE;
    for (int variant = 0; variant < 2; variant++) {
        copy_file(saved, idx);
        if (variant == 0) {
            /* A raw edit of the key: the entry's own check fails. */
            flip_bit(idx, last + 3, 5);
        } else {
            /* A well-formed entry naming another key: only the records say
             * it is wrong. */
            size_t n;
            unsigned char *d = read_all(idx, &n);
            KT_REQUIRE(d != NULL);
            struct kiln_cache_entry e;
            KT_CHECK_OK(kiln__cache_entry_decode(d + last, &e));
            e.key.lo ^= 1;
            kiln__cache_entry_encode(d + last, &e);
            write_all(idx, d, n);
            free(d);
        }
        struct kiln_cache *c;
        KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
        struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
        kiln_cache_get_stats(c, &st);
        KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_REBUILT);
        KT_CHECK(strstr(st.open_text, variant ? "last entry does not match" : "damaged") != NULL);
        KT_CHECK_EQ(st.records, SMALL_N);
        KT_CHECK_EQ(load_check(c, keys, SMALL_N, 1, NULL), SMALL_N);
        kiln_cache_close(c);
        KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
        KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX); /* rewritten */
        kiln_cache_close(c);
    }
}

/* Opens `dir` and checks that the index was rebuilt for `why` and every
 * record is there. */
static void expect_rebuilt(const char *dir, const struct kiln_key *keys, size_t n, const char *why)
{
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_REBUILT);
    if (!strstr(st.open_text, why))
        kt_fail(__FILE__, __LINE__, "'%s' does not say '%s'", st.open_text, why);
    KT_CHECK_EQ(load_check(c, keys, n, 2, NULL), n);
    kiln_cache_close(c);
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    kiln_cache_close(c);
}

KT_CASE(index_deleted)
{
    const char *dir = kt_tmpdir();
    struct kiln_key keys[SMALL_N];
    make_cache(dir, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, NULL);
    char idx[4096];
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    KT_CHECK(unlink(idx) == 0);
    expect_rebuilt(dir, keys, SMALL_N, "missing");
}

KT_CASE(index_of_other_cache)
{
    const char *dir = kt_tmpdir();
    char a[4096], b[4096], from[4096], to[4096];
    path_of(a, dir, "a");
    path_of(b, dir, "b");
    kt_mkdir(a);
    kt_mkdir(b);
    struct kiln_key keys[SMALL_N];
    /* The same records and stamp, but another records file (file id). */
    make_cache(a, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, NULL);
    make_cache(b, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, NULL);
    path_of(from, b, KILN_CACHE_INDEX_FILE);
    path_of(to, a, KILN_CACHE_INDEX_FILE);
    copy_file(from, to);
    expect_rebuilt(a, keys, SMALL_N, "another records file");
}

KT_CASE(index_other_stamp)
{
    const char *dir = kt_tmpdir();
    struct kiln_key keys[SMALL_N];
    make_cache(dir, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, NULL);
    char idx[4096];
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    size_t n;
    unsigned char *d = read_all(idx, &n);
    KT_REQUIRE(d != NULL);
    struct kiln__cache_header h;
    KT_REQUIRE(kiln__cache_header_decode(d, n, KILN__CACHE_IDX_MAGIC, &h) == KILN__HEADER_OK);
    h.stamp ^= 0x100;
    kiln__cache_header_encode(d, KILN__CACHE_IDX_MAGIC, &h);
    write_all(idx, d, n);
    free(d);
    expect_rebuilt(dir, keys, SMALL_N, "another stamp");
}

KT_CASE(records_truncated_everywhere)
{
    const char *dir = kt_tmpdir();
    enum { N = 12 };
    static const size_t sizes[] = {5, 0, 23, 11, 31, 2};
    struct kiln_key keys[N];
    uint64_t off[N];
    make_cache(dir, N, sizes, KILN_ARRAY_LEN(sizes), keys, off);
    char rec[4096], idx[4096], srec[4096], sidx[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    path_of(srec, dir, "saved.kpc");
    path_of(sidx, dir, "saved.kpx");
    copy_file(rec, srec);
    copy_file(idx, sidx);
    uint64_t end = file_size(rec);
    for (uint64_t cut = off[N - 3]; cut < end; cut++) {
        copy_file(srec, rec);
        copy_file(sidx, idx);
        cut_file(rec, cut);
        struct kiln_cache *c;
        KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
        size_t whole = 0;
        while (whole < N && off[whole] + kiln__cache_rec_len((uint32_t)sizes[whole % 6]) <= cut)
            whole++;
        struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
        kiln_cache_get_stats(c, &st);
        KT_CHECK_EQ(st.records, whole);
        KT_CHECK_EQ(
            st.cut_bytes,
            cut - (whole ? off[whole - 1] + kiln__cache_rec_len((uint32_t)sizes[(whole - 1) % 6])
                         : KILN__CACHE_HEADER_SIZE));
        bool ok[N];
        KT_CHECK_EQ(load_check(c, keys, N, 1, ok), whole);
        for (size_t i = 0; i < N; i++)
            KT_CHECK_EQ(ok[i], i < whole);
        /* The next append lands after the last whole record and survives. */
        struct kiln_key extra = key_of(5000 + cut);
        KT_CHECK_OK(put_rec(c, extra, 9));
        KT_CHECK_OK(kiln_cache_sync(c));
        kiln_cache_close(c);
        KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
        KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
        KT_CHECK_EQ(kiln_cache_count(c), whole + 1);
        KT_CHECK_EQ(load_check(c, &extra, 1, 1, NULL), 1);
        KT_CHECK_EQ(load_check(c, keys, N, 1, NULL), whole);
        kiln_cache_close(c);
    }
}

KT_CASE(flipped_bit)
{
    const char *dir = kt_tmpdir();
    enum { N = 8 };
    static const size_t sizes[] = {40};
    struct kiln_key keys[N];
    uint64_t off[N];
    make_cache(dir, N, sizes, 1, keys, off);
    char rec[4096], idx[4096], srec[4096], sidx[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    path_of(srec, dir, "saved.kpc");
    path_of(sidx, dir, "saved.kpx");
    copy_file(rec, srec);
    copy_file(idx, sidx);
    /* Every byte of a middle record and of the last one, a different bit
     * each time. */
    const size_t victims[] = {3, N - 1};
    for (size_t v = 0; v < KILN_ARRAY_LEN(victims); v++) {
        size_t r = victims[v];
        for (uint64_t b = 0; b < KILN__CACHE_HEAD_SIZE + sizes[0]; b++) {
            copy_file(srec, rec);
            copy_file(sidx, idx);
            flip_bit(rec, off[r] + b, (unsigned)(b % 8));
            struct kiln_cache *c;
            KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
            bool ok[N];
            KT_CHECK_EQ(load_check(c, keys, N, 2, ok), N - 1);
            for (size_t i = 0; i < N; i++)
                if (ok[i] != (i != r))
                    kt_fail(__FILE__, __LINE__,
                            "record %zu, bit flipped at byte %" PRIu64 " of record %zu: %s", i, b,
                            r, ok[i] ? "loaded" : "missing");
            /* The missing record can be written again. */
            KT_CHECK_OK(put_rec(c, keys[r], sizes[0]));
            KT_CHECK_EQ(load_check(c, keys, N, 1, NULL), N);
            kiln_cache_close(c);
        }
    }
}

KT_CASE(get_one)
{
    const char *dir = kt_tmpdir();
    enum { N = 8 };
    static const size_t sizes[] = {40, 0, 5000, 1};
    struct kiln_key keys[N];
    uint64_t off[N];
    make_cache(dir, N, sizes, KILN_ARRAY_LEN(sizes), keys, off);
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &c));
    void *kept = NULL;
    for (size_t i = 0; i < N; i++) {
        struct kiln_cache_result r;
        KT_CHECK_OK(kiln_cache_get(c, keys[i], &r));
        KT_CHECK(result_ok(&r, keys[i]));
        if (i == 2) {
            kept = r.data; /* kept beyond the cache */
            r.data = NULL;
        }
        kiln_cache_payload_free(r.data);
    }
    struct kiln_cache_result r;
    KT_CHECK_EQ(kiln_cache_get(c, key_of(999), &r), KILN_ENOTFOUND);
    KT_CHECK_EQ(r.status, KILN_ENOTFOUND);
    KT_CHECK(r.data == NULL);
    kiln_cache_close(c);
    unsigned char *want = malloc(5000);
    fill(keys[2], want, 5000);
    KT_CHECK(kept && memcmp(kept, want, 5000) == 0);
    free(want);
    kiln_cache_payload_free(kept);

    /* A damaged record is reported missing, never returned. */
    char rec[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    flip_bit(rec, off[2] + KILN__CACHE_HEAD_SIZE + 100, 1);
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kiln_cache_get(c, keys[2], &r), KILN_ECORRUPT_RECORD);
    KT_CHECK(r.data == NULL);
    /* A record put on this handle is got at once. */
    KT_CHECK_OK(put_rec(c, key_of(500), 300));
    KT_CHECK_OK(kiln_cache_get(c, key_of(500), &r));
    KT_CHECK(result_ok(&r, key_of(500)));
    kiln_cache_payload_free(r.data);
    kiln_cache_close(c);
}

KT_CASE(unindexed_tail)
{
    const char *dir = kt_tmpdir();
    enum { N = 10 };
    static const size_t sizes[] = {100, 7, 0, 250};
    struct kiln_key keys[N];
    make_cache(dir, N / 2, sizes, KILN_ARRAY_LEN(sizes), keys, NULL);
    char idx[4096], saved[4096];
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    path_of(saved, dir, "saved.kpx");
    copy_file(idx, saved);
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    for (size_t i = N / 2; i < N; i++) {
        keys[i] = key_of(i);
        KT_CHECK_OK(put_rec(c, keys[i], sizes[i % 4]));
    }
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    /* As if the writer had written records but none of their entries. */
    copy_file(saved, idx);
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_INDEX_TAIL);
    KT_CHECK_EQ(st.tail_records, N / 2);
    KT_CHECK_EQ(load_check(c, keys, N, 2, NULL), N);
    kiln_cache_close(c);
    KT_CHECK_EQ(file_size(idx), KILN__CACHE_HEADER_SIZE + N * KILN__CACHE_ENTRY_SIZE);
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    kiln_cache_close(c);
}

KT_CASE(second_writer_refused)
{
    const char *dir = kt_tmpdir();
    struct kiln_cache *a, *b;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &a));
    KT_CHECK_OK(put_rec(a, key_of(1), 33));
    KT_CHECK_EQ(open_cache(dir, STAMP, KILN_CACHE_CREATE, &b), KILN_EBUSY);
    KT_CHECK(b == NULL);
    /* A reader is let in and sees what was written. */
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &b));
    KT_CHECK_EQ(kiln_cache_count(b), 1);
    KT_CHECK_EQ(kiln_cache_put(b, key_of(2), "x", 1, 1, 0, 1), KILN_EINVAL);
    kiln_cache_close(b);
    /* Even a writer whose stamp differs may not start the cache over. */
    KT_CHECK_EQ(open_cache(dir, STAMP + 1, 0, &b), KILN_EBUSY);
    kiln_cache_close(a);
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &b));
    KT_CHECK_EQ(kiln_cache_count(b), 1);
    kiln_cache_close(b);
}

KT_CASE(offsets_past_4gib)
{
    const char *dir = kt_tmpdir();
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c));
    KT_CHECK_OK(put_rec(c, key_of(1), 50));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    /* Grow the records file sparsely past 4 GiB: filler records of up to
     * 1 GiB whose payloads are the hole's zeros, then a real record, with
     * index entries for all of them. The fillers' checksums are left wrong
     * (computing them would read 4 GiB); they are never loaded here. */
    char rec[4096], idx[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    uint64_t off = file_size(rec);
    uint64_t far = (1ull << 32) + 12344; /* records start 8-byte aligned */
    unsigned char buf[KILN__CACHE_HEAD_SIZE];
    unsigned char ent[8 * KILN__CACHE_ENTRY_SIZE];
    size_t nent = 0;
    for (uint64_t i = 0; off < far; i++) {
        uint64_t room = far - off - KILN__CACHE_HEAD_SIZE;
        struct kiln_cache_entry filler = {
            .key = key_of(1000 + i),
            .offset = off,
            .size = (uint32_t)KILN_MIN(room, (uint64_t)KILN_CACHE_MAX_PAYLOAD),
            .checksum = 0x1234};
        kiln__cache_head_encode(buf, &filler);
        patch_file(rec, off, buf, sizeof(buf));
        kiln__cache_entry_encode(ent + nent++ * KILN__CACHE_ENTRY_SIZE, &filler);
        off += kiln__cache_rec_len(filler.size);
    }
    KT_REQUIRE(off == far);
    struct kiln_cache_entry e = {.key = key_of(3),
                                 .offset = far,
                                 .size = 64,
                                 .raw_size = 192,
                                 .codec = (uint8_t)(key_of(3).lo % 3),
                                 .stages = (uint16_t)(1 + key_of(3).lo % 5)};
    unsigned char payload[64];
    fill(e.key, payload, sizeof(payload));
    e.checksum = kiln__cache_record_checksum(&e, payload);
    kiln__cache_head_encode(buf, &e);
    patch_file(rec, far, buf, sizeof(buf));
    patch_file(rec, far + sizeof(buf), payload, sizeof(payload));
    kiln__cache_entry_encode(ent + nent++ * KILN__CACHE_ENTRY_SIZE, &e);
    patch_file(idx, file_size(idx), ent, nent * KILN__CACHE_ENTRY_SIZE);

    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    struct kiln_cache_entry got;
    KT_CHECK_OK(kiln_cache_find(c, e.key, &got));
    KT_CHECK(got.offset == far);
    struct kiln_key keys[2] = {key_of(1), key_of(3)};
    KT_CHECK_EQ(load_check(c, keys, 2, 2, NULL), 2);
    KT_CHECK_EQ(kiln_cache_count(c), 2 + nent - 1);
    /* Appending past 4 GiB, and finding it again after a reopen. */
    KT_CHECK_OK(put_rec(c, key_of(4), 77));
    KT_CHECK_OK(kiln_cache_find(c, key_of(4), &got));
    KT_CHECK(got.offset == far + KILN__CACHE_HEAD_SIZE + 64);
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &c));
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_INDEX);
    KT_CHECK(st.file_bytes > (1ull << 32));
    struct kiln_key k4 = key_of(4);
    KT_CHECK_EQ(load_check(c, &k4, 1, 1, NULL), 1);
    kiln_cache_close(c);
}

/* Collects the log lines of one open. */
static char log_text[4096];

static void log_keep(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)user;
    (void)level;
    (void)module;
    size_t len = strlen(log_text);
    snprintf(log_text + len, sizeof(log_text) - len, "%s\n", line);
}

/* Opens with the log collected at info level. */
static int open_logged(const char *dir, const struct kiln_cache_options *opt, struct kiln_cache **c)
{
    log_text[0] = '\0';
    enum kiln_log_level was = kiln_log_get_level();
    kiln_log_set_level(KILN_LOG_INFO);
    kiln_log_set_sink(log_keep, NULL);
    int rc = kiln_cache_open(dir, opt, c);
    kiln_log_set_sink(NULL, NULL);
    kiln_log_set_level(was);
    return rc;
}

KT_CASE(stamp_mismatch)
{
    /* Another stamp is refused, the cache left as it is, whatever the
     * flags (issue 13: an open used to start such a cache over). */
    const char *dir = kt_tmpdir();
    struct kiln_key keys[SMALL_N];
    char rec[4096], idx[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    make_cache(dir, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, NULL);
    uint64_t rec_size = file_size(rec), idx_size = file_size(idx);
    struct kiln_cache *c;
    const unsigned flags[] = {KILN_CACHE_READ_ONLY, 0, KILN_CACHE_CREATE,
                              KILN_CACHE_CREATE | KILN_CACHE_USE_DICT | KILN_CACHE_MOVE_ASIDE};
    for (size_t i = 0; i < KILN_ARRAY_LEN(flags); i++) {
        struct kiln_cache_options opt = {
            .size = sizeof(opt), .stamp = STAMP + 1, .flags = flags[i]};
        KT_CHECK_EQ(open_logged(dir, &opt, &c), KILN_ESTAMP);
        /* Both stamps are in the message. */
        KT_CHECK(strstr(log_text, "5354414d50000001") != NULL);
        KT_CHECK(strstr(log_text, "5354414d50000002") != NULL);
    }
    /* No options at all: stamp 0, another stamp too. */
    KT_CHECK_EQ(kiln_cache_open(dir, NULL, &c), KILN_ESTAMP);
    /* Another dictionary id named by the caller. */
    struct kiln_cache_options other_dict = {
        .size = sizeof(other_dict), .stamp = STAMP, .dict_id = 99, .flags = KILN_CACHE_CREATE};
    KT_CHECK_EQ(kiln_cache_open(dir, &other_dict, &c), KILN_ESTAMP);
    KT_CHECK_EQ(file_size(rec), rec_size);
    KT_CHECK_EQ(file_size(idx), idx_size);
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(load_check(c, keys, SMALL_N, 1, NULL), SMALL_N);
    kiln_cache_close(c);
}

KT_CASE(reset)
{
    /* KILN_CACHE_RESET is the one way to start over. */
    const char *dir = kt_tmpdir();
    struct kiln_key keys[SMALL_N];
    char rec[4096], idx[4096], aside[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    make_cache(dir, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, NULL);
    struct kiln_cache *c;
    KT_CHECK_EQ(open_cache(dir, STAMP + 1, KILN_CACHE_RESET | KILN_CACHE_READ_ONLY, &c),
                KILN_EINVAL);
    KT_CHECK_EQ(open_cache(dir, STAMP + 1, KILN_CACHE_RESET | KILN_CACHE_KEEP_STAMP, &c),
                KILN_EINVAL);
    /* Removing the old files. */
    KT_REQUIRE_OK(open_cache(dir, STAMP + 1, KILN_CACHE_RESET, &c));
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_RESTARTED);
    KT_CHECK_EQ(st.records, 0);
    KT_CHECK_EQ(st.stamp, STAMP + 1);
    KT_CHECK_OK(put_rec(c, key_of(1), 10));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    KT_REQUIRE_OK(open_cache(dir, STAMP + 1, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(kiln_cache_count(c), 1);
    kiln_cache_close(c);
    KT_REQUIRE(snprintf(aside, sizeof(aside), "%s.%016llx.old", rec, (unsigned long long)STAMP) <
               (int)sizeof(aside));
    KT_CHECK(access(aside, F_OK) != 0);

    /* Moving them aside, with another dictionary id; the same stamp counts
     * too (a reset is asked for, not inferred). */
    struct kiln_cache_options opt = {.size = sizeof(opt),
                                     .stamp = STAMP + 1,
                                     .dict_id = 99,
                                     .flags = KILN_CACHE_RESET | KILN_CACHE_MOVE_ASIDE};
    KT_REQUIRE_OK(kiln_cache_open(dir, &opt, &c));
    kiln_cache_get_stats(c, &st);
    KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_RESTARTED);
    KT_CHECK_EQ(st.dict_id, 99);
    KT_CHECK_EQ(st.records, 0);
    kiln_cache_close(c);
    KT_REQUIRE(snprintf(aside, sizeof(aside), "%s.%016llx.old", rec,
                        (unsigned long long)(STAMP + 1)) < (int)sizeof(aside));
    KT_CHECK(access(aside, F_OK) == 0);
    KT_REQUIRE(snprintf(aside, sizeof(aside), "%s.%016llx.old", idx,
                        (unsigned long long)(STAMP + 1)) < (int)sizeof(aside));
    KT_CHECK(access(aside, F_OK) == 0);
    opt.flags = 0;
    KT_REQUIRE_OK(kiln_cache_open(dir, &opt, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    KT_CHECK_OK(put_rec(c, key_of(2), 10));
    KT_CHECK_OK(put_rec(c, key_of(3), 10));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    /* A second reset of a cache of the same stamp keeps what the first set
     * aside: its files take ".old.1", the first ".old" is untouched. */
    KT_REQUIRE(snprintf(aside, sizeof(aside), "%s.%016llx.old", rec,
                        (unsigned long long)(STAMP + 1)) < (int)sizeof(aside));
    uint64_t first_aside = file_size(aside);
    uint64_t second = file_size(rec);
    opt.flags = KILN_CACHE_RESET | KILN_CACHE_MOVE_ASIDE;
    KT_REQUIRE_OK(kiln_cache_open(dir, &opt, &c));
    kiln_cache_close(c);
    KT_CHECK_EQ(file_size(aside), first_aside);
    char aside1[4200];
    KT_REQUIRE(snprintf(aside1, sizeof(aside1), "%s.%016llx.old.1", rec,
                        (unsigned long long)(STAMP + 1)) < (int)sizeof(aside1));
    KT_CHECK_EQ(file_size(aside1), second);
    KT_CHECK(second > first_aside); /* it held the two records put above, the first one */
    KT_REQUIRE(snprintf(aside1, sizeof(aside1), "%s.%016llx.old.1", idx,
                        (unsigned long long)(STAMP + 1)) < (int)sizeof(aside1));
    KT_CHECK(access(aside1, F_OK) == 0);
    opt.flags = 0;

    /* A damaged header is refused, and reset when asked. */
    flip_bit(rec, 20, 3);
    KT_CHECK_EQ(kiln_cache_open(dir, &opt, &c), KILN_ECORRUPT_HEADER);
    opt.flags = KILN_CACHE_RESET;
    KT_REQUIRE_OK(kiln_cache_open(dir, &opt, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_RESTARTED);
    kiln_cache_close(c);
    /* A file that is not a kiln cache is never reset. */
    write_all(rec, "this is not a kiln records file: it holds other bytes than a cache header", 74);
    KT_CHECK_EQ(kiln_cache_open(dir, &opt, &c), KILN_EFORMAT);
    KT_CHECK_EQ(file_size(rec), 74);
    /* In a folder with no cache, a reset creates one. */
    const char *empty = kt_tmpdir();
    KT_REQUIRE_OK(kiln_cache_open(empty, &opt, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_NEW);
    kiln_cache_close(c);
}

KT_CASE(create_makes_folders)
{
    const char *dir = kt_tmpdir();
    char deep[4096], file[4096];
    KT_REQUIRE(snprintf(deep, sizeof(deep), "%s/a/b/c", dir) < (int)sizeof(deep));
    struct kiln_cache *c;
    KT_CHECK_EQ(open_cache(deep, STAMP, 0, &c), KILN_ENOENT);
    KT_CHECK_EQ(open_cache(deep, STAMP, KILN_CACHE_READ_ONLY | KILN_CACHE_CREATE, &c), KILN_ENOENT);
    KT_REQUIRE_OK(open_cache(deep, STAMP, KILN_CACHE_CREATE, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_NEW);
    KT_CHECK_OK(put_rec(c, key_of(1), 100));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    KT_REQUIRE_OK(open_cache(deep, STAMP, KILN_CACHE_READ_ONLY, &c));
    KT_CHECK_EQ(kiln_cache_count(c), 1);
    kiln_cache_close(c);
    /* A trailing separator is the same folder. */
    KT_REQUIRE(snprintf(deep, sizeof(deep), "%s/a/b/c/", dir) < (int)sizeof(deep));
    KT_REQUIRE_OK(open_cache(deep, STAMP, KILN_CACHE_CREATE, &c));
    KT_CHECK_EQ(kiln_cache_count(c), 1);
    kiln_cache_close(c);
    /* A file where a folder should be: refused, the file left alone. */
    path_of(file, dir, "afile");
    write_all(file, "x", 1);
    KT_REQUIRE(snprintf(deep, sizeof(deep), "%s/afile/sub", dir) < (int)sizeof(deep));
    KT_CHECK(open_cache(file, STAMP, KILN_CACHE_CREATE, &c) < 0);
    KT_CHECK(open_cache(deep, STAMP, KILN_CACHE_CREATE, &c) < 0);
    KT_CHECK_EQ(file_size(file), 1);
}

KT_CASE(open_flags)
{
    const char *dir = kt_tmpdir();
    struct kiln_cache *c;
    KT_CHECK_EQ(open_cache(dir, STAMP, 0, &c), KILN_ENOENT);
    KT_CHECK_EQ(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY | KILN_CACHE_CREATE, &c), KILN_ENOENT);
    char rec[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    write_all(rec, "not a cache at all, just some words written here.......", 56);
    write_all(rec, "this is not a kiln records file: it holds other bytes than a cache header", 74);
    KT_CHECK_EQ(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c), KILN_EFORMAT);
    KT_CHECK_EQ(file_size(rec), 74); /* left untouched */
    /* An empty records file is a creation that never finished. */
    write_all(rec, "", 0);
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_NEW);
    kiln_cache_close(c);
    KT_CHECK_EQ(file_size(rec), KILN__CACHE_HEADER_SIZE);
}

KT_CASE(read_only_never_writes)
{
    const char *dir = kt_tmpdir();
    struct kiln_key keys[SMALL_N];
    uint64_t off[SMALL_N];
    make_cache(dir, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, off);
    char rec[4096], idx[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    /* A stale index (two entries short) and a torn tail (half the last record). */
    cut_file(idx, file_size(idx) - 2 * KILN__CACHE_ENTRY_SIZE);
    cut_file(rec, off[SMALL_N - 1] + 20);
    size_t rn, in;
    void *r0 = read_all(rec, &rn), *i0 = read_all(idx, &in);
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &c));
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_INDEX_TAIL);
    KT_CHECK_EQ(st.records, SMALL_N - 1);
    KT_CHECK(st.cut_bytes > 0);
    KT_CHECK_EQ(load_check(c, keys, SMALL_N - 1, 2, NULL), SMALL_N - 1);
    kiln_cache_close(c);
    /* Without the index at all, too. */
    KT_CHECK(unlink(idx) == 0);
    KT_REQUIRE_OK(open_cache(dir, 0, KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_REBUILT);
    KT_CHECK_EQ(kiln_cache_count(c), SMALL_N - 1);
    kiln_cache_close(c);
    KT_CHECK(access(idx, F_OK) != 0);
    size_t rn2;
    void *r1 = read_all(rec, &rn2);
    KT_CHECK(r0 && r1 && rn == rn2 && memcmp(r0, r1, rn) == 0);
    free(r0);
    free(r1);
    free(i0);
}

KT_CASE(check_and_repair)
{
    const char *dir = kt_tmpdir();
    struct kiln_key keys[SMALL_N];
    uint64_t off[SMALL_N];
    make_cache(dir, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, off);
    struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
    KT_CHECK(rep.whole);
    KT_CHECK_EQ(rep.records, SMALL_N);
    KT_CHECK_EQ(rep.index_state, KILN_CACHE_INDEX_OK);
    KT_CHECK_EQ(rep.stamp, STAMP);

    char rec[4096], idx[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    /* A torn tail and an index that is behind: a crash's remains. */
    cut_file(rec, off[SMALL_N - 1] + 10);
    cut_file(idx, file_size(idx) - 3 * KILN__CACHE_ENTRY_SIZE);
    KT_CHECK_EQ(kiln_cache_check(dir, NULL, false, &rep), KILN_ECORRUPT);
    KT_CHECK(!rep.whole);
    KT_CHECK_EQ(rep.index_state, KILN_CACHE_INDEX_BEHIND);
    KT_CHECK_EQ(rep.torn_tail_bytes, 10);
    KT_CHECK_EQ(rep.records, SMALL_N - 1);
    KT_CHECK_OK(kiln_cache_check(dir, NULL, true, &rep));
    KT_CHECK(rep.repaired);
    KT_CHECK_EQ(file_size(rec), off[SMALL_N - 1]);
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
    KT_CHECK(rep.whole);

    /* A damaged payload cannot be repaired, only left out of the index. */
    flip_bit(rec, off[4] + KILN__CACHE_HEAD_SIZE + 1, 0);
    KT_CHECK_EQ(kiln_cache_check(dir, NULL, true, &rep), KILN_ECORRUPT);
    KT_CHECK_EQ(rep.bad_records, 1);
    KT_CHECK(rep.repaired);
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kiln_cache_find(c, keys[4], NULL), KILN_ENOTFOUND);
    KT_CHECK_EQ(kiln_cache_count(c), SMALL_N - 2);
    /* While a writer holds the cache, a repair is refused; a check is not. */
    KT_CHECK_EQ(kiln_cache_check(dir, NULL, true, &rep), KILN_EBUSY);
    KT_CHECK_EQ(kiln_cache_check(dir, NULL, false, &rep), KILN_ECORRUPT);
    kiln_cache_close(c);
}

/* ---- repair, compact, merge and prune account for everything (issue 30) -- */

enum { RL_N = 40 };
static const size_t rl_sizes[] = {300, 1200, 77, 2048, 513};

enum rl_damage { RL_TAIL, RL_MIDDLE, RL_BOTH, RL_LAST, RL_FIRST, RL_HEAD, RL_KINDS };
static const char *const rl_names[RL_KINDS] = {
    "a torn tail",           "a flipped payload byte", "both",
    "a damaged last record", "a damaged first record", "a flipped head byte"};

/* Checks every record of keys[0..n) not marked lost loads byte for byte,
 * and every lost one is missing. */
static void expect_kept(const char *dir, const struct kiln_key *keys, size_t n, const bool *lost,
                        const char *what)
{
    struct kiln_cache *c;
    if (open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &c) < 0) {
        kt_fail(__FILE__, __LINE__, "%s: the cache does not open", what);
        return;
    }
    bool ok[RL_N];
    size_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += !lost[i];
    size_t good = load_check(c, keys, n, 2, ok);
    if (good != want)
        kt_fail(__FILE__, __LINE__, "%s: %zu of the %zu records whole before load back", what, good,
                want);
    for (size_t i = 0; i < n; i++)
        if (ok[i] == lost[i])
            kt_fail(__FILE__, __LINE__, "%s: record %zu %s", what, i,
                    lost[i] ? "was returned though damaged" : "was lost");
    kiln_cache_close(c);
}

/* A damage trial: a cache of RL_N records of rl_sizes made in `dir`, their
 * keys and offsets, its records file, and which records the damage lost. */
struct rl_trial {
    char dir[4096], rec[4096];
    struct kiln_key keys[RL_N];
    uint64_t off[RL_N];
    bool lost[RL_N];
};

/* Makes the trial's cache in folder `dir` (which must exist), nothing lost yet. */
static void rl_begin(struct rl_trial *t, const char *dir)
{
    snprintf(t->dir, sizeof(t->dir), "%s", dir);
    memset(t->lost, 0, sizeof(t->lost));
    make_cache(t->dir, RL_N, rl_sizes, KILN_ARRAY_LEN(rl_sizes), t->keys, t->off);
    path_of(t->rec, t->dir, KILN_CACHE_RECORDS_FILE);
}

/* Compacts the cache in `dir` (opened for writing, then closed).
 * @return kiln_cache_compact's, or the open's error (*r zero). */
static int compact_dir(const char *dir, struct kiln_cache_rewrite_report *r)
{
    memset(r, 0, sizeof(*r));
    r->size = sizeof(*r);
    struct kiln_cache *c;
    int rc = open_cache(dir, STAMP, 0, &c);
    if (rc < 0)
        return rc;
    rc = kiln_cache_compact(c, r);
    kiln_cache_close(c);
    return rc;
}

static void repair_loop_verify(const char *dir, const struct kiln_key *keys, const bool *lost,
                               const char *what, int want_rc);

/* Damages a fresh cache one way; then check --repair, check, and (when it
 * names it) compact must agree and end whole with every other record. */
static void repair_loop_one(enum rl_damage kind)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/k%d", kt_tmpdir(), (int)kind);
    KT_REQUIRE(kt_mkdir(dir) == 0);
    struct rl_trial t;
    rl_begin(&t, dir);
    const char *rec = t.rec;
    uint64_t *off = t.off;
    bool *lost = t.lost;
    const size_t mid = RL_N / 2, last = RL_N - 1, headed = 7;
    if (kind == RL_MIDDLE || kind == RL_BOTH)
        flip_bit(rec, off[mid] + KILN__CACHE_HEAD_SIZE + 5, 3), lost[mid] = true;
    if (kind == RL_TAIL || kind == RL_BOTH)
        cut_file(rec, off[last] + KILN__CACHE_HEAD_SIZE + 10), lost[last] = true;
    if (kind == RL_LAST)
        flip_bit(rec, off[last] + KILN__CACHE_HEAD_SIZE + 1, 0), lost[last] = true;
    if (kind == RL_FIRST)
        flip_bit(rec, off[0] + KILN__CACHE_HEAD_SIZE + 2, 6), lost[0] = true;
    if (kind == RL_HEAD)
        flip_bit(rec, off[headed] + 10, 0), lost[headed] = true; /* in the key */
    /* A torn tail (whatever tore it) is cut; a damaged record elsewhere
     * stays as dead bytes until a compaction. */
    bool dead = kind == RL_MIDDLE || kind == RL_BOTH || kind == RL_FIRST || kind == RL_HEAD;
    repair_loop_verify(dir, t.keys, lost, rl_names[kind], dead ? KILN_ECORRUPT : KILN_OK);
}

/* check --repair, check, a second repair and (when named) compact, then
 * every record not lost loads byte for byte. want_rc: the repair's verdict
 * (1: either). */
static void repair_loop_verify(const char *dir, const struct kiln_key *keys, const bool *lost,
                               const char *what, int want_rc)
{
    char idx[4096];
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    struct kiln_cache_check_report fix = KILN_CACHE_CHECK_REPORT_INIT;
    struct kiln_cache_check_report again = KILN_CACHE_CHECK_REPORT_INIT;
    struct kiln_cache_check_report after = KILN_CACHE_CHECK_REPORT_INIT;
    int rf = kiln_cache_check(dir, NULL, true, &fix);
    KT_REQUIRE(rf == KILN_OK || rf == KILN_ECORRUPT);
    KT_CHECK(fix.whole || fix.repaired);
    int rc = kiln_cache_check(dir, NULL, false, &after);
    /* The repair's verdict is the next check's, and names the same step. */
    KT_CHECK_EQ(rc, rf);
    KT_CHECK_EQ(after.next, fix.next);
    KT_CHECK_EQ(after.index_state, KILN_CACHE_INDEX_OK);
    KT_CHECK_EQ(after.damaged_indexed, 0);
    KT_CHECK_EQ(after.damaged_left_out, after.bad_records);
    KT_CHECK_EQ(after.torn_tail_bytes, 0);
    /* The repair's counts are what it left: what the check now finds. */
    KT_CHECK_EQ(after.records, fix.records);
    KT_CHECK_EQ(after.bad_records, fix.bad_records);
    KT_CHECK_EQ(after.damaged_bytes, fix.damaged_bytes);
    if (want_rc != 1 && rc != want_rc)
        kt_fail(__FILE__, __LINE__, "%s: the repair's verdict is %s", what, kiln_errname(rc));
    if (rc == KILN_OK) {
        KT_CHECK(after.whole);
        KT_CHECK_EQ(after.next, KILN_CACHE_NEXT_NONE);
    } else {
        /* Only the damaged bytes remain, which a compaction drops. */
        KT_CHECK(!after.whole);
        KT_CHECK_EQ(after.next, KILN_CACHE_NEXT_COMPACT);
        KT_CHECK(after.bad_records + after.damaged_bytes > 0);
        /* A second repair changes nothing and says the same. */
        size_t n0, n1;
        void *i0 = read_all(idx, &n0);
        KT_CHECK_EQ(kiln_cache_check(dir, NULL, true, &again), rc);
        KT_CHECK(!again.repaired);
        KT_CHECK_EQ(again.next, KILN_CACHE_NEXT_COMPACT);
        void *i1 = read_all(idx, &n1);
        KT_CHECK(i0 && i1 && n0 == n1 && memcmp(i0, i1, n0) == 0);
        free(i0);
        free(i1);
        struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
        KT_REQUIRE_OK(compact_dir(dir, &r));
        KT_CHECK(r.rewritten);
        /* Every damaged byte the check saw is left out and counted. A
         * damaged record whose next head is damaged too is damaged bytes to
         * the check's scan (it may be a torn write) but a record head to
         * the compaction, so records may count more, never fewer. */
        KT_CHECK(r.damaged >= after.bad_records);
        KT_CHECK_EQ(r.damaged_bytes, after.bad_record_bytes + after.damaged_bytes);
        KT_CHECK_EQ(r.records_read, r.records_after + r.dropped + r.superseded + r.damaged);
        KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &after));
        KT_CHECK(after.whole);
        KT_CHECK_EQ(after.next, KILN_CACHE_NEXT_NONE);
    }
    expect_kept(dir, keys, RL_N, lost, what);
}

KT_CASE(repair_check_loop)
{
    for (int k = 0; k < RL_KINDS; k++)
        repair_loop_one((enum rl_damage)k);
}

/* Random damage, 1 to 3 events a trial: a flipped bit in a random record's
 * head or payload, or the file cut inside one of its last two records. */
KT_CASE(repair_check_random)
{
    const char *e = getenv("KILN_RELIABILITY_LONG");
    unsigned trials = e && *e && *e != '0' ? 2000 : 40;
    uint64_t rng = 0x7265706169720001ull;
    for (unsigned t = 0; t < trials; t++) {
        char dir[4096], what[64];
        snprintf(dir, sizeof(dir), "%s/t%u", kt_tmpdir(), t);
        KT_REQUIRE(kt_mkdir(dir) == 0);
        struct rl_trial tr;
        rl_begin(&tr, dir);
        const char *rec = tr.rec;
        uint64_t *off = tr.off;
        bool *lost = tr.lost;
        unsigned events = 1 + (unsigned)(kt_rand(&rng) % 3);
        uint64_t end = file_size(rec);
        for (unsigned k = 0; k < events; k++) {
            size_t i = (size_t)(kt_rand(&rng) % RL_N);
            uint64_t len = KILN__CACHE_HEAD_SIZE + rl_sizes[i % KILN_ARRAY_LEN(rl_sizes)];
            if (kt_rand(&rng) % 4 == 0) {
                i = RL_N - 1 - (size_t)(kt_rand(&rng) % 2);
                len = KILN__CACHE_HEAD_SIZE + rl_sizes[i % KILN_ARRAY_LEN(rl_sizes)];
                uint64_t at = off[i] + 1 + kt_rand(&rng) % (len - 1);
                if (at < end) {
                    cut_file(rec, at);
                    end = at;
                    for (size_t j = i; j < RL_N; j++)
                        lost[j] = true;
                }
            } else {
                uint64_t at = off[i] + kt_rand(&rng) % len;
                unsigned bit = (unsigned)(kt_rand(&rng) % 8);
                if (at < end) {
                    flip_bit(rec, at, bit);
                    lost[i] = true;
                }
            }
        }
        snprintf(what, sizeof(what), "trial %u", t);
        repair_loop_verify(dir, tr.keys, lost, what, 1);
    }
}

/* What a progress callback saw. */
struct progress_seen {
    char what[16];
    uint64_t calls, last_done, last_total;
    bool backwards, total_changed;
};

static void on_cache_progress(void *user, const char *what, uint64_t done, uint64_t total)
{
    struct progress_seen *p = user;
    if (p->calls && (done < p->last_done))
        p->backwards = true;
    if (p->calls && total != p->last_total)
        p->total_changed = true;
    snprintf(p->what, sizeof(p->what), "%s", what);
    p->calls++;
    p->last_done = done;
    p->last_total = total;
}

/* kiln_cache_set_progress: a compact of 300 live records (and 300
 * superseded ones) reports "compact", never backwards, one total, and ends
 * at done == total == 300; a merge into a new cache reports "merge" and
 * ends at its 300 records; with the callback cleared nothing is called. */
KT_CASE(progress_reported)
{
    char dir[4096], out[4200];
    const char *tmp = kt_tmpdir(); /* one folder: a second call removes the first */
    snprintf(dir, sizeof(dir), "%s/c", tmp);
    snprintf(out, sizeof(out), "%s/m", tmp);
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c));
    for (int round = 0; round < 2; round++)
        for (uint64_t i = 0; i < 300; i++)
            KT_REQUIRE_OK(put_rec(c, key_of(i), 64 + (size_t)i));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    struct progress_seen p = {0};
    kiln_cache_set_progress(c, on_cache_progress, &p);
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_REQUIRE_OK(kiln_cache_compact(c, &r));
    KT_CHECK(r.rewritten);
    KT_CHECK(p.calls >= 1);
    KT_CHECK(strcmp(p.what, "compact") == 0);
    KT_CHECK(!p.backwards && !p.total_changed);
    KT_CHECK_EQ(p.last_done, 300);
    KT_CHECK_EQ(p.last_total, 300);
    kiln_cache_set_progress(c, NULL, NULL);
    p.calls = 0;
    KT_REQUIRE_OK(put_rec(c, key_of(1), 99));
    KT_REQUIRE_OK(kiln_cache_compact(c, &r));
    KT_CHECK_EQ(p.calls, 0);
    kiln_cache_close(c);

    struct kiln_cache *m;
    KT_REQUIRE_OK(open_cache(out, STAMP, KILN_CACHE_CREATE, &m));
    struct progress_seen q = {0};
    kiln_cache_set_progress(m, on_cache_progress, &q);
    const char *in[] = {dir};
    struct kiln_cache_merge_report mr = KILN_CACHE_MERGE_REPORT_INIT;
    KT_REQUIRE_OK(kiln_cache_merge(m, in, 1, &mr));
    KT_CHECK(strcmp(q.what, "merge") == 0);
    KT_CHECK(!q.backwards);
    KT_CHECK_EQ(q.last_done, 300);
    KT_CHECK_EQ(q.last_total, 300);
    kiln_cache_close(m);
}

KT_CASE(compact_accounts)
{
    struct rl_trial t;
    rl_begin(&t, kt_tmpdir());
    const char *dir = t.dir, *rec = t.rec;
    struct kiln_key *keys = t.keys;
    bool *lost = t.lost;
    /* A damaged record the index names, in a file with no dead bytes: the
     * compaction must still drop it (the check names compaction for it). */
    flip_bit(rec, t.off[5] + KILN__CACHE_HEAD_SIZE + 3, 1), lost[5] = true;
    struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
    KT_CHECK_EQ(kiln_cache_check(dir, NULL, false, &rep), KILN_ECORRUPT);
    KT_CHECK_EQ(rep.damaged_indexed, 1);
    KT_CHECK_EQ(rep.next, KILN_CACHE_NEXT_COMPACT);
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_REQUIRE_OK(compact_dir(dir, &r));
    struct kiln_cache *c;
    KT_CHECK(r.rewritten);
    KT_CHECK_EQ(r.damaged, 1);
    KT_CHECK_EQ(r.damaged_bytes, kiln__cache_rec_len((uint32_t)rl_sizes[5 % 5]));
    KT_CHECK_EQ(r.records_read, RL_N);
    KT_CHECK_EQ(r.records_after, RL_N - 1);
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));

    /* Now a superseded record, one damaged record a repair left out of the
     * index and one the index names: all counted, and they sum to read. */
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_REQUIRE_OK(put_rec(c, keys[3], 91));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    struct kiln_cache_entry e10, e20;
    KT_REQUIRE_OK(kiln_cache_find(c, keys[10], &e10));
    KT_REQUIRE_OK(kiln_cache_find(c, keys[20], &e20));
    kiln_cache_close(c);
    flip_bit(rec, e10.offset + KILN__CACHE_HEAD_SIZE + 7, 2), lost[10] = true;
    KT_CHECK_EQ(kiln_cache_check(dir, NULL, true, &rep), KILN_ECORRUPT);
    flip_bit(rec, e20.offset + KILN__CACHE_HEAD_SIZE + 7, 2), lost[20] = true;
    KT_CHECK_EQ(kiln_cache_check(dir, NULL, false, &rep), KILN_ECORRUPT);
    KT_CHECK_EQ(rep.damaged_left_out, 1);
    KT_CHECK_EQ(rep.damaged_indexed, 1);
    KT_REQUIRE_OK(compact_dir(dir, &r));
    KT_CHECK_EQ(r.superseded, 1);
    KT_CHECK_EQ(r.damaged, 2);
    KT_CHECK_EQ(r.damaged_bytes, kiln__cache_rec_len(e10.size) + kiln__cache_rec_len(e20.size));
    /* The RL_N - 1 records the first compaction kept and keys[3]'s second
     * record: 38 live, one superseded, one out of the index. */
    KT_CHECK_EQ(r.records_read, RL_N);
    KT_CHECK_EQ(r.records_after, RL_N - 3);
    KT_CHECK_EQ(r.records_read, r.records_after + r.dropped + r.superseded + r.damaged);
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
    KT_CHECK(rep.whole);
    /* keys[3] now holds its second record (91 bytes): load_check checks it. */
    expect_kept(dir, keys, RL_N, lost, "compact");
}

KT_CASE(merge_accounts)
{
    const char *tmp = kt_tmpdir();
    char a[4096], b[4096], out[4096], rec[4096];
    path_of(a, tmp, "a");
    path_of(b, tmp, "b");
    path_of(out, tmp, "out");
    KT_REQUIRE(kt_mkdir(a) == 0 && kt_mkdir(b) == 0 && kt_mkdir(out) == 0);
    /* a: keys 0..19, key 5 damaged; b: keys 10..29 (newer than a's);
     * out: keys 25..27 as b has them, 28 and 29 of another size. */
    struct kiln_cache *c;
    struct kiln_cache_entry e5;
    KT_REQUIRE_OK(open_cache(a, STAMP, KILN_CACHE_CREATE, &c));
    for (uint64_t i = 0; i < 20; i++)
        KT_REQUIRE_OK(put_rec(c, key_of(i), 100 + i));
    KT_REQUIRE_OK(kiln_cache_find(c, key_of(5), &e5));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    path_of(rec, a, KILN_CACHE_RECORDS_FILE);
    flip_bit(rec, e5.offset + KILN__CACHE_HEAD_SIZE + 9, 4);
    KT_REQUIRE_OK(open_cache(b, STAMP, KILN_CACHE_CREATE, &c));
    for (uint64_t i = 10; i < 30; i++)
        KT_REQUIRE_OK(put_rec(c, key_of(i), 100 + i));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    KT_REQUIRE_OK(open_cache(out, STAMP, KILN_CACHE_CREATE, &c));
    for (uint64_t i = 25; i < 30; i++)
        KT_REQUIRE_OK(put_rec(c, key_of(i), i < 28 ? 100 + i : 7));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    const char *ins[] = {a, b};
    struct kiln_cache_merge_report r = KILN_CACHE_MERGE_REPORT_INIT;
    KT_REQUIRE_OK(kiln_cache_merge(c, ins, 2, &r));
    kiln_cache_close(c);
    KT_CHECK_EQ(r.records_read, 40);
    KT_CHECK_EQ(r.superseded, 10); /* a's 10..19: b's win */
    KT_CHECK_EQ(r.same, 3);        /* 25..27 */
    KT_CHECK_EQ(r.damaged, 1);     /* a's 5 */
    KT_CHECK_EQ(r.added, 26);      /* 0..9 but 5, 10..24, 28, 29 */
    KT_CHECK_EQ(r.replaced, 2);    /* 28, 29 */
    KT_CHECK_EQ(r.records_read, r.added + r.superseded + r.same + r.damaged);
    KT_CHECK_EQ(r.records_after, 29);
    struct kiln_key keys[30];
    bool lost[30] = {false};
    for (uint64_t i = 0; i < 30; i++)
        keys[i] = key_of(i);
    lost[5] = true;
    expect_kept(out, keys, 30, lost, "merge");
}

struct file_snap {
    void *data;
    size_t n;
    bool there;
};

/* Reads the cache's files, after setting their times to a fixed past
 * moment, so that a write of the same bytes would show too. */
static void snap_files(const char *dir, struct file_snap *s, bool set_times)
{
    static const char *const names[] = {KILN_CACHE_RECORDS_FILE, KILN_CACHE_INDEX_FILE,
                                        KILN_CACHE_USE_FILE};
    for (size_t i = 0; i < 3; i++) {
        char p[4096];
        path_of(p, dir, names[i]);
        if (set_times) {
            struct utimbuf t = {.actime = 1000000000, .modtime = 1000000000};
            KT_CHECK(utime(p, &t) == 0);
        }
        struct stat st;
        s[i].there = stat(p, &st) == 0 && st.st_mtime == 1000000000;
        s[i].data = read_all(p, &s[i].n);
    }
}

KT_CASE(prune_plan)
{
    const char *dir = kt_tmpdir();
    struct kiln_cache_options o = {
        .size = sizeof(o), .stamp = STAMP, .flags = KILN_CACHE_CREATE, .today = 1000};
    struct kiln_cache *c;
    enum { N = 30 };
    struct kiln_key keys[N];
    /* 0..9 last used on day 1000, 10..29 on day 1010. */
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    for (uint64_t i = 0; i < 10; i++)
        KT_REQUIRE_OK(put_rec(c, keys[i] = key_of(i), 200 + 10 * i));
    kiln_cache_close(c);
    o.today = 1010;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    for (uint64_t i = 10; i < N; i++)
        KT_REQUIRE_OK(put_rec(c, keys[i] = key_of(i), 200 + 10 * i));
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    uint64_t file = st.file_bytes;
    kiln_cache_close(c);

    /* Older than 15 days on day 1020: 0..9; then the least recently used
     * of the rest until the file is a quarter smaller. */
    struct kiln_cache_prune_options po = {
        .size = sizeof(po), .older_than_days = 15, .max_file_bytes = file * 3 / 4};
    struct file_snap before[3], after[3];
    snap_files(dir, before, true);
    o.today = 1020;
    o.flags = KILN_CACHE_READ_ONLY;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    struct kiln_cache_prune_plan plan = KILN_CACHE_PRUNE_PLAN_INIT;
    KT_REQUIRE_OK(kiln_cache_plan_prune(c, &po, &plan));
    kiln_cache_close(c);
    snap_files(dir, after, false);
    for (size_t i = 0; i < 3; i++) {
        KT_CHECK(before[i].there && after[i].there); /* same bytes and time */
        KT_CHECK(before[i].data && after[i].data && before[i].n == after[i].n &&
                 memcmp(before[i].data, after[i].data, before[i].n) == 0);
        free(before[i].data);
        free(after[i].data);
    }
    KT_CHECK_EQ(plan.today, 1020);
    KT_CHECK_EQ(plan.cutoff, 1005);
    KT_REQUIRE(plan.count > 10);
    uint64_t bytes = 0;
    bool planned[N] = {false};
    for (size_t i = 0; i < plan.count; i++) {
        const struct kiln_cache_prune_item *it = &plan.items[i];
        size_t k = 0;
        while (k < N && !kiln_key_equal(keys[k], it->key))
            k++;
        KT_REQUIRE(k < N);
        planned[k] = true;
        KT_CHECK_EQ(it->reason, k < 10 ? KILN_CACHE_PRUNE_OLD : KILN_CACHE_PRUNE_SIZE);
        KT_CHECK_EQ(it->last_use, k < 10 ? 1000u : 1010u);
        KT_CHECK_EQ(it->size, 200 + 10 * k);
        bytes += it->record_bytes;
    }
    for (size_t k = 0; k < 10; k++)
        KT_CHECK(planned[k]);
    KT_CHECK_EQ(plan.dropped_bytes, bytes);
    KT_CHECK(plan.file_bytes_after <= po.max_file_bytes);
    KT_CHECK_EQ(plan.file_bytes_after, plan.file_bytes_before - bytes);

    /* The real prune drops exactly those. */
    o.flags = 0;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_REQUIRE_OK(kiln_cache_prune(c, &po, &r));
    KT_CHECK_EQ(r.dropped, plan.count);
    KT_CHECK_EQ(r.file_bytes_after, plan.file_bytes_after);
    KT_CHECK_EQ(r.records_after, plan.records_after);
    KT_CHECK_EQ(r.records_read, r.records_after + r.dropped + r.superseded + r.damaged);
    for (size_t k = 0; k < N; k++)
        KT_CHECK_EQ(kiln_cache_find(c, keys[k], NULL), planned[k] ? KILN_ENOTFOUND : KILN_OK);
    kiln_cache_close(c);
    kiln_cache_prune_plan_free(&plan);
    kiln_cache_prune_plan_free(NULL);
}

KT_CASE(write_faults)
{
    const char *dir = kt_tmpdir();
    struct faultio f;
    faultio_init(&f);
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .stamp = STAMP, .flags = KILN_CACHE_CREATE, .io = &f.io};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(dir, &opt, &c));
    struct kiln_key keys[6];
    for (int i = 0; i < 6; i++)
        keys[i] = key_of((uint64_t)i);
    KT_CHECK_OK(put_rec(c, keys[0], 100));
    /* A full disk in the middle of a record: the put fails, nothing is
     * left of it, and the cache goes on. */
    f.rec_write_fail = KILN_ENOSPC;
    f.rec_write_short = true;
    KT_CHECK_EQ(put_rec(c, keys[1], 5000), KILN_ENOSPC);
    KT_CHECK_EQ(kiln_cache_find(c, keys[1], NULL), KILN_ENOTFOUND);
    KT_CHECK_OK(put_rec(c, keys[2], 200));
    /* The index cannot be written: records are still stored; the sync
     * rewrites the index whole. */
    f.idx_write_fail = KILN_EIO_WRITE;
    KT_CHECK_OK(put_rec(c, keys[3], 300));
    f.idx_write_fail = 0;
    KT_CHECK_OK(put_rec(c, keys[4], 0));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    opt.flags = 0;
    KT_REQUIRE_OK(kiln_cache_open(dir, &opt, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    struct kiln_key want[4] = {keys[0], keys[2], keys[3], keys[4]};
    KT_CHECK_EQ(load_check(c, want, 4, 1, NULL), 4);
    /* A failed records sync: the handle refuses more work; a reopen keeps
     * everything synced before. */
    KT_CHECK_OK(put_rec(c, keys[5], 10));
    f.rec_fsync_fail = KILN_EIO_SYNC;
    KT_CHECK_EQ(kiln_cache_sync(c), KILN_EIO_SYNC);
    KT_CHECK_EQ(put_rec(c, key_of(77), 10), KILN_EIO_SYNC);
    KT_CHECK_EQ(kiln_cache_sync(c), KILN_EIO_SYNC);
    kiln_cache_close(c);
    /* A rename that fails while the index is rewritten at open: the open
     * still works from the records, and the next one repairs the index. */
    char idx[4096];
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    unlink(idx);
    f.rename_fail = KILN_EIO_RENAME;
    KT_REQUIRE_OK(kiln_cache_open(dir, &opt, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_REBUILT);
    KT_CHECK_EQ(load_check(c, want, 4, 1, NULL), 4);
    KT_CHECK_OK(put_rec(c, key_of(78), 10));
    KT_CHECK_EQ(kiln_cache_sync(c), KILN_EIO_RENAME);
    kiln_cache_close(c);
    f.rename_fail = 0;
    KT_REQUIRE_OK(kiln_cache_open(dir, &opt, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_REBUILT);
    KT_CHECK_EQ(load_check(c, want, 4, 1, NULL), 4);
    struct kiln_key k78 = key_of(78);
    KT_CHECK_EQ(load_check(c, &k78, 1, 1, NULL), 1);
    kiln_cache_close(c);
}

KT_CASE(crash_keeps_synced)
{
    /* A crash keeps what was synced and any part of what was not: the
     * unsynced tails of both files are cut at many points (the index may
     * even keep more than the records), or zeroed. */
    const char *dir = kt_tmpdir();
    enum { SYNCED = 6, MORE = 5 };
    struct kiln_key keys[SYNCED + MORE];
    static const size_t sizes[] = {30, 0, 12};
    make_cache(dir, SYNCED, sizes, 3, keys, NULL);
    char rec[4096], idx[4096], srec[4096], sidx[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    path_of(srec, dir, "saved.kpc");
    path_of(sidx, dir, "saved.kpx");
    uint64_t rec_synced = file_size(rec), idx_synced = file_size(idx);
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    for (size_t i = SYNCED; i < SYNCED + MORE; i++) {
        keys[i] = key_of(i);
        KT_CHECK_OK(put_rec(c, keys[i], sizes[i % 3]));
    }
    kiln_cache_close(c); /* no sync */
    copy_file(rec, srec);
    copy_file(idx, sidx);
    uint64_t rec_full = file_size(rec), idx_full = file_size(idx);
    uint64_t rng = 7;
    for (int round = 0; round < 60; round++) {
        copy_file(srec, rec);
        copy_file(sidx, idx);
        uint64_t rk = rec_synced + kt_rand(&rng) % (rec_full - rec_synced + 1);
        uint64_t ik = idx_synced + kt_rand(&rng) % (idx_full - idx_synced + 1);
        if (round % 3 == 2) {
            /* The sizes grew but the data never reached the disk. */
            size_t zn = (size_t)(rec_full - rk);
            void *z = calloc(1, zn ? zn : 1);
            patch_file(rec, rk, z, zn);
            free(z);
        } else {
            cut_file(rec, rk);
        }
        cut_file(idx, ik);
        KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
        bool ok[SYNCED + MORE];
        load_check(c, keys, SYNCED + MORE, 1, ok);
        for (size_t i = 0; i < SYNCED; i++)
            KT_CHECK(ok[i]);
        KT_CHECK_OK(put_rec(c, key_of(900), 20));
        KT_CHECK_OK(kiln_cache_sync(c));
        kiln_cache_close(c);
        struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
        KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
        KT_CHECK(rep.whole);
    }
}

/* ---- hostile files (issue 17, point 2) ------------------------------------ */

#ifndef _WIN32
/* @return whether `path` is a regular file itself (not a link to one). */
static bool is_plain_file(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}
#endif

KT_CASE(planted_links)
{
#ifdef _WIN32
    puts("skipped: symbolic links need privileges on Windows");
#else
    /* Links planted at every temporary name the cache writes: followed, they
     * would overwrite the victim with cache bytes. */
    const char *top = kt_tmpdir();
    char dir[4096], victim[4096], p[4096];
    path_of(dir, top, "cache");
    path_of(victim, top, "victim");
    static const char words[] = "the victim's own bytes";
    write_all(victim, words, sizeof(words));
    static const char *const temps[] = {"programs.kpc.new", "programs.kpx.tmp", "programs.kpu.tmp"};
    for (size_t i = 0; i < KILN_ARRAY_LEN(temps); i++) {
        KT_REQUIRE(kt_mkdir(dir) == 0 || access(dir, F_OK) == 0);
        path_of(p, dir, temps[i]);
        KT_REQUIRE(symlink(victim, p) == 0);
    }
    /* The first creation, with a link at programs.kpc.new. */
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c));
    for (uint64_t i = 0; i < 20; i++)
        KT_CHECK_OK(put_rec(c, key_of(i % 10), 100 + i)); /* superseded ones too */
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    /* The index rewritten whole (through programs.kpx.tmp), then a compaction
     * (through programs.kpc.new), with links planted again. */
    for (size_t i = 0; i < KILN_ARRAY_LEN(temps); i++) {
        path_of(p, dir, temps[i]);
        unlink(p);
        KT_REQUIRE(symlink(victim, p) == 0);
    }
    path_of(p, dir, KILN_CACHE_INDEX_FILE);
    unlink(p);
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_REBUILT);
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_compact(c, &r));
    KT_CHECK(r.rewritten);
    kiln_cache_close(c);
    /* A reset, with a link at programs.kpc.new again. */
    path_of(p, dir, "programs.kpc.new");
    KT_REQUIRE(symlink(victim, p) == 0);
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_RESET, &c));
    KT_CHECK_OK(put_rec(c, key_of(1), 10));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);

    size_t n;
    char *got = read_all(victim, &n);
    KT_CHECK(n == sizeof(words) && memcmp(got, words, n) == 0);
    free(got);
    static const char *const files[] = {KILN_CACHE_RECORDS_FILE, KILN_CACHE_INDEX_FILE,
                                        KILN_CACHE_USE_FILE};
    for (size_t i = 0; i < KILN_ARRAY_LEN(files); i++) {
        path_of(p, dir, files[i]);
        KT_CHECK(is_plain_file(p));
    }
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(kiln_cache_count(c), 1);
    kiln_cache_close(c);

    /* A cache file that is itself a link: the records are refused, an index
     * or last-use link is replaced, never written through. */
    char rec[4096], moved[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    path_of(moved, top, "elsewhere.kpc");
    KT_REQUIRE(rename(rec, moved) == 0);
    KT_REQUIRE(symlink(moved, rec) == 0);
    KT_CHECK_EQ(open_cache(dir, STAMP, 0, &c), KILN_EFORMAT);
    KT_CHECK_EQ(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &c), KILN_EFORMAT);
    KT_CHECK_EQ(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c), KILN_EFORMAT);
    unlink(rec);
    KT_REQUIRE(rename(moved, rec) == 0);
    path_of(p, dir, KILN_CACHE_INDEX_FILE);
    unlink(p);
    KT_REQUIRE(symlink(victim, p) == 0);
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_REBUILT);
    KT_CHECK_EQ(kiln_cache_count(c), 1);
    kiln_cache_close(c);
    KT_CHECK(is_plain_file(p));
    got = read_all(victim, &n);
    KT_CHECK(n == sizeof(words) && memcmp(got, words, n) == 0);
    free(got);
#endif
}

/* kiln_cache_check_output (issue 29, point 6): a path to write that is a
 * file of the cache by any spelling, or any name in its folder or in
 * another cache's folder, is refused; a path elsewhere is clear. */
KT_CASE(output_guard)
{
    const char *top = kt_tmpdir();
    char dir[4096], other[4096], p[4096], q[4096];
    path_of(dir, top, "cache");
    path_of(other, top, "other");
    struct kiln_cache *c, *o;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c));
    KT_CHECK_OK(put_rec(c, key_of(1), 100));
    KT_CHECK_OK(kiln_cache_sync(c));
    KT_CHECK_OK(kiln_cache_save_use(c));
    KT_REQUIRE_OK(open_cache(other, STAMP, KILN_CACHE_CREATE, &o));
    static const char *const files[] = {KILN_CACHE_RECORDS_FILE, KILN_CACHE_INDEX_FILE,
                                        KILN_CACHE_USE_FILE, "ledger.kpl", "not-yet-there"};
    path_of(p, dir, "ledger.kpl");
    write_all(p, "x", 1); /* any file of the folder counts */
    for (size_t i = 0; i < KILN_ARRAY_LEN(files); i++) {
        path_of(p, dir, files[i]);
        KT_CHECK_EQ(kiln_cache_check_output(c, p), KILN_ECACHE_FILE);
        KT_CHECK_EQ(kiln_cache_check_output(NULL, p), KILN_ECACHE_FILE);
        char up[4096];
        path_of(up, top, "cache/../cache/.");
        path_of(q, up, files[i]);
        KT_CHECK_EQ(kiln_cache_check_output(c, q), KILN_ECACHE_FILE);
        /* Into the other cache's folder: another process may hold it. */
        path_of(q, other, files[i]);
        KT_CHECK_EQ(kiln_cache_check_output(c, q), KILN_ECACHE_FILE);
    }
    path_of(p, top, "out.foz");
    KT_CHECK_OK(kiln_cache_check_output(c, p));
    KT_CHECK_OK(kiln_cache_check_output(NULL, p));
    write_all(p, "old archive", 11);
    KT_CHECK_OK(kiln_cache_check_output(c, p)); /* a file of no cache may be replaced */
    path_of(p, top, "missing/out.foz");
    KT_CHECK_OK(kiln_cache_check_output(c, p));
#ifndef _WIN32
    /* Links from outside the folder to each of its files. */
    static const char *const linked[] = {KILN_CACHE_RECORDS_FILE, KILN_CACHE_INDEX_FILE,
                                         KILN_CACHE_USE_FILE, "ledger.kpl"};
    for (size_t i = 0; i < KILN_ARRAY_LEN(linked); i++) {
        char sym[4096], hard[4096], name[64];
        path_of(p, dir, linked[i]);
        snprintf(name, sizeof(name), "sym-%zu.foz", i);
        path_of(sym, top, name);
        snprintf(name, sizeof(name), "hard-%zu.foz", i);
        path_of(hard, top, name);
        KT_REQUIRE(symlink(p, sym) == 0);
        KT_REQUIRE(link(p, hard) == 0);
        KT_CHECK_EQ(kiln_cache_check_output(c, sym), KILN_ECACHE_FILE);
        KT_CHECK_EQ(kiln_cache_check_output(c, hard), KILN_ECACHE_FILE);
    }
    /* A folder reached through a link. */
    path_of(q, top, "via");
    KT_REQUIRE(symlink(dir, q) == 0);
    path_of(p, q, "new.foz");
    KT_CHECK_EQ(kiln_cache_check_output(c, p), KILN_ECACHE_FILE);
#endif
    kiln_cache_close(o);
    kiln_cache_close(c);
    KT_CHECK_EQ(kiln_cache_check_output(NULL, ""), KILN_EINVAL);
}

/* A records file renamed over under a writer (an archive exported over
 * programs.kpc by a kiln that did not check, issue 29 point 6): the next
 * sync fails, and every later one, instead of succeeding into a file no
 * longer in the folder. */
KT_CASE(replaced_under_writer)
{
#ifdef _WIN32
    puts("skipped: Windows does not rename over a file a writer holds open");
#else
    const char *top = kt_tmpdir();
    char dir[4096], rec[4096], other[4096];
    path_of(dir, top, "cache");
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    path_of(other, top, "archive.foz");
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c));
    KT_CHECK_OK(put_rec(c, key_of(1), 100));
    KT_CHECK_OK(kiln_cache_sync(c));
    write_all(other, "not the records", 15);
    KT_REQUIRE(rename(other, rec) == 0);
    KT_CHECK_OK(put_rec(c, key_of(2), 100));
    KT_CHECK_EQ(kiln_cache_sync(c), KILN_EIO_SYNC);
    KT_CHECK_EQ(kiln_cache_sync(c), KILN_EIO_SYNC);
    kiln_cache_close(c);
#endif
}

KT_CASE(special_files)
{
#ifdef _WIN32
    puts("skipped: no FIFOs on Windows");
#else
    /* A FIFO or a folder in a cache file's place: refused (records) or
     * replaced (index), never waited on. */
    const char *dir = kt_tmpdir();
    struct kiln_key keys[SMALL_N];
    make_cache(dir, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, NULL);
    char rec[4096], idx[4096], saved[4096];
    path_of(rec, dir, KILN_CACHE_RECORDS_FILE);
    path_of(idx, dir, KILN_CACHE_INDEX_FILE);
    path_of(saved, dir, "saved.kpc");
    KT_REQUIRE(rename(rec, saved) == 0);
    struct kiln_cache *c;
    struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
    for (int kind = 0; kind < 2; kind++) {
        if (kind == 0)
            KT_REQUIRE(mkfifo(rec, 0644) == 0);
        else
            KT_REQUIRE(kt_mkdir(rec) == 0);
        KT_CHECK_EQ(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &c), KILN_EFORMAT);
        KT_CHECK_EQ(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c), KILN_EFORMAT);
        KT_CHECK_EQ(kiln_cache_check(dir, NULL, false, &rep), KILN_EFORMAT);
        KT_CHECK_EQ(kiln_cache_check(dir, NULL, true, &rep), KILN_EFORMAT);
        if (kind == 0)
            unlink(rec);
        else
            rmdir(rec);
    }
    KT_REQUIRE(rename(saved, rec) == 0);
    /* A FIFO as the index or the last-use file. */
    char kpu[4096];
    path_of(kpu, dir, KILN_CACHE_USE_FILE);
    unlink(idx);
    unlink(kpu);
    KT_REQUIRE(mkfifo(idx, 0644) == 0);
    KT_REQUIRE(mkfifo(kpu, 0644) == 0);
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &c));
    KT_CHECK_EQ(kiln_cache_count(c), SMALL_N);
    kiln_cache_close(c);
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_REBUILT);
    KT_CHECK_EQ(load_check(c, keys, SMALL_N, 1, NULL), SMALL_N);
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    KT_CHECK(is_plain_file(idx));
    KT_CHECK(is_plain_file(kpu));
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
    KT_CHECK(rep.whole);
#endif
}

KT_CASE(reader_across_rewrite)
{
    /* A read-only handle (a warm start) opened before another handle - in
     * real use another process - compacts or prunes the cache goes on
     * loading every record it opened with (issue 17, point 4). */
    const char *dir = kt_tmpdir();
    enum { N = 100 };
    struct kiln_key keys[N];
    static const size_t sizes[] = {300, 0, 5000, 17};
    make_cache(dir, N, sizes, KILN_ARRAY_LEN(sizes), keys, NULL);
    struct kiln_cache *w, *r;
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &w));
    for (size_t i = 0; i < N; i += 2) /* superseded records: compaction has work */
        KT_CHECK_OK(put_rec(w, keys[i], sizes[i % KILN_ARRAY_LEN(sizes)]));
    KT_CHECK_OK(kiln_cache_sync(w));
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &r));
    struct kiln_cache_rewrite_report rep = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_compact(w, &rep));
    KT_CHECK(rep.rewritten);
    const unsigned threads[] = {1, 4};
    for (size_t t = 0; t < KILN_ARRAY_LEN(threads); t++)
        KT_CHECK_EQ(load_check(r, keys, N, threads[t], NULL), N);
    struct kiln_cache_result one;
    KT_CHECK_OK(kiln_cache_get(r, keys[7], &one));
    KT_CHECK(result_ok(&one, keys[7]));
    kiln_cache_payload_free(one.data);
    /* A prune that drops most records: the reader still has them all. */
    struct kiln_cache_prune_options po = {
        .size = sizeof(po), .older_than_days = UINT32_MAX, .max_file_bytes = 4096};
    KT_CHECK_OK(kiln_cache_prune(w, &po, &rep));
    KT_CHECK(rep.rewritten && rep.dropped > 0);
    KT_CHECK_EQ(load_check(r, keys, N, 4, NULL), N);
    kiln_cache_close(r);
    /* A new reader sees the pruned cache, whole. */
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &r));
    KT_CHECK_EQ(kiln_cache_count(r), N - rep.dropped);
    KT_CHECK_EQ(kiln_cache_count(r), kiln_cache_count(w));
    kiln_cache_close(r);
    kiln_cache_close(w);
}

/* ---- identity (issue 17, point 5) and the version 1 format ---------------- */

/* Copies the cache files of `from` into folder `to` (made when missing). */
static void copy_cache(const char *from, const char *to)
{
    static const char *const files[] = {KILN_CACHE_RECORDS_FILE, KILN_CACHE_INDEX_FILE,
                                        KILN_CACHE_USE_FILE};
    if (access(to, F_OK) != 0 && kt_mkdir(to) != 0)
        kt_fail(__FILE__, __LINE__, "cannot make %s", to);
    for (size_t i = 0; i < KILN_ARRAY_LEN(files); i++) {
        char a[4096], b[4096];
        path_of(a, from, files[i]);
        path_of(b, to, files[i]);
        if (access(a, F_OK) == 0)
            copy_file(a, b);
    }
}

/*
 * Writes `n` records of their own into each of the copies `a` and `b` of
 * one cache, then the same last record at the same offset in both (so the
 * last index entry alone cannot tell them apart), and copies b's index
 * over a's. @return false when a copy did not open (a failure recorded).
 */
static bool sibling_writes(const char *a, const char *b, uint64_t n)
{
    for (int side = 0; side < 2; side++) {
        struct kiln_cache *c;
        int rc = open_cache(side ? b : a, STAMP, 0, &c);
        KT_CHECK_OK(rc);
        if (rc < 0)
            return false;
        for (uint64_t i = 0; i < n; i++)
            KT_CHECK_OK(put_rec(c, key_of(side ? 2000 + i : 1000 + i), 40));
        KT_CHECK_OK(put_rec(c, key_of(3000), 40));
        KT_CHECK_OK(kiln_cache_sync(c));
        kiln_cache_close(c);
    }
    char idx_a[4096], idx_b[4096];
    path_of(idx_a, a, KILN_CACHE_INDEX_FILE);
    path_of(idx_b, b, KILN_CACHE_INDEX_FILE);
    copy_file(idx_b, idx_a);
    return true;
}

KT_CASE(sibling_index)
{
    /* A copied cache (cp -r), both copies written since, and one index
     * copied back: the open refuses it and rebuilds from the records. */
    const char *top = kt_tmpdir();
    char a[4096], b[4096], idx_a[4096];
    path_of(a, top, "a");
    path_of(b, top, "b");
    struct kiln_key keys[SMALL_N];
    make_cache(a, SMALL_N, small_sizes, KILN_ARRAY_LEN(small_sizes), keys, NULL);
    copy_cache(a, b);
    struct kiln_cache *c;
    KT_REQUIRE(sibling_writes(a, b, 6));
    path_of(idx_a, a, KILN_CACHE_INDEX_FILE);
    struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
    KT_CHECK_EQ(kiln_cache_check(a, NULL, false, &rep), KILN_ECORRUPT); /* the index is wrong */
    KT_CHECK_EQ(rep.index_state, KILN_CACHE_INDEX_INVALID);
    KT_CHECK(strstr(rep.index_text, "another copy") != NULL);
    for (int writer = 0; writer < 2; writer++) {
        KT_REQUIRE_OK(open_cache(a, STAMP, writer ? 0 : KILN_CACHE_READ_ONLY, &c));
        struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
        kiln_cache_get_stats(c, &st);
        KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_REBUILT);
        KT_CHECK(strstr(st.open_text, "another copy") != NULL);
        KT_CHECK_EQ(kiln_cache_count(c), SMALL_N + 7);
        KT_CHECK_EQ(load_check(c, keys, SMALL_N, 1, NULL), SMALL_N);
        for (uint64_t i = 0; i < 6; i++) {
            struct kiln_key k = key_of(1000 + i);
            KT_CHECK_EQ(load_check(c, &k, 1, 1, NULL), 1);
            KT_CHECK_EQ(kiln_cache_find(c, key_of(2000 + i), NULL), KILN_ENOTFOUND);
        }
        kiln_cache_close(c);
    }
    KT_REQUIRE_OK(open_cache(a, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    kiln_cache_close(c);
    /* An index left behind by a crash in the same copy still fits: the
     * records past it are read. */
    char saved[4096];
    path_of(saved, top, "saved.kpx");
    copy_file(idx_a, saved);
    KT_REQUIRE_OK(open_cache(a, STAMP, 0, &c));
    KT_CHECK_OK(put_rec(c, key_of(4000), 10));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    copy_file(saved, idx_a);
    KT_REQUIRE_OK(open_cache(a, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX_TAIL);
    KT_CHECK_EQ(kiln_cache_count(c), SMALL_N + 8);
    kiln_cache_close(c);
}

/* The fixture: a cache written by the release before issue 17 (format
 * version 1): 24 records of key_of(i), sizes below, made as put_rec does. */
static const size_t v1_sizes[] = {0, 17, 40, 3, 64, 1, 29, 300};
enum { V1_RECORDS = 24 };

static void v1_fixture(const char *dir)
{
    char from[4096];
    KT_REQUIRE(snprintf(from, sizeof(from), "%s/tests/cache/fixtures/v1", KILN_SOURCE_DIR) <
               (int)sizeof(from));
    copy_cache(from, dir);
}

static unsigned header_version(const char *dir, const char *name)
{
    char p[4096];
    path_of(p, dir, name);
    size_t n;
    unsigned char *b = read_all(p, &n);
    unsigned v = b && n >= 12 ? (unsigned)b[8] | (unsigned)b[9] << 8 : 0;
    free(b);
    return v;
}

KT_CASE(v1_fixture_opens)
{
    /* Caches of the current release open, load, check clean, take new
     * records, and become version 2 at their next rewrite. */
    const char *dir = kt_tmpdir();
    v1_fixture(dir);
    KT_CHECK_EQ(header_version(dir, KILN_CACHE_RECORDS_FILE), 1);
    struct kiln_key keys[V1_RECORDS + 1];
    for (size_t i = 0; i < V1_RECORDS; i++)
        keys[i] = key_of(i);
    struct kiln_cache *c;
    struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
    KT_CHECK(rep.whole);
    KT_CHECK_EQ(rep.records, V1_RECORDS);
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(load_check(c, keys, V1_RECORDS, 2, NULL), V1_RECORDS);
    kiln_cache_close(c);
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    keys[V1_RECORDS] = key_of(500);
    KT_CHECK_OK(put_rec(c, keys[V1_RECORDS], 77));
    KT_CHECK_OK(put_rec(c, keys[3], v1_sizes[3])); /* one superseded record */
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    KT_CHECK_EQ(header_version(dir, KILN_CACHE_RECORDS_FILE), 1);
    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(load_check(c, keys, V1_RECORDS + 1, 1, NULL), V1_RECORDS + 1);
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_compact(c, &r));
    KT_CHECK(r.rewritten);
    kiln_cache_close(c);
    KT_CHECK_EQ(header_version(dir, KILN_CACHE_RECORDS_FILE), 2);
    KT_CHECK_EQ(header_version(dir, KILN_CACHE_INDEX_FILE), 2);
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_READ_ONLY, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(load_check(c, keys, V1_RECORDS + 1, 2, NULL), V1_RECORDS + 1);
    kiln_cache_close(c);
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
    KT_CHECK(rep.whole);
}

KT_CASE(v1_sibling_sampled)
{
    /* Version 1 caches carry no identity: sampled entries catch a
     * sibling's index whose last entry matches. */
    const char *top = kt_tmpdir();
    char a[4096], b[4096];
    path_of(a, top, "a");
    path_of(b, top, "b");
    KT_REQUIRE(kt_mkdir(a) == 0);
    v1_fixture(a);
    copy_cache(a, b);
    struct kiln_cache *c;
    KT_REQUIRE(sibling_writes(a, b, 40));
    KT_REQUIRE_OK(open_cache(a, STAMP, KILN_CACHE_READ_ONLY, &c));
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_REBUILT);
    KT_CHECK(strstr(st.open_text, "do not match the records") != NULL);
    KT_CHECK_EQ(kiln_cache_count(c), V1_RECORDS + 41);
    struct kiln_key k = key_of(1007);
    KT_CHECK_EQ(load_check(c, &k, 1, 1, NULL), 1);
    kiln_cache_close(c);
}

/* ---- threads ------------------------------------------------------------- */

struct reader_arg {
    struct kiln_cache *c;
    const struct kiln_key *keys;
    size_t n;
    size_t good;
};

static void *reader(void *p)
{
    struct reader_arg *a = p;
    for (int round = 0; round < 3; round++) {
        a->good += load_check(a->c, a->keys, a->n, 2, NULL);
        for (size_t i = 0; i < a->n; i++)
            if (kiln_cache_find(a->c, a->keys[i], NULL) != KILN_OK)
                kt_fail(__FILE__, __LINE__, "key %zu not found", i);
    }
    return NULL;
}

KT_CASE(threads)
{
    const char *dir = kt_tmpdir();
    enum { N = 2000, BIG = 3 };
    static struct kiln_key keys[N + BIG];
    uint64_t rng = 9;
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c));
    for (size_t i = 0; i < N + BIG; i++) {
        keys[i] = key_of(i);
        /* A few records bigger than one batch read. */
        size_t size = i >= N ? (3u << 19) + i : kt_rand(&rng) % 20000;
        KT_REQUIRE_OK(put_rec(c, keys[i], size));
    }
    KT_CHECK_OK(kiln_cache_sync(c));
    /* Several thread counts, results in the order asked. */
    static struct kiln_key rev[N + BIG];
    for (size_t i = 0; i < N + BIG; i++)
        rev[i] = keys[N + BIG - 1 - i];
    const unsigned counts[] = {1, 2, 4, 16};
    for (size_t t = 0; t < KILN_ARRAY_LEN(counts); t++)
        KT_CHECK_EQ(load_check(c, rev, N + BIG, counts[t], NULL), N + BIG);
    /* Readers on two threads while this one keeps writing. */
    struct reader_arg ra[2] = {{c, keys, N + BIG, 0}, {c, rev, N + BIG, 0}};
    pthread_t tid[2];
    for (int i = 0; i < 2; i++)
        KT_REQUIRE(pthread_create(&tid[i], NULL, reader, &ra[i]) == 0);
    for (size_t i = 0; i < 300; i++)
        KT_CHECK_OK(put_rec(c, key_of(100000 + i), 64 + i));
    for (int i = 0; i < 2; i++)
        pthread_join(tid[i], NULL);
    KT_CHECK_EQ(ra[0].good, 3 * (N + BIG));
    KT_CHECK_EQ(ra[1].good, 3 * (N + BIG));
    KT_CHECK_EQ(kiln_cache_count(c), N + BIG + 300);
    kiln_cache_close(c);
}

/* 8 threads x 10,000 puts of mixed sizes into one cache, one of them also
 * syncing as it goes: every record must be live after a reopen, and the
 * check must find the files whole. Built a second time against a cache
 * whose put skips the reservation (KILN_CACHE_BROKEN_RESERVE), where ctest
 * requires this case to fail. */
enum { PT_THREADS = 8, PT_PUTS = 10000 };

struct putter_arg {
    struct kiln_cache *c;
    unsigned t;
    int errors;
};

static struct kiln_key pt_key(unsigned t, size_t i)
{
    return key_of((uint64_t)t * 1000000 + i);
}

static size_t pt_size(uint64_t *rng)
{
    uint64_t r = kt_rand(rng);
    if (r % 2000 == 0)
        return 200000 + r % 100000; /* a few larger than one write buffer */
    if (r % 100 == 1)
        return 16384 + r % 24576;
    return (size_t)(r % 1500); /* mostly small, empty ones too */
}

static void *putter(void *p)
{
    struct putter_arg *a = p;
    uint64_t rng = 1000 + a->t;
    for (size_t i = 0; i < PT_PUTS; i++) {
        if (put_rec(a->c, pt_key(a->t, i), pt_size(&rng)) != KILN_OK)
            a->errors++;
        if (a->t == 0 && i % 1000 == 999 && kiln_cache_sync(a->c) != KILN_OK)
            a->errors++;
    }
    return NULL;
}

KT_CASE(put_threads)
{
    const char *dir = kt_tmpdir();
    enum { N = PT_THREADS * PT_PUTS };
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c));
    struct putter_arg pa[PT_THREADS];
    pthread_t tid[PT_THREADS];
    for (unsigned t = 0; t < PT_THREADS; t++) {
        pa[t] = (struct putter_arg){c, t, 0};
        KT_REQUIRE(pthread_create(&tid[t], NULL, putter, &pa[t]) == 0);
    }
    for (unsigned t = 0; t < PT_THREADS; t++) {
        pthread_join(tid[t], NULL);
        KT_CHECK_EQ(pa[t].errors, 0);
    }
    KT_CHECK_EQ(kiln_cache_count(c), N);
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);

    KT_REQUIRE_OK(open_cache(dir, STAMP, 0, &c));
    KT_CHECK_EQ(kind_of(c), KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(kiln_cache_count(c), N);
    struct kiln_key *keys = malloc(N * sizeof(*keys));
    KT_REQUIRE(keys);
    for (unsigned t = 0; t < PT_THREADS; t++)
        for (size_t i = 0; i < PT_PUTS; i++)
            keys[t * PT_PUTS + i] = pt_key(t, i);
    KT_CHECK_EQ(load_check(c, keys, N, 4, NULL), N);
    free(keys);
    kiln_cache_close(c);
    struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
    KT_CHECK(rep.whole);
    KT_CHECK_EQ(rep.records, N);
    KT_CHECK_EQ(rep.damaged_bytes, 0);
    KT_CHECK_EQ(rep.index_state, KILN_CACHE_INDEX_OK);
}

/* ---- read-only layers (kiln_cache_options.layers) ------------------------ */

static int open_with_layers(const char *dir, const char *const *layers, size_t n, unsigned flags,
                            struct kiln_cache **c)
{
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .stamp = STAMP, .flags = flags, .layers = layers, .nlayers = n};
    return kiln_cache_open(dir, &opt, c);
}

/* Keys 0..9 in the layer (40 bytes each), 5..14 in the top (24 bytes): the
 * top's record wins where both hold a key, every key is seen once. */
KT_CASE(layers_lookup_order)
{
    const char *root = kt_tmpdir();
    char layer[4096], top[4096];
    path_of(layer, root, "layer");
    path_of(top, root, "top");
    static const size_t lsize[] = {40};
    struct kiln_key keys[15];
    make_cache(layer, 10, lsize, 1, keys, NULL);
    struct kiln_cache *c;
    const char *layers[] = {layer};
    KT_REQUIRE_OK(open_with_layers(top, layers, 1, KILN_CACHE_CREATE, &c));
    for (uint64_t i = 5; i < 15; i++) {
        keys[i] = key_of(i);
        KT_CHECK_OK(put_rec(c, keys[i], 24));
    }
    KT_CHECK_OK(kiln_cache_sync(c));
    KT_CHECK_EQ(kiln_cache_count(c), 15);
    struct kiln_cache_entry *e;
    size_t n = 0;
    KT_REQUIRE_OK(kiln_cache_entries(c, &e, &n));
    KT_CHECK_EQ(n, 15);
    for (size_t i = 0; i < n; i++)
        for (size_t k = i + 1; k < n; k++)
            KT_CHECK(!kiln_key_equal(e[i].key, e[k].key));
    kiln_cache_entries_free(e);
    KT_CHECK_EQ(load_check(c, keys, 15, 2, NULL), 15);
    struct kiln_cache_result r;
    KT_CHECK_OK(kiln_cache_get(c, keys[2], &r)); /* the layer's alone */
    KT_CHECK_EQ(r.size, 40);
    kiln_cache_payload_free(r.data);
    KT_CHECK_OK(kiln_cache_get(c, keys[7], &r)); /* both: the top's */
    KT_CHECK_EQ(r.size, 24);
    kiln_cache_payload_free(r.data);
    struct kiln_cache_entry one;
    KT_CHECK_OK(kiln_cache_find(c, keys[0], &one));
    KT_CHECK_EQ(kiln_cache_find(c, key_of(99), &one), KILN_ENOTFOUND);
    uint32_t day;
    KT_CHECK_OK(kiln_cache_last_use(c, keys[1], &day));
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    KT_CHECK_OK(kiln_cache_get_stats(c, &st));
    KT_CHECK_EQ(st.records, 10); /* the top's own */
    KT_CHECK_EQ(st.layers, 1);
    KT_CHECK_EQ(st.layer_records, 5);
    kiln_cache_close(c);
    /* The control: without the layer, the top alone. */
    KT_REQUIRE_OK(open_cache(top, STAMP, 0, &c));
    KT_CHECK_EQ(kiln_cache_count(c), 10);
    KT_CHECK_EQ(kiln_cache_get(c, keys[2], &r), KILN_ENOTFOUND);
    kiln_cache_close(c);
}

/* Every byte of a layer's folder after a writer above it stored, synced,
 * loaded, compacted and closed: as before; and no lock was taken on it. */
KT_CASE(layers_never_written)
{
    const char *root = kt_tmpdir();
    char layer[4096], top[4096], path[4096];
    path_of(layer, root, "layer");
    path_of(top, root, "top");
    static const size_t lsize[] = {33};
    struct kiln_key keys[12];
    make_cache(layer, 12, lsize, 1, keys, NULL);
    static const char *const files[] = {KILN_CACHE_RECORDS_FILE, KILN_CACHE_INDEX_FILE,
                                        KILN_CACHE_USE_FILE};
    void *before[3];
    size_t nbefore[3];
    for (int f = 0; f < 3; f++) {
        path_of(path, layer, files[f]);
        before[f] = read_all(path, &nbefore[f]);
    }
    struct kiln_cache *c, *w;
    const char *layers[] = {layer};
    KT_REQUIRE_OK(open_with_layers(top, layers, 1, KILN_CACHE_CREATE, &c));
    KT_CHECK_OK(open_cache(layer, STAMP, 0, &w)); /* a writer of the layer: not locked */
    kiln_cache_close(w);
    KT_CHECK_OK(put_rec(c, key_of(50), 10));
    KT_CHECK_OK(put_rec(c, keys[3], 10)); /* shadows the layer's */
    KT_CHECK_EQ(load_check(c, keys, 12, 2, NULL), 12);
    KT_CHECK_OK(kiln_cache_sync(c));
    struct kiln_cache_rewrite_report rep = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_compact(c, &rep));
    KT_CHECK_OK(kiln_cache_save_use(c));
    kiln_cache_close(c);
    for (int f = 0; f < 3; f++) {
        path_of(path, layer, files[f]);
        size_t n = 0;
        void *now = read_all(path, &n);
        KT_CHECK(now && n == nbefore[f] && memcmp(now, before[f], n) == 0);
        free(now);
        free(before[f]);
    }
    size_t entries = 0;
    DIR *d = opendir(layer);
    KT_REQUIRE(d != NULL);
    for (struct dirent *de; (de = readdir(d));)
        entries += de->d_name[0] != '.';
    closedir(d);
    KT_CHECK_EQ(entries, 3);
}

/* A layer that cannot be used is left out, the open goes on; a damaged
 * record in a used layer is reported missing, never returned. */
KT_CASE(layers_left_out)
{
    const char *root = kt_tmpdir();
    char good[4096], other[4096], broken[4096], missing[4096], top[4096], path[4096];
    path_of(good, root, "good");
    path_of(other, root, "other");
    path_of(broken, root, "broken");
    path_of(missing, root, "missing");
    path_of(top, root, "top");
    static const size_t lsize[] = {40};
    struct kiln_key keys[6];
    uint64_t off[6];
    make_cache(good, 6, lsize, 1, keys, off);
    make_cache(broken, 2, lsize, 1, keys, NULL);
    path_of(path, broken, KILN_CACHE_RECORDS_FILE);
    patch_file(path, 0, "XXXX", 4); /* not a kiln cache any more */
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(other, STAMP + 1, KILN_CACHE_CREATE, &c));
    KT_CHECK_OK(put_rec(c, key_of(40), 8));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    path_of(path, good, KILN_CACHE_RECORDS_FILE);
    flip_bit(path, off[4] + KILN__CACHE_HEAD_SIZE + 3, 2);

    const char *layers[] = {other, broken, missing, good};
    KT_REQUIRE_OK(open_with_layers(top, layers, 4, KILN_CACHE_CREATE, &c));
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    KT_CHECK_OK(kiln_cache_get_stats(c, &st));
    KT_CHECK_EQ(st.layers, 1);
    KT_CHECK_EQ(st.layers_left_out, 3);
    bool ok[6];
    KT_CHECK_EQ(load_check(c, keys, 6, 1, ok), 5);
    KT_CHECK(!ok[4]);
    struct kiln_cache_result r;
    KT_CHECK(kiln_cache_get(c, keys[4], &r) < 0);
    KT_CHECK(r.data == NULL);
    KT_CHECK_EQ(kiln_cache_find(c, key_of(40), NULL), KILN_ENOTFOUND); /* the other stamp's */
    kiln_cache_close(c);

    /* More layers than kiln opens, or a count without its array: refused. */
    const char *many[KILN_CACHE_MAX_LAYERS + 1];
    for (size_t i = 0; i < KILN_ARRAY_LEN(many); i++)
        many[i] = good;
    KT_CHECK_EQ(open_with_layers(top, many, KILN_ARRAY_LEN(many), 0, &c), KILN_EINVAL);
    KT_CHECK_EQ(open_with_layers(top, NULL, 1, 0, &c), KILN_EINVAL);
}

/* Makes a cache of keys [from, to) of `size` bytes each in `dir`; with
 * `damage` in that range, flips a payload bit of that key's record. */
static void make_range(const char *dir, uint64_t from, uint64_t to, size_t size, uint64_t damage)
{
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cache(dir, STAMP, KILN_CACHE_CREATE, &c));
    uint64_t off = UINT64_MAX;
    for (uint64_t i = from; i < to; i++) {
        KT_CHECK_OK(put_rec(c, key_of(i), size));
        struct kiln_cache_entry e;
        if (i == damage && kiln_cache_find(c, key_of(i), &e) == KILN_OK)
            off = e.offset;
    }
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    if (off != UINT64_MAX) {
        char path[4096];
        path_of(path, dir, KILN_CACHE_RECORDS_FILE);
        flip_bit(path, off + KILN__CACHE_HEAD_SIZE + 1, 4);
    }
}

/* An executor's submit that takes no task: kiln works on the calling thread. */
static int refuse_task(void (*fn)(void *), void *arg, void *user)
{
    (void)fn;
    (void)arg;
    (void)user;
    return -1;
}

/* The passes of workers load_many ran on `c` and its layers together. */
static uint64_t load_passes(struct kiln_cache *c)
{
    uint64_t n = __atomic_load_n(&c->load_passes, __ATOMIC_RELAXED);
    for (unsigned l = 0; l < c->nlayers; l++)
        n += __atomic_load_n(&c->layers[l]->load_passes, __ATOMIC_RELAXED);
    return n;
}

/*
 * Records spread over the top (keys 40..69, 24 bytes) and two layers (the
 * first: 20..49, 56 bytes; the second: 0..29, 40 bytes) load in one call
 * and one pass of workers: each key from the first file that holds it,
 * every byte checked. The first layer's record of key 25 and the second's
 * of key 5 are damaged: both reported missing, and key 25 does not fall
 * through to the second layer's whole copy (the holder's answer is final,
 * as kiln_cache_get's).
 */
KT_CASE(layers_one_pass)
{
    const char *root = kt_tmpdir();
    char l1[4096], l2[4096], top[4096];
    path_of(l1, root, "l1");
    path_of(l2, root, "l2");
    path_of(top, root, "top");
    make_range(l1, 20, 50, 56, 25);
    make_range(l2, 0, 30, 40, 5);
    make_range(top, 40, 70, 24, UINT64_MAX);
    const char *layers[] = {l1, l2};
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_with_layers(top, layers, 2, KILN_CACHE_READ_ONLY, &c));
    KT_REQUIRE(c->nlayers == 2);
    enum { N = 71 };
    struct kiln_key keys[N];
    for (uint64_t i = 0; i < N; i++)
        keys[i] = key_of(i == 70 ? 99 : i); /* the last: in no file */
    for (unsigned threads = 1; threads <= 4; threads += 3) {
        uint64_t passes = load_passes(c);
        struct kiln_cache_result *res;
        KT_REQUIRE(kiln_cache_load_many(c, keys, N, threads, &res) == N - 3);
        KT_CHECK_EQ(load_passes(c) - passes, 1);
        for (size_t i = 0; i < N; i++) {
            size_t want = i >= 40 ? 24 : i >= 20 ? 56 : 40;
            if (i == 5 || i == 25) {
                KT_CHECK_EQ(res[i].status, KILN_ECORRUPT_RECORD);
                KT_CHECK(res[i].data == NULL);
            } else if (i == 70) {
                KT_CHECK_EQ(res[i].status, KILN_ENOTFOUND);
            } else {
                KT_CHECK(result_ok(&res[i], keys[i]));
                KT_CHECK_EQ(res[i].size, want);
            }
        }
        kiln_cache_results_free(res, N);
    }
    /* The keys of one layer alone, and of none: still one pass each. */
    uint64_t passes = load_passes(c);
    KT_CHECK_EQ(load_check(c, keys + 30, 10, 2, NULL), 10);
    KT_CHECK_EQ(load_check(c, keys + 70, 1, 2, NULL), 0);
    KT_CHECK_EQ(load_passes(c) - passes, 2);
    kiln_cache_close(c);

    /* Opened after the top, with the stamp its header carries (ANY_STAMP:
     * the layers cannot open beside it), the same answers. */
    struct kiln_cache_options opt = {.size = sizeof(opt),
                                     .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP,
                                     .layers = layers,
                                     .nlayers = 2};
    KT_REQUIRE_OK(kiln_cache_open(top, &opt, &c));
    KT_CHECK(c->nlayers == 2);
    KT_CHECK_EQ(load_check(c, keys, N, 2, NULL), N - 3);
    kiln_cache_close(c);
    /* A damaged cache fails beside its layers as it does alone: the same
     * code, the same text on the calling thread, no handle. */
    char path[4096];
    path_of(path, top, KILN_CACHE_RECORDS_FILE);
    patch_file(path, 0, "XXXX", 4);
    int alone = open_cache(top, STAMP, KILN_CACHE_READ_ONLY, &c);
    KT_CHECK(alone < 0);
    char text[512];
    snprintf(text, sizeof(text), "%s", kiln_last_errmsg());
    KT_CHECK(strstr(text, top) != NULL);
    c = NULL;
    KT_CHECK_EQ(open_with_layers(top, layers, 2, KILN_CACHE_READ_ONLY, &c), alone);
    KT_CHECK(c == NULL);
    KT_CHECK_EQ(strcmp(kiln_last_errmsg(), text), 0);
    /* The same on the calling thread alone (an executor that takes no
     * task), with a layer whose open warns (its index gone): no layer
     * opens after the cache failed, so its line is not the text. */
    path_of(path, l1, KILN_CACHE_INDEX_FILE);
    KT_CHECK(remove(path) == 0);
    struct kiln_executor ex = KILN_EXECUTOR_INIT;
    ex.submit = refuse_task;
    opt = (struct kiln_cache_options){.size = sizeof(opt),
                                      .stamp = STAMP,
                                      .flags = KILN_CACHE_READ_ONLY,
                                      .executor = &ex,
                                      .layers = layers,
                                      .nlayers = 2};
    KT_CHECK_EQ(kiln_cache_open(top, &opt, &c), alone);
    KT_CHECK_EQ(strcmp(kiln_last_errmsg(), text), 0);
}

KT_MAIN(KT_ENTRY(round_trip), KT_ENTRY(later_record_wins), KT_ENTRY(index_cut_short),
        KT_ENTRY(last_entry_changed), KT_ENTRY(index_deleted), KT_ENTRY(index_of_other_cache),
        KT_ENTRY(index_other_stamp), KT_ENTRY(records_truncated_everywhere), KT_ENTRY(flipped_bit),
        KT_ENTRY(get_one), KT_ENTRY(unindexed_tail), KT_ENTRY(second_writer_refused),
        KT_ENTRY(offsets_past_4gib), KT_ENTRY(stamp_mismatch), KT_ENTRY(reset),
        KT_ENTRY(create_makes_folders), KT_ENTRY(open_flags), KT_ENTRY(read_only_never_writes),
        KT_ENTRY(check_and_repair), KT_ENTRY(repair_check_loop), KT_ENTRY(repair_check_random),
        KT_ENTRY(compact_accounts), KT_ENTRY(merge_accounts), KT_ENTRY(prune_plan),
        KT_ENTRY(progress_reported), KT_ENTRY(write_faults), KT_ENTRY(crash_keeps_synced),
        KT_ENTRY(planted_links), KT_ENTRY(output_guard), KT_ENTRY(replaced_under_writer),
        KT_ENTRY(special_files), KT_ENTRY(reader_across_rewrite), KT_ENTRY(sibling_index),
        KT_ENTRY(v1_fixture_opens), KT_ENTRY(v1_sibling_sampled), KT_ENTRY(threads),
        KT_ENTRY(put_threads), KT_ENTRY(layers_lookup_order), KT_ENTRY(layers_never_written),
        KT_ENTRY(layers_left_out), KT_ENTRY(layers_one_pass))
