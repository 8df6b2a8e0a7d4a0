/* hpcg.c: the HPCG 3.1 problem and rules (hpcg-benchmark.org), written afresh for clusterbench.
 *
 * Problem: a 27-point stencil on a local nx x ny x nz box per rank (diagonal 26, every existing
 * neighbour -1), the ranks in a 3-D process grid (the most cubic factorisation of their count),
 * the right-hand side b = A * ones, so the exact solution is all ones. Ghost values of the
 * neighbouring ranks are exchanged with MPI (point-to-point, only the values a rank's rows use).
 * Storage: a general sparse matrix built from the global row numbers, each row split into the
 * entries of local columns below the diagonal (L), the others but the diagonal (U: local columns
 * above it, then the ghosts) and the diagonal; L and U each in ELL form ascending by column (values
 * and int32 local column indices), its width the longest such part of any row. The stencil's
 * regularity is never used by the kernels (HPCG's rule). The optimisation step (timed, and charged
 * with the setup as HPCG 3.1 charges them) adds the reuse lists below.
 *
 * Optimisations (HPCG allows them when validation passes and any extra iterations are paid; none
 * changes the arithmetic of the reference algorithm except the summation order):
 * a sweep reads only the part of the matrix it needs: the pre-smoothing forward sweep from x = 0
 * only L (its other terms multiply zeros, ghosts included), and every backward sweep only U, its
 * lower terms being the forward sweep's sums L_i x, which have not changed since (a backward
 * sweep updates the lower neighbours of row i after it) and are kept in lsum. The pre-smoothing
 * backward sweep keeps its upper sums U_i x too (usum); between it and the post-smoothing forward
 * sweep only the coarse points (the prolongation adds the correction there) and the ghosts (zero
 * before, exchanged after) change, so that sweep takes usum plus the U entries in those columns
 * times their change (per row, a short list built once: about 1.6 entries instead of 13 here).
 * Each row's dot product in four partial sums, and the term of the neighbour updated just before
 * (the last L entry forward, the first U entry backward) added after the others, so the chain
 * from row to row is one multiply-add and a multiply; 1/a_ii kept; the multigrid residual is
 * computed only at the rows injection keeps (one in eight), fused with the restriction; the large
 * arrays live on transparent huge pages (big()). The ordering stays natural.
 *
 * Preconditioner: a 4-level multigrid V-cycle (each coarser level halves every local dimension,
 * so they must be divisible by 8): on every level but the coarsest one symmetric Gauss-Seidel
 * sweep (forward then backward, ghost values held as exchanged before it: block Jacobi between
 * ranks), the fine residual by SpMV, restriction by injection (the coarse point (i,j,k) takes the
 * fine point (2i,2j,2k)), the coarse solve, prolongation by injection back to those points, one
 * post-smoothing sweep; on the coarsest level one sweep. CG with this preconditioner.
 *
 * Phases (HPCG's): (1) symmetry of SpMV and of the preconditioner: |x'Ay - y'Ax| and
 * |x'My - y'Mx| for two pseudo-random vectors, scaled by (|x||Ay| + |y||Ax|) * eps; pass < 1e2.
 * (2) spectral test: the fine diagonal multiplied by 1e6 (rows with global number < 9 by
 * (number + 2) * 1e6, giving a spectrum of ~10 clusters), rhs so that ones is still the solution;
 * CG must reach a 1e-12 residual reduction within 12 iterations unpreconditioned and 2
 * preconditioned (HPCG's expected counts). (3) the reference set: 50 iterations with the
 * reference kernels (mg_ref: whole rows in every sweep, the residual everywhere), its residual
 * reduction is the target; the optimised kernels run until they reach it, and iterations beyond
 * 50 are the penalty (their algorithm is the reference one summed in another order, so the 50th
 * iteration lands within rounding of the target: on one side 50, on the other 51). (4) timed sets (x = 0, tolerance 0, the iteration count of (3))
 * until --time seconds; every set's final residual must agree within 1e-10 relative
 * (reproducibility) and reach the target of (3).
 *
 * Flops per set of k iterations (n rows, nnz nonzeros on the fine level, HPCG's counts):
 *   DDOT   (3k + 1) * 2n        (r'z, p'Ap, |r|, plus the initial |r|)
 *   WAXPBY (3k + 1) * 2n        (p = z + beta p, x += alpha p, r -= alpha Ap, plus r = b - Ax)
 *   SpMV   (k + 1) * 2 nnz      (A p, plus the initial A x)
 *   MG     k * sum over levels but the coarsest of (4 nnz_l pre + 2 nnz_l residual + 4 nnz_l post)
 *          + k * 4 nnz_coarsest (a sweep forward + backward: 2 flops per nonzero each way)
 * Bytes per set (8 B values, 4 B indices, counted as HPCG's report counts them):
 *   DDOT 16n per dot, WAXPBY 24n per update, SpMV 12 nnz + 16n (x read, y written),
 *   SymGS sweep pair 2 (12 nnz + 24n), MG residual SpMV as SpMV, restriction 24 n_c, prolongation 24 n_c.
 * Rating: the flops of the reference count (50 iterations per set) over the timed sets' time plus,
 * for every set, a tenth of the setup and optimisation time, as HPCG 3.1's final rating.
 *
 * Output (rank 0): info (placement, grid, dims, global rows and nonzeros), then a validation
 * record (all four tests), then results: rating (its params carry phase_unix, the timed sets from
 * the first one's start to the last one's end in CLOCK_REALTIME seconds, for the energy),
 * ddot/waxpby/spmv/mg GFLOP/s, bandwidth GB/s;
 * samples are per set. --selftest=1: instead, y = A v for v_g = ((g * 7) % 11) / 4 (g the global
 * row number) and a record "selftest" with sum_g y_g * (g % 13) and sum_g b_g, so a test can check
 * the matrix against an independent construction. --corrupt=1 (test hook): one off-diagonal
 * value on rank 0 becomes -1.5 (the matrix is no longer symmetric), so validation must fail.
 *
 * Args: --nx --ny --nz (local) --time=S --max_sets=N (0: no limit) --corrupt=0|1 --selftest=0|1
 */
#include "cb_common.h"
#include "cb_mpi.h"

#include <float.h>
#include <math.h>
#include <mpi.h>

#define NLEVELS 4
#define W 27          /* slots per row */
#define REF_ITERS 50
#define die cb_mpi_die

static int rank, nranks, npx, npy, npz, ipx, ipy, ipz;

typedef struct Level {
    int nx, ny, nz, n, ncols;     /* local box, rows, rows + ghosts */
    long long gnx, gny, gnz;
    double gnnz, gn;              /* global nonzeros and rows */
    /* the matrix: the entries of local columns below the diagonal (L) and the others but the
     * diagonal (U: local columns above it, then ghosts), each in ELL form ascending by column, its
     * width the longest such part of any row (padding: 0 times x_i) */
    int wl, wu;
    int *lcol, *ucol;
    double *lval, *uval;
    unsigned char *llen, *ulen;
    double *diag, *invdiag;       /* the diagonal value of each row, and 1 / it */
    double *lsum;                 /* a forward sweep's lower sums (L_i x), which its backward sweep reuses */
    /* the pre-smoothing backward sweep's upper sums U_i x, which the post-smoothing forward sweep
     * reuses: between the two only the coarse points (prolongation) and the ghosts (0 before, a
     * halo exchange after) change, so each row also keeps its U entries in those columns (uc*,
     * CSR; ucidx indexes dv = the coarse correction, then the ghost values) */
    double *usum, *ucval, *dv;
    int *ucptr, *ucidx;
    int nnbr, *nbr, *rcnt, *roff, *scnt, **sidx;
    double *sbuf;
    MPI_Request *req;
    struct Level *coarse;
    int *f2c;                     /* coarse row -> fine row (this level is the fine one) */
    double *rc, *xc;              /* MG work vectors: coarse r and x */
} Level;

static double t_ddot, t_waxpby, t_spmv, t_mg, t_halo;

/* Arrays of 1 MiB or more on transparent huge pages (cb_alloc: 2 MiB aligned, madvise): the matrix
 * streams through hundreds of MB every sweep, and on 4 KiB pages each page restarts the hardware
 * prefetcher and costs a TLB walk (a nested one in a VM). Measured on 1 rank at 104^3: 3.0-3.1 ->
 * 3.3-3.5 GFLOP/s. Under THP "never" this is plain aligned memory. */
static void *big(size_t bytes) {
    return bytes >= (1u << 20) ? cb_alloc(bytes, 1) : malloc(bytes ? bytes : 1);
}

static double *vec(int n) {
    double *v = big((size_t)n * sizeof(double));
    if (v) memset(v, 0, (size_t)n * sizeof(double));
    if (!v) die("out of memory (%d doubles)", n);
    return v;
}

/* ---- process grid and problem ------------------------------------------------------------ */
static void choose_grid(int p) {
    int best = -1;
    for (int a = 1; a <= p; a++) {
        if (p % a) continue;
        for (int b = 1; b <= p / a; b++) {
            if ((p / a) % b) continue;
            int c = p / a / b;
            int mx = a > b ? (a > c ? a : c) : (b > c ? b : c), mn = a < b ? (a < c ? a : c) : (b < c ? b : c);
            /* most cubic; ties prefer more ranks along z (then y) */
            if (best < 0 || mx - mn < best || (mx - mn == best && c > npz) || (mx - mn == best && c == npz && b > npy)) {
                best = mx - mn;
                npx = a; npy = b; npz = c;
            }
        }
    }
    ipx = rank % npx;
    ipy = (rank / npx) % npy;
    ipz = rank / (npx * npy);
}

typedef struct { int owner; long long g; } Ext;

static int ext_cmp(const void *a, const void *b) {
    const Ext *x = a, *y = b;
    if (x->owner != y->owner) return x->owner < y->owner ? -1 : 1;
    return (x->g > y->g) - (x->g < y->g);
}

/* For a level with a coarser one: each row's U entries whose column the coarse correction or the
 * halo exchange changes between the pre- and the post-smoothing sweep (see usum). */
static void reuse_level(Level *L) {
    const int n = L->n, nc = L->coarse->n, ng = L->ncols - n;
    int *cidx = malloc((size_t)n * sizeof(int));          /* fine row -> coarse index, or -1 */
    if (!cidx) die("out of memory");
    for (int i = 0; i < n; i++) cidx[i] = -1;
    for (int c = 0; c < nc; c++) cidx[L->f2c[c]] = c;
    L->ucptr = malloc((size_t)(n + 1) * sizeof(int));
    size_t cnt = 0;
    for (int pass = 0; pass < 2; pass++) {
        cnt = 0;
        for (int i = 0; i < n; i++) {
            if (pass) L->ucptr[i] = (int)cnt;
            for (int k = 0; k < L->ulen[i]; k++) {
                int j = L->ucol[(size_t)i * L->wu + k];
                int d = j >= n ? nc + (j - n) : cidx[j];
                if (d < 0) continue;
                if (pass) { L->ucval[cnt] = L->uval[(size_t)i * L->wu + k]; L->ucidx[cnt] = d; }
                cnt++;
            }
        }
        if (!pass) {
            L->ucval = big((cnt ? cnt : 1) * sizeof(double));
            L->ucidx = big((cnt ? cnt : 1) * sizeof(int));
            if (!L->ucval || !L->ucidx) die("out of memory");
        }
    }
    L->ucptr[n] = (int)cnt;
    L->usum = vec(n);
    L->dv = vec(nc + ng);
    free(cidx);
}

/* Row (ix, iy, iz)'s entries, ascending by global column: j its local column, or -1 for a ghost
 * (then its owner and global number), and its value (26 on the diagonal, -1 for every existing
 * neighbour). Returns how many. */
typedef struct { int j, owner; long long g; double v; } Entry;
static int gen_row(const Level *L, int ix, int iy, int iz, Entry *e) {
    const int nx = L->nx, ny = L->ny, nz = L->nz;
    int m = 0;
    for (int sz = -1; sz <= 1; sz++) for (int sy = -1; sy <= 1; sy++) for (int sx = -1; sx <= 1; sx++) {
        int lx = ix + sx, ly = iy + sy, lz = iz + sz;
        double v = (sx == 0 && sy == 0 && sz == 0) ? 26.0 : -1.0;
        if (lx >= 0 && ly >= 0 && lz >= 0 && lx < nx && ly < ny && lz < nz) {
            e[m].j = lx + nx * (ly + ny * lz);
        } else {
            long long x = (long long)ipx * nx + lx, y = (long long)ipy * ny + ly, z = (long long)ipz * nz + lz;
            if (x < 0 || y < 0 || z < 0 || x >= L->gnx || y >= L->gny || z >= L->gnz) continue;
            e[m].j = -1;
            e[m].owner = (int)(x / nx) + npx * ((int)(y / ny) + npy * (int)(z / nz));
            e[m].g = x + L->gnx * (y + L->gny * z);
        }
        e[m++].v = v;
    }
    return m;
}

/* Build the matrix of one level (split as the kernels read it), its ghost columns and the
 * exchange lists. */
static void build_level(Level *L, int nx, int ny, int nz) {
    L->nx = nx; L->ny = ny; L->nz = nz;
    L->n = nx * ny * nz;
    L->gnx = (long long)nx * npx; L->gny = (long long)ny * npy; L->gnz = (long long)nz * npz;
    int n = L->n;
    L->diag = vec(n);
    L->invdiag = vec(n);
    /* two passes over the rows: the widths of the L and U parts, then the entries */
    Entry e[W];
    int wl = 0, wu = 0;
    for (int iz = 0; iz < nz; iz++) for (int iy = 0; iy < ny; iy++) for (int ix = 0; ix < nx; ix++) {
        int i = ix + nx * (iy + ny * iz), m = gen_row(L, ix, iy, iz, e), lo = 0, up = 0;
        for (int k = 0; k < m; k++) {
            if (e[k].j >= 0 && e[k].j < i) lo++;
            else if (e[k].j != i) up++;
        }
        if (lo > wl) wl = lo;
        if (up > wu) wu = up;
    }
    L->wl = wl = wl ? wl : 1;
    L->wu = wu = wu ? wu : 1;
    L->lcol = big((size_t)n * wl * sizeof(int)); L->lval = big((size_t)n * wl * sizeof(double));
    L->ucol = big((size_t)n * wu * sizeof(int)); L->uval = big((size_t)n * wu * sizeof(double));
    L->llen = malloc((size_t)n); L->ulen = malloc((size_t)n);
    L->lsum = vec(n);
    if (!L->lcol || !L->lval || !L->ucol || !L->uval || !L->llen || !L->ulen)
        die("out of memory building the matrix (%d rows)", n);
    size_t cap = 1024, next = 0;
    Ext *refs = malloc(cap * sizeof(Ext));
    long long nnz = 0;
    for (int iz = 0; iz < nz; iz++) for (int iy = 0; iy < ny; iy++) for (int ix = 0; ix < nx; ix++) {
        int i = ix + nx * (iy + ny * iz), m = gen_row(L, ix, iy, iz, e), lo = 0, up = 0;
        int *lc = L->lcol + (size_t)i * wl, *uc = L->ucol + (size_t)i * wu;
        double *lv = L->lval + (size_t)i * wl, *uv = L->uval + (size_t)i * wu;
        for (int k = 0; k < m; k++) {
            if (e[k].j == i) { L->diag[i] = e[k].v; continue; }
            if (e[k].j >= 0 && e[k].j < i) { lc[lo] = e[k].j; lv[lo++] = e[k].v; continue; }
            if (e[k].j < 0) {                               /* a ghost: resolved below */
                if (next == cap) { cap *= 2; refs = realloc(refs, cap * sizeof(Ext)); if (!refs) die("out of memory"); }
                refs[next].owner = e[k].owner;
                refs[next].g = e[k].g;
                uc[up] = -(int)(++next);
            } else {
                uc[up] = e[k].j;
            }
            uv[up++] = e[k].v;
        }
        for (int k = lo; k < wl; k++) { lc[k] = i; lv[k] = 0; }   /* padding: 0 x_i */
        for (int k = up; k < wu; k++) { uc[k] = i; uv[k] = 0; }
        L->llen[i] = (unsigned char)lo; L->ulen[i] = (unsigned char)up;
        L->invdiag[i] = 1.0 / L->diag[i];
        nnz += m;
    }
    /* unique ghost columns, ordered by owner then global number */
    Ext *uniq = malloc((next ? next : 1) * sizeof(Ext));
    memcpy(uniq, refs, next * sizeof(Ext));
    qsort(uniq, next, sizeof(Ext), ext_cmp);
    size_t nu = 0;
    for (size_t j = 0; j < next; j++)
        if (nu == 0 || ext_cmp(&uniq[nu - 1], &uniq[j])) uniq[nu++] = uniq[j];
    for (int i = 0; i < n; i++) {
        int *uc = L->ucol + (size_t)i * wu, m = L->ulen[i], ghosts = 0;
        double *uv = L->uval + (size_t)i * wu;
        for (int k = 0; k < m; k++) {
            if (uc[k] >= 0) continue;
            Ext *hit = bsearch(&refs[-uc[k] - 1], uniq, nu, sizeof(Ext), ext_cmp);
            uc[k] = n + (int)(hit - uniq);
            ghosts = 1;
        }
        if (ghosts)   /* ascending by column again: the local ones, then the ghosts */
            for (int a = 1; a < m; a++)
                for (int b = a; b > 0 && uc[b - 1] > uc[b]; b--) {
                    int tc = uc[b]; uc[b] = uc[b - 1]; uc[b - 1] = tc;
                    double tv = uv[b]; uv[b] = uv[b - 1]; uv[b - 1] = tv;
                }
    }
    L->ncols = n + (int)nu;
    /* neighbours: runs of one owner */
    L->nbr = malloc(26 * sizeof(int)); L->rcnt = calloc(26, sizeof(int)); L->roff = calloc(26, sizeof(int));
    L->scnt = calloc(26, sizeof(int)); L->sidx = calloc(26, sizeof(int *));
    L->nnbr = 0;
    for (size_t j = 0; j < nu; j++) {
        if (j == 0 || uniq[j].owner != uniq[j - 1].owner) {
            if (L->nnbr == 26) die("more than 26 neighbours");
            L->nbr[L->nnbr] = uniq[j].owner;
            L->roff[L->nnbr++] = (int)j;
        }
        L->rcnt[L->nnbr - 1]++;
    }
    /* tell each neighbour which of its rows we need (the stencil is symmetric: same neighbours) */
    MPI_Request rq[52];
    for (int k = 0; k < L->nnbr; k++) {
        MPI_Irecv(&L->scnt[k], 1, MPI_INT, L->nbr[k], 1, MPI_COMM_WORLD, &rq[k]);
        MPI_Isend(&L->rcnt[k], 1, MPI_INT, L->nbr[k], 1, MPI_COMM_WORLD, &rq[26 + k]);
    }
    for (int k = 0; k < L->nnbr; k++) { MPI_Wait(&rq[k], MPI_STATUS_IGNORE); MPI_Wait(&rq[26 + k], MPI_STATUS_IGNORE); }
    long long *want = malloc((nu ? nu : 1) * sizeof(long long));
    for (size_t j = 0; j < nu; j++) want[j] = uniq[j].g;
    long long **got = calloc(26, sizeof(long long *));
    int stot = 0;
    for (int k = 0; k < L->nnbr; k++) {
        got[k] = malloc((size_t)(L->scnt[k] ? L->scnt[k] : 1) * sizeof(long long));
        stot += L->scnt[k];
        MPI_Irecv(got[k], L->scnt[k], MPI_LONG_LONG, L->nbr[k], 2, MPI_COMM_WORLD, &rq[k]);
        MPI_Isend(want + L->roff[k], L->rcnt[k], MPI_LONG_LONG, L->nbr[k], 2, MPI_COMM_WORLD, &rq[26 + k]);
    }
    for (int k = 0; k < L->nnbr; k++) { MPI_Wait(&rq[k], MPI_STATUS_IGNORE); MPI_Wait(&rq[26 + k], MPI_STATUS_IGNORE); }
    for (int k = 0; k < L->nnbr; k++) {
        L->sidx[k] = malloc((size_t)(L->scnt[k] ? L->scnt[k] : 1) * sizeof(int));
        for (int j = 0; j < L->scnt[k]; j++) {
            long long g = got[k][j];
            long long x = g % L->gnx, y = (g / L->gnx) % L->gny, z = g / (L->gnx * L->gny);
            int lx = (int)(x - (long long)ipx * nx), ly = (int)(y - (long long)ipy * ny), lz = (int)(z - (long long)ipz * nz);
            if (lx < 0 || ly < 0 || lz < 0 || lx >= nx || ly >= ny || lz >= nz) die("ghost request for a row not owned");
            L->sidx[k][j] = lx + nx * (ly + ny * lz);
        }
        free(got[k]);
    }
    free(got); free(want); free(uniq); free(refs);
    L->sbuf = vec(stot ? stot : 1);
    L->req = malloc(52 * sizeof(MPI_Request));
    double loc[2] = {(double)nnz, (double)n}, glob[2];
    MPI_Allreduce(loc, glob, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    L->gnnz = glob[0]; L->gn = glob[1];
}

static Level *build_hierarchy(int nx, int ny, int nz) {
    Level *levels = calloc(NLEVELS, sizeof(Level));
    for (int l = 0; l < NLEVELS; l++) {
        build_level(&levels[l], nx >> l, ny >> l, nz >> l);
        if (l) {
            Level *F = &levels[l - 1], *C = &levels[l];
            F->coarse = C;
            F->f2c = malloc((size_t)C->n * sizeof(int));
            for (int iz = 0; iz < C->nz; iz++) for (int iy = 0; iy < C->ny; iy++) for (int ix = 0; ix < C->nx; ix++)
                F->f2c[ix + C->nx * (iy + C->ny * iz)] = 2 * ix + F->nx * (2 * iy + F->ny * 2 * iz);
            F->rc = vec(C->ncols); F->xc = vec(C->ncols);
        }
    }
    return levels;
}

/* ---- kernels --------------------------------------------------------------------------------- */
static void halo(Level *L, double *x) {
    double t0 = MPI_Wtime();
    int nr = 0;
    for (int k = 0; k < L->nnbr; k++)
        MPI_Irecv(x + L->n + L->roff[k], L->rcnt[k], MPI_DOUBLE, L->nbr[k], 3, MPI_COMM_WORLD, &L->req[nr++]);
    double *b = L->sbuf;
    for (int k = 0; k < L->nnbr; k++) {
        for (int j = 0; j < L->scnt[k]; j++) b[j] = x[L->sidx[k][j]];
        MPI_Isend(b, L->scnt[k], MPI_DOUBLE, L->nbr[k], 3, MPI_COMM_WORLD, &L->req[nr++]);
        b += L->scnt[k];
    }
    MPI_Waitall(nr, L->req, MPI_STATUSES_IGNORE);
    t_halo += MPI_Wtime() - t0;
}

/* One row times x, in four partial sums: a Gauss-Seidel sweep is a chain from row to row, and one
 * running sum would make every row wait for 27 dependent multiply-adds (the reference gets the
 * same freedom from -ffast-math); the rounding differs from a left-to-right sum, as HPCG allows. */
static inline void row_acc(const double *restrict v, const int *restrict c, int m, const double *restrict x, double *s);
static inline double row_dot(const double *restrict v, const int *restrict c, int m, const double *restrict x) {
    double s[4] = {0, 0, 0, 0};
    row_acc(v, c, m, x, s);
    return (s[0] + s[1]) + (s[2] + s[3]);
}

#define LROW(L, i) (L)->lval + (size_t)(i) * (L)->wl, (L)->lcol + (size_t)(i) * (L)->wl
#define UROW(L, i) (L)->uval + (size_t)(i) * (L)->wu, (L)->ucol + (size_t)(i) * (L)->wu

/* the four partial sums, carried over the parts of a row */
static inline void row_acc(const double *restrict v, const int *restrict c, int m, const double *restrict x, double *s) {
    double s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3];
    int k = 0;
    for (; k + 4 <= m; k += 4) {
        s0 += v[k] * x[c[k]];
        s1 += v[k + 1] * x[c[k + 1]];
        s2 += v[k + 2] * x[c[k + 2]];
        s3 += v[k + 3] * x[c[k + 3]];
    }
    for (; k < m; k++) s0 += v[k] * x[c[k]];
    s[0] = s0; s[1] = s1; s[2] = s2; s[3] = s3;
}

/* row i of A times x: diagonal, L and U */
static inline double row_full(const Level *L, const double *restrict x, int i) {
    double s[4] = {L->diag[i] * x[i], 0, 0, 0};
    row_acc(LROW(L, i), L->llen[i], x, s);
    row_acc(UROW(L, i), L->ulen[i], x, s);
    return (s[0] + s[1]) + (s[2] + s[3]);
}

static void spmv(Level *L, double *restrict x, double *restrict y) {
    halo(L, x);
    const int n = L->n;
    for (int i = 0; i < n; i++) y[i] = row_full(L, x, i);
}

/* Forward sweep, row i: x_i = (r_i - L_i x - u) / a_ii with u = U_i x (0 from x = 0), L_i x kept
 * in lsum; the last L term (the neighbour updated just before) is added after the others, so the
 * chain from row to row is one multiply-add and a multiply. */
static inline void fwd_row(Level *L, const double *restrict r, double *restrict x, int i, double u) {
    const double *v = L->lval + (size_t)i * L->wl;
    const int *c = L->lcol + (size_t)i * L->wl, m = L->llen[i];
    if (m) {
        double s = row_dot(v, c, m - 1, x), t = r[i] - u - s, last = v[m - 1] * x[c[m - 1]];
        L->lsum[i] = s + last;
        x[i] = (t - last) * L->invdiag[i];
    } else {
        L->lsum[i] = 0;
        x[i] = (r[i] - u) * L->invdiag[i];
    }
}

/* Backward sweep, row i: x_i = (r_i - lsum_i - U_i x) / a_ii, the first U term (the neighbour
 * updated just before) last; U_i x kept in usum[i] when usum is given. */
static inline void bwd_row(Level *L, const double *restrict r, double *restrict x, int i, double *restrict usum) {
    const double *v = L->uval + (size_t)i * L->wu;
    const int *c = L->ucol + (size_t)i * L->wu, m = L->ulen[i];
    if (m) {
        double rest = row_dot(v + 1, c + 1, m - 1, x), first = v[0] * x[c[0]];
        if (usum) usum[i] = rest + first;
        x[i] = ((r[i] - L->lsum[i] - rest) - first) * L->invdiag[i];
    } else {
        if (usum) usum[i] = 0;
        x[i] = (r[i] - L->lsum[i]) * L->invdiag[i];
    }
}

/* The pre-smoothing sweep, symgs() from x = 0 (ghosts included): the forward sweep's U terms
 * multiply zeros, so it reads only L. On a level with a coarser one the backward sweep keeps each
 * row's U_i x in usum for the post-smoothing sweep. */
static void symgs_zero(Level *L, const double *r, double *x) {
    double *usum = L->coarse ? L->usum : NULL;
    for (int i = 0; i < L->n; i++) fwd_row(L, r, x, i, 0.0);
    for (int i = L->n - 1; i >= 0; i--) bwd_row(L, r, x, i, usum);
}

/* The post-smoothing sweep, after the coarse correction xc was added at the coarse points: the
 * forward sweep's U_i x is the pre-smoothing one (usum) plus the entries whose columns changed
 * since, times their change (the correction, and the ghost values, 0 before). */
static void symgs_post(Level *L, const double *r, double *x) {
    halo(L, x);
    const int n = L->n, nc = L->coarse->n;
    memcpy(L->dv, L->xc, (size_t)nc * sizeof(double));
    memcpy(L->dv + nc, x + n, (size_t)(L->ncols - n) * sizeof(double));
    const double *dv = L->dv;
    for (int i = 0; i < n; i++) {
        double u = L->usum[i];
        for (int k = L->ucptr[i]; k < L->ucptr[i + 1]; k++) u += L->ucval[k] * dv[L->ucidx[k]];
        fwd_row(L, r, x, i, u);
    }
    for (int i = n - 1; i >= 0; i--) bwd_row(L, r, x, i, NULL);
}

/* z = M r (x must hold ncols doubles). */
static void mg(Level *L, const double *r, double *x) {
    memset(x, 0, (size_t)L->ncols * sizeof(double));
    symgs_zero(L, r, x);
    if (!L->coarse) return;
    /* residual r - A x and its restriction by injection, fused: only the rows restriction keeps
     * (one in eight) are computed; the others would be thrown away (the count stays HPCG's) */
    halo(L, x);
    const int nc = L->coarse->n;
    for (int i = 0; i < nc; i++) {
        const int f = L->f2c[i];
        L->rc[i] = r[f] - row_full(L, x, f);
    }
    mg(L->coarse, L->rc, L->xc);
    for (int i = 0; i < nc; i++) x[L->f2c[i]] += L->xc[i];
    symgs_post(L, r, x);
}

/* ---- the reference kernels (HPCG's ComputeSYMGS_ref / ComputeMG_ref, as written in its
 * specification): every sweep reads whole rows, the residual is computed everywhere. They give
 * the reference residual reduction the optimised kernels must reach (phase 3). */
static void symgs_ref(Level *L, const double *r, double *x) {
    halo(L, x);
    for (int i = 0; i < L->n; i++) x[i] += (r[i] - row_full(L, x, i)) * L->invdiag[i];
    for (int i = L->n - 1; i >= 0; i--) x[i] += (r[i] - row_full(L, x, i)) * L->invdiag[i];
}

static void mg_ref(Level *L, const double *r, double *x) {
    memset(x, 0, (size_t)L->ncols * sizeof(double));
    symgs_ref(L, r, x);
    if (!L->coarse) return;
    double *ax = vec(L->ncols);
    spmv(L, x, ax);
    for (int i = 0; i < L->coarse->n; i++) L->rc[i] = r[L->f2c[i]] - ax[L->f2c[i]];
    free(ax);
    mg_ref(L->coarse, L->rc, L->xc);
    for (int i = 0; i < L->coarse->n; i++) x[L->f2c[i]] += L->xc[i];
    symgs_ref(L, r, x);
}

static double ddot(int n, const double *a, const double *b) {
    double t0 = MPI_Wtime(), s = 0, g;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    MPI_Allreduce(&s, &g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    t_ddot += MPI_Wtime() - t0;
    return g;
}

static void waxpby(int n, double a, const double *x, double b, const double *y, double *w) {
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) w[i] = a * x[i] + b * y[i];
    t_waxpby += MPI_Wtime() - t0;
}

typedef struct { double *x, *r, *z, *p, *ap; } Work;

/* CG from x = 0: at most maxit iterations, stop when |r|/|r0| <= tol (tol 0: never); precond 0:
 * none, 1: the multigrid, 2: the multigrid of the reference kernels.
 * Returns the iterations done; *reduction = |r|/|r0| at the end. */
static int cg(Level *A, const double *b, Work *w, int maxit, double tol, int precond, double *reduction) {
    const int n = A->n;
    double t0;
    memset(w->x, 0, (size_t)A->ncols * sizeof(double));
    memcpy(w->p, w->x, (size_t)n * sizeof(double));
    t0 = MPI_Wtime(); spmv(A, w->p, w->ap); t_spmv += MPI_Wtime() - t0;
    waxpby(n, 1.0, b, -1.0, w->ap, w->r);
    double normr0 = sqrt(ddot(n, w->r, w->r)), normr = normr0, rtz = 0, oldrtz;
    int k = 0;
    while (k < maxit && (tol <= 0 || normr / normr0 > tol)) {
        k++;
        t0 = MPI_Wtime();
        if (precond == 2) mg_ref(A, w->r, w->z);
        else if (precond) mg(A, w->r, w->z);
        else memcpy(w->z, w->r, (size_t)n * sizeof(double));
        t_mg += MPI_Wtime() - t0;
        oldrtz = rtz;
        rtz = ddot(n, w->r, w->z);
        if (k == 1) waxpby(n, 1.0, w->z, 0.0, w->z, w->p);
        else waxpby(n, 1.0, w->z, rtz / oldrtz, w->p, w->p);
        t0 = MPI_Wtime(); spmv(A, w->p, w->ap); t_spmv += MPI_Wtime() - t0;
        double alpha = rtz / ddot(n, w->p, w->ap);
        waxpby(n, 1.0, w->x, alpha, w->p, w->x);
        waxpby(n, 1.0, w->r, -alpha, w->ap, w->r);
        normr = sqrt(ddot(n, w->r, w->r));
    }
    *reduction = normr / normr0;
    return k;
}

/* ---- validation -------------------------------------------------------------------------- */
static double hash01(long long g, int salt) {
    unsigned long long z = (unsigned long long)g * 0x9E3779B97F4A7C15ULL + (unsigned long long)salt * 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 31; z *= 0x94D049BB133111EBULL; z ^= z >> 29;
    return (double)(z >> 11) / 9007199254740992.0;
}

static long long global_row(const Level *L, int i) {
    int ix = i % L->nx, iy = (i / L->nx) % L->ny, iz = i / (L->nx * L->ny);
    long long gx = (long long)ipx * L->nx + ix, gy = (long long)ipy * L->ny + iy, gz = (long long)ipz * L->nz + iz;
    return gx + L->gnx * (gy + L->gny * gz);
}

/* Scaled departure from symmetry of op: |x'(op y) - y'(op x)| / ((|x||op y| + |y||op x|) eps). */
static double departure(Level *A, int use_mg, Work *w) {
    const int n = A->n;
    double *x = vec(A->ncols), *y = vec(A->ncols), *ox = vec(A->ncols), *oy = vec(A->ncols);
    for (int i = 0; i < n; i++) { long long g = global_row(A, i); x[i] = hash01(g, 1) - 0.5; y[i] = hash01(g, 2) - 0.5; }
    if (use_mg) { mg(A, x, ox); mg(A, y, oy); } else { spmv(A, x, ox); spmv(A, y, oy); }
    double xoy = ddot(n, x, oy), yox = ddot(n, y, ox);
    double nx_ = sqrt(ddot(n, x, x)), ny_ = sqrt(ddot(n, y, y)), nox = sqrt(ddot(n, ox, ox)), noy = sqrt(ddot(n, oy, oy));
    free(x); free(y); free(ox); free(oy);
    (void)w;
    return fabs(xoy - yox) / ((nx_ * noy + ny_ * nox) * DBL_EPSILON);
}

/* The spectral test: diagonal scaled as HPCG's TestCG; returns the iterations of CG without and
 * with the preconditioner to a 1e-12 reduction. */
static void spectral(Level *A, const double *b, Work *w, int *it_plain, int *it_mg) {
    const int n = A->n;
    double *scale = vec(n), *bm = vec(n), red;
    for (int i = 0; i < n; i++) {
        long long g = global_row(A, i);
        scale[i] = g < 9 ? (double)(g + 2) * 1.0e6 : 1.0e6;
    }
    for (int i = 0; i < n; i++) {
        bm[i] = b[i] + (scale[i] - 1.0) * A->diag[i];   /* A' * ones */
        A->diag[i] *= scale[i];
        A->invdiag[i] = 1.0 / A->diag[i];
    }
    *it_plain = cg(A, bm, w, 50, 1e-12, 0, &red);
    *it_mg = cg(A, bm, w, 50, 1e-12, 1, &red);
    for (int i = 0; i < n; i++) {
        A->diag[i] /= scale[i];
        A->invdiag[i] = 1.0 / A->diag[i];
    }
    free(scale); free(bm);
}

/* ---- counts ------------------------------------------------------------------------------- */
typedef struct { double ddot, waxpby, spmv, mg; } Counts;

static Counts flops_per_set(const Level *A, int k) {
    Counts c;
    c.ddot = (3.0 * k + 1) * 2.0 * A->gn;
    c.waxpby = (3.0 * k + 1) * 2.0 * A->gn;
    c.spmv = (k + 1.0) * 2.0 * A->gnnz;
    c.mg = 0;
    const Level *L = A;
    for (; L->coarse; L = L->coarse) c.mg += k * (4.0 + 2.0 + 4.0) * L->gnnz;
    c.mg += k * 4.0 * L->gnnz;
    return c;
}

static double bytes_per_set(const Level *A, int k) {
    double n = A->gn, b = 0;
    b += (3.0 * k + 1) * 16.0 * n;                       /* ddot */
    b += (3.0 * k + 1) * 24.0 * n;                       /* waxpby */
    b += (k + 1.0) * (12.0 * A->gnnz + 16.0 * n);        /* spmv */
    const Level *L = A;
    for (; L->coarse; L = L->coarse) {
        double sweep = 2.0 * (12.0 * L->gnnz + 24.0 * L->gn);
        b += k * (2.0 * sweep + 12.0 * L->gnnz + 16.0 * L->gn + 48.0 * L->coarse->gn);
    }
    b += k * 2.0 * (12.0 * L->gnnz + 24.0 * L->gn);
    return b;
}

static const int *extra_dims;
static void info_extra(const void *arg) {
    const Level *A = arg;
    int grid[3] = {npx, npy, npz};
    cb_json_ints("local", extra_dims, 3);
    cb_json_ints("grid", grid, 3);
    cb_json_num("global_rows", A->gn);
    cb_json_num("global_nonzeros", A->gnnz);
    cb_json_int("levels", NLEVELS);
}

int main(int argc, char **argv) {
    cb_mpi_start(&argc, &argv, &rank, &nranks, 0);
    int dims[3] = {16, 16, 16};
    CB_OPTIONS(argc, argv, CB_OPT("nx", dims[0]), CB_OPT("ny", dims[1]), CB_OPT("nz", dims[2]));
    double tmin = 60.0;
    int max_sets = 0;
    int corrupt = 0, selftest = 0;
    CB_OPTIONS(argc, argv, CB_OPT("time", tmin), CB_OPT("max_sets", max_sets), CB_OPT("corrupt", corrupt),
               CB_OPT("selftest", selftest));
    for (int d = 0; d < 3; d++)
        if (dims[d] < 8 || dims[d] % 8) die("local dimension %d is not a positive multiple of 8 (4 multigrid levels)", dims[d]);
    choose_grid(nranks);
    extra_dims = dims;
    double ts = MPI_Wtime();
    Level *lv = build_hierarchy(dims[0], dims[1], dims[2]);
    Level *A = lv;
    double setup_s = MPI_Wtime() - ts;
    ts = MPI_Wtime();
    for (int l = 0; l < NLEVELS; l++) {                      /* the optimisation step */
        if (lv[l].coarse) reuse_level(&lv[l]);
    }
    double opt_s = MPI_Wtime() - ts;
    double st[2] = {setup_s, opt_s};
    MPI_Allreduce(MPI_IN_PLACE, st, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    setup_s = st[0]; opt_s = st[1];
    cb_mpi_report_placement(rank, nranks, info_extra, A);
    const int n = A->n;
    double *b = vec(A->ncols), *ones = vec(A->ncols);
    for (int i = 0; i < n; i++) ones[i] = 1.0;
    spmv(A, ones, b);   /* exact solution: ones */

    if (selftest) {
        double *v = vec(A->ncols), *y = vec(A->ncols), loc[2] = {0, 0}, glob[2];
        for (int i = 0; i < n; i++) v[i] = (double)((global_row(A, i) * 7) % 11) / 4.0;
        spmv(A, v, y);
        for (int i = 0; i < n; i++) { loc[0] += y[i] * (double)(global_row(A, i) % 13); loc[1] += b[i]; }
        MPI_Reduce(loc, glob, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            cb_json_begin("selftest");
            cb_json_num("spmv_checksum", glob[0]);
            cb_json_num("rhs_sum", glob[1]);
            cb_json_num("global_nonzeros", A->gnnz);
            cb_json_end();
        }
        return cb_mpi_finish(rank, -1);
    }
    if (corrupt && rank == 0 && A->ulen[0])   /* row 0's first off-diagonal becomes -1.5: A is no longer symmetric */
        A->uval[0] = -1.5;

    Work w = {vec(A->ncols), vec(A->ncols), vec(A->ncols), vec(A->ncols), vec(A->ncols)};
    /* (1) symmetry */
    double dep_spmv = departure(A, 0, &w), dep_mg = departure(A, 1, &w);
    int sym_ok = dep_spmv < 1e2 && dep_mg < 1e2;
    /* (2) spectral */
    int it_plain, it_mg;
    spectral(A, b, &w, &it_plain, &it_mg);
    int spec_ok = it_plain <= 12 && it_mg <= 2;
    /* (3) the reference set and the iterations this implementation needs for its reduction */
    double ref_red, opt_red;
    cg(A, b, &w, REF_ITERS, 0.0, 2, &ref_red);   /* the reference kernels */
    int opt_iters = cg(A, b, &w, 10 * REF_ITERS, ref_red, 1, &opt_red);
    int penalty = opt_iters > REF_ITERS ? opt_iters - REF_ITERS : 0;
    int conv_ok = opt_red <= ref_red && ref_red < 1.0;
    /* (4) timed sets */
    int cap = 1024, sets = 0;
    double *set_s = malloc((size_t)cap * sizeof(double)), *set_red = malloc((size_t)cap * sizeof(double));
    double tk[4] = {0, 0, 0, 0};
    double t_start = MPI_Wtime(), elapsed = 0;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    double phase[2] = {(double)rt.tv_sec + 1e-9 * (double)rt.tv_nsec, 0};  /* the timed sets in wall-clock time */
    t_ddot = t_waxpby = t_spmv = t_mg = t_halo = 0;
    int pre_ok = sym_ok && spec_ok && conv_ok;   /* a failed test: no timed sets (nothing to report) */
    while (pre_ok) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime(), red;
        cg(A, b, &w, opt_iters, 0.0, 1, &red);
        double dt = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (sets == cap) { cap *= 2; set_s = realloc(set_s, (size_t)cap * sizeof(double)); set_red = realloc(set_red, (size_t)cap * sizeof(double)); }
        set_s[sets] = dt; set_red[sets++] = red;
        elapsed = MPI_Wtime() - t_start;
        MPI_Bcast(&elapsed, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (elapsed >= tmin || (max_sets > 0 && sets >= max_sets)) break;
    }
    clock_gettime(CLOCK_REALTIME, &rt);
    phase[1] = (double)rt.tv_sec + 1e-9 * (double)rt.tv_nsec;
    MPI_Allreduce(MPI_IN_PLACE, &phase[0], 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &phase[1], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    tk[0] = t_ddot; tk[1] = t_waxpby; tk[2] = t_spmv; tk[3] = t_mg;
    MPI_Allreduce(MPI_IN_PLACE, tk, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double worst = 0;
    int reach_ok = sets > 0;
    for (int s = 0; s < sets; s++) {
        double d = fabs(set_red[s] - set_red[0]) / set_red[0];
        if (d > worst) worst = d;
        if (set_red[s] > ref_red * (1 + 1e-10)) reach_ok = 0;
    }
    int repro_ok = worst <= 1e-10;
    int ok = sym_ok && spec_ok && conv_ok && repro_ok && reach_ok;
    double total = 0;
    for (int s = 0; s < sets; s++) total += set_s[s];
    Counts fc = flops_per_set(A, opt_iters);
    double fset = fc.ddot + fc.waxpby + fc.spmv + fc.mg;
    double fref = fset * (double)REF_ITERS / opt_iters;   /* credited flops per set */
    /* HPCG 3.1's final rating charges every set a tenth of the setup and optimisation time (the
     * overhead of ten sets of 50 iterations) */
    double opt_overhead_s = sets * (setup_s + opt_s) / 10.0;
    double bset = bytes_per_set(A, opt_iters);
    if (rank == 0) {
        cb_json_begin("validation");
        cb_json_bool("ok", ok);
        cb_json_bool("symmetry_ok", sym_ok);
        cb_json_num("spmv_departure", dep_spmv);
        cb_json_num("mg_departure", dep_mg);
        cb_json_bool("spectral_ok", spec_ok);
        cb_json_int("spectral_iterations_plain", it_plain);
        cb_json_int("spectral_iterations_mg", it_mg);
        cb_json_bool("convergence_ok", conv_ok && reach_ok);
        cb_json_num("reference_reduction", ref_red);
        cb_json_int("reference_iterations", REF_ITERS);
        cb_json_int("optimised_iterations", opt_iters);
        cb_json_int("penalty_iterations", penalty);
        cb_json_bool("reproducible", repro_ok);
        cb_json_num("reduction_spread", worst);
        cb_json_int("sets", sets);
        char detail[512] = "";
        if (!sym_ok) snprintf(detail + strlen(detail), sizeof detail - strlen(detail),
                              "symmetry departures %.3g (SpMV) and %.3g (MG) exceed 100; ", dep_spmv, dep_mg);
        if (!spec_ok) snprintf(detail + strlen(detail), sizeof detail - strlen(detail),
                               "spectral test took %d and %d iterations (at most 12 and 2); ", it_plain, it_mg);
        if (!(conv_ok && reach_ok)) snprintf(detail + strlen(detail), sizeof detail - strlen(detail),
                                             "a set did not reach the reference reduction %.3g; ", ref_red);
        if (!repro_ok) snprintf(detail + strlen(detail), sizeof detail - strlen(detail),
                                "final residuals differ between sets by %.3g (relative); ", worst);
        if (strlen(detail) > 2) detail[strlen(detail) - 2] = 0;
        cb_json_str("detail", ok ? "all HPCG validation tests passed" : detail);
        cb_json_end();
    }
    if (!ok) { MPI_Finalize(); return 1; }
    if (rank == 0) {
        double *rate = malloc((size_t)sets * sizeof(double)), *bw = malloc((size_t)sets * sizeof(double));
        for (int s = 0; s < sets; s++) { rate[s] = fref / set_s[s] / 1e9; bw[s] = bset / set_s[s] / 1e9; }
        char prm[768];
        snprintf(prm, sizeof prm, "{\"value\":%.17g,\"sets\":%d,\"time_s\":%.9g,\"setup_s\":%.6g,"
                 "\"optimisation_s\":%.6g,\"optimisation_overhead_s\":%.6g,\"flops_per_set\":%.17g,\"credited_flops_per_set\":%.17g,"
                 "\"bytes_per_set\":%.17g,\"halo_s\":%.6g,\"phase_unix\":[%.6f,%.6f]}",
                 fref * sets / (total + opt_overhead_s) / 1e9, sets, total, setup_s, opt_s, opt_overhead_s, fset, fref,
                 bset, t_halo, phase[0], phase[1]);
        cb_result("rating", "GFLOP/s", prm, rate, set_s, sets);
        const char *names[4] = {"ddot_gflops", "waxpby_gflops", "spmv_gflops", "mg_gflops"};
        double fl[4] = {fc.ddot, fc.waxpby, fc.spmv, fc.mg};
        for (int k = 0; k < 4; k++) {
            double g = fl[k] * sets / tk[k] / 1e9;
            snprintf(prm, sizeof prm, "{\"value\":%.17g,\"kernel_time_s\":%.9g,\"flops\":%.17g}", g, tk[k], fl[k] * sets);
            cb_json_begin("result"); cb_json_str("metric", names[k]); cb_json_str("unit", "GFLOP/s");
            cb_json_raw("params", prm); cb_json_nums("samples", &g, 1); cb_json_end();
        }
        snprintf(prm, sizeof prm, "{\"value\":%.17g,\"bytes\":%.17g}", bset * sets / total / 1e9, bset * sets);
        cb_json_begin("result"); cb_json_str("metric", "bandwidth_gbs"); cb_json_str("unit", "GB/s");
        cb_json_raw("params", prm); cb_json_nums("samples", bw, sets); cb_json_end();
        free(rate); free(bw);
    }
    return cb_mpi_finish(rank, -1);
}
