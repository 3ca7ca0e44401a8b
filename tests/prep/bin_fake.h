/*
 * bin_fake.h - a fake provider of driver binaries for the host tier's
 * tests (struct kiln__bin_provider, kiln_internal.h): its global key is
 * whatever the test sets, a capture hands out two binaries derived from the
 * program's key and that key, and create_from checks that it got exactly
 * those back (counting calls and mismatches; bind, for a builder's
 * pipeline, checks the same and hands nothing to chain), so a test sees what reached
 * "the driver" without a device that has VK_KHR_pipeline_binary.
 */
#ifndef KILN_TESTS_BIN_FAKE_H
#define KILN_TESTS_BIN_FAKE_H

#include "binaries.h"
#include "kiln_test.h"

#include <stdatomic.h>
#include <string.h>

struct bin_fake {
    uint8_t global; /* the global key's byte: change it for a driver update */
    uint32_t device_id;
    _Atomic unsigned captures, creates, mismatches;
    _Atomic unsigned binds; /* of those creates, for a builder's pipeline */
    struct kiln__bin_provider p;
};

#define BIN_FAKE_DATA 48u

static void bin_fake_data(const struct kiln_key *key, uint8_t global, uint32_t which, uint8_t *out)
{
    for (uint32_t i = 0; i < BIN_FAKE_DATA; i++)
        out[i] =
            (uint8_t)((key->lo >> (i % 8 * 8)) ^ (key->hi >> (i % 7 * 8)) ^ global ^ which ^ i);
}

static int bin_fake_global(void *user, struct kiln__bin_global *out)
{
    struct bin_fake *f = user;
    out->vendor_id = 0x10005;
    out->device_id = f->device_id;
    out->key_size = 20;
    memset(out->key, f->global, out->key_size);
    return KILN_OK;
}

static int bin_fake_capture(void *user, const struct kiln_key *key, uint64_t pipeline,
                            kiln__bin_add_fn add, void *ctx)
{
    struct bin_fake *f = user;
    (void)pipeline;
    atomic_fetch_add(&f->captures, 1);
    for (uint32_t w = 0; w < 2; w++) {
        uint8_t k[16 + 1], data[BIN_FAKE_DATA];
        memcpy(k, &key->lo, 8);
        memcpy(k + 8, &key->hi, 8);
        k[16] = (uint8_t)w;
        bin_fake_data(key, f->global, w, data);
        struct kiln__bin_entry e = {
            .key = k, .key_size = sizeof(k), .data = data, .data_size = sizeof(data)};
        int rc = add(ctx, &e);
        if (rc < 0)
            return rc;
    }
    return KILN_OK;
}

static int bin_fake_create(void *user, const struct kiln_key *key, bool compute,
                           const struct kiln__bin_entry *bins, uint32_t n,
                           struct kiln_vk_pipeline **out)
{
    struct bin_fake *f = user;
    (void)compute;
    atomic_fetch_add(&f->creates, 1);
    bool ok = n == 2;
    for (uint32_t w = 0; ok && w < n; w++) {
        uint8_t data[BIN_FAKE_DATA];
        bin_fake_data(key, f->global, w, data);
        ok = bins[w].key_size == 17 && bins[w].key[16] == w &&
             memcmp(bins[w].key, &key->lo, 8) == 0 && bins[w].data_size == BIN_FAKE_DATA &&
             memcmp(bins[w].data, data, BIN_FAKE_DATA) == 0;
    }
    if (!ok) {
        atomic_fetch_add(&f->mismatches, 1);
        return KILN_EVULKAN;
    }
    *out = NULL;
    return KILN_OK;
}

/* A builder's pipeline: the same check, nothing to chain (lavapipe has no
 * VK_KHR_pipeline_binary, so the builder builds from its stages). */
static int bin_fake_bind(void *user, const struct kiln_key *key, const struct kiln__bin_entry *bins,
                         uint32_t n, void **info)
{
    struct bin_fake *f = user;
    struct kiln_vk_pipeline *none = NULL;
    *info = NULL;
    atomic_fetch_add(&f->binds, 1);
    return bin_fake_create(user, key, false, bins, n, &none);
}

static void bin_fake_init(struct bin_fake *f, uint8_t global)
{
    memset(f, 0, sizeof(*f));
    f->global = global;
    f->device_id = 0x1234;
    f->p = (struct kiln__bin_provider){.user = f,
                                       .global_key = bin_fake_global,
                                       .capture = bin_fake_capture,
                                       .create_from = bin_fake_create,
                                       .bind = bin_fake_bind};
}

/* Drops the least recently used program of `c` (the earliest in the file:
 * all were used today) with a prune to one byte under its file, as `kiln
 * cache prune --max-size` would. */
static void bin_prune_one(struct kiln_cache *c)
{
    struct kiln_cache_prune_options po = {.size = sizeof(po), .older_than_days = UINT32_MAX};
    struct kiln_cache_prune_plan plan = KILN_CACHE_PRUNE_PLAN_INIT;
    KT_REQUIRE_OK(kiln_cache_plan_prune(c, &po, &plan));
    po.max_file_bytes = plan.file_bytes_before - 1;
    kiln_cache_prune_plan_free(&plan);
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_REQUIRE_OK(kiln_cache_prune(c, &po, &r));
    KT_REQUIRE(r.dropped == 1);
}

#endif /* KILN_TESTS_BIN_FAKE_H */
