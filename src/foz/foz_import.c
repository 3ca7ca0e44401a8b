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
 * - payload: sealed by kiln_program_seal (kiln/program.h: checked, packed
 *   with KILN_CODEC_KILN and the cache's dictionary, marked validated), the
 *   one sequence kiln_prepare and kiln_cache_put_program use too; raw size
 *   = the SPIR-V bytes.
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
 * before it is packed (inside kiln_program_seal, quiet: the line is ours). One the validator
 * refuses, or one too large for a blob, costs that module only: one warning line, counted in
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

/* Seals a program quietly (its refusal is logged here, in the import's
 * words), as a caller's own layout: `st` and `p` on the stack. */
static int seal(struct kiln_cache *c, struct kiln_program *p, uint32_t flags,
                struct kiln_program_sealed *out)
{
    struct kiln_program_seal_options o = {
        .size = sizeof(o),
        .flags = KILN_PROGRAM_SEAL_QUIET | flags,
        .dict = kiln_cache_dict(c),
    };
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    return kiln_program_seal(p, &o, out);
}

/*
 * Checks, packs and stores one decoded module. A module that cannot be
 * stored (not valid SPIR-V, too large) costs that module only: one warning
 * line naming the archive, the module and the reason, counted in
 * `invalid`. A build without SPIRV-Tools stores what passes the framing
 * check: the open before a build then refuses it (kiln_program_open).
 * @return 0, or a cache error.
 */
static int store(struct kiln_cache *c, const char *path, const struct kiln_foz_entry *e,
                 const struct kiln_foz_module *m, uint32_t kind, struct kiln_foz_import_report *r)
{
    char name[20];
    snprintf(name, sizeof(name), "%016" PRIx64, e->hash);
    struct kiln_program_stage st = {
        .src = {.stage = kind, .name = name}, .words = m->words, .nwords = m->word_count};
    struct kiln_program p = {.size = sizeof(struct kiln_program),
                             .stage_size = sizeof(struct kiln_program_stage),
                             .name = name,
                             .nstages = 1,
                             .stages = &st,
                             .has_key = true,
                             .key = kiln_foz_key(e->hash)};
    struct kiln_program_sealed sd;
    int rc = seal(c, &p, 0, &sd);
    if (rc < 0 && rc != KILN_ENOMEM) {
        KILN_WARN("foz", "%s: shader module %016" PRIx64 " at offset %" PRIu64 " not imported: %s",
                  path, e->hash, e->offset, sd.why[0] ? sd.why : kiln_strerror(rc));
        r->invalid++;
        return KILN_OK;
    }
    if (rc == KILN_OK)
        rc = kiln_cache_put(c, sd.key, sd.payload, sd.payload_size, sd.spirv_bytes, KILN_CODEC_KILN,
                            1);
    if (rc == KILN_OK) {
        r->imported++;
        r->spirv_bytes += sd.spirv_bytes;
        r->packed_bytes += sd.payload_size;
    }
    kiln_program_sealed_clear(&sd);
    return rc;
}

/* The import into the library's own report `r` (zeroed, size set). */
static int import_modules(struct kiln_cache *c, const char *path, struct kiln_foz_import_report *r)
{
    struct kiln_cache_stats cs = KILN_CACHE_STATS_INIT;
    if (kiln_cache_get_stats(c, &cs) < 0 || cs.read_only)
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
        if (d == KILN_ENOMEM) {
            rc = d; /* not the module's fault: the import stops */
            break;
        }
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
        uint64_t before = r->imported;
        rc = store(c, path, &e, &m, stages, r);
        if (rc == KILN_OK && r->imported > before && (stages & KILN_VK_STAGE_COMPUTE_BIT))
            r->compute++;
        kiln_foz_module_free(&m);
    }
    struct kiln_foz_stats fs = KILN_FOZ_STATS_INIT;
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

int kiln_foz_import(struct kiln_cache *c, const char *path, struct kiln_foz_import_report *report)
{
    if (!c || !path)
        return KILN_EINVAL;
    if (report)
        KILN_TRY(kiln__struct_out_check(report, "kiln_foz_import_report"));
    struct kiln_foz_import_report r = KILN_FOZ_IMPORT_REPORT_INIT;
    memset(&r, 0, sizeof(r));
    r.size = sizeof(r);
    int rc = import_modules(c, path, &r);
    if (report)
        KILN_STRUCT_OUT(report, &r);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Whole pipelines (kiln import foz): each pipeline of a kiln_foz_pipelines
 * set is one program of state kind KILN_STATE_FOZ, its stages the recorded
 * ones, under kiln_foz_pipeline_key. The same rules as above: present keys
 * are skipped, every stage is validated before anything is stored, and a
 * pipeline that cannot be stored costs that pipeline only.
 * ------------------------------------------------------------------------ */

/* One pipeline not imported: its warning line, counted in `invalid`. */
static void note_invalid(const char *path, const struct kiln_foz_pipelines_entry *x,
                         const char *why, struct kiln_foz_pipelines_report *r)
{
    enum kiln_foz_kind kind = kiln_foz_kind_of(x->tag);
    char label[96];
    kiln__foz_pipeline_label(label, sizeof(label), kind, x->hash, x->key);
    KILN_WARN("foz", "%s: %s not imported: %s", path, label, why);
    if (!r->invalid[0] && !r->invalid[1] && !r->invalid[2])
        snprintf(r->first_invalid, sizeof(r->first_invalid), "%s: %.200s", label, why);
    r->invalid[kind]++;
}

/* The import into the library's own reports `reports` (one per archive,
 * zeroed, sizes set). */
static int import_pipelines(struct kiln_cache *c, const struct kiln_foz_pipelines *fp,
                            struct kiln_foz_pipelines_report *reports,
                            kiln_cache_progress_fn progress, void *user)
{
    int rc = KILN_OK;
    uint64_t stored = 0;
    size_t n = kiln_foz_pipelines_count(fp);
    uint64_t shown_ns = 0;
    for (size_t i = 0; i < n && rc == KILN_OK; i++) {
        uint64_t now = progress ? kiln_now_ns() : 0;
        if (progress && now - shown_ns >= 100000000u) {
            shown_ns = now; /* at most ten reports a second */
            progress(user, "import", i, n);
        }
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
        /* Every stage checked (a recorded stage that parses is kept, not
         * marked validated: its builder's rule decides at build time). */
        p->has_key = true;
        p->key = x->key;
        struct kiln_program_sealed sd;
        rc = seal(c, p, KILN_PROGRAM_RECORDED_SPIRV, &sd);
        if (rc < 0 && rc != KILN_ENOMEM) {
            /* Not valid SPIR-V, or what the payload refuses (kiln_foz_closure_check
             * refuses it first at open): that pipeline only, never the rest. */
            char why[600];
            if (sd.why[0])
                snprintf(why, sizeof(why), "%s", sd.why);
            else
                snprintf(why, sizeof(why), "its stages do not make a program payload: %s",
                         kiln_strerror(rc));
            note_invalid(kiln_foz_pipelines_path(fp, x->archive), x, why, r);
            rc = KILN_OK;
            kiln_program_destroy(p);
            continue;
        }
        size_t spirv = sd.spirv_bytes, ps = sd.payload_size;
        if (rc == KILN_OK)
            rc = kiln_cache_put(c, sd.key, sd.payload, ps, (uint32_t)spirv, KILN_CODEC_KILN,
                                (uint16_t)p->nstages);
        if (rc == KILN_OK && sd.recorded_invalid) {
            char label[96];
            KILN_WARN("foz",
                      "%s: %s imported though the SPIR-V validator refuses %s (recorded from an "
                      "application; it parses)",
                      kiln_foz_pipelines_path(fp, x->archive),
                      kiln__foz_pipeline_label(label, sizeof(label), kind, x->hash, x->key),
                      sd.why);
            r->recorded_invalid[kind]++;
        }
        if (rc == KILN_OK) {
            r->imported[kind]++;
            r->spirv_bytes += spirv;
            r->packed_bytes += ps;
            stored++;
        } else {
            char label[96];
            KILN_ERROR("foz", "%s: %s: cannot store it: %s",
                       kiln_foz_pipelines_path(fp, x->archive),
                       kiln__foz_pipeline_label(label, sizeof(label), kind, x->hash, x->key),
                       kiln_strerror(rc));
        }
        kiln_program_sealed_clear(&sd);
        kiln_program_destroy(p);
    }
    if (stored) {
        int s = kiln_cache_sync(c);
        if (rc == KILN_OK)
            rc = s;
    }
    if (progress && rc == KILN_OK)
        progress(user, "import", n, n);
    return rc;
}

int kiln_foz_pipelines_import_sized(struct kiln_cache *c, const struct kiln_foz_pipelines *fp,
                                    size_t report_size, struct kiln_foz_pipelines_report *reports,
                                    kiln_cache_progress_fn progress, void *user)
{
    struct kiln_cache_stats cs = KILN_CACHE_STATS_INIT;
    if (!c || !fp || !reports || report_size < sizeof(size_t) || kiln_cache_get_stats(c, &cs) < 0 ||
        cs.read_only)
        return KILN_EINVAL;
    size_t na = kiln_foz_pipelines_archives(fp);
    struct kiln_foz_pipelines_report *own = kiln__calloc(na ? na : 1, sizeof(*own));
    if (!own)
        return KILN_ENOMEM;
    for (size_t a = 0; a < na; a++) {
        own[a].size = KILN_MIN(report_size, sizeof(own[a]));
        own[a].found.size = sizeof(own[a].found);
        kiln_foz_pipelines_get_stats(fp, a, &own[a].found);
    }
    int rc = import_pipelines(c, fp, own, progress, user);
    for (size_t a = 0; a < na; a++)
        kiln__elem_out(reports, report_size, a, &own[a], sizeof(own[a]));
    kiln__free(own);
    return rc;
}
