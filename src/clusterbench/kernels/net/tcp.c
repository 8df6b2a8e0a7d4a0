/* tcp.c: TCP throughput (1..n parallel streams) and round-trip latency between two hosts,
 * without MPI (Duffy (2020)'s iperf; iperf3 and qperf in anchors-mpi.md section 5).
 *
 * One binary, two roles:
 *
 *   tcp --mode=server --bind=ADDR --connections=K --token=T [--port=0] [--timeout=S]
 *       Listens ONLY on ADDR (an unspecified address such as 0.0.0.0 is refused), on a random
 *       port unless --port is given, and prints {"type":"info","port":P,...} first. It accepts
 *       exactly K connections that present the right token (a stray connection is closed and
 *       not counted), then closes the listening socket, serves them, prints one "conn" record per
 *       connection, a validation record and a "server_done" record, and exits. alarm(S) ends it
 *       with an error after S seconds whatever happens: it never lingers.
 *
 *   tcp --mode=client --connect=ADDR:PORT --token=T --streams=1,2,4 --seconds=T --repeats=R
 *       [--block=131072] [--lat_iterations=N] [--lat_warmup=W] [--msg=1] [--timeout=S] [--crash=1]
 *       For every stream count n: n connections, one thread each. A warm-up phase (not reported)
 *       then R timed phases of T seconds: each stream sends fixed-size blocks (128 KiB by default,
 *       as iperf3), each block framed by a header (magic, flags, sequence number) and a trailer
 *       (sequence ^ token), then an end block; the server checks every frame and answers the end
 *       block with the bytes and blocks it received. The phase is timed from its start until the
 *       last stream's acknowledgement arrived, so throughput = bytes the SERVER received / time,
 *       and the server's count must equal what the client sent (validation). Mbit/s = 1e6 bit/s.
 *       Then latency: one connection with TCP_NODELAY, --msg bytes (1 by default, like qperf
 *       tcp_lat) sent and echoed back N times after W warm-up round trips; each round trip is
 *       timed; each echo is checked against the payload sent (which differs per iteration).
 *       Reported: "rtt" and "latency" = RTT / 2 (qperf, NetPIPE), in microseconds.
 *
 * Socket facts of each connection go into the records: SO_SNDBUF/SO_RCVBUF (at connect and after
 * the transfer: Linux autotunes them), TCP_MAXSEG, the path MTU (IP_MTU on the connected socket),
 * the MTU of the interface holding the local address (SIOCGIFMTU) and the congestion control.
 * --crash=1 is a test hook: the client kills itself (SIGKILL) in the middle of the first phase.
 */
#include "cb_common.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/types.h>

#define MAGIC_HELLO 0x43425443u /* "CBTC" */
#define MAGIC_BLOCK 0x43424253u
#define KIND_BW 1u
#define KIND_LAT 2u
#define FLAG_END 1u
#define MAX_CONN 1024
#define MAX_STREAMS 256
#define MAX_REPEATS 1000

struct hello {
    uint32_t magic, kind;
    uint64_t token;
    uint32_t stream, block; /* bw: stream index and block size; lat: message size */
    uint64_t iterations;    /* lat: round trips to serve */
};
struct frame {
    uint32_t magic, flags;
    uint64_t seq;
};
struct ack {
    uint64_t bytes, blocks, ok;
};

static uint64_t g_token;
static pthread_mutex_t g_out = PTHREAD_MUTEX_INITIALIZER;

/* ---- timeouts: async-signal-safe error record, then exit -------------------------------- */
static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "{\"type\":\"error\",\"message\":\"tcp: timed out (--timeout reached)\"}\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
}

static void set_timeout(double seconds) {
    if (seconds <= 0) return;
    signal(SIGALRM, on_alarm);
    unsigned s = (unsigned)ceil(seconds);
    alarm(s ? s : 1);
}

/* ---- I/O helpers ------------------------------------------------------------------------- */
/* 1 = got n bytes, 0 = clean EOF before the first byte, -1 = error or EOF mid-message. */
static int recv_all(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)buf + got, n - got, MSG_WAITALL);
        if (r == 0) return got == 0 ? 0 : -1;
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 1;
}

static int send_all(int fd, const void *buf, size_t n) {
    size_t put = 0;
    while (put < n) {
        ssize_t r = send(fd, (const char *)buf + put, n - put, MSG_NOSIGNAL);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        put += (size_t)r;
    }
    return 0;
}

static int geti(int fd, int level, int opt) {
    int v = -1;
    socklen_t l = sizeof v;
    if (getsockopt(fd, level, opt, &v, &l)) return -1;
    return v;
}

/* Socket facts as a JSON fragment (no braces): buffers, MSS, path MTU, interface and its MTU. */
struct sockfacts {
    int sndbuf, rcvbuf, mss, path_mtu, iface_mtu;
    char iface[IF_NAMESIZE + 1], local[64], peer[64], cc[32];
    int local_port, peer_port;
};

static void sock_facts(int fd, struct sockfacts *f) {
    memset(f, 0, sizeof *f);
    f->sndbuf = geti(fd, SOL_SOCKET, SO_SNDBUF);
    f->rcvbuf = geti(fd, SOL_SOCKET, SO_RCVBUF);
    f->mss = geti(fd, IPPROTO_TCP, TCP_MAXSEG);
    f->path_mtu = geti(fd, IPPROTO_IP, IP_MTU);
    f->iface_mtu = -1;
    socklen_t l = sizeof f->cc;
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, f->cc, &l)) strcpy(f->cc, "unknown");
    f->cc[sizeof f->cc - 1] = 0;
    struct sockaddr_in a;
    l = sizeof a;
    if (!getsockname(fd, (struct sockaddr *)&a, &l)) {
        inet_ntop(AF_INET, &a.sin_addr, f->local, sizeof f->local);
        f->local_port = ntohs(a.sin_port);
        struct ifaddrs *ifs = NULL, *it;
        if (!getifaddrs(&ifs)) {
            for (it = ifs; it; it = it->ifa_next) {
                if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
                if (((struct sockaddr_in *)it->ifa_addr)->sin_addr.s_addr != a.sin_addr.s_addr) continue;
                snprintf(f->iface, sizeof f->iface, "%s", it->ifa_name);
                struct ifreq ifr;
                memset(&ifr, 0, sizeof ifr);
                snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", it->ifa_name);
                int s = socket(AF_INET, SOCK_DGRAM, 0);
                if (s >= 0) {
                    if (!ioctl(s, SIOCGIFMTU, &ifr)) f->iface_mtu = ifr.ifr_mtu;
                    close(s);
                }
                break;
            }
            freeifaddrs(ifs);
        }
    }
    l = sizeof a;
    if (!getpeername(fd, (struct sockaddr *)&a, &l)) {
        inet_ntop(AF_INET, &a.sin_addr, f->peer, sizeof f->peer);
        f->peer_port = ntohs(a.sin_port);
    }
}

static void json_facts(const char *prefix, const struct sockfacts *f) {
    char k[64];
#define K(name) (snprintf(k, sizeof k, "%s%s", prefix, name), k)
    cb_json_int(K("sndbuf"), f->sndbuf);
    cb_json_int(K("rcvbuf"), f->rcvbuf);
    cb_json_int(K("mss"), f->mss);
    cb_json_int(K("path_mtu"), f->path_mtu);
    cb_json_int(K("iface_mtu"), f->iface_mtu);
    cb_json_str(K("iface"), f->iface);
    cb_json_str(K("local_address"), f->local);
    cb_json_str(K("peer_address"), f->peer);
    cb_json_str(K("congestion_control"), f->cc);
#undef K
}

static int parse_ipv4(const char *s, struct in_addr *out) { return inet_pton(AF_INET, s, out) == 1; }

/* ======================================= server ============================================ */
struct sconn {
    int fd;
    struct hello h;
    pthread_t th;
    /* results */
    int ok;
    char err[200];
    uint64_t bytes, blocks, phases, iterations;
    struct sockfacts facts;
};

static void *serve_bw(struct sconn *c) {
    size_t B = c->h.block;
    char *buf = cb_alloc(B, 0);
    if (!buf) { snprintf(c->err, sizeof c->err, "out of memory"); return NULL; }
    uint64_t seq = 0, pbytes = 0, pblocks = 0;
    int in_phase = 0;
    for (;;) {
        int r = recv_all(c->fd, buf, B);
        if (r == 0) {
            if (in_phase) snprintf(c->err, sizeof c->err, "stream %u: connection closed in the middle of a phase",
                                   c->h.stream);
            else c->ok = 1;
            break;
        }
        if (r < 0) {
            snprintf(c->err, sizeof c->err, "stream %u: %s", c->h.stream,
                     errno ? strerror(errno) : "connection closed in the middle of a block");
            break;
        }
        struct frame fr;
        uint64_t trailer;
        memcpy(&fr, buf, sizeof fr);
        memcpy(&trailer, buf + B - sizeof trailer, sizeof trailer);
        if (fr.magic != MAGIC_BLOCK || fr.seq != seq || trailer != (seq ^ g_token)) {
            snprintf(c->err, sizeof c->err, "stream %u: block %llu is corrupt or out of order", c->h.stream,
                     (unsigned long long)seq);
            break;
        }
        seq++;
        in_phase = 1;
        pbytes += B;
        pblocks++;
        if (fr.flags & FLAG_END) {
            struct ack a = {pbytes, pblocks, 1};
            if (send_all(c->fd, &a, sizeof a)) {
                snprintf(c->err, sizeof c->err, "stream %u: cannot acknowledge: %s", c->h.stream, strerror(errno));
                break;
            }
            c->bytes += pbytes;
            c->blocks += pblocks;
            c->phases++;
            pbytes = pblocks = 0;
            in_phase = 0;
        }
    }
    sock_facts(c->fd, &c->facts);
    free(buf);
    return NULL;
}

static void *serve_lat(struct sconn *c) {
    size_t S = c->h.block;
    char *buf = malloc(S);
    if (!buf) { snprintf(c->err, sizeof c->err, "out of memory"); return NULL; }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (;;) {
        int r = recv_all(c->fd, buf, S);
        if (r == 0) {
            if (c->iterations == c->h.iterations) c->ok = 1;
            else snprintf(c->err, sizeof c->err, "latency: closed after %llu of %llu round trips",
                          (unsigned long long)c->iterations, (unsigned long long)c->h.iterations);
            break;
        }
        if (r < 0 || send_all(c->fd, buf, S)) {
            snprintf(c->err, sizeof c->err, "latency: %s", errno ? strerror(errno) : "short message");
            break;
        }
        c->iterations++;
    }
    sock_facts(c->fd, &c->facts);
    free(buf);
    return NULL;
}

static void *serve(void *arg) {
    struct sconn *c = arg;
    if (c->h.kind == KIND_BW) serve_bw(c);
    else serve_lat(c);
    close(c->fd);
    return NULL;
}

static int run_server(int argc, char **argv) {
    const char *bind_s = NULL;
    long long port = 0, want = 1;
    CB_OPTIONS(argc, argv, CB_OPT("bind", bind_s), CB_OPT("port", port), CB_OPT("connections", want));
    if (!bind_s) cb_fail("--bind=ADDR is required: the server listens on one address only");
    struct in_addr addr;
    if (!parse_ipv4(bind_s, &addr)) cb_fail("--bind=%s is not an IPv4 address", bind_s);
    if (addr.s_addr == htonl(INADDR_ANY)) cb_fail("--bind=%s would listen on every interface; give one address", bind_s);
    if (port < 0 || port > 65535) cb_fail("--port=%lld is not a port", port);
    if (want < 1 || want > MAX_CONN) cb_fail("--connections=%lld: use 1..%d", want, MAX_CONN);

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0) cb_fail("socket: %s", strerror(errno));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr = addr;
    sa.sin_port = htons((uint16_t)port);
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa)) cb_fail("cannot bind %s:%lld: %s", bind_s, port, strerror(errno));
    if (listen(ls, 64)) cb_fail("listen: %s", strerror(errno));
    socklen_t l = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &l);
    char bound[64];
    inet_ntop(AF_INET, &sa.sin_addr, bound, sizeof bound);

    cb_json_begin("info");
    cb_json_str("mode", "server");
    cb_json_str("bind", bound);
    cb_json_int("port", ntohs(sa.sin_port));
    cb_json_int("pid", getpid());
    cb_json_int("connections", want);
    cb_json_end();

    struct sconn *conns = calloc((size_t)want, sizeof *conns);
    if (!conns) cb_fail("out of memory");
    int n = 0, rejected = 0;
    while (n < want) {
        int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            cb_fail("accept: %s", strerror(errno));
        }
        struct timeval tv = {2, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        struct hello h;
        int r = recv_all(fd, &h, sizeof h);
        int good = r == 1 && h.magic == MAGIC_HELLO && h.token == g_token &&
                   ((h.kind == KIND_BW && h.block >= 64 && h.block <= (64u << 20)) ||
                    (h.kind == KIND_LAT && h.block >= 1 && h.block <= (64u << 20)));
        if (!good) { /* a stray connection (scanner, another program): not one of ours */
            close(fd);
            rejected++;
            continue;
        }
        struct timeval none = {0, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
        conns[n].fd = fd;
        conns[n].h = h;
        if (pthread_create(&conns[n].th, NULL, serve, &conns[n])) cb_fail("pthread_create failed");
        n++;
    }
    close(ls); /* exactly the expected connections: later ones are refused */
    int bad = 0;
    const char *first_err = "";
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(conns[i].th, NULL);
        struct sconn *c = &conns[i];
        if (!c->ok && !bad++) first_err = c->err;
        total += c->bytes;
        pthread_mutex_lock(&g_out);
        cb_json_begin("conn");
        cb_json_str("kind", c->h.kind == KIND_BW ? "bw" : "lat");
        cb_json_int("stream", c->h.stream);
        cb_json_bool("ok", c->ok);
        if (!c->ok) cb_json_str("error", c->err);
        cb_json_int("bytes", (long long)c->bytes);
        cb_json_int("blocks", (long long)c->blocks);
        cb_json_int("phases", (long long)c->phases);
        cb_json_int("iterations", (long long)c->iterations);
        json_facts("", &c->facts);
        cb_json_end();
        pthread_mutex_unlock(&g_out);
    }
    char detail[400];
    snprintf(detail, sizeof detail, "%d connection(s) served, %d stray rejected%s%s", n, rejected,
             bad ? "; first failure: " : ", every block framed and in order", bad ? first_err : "");
    cb_validation(bad == 0, detail);
    cb_json_begin("server_done");
    cb_json_int("connections", n);
    cb_json_int("rejected", rejected);
    cb_json_int("bytes", (long long)total);
    cb_json_end();
    return bad ? 1 : 0;
}

/* ======================================= client ============================================ */
static struct sockaddr_in g_peer;
static int g_crash;

static int dial(uint32_t kind, uint32_t stream, uint32_t block, uint64_t iterations) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) cb_fail("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&g_peer, sizeof g_peer)) {
        char a[64];
        inet_ntop(AF_INET, &g_peer.sin_addr, a, sizeof a);
        cb_fail("cannot connect to %s:%d: %s", a, ntohs(g_peer.sin_port), strerror(errno));
    }
    if (kind == KIND_LAT) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    struct hello h = {MAGIC_HELLO, kind, g_token, stream, block, iterations};
    if (send_all(fd, &h, sizeof h)) cb_fail("cannot send the greeting: %s", strerror(errno));
    return fd;
}

struct stream {
    int fd, idx;
    pthread_t th;
    char *buf;
    uint64_t seq;
    /* per phase */
    uint64_t sent, acked, ack_blocks, blocks;
    int err;
    char errmsg[160];
};

static struct {
    pthread_barrier_t start, end;
    double deadline;
    int phases, stop;
    size_t block;
} g_bw;

static void stamp(struct stream *s, int flags) {
    struct frame fr = {MAGIC_BLOCK, (uint32_t)flags, s->seq};
    memcpy(s->buf, &fr, sizeof fr);
    uint64_t t = s->seq ^ g_token;
    memcpy(s->buf + g_bw.block - sizeof t, &t, sizeof t);
    s->seq++;
}

static void *stream_main(void *arg) {
    struct stream *s = arg;
    size_t B = g_bw.block;
    for (int p = 0; p < g_bw.phases; p++) {
        pthread_barrier_wait(&g_bw.start);
        s->sent = s->blocks = s->acked = s->ack_blocks = 0;
        if (!s->err) {
            double crash_at = g_crash && p == 0 ? cb_now() + 0.1 : 0;
            do {
                stamp(s, 0);
                if (send_all(s->fd, s->buf, B)) break;
                s->sent += B;
                s->blocks++;
                if (crash_at && cb_now() > crash_at) raise(SIGKILL); /* test hook: a client crash */
            } while (cb_now() < g_bw.deadline);
            stamp(s, FLAG_END);
            struct ack a;
            if (send_all(s->fd, s->buf, B) || recv_all(s->fd, &a, sizeof a) != 1) {
                s->err = 1;
                snprintf(s->errmsg, sizeof s->errmsg, "stream %d: %s", s->idx,
                         errno ? strerror(errno) : "the server closed the connection");
            } else {
                s->sent += B;
                s->blocks++;
                s->acked = a.bytes;
                s->ack_blocks = a.blocks;
            }
        }
        pthread_barrier_wait(&g_bw.end);
    }
    return NULL;
}

static void run_bw_point(int n, double seconds, int repeats, double warmup) {
    struct stream *st = calloc((size_t)n, sizeof *st);
    if (!st) cb_fail("out of memory");
    g_bw.phases = repeats + 1;
    pthread_barrier_init(&g_bw.start, NULL, (unsigned)n + 1);
    pthread_barrier_init(&g_bw.end, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        st[i].idx = i;
        st[i].buf = cb_alloc(g_bw.block, 0);
        if (!st[i].buf) cb_fail("out of memory");
        memset(st[i].buf, 0xa5, g_bw.block);
        st[i].fd = dial(KIND_BW, (uint32_t)i, (uint32_t)g_bw.block, 0);
    }
    struct sockfacts f0, f1;
    sock_facts(st[0].fd, &f0);
    for (int i = 0; i < n; i++)
        if (pthread_create(&st[i].th, NULL, stream_main, &st[i])) cb_fail("pthread_create failed");
    double samples[MAX_REPEATS], times[MAX_REPEATS], bytes[MAX_REPEATS], fairness = 1.0;
    int bad = 0;
    char detail[300] = "";
    for (int p = 0; p <= repeats; p++) {
        double t0 = cb_now();
        g_bw.deadline = t0 + (p == 0 ? warmup : seconds);
        pthread_barrier_wait(&g_bw.start);
        pthread_barrier_wait(&g_bw.end);
        double t1 = cb_now();
        uint64_t acked = 0, mn = UINT64_MAX, mx = 0;
        for (int i = 0; i < n; i++) {
            struct stream *s = &st[i];
            if (s->err) {
                if (!bad++) snprintf(detail, sizeof detail, "%s", s->errmsg);
                continue;
            }
            if (s->acked != s->sent || s->ack_blocks != s->blocks) {
                if (!bad++)
                    snprintf(detail, sizeof detail, "stream %d, phase %d: the server received %llu bytes, the "
                             "client sent %llu", i, p, (unsigned long long)s->acked, (unsigned long long)s->sent);
            }
            acked += s->acked;
            if (s->acked < mn) mn = s->acked;
            if (s->acked > mx) mx = s->acked;
        }
        if (p > 0) {
            samples[p - 1] = (double)acked * 8.0 / (t1 - t0) / 1e6;
            times[p - 1] = t1 - t0;
            bytes[p - 1] = (double)acked;
            if (mx > 0 && (double)mn / (double)mx < fairness) fairness = (double)mn / (double)mx;
        }
    }
    for (int i = 0; i < n; i++) pthread_join(st[i].th, NULL);
    sock_facts(st[0].fd, &f1);
    for (int i = 0; i < n; i++) {
        close(st[i].fd);
        free(st[i].buf);
    }
    free(st);
    pthread_barrier_destroy(&g_bw.start);
    pthread_barrier_destroy(&g_bw.end);

    cb_json_begin("validation");
    cb_json_bool("ok", bad == 0);
    if (!bad)
        snprintf(detail, sizeof detail, "%d stream(s) x %d phase(s): the server acknowledged every byte sent", n,
                 repeats + 1);
    cb_json_str("detail", detail);
    cb_json_end();
    if (bad) exit(1);

    cb_json_begin("result");
    cb_json_str("metric", "throughput");
    cb_json_str("unit", "Mbit/s");
    cb_json_key("params");
    cb_json_first = 1;
    putchar('{');
    cb_json_int("streams", n);
    cb_json_num("seconds", seconds);
    cb_json_num("warmup_seconds", warmup);
    cb_json_int("block_bytes", (long long)g_bw.block);
    cb_json_nums("bytes_acked", bytes, repeats);
    cb_json_num("stream_fairness_min_over_max", fairness);
    json_facts("", &f0);
    cb_json_int("sndbuf_after", f1.sndbuf);
    cb_json_int("rcvbuf_after", f1.rcvbuf);
    putchar('}');
    cb_json_first = 0;
    cb_json_nums("samples", samples, repeats);
    cb_json_nums("times_s", times, repeats);
    cb_json_end();
}

static void run_latency(long long iters, long long warm, size_t msg) {
    int fd = dial(KIND_LAT, 0, (uint32_t)msg, (uint64_t)(iters + warm));
    struct sockfacts f;
    sock_facts(fd, &f);
    char *out = malloc(msg), *in = malloc(msg);
    double *rtt = malloc(sizeof(double) * (size_t)iters), *half = malloc(sizeof(double) * (size_t)iters);
    double *ts = malloc(sizeof(double) * (size_t)iters);
    if (!out || !in || !rtt || !half || !ts) cb_fail("out of memory");
    long long bad = 0, first_bad = -1;
    for (long long i = 0; i < iters + warm; i++) {
        for (size_t j = 0; j < msg; j++) out[j] = (char)((uint64_t)i * 131u + j * 7u + g_token);
        memset(in, 0, msg);
        double t0 = cb_now();
        if (send_all(fd, out, msg)) cb_fail("latency: send failed: %s", strerror(errno));
        if (recv_all(fd, in, msg) != 1) cb_fail("latency: the server closed the connection at round trip %lld", i);
        double t1 = cb_now();
        if (memcmp(in, out, msg)) {
            if (first_bad < 0) first_bad = i;
            bad++;
        }
        if (i >= warm) {
            rtt[i - warm] = (t1 - t0) * 1e6;
            half[i - warm] = rtt[i - warm] / 2;
            ts[i - warm] = t1 - t0;
        }
    }
    close(fd);
    char detail[200];
    if (bad) snprintf(detail, sizeof detail, "%lld echo(es) differ from the payload sent, first at round trip %lld",
                      bad, first_bad);
    else snprintf(detail, sizeof detail, "%lld echoes of %zu byte(s) carried the payload sent", iters + warm, msg);
    cb_validation(bad == 0, detail);
    if (bad) exit(1);
    for (int m = 0; m < 2; m++) {
        cb_json_begin("result");
        cb_json_str("metric", m ? "latency" : "rtt");
        cb_json_str("unit", "us");
        cb_json_key("params");
        cb_json_first = 1;
        putchar('{');
        cb_json_int("message_bytes", (long long)msg);
        cb_json_int("iterations", iters);
        cb_json_int("warmup_iterations", warm);
        cb_json_bool("nodelay", 1);
        json_facts("", &f);
        putchar('}');
        cb_json_first = 0;
        cb_json_nums("samples", m ? half : rtt, (int)iters);
        cb_json_nums("times_s", ts, (int)iters);
        cb_json_end();
    }
    free(out); free(in); free(rtt); free(half); free(ts);
}

static int run_client(int argc, char **argv) {
    const char *conn = NULL;
    CB_OPTIONS(argc, argv, CB_OPT("connect", conn));
    if (!conn) cb_fail("--connect=ADDR:PORT is required");
    char host[64];
    const char *colon = strrchr(conn, ':');
    if (!colon || (size_t)(colon - conn) >= sizeof host) cb_fail("--connect=%s: expected ADDR:PORT", conn);
    memcpy(host, conn, (size_t)(colon - conn));
    host[colon - conn] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535) cb_fail("--connect=%s: bad port", conn);
    memset(&g_peer, 0, sizeof g_peer);
    g_peer.sin_family = AF_INET;
    g_peer.sin_port = htons((uint16_t)port);
    if (!parse_ipv4(host, &g_peer.sin_addr)) cb_fail("--connect=%s: not an IPv4 address", conn);

    int streams[64];
    const char *streams_s = "1";
    double seconds = 1.0, warmup = 0.2;
    long long repeats = 3, block = 131072, iters = 1000, warm = 100, msg = 1;
    g_crash = 0;
    CB_OPTIONS(argc, argv, CB_OPT("streams", streams_s), CB_OPT("seconds", seconds), CB_OPT("warmup", warmup),
               CB_OPT("repeats", repeats), CB_OPT("block", block), CB_OPT("lat_iterations", iters),
               CB_OPT("lat_warmup", warm), CB_OPT("msg", msg), CB_OPT("crash", g_crash));
    int npoints = cb_parse_cpulist(streams_s, streams, 64);
    for (int i = 0; i < npoints; i++)
        if (streams[i] < 1 || streams[i] > MAX_STREAMS) cb_fail("--streams: %d is not in 1..%d", streams[i], MAX_STREAMS);
    if (!(seconds > 0) || seconds > 3600) cb_fail("--seconds=%g: use (0, 3600]", seconds);
    if (!(warmup > 0)) cb_fail("--warmup=%g must be > 0", warmup);
    if (repeats < 1 || repeats > MAX_REPEATS) cb_fail("--repeats=%lld: use 1..%d", repeats, MAX_REPEATS);
    if (block < 64 || block > (64 << 20)) cb_fail("--block=%lld: use 64 B..64 MiB", block);
    if (iters < 0 || iters > 10000000 || warm < 0) cb_fail("--lat_iterations=%lld: use 0..1e7", iters);
    if (msg < 1 || msg > (64 << 20)) cb_fail("--msg=%lld: use 1 B..64 MiB", msg);
    g_bw.block = (size_t)block;

    cb_json_begin("info");
    cb_json_str("mode", "client");
    cb_json_str("connect", conn);
    cb_json_int("pid", getpid());
    cb_json_num("timer_resolution_s", cb_timer_resolution());
    cb_json_end();
    for (int i = 0; i < npoints; i++) run_bw_point(streams[i], seconds, (int)repeats, warmup);
    if (iters > 0) run_latency(iters, warm, (size_t)msg);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = "", *tok = "0";
    CB_OPTIONS(argc, argv, CB_OPT("mode", mode), CB_OPT("token", tok));
    char *end;
    g_token = strtoull(tok, &end, 16);
    if (*end) cb_fail("--token=%s: expected hexadecimal", tok);
    double timeout = 60;
    CB_OPTIONS(argc, argv, CB_OPT("timeout", timeout));
    set_timeout(timeout);
    signal(SIGPIPE, SIG_IGN);
    if (!strcmp(mode, "server")) return run_server(argc, argv);
    if (!strcmp(mode, "client")) return run_client(argc, argv);
    cb_fail("--mode=server or --mode=client is required (got '%s')", mode);
}
