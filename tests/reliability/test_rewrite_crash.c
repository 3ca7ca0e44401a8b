/*
 * test_rewrite_crash.c - the cache's rewrites (compact, prune, repack with a
 * newly trained dictionary) killed with SIGKILL at random moments, and cut
 * by a simulated power cut after every write-side call.
 *
 * Each case builds one template cache with superseded records (for repack:
 * real SPIR-V of the shared corpus, or made by kiln's generator where
 * there is none, packed with zstd), then per
 * trial copies it into a fresh folder, so every trial starts from the same
 * files. A first, unkilled child measures how long the rewrite takes once
 * the cache is open; in each trial a child opens the copy, tells the parent
 * through a pipe, and runs the rewrite, and the parent kills it after a
 * delay drawn uniformly from 0 to 1.2 times that duration. The parent then
 * tells "old cache" from "new cache" by the records file's size and checks:
 *
 *  - compact and prune: rel_check (rel_model.h) with every newest record
 *    acked, except that records the prune drops are only "attempted" (they
 *    may be there or not), and the live count is exactly the old cache's or
 *    the new one's: a rewrite is all or nothing;
 *  - repack: the index is not ahead, the cache opens as a writer with its
 *    dictionary (finishing a dictionary switch that was cut short), every
 *    program loads and unpacks to its SPIR-V byte for byte, and
 *    kiln_cache_check finds the cache whole.
 *
 * The power-cut sweeps run the rewrite through faultio with unsynced writes
 * tracked: the disk dies at write-side call N (every N, and once past the
 * last), then the unsynced writes are undone, the newest one torn in half
 * or not, and the same checks run.
 *
 * Trials per kill case: 60 (compact), 30 (prune), 30 (repack); ten times as
 * many with KILN_RELIABILITY_LONG=1, or --trials N for each. The seed is
 * $KILN_CRASH_SEED (else fixed), printed so a failure can be replayed.
 */
#include "faultio.h"
#include "rel_model.h"
#include "kiln_internal.h"
#include "gen_modules.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The template of compact and prune: IDS keys, every third put again, every
 * seventh a third time. */
#define IDS 120
/* The template of repack: NPROG programs, every fourth put twice. */
#define NPROG 40
/* The day every handle marks uses with, so that prune is deterministic. */
#define TODAY 20000u
/* Prune drops the least recently used records down to this share of the
 * compact size (all records have the same day: the earliest in the file go). */
#define PRUNE_KEEP_PERCENT 60

enum op { OP_COMPACT, OP_PRUNE, OP_REPACK };

static const char *const op_names[] = {"compact", "prune", "repack"};
static unsigned trials_arg;

/* ---- the repack template's programs ------------------------------------------ */

static struct pc_corpus corpus;
static bool corpus_ok;

static void corpus_free(void)
{
    pc_free(&corpus);
}

/* Module of program p (a spread over the corpus), NULL without a corpus. */
static const struct pc_module *prog_mod(size_t p)
{
    if (!corpus_ok) {
        if (gm_load_any(&corpus, 32) < 0 || corpus.n == 0)
            return NULL;
        corpus_ok = true;
        atexit(corpus_free);
    }
    size_t step = corpus.n / NPROG;
    return &corpus.m[(p * (step ? step : 1)) % corpus.n];
}

static struct kiln_key prog_key(size_t p)
{
    uint64_t v[2] = {0x7265706b, p};
    return kiln_hash128(v, sizeof(v));
}

static int put_prog(struct kiln_cache *c, size_t p)
{
    const struct pc_module *m = prog_mod(p);
    if (!m)
        return KILN_ENOENT;
    void *blob = NULL, *pl = NULL;
    size_t bs = 0, size = 0;
    KILN_TRY(kiln_pack(m->words, m->nwords, KILN_CODEC_ZSTD, NULL, &blob, &bs));
    struct kiln_stage_blob st = {.stage = 0, .blob = blob, .blob_size = bs};
    int rc = kiln_program_payload_build(&st, 1, &pl, &size);
    if (rc == KILN_OK)
        rc = kiln_cache_put(c, prog_key(p), pl, size, (uint32_t)(m->nwords * 4),
                            (uint8_t)KILN_CODEC_ZSTD, 1);
    kiln_pack_free(pl);
    kiln_pack_free(blob);
    return rc;
}

/* ---- templates and copies ----------------------------------------------------- */

static int open_for(const char *dir, enum op op, const struct kiln_io *io, struct kiln_cache **c)
{
    struct kiln_cache_options o = {.size = sizeof(o),
                                   .stamp = REL_STAMP,
                                   .today = TODAY,
                                   .io = io,
                                   .threads = 1,
                                   .flags = KILN_CACHE_CREATE};
    if (op == OP_REPACK)
        o.flags |= KILN_CACHE_KEEP_STAMP;
    return kiln_cache_open(dir, &o, c);
}

/* Builds the template of `op` in dir and fills the model (compact, prune). */
static int make_template(const char *dir, enum op op, struct rel_model *m)
{
    memset(m, 0, sizeof(*m));
    struct kiln_cache *c;
    KILN_TRY(open_for(dir, op, NULL, &c));
    int rc = KILN_OK;
    if (op == OP_REPACK) {
        for (size_t p = 0; p < NPROG && rc == KILN_OK; p++)
            rc = put_prog(c, p);
        if (rc == KILN_OK)
            rc = kiln_cache_sync(c);
        for (size_t p = 0; p < NPROG && rc == KILN_OK; p += 4)
            rc = put_prog(c, p);
    } else {
        for (uint32_t v = 1; v <= 3 && rc == KILN_OK; v++) {
            for (uint32_t id = 0; id < IDS && rc == KILN_OK; id++)
                if (v == 1 || (v == 2 && id % 3 == 0) || (v == 3 && id % 7 == 0))
                    rc = rel_put(c, m, id, v);
            if (rc == KILN_OK)
                rc = kiln_cache_sync(c);
            rel_acked(m);
        }
    }
    if (rc == KILN_OK)
        rc = kiln_cache_sync(c);
    kiln_cache_close(c);
    return rc;
}

/* Copies every plain file of `from` into the empty folder `to`. */
static int copy_dir(const char *from, const char *to)
{
    DIR *d = opendir(from);
    if (!d)
        return KILN_EIO;
    int rc = KILN_OK;
    struct dirent *de;
    while (rc == KILN_OK && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char src[4200], dst[4200];
        rc = kiln__path_join(src, sizeof(src), from, de->d_name);
        if (rc == KILN_OK)
            rc = kiln__path_join(dst, sizeof(dst), to, de->d_name);
        void *data = NULL;
        size_t n = 0;
        if (rc == KILN_OK)
            rc = kiln_io_read_file(kiln_io_default(), src, (size_t)1 << 30, &data, &n);
        if (rc == KILN_OK)
            rc = kiln_io_replace_file(kiln_io_default(), dst, data, n);
        free(data);
    }
    closedir(d);
    return rc;
}

static uint64_t file_size(const char *dir, const char *name)
{
    char path[4200];
    struct stat st;
    if (kiln__path_join(path, sizeof(path), dir, name) < 0 || stat(path, &st) != 0)
        return 0;
    return (uint64_t)st.st_size;
}

static bool file_exists(const char *dir, const char *name)
{
    char path[4200];
    struct stat st;
    return kiln__path_join(path, sizeof(path), dir, name) == KILN_OK && stat(path, &st) == 0;
}

/* Runs the rewrite of `op` on an open cache. */
static int run_op(struct kiln_cache *c, enum op op, uint64_t prune_max,
                  struct kiln_cache_rewrite_report *r)
{
    switch (op) {
    case OP_COMPACT:
        return kiln_cache_compact(c, r);
    case OP_PRUNE: {
        struct kiln_cache_prune_options po = {
            .size = sizeof(po), .older_than_days = UINT32_MAX, .max_file_bytes = prune_max};
        return kiln_cache_prune(c, &po, r);
    }
    case OP_REPACK:
        return kiln_cache_repack(c, KILN_CODEC_KILN, KILN_CACHE_DICT_TRAIN, r);
    }
    return KILN_EINVAL;
}

/* ---- what a case knows of its rewrite ----------------------------------------- */

struct plan {
    enum op op;
    char root[2048];     /* the case's folder */
    char tmpl[2100];     /* root/template */
    char trial[2100];    /* root/trial: each trial's copy */
    struct rel_model m;  /* compact, prune: every newest record acked */
    uint64_t prune_max;  /* prune: the size limit */
    uint64_t old_size;   /* programs.kpc of the template */
    uint64_t new_size;   /* programs.kpc after an unkilled rewrite */
    size_t old_live;     /* live records before */
    size_t new_live;     /* and after */
    bool dropped[IDS];   /* prune: ids the rewrite drops */
    uint64_t rewrite_ns; /* an unkilled rewrite, from the open on */
};

static size_t live_count(const char *dir, enum op op)
{
    struct kiln_cache_options o = {.size = sizeof(o),
                                   .stamp = REL_STAMP,
                                   .today = TODAY,
                                   .threads = 1,
                                   .flags = KILN_CACHE_READ_ONLY};
    if (op == OP_REPACK)
        o.flags |= KILN_CACHE_USE_DICT | KILN_CACHE_ANY_STAMP;
    struct kiln_cache *c;
    if (kiln_cache_open(dir, &o, &c) < 0)
        return (size_t)-1;
    size_t n = kiln_cache_count(c);
    kiln_cache_close(c);
    return n;
}

/* Checks a repacked (or not) cache. @return problems found. */
static int check_repack(const char *dir, const char *what)
{
    int problems = rel_index_not_ahead(dir, what);
    struct kiln_cache *c;
    int rc = open_for(dir, OP_REPACK, NULL, &c);
    if (rc < 0) {
        kt_fail(__FILE__, __LINE__, "%s: the cache does not open: %s", what, kiln_errname(rc));
        return problems + 1;
    }
    if (kiln_cache_count(c) != NPROG) {
        kt_fail(__FILE__, __LINE__, "%s: %zu programs, not %d", what, kiln_cache_count(c), NPROG);
        problems++;
    }
    struct kiln_key keys[NPROG];
    for (size_t p = 0; p < NPROG; p++)
        keys[p] = prog_key(p);
    struct kiln_cache_result *res = NULL;
    int64_t got = kiln_cache_load_many(c, keys, NPROG, 1, &res);
    if (got < 0) {
        kt_fail(__FILE__, __LINE__, "%s: load_many: %s", what, kiln_errname((int)got));
        problems++;
    }
    for (size_t p = 0; got >= 0 && p < NPROG; p++) {
        const struct pc_module *m = prog_mod(p);
        struct kiln_stage_blob st[2];
        bool good = res[p].status == KILN_OK &&
                    kiln_program_payload_parse(res[p].data, res[p].size, 2, st) == 1;
        if (good) {
            const uint32_t *w;
            int64_t nw = kiln_unpack_scratch(st[0].blob, st[0].blob_size, kiln_cache_dict(c), &w);
            good = nw == (int64_t)m->nwords && memcmp(w, m->words, m->nwords * 4) == 0;
        }
        if (!good) {
            kt_fail(__FILE__, __LINE__, "%s: program %zu is lost or not byte-exact (%s)", what, p,
                    kiln_errname(res[p].status));
            problems++;
        }
    }
    kiln_cache_results_free(res, NPROG);
    kiln_cache_close(c);
    struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
    rc = kiln_cache_check(dir, NULL, false, &rep);
    if (rc != KILN_OK || !rep.whole) {
        kt_fail(__FILE__, __LINE__, "%s: kiln_cache_check after the reopen: %s, index %s", what,
                kiln_errname(rc), rep.index_text);
        problems++;
    }
    return problems;
}

/* The full check of a folder a rewrite of `pl` was cut short in; `is_new`
 * says whether the new records file is in place. @return problems found. */
static int check_after(const struct plan *pl, const char *dir, bool is_new, const char *what)
{
    if (pl->op == OP_REPACK)
        return check_repack(dir, what);
    struct rel_model m = pl->m;
    for (uint32_t id = 0; id < IDS; id++)
        if (pl->dropped[id])
            m.acked[id] = 0; /* may be there (before the rename) or not */
    int problems = rel_check(dir, &m, what);
    size_t live = live_count(dir, pl->op);
    size_t want = is_new ? pl->new_live : pl->old_live;
    if (live != want) {
        kt_fail(__FILE__, __LINE__, "%s: %zu live records, not %zu: not all or nothing", what, live,
                want);
        problems++;
    }
    return problems;
}

/* Builds the template and runs one unkilled rewrite of a copy (in a child,
 * as the trials do) to learn its duration and result. */
static void plan_init(struct plan *pl, enum op op)
{
    memset(pl, 0, sizeof(*pl));
    pl->op = op;
    snprintf(pl->root, sizeof(pl->root), "%s", kt_tmpdir());
    snprintf(pl->tmpl, sizeof(pl->tmpl), "%s/template", pl->root);
    snprintf(pl->trial, sizeof(pl->trial), "%s/trial", pl->root);
    const char *t = pl->tmpl;
    KT_REQUIRE(kt_mkdir(t) == 0);
    KT_REQUIRE_OK(make_template(t, op, &pl->m));
    pl->old_size = file_size(t, KILN_CACHE_RECORDS_FILE);
    pl->old_live = live_count(t, op);
    if (op == OP_PRUNE) {
        /* The compact size, from the live records' sizes. */
        uint64_t compact = 64;
        for (uint32_t id = 0; id < IDS; id++)
            compact += 48 + ((rel_size(id, pl->m.acked[id]) + 7) & ~(size_t)7);
        pl->prune_max = compact * PRUNE_KEEP_PERCENT / 100;
    }
}

/* The child of one trial: never returns. Writes 'R' once the cache is open,
 * then the rewrite's duration in ns when it finishes. */
static void rewrite_child(const struct plan *pl, const char *dir, int out)
{
    kiln_log_set_level(KILN_LOG_ERROR);
    struct kiln_cache *c;
    if (open_for(dir, pl->op, NULL, &c) < 0)
        _exit(3);
    rel_write_all(out, "R", 1);
    uint64_t t0 = kiln_now_ns();
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    int rc = run_op(c, pl->op, pl->prune_max, &r);
    uint64_t dt = kiln_now_ns() - t0;
    if (rc < 0 || !r.rewritten)
        _exit(4);
    rel_write_all(out, &dt, sizeof(dt));
    kiln_cache_close(c);
    _exit(0);
}

/* Makes pl->trial a fresh copy of the template. */
static int fresh_copy(const struct plan *pl)
{
    kt_rmtree(pl->trial);
    if (kt_mkdir(pl->trial) != 0)
        return KILN_EIO;
    return copy_dir(pl->tmpl, pl->trial);
}

/* Starts a child on a fresh copy of the template (in pl->trial). @return
 * its pid, with the read end of its pipe in *rfd. */
static pid_t start_child(const struct plan *pl, int *rfd)
{
    const char *dir = pl->trial;
    if (fresh_copy(pl) < 0)
        return -1;
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        rewrite_child(pl, dir, fds[1]);
    }
    close(fds[1]);
    *rfd = fds[0];
    return pid;
}

static int wait_child(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

static void plan_measure(struct plan *pl)
{
    const char *dir = pl->trial;
    int rfd;
    pid_t pid = start_child(pl, &rfd);
    KT_REQUIRE(pid > 0);
    char ready = 0;
    uint64_t dt = 0;
    bool ok = rel_read_all(rfd, &ready, 1) && rel_read_all(rfd, &dt, sizeof(dt));
    close(rfd);
    int status = wait_child(pid);
    KT_REQUIRE(ok && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pl->rewrite_ns = dt;
    pl->new_size = file_size(dir, KILN_CACHE_RECORDS_FILE);
    pl->new_live = live_count(dir, pl->op);
    KT_REQUIRE(pl->new_size != pl->old_size);
    if (pl->op == OP_PRUNE) {
        /* Which ids the prune drops: those the rewritten cache lacks. */
        struct kiln_cache_options o = {
            .size = sizeof(o), .stamp = REL_STAMP, .today = TODAY, .flags = KILN_CACHE_READ_ONLY};
        struct kiln_cache *c;
        KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
        unsigned n = 0;
        for (uint32_t id = 0; id < IDS; id++) {
            uint32_t day;
            pl->dropped[id] = kiln_cache_last_use(c, rel_key(id), &day) == KILN_ENOTFOUND;
            n += pl->dropped[id];
        }
        kiln_cache_close(c);
        KT_REQUIRE(n > 0 && n < IDS);
    }
    KT_CHECK_EQ(check_after(pl, dir, true, "unkilled rewrite"), 0);
}

static unsigned trial_count(unsigned normal)
{
    if (trials_arg)
        return trials_arg;
    return rel_long_run() ? normal * 10 : normal;
}

static void kill_trials(enum op op, unsigned normal)
{
    struct plan *pl = calloc(1, sizeof(*pl));
    KT_REQUIRE(pl);
    rel_quiet(true);
    plan_init(pl, op);
    plan_measure(pl);
    unsigned trials = trial_count(normal);
    uint64_t seed = 0x72657772;
    const char *e = getenv("KILN_CRASH_SEED");
    if (e && *e)
        seed = strtoull(e, NULL, 0);
    uint64_t rng = seed ^ (uint64_t)op;
    /* Even trials: uniform over the rewrite, and a little past it. Odd
     * trials: uniform over a window of 0.4 times the rewrite around the
     * commit point as the trials so far place it (between the longest delay
     * that left the old file and the shortest that found the new one), so
     * that the steps around the rename (index, dictionary switch, last use)
     * are hit too when the work before it (training a dictionary) is long. */
    unsigned max_delay_us = (unsigned)KILN_MIN(pl->rewrite_ns * 12 / 10000 + 1, (uint64_t)5000000);
    unsigned last_old = 0, first_new = max_delay_us, window = max_delay_us / 3 + 1;
    unsigned old_whole = 0, new_whole = 0, finished = 0, leftover = 0, problems = 0;
    for (unsigned t = 0; t < trials; t++) {
        const char *dir = pl->trial;
        int rfd;
        pid_t pid = start_child(pl, &rfd);
        KT_REQUIRE(pid > 0);
        char ready = 0;
        bool opened = rel_read_all(rfd, &ready, 1);
        unsigned delay = (unsigned)(kt_rand(&rng) % max_delay_us);
        if (t & 1) {
            unsigned mid = (last_old + first_new) / 2;
            unsigned lo = mid > window / 2 ? mid - window / 2 : 0;
            delay = lo + (unsigned)(kt_rand(&rng) % window);
        }
        if (opened)
            rel_sleep_us(delay);
        kill(pid, SIGKILL);
        int status = wait_child(pid);
        uint64_t dt;
        bool done = rel_read_all(rfd, &dt, sizeof(dt));
        close(rfd);
        KT_CHECK(opened);
        if (WIFEXITED(status)) {
            KT_CHECK_EQ(WEXITSTATUS(status), 0);
            finished += done;
        }
        uint64_t size = file_size(dir, KILN_CACHE_RECORDS_FILE);
        bool is_new = size != pl->old_size;
        if (is_new && size != pl->new_size) {
            kt_fail(__FILE__, __LINE__,
                    "%s trial %u: programs.kpc is %" PRIu64 " bytes, neither "
                    "the old %" PRIu64 " nor the new %" PRIu64,
                    op_names[op], t, size, pl->old_size, pl->new_size);
            problems++;
        }
        leftover += file_exists(dir, KILN_CACHE_RECORDS_FILE ".new");
        old_whole += !is_new;
        if (!is_new && delay > last_old)
            last_old = delay;
        if (is_new && delay < first_new)
            first_new = delay;
        new_whole += is_new && !WIFEXITED(status);
        char what[96];
        snprintf(what, sizeof(what), "%s kill trial %u (delay %u us, %s file)", op_names[op], t,
                 delay, is_new ? "new" : "old");
        problems += (unsigned)check_after(pl, dir, is_new, what);
    }
    rel_quiet(false);
    printf("%s kill trials: %u (seed 0x%" PRIx64 "); an unkilled rewrite takes %.2f ms, delays "
           "0..%u us; %" PRIu64 " -> %" PRIu64 " bytes, %zu -> %zu live records; killed with the "
           "old file in place %u, killed after the rename %u, finished first %u; a "
           "programs.kpc.new left behind %u times; %u problems\n",
           op_names[op], trials, seed, (double)pl->rewrite_ns / 1e6, max_delay_us, pl->old_size,
           pl->new_size, pl->old_live, pl->new_live, old_whole, new_whole, finished, leftover,
           problems);
    KT_CHECK_EQ(problems, 0);
    /* The kills must land inside the rewrite, not all before or after it. */
    KT_CHECK(old_whole > 0);
    KT_CHECK(old_whole < trials);
    free(pl);
}

KT_CASE(kill_compact)
{
    kill_trials(OP_COMPACT, 60);
}

KT_CASE(kill_prune)
{
    kill_trials(OP_PRUNE, 30);
}

KT_CASE(kill_repack)
{
    kill_trials(OP_REPACK, 30);
}

/* ---- power cuts --------------------------------------------------------------- */

/* Runs the rewrite on a fresh copy through a faultio whose disk dies at
 * write-side call `nth`, cuts the power, and checks. @return problems. */
static int cut_point(const struct plan *pl, uint64_t nth, bool tear, uint64_t *calls,
                     unsigned *new_files)
{
    const char *dir = pl->trial;
    if (fresh_copy(pl) < 0) {
        kt_fail(__FILE__, __LINE__, "cannot copy the template");
        return 1;
    }
    struct faultio f;
    faultio_init(&f);
    f.track_unsynced = true;
    faultio_arm(&f, nth, FAULTIO_ANY_WRITE | FAULTIO_OPEN, KILN_EIO, true);
    struct kiln_cache *c;
    if (open_for(dir, pl->op, &f.io, &c) == KILN_OK) {
        struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
        run_op(c, pl->op, pl->prune_max, &r);
        kiln_cache_close(c);
    }
    *calls = f.calls;
    faultio_power_cut(&f, tear);
    faultio_destroy(&f);
    bool is_new = file_size(dir, KILN_CACHE_RECORDS_FILE) != pl->old_size;
    *new_files += is_new;
    char what[96];
    snprintf(what, sizeof(what), "%s power cut%s after call %" PRIu64, op_names[pl->op],
             tear ? " (torn)" : "", nth);
    return check_after(pl, dir, is_new, what);
}

static void power_cut_sweep(enum op op)
{
    struct plan *pl = calloc(1, sizeof(*pl));
    KT_REQUIRE(pl);
    rel_quiet(true);
    plan_init(pl, op);
    plan_measure(pl);
    /* Count the write-side calls of a whole run (open to close). */
    uint64_t calls = 0;
    unsigned new_files = 0;
    KT_CHECK_EQ(cut_point(pl, UINT64_MAX, false, &calls, &new_files), 0);
    KT_CHECK(calls > 4);
    unsigned points = 0, problems = 0, new_total = 0;
    for (int tear = 0; tear < 2; tear++)
        for (uint64_t n = 1; n <= calls + 1; n++) {
            uint64_t got;
            problems += (unsigned)cut_point(pl, n, tear != 0, &got, &new_total);
            points++;
        }
    rel_quiet(false);
    printf("%s power cuts: %" PRIu64 " write-side calls, %u cut points (plain and torn); the new "
           "file in place after %u; %u problems\n",
           op_names[op], calls, points, new_total, problems);
    KT_CHECK_EQ(problems, 0);
    KT_CHECK(new_total > 0 && new_total < points);
    free(pl);
}

KT_CASE(power_cut_compact)
{
    power_cut_sweep(OP_COMPACT);
}

KT_CASE(power_cut_repack)
{
    power_cut_sweep(OP_REPACK);
}

int main(int argc, char **argv)
{
    /* --trials N may stand before or after the case name. */
    int out = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--trials") == 0 && i + 1 < argc) {
            trials_arg = (unsigned)strtoul(argv[++i], NULL, 10);
            continue;
        }
        argv[out++] = argv[i];
    }
    argc = out;
    static const struct kt_case cases[] = {KT_ENTRY(kill_compact), KT_ENTRY(kill_prune),
                                           KT_ENTRY(kill_repack), KT_ENTRY(power_cut_compact),
                                           KT_ENTRY(power_cut_repack)};
    return kt_run(cases, KILN_ARRAY_LEN(cases), argc, argv);
}
