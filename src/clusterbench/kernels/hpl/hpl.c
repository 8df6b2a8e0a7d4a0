/* hpl.c: High Performance Linpack, clusterbench's own engine (HPL's method, written afresh).
 *
 * Solves A x = b, A an N x N random matrix, in double precision on a P x Q process grid
 * (process mapping row- or column-major, as HPL's PMAP), and reports it as HPL does.
 *
 * Matrix: a(i,j) = a counter-based hash (splitmix64 finaliser) of (seed, i, j), uniform in
 * [-0.5, 0.5); b is column N of the same generator. Every element depends on its global
 * position only, so the matrix is the same for every grid, NB and process count, and the
 * residual check regenerates it instead of keeping a copy.
 *
 * Layout: 2-D block-cyclic over the grid, NB x NB blocks, local storage column major with a
 * padded leading dimension; [A b] is stored as N x (N+1) so that the forward substitution with L
 * happens during the factorisation (as HPL), leaving only U x = y.
 *
 * Factorisation: right-looking blocked LU with partial row pivoting. Per panel of NB columns:
 *   pfact  recursive panel factorisation (halves down to --nbmin columns, then column by column;
 *          dtrsm + dgemm between the halves); with P > 1 the pivot search, the swap and the pivot
 *          row's broadcast are one MPI_Allreduce per column (a user op carrying both the best
 *          candidate row and the current diagonal row, the idea of HPL's pdmxswp);
 *   bcast  the factored panel (L and the pivot indices) along the process row: a ring of
 *          non-blocking sends, progressed between chunks of the update;
 *   swap   the panel's row interchanges on the trailing columns (P = 1: in place, column by
 *          column; P > 1: one MPI_Gatherv of the rows that become U to the diagonal process row
 *          and one MPI_Scatterv of the rows they displace, then U is broadcast down the column);
 *   update U12 = L11^-1 A12 (dtrsm) and A22 -= L21 U12 (dgemm), in column chunks.
 * Look-ahead of depth 1: the process column owning the next panel first updates those NB
 * columns only, factors the next panel and starts its broadcast, then updates the rest, so the
 * panel factorisation and its broadcast overlap the bulk of the update.
 * Solve: U x = y by block back substitution (per block: a row reduce of y, dtrsm on the diagonal
 * block, a column broadcast of x_k, a dgemv for the rows above).
 *
 * Reported: time_s (wall, MPI_Wtime, from a barrier before the factorisation to the end of the
 * solve, generation excluded, as HPL), phase_unix (that timed phase in CLOCK_REALTIME seconds: the
 * earliest start and the latest end over the ranks, for the energy over exactly it),
 * Gflop/s = (2/3 N^3 + 3/2 N^2) / t / 1e9 (HPL's count), the
 * scaled residual ||Ax-b||_oo / (eps (||A||_oo ||x||_oo + ||b||_oo) N), eps = 2^-53 (LAPACK's
 * dlamch('E'), what HPL prints), which must be below --threshold (16) to PASS; the breakdown of
 * the time into pfact, bcast, swap, update, solve and other, each the maximum over ranks (and the
 * mean over ranks beside it).
 *
 * Output (rank 0): info (placement of every rank, grid, BLAS mapped), validation (ok=false and exit
 * status 1 when the residual check fails: no result), result (metric gflops).
 *
 * Args: --lib=PATH (BLAS .so, dlopen: cblas_* or Fortran *_) --n=N --nb=NB --p=P --q=Q --pmap=row|col
 *       --seed=S --nbmin=16 --chunk=COLS --threshold=16 --cpus=LIST (hybrid: this rank's cpus, its
 *       BLAS threads inherit the mask) --xout=PATH (rank 0 writes x, N doubles) --aout=PATH (rank 0
 *       writes A column major then b; N <= 4000) --corrupt=1 (test: perturb x before the check)
 *       --die_rank=R --die_step=K (test: rank R kills itself at panel K)
 */
#include "cb_common.h"
#include "cb_blas.h"
#include "cb_mpi.h"

#include <dlfcn.h>
#include <float.h>
#include <limits.h>

#define die cb_mpi_die

/* ---- BLAS, loaded at run time ---------------------------------------------------------- */
enum { CblasColMajor = 102, CblasNoTrans = 111, CblasUpper = 121, CblasLower = 122, CblasNonUnit = 131,
       CblasUnit = 132, CblasLeft = 141 };
typedef void (*c_gemm_t)(int, int, int, int, int, int, double, const double *, int, const double *, int, double,
                         double *, int);
typedef void (*c_trsm_t)(int, int, int, int, int, int, int, double, const double *, int, double *, int);
typedef void (*c_gemv_t)(int, int, int, int, double, const double *, int, const double *, int, double, double *,
                         int);
typedef void (*f_gemm_t)(const char *, const char *, const int *, const int *, const int *, const double *,
                         const double *, const int *, const double *, const int *, const double *, double *,
                         const int *, size_t, size_t);
typedef void (*f_trsm_t)(const char *, const char *, const char *, const char *, const int *, const int *,
                         const double *, const double *, const int *, double *, const int *, size_t, size_t,
                         size_t, size_t);
typedef void (*f_gemv_t)(const char *, const int *, const int *, const double *, const double *, const int *,
                         const double *, const int *, const double *, double *, const int *, size_t);

static c_gemm_t cgemm;
static c_trsm_t ctrsm;
static c_gemv_t cgemv;
static f_gemm_t fgemm;
static f_trsm_t ftrsm;
static f_gemv_t fgemv;

/* C -= A B, A m x k, B k x n */
static void gemm_sub(int m, int n, int k, const double *a, int lda, const double *b, int ldb, double *c, int ldc) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    if (cgemm) {
        cgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, -1.0, a, lda, b, ldb, 1.0, c, ldc);
    } else {
        const double mone = -1.0, one = 1.0;
        fgemm("N", "N", &m, &n, &k, &mone, a, &lda, b, &ldb, &one, c, &ldc, 1, 1);
    }
}

/* B = T^-1 B, T m x m lower unit (upper = 0) or upper non-unit (upper = 1) */
static void trsm_left(int upper, int m, int n, const double *t, int ldt, double *b, int ldb) {
    if (m <= 0 || n <= 0) return;
    if (ctrsm) {
        ctrsm(CblasColMajor, CblasLeft, upper ? CblasUpper : CblasLower, CblasNoTrans,
              upper ? CblasNonUnit : CblasUnit, m, n, 1.0, t, ldt, b, ldb);
    } else {
        const double one = 1.0;
        ftrsm("L", upper ? "U" : "L", "N", upper ? "N" : "U", &m, &n, &one, t, &ldt, b, &ldb, 1, 1, 1, 1);
    }
}

/* y += alpha A x */
static void gemv_add(int m, int n, double alpha, const double *a, int lda, const double *x, double *y) {
    if (m <= 0 || n <= 0) return;
    if (cgemv) {
        cgemv(CblasColMajor, CblasNoTrans, m, n, alpha, a, lda, x, 1, 1.0, y, 1);
    } else {
        const double one = 1.0;
        const int inc = 1;
        fgemv("N", &m, &n, &alpha, a, &lda, x, &inc, &one, y, &inc, 1);
    }
}

/* ---- the matrix generator ---------------------------------------------------------------- */
static inline double gen(uint64_t seed, long long i, long long j) {
    uint64_t z = seed * 0xd1342543de82ef95ull + (uint64_t)j * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53 - 0.5;
}

/* ---- block-cyclic bookkeeping --------------------------------------------------------------- */
/* How many of the first n indices (blocks of nb, dealt cyclically from process 0) process ip holds. */
static int numroc(int n, int nb, int ip, int np) {
    int nblocks = n / nb, num = (nblocks / np) * nb, extra = nblocks % np;
    if (ip < extra) num += nb;
    else if (ip == extra) num += n % nb;
    return num;
}
/* Wall-clock time (CLOCK_REALTIME, unix seconds): the timed phase's ends, so a power meter's
 * samples (stamped with the same clock) are integrated over exactly that phase. */
static double wall_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int owner_of(int g, int nb, int np) { return (g / nb) % np; }
static inline int g2l(int g, int nb, int np) { return (g / (nb * np)) * nb + g % nb; }
static inline int l2g(int l, int nb, int np, int ip) { return ((l / nb) * np + ip) * nb + l % nb; }

typedef struct {
    int n, nb, p, q, nbmin, chunk;
    int rank, nranks, myrow, mycol;
    int mp, nq, lda;
    uint64_t seed;
    MPI_Comm row, col; /* row: same process row, rank = mycol; col: same process column, rank = myrow */
    MPI_Op pivop;
    double *a;
    double *pbuf[2];     /* panel broadcast buffers: L rows then the pivot indices (as doubles) */
    MPI_Request rreq[2], sreq[2];
    int pending[2];      /* a ring forward is still to be posted for this buffer */
    int *ipiv[2];        /* global pivot row of each panel column */
    double *prow;        /* P = 1: the pivot row of the leaf */
    double *pv_in, *pv_out; /* P > 1: the pivot allreduce */
    double *u12;         /* P > 1: U12 inside the panel recursion */
    double *ubuf, *sbuf, *rbuf, *xbuf; /* P > 1: row exchange, U */
    int *perm_dst, *perm_src, nperm; /* P > 1: the panel's row moves (dest <- src, global rows) */
    int *cnt, *dsp;      /* P > 1: gather/scatter counts */
    double t_pfact, t_bcast, t_swap, t_update, t_solve;
    int die_rank, die_step;
} hpl_t;

typedef struct {
    int k, j, jb, i0, m, diag, owner; /* i0: first local row with global >= j; m = mp - i0 */
    const double *l;
    int ld;
    const int *ipiv;
} panel_t;

static void panel_of(const hpl_t *h, int k, panel_t *pn) {
    pn->k = k;
    pn->j = k * h->nb;
    pn->jb = h->n - pn->j < h->nb ? h->n - pn->j : h->nb;
    pn->i0 = numroc(pn->j, h->nb, h->myrow, h->p);
    pn->m = h->mp - pn->i0;
    pn->diag = owner_of(pn->j, h->nb, h->p) == h->myrow;
    pn->owner = owner_of(pn->j, h->nb, h->q) == h->mycol;
    pn->ipiv = h->ipiv[k & 1];
    if (pn->owner || h->q == 1) {
        pn->l = h->a + pn->i0 + (size_t)numroc(pn->j, h->nb, h->mycol, h->q) * h->lda;
        pn->ld = h->lda;
    } else {
        pn->l = h->pbuf[k & 1];
        pn->ld = pn->m > 0 ? pn->m : 1;
    }
}

/* ---- panel factorisation ------------------------------------------------------------------ */
/* MPI user op over [|v|, global row, candidate row (jb), diagonal row (jb)]: keep the larger
 * candidate (ties: the lower row, so every rank agrees), add the diagonal rows (only its owner's
 * is non-zero). */
static void pivot_op(void *inv, void *inoutv, int *len, MPI_Datatype *dt) {
    (void)dt;
    const double *in = inv;
    double *io = inoutv;
    int jb = (*len - 2) / 2;
    if (in[0] > io[0] || (in[0] == io[0] && in[1] < io[1])) memcpy(io, in, (size_t)(2 + jb) * sizeof(double));
    for (int i = 0; i < jb; i++) io[2 + jb + i] += in[2 + jb + i];
}

/* Factor panel columns [c0, c0+w) column by column. ap: the panel's active local rows (row 0 =
 * global row j on the diagonal process row), lda; m rows. */
static void leaf(hpl_t *h, double *ap, int m, int diag, int j, int jb, int c0, int w, int *ipiv) {
    const int lda = h->lda;
    for (int c = c0; c < c0 + w; c++) {
        double *col = ap + (size_t)c * lda;
        int start = diag ? c : 0, best = -1;
        double bmax = -1.0;
        for (int i = start; i < m; i++) {
            double v = fabs(col[i]);
            if (v > bmax) { bmax = v; best = i; }
        }
        const double *prow;
        int gpiv;
        if (h->p == 1) {
            gpiv = j + best;
            if (best != c)
                for (int cc = 0; cc < jb; cc++) {
                    double *x = ap + (size_t)cc * lda;
                    double t = x[c]; x[c] = x[best]; x[best] = t;
                }
            for (int cc = c; cc < c0 + w; cc++) h->prow[cc] = ap[c + (size_t)cc * lda];
            prow = h->prow;
        } else {
            double *in = h->pv_in;
            in[0] = bmax;
            in[1] = best >= 0 ? (double)l2g(best + numroc(j, h->nb, h->myrow, h->p), h->nb, h->p, h->myrow) : (double)INT_MAX;
            for (int cc = 0; cc < jb; cc++) {
                in[2 + cc] = best >= 0 ? ap[best + (size_t)cc * lda] : 0.0;
                in[2 + jb + cc] = diag ? ap[c + (size_t)cc * lda] : 0.0;
            }
            MPI_Allreduce(in, h->pv_out, 2 + 2 * jb, MPI_DOUBLE, h->pivop, h->col);
            gpiv = (int)h->pv_out[1];
            prow = h->pv_out + 2;
            const double *drow = h->pv_out + 2 + jb;
            if (gpiv != j + c && owner_of(gpiv, h->nb, h->p) == h->myrow) {
                int li = g2l(gpiv, h->nb, h->p) - numroc(j, h->nb, h->myrow, h->p);
                for (int cc = 0; cc < jb; cc++) ap[li + (size_t)cc * lda] = drow[cc];
            }
            if (diag)
                for (int cc = 0; cc < jb; cc++) ap[c + (size_t)cc * lda] = prow[cc];
        }
        ipiv[c] = gpiv;
        double piv = prow[c];
        int below = diag ? c + 1 : 0;
        if (piv != 0.0) {
            double r = 1.0 / piv;
            for (int i = below; i < m; i++) col[i] *= r;
        }
        /* rank-1 update of the leaf's remaining columns, four at a time */
        int cc = c + 1, end = c0 + w;
        for (; cc + 3 < end; cc += 4) {
            double u0 = prow[cc], u1 = prow[cc + 1], u2 = prow[cc + 2], u3 = prow[cc + 3];
            double *x0 = ap + (size_t)cc * lda, *x1 = x0 + lda, *x2 = x1 + lda, *x3 = x2 + lda;
            for (int i = below; i < m; i++) {
                double l = col[i];
                x0[i] -= l * u0; x1[i] -= l * u1; x2[i] -= l * u2; x3[i] -= l * u3;
            }
        }
        for (; cc < end; cc++) {
            double u = prow[cc], *x = ap + (size_t)cc * lda;
            for (int i = below; i < m; i++) x[i] -= col[i] * u;
        }
    }
}

static void rec_fact(hpl_t *h, double *ap, int m, int diag, int k, int j, int jb, int c0, int w, int *ipiv) {
    if (w <= h->nbmin) {
        leaf(h, ap, m, diag, j, jb, c0, w, ipiv);
        return;
    }
    int w1 = w / 2;
    if (w1 > 8) w1 = (w1 + 7) / 8 * 8;
    int w2 = w - w1;
    const int lda = h->lda;
    rec_fact(h, ap, m, diag, k, j, jb, c0, w1, ipiv);
    double *a12 = ap + c0 + (size_t)(c0 + w1) * lda;
    if (diag) trsm_left(0, w1, w2, ap + c0 + (size_t)c0 * lda, lda, a12, lda);
    const double *u12 = a12;
    int ldu = lda;
    if (h->p > 1) {
        if (diag)
            for (int cc = 0; cc < w2; cc++) memcpy(h->u12 + (size_t)cc * w1, a12 + (size_t)cc * lda, (size_t)w1 * sizeof(double));
        MPI_Bcast(h->u12, w1 * w2, MPI_DOUBLE, k % h->p, h->col);
        if (!diag) { u12 = h->u12; ldu = w1; }
    }
    int start = diag ? c0 + w1 : 0;
    gemm_sub(m - start, w2, w1, ap + start + (size_t)c0 * lda, lda, u12, ldu, ap + start + (size_t)(c0 + w1) * lda, lda);
    rec_fact(h, ap, m, diag, k, j, jb, c0 + w1, w2, ipiv);
}

static void pfact(hpl_t *h, int k) {
    double t0 = MPI_Wtime();
    panel_t pn;
    panel_of(h, k, &pn);
    double *ap = h->a + pn.i0 + (size_t)numroc(pn.j, h->nb, h->mycol, h->q) * h->lda;
    rec_fact(h, ap, pn.m, pn.diag, k, pn.j, pn.jb, 0, pn.jb, h->ipiv[k & 1]);
    h->t_pfact += MPI_Wtime() - t0;
}

/* ---- panel broadcast along the process row: a ring of non-blocking messages ---------------- */
static int bcast_count(const panel_t *pn) { return pn->m * pn->jb + pn->jb; }

static void bcast_start(hpl_t *h, int k) {
    if (h->q == 1) return;
    double t0 = MPI_Wtime();
    int b = k & 1, root = k % h->q, next = (h->mycol + 1) % h->q, prev = (h->mycol + h->q - 1) % h->q;
    panel_t pn;
    panel_of(h, k, &pn);
    if (h->sreq[b] != MPI_REQUEST_NULL) MPI_Wait(&h->sreq[b], MPI_STATUS_IGNORE); /* buffer free again */
    int count = bcast_count(&pn);
    double *buf = h->pbuf[b];
    if (h->mycol == root) {
        for (int c = 0; c < pn.jb; c++) memcpy(buf + (size_t)c * pn.m, pn.l + (size_t)c * pn.ld, (size_t)pn.m * sizeof(double));
        for (int c = 0; c < pn.jb; c++) buf[(size_t)pn.m * pn.jb + c] = (double)h->ipiv[b][c];
        if (next != root) MPI_Isend(buf, count, MPI_DOUBLE, next, k & 0x3fff, h->row, &h->sreq[b]);
        h->pending[b] = 0;
    } else {
        MPI_Irecv(buf, count, MPI_DOUBLE, prev, k & 0x3fff, h->row, &h->rreq[b]);
        h->pending[b] = next != root;
    }
    h->t_bcast += MPI_Wtime() - t0;
}

/* Move the broadcast of panel k along: forward it once it has arrived. wait: block until it has,
 * then take the pivot indices out of the buffer. */
static void bcast_progress(hpl_t *h, int k, int wait) {
    if (h->q == 1 || k < 0) return;
    int b = k & 1;
    if (h->rreq[b] == MPI_REQUEST_NULL && !h->pending[b]) {
        if (!wait && h->sreq[b] != MPI_REQUEST_NULL) { /* the root: let MPI move its send along */
            int sent;
            double t0 = MPI_Wtime();
            MPI_Test(&h->sreq[b], &sent, MPI_STATUS_IGNORE);
            h->t_bcast += MPI_Wtime() - t0;
        }
        return;
    }
    double t0 = MPI_Wtime();
    int done = 1;
    if (h->rreq[b] != MPI_REQUEST_NULL) {
        if (wait) MPI_Wait(&h->rreq[b], MPI_STATUS_IGNORE);
        else MPI_Test(&h->rreq[b], &done, MPI_STATUS_IGNORE);
    }
    if (done) {
        panel_t pn;
        panel_of(h, k, &pn);
        if (h->pending[b]) {
            MPI_Isend(h->pbuf[b], bcast_count(&pn), MPI_DOUBLE, (h->mycol + 1) % h->q, k & 0x3fff, h->row, &h->sreq[b]);
            h->pending[b] = 0;
        }
        const double *tail = h->pbuf[b] + (size_t)pn.m * pn.jb;
        for (int c = 0; c < pn.jb; c++) h->ipiv[b][c] = (int)tail[c];
    }
    h->t_bcast += MPI_Wtime() - t0;
}

/* ---- row interchanges and the trailing update ---------------------------------------------- */
/* P > 1: the net row moves of panel pn's interchanges (applied in order, as LAPACK's laswp):
 * perm_dst[i] <- perm_src[i]. The first jb entries are the diagonal block's rows j..j+jb-1 (they
 * become U); the others are rows below the block, which receive displaced diagonal-block rows. */
static void swap_plan(hpl_t *h, const panel_t *pn) {
    int *dst = h->perm_dst, *src = h->perm_src, n = pn->jb;
    for (int i = 0; i < pn->jb; i++) dst[i] = src[i] = pn->j + i;
    for (int i = 0; i < pn->jb; i++) {
        int r = pn->ipiv[i], ir = -1;
        if (r < pn->j + pn->jb) ir = r - pn->j;
        else {
            for (int t = pn->jb; t < n; t++)
                if (dst[t] == r) { ir = t; break; }
            if (ir < 0) { dst[n] = src[n] = r; ir = n++; }
        }
        int t = src[i]; src[i] = src[ir]; src[ir] = t;
    }
    h->nperm = n;
}

static void copy_row_out(const hpl_t *h, int lrow, int c0, int n, double *out) {
    const double *x = h->a + lrow + (size_t)c0 * h->lda;
    for (int c = 0; c < n; c++) out[c] = x[(size_t)c * h->lda];
}
static void copy_row_in(hpl_t *h, int lrow, int c0, int n, const double *in) {
    double *x = h->a + lrow + (size_t)c0 * h->lda;
    for (int c = 0; c < n; c++) x[(size_t)c * h->lda] = in[c];
}

/* P > 1, local columns [c0, c0+n): gather the rows that become U to the diagonal process row
 * (U, jb x n, column major, in h->ubuf there) and scatter the rows they displace to their new
 * owners. */
static void exchange(hpl_t *h, const panel_t *pn, int c0, int n) {
    const int p = h->p, nb = h->nb, root = owner_of(pn->j, nb, p), jb = pn->jb;
    int mine = 0;
    for (int i = 0; i < jb; i++) {
        int s = h->perm_src[i];
        if (owner_of(s, nb, p) == h->myrow) copy_row_out(h, g2l(s, nb, p), c0, n, h->sbuf + (size_t)(mine++) * n);
    }
    int *cnt = h->cnt, *dsp = h->dsp, *scnt = h->cnt + p, *sdsp = h->dsp + p;
    for (int r = 0; r < p; r++) cnt[r] = scnt[r] = 0;
    for (int i = 0; i < jb; i++) cnt[owner_of(h->perm_src[i], nb, p)] += n;
    for (int t = jb; t < h->nperm; t++) scnt[owner_of(h->perm_dst[t], nb, p)] += n;
    dsp[0] = sdsp[0] = 0;
    for (int r = 1; r < p; r++) { dsp[r] = dsp[r - 1] + cnt[r - 1]; sdsp[r] = sdsp[r - 1] + scnt[r - 1]; }
    if (h->myrow == root) { /* displaced rows, grouped by destination process row, before any write */
        for (int r = 0, at = 0; r < p; r++)
            for (int t = jb; t < h->nperm; t++)
                if (owner_of(h->perm_dst[t], nb, p) == r)
                    copy_row_out(h, g2l(h->perm_src[t], nb, p), c0, n, h->xbuf + (size_t)(at++) * n);
    }
    MPI_Gatherv(h->sbuf, mine * n, MPI_DOUBLE, h->rbuf, cnt, dsp, MPI_DOUBLE, root, h->col);
    MPI_Scatterv(h->xbuf, scnt, sdsp, MPI_DOUBLE, h->sbuf, scnt[h->myrow], MPI_DOUBLE, root, h->col);
    for (int t = jb, at = 0; t < h->nperm; t++)
        if (owner_of(h->perm_dst[t], nb, p) == h->myrow)
            copy_row_in(h, g2l(h->perm_dst[t], nb, p), c0, n, h->sbuf + (size_t)(at++) * n);
    if (h->myrow == root) {
        int at[p > 0 ? p : 1];
        for (int r = 0; r < p; r++) at[r] = dsp[r];
        for (int i = 0; i < jb; i++) {
            int r = owner_of(h->perm_src[i], nb, p);
            const double *row = h->rbuf + at[r];
            at[r] += n;
            for (int c = 0; c < n; c++) h->ubuf[i + (size_t)c * jb] = row[c];
        }
    }
}

/* Panel pn's interchanges, dtrsm and dgemm on local columns [c0, c1). */
static void update(hpl_t *h, const panel_t *pn, int c0, int c1) {
    int n = c1 - c0, jb = pn->jb;
    if (n <= 0 || jb <= 0) return;
    const int lda = h->lda;
    double *ac = h->a + (size_t)c0 * lda;
    double t0 = MPI_Wtime();
    if (h->p == 1) {
        const int j = pn->j;
        for (int c = 0; c < n; c++) {
            double *x = ac + (size_t)c * lda;
            for (int i = 0; i < jb; i++) {
                int r = pn->ipiv[i];
                if (r != j + i) { double t = x[j + i]; x[j + i] = x[r]; x[r] = t; }
            }
        }
        double t1 = MPI_Wtime();
        h->t_swap += t1 - t0;
        trsm_left(0, jb, n, pn->l, pn->ld, ac + j, lda);
        gemm_sub(h->mp - j - jb, n, jb, pn->l + jb, pn->ld, ac + j, lda, ac + j + jb, lda);
        h->t_update += MPI_Wtime() - t1;
        return;
    }
    exchange(h, pn, c0, n);
    int root = owner_of(pn->j, h->nb, h->p);
    if (pn->diag) {
        double t1 = MPI_Wtime();
        trsm_left(0, jb, n, pn->l, pn->ld, h->ubuf, jb);
        for (int c = 0; c < n; c++) memcpy(ac + pn->i0 + (size_t)c * lda, h->ubuf + (size_t)c * jb, (size_t)jb * sizeof(double));
        h->t_update += MPI_Wtime() - t1;
        t0 += MPI_Wtime() - t1;
    }
    MPI_Bcast(h->ubuf, jb * n, MPI_DOUBLE, root, h->col);
    double t1 = MPI_Wtime();
    h->t_swap += t1 - t0;
    int start = pn->diag ? pn->i0 + jb : pn->i0;
    gemm_sub(h->mp - start, n, jb, pn->l + (pn->diag ? jb : 0), pn->ld, h->ubuf, jb, ac + start, lda);
    h->t_update += MPI_Wtime() - t1;
}

static void update_chunked(hpl_t *h, const panel_t *pn, int c0, int c1, int kprog) {
    if (h->p == 1 && h->q == 1) { /* nothing to progress, no exchange buffers: one large dgemm */
        update(h, pn, c0, c1);
        return;
    }
    for (int c = c0; c < c1; c += h->chunk) {
        int e = c + h->chunk < c1 ? c + h->chunk : c1;
        update(h, pn, c, e);
        bcast_progress(h, kprog, 0);
    }
}

/* ---- the factorisation with look-ahead of depth 1 --------------------------------------------- */
static void factorize(hpl_t *h) {
    const int nb = h->nb, npan = (h->n + nb - 1) / nb;
    if (h->mycol == 0) pfact(h, 0);
    bcast_start(h, 0);
    for (int k = 0; k < npan; k++) {
        if (k == h->die_step && h->rank == h->die_rank) raise(SIGKILL);
        bcast_progress(h, k, 1);
        panel_t pn;
        panel_of(h, k, &pn);
        if (h->p > 1) swap_plan(h, &pn);
        int jn = pn.j + pn.jb, t0 = numroc(jn, nb, h->mycol, h->q), rest = t0;
        if (k + 1 < npan) {
            if (owner_of(jn, nb, h->q) == h->mycol) { /* look-ahead: the next panel first */
                int jbn = h->n - jn < nb ? h->n - jn : nb;
                update(h, &pn, t0, t0 + jbn);
                pfact(h, k + 1);
                rest = t0 + jbn;
            }
            bcast_start(h, k + 1);
        }
        update_chunked(h, &pn, rest, h->nq, k + 1);
    }
    for (int b = 0; b < 2; b++)
        if (h->sreq[b] != MPI_REQUEST_NULL) MPI_Wait(&h->sreq[b], MPI_STATUS_IGNORE);
}

/* ---- U x = y ------------------------------------------------------------------------------ */
static void solve(hpl_t *h, double *x) {
    double t0 = MPI_Wtime();
    const int nb = h->nb, n = h->n, npan = (n + nb - 1) / nb;
    double *y = calloc((size_t)h->mp + 1, sizeof(double)), xk[nb];
    if (!y) die("out of memory for the solve");
    if (h->mycol == owner_of(n, nb, h->q))
        memcpy(y, h->a + (size_t)g2l(n, nb, h->q) * h->lda, (size_t)h->mp * sizeof(double));
    memset(x, 0, (size_t)n * sizeof(double));
    for (int k = npan - 1; k >= 0; k--) {
        int j = k * nb, jb = n - j < nb ? n - j : nb;
        int pr = owner_of(j, nb, h->p), pc = owner_of(j, nb, h->q);
        int li = numroc(j, nb, h->myrow, h->p), lj = numroc(j, nb, h->mycol, h->q);
        if (h->myrow == pr) {
            if (h->q > 1)
                MPI_Reduce(h->mycol == pc ? MPI_IN_PLACE : y + li, y + li, jb, MPI_DOUBLE, MPI_SUM, pc, h->row);
            if (h->mycol == pc) {
                memcpy(xk, y + li, (size_t)jb * sizeof(double));
                trsm_left(1, jb, 1, h->a + li + (size_t)lj * h->lda, h->lda, xk, jb);
                memcpy(x + j, xk, (size_t)jb * sizeof(double));
            }
        }
        if (h->mycol == pc) {
            if (h->p > 1) MPI_Bcast(xk, jb, MPI_DOUBLE, pr, h->col);
            gemv_add(li, jb, -1.0, h->a + (size_t)lj * h->lda, h->lda, xk, y);
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    free(y);
    h->t_solve += MPI_Wtime() - t0;
}

/* ---- generation and the residual check ------------------------------------------------------ */
static void generate(hpl_t *h) {
    for (int jl = 0; jl < h->nq; jl++) {
        long long gj = l2g(jl, h->nb, h->q, h->mycol);
        double *col = h->a + (size_t)jl * h->lda;
        for (int il = 0; il < h->mp; il++) col[il] = gen(h->seed, l2g(il, h->nb, h->p, h->myrow), gj);
    }
}

/* ||Ax-b||_oo / (eps (||A||_oo ||x||_oo + ||b||_oo) n), A and b regenerated; norms[] = the four norms */
static double residual(hpl_t *h, const double *x, double norms[4]) {
    const int mp = h->mp;
    double *w = calloc(3 * (size_t)mp + 3, sizeof(double));
    if (!w) die("out of memory for the residual check");
    double *ax = w, *asum = w + mp, *bl = w + 2 * mp;
    int *rg = malloc(((size_t)mp + 1) * sizeof(int));
    if (!rg) die("out of memory for the residual check");
    for (int il = 0; il < mp; il++) rg[il] = l2g(il, h->nb, h->p, h->myrow);
    for (int jl = 0; jl < h->nq; jl++) {
        int gj = l2g(jl, h->nb, h->q, h->mycol);
        if (gj < h->n) {
            double xv = x[gj];
            for (int il = 0; il < mp; il++) {
                double v = gen(h->seed, rg[il], gj);
                ax[il] += v * xv;
                asum[il] += fabs(v);
            }
        } else {
            for (int il = 0; il < mp; il++) bl[il] = gen(h->seed, rg[il], gj);
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, w, 3 * mp, MPI_DOUBLE, MPI_SUM, h->row);
    double loc[3] = {0, 0, 0}, glob[3];
    for (int il = 0; il < mp; il++) {
        double r = fabs(ax[il] - bl[il]);
        if (!(r <= loc[0])) loc[0] = isnan(r) ? INFINITY : r;
        if (asum[il] > loc[1]) loc[1] = asum[il];
        if (fabs(bl[il]) > loc[2]) loc[2] = fabs(bl[il]);
    }
    MPI_Allreduce(loc, glob, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double xmax = 0;
    for (int i = 0; i < h->n; i++) {
        double v = fabs(x[i]);
        if (!(v <= xmax)) xmax = isnan(v) ? INFINITY : v;
    }
    free(w);
    free(rg);
    const double eps = DBL_EPSILON / 2; /* 2^-53 */
    norms[0] = glob[0]; norms[1] = glob[1]; norms[2] = xmax; norms[3] = glob[2];
    double resid = glob[0] / (eps * (glob[1] * xmax + glob[2]) * (double)h->n);
    return isfinite(resid) ? resid : INFINITY;
}

typedef struct {
    const hpl_t *h;
    const char *pmap, *lib, *symbol;
    char real[PATH_MAX], config[512];
    int blas_threads;
    double local_bytes_max;
} info_t;

static void info_fields(const void *arg) {
    const info_t *in = arg;
    const hpl_t *h = in->h;
    cb_json_int("n", h->n);
    cb_json_int("nb", h->nb);
    cb_json_int("p", h->p);
    cb_json_int("q", h->q);
    cb_json_str("pmap", in->pmap);
    cb_json_int("nbmin", h->nbmin);
    cb_json_int("chunk", h->chunk);
    cb_json_int("depth", 1);
    cb_json_str("blas_requested", in->lib);
    cb_json_str("blas_path", in->real);
    cb_json_str("blas_symbol", in->symbol);
    cb_json_str("blas_config", in->config);
    cb_json_int("blas_threads", in->blas_threads);
    cb_json_loaded_libs("blas_loaded");
    cb_json_num("local_matrix_bytes_max", in->local_bytes_max);
}

static void *load_blas(const char *lib, info_t *in) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) die("cannot load BLAS %s: %s", lib, dlerror());
    cgemm = (c_gemm_t)dlsym(h, "cblas_dgemm");
    ctrsm = (c_trsm_t)dlsym(h, "cblas_dtrsm");
    cgemv = (c_gemv_t)dlsym(h, "cblas_dgemv");
    in->symbol = "cblas_dgemm,cblas_dtrsm,cblas_dgemv";
    if (!cgemm || !ctrsm || !cgemv) {
        cgemm = NULL; ctrsm = NULL; cgemv = NULL;
        fgemm = (f_gemm_t)dlsym(h, "dgemm_");
        ftrsm = (f_trsm_t)dlsym(h, "dtrsm_");
        fgemv = (f_gemv_t)dlsym(h, "dgemv_");
        in->symbol = "dgemm_,dtrsm_,dgemv_";
        if (!fgemm || !ftrsm || !fgemv) die("%s exports neither cblas_dgemm/dtrsm/dgemv nor dgemm_/dtrsm_/dgemv_", lib);
    }
    in->blas_threads = cb_blas_describe(h, lib, in->config, sizeof in->config, in->real);
    return h;
}

static void write_doubles(const char *path, const double *v, size_t n, FILE *f) {
    if (fwrite(v, sizeof(double), n, f) != n) die("cannot write %s", path);
}

/* ---- main ----------------------------------------------------------------------------------- */
int main(int argc, char **argv) {
    hpl_t H;
    memset(&H, 0, sizeof H);
    hpl_t *h = &H;
    cb_mpi_start(&argc, &argv, &h->rank, &h->nranks, 1); /* only rank 0 speaks JSON */
    info_t in;
    memset(&in, 0, sizeof in);
    in.h = h;
    in.lib = NULL;
    long long n_ll = 1000, nb_ll = 192;
    h->p = 1;
    h->q = h->nranks;
    in.pmap = "row";
    h->seed = 42;
    h->nbmin = 16;
    h->chunk = 0;
    double threshold = 16.0;
    const char *cpus_s = NULL;
    const char *xout = NULL, *aout = NULL;
    int corrupt = 0;
    h->die_rank = -1;
    h->die_step = -1;
    CB_OPTIONS(argc, argv, CB_OPT("lib", in.lib), CB_OPT("n", n_ll), CB_OPT("nb", nb_ll), CB_OPT("p", h->p),
               CB_OPT("q", h->q), CB_OPT("pmap", in.pmap), CB_OPT("seed", h->seed), CB_OPT("nbmin", h->nbmin),
               CB_OPT("chunk", h->chunk), CB_OPT("threshold", threshold), CB_OPT("cpus", cpus_s),
               CB_OPT("xout", xout), CB_OPT("aout", aout), CB_OPT("corrupt", corrupt),
               CB_OPT("die_rank", h->die_rank), CB_OPT("die_step", h->die_step));
    if (!in.lib) die("--lib=PATH of a BLAS shared library is required");
    if (n_ll < 1 || n_ll > 2000000) die("--n %lld is outside 1..2000000", n_ll);
    if (nb_ll < 1 || nb_ll > n_ll || nb_ll > 4096) die("--nb %lld is outside 1..min(N, 4096)", nb_ll);
    if (h->p < 1 || h->q < 1 || (long long)h->p * h->q != h->nranks)
        die("grid %d x %d does not match the %d ranks", h->p, h->q, h->nranks);
    if (strcmp(in.pmap, "row") && strcmp(in.pmap, "col")) die("--pmap must be row or col, not %s", in.pmap);
    if (h->nbmin < 1) h->nbmin = 1;
    h->n = (int)n_ll;
    h->nb = (int)nb_ll;
    if (h->chunk <= 0) h->chunk = h->nb * ((h->nb < 128) ? 8 : 4);
    if (cpus_s) { /* hybrid: this rank's cpus; the BLAS threads inherit the mask. "a/b/...": one
                   * list per rank of a node (a rank per socket), taken by the node-local rank */
        static int cpus[4096];
        static char group[4096];
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        if (!lr) lr = getenv("MPI_LOCALRANKID");
        if (!lr) lr = getenv("SLURM_LOCALID");
        int local = lr ? atoi(lr) : 0, ngroups = 1;
        for (const char *c = cpus_s; *c; c++) ngroups += *c == '/';
        const char *g = cpus_s;
        for (int i = 0; i < local % ngroups; i++) g = strchr(g, '/') + 1;
        size_t glen = strcspn(g, "/");
        if (glen >= sizeof group) die("--cpus group too long");
        memcpy(group, g, glen);
        group[glen] = 0;
        cb_bind_or_fail(cpus, cb_parse_cpulist(group, cpus, 4096), cpus_s, cb_mpi_die);
    }
    cb_mpi_snapshot_cpus(); /* the rank's cores, before an OpenMP BLAS binds its main thread to one */
    load_blas(in.lib, &in);

    if (!strcmp(in.pmap, "row")) { h->myrow = h->rank / h->q; h->mycol = h->rank % h->q; }
    else { h->myrow = h->rank % h->p; h->mycol = h->rank / h->p; }
    MPI_Comm_split(MPI_COMM_WORLD, h->myrow, h->mycol, &h->row);
    MPI_Comm_split(MPI_COMM_WORLD, h->mycol, h->myrow, &h->col);
    MPI_Op_create(pivot_op, 1, &h->pivop);
    h->mp = numroc(h->n, h->nb, h->myrow, h->p);
    h->nq = numroc(h->n + 1, h->nb, h->mycol, h->q);
    h->lda = (h->mp + 7) / 8 * 8;
    if (h->lda < 8) h->lda = 8;
    if (h->lda % 512 == 0) h->lda += 8; /* a 4 KiB multiple makes the columns alias in the caches */
    double mine = (double)h->lda * h->nq * 8 + 2.0 * ((double)h->mp * h->nb + h->nb) * 8;
    MPI_Allreduce(&mine, &in.local_bytes_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    cb_mpi_report_placement(h->rank, h->nranks, info_fields, &in);

    h->a = cb_alloc((size_t)h->lda * (size_t)h->nq * sizeof(double), 1);
    size_t pbytes = ((size_t)h->mp * h->nb + h->nb + 1) * sizeof(double);
    h->pbuf[0] = cb_alloc(pbytes, 1);
    h->pbuf[1] = cb_alloc(pbytes, 1);
    h->ipiv[0] = calloc((size_t)h->nb, sizeof(int));
    h->ipiv[1] = calloc((size_t)h->nb, sizeof(int));
    h->prow = calloc((size_t)h->nb, sizeof(double));
    h->pv_in = calloc(2 + 2 * (size_t)h->nb, sizeof(double));
    h->pv_out = calloc(2 + 2 * (size_t)h->nb, sizeof(double));
    h->u12 = calloc((size_t)h->nb * h->nb, sizeof(double));
    size_t ub = (size_t)h->nb * h->chunk;
    h->ubuf = calloc(ub, sizeof(double));
    h->sbuf = calloc(ub, sizeof(double));
    h->rbuf = calloc(ub, sizeof(double));
    h->xbuf = calloc(ub, sizeof(double));
    h->perm_dst = calloc(2 * (size_t)h->nb, sizeof(int));
    h->perm_src = calloc(2 * (size_t)h->nb, sizeof(int));
    h->cnt = calloc(2 * (size_t)h->p, sizeof(int));
    h->dsp = calloc(2 * (size_t)h->p, sizeof(int));
    double *x = calloc((size_t)h->n, sizeof(double));
    int ok_alloc = h->a && h->pbuf[0] && h->pbuf[1] && h->ipiv[0] && h->ipiv[1] && h->prow && h->pv_in && h->pv_out &&
                   h->u12 && h->ubuf && h->sbuf && h->rbuf && h->xbuf && h->perm_dst && h->perm_src && h->cnt &&
                   h->dsp && x, all_ok;
    MPI_Allreduce(&ok_alloc, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) die("cannot allocate the local matrix (%d x %d doubles) and work space", h->mp, h->nq);
    h->rreq[0] = h->rreq[1] = h->sreq[0] = h->sreq[1] = MPI_REQUEST_NULL;

    generate(h);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    double real0 = wall_clock();
    factorize(h);
    solve(h, x);
    double mytime = MPI_Wtime() - t0, wall;
    double real1 = wall_clock(), phase[2];
    MPI_Allreduce(&mytime, &wall, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    /* the timed phase in wall-clock time: the earliest start and the latest end over the ranks */
    MPI_Allreduce(&real0, &phase[0], 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&real1, &phase[1], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    if (corrupt) x[h->n / 2] += 1.0 + fabs(x[h->n / 2]);
    double norms[4];
    double resid = residual(h, x, norms);
    int ok = resid < threshold;

    if (h->rank == 0 && xout) {
        FILE *f = fopen(xout, "wb");
        if (!f) die("cannot write %s: %s", xout, strerror(errno));
        write_doubles(xout, x, (size_t)h->n, f);
        fclose(f);
    }
    if (h->rank == 0 && aout) {
        if (h->n > 4000) die("--aout is for N <= 4000");
        FILE *f = fopen(aout, "wb");
        if (!f) die("cannot write %s: %s", aout, strerror(errno));
        double *col = malloc(((size_t)h->n + 1) * sizeof(double));
        for (int j = 0; j <= h->n; j++) {
            for (int i = 0; i < h->n; i++) col[i] = gen(h->seed, i, j);
            write_doubles(aout, col, (size_t)h->n, f);
        }
        free(col);
        fclose(f);
    }

    /* the breakdown: max and mean over ranks */
    double other = mytime - h->t_pfact - h->t_bcast - h->t_swap - h->t_update - h->t_solve;
    double parts[6] = {h->t_pfact, h->t_bcast, h->t_swap, h->t_update, h->t_solve, other < 0 ? 0 : other};
    double pmax[6], psum[6];
    MPI_Reduce(parts, pmax, 6, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(parts, psum, 6, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    static const char *names[6] = {"pfact", "bcast", "swap", "update", "solve", "other"};

    double nn = (double)h->n;
    double gflops = (2.0 / 3.0 * nn * nn * nn + 1.5 * nn * nn) / wall / 1e9;
    if (h->rank == 0) {
        char detail[400];
        snprintf(detail, sizeof detail,
                 "scaled residual ||Ax-b||_oo/(eps(||A||_oo||x||_oo+||b||_oo)N) = %.6g, threshold %.6g: %s "
                 "(||Ax-b||_oo %.3g, ||A||_oo %.6g, ||x||_oo %.6g, ||b||_oo %.6g, eps 2^-53)%s",
                 resid, threshold, ok ? "PASSED" : "FAILED", norms[0], norms[1], norms[2], norms[3],
                 corrupt ? "; the solution was perturbed on purpose (--corrupt)" : "");
        cb_validation_begin(ok, detail);
        cb_json_num("residual", resid);
        cb_json_num("threshold", threshold);
        cb_json_num("norm_r", norms[0]);
        cb_json_num("norm_a", norms[1]);
        cb_json_num("norm_x", norms[2]);
        cb_json_num("norm_b", norms[3]);
        cb_json_end();
    }
    if (!ok) {
        MPI_Finalize();
        return 1; /* a failed residual check is never a result */
    }
    if (h->rank == 0) {
        char prm[2048];
        size_t at = 0;
        at += (size_t)snprintf(prm + at, sizeof prm - at,
                               "{\"n\":%d,\"nb\":%d,\"p\":%d,\"q\":%d,\"pmap\":\"%s\",\"time_s\":%.9g,\"gflops\":%.9g,"
                               "\"residual\":%.9g,\"passed\":true,\"breakdown_of\":\"max over ranks\",\"breakdown_s\":{",
                               h->n, h->nb, h->p, h->q, in.pmap, wall, gflops, resid);
        for (int i = 0; i < 6; i++) at += (size_t)snprintf(prm + at, sizeof prm - at, "%s\"%s\":%.6g", i ? "," : "", names[i], pmax[i]);
        at += (size_t)snprintf(prm + at, sizeof prm - at, "},\"breakdown_mean_s\":{");
        for (int i = 0; i < 6; i++)
            at += (size_t)snprintf(prm + at, sizeof prm - at, "%s\"%s\":%.6g", i ? "," : "", names[i], psum[i] / h->nranks);
        at += (size_t)snprintf(prm + at, sizeof prm - at, "},\"phase_unix\":[%.6f,%.6f]", phase[0], phase[1]);
        snprintf(prm + at, sizeof prm - at, "}");
        cb_result("gflops", "Gflop/s", prm, &gflops, &wall, 1);
    }
    MPI_Op_free(&h->pivop);
    MPI_Comm_free(&h->row);
    MPI_Comm_free(&h->col);
    MPI_Finalize();
    return 0;
}
