/* intcpu.c: 64-bit integer prime-search throughput, the definition of `sysbench cpu`
 * (sysbench 1.0, src/tests/cpu/sb_cpu.c), so events per second compare with sysbench's directly.
 *
 * One event (the work, exactly sysbench's):
 *   for every candidate c = 3, 4, ..., max_prime - 1 (64-bit unsigned):
 *       root = sqrt((double)c)                          one double square root per candidate
 *       for d = 2, 3, ... while (double)d <= root:      the bound compared in double, as sysbench
 *           if c % d == 0: c is composite, stop         64-bit unsigned remainder (div r64 on x86-64)
 *       no divisor found: c is prime, count it
 * So an event at max_prime = 10000 counts the 1228 primes 3 <= p < 10000 (2 and max_prime
 * itself are not candidates): pi(max_prime - 1) - 1. The number of remainders per event is
 * fixed by max_prime (printed in the info record as divisions_per_event, counted once before the
 * timed phase with the same loop); nothing is skipped, reordered or narrowed (no 32-bit divide,
 * no integer square-root bound, no sieve in the timed loop).
 *
 * Run (sysbench's event loop): every thread pins itself, all start together (barrier); each
 * repeats events until the time limit is reached (checked before an event: the last one may end
 * after it, as in sysbench) or the shared event budget is spent (--events, taken atomically
 * before an event, as sysbench's --events). events per second = total events / total time,
 * total time = from the common start to the end of the last thread's last event.
 *
 * Validation: each event's count is compared with the number of primes 3 <= p < max_prime,
 * found once before timing by a sieve of Eratosthenes (an independent method). Any mismatch
 * fails the run; the validation record is printed before the results. Before the threads start,
 * one untimed event is checked the same way. --corrupt=1 (test hook) adds one to the count of
 * thread 0's first timed event, which must be refused.
 *
 * Latency: per event, one clock read between events (the end of one is the start of the next):
 * min/avg/max exact, p95 from a logarithmic histogram with 1 % wide buckets (the upper edge of
 * the bucket holding the 95th percentile; sysbench's histogram is also approximate).
 *
 * Spread: the timed phase [0, time) (with --events: [0, total time)) cut into --samples equal
 * slices; an event belongs to the slice its end falls in. Each slice gives an events/s and a mean
 * latency sample. Fewer slices when there would be under 20 events per slice; with no event
 * ending inside the time limit (one event longer than --time) the one sample is the overall rate.
 *
 * Args: --cpus=0,1,...  --max_prime=N (10000)  --time=S (10; 0 = no time limit)
 *       --events=N (0 = no limit)  --samples=K (10)  --corrupt=1
 * Prints: info, validation, then results "events_per_s" (value = total events / total time)
 *         and "latency" (ms; value = mean), with per-thread events, fairness and p95 in params.
 */
#include "cb_common.h"

#include <pthread.h>

#define MAXT 4096
#define MAX_PRIME_LIMIT 100000000ULL /* one event there takes about a minute */
#define FINE_PER_SLICE 64            /* fine buckets per slice in time mode */
#define EVENTS_FINE_S 1e-3           /* fine bucket width in events mode */
#define HIST_BASE 1e-9               /* latency histogram: first bucket at 1 ns */
#define HIST_STEP 1.01               /* 1 % wide buckets */
#define HIST_N 3100                  /* up to 1e-9 * 1.01^3100 s, about 2.5e4 s */
#define MIN_EVENTS_PER_SLICE 20

/* ---- the work of one event -------------------------------------------------------------- */
/* Is c prime, by trial division from 2 while (double)d <= sqrt((double)c)? (sysbench's test) */
static inline int trial_division_prime(uint64_t c) {
    const double root = sqrt((double)c);
    for (uint64_t d = 2; (double)d <= root; d++)
        if (c % d == 0) return 0;
    return 1;
}

/* One event: how many candidates 3 <= c < max_prime pass the test. noinline: the same code for
 * every thread and every event, and visible in objdump. */
static __attribute__((noinline)) uint64_t prime_event(uint64_t max_prime) {
    uint64_t found = 0;
    for (uint64_t c = 3; c < max_prime; c++) found += (uint64_t)trial_division_prime(c);
    return found;
}

/* The remainders one event computes (untimed; the same loop with a counter). */
static uint64_t divisions_per_event(uint64_t max_prime) {
    uint64_t n = 0;
    for (uint64_t c = 3; c < max_prime; c++) {
        const double root = sqrt((double)c);
        for (uint64_t d = 2; (double)d <= root; d++) {
            n++;
            if (c % d == 0) break;
        }
    }
    return n;
}

/* Primes p with 3 <= p < max_prime, by a sieve of Eratosthenes over the odd numbers. */
static uint64_t sieve_count(uint64_t max_prime) {
    if (max_prime <= 3) return 0;
    uint64_t top = max_prime - 1;         /* largest candidate */
    uint64_t nodd = (top - 1) / 2;        /* odd numbers 3, 5, ..., <= top: index i is 2i + 3 */
    unsigned char *comp = calloc(nodd ? nodd : 1, 1);
    if (!comp) cb_fail("out of memory for the validation sieve (%llu bytes)", (unsigned long long)nodd);
    for (uint64_t i = 0; i < nodd; i++) {
        uint64_t p = 2 * i + 3;
        if (p * p > top) break;
        if (comp[i]) continue;
        for (uint64_t m = p * p; m <= top; m += 2 * p) comp[(m - 3) / 2] = 1;
    }
    uint64_t n = 0;
    for (uint64_t i = 0; i < nodd; i++) n += !comp[i];
    free(comp);
    return n;
}

/* ---- threads ----------------------------------------------------------------------------- */
typedef struct {
    int id, cpu, bound_cpu, pin_err, corrupt;
    uint64_t events, bad, bad_got;
    double lat_sum, lat_min, lat_max, end;
    uint32_t *fine_n;      /* events per fine bucket (by end time) */
    double *fine_lat;      /* their latency sum */
    size_t nfine;
    uint32_t hist[HIST_N];
} thr_t;

static pthread_barrier_t barrier;
static volatile int pin_failed;
static double g_start;
static uint64_t g_max_prime, g_expected, g_max_events;
static double g_time, g_fine_w;
static int g_events_mode;
static uint64_t g_issued; /* events handed out (events mode) */

static int hist_bucket(double s) {
    if (!(s > HIST_BASE)) return 0;
    int b = (int)(log(s / HIST_BASE) / log(HIST_STEP)) + 1;
    return b < HIST_N ? b : HIST_N - 1;
}
static double hist_upper(int b) { return HIST_BASE * pow(HIST_STEP, b); }

static void fine_add(thr_t *t, double at, double lat) {
    if (at < 0) at = 0;
    size_t i = (size_t)(at / g_fine_w);
    if (i >= t->nfine) {
        if (!g_events_mode) return; /* ends after the time limit: counted in the total only */
        size_t n = t->nfine;
        while (n <= i) n *= 2;
        uint32_t *a = realloc(t->fine_n, n * sizeof *a);
        if (a) t->fine_n = a;
        double *b = realloc(t->fine_lat, n * sizeof *b);
        if (b) t->fine_lat = b;
        if (!a || !b) cb_fail("out of memory for the spread buckets");
        memset(a + t->nfine, 0, (n - t->nfine) * sizeof *a);
        memset(b + t->nfine, 0, (n - t->nfine) * sizeof *b);
        t->fine_n = a;
        t->fine_lat = b;
        t->nfine = n;
    }
    t->fine_n[i]++;
    t->fine_lat[i] += lat;
}

static void *worker(void *arg) {
    thr_t *t = arg;
    t->pin_err = cb_pin_self(t->cpu);
    t->bound_cpu = sched_getcpu();
    if (t->pin_err) pin_failed = 1;
    t->lat_min = INFINITY;
    if (pthread_barrier_wait(&barrier) == PTHREAD_BARRIER_SERIAL_THREAD) g_start = cb_now();
    pthread_barrier_wait(&barrier); /* everyone sees g_start */
    if (pin_failed) return NULL;
    const double deadline = g_start + g_time;
    double now = cb_now();
    for (;;) {
        if (g_time > 0 && now >= deadline) break;
        if (g_max_events && __atomic_fetch_add(&g_issued, 1, __ATOMIC_RELAXED) >= g_max_events) break;
        uint64_t m = g_max_prime;
        CB_KEEPI(m); /* opaque: every event is computed, never hoisted or reused */
        uint64_t n = prime_event(m);
        double end = cb_now();
        double lat = end - now;
        t->events++;
        if (t->corrupt && t->events == 1) n += 1; /* test hook: a wrong count in one event */
        if (n != g_expected) { t->bad++; t->bad_got = n; }
        t->lat_sum += lat;
        if (lat < t->lat_min) t->lat_min = lat;
        if (lat > t->lat_max) t->lat_max = lat;
        t->hist[hist_bucket(lat)]++;
        fine_add(t, end - g_start, lat);
        now = end;
    }
    t->end = now;
    return NULL;
}

int main(int argc, char **argv) {
    const char *cpus_s = NULL;
    long long max_prime = 10000;
    double time_s = 10.0;
    long long max_events = 0;
    int samples = 10, corrupt = 0;
    CB_OPTIONS(argc, argv, CB_OPT("cpus", cpus_s), CB_OPT("max_prime", max_prime), CB_OPT("time", time_s),
               CB_OPT("events", max_events), CB_OPT("samples", samples), CB_OPT("corrupt", corrupt));
    if (max_prime < 3 || (unsigned long long)max_prime > MAX_PRIME_LIMIT)
        cb_fail("--max_prime must be 3..%llu", (unsigned long long)MAX_PRIME_LIMIT);
    if (!(time_s >= 0) || time_s > 1e6) cb_fail("--time must be 0 (no limit) or up to 1e6 seconds");
    if (max_events < 0) cb_fail("--events must be 0 (no limit) or more");
    if (time_s == 0 && max_events == 0) cb_fail("give a --time limit, an --events budget or both");
    if (samples < 1 || samples > 1000) cb_fail("--samples must be 1..1000");

    static int cpus[MAXT];
    int nthreads = cb_team_cpus(cpus_s, cpus, MAXT);

    g_max_prime = (uint64_t)max_prime;
    g_time = time_s;
    g_max_events = (uint64_t)max_events;
    g_events_mode = max_events > 0; /* the span is known only at the end */
    /* slice the spread over [0, time) in time mode; fine buckets of 1 ms when an event budget may end it */
    g_fine_w = g_events_mode ? EVENTS_FINE_S : time_s / (samples * FINE_PER_SLICE);

    double tres = cb_timer_resolution();
    g_expected = sieve_count(g_max_prime);
    uint64_t divs = divisions_per_event(g_max_prime);
    {   /* the loop itself must agree with the sieve before anything is timed */
        uint64_t m = g_max_prime;
        CB_KEEPI(m);
        uint64_t n = prime_event(m);
        if (n != g_expected)
            cb_fail("the trial-division loop counted %llu primes below %llu, the sieve %llu",
                    (unsigned long long)n, (unsigned long long)g_max_prime, (unsigned long long)g_expected);
    }

    thr_t *th = calloc((size_t)nthreads, sizeof *th);
    pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
    if (!th || !tid) cb_fail("out of memory");
    size_t nfine0 = g_events_mode ? 4096 : (size_t)samples * FINE_PER_SLICE;
    for (int i = 0; i < nthreads; i++) {
        th[i].id = i;
        th[i].cpu = cpus[i];
        th[i].corrupt = corrupt && i == 0;
        th[i].nfine = nfine0;
        th[i].fine_n = calloc(nfine0, sizeof(uint32_t));
        th[i].fine_lat = calloc(nfine0, sizeof(double));
        if (!th[i].fine_n || !th[i].fine_lat) cb_fail("out of memory");
    }
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&tid[i], NULL, worker, &th[i])) cb_fail("cannot create thread %d", i);
    for (int i = 0; i < nthreads; i++) pthread_join(tid[i], NULL);
    for (int i = 0; i < nthreads; i++)
        if (th[i].pin_err) cb_fail("cannot pin thread %d to cpu %d: %s", i, th[i].cpu, strerror(th[i].pin_err));

    /* ---- totals ---- */
    uint64_t total = 0, bad = 0, bad_got = 0;
    double end = g_start, lat_sum = 0, lat_min = INFINITY, lat_max = 0;
    static uint32_t hist[HIST_N];
    int *bound = calloc((size_t)nthreads, sizeof(int));
    for (int i = 0; i < nthreads; i++) {
        thr_t *t = &th[i];
        bound[i] = t->bound_cpu;
        total += t->events;
        if (t->bad) { bad += t->bad; bad_got = t->bad_got; }
        if (t->end > end) end = t->end;
        lat_sum += t->lat_sum;
        if (t->lat_min < lat_min) lat_min = t->lat_min;
        if (t->lat_max > lat_max) lat_max = t->lat_max;
        for (int b = 0; b < HIST_N; b++) hist[b] += t->hist[b];
    }
    double total_time = end - g_start;
    if (total == 0) cb_fail("no event ran");

    cb_info_begin_team(tres, nthreads, cpus[0] < 0 ? bound : cpus, bound);
    cb_json_int("max_prime", max_prime);
    cb_json_int("expected_primes", (long long)g_expected);
    cb_json_int("divisions_per_event", (long long)divs);
    cb_json_num("time_limit_s", time_s);
    cb_json_int("events_limit", max_events);
    cb_json_str("definition",
                "sysbench cpu: per event, c = 3..max_prime-1 (uint64), d = 2.. while (double)d <= sqrt((double)c), "
                "c % d (64-bit); events/s = total events / total time");
    cb_json_end();

    cb_json_begin("validation");
    cb_json_bool("ok", bad == 0);
    cb_json_int("events_checked", (long long)total);
    cb_json_int("expected_primes", (long long)g_expected);
    if (bad) {
        char d[256];
        snprintf(d, sizeof d, "%llu of %llu events counted %llu primes below %llu, the sieve says %llu",
                 (unsigned long long)bad, (unsigned long long)total, (unsigned long long)bad_got,
                 (unsigned long long)g_max_prime, (unsigned long long)g_expected);
        cb_json_str("detail", d);
    } else {
        char d[200];
        snprintf(d, sizeof d, "every event (%llu) counted %llu primes 3 <= p < %llu, as the sieve",
                 (unsigned long long)total, (unsigned long long)g_expected, (unsigned long long)g_max_prime);
        cb_json_str("detail", d);
    }
    cb_json_end();
    if (bad) return 1;

    /* ---- spread: slices of the timed phase ---- */
    double span = g_events_mode ? total_time : time_s;
    size_t nb = (size_t)ceil(span / g_fine_w - 1e-9);
    if (nb > th[0].nfine) nb = th[0].nfine;
    for (int i = 1; i < nthreads; i++) if (th[i].nfine < nb) nb = th[i].nfine;
    uint64_t in_span = 0;
    for (int i = 0; i < nthreads; i++)
        for (size_t k = 0; k < nb; k++) in_span += th[i].fine_n[k];
    int ns = samples;
    if (in_span < (uint64_t)ns * MIN_EVENTS_PER_SLICE) ns = (int)(in_span / MIN_EVENTS_PER_SLICE);
    if (ns < 1) ns = 1;
    if ((size_t)ns > nb) ns = nb ? (int)nb : 1;
    double *rate = calloc((size_t)ns, sizeof(double)), *lat = calloc((size_t)ns, sizeof(double));
    double *len = calloc((size_t)ns, sizeof(double));
    size_t per = nb / (size_t)ns;
    if (in_span == 0 || per == 0) { /* one event longer than the time limit: the overall figures */
        ns = 1;
        rate[0] = (double)total / total_time;
        lat[0] = lat_sum / (double)total * 1e3;
        len[0] = total_time;
    } else {
        for (int s = 0; s < ns; s++) {
            uint64_t n = 0;
            double ls = 0;
            for (int i = 0; i < nthreads; i++)
                for (size_t k = (size_t)s * per; k < (size_t)(s + 1) * per; k++) {
                    n += th[i].fine_n[k];
                    ls += th[i].fine_lat[k];
                }
            len[s] = (double)per * g_fine_w;
            rate[s] = (double)n / len[s];
            lat[s] = n ? ls / (double)n * 1e3 : NAN;
        }
        /* a slice without events has no mean latency: use the overall one (its rate is 0 already) */
        for (int s = 0; s < ns; s++) if (!isfinite(lat[s])) lat[s] = lat_sum / (double)total * 1e3;
    }

    /* p95 from the histogram */
    uint64_t want = (uint64_t)ceil(0.95 * (double)total), cum = 0;
    double p95 = lat_max;
    for (int b = 0; b < HIST_N; b++) {
        cum += hist[b];
        if (cum >= want) { p95 = fmin(hist_upper(b), lat_max); break; }
    }
    /* per-thread events and fairness (sysbench's "events (avg/stddev)", "execution time") */
    size_t psize = 1024 + (size_t)nthreads * 24;
    char *pbuf = malloc(psize);
    if (!pbuf) cb_fail("out of memory");
    size_t o = 0;
    double ev_avg = (double)total / nthreads, ex_avg = lat_sum / nthreads, ev_sd = 0, ex_sd = 0;
    for (int i = 0; i < nthreads; i++) {
        ev_sd += ((double)th[i].events - ev_avg) * ((double)th[i].events - ev_avg);
        ex_sd += (th[i].lat_sum - ex_avg) * (th[i].lat_sum - ex_avg);
    }
    ev_sd = sqrt(ev_sd / nthreads);
    ex_sd = sqrt(ex_sd / nthreads);
    o += (size_t)snprintf(pbuf + o, psize - o,
                          "{\"max_prime\":%lld,\"expected_primes\":%llu,\"divisions_per_event\":%llu,"
                          "\"total_events\":%llu,\"total_time_s\":%.9g,\"slices\":%d,\"events_per_thread\":[",
                          max_prime, (unsigned long long)g_expected, (unsigned long long)divs,
                          (unsigned long long)total, total_time, ns);
    for (int i = 0; i < nthreads && o < psize - 64; i++)
        o += (size_t)snprintf(pbuf + o, psize - o, i ? ",%llu" : "%llu", (unsigned long long)th[i].events);
    o += (size_t)snprintf(pbuf + o, psize - o,
                          "],\"events_stddev\":%.6g,\"execution_time_avg_s\":%.9g,\"execution_time_stddev_s\":%.6g,"
                          "\"latency_min_ms\":%.9g,\"latency_avg_ms\":%.9g,\"latency_max_ms\":%.9g,"
                          "\"latency_p95_ms\":%.9g,\"latency_sum_ms\":%.9g}",
                          ev_sd, ex_avg, ex_sd, lat_min * 1e3, lat_sum / (double)total * 1e3, lat_max * 1e3,
                          p95 * 1e3, lat_sum * 1e3);

    cb_result_begin("events_per_s", "events/s", pbuf, rate, len, ns);
    cb_json_num("value", (double)total / total_time);
    cb_json_end();

    cb_result_begin("latency", "ms", pbuf, lat, len, ns);
    cb_json_num("value", lat_sum / (double)total * 1e3);
    cb_json_end();
    return 0;
}
