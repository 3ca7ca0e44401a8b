/*
 * bench_store_unix.c - `kiln bench store`: opening and loading a program cache,
 * the old way against kiln's, in one run.
 *
 * It makes a cache of N records of random bytes (sizes uniform in
 * [K/2, 3K/2] KiB), syncs it, then measures side by side:
 *
 * - open by scanning: the baseline. One pread of each record's head, then a
 *   seek to the next head, collecting key/offset/size - what a cache
 *   without an index has to do at every start;
 * - open by the index: kiln_cache_open (one read of the index, a check of
 *   its last entry) - both cold (both files dropped from the page cache
 *   with posix_fadvise(POSIX_FADV_DONTNEED) first) and warm;
 * - load every record (kiln_cache_load_many, checked) on 1 and on T
 *   threads, cold, against a plain sequential read() of the whole records
 *   file in 1 MiB chunks, cold: the storage's own limit.
 *
 * With --max-size S the cache is made with a size cap of S bytes, which it
 * keeps itself (kiln_cache_options.max_size): the records are written in
 * runs of P records (--prune-every P, default a twentieth of them), each
 * through a handle of its own (open, puts, sync, close), so each run's
 * puts evict the earlier runs' least recently used records (a handle never
 * evicts its own). The same runs are written once more into a cache
 * without a cap, and the two are compared side by side: the store rate
 * (capped over uncapped) and the open of the capped cache at its cap
 * against an uncapped cache of the same records (made by merging the
 * capped one into a new one), cold and warm, the best of three alternating.
 * The cache's size after each run is size_timeline (scripts/plot.py draws
 * it against the cap); the opens and loads then measure the capped cache.
 *
 * With --layer it also splits the same records between a read-only layer
 * (the first half) and a cache above it (the rest), and times open + load
 * of every record through the cache and its layer against the same in one
 * cache, cold and warm: what a shipped layer costs a start
 * (layer_vs_one_cold, layer_vs_one_warm).
 *
 * Absolute times depend on the machine and on whoever else uses it; the
 * ratios are the figures to compare.
 */
#include "cli.h"
#include "commands.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#define BENCH_STAMP 0x6b696c6e62656e63ull /* "kilnbenc" */

static const char help[] =
    "usage: %s [--records N] [--mean-kb K] [--threads T] [--cache DIR]\n"
    "       [--max-size S [--prune-every P]] [--layer] [--json]\n"
    "\n"
    "Makes a cache of N records averaging K KiB, then measures opening it by\n"
    "scanning every record head (the baseline) against opening it by its index,\n"
    "cold (files dropped from the page cache) and warm, and loading every record\n"
    "on 1 and on T threads against a sequential read of the whole file.\n"
    "\n"
    "  --records N   records to write (default 40000)\n"
    "  --mean-kb K   mean record size in KiB (default 16; 150 makes about 6 GB)\n"
    "  --threads T   threads for the parallel load (default: the pool's choice\n"
    "                for reading; at most 16)\n"
    "  --cache DIR   make the cache in DIR and keep it (default: a temporary\n"
    "                folder under $TMPDIR or /var/tmp, removed afterwards); a\n"
    "                kiln cache there is started over, unless another kiln\n"
    "                holds it (then nothing is written, exit 1)\n"
    "  --max-size S  give the cache a size cap of S bytes (K, M, G suffixes),\n"
    "                which it keeps itself as it is written; the same records\n"
    "                written without a cap too: store rate and open time, capped\n"
    "                against uncapped, side by side (cap_* in --json), and the\n"
    "                cache's size after each run (size_timeline)\n"
    "  --prune-every P  with --max-size: records written per run, each through a\n"
    "                handle of its own (default: a twentieth of the records)\n"
    "  --layer       also: the same records split between a read-only layer and\n"
    "                a cache above it, open + load against one cache\n"
    "  --json        one JSON object on stdout\n"
    "  --help        this text\n";

struct bench {
    const char *name;
    char dir[4096];
    char rec[4200];
    char idx[4200];
    uint64_t records;
    uint64_t mean_kb;
    unsigned threads;
    bool json;
    uint64_t prune_every, max_size; /* records per run, --max-size (0: no cap) */
    uint64_t kept;                  /* records in the cache once written (and pruned) */
    bool layer;                     /* --layer */
    struct size_timeline *tl;       /* with --max-size */
    struct cap_times *cap;          /* with --max-size */
};

/* --max-size: the capped cache against an uncapped one, side by side. */
struct cap_times {
    double store_capped, store_uncapped;    /* seconds to write every run */
    uint64_t bytes;                         /* payload bytes written (each) */
    double open_capped_cold, open_ref_cold; /* open at the cap vs the same records uncapped */
    double open_capped_warm, open_ref_warm;
    uint64_t evictions, evicted, overflows; /* summed over the runs */
};

/* The capped cache's size as it was written: a point after every run
 * (after_prune: the run evicted; prunes and dropped: evictions and the
 * records they evicted, over all runs). */
struct size_timeline {
    uint64_t *ms, *written, *file_bytes, *records;
    bool *after_prune;
    size_t n, cap;
    uint64_t prunes, dropped;
};

static void timeline_note(struct size_timeline *tl, uint64_t t0, uint64_t written,
                          struct kiln_cache *c, bool after_prune)
{
    if (tl->n == tl->cap) {
        size_t cap = tl->cap ? tl->cap * 2 : 64;
        uint64_t **cols[] = {&tl->ms, &tl->written, &tl->file_bytes, &tl->records};
        for (size_t i = 0; i < CLI_ARRAY_LEN(cols); i++) {
            uint64_t *p = realloc(*cols[i], cap * sizeof(uint64_t));
            if (!p)
                return; /* the point is left out; the bench goes on */
            *cols[i] = p;
        }
        bool *a = realloc(tl->after_prune, cap * sizeof(bool));
        if (!a)
            return;
        tl->after_prune = a;
        tl->cap = cap;
    }
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    tl->ms[tl->n] = (kiln_now_ns() - t0) / 1000000u;
    tl->written[tl->n] = written;
    tl->file_bytes[tl->n] = st.file_bytes;
    tl->records[tl->n] = st.records;
    tl->after_prune[tl->n] = after_prune;
    tl->n++;
}

static void timeline_json(struct cli_json *j, const struct bench *b)
{
    const struct size_timeline *tl = b->tl;
    cli_json_object_begin(j, "size_timeline");
    cli_json_u64(j, "prune_every", b->prune_every);
    cli_json_u64(j, "max_file_bytes", b->max_size);
    cli_json_u64(j, "prunes", tl->prunes);
    cli_json_u64(j, "dropped", tl->dropped);
    const char *names[] = {"ms", "written", "file_bytes", "records"};
    const uint64_t *cols[] = {tl->ms, tl->written, tl->file_bytes, tl->records};
    for (size_t c = 0; c < CLI_ARRAY_LEN(cols); c++)
        cli_json_u64_array(j, names[c], cols[c], tl->n);
    cli_json_array_begin(j, "after_prune");
    for (size_t i = 0; i < tl->n; i++)
        cli_json_bool(j, NULL, tl->after_prune[i]);
    cli_json_array_end(j);
    cli_json_object_end(j);
}

static void timeline_free(struct size_timeline *tl)
{
    free(tl->ms);
    free(tl->written);
    free(tl->file_bytes);
    free(tl->records);
    free(tl->after_prune);
}

/* Drops both files from the page cache, so the next read comes from the
 * storage. The files are synced, so every page is clean and can go. */
static int drop_caches(const struct bench *b)
{
    const char *paths[] = {b->rec, b->idx};
    for (size_t i = 0; i < CLI_ARRAY_LEN(paths); i++) {
        int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            cli_error(b->name, "%s: %s", paths[i], strerror(errno));
            return -1;
        }
        int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
        if (rc != 0) {
            cli_error(b->name, "%s: posix_fadvise: %s", paths[i], strerror(rc));
            return -1;
        }
    }
    return 0;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The bench's records, the same bytes every time: a buffer for the
 * largest, and the generator's state. */
struct recgen {
    uint64_t *buf;
    uint64_t rng;
    uint64_t bytes; /* payload bytes stored so far */
};

static int recgen_init(const struct bench *b, struct recgen *g)
{
    /* The largest record is 1.5 x the mean; multiply before dividing, so an
     * odd --mean-kb does not round the buffer below it. */
    g->buf = malloc((size_t)(b->mean_kb * 1024 * 3 / 2) + 8);
    g->rng = 12345;
    g->bytes = 0;
    return g->buf ? KILN_OK : KILN_ENOMEM;
}

/* Stores record i (the next of the generator) in `c`. */
static int put_next(const struct bench *b, struct recgen *g, struct kiln_cache *c, uint64_t i)
{
    uint64_t lo = b->mean_kb * 1024 / 2, span = b->mean_kb * 1024 + 1;
    size_t size = (size_t)(lo + splitmix(&g->rng) % span);
    for (size_t w = 0; w < size / 8 + 1; w++)
        g->buf[w] = splitmix(&g->rng);
    struct kiln_key key = {.lo = splitmix(&g->rng), .hi = i};
    g->bytes += size;
    return kiln_cache_put(c, key, g->buf, size, (uint32_t)size, 0, 2);
}

/*
 * Writes the bench's records: record i goes to `first` below `split`, to
 * `rest` from there (one cache: the same handle twice).
 */
static int write_records(const struct bench *b, struct kiln_cache *first, struct kiln_cache *rest,
                         uint64_t split)
{
    struct recgen g;
    int rc = recgen_init(b, &g);
    struct cli_progress prog;
    cli_progress_start(&prog, "writing", b->records, false);
    for (uint64_t i = 0; i < b->records && rc == KILN_OK; i++) {
        rc = put_next(b, &g, i < split ? first : rest, i);
        cli_progress_update(&prog, i + 1);
    }
    cli_progress_finish(&prog, b->records);
    free(g.buf);
    return rc;
}

/*
 * Writes the records into the cache in `dir` in runs of b->prune_every, each
 * through a handle of its own (open, puts, sync, close), with size cap
 * `cap` (KILN_CACHE_NO_CAP: none), noting each run's end in `tl` (may be
 * NULL). @return the seconds it took, or < 0 after one error line.
 */
static double write_runs(struct bench *b, const char *dir, uint64_t cap, struct size_timeline *tl)
{
    struct recgen g;
    if (recgen_init(b, &g) < 0)
        return -1;
    struct cli_progress prog;
    cli_progress_start(&prog, cap == KILN_CACHE_NO_CAP ? "writing, no cap" : "writing, capped",
                       b->records, false);
    int rc = KILN_OK;
    uint64_t t0 = kiln_now_ns();
    for (uint64_t i = 0; i < b->records && rc == KILN_OK;) {
        struct kiln_cache_options opt = {.size = sizeof(opt),
                                         .stamp = BENCH_STAMP,
                                         .flags = i ? 0u : KILN_CACHE_RESET,
                                         .max_size = i ? 0 : cap};
        struct kiln_cache *c;
        rc = kiln_cache_open(dir, &opt, &c);
        if (rc < 0)
            break;
        uint64_t end = i + b->prune_every < b->records ? i + b->prune_every : b->records;
        for (; i < end && rc == KILN_OK; i++) {
            rc = put_next(b, &g, c, i);
            cli_progress_update(&prog, i + 1);
        }
        if (rc == KILN_OK)
            rc = kiln_cache_sync(c);
        struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
        kiln_cache_get_stats(c, &st);
        if (tl) {
            timeline_note(tl, t0, i, c, st.evictions > 0);
            tl->prunes += st.evictions;
            tl->dropped += st.evicted_records;
        }
        if (b->cap)
            b->cap->bytes = g.bytes;
        if (cap != KILN_CACHE_NO_CAP && b->cap) {
            b->cap->evictions += st.evictions;
            b->cap->evicted += st.evicted_records;
            b->cap->overflows += st.cap_overflows;
        }
        kiln_cache_close(c);
    }
    double secs = cli_seconds(t0, kiln_now_ns());
    cli_progress_finish(&prog, b->records);
    free(g.buf);
    if (rc < 0) {
        cli_error(b->name, "%s: writing the cache failed: %s", dir, kiln_strerror(rc));
        return -1;
    }
    return secs;
}

static int make_cache(struct bench *b)
{
    /* Always a fresh cache: an old one in DIR is started over under its
     * writer lock, so a cache another kiln holds is refused, not unlinked
     * under it (its writes would be lost while it reports success). */
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .stamp = BENCH_STAMP, .flags = KILN_CACHE_RESET};
    struct kiln_cache *c;
    int rc = kiln_cache_open(b->dir, &opt, &c);
    if (rc < 0) {
        cli_error(b->name, "%s: cannot create the cache: %s%s", b->dir, kiln_strerror(rc),
                  rc == KILN_EBUSY ? " (another kiln holds it; not replaced)" : "");
        return rc;
    }
    rc = write_records(b, c, c, b->records);
    if (rc == KILN_OK)
        rc = kiln_cache_sync(c);
    b->kept = kiln_cache_count(c);
    kiln_cache_close(c);
    if (rc < 0)
        cli_error(b->name, "%s: writing the cache failed: %s", b->dir, kiln_strerror(rc));
    return rc;
}

/* The baseline: one pread per record head, seeking from head to head. */
static int scan_open(const struct bench *b, uint64_t *found)
{
    int fd = open(b->rec, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    fstat(fd, &st);
    struct entry {
        uint64_t lo, hi, off;
        uint32_t size;
    } *es = malloc(sizeof(*es) * (b->records + 1));
    uint64_t n = 0, off = 64; /* the records file header */
    unsigned char head[48];
    while (es && off + sizeof(head) <= (uint64_t)st.st_size && n <= b->records) {
        if (pread(fd, head, sizeof(head), (off_t)off) != (ssize_t)sizeof(head))
            break;
        uint32_t magic, size;
        memcpy(&magic, head, 4);
        memcpy(&size, head + 24, 4);
        if (magic != 0x4345524Bu) /* "KREC" */
            break;
        memcpy(&es[n].lo, head + 8, 8);
        memcpy(&es[n].hi, head + 16, 8);
        es[n].off = off;
        es[n].size = size;
        n++;
        off += sizeof(head) + ((size + 7u) & ~7u); /* records are 8-byte aligned */
    }
    close(fd);
    free(es);
    *found = n;
    return 0;
}

static int index_open(const struct bench *b, uint64_t *found)
{
    struct kiln_cache_options opt = {.size = sizeof(opt), .stamp = BENCH_STAMP};
    struct kiln_cache *c;
    int rc = kiln_cache_open(b->dir, &opt, &c);
    if (rc < 0)
        return rc;
    *found = kiln_cache_count(c);
    kiln_cache_close(c);
    return 0;
}

/* Loads every record on `threads` threads. @return seconds, or < 0. */
static double load_all(const struct bench *b, unsigned threads)
{
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .stamp = BENCH_STAMP, .flags = KILN_CACHE_READ_ONLY};
    struct kiln_cache *c;
    if (kiln_cache_open(b->dir, &opt, &c) < 0)
        return -1;
    struct kiln_cache_entry *all;
    size_t n;
    struct kiln_key *keys = NULL;
    double secs = -1;
    if (kiln_cache_entries(c, &all, &n) == KILN_OK && (keys = malloc((n + 1) * sizeof(*keys)))) {
        for (size_t i = 0; i < n; i++)
            keys[i] = all[i].key;
        kiln_cache_entries_free(all);
        struct kiln_cache_result *res;
        uint64_t t0 = kiln_now_ns();
        int64_t loaded = kiln_cache_load_many(c, keys, n, threads, &res);
        secs = cli_seconds(t0, kiln_now_ns());
        if (loaded != (int64_t)n) {
            cli_error(b->name, "loaded %" PRId64 " of %zu records", loaded, n);
            secs = -1;
        }
        if (loaded >= 0)
            kiln_cache_results_free(res, n);
    }
    free(keys);
    kiln_cache_close(c);
    return secs;
}

/* A plain sequential read of the records file in 1 MiB chunks. */
static double seq_read(const struct bench *b)
{
    int fd = open(b->rec, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char *buf = malloc(1u << 20);
    uint64_t t0 = kiln_now_ns();
    ssize_t got;
    while (buf && (got = read(fd, buf, 1u << 20)) > 0)
        ;
    double secs = cli_seconds(t0, kiln_now_ns());
    free(buf);
    close(fd);
    return secs;
}

/* Times one open: `cold` drops the files first. @return seconds or < 0. */
static double time_open(const struct bench *b, bool cold, bool scan)
{
    if (cold && drop_caches(b) < 0)
        return -1;
    uint64_t found = 0;
    uint64_t t0 = kiln_now_ns();
    int rc = scan ? scan_open(b, &found) : index_open(b, &found);
    double secs = cli_seconds(t0, kiln_now_ns());
    if (rc < 0 || found != b->kept) {
        cli_error(b->name, "%s open found %" PRIu64 " of %" PRIu64 " records",
                  scan ? "scanning" : "index", found, b->kept);
        return -1;
    }
    return secs;
}

/*
 * Removes the temporary folder and every file in it: the cache writes side
 * files (the last-use file is written when the cache closes), and the
 * folder, made by mkdtemp, holds nothing of anyone else's.
 * @return 0, or -1 with errno set.
 */
static int remove_folder(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    char path[8192];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    return rmdir(dir);
}

/* ---- --layer: the same records in a layer and the cache above it -------- */

struct split {
    char root[4096], top[4200], layer[4200];
};

/* Drops every file of `dir` (a cache folder) from the page cache. */
static int drop_folder(const struct bench *b, const char *dir)
{
    static const char *const files[] = {KILN_CACHE_RECORDS_FILE, KILN_CACHE_INDEX_FILE};
    for (size_t i = 0; i < CLI_ARRAY_LEN(files); i++) {
        char path[4400];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            cli_error(b->name, "%s: %s", path, strerror(errno));
            return -1;
        }
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    return 0;
}

/* Half the records in s->layer, the rest in s->top. */
static int make_split(const struct bench *b, struct split *s)
{
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .stamp = BENCH_STAMP, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *layer = NULL, *top = NULL;
    int rc = kiln_cache_open(s->layer, &opt, &layer);
    if (rc == KILN_OK)
        rc = kiln_cache_open(s->top, &opt, &top);
    if (rc == KILN_OK)
        rc = write_records(b, layer, top, b->records / 2);
    if (rc == KILN_OK)
        rc = kiln_cache_sync(layer);
    if (rc == KILN_OK)
        rc = kiln_cache_sync(top);
    kiln_cache_close(top);
    kiln_cache_close(layer);
    if (rc < 0)
        cli_error(b->name, "%s: making the layer and the cache above it failed: %s", s->root,
                  kiln_strerror(rc));
    return rc;
}

/* Opens `dir` (with `layer` beneath it, when not NULL) and loads every
 * record: what a start reads. @return seconds, or < 0. */
static double open_load(const struct bench *b, const char *dir, const char *layer, bool cold)
{
    if (cold && (drop_folder(b, dir) < 0 || (layer && drop_folder(b, layer) < 0)))
        return -1;
    struct kiln_cache_options opt = {.size = sizeof(opt),
                                     .stamp = BENCH_STAMP,
                                     .flags = KILN_CACHE_READ_ONLY,
                                     .layers = &layer,
                                     .nlayers = layer ? 1 : 0};
    uint64_t t0 = kiln_now_ns();
    struct kiln_cache *c;
    if (kiln_cache_open(dir, &opt, &c) < 0)
        return -1;
    struct kiln_cache_entry *all = NULL;
    size_t n = 0;
    struct kiln_key *keys = NULL;
    double secs = -1;
    if (kiln_cache_entries(c, &all, &n) == KILN_OK && (keys = malloc((n + 1) * sizeof(*keys)))) {
        for (size_t i = 0; i < n; i++)
            keys[i] = all[i].key;
        struct kiln_cache_result *res;
        int64_t loaded = kiln_cache_load_many(c, keys, n, b->threads, &res);
        secs = cli_seconds(t0, kiln_now_ns());
        if (loaded != (int64_t)b->records) {
            cli_error(b->name, "%s: loaded %" PRId64 " of %" PRIu64 " records", dir, loaded,
                      b->records);
            secs = -1;
        }
        if (loaded >= 0)
            kiln_cache_results_free(res, n);
    }
    kiln_cache_entries_free(all);
    free(keys);
    kiln_cache_close(c);
    return secs;
}

struct layer_times {
    double one_cold, one_warm, layer_cold, layer_warm;
};

static void layer_json(struct cli_json *j, const struct layer_times *t)
{
    cli_json_double(j, "layer_vs_one_cold", t->layer_cold / t->one_cold);
    cli_json_double(j, "layer_vs_one_warm", t->layer_warm / t->one_warm);
}

/* The best of three of each, alternating, so neither side gets the
 * machine's quiet moments alone. @return 0, or -1 after one line. */
static int time_layer(const struct bench *b, struct layer_times *t)
{
    struct split s;
    const char *base = getenv("TMPDIR");
    snprintf(s.root, sizeof(s.root), "%s/kiln-bench-layer-XXXXXX",
             base && *base ? base : "/var/tmp");
    if (!mkdtemp(s.root)) {
        cli_error(b->name, "%s: %s", s.root, strerror(errno));
        return -1;
    }
    snprintf(s.top, sizeof(s.top), "%s/top", s.root);
    snprintf(s.layer, sizeof(s.layer), "%s/layer", s.root);
    int rc = make_split(b, &s) < 0 ? -1 : 0;
    *t = (struct layer_times){1e30, 1e30, 1e30, 1e30};
    for (int round = 0; rc == 0 && round < 3; round++) {
        double v[4] = {open_load(b, b->dir, NULL, true), open_load(b, s.top, s.layer, true),
                       open_load(b, b->dir, NULL, false), open_load(b, s.top, s.layer, false)};
        double *best[4] = {&t->one_cold, &t->layer_cold, &t->one_warm, &t->layer_warm};
        for (int i = 0; i < 4; i++) {
            if (v[i] < 0)
                rc = -1;
            else if (v[i] < *best[i])
                *best[i] = v[i];
        }
    }
    remove_folder(s.top);
    remove_folder(s.layer);
    rmdir(s.root);
    return rc;
}

/* ---- --max-size: a cache that keeps its cap, against one without ------- */

/* Opens the cache in `dir` as a writer, as an emulator does at its start.
 * @return seconds, or < 0. */
static double open_once(const struct bench *b, const char *dir, bool cold, uint64_t want)
{
    if (cold && drop_folder(b, dir) < 0)
        return -1;
    struct kiln_cache_options opt = {.size = sizeof(opt), .stamp = BENCH_STAMP};
    uint64_t t0 = kiln_now_ns();
    struct kiln_cache *c;
    if (kiln_cache_open(dir, &opt, &c) < 0)
        return -1;
    double secs = cli_seconds(t0, kiln_now_ns());
    size_t n = kiln_cache_count(c);
    kiln_cache_close(c);
    if (n != want) {
        cli_error(b->name, "%s: opened %zu of %" PRIu64 " records", dir, n, want);
        return -1;
    }
    return secs;
}

/* The uncapped cache of the same records as the capped one in b->dir. */
static int make_reference(struct bench *b, const char *ref)
{
    struct kiln_cache_options opt = {
        .size = sizeof(opt), .stamp = BENCH_STAMP, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c;
    int rc = kiln_cache_open(ref, &opt, &c);
    const char *in[] = {b->dir};
    struct kiln_cache_merge_report r = KILN_CACHE_MERGE_REPORT_INIT;
    if (rc == KILN_OK)
        rc = kiln_cache_merge(c, in, 1, &r);
    if (rc == KILN_OK)
        kiln_cache_close(c);
    if (rc < 0)
        cli_error(b->name, "%s: making the uncapped cache of the same records failed: %s", ref,
                  kiln_strerror(rc));
    return rc;
}

/* Writes the runs without a cap, then with it (into b->dir), then times
 * the open of the capped cache against the uncapped one of its records. */
static int make_capped(struct bench *b)
{
    struct cap_times *t = b->cap;
    char root[4096], plain[4200], ref[4200];
    const char *base = getenv("TMPDIR");
    snprintf(root, sizeof(root), "%s/kiln-bench-cap-XXXXXX", base && *base ? base : "/var/tmp");
    if (!mkdtemp(root)) {
        cli_error(b->name, "%s: %s", root, strerror(errno));
        return -1;
    }
    snprintf(plain, sizeof(plain), "%s/uncapped", root);
    snprintf(ref, sizeof(ref), "%s/reference", root);
    int rc = mkdir(plain, 0755) == 0 && mkdir(ref, 0755) == 0 ? 0 : -1;
    if (rc == 0)
        t->store_uncapped = write_runs(b, plain, KILN_CACHE_NO_CAP, NULL);
    remove_folder(plain); /* its disk space, before the capped run */
    if (rc == 0 && t->store_uncapped >= 0)
        t->store_capped = write_runs(b, b->dir, b->max_size, b->tl);
    if (rc < 0 || t->store_uncapped < 0 || t->store_capped < 0)
        rc = -1;
    struct kiln_cache_options ro = {
        .size = sizeof(ro), .stamp = BENCH_STAMP, .flags = KILN_CACHE_READ_ONLY};
    struct kiln_cache *c;
    if (rc == 0 && kiln_cache_open(b->dir, &ro, &c) == KILN_OK) {
        b->kept = kiln_cache_count(c);
        kiln_cache_close(c);
    }
    if (rc == 0)
        rc = make_reference(b, ref) < 0 ? -1 : 0;
    double *best[4] = {&t->open_capped_cold, &t->open_ref_cold, &t->open_capped_warm,
                       &t->open_ref_warm};
    for (int i = 0; i < 4; i++)
        *best[i] = 1e30;
    for (int round = 0; rc == 0 && round < 3; round++) {
        double v[4] = {open_once(b, b->dir, true, b->kept), open_once(b, ref, true, b->kept),
                       open_once(b, b->dir, false, b->kept), open_once(b, ref, false, b->kept)};
        for (int i = 0; i < 4; i++) {
            if (v[i] < 0)
                rc = -1;
            else if (v[i] < *best[i])
                *best[i] = v[i];
        }
    }
    remove_folder(ref);
    rmdir(root);
    return rc;
}

static void cap_json(struct cli_json *j, const struct bench *b)
{
    const struct cap_times *t = b->cap;
    cli_json_object_begin(j, "cap");
    cli_json_u64(j, "max_size", b->max_size);
    cli_json_u64(j, "run_records", b->prune_every);
    cli_json_u64(j, "payload_bytes", t->bytes);
    cli_json_double(j, "store_rate_ratio", t->store_uncapped / t->store_capped);
    cli_json_double(j, "open_ratio_cold", t->open_capped_cold / t->open_ref_cold);
    cli_json_double(j, "open_ratio_warm", t->open_capped_warm / t->open_ref_warm);
    cli_json_u64(j, "evictions", t->evictions);
    cli_json_u64(j, "evicted_records", t->evicted);
    cli_json_u64(j, "cap_overflows", t->overflows);
    cli_json_object_end(j);
}

static void cap_text(const struct bench *b)
{
    const struct cap_times *t = b->cap;
    char mb[32];
    double mib = (double)t->bytes / (1024.0 * 1024.0);
    printf("store, cap %s (runs of %" PRIu64 "): capped %.1f MiB/s, uncapped %.1f MiB/s, "
           "ratio %.3f; %" PRIu64 " eviction%s, %" PRIu64 " record%s evicted, %" PRIu64
           " overflow%s\n",
           cli_format_bytes(mb, sizeof(mb), b->max_size), b->prune_every, mib / t->store_capped,
           mib / t->store_uncapped, t->store_uncapped / t->store_capped, t->evictions,
           CLI_S(t->evictions), t->evicted, CLI_S(t->evicted), t->overflows, CLI_S(t->overflows));
    printf("open at the cap, cold  capped %9.4f s   uncapped, same records %9.4f s   ratio %.3f\n",
           t->open_capped_cold, t->open_ref_cold, t->open_capped_cold / t->open_ref_cold);
    printf("open at the cap, warm  capped %9.4f s   uncapped, same records %9.4f s   ratio %.3f\n",
           t->open_capped_warm, t->open_ref_warm, t->open_capped_warm / t->open_ref_warm);
}

static int run(struct bench *b)
{
    if (b->cap ? make_capped(b) < 0 : make_cache(b) < 0)
        return KILN_EXIT_FAILED;
    struct stat st;
    stat(b->rec, &st);
    uint64_t file_bytes = (uint64_t)st.st_size;
    stat(b->idx, &st);
    uint64_t index_bytes = (uint64_t)st.st_size;

    double scan_cold = time_open(b, true, true);
    double scan_warm = time_open(b, false, true);
    double index_cold = time_open(b, true, false);
    double index_warm = time_open(b, false, false);
    double load_1t = drop_caches(b) < 0 ? -1 : load_all(b, 1);
    double load_nt = drop_caches(b) < 0 ? -1 : load_all(b, b->threads);
    double seq = drop_caches(b) < 0 ? -1 : seq_read(b);
    if (scan_cold < 0 || scan_warm < 0 || index_cold < 0 || index_warm < 0 || load_1t < 0 ||
        load_nt < 0 || seq < 0)
        return KILN_EXIT_FAILED;
    struct layer_times lt = {0};
    if (b->layer && (b->kept != b->records || time_layer(b, &lt) < 0))
        return KILN_EXIT_FAILED;

    if (b->json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_u64(&j, "records", b->kept);
        cli_json_u64(&j, "file_bytes", file_bytes);
        cli_json_object_begin(&j, "seconds");
        cli_json_double(&j, "scan_open_cold", scan_cold);
        cli_json_double(&j, "index_open_cold", index_cold);
        cli_json_double(&j, "scan_open_warm", scan_warm);
        cli_json_double(&j, "index_open_warm", index_warm);
        cli_json_double(&j, "load_1t", load_1t);
        cli_json_double(&j, "load_nt", load_nt);
        cli_json_double(&j, "seq_read", seq);
        if (b->cap) {
            cli_json_double(&j, "store_capped", b->cap->store_capped);
            cli_json_double(&j, "store_uncapped", b->cap->store_uncapped);
            cli_json_double(&j, "open_capped_cold", b->cap->open_capped_cold);
            cli_json_double(&j, "open_uncapped_cold", b->cap->open_ref_cold);
            cli_json_double(&j, "open_capped_warm", b->cap->open_capped_warm);
            cli_json_double(&j, "open_uncapped_warm", b->cap->open_ref_warm);
        }
        if (b->layer) {
            cli_json_double(&j, "one_open_load_cold", lt.one_cold);
            cli_json_double(&j, "layer_open_load_cold", lt.layer_cold);
            cli_json_double(&j, "one_open_load_warm", lt.one_warm);
            cli_json_double(&j, "layer_open_load_warm", lt.layer_warm);
        }
        cli_json_object_end(&j);
        cli_json_double(&j, "open_speedup_cold", scan_cold / index_cold);
        cli_json_double(&j, "open_speedup_warm", scan_warm / index_warm);
        cli_json_u64(&j, "threads", b->threads);
        cli_json_double(&j, "load_vs_seqread", seq / load_nt);
        if (b->tl)
            timeline_json(&j, b);
        if (b->cap)
            cap_json(&j, b);
        if (b->layer)
            layer_json(&j, &lt);
        cli_json_end(&j);
        return KILN_EXIT_OK;
    }
    char fb[32], ib[32];
    printf("cache: %" PRIu64 " record%s, mean %" PRIu64 " KiB, records file %s, index %s\n",
           b->kept, CLI_S(b->kept), b->mean_kb, cli_format_bytes(fb, sizeof(fb), file_bytes),
           cli_format_bytes(ib, sizeof(ib), index_bytes));
    printf("open, cold     scan %9.4f s   index %9.4f s   speedup %8.1fx\n", scan_cold, index_cold,
           scan_cold / index_cold);
    printf("open, warm     scan %9.4f s   index %9.4f s   speedup %8.1fx\n", scan_warm, index_warm,
           scan_warm / index_warm);
    printf("load, cold     1 thread %8.3f s   %u thread%s %8.3f s   sequential read %8.3f s\n",
           load_1t, b->threads, CLI_S(b->threads), load_nt, seq);
    printf("load vs sequential read: %.2f (1 thread: %.2f)\n", seq / load_nt, seq / load_1t);
    if (b->layer)
        printf("open + load, half in a layer: cold %.4f s vs %.4f s in one cache (%.3fx), warm "
               "%.4f s vs %.4f s (%.3fx)\n",
               lt.layer_cold, lt.one_cold, lt.layer_cold / lt.one_cold, lt.layer_warm, lt.one_warm,
               lt.layer_warm / lt.one_warm);
    if (b->cap)
        cap_text(b);
    return KILN_EXIT_OK;
}

int cmd_bench_store(int argc, char **argv)
{
    static const struct option opts[] = {{"records", required_argument, NULL, 'n'},
                                         {"mean-kb", required_argument, NULL, 'k'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"cache", required_argument, NULL, 'd'},
                                         {"dir", required_argument, NULL, 'D'}, /* old */
                                         {"prune-every", required_argument, NULL, 'p'},
                                         {"max-size", required_argument, NULL, 'm'},
                                         {"layer", no_argument, NULL, 'L'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct bench b = {.name = argv[0],
                      .records = 40000,
                      .mean_kb = 16,
                      .threads = kiln_pool_auto_workers(KILN_POOL_WORK_READ, 0, NULL)};
    const char *dir = NULL;
    uint64_t v;
    int ch;
    opterr = 0;
    optind = 1;
    while ((ch = cli_getopt(argc, argv, "", opts)) != -1) {
        switch (ch) {
        case 'n':
            if (cli_parse_u64(argv[0], "--records", optarg, 1, 10000000, true, &b.records))
                return KILN_EXIT_USAGE;
            break;
        case 'k':
            if (cli_parse_u64(argv[0], "--mean-kb", optarg, 1, 65536, false, &b.mean_kb))
                return KILN_EXIT_USAGE;
            break;
        case 't':
            if (cli_parse_u64(argv[0], "--threads", optarg, 1, KILN_POOL_MAX_READERS, false, &v))
                return KILN_EXIT_USAGE;
            b.threads = (unsigned)v;
            break;
        case 'D':
            cli_deprecated(argv[0], "--dir", "--cache");
            /* fall through */
        case 'd':
            CLI_TRY(cli_check_path(argv[0], "--cache", optarg));
            dir = optarg;
            break;
        case 'p':
            if (cli_parse_u64(argv[0], "--prune-every", optarg, 1, 10000000, false, &b.prune_every))
                return KILN_EXIT_USAGE;
            break;
        case 'm':
            if (cli_parse_u64(argv[0], "--max-size", optarg, 64, UINT64_MAX - 1, true, &b.max_size))
                return KILN_EXIT_USAGE;
            break;
        case 'j':
            b.json = true;
            break;
        case 'L':
            b.layer = true;
            break;
        case 'h':
            printf(help, argv[0]);
            return KILN_EXIT_OK;
        default:
            return cli_option_error(argv[0], ch, argv);
        }
    }
    if (optind != argc)
        return cli_usage_error(argv[0], "unexpected argument '%s'", argv[optind]);
    if (b.prune_every && !b.max_size)
        return cli_usage_error(argv[0], "--prune-every goes with --max-size");
    struct size_timeline tl = {0};
    struct cap_times cap = {0};
    if (b.max_size) {
        b.tl = &tl;
        b.cap = &cap;
        if (!b.prune_every)
            b.prune_every = b.records / 20 ? b.records / 20 : 1;
    }

    if (dir) {
        struct stat st;
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            cli_error(argv[0], "%s: %s", dir, strerror(errno));
            return KILN_EXIT_USAGE;
        }
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            cli_error(argv[0], "%s: not a folder", dir);
            return KILN_EXIT_USAGE;
        }
        snprintf(b.dir, sizeof(b.dir), "%s", dir);
        /* Only a kiln cache is replaced: a file of another kind under the
         * cache's names is the user's, and left alone. */
        struct kiln_cache_options any = {.size = sizeof(any),
                                         .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP};
        struct kiln_cache *old;
        int orc = kiln_cache_open(b.dir, &any, &old);
        kiln_cache_close(orc == KILN_OK ? old : NULL);
        if (orc == KILN_EFORMAT) {
            cli_error(argv[0], "%s/%s: not a kiln cache; not replaced", dir,
                      KILN_CACHE_RECORDS_FILE);
            return KILN_EXIT_USAGE;
        }
    } else {
        const char *base = getenv("TMPDIR");
        snprintf(b.dir, sizeof(b.dir), "%s/kiln-bench-store-XXXXXX",
                 base && *base ? base : "/var/tmp");
        if (!mkdtemp(b.dir)) {
            cli_error(argv[0], "%s: %s", b.dir, strerror(errno));
            return KILN_EXIT_FAILED;
        }
    }
    snprintf(b.rec, sizeof(b.rec), "%s/%s", b.dir, KILN_CACHE_RECORDS_FILE);
    snprintf(b.idx, sizeof(b.idx), "%s/%s", b.dir, KILN_CACHE_INDEX_FILE);

    int rc = run(&b);
    timeline_free(&tl);

    if (!dir && remove_folder(b.dir) != 0) {
        cli_error(argv[0], "%s: could not remove the temporary folder: %s", b.dir, strerror(errno));
        if (rc == KILN_EXIT_OK)
            rc = KILN_EXIT_FAILED;
    }
    return rc;
}
