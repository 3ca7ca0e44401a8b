/*
 * cache_program.c - a program in one call: stored sealed, opened checked.
 *
 * Design. kiln_cache_put_program is kiln_program_seal (check, pack, key,
 * mark validated) then kiln_cache_put with the record's sizes, codec and
 * stage count taken from the seal, so nobody sets them by hand; the cache's
 * own dictionary is the default. kiln_cache_get_program is kiln_cache_get
 * then kiln_program_open (parse, unpack once, check once) with a copy of
 * the payload, so the record's buffer is freed at once and the open program
 * stands alone. Both sit on top of the store (cache.c, cache_load.c) and
 * are called by nothing in this module.
 */
#include "cache_internal.h"

#include "kiln/program.h"

int kiln_cache_put_program(struct kiln_cache *c, const struct kiln_program *p,
                           const struct kiln_program_seal_options *opt, struct kiln_key *key_out)
{
    if (!c || !p)
        return KILN_EINVAL;
    struct kiln_program_seal_options o;
    KILN_TRY(KILN_STRUCT_IN(&o, opt, "kiln_program_seal_options"));
    if (!o.dict)
        o.dict = kiln_cache_dict(c);
    enum kiln_codec codec =
        o.flags & KILN_PROGRAM_SEAL_CODEC ? (enum kiln_codec)o.codec : KILN_CODEC_KILN;
    struct kiln_program_sealed s = {.size = sizeof(s)};
    KILN_TRY(kiln_program_seal(p, &o, &s));
    int rc = kiln_cache_put(c, s.key, s.payload, s.payload_size, s.spirv_bytes, (uint8_t)codec,
                            (uint16_t)s.nstages);
    if (rc < 0)
        KILN_ERROR("cache", "%s: cannot store %s: %s", c->dir,
                   o.name    ? o.name
                   : p->name ? p->name
                             : "(program)",
                   kiln_strerror(rc));
    else if (key_out)
        *key_out = s.key;
    kiln_program_sealed_clear(&s);
    return rc;
}

int kiln_cache_get_program(struct kiln_cache *c, struct kiln_key key,
                           const struct kiln_program_open_options *opt,
                           struct kiln_program_opened **out)
{
    if (!c || !out)
        return KILN_EINVAL;
    *out = NULL;
    struct kiln_program_open_options o;
    KILN_TRY(KILN_STRUCT_IN(&o, opt, "kiln_program_open_options"));
    if (!o.dict)
        o.dict = kiln_cache_dict(c);
    o.flags |= KILN_PROGRAM_OPEN_COPY;
    struct kiln_cache_result r;
    int rc = kiln_cache_get(c, key, &r);
    if (rc < 0)
        return rc;
    rc = kiln_program_open(r.data ? r.data : "", r.size, &o, out);
    kiln_cache_payload_free(r.data);
    return rc;
}
