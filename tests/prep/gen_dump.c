/*
 * gen_dump.c - writes generated programs out as files, for looking at the
 * default corpus and measuring it with other tools (zstd, spirv-val). Not a
 * test: it is built beside the tests and run by hand.
 *
 *   gen_dump OUTDIR [COUNT [SEED [OPT]]]
 *
 * writes OUTDIR/gen-NNNNNN-KIND.{comp,vert,frag} and the same names with
 * .spv, and prints one line per program (stage sizes, translate time) and a
 * summary.
 */
#include "kiln.h"
#include "kiln-tools/gen.h"
#include "kiln-tools/glsl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int write_file(const char *dir, const char *name, const char *ext, const void *data,
                      size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s%s", dir, name, ext);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        fprintf(stderr, "gen_dump: cannot write %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gen_dump OUTDIR [COUNT [SEED [OPT 0|1|2]]]\n");
        return 2;
    }
    const char *dir = argv[1];
    uint32_t count = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 0) : 12;
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : KILN_GENERATOR_DEFAULT_SEED;
    int opt = argc > 4 ? atoi(argv[4]) : 0;
    struct kiln_glsl *glsl;
    if (kiln_glsl_create((enum kiln_glsl_opt)opt, &glsl) < 0)
        return 1;
    const struct kiln_translator *t = kiln_glsl_translator(glsl);
    double total_s = 0;
    uint64_t total_bytes = 0, min_b = UINT64_MAX, max_b = 0, modules = 0;
    static const char *const ext[] = {".comp", ".vert", ".frag"};
    for (uint32_t i = 0; i < count; i++) {
        struct kiln_program *p;
        if (kiln_generate_program(seed, i, &p) < 0)
            return 1;
        uint64_t t0 = kiln_now_ns();
        int rc = kiln_program_translate(t, p);
        double s = (double)(kiln_now_ns() - t0) / 1e9;
        if (rc < 0) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", dir, p->name);
            for (unsigned k = 0; k < p->nstages; k++)
                write_file(dir, p->name, ext[p->stages[k].src.stage], p->stages[k].src.text,
                           p->stages[k].src.size);
            fprintf(stderr, "gen_dump: %s failed: %s (source written to %s.*)\n", p->name,
                    kiln_errname(rc), path);
            return 1;
        }
        total_s += s;
        printf("%s %.3f s", p->name, s);
        for (unsigned k = 0; k < p->nstages; k++) {
            const struct kiln_program_stage *st = &p->stages[k];
            size_t b = st->nwords * 4;
            char spv[16];
            snprintf(spv, sizeof(spv), "%s.spv", ext[st->src.stage]);
            if (write_file(dir, p->name, ext[st->src.stage], st->src.text, st->src.size) < 0 ||
                write_file(dir, p->name, spv, st->words, b) < 0)
                return 1;
            printf(" %s %zu B (glsl %zu B)", kiln_vk_stage_name(st->src.stage), b, st->src.size);
            total_bytes += b;
            modules++;
            min_b = b < min_b ? b : min_b;
            max_b = b > max_b ? b : max_b;
        }
        printf("\n");
        kiln_program_destroy(p);
    }
    printf("programs %" PRIu32 " modules %" PRIu64 " spirv min %" PRIu64 " mean %.0f max %" PRIu64
           " total %" PRIu64 " B; translate %.3f s total, %.3f s per program\n",
           count, modules, min_b, (double)total_bytes / (double)modules, max_b, total_bytes,
           total_s, total_s / count);
    kiln_glsl_destroy(glsl);
    return 0;
}
