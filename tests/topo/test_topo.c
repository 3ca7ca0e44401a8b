/*
 * test_topo.c - the topo module on fixture trees: the parsers, reading
 * sysfs copies (committed ones in tests/fixtures/topo and trees written
 * here), the choice, the cgroup limit and the opt-in rule.
 */
#include "topo_fixture.h"

#include <sys/stat.h>

/* ---- helpers ------------------------------------------------------------- */

/* Reads `root` last-level only and chooses for `allowed` (NULL: online). */
static int read_and_choose(const char *root, unsigned flags, const char *allowed,
                           struct kiln_topo **topo, struct kiln_pin_plan *plan)
{
    *plan = (struct kiln_pin_plan){.size = sizeof(struct kiln_pin_plan), .domain = -1};
    int rc = kiln_topo_read(root, flags, topo);
    if (rc < 0)
        return rc;
    struct kiln_cpuset a = {0};
    if (allowed)
        a = fx_set(allowed);
    rc = kiln_topo_choose(*topo, allowed ? &a : NULL, plan);
    kiln_cpuset_free(&a);
    return rc;
}

static const struct kiln_cpu_cache_domain *largest(const struct kiln_topo *t)
{
    return t->largest >= 0 ? &t->domains[t->largest] : NULL;
}

/*
 * A 4-CPU part written at test time, for mutation: two dies without SMT,
 * CPUs 0-1 share a 32 MB L3, CPUs 2-3 a 96 MB one; each CPU has its own L1d
 * (index0) and L2 (index1); the L3 is index2.
 */
static const char *write_small(void)
{
    const char *root = kt_tmpdir();
    fx_write(root, "online", "0-3");
    for (unsigned c = 0; c < 4; c++) {
        char own[8];
        snprintf(own, sizeof(own), "%u", c);
        fx_cache(root, c, 0, 1, "Data", "32K", own, (int)c);
        fx_cache(root, c, 1, 2, "Unified", "1024K", own, (int)c);
        fx_cache(root, c, 2, 3, "Unified", c < 2 ? "32768K" : "96M", c < 2 ? "0-1" : "2-3",
                 (int)(c / 2));
    }
    return root;
}

/* ---- parsers -------------------------------------------------------------- */

KT_CASE(list_parse)
{
    static const struct {
        const char *text, *formatted;
        uint32_t count;
    } good[] = {
        {"0", "0", 1},
        {"0-7,16-23\n", "0-7,16-23", 16},
        {"", "", 0},
        {"\n", "", 0},
        {"3,1", "1,3", 2},
        {"0-0", "0", 1},
        {"1,2,3,5", "1-3,5", 4},
        {"63-64", "63-64", 2},
        {"1100-1101,0", "0,1100-1101", 3},
        {"65535", "65535", 1},
    };
    for (size_t i = 0; i < FX_LEN(good); i++) {
        struct kiln_cpuset s = {0};
        KT_CHECK_OK(kiln_cpuset_parse_list(&s, good[i].text, strlen(good[i].text)));
        KT_CHECK(fx_set_is(&s, good[i].formatted));
        KT_CHECK_EQ(kiln_cpuset_count(&s), good[i].count);
        kiln_cpuset_free(&s);
    }
    static const struct {
        const char *text;
        int rc;
    } bad[] = {
        {"0-", KILN_EPARSE},
        {"5-3", KILN_EPARSE},
        {"a", KILN_EPARSE},
        {",", KILN_EPARSE},
        {"1,,2", KILN_EPARSE},
        {"1,", KILN_EPARSE},
        {"-1", KILN_EPARSE},
        {" 1", KILN_EPARSE},
        {"1 2", KILN_EPARSE},
        {"0-3-5", KILN_EPARSE},
        {"0-3:2/4", KILN_EPARSE},
        {"1\n2", KILN_EPARSE},
        {"65536", KILN_ERANGE},
        {"1-65536", KILN_ERANGE},
        {"99999999999999999999", KILN_ERANGE},
        {"1-70000,3", KILN_ERANGE},
        {"99999999999999999999-a", KILN_EPARSE},
        {"70000,", KILN_EPARSE},
    };
    for (size_t i = 0; i < FX_LEN(bad); i++) {
        struct kiln_cpuset s = {0};
        int rc = kiln_cpuset_parse_list(&s, bad[i].text, strlen(bad[i].text));
        if (rc != bad[i].rc)
            kt_fail(__FILE__, __LINE__, "'%s': got %s, expected %s", bad[i].text, kiln_errname(rc),
                    kiln_errname(bad[i].rc));
        KT_CHECK(s.words == NULL && s.nwords == 0); /* never half a list */
    }
}

KT_CASE(mask_parse)
{
    static const struct {
        const char *text, *list;
    } good[] = {
        {"3", "0-1"},
        {"00000000,0000ff0f\n", "0-3,8-15"},
        {"1,00000000", "32"},
        {"ffffffff,ffffffff", "0-63"},
        {"0", ""},
        {"80000000,00000000,00000001", "0,95"},
    };
    for (size_t i = 0; i < FX_LEN(good); i++) {
        struct kiln_cpuset s = {0};
        KT_CHECK_OK(kiln_cpuset_parse_mask(&s, good[i].text, strlen(good[i].text)));
        KT_CHECK(fx_set_is(&s, good[i].list));
        kiln_cpuset_free(&s);
    }
    static const char *const bad[] = {"", "g", "123456789", ",1", "1,", "1,,1", "0x3", " 3"};
    for (size_t i = 0; i < FX_LEN(bad); i++) {
        struct kiln_cpuset s = {0};
        int rc = kiln_cpuset_parse_mask(&s, bad[i], strlen(bad[i]));
        if (rc != KILN_EPARSE)
            kt_fail(__FILE__, __LINE__, "'%s': got %s", bad[i], kiln_errname(rc));
        KT_CHECK(s.words == NULL);
    }
    /* A bit at CPU 65536 (group 2048) is out of range; zero groups there are not. */
    char big[2049 * 9 + 1];
    size_t n = 0;
    for (int g = 0; g < 2049; g++)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "%s%s", g ? "," : "",
                              g == 0 ? "00000001" : "00000000");
    struct kiln_cpuset s = {0};
    KT_CHECK_EQ(kiln_cpuset_parse_mask(&s, big, n), KILN_ERANGE);
    big[7] = '0';
    big[n - 1] = '1';
    KT_CHECK_OK(kiln_cpuset_parse_mask(&s, big, n));
    KT_CHECK(fx_set_is(&s, "0"));
    kiln_cpuset_free(&s);
}

KT_CASE(size_parse)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"32K", 32768}, {"32768K\n", 33554432}, {"96M", 100663296}, {"1G", 1073741824},
        {"512", 512},   {"48k", 49152},         {"0K", 0},
    };
    for (size_t i = 0; i < FX_LEN(good); i++) {
        uint64_t v = 1;
        KT_CHECK_OK(kiln_topo_parse_size(good[i].text, strlen(good[i].text), &v));
        KT_CHECK_EQ(v, good[i].bytes);
    }
    static const struct {
        const char *text;
        int rc;
    } bad[] = {
        {"", KILN_EPARSE},
        {"\n", KILN_EPARSE},
        {"K", KILN_EPARSE},
        {"12Q", KILN_EPARSE},
        {"1.5M", KILN_EPARSE},
        {"-1K", KILN_EPARSE},
        {"32KB", KILN_EPARSE},
        {"3 2K", KILN_EPARSE},
        {"32m", KILN_EPARSE},
        {"99999999999999999999", KILN_ERANGE},
        {"18014398509481984K", KILN_ERANGE},
        {"99999999999999999999y", KILN_EPARSE},
    };
    for (size_t i = 0; i < FX_LEN(bad); i++) {
        uint64_t v = 7;
        int rc = kiln_topo_parse_size(bad[i].text, strlen(bad[i].text), &v);
        if (rc != bad[i].rc)
            kt_fail(__FILE__, __LINE__, "'%s': got %s, expected %s", bad[i].text, kiln_errname(rc),
                    kiln_errname(bad[i].rc));
        KT_CHECK_EQ(v, 0);
    }
}

KT_CASE(cpuset_ops)
{
    struct kiln_cpuset s = fx_set("2-3,64,1500");
    KT_CHECK_EQ(kiln_cpuset_count(&s), 4);
    KT_CHECK(kiln_cpuset_has(&s, 64) && !kiln_cpuset_has(&s, 65) && !kiln_cpuset_has(&s, 99999));
    KT_CHECK_EQ(kiln_cpuset_next(&s, 0), 2);
    KT_CHECK_EQ(kiln_cpuset_next(&s, 4), 64);
    KT_CHECK_EQ(kiln_cpuset_next(&s, 65), 1500);
    KT_CHECK_EQ(kiln_cpuset_next(&s, 1501), -1);
    KT_CHECK_EQ(kiln_cpuset_next(&s, 70000), -1);
    char buf[8];
    KT_CHECK_EQ(kiln_cpuset_format(&s, buf, sizeof(buf)), strlen("2-3,64,1500"));
    KT_CHECK(strcmp(buf, "2-3,64") == 0); /* cut at an item, NUL-terminated */
    KT_CHECK_EQ(kiln_cpuset_format(&s, NULL, 0), 11);
    struct kiln_cpuset c = {0};
    KT_CHECK_OK(kiln_cpuset_copy(&c, &s));
    KT_CHECK(fx_set_is(&c, "2-3,64,1500"));
    kiln_cpuset_free(&c);
    kiln_cpuset_free(&s);
    kiln_cpuset_free(&s); /* freeing twice is safe: the set is empty after the first */
    kiln_cpuset_free(NULL);
    KT_CHECK_EQ(kiln_cpuset_count(&s), 0);
}

/* ---- committed fixtures --------------------------------------------------- */

KT_CASE(symmetric_two_dies)
{
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(read_and_choose(fx_committed("sym_2die"), 0, NULL, &t, &p));
    KT_CHECK_EQ(t->ndomains, 2);
    KT_CHECK_EQ(t->last_level, 3);
    KT_CHECK(fx_set_is(&t->domains[0].cpus, "0-1,4-5"));
    KT_CHECK(fx_set_is(&t->domains[1].cpus, "2-3,6-7"));
    KT_CHECK_EQ(t->largest, 0); /* a tie goes to the first in CPU order */
    KT_CHECK_EQ(p.verdict, KILN_PIN_SYMMETRIC);
    KT_CHECK_EQ(kiln_cpuset_count(&p.cpus), 0);
    KT_CHECK(strstr(p.reason, "32 MiB") && strstr(p.reason, "symmetric"));
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

KT_CASE(x3d_picks_96mb)
{
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(read_and_choose(fx_committed("x3d"), 0, NULL, &t, &p));
    KT_REQUIRE(t->ndomains == 2 && largest(t));
    const struct kiln_cpu_cache_domain *d = largest(t);
    KT_CHECK_EQ(d->level, 3);
    KT_CHECK_EQ(d->type, KILN_CPU_CACHE_UNIFIED);
    KT_CHECK_EQ(d->size, 96u << 20);
    KT_CHECK_EQ(d->id, 1);
    KT_CHECK(fx_set_is(&d->cpus, "2-3,6-7"));
    KT_CHECK_EQ(t->domains[0].size, 32u << 20);
    KT_CHECK_EQ(p.verdict, KILN_PIN_APPLY);
    KT_CHECK_EQ(p.domain, t->largest);
    KT_CHECK(fx_set_is(&p.cpus, "2-3,6-7"));
    KT_CHECK(strstr(p.reason, "96 MiB") && strstr(p.reason, "32 MiB"));
    /* A cache is read whole once, through its lowest CPU (online + 2 x (4
     * level/type pairs + size + list + id)); each of the 6 other CPUs reads
     * its own list of it. */
    KT_CHECK_EQ(t->files_read, 1 + 2 * (4 * 2 + 3) + 6);
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

KT_CASE(x3d_all_levels)
{
    struct kiln_topo *t = NULL;
    KT_REQUIRE_OK(kiln_topo_read(fx_committed("x3d"), KILN_TOPO_ALL_LEVELS, &t));
    KT_CHECK(t->all_levels);
    /* Per core (4): L1d, L1i, L2; per die (2): L3. */
    KT_REQUIRE(t->ndomains == 14);
    KT_CHECK_EQ(t->domains[0].level, 1);
    KT_CHECK_EQ(t->domains[0].type, KILN_CPU_CACHE_DATA);
    KT_CHECK(fx_set_is(&t->domains[0].cpus, "0,4"));
    KT_CHECK_EQ(t->domains[4].type, KILN_CPU_CACHE_INSTRUCTION);
    KT_CHECK_EQ(t->domains[8].level, 2);
    KT_CHECK_EQ(t->domains[8].size, 1024u << 10);
    KT_CHECK_EQ(t->last_level, 3);
    KT_REQUIRE(largest(t));
    KT_CHECK(fx_set_is(&largest(t)->cpus, "2-3,6-7"));
    KT_CHECK_EQ(t->largest, 13);
    kiln_topo_free(t);
}

KT_CASE(one_l3_is_noop)
{
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(read_and_choose(fx_committed("one_l3"), 0, NULL, &t, &p));
    KT_CHECK_EQ(t->ndomains, 1);
    KT_CHECK_EQ(p.verdict, KILN_PIN_ALREADY);
    KT_CHECK_EQ(p.domain, 0);
    KT_CHECK_EQ(kiln_cpuset_count(&p.cpus), 0);
    KT_CHECK(strstr(p.reason, "16 MiB") && strstr(p.reason, "0-3"));
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

KT_CASE(no_cache_is_empty_not_error)
{
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    fx_log_start();
    int rc = read_and_choose(fx_committed("no_cache"), 0, NULL, &t, &p);
    fx_log_stop();
    KT_REQUIRE_OK(rc);
    KT_CHECK_EQ(fx_log_count(KILN_LOG_ERROR), 0);
    KT_CHECK_EQ(t->ndomains, 0);
    KT_CHECK_EQ(t->largest, -1);
    KT_CHECK_EQ(t->last_level, 0);
    KT_CHECK(fx_set_is(&t->online, "0-3"));
    KT_CHECK(strstr(t->note, "no cache information") && strstr(t->note, "no_cache"));
    KT_CHECK_EQ(p.verdict, KILN_PIN_NO_CACHES);
    KT_CHECK(strstr(p.reason, "no cache information") != NULL);
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

KT_CASE(last_level_at_index2)
{
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(read_and_choose(fx_committed("l2_last"), 0, NULL, &t, &p));
    KT_CHECK_EQ(t->last_level, 2);
    KT_CHECK_EQ(t->ndomains, 2);
    KT_CHECK_EQ(p.verdict, KILN_PIN_APPLY);
    KT_CHECK(fx_set_is(&p.cpus, "2-3"));
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

KT_CASE(level_from_file_not_index)
{
    /* The L3 is index0 here: only the level file says so. */
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(read_and_choose(fx_committed("index_order"), 0, NULL, &t, &p));
    KT_CHECK_EQ(t->last_level, 3);
    KT_REQUIRE(largest(t));
    KT_CHECK_EQ(largest(t)->size, 16u << 20);
    KT_CHECK(fx_set_is(&p.cpus, "1"));
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

KT_CASE(missing_size_names_file)
{
    struct kiln_topo *t = (struct kiln_topo *)1;
    fx_log_start();
    int rc = kiln_topo_read(fx_committed("missing_size"), 0, &t);
    fx_log_stop();
    KT_CHECK_EQ(rc, KILN_ENOENT);
    KT_CHECK(t == NULL);
    KT_CHECK_EQ(fx_log_count(KILN_LOG_ERROR), 1);
    KT_CHECK(fx_log_has(KILN_LOG_ERROR, "missing_size/cpu0/cache/index1/size"));
}

KT_CASE(offline_cpus_left_out)
{
    /* CPU 2, the lowest of the 96 MB domain, is offline; cpu3 still lists it. */
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(read_and_choose(fx_committed("x3d_offline"), 0, NULL, &t, &p));
    KT_CHECK(fx_set_is(&t->online, "0-1,3-7"));
    KT_REQUIRE(largest(t));
    KT_CHECK(fx_set_is(&largest(t)->cpus, "3,6-7"));
    KT_CHECK_EQ(p.verdict, KILN_PIN_APPLY);
    KT_CHECK(fx_set_is(&p.cpus, "3,6-7"));
    kiln_pin_plan_free(&p);
    /* An affinity that names only the offline CPU has no candidate. */
    struct kiln_cpuset a = fx_set("2");
    KT_CHECK_OK(kiln_topo_choose(t, &a, &p));
    KT_CHECK_EQ(p.verdict, KILN_PIN_NO_CANDIDATE);
    kiln_cpuset_free(&a);
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

KT_CASE(allowed_set_limits_choice)
{
    static const struct {
        const char *allowed;
        enum kiln_pin_verdict verdict;
        const char *cpus;
    } cases[] = {
        {"0-2,4-6", KILN_PIN_APPLY, "2,6"}, /* part of the largest domain */
        {"0-5", KILN_PIN_APPLY, "2-3"},     /* another part */
        {"0-1,4-5", KILN_PIN_ALREADY, ""},  /* only the small die: one candidate */
        {"2-3,6-7", KILN_PIN_ALREADY, ""},  /* already the large die */
        {"3", KILN_PIN_ALREADY, ""},        /* a single CPU inside it */
        {"8-9", KILN_PIN_NO_CANDIDATE, ""}, /* CPUs the tree does not have */
        {"", KILN_PIN_NO_CANDIDATE, ""},
    };
    struct kiln_topo *t = NULL;
    KT_REQUIRE_OK(kiln_topo_read(fx_committed("x3d"), 0, &t));
    for (size_t i = 0; i < FX_LEN(cases); i++) {
        struct kiln_cpuset a = fx_set(cases[i].allowed);
        struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
        KT_CHECK_OK(kiln_topo_choose(t, &a, &p));
        if (p.verdict != cases[i].verdict)
            kt_fail(__FILE__, __LINE__, "allowed %s: verdict %s, expected %s (%s)",
                    cases[i].allowed, kiln_pin_verdict_name(p.verdict),
                    kiln_pin_verdict_name(cases[i].verdict), p.reason);
        KT_CHECK(fx_set_is(&p.cpus, cases[i].cpus));
        kiln_pin_plan_free(&p);
        kiln_cpuset_free(&a);
    }
    /* On the symmetric part, an affinity across both dies stays symmetric;
     * one inside a die is already confined. */
    kiln_topo_free(t);
    KT_REQUIRE_OK(kiln_topo_read(fx_committed("sym_2die"), 0, &t));
    struct kiln_cpuset a = fx_set("1-2");
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_CHECK_OK(kiln_topo_choose(t, &a, &p));
    KT_CHECK_EQ(p.verdict, KILN_PIN_SYMMETRIC);
    kiln_pin_plan_free(&p);
    kiln_cpuset_free(&a);
    kiln_topo_free(t);
}

/* ---- malformed trees --------------------------------------------------------- */

KT_CASE(malformed_input_names_file)
{
    static const struct {
        const char *file, *text; /* text NULL: remove the file; "/": make it a folder */
        int rc;
        const char *named; /* the path the error line must name */
    } cases[] = {
        {"cpu0/cache/index2/shared_cpu_list", "0-", KILN_EPARSE, NULL},
        {"cpu0/cache/index2/shared_cpu_list", "5-3", KILN_EPARSE, NULL},
        {"cpu2/cache/index2/shared_cpu_list", "a", KILN_EPARSE, NULL},
        {"cpu0/cache/index2/shared_cpu_list", "2-3", KILN_EPARSE, NULL}, /* not cpu0's own */
        {"cpu2/cache/index2/shared_cpu_list", "0-3", KILN_EPARSE,
         "cpu2/cache/index2"}, /* overlaps 0-1 */
        {"cpu0/cache/index2/size", "", KILN_EPARSE, NULL},
        {"cpu0/cache/index2/size", "12Q", KILN_EPARSE, NULL},
        {"cpu2/cache/index2/size", "K", KILN_EPARSE, NULL},
        {"cpu2/cache/index2/size", NULL, KILN_ENOENT, NULL},
        {"cpu2/cache/index2/size", "/", KILN_EFORMAT, NULL}, /* a folder: not a file */
        {"cpu2/cache/index0/level", "x", KILN_EPARSE, NULL},
        {"cpu2/cache/index1/level", "0", KILN_EPARSE, NULL},
        {"cpu0/cache/index1/type", "Weird", KILN_EPARSE, NULL},
        {"cpu0/cache/index2/id", "x", KILN_EPARSE, NULL},
        {"online", "0-", KILN_EPARSE, NULL},
        {"online", "", KILN_EPARSE, NULL},
        {"online", NULL, KILN_ENOENT, NULL},
    };
    for (size_t i = 0; i < FX_LEN(cases); i++) {
        const char *root = write_small();
        if (!cases[i].text)
            fx_remove(root, cases[i].file);
        else if (strcmp(cases[i].text, "/") == 0) {
            fx_remove(root, cases[i].file);
            fx_mkdir(root, cases[i].file);
        } else
            fx_write(root, cases[i].file, cases[i].text);
        struct kiln_topo *t = (struct kiln_topo *)1;
        fx_log_start();
        int rc = kiln_topo_read(root, KILN_TOPO_ALL_LEVELS, &t);
        fx_log_stop();
        if (rc != cases[i].rc)
            kt_fail(__FILE__, __LINE__, "%s='%s': got %s, expected %s", cases[i].file,
                    cases[i].text ? cases[i].text : "(removed)", kiln_errname(rc),
                    kiln_errname(cases[i].rc));
        KT_CHECK(t == NULL);
        KT_CHECK_EQ(fx_log_count(KILN_LOG_ERROR), 1);
        char named[4096];
        snprintf(named, sizeof(named), "%s/%s", root,
                 cases[i].named ? cases[i].named : cases[i].file);
        KT_CHECK(fx_log_has(KILN_LOG_ERROR, named));
    }
}

KT_CASE(shared_cpu_map_fallback)
{
    const char *root = write_small();
    fx_remove(root, "cpu2/cache/index2/shared_cpu_list");
    fx_write(root, "cpu2/cache/index2/shared_cpu_map", "0000000c");
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(read_and_choose(root, 0, NULL, &t, &p));
    KT_CHECK(fx_set_is(&p.cpus, "2-3"));
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);

    fx_write(root, "cpu2/cache/index2/shared_cpu_map", "zz");
    fx_log_start();
    KT_CHECK_EQ(kiln_topo_read(root, 0, &t), KILN_EPARSE);
    fx_log_stop();
    KT_CHECK(t == NULL);
    KT_CHECK(fx_log_has(KILN_LOG_ERROR, "cpu2/cache/index2/shared_cpu_map"));

    fx_remove(root, "cpu2/cache/index2/shared_cpu_map");
    fx_log_start();
    KT_CHECK_EQ(kiln_topo_read(root, 0, &t), KILN_ENOENT);
    fx_log_stop();
    KT_CHECK(fx_log_has(KILN_LOG_ERROR, "neither shared_cpu_list nor shared_cpu_map"));

    /* No id file is fine: the id is -1. */
    root = write_small();
    fx_remove(root, "cpu2/cache/index2/id");
    KT_REQUIRE_OK(kiln_topo_read(root, 0, &t));
    KT_REQUIRE(largest(t));
    KT_CHECK_EQ(largest(t)->id, -1);
    kiln_topo_free(t);
}

/*
 * Every online CPU's own entry is read, not only the lead's: a CPU that is
 * not the first of its domain and has a malformed or disagreeing file
 * refuses the whole read, in the last-level read and in the all-levels one.
 */
KT_CASE(every_cpu_checked)
{
    static const struct {
        const char *file, *text; /* text NULL: remove the file; "/": a folder; "|": a FIFO */
        int rc_last, rc_all;     /* what the default and the all-levels read return */
    } cases[] = {
        {"cpu1/cache/index2/shared_cpu_list", "a", KILN_EPARSE, KILN_EPARSE},
        {"cpu1/cache/index2/shared_cpu_list", "0-", KILN_EPARSE, KILN_EPARSE},
        {"cpu1/cache/index2/shared_cpu_list", "1", KILN_EPARSE, KILN_EPARSE},   /* disagrees */
        {"cpu1/cache/index2/shared_cpu_list", "0", KILN_EPARSE, KILN_EPARSE},   /* not its own */
        {"cpu3/cache/index2/shared_cpu_list", "0-3", KILN_EPARSE, KILN_EPARSE}, /* disagrees */
        {"cpu3/cache/index2/shared_cpu_list", "", KILN_EPARSE, KILN_EPARSE},
        {"cpu3/cache/index2/shared_cpu_list", NULL, KILN_ENOENT, KILN_ENOENT},
        {"cpu3/cache/index2/shared_cpu_list", "/", KILN_EFORMAT, KILN_EFORMAT},
        {"cpu3/cache/index2/shared_cpu_list", "|", KILN_EPARSE, KILN_EPARSE}, /* no hang */
        {"cpu1/cache/index0/shared_cpu_list", "0-1", KILN_OK, KILN_EPARSE},   /* an L1 not read */
        {"cpu1/cache/index2/size", "96M", KILN_OK, KILN_EPARSE},              /* size: all levels */
        {"cpu1/cache/index2/size", "x", KILN_OK, KILN_EPARSE},
        {"cpu3/cache/index2/shared_cpu_list", "2-3,9", KILN_OK, KILN_OK}, /* 9 is offline */
        {"cpu3/cache/index2/shared_cpu_list", "3,2", KILN_OK, KILN_OK},   /* same CPUs */
    };
    for (size_t i = 0; i < FX_LEN(cases); i++) {
        for (int all = 0; all < 2; all++) {
            const char *root = write_small();
            const char *text = cases[i].text;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", root, cases[i].file);
            if (!text) {
                fx_remove(root, cases[i].file);
            } else if (strcmp(text, "/") == 0 || strcmp(text, "|") == 0) {
                fx_remove(root, cases[i].file);
                if (text[0] == '/')
                    fx_mkdir(root, cases[i].file);
#ifndef _WIN32
                else
                    KT_REQUIRE(mkfifo(path, 0600) == 0);
#endif
            } else {
                fx_write(root, cases[i].file, text);
            }
            int want = all ? cases[i].rc_all : cases[i].rc_last;
            struct kiln_topo *t = NULL;
            fx_log_start();
            int rc = kiln_topo_read(root, all ? KILN_TOPO_ALL_LEVELS : 0, &t);
            fx_log_stop();
            if (rc != want)
                kt_fail(__FILE__, __LINE__, "%s='%s' (%s): got %s, expected %s", cases[i].file,
                        text ? text : "(removed)", all ? "all levels" : "last level",
                        kiln_errname(rc), kiln_errname(want));
            if (want == KILN_OK) {
                KT_CHECK(t != NULL && fx_log_count(KILN_LOG_ERROR) == 0);
                if (t && !all) {
                    KT_CHECK_EQ(t->ndomains, 2);
                    KT_CHECK(fx_set_is(&t->domains[1].cpus, "2-3"));
                }
            } else {
                /* An empty result and one line naming the CPU's own cache entry
                 * (its file, or its folder for a missing file or an overlap). */
                KT_CHECK(t == NULL);
                KT_CHECK_EQ(fx_log_count(KILN_LOG_ERROR), 1);
                *strrchr(path, '/') = '\0';
                KT_CHECK(fx_log_has(KILN_LOG_ERROR, path));
            }
            kiln_topo_free(t);
        }
    }
}

KT_CASE(missing_root)
{
    struct kiln_topo *t = (struct kiln_topo *)1;
    fx_log_start();
    int rc = kiln_topo_read("/nonexistent/kiln-topo", 0, &t);
    fx_log_stop();
    KT_CHECK_EQ(rc, KILN_ENOENT);
    KT_CHECK(t == NULL);
    KT_CHECK(fx_log_has(KILN_LOG_ERROR, "/nonexistent/kiln-topo"));
}

/* ---- big trees ---------------------------------------------------------------- */

/*
 * 256 CPUs: 128 cores, SMT siblings numbered apart (core k is CPUs k and
 * k+128), four L3 domains of 32 cores; the third one has 96 MB, the others
 * 32 MB. Every CPU has L1d, L1i, L2 and L3 entries.
 */
static void write_256(const char *root)
{
    fx_write(root, "online", "0-255");
    for (unsigned cpu = 0; cpu < 256; cpu++) {
        unsigned core = cpu % 128, die = core / 32;
        char sib[32], l3[64];
        snprintf(sib, sizeof(sib), "%u,%u", core, core + 128);
        snprintf(l3, sizeof(l3), "%u-%u,%u-%u", die * 32, die * 32 + 31, 128 + die * 32,
                 128 + die * 32 + 31);
        fx_cache(root, cpu, 0, 1, "Data", "48K", sib, (int)core);
        fx_cache(root, cpu, 1, 1, "Instruction", "32K", sib, (int)core);
        fx_cache(root, cpu, 2, 2, "Unified", "1024K", sib, (int)core);
        fx_cache(root, cpu, 3, 3, "Unified", die == 2 ? "98304K" : "32768K", l3, (int)die);
    }
}

static void check_256(const char *root)
{
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(read_and_choose(root, 0, NULL, &t, &p));
    KT_REQUIRE(t->ndomains == 4);
    KT_CHECK(fx_set_is(&t->domains[0].cpus, "0-31,128-159"));
    KT_CHECK(fx_set_is(&t->domains[3].cpus, "96-127,224-255"));
    KT_CHECK_EQ(t->largest, 2);
    KT_CHECK_EQ(p.verdict, KILN_PIN_APPLY);
    KT_CHECK(fx_set_is(&p.cpus, "64-95,192-223"));
    /* Four domains, each read whole through its lowest CPU; each of the 252
     * other CPUs reads its own list of its domain. */
    KT_CHECK_EQ(t->files_read, 1 + 4 * (4 * 2 + 3) + 252);
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);

    KT_REQUIRE_OK(kiln_topo_read(root, KILN_TOPO_ALL_LEVELS, &t));
    KT_CHECK_EQ(t->ndomains, 128 * 3 + 4);
    KT_CHECK_EQ(t->last_level, 3);
    KT_CHECK_EQ(t->largest, 128 * 3 + 2);
    kiln_topo_free(t);
}

KT_CASE(cpus_256_four_l3)
{
    const char *root = fx_fast_tmpdir();
    write_256(root);
    if (getenv("KT_KEEP"))
        fprintf(stderr, "256-CPU tree kept at %s\n", root);
    check_256(root);
    fx_fast_tmpdir_done(root);
}

KT_CASE(cpus_over_1024)
{
    /* CPU numbers past 1024 (the size of a plain cpu_set_t). */
    const char *root = kt_tmpdir();
    fx_write(root, "online", "0-1,1500-1501");
    fx_cache(root, 0, 0, 3, "Unified", "32M", "0-1", 0);
    fx_cache(root, 1, 0, 3, "Unified", "32M", "0-1", 0);
    fx_cache(root, 1500, 0, 3, "Unified", "64M", "1500-1501", 1);
    fx_cache(root, 1501, 0, 3, "Unified", "64M", "1500-1501", 1);
    struct kiln_topo *t = NULL;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_REQUIRE_OK(read_and_choose(root, 0, NULL, &t, &p));
    KT_CHECK_EQ(p.verdict, KILN_PIN_APPLY);
    KT_CHECK(fx_set_is(&p.cpus, "1500-1501"));
    KT_CHECK(p.cpus.nwords > 1024 / 64);
    kiln_pin_plan_free(&p);
    kiln_topo_free(t);
}

/* ---- the cgroup limit ------------------------------------------------------- */

KT_CASE(cgroup_limit)
{
    const char *tmp = kt_tmpdir();
    char proc[4096], cg[4096], line[8192];
    snprintf(proc, sizeof(proc), "%s/proc", tmp);
    snprintf(cg, sizeof(cg), "%s/cg", tmp);
    fx_write(proc, "self/cgroup", "12:cpuset:/\n0::/kiln.slice/app.scope");
    snprintf(line, sizeof(line),
             "22 1 0:20 / /proc rw - proc proc rw\n"
             "41 31 0:38 / %s rw,relatime - cgroup2 cgroup2 rw",
             cg);
    fx_write(proc, "self/mountinfo", line);
    /* The leaf has no cpuset file (no controller there): its parent's counts. */
    fx_mkdir(cg, "kiln.slice/app.scope");
    fx_write(cg, "kiln.slice/cpuset.cpus.effective", "2-3,6");
    fx_write(cg, "cpuset.cpus.effective", "0-7");

    struct kiln_cpuset aff = fx_set("0-7");
    struct kiln_topo_env env = {.size = sizeof(env), .proc_root = proc, .affinity = &aff};
    struct kiln_cpuset allowed = {0};
    KT_CHECK_OK(kiln_topo_allowed(&env, &allowed));
    KT_CHECK(fx_set_is(&allowed, "2-3,6"));
    kiln_cpuset_free(&allowed);

    /* The chosen domain shrinks to what the cgroup gives. */
    struct kiln_topo *t = NULL;
    KT_REQUIRE_OK(kiln_topo_read(fx_committed("x3d"), 0, &t));
    fx_write(cg, "kiln.slice/cpuset.cpus.effective", "0-2,4-6");
    KT_CHECK_OK(kiln_topo_allowed(&env, &allowed));
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    KT_CHECK_OK(kiln_topo_choose(t, &allowed, &p));
    KT_CHECK(fx_set_is(&p.cpus, "2,6"));
    kiln_pin_plan_free(&p);
    kiln_cpuset_free(&allowed);
    kiln_topo_free(t);

    /* An explicit cgroup root wins over mountinfo. */
    char other[4096];
    snprintf(other, sizeof(other), "%s/other", tmp);
    fx_write(other, "kiln.slice/app.scope/cpuset.cpus.effective", "5");
    env.cgroup_root = other;
    KT_CHECK_OK(kiln_topo_allowed(&env, &allowed));
    KT_CHECK(fx_set_is(&allowed, "5"));
    kiln_cpuset_free(&allowed);

    /* A malformed cpuset file is an error naming it. */
    fx_write(other, "kiln.slice/app.scope/cpuset.cpus.effective", "5-");
    fx_log_start();
    KT_CHECK_EQ(kiln_topo_allowed(&env, &allowed), KILN_EPARSE);
    fx_log_stop();
    KT_CHECK(allowed.words == NULL);
    KT_CHECK(fx_log_has(KILN_LOG_ERROR, "app.scope/cpuset.cpus.effective"));

    /* No cgroup v2 line: no limit. */
    fx_write(proc, "self/cgroup", "12:cpuset:/");
    KT_CHECK_OK(kiln_topo_allowed(&env, &allowed));
    KT_CHECK(fx_set_is(&allowed, "0-7"));
    kiln_cpuset_free(&allowed);
    kiln_cpuset_free(&aff);
}

/* ---- the opt-in rule ------------------------------------------------------------ */

KT_CASE(flag_env_rule)
{
    /* Every flag (-1 none, 0 --no-cache-affinity, 1 --cache-affinity) against
     * every kind of variable value. */
    static const char *const envs[] = {NULL, "", "0", "1", "yes", "2", " 1", "true"};
    for (int flag = -1; flag <= 1; flag++) {
        for (size_t e = 0; e < FX_LEN(envs); e++) {
            const char *env = envs[e];
            bool set = env && *env;
            bool valid = set && (strcmp(env, "0") == 0 || strcmp(env, "1") == 0);
            bool want_on;
            int want_rc = 0;
            enum kiln_affinity_source want_src;
            if (flag >= 0) {
                want_on = flag == 1;
                want_src = KILN_AFFINITY_FLAG;
            } else if (set && !valid) {
                want_on = false;
                want_rc = KILN_EINVAL;
                want_src = KILN_AFFINITY_ENV;
            } else if (valid) {
                want_on = strcmp(env, "1") == 0;
                want_src = KILN_AFFINITY_ENV;
            } else {
                want_on = false;
                want_src = KILN_AFFINITY_DEFAULT;
            }
            struct kiln_affinity_decision d = KILN_AFFINITY_DECISION_INIT;
            int rc = kiln_affinity_decide(flag, env, &d);
            if (rc != want_rc || d.on != want_on || d.source != want_src ||
                d.env_malformed != (set && !valid) || d.reason[0] == '\0')
                kt_fail(__FILE__, __LINE__,
                        "flag %d env %s: rc %d on %d source %d malformed %d (%s)", flag,
                        env ? env : "(unset)", rc, d.on, (int)d.source, d.env_malformed, d.reason);
            if (set && !valid)
                KT_CHECK(strstr(d.reason, KILN_CPU_CACHE_AFFINITY_ENV) && strstr(d.reason, env));
            if (flag >= 0)
                KT_CHECK(strstr(d.reason, flag ? "--cache-affinity" : "--no-cache-affinity"));
        }
    }
    struct kiln_affinity_decision d = KILN_AFFINITY_DECISION_INIT;
    KT_CHECK_EQ(kiln_affinity_decide(2, NULL, &d), KILN_EINVAL);
    KT_CHECK(!d.on);
    /* The flag's win over the variable is said. */
    KT_CHECK_OK(kiln_affinity_decide(0, "1", &d));
    KT_CHECK(strstr(d.reason, "wins over KILN_CACHE_AFFINITY=1") != NULL);
}

KT_CASE(apply_logs_decision)
{
    struct kiln_affinity_decision d = KILN_AFFINITY_DECISION_INIT;
    struct kiln_pin_plan p = KILN_PIN_PLAN_INIT;
    /* Off: nothing is read (the tree does not even exist). */
    KT_CHECK_OK(kiln_affinity_decide(-1, NULL, &d));
    struct kiln_topo_env env = {.size = sizeof(env), .sysfs_root = "/nonexistent/kiln-topo"};
    fx_log_start();
    KT_CHECK_OK(kiln_affinity_apply(&d, &env, &p));
    fx_log_stop();
    KT_CHECK_EQ(p.verdict, KILN_PIN_OFF);
    KT_CHECK(fx_log_has(KILN_LOG_INFO, "topo: cache affinity off: off by default"));
    kiln_pin_plan_free(&p);

    /* On, on a tree with one L3 over the allowed CPUs: nothing to change. */
    KT_CHECK_OK(kiln_affinity_decide(1, "0", &d));
    struct kiln_cpuset aff = fx_set("0-3");
    env = (struct kiln_topo_env){.size = sizeof(struct kiln_topo_env),
                                 .sysfs_root = fx_committed("one_l3"),
                                 .affinity = &aff};
    fx_log_start();
    KT_CHECK_OK(kiln_affinity_apply(&d, &env, &p));
    fx_log_stop();
    KT_CHECK_EQ(p.verdict, KILN_PIN_ALREADY);
    KT_CHECK(fx_log_has(KILN_LOG_INFO, "cache affinity on: --cache-affinity given"));
    KT_CHECK(fx_log_has(KILN_LOG_INFO, "cache affinity: already"));
    kiln_pin_plan_free(&p);

    /* On, with a broken tree: the failure is returned and nothing pinned. */
    env.sysfs_root = "/nonexistent/kiln-topo";
    fx_log_start();
    KT_CHECK_EQ(kiln_affinity_apply(&d, &env, &p), KILN_ENOENT);
    fx_log_stop();
    KT_CHECK_EQ(p.verdict, KILN_PIN_FAILED);
    KT_CHECK(strstr(p.reason, "reading the cache topology") != NULL);
    kiln_pin_plan_free(&p);
    kiln_cpuset_free(&aff);
}

KT_MAIN(KT_ENTRY(list_parse), KT_ENTRY(mask_parse), KT_ENTRY(size_parse), KT_ENTRY(cpuset_ops),
        KT_ENTRY(symmetric_two_dies), KT_ENTRY(x3d_picks_96mb), KT_ENTRY(x3d_all_levels),
        KT_ENTRY(one_l3_is_noop), KT_ENTRY(no_cache_is_empty_not_error),
        KT_ENTRY(last_level_at_index2), KT_ENTRY(level_from_file_not_index),
        KT_ENTRY(missing_size_names_file), KT_ENTRY(offline_cpus_left_out),
        KT_ENTRY(allowed_set_limits_choice), KT_ENTRY(malformed_input_names_file),
        KT_ENTRY(shared_cpu_map_fallback), KT_ENTRY(every_cpu_checked), KT_ENTRY(missing_root),
        KT_ENTRY(cpus_256_four_l3), KT_ENTRY(cpus_over_1024), KT_ENTRY(cgroup_limit),
        KT_ENTRY(flag_env_rule), KT_ENTRY(apply_logs_decision))
