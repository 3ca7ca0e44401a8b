/*
 * foz_state_private.h - what foz_state.c shares with the closure builder.
 */
#ifndef KILN_FOZ_STATE_PRIVATE_H
#define KILN_FOZ_STATE_PRIVATE_H

#include "foz_private.h"

#include <inttypes.h>
#include <json.h>

/*
 * Parses a closure (docs/foz.md) and finds its pipeline.
 * @return 0 with the document in *doc (release it with json_object_put),
 * the pipeline's tag and hash, and its JSON (owned by *doc) in *pipeline;
 * KILN_EFORMAT when the bytes are not a closure of this version;
 * KILN_EPARSE when the pipeline is missing. Thread-safe.
 */
int kiln__foz_closure_parse(const void *bytes, size_t size, struct json_object **doc, uint64_t *tag,
                            uint64_t *hash, struct json_object **pipeline);

/*
 * @return the member of an entry's JSON document that holds objects of
 * `tag` ("samplers", "setLayouts", ..., "renderPasses" for render passes),
 * or NULL for a tag that is not an object's (a shader module's, say).
 */
const char *kiln__foz_tag_member(uint64_t tag);

/*
 * Decodes base64 text (`n` characters, padding optional) into exactly
 * `want` bytes at `out`.
 * @return false for a character outside the alphabet, or a length that
 * does not give exactly `want` bytes.
 */
bool kiln__foz_base64_decode(const char *s, size_t n, uint8_t *out, size_t want);

/* Copies what the archive's reader met while the index was made (damaged
 * entries, resynchronisations, a cut-off last entry) into *stats. */
void kiln__foz_index_reader_stats(const struct kiln_foz_index *idx, struct kiln_foz_stats *stats);

#endif /* KILN_FOZ_STATE_PRIVATE_H */
