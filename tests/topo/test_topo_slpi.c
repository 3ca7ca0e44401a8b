/*
 * test_topo_slpi.c - the Windows topology parser (topo_slpi.c) on recorded
 * layouts: the records GetLogicalProcessorInformationEx returns, built
 * byte by byte here as Windows lays them out, for a Ryzen 9 9950X3D (two
 * CCDs of 8 cores with SMT; 96 MB of L3 on CCD0, 32 MB on CCD1), a Ryzen 9
 * 5900X (two CCDs of 6 cores with SMT, 32 MB each) and a two-group part.
 * The parser is portable, so these run in every build (and under wine).
 */
#include "topo_fixture.h"
#include "topo_internal.h"

#define KB 1024u
#define MB (1024u * 1024u)

/* Record kinds and cache types, as <winnt.h> numbers them. */
enum { CORE = 0, NUMA = 1, CACHE = 2, PACKAGE = 3, GROUP = 4, DIE = 5 };
enum { UNIFIED = 0, INSTRUCTION = 1, DATA = 2, TRACE = 3 };

struct rec_buf {
    unsigned char b[32768];
    size_t n;
    bool group_count; /* Windows 11 style: GroupCount 1 in cache records */
};

static unsigned char *put_head(struct rec_buf *r, uint32_t kind, uint32_t size)
{
    KT_CHECK(r->n + size <= sizeof(r->b));
    if (r->n + size > sizeof(r->b))
        return NULL;
    unsigned char *p = r->b + r->n;
    memset(p, 0, size);
    kiln__store_le32(p, kind);
    kiln__store_le32(p + 4, size);
    r->n += size;
    return p;
}

static void put_affinity(unsigned char *p, uint16_t group, uint64_t mask)
{
    kiln__store_le64(p, mask);
    kiln__store_le16(p + 8, group);
}

static void put_cache(struct rec_buf *r, unsigned level, unsigned type, uint32_t size,
                      uint16_t group, uint64_t mask)
{
    unsigned char *p = put_head(r, CACHE, 56);
    if (!p)
        return;
    p[8] = (unsigned char)level;
    p[9] = 16;                    /* associativity */
    kiln__store_le16(p + 10, 64); /* line size */
    kiln__store_le32(p + 12, size);
    kiln__store_le32(p + 16, type);
    if (r->group_count)
        kiln__store_le16(p + 38, 1);
    put_affinity(p + 40, group, mask);
}

static void put_core(struct rec_buf *r, uint16_t group, uint64_t mask, bool smt)
{
    unsigned char *p = put_head(r, CORE, 48);
    if (!p)
        return;
    p[8] = smt ? 1 : 0; /* LTP_PC_SMT */
    kiln__store_le16(p + 30, 1);
    put_affinity(p + 32, group, mask);
}

static void put_package(struct rec_buf *r, uint16_t group, uint64_t mask)
{
    unsigned char *p = put_head(r, PACKAGE, 48);
    if (!p)
        return;
    kiln__store_le16(p + 30, 1);
    put_affinity(p + 32, group, mask);
}

static void put_groups(struct rec_buf *r, unsigned n, const uint64_t *active)
{
    unsigned char *p = put_head(r, GROUP, 32 + 48 * n);
    if (!p)
        return;
    kiln__store_le16(p + 8, (uint16_t)n);
    kiln__store_le16(p + 10, (uint16_t)n);
    for (unsigned g = 0; g < n; g++) {
        unsigned char *gi = p + 32 + 48 * g;
        unsigned count = 0;
        for (uint64_t m = active[g]; m; m &= m - 1)
            count++;
        gi[0] = (unsigned char)count;
        gi[1] = (unsigned char)count;
        kiln__store_le64(gi + 40, active[g]);
    }
}

static uint64_t bits(unsigned first, unsigned count)
{
    return (count >= 64 ? UINT64_MAX : (UINT64_C(1) << count) - 1) << first;
}

/*
 * A Zen part in RelationAll order: per core its record, then its L1d, L1i
 * and L2; then each CCD's L3; then the package; the group record first.
 * Windows numbers SMT siblings next to each other (core c = CPUs 2c, 2c+1).
 */
static void zen(struct rec_buf *r, unsigned ccds, unsigned cores_per_ccd, const uint32_t *l3,
                uint32_t l1d, uint32_t l2)
{
    unsigned cpus = ccds * cores_per_ccd * 2;
    uint64_t active = bits(0, cpus);
    put_groups(r, 1, &active);
    for (unsigned c = 0; c < ccds * cores_per_ccd; c++) {
        uint64_t m = bits(2 * c, 2);
        put_core(r, 0, m, true);
        put_cache(r, 1, DATA, l1d, 0, m);
        put_cache(r, 1, INSTRUCTION, 32 * KB, 0, m);
        put_cache(r, 2, UNIFIED, l2, 0, m);
    }
    for (unsigned d = 0; d < ccds; d++)
        put_cache(r, 3, UNIFIED, l3[d], 0, bits(d * cores_per_ccd * 2, cores_per_ccd * 2));
    put_package(r, 0, active);
}

static void x3d_9950(struct rec_buf *r)
{
    static const uint32_t l3[] = {96 * MB, 32 * MB};
    zen(r, 2, 8, l3, 48 * KB, 1024 * KB);
}

static void ryzen_5900x(struct rec_buf *r)
{
    static const uint32_t l3[] = {32 * MB, 32 * MB};
    zen(r, 2, 6, l3, 32 * KB, 512 * KB);
}

static int parse_and_choose(const struct rec_buf *r, unsigned flags, struct kiln_topo **t,
                            struct kiln_pin_plan *p)
{
    *p = (struct kiln_pin_plan){.size = sizeof(struct kiln_pin_plan), .domain = -1};
    int rc = kiln__topo_parse_slpi(r->b, r->n, flags, t);
    return rc < 0 ? rc : kiln_topo_choose(*t, NULL, p);
}

/* ---- recorded layouts ------------------------------------------------------ */

static void check_9950x3d(bool group_count)
{
    static struct rec_buf r;
    r = (struct rec_buf){.group_count = group_count};
    x3d_9950(&r);
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(parse_and_choose(&r, 0, &t, &p));
    KT_CHECK(fx_set_is(&t->online, "0-31"));
    KT_REQUIRE(t->ndomains == 2 && t->largest >= 0);
    KT_CHECK_EQ(t->last_level, 3);
    const struct kiln_cpu_cache_domain *d = &t->domains[t->largest];
    KT_CHECK_EQ(d->level, 3);
    KT_CHECK_EQ(d->type, KILN_CPU_CACHE_UNIFIED);
    KT_CHECK_EQ(d->size, 96 * MB);
    KT_CHECK_EQ(d->id, -1);
    KT_CHECK(fx_set_is(&d->cpus, "0-15"));
    KT_CHECK(fx_set_is(&t->domains[1].cpus, "16-31"));
    KT_CHECK_EQ(t->domains[1].size, 32 * MB);
    KT_CHECK_EQ(p.verdict, KILN_PIN_APPLY);
    KT_CHECK_EQ(p.domain, t->largest);
    KT_CHECK(fx_set_is(&p.cpus, "0-15"));
    KT_CHECK(strstr(p.reason, "96 MiB") && strstr(p.reason, "32 MiB"));
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

KT_CASE(x3d_9950_picks_96mb)
{
    check_9950x3d(false); /* Windows 10: GroupCount 0, one mask */
    check_9950x3d(true);  /* Windows 11: GroupCount 1 */
}

KT_CASE(x3d_9950_all_levels)
{
    static struct rec_buf r;
    r = (struct rec_buf){0};
    x3d_9950(&r);
    struct kiln_topo *t = NULL;
    KT_REQUIRE_OK(kiln__topo_parse_slpi(r.b, r.n, KILN_TOPO_ALL_LEVELS, &t));
    /* 16 cores x (L1d, L1i, L2) + 2 L3. */
    KT_CHECK_EQ(t->ndomains, 16 * 3 + 2);
    KT_CHECK(t->all_levels);
    KT_CHECK_EQ(t->last_level, 3);
    size_t l1d = 0, l1i = 0, l2 = 0;
    for (size_t i = 0; i < t->ndomains; i++) {
        const struct kiln_cpu_cache_domain *d = &t->domains[i];
        KT_CHECK_EQ(kiln_cpuset_count(&d->cpus), d->level == 3 ? 16 : 2);
        l1d += d->level == 1 && d->type == KILN_CPU_CACHE_DATA && d->size == 48 * KB;
        l1i += d->level == 1 && d->type == KILN_CPU_CACHE_INSTRUCTION;
        l2 += d->level == 2 && d->size == 1024 * KB;
    }
    KT_CHECK_EQ(l1d, 16);
    KT_CHECK_EQ(l1i, 16);
    KT_CHECK_EQ(l2, 16);
    KT_REQUIRE(t->largest >= 0);
    KT_CHECK_EQ(t->domains[t->largest].size, 96 * MB);
    kiln_topo_free(t);
}

KT_CASE(ryzen_5900x_symmetric)
{
    static struct rec_buf r;
    r = (struct rec_buf){0};
    ryzen_5900x(&r);
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(parse_and_choose(&r, 0, &t, &p));
    KT_CHECK(fx_set_is(&t->online, "0-23"));
    KT_REQUIRE(t->ndomains == 2);
    KT_CHECK(fx_set_is(&t->domains[0].cpus, "0-11"));
    KT_CHECK(fx_set_is(&t->domains[1].cpus, "12-23"));
    KT_CHECK_EQ(t->domains[0].size, 32 * MB);
    KT_CHECK_EQ(t->domains[1].size, 32 * MB);
    KT_CHECK_EQ(t->largest, 0); /* a tie goes to the first in CPU order */
    KT_CHECK_EQ(p.verdict, KILN_PIN_SYMMETRIC);
    KT_CHECK_EQ(kiln_cpuset_count(&p.cpus), 0);
    KT_CHECK(strstr(p.reason, "symmetric"));
    kiln_pin_plan_free(&p);

    /* A process allowed only CCD1 already sits in one domain. */
    struct kiln_cpuset ccd1 = fx_set("12-23");
    KT_REQUIRE_OK(kiln_topo_choose(t, &ccd1, &p));
    KT_CHECK_EQ(p.verdict, KILN_PIN_ALREADY);
    kiln_pin_plan_free(&p);
    kiln_cpuset_free(&ccd1);
    kiln_topo_free(t);
}

/* Two processor groups: CPU numbers are group * 64 + bit. */
KT_CASE(two_groups)
{
    static struct rec_buf r;
    r = (struct rec_buf){0};
    const uint64_t active[2] = {UINT64_MAX, bits(0, 32)};
    put_groups(&r, 2, active);
    put_cache(&r, 3, UNIFIED, 32 * MB, 0, bits(0, 32));
    put_cache(&r, 3, UNIFIED, 32 * MB, 0, bits(32, 32));
    put_cache(&r, 3, UNIFIED, 96 * MB, 1, bits(0, 32));
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(parse_and_choose(&r, 0, &t, &p));
    KT_CHECK(fx_set_is(&t->online, "0-95"));
    KT_CHECK_EQ(t->ndomains, 3);
    KT_CHECK_EQ(p.verdict, KILN_PIN_APPLY);
    KT_CHECK(fx_set_is(&p.cpus, "64-95"));
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

/* RelationCache alone has no group record: the caches' CPUs are the online ones. */
KT_CASE(cache_records_only)
{
    static struct rec_buf r;
    r = (struct rec_buf){0};
    put_cache(&r, 1, DATA, 32 * KB, 0, bits(0, 2));
    put_cache(&r, 1, DATA, 32 * KB, 0, bits(2, 2));
    put_cache(&r, 3, UNIFIED, 32 * MB, 0, bits(0, 2));
    put_cache(&r, 3, UNIFIED, 96 * MB, 0, bits(2, 2));
    put_cache(&r, 4, TRACE, 12 * KB, 0, bits(0, 4)); /* left out */
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(parse_and_choose(&r, 0, &t, &p));
    KT_CHECK(fx_set_is(&t->online, "0-3"));
    KT_CHECK_EQ(t->last_level, 3);
    KT_CHECK_EQ(p.verdict, KILN_PIN_APPLY);
    KT_CHECK(fx_set_is(&p.cpus, "2-3"));
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

/* Inactive processors are left out of every domain, as offline CPUs are. */
KT_CASE(inactive_processors_left_out)
{
    static struct rec_buf r;
    r = (struct rec_buf){0};
    const uint64_t active = bits(0, 6);
    put_groups(&r, 1, &active);
    put_cache(&r, 3, UNIFIED, 32 * MB, 0, bits(0, 4));
    put_cache(&r, 3, UNIFIED, 32 * MB, 0, bits(4, 4));
    put_cache(&r, 3, UNIFIED, 32 * MB, 0, bits(8, 4)); /* no active processor */
    struct kiln_topo *t = NULL;
    KT_REQUIRE_OK(kiln__topo_parse_slpi(r.b, r.n, 0, &t));
    KT_REQUIRE(t->ndomains == 2);
    KT_CHECK(fx_set_is(&t->domains[1].cpus, "4-5"));
    kiln_topo_free(t);
}

KT_CASE(empty_buffer_is_no_caches)
{
    struct kiln_topo *t = NULL;
    KT_REQUIRE_OK(kiln__topo_parse_slpi(NULL, 0, 0, &t));
    KT_CHECK_EQ(t->ndomains, 0);
    KT_CHECK_EQ(t->largest, -1);
    KT_CHECK(strstr(t->note, "GetLogicalProcessorInformationEx") != NULL);
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(kiln_topo_choose(t, NULL, &p));
    KT_CHECK_EQ(p.verdict, KILN_PIN_NO_CACHES);
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

/* Every malformed record refuses the whole buffer, naming its offset. */
KT_CASE(malformed_records)
{
    static struct rec_buf good, r;
    good = (struct rec_buf){0};
    x3d_9950(&good);
    const size_t l3_at = good.n - 48 - 2 * 56; /* the first L3 record */
    struct {
        const char *what;
        size_t at; /* byte to change */
        int width; /* 1, 2 or 4 bytes; 0: cut the buffer at `at` */
        uint32_t value;
        const char *log;
    } cases[] = {
        {"cut inside a record", l3_at + 20, 0, 0, "runs past"},
        {"cut inside a head", l3_at + 4, 0, 0, "cut short"},
        {"size 0", l3_at + 4, 4, 0, "runs past"},
        {"size past the end", l3_at + 4, 4, 1u << 20, "runs past"},
        {"cache record too small", l3_at + 4, 4, 40, "too small"},
        {"level 0", l3_at + 8, 1, 0, "level 0"},
        {"unknown cache type", l3_at + 16, 4, 9, "unknown cache type"},
        {"empty mask", l3_at + 40, 4, 0, "no processor"},
        {"two masks in 56 bytes", l3_at + 38, 2, 2, "run past"},
        {"group past the limit", l3_at + 48, 2, 1024, "past the CPU limit"},
        {"overlapping L3s", l3_at + 56 + 40, 4, 0xffffff00u, "overlap"},
        {"same CPUs, other size", l3_at + 56 + 40, 4, 0xffffu, "another size"},
    };
    for (size_t i = 0; i < KILN_ARRAY_LEN(cases); i++) {
        r = good;
        size_t len = r.n;
        unsigned char *p = r.b + cases[i].at;
        if (cases[i].width == 0)
            len = cases[i].at;
        else if (cases[i].width == 1)
            *p = (unsigned char)cases[i].value;
        else if (cases[i].width == 2)
            kiln__store_le16(p, (uint16_t)cases[i].value);
        else
            kiln__store_le32(p, cases[i].value);
        if (cases[i].at == l3_at + 56 + 40 && cases[i].value == 0xffffu)
            kiln__store_le32(p + 4, 0); /* the high half of the mask */
        fx_log_start();
        struct kiln_topo *t = NULL;
        int rc = kiln__topo_parse_slpi(r.b, len, 0, &t);
        fx_log_stop();
        if (rc != KILN_EPARSE || t != NULL)
            kt_fail(__FILE__, __LINE__, "%s: %s", cases[i].what, kiln_errname(rc));
        if (fx_log_count(KILN_LOG_ERROR) != 1 || !fx_log_has(KILN_LOG_ERROR, cases[i].log))
            kt_fail(__FILE__, __LINE__, "%s: expected one error with '%s'", cases[i].what,
                    cases[i].log);
        kiln_topo_free(rc == KILN_OK ? t : NULL);
    }
}

static void discard(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)user;
    (void)level;
    (void)module;
    (void)line;
}

/* Random damage never reads past the buffer or leaks (run under ASan too). */
KT_CASE(random_damage)
{
    static struct rec_buf good, r;
    good = (struct rec_buf){0};
    x3d_9950(&good);
    uint64_t seed = 0x5eed;
    kiln_log_set_sink(discard, NULL);
    for (int i = 0; i < 4000; i++) {
        r = good;
        size_t len = r.n;
        unsigned flips = 1 + (unsigned)(kt_rand(&seed) % 4);
        for (unsigned f = 0; f < flips; f++)
            r.b[kt_rand(&seed) % len] ^= (unsigned char)(1u << (kt_rand(&seed) % 8));
        if (kt_rand(&seed) % 4 == 0)
            len = (size_t)(kt_rand(&seed) % len);
        struct kiln_topo *t = NULL;
        int rc = kiln__topo_parse_slpi(r.b, len, i % 2 ? KILN_TOPO_ALL_LEVELS : 0, &t);
        KT_CHECK(rc == KILN_OK || rc == KILN_EPARSE);
        KT_CHECK((rc == KILN_OK) == (t != NULL));
        if (t) {
            for (size_t d = 0; d < t->ndomains; d++)
                KT_CHECK(kiln_cpuset_count(&t->domains[d].cpus) > 0);
            struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
            KT_CHECK_OK(kiln_topo_choose(t, NULL, &p));
            kiln_pin_plan_free(&p);
        }
        kiln_topo_free(t);
    }
    kiln_log_set_sink(NULL, NULL);
}

KT_MAIN(KT_ENTRY(x3d_9950_picks_96mb), KT_ENTRY(x3d_9950_all_levels),
        KT_ENTRY(ryzen_5900x_symmetric), KT_ENTRY(two_groups), KT_ENTRY(cache_records_only),
        KT_ENTRY(inactive_processors_left_out), KT_ENTRY(empty_buffer_is_no_caches),
        KT_ENTRY(malformed_records), KT_ENTRY(random_damage))
