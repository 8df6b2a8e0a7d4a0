"""clusterbench's HPCG beside the HPCG 3.1 reference (xhpcg), in one run (issue 9).

The reference is built for measurement only, in a temporary directory, from its source tarball in
``../shared/reference/`` (``configure MPI_GCC_OMP``; one OpenMP thread per rank) and never copied into
the project. Both sides run the same local box per rank, the same rank count (2, bound one per core)
and the same minimum run time; rounds are interleaved because the machine is shared and noisy.

Reported per side: the final rating (GFLOP/s with convergence and optimisation overheads, as
HPCG's "Final Summary::HPCG result is VALID with a GFLOP/s rating of"), whether it is valid, and the
total bandwidth (GB/s). Target (issue 9): ours >= 1.5x the reference at 104^3 on 2 ranks, valid;
stretch: >= 0.8 of the STREAM-bound limit (HPCG's bytes per flop x measured triad bandwidth), which
clusterbench reports with its figure.

``--ref-flags`` says how xhpcg is compiled (issue 25): ``shipped`` (the default, as every log before
2026-11-26 was made) keeps the ``setup/Make.MPI_GCC_OMP`` CXXFLAGS as HPCG ships them (``-O3 -ffast-math
-ftree-vectorize ...``, no ``-march``); ``ours`` rewrites that line in the temporary build to our kernels'
flags, ``-O3`` plus ``clusterbench.kernels.build.arch_flags()`` (``-march=native`` on x86), keeping only
``-fopenmp`` (MPI_GCC_OMP needs it; one thread per rank), so the comparison is of code, not of flags.
The log header names the flags each side used.

Usage: ``.venv/bin/python speed/speed_hpcg.py [--rounds 2] [--local 104] [--time 60] [--ref-flags shipped|ours]
[--log FILE]``
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from speedkit import log_file, save_log

from clusterbench.kernels.build import WARN_FLAGS, arch_flags

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "reference"
ROOT_MPI = ["--allow-run-as-root"] if os.geteuid() == 0 else []
ROOT_CB = ["--allow-root"] if os.geteuid() == 0 else []
CB = str(REPO / ".venv" / "bin" / "clusterbench")
MAKE_SETUP = "setup/Make.MPI_GCC_OMP"
CXXFLAGS_LINE = re.compile(r"^CXXFLAGS\s*=\s*\$\(HPCG_DEFS\)(.*)$", re.M)
#: Our HPCG kernel's flags (benchmarks/hpcg: ctx.build(..., openmp=False) -> -O3, arch_flags(), WARN_FLAGS).
OUR_FLAGS = ["-O3", *arch_flags()]


def reference_flags(mode: str, src: Path) -> str:
    """The compile flags (after $(HPCG_DEFS)) xhpcg is built with in `mode`."""
    if mode == "ours":
        return " ".join([*OUR_FLAGS, "-fopenmp"])
    m = CXXFLAGS_LINE.search((src / MAKE_SETUP).read_text())
    if not m:
        raise RuntimeError(f"no CXXFLAGS = $(HPCG_DEFS) ... line in {src / MAKE_SETUP}")
    return m.group(1).strip()


def build_reference(work: Path, mode: str = "shipped") -> tuple[Path, str]:
    """Build xhpcg in `work`; return it and the flags it was compiled with (after $(HPCG_DEFS))."""
    tarball = sorted(SHARED.glob("hpcg-3.1-*.tar.gz"))[-1]
    subprocess.run(["tar", "xzf", str(tarball), "-C", str(work)], check=True)
    src = next(p for p in work.iterdir() if p.is_dir())
    build = work / "build"
    build.mkdir()
    subprocess.run([str(src / "configure"), "MPI_GCC_OMP"], cwd=build, check=True, capture_output=True)
    flags = reference_flags(mode, src)
    if mode == "ours":  # the generated build's copy of the setup file, in the temporary directory only
        setup = build / MAKE_SETUP
        text, n = CXXFLAGS_LINE.subn(lambda _m: f"CXXFLAGS     = $(HPCG_DEFS) {flags}", setup.read_text())
        if n != 1:
            raise RuntimeError(f"expected one CXXFLAGS line in {setup}, found {n}")
        setup.write_text(text)
    subprocess.run(["make", f"-j{os.cpu_count() or 2}"], cwd=build, check=True, capture_output=True)
    return build / "bin" / "xhpcg", flags


def reference(xhpcg: Path, local: int, seconds: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["mpirun", *ROOT_MPI, "-np", "2", "--map-by", "core", "--bind-to", "core", str(xhpcg),
                        f"--nx={local}", f"--ny={local}", f"--nz={local}", f"--rt={seconds}"], cwd=d, check=True,
                       capture_output=True, timeout=seconds * 10 + 600, env={**os.environ, "OMP_NUM_THREADS": "1"})
        text = Path(sorted(glob.glob(f"{d}/HPCG-Benchmark*.txt"))[-1]).read_text()
    m = re.search(r"HPCG result is (VALID|INVALID) with a GFLOP/s rating of=([\d.eE+-]+)", text)
    bw = re.search(r"GB/s Summary::Raw Total B/W=([\d.eE+-]+)", text)
    return {"rating": float(m.group(2)) if m else float("nan"), "valid": bool(m and m.group(1) == "VALID"),
            "gbs": float(bw.group(1)) if bw else float("nan")}


def ours(local: int, seconds: int) -> dict:
    cmd = [CB, "run", "hpcg", "--local", f"{local}x{local}x{local}", "--time", str(seconds), "--ranks", "2",
           "--json", "--no-store", *ROOT_CB]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 10 + 600)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    res = {r["metric"]: r for r in json.loads(p.stdout)["results"]}
    rating = res["rating"]
    return {"rating": rating["value"], "valid": bool(rating["params"].get("valid")),
            "gbs": res["bandwidth_gbs"]["value"] if "bandwidth_gbs" in res else float("nan"),
            "limit": rating.get("limit"), "iterations": rating["params"].get("iterations"),
            "penalty": rating["params"].get("penalty")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--local", type=int, default=104, help="local box edge per rank (104 -> 104^3)")
    ap.add_argument("--time", type=int, default=60, help="minimum run time per side, seconds")
    ap.add_argument("--ref-flags", choices=("shipped", "ours"), default="shipped",
                    help="compile xhpcg with HPCG's own MPI_GCC_OMP flags (default) or with our kernels' flags")
    ap.add_argument("--log", help="raw log (default speed/results-<date>-hpcg.txt)")
    args = ap.parse_args()
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    say(f"# speed_hpcg.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  local={args.local}^3  ranks=2  "
        f"time={args.time}s  rounds={args.rounds}  ref-flags={args.ref_flags}")
    rows: dict[str, list[dict]] = {"ours": [], "ref": []}
    with tempfile.TemporaryDirectory(prefix="cb-hpcg-ref-") as work:
        xhpcg, ref_flags = build_reference(Path(work), args.ref_flags)
        say(f"# flags: reference xhpcg (MPI_GCC_OMP, OMP_NUM_THREADS=1): {ref_flags}")
        say(f"# flags: clusterbench hpcg kernel (mpicc, no OpenMP): {' '.join([*OUR_FLAGS, *WARN_FLAGS])}")
        for rnd in range(args.rounds):
            say(f"round {rnd + 1}/{args.rounds}")
            r = reference(xhpcg, args.local, args.time)
            rows["ref"].append(r)
            say(f"  reference xhpcg  rating {r['rating']:8.3f} GFLOP/s  valid={r['valid']}  {r['gbs']:7.2f} GB/s")
            o = ours(args.local, args.time)
            rows["ours"].append(o)
            say(f"  clusterbench     rating {o['rating']:8.3f} GFLOP/s  valid={o['valid']}  {o['gbs']:7.2f} GB/s"
                f"  {o['iterations']} iterations (penalty {o['penalty']})  limit {json.dumps(o['limit'])}")
    ratios = [o["rating"] / r["rating"] for o, r in zip(rows["ours"], rows["ref"])]
    best_o, best_r = max(x["rating"] for x in rows["ours"]), max(x["rating"] for x in rows["ref"])
    say("")
    say(f"best: ours {best_o:.3f}, reference {best_r:.3f}, best/best {best_o / best_r:.2f}; "
        f"median per-round ratio {statistics.median(ratios):.2f} (target >= 1.5, valid on both sides: "
        f"{all(x['valid'] for x in rows['ours'] + rows['ref'])})")
    save_log(log_file(args.log, "hpcg"), lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
