/* mpibw.c: MPI streaming bandwidth between rank pairs (OSU osu_bw, osu_bibw, osu_mbw_mr,
 * osu_multi_lat; IMB Uniband/Biband/MultiPingPong; see shared/notes/anchors-mpi.md).
 *
 * Pairing: with 2k ranks, rank i (i < k, the "lower" rank) pairs with rank i + k (block placement,
 * as osu_mbw_mr: ranks 0..k-1 on one side, k..2k-1 on the other). With 2 ranks that is osu_bw's
 * rank 0 -> rank 1.
 *
 * Placement first: every rank reports its host (gethostname), its virtual-cluster node
 * (env CB_SIM_NODE), the cpus it is bound to (sched_getaffinity) and the cpu it runs on; rank 0
 * prints one info record {"ranks":[{"rank","host","node","cpus","cpu"}, ...]} before any timing.
 *
 * Modes (--modes=bw,bibw,lat; --bidir=1 is short for --modes=bibw):
 *   bw    the lower rank posts a window of W (--window, 64) MPI_Isend of `size` bytes, MPI_Waitall,
 *         then waits for a 1-byte ack from its partner, which posted W MPI_Irecv and a Waitall
 *         (osu_bw). Bytes per iteration = size * W.
 *   bibw  both ranks of a pair post W MPI_Irecv and W MPI_Isend at once and wait for all of them
 *         (osu_bibw); bytes per iteration = 2 * size * W (both directions added).
 *   lat   blocking ping-pong of `size` bytes (osu_multi_lat); latency = round trip / 2.
 * Every iteration starts after a synchronisation of all ranks (an MPI_Allreduce that carries rank
 * 0's decision to go on), so all pairs start together each iteration (osu_mbw_mr's barrier); the
 * lower rank of each pair times the iteration from just after that synchronisation to the ack
 * (bw), to the completion of its 2W requests (bibw), or to the pong (lat). The synchronisation is
 * not timed. Per pair: t = sum of its iteration times; MB/s = bytes per iteration * iters / 1e6 / t.
 *
 * Sizes: powers of two from --min_size (1) to --max_size (4 MiB), or --sizes=list. Per size and
 * mode: a warm-up (OSU's skip: --warmup, 10; 2 from 1 MiB up) that is excluded from the results and
 * estimates the time per iteration; rank 0 takes the slowest rank's estimate, sets the iteration
 * count from --time_budget (between --min_iters and --max_iters) and broadcasts it; it also stops
 * the loop at 1.5 x the budget (after min_iters) when a busy machine stretches the iterations.
 *
 * Buffers (--buffers): "separate" (default) is the convention of OSU (osu_bw, osu_bibw,
 * osu_mbw_mr, osu_multi_lat) and IMB: every rank sends from a send buffer and receives into
 * receive slots of its own, so no message is data the rank has just received. "shared": each
 * message is the data just received, as an application forwarding what it was given: lat echoes
 * the received buffer and the lower rank sends from the buffer its pong lands in (one buffer per
 * rank); bibw sends, in each iteration, the window received in the previous one (two sets of
 * receive slots, used in turn, so no buffer is sent from while a receive into it is pending); bw
 * (one way) is the same in both, since its sender receives nothing it could send on.
 *
 * Validation (--validate=1, default): each sender fills its buffer with a pattern that depends on
 * the size and its rank; receive buffers are cleared before the warm-up; after the timed loop
 * (outside it) every receiver checks every receive slot (the window's messages land in
 * min(W, --rbuf_cap / size) slots) and the ping-pong's pong (the partner's data, or the rank's own
 * echoed back when shared; shared bibw: the first set holds the partner's data, the second the
 * rank's own, forwarded there and back); rank 0 prints the validation record before the size's
 * result. --corrupt=1 (test hook) damages rank k's receive buffer after the timed loop, so
 * validation must fail.
 *
 * Result per size and mode: metric "bw" | "bibw" (MB/s) | "latency" (us); samples: per iteration,
 * the mean over pairs (MB/s of that iteration, or half round trip in us), evenly subsampled to
 * --max_samples; params: size, window, pairs, iterations, bytes_per_iteration (per pair),
 * per-pair list {pair, ranks, iterations, time_s, mbs (bandwidth modes) or latency_us (mean half
 * round trip), and min/median/mean/p99/max over that pair's iterations}, aggregate_mbs (sum of
 * the pairs' MB/s), loop_s (wall time of rank 0's timed loop, synchronisation included), buffers.
 *
 * Args: --modes=bw,bibw,lat --bidir=0|1 --window=W --sizes=a,b --min_size=B --max_size=B
 *       --time_budget=S --min_iters=N --max_iters=N --warmup=N --max_samples=N --validate=0|1
 *       --rbuf_cap=B --buffers=separate|shared --corrupt=0|1 --hang_rank=R
 */
#include "cb_common.h"
#include "cb_mpi.h"

#include <mpi.h>

#define MAX_SIZES 128
#define MAX_WINDOW 4096
#define TAG_DATA 10
#define TAG_ACK 11
#define TAG_LAT 12

enum { MODE_BW = 0, MODE_BIBW = 1, MODE_LAT = 2 };
static const char *mode_metric[] = {"bw", "bibw", "latency"};
static const char *mode_name[] = {"bw", "bibw", "lat"};

/* what each lower rank reports about its pair for one size and mode */
typedef struct {
    double n, time_s, value, min, median, mean, p99, max;
} pairstat_t;

static int rank, nranks;
static int shared; /* --buffers=shared: each message is the data just received */

#define die cb_mpi_die

/* min, median, mean, p99 (nearest rank), max of v[0..n) (sorted copy in tmp) */
static void stats(const double *v, long n, double *tmp, pairstat_t *st) {
    if (n <= 0) { st->min = st->median = st->mean = st->p99 = st->max = 0; return; }
    double sum = 0;
    for (long i = 0; i < n; i++) { tmp[i] = v[i]; sum += v[i]; }
    qsort(tmp, (size_t)n, sizeof *tmp, cb_cmp_double);
    st->min = tmp[0];
    st->median = (n % 2) ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
    st->mean = sum / (double)n;
    long k = (long)ceil(0.99 * (double)n) - 1;
    st->p99 = tmp[k < 0 ? 0 : (k >= n ? n - 1 : k)];
    st->max = tmp[n - 1];
}

static inline unsigned char pattern(long size, int src, long i) {
    return (unsigned char)((i * 131 + size * 7 + src * 29 + 1) & 0xff);
}

/* ---- one iteration of a mode, from the lower (sender) or upper (receiver) rank ------------ */
static unsigned char *sbuf, *rbuf;
static MPI_Request reqs[2 * MAX_WINDOW];

/* Iteration t (counted from the size's first warm-up iteration) of a mode. */
static void iteration(int mode, int lower, int partner, long size, int window, long slots, long t) {
    int n = (int)size;
    const size_t set = (size_t)slots * (size_t)size; /* bytes of one set of receive slots */
    char ack = 1;
    if (mode == MODE_BW) {
        if (lower) {
            for (int j = 0; j < window; j++)
                MPI_Isend(sbuf, n, MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD, &reqs[j]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_BYTE, partner, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int j = 0; j < window; j++)
                MPI_Irecv(rbuf + (size_t)(j % slots) * (size_t)size, n, MPI_BYTE, partner, TAG_DATA,
                          MPI_COMM_WORLD, &reqs[j]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Send(&ack, 1, MPI_BYTE, partner, TAG_ACK, MPI_COMM_WORLD);
        }
    } else if (mode == MODE_BIBW) {
        /* shared: receive into set t % 2 and send on what set (t + 1) % 2 received last time */
        unsigned char *into = rbuf + (shared ? (size_t)(t % 2) * set : 0);
        unsigned char *from = shared ? rbuf + (size_t)((t + 1) % 2) * set : sbuf;
        for (int j = 0; j < window; j++)
            MPI_Irecv(into + (size_t)(j % slots) * (size_t)size, n, MPI_BYTE, partner, TAG_DATA,
                      MPI_COMM_WORLD, &reqs[j]);
        for (int j = 0; j < window; j++)
            MPI_Isend(from + (shared ? (size_t)(j % slots) * (size_t)size : 0), n, MPI_BYTE, partner, TAG_DATA,
                      MPI_COMM_WORLD, &reqs[window + j]);
        MPI_Waitall(2 * window, reqs, MPI_STATUSES_IGNORE);
    } else {
        unsigned char *out = shared ? rbuf : sbuf; /* shared: send on what arrived (the echo) */
        if (lower) {
            MPI_Send(out, n, MPI_BYTE, partner, TAG_LAT, MPI_COMM_WORLD);
            MPI_Recv(rbuf, n, MPI_BYTE, partner, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, n, MPI_BYTE, partner, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(out, n, MPI_BYTE, partner, TAG_LAT, MPI_COMM_WORLD);
        }
    }
}

/* Parse a comma-separated list of modes into out[]; returns the count. */
static int parse_modes(const char *s, int *out) {
    int n = 0;
    while (s && *s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        int m = -1;
        for (int i = 0; i < 3; i++)
            if (strlen(mode_name[i]) == len && strncmp(s, mode_name[i], len) == 0) m = i;
        if (m < 0) die("unknown mode in --modes near '%s' (bw, bibw, lat)", s);
        if (n < 3) out[n++] = m;
        s = e ? e + 1 : s + len;
    }
    return n;
}

/* The pairing this kernel uses, in its info record (pw = {pairs, window}). */
static void pairing_fields(const void *arg) {
    const int *pw = arg;
    cb_json_int("pairs", pw[0]);
    cb_json_str("pairing", "rank i <-> rank i + pairs (block placement)");
    cb_json_int("window", pw[1]);
}

int main(int argc, char **argv) {
    cb_mpi_start(&argc, &argv, &rank, &nranks, 1); /* only rank 0 speaks JSON */

    const char *modes_arg = NULL;
    int bidir = 0, window = 64;
    const char *sizes_arg = NULL;
    long long min_size = 1, max_size = 4LL << 20;
    double budget = 0.25;
    long min_iters = 3, max_iters = 100000, warmup = 10, max_samples = 1000;
    int validate = 1;
    long long rbuf_cap = 32LL << 20;
    int corrupt = 0, hang_rank = -1;
    const char *buffers = "separate";
    CB_OPTIONS(argc, argv, CB_OPT("modes", modes_arg), CB_OPT("bidir", bidir), CB_OPT("window", window),
               CB_OPT("sizes", sizes_arg), CB_OPT("min_size", min_size), CB_OPT("max_size", max_size),
               CB_OPT("time_budget", budget), CB_OPT("min_iters", min_iters), CB_OPT("max_iters", max_iters),
               CB_OPT("warmup", warmup), CB_OPT("max_samples", max_samples), CB_OPT("validate", validate),
               CB_OPT("rbuf_cap", rbuf_cap), CB_OPT("corrupt", corrupt), CB_OPT("hang_rank", hang_rank),
               CB_OPT("buffers", buffers));

    /* ---- placement report (before anything can fail on a bad argument) ---- */
    const int k = nranks / 2;
    const int pw[2] = {k, window};
    cb_mpi_report_placement(rank, nranks, pairing_fields, pw);
    if (rank == hang_rank) for (;;) pause(); /* test hook: a rank that hangs */
    if (nranks < 2 || nranks % 2) die("mpibw needs an even number of ranks (2 per pair), got %d", nranks);
    if (window < 1 || window > MAX_WINDOW) die("--window %d is outside 1..%d", window, MAX_WINDOW);
    if (min_iters < 1) min_iters = 1;
    if (max_iters < min_iters) max_iters = min_iters;
    if (budget <= 0) die("--time_budget must be > 0");
    if (strcmp(buffers, "separate") && strcmp(buffers, "shared"))
        die("--buffers=%s: give separate or shared", buffers);
    shared = !strcmp(buffers, "shared");

    int modes[3], nmodes;
    if (modes_arg) nmodes = parse_modes(modes_arg, modes);
    else { modes[0] = bidir ? MODE_BIBW : MODE_BW; nmodes = 1; }
    if (nmodes == 0) die("--modes is empty");

    /* ---- sizes ---- */
    long sizes[MAX_SIZES];
    int nsizes = 0;
    if (sizes_arg) {
        nsizes = cb_parse_longs(sizes_arg, "sizes", sizes, MAX_SIZES, cb_mpi_die);
    } else {
        if (min_size < 1 || max_size < min_size) die("need 1 <= --min_size <= --max_size");
        for (long long p = 1; p <= max_size && nsizes < MAX_SIZES; p *= 2)
            if (p >= min_size) sizes[nsizes++] = (long)p;
    }
    if (nsizes == 0) die("no message sizes");
    long maxb = 1;
    for (int i = 0; i < nsizes; i++) if (sizes[i] > maxb) maxb = sizes[i];
    if (rbuf_cap < maxb) rbuf_cap = maxb;
    size_t rbytes = (size_t)window * (size_t)maxb;
    if (rbytes > (size_t)rbuf_cap) rbytes = (size_t)rbuf_cap;

    const int lower = rank < k;
    const int partner = lower ? rank + k : rank - k;

    sbuf = cb_alloc((size_t)maxb, -1);
    rbuf = cb_alloc(shared ? 2 * rbytes : rbytes, -1); /* shared bibw: two sets of receive slots */
    double *times = malloc(sizeof(double) * (size_t)max_iters);
    double *vals = malloc(sizeof(double) * (size_t)max_iters);
    double *sum = rank == 0 ? malloc(sizeof(double) * (size_t)max_iters) : NULL;
    double *tmp = malloc(sizeof(double) * (size_t)max_iters);
    double *sub = malloc(sizeof(double) * (size_t)(max_samples > 0 ? max_samples : 1));
    pairstat_t *pstats = rank == 0 ? malloc(sizeof(pairstat_t) * (size_t)nranks) : NULL;
    if (!sbuf || !rbuf || !times || !vals || !tmp || !sub || (rank == 0 && (!sum || !pstats)))
        die("out of memory for %ld-byte messages", maxb);

    for (int si = 0; si < nsizes; si++) {
        const long size = sizes[si];
        long slots = size > 0 ? (long)(rbytes / (size_t)size) : window;
        if (slots > window) slots = window;
        if (slots < 1) slots = 1;
        for (int mi = 0; mi < nmodes; mi++) {
            const int mode = modes[mi];
            /* buffers: the sender's pattern, cleared receive slots (outside any timing) */
            const size_t set = (size_t)slots * (size_t)size;
            for (long i = 0; i < size; i++) sbuf[i] = pattern(size, rank, i);
            memset(rbuf, 0, mode == MODE_LAT ? (size_t)size : set);
            if (shared && mode == MODE_LAT && lower) memcpy(rbuf, sbuf, (size_t)size); /* its first ping */
            if (shared && mode == MODE_BIBW)                                          /* the first window */
                for (long s = 0; s < slots; s++) memcpy(rbuf + set + (size_t)s * (size_t)size, sbuf, (size_t)size);
            const double bytes_iter = mode == MODE_LAT ? 2.0 * (double)size
                                      : (mode == MODE_BIBW ? 2.0 : 1.0) * (double)size * window;

            /* warm-up (excluded), also estimates the wall time per synchronised iteration */
            long wu = (size >= (1L << 20) && warmup > 2) ? 2 : warmup;
            if (wu < 1) wu = 1;
            MPI_Barrier(MPI_COMM_WORLD);
            double w0 = MPI_Wtime();
            long t = 0; /* iterations so far (shared bibw alternates its receive sets) */
            for (long i = 0; i < wu; i++) {
                if (i == wu / 2) w0 = MPI_Wtime(); /* the first half settles connections and caches */
                int go = 1, all_go;
                MPI_Allreduce(&go, &all_go, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                iteration(mode, lower, partner, size, window, slots, t++);
            }
            double est = (MPI_Wtime() - w0) / (double)(wu - wu / 2), est_max = 0;
            MPI_Reduce(&est, &est_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            long iters = 0;
            if (rank == 0) {
                double e = est_max > 0 ? budget / est_max : (double)max_iters;
                iters = e > (double)max_iters ? max_iters : (long)e;
                if (iters < min_iters) iters = min_iters;
            }
            MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);

            /* timed loop: every iteration starts after all ranks synchronise on rank 0's decision */
            long n = 0;
            const double start = MPI_Wtime(), cap = 1.5 * budget;
            for (;;) {
                int go = 0, all_go = 0;
                if (rank == 0) go = n < iters && !(n >= min_iters && MPI_Wtime() - start > cap);
                MPI_Allreduce(&go, &all_go, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                if (!all_go) break;
                double t0 = MPI_Wtime();
                iteration(mode, lower, partner, size, window, slots, t++);
                times[n++] = MPI_Wtime() - t0;
            }
            const double loop = MPI_Wtime() - start;

            /* validation, outside the timed loop */
            int bad = 0;
            long first_bad = -1;
            if (validate && size > 0) {
                int receives = mode != MODE_BW || !lower; /* bw: only the upper rank receives */
                if (corrupt && rank == k) rbuf[size / 2] ^= 0x5a;
                if (receives) {
                    /* slots to check; shared bibw has two sets: the partner's data, then our own back */
                    long nslots = mode == MODE_LAT ? 1 : (shared && mode == MODE_BIBW ? 2 * slots : slots);
                    for (long s = 0; s < nslots && !bad; s++) {
                        int own = shared && ((mode == MODE_LAT && lower) || (mode == MODE_BIBW && s >= slots));
                        int src = own ? rank : partner;
                        for (long i = 0; i < size; i++)
                            if (rbuf[(size_t)s * (size_t)size + (size_t)i] != pattern(size, src, i)) {
                                bad = 1;
                                first_bad = s * size + i;
                                break;
                            }
                    }
                }
            }
            int flag = bad ? rank + 1 : 0, worst = 0;
            MPI_Allreduce(&flag, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD); /* every rank knows */
            long where = first_bad, where0 = -1;
            if (worst > 1) { /* the failing rank tells rank 0 where it found the damage */
                if (rank == worst - 1) MPI_Send(&where, 1, MPI_LONG, 0, 99, MPI_COMM_WORLD);
                if (rank == 0) MPI_Recv(&where0, 1, MPI_LONG, worst - 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (worst == 1) {
                where0 = first_bad;
            }

            /* per-iteration values on the lower ranks; the upper ranks contribute zeros */
            for (long i = 0; i < n; i++) {
                if (!lower) vals[i] = 0;
                else if (mode == MODE_LAT) vals[i] = times[i] > 0 ? 0.5e6 * times[i] : 0; /* half RTT, us */
                else vals[i] = times[i] > 0 ? bytes_iter / times[i] * 1e-6 : 0;            /* MB/s */
            }
            MPI_Reduce(vals, sum, (int)n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            pairstat_t st;
            memset(&st, 0, sizeof st);
            if (lower) {
                double t = 0;
                for (long i = 0; i < n; i++) t += times[i];
                st.n = (double)n;
                st.time_s = t;
                stats(vals, n, tmp, &st);
                st.value = mode == MODE_LAT ? (n > 0 ? 0.5e6 * t / (double)n : 0)
                                            : (t > 0 ? bytes_iter * (double)n / 1e6 / t : 0);
            }
            MPI_Gather(&st, (int)sizeof st, MPI_BYTE, pstats, (int)sizeof st, MPI_BYTE, 0, MPI_COMM_WORLD);

            if (rank == 0) {
                char detail[320];
                if (!validate)
                    snprintf(detail, sizeof detail, "%ld B %s: data not checked (--validate=0)", size,
                             mode_name[mode]);
                else if (worst)
                    snprintf(detail, sizeof detail,
                             "%ld B %s: rank %d received data that differs from the pattern (byte %ld)", size,
                             mode_name[mode], worst - 1, where0);
                else
                    snprintf(detail, sizeof detail,
                             "%ld B %s: pattern intact in every receive buffer of %d pair(s) after %ld iterations",
                             size, mode_name[mode], k, n);
                cb_json_begin("validation");
                cb_json_bool("ok", !worst);
                cb_json_bool("checked", validate && size > 0);
                cb_json_str("detail", detail);
                cb_json_end();

                double agg = 0;
                for (int p = 0; p < k; p++) agg += pstats[p].value;
                long m = n < max_samples ? n : max_samples;
                for (long i = 0; i < m; i++) sub[i] = sum[(long)((double)i * (double)n / (double)m)] / k;
                cb_json_begin("result");
                cb_json_str("metric", mode_metric[mode]);
                cb_json_key("params");
                printf("{\"size\":%ld,\"mode\":\"%s\",\"window\":%d,\"pairs\":%d,\"iterations\":%ld,"
                       "\"bytes_per_iteration\":%.17g,\"rbuf_slots\":%ld,\"loop_s\":%.9g,\"samples_kept\":%ld,"
                       "\"buffers\":\"%s\",",
                       size, mode_name[mode], mode == MODE_LAT ? 1 : window, k, n, bytes_iter,
                       mode == MODE_LAT ? 1L : slots, loop, m, shared ? "shared" : "separate");
                if (mode == MODE_LAT) printf("\"mean_latency_us\":%.9g,", agg / k);
                else printf("\"aggregate_mbs\":%.9g,", agg);
                printf("\"pair\":[");
                for (int p = 0; p < k; p++) {
                    const pairstat_t *q = &pstats[p];
                    printf("%s{\"pair\":%d,\"ranks\":[%d,%d],\"iterations\":%.0f,\"time_s\":%.9g,\"%s\":%.9g,"
                           "\"min\":%.9g,\"median\":%.9g,\"mean\":%.9g,\"p99\":%.9g,\"max\":%.9g}",
                           p ? "," : "", p, p, p + k, q->n, q->time_s, mode == MODE_LAT ? "latency_us" : "mbs",
                           q->value, q->min, q->median, q->mean, q->p99, q->max);
                }
                printf("]}");
                cb_json_nums("samples", sub, (int)m);
                cb_json_end();
            }
        }
    }
    cb_mpi_finish(rank, -1);
    return 0;
}
