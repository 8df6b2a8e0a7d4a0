"""Why clusterbench's collectives and OSU 7.4's differ where they do (issue 26, "Agreement with the
peers"): controlled A/B runs, one thing changed on one side, interleaved round by round.

Each ``--variant LABEL=SIDE[+PATCH...] [ARGS] [-- MPIRUN-ARGS]`` is a program run the same way (with ``--hosts``: as
clusterbench launches ``run coll --hosts ... --oversubscribe`` there; with ``--ranks N``: as it launches ``run coll
--ranks N`` on this node; else ``mpirun -np 2 --bind-to
core``: rank 0 on cpu 0, rank 1 on cpu 1, as clusterbench's rankfile places them on 2 cpus):

* SIDE ``ours``: clusterbench's kernel (src/clusterbench/kernels/mpi/coll.c of this tree), built with the
  MPI's ``mpicc -O3 -march=native`` (no OpenMP, as clusterbench builds it; the first logs of
  speed/logs/osu-why-*.txt had ``-fopenmp`` too, which changes nothing: coll has no parallel region)
  into a temporary folder, run with ``--ops=OP --sizes=<every power of
  two MIN..MAX> --min_iters=N --max_iters=N --warmup=W --time_budget=1000`` (so N is never cut) and
  ARGS (e.g. ``--p2p=0``, ``--validate_every=1000000``);
* SIDE ``cb``: clusterbench's own ``run coll --ops OP --sizes ... --max-iters N --warmup W`` (as
  speed/coll_vs_osu.py runs it: through its Python parent, with the transport proof's verbose switches, the
  kernel built by clusterbench, its p2p sweep and links after the collectives) and ARGS as its options;
* SIDE ``osu``: OSU 7.4's ``osu_OP -f -z -m MIN:MAX -i N -x W`` and ARGS, built from the reference tarball;
* ``+PATCH``: the side's source changed by one of the named patches below before the build (a text
  replacement that must apply; each variant builds once).

Per round every variant runs once, the order rotating by one each round; per (variant, size) the log has
two figures of the same launch, us: ``avg``, OSU's "Avg Latency" (each rank's mean over the timed
iterations, averaged over ranks; clusterbench's latency), and ``p50``, the median over the iterations of
the max over ranks of each iteration's time (clusterbench's p50_us; OSU's ``-z`` P50 with the
``tailmax`` patch, always applied, so that OSU reduces over ranks by the max as clusterbench does, not
the average); and, per round, each variant's ratios to the first variant (the baseline). The summary is
the median over rounds of those ratios with their range. Only ratios within a round are compared: the
machine is shared. The median iteration is what one descheduled rank cannot move: on a loaded machine
an average over iterations carries every time slice a rank lost.

Usage::

    .venv/bin/python speed/osu_why.py --op allreduce --sizes 2048:16384 --iters 1000 --warmup 100 \
        --variant osu=osu --variant ours=ours --rounds 6 --log speed/logs/osu-why-NAME.txt

``--levels N`` instead of rounds: N launches of the first variant (ours), each size 6 times in a row, every
repetition's median iteration logged with the launch's steal time and, before and after it, the round trip
of a cache line between cpus 0 and 1 (two threads, no MPI): is a level the tool's, the process's or the
moment's? (docs/collectives.md, "Agreement with OSU 7.4".)
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KERNEL = REPO / "src" / "clusterbench" / "kernels" / "mpi" / "coll.c"
INCLUDE = REPO / "src" / "clusterbench" / "kernels" / "include"
TARBALLS = REPO.parent / "shared" / "reference"
OSU_DIR = "c/mpi/collective/blocking"
FLAGS = ["-O3", "-march=native"]
STATS = ("avg", "p50")
REPEAT = 6  # --levels: each size this many times in a row in one launch

#: named source patches: (file relative to the side's source, text, replacement)
PATCHES: dict[str, list[tuple[str, str, str]]] = {
    # ours: page-aligned buffers as OSU's allocate_memory_coll (posix_memalign to the page size), not 2 MiB
    "pagealign": [("coll.c", "b.send = cb_alloc(big, -1);\n    b.recv = cb_alloc(big, -1);",
                   "if (posix_memalign((void **)&b.send, 4096, big) || posix_memalign((void **)&b.recv, 4096, big))"
                   " die(\"posix_memalign\");")],
    # ours: the reductions on MPI_FLOAT sums of the same small integers (exact): count size/4 as OSU -T mpi_float
    "float": [("coll.c", "static void fill(int op", "typedef float real;\nstatic void fill(int op"),
              ("coll.c", "double *sd = (double *)b->send, *rd = (double *)b->recv;",
               "real *sd = (real *)b->send, *rd = (real *)b->recv;"),
              ("coll.c", "long n = size / 8;\n    real *sd", "long n = size / 4;\n    real *sd"),
              ("coll.c", "rd[i] = -1e300;", "rd[i] = -1e30f;"),
              ("coll.c", "int n8 = (int)(size / 8), nbyte", "int n8 = (int)(size / 4), nbyte"),
              ("coll.c", "n8, MPI_DOUBLE, MPI_SUM", "n8, MPI_FLOAT, MPI_SUM"),
              ("coll.c", "b->counts, MPI_DOUBLE, MPI_SUM", "b->counts, MPI_FLOAT, MPI_SUM"),
              ("coll.c", "static long result_view(int op, long size, bufs_t *b, unsigned char **p, int *dbl) {\n"
                         "    long n = size / 8;",
               "static long result_view(int op, long size, bufs_t *b, unsigned char **p, int *dbl) {\n"
               "    long n = size / 4;"),
              ("coll.c", "double got = dbl ? ((double *)p)[k]", "double got = dbl ? ((real *)p)[k]"),
              ("coll.c", "sum += dbl ? ((double *)p)[k]", "sum += dbl ? ((real *)p)[k]"),
              ("coll.c", "first[k] = dbl ? ((double *)p)[k]", "first[k] = dbl ? ((real *)p)[k]"),
              ("coll.c", "static double expected(int op, long size, long k, long it) {\n    long n = size / 8;",
               "static double expected(int op, long size, long k, long it) {\n    long n = size / 4;")],
    # ours: no MPI_Bcast of the iteration count between the warm-up and the timed loop (OSU has none; with
    # --min_iters = --max_iters and a large --time_budget every rank already holds the same count)
    "nobcast": [("coll.c", "    MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);\n", "")],
    # ours: alltoall on MPI_CHARs, OSU's datatype, not MPI_BYTEs (the same bytes)
    "char": [("coll.c", "MPI_Alltoall(b->send, nbyte, MPI_BYTE, b->recv, nbyte, MPI_BYTE, w)",
              "MPI_Alltoall(b->send, nbyte, MPI_CHAR, b->recv, nbyte, MPI_CHAR, w)")],
    # OSU: -T mpi_float runs MPI_DOUBLE instead (size/8 elements), the datatype clusterbench's reductions use
    "double": [("c/util/osu_util_mpi.c", "mpi_type_list[i] = MPI_FLOAT;", "mpi_type_list[i] = MPI_DOUBLE;")],
    # OSU: -z's percentiles over iterations of the max over ranks of each iteration's time (OSU sums
    # over ranks and divides by P: the average), the statistic clusterbench's p50_us is of
    "tailmax": [("c/util/osu_util_mpi.c", "MPI_CHECK(MPI_Reduce(lat_arr, avg_lat_arr, options.iterations, MPI_DOUBLE,\n"
                 "                         MPI_SUM, 0, MPI_COMM_WORLD));",
                 "MPI_CHECK(MPI_Reduce(lat_arr, avg_lat_arr, options.iterations, MPI_DOUBLE,\n"
                 "                         MPI_MAX, 0, MPI_COMM_WORLD));"),
                ("c/util/osu_util_mpi.c", "                        1] /\n            comm_size;",
                 "                        1];")],
    # OSU: buffers aligned to 2 MiB (clusterbench's cb_alloc), not the page size
    "align2m": [("c/util/osu_util_mpi.c", "size_t alignment = sysconf(_SC_PAGESIZE);",
                 "size_t alignment = 2u << 20;")],
}


#: --levels: a cache-line ping-pong between two threads on cpus 0 and 1 (no MPI): the round trip of one
#: line between the two cores, ns, the median of 15 batches of 20000
C2C_SRC = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static _Alignas(64) atomic_int flag;
enum { N = 20000, B = 15 };
static void pin(int c) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s); }
static void *pong(void *a) { (void)a; pin(1); for (int i = 0; i < N * B; i++) { while (atomic_load(&flag) != 1) ; atomic_store(&flag, 0); } return 0; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
int main(void) {
    pthread_t t; double ns[B]; pin(0); pthread_create(&t, 0, pong, 0);
    for (int b = 0; b < B; b++) {
        struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < N; i++) { atomic_store(&flag, 1); while (atomic_load(&flag) != 0) ; }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ns[b] = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / N;
    }
    pthread_join(t, 0); qsort(ns, B, sizeof *ns, cmp); printf("%.1f\n", ns[B / 2]); return 0;
}
"""


def bounded(cmd: list[str], timeout: float, cwd: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``cmd`` in a session of its own, its process group killed on timeout."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            start_new_session=True, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RuntimeError(f"timed out after {timeout:g} s: {shlex.join(cmd[:8])}") from None
    if proc.returncode:
        raise RuntimeError(f"{shlex.join(cmd[:8])} failed ({proc.returncode}): {(err or out)[-1500:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def patch(root: Path, names: list[str]) -> None:
    for name in names:
        if name not in PATCHES:
            raise SystemExit(f"unknown patch '{name}': choose from {', '.join(PATCHES)}")
        for rel, old, new in PATCHES[name]:
            f = root / rel
            text = f.read_text()
            if old not in text:
                raise SystemExit(f"patch '{name}' does not apply to {rel}: '{old[:60]}' not found")
            f.write_text(text.replace(old, new))


def build_ours(where: Path, patches: list[str], mpicc: str = "mpicc") -> Path:
    where.mkdir(parents=True)
    src = where / "coll.c"
    src.write_text(KERNEL.read_text())
    patch(where, patches)
    exe = where / "coll"
    bounded([mpicc, *FLAGS, "-I", str(INCLUDE), "-o", str(exe), str(src), "-lm"], 300)
    return exe


def build_osu(where: Path, patches: list[str], op: str, tarball: Path, mpicc: str = "mpicc") -> Path:
    where.mkdir(parents=True)
    subprocess.run(["tar", "xzf", str(tarball), "-C", str(where), "--strip-components=1"], check=True)
    patch(where, patches)
    env = f"CFLAGS='{' '.join(FLAGS)}' CXXFLAGS='{' '.join(FLAGS)}'"
    from coll_vs_osu import wrappers  # here: coll_vs_osu imports this module
    cc, cxx = wrappers(mpicc)
    bounded(["sh", "-c", f"{env} ./configure CC={cc} CXX={cxx} >/dev/null"], 900, cwd=str(where))
    bounded(["make", "-C", OSU_DIR, f"osu_{op}"], 900, cwd=str(where))
    return where / OSU_DIR / f"osu_{op}"


ROW = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)(?:\s+([\d.]+)\s+[\d.]+\s+[\d.]+)?\s*$")


def run(side: str, exe: Path, extra: list[str], args: argparse.Namespace) -> dict[int, tuple[float, float]]:
    """One launch: {size: (average latency, median iteration), us}. The average is OSU's "Avg Latency"
    (each rank's mean over the timed iterations, averaged over ranks); the median is over the iterations
    of the max over ranks of each iteration's time (clusterbench's p50_us; OSU's -z P50, patched
    'tailmax' to reduce by the max over ranks, not the average)."""
    extra, mpirun_extra = split_args(extra)
    lo, hi = min(args.sizes), max(args.sizes)
    if side == "cb":
        import coll_vs_osu  # here: coll_vs_osu imports this module
        if mpirun_extra:
            raise SystemExit("side 'cb' takes clusterbench's options, not mpirun's (no '--')")
        ns = argparse.Namespace(ops=[args.op], transport="auto", ranks=None if args.hosts else args.ranks or 2,
                                hosts=args.hosts, mpi=args.mpi, oversubscribe=bool(args.hosts), ours_extra=shlex.join(extra),
                                timeout=args.timeout)
        got, _ = coll_vs_osu.ours(ns, args.sizes, (args.iters, args.warmup))
        return {s: (row["avg"], row["p50"]) for (_, s), row in got.items()}
    if side == "osu":
        r = launch([str(exe), "-f", "-z", "-m", f"{lo}:{hi}", "-i", str(args.iters), "-x", str(args.warmup), *extra],
                   mpirun_extra, args)
        return {int(m[1]): (float(m[2]), float(m[6])) for m in map(ROW.match, r.stdout.splitlines()) if m}
    sizes = ",".join(str(1 << k) for k in range(lo.bit_length() - 1, hi.bit_length()))
    r = launch([str(exe), f"--ops={args.op}", f"--sizes={sizes}", f"--min_iters={args.iters}",
                f"--max_iters={args.iters}", f"--warmup={args.warmup}", "--time_budget=1000", *extra],
               mpirun_extra, args)
    got = {}
    for line in r.stdout.splitlines():
        rec = json.loads(line) if line.startswith("{") else {}
        if rec.get("type") == "validation" and not rec.get("ok"):
            raise RuntimeError(f"validation failed: {rec.get('detail')}")
        if rec.get("type") == "result":
            p = rec["params"]
            got[int(p["size"])] = (float(p["avg_us"]), float(p["p50_us"]))
    return got


def launch(program: list[str], mpirun_extra: list[str], args: argparse.Namespace) -> subprocess.CompletedProcess:
    """One launch of ``program``: 2 ranks on cpus 0 and 1 here, or with ``--hosts``/``--ranks`` clusterbench's
    own launch of ``run coll --hosts ... --oversubscribe`` or ``run coll --ranks N`` (speed/coll_vs_osu.py's
    Setup: its rankfile; on the virtual cluster its agent and network, ranks yielding when idle; without the
    transport proof's verbose switches, which a variant can add after its ``--``)."""
    if args.setup is None:
        return bounded(["mpirun", "--allow-run-as-root", "-np", "2", "--bind-to", "core", *mpirun_extra, *program],
                       args.timeout)
    with tempfile.TemporaryDirectory(prefix="osu-why-launch-") as wd:
        cmd, env_add = args.setup.command(program, wd, mpirun_extra)
        return bounded(cmd, args.timeout, env={**os.environ, **env_add})


def levels(exe: Path, extra: list[str], args: argparse.Namespace, say) -> None:
    """``--levels N``: N launches of one ours variant, each size run ``REPEAT`` times in a row in each
    launch: the median iteration of every repetition, in launch order (is a level a property of the
    process, of what ran before it in the process, or of the moment?)."""
    mpirun = ["mpirun", "--allow-run-as-root", "-np", "2", "--bind-to", "core"]
    sizes = ",".join(str(s) for s in args.sizes for _ in range(REPEAT))
    c2c = exe.parent / "c2c"
    (exe.parent / "c2c.c").write_text(C2C_SRC)
    bounded(["cc", "-O2", "-pthread", "-o", str(c2c), str(exe.parent / "c2c.c")], 120)
    for i in range(args.levels):
        line_ns = float(bounded([str(c2c)], 60).stdout)
        before = cpu_times()
        r = bounded([*mpirun, str(exe), f"--ops={args.op}", f"--sizes={sizes}", f"--min_iters={args.iters}",
                     f"--max_iters={args.iters}", f"--warmup={args.warmup}", "--time_budget=1000", *extra],
                    args.timeout)
        recs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        p50 = [f"{rec['params']['size']}:{rec['params']['p50_us']:.1f}" for rec in recs if rec.get("type") == "result"]
        after = cpu_times()
        total = sum(after) - sum(before)
        steal = (after[7] - before[7]) / total * 100 if total > 0 else float("nan")
        line_after = float(bounded([str(c2c)], 60).stdout)
        say(f"launch {i} ({time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.2f}, steal {steal:.1f}%, "
            f"cache line cpu0<->cpu1 {line_ns:.0f} ns before, {line_after:.0f} ns after): p50 us {' '.join(p50)}")


def cpu_times() -> list[int]:
    """/proc/stat's cpu line (user nice system idle iowait irq softirq steal ...), jiffies of all cpus:
    steal is the time the hypervisor ran something else while this VM's vcpus wanted to run."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def split_args(extra: list[str]) -> tuple[list[str], list[str]]:
    """A variant's ARGS: the program's, then after a lone ``--`` mpirun's (e.g. ``-- --mca btl_base_verbose
    30``)."""
    if "--" not in extra:
        return extra, []
    i = extra.index("--")
    return extra[:i], extra[i + 1:]


def parse_variant(text: str) -> tuple[str, str, list[str], list[str]]:
    label, _, rest = text.partition("=")
    words = shlex.split(rest)
    if not label or not words:
        raise SystemExit(f"--variant '{text}': give LABEL=SIDE[+PATCH...] [ARGS], e.g. 'ours-p=ours+pagealign'")
    side, *patches = words[0].split("+")
    if side not in ("ours", "osu", "cb"):
        raise SystemExit(f"--variant '{text}': the side is 'ours', 'osu' or 'cb', not '{side}'")
    if side == "cb" and patches:
        raise SystemExit(f"--variant '{text}': side 'cb' (clusterbench's run coll) takes no patch")
    return label, side, patches, words[1:]


def sizes_arg(text: str) -> list[int]:
    lo, _, hi = text.partition(":")
    a, b = int(lo), int(hi or lo)
    return [1 << k for k in range(a.bit_length() - 1, b.bit_length()) if a <= 1 << k <= b]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--op", required=True, choices=["allreduce", "bcast", "alltoall", "allgather", "reduce"])
    ap.add_argument("--sizes", type=sizes_arg, required=True, help="MIN:MAX bytes (powers of two)")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--variant", action="append", required=True, help="LABEL=SIDE[+PATCH...] [ARGS]")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--levels", type=int, default=0, help="instead of rounds: N launches of the first variant "
                    f"(ours), each size {REPEAT} times in a row, every repetition's median iteration logged")
    ap.add_argument("--hosts", help="run every variant on these nodes (e.g. the virtual cluster's cbsim-n1,...), "
                    "launched as clusterbench launches run coll there (with --oversubscribe)")
    ap.add_argument("--ranks", type=int, help="run every variant on N ranks of this node, launched as clusterbench "
                    "launches run coll --ranks N (its rankfile and options; without it: mpirun -np 2 --bind-to core)")
    ap.add_argument("--mpi", help="with --hosts or --ranks: openmpi or mpich (default: mpirun on PATH); both sides "
                    "built with its mpicc, launched as clusterbench launches it")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--note", default="")
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    if args.hosts and args.ranks:
        raise SystemExit("give --hosts (one rank per node) or --ranks (this node), not both")
    args.setup = None
    if args.mpi and not (args.hosts or args.ranks):
        raise SystemExit("--mpi needs --hosts or --ranks (clusterbench's launch of that MPI)")
    if args.hosts or args.ranks:
        if args.levels:
            raise SystemExit("--levels runs mpirun -np 2 --bind-to core: leave out --hosts and --ranks")
        from coll_vs_osu import Setup  # here: coll_vs_osu imports this module
        args.setup = Setup(argparse.Namespace(ops=[args.op], sizes=args.sizes, ranks=args.ranks, hosts=args.hosts,
                                              mpi=args.mpi, transport="auto", oversubscribe=bool(args.hosts)))
    variants = [parse_variant(v) for v in args.variant]
    tarball = Path(sorted(glob.glob(str(TARBALLS / "osu-micro-benchmarks-7.4-*.tar.gz")))[-1])
    out = open(args.log, "a")

    def say(line: str = "") -> None:
        print(line, flush=True)
        out.write(line + "\n")
        out.flush()

    mpi = (f"{args.setup.mpi.name} {args.setup.mpi.version}" if args.setup else
           subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0])
    placed = (f"nodes {args.hosts}" if args.hosts else f"{args.ranks} ranks as run coll --ranks places them"
              if args.ranks else "2 ranks on cpus 0 and 1 (mpirun -np 2 --bind-to core)")
    say(f"# osu_why.py {time.strftime('%Y-%m-%d %H:%M:%S')}; {mpi}; {len(os.sched_getaffinity(0))} cpus; {placed}; "
        f"load {os.getloadavg()[0]:.2f}; op {args.op}; sizes {args.sizes[0]}..{args.sizes[-1]} B; "
        f"{args.iters} timed + {args.warmup} warm-up iterations; "
        + (f"levels: {args.levels} launches" if args.levels else f"rounds {args.rounds}"))
    if args.note:
        say(f"# note: {args.note}")
    for label, side, patches, extra in variants:
        say(f"# variant {label}: {side}" + (f" patched {'+'.join(patches)}" if patches else "")
            + (f", args {shlex.join(extra)}" if extra else ""))
    base = variants[0][0]
    with tempfile.TemporaryDirectory(prefix="osu-why-") as tmp:
        exes = {}
        for label, side, patches, _ in variants:
            where = Path(tmp) / label
            mpicc = args.setup.mpi.mpicc if args.setup else "mpicc"
            exes[label] = (build_ours(where, patches, mpicc) if side == "ours" else Path(sys.executable) if side == "cb"
                           else build_osu(where, [*patches, "tailmax"], args.op, tarball, mpicc))
        if args.levels:
            label, side, _, extra = variants[0]
            if side != "ours":
                raise SystemExit("--levels: the first variant must be 'ours'")
            levels(exes[label], extra, args, say)
            out.close()
            return 0
        ratios: dict[tuple[str, str, int], list[float]] = {}
        for i in range(args.rounds):
            k = i % len(variants)
            order = variants[k:] + variants[:k]
            got = {label: run(side, exes[label], extra, args) for label, side, _, extra in order}
            say(f"round {i}: order {', '.join(v[0] for v in order)}; load {os.getloadavg()[0]:.2f}")
            nan = (float("nan"), float("nan"))
            for s in args.sizes:
                cells = " | ".join(f"{label} avg {got[label].get(s, nan)[0]:.3f} p50 {got[label].get(s, nan)[1]:.3f}"
                                   for label, *_ in variants)
                rs = []
                for label, *_ in variants[1:]:
                    for j, stat in enumerate(STATS):
                        r = got[label].get(s, nan)[j] / got[base].get(s, nan)[j]
                        ratios.setdefault((label, stat, s), []).append(r)
                        rs.append(f"{label}/{base} {stat} {r:.3f}")
                say(f"r{i} {s} B: {cells} us; {'; '.join(rs)}")
    say(f"summary: median over {args.rounds} rounds of the per-round ratio to {base} (range), of the average "
        "and of the median iteration")
    for label, *_ in variants[1:]:
        for s in args.sizes:
            say(f"  {label}/{base} {s} B: " + "; ".join(
                f"{stat} {statistics.median(rs):.3f} ({min(rs):.2f}-{max(rs):.2f})"
                for stat in STATS for rs in [ratios[(label, stat, s)]]))
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
