/*
 * test_topo_hwloc.c - kiln's last-level domains against hwloc's, on this
 * machine. hwloc reads the same sysfs by its own code, so the two must name
 * the same CPU sets and sizes, and the same largest one.
 *
 * It uses the hwloc command-line tools (package `hwloc`), whose output is
 * stable across versions: `hwloc-calc --whole-system -N lNcache all`,
 * `hwloc-calc --whole-system -I pu --physical-output lNcache:i` and
 * `lstopo-no-graphics --whole-system --only lNcache -v`. It exits 77
 * (skipped) without the tools or where sysfs has no caches.
 */
#include "topo_fixture.h"

#define SKIP 77

/* Runs a command; @return its first `cap` bytes of output, or NULL when it failed. */
static char *run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    return pclose(p) == 0 ? out : NULL;
}

KT_CASE(matches_hwloc)
{
    char buf[65536], cmd[512];
    if (!run("command -v hwloc-calc >/dev/null && command -v lstopo-no-graphics", buf,
             sizeof(buf))) {
        fprintf(stderr, "skip: hwloc-calc / lstopo-no-graphics not installed (package hwloc)\n");
        exit(SKIP);
    }
    struct kiln_topo *t = NULL;
    KT_REQUIRE_OK(kiln_topo_read(NULL, 0, &t));
    if (t->ndomains == 0 || t->last_level == 0) {
        fprintf(stderr, "skip: sysfs has no cache information here: %s\n", t->note);
        kiln_topo_free(t);
        exit(SKIP);
    }
    unsigned level = t->last_level;
    snprintf(cmd, sizeof(cmd), "hwloc-calc --whole-system -N l%ucache all", level);
    KT_REQUIRE(run(cmd, buf, sizeof(buf)));
    long count = strtol(buf, NULL, 10);
    KT_CHECK_EQ(count, (long)t->ndomains);

    /* Sizes in hwloc's logical order, from lstopo's verbose lines. */
    snprintf(cmd, sizeof(cmd), "lstopo-no-graphics --whole-system --only l%ucache -v", level);
    char sizes_text[65536];
    KT_REQUIRE(run(cmd, sizes_text, sizeof(sizes_text)));
    long hw_largest = -1;
    uint64_t hw_largest_size = 0;
    const char *cursor = sizes_text;
    for (long i = 0; i < count; i++) {
        snprintf(cmd, sizeof(cmd), "hwloc-calc --whole-system -I pu --physical-output l%ucache:%ld",
                 level, i);
        KT_REQUIRE(run(cmd, buf, sizeof(buf)));
        struct kiln_cpuset hw = fx_set(buf);
        const char *sz = strstr(cursor, "size=");
        KT_REQUIRE(sz);
        uint64_t kb = strtoull(sz + 5, NULL, 10);
        cursor = sz + 5;
        /* The kiln domain with the same CPUs has the same size. */
        bool found = false;
        for (size_t d = 0; d < t->ndomains; d++) {
            if (!kiln_cpuset_count(&hw) ||
                kiln_cpuset_next(&t->domains[d].cpus, 0) != kiln_cpuset_next(&hw, 0))
                continue;
            char a[4096], b[4096];
            kiln_cpuset_format(&t->domains[d].cpus, a, sizeof(a));
            kiln_cpuset_format(&hw, b, sizeof(b));
            KT_CHECK(strcmp(a, b) == 0);
            KT_CHECK_EQ(t->domains[d].size, kb * 1024);
            found = true;
        }
        if (!found)
            kt_fail(__FILE__, __LINE__, "hwloc's L%u #%ld (CPUs %s) is not one of kiln's", level, i,
                    buf);
        if (hw_largest < 0 || kb * 1024 > hw_largest_size) {
            hw_largest = i;
            hw_largest_size = kb * 1024;
        }
        kiln_cpuset_free(&hw);
    }
    KT_REQUIRE(t->largest >= 0);
    KT_CHECK_EQ(t->domains[t->largest].size, hw_largest_size);
    fprintf(stderr, "kiln and hwloc agree on %ld L%u domain(s); largest %llu bytes\n", count, level,
            (unsigned long long)hw_largest_size);
    kiln_topo_free(t);
}

KT_MAIN(KT_ENTRY(matches_hwloc))
