/* fpu.c: latency and reciprocal throughput of scalar double add, mul, fma, div and sqrt
 * (lmbench lat_ops / par_ops, Eicker and Lippert (2007) Table 1), in ns and in cycles.
 *
 * Latency: one dependent chain  x = op(x)  unrolled 32 times per loop iteration.
 * Throughput: CHAINS (16) independent scalar chains interleaved, i.e. the reciprocal throughput
 * of the *scalar* instruction (no SIMD: every value is forced into its own scalar register by an
 * empty asm barrier after each operation, which also stops the compiler from folding,
 * reassociating or vectorising the chains).  16 >= latency (4) x pipes (2) for add/mul/fma.
 *
 * Operands are kept non-trivial (full mantissas, never 1.0 or a power of two) so that no core
 * can take a short-cut for easy inputs:
 *   add   x = x + 2^-24                       (exact)
 *   mul   x = x * (1 + 2^-30)
 *   fma   x = x * (1 - 2^-24) + 2^-24         (converges towards 1 from x0 >= 2: never reaches it)
 *   div   x = K_DIV / x                       (K_DIV = e; x alternates between x0 and e/x0)
 *   sqrt  x = sqrt(x) * K_SQRT                (K_SQRT = sqrt(1.7): x settles at about 1.7, not 1.0)
 * The sqrt chain therefore holds one multiply per sqrt: its latency is reported net of the mul
 * latency measured in the same process just before (params "mul_latency_subtracted_ns"); for
 * throughput the multiplies run on other pipes than the square-root unit and nothing is taken off.
 *
 * Cycles = ns x clock, the clock measured in this process by a dependent register-register
 * integer add chain (1 add per cycle latency), best of several runs: cb_measure_ghz().
 *
 * Validation: every chain's final value is compared with its closed form (exact for add,
 * relative tolerance n*eps for mul/fma/div, the fixed point (replayed) for sqrt) and must be
 * finite; it is printed before the op's results.
 *
 * Results: metrics "latency", "throughput" (ns per op) and "latency_cycles",
 * "throughput_cycles", each with params {"op": ...}.
 *
 * Args: --cpu=N (pin; -1 none) --samples=N --min_time=S (seconds per sample)
 *       --ops=add,mul,fma,div,sqrt --corrupt=1 (test hook: damage a result after timing)
 */
#include "cb_common.h"

#define UNROLL 32
#define CHAINS 16

#if defined(__x86_64__) || defined(__i386__)
#define KEEP(v) __asm__ __volatile__("" : "+x"(v))
#elif defined(__aarch64__)
#define KEEP(v) __asm__ __volatile__("" : "+w"(v))
#else
#define KEEP(v) __asm__ __volatile__("" : "+m"(v))
#endif

/* ---- the operations ---------------------------------------------------------------------- */
enum { OP_ADD, OP_MUL, OP_FMA, OP_DIV, OP_SQRT, N_OPS };
static const char *op_names[N_OPS] = {"add", "mul", "fma", "div", "sqrt"};

static const double C_ADD = 0x1p-24;               /* x += 2^-24: exact */
static const double C_MUL = 1.0 + 0x1p-30;         /* x *= m */
static const double FMA_M = 1.0 - 0x1p-24;         /* x = x*m + c, fixed point 1 */
static const double FMA_C = 0x1p-24;
static const double K_DIV = 2.718281828459045;     /* x = e / x: full mantissa */
static const double K_SQRT = 1.3038404810405297;   /* sqrt(1.7): x = sqrt(x) * K settles near 1.7 */
static volatile double v_seed = 1.0;               /* the compiler cannot know the start values */

static inline double op1(int op, double x, double a, double b) {
    switch (op) {
    case OP_ADD: return x + a;
    case OP_MUL: return x * a;
    case OP_FMA: return fma(x, a, b);
    case OP_DIV: return a / x;
    default: return sqrt(x) * a;
    }
}

/* One dependent chain, n = iters*UNROLL operations. Separate functions per op so each hot loop
 * is a straight run of one instruction (checked with objdump). */
#define LAT_FN(NAME, OP)                                                                    \
    static __attribute__((noinline)) double NAME(long iters, double x, double a, double b) { \
        KEEP(a); KEEP(b);                                                                   \
        for (long i = 0; i < iters; i++) {                                                  \
            _Pragma("GCC unroll 32")                                                       \
            for (int u = 0; u < UNROLL; u++) { x = op1(OP, x, a, b); KEEP(x); }            \
        }                                                                                   \
        return x;                                                                           \
    }
LAT_FN(lat_add, OP_ADD)
LAT_FN(lat_mul, OP_MUL)
LAT_FN(lat_fma, OP_FMA)
LAT_FN(lat_div, OP_DIV)
LAT_FN(lat_sqrt, OP_SQRT)

#define STEP(OP)                                                                          \
    x0 = op1(OP, x0, a, b); x1 = op1(OP, x1, a, b); x2 = op1(OP, x2, a, b); x3 = op1(OP, x3, a, b); \
    x4 = op1(OP, x4, a, b); x5 = op1(OP, x5, a, b); x6 = op1(OP, x6, a, b); x7 = op1(OP, x7, a, b); \
    x8 = op1(OP, x8, a, b); x9 = op1(OP, x9, a, b); x10 = op1(OP, x10, a, b); x11 = op1(OP, x11, a, b); \
    x12 = op1(OP, x12, a, b); x13 = op1(OP, x13, a, b); x14 = op1(OP, x14, a, b); x15 = op1(OP, x15, a, b); \
    KEEP(x0); KEEP(x1); KEEP(x2); KEEP(x3); KEEP(x4); KEEP(x5); KEEP(x6); KEEP(x7);        \
    KEEP(x8); KEEP(x9); KEEP(x10); KEEP(x11); KEEP(x12); KEEP(x13); KEEP(x14); KEEP(x15);

/* CHAINS independent chains, iters*TPUT_STEPS steps each (so CHAINS*iters*TPUT_STEPS ops). */
#define TPUT_FN(NAME, OP)                                                                   \
    static __attribute__((noinline)) void NAME(long iters, double *xs, double a, double b) { \
        double x0 = xs[0], x1 = xs[1], x2 = xs[2], x3 = xs[3], x4 = xs[4], x5 = xs[5];      \
        double x6 = xs[6], x7 = xs[7], x8 = xs[8], x9 = xs[9], x10 = xs[10], x11 = xs[11];  \
        double x12 = xs[12], x13 = xs[13], x14 = xs[14], x15 = xs[15];                      \
        KEEP(a); KEEP(b);                                                                   \
        for (long i = 0; i < iters; i++) { STEP(OP) STEP(OP) STEP(OP) STEP(OP) STEP(OP) STEP(OP) STEP(OP) STEP(OP) } \
        xs[0] = x0; xs[1] = x1; xs[2] = x2; xs[3] = x3; xs[4] = x4; xs[5] = x5; xs[6] = x6;  \
        xs[7] = x7; xs[8] = x8; xs[9] = x9; xs[10] = x10; xs[11] = x11; xs[12] = x12;        \
        xs[13] = x13; xs[14] = x14; xs[15] = x15;                                            \
    }
#define TPUT_STEPS 8 /* STEP()s per loop iteration */
TPUT_FN(tput_add, OP_ADD)
TPUT_FN(tput_mul, OP_MUL)
TPUT_FN(tput_fma, OP_FMA)
TPUT_FN(tput_div, OP_DIV)
TPUT_FN(tput_sqrt, OP_SQRT)

typedef double (*lat_fn)(long, double, double, double);
typedef void (*tput_fn)(long, double *, double, double);
static lat_fn lat_fns[N_OPS] = {lat_add, lat_mul, lat_fma, lat_div, lat_sqrt};
static tput_fn tput_fns[N_OPS] = {tput_add, tput_mul, tput_fma, tput_div, tput_sqrt};

static void op_consts(int op, double *a, double *b) {
    *b = 0;
    switch (op) {
    case OP_ADD: *a = C_ADD; break;
    case OP_MUL: *a = C_MUL; break;
    case OP_FMA: *a = FMA_M; *b = FMA_C; break;
    case OP_DIV: *a = K_DIV; break;
    default: *a = K_SQRT; break;
    }
}
static double start_value(int op, int chain) {
    double s = v_seed; /* 1.0, opaque */
    switch (op) {
    case OP_ADD: return s + chain;
    case OP_MUL: return s * (1.0 + chain / 16.0);
    case OP_FMA: return s * (2.0 + chain);
    case OP_DIV: return s * (1.4142135623730951 + chain * 0.061803398874989);
    default: return s * (1.2345678901234567 + chain * 0.0707106781186548);
    }
}
/* Closed form of n operations from x0; returns 1 when x is acceptable. */
static int check_value(int op, double x0, double n, double x, double *expect) {
    double e, tol;
    switch (op) {
    case OP_ADD: e = x0 + n * C_ADD; tol = 0; break;                 /* all exact */
    case OP_MUL: e = x0 * pow(C_MUL, n); tol = 4 * n * 0x1p-52; break;
    case OP_FMA: e = 1.0 + (x0 - 1.0) * pow(FMA_M, n); tol = 4 * n * 0x1p-52 + 1e-15; break;
    case OP_DIV: /* x0, e/x0, x0, ... */
        e = fmod(n, 2.0) == 0 ? x0 : K_DIV / x0;
        tol = 64 * 0x1p-52; /* f(f(x)) is monotone: x0, x2, ... settle on a fixed point within ulps */
        break;
    default: { /* sqrt(x)*K: a contraction (factor 1/2 per step in log x): replay until settled */
        double r = x0;
        long steps = n < 256 ? (long)n : 256;
        for (long i = 0; i < steps; i++) { r = sqrt(r) * K_SQRT; KEEP(r); }
        e = r;
        tol = n < 256 ? 0 : 8 * 0x1p-52; /* settled: a fixed point or a 2-cycle a few ulps wide */
        break;
    }
    }
    *expect = e;
    if (!isfinite(x)) return 0;
    return fabs(x - e) <= tol * fabs(e);
}

/* Latency chain of op: calibrated to min_time per sample; ns per op in ns[], seconds in ts[];
 * the final values are checked (bad counts failures, detail says the last). */
static double measure_latency(int op, int samples, double min_time, int corrupt, double *ns, double *ts,
                              int *bad, char *detail, size_t dlen) {
    double a, b;
    op_consts(op, &a, &b);
    long it = 64;
    while (it < CB_ITERS_MAX) {
        double t0 = cb_now();
        double r = lat_fns[op](it, start_value(op, 0), a, b);
        double dt = cb_now() - t0;
        if (!isfinite(r)) cb_fail("%s chain is not finite", op_names[op]);
        if (dt >= min_time / 4) break;
        it *= 2;
    }
    it *= 4;
    double last = NAN;
    for (int s = 0; s < samples; s++) {
        double x0 = start_value(op, 0);
        double t0 = cb_now();
        double x = lat_fns[op](it, x0, a, b);
        double dt = cb_now() - t0;
        last = x;
        double n = (double)it * UNROLL, e;
        if (corrupt && s == samples - 1) x = x * 1.5 + 1.0;
        if (!check_value(op, x0, n, x, &e)) {
            (*bad)++;
            snprintf(detail, dlen, "%s latency chain: got %.17g expected %.17g after %.0f ops",
                     op_names[op], x, e, n);
        }
        ns[s] = dt / n * 1e9;
        ts[s] = dt;
    }
    return last; /* the chain's final value (before any corruption) */
}

int main(int argc, char **argv) {
    int cpu = -1, samples = 5;
    double min_time = 0.005;
    int corrupt = 0;
    const char *ops_s = "add,mul,fma,div,sqrt";
    CB_OPTIONS(argc, argv, CB_OPT("cpu", cpu), CB_OPT("samples", samples), CB_OPT("min_time", min_time),
               CB_OPT("corrupt", corrupt), CB_OPT("ops", ops_s));
    if (samples < 1 || samples > 10000) cb_fail("--samples must be 1..10000");
    if (!(min_time > 0 && min_time < 100)) cb_fail("--min_time must be in (0, 100) seconds");
    int want[N_OPS] = {0};
    {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", ops_s);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            int found = 0;
            for (int o = 0; o < N_OPS; o++)
                if (!strcmp(tok, op_names[o])) { want[o] = 1; found = 1; }
            if (!found) cb_fail("unknown op '%s' (add,mul,fma,div,sqrt)", tok);
        }
    }
    cb_pin_or_fail(cpu);
    double res = cb_timer_resolution();
    min_time = fmax(min_time, 50 * res);
    double ghz0 = cb_measure_ghz(min_time, 5);
#if defined(__FMA__) || defined(__aarch64__) || defined(__ARM_FEATURE_FMA)
    int fma_hw = 1;
#else
    int fma_hw = 0;
#endif
    cb_info_begin_self(res);
    cb_json_int("chains", CHAINS);
    cb_json_int("unroll", UNROLL);
    cb_json_num("clock_ghz_start", ghz0);
    cb_json_str("clock_method", "dependent register-register integer add chain, 1 add/cycle, best of 5");
    cb_json_bool("fma_hardware", fma_hw);
    cb_json_str("variant", "scalar double; throughput = independent scalar chains, no SIMD");
    cb_json_end();

    if (samples > 64) samples = 64;
    double mul_lat_best = -1; /* ns, once measured: subtracted from the sqrt(x)*K chain */
    for (int op = 0; op < N_OPS; op++) {
        if (!want[op]) continue;
        double ns_lat[64], ns_tp[64], t_lat[64], t_tp[64];
        int bad = 0;
        char detail[512] = "";
        double a, b;
        op_consts(op, &a, &b);
        if (op == OP_SQRT && mul_lat_best < 0) { /* the mul of the sqrt chain, measured now */
            double ns_m[64], ts_m[64];
            measure_latency(OP_MUL, samples, min_time, 0, ns_m, ts_m, &bad, detail, sizeof detail);
            mul_lat_best = ns_m[0];
            for (int s = 1; s < samples; s++) mul_lat_best = fmin(mul_lat_best, ns_m[s]);
        }
        double final = measure_latency(op, samples, min_time, corrupt, ns_lat, t_lat, &bad, detail, sizeof detail);
        if (op == OP_MUL) {
            mul_lat_best = ns_lat[0];
            for (int s = 1; s < samples; s++) mul_lat_best = fmin(mul_lat_best, ns_lat[s]);
        }
        if (op == OP_SQRT)
            for (int s = 0; s < samples; s++) ns_lat[s] -= mul_lat_best;
        /* throughput */
        double xs[CHAINS];
        long it = 16;
        while (it < CB_ITERS_MAX) {
            for (int c = 0; c < CHAINS; c++) xs[c] = start_value(op, c);
            double t0 = cb_now();
            tput_fns[op](it, xs, a, b);
            double dt = cb_now() - t0;
            if (dt >= min_time / 4) break;
            it *= 2;
        }
        it *= 4;
        for (int s = 0; s < samples; s++) {
            double x0s[CHAINS];
            for (int c = 0; c < CHAINS; c++) x0s[c] = xs[c] = start_value(op, c);
            double t0 = cb_now();
            tput_fns[op](it, xs, a, b);
            double dt = cb_now() - t0;
            double n = (double)it * TPUT_STEPS, e;
            if (corrupt && s == samples - 1) xs[3] = -xs[3];
            for (int c = 0; c < CHAINS; c++)
                if (!check_value(op, x0s[c], n, xs[c], &e)) {
                    bad++;
                    snprintf(detail, sizeof detail, "%s throughput chain %d: got %.17g expected %.17g after %.0f ops",
                             op_names[op], c, xs[c], e, n);
                }
            ns_tp[s] = dt / (n * CHAINS) * 1e9;
            t_tp[s] = dt;
        }
        /* validate, then print the results */
        cb_json_begin("validation");
        cb_json_bool("ok", bad == 0);
        cb_json_str("op", op_names[op]);
        cb_json_num("final_value", final); /* where the latency chain ended: operands stay non-trivial */
        if (bad) cb_json_str("detail", detail);
        else cb_json_str("detail", "every chain's final value matches its closed form and is finite");
        cb_json_end();
        if (bad) return 1;

        /* the clock right after this op, so turbo changes over the run are followed */
        double ghz1 = cb_measure_ghz(min_time / 2, 3);
        double ghz = fmax(ghz0, ghz1);
        ghz0 = ghz1;
        char name[64], params[384], extra[96] = "";
        double cyc[64];
        const char *kinds[2] = {"latency", "throughput"};
        for (int k = 0; k < 2; k++) {
            double *ns = k ? ns_tp : ns_lat;
            double *ts = k ? t_tp : t_lat;
            if (op == OP_SQRT && k == 0)
                snprintf(extra, sizeof extra, ",\"mul_latency_subtracted_ns\":%.6g", mul_lat_best);
            else
                extra[0] = 0;
            snprintf(params, sizeof params,
                     "{\"op\":\"%s\",\"chains\":%d,\"clock_ghz\":%.6g,\"clock_source\":\"measured\"%s}",
                     op_names[op], k ? CHAINS : 1, ghz, extra);
            cb_result(kinds[k], "ns", params, ns, ts, samples);
            for (int s = 0; s < samples; s++) cyc[s] = ns[s] * ghz;
            snprintf(name, sizeof name, "%s_cycles", kinds[k]);
            cb_result(name, "cycles", params, cyc, ts, samples);
        }
    }
    return 0;
}
