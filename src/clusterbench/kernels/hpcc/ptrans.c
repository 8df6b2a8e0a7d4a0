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
 *       otherwise {"type":"result", "metric":"gbs", "samples", "times_s", "params":{n, nb, grid,
 *       residual, residual_max_abs, threshold, eps, peers}} after validation, or an error record.
 */
#include "cb_common.h"
#include "cb_mpi.h"

#include <float.h>
#include <mpi.h>

#define THRESHOLD 16.0
#define CHUNK ((size_t)1 << 27) /* doubles per message at most (1 GiB) */
#define TILE 16

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

/* Block lists per peer (CSR): sends: this rank's A blocks (local block index lbi * nbc + lbj) in
 * (I, J) order grouped by destination; recvs: its result blocks in (J, I) order grouped by source. */
static long long *send_off, *recv_off;   /* nranks + 1 offsets into the lists */
static long long *send_list, *recv_list; /* local block indices */
static size_t *send_cnt, *recv_cnt, *send_pos, *recv_pos; /* doubles per peer, and where they start */

static void plan(void) {
    long long nblocks = nbr * nbc;
    send_off = calloc((size_t)nranks + 1, sizeof *send_off);
    recv_off = calloc((size_t)nranks + 1, sizeof *recv_off);
    send_list = malloc((size_t)(nblocks ? nblocks : 1) * sizeof *send_list);
    recv_list = malloc((size_t)(nblocks ? nblocks : 1) * sizeof *recv_list);
    send_cnt = calloc((size_t)nranks, sizeof *send_cnt);
    recv_cnt = calloc((size_t)nranks, sizeof *recv_cnt);
    send_pos = calloc((size_t)nranks + 1, sizeof *send_pos);
    recv_pos = calloc((size_t)nranks + 1, sizeof *recv_pos);
    long long *fill = calloc((size_t)nranks, sizeof *fill);
    if (!send_off || !recv_off || !send_list || !recv_list || !send_cnt || !recv_cnt || !send_pos || !recv_pos || !fill)
        cb_mpi_die("out of memory (transpose plan of %lld blocks on rank %d)", nblocks, rank);
    /* A block (I, J) here goes to the owner of result block (J, I): (J mod P, I mod Q) */
    for (long long lbi = 0; lbi < nbr; lbi++)
        for (long long lbj = 0; lbj < nbc; lbj++) {
            long long I = grow(lbi), J = gcol(lbj);
            int d = (int)(J % P) * Q + (int)(I % Q);
            send_off[d + 1]++;
            send_cnt[d] += (size_t)(bsize(I) * bsize(J));
        }
    /* result block (I, J) here comes from the owner of A's block (J, I): (J mod P, I mod Q) */
    for (long long lbj = 0; lbj < nbc; lbj++)
        for (long long lbi = 0; lbi < nbr; lbi++) {
            long long I = grow(lbi), J = gcol(lbj);
            int s = (int)(J % P) * Q + (int)(I % Q);
            recv_off[s + 1]++;
            recv_cnt[s] += (size_t)(bsize(I) * bsize(J));
        }
    for (int r = 0; r < nranks; r++) {
        send_off[r + 1] += send_off[r];
        recv_off[r + 1] += recv_off[r];
        send_pos[r + 1] = send_pos[r] + send_cnt[r];
        recv_pos[r + 1] = recv_pos[r] + recv_cnt[r];
    }
    for (int r = 0; r < nranks; r++) fill[r] = send_off[r];
    for (long long lbi = 0; lbi < nbr; lbi++)
        for (long long lbj = 0; lbj < nbc; lbj++) {
            long long I = grow(lbi), J = gcol(lbj);
            send_list[fill[(int)(J % P) * Q + (int)(I % Q)]++] = lbi * nbc + lbj;
        }
    for (int r = 0; r < nranks; r++) fill[r] = recv_off[r];
    for (long long lbj = 0; lbj < nbc; lbj++)
        for (long long lbi = 0; lbi < nbr; lbi++) {
            long long I = grow(lbi), J = gcol(lbj);
            recv_list[fill[(int)(J % P) * Q + (int)(I % Q)]++] = lbi * nbc + lbj;
        }
    free(fill);
}

/* The block at local block (lbi, lbj) of m (r x c), written transposed (c x r, row-major) to t. */
static void pack_block(const double *restrict m, long long lbi, long long lbj, double *restrict t) {
    long long r = bsize(grow(lbi)), c = bsize(gcol(lbj));
    const double *src = m + lbi * nb * lc + lbj * nb;
    for (long long x0 = 0; x0 < r; x0 += TILE)
        for (long long y0 = 0; y0 < c; y0 += TILE) {
            long long x1 = x0 + TILE < r ? x0 + TILE : r, y1 = y0 + TILE < c ? y0 + TILE : c;
            for (long long y = y0; y < y1; y++)
                for (long long x = x0; x < x1; x++) t[y * r + x] = src[x * lc + y];
        }
}

/* Result block (lbi, lbj) of out = t (already transposed, rows x cols row-major) + b. */
static void unpack_block(double *restrict out, const double *restrict b, long long lbi, long long lbj,
                         const double *restrict t) {
    long long r = bsize(grow(lbi)), c = bsize(gcol(lbj));
    long long off = lbi * nb * lc + lbj * nb;
    for (long long x = 0; x < r; x++) {
        const double *tr = t + x * c, *br = b + off + x * lc;
        double *orow = out + off + x * lc;
        for (long long y = 0; y < c; y++) orow[y] = tr[y] + br[y];
    }
}

static MPI_Request *reqs;
static int npeers_send, npeers_recv;

static size_t chunks(size_t count) { return (count + CHUNK - 1) / CHUNK; }

/* *a := a^T + b; w is the work buffer (as large as a); returns with *a and *w swapped. */
static void transpose_add(double **a, double **w, const double *b) {
    double *A = *a, *W = *w;
    /* 1. pack every A block, transposed, by destination */
    for (int d = 0; d < nranks; d++) {
        double *t = W + send_pos[d];
        for (long long k = send_off[d]; k < send_off[d + 1]; k++) {
            long long blk = send_list[k], lbi = blk / nbc, lbj = blk % nbc;
            pack_block(A, lbi, lbj, t);
            t += bsize(grow(lbi)) * bsize(gcol(lbj));
        }
    }
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
    for (int s = 0; s < nranks; s++) {
        const double *t = A + recv_pos[s];
        for (long long k = recv_off[s]; k < recv_off[s + 1]; k++) {
            long long blk = recv_list[k], lbi = blk / nbc, lbj = blk % nbc;
            unpack_block(W, b, lbi, lbj, t);
            t += bsize(grow(lbi)) * bsize(gcol(lbj));
        }
    }
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
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    n = cb_arg_ll(argc, argv, "n", 1000);
    nb = cb_arg_ll(argc, argv, "nb", 64);
    P = (int)cb_arg_ll(argc, argv, "p", 1);
    Q = (int)cb_arg_ll(argc, argv, "q", nranks);
    int samples = (int)cb_arg_ll(argc, argv, "samples", 5);
    int selftest = (int)cb_arg_ll(argc, argv, "selftest", 0), corrupt = (int)cb_arg_ll(argc, argv, "corrupt", 0);
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
    generate(b, 1);
    memset(w, 0, elems * sizeof(double)); /* touch every page before timing */
    generate(a, 0);
    cb_mpi_report_placement(rank, nranks, info_extra, NULL);
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
        if (!(scaled <= THRESHOLD))
            cb_mpi_die("validation failed: PTRANS residual max|A - (A0^T + B)| / (eps n) = %.3g, above HPCC's "
                       "threshold %g (largest difference %.3g)", scaled, THRESHOLD, gres);
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
