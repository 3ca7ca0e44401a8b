/*
 * test_cap_crash.c - a writer storing past its cache's size cap, killed
 * with SIGKILL at every moment of its evictions (and at a spread of the
 * moments between them).
 *
 * The template is a cache at its cap: OLD records of one day, written by
 * an earlier handle. A child opens a fresh copy of it on the next day and
 * stores NEW records, syncing after every fourth and telling the parent
 * through a pipe which records each sync made durable; its puts pass the
 * cap again and again, and each pass evicts the oldest records in one
 * rewrite. The child's I/O table counts its write-side calls (write,
 * sync, rename, truncate, unlink) and the child kills itself with SIGKILL
 * just before call N. An unkilled child first counts the calls and marks
 * those inside an eviction (from the creation of programs.kpc.new to the
 * rename of the last-use file that ends the rewrite); the trials kill at
 * every one of those and at every STRIDE-th other call. After each kill
 * the parent checks:
 *
 *  - the index on disk names only whole records (rel_index_not_ahead);
 *  - the cache opens as a writer, and kiln_cache_check then finds it whole;
 *  - every record that is there loads, byte for byte what was stored (a
 *    damaged record is never returned);
 *  - every record a sync made durable is there: the child's own records
 *    are never evicted by it;
 *  - the old records missing are the first ones in the file (the least
 *    recently used, ties broken by file order): an eviction drops only
 *    what it chose, all or nothing.
 *
 * The negative control: the same check on a copy with one kept record's
 * payload flipped, and on one with a record from the middle removed, must
 * report problems. POSIX only (fork, SIGKILL).
 */
#include "rel_model.h"
#include "kiln_internal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define OLD     150u /* ids 0..OLD-1, in the template */
#define NEW_AT  200u /* the child's ids: NEW_AT.. */
#define NEW     150u
#define DAY     20000u
#define STRIDE  5u
#define MAXCALL 8192u

/* ---- the child's I/O table: counts write-side calls, dies at one ---------- */

struct killio {
    struct kiln_io io; /* first: passed to kiln */
    const struct kiln_io *base;
    uint64_t calls, kill_at;
    bool in_evict;
    uint8_t *evict; /* per call: inside an eviction (measuring run only) */
};

static struct killio kio;

static void count_call(void)
{
    kio.calls++;
    if (kio.evict && kio.calls < MAXCALL)
        kio.evict[kio.calls] = kio.in_evict;
    if (kio.kill_at && kio.calls == kio.kill_at)
        raise(SIGKILL);
}

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

static int k_open(const struct kiln_io *self, const char *path, int flags, int *fd)
{
    (void)self;
    if (ends_with(path, KILN_CACHE_RECORDS_FILE ".new"))
        kio.in_evict = true;
    return kio.base->open(kio.base, path, flags, fd);
}

static int k_close(const struct kiln_io *self, int fd)
{
    (void)self;
    return kio.base->close(kio.base, fd);
}

static int64_t k_pread(const struct kiln_io *self, int fd, void *buf, size_t n, uint64_t off)
{
    (void)self;
    return kio.base->pread(kio.base, fd, buf, n, off);
}

static int64_t k_pwrite(const struct kiln_io *self, int fd, const void *buf, size_t n, uint64_t off)
{
    (void)self;
    count_call();
    return kio.base->pwrite(kio.base, fd, buf, n, off);
}

static int k_fsync(const struct kiln_io *self, int fd)
{
    (void)self;
    count_call();
    return kio.base->fsync(kio.base, fd);
}

static int k_fsync_dir(const struct kiln_io *self, const char *path)
{
    (void)self;
    count_call();
    return kio.base->fsync_dir(kio.base, path);
}

static int k_rename(const struct kiln_io *self, const char *from, const char *to)
{
    (void)self;
    count_call();
    int rc = kio.base->rename(kio.base, from, to);
    if (ends_with(to, KILN_CACHE_USE_FILE))
        kio.in_evict = false; /* the last step of a rewrite */
    return rc;
}

static int k_truncate(const struct kiln_io *self, int fd, uint64_t size)
{
    (void)self;
    count_call();
    return kio.base->truncate(kio.base, fd, size);
}

static int k_lock(const struct kiln_io *self, int fd, enum kiln_io_lock_mode mode)
{
    (void)self;
    return kio.base->lock(kio.base, fd, mode);
}

static int k_file_size(const struct kiln_io *self, int fd, uint64_t *size)
{
    (void)self;
    return kio.base->file_size(kio.base, fd, size);
}

static int k_unlink(const struct kiln_io *self, const char *path)
{
    (void)self;
    count_call();
    return kio.base->unlink(kio.base, path);
}

static void killio_init(uint64_t kill_at, uint8_t *evict)
{
    memset(&kio, 0, sizeof(kio));
    kio.io = (struct kiln_io){.size = sizeof(kio.io),
                              .open = k_open,
                              .close = k_close,
                              .pread = k_pread,
                              .pwrite = k_pwrite,
                              .fsync = k_fsync,
                              .fsync_dir = k_fsync_dir,
                              .rename = k_rename,
                              .truncate = k_truncate,
                              .lock = k_lock,
                              .file_size = k_file_size,
                              .unlink = k_unlink};
    kio.base = kiln_io_default();
    kio.kill_at = kill_at;
    kio.evict = evict;
}

/* ---- folders ------------------------------------------------------------------ */

static int copy_dir(const char *from, const char *to)
{
    kt_rmtree(to);
    if (kt_mkdir(to) != 0)
        return -1;
    DIR *d = opendir(from);
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *de;
    static char buf[1 << 20];
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char src[4200], dst[4200];
        snprintf(src, sizeof(src), "%s/%s", from, de->d_name);
        snprintf(dst, sizeof(dst), "%s/%s", to, de->d_name);
        FILE *in = fopen(src, "rb"), *out = in ? fopen(dst, "wb") : NULL;
        size_t n;
        while (in && out && (n = fread(buf, 1, sizeof(buf), in)) > 0)
            if (fwrite(buf, 1, n, out) != n)
                rc = -1;
        if (!in || !out)
            rc = -1;
        if (in)
            fclose(in);
        if (out && fclose(out) != 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

static struct kiln_cache_options opts(uint32_t day, const struct kiln_io *io, unsigned flags)
{
    struct kiln_cache_options o = KILN_CACHE_OPTIONS_INIT;
    o.stamp = REL_STAMP;
    o.today = day;
    o.io = io;
    o.flags = flags;
    return o;
}

static int put(struct kiln_cache *c, uint32_t id)
{
    unsigned char buf[2400];
    size_t n = rel_size(id, 1);
    rel_payload(id, 1, buf);
    return kiln_cache_put(c, rel_key(id), buf, n, (uint32_t)n, 0, 1);
}

/* The template: OLD records on DAY, then the cap set at its size. */
static void make_template(const char *dir, uint64_t *cap)
{
    struct kiln_cache_options o = opts(DAY, NULL, KILN_CACHE_CREATE);
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    for (uint32_t id = 0; id < OLD; id++)
        KT_REQUIRE_OK(put(c, id));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    kiln_cache_close(c);
    *cap = st.file_bytes;
    o = opts(DAY, NULL, 0);
    o.max_size = *cap;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    kiln_cache_close(c);
}

/* ---- the child ----------------------------------------------------------------- */

/* Stores the NEW records; after each sync, writes the count made durable
 * to `wfd`; at the end the calls made (and, measuring, the eviction map). */
static void child(const char *dir, int wfd, uint64_t kill_at, uint8_t *evict)
{
    rel_quiet(true);
    killio_init(kill_at, evict);
    struct kiln_cache_options o = opts(DAY + 1, &kio.io, 0);
    struct kiln_cache *c;
    if (kiln_cache_open(dir, &o, &c) != KILN_OK)
        _exit(2);
    for (uint32_t i = 0; i < NEW; i++) {
        if (put(c, NEW_AT + i) != KILN_OK)
            _exit(3);
        if ((i + 1) % 4 == 0 || i + 1 == NEW) {
            if (kiln_cache_sync(c) != KILN_OK)
                _exit(4);
            uint32_t acked = i + 1;
            rel_write_all(wfd, &acked, sizeof(acked));
        }
    }
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    kiln_cache_close(c);
    uint32_t end = UINT32_MAX;
    rel_write_all(wfd, &end, sizeof(end));
    rel_write_all(wfd, &kio.calls, sizeof(kio.calls));
    rel_write_all(wfd, &st.evictions, sizeof(st.evictions));
    if (evict)
        rel_write_all(wfd, evict, MAXCALL);
    _exit(0);
}

struct outcome {
    uint32_t acked; /* new records made durable */
    bool finished;
    uint64_t calls, evictions;
};

static pid_t start(const char *dir, uint64_t kill_at, uint8_t *evict, int *rfd)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        child(dir, fds[1], kill_at, evict);
    }
    close(fds[1]);
    *rfd = fds[0];
    return pid;
}

/* Runs a child to its kill (or its end) and reads what it told. */
static int run_child(const char *dir, uint64_t kill_at, uint8_t *evict, struct outcome *out)
{
    memset(out, 0, sizeof(*out));
    int rfd;
    pid_t pid = start(dir, kill_at, evict, &rfd);
    if (pid < 0)
        return -1;
    uint32_t v;
    while (rel_read_all(rfd, &v, sizeof(v))) {
        if (v == UINT32_MAX) {
            out->finished = rel_read_all(rfd, &out->calls, sizeof(out->calls)) &&
                            rel_read_all(rfd, &out->evictions, sizeof(out->evictions)) &&
                            (!evict || rel_read_all(rfd, evict, MAXCALL));
            break;
        }
        out->acked = v;
    }
    close(rfd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (kill_at && out->finished)
        return 0; /* the call to die at was never reached */
    if (kill_at)
        return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? 0 : -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && out->finished ? 0 : -1;
}

/* ---- the check ------------------------------------------------------------------ */

/* The controls count problems without failing the case. */
static bool counting;

#define PROBLEM(...)                                  \
    do {                                              \
        if (!counting)                                \
            kt_fail(__FILE__, __LINE__, __VA_ARGS__); \
        problems++;                                   \
    } while (0)

/* Whether record `id` is there and loads as stored: 1 yes, 0 not there,
 * -1 there but not as stored (damage returned or reported). */
static int record_state(struct kiln_cache *c, uint32_t id)
{
    struct kiln_cache_result r;
    int rc = kiln_cache_get(c, rel_key(id), &r);
    if (rc == KILN_ENOTFOUND)
        return 0;
    if (rc != KILN_OK)
        return -1;
    unsigned char want[2400];
    size_t n = rel_size(id, 1);
    rel_payload(id, 1, want);
    bool same = r.size == n && memcmp(r.data, want, n) == 0;
    kiln_cache_payload_free(r.data);
    return same ? 1 : -1;
}

/* @return the problems found in `dir` after a child made `acked` durable;
 * *evicted: old records gone. */
static int check(const char *dir, uint32_t acked, const char *what, unsigned *evicted)
{
    /* (rel_index_not_ahead fails the case itself: not in the controls.) */
    int problems = counting ? 0 : rel_index_not_ahead(dir, what);
    struct kiln_cache_options o = opts(DAY + 1, NULL, 0);
    struct kiln_cache *c;
    int rc = kiln_cache_open(dir, &o, &c);
    if (rc != KILN_OK) {
        PROBLEM("%s: the cache does not open: %s", what, kiln_strerror(rc));
        return problems;
    }
    unsigned gone = 0;
    for (uint32_t id = 0; id < OLD; id++) {
        int s = record_state(c, id);
        if (s < 0 || (s == 0 && gone != id)) {
            PROBLEM("%s: old record %u is %s", what, id,
                    s < 0 ? "damaged or not as stored" : "gone while an older one is there");
        }
        gone += s == 0 && gone == id;
    }
    for (uint32_t i = 0; i < NEW; i++) {
        int s = record_state(c, NEW_AT + i);
        if (s < 0 || (s == 0 && i < acked)) {
            PROBLEM("%s: new record %u (%u made durable) is %s", what, i, acked,
                    s < 0 ? "damaged or not as stored" : "missing");
        }
    }
    kiln_cache_close(c);
    struct kiln_cache_check_report r = KILN_CACHE_CHECK_REPORT_INIT;
    rc = kiln_cache_check(dir, NULL, false, &r);
    if (rc != KILN_OK) {
        PROBLEM("%s: kiln_cache_check: %s (%s)", what, kiln_strerror(rc), r.index_text);
    }
    *evicted = gone;
    return problems;
}

/* The case's template (made) and trial folder paths, logs quiet. */
static void setup(char tmpl[4200], char trial[4200])
{
    const char *root = kt_tmpdir();
    snprintf(tmpl, 4200, "%s/template", root);
    snprintf(trial, 4200, "%s/trial", root);
    uint64_t cap;
    make_template(tmpl, &cap);
    rel_quiet(true);
}

KT_CASE(kill_during_eviction)
{
    char tmpl[4200], trial[4200];
    setup(tmpl, trial);

    /* The unkilled run: its calls, which of them are an eviction's. */
    static uint8_t evict[MAXCALL];
    KT_REQUIRE(copy_dir(tmpl, trial) == 0);
    struct outcome base;
    KT_REQUIRE(run_child(trial, 0, evict, &base) == 0);
    KT_REQUIRE(base.calls > 0 && base.calls < MAXCALL);
    KT_REQUIRE(base.evictions >= 2);
    unsigned evicted = 0;
    KT_CHECK_EQ(check(trial, NEW, "the unkilled run", &evicted), 0);
    KT_CHECK(evicted > 0 && evicted <= OLD);

    unsigned trials = 0, in_evict = 0, problems = 0, partly = 0;
    for (uint64_t n = 1; n <= base.calls; n++) {
        if (!evict[n] && n % STRIDE != 0)
            continue;
        KT_REQUIRE(copy_dir(tmpl, trial) == 0);
        struct outcome o;
        char what[96];
        snprintf(what, sizeof(what), "killed at write-side call %" PRIu64 "%s", n,
                 evict[n] ? " (in an eviction)" : "");
        if (run_child(trial, n, NULL, &o) != 0) {
            kt_fail(__FILE__, __LINE__, "%s: the child did not die as asked", what);
            problems++;
            continue;
        }
        unsigned gone = 0;
        problems += (unsigned)check(trial, o.acked, what, &gone);
        trials++;
        in_evict += evict[n];
        partly += gone > 0 && gone < evicted;
    }
    rel_quiet(false);
    printf("cap kill trials: %u (of %" PRIu64 " write-side calls, %u inside the %" PRIu64
           " evictions); old records evicted by the unkilled run %u of %u; kills that found "
           "some but not all of them evicted %u; problems %u\n",
           trials, base.calls, in_evict, base.evictions, evicted, OLD, partly, problems);
    KT_CHECK_EQ(problems, 0);
    KT_CHECK(in_evict > 0);
    KT_CHECK(partly > 0);
}

/* The check sees what it must: a kept record damaged, or one evicted out
 * of order (removed from the middle by a prune that ignores last use). */
KT_CASE(control_check_catches)
{
    char tmpl[4200], trial[4200];
    setup(tmpl, trial);
    counting = true;
    unsigned gone;

    /* A payload byte of the last old record flipped. */
    KT_REQUIRE(copy_dir(tmpl, trial) == 0);
    struct kiln_cache_options o = opts(DAY, NULL, KILN_CACHE_READ_ONLY);
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(trial, &o, &c));
    struct kiln_cache_entry e;
    KT_REQUIRE_OK(kiln_cache_find(c, rel_key(OLD - 1), &e));
    kiln_cache_close(c);
    char path[4300];
    snprintf(path, sizeof(path), "%s/%s", trial, KILN_CACHE_RECORDS_FILE);
    FILE *f = fopen(path, "r+b");
    KT_REQUIRE(f);
    fseek(f, (long)(e.offset + 48 + 3), SEEK_SET);
    int b = fgetc(f);
    fseek(f, (long)(e.offset + 48 + 3), SEEK_SET);
    fputc(b ^ 0x10, f);
    fclose(f);
    KT_CHECK(check(trial, 0, "control: a flipped byte", &gone) > 0);

    /* A record from the middle gone: not the least recently used. */
    KT_REQUIRE(copy_dir(tmpl, trial) == 0);
    struct kiln_cache_options ow = opts(DAY + 1, NULL, 0);
    ow.max_size = KILN_CACHE_NO_CAP;
    KT_REQUIRE_OK(kiln_cache_open(trial, &ow, &c));
    for (uint32_t id = 0; id < OLD / 2; id++) {
        struct kiln_cache_result r;
        KT_CHECK_OK(kiln_cache_get(c, rel_key(id), &r)); /* used today: the newest */
        kiln_cache_payload_free(r.data);
    }
    kiln_cache_close(c);
    KT_REQUIRE_OK(kiln_cache_open(trial, &ow, &c));
    struct kiln_cache_prune_options po = KILN_CACHE_PRUNE_OPTIONS_INIT;
    po.older_than_days = 0; /* drops what was not used today: the second half */
    KT_CHECK_OK(kiln_cache_prune(c, &po, NULL));
    kiln_cache_close(c);
    KT_CHECK(check(trial, 0, "control: the newest evicted", &gone) > 0);
    counting = false;
    rel_quiet(false);
}

KT_MAIN(KT_ENTRY(kill_during_eviction), KT_ENTRY(control_check_catches))
