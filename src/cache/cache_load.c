/*
 * cache_load.c - reading many records at once, checked, on several threads.
 *
 * Design: the records asked for are sorted by file offset and cut into
 * batches of neighbouring records of up to BATCH_BYTES, each read with one
 * pread; batches are grouped into runs of up to RUN_BYTES that a thread
 * takes whole, so each thread reads forward through its own part of the
 * file on its own file descriptor (its own read-ahead state). Big preads in
 * file order keep the storage as busy as a plain sequential read; several
 * threads keep several requests in flight and spread the checksumming.
 *
 * No copy: a run is read straight into one block (huge pages when large)
 * that its records' payloads then live in. Each loaded payload points into its block, and the 48
 * head bytes before it (checked, no longer needed) hold a tag and a pointer to the block; the block
 * counts its live payloads and is freed with the last one (kiln_cache_payload_free). Records start
 * 8-byte aligned in the file and blocks are malloc-aligned, so every payload is 8-byte aligned.
 *
 * Nothing unchecked is returned: each record's head must decode and equal
 * its index entry, and its payload must match the checksum, or the result
 * says KILN_ECORRUPT_RECORD and carries no data. A batch that cannot be read
 * whole (a file cut short under us) is retried record by record, so one bad
 * record costs only itself.
 *
 * A handle reads the file it opened. Each thread opens the records path
 * for its own read-ahead state, but uses that descriptor only when the file
 * there carries the handle's file id: after another process rewrote the
 * cache (a new file renamed over the path) the thread reads through the
 * handle's own descriptor instead, which still holds the file the handle's
 * index describes (issue 17: loads used to read the new file at the old
 * offsets and report every record damaged).
 *
 * A cache with read-only layers loads in one pass (issue 27): every key is
 * looked up first, in the cache's index and then in each layer's index in
 * order (memory only), which names the one file that holds it - the first
 * holder, as for kiln_cache_find - and the runs of all the files go to one
 * set of workers, so no file waits for another's last run and the threads
 * start and join once. A run never spans two files; a worker opens each
 * file's records when it first takes one of its runs, under the file-id
 * rule above, file by file. The holder's answer is final: its damaged
 * record is reported missing (KILN_ECORRUPT_RECORD), never looked for
 * further down. Every file's gate is held (read) from the look-ups until
 * the workers are done, taken in search order (the cache's, then its
 * layers'); a layer's is never taken for writing (nothing evicts from a
 * read-only handle), so the order cannot deadlock.
 *
 * Results are written only by the thread that owns the record's run, to
 * distinct slots; the caller reads them after every worker returned. The
 * workers are threads started here, or the tasks of the executor the open
 * was given (kiln__exec_run: the calling thread is always one of them).
 */
#include "cache_internal.h"
#include "kiln/pool.h"

#include <assert.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_BYTES (1u << 20)
#define RUN_BYTES   (8u << 20)
#define PAYLOAD_TAG 0x44414f4c6e6c696bull /* "kilnLOAD" */

/* A block of records read with one pread; payloads point into data[]. */
struct block {
    atomic_uint refs;
    uint32_t unused;
    uint64_t bytes; /* the allocation's size; data[] starts 16 bytes in */
    unsigned char data[];
};

/* The files one pass reads: the cache's own records (0), then its layers'. */
#define MAX_FILES (1u + KILN_CACHE_MAX_LAYERS)

struct item {
    struct kiln_cache_entry e;
    size_t slot;   /* index into the results */
    unsigned file; /* index into job.files */
};

struct run {
    size_t first, last; /* items [first, last), all of one file */
};

struct job {
    struct kiln_cache *files[MAX_FILES];
    unsigned nfiles;
    struct item *items;
    struct run *runs;
    size_t nruns;
    atomic_size_t next_run;
    struct kiln_cache_result *res;
    atomic_int fatal;     /* an error that is not about one record (ENOMEM, open) */
    atomic_uint replaced; /* per file, a bit: its path names another file (logged once) */
};

/* File by file, each in file order. */
static int by_place(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return x->e.offset < y->e.offset ? -1 : x->e.offset > y->e.offset;
}

static uint64_t rec_len(const struct kiln_cache_entry *e)
{
    return kiln__cache_rec_len(e->size);
}

/* Checks one record read into block `b` at `rec` and fills its result.
 * @return whether the result now holds a payload of the block. */
static bool finish(struct job *j, const struct item *it, struct block *b, unsigned char *rec)
{
    struct kiln_cache_result *r = &j->res[it->slot];
    struct kiln_cache_entry head;
    unsigned char *payload = rec + KILN__CACHE_HEAD_SIZE;
    if (kiln__cache_head_decode(rec, KILN__CACHE_HEAD_SIZE, &head) < 0 ||
        !kiln__cache_head_matches(&head, &it->e) ||
        kiln__cache_record_checksum(&head, payload) != head.checksum) {
        KILN_WARN("cache",
                  "%s: record at offset %" PRIu64 " (key %016" PRIx64 "%016" PRIx64
                  ") does not match its index entry or checksum; reported missing",
                  j->files[it->file]->rec_path, it->e.offset, it->e.key.hi, it->e.key.lo);
        r->status = KILN_ECORRUPT_RECORD;
        return false;
    }
    r->size = head.size;
    r->codec = head.codec;
    r->stages = head.stages;
    r->raw_size = head.raw_size;
    r->status = KILN_OK;
    if (!head.size)
        return false; /* an empty payload has no data */
    uint64_t tag = PAYLOAD_TAG;
    memcpy(payload - 16, &tag, sizeof(tag));
    memcpy(payload - 8, &b, sizeof(b));
    r->data = payload;
    return true;
}

static struct block *block_new(uint64_t bytes)
{
    size_t n = sizeof(struct block) + (size_t)bytes;
    struct block *b = kiln__cache_alloc_big(n);
    if (b) {
        atomic_init(&b->refs, 0);
        b->bytes = n;
    }
    return b;
}

static void block_free(struct block *b)
{
    if (b)
        kiln__cache_free_big(b, (size_t)b->bytes);
}

/* Hands a block to the payloads that point into it (or frees it). */
static void block_publish(struct block *b, unsigned refs)
{
    if (refs)
        atomic_store(&b->refs, refs);
    else
        block_free(b);
}

/* Reads one record into a block of its own. */
static void load_one(struct job *j, int fd, const struct item *it)
{
    struct kiln_cache_result *r = &j->res[it->slot];
    const struct kiln_cache *c = j->files[it->file];
    struct block *b = block_new(rec_len(&it->e));
    if (!b) {
        r->status = KILN_ENOMEM;
        return;
    }
    int rc = kiln_io_read_full(c->io, fd, b->data, (size_t)rec_len(&it->e), it->e.offset);
    if (rc < 0) {
        KILN_WARN("cache",
                  "%s: reading the record at offset %" PRIu64 " failed (%s); reported "
                  "missing",
                  c->rec_path, it->e.offset, kiln_strerror(rc));
        r->status = rc == KILN_EIO_SHORTREAD ? KILN_ECORRUPT_RECORD : rc;
        block_free(b);
        return;
    }
    block_publish(b, finish(j, it, b, b->data));
}

/* Reads a run into one block: batch after batch, each one pread. */
static void load_run(struct job *j, int fd, const struct run *run)
{
    const struct kiln_io *io = j->files[j->items[run->first].file]->io;
    uint64_t total = 0;
    for (size_t i = run->first; i < run->last; i++)
        total += rec_len(&j->items[i].e);
    struct block *b = run->last - run->first > 1 ? block_new(total) : NULL;
    if (!b) {
        for (size_t i = run->first; i < run->last; i++)
            load_one(j, fd, &j->items[i]);
        return;
    }
    unsigned refs = 0;
    uint64_t pos = 0;
    size_t i = run->first;
    while (i < run->last) {
        /* A batch: this record and the ones right after it in the file. */
        uint64_t start = j->items[i].e.offset, end = start + rec_len(&j->items[i].e);
        size_t k = i + 1;
        while (k < run->last && j->items[k].e.offset == end &&
               end + rec_len(&j->items[k].e) - start <= BATCH_BYTES)
            end += rec_len(&j->items[k++].e);
        unsigned char *at = b->data + pos;
        int rc = kiln_io_read_full(io, fd, at, (size_t)(end - start), start);
        for (size_t m = i; m < k; m++) {
            if (rc == KILN_OK)
                refs += finish(j, &j->items[m], b, at + (j->items[m].e.offset - start));
            else
                load_one(j, fd, &j->items[m]);
        }
        pos += end - start;
        i = k;
    }
    block_publish(b, refs);
}

/*
 * Opens the records file of job file `f` for one loader thread. By path,
 * so that it has a read-ahead state of its own, when the path still names
 * the file the handle opened (the same file id in its header); when
 * another process has rewritten the cache since (compact, prune, repack
 * rename a new file over the path), the handle's own descriptor, which
 * still reads the file its index describes. @return 0 with *fd (*own:
 * close it after), or the error.
 */
static int loader_fd(struct job *j, unsigned f, int *fd, bool *own)
{
    struct kiln_cache *c = j->files[f];
    const struct kiln_io *io = c->io;
    *own = false;
    int h;
    int rc = io->open(io, c->rec_path, KILN_IO_READ | KILN_IO_NOFOLLOW, &h);
    if (rc == KILN_OK) {
        unsigned char hb[KILN__CACHE_HEADER_SIZE];
        struct kiln__cache_header head;
        if (kiln_io_read_full(io, h, hb, sizeof(hb), 0) == KILN_OK &&
            kiln__cache_header_decode(hb, sizeof(hb), KILN__CACHE_REC_MAGIC, &head) ==
                KILN__HEADER_OK &&
            memcmp(head.file_id, c->header.file_id, sizeof(head.file_id)) == 0) {
            *fd = h;
            *own = true;
            return KILN_OK;
        }
        io->close(io, h);
    }
    if (c->rec_fd < 0)
        return rc < 0 ? rc : KILN_EIO_OPEN;
    if (!(atomic_fetch_or(&j->replaced, 1u << f) & (1u << f)))
        KILN_INFO("cache", "%s: replaced since the open (%s); reading the file this handle opened",
                  c->rec_path, rc < 0 ? kiln_strerror(rc) : "another file id");
    *fd = c->rec_fd;
    return KILN_OK;
}

/* One worker's descriptors, one per file, opened at its first run there. */
struct loader {
    int fd[MAX_FILES];
    int rc[MAX_FILES]; /* 1: not opened yet */
    bool own[MAX_FILES];
};

/* @return the descriptor for file `f`, or the error opening it (one
 * warning line; the first such error is the job's fatal one). */
static int loader_get(struct job *j, struct loader *l, unsigned f)
{
    if (l->rc[f] > 0) {
        l->rc[f] = loader_fd(j, f, &l->fd[f], &l->own[f]);
        if (l->rc[f] < 0) {
            KILN_WARN("cache", "%s: a loader could not open the records: %s", j->files[f]->rec_path,
                      kiln_strerror(l->rc[f]));
            int zero = 0;
            atomic_compare_exchange_strong(&j->fatal, &zero, l->rc[f]);
        }
    }
    return l->rc[f] < 0 ? l->rc[f] : l->fd[f];
}

static void worker(void *arg)
{
    struct job *j = arg;
    struct loader l;
    for (unsigned f = 0; f < MAX_FILES; f++) {
        l.rc[f] = 1;
        l.own[f] = false;
    }
    for (;;) {
        size_t r = atomic_fetch_add(&j->next_run, 1);
        if (r >= j->nruns)
            break;
        int fd = loader_get(j, &l, j->items[j->runs[r].first].file);
        if (fd < 0) {
            for (size_t m = j->runs[r].first; m < j->runs[r].last; m++)
                j->res[j->items[m].slot].status = fd;
            continue;
        }
        load_run(j, fd, &j->runs[r]);
    }
    for (unsigned f = 0; f < j->nfiles; f++)
        if (l.own[f])
            j->files[f]->io->close(j->files[f]->io, l.fd[f]);
}

/* The caller's results need room for the payload pointer, which
 * kiln_cache_results_free and kiln_cache_payload_free give back. */
static int result_size_ok(size_t size)
{
    if (size >= offsetof(struct kiln_cache_result, data) + sizeof(void *))
        return KILN_OK;
    KILN_ERROR("abi", "kiln_cache_result: element size %zu is too small", size);
    return KILN_EINVAL;
}

/* Lays the library's results out at the caller's stride (docs/abi.md,
 * "Arrays"); `res` is freed either way (its payloads move over).
 * @return the caller's array, or NULL (ENOMEM: res's payloads freed). */
static struct kiln_cache_result *results_at_stride(struct kiln_cache_result *res, size_t n,
                                                   size_t stride)
{
    if (stride == sizeof(*res))
        return res;
    struct kiln_cache_result *out = kiln__calloc(n ? n : 1, stride);
    if (!out) {
        kiln_cache_results_free_sized(res, n, sizeof(*res));
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        kiln__elem_out(out, stride, i, &res[i], sizeof(res[i]));
    kiln__free(res);
    return out;
}

/*
 * Looks every key up, in the cache and then, for the keys still not found,
 * in each layer in order, under each file's lock in turn, and makes an
 * item of each in the file that holds it first (its use marked there).
 * Every result gets its key, and KILN_ENOTFOUND when no file holds it.
 * The caller holds every file's gate. @return the items made.
 */
static size_t look_up(struct job *j, const struct kiln_key *keys, size_t n)
{
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
        j->res[i].key = keys[i];
        j->res[i].status = KILN_ENOTFOUND;
    }
    for (unsigned f = 0; f < j->nfiles && found < n; f++) {
        struct kiln_cache *c = j->files[f];
        pthread_rwlock_rdlock(&c->lock);
        for (size_t i = 0; i < n; i++) {
            if (j->res[i].status != KILN_ENOTFOUND)
                continue;
            int64_t e = kiln__cache_lookup(c, keys[i]);
            if (e < 0)
                continue;
            j->items[found] = (struct item){.e = c->entries[e], .slot = i, .file = f};
            kiln__cache_touch(c, (size_t)e); /* in memory only: written at sync/close */
            j->res[i].status = KILN_OK;      /* the worker that reads it says how it went */
            found++;
        }
        pthread_rwlock_unlock(&c->lock);
    }
    return found;
}

/* Sorts the items file by file in file order and cuts them into runs of
 * up to RUN_BYTES, none spanning two files. */
static void cut_runs(struct job *j, size_t found)
{
    qsort(j->items, found, sizeof(*j->items), by_place);
    j->nruns = 0;
    for (size_t i = 0; i < found;) {
        uint64_t bytes = 0;
        size_t k = i;
        while (k < found && (k == i || (j->items[k].file == j->items[i].file &&
                                        bytes + rec_len(&j->items[k].e) <= RUN_BYTES)))
            bytes += rec_len(&j->items[k++].e);
        j->runs[j->nruns++] = (struct run){i, k};
        i = k;
    }
}

/*
 * Takes (or gives back) every file's gate for reading, in search order
 * (back in the reverse order). Under KILN_CACHE_BROKEN_GATE, the negative
 * control of the test cache_cap_threads.loads_while_evicting, none is
 * taken: an eviction may then rewrite the cache between the look-ups and
 * the reads, which the test must catch.
 */
static void gates(struct job *j, bool take)
{
#ifdef KILN_CACHE_BROKEN_GATE
    (void)j;
    (void)take;
#else
    if (take)
        for (unsigned f = 0; f < j->nfiles; f++)
            pthread_rwlock_rdlock(&j->files[f]->gate);
    else
        for (unsigned f = j->nfiles; f-- > 0;)
            pthread_rwlock_unlock(&j->files[f]->gate);
#endif
}

static int64_t load_many_body(struct kiln_cache *c, const struct kiln_key *keys, size_t n,
                              unsigned threads, size_t result_size,
                              struct kiln_cache_result **results)
{
    if (!results)
        return KILN_EINVAL;
    *results = NULL;
    if (!c || (n && !keys))
        return KILN_EINVAL;
    KILN_TRY(result_size_ok(result_size));
    struct job j = {.files = {c}, .nfiles = 1 + c->nlayers};
    for (unsigned l = 0; l < c->nlayers; l++)
        j.files[1 + l] = c->layers[l];
    j.res = kiln__calloc(n ? n : 1, sizeof(*j.res));
    j.items = kiln__malloc((n ? n : 1) * sizeof(*j.items));
    j.runs = kiln__malloc((n ? n : 1) * sizeof(*j.runs));
    if (!j.res || !j.items || !j.runs) {
        kiln__free(j.res);
        kiln__free(j.items);
        kiln__free(j.runs);
        return KILN_ENOMEM;
    }
    atomic_init(&j.next_run, 0);
    atomic_init(&j.fatal, 0);
    atomic_init(&j.replaced, 0);
    /* The entries taken here must stay their files' until the workers are
     * done: no eviction may rewrite one meanwhile. */
    gates(&j, true);
    size_t found = look_up(&j, keys, n);
    cut_runs(&j, found);
    unsigned want = threads ? threads : c->threads;
    want = KILN_MIN(want, KILN_POOL_MAX_READERS);
    if (want > j.nruns)
        want = j.nruns ? (unsigned)j.nruns : 1;
    /* One pass over every file's runs; the calling thread works too, on
     * the application's executor when the open was given one. */
    __atomic_fetch_add(&c->load_passes, 1, __ATOMIC_RELAXED);
    kiln__exec_run(c->has_executor ? &c->executor : NULL, want, worker, &j);
    gates(&j, false);

    kiln__free(j.items);
    kiln__free(j.runs);
    int fatal = atomic_load(&j.fatal);
    int64_t loaded = 0;
    for (size_t i = 0; i < n; i++)
        loaded += j.res[i].status == KILN_OK;
    if (fatal < 0 && loaded == 0 && found > 0) {
        kiln_cache_results_free_sized(j.res, n, sizeof(*j.res));
        return fatal;
    }
    *results = results_at_stride(j.res, n, result_size);
    return *results ? loaded : KILN_ENOMEM;
}

int64_t kiln_cache_load_many_sized(struct kiln_cache *c, const struct kiln_key *keys, size_t n,
                                   unsigned threads, size_t result_size,
                                   struct kiln_cache_result **results)
{
    uint64_t m = kiln__err_mark();
    int64_t got = load_many_body(c, keys, n, threads, result_size, results);
    if (got < 0)
        KILN__CACHE_END(c, m, "kiln_cache_load_many", (int)got);
    return got;
}

static int cache_get(struct kiln_cache *c, struct kiln_key key, struct kiln_cache_result *result)
{
    memset(result, 0, sizeof(*result));
    result->key = key;
    struct item it = {.slot = 0};
    pthread_rwlock_rdlock(&c->lock);
    int64_t e = kiln__cache_lookup(c, key);
    if (e >= 0) {
        it.e = c->entries[e];
        kiln__cache_touch(c, (size_t)e);
    }
    pthread_rwlock_unlock(&c->lock);
    if (e < 0) {
        for (unsigned l = 0; l < c->nlayers; l++)
            if (cache_get(c->layers[l], key, result) != KILN_ENOTFOUND)
                return result->status;
        return result->status = KILN_ENOTFOUND;
    }
    /* One pread on the handle's own descriptor into a block of its own, so
     * the payload keeps only its record alive. */
    struct job j = {.files = {c}, .nfiles = 1, .res = result};
    atomic_init(&j.fatal, 0);
    atomic_init(&j.replaced, 0);
    load_one(&j, c->rec_fd, &it);
    return result->status;
}

static int get_body(struct kiln_cache *c, struct kiln_key key, size_t result_size,
                    struct kiln_cache_result *result)
{
    if (!c || !result)
        return KILN_EINVAL;
    KILN_TRY(result_size_ok(result_size));
    struct kiln_cache_result r;
    pthread_rwlock_rdlock(&c->gate); /* no eviction moves the record under the read */
    int rc = cache_get(c, key, &r);
    pthread_rwlock_unlock(&c->gate);
    memset(result, 0, result_size);
    kiln__elem_out(result, result_size, 0, &r, sizeof(r));
    return rc;
}

int kiln_cache_get_sized(struct kiln_cache *c, struct kiln_key key, size_t result_size,
                         struct kiln_cache_result *result)
{
    uint64_t m = kiln__err_mark();
    int rc = get_body(c, key, result_size, result);
    return rc == KILN_ENOTFOUND ? rc : KILN__CACHE_END(c, m, "kiln_cache_get", rc);
}

void kiln_cache_payload_free(void *data)
{
    if (!data)
        return;
    unsigned char *p = data;
    uint64_t tag;
    struct block *b;
    memcpy(&tag, p - 16, sizeof(tag));
    memcpy(&b, p - 8, sizeof(b));
    assert(tag == PAYLOAD_TAG && "not a payload loaded by kiln_cache_load_many");
    if (atomic_fetch_sub(&b->refs, 1) == 1)
        block_free(b);
}

void kiln_cache_results_free_sized(struct kiln_cache_result *results, size_t n, size_t result_size)
{
    if (!results || result_size_ok(result_size) < 0)
        return;
    for (size_t i = 0; i < n; i++)
        kiln_cache_payload_free(
            ((const struct kiln_cache_result *)((unsigned char *)results + i * result_size))->data);
    kiln__free(results);
}
