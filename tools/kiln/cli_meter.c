/*
 * cli_meter.c - a progress bar for library calls that report none but read
 * through an I/O table: `kiln cache check` (kiln_cache_check reads the
 * records file front to back) and `kiln export foz` (kiln_foz_export reads
 * each record through the cache's table).
 *
 * Design.
 * - The meter is a struct kiln_io whose functions forward to the default
 *   table. It notes the descriptor of the one file it meters (by base
 *   name, when it is opened) and that file's size; every byte read from
 *   it while the meter is on counts, capped at the size, so the bar never
 *   claims more than the file holds. The counts are bytes: the bar draws
 *   them in IEC units.
 * - The drawing is cli_cache_bar's, so a meter looks like the bars of the
 *   cache's rewrites (and is silent under -q). Its reads come from one
 *   thread (both callers read on the calling thread), so the counters are
 *   plain.
 */
#include "cli.h"

#include <string.h>

static struct cli_io_meter *meter_of(const struct kiln_io *self)
{
    /* The table is the meter's first member; the meter itself is not const. */
    return (struct cli_io_meter *)(uintptr_t)self;
}

static bool is_metered(const struct cli_io_meter *m, const char *path)
{
    size_t n = strlen(path), f = strlen(m->file);
    return n >= f && strcmp(path + n - f, m->file) == 0 &&
           (n == f || path[n - f - 1] == '/' || path[n - f - 1] == '\\');
}

static int meter_open(const struct kiln_io *self, const char *path, int flags, int *fd)
{
    struct cli_io_meter *m = meter_of(self);
    int rc = m->base->open(m->base, path, flags, fd);
    if (rc == KILN_OK && is_metered(m, path)) { /* the last one opened */
        m->fd = *fd;
        if (m->base->file_size(m->base, *fd, &m->size) < 0)
            m->size = 0;
    }
    return rc;
}

static int meter_close(const struct kiln_io *self, int fd)
{
    struct cli_io_meter *m = meter_of(self);
    if (fd == m->fd)
        m->fd = -1;
    return m->base->close(m->base, fd);
}

static int64_t meter_pread(const struct kiln_io *self, int fd, void *buf, size_t n, uint64_t off)
{
    struct cli_io_meter *m = meter_of(self);
    int64_t r = m->base->pread(m->base, fd, buf, n, off);
    if (r > 0 && fd == m->fd && m->on && m->size) {
        m->read += (uint64_t)r;
        if (m->read > m->size)
            m->read = m->size;
        if (!m->bar.done)
            cli_cache_bar_report(&m->bar, m->what, m->read, m->size);
    }
    return r;
}

static int64_t meter_pwrite(const struct kiln_io *self, int fd, const void *buf, size_t n,
                            uint64_t off)
{
    const struct kiln_io *b = meter_of(self)->base;
    return b->pwrite(b, fd, buf, n, off);
}

static int meter_fsync(const struct kiln_io *self, int fd)
{
    const struct kiln_io *b = meter_of(self)->base;
    return b->fsync(b, fd);
}

static int meter_fsync_dir(const struct kiln_io *self, const char *path)
{
    const struct kiln_io *b = meter_of(self)->base;
    return b->fsync_dir(b, path);
}

static int meter_rename(const struct kiln_io *self, const char *from, const char *to)
{
    const struct kiln_io *b = meter_of(self)->base;
    return b->rename(b, from, to);
}

static int meter_truncate(const struct kiln_io *self, int fd, uint64_t size)
{
    const struct kiln_io *b = meter_of(self)->base;
    return b->truncate(b, fd, size);
}

static int meter_lock(const struct kiln_io *self, int fd, enum kiln_io_lock_mode mode)
{
    const struct kiln_io *b = meter_of(self)->base;
    return b->lock(b, fd, mode);
}

static int meter_size(const struct kiln_io *self, int fd, uint64_t *size)
{
    const struct kiln_io *b = meter_of(self)->base;
    return b->file_size(b, fd, size);
}

static int meter_unlink(const struct kiln_io *self, const char *path)
{
    const struct kiln_io *b = meter_of(self)->base;
    return b->unlink(b, path);
}

void cli_io_meter_init(struct cli_io_meter *m, const char *file, const char *what)
{
    memset(m, 0, sizeof(*m));
    m->io = (struct kiln_io){sizeof(struct kiln_io), meter_open,  meter_close,     meter_pread,
                             meter_pwrite,           meter_fsync, meter_fsync_dir, meter_rename,
                             meter_truncate,         meter_lock,  meter_size,      meter_unlink};
    m->base = kiln_io_default();
    m->file = file;
    m->what = what;
    m->fd = -1;
    m->on = true;
    cli_cache_bar_attach(&m->bar, NULL);
    m->bar.bytes = true;
}

void cli_io_meter_close(struct cli_io_meter *m)
{
    /* A bar the reads did not finish ends at what was read. */
    cli_cache_bar_close(&m->bar);
}
