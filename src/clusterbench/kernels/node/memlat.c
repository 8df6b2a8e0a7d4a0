/* memlat.c: load-to-use latency by a pointer chase over a random cyclic permutation of cache
 * lines (lmbench lat_mem_rd -t, tinymembench), one working-set size after another.
 *
 * Layout: one pointer per cache line (--line bytes, default 64). The chase is a single random
 * cycle through every line of the working set:
 *   --pattern=random  Sattolo's algorithm over all lines (uniform random n-cycle). Each load
 *                     is also a likely TLB miss once the set exceeds the TLB reach: this is the
 *                     classic figure (includes page walks; use --hugepages=1 to shrink them).
 *   --pattern=page    pages (--page bytes) visited in a random cyclic order, and all lines of a
 *                     page in a random order before moving on: one TLB miss per page instead of
 *                     one per line, so the curve shows cache/DRAM latency with less TLB cost.
 * Per size: build the cycle (in place), warm-up pass that walks it and checks it returns to the
 * start after exactly n steps and not before (so every line is visited once per cycle), then
 * --samples timed chases of k steps each (k from --min_time; the loop is unrolled 16x and the
 * final pointer is checked: it must end on the line the verified walk saw at step loads mod n).
 * --corrupt=1 (test hook) makes one line point to itself after the warm-up check, so the post-run check must fail.
 *
 * Cycles per load = ns x clock; the clock is measured here by a dependent register-register
 * integer add chain (1 add/cycle latency), best of 5 (cb_measure_ghz), reported in the info record.
 * Huge pages: --hugepages=1 asks for THP (madvise MADV_HUGEPAGE via cb_alloc); 0 forbids them
 * (MADV_NOHUGEPAGE); what was obtained is read from AnonHugePages in /proc/self/smaps_rollup.
 *
 * Args: --cpu=N --sizes=B1,B2,... (bytes, ascending) --line=64 --page=4096 --hugepages=0|1
 *       --pattern=random|page --samples=N --min_time=S --seed=N --corrupt=1
 */
#include "cb_common.h"

/* ---- random numbers (splitmix64) ------------------------------------------------------- */
static uint64_t rng_state;
static inline uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline size_t rng_below(size_t n) { return (size_t)(rng_next() % n); } /* bias negligible */

#define SLOT(base, line, i) ((void **)((char *)(base) + (size_t)(i) * (line)))

/* Sattolo in place: slot i first holds the index of its successor, then the pointer. */
static void build_random(char *base, size_t n, size_t line) {
    for (size_t i = 0; i < n; i++) *(size_t *)SLOT(base, line, i) = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rng_below(i); /* j < i: Sattolo, a single n-cycle */
        size_t *a = (size_t *)SLOT(base, line, i), *b = (size_t *)SLOT(base, line, j);
        size_t t = *a; *a = *b; *b = t;
    }
    for (size_t i = 0; i < n; i++) {
        size_t nx = *(size_t *)SLOT(base, line, i);
        *SLOT(base, line, i) = (void *)SLOT(base, line, nx);
    }
}

/* Pages in random cyclic order, lines random within each page. */
static void build_page(char *base, size_t n, size_t line, size_t page) {
    size_t per = page / line;
    if (per < 1) per = 1;
    size_t npages = (n + per - 1) / per;
    uint32_t *order = malloc(npages * sizeof *order), *lines = malloc(per * sizeof *lines);
    if (!order || !lines) cb_fail("out of memory building the page-local chain");
    for (size_t i = 0; i < npages; i++) order[i] = (uint32_t)i;
    for (size_t i = npages - 1; i > 0; i--) { /* page 0 stays first: the chain starts there */
        size_t j = 1 + rng_below(i);
        uint32_t t = order[i]; order[i] = order[j]; order[j] = t;
    }
    void **prev = NULL, **first = NULL;
    for (size_t pi = 0; pi < npages; pi++) {
        size_t pg = order[pi], lo = pg * per, cnt = (lo + per <= n) ? per : n - lo;
        for (size_t i = 0; i < cnt; i++) lines[i] = (uint32_t)i;
        for (size_t i = cnt - 1; i > 0; i--) {
            size_t j = rng_below(i + 1);
            uint32_t t = lines[i]; lines[i] = lines[j]; lines[j] = t;
        }
        if (pi == 0) { /* start at line 0 so the chain's start is base */
            for (size_t i = 0; i < cnt; i++) if (lines[i] == 0) { lines[i] = lines[0]; lines[0] = 0; break; }
        }
        for (size_t i = 0; i < cnt; i++) {
            void **s = SLOT(base, line, lo + lines[i]);
            if (prev) *prev = (void *)s; else first = s;
            prev = s;
        }
    }
    *prev = (void *)first;
    free(order);
    free(lines);
}

#define UNROLL 16
static __attribute__((noinline)) void **chase(void **p, long iters) {
    for (long i = 0; i < iters; i++) {
#define L1 p = (void **)*p;
        L1 L1 L1 L1 L1 L1 L1 L1 L1 L1 L1 L1 L1 L1 L1 L1
#undef L1
    }
    return p;
}
static __attribute__((noinline)) void **walk(void **p, size_t steps) {
    for (size_t i = 0; i < steps; i++) p = (void **)*p;
    return p;
}
static long long anon_huge_kib(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char buf[256];
    long long kib = -1;
    while (fgets(buf, sizeof buf, f))
        if (!strncmp(buf, "AnonHugePages:", 14)) { kib = strtoll(buf + 14, NULL, 10); break; }
    fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    int cpu = -1;
    long long line = 64, page = 4096;
    int huge = 0;
    const char *pattern = "random";
    int samples = 3;
    double min_time = 0.002;
    int corrupt = 0;
    rng_state = 12345;
    const char *sizes_s = "1024,4096,16384,65536";
    CB_OPTIONS(argc, argv, CB_OPT("cpu", cpu), CB_OPT("line", line), CB_OPT("page", page),
               CB_OPT("hugepages", huge), CB_OPT("pattern", pattern), CB_OPT("samples", samples),
               CB_OPT("min_time", min_time), CB_OPT("corrupt", corrupt), CB_OPT("seed", rng_state),
               CB_OPT("sizes", sizes_s));
    int page_mode = !strcmp(pattern, "page");
    if (!page_mode && strcmp(pattern, "random")) cb_fail("--pattern must be random or page");
    if (line < (long long)sizeof(void *) || line > 4096 || (line & (line - 1)))
        cb_fail("--line must be a power of two between %zu and 4096", sizeof(void *));
    if (page < line || (page & (page - 1))) cb_fail("--page must be a power of two >= --line");
    if (samples < 1 || samples > 1000) cb_fail("--samples must be 1..1000");
    if (!(min_time > 0 && min_time < 100)) cb_fail("--min_time must be in (0, 100) seconds");

    size_t sizes[512];
    int nsizes = 0;
    for (const char *s = sizes_s; *s;) {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s) cb_fail("bad --sizes near '%s'", s);
        if (nsizes >= 512) cb_fail("too many sizes (max 512)");
        if (v < 2ull * (unsigned long long)line) cb_fail("size %llu is under two lines", v);
        sizes[nsizes++] = (size_t)(v / (unsigned long long)line * (unsigned long long)line);
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') cb_fail("bad --sizes near '%s'", end);
    }
    if (!nsizes) cb_fail("no --sizes");
    size_t maxb = 0;
    for (int i = 0; i < nsizes; i++) if (sizes[i] > maxb) maxb = sizes[i];

    cb_pin_or_fail(cpu);
    char *base = cb_alloc(maxb, huge ? 1 : 0);
    if (!base) cb_fail("cannot allocate %zu bytes", maxb);
#ifdef MADV_NOHUGEPAGE
    /* off means off even where THP is "always" (cb_alloc only handles the "on" case) */
    if (!huge) madvise(base, (maxb + (2u << 20) - 1) / (2u << 20) * (2u << 20), MADV_NOHUGEPAGE);
#endif
    double res = cb_timer_resolution();
    min_time = fmax(min_time, 50 * res);
    double ghz = cb_measure_ghz(fmax(min_time, 0.002), 5);

    cb_info_begin_self(res);
    cb_json_int("line_bytes", line);
    cb_json_int("page_bytes", page);
    cb_json_str("pattern", pattern);
    cb_json_int("hugepages_requested", huge);
    cb_json_int("max_bytes", (long long)maxb);
    cb_json_int("nsizes", nsizes);
    cb_json_num("clock_ghz", ghz);
    cb_json_str("clock_method", "dependent register-register integer add chain, 1 add/cycle, best of 5");
    cb_json_end();

    double est = 0; /* seconds per load, from the previous size */
    for (int si = 0; si < nsizes; si++) {
        size_t size = sizes[si], n = size / (size_t)line;
        if (page_mode) build_page(base, n, (size_t)line, (size_t)page);
        else build_random(base, n, (size_t)line);
        void **start = (void **)base;
        /* Timed loads per sample from the previous size's latency (latency only grows with
         * size, so each sample lasts >= min_time); the first size calibrates on the fly. */
        if (est <= 0) {
            void **q = start;
            long it = 64;
            for (;;) {
                double a = cb_now();
                q = chase(q, it);
                double dt = cb_now() - a;
                if (dt >= min_time / 8 || it > CB_ITERS_MAX) { est = dt / ((double)it * UNROLL); break; }
                it *= 2;
            }
            if (q == NULL) cb_fail("internal: null pointer in the chain");
            if (est < 1e-10) est = 1e-10;
        }
        long iters = (long)ceil(min_time / est / UNROLL);
        if (iters < 4) iters = 4;
        unsigned long long total = (unsigned long long)iters * UNROLL * (unsigned long long)samples;
        size_t at = (size_t)(total % n);
        /* Build-time check and first warm-up pass: the chain returns to the start after exactly
         * n steps and not before, so it visits each of the n lines once; remember where the
         * timed chase must end (step total mod n). */
        void **expect = start, **p = start;
        size_t len = 0;
        double t0 = cb_now();
        do {
            if (len == at) expect = p;
            p = (void **)*p;
            len++;
        } while (p != start && len <= n);
        double el = cb_now() - t0;
        if (len != n) {
            cb_json_begin("validation");
            cb_json_bool("ok", 0);
            char d[200];
            snprintf(d, sizeof d, "size %zu: the chain returns to its start after %zu steps, not %zu", size, len, n);
            cb_json_str("detail", d);
            cb_json_end();
            return 1;
        }
        /* more warm-up for small sets: whole cycles for >= min_time/4 */
        size_t cycles = 1;
        while (el < min_time / 4 && cycles < (1u << 30)) {
            p = walk(p, n);
            cycles++;
            el = cb_now() - t0;
        }
        if (p != start) cb_fail("internal: warm-up did not end at the start");
        if (corrupt) { /* test hook: a line that points to itself, reached before the expected end */
            void **q = at ? start : (void **)*start;
            *q = (void *)q;
        }
        double ns[1000], ts[1000], cyc[1000];
        for (int s = 0; s < samples; s++) {
            double a = cb_now();
            p = chase(p, iters);
            double dt = cb_now() - a;
            ts[s] = dt;
            ns[s] = dt / ((double)iters * UNROLL) * 1e9;
            cyc[s] = ns[s] * ghz;
        }
        int ok = p == expect;
        double best = 1e300;
        for (int s2 = 0; s2 < samples; s2++) if (ns[s2] < best) best = ns[s2];
        if (best * 1e-9 > est) est = best * 1e-9;
        long long hk = anon_huge_kib();
        cb_json_begin("validation");
        cb_json_bool("ok", ok);
        char d[300];
        if (ok)
            snprintf(d, sizeof d, "size %zu: %zu-line cycle verified; the timed chase of %llu loads ended on the "
                     "expected line", size, n, total);
        else
            snprintf(d, sizeof d, "size %zu: after %llu loads the chase is at line %lld, expected line %lld "
                     "(corrupted chain)", size, total, (long long)(((char *)p - base) / line),
                     (long long)(((char *)expect - base) / line));
        cb_json_str("detail", d);
        cb_json_end();
        if (!ok) return 1;
        char params[300];
        snprintf(params, sizeof params,
                 "{\"size_bytes\":%zu,\"lines\":%zu,\"loads\":%lld,\"huge_kib\":%lld,\"clock_ghz\":%.6g}",
                 size, n, (long long)iters * UNROLL, hk, ghz);
        cb_result("latency", "ns", params, ns, ts, samples);
        cb_result("latency_cycles", "cycles", params, cyc, ts, samples);
    }
    return 0;
}
