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
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench.analysis import outliers
from clusterbench.errors import (
    ClusterbenchError,
    EnvironmentProblem,
    KernelFailed,
    UsageError,
)
from clusterbench.sweep import agent
from clusterbench.sweep import node as sw

# --------------------------------------------------------------------------- synthetic agents

def _result(bench: str, metric: str, value: float, hib: bool = True, unit: str = "Gflop/s", **params) -> dict:
    return {"benchmark": bench, "metric": metric, "value": value, "unit": unit, "higher_is_better": hib,
            "params": {"threads": 1, **params}, "samples": [value * 0.98, value], "summary": {"median": value},
            "limit": None, "limits": [], "warnings": [], "kernel": bench}


def _agent_lines(node: str, rank: int, results: list[dict], *, probe_pad: int = 3000) -> bytes:
    """What one agent prints (through the real Emitter), probe large enough to be sent in parts."""
    r, w = os.pipe()
    out = agent.Emitter(node, rank, fd=w)
    out.emit("hello", names=[node], pid=1000 + rank, python=sys.executable, host=node)
    out.emit("probe", probe={"host": node, "pad": "p" * probe_pad}, network={"nics": []}, cpus=[rank % 2])
    out.emit("ready", estimate_s=1.0, since_start_s=0.5)
    for res in results:
        out.emit("result", result=res)
    out.emit("done", bench_s=1.0 + rank / 10, results=len(results), notes=["peak: a note"], warnings=[], builds={},
             since_start_s=2.0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    return data


def _openmpi_stream(streams: dict[int, bytes], rng: random.Random) -> list[bytes]:
    """The physical lines mpirun --tag-output prints for these ranks' streams when it forwards them in
    chunks cut anywhere (as orted reads a pipe) and interleaves the chunks of different ranks."""
    pending = {rk: bytearray(data) for rk, data in streams.items()}
    out = b""
    while any(pending.values()):
        rk = rng.choice([k for k, v in pending.items() if v])
        n = rng.randint(1, 4096)
        chunk, pending[rk] = bytes(pending[rk][:n]), pending[rk][n:]
        tag = f"[1,{rk}]<stdout>:".encode()
        body = chunk[:-1].replace(b"\n", b"\n" + tag) + chunk[-1:]  # a tag after every newline inside the chunk
        out += tag + body
    return out.split(b"\n")[:-1]


def _gather(lines: list[bytes], demux: sw.Demux, hosts: list[str]) -> sw.Gather:
    g = sw.Gather(hosts, time.monotonic())
    for line in lines:
        for rank, ln in demux.feed(line):
            g.line(rank, ln)
    return g


HOSTS = ["n1", "n2", "n3", "n4"]


def _four_nodes(slow: str = "n4", factor: float = 0.5) -> dict[int, bytes]:
    out = {}
    for rank, h in enumerate(HOSTS):
        g = 10.0 * (factor if h == slow else 1.0) * (1 + 0.01 * rank)
        out[rank] = _agent_lines(h, rank, [_result("peak", "gflops", g, isa="avx2"),
                                           _result("memlat", "latency", 80.0 + rank, hib=False, unit="ns",
                                                   size_bytes=1 << 26)])
    return out


def test_lines_cut_and_interleaved_by_the_launcher_are_rebuilt_per_rank():
    rng = random.Random(11)
    streams = _four_nodes()
    lines = _openmpi_stream(streams, rng)
    plain = [ln for ln in b"\n".join(lines).split(b"\n")]
    assert any(ln.count(b"<stdout>:") > 1 for ln in plain), "the test should interleave inside lines"
    g = _gather(lines, sw.Demux(sw.OPENMPI_TAG, anywhere=True), HOSTS)
    assert g.all(lambda r: r.done is not None and r.error is None)
    assert [len(g.nodes[h].results) for h in HOSTS] == [2, 2, 2, 2]
    assert g.nodes["n3"].probe["pad"] == "p" * 3000 and g.nodes["n3"].cpus == [0]
    assert {g.nodes[h].rank for h in HOSTS} == {0, 1, 2, 3}


def test_every_agent_line_is_short():
    data = _agent_lines("n1", 0, [_result("peak", "gflops", 1.0, pad="x" * 5000)], probe_pad=20000)
    assert max(len(ln) for ln in data.split(b"\n")) <= agent.LINE_MAX + 200


def test_srun_labels_and_chatter():
    streams = _four_nodes()
    lines = [f"{rk:>2}: ".encode() + ln for rk, data in streams.items() for ln in data.split(b"\n")[:-1]]
    lines.insert(3, b"srun: job 42 queued and waiting for resources")
    g = _gather(lines, sw.Demux(sw.SRUN_LABEL, anywhere=False), HOSTS)
    assert g.all(lambda r: r.done is not None)
    assert any("queued" in c for c in g.chatter)


def test_a_lost_or_garbled_line_fails_that_node_only():
    streams = _four_nodes()
    lines2 = streams[1].split(b"\n")
    del lines2[3]  # one of n2's lines never arrives
    streams[1] = b"\n".join(lines2)
    lines3 = streams[2].split(b"\n")
    lines3[2] = lines3[2][:40] + lines3[2][60:]  # n3's third line damaged
    streams[2] = b"\n".join(lines3)
    lines = [f"[1,{rk}]<stdout>:".encode() + ln for rk, data in streams.items() for ln in data.split(b"\n") if ln]
    g = _gather(lines, sw.Demux(sw.OPENMPI_TAG, anywhere=True), HOSTS)
    assert g.nodes["n1"].done and g.nodes["n4"].done
    assert "missing" in g.nodes["n2"].error and g.nodes["n2"].done is None
    assert "damaged" in g.nodes["n3"].error


def test_synthetic_sweep_flags_the_slow_node_with_its_cause(monkeypatch):
    streams = _four_nodes(slow="n4", factor=0.55)
    g = _gather(_openmpi_stream(streams, random.Random(3)), sw.Demux(sw.OPENMPI_TAG, anywhere=True), HOSTS)
    job = sw.Job(["mpirun"], {}, "mpirun", sw.Demux(sw.OPENMPI_TAG, True), "/tmp")
    doc = sw._document("peak", {}, "quick", HOSTS, job, g, wall=5.0, prepare_s=0.1, sim=None)
    assert doc["sweep_schema"] == 1 and doc["method"] == outliers.METHOD
    peak = next(f for f in doc["metrics"] if f["metric"] == "gflops")
    assert peak["label"] == "peak gflops isa=avx2 threads=1"
    assert set(peak["values"]) == set(HOSTS) and list(peak["flags"]) == ["n4"]
    assert peak["median"] == pytest.approx(statistics.median(peak["values"].values()))
    lat = next(f for f in doc["metrics"] if f["metric"] == "latency")
    assert lat["flags"] == {}  # 80..83 ns: within 10 % of the median
    assert doc["timing"]["bench_max_s"] == pytest.approx(1.3)
    assert doc["timing"]["orchestration_s"] == pytest.approx(3.7)
    assert doc["timing"]["orchestration_per_node_s"] == pytest.approx(3.7 / 4)
    [o] = doc["outliers"]
    assert o["node"] == "n4" and o["rel"] < -0.4 and o["z"] < -3.5

    findings = [  # governor fires on n4 only; THP fires everywhere; jumbo on n4 but is a network rule
        {"rule": "cpu-governor", "node": "n4", "title": "CPU frequency governor not performance",
         "summary": "n4: powersave", "severity": "warn", "fix": ["cpupower frequency-set -g performance"]},
        *({"rule": "thp", "node": h, "title": "THP off", "summary": "", "severity": "warn"} for h in HOSTS),
        {"rule": "jumbo-unused", "node": "n4", "title": "jumbo", "summary": "", "severity": "info"},
    ]
    from clusterbench import doctor

    monkeypatch.setattr(doctor, "diagnose", lambda hosts, **kw: {"findings": findings, "cannot_tell": []})
    sw._diagnose(doc, HOSTS, 10.0, None)
    assert [c["rule"] for c in doc["causes"]["n4"]] == ["cpu-governor"]
    assert doc["outliers"][0]["causes"] == ["cpu-governor"]
    text = "\n".join(sw.format_sweep_node(doc))
    assert "n4: CPU frequency governor not performance (cpu-governor)" in text
    assert "5.6 !" in text or " !" in text
    assert "modified z-score" in text and "orchestration" in text


def test_beats_keep_a_node_alive_and_a_silent_node_is_lost():
    """The agents' supervisors beat every second (lines outside the numbered ones); a node that said
    hello and then went silent while others were heard is lost, the others go on (issue 23)."""
    streams = _four_nodes()
    beat = lambda node, rk: json.dumps({"cbsweep": 1, "node": node, "rank": rk, "kind": "beat"}).encode()
    lines = []
    for rk, data in streams.items():
        own = data.split(b"\n")[:-1]
        own.insert(1, beat(HOSTS[rk], rk))  # beats between numbered lines do not break the sequence
        own.insert(4, beat(HOSTS[rk], rk))
        if HOSTS[rk] == "n3":
            own = own[:2]  # hello and a beat, then nothing: its agent was killed with its supervisor
        lines += [f"[1,{rk}]<stdout>:".encode() + ln for ln in own]
    g = _gather(lines, sw.Demux(sw.OPENMPI_TAG, anywhere=True), HOSTS)
    assert [h for h in HOSTS if g.nodes[h].done] == ["n1", "n2", "n4"] and g.nodes["n3"].error is None
    now = time.monotonic()
    assert g.lost(now + 1, 10.0) == []
    for h in ("n1", "n2", "n4"):
        g.nodes[h].last_s = now + 11  # the others were heard since
    g.nodes["n1"].done = g.nodes["n2"].done = g.nodes["n4"].done = None
    g.heard = now + 11
    assert g.lost(now + 12, 10.0) == ["n3"]
    assert g.lost(now + 30, 10.0) == []  # nobody heard for long: the launcher or this process stalled
    g.fail("n3", "lost")
    assert g.nodes["n3"].finished and ("n3", "error") in g.events


def test_more_nodes_than_cpus_share_them_equally():
    """Issue 23: 3 virtual nodes on 2 cpus were placed n1, n3 on cpu 0 and n2 alone on cpu 1: n2 had
    twice the others' figure and a slow node hid. Now one busy loop beside n2 gives every node half a
    cpu, and the output says so."""
    cpus = sw.default_node_cpus(["n1", "n2", "n3"], [0, 1])
    assert cpus == {"n1": [0], "n2": [1], "n3": [0]}
    assert sw.filler_loops(cpus) == {1: 1}
    assert sw.cpu_shares(cpus, {1: 1}) == {"n1": 0.5, "n2": 0.5, "n3": 0.5}
    assert "0.5 cpu each, 1 busy loop" in sw.sharing_note(cpus, {1: 1})
    assert sw.filler_loops(sw.default_node_cpus(["a", "b", "c", "d"], [0, 1])) == {}
    assert sw.sharing_note({"a": [0], "b": [1]}) is None  # a cpu each: nothing to say
    assert "shares differ" in sw.sharing_note({"a": [0], "b": [0], "c": [1]})
    # nodes given with --node-cpus keep theirs; the others take the cpus left first
    assert sw.default_node_cpus(["b", "c"], [0, 1, 2], taken=[0]) == {"b": [1], "c": [2]}


def test_too_few_nodes_with_figures_are_not_judged():
    streams = _four_nodes()
    g = _gather([f"[1,{rk}]<stdout>:".encode() + ln for rk, data in streams.items() for ln in data.split(b"\n")
                 if ln], sw.Demux(sw.OPENMPI_TAG, anywhere=True), HOSTS)
    g.nodes["n3"].done = None
    g.fail("n3", "its agent stopped answering")
    g.nodes["n4"].done, g.nodes["n4"].error = None, "its agent (pid 9) was killed by SIGKILL from outside"
    job = sw.Job(["mpirun"], {}, "mpirun", sw.Demux(sw.OPENMPI_TAG, True), "/tmp")
    doc = sw._document("peak", {}, "quick", HOSTS, job, g, wall=5.0, prepare_s=0.1, sim=None)
    assert set(doc["failed"]) == {"n3", "n4"}
    text = "\n".join(sw.format_sweep_node(doc))
    assert "outliers: not judged: 2 nodes with figures, the method needs 3 or more" in text
    assert "failed: n4: its agent (pid 9) was killed by SIGKILL" in text


def test_lower_is_better_figures_flag_the_high_side():
    fig = sw.judge({"benchmark": "memlat", "metric": "latency", "unit": "ns", "higher_is_better": False,
                    "params": {}, "label": "memlat latency", "values": {"a": 80, "b": 81, "c": 79, "d": 120}})
    assert list(fig["flags"]) == ["d"]
    fig = sw.judge({**fig, "values": {"a": 80, "b": 81, "c": 79, "d": 40}})
    assert fig["flags"] == {}  # faster is not a problem


def test_likely_causes_ignore_rules_every_node_shares():
    findings = [{"rule": "steal-time", "node": h, "title": "steal"} for h in HOSTS]
    assert sw.likely_causes({"n2": {"fpu"}}, findings, HOSTS) == {}
    findings.append({"rule": "swap-in-use", "node": "n2", "title": "swap", "summary": "1 GiB"})
    assert sw.likely_causes({"n2": {"fpu"}}, findings, HOSTS) == {}  # swap does not bear on fpu
    assert [c["rule"] for c in sw.likely_causes({"n2": {"stream"}}, findings, HOSTS)["n2"]] == ["swap-in-use"]


def test_node_names_and_lists():
    assert agent.node_name(["", "c3.cluster"], ["c1", "c2", "c3"], 0) == "c3"
    assert agent.node_name(["vm"], ["c1", "c2"], 1) == "c2"  # by the launcher's rank when no name matches
    assert agent.decode_spec(agent.encode_spec({"a": [1, "é"]})) == {"a": [1, "é"]}
    assert sw.parse_node_cpus(["a=0", "b=0-1,3"]) == {"a": [0], "b": [0, 1, 3]}
    with pytest.raises(UsageError, match="NODE=CPUS"):
        sw.parse_node_cpus(["a"])
    assert sw.default_node_cpus(["a", "b", "c"], [0, 1]) == {"a": [0], "b": [1], "c": [0]}


def test_bad_input_is_one_line_and_starts_nothing(monkeypatch, tmp_path, capsys):
    from clusterbench import cli

    db = tmp_path / "r.db"
    for var in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(UsageError, match="needs --hosts or --hostfile, or to run inside a batch job"):
        sw.sweep_node(None)
    with pytest.raises(UsageError, match="'stream2' is not a node benchmark"):
        sw.sweep_node(["a", "b", "c"], "stream2")
    with pytest.raises(UsageError, match="listed twice"):
        sw.sweep_node(["a", "b", "a"])
    cases = [(["sweep", "node"], "needs --hosts"),
             (["sweep", "node", "--hosts", "a,b,c", "--benchmark", "pingpong"], "'pingpong' is not a node benchmark"),
             (["sweep", "node", "--hosts", "a,b,c", "--benchmark", ""], "--benchmark is empty"),
             (["sweep", "node", "--hosts", "a,b,c", "--hostfile", "x"], "--hosts and --hostfile both given"),
             (["sweep", "node", "--hosts", "a,b,c", "--node-cpus", "a:0"], "is not NODE=CPUS")]
    for args, want in cases:
        assert cli.main(["--db", str(db), *args]) == 2
        err = capsys.readouterr().err
        assert want in err and err.count("\n") == 1, err
    with pytest.raises(SystemExit) as exc:  # a benchmark option it does not have: argparse's one line
        cli.main(["--db", str(db), "sweep", "node", "--hosts", "a,b,c", "--benchmark", "peak --nosuch 1"])
    assert exc.value.code == 2 and capsys.readouterr().err.count("\n") == 1
    from clusterbench.store import Store

    assert not db.exists() or Store(db).list_runs() == []


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
def four_nodes(mpi, sim_cluster, live_probe):
    from clusterbench.benchmarks.base import RunContext, allowed_cpus

    cpus = allowed_cpus(RunContext(probe=live_probe, profile="quick"))
    if len(cpus) < 2:
        pytest.skip("needs two cpus")
    c = sim_cluster(4)
    yield c, cpus[0], cpus[1]
    _nothing_left(c)


@pytest.mark.integration
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
    assert run["status"] == "complete" and set(run["cluster"]["nodes"]) == set(names)
    got = {r["params"]["node"] for r in st.results(doc["run_id"]) if r["metric"] == "gflops"}
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
    proc = _cli("sweep", "node", "--hosts", ",".join(names), "--benchmark", "peak --seconds 0.5 --samples 8",
                "--allow-root", "--oversubscribe", "--json", "--tag", "killed")
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
    assert "stopped answering" in doc["failed"][names[3]]
    peak = next(f for f in doc["metrics"] if f["metric"] == "gflops")
    assert set(peak["values"]) == {names[0], names[2]}
    run = Store().get_run(doc["run_id"])
    assert run["status"] == "incomplete" and "2 node(s) failed" in run["error"]
    stored = {r["params"]["node"] for r in Store().results(doc["run_id"])}
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
