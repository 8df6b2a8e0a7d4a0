"""``run cluster`` (= ``cluster run``): the whole cluster characterised in one command within a budget.

Unit tier: the budget split, N from the time left and the memory (pure functions), the summary, the
command names. Integration tier: three separate machines installed with ``cluster install``; a
cluster that is not installed stops at preflight with its problems, nothing stored; once installed,
``run cluster --budget 4m --oversubscribe`` completes within its budget, stores the node-profile,
network and hpl runs under one tag, names each stage's verdict, ``report TAG`` renders them, and
nothing is left on the machines."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench.cluster import characterise as ch


# --------------------------------------------------------------------------- integration tier

def _cli(*args: str, db: Path, timeout: float = 400) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    return subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.mark.integration
@pytest.mark.slow
def test_run_cluster_on_three_machines_within_its_budget(tmp_path, monkeypatch, mpi):
    from machinekit import leftovers, on

    from clusterbench.errors import EnvironmentProblem
    from clusterbench.launch import simcluster

    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        pytest.skip("the virtual cluster needs root")
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    try:
        c = simcluster.up(3, machines=True)
    except EnvironmentProblem as exc:
        pytest.skip(f"machines unusable here: {exc}")
    try:
        db = tmp_path / "r.db"
        hf = tmp_path / "hosts"
        hf.write_text(simcluster.hostfile_text())
        # not installed yet: preflight stops it, each problem one line, nothing stored
        p = _cli("run", "cluster", "--hostfile", str(hf), "--budget", "4m", "--oversubscribe", db=db)
        assert p.returncode == 3, p.stdout + p.stderr
        assert "run cluster: preflight: problem [version] clusterbench is not installed on node1, node2, node3" \
            in p.stderr, p.stderr
        assert "nothing was run or stored" in p.stderr.strip().splitlines()[-1]
        assert not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == 0
        assert _cli("cluster", "install", "--hostfile", str(hf), db=db).returncode == 0

        t = time.monotonic()
        p = _cli("run", "cluster", "--hostfile", str(hf), "--budget", "4m", "--oversubscribe", "--tag", "rc-a",
                 "--json", db=db)
        took = time.monotonic() - t
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        print("\n".join(ch.format_summary(doc)))
        print(f"run cluster --budget 4m on 3 machines: {took:.1f} s")
        assert doc["run_cluster_schema"] == 1 and doc["tag"] == "rc-a" and doc["within_budget"]
        assert doc["ok"] and doc["missing"] == [], [(s, doc["stages"][s].get("reason")) for s in doc["missing"]]
        assert took <= 240 + 10, took  # the budget, plus this Python's start and the JSON
        # progress on stderr: which stage and the time left
        for i, stage in enumerate(ch.STAGES, 1):
            assert f"[{i}/5 {stage}]" in p.stderr and "budget left" in p.stderr
        st = doc["stages"]
        assert st["preflight"]["ok"] and set(st) == set(ch.STAGES)
        assert all(st[s]["verdict"] for s in ("node", "network", "hpl", "doctor"))
        hpl = st["hpl"]
        assert hpl["rmax_gflops"] > 0 and hpl["rpeak_gflops"] > 0 and 0 < hpl["rmax_over_rpeak"] < 1
        assert hpl["n"] == hpl["sizing"]["n"] and hpl["sizing"]["bound"] == "time"
        text = "\n".join(ch.format_summary(doc))
        for stage in ("preflight", "node", "network", "hpl", "doctor"):
            assert f"  {stage}" in text
        assert "what holds the cluster back" in text and "% of Rpeak" in text
        # one tagged set of runs: the node profile, the network matrix, HPL
        assert len(doc["run_ids"]) == 3
        runs = json.loads(_cli("results", "list", "--tag", "rc-a", "--json", db=db).stdout)["runs"]
        assert {r["id"] for r in runs} == set(doc["run_ids"]) and {r["status"] for r in runs} == {"complete"}
        for bench in ("dgemm", "allpairs", "hpl"):
            one = json.loads(_cli("results", "list", "--tag", "rc-a", "--benchmark", bench, "--json", db=db).stdout)
            assert len(one["runs"]) == 1, bench
        p = _cli("report", "rc-a", "-o", str(tmp_path / "rep"), db=db)
        assert p.returncode == 0 and "report of 3 run(s)" in p.stdout, p.stderr
        assert (tmp_path / "rep" / "index.html").exists()
        # compare reads the tagged set as one side: against a second network matrix (short, its own tag)
        p = _cli("sweep", "network", "--hosts", "node1,node2,node3", "--pair-budget", "0.2", "--oversubscribe",
                 "--tag", "rc-n", db=db)
        assert p.returncode == 0, p.stderr
        p = _cli("compare", "rc-a", "rc-n", "--benchmark", "allpairs", "--json", db=db)
        assert p.returncode == 0, p.stderr
        cmp_doc = json.loads(p.stdout)
        assert {r["id"] for r in cmp_doc["sides"]["a"]["runs"]} == set(doc["run_ids"]), cmp_doc["sides"]["a"]
        assert len(cmp_doc["matches"]) >= 3 * 2, cmp_doc["summary"]  # latency and bandwidth of each pair
        time.sleep(1.0)
        assert leftovers(c) == {}

        # Ctrl-C in the middle of a stage: one line naming it, exit 130, nothing left on the nodes
        run = subprocess.Popen([sys.executable, "-m", "clusterbench", "--db", str(db), "run", "cluster", "--hostfile",
                                str(hf), "--budget", "4m", "--oversubscribe", "--tag", "rc-b"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                               env={**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"})
        err = []
        for line in run.stderr:  # type: ignore[union-attr]
            err.append(line)
            if "[2/5 node]" in line:
                break
        # the agents measure on every node (the stage's work fits its time, so it may be short: watch for them)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "clusterbench.sweep.agent" not in \
                on(c, "node1", "ps", "-e", "-o", "args=").stdout:
            time.sleep(0.2)
        time.sleep(1.0)
        os.killpg(run.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
        out, rest = run.communicate(timeout=90)
        lines = (("".join(err)) + rest).strip().splitlines()
        assert run.returncode == 130, lines
        assert "stage node" in lines[-1] and "interrupted" in lines[-1], lines
        assert sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == 4  # rc-a's and rc-n's, kept
        time.sleep(2.0)
        assert leftovers(c) == {}
    finally:
        simcluster.down()
