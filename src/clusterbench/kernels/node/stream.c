/* stream.c: STREAM Copy, Scale, Add, Triad (McCalpin's stream.c 5.10 method) with pinning,
 * heap arrays sized at run time, regular- and non-temporal-store variants and a NUMA mode.
 *
 * Method (as STREAM): a = 1, b = 2, c = 0, then a = 2a (untimed; Triad-only runs start from c = 1
 * so that Triad changes a); NTIMES iterations of
 *   Copy c = a, Scale b = s*c, Add c = a + b, Triad a = b + s*c   (s = 3)
 * each timed separately; the first iteration is reported to Python but excluded by it.
 * Bytes counted per element: Copy/Scale 16, Add/Triad 24 (write-allocate traffic not counted);
 * MB/s = 1e6 B/s. Validation replays the scalar recurrence and compares every element
 * (average relative error <= 1e-13 like STREAM's checkSTREAMresults, and also the worst one).
 *
 * Threads: one OpenMP team for the whole run; thread t pins itself to cpus[t] and owns one
 * contiguous chunk (whole 4 KiB pages) of every array for initialisation (first touch) and for
 * every kernel. Arrays: heap, 2 MiB aligned, transparent huge pages requested.
 *
 * Store variants: "regular" uses ordinary vector stores, "nt" non-temporal (streaming) stores:
 * AVX-512 _mm512_stream_pd, AVX _mm256_stream_pd, SSE2 _mm_stream_pd, aarch64 stnp; a build
 * without any of those reports nt_native=false and its "nt" is regular stores.
 * The loops are written with intrinsics, so the compiler cannot turn Copy into memcpy (whose
 * glibc version switches to non-temporal stores for large sizes and would blur the variants).
 *
 * Arguments: --cpus=LIST (one thread per entry) --elements=N --ntimes=K --variant=both|regular|nt
 *   --kernels=all|triad  --corrupt=1 (damage a after the last timed section: validation must fail)
 *   --skip_stores=1 (test hook: the kernels are not run, so nothing is stored: validation must fail)
 *   --mem_nodes=LIST --cpu_node=C  (NUMA mode, needs -DCB_HAVE_NUMA -lnuma: Triad only, arrays
 *   bound to each memory node in turn, metric "triad_numa"; each validation record then says where the
 *   arrays' pages really were after the first touch: pages_checked, pages_on_mem_node, from
 *   numa_move_pages's query)
 */
#include "cb_common.h"
#include <omp.h>
#ifdef CB_HAVE_NUMA
#include <numa.h>
#endif

#include "cb_simd.h"

#define UNROLL (4 * VL) /* elements per loop step: 4 vectors (4 cache lines with AVX-512) */
#define SCALAR 3.0
#define NKERN 4
static const char *KNAME[NKERN] = {"copy", "scale", "add", "triad"};
static const double KBYTES[NKERN] = {16.0, 16.0, 24.0, 24.0};

/* The four kernels over [0, n) of the given pointers, n a multiple of UNROLL; STORE2 picks the
 * variant. Pointers are 64 B aligned (chunks start on page boundaries). */
#define DEFINE_KERNELS(SFX, STORE2)                                                              \
    static void copy_##SFX(double *restrict c, const double *restrict a, size_t n) {           \
        for (size_t i = 0; i < n; i += UNROLL) {                                                \
            vd x0 = LD(a + i), x1 = LD(a + i + VL), x2 = LD(a + i + 2 * VL), x3 = LD(a + i + 3 * VL); \
            STORE2(c + i, x0, x1);                                                              \
            STORE2(c + i + 2 * VL, x2, x3);                                                     \
        }                                                                                       \
    }                                                                                           \
    static void scale_##SFX(double *restrict b, const double *restrict c, size_t n) {          \
        const vd s = SET1(SCALAR);                                                              \
        for (size_t i = 0; i < n; i += UNROLL) {                                                \
            vd x0 = MUL(s, LD(c + i)), x1 = MUL(s, LD(c + i + VL));                             \
            vd x2 = MUL(s, LD(c + i + 2 * VL)), x3 = MUL(s, LD(c + i + 3 * VL));                \
            STORE2(b + i, x0, x1);                                                              \
            STORE2(b + i + 2 * VL, x2, x3);                                                     \
        }                                                                                       \
    }                                                                                           \
    static void add_##SFX(double *restrict c, const double *restrict a, const double *restrict b, \
                          size_t n) {                                                           \
        for (size_t i = 0; i < n; i += UNROLL) {                                                \
            vd x0 = ADD(LD(a + i), LD(b + i)), x1 = ADD(LD(a + i + VL), LD(b + i + VL));        \
            vd x2 = ADD(LD(a + i + 2 * VL), LD(b + i + 2 * VL));                                \
            vd x3 = ADD(LD(a + i + 3 * VL), LD(b + i + 3 * VL));                                \
            STORE2(c + i, x0, x1);                                                              \
            STORE2(c + i + 2 * VL, x2, x3);                                                     \
        }                                                                                       \
    }                                                                                           \
    static void triad_##SFX(double *restrict a, const double *restrict b, const double *restrict c, \
                            size_t n) {                                                         \
        const vd s = SET1(SCALAR);                                                              \
        for (size_t i = 0; i < n; i += UNROLL) {                                                \
            vd x0 = FMA(s, LD(c + i), LD(b + i)), x1 = FMA(s, LD(c + i + VL), LD(b + i + VL));  \
            vd x2 = FMA(s, LD(c + i + 2 * VL), LD(b + i + 2 * VL));                             \
            vd x3 = FMA(s, LD(c + i + 3 * VL), LD(b + i + 3 * VL));                             \
            STORE2(a + i, x0, x1);                                                              \
            STORE2(a + i + 2 * VL, x2, x3);                                                     \
        }                                                                                       \
    }

DEFINE_KERNELS(reg, ST2)
DEFINE_KERNELS(nt, STNT2)

/* Run kernel k on [lo, hi): vector body, scalar tail (only the last chunk has one). */
static void run_kernel(int k, int nt, double *a, double *b, double *c, size_t lo, size_t hi) {
    size_t n = hi - lo, nv = n / UNROLL * UNROLL;
    double *pa = a + lo, *pb = b + lo, *pc = c + lo;
    switch (k) {
    case 0: (nt ? copy_nt : copy_reg)(pc, pa, nv); break;
    case 1: (nt ? scale_nt : scale_reg)(pb, pc, nv); break;
    case 2: (nt ? add_nt : add_reg)(pc, pa, pb, nv); break;
    default: (nt ? triad_nt : triad_reg)(pa, pb, pc, nv); break;
    }
    for (size_t j = nv; j < n; j++) {
        switch (k) {
        case 0: pc[j] = pa[j]; break;
        case 1: pb[j] = SCALAR * pc[j]; break;
        case 2: pc[j] = pa[j] + pb[j]; break;
        default: pa[j] = pb[j] + SCALAR * pc[j]; break;
        }
    }
    if (nt) FENCE();
}

#ifdef CB_HAVE_NUMA
/* Where the pages of [p, p + bytes) really are (numa_move_pages with no target nodes: a query, nothing
 * moves): adds the pages found on `node` to *on and the pages whose node was read to *checked. */
static void pages_on(const double *p, size_t bytes, int node, long long *on, long long *checked) {
    size_t page = 4096, np = (bytes + page - 1) / page;
    void **addr = malloc(np * sizeof *addr);
    int *st = malloc(np * sizeof *st);
    if (!addr || !st) cb_fail("out of memory");
    for (size_t i = 0; i < np; i++) addr[i] = (char *)p + i * page;
    if (numa_move_pages(0, np, addr, NULL, st, 0) == 0)
        for (size_t i = 0; i < np; i++)
            if (st[i] >= 0) { (*checked)++; if (st[i] == node) (*on)++; }
    free(addr);
    free(st);
}
#endif

#define MAXT 4096
static int cpus[MAXT], actual[MAXT];

static double *alloc_array(size_t bytes, int mem_node) {
    double *p = cb_alloc(bytes, 1);
    if (!p) cb_fail("cannot allocate %zu bytes", bytes);
#ifdef CB_HAVE_NUMA
    if (mem_node >= 0) {
        size_t rounded = (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        numa_tonode_memory(p, rounded, mem_node); /* binds before first touch */
    }
#else
    (void)mem_node;
#endif
    return p;
}

/* NUMA nodes from /sys/devices/system/node/online (a cpulist such as "0-3" or "0,2"); 1 when
 * absent (no NUMA support in the kernel). */
static int count_numa_nodes_sysfs(void) {
    FILE *f = fopen("/sys/devices/system/node/online", "r");
    if (!f) return 1;
    char buf[1024];
    int n = 0;
    if (fgets(buf, sizeof buf, f)) {
        for (char *s = buf; *s && *s != '\n';) {
            char *end;
            long a = strtol(s, &end, 10), b = a;
            if (end == s) break;
            if (*end == '-') { s = end + 1; b = strtol(s, &end, 10); }
            if (b >= a) n += (int)(b - a + 1);
            s = (*end == ',') ? end + 1 : end;
            if (*end != ',') break;
        }
    }
    fclose(f);
    return n ? n : 1;
}

/* Initial values: STREAM's a = 1, b = 2, c = 0, then a = 2a; a Triad-only run starts from
 * c = 1 instead, so that Triad changes a (2 -> 5) and one that stored nothing is caught. */
#define INIT_A 2.0
#define INIT_B 2.0
#define INIT_C(triad_only) ((triad_only) ? 1.0 : 0.0)

/* Expected values after ntimes iterations (STREAM's scalar replay). */
static void expected(int ntimes, int triad_only, double *ea, double *eb, double *ec) {
    double aj = INIT_A, bj = INIT_B, cj = INIT_C(triad_only);
    for (int k = 0; k < ntimes; k++) {
        if (!triad_only) {
            cj = aj;
            bj = SCALAR * cj;
            cj = aj + bj;
        }
        aj = bj + SCALAR * cj;
    }
    *ea = aj; *eb = bj; *ec = cj;
}

int main(int argc, char **argv) {
    const char *cpus_s = "0";
    long long nel = 10000000;
    int ntimes = 10;
    const char *variant = "both";
    int corrupt = 0, skip_stores = 0;
    const char *mem_nodes_s = NULL;
    int cpu_node = -1;
    const char *kernels = "all";
    CB_OPTIONS(argc, argv, CB_OPT("cpus", cpus_s), CB_OPT("elements", nel), CB_OPT("ntimes", ntimes),
               CB_OPT("variant", variant), CB_OPT("corrupt", corrupt), CB_OPT("skip_stores", skip_stores),
               CB_OPT("mem_nodes", mem_nodes_s), CB_OPT("cpu_node", cpu_node), CB_OPT("kernels", kernels));
    int T = cb_parse_cpulist(cpus_s, cpus, MAXT);
    if (strcmp(kernels, "all") && strcmp(kernels, "triad")) cb_fail("--kernels must be all or triad");
    if (T < 1) cb_fail("no cpus given");
    if (nel < 1) cb_fail("--elements must be positive");
    if (ntimes < 2 || ntimes > 200) cb_fail("--ntimes must be 2..200 (values overflow beyond)");

    int variants[2], nvar = 0;
    if (!strcmp(variant, "both")) { variants[nvar++] = 0; variants[nvar++] = 1; }
    else if (!strcmp(variant, "regular")) variants[nvar++] = 0;
    else if (!strcmp(variant, "nt")) variants[nvar++] = 1;
    else cb_fail("--variant must be both, regular or nt, not '%s'", variant);

    int libnuma = 0, numa_nodes = count_numa_nodes_sysfs();
#ifdef CB_HAVE_NUMA
    if (numa_available() >= 0) { libnuma = 1; numa_nodes = numa_num_configured_nodes(); }
#endif
    int mem_nodes[256], nmem = 0;
    if (mem_nodes_s) {
        if (!libnuma) cb_fail("NUMA mode needs libnuma (build with -DCB_HAVE_NUMA -lnuma)");
        nmem = cb_parse_cpulist(mem_nodes_s, mem_nodes, 256);
        for (int i = 0; i < nmem; i++)
            if (mem_nodes[i] < 0 || mem_nodes[i] >= numa_nodes) cb_fail("no NUMA node %d", mem_nodes[i]);
    }

    size_t n = (size_t)nel, bytes = n * sizeof(double);
    cb_simd_team_start(T, cpus, actual, n, ntimes);
    cb_json_int("vector_doubles", VL);
    cb_json_int("numa_nodes", numa_nodes);
    cb_json_bool("libnuma", libnuma);
    cb_json_str("bytes_convention", "STREAM: copy/scale 16 B, add/triad 24 B per element; MB = 1e6 B");
    cb_json_end();

    int rounds = nmem ? nmem : 1;
    double *times = malloc(sizeof(double) * (size_t)NKERN * (size_t)ntimes);
    if (!times) cb_fail("out of memory");
    double ea, eb, ec; /* Triad alone (NUMA mode, --kernels=triad): a = b + s*c with b = 2, c = 1 */
    int triad_only = nmem > 0 || !strcmp(kernels, "triad");
    expected(ntimes, triad_only, &ea, &eb, &ec);
    const double init_c = INIT_C(triad_only);
    /* relative errors are taken against |expected| (against 1 where the expected value is 0) */
    const double sa = ea != 0 ? fabs(ea) : 1.0, sb = eb != 0 ? fabs(eb) : 1.0, sc = ec != 0 ? fabs(ec) : 1.0;

    for (int r = 0; r < rounds; r++) {
        int mem_node = nmem ? mem_nodes[r] : -1;
        double *a = alloc_array(bytes, mem_node), *b = alloc_array(bytes, mem_node),
               *c = alloc_array(bytes, mem_node);
        int kfirst = triad_only ? 3 : 0;
        long long pages_on_node = 0, pages_checked = 0; /* NUMA mode: where the arrays' pages really are */
        for (int vi = 0; vi < nvar; vi++) {
            int nt = variants[vi];
            double err_a = 0, err_b = 0, err_c = 0, worst = 0;
            double t_init0 = cb_now(), t_init = 0;
#pragma omp parallel num_threads(T) reduction(+ : err_a, err_b, err_c) reduction(max : worst)
            {
                int t = omp_get_thread_num();
                size_t lo, hi;
                cb_chunk_pages(n, T, t, &lo, &hi);
                /* first touch (first variant) / reset: same partition as the kernels */
                /* a = 1, b = 2, c = 0, then a = 2a (STREAM), in one pass; c = 1 for Triad alone */
                for (size_t j = lo; j < hi; j++) { a[j] = INIT_A; b[j] = INIT_B; c[j] = init_c; }
#pragma omp barrier
#pragma omp master
                t_init = cb_now() - t_init0;
                for (int k = 0; k < ntimes; k++) {
                    for (int kk = kfirst; kk < NKERN; kk++) {
                        double t0 = 0;
#pragma omp barrier
#pragma omp master
                        t0 = cb_now();
                        if (!skip_stores) run_kernel(kk, nt, a, b, c, lo, hi);
#pragma omp barrier
#pragma omp master
                        times[kk * ntimes + k] = cb_now() - t0;
                    }
                }
#pragma omp barrier
#pragma omp master
                if (corrupt && vi == nvar - 1 && r == rounds - 1) a[n / 2] = a[n / 2] * 1.5 + 1.0;
#pragma omp barrier
                /* validation: every element against the scalar replay (a NaN poisons the sums) */
                double ra = 0, rb = 0, rc = 0, ma = 0, mb = 0, mc = 0;
#pragma omp simd reduction(+ : ra, rb, rc) reduction(max : ma, mb, mc)
                for (size_t j = lo; j < hi; j++) {
                    double da = fabs(a[j] - ea), db = fabs(b[j] - eb), dc = fabs(c[j] - ec);
                    ra += da; rb += db; rc += dc;
                    ma = da > ma ? da : ma; mb = db > mb ? db : mb; mc = dc > mc ? dc : mc;
                }
                err_a += ra; err_b += rb; err_c += rc;
                worst = fmax(worst, fmax(ma / sa, fmax(mb / sb, mc / sc)));
            }
#ifdef CB_HAVE_NUMA
            if (nmem && vi == 0) /* after the first touch (later variants reset in place: pages stay) */
                for (int q = 0; q < 3; q++) pages_on(q == 0 ? a : q == 1 ? b : c, bytes, mem_node,
                                                     &pages_on_node, &pages_checked);
#endif
            const double eps = 1e-13;
            double avg_a = err_a / (double)n / sa, avg_b = err_b / (double)n / sb,
                   avg_c = err_c / (double)n / sc;
            int ok = avg_a <= eps && avg_b <= eps && avg_c <= eps && worst <= eps;
            char detail[512];
            snprintf(detail, sizeof detail,
                     "%s stores%s: average relative error a %.3g b %.3g c %.3g, worst element %.3g "
                     "(tolerance %.0e) after %d iterations",
                     nt ? "non-temporal" : "regular", nmem ? " (NUMA triad)" : "", avg_a, avg_b, avg_c,
                     worst, eps, ntimes);
            cb_validation_begin(ok, detail);
            cb_json_num("init_s", t_init);
            cb_json_num("section_s", cb_now() - t_init0);
            if (nmem) {
                cb_json_int("mem_node", mem_node);
                cb_json_int("pages_checked", pages_checked);
                cb_json_int("pages_on_mem_node", pages_on_node);
            }
            cb_json_end();
            if (!ok) return 1;
            for (int kk = kfirst; kk < NKERN; kk++) {
                double rate[200];
                for (int k = 0; k < ntimes; k++)
                    rate[k] = KBYTES[kk] * (double)n / times[kk * ntimes + k] * 1e-6;
                char params[160];
                if (nmem)
                    snprintf(params, sizeof params, "{\"variant\":\"%s\",\"cpu_node\":%d,\"mem_node\":%d}",
                             nt ? "nt" : "regular", cpu_node, mem_node);
                else
                    snprintf(params, sizeof params, "{\"variant\":\"%s\"}", nt ? "nt" : "regular");
                cb_result_begin(nmem ? "triad_numa" : KNAME[kk], "MB/s", params, rate, times + kk * ntimes, ntimes);
                cb_json_num("bytes_per_element", KBYTES[kk]);
                cb_json_end();
            }
        }
        free(a); free(b); free(c);
    }
    free(times);
    return 0;
}
