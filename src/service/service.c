/*
 * service.c - the pipeline service (kiln/service.h): requests from render
 * threads, answered by builds on a pool.
 *
 * Invariants and why they hold:
 *
 * - One lock. Every entry (one build of one key), its queue place, its
 *   tickets and the counters are changed under svc->lock only; a build
 *   itself, a program's copy, its key, a store and every callback run
 *   outside it, so no caller waits behind a build for the lock, and a
 *   callback may call the service again.
 *
 * - Urgent first, in two lanes. Queued entries wait in FIFO lists,
 *   urgent and background (with fast-link's optimized builds). The
 *   workers are two pools: the urgent lane (by default a quarter as many
 *   workers as the background lane, one at least; one when the caller
 *   sizes the service; at the caller's priority) and the background lane
 *   (the rest, at idle priority: a background build never takes a CPU an
 *   urgent build, the frame thread or the game wants; the OS cannot raise
 *   a thread back from idle without privilege, hence two pools, not one
 *   that changes priority). The pools hold no request: each pool job is a
 *   "token" of a lane that takes what its lane takes (queue_pop) when a
 *   worker runs it, and keeps taking until nothing is left for it. The
 *   urgent lane takes urgent entries; work ahead of the draw too while one
 *   of its workers stays free, when it has two or more (ahead_pick: a
 *   burst of links asked ahead does not wait for the background lane's
 *   long builds to end); and other background work only when
 *   background_workers is every worker. The background lane takes
 *   background work, and urgent entries while more wait than the urgent
 *   lane has tokens about to take them (a burst at a level load spreads
 *   over every worker). So no urgent
 *   entry waits behind a queued background one. A lane's tokens are at
 *   most its workers (lane.tokens counts those queued or running; a
 *   request adds one only below that), so a submit never blocks on a
 *   pool's queue; a token that finds nothing leaves under the lock, and
 *   every queued entry has a token of a lane that takes it: a queued
 *   urgent entry one of the urgent lane (added at its request, or a token
 *   that is building and will look again), background work one of the
 *   background lane, except while the hold below keeps it: then the
 *   token that ends the last urgent work (or the cancel that drops it)
 *   adds the lanes' tokens back (background_wake).
 *
 * - Less contention while urgent work waits. The OS priority of the
 *   background lane does not keep its builds off the driver's shared
 *   locks, memory bandwidth and caches: on the H200 urgent waits doubled
 *   with 16 background builds beside them. So while an urgent entry is
 *   queued or running (nurgent + urgent_running), no lane takes NEW
 *   background work (background, optimized, parts-only) once hold_max
 *   such builds run (max(1, workers / 4); 0 with
 *   KILN_SERVICE_NO_URGENT_HOLD): a token finds it held and leaves
 *   (st.background_holds). Builds already running finish; none is
 *   stopped. Urgent entries are never held.
 *
 * - Work ahead keeps a worker. Work asked ahead of its draw (parts only,
 *   link ahead, whole ahead: `ahead`, Q_PARTS) has a deadline; background
 *   and optimized builds have none and may take seconds each. Once any
 *   request asked for work ahead, those builds take at most all but one
 *   of the workers that take background work (plain_running,
 *   ahead_reserved), so work ahead never waits for a prefetch build to
 *   end. A service never asked for work ahead (a warm start through it)
 *   keeps every worker for its builds. Wake-safe: a token leaves for the
 *   reserve only while the other workers build without a deadline, and
 *   each of those looks again when its build ends.
 *
 * - Links ahead (KILN_REQUEST_LINK_AHEAD): a background entry built as an
 *   urgent one is (a fast link, then hand_over's optimized build), queued
 *   with the work ahead; the draw's urgent request then joins a linked
 *   entry and is answered at once.
 *
 * - One build per key. Unless KILN_SERVICE_NO_MERGE, every entry is in
 *   the table by its key from its request until the service ends: a
 *   request of a key in flight joins its entry (an urgent one moves a
 *   queued background entry to the urgent tail), and a key built or
 *   failed before is answered at once. An entry leaves the table only
 *   when it never ran: dropped (no ticket left) or evicted; or when it is
 *   a parts-only one (below) that ended or that a full request took over
 *   while it ran.
 *
 * - A ticket is freed once, by the last of its two holders: the caller
 *   (until kiln_ticket_release) and its entry (until it is answered,
 *   cancelled or evicted). Its state is an atomic written last, after its
 *   answer's fields, so kiln_ticket_poll reads it without the lock, also
 *   after the service is gone: destroy answers every pending ticket.
 *
 * - Pipelines are the service's: each entry keeps what its build made and
 *   kiln_service_destroy destroys it after the last build returned.
 *
 * - Ask before compiling, on the workers only. Where the device has the
 *   probe, a build first asks the session with KILN_BUILD_PROBE and
 *   compiles only on KILN_ECOMPILE_REQUIRED; the requesting thread never
 *   probes (docs/runtime.md says why). The driver's feedback of every
 *   build is summed under the lock with the other counters.
 *
 * - The ledger: the session notes each build (kiln_build_session_options.
 *   ledger_dir, only with a cache that takes puts: the process holds its
 *   writer lock), and kiln_service_destroy saves it after the last build
 *   returned (kiln_build_session_save).
 *
 * - Fast-link (KILN_SERVICE_FAST_LINK, docs/runtime.md). An urgent entry's
 *   build asks for a linked pipeline; a linked answer leaves its tickets
 *   attached (E_LINKED), and after the program is stored hand_over queues
 *   the optimized build in the optimize queue (outside the capacity, taken
 *   FIFO with the background queue), whose end answers them again. Each
 *   answer is a write-once slot of the ticket published by `pub`, so a
 *   poll without the lock never reads half a hand-over; a ticket is on one
 *   notify list at a time (`notifying`), a later answer is handed out by
 *   the same notifier after the earlier callback (`deferred`), so the
 *   callbacks of one ticket run in order. Entries that ran are on
 *   svc->done once (`listed`), whatever they go through after.
 *
 * - Parts ahead (KILN_REQUEST_PARTS_ONLY, only with fast-link). A
 *   parts-only entry is background work whose build asks for the library
 *   parts alone (KILN_BUILD_LINK_PARTS): no pipeline, no store, never on
 *   svc->done; when it ends it leaves the table and its worker frees it.
 *   It waits in a queue of its own (Q_PARTS), counted by the capacity,
 *   that background work takes before the background and optimize FIFO:
 *   parts asked ahead have a deadline (the draw), the rest has none; an
 *   urgent request evicts a queued background entry before a parts one.
 *   The two kinds of one key never wait on each other wrongly: a
 *   parts-only request meeting a full entry is answered at once (the
 *   full build makes the parts or needs none); a full request meeting a
 *   queued parts-only entry takes it over (parts-only tickets answered,
 *   the entry re-queued at the full request's priority, urgent first);
 *   one meeting a running parts-only entry takes it out of the table and
 *   gets its own entry, whose link waits in the parts table for the parts
 *   in flight (vk_library.c builds each part once), never for the rest.
 */
#include "kiln_internal.h"

#include "kiln/pool.h"
#include "kiln/service.h"

#include <assert.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { Q_BACKGROUND = 0, Q_URGENT = 1, Q_OPTIMIZE = 2, Q_PARTS = 3 };
/* E_LINKED: answered with a linked pipeline, its optimized build not
 * queued yet (its worker is storing the program). */
enum entry_state { E_QUEUED, E_RUNNING, E_LINKED, E_DONE };

#define WAIT_SAMPLES 1024u

struct entry {
    struct kiln_key key;
    enum kiln_priority prio;
    enum entry_state state;
    struct entry *qprev, *qnext; /* the queue list while E_QUEUED */
    struct entry *hnext;         /* the table's chain */
    struct entry *dnext;         /* the list of entries that ran */
    bool in_table;
    struct kiln_ticket *tickets;  /* attached, waiting for the answer */
    struct kiln_program *program; /* the copy (NULL: by key); freed after the build */
    int error;
    struct kiln_vk_pipeline *pipe;
    /* Fast-link: the linked pipeline (kept until destroy), whether the
     * queued or running build is the optimized one, the entry's place on
     * svc->done, and its queue order among background and optimize. */
    struct kiln_vk_pipeline *linked_pipe;
    bool optimizing;
    bool listed;
    uint64_t seq;
    /* Parts ahead (KILN_REQUEST_PARTS_ONLY): the build makes the library
     * parts alone; the entry leaves the table when it ends and its worker
     * frees it (no pipeline to keep). `ahead`: a parts-only entry whose
     * program has no parts, queued again for its whole build (whole_ahead),
     * which waits with parts-only work while it is background. */
    bool parts_only;
    bool ahead;
    /* KILN_REQUEST_LINK_AHEAD: built as an urgent entry is (a fast link,
     * then its optimized build) while still background: it waits with
     * parts-ahead work (`ahead` is set too). */
    bool link_ahead;
};

/* One answer of a ticket: written once, under the lock, before it is
 * published (kiln_ticket.pub). */
struct answer {
    int state;
    int error;
    uint64_t pipeline;
    struct kiln_vk_pipeline *vk_pipeline;
    uint64_t wait_ns;
    bool linked;
};

struct kiln_ticket {
    struct kiln_service *svc;
    atomic_int refs;
    /* The answers published: 0 (pending), 1 (ans[0]: the answer, or the
     * linked one), 2 (ans[1]: the optimized one after a linked one). Each
     * slot is written before `pub` moves past it and never again. */
    atomic_int pub;
    struct answer ans[2];
    struct kiln_key key;
    bool merged;
    uint64_t t0;
    enum kiln_priority prio;
    kiln_ticket_fn fn;
    void *user;
    bool owned;      /* the caller holds it (kiln_service_request's out) */
    bool parts_only; /* KILN_REQUEST_PARTS_ONLY: answered READY with no pipeline */
    bool link_ahead; /* KILN_REQUEST_LINK_AHEAD */
    struct entry *entry;
    atomic_bool attached;            /* entry is set (written under the lock) */
    struct kiln_ticket *prev, *next; /* the entry's list */
    struct kiln_ticket *notify;      /* a list of answers to hand out */
    /* Under the lock: the ticket is on a notify list (its callback runs
     * for answer slot `notify_slot`), and a later answer came meanwhile,
     * for the same notifier to hand out next (callbacks stay in order). */
    bool notifying, deferred;
    int notify_slot;
};

struct queue {
    struct entry *head, *tail;
};

enum { LANE_URGENT = 0, LANE_BACKGROUND = 1 };

/* A pool and the tokens on it (counts under the service's lock). */
struct lane {
    struct kiln_service *svc;
    struct kiln_pool *pool; /* NULL: a lane of no worker */
    unsigned workers;
    unsigned first_worker; /* its workers' indices start here (kiln_build_run.worker) */
    unsigned tokens;       /* queued or running */
    unsigned running;      /* building */
};

struct kiln_service {
    pthread_mutex_t lock;
    pthread_cond_t answered; /* broadcast whenever a ticket is answered */
    struct kiln_vk *vk;
    struct kiln_cache *cache;
    struct kiln_build_session *session;
    struct lane lanes[2]; /* LANE_URGENT, LANE_BACKGROUND (see the top) */
    size_t capacity;
    size_t nqueued; /* urgent and background: what capacity bounds */
    size_t nurgent; /* urgent queued */
    size_t nopt;    /* optimized builds queued (one per fast-linked key) */
    uint64_t seq;
    struct queue q[4];
    struct entry **table;
    size_t nbuckets, nentries;
    struct entry *done;
    struct kiln_service_stats st;
    uint64_t waits[WAIT_SAMPLES];
    uint64_t nwaits;
    unsigned workers; /* of both lanes */
    uint32_t flags;
    unsigned running;
    /* The most workers background and optimized builds take at once
     * (kiln_service_options.background_workers, at most `workers`): the
     * background lane's, and the urgent lane's too when it is `workers`. */
    unsigned background_max;
    bool urgent_takes_background;
    /* The urgent lane has workers to spare for work ahead of the draw
     * (two at least, and it does not take all background work anyway):
     * it takes that work while one of them stays free (ahead_pick). */
    bool urgent_takes_ahead;
    /* Less contention while urgent work waits (see the top): builds
     * running that were taken as urgent and as background work (parts,
     * optimized builds too), and the most background builds in flight
     * while urgent work exists (0: no hold, KILN_SERVICE_NO_URGENT_HOLD). */
    unsigned urgent_running, background_running, hold_max;
    /* Work ahead of the draw keeps a worker (see the top): background
     * builds running without a deadline (background, optimized), and
     * whether any request asked for work ahead (parts or link ahead). */
    unsigned plain_running;
    bool ahead_asked;
    bool store; /* a cache that takes puts (not opened read-only) */
    bool closing;
    bool fast_link; /* KILN_SERVICE_FAST_LINK on a context with pipeline libraries */
    bool probe;     /* workers probe before compiling (see the top) */
    /* Per state kind: its builder takes modules recorded from a working
     * application as they are (KILN_BUILDER_RECORDED_SPIRV), so a program
     * of the kind is sealed as kiln_prepare seals it. */
    bool recorded[KILN_STATE_KINDS];
};

/* ---- the table and the queues (under the lock) --------------------------- */

static size_t bucket(const struct kiln_service *svc, struct kiln_key key)
{
    return (size_t)(key.lo ^ key.hi >> 7) & (svc->nbuckets - 1);
}

static struct entry *table_find(const struct kiln_service *svc, struct kiln_key key)
{
    for (struct entry *e = svc->table[bucket(svc, key)]; e; e = e->hnext)
        if (kiln_key_equal(e->key, key))
            return e;
    return NULL;
}

/* Doubles the buckets when the entries outnumber them; a failed grow
 * keeps the table as it is (longer chains). */
static void table_add(struct kiln_service *svc, struct entry *e)
{
    if (svc->nentries >= svc->nbuckets) {
        size_t nb = svc->nbuckets * 2;
        struct entry **t = kiln__calloc(nb, sizeof(*t));
        if (t) {
            struct entry **old = svc->table;
            size_t oldn = svc->nbuckets;
            svc->table = t;
            svc->nbuckets = nb;
            for (size_t i = 0; i < oldn; i++) {
                for (struct entry *x = old[i], *next; x; x = next) {
                    next = x->hnext;
                    size_t b = bucket(svc, x->key);
                    x->hnext = t[b];
                    t[b] = x;
                }
            }
            kiln__free(old);
        }
    }
    size_t b = bucket(svc, e->key);
    e->hnext = svc->table[b];
    svc->table[b] = e;
    e->in_table = true;
    svc->nentries++;
}

static void table_remove(struct kiln_service *svc, struct entry *e)
{
    if (!e->in_table)
        return;
    for (struct entry **p = &svc->table[bucket(svc, e->key)]; *p; p = &(*p)->hnext) {
        if (*p == e) {
            *p = e->hnext;
            break;
        }
    }
    e->in_table = false;
    svc->nentries--;
}

static struct queue *queue_of(struct kiln_service *svc, const struct entry *e)
{
    if (e->optimizing)
        return &svc->q[Q_OPTIMIZE];
    if (e->parts_only || (e->ahead && e->prio != KILN_PRIORITY_URGENT))
        return &svc->q[Q_PARTS];
    return &svc->q[e->prio == KILN_PRIORITY_URGENT ? Q_URGENT : Q_BACKGROUND];
}

static void queue_push(struct kiln_service *svc, struct entry *e)
{
    struct queue *q = queue_of(svc, e);
    e->seq = svc->seq++;
    e->qnext = NULL;
    e->qprev = q->tail;
    if (q->tail)
        q->tail->qnext = e;
    else
        q->head = e;
    q->tail = e;
    if (e->optimizing)
        svc->nopt++;
    else
        svc->nqueued++;
    svc->nurgent += q == &svc->q[Q_URGENT];
}

static void queue_remove(struct kiln_service *svc, struct entry *e)
{
    struct queue *q = queue_of(svc, e);
    if (e->qprev)
        e->qprev->qnext = e->qnext;
    else
        q->head = e->qnext;
    if (e->qnext)
        e->qnext->qprev = e->qprev;
    else
        q->tail = e->qprev;
    e->qprev = e->qnext = NULL;
    if (e->optimizing)
        svc->nopt--;
    else
        svc->nqueued--;
    svc->nurgent -= q == &svc->q[Q_URGENT];
}

/* The parts-only head (parts ahead have a deadline: the draw), else the
 * older of the background and optimize heads (both background priority,
 * one FIFO), or NULL. */
static struct entry *background_head(struct kiln_service *svc)
{
    if (svc->q[Q_PARTS].head)
        return svc->q[Q_PARTS].head;
    struct entry *b = svc->q[Q_BACKGROUND].head, *o = svc->q[Q_OPTIMIZE].head;
    return b && (!o || b->seq < o->seq) ? b : o;
}

/* Whether background work waits now: urgent work is queued or running,
 * and hold_max background builds are in flight already. */
static bool background_held(const struct kiln_service *svc)
{
    return svc->hold_max && svc->nurgent + svc->urgent_running > 0 &&
           svc->background_running >= svc->hold_max;
}

/* Whether the last background worker is kept for work ahead of the draw
 * (parts, links and whole pipelines asked ahead; under the lock): once
 * any was asked, background work without a deadline takes at most all
 * but one of the workers that take background work (two at least), so
 * work asked ahead never waits behind long prefetch builds. A token that
 * finds it so leaves; the builds without a deadline that hold the other
 * workers look again when they end. */
static bool ahead_reserved(const struct kiln_service *svc)
{
    return svc->ahead_asked && svc->background_max >= 2 &&
           svc->plain_running + 1 >= svc->background_max;
}

/* The background work lane `l` may take now (under the lock), or NULL: a
 * hold is counted once per token that leaves because of it. */
static struct entry *background_pick(struct kiln_service *svc)
{
    struct entry *b = background_head(svc);
    if (b && background_held(svc)) {
        svc->st.background_holds++;
        return NULL;
    }
    if (b && b != svc->q[Q_PARTS].head && ahead_reserved(svc))
        return NULL;
    return b;
}

/* The work ahead the urgent lane `l` may take now (under the lock), or
 * NULL: the head of the work ahead, where the lane keeps workers for it
 * (urgent_takes_ahead) and one of its workers stays free for an urgent
 * request after this one takes it. Never held: work ahead has a deadline. */
static struct entry *ahead_pick(struct kiln_service *svc, const struct lane *l)
{
    if (!svc->urgent_takes_ahead || l->running + 1 >= l->workers)
        return NULL;
    return svc->q[Q_PARTS].head;
}

/* The next entry lane `l` builds, taken off its queue, or NULL. The urgent
 * lane: the urgent head, else work ahead while one of its workers stays
 * free (ahead_pick), and other background work only where it may take it.
 * The background lane: background work, and the urgent head only while
 * more urgent entries wait than the urgent lane has tokens about to take
 * them (a burst: every worker helps; one request: it is left to the urgent
 * lane, at the normal priority). Background work only where no hold
 * (background_held). */
static struct entry *queue_pop(struct kiln_service *svc, const struct lane *l)
{
    struct entry *u = svc->q[Q_URGENT].head, *e;
    if (l == &svc->lanes[LANE_URGENT]) {
        e = u ? u : svc->urgent_takes_background ? background_pick(svc) : ahead_pick(svc, l);
    } else {
        const struct lane *ul = &svc->lanes[LANE_URGENT];
        e = u && svc->nurgent > ul->tokens - ul->running ? u : background_pick(svc);
    }
    if (e)
        queue_remove(svc, e);
    return e;
}

/* Every queued entry, for destroy: the urgent list's head, else the
 * background work. */
static struct entry *queue_pop_any(struct kiln_service *svc)
{
    struct entry *e = svc->q[Q_URGENT].head;
    if (!e)
        e = background_head(svc);
    if (e)
        queue_remove(svc, e);
    return e;
}

/* Whether lane `l` takes the work of queue `q` (Q_*): the background
 * lane all of it; the urgent lane urgent work, work ahead of the draw
 * where it keeps workers for that (urgent_takes_ahead), and the rest only
 * where it takes background work too. */
static bool lane_takes(const struct kiln_service *svc, int lane, int q)
{
    if (lane == LANE_BACKGROUND || q == Q_URGENT || svc->urgent_takes_background)
        return true;
    return q == Q_PARTS && svc->urgent_takes_ahead;
}

/* The tokens to add (under the lock) after `e` was queued: on each lane
 * that takes its queue's work (lane_takes), below the lane's workers.
 * Counts want[lane]; submit_tokens adds them outside the lock. */
static void tokens_wanted(struct kiln_service *svc, const struct entry *e, unsigned want[2])
{
    int q = (int)(queue_of(svc, e) - svc->q);
    for (int i = 0; i < 2; i++) {
        struct lane *l = &svc->lanes[i];
        if (l->pool && lane_takes(svc, i, q) && l->tokens < l->workers) {
            l->tokens++;
            want[i]++;
        }
    }
}

static int token_run(void *arg, unsigned worker);

/* After urgent work ended or left the queue (under the lock): where no
 * urgent work is left and background work waits, each lane that takes it
 * gets tokens up to its workers (the tokens that left held are gone; one
 * too many finds nothing and leaves). */
static void background_wake(struct kiln_service *svc, unsigned want[2])
{
    if (!svc->hold_max || svc->nurgent + svc->urgent_running > 0 || !background_head(svc))
        return;
    for (int i = 0; i < 2; i++) {
        struct lane *l = &svc->lanes[i];
        bool takes = lane_takes(svc, i, svc->q[Q_PARTS].head ? Q_PARTS : Q_BACKGROUND);
        for (; l->pool && takes && l->tokens < l->workers; l->tokens++)
            want[i]++;
    }
}

/* Submits the tokens tokens_wanted counted (outside the lock). The pools'
 * queues hold a token per worker, so a submit never blocks. */
static void submit_tokens(struct kiln_service *svc, const unsigned want[2])
{
    for (int i = 0; i < 2; i++) {
        struct lane *l = &svc->lanes[i];
        for (unsigned k = 0; k < want[i]; k++) {
            if (kiln_pool_submit(l->pool, token_run, l) < 0) {
                pthread_mutex_lock(&svc->lock);
                l->tokens--; /* the pool is cancelled: only destroy does that */
                pthread_mutex_unlock(&svc->lock);
            }
        }
    }
}

/* ---- tickets ---------------------------------------------------------------- */

static void ticket_unref(struct kiln_ticket *t)
{
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
        kiln__free(t);
}

static void ticket_attach(struct entry *e, struct kiln_ticket *t)
{
    t->entry = e;
    atomic_store_explicit(&t->attached, true, memory_order_relaxed);
    t->prev = NULL;
    t->next = e->tickets;
    if (e->tickets)
        e->tickets->prev = t;
    e->tickets = t;
}

static void ticket_detach(struct kiln_ticket *t)
{
    struct entry *e = t->entry;
    if (t->prev)
        t->prev->next = t->next;
    else
        e->tickets = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->entry = NULL;
    atomic_store_explicit(&t->attached, false, memory_order_release);
    t->prev = t->next = NULL;
}

/* The state a ticket's published answer says (PENDING before any). */
static int ticket_state(const struct kiln_ticket *t)
{
    int pub = atomic_load_explicit(&t->pub, memory_order_acquire);
    return pub ? t->ans[pub - 1].state : KILN_TICKET_PENDING;
}

/* Answers a ticket (under the lock): the next slot, then `pub`. The
 * urgent wait of the first READY answer of a ticket that waited for a
 * build is sampled for the stats (one answered at once from the table
 * waited for nothing). A ticket answered twice is one answered linked. */
static void ticket_answer(struct kiln_service *svc, struct kiln_ticket *t, int state, int error,
                          struct kiln_vk_pipeline *pipe, bool linked)
{
    int pub = atomic_load_explicit(&t->pub, memory_order_relaxed);
    assert(pub < 2);
    struct answer *a = &t->ans[pub];
    a->state = state;
    a->error = error;
    /* A parts-only ticket never holds a pipeline, also when it waited for
     * a whole one (whole_ahead). */
    bool ready = state == KILN_TICKET_READY;
    a->vk_pipeline = ready && !t->parts_only ? pipe : NULL;
    a->pipeline = a->vk_pipeline ? kiln_vk_pipeline_handle(pipe) : 0;
    a->linked = linked && ready && !t->parts_only;
    a->wait_ns = kiln_now_ns() - t->t0;
    if (pub == 0 && state == KILN_TICKET_READY && t->prio == KILN_PRIORITY_URGENT && t->entry)
        svc->waits[svc->nwaits++ % WAIT_SAMPLES] = a->wait_ns;
    if (state == KILN_TICKET_CANCELED)
        svc->st.canceled++;
    if (a->linked)
        svc->st.fast_linked++;
    atomic_store_explicit(&t->pub, pub + 1, memory_order_release);
}

/* The answer in slot `pub` (0: pending) as the caller reads it. */
static void ticket_info(const struct kiln_ticket *t, int pub, struct kiln_ticket_info *out)
{
    const struct answer *a = pub ? &t->ans[pub - 1] : NULL;
    int state = a ? a->state : KILN_TICKET_PENDING;
    *out = (struct kiln_ticket_info){.size = sizeof(*out), .state = (enum kiln_ticket_state)state};
    if (!a)
        return;
    out->error = a->error;
    out->pipeline = a->pipeline;
    out->vk_pipeline = a->vk_pipeline;
    out->key = t->key;
    out->merged = t->merged;
    out->wait_ns = a->wait_ns;
    out->linked = a->linked;
}

/* Puts a just-answered ticket on *notify (under the lock), the reference
 * it holds going with it; when its notifier is still calling back for an
 * earlier answer, that notifier hands this one out next instead. */
static void push_notify(struct kiln_ticket *t, struct kiln_ticket **notify)
{
    if (t->notifying) {
        t->deferred = true;
        return;
    }
    t->notifying = true;
    t->notify_slot = atomic_load_explicit(&t->pub, memory_order_relaxed);
    t->notify = *notify;
    *notify = t;
}

/* Answers every ticket of `e` (under the lock), detaching each onto the
 * list *notify for notify_all. A ticket already answered linked and now
 * cancelled (eviction never reaches one; destroy does) keeps its linked
 * answer: detached, no callback. */
static void answer_entry(struct kiln_service *svc, struct entry *e, int state, int error,
                         struct kiln_ticket **notify)
{
    while (e->tickets) {
        struct kiln_ticket *t = e->tickets;
        bool keep =
            state != KILN_TICKET_READY && atomic_load_explicit(&t->pub, memory_order_relaxed);
        if (!keep)
            ticket_answer(svc, t, state, error, e->pipe, false); /* attached: it waited */
        ticket_detach(t);
        if (keep)
            ticket_unref(t); /* the entry's hold; the caller's keeps it */
        else
            push_notify(t, notify);
    }
}

/* Answers every ticket of `e` with its linked pipeline (under the lock);
 * each stays attached for the optimized answer, and goes on *notify
 * with a reference of its own. */
static void answer_linked(struct kiln_service *svc, struct entry *e, struct kiln_ticket **notify)
{
    for (struct kiln_ticket *t = e->tickets; t; t = t->next) {
        if (t->parts_only || atomic_load_explicit(&t->pub, memory_order_relaxed))
            continue; /* joined after the link: answered then; parts-only: at the end */
        ticket_answer(svc, t, KILN_TICKET_READY, 0, e->linked_pipe, true);
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
        push_notify(t, notify);
    }
}

/* Outside the lock: each answered ticket's callback (and a deferred later
 * answer's, in order), then the list's hold on it goes. */
static void notify_all(struct kiln_service *svc, struct kiln_ticket *list)
{
    while (list) {
        struct kiln_ticket *t = list;
        list = t->notify;
        int slot = t->notify_slot;
        for (;;) {
            if (t->fn) {
                struct kiln_ticket_info info;
                ticket_info(t, slot, &info);
                t->fn(t->user, t->owned ? t : NULL, &info);
            }
            pthread_mutex_lock(&svc->lock);
            bool again = t->deferred;
            t->deferred = false;
            t->notifying = again;
            slot = atomic_load_explicit(&t->pub, memory_order_relaxed);
            pthread_mutex_unlock(&svc->lock);
            if (!again)
                break;
            ticket_unref(t); /* the deferred answer's hold */
        }
        ticket_unref(t);
    }
}

static void entry_free(struct entry *e)
{
    kiln_program_destroy(e->program);
    kiln__free(e);
}

/* ---- the build (outside the lock) ------------------------------------------- */

/* Counts a build's probe and the driver's feedback (under the lock). */
static void count_driver_word(struct kiln_service *svc, const struct kiln_build_run *r, int rc)
{
    bool probed = (r->flags & KILN_BUILD_PROBE) != 0;
    pthread_mutex_lock(&svc->lock);
    svc->st.probed += probed;
    svc->st.probe_hits += probed && rc == KILN_OK && !r->probe_missed;
    svc->st.from_binaries += rc == KILN_OK && r->from_binaries;
    svc->st.binaries_kept += rc == KILN_OK && r->binaries_kept;
    if (rc == KILN_OK && r->feedback_valid) {
        svc->st.feedback_pipelines++;
        svc->st.driver_cache_hits += r->driver_cache_hit;
        svc->st.driver_ns += r->driver_ns;
    }
    pthread_mutex_unlock(&svc->lock);
}

/* What one build of an entry made (entry_build, outside the lock). */
struct built {
    struct kiln_vk_pipeline *pipe;
    bool store;  /* the cache lacked the program: store it */
    bool linked; /* pipe is a fast-linked one */
    bool from_cache;
    uint32_t parts_built, parts_reused;
};

/*
 * One payload through the build session: with `link`, the fast-link ask
 * (a link is no compile, so it is not probed); else a probe first where
 * the device has it (the driver answers at once), a compile only when the
 * driver says one is needed, in the same run (KILN_BUILD_COMPILE_ON_MISS:
 * the stages are staged once). @return the build's result.
 */
static int run_payload(struct kiln_service *svc, struct entry *e, const void *payload, size_t size,
                       unsigned worker, uint32_t link, struct built *b)
{
    struct kiln_build_run run = KILN_BUILD_RUN_INIT;
    run.key = e->key;
    run.payload = payload;
    run.payload_size = size;
    run.worker = worker;
    run.link = link;
    run.flags = svc->probe && !link ? KILN_BUILD_PROBE | KILN_BUILD_COMPILE_ON_MISS : 0;
    int rc = kiln_build_session_run_with(svc->session, &run);
    count_driver_word(svc, &run, rc);
    b->pipe = run.pipeline;
    b->linked = run.linked;
    b->parts_built = run.parts_built;
    b->parts_reused = run.parts_reused;
    return rc;
}

/*
 * Builds e's pipeline: the cache's record of its key when it has one, else
 * the program sealed here; `link` asks for a fast link (KILN_BUILD_LINK_*).
 * @return the build's result, with what it made in *b.
 */
static int entry_build(struct kiln_service *svc, struct entry *e, unsigned worker, uint32_t link,
                       struct built *b)
{
    *b = (struct built){.pipe = NULL};
    struct kiln_cache_result r = {.data = NULL};
    int rc = svc->cache ? kiln_cache_get(svc->cache, e->key, &r) : KILN_ENOTFOUND;
    if (rc == KILN_OK) {
        rc = run_payload(svc, e, r.data ? r.data : "", r.size, worker, link, b);
        kiln_cache_payload_free(r.data);
        b->from_cache = true;
        return rc;
    }
    if (!e->program)
        return rc; /* by key, and the cache has no whole record of it */
    uint32_t kind = e->program->state_kind;
    struct kiln_program_seal_options so = {
        .size = sizeof(so),
        .dict = svc->cache ? kiln_cache_dict(svc->cache) : NULL,
        .flags = kind < KILN_STATE_KINDS && svc->recorded[kind] ? KILN_PROGRAM_RECORDED_SPIRV : 0u};
    struct kiln_program_sealed s = {.size = sizeof(s)};
    rc = kiln_program_seal(e->program, &so, &s);
    if (rc == KILN_OK) {
        rc = run_payload(svc, e, s.payload, s.payload_size, worker, link, b);
        b->store = svc->store && !e->parts_only;
    }
    kiln_program_sealed_clear(&s);
    return rc;
}

/* Stores a program the cache lacked, after its answer went out: the
 * one-call store, so the next start has it. */
static void entry_store(struct kiln_service *svc, struct entry *e)
{
    int rc = kiln_cache_put_program(svc->cache, e->program, NULL, NULL);
    pthread_mutex_lock(&svc->lock);
    if (rc == KILN_OK)
        svc->st.stored++;
    else
        svc->st.store_failed++;
    pthread_mutex_unlock(&svc->lock);
}

/* Ends the optimized build of a fast-linked entry (under the lock): its
 * tickets get the optimized pipeline; when it failed they keep the
 * linked one (no second answer), as do later requests of the key. */
static void optimized_done(struct kiln_service *svc, struct entry *e, int rc, struct built *b,
                           struct kiln_ticket **notify)
{
    e->optimizing = false;
    e->state = E_DONE;
    if (rc < 0) {
        svc->st.failed++;
        answer_entry(svc, e, KILN_TICKET_CANCELED, rc, notify); /* detaches: linked stays */
        return;
    }
    e->pipe = b->pipe;
    svc->st.built_background++;
    svc->st.optimized++;
    answer_entry(svc, e, KILN_TICKET_READY, 0, notify);
}

/* A parts-only entry whose program has no library parts (a compute
 * pipeline, a shape that is not linked: the build said KILN_ENOTSUP) is
 * queued again for its whole pipeline (under the lock): asked ahead, it
 * is known ahead, and its draw would otherwise wait for a whole urgent
 * build. It stays in the table for the draw's request to find, waits with
 * parts-only work (the draw is its deadline too) and is built, stored and
 * kept as a background request's entry is; its parts-only tickets stay
 * attached and are answered READY (with no pipeline) when it is built, so
 * that a loading screen waiting on them waits for it. Not while the
 * service closes, with the queue full, or without a table
 * (KILN_SERVICE_NO_MERGE: no request could find it).
 * @return whether it was queued again. */
static bool whole_ahead(struct kiln_service *svc, struct entry *e, unsigned want[2])
{
    if (svc->closing || !e->in_table || svc->nqueued >= svc->capacity)
        return false;
    e->parts_only = false;
    e->ahead = true;
    e->state = E_QUEUED;
    queue_push(svc, e);
    tokens_wanted(svc, e, want);
    svc->st.whole_ahead++;
    return true;
}

/* Ends a parts-only build (under the lock): a program without parts
 * (KILN_ENOTSUP) is queued again to be built whole ahead (whole_ahead).
 * Otherwise its tickets are answered READY with no pipeline (also when
 * whole_ahead declined), or FAILED; the entry leaves the table (a later
 * request builds anew) and its worker frees it.
 * @return whether the entry was queued again. */
static bool parts_done(struct kiln_service *svc, struct entry *e, int rc, unsigned want[2],
                       struct kiln_ticket **notify)
{
    bool ok = rc == KILN_OK || rc == KILN_ENOTSUP;
    e->error = ok ? 0 : rc;
    if (ok)
        svc->st.parts_only_built++;
    else
        svc->st.failed++;
    if (rc == KILN_ENOTSUP && whole_ahead(svc, e, want))
        return true; /* its tickets wait for the whole pipeline */
    e->state = E_DONE;
    table_remove(svc, e);
    answer_entry(svc, e, ok ? KILN_TICKET_READY : KILN_TICKET_FAILED, e->error, notify);
    pthread_cond_broadcast(&svc->answered);
    return false;
}

/* Ends a build (under the lock): the entry is answered and kept; a
 * linked one waits in E_LINKED for hand_over to queue its optimized build.
 * @return whether a parts-only entry was queued again (parts_done). */
static bool entry_done(struct kiln_service *svc, struct entry *e, int rc, struct built *b,
                       unsigned want[2], struct kiln_ticket **notify)
{
    svc->running--;
    svc->st.from_cache += b->from_cache;
    svc->st.parts_built += b->parts_built;
    svc->st.parts_reused += b->parts_reused;
    if (e->parts_only)
        return parts_done(svc, e, rc, want, notify);
    if (!e->listed) {
        e->dnext = svc->done;
        svc->done = e;
        e->listed = true;
    }
    if (e->optimizing) {
        optimized_done(svc, e, rc, b, notify);
    } else if (rc == KILN_OK && b->linked) {
        e->state = E_LINKED;
        e->linked_pipe = b->pipe;
        if (e->prio == KILN_PRIORITY_URGENT) {
            svc->st.built_urgent++;
        } else {
            svc->st.built_background++;
            svc->st.linked_ahead++;
        }
        answer_linked(svc, e, notify);
    } else {
        e->state = E_DONE;
        e->error = rc < 0 ? rc : 0;
        e->pipe = b->pipe;
        if (rc == KILN_ENOTFOUND)
            table_remove(svc, e); /* by key and not stored yet: it may be later */
        if (rc < 0)
            svc->st.failed++;
        else if (e->prio == KILN_PRIORITY_URGENT)
            svc->st.built_urgent++;
        else
            svc->st.built_background++;
        answer_entry(svc, e, rc < 0 ? KILN_TICKET_FAILED : KILN_TICKET_READY, e->error, notify);
    }
    pthread_cond_broadcast(&svc->answered);
    return false;
}

/* After a linked answer went out (and the program was stored): queues the
 * optimized build at background priority, with a token for it on the lane
 * that takes background work. While the service closes, the entry ends
 * here with its linked pipeline.
 * @return whether the program copy is still wanted (by that build). */
static bool hand_over(struct kiln_service *svc, struct entry *e)
{
    struct kiln_ticket *notify = NULL;
    unsigned want[2] = {0, 0};
    pthread_mutex_lock(&svc->lock);
    bool queue = !svc->closing;
    if (queue) {
        e->state = E_QUEUED;
        e->optimizing = true;
        e->prio = KILN_PRIORITY_BACKGROUND;
        queue_push(svc, e);
        tokens_wanted(svc, e, want);
    } else {
        e->state = E_DONE;
        answer_entry(svc, e, KILN_TICKET_CANCELED, KILN_ECANCELED, &notify);
    }
    pthread_mutex_unlock(&svc->lock);
    submit_tokens(svc, want);
    notify_all(svc, notify);
    return queue;
}

/* A pool job of lane `arg`: builds the entries the lane takes (queue_pop)
 * until none is left. */
static int token_run(void *arg, unsigned worker)
{
    struct lane *l = arg;
    struct kiln_service *svc = l->svc;
    pthread_mutex_lock(&svc->lock);
    for (;;) {
        struct entry *e = queue_pop(svc, l);
        if (!e)
            break;
        e->state = E_RUNNING;
        bool optimizing = e->optimizing, parts = e->parts_only;
        bool urgent = e->prio == KILN_PRIORITY_URGENT && !optimizing && !parts;
        uint32_t link = parts ? KILN_BUILD_LINK_PARTS
                        : svc->fast_link && !optimizing && (urgent || e->link_ahead)
                            ? KILN_BUILD_LINK_FAST
                            : 0u;
        bool plain = !urgent && !parts && (optimizing || !e->ahead);
        svc->running++;
        l->running++;
        svc->plain_running += plain;
        if (urgent)
            svc->urgent_running++;
        else
            svc->background_running++;
        pthread_mutex_unlock(&svc->lock);
        struct built b;
        int rc = entry_build(svc, e, l->first_worker + worker, link, &b);
        if (parts && b.pipe) {
            kiln_vk_pipeline_destroy(svc->vk, b.pipe); /* a builder that ignored the ask */
            b.pipe = NULL;
        }
        struct kiln_ticket *notify = NULL;
        unsigned want[2] = {0, 0};
        pthread_mutex_lock(&svc->lock);
        l->running--;
        svc->plain_running -= plain;
        if (urgent)
            svc->urgent_running--;
        else
            svc->background_running--;
        bool again = entry_done(svc, e, rc, &b, want, &notify);
        if (urgent)
            background_wake(svc, want); /* the hold may have lifted */
        pthread_mutex_unlock(&svc->lock);
        submit_tokens(svc, want);
        notify_all(svc, notify);
        if (parts) {
            if (!again)
                entry_free(e); /* out of the table, no ticket: only this worker has it */
            pthread_mutex_lock(&svc->lock);
            continue;
        }
        if (b.store && rc == KILN_OK && !optimizing)
            entry_store(svc, e);
        /* Only this worker holds the copy now, or hands it to the
         * optimized build. */
        if (!(rc == KILN_OK && b.linked && !optimizing && hand_over(svc, e))) {
            kiln_program_destroy(e->program);
            e->program = NULL;
        }
        pthread_mutex_lock(&svc->lock);
    }
    l->tokens--;
    pthread_mutex_unlock(&svc->lock);
    return KILN_OK;
}

/* ---- requests ---------------------------------------------------------------- */

/* The request's key: its program's, as kiln_program_seal gives it, or the
 * key named. */
static int request_key(const struct kiln_pipeline_request *r, struct kiln_key *key)
{
    if (!r->program) {
        *key = r->key;
        return KILN_OK;
    }
    if (r->program->has_key) {
        *key = r->program->key;
        return KILN_OK;
    }
    return kiln_program_key(r->program, key);
}

/* Makes room for one more queued entry (under the lock): with the queue
 * full, an urgent request evicts the oldest queued background entry.
 * @return 0, or KILN_EBUSY (refused). */
static int make_room(struct kiln_service *svc, enum kiln_priority prio, struct kiln_ticket **notify)
{
    if (svc->nqueued < svc->capacity)
        return KILN_OK;
    struct entry *old = svc->q[Q_BACKGROUND].head;
    if (!old)
        old = svc->q[Q_PARTS].head;
    if (prio != KILN_PRIORITY_URGENT || !old) {
        svc->st.refused++;
        return KILN_EBUSY;
    }
    queue_remove(svc, old);
    table_remove(svc, old);
    answer_entry(svc, old, KILN_TICKET_CANCELED, KILN_EBUSY, notify);
    svc->st.evicted++;
    entry_free(old); /* its tickets are on *notify, detached */
    pthread_cond_broadcast(&svc->answered);
    return KILN_OK;
}

/* Joins `t` to the entry `e` of its key (under the lock): answered at once
 * when e ran, else attached (an urgent one raises a queued background e). */
static void join_entry(struct kiln_service *svc, struct entry *e, struct kiln_ticket *t,
                       unsigned want[2], struct kiln_ticket **notify)
{
    svc->st.merged++;
    t->merged = true;
    if (e->state == E_DONE) {
        /* The optimized pipeline, or the linked one when its build failed. */
        bool linked = !e->pipe && e->linked_pipe;
        svc->st.answered_known++;
        ticket_answer(svc, t, e->error ? KILN_TICKET_FAILED : KILN_TICKET_READY, e->error,
                      linked ? e->linked_pipe : e->pipe, linked);
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); /* the list's */
        push_notify(t, notify);
        return;
    }
    if (e->linked_pipe) {
        /* Linked, its optimized build on the way: the linked one now, the
         * optimized one when it is built (attached below). */
        svc->st.answered_known++;
        ticket_answer(svc, t, KILN_TICKET_READY, 0, e->linked_pipe, true);
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); /* the list's */
        push_notify(t, notify);
    }
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    ticket_attach(e, t);
    if (e->state != E_QUEUED || e->optimizing || e->prio == KILN_PRIORITY_URGENT)
        return;
    if (t->prio == KILN_PRIORITY_URGENT) {
        queue_remove(svc, e);
        e->prio = KILN_PRIORITY_URGENT;
        queue_push(svc, e);
        svc->st.raised++;
        tokens_wanted(svc, e, want);
    } else if (t->link_ahead && !e->link_ahead) {
        queue_remove(svc, e); /* a prefetch now wanted soon: with the work ahead */
        e->ahead = e->link_ahead = true;
        queue_push(svc, e);
        tokens_wanted(svc, e, want);
    }
}

/* Answers `t` at once (under the lock), READY with no pipeline: a
 * parts-only request of a key a full request has (its build makes the
 * parts or needs none). */
static void answer_parts_known(struct kiln_service *svc, struct kiln_ticket *t,
                               struct kiln_ticket **notify)
{
    svc->st.merged++;
    svc->st.answered_known++;
    t->merged = true;
    ticket_answer(svc, t, KILN_TICKET_READY, 0, NULL, false);
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); /* the list's */
    push_notify(t, notify);
}

/*
 * A request meets its key's entry of the other kind (under the lock).
 * A parts-only `t` meeting a full entry is answered at once. A full `t`
 * meeting a parts-only entry takes it over: a queued one becomes t's
 * (its parts-only tickets answered READY, re-queued at t's priority, t
 * attached); a running one leaves the table and t gets an entry of its
 * own, whose link waits for the parts in flight (the parts table builds
 * each once). @return the entry to join (never: NULL), with t placed or
 * answered, or with neither for a new entry.
 */
static struct entry *parts_meet(struct kiln_service *svc, struct entry *e, struct kiln_ticket *t,
                                unsigned want[2], struct kiln_ticket **notify)
{
    if (t->parts_only) {
        answer_parts_known(svc, t, notify);
        return NULL;
    }
    svc->st.parts_only_superseded++;
    if (e->state != E_QUEUED) {
        table_remove(svc, e); /* its worker frees it */
        return NULL;
    }
    queue_remove(svc, e);
    answer_entry(svc, e, KILN_TICKET_READY, 0, notify);
    e->parts_only = false;
    e->prio = t->prio;
    e->ahead = e->link_ahead = t->link_ahead;
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    ticket_attach(e, t);
    queue_push(svc, e);
    tokens_wanted(svc, e, want);
    pthread_cond_broadcast(&svc->answered);
    return NULL;
}

/*
 * Places the ticket (under the lock): joined to its key's entry, or in a
 * new entry made of *copy (taken: set to NULL). *need_copy is set when a
 * new entry is needed and no copy was made yet. @return 0, KILN_EBUSY or
 * KILN_ENOMEM; want[lane] counts the tokens to add to it.
 */
static int place(struct kiln_service *svc, struct kiln_ticket *t, struct kiln_program **copy,
                 bool has_program, bool *need_copy, unsigned want[2], struct kiln_ticket **notify)
{
    *need_copy = false;
    bool merge = !(svc->flags & KILN_SERVICE_NO_MERGE);
    struct entry *e = merge ? table_find(svc, t->key) : NULL;
    if (e && e->parts_only != t->parts_only)
        e = parts_meet(svc, e, t, want, notify);
    if (e) {
        join_entry(svc, e, t, want, notify);
        return KILN_OK;
    }
    if (t->entry || atomic_load_explicit(&t->pub, memory_order_relaxed))
        return KILN_OK; /* placed or answered by parts_meet */
    if (has_program && !*copy) {
        *need_copy = true;
        return KILN_OK;
    }
    KILN_TRY(make_room(svc, t->prio, notify));
    e = kiln__calloc(1, sizeof(*e));
    if (!e)
        return KILN_ENOMEM;
    e->key = t->key;
    e->prio = t->prio;
    e->parts_only = t->parts_only;
    e->ahead = e->link_ahead = t->link_ahead;
    e->state = E_QUEUED;
    e->program = *copy;
    *copy = NULL;
    if (merge)
        table_add(svc, e);
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    ticket_attach(e, t);
    queue_push(svc, e);
    tokens_wanted(svc, e, want);
    return KILN_OK;
}

static int request_body(struct kiln_service *svc, const struct kiln_pipeline_request *in,
                        struct kiln_ticket **out)
{
    struct kiln_pipeline_request r;
    KILN_TRY(KILN_STRUCT_IN(&r, in, "kiln_pipeline_request"));
    if (!r.program && !svc->cache) {
        KILN_ERROR("service", "a request by key needs a service with a cache");
        return KILN_EINVAL;
    }
    bool parts = (r.flags & KILN_REQUEST_PARTS_ONLY) != 0;
    bool link_ahead = (r.flags & KILN_REQUEST_LINK_AHEAD) != 0;
    if (r.flags & ~(KILN_REQUEST_PARTS_ONLY | KILN_REQUEST_LINK_AHEAD) || (parts && link_ahead)) {
        KILN_ERROR("service", "request flags 0x%x: unknown, or parts only and link ahead both",
                   (unsigned)r.flags);
        return KILN_EINVAL;
    }
    if (parts && !svc->fast_link)
        return KILN_ENOTSUP; /* no parts without fast-link (kiln/service.h) */
    struct kiln_ticket *t = kiln__calloc(1, sizeof(*t));
    if (!t)
        return KILN_ENOMEM;
    int rc = request_key(&r, &t->key);
    if (rc < 0) {
        kiln__free(t);
        return rc;
    }
    t->svc = svc;
    t->prio = r.priority == KILN_PRIORITY_URGENT && !parts ? KILN_PRIORITY_URGENT
                                                           : KILN_PRIORITY_BACKGROUND;
    t->parts_only = parts;
    t->link_ahead = link_ahead && t->prio != KILN_PRIORITY_URGENT;
    t->fn = r.on_done;
    t->user = r.user;
    t->owned = out != NULL;
    t->t0 = kiln_now_ns();
    /* Holders: the caller, the entry while attached, a notify list. */
    atomic_init(&t->refs, t->owned ? 1 : 0);
    atomic_init(&t->pub, 0);

    struct kiln_program *copy = NULL;
    struct kiln_ticket *notify = NULL;
    bool need_copy = false;
    unsigned want[2] = {0, 0};
    pthread_mutex_lock(&svc->lock);
    svc->ahead_asked = svc->ahead_asked || parts || t->link_ahead;
    for (;;) {
        rc = svc->closing ? KILN_ECANCELED
                          : place(svc, t, &copy, r.program != NULL, &need_copy, want, &notify);
        if (rc < 0 || !need_copy)
            break;
        /* The copy is made outside the lock; the key is looked up again. */
        pthread_mutex_unlock(&svc->lock);
        rc = kiln_program_copy(r.program, &copy);
        pthread_mutex_lock(&svc->lock);
        if (rc < 0)
            break;
    }
    if (rc == KILN_OK)
        svc->st.requested++;
    pthread_mutex_unlock(&svc->lock);
    kiln_program_destroy(copy); /* a copy another request's entry made moot */
    submit_tokens(svc, want);
    if (rc < 0)
        kiln__free(t); /* never placed */
    notify_all(svc, notify);
    if (out)
        *out = rc < 0 ? NULL : t;
    return rc;
}

int kiln_service_request(struct kiln_service *svc, const struct kiln_pipeline_request *req,
                         struct kiln_ticket **out)
{
    if (out)
        *out = NULL;
    if (!svc || !req)
        return KILN_EINVAL;
    return request_body(svc, req, out);
}

/* ---- tickets: the caller's side ---------------------------------------------- */

int kiln_ticket_poll(const struct kiln_ticket *t, struct kiln_ticket_info *info)
{
    if (!t)
        return KILN_EINVAL;
    int pub = atomic_load_explicit(&t->pub, memory_order_acquire);
    if (info) {
        KILN_TRY(kiln__struct_out_check(info, "kiln_ticket_info"));
        struct kiln_ticket_info own;
        ticket_info(t, pub, &own);
        KILN_STRUCT_OUT(info, &own);
    }
    return pub ? t->ans[pub - 1].state : KILN_TICKET_PENDING;
}

/* An absolute CLOCK_MONOTONIC time `ns` from now, for a timed wait on
 * `answered` (made with that clock, as the pool's waits are). */
static struct timespec deadline(uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t sum = (uint64_t)ts.tv_nsec + ns % 1000000000u;
    ts.tv_sec += (time_t)(ns / 1000000000u + sum / 1000000000u);
    ts.tv_nsec = (long)(sum % 1000000000u);
    return ts;
}

int kiln_ticket_wait(struct kiln_ticket *t, uint64_t timeout_ns, struct kiln_ticket_info *info)
{
    if (!t)
        return KILN_EINVAL;
    if (ticket_state(t) == KILN_TICKET_PENDING) {
        struct kiln_service *svc = t->svc; /* alive: destroy answers every pending ticket */
        /* About 100 years stands for no bound (and keeps tv_sec in range). */
        struct timespec end = deadline(timeout_ns > (3ull << 60) ? 3ull << 60 : timeout_ns);
        pthread_mutex_lock(&svc->lock);
        while (ticket_state(t) == KILN_TICKET_PENDING)
            if (pthread_cond_timedwait(&svc->answered, &svc->lock, &end) != 0)
                break;
        pthread_mutex_unlock(&svc->lock);
    }
    return kiln_ticket_poll(t, info);
}

int kiln_ticket_cancel(struct kiln_ticket *t)
{
    if (!t)
        return KILN_EINVAL;
    /* An answered ticket may still wait for its optimized answer (attached):
     * cancelling it stops that one, and the linked answer stays. */
    if (ticket_state(t) != KILN_TICKET_PENDING &&
        !atomic_load_explicit(&t->attached, memory_order_acquire))
        return kiln_ticket_poll(t, NULL);
    struct kiln_service *svc = t->svc;
    struct entry *gone = NULL;
    bool detached = false;
    unsigned want[2] = {0, 0};
    pthread_mutex_lock(&svc->lock);
    struct entry *e = t->entry;
    if (e) {
        ticket_detach(t);
        if (!atomic_load_explicit(&t->pub, memory_order_relaxed))
            ticket_answer(svc, t, KILN_TICKET_CANCELED, KILN_ECANCELED, NULL, false);
        detached = true;
        if (e->state == E_QUEUED && !e->optimizing && !e->tickets) {
            queue_remove(svc, e);
            table_remove(svc, e);
            svc->st.dropped++;
            gone = e;
            background_wake(svc, want); /* an urgent one gone may lift the hold */
        }
        pthread_cond_broadcast(&svc->answered);
    }
    pthread_mutex_unlock(&svc->lock);
    submit_tokens(svc, want);
    if (gone)
        entry_free(gone);
    if (detached)
        ticket_unref(t); /* the entry's hold */
    return kiln_ticket_poll(t, NULL);
}

void kiln_ticket_release(struct kiln_ticket *t)
{
    if (!t)
        return;
    kiln_ticket_cancel(t);
    ticket_unref(t);
}

/* ---- the service ---------------------------------------------------------------- */

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int kiln_service_get_stats(struct kiln_service *svc, struct kiln_service_stats *stats)
{
    if (!svc || !stats)
        return KILN_EINVAL;
    KILN_TRY(kiln__struct_out_check(stats, "kiln_service_stats"));
    uint64_t *w = kiln__malloc(sizeof(svc->waits));
    pthread_mutex_lock(&svc->lock);
    struct kiln_service_stats s = svc->st;
    s.queued = (unsigned)(svc->nqueued + svc->nopt);
    s.running = svc->running;
    s.workers = svc->workers;
    s.background_workers = svc->background_max;
    s.urgent_hold_max = svc->hold_max;
    size_t n = svc->nwaits < WAIT_SAMPLES ? (size_t)svc->nwaits : WAIT_SAMPLES;
    if (w)
        memcpy(w, svc->waits, n * sizeof(*w));
    pthread_mutex_unlock(&svc->lock);
    if (w && n) {
        qsort(w, n, sizeof(*w), by_value);
        s.urgent_p50_ns = w[n / 2];
        s.urgent_p99_ns = w[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
    }
    kiln__free(w);
    KILN_STRUCT_OUT(stats, &s);
    return KILN_OK;
}

static void service_free(struct kiln_service *svc)
{
    kiln_pool_destroy(svc->lanes[LANE_URGENT].pool);
    kiln_pool_destroy(svc->lanes[LANE_BACKGROUND].pool);
    kiln_build_session_destroy(svc->session);
    for (struct entry *e = svc->done, *next; e; e = next) {
        next = e->dnext;
        kiln_vk_pipeline_destroy(svc->vk, e->pipe);
        kiln_vk_pipeline_destroy(svc->vk, e->linked_pipe);
        entry_free(e);
    }
    kiln__free(svc->table);
    pthread_cond_destroy(&svc->answered);
    pthread_mutex_destroy(&svc->lock);
    kiln__free(svc);
}

/*
 * The two lanes (see the top): of `workers`, the background lane gets
 * background_workers (by default every worker but `urgent` of them:
 * default_urgent_workers where the caller gave no counts, else one; and
 * at most every worker but one: the urgent lane keeps
 * one), at idle priority unless KILN_SERVICE_SAME_PRIORITY; the urgent
 * lane the rest, at the caller's priority. With background_workers >=
 * workers the urgent lane takes background work too (background builds
 * may then take every worker); with two urgent workers or more, it takes
 * work ahead of the draw while one stays free.
 */
static int lanes_create(struct kiln_service *svc, const struct kiln_service_options *o,
                        unsigned urgent)
{
    unsigned n = svc->workers ? svc->workers : 1;
    unsigned bmax = o->background_workers ? o->background_workers : n > urgent ? n - urgent : 1;
    svc->urgent_takes_background = bmax >= n;
    unsigned nb = bmax < n ? bmax : n - 1;
    unsigned count[2] = {n - nb, nb};
    svc->workers = 0;
    for (int i = 0; i < 2; i++) {
        struct lane *l = &svc->lanes[i];
        l->svc = svc;
        l->first_worker = svc->workers;
        if (!count[i])
            continue;
        /* Tokens are at most the workers: the pool's queue never fills. */
        struct kiln_pool_options po = {.size = sizeof(po),
                                       .workers = count[i],
                                       .queue_capacity = count[i],
                                       .background = i == LANE_BACKGROUND &&
                                                     !(svc->flags & KILN_SERVICE_SAME_PRIORITY),
                                       .executor = o->executor};
        KILN_TRY(kiln_pool_create_with(&po, &l->pool));
        l->workers = kiln_pool_workers(l->pool);
        svc->workers += l->workers;
    }
    svc->background_max = svc->lanes[LANE_BACKGROUND].workers +
                          (svc->urgent_takes_background ? svc->lanes[LANE_URGENT].workers : 0);
    svc->urgent_takes_ahead = !svc->urgent_takes_background && svc->lanes[LANE_URGENT].workers >= 2;
    unsigned quarter = svc->workers / 4 ? svc->workers / 4 : 1;
    svc->hold_max = svc->flags & KILN_SERVICE_NO_URGENT_HOLD ? 0 : quarter;
    return KILN_OK;
}

/* The urgent lane's workers by default, beside `build` background ones: a
 * quarter as many, one at least. A burst of draws, or of links asked
 * ahead of them, then has several workers at the caller's priority while
 * the background lane's hold long optimized builds (on the H200 a burst
 * of 17 links asked 4 frames ahead of their draws waited up to 88 ms for
 * one worker); idle, they cost a thread each. */
static unsigned default_urgent_workers(unsigned build)
{
    return build / 4 ? build / 4 : 1;
}

static int create_body(const struct kiln_service_options *in, struct kiln_service **out)
{
    struct kiln_service_options o;
    KILN_TRY(KILN_STRUCT_IN(&o, in, "kiln_service_options"));
    if (!o.vk) {
        KILN_ERROR("service", "no Vulkan context given");
        return KILN_EINVAL;
    }
    struct kiln_service *svc = kiln__calloc(1, sizeof(*svc));
    if (!svc)
        return KILN_ENOMEM;
    pthread_mutex_init(&svc->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&svc->answered, &attr);
    pthread_condattr_destroy(&attr);
    svc->vk = o.vk;
    svc->cache = o.cache;
    if (o.cache) {
        struct kiln_cache_stats cs = KILN_CACHE_STATS_INIT;
        svc->store = kiln_cache_get_stats(o.cache, &cs) == KILN_OK && !cs.read_only;
    }
    svc->flags = o.flags;
    /* The caller's first builder of a kind decides; without one, the
     * core's default builds it (the Fossilize builder, which takes
     * recorded modules as they are). */
    svc->recorded[KILN_STATE_FOZ] = true;
    bool seen[KILN_STATE_KINDS] = {false};
    for (size_t i = 0; i < o.nbuilders; i++) {
        uint32_t k = o.builders[i].kind;
        if (k < KILN_STATE_KINDS && !seen[k]) {
            seen[k] = true;
            svc->recorded[k] = (o.builders[i].flags & KILN_BUILDER_RECORDED_SPIRV) != 0;
        }
    }
    svc->probe = kiln_vk_get_info(o.vk)->compile_probe && !(o.flags & KILN_SERVICE_NO_PROBE);
    const struct kiln_vk_info *vi = kiln_vk_get_info(o.vk);
    svc->fast_link = (o.flags & KILN_SERVICE_FAST_LINK) && vi->pipeline_library;
    if ((o.flags & KILN_SERVICE_FAST_LINK) && !svc->fast_link)
        KILN_INFO("service", "%s: no pipeline libraries: fast-link is off", vi->device_name);
    svc->capacity = o.queue_capacity ? o.queue_capacity : KILN_SERVICE_DEFAULT_QUEUE;
    /* By default the machine's build workers for background work, plus
     * the urgent lane's (default_urgent_workers): a service doing only
     * background work builds as wide as a warm start. */
    unsigned urgent = 1;
    svc->workers = o.workers;
    if (!o.workers) {
        unsigned build = kiln_pool_auto_workers(KILN_POOL_WORK_BUILD, 0, NULL);
        urgent = default_urgent_workers(build);
        svc->workers = build + urgent;
    }
    svc->nbuckets = 256;
    svc->table = kiln__calloc(svc->nbuckets, sizeof(*svc->table));
    struct kiln_build_session_options so = {
        .size = sizeof(so),
        .vk = o.vk,
        .builders = o.builders,
        .nbuilders = o.nbuilders,
        .dict = o.cache ? kiln_cache_dict(o.cache) : NULL,
        .ledger_dir = svc->store ? kiln_cache_dir(o.cache) : NULL,
        .binaries = o.binaries,
        .binaries_dir = o.cache ? kiln_cache_dir(o.cache) : NULL,
        .binaries_keep = svc->store};
    int rc = svc->table ? kiln_build_session_create(&so, &svc->session) : KILN_ENOMEM;
    if (rc == KILN_OK)
        rc = lanes_create(svc, &o, urgent);
    if (rc < 0) {
        service_free(svc);
        return rc;
    }
    *out = svc;
    return KILN_OK;
}

int kiln_service_create(const struct kiln_service_options *o, struct kiln_service **out)
{
    if (out)
        *out = NULL;
    if (!o || !out)
        return KILN_EINVAL;
    return create_body(o, out);
}

void kiln_service_destroy(struct kiln_service *svc)
{
    if (!svc)
        return;
    struct kiln_ticket *notify = NULL;
    struct entry *dropped = NULL;
    pthread_mutex_lock(&svc->lock);
    svc->closing = true;
    for (struct entry *e; (e = queue_pop_any(svc)) != NULL;) {
        answer_entry(svc, e, KILN_TICKET_CANCELED, KILN_ECANCELED, &notify);
        e->state = E_DONE;
        if (e->listed)
            continue; /* an optimized build not run: its linked pipeline stays */
        table_remove(svc, e);
        e->dnext = dropped;
        dropped = e;
    }
    pthread_cond_broadcast(&svc->answered);
    pthread_mutex_unlock(&svc->lock);
    notify_all(svc, notify);
    while (dropped) {
        struct entry *e = dropped;
        dropped = e->dnext;
        entry_free(e);
    }
    /* The tokens find the queue empty and leave; running builds end. */
    for (int i = 0; i < 2; i++)
        if (svc->lanes[i].pool)
            kiln_pool_wait(svc->lanes[i].pool);
    kiln_build_session_save(svc->session); /* logged when it fails */
    service_free(svc);
}
