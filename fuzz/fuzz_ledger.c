/*
 * fuzz_ledger.c - the build ledger's parser (src/prep/ledger.c): any bytes
 * as ledger.kpl. The parse must stay inside the input, count every whole
 * slot as a record or as damage, and end appends at a slot boundary; every
 * record it hands out is one the writer could have written (writing it
 * again gives a slot that parses to the same record). Run records (the
 * driver's word on a run) are handed out too, with a known run kind, and
 * memory records (state 3, the budget's learned figures).
 */
#include "exact_copy.h"
#include "kiln_internal.h"
#include "kiln/prep.h"
#include "ledger.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    uint64_t n;
};

static void check_one(void *user, const struct kiln__ledger_entry *e)
{
    struct seen *s = user;
    s->n++;
    if (e->state != KILN__LEDGER_BUILT && e->state != KILN__LEDGER_FAILED &&
        e->state != KILN__LEDGER_RUN && e->state != KILN__LEDGER_MEMORY)
        abort();
    if (e->state == KILN__LEDGER_RUN &&
        (e->run.kind < KILN_LEDGER_RUN_PREPARE || e->run.kind > KILN_LEDGER_RUN_SERVICE))
        abort();
    if (memchr(e->reason, '\0', sizeof(e->reason)) == NULL)
        abort();
    unsigned char slot[KILN__LEDGER_RECORD];
    kiln__ledger_record(e, slot);
    unsigned char file[KILN__LEDGER_HEADER + KILN__LEDGER_RECORD];
    kiln__ledger_header(file);
    memcpy(file + KILN__LEDGER_HEADER, slot, sizeof(slot));
    struct kiln__ledger_scan scan;
    if (kiln__ledger_parse(file, sizeof(file), NULL, NULL, &scan) != KILN_OK || scan.records != 1)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *copy = exact_copy(data, size);
    if (!copy)
        return 0;
    struct seen s = {0};
    struct kiln__ledger_scan scan;
    int rc = kiln__ledger_parse(copy, size, check_one, &s, &scan);
    if (rc == KILN_OK) {
        if (scan.end > size || scan.end < KILN__LEDGER_HEADER ||
            (scan.end - KILN__LEDGER_HEADER) % KILN__LEDGER_RECORD != 0 ||
            size - scan.end >= KILN__LEDGER_RECORD || s.n != scan.records ||
            scan.records + scan.damaged != (scan.end - KILN__LEDGER_HEADER) / KILN__LEDGER_RECORD)
            abort();
    } else if (rc != KILN_EFORMAT && rc != KILN_ECORRUPT_HEADER) {
        abort();
    }
    free(copy);
    return 0;
}
