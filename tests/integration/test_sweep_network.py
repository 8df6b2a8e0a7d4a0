"""`sweep network`: the round-robin schedule, the matrices and the judge (pure, on the issue's
figures too), the kernel following the schedule, and faults injected into 4- and 8-node virtual
clusters (a node at MTU 1500 among 9000, a node rate-limited with tc, both at once), each swept once
and flagged; healthy clusters (4 nodes, and 32 oversubscribed within a bound) flag nothing or say
too noisy."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from clusterbench.benchmarks.mpi.allpairs import round_robin
from clusterbench.sweep import network as sw


# --------------------------------------------------------------------------- the kernel, locally
@pytest.mark.integration
@pytest.mark.parametrize("n", [3, 4])
def test_kernel_follows_the_schedule_and_validates(mpi, live_probe, n: int) -> None:
    """Run allpairs.c itself with n local ranks: its reported pairing is the Python schedule, every
    round is validated before its results, and the corrupt hook fails validation."""
    from clusterbench.benchmarks.base import RunContext

    ctx = RunContext(probe=live_probe)
    b = ctx.build("allpairs", openmp=False, cc=mpi.mpicc)
    base = [mpi.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(n), "--mca", "btl", "self,vader",
            str(b.path), "--pair_budget=0.02", "--bw_size=65536"]
    p = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    recs = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    got: dict[int, list[tuple[int, int]]] = {}
    validated = set()
    for rec in recs:
        if rec["type"] == "validation":
            assert rec["ok"] and rec["checked"]
            validated.add(int(rec["detail"].split()[1].rstrip(":")))
        if rec["type"] == "result":
            assert rec["round"] in validated
            got.setdefault(rec["round"], []).append(tuple(rec["ranks"]))
            assert rec["latency_us"] > 0 and rec["bandwidth_MBps"] > 0 and rec["samples"]
    assert [sorted(got[r]) for r in sorted(got)] == round_robin(n)
    summary = next(r for r in recs if r["type"] == "summary")
    assert summary["pairs"] == n * (n - 1) // 2 and 0 < summary["measure_s"] <= summary["kernel_s"]
    bad = subprocess.run([*base, "--corrupt=1"], capture_output=True, text=True, timeout=120)
    lines = [json.loads(ln) for ln in bad.stdout.splitlines() if ln.startswith("{")]
    assert any(r["type"] == "validation" and not r["ok"] and "differs from the pattern" in r["detail"] for r in lines)


# --------------------------------------------------------------------------- the virtual cluster
# Each sweep below runs once, as a user runs it: no retry until it flags. MTU 9000 with offloads off
# (every frame MTU-sized, as on a wire), so a node at MTU 1500 carries about half; a node rate-limited
# with tc (tbf) carries its limit one way of each round trip. The nodes share this machine's 2 cores
# (with whatever else runs on it), so healthy links wander by tens of percent and 8-byte round trips
# by far more: the judge re-measures the suspects and may call latency too noisy, never flag it here.
def _bw(doc: dict, pair: str) -> float:
    return next(p["bandwidth_MBps"] for p in doc["pairs"] if p["pair"] == pair)


def _limit(c: Any, node: str, rate_bps: int) -> None:
    from clusterbench.launch.simcluster import lifecycle

    subprocess.run(["tc", "-n", c.node(node).namespace, "qdisc", "replace", "dev", "cb0", "root",
                    *lifecycle.tbf_args(rate_bps, 9000)], check=True)


def _mtu(c: Any, node: str, mtu: int) -> None:
    subprocess.run(["ip", "-n", c.node(node).namespace, "link", "set", "dev", "cb0", "mtu", str(mtu)], check=True)


def _sweep_once(capsys, names: list[str], db: Any, tag: str, *extra: str) -> dict:
    """One `sweep network --json` through the CLI, stored; its text (what the command prints without
    --json) is printed (with -s: the README's example)."""
    from clusterbench.cli import main

    t0 = time.monotonic()
    assert main(["--db", str(db), "sweep", "network", "--hosts", ",".join(names), "--allow-root", "--oversubscribe",
                 "--pair-budget", "0.3", "--tag", tag, "--json", *extra]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    (Path(str(db)).parent / f"{tag}.json").write_text(out)
    took = time.monotonic() - t0
    with capsys.disabled():
        print(f"\n[{tag}] {took:.1f} s\n" + "\n".join(sw.format_sweep_network(doc)))
    assert doc["sweep_schema"] == 2 and doc["nodes"] == names
    assert len(doc["pairs"]) == len(names) * (len(names) - 1) // 2
    assert doc["params"]["transport_used"] == "tcp" and doc["orchestration"]["per_node_s"] > 0
    return doc


def _best_factor(doc: dict, node: str) -> float:
    """How many times below the judge's bandwidth reference the node's best link measured."""
    best = max(max(p["measurements"]["bandwidth_MBps"]) for p in doc["pairs"] if node in p["nodes"])
    return doc["judge"]["bandwidth"]["reference"] / best


def _assert_faults(doc: dict, bad: set[str], limited: str | None, hidden_ok: frozenset[str] = frozenset(),
                   shared_cpu_slack: bool = False) -> None:
    """What the issue asks of one sweep, run once: every faulty node is flagged slow on bandwidth,
    the rate-limited one (x10 and more below the others) with every link it has; no healthy node is
    flagged on either metric, and no link between two healthy nodes. How often that held, case by case,
    is in speed/results-2026-11-26-amd-epyc-2vcpu-sweep-judge*.txt (speed/sweep_network_judge.py,
    docs/sweep.md). ``hidden_ok``: MTU-1500 nodes of a 4-node cluster, which those logs show measuring
    as well as the healthy pair in some sweeps (best link x1.13 below the reference: the fault did not
    show); such a node may go unflagged only when its best link is less than x1.5 below the reference
    or bandwidth is too noisy to judge, and then it is said on stderr. ``shared_cpu_slack`` (8 virtual
    nodes on 2 cores: four pairs a round share the cpus, and a healthy node's share of them can stay low
    for a whole sweep, both of its measurements; seen once in a full suite, 192-304 MB/s on every link of
    a healthy node against a reference of 580, and 0 times in the logs' 20 sweeps of 8 nodes): one
    healthy node may be flagged, only when the data show it slow (its best link past the slow factor)
    and less slow than every faulty node; it is said on stderr."""
    flags = doc["flags"]
    verdict = doc["judge"]["bandwidth"]
    slow_nodes = {f["node"] for f in flags["nodes"] if f["metric"] == "bandwidth"}
    mine = {p["pair"] for p in doc["pairs"] if bad & set(p["nodes"])}
    if shared_cpu_slack and slow_nodes - bad:
        extra = slow_nodes - bad
        assert len(extra) <= 1, (extra, verdict)
        [nd] = extra
        f = _best_factor(doc, nd)
        print(f"{nd}: healthy but its best link x{f:.2f} below the reference: flagged", file=sys.__stderr__)
        assert f >= verdict["slow_factor"] and all(f < _best_factor(doc, b) for b in bad), (nd, f, flags, verdict)
        mine |= {p["pair"] for p in doc["pairs"] if nd in p["nodes"]}
        bad = bad | extra
        slow_nodes = slow_nodes | extra
    for nd in sorted(bad):
        f = _best_factor(doc, nd)
        print(f"{nd}: best link x{f:.2f} below the reference, bandwidth {verdict['status']}, "
              f"{'flagged' if nd in slow_nodes else 'not flagged'}", file=sys.__stderr__)
        if nd not in slow_nodes and nd in hidden_ok:
            assert f < 1.5 or verdict["status"] != "judged", (nd, f, flags, verdict)
            continue
        assert nd in slow_nodes, (nd, f, flags, verdict)
    assert not {f["node"] for f in flags["nodes"]} - bad, (flags, doc["judge"])
    assert not {f["pair"] for f in flags["links"]} - mine, (flags, doc["judge"])
    if limited:
        assert {p["pair"] for p in doc["pairs"] if limited in p["nodes"]} <= {
            f["pair"] for f in flags["links"] if f["metric"] == "bandwidth"}, (flags, verdict)


@pytest.mark.integration
def test_four_healthy_nodes_flag_nothing(mpi, live_probe, module_sim_cluster, tmp_path, capsys) -> None:
    c = module_sim_cluster(4, mtu=9000, offload=False)
    doc = _sweep_once(capsys, [n.name for n in c.nodes], tmp_path / "r.db", "healthy4")
    assert doc["flags"] == {"links": [], "nodes": []}, (doc["flags"], doc["judge"])
    assert doc["evidence"] == [] and doc["slow_nodes"] == [] and doc["slow_links"] == []


@pytest.mark.integration
def test_four_nodes_one_at_mtu_1500(mpi, live_probe, module_sim_cluster, tmp_path, capsys) -> None:
    """One node at MTU 1500 among 9000: its links carry about half. Its NIC is evidence of its own
    (the probe of every node is stored with the run), so its links are slow from x1.15 times this
    machine's noise. (The module's cluster: the node is set back to 9000 afterwards.)"""
    c = module_sim_cluster(4, mtu=9000, offload=False)
    names = [n.name for n in c.nodes]
    _mtu(c, names[2], 1500)
    try:
        doc = _sweep_once(capsys, names, tmp_path / "r.db", "mtu1500")
    finally:
        _mtu(c, names[2], 9000)
    assert [(e["node"], e["what"], e["value"]) for e in doc["evidence"]] == [(names[2], "mtu", 1500)]
    _assert_faults(doc, {names[2]}, None, hidden_ok=frozenset({names[2]}))


@pytest.mark.integration
def test_four_nodes_two_faults_at_once(mpi, live_probe, module_sim_cluster, tmp_path, capsys) -> None:
    """The issue's cluster: node 2 rate-limited to 50 Mbit/s and node 3 at MTU 1500 at the same time,
    so five of the six links are slow. Both nodes and their links are flagged, the healthy pair is
    not. Stored as one run like any other; an unknown host is a one-line error and stores nothing."""
    from clusterbench.cli import main
    from clusterbench.store import Store

    c = module_sim_cluster(4, mtu=9000, offload=False)  # the module's last user of it: its faults stay
    names = [n.name for n in c.nodes]
    db = tmp_path / "r.db"
    _limit(c, names[1], 50_000_000)
    _mtu(c, names[2], 1500)
    # 1 MiB messages: a 4 MiB one takes 0.7 s each way over the 50 Mbit/s link (the sweep took 10 s, now 6)
    doc = _sweep_once(capsys, names, db, "two-faults", "--bw-size", "1048576")
    _assert_faults(doc, {names[1], names[2]}, limited=names[1], hidden_ok=frozenset({names[2]}))
    # 50 Mbit/s = 6.25 MB/s out of the limited node, unlimited into it: a ping-pong's half round trip
    # carries about 2 x 6.25 MB/s
    assert all(_bw(doc, p["pair"]) < 20 for p in doc["pairs"] if names[1] in p["nodes"]), doc["pairs"]
    assert any(p.get("suspect") for p in doc["pairs"]) and all(
        len(p["measurements"]["bandwidth_MBps"]) == 2 for p in doc["pairs"] if p.get("suspect"))

    st = Store(db)
    runs = st.select_runs("two-faults")
    assert len(runs) == 1
    figures = st.results(runs[0])
    assert {r.params["pair"] for r in figures} == {p["pair"] for p in doc["pairs"]}
    assert {r.metric for r in figures} == {"latency", "bandwidth"} and len(figures) == 12
    n_before = _count_runs(db)
    assert main(["--db", str(db), "sweep", "network", "--hosts", f"{names[0]},{c.prefix}n9", "--allow-root",
                 "--oversubscribe"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such node" in err, err
    assert _count_runs(db) == n_before


@pytest.mark.integration
@pytest.mark.slow
def test_eight_nodes_one_fault(mpi, live_probe, sim_cluster, tmp_path, capsys) -> None:
    """8 nodes (four pairs a round on 2 cores), node 4 limited to 100 Mbit/s: the classic link
    negotiated at 100 Mb/s instead of 1 Gb/s. It is flagged with its 7 links; nothing else is (but
    see shared_cpu_slack)."""
    c = sim_cluster(8, mtu=9000, offload=False)
    names = [n.name for n in c.nodes]
    _limit(c, names[3], 100_000_000)
    doc = _sweep_once(capsys, names, tmp_path / "r.db", "one-fault-8")
    _assert_faults(doc, {names[3]}, limited=names[3], shared_cpu_slack=True)


@pytest.mark.integration
@pytest.mark.slow
def test_eight_nodes_two_faults_at_once(mpi, live_probe, sim_cluster, tmp_path, capsys) -> None:
    """8 nodes: node 4 limited to 100 Mbit/s and node 7 at MTU 1500; 13 of the 28 links slow. Both
    faulty nodes are flagged, no healthy node or link is (but see shared_cpu_slack)."""
    c = sim_cluster(8, mtu=9000, offload=False)
    names = [n.name for n in c.nodes]
    _limit(c, names[3], 100_000_000)
    _mtu(c, names[6], 1500)
    doc = _sweep_once(capsys, names, tmp_path / "r.db", "two-faults-8")
    _assert_faults(doc, {names[3], names[6]}, limited=names[3], shared_cpu_slack=True)


def _count_runs(db) -> int:
    import sqlite3

    with sqlite3.connect(db) as con:
        return con.execute("select count(*) from runs").fetchone()[0]


@pytest.mark.integration
@pytest.mark.slow
def test_thirty_two_nodes_sweep_within_the_bound(mpi, live_probe, sim_cluster, tmp_path) -> None:
    """The issue's scale test: 32 virtual nodes on this machine's cores (oversubscribed), 496 pairs in
    31 rounds, a small per-pair budget; the orchestration cost per node is printed."""
    c = sim_cluster(32)
    hosts = [n.name for n in c.nodes]
    t0 = time.monotonic()
    doc = sw.sweep_network(hosts, pair_budget=0.1, bw_size=1 << 20, allow_root=True, oversubscribe=True,
                           use_store=False, probe_data=live_probe, timeout=240)
    wall = time.monotonic() - t0
    o = doc["orchestration"]
    print(f"\n32 nodes: {wall:.1f} s wall, {o['measured_s']:.1f} s measuring, orchestration {o['seconds']:.1f} s "
          f"= {o['per_node_s']:.2f} s per node; notes: {doc['notes']}")
    assert doc["schedule"]["rounds"] == 31 and len(doc["pairs"]) == 496
    assert all(p["bandwidth_MBps"] > 0 and p["latency_us"] > 0 for p in doc["pairs"])
    assert wall < 240, wall
    # healthy: no dozens of slow links (one sweep with the old rule flagged 61 of 496 on latency);
    # a metric is judged with few flags, or too noisy to judge
    j = doc["judge"]
    (tmp_path / "sweep32.json").write_text(json.dumps(doc))
    print("judge: " + "; ".join(f"{m}: {v['status']} ({v['why']}), "
                                f"{sum(1 for f in doc['flags']['links'] if f['metric'] == m)} links flagged"
                                for m, v in j.items()))
    for metric in ("latency", "bandwidth"):
        n_flags = sum(1 for f in doc["flags"]["links"] if f["metric"] == metric)
        assert j[metric]["status"] in ("judged", "too noisy") and n_flags <= 3, (
            metric, n_flags, j[metric], [(f["node"], f["why"]) for f in doc["flags"]["nodes"] if f["metric"] == metric])
    assert not doc["flags"]["nodes"], doc["flags"]["nodes"]



def test_neighbour_entries_are_pinned_once_per_cluster(sim_cluster, monkeypatch) -> None:
    """The all-pairs sweep's permanent neighbour entries: added the first time, found by their marker
    the next (no `ip` process at all); a marker of other namespaces (a cluster brought up anew) is not
    trusted: the entries are looked at again."""
    from clusterbench import process
    from clusterbench.benchmarks.mpi import allpairs
    from clusterbench.launch import simcluster

    c = sim_cluster(3)
    members = [c.head, *c.nodes]
    assert allpairs.pin_neighbours(c) == len(members) * (len(members) - 1)
    neigh = process.run(["ip", "-n", c.nodes[0].namespace, "neigh", "show", "nud", "permanent"], timeout=10).stdout
    assert all(m.address in neigh for m in members if m is not c.nodes[0]), neigh
    calls: list[list[str]] = []
    real = process.run
    monkeypatch.setattr(process, "run", lambda argv, **kw: calls.append(list(argv)) or real(argv, **kw))
    assert allpairs.pin_neighbours(c) == 0 and calls == []
    marker = simcluster.scratch_dir(c) / "neighbours-pinned.json"
    key = marker.read_text()
    marker.write_text(key.replace(c.nodes[0].namespace, "another-namespace"))
    assert allpairs.pin_neighbours(c) == 0 and len(calls) == 2 * len(members)  # looked at, all there already
    assert marker.read_text() == key
