/*
 * isolate.c - isolation: kiln_prepare's pipeline phase in worker
 * processes, so that a driver that crashes or hangs in vkCreate*Pipelines
 * costs one pipeline, not the run. The frames parent and worker exchange
 * are here too; the worker's side is isolate_worker.c, the processes and
 * pipes isolate_unix.c / isolate_win.c.
 *
 * Invariants and why they hold:
 *
 * - Workers are shared by the pool's threads, each held by one thread at
 *   a time: a thread takes an idle worker (or has one started, or waits)
 *   under the phase's mutex, talks to it alone, and gives it back
 *   (acquire, release). A slot's fields change only while it is held,
 *   or under the mutex; after the pool joined and the starters were
 *   joined they are the caller's. How many are started, and when, is
 *   isolate_plan.c's rule: as many as the work pays for, never more than
 *   the pool's threads.
 *
 * - Workers start in parallel, and work goes to whichever is ready first.
 *   A start (spawn, greeting, the worker's Vulkan device, its READY) runs
 *   on a starter thread of its own, which holds the slot until the worker
 *   answered; the pool thread that asked for it does not wait for that
 *   worker but for any idle one. So N starts take about the slowest one,
 *   not their sum, and the first build begins when the first worker is
 *   ready. A starter thread is joined before its slot is started again
 *   and at the end of the phase, before the slots are read.
 *
 * - Workers start with the run (kiln__isolate_early_begin): before the
 *   translation, the spawner thread starts the count the sizing rule
 *   starts with nothing timed and sends each START, so their Vulkan
 *   instance and device choice overlap the translation. Once the run
 *   knows the greeting (kiln__isolate_early_greet, right before it makes
 *   its own device) the spawner thread sends each the HELLO the phase
 *   would send (make_hello, from the same run and dictionary), so their
 *   devices are made beside the parent's; a starter then takes one of
 *   those (take_early, which waits until the thread is done with them)
 *   before it spawns another, and only reads its READY (or greets it,
 *   when the run did not). The HELLO, read by the worker inside its
 *   context's creation, still decides the device's extensions, so a
 *   worker started early builds exactly as one started late. A start's
 *   cost is counted from its greeting to its READY. Those never taken are
 *   ended by kiln__isolate_early_end, which waits until the spawner thread
 *   started (and greeted) them all, ends them, then the thread.
 *
 * - Nothing waits without a bound. Every send and receive has a deadline:
 *   the per-pipeline time limit for each program (learned or fixed) and
 *   the fixed one for a new worker's greeting and for the final cache;
 *   the parent's channel is non-blocking and waited on with a timeout
 *   (isolate_unix.c). A worker past its deadline is killed, then reaped.
 *   A thread waiting for a worker waits for one that is bounded so.
 *
 * - Every program gets exactly one outcome. Programs travel in batches
 *   (one JOB frame, up to KILN__ISO_BATCH_MAX), and the worker answers
 *   each in order as it ends (built, skipped, failed, bad, lone); the
 *   parent counts it as the in-process phase would. A worker that dies,
 *   passes the limit or answers garbage has answered every program before
 *   the one it was building: that one fails (KILN_ECRASH, KILN_ETIMEDOUT,
 *   KILN_EFORMAT) with one warning line naming it and how the worker
 *   ended, and the batch's programs after it, which were never started,
 *   go to another worker as a batch of their own. A
 *   program no worker received (no worker could start or greet, the send
 *   failed) fails as `unreached`: kiln's failure, not the driver's word,
 *   so the ledger does not record it and the next run tries it again; a
 *   program killed at a learned limit under the fixed one is not recorded
 *   either (early_timeout: kiln's guess).
 *
 * - Bytes from a worker are checked before use: a frame head's magic, type
 *   and size bound, the body's checksum, and each body's fields against its
 *   length (kiln__iso_*_parse, fuzzed by fuzz/fuzz_isolate_frame.c). A
 *   worker's pipeline cache goes to the driver only when its header names
 *   this device and driver (its pipelineCacheUUID), as pipelines.vkc does.
 *
 * - The run's memory budget and priority reach the workers: each worker's
 *   pid is registered with the budget (kiln__budget_add_pid) for its whole
 *   life, so the pool holds jobs back by kiln's and its workers' resident
 *   memory together; and the thread that starts the workers is in
 *   background mode when the run is, so a child inherits that priority
 *   (nice, SCHED_IDLE, the idle I/O class; on Windows, where a thread's
 *   background mode is not inherited, the child gets the idle priority
 *   class and enters background mode itself). A cancelled run hands no
 *   more programs to the workers.
 *
 * - No worker outlives its parent (isolate_unix.c, isolate_win.c): on
 *   Linux a worker asks for SIGKILL when its parent goes
 *   (PR_SET_PDEATHSIG). The kernel sends it when the *thread* that started
 *   the child ends, not the process, and the pool's threads end before
 *   the workers are sent END (finish_workers runs after the pool joined).
 *   So every worker is started by one spawner thread of the phase's own
 *   (of the run's, with workers started early), which a pool thread asks
 *   and waits for, and which is joined only after every worker was ended
 *   and reaped: it outlives them all.
 *
 * - Workers enable the device extensions this process would: the greeting
 *   carries the names this process's builders found the programs need
 *   (kiln__prep_needed_extensions) and the state kinds it has builders
 *   for, and a worker enables, for its own builder of a listed kind, only
 *   those of its extensions named; for another kind, all of them (the
 *   parent cannot ask a builder it lacks). Names rather than bits, so a
 *   worker whose builder array is ordered otherwise still enables the right
 *   ones.
 *
 * - What workers compiled reaches pipelines.vkc: at the end every worker
 *   is sent END at once, and each sends its pipeline cache's data, merged
 *   into the parent's (vkMergePipelineCaches) on the caller's thread after
 *   the pool has joined, before kiln_prepare saves it. A worker that died
 *   loses what it compiled (said in docs/prep.md).
 *
 * - Teardown costs no orderly Vulkan teardown: once a worker's cache data
 *   is in, nothing more is wanted from it, so the workers get
 *   QUIT_GRACE_MS together to exit and are killed after; a device's
 *   destruction (tens of ms, each) is not waited for. Every program's
 *   outcome was received before, so no result depends on how a worker
 *   ends.
 */
#include "kiln_internal.h"
#include "binaries.h"
#include "isolate_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- frames ------------------------------------------------------------ */

static uint32_t body_check(const void *body, size_t n)
{
    return (uint32_t)kiln_hash64(body, n);
}

void kiln__iso_head_put(uint8_t out[KILN__ISO_HEAD_BYTES], uint32_t type, const void *body,
                        uint32_t size)
{
    kiln__store_le32(out, KILN__ISO_MAGIC);
    kiln__store_le32(out + 4, type);
    kiln__store_le32(out + 8, size);
    kiln__store_le32(out + 12, body_check(body, size));
}

int kiln__iso_head_get(const uint8_t in[KILN__ISO_HEAD_BYTES], struct kiln__iso_head *h)
{
    if (kiln__load_le32(in) != KILN__ISO_MAGIC)
        return KILN_EFORMAT;
    h->type = kiln__load_le32(in + 4);
    h->size = kiln__load_le32(in + 8);
    h->check = kiln__load_le32(in + 12);
    if (h->type < KILN__ISO_HELLO || h->type > KILN__ISO_BINARIES || h->size > KILN__ISO_BODY_MAX)
        return KILN_EFORMAT;
    return KILN_OK;
}

int kiln__iso_body_check(const struct kiln__iso_head *h, const void *body)
{
    return body_check(body, h->size) == h->check ? KILN_OK : KILN_EFORMAT;
}

/* A string of `len` bytes at p[at..] followed by its NUL, inside n bytes.
 * @return 0 or KILN_EFORMAT. */
static int str_at(const uint8_t *p, size_t n, size_t at, uint32_t len)
{
    if (at > n || len >= n - at || p[at + len] != '\0' || memchr(p + at, '\0', len))
        return KILN_EFORMAT;
    return KILN_OK;
}

int kiln__iso_hello_parse(const void *body, size_t n, struct kiln__iso_hello *out)
{
    const uint8_t *p = body;
    if (n < 16)
        return KILN_EFORMAT;
    out->version = kiln__load_le32(p);
    out->flags = kiln__load_le32(p + 4);
    out->device = kiln__load_le32(p + 8);
    uint32_t dlen = kiln__load_le32(p + 12);
    if (out->version != KILN__ISO_VERSION || str_at(p, n, 16, dlen) < 0)
        return KILN_EFORMAT;
    out->cache_dir = (const char *)p + 16;
    size_t at = 16 + (size_t)dlen + 1;
    if (n - at < 8)
        return KILN_EFORMAT;
    out->known_kinds = kiln__load_le32(p + at);
    out->nnames = kiln__load_le32(p + at + 4);
    at += 8;
    if (out->nnames > KILN__ISO_MAX_NAMES)
        return KILN_EFORMAT;
    out->names = (const char *)p + at;
    for (uint32_t i = 0; i < out->nnames; i++) {
        const uint8_t *end = at < n ? memchr(p + at, '\0', n - at) : NULL;
        if (!end)
            return KILN_EFORMAT;
        at = (size_t)(end - p) + 1;
    }
    out->dict_size = n - at;
    out->dict = out->dict_size ? p + at : NULL;
    return KILN_OK;
}

/* known_kinds has one bit per state kind. */
_Static_assert(KILN_STATE_KINDS <= 32, "a state kind beyond known_kinds' bits");

bool kiln__iso_hello_wants(const struct kiln__iso_hello *h, uint32_t kind, const char *name)
{
    if (kind >= 32 || !(h->known_kinds >> kind & 1u))
        return true;
    const char *q = h->names;
    for (uint32_t i = 0; i < h->nnames; i++, q += strlen(q) + 1)
        if (strcmp(q, name) == 0)
            return true;
    return false;
}

/* A batch's fixed part, and each program's before its name. */
#define BATCH_HEAD   4u
#define PROGRAM_HEAD 32u

int kiln__iso_batch_make(const struct kiln__iso_job *jobs, uint32_t count, uint8_t **body,
                         uint32_t *size)
{
    *body = NULL;
    if (count == 0 || count > KILN__ISO_BATCH_MAX)
        return KILN_ERANGE;
    size_t n = BATCH_HEAD;
    for (uint32_t i = 0; i < count; i++) {
        size_t one = PROGRAM_HEAD + strlen(jobs[i].name) + 1 + jobs[i].size;
        if (jobs[i].size > KILN__ISO_BODY_MAX || one > KILN__ISO_BODY_MAX - n)
            return KILN_ERANGE;
        n += one;
    }
    uint8_t *p = kiln__malloc(n);
    if (!p)
        return KILN_ENOMEM;
    kiln__store_le32(p, count);
    size_t at = BATCH_HEAD;
    for (uint32_t i = 0; i < count; i++) {
        const struct kiln__iso_job *j = &jobs[i];
        size_t nlen = strlen(j->name);
        kiln__store_le64(p + at, j->key.hi);
        kiln__store_le64(p + at + 8, j->key.lo);
        kiln__store_le32(p + at + 16, j->flags);
        kiln__store_le32(p + at + 20, (uint32_t)nlen);
        kiln__store_le64(p + at + 24, (uint64_t)j->size);
        memcpy(p + at + PROGRAM_HEAD, j->name, nlen + 1);
        at += PROGRAM_HEAD + nlen + 1;
        memcpy(p + at, j->payload, j->size);
        at += j->size;
    }
    *body = p;
    *size = (uint32_t)n;
    return KILN_OK;
}

int kiln__iso_batch_parse(const void *body, size_t n, struct kiln__iso_job *out, uint32_t cap,
                          uint32_t *count)
{
    const uint8_t *p = body;
    *count = 0;
    if (n < BATCH_HEAD)
        return KILN_EFORMAT;
    uint32_t c = kiln__load_le32(p);
    if (c == 0 || c > cap)
        return KILN_EFORMAT;
    size_t at = BATCH_HEAD;
    for (uint32_t i = 0; i < c; i++) {
        if (n - at < PROGRAM_HEAD)
            return KILN_EFORMAT;
        struct kiln__iso_job *j = &out[i];
        j->key.hi = kiln__load_le64(p + at);
        j->key.lo = kiln__load_le64(p + at + 8);
        j->flags = kiln__load_le32(p + at + 16);
        uint32_t nlen = kiln__load_le32(p + at + 20);
        uint64_t size = kiln__load_le64(p + at + 24);
        if (str_at(p, n, at + PROGRAM_HEAD, nlen) < 0)
            return KILN_EFORMAT;
        j->name = (const char *)p + at + PROGRAM_HEAD;
        at += PROGRAM_HEAD + (size_t)nlen + 1;
        if (size == 0 || size > n - at)
            return KILN_EFORMAT;
        j->payload = p + at;
        j->size = (size_t)size;
        at += (size_t)size;
    }
    if (at != n)
        return KILN_EFORMAT;
    *count = c;
    return KILN_OK;
}

int kiln__iso_result_parse(const void *body, size_t n, struct kiln__iso_result *out)
{
    const uint8_t *p = body;
    const size_t head = KILN__ISO_RESULT_HEAD;
    if (n < head + 1)
        return KILN_EFORMAT;
    out->status = (int32_t)kiln__load_le32(p);
    out->outcome = kiln__load_le32(p + 4);
    out->kind = kiln__load_le32(p + 8);
    out->feedback = kiln__load_le32(p + 12);
    out->driver_ns = kiln__load_le64(p + 16);
    /* The why runs to the body's end, which is its NUL. */
    if (p[n - 1] != '\0' || memchr(p + head, '\0', n - head - 1))
        return KILN_EFORMAT;
    out->why = (const char *)p + head;
    if (out->outcome > KILN__ISO_FROM_BINARIES || out->kind >= KILN_STATE_KINDS || out->status > 0)
        return KILN_EFORMAT;
    if (out->feedback > (KILN__ISO_FEEDBACK_VALID | KILN__ISO_FEEDBACK_CACHE_HIT) ||
        out->feedback == KILN__ISO_FEEDBACK_CACHE_HIT)
        return KILN_EFORMAT;
    /* Built (from binaries too) and lone are successes; failed and bad
     * carry their error. */
    bool ok = out->outcome == KILN__ISO_BUILT || out->outcome == KILN__ISO_LONE ||
              out->outcome == KILN__ISO_FROM_BINARIES;
    bool bad = out->outcome == KILN__ISO_FAILED || out->outcome == KILN__ISO_BAD;
    if ((ok && out->status != 0) || (bad && out->status == 0))
        return KILN_EFORMAT;
    return KILN_OK;
}

int kiln__iso_binaries_make(struct kiln_key key, const struct kiln__bin_global *driver,
                            const void *payload, size_t size, uint8_t **body, uint32_t *n)
{
    *body = NULL;
    uint32_t g = driver->key_size;
    if (g == 0 || g > KILN__BIN_KEY_MAX || size == 0 ||
        size > KILN__ISO_BODY_MAX - KILN__ISO_BINARIES_HEAD - g)
        return KILN_ERANGE;
    uint8_t *p = kiln__malloc(KILN__ISO_BINARIES_HEAD + g + size);
    if (!p)
        return KILN_ENOMEM;
    kiln__store_le64(p, key.hi);
    kiln__store_le64(p + 8, key.lo);
    kiln__store_le32(p + 16, driver->vendor_id);
    kiln__store_le32(p + 20, driver->device_id);
    kiln__store_le32(p + 24, g);
    memcpy(p + KILN__ISO_BINARIES_HEAD, driver->key, g);
    memcpy(p + KILN__ISO_BINARIES_HEAD + g, payload, size);
    *body = p;
    *n = (uint32_t)(KILN__ISO_BINARIES_HEAD + g + size);
    return KILN_OK;
}

int kiln__iso_binaries_parse(const void *body, size_t n, struct kiln_key *key,
                             struct kiln__bin_global *driver, const void **payload, size_t *size)
{
    const uint8_t *p = body;
    if (n < KILN__ISO_BINARIES_HEAD)
        return KILN_EFORMAT;
    uint32_t g = kiln__load_le32(p + 24);
    if (g == 0 || g > KILN__BIN_KEY_MAX || n - KILN__ISO_BINARIES_HEAD <= g)
        return KILN_EFORMAT;
    key->hi = kiln__load_le64(p);
    key->lo = kiln__load_le64(p + 8);
    memset(driver, 0, sizeof(*driver));
    driver->vendor_id = kiln__load_le32(p + 16);
    driver->device_id = kiln__load_le32(p + 20);
    driver->key_size = g;
    memcpy(driver->key, p + KILN__ISO_BINARIES_HEAD, g);
    *payload = p + KILN__ISO_BINARIES_HEAD + g;
    *size = n - KILN__ISO_BINARIES_HEAD - g;
    return KILN_OK;
}

int kiln__iso_ready_parse(const void *body, size_t n, int32_t *status, const char **why)
{
    const uint8_t *p = body;
    if (n < 5 || p[n - 1] != '\0' || memchr(p + 4, '\0', n - 5))
        return KILN_EFORMAT;
    *status = (int32_t)kiln__load_le32(p);
    *why = (const char *)p + 4;
    return *status > 0 ? KILN_EFORMAT : KILN_OK;
}

/* ---- the parent's side ------------------------------------------------ */

int kiln__isolate_check(const struct kiln_isolate_options *iso, bool on_pipeline)
{
    if (!iso)
        return KILN_OK;
    if (!iso->argv || !iso->argv[0] || !iso->argv[0][0]) {
        KILN_ERROR("prep", "prepare: isolation needs a worker command (isolate->argv)");
        return KILN_EINVAL;
    }
    if (on_pipeline) {
        KILN_ERROR("prep", "prepare: isolation builds pipelines in other processes: no "
                           "on_pipeline callback can receive them");
        return KILN_EINVAL;
    }
    return KILN_OK;
}

/* One worker process. Held by one pool thread at a time (busy), taken
 * and given back under iso.mu (acquire, release). */
struct slot {
    struct kiln__iso_proc *proc; /* NULL: none running */
    struct iso *iso;             /* for its starter thread */
    uint64_t start_t0;           /* when its start began (kiln_now_ns), while starting */
    pthread_t starter;           /* the thread that started it, while starter_live */
    void *cache;                 /* its pipeline cache's data, at the end */
    size_t cache_size;
    int end_rc;        /* END's send, at the end of the phase */
    bool busy;         /* held by a pool thread, or by its starter */
    bool starting;     /* its starter holds it */
    bool starter_live; /* starter is to be joined */
};

/* The thread that starts the phase's workers (the design comment says
 * why one thread): one request at a time, under `mu`. */
struct spawner {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool running; /* the thread was started */
    bool quit;
    bool asked, answered;
    const char *const *argv;
    bool background;
    struct kiln__iso_proc *proc; /* the answer */
    int rc;
    /* Workers started with the run (kiln__isolate_early_begin): the thread
     * starts them first, then serves requests. NULL: none. */
    struct kiln__isolate_early *early;
};

/* A worker started with the run: greeted_at is when the spawner thread
 * sent its HELLO (0: not greeted yet), greet_rc that send's result. */
struct early_worker {
    struct kiln__iso_proc *proc;
    uint64_t greeted_at;
    int greet_rc;
};

/* Workers started at the run's start, each sent START (their Vulkan
 * context begun), greeted once the run knows the greeting, and taken by
 * the pipeline phase (take_early). Every field after `spawner` is under
 * spawner.mu. */
struct kiln__isolate_early {
    struct spawner spawner;
    const char *const *argv;
    unsigned want;     /* how many the spawner thread starts */
    unsigned limit_ms; /* the deadline of START's send */
    uint8_t *start;    /* START's body */
    uint32_t start_size;
    struct early_worker *procs; /* started and sent START, not taken yet */
    unsigned nprocs;
    unsigned started; /* all it started (the summary's word) */
    unsigned taken;   /* taken by the pipeline phase */
    bool done;        /* the thread has started them all */
    /* The greeting, once the run knows it (kiln__isolate_early_greet): the
     * thread sends it to every worker not taken yet. */
    uint8_t *hello;
    uint32_t hello_size;
    bool greet_asked; /* hello is set: the thread is to send it */
    bool greeted;     /* the thread sent it (or tried) to each of procs */
    unsigned greeted_count;
};

/* The default floor of the learned limit, and the builds it needs seen
 * (isolate_plan.c; $KILN_TEST_ISOLATE changes both in kiln-faults). */
#define LEARNED_FLOOR_MS 10000u
#define LEARNED_SAMPLES  16u

struct iso {
    struct kiln__prep_build *b;
    struct spawner own_spawner; /* without early workers */
    struct spawner *sp;         /* the one that starts this phase's workers */
    const struct kiln__isolate_run *run;
    uint64_t limit_ns;
    unsigned limit_ms; /* the fixed limit, or the learned one's cap */
    bool learn;        /* no limit given: learned under limit_ms (isolate_plan.c) */
    struct kiln__iso_tuning tune;
    struct slot *slots;
    unsigned nslots;
    /* The workers, shared by the pool's threads: mu guards every slot's
     * busy and proc fields while a slot is not held, and what follows. */
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a slot was given back, or a worker could not start */
    unsigned running;       /* slots with a worker running or being started */
    unsigned waiting;       /* pool threads waiting in acquire */
    int broken;             /* a worker could not start: no more are started */
    uint64_t start_ns;      /* the slowest start that ended so far (0: none yet) */
    unsigned starting;      /* workers being started now */
    unsigned most_starting; /* how many may be at once (1: the tuning's serial) */
    size_t unsent;          /* programs no worker has received yet */
    struct kiln__iso_times times;
    _Atomic uint64_t done;            /* programs with an outcome, for the progress */
    _Atomic uint64_t failed;          /* programs that failed (the pool counts batches) */
    _Atomic uint64_t early;           /* programs killed at the learned limit */
    struct kiln__isolate_stats stats; /* under mu */
    uint8_t *hello;                   /* the greeting's body, the same for every worker */
    uint32_t hello_size;
    struct kiln__prep_item **order; /* the programs to build, larger first */
    unsigned *cls;                  /* each one's memory class, in that order */
    bool locks;                     /* mu and cv were made */
};

/* One pool job: a batch, programs order[first, first + count). */
struct iso_job {
    struct kiln__prep_memory_job mem; /* first: the pool's memory model reads it */
    struct iso *iso;
    size_t first, count;
};

/* A worker's resident memory counts toward the pool's memory budget while
 * its pid is registered (kiln__budget_add_pid, src/pool/budget.c): from
 * its start until it has been reaped. A worker that cannot be registered
 * (the table is full) still runs, uncounted: one info line says so. */
static void budget_add(const struct kiln__iso_proc *p)
{
    long pid = kiln__iso_pid(p);
    if (pid > 0 && kiln__budget_add_pid(pid) < 0)
        KILN_INFO("prep", "worker %ld: not counted in the memory budget (too many processes)", pid);
}

static void budget_remove(long pid)
{
    if (pid > 0)
        kiln__budget_remove_pid(pid);
}

/* Ends a slot's worker (see kiln__iso_end) and unregisters it. */
static void end_worker(struct slot *s, unsigned grace_ms, char *how, size_t cap)
{
    long pid = kiln__iso_pid(s->proc);
    kiln__iso_end(s->proc, grace_ms, how, cap);
    s->proc = NULL;
    budget_remove(pid);
}

/* Sends one frame: head, then the body's parts. */
static int send_frame(struct kiln__iso_proc *p, uint32_t type, const void *body, uint32_t size,
                      uint64_t deadline)
{
    uint8_t head[KILN__ISO_HEAD_BYTES];
    kiln__iso_head_put(head, type, body, size);
    KILN_TRY(kiln__iso_send(p, head, sizeof(head), deadline));
    return size ? kiln__iso_send(p, body, size, deadline) : KILN_OK;
}

/* Receives one frame of `type` (or `also`, when not 0: *got says which),
 * checked; *body is malloc'd (free it). @return 0, KILN_EFORMAT, or the
 * channel's error. */
static int recv_frame_of(struct kiln__iso_proc *p, uint32_t type, uint32_t also, uint32_t *got,
                         void **body, uint32_t *size, uint64_t deadline)
{
    uint8_t head[KILN__ISO_HEAD_BYTES];
    struct kiln__iso_head h;
    *body = NULL;
    KILN_TRY(kiln__iso_recv(p, head, sizeof(head), deadline));
    KILN_TRY(kiln__iso_head_get(head, &h));
    if (h.type != type && (!also || h.type != also))
        return KILN_EFORMAT;
    *got = h.type;
    void *buf = kiln__malloc(h.size ? h.size : 1);
    if (!buf)
        return KILN_ENOMEM;
    int rc = kiln__iso_recv(p, buf, h.size, deadline);
    if (rc == KILN_OK)
        rc = kiln__iso_body_check(&h, buf);
    if (rc < 0) {
        kiln__free(buf);
        return rc;
    }
    *body = buf;
    *size = h.size;
    return KILN_OK;
}

static int recv_frame(struct kiln__iso_proc *p, uint32_t type, void **body, uint32_t *size,
                      uint64_t deadline)
{
    uint32_t got;
    return recv_frame_of(p, type, 0, &got, body, size, deadline);
}

/* Describes a channel error for a log line. */
static const char *what_ended(int rc)
{
    switch (rc) {
    case KILN_ECRASH:
        return "the worker process died";
    case KILN_ETIMEDOUT:
        return "the worker passed its time limit and was killed";
    case KILN_EFORMAT:
        return "the worker answered a malformed frame and was killed";
    default:
        return "the channel to the worker failed";
    }
}

/* Ends a slot's worker after a failure, logging how it ended, for the
 * program `name` it held. `learned_ms`: the learned limit it passed (0:
 * the fixed one); `after`: the programs of its batch after it, which go
 * to another worker. */
static void drop_worker(struct iso *iso, struct slot *s, const char *name, int rc,
                        unsigned learned_ms, size_t after)
{
    char how[96], rest[96] = "";
    long pid = kiln__iso_pid(s->proc);
    /* A worker that closed its end may still be exiting: give it a moment,
     * so its signal or exit code can be named. */
    end_worker(s, rc == KILN_ECRASH ? 2000u : 0u, how, sizeof(how));
    if (after)
        snprintf(rest, sizeof(rest),
                 "; the %zu program%s after it in its batch go%s to another worker", after,
                 after == 1 ? "" : "s", after == 1 ? "es" : "");
    if (rc == KILN_ETIMEDOUT && learned_ms)
        KILN_WARN("prep",
                  "%s: not built: the worker passed its learned time limit and was killed (%u ms, "
                  "%u x the p99 of similar builds, at most %u ms; worker %ld): not recorded in the "
                  "build ledger, the next run tries it again%s",
                  name, learned_ms, KILN__ISO_LIMIT_K, iso->limit_ms, pid, rest);
    else if (rc == KILN_ETIMEDOUT)
        KILN_WARN("prep", "%s: not built: %s (%u ms; worker %ld)%s", name, what_ended(rc),
                  iso->limit_ms, pid, rest);
    else if (rc == KILN_ECRASH || rc == KILN_EFORMAT)
        KILN_WARN("prep", "%s: not built: %s (worker %ld %s)%s", name, what_ended(rc), pid, how,
                  rest);
    else
        KILN_WARN("prep", "%s: not built: %s (worker %ld %s): %s%s", name, what_ended(rc), pid, how,
                  kiln_strerror(rc), rest);
}

/* The spawner thread's first work with early workers: starts each and
 * sends it START, keeping those that took it. Called under sp->mu, which
 * it drops while it spawns. */
static void start_early(struct spawner *sp)
{
    struct kiln__isolate_early *e = sp->early;
    pthread_mutex_unlock(&sp->mu);
    for (unsigned i = 0; i < e->want; i++) {
        struct kiln__iso_proc *proc = NULL;
        if (kiln__iso_spawn(e->argv, sp->background, &proc) < 0)
            break; /* the pipeline phase starts its own and says why */
        budget_add(proc);
        uint8_t head[KILN__ISO_HEAD_BYTES];
        kiln__iso_head_put(head, KILN__ISO_START, e->start, e->start_size);
        uint64_t deadline = kiln_now_ns() + (uint64_t)e->limit_ms * 1000000u;
        int rc = kiln__iso_send(proc, head, sizeof(head), deadline);
        if (rc == KILN_OK)
            rc = kiln__iso_send(proc, e->start, e->start_size, deadline);
        if (rc < 0) {
            char how[96];
            long pid = kiln__iso_pid(proc);
            kiln__iso_end(proc, 0, how, sizeof(how));
            kiln__budget_remove_pid(pid);
            continue;
        }
        pthread_mutex_lock(&sp->mu);
        e->procs[e->nprocs++] = (struct early_worker){.proc = proc};
        e->started++;
        pthread_mutex_unlock(&sp->mu);
    }
    pthread_mutex_lock(&sp->mu);
    e->done = true;
    pthread_cond_broadcast(&sp->cv);
}

/* Sends the run's greeting to every early worker not taken yet, each
 * by its own deadline (the fixed limit; a failed send is the taker's to
 * report, as a greeting it sent itself). Called under sp->mu, which it
 * drops while it sends: the workers are the thread's until `greeted`. */
static void greet_early(struct spawner *sp)
{
    struct kiln__isolate_early *e = sp->early;
    unsigned n = e->nprocs;
    pthread_mutex_unlock(&sp->mu);
    for (unsigned i = 0; i < n; i++) {
        struct early_worker *w = &e->procs[i];
        w->greeted_at = kiln_now_ns();
        w->greet_rc = send_frame(w->proc, KILN__ISO_HELLO, e->hello, e->hello_size,
                                 w->greeted_at + (uint64_t)e->limit_ms * 1000000u);
    }
    pthread_mutex_lock(&sp->mu);
    e->greeted = true;
    e->greeted_count = n;
    pthread_cond_broadcast(&sp->cv);
}

/* Whether the spawner thread has work: a request, or a greeting to send. */
static bool spawner_wanted(const struct spawner *sp)
{
    const struct kiln__isolate_early *e = sp->early;
    return sp->quit || (sp->asked && !sp->answered) || (e && e->greet_asked && !e->greeted);
}

static void *spawner_main(void *arg)
{
    struct spawner *sp = arg;
    pthread_mutex_lock(&sp->mu);
    /* Its children inherit this thread's priority (the design comment). */
    if (sp->background) {
        int brc = kiln__pool_thread_background();
        if (brc < 0)
            KILN_INFO("prep", "workers' background priority only in part: %s", kiln_strerror(brc));
    }
    if (sp->early)
        start_early(sp);
    for (;;) {
        while (!spawner_wanted(sp))
            pthread_cond_wait(&sp->cv, &sp->mu);
        if (sp->quit)
            break;
        if (sp->early && sp->early->greet_asked && !sp->early->greeted) {
            greet_early(sp);
            continue;
        }
        const char *const *argv = sp->argv;
        pthread_mutex_unlock(&sp->mu);
        struct kiln__iso_proc *proc = NULL;
        int rc = kiln__iso_spawn(argv, sp->background, &proc);
        pthread_mutex_lock(&sp->mu);
        sp->proc = proc;
        sp->rc = rc;
        sp->answered = true;
        pthread_cond_broadcast(&sp->cv);
    }
    pthread_mutex_unlock(&sp->mu);
    return NULL;
}

/* Starts the spawner thread (first starting `early`'s workers, when not
 * NULL). @return 0 or KILN_ENOMEM. */
static int spawner_begin(struct spawner *sp, bool background, struct kiln__isolate_early *early)
{
    memset(sp, 0, sizeof(*sp));
    sp->background = background;
    sp->early = early;
    if (pthread_mutex_init(&sp->mu, NULL) != 0)
        return KILN_ENOMEM;
    if (pthread_cond_init(&sp->cv, NULL) != 0) {
        pthread_mutex_destroy(&sp->mu);
        return KILN_ENOMEM;
    }
    if (pthread_create(&sp->thread, NULL, spawner_main, sp) != 0) {
        KILN_ERROR("prep", "cannot start the thread that starts the workers");
        pthread_cond_destroy(&sp->cv);
        pthread_mutex_destroy(&sp->mu);
        return KILN_ENOMEM;
    }
    sp->running = true;
    return KILN_OK;
}

/* Ends the spawner thread: only once every worker it started was reaped. */
static void spawner_end(struct spawner *sp)
{
    if (!sp->running)
        return;
    pthread_mutex_lock(&sp->mu);
    sp->quit = true;
    pthread_cond_broadcast(&sp->cv);
    pthread_mutex_unlock(&sp->mu);
    pthread_join(sp->thread, NULL);
    pthread_cond_destroy(&sp->cv);
    pthread_mutex_destroy(&sp->mu);
    sp->running = false;
}

/* kiln__iso_spawn on the spawner thread; the calling pool thread waits. */
static int spawn_worker(struct spawner *sp, const char *const *argv, struct kiln__iso_proc **out)
{
    pthread_mutex_lock(&sp->mu);
    while (sp->asked) /* another pool thread's request in hand */
        pthread_cond_wait(&sp->cv, &sp->mu);
    sp->argv = argv;
    sp->asked = true;
    sp->answered = false;
    pthread_cond_broadcast(&sp->cv);
    while (!sp->answered)
        pthread_cond_wait(&sp->cv, &sp->mu);
    *out = sp->proc;
    int rc = sp->rc;
    sp->proc = NULL;
    sp->asked = false;
    sp->answered = false;
    pthread_cond_broadcast(&sp->cv);
    pthread_mutex_unlock(&sp->mu);
    return rc;
}

/* Waits until the spawner thread started every early worker and, when
 * the greeting was asked for, sent it. Under e->spawner.mu. */
static void early_settled(struct kiln__isolate_early *e)
{
    while (!e->done || (e->greet_asked && !e->greeted))
        pthread_cond_wait(&e->spawner.cv, &e->spawner.mu);
}

/* A worker started with the run (greeted or not), once the spawner
 * thread is done with them; proc NULL when none is left (or there were
 * none). */
static struct early_worker take_early(struct kiln__isolate_early *e)
{
    struct early_worker w = {.proc = NULL};
    if (!e)
        return w;
    pthread_mutex_lock(&e->spawner.mu);
    early_settled(e);
    if (e->nprocs)
        w = e->procs[--e->nprocs];
    e->taken += w.proc != NULL;
    pthread_mutex_unlock(&e->spawner.mu);
    return w;
}

/* The least a worker's start (its process, its Vulkan device, its READY)
 * is given, whatever the time limit: that limit is for a pipeline's build,
 * and a device made slowly (a loaded machine, a sanitizer build: 4.3 to
 * 5.9 s under TSan beside another test run) is not a hang. */
#define ISO_START_FLOOR_NS (10ull * 1000000000u)

/* Starts a slot's worker (or takes one started with the run, whose
 * Vulkan context is begun, greeted already when the run greeted them) and
 * waits for its greeting's answer, on the slot's starter thread. The
 * start's time, from the greeting to its READY (for an early worker
 * greeted before the phase, from that greeting: its device's making), is
 * kept (iso.start_ns: the slowest) for the rule that sizes the workers.
 * @return 0, or the error (the slot left without a worker). */
static int start_worker(struct iso *iso, struct slot *s)
{
    uint64_t t0 = kiln_now_ns();
    struct early_worker ew = take_early(iso->run->early);
    s->proc = ew.proc;
    if (!s->proc) {
        int rc = spawn_worker(iso->sp, iso->run->iso->argv, &s->proc);
        if (rc < 0) {
            KILN_ERROR("prep", "cannot start the worker %s: %s", iso->run->iso->argv[0],
                       kiln_strerror(rc));
            return rc;
        }
        budget_add(s->proc);
    }
    long pid = kiln__iso_pid(s->proc);
    uint64_t deadline =
        t0 + (iso->limit_ns > ISO_START_FLOOR_NS ? iso->limit_ns : ISO_START_FLOOR_NS);
    uint64_t greeted = ew.greeted_at ? ew.greeted_at : t0;
    int rc = ew.greeted_at
                 ? ew.greet_rc
                 : send_frame(s->proc, KILN__ISO_HELLO, iso->hello, iso->hello_size, deadline);
    void *body = NULL;
    uint32_t size = 0;
    if (rc == KILN_OK)
        rc = recv_frame(s->proc, KILN__ISO_READY, &body, &size, deadline);
    int32_t status = 0;
    const char *why = "";
    if (rc == KILN_OK)
        rc = kiln__iso_ready_parse(body, size, &status, &why);
    char how[96];
    if (rc == KILN_OK && status < 0) {
        KILN_ERROR("prep", "worker %ld could not make its Vulkan context: %s (%s)", pid, why,
                   kiln_strerror(status));
        end_worker(s, 2000u, how, sizeof(how));
        kiln__free(body);
        return status;
    }
    kiln__free(body);
    if (rc < 0) {
        /* A worker that closed its end may still be exiting: a moment, so
         * its signal or exit code can be named. */
        end_worker(s, rc == KILN_ECRASH ? 2000u : 0u, how, sizeof(how));
        KILN_ERROR("prep", "worker %ld did not answer its greeting: %s (%s): %s", pid,
                   what_ended(rc), how, kiln_strerror(rc));
        return rc;
    }
    uint64_t now = kiln_now_ns(), took = now - greeted;
    KILN_INFO("prep", "worker %ld ready %.1f ms after its greeting; the phase waited %.1f ms", pid,
              (double)took / 1e6, (double)(now - t0) / 1e6);
    pthread_mutex_lock(&iso->mu);
    iso->start_ns = took > iso->start_ns ? took : iso->start_ns;
    iso->stats.workers_started++;
    pthread_mutex_unlock(&iso->mu);
    return KILN_OK;
}

/* A starter thread: starts its slot's worker, then gives the slot to the
 * pool (idle, or empty when the start failed: then no more are started). */
static void *starter_main(void *arg)
{
    struct slot *s = arg;
    struct iso *iso = s->iso;
    int rc = start_worker(iso, s);
    pthread_mutex_lock(&iso->mu);
    s->starting = false;
    s->busy = false;
    iso->starting--;
    if (rc < 0) {
        iso->running--;
        iso->broken = rc;
    }
    pthread_cond_broadcast(&iso->cv); /* a worker is ready, or the rule may say more */
    pthread_mutex_unlock(&iso->mu);
    return NULL;
}

/* The mean build the sizing rule assumes, in ns: the tuning's, else this
 * run's once a build was timed, else the ledger's hint, else the default. */
static uint64_t mean_build_ns(const struct iso *iso)
{
    if (iso->tune.build_ms)
        return (uint64_t)iso->tune.build_ms * 1000000u;
    uint64_t n = atomic_load_explicit(&iso->times.count, memory_order_relaxed);
    if (n)
        return atomic_load_explicit(&iso->times.sum_ns, memory_order_relaxed) / n;
    return iso->run->build_hint_ns ? iso->run->build_hint_ns : KILN__ISO_DEFAULT_BUILD_NS;
}

/* The start cost the sizing rule assumes, in ns: the slowest start that
 * ended (before any, what the parent's own context took, plus the
 * tuning's start delay; without that figure, the default), or the longest
 * one under way when longer. Under iso.mu. */
static uint64_t start_cost_ns(const struct iso *iso)
{
    uint64_t guess = iso->run->start_hint_ns
                         ? iso->run->start_hint_ns + (uint64_t)iso->tune.start_delay_ms * 1000000u
                         : KILN__ISO_DEFAULT_START_NS;
    uint64_t cost = iso->start_ns ? iso->start_ns : guess;
    uint64_t now = kiln_now_ns();
    for (unsigned w = 0; w < iso->nslots; w++) {
        const struct slot *s = &iso->slots[w];
        if (s->starting && now - s->start_t0 > cost)
            cost = now - s->start_t0;
    }
    return cost;
}

/* Starts `s`'s worker on a starter thread of its own (on this thread when
 * none can be made). Under iso.mu, which it may drop and take again. */
static void launch_start(struct iso *iso, struct slot *s)
{
    if (s->starter_live) { /* its last start ended: the thread is leaving */
        pthread_join(s->starter, NULL);
        s->starter_live = false;
    }
    s->busy = true;
    s->starting = true;
    s->iso = iso;
    s->start_t0 = kiln_now_ns();
    iso->running++;
    iso->starting++;
    if (pthread_create(&s->starter, NULL, starter_main, s) == 0) {
        s->starter_live = true;
        return;
    }
    pthread_mutex_unlock(&iso->mu);
    starter_main(s);
    pthread_mutex_lock(&iso->mu);
}

/* Joins every starter thread, after the pool joined (the design comment). */
static void join_starters(struct iso *iso)
{
    for (unsigned w = 0; w < iso->nslots; w++) {
        struct slot *s = &iso->slots[w];
        if (s->starter_live)
            pthread_join(s->starter, NULL);
        s->starter_live = false;
    }
}

/* Takes a worker: an idle one, whichever was ready first; else has more
 * started, on their own threads, while kiln__iso_worth_starting says so
 * (and fewer than most_starting are under way), and waits for one to be
 * ready or given back. A worker that cannot start stops all later starts
 * (no loop of restarts): the batch then waits for a running worker, or
 * fails with that error when none runs. @return the slot, or NULL with
 * *rc set. */
static struct slot *acquire(struct iso *iso, int *rc)
{
    pthread_mutex_lock(&iso->mu);
    for (;;) {
        struct slot *idle = NULL, *empty = NULL;
        for (unsigned w = 0; w < iso->nslots && !idle; w++) {
            struct slot *s = &iso->slots[w];
            if (!s->busy && s->proc)
                idle = s;
            else if (!s->busy && !empty)
                empty = s;
        }
        if (idle) {
            idle->busy = true;
            pthread_mutex_unlock(&iso->mu);
            *rc = KILN_OK;
            return idle;
        }
        if (!iso->broken && empty && iso->starting < iso->most_starting &&
            kiln__iso_worth_starting(iso->unsent, iso->running, mean_build_ns(iso),
                                     start_cost_ns(iso))) {
            launch_start(iso, empty);
            continue; /* the rule may want more */
        }
        if (iso->running == 0) {
            *rc = iso->broken ? iso->broken : KILN_ECRASH;
            pthread_mutex_unlock(&iso->mu);
            return NULL;
        }
        iso->waiting++;
        pthread_cond_wait(&iso->cv, &iso->mu);
        iso->waiting--;
    }
}

/* Lets the threads waiting in acquire ask the rule again: a build was
 * timed. */
static void wake_waiters(struct iso *iso)
{
    pthread_mutex_lock(&iso->mu);
    if (iso->waiting)
        pthread_cond_broadcast(&iso->cv);
    pthread_mutex_unlock(&iso->mu);
}

/* Gives a slot back (its worker idle, or gone after a failure). */
static void release(struct iso *iso, struct slot *s)
{
    pthread_mutex_lock(&iso->mu);
    s->busy = false;
    if (!s->proc)
        iso->running--;
    pthread_cond_broadcast(&iso->cv);
    pthread_mutex_unlock(&iso->mu);
}

/* Counts a worker's answer as the in-process phase would (start.c). */
static int count_result(struct iso *iso, struct kiln__prep_item *it, const char *name,
                        const struct kiln__iso_result *r)
{
    struct kiln__prep_build *b = iso->b;
    it->status = r->status;
    switch (r->outcome) {
    case KILN__ISO_FROM_BINARIES: /* a build like any other, made from binaries */
    case KILN__ISO_BUILT:
        it->from_binaries = r->outcome == KILN__ISO_FROM_BINARIES;
        if (it->from_binaries)
            atomic_fetch_add_explicit(&b->from_binaries, 1, memory_order_relaxed);
        else /* the driver's word, as for a build in this process */
            kiln__prep_note_feedback(b, it, r->feedback & KILN__ISO_FEEDBACK_VALID,
                                     r->feedback & KILN__ISO_FEEDBACK_CACHE_HIT, r->driver_ns);
        atomic_fetch_add_explicit(&b->built[r->kind], 1, memory_order_relaxed);
        return KILN_OK;
    case KILN__ISO_SKIPPED:
        atomic_fetch_add_explicit(&b->skipped[r->kind], 1, memory_order_relaxed);
        if (atomic_exchange(&b->skip_claimed[r->kind], 1u) == 0)
            snprintf(b->skip_reason[r->kind], sizeof(b->skip_reason[r->kind]), "%s", r->why);
        KILN_INFO("prep", "%s: skipped: %s", name, r->why);
        return KILN_OK;
    case KILN__ISO_LONE:
        atomic_fetch_add_explicit(&b->lone, 1, memory_order_relaxed);
        return KILN_OK;
    case KILN__ISO_BAD:
        atomic_fetch_add_explicit(&b->bad, 1, memory_order_relaxed);
        return r->status ? r->status : KILN_EFORMAT; /* the worker logged why */
    default:
        atomic_fetch_add_explicit(&b->failed[r->kind], 1, memory_order_relaxed);
        return r->status ? r->status : KILN_EVULKAN; /* the worker logged why */
    }
}

/* The state kind of a payload, for counting a program whose worker died. */
static uint32_t payload_kind(const struct kiln__prep_item *it)
{
    struct kiln_stage_blob st[KILN_PROGRAM_MAX_STAGES];
    struct kiln_payload_state state;
    int n =
        kiln_program_payload_parse_full(it->payload, it->size, KILN_PROGRAM_MAX_STAGES, st, &state);
    return n >= 0 && state.kind < KILN_STATE_KINDS ? state.kind : KILN_STATE_BUILTIN;
}

/* Fails a program the worker did not answer for (rc: how the worker
 * ended), or that no worker received (`unreached`: kiln's failure, not
 * the driver's word on it, so not recorded in the ledger and tried again
 * by the next run). */
static void fail_program(struct iso *iso, struct kiln__prep_item *it, int rc, bool unreached)
{
    it->unreached = unreached;
    if (unreached)
        atomic_fetch_add_explicit(&iso->b->unreached, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&iso->b->failed[payload_kind(it)], 1, memory_order_relaxed);
    it->status = rc;
    atomic_fetch_add_explicit(&iso->failed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&iso->done, 1, memory_order_relaxed);
}

/* The learned limit of the program at order[i] in ms, or 0: the fixed one
 * (none learned yet, or not below it, or a limit was given). */
static unsigned learned_limit(struct iso *iso, size_t i)
{
    if (!iso->learn)
        return 0;
    uint64_t seen = 0;
    unsigned ms = kiln__iso_times_limit(
        &iso->times, iso->cls[i], iso->tune.samples ? iso->tune.samples : LEARNED_SAMPLES,
        iso->tune.floor_ms ? iso->tune.floor_ms : LEARNED_FLOOR_MS, iso->limit_ms, &seen);
    return ms < iso->limit_ms ? ms : 0;
}

/* Sends order[first, first + count) to s's worker as one JOB frame. */
static int send_batch(struct iso *iso, struct slot *s, size_t first, size_t count)
{
    struct kiln__iso_job jobs[KILN__ISO_BATCH_MAX];
    char hex[KILN__ISO_BATCH_MAX][48];
    for (size_t k = 0; k < count; k++) {
        const struct kiln__prep_item *it = iso->order[first + k];
        /* The worker gets the source's own name, for the test faults' hook. */
        snprintf(hex[k], sizeof(hex[k]), "program %016" PRIx64 "%016" PRIx64, it->key.hi,
                 it->key.lo);
        jobs[k] = (struct kiln__iso_job){.key = it->key,
                                         .flags = it->validated ? KILN__ISO_JOB_VALIDATED : 0u,
                                         .name = it->name ? it->name : hex[k],
                                         .payload = it->payload,
                                         .size = it->size};
    }
    uint8_t *body = NULL;
    uint32_t size = 0;
    int rc = kiln__iso_batch_make(jobs, (uint32_t)count, &body, &size);
    if (rc == KILN_OK)
        rc = send_frame(s->proc, KILN__ISO_JOB, body, size, kiln_now_ns() + iso->limit_ns);
    kiln__free(body);
    return rc;
}

/* A worker's BINARIES frame for `it`, the program it builds: kept in the
 * run's tier (a failure to keep is logged there: only the binaries are
 * lost; a tier that keeps none drops them). @return 0, or KILN_EFORMAT for
 * binaries of another program (the worker is then ended as for any
 * malformed frame). */
static int take_binaries(struct iso *iso, const struct kiln__prep_item *it, const void *body,
                         uint32_t size)
{
    struct kiln_key key;
    struct kiln__bin_global driver;
    const void *payload;
    size_t n;
    KILN_TRY(kiln__iso_binaries_parse(body, size, &key, &driver, &payload, &n));
    if (key.hi != it->key.hi || key.lo != it->key.lo)
        return KILN_EFORMAT;
    if (!kiln__bin_tier_capturing(iso->b->bins))
        return KILN_OK;
    int rc = kiln__bin_tier_put_payload(iso->b->bins, key, &driver, payload, n);
    if (rc < 0)
        KILN_INFO("prep",
                  "program %016" PRIx64 "%016" PRIx64 ": a worker's driver binaries "
                  "not kept: %s",
                  key.hi, key.lo, kiln_strerror(rc));
    return KILN_OK;
}

/* The RESULT for `it`, after the BINARIES its worker captured for it, if
 * any (kept by take_binaries). */
static int recv_result(struct iso *iso, struct slot *s, const struct kiln__prep_item *it,
                       void **body, uint32_t *size, uint64_t deadline)
{
    uint32_t got = KILN__ISO_BINARIES;
    int rc =
        recv_frame_of(s->proc, KILN__ISO_RESULT, KILN__ISO_BINARIES, &got, body, size, deadline);
    if (rc == KILN_OK && got == KILN__ISO_BINARIES) {
        rc = take_binaries(iso, it, *body, *size);
        kiln__free(*body);
        *body = NULL;
        if (rc == KILN_OK)
            rc = recv_frame(s->proc, KILN__ISO_RESULT, body, size, deadline);
    }
    return rc;
}

/* Reads the answers for order[*at, end) from s's worker, in order, each by
 * its own deadline (from the previous answer: the worker starts the next
 * program as it sends one). @return 0 when all were answered; else the
 * error that ended the worker, charged to the first unanswered program
 * alone (*at is past it): the rest were not started. */
static int collect(struct iso *iso, struct slot *s, size_t *at, size_t end)
{
    uint64_t begun = kiln_now_ns();
    while (*at < end) {
        size_t i = (*at)++;
        struct kiln__prep_item *it = iso->order[i];
        unsigned learned = learned_limit(iso, i);
        uint64_t deadline = begun + (uint64_t)(learned ? learned : iso->limit_ms) * 1000000u;
        void *body = NULL;
        uint32_t size = 0;
        int rc = recv_result(iso, s, it, &body, &size, deadline);
        struct kiln__iso_result r;
        if (rc == KILN_OK)
            rc = kiln__iso_result_parse(body, size, &r);
        char label[KILN__PREP_LABEL_MAX];
        const char *name = kiln__prep_item_label(it, label, sizeof(label));
        if (rc == KILN_OK) {
            uint64_t now = kiln_now_ns();
            /* What the driver compiled teaches the limit; a refusal or a
             * skip took no compile. */
            if (r.outcome == KILN__ISO_BUILT || r.outcome == KILN__ISO_FAILED)
                kiln__iso_times_note(&iso->times, iso->cls[i], now - begun);
            begun = now;
            wake_waiters(iso); /* the rule may start another worker now */
            if (count_result(iso, it, name, &r) < 0)
                atomic_fetch_add_explicit(&iso->failed, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&iso->done, 1, memory_order_relaxed);
            kiln__free(body);
            continue;
        }
        kiln__free(body);
        bool early = rc == KILN_ETIMEDOUT && learned;
        drop_worker(iso, s, name, rc, early ? learned : 0, end - *at);
        /* Killed at the learned limit: kiln's guess, not the driver's word. */
        it->early_timeout = early;
        fail_program(iso, it, rc, false);
        if (early)
            atomic_fetch_add_explicit(&iso->early, 1, memory_order_relaxed);
        return rc;
    }
    return KILN_OK;
}

/* One pool job: a batch, through whichever worker is free. A worker that
 * dies or hangs fails the program it was building; the batch's programs
 * after it go to another worker, as a batch of their own. */
static int iso_build_batch(void *arg, unsigned worker)
{
    (void)worker;
    const struct iso_job *j = arg;
    struct iso *iso = j->iso;
    size_t at = j->first, end = j->first + j->count;
    while (at < end) {
        /* Cancelled (kiln_prepare_options.cancel): not handed out, as
         * in-process. */
        if (kiln__prep_stopping(iso->b->cancel, iso->b->cancel_user, &iso->b->started)) {
            atomic_store(&iso->b->stopped, true);
            for (; at < end; at++)
                iso->order[at]->status = KILN_ECANCELED;
            break;
        }
        char label[KILN__PREP_LABEL_MAX];
        const char *name = kiln__prep_item_label(iso->order[at], label, sizeof(label));
        int rc;
        struct slot *s = acquire(iso, &rc);
        if (s) {
            rc = send_batch(iso, s, at, end - at);
            if (rc < 0) {
                drop_worker(iso, s, name, rc, 0, 0);
                release(iso, s);
            }
        }
        if (rc < 0) {
            for (; at < end; at++)
                fail_program(iso, iso->order[at], rc, true);
            break;
        }
        pthread_mutex_lock(&iso->mu);
        iso->unsent -= end - at;
        iso->stats.batches++;
        pthread_mutex_unlock(&iso->mu);
        rc = collect(iso, s, &at, end);
        release(iso, s);
        if (rc < 0 && at < end) {
            pthread_mutex_lock(&iso->mu);
            iso->unsent += end - at;
            iso->stats.resent += end - at;
            pthread_mutex_unlock(&iso->mu);
        }
    }
    return KILN_OK;
}

/* How long the workers get, together, to exit once their cache data is
 * in: past it they are killed (the design comment). */
#define QUIT_GRACE_MS 50u

/* Ends every worker at the end of the phase, keeping its cache data: END
 * to all of them first, so that they send at once, then each one's answer;
 * then each is ended by one shared deadline, QUIT_GRACE_MS after the last
 * answer, killed when still tearing down. */
static void finish_workers(struct iso *iso)
{
    uint64_t deadline = kiln_now_ns() + iso->limit_ns;
    for (unsigned w = 0; w < iso->nslots; w++) {
        struct slot *s = &iso->slots[w];
        if (s->proc)
            s->end_rc = send_frame(s->proc, KILN__ISO_END, NULL, 0, deadline);
    }
    for (unsigned w = 0; w < iso->nslots; w++) {
        struct slot *s = &iso->slots[w];
        if (!s->proc)
            continue;
        void *body = NULL;
        uint32_t size = 0;
        int rc = s->end_rc;
        if (rc == KILN_OK)
            rc = recv_frame(s->proc, KILN__ISO_CACHE, &body, &size, deadline);
        if (rc < 0) {
            char how[96];
            long pid = kiln__iso_pid(s->proc);
            end_worker(s, 0u, how, sizeof(how));
            KILN_WARN("prep", "worker %ld: its pipeline cache was not received (%s): %s", pid, how,
                      kiln_strerror(rc));
            kiln__free(body);
            continue;
        }
        s->cache = body;
        s->cache_size = size;
    }
    uint64_t quit = kiln_now_ns() + (uint64_t)QUIT_GRACE_MS * 1000000u;
    for (unsigned w = 0; w < iso->nslots; w++) {
        struct slot *s = &iso->slots[w];
        uint64_t now = kiln_now_ns();
        if (s->proc)
            end_worker(s, now < quit ? (unsigned)((quit - now + 999999u) / 1000000u) : 0u, NULL, 0);
    }
}

/* The fixed part of VkPipelineCacheHeaderVersionOne. */
#define CACHE_HEADER_BYTES (16u + VK_UUID_SIZE)

/* Merges every worker's pipeline cache into the parent's. */
static void merge_caches(struct iso *iso)
{
    struct kiln_vk_handles h = KILN_VK_HANDLES_INIT;
    kiln_vk_get_handles(iso->b->vk, &h);
    if (h.pipeline_cache == VK_NULL_HANDLE)
        return;
    PFN_vkGetDeviceProcAddr gdpa =
        (PFN_vkGetDeviceProcAddr)h.get_instance_proc_addr(h.instance, "vkGetDeviceProcAddr");
    PFN_vkCreatePipelineCache create =
        gdpa ? (PFN_vkCreatePipelineCache)gdpa(h.device, "vkCreatePipelineCache") : NULL;
    PFN_vkMergePipelineCaches merge =
        gdpa ? (PFN_vkMergePipelineCaches)gdpa(h.device, "vkMergePipelineCaches") : NULL;
    PFN_vkDestroyPipelineCache destroy =
        gdpa ? (PFN_vkDestroyPipelineCache)gdpa(h.device, "vkDestroyPipelineCache") : NULL;
    if (!create || !merge || !destroy)
        return;
    const struct kiln_vk_info *vi = kiln_vk_get_info(iso->b->vk);
    unsigned merged = 0;
    size_t bytes = 0;
    for (unsigned w = 0; w < iso->nslots; w++) {
        const uint8_t *d = iso->slots[w].cache;
        size_t n = iso->slots[w].cache_size;
        if (!d || n < CACHE_HEADER_BYTES)
            continue;
        /* Only data this device and driver wrote reaches the driver. */
        uint32_t hsize = kiln__load_le32(d);
        if (hsize < CACHE_HEADER_BYTES || hsize > n ||
            kiln__load_le32(d + 4) != VK_PIPELINE_CACHE_HEADER_VERSION_ONE ||
            kiln__load_le32(d + 8) != vi->vendor_id || kiln__load_le32(d + 12) != vi->device_id ||
            memcmp(d + 16, vi->pipeline_cache_uuid, VK_UUID_SIZE) != 0) {
            KILN_WARN("prep", "a worker's pipeline cache is not this device's: not merged");
            continue;
        }
        VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                        .initialDataSize = n,
                                        .pInitialData = d};
        VkPipelineCache src = VK_NULL_HANDLE;
        if (create(h.device, &ci, NULL, &src) != VK_SUCCESS)
            continue;
        if (merge(h.device, h.pipeline_cache, 1, &src) == VK_SUCCESS) {
            merged++;
            bytes += n;
        }
        destroy(h.device, src, NULL);
    }
    KILN_INFO("prep", "merged %u worker pipeline caches (%zu bytes)", merged, bytes);
}

int kiln__iso_hello_make(uint32_t flags, uint32_t device, const char *cache_dir,
                         uint32_t known_kinds, const char *const *names, uint32_t nnames,
                         const void *dict, size_t dict_size, uint8_t **body, uint32_t *size)
{
    *body = NULL;
    const char *dir = cache_dir ? cache_dir : "";
    size_t dlen = strlen(dir), names_len = 0;
    if (!dict)
        dict_size = 0;
    if (nnames > KILN__ISO_MAX_NAMES)
        return KILN_ERANGE;
    for (uint32_t i = 0; i < nnames; i++)
        names_len += strlen(names[i]) + 1;
    if (dlen > KILN__ISO_BODY_MAX || names_len > KILN__ISO_BODY_MAX ||
        dict_size > KILN__ISO_BODY_MAX)
        return KILN_ERANGE;
    size_t n = 16 + dlen + 1 + 8 + names_len + dict_size;
    if (n > KILN__ISO_BODY_MAX)
        return KILN_ERANGE;
    uint8_t *p = kiln__malloc(n);
    if (!p)
        return KILN_ENOMEM;
    kiln__store_le32(p, KILN__ISO_VERSION);
    kiln__store_le32(p + 4, flags);
    kiln__store_le32(p + 8, device);
    kiln__store_le32(p + 12, (uint32_t)dlen);
    memcpy(p + 16, dir, dlen + 1);
    size_t at = 16 + dlen + 1;
    kiln__store_le32(p + at, known_kinds);
    kiln__store_le32(p + at + 4, nnames);
    at += 8;
    for (uint32_t i = 0; i < nnames; i++) {
        size_t len = strlen(names[i]) + 1;
        memcpy(p + at, names[i], len);
        at += len;
    }
    if (dict_size)
        memcpy(p + at, dict, dict_size);
    *body = p;
    *size = (uint32_t)n;
    return KILN_OK;
}

/* The greeting, the same for every worker, whether the run sends it to
 * its early workers or the phase to one it started: the extensions are
 * the names this process's builders found the programs need, for the
 * kinds it has a builder of (the workers' builders are their own,
 * kiln_isolate_worker_options). */
static int make_hello(const struct kiln__isolate_run *run, const struct kiln_pack_dict *d,
                      uint8_t **body, uint32_t *size)
{
    size_t dict_size = 0;
    const void *dict = d ? kiln_pack_dict_bytes(d, &dict_size) : NULL;
    bool bins = run->binaries && run->cache_dir;
    uint32_t flags = (run->use_device_index ? KILN__ISO_HELLO_DEVICE : 0u) |
                     (bins ? KILN__ISO_HELLO_BINARIES : 0u) |
                     (bins && run->keep_binaries ? KILN__ISO_HELLO_KEEP_BINARIES : 0u);
    return kiln__iso_hello_make(flags, run->device, run->cache_dir, run->ext_known_kinds,
                                run->ext_names, run->next_names, dict, dict_size, body, size);
}

/* Larger payloads first, as in-process (start.c). */
static int larger_first(const void *x, const void *y)
{
    size_t a = (*(struct kiln__prep_item *const *)x)->size;
    size_t b = (*(struct kiln__prep_item *const *)y)->size;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* The phase's state, for `todo` programs of `items` on `workers` pool
 * threads: the programs larger first with their classes, the slots, the
 * lock, the greeting. @return 0 or KILN_ENOMEM. */
static int iso_begin(struct iso *iso, struct kiln__prep_item *items, size_t n, size_t todo,
                     unsigned workers)
{
    iso->nslots = workers;
    iso->unsent = todo;
    iso->most_starting = iso->tune.serial ? 1u : workers;
    iso->slots = kiln__calloc(workers, sizeof(struct slot));
    iso->order = kiln__calloc(todo, sizeof(*iso->order));
    iso->cls = kiln__calloc(todo, sizeof(*iso->cls));
    if (!iso->slots || !iso->order || !iso->cls)
        return KILN_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].payload)
            iso->order[k++] = &items[i];
    qsort(iso->order, todo, sizeof(*iso->order), larger_first);
    for (size_t i = 0; i < todo; i++) {
        uint64_t spirv = 0;
        iso->cls[i] = kiln__prep_memory_class(iso->order[i]->payload, iso->order[i]->size, &spirv);
    }
    if (pthread_mutex_init(&iso->mu, NULL) != 0)
        return KILN_ENOMEM;
    if (pthread_cond_init(&iso->cv, NULL) != 0) {
        pthread_mutex_destroy(&iso->mu);
        return KILN_ENOMEM;
    }
    iso->locks = true;
    return make_hello(iso->run, iso->b->dict, &iso->hello, &iso->hello_size);
}

static void iso_end(struct iso *iso)
{
    for (unsigned w = 0; iso->slots && w < iso->nslots; w++)
        kiln__free(iso->slots[w].cache);
    if (iso->locks) {
        pthread_cond_destroy(&iso->cv);
        pthread_mutex_destroy(&iso->mu);
    }
    kiln__free(iso->slots);
    kiln__free(iso->order);
    kiln__free(iso->cls);
    kiln__free(iso->hello);
    kiln__free(iso);
}

/* The pool's jobs: the batches (kiln__iso_batches) of iso's order, each
 * weighed by the pool's memory model as its first, largest program.
 * @return the count, or 0 with no memory (*jobs NULL). */
static size_t make_batches(struct iso *iso, size_t todo, bool memory, struct iso_job **jobs)
{
    size_t *sizes = kiln__calloc(todo, sizeof(*sizes));
    size_t *first = kiln__calloc(todo, sizeof(*first));
    *jobs = kiln__calloc(todo, sizeof(**jobs));
    size_t nb = 0;
    if (sizes && first && *jobs) {
        for (size_t i = 0; i < todo; i++)
            sizes[i] = iso->order[i]->size;
        nb = kiln__iso_batches(sizes, todo, iso->nslots, iso->tune.batch, first);
    }
    for (size_t k = 0; k < nb; k++) {
        struct iso_job *j = &(*jobs)[k];
        size_t end = k + 1 < nb ? first[k + 1] : todo;
        *j = (struct iso_job){.iso = iso, .first = first[k], .count = end - first[k]};
        if (memory) {
            const struct kiln__prep_item *it = iso->order[first[k]];
            j->mem.item = it;
            j->mem.cls = kiln__prep_memory_class(it->payload, it->size, &j->mem.spirv_bytes);
        }
    }
    kiln__free(sizes);
    kiln__free(first);
    if (!nb) {
        kiln__free(*jobs);
        *jobs = NULL;
    }
    return nb;
}

/* Every driver compiles on the CPU: a worker past the usable CPUs adds a
 * process and a device, not throughput (threads cost nothing idle; a
 * worker does). So the workers a preparation's jobs give are at most the
 * CPUs (kiln_pool_policy's count: affinity and quota); an explicit
 * isolate->workers is kept. */
static unsigned at_most_cpus(unsigned workers)
{
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    struct kiln_pool_limits none = KILN_POOL_LIMITS_INIT;
    struct kiln_pool_plan plan = KILN_POOL_PLAN_INIT;
    if (kiln_pool_probe(NULL, NULL, &m) < 0 || kiln_pool_policy(&m, &none, &plan) < 0 ||
        plan.cpus == 0)
        return workers;
    return workers < plan.cpus ? workers : plan.cpus;
}

/* How many workers a run of `programs` on `workers` threads starts
 * before it knows its work: the sizing rule's count with nothing timed
 * (kiln__iso_worth_starting, the defaults or the tuning's build), none
 * with the tuning's serial starts (their test waits for each start). */
static unsigned early_count(const struct kiln__isolate_early_want *w,
                            const struct kiln__iso_tuning *tune)
{
    unsigned workers = w->workers;
    if (w->iso->workers || tune->workers)
        workers = tune->workers ? tune->workers : w->iso->workers;
    else
        workers = at_most_cpus(workers);
    if (tune->serial || w->programs == 0)
        return 0;
    uint64_t build =
        tune->build_ms ? (uint64_t)tune->build_ms * 1000000u : KILN__ISO_DEFAULT_BUILD_NS;
    unsigned r = 0;
    while (r < workers && r < w->programs &&
           kiln__iso_worth_starting(w->programs, r, build, KILN__ISO_DEFAULT_START_NS))
        r++;
    return r;
}

int kiln__isolate_early_begin(const struct kiln__isolate_early_want *w,
                              struct kiln__isolate_early **out)
{
    *out = NULL;
    struct kiln__iso_tuning tune;
    kiln__prep_isolate_tuning(&tune);
    unsigned want = early_count(w, &tune);
    if (!want)
        return KILN_OK;
    struct kiln__isolate_early *e = kiln__calloc(1, sizeof(*e));
    if (!e)
        return KILN_ENOMEM;
    e->argv = w->iso->argv;
    e->want = want;
    e->limit_ms =
        w->iso->time_limit_ms ? w->iso->time_limit_ms : KILN_ISOLATE_DEFAULT_TIME_LIMIT_MS;
    e->procs = kiln__calloc(want, sizeof(*e->procs));
    int rc = e->procs ? kiln__iso_hello_make(w->use_device_index ? KILN__ISO_HELLO_DEVICE : 0u,
                                             w->device, w->cache_dir, 0, NULL, 0, NULL, 0,
                                             &e->start, &e->start_size)
                      : KILN_ENOMEM;
    if (rc == KILN_OK)
        rc = spawner_begin(&e->spawner, w->background, e);
    if (rc < 0) {
        kiln__free(e->start);
        kiln__free(e->procs);
        kiln__free(e);
        return rc;
    }
    KILN_INFO("prep", "starting %u worker processes with the run (%s)", want, e->argv[0]);
    *out = e;
    return KILN_OK;
}

int kiln__isolate_early_greet(struct kiln__isolate_early *e, const struct kiln__isolate_run *run,
                              const struct kiln_pack_dict *dict)
{
    if (!e)
        return KILN_OK;
    struct kiln__iso_tuning tune;
    kiln__prep_isolate_tuning(&tune);
    if (tune.late_greeting)
        return KILN_OK; /* the test's negative control: the phase greets them */
    uint8_t *body = NULL;
    uint32_t size = 0;
    int rc = make_hello(run, dict, &body, &size);
    if (rc < 0) {
        KILN_INFO("prep", "isolated workers are greeted by the pipeline phase: %s",
                  kiln_strerror(rc));
        return rc;
    }
    pthread_mutex_lock(&e->spawner.mu);
    if (e->greet_asked) { /* once per run */
        pthread_mutex_unlock(&e->spawner.mu);
        kiln__free(body);
        return KILN_OK;
    }
    e->hello = body;
    e->hello_size = size;
    e->greet_asked = true;
    pthread_cond_broadcast(&e->spawner.cv);
    pthread_mutex_unlock(&e->spawner.mu);
    return KILN_OK;
}

unsigned kiln__isolate_early_started(const struct kiln__isolate_early *e)
{
    return e ? e->started : 0;
}

void kiln__isolate_early_end(struct kiln__isolate_early *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->spawner.mu);
    early_settled(e);
    unsigned left = e->nprocs;
    e->nprocs = 0;
    pthread_mutex_unlock(&e->spawner.mu);
    /* Not taken: nothing is wanted from them (greeted or not, their
     * device is not waited for); ended at once, before the thread that
     * started them ends. */
    for (unsigned i = 0; i < left; i++) {
        char how[96];
        long pid = kiln__iso_pid(e->procs[i].proc);
        kiln__iso_end(e->procs[i].proc, 0, how, sizeof(how));
        budget_remove(pid);
    }
    spawner_end(&e->spawner);
    kiln__free(e->hello);
    kiln__free(e->start);
    kiln__free(e->procs);
    kiln__free(e);
}

int64_t kiln__isolate_build_all(struct kiln__prep_build *b, const struct kiln__isolate_run *run,
                                struct kiln__prep_item *items, size_t n, unsigned workers,
                                uint64_t *failed, struct kiln__isolate_stats *stats)
{
    *failed = 0;
    *stats = (struct kiln__isolate_stats){0};
    struct kiln__iso_tuning tune;
    kiln__prep_isolate_tuning(&tune);
    if (run->iso->workers || tune.workers)
        workers = tune.workers ? tune.workers : run->iso->workers;
    else
        workers = at_most_cpus(workers);
    size_t todo = 0;
    for (size_t i = 0; i < n; i++)
        todo += items[i].payload != NULL;
    if (b->progress)
        b->progress(b->progress_user, KILN_PREP_PHASE_PIPELINES, 0, todo);
    if (todo == 0)
        return 0;
    if (workers > todo)
        workers = (unsigned)todo; /* no process that would get no program */

    struct iso *iso = kiln__calloc(1, sizeof(*iso));
    if (!iso)
        return KILN_ENOMEM;
    iso->b = b;
    iso->run = run;
    iso->learn = run->iso->time_limit_ms == 0;
    iso->limit_ms =
        run->iso->time_limit_ms ? run->iso->time_limit_ms : KILN_ISOLATE_DEFAULT_TIME_LIMIT_MS;
    iso->limit_ns = (uint64_t)iso->limit_ms * 1000000u;
    iso->tune = tune;
    struct iso_job *jobs = NULL;
    size_t nb = 0;
    int rc = iso_begin(iso, items, n, todo, workers);
    if (rc == KILN_OK) {
        nb = make_batches(iso, todo, b->memory != NULL, &jobs);
        rc = nb ? KILN_OK : KILN_ENOMEM;
    }
    iso->sp = run->early ? &run->early->spawner : &iso->own_spawner;
    if (rc == KILN_OK && !run->early)
        rc = spawner_begin(&iso->own_spawner, b->background, NULL);
    struct kiln_pool *pool = NULL;
    struct kiln_pool_memory_model mm;
    if (rc == KILN_OK)
        rc = kiln__prep_pool(workers, b->memory_budget, b->background, b->executor,
                             kiln__prep_memory_model(b->memory, &mm), &pool);
    if (rc < 0) {
        spawner_end(&iso->own_spawner);
        kiln__free(jobs);
        iso_end(iso);
        return rc;
    }
    KILN_INFO("prep",
              "building %zu programs in %zu batches by at most %u worker processes (%s); %u ms "
              "per pipeline at most%s",
              todo, nb, workers, run->iso->argv[0], iso->limit_ms,
              iso->learn ? ", less once learned" : "");
    struct kiln__prep_jobs pj = {.fn = iso_build_batch,
                                 .jobs = jobs,
                                 .stride = sizeof(*jobs),
                                 .count = nb,
                                 .total = todo,
                                 .done = &iso->done};
    rc = kiln__prep_run_pipelines(pool, &pj, b->progress, b->progress_user);
    kiln_pool_destroy(pool);

    /* The pool has joined, and once the starters are, the slots are this
     * thread's. */
    join_starters(iso);
    finish_workers(iso);
    /* Every worker was reaped: the thread that started them may end (the
     * early workers' one ends in kiln__isolate_early_end, after the
     * workers this phase did not take). */
    spawner_end(&iso->own_spawner);
    merge_caches(iso);
    *stats = iso->stats;
    stats->early_taken = run->early ? run->early->taken : 0;
    stats->early_timeouts = atomic_load(&iso->early);
    uint64_t seen = 0;
    if (iso->learn)
        stats->learned_limit_ms = kiln__iso_times_limit(
            &iso->times, KILN__MEMORY_CLASSES,
            iso->tune.samples ? iso->tune.samples : LEARNED_SAMPLES,
            iso->tune.floor_ms ? iso->tune.floor_ms : LEARNED_FLOOR_MS, iso->limit_ms, &seen);
    KILN_INFO("prep",
              "%" PRIu64 " worker processes started for %zu programs, %" PRIu64 " batches (%" PRIu64
              " programs sent again after a worker died); learned limit %u "
              "ms from %" PRIu64 " builds",
              stats->workers_started, todo, stats->batches, stats->resent, stats->learned_limit_ms,
              seen);
    *failed = atomic_load(&iso->failed);
    iso_end(iso);
    kiln__free(jobs);
    if (rc < 0)
        return rc;
    return kiln__prep_pipelines_done(b);
}
