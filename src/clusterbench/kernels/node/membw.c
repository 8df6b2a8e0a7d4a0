/* bandwidth.c: read-only and write-only memory bandwidth (lmbench bw_mem rd / wr, Eicker and Lippert (2007)
 * Table 2), multi-threaded and pinned.
 *
 * One array of --elements doubles (heap, 2 MiB aligned, transparent huge pages requested) split
 * into one contiguous chunk (whole 4 KiB pages) per thread; each thread first-touches its chunk
 * and only ever works on it. Thread t pins itself to the t-th cpu of --cpus.
 *   read : sum of the chunk with 8 independent vector accumulators (loads are not serialised
 *          behind one add chain); the sums are checked against the closed form of the data.
 *   write: fill the chunk with the iteration's value, regular stores (as lmbench's wr) and/or
 *          non-temporal stores (write_nt); every element is checked afterwards.
 * Bytes counted: each element read (read) or written (write) once, 8 B; write-allocate traffic
 * (the line read before it is written) is not counted. MB/s = 1e6 B/s. Each of --ntimes
 * iterations is a sample; the first is a warm-up that Python drops.
 * The loops use intrinsics: the compiler can turn neither the fill into memset nor reorder the
 * reduction (no -ffast-math needed).
 *
 * Arguments: --cpus=LIST --elements=N --ntimes=K --modes=read,write,write_nt --corrupt=1 (damage the
 * data after timing so that validation fails).
 */
#include "cb_common.h"
#include <omp.h>

#include "cb_simd.h"

#define UNROLL (8 * VL)
#define MAXT 4096

static int cpus[MAXT], actual[MAXT];
static double sums[MAXT][8]; /* one cache line per thread */
static size_t first_bad_t[MAXT];

static double read_sum(const double *restrict p, size_t n) {
    size_t nv = n / UNROLL * UNROLL;
    vd s0 = SET1(0.0), s1 = SET1(0.0), s2 = SET1(0.0), s3 = SET1(0.0);
    vd s4 = SET1(0.0), s5 = SET1(0.0), s6 = SET1(0.0), s7 = SET1(0.0);
    for (size_t i = 0; i < nv; i += UNROLL) {
        s0 = ADD(s0, LD(p + i));
        s1 = ADD(s1, LD(p + i + VL));
        s2 = ADD(s2, LD(p + i + 2 * VL));
        s3 = ADD(s3, LD(p + i + 3 * VL));
        s4 = ADD(s4, LD(p + i + 4 * VL));
        s5 = ADD(s5, LD(p + i + 5 * VL));
        s6 = ADD(s6, LD(p + i + 6 * VL));
        s7 = ADD(s7, LD(p + i + 7 * VL));
    }
    double s = HSUM(ADD(ADD(ADD(s0, s1), ADD(s2, s3)), ADD(ADD(s4, s5), ADD(s6, s7))));
    for (size_t i = nv; i < n; i++) s += p[i];
    return s;
}

static void fill(double *restrict p, size_t n, double v) {
    size_t nv = n / UNROLL * UNROLL;
    const vd x = SET1(v);
    for (size_t i = 0; i < nv; i += UNROLL)
        for (int u = 0; u < 8; u++) ST(p + i + u * VL, x);
    for (size_t i = nv; i < n; i++) p[i] = v;
}

static void fill_nt(double *restrict p, size_t n, double v) {
    size_t nv = n / UNROLL * UNROLL;
    const vd x = SET1(v);
    for (size_t i = 0; i < nv; i += UNROLL)
        for (int u = 0; u < 8; u += 2) STNT2(p + i + u * VL, x, x);
    for (size_t i = nv; i < n; i++) p[i] = v;
    FENCE();
}

/* sum of (i & 15) for i in [0, n): exact in double for any n used here */
static double pattern_sum(size_t n) {
    size_t full = n / 16, rest = n % 16;
    return (double)full * 120.0 + (double)(rest * (rest - 1) / 2);
}

static void emit(const char *metric, const char *params, const double *times, int ntimes, size_t bytes) {
    double rate[1000];
    for (int k = 0; k < ntimes; k++) rate[k] = (double)bytes / times[k] * 1e-6;
    cb_result_begin(metric, "MB/s", params, rate, times, ntimes);
    cb_json_int("bytes", (long long)bytes);
    cb_json_end();
}

int main(int argc, char **argv) {
    const char *cpus_s = "0";
    long long nel = 10000000;
    int ntimes = 10;
    const char *modes = "read,write";
    int corrupt = 0;
    CB_OPTIONS(argc, argv, CB_OPT("cpus", cpus_s), CB_OPT("elements", nel), CB_OPT("ntimes", ntimes),
               CB_OPT("modes", modes), CB_OPT("corrupt", corrupt));
    int T = cb_parse_cpulist(cpus_s, cpus, MAXT);
    int do_read = 0, nw = 0, wnt[2];
    {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", modes);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (!strcmp(tok, "read")) do_read = 1;
            else if (!strcmp(tok, "write") && nw < 2) wnt[nw++] = 0;
            else if (!strcmp(tok, "write_nt") && nw < 2) wnt[nw++] = 1;
            else cb_fail("--modes takes read, write, write_nt; not '%s'", tok);
        }
    }
    if (T < 1) cb_fail("no cpus given");
    if (nel < 1) cb_fail("--elements must be positive");
    if (ntimes < 2 || ntimes > 1000) cb_fail("--ntimes must be 2..1000");
    if (!do_read && !nw) cb_fail("--modes must name read, write or write_nt, not '%s'", modes);

    size_t n = (size_t)nel, bytes = n * sizeof(double);
    cb_simd_team_start(T, cpus, actual, n, ntimes);
    cb_json_str("bytes_convention", "each element read (read) or written (write) once, 8 B; MB = 1e6 B");
    cb_json_end();

    double *a = cb_alloc(bytes, 1);
    double *times = malloc(sizeof(double) * (size_t)ntimes);
    if (!a || !times) cb_fail("cannot allocate %zu bytes", bytes);
    const double expect = pattern_sum(n);

    if (do_read) {
        double bad_sum = 0;
        int bad_iter = -1;
#pragma omp parallel num_threads(T)
        {
            int t = omp_get_thread_num();
            size_t lo, hi;
            cb_chunk_pages(n, T, t, &lo, &hi);
            for (size_t j = lo; j < hi; j++) a[j] = (double)(j & 15); /* first touch */
            for (int k = 0; k <= ntimes; k++) {
                double t0 = 0;
#pragma omp barrier
#pragma omp master
                {
                    if (k == ntimes && corrupt) a[n / 2] += 1.0; /* damage before the check pass */
                    t0 = cb_now();
                }
#pragma omp barrier
                sums[t][0] = read_sum(a + lo, hi - lo);
#pragma omp barrier
#pragma omp master
                {
                    if (k < ntimes) times[k] = cb_now() - t0;
                    double s = 0;
                    for (int u = 0; u < T; u++) s += sums[u][0];
                    if (s != expect && bad_iter < 0) { bad_iter = k; bad_sum = s; }
                }
            }
        }
        char detail[256];
        if (bad_iter < 0)
            snprintf(detail, sizeof detail, "read: every pass summed to the expected %.17g", expect);
        else
            snprintf(detail, sizeof detail, "read: pass %d summed to %.17g, expected %.17g", bad_iter, bad_sum,
                     expect);
        cb_validation(bad_iter < 0, detail);
        if (bad_iter >= 0) return 1;
        emit("read", "{}", times, ntimes, bytes);
    }

    for (int wi = 0; wi < nw; wi++) {
        int nt = wnt[wi];
        long long wrong = 0;
        size_t first_bad = 0;
        const double last = (double)ntimes;
#pragma omp parallel num_threads(T) reduction(+ : wrong)
        {
            int t = omp_get_thread_num();
            size_t lo, hi;
            cb_chunk_pages(n, T, t, &lo, &hi);
            first_bad_t[t] = n;
            if (!do_read && wi == 0) fill(a + lo, hi - lo, -1.0); /* first touch */
            for (int k = 0; k < ntimes; k++) {
                double t0 = 0;
#pragma omp barrier
#pragma omp master
                t0 = cb_now();
                if (nt) fill_nt(a + lo, hi - lo, (double)(k + 1));
                else fill(a + lo, hi - lo, (double)(k + 1));
#pragma omp barrier
#pragma omp master
                times[k] = cb_now() - t0;
            }
#pragma omp master
            if (corrupt && wi == nw - 1) a[n / 2] = -7.0;
#pragma omp barrier
            for (size_t j = lo; j < hi; j++)
                if (a[j] != last) {
                    if (!wrong) first_bad_t[t] = j;
                    wrong++;
                }
        }
        first_bad = n;
        for (int t = 0; t < T; t++)
            if (first_bad_t[t] < first_bad) first_bad = first_bad_t[t];
        char detail[256];
        if (!wrong)
            snprintf(detail, sizeof detail, "write (%s stores): all %zu elements hold the last value written",
                     nt ? "non-temporal" : "regular", n);
        else
            snprintf(detail, sizeof detail, "write (%s stores): %lld of %zu elements are wrong (e.g. index %zu)",
                     nt ? "non-temporal" : "regular", wrong, n, first_bad);
        cb_validation(wrong == 0, detail);
        if (wrong) return 1;
        emit("write", nt ? "{\"variant\":\"nt\"}" : "{\"variant\":\"regular\"}", times, ntimes, bytes);
    }
    free(a);
    free(times);
    return 0;
}
