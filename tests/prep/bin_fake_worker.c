/*
 * bin_fake_worker.c - an isolated worker (kiln_isolate_worker_main with
 * kiln's own builders) whose host tier of driver binaries is the fake
 * provider of bin_fake.h, its global key's byte the first argument: the
 * same byte as the parent's provider reads the binaries the parent's
 * prepare kept; another is another driver's worker. test_binaries_vk.c's
 * isolated start cases run it.
 */
/* bin_fake.h's helpers for the tests are not used here. */
#pragma GCC diagnostic ignored "-Wunused-function"

#include "bin_fake.h"

#include <stdlib.h>

int main(int argc, char **argv)
{
    static struct bin_fake f;
    bin_fake_init(&f, argc > 1 ? (uint8_t)strtoul(argv[1], NULL, 0) : 0);
    kiln__bin_test_provider = &f.p;
    struct kiln_isolate_worker_options o = KILN_ISOLATE_WORKER_OPTIONS_INIT;
    return kiln_isolate_worker_main(-1, -1, &o) == KILN_OK ? 0 : 1;
}
