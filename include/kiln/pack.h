/*
 * kiln/pack.h - SPIR-V kept packed in memory and on disk.
 *
 * A packed blob is self-describing: a small header names its codec, the
 * SPIR-V size it unpacks to and (for the kiln codec) the dictionary it
 * needs. The bytes a cache stores are the bytes kept in memory: a blob is
 * never unpacked and repacked on load, only unpacked for the moment a shader
 * module is made from it.
 *
 * Compression contexts are per thread and reused: kiln_pack and kiln_unpack
 * may be called from any number of threads at once.
 */
#ifndef KILN_PACK_H
#define KILN_PACK_H

#include "kiln/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Codec ids, stored in every blob and every cache record. Fixed forever. */
enum kiln_codec {
    KILN_CODEC_RAW = 0,  /* the SPIR-V as it is */
    KILN_CODEC_ZSTD = 1, /* plain zstd level 1 (the baseline) */
    KILN_CODEC_KILN = 2, /* kiln's SPIR-V-aware transform, then zstd (with a dictionary if given) */
};

/* A trained zstd dictionary for the kiln codec. Opaque. */
struct kiln_pack_dict;

/*
 * Packs `nwords` SPIR-V words with `codec`. A module that is not valid
 * SPIR-V (wrong magic, too short) is packed with KILN_CODEC_RAW whatever
 * was asked. `dict` may be NULL; it is used by KILN_CODEC_KILN only.
 * @return 0, and a new blob in *blob (free it with kiln_pack_free) of
 * *blob_size bytes; or a negative error. Thread-safe.
 */
KILN_API int kiln_pack(const uint32_t *words, size_t nwords, enum kiln_codec codec,
                       const struct kiln_pack_dict *dict, void **blob, size_t *blob_size);

/* Frees a blob made by kiln_pack. NULL is a no-op. */
KILN_API void kiln_pack_free(void *blob);

/*
 * Reads a blob's header without unpacking.
 * @return 0 with the codec and the SPIR-V size in bytes it unpacks to, or
 * KILN_ECORRUPT_BLOB. Any out-parameter may be NULL.
 */
KILN_API int kiln_blob_info(const void *blob, size_t blob_size, enum kiln_codec *codec,
                            size_t *spirv_bytes);

/*
 * Unpacks a blob into `out` (room for `out_words` words).
 * @return the number of SPIR-V words written, or KILN_ECORRUPT_BLOB for a
 * truncated or damaged blob (never an overrun, never wrong SPIR-V without
 * an error), KILN_ERANGE when `out` is too small, KILN_EINVAL when the blob
 * needs a dictionary that `dict` is not. Thread-safe.
 */
KILN_API int64_t kiln_unpack(const void *blob, size_t blob_size, const struct kiln_pack_dict *dict,
                             uint32_t *out, size_t out_words);

/*
 * Unpacks a blob into this thread's scratch buffer.
 * @return the number of words, with *words pointing at them; the buffer is
 * valid until this thread's next kiln_unpack_scratch call or exit. Errors as
 * kiln_unpack.
 */
KILN_API int64_t kiln_unpack_scratch(const void *blob, size_t blob_size,
                                     const struct kiln_pack_dict *dict, const uint32_t **words);

/*
 * Trains a dictionary from sample modules (ZDICT_trainFromBuffer over the
 * samples' transformed streams). `max_bytes` bounds its size (0: 64 KiB).
 * @return 0 and a new dictionary in *dict, or an error (KILN_EINVAL when the
 * samples are too few to train on).
 */
KILN_API int kiln_pack_dict_train(const uint32_t *const *modules, const size_t *module_words,
                                  size_t count, size_t max_bytes, struct kiln_pack_dict **dict);

/*
 * Makes a dictionary from its serialized bytes (as kiln_pack_dict_bytes
 * gave them, for example read from programs.kpd).
 * @return 0 or KILN_ECORRUPT for bytes that are not a kiln dictionary.
 */
KILN_API int kiln_pack_dict_load(const void *data, size_t size, struct kiln_pack_dict **dict);

/* The dictionary's serialized bytes, owned by the dictionary. */
KILN_API const void *kiln_pack_dict_bytes(const struct kiln_pack_dict *dict, size_t *size);

/* A 64-bit id of the dictionary's content; stored in every blob made with it. */
KILN_API uint64_t kiln_pack_dict_id(const struct kiln_pack_dict *dict);

/* Frees a dictionary. NULL is a no-op. */
KILN_API void kiln_pack_dict_destroy(struct kiln_pack_dict *dict);

/* The codec's name ("raw", "zstd", "kiln"), or NULL for an unknown id. */
KILN_API const char *kiln_codec_name(enum kiln_codec codec);

/* Parses a codec name. @return 0 or KILN_EINVAL. */
KILN_API int kiln_codec_parse(const char *name, enum kiln_codec *codec);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PACK_H */
