"""clusterbench's collectives beside the OSU Micro-Benchmarks 7.4, interleaved round by round (issue 26,
"Agreement with the peers").

OSU 7.4 is built here, in a temporary folder, from the source tarball the project keeps beside it
(``../shared/reference/osu-micro-benchmarks-7.4-*.tar.gz``; ``--osu-tar``): ``./configure CC=mpicc
CXX=mpicxx`` with the MPI under test's own wrappers and the flags clusterbench's kernels are built with
(``-O3`` and the native architecture), then only the collectives asked for. Nothing of it enters the
repository; ``--osu-build DIR`` reuses a build made by an earlier run (``--keep-build`` keeps one).

Per round, both sides on the same MPI, ranks, placement, transport and sizes:

* clusterbench: ``clusterbench run coll --ops OPS --json --no-store`` (the OSU-convention ``latency``:
  each rank's average over the timed iterations, averaged over ranks; ``min_us``/``max_us`` over
  ranks), run twice so that its iteration counts are OSU's own: sizes up to 8 KiB with
  ``--max-iters 1000 --warmup 100``, larger ones with ``--max-iters 100 --warmup 10`` (OSU 7.4's
  COLL_LOOP_SMALL/COLL_SKIP_SMALL and COLL_LOOP_LARGE/COLL_SKIP_LARGE, switched above
  LARGE_MESSAGE_SIZE = 8192 B), ``--time-budget 60`` so the count is never cut by time; or, with
  ``--iters N --warmup W``, N and W at every size on both sides (OSU ``-i N -x W``; one launch of
  ours), for the virtual cluster where 1000 iterations of every small size take minutes; with
  ``--ours-per-op``, those launches once per op, as OSU's (else an op runs after the ones before it in
  the same process: alltoall after allreduce and bcast was 0.8-0.9 of OSU's at most sizes, alone in band,
  speed/logs/coll-osu-alltoall-alone.txt);
* with ``--control``, "ours" is OSU itself launched a second time the same way: the agreement two
  launches of one tool reach on this machine, the floor any two tools can be judged against;
* OSU: ``osu_<op> -f -m MIN:MAX`` (its defaults otherwise), one launch per op, started by
  clusterbench's own launcher code from the same LaunchSpec its run used (the same rankfile and
  ``rmaps_rank_file_physical`` for Open MPI, the same taskset wrapper per rank for MPICH, the same
  transport settings, the virtual cluster's head namespace and launch agent; only the transport proof's
  verbose switches are left out), its "Avg Latency(us)", "Min" and "Max" parsed.

The order flips every round (ours first in even rounds, OSU first in odd ones), so a slow minute on
this shared machine does not always fall on one side. Per (op, size) the figure is the median over
rounds of the per-round ratio ours / OSU, judged against the 0.90-1.10 band; best / best beside it.

Conventions that differ and are stated, not hidden: OSU's reductions (osu_allreduce, osu_reduce) sum
MPI_CHARs by default, clusterbench's MPI_DOUBLEs (the same bytes; ``--osu-extra "-T mpi_float"``
narrows the gap for a check); clusterbench checks iteration 0 and every 100th (fill and check outside
the timer; ``--ours-extra "--validate-every 1000000"`` leaves only iteration 0), OSU checks nothing
without ``-c``. The rest is the same (read in OSU 7.4's source: buffers allocated once for the largest size
and reused, no ``MPI_IN_PLACE``, root 0, a barrier between iterations outside the timer, ``MPI_Wtime``
around the one call, each rank's mean then the mean over ranks).

Where the two differ (docs/collectives.md, "Agreement with OSU 7.4"; speed/osu_why.py's controlled runs,
raw logs speed/logs/osu-why-*.txt): no convention explains it. The buffers' alignment (OSU's page, ours
2 MiB), the datatype (a few percent at the largest reductions), the sizes run before and the validation
every 100th iteration leave the median iteration within the noise. Two things do move the figures: (1) on
a loaded machine a rank that loses its core adds milliseconds to single iterations, and the average (this
script's figure) follows the load, not the tool; (2) the median iteration of either tool sits on one of
two levels about 2x apart (allreduce 8 KiB: ~5.5 or ~12 us on the 2-vCPU machine) that changes between
launches seconds apart, so a round's two sides can fall on different levels (a cache line's round trip
between the two vCPUs, no MPI, switches between ~100 and ~500 ns within seconds as well: the host moves
the vCPUs between nearby and distant cores). Judge agreement on an idle
machine over several rounds, and read a far-off average beside the median iteration of the same launches
(``--median`` adds it to each round line and to the summary: ours ``p50_us``, OSU's ``-z`` P50 built
with osu_why.py's ``tailmax`` patch, so that both are of the max over ranks of each iteration).

Usage::

    .venv/bin/python speed/coll_vs_osu.py [--mpi openmpi|mpich] [--ranks 2] [--hosts H1,H2,...]
        [--oversubscribe] [--rounds 3] [--ops allreduce,bcast,alltoall,allgather,reduce]
        [--sizes 8,16,...] [--median] [--c2c] [--quick-wall] [--log FILE]

The raw log goes to speed/results-<date>-<machine>-coll-osu.txt unless --log is given; every line the
summary prints is computed from the round lines above it (speed/claims.toml reads the round lines).
"""
from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed_mpi import PROBE, REPO  # noqa: E402
from speed_peers import machine_name, ratio_text  # noqa: E402
from speedkit import RawLog, log_file  # noqa: E402
from osu_why import C2C_SRC  # noqa: E402
from osu_why import patch as patch_source  # noqa: E402

from clusterbench.benchmarks import get_benchmark  # noqa: E402
from clusterbench.benchmarks.base import RunContext  # noqa: E402
from clusterbench.benchmarks.mpi.common import detect  # noqa: E402
from clusterbench.kernels.build import arch_flags  # noqa: E402
from clusterbench.launch import mpi as mpimod  # noqa: E402

OPS = ("allreduce", "bcast", "alltoall", "allgather", "reduce")
SIZES = [1 << k for k in range(3, 21)]  # 8 B .. 1 MiB
BAND = (0.90, 1.10)
#: OSU 7.4's collective iteration counts (util/osu_util.h): up to LARGE_MESSAGE_SIZE, above it
LARGE = 8192
OSU_COUNTS = {"small": (1000, 100), "large": (100, 10)}  # (iterations, warm-up)
TARBALL = REPO.parent / "shared" / "reference"
OSU_DIR = "c/mpi/collective/blocking"


# -- bounded processes -------------------------------------------------------------------------------

def bounded(cmd: list[str], timeout: float, env: dict | None = None, cwd: str | None = None
            ) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a session of its own; on timeout its whole process group is killed."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise RuntimeError(f"timed out after {timeout:g} s: {shlex.join(cmd[:6])} ...") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


# -- OSU: build and run ------------------------------------------------------------------------------

def wrappers(mpicc: str) -> tuple[str, str]:
    """The MPI's C and C++ wrappers (mpicc.openmpi -> mpicxx.openmpi)."""
    cxx = re.sub(r"mpicc(?=[^/]*$)", "mpicxx", mpicc)
    return mpicc, cxx if shutil.which(cxx) else "mpicxx"


def build_osu(tarball: Path, where: Path, mpicc: str, ops: list[str], patches: tuple[str, ...] = ()
              ) -> tuple[Path, str]:
    """OSU 7.4's collectives built under ``where`` with this MPI's wrappers, its source changed by
    speed/osu_why.py's named ``patches`` first; (their folder, the flags)."""
    cc, cxx = wrappers(mpicc)
    flags = " ".join(["-O3", *arch_flags()])
    src = where / "osu"
    src.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "xzf", str(tarball), "-C", str(src), "--strip-components=1"], check=True)
    patch_source(src, list(patches))
    env = {**os.environ, "CFLAGS": flags, "CXXFLAGS": flags}
    r = bounded(["./configure", f"CC={cc}", f"CXX={cxx}"], 1200, env=env, cwd=str(src))
    if r.returncode:
        raise RuntimeError(f"OSU configure failed: {r.stderr[-2000:]}")
    targets = ["osu_" + op.replace("-", "_") for op in ops]
    r = bounded(["make", "-C", OSU_DIR, *targets], 1800, env=env, cwd=str(src))
    if r.returncode:
        raise RuntimeError(f"OSU make failed: {r.stderr[-2000:]}")
    return src / OSU_DIR, f"CC={cc} CXX={cxx} CFLAGS/CXXFLAGS='{flags}'"


_ROW = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)(?:\s+([\d.]+)\s+[\d.]+\s+[\d.]+)?\s*$")


def parse_osu(text: str) -> tuple[dict[int, dict], str]:
    """OSU's ``-f`` table: {size: {avg, min, max, iters[, p50]}} (p50 with ``-z``) and its datatype line."""
    rows = {}
    for line in text.splitlines():
        m = _ROW.match(line)
        if m:
            rows[int(m[1])] = {"avg": float(m[2]), "min": float(m[3]), "max": float(m[4]), "iters": int(m[5]),
                               **({"p50": float(m[6])} if m[6] else {})}
    dtype = re.search(r"# Datatype: (\S+?)\.?$", text, re.M)
    return rows, dtype[1] if dtype else "?"


class Setup:
    """What both sides share: the MPI, the resolved placement (clusterbench's own) and the launch spec."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        given = {"ops": list(args.ops), "sizes": list(args.sizes), "ranks": args.ranks, "hosts": args.hosts,
                 "mpi": args.mpi, "transport": args.transport, "allow_root": True}
        ctx = RunContext(probe=PROBE, oversubscribe=args.oversubscribe)
        bench = get_benchmark("coll")
        self.params = bench.resolve(ctx, {k: v for k, v in given.items() if v is not None})
        self.mpi = detect(self.params)
        self.spec = bench.launch_spec(ctx, self.params)
        self.spec.prove_transport = False  # the proof's verbose switches: clusterbench's side only
        self.spec.report_bindings = self.mpi.name == "openmpi"
        self.places = [(h, c) for h, c in self.params["places"]]

    def command(self, program: list[str], wd: str, mpirun_extra: list[str] | tuple[str, ...] = ()
                ) -> tuple[list[str], dict[str, str]]:
        """The launch of ``program`` as clusterbench's own (its prefix, e.g. the virtual cluster's head
        namespace, included), with ``mpirun_extra`` among the launcher's options; (argv, environment to add)."""
        spec = dataclasses.replace(self.spec, extra_args=[*self.spec.extra_args, *mpirun_extra])
        cmd, env_add = mpimod.build_command(self.mpi, spec, program, wd)
        return [*spec.prefix, *cmd], env_add

    def osu(self, exe: Path, sizes: list[int], extra: list[str], timeout: float) -> tuple[dict, str, str, str]:
        """One OSU launch over ``sizes``: (rows, datatype, command, binding lines)."""
        program = [str(exe), "-f", "-m", f"{min(sizes)}:{max(sizes)}", *extra]
        for attempt in range(2):  # the virtual cluster: a launch that hangs is tried once more
            with tempfile.TemporaryDirectory(prefix="cb-osu-") as wd:
                cmd, env_add = self.command(program, wd)
                try:
                    r = bounded(cmd, timeout, env={**os.environ, **env_add})
                except RuntimeError:
                    if attempt:
                        raise
                    continue
            if r.returncode:
                raise RuntimeError(f"{exe.name} failed ({r.returncode}): {(r.stderr or r.stdout)[-1500:]}")
            rows, dtype = parse_osu(r.stdout)
            binds = [line.strip() for line in r.stderr.splitlines() if "bound to" in line or "not bound" in line]
            shown = shlex.join(cmd).replace("\n", "\\n")  # MPICH's taskset wrapper is a script
            return {s: rows[s] for s in sizes if s in rows}, dtype, shown, "; ".join(binds)
        raise AssertionError("unreachable")


# -- clusterbench's side -----------------------------------------------------------------------------

def ours_command(args: argparse.Namespace, sizes: list[int], counts: tuple[int, int],
                 ops: list[str] | None = None) -> list[str]:
    iters, warm = counts
    cmd = [sys.executable, "-m", "clusterbench", "run", "coll", "--ops", ",".join(ops or args.ops),
           "--sizes", ",".join(map(str, sizes)), "--max-iters", str(iters), "--warmup", str(warm),
           "--time-budget", "60", "--allow-root", "--json", "--no-store", "--transport", args.transport]
    if args.ranks:
        cmd += ["--ranks", str(args.ranks)]
    if args.hosts:
        cmd += ["--hosts", args.hosts]
    if args.mpi:
        cmd += ["--mpi", args.mpi]
    if args.oversubscribe:
        cmd.append("--oversubscribe")
    return cmd + shlex.split(args.ours_extra)


def ours(args: argparse.Namespace, sizes: list[int], counts: tuple[int, int],
         ops: list[str] | None = None) -> tuple[dict, list]:
    """clusterbench's OSU-convention latency: {(op, size): {avg, min, max, iters}} and the placement."""
    r = bounded(ours_command(args, sizes, counts, ops), args.timeout,
                env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    if r.returncode:
        raise RuntimeError(f"clusterbench run coll failed ({r.returncode}): {r.stderr[-1500:]}")
    doc = json.loads(r.stdout)
    got, placement = {}, []
    for res in doc["results"]:
        p = res["params"]
        if res["metric"] != "latency" or res["benchmark"] not in args.ops:
            continue
        got[(res["benchmark"], int(p["size_bytes"]))] = {"avg": float(res["value"]), "min": float(p["min_us"]),
                                                          "max": float(p["max_us"]), "iters": int(p["iterations"]),
                                                          "p50": float(p["p50_us"])}
        placement = p.get("placement") or placement
    return got, placement


def split_sizes(sizes: list[int], fixed: bool = False) -> list[tuple[str, list[int]]]:
    """The sizes by OSU's iteration regime (up to 8 KiB, above); one group with fixed counts."""
    if fixed:
        return [("fixed", sizes)]
    small = [s for s in sizes if s <= LARGE]
    large = [s for s in sizes if s > LARGE]
    return [(k, v) for k, v in (("small", small), ("large", large)) if v]


def counts(args: argparse.Namespace, regime: str) -> tuple[int, int]:
    """(iterations, warm-up) of a size group: OSU's defaults, or ``--iters``/``--warmup`` for all sizes."""
    return (args.iters, args.warmup) if regime == "fixed" else OSU_COUNTS[regime]


# -- a round, the summary ----------------------------------------------------------------------------

def c2c_ns(exe: Path | None) -> float | None:
    """``--c2c``: one cache line's round trip between cpu 0 and cpu 1 now, ns (speed/osu_why.py's probe)."""
    return float(bounded([str(exe)], 60).stdout) if exe else None


def level(ns: float, split: float) -> str:
    return "near" if ns < split else "far"


def one_round(setup: Setup, exes: dict[str, Path], i: int, out, c2c: Path | None = None) -> dict:
    args = setup.args
    got: dict = {"ours": {}, "osu": {}}
    walls = {"ours": 0.0, "osu": 0.0}
    info: dict = {}
    lines: dict[str, tuple] = {}  # --c2c: side -> (ns before, ns after)

    def osu_side(side: str) -> None:
        """OSU's launches, one per op, into ``got[side]`` (``ours`` too with --control)."""
        t0 = time.monotonic()
        for op in args.ops:
            fixed = ["-i", str(args.iters), "-x", str(args.warmup)] if args.iters is not None else []
            fixed += ["-z"] if args.median else []
            rows, dtype, cmd, binds = setup.osu(exes[op], args.sizes, fixed + shlex.split(args.osu_extra),
                                                args.timeout)
            for s, row in rows.items():
                got[side][(op, s)] = row
            info.setdefault("dtypes", {})[op] = dtype
            info.setdefault("cmd", cmd)
            info.setdefault("binds", binds)
        walls[side] = time.monotonic() - t0

    def run_ours() -> None:
        if args.control:  # OSU against itself: the "ours" side is a second OSU launch
            osu_side("ours")
            return
        t0 = time.monotonic()
        for ops in ([[op] for op in args.ops] if args.ours_per_op else [args.ops]):
            for regime, sizes in split_sizes(args.sizes, args.iters is not None):
                res, placement = ours(args, sizes, counts(args, regime), ops)
                got["ours"].update(res)
                info["placement"] = placement
        walls["ours"] = time.monotonic() - t0

    def run_osu() -> None:
        osu_side("osu")

    order = [("ours", run_ours), ("osu", run_osu)] if i % 2 == 0 else [("osu", run_osu), ("ours", run_ours)]
    for side, step in order:
        before = c2c_ns(c2c)
        step()
        lines[side] = (before, c2c_ns(c2c))
    levels = {}
    if c2c:  # a side's level: both probes on one side of the split, else "mixed"
        for side, (b, a) in lines.items():
            lb, la = level(b, args.c2c_split), level(a, args.c2c_split)
            levels[side] = lb if lb == la else "mixed"
    if i == 0:
        out("# placement (clusterbench's record): " + ", ".join(
            f"rank {p.get('rank')} {p.get('node') or p.get('host')} cpu {p.get('cpus')}" for p in info.get("placement") or
            [{"rank": r, "node": h or "this node", "cpus": c} for r, (h, c) in enumerate(setup.places)]))
        out(f"# OSU launch (the same LaunchSpec): {info['cmd']}")
        if info["binds"]:
            out(f"# OSU bindings (--report-bindings): {info['binds']}")
        out("# OSU datatypes: " + ", ".join(f"{op} {t}" for op, t in info["dtypes"].items()))
    c2c_text = "".join(f"; cache line cpu0<->cpu1 {side} {lines[side][0]:.0f} ns before, {lines[side][1]:.0f} ns "
                       f"after: {levels[side]}" for side in ("ours", "osu")) if c2c else ""
    out(f"round {i}: order {'ours, OSU' if i % 2 == 0 else 'OSU, ours'}; ours {walls['ours']:.1f} s, "
        f"OSU {walls['osu']:.1f} s; load {os.getloadavg()[0]:.2f}{c2c_text}")
    ratios, medians = {}, {}
    for op in args.ops:
        for s in args.sizes:
            o, r = got["ours"].get((op, s)), got["osu"].get((op, s))
            if not o or not r:
                out(f"r{i} {op} {s} B: missing (ours {'yes' if o else 'no'}, OSU {'yes' if r else 'no'})")
                continue
            ratios[(op, s)] = o["avg"] / r["avg"]
            tail = ""
            if args.median:
                medians[(op, s)] = o["p50"] / r["p50"]
                tail = f"; median iteration ours {o['p50']:.3f} us, OSU {r['p50']:.3f} us, ratio {medians[(op, s)]:.3f}"
            out(f"r{i} {op} {s} B: ours {o['avg']:.3f} us (min {o['min']:.3f} max {o['max']:.3f}, {o['iters']} it) "
                f"| osu {r['avg']:.3f} us (min {r['min']:.3f} max {r['max']:.3f}, {r['iters']} it) "
                f"| ratio {ratios[(op, s)]:.3f}{tail}")
    same = bool(levels) and levels["ours"] == levels["osu"] != "mixed"
    return {"got": got, "ratios": ratios, "medians": medians, "levels": levels, "same_level": same}


def judged(rows: list[dict], op: str, size: int) -> tuple[list[float], list[float], bool] | None:
    """One (op, size) over ``rows``: the per-round ratios of the averages and of the median iterations, and
    whether the median ratio of the averages is in the band; None when no round has it."""
    rs = [r["ratios"][(op, size)] for r in rows if (op, size) in r["ratios"]]
    if not rs:
        return None
    ms = [r["medians"][(op, size)] for r in rows if (op, size) in r.get("medians", {})]
    return rs, ms, BAND[0] <= statistics.median(rs) <= BAND[1]


def summary(rows: list[dict], args: argparse.Namespace, out) -> None:
    out("")
    out(f"summary: per (op, size) the median over {len(rows)} rounds of ours / OSU (range), best / best; "
        f"band {BAND[0]:.2f}-{BAND[1]:.2f}")
    for op in args.ops:
        inside = 0
        for s in args.sizes:
            j = judged(rows, op, s)
            if not j:
                continue
            rs, ms, ok = j
            inside += ok
            best_o = min(r["got"]["ours"][(op, s)]["avg"] for r in rows if (op, s) in r["ratios"])
            best_r = min(r["got"]["osu"][(op, s)]["avg"] for r in rows if (op, s) in r["ratios"])
            out(f"  {op} {s} B: median {ratio_text(rs)}, best ours {best_o:.3f} us / OSU {best_r:.3f} us = "
                f"{best_o / best_r:.3f}: {'in band' if ok else 'OUTSIDE'}")
            if ms:
                out(f"  {op} {s} B, median iteration: median {ratio_text(ms)}")
        out(f"  {op}: {inside} of {len(args.sizes)} sizes in band")
    if args.c2c:
        same = [r for r in rows if r["same_level"]]
        out(f"summary, same-level rounds only (--c2c: both sides' cache-line probes, before and after, on one "
            f"level, split at {args.c2c_split:g} ns): {len(same)} of {len(rows)} rounds kept "
            f"({', '.join(r['levels']['ours'] for r in same) or 'none'})")
        for op in args.ops:
            inside = 0
            for s in args.sizes:
                j = judged(same, op, s)
                if not j:
                    continue
                rs, ms, ok = j
                inside += ok
                tail = f"; median iteration {ratio_text(ms)}" if ms else ""
                out(f"  same-level {op} {s} B: median {ratio_text(rs)}{tail}: {'in band' if ok else 'OUTSIDE'}")
            out(f"  same-level {op}: {inside} of {len(args.sizes)} sizes in band")


def quick_wall(args: argparse.Namespace, out) -> None:
    """``clusterbench run coll --quick`` on the same hosts, timed whole (the issue's target: <= 60 s)."""
    cmd = [sys.executable, "-m", "clusterbench", "run", "coll", "--quick", "--allow-root", "--json", "--no-store"]
    if args.hosts:
        cmd += ["--hosts", args.hosts]
    if args.ranks:
        cmd += ["--ranks", str(args.ranks)]
    if args.mpi:
        cmd += ["--mpi", args.mpi]
    if args.oversubscribe:
        cmd.append("--oversubscribe")
    t0 = time.monotonic()
    r = bounded(cmd, 600, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    wall = time.monotonic() - t0
    n = len(json.loads(r.stdout)["results"]) if r.returncode == 0 else 0
    out(f"run coll --quick wall: {wall:.1f} s (exit {r.returncode}, {n} figures; target <= 60 s); "
        f"load {os.getloadavg()[0]:.2f}")


# -- main --------------------------------------------------------------------------------------------

def sizes_arg(text: str) -> list[int]:
    return sorted({int(s) for s in text.split(",") if s.strip()})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpi", help="openmpi or mpich (default: mpirun on PATH)")
    ap.add_argument("--ranks", type=int, help="MPI ranks (default: 2 without --hosts, else the hosts' slots)")
    ap.add_argument("--hosts", help="hosts and slots as clusterbench takes them (e.g. the virtual cluster's nodes)")
    ap.add_argument("--oversubscribe", action="store_true", help="ranks may share cores (virtual nodes on 2 cpus)")
    ap.add_argument("--transport", default="auto", help="clusterbench's --transport, the same for OSU's launch")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ops", type=lambda t: [o for o in t.split(",") if o], default=list(OPS))
    ap.add_argument("--sizes", type=sizes_arg, default=SIZES, help="bytes, OSU's per-op convention (default 8..1 MiB)")
    ap.add_argument("--iters", type=int, help="timed iterations of every size, both sides (OSU -i; default: "
                    "OSU's 1000 up to 8 KiB, 100 above)")
    ap.add_argument("--warmup", type=int, default=10, help="with --iters: warm-up iterations, both sides (OSU -x)")
    ap.add_argument("--osu-tar", help="OSU 7.4 source tarball (default ../shared/reference/osu-micro-benchmarks-7.4-*)")
    ap.add_argument("--osu-build", help="a folder with an OSU build of this MPI from an earlier run (skips the build)")
    ap.add_argument("--keep-build", help="build OSU into this folder (outside the repository) and keep it")
    ap.add_argument("--median", action="store_true", help="also the median iteration of both sides (of the max "
                    "over ranks: ours p50_us; OSU -z, built with speed/osu_why.py's 'tailmax' patch so that it "
                    "reduces over ranks by the max as ours does, not the average)")
    ap.add_argument("--osu-patch", action="append", default=[], help="build OSU with this speed/osu_why.py patch "
                    "too (repeatable; e.g. 'double': -T mpi_float then sums MPI_DOUBLEs, as clusterbench does)")
    ap.add_argument("--osu-extra", default="", help="more osu_<op> options, e.g. '-T mpi_float'")
    ap.add_argument("--ours-extra", default="", help="more clusterbench options, e.g. '--validate-every 1000000'")
    ap.add_argument("--ours-per-op", action="store_true", help="launch clusterbench once per op, as OSU is (by "
                    "default one launch runs every op, in --ops order: an op then runs after the others)")
    ap.add_argument("--control", action="store_true", help="OSU against itself: the 'ours' side is a second "
                    "OSU launch, interleaved the same way (how far two launches of one tool agree on this machine)")
    ap.add_argument("--quick-wall", action="store_true", help="also time 'run coll --quick' on the same hosts")
    ap.add_argument("--c2c", action="store_true", help="probe the two vCPUs' distance (a cache line's round trip "
                    "between cpu 0 and 1, speed/osu_why.py's) before and after each side's launches, and summarise "
                    "also the rounds whose two sides ran on one level")
    ap.add_argument("--c2c-split", type=float, default=250.0, help="with --c2c: ns between the near and far level "
                    "(default 250: 70-115 and 470-510 ns measured here)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per launch before it is killed")
    ap.add_argument("--note", default="", help="a remark for the log header (why this run)")
    ap.add_argument("--log", help="raw log (default: speed/results-<date>-<machine>-coll-osu.txt)")
    args = ap.parse_args()
    if not args.hosts and not args.ranks:
        args.ranks = 2
    if args.median and args.osu_build:
        ap.error("--median needs OSU built by this run (its 'tailmax' patch): drop --osu-build")
    if args.osu_patch and args.osu_build:
        ap.error("--osu-patch needs OSU built by this run: drop --osu-build")
    out = RawLog(log_file(args.log, f"{machine_name()}-coll-osu"))

    setup = Setup(args)
    tarball = Path(args.osu_tar) if args.osu_tar else Path(
        sorted(glob.glob(str(TARBALL / "osu-micro-benchmarks-7.4-*.tar.gz")))[-1])
    ver = setup.mpi.version
    nodes = len({h for h, _ in setup.places})
    out(f"# coll_vs_osu.py {time.strftime('%Y-%m-%d %H:%M:%S')} on {PROBE.get('cpu', {}).get('model_name')}, "
        f"{len(os.sched_getaffinity(0))} cpus; {setup.mpi.name} {ver}; load {os.getloadavg()[0]:.2f}; "
        f"ranks {len(setup.places)} on {nodes} node(s){' (' + args.hosts + ')' if args.hosts else ''}, "
        f"transport {args.transport}; rounds {args.rounds}; ops {','.join(args.ops)}; "
        f"sizes {min(args.sizes)}..{max(args.sizes)} B ({len(args.sizes)})")
    iters = (f"{args.iters} timed + {args.warmup} warm-up at every size (OSU -i/-x)" if args.iters is not None else
             f"OSU 7.4's: <= {LARGE} B {OSU_COUNTS['small'][0]} timed + {OSU_COUNTS['small'][1]} warm-up, above "
             f"{OSU_COUNTS['large'][0]} + {OSU_COUNTS['large'][1]}")
    out(f"# iterations (both sides): {iters}; "
        f"OSU extra '{args.osu_extra}', ours extra '{args.ours_extra}'"
        + ("; ours: one launch per op (--ours-per-op)" if args.ours_per_op else "")
        + ("; CONTROL: 'ours' is a second OSU launch (--control)" if args.control else "")
        + (f"; note: {args.note}" if args.note else ""))
    with tempfile.TemporaryDirectory(prefix="coll-osu-build-") as tmp:
        if args.osu_build:
            where, how = Path(args.osu_build), f"reused build {args.osu_build}"
            where = where / OSU_DIR if (where / OSU_DIR).is_dir() else where
        else:
            t0 = time.monotonic()
            patches = (("tailmax",) if args.median else ()) + tuple(args.osu_patch)
            where, how = build_osu(tarball, Path(args.keep_build or tmp), setup.mpi.mpicc, args.ops, patches)
            how += f"; patched {', '.join(repr(p) for p in patches)} (speed/osu_why.py)" if patches else ""
            how += ", run with -z" if args.median else ""
            how += f", built in {time.monotonic() - t0:.0f} s"
        out(f"# OSU: {tarball.name}; {how}")
        exes = {op: where / ("osu_" + op.replace("-", "_")) for op in args.ops}
        c2c = None
        if args.c2c:
            c2c = Path(tmp) / "c2c"
            (Path(tmp) / "c2c.c").write_text(C2C_SRC)
            bounded(["cc", "-O2", "-pthread", "-o", str(c2c), str(Path(tmp) / "c2c.c")], 120)
        rows = []
        for i in range(args.rounds):
            rows.append(one_round(setup, exes, i, out, c2c))
    summary(rows, args, out)
    if args.quick_wall:
        quick_wall(args, out)
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
