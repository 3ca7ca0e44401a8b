/*
 * foz_client.c - a C client of the installed kiln that uses Fossilize
 * in-process through <kiln.h> alone (package.foz_client): it imports an
 * archive into a cache, exports the cache back, replays the archive on
 * kiln's device and warm-starts the cache with no builder given, which
 * builds what the import stored (the core's Fossilize builder is the
 * default of KILN_STATE_FOZ). Without a Vulkan device the replay and the
 * warm start say so and the rest still runs.
 *
 * usage: foz_client ARCHIVE FOLDER
 */
#include <kiln.h>

#include <stdio.h>
#include <string.h>

static int fail(const char *what, int rc)
{
    fprintf(stderr, "foz_client: %s: %s\n", what, rc < 0 ? kiln_strerror(rc) : "wrong result");
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return fail("usage: foz_client ARCHIVE FOLDER", 0);
    const char *paths[] = {argv[1]};
    char cache_dir[4096], back[4200];
    snprintf(cache_dir, sizeof(cache_dir), "%s/cache", argv[2]);
    snprintf(back, sizeof(back), "%s/back.foz", argv[2]);

    /* Import. */
    struct kiln_foz_pipelines *fp = NULL;
    int rc = kiln_foz_pipelines_open(paths, 1, &fp);
    if (rc < 0)
        return fail("kiln_foz_pipelines_open", rc);
    size_t n = kiln_foz_pipelines_count(fp);
    struct kiln_cache_options co = {
        .size = sizeof(co), .stamp = KILN_FOZ_STAMP, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c = NULL;
    if ((rc = kiln_cache_open(cache_dir, &co, &c)) < 0)
        return fail("kiln_cache_open", rc);
    struct kiln_foz_pipelines_report rep;
    rc = kiln_foz_pipelines_import(c, fp, &rep);
    kiln_foz_pipelines_destroy(fp);
    if (rc < 0 || n == 0 || kiln_cache_count(c) != n)
        return fail("kiln_foz_pipelines_import", rc);

    /* Export. */
    struct kiln_foz_export_report er = KILN_FOZ_EXPORT_REPORT_INIT;
    if ((rc = kiln_foz_export(c, back, &er)) < 0 || er.foz != n)
        return fail("kiln_foz_export", rc);
    kiln_cache_close(c);
    printf("foz_client: %zu pipeline(s) imported, %llu exported\n", n,
           (unsigned long long)er.pipelines);

    /* Replay, on a context kiln makes. */
    struct kiln_vk *vk = NULL;
    if (kiln_vk_create(NULL, &vk) < 0) {
        printf("foz_client: no Vulkan device: replay and warm start not run\n");
        return 0;
    }
    kiln_vk_destroy(vk);
    struct kiln_foz_replay_options ro = KILN_FOZ_REPLAY_OPTIONS_INIT;
    ro.paths = paths;
    ro.npaths = 1;
    struct kiln_foz_replay_report rr = KILN_FOZ_REPLAY_REPORT_INIT;
    rc = kiln_foz_replay(&ro, &rr);
    uint64_t built = 0;
    for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++)
        built += rr.built[k];
    if (rc < 0 || rr.pipelines != n || built != n)
        return fail("kiln_foz_replay", rc);

    /* The warm start, no builder given. */
    struct kiln_start_options so = {
        .size = sizeof(so), .cache_dir = cache_dir, .stamp = KILN_FOZ_STAMP};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    rc = kiln_warm_start(&so, NULL, NULL, &ss);
    if (rc < 0 || ss.kinds[KILN_STATE_FOZ].built != n || ss.pipelines_skipped != 0)
        return fail("kiln_warm_start", rc);
    printf("foz_client: replayed %llu, warm start built %llu\n", (unsigned long long)built,
           (unsigned long long)ss.kinds[KILN_STATE_FOZ].built);
    return 0;
}
