/* randomaccess.c: HPC Challenge RandomAccess (GUPS), written afresh for clusterbench.
 *
 * The table: 2^k 64-bit words, T[i] = i at the start. The updates: T[idx(v)] ^= v for the values v
 * of a 64-bit random stream, four updates per table word (HPCC's count).
 *   standard: v_{m+1} = v_m * x mod (x^64 + x^2 + x + 1) over GF(2), i.e. shift left by one and
 *             xor 7 when the bit shifted out was set; v_0 = 1; idx(v) = v mod 2^k (the low bits).
 *   lcg:      v_{m+1} = 6364136223846793005 v_m + 1 mod 2^64; v_0 = 1; idx(v) = v >> (64 - k) (the
 *             high bits).
 * Update m uses v_{m+1}. Any stream position is reached directly (start_at: x^m by square-and-
 * multiply in GF(2)[x]; the LCG's affine map composed by doubling), so the work splits into
 * independent stretches of the one stream.
 *
 * Modes:
 *   local (single: one rank; star: every rank its own table, concurrently, barrier before each
 *          sample): each rank's 4 * 2^k updates as 128 interleaved stretches of the stream (the
 *          cache misses of 128 independent updates overlap), the table entries touched by the
 *          next round prefetched while this round's are updated.
 *   mpi:   one table of 2^k words spread over the ranks in contiguous blocks; rank r makes its
 *          share of the 4 * 2^k updates from its stretch of the stream and routes each to the
 *          rank that owns idx(v): HPCC's rules, at most 1024 updates generated ahead of sending
 *          (look-ahead) per rank, bucketed by owner, each round's buckets sent while the previous
 *          round's arrivals are applied (see update_mpi).
 * HPCC's error rule: the updates are not atomic in HPCC's implementations, so up to 1% of table
 * words may end wrong; more fails the run.
 *
 * Verification (after the timed samples, an independent path): the table is initialised again
 * and the timed algorithm applied once, then the whole stream is replayed from v_0 one update at
 * a time in order (mpi: every rank replays all updates and applies those it owns; no message),
 * undoing every update (xor is its own inverse); the words differing from their index are the
 * errors, reported and judged against 1% of the table.
 *
 * Figures: GUPS = updates / seconds / 1e9 per sample (local: per rank over its own time; rank 0
 * prints every rank's; mpi: all updates over the slowest rank's time). --samples timed passes,
 * each on a freshly initialised table (initialisation not timed).
 *
 * Args: --mode=local|mpi --variant=standard|lcg --log2=K (table words per rank in local mode,
 *       of the whole table in mpi mode) --samples=N --selftest=1 (one pass, print a checksum of
 *       the table) --corrupt=1 (test hook: 2% of the words flipped before verification)
 * Output (rank 0): info, validation {ok, detail, errors, errors_all_ranks, allowed_errors,
 *       table_words}, then (when it passed) one result {metric "gups", "samples" (all ranks
 *       together), mpi: "times_s" (the slowest rank's); local: "per_rank" and "times_per_rank" (a
 *       list of samples per rank); "errors", "allowed_errors", "verify_s"}. Local mode judges the
 *       worst rank's table.
 */
#include "cb_common.h"
#include "cb_mpi.h"

#include <inttypes.h>
#include <mpi.h>

#define POLY 0x7ull
#define LCG_MUL 6364136223846793005ull
#define LCG_ADD 1ull
#define STREAMS 128
#ifndef LOOKAHEAD
#define LOOKAHEAD 1024
#endif

static int rank, nranks, lcg, logsize;

static inline uint64_t next_std(uint64_t v) { return (v << 1) ^ ((int64_t)v < 0 ? POLY : 0); }
static inline uint64_t next_lcg(uint64_t v) { return LCG_MUL * v + LCG_ADD; }

/* a * b in GF(2)[x] / (x^64 + x^2 + x + 1) */
static uint64_t gf_mul(uint64_t a, uint64_t b) {
    uint64_t r = 0;
    for (int i = 63; i >= 0; i--) {
        r = next_std(r);
        if ((b >> i) & 1) r ^= a;
    }
    return r;
}

/* v_m of the stream (v_0 = 1) */
static uint64_t start_at(uint64_t m) {
    if (lcg) { /* v_m = A^m(1) with A(v) = mul v + add; compose the affine maps by doubling */
        uint64_t mul = LCG_MUL, add = LCG_ADD, v = 1;
        for (; m; m >>= 1) {
            if (m & 1) v = mul * v + add;
            add = mul * add + add;
            mul *= mul;
        }
        return v;
    }
    uint64_t r = 1, base = 2; /* x^m: square and multiply */
    for (; m; m >>= 1) {
        if (m & 1) r = gf_mul(r, base);
        base = gf_mul(base, base);
    }
    return r;
}

static uint64_t table_words, local_words, local_first; /* mpi: this rank's block [first, first + words) */
static uint64_t base_words, rem_words;                    /* mpi: block sizes */

static inline uint64_t gidx(uint64_t v) { return lcg ? v >> (64 - logsize) : v & (table_words - 1); }
static inline int owner(uint64_t g) {
    uint64_t cut = rem_words * (base_words + 1);
    return g < cut ? (int)(g / (base_words + 1)) : (int)(rem_words + (g - cut) / base_words);
}

static void init_table(uint64_t *t) {
    for (uint64_t i = 0; i < local_words; i++) t[i] = local_first + i;
}

/* local mode: n updates from stream position first, as STREAMS interleaved stretches */
static void update_local(uint64_t *t, uint64_t first, uint64_t n) {
    uint64_t v[STREAMS];
    uint64_t per = n / STREAMS;
    for (int j = 0; j < STREAMS; j++) v[j] = start_at(first + per * (uint64_t)j);
    const uint64_t mask = table_words - 1;
    const int sh = 64 - logsize;
    if (lcg) {
        for (uint64_t i = 0; i < per; i++) {
            for (int j = 0; j < STREAMS; j++) {
                v[j] = next_lcg(v[j]);
                __builtin_prefetch(&t[v[j] >> sh], 1, 0);
            }
            for (int j = 0; j < STREAMS; j++) t[v[j] >> sh] ^= v[j];
        }
    } else {
        for (uint64_t i = 0; i < per; i++) {
            for (int j = 0; j < STREAMS; j++) {
                v[j] = next_std(v[j]);
                __builtin_prefetch(&t[v[j] & mask], 1, 0);
            }
            for (int j = 0; j < STREAMS; j++) t[v[j] & mask] ^= v[j];
        }
    }
    /* the remainder (n not a multiple of STREAMS) continues after the last stretch */
    uint64_t u = start_at(first + per * STREAMS);
    for (uint64_t i = per * STREAMS; i < n; i++) {
        u = lcg ? next_lcg(u) : next_std(u);
        t[gidx(u)] ^= u;
    }
}

/* mpi mode: this rank's n updates from stream position first, routed to their owners. Round r
 * generates at most LOOKAHEAD updates, applies those this rank owns and sends each other rank its
 * bucket (possibly empty) with a nonblocking send; the buckets received for round r - 1 are
 * applied after round r is sent, so one exchange is in flight while the next is generated. Two
 * buffer sets alternate; messages of one sender arrive in round order (MPI's non-overtaking rule,
 * receives posted in round order). */
static uint64_t *sendbuf[2], *recvbuf[2]; /* send: LOOKAHEAD words by destination; recv: LOOKAHEAD per source */
static int *scount, *sdispl;
static MPI_Request *sreq[2], *rreq[2];

static void apply_owned(uint64_t *t, const uint64_t *v, int n) {
    for (int i = 0; i < n; i++) {
        if (i + 8 < n) __builtin_prefetch(&t[gidx(v[i + 8]) - local_first], 1, 0);
        t[gidx(v[i]) - local_first] ^= v[i];
    }
}

static void post_recvs(int par) {
    for (int p = 0; p < nranks; p++)
        if (p == rank) rreq[par][p] = MPI_REQUEST_NULL;
        else MPI_Irecv(recvbuf[par] + (size_t)p * LOOKAHEAD, LOOKAHEAD, MPI_UINT64_T, p, 7, MPI_COMM_WORLD, &rreq[par][p]);
}

static void drain_recvs(uint64_t *t, int par) {
    for (int k = 0; k < nranks - 1; k++) {
        int p, cnt;
        MPI_Status st;
        MPI_Waitany(nranks, rreq[par], &p, &st);
        MPI_Get_count(&st, MPI_UINT64_T, &cnt);
        apply_owned(t, recvbuf[par] + (size_t)p * LOOKAHEAD, cnt);
    }
}

static void update_mpi(uint64_t *t, uint64_t first, uint64_t n, uint64_t rounds) {
    uint64_t v = start_at(first), done = 0;
    static uint64_t batch[LOOKAHEAD], mine[LOOKAHEAD];
    static int dest[LOOKAHEAD];
    post_recvs(0);
    if (rounds > 1) post_recvs(1);
    for (uint64_t r = 0; r < rounds; r++) {
        int par = (int)(r & 1);
        MPI_Waitall(nranks, sreq[par], MPI_STATUSES_IGNORE); /* round r - 2's buffers are free */
        int m = n - done < LOOKAHEAD ? (int)(n - done) : LOOKAHEAD, own = 0;
        memset(scount, 0, (size_t)nranks * sizeof(int));
        for (int i = 0; i < m; i++) {
            v = lcg ? next_lcg(v) : next_std(v);
            batch[i] = v;
            dest[i] = owner(gidx(v));
            scount[dest[i]]++;
        }
        done += (uint64_t)m;
        for (int p = 0, s = 0; p < nranks; p++) { sdispl[p] = s; s += scount[p]; }
        uint64_t *sb = sendbuf[par];
        for (int i = 0; i < m; i++) {
            if (dest[i] == rank) mine[own++] = batch[i];
            else sb[sdispl[dest[i]]++] = batch[i];
        }
        for (int p = 0; p < nranks; p++) {
            sdispl[p] -= scount[p];
            if (p == rank) sreq[par][p] = MPI_REQUEST_NULL;
            else MPI_Isend(sb + sdispl[p], scount[p], MPI_UINT64_T, p, 7, MPI_COMM_WORLD, &sreq[par][p]);
        }
        apply_owned(t, mine, own);
        if (r >= 1) {
            drain_recvs(t, par ^ 1);
            if (r + 1 < rounds) post_recvs(par ^ 1);
        }
    }
    if (rounds) drain_recvs(t, (int)((rounds - 1) & 1));
    for (int par = 0; par < 2; par++) MPI_Waitall(nranks, sreq[par], MPI_STATUSES_IGNORE);
}

/* the whole stream from v_0, in order, one update at a time, on the words this rank holds */
static void replay(uint64_t *t, uint64_t updates) {
    uint64_t v = 1, end = local_first + local_words;
    for (uint64_t m = 0; m < updates; m++) {
        v = lcg ? next_lcg(v) : next_std(v);
        uint64_t g = gidx(v);
        if (g >= local_first && g < end) t[g - local_first] ^= v;
    }
}

int main(int argc, char **argv) {
    cb_mpi_start(&argc, &argv, &rank, &nranks, 0);
    const char *mode = "local", *variant = "standard";
    logsize = 20;
    int samples = 1;
    int selftest = 0, corrupt = 0;
    CB_OPTIONS(argc, argv, CB_OPT("mode", mode), CB_OPT("variant", variant), CB_OPT("log2", logsize),
               CB_OPT("samples", samples), CB_OPT("selftest", selftest), CB_OPT("corrupt", corrupt));
    int mpi = strcmp(mode, "mpi") == 0;
    if (!mpi && strcmp(mode, "local") != 0) cb_mpi_die("--mode must be local or mpi, not %s", mode);
    if (strcmp(variant, "standard") && strcmp(variant, "lcg")) cb_mpi_die("--variant must be standard or lcg");
    lcg = strcmp(variant, "lcg") == 0;
    if (logsize < 4 || logsize > 48) cb_mpi_die("--log2 must be between 4 and 48");
    if (samples < 1) cb_mpi_die("--samples must be 1 or more");
    table_words = 1ull << logsize;
    if (mpi) {
        if ((uint64_t)nranks > table_words / 16) cb_mpi_die("the table of 2^%d words is too small for %d ranks", logsize, nranks);
        base_words = table_words / (uint64_t)nranks;
        rem_words = table_words % (uint64_t)nranks;
        local_words = base_words + ((uint64_t)rank < rem_words);
        local_first = (uint64_t)rank * base_words + ((uint64_t)rank < rem_words ? (uint64_t)rank : rem_words);
    } else {
        local_words = table_words;
        local_first = 0;
    }
    uint64_t updates = 4 * table_words; /* HPCC: four per word (per rank's table in local mode) */
    uint64_t my_first = 0, my_n = updates, rounds = 0;
    if (mpi) { /* this rank's stretch of the stream */
        uint64_t b = updates / (uint64_t)nranks, rm = updates % (uint64_t)nranks;
        my_n = b + ((uint64_t)rank < rm);
        my_first = (uint64_t)rank * b + ((uint64_t)rank < rm ? (uint64_t)rank : rm);
        rounds = (b + (rm ? 1 : 0) + LOOKAHEAD - 1) / LOOKAHEAD;
        int bad = 0;
        for (int par = 0; par < 2; par++) {
            sendbuf[par] = malloc(LOOKAHEAD * sizeof(uint64_t));
            recvbuf[par] = malloc((size_t)nranks * LOOKAHEAD * sizeof(uint64_t));
            sreq[par] = malloc((size_t)nranks * sizeof(MPI_Request));
            rreq[par] = malloc((size_t)nranks * sizeof(MPI_Request));
            bad |= !sendbuf[par] || !recvbuf[par] || !sreq[par] || !rreq[par];
            if (sreq[par]) for (int p = 0; p < nranks; p++) sreq[par][p] = MPI_REQUEST_NULL;
        }
        scount = calloc((size_t)nranks, sizeof(int));
        sdispl = calloc((size_t)nranks, sizeof(int));
        if (bad || !scount || !sdispl) cb_mpi_die("out of memory");
    }
    uint64_t *t = cb_alloc(local_words * sizeof *t, 1);
    if (!t) cb_mpi_die("cannot allocate the table (%.2f GiB on rank %d)", (double)local_words * 8 / (1 << 30), rank);
    init_table(t); /* touch every page before the placement report: allocation not timed */
    cb_mpi_report_placement(rank, nranks, NULL, NULL);

    if (selftest) { /* one pass, then sum over words of (T[g] ^ g) * (g % 7 + 1) mod 2^64 */
        if (mpi) update_mpi(t, my_first, my_n, rounds);
        else update_local(t, 0, updates);
        uint64_t s = 0, gs = 0;
        for (uint64_t i = 0; i < local_words; i++) {
            uint64_t g = local_first + i;
            s += (t[i] ^ g) * (g % 7 + 1);
        }
        MPI_Reduce(&s, &gs, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            char hex[32];
            snprintf(hex, sizeof hex, "%016" PRIx64, gs);
            cb_json_begin("selftest");
            cb_json_str("checksum", hex);
            cb_json_int("updates", (long long)updates);
            cb_json_end();
        }
        return cb_mpi_finish(rank, -1);
    }

    double *mine = calloc((size_t)samples, sizeof(double)), *all = calloc((size_t)samples * (size_t)nranks, sizeof(double));
    if (!mine || !all) cb_mpi_die("out of memory");
    for (int s = 0; s < samples; s++) {
        init_table(t);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (mpi) update_mpi(t, my_first, my_n, rounds);
        else update_local(t, 0, updates);
        mine[s] = MPI_Wtime() - t0;
    }
    MPI_Gather(mine, samples, MPI_DOUBLE, all, samples, MPI_DOUBLE, 0, MPI_COMM_WORLD);

    /* verification: the timed algorithm once more, then the whole stream replayed in order */
    init_table(t);
    if (mpi) update_mpi(t, my_first, my_n, rounds);
    else update_local(t, 0, updates);
    if (corrupt) /* test hook: 2% of the words flipped */
        for (uint64_t i = 0; i < local_words; i += 50) t[i] ^= 1;
    double tv = MPI_Wtime();
    replay(t, updates);
    long long err = 0, gerr = 0;
    for (uint64_t i = 0; i < local_words; i++) err += t[i] != local_first + i;
    tv = MPI_Wtime() - tv;
    /* errors: mpi counts one table; local mode judges each rank's own table */
    long long worst = 0;
    MPI_Reduce(&err, &gerr, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&err, &worst, 1, MPI_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        long long judged = mpi ? gerr : worst;
        long long allowed = (long long)(table_words / 100);
        char detail[256];
        snprintf(detail, sizeof detail, "%lld of %llu table words wrong after replaying the updates%s, %s HPCC's "
                 "1%% (%lld)", judged, (unsigned long long)table_words, mpi ? "" : " (the worst rank's table)",
                 judged > allowed ? "above" : "within", allowed);
        cb_validation_begin(judged <= allowed, detail);
        cb_json_int("errors", judged);
        cb_json_int("errors_all_ranks", gerr);
        cb_json_int("allowed_errors", allowed);
        cb_json_int("table_words", (long long)table_words);
        cb_json_int("updates", (long long)updates);
        cb_json_num("verify_s", tv);
        cb_json_end();
        if (judged > allowed) cb_mpi_die("verification failed: %s", detail);
        cb_json_begin("result");
        cb_json_str("metric", "gups");
        if (mpi) { /* all updates over the slowest rank's time */
            double *g = malloc((size_t)samples * sizeof(double)), *ts = malloc((size_t)samples * sizeof(double));
            for (int s = 0; s < samples; s++) {
                double mx = 0;
                for (int r = 0; r < nranks; r++) if (all[r * samples + s] > mx) mx = all[r * samples + s];
                ts[s] = mx;
                g[s] = (double)updates / mx / 1e9;
            }
            cb_json_nums("samples", g, samples);
            cb_json_nums("times_s", ts, samples);
            free(g);
            free(ts);
        } else { /* per rank: its own updates over its own time; samples: their sum */
            double *g = calloc((size_t)samples, sizeof(double));
            for (int s = 0; s < samples; s++)
                for (int r = 0; r < nranks; r++) g[s] += (double)updates / all[r * samples + s] / 1e9;
            cb_json_nums("samples", g, samples);
            free(g);
            for (int pass = 0; pass < 2; pass++) {
                cb_json_key(pass ? "times_per_rank" : "per_rank");
                putchar('[');
                for (int r = 0; r < nranks; r++) {
                    fputs(r ? ",[" : "[", stdout);
                    for (int s = 0; s < samples; s++) {
                        double x = all[r * samples + s];
                        printf(s ? ",%.17g" : "%.17g", pass ? x : (double)updates / x / 1e9);
                    }
                    putchar(']');
                }
                putchar(']');
            }
        }
        cb_json_int("updates", (long long)updates);
        cb_json_int("errors", judged);
        cb_json_int("allowed_errors", allowed);
        cb_json_num("verify_s", tv);
        cb_json_end();
    }
    free(t);
    return cb_mpi_finish(rank, -1);
}
