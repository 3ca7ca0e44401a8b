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
 *
 * Whole pipelines (kiln_foz_pipelines_import) are recorded from a running
 * application that built them: a stage that breaks only a semantic rule of
 * the validator but parses (kiln_vk_check_spirv_structure) is stored, not
 * marked validated, with one warning line, and counted in
 * `recorded_invalid`; its build is then the Fossilize builder's to allow
 * (KILN_BUILDER_RECORDED_SPIRV). What does not parse is refused as above.
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
    if (!c || !path || !report)
        return KILN_EINVAL;
    struct kiln_foz_import_report tmp;
    struct kiln_foz_import_report *r = report ? report : &tmp;
    memset(r, 0, sizeof(*r));
    struct kiln_cache_stats cs;
    if (!c || !path || kiln_cache_get_stats(c, &cs) < 0 || cs.read_only)
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

/* ---------------------------------------------------------------------------
 * Whole pipelines (kiln import foz): each pipeline of a kiln_foz_pipelines
 * set is one program of state kind KILN_STATE_FOZ, its stages the recorded
 * ones, under kiln_foz_pipeline_key. The same rules as above: present keys
 * are skipped, every stage is validated before anything is stored, and a
 * pipeline that cannot be stored costs that pipeline only.
 * ------------------------------------------------------------------------ */

/* Packs a program's stages and state into one payload (the layout
 * kiln_prepare stores: kiln/pack.h, payload v3). */
static int pack_pipeline(struct kiln_cache *c, const struct kiln_program *p, bool validated,
                         void **payload, size_t *size)
{
    void **blobs = kiln__calloc(p->nstages, sizeof(*blobs));
    uint8_t **maps = kiln__calloc(p->nstages, sizeof(*maps));
    struct kiln_stage_blob *st = kiln__calloc(p->nstages, sizeof(*st));
    int rc = blobs && maps && st ? KILN_OK : KILN_ENOMEM;
    for (unsigned i = 0; i < p->nstages && rc == KILN_OK; i++) {
        const struct kiln_program_stage *ps = &p->stages[i];
        size_t bsize = 0;
        rc = kiln_pack(ps->words, ps->nwords, KILN_CODEC_KILN, kiln_cache_dict(c), &blobs[i],
                       &bsize);
        st[i] = (struct kiln_stage_blob){.stage = (uint32_t)ps->src.stage,
                                         .nspec = ps->nspec,
                                         .blob = blobs[i],
                                         .blob_size = bsize,
                                         .entry = ps->entry,
                                         .spec_data = ps->spec_data,
                                         .spec_size = ps->spec_size};
        if (rc == KILN_OK && ps->nspec) {
            /* The payload keeps map entries as little-endian u32 triples. */
            maps[i] = kiln__malloc((size_t)ps->nspec * KILN_SPEC_ENTRY_BYTES);
            if (!maps[i]) {
                rc = KILN_ENOMEM;
                break;
            }
            for (uint32_t k = 0; k < ps->nspec; k++) {
                uint8_t *m = maps[i] + (size_t)k * KILN_SPEC_ENTRY_BYTES;
                kiln__store_le32(m, ps->spec[k].constant_id);
                kiln__store_le32(m + 4, ps->spec[k].offset);
                kiln__store_le32(m + 8, ps->spec[k].size);
            }
            st[i].spec_map = maps[i];
        }
    }
    struct kiln_payload_state state = {.kind = p->state_kind,
                                       .bytes = p->state,
                                       .size = p->state_size,
                                       .flags = validated ? KILN_PAYLOAD_VALIDATED : 0};
    if (rc == KILN_OK)
        rc = kiln_program_payload_build_full(&state, st, p->nstages, payload, size);
    for (unsigned i = 0; i < p->nstages; i++) {
        if (blobs)
            kiln_pack_free(blobs[i]);
        if (maps)
            kiln__free(maps[i]);
    }
    kiln__free(blobs);
    kiln__free(maps);
    kiln__free(st);
    return rc;
}

/*
 * Validates every stage. A stage the validator refuses but that parses is
 * accepted (the archive recorded it from a working application): its
 * message goes to `recorded` (one warning line later) and the payload is not
 * marked validated. @return 0, or KILN_EFORMAT with the reason in why.
 */
static int check_pipeline(const struct kiln_program *p, bool *validated, char *why, size_t cap,
                          char *recorded, size_t rcap)
{
    *validated = true;
    recorded[0] = '\0';
    for (unsigned i = 0; i < p->nstages; i++) {
        const struct kiln_program_stage *st = &p->stages[i];
        char msg[384];
        int rc;
        if (st->nwords > KILN_PACK_MAX_SPIRV_BYTES / 4) {
            snprintf(msg, sizeof(msg), "%zu bytes of SPIR-V, more than kiln stores (%u)",
                     st->nwords * 4, KILN_PACK_MAX_SPIRV_BYTES);
            rc = KILN_EFORMAT;
        } else {
            rc = kiln_vk_validate_spirv(st->words, st->nwords, msg, sizeof(msg));
            char parse[256];
            if (rc == KILN_EFORMAT && kiln_vk_check_spirv_structure(st->words, st->nwords, parse,
                                                                    sizeof(parse)) == KILN_OK) {
                *validated = false; /* checked again before a build, by its builder's rule */
                size_t used = strlen(recorded);
                snprintf(recorded + used, rcap - used, "%sits %s module %s: %s", used ? "; " : "",
                         kiln_vk_stage_name(st->src.stage), st->src.name ? st->src.name : "?", msg);
                continue;
            }
        }
        if (rc == KILN_ENOTSUP) {
            *validated = false; /* framing only: checked again before a build */
            continue;
        }
        if (rc < 0) {
            snprintf(why, cap, "its %s module %s is not valid SPIR-V: %s",
                     kiln_vk_stage_name(st->src.stage), st->src.name ? st->src.name : "?", msg);
            return rc;
        }
    }
    return KILN_OK;
}

/* One pipeline not imported: its warning line, counted in `invalid`. */
static void note_invalid(const char *path, const struct kiln_foz_pipelines_entry *x,
                         const char *why, struct kiln_foz_pipelines_report *r)
{
    enum kiln_foz_kind kind = kiln_foz_kind_of(x->tag);
    KILN_WARN("foz", "%s: %s pipeline %016" PRIx64 " not imported: %s", path,
              kiln_foz_kind_name(kind), x->hash, why);
    if (!r->invalid[0] && !r->invalid[1] && !r->invalid[2])
        snprintf(r->first_invalid, sizeof(r->first_invalid), "%s pipeline %016" PRIx64 ": %.280s",
                 kiln_foz_kind_name(kind), x->hash, why);
    r->invalid[kind]++;
}

int kiln_foz_pipelines_import(struct kiln_cache *c, const struct kiln_foz_pipelines *fp,
                              struct kiln_foz_pipelines_report *reports)
{
    struct kiln_cache_stats cs;
    if (!c || !fp || !reports || kiln_cache_get_stats(c, &cs) < 0 || cs.read_only)
        return KILN_EINVAL;
    size_t na = kiln_foz_pipelines_archives(fp);
    for (size_t a = 0; a < na; a++) {
        memset(&reports[a], 0, sizeof(reports[a]));
        kiln_foz_pipelines_get_stats(fp, a, &reports[a].found);
    }
    int rc = KILN_OK;
    uint64_t stored = 0;
    size_t n = kiln_foz_pipelines_count(fp);
    for (size_t i = 0; i < n && rc == KILN_OK; i++) {
        const struct kiln_foz_pipelines_entry *x = kiln_foz_pipelines_get(fp, i);
        struct kiln_foz_pipelines_report *r = &reports[x->archive];
        enum kiln_foz_kind kind = kiln_foz_kind_of(x->tag);
        if (kiln_cache_find(c, x->key, NULL) == KILN_OK) {
            r->present[kind]++;
            continue;
        }
        struct kiln_program *p = NULL;
        rc = kiln_foz_pipelines_load(fp, i, &p);
        if (rc < 0)
            break; /* made at open already: only memory fails here (logged) */
        bool validated;
        char why[512], recorded[1024];
        if (check_pipeline(p, &validated, why, sizeof(why), recorded, sizeof(recorded)) < 0) {
            note_invalid(kiln_foz_pipelines_path(fp, x->archive), x, why, r);
            kiln_program_destroy(p);
            continue;
        }
        void *payload = NULL;
        size_t ps = 0;
        size_t spirv = kiln_program_spirv_bytes(p);
        rc = pack_pipeline(c, p, validated, &payload, &ps);
        if (rc < 0 && rc != KILN_ENOMEM) {
            /* The payload refuses what the record holds (kiln_foz_closure_check
             * refuses it first at open): that pipeline only, never the rest. */
            snprintf(why, sizeof(why), "its stages do not make a program payload: %s",
                     kiln_strerror(rc));
            note_invalid(kiln_foz_pipelines_path(fp, x->archive), x, why, r);
            rc = KILN_OK;
            kiln_pack_free(payload);
            kiln_program_destroy(p);
            continue;
        }
        if (rc == KILN_OK)
            rc = kiln_cache_put(c, x->key, payload, ps, (uint32_t)spirv, KILN_CODEC_KILN,
                                (uint16_t)p->nstages);
        if (rc == KILN_OK && recorded[0]) {
            KILN_WARN("foz",
                      "%s: %s pipeline %016" PRIx64
                      " imported though the SPIR-V validator refuses %s (recorded from an "
                      "application; it parses)",
                      kiln_foz_pipelines_path(fp, x->archive), kiln_foz_kind_name(kind), x->hash,
                      recorded);
            r->recorded_invalid[kind]++;
        }
        if (rc == KILN_OK) {
            r->imported[kind]++;
            r->spirv_bytes += spirv;
            r->packed_bytes += ps;
            stored++;
        } else {
            KILN_ERROR("foz", "%s: %s pipeline %016" PRIx64 ": cannot store it: %s",
                       kiln_foz_pipelines_path(fp, x->archive), kiln_foz_kind_name(kind), x->hash,
                       kiln_strerror(rc));
        }
        kiln_pack_free(payload);
        kiln_program_destroy(p);
    }
    if (stored) {
        int s = kiln_cache_sync(c);
        if (rc == KILN_OK)
            rc = s;
    }
    return rc;
}
