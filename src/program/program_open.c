/*
 * program_open.c - opening a payload: parse, unpack once, check once.
 *
 * Design. kiln_program_open is the one way a stored program's stages
 * become words a driver may see. It parses the payload
 * (kiln_program_payload_parse_full), unpacks each stage into a buffer of
 * its own (kiln_unpack: one unpack per stage), then checks each stage once:
 * the framing always (cheap, and a payload's checksum says only that its
 * bytes are those stored), the validator too when the payload is not
 * marked KILN_PAYLOAD_VALIDATED, with the recorded-module rule of
 * KILN_PROGRAM_RECORDED_SPIRV. The words then go to kiln_vk as they are
 * (kiln_vk_stage.words), which neither unpacks nor checks them again:
 * before this, the warm start unpacked and validated every stage, and vk
 * unpacked and framed it once more.
 *
 * One allocation holds the public struct, its stage array and (with
 * KILN_PROGRAM_OPEN_COPY, as kiln_cache_get_program asks) a copy of the
 * payload; each stage's words have a buffer of their own.
 */
#include "program_internal.h"

#include <string.h>

struct opened {
    struct kiln_program_opened pub; /* first: the caller's pointer */
    struct kiln_program_open_stage *stages;
};

/* Unpacks stage `s` into its own buffer. @return 0 or the error, logged. */
static int unpack_one(struct kiln_program_open_stage *s, const struct kiln_pack_dict *dict,
                      const char *name)
{
    size_t bytes = 0;
    int64_t n = kiln_blob_info(s->blob.blob, s->blob.blob_size, NULL, &bytes);
    uint32_t *words = NULL;
    if (n >= 0) {
        words = kiln__malloc(bytes ? bytes : 4);
        n = words ? kiln_unpack(s->blob.blob, s->blob.blob_size, dict, words, bytes / 4)
                  : KILN_ENOMEM;
    }
    if (n < 0) {
        KILN_WARN("program", "%s: not built: its %s stage could not be unpacked: %s", name,
                  kiln_vk_stage_name(s->blob.stage), kiln_strerror((int)n));
        kiln__free(words);
        return (int)n;
    }
    s->words = words;
    s->nwords = (size_t)n;
    return KILN_OK;
}

/* Checks stage `s` once (see the top). @return 0, 1 for a recorded module
 * accepted though the validator refused it, or the refusal, logged. */
static int check_one(const struct kiln_program_open_stage *s, bool validated, bool recorded,
                     const char *name)
{
    char why[512];
    const char *stage = kiln_vk_stage_name(s->blob.stage);
    int rc = validated
                 ? kiln_spirv_check_words(s->words, s->nwords, why, sizeof(why))
                 : kiln__program_check_module(s->words, s->nwords, recorded, why, sizeof(why));
    if (rc == 1) {
        KILN_WARN("program",
                  "%s: built though its %s stage breaks a rule of the SPIR-V validator "
                  "(recorded from an application; it parses): %s",
                  name, stage, why);
        return 1;
    }
    if (rc < 0)
        KILN_WARN("program", "%s: not built: its %s stage %s: %s", name, stage,
                  rc == KILN_ENOTSUP ? "cannot be validated" : "is not valid SPIR-V", why);
    return rc;
}

static int open_stages(struct opened *o, const struct kiln_program_open_options *opt,
                       const char *name)
{
    bool validated = (o->pub.state.flags & KILN_PAYLOAD_VALIDATED) != 0 ||
                     (opt->flags & KILN_PROGRAM_OPEN_CHECKED) != 0;
    bool recorded = (opt->flags & KILN_PROGRAM_RECORDED_SPIRV) != 0;
    for (uint32_t i = 0; i < o->pub.nstages; i++) {
        KILN_TRY(unpack_one(&o->stages[i], opt->dict, name));
        int rc = check_one(&o->stages[i], validated, recorded, name);
        if (rc < 0)
            return rc;
        o->pub.recorded_invalid |= rc == 1;
    }
    o->pub.validated = !o->pub.recorded_invalid;
    return KILN_OK;
}

/* Makes the one allocation: the struct, `n` stages and, with `copy`, the
 * payload's bytes (then parsed again from the copy, so every pointer the
 * stages hold is into memory the open program owns). */
static struct opened *make(const void **payload, size_t size, int n, bool copy)
{
    size_t stages = sizeof(struct opened) + (size_t)n * sizeof(struct kiln_program_open_stage);
    struct opened *p = kiln__calloc(1, stages + (copy ? size : 0));
    if (!p)
        return NULL;
    p->stages = (struct kiln_program_open_stage *)(p + 1);
    if (copy) {
        memcpy((unsigned char *)p + stages, *payload, size);
        *payload = (unsigned char *)p + stages;
    }
    return p;
}

int kiln_program_open(const void *payload, size_t size, const struct kiln_program_open_options *opt,
                      struct kiln_program_opened **out)
{
    if (!payload || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_program_open_options o;
    KILN_TRY(KILN_STRUCT_IN(&o, opt, "kiln_program_open_options"));
    const char *name = o.name ? o.name : "(program)";
    struct kiln_stage_blob st[KILN_PAYLOAD_MAX_STAGES];
    struct kiln_payload_state state;
    int n = kiln_program_payload_parse_full(payload, size, KILN_PAYLOAD_MAX_STAGES, st, &state);
    if (n < 0) {
        KILN_WARN("program", "%s: not built: the payload is not a program's (%s)", name,
                  kiln_strerror(n));
        return n;
    }
    bool copy = (o.flags & KILN_PROGRAM_OPEN_COPY) != 0;
    struct opened *p = make(&payload, size, n, copy);
    if (!p)
        return KILN_ENOMEM;
    if (copy) /* the same bytes: parsed as above, now pointing into the copy */
        n = kiln_program_payload_parse_full(payload, size, KILN_PAYLOAD_MAX_STAGES, st, &state);
    p->pub.state = state;
    p->pub.nstages = (uint32_t)n;
    p->pub.stages = p->stages;
    for (int i = 0; i < n; i++)
        p->stages[i].blob = st[i];
    int rc = open_stages(p, &o, name);
    if (rc < 0) {
        kiln_program_opened_free(&p->pub);
        return rc;
    }
    *out = &p->pub;
    return KILN_OK;
}

void kiln_program_opened_free(struct kiln_program_opened *pub)
{
    if (!pub)
        return;
    struct opened *p = (struct opened *)pub;
    for (uint32_t i = 0; i < pub->nstages; i++)
        kiln__free((void *)p->stages[i].words);
    kiln__free(p);
}
