/*
 * fuzz_foz.c - the Fossilize archive reader and shader module decoder over
 * arbitrary bytes.
 *
 * The input is read as an archive from memory: every entry is fetched, each
 * shader module decoded, and the module listing (which parses pipeline JSON)
 * run over it. Nothing may crash, leak or read outside the input, and a
 * decoded module must hold what its entry promised. The reader's
 * resynchronisation (after a damaged size or name it searches forward for
 * the next whole entry) must only move forward: every entry it reports,
 * whole or damaged, starts after the one before, and its counts add up
 * (seeds resync-*.foz damage sizes and names of real archives).
 */
#include "kiln/foz.h"

#include <stdlib.h>
#include <string.h>

static void quiet(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)user;
    (void)level;
    (void)module;
    (void)line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kiln_log_set_sink(quiet, NULL);
    struct kiln_foz *foz;
    if (kiln_foz_open_memory(data, size, "fuzz", &foz) != 0)
        return 0;
    struct kiln_foz_entry e;
    int rc;
    unsigned guard = 0;
    uint64_t last = 0, whole = 0, bad = 0;
    while ((rc = kiln_foz_next(foz, &e)) != 0 && guard++ < 100000) {
        if (rc < 0 && rc != KILN_ECORRUPT_RECORD)
            break;
        if (e.offset < 16 || e.offset >= size || (guard > 1 && e.offset <= last))
            abort(); /* an entry must start inside, after the one before */
        last = e.offset;
        whole += rc == 1;
        bad += rc == KILN_ECORRUPT_RECORD;
        if (rc < 0 || e.tag != KILN_FOZ_TAG_SHADER_MODULE)
            continue;
        struct kiln_foz_module m;
        if (kiln_foz_decode_module(&e, &m) == 0) {
            if (m.word_count == 0 || m.words[0] != 0x07230203u || m.hash != e.hash ||
                m.word_count > e.size)
                abort();
            kiln_foz_module_free(&m);
        }
    }
    struct kiln_foz_stats st = KILN_FOZ_STATS_INIT;
    kiln_foz_get_stats(foz, &st);
    if (rc == 0 &&
        (st.entries != whole || st.damaged != bad || st.end > size || st.skipped_bytes > size))
        abort();
    struct kiln_foz_module_info *mods;
    int64_t n = kiln_foz_list_modules(foz, &mods);
    for (int64_t i = 1; i < n; i++)
        if (mods[i - 1].hash >= mods[i].hash)
            abort();
    if (n > 0)
        kiln_foz_module_list_free(mods);
    kiln_foz_close(foz);
    kiln_log_set_sink(NULL, NULL);
    return 0;
}
