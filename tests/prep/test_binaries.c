/*
 * test_binaries.c - the host tier of driver binaries without a device: the
 * payload's parser (truncation, lengths, overflow) and the tier's storage,
 * staleness and damage through the fake provider (bin_fake.h), and its
 * sweep after the programs shrink (kiln__bin_sweep).
 */
#include "bin_fake.h"
#include "kiln_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A payload of two binaries, written into buf. @return its size. */
static size_t two_binaries(uint8_t *buf, size_t cap)
{
    static const uint8_t k0[3] = {1, 2, 3}, k1[32] = {9};
    static const uint8_t d0[5] = {10, 11, 12, 13, 14};
    struct kiln__bin_entry e[2] = {{.key = k0, .key_size = 3, .data = d0, .data_size = 5},
                                   {.key = k1, .key_size = 32, .data = NULL, .data_size = 0}};
    int64_t n = kiln__bin_payload_write(e, 2, buf, cap);
    KT_NEED(n > 0);
    return (size_t)n;
}

KT_CASE(format_round_trip)
{
    uint8_t buf[256];
    size_t n = two_binaries(buf, sizeof(buf));
    KT_CHECK_EQ(n, KILN__BIN_HEADER + (4 + 3 + 8 + 5) + (4 + 32 + 8));
    struct kiln__bin_entry out[4];
    KT_REQUIRE(kiln__bin_payload_parse(buf, n, out, 4) == 2);
    KT_CHECK_EQ(out[0].key_size, 3);
    KT_CHECK(memcmp(out[0].key, "\1\2\3", 3) == 0);
    KT_CHECK_EQ(out[0].data_size, 5);
    KT_CHECK_EQ(out[0].data[4], 14);
    KT_CHECK_EQ(out[1].key_size, 32);
    KT_CHECK_EQ(out[1].data_size, 0);
    /* Too small an output array: refused, not cut. */
    KT_CHECK_EQ(kiln__bin_payload_parse(buf, n, out, 1), KILN_ERANGE);
    /* A writer's cap too small. */
    KT_CHECK_EQ(kiln__bin_payload_write(out, 2, buf, n - 1), KILN_ERANGE);
}

KT_CASE(format_truncation)
{
    uint8_t buf[256];
    size_t n = two_binaries(buf, sizeof(buf));
    struct kiln__bin_entry out[4];
    /* Every prefix is refused, and so is one byte more. */
    for (size_t cut = 0; cut < n; cut++) {
        int rc = kiln__bin_payload_parse(buf, cut, out, 4);
        KT_CHECK(rc == KILN_EFORMAT || rc == KILN_ECORRUPT_RECORD);
    }
    buf[n] = 0;
    KT_CHECK_EQ(kiln__bin_payload_parse(buf, n + 1, out, 4), KILN_ECORRUPT_RECORD);
}

KT_CASE(format_lengths)
{
    uint8_t buf[256];
    struct kiln__bin_entry out[4];
    size_t n = two_binaries(buf, sizeof(buf));
    uint8_t bad[256];
    /* Another magic or version: not this format. */
    memcpy(bad, buf, n);
    bad[0] ^= 1;
    KT_CHECK_EQ(kiln__bin_payload_parse(bad, n, out, 4), KILN_EFORMAT);
    memcpy(bad, buf, n);
    kiln__store_le32(bad + 4, 2);
    KT_CHECK_EQ(kiln__bin_payload_parse(bad, n, out, 4), KILN_EFORMAT);
    /* A count over the most, a nonzero reserved word. */
    memcpy(bad, buf, n);
    kiln__store_le32(bad + 8, KILN__BIN_MAX_COUNT + 1);
    KT_CHECK_EQ(kiln__bin_payload_parse(bad, n, out, 100), KILN_ECORRUPT_RECORD);
    memcpy(bad, buf, n);
    kiln__store_le32(bad + 12, 1);
    KT_CHECK_EQ(kiln__bin_payload_parse(bad, n, out, 4), KILN_ECORRUPT_RECORD);
    /* Key sizes 0 and 33. */
    memcpy(bad, buf, n);
    kiln__store_le32(bad + KILN__BIN_HEADER, 0);
    KT_CHECK_EQ(kiln__bin_payload_parse(bad, n, out, 4), KILN_ECORRUPT_RECORD);
    kiln__store_le32(bad + KILN__BIN_HEADER, 33);
    KT_CHECK_EQ(kiln__bin_payload_parse(bad, n, out, 4), KILN_ECORRUPT_RECORD);
    /* Data sizes one over what is left, and ones that would wrap. */
    size_t ds_at = KILN__BIN_HEADER + 4 + 3;
    uint64_t wraps[] = {n, UINT64_MAX, UINT64_MAX - 4, (uint64_t)1 << 63};
    for (size_t i = 0; i < sizeof(wraps) / sizeof(wraps[0]); i++) {
        memcpy(bad, buf, n);
        kiln__store_le64(bad + ds_at, wraps[i]);
        KT_CHECK_EQ(kiln__bin_payload_parse(bad, n, out, 4), KILN_ECORRUPT_RECORD);
    }
    /* The writer refuses what the parser would. */
    struct kiln__bin_entry e = {.key = buf, .key_size = 0, .data = buf, .data_size = 1};
    size_t size = 0;
    KT_CHECK_EQ(kiln__bin_payload_size(&e, 1, &size), KILN_ERANGE);
    e.key_size = 4;
    e.data_size = UINT64_MAX - 2;
    KT_CHECK_EQ(kiln__bin_payload_size(&e, 1, &size), KILN_ERANGE);
    KT_CHECK_EQ(kiln__bin_payload_size(&e, KILN__BIN_MAX_COUNT + 1, &size), KILN_ERANGE);
}

/* The tier of the fake over cache_dir. */
static struct kiln__bin_tier *tier(const char *cache_dir, struct bin_fake *f, bool read_only,
                                   bool drop_stale)
{
    struct kiln__bin_tier_options o = {.cache_dir = cache_dir,
                                       .provider = &f->p,
                                       .read_only = read_only,
                                       .drop_stale = drop_stale};
    struct kiln__bin_tier *t = NULL;
    KT_NEED(kiln__bin_tier_open(&o, &t) == KILN_OK);
    return t;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

KT_CASE(tier_round_trip)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/cache", kt_tmpdir());
    struct bin_fake f;
    bin_fake_init(&f, 0xa1);
    struct kiln__bin_tier *t = tier(dir, &f, false, false);
    KT_CHECK(kiln__bin_tier_fresh(t));
    struct kiln_key keys[3] = {{1, 2}, {3, 4}, {0xffffffffffffffffull, 5}};
    for (int i = 0; i < 3; i++)
        KT_CHECK_OK(kiln__bin_tier_keep(t, keys[i], NULL));
    struct kiln__bin_tier_stats st;
    kiln__bin_tier_get_stats(t, &st);
    KT_CHECK_EQ(st.kept, 3);
    KT_CHECK(strstr(st.dir, "/binaries/10005-1234-a1a1a1") != NULL);
    kiln__bin_tier_close(t);
    KT_CHECK(is_dir(st.dir));

    /* Read back by a read-only tier: exactly what was captured. */
    t = tier(dir, &f, true, false);
    KT_CHECK(!kiln__bin_tier_fresh(t));
    KT_CHECK(!kiln__bin_tier_capturing(t));
    for (int i = 0; i < 3; i++) {
        struct kiln_vk_pipeline *p = (struct kiln_vk_pipeline *)&f;
        KT_CHECK(kiln__bin_tier_has(t, keys[i]));
        KT_CHECK_OK(kiln__bin_tier_make(t, keys[i], true, &p));
        KT_CHECK(p == NULL);
    }
    struct kiln_vk_pipeline *p = NULL;
    KT_CHECK_EQ(kiln__bin_tier_make(t, (struct kiln_key){7, 7}, true, &p), KILN_ENOTFOUND);
    KT_CHECK_EQ(kiln__bin_tier_keep(t, keys[0], NULL), KILN_EINVAL); /* read-only */
    kiln__bin_tier_get_stats(t, &st);
    KT_CHECK_EQ(st.records, 3);
    KT_CHECK_EQ(st.made, 3);
    KT_CHECK_EQ(st.damaged, 0);
    KT_CHECK_EQ(atomic_load(&f.creates), 3);
    KT_CHECK_EQ(atomic_load(&f.mismatches), 0);
    kiln__bin_tier_close(t);
}

KT_CASE(tier_stale_dropped)
{
    char dir[4200], other[4300], prog[4300];
    snprintf(dir, sizeof(dir), "%s/cache", kt_tmpdir());
    struct bin_fake f;
    bin_fake_init(&f, 0x11);
    struct kiln__bin_tier *t = tier(dir, &f, false, false);
    KT_CHECK_OK(kiln__bin_tier_keep(t, (struct kiln_key){1, 1}, NULL));
    struct kiln__bin_tier_stats old;
    kiln__bin_tier_get_stats(t, &old);
    kiln__bin_tier_close(t);
    /* Another device's tier and a file of the cache folder: never touched. */
    snprintf(other, sizeof(other), "%s/binaries/10005-9999-11", dir);
    KT_REQUIRE(kt_mkdir(other) == 0);
    snprintf(prog, sizeof(prog), "%s/programs.kpc", dir);
    FILE *fp = fopen(prog, "wb");
    KT_REQUIRE(fp != NULL);
    fputs("the programs", fp);
    fclose(fp);

    /* A driver update: the old folder is stale, counted, kept until asked. */
    f.global = 0x22;
    t = tier(dir, &f, false, false);
    struct kiln__bin_tier_stats st;
    kiln__bin_tier_get_stats(t, &st);
    KT_CHECK_EQ(st.stale, 1);
    KT_CHECK_EQ(st.stale_dropped, 0);
    KT_CHECK_EQ(st.records, 0);
    KT_CHECK(kiln__bin_tier_fresh(t));
    KT_CHECK(!kiln__bin_tier_has(t, (struct kiln_key){1, 1}));
    kiln__bin_tier_close(t);
    KT_CHECK(is_dir(old.dir));

    /* Asked to rebuild: removed; a read-only tier never removes. */
    t = tier(dir, &f, true, true);
    kiln__bin_tier_get_stats(t, &st);
    KT_CHECK_EQ(st.stale_dropped, 0);
    kiln__bin_tier_close(t);
    KT_CHECK(is_dir(old.dir));
    t = tier(dir, &f, false, true);
    kiln__bin_tier_get_stats(t, &st);
    KT_CHECK_EQ(st.stale, 1);
    KT_CHECK_EQ(st.stale_dropped, 1);
    kiln__bin_tier_close(t);
    KT_CHECK(!is_dir(old.dir));
    KT_CHECK(is_dir(st.dir));
    KT_CHECK(is_dir(other));
    struct stat ps;
    KT_CHECK(stat(prog, &ps) == 0);
}

KT_CASE(tier_damaged_payload)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/cache", kt_tmpdir());
    struct bin_fake f;
    bin_fake_init(&f, 0x33);
    struct kiln__bin_tier *t = tier(dir, &f, false, false);
    KT_CHECK_OK(kiln__bin_tier_keep(t, (struct kiln_key){1, 1}, NULL));
    struct kiln__bin_tier_stats st;
    kiln__bin_tier_get_stats(t, &st);
    kiln__bin_tier_close(t);

    /* Records whose payloads are not binaries (a writer's bug, another
     * version): the cache's checksum holds, the parse refuses them. */
    struct kiln_cache_options co = {.size = sizeof(co), .stamp = 0x4b4c4e42u};
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(kiln_cache_open(st.dir, &co, &c));
    uint8_t buf[256];
    size_t n = two_binaries(buf, sizeof(buf));
    KT_CHECK_OK(kiln_cache_put(c, (struct kiln_key){2, 2}, buf, n - 1, (uint32_t)n, 0, 0));
    KT_CHECK_OK(kiln_cache_put(c, (struct kiln_key){3, 3}, "nonsense", 8, 8, 0, 0));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);

    t = tier(dir, &f, true, false);
    struct kiln_vk_pipeline *p = NULL;
    KT_CHECK_EQ(kiln__bin_tier_make(t, (struct kiln_key){2, 2}, true, &p), KILN_ECORRUPT_RECORD);
    KT_CHECK_EQ(kiln__bin_tier_make(t, (struct kiln_key){3, 3}, true, &p), KILN_ECORRUPT_RECORD);
    KT_CHECK_EQ(atomic_load(&f.creates), 0); /* never handed to the driver */
    KT_CHECK_OK(kiln__bin_tier_make(t, (struct kiln_key){1, 1}, true, &p));
    kiln__bin_tier_get_stats(t, &st);
    KT_CHECK_EQ(st.damaged, 2);
    KT_CHECK_EQ(st.made, 1);
    kiln__bin_tier_close(t);
}

/* ---- the sweep: the tier follows its programs ------------------------------ */

/* A program cache in dir holding records {k,k} for k in keys. */
static struct kiln_cache *programs(const char *dir, const uint64_t *keys, size_t n)
{
    struct kiln_cache_options co = {.size = sizeof(co), .stamp = 7, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c = NULL;
    KT_NEED(kiln_cache_open(dir, &co, &c) == KILN_OK);
    for (size_t i = 0; i < n; i++)
        KT_CHECK_OK(kiln_cache_put(c, (struct kiln_key){keys[i], keys[i]}, "program", 7, 7, 0, 0));
    KT_CHECK_OK(kiln_cache_sync(c));
    return c;
}

/* Keeps binaries for {k,k}, k in keys, in the fake's tier over dir. */
static void keep_binaries(const char *dir, struct bin_fake *f, const uint64_t *keys, size_t n,
                          struct kiln__bin_tier_stats *st)
{
    struct kiln__bin_tier *t = tier(dir, f, false, false);
    for (size_t i = 0; i < n; i++)
        KT_CHECK_OK(kiln__bin_tier_keep(t, (struct kiln_key){keys[i], keys[i]}, NULL));
    kiln__bin_tier_get_stats(t, st);
    kiln__bin_tier_close(t);
}

/* Which of {k,k}, k in keys, the tier folder `dir` holds, as a bit mask. */
static unsigned held(const char *dir, const uint64_t *keys, size_t n)
{
    struct kiln_cache_options co = {
        .size = sizeof(co), .stamp = 0x4b4c4e42u, .flags = KILN_CACHE_READ_ONLY};
    struct kiln_cache *c = NULL;
    KT_NEED(kiln_cache_open(dir, &co, &c) == KILN_OK);
    unsigned m = 0;
    for (size_t i = 0; i < n; i++)
        if (kiln_cache_find_sized(c, (struct kiln_key){keys[i], keys[i]}, 0, NULL) == KILN_OK)
            m |= 1u << i;
    kiln_cache_close(c);
    return m;
}

KT_CASE(sweep_follows_programs)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/cache", kt_tmpdir());
    const uint64_t all[] = {1, 2, 3, 9}; /* 9: binaries whose program never was */
    struct kiln_cache *c = programs(dir, all, 3);
    struct bin_fake f;
    bin_fake_init(&f, 0x61);
    struct kiln__bin_tier_stats own, other, stale;
    keep_binaries(dir, &f, all, 4, &own);
    f.device_id = 0x9999; /* another device's tier */
    keep_binaries(dir, &f, all, 3, &other);
    f.device_id = 0x1234;
    f.global = 0x62; /* this device's folder of another driver */
    keep_binaries(dir, &f, all, 2, &stale);

    /* Negative control: every program there, only 9 goes. */
    struct kiln_binaries_sweep_report r;
    KT_REQUIRE_OK(kiln__bin_sweep(c, NULL, &r));
    KT_CHECK_EQ(r.folders, 3);
    KT_CHECK_EQ(r.folders_skipped, 0);
    KT_CHECK_EQ(r.records_before, 4 + 3 + 2);
    KT_CHECK_EQ(r.swept, 1);
    KT_CHECK_EQ(held(own.dir, all, 4), 0x7u);
    /* Again: nothing to drop, nothing rewritten (the same file). */
    char kpc[4300];
    snprintf(kpc, sizeof(kpc), "%s/programs.kpc", own.dir);
    struct stat before, after;
    KT_REQUIRE(stat(kpc, &before) == 0);
    KT_REQUIRE_OK(kiln__bin_sweep(c, NULL, &r));
    KT_CHECK_EQ(r.swept, 0);
    KT_CHECK_EQ(r.records_before, 3 + 3 + 2);
    KT_REQUIRE(stat(kpc, &after) == 0);
    KT_CHECK(before.st_ino == after.st_ino && before.st_size == after.st_size);

    /* Program 1 pruned: its binaries go from every folder, nothing else. */
    bin_prune_one(c);
    KT_CHECK_EQ(kiln_cache_last_use(c, (struct kiln_key){1, 1}, NULL), KILN_ENOTFOUND);
    KT_REQUIRE_OK(kiln_binaries_sweep(c, &r));
    KT_CHECK_EQ(r.folders, 3);
    KT_CHECK_EQ(r.swept, 3);
    KT_CHECK_EQ(r.damaged, 0);
    KT_CHECK_EQ(held(own.dir, all, 4), 0x6u);
    KT_CHECK_EQ(held(other.dir, all, 4), 0x6u);
    KT_CHECK_EQ(held(stale.dir, all, 4), 0x2u);
    /* The programs are untouched by the sweep. */
    KT_CHECK_EQ(kiln_cache_count(c), 2);

    /* What is left reaches the driver as before. */
    f.global = 0x61;
    struct kiln__bin_tier *t = tier(dir, &f, true, false);
    struct kiln_vk_pipeline *p = NULL;
    KT_CHECK_OK(kiln__bin_tier_make(t, (struct kiln_key){2, 2}, true, &p));
    KT_CHECK_OK(kiln__bin_tier_make(t, (struct kiln_key){3, 3}, true, &p));
    KT_CHECK_EQ(kiln__bin_tier_make(t, (struct kiln_key){1, 1}, true, &p), KILN_ENOTFOUND);
    KT_CHECK_EQ(atomic_load(&f.mismatches), 0);
    kiln__bin_tier_close(t);
    kiln_cache_close(c);
}

/* Flips a byte of the payload of `key` in the tier folder `dir`. */
static void damage(const char *dir, struct kiln_key key)
{
    struct kiln_cache_options co = {
        .size = sizeof(co), .stamp = 0x4b4c4e42u, .flags = KILN_CACHE_READ_ONLY};
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(kiln_cache_open(dir, &co, &c));
    struct kiln_cache_entry e;
    KT_REQUIRE_OK(kiln_cache_find(c, key, &e));
    kiln_cache_close(c);
    char path[4300];
    snprintf(path, sizeof(path), "%s/programs.kpc", dir);
    FILE *fp = fopen(path, "r+b");
    KT_REQUIRE(fp != NULL);
    KT_REQUIRE(fseek(fp, (long)e.offset + 48 + 20, SEEK_SET) == 0);
    int ch = fgetc(fp);
    KT_REQUIRE(fseek(fp, (long)e.offset + 48 + 20, SEEK_SET) == 0);
    fputc(ch ^ 0x5a, fp);
    fclose(fp);
}

KT_CASE(sweep_damaged_record)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/cache", kt_tmpdir());
    const uint64_t all[] = {1, 2, 3};
    struct kiln_cache *c = programs(dir, all, 3);
    struct bin_fake f;
    bin_fake_init(&f, 0x71);
    struct kiln__bin_tier_stats st;
    keep_binaries(dir, &f, all, 3, &st);
    /* A tier record damaged on disk (not the last: an open cuts a torn
     * tail itself), and a folder that is no tier. */
    damage(st.dir, (struct kiln_key){2, 2});
    char junk[4300];
    snprintf(junk, sizeof(junk), "%s/binaries/not-a-tier", dir);
    KT_REQUIRE(kt_mkdir(junk) == 0);
    bin_prune_one(c);

    struct kiln_binaries_sweep_report r;
    KT_REQUIRE_OK(kiln__bin_sweep(c, NULL, &r));
    KT_CHECK_EQ(r.folders, 2);
    KT_CHECK_EQ(r.folders_skipped, 1);
    KT_CHECK_EQ(r.swept, 1);
    KT_CHECK_EQ(r.damaged, 1); /* left out by the rewrite, never read as binaries */
    KT_CHECK_EQ(held(st.dir, all, 3), 0x4u);
    KT_CHECK(is_dir(junk));
    kiln_cache_close(c);
}

KT_MAIN(KT_ENTRY(format_round_trip), KT_ENTRY(format_truncation), KT_ENTRY(format_lengths),
        KT_ENTRY(tier_round_trip), KT_ENTRY(tier_stale_dropped), KT_ENTRY(tier_damaged_payload),
        KT_ENTRY(sweep_follows_programs), KT_ENTRY(sweep_damaged_record))
