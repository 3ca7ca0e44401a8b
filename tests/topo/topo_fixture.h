/*
 * topo_fixture.h - writing small sysfs / proc trees for the topo tests, and
 * catching the log lines a call makes.
 */
#ifndef KILN_TOPO_FIXTURE_H
#define KILN_TOPO_FIXTURE_H

#include "kiln_test.h"

#define FX_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Writes ROOT/REL (making its folders) holding `text` and a newline. */
void fx_write(const char *root, const char *rel, const char *text);

/* Removes ROOT/REL (a file or an empty folder). */
void fx_remove(const char *root, const char *rel);

/* Makes ROOT/REL a folder. */
void fx_mkdir(const char *root, const char *rel);

/* Writes cpuCPU/cache/indexINDEX/{level,type,size,shared_cpu_list,id}. */
void fx_cache(const char *root, unsigned cpu, unsigned index, unsigned level, const char *type,
              const char *size, const char *list, int id);

/*
 * A fresh folder for a large tree: in /dev/shm when there is one (creating
 * thousands of files on a journaling disk takes seconds), else kt_tmpdir().
 * Remove it with fx_fast_tmpdir_done().
 */
const char *fx_fast_tmpdir(void);
void fx_fast_tmpdir_done(const char *dir);

/* The path of a committed fixture tree under tests/fixtures/topo. */
const char *fx_committed(const char *name);

/* Starts catching log lines (every level); fx_log_stop() ends it. */
void fx_log_start(void);
void fx_log_stop(void);
/* How many lines of `level` were caught. */
int fx_log_count(enum kiln_log_level level);
/* @return whether a caught line of `level` contains `text`. */
bool fx_log_has(enum kiln_log_level level, const char *text);

/* A CPU set from a list; fails the case on a bad list. Free with kiln_cpuset_free. */
struct kiln_cpuset fx_set(const char *list);

/* @return whether `set` formats as exactly `list`. Prints both when not. */
bool fx_set_is(const struct kiln_cpuset *set, const char *list);

#endif /* KILN_TOPO_FIXTURE_H */
