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
from clusterbench.errors import KernelFailed, UsageError

GiB = 1 << 30


# --------------------------------------------------------------------------- unit tier

def test_budget_split_gives_every_stage_its_share_and_the_tune_comes_out_of_hpls():
    plan = ch.split_budget(900)
    assert list(plan) == list(ch.STAGES)
    assert sum(plan.values()) == pytest.approx(900)
    assert plan["hpl"] == max(plan.values())  # HPL is the largest part
    tuned = ch.split_budget(900, tune_share=0.3)
    assert tuned["tune"] == pytest.approx(0.3 * plan["hpl"]) and tuned["hpl"] == pytest.approx(0.7 * plan["hpl"])
    assert sum(tuned.values()) == pytest.approx(900)
    for bad in ((0, 0.0), (-5, 0.0), (900, 1.0), (900, -0.1)):
        with pytest.raises(UsageError):
            ch.split_budget(*bad)


def test_n_follows_the_time_left_and_the_smallest_nodes_memory():
    kw = dict(nb=192, ranks=4, p=2)
    small = ch.choose_n(60, 50.0, 64 * GiB, **kw)
    big = ch.choose_n(600, 50.0, 64 * GiB, **kw)
    assert small["bound"] == "time" and big["bound"] == "time"
    assert MIN_N_OK(small["n"]) and small["n"] < big["n"] and small["n"] % 192 == 0
    # HPL's 2/3 N^3 flops at the assumed share of the measured rate fit the seconds given
    for d, sec in ((small, 60), (big, 600)):
        assert d["expected_s"] <= sec
        assert ch.hpl_seconds(d["n"] + 2 * 192, 50.0) > sec * 0.9  # and N is not far below what fits
    # a faster cluster gets a larger N in the same time
    assert ch.choose_n(60, 500.0, 64 * GiB, **kw)["n"] > small["n"]
    # little memory bounds N whatever the time: at most the fraction of it for the matrix
    low = ch.choose_n(3600, 500.0, 1 * GiB, **kw)
    assert low["bound"] == "memory" and 8 * low["n"] ** 2 <= ch.MEM_FRACTION * GiB
    # unknown memory: the time alone
    assert ch.choose_n(60, 50.0, None, **kw)["n"] == small["n"]
    # a budget too small for any HPL worth running is refused, naming what is needed
    with pytest.raises(UsageError, match="larger --budget"):
        ch.choose_n(11, 1.0, 64 * GiB, **kw)
    with pytest.raises(UsageError):
        ch.choose_n(60, 0.0, 64 * GiB, **kw)


def MIN_N_OK(n: int) -> bool:
    return n >= ch.MIN_N


def test_the_slowest_nodes_dgemm_rate_sizes_hpl():
    doc = {"metrics": [{"benchmark": "peak", "metric": "gflops", "label": "peak gflops", "values": {"a": 30.0}},
                       {"benchmark": "dgemm", "metric": "gflops", "label": "dgemm gflops",
                        "values": {"a": 20.0, "b": 12.0, "c": 19.0}}]}
    rate, why = ch.node_rate(doc)
    assert rate == 12.0 and "(b)" in why
    assert ch.node_rate({"metrics": doc["metrics"][:1]})[0] == 30.0
    assert ch.node_rate({"metrics": []})[0] is None


def test_a_failing_stage_is_one_line_naming_it_and_the_runs_kept():
    exc = ch.StageFailed("network", KernelFailed("mpirun died", "rerun"), ["abcdef0123", "1234567890"])
    text = str(exc)
    assert "\n" not in text and "stage network failed: mpirun died" in text and "abcdef01, 12345678" in text
    assert exc.exit_code == KernelFailed.exit_code
    assert "nothing was stored" in str(ch.StageFailed("node", UsageError("bad"), []))


def test_summary_names_every_stage_and_what_holds_the_cluster_back():
    doc = {"hosts": ["n1", "n2", "n3"], "tag": "cluster-x", "budget_s": 240, "seconds": 200, "within_budget": True,
           "run_ids": ["a" * 32, "b" * 32, "c" * 32],
           "stages": {"preflight": {"ok": True, "problems": [], "seconds": 4.0},
                      "node": {"run_id": "a" * 32, "verdict": "outlier nodes: n2 (1 figure)",
                               "outlier_nodes": {"n2": ["peak gflops"]}, "seconds": 40},
                      "network": {"run_id": "b" * 32, "verdict": "slow links: n1-n2", "slow_nodes": [],
                                  "slow_links": ["n1-n2"], "seconds": 20,
                                  "median": {"latency": {"median": 40.0}, "bandwidth": {"median": 800.0}}},
                      "hpl": {"run_id": "c" * 32, "verdict": "Rmax 20 Gflop/s = 20.0% of Rpeak 100 Gflop/s",
                              "rmax_over_rpeak": 0.2, "n": 9600, "nb": 192, "grid": "1x3", "time_s": 50.0,
                              "sizing": {"bound": "time", "n_time": 9700, "n_mem": 40000}, "seconds": 60},
                      "doctor": {"verdict": "2 findings on 2 node(s)", "seconds": 2,
                                 "findings": {"n1": [{"severity": "warn", "title": "T", "rule": "r"}],
                                              "n2": [{"severity": "warn", "title": "T", "rule": "r"}], "n3": []}}}}
    doc["holds_back"] = ch.holds_back(doc)
    text = "\n".join(ch.format_summary(doc))
    for stage in ("preflight  ready", "node       outlier nodes: n2", "network    slow links: n1-n2",
                  "hpl        Rmax 20", "doctor     2 findings"):
        assert stage in text, text
    assert "slow link n1-n2" in text and "n1, n2: [warn] T (r)" in text and "20.0% of Rpeak" in text
    assert len(ch.format_summary(doc)) <= 24  # one screen
    # a tune's many trial runs are counted, not listed one by one
    doc["run_ids"] += [f"{i:08d}" + "0" * 24 for i in range(20)]
    doc["stages"]["tune"] = {"best": {"nb": 128, "grid": "1x3"}, "trials": 20, "n": 4224, "seconds": 24}
    text = "\n".join(ch.format_summary(doc))
    assert "runs tagged cluster-x: 23 (aaaaaaaa, bbbbbbbb, ..., 00000019)" in text
    assert "tune       best NB 128, grid 1x3 of 20 trial(s) at N=4224" in text
    assert max(map(len, ch.format_summary(doc))) < 160


def test_run_cluster_and_cluster_run_are_the_same_command():
    from clusterbench.cli import build_parser

    a = build_parser().parse_args(["run", "cluster", "--hosts", "a,b", "--budget", "4m", "--tag", "t1"])
    b = build_parser().parse_args(["cluster", "run", "--hosts", "a,b", "--budget", "4m", "--tag", "t1"])
    keep = ("hosts", "hostfile", "budget", "tag", "tune_share", "oversubscribe", "allow_root", "remote_python", "json")
    assert {k: getattr(a, k) for k in keep} == {k: getattr(b, k) for k in keep}
    assert ch.default_tag(0).startswith("cluster-19")


# --------------------------------------------------------------------------- integration tier

def _cli(*args: str, db: Path, timeout: float = 400) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    return subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.mark.integration
def test_run_cluster_on_three_machines_within_its_budget(tmp_path, monkeypatch, mpi):
    from machinekit import leftovers

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
        time.sleep(8.0)  # the agents measure on every node
        os.killpg(run.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
        out, rest = run.communicate(timeout=90)
        lines = (("".join(err)) + rest).strip().splitlines()
        assert run.returncode == 130, lines
        assert "stage node" in lines[-1] and "interrupted" in lines[-1], lines
        assert sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == 3  # rc-a's, kept
        time.sleep(2.0)
        assert leftovers(c) == {}
    finally:
        simcluster.down()
