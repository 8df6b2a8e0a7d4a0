/* pdes.c: a parallel discrete event simulation engine (Time Warp) and its synthetic models, written
 * afresh for clusterbench. An application benchmark: a latency-bound, irregular MPI workload.
 *
 * Model (per logical process, LP; LPs 0..L-1 in contiguous blocks over the ranks: LP g lives on
 * rank floor(g R / L)). Every event schedules exactly one new event, so the event population is
 * constant (L x start-events); an event is never processed at or after --end.
 *   phold: an event at t sends one event to an LP drawn uniformly from ALL LPs with probability
 *          --remote (it may be its own rank, as ROSS's and Fujimoto's PHOLD), otherwise to itself,
 *          at t + lookahead + Exp(mean). State: the RNG counter, the send counter, the checksum.
 *   qnet:  a closed queueing network: each LP is a first-come-first-served server; an event is a
 *          job arriving at t; it starts at max(t, busy_until), is served for Exp(mean), and leaves
 *          at depart; it goes on (same routing as phold) to arrive at depart + lookahead. The
 *          state adds busy_until, the total wait and a 64-bin histogram of waits (about 300 B, so
 *          that saving state costs something).
 * Start: each LP sends itself start-events events at Exp(mean) + lookahead.
 *
 * Determinism. Randomness is counter based (SplitMix64 of the LP's key and its draw counter; the
 * counter is part of the LP's state, so restoring a state restores the stream). Events are ordered
 * by (timestamp, source LP, source's send counter): a total order that does not depend on the
 * partition, so every engine commits the same history for each LP. Each LP folds every event it
 * processes (timestamp bits, source, sequence and, for qnet, busy_until) into a checksum kept in
 * its state; the digest is the sum over LPs of a mix of (LP, checksum, count).
 *
 * Engines (--sync):
 *   sequential   one rank; one heap; no saving.
 *   conservative synchronous windows (lookahead based): every rank processes the events below
 *                LBTS + lookahead, where LBTS is the global minimum pending timestamp after all
 *                messages are delivered; a new event is at least lookahead later than its cause,
 *                so nothing can arrive in the past. Needs lookahead > 0.
 *   optimistic   Time Warp (Jefferson): each rank processes its lowest event as soon as it has it;
 *                copy state saving before every event; a straggler (an event below the LP's last
 *                processed one) rolls the LP back, restoring the saved state and cancelling what the
 *                undone events sent (aggressive cancellation: anti-messages to other ranks, local
 *                events cancelled in place, rolling their LPs back if processed: secondary
 *                rollbacks). Anti-messages travel on the same communicator and tag as the events,
 *                after them, so MPI's non-overtaking rule delivers each after its event.
 *                Optimism is bounded: no event at or beyond GVT + --window is processed.
 * GVT (both parallel engines): synchronous, every --gvt-interval scheduler iterations (each polls
 * the network and processes up to --batch events): all ranks flush their send buffers and receive
 * until the global sum of (events sent - received), an MPI_Allreduce, is zero (no message in
 * flight; receiving may roll back and send anti-messages, which the next round counts); then GVT =
 * MPI_Allreduce(MIN) of every rank's lowest pending timestamp. Fossil collection commits and frees
 * every processed event below GVT. The run ends when GVT >= --end.
 * Messages to one rank are packed (32 B each) into buffers sent with MPI_Isend at the end of each
 * iteration (or when full); receives use MPI_Iprobe + MPI_Recv.
 *
 * Validation (every run): processed = committed + rolled back; the committed count equals the sum
 * of the LPs' counts; no event below --end is left; the events left (at or beyond --end) are
 * exactly L x start-events (the population is constant: a lost or duplicated event, e.g. a lost
 * anti-message, breaks it). Python also compares the digest and the committed count with the
 * sequential engine's for the same model.
 *
 * Args: --model=phold|qnet --lps=L --remote=P --lookahead=D --mean=M --start-events=K --end=T
 *       --sync=sequential|conservative|optimistic --batch=B --gvt-interval=G --window=W
 *       --event-memory=MiB (per rank) --repeat=N --seed=S
 *       test hooks: --drop-anti=N (rank 0 does not send its N-th anti-message), --hang-rank=R
 *       --hang-after=S (rank R stops answering S seconds into the first repeat)
 * Output (rank 0): info (placement), then per repeat a validation record (the checks above) and
 *       one result record {"metric":"pdes","samples":[runtime_s],...} with the counts, the runtime
 *       and the digest; then done.
 */
#include "cb_common.h"
#include "cb_mpi.h"

#include <inttypes.h>
#include <mpi.h>

/* Timestamps are computed exactly as written (no fused multiply-add), so that a replay of the
 * model in another language (the tests' Python) gives the same bits. */
#pragma GCC optimize("fp-contract=off")

#define TAG_EV 7
#define QBINS 64
#define MSGS_PER_BUF 256

/* ---------------------------------------------------------------- parameters and state */
static int rank, nranks;
static int model_qnet;           /* 0 phold, 1 qnet */
static long long L;              /* LPs in all */
static double remote_p, lookahead, mean_d, end_t, window_t;
static int start_events, batch, gvt_interval;
static int sync_mode;            /* 0 sequential, 1 conservative, 2 optimistic */
static uint64_t seed;
static long long drop_anti = -1, antis_seen;
static int hang_rank = -1;
static double hang_after = 0, run_t0;

static long long first_lp, n_local; /* my LPs: first_lp .. first_lp + n_local - 1 */

typedef struct {
    uint64_t rng, seq, sum, count;
} lphdr_t;
typedef struct {
    lphdr_t h;
    double busy_until, wait_sum;
    uint32_t hist[QBINS];
} qstate_t;

static size_t ssz;               /* bytes of one LP's state */
static unsigned char *states;    /* n_local states */
static uint64_t *lpkey;          /* per local LP: the RNG key (constant) */

#define ST(i) ((lphdr_t *)(states + (size_t)(i) * ssz))

enum { FREE = 0, PENDING, PROCESSED, CANCELLED };

typedef struct ev ev_t;
struct ev {
    double ts;
    uint64_t seq;
    uint32_t dest, src;
    ev_t *hnext;                 /* hash chain of events received from other ranks; free list */
    uint8_t status, remote, has_child;
    /* the event this one sent: local (an event here) or remote (dest, seq, ts for the anti) */
    ev_t *child;
    double child_ts;
    uint64_t child_seq;
    uint32_t child_dest;
    unsigned char saved[];       /* the LP's state before this event (optimistic only) */
};
static size_t evsz;

/* ---------------------------------------------------------------- RNG (counter based) */
static inline uint64_t mix64(uint64_t z) {
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ull;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z;
}
static inline uint64_t draw(lphdr_t *s, uint64_t key) { return mix64(key + (++s->rng) * 0x9e3779b97f4a7c15ull); }
/* uniform on (0, 1), never 0 nor 1 */
static inline double unif(uint64_t x) { return ((double)(x >> 11) + 0.5) * 0x1p-53; }
static inline double expo(uint64_t x, double m) { return -m * log(unif(x)); }

/* g < L <= 4e9 < 2^32 and nranks < 2^31: g x nranks < 2^63, exact in 64 bits (no __int128 on 32-bit targets) */
static inline int rank_of(uint64_t g) { return (int)((g * (uint64_t)(unsigned)nranks) / (uint64_t)L); }
/* the high 64 bits of a x b: a 64-bit draw scaled to [0, b) (Lemire's multiply-shift) */
static inline uint64_t mulhi64(uint64_t a, uint64_t b) {
#if defined(__SIZEOF_INT128__)
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
#else /* armhf: four 32 x 32 -> 64 products, the same value */
    uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
    uint64_t p0 = al * bl, p1 = al * bh, p2 = ah * bl, p3 = ah * bh;
    uint64_t mid = (p0 >> 32) + (uint32_t)p1 + (uint32_t)p2;
    return p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
#endif
}
static inline long long first_of(int r) { return ((long long)r * L + nranks - 1) / nranks; }

/* ---------------------------------------------------------------- event memory */
static ev_t *free_list;
static long long pool_cap, pool_used, pool_peak, pool_alloc;
static void **chunks;
static int nchunks, chunks_cap;
#define CHUNK 65536

static void pool_reset(void) {
    for (int i = 0; i < nchunks; i++) free(chunks[i]);
    nchunks = 0;
    free_list = NULL;
    pool_used = pool_peak = pool_alloc = 0;
}
static inline ev_t *ev_new(void) {
    if (!free_list) {
        if (pool_alloc >= pool_cap) return NULL;
        long long n = pool_cap - pool_alloc < CHUNK ? pool_cap - pool_alloc : CHUNK;
        unsigned char *c = malloc((size_t)n * evsz);
        if (!c) return NULL;
        if (nchunks == chunks_cap) {
            chunks_cap = chunks_cap ? 2 * chunks_cap : 64;
            chunks = realloc(chunks, (size_t)chunks_cap * sizeof *chunks);
            if (!chunks) cb_mpi_die("out of memory");
        }
        chunks[nchunks++] = c;
        for (long long i = n - 1; i >= 0; i--) {
            ev_t *e = (ev_t *)(c + (size_t)i * evsz);
            e->hnext = free_list;
            free_list = e;
        }
        pool_alloc += n;
    }
    ev_t *e = free_list;
    free_list = e->hnext;
    if (++pool_used > pool_peak) pool_peak = pool_used;
    e->hnext = NULL;
    e->has_child = 0;
    e->remote = 0;
    e->child = NULL;
    return e;
}
static inline void ev_free(ev_t *e) {
    e->status = FREE;
    e->hnext = free_list;
    free_list = e;
    pool_used--;
}
static void out_of_memory(void) {
    cb_mpi_die("the %s run exhausted its event memory (%lld events per rank): raise --event-memory%s",
               sync_mode == 2 ? "optimistic" : sync_mode == 1 ? "conservative" : "sequential", pool_cap,
               sync_mode == 2 ? " or lower --window" : " or lower --lps or --start-events");
}
static inline ev_t *ev_need(void) {
    ev_t *e = ev_new();
    if (!e) out_of_memory();
    return e;
}

/* ---------------------------------------------------------------- pending heap */
typedef struct {
    double ts;
    uint64_t seq;
    uint32_t src;
    ev_t *e;
} hent_t;
static hent_t *heap;
static long long hn, hcap;

static inline int hless(const hent_t *a, const hent_t *b) {
    if (a->ts != b->ts) return a->ts < b->ts;
    if (a->src != b->src) return a->src < b->src;
    return a->seq < b->seq;
}
static inline void heap_push(ev_t *e) {
    if (hn == hcap) {
        hcap = hcap ? 2 * hcap : 1024;
        heap = realloc(heap, (size_t)hcap * sizeof *heap);
        if (!heap) cb_mpi_die("out of memory (pending heap)");
    }
    hent_t x = {e->ts, e->seq, e->src, e};
    long long i = hn++;
    while (i > 0) {
        long long p = (i - 1) >> 1;
        if (!hless(&x, &heap[p])) break;
        heap[i] = heap[p];
        i = p;
    }
    heap[i] = x;
}
static inline void heap_pop(void) {
    hent_t x = heap[--hn];
    long long i = 0;
    for (;;) {
        long long c = 2 * i + 1;
        if (c >= hn) break;
        if (c + 1 < hn && hless(&heap[c + 1], &heap[c])) c++;
        if (!hless(&heap[c], &x)) break;
        heap[i] = heap[c];
        i = c;
    }
    if (hn) heap[i] = x;
}
/* The lowest live pending event (cancelled ones are freed on the way), or NULL. */
static inline ev_t *heap_top(void) {
    while (hn) {
        ev_t *e = heap[0].e;
        if (e->status != CANCELLED) return e;
        heap_pop();
        ev_free(e);
    }
    return NULL;
}

/* ---------------------------------------------------------------- per-LP processed lists */
typedef struct {
    ev_t **v;
    long long head, tail, cap;
    double last_ts;              /* conservative: the last processed timestamp (causality check) */
} plist_t;
static plist_t *plist;

static inline void plist_push(plist_t *p, ev_t *e) {
    if (p->tail == p->cap) {
        if (p->head > 0 && p->head >= p->cap / 2) {
            memmove(p->v, p->v + p->head, (size_t)(p->tail - p->head) * sizeof *p->v);
            p->tail -= p->head;
            p->head = 0;
        } else {
            p->cap = p->cap ? 2 * p->cap : 16;
            p->v = realloc(p->v, (size_t)p->cap * sizeof *p->v);
            if (!p->v) cb_mpi_die("out of memory (processed lists)");
        }
    }
    p->v[p->tail++] = e;
}

/* key(a) < key(b) */
static inline int kless(double ta, uint32_t sa, uint64_t qa, double tb, uint32_t sb, uint64_t qb) {
    if (ta != tb) return ta < tb;
    if (sa != sb) return sa < sb;
    return qa < qb;
}

/* ---------------------------------------------------------------- hash of events from other ranks */
static ev_t **hbuckets;
static uint64_t hmask;
static inline uint64_t hkey(uint32_t src, uint64_t seq) { return mix64(((uint64_t)src << 40) ^ seq) & hmask; }
static inline void hash_put(ev_t *e) {
    uint64_t b = hkey(e->src, e->seq);
    e->hnext = hbuckets[b];
    hbuckets[b] = e;
}
static inline void hash_del(ev_t *e) {
    ev_t **pp = &hbuckets[hkey(e->src, e->seq)];
    while (*pp && *pp != e) pp = &(*pp)->hnext;
    if (*pp) *pp = e->hnext;
    e->hnext = NULL;
}
static inline ev_t *hash_find(uint32_t src, uint64_t seq, uint32_t dest) {
    for (ev_t *e = hbuckets[hkey(src, seq)]; e; e = e->hnext)
        if (e->src == src && e->seq == seq && e->dest == dest) return e;
    return NULL;
}

/* ---------------------------------------------------------------- messages */
typedef struct {
    double ts;
    uint64_t seq;
    uint32_t dest, src;
    uint32_t anti, pad;
} msg_t;
typedef struct {
    msg_t *buf;
    int n;
} outbuf_t;
static outbuf_t *outb;
typedef struct {
    MPI_Request req;
    msg_t *buf;
} inflight_t;
static inflight_t *infl;
static int ninfl, infl_cap;
static msg_t **spare;
static int nspare, spare_cap;
static msg_t *rbuf;
static int *node_of;

/* statistics of one repeat (this rank) */
static long long st_processed, st_rolled, st_rb_primary, st_rb_secondary, st_anti, st_remote, st_offnode,
    st_sent, st_recv, st_committed, st_gvt_rounds, st_blocked;
static double st_gvt_time, st_gvt_max;

static void reap_sends(int wait) {
    if (!ninfl) return;
    for (;;) {
        int any = 0;
        for (int i = 0; i < ninfl;) {
            int flag = 0;
            MPI_Test(&infl[i].req, &flag, MPI_STATUS_IGNORE);
            if (flag) {
                if (nspare == spare_cap) {
                    spare_cap = spare_cap ? 2 * spare_cap : 16;
                    spare = realloc(spare, (size_t)spare_cap * sizeof *spare);
                }
                spare[nspare++] = infl[i].buf;
                infl[i] = infl[--ninfl];
                any = 1;
            } else {
                i++;
            }
        }
        if (!wait || any || !ninfl) break;
    }
}
static msg_t *get_buf(void) {
    if (nspare) return spare[--nspare];
    msg_t *b = malloc(MSGS_PER_BUF * sizeof(msg_t));
    if (!b) cb_mpi_die("out of memory (message buffers)");
    return b;
}
static void flush_to(int r) {
    outbuf_t *o = &outb[r];
    if (!o->n) return;
    if (ninfl == infl_cap) {
        reap_sends(0);
        if (ninfl == infl_cap) {
            infl_cap = infl_cap ? 2 * infl_cap : 64;
            infl = realloc(infl, (size_t)infl_cap * sizeof *infl);
            if (!infl) cb_mpi_die("out of memory (requests)");
        }
    }
    MPI_Isend(o->buf, o->n * (int)sizeof(msg_t), MPI_BYTE, r, TAG_EV, MPI_COMM_WORLD, &infl[ninfl].req);
    infl[ninfl++].buf = o->buf;
    st_sent += o->n;
    o->buf = get_buf();
    o->n = 0;
}
static void flush_all(void) {
    for (int r = 0; r < nranks; r++)
        if (outb[r].n) flush_to(r);
    reap_sends(0);
}
static inline void send_msg(int r, double ts, uint32_t dest, uint32_t src, uint64_t seq, int anti) {
    outbuf_t *o = &outb[r];
    msg_t *m = &o->buf[o->n++];
    m->ts = ts;
    m->seq = seq;
    m->dest = dest;
    m->src = src;
    m->anti = (uint32_t)anti;
    m->pad = 0;
    if (!anti && node_of[r] != node_of[rank]) st_offnode++; /* events that left the node (not antis) */
    if (o->n == MSGS_PER_BUF) flush_to(r);
}

/* ---------------------------------------------------------------- the models */
/* Process e on local LP i: fold it into the checksum, draw, and fill the new event's
 * (dest, ts, seq). */
static inline void handle(ev_t *e, long long i, uint32_t *dest, double *ts, uint64_t *seq) {
    lphdr_t *s = ST(i);
    uint64_t key = lpkey[i];
    uint64_t tsbits;
    memcpy(&tsbits, &e->ts, 8);
    uint64_t fold = tsbits ^ ((uint64_t)e->src << 32) ^ (e->seq * 0xd6e8feb86659fd93ull);
    double base = e->ts;
    if (model_qnet) {
        qstate_t *q = (qstate_t *)s;
        double start = e->ts > q->busy_until ? e->ts : q->busy_until;
        double wait = start - e->ts;
        q->busy_until = start + expo(draw(s, key), mean_d);
        q->wait_sum += wait;
        int bin = (int)(wait / mean_d * 4.0);
        q->hist[bin < QBINS - 1 ? bin : QBINS - 1]++;
        uint64_t bb;
        memcpy(&bb, &q->busy_until, 8);
        fold ^= mix64(bb);
        base = q->busy_until;
    }
    s->sum = mix64(s->sum ^ fold);
    s->count++;
    uint64_t g = first_lp + (uint64_t)i;
    if (unif(draw(s, key)) <= remote_p)
        g = mulhi64(draw(s, key), (uint64_t)L);
    *dest = (uint32_t)g;
    *ts = model_qnet ? base + lookahead : base + lookahead + expo(draw(s, key), mean_d);
    *seq = s->seq++;
}

/* ---------------------------------------------------------------- Time Warp */
static void rollback_to(long long i, double ts, uint32_t src, uint64_t seq);
static void undo_through(long long i, ev_t *target);

static inline long long local_index(uint32_t g) { return (long long)g - first_lp; }

/* A local event being cancelled: rolled back first if its LP processed it. */
static void cancel_local(ev_t *c) {
    if (c->status == PROCESSED) {
        undo_through(local_index(c->dest), c);
        st_rb_secondary++;
    }
    if (c->remote) hash_del(c);
    c->status = CANCELLED; /* in the heap: freed when it comes to the top */
}

static inline void undo_one(long long i, ev_t *e) {
    memcpy(ST(i), e->saved, ssz);
    if (e->has_child) {
        if (e->child) {
            cancel_local(e->child);
        } else {
            antis_seen++;
            st_anti++;
            if (!(rank == 0 && antis_seen == drop_anti))
                send_msg(rank_of(e->child_dest), e->child_ts, e->child_dest, e->dest, e->child_seq, 1);
            else
                st_anti--;
        }
        e->has_child = 0;
        e->child = NULL;
    }
    e->status = PENDING;
    heap_push(e);
    st_rolled++;
}
/* Undo LP i's processed events after key (ts, src, seq). */
static void rollback_to(long long i, double ts, uint32_t src, uint64_t seq) {
    plist_t *p = &plist[i];
    while (p->tail > p->head) {
        ev_t *e = p->v[p->tail - 1];
        if (!kless(ts, src, seq, e->ts, e->src, e->seq)) break;
        p->tail--;
        undo_one(i, e);
    }
}
/* Undo LP i's processed events down to and including target. */
static void undo_through(long long i, ev_t *target) {
    plist_t *p = &plist[i];
    while (p->tail > p->head) {
        ev_t *e = p->v[--p->tail];
        undo_one(i, e);
        if (e == target) return;
    }
    cb_mpi_die("internal error: a processed event was not in its LP's list");
}

/* A new event for local LP i (from here or from another rank): a straggler rolls the LP back. */
static inline void deliver(ev_t *e) {
    long long i = local_index(e->dest);
    plist_t *p = &plist[i];
    if (sync_mode == 2 && p->tail > p->head) {
        ev_t *last = p->v[p->tail - 1];
        if (kless(e->ts, e->src, e->seq, last->ts, last->src, last->seq)) {
            rollback_to(i, e->ts, e->src, e->seq);
            st_rb_primary++;
        }
    } else if (sync_mode == 1 && e->ts < p->last_ts) {
        cb_mpi_die("conservative engine: event at %.17g for LP %u after its LP reached %.17g (causality)", e->ts,
                   e->dest, p->last_ts);
    }
    e->status = PENDING;
    heap_push(e);
}

static void on_message(const msg_t *m) {
    st_recv++;
    if (rank_of(m->dest) != rank) cb_mpi_die("message for LP %u reached rank %d", m->dest, rank);
    if (m->anti) {
        ev_t *e = hash_find(m->src, m->seq, m->dest);
        if (!e) cb_mpi_die("anti-message (LP %u, #%" PRIu64 ") without its event on rank %d", m->src, m->seq, rank);
        if (e->status == PROCESSED) {
            undo_through(local_index(e->dest), e);
            st_rb_secondary++;
        }
        hash_del(e);
        e->remote = 0;
        e->status = CANCELLED;
        return;
    }
    ev_t *e = ev_need();
    e->ts = m->ts;
    e->seq = m->seq;
    e->dest = m->dest;
    e->src = m->src;
    if (sync_mode == 2) {
        e->remote = 1;
        hash_put(e);
    }
    deliver(e);
}

static void poll_recv(void) {
    for (;;) {
        int flag = 0;
        MPI_Status stt;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_EV, MPI_COMM_WORLD, &flag, &stt);
        if (!flag) break;
        int bytes = 0;
        MPI_Get_count(&stt, MPI_BYTE, &bytes);
        MPI_Recv(rbuf, bytes, MPI_BYTE, stt.MPI_SOURCE, TAG_EV, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int n = bytes / (int)sizeof(msg_t);
        for (int k = 0; k < n; k++) on_message(&rbuf[k]);
    }
}

/* Process e (popped) on its LP; optimistic: state saved and the event kept for rollback. */
static inline void process(ev_t *e, int save) {
    long long i = local_index(e->dest);
    if (save) memcpy(e->saved, ST(i), ssz);
    uint32_t dest;
    double ts;
    uint64_t seq;
    handle(e, i, &dest, &ts, &seq);
    st_processed++;
    int r = rank_of(dest);
    if (save) {
        e->status = PROCESSED;
        plist_push(&plist[i], e);
        e->has_child = 1;
        if (r == rank) {
            ev_t *c = ev_need();
            c->ts = ts;
            c->seq = seq;
            c->dest = dest;
            c->src = e->dest;
            e->child = c;
            deliver(c);
        } else {
            e->child = NULL;
            e->child_ts = ts;
            e->child_seq = seq;
            e->child_dest = dest;
            st_remote++;
            send_msg(r, ts, dest, e->dest, seq, 0);
        }
    } else {
        plist[i].last_ts = e->ts;
        if (r == rank) { /* reuse the event for its successor */
            uint32_t src = e->dest;
            e->ts = ts;
            e->seq = seq;
            e->dest = dest;
            e->src = src;
            e->status = PENDING;
            heap_push(e);
        } else {
            st_remote++;
            send_msg(r, ts, dest, e->dest, seq, 0);
            ev_free(e);
        }
    }
}

/* Commit and free every processed event below gvt. */
static void fossil_collect(double gvt) {
    for (long long i = 0; i < n_local; i++) {
        plist_t *p = &plist[i];
        while (p->head < p->tail && p->v[p->head]->ts < gvt) {
            ev_t *e = p->v[p->head++];
            if (e->remote) hash_del(e);
            ev_free(e);
            st_committed++;
        }
        if (p->head == p->tail) p->head = p->tail = 0;
    }
}

static double gvt_round(void) {
    double t0 = MPI_Wtime();
    for (;;) {
        flush_all();
        poll_recv();
        flush_all();
        long long d = st_sent - st_recv, sum = 0;
        MPI_Allreduce(&d, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (sum == 0) break;
    }
    ev_t *top = heap_top();
    double lmin = top ? top->ts : INFINITY, gvt = 0;
    MPI_Allreduce(&lmin, &gvt, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    if (sync_mode == 2) fossil_collect(gvt);
    double dt = MPI_Wtime() - t0;
    st_gvt_time += dt;
    if (dt > st_gvt_max) st_gvt_max = dt;
    st_gvt_rounds++;
    return gvt;
}

static void maybe_hang(void) {
    if (rank == hang_rank && MPI_Wtime() - run_t0 >= hang_after)
        for (;;) pause();
}

static void run_sequential(void) {
    for (;;) {
        if (!hn) break;
        ev_t *e = heap[0].e;
        if (e->ts >= end_t) break;
        heap_pop();
        process(e, 0);
    }
}

static void run_conservative(void) {
    long long k = 0;
    for (;;) {
        if (hang_rank >= 0) maybe_hang();
        double gvt = gvt_round();
        if (gvt >= end_t) break;
        double limit = gvt + lookahead < end_t ? gvt + lookahead : end_t;
        for (;;) {
            ev_t *e = heap_top();
            if (!e || e->ts >= limit) break;
            heap_pop();
            process(e, 0);
            if ((++k & 255) == 0) poll_recv();
        }
    }
}

static void run_optimistic(void) {
    double gvt = 0;
    long long iter = 0, reserve = pool_cap / 16 > 64 ? pool_cap / 16 : 64;
    int stuck = 0;
    for (;;) {
        if (hang_rank >= 0) maybe_hang();
        poll_recv();
        int blocked = 0;
        for (int n = 0; n < batch; n++) {
            ev_t *e = heap_top();
            if (!e || e->ts >= end_t || e->ts >= gvt + window_t) break;
            if (pool_cap - pool_used < reserve && e->ts > gvt) {
                blocked = 1;
                break;
            }
            heap_pop();
            process(e, 1);
        }
        flush_all();
        if (++iter % gvt_interval == 0) {
            double g = gvt_round();
            int any_blocked = 0;
            MPI_Allreduce(&blocked, &any_blocked, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (any_blocked) st_blocked++;
            stuck = (any_blocked && g <= gvt) ? stuck + 1 : 0;
            if (stuck >= 20) out_of_memory();
            gvt = g;
            if (gvt >= end_t) break;
        }
    }
}

/* ---------------------------------------------------------------- setup, one repeat */
static void init_repeat(void) {
    pool_reset();
    hn = 0;
    memset(states, 0, (size_t)n_local * ssz);
    for (long long i = 0; i < n_local; i++) {
        plist[i].head = plist[i].tail = 0;
        plist[i].last_ts = -INFINITY;
    }
    memset(hbuckets, 0, (hmask + 1) * sizeof *hbuckets);
    st_processed = st_rolled = st_rb_primary = st_rb_secondary = st_anti = st_remote = st_offnode = 0;
    st_sent = st_recv = st_committed = st_gvt_rounds = st_blocked = 0;
    st_gvt_time = st_gvt_max = 0;
    antis_seen = 0;
    for (long long i = 0; i < n_local; i++) {
        lphdr_t *s = ST(i);
        if (model_qnet) ((qstate_t *)s)->busy_until = 0;
        for (int k = 0; k < start_events; k++) {
            ev_t *e = ev_need();
            e->ts = expo(draw(s, lpkey[i]), mean_d) + lookahead;
            e->src = e->dest = (uint32_t)(first_lp + i);
            e->seq = s->seq++;
            e->status = PENDING;
            heap_push(e);
        }
    }
}

static void node_ids(void) {
    char name[CB_HOST_LEN] = {0};
    const char *sim = getenv("CB_SIM_NODE");
    if (sim && *sim) snprintf(name, sizeof name, "%s", sim);
    else gethostname(name, sizeof name - 1);
    uint64_t h = 1469598103934665603ull;
    for (const char *c = name; *c; c++) h = (h ^ (uint64_t)(unsigned char)*c) * 1099511628211ull;
    uint64_t *all = malloc((size_t)nranks * sizeof *all);
    node_of = malloc((size_t)nranks * sizeof *node_of);
    if (!all || !node_of) cb_mpi_die("out of memory");
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 0; r < nranks; r++) {
        node_of[r] = r;
        for (int q = 0; q < r; q++)
            if (all[q] == all[r]) { node_of[r] = node_of[q]; break; }
    }
    free(all);
}

static const char *sync_names[] = {"sequential", "conservative", "optimistic"};

static void info_extra(const void *arg) {
    (void)arg;
    cb_json_str("model", model_qnet ? "qnet" : "phold");
    cb_json_str("sync", sync_names[sync_mode]);
    cb_json_int("lps", L);
    cb_json_int("state_bytes", (long long)ssz);
    cb_json_int("event_bytes", (long long)evsz);
    cb_json_int("event_memory_events", pool_cap);
}

int main(int argc, char **argv) {
    cb_mpi_start(&argc, &argv, &rank, &nranks, 0);
    const char *model = "phold", *sync = "optimistic";
    L = 1024;
    remote_p = 0.25;
    lookahead = 1.0;
    mean_d = 1.0;
    start_events = 1;
    end_t = 10000;
    batch = 16;
    gvt_interval = 16;
    window_t = INFINITY;
    double mem_mib = 256;
    int repeat = 1;
    seed = 1;
    drop_anti = -1;
    hang_rank = -1;
    hang_after = 0;
    CB_OPTIONS(argc, argv, CB_OPT("model", model), CB_OPT("sync", sync), CB_OPT("lps", L),
               CB_OPT("remote", remote_p), CB_OPT("lookahead", lookahead), CB_OPT("mean", mean_d),
               CB_OPT("start-events", start_events), CB_OPT("end", end_t), CB_OPT("batch", batch),
               CB_OPT("gvt-interval", gvt_interval), CB_OPT("window", window_t),
               CB_OPT("event-memory", mem_mib), CB_OPT("repeat", repeat), CB_OPT("seed", seed),
               CB_OPT("drop-anti", drop_anti), CB_OPT("hang-rank", hang_rank),
               CB_OPT("hang-after", hang_after));

    if (!strcmp(model, "phold")) model_qnet = 0;
    else if (!strcmp(model, "qnet")) model_qnet = 1;
    else cb_mpi_die("unknown --model %s (phold, qnet)", model);
    if (!strcmp(sync, "sequential")) sync_mode = 0;
    else if (!strcmp(sync, "conservative")) sync_mode = 1;
    else if (!strcmp(sync, "optimistic")) sync_mode = 2;
    else cb_mpi_die("unknown --sync %s", sync);
    if (L < 1 || L > 4000000000LL) cb_mpi_die("--lps %lld: 1 .. 4e9", L);
    if (L < nranks) cb_mpi_die("--lps %lld: fewer LPs than the %d ranks", L, nranks);
    if (!(remote_p >= 0 && remote_p <= 1)) cb_mpi_die("--remote %g is outside [0, 1]", remote_p);
    if (!(mean_d > 0) || !(end_t > 0) || !(lookahead >= 0)) cb_mpi_die("--mean and --end must be > 0, --lookahead >= 0");
    if (sync_mode == 1 && !(lookahead > 0)) cb_mpi_die("--sync conservative needs --lookahead > 0");
    if (sync_mode == 0 && nranks != 1) cb_mpi_die("--sync sequential runs on one rank (%d launched)", nranks);
    if (!(window_t > 0)) cb_mpi_die("--window must be > 0");
    if (start_events < 1 || batch < 1 || gvt_interval < 1 || repeat < 1) cb_mpi_die("bad counts");

    first_lp = first_of(rank);
    n_local = first_of(rank + 1) - first_lp;
    ssz = model_qnet ? sizeof(qstate_t) : sizeof(lphdr_t);
    evsz = sizeof(ev_t) + (sync_mode == 2 ? ssz : 0);
    evsz = (evsz + 15) & ~(size_t)15;
    pool_cap = (long long)(mem_mib * 1048576.0 / (double)evsz);
    if (pool_cap < (long long)n_local * start_events + 64)
        cb_mpi_die("--event-memory %g MiB holds %lld events per rank; the %lld LPs here need %lld to start: raise "
                   "--event-memory or lower --lps", mem_mib, pool_cap, n_local, n_local * start_events + 64);
    states = calloc((size_t)n_local, ssz);
    lpkey = malloc((size_t)n_local * sizeof *lpkey);
    plist = calloc((size_t)n_local, sizeof *plist);
    uint64_t nb = 1024;
    while (nb < (uint64_t)pool_cap && nb < (1ull << 26)) nb <<= 1;
    hmask = nb - 1;
    hbuckets = calloc(nb, sizeof *hbuckets);
    outb = calloc((size_t)nranks, sizeof *outb);
    rbuf = malloc(MSGS_PER_BUF * sizeof(msg_t));
    if (!states || !lpkey || !plist || !hbuckets || !outb || !rbuf) cb_mpi_die("out of memory (--lps %lld)", L);
    for (int r = 0; r < nranks; r++) outb[r].buf = get_buf();
    for (long long i = 0; i < n_local; i++) lpkey[i] = mix64(seed * 0x9e3779b97f4a7c15ull ^ mix64((uint64_t)(first_lp + i) + 1));

    cb_mpi_report_placement(rank, nranks, info_extra, NULL);
    node_ids();

    for (int rep = 0; rep < repeat; rep++) {
        init_repeat();
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        run_t0 = t0;
        if (sync_mode == 0) run_sequential();
        else if (sync_mode == 1) run_conservative();
        else run_optimistic();
        double mine = MPI_Wtime() - t0;
        while (ninfl) reap_sends(1);
        hang_rank = -1;

        /* what is left and what was committed */
        if (sync_mode != 2) st_committed = st_processed;
        long long left = 0, below = 0, lpcount = 0;
        for (long long k = 0; k < hn; k++) {
            ev_t *e = heap[k].e;
            if (e->status == CANCELLED) continue;
            left++;
            if (e->ts < end_t) below++;
        }
        uint64_t digest = 0;
        for (long long i = 0; i < n_local; i++) {
            lphdr_t *s = ST(i);
            lpcount += (long long)s->count;
            digest += mix64((uint64_t)(first_lp + i) * 0xff51afd7ed558ccdull ^ mix64(s->sum ^ (s->count << 1)));
        }
        long long loc[16] = {st_processed, st_rolled, st_rb_primary, st_rb_secondary, st_anti, st_remote,
                             st_offnode, st_committed, st_gvt_rounds, left, below, lpcount, st_blocked,
                             pool_peak, st_sent, st_recv};
        long long tot[16];
        MPI_Reduce(loc, tot, 16, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        uint64_t dig = 0;
        MPI_Reduce(&digest, &dig, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        double dl[4] = {mine, st_gvt_time, st_gvt_max, (double)(pool_peak * (long long)evsz)}, dmax[4], dsum[4];
        MPI_Reduce(dl, dmax, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(dl, dsum, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        long long mycommitted = st_committed, *per = rank == 0 ? malloc((size_t)nranks * sizeof *per) : NULL;
        MPI_Gather(&mycommitted, 1, MPI_LONG_LONG, per, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            long long expect_left = L * start_events;
            const char *why = NULL;
            if (tot[0] != tot[7] + tot[1]) why = "processed != committed + rolled back";
            else if (tot[7] != tot[11]) why = "the committed count differs from the LPs' own counts";
            else if (tot[10] != 0) why = "events below --end were left unprocessed";
            else if (tot[9] != expect_left) why = "the event population changed (an event lost or duplicated)";
            double state_bytes = (double)L * (double)ssz;
            char detail[256];
            snprintf(detail, sizeof detail, "%s %s repeat %d: %s", model_qnet ? "qnet" : "phold", sync_names[sync_mode],
                     rep, why ? why : "processed = committed + rolled back, nothing below --end left, population kept");
            cb_validation(why == NULL, detail);
            cb_json_begin("result");
            cb_json_str("metric", "pdes");
            cb_json_int("repeat", rep);
            cb_json_bool("ok", why == NULL);
            if (why) cb_json_str("why", why);
            cb_json_num("runtime_s", dmax[0]);
            cb_json_nums("samples", &dmax[0], 1);
            cb_json_int("committed", tot[7]);
            cb_json_int("processed", tot[0]);
            cb_json_int("rolled_back", tot[1]);
            cb_json_int("rollbacks_primary", tot[2]);
            cb_json_int("rollbacks_secondary", tot[3]);
            cb_json_int("anti_messages", tot[4]);
            cb_json_int("remote_events", tot[5]);
            cb_json_int("offnode_messages", tot[6]);
            cb_json_int("messages_sent", tot[14]);
            cb_json_int("gvt_rounds", nranks ? tot[8] / nranks : 0);
            cb_json_num("gvt_time_max_s", dmax[1]);
            cb_json_num("gvt_time_mean_s", dsum[1] / nranks);
            cb_json_num("gvt_round_max_s", dmax[2]);
            cb_json_int("memory_blocked_rounds", nranks ? tot[12] / nranks : 0);
            cb_json_num("event_memory_peak_bytes_max", dmax[3]);
            cb_json_num("memory_bytes", dsum[3] + state_bytes);
            cb_json_int("events_left", tot[9]);
            cb_json_int("events_left_expected", expect_left);
            char hex[32];
            snprintf(hex, sizeof hex, "%016" PRIx64, dig);
            cb_json_str("digest", hex);
            cb_json_key("committed_per_rank");
            putchar('[');
            for (int r = 0; r < nranks; r++) printf(r ? ",%lld" : "%lld", per[r]);
            putchar(']');
            cb_json_end();
            free(per);
        }
    }
    return cb_mpi_finish(rank, -1);
}
