/* daxpy.c: y = a*x + y on one pinned core; MB/s counted as STREAM does (24 B per element:
 * read x, read y, write y). Validation: a = 0.5 and x[i] = (i % 7) / 4 make every update exact
 * in binary floating point, so after R updates y[i] must equal 1 + R * (i % 7) / 8 exactly.
 * Args: --cpu=N --n=ELEMENTS --samples=S */
#include "cb_common.h"

int main(int argc, char **argv) {
    int cpu = (int)cb_arg_ll(argc, argv, "cpu", 0);
    long n = (long)cb_arg_ll(argc, argv, "n", 1000000);
    int samples = (int)cb_arg_ll(argc, argv, "samples", 10);
    if (n < 1 || samples < 2) cb_fail("--n must be >= 1 and --samples >= 2");
    if (cb_pin_self(cpu)) cb_fail("cannot pin to cpu %d", cpu);
    double *x = cb_alloc((size_t)n * sizeof(double), 0), *y = cb_alloc((size_t)n * sizeof(double), 0);
    if (!x || !y) cb_fail("cannot allocate 2 x %ld doubles", n);
    for (long i = 0; i < n; i++) { x[i] = (double)(i % 7) / 4; y[i] = 1.0; }
    const double a = 0.5;
    double *mbs = calloc((size_t)samples, sizeof(double)), *secs = calloc((size_t)samples, sizeof(double));
    for (int s = 0; s < samples; s++) {
        double t0 = cb_now();
        for (long i = 0; i < n; i++) y[i] += a * x[i];
        secs[s] = cb_now() - t0;
        mbs[s] = 24.0 * (double)n / secs[s] / 1e6;
    }
    int actual = sched_getcpu();
    cb_json_begin("info"); cb_json_ints("cpus_actual", &actual, 1); cb_json_int("n", n); cb_json_end();
    long bad = 0;
    for (long i = 0; i < n; i++)
        if (y[i] != 1.0 + (double)samples * (double)(i % 7) / 8) bad++;
    cb_json_begin("validation"); cb_json_bool("ok", bad == 0); cb_json_int("wrong_elements", bad); cb_json_end();
    if (bad) return 1;
    cb_json_begin("result"); cb_json_str("metric", "rate"); cb_json_str("unit", "MB/s");
    cb_json_raw("params", "{}");
    cb_json_nums("samples", mbs + 1, samples - 1);  /* the first pass is the warm-up */
    cb_json_nums("times_s", secs + 1, samples - 1);
    cb_json_end();
    return 0;
}
