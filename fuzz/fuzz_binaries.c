/*
 * fuzz_binaries.c - the payload of a pipeline's driver binaries
 * (src/prep/binaries_format.c): any bytes as a tier record's payload. The
 * parse must stay inside the input, hand out only binaries whose key sizes
 * are in range and whose bytes lie inside it, and whatever it accepts must
 * be exactly what the writer writes for those binaries.
 */
#include "binaries.h"
#include "exact_copy.h"
#include "kiln_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *copy = exact_copy(data, size);
    if (!copy)
        return 0;
    struct kiln__bin_entry e[KILN__BIN_MAX_COUNT];
    int n = kiln__bin_payload_parse(copy, size, e, KILN__BIN_MAX_COUNT);
    if (n >= 0) {
        for (int i = 0; i < n; i++) {
            if (e[i].key_size < 1 || e[i].key_size > KILN__BIN_KEY_MAX || e[i].key < copy ||
                e[i].key + e[i].key_size > copy + size || e[i].data < copy ||
                e[i].data_size > (uint64_t)(copy + size - e[i].data))
                abort();
        }
        size_t need = 0;
        if (kiln__bin_payload_size(e, (uint32_t)n, &need) != KILN_OK || need != size)
            abort();
        unsigned char *again = malloc(size ? size : 1);
        if (!again || kiln__bin_payload_write(e, (uint32_t)n, again, size) != (int64_t)size ||
            memcmp(again, copy, size) != 0)
            abort();
        free(again);
    } else if (n != KILN_EFORMAT && n != KILN_ECORRUPT_RECORD) {
        abort();
    }
    free(copy);
    return 0;
}
