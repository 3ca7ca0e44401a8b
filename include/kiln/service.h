/*
 * kiln/service.h - the pipeline service: pipelines on demand during play.
 *
 * An emulator's frame loop meets a program whose pipeline nobody built. It
 * asks the service (kiln_service_request) and goes on drawing: the call
 * never blocks on a build. The answer comes in a ticket, polled each frame
 * (kiln_ticket_poll, never blocks) or through a callback. The service
 * builds on its own workers, through the same path as kiln_warm_start
 * (kiln_build_session, kiln/prep.h), and stores a program it met that the
 * cache did not hold (sealed once, then kiln_cache_put), so the next start
 * has it. docs/runtime.md tells the model; in short:
 *
 * - Priorities. An urgent request (needed by this frame) is taken by the
 *   next worker that comes free, before every queued background request
 *   (prefetch, warm-up): it waits behind the builds already running, never
 *   behind a queued background one. While urgent work waits, background
 *   builds beyond a few in flight wait too (KILN_SERVICE_NO_URGENT_HOLD).
 * - Merging. Requests for the same key (the program's key covers its
 *   stages and its state) share one build: every ticket is answered; an
 *   urgent request joining a queued background one raises it to urgent.
 *   A key already built (or failed) is answered at once from the
 *   service's table: each program is built once per service.
 * - A bounded queue. At most queue_capacity requests wait; with the queue
 *   full, a background request is refused with KILN_EBUSY, and an urgent
 *   one evicts the oldest queued background request (its tickets end
 *   KILN_TICKET_CANCELED with error KILN_EBUSY: ask again later), or is
 *   refused with KILN_EBUSY when every queued request is urgent.
 * - Ownership. Pipelines the service built are the service's: valid until
 *   kiln_service_destroy, which destroys them. A ticket is the caller's
 *   until kiln_ticket_release.
 * - Ask before compiling. Where the device has the probe
 *   (kiln_vk_info.compile_probe), a worker first asks the driver for the
 *   pipeline without a compile (KILN_BUILD_PROBE) and compiles only when
 *   the driver says it must; the driver's creation feedback of every build
 *   is counted (kiln_service_stats). Never on the requesting thread.
 *
 * Thread safety for the whole header: every function may be called from
 * any number of threads at once (render threads), except
 * kiln_service_destroy, which must not overlap any other call on the
 * service or its tickets but kiln_ticket_poll and kiln_ticket_release.
 */
#ifndef KILN_SERVICE_H
#define KILN_SERVICE_H

#include "kiln/common.h"
#include "kiln/cache.h"
#include "kiln/prep.h"
#include "kiln/program.h"
#include "kiln/vk.h"

#ifdef __cplusplus
extern "C" {
#endif

struct kiln_service;
struct kiln_ticket;

/* A request's priority. */
enum kiln_priority {
    KILN_PRIORITY_BACKGROUND = 0, /* prefetch, warm-up: after every urgent request */
    KILN_PRIORITY_URGENT = 1,     /* needed by this frame */
};

/* Where a ticket stands. */
enum kiln_ticket_state {
    KILN_TICKET_PENDING = 0,  /* queued or being built */
    KILN_TICKET_READY = 1,    /* built: the pipeline is there */
    KILN_TICKET_FAILED = 2,   /* the program could not be built (error says why) */
    KILN_TICKET_CANCELED = 3, /* kiln_ticket_cancel, eviction (KILN_EBUSY) or the
                               * service's destroy (KILN_ECANCELED) */
};

/* A flag of kiln_service_options: every request gets a build of its own
 * (no merge, no table of built keys). For measurements and tests only. */
#define KILN_SERVICE_NO_MERGE 0x1u

/* A flag of kiln_service_options: fast-link (docs/runtime.md, "Fast-link").
 * Where the device has VK_EXT_graphics_pipeline_library, an urgent
 * graphics request is answered at once with a pipeline linked from library
 * parts (each part built once per key and reused), and the optimized
 * pipeline is built in the background to replace it: the ticket is
 * answered twice (READY with linked true, then READY with linked false;
 * the callback runs once for each). Without the extension the flag does
 * nothing. */
#define KILN_SERVICE_FAST_LINK 0x2u

/* A flag of kiln_service_options: never probe (docs/runtime.md, "Ask
 * before compiling"): every build compiles as kiln_warm_start's do. For
 * measurements and tests (the probe's negative control). */
#define KILN_SERVICE_NO_PROBE 0x10u

/* A flag of kiln_service_options: background builds run at the caller's
 * priority. By default the background lane's workers run at idle priority
 * (SCHED_IDLE, else nice 19, and the idle I/O class on Linux;
 * THREAD_MODE_BACKGROUND_BEGIN on Windows), so a background build takes
 * only what the urgent builds, the frame thread and the rest of the
 * machine leave (docs/runtime.md, "Priorities"). Ignored with an
 * executor (the threads are the application's). */
#define KILN_SERVICE_SAME_PRIORITY 0x20u

/* A flag of kiln_service_options: no urgent hold. By default, while an
 * urgent request is queued or being built, no new background work
 * (background requests, fast-link's optimized builds, parts-only ones)
 * starts once max(1, workers / 4) background builds run: those running
 * finish, the rest wait until no urgent work is left (docs/runtime.md,
 * "Less contention"). With this flag background work starts whenever a
 * worker of its lane is free, as before. For measurements and tests. */
#define KILN_SERVICE_NO_URGENT_HOLD 0x40u

/* The queue capacity when kiln_service_options.queue_capacity is 0. */
#define KILN_SERVICE_DEFAULT_QUEUE 1024u

/* What kiln_service_create makes. Zero-initialise, then set vk. */
struct kiln_service_options {
    size_t size; /* sizeof, as KILN_SERVICE_OPTIONS_INIT sets it (docs/abi.md) */
    /* The Vulkan context to build on (its pipeline cache is used). Required;
     * must outlive the service. */
    struct kiln_vk *vk;
    /* An open program cache (optional, NULL: none). With one, a request by
     * program first looks its key up there (a stored payload is built as
     * it is), a program the cache lacks is stored once it is built, and a
     * request by key reads its record from it. Must outlive the service;
     * a cache opened read-only is read and never written. The caller
     * syncs it (kiln_cache_sync). */
    struct kiln_cache *cache;
    /* The builders, as in kiln_prepare_options (copied). May be NULL and 0. */
    const struct kiln_builder *builders;
    size_t nbuilders;
    /* Build workers; 0: kiln_pool_auto_workers(KILN_POOL_WORK_BUILD, 0)
     * for background builds, so that they alone are as wide as
     * kiln_warm_start's, plus a quarter as many (one at least) kept for
     * urgent requests and work asked ahead (docs/runtime.md). */
    unsigned workers;
    /* Requests that may wait at once; 0: KILN_SERVICE_DEFAULT_QUEUE. */
    size_t queue_capacity;
    /* Run the workers on the application's job system (NULL: threads the
     * service starts). A task the executor refuses runs on the requesting
     * thread: then a request blocks for one build. */
    const struct kiln_executor *executor;
    /* KILN_SERVICE_* flags. */
    uint32_t flags;
    /* (0.2) The most workers background builds (and fast-link's optimized
     * builds) take at once; 0: with `workers` 0 the background share
     * above, else every worker but one (at least one), so an
     * urgent request always finds a worker free and waits for no build at
     * all (docs/runtime.md, "Priorities"). They are the background lane,
     * at idle priority (KILN_SERVICE_SAME_PRIORITY); the urgent lane has
     * the rest. Give `workers` to let background builds take them all (the
     * urgent lane's worker then takes background work when it has no
     * urgent work). */
    unsigned background_workers;
    /* (0.2) The host tier of driver binaries of `cache`'s folder (enum
     * kiln_binaries_mode; 0: off; docs/vk.md): a request whose program the
     * tier holds is made from its binaries, no compile (counted in
     * kiln_service_stats.from_binaries). With a cache that takes puts the
     * service also keeps the binaries of each whole pipeline it compiles
     * (kiln_build_session_options.binaries_keep; counted in
     * kiln_service_stats.binaries_kept), so the next start or service makes
     * it from them; with a read-only cache it only reads the tier (a
     * prepare or start with it on fills it). Needs `cache`. */
    uint32_t binaries;
};
/* (The build ledger: with a cache that takes puts, what the service builds
 * or fails is noted in its folder's ledger.kpl, as kiln_prepare notes it,
 * when the service is destroyed; builds as built only when pipelines.vkc
 * was saved then, which needs `vk` made with the cache's folder as its
 * cache_dir. See docs/runtime.md, "The ledger".) */
#define KILN_SERVICE_OPTIONS_INIT KILN_STRUCT_INIT(kiln_service_options)

/* What a ticket says (kiln_ticket_poll, kiln_ticket_wait, the callback). */
struct kiln_ticket_info {
    size_t size; /* sizeof, as KILN_TICKET_INFO_INIT sets it (docs/abi.md) */
    enum kiln_ticket_state state;
    int error; /* FAILED / CANCELED: why (a kiln error); 0 otherwise */
    /* READY: the VkPipeline (0 when the builder keeps its pipelines) and
     * kiln's handle over it; both the service's (see the top). */
    uint64_t pipeline;
    struct kiln_vk_pipeline *vk_pipeline;
    struct kiln_key key;
    bool merged;      /* answered by a build another request started */
    uint64_t wait_ns; /* READY / FAILED: from the request to the answer */
    /* READY: `pipeline` is a fast-linked one (KILN_SERVICE_FAST_LINK); its
     * optimized replacement follows (a second answer, linked false). The
     * linked pipeline stays valid until kiln_service_destroy. */
    bool linked;
};
#define KILN_TICKET_INFO_INIT KILN_STRUCT_INIT(kiln_ticket_info)

/*
 * A ticket's callback: called once when the ticket is answered (READY or
 * FAILED), evicted, or cancelled by kiln_service_destroy; not after the
 * caller's own kiln_ticket_cancel. It runs just after the ticket's state
 * changed: a thread polling may see the answer before the callback runs. It runs on a service
 * worker, or on the requesting thread before kiln_service_request returns when the answer is
 * already known (a key built before), or on the thread in
 * kiln_service_destroy. It must not call kiln_service_destroy; `info` is
 * borrowed for the call. `t` is NULL for a request made without a ticket.
 */
typedef void (*kiln_ticket_fn)(void *user, struct kiln_ticket *t,
                               const struct kiln_ticket_info *info);

/* One request (kiln_service_request; named apart from the function for C++). */
struct kiln_pipeline_request {
    size_t size; /* sizeof, as KILN_PIPELINE_REQUEST_INIT sets it (docs/abi.md) */
    /* The program (every stage with its SPIR-V words): copied by the call,
     * keyed as kiln_program_seal keys it. NULL: the request is by `key`,
     * read from the service's cache. */
    const struct kiln_program *program;
    struct kiln_key key;
    enum kiln_priority priority;
    kiln_ticket_fn on_done; /* optional */
    void *user;             /* given to on_done */
    /* (0.2) KILN_REQUEST_* flags (0: the pipeline, as always). */
    uint32_t flags;
};
#define KILN_PIPELINE_REQUEST_INIT KILN_STRUCT_INIT(kiln_pipeline_request)

/*
 * A flag of kiln_pipeline_request.flags: parts ahead of the draw
 * (docs/runtime.md, "Parts ahead"). Ask when the guest's shader is first
 * seen, long before a draw needs its pipeline: the service builds the
 * program's four library parts (vertex input, pre-rasterization, fragment
 * shader, fragment output) at background priority, through the same
 * builder path fast-link uses, and nothing else: no pipeline, nothing
 * stored in the cache or noted in the ledger. The ticket is answered READY
 * with no pipeline (pipeline 0, vk_pipeline NULL) once the parts are built
 * (or the program has none: compute, a shape that is not linked; its
 * whole pipeline is then built ahead at the same priority, stored and
 * kept for the draw's request, stats.whole_ahead), or at
 * once when a full request of the key is already known; FAILED when a
 * part failed. A later urgent request of the program then only links.
 * Queued parts-only requests are taken before other background work (the
 * draw is their deadline), after every urgent one. A
 * full request of the key arriving while the parts-only one is queued
 * takes its place (the parts-only tickets are answered READY then, and
 * the entry is built as the full request asks, urgent first); one
 * arriving while its parts are being built gets a build of its own, whose
 * link waits for those parts rather than building them again. The
 * priority is always background. Without fast-link (no
 * KILN_SERVICE_FAST_LINK, or a device without pipeline libraries) the
 * request is refused with KILN_ENOTSUP: there are no parts to build.
 */
#define KILN_REQUEST_PARTS_ONLY 0x1u

/*
 * (0.2) A flag of kiln_pipeline_request.flags: the pipeline ahead of its
 * draw (docs/runtime.md, "Links ahead"). Ask when the pipeline's draw is
 * known to come soon (the guest set up its state, a level's list of
 * pipelines): the service builds it at background priority but as an
 * urgent request would be, a fast link from its library parts, queued with
 * parts-ahead work (before other background work) and answered with the
 * linked pipeline; the optimized build follows and answers again, as for
 * any fast-linked request. The draw's urgent request of the key is then
 * answered at once (merged). A background request of the key already
 * queued moves up with it. Without fast-link it is a background request
 * queued with parts-ahead work (a whole build). Not with
 * KILN_REQUEST_PARTS_ONLY (KILN_EINVAL); ignored on an urgent request.
 */
#define KILN_REQUEST_LINK_AHEAD 0x2u

/* What the service did. Times in nanoseconds. */
struct kiln_service_stats {
    size_t size;             /* sizeof, as KILN_SERVICE_STATS_INIT sets it (docs/abi.md) */
    uint64_t requested;      /* requests accepted (refusals not counted) */
    uint64_t merged;         /* of those, joined to a build in flight */
    uint64_t answered_known; /* of those, answered at once from the table */
    uint64_t raised;         /* queued background builds raised to urgent by a merge */
    uint64_t built_urgent;   /* builds taken as urgent and built */
    uint64_t built_background;
    uint64_t failed;       /* builds that failed or were skipped */
    uint64_t canceled;     /* tickets cancelled (by the caller, eviction or destroy) */
    uint64_t dropped;      /* queued builds dropped because no ticket wanted them */
    uint64_t refused;      /* requests refused with KILN_EBUSY: the queue was full */
    uint64_t evicted;      /* queued background builds an urgent request evicted */
    uint64_t from_cache;   /* builds whose payload the cache held */
    uint64_t stored;       /* programs the cache lacked, stored after their build */
    uint64_t store_failed; /* stores that failed (logged) */
    unsigned queued;       /* waiting now */
    unsigned running;      /* being built now */
    unsigned workers;
    /* Urgent tickets' wait, request to READY, over the last 1024 that
     * waited for a build (0: none). */
    uint64_t urgent_p50_ns;
    uint64_t urgent_p99_ns;
    /* Fast-link (KILN_SERVICE_FAST_LINK). */
    uint64_t fast_linked;  /* answers with a linked pipeline */
    uint64_t optimized;    /* optimized pipelines that replaced a linked one */
    uint64_t parts_built;  /* library parts built */
    uint64_t parts_reused; /* library parts taken from the parts table */
    /* Ask before compiling (docs/runtime.md). Where the device has
     * kiln_vk_info.compile_probe, a worker first asks the driver for the
     * pipeline with KILN_BUILD_PROBE (no compile), and compiles only when
     * the driver answers that it must. */
    uint64_t probed;     /* builds asked as a probe first */
    uint64_t probe_hits; /* of those, answered with a pipeline at once: no compile (a
                          * builder that ignores KILN_BUILD_PROBE builds, and is counted
                          * here: driver_cache_hits says whether the driver compiled) */
    /* The driver's creation feedback of the pipelines the service built. */
    uint64_t feedback_pipelines; /* pipelines built with valid feedback */
    uint64_t driver_cache_hits;  /* of those, held by the pipeline cache: no compile */
    uint64_t driver_ns;          /* the driver's own time for them */
    /* (0.2) The most workers background builds take at once (see
     * kiln_service_options.background_workers). */
    unsigned background_workers;
    /* (0.2) Parts ahead (KILN_REQUEST_PARTS_ONLY): parts-only builds run
     * to their end (their parts are in parts_built), and queued or
     * running parts-only entries a full request of their key took over. */
    uint64_t parts_only_built;
    uint64_t parts_only_superseded;
    /* (0.2) The urgent hold (KILN_SERVICE_NO_URGENT_HOLD): the most
     * background builds in flight while urgent work exists (0: no hold),
     * and the times a worker left background work waiting for it. */
    unsigned urgent_hold_max;
    uint64_t background_holds;
    /* (0.2) Pipelines made from the host tier's binaries (no compile; see
     * kiln_service_options.binaries). */
    uint64_t from_binaries;
    /* (0.2) Pipelines whose binaries the service captured and kept in
     * the tier (a cache that takes puts; kiln_service_options.binaries). */
    uint64_t binaries_kept;
    /* (0.2) Parts-only requests of programs without library parts (a
     * compute pipeline, a shape that is not linked) whose whole pipeline
     * was then queued ahead instead (KILN_REQUEST_PARTS_ONLY). */
    uint64_t whole_ahead;
    /* (0.2) Linked pipelines built ahead of their draw, at background
     * priority (KILN_REQUEST_LINK_AHEAD; also counted in built_background). */
    uint64_t linked_ahead;
};
#define KILN_SERVICE_STATS_INIT KILN_STRUCT_INIT(kiln_service_stats)

/* ---------------------------------------------------------------------------
 * The service and its tickets.
 *
 * Thread safety for this section: any thread, any number at once (render
 * threads, workers' callbacks), but kiln_service_destroy (see its own).
 * ------------------------------------------------------------------------ */

/*
 * Starts a service: its build session and its workers.
 * @return 0 and the service in *out; KILN_EINVAL (NULL, no vk, a bad
 * builder or executor: logged), KILN_ENOMEM, or the pool's error.
 */
KILN_API int kiln_service_create(const struct kiln_service_options *o, struct kiln_service **out);

/*
 * Asks for a program's pipeline; never waits for a build. The key of the
 * program is computed on the calling thread (a hash of its words); the
 * copy, the seal and the build happen on a worker. `out` may be NULL: no
 * ticket, the callback alone answers.
 * @return 0 with a ticket in *out (release it with kiln_ticket_release);
 * KILN_EBUSY when the queue is full (see the top; *out NULL);
 * KILN_EINVAL for a NULL service or request, a request with neither a
 * program nor a cache to read its key from, a program without stages;
 * KILN_ENOTSUP for a KILN_REQUEST_PARTS_ONLY request without fast-link;
 * KILN_EINVAL for unknown flags, or parts only with link ahead;
 * KILN_ENOMEM; KILN_ECANCELED while the service is being destroyed.
 */
KILN_API int kiln_service_request(struct kiln_service *svc, const struct kiln_pipeline_request *req,
                                  struct kiln_ticket **out);

/*
 * Where the ticket stands, into *info when it is not NULL; never blocks.
 * @return the enum kiln_ticket_state (>= 0), or KILN_EINVAL for a NULL
 * ticket. Works also after kiln_service_destroy (the ticket is then
 * answered or cancelled), but the pipeline is gone with the service.
 */
KILN_API int kiln_ticket_poll(const struct kiln_ticket *t, struct kiln_ticket_info *info);

/*
 * Waits until the ticket is answered or cancelled, at most timeout_ns
 * (UINT64_MAX: no bound), for tests and shutdown, never for a frame.
 * @return the state as kiln_ticket_poll (PENDING after a timeout), or
 * KILN_EINVAL for a NULL ticket.
 */
KILN_API int kiln_ticket_wait(struct kiln_ticket *t, uint64_t timeout_ns,
                              struct kiln_ticket_info *info);

/*
 * Cancels the ticket: a pending one ends CANCELED with KILN_ECANCELED (its
 * callback is not called); a queued build no other ticket waits for is
 * dropped; a build running goes on, and its pipeline is kept for the next
 * request of the key. An answered ticket stays as it is.
 * @return the ticket's state after the call, or KILN_EINVAL for NULL.
 */
KILN_API int kiln_ticket_cancel(struct kiln_ticket *t);

/* Gives the ticket back (a pending one is cancelled first). NULL is a
 * no-op. Works also after kiln_service_destroy. */
KILN_API void kiln_ticket_release(struct kiln_ticket *t);

/* Fills *stats. @return 0, or KILN_EINVAL for a NULL argument. */
KILN_API int kiln_service_get_stats(struct kiln_service *svc, struct kiln_service_stats *stats);

/*
 * Stops the service: cancels every queued request (tickets CANCELED with
 * KILN_ECANCELED, their callbacks called), waits for the builds running,
 * with a cache that takes puts notes what was built in its build ledger
 * (saving `vk`'s pipelines.vkc first when something was built:
 * kiln_build_session_save), calls the builders' finish, destroys every
 * pipeline the service built, frees the service. Tickets stay valid until
 * released. NULL is a no-op.
 * Thread safety: not beside any other call on the service or its tickets
 * but kiln_ticket_poll and kiln_ticket_release; never from a callback.
 */
KILN_API void kiln_service_destroy(struct kiln_service *svc);

#ifdef __cplusplus
}
#endif

#endif /* KILN_SERVICE_H */
