/* cb_simd.h: the double-precision vector layer shared by the memory kernels (stream.c, membw.c),
 * chosen at compile time from the widest ISA the flags allow (-march=native):
 *   ISA ("avx512", "avx", "sse2", "neon", "generic"), VL (doubles per vector), vd (the vector),
 *   LD/ST (aligned load/store), SET1, ADD, MUL, FMA (x*y+z; mul+add where there is no FMA),
 *   HSUM (horizontal sum), STNT2(p, v0, v1) (non-temporal stores of two vectors at p and p+VL:
 *   stnp on aarch64, a pair of streaming stores on x86), FENCE (orders the streaming stores) and
 *   NT_NATIVE (0: this build has no non-temporal store, STNT2 stores regularly).
 * The kernels are written with these intrinsics so the compiler can turn neither a copy into
 * memcpy nor a fill into memset (glibc's switch to non-temporal stores would blur the variants). */
#ifndef CB_SIMD_H
#define CB_SIMD_H

#if defined(__AVX512F__)
#include <immintrin.h>
#define ISA "avx512"
#define VL 8
typedef __m512d vd;
#define LD(p) _mm512_load_pd(p)
#define ST(p, v) _mm512_store_pd((p), (v))
#define STNT(p, v) _mm512_stream_pd((p), (v))
#define SET1(x) _mm512_set1_pd(x)
#define ADD(x, y) _mm512_add_pd(x, y)
#define MUL(x, y) _mm512_mul_pd(x, y)
#define FMA(x, y, z) _mm512_fmadd_pd(x, y, z)
#define HSUM(v) _mm512_reduce_add_pd(v)
#define FENCE() _mm_sfence()
#define NT_NATIVE 1
#elif defined(__AVX__)
#include <immintrin.h>
#define ISA "avx"
#define VL 4
typedef __m256d vd;
#define LD(p) _mm256_load_pd(p)
#define ST(p, v) _mm256_store_pd((p), (v))
#define STNT(p, v) _mm256_stream_pd((p), (v))
#define SET1(x) _mm256_set1_pd(x)
#define ADD(x, y) _mm256_add_pd(x, y)
#define MUL(x, y) _mm256_mul_pd(x, y)
#ifdef __FMA__
#define FMA(x, y, z) _mm256_fmadd_pd(x, y, z)
#else
#define FMA(x, y, z) _mm256_add_pd(_mm256_mul_pd(x, y), z)
#endif
static inline double HSUM(vd v) {
    double t[4];
    _mm256_storeu_pd(t, v);
    return (t[0] + t[1]) + (t[2] + t[3]);
}
#define FENCE() _mm_sfence()
#define NT_NATIVE 1
#elif defined(__SSE2__)
#include <emmintrin.h>
#define ISA "sse2"
#define VL 2
typedef __m128d vd;
#define LD(p) _mm_load_pd(p)
#define ST(p, v) _mm_store_pd((p), (v))
#define STNT(p, v) _mm_stream_pd((p), (v))
#define SET1(x) _mm_set1_pd(x)
#define ADD(x, y) _mm_add_pd(x, y)
#define MUL(x, y) _mm_mul_pd(x, y)
#define FMA(x, y, z) _mm_add_pd(_mm_mul_pd(x, y), z)
static inline double HSUM(vd v) {
    double t[2];
    _mm_storeu_pd(t, v);
    return t[0] + t[1];
}
#define FENCE() _mm_sfence()
#define NT_NATIVE 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#define ISA "neon"
#define VL 2
typedef float64x2_t vd;
#define LD(p) vld1q_f64(p)
#define ST(p, v) vst1q_f64((p), (v))
/* stnp stores a pair of registers; the unrolled loops always store pairs (STNT2). */
#define STNT2(p, v0, v1) __asm__ volatile("stnp %q0, %q1, [%2]" : : "w"(v0), "w"(v1), "r"(p) : "memory")
#define SET1(x) vdupq_n_f64(x)
#define ADD(x, y) vaddq_f64(x, y)
#define MUL(x, y) vmulq_f64(x, y)
#define FMA(x, y, z) vfmaq_f64(z, x, y)
#define HSUM(v) vaddvq_f64(v)
#define FENCE() __asm__ volatile("dmb ishst" ::: "memory")
#define NT_NATIVE 1
#else
#define ISA "generic"
#define VL 1
typedef double vd;
#define LD(p) (*(p))
#define ST(p, v) (*(p) = (v))
#if defined(__clang__)
#define STNT(p, v) __builtin_nontemporal_store((v), (p))
#define NT_NATIVE 1
#else
#define STNT(p, v) (*(p) = (v))
#define NT_NATIVE 0
#endif
#define SET1(x) (x)
#define ADD(x, y) ((x) + (y))
#define MUL(x, y) ((x) * (y))
#define FMA(x, y, z) ((x) * (y) + (z))
#define HSUM(v) (v)
#define FENCE() __sync_synchronize()
#endif

#ifndef STNT2
#define STNT2(p, v0, v1) do { STNT((p), (v0)); STNT((p) + VL, (v1)); } while (0)
#endif
#define ST2(p, v0, v1) do { ST((p), (v0)); ST((p) + VL, (v1)); } while (0)

#ifdef _OPENMP
/* A memory kernel's start (needs cb_common.h): measure the timer, pin the team of T threads to
 * cpus[] (actual[]: where they run), then open the info record with the team's fields and the
 * arrays' (array_elements, array_bytes of n doubles, ntimes, isa, nt_native); the kernel adds its
 * own fields, then cb_json_end(). */
static inline void cb_simd_team_start(int T, const int *cpus, int *actual, size_t n, int ntimes) {
    double tres = cb_timer_resolution();
    cb_pin_team(T, cpus, actual);
    cb_info_begin_team(tres, T, cpus, actual);
    cb_json_int("array_elements", (long long)n);
    cb_json_int("array_bytes", (long long)(n * sizeof(double)));
    cb_json_int("ntimes", ntimes);
    cb_json_str("isa", ISA);
    cb_json_bool("nt_native", NT_NATIVE);
}
#endif

#endif /* CB_SIMD_H */
