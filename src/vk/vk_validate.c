/*
 * vk_validate.c - SPIR-V's validator in front of the driver.
 *
 * A driver's compiler trusts its input: given a module that is well-formed
 * word by word but meaningless (a translator's bug, a bad cache write that
 * slipped past every checksum), one driver returns an error and another
 * ends the process. With validation on, SPIRV-Tools checks every stage
 * under the Vulkan 1.1 rules first and a bad stage fails alone, with the
 * validator's message in its log line. A validator context is made per call:
 * it costs microseconds against the milliseconds of a pipeline build, and
 * shares nothing between threads.
 *
 * kiln_vk_validate_spirv is the one check every module passes before it is
 * stored (kiln import foz, kiln_prepare) and again before any build
 * (prep's pipeline phase): the framing check first, so a build without
 * SPIRV-Tools still refuses what is not SPIR-V at all, and says so
 * (KILN_ENOTSUP) when that is all it could check. Its callers choose what
 * an unchecked module may do: stored, never built.
 *
 * kiln_vk_check_spirv_structure is the weaker check for modules recorded
 * from a working application (a Fossilize archive): the framing check and
 * SPIRV-Tools' binary parse, which refuses unknown opcodes and
 * instructions whose length disagrees with their operands (what makes a
 * driver's compiler end the process), but none of the validator's
 * semantic rules, which real drivers do not enforce. Its callers use it
 * only after kiln_vk_validate_spirv refused a module, to tell a module
 * that is not SPIR-V from one that breaks a rule (see docs/reliability.md).
 */
#include "vk_internal.h"

#include <stdio.h>
#include <string.h>

#ifdef KILN_HAVE_SPIRV_TOOLS
#include <spirv-tools/libspirv.h>

int kiln__spirv_validate(const uint32_t *words, size_t n, char *why, size_t cap)
{
    spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_1);
    if (!ctx) {
        snprintf(why, cap, "the SPIR-V validator could not start");
        return KILN_ENOMEM;
    }
    spv_diagnostic diag = NULL;
    spv_result_t res = spvValidateBinary(ctx, words, n, &diag);
    int rc = KILN_OK;
    if (res != SPV_SUCCESS) {
        const char *msg = diag && diag->error ? diag->error : "rejected by the SPIR-V validator";
        snprintf(why, cap, "%s", msg);
        /* One event, one line: the validator's messages may span several. */
        for (char *p = why; (p = strchr(p, '\n')) != NULL;)
            *p = ' ';
        for (size_t len = strlen(why); len > 0 && why[len - 1] == ' ';)
            why[--len] = '\0';
        rc = KILN_EFORMAT;
    }
    spvDiagnosticDestroy(diag);
    spvContextDestroy(ctx);
    return rc;
}

int kiln_vk_set_validation(struct kiln_vk *vk, bool on)
{
    if (!vk)
        return KILN_EINVAL;
    vk->validate = on;
    return KILN_OK;
}

static int kiln__spirv_parse(const uint32_t *words, size_t n, char *why, size_t cap)
{
    spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_1);
    if (!ctx) {
        snprintf(why, cap, "the SPIR-V parser could not start");
        return KILN_ENOMEM;
    }
    spv_diagnostic diag = NULL;
    /* No callbacks: the parse itself checks every opcode and operand. */
    spv_result_t res = spvBinaryParse(ctx, NULL, words, n, NULL, NULL, &diag);
    int rc = KILN_OK;
    if (res != SPV_SUCCESS) {
        const char *msg = diag && diag->error ? diag->error : "not parseable SPIR-V";
        snprintf(why, cap, "%s", msg);
        for (char *p = why; (p = strchr(p, '\n')) != NULL;)
            *p = ' ';
        rc = KILN_EFORMAT;
    }
    spvDiagnosticDestroy(diag);
    spvContextDestroy(ctx);
    return rc;
}

#else

int kiln__spirv_validate(const uint32_t *words, size_t n, char *why, size_t cap)
{
    (void)words;
    (void)n;
    snprintf(why, cap, "this build has no SPIR-V validator");
    return KILN_ENOTSUP;
}

static int kiln__spirv_parse(const uint32_t *words, size_t n, char *why, size_t cap)
{
    (void)words;
    (void)n;
    snprintf(why, cap, "this build has no SPIR-V parser");
    return KILN_ENOTSUP;
}

int kiln_vk_set_validation(struct kiln_vk *vk, bool on)
{
    if (!vk)
        return KILN_EINVAL;
    vk->validate = false;
    if (on)
        KILN_INFO("vk", "SPIR-V validation asked for, but this build has no SPIRV-Tools");
    return on ? KILN_ENOTSUP : KILN_OK;
}

#endif

int kiln_vk_validate_spirv(const uint32_t *words, size_t n, char *why, size_t cap)
{
    if ((!words && n) || !why || cap == 0)
        return KILN_EINVAL;
    KILN_TRY(kiln__spirv_check(words, n, why, cap));
    return kiln__spirv_validate(words, n, why, cap);
}

int kiln_vk_check_spirv_structure(const uint32_t *words, size_t n, char *why, size_t cap)
{
    if ((!words && n) || !why || cap == 0)
        return KILN_EINVAL;
    KILN_TRY(kiln__spirv_check(words, n, why, cap));
    return kiln__spirv_parse(words, n, why, cap);
}
