/*
 * test_common.c - errors, logging, the I/O helpers and hashing.
 */
#include "kiln_test.h"
#include "kiln_internal.h"
#include "faultio.h"

#include <errno.h>
#include <sys/stat.h>

KT_CASE(error_names)
{
    KT_CHECK(strcmp(kiln_errname(KILN_ENOSPC), "KILN_ENOSPC") == 0);
    KT_CHECK(strcmp(kiln_strerror(KILN_EIO_SYNC), "sync failed") == 0);
    KT_CHECK(strcmp(kiln_errname(-9999), "KILN_E?") == 0);
    /* Every code from -1 down to the last one has a distinct name. */
    const int codes[] = {KILN_EINVAL, KILN_ENOSPC, KILN_EIO_SHORTREAD, KILN_ECORRUPT_BLOB};
    for (size_t i = 0; i < KILN_ARRAY_LEN(codes); i++)
        KT_CHECK(strcmp(kiln_errname(codes[i]), "KILN_E?") != 0);
}

/* A read-only file system is not "permission denied" (issue 29): a user
 * told that chmods a folder that no chmod can open for writing. */
KT_CASE(error_erofs)
{
    KT_CHECK(kiln_error_from_errno(EROFS, KILN_EIO) == KILN_EROFS);
    KT_CHECK(strcmp(kiln_strerror(KILN_EROFS), "read-only file system") == 0);
    KT_CHECK(strcmp(kiln_errname(KILN_EROFS), "KILN_EROFS") == 0);
    KT_CHECK(kiln_error_from_errno(EACCES, KILN_EIO) == KILN_EACCES);
    KT_CHECK(strcmp(kiln_errname(KILN_ECACHE_FILE), "KILN_ECACHE_FILE") == 0);
}

struct captured {
    int count;
    char last[256];
    char module[32];
};

static void capture(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    struct captured *c = user;
    (void)level;
    c->count++;
    snprintf(c->last, sizeof(c->last), "%s", line);
    snprintf(c->module, sizeof(c->module), "%s", module);
}

KT_CASE(log_levels_and_sink)
{
    struct captured c = {0};
    kiln_log_set_sink(capture, &c);
    KT_CHECK_EQ(kiln_log_get_level(), KILN_LOG_WARN); /* quiet by default */
    KILN_INFO("test", "not shown %d", 1);
    KT_CHECK_EQ(c.count, 0);
    KILN_WARN("test", "shown\non one line");
    KT_CHECK_EQ(c.count, 1);
    KT_CHECK(strcmp(c.last, "shown on one line") == 0);
    KT_CHECK(strcmp(c.module, "test") == 0);
    kiln_log_set_level(KILN_LOG_DEBUG);
    KILN_DEBUG("test", "debug");
    KT_CHECK_EQ(c.count, 2);
    kiln_log_set_level(KILN_LOG_WARN);
    kiln_log_set_sink(NULL, NULL);
}

KT_CASE(replace_and_read_file)
{
    const struct kiln_io *io = kiln_io_default();
    char path[4200];
    KT_REQUIRE_OK(kiln__path_join(path, sizeof(path), kt_tmpdir(), "f.bin"));
    KT_REQUIRE_OK(kiln_io_replace_file(io, path, "first", 5));
    KT_REQUIRE_OK(kiln_io_replace_file(io, path, "second!", 7));
    void *data;
    size_t n;
    KT_REQUIRE_OK(kiln_io_read_file(io, path, 1024, &data, &n));
    KT_CHECK_EQ(n, 7);
    KT_CHECK(memcmp(data, "second!", 7) == 0);
    free(data);
    KT_CHECK_EQ(kiln_io_read_file(io, path, 3, &data, &n), KILN_ERANGE);

    /* No temporary file is left behind. */
    char tmp[4300];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    struct stat st;
    KT_CHECK(stat(tmp, &st) != 0);

    int fd;
    KT_REQUIRE_OK(io->open(io, path, KILN_IO_READ, &fd));
    char buf[16];
    KT_CHECK_EQ(kiln_io_read_full(io, fd, buf, 8, 0), KILN_EIO_SHORTREAD);
    KT_CHECK_OK(kiln_io_read_full(io, fd, buf, 3, 4));
    KT_CHECK(memcmp(buf, "nd!", 3) == 0);
    io->close(io, fd);

    KT_CHECK_EQ(kiln_io_read_file(io, "/nonexistent/kiln/x", 10, &data, &n), KILN_ENOENT);
}

KT_CASE(lock_is_exclusive)
{
    const struct kiln_io *io = kiln_io_default();
    char path[4200];
    KT_REQUIRE_OK(kiln__path_join(path, sizeof(path), kt_tmpdir(), "lock"));
    int a, b;
    KT_REQUIRE_OK(io->open(io, path, KILN_IO_RDWR | KILN_IO_CREATE, &a));
    KT_REQUIRE_OK(io->open(io, path, KILN_IO_RDWR, &b));
    KT_CHECK_OK(io->lock(io, a, KILN_IO_LOCK_EXCLUSIVE));
    KT_CHECK_EQ(io->lock(io, b, KILN_IO_LOCK_EXCLUSIVE), KILN_EBUSY);
    KT_CHECK_EQ(io->lock(io, b, KILN_IO_LOCK_SHARED), KILN_EBUSY);
    KT_CHECK_OK(io->lock(io, a, KILN_IO_UNLOCK));
    KT_CHECK_OK(io->lock(io, b, KILN_IO_LOCK_EXCLUSIVE));
    io->close(io, a);
    io->close(io, b);
}

KT_CASE(utf8_folder)
{
    /* Every call of the I/O table below gets a UTF-8 path through a folder
     * named outside ASCII ("kiln-tëst-ü", a file "dätä-日本.bin"). */
    const struct kiln_io *io = kiln_io_default();
    char dir[4200], path[4300], moved[4300];
    KT_REQUIRE_OK(kiln__path_join(dir, sizeof(dir), kt_tmpdir(), "kiln-t\xc3\xabst-\xc3\xbc"));
    KT_REQUIRE(kt_mkdir(dir) == 0);
    KT_REQUIRE_OK(kiln__path_join(path, sizeof(path), dir,
                                  "d\xc3\xa4t\xc3\xa4-\xe6\x97\xa5\xe6\x9c\xac.bin"));
    KT_REQUIRE_OK(kiln__path_join(moved, sizeof(moved), dir, "\xc3\xbc.bin"));

    KT_REQUIRE_OK(kiln_io_replace_file(io, path, "payload", 7));
    void *data;
    size_t n;
    KT_REQUIRE_OK(kiln_io_read_file(io, path, 64, &data, &n));
    KT_CHECK_EQ(n, 7);
    KT_CHECK(memcmp(data, "payload", 7) == 0);
    free(data);

    int fd;
    KT_CHECK_EQ(io->open(io, path, KILN_IO_RDWR | KILN_IO_CREATE | KILN_IO_EXCL, &fd), KILN_EEXIST);
    KT_REQUIRE_OK(io->open(io, path, KILN_IO_RDWR, &fd));
    KT_CHECK_OK(io->lock(io, fd, KILN_IO_LOCK_EXCLUSIVE));
    KT_CHECK_OK(io->truncate(io, fd, 3));
    uint64_t size = 0;
    KT_CHECK_OK(io->file_size(io, fd, &size));
    KT_CHECK_EQ(size, 3);
    KT_CHECK_OK(io->lock(io, fd, KILN_IO_UNLOCK));
    KT_CHECK_OK(io->close(io, fd));

    /* Rename over an existing file replaces it. */
    KT_REQUIRE_OK(kiln_io_replace_file(io, moved, "old", 3));
    KT_CHECK_OK(io->rename(io, path, moved));
    KT_CHECK_OK(io->fsync_dir(io, dir));
    KT_CHECK_EQ(io->open(io, path, KILN_IO_READ, &fd), KILN_ENOENT);
    KT_REQUIRE_OK(kiln_io_read_file(io, moved, 64, &data, &n));
    KT_CHECK_EQ(n, 3);
    KT_CHECK(memcmp(data, "pay", 3) == 0);
    free(data);
    KT_CHECK_OK(io->unlink(io, moved));
    KT_CHECK_EQ(io->open(io, moved, KILN_IO_READ, &fd), KILN_ENOENT);
    KT_CHECK_EQ(io->open(io, "bad-\xc3(-utf8", KILN_IO_READ, &fd) < 0, 1);
}

KT_CASE(replace_while_open)
{
    /* A reader holding the old file open neither blocks its replacement nor
     * sees it change: both platforms keep the old bytes for the old handle. */
    const struct kiln_io *io = kiln_io_default();
    char path[4200];
    KT_REQUIRE_OK(kiln__path_join(path, sizeof(path), kt_tmpdir(), "held"));
    KT_REQUIRE_OK(kiln_io_replace_file(io, path, "old!", 4));
    int fd;
    KT_REQUIRE_OK(io->open(io, path, KILN_IO_READ, &fd));
    KT_CHECK_OK(kiln_io_replace_file(io, path, "brand new", 9));
    char buf[4];
    KT_CHECK_OK(kiln_io_read_full(io, fd, buf, 4, 0));
    KT_CHECK(memcmp(buf, "old!", 4) == 0);
    io->close(io, fd);
    void *data;
    size_t n;
    KT_REQUIRE_OK(kiln_io_read_file(io, path, 64, &data, &n));
    KT_CHECK_EQ(n, 9);
    free(data);
    KT_CHECK_OK(io->unlink(io, path));
}

KT_CASE(hash_and_path)
{
    KT_CHECK(kiln_hash64("abc", 3) == kiln_hash64("abc", 3));
    KT_CHECK(kiln_hash64("abc", 3) != kiln_hash64("abd", 3));
    struct kiln_key k1 = kiln_hash128("abc", 3), k2 = kiln_hash128("abc", 3);
    KT_CHECK(kiln_key_equal(k1, k2));
    char out[9];
    KT_CHECK_EQ(kiln__path_join(out, sizeof(out), "dir", "name"), KILN_OK);
    KT_CHECK(strcmp(out, "dir/name") == 0);
    KT_CHECK_EQ(kiln__path_join(out, sizeof(out), "folder", "name"), KILN_ERANGE);
    uint64_t t0 = kiln_now_ns(), t1 = kiln_now_ns();
    KT_CHECK(t1 >= t0);
    unsigned char r[32] = {0}, zero[32] = {0};
    KT_CHECK_OK(kiln_random_bytes(r, sizeof(r)));
    KT_CHECK(memcmp(r, zero, sizeof(r)) != 0);
    KT_CHECK(kiln_rss_bytes() > 0);
}

KT_CASE(faultio_faults_and_power_cut)
{
    struct faultio f;
    faultio_init(&f);
    const struct kiln_io *io = &f.io;
    char path[4200];
    KT_REQUIRE_OK(kiln__path_join(path, sizeof(path), kt_tmpdir(), "data"));
    int fd;
    KT_REQUIRE_OK(io->open(io, path, KILN_IO_RDWR | KILN_IO_CREATE, &fd));

    /* The second write fails with ENOSPC, once. */
    faultio_arm(&f, 2, FAULTIO_WRITE, KILN_ENOSPC, false);
    KT_CHECK_OK(kiln_io_write_full(io, fd, "aaaa", 4, 0));
    KT_CHECK_EQ(kiln_io_write_full(io, fd, "bbbb", 4, 4), KILN_ENOSPC);
    KT_CHECK_OK(kiln_io_write_full(io, fd, "bbbb", 4, 4));
    KT_CHECK_EQ(f.faults, 1);

    /* Persistent: every sync from the first on fails. */
    faultio_arm(&f, 1, FAULTIO_SYNC, KILN_EIO, true);
    KT_CHECK_EQ(io->fsync(io, fd), KILN_EIO_SYNC);
    KT_CHECK_EQ(io->fsync(io, fd), KILN_EIO_SYNC);
    faultio_disarm(&f);

    /* A power cut undoes what was written after the last sync. */
    f.track_unsynced = true;
    KT_CHECK_OK(io->fsync(io, fd));
    KT_CHECK_OK(kiln_io_write_full(io, fd, "cccccccc", 8, 8));
    KT_CHECK_OK(kiln_io_write_full(io, fd, "XX", 2, 0));
    KT_CHECK_EQ(faultio_power_cut(&f, false), 2);
    uint64_t size = 0;
    KT_CHECK_OK(io->file_size(io, fd, &size));
    KT_CHECK_EQ(size, 8);
    char buf[8];
    KT_CHECK_OK(kiln_io_read_full(io, fd, buf, 8, 0));
    KT_CHECK(memcmp(buf, "aaaabbbb", 8) == 0);

    /* A torn write keeps the first half of the newest unsynced write. */
    KT_CHECK_OK(kiln_io_write_full(io, fd, "dddddddd", 8, 8));
    KT_CHECK_EQ(faultio_power_cut(&f, true), 1);
    KT_CHECK_OK(io->file_size(io, fd, &size));
    KT_CHECK_EQ(size, 12);
    io->close(io, fd);
    faultio_destroy(&f);
}

KT_MAIN(KT_ENTRY(error_names), KT_ENTRY(error_erofs), KT_ENTRY(log_levels_and_sink),
        KT_ENTRY(replace_and_read_file), KT_ENTRY(lock_is_exclusive), KT_ENTRY(utf8_folder),
        KT_ENTRY(replace_while_open), KT_ENTRY(hash_and_path),
        KT_ENTRY(faultio_faults_and_power_cut))
