/*
 * fuzz_foz_closure.c - pipeline closures over arbitrary bytes.
 *
 * The input is read two ways: as a closure (the state bytes a cache hands
 * back), which kiln_foz_closure_inspect must accept or refuse cleanly; and
 * as an archive, whose index is made and every pipeline's closure built and
 * inspected again. Nothing may crash, leak or loop, and a closure made from
 * an archive must inspect as the pipeline it was made for.
 */
#include "kiln-tools/foz.h"

#include <stdlib.h>
#include <string.h>

static void quiet(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)user;
    (void)level;
    (void)module;
    (void)line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kiln_log_set_sink(quiet, NULL);
    struct kiln_foz_closure_info info;
    (void)kiln_foz_closure_inspect(data, size, &info);

    struct kiln_foz *foz;
    if (kiln_foz_open_memory(data, size, "fuzz", &foz) != 0)
        return 0;
    struct kiln_foz_index *idx;
    if (kiln_foz_index_create(foz, &idx) == 0) {
        const struct kiln_foz_pipeline_ref *p;
        size_t n = kiln_foz_index_pipelines(idx, &p);
        for (size_t i = 0; i < n; i++) {
            uint8_t *bytes;
            size_t len;
            if (kiln_foz_closure_make(idx, p[i].tag, p[i].hash, &bytes, &len) != 0)
                continue;
            int rc = kiln_foz_closure_inspect(bytes, len, &info);
            if (rc == 0 && (info.tag != p[i].tag || info.hash != p[i].hash))
                abort();
            kiln_foz_closure_free(bytes);
        }
        kiln_foz_index_destroy(idx);
    }
    kiln_foz_close(foz);
    return 0;
}
