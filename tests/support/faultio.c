/*
 * faultio.c - the fault-injecting I/O table (see faultio.h).
 *
 * Design: every call first takes the mutex to count itself and decide
 * whether it fails, then (outside the lock) calls the real table. The undo
 * log for the power cut is a list of the bytes each unsynced write or
 * truncate replaced, keyed by path, newest first; an fsync of a file drops
 * that file's entries, since what it wrote is now durable.
 */
#include "faultio.h"
#include "kiln_internal.h"

#include <stdlib.h>
#include <string.h>

struct faultio_undo {
    struct faultio_undo *next;
    char *path;
    uint64_t off;      /* where the write (or truncate) began */
    uint64_t old_size; /* the file's size before it */
    size_t old_len;    /* bytes of old content saved from off */
    size_t new_len;    /* bytes the write put there */
    unsigned char *old;
};

static struct faultio *self_of(const struct kiln_io *io)
{
    return (struct faultio *)(uintptr_t)io;
}

/* Counts a call of `kind`; @return the error to inject, or 0. *first says
 * whether this is the first fault of the armed run (may be NULL). */
static int decide_first(struct faultio *f, unsigned kind, bool *first)
{
    int err = 0;
    pthread_mutex_lock(&f->lock);
    if (f->fail_at && (f->fail_kinds & kind)) {
        f->calls++;
        if (f->calls == f->fail_at || (f->persistent && f->calls > f->fail_at)) {
            f->faults++;
            err = f->fail_error ? f->fail_error : KILN_EIO;
        }
    }
    if (first)
        *first = f->faults == 1 && f->calls == f->fail_at;
    pthread_mutex_unlock(&f->lock);
    return err;
}

static int decide(struct faultio *f, unsigned kind)
{
    return decide_first(f, kind, NULL);
}

static const char *path_of(struct faultio *f, int fd)
{
    return (fd >= 0 && fd < f->fd_paths_cap) ? f->fd_paths[fd] : NULL;
}

static int f_open(const struct kiln_io *io, const char *path, int flags, int *fd)
{
    struct faultio *f = self_of(io);
    int err = decide(f, FAULTIO_OPEN);
    if (err)
        return err;
    const struct kiln_io *real = kiln_io_default();
    uint64_t old_size = 0;
    bool existed = false;
    if (f->track_unsynced && (flags & KILN_IO_TRUNC)) {
        int probe;
        if (real->open(real, path, KILN_IO_READ, &probe) == KILN_OK) {
            existed = real->file_size(real, probe, &old_size) == KILN_OK;
            real->close(real, probe);
        }
    }
    int rc = real->open(real, path, flags, fd);
    if (rc != KILN_OK)
        return rc;
    pthread_mutex_lock(&f->lock);
    if (*fd >= f->fd_paths_cap) {
        int cap = *fd * 2 + 16;
        char **grown = realloc(f->fd_paths, (size_t)cap * sizeof(*grown));
        if (grown) {
            memset(grown + f->fd_paths_cap, 0, (size_t)(cap - f->fd_paths_cap) * sizeof(*grown));
            f->fd_paths = grown;
            f->fd_paths_cap = cap;
        }
    }
    if (*fd < f->fd_paths_cap) {
        free(f->fd_paths[*fd]);
        f->fd_paths[*fd] = strdup(path);
    }
    pthread_mutex_unlock(&f->lock);
    /* A truncating open of an existing file loses its old content at a power
     * cut only if nothing syncs it; kiln never truncates a live file this way,
     * so only note that it happened. */
    (void)existed;
    return KILN_OK;
}

static int f_close(const struct kiln_io *io, int fd)
{
    struct faultio *f = self_of(io);
    pthread_mutex_lock(&f->lock);
    if (fd >= 0 && fd < f->fd_paths_cap) {
        free(f->fd_paths[fd]);
        f->fd_paths[fd] = NULL;
    }
    pthread_mutex_unlock(&f->lock);
    return kiln_io_default()->close(kiln_io_default(), fd);
}

static int64_t f_pread(const struct kiln_io *io, int fd, void *buf, size_t n, uint64_t off)
{
    struct faultio *f = self_of(io);
    int err = decide(f, FAULTIO_READ);
    if (err)
        return err;
    return kiln_io_default()->pread(kiln_io_default(), fd, buf, n, off);
}

/* Saves what [off, off+len) holds now, before a write or truncate changes it. */
static void remember(struct faultio *f, int fd, uint64_t off, size_t len, size_t new_len)
{
    const struct kiln_io *real = kiln_io_default();
    uint64_t size = 0;
    if (real->file_size(real, fd, &size) != KILN_OK)
        return;
    struct faultio_undo *u = calloc(1, sizeof(*u));
    if (!u)
        return;
    u->off = off;
    u->old_size = size;
    u->new_len = new_len;
    u->old_len = off < size ? (size_t)KILN_MIN(size - off, (uint64_t)len) : 0;
    u->old = malloc(u->old_len ? u->old_len : 1);
    if (u->old_len && u->old && kiln_io_read_full(real, fd, u->old, u->old_len, off) != KILN_OK)
        u->old_len = 0;
    pthread_mutex_lock(&f->lock);
    const char *path = path_of(f, fd);
    u->path = path ? strdup(path) : NULL;
    u->next = f->undo;
    f->undo = u;
    pthread_mutex_unlock(&f->lock);
}

static int64_t f_pwrite(const struct kiln_io *io, int fd, const void *buf, size_t n, uint64_t off)
{
    struct faultio *f = self_of(io);
    bool first;
    int err = decide_first(f, FAULTIO_WRITE, &first);
    /* Only the first fault is short: after it a full disk refuses every
     * byte, so a persistent fault does not creep forward half by half. */
    if (err && !(f->short_write && first && n > 1))
        return err;
    size_t len = err ? n / 2 : n;
    if (f->track_unsynced)
        remember(f, fd, off, len, len);
    int64_t put = kiln_io_default()->pwrite(kiln_io_default(), fd, buf, len, off);
    return put;
}

static void drop_undo(struct faultio *f, const char *path)
{
    pthread_mutex_lock(&f->lock);
    for (struct faultio_undo **p = &f->undo; *p;) {
        struct faultio_undo *u = *p;
        if (path && u->path && strcmp(u->path, path) == 0) {
            *p = u->next;
            free(u->path);
            free(u->old);
            free(u);
        } else {
            p = &u->next;
        }
    }
    pthread_mutex_unlock(&f->lock);
}

static int f_fsync(const struct kiln_io *io, int fd)
{
    struct faultio *f = self_of(io);
    int err = decide(f, FAULTIO_SYNC);
    if (err)
        return err == KILN_EIO ? KILN_EIO_SYNC : err;
    int rc = kiln_io_default()->fsync(kiln_io_default(), fd);
    if (rc == KILN_OK && f->track_unsynced) {
        pthread_mutex_lock(&f->lock);
        char *path = path_of(f, fd) ? strdup(path_of(f, fd)) : NULL;
        pthread_mutex_unlock(&f->lock);
        drop_undo(f, path);
        free(path);
    }
    return rc;
}

static int f_fsync_dir(const struct kiln_io *io, const char *path)
{
    struct faultio *f = self_of(io);
    int err = decide(f, FAULTIO_SYNC);
    if (err)
        return err == KILN_EIO ? KILN_EIO_SYNC : err;
    return kiln_io_default()->fsync_dir(kiln_io_default(), path);
}

static int f_rename(const struct kiln_io *io, const char *from, const char *to)
{
    struct faultio *f = self_of(io);
    int err = decide(f, FAULTIO_RENAME);
    if (err)
        return err == KILN_EIO ? KILN_EIO_RENAME : err;
    int rc = kiln_io_default()->rename(kiln_io_default(), from, to);
    if (rc == KILN_OK && f->track_unsynced) {
        /* The renamed file's unsynced writes now live under the new name;
         * the file that was replaced is gone. */
        drop_undo(f, to);
        pthread_mutex_lock(&f->lock);
        for (struct faultio_undo *u = f->undo; u; u = u->next)
            if (u->path && strcmp(u->path, from) == 0) {
                free(u->path);
                u->path = strdup(to);
            }
        for (int i = 0; i < f->fd_paths_cap; i++)
            if (f->fd_paths[i] && strcmp(f->fd_paths[i], from) == 0) {
                free(f->fd_paths[i]);
                f->fd_paths[i] = strdup(to);
            }
        pthread_mutex_unlock(&f->lock);
    }
    return rc;
}

static int f_truncate(const struct kiln_io *io, int fd, uint64_t size)
{
    struct faultio *f = self_of(io);
    int err = decide(f, FAULTIO_TRUNCATE);
    if (err)
        return err == KILN_EIO ? KILN_EIO_TRUNCATE : err;
    if (f->track_unsynced) {
        uint64_t cur = 0;
        kiln_io_default()->file_size(kiln_io_default(), fd, &cur);
        if (cur > size)
            remember(f, fd, size, (size_t)(cur - size), 0);
        else
            remember(f, fd, cur, 0, 0);
    }
    return kiln_io_default()->truncate(kiln_io_default(), fd, size);
}

static int f_lock(const struct kiln_io *io, int fd, enum kiln_io_lock_mode mode)
{
    return kiln_io_default()->lock(kiln_io_default(), fd, mode);
}

static int f_size(const struct kiln_io *io, int fd, uint64_t *size)
{
    return kiln_io_default()->file_size(kiln_io_default(), fd, size);
}

static int f_unlink(const struct kiln_io *io, const char *path)
{
    struct faultio *f = self_of(io);
    int rc = kiln_io_default()->unlink(kiln_io_default(), path);
    if (rc == KILN_OK && f->track_unsynced)
        drop_undo(f, path);
    return rc;
}

void faultio_init(struct faultio *f)
{
    memset(f, 0, sizeof(*f));
    f->io = (struct kiln_io){
        .size = sizeof(struct kiln_io),
        .open = f_open,
        .close = f_close,
        .pread = f_pread,
        .pwrite = f_pwrite,
        .fsync = f_fsync,
        .fsync_dir = f_fsync_dir,
        .rename = f_rename,
        .truncate = f_truncate,
        .lock = f_lock,
        .file_size = f_size,
        .unlink = f_unlink,
    };
    pthread_mutex_init(&f->lock, NULL);
}

static void free_undo(struct faultio *f)
{
    while (f->undo) {
        struct faultio_undo *u = f->undo;
        f->undo = u->next;
        free(u->path);
        free(u->old);
        free(u);
    }
}

void faultio_destroy(struct faultio *f)
{
    free_undo(f);
    for (int i = 0; i < f->fd_paths_cap; i++)
        free(f->fd_paths[i]);
    free(f->fd_paths);
    pthread_mutex_destroy(&f->lock);
}

void faultio_arm(struct faultio *f, uint64_t nth, unsigned kinds, int error, bool persistent)
{
    pthread_mutex_lock(&f->lock);
    f->fail_at = nth;
    f->fail_kinds = kinds;
    f->fail_error = error;
    f->persistent = persistent;
    f->calls = 0;
    f->faults = 0;
    pthread_mutex_unlock(&f->lock);
}

void faultio_disarm(struct faultio *f)
{
    faultio_arm(f, 0, 0, 0, false);
}

int faultio_power_cut(struct faultio *f, bool tear_last)
{
    const struct kiln_io *real = kiln_io_default();
    int undone = 0;
    pthread_mutex_lock(&f->lock);
    struct faultio_undo *list = f->undo;
    f->undo = NULL;
    pthread_mutex_unlock(&f->lock);
    for (struct faultio_undo *u = list; u; u = u->next, undone++) {
        int fd;
        if (!u->path || real->open(real, u->path, KILN_IO_RDWR, &fd) != KILN_OK)
            continue;
        /* A torn write: the newest write keeps its first half. */
        size_t keep = (tear_last && u == list) ? u->new_len / 2 : 0;
        if (u->old_len > keep)
            kiln_io_write_full(real, fd, u->old + keep, u->old_len - keep, u->off + keep);
        uint64_t size = u->old_size;
        if (keep && u->off + keep > size)
            size = u->off + keep;
        real->truncate(real, fd, size);
        real->close(real, fd);
    }
    pthread_mutex_lock(&f->lock);
    struct faultio_undo *newer = f->undo;
    f->undo = list;
    free_undo(f);
    f->undo = newer;
    pthread_mutex_unlock(&f->lock);
    return undone;
}
