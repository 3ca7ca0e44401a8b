/*
 * bench_peer.h - `kiln bench peer`: what its portable part (bench_peer.c:
 * options, the peer's summary, the report) and its platform part
 * (bench_peer_unix.c: the processes it starts and measures;
 * bench_peer_win.c: not available) share.
 */
#ifndef KILN_BENCH_PEER_H
#define KILN_BENCH_PEER_H

#include "bench_child.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The pipelines a Fossilize replayer says it replayed: the sum over every
 * "Replayed N objects in M ms:" block of its output (one per process: a
 * --master-process run prints one per child process). */
struct peer_counts {
    uint64_t graphics, compute, raytracing;
    unsigned summaries; /* blocks found; 0: the output had none */
};

/* Reads fossilize-replay's summary lines ("  graphics pipelines:    110")
 * from its output `text` (NUL-terminated) into *out. */
void bench_peer_parse_summary(const char *text, struct peer_counts *out);

/* One tool's whole process (tree), started and measured once. */
struct peer_side {
    int exit_code;            /* 0..255, or 128 + the signal that ended it; -1: not started */
    uint64_t wall_ns;         /* from the spawn to the reaped exit */
    uint64_t maxrss_bytes;    /* wait4's ru_maxrss: the largest process of the tree */
    uint64_t tree_peak_bytes; /* the sampled peak of the tree's summed PSS */
    bool sampled;             /* the tree was sampled (0: no sample saw it alive) */
    uint64_t pipelines;       /* handled: the peer's replayed, kiln's built + skipped + failed */
    uint64_t built, skipped, failed; /* kiln's; the peer's built is its replayed */
    struct peer_counts kinds;        /* the peer's per kind */
    bool counted;                    /* the counts were read from its output */
    char *command;                   /* the command line, shell-quoted (owned) */
    char *short_command;             /* the same with the archives as ARCHIVES... (owned) */
};

/* One thread count of one mode: both tools over the same archives. */
struct peer_run {
    unsigned threads;
    bool isolated; /* the peer with --master-process, kiln with --isolate */
    struct peer_side peer, kiln;
};

#define PEER_MAX_RUNS (2 * BENCH_MAX_RUNS)

struct peer_bench {
    const char *name;
    const char *peer;            /* the fossilize-replay executable */
    const char *const *archives; /* the archives given (none with --generate) */
    size_t narchives;
    uint32_t generate; /* --generate N, 0: archives */
    uint64_t seed;     /* the generator's */
    const char *keep;  /* --keep-archive */
    bool isolate, use_device, warmup;
    bool quiet; /* --json: no progress lines */
    unsigned device;
    unsigned threads[BENCH_MAX_RUNS], nthreads;
    /* Filled by bench_peer_measure. */
    char archive[CLI_PATH_MAX + 32]; /* the generated archive */
    double generate_s;
    struct peer_run runs[PEER_MAX_RUNS];
    unsigned nruns;
};

/* The environment every run gets, as the command lines say it. */
#define PEER_ENV \
    "MESA_SHADER_CACHE_DISABLE=true MESA_GLSL_CACHE_DISABLE=true __GL_SHADER_DISK_CACHE=0"

/*
 * Runs every count (and mode) of `b`: for each, the peer and then kiln, each
 * a fresh process tree in a private temporary folder (kiln into a new
 * cache there), and fills b->runs. A run that exits non-zero is recorded,
 * not an error. @return 0, or the error after one line naming b->name
 * (the temporary folder, the generated archive, a spawn); KILN_ENOTSUP
 * where there is no fork and exec (Windows).
 */
int bench_peer_measure(struct peer_bench *b);

/* Frees the command lines of one run, of every run of b. */
void bench_peer_run_free(struct peer_run *r);
void bench_peer_free(struct peer_bench *b);

/* Appends `arg` to the command line `*line` (heap, grown), quoted for a
 * POSIX shell where it holds anything but [A-Za-z0-9_./,:=+@%-].
 * @return 0, or KILN_ENOMEM (the line is left as it was). */
int bench_peer_quote(char **line, const char *arg);

#endif /* KILN_BENCH_PEER_H */
