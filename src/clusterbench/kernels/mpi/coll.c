/* coll.c: MPI collectives latency, the OSU Micro-Benchmarks' way (osu_allreduce, osu_bcast, ...;
 * osu_i<op> for --nonblocking), with every result checked against its definition.
 *
 * Placement first (cb_mpi_report_placement): one info record before any timing.
 *
 * Ops (--ops=a,b,...): allreduce, bcast, alltoall, allgather, reduce, reduce-scatter, gather,
 * scatter, barrier. Reductions (allreduce, reduce, reduce-scatter) sum MPI_DOUBLEs (a size must be
 * a multiple of 8 B); the others move MPI_BYTEs. Sizes (--sizes, bytes) are OSU's, as osu_<op>
 * prints them:
 *   allreduce, reduce, bcast: the whole buffer of every rank;
 *   reduce-scatter: the whole send vector of every rank; its size/8 elements are split as OSU's
 *     osu_reduce_scatter splits them (size/8/P each, the first (size/8) % P ranks one more);
 *   allgather, gather: what every rank contributes (the receive buffer is P x size);
 *   alltoall: the block a rank sends to each rank (buffers P x size);
 *   scatter: the block every rank receives (the root sends P x size);
 *   barrier: no data (one "size", 0).
 * Roots (bcast, reduce, gather, scatter): rank 0.
 *
 * Timing (OSU's): per (op, size) a barrier, --warmup untimed iterations (they also estimate the
 * time of one iteration, from which rank 0 sets the count: --time_budget seconds, between
 * --min_iters and --max_iters, the same on every rank; from the second half of the warm-up), then each iteration is
 * t0 = MPI_Wtime(); collective; t1 = MPI_Wtime(); MPI_Barrier (outside the timed region). Every
 * rank keeps its per-iteration times; the latency is each rank's average over the iterations,
 * then the average over ranks (OSU's "Avg Latency"), with the min and max over ranks of those
 * averages (OSU -f; IMB's t_min/t_max/t_avg); P50/P99 are over the iterations of the slowest
 * rank's time in each iteration (the max over ranks, per iteration). The same buffers are reused
 * in every iteration (OSU and IMB reuse theirs; no cache flush: small messages run from cache).
 *
 * Validation: inputs are a deterministic function of (rank, index, iteration): on iteration 0 and
 * every --validate_every-th one, each rank fills its inputs with that iteration's values and
 * clears its result (outside the timer, before the barrier that precedes the iteration), then
 * after the timed collective checks its result against the op's definition (outside the timer,
 * after it; the fill and check cost nothing in the timed region, but the checked iteration runs
 * with inputs the rank has just written, warm in its cache). Reductions use small integers, so
 * sums are exact in binary floating point. A wrong element on any rank ends the run: rank 0
 * prints a failed validation record naming op, size, rank, element, value and definition, and
 * every rank finalizes and exits with status 3. Barrier moves no data: nothing to check.
 * Test hooks: --corrupt=OP:ITER[:RANK] damages RANK's result (default the last rank; the root for
 * reduce and gather) of OP after iteration ITER (counted from the first timed iteration, so it is
 * caught when ITER is 0 or a multiple of --validate_every); --debug=N prints, per (op, size), a
 * debug record with every rank's checksum of its result of iteration 0 (the sum of its doubles, or
 * of its bytes) and rank 0's first N result elements, for a cross-check in Python.
 *
 * --nonblocking=1: OSU's osu_i<op> method. First the pure collective (I<op> + MPI_Wait, timed as
 * above) gives each rank's pure communication time t_pure; then each iteration starts the
 * collective, computes for t_pure seconds (a busy loop calibrated once per run, no MPI_Test in it),
 * waits, all timed: t_total per iteration, t_compute the compute part. Averages over iterations,
 * then over ranks; overlap % = max(0, 100 - 100 x (t_total - t_compute) / t_pure) (OSU 7.4's
 * print_stats_nbc, without probes so its MPI_Test time is 0). The latency is then t_total (OSU's
 * "Overall"); min/max/percentiles are of t_total.
 *
 * --p2p=1: after the collectives, a ping-pong sweep between rank 0 and rank P-1 (0 B and the
 * powers of two up to the largest size), half round trip in us (the network model's input; the
 * other ranks wait asleep, see sleepy_barrier). After, not before: run first, this traffic and the
 * links' changed what the collectives measured (8 virtual nodes over TCP: reduce from 256 KiB in
 * half the time a fresh launch such as OSU's takes; speed/logs/coll-osu-8-reduce-*.txt), so the
 * collectives start from the launch's own state, as a peer's do;
 * printed as {"type":"p2p","pair":[0,P-1],"size_bytes":[...],"half_rtt_us":[...]}.
 *
 * --links=R0,R1,...: (one rank per node, given by the caller) after the p2p sweep, a ping-pong
 * between every pair of those ranks, one pair at a time (the others wait at a barrier, asleep), at 8 B
 * and LINK_BYTES (256 KiB: beyond a tc tbf burst), each round trip timed on its own: per pair a record
 * {"type":"link","pair":[Ri,Rj],"size_bytes":[8,262144],"mean_us":[..],"min_us":[..],
 * "median_us":[..]} (half round trips, us). Which node is slow is judged in Python
 * (analysis/links.py): a node whose every link is slow, not the pair 0 - P-1 the model is fitted on.
 *
 * Records (rank 0): per (op, size) a validation record, then a result record with metric
 * "latency" whose params hold op, size, iterations, warmup, avg_us, min_us, max_us, p50_us,
 * p99_us (and t_total/t_compute/t_pure/overlap with --nonblocking) and samples the per-iteration
 * max-over-ranks times (us, evenly subsampled to --max_samples).
 *
 * Args: --ops=LIST --sizes=LIST --time_budget=S --min_iters=N --max_iters=N --warmup=N
 *       --validate_every=K --nonblocking=0|1 --p2p=0|1 --p2p_budget=S --max_samples=N
 *       --links=R0,R1,... --corrupt=OP:ITER[:RANK] --debug=N
 */
#include "cb_common.h"
#include "cb_mpi.h"

#include <mpi.h>

#define MAX_SIZES 64
#define MAX_OPS 16
#define P2P_TAG 7
#define LINK_BYTES 262144
#define LINK_MAX_ITERS 2000
#define MAX_LINK_RANKS 1024

#define die cb_mpi_die

enum op_id { ALLREDUCE, BCAST, ALLTOALL, ALLGATHER, REDUCE, REDUCE_SCATTER, GATHER, SCATTER, BARRIER, NOPS };
static const char *OP_NAMES[NOPS] = {"allreduce", "bcast", "alltoall", "allgather", "reduce",
                                     "reduce-scatter", "gather", "scatter", "barrier"};

static int rank, nranks;

static int is_reduction(int op) { return op == ALLREDUCE || op == REDUCE || op == REDUCE_SCATTER; }

/* ---- inputs: a deterministic function of (rank, index, iteration) ------------------------ */
/* doubles: small integers (-16..47), so sums over up to 2^40 ranks are exact */
static inline double dval(long r, long i, long it) { return (double)((r * 31 + i * 7 + it * 13) % 64) - 16.0; }
/* bytes */
static inline unsigned char bval(long r, long i, long it) { return (unsigned char)((r * 29 + i * 131 + it * 7 + 1) & 0xff); }

/* reduce-scatter's split of n elements over P ranks (OSU's): n/P each, the first n%P one more */
static long rs_count(long n, int r) { return n / nranks + (r < n % nranks ? 1 : 0); }
static long rs_offset(long n, int r) { return (long)r * (n / nranks) + (r < n % nranks ? r : n % nranks); }

typedef struct {
    unsigned char *send, *recv;
    int *counts; /* reduce-scatter's receive counts */
} bufs_t;

/* Fill this rank's inputs for iteration `it` and clear its result. */
static void fill(int op, long size, long it, bufs_t *b) {
    long n = size / 8;
    double *sd = (double *)b->send, *rd = (double *)b->recv;
    switch (op) {
    case ALLREDUCE: case REDUCE: case REDUCE_SCATTER:
        for (long i = 0; i < n; i++) sd[i] = dval(rank, i, it);
        for (long i = 0; i < n; i++) rd[i] = -1e300;
        break;
    case BCAST: /* one buffer: the root's data, cleared elsewhere */
        for (long i = 0; i < size; i++) b->send[i] = rank == 0 ? bval(0, i, it) : 0;
        break;
    case ALLGATHER: case GATHER:
        for (long i = 0; i < size; i++) b->send[i] = bval(rank, i, it);
        memset(b->recv, 0, (size_t)(size * nranks));
        break;
    case ALLTOALL: /* block d goes to rank d: the values of (rank, d * size + j) */
        for (long i = 0; i < size * nranks; i++) b->send[i] = bval(rank, i, it);
        memset(b->recv, 0, (size_t)(size * nranks));
        break;
    case SCATTER: /* the root's P blocks; every rank receives block `rank` */
        if (rank == 0) for (long i = 0; i < size * nranks; i++) b->send[i] = bval(0, i, it);
        memset(b->recv, 0, (size_t)size);
        break;
    default: break;
    }
}

/* The collective, blocking or started (then *req is set). */
static void start(int op, long size, bufs_t *b, int nb, MPI_Request *req) {
    int n8 = (int)(size / 8), nbyte = (int)size;
    MPI_Comm w = MPI_COMM_WORLD;
    switch (op) {
    case ALLREDUCE:
        if (nb) MPI_Iallreduce(b->send, b->recv, n8, MPI_DOUBLE, MPI_SUM, w, req);
        else MPI_Allreduce(b->send, b->recv, n8, MPI_DOUBLE, MPI_SUM, w);
        break;
    case REDUCE:
        if (nb) MPI_Ireduce(b->send, b->recv, n8, MPI_DOUBLE, MPI_SUM, 0, w, req);
        else MPI_Reduce(b->send, b->recv, n8, MPI_DOUBLE, MPI_SUM, 0, w);
        break;
    case REDUCE_SCATTER:
        if (nb) MPI_Ireduce_scatter(b->send, b->recv, b->counts, MPI_DOUBLE, MPI_SUM, w, req);
        else MPI_Reduce_scatter(b->send, b->recv, b->counts, MPI_DOUBLE, MPI_SUM, w);
        break;
    case BCAST:
        if (nb) MPI_Ibcast(b->send, nbyte, MPI_BYTE, 0, w, req);
        else MPI_Bcast(b->send, nbyte, MPI_BYTE, 0, w);
        break;
    case ALLGATHER:
        if (nb) MPI_Iallgather(b->send, nbyte, MPI_BYTE, b->recv, nbyte, MPI_BYTE, w, req);
        else MPI_Allgather(b->send, nbyte, MPI_BYTE, b->recv, nbyte, MPI_BYTE, w);
        break;
    case ALLTOALL:
        if (nb) MPI_Ialltoall(b->send, nbyte, MPI_BYTE, b->recv, nbyte, MPI_BYTE, w, req);
        else MPI_Alltoall(b->send, nbyte, MPI_BYTE, b->recv, nbyte, MPI_BYTE, w);
        break;
    case GATHER:
        if (nb) MPI_Igather(b->send, nbyte, MPI_BYTE, b->recv, nbyte, MPI_BYTE, 0, w, req);
        else MPI_Gather(b->send, nbyte, MPI_BYTE, b->recv, nbyte, MPI_BYTE, 0, w);
        break;
    case SCATTER:
        if (nb) MPI_Iscatter(b->send, nbyte, MPI_BYTE, b->recv, nbyte, MPI_BYTE, 0, w, req);
        else MPI_Scatter(b->send, nbyte, MPI_BYTE, b->recv, nbyte, MPI_BYTE, 0, w);
        break;
    case BARRIER:
        if (nb) MPI_Ibarrier(w, req);
        else MPI_Barrier(w);
        break;
    default: break;
    }
}

/* The elements of this rank's result: pointer, count, doubles or bytes (0 elements: no result). */
static long result_view(int op, long size, bufs_t *b, unsigned char **p, int *dbl) {
    long n = size / 8;
    *dbl = is_reduction(op);
    *p = b->recv;
    switch (op) {
    case ALLREDUCE: return n;
    case REDUCE: return rank == 0 ? n : 0;
    case REDUCE_SCATTER: return rs_count(n, rank);
    case BCAST: *p = b->send; return rank == 0 ? 0 : size; /* the root's buffer is its input */
    case ALLGATHER: case ALLTOALL: return size * nranks;
    case GATHER: return rank == 0 ? size * nranks : 0;
    case SCATTER: return size;
    default: return 0;
    }
}

/* Element k of this rank's result as the op defines it, for iteration `it`. */
static double expected(int op, long size, long k, long it) {
    long n = size / 8;
    switch (op) {
    case ALLREDUCE: case REDUCE: case REDUCE_SCATTER: {
        long i = op == REDUCE_SCATTER ? rs_offset(n, rank) + k : k;
        double s = 0;
        for (int r = 0; r < nranks; r++) s += dval(r, i, it);
        return s;
    }
    case BCAST: return bval(0, k, it);
    case ALLGATHER: case GATHER: return bval(k / size, k % size, it);                  /* block r from rank r */
    case ALLTOALL: return bval(k / size, (long)rank * size + k % size, it);           /* rank r's block for me */
    case SCATTER: return bval(0, (long)rank * size + k, it);
    default: return 0;
    }
}

static int corrupt_op = -1, corrupt_rank = -1;
static long corrupt_iter = -1;

/* Check this rank's result; on a wrong element every rank learns it and rank 0 names it. */
typedef struct { double got, want; long index; int bad; int pad; } verdict_t;

static void check(int op, long size, long it, bufs_t *b) {
    unsigned char *p;
    int dbl;
    long n = result_view(op, size, b, &p, &dbl);
    if (op == corrupt_op && it == corrupt_iter && rank == corrupt_rank && n > 0) {
        if (dbl) ((double *)p)[n / 2] += 1.0;
        else p[n / 2] ^= 0x5a;
    }
    verdict_t v = {0, 0, -1, 0, 0};
    for (long k = 0; k < n; k++) {
        double got = dbl ? ((double *)p)[k] : (double)p[k];
        double want = expected(op, size, k, it);
        if (got != want) { v.got = got; v.want = want; v.index = k; v.bad = 1; break; }
    }
    verdict_t *all = rank == 0 ? malloc(sizeof *all * (size_t)nranks) : NULL;
    MPI_Gather(&v, (int)sizeof v, MPI_BYTE, all, (int)sizeof v, MPI_BYTE, 0, MPI_COMM_WORLD);
    int bad_rank = -1;
    if (rank == 0)
        for (int r = nranks - 1; r >= 0; r--) if (all[r].bad) bad_rank = r; /* the first wrong rank */
    /* every rank learns the verdict and ends cleanly: an MPI_Abort right after the record could
     * kill the launcher's output forwarding before the record reaches it */
    MPI_Bcast(&bad_rank, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (bad_rank >= 0) {
        if (rank == 0) {
            const verdict_t *w = &all[bad_rank];
            char detail[512];
            snprintf(detail, sizeof detail, "%s %ld B: rank %d's result differs from the definition at element %ld "
                     "(got %.17g, expected %.17g) on iteration %ld of %d ranks", OP_NAMES[op], size, bad_rank,
                     w->index, w->got, w->want, it, nranks);
            cb_json_begin("validation");
            cb_json_bool("ok", 0);
            cb_json_bool("checked", 1);
            cb_json_str("op", OP_NAMES[op]);
            cb_json_int("size", size);
            cb_json_int("rank", bad_rank);
            cb_json_str("detail", detail);
            cb_json_end();
        }
        MPI_Finalize();
        exit(3);
    }
    free(all);
}

/* --debug: every rank's checksum of its result, rank 0's first `nfirst` elements */
static void debug_record(int op, long size, bufs_t *b, int nfirst) {
    unsigned char *p;
    int dbl;
    long n = result_view(op, size, b, &p, &dbl);
    double sum = 0;
    for (long k = 0; k < n; k++) sum += dbl ? ((double *)p)[k] : (double)p[k];
    double *sums = rank == 0 ? malloc(sizeof(double) * (size_t)nranks) : NULL;
    MPI_Gather(&sum, 1, MPI_DOUBLE, sums, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank != 0) return;
    long m = n < nfirst ? n : nfirst;
    double first[64];
    for (long k = 0; k < m && k < 64; k++) first[k] = dbl ? ((double *)p)[k] : (double)p[k];
    cb_json_begin("debug");
    cb_json_str("op", OP_NAMES[op]);
    cb_json_int("size", size);
    cb_json_nums("checksums", sums, nranks);
    cb_json_nums("first", first, (int)(m < 64 ? m : 64));
    cb_json_end();
    free(sums);
}

/* ---- the compute loop of --nonblocking, calibrated once -------------------------------- */
static volatile double sink;
static double loops_per_s;

static void compute_loops(long n) {
    double x = 1.0, y = 1e-9;
    for (long i = 0; i < n; i++) { x = x * 0.999999 + y; }
    sink = x;
}
static void calibrate(void) {
    long n = 1000;
    for (;;) {
        double t0 = MPI_Wtime();
        compute_loops(n);
        double t = MPI_Wtime() - t0;
        if (t > 0.02 || n > CB_ITERS_MAX) { loops_per_s = (double)n / t; return; }
        n *= 4;
    }
}

/* ---- per (op, size) ------------------------------------------------------------------- */
typedef struct {
    double time_budget;
    long min_iters, max_iters, warmup, validate_every, max_samples;
    int nonblocking, debug;
} conf_t;

/* One timed phase: iters iterations; per-iteration totals in t (s), compute parts in tc (s). */
static void timed(int op, long size, bufs_t *b, const conf_t *c, long iters, int overlap, double pure_s,
                  double *t, double *tc) {
    long comp = overlap ? (long)(pure_s * loops_per_s) : 0;
    for (long it = 0; it < iters; it++) {
        int checked = op != BARRIER && (it == 0 || (c->validate_every > 0 && it % c->validate_every == 0));
        if (checked) fill(op, size, it, b);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Request req;
        double t0 = MPI_Wtime(), tc0 = 0, tc1 = 0;
        start(op, size, b, c->nonblocking, &req);
        if (c->nonblocking) {
            if (overlap) {
                tc0 = MPI_Wtime();
                compute_loops(comp);
                tc1 = MPI_Wtime();
            }
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        double t1 = MPI_Wtime();
        t[it] = t1 - t0;
        if (tc) tc[it] = tc1 - tc0;
        if (checked) {
            check(op, size, it, b);
            if (it == 0 && c->debug > 0 && !overlap) debug_record(op, size, b, c->debug);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static double mean(const double *v, long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += v[i];
    return n > 0 ? s / (double)n : 0;
}

/* nearest-rank percentile of a sorted array */
static double pct(const double *sorted, long n, double q) {
    long k = (long)ceil(q * (double)n) - 1;
    return sorted[k < 0 ? 0 : (k >= n ? n - 1 : k)];
}

static void run_size(int op, long size, bufs_t *b, const conf_t *c, double *t, double *tc, double *tmax,
                     double *sub) {
    long n8 = size / 8;
    if (op == REDUCE_SCATTER)
        for (int r = 0; r < nranks; r++) b->counts[r] = (int)rs_count(n8, r);
    fill(op, size, 0, b);
    MPI_Barrier(MPI_COMM_WORLD);
    /* warm-up (untimed for the results), which also estimates one iteration (with its barrier) */
    double w0 = MPI_Wtime();
    for (long i = 0; i < c->warmup; i++) {
        if (i == c->warmup / 2) w0 = MPI_Wtime(); /* the first half settles connections and caches */
        MPI_Request req;
        start(op, size, b, c->nonblocking, &req);
        if (c->nonblocking) MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    double per = c->warmup > 0 ? (MPI_Wtime() - w0) / (double)(c->warmup - c->warmup / 2) : 0;
    long iters = c->max_iters;
    if (rank == 0) {
        double est = per > 0 ? c->time_budget / per : (double)c->max_iters;
        iters = est > (double)c->max_iters ? c->max_iters : (long)est;
        if (iters < c->min_iters) iters = c->min_iters;
    }
    MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);

    double pure = 0, overlap_pct = 0, total_avg = 0, comp_avg = 0;
    timed(op, size, b, c, iters, 0, 0, t, NULL); /* blocking, or the pure non-blocking collective */
    double mine = mean(t, iters);
    if (c->nonblocking) {
        /* OSU: each rank computes for its own pure communication time */
        double pure_sum = 0, tot_sum = 0, comp_sum = 0;
        MPI_Reduce(&mine, &pure_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        timed(op, size, b, c, iters, 1, mine, t, tc);
        double tot = mean(t, iters), cmp = mean(tc, iters);
        MPI_Reduce(&tot, &tot_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&cmp, &comp_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        pure = pure_sum / nranks;
        total_avg = tot_sum / nranks;
        comp_avg = comp_sum / nranks;
        overlap_pct = pure > 0 ? 100.0 - 100.0 * (total_avg - comp_avg) / pure : 0;
        if (overlap_pct < 0) overlap_pct = 0;
        mine = tot;
    }
    double avg = 0, mn = 0, mx = 0;
    MPI_Reduce(&mine, &avg, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(t, tmax, (int)iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank != 0) return;
    avg /= nranks;
    for (long i = 0; i < iters; i++) tmax[i] *= 1e6;
    long m = iters < c->max_samples ? iters : c->max_samples;
    for (long i = 0; i < m; i++) sub[i] = tmax[(long)((double)i * (double)iters / (double)m)];
    qsort(tmax, (size_t)iters, sizeof *tmax, cb_cmp_double);
    long checks = op == BARRIER ? 0 : 1 + (c->validate_every > 0 ? (iters - 1) / c->validate_every : 0);
    char detail[256];
    if (op == BARRIER)
        snprintf(detail, sizeof detail, "barrier: no data to check");
    else
        snprintf(detail, sizeof detail, "%s %ld B: %ld of %ld iterations%s checked on every rank, all correct",
                 OP_NAMES[op], size, checks, iters, c->nonblocking ? " (of each phase)" : "");
    cb_json_begin("validation");
    cb_json_bool("ok", 1);
    cb_json_bool("checked", op != BARRIER);
    cb_json_str("detail", detail);
    cb_json_end();
    char params[1024];
    int w = snprintf(params, sizeof params,
                     "{\"op\":\"%s\",\"size\":%ld,\"iterations\":%ld,\"warmup\":%ld,\"avg_us\":%.9g,\"min_us\":%.9g,"
                     "\"max_us\":%.9g,\"p50_us\":%.9g,\"p99_us\":%.9g,\"checked_iterations\":%ld,\"samples_kept\":%ld",
                     OP_NAMES[op], size, iters, c->warmup, avg * 1e6, mn * 1e6, mx * 1e6, pct(tmax, iters, 0.5),
                     pct(tmax, iters, 0.99), checks, m);
    if (c->nonblocking)
        w += snprintf(params + w, sizeof params - (size_t)w,
                      ",\"pure_comm_us\":%.9g,\"compute_us\":%.9g,\"overall_us\":%.9g,\"overlap_pct\":%.9g",
                      pure * 1e6, comp_avg * 1e6, total_avg * 1e6, overlap_pct);
    snprintf(params + w, sizeof params - (size_t)w, "}");
    cb_json_begin("result");
    cb_json_str("metric", "latency");
    cb_json_str("unit", "us");
    cb_json_raw("params", params);
    cb_json_nums("samples", sub, (int)m);
    cb_json_end();
}

/* A barrier that sleeps while it waits: the ranks outside the measured pair must leave the cores
 * to it (on a shared or oversubscribed machine, ranks spinning in MPI_Barrier would slow it). */
static void sleepy_barrier(void) {
    MPI_Request req;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    while (!done) {
        struct timespec ts = {0, 200000}; /* 0.2 ms */
        nanosleep(&ts, NULL);
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
}

/* ---- the ping-pong sweep between rank 0 and rank P-1 ------------------------------------ */
static void pingpong(int first, int peer, unsigned char *buf, int n) {
    if (first) {
        MPI_Send(buf, n, MPI_BYTE, peer, P2P_TAG, MPI_COMM_WORLD);
        MPI_Recv(buf, n, MPI_BYTE, peer, P2P_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(buf, n, MPI_BYTE, peer, P2P_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, n, MPI_BYTE, peer, P2P_TAG, MPI_COMM_WORLD);
    }
}

static void p2p_sweep(long max_size, double budget, unsigned char *buf) {
    const int last = nranks - 1, me_in = rank == 0 || rank == last;
    long sizes[48];
    double half[48];
    int ns = 0;
    sizes[ns++] = 0;
    for (long s = 1; s <= max_size && ns < 48; s *= 2) sizes[ns++] = s;
    for (int k = 0; k < ns; k++) {
        int n = (int)sizes[k];
        long iters = 0;
        sleepy_barrier();
        if (me_in) {
            int peer = rank == 0 ? last : 0;
            double w0 = MPI_Wtime();
            for (int i = 0; i < 4; i++) pingpong(rank == 0, peer, buf, n); /* untimed, estimates the round trip */
            if (rank == 0) { /* the count: the budget's worth, 10 .. 10000, told to the peer once */
                double rtt = (MPI_Wtime() - w0) / 4;
                double est = rtt > 0 ? budget / rtt : 10000;
                iters = est > 10000 ? 10000 : (est < 10 ? 10 : (long)est);
                MPI_Send(&iters, 1, MPI_LONG, peer, P2P_TAG + 1, MPI_COMM_WORLD);
            } else {
                MPI_Recv(&iters, 1, MPI_LONG, peer, P2P_TAG + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            double t0 = MPI_Wtime();
            for (long i = 0; i < iters; i++) pingpong(rank == 0, peer, buf, n);
            half[k] = (MPI_Wtime() - t0) / (double)iters * 0.5e6;
        }
    }
    sleepy_barrier();
    if (rank != 0) return;
    double ds[48];
    for (int k = 0; k < ns; k++) ds[k] = (double)sizes[k];
    int pair[2] = {0, last};
    cb_json_begin("p2p");
    cb_json_ints("pair", pair, 2);
    cb_json_nums("size_bytes", ds, ns);
    cb_json_nums("half_rtt_us", half, ns);
    cb_json_str("definition", "half round trip of a blocking MPI_Send/MPI_Recv ping-pong (one buffer on each side), "
                "the average over a batch of round trips timed as a whole after 4 untimed ones, us");
    cb_json_end();
}

/* ---- every pair of the given ranks (one per node), one pair at a time -------------------- */
static void link_pairs(const int *reps, int nreps, double budget, unsigned char *buf, double *rt) {
    const long sizes[2] = {8, LINK_BYTES};
    for (int i = 0; i < nreps; i++) {
        for (int j = i + 1; j < nreps; j++) {
            const int a = reps[i], b = reps[j];
            double res[6] = {0, 0, 0, 0, 0, 0}; /* mean, min, median at 8 B, then at LINK_BYTES */
            for (int k = 0; k < 2; k++) {
                int n = (int)sizes[k];
                sleepy_barrier();
                if (rank != a && rank != b) continue;
                int peer = rank == a ? b : a;
                long iters = 0;
                double w0 = MPI_Wtime();
                for (int w = 0; w < 4; w++) pingpong(rank == a, peer, buf, n); /* untimed */
                if (rank == a) { /* the budget's worth, 10 .. LINK_MAX_ITERS, told to the peer */
                    double rtt = (MPI_Wtime() - w0) / 4;
                    double est = rtt > 0 ? budget / rtt : LINK_MAX_ITERS;
                    iters = est > LINK_MAX_ITERS ? LINK_MAX_ITERS : (est < 10 ? 10 : (long)est);
                    MPI_Send(&iters, 1, MPI_LONG, peer, P2P_TAG + 2, MPI_COMM_WORLD);
                } else {
                    MPI_Recv(&iters, 1, MPI_LONG, peer, P2P_TAG + 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                for (long it = 0; it < iters; it++) {
                    double t0 = MPI_Wtime();
                    pingpong(rank == a, peer, buf, n);
                    rt[it] = (MPI_Wtime() - t0) * 0.5e6;
                }
                if (rank == a) {
                    res[3 * k] = mean(rt, iters);
                    qsort(rt, (size_t)iters, sizeof *rt, cb_cmp_double);
                    res[3 * k + 1] = rt[0];
                    res[3 * k + 2] = pct(rt, iters, 0.5);
                }
            }
            if (a != 0 && rank == a) MPI_Send(res, 6, MPI_DOUBLE, 0, P2P_TAG + 3, MPI_COMM_WORLD);
            if (a != 0 && rank == 0) MPI_Recv(res, 6, MPI_DOUBLE, a, P2P_TAG + 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (rank == 0) {
                int pair[2] = {a, b};
                double ds[2] = {(double)sizes[0], (double)sizes[1]};
                double mn[2] = {res[0], res[3]}, lo[2] = {res[1], res[4]}, md[2] = {res[2], res[5]};
                cb_json_begin("link");
                cb_json_ints("pair", pair, 2);
                cb_json_nums("size_bytes", ds, 2);
                cb_json_nums("mean_us", mn, 2);
                cb_json_nums("min_us", lo, 2);
                cb_json_nums("median_us", md, 2);
                cb_json_end();
            }
        }
    }
    sleepy_barrier();
}

int main(int argc, char **argv) {
    cb_mpi_start(&argc, &argv, &rank, &nranks, 1); /* only rank 0 speaks JSON */
    const char *ops_arg = "allreduce", *sizes_arg = "8", *corrupt = NULL, *links_arg = NULL;
    conf_t c = {0.05, 5, 10000, 10, 10, 1000, 0, 0};
    int p2p = 1;
    double p2p_budget = 0.01;
    CB_OPTIONS(argc, argv, CB_OPT("ops", ops_arg), CB_OPT("sizes", sizes_arg), CB_OPT("time_budget", c.time_budget),
               CB_OPT("min_iters", c.min_iters), CB_OPT("max_iters", c.max_iters), CB_OPT("warmup", c.warmup),
               CB_OPT("validate_every", c.validate_every), CB_OPT("max_samples", c.max_samples),
               CB_OPT("nonblocking", c.nonblocking), CB_OPT("debug", c.debug), CB_OPT("p2p", p2p),
               CB_OPT("p2p_budget", p2p_budget), CB_OPT("corrupt", corrupt),
               CB_OPT("links", links_arg));

    cb_mpi_report_placement(rank, nranks, NULL, NULL);
    if (nranks < 2) die("collectives need 2 or more ranks, got %d", nranks);
    if (c.min_iters < 1 || c.max_iters < c.min_iters || c.warmup < 0 || c.validate_every < 0 || c.max_samples < 1)
        die("bad arguments: 1 <= min_iters <= max_iters, warmup >= 0, validate_every >= 0, max_samples >= 1");

    /* ops */
    int ops[MAX_OPS], nops = 0;
    {
        char list[512];
        snprintf(list, sizeof list, "%s", ops_arg);
        for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int found = -1;
            for (int o = 0; o < NOPS; o++) if (!strcmp(tok, OP_NAMES[o])) found = o;
            if (found < 0) die("unknown collective '%s'", tok);
            if (nops == MAX_OPS) die("at most %d ops", MAX_OPS);
            ops[nops++] = found;
        }
    }
    if (!nops) die("no collective given (--ops)");
    long sizes[MAX_SIZES];
    int nsizes = cb_parse_longs(sizes_arg, "sizes", sizes, MAX_SIZES, cb_mpi_die);
    long maxb = 8;
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] < 0 || sizes[i] > (1L << 30)) die("message size %ld B is out of 0 B .. 1 GiB", sizes[i]);
        if (sizes[i] > maxb) maxb = sizes[i];
    }
    if (corrupt) { /* OP:ITER[:RANK] */
        char name[64];
        long it = 0;
        int r = -1;
        int got = sscanf(corrupt, "%63[^:]:%ld:%d", name, &it, &r);
        corrupt_op = -1;
        for (int o = 0; o < NOPS && got >= 2; o++) if (!strcmp(name, OP_NAMES[o])) corrupt_op = o;
        if (corrupt_op < 0) die("--corrupt=%s: give OP:ITER[:RANK]", corrupt);
        corrupt_iter = it;
        corrupt_rank = got == 3 ? r : (corrupt_op == REDUCE || corrupt_op == GATHER ? 0 : nranks - 1);
    }

    long link_ranks[MAX_LINK_RANKS];
    int reps[MAX_LINK_RANKS], nreps = 0;
    if (links_arg && *links_arg) {
        nreps = cb_parse_longs(links_arg, "links", link_ranks, MAX_LINK_RANKS, cb_mpi_die);
        for (int i = 0; i < nreps; i++) {
            if (link_ranks[i] < 0 || link_ranks[i] >= nranks) die("--links: rank %ld is not in 0..%d", link_ranks[i], nranks - 1);
            for (int j = 0; j < i; j++) if (link_ranks[j] == link_ranks[i]) die("--links: rank %ld twice", link_ranks[i]);
            reps[i] = (int)link_ranks[i];
        }
    }

    bufs_t b;
    size_t big = (size_t)maxb * (size_t)nranks; /* the P x size buffers of alltoall/allgather/gather/scatter */
    b.send = cb_alloc(big, -1);
    b.recv = cb_alloc(big, -1);
    b.counts = malloc(sizeof(int) * (size_t)nranks);
    long cap = c.max_iters;
    double *t = malloc(sizeof(double) * (size_t)cap), *tc = malloc(sizeof(double) * (size_t)cap);
    double *tmax = malloc(sizeof(double) * (size_t)cap), *sub = malloc(sizeof(double) * (size_t)c.max_samples);
    if (!b.send || !b.recv || !b.counts || !t || !tc || !tmax || !sub)
        die("out of memory for 2 x %zu-byte buffers", big);
    memset(b.send, 0, big);
    memset(b.recv, 0, big);
    if (c.nonblocking) calibrate();

    for (int k = 0; k < nops; k++) {
        if (ops[k] == BARRIER) {
            run_size(BARRIER, 0, &b, &c, t, tc, tmax, sub);
            continue;
        }
        for (int i = 0; i < nsizes; i++) /* one size list for every op: 0 B (a barrier-only list) is
                                    * skipped, and by reductions what is not whole doubles */
            if (sizes[i] > 0 && (!is_reduction(ops[k]) || sizes[i] % 8 == 0)) run_size(ops[k], sizes[i], &b, &c, t, tc, tmax, sub);
    }
    /* the model's input and the per-node evidence after the collectives (see --p2p above) */
    if (p2p) p2p_sweep(maxb, p2p_budget, b.recv);
    if (nreps >= 2) {
        unsigned char *lbuf = cb_alloc(LINK_BYTES, -1);
        double *rt = malloc(sizeof(double) * LINK_MAX_ITERS);
        if (!lbuf || !rt) die("out of memory for the links' ping-pong");
        memset(lbuf, 0, LINK_BYTES);
        link_pairs(reps, nreps, p2p_budget, lbuf, rt);
        free(rt);
        free(lbuf);
    }
    cb_mpi_finish(rank, -1);
    return 0;
}
