"""Energy and Gflops per watt (issue 12): the integration of power samples and counters
(energy/figures.py), the power sources (energy/: specs, RAPL on a powercap snapshot with a
counter that wraps, meter output, CSV logs, IPMI's line, HPL's start/end lines), the timed phase and
the per-watt figures (RunContext), and, as a user runs it, HPL with a meter command that prints a
constant, a meter that starts failing mid-run, one that hangs or prints garbage, a CSV log that does
not cover the timed phase and bad options: one-line errors or energy marked missing, never a wrong
figure."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench.energy.build import this_host

from energykit import _write_step_csv

REPO = Path(__file__).resolve().parents[2]


# -- as a user runs it (processes) --------------------------------------------------------------
@pytest.fixture
def _root_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")


def _cli(db: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"})


def _runs(db: Path) -> int:
    return sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] if db.exists() else 0


@pytest.mark.integration
def test_hpl_gflops_per_watt_is_rmax_over_a_constant_meter(mpi, tmp_path, _root_ok):
    p = _cli(tmp_path / "r.db", "run", "hpl", "--n", "1000", "--power", "cmd:echo 50", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    by = {r["metric"]: r for r in doc["results"]}
    assert by["gflops_per_watt"]["value"] == pytest.approx(by["rmax"]["value"] / 50, rel=0.01)
    e = by["rmax"]["params"]["energy"]
    assert e["avg_watts"] == pytest.approx(50.0) and e["phase_from"].startswith("the kernel's wall clock")
    assert e["phase_s"] == pytest.approx(by["time_s"]["value"], rel=0.05, abs=0.005)  # the kernel's own phase
    run = doc["run"]["energy"]
    assert run["sources"][this_host()]["kind"] == "cmd" and run["benchmarks"][0]["avg_watts"] == pytest.approx(50.0)
    stored = sqlite3.connect(tmp_path / "r.db").execute("SELECT energy FROM runs").fetchone()[0]
    assert json.loads(stored)["benchmarks"][0]["benchmark"] == "hpl"


@pytest.mark.integration
def test_a_meter_that_starts_failing_mid_run_keeps_the_figure(mpi, tmp_path, _root_ok):
    """The meter answers twice (the check, the first sample), then fails: rmax is stored, its energy is
    missing with the reason, no gflops_per_watt."""
    count = tmp_path / "count"
    cmd = (f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}; "
           "[ $n -lt 2 ] && echo 50 || { echo 'meter unplugged' >&2; exit 3; }")
    p = _cli(tmp_path / "r.db", "run", "hpl", "--n", "1000", "--power", f"cmd:{cmd}", "--power-interval", "0.2",
             "--json")
    assert p.returncode == 0, p.stderr
    by = {r["metric"]: r for r in json.loads(p.stdout)["results"]}
    assert "gflops_per_watt" not in by and by["rmax"]["value"] > 0
    miss = by["rmax"]["params"]["energy"]["missing"]
    assert "the meter failed" in miss and "exited with status 3: meter unplugged" in miss
    assert "energy-missing" in [w["code"] for w in by["rmax"]["warnings"]]


@pytest.mark.integration
def test_garbage_hang_and_bad_options_are_one_line_errors_with_nothing_stored(tmp_path, _root_ok):
    db = tmp_path / "r.db"
    cases = [
        (["--power", "cmd:echo hello"], "the meter command failed at the start: the meter printed 'hello'"),
        (["--power", "cmd:exit 4"], "exited with status 4"),
        (["--watts", "-1"], "--watts: -1.0 W is not a power a running node draws"),
        (["--watts", "1e-300"], "--watts: 1e-300 W is not a power a running node draws"),
        (["--power", "watts:0"], "'0' W is not a power"),
        (["--power", "amps:3"], "unknown power source 'amps'"),
        (["--power", f"csv:{tmp_path}/none.csv"], "no file"),
        (["--power", "n9=watts:5"], "n9 is not a node of this run"),
        (["--power-interval", "1"], "without a power source"),
    ]
    for extra, needle in cases:
        p = _cli(db, "run", "fpu", "--quick", *extra)
        err = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(err) == 1 and needle in err[0], (extra, p.stderr)
    t = time.monotonic()
    p = _cli(db, "run", "fpu", "--quick", "--power", "cmd:sleep 31.25")
    took = time.monotonic() - t
    assert p.returncode == 2 and "no answer within 2 s (killed)" in p.stderr, p.stderr
    assert took < 15
    left = subprocess.run(["pgrep", "-f", "sleep 31.25"], capture_output=True, text=True).stdout.split()
    assert left == []  # its process group was killed
    assert _runs(db) == 0


@pytest.mark.integration
def test_a_csv_log_that_does_not_cover_the_timed_phase(mpi, tmp_path, _root_ok):
    log = tmp_path / "meter.csv"
    now = time.time()
    _write_step_csv(log, now - 5, now - 30, now - 10)  # ends 10 s before the run starts
    p = _cli(tmp_path / "r.db", "run", "hpl", "--n", "600", "--power", f"csv:{log}", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    by = {r["metric"]: r for r in doc["results"]}
    assert "gflops_per_watt" not in by and by["rmax"]["value"] > 0
    assert "does not cover the interval: the last power sample is" in by["rmax"]["params"]["energy"]["missing"]
    assert "does not cover" in doc["run"]["energy"]["benchmarks"][0]["missing"]


@pytest.mark.integration
def test_a_csv_log_written_during_the_run_gives_the_energy(mpi, tmp_path, _root_ok):
    """A logger thread appends 20 W every 0.1 s while hpl runs: the energy comes through the CSV source."""
    import threading

    log = tmp_path / "meter.csv"
    log.write_text("time,watts\n")
    stop = threading.Event()

    def logger() -> None:
        with open(log, "a") as fh:
            while not stop.is_set():
                fh.write(f"{time.time():.3f},20\n")
                fh.flush()
                time.sleep(0.1)

    th = threading.Thread(target=logger, daemon=True)
    th.start()
    try:
        time.sleep(0.3)
        p = _cli(tmp_path / "r.db", "run", "hpl", "--n", "800", "--power", f"csv:{log}", "--json")
    finally:
        stop.set()
        th.join()
    assert p.returncode == 0, p.stderr
    by = {r["metric"]: r for r in json.loads(p.stdout)["results"]}
    assert by["rmax"]["params"]["energy"]["avg_watts"] == pytest.approx(20.0)
    assert by["gflops_per_watt"]["value"] == pytest.approx(by["rmax"]["value"] / 20, rel=0.01)
