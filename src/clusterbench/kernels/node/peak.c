/* peak.c: FMA throughput (peak Flop/s) per ISA, one or many pinned threads.
 *
 * Each thread runs NACC independent FMA chains x <- x*m + c in vector registers
 * (NACC >= FMA latency x FMA pipes on every current core: 24 on AVX-512/NEON/SVE, 12 on
 * AVX2 and scalar), so the FMA pipes, not the latency, bound the rate. m = 1 - 2^-30 keeps the
 * values bounded (they decay slowly towards the fixed point f = c/(1-m)); after n steps the
 * closed form is x_n = f + m^n (x_0 - f), which validates every lane of every sample (a
 * chain that skipped a few hundred of 10^8 steps is caught).
 *
 * FLOP convention (likwid peakflops_*_fma, HPL): one FMA on one lane = 2 flops.
 *
 * Every thread pins itself to its cpu (a failed pin is fatal) and, with all threads started
 * together, runs one untimed warm-up sample first, so the clock ramp and the AVX-512 licence
 * transition (tens of microseconds to milliseconds) stay out of the timed samples.
 *
 * Args: --isa=auto|avx512|avx2|neon|sve|vsx|scalar  --precision=dp|sp  --cpus=0,1,...
 *       --seconds=S (per sample)  --samples=K  --corrupt=1 (test hook: damage a lane)
 * Prints: info (with cpus_actual: sched_getcpu() of each thread, in thread order), validation,
 *         then the result "gflops" (dp) or "sp_gflops" (sp): aggregate per sample = threads x
 *         flops_per_iteration x iterations / span of the sample, with per-thread rates.
 */
#include "cb_common.h"

#include <pthread.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__ARM_NEON)
#include <arm_neon.h>
#endif
#if defined(__ARM_FEATURE_SVE)
#include <arm_sve.h>
#endif
#if defined(__VSX__)
#include <altivec.h>
/* altivec.h defines these as macros in strict ISO modes; this file spells __vector out and uses none of them */
#undef vector
#undef pixel
#undef bool
#endif

#define MAXT 4096
#define MAXLANES 16
#define MAXACC 24
#define NOINLINE __attribute__((noinline))

#define R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define R24(X) R12(X) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)

enum isa { ISA_SCALAR, ISA_AVX2, ISA_AVX512, ISA_NEON, ISA_SVE, ISA_VSX, ISA_COUNT };
static const char *isa_names[ISA_COUNT] = {"scalar", "avx2", "avx512", "neon", "sve", "vsx"};

static int isa_compiled(enum isa i) {
    switch (i) {
    case ISA_SCALAR: return 1;
#if defined(__AVX512F__)
    case ISA_AVX512: return 1;
#endif
#if defined(__AVX2__) && defined(__FMA__)
    case ISA_AVX2: return 1;
#endif
#if defined(__ARM_NEON) && defined(__aarch64__)
    case ISA_NEON: return 1;
#endif
#if defined(__ARM_FEATURE_SVE)
    case ISA_SVE: return 1;
#endif
#if defined(__VSX__)
    case ISA_VSX: return 1;
#endif
    default: return 0;
    }
}

static enum isa isa_best(void) {
    static const enum isa pref[] = {ISA_AVX512, ISA_SVE, ISA_AVX2, ISA_NEON, ISA_VSX, ISA_SCALAR};
    for (size_t i = 0; i < sizeof pref / sizeof pref[0]; i++)
        if (isa_compiled(pref[i])) return pref[i];
    return ISA_SCALAR;
}

/* Lanes per vector and accumulators for an ISA and precision (sp = 1 for float). */
static int isa_lanes(enum isa i, int sp) {
    switch (i) {
    case ISA_AVX512: return sp ? 16 : 8;
    case ISA_AVX2: return sp ? 8 : 4;
    case ISA_NEON: case ISA_VSX: return sp ? 4 : 2;
#if defined(__ARM_FEATURE_SVE)
    case ISA_SVE: return sp ? (int)svcntw() : (int)svcntd();
#endif
    default: return 1;
    }
}
static int isa_nacc(enum isa i) { return (i == ISA_AVX2 || i == ISA_SCALAR) ? 12 : 24; }

/* ---- kernels: x[k*lanes + l] in/out, iters steps of every chain ---------------------------- */
#define DECLS(k) double a##k = x[k];
#define UPDS(k) a##k = fma(a##k, m, c);
#define STORES(k) x[k] = a##k;
__attribute__((optimize("no-tree-vectorize", "no-tree-slp-vectorize")))
static NOINLINE void k_scalar_dp(long iters, double m, double c, double *x) {
    R12(DECLS)
    for (long i = 0; i < iters; i++) {
        R12(UPDS)
        __asm__ volatile("" ::: "memory");
    }
    R12(STORES)
}
#define DECLSF(k) float a##k = xf[k];
#define UPDSF(k) a##k = fmaf(a##k, m, c);
#define STORESF(k) xf[k] = a##k;
__attribute__((optimize("no-tree-vectorize", "no-tree-slp-vectorize")))
static NOINLINE void k_scalar_sp(long iters, float m, float c, float *xf) {
    R12(DECLSF)
    for (long i = 0; i < iters; i++) {
        R12(UPDSF)
        __asm__ volatile("" ::: "memory");
    }
    R12(STORESF)
}

#if defined(__AVX512F__)
#define D512(k) __m512d a##k = _mm512_loadu_pd(x + 8 * k);
#define U512(k) a##k = _mm512_fmadd_pd(a##k, vm, vc);
#define S512(k) _mm512_storeu_pd(x + 8 * k, a##k);
static NOINLINE void k_avx512_dp(long iters, double m, double c, double *x) {
    const __m512d vm = _mm512_set1_pd(m), vc = _mm512_set1_pd(c);
    R24(D512)
    for (long i = 0; i < iters; i++) { R24(U512) }
    R24(S512)
}
#define D512F(k) __m512 a##k = _mm512_loadu_ps(x + 16 * k);
#define U512F(k) a##k = _mm512_fmadd_ps(a##k, vm, vc);
#define S512F(k) _mm512_storeu_ps(x + 16 * k, a##k);
static NOINLINE void k_avx512_sp(long iters, float m, float c, float *x) {
    const __m512 vm = _mm512_set1_ps(m), vc = _mm512_set1_ps(c);
    R24(D512F)
    for (long i = 0; i < iters; i++) { R24(U512F) }
    R24(S512F)
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
#define D256(k) __m256d a##k = _mm256_loadu_pd(x + 4 * k);
#define U256(k) a##k = _mm256_fmadd_pd(a##k, vm, vc);
#define S256(k) _mm256_storeu_pd(x + 4 * k, a##k);
static NOINLINE void k_avx2_dp(long iters, double m, double c, double *x) {
    const __m256d vm = _mm256_set1_pd(m), vc = _mm256_set1_pd(c);
    R12(D256)
    for (long i = 0; i < iters; i++) { R12(U256) }
    R12(S256)
}
#define D256F(k) __m256 a##k = _mm256_loadu_ps(x + 8 * k);
#define U256F(k) a##k = _mm256_fmadd_ps(a##k, vm, vc);
#define S256F(k) _mm256_storeu_ps(x + 8 * k, a##k);
static NOINLINE void k_avx2_sp(long iters, float m, float c, float *x) {
    const __m256 vm = _mm256_set1_ps(m), vc = _mm256_set1_ps(c);
    R12(D256F)
    for (long i = 0; i < iters; i++) { R12(U256F) }
    R12(S256F)
}
#endif

#if defined(__ARM_NEON) && defined(__aarch64__)
#define DN(k) float64x2_t a##k = vld1q_f64(x + 2 * k);
#define UN(k) a##k = vfmaq_f64(vc, a##k, vm);
#define SN(k) vst1q_f64(x + 2 * k, a##k);
static NOINLINE void k_neon_dp(long iters, double m, double c, double *x) {
    const float64x2_t vm = vdupq_n_f64(m), vc = vdupq_n_f64(c);
    R24(DN)
    for (long i = 0; i < iters; i++) { R24(UN) }
    R24(SN)
}
#define DNF(k) float32x4_t a##k = vld1q_f32(x + 4 * k);
#define UNF(k) a##k = vfmaq_f32(vc, a##k, vm);
#define SNF(k) vst1q_f32(x + 4 * k, a##k);
static NOINLINE void k_neon_sp(long iters, float m, float c, float *x) {
    const float32x4_t vm = vdupq_n_f32(m), vc = vdupq_n_f32(c);
    R24(DNF)
    for (long i = 0; i < iters; i++) { R24(UNF) }
    R24(SNF)
}
#endif

#if defined(__ARM_FEATURE_SVE)
#define DS(k) svfloat64_t a##k = svld1_f64(pg, x + vl * k);
#define US(k) a##k = svmad_f64_x(pg, a##k, vm, vc);
#define SS(k) svst1_f64(pg, x + vl * k, a##k);
static NOINLINE void k_sve_dp(long iters, double m, double c, double *x) {
    const svbool_t pg = svptrue_b64();
    const long vl = (long)svcntd();
    const svfloat64_t vm = svdup_f64(m), vc = svdup_f64(c);
    R24(DS)
    for (long i = 0; i < iters; i++) { R24(US) }
    R24(SS)
}
#define DSF(k) svfloat32_t a##k = svld1_f32(pg, x + vl * k);
#define USF(k) a##k = svmad_f32_x(pg, a##k, vm, vc);
#define SSF(k) svst1_f32(pg, x + vl * k, a##k);
static NOINLINE void k_sve_sp(long iters, float m, float c, float *x) {
    const svbool_t pg = svptrue_b32();
    const long vl = (long)svcntw();
    const svfloat32_t vm = svdup_f32(m), vc = svdup_f32(c);
    R24(DSF)
    for (long i = 0; i < iters; i++) { R24(USF) }
    R24(SSF)
}
#endif

#if defined(__VSX__)
/* POWER7 and later: 128-bit VSX FMA (xvmaddadp / xvmaddasp), two pipes on POWER8/9 */
#define DV(k) __vector double a##k = vec_xl(0, x + 2 * k);
#define UV(k) a##k = vec_madd(a##k, vm, vc);
#define SV(k) vec_xst(a##k, 0, x + 2 * k);
static NOINLINE void k_vsx_dp(long iters, double m, double c, double *x) {
    const __vector double vm = vec_splats(m), vc = vec_splats(c);
    R24(DV)
    for (long i = 0; i < iters; i++) { R24(UV) }
    R24(SV)
}
#define DVF(k) __vector float a##k = vec_xl(0, x + 4 * k);
#define UVF(k) a##k = vec_madd(a##k, vm, vc);
#define SVF(k) vec_xst(a##k, 0, x + 4 * k);
static NOINLINE void k_vsx_sp(long iters, float m, float c, float *x) {
    const __vector float vm = vec_splats(m), vc = vec_splats(c);
    R24(DVF)
    for (long i = 0; i < iters; i++) { R24(UVF) }
    R24(SVF)
}
#endif

/* ---- constants, closed form ----------------------------------------------------------- */
/* dp: m = 1 - 2^-30, f = 0.25; sp: m = 1 - 2^-14 (float has 24 bits), f = 0.25. */
static double rec_m(int sp) { return sp ? 1.0 - ldexp(1.0, -14) : 1.0 - ldexp(1.0, -30); }
static double rec_f(void) { return 0.25; }
static double rec_c(int sp) { return rec_f() * (1.0 - rec_m(sp)); } /* exact: a power of two */
static double init_value(int idx) { return 1.0 + (double)(idx % 509) / 512.0; }

/* Largest deviation of a chain from its closed form, relative to the rounding bound. */
static double check_chains(const void *buf, int n, int sp, long iters, int *bad_idx) {
    double m = rec_m(sp), f = rec_f();
    double decay = pow(m, (double)iters);
    /* per step rounding <= 1/2 ulp of |x| <= 2 (values stay in [0.25, 2)); the errors are damped
     * by m, so they sum to at most min(iters, 1/(1-m)) half-ulps, plus pow's own error. */
    double ulp = sp ? ldexp(1.0, -23) : ldexp(1.0, -52);
    double steps = fmin((double)iters, 1.0 / (1.0 - m));
    double tol = 4.0 * (steps + 8.0) * ulp;
    double worst = 0;
    *bad_idx = -1;
    for (int i = 0; i < n; i++) {
        double got = sp ? (double)((const float *)buf)[i] : ((const double *)buf)[i];
        double x0 = sp ? (double)(float)init_value(i) : init_value(i);
        double want = f + decay * (x0 - f);
        double r = isfinite(got) ? fabs(got - want) / tol : INFINITY;
        if (!(r <= worst)) { worst = r; if (r > 1.0) *bad_idx = i; }
    }
    return worst;
}

/* ---- core clock from a chain of dependent integer operations ----------------------------
 * x86: imul r64 (3 cycles on every Intel and AMD core since Sandy Bridge / Zen; dependent
 * add-immediate chains are folded at rename on Golden Cove and later, so they cannot be used).
 * aarch64: add with a register operand (1 cycle). */
#define X10(I) I I I I I I I I I I
static NOINLINE double int_clock_mhz(double seconds) {
#if defined(__x86_64__) || defined(__aarch64__)
    static long reps = 1000;
    long v = 3, one = 1;
    double best = 0, t_end = cb_now() + seconds;
#if defined(__x86_64__)
    const double cycles = 300.0;
#else
    const double cycles = 100.0;
#endif
    while (cb_now() < t_end) {
        double t0 = cb_now();
        for (long r = 0; r < reps; r++) {
#if defined(__x86_64__)
            __asm__ volatile(X10(X10("imul %0, %0\n\t")) : "+r"(v) : "r"(one));
#else
            __asm__ volatile(X10(X10("add %0, %0, %1\n\t")) : "+r"(v) : "r"(one));
#endif
        }
        double dt = cb_now() - t0;
        if (dt < 1e-3) { reps *= 2; continue; }
        double mhz = (double)reps * cycles / dt / 1e6;
        if (mhz > best) best = mhz;
    }
    return best;
#else
    (void)seconds;
    return NAN;
#endif
}

/* ---- threads -------------------------------------------------------------------------- */
typedef struct {
    int id, cpu, bound_cpu, pin_err, sp;
    enum isa isa;
    long iters;
    int samples;
    double *t0, *t1; /* per sample */
    double worst;    /* validation: worst deviation / tolerance over the samples */
    int bad_idx, bad_sample, corrupt;
    double bad_got;
    _Alignas(64) double buf[MAXACC * MAXLANES];
} thr_t;

static pthread_barrier_t barrier;
static int pin_failed; /* any thread could not pin itself: all stop before measuring */

static void run_chains(enum isa isa, int sp, long iters, void *buf) {
    double m = rec_m(sp), c = rec_c(sp);
    switch (isa) {
#if defined(__AVX512F__)
    case ISA_AVX512: if (sp) k_avx512_sp(iters, (float)m, (float)c, buf); else k_avx512_dp(iters, m, c, buf); return;
#endif
#if defined(__AVX2__) && defined(__FMA__)
    case ISA_AVX2: if (sp) k_avx2_sp(iters, (float)m, (float)c, buf); else k_avx2_dp(iters, m, c, buf); return;
#endif
#if defined(__ARM_NEON) && defined(__aarch64__)
    case ISA_NEON: if (sp) k_neon_sp(iters, (float)m, (float)c, buf); else k_neon_dp(iters, m, c, buf); return;
#endif
#if defined(__ARM_FEATURE_SVE)
    case ISA_SVE: if (sp) k_sve_sp(iters, (float)m, (float)c, buf); else k_sve_dp(iters, m, c, buf); return;
#endif
#if defined(__VSX__)
    case ISA_VSX: if (sp) k_vsx_sp(iters, (float)m, (float)c, buf); else k_vsx_dp(iters, m, c, buf); return;
#endif
    default: if (sp) k_scalar_sp(iters, (float)m, (float)c, buf); else k_scalar_dp(iters, m, c, buf); return;
    }
}

static void init_chains(void *buf, int n, int sp) {
    for (int i = 0; i < n; i++) {
        if (sp) ((float *)buf)[i] = (float)init_value(i);
        else ((double *)buf)[i] = init_value(i);
    }
}

static void *worker(void *arg) {
    thr_t *t = arg;
    t->pin_err = cb_pin_self(t->cpu);
    t->bound_cpu = sched_getcpu();
    if (t->pin_err) __atomic_store_n(&pin_failed, 1, __ATOMIC_SEQ_CST);
    int n = isa_nacc(t->isa) * isa_lanes(t->isa, t->sp);
    t->worst = 0;
    t->bad_idx = -1;
    init_chains(t->buf, n, t->sp);
    pthread_barrier_wait(&barrier);
    if (__atomic_load_n(&pin_failed, __ATOMIC_SEQ_CST)) return NULL;
    /* warm-up: one untimed sample, all threads together (clock ramp, AVX-512 licence) */
    run_chains(t->isa, t->sp, t->iters, t->buf);
    for (int s = 0; s < t->samples; s++) {
        init_chains(t->buf, n, t->sp);
        pthread_barrier_wait(&barrier);
        t->t0[s] = cb_now();
        run_chains(t->isa, t->sp, t->iters, t->buf);
        t->t1[s] = cb_now();
        if (t->corrupt && s == t->samples - 1) {
            if (t->sp) ((float *)t->buf)[n / 2] *= 1.001f; else t->buf[n / 2] *= 1.000001;
        }
        int bad;
        double w = check_chains(t->buf, n, t->sp, t->iters, &bad);
        if (w > t->worst || !isfinite(w)) {
            t->worst = w;
            if (bad >= 0) {
                t->bad_idx = bad;
                t->bad_sample = s;
                t->bad_got = t->sp ? (double)((float *)t->buf)[bad] : t->buf[bad];
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *isa_s = "auto", *prec = "dp", *cpus_s = NULL;
    double seconds = 0.2;
    int samples = 3, corrupt = 0;
    double clock_s = 0.1;
    long iters_arg = 0;
    CB_OPTIONS(argc, argv, CB_OPT("isa", isa_s), CB_OPT("precision", prec), CB_OPT("cpus", cpus_s),
               CB_OPT("seconds", seconds), CB_OPT("samples", samples), CB_OPT("corrupt", corrupt),
               CB_OPT("clock-seconds", clock_s), CB_OPT("iters", iters_arg));

    int sp;
    if (!strcmp(prec, "dp")) sp = 0;
    else if (!strcmp(prec, "sp")) sp = 1;
    else cb_fail("--precision must be dp or sp, not '%s'", prec);
    if (samples < 1 || samples > 100000) cb_fail("--samples must be 1 or more");
    if (!(seconds > 0)) cb_fail("--seconds must be positive");

    enum isa isa = ISA_COUNT;
    if (!strcmp(isa_s, "auto")) isa = isa_best();
    else {
        for (int i = 0; i < ISA_COUNT; i++)
            if (!strcmp(isa_s, isa_names[i])) isa = (enum isa)i;
        if (isa == ISA_COUNT) cb_fail("unknown --isa '%s' (auto, avx512, avx2, sve, neon, vsx, scalar)", isa_s);
        if (!isa_compiled(isa))
            cb_fail("--isa %s is not available in this build (this CPU/compiler supports: best is %s)",
                    isa_s, isa_names[isa_best()]);
    }

    static int cpus[MAXT];
    int nthreads = cb_team_cpus(cpus_s, cpus, MAXT);

    int lanes = isa_lanes(isa, sp), nacc = isa_nacc(isa);
    double flops_per_iter = 2.0 * nacc * lanes;

    /* clock and calibration on the first thread's cpu */
    cb_pin_or_fail(cpus[0]);
    double tres = cb_timer_resolution();
    /* Clock and a short-burst FMA rate measured alternately in ~1 ms slices, best of each:
     * flops/cycle = burst rate / clock survives a time-shared (VM) core that long samples do not. */
    double clk = NAN, burst = NAN;
    if (clock_s > 0) {
        static _Alignas(64) double bb[MAXACC * MAXLANES];
        int n = nacc * lanes;
        long it = 1000;
        for (;;) { /* slices of about 1 ms */
            init_chains(bb, n, sp);
            double t0 = cb_now();
            run_chains(isa, sp, it, bb);
            if (cb_now() - t0 > 5e-4 || it > CB_ITERS_MAX) break;
            it *= 2;
        }
        int_clock_mhz(0.002);
        double t_end = cb_now() + clock_s;
        clk = 0;
        burst = 0;
        while (cb_now() < t_end) {
            double c1 = int_clock_mhz(0.002);
            if (c1 > clk) clk = c1;
            init_chains(bb, n, sp);
            double t0 = cb_now();
            run_chains(isa, sp, it, bb);
            double dt = cb_now() - t0;
            if (dt < 5e-4) { it *= 2; continue; }
            double g = flops_per_iter * (double)it / dt / 1e9;
            if (g > burst) burst = g;
        }
    }
    long iters = iters_arg;
    if (iters <= 0) {
        static _Alignas(64) double cal[MAXACC * MAXLANES];
        int n = nacc * lanes;
        long it = 10000;
        double dt = 0;
        for (;;) {
            init_chains(cal, n, sp);
            double t0 = cb_now();
            run_chains(isa, sp, it, cal);
            dt = cb_now() - t0;
            if (dt > 0.02 || it > CB_ITERS_MAX) break;
            it *= 4;
        }
        /* repeat once at the final length: the first pass may have run at a lower clock */
        init_chains(cal, n, sp);
        double t0 = cb_now();
        run_chains(isa, sp, it, cal);
        double dt2 = cb_now() - t0;
        if (dt2 < dt) dt = dt2;
        iters = (long)((double)it * seconds / dt) + 1;
    }

    thr_t *th = calloc((size_t)nthreads, sizeof *th);
    double *times = calloc((size_t)nthreads * samples * 2, sizeof(double));
    if (!th || !times) cb_fail("out of memory");
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
    for (int i = 0; i < nthreads; i++) {
        th[i].id = i;
        th[i].cpu = cpus[i];
        th[i].sp = sp;
        th[i].isa = isa;
        th[i].iters = iters;
        th[i].samples = samples;
        th[i].t0 = times + (size_t)i * samples * 2;
        th[i].t1 = th[i].t0 + samples;
        th[i].corrupt = corrupt && i == 0;
    }
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&tid[i], NULL, worker, &th[i])) cb_fail("cannot create thread %d", i);
    for (int i = 0; i < nthreads; i++) pthread_join(tid[i], NULL);
    for (int i = 0; i < nthreads; i++)
        if (th[i].pin_err)
            cb_fail("cannot pin thread %d to cpu %d: %s", i, th[i].cpu, strerror(th[i].pin_err));

    int *bound = calloc((size_t)nthreads, sizeof(int));
    for (int i = 0; i < nthreads; i++) bound[i] = th[i].bound_cpu;

    cb_info_begin_team(tres, nthreads, cpus[0] < 0 ? bound : cpus, bound);
    cb_json_int("warmup_samples", 1);
    cb_json_str("isa", isa_names[isa]);
    cb_json_str("isa_best", isa_names[isa_best()]);
    {
        char buf[128] = "[";
        for (int i = 0; i < ISA_COUNT; i++)
            if (isa_compiled((enum isa)i)) {
                if (buf[1]) strcat(buf, ",");
                strcat(buf, "\"");
                strcat(buf, isa_names[i]);
                strcat(buf, "\"");
            }
        strcat(buf, "]");
        cb_json_raw("isa_compiled", buf);
    }
    cb_json_str("precision", sp ? "sp" : "dp");
    cb_json_int("vector_bits", lanes * (sp ? 32 : 64));
    cb_json_int("accumulators", nacc);
    cb_json_int("lanes", lanes);
    cb_json_num("flops_per_iteration", flops_per_iter);
    cb_json_int("iterations", iters);
    cb_json_num("int_clock_mhz", clk);
    cb_json_num("burst_gflops", burst);
    cb_json_num("burst_flops_per_cycle", burst / (clk / 1000.0));
    cb_json_end();

    /* aggregate per sample: all flops over the span from the first start to the last end */
    double *agg = calloc((size_t)samples, sizeof(double)), *span = calloc((size_t)samples, sizeof(double));
    double *pt = calloc((size_t)nthreads, sizeof(double));
    double flops_thread = flops_per_iter * (double)iters;
    for (int s = 0; s < samples; s++) {
        double a = INFINITY, b = -INFINITY;
        for (int i = 0; i < nthreads; i++) {
            if (th[i].t0[s] < a) a = th[i].t0[s];
            if (th[i].t1[s] > b) b = th[i].t1[s];
        }
        span[s] = b - a;
        agg[s] = flops_thread * nthreads / span[s] / 1e9;
    }
    for (int i = 0; i < nthreads; i++) {
        double best = 0;
        for (int s = 0; s < samples; s++) {
            double r = flops_thread / (th[i].t1[s] - th[i].t0[s]) / 1e9;
            if (r > best) best = r;
        }
        pt[i] = best;
    }
    /* slowest thread per sample: the per-core figure all threads sustain together */
    double *slow = calloc((size_t)samples, sizeof(double));
    for (int s = 0; s < samples; s++) {
        double w = INFINITY;
        for (int i = 0; i < nthreads; i++) {
            double r = flops_thread / (th[i].t1[s] - th[i].t0[s]) / 1e9;
            if (r < w) w = r;
        }
        slow[s] = w;
    }

    double worst = 0;
    int wt = -1;
    for (int i = 0; i < nthreads; i++)
        if (th[i].worst > worst || !isfinite(th[i].worst)) { worst = th[i].worst; wt = i; }
    char detail[400];
    int ok = isfinite(worst) && worst <= 1.0;
    if (ok)
        snprintf(detail, sizeof detail,
                 "%d threads x %d samples x %d chains match x_n = f + m^n (x_0 - f) after %ld steps "
                 "(worst deviation %.3g of the rounding bound)", nthreads, samples, nacc * lanes, iters, worst);
    else
        snprintf(detail, sizeof detail,
                 "thread %d sample %d chain %d: got %.17g, closed form after %ld steps differs by %.3g x the rounding bound",
                 wt, wt >= 0 ? th[wt].bad_sample : -1, wt >= 0 ? th[wt].bad_idx : -1,
                 wt >= 0 ? th[wt].bad_got : NAN, iters, worst);
    cb_validation_begin(ok, detail);
    cb_json_num("worst_relative_to_bound", worst);
    cb_json_end();
    if (!ok) return 1; /* results only after a successful validation */

    cb_json_begin("result");
    cb_json_str("metric", sp ? "sp_gflops" : "gflops");
    cb_json_str("unit", "Gflop/s");
    {
        char p[160];
        snprintf(p, sizeof p, "{\"isa\":\"%s\",\"precision\":\"%s\",\"vector_bits\":%d}",
                 isa_names[isa], sp ? "sp" : "dp", lanes * (sp ? 32 : 64));
        cb_json_raw("params", p);
    }
    cb_json_nums("samples", agg, samples);
    cb_json_nums("times_s", span, samples);
    cb_json_nums("per_thread_best", pt, nthreads);
    cb_json_nums("slowest_thread", slow, samples);
    cb_json_int("threads", nthreads);
    cb_json_num("flops_per_iteration", flops_per_iter);
    cb_json_int("iterations", iters);
    cb_json_end();
    return 0;
}
