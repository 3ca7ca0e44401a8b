/*
 * fuzz_topo_size.c - topo's cache size parser (sysfs `size`: "32K", "96M").
 *
 * The parser is checked against a plain 128-bit recomputation: it accepts
 * exactly digits with at most one K/k/M/G suffix and trailing white space,
 * returns the value when it fits in 64 bits and KILN_ERANGE when it does not.
 */
#include "kiln/topo.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    uint64_t got = 12345;
    int rc = kiln_topo_parse_size(text, size, &got);

    size_t len = size;
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\t' ||
                       text[len - 1] == '\r'))
        len--;
    size_t i = 0;
    unsigned __int128 v = 0;
    bool over = false;
    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++) {
        v = v * 10 + (unsigned)(text[i] - '0');
        if (v > UINT64_MAX) {
            over = true;
            v = (unsigned __int128)UINT64_MAX + 1; /* stays bounded */
        }
    }
    int shift = 0;
    bool ok = i > 0;
    if (ok && i < len) {
        char s = text[i];
        shift = (s == 'K' || s == 'k') ? 10 : s == 'M' ? 20 : s == 'G' ? 30 : -1;
        ok = shift >= 0 && i + 1 == len;
    }
    if (!ok) {
        if (rc != KILN_EPARSE || got != 0)
            abort();
        return 0;
    }
    v <<= shift;
    if (over || v > UINT64_MAX) {
        if (rc != KILN_ERANGE || got != 0)
            abort();
        return 0;
    }
    if (rc != 0 || got != (uint64_t)v)
        abort();
    return 0;
}
