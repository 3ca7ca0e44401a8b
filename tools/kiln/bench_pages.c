/*
 * bench_pages.c - `kiln bench pages`: the cost of one range check (walk
 * every run of equal pages over a range) four ways, side by side in one run.
 *
 *   bytewise  pages only, eight per 64-bit load: the baseline
 *   summary1  also skip 64-page blocks by their summary byte
 *   summary2  also skip 4096-page groups (kiln_pages_run_end)
 *   memo      summary2 behind the caller's generation memo: a check whose
 *             range was answered before, with no store since, is a lookup
 *
 * Three kinds of range over one arena laid out like a console guest's (see
 * build_arena): a uniform 150 MiB range, a 150 MiB range with one different
 * page every 1,000 pages, and random ranges of 4 KiB..256 MiB that start in
 * mapped memory. Rounds interleave the four ways so each sees the same
 * machine; each figure is the fastest round's time per check. Before timing,
 * every way must give the same answer for every range.
 */
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Page flags of the arena (kiln does not interpret them). */
enum {
    PG_C = 0x01, /* committed */
    PG_R = 0x02, /* readable */
    PG_W = 0x04, /* writable */
    PG_X = 0x08, /* executable */
    PG_G = 0x10, /* mapped for the GPU */
    PG_T = 0x20, /* CPU writes trapped so that GPU copies can be invalidated */
    PG_RW = PG_C | PG_R | PG_W,
};

#define TRY(expr)             \
    do {                      \
        int try_rc_ = (expr); \
        if (try_rc_ < 0)      \
            return try_rc_;   \
    } while (0)
#define MIN(a, b) ((a) < (b) ? (a) : (b))

#define GIB_PAGES        ((uint64_t)262144) /* 1 GiB of 4 KiB pages */
#define MIB_PAGES        ((uint64_t)256)
#define RANGE_PAGES      ((uint64_t)38400) /* 150 MiB */
#define MAX_RANDOM_PAGES ((uint64_t)65536) /* 256 MiB */

enum way { WAY_BYTES, WAY_SUMMARY1, WAY_SUMMARY2, WAY_MEMO, WAYS };
static const char *const way_names[WAYS] = {"bytewise", "summary1", "summary2", "memo"};

struct range {
    uint64_t first, last;
};

/* What a range check learns: the runs, folded into a checksum. */
struct answer {
    uint64_t runs;
    uint64_t sum;
};

struct memo {
    uint64_t generation;
    bool valid;
    struct answer answer;
};

/* A mapped region random ranges may start in. */
struct region {
    uint64_t first, pages;
};

struct arena {
    struct kiln_pages *t;
    struct region regions[16];
    unsigned nregions;
    uint64_t uniform_first, mixed_first;
};

static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A length from 1 to 2^bits pages, even over the powers of two. */
static uint64_t log_pages(uint64_t *s, unsigned bits)
{
    unsigned b = (unsigned)(next_rand(s) % (bits + 1));
    return 1 + next_rand(s) % ((uint64_t)1 << b);
}

static int map(struct arena *a, uint64_t first, uint64_t pages, uint8_t v, bool sample)
{
    if (sample && a->nregions < CLI_ARRAY_LEN(a->regions))
        a->regions[a->nregions++] = (struct region){first, pages};
    return kiln_pages_store(a->t, first, first + pages - 1, v);
}

/*
 * A 1 TiB guest arena, most of it never mapped (absent chunks):
 *  - at 4 MiB an executable: 32 MiB text (R X), 8 MiB read-only data, 4 MiB
 *    data (RW);
 *  - at 1 GiB a 2 GiB heap reservation, 1.5 GiB committed RW, the rest
 *    reserved (0); 600 runs of 1..16 pages in it write-protected for
 *    tracking (C R);
 *  - at 8 GiB a 4 GiB GPU heap (RW G). Its first half holds the uniform
 *    150 MiB range (at 1 GiB + 6 MiB into the heap, 2 MiB-aligned, not
 *    16 MiB-aligned) and the mixed one (at 1.5 GiB + 2 MiB: one tracked page
 *    every 1,000); its second half 3,000 resources of 64 KiB..64 MiB, a third
 *    of them tracked (C R G T);
 *  - at 16 GiB 64 thread stacks of 1 MiB, each with a guard page (0);
 *  - at 64 GiB and 200 GiB two 48 MiB read-only file mappings.
 */
static int build_arena(struct arena *a, uint64_t seed)
{
    const uint8_t gpu = PG_RW | PG_G, tracked = PG_C | PG_R | PG_G | PG_T;
    int rc = kiln_pages_create(KILN_PAGES_MAX_PAGES, &a->t);
    if (rc < 0)
        return rc;
    uint64_t exe = 4 * MIB_PAGES;
    TRY(map(a, exe, 32 * MIB_PAGES, PG_C | PG_R | PG_X, true));
    TRY(map(a, exe + 32 * MIB_PAGES, 8 * MIB_PAGES, PG_C | PG_R, true));
    TRY(map(a, exe + 40 * MIB_PAGES, 4 * MIB_PAGES, PG_RW, true));

    uint64_t heap = GIB_PAGES, heap_pages = 3 * GIB_PAGES / 2;
    TRY(map(a, heap, heap_pages, PG_RW, true));
    a->regions[a->nregions++] = (struct region){heap + heap_pages, GIB_PAGES / 2}; /* reserved */
    for (int i = 0; i < 600; i++) {
        uint64_t p = heap + next_rand(&seed) % heap_pages, n = 1 + next_rand(&seed) % 16;
        TRY(kiln_pages_store(a->t, p, MIN(p + n, heap + heap_pages) - 1, PG_C | PG_R));
    }

    uint64_t gheap = 8 * GIB_PAGES;
    TRY(map(a, gheap, 4 * GIB_PAGES, gpu, true));
    a->uniform_first = gheap + GIB_PAGES + 6 * MIB_PAGES;
    a->mixed_first = gheap + 3 * GIB_PAGES / 2 + 2 * MIB_PAGES;
    for (uint64_t p = a->mixed_first + 999; p < a->mixed_first + RANGE_PAGES; p += 1000)
        TRY(kiln_pages_store(a->t, p, p, tracked));
    for (int i = 0; i < 3000; i++) {
        uint64_t n = 16 + log_pages(&seed, 14) - 1;
        uint64_t p = gheap + 2 * GIB_PAGES + next_rand(&seed) % (2 * GIB_PAGES - n);
        TRY(kiln_pages_store(a->t, p, p + n - 1, next_rand(&seed) % 3 == 0 ? tracked : gpu));
    }

    uint64_t stacks = 16 * GIB_PAGES;
    for (uint64_t i = 0; i < 64; i++)
        TRY(map(a, stacks + i * MIB_PAGES + 1, MIB_PAGES - 1, PG_RW, i == 0));
    a->regions[a->nregions++] = (struct region){stacks, 64 * MIB_PAGES};
    TRY(map(a, 64 * GIB_PAGES, 48 * MIB_PAGES, PG_C | PG_R, true));
    TRY(map(a, 200 * GIB_PAGES, 48 * MIB_PAGES, PG_C | PG_R, true));
    return 0;
}

static struct answer check_range(const struct kiln_pages *t, const struct range *r,
                                 enum kiln_pages_scan how)
{
    struct answer a = {0, 0};
    for (uint64_t p = r->first; p <= r->last;) {
        uint8_t v = kiln_pages_load(t, p);
        uint64_t end = kiln_pages_run_end_using(t, p, r->last + 1, how);
        a.runs++;
        a.sum = a.sum * 31 + (end - p) * 257 + v;
        p = end;
    }
    return a;
}

static struct answer check_way(const struct kiln_pages *t, const struct range *r, struct memo *m,
                               enum way way)
{
    if (way != WAY_MEMO)
        return check_range(t, r, (enum kiln_pages_scan)way);
    uint64_t g = kiln_pages_generation(t);
    if (!m->valid || m->generation != g) {
        m->answer = check_range(t, r, KILN_PAGES_SCAN_SUMMARY2);
        m->generation = g;
        m->valid = true;
    }
    return m->answer;
}

struct bench_case {
    const char *name;
    const struct range *ranges;
    size_t nranges; /* distinct ranges; a pass checks `calls` of them, cycling */
    size_t calls;
    double ns[WAYS]; /* fastest round, per check */
    uint64_t runs;   /* runs over the distinct ranges */
    uint64_t pages;
};

/* @return whether every way gives the same answer for every range. */
static bool answers_agree(const struct kiln_pages *t, struct bench_case *c, const char *name)
{
    c->runs = c->pages = 0;
    for (size_t i = 0; i < c->nranges; i++) {
        struct memo m = {0};
        struct answer want = check_way(t, &c->ranges[i], &m, WAY_BYTES);
        for (int w = 1; w < WAYS; w++) {
            struct answer got = check_way(t, &c->ranges[i], &m, (enum way)w);
            if (got.runs != want.runs || got.sum != want.sum) {
                cli_error(name,
                          "%s range %zu (pages %" PRIu64 "..%" PRIu64 "): %s answers "
                          "%" PRIu64 " runs, bytewise %" PRIu64,
                          c->name, i, c->ranges[i].first, c->ranges[i].last, way_names[w], got.runs,
                          want.runs);
                return false;
            }
        }
        c->runs += want.runs;
        c->pages += c->ranges[i].last - c->ranges[i].first + 1;
    }
    return true;
}

static volatile uint64_t bench_sink;

static void time_rounds(const struct kiln_pages *t, struct bench_case *cases, size_t ncases,
                        unsigned rounds, struct memo *memos)
{
    for (size_t c = 0; c < ncases; c++)
        for (int w = 0; w < WAYS; w++)
            cases[c].ns[w] = 1e300;
    for (unsigned r = 0; r < rounds; r++) {
        for (size_t c = 0; c < ncases; c++) {
            struct bench_case *bc = &cases[c];
            for (int w = 0; w < WAYS; w++) {
                uint64_t acc = 0, t0 = kiln_now_ns();
                for (size_t i = 0; i < bc->calls; i++) {
                    size_t k = i % bc->nranges;
                    acc +=
                        check_way(t, &bc->ranges[k], &memos[c * MAX_RANDOM_PAGES + k], (enum way)w)
                            .sum;
                }
                double ns = (double)(kiln_now_ns() - t0) / (double)bc->calls;
                bench_sink += acc;
                if (ns < bc->ns[w])
                    bc->ns[w] = ns;
            }
        }
    }
}

/* The cost of the store an emulator makes most: one page's flags, and back. */
static double time_page_store(struct kiln_pages *t, uint64_t page, uint8_t other, unsigned rounds)
{
    uint8_t v = kiln_pages_load(t, page);
    double best = 1e300;
    for (unsigned r = 0; r < rounds; r++) {
        uint64_t t0 = kiln_now_ns();
        for (int i = 0; i < 500; i++) {
            kiln_pages_store(t, page, page, other);
            kiln_pages_store(t, page, page, v);
        }
        double ns = (double)(kiln_now_ns() - t0) / 1000.0;
        best = ns < best ? ns : best;
    }
    return best;
}

static void usage(FILE *out, const char *name)
{
    (void)fprintf(
        out,
        "usage: %s [--rounds N] [--ranges N] [--seed N] [--json]\n\n"
        "Times one range check (every run of equal pages over a range) four ways over a\n"
        "1 TiB guest arena: bytewise (8 pages per load, the baseline), summary1 (64-page\n"
        "blocks), summary2 (also 4096-page groups) and memo (summary2 behind a generation\n"
        "memo), for a uniform 150 MiB range, one with a different page every 1,000 pages,\n"
        "and random 4 KiB..256 MiB ranges. Figures are ns per check, fastest round.\n\n"
        "  --rounds N   interleaved rounds (default 15)\n"
        "  --ranges N   random ranges (default 4096)\n"
        "  --seed N     layout and range seed (default 1)\n"
        "  --json       one JSON object on stdout\n",
        name);
}

int cmd_bench_pages(int argc, char **argv)
{
    const char *name = argv[0];
    static const struct option opts[] = {
        {"rounds", required_argument, NULL, 'r'}, {"ranges", required_argument, NULL, 'n'},
        {"seed", required_argument, NULL, 's'},   {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    uint64_t rounds = 15, nrandom = 4096, seed = 1;
    bool json = false;
    int c;
    optind = 1;
    opterr = 0; /* one line per error: ours, naming the option */
    while ((c = cli_getopt(argc, argv, ":h", opts)) != -1) {
        int rc = KILN_EXIT_OK;
        switch (c) {
        case 'r':
            rc = cli_parse_u64(name, "--rounds", optarg, 1, 1000, false, &rounds);
            break;
        case 'n':
            rc = cli_parse_u64(name, "--ranges", optarg, 1, MAX_RANDOM_PAGES, false, &nrandom);
            break;
        case 's':
            rc = cli_parse_u64(name, "--seed", optarg, 0, UINT64_MAX, false, &seed);
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            usage(stdout, name);
            return KILN_EXIT_OK;
        default:
            return cli_option_error(name, c, argv);
        }
        if (rc != KILN_EXIT_OK)
            return rc;
    }
    if (optind < argc)
        return cli_usage_error(name, "unexpected argument '%s'", argv[optind]);

    struct arena a = {0};
    int rc = build_arena(&a, seed);
    if (rc < 0) {
        cli_error(name, "building the page arena: %s", kiln_strerror(rc));
        kiln_pages_destroy(a.t);
        return KILN_EXIT_FAILED;
    }
    struct range uniform = {a.uniform_first, a.uniform_first + RANGE_PAGES - 1};
    struct range mixed = {a.mixed_first, a.mixed_first + RANGE_PAGES - 1};
    struct range *random = malloc(nrandom * sizeof(*random));
    struct memo *memos = calloc(3 * MAX_RANDOM_PAGES, sizeof(*memos));
    if (!random || !memos) {
        cli_error(name, "out of memory for %" PRIu64 " ranges", nrandom);
        free(random);
        free(memos);
        kiln_pages_destroy(a.t);
        return KILN_EXIT_FAILED;
    }
    /* Random ranges start in a mapped (or reserved) region, chosen by size. */
    uint64_t total = 0, rs = seed ^ 0x9a9e5ull;
    for (unsigned i = 0; i < a.nregions; i++)
        total += a.regions[i].pages;
    if (total == 0)
        total = 1; /* never: build_arena always maps regions */
    for (uint64_t i = 0; i < nrandom; i++) {
        uint64_t at = next_rand(&rs) % total;
        unsigned k = 0;
        while (at >= a.regions[k].pages)
            at -= a.regions[k++].pages;
        uint64_t first = a.regions[k].first + at;
        uint64_t last = MIN(first + log_pages(&rs, 16) - 1, KILN_PAGES_MAX_PAGES - 1);
        random[i] = (struct range){first, last};
    }

    struct bench_case cases[3] = {
        {"uniform", &uniform, 1, 400, {0}, 0, 0},
        {"mixed", &mixed, 1, 400, {0}, 0, 0},
        {"random", random, nrandom, nrandom, {0}, 0, 0},
    };
    bool agree = true;
    for (size_t i = 0; i < 3 && agree; i++)
        agree = answers_agree(a.t, &cases[i], name);
    if (!agree) {
        free(random);
        free(memos);
        kiln_pages_destroy(a.t);
        return KILN_EXIT_FAILED;
    }
    time_rounds(a.t, cases, 3, (unsigned)rounds, memos);
    double store_ns =
        time_page_store(a.t, a.uniform_first + 5000, PG_C | PG_R | PG_G | PG_T, (unsigned)rounds);

    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        for (size_t i = 0; i < 3; i++) {
            char key[64];
            for (int w = 0; w < WAYS; w++) {
                (void)snprintf(key, sizeof(key), "%s_%s_ns", cases[i].name, way_names[w]);
                cli_json_double(&j, key, cases[i].ns[w]);
            }
            (void)snprintf(key, sizeof(key), "%s_speedup", cases[i].name);
            cli_json_double(&j, key, cases[i].ns[WAY_BYTES] / cases[i].ns[WAY_SUMMARY2]);
            (void)snprintf(key, sizeof(key), "%s_runs_per_check", cases[i].name);
            cli_json_double(&j, key, (double)cases[i].runs / (double)cases[i].nranges);
            (void)snprintf(key, sizeof(key), "%s_pages_per_check", cases[i].name);
            cli_json_double(&j, key, (double)cases[i].pages / (double)cases[i].nranges);
        }
        cli_json_u64(&j, "random_ranges", nrandom);
        cli_json_double(&j, "store_page_ns", store_ns);
        cli_json_u64(&j, "arena_pages", KILN_PAGES_MAX_PAGES);
        cli_json_u64(&j, "chunks", kiln_pages_chunk_count(a.t));
        cli_json_u64(&j, "rounds", rounds);
        cli_json_u64(&j, "seed", seed);
        cli_json_end(&j);
    } else {
        printf("range check, ns per call (fastest of %" PRIu64 " rounds; lower is better)\n",
               rounds);
        printf("%-8s %10s %12s %10s %10s %10s %10s %9s\n", "range", "pages", "runs", "bytewise",
               "summary1", "summary2", "memo", "speedup");
        for (size_t i = 0; i < 3; i++) {
            const struct bench_case *bc = &cases[i];
            printf("%-8s %10.0f %12.1f %10.1f %10.1f %10.1f %10.1f %8.1fx\n", bc->name,
                   (double)bc->pages / (double)bc->nranges, (double)bc->runs / (double)bc->nranges,
                   bc->ns[WAY_BYTES], bc->ns[WAY_SUMMARY1], bc->ns[WAY_SUMMARY2], bc->ns[WAY_MEMO],
                   bc->ns[WAY_BYTES] / bc->ns[WAY_SUMMARY2]);
        }
        printf("one-page store (with settle): %.1f ns; %" PRIu64 " chunks allocated\n", store_ns,
               kiln_pages_chunk_count(a.t));
    }
    free(random);
    free(memos);
    kiln_pages_destroy(a.t);
    return KILN_EXIT_OK;
}
