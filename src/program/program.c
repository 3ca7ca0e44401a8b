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

#include <stdbool.h>
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

/* Stage i of a program laid out with its own stage_size (which is at least
 * this release's sizeof, so every field this code touches is there). */
static struct kiln_program_stage *stage_at(const struct kiln_program *p, unsigned i)
{
    return (struct kiln_program_stage *)((unsigned char *)p->stages + (size_t)i * p->stage_size);
}

/* Whether a layout of `size` bytes can be read as this release's `own`:
 * no smaller (the first growable layout is this one), and any newer tail
 * all zero. */
static bool layout_ok(const void *p, size_t size, size_t own)
{
    if (size < own)
        return false;
    const unsigned char *b = p;
    for (size_t i = own; i < size; i++)
        if (b[i])
            return false;
    return true;
}

int kiln_program_create_sized(const char *name, size_t program_size, size_t stage_size,
                              struct kiln_program **out)
{
    if (!name || !out)
        return KILN_EINVAL;
    *out = NULL;
    if (program_size < sizeof(struct kiln_program) ||
        stage_size < sizeof(struct kiln_program_stage)) {
        KILN_ERROR("program", "%s: sizes %zu/%zu are not a kiln_program's (at least %zu/%zu)", name,
                   program_size, stage_size, sizeof(struct kiln_program),
                   sizeof(struct kiln_program_stage));
        return KILN_EINVAL;
    }
    struct kiln_program *p = kiln__calloc(1, program_size);
    if (!p)
        return KILN_ENOMEM;
    p->size = program_size;
    p->stage_size = stage_size;
    p->name = dup_str(name);
    p->stages = kiln__calloc(KILN_PROGRAM_STAGE_ROOM, stage_size);
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
    if (!p || n > KILN_PROGRAM_MAX_STAGES || p->stage_room == 0 ||
        p->stage_size < sizeof(struct kiln_program_stage))
        return KILN_EINVAL;
    if (n <= p->stage_room)
        return KILN_OK;
    unsigned char *st = kiln__realloc(p->stages, (size_t)n * p->stage_size);
    if (!st)
        return KILN_ENOMEM;
    memset(st + (size_t)p->stage_room * p->stage_size, 0,
           (size_t)(n - p->stage_room) * p->stage_size);
    p->stages = (struct kiln_program_stage *)st;
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

/* Whether kiln can read the caller's program `p` (its sizes and, for a
 * newer caller, the zero tails), with one error line when not. */
static int readable(const struct kiln_program *p)
{
    const char *name = p->name ? p->name : "unnamed";
    if (!layout_ok(p, p->size, sizeof(*p))) {
        KILN_ERROR("program",
                   "%s: size %zu is not a kiln_program's (%zu; set KILN_PROGRAM_INIT), "
                   "or a newer one's extra fields are set",
                   name, p->size, sizeof(*p));
        return KILN_EINVAL;
    }
    if (p->nstages && p->stages) {
        for (unsigned i = 0; i < p->nstages; i++) {
            if (!layout_ok(stage_at(p, i), p->stage_size, sizeof(struct kiln_program_stage))) {
                KILN_ERROR("program",
                           "%s: stage_size %zu is not a kiln_program_stage's (%zu), or "
                           "a newer one's extra fields are set in stage %u",
                           name, p->stage_size, sizeof(struct kiln_program_stage), i);
                return KILN_EINVAL;
            }
        }
    }
    return KILN_OK;
}

int kiln_program_copy_sized(const struct kiln_program *src, size_t program_size, size_t stage_size,
                            struct kiln_program **out)
{
    if (!src || !out)
        return KILN_EINVAL;
    *out = NULL;
    KILN_TRY(readable(src));
    if (!src->name || src->nstages == 0 || src->nstages > KILN_PROGRAM_MAX_STAGES || !src->stages)
        return KILN_EINVAL;
    struct kiln_program *p;
    KILN_TRY(kiln_program_create_sized(src->name, program_size, stage_size, &p));
    int rc = kiln_program_reserve(p, src->nstages);
    for (unsigned i = 0; i < src->nstages && rc == KILN_OK; i++)
        rc = copy_stage(stage_at(src, i), stage_at(p, i));
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

int kiln__program_in(const struct kiln_program *in, const struct kiln_program **use,
                     struct kiln_program **own)
{
    *own = NULL;
    *use = in;
    KILN_TRY(readable(in));
    if (in->size == sizeof(*in) && (in->nstages == 0 || in->stage_size == sizeof(*in->stages)))
        return KILN_OK;
    KILN_TRY(kiln_program_copy_sized(in, sizeof(*in), sizeof(*in->stages), own));
    *use = *own;
    return KILN_OK;
}

void kiln_program_destroy(struct kiln_program *p)
{
    if (!p)
        return;
    for (unsigned i = 0; p->stages && i < p->stage_room; i++) {
        struct kiln_program_stage *st = stage_at(p, i);
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
    if (i >= a->count || !a->programs || a->programs->size == 0)
        return KILN_EINVAL;
    const struct kiln_program *p = kiln__struct_elem(a->programs, i);
    int rc = p->size != a->programs->size ? KILN_EINVAL : kiln_program_copy(p, out);
    if (rc < 0)
        KILN_ERROR("prep", "program %zu of the array (%s): cannot copy it: %s", i,
                   p->name ? p->name : "unnamed", kiln_strerror(rc));
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
        .size = sizeof(s),
        .user = (void *)a,
        /* A size kiln cannot read gives an empty source (and a line). */
        .count = a && KILN_STRUCT_CHECK(a, struct kiln_program_array, "kiln_program_array") == 0
                     ? a->count
                     : 0,
        .load = array_load,
        .stamp = array_stamp,
    };
    return s;
}

size_t kiln_program_spirv_bytes(const struct kiln_program *p)
{
    size_t n = 0;
    for (unsigned i = 0; p && p->stages && i < p->nstages; i++)
        if (stage_at(p, i)->words)
            n += stage_at(p, i)->nwords * sizeof(uint32_t);
    return n;
}
