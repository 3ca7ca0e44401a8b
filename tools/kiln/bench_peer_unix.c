/*
 * bench_peer_unix.c - the processes of `kiln bench peer` (bench_peer.c) on
 * POSIX systems: each tool started with posix_spawn, its stdout and stderr
 * in files of the run's private folder, timed from the spawn to wait4's
 * return, its peak from wait4's rusage.
 *
 * Invariants and why they hold:
 *
 * - Every run is cold: this process sets PEER_ENV in its own environment
 *   (bench_child_no_disk_cache) before the first spawn and every child
 *   inherits it; the peer is given no pipeline cache; kiln gets a cache
 *   folder that did not exist ("kiln-Nt" in the private folder), so its
 *   build ledger and pipelines.vkc hold nothing.
 * - ru_maxrss is exact for what it covers: the kernel's high-water mark of
 *   the child, and of its descendants as the largest one (Linux's
 *   wait4 keeps the larger of the two), never a sum. A tree of several
 *   processes at once (--master-process, --isolate) is sampled instead:
 *   every SAMPLE_MS a thread sums the PSS (smaps_rollup; the resident set
 *   where the kernel has none) of the child and of every descendant it
 *   can find through /proc/PID/task/TID/children, and keeps the largest
 *   sum. PSS shares a page among the processes that map it, so the
 *   driver's libraries count once; a peak shorter than the interval can
 *   be missed.
 * - The archives are read through once before the first run, so the first
 *   tool does not pay the disk for the second; --warmup also runs each tool
 *   once, unmeasured, to load the driver's files.
 * - The private folder (mkdtemp) holds only what this run wrote and is
 *   removed at the end, also when a run failed.
 */
#include "bench_peer.h"
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define SAMPLE_MS  5
#define TREE_DEPTH 8

/* ---- the process tree's memory ------------------------------------------------- */

/* @return the PSS of process `pid` in bytes (its resident set where there
 * is no smaps_rollup), or 0 when it is gone. */
static uint64_t pss_of(long pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%ld/smaps_rollup", pid);
    FILE *f = fopen(path, "re");
    if (f) {
        uint64_t kb = 0;
        while (fgets(line, sizeof(line), f))
            if (strncmp(line, "Pss:", 4) == 0) {
                kb = strtoull(line + 4, NULL, 10);
                break;
            }
        fclose(f);
        return kb * 1024u;
    }
    snprintf(path, sizeof(path), "/proc/%ld/statm", pid);
    f = fopen(path, "re");
    unsigned long long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* @return the summed PSS of `pid` and of its descendants, found through
 * each of its threads' children lists (a child belongs to the thread that
 * started it). */
static uint64_t tree_pss(long pid, int depth)
{
    uint64_t sum = pss_of(pid);
    if (depth >= TREE_DEPTH)
        return sum;
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%ld/task", pid);
    DIR *d = opendir(dir);
    if (!d)
        return sum;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[64 + sizeof(e->d_name) + 16];
        snprintf(path, sizeof(path), "%s/%s/children", dir, e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        long child;
        while (fscanf(f, "%ld", &child) == 1)
            sum += tree_pss(child, depth + 1);
        fclose(f);
    }
    closedir(d);
    return sum;
}

struct tree_sampler {
    pthread_t thread;
    long pid;
    atomic_bool stop;
    uint64_t peak; /* written by the thread only, read after the join */
};

static void *tree_loop(void *arg)
{
    struct tree_sampler *t = arg;
    while (!atomic_load(&t->stop)) {
        uint64_t v = tree_pss(t->pid, 0);
        t->peak = v > t->peak ? v : t->peak;
        struct timespec ts = {0, SAMPLE_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* ---- one process ------------------------------------------------------------------ */

/* What one spawn runs: argv (argv[0] the path), its output files, whether
 * its tree is sampled. */
struct spawn_job {
    char **argv;
    char out[CLI_PATH_MAX + 64], err[CLI_PATH_MAX + 64];
    bool sample;
};

/*
 * Starts job->argv with stdout and stderr in job->out and job->err, waits
 * for it, and fills s: exit code, wall time, ru_maxrss and, when sampled,
 * the tree's peak. @return 0 (whatever the child's exit code), or KILN_EIO
 * after one line when it could not be started.
 */
static int spawn_measure(const char *name, const struct spawn_job *job, struct peer_side *s)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0) {
        cli_error(name, "posix_spawn_file_actions_init failed");
        return KILN_EIO;
    }
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, job->out, O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, job->err, O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    fflush(stdout);
    fflush(stderr);
    pid_t pid;
    uint64_t t0 = kiln_now_ns();
    int rc = posix_spawn(&pid, job->argv[0], &fa, NULL, job->argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        cli_error(name, "%s: cannot start: %s", job->argv[0], strerror(rc));
        return KILN_EIO;
    }
    struct tree_sampler t = {.pid = pid, .peak = 0};
    atomic_init(&t.stop, false);
    bool sampling = job->sample && pthread_create(&t.thread, NULL, tree_loop, &t) == 0;
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    s->wall_ns = kiln_now_ns() - t0;
    if (sampling) {
        atomic_store(&t.stop, true);
        pthread_join(t.thread, NULL);
    }
    s->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    s->maxrss_bytes = (uint64_t)ru.ru_maxrss * 1024u;
    s->sampled = sampling;
    s->tree_peak_bytes = sampling ? t.peak : 0;
    return KILN_OK;
}

/* @return the whole file at `path` as a string (heap), or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* @return the whole number of "KEY": in a report, or -1. */
static int64_t json_count(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = text ? strstr(text, pat) : NULL;
    if (!p)
        return -1;
    p += strlen(pat);
    return *p >= '0' && *p <= '9' ? (int64_t)strtoull(p, NULL, 10) : -1;
}

/* The peer's counts: its summary lines, on stderr or stdout. */
static void count_peer(const struct spawn_job *job, struct peer_side *s)
{
    const char *files[] = {job->err, job->out};
    struct peer_counts sum = {0};
    for (size_t i = 0; i < CLI_ARRAY_LEN(files); i++) {
        char *text = slurp(files[i]);
        struct peer_counts c;
        bench_peer_parse_summary(text ? text : "", &c);
        free(text);
        sum.graphics += c.graphics;
        sum.compute += c.compute;
        sum.raytracing += c.raytracing;
        sum.summaries += c.summaries;
    }
    s->kinds = sum;
    s->counted = sum.summaries > 0;
    s->pipelines = sum.graphics + sum.compute + sum.raytracing;
    s->built = s->pipelines;
}

/* kiln's counts: its --json report's pipelines_built, _skipped, _failed. */
static void count_kiln(const struct spawn_job *job, struct peer_side *s)
{
    char *text = slurp(job->out);
    int64_t built = json_count(text, "pipelines_built");
    int64_t skipped = json_count(text, "pipelines_skipped");
    int64_t failed = json_count(text, "pipelines_failed");
    free(text);
    s->counted = built >= 0 && skipped >= 0 && failed >= 0;
    if (!s->counted)
        return;
    s->built = (uint64_t)built;
    s->skipped = (uint64_t)skipped;
    s->failed = (uint64_t)failed;
    s->pipelines = s->built + s->skipped + s->failed;
}

/* ---- the runs ------------------------------------------------------------------------ */

struct peer_ctx {
    struct peer_bench *b;
    const char *const *archives;
    size_t narchives;
    char tmp[CLI_PATH_MAX];
    char kiln[CLI_PATH_MAX]; /* this executable */
    unsigned serial;         /* the next cache folder's number */
};

/* Quotes argv[] (NULL-terminated) into a command line; with `from` < `to`,
 * argv[from..to) (the archives) as the one word ARCHIVES... .
 * @return 0 or KILN_ENOMEM. */
static int command_line(char **argv, size_t from, size_t to, char **line)
{
    *line = NULL;
    for (size_t i = 0; argv[i]; i++) {
        if (i > from && i < to)
            continue;
        const char *w = i == from && from < to ? "ARCHIVES..." : argv[i];
        if (bench_peer_quote(line, w) < 0) {
            free(*line);
            *line = NULL;
            return KILN_ENOMEM;
        }
    }
    return KILN_OK;
}

/* The fixed arguments of one tool's command, before and after the archives. */
struct argv_parts {
    const char *head[12];
    size_t nhead;
    const char *tail[10];
    size_t ntail;
};

/* Builds HEAD... ARCHIVES... TAIL... (heap array, NULL-terminated), runs
 * it and reads its counts. @return 0 or the error (one line). */
static int run_side(struct peer_ctx *x, const struct argv_parts *p, const char *tag, bool peer,
                    bool sample, struct peer_side *s)
{
    size_t n = p->nhead + x->narchives + p->ntail;
    struct spawn_job job = {.argv = calloc(n + 1, sizeof(char *)), .sample = sample};
    if (!job.argv) {
        cli_error(x->b->name, "out of memory");
        return KILN_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < p->nhead; i++)
        job.argv[k++] = (char *)(uintptr_t)p->head[i]; /* posix_spawn does not write them */
    for (size_t i = 0; i < x->narchives; i++)
        job.argv[k++] = (char *)(uintptr_t)x->archives[i];
    for (size_t i = 0; i < p->ntail; i++)
        job.argv[k++] = (char *)(uintptr_t)p->tail[i];
    snprintf(job.out, sizeof(job.out), "%s/%s.out", x->tmp, tag);
    snprintf(job.err, sizeof(job.err), "%s/%s.err", x->tmp, tag);
    int rc = command_line(job.argv, 0, 0, &s->command);
    if (rc == 0)
        rc = command_line(job.argv, p->nhead, p->nhead + x->narchives, &s->short_command);
    if (rc == 0)
        rc = spawn_measure(x->b->name, &job, s);
    else
        cli_error(x->b->name, "out of memory");
    if (rc == 0 && peer)
        count_peer(&job, s);
    else if (rc == 0)
        count_kiln(&job, s);
    free(job.argv);
    return rc;
}

/* One count of one mode: the peer, then kiln into a new cache. */
static int run_pair(struct peer_ctx *x, unsigned threads, bool isolated, struct peer_run *r)
{
    const struct peer_bench *b = x->b;
    char nt[16], dev[16], tag[48], ptag[64], ktag[64], cache[CLI_PATH_MAX + 64];
    snprintf(nt, sizeof(nt), "%u", threads);
    snprintf(dev, sizeof(dev), "%u", b->device);
    snprintf(tag, sizeof(tag), "%ut%s", threads, isolated ? "-isolated" : "");
    snprintf(ptag, sizeof(ptag), "peer-%s", tag);
    snprintf(ktag, sizeof(ktag), "kiln-%s", tag);
    r->threads = threads;
    r->isolated = isolated;
    r->peer.exit_code = r->kiln.exit_code = -1;

    struct argv_parts pp = {.head = {b->peer, "--num-threads", nt}, .nhead = 3};
    if (isolated)
        pp.head[pp.nhead++] = "--master-process";
    if (b->use_device) {
        pp.head[pp.nhead++] = "--device-index";
        pp.head[pp.nhead++] = dev;
    }
    int rc = run_side(x, &pp, ptag, true, isolated, &r->peer);
    if (rc < 0)
        return rc;

    /* A cache folder no run has used (a warm-up ran the same count). */
    snprintf(cache, sizeof(cache), "%s/cache-%s-%u", x->tmp, tag, x->serial++);
    /* The first option after the archives ends --corpus's list. */
    struct argv_parts kp = {.head = {x->kiln, "prepare", "--corpus"},
                            .nhead = 3,
                            .tail = {"--cache", cache, "--jobs", nt},
                            .ntail = 4};
    if (isolated)
        kp.tail[kp.ntail++] = "--isolate";
    if (b->use_device) {
        kp.tail[kp.ntail++] = "--device";
        kp.tail[kp.ntail++] = dev;
    }
    kp.tail[kp.ntail++] = "--json";
    return run_side(x, &kp, ktag, false, isolated, &r->kiln);
}

/* Reads every archive through once (into the page cache). */
static void read_through(const struct peer_ctx *x)
{
    char buf[1 << 16];
    for (size_t i = 0; i < x->narchives; i++) {
        int fd = open(x->archives[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        while (read(fd, buf, sizeof(buf)) > 0) {
        }
        close(fd);
    }
}

/* @return 0 with this executable's path in x->kiln, or KILN_EIO after one line. */
static int find_self(struct peer_ctx *x)
{
    ssize_t n = readlink("/proc/self/exe", x->kiln, sizeof(x->kiln) - 1);
    if (n <= 0) {
        cli_error(x->b->name, "cannot find this executable's path (/proc/self/exe): %s",
                  strerror(errno));
        return KILN_EIO;
    }
    x->kiln[n] = '\0';
    return KILN_OK;
}

/* Every count, each mode: the warm-up first when asked (its figures are
 * dropped), then the measured pairs into b->runs. */
static int run_all(struct peer_ctx *x)
{
    struct peer_bench *b = x->b;
    if (b->warmup) {
        struct peer_run w;
        memset(&w, 0, sizeof(w));
        int rc = run_pair(x, b->threads[0], false, &w);
        bench_peer_run_free(&w);
        if (rc < 0)
            return rc;
    }
    unsigned modes = b->isolate ? 2 : 1;
    for (unsigned i = 0; i < b->nthreads; i++)
        for (unsigned m = 0; m < modes; m++) {
            struct peer_run *r = &b->runs[b->nruns++];
            fprintf(stderr, "%s: %u thread%s%s: the peer, then kiln...\n", b->name, b->threads[i],
                    CLI_S(b->threads[i]), m ? ", isolated" : "");
            int rc = run_pair(x, b->threads[i], m == 1, r);
            if (rc < 0)
                return rc;
        }
    return KILN_OK;
}

int bench_peer_measure(struct peer_bench *b)
{
    struct peer_ctx x = {.b = b, .archives = b->archives, .narchives = b->narchives};
    if (find_self(&x) < 0)
        return KILN_EIO;
    if (access(b->peer, X_OK) != 0) {
        cli_error(b->name, "--peer: %s: not an executable: %s", b->peer, strerror(errno));
        return KILN_EINVAL;
    }
    if (bench_tmpdir(b->name, "bench-peer", x.tmp, sizeof(x.tmp)) < 0)
        return KILN_EIO;
    int rc = KILN_OK;
    const char *gen[1] = {b->archive};
    if (b->generate) {
        uint64_t t0 = kiln_now_ns();
        rc = bench_generated_archive(b->name, x.tmp, b->generate, b->seed, b->keep, b->archive,
                                     sizeof(b->archive));
        b->generate_s = cli_seconds(t0, kiln_now_ns());
        x.archives = gen;
        x.narchives = 1;
    }
    if (rc == KILN_OK) {
        bench_child_no_disk_cache(); /* inherited by every child */
        read_through(&x);
        rc = run_all(&x);
    }
    if (bench_remove_tree(x.tmp) != 0) {
        cli_error(b->name, "%s: could not remove the temporary folder: %s", x.tmp, strerror(errno));
        if (rc == KILN_OK)
            rc = KILN_EIO;
    }
    return rc;
}
