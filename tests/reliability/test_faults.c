/*
 * test_faults.c - injected I/O errors and simulated power cuts, at every
 * call of a writer's sequence.
 *
 * Each sweep first runs the writer loop (rel_model.h) with a counter only,
 * to learn how many calls of the chosen kinds it makes, then runs it once
 * per call index N with the Nth call failing (transient: only that call;
 * persistent: that call and every later one, as a full disk does), and
 * checks the folder afterwards with the plain I/O table (rel_check). The
 * power-cut sweeps stop the writer's disk dead after N calls and then undo
 * every write not made durable by an fsync, optionally tearing the newest
 * one; the "twice" sweep cuts the power again while the next run recovers.
 *
 * KILN_RELIABILITY_LONG=1 runs a writer four times as long and every point
 * of the twice-cut sweep instead of a sample.
 */
#include "faultio.h"
#include "rel_model.h"
#include "kiln_internal.h"

#include <stdlib.h>
#include <string.h>

static unsigned records(void)
{
    return rel_long_run() ? 160 : 32;
}

struct fault_kind {
    const char *name;
    unsigned kinds;
    int error;
    bool short_write;
};

/* Runs one faulted writer into a fresh folder and checks it. @return problems. */
static int one_point(const struct fault_kind *k, uint64_t nth, bool persistent, bool track,
                     bool cut, bool tear, struct rel_writer_stats *st, uint64_t *faults)
{
    const char *dir = kt_tmpdir();
    struct rel_model m;
    memset(&m, 0, sizeof(m));
    uint32_t version = 0;
    struct faultio f;
    faultio_init(&f);
    f.track_unsynced = track;
    faultio_arm(&f, nth, k->kinds, k->error, persistent);
    f.short_write = k->short_write;
    rel_writer(dir, &f.io, records(), &m, &version, st);
    *faults += f.faults;
    if (cut)
        faultio_power_cut(&f, tear);
    faultio_destroy(&f);
    char what[160];
    snprintf(what, sizeof(what), "%s %s%s at call %" PRIu64, k->name,
             cut          ? (tear ? "power cut (torn)" : "power cut")
             : persistent ? "persistent"
                          : "transient",
             cut ? ", after" : "", nth);
    return rel_check(dir, &m, what);
}

/* Counts the calls of k->kinds one clean writer run makes. */
static uint64_t count_calls(const struct fault_kind *k)
{
    const char *dir = kt_tmpdir();
    struct rel_model m;
    memset(&m, 0, sizeof(m));
    uint32_t version = 0;
    struct rel_writer_stats st = {0};
    struct faultio f;
    faultio_init(&f);
    faultio_arm(&f, UINT64_MAX, k->kinds, k->error, false);
    rel_writer(dir, &f.io, records(), &m, &version, &st);
    uint64_t n = f.calls;
    faultio_destroy(&f);
    return n;
}

static void sweep(const struct fault_kind *k)
{
    rel_quiet(true);
    uint64_t calls = count_calls(k);
    KT_CHECK(calls > 0);
    unsigned points = 0, problems = 0;
    uint64_t faults = 0;
    struct rel_writer_stats st = {0};
    for (int persistent = 0; persistent < 2; persistent++)
        for (uint64_t n = 1; n <= calls; n++) {
            problems += (unsigned)one_point(k, n, persistent, false, false, false, &st, &faults);
            points++;
        }
    rel_quiet(false);
    printf("sweep %-12s %u records: %" PRIu64 " calls, %u injection points (transient and "
           "persistent), %" PRIu64 " faults injected; opens failed %u, puts failed %u, syncs "
           "failed %u, syncs done %u; %u problems\n",
           k->name, records(), calls, points, faults, st.opens_failed, st.puts_failed,
           st.syncs_failed, st.syncs_done, problems);
    KT_CHECK_EQ(problems, 0);
    /* Every point must have injected a fault: else the sweep tested nothing. */
    KT_CHECK(faults >= points);
}

KT_CASE(write_enospc)
{
    sweep(&(struct fault_kind){"write-enospc", FAULTIO_WRITE, KILN_ENOSPC, false});
}

KT_CASE(write_eio)
{
    sweep(&(struct fault_kind){"write-eio", FAULTIO_WRITE, KILN_EIO_WRITE, false});
}

KT_CASE(short_write)
{
    sweep(&(struct fault_kind){"short-write", FAULTIO_WRITE, KILN_ENOSPC, true});
}

KT_CASE(sync_fails)
{
    sweep(&(struct fault_kind){"fsync", FAULTIO_SYNC, KILN_EIO, false});
}

KT_CASE(rename_fails)
{
    sweep(&(struct fault_kind){"rename", FAULTIO_RENAME, KILN_EIO, false});
}

KT_CASE(truncate_fails)
{
    sweep(&(struct fault_kind){"truncate", FAULTIO_TRUNCATE, KILN_EIO, false});
}

KT_CASE(open_fails)
{
    sweep(&(struct fault_kind){"open", FAULTIO_OPEN, KILN_EIO_OPEN, false});
}

KT_CASE(any_write_call)
{
    /* Every write-side call counted together: the Nth of them fails. */
    sweep(&(struct fault_kind){"any-write", FAULTIO_ANY_WRITE | FAULTIO_OPEN, KILN_ENOSPC, true});
}

static const struct fault_kind dead_disk = {"dead-disk", FAULTIO_ANY_WRITE | FAULTIO_OPEN, KILN_EIO,
                                            false};

static void power_cut_sweep(bool tear)
{
    rel_quiet(true);
    uint64_t calls = count_calls(&dead_disk);
    unsigned points = 0, problems = 0;
    uint64_t faults = 0;
    struct rel_writer_stats st = {0};
    /* n = calls + 1 never fails: the cut then comes after a clean close. */
    for (uint64_t n = 1; n <= calls + 1; n++) {
        problems += (unsigned)one_point(&dead_disk, n, true, true, true, tear, &st, &faults);
        points++;
    }
    rel_quiet(false);
    printf("power cut%s: %u records, %u cut points (after each of %" PRIu64
           " write-side calls); syncs done %u; %u problems\n",
           tear ? " with a torn last write" : "", records(), points, calls, st.syncs_done,
           problems);
    KT_CHECK_EQ(problems, 0);
}

KT_CASE(power_cut)
{
    power_cut_sweep(false);
}

KT_CASE(power_cut_torn)
{
    power_cut_sweep(true);
}

/*
 * A power cut, then a second power cut while the next run recovers the
 * cache (cuts its torn tail, catches its index up) and writes more.
 */
KT_CASE(power_cut_twice)
{
    rel_quiet(true);
    uint64_t calls = count_calls(&dead_disk);
    unsigned step = rel_long_run() ? 1 : 24, points = 0, problems = 0;
    for (uint64_t n = 1; n <= calls; n += step) {
        /* How many calls the recovering run makes after this first cut. */
        uint64_t calls2 = 0;
        for (uint64_t n2 = 1;; n2++) {
            const char *dir = kt_tmpdir();
            struct rel_model m;
            memset(&m, 0, sizeof(m));
            uint32_t version = 0;
            struct rel_writer_stats st = {0};
            struct faultio f;
            faultio_init(&f);
            f.track_unsynced = true;
            faultio_arm(&f, n, dead_disk.kinds, KILN_EIO, true);
            rel_writer(dir, &f.io, records(), &m, &version, &st);
            faultio_power_cut(&f, (n & 1) != 0);
            faultio_destroy(&f);

            faultio_init(&f);
            f.track_unsynced = true;
            faultio_arm(&f, n2, dead_disk.kinds, KILN_EIO, true);
            rel_writer(dir, &f.io, records() / 2, &m, &version, &st);
            bool fired = f.faults > 0;
            faultio_power_cut(&f, (n2 & 1) != 0);
            faultio_destroy(&f);
            char what[96];
            snprintf(what, sizeof(what), "power cut after call %" PRIu64 ", then after %" PRIu64, n,
                     n2);
            problems += (unsigned)rel_check(dir, &m, what);
            points++;
            if (!fired) {
                calls2 = n2 - 1;
                break;
            }
            if (n2 > 100000) {
                KT_CHECK(!"the recovering writer never finished");
                break;
            }
        }
        (void)calls2;
    }
    rel_quiet(false);
    printf("power cut twice: %u pairs of cut points (first cut every %u of %" PRIu64
           " calls); %u problems\n",
           points, step, calls, problems);
    KT_CHECK_EQ(problems, 0);
}

/* The check itself: it must see a lost synced record, an index ahead of
 * its records, and a damaged payload (else the sweeps prove nothing). */
KT_CASE(check_sees_damage)
{
    rel_quiet(true);
    for (int how = 0; how < 2; how++) {
        const char *dir = kt_tmpdir();
        struct rel_model m;
        memset(&m, 0, sizeof(m));
        uint32_t version = 0;
        struct rel_writer_stats st = {0};
        rel_writer(dir, kiln_io_default(), records(), &m, &version, &st);
        KT_CHECK_EQ(rel_count_problems(dir, &m), 0);
        char path[4200];
        KT_REQUIRE_OK(kiln__path_join(path, sizeof(path), dir, KILN_CACHE_RECORDS_FILE));
        const struct kiln_io *io = kiln_io_default();
        int fd;
        uint64_t size;
        KT_REQUIRE_OK(io->open(io, path, KILN_IO_RDWR, &fd));
        KT_REQUIRE_OK(io->file_size(io, fd, &size));
        if (how == 0) {
            KT_CHECK_OK(io->truncate(io, fd, size - 200)); /* synced records cut away */
        } else {
            unsigned char b;
            KT_CHECK_OK(kiln_io_read_full(io, fd, &b, 1, size / 2));
            b ^= 0x10;
            KT_CHECK_OK(kiln_io_write_full(io, fd, &b, 1, size / 2)); /* one flipped bit */
        }
        io->close(io, fd);
        KT_CHECK(rel_count_problems(dir, &m) > 0);
    }
    rel_quiet(false);
}

KT_MAIN(KT_ENTRY(check_sees_damage), KT_ENTRY(write_enospc), KT_ENTRY(write_eio),
        KT_ENTRY(short_write), KT_ENTRY(sync_fails), KT_ENTRY(rename_fails),
        KT_ENTRY(truncate_fails), KT_ENTRY(open_fails), KT_ENTRY(any_write_call),
        KT_ENTRY(power_cut), KT_ENTRY(power_cut_torn), KT_ENTRY(power_cut_twice))
