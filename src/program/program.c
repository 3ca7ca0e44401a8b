/*
 * program.c - programs: making, growing, copying and freeing them, and the
 * program source over a caller's array.
 *
 * Invariants and why they hold:
 *
 * - A program made by kiln owns all it points to. kiln_program_create and
 *   kiln_program_copy are the only makers; both allocate every string,
 *   array, map and state buffer, and record the stages array's room in
 *   stage_room, so kiln_program_destroy can free every stage the array
 *   holds (filled or not) without trusting nstages.
 *
 * - A caller's own program is never written or freed: its stage_room is 0,
 *   so kiln_program_reserve refuses it, and the array source copies each
 *   program before handing it to kiln_prepare (which destroys what a source
 *   gives it).
 */
#include "kiln_internal.h"

#include "kiln/program.h"

#include <stdlib.h>
#include <string.h>

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = kiln__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* A malloc'd copy of n bytes (NULL and success for n == 0). */
static int dup_bytes(const void *src, size_t n, void **out)
{
    *out = NULL;
    if (n == 0)
        return KILN_OK;
    if (!src)
        return KILN_EINVAL;
    *out = kiln__malloc(n);
    if (!*out)
        return KILN_ENOMEM;
    memcpy(*out, src, n);
    return KILN_OK;
}

int kiln_program_create(const char *name, struct kiln_program **out)
{
    if (!name || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_program *p = kiln__calloc(1, sizeof(*p));
    if (!p)
        return KILN_ENOMEM;
    p->name = dup_str(name);
    p->stages = kiln__calloc(KILN_PROGRAM_STAGE_ROOM, sizeof(*p->stages));
    if (!p->name || !p->stages) {
        kiln__free(p->name);
        kiln__free(p->stages);
        kiln__free(p);
        return KILN_ENOMEM;
    }
    p->stage_room = KILN_PROGRAM_STAGE_ROOM;
    p->state_kind = KILN_STATE_BUILTIN;
    *out = p;
    return KILN_OK;
}

int kiln_program_reserve(struct kiln_program *p, unsigned n)
{
    if (!p || n > KILN_PROGRAM_MAX_STAGES || p->stage_room == 0)
        return KILN_EINVAL;
    if (n <= p->stage_room)
        return KILN_OK;
    struct kiln_program_stage *st = kiln__realloc(p->stages, n * sizeof(*st));
    if (!st)
        return KILN_ENOMEM;
    memset(st + p->stage_room, 0, (n - p->stage_room) * sizeof(*st));
    p->stages = st;
    p->stage_room = n;
    return KILN_OK;
}

static int copy_stage(const struct kiln_program_stage *s, struct kiln_program_stage *d)
{
    d->src.stage = s->src.stage;
    d->src.size = s->src.size;
    if (s->src.text) {
        /* One byte more, so kiln's own copy ends with a NUL as its sources do. */
        char *t = kiln__malloc(s->src.size + 1);
        if (!t)
            return KILN_ENOMEM;
        memcpy(t, s->src.text, s->src.size);
        t[s->src.size] = '\0';
        d->src.text = t;
    }
    d->src.name = dup_str(s->src.name ? s->src.name : "(stage)");
    if (!d->src.name)
        return KILN_ENOMEM;
    if (s->words) {
        KILN_TRY(dup_bytes(s->words, s->nwords * sizeof(uint32_t), (void **)&d->words));
        d->nwords = s->nwords;
    }
    if (s->entry && !(d->entry = dup_str(s->entry)))
        return KILN_ENOMEM;
    if (s->nspec && !s->spec)
        return KILN_EINVAL;
    KILN_TRY(dup_bytes(s->spec, (size_t)s->nspec * sizeof(*s->spec), (void **)&d->spec));
    d->nspec = s->nspec;
    KILN_TRY(dup_bytes(s->spec_data, s->spec_size, &d->spec_data));
    d->spec_size = s->spec_size;
    return KILN_OK;
}

int kiln_program_copy(const struct kiln_program *src, struct kiln_program **out)
{
    if (!src || !out || !src->name || src->nstages == 0 || src->nstages > KILN_PROGRAM_MAX_STAGES ||
        !src->stages)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_program *p;
    KILN_TRY(kiln_program_create(src->name, &p));
    int rc = kiln_program_reserve(p, src->nstages);
    for (unsigned i = 0; i < src->nstages && rc == KILN_OK; i++)
        rc = copy_stage(&src->stages[i], &p->stages[i]);
    p->nstages = src->nstages;
    p->has_key = src->has_key;
    p->key = src->key;
    p->state_kind = src->state_kind;
    if (rc == KILN_OK)
        rc = dup_bytes(src->state, src->state_size, &p->state);
    p->state_size = p->state ? src->state_size : 0;
    if (rc < 0) {
        kiln_program_destroy(p);
        return rc;
    }
    *out = p;
    return KILN_OK;
}

void kiln_program_destroy(struct kiln_program *p)
{
    if (!p)
        return;
    for (unsigned i = 0; p->stages && i < p->stage_room; i++) {
        struct kiln_program_stage *st = &p->stages[i];
        /* The program made these strings; the struct shows them as const so
         * that a translator cannot change them. */
        kiln__free((char *)st->src.text);
        kiln__free((char *)st->src.name);
        kiln__free(st->words);
        kiln__free(st->entry);
        kiln__free(st->spec);
        kiln__free(st->spec_data);
    }
    kiln__free(p->stages);
    kiln__free(p->state);
    kiln__free(p->name);
    kiln__free(p);
}

static int array_load(void *user, size_t i, struct kiln_program **out)
{
    const struct kiln_program_array *a = user;
    if (i >= a->count)
        return KILN_EINVAL;
    int rc = kiln_program_copy(&a->programs[i], out);
    if (rc < 0)
        KILN_ERROR("prep", "program %zu of the array (%s): cannot copy it: %s", i,
                   a->programs[i].name ? a->programs[i].name : "unnamed", kiln_strerror(rc));
    return rc;
}

static uint64_t array_stamp(void *user, uint64_t translator_stamp)
{
    (void)translator_stamp;
    return ((const struct kiln_program_array *)user)->stamp;
}

struct kiln_program_source kiln_program_source_array(const struct kiln_program_array *a)
{
    struct kiln_program_source s = {
        .user = (void *)a,
        .count = a ? a->count : 0,
        .load = array_load,
        .stamp = array_stamp,
    };
    return s;
}

size_t kiln_program_spirv_bytes(const struct kiln_program *p)
{
    size_t n = 0;
    for (unsigned i = 0; p && i < p->nstages; i++)
        if (p->stages[i].words)
            n += p->stages[i].nwords * sizeof(uint32_t);
    return n;
}
