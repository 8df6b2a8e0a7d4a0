"""ROSS's ``phold`` model, the reference of speed/pdes_vs_ross.py: built from its source tarball, its command
line, one watched run (a launch that hangs is killed and retried), and its end-of-run statistics parsed into
the figures the comparison reads (committed events per second, efficiency, rollbacks, GVT rounds).

ROSS is built for measurement only, in a temporary directory, from ``../shared/reference/ross-*.tar.gz``
(cmake -DROSS_BUILD_MODELS=ON, CMAKE_C_COMPILER=mpicc, Release with -O3 -DNDEBUG), never copied into the
project. Imported by speed/pdes_vs_ross.py (the folder of a script is on its import path).
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "reference"
ROOT_MPI = ["--allow-run-as-root"] if os.geteuid() == 0 else []
ROSS_FLAGS = "-O3 -DNDEBUG"
CMAKE = ["-DROSS_BUILD_MODELS=ON", "-DCMAKE_C_COMPILER=mpicc", "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_C_FLAGS_RELEASE={ROSS_FLAGS}"]


class RunFailed(RuntimeError):
    pass


def build_ross(work: Path, say) -> Path:
    tarball = sorted(SHARED.glob("ross-*.tar.gz"))[-1]
    subprocess.run(["tar", "xzf", str(tarball), "-C", str(work)], check=True)
    src = next(p for p in work.iterdir() if p.is_dir())
    build = work / "build"
    cfg = ["cmake", "-S", str(src), "-B", str(build), *CMAKE]
    mk = ["make", "-C", str(build), f"-j{os.cpu_count() or 2}", "phold"]
    say(f"ROSS source {tarball.name}; build: {shlex.join(cfg)} && {shlex.join(mk)}")
    t0 = time.monotonic()
    for cmd in (cfg, mk):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"ROSS build failed: {shlex.join(cmd)}:\n{(p.stdout + p.stderr)[-2000:]}")
    binary = build / "models" / "phold" / "phold"
    say(f"ROSS built in {time.monotonic() - t0:.1f} s: {binary}")
    return binary


ROSS_FIELDS = {
    "running_time_s": r": Running Time = ([0-9.]+) seconds",
    "processed": r"Total Events Processed\s+(\d+)",
    "rolled_back": r"Events Rolled Back\s+(\d+)",
    "ross_efficiency_pct": r"Efficiency\s+(-?[0-9.]+) %",
    "remote_network": r"Total Remote \(network\) Events Processed\s+(\d+)",
    "rollbacks": r"Total Roll Backs\s+(\d+)",
    "primary_rollbacks": r"Primary Roll Backs\s+(\d+)",
    "secondary_rollbacks": r"Secondary Roll Backs\s+(\d+)",
    "gvt_rounds": r"Total GVT Computations\s+(\d+)",
    "net": r"Net Events Processed\s+(\d+)",
    "event_rate": r"Event Rate \(events/sec\)\s+([0-9.]+)",
    "past_end": r"Total Events Scheduled Past End Time\s+(\d+)",
    "events_allocated": r"Events Allocated\s+(\d+)",
    "remote_sends": r"Remote sends\s+(\d+)",
}


def parse_ross(text: str) -> dict:
    """ROSS's end-of-run statistics (core/tw-stats.c): net = processed - rolled back; event rate = net /
    max PE wall time ("Running Time"); efficiency = 100 (1 - rolled back / net)."""
    out: dict = {}
    for key, pat in ROSS_FIELDS.items():
        m = re.search(pat, text)
        if m:
            out[key] = float(m.group(1)) if "." in m.group(1) else int(m.group(1))
    missing = [k for k in ("running_time_s", "processed", "net", "event_rate") if k not in out]
    if missing:
        raise RunFailed(f"ROSS printed no {', '.join(missing)}:\n{text[-1500:]}")
    out["eps"] = out["net"] / out["running_time_s"]  # = ROSS's Event Rate
    out["committed"] = out["net"]
    out["efficiency"] = out["net"] / out["processed"]  # committed / processed, as ours
    return out


def ross_cmd(binary: Path, synch: int, ranks: int, a, mean: float, extramem: int | None,
             launch: list[str] | None = None) -> list[str]:
    """``launch``: mpirun and its options up to the program (default: this node, one rank per core)."""
    if launch is None:
        launch = ["mpirun", *ROOT_MPI, "-n", str(ranks), "--bind-to", "core", "--map-by", "core"]
    cmd = [*launch, str(binary),
           f"--synch={synch}", f"--nlp={a.lps // ranks}", f"--end={a.end:g}", f"--remote={a.remote:g}",
           f"--lookahead={a.lookahead:g}", f"--mean={mean:g}", f"--start-events={a.start_events}"]
    if extramem is not None:
        cmd.append(f"--extramem={extramem}")
    return cmd


def run_watched(cmd: list[str], cwd: str, timeout: float, launch_timeout: float, started: str) -> tuple[int, str]:
    """Run ``cmd`` in its own process group with its output in a file; kill the group (SIGKILL) if it has
    printed no ``started`` within ``launch_timeout`` s (Open MPI's launch across the virtual cluster's
    namespaces now and then hangs before any rank starts: clusterbench's own runs retry it too) or if it
    is still running after ``timeout`` s. Returns (exit status or None on a launch hang, output)."""
    out_path = Path(cwd) / "out.txt"
    with open(out_path, "w") as f:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    t0 = time.monotonic()
    while proc.poll() is None:
        time.sleep(0.1)
        el = time.monotonic() - t0
        hung = el > launch_timeout and started not in out_path.read_text(errors="replace")
        if hung or el > timeout:
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
            proc.wait()
            text = out_path.read_text(errors="replace")
            if hung:
                return None, text
            raise subprocess.TimeoutExpired(cmd, timeout, output=text)
    return proc.returncode, out_path.read_text(errors="replace")


def ross(binary: Path, synch: int, ranks: int, a, mean: float, say, launch: list[str] | None = None) -> dict:
    """One ROSS run in a scratch directory (it appends to ./ross.csv). An optimistic run that runs out of
    event buffers ("Out of events ... --extramem") is retried with twice the extramem; a launch that hangs
    (no "tw_net_start" within --launch-timeout s) is killed and retried up to twice."""
    extramem = a.extramem if synch == 3 else None
    hangs = 0
    while True:
        cmd = ross_cmd(binary, synch, ranks, a, mean, extramem, launch)
        with tempfile.TemporaryDirectory(prefix="cb-ross-run-") as d:
            os.chmod(d, 0o755)
            t0 = time.monotonic()
            rc, text = run_watched(cmd, d, a.timeout, a.launch_timeout, "tw_net_start")
            wall = time.monotonic() - t0
        if rc is None:
            hangs += 1
            say(f"  ROSS launch hung (no output in {a.launch_timeout:g} s), killed{'; retrying' if hangs <= 2 else ''}")
            if hangs <= 2:
                continue
            raise RunFailed(f"{shlex.join(cmd)}: the launch hung {hangs} times")
        if rc != 0 and "increasing --extramem" in text and extramem is not None and extramem < 1 << 24:
            say(f"  ROSS out of event buffers with --extramem={extramem}; retrying with {extramem * 2}")
            extramem *= 2
            a.extramem = extramem
            continue
        if rc != 0:
            raise RunFailed(f"{shlex.join(cmd)}: exit {rc}:\n{text[-1500:]}")
        r = parse_ross(text)
        r["cmd"] = shlex.join(cmd)
        r["wall_s"] = wall
        r["launch_hangs"] = hangs
        return r
