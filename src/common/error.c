/*
 * error.c - names and descriptions of kiln's error codes.
 *
 * The table is indexed by the code itself, so adding a code means adding one
 * row; the codes' values never change (they are ABI).
 */
#include "kiln_internal.h"

#include <errno.h>

struct error_row {
    int code;
    const char *name;
    const char *text;
};

static const struct error_row error_rows[] = {
    {KILN_OK, "KILN_OK", "success"},
    {KILN_EINVAL, "KILN_EINVAL", "invalid argument"},
    {KILN_ENOMEM, "KILN_ENOMEM", "out of memory"},
    {KILN_EIO, "KILN_EIO", "input/output error"},
    {KILN_ENOENT, "KILN_ENOENT", "no such file or folder"},
    {KILN_EEXIST, "KILN_EEXIST", "already exists"},
    {KILN_EACCES, "KILN_EACCES", "permission denied"},
    {KILN_ENOSPC, "KILN_ENOSPC", "no space left on device"},
    {KILN_EBUSY, "KILN_EBUSY", "held by another writer"},
    {KILN_ENOTSUP, "KILN_ENOTSUP", "not supported here"},
    {KILN_ECANCELED, "KILN_ECANCELED", "cancelled"},
    {KILN_ERANGE, "KILN_ERANGE", "value out of range"},
    {KILN_ENOTFOUND, "KILN_ENOTFOUND", "not found"},
    {KILN_EFORMAT, "KILN_EFORMAT", "not a file of the expected kind"},
    {KILN_ESTAMP, "KILN_ESTAMP", "written by another translator (stamp differs)"},
    {KILN_EVULKAN, "KILN_EVULKAN", "a Vulkan call failed"},
    {KILN_ETRANSLATE, "KILN_ETRANSLATE", "translation failed"},
    {KILN_EPARSE, "KILN_EPARSE", "could not parse"},
    {KILN_ECRASH, "KILN_ECRASH", "the worker process died"},
    {KILN_ETIMEDOUT, "KILN_ETIMEDOUT", "the worker passed its time limit"},
    {KILN_EROFS, "KILN_EROFS", "read-only file system"},
    {KILN_ECACHE_FILE, "KILN_ECACHE_FILE", "a kiln cache's file or folder (never written over)"},
    {KILN_ECOMPILE_REQUIRED, "KILN_ECOMPILE_REQUIRED",
     "the driver's caches lack the pipeline: building it needs a compile"},
    {KILN_EIO_OPEN, "KILN_EIO_OPEN", "open failed"},
    {KILN_EIO_READ, "KILN_EIO_READ", "read failed"},
    {KILN_EIO_SHORTREAD, "KILN_EIO_SHORTREAD", "file ended early (short read)"},
    {KILN_EIO_WRITE, "KILN_EIO_WRITE", "write failed"},
    {KILN_EIO_SHORTWRITE, "KILN_EIO_SHORTWRITE", "short write"},
    {KILN_EIO_SYNC, "KILN_EIO_SYNC", "sync failed"},
    {KILN_EIO_RENAME, "KILN_EIO_RENAME", "rename failed"},
    {KILN_EIO_TRUNCATE, "KILN_EIO_TRUNCATE", "truncate failed"},
    {KILN_EIO_LOCK, "KILN_EIO_LOCK", "lock failed"},
    {KILN_EIO_STAT, "KILN_EIO_STAT", "could not read the file size"},
    {KILN_EIO_UNLINK, "KILN_EIO_UNLINK", "unlink failed"},
    {KILN_ECORRUPT, "KILN_ECORRUPT", "damaged data"},
    {KILN_ECORRUPT_HEADER, "KILN_ECORRUPT_HEADER", "damaged file header"},
    {KILN_ECORRUPT_INDEX, "KILN_ECORRUPT_INDEX", "index does not match the records"},
    {KILN_ECORRUPT_RECORD, "KILN_ECORRUPT_RECORD", "damaged record"},
    {KILN_ECORRUPT_BLOB, "KILN_ECORRUPT_BLOB", "damaged packed blob"},
};

static const struct error_row *error_find(int code)
{
    for (size_t i = 0; i < KILN_ARRAY_LEN(error_rows); i++)
        if (error_rows[i].code == code)
            return &error_rows[i];
    return NULL;
}

const char *kiln_errname(int code)
{
    const struct error_row *row = error_find(code);
    return row ? row->name : "KILN_E?";
}

const char *kiln_strerror(int code)
{
    const struct error_row *row = error_find(code);
    return row ? row->text : "unknown error";
}

int kiln_error_from_errno(int err, int fallback)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        return KILN_ENOENT;
    case EISDIR:
        return KILN_EFORMAT; /* a folder where a file was expected */
    case EEXIST:
        return KILN_EEXIST;
    case EACCES:
    case EPERM:
        return KILN_EACCES;
    case EROFS:
        return KILN_EROFS;
    case ENOSPC:
#ifdef EDQUOT
    case EDQUOT:
#endif
        return KILN_ENOSPC;
    case ENOMEM:
        return KILN_ENOMEM;
    case EINVAL:
        return KILN_EINVAL;
#ifdef EWOULDBLOCK
    case EWOULDBLOCK:
#endif
#if defined(EAGAIN) && (!defined(EWOULDBLOCK) || EAGAIN != EWOULDBLOCK)
    case EAGAIN:
#endif
        return KILN_EBUSY;
    default:
        return fallback;
    }
}
