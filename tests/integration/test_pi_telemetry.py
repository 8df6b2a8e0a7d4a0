"""A Raspberry Pi's telemetry as a user meets it, with a test double of the board's own tool: a
``vcgencmd`` script on PATH (not a measured component: it stands in for the firmware's answers) whose
first ``get_throttled`` is all clear and every later one under-voltage and throttled, as a board whose
supply sags once the benchmark loads it. The run's figures get flagged, the run keeps the readings,
doctor names the node and the fix; ``--power pmic`` reads the double's recorded Pi 5 PMIC output, and
without vcgencmd is refused in one line with nothing stored."""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench.telemetry.vcgencmd import parse_pmic

DATA = Path(__file__).resolve().parents[1] / "data" / "vcgencmd"

#: the double: vcgencmd's output formats, with values recorded on real boards (tests/data/vcgencmd/SOURCES.md)
FAKE_VCGENCMD = """#!/bin/sh
# TEST DOUBLE of the Raspberry Pi firmware's vcgencmd, for clusterbench's tests: the first
# get_throttled reports all clear, every later one under-voltage and throttled (now and since boot).
# On the virtual cluster each node (network namespace) counts its own calls, and only the node named
# in $state/only (when that file exists) sags.
state="${FAKE_VCGENCMD_STATE:?}"
ns=$(ip netns identify $$ 2>/dev/null)
case "$1" in
get_throttled)
  n=$(cat "$state/calls$ns" 2>/dev/null || echo 0); echo $((n + 1)) > "$state/calls$ns"
  if [ -f "$state/only" ] && [ "$(cat "$state/only")" != "$ns" ]; then echo "throttled=0x0"
  elif [ "$n" -eq 0 ]; then echo "throttled=0x0"; else echo "throttled=0x50005"; fi ;;
measure_temp) echo "temp=62.3'C" ;;
measure_clock) echo "frequency(45)=1400000000" ;;
pmic_read_adc) cat "$state/pmic" ;;
*) echo "error=1 error_msg=\\"Command not registered\\"" >&2; exit 1 ;;
esac
"""


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1", **extra}


@pytest.fixture
def fake_pi(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine whose PATH holds the vcgencmd double."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    (bin_dir / "vcgencmd").write_text(FAKE_VCGENCMD)
    (bin_dir / "vcgencmd").chmod(0o755)
    (state / "pmic").write_text((DATA / "rpi5-zeus-pmic_read_adc.txt").read_text())
    return _env(PATH=f"{bin_dir}:{os.environ.get('PATH', '')}", FAKE_VCGENCMD_STATE=str(state),
                CLUSTERBENCH_PI_SAMPLE_S="0.3")


def _cli(db: Path, env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.mark.integration
def test_a_pi_that_throttles_mid_run_is_flagged_and_doctor_names_it(fake_pi, tmp_path):
    db = tmp_path / "r.db"
    p = _cli(db, fake_pi, "run", "stream", "--quick", "--power", "pmic", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    host = socket.gethostname()
    (w,) = [w for w in doc["run"]["warnings"] if w["code"] == "pi-throttled"]
    assert w["message"].startswith(f"{host} was under-voltage, throttled during the run")
    assert "0x0 before, 0x50005 after" in w["message"] and "power supply" in w["remedy"]
    assert doc["results"] and all(any(x["code"] == "pi-throttled" for x in r["warnings"]) for r in doc["results"])
    (note,) = [n for n in doc["run"]["notes"] if n.startswith("pi: ")]
    assert "sample(s) while it ran: 62.3-62.3 °C, arm 1400-1400 MHz" in note  # sampled while it ran

    # --power pmic: the rails of the recorded Pi 5, labelled as what they are
    e = doc["run"]["energy"]
    src = e["sources"][host]
    assert src["kind"] == "pmic" and "no supply loss, no USB devices, no switch" in src["measures"]
    (whole,) = e["benchmarks"]
    assert whole["avg_watts"] == pytest.approx(parse_pmic((DATA / "rpi5-zeus-pmic_read_adc.txt").read_text()).watts,
                                               rel=1e-6)

    # stored with the run: its warnings and the readings' note
    row = sqlite3.connect(db).execute("SELECT warnings, notes FROM runs").fetchone()
    assert "pi-throttled" in row[0] and "get_throttled 0x0 before, 0x50005 after" in row[1]
    shown = _cli(db, fake_pi, "results", "show", "last")
    assert shown.returncode == 0 and f"warning [pi-throttled]: {host} was under-voltage" in shown.stdout

    # doctor names the node and the fix
    d = _cli(db, fake_pi, "doctor", "--json", timeout=120)
    assert d.returncode == 0, d.stderr
    (f,) = [f for f in json.loads(d.stdout)["findings"] if f["rule"] == "pi-throttled"]
    assert f["node"] and "under-voltage, throttled since boot" in f["summary"]
    assert any("power supply" in x for x in f["fix"]) and f["apply"] is None


@pytest.mark.integration
def test_power_pmic_without_vcgencmd_is_one_line_and_stores_nothing(tmp_path):
    path = ":".join(d for d in os.environ.get("PATH", "").split(":") if d and not (Path(d) / "vcgencmd").exists())
    db = tmp_path / "r.db"
    p = _cli(db, _env(PATH=path), "run", "stream", "--quick", "--power", "pmic", timeout=120)
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "--power pmic: vcgencmd is not installed here" in err[0] and "Raspberry Pi 5" in err[0]
    assert not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == 0


@pytest.mark.integration
def test_every_node_of_a_run_across_hosts_is_read_and_the_one_that_sagged_named(mpi, live_probe, sim_cluster,
                                                                                fake_pi, monkeypatch, tmp_path):
    """Two virtual nodes reached through launch.remote (their namespaces see this PATH): the second
    one's double sags after the first reading; the run names it, and only it."""
    from clusterbench import session
    from clusterbench.store import Store

    c = sim_cluster(2)
    a, b = (n.name for n in c.nodes)
    (Path(fake_pi["FAKE_VCGENCMD_STATE"]) / "only").write_text(b)
    for k in ("PATH", "FAKE_VCGENCMD_STATE", "CLUSTERBENCH_PI_SAMPLE_S"):
        monkeypatch.setenv(k, fake_pi[k])
    store = Store(tmp_path / "r.db")
    report = session.run(["pingpong"], {"pingpong": {"hosts": f"{a},{b}", "sizes": [8], "time_budget": 0.05,
                                                     "allow_root": True}},
                         profile="quick", store=store, timeout=120, probe_data=live_probe)
    ws = [w for w in report.run.warnings if w["code"] == "pi-throttled"]
    assert [w["message"].split(" was ")[0] for w in ws] == [b]
    notes = [n for n in report.run.notes if n.startswith("pi: ")]
    assert any(n.startswith(f"pi: {a} get_throttled 0x0 before, 0x0 after; no under-voltage") for n in notes)
    assert any(n.startswith(f"pi: {b} get_throttled 0x0 before, 0x50005 after; during the run") for n in notes)
    assert all(any(x["code"] == "pi-throttled" for x in r.warnings) for r in report.results)
    assert [w["code"] for w in store.get_run(report.run.id).warnings].count("pi-throttled") == 1
