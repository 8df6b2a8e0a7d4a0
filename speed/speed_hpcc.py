"""clusterbench's HPC Challenge kernels beside Debian's hpcc, in one run (issue 9).

Each round runs hpcc once (2 MPI processes, grid 1x2, the N and NB given; hpcc runs all its tests),
reads its summary keys and the sizes it chose (RandomAccess table, FFT vector length, PTRANS
N/NB/grid), then runs clusterbench's PTRANS, RandomAccess (single, star, mpi) and FFT (single,
star, mpi) at those same sizes and process counts. Rounds are interleaved because the machine is
shared and noisy: the per-round ratios count (their median is reported with the ratio of the best
figures beside it).

Targets (issue 9): PTRANS_GBs >= 1.0x hpcc; StarRandomAccess_GUPs and MPIRandomAccess_GUPs >= 1.0x;
SingleFFT_Gflops and StarFFT_Gflops >= 1.5x (FFTW vs hpcc's built-in FFT); MPIFFT_Gflops >= 1.0x;
`run hpcc --quick` <= 120 s on 2 cores (timed here, after the rounds, with an empty and a warm kernel cache).

Usage: ``.venv/bin/python speed/speed_hpcc.py [--rounds 3] [--n 8000] [--nb 192] [--log FILE]``
(as root it passes --allow-run-as-root to mpirun and --allow-root to clusterbench).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from speedkit import hpcc_summary, hpccinf, log_file, save_log

REPO = Path(__file__).resolve().parents[1]
ROOT_MPI = ["--allow-run-as-root"] if os.geteuid() == 0 else []
ROOT_CB = ["--allow-root"] if os.geteuid() == 0 else []
CB = [str(REPO / ".venv" / "bin" / "clusterbench")]


def hpcc(n: int, nb: int) -> dict[str, float]:
    """hpcc's summary keys (its figures and the sizes it chose: RandomAccess_N, MPIRandomAccess_N,
    FFT_N, MPIFFT_N, PTRANS_n, PTRANS_nb; hpcc runs PTRANS at N/2 of its HPL N)."""
    with tempfile.TemporaryDirectory() as d:
        Path(d, "hpccinf.txt").write_text(hpccinf(n, nb, q=2))
        subprocess.run(["mpirun", *ROOT_MPI, "-np", "2", "--map-by", "core", "--bind-to", "core", "hpcc"], cwd=d,
                       capture_output=True, timeout=3600, check=True,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
        text = Path(d, "hpccoutf.txt").read_text()
    return hpcc_summary(text)


def log2(x: float) -> str:
    return str(int(x).bit_length() - 1)


def ours(bench: str, args: list[str], mpi: bool = False) -> list[dict]:
    cmd = [*CB, "run", bench, *args, "--json", "--no-store", *(ROOT_CB if mpi else [])]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return json.loads(p.stdout)["results"]


def value(results: list[dict], key: str) -> float:
    got = [r["value"] for r in results if r["params"].get("hpcc_key") == key]
    if not got:
        raise RuntimeError(f"no result with hpcc_key {key}: {[r['params'].get('hpcc_key') for r in results]}")
    return max(got)


#: (hpcc key, target ratio, clusterbench command builder from hpcc's sizes)
CASES = [
    ("PTRANS_GBs", 1.0, lambda k: ("ptrans", ["--n", str(int(k["PTRANS_n"])), "--nb", str(int(k["PTRANS_nb"])),
                                              "--grid", "1x2"], True)),
    # one timed pass, as hpcc makes (--samples 1); the LCG keys are hpcc's second stream
    *[(f"{m}RandomAccess{tag}_GUPs", target,
       lambda k, m=m, var=var: ("randomaccess", ["--mode", m.lower(), "--variant", var, "--samples", "1",
                                                 "--log2-size", log2(k["MPIRandomAccess_N" if m == "MPI"
                                                                       else "RandomAccess_N"])], True))
      for m, target in (("Single", None), ("Star", 1.0), ("MPI", 1.0))
      for var, tag in (("standard", ""), ("lcg", "_LCG"))],
    ("SingleFFT_Gflops", 1.5, lambda k: ("fft", ["--mode", "single", "--n", str(int(k["FFT_N"]))], True)),
    ("StarFFT_Gflops", 1.5, lambda k: ("fft", ["--mode", "star", "--n", str(int(k["FFT_N"]))], True)),
    ("MPIFFT_Gflops", 1.0, lambda k: ("fft", ["--mode", "mpi", "--n", str(int(k["MPIFFT_N"]))], True)),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=8000, help="HPL N for hpcc (sizes its other tests); PTRANS uses it")
    ap.add_argument("--nb", type=int, default=192)
    ap.add_argument("--only", default="", help="comma list of hpcc keys to compare (default all)")
    ap.add_argument("--log", help="raw log (default speed/results-<date>-hpcc.txt)")
    args = ap.parse_args()
    only = {k for k in args.only.split(",") if k}
    cases = [c for c in CASES if not only or c[0] in only]
    raw: dict[str, dict[str, list[float]]] = {}
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    say(f"# speed_hpcc.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  n={args.n} nb={args.nb} rounds={args.rounds}")
    for rnd in range(args.rounds):
        say(f"round {rnd + 1}/{args.rounds}")
        keys = hpcc(args.n, args.nb)
        say("  hpcc sizes: " + ", ".join(f"{k}={keys.get(k)}" for k in
                                         ("PTRANS_n", "PTRANS_nb", "RandomAccess_N", "MPIRandomAccess_N", "FFT_N",
                                          "MPIFFT_N")))
        for key, _, build in cases:
            bench, cargs, mpi = build(keys)
            try:
                mine = value(ours(bench, cargs, mpi), key)
            except (RuntimeError, KeyError) as exc:
                say(f"  {key:<26} ours FAILED: {exc}")
                continue
            theirs = keys.get(key, float("nan"))
            raw.setdefault(key, {"ours": [], "hpcc": []})
            raw[key]["ours"].append(mine)
            raw[key]["hpcc"].append(theirs)
            say(f"  {key:<26} ours {mine:12.4f}  hpcc {theirs:12.4f}  ratio {mine / theirs:6.2f}"
                f"   (clusterbench run {bench} {' '.join(cargs)})")
    say("")
    say(f"{'key':<26} {'ours best':>10} {'hpcc best':>10} {'best/best':>9} {'median ratio':>12} {'target':>7}")
    for key, target, _ in cases:
        if key not in raw or not raw[key]["ours"]:
            continue
        o, h = raw[key]["ours"], raw[key]["hpcc"]
        ratios = [a / b for a, b in zip(o, h)]
        say(f"{key:<26} {max(o):10.4f} {max(h):10.4f} {max(o) / max(h):9.2f} {statistics.median(ratios):12.2f} "
            f"{('>= ' + format(target, 'g')) if target else '-':>7}")
    if not only:
        for label, env in (("empty kernel cache", {"CLUSTERBENCH_CACHE": tempfile.mkdtemp(prefix="cb-speed-")}),
                           ("warm kernel cache", {})):
            t0 = time.monotonic()
            p = subprocess.run([*CB, "run", "hpcc", "--quick", "--no-store", "--json", *ROOT_CB], capture_output=True,
                               text=True, timeout=3600, env={**os.environ, **env})
            took = time.monotonic() - t0
            n = len(json.loads(p.stdout)["results"]) if p.returncode == 0 else 0
            say(f"run hpcc --quick ({label}): {took:.1f} s, exit {p.returncode}, {n} figures (target <= 120 s)")
    save_log(log_file(args.log, "hpcc"), lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
