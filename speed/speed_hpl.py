"""Speed check for issue 4: clusterbench's built-in HPL engine against Debian hpcc's HPL, same N, NB,
P x Q, same OpenBLAS (hpcc links libblas.so.3, which update-alternatives points at openblas-pthread),
one BLAS thread per rank, ranks bound to cores. Interleaved rounds, best of each side, for each
OPENBLAS_CORETYPE setting (unset: OpenBLAS 0.3.21 falls back to its Prescott kernels on Emerald
Rapids; SkylakeX: its AVX-512 kernels), the same environment for both sides.

    python3 benchmarks/speed_hpl.py [--n 10000] [--nb 192] [--grid 1x2] [--rounds 3]
                                    [--coretypes default,SkylakeX] [--log PATH]

hpcc runs its whole suite (HPL last, ~3 min at N=10000 here); only its HPL figures are used:
HPL_Tflops (x1000 = Gflop/s), HPL_time and the residual line (PASSED/FAILED). Its HPL.dat part
uses HPL's recommended settings (PFACT=R, NBMIN=4, NDIV=2, RFACT=C, BCAST=1rM, DEPTH=1,
SWAP=mix/64), row-major process mapping as the built-in engine's default.
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from clusterbench.benchmarks import get_benchmark  # noqa: E402
from clusterbench.benchmarks.base import RunContext  # noqa: E402
from clusterbench.probe import probe  # noqa: E402

ROOT = ["--allow-run-as-root"] if os.geteuid() == 0 else []

# hpcc's input: HPL's standard variant WR11C2R4 (PFACT right, NBMIN 4, NDIV 2, RFACT Crout, BCAST
# 1rM, depth 1, SWAP mix at 64), no extra PTRANS sizes: the same file `run hpl --engine hpcc` writes
from clusterbench.benchmarks.hpl.engines import HplCase, hpcc_input  # noqa: E402



def blas_env(coretype: str | None) -> dict[str, str]:
    env = {k: "1" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "BLIS_NUM_THREADS", "MKL_NUM_THREADS")}
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    return env


def ours(pr: dict, n: int, nb: int, grid: str, coretype: str | None) -> dict:
    ctx = RunContext(probe=pr, profile="default", timeout=1800)
    b = get_benchmark("hpl")
    p = b.resolve(ctx, {"n": n, "nb": nb, "grid": grid, "allow_root": True, "topology": "pure",
                        "openblas_coretype": coretype})
    b.prepare(ctx, p)
    r = next(x for x in b.run(ctx, p) if x.metric == "rmax")
    return {"gflops": r.value, "time_s": r.params["time_s"], "residual": r.params["residual"],
            "breakdown_s": r.params["breakdown_s"], "breakdown_mean_s": r.params.get("breakdown_mean_s"),
            "blas_config": r.params.get("blas_config")}


def hpcc(n: int, nb: int, grid: str, coretype: str | None) -> dict:
    p, q = (int(x) for x in grid.lower().split("x"))
    env = {**os.environ, **blas_env(coretype)}
    with tempfile.TemporaryDirectory(prefix="cb-hpcc-") as d:
        Path(d, "hpccinf.txt").write_text(hpcc_input(HplCase(n=n, nb=nb, p=p, q=q)))
        cmd = (["mpirun", *ROOT, "-np", str(p * q), "--map-by", "core", "--bind-to", "core",
                "-x", "OPENBLAS_NUM_THREADS", "-x", "OMP_NUM_THREADS"]
               + (["-x", "OPENBLAS_CORETYPE"] if coretype else []) + ["hpcc"])
        proc = subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=3600)
        finally:  # interrupted or timed out: mpirun and its ranks go with us
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
        out = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
        text = Path(d, "hpccoutf.txt").read_text() if Path(d, "hpccoutf.txt").exists() else ""
    if out.returncode != 0 or "HPL_Tflops=" not in text:
        raise RuntimeError(f"hpcc failed ({out.returncode}): {out.stderr[-500:]}")
    kv = dict(re.findall(r"^(\w+)=(\S+)$", text, re.M))
    wr = re.search(r"^(W\S+\s+\d+\s+\d+\s+\d+\s+\d+\s+\S+\s+\S+)$", text, re.M)
    resid = re.search(r"\|\|Ax-b\|\|_oo/\(eps\*\(\|\|A\|\|_oo\*\|\|x\|\|_oo\+\|\|b\|\|_oo\)\*N\)=\s*(\S+)\s*\.*\s*(\w+)", text)
    return {"gflops": float(kv["HPL_Tflops"]) * 1000, "time_s": float(kv["HPL_time"]),
            "residual": float(resid.group(1)) if resid else None, "check": resid.group(2) if resid else "?",
            "line": wr.group(1) if wr else ""}


def machine() -> str:
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), "?")
    libblas = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    ldd = subprocess.run(["ldd", shutil.which("hpcc") or "hpcc"], capture_output=True, text=True).stdout
    blas_line = next((ln.strip() for ln in ldd.splitlines() if "blas" in ln), "?")
    return (f"cpu: {model}, {os.cpu_count()} vCPU (KVM); hpcc: {shutil.which('hpcc')} links {blas_line}; "
            f"libblas.so.3 -> {libblas}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--nb", type=int, default=192)
    ap.add_argument("--grid", default="1x2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--coretypes", default="default,SkylakeX", help="'default' leaves OPENBLAS_CORETYPE unset")
    today = datetime.date.today().isoformat()
    ap.add_argument("--log", default=str(REPO / "benchmarks" / f"results-{today}-emr-2vcpu-hpl.txt"))
    a = ap.parse_args()
    pr = probe()
    kinds = [None if c in ("default", "") else c for c in a.coretypes.split(",")]
    lines = [f"# speed_hpl.py {datetime.datetime.now().isoformat(timespec='seconds')}: N={a.n} NB={a.nb} "
             f"grid {a.grid}, pure (one rank per core, bound), one BLAS thread per rank, {a.rounds} interleaved rounds",
             f"# {machine()}"]

    def log(text: str) -> None:
        print(text, flush=True)
        lines.append(text)
        Path(a.log).write_text("\n".join(lines) + "\n")

    for text in lines:
        print(text)
    runs: dict[tuple[str, str], list[dict]] = {}
    for rnd in range(a.rounds):
        for kind in kinds:
            label = kind or "unset"
            order = ("builtin", "hpcc") if rnd % 2 == 0 else ("hpcc", "builtin")
            for side in order:
                load = os.getloadavg()[0]
                r = ours(pr, a.n, a.nb, a.grid, kind) if side == "builtin" else hpcc(a.n, a.nb, a.grid, kind)
                runs.setdefault((label, side), []).append(r)
                extra = (f"breakdown(max over ranks) {r['breakdown_s']}" if side == "builtin"
                         else f"{r['check']} | {r['line']}")
                log(f"round {rnd} OPENBLAS_CORETYPE={label:8s} {side:8s} {r['gflops']:8.2f} Gflop/s  "
                    f"t={r['time_s']:.3f} s  residual={r['residual']:.4g}  load1={load:.2f}  {extra}")
    log("")
    log(f"{'OPENBLAS_CORETYPE':18s} {'builtin best':>13s} {'(median)':>9s} {'hpcc best':>10s} {'(median)':>9s} "
        f"{'ratio best/best':>16s}")
    for kind in kinds:
        label = kind or "unset"
        o = sorted(r["gflops"] for r in runs[(label, "builtin")])
        h = sorted(r["gflops"] for r in runs[(label, "hpcc")])
        log(f"{label:18s} {o[-1]:13.2f} {o[len(o) // 2]:9.2f} {h[-1]:10.2f} {h[len(h) // 2]:9.2f} "
            f"{o[-1] / h[-1]:16.3f}")
        best = max(runs[(label, "builtin")], key=lambda r: r["gflops"])
        bd = best["breakdown_s"]
        log("  builtin best run's breakdown (max over ranks, s): " + ", ".join(f"{k} {v:.3f}" for k, v in bd.items())
            + f" of {best['time_s']:.3f}; mean over ranks: {best['breakdown_mean_s']}")
    print(f"log: {a.log}")


if __name__ == "__main__":
    main()
