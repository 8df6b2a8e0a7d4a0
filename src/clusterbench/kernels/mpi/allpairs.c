/* allpairs.c: latency and bandwidth of every pair of ranks (one rank per node), scheduled as a
 * round-robin tournament so that each rank takes part in one pair at a time (`sweep network`).
 *
 * Schedule (the circle method; benchmarks/mpi/allpairs.py has the same rule in Python and checks
 * that the pairing reported here follows it): m = n for an even number of ranks n, m = n + 1 for an
 * odd one (rank n is a "bye"). In round r = 0 .. m-2, rank m-1 meets rank r, and every other rank i
 * meets rank (2r - i) mod (m-1). Every pair meets exactly once, nobody twice in a round: n-1 rounds
 * for even n, n rounds for odd n with one rank idle in each. All pairs of a round measure at once.
 *
 * First a connection pass (every pair exchanges one byte in the schedule's order, untimed). Per
 * round: a barrier, then each pair ping-pongs (the lower rank leads and times, the higher echoes;
 * blocking MPI_Send/MPI_Recv; separate send and receive buffers on each rank, the OSU/IMB/hpcc
 * convention), then rank 0 gathers every rank's figures and prints them. Waiting ranks (an idle
 * rank, a pair that finished first) wait in MPI_Ibarrier/MPI_Igather, testing and sleeping 50 us
 * between tests, so that on an oversubscribed machine (a virtual cluster) they leave the cores to
 * the pairs still measuring. A round (or a connection round) that lasts longer than --round_limit
 * seconds fails the job with an error naming it instead of hanging.
 *
 * Per pair, within --pair_budget seconds (the leader's clock, from the round's barrier):
 *  - latency at --lat_size bytes (8): --warmup round trips untimed, then round trips each timed
 *    (chained MPI_Wtime, as pingpong.c) for --lat_share of the budget (at least --min_iters, at most
 *    --max_iters); the figure is the median half round trip (us); samples: the half round trips,
 *    evenly subsampled to at most --max_samples.
 *  - bandwidth at --bw_size bytes (4 MiB): one or two untimed round trips (the second only when the
 *    first took under a quarter of the remaining budget) estimate the round trip; then up to
 *    --bw_loops (16) loops of k round trips, each loop timed as a whole with no timer call inside
 *    (k chosen so that the loops fill the rest of the budget, at least 1); a loop is not started
 *    when the previous one says it would end past the budget (the first always runs, so a pair
 *    whose one round trip exceeds the budget still yields a figure). The figure is the best loop's
 *    size / half round trip in MB/s = 1e6 B/s (hpcc and NetPIPE report the best of repeated
 *    loops); the mean over all loops is kept too.
 * The end of each phase is a 0-byte message with its own tag (the echoing rank loops until it).
 *
 * --passes=N runs the whole tournament N times (every pair measured N times, in the same rounds; with
 * --pair_cpus each pass moves the pairs to the next core), each record carrying its "pass"; Python
 * keeps the best pass per pair, so a pair that a passing load disturbed once is measured again later.
 *
 * --remeasure=F (0: off): after the passes, rank 0 names the suspect pairs, those whose best pass is
 * more than a factor F from the best pair's (bandwidth below best / F, or latency above best x F), and
 * broadcasts them; then every round of the schedule that holds a suspect runs once more, all its pairs
 * measuring as the first time (suspects measured alone would have the cores, or the switch, to
 * themselves and look faster than the links they are compared with), records with "pass" = passes,
 * "remeasure": true and "suspect". Python weighs each link's measurements against each other before
 * calling it slow (analysis/links.py); a load that passed is not taken for the link.
 *
 * --pair_cpus=LIST (for nodes that share one machine's cores, the virtual cluster): in each round
 * the k-th pair (pairs ordered by their lower rank) moves both its ranks onto cpu LIST[k % len]
 * (sched_setaffinity) before the barrier. A ping-pong keeps one of its two ranks busy at a time,
 * so the pair shares a core without slowing itself, and pairs of a round land on different cores
 * as long as there are enough: otherwise a pair whose ranks sit on two cores, each shared with a
 * rank of another pair, measures its neighbours' traffic as much as its own link. Without it
 * ranks stay where the launcher bound them (real nodes, a core each).
 *
 * Validation (--validate=1, outside the timed loops): before each phase the receive buffers are
 * cleared and the send buffers filled with a pattern of (size, sending rank, round); after it each
 * rank of the pair checks every byte of the last message it received against its partner's pattern.
 * Per round, rank 0 prints one validation record (all pairs of the round) before the round's results;
 * a damaged byte fails the run. --corrupt=1 (test hook) damages rank 0's received bandwidth data in
 * its first pair, so validation must fail.
 *
 * Output (rank 0): the placement info record ({rank, host, node, cpus, cpu} per rank; node = env
 * CB_SIM_NODE on the virtual cluster) with the schedule's size (rounds, pairs); per round one
 * validation record, then one result record per pair:
 *   {"type":"result","metric":"pair","round":r,"ranks":[a,b],"cpus":[..],"hosts":[..],"nodes":[..],
 *    "latency_us":median,"bandwidth_MBps":best loop,"seconds":the pair's time,
 *    "params":{sizes, iterations, loops, min/max/mean latency, mean bandwidth},
 *    "samples":[half round trips, us],"bandwidth_samples":[per loop, MB/s]}
 * ("samples", the protocol's field, carries the latency distribution; the bandwidth loops have
 * their own field); finally {"type":"summary","rounds","pairs","measure_s" (the sum over rounds of
 * the longest pair of the round: the time spent measuring), "rounds_s" (barrier to gathered, summed),
 * "connect_s" (the connection pass), "kernel_s" (the connection pass and the rounds),
 * "remeasure_factor", "suspects", "remeasure_rounds" (rounds measured again), "remeasure_s",
 * "round_measure_s":[..], "round_s":[..]}.
 *
 * A rank that dies of a signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) first says where on stderr, one
 * line "allpairs: rank R of N on NODE (pid P) got SIGNAL (code C, address A) in PHASE, round r of pass p,
 * partner q" and its stack ("allpairs: rank R frame: ..."; when it jumped to a null address, the caller
 * that did so first, and the call's first four arguments), from MPI_Init on (the rank from the launcher's environment until MPI says
 * it), then hands the signal on: to a handler the MPI library installed after it, if any, and the
 * default action, so it still dies of that signal, with a core where they are on. (The SIGSEGV of rank 0
 * seen under srun on the emulated machines, reproduced there in 7 of 70 sweeps, is inside Open MPI 4.1.4's
 * MPI_Init: its TCP BTL's receive handler calls mca_btl_base_active_message_trigger[0x41].cbfunc, ob1's
 * MATCH callback, still null (ob1 registers it in its add_procs), for the first message of ranks 1 and 2
 * (the placement gather): they had left MPI_Init while rank 0 still polled progress before its
 * add_procs. MPI_Init waits for every rank to enter it there (measured), not for that. This kernel's
 * code had not run; ASan, UBSan and valgrind find nothing in it.)
 * --crash_round=R (test hook, -1: none): rank --crash_rank (0) calls a null function pointer in round R.
 *
 * Args: --lat_size=B --bw_size=B --pair_budget=S --lat_share=F --warmup=N --min_iters=N --max_iters=N
 *       --bw_loops=N --max_samples=N --validate=0|1 --corrupt=0|1 --pair_cpus=LIST
 *       --preconnect=0|1 --connect_group=N --round_limit=S --passes=N --remeasure=F
 *       --crash_round=R --crash_rank=R
 */
#include "cb_common.h"
#include "cb_mpi.h"

#include <mpi.h>

#include <execinfo.h>
#include <ucontext.h>

#define TAG_PING 11
#define TAG_STOP 12
#define MAX_SAMPLES 256
#define MAX_LOOPS 16

static int rank, nranks;

#define die cb_mpi_die

/* ---- a crash says where it happened (see the header) ---------------------------------------- */
static struct {
    const char *phase;            /* what the rank was doing */
    int round, pass, partner;     /* -1: not in a round */
    char node[64];
} where = {"starting", -1, -1, -1, ""};
static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NCRASH (int)(sizeof crash_signals / sizeof crash_signals[0])
static struct sigaction crash_old[NCRASH];

/* async-signal-safe output: write(2) only */
static void say(const char *s) { if (write(2, s, strlen(s)) < 0) { /* nothing to do */ } }
static void say_num(long v) {
    char b[24], *e = b + sizeof b, *q = e;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do { *--q = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) *--q = '-';
    if (write(2, q, (size_t)(e - q)) < 0) { /* nothing to do */ }
}
static void say_hex(uintptr_t v) {
    char b[20], *e = b + sizeof b, *q = e;
    do { *--q = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
    *--q = 'x';
    *--q = '0';
    if (write(2, q, (size_t)(e - q)) < 0) { /* nothing to do */ }
}
static void say_frames(void *const *f, int n) {
    for (int i = 0; i < n; i++) {
        say("allpairs: rank ");
        say_num(rank);
        say(" frame: ");
        backtrace_symbols_fd(&f[i], 1, 2); /* "binary(function+offset)[address]\n", no malloc */
    }
}

static void crash_report(int sig, siginfo_t *si, void *ucv) {
    say("allpairs: rank ");
    say_num(rank);
    say(" of ");
    say_num(nranks);
    say(" on ");
    say(where.node);
    say(" (pid ");
    say_num((long)getpid());
    say(") got ");
    say(sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE ? "SIGFPE" : sig == SIGILL ? "SIGILL"
                                                                                              : "SIGABRT");
    say(" (code ");
    say_num(si ? si->si_code : 0);
    say(", address ");
    say_hex(si ? (uintptr_t)si->si_addr : 0);
    say(") in ");
    say(where.phase);
    say(", round ");
    say_num(where.round);
    say(" of pass ");
    say_num(where.pass);
    say(", partner ");
    say_num(where.partner);
    say("\n");
    const ucontext_t *uc = ucv;
    void *pc = NULL, *caller = NULL;
    uintptr_t args[4] = {0, 0, 0, 0}; /* of a call to null: the callee's first arguments */
#if defined(__x86_64__)
    pc = (void *)uc->uc_mcontext.gregs[REG_RIP];
    if ((uintptr_t)pc < 4096) caller = *(void **)uc->uc_mcontext.gregs[REG_RSP]; /* a call to null: its return */
    const int regs[4] = {REG_RDI, REG_RSI, REG_RDX, REG_RCX};
    for (int i = 0; i < 4; i++) args[i] = (uintptr_t)uc->uc_mcontext.gregs[regs[i]];
#elif defined(__aarch64__)
    pc = (void *)uc->uc_mcontext.pc;
    if ((uintptr_t)pc < 4096) caller = (void *)uc->uc_mcontext.regs[30]; /* the link register */
    for (int i = 0; i < 4; i++) args[i] = (uintptr_t)uc->uc_mcontext.regs[i];
#endif
    if (caller) {
        say("allpairs: rank ");
        say_num(rank);
        say(" jumped to ");
        say_hex((uintptr_t)pc);
        say(" with arguments");
        for (int i = 0; i < 4; i++) {
            say(" ");
            say_hex(args[i]);
        }
        say(" from:\n");
        say_frames(&caller, 1);
    }
    void *f[48];
    int n = backtrace(f, 48);
    if (n > 2) say_frames(f + 2, n - 2); /* not this handler's frame and the signal trampoline */
    /* hand it on: the MPI library's handler, if it installed one after ours, then the default action (this
     * handler was installed with SA_RESETHAND): a fault happens again when the handler returns, a
     * signal sent by someone (or abort's) is raised again */
    int i = 0;
    while (i < NCRASH && crash_signals[i] != sig) i++;
    if (i < NCRASH) {
        const struct sigaction *o = &crash_old[i];
        if ((o->sa_flags & SA_SIGINFO) && o->sa_sigaction) o->sa_sigaction(sig, si, ucv);
        else if (!(o->sa_flags & SA_SIGINFO) && o->sa_handler != SIG_DFL && o->sa_handler != SIG_IGN) o->sa_handler(sig);
    }
    signal(sig, SIG_DFL);
    if (!si || si->si_code <= 0 || sig == SIGABRT) raise(sig);
}

/* Before MPI_Init (a crash inside it is reported too; Open MPI then installs no handler of its own, and
 * one the library installs later is handed the signal): rank and size from the launcher's environment
 * until MPI says them. On a stack of its own, so a stack overflow is reported too. */
static void crash_report_again(void);
static int env_int(const char *const *names, int def) {
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) return atoi(v);
    }
    return def;
}
static void crash_report_install(void) {
    static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", NULL};
    rank = env_int(rank_vars, -1);
    nranks = env_int(size_vars, 0);
    static char stack[1 << 16];
    stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    void *warm[2];
    backtrace(warm, 2); /* loads the unwinder now, not in the handler */
    const char *node = getenv("CB_SIM_NODE");
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    snprintf(where.node, sizeof where.node, "%s", node && *node ? node : host);
    crash_report_again();
}
/* After MPI_Init: a handler the library installed meanwhile (UCX's) is handed the signal after ours. */
static void crash_report_again(void) {
    struct sigaction sa, cur;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = crash_report;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NCRASH; i++)
        if (!sigaction(crash_signals[i], NULL, &cur) && cur.sa_sigaction != crash_report)
            sigaction(crash_signals[i], &sa, &crash_old[i]);
}

static void at(const char *phase, int round, int pass, int partner) {
    where.phase = phase;
    where.round = round;
    where.pass = pass;
    where.partner = partner;
}

/* What each rank reports after a round (gathered on rank 0 as bytes). */
typedef struct {
    int partner;  /* -1: idle this round */
    int leader;   /* this rank led the pair (timed it) */
    int bad;      /* 1: latency data, 2: bandwidth data differ from the partner's pattern */
    int nlat, nbw;
    int bw_loops;
    long first_bad;
    long lat_iters, bw_iters;
    double lat_median, lat_min, lat_mean, lat_max; /* half round trip, us */
    double bw_best, bw_mean;                       /* MB/s */
    double seconds;                                /* the pair's measurement, barrier to done */
    int cpu;                                       /* the cpu the rank ran the round on (sched_getcpu) */
    double lat_s[MAX_SAMPLES];
    double bw_s[MAX_LOOPS];
} pair_t;

/* the circle method: rank i's partner in round r of n ranks (-1: idle) */
static int partner_of(int i, int r, int n) {
    int m = n % 2 ? n + 1 : n;
    int p;
    if (i == m - 1) p = r;
    else if (i == r) p = m - 1;
    else p = ((2 * r - i) % (m - 1) + (m - 1)) % (m - 1);
    return p >= n ? -1 : p;
}

/* the index of pair (i, j), i < j, among the n(n-1)/2 pairs */
static long pair_index(int i, int j) {
    return (long)i * (2L * nranks - i - 1) / 2 + (j - i - 1);
}

static inline unsigned char pattern(long size, int src, int round, long i) {
    return (unsigned char)((i * 131 + size * 7 + src * 29 + round * 53 + 1) & 0xff);
}

/* Wait for a nonblocking collective without holding a core: test, and sleep between tests once
 * the first 100 us have passed (ranks that wait leave the cores to the pairs still measuring);
 * without nap_ok (nothing is measured meanwhile) test without sleeping: MPI yields the core.
 * A wait longer than `limit` seconds fails the job with `what` (a connection that MPI could not
 * set up leaves the pair, and so the round, waiting forever). */
static void wait_politely(MPI_Request *req, double limit, const char *what, int round, int nap_ok) {
    int done = 0;
    double t0 = MPI_Wtime();
    const struct timespec nap = {0, 50000};
    for (;;) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        double t = MPI_Wtime() - t0;
        if (t > limit)
            die("%s %d did not end within %.0f s (a pair's MPI connection may have failed: see the MPI library's "
                "warnings)", what, round, limit);
        if (nap_ok && t > 1e-4) nanosleep(&nap, NULL);
    }
}

static void fill(unsigned char *sb, unsigned char *rb, long size, int round, int validate) {
    if (!validate) return;
    for (long i = 0; i < size; i++) sb[i] = pattern(size, rank, round, i);
    memset(rb, 0, (size_t)size);
}

/* the first byte of rb that is not src's pattern, or -1 */
static long check(const unsigned char *rb, long size, int src, int round) {
    for (long i = 0; i < size; i++)
        if (rb[i] != pattern(size, src, round, i)) return i;
    return -1;
}

/* The echoing side of a phase: send back (from this rank's own send buffer) until the stop tag. */
static void echo(unsigned char *sb, unsigned char *rb, int n, int peer) {
    for (;;) {
        MPI_Status st;
        MPI_Recv(rb, n, MPI_BYTE, peer, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == TAG_STOP) return;
        MPI_Send(sb, n, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
    }
}

static inline void round_trip(unsigned char *sb, unsigned char *rb, int n, int peer) {
    MPI_Send(sb, n, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
    MPI_Recv(rb, n, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void stop(int peer) { MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_STOP, MPI_COMM_WORLD); }

typedef struct {
    long lat_size, bw_size;
    double budget, lat_share;
    long warmup, min_iters, max_iters;
    int bw_loops, max_samples, validate, corrupt;
} opts_t;

static double *times, *sorted_times;

static void measure_pair(const opts_t *o, int peer, int round, double t_start, unsigned char *sb,
                         unsigned char *rb, pair_t *me) {
    const int lead = rank < peer;
    me->leader = lead;
    /* ---- latency ---- */
    where.phase = "the latency phase";
    long ls = o->lat_size;
    fill(sb, rb, ls, round, o->validate);
    if (lead) {
        for (long i = 0; i < o->warmup; i++) round_trip(sb, rb, (int)ls, peer);
        double t = MPI_Wtime(), until = t_start + o->lat_share * o->budget;
        long it = 0;
        while (it < o->max_iters && (it < o->min_iters || t < until)) {
            round_trip(sb, rb, (int)ls, peer);
            double e = MPI_Wtime();
            times[it++] = (e - t) * 0.5e6; /* half round trip, us */
            t = e;
        }
        stop(peer);
        double sum = 0;
        for (long i = 0; i < it; i++) { sorted_times[i] = times[i]; sum += times[i]; }
        qsort(sorted_times, (size_t)it, sizeof(double), cb_cmp_double);
        me->lat_iters = it;
        me->lat_min = sorted_times[0];
        me->lat_max = sorted_times[it - 1];
        me->lat_median = it % 2 ? sorted_times[it / 2] : 0.5 * (sorted_times[it / 2 - 1] + sorted_times[it / 2]);
        me->lat_mean = sum / (double)it;
        long m = it < o->max_samples ? it : o->max_samples;
        for (long i = 0; i < m; i++) me->lat_s[i] = times[(long)((double)i * (double)it / (double)m)];
        me->nlat = (int)m;
    } else {
        echo(sb, rb, (int)ls, peer);
    }
    if (o->validate) {
        long b = check(rb, ls, peer, round);
        if (b >= 0) { me->bad = 1; me->first_bad = b; }
    }
    /* ---- bandwidth ---- */
    where.phase = "the bandwidth phase";
    long bs = o->bw_size;
    const int n = (int)bs;
    fill(sb, rb, bs, round, o->validate);
    if (lead) {
        const double end = t_start + o->budget;
        double w0 = MPI_Wtime();
        round_trip(sb, rb, n, peer);
        double rtt = MPI_Wtime() - w0;
        if (rtt < 0.25 * (end - MPI_Wtime())) { /* a second, warmer estimate when it is cheap */
            w0 = MPI_Wtime();
            round_trip(sb, rb, n, peer);
            rtt = MPI_Wtime() - w0;
        }
        double left = end - MPI_Wtime();
        long k = rtt > 0 ? (long)(left / ((double)o->bw_loops * rtt)) : 1;
        if (k < 1) k = 1;
        if (k > o->max_iters) k = o->max_iters;
        double best = 0, total_t = 0, last = 0;
        long total_it = 0;
        int loops = 0;
        for (int l = 0; l < o->bw_loops; l++) {
            if (l > 0 && MPI_Wtime() + last > end) break;
            double b0 = MPI_Wtime();
            for (long j = 0; j < k; j++) round_trip(sb, rb, n, peer);
            last = MPI_Wtime() - b0;
            double half = last / (double)k * 0.5e6; /* us */
            double bw = half > 0 ? (double)bs / half : 0;  /* B/us = MB/s */
            me->bw_s[loops++] = bw;
            if (bw > best) best = bw;
            total_t += last;
            total_it += k;
        }
        stop(peer);
        me->bw_loops = loops;
        me->nbw = loops;
        me->bw_iters = total_it;
        me->bw_best = best;
        me->bw_mean = total_t > 0 ? (double)bs * (double)total_it / (total_t * 0.5e6) : 0;
    } else {
        echo(sb, rb, n, peer);
    }
    if (o->validate) {
        if (o->corrupt && rank == 0 && bs > 0) rb[bs / 2] ^= 0x5a;
        long b = check(rb, bs, peer, round);
        if (b >= 0 && !me->bad) { me->bad = 2; me->first_bad = b; }
    }
}

static int pair_cpus[1024], npair_cpus;

/* --pair_cpus: this rank's cpu in round r (-1: stay), the cpu of its pair's place in the round */
static int round_cpu(int r, int partner, int pass) {
    if (npair_cpus == 0 || partner < 0) return -1;
    int lower = rank < partner ? rank : partner, k = 0;
    for (int i = 0; i < lower; i++) {
        int p = partner_of(i, r, nranks);
        if (p > i) k++;
    }
    return pair_cpus[(k + pass) % npair_cpus];
}

static void info_extra(const void *arg) {
    const opts_t *o = arg;
    if (npair_cpus) cb_json_ints("pair_cpus", pair_cpus, npair_cpus);
    int m = nranks % 2 ? nranks + 1 : nranks;
    cb_json_str("schedule", "circle");
    cb_json_int("rounds", m - 1);
    cb_json_int("pairs", (long long)nranks * (nranks - 1) / 2);
    cb_json_int("lat_size", o->lat_size);
    cb_json_int("bw_size", o->bw_size);
    cb_json_num("pair_budget_s", o->budget);
}

int main(int argc, char **argv) {
    crash_report_install();
    at("MPI_Init", -1, -1, -1);
    cb_mpi_start(&argc, &argv, &rank, &nranks, 1); /* only rank 0 speaks JSON */
    crash_report_again();
    at("the placement report", -1, -1, -1);
    opts_t o;
    o.lat_size = 8;
    o.bw_size = 4L << 20;
    o.budget = 1.0;
    o.lat_share = 0.2;
    o.warmup = 10;
    o.min_iters = 10;
    o.max_iters = 100000;
    o.bw_loops = 16;
    o.max_samples = 64;
    o.validate = 1;
    o.corrupt = 0;
    int preconnect = 1, crash_round = -1, crash_rank = 0;
    const char *pc = NULL;
    CB_OPTIONS(argc, argv, CB_OPT("lat_size", o.lat_size), CB_OPT("bw_size", o.bw_size),
               CB_OPT("pair_budget", o.budget), CB_OPT("lat_share", o.lat_share), CB_OPT("warmup", o.warmup),
               CB_OPT("min_iters", o.min_iters), CB_OPT("max_iters", o.max_iters),
               CB_OPT("bw_loops", o.bw_loops), CB_OPT("max_samples", o.max_samples),
               CB_OPT("validate", o.validate), CB_OPT("corrupt", o.corrupt), CB_OPT("preconnect", preconnect),
               CB_OPT("pair_cpus", pc), CB_OPT("crash_round", crash_round), CB_OPT("crash_rank", crash_rank));
    if (pc) npair_cpus = cb_parse_cpulist(pc, pair_cpus, 1024);

    cb_mpi_report_placement(rank, nranks, info_extra, &o);
    if (nranks < 2) die("allpairs needs 2 or more ranks (one per node), got %d", nranks);
    if (o.lat_size < 1 || o.bw_size < 1 || o.lat_size > (1L << 30) || o.bw_size > (1L << 30))
        die("message sizes must be 1 B .. 1 GiB (lat_size %ld, bw_size %ld)", o.lat_size, o.bw_size);
    if (!(o.budget > 0) || !(o.lat_share > 0 && o.lat_share < 1))
        die("bad budget: pair_budget > 0 and 0 < lat_share < 1");
    if (o.min_iters < 1 || o.max_iters < o.min_iters || o.warmup < 0) die("bad iteration bounds");
    if (o.bw_loops < 1 || o.bw_loops > MAX_LOOPS) die("--bw_loops must be 1..%d", MAX_LOOPS);
    if (o.max_samples < 1 || o.max_samples > MAX_SAMPLES) die("--max_samples must be 1..%d", MAX_SAMPLES);

    long maxb = o.lat_size > o.bw_size ? o.lat_size : o.bw_size;
    unsigned char *sb = cb_alloc((size_t)maxb, -1), *rb = cb_alloc((size_t)maxb, -1);
    times = malloc(sizeof(double) * (size_t)o.max_iters);
    sorted_times = malloc(sizeof(double) * (size_t)o.max_iters);
    char (*names)[2][CB_HOST_LEN] = NULL; /* host, node of every rank (rank 0) */
    pair_t *all = NULL;
    char mine[2][CB_HOST_LEN];
    memset(mine, 0, sizeof mine);
    gethostname(mine[0], CB_HOST_LEN - 1);
    const char *node = getenv("CB_SIM_NODE");
    snprintf(mine[1], CB_HOST_LEN, "%s", node && *node ? node : mine[0]);
    if (rank == 0) {
        names = calloc((size_t)nranks, sizeof *names);
        all = calloc((size_t)nranks, sizeof *all);
    }
    if (!sb || !rb || !times || !sorted_times || (rank == 0 && (!names || !all)))
        die("out of memory for %ld-byte buffers", maxb);
    memset(sb, 0, (size_t)maxb);
    memset(rb, 0, (size_t)maxb);
    at("gathering the host names", -1, -1, -1);
    MPI_Gather(mine, (int)sizeof mine, MPI_BYTE, names, (int)sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);

    const int m = nranks % 2 ? nranks + 1 : nranks;
    const int rounds = m - 1;
    /* Connections first, outside the timing: every pair exchanges one byte, round by round in the
     * schedule's order (at most --connect_group pairs at a time; default: a whole round), so that MPI's
     * lazy connection set-up (and the first ARP exchange of the two nodes) is neither timed nor mixed
     * with other pairs' streaming, and a connection that cannot be made fails here, named, within
     * --round_limit seconds, rather than leave the job hung (Open MPI's TCP BTL waits forever on a
     * connect that failed, e.g. when the kernel's neighbour table overflowed). */
    int passes = 1;
    CB_OPTIONS(argc, argv, CB_OPT("passes", passes));
    if (passes < 1 || passes > 100) die("--passes must be 1..100");
    const int steps_total = passes * rounds;
    /* --remeasure=F: after the passes, the rounds that hold a suspect pair (best bandwidth below the
     * best pair's / F, or best latency above the best pair's x F) are measured once more */
    double remeasure = 0.0;
    CB_OPTIONS(argc, argv, CB_OPT("remeasure", remeasure));
    if (remeasure != 0 && !(remeasure >= 1)) die("--remeasure must be 0 (off) or 1 or more, got %g", remeasure);
    const long npairs_all = (long)nranks * (nranks - 1) / 2;
    double *best_bw = NULL, *best_lat = NULL;
    char *suspect = NULL;
    int *again = NULL, nagain = 0;
    long nsuspect = 0;
    if (remeasure > 0) {
        suspect = calloc((size_t)npairs_all, 1);
        again = calloc((size_t)rounds, sizeof(int));
        if (rank == 0) {
            best_bw = calloc((size_t)npairs_all, sizeof(double));
            best_lat = calloc((size_t)npairs_all, sizeof(double));
        }
        if (!suspect || !again || (rank == 0 && (!best_bw || !best_lat))) die("out of memory for %ld pairs", npairs_all);
    }
    double *round_measure = calloc((size_t)(steps_total + rounds), sizeof(double));
    double *round_wall = calloc((size_t)(steps_total + rounds), sizeof(double));
    if (!round_measure || !round_wall) die("out of memory");
    double round_limit = 60.0 + 20.0 * o.budget;
    int group = nranks / 2 > 0 ? nranks / 2 : 1;
    CB_OPTIONS(argc, argv, CB_OPT("round_limit", round_limit), CB_OPT("connect_group", group));
    if (group < 1) die("--connect_group must be 1 or more");
    const double k0 = MPI_Wtime();
    if (preconnect) {
        for (int r = 0; r < rounds; r++) {
            int p = partner_of(rank, r, nranks);
            int k = 0; /* my pair's place in the round (pairs ordered by their lower rank) */
            if (p >= 0) {
                int lower = rank < p ? rank : p;
                for (int i = 0; i < lower; i++) if (partner_of(i, r, nranks) > i) k++;
            }
            at("the connection pass", r, -1, p);
            const int steps = (nranks / 2 + group - 1) / group;
            for (int st = 0; st < steps; st++) {
                MPI_Request req;
                MPI_Ibarrier(MPI_COMM_WORLD, &req);
                wait_politely(&req, round_limit, "connecting round", r, 0);
                if (p < 0 || k / group != st) continue;
                if (rank < p) round_trip(sb, rb, 1, p);
                else {
                    MPI_Recv(rb, 1, MPI_BYTE, p, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sb, 1, MPI_BYTE, p, TAG_PING, MPI_COMM_WORLD);
                }
            }
        }
    }
    long npairs = 0;
    const double connect_s = MPI_Wtime() - k0;
    double remeasure_s = 0;
    for (int q = 0;; q++) {
        if (q == steps_total && remeasure > 0) {
            /* rank 0 named the suspects after the last pass: every rank learns them, and which rounds
             * hold one */
            MPI_Bcast(suspect, (int)npairs_all, MPI_CHAR, 0, MPI_COMM_WORLD);
            for (long x = 0; x < npairs_all; x++) nsuspect += suspect[x] != 0;
            for (int rr = 0; rr < rounds; rr++) {
                int any = 0;
                for (int i = 0; i < nranks && !any; i++) {
                    int p = partner_of(i, rr, nranks);
                    any = p > i && suspect[pair_index(i, p)];
                }
                if (any) again[nagain++] = rr;
            }
        }
        if (q >= steps_total + nagain) break;
        const int again_step = q >= steps_total;
        const int r = again_step ? again[q - steps_total] : q % rounds, pass = again_step ? passes : q / rounds;
        pair_t me;
        memset(&me, 0, sizeof me);
        me.partner = partner_of(rank, r, nranks);
        me.first_bad = -1;
        int cpu = round_cpu(r, me.partner, pass);
        if (cpu >= 0 && cb_pin_self(cpu)) die("rank %d cannot move to cpu %d for round %d", rank, cpu, r);
        me.cpu = sched_getcpu();
        at("the barrier before the round", r, pass, me.partner);
        MPI_Request req;
        double r0 = MPI_Wtime();
        MPI_Ibarrier(MPI_COMM_WORLD, &req);
        wait_politely(&req, round_limit, "the barrier before round", r, 1);
        if (q == r && r == crash_round && rank == crash_rank) { /* the test hook: a call to null */
            void (*volatile null_fn)(void) = NULL;
            null_fn();
        }
        double t0 = MPI_Wtime();
        if (me.partner >= 0) measure_pair(&o, me.partner, r, t0, sb, rb, &me);
        me.seconds = MPI_Wtime() - t0;
        if (me.partner >= 0) o.corrupt = 0; /* the hook damages one pair only */
        where.phase = "gathering the round";
        MPI_Igather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
        wait_politely(&req, round_limit, "round", r, 1);
        if (rank != 0) continue;
        where.phase = "printing the round";
        round_wall[q] = MPI_Wtime() - r0;
        /* check what the ranks say against each other, then one validation record for the round */
        int bad = 0, pairs = 0;
        char detail[512];
        detail[0] = 0;
        for (int i = 0; i < nranks; i++) {
            int p = all[i].partner;
            if (p != partner_of(i, r, nranks) || (p >= 0 && all[p].partner != i))
                die("round %d: rank %d reports partner %d, the schedule says %d", r, i, p, partner_of(i, r, nranks));
            if (p < 0) continue;
            if (all[i].bad && !bad) {
                bad = 1;
                snprintf(detail, sizeof detail, "round %d: the %s data rank %d received from rank %d differs from "
                         "the pattern at byte %ld", r, all[i].bad == 1 ? "latency" : "bandwidth", i, p,
                         all[i].first_bad);
            }
            if (i < p) {
                pairs++;
                if (all[i].seconds > round_measure[q]) round_measure[q] = all[i].seconds;
            }
        }
        if (!bad)
            snprintf(detail, sizeof detail, o.validate ? "round %d: %d pair(s), every byte of the last %ld B and %ld B "
                     "messages intact on both ranks" : "round %d: %d pair(s), data not checked (validate=0)",
                     r, pairs, o.lat_size, o.bw_size);
        cb_json_begin("validation");
        cb_json_bool("ok", !bad);
        cb_json_bool("checked", o.validate);
        cb_json_str("detail", detail);
        cb_json_end();
        for (int i = 0; i < nranks; i++) {
            const pair_t *a = &all[i];
            if (a->partner < 0 || i > a->partner) continue;
            const int j = a->partner;
            char params[768];
            snprintf(params, sizeof params,
                     "{\"lat_size\":%ld,\"bw_size\":%ld,\"latency_iterations\":%ld,\"latency_min_us\":%.9g,"
                     "\"latency_mean_us\":%.9g,\"latency_max_us\":%.9g,\"bandwidth_loops\":%d,"
                     "\"bandwidth_iterations\":%ld,\"bandwidth_mean_MBps\":%.9g,\"pair_budget_s\":%.9g}",
                     o.lat_size, o.bw_size, a->lat_iters, a->lat_min, a->lat_mean, a->lat_max, a->bw_loops,
                     a->bw_iters, a->bw_mean, o.budget);
            int rk[2] = {i, j};
            cb_json_begin("result");
            cb_json_str("metric", "pair");
            cb_json_int("round", r);
            cb_json_int("pass", pass);
            if (again_step) {
                cb_json_bool("remeasure", 1);
                cb_json_bool("suspect", suspect[pair_index(i, j)]);
            }
            cb_json_ints("ranks", rk, 2);
            int cpus[2] = {a->cpu, all[j].cpu};
            cb_json_ints("cpus", cpus, 2);
            cb_json_str_pair("hosts", names[i][0], names[j][0]);
            cb_json_str_pair("nodes", names[i][1], names[j][1]);
            cb_json_num("latency_us", a->lat_median);
            cb_json_num("bandwidth_MBps", a->bw_best);
            cb_json_num("seconds", a->seconds);
            cb_json_raw("params", params);
            cb_json_nums("samples", a->lat_s, a->nlat);
            cb_json_nums("bandwidth_samples", a->bw_s, a->nbw);
            cb_json_end();
            if (!again_step) npairs++;
            if (best_bw && !again_step) {
                long x = pair_index(i, j);
                if (pass == 0 || a->bw_best > best_bw[x]) best_bw[x] = a->bw_best;
                if (pass == 0 || a->lat_median < best_lat[x]) best_lat[x] = a->lat_median;
            }
        }
        if (again_step) remeasure_s += round_measure[q];
        if (q == steps_total - 1 && remeasure > 0) {
            /* the passes are done: rank 0 names the suspects, every rank learns them */
            double top_bw = 0, low_lat = 0;
            for (long x = 0; x < npairs_all; x++) {
                if (best_bw[x] > top_bw) top_bw = best_bw[x];
                if (x == 0 || best_lat[x] < low_lat) low_lat = best_lat[x];
            }
            for (long x = 0; x < npairs_all; x++)
                suspect[x] = best_bw[x] * remeasure < top_bw || best_lat[x] > low_lat * remeasure;
        }
    }
    at("the summary", -1, -1, -1);
    if (rank == 0) {
        double measure = 0, walls = 0;
        for (int q = 0; q < steps_total + nagain; q++) { measure += round_measure[q]; walls += round_wall[q]; }
        cb_json_begin("summary");
        cb_json_int("rounds", rounds);
        cb_json_int("passes", passes);
        cb_json_int("pairs", npairs);
        cb_json_int("nranks", nranks);
        cb_json_num("measure_s", measure);
        cb_json_num("rounds_s", walls);
        cb_json_num("connect_s", connect_s);
        cb_json_num("remeasure_factor", remeasure);
        cb_json_int("suspects", nsuspect);
        cb_json_int("remeasure_rounds", nagain);
        cb_json_num("remeasure_s", remeasure_s);
        cb_json_num("kernel_s", MPI_Wtime() - k0);
        cb_json_nums("round_measure_s", round_measure, steps_total + nagain);
        cb_json_nums("round_s", round_wall, steps_total + nagain);
        cb_json_end();
    }
    at("finishing (MPI_Finalize)", -1, -1, -1);
    cb_mpi_finish(rank, -1);
    return 0;
}
