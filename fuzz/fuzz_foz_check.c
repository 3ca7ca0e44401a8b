/*
 * fuzz_foz_check.c - the recorded-state check (kiln_foz_closure_check)
 * over arbitrary bytes, without a device: a limits struct in, a verdict out.
 *
 * The input is checked as a closure under three sets of limits: kiln's
 * bounds, the specification's minimums (the strictest a device may have),
 * and limits between the two drawn from the input's hash. Nothing may
 * crash, leak or loop, and the verdict must be consistent: the same with
 * and without a reason buffer, a reason exactly when refused, and
 * monotonic (what passes stricter limits passes looser ones). The input is
 * also read as an archive, and every pipeline's closure checked the same.
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

/* One verdict; aborts on an inconsistent one. @return 0 when it passes. */
static int verdict(const void *data, size_t size, const struct kiln_foz_limits *lim)
{
    char why[256];
    memset(why, 'x', sizeof(why));
    int rc = kiln_foz_closure_check(data, size, lim, why, sizeof(why));
    if (memchr(why, '\0', sizeof(why)) == NULL)
        abort(); /* the reason is always a string */
    if ((rc == 0) != (why[0] == '\0'))
        abort(); /* a reason exactly when refused */
    if (rc != 0 && rc != KILN_EFORMAT && rc != KILN_EPARSE)
        abort();
    if (kiln_foz_closure_check(data, size, lim, NULL, 0) != rc)
        abort();
    return rc;
}

static void check_all(const void *data, size_t size)
{
    struct kiln_foz_limits bound, min, mid;
    kiln_foz_limits_bound(&bound);
    kiln_foz_limits_minimum(&min);
    /* Limits between the minimums and kiln's bounds, drawn from the input. */
    uint64_t h = kiln_hash64(data, size);
    mid = min;
    for (int i = 0; i < KILN_FOZ_LIMIT_COUNT; i++) {
        uint64_t span = (uint64_t)bound.value[i] - min.value[i] + 1;
        h = h * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        mid.value[i] = min.value[i] + (uint32_t)((h >> 16) % span);
    }
    int b = verdict(data, size, &bound);
    if (kiln_foz_closure_check(data, size, NULL, NULL, 0) != b)
        abort(); /* NULL limits are kiln's bounds */
    int m = verdict(data, size, &mid);
    int s = verdict(data, size, &min);
    if ((s == 0 && m != 0) || (m == 0 && b != 0))
        abort(); /* passing stricter limits passes looser ones */
}

/* One pipeline's closure, of the input read as an archive. */
static void check_closure(void *user, const struct kiln_foz_pipeline_ref *p, const uint8_t *closure,
                          size_t len)
{
    (void)user;
    (void)p;
    check_all(closure, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kiln_log_set_sink(quiet, NULL);
    check_all(data, size);

    foz_each_closure(data, size, check_closure, NULL);
    return 0;
}
