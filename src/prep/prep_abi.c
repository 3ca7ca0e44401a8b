/*
 * prep_abi.c - the caller's growable structs of the preparation and the
 * warm start, read into the library's own (docs/abi.md).
 *
 * kiln_prepare, kiln_warm_start and kiln_isolate_worker_main take options
 * that point at more caller structs: a translator, an isolation setup, an
 * I/O table and an array of builders. Each is read here, once, at the
 * call's door (kiln__struct_in; the builders with the first one's size as
 * the array's stride), so the rest of prep works on this library's own
 * layout and never on the caller's.
 *
 * The builders' copy is also where the core's own builders join the
 * caller's: one for each state kind the caller gave none of
 * (kiln__default_builder_create, the Fossilize builder for KILN_STATE_FOZ),
 * so that a warm start through libkiln alone builds what `kiln import foz`
 * stored. A builder the caller gives for a kind wins over the core's.
 */
#include "kiln_internal.h"
#include "prep_internal.h"

#include <string.h>

/* Appends the core's builder (kiln__default_builder_create: the Fossilize
 * one for KILN_STATE_FOZ) of each state kind the first b->n of b->list
 * have none of; b->list has room for KILN_STATE_KINDS more. */
static int add_defaults(struct kiln__prep_builders *b)
{
    uint32_t have = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->list[i].kind < KILN_STATE_KINDS)
            have |= 1u << b->list[i].kind;
    for (uint32_t kind = 0; kind < KILN_STATE_KINDS; kind++) {
        if (have & 1u << kind)
            continue;
        int rc = kiln__default_builder_create(kind, &b->list[b->n]);
        if (rc < 0)
            return rc;
        b->n += rc == 1;
        b->ndefaults += rc == 1;
    }
    return KILN_OK;
}

int kiln__prep_builders_in(const struct kiln_builder *in, size_t n, struct kiln__prep_builders *out)
{
    *out = (struct kiln__prep_builders){.list = NULL};
    if (n && !in)
        return KILN_OK; /* refused by kiln__prep_check_builders */
    struct kiln_builder first;
    if (n)
        KILN_TRY(KILN_STRUCT_IN(&first, in, "kiln_builder"));
    struct kiln_builder *b = kiln__calloc(n + KILN_STATE_KINDS, sizeof(*b));
    if (!b)
        return KILN_ENOMEM;
    out->list = b;
    for (size_t i = 0; i < n; i++) {
        const struct kiln_builder *e = kiln__struct_elem(in, i);
        int rc = e->size != in->size ? KILN_EINVAL : KILN_STRUCT_IN(&b[i], e, "kiln_builder");
        if (rc < 0) {
            if (e->size != in->size)
                KILN_ERROR("abi", "kiln_builder %zu: size %zu, the array's first has %zu", i,
                           e->size, in->size);
            kiln__prep_builders_free(out);
            return rc;
        }
    }
    out->n = n;
    int rc = add_defaults(out);
    if (rc < 0 || !out->n)
        kiln__prep_builders_free(out);
    return rc;
}

void kiln__prep_builders_free(struct kiln__prep_builders *b)
{
    for (size_t i = b->n - b->ndefaults; b->list && i < b->n; i++)
        kiln__default_builder_destroy(&b->list[i]);
    kiln__free(b->list);
    *b = (struct kiln__prep_builders){.list = NULL};
}

int kiln__prep_abi_in(struct kiln__prep_abi *abi, const struct kiln_translator **translator,
                      const struct kiln_isolate_options **isolate, const struct kiln_io *io,
                      const struct kiln_builder **builders, size_t *nbuilders)
{
    memset(abi, 0, sizeof(*abi));
    if (translator && *translator) {
        KILN_TRY(KILN_STRUCT_IN(&abi->translator, *translator, "kiln_translator"));
        *translator = &abi->translator;
    }
    if (*isolate) {
        KILN_TRY(KILN_STRUCT_IN(&abi->isolate, *isolate, "kiln_isolate_options"));
        *isolate = &abi->isolate;
    }
    if (io)
        KILN_TRY(kiln__io_check(io));
    if (!builders)
        return KILN_OK;
    KILN_TRY(kiln__prep_builders_in(*builders, *nbuilders, &abi->builders));
    if (abi->builders.list) {
        *builders = abi->builders.list;
        *nbuilders = abi->builders.n;
    }
    return KILN_OK;
}

void kiln__prep_abi_free(struct kiln__prep_abi *abi)
{
    kiln__prep_builders_free(&abi->builders);
}
