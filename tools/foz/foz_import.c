/*
 * foz_import.c - bringing the shader modules of Fossilize archives into a
 * program cache, through the cache's public API only.
 *
 * Each module becomes a one-stage program, so that it is stored, listed,
 * loaded and merged like any other record:
 *
 * - key: kiln_foz_key(hash), XXH3-128 of "foz" and the module's
 *   64-bit Fossilize hash. Fossilize hashes a module's create info, code
 *   included, so the same module in two archives is one record, and a
 *   re-import finds every key present and adds nothing;
 * - stage kind: the archive's pipelines say where a module is used
 *   (kiln_foz_list_modules): the VkShaderStageFlagBits of every stage that
 *   uses it (one bit, several, or 0 when no pipeline names it);
 * - payload: kiln_pack with KILN_CODEC_KILN (and the cache's dictionary),
 *   joined by kiln_program_payload_build; raw size = the SPIR-V bytes.
 *
 * The stamp of such a cache is KILN_FOZ_STAMP: nothing was translated,
 * the SPIR-V is the capture's.
 *
 * Damage is reported, never imported: a damaged entry (CRC, inflate, size,
 * an unreadable name) is counted and skipped, and the reader reads on from
 * the next whole entry; a module that does not decode is skipped too; a
 * cut-off last entry is ignored as the format says.
 *
 * Nothing invalid is stored: each module goes through kiln_vk_validate_spirv
 * before it is packed (check_module). One the validator refuses, or one too
 * large for a blob, costs that module only: one warning line, counted in
 * `invalid`. Only a cache error (a failed put or sync) stops the import,
 * since every later put would fail alike.
 */
#include "foz_private.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kiln_key kiln_foz_key(uint64_t hash)
{
    unsigned char b[11] = {'f', 'o', 'z'};
    kiln__store_le64(b + 3, hash);
    return kiln_hash128(b, sizeof(b));
}

/*
 * Checks one decoded module before it is stored. @return 0, or KILN_EFORMAT
 * after one warning line naming the archive, the module and the reason. A
 * build without SPIRV-Tools stores what passes the framing check: the
 * pipeline phase then refuses to build it (prep's validate_stages).
 */
static int check_module(const char *path, const struct kiln_foz_entry *e,
                        const struct kiln_foz_module *m, bool *validated)
{
    char why[512];
    int rc;
    *validated = false;
    if (m->word_count > KILN_PACK_MAX_SPIRV_BYTES / 4) {
        snprintf(why, sizeof(why), "%zu bytes of SPIR-V, more than kiln stores (%u)",
                 m->word_count * 4, KILN_PACK_MAX_SPIRV_BYTES);
        rc = KILN_EFORMAT;
    } else {
        rc = kiln_vk_validate_spirv(m->words, m->word_count, why, sizeof(why));
        if (rc == KILN_ENOTSUP)
            return KILN_OK;
        *validated = rc == KILN_OK;
    }
    if (rc < 0)
        KILN_WARN("foz",
                  "%s: shader module %016" PRIx64 " at offset %" PRIu64 " not imported: %s%s", path,
                  e->hash, e->offset, rc == KILN_EFORMAT ? "" : "cannot validate: ", why);
    return rc;
}

/* Packs and stores one decoded module. */
static int store(struct kiln_cache *c, struct kiln_key key, const struct kiln_foz_module *m,
                 uint32_t kind, bool validated, struct kiln_foz_import_report *r)
{
    void *blob = NULL, *payload = NULL;
    size_t bs = 0, ps = 0;
    int rc = kiln_pack(m->words, m->word_count, KILN_CODEC_KILN, kiln_cache_dict(c), &blob, &bs);
    if (rc == KILN_OK) {
        struct kiln_stage_blob st = {.stage = kind, .blob = blob, .blob_size = bs};
        struct kiln_payload_state state = {.kind = KILN_STATE_BUILTIN,
                                           .flags = validated ? KILN_PAYLOAD_VALIDATED : 0};
        rc = kiln_program_payload_build_full(&state, &st, 1, &payload, &ps);
    }
    if (rc == KILN_OK)
        rc = kiln_cache_put(c, key, payload, ps, (uint32_t)(m->word_count * 4), KILN_CODEC_KILN, 1);
    if (rc == KILN_OK) {
        r->imported++;
        r->spirv_bytes += m->word_count * 4;
        r->packed_bytes += ps;
    }
    kiln_pack_free(blob);
    kiln_pack_free(payload);
    return rc;
}

int kiln_foz_import(struct kiln_cache *c, const char *path, struct kiln_foz_import_report *report)
{
    struct kiln_foz_import_report tmp;
    struct kiln_foz_import_report *r = report ? report : &tmp;
    memset(r, 0, sizeof(*r));
    struct kiln_cache_stats cs;
    if (!c || !path || kiln_cache_stats(c, &cs) < 0 || cs.read_only)
        return KILN_EINVAL;
    struct kiln_foz *foz;
    KILN_TRY(kiln_foz_open(NULL, path, &foz));
    struct kiln_foz_module_info *mods = NULL;
    int64_t nmods = kiln_foz_list_modules(foz, &mods);
    int rc = nmods < 0 ? (int)nmods : KILN_OK;
    struct kiln_foz_entry e;
    while (rc == KILN_OK) {
        int got = kiln_foz_next(foz, &e);
        if (got == 0)
            break;
        if (got == KILN_ECORRUPT_RECORD) {
            if (e.tag == KILN_FOZ_TAG_SHADER_MODULE) {
                r->modules++;
                r->damaged++;
            }
            continue;
        }
        if (got < 0) {
            rc = got;
            break;
        }
        if (e.tag != KILN_FOZ_TAG_SHADER_MODULE)
            continue;
        r->modules++;
        struct kiln_key key = kiln_foz_key(e.hash);
        if (kiln_cache_find(c, key, NULL) == KILN_OK) {
            r->present++;
            continue;
        }
        struct kiln_foz_module m;
        int d = kiln_foz_decode_module(&e, &m);
        if (d < 0) {
            KILN_WARN("cache",
                      "%s: shader module %016" PRIx64 " at offset %" PRIu64
                      " does not decode (%s); skipped",
                      path, e.hash, e.offset, kiln_strerror(d));
            r->undecodable++;
            continue;
        }
        const struct kiln_foz_module_info *info =
            kiln_foz_module_list_find(mods, nmods > 0 ? (size_t)nmods : 0, e.hash);
        uint32_t stages = info ? info->stages : 0;
        bool validated;
        if (check_module(path, &e, &m, &validated) < 0) {
            r->invalid++;
            kiln_foz_module_free(&m);
            continue;
        }
        rc = store(c, key, &m, stages, validated, r);
        if (rc == KILN_OK && (stages & KILN_VK_STAGE_COMPUTE_BIT))
            r->compute++;
        kiln_foz_module_free(&m);
    }
    struct kiln_foz_stats fs;
    kiln_foz_get_stats(foz, &fs);
    r->truncated = fs.truncated;
    r->truncated_at = fs.truncated_at;
    r->entries_skipped = fs.damaged;
    r->resyncs = fs.resyncs;
    r->skipped_bytes = fs.skipped_bytes;
    kiln_foz_module_list_free(mods);
    kiln_foz_close(foz);
    if (r->imported) {
        int s = kiln_cache_sync(c);
        if (rc == KILN_OK)
            rc = s;
    }
    return rc;
}
