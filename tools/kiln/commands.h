/*
 * commands.h - every `kiln` command, one function each, one file each.
 */
#ifndef KILN_COMMANDS_H
#define KILN_COMMANDS_H

int cmd_prepare(int argc, char **argv);       /* cmd_prepare.c */
int cmd_start(int argc, char **argv);         /* cmd_start.c */
int cmd_cache_stats(int argc, char **argv);   /* cmd_cache.c */
int cmd_cache_check(int argc, char **argv);   /* cmd_cache.c */
int cmd_cache_repack(int argc, char **argv);  /* cmd_cache_repack.c */
int cmd_cache_prune(int argc, char **argv);   /* cmd_cache_life.c */
int cmd_cache_compact(int argc, char **argv); /* cmd_cache_life.c */
int cmd_cache_merge(int argc, char **argv);   /* cmd_cache_life.c */
int cmd_import_foz(int argc, char **argv);    /* cmd_import.c */
int cmd_export_foz(int argc, char **argv);    /* cmd_export.c */
int cmd_topo(int argc, char **argv);          /* cmd_topo.c */
int cmd_bench_store(int argc, char **argv);   /* bench_store_unix.c */
int cmd_bench_pack(int argc, char **argv);    /* bench_pack.c */
int cmd_bench_prepare(int argc, char **argv); /* bench_prepare_unix.c */
int cmd_bench_pages(int argc, char **argv);   /* bench_pages.c */
int cmd_bench_replay(int argc, char **argv);  /* bench_replay_unix.c */
int cmd_bench_start(int argc, char **argv);   /* bench_start.c */
int cmd_bench_stutter(int argc, char **argv); /* bench_stutter_unix.c */
int cmd_bench_peer(int argc, char **argv);    /* bench_peer.c */
int cmd_worker(int argc, char **argv);        /* cmd_worker.c (private: kiln __worker) */

#include <stdint.h>

/* The compile-once figures of `kiln bench prepare` (bench_twice_unix.c): [0] the
 * first prepare into a new folder, [1] the second over the same programs. */
struct bench_twice {
    unsigned programs;
    int error;
    double pipelines_s[2], translate_s[2], total_s[2];
    uint64_t driver_compiles[2], ledger_skipped[2], built[2], failed[2];
};

/* Prepares `n` generated programs twice into a temporary folder, in a child
 * process (bench_twice_unix.c). @return 0 or the error (one line printed). */
int bench_prepare_twice(const char *name, unsigned n, uint64_t seed, unsigned jobs,
                        struct bench_twice *out);

#endif /* KILN_COMMANDS_H */
