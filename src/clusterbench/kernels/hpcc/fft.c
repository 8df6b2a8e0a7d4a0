/* fft.c: the HPC Challenge FFT benchmark (SingleFFT, StarFFT, MPIFFT) on FFTW 3.
 *
 * One complex double 1-D DFT of size n, out of place (in -> out), per mode:
 *   --mode=single  one rank, one FFT of size n (run it on 1 rank);
 *   --mode=star    every rank its own FFT of size n at the same time (a barrier before each timed
 *                  sample); each rank times its own transform;
 *   --mode=mpi     one distributed FFT of global size n over all ranks (fftw_mpi_plan_dft_1d,
 *                  the distribution from fftw_mpi_local_size_1d). FFTW 3.3 plans any n, but it
 *                  splits n = (n/ranks) x ranks evenly only when ranks^2 divides n; otherwise the
 *                  blocks are uneven (2 ranks, n = 18: 9/9 in, 10/8 out) or, for a prime n, all
 *                  on rank 0 (no distributed FFT at all). So n must be a multiple of ranks^2
 *                  here (refused otherwise): every rank holds n/ranks elements in and out.
 *
 * Planning happens once, before any timing: single and star FFTW_MEASURE bounded by
 * fftw_set_timelimit (--plan_seconds, default 2 s, per plan; FFTW falls back to its estimate past
 * the limit), or FFTW_ESTIMATE with --plan=estimate; mpi always FFTW_ESTIMATE (a time limit can
 * make the ranks choose different distributed plans and deadlock; see main). Both are recorded
 * in the result params ("plan_flags", "plan_time_limit_s"). The planner overwrites the arrays, so the input is written after it, and
 * again (untimed) before every sample because an out-of-place MPI transform may destroy it.
 *
 * Input: x[j] = ((37 j) mod 101) / 50 - 1 + i (((53 j) mod 97) / 48 - 1) for the global index j
 * (the same on every rank in star mode), exactly reproducible in Python.
 *
 * Flops per transform: 5 n log2 n (HPCC's convention, whatever FFTW really does); a sample's
 * Gflop/s is that over its time / 1e9. After --warmup untimed transforms, --samples timed ones.
 *   single: gflops = gflops_per_process = F / t.
 *   star:   per sample, gflops = ranks F / (slowest rank's time) and gflops_per_process = the mean
 *           over ranks of F / (own time) (HPCC's StarFFT is that mean).
 *   mpi:    per sample, gflops = F(n) / (slowest rank's time); gflops_per_process = gflops / ranks.
 *
 * Validation (after timing): the backward transform of the output, scaled by 1/n, against the
 * input: err = max_j |x_j - x'_j| (complex modulus, max over every rank), scaled HPCC-style by
 * eps log2 n (eps = DBL_EPSILON / 2, HPCC's unit roundoff). It must be below 16, else an error
 * record and exit 1. --corrupt=1 adds n to one output element after timing (rank 0), which shifts
 * every x'_j by 1: validation must fail.
 *
 * --selftest=1: no timing; prints {"type":"selftest", sum of Re X_k, sum of Im X_k,
 * sum of |X_k| (k mod 7), the validation error} for the forward transform X of the input above
 * (ESTIMATE planning, mode single or mpi), for comparison with numpy.fft.fft.
 */
#include "cb_common.h"
#include <float.h>
#include <fftw3-mpi.h>
#include "cb_mpi.h"

enum { SINGLE, STAR, DIST };
static const char *mode_names[] = {"single", "star", "mpi"};
static int rank, nranks;

static double flops_of(double n) { return 5.0 * n * log2(n); }

/* The input at global index j (see the header). */
static void fill(fftw_complex *x, ptrdiff_t count, ptrdiff_t start) {
    for (ptrdiff_t i = 0; i < count; i++) {
        long long j = (long long)(start + i);
        x[i][0] = (double)((j * 37) % 101) / 50.0 - 1.0;
        x[i][1] = (double)((j * 53) % 97) / 48.0 - 1.0;
    }
}

/* max |x_j - y_j / n| over the local part, the input recomputed from its formula. */
static double max_error(const fftw_complex *y, ptrdiff_t count, ptrdiff_t start, double n) {
    double worst = 0.0;
    for (ptrdiff_t i = 0; i < count; i++) {
        long long j = (long long)(start + i);
        double re = (double)((j * 37) % 101) / 50.0 - 1.0, im = (double)((j * 53) % 97) / 48.0 - 1.0;
        double d = hypot(re - y[i][0] / n, im - y[i][1] / n);
        if (!(d <= worst)) worst = d;   /* a NaN counts as the worst */
    }
    return worst;
}

int main(int argc, char **argv) {
    cb_mpi_start(&argc, &argv, &rank, &nranks, 0);
    const char *mode_s = "single";
    ptrdiff_t n = 1 << 16;
    int samples = 5, warmup = 1, corrupt = 0, selftest = 0;
    double plan_seconds = 2.0;
    const char *plan_s = "measure", *wisdom = NULL;
    CB_OPTIONS(argc, argv, CB_OPT("mode", mode_s), CB_OPT("n", n), CB_OPT("samples", samples),
               CB_OPT("warmup", warmup), CB_OPT("corrupt", corrupt), CB_OPT("selftest", selftest),
               CB_OPT("plan_seconds", plan_seconds), CB_OPT("plan", plan_s), CB_OPT("wisdom", wisdom));
    int mode = -1;
    for (int m = 0; m < 3; m++)
        if (!strcmp(mode_s, mode_names[m])) mode = m;
    if (mode < 0) cb_mpi_die("--mode=%s: choose single, star or mpi", mode_s);
    if (n < 2) cb_mpi_die("--n=%td: at least 2", n);
    if (samples < 1 || warmup < 0) cb_mpi_die("--samples must be >= 1 and --warmup >= 0");
    if (mode == SINGLE && nranks != 1) cb_mpi_die("--mode=single runs on 1 rank, not %d", nranks);
    if (mode == DIST && nranks > 1 && n % ((ptrdiff_t)nranks * nranks))
        cb_mpi_die("--n=%td is not a multiple of ranks^2 = %d", n, nranks * nranks);
    cb_mpi_report_placement(rank, nranks, NULL, NULL);   /* before planning: it may take a while */
    /* mpi: FFTW_ESTIMATE. FFTW-MPI synchronises measured costs across ranks but not the time
     * limit, so under load one rank times out while another keeps measuring and the ranks pick
     * different plans and deadlock (seen here: 2 ranks, n = 2^20, 0.5 s limit); without a limit
     * MEASURE takes ~25 s at 2^20. Estimated plans are the same on every rank. */
    static const char *plan_names[] = {"estimate", "measure", "patient", "exhaustive"};
    static const unsigned plan_flags[] = {FFTW_ESTIMATE, FFTW_MEASURE, FFTW_PATIENT, FFTW_EXHAUSTIVE};
    static const char *flag_names[] = {"FFTW_ESTIMATE", "FFTW_MEASURE", "FFTW_PATIENT", "FFTW_EXHAUSTIVE"};
    int level = -1;
    for (int k = 0; k < 4; k++)
        if (!strcmp(plan_s, plan_names[k])) level = k;
    if (level < 0) cb_mpi_die("--plan=%s: choose estimate, measure, patient or exhaustive", plan_s);
    if (selftest || mode == DIST) level = 0;
    const int measure = level > 0;
    const unsigned flags = plan_flags[level];
    if (mode == DIST) fftw_mpi_init();
    fftw_set_timelimit(plan_seconds);

    /* local parts: [i_start, i_start + ni) of the input, [o_start, o_start + no) of the output */
    ptrdiff_t ni = n, i_start = 0, no = n, o_start = 0, alloc = n;
    if (mode == DIST) {
        ptrdiff_t bni, bis, bno, bos;
        alloc = fftw_mpi_local_size_1d(n, MPI_COMM_WORLD, FFTW_FORWARD, flags, &ni, &i_start, &no, &o_start);
        ptrdiff_t balloc = fftw_mpi_local_size_1d(n, MPI_COMM_WORLD, FFTW_BACKWARD, flags, &bni, &bis, &bno, &bos);
        if (balloc > alloc) alloc = balloc;
        /* the backward transform reads the forward's output layout and writes its input layout */
        if (bni != no || bis != o_start || bno != ni || bos != i_start)
            cb_mpi_die("FFTW-MPI's backward distribution of n=%td differs from the forward's", n);
    }
    if (alloc < 1) alloc = 1;
    fftw_complex *in = fftw_alloc_complex((size_t)alloc), *out = fftw_alloc_complex((size_t)alloc);
    if (!in || !out) cb_mpi_die("out of memory for 2 x %td complex doubles", alloc);
    memset(in, 0, (size_t)alloc * sizeof *in);
    memset(out, 0, (size_t)alloc * sizeof *out);

    /* The timed (forward) plan with --plan's rigour; the backward one, only for validation, estimated.
     * Wisdom (--wisdom=FILE, FFTW's own plan memory): rank 0 reads it before planning and writes it
     * back after, so a size planned once on this machine is planned again in no time. Star mode:
     * rank 0 plans first and hands its wisdom to the others, so every rank runs the same plan and
     * the planning is done once. */
    double tp = MPI_Wtime();
    fftw_plan fwd = NULL, bwd = NULL;
    int wisdom_loaded = 0;
    if (mode == DIST) {
        fwd = fftw_mpi_plan_dft_1d(n, in, out, MPI_COMM_WORLD, FFTW_FORWARD, flags);
        bwd = fftw_mpi_plan_dft_1d(n, out, in, MPI_COMM_WORLD, FFTW_BACKWARD, FFTW_ESTIMATE);
    } else {
        if (rank == 0) {
            if (wisdom && measure) wisdom_loaded = fftw_import_wisdom_from_filename(wisdom);
            fwd = fftw_plan_dft_1d((int)n, in, out, FFTW_FORWARD, flags);
        }
        if (mode == STAR && measure) {
            char *w = rank == 0 ? fftw_export_wisdom_to_string() : NULL;
            long long len = w ? (long long)strlen(w) + 1 : 0;
            MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
            if (rank != 0 && len > 0 && !(w = malloc((size_t)len))) cb_mpi_die("out of memory for FFTW's wisdom");
            if (len > 0) MPI_Bcast(w, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD);
            if (rank != 0 && len > 0) fftw_import_wisdom_from_string(w);
            if (w) { if (rank == 0) fftw_free(w); else free(w); }
        }
        if (rank != 0) fwd = fftw_plan_dft_1d((int)n, in, out, FFTW_FORWARD, flags);
        bwd = fftw_plan_dft_1d((int)n, out, in, FFTW_BACKWARD, FFTW_ESTIMATE);
        if (rank == 0 && wisdom && measure && fwd) { /* written aside and renamed: never half a file */
            char tmp[4096];
            snprintf(tmp, sizeof tmp, "%s.%d.tmp", wisdom, (int)getpid());
            if (fftw_export_wisdom_to_filename(tmp)) rename(tmp, wisdom);
            else unlink(tmp);
        }
    }
    int bad = !fwd || !bwd;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad) cb_mpi_die("FFTW cannot plan a %s 1-D transform of n=%td on %d ranks", mode_s, n, nranks);
    double plan_s_taken = MPI_Wtime() - tp;
    MPI_Allreduce(MPI_IN_PLACE, &plan_s_taken, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    const double F = flops_of((double)n), eps = DBL_EPSILON / 2, logn = log2((double)n);

    if (selftest) {
        fill(in, ni, i_start);
        fftw_execute(fwd);
        double loc[3] = {0, 0, 0}, glob[3];
        for (ptrdiff_t k = 0; k < no; k++) {
            loc[0] += out[k][0];
            loc[1] += out[k][1];
            loc[2] += hypot(out[k][0], out[k][1]) * (double)((o_start + k) % 7);
        }
        MPI_Reduce(loc, glob, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        fftw_execute(bwd);
        double err = max_error(in, ni, i_start, (double)n);
        MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0) {
            cb_json_begin("selftest");
            cb_json_str("mode", mode_s);
            cb_json_int("n", (long long)n);
            cb_json_num("sum_re", glob[0]);
            cb_json_num("sum_im", glob[1]);
            cb_json_num("weighted_abs", glob[2]);
            cb_json_num("max_error", err);
            cb_json_num("scaled_error", err / (eps * logn));
            cb_json_end();
        }
        return cb_mpi_finish(rank, -1);
    }

    for (int w = 0; w < warmup; w++) {
        fill(in, ni, i_start);
        MPI_Barrier(MPI_COMM_WORLD);
        fftw_execute(fwd);
    }
    double *t = malloc((size_t)samples * sizeof *t);
    double *all = rank == 0 ? malloc((size_t)samples * (size_t)nranks * sizeof *all) : NULL;
    if (!t || (rank == 0 && !all)) cb_mpi_die("out of memory");
    for (int s = 0; s < samples; s++) {
        fill(in, ni, i_start);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        fftw_execute(fwd);
        t[s] = MPI_Wtime() - t0;
    }
    MPI_Gather(t, samples, MPI_DOUBLE, all, samples, MPI_DOUBLE, 0, MPI_COMM_WORLD);

    if (corrupt && rank == 0 && no > 0) out[0][0] += (double)n;
    fftw_execute(bwd);
    double err = max_error(in, ni, i_start, (double)n);
    MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double scaled = err / (eps * logn);
    int ok = scaled < 16.0;   /* NaN fails too */
    if (rank == 0) {   /* a failed validation record fails the run (with its detail) */
        char detail[256];
        snprintf(detail, sizeof detail, "FFT validation %s: max |x - ifft(fft(x))| = %.3g, scaled by eps log2 n "
                 "%.3g (must be below 16)", ok ? "passed" : "failed", err, scaled);
        cb_json_begin("validation");
        cb_json_bool("ok", ok);
        cb_json_num("max_error", err);
        cb_json_num("scaled_error", scaled);
        cb_json_num("threshold", 16.0);
        cb_json_str("detail", detail);
        cb_json_end();
    }
    if (!ok) cb_mpi_die("FFT validation failed: scaled error %.3g (must be below 16)", scaled);

    if (rank == 0) {
        /* per sample: the slowest rank's time, the fastest's, and the mean of per-rank rates */
        double *wall = malloc((size_t)samples * sizeof *wall), *fast = malloc((size_t)samples * sizeof *fast);
        double *g = malloc((size_t)samples * sizeof *g), *gp = malloc((size_t)samples * sizeof *gp);
        if (!wall || !fast || !g || !gp) cb_mpi_die("out of memory");
        for (int s = 0; s < samples; s++) {
            double mx = 0, mn = INFINITY, rate = 0;
            for (int r = 0; r < nranks; r++) {
                double x = all[(size_t)r * (size_t)samples + (size_t)s];
                if (x > mx) mx = x;
                if (x < mn) mn = x;
                rate += F / x / 1e9;
            }
            wall[s] = mx; fast[s] = mn;
            if (mode == STAR) { g[s] = nranks * F / mx / 1e9; gp[s] = rate / nranks; }
            else { g[s] = F / mx / 1e9; gp[s] = g[s] / nranks; }
        }
        char prm[1024];
        snprintf(prm, sizeof prm,
                 "{\"mode\":\"%s\",\"n\":%td,\"processes\":%d,\"fftw_version\":\"%s\",\"plan_flags\":\"%s\","
                 "\"plan_time_limit_s\":%.6g,\"plan_s\":%.6g,\"wisdom_loaded\":%s,\"flops_per_transform\":%.17g,"
                 "\"max_error\":%.6g,\"scaled_error\":%.6g,\"valid\":true,\"warmup\":%d,"
                 "\"local_n_in\":%td,\"local_n_out\":%td}",
                 mode_s, n, nranks, fftw_version, flag_names[level],
                 measure ? plan_seconds : 0.0, plan_s_taken, wisdom_loaded ? "true" : "false", F, err, scaled,
                 warmup, ni, no);
        cb_result("gflops", "Gflop/s", prm, g, wall, samples);
        cb_result("gflops_per_process", "Gflop/s", prm, gp, fast, samples);
        free(wall); free(fast); free(g); free(gp); free(all);
    }
    free(t);
    fftw_destroy_plan(fwd);
    fftw_destroy_plan(bwd);
    fftw_free(in);
    fftw_free(out);
    if (mode == DIST) fftw_mpi_cleanup();
    return cb_mpi_finish(rank, -1);
}
