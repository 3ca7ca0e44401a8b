#!/bin/sh
# usage: include_order.sh CC CXX INCLUDE BUILD_INCLUDE [VULKAN_INCLUDE]
# Compiles one client, as C and as C++ (when CXX is given), with kiln.h
# before and after <vulkan/vulkan.h>, and once more with VK_NO_PROTOTYPES
# and a loader's own function pointers (as volk declares them): each time
# it must see every struct that uses Vulkan's types (kiln_vk_external,
# kiln_vk_handles, kiln_vk_staged, kiln_build_request) and the functions
# taking them. Before the fix, kiln.h first left them out silently.
set -u
cc=${1:?usage: include_order.sh CC CXX INCLUDE BUILD_INCLUDE [VULKAN_INCLUDE]}
cxx=$2 inc=$3 binc=$4 vinc=${5:-}
tmp=${TMPDIR:-/tmp}/kiln-include-order.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT

# body: what the client does with the Vulkan-typed part of kiln.
body='
#if defined(KILN_VK_TYPES) && !KILN_VK_TYPES
#error "kiln.h left its Vulkan part out"
#endif
static int use(struct kiln_vk *vk, struct kiln_build_request *req)
{
    struct kiln_vk_external ext;
    struct kiln_vk_handles h;
    struct kiln_vk_staged st;
    struct kiln_vk_pipeline *p = 0;
    memset(&ext, 0, sizeof(ext));
    ext.device = req->device;
    ext.pipeline_cache = req->pipeline_cache;
    kiln_vk_get_handles(vk, &h);
    memset(&st, 0, sizeof(st));
    kiln_vk_stage_release(vk, &st);
    req->pipeline = VK_NULL_HANDLE;
    return kiln_vk_pipeline_adopt(vk, req->pipeline, &p) + (int)h.queue_family +
           (int)ext.queue_family + (int)sizeof(req->why);
}
int main(void) { return use(0, 0); }
'
volk='
extern PFN_vkCreateInstance vkCreateInstance;
PFN_vkCreateInstance vkCreateInstance;
'
failed=0
# check NAME LANG COMPILER FIRST SECOND [PRELUDE]: compiles the client.
check() {
    name=$1 lang=$2 comp=$3
    src=$tmp/$name.$lang
    {
        printf '%s\n' "${6:-}"
        printf '#include %s\n#include %s\n#include <string.h>\n' "$4" "$5"
        [ -n "${6:-}" ] && printf '%s\n' "$volk"
        printf '%s\n' "$body"
    } >"$src"
    if [ "$lang" = c ]; then
        std="-x c -std=c11"
    else
        std="-x c++ -std=c++11"
    fi
    # shellcheck disable=SC2086
    if "$comp" $std -Wall -Wextra -pedantic -Werror -c -o "$tmp/$name.o" -I"$inc" -I"$binc" \
        ${vinc:+-I"$vinc"} "$src" 2>"$tmp/$name.err"; then
        echo "ok   $name"
    else
        echo "FAIL $name"
        head -5 "$tmp/$name.err"
        failed=1
    fi
}
langs="c"
if [ -n "$cxx" ] && command -v "$cxx" >/dev/null 2>&1; then
    langs="c cpp"
fi
for lang in $langs; do
    comp=$cc
    [ "$lang" = cpp ] && comp=$cxx
    check "kiln-first-$lang" "$lang" "$comp" '<kiln.h>' '<vulkan/vulkan.h>'
    check "vulkan-first-$lang" "$lang" "$comp" '<vulkan/vulkan.h>' '<kiln.h>'
    check "no-prototypes-$lang" "$lang" "$comp" '<kiln.h>' '<vulkan/vulkan.h>' \
        '#define VK_NO_PROTOTYPES'
done
exit $failed
