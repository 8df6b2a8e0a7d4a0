"""`sweep node`: the node benchmarks on every node at once as one launcher job, the figures gathered,
outlier nodes flagged per figure (modified z-score, analysis.outliers), their likely cause from doctor.

Unit tier: the agent's line protocol through a launcher that cuts and interleaves lines (as Open MPI's
``--tag-output`` does), srun's labels, damaged output, grouping and flagging on synthetic agent output,
doctor's findings as causes, the text, and bad input (one line, nothing stored, nothing started).

Integration tier: a 4-node virtual cluster with a CPU hog. All four virtual nodes share this machine's
cpus, so the layout is chosen: nodes 1-3 are pinned to cpu A and node 4 to cpu B, which also carries
two busy loops, so every node's agent gets a third of a cpu (peak's Gflop/s is FMAs over a 0.3 s wall
clock sample, so it is proportional to that share; the sweep starts every node's measurement together
and keeps finished nodes' cpus busy, so the share holds throughout). Nodes 1-3 share one run queue and
so agree closely whatever else runs. The hog is one busy process inside node 4's namespace pinned to
cpu B at nice -15 (its autogroup too): weighted about 28 tasks, it takes most of cpu B from node 4
alone. A hog of plain nice-0 loops would not do on a busy machine: the scheduler moves other programs'
unpinned tasks off the cpu the loops load, which spreads their effect over every node (measured here:
two such loops moved node 4 by 5 %). Without the hog node 4 is not flagged; with it, it is, on peak
gflops. One retry each, for a machine that other work makes noisy.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench.errors import (
    ClusterbenchError,
    EnvironmentProblem,
    KernelFailed,
    UsageError,
)
from clusterbench.sweep import node as sw


# --------------------------------------------------------------------------- the virtual cluster

def _ns_pids(c) -> dict[str, list[str]]:
    out = {}
    for n in c.nodes:
        r = subprocess.run(["ip", "netns", "pids", n.namespace], capture_output=True, text=True, timeout=10)
        pids = [p for p in r.stdout.split() if p.isdigit() and os.path.exists(f"/proc/{p}")]
        if pids:
            out[n.name] = [Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80]
                           for p in pids if os.path.exists(f"/proc/{p}/cmdline")]
    return out


def _nothing_left(c) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _ns_pids(c):
        time.sleep(0.2)
    assert not _ns_pids(c), _ns_pids(c)


BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


def _busy(cpu: int, *, ns: str | None = None, nice: int = 0, seconds: float = 120.0) -> subprocess.Popen:
    """A busy loop pinned to ``cpu`` in a session (so an autogroup) of its own, ended after ``seconds``
    at the latest; with ``nice`` its task and its autogroup get that nice value."""
    cmd = ([*(["ip", "netns", "exec", ns] if ns else []), "nice", "-n", str(nice), "taskset", "-c", str(cpu),
            sys.executable, "-c", BUSY.format(s=seconds)])
    p = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if nice:
        time.sleep(0.2)
        try:
            Path(f"/proc/{p.pid}/autogroup").write_text(str(nice))
        except OSError:
            pass  # no autogroups: the task's nice value is its weight
    return p


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait(timeout=10)


@pytest.fixture
def four_nodes(mpi, module_sim_cluster, live_probe):
    """The module's 4-node cluster (brought up by the first test that asks, again after a test took it
    down), nothing running in it after each test."""
    from clusterbench.benchmarks.base import RunContext, allowed_cpus

    cpus = allowed_cpus(RunContext(probe=live_probe, profile="quick"))
    if len(cpus) < 2:
        pytest.skip("needs two cpus")
    c = module_sim_cluster(4)
    yield c, cpus[0], cpus[1]
    _nothing_left(c)


@pytest.mark.integration
@pytest.mark.slow
def test_cpu_hog_on_one_node_is_flagged(four_nodes, capsys):
    from clusterbench import cli
    from clusterbench.store import Store

    c, a, b = four_nodes
    names = [n.name for n in c.nodes]
    hosts = ",".join(names)
    layout = [f"--node-cpus={h}={a}" for h in names[:3]] + [f"--node-cpus={names[3]}={b}"]
    argv = ["sweep", "node", "--hosts", hosts, "--benchmark", "peak --seconds 0.3", "--allow-root", *layout]

    def sweep(tag: str) -> dict:
        t0 = time.monotonic()
        rc = cli.main([*argv, "--json", "--tag", tag])
        out = capsys.readouterr()
        assert rc == 0, out.err
        doc = json.loads(out.out)
        doc["_seconds"] = time.monotonic() - t0
        return doc

    def peak(doc: dict) -> dict:
        return next(f for f in doc["metrics"] if f["metric"] == "gflops")

    fillers = [_busy(b), _busy(b)]  # cpu B: node 4 and two loops, so node 4 has the third of a cpu nodes 1-3 have
    try:
        base = sweep("nohog")
        if peak(base)["flags"]:
            base = sweep("nohog")  # once more, for a noisy machine
        assert peak(base)["flags"] == {}, peak(base)
        hog = _busy(b, ns=c.nodes[3].namespace, nice=-15)
        try:
            doc = sweep("hog")
            if list(peak(doc)["flags"]) != [names[3]]:
                doc = sweep("hog")
        finally:
            _stop([hog])
    finally:
        _stop(fillers)
    fig = peak(doc)
    assert list(fig["flags"]) == [names[3]], fig
    assert fig["flags"][names[3]]["rel"] < -0.1
    assert doc["node_cpus"] == {names[0]: [a], names[1]: [a], names[2]: [a], names[3]: [b]}
    assert doc["failed"] == {} and doc["launcher"] == "mpirun" and doc["virtual_cluster"]
    assert {o["node"] for o in doc["outliers"]} == {names[3]}
    assert doc["doctor"]["ran"]  # asked; nothing in its rules explains a hog
    t = doc["timing"]
    assert t["orchestration_s"] == pytest.approx(t["wall_s"] - t["bench_max_s"])
    assert base["_seconds"] < 60, base["timing"]
    with capsys.disabled():  # the README's example (pytest -s)
        print("\n" + "\n".join(sw.format_sweep_node(doc)))
        print(f"baseline {base['_seconds']:.1f} s, hog {doc['_seconds']:.1f} s")

    st = Store()  # the figures, one per node, as one run each
    run = st.get_run(doc["run_id"])
    assert run.status == "complete" and set(run.cluster["nodes"]) == set(names)
    got = {r.params["node"] for r in st.results(doc["run_id"]) if r.metric == "gflops"}
    assert got == set(names)
    assert cli.main(["results", "table", "peak", "--rows", "node", "--cols", "tag"]) == 0
    table = capsys.readouterr().out
    assert all(n in table for n in names) and "hog" in table and "nohog" in table
    assert cli.main(["compare", "nohog", "hog", "--benchmark", "peak", "--metric", "gflops"]) == 0
    capsys.readouterr()


@pytest.mark.integration
def test_failures_are_one_line_and_leave_nothing(four_nodes, tmp_path, live_probe):
    from clusterbench.store import Store

    c, _, _ = four_nodes
    names = [n.name for n in c.nodes]
    db = tmp_path / "r.db"
    kw = {"allow_root": True, "store": Store(db), "probe_data": live_probe, "oversubscribe": True}
    with pytest.raises(UsageError, match="nosuchnode is not a node of the virtual cluster"):
        sw.sweep_node([*names[:2], "nosuchnode"], "fpu", **kw)
    with pytest.raises(UsageError, match="no parameter 'nosuch'"):
        sw.sweep_node(names, "peak", given={"nosuch": 1}, **kw)
    with pytest.raises(UsageError, match=r"--lost-after 1 is not allowed.*at least 2 seconds"):
        sw.sweep_node(names, "peak", lost_after=1, **kw)
    # the agents' Python does not exist on the nodes: the launcher's own words, one line
    with pytest.raises(ClusterbenchError, match="no report from|started no sweep agent") as exc:
        sw.sweep_node(names, "fpu", python="/nonexistent/python3", **kw)
    assert "\n" not in str(exc.value), str(exc.value)
    _nothing_left(c)
    # hosts that do not exist (not the virtual cluster's, so reached with ssh): one line
    with pytest.raises(ClusterbenchError) as exc:
        sw.sweep_node(["cb-nosuch-a", "cb-nosuch-b", "cb-nosuch-c"], "fpu", launch_timeout=30, **kw)
    assert "\n" not in str(exc.value) and isinstance(exc.value, (EnvironmentProblem, KernelFailed))
    # the whole job is ended on a timeout (here while the nodes start or measure)
    t0 = time.monotonic()
    with pytest.raises(KernelFailed, match="timed out after 6 s"):
        sw.sweep_node(names, "peak", given={"seconds": 30.0, "samples": 1}, timeout=6, **kw)
    assert time.monotonic() - t0 < 25
    _nothing_left(c)
    assert Store(db).list_runs() == []


# --------------------------------------------------------------------------- faults during a sweep (issue 23)

def _cli(*args: str) -> subprocess.Popen:
    """``clusterbench ARGS`` as a process of its own (the test session's sim-cluster prefix, state
    directory and store are in the environment)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    return subprocess.Popen([sys.executable, "-m", "clusterbench.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _procs(ns: str) -> list[tuple[int, int, str]]:
    """(pid, ppid, command line) of the processes in namespace ``ns``."""
    r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=10)
    out = []
    for p in r.stdout.split():
        try:
            ppid = int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        out.append((int(p), ppid, cmd))
    return out


def _agents(ns: str) -> tuple[int | None, int | None, bool]:
    """(supervisor pid, worker pid, a kernel is running) of the sweep agent in namespace ``ns``."""
    procs = _procs(ns)
    agents = {pid: ppid for pid, ppid, cmd in procs if "clusterbench.sweep.agent" in cmd}
    sup = next((p for p, pp in agents.items() if pp not in agents), None)
    worker = next((p for p, pp in agents.items() if pp == sup), None)
    kernel = any("/kernels/peak" in cmd for _, _, cmd in procs)
    return sup, worker, kernel


def _wait_measuring(c, names: list[str], proc: subprocess.Popen, limit: float = 60) -> dict[str, tuple]:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        seen = {n.name: _agents(n.namespace) for n in c.nodes if n.name in names}
        if all(s[2] for s in seen.values()):
            return seen
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"the nodes did not start measuring: {seen}")


def _kernels_left() -> list[int]:
    cache = os.environ["CLUSTERBENCH_CACHE"]
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.readlink(f"/proc/{pid}/exe").startswith(cache):
                out.append(int(pid))
        except OSError:
            pass
    return out


@pytest.mark.integration
def test_killed_agents_lose_only_their_nodes(four_nodes):
    """Issue 23: one node's agent killed during ``sweep node`` lost the whole sweep (nothing stored,
    "rerun with a smaller size or report it"). Here, during a real sweep of 4 virtual nodes, node 2's
    agent (the process running the benchmarks) is killed with SIGKILL and node 4's whole agent (its
    supervisor, the process the launcher started) with SIGKILL too: nodes 1 and 3's figures are
    stored, node 2 is failed naming the signal (from outside: memory was fine), node 4 as gone silent,
    exit 4, and nothing is left running in the namespaces."""
    from clusterbench.store import Store

    c, _, _ = four_nodes
    names = [n.name for n in c.nodes]
    t0 = time.monotonic()
    proc = _cli("sweep", "node", "--hosts", ",".join(names), "--benchmark", "peak --seconds 0.5 --samples 4",
                "--allow-root", "--oversubscribe", "--json", "--tag", "killed", "--lost-after", "3")
    try:
        seen = _wait_measuring(c, names, proc)
        os.kill(seen[names[1]][1] or seen[names[1]][0], signal.SIGKILL)  # node 2: the agent running the benchmarks
        os.kill(seen[names[3]][0], signal.SIGKILL)  # node 4: its agent's supervisor (and with it the worker)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    took = time.monotonic() - t0
    assert proc.returncode == 4, err
    doc = json.loads(out)
    assert set(doc["failed"]) == {names[1], names[3]}, doc["failed"]
    assert "was killed by SIGKILL from outside" in doc["failed"][names[1]], doc["failed"]
    assert "smaller size" not in doc["failed"][names[1]]
    assert "stopped answering (nothing from it for 3 s)" in doc["failed"][names[3]]  # --lost-after 3
    peak = next(f for f in doc["metrics"] if f["metric"] == "gflops")
    assert set(peak["values"]) == {names[0], names[2]}
    run = Store().get_run(doc["run_id"])
    assert run.status == "incomplete" and "2 node(s) failed" in run.error
    stored = {r.params["node"] for r in Store().results(doc["run_id"])}
    assert stored == {names[0], names[2]}
    _nothing_left(c)
    assert _kernels_left() == []
    assert took < 60, took


@pytest.mark.integration
def test_sim_cluster_down_during_a_sweep_is_named(four_nodes):
    """Issue 23: ``sim-cluster down`` during a sweep gave "rerun with a smaller size or report it".
    ``down`` now refuses while a job runs inside (listing it, exit 2); with ``--force`` it kills and
    lists what it killed, and the sweep says the virtual cluster was taken down (exit 4, one line,
    nothing stored)."""
    from clusterbench.store import Store

    c, _, _ = four_nodes
    names = [n.name for n in c.nodes]
    proc = _cli("sweep", "node", "--hosts", ",".join(names), "--benchmark", "peak --seconds 2 --samples 4",
                "--allow-root", "--oversubscribe")
    try:
        _wait_measuring(c, names, proc)
        refused = _cli("sim-cluster", "down")
        r_out, r_err = refused.communicate(timeout=60)
        assert refused.returncode == 2, r_err
        assert r_err.count("\n") == 1 and "a job is using the virtual cluster" in r_err and "--force" in r_err
        assert "clusterbench.sweep.agent" in r_err and "mpirun" in r_err
        assert proc.poll() is None  # the sweep goes on
        forced = _cli("sim-cluster", "down", "--force")
        f_out, f_err = forced.communicate(timeout=60)
        assert forced.returncode == 0, f_err
        assert "killed" in f_out and "clusterbench.sweep.agent" in f_out and "mpirun" in f_out
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 4, err
    assert err.count("\n") == 1 and "the virtual cluster was taken down" in err, err
    assert "sim-cluster up" in err and "smaller size" not in err
    assert Store().list_runs() == []
    assert _kernels_left() == []


@pytest.mark.integration
def test_more_virtual_nodes_than_cpus(mpi, sim_cluster, live_probe, capsys):
    """Issue 23: with more virtual nodes than cpus, nodes were pinned unequally (two on cpu 0, one
    alone on cpu 1), that one measured twice the others and "outliers: none" was reported. Without
    --oversubscribe it is refused in one line before anything starts; with it, every node gets the
    same share (a busy loop beside the node that would be alone) and the output says so."""
    from clusterbench import cli
    from clusterbench.benchmarks.base import RunContext, allowed_cpus
    from clusterbench.store import Store

    cpus = allowed_cpus(RunContext(probe=live_probe, profile="quick"))
    if not 2 <= len(cpus) <= 4:
        pytest.skip("sized for 2 to 4 cpus")
    c = sim_cluster(len(cpus) + 1)
    hosts = ",".join(n.name for n in c.nodes)
    argv = ["sweep", "node", "--hosts", hosts, "--benchmark", "peak --seconds 0.3", "--allow-root"]
    t0 = time.monotonic()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{len(cpus) + 1} virtual nodes need a cpu each" in err and "--oversubscribe" in err
    assert time.monotonic() - t0 < 15 and Store().list_runs() == []
    _nothing_left(c)
    assert cli.main([*argv, "--oversubscribe", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(len(v) for v in doc["node_cpus"].values()) == [1] * len(c.nodes)
    assert sum(doc["filler_loops"].values()) == len(cpus) - 1
    assert any(f"{1 / 2:.3g} cpu each" in n for n in doc["notes"]), doc["notes"]
    gflops = next(f for f in doc["metrics"] if f["metric"] == "gflops")["values"]
    assert max(gflops.values()) < 1.4 * min(gflops.values()), gflops  # the lone node had twice the others'
    _nothing_left(c)
