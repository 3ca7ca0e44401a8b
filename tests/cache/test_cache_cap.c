/*
 * test_cache_cap.c - the size cap a cache keeps itself
 * (kiln_cache_options.max_size): the eviction order (least recently used,
 * then the earliest in the file), the records this handle used never
 * evicted (an overflow counted instead), the cap remembered across opens
 * and cleared, read-only layers never touched, a bad cap refused, a
 * damaged settings file read as no cap, and the maintenance rewrites
 * keeping the cap; and loads from the cache and its layer while another
 * thread's stores evict (loads_while_evicting, label threads, with its
 * negative control: the cache built with KILN_CACHE_BROKEN_GATE). The
 * kills during an eviction are in tests/reliability/test_cap_crash.c.
 */
#include "kiln_test.h"
#include "kiln/cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAMP 0x6361707465737431ull /* "captest1" */
#define DAY0  20000u
/* Payload bytes of every record: 1048 bytes in the file with its head. */
#define PAYLOAD 1000u
#define REC     1048u
#define HEADER  64u

static struct kiln_key key_of(uint32_t id)
{
    struct kiln_key k = {.lo = 0x6b696c6e00000000ull | id, .hi = id * 0x9e3779b97f4a7c15ull};
    return k;
}

static void payload_of(uint32_t id, unsigned char *buf)
{
    uint64_t s = id + 1;
    for (size_t i = 0; i < PAYLOAD; i++)
        buf[i] = (unsigned char)kt_rand(&s);
}

static int open_cap(const char *dir, uint32_t today, uint64_t max_size, unsigned flags,
                    struct kiln_cache **c)
{
    struct kiln_cache_options o = KILN_CACHE_OPTIONS_INIT;
    o.stamp = STAMP;
    o.flags = flags;
    o.today = today;
    o.max_size = max_size;
    return kiln_cache_open(dir, &o, c);
}

static int put_id(struct kiln_cache *c, uint32_t id)
{
    unsigned char buf[PAYLOAD];
    payload_of(id, buf);
    return kiln_cache_put(c, key_of(id), buf, PAYLOAD, PAYLOAD, 0, 1);
}

static bool has(struct kiln_cache *c, uint32_t id)
{
    return kiln_cache_find(c, key_of(id), NULL) == KILN_OK;
}

/* Whether record `id` loads whole with its own bytes. */
static bool loads(struct kiln_cache *c, uint32_t id)
{
    struct kiln_cache_result r;
    if (kiln_cache_get(c, key_of(id), &r) != KILN_OK)
        return false;
    unsigned char want[PAYLOAD];
    payload_of(id, want);
    bool ok = r.size == PAYLOAD && memcmp(r.data, want, PAYLOAD) == 0;
    kiln_cache_payload_free(r.data);
    return ok;
}

static struct kiln_cache_stats stats_of(struct kiln_cache *c)
{
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    return st;
}

/* Stores ids [from, to) in a handle of its own, on `day`, synced. */
static void fill(const char *dir, uint32_t day, uint64_t max_size, uint32_t from, uint32_t to)
{
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cap(dir, day, max_size, KILN_CACHE_CREATE, &c));
    for (uint32_t id = from; id < to; id++)
        KT_CHECK_OK(put_id(c, id));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
}

/* A cap of 12 records: 10 old ones, half of them loaded on a later day; a
 * new handle's third put passes the cap and evicts down to half of it:
 * eight records, first the five not loaded since (the oldest use), then
 * three of the loaded ones, the earliest in the file first. */
KT_CASE(evict_lru_order)
{
    const char *dir = kt_tmpdir();
    uint64_t cap = HEADER + 12 * REC;
    fill(dir, DAY0, cap, 0, 10);
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cap(dir, DAY0 + 1, 0, 0, &c));
    /* Ids 0, 2, 4, 6, 8 used on day DAY0 + 1: the odd ones are older. */
    for (uint32_t id = 0; id < 10; id += 2)
        KT_CHECK(loads(c, id));
    kiln_cache_close(c);

    KT_REQUIRE_OK(open_cap(dir, DAY0 + 2, 0, 0, &c));
    KT_CHECK_EQ(stats_of(c).max_size, cap);
    KT_CHECK_OK(put_id(c, 100));
    KT_CHECK_OK(put_id(c, 101));
    KT_CHECK_EQ(stats_of(c).evictions, 0); /* at the cap, not past it */
    KT_CHECK_OK(put_id(c, 102));
    struct kiln_cache_stats st = stats_of(c);
    KT_CHECK_EQ(st.evictions, 1);
    KT_CHECK_EQ(st.evicted_records, 8);
    KT_CHECK_EQ(st.evicted_bytes, 8 * REC);
    KT_CHECK_EQ(st.cap_overflows, 0);
    KT_CHECK(st.file_bytes <= cap / 2);
    for (uint32_t id = 0; id < 10; id++)
        KT_CHECK_EQ(has(c, id), id == 6 || id == 8);
    for (uint32_t id = 100; id < 103; id++)
        KT_CHECK(loads(c, id));
    /* The puts until the next pass cost no rewrite. */
    KT_CHECK_OK(put_id(c, 103));
    KT_CHECK_OK(put_id(c, 104));
    KT_CHECK_EQ(stats_of(c).evictions, 1);
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);

    /* What was kept is what a reopen finds, whole. */
    KT_REQUIRE_OK(open_cap(dir, DAY0 + 2, 0, KILN_CACHE_READ_ONLY, &c));
    KT_CHECK_EQ(kiln_cache_count(c), 7);
    KT_CHECK(loads(c, 6));
    KT_CHECK(loads(c, 8));
    for (uint32_t id = 100; id < 105; id++)
        KT_CHECK(loads(c, id));
    kiln_cache_close(c);
    struct kiln_cache_check_report r = KILN_CACHE_CHECK_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &r));
}

/* Records this handle stored, loaded or found are never evicted: the
 * oldest records, used by this handle, stay; the others go; and when this
 * handle's records alone pass the cap, every put still succeeds and the
 * overflow is counted. */
KT_CASE(run_records_kept)
{
    const char *dir = kt_tmpdir();
    uint64_t cap = HEADER + 8 * REC;
    fill(dir, DAY0, cap, 0, 8);
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cap(dir, DAY0 + 1, 0, 0, &c));
    KT_CHECK(loads(c, 0));          /* loaded */
    KT_CHECK(has(c, 1));            /* found */
    struct kiln_key k2 = key_of(2); /* loaded with load_many */
    struct kiln_cache_result *res;
    KT_CHECK_EQ(kiln_cache_load_many(c, &k2, 1, 1, &res), 1);
    kiln_cache_results_free(res, 1);
    for (uint32_t id = 100; id < 120; id++)
        KT_CHECK_OK(put_id(c, id));
    struct kiln_cache_stats st = stats_of(c);
    KT_CHECK(st.evictions >= 1);
    KT_CHECK_EQ(st.evicted_records, 5); /* ids 3..7: all that this handle did not use */
    KT_CHECK(st.cap_overflows > 0);
    KT_CHECK(st.file_bytes > cap);
    for (uint32_t id = 0; id < 3; id++)
        KT_CHECK(loads(c, id));
    for (uint32_t id = 3; id < 8; id++)
        KT_CHECK(!has(c, id));
    for (uint32_t id = 100; id < 120; id++)
        KT_CHECK(loads(c, id));
    /* Nothing is left to evict: later puts rewrite nothing. */
    uint64_t ev = st.evictions;
    KT_CHECK_OK(put_id(c, 120));
    KT_CHECK_EQ(stats_of(c).evictions, ev);
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);

    /* The next handle evicts the last one's records, least recently used first. */
    KT_REQUIRE_OK(open_cap(dir, DAY0 + 2, 0, 0, &c));
    KT_CHECK_OK(put_id(c, 200));
    st = stats_of(c);
    KT_CHECK_EQ(st.evictions, 1);
    KT_CHECK(st.file_bytes <= cap);
    KT_CHECK(loads(c, 200));
    KT_CHECK(loads(c, 120)); /* the newest of the last handle's stay */
    kiln_cache_close(c);
}

/* The cap is remembered by the cache, seen by read-only opens, changed by
 * a later writer's option and cleared with KILN_CACHE_NO_CAP. */
KT_CASE(cap_remembered_and_cleared)
{
    const char *dir = kt_tmpdir();
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cap(dir, DAY0, 64 * 1024, KILN_CACHE_CREATE, &c));
    KT_CHECK_EQ(stats_of(c).max_size, 64 * 1024);
    kiln_cache_close(c);
    KT_REQUIRE_OK(open_cap(dir, DAY0, 0, 0, &c));
    KT_CHECK_EQ(stats_of(c).max_size, 64 * 1024);
    kiln_cache_close(c);
    /* A read-only open reads it and never writes it, whatever it is given. */
    KT_REQUIRE_OK(open_cap(dir, DAY0, 8192, KILN_CACHE_READ_ONLY, &c));
    KT_CHECK_EQ(stats_of(c).max_size, 64 * 1024);
    kiln_cache_close(c);
    KT_REQUIRE_OK(open_cap(dir, DAY0, 8192, 0, &c));
    KT_CHECK_EQ(stats_of(c).max_size, 8192);
    kiln_cache_close(c);
    KT_REQUIRE_OK(open_cap(dir, DAY0, KILN_CACHE_NO_CAP, 0, &c));
    KT_CHECK_EQ(stats_of(c).max_size, 0);
    /* No cap: a put far past the old one evicts nothing. */
    for (uint32_t id = 0; id < 20; id++)
        KT_CHECK_OK(put_id(c, id));
    KT_CHECK_EQ(stats_of(c).evictions, 0);
    kiln_cache_close(c);
    KT_REQUIRE_OK(open_cap(dir, DAY0, 0, 0, &c));
    KT_CHECK_EQ(stats_of(c).max_size, 0);
    KT_CHECK_EQ(kiln_cache_count(c), 20);
    kiln_cache_close(c);

    /* Too small a cap is refused; nothing is written. */
    KT_CHECK_EQ(open_cap(dir, DAY0, 63, 0, &c), KILN_EINVAL);
}

/* A settings file that does not check out means no cap; the cache opens
 * with every record. */
KT_CASE(damaged_settings_no_cap)
{
    const char *dir = kt_tmpdir();
    fill(dir, DAY0, 64 * 1024, 0, 4);
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, KILN_CACHE_META_FILE);
    FILE *f = fopen(path, "r+b");
    KT_REQUIRE(f);
    fseek(f, 17, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    struct kiln_cache *c;
    KT_REQUIRE_OK(open_cap(dir, DAY0, 0, 0, &c));
    KT_CHECK_EQ(stats_of(c).max_size, 0);
    KT_CHECK_EQ(kiln_cache_count(c), 4);
    kiln_cache_close(c);
}

/* A read-only layer beneath a capped cache is never evicted from nor
 * written: its files keep their bytes, and its records stay visible. */
KT_CASE(layers_untouched)
{
    const char *root = kt_tmpdir();
    char top[4200], layer[4200], rec[4300];
    snprintf(top, sizeof(top), "%s/top", root);
    snprintf(layer, sizeof(layer), "%s/layer", root);
    snprintf(rec, sizeof(rec), "%s/%s", layer, KILN_CACHE_RECORDS_FILE);
    fill(layer, DAY0, 0, 0, 10);
    static char before[64 * 1024], after[64 * 1024];
    FILE *f = fopen(rec, "rb");
    KT_REQUIRE(f);
    size_t n_before = fread(before, 1, sizeof(before), f);
    fclose(f);

    struct kiln_cache_options o = KILN_CACHE_OPTIONS_INIT;
    const char *layers[] = {layer};
    o.stamp = STAMP;
    o.flags = KILN_CACHE_CREATE;
    o.today = DAY0 + 1;
    o.max_size = HEADER + 4 * REC;
    o.layers = layers;
    o.nlayers = 1;
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(top, &o, &c));
    for (uint32_t id = 100; id < 104; id++)
        KT_CHECK_OK(put_id(c, id));
    kiln_cache_close(c);
    o.today = DAY0 + 2;
    o.max_size = 0;
    KT_REQUIRE_OK(kiln_cache_open(top, &o, &c));
    for (uint32_t id = 200; id < 204; id++)
        KT_CHECK_OK(put_id(c, id));
    struct kiln_cache_stats st = stats_of(c);
    KT_CHECK(st.evictions >= 1);
    KT_CHECK(st.file_bytes <= HEADER + 4 * REC);
    for (uint32_t id = 0; id < 10; id++)
        KT_CHECK(loads(c, id)); /* the layer's, all there */
    kiln_cache_close(c);
    f = fopen(rec, "rb");
    KT_REQUIRE(f);
    size_t n_after = fread(after, 1, sizeof(after), f);
    fclose(f);
    KT_CHECK_EQ(n_after, n_before);
    KT_CHECK(memcmp(before, after, n_before) == 0);
    char meta[4300];
    snprintf(meta, sizeof(meta), "%s/%s", layer, KILN_CACHE_META_FILE);
    f = fopen(meta, "rb");
    KT_CHECK(f == NULL); /* the layer was made without a cap and never given one */
    if (f)
        fclose(f);
}

/* A cap lowered on a cache that is over it is kept by the next store, and
 * by compact, prune and merge at their end. */
KT_CASE(rewrites_keep_cap)
{
    const char *dir = kt_tmpdir();
    fill(dir, DAY0, 0, 0, 20);
    struct kiln_cache *c;
    uint64_t cap = HEADER + 10 * REC;
    /* Opening at a lowered cap evicts nothing: an open stays fast. */
    KT_REQUIRE_OK(open_cap(dir, DAY0 + 1, cap, 0, &c));
    KT_CHECK_EQ(stats_of(c).evictions, 0);
    KT_CHECK_EQ(kiln_cache_count(c), 20);
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_compact(c, &r));
    struct kiln_cache_stats st = stats_of(c);
    KT_CHECK_EQ(st.evictions, 1);
    KT_CHECK(st.file_bytes <= cap);
    for (uint32_t id = 0; id < 20; id++)
        KT_CHECK_EQ(has(c, id), id >= 20 - st.records);
    kiln_cache_close(c);

    /* merge: the merged records are this handle's; the output's older go. */
    char other[4200];
    snprintf(other, sizeof(other), "%s/other", dir);
    fill(other, DAY0 + 2, 0, 300, 305);
    KT_REQUIRE_OK(open_cap(dir, DAY0 + 2, 0, 0, &c));
    struct kiln_cache_merge_report mr = KILN_CACHE_MERGE_REPORT_INIT;
    const char *in[] = {other};
    KT_CHECK_OK(kiln_cache_merge(c, in, 1, &mr));
    KT_CHECK_EQ(mr.added, 5);
    st = stats_of(c);
    KT_CHECK(st.file_bytes <= cap);
    for (uint32_t id = 300; id < 305; id++)
        KT_CHECK(loads(c, id));
    kiln_cache_close(c);
}

/* ---- loads while another thread's stores evict --------------------------- */

/* The layer's records of loads_while_evicting: ids LAYER_FIRST.. */
#define LAYER_FIRST 900000u
#define LAYER_N     32u

/* One round: the loader loads one record stored this round (never
 * evicted: this handle's) and one of the layer's, in one call, again and
 * again while the main thread stores. */
struct race {
    struct kiln_cache *c;
    uint32_t first;     /* this round's first id */
    atomic_uint stored; /* ids first.. stored so far */
    atomic_bool done;
    unsigned loads, wrong; /* the loader's counts */
};

/* Whether a result holds record `id`'s own bytes. */
static bool result_is(const struct kiln_cache_result *r, uint32_t id)
{
    unsigned char want[PAYLOAD];
    payload_of(id, want);
    return r->status == KILN_OK && r->size == PAYLOAD && memcmp(r->data, want, PAYLOAD) == 0;
}

static void *loader(void *arg)
{
    struct race *r = arg;
    uint64_t s = r->first + 1;
    while (!atomic_load(&r->done)) {
        unsigned n = atomic_load(&r->stored);
        if (n == 0)
            continue;
        uint32_t ids[2] = {r->first + (uint32_t)(kt_rand(&s) % n),
                           LAYER_FIRST + (uint32_t)(kt_rand(&s) % LAYER_N)};
        struct kiln_key keys[2] = {key_of(ids[0]), key_of(ids[1])};
        struct kiln_cache_result *res;
        int64_t got = kiln_cache_load_many(r->c, keys, 2, 1, &res);
        r->loads++;
        if (got < 0) {
            r->wrong++;
            continue;
        }
        r->wrong += got != 2 || !result_is(&res[0], ids[0]) || !result_is(&res[1], ids[1]);
        kiln_cache_results_free(res, 2);
    }
    return NULL;
}

/*
 * Rounds of one handle each, a day apart, with a cap of 64 records over a
 * layer: the main thread stores 48 records while a loader thread loads,
 * again and again, one of them (already stored) and one of the layer's.
 * From the second round on, a store passes the cap and evicts the earlier
 * rounds' records, which moves this round's down the file: the gate keeps
 * each load's look-ups and reads on one file, so every load returns both
 * records whole. Built with KILN_CACHE_BROKEN_GATE (the load takes no
 * gate), a load that looked up before an eviction reads the new file at
 * the old places: cache_cap_broken_gate.loads_while_evicting must fail.
 */
KT_CASE(loads_while_evicting)
{
    enum { ROUNDS = 40, PER_ROUND = 48 };
    const char *root = kt_tmpdir();
    char top[4200], layer[4200];
    snprintf(top, sizeof(top), "%s/top", root);
    snprintf(layer, sizeof(layer), "%s/layer", root);
    fill(layer, DAY0, 0, LAYER_FIRST, LAYER_FIRST + LAYER_N);
    const char *layers[] = {layer};
    uint64_t evictions = 0;
    unsigned loads = 0, wrong = 0;
    for (uint32_t round = 0; round < ROUNDS; round++) {
        struct kiln_cache_options o = KILN_CACHE_OPTIONS_INIT;
        o.stamp = STAMP;
        o.flags = KILN_CACHE_CREATE;
        o.today = DAY0 + round;
        o.max_size = HEADER + 64 * REC;
        o.layers = layers;
        o.nlayers = 1;
        struct race r = {.first = 1000 * (round + 1)};
        KT_REQUIRE_OK(kiln_cache_open(top, &o, &r.c));
        atomic_init(&r.stored, 0);
        atomic_init(&r.done, false);
        pthread_t tid;
        KT_REQUIRE(pthread_create(&tid, NULL, loader, &r) == 0);
        for (uint32_t i = 0; i < PER_ROUND; i++) {
            KT_CHECK_OK(put_id(r.c, r.first + i));
            atomic_store(&r.stored, i + 1);
        }
        atomic_store(&r.done, true);
        pthread_join(tid, NULL);
        evictions += stats_of(r.c).evictions;
        loads += r.loads;
        wrong += r.wrong;
        kiln_cache_close(r.c);
    }
    printf("%u loads, %u wrong, %llu evictions\n", loads, wrong, (unsigned long long)evictions);
    KT_CHECK(evictions >= ROUNDS - 1); /* the race was run: one eviction a round at least */
    KT_CHECK(loads >= ROUNDS);
    KT_CHECK_EQ(wrong, 0);
}

KT_MAIN(KT_ENTRY(evict_lru_order), KT_ENTRY(run_records_kept), KT_ENTRY(cap_remembered_and_cleared),
        KT_ENTRY(damaged_settings_no_cap), KT_ENTRY(layers_untouched), KT_ENTRY(rewrites_keep_cap),
        KT_ENTRY(loads_while_evicting))
