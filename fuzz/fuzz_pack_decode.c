/*
 * fuzz_pack_decode.c - fuzzes every parser of packed bytes: a blob
 * (kiln_blob_info, kiln_unpack, kiln_unpack_scratch; with and without a
 * dictionary) and a program payload (kiln_program_payload_parse, then each
 * stage's blob).
 *
 * Blobs of every format are decoded (formats 1 to 3, which kiln made
 * before, and format 4, what kiln_pack makes now, with its built-in
 * dictionary); the seed corpus has all four. Formats 3 and 4 check their
 * seal (a hash of the packed bytes) before they decode anything, so a
 * mutated blob would never get past it: each such input is also unpacked
 * with its seal rewritten to match, which hands the mutated bytes to zstd
 * and the transform's decoder. The property beyond "no crash": whatever
 * unpacks without an error is exactly as long as its header says, and packs
 * and unpacks again to the same words (so the encoder is fuzzed with
 * whatever the decoder makes).
 *
 * The dictionary is trained at start-up on synthetic modules made here from
 * a fixed seed, so it is the same in every run and blobs in the seed corpus
 * that name it decode with it. Built with -DFUZZ_PACK_WRITE_SEEDS, this
 * file is instead a program that writes the seed corpus into the folder
 * named on its command line:
 *
 *   cc -DFUZZ_PACK_WRITE_SEEDS -Iinclude -Ibuild/include -Isrc/common -Isrc/pack \
 *      fuzz/fuzz_pack_decode.c \
 *      build/src/pack/libkiln_pack.a build/src/common/libkiln_common.a \
 *      -lzstd -lxxhash -lpthread -o /tmp/seeds && /tmp/seeds fuzz/corpus/pack_decode
 */
#include "kiln.h"
#include "kiln_internal.h"
#include "pack_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- synthetic modules ---------------------------------------------------- */

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t emit(uint32_t *w, size_t n, uint32_t op, const uint32_t *ops, uint32_t nops)
{
    w[n++] = (nops + 1) << 16 | op;
    for (uint32_t i = 0; i < nops; i++)
        w[n++] = ops[i];
    return n;
}

/*
 * A small module shaped like compiled shader code: a header, a few
 * declarations, then arithmetic on loads and stores with ids handed out in
 * order. Not valid for a driver; only its statistics matter.
 * @return the word count (at most `cap`, which must be >= 64).
 */
static size_t synth_module(uint64_t seed, uint32_t *w, size_t cap)
{
    size_t n = 0;
    uint32_t id = 1;
    w[n++] = 0x07230203u;
    w[n++] = 0x00010300u;
    w[n++] = 0x00080000u;
    w[n++] = 0; /* bound, set at the end */
    w[n++] = 0;
    n = emit(w, n, 17, (const uint32_t[]){1}, 1);               /* OpCapability Shader */
    n = emit(w, n, 14, (const uint32_t[]){0, 1}, 2);            /* OpMemoryModel */
    n = emit(w, n, 5, (const uint32_t[]){4, 0x6e69616d, 0}, 3); /* OpName "main" */
    n = emit(w, n, 71, (const uint32_t[]){9, 30, 0}, 3);        /* OpDecorate Location 0 */
    uint32_t tvoid = id++, tfloat = id++, tvec = id++, tptr = id++;
    n = emit(w, n, 19, (const uint32_t[]){tvoid}, 1);
    n = emit(w, n, 22, (const uint32_t[]){tfloat, 32}, 2);
    n = emit(w, n, 23, (const uint32_t[]){tvec, tfloat, 4}, 3);
    n = emit(w, n, 32, (const uint32_t[]){tptr, 7, tvec}, 3);
    uint32_t c1 = id++;
    n = emit(w, n, 43, (const uint32_t[]){tfloat, c1, 0x3f800000u}, 3);
    uint32_t var = id++;
    n = emit(w, n, 59, (const uint32_t[]){tptr, var, 7}, 3);
    n = emit(w, n, 248, (const uint32_t[]){id++}, 1); /* OpLabel */
    uint64_t s = seed;
    uint32_t last = var;
    while (n + 8 < cap - 2) {
        uint64_t r = rnd(&s) % 5;
        uint32_t res = id++;
        if (r == 0) {
            n = emit(w, n, 61, (const uint32_t[]){tvec, res, var}, 3); /* OpLoad */
        } else if (r == 1) {
            n = emit(w, n, 62, (const uint32_t[]){var, last}, 2); /* OpStore */
            id--;
            continue;
        } else if (r == 2) {
            n = emit(w, n, 81, (const uint32_t[]){tfloat, res, last, (uint32_t)(rnd(&s) % 4)},
                     4); /* OpCompositeExtract */
        } else {
            uint32_t other = res - 1 - (uint32_t)(rnd(&s) % 4);
            n = emit(w, n, r == 3 ? 129 : 133, (const uint32_t[]){tvec, res, last, other},
                     4); /* OpFAdd, OpFMul */
        }
        last = res;
    }
    n = emit(w, n, 253, NULL, 0); /* OpReturn */
    n = emit(w, n, 56, NULL, 0);  /* OpFunctionEnd */
    w[3] = id;
    return n;
}

#define SYNTH_MODULES 64
#define SYNTH_WORDS   600

static struct kiln_pack_dict *fuzz_dict;

static void fuzz_init(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    kiln_log_set_level(KILN_LOG_ERROR);
    static uint32_t words[SYNTH_MODULES][SYNTH_WORDS];
    const uint32_t *mods[SYNTH_MODULES];
    size_t nwords[SYNTH_MODULES];
    for (int i = 0; i < SYNTH_MODULES; i++) {
        size_t cap = 80 + (size_t)(i * 7919 % (SYNTH_WORDS - 80));
        nwords[i] = synth_module((uint64_t)i, words[i], cap);
        mods[i] = words[i];
    }
    if (kiln_pack_dict_train(mods, nwords, SYNTH_MODULES, 4096, &fuzz_dict) < 0) {
        fprintf(stderr, "fuzz_pack_decode: dictionary training failed\n");
        abort();
    }
}

/* ---- the target ----------------------------------------------------------- */

#define OUT_WORDS (1u << 16)

static void check_blob(const uint8_t *data, size_t size)
{
    static uint32_t out[OUT_WORDS];
    size_t bytes = 0;
    enum kiln_codec codec;
    int info = kiln_blob_info(data, size, &codec, &bytes);
    for (int with_dict = 0; with_dict < 2; with_dict++) {
        const struct kiln_pack_dict *d = with_dict ? fuzz_dict : NULL;
        int64_t n = kiln_unpack(data, size, d, out, OUT_WORDS);
        if (n < 0)
            continue;
        /* Success implies a good header and the stated size. */
        if (info < 0 || (size_t)n * 4 != bytes)
            abort();
        /* What decoded packs again (format 4) and comes back the same. */
        static uint32_t again[OUT_WORDS];
        void *blob;
        size_t bs;
        if (kiln_pack(out, (size_t)n, KILN_CODEC_KILN, d, &blob, &bs) < 0)
            abort();
        if (kiln_unpack(blob, bs, d, again, OUT_WORDS) != n ||
            memcmp(again, out, (size_t)n * 4) != 0)
            abort();
        kiln_pack_free(blob);
    }
    if (info == 0 && bytes <= OUT_WORDS * 4) {
        const uint32_t *w;
        int64_t n = kiln_unpack_scratch(data, size, fuzz_dict, &w);
        if (n >= 0 && (size_t)n * 4 != bytes)
            abort();
    }
}

/* A format-3 or -4 blob with its seal rewritten for each dictionary choice. */
static void check_resealed(const uint8_t *data, size_t size)
{
    if (size == 0 || size > (1u << 20) || kiln__blob_format(data, size) < 3)
        return;
    uint8_t *copy = malloc(size);
    if (!copy)
        abort();
    for (int with_dict = 0; with_dict < 2; with_dict++) {
        memcpy(copy, data, size);
        if (kiln__blob_reseal(copy, size, with_dict ? kiln_pack_dict_id(fuzz_dict) : 0) != 0)
            abort(); /* the header parsed a moment ago */
        check_blob(copy, size);
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_init();
    check_blob(data, size);
    check_resealed(data, size);
    struct kiln_stage_blob st[8];
    int n = kiln_program_payload_parse(data, size, 8, st);
    for (int i = 0; i < n; i++) {
        if ((const uint8_t *)st[i].blob < data ||
            (const uint8_t *)st[i].blob + st[i].blob_size > data + size)
            abort();
        check_blob(st[i].blob, st[i].blob_size);
        check_resealed(st[i].blob, st[i].blob_size);
    }
    return 0;
}

/* ---- seed writer ---------------------------------------------------------- */

#ifdef FUZZ_PACK_WRITE_SEEDS
static void write_seed(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s FOLDER\n", argv[0]);
        return 2;
    }
    fuzz_init();
    static uint32_t w[SYNTH_WORDS];
    const char *codecs[] = {"raw", "zstd", "kiln"};
    void *stage_blob[2];
    size_t stage_size[2];
    for (int v = 0; v < 4; v++) {
        size_t n = synth_module(1000 + (uint64_t)v, w, v == 0 ? 64 : 300);
        void *blob;
        size_t size;
        enum kiln_codec c = v < 3 ? (enum kiln_codec)v : KILN_CODEC_KILN;
        if (kiln_pack(w, n, c, v == 3 ? fuzz_dict : NULL, &blob, &size) < 0)
            return 1;
        char name[64];
        snprintf(name, sizeof(name), "blob-%s%s", codecs[c], v == 3 ? "-dict" : "");
        write_seed(argv[1], name, blob, size);
        if (v >= 2) {
            stage_blob[v - 2] = blob;
            stage_size[v - 2] = size;
        } else {
            kiln_pack_free(blob);
        }
    }
    /* A module whose instructions do not tile it: kiln's codec falls back. */
    size_t n = synth_module(7, w, 64);
    w[n - 1] = 9u << 16 | 56;
    void *blob;
    size_t size;
    if (kiln_pack(w, n, KILN_CODEC_KILN, NULL, &blob, &size) < 0)
        return 1;
    write_seed(argv[1], "blob-fallback", blob, size);
    kiln_pack_free(blob);
    struct kiln_stage_blob st[2] = {
        {.stage = 1, .blob = stage_blob[0], .blob_size = stage_size[0]},
        {.stage = 2, .blob = stage_blob[1], .blob_size = stage_size[1]}};
    void *payload;
    if (kiln_program_payload_build(st, 2, &payload, &size) < 0)
        return 1;
    write_seed(argv[1], "payload-two-stages", payload, size);
    kiln_pack_free(payload);
    kiln_pack_free(stage_blob[0]);
    kiln_pack_free(stage_blob[1]);
    kiln_pack_dict_destroy(fuzz_dict);
    kiln_pack_thread_cleanup();
    return 0;
}
#endif
