/*
 * test_crash.c - writer processes killed with SIGKILL at random moments,
 * and two writer processes on one cache folder at once.
 *
 * Kill trials: a forked child opens the cache and puts records forever (a
 * sync after every eighth), writing the number of records it has put to a
 * pipe after each completed sync. The parent kills it after a random delay,
 * reads the last count from the pipe, replays the child's (deterministic)
 * sequence of puts into its model - the first `count` acked, up to two sync
 * intervals more possibly attempted - and runs the full check. The folder is
 * kept across trials, so each child starts from whatever the previous kill
 * left (a torn tail, an index behind), and is started afresh every
 * TRIALS_PER_FOLDER trials to keep the check short.
 *
 * The trial count is 200, or --trials N, or $KILN_CRASH_TRIALS; the seed is
 * $KILN_CRASH_SEED (else fixed), printed so a failure can be replayed.
 */
#include "rel_model.h"
#include "kiln_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SYNC_EVERY        8
#define CHILD_MAX_PUTS    400
#define TRIALS_PER_FOLDER 25
#define IDS               300

static unsigned trials_arg;

/* The id and version of put number j of trial t. */
static void seq(unsigned t, unsigned j, uint32_t *id, uint32_t *version)
{
    *id = (uint32_t)((t * 37u + j * 7u) % IDS);
    *version = (uint32_t)(t * 1000u + j + 1u);
}

/* The child of one kill trial: never returns. */
static void crash_child(const char *dir, unsigned t, int out)
{
    kiln_log_set_level(KILN_LOG_ERROR);
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .stamp = REL_STAMP, .flags = KILN_CACHE_CREATE, .threads = 1};
    struct kiln_cache *c;
    if (kiln_cache_open(dir, &opt, &c) < 0)
        _exit(3);
    struct rel_model m; /* the child's own copy; only put's bookkeeping uses it */
    memset(&m, 0, sizeof(m));
    for (unsigned j = 0; j < CHILD_MAX_PUTS; j++) {
        uint32_t id, v;
        seq(t, j, &id, &v);
        if (rel_put(c, &m, id, v) < 0)
            _exit(4);
        if ((j + 1) % SYNC_EVERY == 0) {
            if (kiln_cache_sync(c) < 0)
                _exit(4);
            uint32_t done = j + 1;
            rel_write_all(out, &done, sizeof(done));
        }
    }
    kiln_cache_close(c);
    _exit(0);
}

static unsigned trial_count(void)
{
    if (trials_arg)
        return trials_arg;
    const char *e = getenv("KILN_CRASH_TRIALS");
    return e && atoi(e) > 0 ? (unsigned)atoi(e) : 200;
}

KT_CASE(kill_writer)
{
    unsigned trials = trial_count();
    uint64_t seed = 0x6b696c6c;
    const char *e = getenv("KILN_CRASH_SEED");
    if (e && *e)
        seed = strtoull(e, NULL, 0);
    printf("kill trials: %u, seed 0x%" PRIx64 "\n", trials, seed);
    uint64_t rng = seed;
    /* How long one child lives when nobody kills it: the kill delays are
     * spread over that (and a little past it). */
    uint64_t life_ns = 0;
    {
        const char *scratch = kt_tmpdir();
        int fds[2];
        KT_REQUIRE(pipe(fds) == 0);
        fflush(NULL);
        uint64_t t0 = kiln_now_ns();
        pid_t pid = fork();
        KT_REQUIRE(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            crash_child(scratch, 0, fds[1]);
        }
        close(fds[1]);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        life_ns = kiln_now_ns() - t0;
        close(fds[0]);
        KT_REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    unsigned max_delay_us = (unsigned)KILN_MIN(life_ns * 11 / 10000 + 1, (uint64_t)2000000);
    printf("kill trials: a child lives %.1f ms unkilled; delays 0..%u us\n", (double)life_ns / 1e6,
           max_delay_us);
    struct rel_model m;
    const char *dir = NULL;
    unsigned problems = 0, killed = 0, finished = 0, synced_total = 0, before_first_sync = 0;
    rel_quiet(true);
    for (unsigned t = 0; t < trials; t++) {
        if (t % TRIALS_PER_FOLDER == 0) {
            dir = kt_tmpdir();
            memset(&m, 0, sizeof(m));
        }
        int fds[2];
        KT_REQUIRE(pipe(fds) == 0);
        fflush(NULL);
        pid_t pid = fork();
        KT_REQUIRE(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            crash_child(dir, t, fds[1]);
        }
        close(fds[1]);
        /* Kill anywhere from before the open to just past the last put. */
        unsigned delay = (unsigned)(kt_rand(&rng) % max_delay_us);
        rel_sleep_us(delay);
        kill(pid, SIGKILL);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        uint32_t last = 0, v;
        ssize_t r;
        while ((r = read(fds[0], &v, sizeof(v))) == (ssize_t)sizeof(v))
            last = v;
        close(fds[0]);
        if (WIFEXITED(status)) {
            finished++;
            KT_CHECK_EQ(WEXITSTATUS(status), 0);
            /* The child lived less than `delay` this time (a busy machine
             * makes the first, timed child slow): spread later kills over
             * the life it had, so they keep landing inside it. */
            max_delay_us = KILN_MAX(delay, 1000u);
        } else {
            killed++;
        }
        before_first_sync += last == 0;
        synced_total += last;
        /* Replay the child's puts: the synced ones are acked, and up to two
         * sync intervals more may have reached the file. */
        uint32_t id, ver;
        for (unsigned j = 0; j < last; j++) {
            seq(t, j, &id, &ver);
            m.acked[id] = ver;
            m.attempted[id] = ver;
        }
        for (unsigned j = last; j < KILN_MIN(last + 2u * SYNC_EVERY, (unsigned)CHILD_MAX_PUTS);
             j++) {
            seq(t, j, &id, &ver);
            m.attempted[id] = ver;
        }
        char what[64];
        snprintf(what, sizeof(what), "kill trial %u (%u synced)", t, last);
        problems += (unsigned)rel_check(dir, &m, what);
    }
    rel_quiet(false);
    printf("kill trials: %u run, %u killed, %u finished first, %u killed before any sync; %u "
           "synced records checked in all; %u problems\n",
           trials, killed, finished, before_first_sync, synced_total, problems);
    KT_CHECK_EQ(problems, 0);
    /* The delays must land all over the child's life, not only before it. */
    KT_CHECK(killed > trials / 4);
    KT_CHECK(before_first_sync < trials);
}

/*
 * One of the two writers. Each wants the writer lock; while the other holds
 * it the open fails with KILN_EBUSY, and the process reads the cache
 * read-only (every record it sees must load byte-exact), then tries the
 * writer lock again. With the lock it puts its own ids and syncs. Exit
 * codes: 0 done (10 when the first writer open was refused, as the second
 * process expects), 1 a check failed, 2 an unexpected error.
 */
static int two_writers_child(const char *dir, uint32_t first_id, unsigned n, int ready_fd)
{
    kiln_log_set_level(KILN_LOG_ERROR);
    struct kiln_cache_options wopt = {
        .size = sizeof(wopt), .stamp = REL_STAMP, .flags = KILN_CACHE_CREATE, .threads = 1};
    struct kiln_cache_options ropt = {
        .size = sizeof(ropt), .stamp = REL_STAMP, .flags = KILN_CACHE_READ_ONLY, .threads = 1};
    struct rel_model m;
    memset(&m, 0, sizeof(m));
    bool refused = false;
    struct kiln_cache *c = NULL;
    for (unsigned attempt = 0;; attempt++) {
        int rc = kiln_cache_open(dir, &wopt, &c);
        if (rc == KILN_OK)
            break;
        if (rc != KILN_EBUSY || attempt > 200000)
            return 2;
        refused = true;
        /* Read what the other writer has made durable so far. */
        struct kiln_cache *r;
        rc = kiln_cache_open(dir, &ropt, &r);
        if (rc == KILN_OK) {
            struct kiln_cache_entry *es;
            size_t ne;
            if (kiln_cache_entries(r, &es, &ne) < 0)
                return 2;
            struct kiln_key *keys = malloc((ne ? ne : 1) * sizeof(*keys));
            for (size_t i = 0; keys && i < ne; i++)
                keys[i] = es[i].key;
            struct kiln_cache_result *res = NULL;
            if (keys && kiln_cache_load_many(r, keys, ne, 1, &res) < 0)
                return 2;
            for (size_t i = 0; res && i < ne; i++) {
                /* A reader racing the writer may see a record the writer is
                 * still writing as missing, never as wrong bytes. */
                if (res[i].status != KILN_OK)
                    continue;
                const unsigned char *p = res[i].data;
                if (res[i].size < 8)
                    return 1;
                uint32_t id = kiln__load_le32(p), v = kiln__load_le32(p + 4);
                unsigned char want[2400];
                if (rel_size(id, v) != res[i].size)
                    return 1;
                rel_payload(id, v, want);
                if (!kiln_key_equal(rel_key(id), keys[i]) || memcmp(want, p, res[i].size) != 0)
                    return 1;
            }
            kiln_cache_results_free(res, ne);
            free(keys);
            kiln_cache_entries_free(es);
            kiln_cache_close(r);
        } else if (rc != KILN_ENOENT) {
            return 2;
        }
        rel_sleep_us(200);
    }
    if (ready_fd >= 0) {
        rel_write_all(ready_fd, "L", 1);
        close(ready_fd);
    }
    for (unsigned i = 0; i < n; i++) {
        if (rel_put(c, &m, first_id + i, 1) < 0)
            return 2;
        if (i % 16 == 15 && kiln_cache_sync(c) < 0)
            return 2;
        if (ready_fd >= 0 && i % 16 == 15)
            rel_sleep_us(500); /* keep the lock a while, so the other process meets it */
    }
    if (kiln_cache_sync(c) < 0)
        return 2;
    kiln_cache_close(c);
    return refused ? 10 : 0;
}

KT_CASE(two_writers)
{
    const char *dir = kt_tmpdir();
    const unsigned n = 160;
    int ready[2];
    KT_REQUIRE(pipe(ready) == 0);
    fflush(NULL);
    pid_t a = fork();
    KT_REQUIRE(a >= 0);
    if (a == 0) {
        close(ready[0]);
        _exit(two_writers_child(dir, 0, n, ready[1]));
    }
    close(ready[1]);
    char ch = 0;
    ssize_t got;
    while ((got = read(ready[0], &ch, 1)) < 0 && errno == EINTR) {
    }
    close(ready[0]);
    KT_CHECK_EQ(got, 1); /* the first process holds the writer lock now */
    pid_t b = fork();
    KT_REQUIRE(b >= 0);
    if (b == 0)
        _exit(two_writers_child(dir, n, n, -1));
    int sa = 0, sb = 0;
    while (waitpid(a, &sa, 0) < 0 && errno == EINTR) {
    }
    while (waitpid(b, &sb, 0) < 0 && errno == EINTR) {
    }
    KT_CHECK(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
    /* The second writer met the lock (KILN_EBUSY), read meanwhile, then wrote. */
    KT_CHECK(WIFEXITED(sb) && WEXITSTATUS(sb) == 10);
    struct rel_model m;
    memset(&m, 0, sizeof(m));
    for (uint32_t id = 0; id < 2 * n; id++)
        m.acked[id] = m.attempted[id] = 1;
    KT_CHECK_EQ(rel_check(dir, &m, "two writers"), 0);
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
    static const struct kt_case cases[] = {KT_ENTRY(kill_writer), KT_ENTRY(two_writers)};
    return kt_run(cases, KILN_ARRAY_LEN(cases), argc, argv);
}
