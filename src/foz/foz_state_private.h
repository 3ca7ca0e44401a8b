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
 * A closure's pipeline tag read from its first bytes alone, as
 * kiln_foz_closure_make writes them ({"format":"kiln-foz-closure",
 * "version":1,"kind":"..."), without parsing the JSON: for a cheap look
 * at many closures. @return KILN_FOZ_TAG_GRAPHICS_PIPELINE, _COMPUTE_ or
 * _RAYTRACING_, or 0 when the bytes do not start that way (another
 * writer's spacing, another version, not a closure: parse them to know).
 * Thread-safe.
 */
uint64_t kiln__foz_closure_peek_tag(const void *bytes, size_t size);

/* The most pipelines one closure's stage list walks (the pipeline and its
 * libraries, each once). */
#define KILN__FOZ_MAX_LIBRARIES 32

/*
 * The stages of a closure's pipeline in builder order: its own recorded
 * stages ("stage" for compute, "stages" otherwise), then, depth-first in
 * recorded order, those of each pipeline library it links (graphics:
 * VkPipelineLibraryCreateInfoKHR in pNext; ray tracing: "libraryInfo"),
 * each library once. Up to `cap` stage records go to recs[] (owned by
 * `doc`); *n is how many there are.
 * @return 0; KILN_ERANGE for more than `cap` stages or libraries nested
 * too deep; KILN_EPARSE for a library hash that is not one or that the
 * closure does not hold.
 */
int kiln__foz_closure_stages(struct json_object *doc, uint64_t tag, struct json_object *pipe,
                             struct json_object **recs, uint32_t cap, uint32_t *n);

/*
 * The hashes of the pipeline libraries `pipe` links, in recorded order:
 * the "libraries" of a VkPipelineLibraryCreateInfoKHR in its pNext, or of
 * its "libraryInfo" (ray tracing). Up to `cap` go to out[]; *n is how many
 * it names.
 * @return 0, or KILN_EPARSE for one that is not a hash.
 */
int kiln__foz_pipeline_libraries(struct json_object *pipe, uint64_t *out, uint32_t cap,
                                 uint32_t *n);

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

/*
 * kiln_foz_closure_check over a parsed closure (kiln__foz_closure_parse's
 * doc, tag and pipeline): @return 0, or KILN_EFORMAT with the rule in why.
 * Thread-safe (reads `doc` only).
 */
int kiln__foz_check(struct json_object *doc, uint64_t tag, struct json_object *pipe,
                    const struct kiln_foz_limits *lim, char *why, size_t cap);

/* Copies what the archive's reader met while the index was made (damaged
 * entries, resynchronisations, a cut-off last entry) into *stats. */
void kiln__foz_index_reader_stats(const struct kiln_foz_index *idx, struct kiln_foz_stats *stats);

/* Parses a recorded hash string (absent: 0). @return whether it is one. */
bool kiln__fb_hash_of(struct json_object *v, uint64_t *out);

#endif /* KILN_FOZ_STATE_PRIVATE_H */
