/*
 * io_unix.c - the default file I/O table on POSIX systems.
 *
 * Each function turns errno into the extended kiln code for its step, so a
 * log line can say "sync failed" rather than "I/O error".
 */
#include "kiln_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int unix_open(const struct kiln_io *self, const char *path, int flags, int *fd)
{
    (void)self;
    /* Non-blocking until fstat says it is a regular file: a FIFO in a
     * file's place must not hang the open. */
    int oflags = O_CLOEXEC | O_NONBLOCK;
    oflags |= (flags & KILN_IO_RDWR) ? O_RDWR : O_RDONLY;
    if (flags & KILN_IO_NOFOLLOW)
        oflags |= O_NOFOLLOW;
    if (flags & KILN_IO_CREATE)
        oflags |= O_CREAT;
    if (flags & KILN_IO_TRUNC)
        oflags |= O_TRUNC;
    if (flags & KILN_IO_EXCL)
        oflags |= O_EXCL;
    int f;
    do {
        f = open(path, oflags, 0644);
    } while (f < 0 && errno == EINTR);
    if (f < 0 && errno == ELOOP && (flags & KILN_IO_NOFOLLOW))
        return KILN_EFORMAT; /* a link where kiln's own file belongs */
    if (f < 0)
        return kiln_error_from_errno(errno, KILN_EIO_OPEN);
    /* A folder opens read-only on POSIX and only fails at the first read; a
     * FIFO or a device would block or never end: refuse them here as input
     * of another kind. */
    struct stat st;
    if (fstat(f, &st) != 0) {
        int err = errno;
        close(f);
        return kiln_error_from_errno(err, KILN_EIO_OPEN);
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return KILN_EFORMAT;
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0)
        fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    return KILN_OK;
}

static int unix_close(const struct kiln_io *self, int fd)
{
    (void)self;
    /* A close interrupted by a signal has still released the descriptor on
     * Linux: never retry it. */
    if (close(fd) != 0 && errno != EINTR)
        return kiln_error_from_errno(errno, KILN_EIO);
    return KILN_OK;
}

static int64_t unix_pread(const struct kiln_io *self, int fd, void *buf, size_t n, uint64_t off)
{
    (void)self;
    ssize_t got;
    do {
        got = pread(fd, buf, n, (off_t)off);
    } while (got < 0 && errno == EINTR);
    return got < 0 ? kiln_error_from_errno(errno, KILN_EIO_READ) : (int64_t)got;
}

static int64_t unix_pwrite(const struct kiln_io *self, int fd, const void *buf, size_t n,
                           uint64_t off)
{
    (void)self;
    ssize_t put;
    do {
        put = pwrite(fd, buf, n, (off_t)off);
    } while (put < 0 && errno == EINTR);
    return put < 0 ? kiln_error_from_errno(errno, KILN_EIO_WRITE) : (int64_t)put;
}

static int unix_fsync(const struct kiln_io *self, int fd)
{
    (void)self;
    if (fsync(fd) != 0)
        return errno == ENOSPC ? KILN_ENOSPC : KILN_EIO_SYNC;
    return KILN_OK;
}

static int unix_fsync_dir(const struct kiln_io *self, const char *path)
{
    (void)self;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return kiln_error_from_errno(errno, KILN_EIO_OPEN);
    int rc = fsync(fd) == 0 || errno == EINVAL ? KILN_OK : KILN_EIO_SYNC;
    close(fd);
    return rc;
}

static int unix_rename(const struct kiln_io *self, const char *from, const char *to)
{
    (void)self;
    return rename(from, to) == 0 ? KILN_OK : kiln_error_from_errno(errno, KILN_EIO_RENAME);
}

int kiln__io_rename_noreplace(const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return KILN_OK;
    if (errno != EINVAL && errno != ENOSYS)
        return kiln_error_from_errno(errno, KILN_EIO_RENAME);
#endif
    /* A link fails when `to` exists, whoever made it; then the old name goes. */
    if (link(from, to) != 0)
        return kiln_error_from_errno(errno, KILN_EIO_RENAME);
    unlink(from);
    return KILN_OK;
}

static int unix_truncate(const struct kiln_io *self, int fd, uint64_t size)
{
    (void)self;
    int rc;
    do {
        rc = ftruncate(fd, (off_t)size);
    } while (rc != 0 && errno == EINTR);
    return rc == 0 ? KILN_OK : kiln_error_from_errno(errno, KILN_EIO_TRUNCATE);
}

static int unix_lock(const struct kiln_io *self, int fd, enum kiln_io_lock_mode mode)
{
    (void)self;
    /* flock() locks belong to the open file description, so a second open of
     * the same file in this process is refused too: one writer per cache even
     * within one process. */
    int op = mode == KILN_IO_UNLOCK        ? LOCK_UN
             : mode == KILN_IO_LOCK_SHARED ? LOCK_SH | LOCK_NB
                                           : LOCK_EX | LOCK_NB;
    int rc;
    do {
        rc = flock(fd, op);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0)
        return KILN_OK;
    return errno == EWOULDBLOCK ? KILN_EBUSY : KILN_EIO_LOCK;
}

static int unix_size(const struct kiln_io *self, int fd, uint64_t *size)
{
    (void)self;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return kiln_error_from_errno(errno, KILN_EIO_STAT);
    *size = (uint64_t)st.st_size;
    return KILN_OK;
}

static int unix_unlink(const struct kiln_io *self, const char *path)
{
    (void)self;
    return unlink(path) == 0 ? KILN_OK : kiln_error_from_errno(errno, KILN_EIO_UNLINK);
}

static const struct kiln_io unix_io = {
    .size = sizeof(struct kiln_io),
    .open = unix_open,
    .close = unix_close,
    .pread = unix_pread,
    .pwrite = unix_pwrite,
    .fsync = unix_fsync,
    .fsync_dir = unix_fsync_dir,
    .rename = unix_rename,
    .truncate = unix_truncate,
    .lock = unix_lock,
    .file_size = unix_size,
    .unlink = unix_unlink,
};

const struct kiln_io *kiln_io_default(void)
{
    return &unix_io;
}
