/*
 * stray_symbol.c - the negative control of layout.core_symbols_prefix: a
 * C file that includes SPIRV-Tools' libspirv.h as vk_validate.c did before
 * it renamed the header's definition, so the archive made of it defines
 * SPIRV-Tools' kDefaultMaxIdBound, which the check must find.
 */
#include <spirv-tools/libspirv.h>

int layout_stray_symbol_used(void);

int layout_stray_symbol_used(void)
{
    return (int)(kDefaultMaxIdBound != 0);
}
