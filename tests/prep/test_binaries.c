/*
 * test_binaries.c - the host tier of driver binaries without a device: the
 * payload's parser (truncation, lengths, overflow) and the tier's storage,
 * staleness and damage through the fake provider (bin_fake.h).
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

KT_MAIN(KT_ENTRY(format_round_trip), KT_ENTRY(format_truncation), KT_ENTRY(format_lengths),
        KT_ENTRY(tier_round_trip), KT_ENTRY(tier_stale_dropped), KT_ENTRY(tier_damaged_payload))
