/*
 * foz_pipelines.c - the whole pipelines of one or more Fossilize archives,
 * each key once: what kiln import foz stores and kiln prepare --corpus
 * A.foz B.foz ... builds.
 *
 * Design. Every archive is read whole into an index at open and kept until
 * destroy, so a load remakes its program from memory (the index may be read
 * by many threads at once: loads are thread-safe without a lock). At open
 * each pipeline's program is made once to learn its key
 * (kiln_foz_pipeline_key over the closure and the modules' SPIR-V), and
 * dropped again: the set holds only (archive, tag, hash, key), so memory is
 * the archives' bytes, not a second copy of every module per pipeline. A
 * key met before, in this archive or an earlier one, is a duplicate and is
 * left out; the first archive that has a pipeline is the one it is loaded
 * from, so the list, and program i, are the same on every run for the same
 * paths. A pipeline whose program cannot be made is unreadable, and one
 * whose recorded state breaks a rule (kiln_foz_closure_check, with kiln's
 * bounds: no device is known here) is refused: each counted and logged,
 * never fatal, since the others of its archive are whole. A refused one is
 * never stored, so neither the import nor kiln prepare --corpus hands it
 * to a driver.
 */
#include "foz_state_private.h"

#include <inttypes.h>

struct archive {
    char *path;
    struct kiln_foz_index *idx;
    struct kiln_foz_pipelines_stats stats;
};

struct kiln_foz_pipelines {
    struct archive *archives;
    size_t narchives;
    struct kiln_foz_pipelines_entry *e;
    size_t n, cap;
    /* Open addressing over e[] by key: slot holds index + 1, 0 is empty. */
    size_t *slots;
    size_t nslots;
};

static size_t slot_of(struct kiln_key k, size_t nslots)
{
    return (size_t)(k.lo ^ (k.hi * UINT64_C(0x9e3779b97f4a7c15))) & (nslots - 1);
}

static bool same_key(struct kiln_key a, struct kiln_key b)
{
    return a.lo == b.lo && a.hi == b.hi;
}

/* @return whether the key is in the set already. */
static bool key_seen(const struct kiln_foz_pipelines *fp, struct kiln_key k)
{
    if (!fp->nslots)
        return false;
    for (size_t s = slot_of(k, fp->nslots);; s = (s + 1) & (fp->nslots - 1)) {
        if (!fp->slots[s])
            return false;
        if (same_key(fp->e[fp->slots[s] - 1].key, k))
            return true;
    }
}

static void slot_put(size_t *slots, size_t nslots, const struct kiln_foz_pipelines_entry *e,
                     size_t i)
{
    size_t s = slot_of(e[i].key, nslots);
    while (slots[s])
        s = (s + 1) & (nslots - 1);
    slots[s] = i + 1;
}

/* Appends an entry, keeping the table at most half full. */
static int add(struct kiln_foz_pipelines *fp, const struct kiln_foz_pipelines_entry *x)
{
    struct kiln_foz_pipelines_entry *e = kiln__grow(fp->e, fp->n, &fp->cap, sizeof(*fp->e), 64);
    if (!e)
        return KILN_ENOMEM;
    fp->e = e;
    if ((fp->n + 1) * 2 > fp->nslots) {
        size_t ns = fp->nslots ? fp->nslots * 2 : 128;
        size_t *slots = kiln__calloc(ns, sizeof(*slots));
        if (!slots)
            return KILN_ENOMEM;
        for (size_t i = 0; i < fp->n; i++)
            slot_put(slots, ns, fp->e, i);
        kiln__free(fp->slots);
        fp->slots = slots;
        fp->nslots = ns;
    }
    fp->e[fp->n] = *x;
    slot_put(fp->slots, fp->nslots, fp->e, fp->n);
    fp->n++;
    return KILN_OK;
}

static const char *unreadable_why(int rc)
{
    switch (rc) {
    case KILN_ENOTFOUND:
        return "an object or shader module it references is not in the archive";
    case KILN_EPARSE:
        return "its record is malformed";
    case KILN_ERANGE:
        return "it has more stages than kiln reads";
    default:
        return kiln_strerror(rc);
    }
}

static char *dup_path(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = kiln__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Opens archive a's index and lists its pipelines into the set. */
static int read_archive(struct kiln_foz_pipelines *fp, size_t a)
{
    struct archive *ar = &fp->archives[a];
    struct kiln_foz *foz;
    int rc = kiln_foz_open(NULL, ar->path, &foz);
    if (rc < 0) {
        /* The reader logs why at info only: this is the archive's one line. */
        if (rc == KILN_EFORMAT)
            KILN_ERROR("foz", "%s: not a Fossilize archive of a version kiln reads (%d to %d)",
                       ar->path, KILN_FOZ_VERSION_MIN, KILN_FOZ_VERSION_MAX);
        else
            KILN_ERROR("foz", "%s: cannot open the archive: %s", ar->path, kiln_strerror(rc));
        return rc;
    }
    rc = kiln_foz_index_create(foz, &ar->idx);
    kiln_foz_close(foz);
    if (rc < 0) {
        if (rc != KILN_EPARSE) /* the index names the entry whose JSON is bad */
            KILN_ERROR("foz", "%s: cannot read the archive: %s", ar->path, kiln_strerror(rc));
        return rc;
    }
    struct kiln_foz_stats fs = KILN_FOZ_STATS_INIT;
    kiln__foz_index_reader_stats(ar->idx, &fs);
    ar->stats.entries_skipped = fs.damaged;
    ar->stats.resyncs = fs.resyncs;
    ar->stats.skipped_bytes = fs.skipped_bytes;
    ar->stats.truncated = fs.truncated;
    const struct kiln_foz_pipeline_ref *refs;
    size_t n = kiln_foz_index_pipelines(ar->idx, &refs);
    for (size_t i = 0; i < n; i++) {
        enum kiln_foz_kind kind = kiln_foz_kind_of(refs[i].tag);
        if (kind == KILN_FOZ_KIND_COUNT)
            continue;
        ar->stats.found[kind]++;
        struct kiln_program *p = NULL;
        rc = kiln_foz_pipeline_program(ar->idx, &refs[i], &p);
        if (rc == KILN_ENOMEM)
            return rc;
        if (rc < 0) {
            ar->stats.unreadable[kind]++;
            char line[192];
            snprintf(line, sizeof(line), "%s pipeline %016" PRIx64 ": %s", kiln_foz_kind_name(kind),
                     refs[i].hash, unreadable_why(rc));
            if (!ar->stats.first_unreadable[0])
                snprintf(ar->stats.first_unreadable, sizeof(ar->stats.first_unreadable), "%s",
                         line);
            KILN_WARN("foz", "%s: %s; left out", ar->path, line);
            continue;
        }
        char rule[224];
        if (kiln_foz_closure_check(p->state, p->state_size, NULL, rule, sizeof(rule)) < 0) {
            /* Never stored, never built: a driver may crash on it. */
            ar->stats.refused[kind]++;
            char line[256], label[96];
            snprintf(line, sizeof(line), "%s: refused: %.160s",
                     kiln__foz_pipeline_label(label, sizeof(label), kind, refs[i].hash, p->key),
                     rule);
            if (!ar->stats.first_refused[0])
                snprintf(ar->stats.first_refused, sizeof(ar->stats.first_refused), "%s", line);
            KILN_WARN("foz", "%s: %s; left out", ar->path, line);
            kiln_program_destroy(p);
            continue;
        }
        if (p->nstages == 0) {
            /* A kiln program needs a stage: a stage-less library part is
             * built only inside the pipelines that link it. */
            ar->stats.library_parts[kind]++;
            KILN_INFO("foz",
                      "%s: %s pipeline %016" PRIx64 " is a library part without a stage: "
                      "built inside the pipelines linking it",
                      ar->path, kiln_foz_kind_name(kind), refs[i].hash);
            kiln_program_destroy(p);
            continue;
        }
        struct kiln_key key = p->key;
        kiln_program_destroy(p);
        if (key_seen(fp, key)) {
            ar->stats.duplicates[kind]++;
            continue;
        }
        struct kiln_foz_pipelines_entry x = {
            .archive = a, .tag = refs[i].tag, .hash = refs[i].hash, .key = key};
        KILN_TRY(add(fp, &x));
        ar->stats.unique[kind]++;
    }
    return KILN_OK;
}

int kiln_foz_pipelines_open(const char *const *paths, size_t n, struct kiln_foz_pipelines **out)
{
    if (!out)
        return KILN_EINVAL;
    *out = NULL;
    if (!paths || n == 0)
        return KILN_EINVAL;
    struct kiln_foz_pipelines *fp = kiln__calloc(1, sizeof(*fp));
    if (fp)
        fp->archives = kiln__calloc(n, sizeof(*fp->archives));
    int rc = fp && fp->archives ? KILN_OK : KILN_ENOMEM;
    for (size_t a = 0; a < n && rc == KILN_OK; a++) {
        fp->archives[a].path = paths[a] ? dup_path(paths[a]) : NULL;
        if (!fp->archives[a].path) {
            rc = paths[a] ? KILN_ENOMEM : KILN_EINVAL;
            break;
        }
        fp->narchives = a + 1;
        rc = read_archive(fp, a);
    }
    if (rc == KILN_ENOMEM)
        KILN_ERROR("foz", "out of memory reading %zu Fossilize archives", n);
    if (rc < 0) {
        kiln_foz_pipelines_destroy(fp);
        return rc;
    }
    size_t g = 0, c = 0, r = 0;
    for (size_t i = 0; i < fp->n; i++) {
        enum kiln_foz_kind k = kiln_foz_kind_of(fp->e[i].tag);
        g += k == KILN_FOZ_KIND_GRAPHICS;
        c += k == KILN_FOZ_KIND_COMPUTE;
        r += k == KILN_FOZ_KIND_RAYTRACING;
    }
    KILN_INFO("foz",
              "%zu archives: %zu distinct pipelines (%zu graphics, %zu compute, %zu "
              "ray-tracing)",
              n, fp->n, g, c, r);
    *out = fp;
    return KILN_OK;
}

size_t kiln_foz_pipelines_count(const struct kiln_foz_pipelines *fp)
{
    if (!fp)
        return 0;
    return fp ? fp->n : 0;
}

size_t kiln_foz_pipelines_archives(const struct kiln_foz_pipelines *fp)
{
    if (!fp)
        return 0;
    return fp ? fp->narchives : 0;
}

const char *kiln_foz_pipelines_path(const struct kiln_foz_pipelines *fp, size_t a)
{
    if (!fp)
        return NULL;
    return fp && a < fp->narchives ? fp->archives[a].path : NULL;
}

const struct kiln_foz_pipelines_entry *kiln_foz_pipelines_get(const struct kiln_foz_pipelines *fp,
                                                              size_t i)
{
    if (!fp)
        return NULL;
    return fp && i < fp->n ? &fp->e[i] : NULL;
}

/* The counts of `archive` (SIZE_MAX: all) in the library's layout. */
static void sum_stats(const struct kiln_foz_pipelines *fp, size_t archive,
                      struct kiln_foz_pipelines_stats *stats)
{
    memset(stats, 0, sizeof(*stats));
    if (archive != SIZE_MAX) {
        if (archive < fp->narchives)
            *stats = fp->archives[archive].stats;
        stats->size = sizeof(*stats);
        return;
    }
    stats->size = sizeof(*stats);
    for (size_t a = 0; a < fp->narchives; a++) {
        const struct kiln_foz_pipelines_stats *s = &fp->archives[a].stats;
        for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++) {
            stats->found[k] += s->found[k];
            stats->unique[k] += s->unique[k];
            stats->duplicates[k] += s->duplicates[k];
            stats->unreadable[k] += s->unreadable[k];
            stats->library_parts[k] += s->library_parts[k];
            stats->refused[k] += s->refused[k];
        }
        stats->entries_skipped += s->entries_skipped;
        stats->resyncs += s->resyncs;
        stats->skipped_bytes += s->skipped_bytes;
        stats->truncated |= s->truncated;
        if (!stats->first_refused[0] && s->first_refused[0])
            snprintf(stats->first_refused, sizeof(stats->first_refused), "%s", s->first_refused);
        if (!stats->first_unreadable[0] && s->first_unreadable[0])
            snprintf(stats->first_unreadable, sizeof(stats->first_unreadable), "%s",
                     s->first_unreadable);
    }
}

void kiln_foz_pipelines_get_stats(const struct kiln_foz_pipelines *fp, size_t archive,
                                  struct kiln_foz_pipelines_stats *stats)
{
    if (!fp || !stats || kiln__struct_out_check(stats, "kiln_foz_pipelines_stats") < 0)
        return;
    struct kiln_foz_pipelines_stats st = KILN_FOZ_PIPELINES_STATS_INIT;
    sum_stats(fp, archive, &st);
    KILN_STRUCT_OUT(stats, &st);
}

int kiln_foz_pipelines_load(const struct kiln_foz_pipelines *fp, size_t i,
                            struct kiln_program **out)
{
    if (!fp || !out)
        return KILN_EINVAL;
    *out = NULL;
    if (!fp || i >= fp->n)
        return KILN_EINVAL;
    const struct kiln_foz_pipelines_entry *x = &fp->e[i];
    const struct archive *ar = &fp->archives[x->archive];
    struct kiln_foz_pipeline_ref ref = {.tag = x->tag, .hash = x->hash};
    int rc = kiln_foz_pipeline_program(ar->idx, &ref, out);
    if (rc < 0) {
        /* It was made at open: only memory can fail now. */
        KILN_ERROR("foz", "%s: %s pipeline %016" PRIx64 ": cannot make its program: %s", ar->path,
                   kiln_foz_kind_name(kiln_foz_kind_of(x->tag)), x->hash, kiln_strerror(rc));
        return rc;
    }
    return KILN_OK;
}

static int source_load(void *user, size_t i, struct kiln_program **out)
{
    return kiln_foz_pipelines_load(user, i, out);
}

static uint64_t source_stamp(void *user, uint64_t translator_stamp)
{
    (void)user;
    (void)translator_stamp;
    return KILN_FOZ_STAMP; /* SPIR-V as captured: no translator is involved */
}

void kiln_foz_pipelines_source(const struct kiln_foz_pipelines *fp, struct kiln_program_source *src)
{
    if (!fp || !src)
        return;
    *src = (struct kiln_program_source){
        .size = sizeof(struct kiln_program_source),
        .user = (void *)fp,
        .count = kiln_foz_pipelines_count(fp),
        .load = source_load,
        .stamp = source_stamp,
    };
}

void kiln_foz_pipelines_destroy(struct kiln_foz_pipelines *fp)
{
    if (!fp)
        return;
    for (size_t a = 0; a < fp->narchives; a++) {
        kiln__free(fp->archives[a].path);
        kiln_foz_index_destroy(fp->archives[a].idx);
    }
    kiln__free(fp->archives);
    kiln__free(fp->e);
    kiln__free(fp->slots);
    kiln__free(fp);
}
