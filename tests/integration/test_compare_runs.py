"""compare on real runs: STREAM in cache and in memory is significantly different, its ratio the pooled
samples'; two MPI runs on the virtual cluster at MTU 1500
and 9000 name the MTU in what else changed. (The false-positive rate on identical runs is measured by
speed/compare_fpr.py, not asserted here: a test that fails 5% of the time by design is not a test.)"""
from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from clusterbench import session
from clusterbench.report.compare import compare_sides, format_comparison
from clusterbench.store import Store


@pytest.mark.integration
def test_stream_in_cache_against_in_memory_is_significant(tmp_path: Path, live_probe) -> None:
    """STREAM with its arrays in the last-level cache against arrays 8x beyond it: compare calls the
    difference significant and its ratio is the pooled samples' medians (the size is not one of STREAM's key params:
the figures match as one). (This
    once compared 1 and 2 threads and skipped when a busy 2-vCPU machine showed no thread scaling; the
    cache-memory gap is large on every machine, busy or not: 1.6-3.2x here.)"""
    caches = [c for c in ((live_probe.get("topology") or {}).get("caches") or []) if c.get("size_bytes")]
    llc = max((int(c["size_bytes"]) for c in caches), default=1 << 20)
    small = max(2_000, llc // (3 * 8 * 4))  # the three arrays in a quarter of the cache
    large = max(10_000_000, 8 * llc // (3 * 8))
    store = Store(tmp_path / "s.db")
    for _ in range(4):  # alternating, as a user should: A B A B ...
        for n, tag in ((large, "memory"), (small, "cache")):
            session.run(["stream"], {"stream": {"threads": 1, "sweep": False, "ntimes": 10, "array_elements": n}},
                        store=store, probe_data=live_probe, tags=[tag])
    doc = compare_sides(store, "memory", "cache")
    triad = [m for m in doc["matches"] if m["metric"] == "triad"]
    assert {m["params"]["variant"] for m in triad} == {"regular", "nt"}, [m["label"] for m in triad]
    for m in triad:
        c = m["comparison"]
        pooled = statistics.median(m["samples_b"]) / statistics.median(m["samples_a"])
        assert abs(c["ratio"] / pooled - 1) < 1e-9, (pooled, c["ratio"])
        if m["params"]["variant"] == "regular":
            assert c["ratio"] > 1.2 and c["verdict"] == "better" and c["ci_low"] > 1.0, (m["label"], c)
        else:  # non-temporal stores go to memory whatever the arrays' size: the in-cache gain is the loads'
            # alone, 1.5-4.3x on this VM under load but 1.16 once on an idle fresh clone, where its interval
            # may reach 1: not worse is all that holds everywhere
            assert c["verdict"] in ("better", "no significant difference") and c["ratio"] > 0.95, (m["label"], c)
    text = format_comparison(doc)
    assert "triad" in text and "better" in text, text


@pytest.mark.integration
def test_mtu_change_between_two_mpi_runs_is_named(mpi, live_probe, sim_cluster, tmp_path: Path) -> None:
    from clusterbench.launch import simcluster

    store = Store(tmp_path / "m.db")
    for mtu in (1500, 9000):
        c = sim_cluster(2, mtu=mtu)
        for _ in range(2):
            session.run(["pingpong"], {"pingpong": {"hosts": ",".join(n.name for n in c.nodes), "sizes": [8, 65536],
                                                    "transport": "tcp", "allow_root": True}},
                        profile="quick", store=store, timeout=120, probe_data=live_probe, tags=[f"mtu{mtu}"])
        simcluster.down()
    doc = compare_sides(store, "mtu1500", "mtu9000")
    labels = [e["label"] for e in doc["env"]]
    assert any("MTU" in x and "1500" in x and "9000" in x for x in labels), labels
    assert "MTU" in format_comparison(doc)


def _cb(db: Path, *args: str, timeout: float = 180):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.mark.integration
def test_a_run_still_running_then_killed_is_not_pooled(tmp_path: Path) -> None:
    """Issue 23: a `run fpu` still measuring (4 of its 20 figures stored) was pooled into side B without a
    word. Now it is left out and named, while it runs and once it is killed with SIGKILL;
    --include-incomplete pools it."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    db = tmp_path / "r.db"
    for tag in ("old", "old", "new"):  # not hex: a tag that is also a run id's prefix must be told apart
        done = _cb(db, "run", "fpu", "--quick", "--ops", "add", "--tag", tag)
        assert done.returncode == 0, done.stderr
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    slow = subprocess.Popen([sys.executable, "-m", "clusterbench", "--db", str(db), "run", "fpu", "--samples", "5",
                             "--min-time", "0.1", "--tag", "new"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)
    try:
        end = time.monotonic() + 120
        running = None
        while time.monotonic() < end and slow.poll() is None:
            runs = [r for r in Store(db, readonly=True).list_runs(tag="new") if r.status == "running"]
            if runs and runs[0].results >= 4:
                running = runs[0]
                break
            time.sleep(0.1)
        assert running is not None, "the slow run never stored its first figures"
        done = _cb(db, "compare", "old", "new", "--json")
        assert done.returncode == 0, done.stderr
        b = json.loads(done.stdout)["sides"]["b"]
        assert [r["status"] for r in b["runs"]] == ["complete"]
        (left,) = b["left_out"]
        assert left["id"] == running.id and left["status"] == "running" and "still running" in left["reason"]
        assert f"pid {slow.pid}" in left["reason"]
    finally:
        slow.send_signal(signal.SIGKILL)
        slow.wait(timeout=60)
    done = _cb(db, "compare", "old", "new")
    assert done.returncode == 0, done.stderr
    assert "B: left out 1 run(s) not complete" in done.stdout and "the process running it died" in done.stdout
    done = _cb(db, "compare", "old", "new", "--include-incomplete", "--json")
    assert done.returncode == 0 and running.id in [r["id"] for r in json.loads(done.stdout)["sides"]["b"]["runs"]]
