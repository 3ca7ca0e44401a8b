/*
 * test_pool_heap.c - telling Windows' process heaps apart (pool_heap.c),
 * and on Windows the live heap kind and probe.
 *
 * The headers are built here as the two heaps lay them out on x64: the
 * signature word at offset 0x10. The live case accepts the NT heap or an
 * unknown signature: wine has one heap implementation whatever the
 * manifest asks, so the segment heap can only be seen on real Windows.
 */
#include "kiln_test.h"
#include "kiln_internal.h"
#include "pool_internal.h"

static void header_with(unsigned char *h, size_t n, uint32_t signature)
{
    for (size_t i = 0; i < n; i++)
        h[i] = (unsigned char)(0xA5 ^ i); /* neither signature anywhere */
    kiln__store_le32(h + 0x10, signature);
}

KT_CASE(signatures)
{
    unsigned char h[0x40];
    enum kiln_heap_kind kind;
    uint32_t sig;

    header_with(h, sizeof(h), 0xFFEEFFEEu);
    KT_CHECK_OK(kiln__pool_heap_kind(h, sizeof(h), &kind, &sig));
    KT_CHECK_EQ(kind, KILN_HEAP_NT);
    KT_CHECK_EQ(sig, 0xFFEEFFEEu);

    header_with(h, sizeof(h), 0xDDEEDDEEu);
    KT_CHECK_OK(kiln__pool_heap_kind(h, sizeof(h), &kind, &sig));
    KT_CHECK_EQ(kind, KILN_HEAP_SEGMENT);
    KT_CHECK_EQ(sig, 0xDDEEDDEEu);

    /* Exactly 0x14 bytes is enough; the signature is little-endian. */
    KT_CHECK_OK(kiln__pool_heap_kind(h, 0x14, &kind, NULL));
    KT_CHECK_EQ(kind, KILN_HEAP_SEGMENT);
    kiln__store_le32(h + 0x10, 0xEEDDEEDDu);
    KT_CHECK_EQ(kiln__pool_heap_kind(h, 0x14, &kind, NULL), KILN_ENOTFOUND);

    /* The x86 NT heap keeps its signature at 0x08: not taken for x64's. */
    header_with(h, sizeof(h), 0);
    kiln__store_le32(h + 0x08, 0xFFEEFFEEu);
    KT_CHECK_EQ(kiln__pool_heap_kind(h, sizeof(h), &kind, &sig), KILN_ENOTFOUND);
    KT_CHECK_EQ(kind, KILN_HEAP_DEFAULT);
    KT_CHECK_EQ(sig, 0);
}

KT_CASE(garbage_and_short)
{
    unsigned char h[0x20] = {0};
    enum kiln_heap_kind kind = KILN_HEAP_NT;
    uint32_t sig = 1;
    KT_CHECK_EQ(kiln__pool_heap_kind(h, 0x13, &kind, &sig), KILN_EINVAL);
    KT_CHECK_EQ(kind, KILN_HEAP_DEFAULT);
    KT_CHECK_EQ(sig, 0);
    KT_CHECK_EQ(kiln__pool_heap_kind(NULL, 0x20, &kind, NULL), KILN_EINVAL);

    /* Random headers: only the two exact words are ever recognised. */
    uint64_t seed = 42;
    for (int i = 0; i < 10000; i++) {
        for (size_t j = 0; j < sizeof(h); j += 8) {
            uint64_t v = kt_rand(&seed);
            memcpy(h + j, &v, 8);
        }
        int rc = kiln__pool_heap_kind(h, sizeof(h), &kind, &sig);
        bool known = sig == 0xFFEEFFEEu || sig == 0xDDEEDDEEu;
        KT_CHECK_EQ(rc, known ? KILN_OK : KILN_ENOTFOUND);
        KT_CHECK_EQ(sig, kiln__load_le32(h + 0x10));
    }
}

#ifdef _WIN32
#include <windows.h>

KT_CASE(live_heap_kind)
{
    enum kiln_heap_kind kind;
    uint32_t sig;
    int rc = kiln__pool_process_heap_kind(&kind, &sig);
    printf("process heap signature 0x%08x: %s\n", (unsigned)sig,
           rc == KILN_OK ? (kind == KILN_HEAP_NT ? "NT heap" : "segment heap")
                         : "unknown (not Windows' heap; under wine, say)");
    /* The test programs carry no manifest, so they get the NT heap; any
     * other implementation shows as unknown. */
    KT_CHECK((rc == KILN_OK && kind == KILN_HEAP_NT) || rc == KILN_ENOTFOUND);

    /* The probe always names a Windows heap: unknown is taken as NT. */
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    KT_REQUIRE_OK(kiln_pool_probe(NULL, NULL, &m));
    KT_CHECK(m.heap == KILN_HEAP_NT || m.heap == KILN_HEAP_SEGMENT);
    KT_CHECK(m.cpus_usable >= 1);
    KT_CHECK(m.cpus_usable <= GetActiveProcessorCount(ALL_PROCESSOR_GROUPS));
    KT_CHECK(!(m.flags & KILN_POOL_MEM_UNKNOWN) && m.mem_available > 0);
    KT_CHECK_EQ(m.quota_us, 0);

    /* The policy's Windows rule on the live machine: half the CPUs on the
     * NT heap. */
    struct kiln_pool_plan p = KILN_POOL_PLAN_INIT;
    KT_REQUIRE_OK(kiln_pool_policy(&m, &(struct kiln_pool_limits)KILN_POOL_LIMITS_INIT, &p));
    if (m.heap == KILN_HEAP_NT && m.cpus_usable > 1) {
        KT_CHECK_EQ(p.workers, m.cpus_usable / 2);
        KT_CHECK_EQ(p.bound, KILN_POOL_BY_HEAP);
        KT_CHECK(strstr(p.reason, "NT heap") != NULL);
    }

    /* Fixture folders mean nothing on Windows. */
    KT_CHECK_EQ(kiln_pool_probe("C:/proc", NULL, &m), KILN_ENOTSUP);
}
#define KT_WIN_CASES , KT_ENTRY(live_heap_kind)
#else
#define KT_WIN_CASES
#endif

KT_MAIN(KT_ENTRY(signatures), KT_ENTRY(garbage_and_short) KT_WIN_CASES)
