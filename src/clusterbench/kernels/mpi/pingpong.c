/* pingpong.c: MPI ping-pong latency and bandwidth between rank 0 and rank 1 against message size
 * (OSU osu_latency, IMB PingPong, NetPIPE; see shared/notes/anchors-mpi.md).
 *
 * Placement first: every rank reports its host (gethostname), its virtual-cluster node
 * (env CB_SIM_NODE, since namespaces share a host name), the cpus it is bound to
 * (sched_getaffinity) and the cpu it runs on (sched_getcpu); rank 0 gathers them and prints one
 * info record {"ranks":[{"rank","host","node","cpus","cpu"}, ...]} before any timing, so that
 * Python can refuse a wrong placement before a figure is reported.
 *
 * Sizes: 0 B and the powers of two up to --max_size, each also at +-3 B (NetPIPE's perturbation,
 * --perturb=1), or an explicit --sizes=list. Per size: a warm-up (untimed for the results) that
 * also estimates the round-trip time, then as many iterations as fit in --time_budget seconds
 * (between --min_iters and --max_iters; rank 0 decides, and stops early at 1.5 x the budget when
 * a busy machine stretches the round trips; the last ping carries another tag). Every
 * iteration is timed with MPI_Wtime, chained: one timer call per iteration, each iteration's
 * start is the previous one's end, so the timer costs one call per round trip. Half round-trip
 * latency = RTT/2 in us; bandwidth = size / half-RTT in MB/s (1e6 B/s).
 *
 * Result records per size: metric "latency" (us) and "bandwidth" (MB/s, not for 0 B); samples
 * are the per-iteration values, evenly subsampled to at most --max_samples; params.all holds the
 * statistics over every iteration (n, min, median, mean, p99, max), computed here.
 *
 * Buffers (--buffers): "separate" (default) is the convention of OSU (osu_latency, osu_bw's
 * ping-pong), IMB PingPong and hpcc: each rank sends from a send buffer and receives into a
 * receive buffer of its own, so a round trip never writes the data the rank sends next. "shared"
 * sends from and receives into one buffer per rank: each message is the data just received, as an
 * application forwarding data it was just given (the lines written by the receive travel back to
 * the other core on the next send, which roughly halves the mid-size bandwidth on shared memory).
 * NetPIPE 3.7 without -I uses one buffer ("shared"); with -I, separate pools flushed from cache.
 * The send buffers are filled with a pattern of (size, sending rank) before each size, outside the
 * timing, in both modes (rank 1's is not used in "shared" mode).
 *
 * Validation (--validate=1): receive buffers are cleared before each size; after the timed loops
 * (outside them) rank 1 checks that it holds rank 0's pattern and rank 0 that it holds rank 1's
 * ("separate") or its own echoed back ("shared"); the validation record precedes the size's
 * results. Without --validate the record says "not checked" (ok) so the protocol holds.
 *
 * Args: --max_size=B --sizes=a,b,c --perturb=0|1 --time_budget=S --min_iters=N --max_iters=N
 *       --warmup=N --max_samples=N --validate=0|1 --buffers=separate|shared
 *       --hugepages=0|1 (ask for transparent huge pages for the message buffers; default 4 KiB pages,
 *                        as an application's malloc'd buffer under THP "madvise")
 *       --hang_rank=R (test hook: rank R sleeps forever after the placement report)
 *       --hang_at_exit=R (test hook: rank R sleeps forever after "done", before MPI_Finalize)
 *       --corrupt=1   (test hook: damage rank 0's received data after timing; validation must fail)
 */
#include "cb_common.h"
#include "cb_mpi.h"

#include <mpi.h>

#define MAX_SIZES 512
#define TAG_PING 1
#define TAG_LAST 3

static int rank, nranks;
static int shared; /* --buffers=shared: one buffer per rank for sending and receiving */
#define BATCH_LOOPS 5 /* timed loops in the batch phase; the best one is the headline */

#define die cb_mpi_die

/* Statistics over all n values (sorted copy in tmp). */
static void stats(const double *v, long n, double *tmp, double out[6]) {
    double sum = 0;
    for (long i = 0; i < n; i++) { tmp[i] = v[i]; sum += v[i]; }
    qsort(tmp, (size_t)n, sizeof *tmp, cb_cmp_double);
    out[0] = (double)n;
    out[1] = tmp[0];
    out[2] = (n % 2) ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
    out[3] = sum / (double)n;
    long k = (long)ceil(0.99 * (double)n) - 1; /* nearest-rank p99 */
    out[4] = tmp[k < 0 ? 0 : (k >= n ? n - 1 : k)];
    out[5] = tmp[n - 1];
}

static void emit(const char *metric, long size, const double *v, long n, long max_samples, double *tmp,
                 double *sub, double t_total, double batch, double batch_mean, long batch_iters) {
    double st[6];
    stats(v, n, tmp, st);
    long m = n < max_samples ? n : max_samples;
    for (long i = 0; i < m; i++) sub[i] = v[(long)((double)i * (double)n / (double)m)];
    char params[512];
    snprintf(params, sizeof params,
             "{\"size\":%ld,\"iterations\":%ld,\"all\":{\"n\":%ld,\"min\":%.9g,\"median\":%.9g,\"mean\":%.9g,"
             "\"p99\":%.9g,\"max\":%.9g},\"samples_kept\":%ld,\"loop_s\":%.9g,"
             "\"batch\":%.9g,\"batch_mean\":%.9g,\"batch_iterations\":%ld,\"batch_loops\":%d,\"buffers\":\"%s\"}",
             size, n, n, st[1], st[2], st[3], st[4], st[5], m, t_total, batch, batch_mean, batch_iters, BATCH_LOOPS,
             shared ? "shared" : "separate");
    cb_json_begin("result");
    cb_json_str("metric", metric);
    cb_json_raw("params", params);
    cb_json_nums("samples", sub, (int)m);
    cb_json_end();
}

/* the byte i of a `size`-byte message sent by rank src */
static inline unsigned char pattern(long size, int src, long i) {
    return (unsigned char)((i * 131 + size * 7 + src * 29 + 1) & 0xff);
}

int main(int argc, char **argv) {
    cb_mpi_start(&argc, &argv, &rank, &nranks, 1); /* only rank 0 speaks JSON */

    long long max_size = 16LL << 20;
    const char *sizes_arg = NULL;
    int perturb = 1;
    double budget = 0.1;
    long min_iters = 10, max_iters = 1000000, warmup = 20, max_samples = 1000;
    int validate = 0, hang_rank = -1, hang_at_exit = -1, corrupt = 0, hugepages = 0;
    const char *buffers = "separate";
    CB_OPTIONS(argc, argv, CB_OPT("max_size", max_size), CB_OPT("sizes", sizes_arg), CB_OPT("perturb", perturb),
               CB_OPT("time_budget", budget), CB_OPT("min_iters", min_iters), CB_OPT("max_iters", max_iters),
               CB_OPT("warmup", warmup), CB_OPT("max_samples", max_samples), CB_OPT("validate", validate),
               CB_OPT("hang_rank", hang_rank), CB_OPT("hang_at_exit", hang_at_exit), CB_OPT("corrupt", corrupt),
               CB_OPT("hugepages", hugepages), CB_OPT("buffers", buffers));

    /* ---- placement report ---- */
    cb_mpi_report_placement(rank, nranks, NULL, NULL);
    if (rank == hang_rank) for (;;) pause(); /* test hook: a rank that hangs */
    if (nranks < 2) die("pingpong needs 2 ranks, got %d", nranks);
    if (strcmp(buffers, "separate") && strcmp(buffers, "shared"))
        die("--buffers=%s: give separate or shared", buffers);
    shared = !strcmp(buffers, "shared");

    /* ---- sizes ---- */
    long sizes[MAX_SIZES];
    int nsizes = 0;
    if (sizes_arg) {
        nsizes = cb_parse_longs(sizes_arg, "sizes", sizes, MAX_SIZES, cb_mpi_die);
    } else {
        if (max_size < 0) die("--max_size must be >= 0");
        sizes[nsizes++] = 0;
        for (long p = 1; p <= max_size && nsizes < MAX_SIZES - 3; p *= 2) {
            if (perturb && p >= 8) sizes[nsizes++] = p - 3; /* above the previous +3: 5 > 4, and p-3 > p/2+3 for p >= 16 */
            sizes[nsizes++] = p;
            if (perturb && p >= 8 && p + 3 <= max_size) sizes[nsizes++] = p + 3;
        }
    }
    long maxb = 1;
    for (int i = 0; i < nsizes; i++) if (sizes[i] > maxb) maxb = sizes[i];

    /* sb: what this rank sends; rb: where it receives (the same buffer when shared) */
    unsigned char *sb = cb_alloc((size_t)maxb, hugepages ? 1 : -1);
    unsigned char *rb = shared ? sb : cb_alloc((size_t)maxb, hugepages ? 1 : -1);
    double *times = malloc(sizeof(double) * (size_t)max_iters);
    double *bw = malloc(sizeof(double) * (size_t)max_iters);
    double *tmp = malloc(sizeof(double) * (size_t)max_iters);
    double *sub = malloc(sizeof(double) * (size_t)(max_samples > 0 ? max_samples : 1));
    if (!sb || !rb || !times || !bw || !tmp || !sub) die("out of memory for %ld-byte buffers", maxb);
    memset(sb, 0, (size_t)maxb);
    memset(rb, 0, (size_t)maxb);
    const int peer = 1 - (rank == 1 ? 1 : 0); /* rank 0 talks to 1, rank 1 to 0 */
    const int active = rank < 2;

    for (int si = 0; si < nsizes; si++) {
        long size = sizes[si];
        int n = (int)size;
        long iters = 0;
        /* outside the timing: the send data, and cleared receive buffers to check against */
        if (validate && (!shared || rank == 1)) memset(rb, 0, (size_t)size); /* shared rank 0: rb is sb */
        if (!shared || rank == 0) for (long i = 0; i < size; i++) sb[i] = pattern(size, rank, i);
        MPI_Barrier(MPI_COMM_WORLD);
        /* warm-up, also estimates the round trip */
        double rtt = 0;
        if (active) {
            /* fewer warm-up round trips for large messages (the same rule on both ranks) */
            long wu = (size >= (1L << 20) && warmup > 4) ? 4 : warmup;
            double w0 = MPI_Wtime();
            for (long i = 0; i < wu; i++) {
                if (i == wu / 2) w0 = MPI_Wtime(); /* the first half settles caches and connections */
                if (rank == 0) {
                    MPI_Send(sb, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                    MPI_Recv(rb, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rb, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sb, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                }
            }
            rtt = wu > 1 ? (MPI_Wtime() - w0) / (double)(wu - wu / 2) : 0;
        }
        if (rank == 0) {
            double est = rtt > 0 ? budget / rtt : (double)max_iters;
            iters = est > (double)max_iters ? max_iters : (long)est;
            if (iters < min_iters) iters = min_iters;
            if (iters > max_iters) iters = max_iters;
        }
        double loop = 0;
        /* The count is an upper bound: on a busy machine a descheduled rank stretches round trips,
         * so rank 0 also stops once 1.5 x the budget has passed (after min_iters), telling rank 1
         * with the tag of the last ping (TAG_LAST) rather than with anything in the data. */
        if (rank == 0) {
            double t = MPI_Wtime(), start = t, cap = 1.5 * budget;
            long done = 0;
            for (long i = 0; i < iters; i++) {
                int last = (i + 1 == iters) || (i + 1 >= min_iters && t - start > cap);
                MPI_Send(sb, n, MPI_BYTE, peer, last ? TAG_LAST : TAG_PING, MPI_COMM_WORLD);
                MPI_Recv(rb, n, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double e = MPI_Wtime();
                times[i] = e - t;
                t = e;
                done = i + 1;
                if (last) break;
            }
            iters = done;
            loop = t - start;
        } else if (rank == 1) {
            for (;;) {
                MPI_Status st;
                MPI_Recv(rb, n, MPI_BYTE, peer, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                MPI_Send(sb, n, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
                iters++;
                if (st.MPI_TAG == TAG_LAST) break;
            }
        }
        /* Batch phase: half as many round trips again, in BATCH_LOOPS loops each timed as a whole
         * with no timer call inside; the best loop's average is the headline (hpcc and NetPIPE report
         * the best of repeated loops; OSU and IMB one loop's average, kept as batch_mean). The
         * per-iteration phase above gives the distribution. The same data travels, so the
         * validation below covers both phases. */
        long biters = 0;
        double batch = 0, batch_best = 0; /* seconds per round trip: all loops, the best loop */
        if (rank == 0) {
            biters = iters / 2 > min_iters ? iters / 2 : (iters < min_iters ? iters : min_iters);
            long per = biters >= BATCH_LOOPS ? biters / BATCH_LOOPS : biters;
            long i = 0;
            while (i < biters) {
                long end = (biters - i < 2 * per) ? biters : i + per; /* the last loop takes the rest */
                double b0 = MPI_Wtime();
                for (long j = i; j < end; j++) {
                    MPI_Send(sb, n, MPI_BYTE, peer, j + 1 == biters ? TAG_LAST : TAG_PING, MPI_COMM_WORLD);
                    MPI_Recv(rb, n, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                double t = MPI_Wtime() - b0, rt = t / (double)(end - i);
                batch += t;
                if (batch_best == 0 || rt < batch_best) batch_best = rt;
                i = end;
            }
        } else if (rank == 1) {
            for (;;) {
                MPI_Status st;
                MPI_Recv(rb, n, MPI_BYTE, peer, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                MPI_Send(sb, n, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
                if (st.MPI_TAG == TAG_LAST) break;
            }
        }
        /* validation, outside the timed loop */
        int bad_local = 0;
        long first_bad = -1;
        if (validate && active) {
            /* rank 1 holds rank 0's data; rank 0 holds rank 1's, or its own echoed back when shared */
            const int src = (rank == 0 && !shared) ? 1 : 0;
            if (corrupt && rank == 0 && size > 0) rb[size / 2] ^= 0x5a;
            for (long i = 0; i < size; i++)
                if (rb[i] != pattern(size, src, i)) { bad_local = 1; first_bad = i; break; }
        }
        int bad1 = 0;
        if (rank == 1) MPI_Send(&bad_local, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
        if (rank == 0) MPI_Recv(&bad1, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rank == 0) {
            char detail[256];
            if (!validate)
                snprintf(detail, sizeof detail, "%ld B: data not checked (use --validate)", size);
            else if (bad_local)
                snprintf(detail, sizeof detail, "%ld B: data received by rank 0 differs from the pattern at byte %ld",
                         size, first_bad);
            else if (bad1)
                snprintf(detail, sizeof detail, "%ld B: data received by rank 1 differs from the pattern", size);
            else
                snprintf(detail, sizeof detail, "%ld B: pattern intact on both ranks after %ld round trips "
                         "(%s buffers)", size, iters, shared ? "shared" : "separate");
            cb_json_begin("validation");
            cb_json_bool("ok", !(bad_local || bad1));
            cb_json_bool("checked", validate);
            cb_json_str("detail", detail);
            cb_json_end();
            for (long i = 0; i < iters; i++) {
                times[i] *= 0.5e6; /* half round trip, us */
                bw[i] = times[i] > 0 ? (double)size / times[i] : 0; /* B/us = MB/s */
            }
            double half_us = batch_best * 0.5e6;                                   /* best loop, us */
            double mean_us = biters > 0 ? batch / (double)biters * 0.5e6 : 0;     /* all loops, us */
            emit("latency", size, times, iters, max_samples, tmp, sub, loop, half_us, mean_us, biters);
            if (size > 0)
                emit("bandwidth", size, bw, iters, max_samples, tmp, sub, loop,
                     half_us > 0 ? (double)size / half_us : 0, mean_us > 0 ? (double)size / mean_us : 0, biters);
        }
    }
    cb_mpi_finish(rank, hang_at_exit);
    return 0;
}
