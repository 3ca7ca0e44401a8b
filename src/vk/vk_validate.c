/*
 * vk_validate.c - SPIR-V's validator in front of the driver, on or off.
 *
 * The checks themselves need no Vulkan and live with the program record
 * (src/program/program_spirv.c, kiln/program.h). A context only says
 * whether every blob it unpacks goes through the validator before the
 * driver sees it (kiln_vk_set_validation); words handed over already
 * opened (kiln_vk_stage.words, checked by kiln_program_open) are not
 * checked again.
 */
#include "vk_internal.h"

/* The smallest header: enough for the validator to answer, not to pass. */
static const uint32_t probe[5] = {0x07230203u, 0x00010000u, 0, 1, 0};

int kiln_vk_set_validation(struct kiln_vk *vk, bool on)
{
    if (!vk)
        return KILN_EINVAL;
    char why[128];
    bool have = kiln_vk_validate_spirv(probe, 5, why, sizeof(why)) != KILN_ENOTSUP;
    vk->validate = on && have;
    if (on && !have) {
        KILN_INFO("vk", "SPIR-V validation asked for, but this build has no SPIRV-Tools");
        return KILN_ENOTSUP;
    }
    return KILN_OK;
}
