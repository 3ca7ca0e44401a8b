/*
 * test_vk_threads.c - pipelines built from four threads at once on one
 * context: every one is made, no module outlives its create call, the
 * shared pipeline cache takes concurrent inserts, and a broken program in
 * the mix fails alone. Runs under TSan (label `threads`).
 */
#include "vk_shaders.h"

#include <pthread.h>

enum { THREADS = 4, PER_THREAD = 4 };

struct worker {
    struct kiln_vk *vk;
    unsigned id;
    struct vkt_blob comp[PER_THREAD], vert[PER_THREAD], frag[PER_THREAD];
    struct kiln_vk_pipeline *made[PER_THREAD];
    int rc[PER_THREAD];
};

static void *build(void *arg)
{
    struct worker *w = arg;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        char name[32];
        snprintf(name, sizeof(name), "t%u-p%u", w->id, i);
        if (i % 2 == 0) {
            struct kiln_vk_stage st = {
                .size = sizeof(st), .blob = w->comp[i].blob, .blob_size = w->comp[i].size};
            w->rc[i] = kiln_vk_compute_pipeline(w->vk, name, &st, &w->made[i]);
        } else {
            struct kiln_vk_graphics g = {
                .size = sizeof(g),
                .vertex = &(struct kiln_vk_stage){.size = sizeof(struct kiln_vk_stage),
                                                  .blob = w->vert[i].blob,
                                                  .blob_size = w->vert[i].size},
                .fragment = &(struct kiln_vk_stage){.size = sizeof(struct kiln_vk_stage),
                                                    .blob = w->frag[i].blob,
                                                    .blob_size = w->frag[i].size},
            };
            w->rc[i] = kiln_vk_graphics_pipeline(w->vk, name, &g, &w->made[i]);
        }
    }
    return NULL;
}

KT_CASE(concurrent_builds)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", kt_tmpdir());
    struct kiln_vk_options opt = {.size = sizeof(opt), .cache_dir = dir};
    struct kiln_vk *vk = vkt_context(&opt);
    KT_REQUIRE(vk);

    static struct worker ws[THREADS];
    for (unsigned t = 0; t < THREADS; t++) {
        ws[t].vk = vk;
        ws[t].id = t;
        for (unsigned i = 0; i < PER_THREAD; i++) {
            unsigned variant = 100 + t * PER_THREAD + i;
            KT_REQUIRE(vkt_make(VKT_COMPUTE, variant, &ws[t].comp[i]) == 0);
            KT_REQUIRE(vkt_make(VKT_VERTEX, variant, &ws[t].vert[i]) == 0);
            KT_REQUIRE(vkt_make(VKT_FRAGMENT, variant, &ws[t].frag[i]) == 0);
        }
    }
    /* Thread 0's third program is cut short: it alone must fail. */
    ws[0].comp[2].size /= 2;

    pthread_t th[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        KT_REQUIRE(pthread_create(&th[t], NULL, build, &ws[t]) == 0);
    /* Save while the others build: vkGetPipelineCacheData runs concurrently. */
    KT_CHECK_OK(kiln_vk_cache_save(vk));
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);

    unsigned ok = 0, failed = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        for (unsigned i = 0; i < PER_THREAD; i++) {
            bool broken = t == 0 && i == 2;
            if (broken) {
                KT_CHECK(ws[t].rc[i] < 0);
                KT_CHECK(ws[t].made[i] == NULL);
                failed++;
            } else {
                KT_CHECK_OK(ws[t].rc[i]);
                KT_CHECK(ws[t].made[i] != NULL);
                ok++;
            }
        }
    }
    struct kiln_vk_stats s = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.pipelines_built, ok);
    KT_CHECK_EQ(s.pipelines_failed, failed);
    KT_CHECK_EQ(s.live_pipelines, ok);
    KT_CHECK_EQ(s.live_modules, 0);
    KT_CHECK(s.peak_modules <= 2 * THREADS); /* at most one pipeline's stages per thread */
    KT_CHECK_OK(kiln_vk_cache_save(vk));

    for (unsigned t = 0; t < THREADS; t++) {
        for (unsigned i = 0; i < PER_THREAD; i++) {
            kiln_vk_pipeline_destroy(vk, ws[t].made[i]);
            vkt_free(&ws[t].comp[i]);
            vkt_free(&ws[t].vert[i]);
            vkt_free(&ws[t].frag[i]);
        }
    }
    kiln_vk_get_stats(vk, &s);
    KT_CHECK_EQ(s.live_pipelines, 0);
    kiln_vk_destroy(vk);
    /* The pack module's per-thread scratch of this (main) thread. */
    kiln_pack_thread_cleanup();
}

KT_MAIN(KT_ENTRY(concurrent_builds))
