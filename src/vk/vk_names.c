/*
 * vk_names.c - the names vk's log lines and kiln's reports give Vulkan's
 * values: VkResult codes (the stage names are the program record's,
 * src/program/program_names.c).
 *
 * Design: a file of its own below the context, the staging and the
 * pipelines, which all name results in their log lines, so none of them
 * has to call another for a name and no two files of the module call each
 * other both ways. The static assertions keep kiln's KILN_VK_STAGE_* values
 * (kiln/pack.h, which needs no Vulkan header) equal to Vulkan's.
 */
#include "vk_internal.h"

const char *kiln_vk_result_name(int result)
{
    switch (result) {
#define R(x) \
    case x:  \
        return #x;
        R(VK_SUCCESS)
        R(VK_NOT_READY)
        R(VK_TIMEOUT)
        R(VK_INCOMPLETE)
        R(VK_ERROR_OUT_OF_HOST_MEMORY)
        R(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        R(VK_ERROR_INITIALIZATION_FAILED)
        R(VK_ERROR_DEVICE_LOST)
        R(VK_ERROR_MEMORY_MAP_FAILED)
        R(VK_ERROR_LAYER_NOT_PRESENT)
        R(VK_ERROR_EXTENSION_NOT_PRESENT)
        R(VK_ERROR_FEATURE_NOT_PRESENT)
        R(VK_ERROR_INCOMPATIBLE_DRIVER)
        R(VK_ERROR_TOO_MANY_OBJECTS)
        R(VK_ERROR_FORMAT_NOT_SUPPORTED)
        R(VK_ERROR_FRAGMENTED_POOL)
        R(VK_ERROR_UNKNOWN)
        R(VK_ERROR_OUT_OF_POOL_MEMORY)
        R(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        R(VK_ERROR_FRAGMENTATION)
        R(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
        R(VK_PIPELINE_COMPILE_REQUIRED)
        R(VK_ERROR_INVALID_SHADER_NV)
#undef R
    default:
        break;
    }
    return "VK_?";
}

_Static_assert((int)KILN_VK_STAGE_VERTEX_BIT == (int)VK_SHADER_STAGE_VERTEX_BIT, "stage values");
_Static_assert((int)KILN_VK_STAGE_TESS_CONTROL_BIT == (int)VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT,
               "stage values");
_Static_assert((int)KILN_VK_STAGE_TESS_EVAL_BIT == (int)VK_SHADER_STAGE_TESSELLATION_EVALUATION_BIT,
               "stage values");
_Static_assert((int)KILN_VK_STAGE_GEOMETRY_BIT == (int)VK_SHADER_STAGE_GEOMETRY_BIT,
               "stage values");
_Static_assert((int)KILN_VK_STAGE_FRAGMENT_BIT == (int)VK_SHADER_STAGE_FRAGMENT_BIT,
               "stage values");
_Static_assert((int)KILN_VK_STAGE_COMPUTE_BIT == (int)VK_SHADER_STAGE_COMPUTE_BIT, "stage values");
