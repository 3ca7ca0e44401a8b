/*
 * fuzz_isolate_frame.c - the frames of isolation's channel (bytes from
 * another process: a worker's answers, the parent's jobs). An input is a
 * stream of frames as one side would read it: each head is checked, its
 * body checksummed and parsed by its type, as isolate.c and
 * isolate_worker.c do (a worker's driver binaries among them). A second pass parses the whole input
 * as each body type, without the checksum, so the field parsers see every shape.
 */
#include "isolate_internal.h"
#include "kiln_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Parses `body` as every body type; checks what an accepted parse says. */
static void parse_all(const uint8_t *body, size_t n)
{
    struct kiln__iso_hello h;
    if (kiln__iso_hello_parse(body, n, &h) == KILN_OK) {
        /* Every name lies inside the body, before the dictionary. */
        size_t names = 0;
        const char *q = h.names;
        for (uint32_t i = 0; i < h.nnames; i++, q += strlen(q) + 1)
            names += strlen(q) + 1;
        if (strlen(h.cache_dir) + 25 + names + h.dict_size != n)
            abort();
        for (uint32_t k = 0; k <= KILN_STATE_KINDS; k++)
            (void)kiln__iso_hello_wants(&h, k, "VK_KHR_ray_tracing_pipeline");
    }
    struct kiln__iso_job j[KILN__ISO_BATCH_MAX];
    uint32_t count = 0;
    if (kiln__iso_batch_parse(body, n, j, KILN__ISO_BATCH_MAX, &count) == KILN_OK) {
        /* The programs fill the body exactly, none empty. */
        size_t sum = 4;
        for (uint32_t i = 0; i < count; i++) {
            if (j[i].size == 0)
                abort();
            sum += 32 + strlen(j[i].name) + 1 + j[i].size;
        }
        if (count == 0 || count > KILN__ISO_BATCH_MAX || sum != n)
            abort();
    }
    struct kiln__iso_result r;
    if (kiln__iso_result_parse(body, n, &r) == KILN_OK) {
        if (r.kind >= KILN_STATE_KINDS || r.status > 0 ||
            strlen(r.why) + KILN__ISO_RESULT_HEAD + 1 != n ||
            r.feedback == KILN__ISO_FEEDBACK_CACHE_HIT)
            abort();
    }
    struct kiln_key key;
    struct kiln__bin_global drv;
    const void *payload;
    size_t psize;
    if (kiln__iso_binaries_parse(body, n, &key, &drv, &payload, &psize) == KILN_OK) {
        /* The global key and the payload lie inside the body, in order. */
        if (drv.key_size == 0 || drv.key_size > KILN__BIN_KEY_MAX || psize == 0 ||
            (const uint8_t *)payload != body + KILN__ISO_BINARIES_HEAD + drv.key_size ||
            KILN__ISO_BINARIES_HEAD + drv.key_size + psize != n)
            abort();
    }
    int32_t status;
    const char *why;
    if (kiln__iso_ready_parse(body, n, &status, &why) == KILN_OK) {
        if (status > 0 || strlen(why) + 5 != n)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Exact-size copies: ASan sees any overread. */
    size_t at = 0;
    while (size - at >= KILN__ISO_HEAD_BYTES) {
        struct kiln__iso_head h;
        if (kiln__iso_head_get(data + at, &h) < 0)
            break;
        at += KILN__ISO_HEAD_BYTES;
        if (h.size > size - at)
            break;
        uint8_t *body = malloc(h.size ? h.size : 1);
        if (!body)
            return 0;
        memcpy(body, data + at, h.size);
        at += h.size;
        if (kiln__iso_body_check(&h, body) == KILN_OK)
            parse_all(body, h.size);
        free(body);
    }
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    parse_all(copy, size);
    free(copy);
    return 0;
}
