/*
 * foz_state.c - an archive read into memory (kiln_foz_index) and the
 * closure of one recorded pipeline: its JSON and that of every object it
 * references, as one self-contained byte string (docs/foz.md, "Closures").
 *
 * Design. The index keeps every whole entry's payload, sorted by (tag,
 * hash), and parses the JSON of the object entries once, when it is made;
 * after that it is only read, so any number of threads may make closures
 * from it at once. A closure is built as a new JSON document whose members
 * are deep copies of the index's objects (json-c's reference counts are
 * not shared across threads that way), added in the order a depth-first
 * walk from the pipeline meets them. That order depends only on the
 * recorded objects, so one pipeline recorded in two archives gives the
 * same bytes, which is what lets an import de-duplicate by a hash of them.
 * The walk's depth is bounded (a base pipeline naming itself through a
 * cycle of derivatives cannot recurse forever) and every object is added
 * once.
 */
#include "foz_state_private.h"

#include <limits.h>

/* The closure format's name and version (the first members of its JSON). */
#define CLOSURE_FORMAT  "kiln-foz-closure"
#define CLOSURE_VERSION 1
/* CLOSURE_VERSION as text (kiln__foz_closure_peek_tag). */
#define CLOSURE_TEXT_(v)     #v
#define CLOSURE_TEXT(v)      CLOSURE_TEXT_(v)
#define CLOSURE_VERSION_TEXT CLOSURE_TEXT(CLOSURE_VERSION)

/* How deep the walk may follow base pipelines and libraries. */
#define CLOSURE_MAX_DEPTH 16

/* Nesting depth allowed in an entry's JSON. */
#define STATE_JSON_DEPTH 64

struct idx_entry {
    uint64_t tag;
    uint64_t hash;
    uint8_t *data;
    size_t size;
    struct json_object *doc; /* parsed JSON of an object entry; NULL for modules and others */
    size_t order;            /* position in the archive (first of equal keys wins) */
};

struct kiln_foz_index {
    struct idx_entry *e;
    size_t n;
    struct kiln_foz_pipeline_ref *pipes;
    size_t npipes;
    struct kiln_foz_stats reader; /* what the reader met (damage), before its rewind */
};

/* The member of an entry's document that holds each tag's objects. */
static const char *const tag_member[] = {
    [KILN_FOZ_TAG_SAMPLER] = "samplers",
    [KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT] = "setLayouts",
    [KILN_FOZ_TAG_PIPELINE_LAYOUT] = "pipelineLayouts",
    [KILN_FOZ_TAG_RENDER_PASS] = "renderPasses",
    [KILN_FOZ_TAG_GRAPHICS_PIPELINE] = "graphicsPipelines",
    [KILN_FOZ_TAG_COMPUTE_PIPELINE] = "computePipelines",
    [KILN_FOZ_TAG_RAYTRACING_PIPELINE] = "raytracingPipelines",
};

static bool is_object_tag(uint64_t tag)
{
    return tag < KILN_ARRAY_LEN(tag_member) && tag_member[tag] != NULL;
}

const char *kiln__foz_tag_member(uint64_t tag)
{
    return is_object_tag(tag) ? tag_member[tag] : NULL;
}

static bool is_pipeline_tag(uint64_t tag)
{
    return tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE || tag == KILN_FOZ_TAG_COMPUTE_PIPELINE ||
           tag == KILN_FOZ_TAG_RAYTRACING_PIPELINE;
}

static int parse_doc(const uint8_t *p, size_t n, struct json_object **out)
{
    *out = NULL;
    if (n == 0 || n > (size_t)INT_MAX)
        return KILN_EPARSE;
    struct json_tokener *tok = json_tokener_new_ex(STATE_JSON_DEPTH);
    if (!tok)
        return KILN_ENOMEM;
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    struct json_object *obj = json_tokener_parse_ex(tok, (const char *)p, (int)n);
    enum json_tokener_error err = json_tokener_get_error(tok);
    json_tokener_free(tok);
    if (!obj || err != json_tokener_success || !json_object_is_type(obj, json_type_object)) {
        json_object_put(obj);
        return KILN_EPARSE;
    }
    *out = obj;
    return KILN_OK;
}

static int by_tag_hash(const void *a, const void *b)
{
    const struct idx_entry *x = a, *y = b;
    if (x->tag != y->tag)
        return x->tag < y->tag ? -1 : 1;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static const struct idx_entry *find(const struct kiln_foz_index *idx, uint64_t tag, uint64_t hash)
{
    size_t lo = 0, hi = idx->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct idx_entry *m = &idx->e[mid];
        if (m->tag < tag || (m->tag == tag && m->hash < hash))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < idx->n && idx->e[lo].tag == tag && idx->e[lo].hash == hash)
        return &idx->e[lo];
    return NULL;
}

void kiln_foz_index_destroy(struct kiln_foz_index *idx)
{
    if (!idx)
        return;
    for (size_t i = 0; i < idx->n; i++) {
        kiln__free(idx->e[i].data);
        json_object_put(idx->e[i].doc);
    }
    kiln__free(idx->e);
    kiln__free(idx->pipes);
    kiln__free(idx);
}

/* Reads every whole entry into idx->e, in archive order. */
static int read_entries(struct kiln_foz *foz, struct kiln_foz_index *idx)
{
    size_t cap = 0;
    struct kiln_foz_entry e;
    int rc;
    while ((rc = kiln_foz_next(foz, &e)) != 0) {
        if (rc == KILN_ECORRUPT_RECORD)
            continue;
        if (rc < 0)
            return rc;
        struct idx_entry *grown = kiln__grow(idx->e, idx->n, &cap, sizeof(*idx->e), 64);
        if (!grown)
            return KILN_ENOMEM;
        idx->e = grown;
        struct idx_entry *x = &idx->e[idx->n];
        memset(x, 0, sizeof(*x));
        x->tag = e.tag;
        x->hash = e.hash;
        x->size = e.size;
        x->order = idx->n;
        x->data = kiln__malloc(e.size ? e.size : 1);
        if (!x->data)
            return KILN_ENOMEM;
        memcpy(x->data, e.data, e.size);
        idx->n++;
    }
    return KILN_OK;
}

/* Sorts by (tag, hash), keeping the first of equal keys in archive order
 * (qsort is not stable: the order field breaks ties). */
static void sort_unique(struct kiln_foz_index *idx)
{
    if (idx->n > 1)
        qsort(idx->e, idx->n, sizeof(*idx->e), by_tag_hash);
    size_t w = 0;
    for (size_t i = 0; i < idx->n;) {
        size_t j = i + 1;
        while (j < idx->n && idx->e[j].tag == idx->e[i].tag && idx->e[j].hash == idx->e[i].hash)
            kiln__free(idx->e[j++].data);
        idx->e[w] = idx->e[i];
        w++;
        i = j;
    }
    idx->n = w;
}

int kiln_foz_index_create(struct kiln_foz *foz, struct kiln_foz_index **out)
{
    if (!foz || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_foz_index *idx = kiln__calloc(1, sizeof(*idx));
    if (!idx)
        return KILN_ENOMEM;
    int rc = kiln_foz_rewind(foz);
    if (rc == 0)
        rc = read_entries(foz, idx);
    idx->reader.size = sizeof(idx->reader);
    kiln_foz_get_stats(foz, &idx->reader);
    int rw = kiln_foz_rewind(foz);
    if (rc == 0)
        rc = rw;
    if (rc < 0) {
        kiln_foz_index_destroy(idx);
        return rc;
    }
    sort_unique(idx);
    for (size_t i = 0; i < idx->n; i++) {
        struct idx_entry *x = &idx->e[i];
        if (!is_object_tag(x->tag))
            continue;
        rc = parse_doc(x->data, x->size, &x->doc);
        if (rc < 0) {
            KILN_ERROR("foz", "%s: the %s entry %016" PRIx64 " is not valid JSON",
                       kiln_foz_name(foz), kiln_foz_tag_name(x->tag), x->hash);
            kiln_foz_index_destroy(idx);
            return rc;
        }
        if (is_pipeline_tag(x->tag))
            idx->npipes++;
    }
    if (idx->npipes) {
        idx->pipes = kiln__calloc(idx->npipes, sizeof(*idx->pipes));
        if (!idx->pipes) {
            kiln_foz_index_destroy(idx);
            return KILN_ENOMEM;
        }
        size_t k = 0;
        for (size_t i = 0; i < idx->n; i++)
            if (is_pipeline_tag(idx->e[i].tag))
                idx->pipes[k++] = (struct kiln_foz_pipeline_ref){idx->e[i].tag, idx->e[i].hash};
    }
    *out = idx;
    return KILN_OK;
}

void kiln__foz_index_reader_stats(const struct kiln_foz_index *idx, struct kiln_foz_stats *stats)
{
    *stats = idx->reader;
}

size_t kiln_foz_index_pipelines(const struct kiln_foz_index *idx,
                                const struct kiln_foz_pipeline_ref **out)
{
    if (!idx || !out)
        return 0;
    *out = idx->pipes;
    return idx->npipes;
}

int kiln_foz_index_module(const struct kiln_foz_index *idx, uint64_t hash,
                          struct kiln_foz_module *module)
{
    if (!idx || !module)
        return KILN_EINVAL;
    const struct idx_entry *x = find(idx, KILN_FOZ_TAG_SHADER_MODULE, hash);
    if (!x)
        return KILN_ENOTFOUND;
    struct kiln_foz_entry e = {
        .tag = x->tag, .hash = x->hash, .data = x->data, .size = x->size, .offset = 0};
    return kiln_foz_decode_module(&e, module);
}

/* ---------------------------------------------------------------------------
 * Closures
 * ------------------------------------------------------------------------ */

struct walk {
    const struct kiln_foz_index *idx;
    struct json_object *out;     /* the closure document */
    struct json_object *modules; /* array of module hash strings, each once */
};

static void hash_text(uint64_t h, char out[17])
{
    snprintf(out, 17, "%016" PRIx64, h);
}

/* Parses a JSON string of 1..16 hexadecimal digits. */
static bool json_hash(struct json_object *v, uint64_t *out)
{
    if (!json_object_is_type(v, json_type_string))
        return false;
    return kiln__foz_parse_hex(json_object_get_string(v), (size_t)json_object_get_string_len(v),
                               out);
}

/* Finds the recorded object `hash` of `tag` in the index: its member name
 * (renderPasses or renderPasses2 for a render pass) and its JSON. */
static int lookup(const struct kiln_foz_index *idx, uint64_t tag, uint64_t hash,
                  const char **member, struct json_object **obj)
{
    const struct idx_entry *x = find(idx, tag, hash);
    if (!x || !x->doc) {
        KILN_DEBUG("foz", "closure: no %s %016" PRIx64 " in the archive", kiln_foz_tag_name(tag),
                   hash);
        return KILN_ENOTFOUND;
    }
    char name[17];
    hash_text(hash, name);
    const char *keys[2] = {tag_member[tag],
                           tag == KILN_FOZ_TAG_RENDER_PASS ? "renderPasses2" : NULL};
    for (int i = 0; i < 2 && keys[i]; i++) {
        struct json_object *dict, *o;
        if (json_object_object_get_ex(x->doc, keys[i], &dict) &&
            json_object_is_type(dict, json_type_object) &&
            json_object_object_get_ex(dict, name, &o) && json_object_is_type(o, json_type_object)) {
            *member = keys[i];
            *obj = o;
            return KILN_OK;
        }
    }
    KILN_DEBUG("foz", "closure: the %s entry %016" PRIx64 " does not hold its object",
               kiln_foz_tag_name(tag), hash);
    return KILN_ENOTFOUND;
}

/* Adds a deep copy of `obj` as out[member][hash]. @return 1 when added, 0
 * when it was there already. */
static int add_copy(struct walk *w, const char *member, uint64_t hash, struct json_object *obj)
{
    struct json_object *dict;
    if (!json_object_object_get_ex(w->out, member, &dict)) {
        dict = json_object_new_object();
        if (!dict || json_object_object_add(w->out, member, dict) < 0) {
            json_object_put(dict);
            return KILN_ENOMEM;
        }
    }
    char name[17];
    hash_text(hash, name);
    if (json_object_object_get_ex(dict, name, NULL))
        return 0;
    struct json_object *copy = NULL;
    if (json_object_deep_copy(obj, &copy, NULL) < 0)
        return KILN_ENOMEM;
    if (json_object_object_add(dict, name, copy) < 0) {
        json_object_put(copy);
        return KILN_ENOMEM;
    }
    return 1;
}

static int walk_object(struct walk *w, uint64_t tag, uint64_t hash, int depth);

/* Follows a JSON string naming an object of `tag`; 0 names none. */
static int follow(struct walk *w, struct json_object *ref, uint64_t tag, int depth)
{
    uint64_t h;
    if (!ref)
        return KILN_OK;
    if (!json_hash(ref, &h))
        return KILN_EPARSE;
    if (h == 0)
        return KILN_OK;
    return walk_object(w, tag, h, depth);
}

static int note_module(struct walk *w, struct json_object *ref)
{
    uint64_t h;
    if (!ref || !json_hash(ref, &h))
        return KILN_EPARSE;
    char name[17];
    hash_text(h, name);
    size_t n = json_object_array_length(w->modules);
    for (size_t i = 0; i < n; i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(w->modules, i)), name) == 0)
            return KILN_OK;
    struct json_object *s = json_object_new_string(name);
    if (!s || json_object_array_add(w->modules, s) < 0) {
        json_object_put(s);
        return KILN_ENOMEM;
    }
    return KILN_OK;
}

static struct json_object *get(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static size_t array_len(struct json_object *a)
{
    return json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}

/* The pipeline libraries a pipeline's pNext names (VkPipelineLibraryCreateInfoKHR). */
#define STYPE_PIPELINE_LIBRARY 1000290000

/* The number of "libraries" arrays `p` has: one per library info in its
 * pNext, and a ray-tracing pipeline's "libraryInfo". */
static size_t library_lists(struct json_object *p)
{
    struct json_object *pnext = get(p, "pNext");
    size_t n = get(p, "libraryInfo") != NULL;
    for (size_t i = 0; i < array_len(pnext); i++)
        n += json_object_get_int64(get(json_object_array_get_idx(pnext, i), "sType")) ==
             STYPE_PIPELINE_LIBRARY;
    return n;
}

/* The `which`th "libraries" array of `p` (library_lists), or NULL. */
static struct json_object *library_list(struct json_object *p, size_t which)
{
    struct json_object *pnext = get(p, "pNext");
    size_t seen = 0;
    for (size_t i = 0; i < array_len(pnext); i++) {
        struct json_object *s = json_object_array_get_idx(pnext, i);
        if (json_object_get_int64(get(s, "sType")) == STYPE_PIPELINE_LIBRARY && seen++ == which)
            return get(s, "libraries");
    }
    return get(get(p, "libraryInfo"), "libraries");
}

int kiln__foz_pipeline_libraries(struct json_object *pipe, uint64_t *out, uint32_t cap, uint32_t *n)
{
    *n = 0;
    for (size_t w = 0; w < library_lists(pipe); w++) {
        struct json_object *libs = library_list(pipe, w);
        for (size_t k = 0; k < array_len(libs); k++) {
            uint64_t h;
            if (!json_hash(json_object_array_get_idx(libs, k), &h))
                return KILN_EPARSE;
            if (*n < cap)
                out[*n] = h;
            ++*n;
        }
    }
    return KILN_OK;
}

static int walk_pipeline(struct walk *w, uint64_t tag, struct json_object *p, int depth)
{
    KILN_TRY(follow(w, get(p, "layout"), KILN_FOZ_TAG_PIPELINE_LAYOUT, depth));
    if (tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE)
        KILN_TRY(follow(w, get(p, "renderPass"), KILN_FOZ_TAG_RENDER_PASS, depth));
    KILN_TRY(follow(w, get(p, "basePipelineHandle"), tag, depth + 1));
    if (tag == KILN_FOZ_TAG_COMPUTE_PIPELINE) {
        KILN_TRY(note_module(w, get(get(p, "stage"), "module")));
    } else {
        struct json_object *stages = get(p, "stages");
        for (size_t i = 0; i < array_len(stages); i++)
            KILN_TRY(note_module(w, get(json_object_array_get_idx(stages, i), "module")));
    }
    for (size_t k = 0; k < library_lists(p); k++) {
        struct json_object *libs = library_list(p, k);
        for (size_t i = 0; i < array_len(libs); i++)
            KILN_TRY(follow(w, json_object_array_get_idx(libs, i), tag, depth + 1));
    }
    return KILN_OK;
}

static int walk_object(struct walk *w, uint64_t tag, uint64_t hash, int depth)
{
    if (depth > CLOSURE_MAX_DEPTH)
        return KILN_EPARSE;
    const char *member;
    struct json_object *obj;
    KILN_TRY(lookup(w->idx, tag, hash, &member, &obj));
    int added = add_copy(w, member, hash, obj);
    if (added <= 0)
        return added;
    switch (tag) {
    case KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT: {
        struct json_object *bindings = get(obj, "bindings");
        for (size_t i = 0; i < array_len(bindings); i++) {
            struct json_object *imm =
                get(json_object_array_get_idx(bindings, i), "immutableSamplers");
            for (size_t k = 0; k < array_len(imm); k++)
                KILN_TRY(follow(w, json_object_array_get_idx(imm, k), KILN_FOZ_TAG_SAMPLER, depth));
        }
        break;
    }
    case KILN_FOZ_TAG_PIPELINE_LAYOUT: {
        struct json_object *sets = get(obj, "setLayouts");
        for (size_t i = 0; i < array_len(sets); i++)
            KILN_TRY(follow(w, json_object_array_get_idx(sets, i),
                            KILN_FOZ_TAG_DESCRIPTOR_SET_LAYOUT, depth));
        break;
    }
    case KILN_FOZ_TAG_GRAPHICS_PIPELINE:
    case KILN_FOZ_TAG_COMPUTE_PIPELINE:
    case KILN_FOZ_TAG_RAYTRACING_PIPELINE:
        KILN_TRY(walk_pipeline(w, tag, obj, depth));
        break;
    default:
        /* Samplers carry their YCbCr conversion inline (in pNext), and
         * render passes reference nothing. */
        break;
    }
    return KILN_OK;
}

static const char *kind_name(uint64_t tag)
{
    switch (tag) {
    case KILN_FOZ_TAG_GRAPHICS_PIPELINE:
        return "graphics";
    case KILN_FOZ_TAG_COMPUTE_PIPELINE:
        return "compute";
    default:
        return "raytracing";
    }
}

int kiln_foz_closure_make(const struct kiln_foz_index *idx, uint64_t tag, uint64_t hash,
                          uint8_t **bytes, size_t *size)
{
    if (!idx || !bytes || !size)
        return KILN_EINVAL;
    *bytes = NULL;
    *size = 0;
    if (!is_pipeline_tag(tag))
        return KILN_EINVAL;
    struct walk w = {
        .idx = idx, .out = json_object_new_object(), .modules = json_object_new_array()};
    char name[17];
    hash_text(hash, name);
    int rc = KILN_ENOMEM;
    if (!w.out || !w.modules)
        goto out;
    if (json_object_object_add(w.out, "format", json_object_new_string(CLOSURE_FORMAT)) < 0 ||
        json_object_object_add(w.out, "version", json_object_new_int(CLOSURE_VERSION)) < 0 ||
        json_object_object_add(w.out, "kind", json_object_new_string(kind_name(tag))) < 0 ||
        json_object_object_add(w.out, "pipeline", json_object_new_string(name)) < 0)
        goto out;
    rc = walk_object(&w, tag, hash, 0);
    if (rc < 0)
        goto out;
    rc = KILN_ENOMEM;
    if (json_object_object_add(w.out, "shaderModules", w.modules) < 0)
        goto out;
    w.modules = NULL;
    size_t n;
    const char *text = json_object_to_json_string_length(w.out, JSON_C_TO_STRING_PLAIN, &n);
    if (!text)
        goto out;
    *bytes = kiln__malloc(n);
    if (!*bytes)
        goto out;
    memcpy(*bytes, text, n);
    *size = n;
    rc = KILN_OK;
out:
    json_object_put(w.modules);
    json_object_put(w.out);
    return rc;
}

void kiln_foz_closure_free(uint8_t *bytes)
{
    kiln__free(bytes);
}

uint64_t kiln__foz_closure_peek_tag(const void *bytes, size_t size)
{
    /* json-c's plain printer, members in the order closure_make adds them. */
    static const char head[] =
        "{\"format\":\"" CLOSURE_FORMAT "\",\"version\":" CLOSURE_VERSION_TEXT ",\"kind\":\"";
    static const struct {
        const char *word;
        uint64_t tag;
    } kinds[] = {{"graphics\"", KILN_FOZ_TAG_GRAPHICS_PIPELINE},
                 {"compute\"", KILN_FOZ_TAG_COMPUTE_PIPELINE},
                 {"raytracing\"", KILN_FOZ_TAG_RAYTRACING_PIPELINE}};
    size_t hn = sizeof(head) - 1;
    if (!bytes || size < hn || memcmp(bytes, head, hn) != 0)
        return 0;
    const char *rest = (const char *)bytes + hn;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        size_t wn = strlen(kinds[i].word);
        if (size - hn >= wn && memcmp(rest, kinds[i].word, wn) == 0)
            return kinds[i].tag;
    }
    return 0;
}

/* Parses a closure and finds its pipeline; used by the builder too. */
int kiln__foz_closure_parse(const void *bytes, size_t size, struct json_object **doc, uint64_t *tag,
                            uint64_t *hash, struct json_object **pipeline)
{
    *doc = NULL;
    struct json_object *d;
    if (parse_doc(bytes, size, &d) < 0)
        return KILN_EFORMAT;
    struct json_object *fmt = get(d, "format"), *ver = get(d, "version");
    if (!fmt || strcmp(json_object_get_string(fmt), CLOSURE_FORMAT) != 0 ||
        !json_object_is_type(ver, json_type_int) || json_object_get_int(ver) != CLOSURE_VERSION) {
        json_object_put(d);
        return KILN_EFORMAT;
    }
    const char *kind = json_object_get_string(get(d, "kind"));
    uint64_t t = kind && strcmp(kind, "graphics") == 0     ? KILN_FOZ_TAG_GRAPHICS_PIPELINE
                 : kind && strcmp(kind, "compute") == 0    ? KILN_FOZ_TAG_COMPUTE_PIPELINE
                 : kind && strcmp(kind, "raytracing") == 0 ? KILN_FOZ_TAG_RAYTRACING_PIPELINE
                                                           : 0;
    uint64_t h;
    struct json_object *p = NULL;
    if (t == 0 || !json_hash(get(d, "pipeline"), &h) ||
        !(p = get(get(d, tag_member[t]), json_object_get_string(get(d, "pipeline")))) ||
        !json_object_is_type(p, json_type_object)) {
        json_object_put(d);
        return KILN_EPARSE;
    }
    *doc = d;
    *tag = t;
    *hash = h;
    *pipeline = p;
    return KILN_OK;
}

/* The walk of kiln__foz_closure_stages: the pipelines met so far. */
struct stage_walk {
    struct json_object *doc;
    uint64_t tag;
    struct json_object **recs;
    uint32_t cap, n;
    uint64_t seen[KILN__FOZ_MAX_LIBRARIES];
    uint32_t nseen;
};

static int stages_of(struct stage_walk *w, struct json_object *p, int depth)
{
    if (depth > CLOSURE_MAX_DEPTH)
        return KILN_ERANGE;
    if (w->tag == KILN_FOZ_TAG_COMPUTE_PIPELINE) {
        if (get(p, "stage")) {
            if (w->n == w->cap)
                return KILN_ERANGE;
            w->recs[w->n++] = get(p, "stage");
        }
    } else {
        struct json_object *stages = get(p, "stages");
        for (size_t i = 0; i < array_len(stages); i++) {
            if (w->n == w->cap)
                return KILN_ERANGE;
            w->recs[w->n++] = json_object_array_get_idx(stages, i);
        }
    }
    uint64_t libs[KILN__FOZ_MAX_LIBRARIES];
    uint32_t nlibs;
    KILN_TRY(kiln__foz_pipeline_libraries(p, libs, KILN__FOZ_MAX_LIBRARIES, &nlibs));
    if (nlibs > KILN__FOZ_MAX_LIBRARIES)
        return KILN_ERANGE;
    for (uint32_t i = 0; i < nlibs; i++) {
        bool seen = false;
        for (uint32_t k = 0; k < w->nseen && !seen; k++)
            seen = w->seen[k] == libs[i];
        if (seen)
            continue;
        if (w->nseen == KILN__FOZ_MAX_LIBRARIES)
            return KILN_ERANGE;
        w->seen[w->nseen++] = libs[i];
        char name[17];
        hash_text(libs[i], name);
        struct json_object *lib = get(get(w->doc, tag_member[w->tag]), name);
        if (!json_object_is_type(lib, json_type_object))
            return KILN_EPARSE;
        KILN_TRY(stages_of(w, lib, depth + 1));
    }
    return KILN_OK;
}

int kiln__foz_closure_stages(struct json_object *doc, uint64_t tag, struct json_object *pipe,
                             struct json_object **recs, uint32_t cap, uint32_t *n)
{
    struct stage_walk w = {.doc = doc, .tag = tag, .recs = recs, .cap = cap};
    int rc = stages_of(&w, pipe, 0);
    *n = w.n;
    return rc;
}

/* kiln_foz_closure_inspect into the library's own *info (zeroed, size set). */
static int inspect(const void *bytes, size_t size, struct kiln_foz_closure_info *info)
{
    struct json_object *doc, *p;
    KILN_TRY(kiln__foz_closure_parse(bytes, size, &doc, &info->tag, &info->hash, &p));
    struct json_object *recs[KILN_FOZ_MAX_STAGES];
    uint32_t n;
    int rc = kiln__foz_closure_stages(doc, info->tag, p, recs, KILN_FOZ_MAX_STAGES, &n);
    if (rc < 0)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        struct json_object *st = get(recs[i], "stage");
        if (!json_object_is_type(st, json_type_int) ||
            !json_hash(get(recs[i], "module"), &info->modules[i])) {
            rc = KILN_EPARSE;
            goto out;
        }
        info->stages[i] = (uint32_t)json_object_get_int64(st);
    }
    info->stage_count = (uint32_t)n;
out:
    json_object_put(doc);
    return rc;
}

int kiln_foz_closure_inspect(const void *bytes, size_t size, struct kiln_foz_closure_info *info)
{
    if (!bytes || !info)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(info, "kiln_foz_closure_info"));
    struct kiln_foz_closure_info own = KILN_FOZ_CLOSURE_INFO_INIT;
    memset(&own, 0, sizeof(own));
    own.size = sizeof(own);
    int rc = inspect(bytes, size, &own);
    KILN_STRUCT_OUT(info, &own);
    return rc;
}

int kiln_foz_pipeline_key(const void *closure, size_t size, const struct kiln_foz_module *modules,
                          uint32_t n, struct kiln_key *key)
{
    if (!closure || !key || (!modules && n))
        return KILN_EINVAL;
    static const char prefix[] = "foz-pipeline";
    /* One buffer: the prefix (with its NUL), the closure, then 8 + 16
     * bytes a module. Closures are a few KiB; modules enter as digests. */
    size_t total = sizeof(prefix) + size + (size_t)n * 24;
    uint8_t *buf = kiln__malloc(total);
    if (!buf)
        return KILN_ENOMEM;
    uint8_t *p = buf;
    memcpy(p, prefix, sizeof(prefix));
    p += sizeof(prefix);
    memcpy(p, closure, size);
    p += size;
    for (uint32_t i = 0; i < n; i++) {
        struct kiln_key d = kiln_hash128(modules[i].words, modules[i].word_count * 4);
        uint64_t v[3] = {modules[i].word_count, d.lo, d.hi};
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 8; k++)
                *p++ = (uint8_t)(v[j] >> (8 * k));
    }
    *key = kiln_hash128(buf, total);
    kiln__free(buf);
    return KILN_OK;
}

/* ---------------------------------------------------------------------------
 * Base64 (specialization data)
 * ------------------------------------------------------------------------ */

static int base64_value(int ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

bool kiln__foz_base64_decode(const char *s, size_t n, uint8_t *out, size_t want)
{
    size_t got = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=')
            break;
        int v = base64_value((unsigned char)s[i]);
        if (v < 0)
            return false;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (got == want)
                return false;
            out[got++] = (uint8_t)(acc >> bits);
        }
    }
    return got == want;
}

/* A recorded handle: a hash in hexadecimal text, or absent (0). */
bool kiln__fb_hash_of(struct json_object *v, uint64_t *out)
{
    *out = 0;
    if (!v)
        return true;
    if (!json_object_is_type(v, json_type_string))
        return false;
    return kiln__foz_parse_hex(json_object_get_string(v), (size_t)json_object_get_string_len(v),
                               out);
}
