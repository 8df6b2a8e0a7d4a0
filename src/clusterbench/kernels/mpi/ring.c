/* ring.c: HPCC b_eff ring latency and bandwidth (naturally and randomly ordered rings;
 * icl-utk-edu/hpcc src/bench_lat_bw_1.5.2.c, ring_lat_bw_loop; shared/notes/anchors-mpi.md §4).
 *
 * Every rank exchanges a message with its left and its right neighbour in a ring, in both
 * directions at once. The ring is the naturally ordered one (rank order) and --random_rings
 * randomly ordered ones: seeded permutations (--seed, splitmix64 + Fisher-Yates) built on rank 0,
 * broadcast, and the same in every measurement, as HPCC repeats its rings.
 *
 * Per message size (--lat_size, 8 B, and --bw_size, 2,000,000 B), per measurement
 * (--measurements) and per ring: two implementations are timed, each over loop_length
 * iterations after one untimed iteration (HPCC): (a) two MPI_Sendrecv (to the right, then to the
 * left) and (b) two MPI_Irecv + two MPI_Isend + MPI_Waitall; time per message = loop time /
 * (2 * loop_length) and the better of (a) and (b) is kept. Then the maximum over ranks
 * (MPI_Reduce MAX) and the minimum over measurements (rank 0), as HPCC. The random-ring figure
 * is the geometric mean over the rings; bandwidth per process = size / time per message
 * (MB/s = 1e6 B/s).
 *
 * loop_length: starts at --loop (HPCC: 5 for latency, 2 for bandwidth) and grows until one timed
 * loop lasts at least --loop_time seconds on the slowest rank (HPCC grows it until 10 x MPI_Wtick);
 * all ranks agree on it through MPI_Allreduce, and it is kept for the following rings.
 *
 * Buffers (--buffers): "separate" (default) is HPCC's convention (and OSU's and IMB's): every rank
 * sends from two send buffers and receives into two receive buffers of its own, so no message is
 * data the rank has just received. "shared": each message is the data just received, as an
 * application passing data on around the ring: after every exchange the buffer that arrived from
 * the left becomes the one sent to the right and the other way (the send and receive buffers of
 * one exchange stay apart, as MPI requires).
 *
 * Validation (--validate=1, outside the timed loops): after each ring's timed loops, one more
 * exchange with buffers filled with a pattern of (sender, direction, ring, measurement, byte);
 * receive buffers are cleared first, every byte is checked. With shared buffers the received data
 * is passed on once more, and what arrives then (the pattern of the neighbour's neighbour) is
 * checked. --corrupt=1 (test hook) damages a received byte on rank 0 before the check, so
 * validation must fail.
 *
 * Output (rank 0): an info record with the placement of every rank ({rank, host, node, cpus,
 * cpu}, node = env CB_SIM_NODE on the virtual cluster) before any timing; per size one
 * validation record, then result records: natural_ring_latency / random_ring_latency (us) for
 * the latency size, natural_ring_bandwidth / random_ring_bandwidth (MB/s) for the bandwidth size.
 * samples: one per measurement (max over ranks; the geometric mean over rings for random rings);
 * params.value: the HPCC figure (min over measurements, per ring, then the geometric mean).
 *
 * Args: --lat_size=B --bw_size=B --random_rings=N --measurements=M --seed=S --loop_lat=N
 *       --loop_bw=N --loop_time=S --validate=0|1 --buffers=separate|shared --corrupt=0|1
 *       --max_list=N (rings listed in params)
 */
#include "cb_common.h"
#include "cb_mpi.h"

#include <mpi.h>

#define TO_RIGHT 200
#define TO_LEFT 201
#define PARAMS_LEN 4096

static int rank, nranks;
static int shared; /* --buffers=shared: pass on what was just received */

#define die cb_mpi_die

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline unsigned char pattern(int src, int dir, int pat, int meas, long i) {
    return (unsigned char)((i * 131 + src * 29 + dir * 71 + pat * 13 + meas * 7 + 1) & 0xff);
}

typedef struct {
    unsigned char *sl, *sr, *rl, *rr; /* send left/right, receive from left/right */
} bufs_t;

static void sendrecv_once(bufs_t *b, int n, int left, int right) {
    MPI_Sendrecv(b->sr, n, MPI_BYTE, right, TO_RIGHT, b->rl, n, MPI_BYTE, left, TO_RIGHT, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(b->sl, n, MPI_BYTE, left, TO_LEFT, b->rr, n, MPI_BYTE, right, TO_LEFT, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
}

static void nonblocking_once(bufs_t *b, int n, int left, int right) {
    MPI_Request req[4];
    MPI_Irecv(b->rl, n, MPI_BYTE, left, TO_RIGHT, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(b->rr, n, MPI_BYTE, right, TO_LEFT, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(b->sr, n, MPI_BYTE, right, TO_RIGHT, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(b->sl, n, MPI_BYTE, left, TO_LEFT, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
}

/* Shared buffers: what came from the left goes to the right next time, and the other way. */
static void pass_on(bufs_t *b) {
    unsigned char *t = b->sr;
    b->sr = b->rl;
    b->rl = t;
    t = b->sl;
    b->sl = b->rr;
    b->rr = t;
}

/* One timed loop: one untimed iteration, then `loop` timed ones (HPCC). Returns seconds. */
static double timed_loop(int nonblocking, bufs_t *b, int n, int left, int right, long loop) {
    double start = 0;
    for (long i = -1; i < loop; i++) {
        if (i == 0) start = MPI_Wtime();
        if (nonblocking) nonblocking_once(b, n, left, right);
        else sendrecv_once(b, n, left, right);
        if (shared) pass_on(b);
    }
    return MPI_Wtime() - start;
}

static double geomean(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += log(v[i]);
    return exp(s / n);
}

/* Append printf-formatted text to a bounded buffer. */
static size_t app(char *buf, size_t len, size_t at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t app(char *buf, size_t len, size_t at, const char *fmt, ...) {
    if (at >= len) return at;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + at, len - at, fmt, ap);
    va_end(ap);
    return w < 0 ? at : at + (size_t)w;
}

int main(int argc, char **argv) {
    cb_mpi_start(&argc, &argv, &rank, &nranks, 1); /* only rank 0 speaks JSON */
    long lat_size = 8, bw_size = 2000000;
    int nrand = 5, nmeas = 3;
    uint64_t seed = 1;
    long loop_lat = 5, loop_bw = 2;
    double loop_time = 1e-3;
    int validate = 1, corrupt = 0, max_list = 64;
    const char *buffers = "separate";
    CB_OPTIONS(argc, argv, CB_OPT("lat_size", lat_size), CB_OPT("bw_size", bw_size),
               CB_OPT("random_rings", nrand), CB_OPT("measurements", nmeas), CB_OPT("seed", seed),
               CB_OPT("loop_lat", loop_lat), CB_OPT("loop_bw", loop_bw), CB_OPT("loop_time", loop_time),
               CB_OPT("validate", validate), CB_OPT("corrupt", corrupt), CB_OPT("max_list", max_list),
               CB_OPT("buffers", buffers));

    cb_mpi_report_placement(rank, nranks, NULL, NULL);
    if (nranks < 2) die("the ring needs 2 or more ranks, got %d", nranks);
    if (nrand < 0 || nmeas < 1 || lat_size < 1 || bw_size < 1 || loop_lat < 1 || loop_bw < 1)
        die("bad arguments: random_rings >= 0, measurements >= 1, sizes >= 1, loops >= 1");
    if (bw_size > (1L << 30) || lat_size > (1L << 30)) die("message size above 1 GiB");
    if (strcmp(buffers, "separate") && strcmp(buffers, "shared"))
        die("--buffers=%s: give separate or shared", buffers);
    shared = !strcmp(buffers, "shared");

    const int npat = nrand + 1;
    int *rings = malloc(sizeof(int) * (size_t)npat * (size_t)nranks);
    if (!rings) die("out of memory");
    if (rank == 0) {
        uint64_t s = seed;
        for (int p = 0; p < npat; p++) {
            int *r = rings + (size_t)p * nranks;
            for (int i = 0; i < nranks; i++) r[i] = i;
            if (p == 0) continue; /* the naturally ordered ring */
            for (int i = nranks - 1; i > 0; i--) {
                int j = (int)(splitmix64(&s) % (uint64_t)(i + 1));
                int t = r[i]; r[i] = r[j]; r[j] = t;
            }
        }
    }
    MPI_Bcast(rings, npat * nranks, MPI_INT, 0, MPI_COMM_WORLD);
    int *left = malloc(sizeof(int) * (size_t)npat), *right = malloc(sizeof(int) * (size_t)npat);
    int *left2 = malloc(sizeof(int) * (size_t)npat), *right2 = malloc(sizeof(int) * (size_t)npat);
    if (!left || !right || !left2 || !right2) die("out of memory");
    for (int p = 0; p < npat; p++) {
        const int *r = rings + (size_t)p * nranks;
        for (int i = 0; i < nranks; i++)
            if (r[i] == rank) {
                left[p] = r[(i - 1 + nranks) % nranks];
                right[p] = r[(i + 1) % nranks];
                left2[p] = r[(i - 2 + 2 * nranks) % nranks]; /* whose data arrives when passed on */
                right2[p] = r[(i + 2) % nranks];
            }
    }

    long maxb = lat_size > bw_size ? lat_size : bw_size;
    bufs_t b;
    b.sl = cb_alloc((size_t)maxb, -1);
    b.sr = cb_alloc((size_t)maxb, -1);
    b.rl = cb_alloc((size_t)maxb, -1);
    b.rr = cb_alloc((size_t)maxb, -1);
    size_t nlat = (size_t)nmeas * (size_t)npat;
    double *lat = malloc(sizeof(double) * nlat), *maxlat = malloc(sizeof(double) * nlat);
    double *loopsec = malloc(sizeof(double) * nlat), *maxloopsec = malloc(sizeof(double) * nlat);
    double *tmp = malloc(sizeof(double) * (size_t)(npat + nmeas));
    /* room for the fixed fields, every ring's figure and, listed, every ring's permutation */
    const size_t params_len = PARAMS_LEN + (size_t)npat * (32 + (nranks <= max_list ? 12 * (size_t)nranks : 0));
    char *params = malloc(params_len);
    if (!b.sl || !b.sr || !b.rl || !b.rr || !lat || !maxlat || !loopsec || !maxloopsec || !tmp || !params)
        die("out of memory for %ld-byte buffers", maxb);
    memset(b.sl, 1, (size_t)maxb);
    memset(b.sr, 2, (size_t)maxb);
    memset(b.rl, 0, (size_t)maxb);
    memset(b.rr, 0, (size_t)maxb);

    for (int which = 0; which < 2; which++) {
        const int is_bw = which == 1;
        const long size = is_bw ? bw_size : lat_size;
        const int n = (int)size;
        long loop = is_bw ? loop_bw : loop_lat;
        long sr_wins = 0, nb_wins = 0, bad = 0;
        long first_bad_pat = -1;
        double t_size = MPI_Wtime();
        for (int m = 0; m < nmeas; m++) {
            for (int p = 0; p < npat; p++) {
                const int L = left[p], R = right[p];
                double t_sr;
                for (;;) { /* grow the loop until it lasts loop_time on the slowest rank */
                    MPI_Barrier(MPI_COMM_WORLD);
                    double t = timed_loop(0, &b, n, L, R, loop), tmax;
                    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                    if (tmax >= loop_time || loop >= (1L << 30)) { t_sr = t; break; }
                    double f = tmax > 0 ? loop_time / tmax * 1.1 : 100.0;
                    if (f > 100.0) f = 100.0;
                    if (f < 1.5) f = 1.5;
                    loop = (long)ceil((double)loop * f);
                }
                MPI_Barrier(MPI_COMM_WORLD);
                double t_nb = timed_loop(1, &b, n, L, R, loop);
                double per_sr = t_sr / (2.0 * (double)loop), per_nb = t_nb / (2.0 * (double)loop);
                size_t k = (size_t)m * npat + (size_t)p;
                if (per_sr <= per_nb) { lat[k] = per_sr; loopsec[k] = t_sr; sr_wins++; }
                else { lat[k] = per_nb; loopsec[k] = t_nb; nb_wins++; }
                if (validate) { /* outside the timed loops */
                    for (long i = 0; i < size; i++) {
                        b.sr[i] = pattern(rank, 0, p, m, i);
                        b.sl[i] = pattern(rank, 1, p, m, i);
                    }
                    memset(b.rl, 0, (size_t)size);
                    memset(b.rr, 0, (size_t)size);
                    MPI_Barrier(MPI_COMM_WORLD);
                    nonblocking_once(&b, n, L, R);
                    int from_l = L, from_r = R; /* whose pattern must have arrived */
                    if (shared) { /* pass the received data on once more: the neighbours' neighbours' */
                        pass_on(&b);
                        memset(b.rl, 0, (size_t)size);
                        memset(b.rr, 0, (size_t)size);
                        nonblocking_once(&b, n, L, R);
                        from_l = left2[p];
                        from_r = right2[p];
                    }
                    if (corrupt && rank == 0) b.rl[size / 2] ^= 0x5a;
                    for (long i = 0; i < size; i++)
                        if (b.rl[i] != pattern(from_l, 0, p, m, i) || b.rr[i] != pattern(from_r, 1, p, m, i)) {
                            bad++;
                            if (first_bad_pat < 0) first_bad_pat = p;
                            break;
                        }
                }
            }
        }
        MPI_Reduce(lat, maxlat, (int)nlat, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(loopsec, maxloopsec, (int)nlat, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        long counts[3] = {bad, sr_wins, nb_wins}, tot[3] = {0, 0, 0};
        MPI_Reduce(counts, tot, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        double elapsed = MPI_Wtime() - t_size;
        if (rank != 0) continue;

        char detail[256];
        if (!validate)
            snprintf(detail, sizeof detail, "%ld B: data not checked (validate=0)", size);
        else if (tot[0])
            snprintf(detail, sizeof detail, "%ld B: %ld received message pair(s) differ from the pattern "
                     "(first in ring %ld on rank 0's side or another rank)", size, tot[0], first_bad_pat);
        else
            snprintf(detail, sizeof detail, "%ld B: every byte intact on all %d ranks in %d rings x %d "
                     "measurements", size, nranks, npat, nmeas);
        cb_json_begin("validation");
        cb_json_bool("ok", tot[0] == 0);
        cb_json_bool("checked", validate);
        cb_json_str("detail", detail);
        cb_json_end();

        /* per ring: min over measurements of the max over ranks */
        double *best = tmp; /* npat */
        for (int p = 0; p < npat; p++) {
            best[p] = maxlat[p];
            for (int m = 1; m < nmeas; m++)
                if (maxlat[(size_t)m * npat + p] < best[p]) best[p] = maxlat[(size_t)m * npat + p];
        }
        double nat = best[0], rnd = nrand > 0 ? geomean(best + 1, nrand) : NAN;
        const double scale = is_bw ? 0.0 : 1e6; /* latency in us; bandwidth = size / t in MB/s */
        for (int kind = 0; kind < 2; kind++) { /* 0 natural, 1 random */
            if (kind == 1 && nrand == 0) break;
            double samples[4096], times[4096];
            int ns = nmeas < 4096 ? nmeas : 4096;
            for (int m = 0; m < ns; m++) {
                const double *row = maxlat + (size_t)m * npat;
                double t = kind == 0 ? row[0] : geomean(row + 1, nrand);
                samples[m] = is_bw ? (double)size / t * 1e-6 : t * scale;
                double lsum = 0; /* the timed section behind this sample */
                if (kind == 0) lsum = maxloopsec[(size_t)m * npat];
                else for (int p = 1; p < npat; p++) lsum += maxloopsec[(size_t)m * npat + p] / nrand;
                times[m] = lsum;
            }
            double t = kind == 0 ? nat : rnd;
            double value = is_bw ? (double)size / t * 1e-6 : t * scale;
            size_t at = 0;
            at = app(params, params_len, at, "{\"size\":%ld,\"value\":%.17g,\"time_per_message_us\":%.17g,"
                     "\"loop_length\":%ld,\"measurements\":%d,\"random_rings\":%d,\"seed\":%llu,"
                     "\"sendrecv_wins\":%ld,\"nonblocking_wins\":%ld,\"elapsed_s\":%.6g,\"buffers\":\"%s\"",
                     size, value, t * 1e6, loop, nmeas, nrand, (unsigned long long)seed, tot[1], tot[2], elapsed,
                     shared ? "shared" : "separate");
            if (kind == 1) {
                at = app(params, params_len, at, ",\"per_ring_us\":[");
                for (int p = 1; p < npat; p++) at = app(params, params_len, at, p > 1 ? ",%.17g" : "%.17g", best[p] * 1e6);
                at = app(params, params_len, at, "]");
                double sorted[4096];
                int nr = nrand < 4096 ? nrand : 4096;
                memcpy(sorted, best + 1, sizeof(double) * (size_t)nr);
                qsort(sorted, (size_t)nr, sizeof(double), cb_cmp_double);
                at = app(params, params_len, at, ",\"fastest_ring_us\":%.9g,\"slowest_ring_us\":%.9g",
                         sorted[0] * 1e6, sorted[nr - 1] * 1e6);
                if (nranks <= max_list) {
                    at = app(params, params_len, at, ",\"rings\":[");
                    for (int p = 1; p < npat; p++) {
                        at = app(params, params_len, at, p > 1 ? ",[" : "[");
                        for (int i = 0; i < nranks; i++)
                            at = app(params, params_len, at, i ? ",%d" : "%d", rings[(size_t)p * nranks + i]);
                        at = app(params, params_len, at, "]");
                    }
                    at = app(params, params_len, at, "]");
                }
            }
            at = app(params, params_len, at, "}");
            if (at >= params_len) die("params record too long");
            char metric[64];
            snprintf(metric, sizeof metric, "%s_ring_%s", kind ? "random" : "natural", is_bw ? "bandwidth" : "latency");
            cb_json_begin("result");
            cb_json_str("metric", metric);
            cb_json_raw("params", params);
            cb_json_nums("samples", samples, ns);
            cb_json_nums("times_s", times, ns);
            cb_json_end();
        }
    }
    cb_mpi_finish(rank, -1);
    return 0;
}
