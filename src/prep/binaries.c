/*
 * binaries.c - the host tier of driver binaries: per pipeline, the
 * binaries a driver hands out with VK_KHR_pipeline_binary, kept beside the
 * programs (the portable tier) so a warm start makes its pipelines without
 * SPIR-V or a compile, loading only the pipelines it builds.
 *
 * Invariants and why they hold:
 *
 * - Binaries are used only on the device and driver that made them: the
 *   tier of a device is the folder binaries/<vendor>-<device>-<global
 *   key>/, where the global key is the driver's (vkGetPipelineKeyKHR with
 *   no create info), which changes with a driver update. Another global
 *   key is another folder, never read: such a folder of this device is
 *   stale, counted at open and removed by a run that may write (a prepare,
 *   or a start asked to rebuild), which then stores the binaries again
 *   from the programs.
 * - A removal touches only a stale tier folder of this device (a name of
 *   this device's prefix, not ours) and only the plain files in it, then
 *   the folder: never the programs, never another device's tier.
 * - One process writes a tier: a relaying tier (an isolated worker's)
 *   opens it read only and hands each capture to its parent, whose tier
 *   keeps it (kiln__bin_tier_put_payload) only when it came from this
 *   device and driver and parses.
 * - The store is a kiln_cache (records, index, checksums, crash safety:
 *   the cache module's rules hold), one record per program key, the value
 *   a payload of binaries_format.c. Nothing unchecked reaches the driver:
 *   a record the cache reports damaged, or a payload that does not parse,
 *   is counted damaged and the program is built from its SPIR-V.
 * - The tier follows its programs: a sweep (kiln__bin_sweep; kiln cache
 *   prune and compact, and a prepare or start with the tier on, run it)
 *   drops, in every folder of binaries/, the records whose program the
 *   program cache no longer holds, and nothing else, with the cache
 *   module's crash-safe rewrite (kiln__cache_drop_where). The program
 *   cache is held for writing meanwhile, so no program comes while the
 *   sweep looks; a folder another run writes (busy) is left for the next.
 * - The tier is one path per device: where it is on, builds capture the
 *   driver's data and skip the VkPipelineCache (a captured build left it
 *   empty in a probe), so a start finds each pipeline in one place.
 */
#include "binaries.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const struct kiln__bin_provider *kiln__bin_test_provider;

/* The tier's records carry this stamp (the folder names the driver). */
#define BIN_STAMP 0x4b4c4e42u

struct kiln__bin_tier {
    struct kiln_cache *cache; /* NULL: a read-only tier with no folder yet */
    const struct kiln__bin_provider *p;
    const struct kiln_io *io;
    bool read_only;
    kiln__bin_relay_fn relay; /* captures go there, not to `cache` */
    void *relay_user;
    struct kiln__bin_global global; /* the device and driver, from the provider */
    struct kiln__bin_tier_stats st; /* dir, key, stale: fixed after open */
    _Atomic uint64_t made, kept, kept_bytes, damaged, refused;
};

static void hex(const uint8_t *b, uint32_t n, char *out, size_t cap)
{
    size_t at = 0;
    for (uint32_t i = 0; i < n && at + 3 <= cap; i++, at += 2)
        snprintf(out + at, cap - at, "%02x", b[i]);
    out[at < cap ? at : cap - 1] = '\0';
}

/* The folder of a device: its prefix, then the global key in hex. */
static void device_prefix(const struct kiln__bin_global *g, char *out, size_t cap)
{
    snprintf(out, cap, "%04x-%04x-", g->vendor_id, g->device_id);
}

struct scan {
    const char *parent;
    const char *prefix;
    const char *own;
    const struct kiln_io *io;
    bool drop;
    uint64_t stale, dropped;
};

static void unlink_file(void *user, const char *name)
{
    const char **dir_io = user;
    char path[1024];
    const struct kiln_io *io = (const struct kiln_io *)dir_io[1];
    if (kiln__path_join(path, sizeof(path), dir_io[0], name) == KILN_OK)
        io->unlink(io, path);
}

/* Removes a stale folder's files, then the folder. */
static int drop_folder(const char *dir, const struct kiln_io *io)
{
    const char *dir_io[2] = {dir, (const char *)io};
    int rc = kiln__bin_list(dir, false, unlink_file, (void *)dir_io);
    if (rc == KILN_OK)
        rc = kiln__bin_rmdir(dir);
    return rc;
}

static void scan_one(void *user, const char *name)
{
    struct scan *s = user;
    size_t np = strlen(s->prefix);
    if (strncmp(name, s->prefix, np) != 0 || strcmp(name, s->own) == 0)
        return;
    s->stale++;
    if (!s->drop)
        return;
    char path[1024];
    int rc = kiln__path_join(path, sizeof(path), s->parent, name);
    if (rc == KILN_OK)
        rc = drop_folder(path, s->io);
    if (rc == KILN_OK) {
        s->dropped++;
        KILN_INFO("prep", "%s: stale driver binaries (another driver) removed", path);
    } else {
        KILN_WARN("prep", "%s: cannot remove stale driver binaries: %s", path, kiln_strerror(rc));
    }
}

static int open_cache(struct kiln__bin_tier *t)
{
    struct kiln_cache_options co = {.size = sizeof(co),
                                    .stamp = BIN_STAMP,
                                    .flags =
                                        t->read_only ? KILN_CACHE_READ_ONLY : KILN_CACHE_CREATE,
                                    .io = t->io};
    int rc = kiln_cache_open(t->st.dir, &co, &t->cache);
    if (rc == KILN_EBUSY && !t->read_only) {
        /* Another run keeps binaries now: use them, keep none. */
        KILN_INFO("prep", "%s: another run writes driver binaries: read only", t->st.dir);
        t->read_only = true;
        co.flags = KILN_CACHE_READ_ONLY;
        rc = kiln_cache_open(t->st.dir, &co, &t->cache);
    }
    if (rc == KILN_ENOENT && t->read_only)
        return KILN_OK; /* nothing kept yet: every lookup misses */
    if (rc == KILN_OK) {
        struct kiln_cache_stats cs = KILN_CACHE_STATS_INIT;
        kiln_cache_get_stats(t->cache, &cs);
        t->st.is_new = cs.open_kind == KILN_CACHE_OPENED_NEW;
    }
    return rc;
}

int kiln__bin_tier_open(const struct kiln__bin_tier_options *o, struct kiln__bin_tier **out)
{
    *out = NULL;
    struct kiln__bin_global g;
    memset(&g, 0, sizeof(g));
    int rc = o->provider->global_key(o->provider->user, &g);
    if (rc == KILN_OK && (g.key_size == 0 || g.key_size > KILN__BIN_KEY_MAX))
        rc = KILN_EVULKAN;
    if (rc < 0) {
        KILN_WARN("prep", "driver binaries: no global key from the device (%s): not used",
                  kiln_strerror(rc));
        return rc;
    }
    struct kiln__bin_tier *t = kiln__calloc(1, sizeof(*t));
    if (!t)
        return KILN_ENOMEM;
    t->p = o->provider;
    t->global = g;
    t->io = o->io ? o->io : kiln_io_default();
    t->read_only = o->read_only || o->relay;
    t->relay = o->relay;
    t->relay_user = o->relay_user;
    char parent[1024], prefix[32], own[128];
    device_prefix(&g, prefix, sizeof(prefix));
    hex(g.key, g.key_size, t->st.global_hex, sizeof(t->st.global_hex));
    snprintf(own, sizeof(own), "%s%s", prefix, t->st.global_hex);
    rc = kiln__path_join(parent, sizeof(parent), o->cache_dir, KILN__BIN_DIR);
    if (rc == KILN_OK)
        rc = kiln__path_join(t->st.dir, sizeof(t->st.dir), parent, own);
    if (rc == KILN_OK) {
        struct scan s = {.parent = parent,
                         .prefix = prefix,
                         .own = own,
                         .io = t->io,
                         .drop = o->drop_stale && !o->read_only};
        int lr = kiln__bin_list(parent, true, scan_one, &s);
        if (lr < 0 && lr != KILN_ENOENT)
            KILN_INFO("prep", "%s: cannot list (%s): stale binaries not looked for", parent,
                      kiln_strerror(lr));
        t->st.stale = s.stale;
        t->st.stale_dropped = s.dropped;
        rc = open_cache(t);
    }
    if (rc < 0) {
        KILN_WARN("prep", "%s: driver binaries not used: %s", t->st.dir, kiln_strerror(rc));
        kiln__free(t);
        return rc;
    }
    if (t->st.stale > t->st.stale_dropped)
        KILN_INFO("prep",
                  "%s: %" PRIu64 " folder%s of driver binaries of another driver (stale): "
                  "kiln prepare or kiln start --binaries-rebuild replaces them",
                  parent, t->st.stale - t->st.stale_dropped,
                  t->st.stale - t->st.stale_dropped == 1 ? "" : "s");
    *out = t;
    return KILN_OK;
}

void kiln__bin_tier_sync(struct kiln__bin_tier *t)
{
    if (!t || !t->cache || t->read_only || !atomic_load(&t->kept))
        return;
    int rc = kiln_cache_sync(t->cache);
    if (rc < 0)
        KILN_WARN("prep", "%s: driver binaries not synced: %s", t->st.dir, kiln_strerror(rc));
}

void kiln__bin_tier_close(struct kiln__bin_tier *t)
{
    if (!t)
        return;
    kiln__bin_tier_sync(t);
    kiln_cache_close(t->cache);
    kiln__free(t);
}

bool kiln__bin_tier_has(struct kiln__bin_tier *t, struct kiln_key key)
{
    return t && t->cache && kiln_cache_find_sized(t->cache, key, 0, NULL) == KILN_OK;
}

bool kiln__bin_tier_fresh(const struct kiln__bin_tier *t)
{
    return t && t->st.is_new;
}

bool kiln__bin_tier_capturing(const struct kiln__bin_tier *t)
{
    return t && (t->relay || (t->cache && !t->read_only));
}

/* Reads and parses the binaries of `key` into bins[] (pointing into
 * *data, which the caller frees with kiln_cache_payload_free). @return
 * the count, KILN_ENOTFOUND, or KILN_ECORRUPT_RECORD (counted, logged). */
static int read_bins(struct kiln__bin_tier *t, struct kiln_key key,
                     struct kiln__bin_entry bins[KILN__BIN_MAX_COUNT], void **data)
{
    *data = NULL;
    if (!t->cache)
        return KILN_ENOTFOUND;
    struct kiln_cache_result r;
    int rc = kiln_cache_get(t->cache, key, &r);
    if (rc == KILN_ENOTFOUND)
        return rc;
    if (rc == KILN_OK)
        rc = kiln__bin_payload_parse(r.data, r.size, bins, KILN__BIN_MAX_COUNT);
    if (rc < 0) {
        atomic_fetch_add_explicit(&t->damaged, 1, memory_order_relaxed);
        KILN_INFO("prep",
                  "program %016" PRIx64 "%016" PRIx64 ": its driver binaries are "
                  "damaged (%s): built from SPIR-V",
                  key.hi, key.lo, kiln_strerror(rc));
        kiln_cache_payload_free(r.data);
        return KILN_ECORRUPT_RECORD;
    }
    *data = r.data;
    return rc;
}

/* Counts the provider's answer: refused (logged) or made. */
static int count_made(struct kiln__bin_tier *t, struct kiln_key key, int rc)
{
    if (rc < 0) {
        atomic_fetch_add_explicit(&t->refused, 1, memory_order_relaxed);
        KILN_INFO("prep",
                  "program %016" PRIx64 "%016" PRIx64 ": the driver refused its "
                  "binaries (%s): built from SPIR-V",
                  key.hi, key.lo, kiln_strerror(rc));
        return rc;
    }
    atomic_fetch_add_explicit(&t->made, 1, memory_order_relaxed);
    return KILN_OK;
}

int kiln__bin_tier_make(struct kiln__bin_tier *t, struct kiln_key key, bool compute,
                        struct kiln_vk_pipeline **out)
{
    *out = NULL;
    struct kiln__bin_entry bins[KILN__BIN_MAX_COUNT];
    void *data;
    int rc = read_bins(t, key, bins, &data);
    if (rc < 0)
        return rc;
    rc = t->p->create_from(t->p->user, &key, compute, bins, (uint32_t)rc, out);
    kiln_cache_payload_free(data);
    return count_made(t, key, rc);
}

int kiln__bin_tier_bind(struct kiln__bin_tier *t, struct kiln_key key, void **info)
{
    *info = NULL;
    if (!t->p->bind)
        return KILN_ENOTSUP;
    struct kiln__bin_entry bins[KILN__BIN_MAX_COUNT];
    void *data;
    int rc = read_bins(t, key, bins, &data);
    if (rc < 0)
        return rc;
    rc = t->p->bind(t->p->user, &key, bins, (uint32_t)rc, info);
    kiln_cache_payload_free(data);
    if (rc < 0)
        *info = NULL;
    return count_made(t, key, rc);
}

void kiln__bin_tier_refused(struct kiln__bin_tier *t, struct kiln_key key, int rc)
{
    atomic_fetch_sub_explicit(&t->made, 1, memory_order_relaxed);
    count_made(t, key, rc < 0 ? rc : KILN_EVULKAN);
}

void kiln__bin_tier_unbind(struct kiln__bin_tier *t, void *info)
{
    if (t && info && t->p->unbind)
        t->p->unbind(t->p->user, info);
}

uint64_t kiln__bin_tier_capture_flags2(const struct kiln__bin_tier *t)
{
    return t ? t->p->capture_flags2 : 0;
}

/* The binaries a capture hands over, copied into one growing block. */
struct gather {
    struct kiln__bin_entry e[KILN__BIN_MAX_COUNT];
    unsigned char *blob[KILN__BIN_MAX_COUNT];
    uint32_t n;
};

static int gather_add(void *ctx, const struct kiln__bin_entry *e)
{
    struct gather *g = ctx;
    if (g->n >= KILN__BIN_MAX_COUNT || e->key_size == 0 || e->key_size > KILN__BIN_KEY_MAX ||
        e->data_size > KILN_CACHE_MAX_PAYLOAD)
        return KILN_ERANGE;
    size_t bytes = e->key_size + (size_t)e->data_size;
    unsigned char *b = kiln__malloc(bytes ? bytes : 1);
    if (!b)
        return KILN_ENOMEM;
    memcpy(b, e->key, e->key_size);
    if (e->data_size)
        memcpy(b + e->key_size, e->data, (size_t)e->data_size);
    g->blob[g->n] = b;
    g->e[g->n] = (struct kiln__bin_entry){
        .key = b, .key_size = e->key_size, .data = b + e->key_size, .data_size = e->data_size};
    g->n++;
    return KILN_OK;
}

/* Keeps one payload of `key`: handed to the relay, or put in the tier's
 * folder; counted when kept. */
static int keep_payload(struct kiln__bin_tier *t, struct kiln_key key, const void *payload,
                        size_t size)
{
    int rc = t->relay
                 ? t->relay(t->relay_user, key, &t->global, payload, size)
                 : kiln_cache_put(t->cache, key, payload, size, (uint32_t)size, KILN_CODEC_RAW, 0);
    if (rc == KILN_OK) {
        atomic_fetch_add_explicit(&t->kept, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->kept_bytes, size, memory_order_relaxed);
    }
    return rc;
}

static int put_gathered(struct kiln__bin_tier *t, struct kiln_key key, const struct gather *g)
{
    size_t size = 0;
    KILN_TRY(kiln__bin_payload_size(g->e, g->n, &size));
    if (size > KILN_CACHE_MAX_PAYLOAD)
        return KILN_ERANGE;
    void *payload = kiln__malloc(size);
    if (!payload)
        return KILN_ENOMEM;
    int64_t w = kiln__bin_payload_write(g->e, g->n, payload, size);
    int rc = w < 0 ? (int)w : keep_payload(t, key, payload, size);
    kiln__free(payload);
    return rc;
}

int kiln__bin_tier_put_payload(struct kiln__bin_tier *t, struct kiln_key key,
                               const struct kiln__bin_global *driver, const void *payload,
                               size_t size)
{
    if (!kiln__bin_tier_capturing(t) || t->relay)
        return KILN_EINVAL;
    if (driver->vendor_id != t->global.vendor_id || driver->device_id != t->global.device_id ||
        driver->key_size != t->global.key_size ||
        memcmp(driver->key, t->global.key, driver->key_size) != 0)
        return KILN_ESTAMP;
    if (size > KILN_CACHE_MAX_PAYLOAD)
        return KILN_ERANGE;
    struct kiln__bin_entry e[KILN__BIN_MAX_COUNT];
    int n = kiln__bin_payload_parse(payload, size, e, KILN__BIN_MAX_COUNT);
    if (n < 0)
        return n;
    if (n == 0)
        return KILN_ECORRUPT_RECORD; /* a capture hands out at least one */
    return keep_payload(t, key, payload, size);
}

int kiln__bin_tier_keep(struct kiln__bin_tier *t, struct kiln_key key,
                        struct kiln_vk_pipeline *pipe)
{
    return kiln__bin_tier_keep_handle(t, key, kiln_vk_pipeline_handle(pipe));
}

int kiln__bin_tier_keep_handle(struct kiln__bin_tier *t, struct kiln_key key, uint64_t pipeline)
{
    if (!kiln__bin_tier_capturing(t))
        return KILN_EINVAL;
    struct gather *g = kiln__calloc(1, sizeof(*g));
    if (!g)
        return KILN_ENOMEM;
    int rc = t->p->capture(t->p->user, &key, pipeline, gather_add, g);
    if (rc == KILN_OK && g->n == 0)
        rc = KILN_ENOTFOUND; /* the driver handed out nothing */
    if (rc == KILN_OK)
        rc = put_gathered(t, key, g);
    for (uint32_t i = 0; i < g->n; i++)
        kiln__free(g->blob[i]);
    kiln__free(g);
    if (rc < 0)
        KILN_INFO("prep", "program %016" PRIx64 "%016" PRIx64 ": driver binaries not kept: %s",
                  key.hi, key.lo, kiln_strerror(rc));
    return rc;
}

void kiln__bin_tier_get_stats(struct kiln__bin_tier *t, struct kiln__bin_tier_stats *out)
{
    *out = t->st;
    if (t->cache) {
        struct kiln_cache_stats cs = KILN_CACHE_STATS_INIT;
        kiln_cache_get_stats(t->cache, &cs);
        out->records = cs.records;
        out->bytes = cs.bytes;
    }
    out->made = atomic_load(&t->made);
    out->kept = atomic_load(&t->kept);
    out->damaged = atomic_load(&t->damaged);
    out->refused = atomic_load(&t->refused);
}

void kiln__bin_tier_stats_or_zero(struct kiln__bin_tier *t, struct kiln__bin_tier_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (t)
        kiln__bin_tier_get_stats(t, out);
}

struct kiln__bin_tier *kiln__bin_tier_for_run(uint32_t mode, struct kiln_vk *vk,
                                              struct kiln__bin_provider *provider,
                                              const struct kiln__bin_tier_options *o)
{
    if (mode == KILN_BINARIES_OFF)
        return NULL;
    char why[256] = "";
    if (kiln__bin_test_provider)
        *provider = *kiln__bin_test_provider;
    else if (!vk || kiln__vk_binary_provider(vk, provider, why, sizeof(why)) < 0) {
        if (mode == KILN_BINARIES_ON)
            KILN_WARN("prep", "driver binaries asked for, but %s: pipelines.vkc serves",
                      why[0] ? why : "there is no Vulkan context");
        else
            KILN_INFO("prep", "driver binaries: %s: pipelines.vkc serves",
                      why[0] ? why : "no Vulkan context");
        return NULL;
    }
    struct kiln__bin_tier_options to = *o;
    to.provider = provider;
    struct kiln__bin_tier *t = NULL;
    return kiln__bin_tier_open(&to, &t) == KILN_OK ? t : NULL;
}

/* ---- the sweep: the tier follows its programs ------------------------------ */

struct sweep {
    struct kiln_cache *programs;
    const struct kiln_io *io;
    const char *parent;
    struct kiln_binaries_sweep_report r;
};

/* A record goes when the program cache (its layers included) lacks its
 * program; the look-up marks no use. */
static bool program_gone(void *user, const struct kiln_key *key)
{
    struct kiln_cache *programs = user;
    return kiln_cache_last_use(programs, *key, NULL) == KILN_ENOTFOUND;
}

static int sweep_folder(struct sweep *w, const char *dir)
{
    struct kiln_cache_options co = {.size = sizeof(co), .stamp = BIN_STAMP, .io = w->io};
    struct kiln_cache *c = NULL;
    KILN_TRY(kiln_cache_open(dir, &co, &c));
    struct kiln_cache_rewrite_report rr = {.size = sizeof(rr)};
    int rc = kiln__cache_drop_where(c, program_gone, w->programs, &rr);
    w->r.records_before += rr.records_before;
    if (rc == KILN_OK) {
        w->r.swept += rr.dropped;
        w->r.damaged += rr.damaged;
    }
    kiln_cache_close(c);
    if (rc == KILN_OK && rr.dropped)
        KILN_INFO("prep", "%s: %" PRIu64 " pipeline%s of pruned programs dropped", dir, rr.dropped,
                  rr.dropped == 1 ? "" : "s");
    return rc;
}

static void sweep_one(void *user, const char *name)
{
    struct sweep *w = user;
    char dir[1024];
    int rc = kiln__path_join(dir, sizeof(dir), w->parent, name);
    w->r.folders++;
    if (rc == KILN_OK)
        rc = sweep_folder(w, dir);
    if (rc < 0) {
        /* Busy (another run keeps binaries there), or not a tier: next time. */
        w->r.folders_skipped++;
        KILN_INFO("prep", "%s: driver binaries not swept: %s", dir, kiln_strerror(rc));
    }
}

int kiln__bin_sweep(struct kiln_cache *programs, const struct kiln_io *io,
                    struct kiln_binaries_sweep_report *out)
{
    struct sweep w = {.programs = programs, .io = io ? io : kiln_io_default()};
    w.r.size = sizeof(w.r);
    char parent[1024];
    int rc = kiln__path_join(parent, sizeof(parent), kiln_cache_dir(programs), KILN__BIN_DIR);
    w.parent = parent;
    if (rc == KILN_OK)
        rc = kiln__bin_list(parent, true, sweep_one, &w);
    if (rc == KILN_ENOENT)
        rc = KILN_OK; /* no tier: nothing to sweep */
    if (rc < 0)
        KILN_WARN("prep", "%s: driver binaries not swept: %s", parent, kiln_strerror(rc));
    *out = w.r;
    return rc;
}

int kiln_binaries_sweep(struct kiln_cache *programs, struct kiln_binaries_sweep_report *report)
{
    if (report)
        KILN_TRY(kiln__struct_out_check(report, "kiln_binaries_sweep_report"));
    struct kiln_binaries_sweep_report r = {.size = sizeof(r)};
    int rc = KILN_EINVAL;
    if (programs)
        rc = kiln__bin_sweep(programs, NULL, &r);
    else
        KILN_ERROR("prep", "kiln_binaries_sweep: no program cache given");
    if (report)
        KILN_STRUCT_OUT(report, &r);
    return rc;
}
