/*
 * fuzz_foz_closure.c - pipeline closures over arbitrary bytes.
 *
 * The input is read two ways: as a closure (the state bytes a cache hands
 * back), which kiln_foz_closure_inspect must accept or refuse cleanly; and
 * as an archive, whose index is made and every pipeline's closure built and
 * inspected again. Nothing may crash, leak or loop, and a closure made from
 * an archive must inspect as the pipeline it was made for.
 */
#include "foz_each.h"
#include "kiln/foz.h"

#include <stdlib.h>
#include <string.h>

static void quiet(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)user;
    (void)level;
    (void)module;
    (void)line;
}

/* A closure made from an archive inspects as the pipeline it was made for. */
static void inspect_closure(void *user, const struct kiln_foz_pipeline_ref *p,
                            const uint8_t *closure, size_t len)
{
    (void)user;
    struct kiln_foz_closure_info info = KILN_FOZ_CLOSURE_INFO_INIT;
    int rc = kiln_foz_closure_inspect(closure, len, &info);
    if (rc == 0 && (info.tag != p->tag || info.hash != p->hash))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kiln_log_set_sink(quiet, NULL);
    struct kiln_foz_closure_info info = KILN_FOZ_CLOSURE_INFO_INIT;
    (void)kiln_foz_closure_inspect(data, size, &info);

    foz_each_closure(data, size, inspect_closure, NULL);
    return 0;
}
