/* dgemm.c: C = A*B (C n x n, A n x k, B k x n; k = n unless --k; column major, double) through a
 * BLAS chosen at run time. k = NB is the shape of HPL's trailing update (the tuner's cheap stage).
 *
 * The BLAS is dlopen()ed from --lib=PATH and cblas_dgemm (or the Fortran dgemm_) looked up, so
 * one binary serves OpenBLAS, BLIS, MKL, the reference BLAS... The number of BLAS threads comes
 * from the environment (OPENBLAS_NUM_THREADS, BLIS_NUM_THREADS, OMP_NUM_THREADS,
 * MKL_NUM_THREADS), set by the caller before the library is loaded.
 *
 * Timing: --samples timed products after one warm-up (excluded); Gflop/s = 2 n^2 k / t / 1e9.
 * Check (after the timed runs, like HPCC's DGEMM): a few columns of C are recomputed naively
 * and the scaled residual max|C - C_ref| / (eps k max|A| max|B|) must be below 16.
 *
 * Args: --lib=PATH --n=N --k=K --samples=K --cpus=LIST (one cpu: pin; several: affinity mask for the
 *       BLAS threads) --start-at=EPOCH (star mode: start together) --check-cols=8 --corrupt=1
 * Prints: info (cpus_actual: the cpu it ran on, or the affinity mask the BLAS threads inherit;
 *         late_s: how late it reached --start-at), validation, then the result.
 */
#include "cb_common.h"
#include "cb_blas.h"

#include <dlfcn.h>
#include <float.h>
#include <limits.h>

enum { CblasColMajor = 102, CblasNoTrans = 111 };
typedef void (*cblas_dgemm_t)(int, int, int, int, int, int, double, const double *, int, const double *, int,
                              double, double *, int);
typedef void (*f77_dgemm_t)(const char *, const char *, const int *, const int *, const int *, const double *,
                            const double *, const int *, const double *, const int *, const double *, double *,
                            const int *, size_t, size_t);

static cblas_dgemm_t c_dgemm;
static f77_dgemm_t f_dgemm;

static void gemm(int n, int k, const double *a, const double *b, double *c) {
    if (c_dgemm) {
        c_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, k, 1.0, a, n, b, k, 0.0, c, n);
    } else {
        const double one = 1.0, zero = 0.0;
        f_dgemm("N", "N", &n, &n, &k, &one, a, &n, b, &k, &zero, c, &n, 1, 1);
    }
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double rnd(void) { /* xorshift64*, uniform in [-0.5, 0.5) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545f4914f6cdd1dull) >> 11) * 0x1.0p-53 - 0.5;
}

int main(int argc, char **argv) {
    const char *lib = NULL;
    long long n_ll = 1000;
    int samples = 3;
    const char *cpus_s = NULL;
    double start_at = 0;
    int check_cols = 8, corrupt = 0;
    CB_OPTIONS(argc, argv, CB_OPT("lib", lib), CB_OPT("n", n_ll), CB_OPT("samples", samples),
               CB_OPT("cpus", cpus_s), CB_OPT("start-at", start_at), CB_OPT("check-cols", check_cols),
               CB_OPT("corrupt", corrupt));
    long long k_ll = n_ll; /* default: square */
    CB_OPTIONS(argc, argv, CB_OPT("k", k_ll));
    if (!lib) cb_fail("--lib=PATH of a BLAS shared library is required");
    if (n_ll < 1 || n_ll > 200000) cb_fail("--n must be between 1 and 200000");
    if (k_ll < 1 || k_ll > 200000) cb_fail("--k must be between 1 and 200000");
    if (samples < 1) cb_fail("--samples must be 1 or more");
    int n = (int)n_ll, kk = (int)k_ll;

    static int cpus[4096];
    int ncpus = cpus_s ? cb_parse_cpulist(cpus_s, cpus, 4096) : 0;
    if (ncpus == 1) cb_pin_or_fail(cpus[0]);
    else cb_bind_or_fail(cpus, ncpus, cpus_s, cb_fail); /* BLAS threads inherit this mask */

    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) cb_fail("cannot load BLAS %s: %s", lib, dlerror());
    const char *symbol = "cblas_dgemm";
    c_dgemm = (cblas_dgemm_t)dlsym(h, "cblas_dgemm");
    if (!c_dgemm) {
        symbol = "dgemm_";
        f_dgemm = (f77_dgemm_t)dlsym(h, "dgemm_");
        if (!f_dgemm) cb_fail("%s exports neither cblas_dgemm nor dgemm_: not a BLAS library", lib);
    }

    size_t bytes = (size_t)n * (size_t)n * sizeof(double), abytes = (size_t)n * (size_t)kk * sizeof(double);
    double *a = cb_alloc(abytes, 1), *b = cb_alloc(abytes, 1), *c = cb_alloc(bytes, 1);
    if (!a || !b || !c) cb_fail("cannot allocate C (%lld x %lld), A and B (%lld x %lld) doubles", n_ll, n_ll, n_ll, k_ll);
    for (size_t i = 0; i < (size_t)n * kk; i++) a[i] = rnd();
    for (size_t i = 0; i < (size_t)n * kk; i++) b[i] = rnd();
    memset(c, 0, bytes);

    double tres = cb_timer_resolution();
    double late = 0; /* star mode: how late this process reached the common start */
    if (start_at > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        late = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec - start_at;
        if (late < 0) late = 0;
        cb_wait_until(start_at);
    }
    double *rate = calloc((size_t)samples, sizeof(double)), *secs = calloc((size_t)samples, sizeof(double));
    double t_start = cb_now();
    for (int s = -1; s < samples; s++) { /* s = -1: warm-up */
        double t0 = cb_now();
        gemm(n, kk, a, b, c);
        double dt = cb_now() - t0;
        if (s >= 0) {
            secs[s] = dt;
            rate[s] = 2.0 * (double)n * n * kk / dt / 1e9;
        }
    }
    double t_total = cb_now() - t_start;

    /* what was loaded and how it is configured */
    char config[512], real[PATH_MAX];
    int blas_threads = cb_blas_describe(h, lib, config, sizeof config, real);

    /* where it ran: the pinned cpu; threaded, the affinity mask the BLAS threads inherited */
    int bound = sched_getcpu();
    static int actual[4096];
    int nactual = 0;
    if (ncpus > 1) {
        cpu_set_t got, want;
        CPU_ZERO(&want);
        for (int i = 0; i < ncpus; i++) CPU_SET(cpus[i], &want);
        if (sched_getaffinity(0, sizeof got, &got)) cb_fail("sched_getaffinity: %s", strerror(errno));
        if (CPU_EQUAL(&got, &want)) {
            memcpy(actual, cpus, (size_t)ncpus * sizeof(int));
            nactual = ncpus;
        } else {
            for (int c = 0; c < CPU_SETSIZE && nactual < 4096; c++)
                if (CPU_ISSET(c, &got)) actual[nactual++] = c;
        }
    } else {
        actual[0] = bound;
        nactual = 1;
    }
    cb_json_begin("info");
    cb_json_num("timer_resolution_s", tres);
    cb_json_int("n", n);
    cb_json_int("k", kk);
    cb_json_str("blas_requested", lib);
    cb_json_str("blas_path", real);
    cb_json_str("blas_symbol", symbol);
    cb_json_str("blas_config", config);
    cb_json_int("blas_threads", blas_threads);
    cb_json_loaded_libs("blas_loaded");
    cb_json_ints("cpus", ncpus ? cpus : &bound, ncpus ? ncpus : 1);
    cb_json_ints("cpus_actual", actual, nactual);
    cb_json_int("cpu_now", bound);
    cb_json_num("start_at", start_at);
    cb_json_num("late_s", late);
    cb_json_num("seconds_total", t_total);
    cb_json_end();

    /* validation: naive product on a few columns (always the first and the last) */
    if (check_cols < 1) check_cols = 1;
    if (check_cols > n) check_cols = n;
    int *cols = calloc((size_t)check_cols, sizeof(int));
    for (int k = 0; k < check_cols; k++)
    {
        (void)rnd();
        cols[k] = k == 0 ? n - 1 : (k == 1 ? 0 : (int)((rng_state >> 11) % (uint64_t)n));
    }
    if (corrupt) c[(size_t)cols[0] * n + (size_t)(n / 2)] += 1.0;
    double amax = 0, bmax = 0, dmax = 0;
    for (size_t i = 0; i < (size_t)n * kk; i++) {
        if (fabs(a[i]) > amax) amax = fabs(a[i]);
        if (fabs(b[i]) > bmax) bmax = fabs(b[i]);
    }
    double *ref = calloc((size_t)n, sizeof(double));
    int finite = 1;
    for (int k = 0; k < check_cols; k++) {
        int j = cols[k];
        memset(ref, 0, (size_t)n * sizeof(double));
        for (int l = 0; l < kk; l++) {
            double blj = b[(size_t)j * kk + l];
            const double *al = a + (size_t)l * n;
            for (int i = 0; i < n; i++) ref[i] += al[i] * blj;
        }
        for (int i = 0; i < n; i++) {
            double cij = c[(size_t)j * n + i];
            if (!isfinite(cij)) finite = 0;
            double d = fabs(cij - ref[i]);
            if (d > dmax) dmax = d;
        }
    }
    double resid = dmax / (DBL_EPSILON * kk * amax * bmax);
    int ok = finite && resid < 16.0;
    char detail[300];
    snprintf(detail, sizeof detail,
             "%d columns of C recomputed naively: scaled residual max|C-Cref|/(eps k max|A| max|B|) = %.3g "
             "(limit 16)%s", check_cols, resid, finite ? "" : "; C holds non-finite values");
    cb_validation_begin(ok, detail);
    cb_json_num("residual", resid);
    cb_json_end();
    if (!ok) return 1; /* results only after a successful validation */

    cb_json_begin("result");
    cb_json_str("metric", "gflops");
    cb_json_str("unit", "Gflop/s");
    {
        char p[64];
        snprintf(p, sizeof p, "{\"n\":%d,\"k\":%d}", n, kk);
        cb_json_raw("params", p);
    }
    cb_json_nums("samples", rate, samples);
    cb_json_nums("times_s", secs, samples);
    cb_json_end();
    return 0;
}
