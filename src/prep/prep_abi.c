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
 */
#include "kiln_internal.h"
#include "prep_internal.h"

#include <string.h>

int kiln__prep_builders_in(const struct kiln_builder *in, size_t n, struct kiln_builder **out)
{
    *out = NULL;
    if (!in || !n)
        return KILN_OK;
    struct kiln_builder first;
    KILN_TRY(KILN_STRUCT_IN(&first, in, "kiln_builder"));
    struct kiln_builder *b = kiln__calloc(n, sizeof(*b));
    if (!b)
        return KILN_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct kiln_builder *e = kiln__struct_elem(in, i);
        int rc = e->size != in->size ? KILN_EINVAL : KILN_STRUCT_IN(&b[i], e, "kiln_builder");
        if (rc < 0) {
            if (e->size != in->size)
                KILN_ERROR("abi", "kiln_builder %zu: size %zu, the array's first has %zu", i,
                           e->size, in->size);
            kiln__free(b);
            return rc;
        }
    }
    *out = b;
    return KILN_OK;
}

int kiln__prep_abi_in(struct kiln__prep_abi *abi, const struct kiln_translator **translator,
                      const struct kiln_isolate_options **isolate, const struct kiln_io *io,
                      const struct kiln_builder **builders, size_t nbuilders)
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
    KILN_TRY(kiln__prep_builders_in(*builders, nbuilders, &abi->builders));
    if (abi->builders)
        *builders = abi->builders;
    return KILN_OK;
}

void kiln__prep_abi_free(struct kiln__prep_abi *abi)
{
    kiln__free(abi->builders);
    abi->builders = NULL;
}
