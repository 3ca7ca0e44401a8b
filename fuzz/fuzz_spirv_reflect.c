/*
 * fuzz_spirv_reflect.c - the reader of a module's resource interface
 * (kiln__spirv_reflect), which runs on SPIR-V words from a cache or a
 * translator before a stage of kiln's own shapes reaches a driver. Inputs
 * are whole modules; the words are copied to a buffer of exactly their
 * size, so ASan sees any read past them, and the answer is checked for
 * what the reader promises. The same words go through
 * kiln_vk_check_spirv_structure (its parse callbacks read operand words).
 */
#include "vk_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = size / 4;
    uint32_t *words = malloc(n ? n * 4 : 4);
    if (!words)
        return 0;
    memcpy(words, data, n * 4);
    struct kiln__spirv_iface f;
    char why[256];
    why[0] = '\0';
    int rc = kiln__spirv_reflect(words, n, &f, why, sizeof(why));
    if (rc != KILN_OK && rc != KILN_ENOMEM && (rc != KILN_EFORMAT || why[0] == '\0'))
        abort(); /* a refusal always says why */
    if (rc == KILN_OK) {
        if (f.nbindings > KILN__SPIRV_MAX_BINDINGS)
            abort();
        for (uint32_t i = 0; i < f.nbindings; i++)
            (void)kiln__descriptor_type_name(f.bindings[i].type);
    }
    why[0] = '\0';
    rc = kiln_vk_check_spirv_structure(words, n, why, sizeof(why));
    if (rc != KILN_OK && rc != KILN_ENOMEM && rc != KILN_ENOTSUP &&
        (rc != KILN_EFORMAT || why[0] == '\0'))
        abort(); /* a refusal always says why */
    free(words);
    return 0;
}
