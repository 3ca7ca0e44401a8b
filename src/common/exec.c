/*
 * exec.c - running a group of workers, on the application's executor
 * (struct kiln_executor) or on threads started here.
 *
 * Design. kiln__exec_run runs fn(arg) n times at once and returns when
 * the work is done. The workers take their work from shared state, so the
 * calling thread always runs one of them: whatever the executor does with
 * its tasks (runs them inline inside submit, later, or refuses them), the
 * work gets done, and a refused task is made up for by one more run on the
 * calling thread. When the calling thread's run returns, every piece of
 * work has been taken; the caller then waits only for the tasks that are
 * running fn (they hold work), never for a task the executor has not
 * started: that one may be queued behind the very thread that waits (an
 * executor of one thread), and when it starts it finds the group closed
 * and returns without calling fn.
 *
 * Invariants and why they hold:
 * - No task calls fn after the caller returned: a task checks `closed`
 *   and counts itself `running` under one hold of the mutex, and the
 *   caller sets `closed` and waits for `running` to reach 0 under it.
 * - The group outlives every task: it is on the heap with one reference
 *   per task taken plus the caller's, dropped under the mutex; the last
 *   one frees it.
 * - A refused task is never counted: submit's non-zero return says fn will
 *   not run, so the reference taken for it is given back.
 */
#include "kiln_internal.h"

#include <pthread.h>

struct group {
    pthread_mutex_t lock;
    pthread_cond_t done;
    unsigned refs;    /* the caller's, and one per task the executor took */
    unsigned running; /* tasks in fn now */
    bool closed;      /* the caller's run returned: every piece of work is taken */
    void (*fn)(void *);
    void *arg;
};

/* Drops one reference; the caller holds the lock, which this releases. */
static void group_unref(struct group *g)
{
    bool last = --g->refs == 0;
    pthread_mutex_unlock(&g->lock);
    if (!last)
        return;
    pthread_cond_destroy(&g->done);
    pthread_mutex_destroy(&g->lock);
    kiln__free(g);
}

static void group_task(void *p)
{
    struct group *g = p;
    pthread_mutex_lock(&g->lock);
    if (!g->closed) {
        g->running++;
        pthread_mutex_unlock(&g->lock);
        g->fn(g->arg);
        pthread_mutex_lock(&g->lock);
        if (--g->running == 0)
            pthread_cond_signal(&g->done);
    }
    group_unref(g);
}

static unsigned run_on_executor(const struct kiln_executor *ex, unsigned n, void (*fn)(void *),
                                void *arg)
{
    struct group *g = kiln__calloc(1, sizeof(*g));
    if (!g) {
        fn(arg); /* no group: all of it here */
        return 0;
    }
    *g = (struct group){.refs = 1, .fn = fn, .arg = arg};
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->done, NULL);
    unsigned taken = 0, refused = 0;
    for (unsigned i = 1; i < n; i++) {
        pthread_mutex_lock(&g->lock);
        g->refs++;
        pthread_mutex_unlock(&g->lock);
        if (ex->submit(group_task, g, ex->user) == 0) {
            taken++;
            continue;
        }
        pthread_mutex_lock(&g->lock);
        g->refs--;
        pthread_mutex_unlock(&g->lock);
        refused++;
    }
    if (refused)
        KILN_INFO("exec", "the executor refused %u of %u tasks; the calling thread runs them",
                  refused, n - 1);
    for (unsigned i = 0; i <= refused; i++)
        fn(arg); /* the calling thread's share, and each refused one */
    pthread_mutex_lock(&g->lock);
    g->closed = true;
    while (g->running > 0)
        pthread_cond_wait(&g->done, &g->lock);
    group_unref(g);
    return taken;
}

struct thread_arg {
    void (*fn)(void *);
    void *arg;
};

static void *thread_main(void *p)
{
    struct thread_arg *t = p;
    t->fn(t->arg);
    return NULL;
}

unsigned kiln__exec_run(const struct kiln_executor *ex, unsigned n, void (*fn)(void *), void *arg)
{
    if (n == 0)
        n = 1;
    if (ex) {
        if (ex->concurrency && n > ex->concurrency)
            n = ex->concurrency;
        return run_on_executor(ex, n, fn, arg);
    }
    pthread_t tid[64];
    struct thread_arg t = {fn, arg};
    unsigned started = 0;
    for (unsigned i = 1; i < n && started < KILN_ARRAY_LEN(tid); i++) {
        if (pthread_create(&tid[started], NULL, thread_main, &t) != 0)
            break; /* fewer threads: the others take the work */
        started++;
    }
    fn(arg); /* the calling thread works too */
    for (unsigned i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    return 0;
}

int kiln__exec_in(struct kiln_executor *out, bool *set, const struct kiln_executor *ex)
{
    *set = false;
    KILN_TRY(KILN_STRUCT_IN(out, ex, "kiln_executor"));
    if (!ex)
        return 0;
    if (!out->submit) {
        KILN_ERROR("exec", "kiln_executor: submit is NULL");
        return KILN_EINVAL;
    }
    *set = true;
    return 0;
}
