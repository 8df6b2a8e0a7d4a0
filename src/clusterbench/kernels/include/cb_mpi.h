/* cb_mpi.h: what every clusterbench MPI kernel shares (include after mpi.h and cb_common.h).
 *
 * cb_mpi_report_placement(): every rank reports its host, its virtual-cluster node (CB_SIM_NODE,
 * set by the sim-cluster's launch agent: the nodes share one host name), the cpus it may run on
 * and the cpu it runs on; rank 0 prints them as one info record before any timing, so Python can
 * refuse a run whose placement differs from the one asked for. */
#ifndef CB_MPI_H
#define CB_MPI_H
#include <mpi.h>

#include <errno.h>

/* Fail the whole job: rank 0 prints a JSON error record, other ranks a line on stderr
 * (only rank 0's stdout is read), then MPI_Abort so no rank is left waiting. */
static inline void cb_mpi_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static inline void cb_mpi_die(const char *fmt, ...) {
    CB_VFORMAT(msg, fmt);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        cb_json_error(msg);
    } else {
        fprintf(stderr, "%s rank %d: %s\n", program_invocation_short_name, rank, msg);
    }
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Start MPI and learn this rank and the job's size. quiet_others: ranks other than 0 send their
 * stdout to /dev/null (only rank 0 speaks JSON; another rank's error goes to stderr). */
static inline void cb_mpi_start(int *argc, char ***argv, int *rank, int *nranks, int quiet_others) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, nranks);
    if (quiet_others && *rank != 0 && !freopen("/dev/null", "w", stdout)) { /* nothing is printed anyway */ }
}

static inline int cb_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define CB_HOST_LEN 256
#define CB_CPUS_LEN 1024

typedef struct {
    char host[CB_HOST_LEN];
    char node[CB_HOST_LEN];
    char cpus[CB_CPUS_LEN];
    int cpu;
} cb_place_t;

/* The affinity mask as a cpu list, e.g. "0-3,8". */
static inline void cb_affinity_list(char *out, size_t len) {
    cpu_set_t set;
    out[0] = 0;
    if (sched_getaffinity(0, sizeof set, &set)) return;
    size_t n = 0;
    for (int c = 0; c < CPU_SETSIZE && n + 16 < len; c++) {
        if (!CPU_ISSET(c, &set)) continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set)) e++;
        n += (size_t)snprintf(out + n, len - n, n ? ",%d" : "%d", c);
        if (e > c) n += (size_t)snprintf(out + n, len - n, "-%d", e);
        c = e;
    }
}

/* The cpus a rank reports, snapshotted by cb_mpi_snapshot_cpus() before a threaded library (an
 * OpenMP BLAS with OMP_PROC_BIND) narrows the main thread to the first of its places; empty: read
 * at report time. */
static char cb_mpi_cpus_snapshot[CB_CPUS_LEN];
static inline void cb_mpi_snapshot_cpus(void) { cb_affinity_list(cb_mpi_cpus_snapshot, CB_CPUS_LEN); }

/* Collective: gather every rank's placement; rank 0 prints {"type":"info", "nranks", [fields the
 * kernel adds through extra(arg)], "mpi_library", "timer_resolution_s", "wtick_s",
 * "ranks":[{"rank","host","node","cpus","cpu"}...]}. extra may be NULL. */
static inline void cb_mpi_report_placement(int rank, int nranks, void (*extra)(const void *), const void *arg) {
    cb_place_t me;
    memset(&me, 0, sizeof me);
    gethostname(me.host, CB_HOST_LEN - 1);
    const char *node = getenv("CB_SIM_NODE");
    snprintf(me.node, CB_HOST_LEN, "%s", node ? node : "");
    if (cb_mpi_cpus_snapshot[0]) snprintf(me.cpus, CB_CPUS_LEN, "%s", cb_mpi_cpus_snapshot);
    else cb_affinity_list(me.cpus, CB_CPUS_LEN);
    me.cpu = sched_getcpu();
    cb_place_t *all = rank == 0 ? calloc((size_t)nranks, sizeof *all) : NULL;
    if (rank == 0 && !all) {
        cb_json_error("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank != 0) return;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = 0;
    double t0, t1, res = 1.0;
    for (int i = 0; i < 50; i++) {
        t0 = MPI_Wtime();
        do { t1 = MPI_Wtime(); } while (t1 == t0);
        if (t1 - t0 < res) res = t1 - t0;
    }
    cb_json_begin("info");
    cb_json_int("nranks", nranks);
    if (extra) extra(arg);
    cb_json_str("mpi_library", lib);
    cb_json_num("timer_resolution_s", res);
    cb_json_num("wtick_s", MPI_Wtick());
    cb_json_key("ranks");
    putchar('[');
    for (int r = 0; r < nranks; r++) {
        cb_json_first = 1;
        printf(r ? ",{" : "{");
        cb_json_int("rank", r);
        cb_json_str("host", all[r].host);
        cb_json_str("node", all[r].node);
        cb_json_str("cpus", all[r].cpus);
        cb_json_int("cpu", all[r].cpu);
        putchar('}');
    }
    putchar(']');
    cb_json_first = 0;
    cb_json_end();
    free(all);
}
/* Collective, the kernel's last step: every rank has finished (a barrier), rank 0 says so with
 * {"type":"done"}, then MPI_Finalize. The launcher gives the MPI library a bounded time to tear
 * down after "done" (some transports' disconnects hang between network namespaces) and kills it
 * then, keeping the results, which were all validated before. hang_rank (a test hook, -1 for
 * none) sleeps forever instead of finalizing. Returns MPI_Finalize's code. */
static inline int cb_mpi_finish(int rank, int hang_rank) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        cb_json_begin("done");
        cb_json_end();
    }
    if (rank == hang_rank) for (;;) pause();
    return MPI_Finalize();
}
#endif /* CB_MPI_H */
