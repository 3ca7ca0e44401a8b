/*
 * program_key.c - a program's key: the hash the cache stores it under.
 *
 * Design. The key is a hash of what a translator sees (each stage's kind,
 * whether it is source text or SPIR-V, and those bytes), then, only for a
 * program that has any, its entry points, specialization and state (the
 * "extras"). A program of kiln's first shapes (one or two stages, "main",
 * no specialization, built-in state) hashes exactly as it always did, so
 * every cache keeps its keys. This is the one place a key is made:
 * kiln_prepare, kiln_program_seal and the tools all come here.
 */
#include "kiln_internal.h"

#include "kiln/program.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/*
 * The number a stage kind is hashed as. Keys were first made from kiln's
 * own stage numbers (0 compute, 1 vertex, 2 fragment); hashing the same
 * numbers for those stages keeps every key a cache holds valid now that
 * stages are VkShaderStageFlagBits. Other stages are hashed with the top
 * bit set, which none of those numbers has.
 */
static uint32_t stage_key_code(uint32_t stage)
{
    switch (stage) {
    case KILN_VK_STAGE_COMPUTE_BIT:
        return 0;
    case KILN_VK_STAGE_VERTEX_BIT:
        return 1;
    case KILN_VK_STAGE_FRAGMENT_BIT:
        return 2;
    default:
        return 0x80000000u | stage;
    }
}

/* The program has more than today's shape: an entry point other than
 * "main", specialization, or state. */
static bool has_extras(const struct kiln_program *p)
{
    if (p->state_kind != KILN_STATE_BUILTIN || p->state_size)
        return true;
    for (unsigned i = 0; i < p->nstages; i++) {
        const struct kiln_program_stage *st = &p->stages[i];
        if ((st->entry && strcmp(st->entry, "main") != 0) || st->nspec || st->spec_size)
            return true;
    }
    return false;
}

/* The extras record's type: after the kind, where a stage record has 0
 * (text) or 1 (words), so it cannot be read as a stage. */
#define KEY_EXTRAS 2u

/* Appends the extras record: per stage its entry point, map and data, each
 * with its length; then the state kind and bytes. @return the end. */
static unsigned char *put_extras(const struct kiln_program *p, unsigned char *w)
{
    unsigned char *start = w;
    w += 16;
    for (unsigned i = 0; i < p->nstages; i++) {
        const struct kiln_program_stage *st = &p->stages[i];
        const char *entry = st->entry ? st->entry : "main";
        size_t elen = strlen(entry);
        kiln__store_le64(w, elen);
        memcpy(w + 8, entry, elen);
        w += 8 + elen;
        kiln__store_le32(w, st->nspec);
        w += 4;
        for (uint32_t k = 0; k < st->nspec; k++, w += 12) {
            kiln__store_le32(w, st->spec[k].constant_id);
            kiln__store_le32(w + 4, st->spec[k].offset);
            kiln__store_le32(w + 8, st->spec[k].size);
        }
        kiln__store_le64(w, st->spec_size);
        if (st->spec_size)
            memcpy(w + 8, st->spec_data, st->spec_size);
        w += 8 + st->spec_size;
    }
    kiln__store_le32(w, p->state_kind);
    kiln__store_le64(w + 4, p->state_size);
    if (p->state_size)
        memcpy(w + 12, p->state, p->state_size);
    w += 12 + p->state_size;
    kiln__store_le32(start, 0);
    kiln__store_le32(start + 4, KEY_EXTRAS);
    kiln__store_le64(start + 8, (uint64_t)(w - start - 16));
    return w;
}

/* The bytes put_extras writes. */
static size_t extras_size(const struct kiln_program *p)
{
    size_t n = 16 + 12 + p->state_size;
    for (unsigned i = 0; i < p->nstages; i++) {
        const struct kiln_program_stage *st = &p->stages[i];
        n += 8 + strlen(st->entry ? st->entry : "main") + 4 + (size_t)st->nspec * 12 + 8 +
             st->spec_size;
    }
    return n;
}

static int key_of(const struct kiln_program *p, struct kiln_key *key)
{
    if (!key || p->nstages == 0 || p->nstages > KILN_PROGRAM_MAX_STAGES || !p->stages)
        return KILN_EINVAL;
    size_t total = 0;
    for (unsigned i = 0; i < p->nstages; i++) {
        const struct kiln_program_stage *st = &p->stages[i];
        if (!st->src.text && !st->words)
            return KILN_EINVAL;
        if ((st->nspec && !st->spec) || (st->spec_size && !st->spec_data))
            return KILN_EINVAL;
        total += 16 + (st->src.text ? st->src.size : st->nwords * sizeof(uint32_t));
    }
    if (p->state_size && !p->state)
        return KILN_EINVAL;
    bool extras = has_extras(p);
    if (extras)
        total += extras_size(p);
    unsigned char *buf = kiln__malloc(total);
    if (!buf)
        return KILN_ENOMEM;
    unsigned char *w = buf;
    for (unsigned i = 0; i < p->nstages; i++) {
        const struct kiln_program_stage *st = &p->stages[i];
        /* Kind, what follows (0 source text, 1 SPIR-V words), its length. */
        bool text = st->src.text != NULL;
        size_t len = text ? st->src.size : st->nwords * sizeof(uint32_t);
        kiln__store_le32(w, stage_key_code(st->src.stage));
        kiln__store_le32(w + 4, text ? 0u : 1u);
        kiln__store_le64(w + 8, (uint64_t)len);
        w += 16;
        if (text) {
            memcpy(w, st->src.text, len);
        } else {
            for (size_t k = 0; k < st->nwords; k++)
                kiln__store_le32(w + 4 * k, st->words[k]);
        }
        w += len;
    }
    /* Today's programs hash exactly as before: their caches keep their keys. */
    if (extras)
        w = put_extras(p, w);
    assert((size_t)(w - buf) == total);
    *key = kiln_hash128(buf, (size_t)(w - buf));
    kiln__free(buf);
    return KILN_OK;
}

int kiln_program_key(const struct kiln_program *p, struct kiln_key *key)
{
    if (!p || !key)
        return KILN_EINVAL;
    const struct kiln_program *use;
    struct kiln_program *own;
    KILN_TRY(kiln__program_in(p, &use, &own));
    int rc = key_of(use, key);
    kiln_program_destroy(own);
    return rc;
}

int kiln_prep_program_key(const struct kiln_program *p, struct kiln_key *key)
{
    return kiln_program_key(p, key);
}
