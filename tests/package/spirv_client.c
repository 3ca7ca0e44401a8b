/*
 * spirv_client.c - a C client that uses SPIRV-Tools itself beside kiln and
 * links libkiln.a (package.spirv_client_static). libspirv.h defines
 * kDefaultMaxIdBound in every C file that includes it; before kiln renamed
 * its own copy, libkiln.a defined it too and this link failed with a
 * multiple definition.
 */
#include <spirv-tools/libspirv.h>
#include <kiln.h>

#include <stdio.h>

int main(void)
{
    /* A SPIR-V header and nothing else: both validators refuse it. */
    static const uint32_t words[5] = {0x07230203u, 0x00010000u, 0, 1, 0};
    spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_1);
    if (!ctx) {
        fprintf(stderr, "spirv_client: spvContextCreate failed\n");
        return 1;
    }
    spv_const_binary_t bin = {words, 5};
    spv_diagnostic diag = NULL;
    spv_result_t theirs = spvValidate(ctx, &bin, &diag);
    spvDiagnosticDestroy(diag);
    spvContextDestroy(ctx);
    char why[256];
    int ours = kiln_vk_validate_spirv(words, 5, why, sizeof(why));
    if (theirs == SPV_SUCCESS || ours == 0 || kDefaultMaxIdBound == 0) {
        fprintf(stderr, "spirv_client: an empty module passed (%d, %d)\n", (int)theirs, ours);
        return 1;
    }
    printf("spirv_client: both refuse the empty module (kiln: %s)\n", why);
    return 0;
}
