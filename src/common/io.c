/*
 * io.c - portable helpers over the file I/O table.
 *
 * Everything that touches a cache file goes through a `struct kiln_io`, so
 * the helpers here take one too: a test that injects a fault into the table
 * sees it in every step of a replace or a full read.
 */
#include "kiln_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kiln__path_join(char *out, size_t cap, const char *dir, const char *name)
{
    size_t d = strlen(dir);
    bool slash = d > 0 && (dir[d - 1] == '/' || dir[d - 1] == '\\');
    int n = snprintf(out, cap, "%s%s%s", dir, (slash || d == 0) ? "" : "/", name);
    return (n < 0 || (size_t)n >= cap) ? KILN_ERANGE : KILN_OK;
}

int kiln__io_check(const struct kiln_io *io)
{
    KILN_TRY(KILN_STRUCT_CHECK(io, struct kiln_io, "kiln_io"));
    if (io->size >= KILN__IO_SLOTS_SIZE)
        return KILN_OK;
    KILN_ERROR("abi", "kiln_io: size %zu does not hold every slot (%zu bytes)", io->size,
               (size_t)KILN__IO_SLOTS_SIZE);
    return KILN_EINVAL;
}

int kiln_io_read_full(const struct kiln_io *io, int fd, void *buf, size_t n, uint64_t off)
{
    if (!io || (n && !buf))
        return KILN_EINVAL;
    KILN_TRY(kiln__io_check(io));
    unsigned char *p = buf;
    while (n > 0) {
        int64_t got = io->pread(io, fd, p, n, off);
        if (got < 0)
            return (int)got;
        if (got == 0)
            return KILN_EIO_SHORTREAD;
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return KILN_OK;
}

int kiln_io_write_full(const struct kiln_io *io, int fd, const void *buf, size_t n, uint64_t off)
{
    if (!io || (n && !buf))
        return KILN_EINVAL;
    KILN_TRY(kiln__io_check(io));
    const unsigned char *p = buf;
    while (n > 0) {
        int64_t put = io->pwrite(io, fd, p, n, off);
        if (put < 0)
            return (int)put;
        if (put == 0)
            return KILN_EIO_SHORTWRITE;
        p += put;
        n -= (size_t)put;
        off += (uint64_t)put;
    }
    return KILN_OK;
}

int kiln__io_create_new(const struct kiln_io *io, const char *path, int *fd)
{
    const int flags = KILN_IO_RDWR | KILN_IO_CREATE | KILN_IO_EXCL | KILN_IO_NOFOLLOW;
    int rc = io->open(io, path, flags, fd);
    if (rc != KILN_EEXIST)
        return rc;
    /* A leftover of a cut-short write, or something planted: unlink removes
     * a link itself, never what it points to. */
    rc = io->unlink(io, path);
    if (rc < 0 && rc != KILN_ENOENT)
        return rc;
    return io->open(io, path, flags, fd);
}

int kiln__path_dir(char *out, size_t cap, const char *path)
{
    const char *slash = kiln__path_last_sep(path);
    if (!slash)
        return snprintf(out, cap, ".") < (int)cap ? KILN_OK : KILN_ERANGE;
    size_t n = (size_t)(slash - path);
    if (n == 0)
        n = 1; /* the root folder */
    if (n >= cap)
        return KILN_ERANGE;
    memcpy(out, path, n);
    out[n] = '\0';
    return KILN_OK;
}

int kiln_io_replace_file(const struct kiln_io *io, const char *path, const void *data, size_t n)
{
    if (!io || !path || (n && !data))
        return KILN_EINVAL;
    KILN_TRY(kiln__io_check(io));
    char tmp[4096], dir[4096];
    int len = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (len < 0 || (size_t)len >= sizeof(tmp))
        return KILN_ERANGE;
    KILN_TRY(kiln__path_dir(dir, sizeof(dir), path));

    int fd;
    KILN_TRY(kiln__io_create_new(io, tmp, &fd));
    /* Write and sync the new bytes under the temporary name first, so the
     * rename below can only ever publish a whole file. */
    int rc = kiln_io_write_full(io, fd, data, n, 0);
    if (rc == KILN_OK)
        rc = io->fsync(io, fd);
    int crc = io->close(io, fd);
    if (rc == KILN_OK)
        rc = crc;
    if (rc == KILN_OK)
        rc = io->rename(io, tmp, path);
    if (rc != KILN_OK) {
        io->unlink(io, tmp);
        return rc;
    }
    return io->fsync_dir(io, dir);
}

int kiln_io_read_file(const struct kiln_io *io, const char *path, size_t max, void **data,
                      size_t *n)
{
    if (!io || !path || !data || !n)
        return KILN_EINVAL;
    KILN_TRY(kiln__io_check(io));
    return kiln__io_read_file(io, path, 0, max, data, n);
}

int kiln__io_read_file(const struct kiln_io *io, const char *path, int flags, size_t max,
                       void **data, size_t *n)
{
    int fd;
    uint64_t size;
    *data = NULL;
    *n = 0;
    KILN_TRY(io->open(io, path, KILN_IO_READ | flags, &fd));
    int rc = io->file_size(io, fd, &size);
    if (rc == KILN_OK && size > max)
        rc = KILN_ERANGE;
    void *buf = NULL;
    if (rc == KILN_OK) {
        buf = kiln__malloc(size ? (size_t)size : 1);
        if (!buf)
            rc = KILN_ENOMEM;
    }
    if (rc == KILN_OK)
        rc = kiln_io_read_full(io, fd, buf, (size_t)size, 0);
    io->close(io, fd);
    if (rc != KILN_OK) {
        kiln__free(buf);
        return rc;
    }
    *data = buf;
    *n = (size_t)size;
    return KILN_OK;
}

int kiln_io_rename_new(const struct kiln_io *io, const char *from, const char *to)
{
    if (!from || !to)
        return KILN_EINVAL;
    if (!io || io == kiln_io_default())
        return kiln__io_rename_noreplace(from, to);
    KILN_TRY(kiln__io_check(io));
    /* A table of the caller's (a test's faults): the best it allows. */
    int fd;
    int rc = io->open(io, to, KILN_IO_READ, &fd);
    if (rc == KILN_OK) {
        io->close(io, fd);
        return KILN_EEXIST;
    }
    return io->rename(io, from, to);
}
