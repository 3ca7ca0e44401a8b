/*
 * foz_module.c - shader modules of Fossilize archives: decoding their
 * SPIR-V, and finding the stages pipelines use them in.
 *
 * Design. A shader module entry is the JSON of its VkShaderModuleCreateInfo
 * ({"version":6,"shaderModules":{"<hash>":{"flags":F,"codeSize":S,
 * "varintOffset":O,"varintSize":V}}}), a NUL, and then a binary area in
 * which V bytes at O hold the codeSize / 4 SPIR-V words, each coded 7 bits
 * at a time from the low bits up, the top bit of a byte set when another
 * byte of the same word follows (1 to 5 bytes a word).
 *
 * Invariants:
 *  - JSON is parsed by json-c only, from an explicit length (the bytes
 *    before the first NUL), and must be one value with nothing but blanks
 *    after it.
 *  - Every number taken from the JSON is checked against the entry before
 *    it is used: O + V lies inside the binary area, and the word count is
 *    at most V (a word takes at least one byte), so the words allocated
 *    are bounded by the entry's own size, whatever codeSize claims.
 *  - The decoder reads exactly V bytes into exactly codeSize / 4 words; a
 *    word of more than 32 bits, a stream that ends inside a word, bytes
 *    left over, or a first word that is not the SPIR-V magic number is a
 *    parse error, never a short or padded module.
 *  - Stages come from pipeline entries only (a module does not say its
 *    stage). The listing reads the archive once, collecting module hashes
 *    and (module, stage) references, then joins them after sorting both:
 *    pipelines may come before or after the modules they name.
 */
#include "foz_private.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>

#define SPIRV_MAGIC 0x07230203u

/* Nesting depth allowed in an entry's JSON: Fossilize's deepest objects
 * (pNext chains inside pipeline states) are far shallower. */
#define FOZ_JSON_DEPTH 64

/*
 * Parses `n` bytes of JSON into *out (release with json_object_put).
 * @return 0, KILN_EPARSE or KILN_ENOMEM.
 */
static int parse_json(const uint8_t *p, size_t n, struct json_object **out)
{
    *out = NULL;
    if (n == 0 || n > (size_t)INT_MAX)
        return KILN_EPARSE;
    struct json_tokener *tok = json_tokener_new_ex(FOZ_JSON_DEPTH);
    if (!tok)
        return KILN_ENOMEM;
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    struct json_object *obj = json_tokener_parse_ex(tok, (const char *)p, (int)n);
    enum json_tokener_error err = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!obj || err != json_tokener_success) {
        json_object_put(obj);
        return KILN_EPARSE;
    }
    for (size_t i = end; i < n; i++) {
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') {
            json_object_put(obj);
            return KILN_EPARSE;
        }
    }
    *out = obj;
    return KILN_OK;
}

/* Gets member `key` of `obj` as an object (or array, by `type`). */
static struct json_object *member(struct json_object *obj, const char *key, enum json_type type)
{
    struct json_object *v;
    if (!json_object_is_type(obj, json_type_object) || !json_object_object_get_ex(obj, key, &v) ||
        !json_object_is_type(v, type))
        return NULL;
    return v;
}

/*
 * Gets member `key` of `obj` as a non-negative integer of at most `max`.
 * @return 0, KILN_ENOTFOUND when absent, KILN_EPARSE when of another kind.
 */
static int member_uint(struct json_object *obj, const char *key, uint64_t max, uint64_t *out)
{
    struct json_object *v;
    if (!json_object_object_get_ex(obj, key, &v))
        return KILN_ENOTFOUND;
    if (!json_object_is_type(v, json_type_int))
        return KILN_EPARSE;
    int64_t i = json_object_get_int64(v);
    if (i < 0 || (uint64_t)i > max)
        return KILN_EPARSE;
    *out = (uint64_t)i;
    return KILN_OK;
}

/* Parses a hash written as a JSON string of 1 to 16 hexadecimal digits. */
static bool string_hash(struct json_object *v, uint64_t *out)
{
    if (!json_object_is_type(v, json_type_string))
        return false;
    return kiln__foz_parse_hex(json_object_get_string(v), (size_t)json_object_get_string_len(v),
                               out);
}

/* Decodes exactly `count` words from exactly `n` varint bytes. */
static bool decode_varint(const uint8_t *p, size_t n, uint32_t *words, size_t count)
{
    size_t off = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t w = 0;
        for (unsigned shift = 0;; shift += 7) {
            if (off == n)
                return false;
            uint8_t b = p[off++];
            /* The fifth byte holds the top 4 bits and ends the word. */
            if (shift == 28 && (b & 0xf0) != 0)
                return false;
            w |= (uint32_t)(b & 0x7f) << shift;
            if ((b & 0x80) == 0)
                break;
        }
        words[i] = w;
    }
    return off == n;
}

static int module_error(uint64_t hash, int rc, const char *why)
{
    KILN_DEBUG("foz", "shader module %016" PRIx64 ": %s", hash, why);
    return rc;
}

int kiln_foz_decode_module(const struct kiln_foz_entry *e, struct kiln_foz_module *m)
{
    if (!e || !m)
        return KILN_EINVAL;
    memset(m, 0, sizeof(*m));
    if (!e || e->tag != KILN_FOZ_TAG_SHADER_MODULE || (!e->data && e->size))
        return KILN_EINVAL;

    const uint8_t *nul = e->size ? memchr(e->data, 0, e->size) : NULL;
    size_t json_n = nul ? (size_t)(nul - e->data) : e->size;
    const uint8_t *bin = nul ? nul + 1 : NULL;
    size_t bin_n = nul ? e->size - json_n - 1 : 0;

    struct json_object *root;
    int rc = parse_json(e->data, json_n, &root);
    if (rc < 0)
        return module_error(e->hash, rc, "its JSON does not parse");

    struct json_object *mods = member(root, "shaderModules", json_type_object);
    if (!mods || json_object_object_length(mods) != 1) {
        json_object_put(root);
        return module_error(e->hash, KILN_EPARSE, "no single object in \"shaderModules\"");
    }
    struct json_object_iterator it = json_object_iter_begin(mods);
    const char *key = json_object_iter_peek_name(&it);
    struct json_object *mod = json_object_iter_peek_value(&it);
    uint64_t hash, code_size, flags = 0, voff = 0, vsize = 0;
    if (!kiln__foz_parse_hex(key, strlen(key), &hash) || hash != e->hash) {
        json_object_put(root);
        return module_error(e->hash, KILN_EPARSE, "its JSON names another hash than its entry");
    }
    if (!json_object_is_type(mod, json_type_object) ||
        member_uint(mod, "codeSize", UINT64_MAX, &code_size) < 0 ||
        member_uint(mod, "flags", UINT32_MAX, &flags) == KILN_EPARSE) {
        json_object_put(root);
        return module_error(e->hash, KILN_EPARSE, "no valid codeSize or flags");
    }
    int ro = member_uint(mod, "varintOffset", UINT64_MAX, &voff);
    int rs = member_uint(mod, "varintSize", UINT64_MAX, &vsize);
    bool base64 = json_object_object_get_ex(mod, "code", NULL);
    json_object_put(root);
    if (ro == KILN_ENOTFOUND && rs == KILN_ENOTFOUND && base64)
        return module_error(e->hash, KILN_ENOTSUP, "code stored as base64 text (old form)");
    if (ro < 0 || rs < 0)
        return module_error(e->hash, KILN_EPARSE, "no valid varintOffset and varintSize");
    if (voff > bin_n || vsize > bin_n - voff)
        return module_error(e->hash, KILN_EPARSE, "varint area lies outside the entry");
    if (code_size == 0 || code_size % 4 != 0 || code_size / 4 > vsize)
        return module_error(e->hash, KILN_EPARSE, "codeSize does not fit its varint area");

    size_t count = (size_t)(code_size / 4);
    uint32_t *words = kiln__malloc(count * sizeof(uint32_t));
    if (!words)
        return KILN_ENOMEM;
    if (!decode_varint(bin + voff, (size_t)vsize, words, count)) {
        kiln__free(words);
        return module_error(e->hash, KILN_EPARSE, "varint stream does not hold codeSize bytes");
    }
    if (words[0] != SPIRV_MAGIC) {
        kiln__free(words);
        return module_error(e->hash, KILN_EPARSE, "not SPIR-V (wrong magic number)");
    }
    m->hash = e->hash;
    m->flags = (uint32_t)flags;
    m->words = words;
    m->word_count = count;
    return KILN_OK;
}

void kiln_foz_module_free(struct kiln_foz_module *m)
{
    if (!m)
        return;
    kiln__free(m->words);
    memset(m, 0, sizeof(*m));
}

/* ---------------------------------------------------------------------------
 * Stages
 * ------------------------------------------------------------------------ */

/* A growing array of (hash, stages) pairs. */
struct infos {
    struct kiln_foz_module_info *v;
    size_t n, cap;
};

static int push(struct infos *a, uint64_t hash, uint32_t stages)
{
    struct kiln_foz_module_info *v = kiln__grow(a->v, a->n, &a->cap, sizeof(*v), 64);
    if (!v)
        return KILN_ENOMEM;
    a->v = v;
    a->v[a->n].hash = hash;
    a->v[a->n].stages = stages;
    a->n++;
    return KILN_OK;
}

static int by_hash(const void *a, const void *b)
{
    uint64_t x = ((const struct kiln_foz_module_info *)a)->hash;
    uint64_t y = ((const struct kiln_foz_module_info *)b)->hash;
    return x < y ? -1 : x > y;
}

/* Records the module one VkPipelineShaderStageCreateInfo names. */
static int collect_stage(struct json_object *st, struct infos *refs)
{
    uint64_t stage, module;
    struct json_object *mv;
    if (!json_object_is_type(st, json_type_object) ||
        member_uint(st, "stage", UINT32_MAX, &stage) < 0 ||
        !json_object_object_get_ex(st, "module", &mv) || !string_hash(mv, &module))
        return KILN_EPARSE;
    /* Hash 0 is VK_NULL_HANDLE: the code came another way (pNext). */
    if (module == 0)
        return KILN_OK;
    return push(refs, module, (uint32_t)stage);
}

/* Records every stage of every pipeline in one pipeline entry. */
static int collect_pipelines(const struct kiln_foz_entry *e, struct infos *refs)
{
    const char *key = e->tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE  ? "graphicsPipelines"
                      : e->tag == KILN_FOZ_TAG_COMPUTE_PIPELINE ? "computePipelines"
                                                                : "raytracingPipelines";
    const uint8_t *nul = e->size ? memchr(e->data, 0, e->size) : NULL;
    struct json_object *root;
    KILN_TRY(parse_json(e->data, nul ? (size_t)(nul - e->data) : e->size, &root));
    struct json_object *pipes = member(root, key, json_type_object);
    if (!pipes) {
        json_object_put(root);
        return KILN_EPARSE;
    }
    int rc = KILN_OK;
    struct json_object_iterator it = json_object_iter_begin(pipes);
    struct json_object_iterator end = json_object_iter_end(pipes);
    for (; rc == KILN_OK && !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
        struct json_object *p = json_object_iter_peek_value(&it);
        if (e->tag == KILN_FOZ_TAG_COMPUTE_PIPELINE) {
            struct json_object *st = member(p, "stage", json_type_object);
            rc = st ? collect_stage(st, refs) : KILN_EPARSE;
            continue;
        }
        struct json_object *stages;
        if (!json_object_is_type(p, json_type_object)) {
            rc = KILN_EPARSE;
        } else if (json_object_object_get_ex(p, "stages", &stages)) {
            /* A pipeline library part may have no stages at all. */
            if (!json_object_is_type(stages, json_type_array)) {
                rc = KILN_EPARSE;
                continue;
            }
            size_t n = json_object_array_length(stages);
            for (size_t i = 0; rc == KILN_OK && i < n; i++)
                rc = collect_stage(json_object_array_get_idx(stages, i), refs);
        }
    }
    json_object_put(root);
    return rc;
}

int64_t kiln_foz_list_modules(struct kiln_foz *foz, struct kiln_foz_module_info **out)
{
    if (!foz || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct infos mods = {0}, refs = {0};
    struct kiln_foz_entry e;
    int rc = kiln_foz_rewind(foz);
    while (rc >= 0 && (rc = kiln_foz_next(foz, &e)) != 0) {
        if (rc == KILN_ECORRUPT_RECORD) {
            rc = KILN_OK; /* logged and counted by the reader */
            continue;
        }
        if (rc == KILN_ECORRUPT) {
            rc = KILN_OK; /* the framing broke: list what came before it */
            break;
        }
        if (rc < 0)
            break;
        rc = KILN_OK;
        if (e.tag == KILN_FOZ_TAG_SHADER_MODULE) {
            rc = push(&mods, e.hash, 0);
        } else if (e.tag == KILN_FOZ_TAG_GRAPHICS_PIPELINE ||
                   e.tag == KILN_FOZ_TAG_COMPUTE_PIPELINE ||
                   e.tag == KILN_FOZ_TAG_RAYTRACING_PIPELINE) {
            size_t before = refs.n;
            int prc = collect_pipelines(&e, &refs);
            if (prc == KILN_ENOMEM) {
                rc = prc;
            } else if (prc < 0) {
                refs.n = before; /* use all of a pipeline entry or none of it */
                KILN_WARN("foz",
                          "%s: %s at offset %" PRIu64 " (hash %016" PRIx64
                          ") does not parse; the stages it names stay unknown",
                          kiln_foz_name(foz), kiln_foz_tag_name(e.tag), e.offset, e.hash);
            }
        }
    }
    int rw = kiln_foz_rewind(foz);
    if (rc == KILN_OK)
        rc = rw;
    if (rc < 0) {
        kiln__free(mods.v);
        kiln__free(refs.v);
        return rc;
    }

    /* One element per distinct module, then the references joined in. */
    if (mods.n > 1)
        qsort(mods.v, mods.n, sizeof(*mods.v), by_hash);
    size_t n = 0;
    for (size_t i = 0; i < mods.n; i++)
        if (n == 0 || mods.v[n - 1].hash != mods.v[i].hash)
            mods.v[n++] = mods.v[i];
    for (size_t i = 0; i < refs.n; i++) {
        struct kiln_foz_module_info *m =
            (struct kiln_foz_module_info *)kiln_foz_module_list_find(mods.v, n, refs.v[i].hash);
        if (m)
            m->stages |= refs.v[i].stages;
    }
    kiln__free(refs.v);
    if (n == 0) {
        kiln__free(mods.v);
        return 0;
    }
    *out = mods.v;
    return (int64_t)n;
}

void kiln_foz_module_list_free(struct kiln_foz_module_info *modules)
{
    kiln__free(modules);
}

const struct kiln_foz_module_info *
kiln_foz_module_list_find(const struct kiln_foz_module_info *modules, size_t count, uint64_t hash)
{
    if ((!modules && count))
        return NULL;
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (modules[mid].hash < hash)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < count && modules[lo].hash == hash ? &modules[lo] : NULL;
}
