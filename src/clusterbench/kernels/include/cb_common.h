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
    while (cb_clock_chain(iters, 3) < min_time / 4 && iters < (1L << 40)) iters *= 2;
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
/* Raw JSON fragment, e.g. a params object built by the kernel. */
static inline void cb_json_raw(const char *k, const char *raw) { cb_json_key(k); fputs(raw, stdout); }
static inline void cb_json_end(void) { fputs("}\n", stdout); fflush(stdout); }

static inline void cb_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static inline void cb_fail(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cb_json_begin("error");
    cb_json_str("message", msg);
    cb_json_end();
    exit(1);
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

/* Pin the calling thread to one cpu; returns 0 or errno. */
static inline int cb_pin_self(int cpu) {
    if (cpu < 0) return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) ? errno : 0;
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
