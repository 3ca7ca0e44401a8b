/*
 * foz_each.h - the fuzzers' walk over an input read as a Fossilize
 * archive: every pipeline whose closure can be made is handed to `fn`
 * with its closure, which is freed after. An input that does not open or
 * index as an archive hands out nothing. Header only: each fuzzer is its
 * own program of one source.
 */
#ifndef KILN_FUZZ_FOZ_EACH_H
#define KILN_FUZZ_FOZ_EACH_H

#include "kiln/foz.h"

static inline void foz_each_closure(const uint8_t *data, size_t size,
                                    void (*fn)(void *user, const struct kiln_foz_pipeline_ref *p,
                                               const uint8_t *closure, size_t len),
                                    void *user)
{
    struct kiln_foz *foz;
    if (kiln_foz_open_memory(data, size, "fuzz", &foz) != 0)
        return;
    struct kiln_foz_index *idx;
    if (kiln_foz_index_create(foz, &idx) == 0) {
        const struct kiln_foz_pipeline_ref *p;
        size_t n = kiln_foz_index_pipelines(idx, &p);
        for (size_t i = 0; i < n; i++) {
            uint8_t *bytes;
            size_t len;
            if (kiln_foz_closure_make(idx, p[i].tag, p[i].hash, &bytes, &len) != 0)
                continue;
            fn(user, &p[i], bytes, len);
            kiln_foz_closure_free(bytes);
        }
        kiln_foz_index_destroy(idx);
    }
    kiln_foz_close(foz);
}

#endif /* KILN_FUZZ_FOZ_EACH_H */
