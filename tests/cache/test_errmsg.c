/*
 * test_errmsg.c - the error text of a handle (kiln_cache_errmsg) and of a
 * thread (kiln_last_errmsg): a failure provoked on purpose (a full disk
 * through a faulting kiln_io, a damaged record, a file that is no cache,
 * bad arguments) leaves a text that names the function, the file and the
 * error's code; it is the failure's own log line, also when the log level
 * hides that line; a later success leaves it; a lookup's miss is no
 * failure. Labelled threads: handles failing on several threads at once
 * while another reads the text run under TSan.
 */
#include "faultio.h"
#include "kiln/cache.h"
#include "kiln_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAMP 0x4552524d53470001ull

static struct kiln_key key_of(unsigned i)
{
    return (struct kiln_key){.lo = i * 0x9e3779b97f4a7c15ull + 1, .hi = i};
}

static int put(struct kiln_cache *c, unsigned i, size_t size)
{
    unsigned char buf[4096];
    memset(buf, (int)i, sizeof(buf));
    return kiln_cache_put(c, key_of(i), buf, size < sizeof(buf) ? size : sizeof(buf),
                          (uint32_t)size, 0, 1);
}

/* Checks that `text` holds each of the NULL-ended strings. */
static void check_names(const char *text, const char *const *parts)
{
    for (; *parts; parts++) {
        if (!strstr(text, *parts))
            kt_fail(__FILE__, __LINE__, "\"%s\" does not name \"%s\"", text, *parts);
    }
}

/* The last line logged, to compare with the text. */
static char logged[1024];

static void keep_line(void *user, enum kiln_log_level level, const char *module, const char *msg)
{
    (void)user;
    (void)level;
    (void)module;
    snprintf(logged, sizeof(logged), "%s", msg);
}

/* A new cache in the case's folder, on a faultio with no fault armed. */
static void open_faulty(struct faultio *f, struct kiln_cache **c)
{
    faultio_init(f);
    struct kiln_cache_options o = {
        .size = sizeof(o), .stamp = STAMP, .flags = KILN_CACHE_CREATE, .io = &f->io};
    KT_REQUIRE_OK(kiln_cache_open(kt_tmpdir(), &o, c));
}

KT_CASE(full_disk_names_put_file_and_code)
{
    struct faultio f;
    struct kiln_cache *c;
    open_faulty(&f, &c);
    KT_CHECK_EQ(strcmp(kiln_cache_errmsg(c), ""), 0); /* no failure yet */
    KT_CHECK_OK(put(c, 0, 100));

    kiln_log_set_sink(keep_line, NULL);
    faultio_arm(&f, 1, FAULTIO_WRITE, KILN_ENOSPC, true);
    KT_CHECK_EQ(put(c, 1, 1000), KILN_ENOSPC);
    kiln_log_set_sink(NULL, NULL);
    const char *text = kiln_cache_errmsg(c);
    check_names(text, (const char *const[]){"kiln_cache_put", KILN_CACHE_RECORDS_FILE,
                                            "no space left on device", "(KILN_ENOSPC)", NULL});
    printf("text: %s\n", text);
    /* One formatting: the text is the failure's log line. */
    KT_CHECK(logged[0] && strstr(text, logged) != NULL);
    KT_CHECK_EQ(strcmp(kiln_last_errmsg(), text), 0);

    /* A success leaves the text; so does a lookup that finds nothing. */
    faultio_disarm(&f);
    char kept[600];
    snprintf(kept, sizeof(kept), "%s", text);
    KT_CHECK_OK(put(c, 2, 100));
    KT_CHECK_EQ(kiln_cache_find(c, key_of(99), NULL), KILN_ENOTFOUND);
    KT_CHECK_EQ(strcmp(kiln_cache_errmsg(c), kept), 0);

    /* The sync on a full disk names itself. */
    faultio_arm(&f, 1, FAULTIO_SYNC, KILN_EIO_SYNC, true);
    KT_CHECK(kiln_cache_sync(c) < 0);
    check_names(kiln_cache_errmsg(c),
                (const char *const[]){"kiln_cache_sync", "programs.kp", "(KILN_EIO_SYNC)", NULL});
    faultio_disarm(&f);
    kiln_cache_close(c);
    faultio_destroy(&f);
}

/* The detail is kept even when the log level hides the line. */
KT_CASE(detail_kept_when_log_is_quiet)
{
    struct faultio f;
    struct kiln_cache *c;
    open_faulty(&f, &c);
    kiln_log_set_level(KILN_LOG_ERROR);
    logged[0] = '\0';
    kiln_log_set_sink(keep_line, NULL);
    faultio_arm(&f, 1, FAULTIO_WRITE, KILN_EIO_WRITE, true);
    KT_CHECK_EQ(put(c, 1, 1000), KILN_EIO_WRITE);
    kiln_log_set_sink(NULL, NULL);
    kiln_log_set_level(KILN_LOG_WARN);
    KT_CHECK_EQ(logged[0], '\0'); /* the warning was not shown */
    check_names(kiln_cache_errmsg(c),
                (const char *const[]){"kiln_cache_put", KILN_CACHE_RECORDS_FILE, "offset",
                                      "(KILN_EIO_WRITE)", NULL});
    faultio_disarm(&f);
    kiln_cache_close(c);
    faultio_destroy(&f);
}

KT_CASE(damaged_record_names_get_and_file)
{
    const char *dir = kt_tmpdir();
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = STAMP, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    KT_REQUIRE_OK(put(c, 1, 2000));
    KT_REQUIRE_OK(put(c, 3, 2000)); /* the last record is checked at open: damage the first */
    KT_REQUIRE_OK(kiln_cache_sync(c));
    struct kiln_cache_entry e;
    KT_REQUIRE_OK(kiln_cache_find(c, key_of(1), &e));
    kiln_cache_close(c);

    /* One payload byte flipped on disk. */
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, KILN_CACHE_RECORDS_FILE);
    FILE *fp = fopen(path, "r+b");
    KT_REQUIRE(fp);
    KT_REQUIRE(fseek(fp, (long)(e.offset + 48 + 100), SEEK_SET) == 0);
    int byte = fgetc(fp);
    KT_REQUIRE(fseek(fp, (long)(e.offset + 48 + 100), SEEK_SET) == 0);
    fputc(byte ^ 0x5a, fp);
    fclose(fp);

    o.flags = KILN_CACHE_READ_ONLY;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    struct kiln_cache_result r;
    KT_CHECK_EQ(kiln_cache_get(c, key_of(1), &r), KILN_ECORRUPT_RECORD);
    check_names(kiln_cache_errmsg(c),
                (const char *const[]){"kiln_cache_get", KILN_CACHE_RECORDS_FILE, "checksum",
                                      "(KILN_ECORRUPT_RECORD)", NULL});
    /* Bad arguments: a put on a read-only cache. */
    KT_CHECK_EQ(put(c, 2, 10), KILN_EINVAL);
    check_names(kiln_cache_errmsg(c),
                (const char *const[]){"kiln_cache_put", "(KILN_EINVAL)", NULL});
    kiln_cache_close(c);
}

KT_CASE(failed_open_names_open_and_file)
{
    const char *dir = kt_tmpdir();
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, KILN_CACHE_RECORDS_FILE);
    FILE *fp = fopen(path, "wb");
    KT_REQUIRE(fp);
    fputs("this is not a kiln cache, but a file long enough to hold a header of one......", fp);
    fclose(fp);
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = STAMP};
    struct kiln_cache *c;
    int rc = kiln_cache_open(dir, &o, &c);
    KT_CHECK(rc < 0);
    KT_CHECK(c == NULL);
    check_names(kiln_last_errmsg(),
                (const char *const[]){"kiln_cache_open", dir, kiln_errname(rc), NULL});

    /* No cache at all, and a NULL handle: the thread's text says so too. */
    KT_CHECK_EQ(kiln_cache_open(kt_tmpdir(), &o, &c), KILN_ENOENT);
    check_names(kiln_last_errmsg(),
                (const char *const[]){"kiln_cache_open", "(KILN_ENOENT)", NULL});
    KT_CHECK_EQ(kiln_cache_sync(NULL), KILN_EINVAL);
    check_names(kiln_last_errmsg(),
                (const char *const[]){"kiln_cache_sync", "(KILN_EINVAL)", NULL});
    KT_CHECK(kiln_cache_errmsg(NULL) != NULL);
}

/* ---- threads -------------------------------------------------------------- */

struct racer {
    struct kiln_cache *c;
    unsigned first;
    bool reader;
};

static void *race(void *p)
{
    struct racer *r = p;
    for (unsigned i = 0; i < 300; i++) {
        if (r->reader) {
            const char *t = kiln_cache_errmsg(r->c);
            KT_CHECK(t[0] == '\0' || strncmp(t, "kiln_cache_", 11) == 0);
        } else {
            /* A read-only cache refuses every put: a failure each time. */
            KT_CHECK_EQ(put(r->c, r->first + i, 10), KILN_EINVAL);
            KT_CHECK(strstr(kiln_last_errmsg(), "kiln_cache_put") != NULL);
        }
    }
    return NULL;
}

KT_CASE(threads_fail_and_read_at_once)
{
    const char *dir = kt_tmpdir();
    struct kiln_cache_options o = {.size = sizeof(o), .stamp = STAMP, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    kiln_cache_close(c);
    o.flags = KILN_CACHE_READ_ONLY;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    struct racer rs[3] = {{c, 0, false}, {c, 1000, false}, {c, 0, true}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        KT_REQUIRE(pthread_create(&t[i], NULL, race, &rs[i]) == 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    check_names(kiln_cache_errmsg(c),
                (const char *const[]){"kiln_cache_put", "(KILN_EINVAL)", NULL});
    kiln_cache_close(c);
}

KT_MAIN(KT_ENTRY(full_disk_names_put_file_and_code), KT_ENTRY(detail_kept_when_log_is_quiet),
        KT_ENTRY(damaged_record_names_get_and_file), KT_ENTRY(failed_open_names_open_and_file),
        KT_ENTRY(threads_fail_and_read_at_once))
