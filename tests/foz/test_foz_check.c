/*
 * test_foz_check.c - the recorded-state check (kiln_foz_closure_check,
 * src/foz/foz_check.c) without a device: each seed of
 * fuzz/corpus/foz_check/ refused with the rule it breaks, or passed; every
 * pipeline of the shared corpus and of the tests' own archives passed;
 * the limits tables.
 */
#include "kiln_test.h"
#include "foz_corpus.h"
#include "foz_writer.h"
#include "kiln/foz.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Each seed and what its refusal names (NULL: it passes); `strict`: what
 * the refusal names under the specification's minimum limits, when that
 * differs. */
static const struct {
    const char *file;
    const char *rule;
    const char *strict;
} seeds[] = {
    {"good-triangle.json", NULL, NULL},
    {"good-compute.json", NULL, NULL},
    {"stage-7fffffff.json", "stage 0 has stage 0x7fffffff, not one graphics pipeline stage", NULL},
    {"null-layout.json", "a null pipeline layout", NULL},
    {"blend-100.json",
     "100 colour-blend attachments, more than any device's maxColorAttachments "
     "(kiln's bound: 32)",
     "100 colour-blend attachments, more than the device's maxColorAttachments 4"},
    {"attributes-300.json",
     "300 vertex attributes, more than any device's "
     "maxVertexInputAttributes (kiln's bound: 256)",
     "300 vertex attributes, more than the device's maxVertexInputAttributes 16"},
    {"no-rasterization.json", "no rasterization state", NULL},
    {"static-viewport-missing.json", "a static viewport count of 1 with 0 viewports", NULL},
    {"set-layouts-1000.json",
     "1000 descriptor set layouts, more than any device's "
     "maxBoundDescriptorSets (kiln's bound: 64)",
     "1000 descriptor set layouts, more than the device's maxBoundDescriptorSets 4"},
    {"no-subpass.json", "has no subpass", NULL},
    {"subpass-index.json", "subpass 3 of a render pass of 1", NULL},
    {"spec-past-data.json",
     "stage 0: specialization constant 0 (offset 2, size 4) lies past its 4 "
     "bytes of data",
     NULL},
    {"empty-entry.json", "stage 1 has an empty entry point name", NULL},
    {"topology-99.json", "input assembly topology 99 is not a VkPrimitiveTopology", NULL},
    {"format-bad.json", "a vertex attribute format 5000 is not a VkFormat", NULL},
    {"attribute-unbound.json", "reads binding 7, which is not described", NULL},
    {"location-twice.json", "vertex attribute location 0 appears twice", NULL},
    {"viewport-count-0.json", "viewportCount 0 and scissorCount 0 do not suit", NULL},
    {"no-multisample.json", "no multisample state", NULL},
    {"dynamic-twice.json", "dynamic state 0 is named twice", NULL},
    {"attachment-ref.json", "colour attachment 0 names attachment 9 of 2", NULL},
    {"push-constants-big.json",
     "70000 bytes of push constants, more than any device's "
     "maxPushConstantsSize",
     "70000 bytes of push constants, more than the device's maxPushConstantsSize 128"},
    {"compute-stage-vertex.json", "stage 0 has stage 0x1, not one compute pipeline stage", NULL},
    {"compute-null-layout.json", "a null pipeline layout", NULL},
    {"binding-twice.json", "binding 0 appears twice", NULL},
    {"immutable-null.json", "immutable sampler 0 is a null handle", NULL},
    {"push-constants-overlap.json", "two push constant ranges share a stage", NULL},
};

/* A seed's bytes; a file that cannot be read ends the case. */
static void *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    long len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        len = ftell(f);
    void *p = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (!p || fseek(f, 0, SEEK_SET) != 0 || fread(p, 1, (size_t)len, f) != (size_t)len) {
        printf("cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* @return whether `why` holds `rule` (and says so when not). */
static bool names(const char *file, const char *why, const char *rule)
{
    if (strstr(why, rule))
        return true;
    printf("%s: refused with \"%s\", expected \"%s\"\n", file, why, rule);
    return false;
}

/* Every seed: passed or refused as the table says, under kiln's bounds and
 * under the specification's minimums. */
KT_CASE(seeds_refused)
{
    struct kiln_foz_limits bound, min;
    kiln_foz_limits_bound(&bound);
    kiln_foz_limits_minimum(&min);
    for (size_t i = 0; i < N_OF(seeds); i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/fuzz/corpus/foz_check/%s", KILN_SOURCE_DIR, seeds[i].file);
        size_t n;
        void *bytes = read_all(path, &n);
        char why[256];
        int rc = kiln_foz_closure_check(bytes, n, &bound, why, sizeof(why));
        KT_CHECK_EQ(rc, seeds[i].rule ? KILN_EFORMAT : KILN_OK);
        if (seeds[i].rule)
            KT_CHECK(names(seeds[i].file, why, seeds[i].rule));
        else
            KT_CHECK_EQ(why[0], '\0');
        rc = kiln_foz_closure_check(bytes, n, &min, why, sizeof(why));
        KT_CHECK_EQ(rc, seeds[i].rule ? KILN_EFORMAT : KILN_OK);
        if (seeds[i].rule)
            KT_CHECK(names(seeds[i].file, why, seeds[i].strict ? seeds[i].strict : seeds[i].rule));
        free(bytes);
    }
    printf("%zu seeds checked\n", N_OF(seeds));
}

/* How many pipelines were checked, and how many of them passed. */
struct tally {
    size_t total, passed;
};

/* Checks every pipeline of the archive at `path`, counted in *t. */
static void check_archive(const char *path, const struct kiln_foz_limits *lim, struct tally *t)
{
    struct kiln_foz *foz;
    KT_CHECK_OK(kiln_foz_open(NULL, path, &foz));
    struct kiln_foz_index *idx;
    KT_CHECK_OK(kiln_foz_index_create(foz, &idx));
    kiln_foz_close(foz);
    const struct kiln_foz_pipeline_ref *p;
    size_t n = kiln_foz_index_pipelines(idx, &p), ok = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t *bytes;
        size_t len;
        if (kiln_foz_closure_make(idx, p[i].tag, p[i].hash, &bytes, &len) != 0) {
            ok++; /* unreadable, not this check's to judge */
            continue;
        }
        char why[256];
        if (kiln_foz_closure_check(bytes, len, lim, why, sizeof(why)) == 0)
            ok++;
        else
            printf("%s: pipeline %016" PRIx64 " refused: %s\n", path, p[i].hash, why);
        kiln_foz_closure_free(bytes);
    }
    kiln_foz_index_destroy(idx);
    t->total += n;
    t->passed += ok;
}

/* What applications recorded passes: every pipeline of the shared corpus
 * (skipped without it) and of the tests' own archives (with shaderc). */
KT_CASE(recorded_pass)
{
    struct kiln_foz_limits bound;
    kiln_foz_limits_bound(&bound);
    struct archives a;
    corpus_archives(&a);
    struct tally t = {0, 0};
    for (size_t i = 0; i < a.n; i++)
        check_archive(a.path[i], &bound, &t);
    free_archives(&a);
    const char *dir = kt_tmpdir();
    char path[4200];
    snprintf(path, sizeof(path), "%s/pipelines.foz", dir);
    if (fw_write_pipelines(path, 2, 3, 0x100) == 0) {
        check_archive(path, &bound, &t);
        KT_CHECK_OK(fw_write_state_extensions(path, 0x200));
        check_archive(path, &bound, &t);
        KT_CHECK_OK(fw_write_gpl(path, 0x300, false));
        check_archive(path, &bound, &t);
        KT_CHECK_OK(fw_write_raytracing(path, 0x400));
        check_archive(path, &bound, &t);
    }
    KT_CHECK_EQ(t.passed, t.total);
    printf("%zu recorded pipelines checked, all passed\n", t.total);
}

/* The limits: kiln's bounds are at least the specification's minimums,
 * and a device's are read from VkPhysicalDeviceLimits by name. */
KT_CASE(limits)
{
    struct kiln_foz_limits bound, min;
    kiln_foz_limits_bound(&bound);
    kiln_foz_limits_minimum(&min);
    KT_CHECK(!bound.device);
    KT_CHECK(min.device);
    for (int i = 0; i < KILN_FOZ_LIMIT_COUNT; i++) {
        KT_CHECK(bound.value[i] >= min.value[i]);
        KT_CHECK(strncmp(kiln_foz_limit_name((enum kiln_foz_limit)i), "max", 3) == 0);
    }
    KT_CHECK_EQ(
        strcmp(kiln_foz_limit_name(KILN_FOZ_LIMIT_COLOR_ATTACHMENTS), "maxColorAttachments"), 0);
    KT_CHECK_EQ(strcmp(kiln_foz_limit_name(KILN_FOZ_LIMIT_COUNT), "unknown"), 0);
    /* Not a closure. */
    char why[64];
    KT_CHECK_EQ(kiln_foz_closure_check("{}", 2, NULL, why, sizeof(why)), KILN_EFORMAT);
    KT_CHECK(why[0] != '\0');
}

KT_MAIN(KT_ENTRY(seeds_refused), KT_ENTRY(recorded_pass), KT_ENTRY(limits))
