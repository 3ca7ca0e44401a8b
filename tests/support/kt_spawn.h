/*
 * kt_spawn.h - running a program from a test (POSIX: posix_spawn), the
 * built kiln binary above all: its arguments, its environment, where its
 * output goes, and a bound on how long it may take.
 */
#ifndef KILN_KT_SPAWN_H
#define KILN_KT_SPAWN_H

#include <stdbool.h>
#include <stddef.h>

/* One run. Set the fields before kt_spawn (zero: the default). */
struct kt_spawn {
    const char *stdin_path;  /* NULL: this process's stdin */
    const char *stderr_path; /* a file, made or emptied; NULL: this process's stderr */
    bool leak_checks;        /* false: ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 instead of
                              * this process's, for runs that load a Vulkan driver */
    const char *fault;       /* $KILN_TEST_FAULT of the run; NULL: none */
    unsigned limit_s;        /* past it the program is killed and the case fails; 0: no bound */
    const char *env;         /* one more NAME=value for the run; NULL: none */
    bool own_group;          /* the program leads a process group of its own, which a case
                              * may signal as a terminal's Ctrl-C does: kill(-pid, SIGINT) */
    /* Called about every 10 ms while the program runs, with its pid (NULL:
     * never): a case may signal it there. */
    void (*during)(void *user, int pid);
    void *during_user;
    char *out;      /* the caller's buffer for stdout, NUL-terminated (cut short at */
    size_t out_cap; /* out_cap - 1 bytes) */
    size_t out_len; /* set by kt_spawn */
    int status;     /* set by kt_spawn: waitpid's status */
};

/*
 * Runs `exe` with `args` (NULL-terminated, at most 62; argv[0] is `exe`)
 * and waits for it, reading its stdout into r->out meanwhile. The child's
 * environment is this process's, less ASAN_OPTIONS (unless
 * r->leak_checks) and KILN_TEST_FAULT, plus what r names.
 * @return 0 with r->status and r->out, or -1 with a failure recorded (it
 * could not be started, or it ran past r->limit_s and was killed).
 */
int kt_spawn(const char *exe, const char *const *args, struct kt_spawn *r);

/* kt_spawn, for a run that must end by itself. @return its exit code, or
 * -1 with a failure recorded (kt_spawn failed, or a signal ended it). */
int kt_spawn_exit(const char *exe, const char *const *args, struct kt_spawn *r);

#endif /* KILN_KT_SPAWN_H */
