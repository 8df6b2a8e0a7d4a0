"""The pure tests (they start no process) of what tests/integration/test_sweep_node.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time

import pytest

from clusterbench.analysis import outliers
from clusterbench.errors import UsageError
from clusterbench.sweep import agent
from clusterbench.sweep import node as sw


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
    doc = sw.build_sweep_document("peak", {}, "quick", HOSTS, job, g, wall=5.0, prepare_s=0.1, sim=None)
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

    seen = {}
    monkeypatch.setattr(doctor, "diagnose_evidence",
                        lambda nodes: seen.update(nodes) or {"findings": findings, "cannot_tell": []})
    evidence = {h: {"host": h, "items": {}} for h in HOSTS}
    evidence["n2"] = None  # its agent sent none (it failed before): the others are judged
    evidence["n3"] = {"error": "OSError: no /proc"}
    sw.diagnose_outliers(doc, HOSTS, evidence)
    assert set(seen) == {"n1", "n4"}
    assert [c["rule"] for c in doc["causes"]["n4"]] == ["cpu-governor"]
    assert doc["outliers"][0]["causes"] == ["cpu-governor"]
    text = "\n".join(sw.format_sweep_node(doc))
    assert "n4: CPU frequency governor not performance (cpu-governor)" in text
    assert "5.6 !" in text or " !" in text
    assert "modified z-score" in text and "orchestration" in text


def test_no_evidence_from_any_node_says_so():
    doc = {"outliers": [{"node": "n1", "benchmark": "peak"}], "causes": {}, "doctor": None}
    sw.diagnose_outliers(doc, HOSTS, {h: None for h in HOSTS})
    assert doc["doctor"] == {"ran": False, "error": "no node sent its evidence"}
    sw.diagnose_outliers(doc, HOSTS, {"n1": {"error": "OSError: gone"}, "n2": None})
    assert doc["doctor"] == {"ran": False, "error": "OSError: gone"}


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
    doc = sw.build_sweep_document("peak", {}, "quick", HOSTS, job, g, wall=5.0, prepare_s=0.1, sim=None)
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
