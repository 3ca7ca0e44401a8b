/*
 * test_alloc_fail.c - the allocator hook (kiln_set_allocator) and kiln
 * out of memory: an allocator that fails the Nth allocation, for every N
 * from 1 until the operation runs through without meeting its failure,
 * over a prepare (no Vulkan), a warm start (no Vulkan), a Fossilize import
 * and a cache compaction.
 *
 * For every N the operation must answer 0 or KILN_ENOMEM (never crash,
 * never another code), give back every block it took (kiln's live count
 * is the same after as before: the operation runs on a thread of its own,
 * so even a worker's per-thread compression contexts are freed at its
 * end), and lose nothing stored before it: the cache is opened again and
 * every record that was there is read back, byte for byte. Under ASan
 * (make asan) LeakSanitizer checks the same for memory outside kiln's
 * count. The inputs are small so that the loop stays short;
 * KILN_ALLOC_FAIL_LONG=1 runs larger ones.
 *
 * The allocator is set first, before any other kiln call (the rule
 * kiln_set_allocator states): everything the case makes goes through it.
 */
#include "foz_writer.h"
#include "kiln_test.h"

#include <kiln.h>
#include <kiln/foz.h>
#include <kiln-tools/gen.h>
#include <kiln-tools/glsl.h>

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the allocator: libc's, failing allocation number `fail_at` ------- */

static atomic_ullong calls;   /* allocations asked for since arm() */
static atomic_ullong fail_at; /* 0: never fail */
static atomic_ullong frees;   /* free_fn calls, all time */
static atomic_ullong allocs;  /* successful allocations, all time */

static bool fail_now(void)
{
    unsigned long long k = atomic_fetch_add(&calls, 1) + 1;
    unsigned long long at = atomic_load(&fail_at);
    return at && k == at;
}

static void *t_malloc(void *user, size_t n)
{
    (void)user;
    if (fail_now())
        return NULL;
    void *p = malloc(n);
    if (p)
        atomic_fetch_add(&allocs, 1);
    return p;
}

static void *t_realloc(void *user, void *p, size_t n)
{
    (void)user;
    if (fail_now())
        return NULL;
    return realloc(p, n);
}

static void t_free(void *user, void *p)
{
    (void)user;
    atomic_fetch_add(&frees, 1);
    free(p);
}

static void install(void)
{
    struct kiln_allocator a = {.size = sizeof(struct kiln_allocator)};
    a.malloc_fn = t_malloc;
    a.realloc_fn = t_realloc;
    a.free_fn = t_free;
    KT_NEED(kiln_set_allocator(&a) == 0);
}

static void arm(unsigned long long n)
{
    atomic_store(&calls, 0);
    atomic_store(&fail_at, n);
}

/* ---- what was stored before: read back after every try --------------- */

struct record {
    struct kiln_key key;
    void *data;
    size_t size;
};

struct stored {
    struct record *r;
    size_t n;
};

static int snapshot(const char *dir, uint64_t stamp, struct stored *s)
{
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = stamp};
    struct kiln_cache *c;
    int orc = kiln_cache_open(dir, &o, &c);
    if (orc < 0)
        return orc;
    struct kiln_cache_entry *e;
    size_t n;
    int rc = kiln_cache_entries(c, &e, &n);
    if (rc == 0) {
        s->r = calloc(n ? n : 1, sizeof(*s->r));
        s->n = n;
        for (size_t i = 0; i < n && rc == 0; i++) {
            struct kiln_cache_result res;
            rc = kiln_cache_get(c, e[i].key, &res);
            s->r[i].key = e[i].key;
            s->r[i].size = res.size;
            s->r[i].data = malloc(res.size ? res.size : 1);
            if (rc == 0 && res.size)
                memcpy(s->r[i].data, res.data, res.size);
            kiln_cache_payload_free(res.data);
        }
        kiln_cache_entries_free(e);
    }
    kiln_cache_close(c);
    return rc;
}

static void stored_free(struct stored *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->r[i].data);
    free(s->r);
    memset(s, 0, sizeof(*s));
}

/* @return the records of `s` missing or changed in the cache at `dir`. */
static size_t lost(const char *dir, uint64_t stamp, const struct stored *s)
{
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = stamp};
    struct kiln_cache *c;
    if (kiln_cache_open(dir, &o, &c) != 0)
        return s->n ? s->n : 1;
    size_t bad = kiln_cache_count(c) < s->n ? 1 : 0;
    for (size_t i = 0; i < s->n; i++) {
        struct kiln_cache_result res;
        if (kiln_cache_get(c, s->r[i].key, &res) != 0 || res.size != s->r[i].size ||
            (res.size && memcmp(res.data, s->r[i].data, res.size) != 0))
            bad++;
        kiln_cache_payload_free(res.data);
    }
    kiln_cache_close(c);
    return bad;
}

/* What an operation's run answers when it returned 0 but did less than
 * asked (a failed allocation swallowed: a program not stored, a record not
 * loaded), after a line saying what. */
#define DEGRADED 1

/* ---- the loop ----------------------------------------------------------- */

/* Copies the plain files of folder `from` into a new folder `to` (what
 * setup made once: cheaper than making it again for every try). */
static int copy_dir(const char *from, const char *to)
{
    if (kt_mkdir(to) != 0)
        return KILN_EIO;
    DIR *d = opendir(from);
    if (!d)
        return KILN_ENOENT;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char a[4400], b[4400];
        snprintf(a, sizeof a, "%.4000s/%.255s", from, e->d_name);
        snprintf(b, sizeof b, "%.4000s/%.255s", to, e->d_name);
        FILE *in = fopen(a, "rb"), *out = in ? fopen(b, "wb") : NULL;
        char buf[65536];
        size_t n;
        while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
            if (fwrite(buf, 1, n, out) != n)
                rc = KILN_EIO;
        if (!in || !out)
            rc = KILN_EIO;
        if (in)
            fclose(in);
        if (out && fclose(out) != 0)
            rc = KILN_EIO;
    }
    closedir(d);
    return rc;
}

struct op {
    const char *name;
    void *ctx;
    /* Makes the try's starting point in `dir` (not failing). */
    int (*setup)(void *ctx, const char *dir);
    /* The operation, with failures armed. */
    int (*run)(void *ctx, const char *dir);
    uint64_t stamp; /* the cache's, for the read-back */
};

struct job {
    const struct op *op;
    const char *dir;
    int rc;
};

static void *job_main(void *arg)
{
    struct job *j = arg;
    j->rc = j->op->run(j->op->ctx, j->dir);
    return NULL;
}

static bool long_mode(void)
{
    const char *v = getenv("KILN_ALLOC_FAIL_LONG");
    return v && *v && strcmp(v, "0") != 0;
}

/* Runs `op` failing allocation N, for N = 1, 2, ... until a try meets no
 * failure (then it must succeed). @return the number of tries. */
static unsigned long long fail_every(const struct op *op)
{
    char dir[4200], template[4200];
    snprintf(template, sizeof template, "%s/%s-template", kt_case_dir(), op->name);
    arm(0);
    int src = op->setup(op->ctx, template);
    if (src != 0)
        printf("%s: setup: %s\n", op->name, kiln_errname(src));
    KT_NEED(src == 0);
    /* One run without failures first: what kiln makes once per process
     * and keeps (the built-in dictionary, digested on first use) is then
     * there before the count is taken. */
    snprintf(dir, sizeof dir, "%s/%s-warm", kt_case_dir(), op->name);
    KT_NEED(copy_dir(template, dir) == 0);
    KT_NEED(op->run(op->ctx, dir) == 0);
    kt_rmtree(dir);
    const char *only = getenv("KILN_ALLOC_FAIL_AT"); /* one N alone, to debug it */
    unsigned long long n = only ? strtoull(only, NULL, 10) : 1, enomem = 0, ok = 0;
    for (;; n++) {
        snprintf(dir, sizeof dir, "%s/%s-%llu", kt_case_dir(), op->name, n);
        KT_NEED(copy_dir(template, dir) == 0);
        struct stored before = {0};
        KT_NEED(snapshot(dir, op->stamp, &before) == 0);
        long long live = kiln_allocations_live();

        struct job j = {.op = op, .dir = dir};
        arm(n);
        pthread_t t;
        KT_NEED(pthread_create(&t, NULL, job_main, &j) == 0);
        pthread_join(t, NULL);
        bool hit = atomic_load(&calls) >= n;
        arm(0);

        if (j.rc == DEGRADED)
            kt_fail(__FILE__, __LINE__, "%s: failing allocation %llu: answered 0 but did less",
                    op->name, n);
        else if (j.rc != 0 && j.rc != KILN_ENOMEM)
            kt_fail(__FILE__, __LINE__, "%s: failing allocation %llu: %s, not KILN_ENOMEM",
                    op->name, n, kiln_errname(j.rc));
        if (kiln_allocations_live() != live)
            kt_fail(__FILE__, __LINE__, "%s: failing allocation %llu: %lld blocks leaked", op->name,
                    n, kiln_allocations_live() - live);
        size_t gone = lost(dir, op->stamp, &before);
        if (gone)
            kt_fail(__FILE__, __LINE__, "%s: failing allocation %llu: %zu stored records lost",
                    op->name, n, gone);
        stored_free(&before);
        kt_rmtree(dir);
        j.rc == 0 ? ok++ : enomem++;
        if (!hit || only) {
            if (!hit)
                KT_CHECK_EQ(j.rc, 0);
            break;
        }
        KT_NEED(n < 200000);
    }
    printf("%s: %llu allocations failed one at a time: %llu KILN_ENOMEM, %llu went "
           "through\n",
           op->name, n - 1, enomem, ok - 1);
    KT_CHECK(only || enomem > 0);
    return n;
}

/* ---- the operations ---------------------------------------------------- */

struct gen_ctx {
    struct kiln_glsl *glsl;
    struct kiln_generator before; /* what setup stores */
    struct kiln_generator after;  /* what the run prepares (more) */
    uint64_t stamp;
};

static int prepare(struct gen_ctx *g, const char *dir, const struct kiln_generator *which)
{
    struct kiln_program_source src;
    kiln_generator_source(which, &src);
    struct kiln_prepare_options o;
    kiln_prepare_options_init(&o);
    o.cache_dir = dir;
    o.source = &src;
    o.translator = kiln_glsl_translator(g->glsl);
    o.no_vulkan = true;
    o.jobs = 1;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    int rc = kiln_prepare(&o, NULL, NULL, &s);
    g->stamp = kiln_prepare_stamp(&o);
    if (rc == 0 && (s.failed || s.translated + s.cached != s.programs)) {
        printf("prepare: answered 0 with %llu of %llu programs failed\n",
               (unsigned long long)s.failed, (unsigned long long)s.programs);
        return DEGRADED;
    }
    return rc;
}

static int prepare_setup(void *ctx, const char *dir)
{
    struct gen_ctx *g = ctx;
    return prepare(g, dir, &g->before);
}

static int prepare_run(void *ctx, const char *dir)
{
    struct gen_ctx *g = ctx;
    return prepare(g, dir, &g->after);
}

static int start_run(void *ctx, const char *dir)
{
    (void)ctx;
    struct kiln_start_options o = {
        .size = sizeof(o), .cache_dir = dir, .any_stamp = true, .jobs = 1};
    o.no_vulkan = true;
    struct kiln_start_summary s = KILN_START_SUMMARY_INIT;
    int rc = kiln_warm_start(&o, NULL, NULL, &s);
    if (rc == 0 && (s.loaded != s.records || s.missing || s.bad || !s.use_recorded)) {
        printf("start: answered 0 with %llu of %llu records loaded, %llu missing, %llu bad, "
               "use %s\n",
               (unsigned long long)s.loaded, (unsigned long long)s.records,
               (unsigned long long)s.missing, (unsigned long long)s.bad,
               s.use_recorded ? "recorded" : s.use_text);
        return DEGRADED;
    }
    return rc;
}

static int gen_begin(struct gen_ctx *g, unsigned before, unsigned after)
{
    if (kiln_glsl_unusable())
        return KILN_ENOTSUP;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &g->glsl);
    if (rc == KILN_ENOTSUP) {
        printf("skipped: a build without shaderc (no SPIR-V to prepare)\n");
        exit(77);
    }
    g->before = (struct kiln_generator){.seed = KILN_GENERATOR_DEFAULT_SEED, .count = before};
    g->after = (struct kiln_generator){.seed = KILN_GENERATOR_DEFAULT_SEED, .count = after};
    return rc;
}

/* Records put straight into a cache, some twice (superseded). */
static int put_records(const char *dir, uint64_t stamp, unsigned n, unsigned again)
{
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = stamp, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c;
    int orc = kiln_cache_open(dir, &o, &c);
    if (orc < 0)
        return orc;
    int rc = 0;
    unsigned char payload[96];
    for (unsigned i = 0; i < n + again && rc == 0; i++) {
        unsigned k = i % n;
        for (size_t b = 0; b < sizeof payload; b++)
            payload[b] = (unsigned char)(k * 31 + b + (i >= n ? 7 : 0));
        struct kiln_key key = {.lo = 0x1000 + k, .hi = 0xa110c};
        rc = kiln_cache_put(c, key, payload, 32 + k, 32 + k, 0, 1);
    }
    if (rc == 0)
        rc = kiln_cache_sync(c);
    kiln_cache_close(c);
    return rc;
}

struct foz_ctx {
    char archive[4200];
};

static int foz_setup(void *ctx, const char *dir)
{
    (void)ctx;
    return put_records(dir, KILN_FOZ_STAMP, 3, 0);
}

static int foz_run(void *ctx, const char *dir)
{
    struct foz_ctx *f = ctx;
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = KILN_FOZ_STAMP};
    struct kiln_cache *c;
    int orc = kiln_cache_open(dir, &o, &c);
    if (orc < 0)
        return orc;
    struct kiln_foz_import_report r = KILN_FOZ_IMPORT_REPORT_INIT;
    int rc = kiln_foz_import(c, f->archive, &r);
    kiln_cache_close(c);
    if (rc == 0 && r.imported + r.present != r.modules) {
        printf("foz-import: answered 0 with %llu of %llu modules stored (%llu undecodable, %llu "
               "invalid)\n",
               (unsigned long long)(r.imported + r.present), (unsigned long long)r.modules,
               (unsigned long long)r.undecodable, (unsigned long long)r.invalid);
        return DEGRADED;
    }
    return rc;
}

static int compact_setup(void *ctx, const char *dir)
{
    (void)ctx;
    return put_records(dir, 77, long_mode() ? 40 : 6, 3);
}

static int compact_run(void *ctx, const char *dir)
{
    (void)ctx;
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = 77};
    struct kiln_cache *c;
    int orc = kiln_cache_open(dir, &o, &c);
    if (orc < 0)
        return orc;
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    int rc = kiln_cache_compact(c, &r);
    kiln_cache_close(c);
    if (rc == 0 && !r.rewritten) {
        printf("compact: answered 0 without rewriting\n");
        return DEGRADED;
    }
    return rc;
}

/* ---- the cases --------------------------------------------------------- */

/* The allocator is refused when incomplete, and once kiln holds memory;
 * NULL then too. */
KT_CASE(set_rules)
{
    struct kiln_allocator a = {.size = sizeof(struct kiln_allocator)};
    a.malloc_fn = t_malloc;
    a.free_fn = t_free;
    KT_CHECK_EQ(kiln_set_allocator(&a), KILN_EINVAL); /* no realloc_fn */
    struct kiln_allocator zero = {0};
    KT_CHECK_EQ(kiln_set_allocator(&zero), KILN_EINVAL); /* size 0 */
    install();
    struct kiln_allocator got = {.size = sizeof(struct kiln_allocator)};
    KT_CHECK_OK(kiln_get_allocator(&got));
    KT_CHECK(got.malloc_fn == t_malloc && got.free_fn == t_free && got.calloc_fn == NULL);

    unsigned long long a0 = atomic_load(&allocs), f0 = atomic_load(&frees);
    void *p = kiln_malloc(10), *z = kiln_calloc(3, 4);
    KT_REQUIRE(p && z);
    KT_CHECK(((unsigned char *)z)[11] == 0);
    KT_CHECK_EQ(kiln_allocations_live(), 2);
    KT_CHECK_EQ(kiln_set_allocator(NULL), KILN_EBUSY);
    KT_CHECK(kiln_calloc(SIZE_MAX / 2, 4) == NULL);
    kiln_free(p);
    kiln_free(z);
    KT_CHECK_EQ(atomic_load(&allocs) - a0, 2);
    KT_CHECK_EQ(atomic_load(&frees) - f0, 2);
    KT_CHECK_EQ(kiln_allocations_live(), 0);
    KT_CHECK_OK(kiln_set_allocator(NULL));
    KT_CHECK_OK(kiln_get_allocator(&got));
    KT_CHECK(got.malloc_fn != t_malloc);
}

/* kiln_io_read_file's buffer comes from the allocator in force and goes
 * back through kiln_free. */
KT_CASE(read_file_buffer)
{
    install();
    char path[4200];
    snprintf(path, sizeof path, "%s/f", kt_case_dir());
    KT_REQUIRE_OK(kiln_io_replace_file(kiln_io_default(), path, "abc", 3));
    unsigned long long a0 = atomic_load(&allocs);
    void *data;
    size_t n;
    KT_REQUIRE_OK(kiln_io_read_file(kiln_io_default(), path, 64, &data, &n));
    KT_CHECK(atomic_load(&allocs) > a0);
    KT_CHECK_EQ(n, 3);
    kiln_free(data);
    KT_CHECK_EQ(kiln_allocations_live(), 0);
}

/* Runs `run` over a cache kiln_prepare filled with `before` generated
 * programs (the run prepares `after`). */
static void gen_fail_every(const char *name, unsigned before, unsigned after,
                           int (*run)(void *ctx, const char *dir))
{
    install();
    struct gen_ctx g = {0};
    KT_NEED(gen_begin(&g, before, after) == 0);
    struct kiln_prepare_options probe;
    kiln_prepare_options_init(&probe);
    struct kiln_program_source src;
    kiln_generator_source(&g.before, &src);
    probe.source = &src;
    probe.translator = kiln_glsl_translator(g.glsl);
    struct op op = {name, &g, prepare_setup, run, kiln_prepare_stamp(&probe)};
    fail_every(&op);
    kiln_glsl_destroy(g.glsl);
}

KT_CASE(prepare_fail_every)
{
    gen_fail_every("prepare", 1, long_mode() ? 12 : 2, prepare_run);
}

KT_CASE(warm_start_fail_every)
{
    gen_fail_every("start", long_mode() ? 12 : 3, 0, start_run);
}

KT_CASE(foz_import_fail_every)
{
    install();
    struct foz_ctx f;
    snprintf(f.archive, sizeof f.archive, "%s/small.foz", kt_case_dir());
    FW_NEED(fw_write_pipelines(f.archive, long_mode() ? 6 : 1, 1, 0x100));
    struct op op = {"foz-import", &f, foz_setup, foz_run, KILN_FOZ_STAMP};
    fail_every(&op);
}

KT_CASE(compact_fail_every)
{
    install();
    struct op op = {"compact", NULL, compact_setup, compact_run, 77};
    fail_every(&op);
}

KT_MAIN(KT_ENTRY(set_rules), KT_ENTRY(read_file_buffer), KT_ENTRY(prepare_fail_every),
        KT_ENTRY(warm_start_fail_every), KT_ENTRY(foz_import_fail_every),
        KT_ENTRY(compact_fail_every))
