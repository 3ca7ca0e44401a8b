/*
 * foz_state_program.c - one recorded pipeline as one kiln program: its
 * stages (SPIR-V from the archive, entry points and specialization
 * constants from the record) and its closure as state bytes of kind
 * KILN_STATE_FOZ, under kiln_foz_pipeline_key. The import of whole
 * pipelines stores these; compiled once the core's programs carry state
 * (KILN_STATE_KINDS, kiln/pack.h).
 *
 * Design. Everything the program holds is malloc'd and the program's own
 * (kiln_program_destroy frees it), and its stages are in the closure's
 * builder order (kiln__foz_closure_stages: the pipeline's own recorded
 * stages, then those of each library it links), which is the order the
 * Fossilize builder takes them in. A pipeline linking libraries so carries
 * every module it needs, so the cache and an export hold them too.
 */
#include "foz_state_private.h"

#if defined(KILN_STATE_KINDS)

static struct json_object *get(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static char *dup_text(const char *s, size_t n)
{
    char *d = kiln__malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Fills a program stage's entry point and specialization from its record. */
static int stage_from_record(struct json_object *rec, struct kiln_program_stage *st)
{
    struct json_object *name = get(rec, "name");
    if (!json_object_is_type(name, json_type_string))
        return KILN_EPARSE;
    st->entry = dup_text(json_object_get_string(name), (size_t)json_object_get_string_len(name));
    if (!st->entry)
        return KILN_ENOMEM;
    struct json_object *si = get(rec, "specializationInfo");
    if (!si)
        return KILN_OK;
    int64_t size = json_object_get_int64(get(si, "dataSize"));
    struct json_object *data = get(si, "data"), *map = get(si, "mapEntries");
    if (size < 0 || size > (int64_t)KILN_STATE_MAX_BYTES)
        return KILN_EPARSE;
    if (size > 0) {
        if (!json_object_is_type(data, json_type_string))
            return KILN_EPARSE;
        st->spec_data = kiln__malloc((size_t)size);
        if (!st->spec_data)
            return KILN_ENOMEM;
        st->spec_size = (size_t)size;
        if (!kiln__foz_base64_decode(json_object_get_string(data),
                                     (size_t)json_object_get_string_len(data), st->spec_data,
                                     st->spec_size))
            return KILN_EPARSE;
    }
    size_t n = json_object_is_type(map, json_type_array) ? json_object_array_length(map) : 0;
    if (n) {
        st->spec = kiln__calloc(n, sizeof(*st->spec));
        if (!st->spec)
            return KILN_ENOMEM;
        for (size_t i = 0; i < n; i++) {
            struct json_object *e = json_object_array_get_idx(map, i);
            st->spec[i].constant_id = (uint32_t)json_object_get_int64(get(e, "constantID"));
            st->spec[i].offset = (uint32_t)json_object_get_int64(get(e, "offset"));
            st->spec[i].size = (uint32_t)json_object_get_int64(get(e, "size"));
        }
        st->nspec = (uint32_t)n;
    }
    return KILN_OK;
}

static int fill(const struct kiln_foz_index *idx, const struct kiln_foz_pipeline_ref *ref,
                struct kiln_program *p, struct json_object *doc, struct json_object *pipe)
{
    struct kiln_foz_closure_info info = KILN_FOZ_CLOSURE_INFO_INIT;
    KILN_TRY(kiln_foz_closure_inspect(p->state, p->state_size, &info));
    KILN_TRY(kiln_program_reserve(p, info.stage_count));
    struct kiln_foz_module mods[KILN_FOZ_MAX_STAGES];
    memset(mods, 0, sizeof(mods));
    struct json_object *recs[KILN_FOZ_MAX_STAGES];
    uint32_t nrecs;
    int rc = kiln__foz_closure_stages(doc, ref->tag, pipe, recs, KILN_FOZ_MAX_STAGES, &nrecs);
    if (rc == 0 && nrecs != info.stage_count)
        rc = KILN_EPARSE;
    for (uint32_t i = 0; i < info.stage_count && rc == 0; i++) {
        struct kiln_program_stage *st = &p->stages[i];
        struct json_object *rec = recs[i];
        rc = kiln_foz_index_module(idx, info.modules[i], &mods[i]);
        if (rc < 0)
            break;
        char name[32];
        snprintf(name, sizeof(name), "%016" PRIx64, info.modules[i]);
        st->src.stage = info.stages[i];
        st->src.name = dup_text(name, strlen(name));
        st->words = kiln__malloc(mods[i].word_count * 4);
        if (!st->src.name || !st->words) {
            rc = KILN_ENOMEM;
            break;
        }
        memcpy(st->words, mods[i].words, mods[i].word_count * 4);
        st->nwords = mods[i].word_count;
        p->nstages = i + 1;
        rc = stage_from_record(rec, st);
    }
    if (rc == 0) {
        rc = kiln_foz_pipeline_key(p->state, p->state_size, mods, info.stage_count, &p->key);
        p->has_key = rc == 0;
    }
    for (uint32_t i = 0; i < info.stage_count; i++)
        kiln_foz_module_free(&mods[i]);
    return rc;
}

int kiln_foz_pipeline_program(const struct kiln_foz_index *idx,
                              const struct kiln_foz_pipeline_ref *ref, struct kiln_program **out)
{
    if (!idx || !ref || !out)
        return KILN_EINVAL;
    *out = NULL;
    const char *kind = ref->tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE  ? "graphics"
                       : ref->tag == KILN_FOZ_TAG_COMPUTE_PIPELINE ? "compute"
                                                                   : "raytracing";
    char name[64];
    snprintf(name, sizeof(name), "%016" PRIx64 ".%s", ref->hash, kind);
    struct kiln_program *p;
    KILN_TRY(kiln_program_create(name, &p));
    uint8_t *bytes;
    size_t size;
    int rc = kiln_foz_closure_make(idx, ref->tag, ref->hash, &bytes, &size);
    struct json_object *doc = NULL, *pipe = NULL;
    if (rc == 0) {
        p->state_kind = KILN_STATE_FOZ;
        p->state = bytes;
        p->state_size = size;
        uint64_t tag, hash;
        rc = kiln__foz_closure_parse(bytes, size, &doc, &tag, &hash, &pipe);
    }
    if (rc == 0)
        rc = fill(idx, ref, p, doc, pipe);
    json_object_put(doc);
    if (rc < 0) {
        kiln_program_destroy(p);
        return rc;
    }
    *out = p;
    return KILN_OK;
}

#else

/* Until the core's programs carry state there is nothing to make: ISO C
 * wants a translation unit to declare something. */
typedef int kiln__foz_state_program_unused;

#endif /* KILN_STATE_KINDS */
