/* ptrans.c: HPC Challenge PTRANS (parallel matrix transpose), written afresh for clusterbench.
 *
 * Operation: A := A^T + B for n x n double matrices A and B.
 *
 * Distribution: 2-D block-cyclic, NB x NB blocks, on a P x Q process grid in row-major rank order
 * (rank = p * Q + q, ScaLAPACK's "Row-major" grid, HPCC's). Global element (i, j) is in block
 * (i / NB, j / NB), owned by process (i / NB mod P, j / NB mod Q); n need not be a multiple of NB
 * (the last block row and column are partial). Each process stores its blocks as one local
 * row-major matrix of numroc(n, NB, p, P) rows and numroc(n, NB, q, Q) columns.
 *
 * Entries, from the global indices only (tests and validation need no communication of inputs):
 *   a(i, j) = ((7 i + 13 j) mod 101) / 50 - 1,   b(i, j) = ((3 i + 11 j) mod 97) / 48 - 1.
 *
 * The transpose: result block (I, J) needs A's block (J, I), owned by process (J mod P, I mod Q).
 * Every process packs each of its A blocks transposed into a send buffer, grouped by the process
 * that owns the result block (blocks of one destination in (I, J) order of the source, which is
 * the (J, I) order the destination walks, so no block index travels), sends each group as one
 * message (chunked below 2^27 doubles; the group for itself is copied), receives into A's own
 * memory (A's values are all packed by then), and adds B while unpacking into the send buffer,
 * which then becomes A. Three local matrices in all: A, B, and the send buffer. The peers are the
 * processes a rank shares blocks with (P = Q: one; P != Q: up to lcm(P,Q)/P x lcm(P,Q)/Q), sent to
 * in rank order starting after this rank, so the ranks do not all target the same one at once.
 *
 * Timing: --samples times; before each, A is regenerated (not timed); a barrier, then the time of
 * the transpose-and-add (pack, exchange, unpack with B) on every rank; a sample's time is the
 * maximum over ranks. GB/s = 8 n^2 / t / 1e9, HPCC's PTRANS_GBs (pdtransdriver.c: 1e-9 / wtime *
 * m * n * sizeof(double), wtime the maximum over processes).
 *
 * Validation (after the timed samples, on the last result): every rank compares its elements with
 * a(j, i) + b(i, j) computed from the formulas; the largest difference, reduced over ranks, scaled
 * as HPCC does (residual / (eps n), eps = 2^-53), must be at most 16 (HPCC's threshold);
 * otherwise an error record and exit. A correct run gives 0 (one exact rounding on both sides).
 *
 * Args: --n=N --nb=NB --p=P --q=Q (P * Q = ranks) --samples=S --selftest=1 (one transpose, then the
 *       checksums sum c(i,j) ((5 i + j) mod 17) and sum c(i,j) ((i + 3 j) mod 13) over all global
 *       elements, reduced) --corrupt=1 (test hook: one element damaged after the last sample).
 * Output (rank 0): info; selftest: {"type":"selftest", "checksum", "checksum2", "n", "residual"};
 *       otherwise validation {ok, detail, residual, residual_max_abs, threshold}, then (when it
 *       passed) {"type":"result", "metric":"gbs", "samples", "times_s", "params":{n, nb, grid,
 *       residual, residual_max_abs, threshold, eps, peers}}; a failed validation ends with an error record.
 */
#include "cb_common.h"
#include "cb_mpi.h"

#include <float.h>
#include <mpi.h>

#define THRESHOLD 16.0
#define CHUNK ((size_t)1 << 27) /* doubles per message at most (1 GiB) */

static long long n, nb;
static int P, Q, myr, myc, rank, nranks;
static long long lr, lc;        /* local rows, columns */
static long long nbr, nbc;      /* local block rows, block columns */

/* Elements of the blocks ScaLAPACK's numroc gives a process: blocks i with i mod np == ip. */
static long long numroc(long long n_, long long nb_, int ip, int np) {
    long long blocks = n_ / nb_, extra = n_ % nb_;
    long long mine = blocks / np * nb_;
    long long rest = blocks % np;
    if (ip < rest) mine += nb_;
    else if (ip == rest) mine += extra;
    return mine;
}

static inline long long bsize(long long gblock) { /* rows (or columns) of global block row gblock */
    long long r = n - gblock * nb;
    return r < nb ? r : nb;
}
static inline long long grow(long long lbi) { return (lbi * P + myr); } /* global block row of local block row */
static inline long long gcol(long long lbj) { return (lbj * Q + myc); }

static inline double aval(long long i, long long j) { return (double)((7 * i + 13 * j) % 101) / 50.0 - 1.0; }
static inline double bval(long long i, long long j) { return (double)((3 * i + 11 * j) % 97) / 48.0 - 1.0; }

/* Fill the local part of a (which = 0) or b (which = 1), incrementally along each row. */
static void generate(double *m, int which) {
    long long mul_i = which ? 3 : 7, mul_j = which ? 11 : 13, mod = which ? 97 : 101;
    double div = which ? 48.0 : 50.0;
    for (long long li = 0; li < lr; li++) {
        long long i = grow(li / nb) * nb + li % nb;
        double *row = m + li * lc;
        for (long long lbj = 0; lbj < nbc; lbj++) {
            long long j0 = gcol(lbj) * nb, c = bsize(gcol(lbj));
            long long v = (mul_i * i + mul_j * j0) % mod;
            double *out = row + lbj * nb;
            for (long long y = 0; y < c; y++) {
                out[y] = (double)v / div - 1.0;
                v += mul_j;
                if (v >= mod) v -= mod;
            }
        }
    }
}

/* Where each block travels: spos[k] is where local A block k (= lbi * nbc + lbj) goes, packed
 * transposed, in the send buffer (grouped by destination, in (I, J) order within a group); rpos[k]
 * where the data of local result block k is in the receive buffer (grouped by source, in (J, I)
 * order within a group, the order its source packed them). send_cnt/recv_cnt: doubles per peer;
 * send_pos/recv_pos: where each peer's group starts. */
static size_t *spos, *rpos;
static size_t *send_cnt, *recv_cnt, *send_pos, *recv_pos;

static inline int dest_of(long long lbi, long long lbj) { /* owner of result block (J, I) = of A block (J, I) */
    return (int)(gcol(lbj) % P) * Q + (int)(grow(lbi) % Q);
}

static void plan(void) {
    long long nblocks = nbr * nbc;
    spos = malloc((size_t)(nblocks ? nblocks : 1) * sizeof *spos);
    rpos = malloc((size_t)(nblocks ? nblocks : 1) * sizeof *rpos);
    send_cnt = calloc((size_t)nranks, sizeof *send_cnt);
    recv_cnt = calloc((size_t)nranks, sizeof *recv_cnt);
    send_pos = calloc((size_t)nranks + 1, sizeof *send_pos);
    recv_pos = calloc((size_t)nranks + 1, sizeof *recv_pos);
    size_t *fill = calloc((size_t)nranks, sizeof *fill);
    if (!spos || !rpos || !send_cnt || !recv_cnt || !send_pos || !recv_pos || !fill)
        cb_mpi_die("out of memory (transpose plan of %lld blocks on rank %d)", nblocks, rank);
    /* A block (I, J) here goes to the owner of result block (J, I), (J mod P, I mod Q); result
     * block (I, J) here comes from the owner of A block (J, I), the same formula */
    for (long long lbi = 0; lbi < nbr; lbi++)
        for (long long lbj = 0; lbj < nbc; lbj++) {
            size_t sz = (size_t)(bsize(grow(lbi)) * bsize(gcol(lbj)));
            send_cnt[dest_of(lbi, lbj)] += sz;
            recv_cnt[dest_of(lbi, lbj)] += sz;
        }
    for (int r = 0; r < nranks; r++) {
        send_pos[r + 1] = send_pos[r] + send_cnt[r];
        recv_pos[r + 1] = recv_pos[r] + recv_cnt[r];
    }
    for (int r = 0; r < nranks; r++) fill[r] = send_pos[r];
    for (long long lbi = 0; lbi < nbr; lbi++) /* sender's order: (I, J) */
        for (long long lbj = 0; lbj < nbc; lbj++) {
            int d = dest_of(lbi, lbj);
            spos[lbi * nbc + lbj] = fill[d];
            fill[d] += (size_t)(bsize(grow(lbi)) * bsize(gcol(lbj)));
        }
    for (int r = 0; r < nranks; r++) fill[r] = recv_pos[r];
    for (long long lbj = 0; lbj < nbc; lbj++) /* receiver's order: (J, I), its source's (I', J') */
        for (long long lbi = 0; lbi < nbr; lbi++) {
            int s = dest_of(lbi, lbj);
            rpos[lbi * nbc + lbj] = fill[s];
            fill[s] += (size_t)(bsize(grow(lbi)) * bsize(gcol(lbj)));
        }
    free(fill);
}

/* Pack every local block of m transposed to its place in w: strips of 8 rows across the whole
 * local row (8 long read streams), each column of a strip written as one 64-byte run. */
static void pack(const double *restrict m, double *restrict w) {
    for (long long lbi = 0; lbi < nbr; lbi++) {
        long long r = bsize(grow(lbi));
        for (long long x0 = 0; x0 < r; x0 += 8) {
            long long h = r - x0 < 8 ? r - x0 : 8;
            const double *srow = m + (lbi * nb + x0) * lc;
            for (long long lbj = 0; lbj < nbc; lbj++) {
                long long c = bsize(gcol(lbj));
                const double *src = srow + lbj * nb;
                double *dst = w + spos[lbi * nbc + lbj] + x0;
                if (h == 8) {
                    for (long long y = 0; y < c; y++) {
                        const double *sp = src + y;
                        double *d = dst + y * r;
                        d[0] = sp[0];
                        d[1] = sp[lc];
                        d[2] = sp[2 * lc];
                        d[3] = sp[3 * lc];
                        d[4] = sp[4 * lc];
                        d[5] = sp[5 * lc];
                        d[6] = sp[6 * lc];
                        d[7] = sp[7 * lc];
                    }
                } else {
                    for (long long y = 0; y < c; y++)
                        for (long long x = 0; x < h; x++) dst[y * r + x] = src[x * lc + y];
                }
            }
        }
    }
}

/* out = the received blocks (each already transposed: rows x cols, row-major) + b, row by row. */
static void unpack(const double *restrict t, const double *restrict b, double *restrict out) {
    for (long long lbi = 0; lbi < nbr; lbi++) {
        long long r = bsize(grow(lbi));
        for (long long x = 0; x < r; x++) {
            long long off = (lbi * nb + x) * lc;
            for (long long lbj = 0; lbj < nbc; lbj++) {
                long long c = bsize(gcol(lbj));
                const double *tr = t + rpos[lbi * nbc + lbj] + x * c, *br = b + off + lbj * nb;
                double *orow = out + off + lbj * nb;
                for (long long y = 0; y < c; y++) orow[y] = tr[y] + br[y];
            }
        }
    }
}

static MPI_Request *reqs;
static int npeers_send, npeers_recv;

static size_t chunks(size_t count) { return (count + CHUNK - 1) / CHUNK; }

/* *a := a^T + b; w is the work buffer (as large as a); returns with *a and *w swapped. */
static void transpose_add(double **a, double **w, const double *b) {
    double *A = *a, *W = *w;
    /* 1. pack every A block, transposed, by destination */
    pack(A, W);
    /* 2. exchange into A's memory (its values are all packed): receives first, then sends */
    int nr = 0;
    for (int k = 1; k < nranks; k++) {
        int s = (rank - k + nranks) % nranks;
        for (size_t c = 0, m = chunks(recv_cnt[s]); c < m; c++) {
            size_t len = recv_cnt[s] - c * CHUNK < CHUNK ? recv_cnt[s] - c * CHUNK : CHUNK;
            MPI_Irecv(A + recv_pos[s] + c * CHUNK, (int)len, MPI_DOUBLE, s, (int)c, MPI_COMM_WORLD, &reqs[nr++]);
        }
    }
    if (recv_cnt[rank]) memcpy(A + recv_pos[rank], W + send_pos[rank], recv_cnt[rank] * sizeof(double));
    for (int k = 1; k < nranks; k++) {
        int d = (rank + k) % nranks;
        for (size_t c = 0, m = chunks(send_cnt[d]); c < m; c++) {
            size_t len = send_cnt[d] - c * CHUNK < CHUNK ? send_cnt[d] - c * CHUNK : CHUNK;
            MPI_Isend(W + send_pos[d] + c * CHUNK, (int)len, MPI_DOUBLE, d, (int)c, MPI_COMM_WORLD, &reqs[nr++]);
        }
    }
    MPI_Waitall(nr, reqs, MPI_STATUSES_IGNORE);
    /* 3. unpack with B into W, which becomes A */
    unpack(A, b, W);
    *a = W;
    *w = A;
}

/* Largest |c(i,j) - (a(j,i) + b(i,j))| over the local elements. */
static double local_residual(const double *c) {
    double worst = 0;
    for (long long li = 0; li < lr; li++) {
        long long i = grow(li / nb) * nb + li % nb;
        for (long long lbj = 0; lbj < nbc; lbj++) {
            long long j0 = gcol(lbj) * nb, w = bsize(gcol(lbj));
            long long va = (7 * j0 + 13 * i) % 101, vb = (3 * i + 11 * j0) % 97;
            const double *row = c + li * lc + lbj * nb;
            for (long long y = 0; y < w; y++) {
                double want = ((double)va / 50.0 - 1.0) + ((double)vb / 48.0 - 1.0);
                double d = fabs(row[y] - want);
                if (!(d <= worst)) worst = d; /* NaN propagates */
                va += 7;
                if (va >= 101) va -= 101;
                vb += 11;
                if (vb >= 97) vb -= 97;
            }
        }
    }
    return worst;
}

static void checksums(const double *c, double *s1, double *s2) {
    double l[2] = {0, 0}, g[2];
    for (long long li = 0; li < lr; li++) {
        long long i = grow(li / nb) * nb + li % nb;
        for (long long lj = 0; lj < lc; lj++) {
            long long j = gcol(lj / nb) * nb + lj % nb;
            double v = c[li * lc + lj];
            l[0] += v * (double)((5 * i + j) % 17);
            l[1] += v * (double)((i + 3 * j) % 13);
        }
    }
    MPI_Reduce(l, g, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    *s1 = g[0];
    *s2 = g[1];
}

static void info_extra(const void *arg) {
    (void)arg;
    cb_json_int("n", n);
    cb_json_int("nb", nb);
    int g[2] = {P, Q};
    cb_json_ints("grid", g, 2);
}

int main(int argc, char **argv) {
    cb_mpi_start(&argc, &argv, &rank, &nranks, 0);
    n = 1000;
    nb = 64;
    P = 1;
    Q = nranks;
    int samples = 5;
    int selftest = 0, corrupt = 0;
    CB_OPTIONS(argc, argv, CB_OPT("n", n), CB_OPT("nb", nb), CB_OPT("p", P), CB_OPT("q", Q),
               CB_OPT("samples", samples), CB_OPT("selftest", selftest), CB_OPT("corrupt", corrupt));
    if (n < 1) cb_mpi_die("--n must be 1 or more");
    if (nb < 1) cb_mpi_die("--nb must be 1 or more");
    if (P < 1 || Q < 1 || (long long)P * Q != nranks) cb_mpi_die("grid %dx%d does not match %d ranks", P, Q, nranks);
    if (samples < 1) cb_mpi_die("--samples must be 1 or more");
    myr = rank / Q;
    myc = rank % Q;
    lr = numroc(n, nb, myr, P);
    lc = numroc(n, nb, myc, Q);
    nbr = (lr + nb - 1) / nb;
    nbc = (lc + nb - 1) / nb;
    size_t elems = (size_t)(lr * lc), bytes = (elems ? elems : 1) * sizeof(double);
    double *a = cb_alloc(bytes, 1), *w = cb_alloc(bytes, 1), *b = cb_alloc(bytes, 1);
    if (!a || !w || !b) cb_mpi_die("cannot allocate 3 local matrices of %.2f GiB on rank %d", (double)bytes / (1 << 30), rank);
    plan();
    int maxmsg = 0;
    for (int r = 0; r < nranks; r++) maxmsg += (int)(chunks(send_cnt[r]) + chunks(recv_cnt[r]));
    reqs = malloc((size_t)(maxmsg ? maxmsg : 1) * sizeof *reqs);
    if (!reqs) cb_mpi_die("out of memory");
    npeers_send = npeers_recv = 0;
    for (int r = 0; r < nranks; r++) {
        npeers_send += r != rank && send_cnt[r];
        npeers_recv += r != rank && recv_cnt[r];
    }
    /* placement first: generating large matrices takes seconds, and the launcher counts a job
     * that has said nothing by its launch timeout as hung */
    cb_mpi_report_placement(rank, nranks, info_extra, NULL);
    generate(b, 1);
    memset(w, 0, elems * sizeof(double)); /* touch every page before timing */
    generate(a, 0);
    const double eps = DBL_EPSILON / 2; /* 2^-53, HPL's and HPCC's eps */

    if (selftest) {
        transpose_add(&a, &w, b);
        double s1, s2, res = local_residual(a), gres = 0;
        checksums(a, &s1, &s2);
        MPI_Reduce(&res, &gres, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            cb_json_begin("selftest");
            cb_json_int("n", n);
            cb_json_num("checksum", s1);
            cb_json_num("checksum2", s2);
            cb_json_num("residual", gres / (eps * (double)n));
            cb_json_end();
        }
        return cb_mpi_finish(rank, -1);
    }

    double *ts = calloc((size_t)samples, sizeof(double)), *gbs = calloc((size_t)samples, sizeof(double));
    if (!ts || !gbs) cb_mpi_die("out of memory");
    for (int s = 0; s < samples; s++) {
        if (s) generate(a, 0); /* A afresh (not timed); B is never written */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        transpose_add(&a, &w, b);
        double t = MPI_Wtime() - t0, tmax = 0;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        ts[s] = tmax;
        gbs[s] = tmax > 0 ? 8.0 * (double)n * (double)n / tmax / 1e9 : 0;
    }
    if (corrupt && elems) a[0] += 1.0; /* test hook: global (0, 0) on rank 0 */
    double res = local_residual(a), gres = 0;
    MPI_Allreduce(&res, &gres, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double scaled = gres / (eps * (double)n);
    int peers = npeers_send > npeers_recv ? npeers_send : npeers_recv, maxpeers = 0;
    MPI_Reduce(&peers, &maxpeers, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        int ok = scaled <= THRESHOLD; /* false for NaN too */
        char detail[256];
        snprintf(detail, sizeof detail, "PTRANS residual max|A - (A0^T + B)| / (eps n) = %.3g, %s HPCC's threshold "
                 "%g (largest difference %.3g)", scaled, ok ? "within" : "above", THRESHOLD, gres);
        cb_validation_begin(ok, detail);
        cb_json_num("residual", scaled);
        cb_json_num("residual_max_abs", gres);
        cb_json_num("threshold", THRESHOLD);
        cb_json_end();
        if (!ok) cb_mpi_die("validation failed: %s", detail);
        cb_json_begin("result");
        cb_json_str("metric", "gbs");
        cb_json_nums("samples", gbs, samples);
        cb_json_nums("times_s", ts, samples);
        cb_json_key("params");
        cb_json_first = 1;
        putchar('{');
        cb_json_int("n", n);
        cb_json_int("nb", nb);
        int g[2] = {P, Q};
        cb_json_ints("grid", g, 2);
        cb_json_num("residual", scaled);
        cb_json_num("residual_max_abs", gres);
        cb_json_num("threshold", THRESHOLD);
        cb_json_num("eps", eps);
        cb_json_int("peers", maxpeers);
        putchar('}');
        cb_json_first = 0;
        cb_json_end();
    }
    free(ts);
    free(gbs);
    return cb_mpi_finish(rank, -1);
}
