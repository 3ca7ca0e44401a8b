/*
 * fuzz_journal.c - the crash journal's parser (src/prep/journal.c): any
 * bytes as an inflight-N.kpj file. The parse must stay inside the input,
 * count no more slots than the header names and the bytes hold, and every
 * program it hands out is one the writer could have written (writing it
 * again gives a slot that parses to the same program).
 */
#include "exact_copy.h"
#include "kiln_internal.h"
#include "journal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    uint32_t n;
};

static void check_one(void *user, const struct kiln__journal_entry *e)
{
    struct seen *s = user;
    s->n++;
    if (memchr(e->name, '\0', sizeof(e->name)) == NULL)
        abort();
    unsigned char file[KILN__JOURNAL_HEADER + KILN__JOURNAL_SLOT];
    struct kiln__journal_head h = {.nslots = 1};
    kiln__journal_header(&h, file);
    kiln__journal_slot(e, file + KILN__JOURNAL_HEADER);
    struct kiln__journal_head h2;
    struct kiln__journal_scan scan;
    if (kiln__journal_parse(file, sizeof(file), &h2, NULL, NULL, &scan) != KILN_OK ||
        scan.in_flight != 1 || scan.damaged != 0 || h2.nslots != 1)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *copy = exact_copy(data, size);
    if (!copy)
        return 0;
    struct seen s = {0};
    struct kiln__journal_head head;
    struct kiln__journal_scan scan;
    int rc = kiln__journal_parse(copy, size, &head, check_one, &s, &scan);
    if (rc == KILN_OK) {
        size_t whole =
            size >= KILN__JOURNAL_HEADER ? (size - KILN__JOURNAL_HEADER) / KILN__JOURNAL_SLOT : 0;
        if (head.nslots > KILN__JOURNAL_MAX_SLOTS || s.n != scan.in_flight ||
            (uint64_t)scan.in_flight + scan.damaged > whole ||
            (uint64_t)scan.in_flight + scan.damaged > head.nslots)
            abort();
    } else if (rc != KILN_EFORMAT && rc != KILN_ECORRUPT_HEADER) {
        abort();
    }
    free(copy);
    return 0;
}
