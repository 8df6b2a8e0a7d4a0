/* cb_common.h: helpers shared by every clusterbench kernel (header-only, no global state
 * beyond the JSON writer's comma flag).
 *
 * Protocol: a kernel takes --key=value arguments and prints JSON lines on stdout:
 *   {"type":"info", ...}        what the kernel did (threads, cpus, sizes, variant)
 *   {"type":"result","metric":NAME,"unit":U,"params":{...},"samples":[...],"times_s":[...]}
 *   {"type":"validation","ok":true|false,"detail":"..."}
 *   {"type":"error","message":"..."}   then a non-zero exit
 * Python (clusterbench.launch.local) parses, validates and stores them.
 */
#ifndef CB_COMMON_H
#define CB_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* A kernel dies with the clusterbench process that started it (SIGKILL, OOM kill): it runs in a
 * session of its own so that clusterbench can kill its whole group, and this keeps it from
 * becoming an orphan that loads the machine during the next measurement. */
__attribute__((constructor)) static void cb_die_with_parent(void) {
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1); /* the parent died before prctl took effect */
}

/* ---- time ---------------------------------------------------------------------------- */
static inline double cb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Smallest observable step of cb_now(), measured (like STREAM's checktick). */
static inline double cb_timer_resolution(void) {
    double best = 1.0;
    for (int i = 0; i < 50; i++) {
        double t0 = cb_now(), t1;
        do { t1 = cb_now(); } while (t1 == t0);
        if (t1 - t0 < best) best = t1 - t0;
    }
    return best;
}

/* Block until CLOCK_REALTIME reaches t (seconds since the epoch): lets several processes
 * started by Python begin their timed sections together (star mode). */
static inline void cb_wait_until(double t) {
    if (t <= 0) return;
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
        if (now >= t) return;
        double left = t - now;
        if (left > 0.002) {
            struct timespec s = {(time_t)(left * 0.5), (long)(fmod(left * 0.5, 1.0) * 1e9)};
            nanosleep(&s, NULL);
        }
    }
}

/* ---- measured clock ----------------------------------------------------------------------- */
/* Keep an integer in a register across the empty asm: the compiler can neither fold nor
 * reorder the chain it belongs to. */
#define CB_KEEPI(v) __asm__ __volatile__("" : "+r"(v))

/* The count a calibration loop doubles (or quadruples) an iteration count of type long up to: 2^40
 * where long has 64 bits; 2^28 where it has 32 (armhf), so that the last doubling or quadrupling
 * cannot overflow (1L << 40 there is undefined and folded to 0: the loops stopped at once). */
#define CB_ITERS_MAX ((long)(sizeof(long) >= 8 ? (1LL << 40) : (1LL << 28)))

/* Seconds for iters x 64 dependent register-register integer adds (1 add per cycle latency on
 * every core we know, whatever the ISA). */
static inline double cb_clock_chain(long iters, long long seed) {
    long long x = seed, y = seed | 1;
    CB_KEEPI(y);
    double t0 = cb_now();
    for (long i = 0; i < iters; i++) {
#define CB_A1 x += y; CB_KEEPI(x);
#define CB_A8 CB_A1 CB_A1 CB_A1 CB_A1 CB_A1 CB_A1 CB_A1 CB_A1
        CB_A8 CB_A8 CB_A8 CB_A8 CB_A8 CB_A8 CB_A8 CB_A8
#undef CB_A8
#undef CB_A1
    }
    double t1 = cb_now();
    if (x == 42) fputs("", stderr); /* x is used */
    return t1 - t0;
}

/* The core clock in GHz, measured in this process by the dependent integer add chain above:
 * iterations calibrated to about min_time seconds per run, best of reps runs. Used by fpu and
 * memlat to turn ns into cycles. */
static inline double cb_measure_ghz(double min_time, int reps) {
    long iters = 1024;
    while (cb_clock_chain(iters, 3) < min_time / 4 && iters < CB_ITERS_MAX) iters *= 2;
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t = cb_clock_chain(iters * 4, r + 3);
        double ghz = (double)iters * 4 * 64 / t * 1e-9;
        if (ghz > best) best = ghz;
    }
    return best;
}

/* ---- JSON lines ---------------------------------------------------------------------- */
static int cb_json_first __attribute__((unused)) = 1;

static inline void cb_json_escape(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { putchar('\\'); putchar(c); }
        else if (c == '\n') fputs("\\n", stdout);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}
static inline void cb_json_key(const char *k) {
    if (!cb_json_first) putchar(',');
    cb_json_first = 0;
    cb_json_escape(k);
    putchar(':');
}
static inline void cb_json_begin(const char *type) {
    cb_json_first = 1;
    putchar('{');
    cb_json_key("type");
    cb_json_escape(type);
}
static inline void cb_json_str(const char *k, const char *v) { cb_json_key(k); cb_json_escape(v); }
static inline void cb_json_int(const char *k, long long v) { cb_json_key(k); printf("%lld", v); }
static inline void cb_json_bool(const char *k, int v) { cb_json_key(k); fputs(v ? "true" : "false", stdout); }
static inline void cb_json_num(const char *k, double v) {
    cb_json_key(k);
    if (isfinite(v)) printf("%.17g", v); else fputs("null", stdout);
}
static inline void cb_json_nums(const char *k, const double *v, int n) {
    cb_json_key(k);
    putchar('[');
    for (int i = 0; i < n; i++) {
        if (i) putchar(',');
        if (isfinite(v[i])) printf("%.17g", v[i]); else fputs("null", stdout);
    }
    putchar(']');
}
static inline void cb_json_ints(const char *k, const int *v, int n) {
    cb_json_key(k);
    putchar('[');
    for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", v[i]);
    putchar(']');
}
/* A pair of strings: "k":["a","b"]. */
static inline void cb_json_str_pair(const char *k, const char *a, const char *b) {
    cb_json_key(k);
    putchar('[');
    cb_json_escape(a);
    putchar(',');
    cb_json_escape(b);
    putchar(']');
}
/* Raw JSON fragment, e.g. a params object built by the kernel. */
static inline void cb_json_raw(const char *k, const char *raw) { cb_json_key(k); fputs(raw, stdout); }
static inline void cb_json_end(void) { fputs("}\n", stdout); fflush(stdout); }

/* Format printf-style arguments into a local buffer NAME (1 KiB); for variadic error helpers. */
#define CB_VFORMAT(name, fmt)                  \
    char name[1024];                           \
    do {                                       \
        va_list cb_ap_;                        \
        va_start(cb_ap_, fmt);                 \
        vsnprintf(name, sizeof name, fmt, cb_ap_); \
        va_end(cb_ap_);                        \
    } while (0)

/* The error record: {"type":"error","message":MSG}. */
static inline void cb_json_error(const char *msg) {
    cb_json_begin("error");
    cb_json_str("message", msg);
    cb_json_end();
}

static inline void cb_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static inline void cb_fail(const char *fmt, ...) {
    CB_VFORMAT(msg, fmt);
    cb_json_error(msg);
    exit(1);
}

/* How a kernel gives up: cb_fail, or cb_mpi_die in an MPI kernel. */
typedef void (*cb_fail_fn)(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* ---- records every kernel prints ------------------------------------------------------- */
/* Open a result record with its common fields: {"type":"result","metric","unit","params" (a raw
 * JSON object), "samples","times_s"}; the kernel adds its own fields, then cb_json_end(). */
static inline void cb_result_begin(const char *metric, const char *unit, const char *params, const double *samples,
                                   const double *times_s, int n) {
    cb_json_begin("result");
    cb_json_str("metric", metric);
    cb_json_str("unit", unit);
    cb_json_raw("params", params);
    cb_json_nums("samples", samples, n);
    cb_json_nums("times_s", times_s, n);
}
/* A whole result record with only the common fields. */
static inline void cb_result(const char *metric, const char *unit, const char *params, const double *samples,
                             const double *times_s, int n) {
    cb_result_begin(metric, unit, params, samples, times_s, n);
    cb_json_end();
}
/* Open a validation record {"type":"validation","ok","detail"}; the kernel may add fields. */
static inline void cb_validation_begin(int ok, const char *detail) {
    cb_json_begin("validation");
    cb_json_bool("ok", ok);
    cb_json_str("detail", detail);
}
static inline void cb_validation(int ok, const char *detail) {
    cb_validation_begin(ok, detail);
    cb_json_end();
}

/* ---- arguments: --key=value ---------------------------------------------------------- */
static inline const char *cb_arg(int argc, char **argv, const char *key, const char *def) {
    size_t n = strlen(key);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--", 2) == 0 && strncmp(argv[i] + 2, key, n) == 0 && argv[i][2 + n] == '=')
            return argv[i] + 3 + n;
    return def;
}
static inline long long cb_arg_ll(int argc, char **argv, const char *key, long long def) {
    const char *s = cb_arg(argc, argv, key, NULL);
    if (!s) return def;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) cb_fail("bad integer for --%s: '%s'", key, s);
    return v;
}
static inline double cb_arg_double(int argc, char **argv, const char *key, double def) {
    const char *s = cb_arg(argc, argv, key, NULL);
    if (!s) return def;
    char *end;
    double v = strtod(s, &end);
    if (*end) cb_fail("bad number for --%s: '%s'", key, s);
    return v;
}

/* A declarative options table: each entry names an option and the variable it sets; the
 * variable's initial value is the default, its C type says how the value is parsed (integers as
 * cb_arg_ll then converted, floating point as cb_arg_double, strings as given). Unknown
 * options are ignored, as by cb_arg.
 *     long long nel = 10000000; int ntimes = 10; const char *variant = "both";
 *     CB_OPTIONS(argc, argv, CB_OPT("elements", nel), CB_OPT("ntimes", ntimes), CB_OPT("variant", variant));
 */
enum cb_opt_kind { CB_OPT_INT, CB_OPT_LONG, CB_OPT_LL, CB_OPT_ULONG, CB_OPT_ULL, CB_OPT_DOUBLE, CB_OPT_STR };
typedef struct {
    const char *key;
    enum cb_opt_kind kind;
    void *dst;
} cb_opt;
#define CB_OPT(key, var)                                                                              \
    {                                                                                                 \
        key,                                                                                          \
            _Generic((var), int: CB_OPT_INT, long: CB_OPT_LONG, long long: CB_OPT_LL,                 \
                     unsigned long: CB_OPT_ULONG, unsigned long long: CB_OPT_ULL, double: CB_OPT_DOUBLE, \
                     const char *: CB_OPT_STR),                                                       \
            (void *)&(var)                                                                            \
    }
static inline void cb_parse_opts(int argc, char **argv, const cb_opt *opts, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const cb_opt *o = &opts[i];
        if (!cb_arg(argc, argv, o->key, NULL)) continue; /* keep the default */
        switch (o->kind) {
        case CB_OPT_INT: *(int *)o->dst = (int)cb_arg_ll(argc, argv, o->key, 0); break;
        case CB_OPT_LONG: *(long *)o->dst = (long)cb_arg_ll(argc, argv, o->key, 0); break;
        case CB_OPT_LL: *(long long *)o->dst = cb_arg_ll(argc, argv, o->key, 0); break;
        case CB_OPT_ULONG: *(unsigned long *)o->dst = (unsigned long)cb_arg_ll(argc, argv, o->key, 0); break;
        case CB_OPT_ULL: *(unsigned long long *)o->dst = (unsigned long long)cb_arg_ll(argc, argv, o->key, 0); break;
        case CB_OPT_DOUBLE: *(double *)o->dst = cb_arg_double(argc, argv, o->key, 0); break;
        case CB_OPT_STR: *(const char **)o->dst = cb_arg(argc, argv, o->key, NULL); break;
        }
    }
}
#define CB_OPTIONS(argc, argv, ...)                                                 \
    do {                                                                            \
        const cb_opt cb_opts_[] = {__VA_ARGS__};                                    \
        cb_parse_opts(argc, argv, cb_opts_, sizeof cb_opts_ / sizeof cb_opts_[0]); \
    } while (0)

/* Parse a comma-separated list of non-negative integers ("0,8,1024") into out[] (at most max
 * kept, the rest dropped); a malformed list fails through fail with "bad --KEY near ...".
 * Returns the count. */
static inline int cb_parse_longs(const char *s, const char *key, long *out, int max, cb_fail_fn fail) {
    int n = 0;
    while (s && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0) fail("bad --%s near '%s'", key, s);
        if (n < max) out[n++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') fail("bad --%s near '%s'", key, end);
    }
    return n;
}

/* Parse "0,2,4-7" into out[]; returns the count. */
static inline int cb_parse_cpulist(const char *s, int *out, int max) {
    int n = 0;
    while (s && *s) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s) cb_fail("bad cpu list '%s'", s);
        if (*end == '-') { s = end + 1; b = strtol(s, &end, 10); }
        for (long c = a; c <= b; c++) {
            if (n >= max) cb_fail("cpu list too long");
            out[n++] = (int)c;
        }
        s = (*end == ',') ? end + 1 : end;
        if (*end && *end != ',') cb_fail("bad cpu list near '%s'", end);
    }
    return n;
}

/* The cpus of a pthread team from an optional --cpus list: one thread per entry; no list, one
 * thread that stays where it is (cpus[0] = -1). Returns the thread count; an empty list fails. */
static inline int cb_team_cpus(const char *list, int *cpus, int max) {
    int n = 1;
    if (list) n = cb_parse_cpulist(list, cpus, max);
    else cpus[0] = -1;
    if (n < 1) cb_fail("empty --cpus");
    return n;
}

/* Pin the calling thread to one cpu; returns 0 or errno. */
static inline int cb_pin_self(int cpu) {
    if (cpu < 0) return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) ? errno : 0;
}

/* Pin the calling thread to cpu (-1: leave it where it is) or fail with a JSON error. */
static inline void cb_pin_or_fail(int cpu) {
    int err = cb_pin_self(cpu);
    if (err) cb_fail("cannot pin to cpu %d: %s", cpu, strerror(err));
}

/* Bind the calling thread to the n cpus (threads it starts later, e.g. a BLAS's, inherit the
 * mask) or give up through fail; list is the option's text, for the error message. */
static inline void cb_bind_or_fail(const int *cpus, int n, const char *list, cb_fail_fn fail) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < n; i++) CPU_SET(cpus[i], &set);
    if (sched_setaffinity(0, sizeof set, &set)) fail("cannot bind to cpus %s: %s", list, strerror(errno));
}

/* Open the info record of a kernel that runs on one pinned thread: {"type":"info",
 * "timer_resolution_s", "threads":1, "cpu", "cpus_actual":[cpu]} where cpu is where it runs now;
 * the kernel adds its own fields, then cb_json_end(). Returns that cpu. */
static inline int cb_info_begin_self(double timer_resolution) {
    cb_json_begin("info");
    cb_json_num("timer_resolution_s", timer_resolution);
    cb_json_int("threads", 1);
    int actual = sched_getcpu();
    cb_json_int("cpu", actual);
    cb_json_ints("cpus_actual", &actual, 1);
    return actual;
}

/* Open the info record of a kernel that runs a team of threads pinned to cpus[] (as asked) and
 * running on actual[] (as measured): {"type":"info", "timer_resolution_s", "threads", "cpus",
 * "cpus_actual"}; the kernel adds its own fields, then cb_json_end(). */
static inline void cb_info_begin_team(double timer_resolution, int threads, const int *cpus, const int *actual) {
    cb_json_begin("info");
    cb_json_num("timer_resolution_s", timer_resolution);
    cb_json_int("threads", threads);
    cb_json_ints("cpus", cpus, threads);
    cb_json_ints("cpus_actual", actual, threads);
}

#ifdef _OPENMP
#include <omp.h>
/* Pin an OpenMP team of n threads, thread t to cpus[t], and record where each really runs
 * (actual[t], from sched_getcpu) so Python can refuse misplaced figures. The team is reused by
 * later parallel regions of the same size (dynamic adjustment off), so the pinning holds. */
static inline void cb_pin_team(int n, const int *cpus, int *actual) {
    int err[n > 0 ? n : 1];
    omp_set_dynamic(0);
#pragma omp parallel num_threads(n)
    {
        int t = omp_get_thread_num();
        err[t] = cb_pin_self(cpus[t]);
        actual[t] = sched_getcpu();
    }
    for (int t = 0; t < n; t++)
        if (err[t]) cb_fail("cannot pin thread %d to cpu %d: %s", t, cpus[t], strerror(err[t]));
}
#endif

/* Thread t of T's share [lo, hi) of n doubles, in whole 4 KiB pages (the last thread takes the
 * rest): the same partition for first touch and for every timed loop. */
#define CB_PAGE_DOUBLES 512
static inline void cb_chunk_pages(size_t n, int T, int t, size_t *lo, size_t *hi) {
    size_t pages = n / CB_PAGE_DOUBLES;
    *lo = pages * (size_t)t / (size_t)T * CB_PAGE_DOUBLES;
    *hi = (t == T - 1) ? n : pages * (size_t)(t + 1) / (size_t)T * CB_PAGE_DOUBLES;
}

/* ---- memory --------------------------------------------------------------------------- */
/* 2 MiB aligned allocation; hugepages > 0 asks for transparent huge pages, < 0 refuses them (madvise). */
static inline void *cb_alloc(size_t bytes, int hugepages) {
    void *p = NULL;
    size_t align = 2u << 20;
    size_t rounded = (bytes + align - 1) / align * align;
    if (posix_memalign(&p, align, rounded ? rounded : align)) return NULL;
#ifdef MADV_HUGEPAGE
    if (hugepages > 0) madvise(p, rounded, MADV_HUGEPAGE);
#ifdef MADV_NOHUGEPAGE
    else if (hugepages < 0) madvise(p, rounded, MADV_NOHUGEPAGE);
#endif
#endif
    return p;
}

#endif /* CB_COMMON_H */
