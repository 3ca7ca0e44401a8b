/*
 * program_seal.c - sealing a program: check, pack, join, key.
 *
 * Design. kiln_program_seal is the one sequence that turns a program into
 * the payload a cache stores (kiln_prepare, kiln_cache_put_program, kiln
 * import foz and an emulator all come here):
 *
 *   1. every stage's SPIR-V is checked (kiln_vk_validate_spirv). A module
 *      the validator refuses is refused with one line, unless the modules
 *      were recorded from a working application and it parses
 *      (KILN_PROGRAM_RECORDED_SPIRV): then it is kept, the payload is not
 *      marked validated, and the open before a build checks it again;
 *   2. every stage is packed (kiln_pack) and joined, with its entry point,
 *      specialization and the program's state, into one payload, marked
 *      KILN_PAYLOAD_VALIDATED only when the validator passed every stage
 *      (a build without SPIRV-Tools stores what passes the framing check,
 *      unmarked: the open refuses to hand it to a driver);
 *   3. the key is the program's own (has_key) or kiln_program_key's.
 *
 * Nothing is kept between calls; every buffer made here is freed here but
 * the payload, which is the caller's.
 */
#include "program_internal.h"

#include <stdio.h>
#include <string.h>

static const char *stage_label(const struct kiln_program_stage *st)
{
    return st->src.name ? st->src.name : "?";
}

/* Checks every stage (step 1). @return 0 with s->validated,
 * s->recorded_invalid and (for the first kept module) s->why, or the
 * refusal with s->why, logged unless `quiet`. */
static int check_stages(const struct kiln_program *p, const char *name, bool recorded, bool quiet,
                        struct kiln_program_sealed *s)
{
    s->validated = true;
    for (unsigned i = 0; i < p->nstages; i++) {
        const struct kiln_program_stage *st = &p->stages[i];
        const char *stage = kiln_vk_stage_name(st->src.stage);
        char why[384];
        if (st->nwords > KILN_PACK_MAX_SPIRV_BYTES / 4) {
            snprintf(s->why, sizeof(s->why),
                     "its %s module %s: %zu bytes of SPIR-V, more than kiln stores (%u)", stage,
                     stage_label(st), st->nwords * 4, KILN_PACK_MAX_SPIRV_BYTES);
            if (!quiet)
                KILN_WARN("program", "%s: not stored: %s", name, s->why);
            return KILN_ERANGE; /* not validated: it could not be stored anyway */
        }
        int rc = kiln__program_check_module(st->words, st->nwords, recorded, why, sizeof(why));
        if (rc == 1) {
            if (!quiet)
                KILN_WARN("program",
                          "%s: stored though its %s stage (module %s) breaks a rule of the "
                          "SPIR-V validator (recorded from an application; it parses): %s",
                          name, stage, stage_label(st), why);
            if (!s->recorded_invalid)
                snprintf(s->why, sizeof(s->why), "its %s module %s: %s", stage, stage_label(st),
                         why);
            s->validated = false; /* not marked: checked again when opened */
            s->recorded_invalid = true;
            continue;
        }
        if (rc == KILN_ENOTSUP) {
            s->validated = false; /* framing only: checked again when opened */
            continue;
        }
        if (rc < 0) {
            snprintf(s->why, sizeof(s->why), "its %s module %s is not valid SPIR-V: %s", stage,
                     stage_label(st), why);
            if (!quiet)
                KILN_WARN("program", "%s: not stored: its %s stage is not valid SPIR-V: %s", name,
                          stage, why);
            return rc;
        }
    }
    return KILN_OK;
}

/* One stage's specialization map as the payload keeps it: little-endian
 * u32 triples. @return the map (kiln__free it) or NULL with *rc set. */
static uint8_t *spec_map(const struct kiln_program_stage *ps, int *rc)
{
    if (!ps->spec) {
        *rc = KILN_EINVAL;
        return NULL;
    }
    uint8_t *map = kiln__malloc((size_t)ps->nspec * KILN_SPEC_ENTRY_BYTES);
    if (!map) {
        *rc = KILN_ENOMEM;
        return NULL;
    }
    for (uint32_t k = 0; k < ps->nspec; k++) {
        uint8_t *m = map + (size_t)k * KILN_SPEC_ENTRY_BYTES;
        kiln__store_le32(m, ps->spec[k].constant_id);
        kiln__store_le32(m + 4, ps->spec[k].offset);
        kiln__store_le32(m + 8, ps->spec[k].size);
    }
    return map;
}

/* Packs every stage and joins them into one payload (step 2). */
static int pack_stages(const struct kiln_program *p, const struct kiln_program_seal_options *o,
                       bool validated, void **payload, size_t *size)
{
    unsigned n = p->nstages;
    void **blobs = kiln__calloc(n, sizeof(*blobs));
    uint8_t **maps = kiln__calloc(n, sizeof(*maps));
    struct kiln_stage_blob *st = kiln__calloc(n, sizeof(*st));
    int rc = blobs && maps && st ? KILN_OK : KILN_ENOMEM;
    enum kiln_codec codec =
        o->flags & KILN_PROGRAM_SEAL_CODEC ? (enum kiln_codec)o->codec : KILN_CODEC_KILN;
    for (unsigned i = 0; i < n && rc == KILN_OK; i++) {
        const struct kiln_program_stage *ps = &p->stages[i];
        size_t bsize = 0;
        rc = kiln_pack(ps->words, ps->nwords, codec, o->dict, &blobs[i], &bsize);
        st[i] = (struct kiln_stage_blob){.stage = (uint32_t)ps->src.stage,
                                         .blob = blobs[i],
                                         .blob_size = bsize,
                                         .entry = ps->entry,
                                         .nspec = ps->nspec,
                                         .spec_data = ps->spec_data,
                                         .spec_size = ps->spec_size};
        if (rc == KILN_OK && ps->nspec)
            st[i].spec_map = maps[i] = spec_map(ps, &rc);
    }
    struct kiln_payload_state state = {.kind = p->state_kind,
                                       .bytes = p->state,
                                       .size = p->state_size,
                                       .flags = validated ? KILN_PAYLOAD_VALIDATED : 0};
    if (rc == KILN_OK)
        rc = kiln_program_payload_build_full(&state, st, n, payload, size);
    for (unsigned i = 0; i < n; i++) {
        if (blobs)
            kiln_pack_free(blobs[i]);
        if (maps)
            kiln__free(maps[i]);
    }
    kiln__free(blobs);
    kiln__free(maps);
    kiln__free(st);
    return rc;
}

static int check_input(const struct kiln_program *p, const char *name)
{
    if (p->nstages == 0 || p->nstages > KILN_PROGRAM_MAX_STAGES || !p->stages) {
        KILN_ERROR("program", "%s: %u stages (1 to %u)", name, p->nstages, KILN_PROGRAM_MAX_STAGES);
        return KILN_EINVAL;
    }
    for (unsigned i = 0; i < p->nstages; i++)
        if (!p->stages[i].words) {
            KILN_ERROR("program", "%s: stage %s has no SPIR-V (translate it first)", name,
                       stage_label(&p->stages[i]));
            return KILN_EINVAL;
        }
    return KILN_OK;
}

static int seal(const struct kiln_program *p, const struct kiln_program_seal_options *opt,
                struct kiln_program_sealed *out)
{
    struct kiln_program_seal_options o;
    KILN_TRY(KILN_STRUCT_IN(&o, opt, "kiln_program_seal_options"));
    if (out->size < sizeof(size_t))
        return KILN_EINVAL;
    const char *name = o.name ? o.name : p->name ? p->name : "(program)";
    KILN_TRY(check_input(p, name));
    struct kiln_program_sealed s;
    memset(&s, 0, sizeof(s));
    s.size = sizeof(s);
    int rc = p->has_key ? KILN_OK : kiln_program_key(p, &s.key);
    if (p->has_key)
        s.key = p->key;
    if (rc < 0) {
        KILN_ERROR("program", "%s: cannot key the program: %s", name, kiln_strerror(rc));
        return rc;
    }
    rc = check_stages(p, name, (o.flags & KILN_PROGRAM_RECORDED_SPIRV) != 0,
                      (o.flags & KILN_PROGRAM_SEAL_QUIET) != 0, &s);
    if (rc < 0) {
        KILN_STRUCT_OUT(out, &s); /* why it was refused */
        return rc;
    }
    rc = pack_stages(p, &o, s.validated, &s.payload, &s.payload_size);
    if (rc < 0) {
        KILN_ERROR("program", "%s: cannot pack: %s", name, kiln_strerror(rc));
        return rc;
    }
    size_t spirv = kiln_program_spirv_bytes(p);
    s.spirv_bytes = spirv > UINT32_MAX ? UINT32_MAX : (uint32_t)spirv;
    s.nstages = p->nstages;
    KILN_STRUCT_OUT(out, &s);
    if (out->size < offsetof(struct kiln_program_sealed, payload_size) + sizeof(size_t)) {
        kiln_pack_free(s.payload); /* the caller's struct has no room for it */
        return KILN_EINVAL;
    }
    return KILN_OK;
}

int kiln_program_seal(const struct kiln_program *p, const struct kiln_program_seal_options *opt,
                      struct kiln_program_sealed *out)
{
    if (!p || !out)
        return KILN_EINVAL;
    const struct kiln_program *use;
    struct kiln_program *own;
    KILN_TRY(kiln__program_in(p, &use, &own));
    int rc = seal(use, opt, out);
    kiln_program_destroy(own);
    return rc;
}

void kiln_program_sealed_clear(struct kiln_program_sealed *s)
{
    if (!s || s->size < offsetof(struct kiln_program_sealed, payload) + sizeof(void *))
        return;
    kiln_pack_free(s->payload);
    size_t size = s->size;
    memset(s, 0, KILN_MIN(size, sizeof(*s)));
    s->size = size;
}
