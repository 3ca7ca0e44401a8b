/*
 * program_names.c - the one stage-name table: the short name of a
 * VkShaderStageFlagBits value, as every log line and command gives it.
 *
 * Design: with the program record, below the Vulkan layer, since sealing
 * and opening a program name stages in their log lines; the values are
 * kiln's KILN_VK_STAGE_* (kiln/pack.h, equal to Vulkan's: vk_names.c
 * asserts it), so no Vulkan header is needed here.
 */
#include "kiln_internal.h"

#include "kiln/program.h"

const char *kiln_vk_stage_name(uint32_t stage)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } names[] = {
        {KILN_VK_STAGE_VERTEX_BIT, "vertex"},
        {KILN_VK_STAGE_TESS_CONTROL_BIT, "tess-control"},
        {KILN_VK_STAGE_TESS_EVAL_BIT, "tess-eval"},
        {KILN_VK_STAGE_GEOMETRY_BIT, "geometry"},
        {KILN_VK_STAGE_FRAGMENT_BIT, "fragment"},
        {KILN_VK_STAGE_COMPUTE_BIT, "compute"},
        {KILN_VK_STAGE_TASK_BIT, "task"},
        {KILN_VK_STAGE_MESH_BIT, "mesh"},
        {KILN_VK_STAGE_RAYGEN_BIT, "raygen"},
        {KILN_VK_STAGE_ANY_HIT_BIT, "anyhit"},
        {KILN_VK_STAGE_CLOSEST_HIT_BIT, "closesthit"},
        {KILN_VK_STAGE_MISS_BIT, "miss"},
        {KILN_VK_STAGE_INTERSECTION_BIT, "intersection"},
        {KILN_VK_STAGE_CALLABLE_BIT, "callable"},
    };
    if (stage == 0)
        return "none";
    if (stage & (stage - 1))
        return "several";
    for (size_t i = 0; i < KILN_ARRAY_LEN(names); i++)
        if (names[i].bit == stage)
            return names[i].name;
    return "?";
}
