"""pdes: the Time Warp kernel against a Python replay of its models written from their definitions
(PHOLD and the queueing network), the same committed history from every engine, rank count, batch
and GVT setting, a dropped anti-message caught with nothing stored, bad input refused in one line
before anything runs, event memory exhausted and a hung rank as clean errors, the statistics, a
2-node virtual cluster over TCP, and compare of two transports."""
from __future__ import annotations

import heapq
import math
import os
import struct
import subprocess
import sys
import time

import pytest

import prockit
from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext, allowed_cpus
from clusterbench.benchmarks.mpi.common import launch_spec
from clusterbench.errors import KernelFailed
from clusterbench.launch import mpi as M
from clusterbench.session import run as session_run
from clusterbench.store import Store

M64 = (1 << 64) - 1


def _mix(z: int) -> int:
    z &= M64
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def replay(model: str, lps: int, remote: float, lookahead: float, mean: float, start: int, end: float,
           seed: int = 1) -> tuple[int, str]:
    """The model run sequentially from the kernel header's definitions: (committed, digest)."""
    golden = 0x9E3779B97F4A7C15
    key = [_mix(((seed * golden) & M64) ^ _mix(g + 1)) for g in range(lps)]
    st = [{"rng": 0, "seq": 0, "sum": 0, "count": 0, "busy": 0.0} for _ in range(lps)]

    def draw(g: int) -> int:
        st[g]["rng"] += 1
        return _mix(key[g] + st[g]["rng"] * golden)

    def unif(x: int) -> float:
        return ((x >> 11) + 0.5) * 2.0 ** -53

    def expo(x: int, m: float) -> float:
        return -m * math.log(unif(x))

    heap: list[tuple[float, int, int, int]] = []
    for g in range(lps):
        for _ in range(start):
            heapq.heappush(heap, (expo(draw(g), mean) + lookahead, g, st[g]["seq"], g))
            st[g]["seq"] += 1
    committed = 0
    while heap and heap[0][0] < end:
        ts, src, seq, g = heapq.heappop(heap)
        s = st[g]
        fold = _bits(ts) ^ (src << 32) ^ ((seq * 0xD6E8FEB86659FD93) & M64)
        base = ts
        if model == "qnet":
            begin = max(ts, s["busy"])
            s["busy"] = begin + expo(draw(g), mean)
            fold ^= _mix(_bits(s["busy"]))
            base = s["busy"]
        s["sum"] = _mix(s["sum"] ^ fold)
        s["count"] += 1
        dest = g
        if unif(draw(g)) <= remote:
            dest = (draw(g) * lps) >> 64
        nts = base + lookahead if model == "qnet" else base + lookahead + expo(draw(g), mean)
        heapq.heappush(heap, (nts, g, s["seq"], dest))
        s["seq"] += 1
        committed += 1
    digest = sum(_mix(((g * 0xFF51AFD7ED558CCD) & M64) ^ _mix(st[g]["sum"] ^ ((st[g]["count"] << 1) & M64)))
                 for g in range(lps)) & M64
    return committed, f"{digest:016x}"


def _kernel(live_probe, mpi, ranks: int, args: list[str]) -> list[dict]:
    ctx = RunContext(probe=live_probe, oversubscribe=True)
    bench = get_benchmark("pdes")
    params = bench.resolve(ctx, {"ranks": ranks, "allow_root": True, "sync": "optimistic"})
    b = ctx.build("pdes", openmp=False, cc=mpi.mpicc)
    spec = launch_spec(ctx, params, params["places"], params["host_list"])
    return [r for r in M.run_mpi(mpi, spec, [str(b.path), *args], timeout=60).records if r.get("type") == "result"]


SMALL = {"phold": ["--lps=24", "--remote=0.5", "--lookahead=0.5", "--mean=1.0", "--start-events=2", "--end=40"],
         "qnet": ["--lps=24", "--remote=0.5", "--lookahead=0.25", "--mean=0.5", "--start-events=3", "--end=30"]}


@pytest.mark.parallel
@pytest.mark.integration
@pytest.mark.parametrize("model", ["phold", "qnet"])
def test_every_engine_commits_the_python_replays_history(live_probe, mpi, model: str) -> None:
    """The kernel implements the documented model (a Python replay from the definitions gives the
    same committed count and digest), and every engine, rank count, batch and GVT interval commits
    exactly that history."""
    lps, remote, la, mean, start, end = 24, 0.5, (0.5 if model == "phold" else 0.25), (1.0 if model == "phold"
                                                                                         else 0.5), \
        (2 if model == "phold" else 3), (40.0 if model == "phold" else 30.0)
    want = replay(model, lps, remote, la, mean, start, end)
    assert want[0] > 500
    common = [f"--model={model}", *SMALL[model]]
    runs = [(1, "sequential", []), (2, "conservative", []), (1, "optimistic", []), (2, "optimistic", []),
            (3, "optimistic", ["--batch=1", "--gvt-interval=1"]), (2, "optimistic", ["--batch=64", "--gvt-interval=7"]),
            (4, "optimistic", ["--batch=4", "--gvt-interval=3", "--window=2"]), (3, "conservative", [])]
    for ranks, sync, extra in runs:
        recs = _kernel(live_probe, mpi, ranks, [*common, f"--sync={sync}", "--repeat=2", *extra])
        assert len(recs) == 2
        for r in recs:
            assert r["ok"] and (r["committed"], r["digest"]) == want, (ranks, sync, extra, r)
            assert r["processed"] == r["committed"] + r["rolled_back"]
            assert r["events_left"] == lps * start
            assert sum(r["committed_per_rank"]) == r["committed"]
            if sync != "optimistic":
                assert r["rolled_back"] == 0


@pytest.mark.parallel
@pytest.mark.integration
def test_rollbacks_happen_and_still_commit_the_sequential_history(live_probe, mpi) -> None:
    """A run with many stragglers (one event per GVT interval and batch, 4 ranks on 2 cores, all
    events remote): rollbacks of both kinds and anti-messages occur, and the history is unchanged."""
    args = ["--lps=64", "--remote=1", "--lookahead=0.01", "--mean=1", "--start-events=4", "--end=60"]
    ref = _kernel(live_probe, mpi, 1, [*args, "--sync=sequential"])[0]
    recs = _kernel(live_probe, mpi, 4, [*args, "--sync=optimistic", "--batch=8", "--gvt-interval=50", "--repeat=3"])
    assert all((r["committed"], r["digest"]) == (ref["committed"], ref["digest"]) for r in recs)
    assert sum(r["rolled_back"] for r in recs) > 0 and sum(r["anti_messages"] for r in recs) > 0, recs
    assert sum(r["rollbacks_primary"] for r in recs) > 0


@pytest.mark.parallel
@pytest.mark.integration
def test_a_dropped_anti_message_is_caught_and_nothing_stored(live_probe, mpi, tmp_path) -> None:
    if len(allowed_cpus(RunContext(probe=live_probe))) < 2:
        pytest.skip("needs 2 cpus")
    store = Store(tmp_path / "r.db")
    with pytest.raises(KernelFailed, match="event population changed|differs from the sequential"):
        session_run(["pdes"], {"pdes": {"lps": 64, "remote": 1.0, "lookahead": 0.01, "start_events": 4, "end": 200.0,
                                        "batch": 8, "gvt_interval": 50, "ranks": 2, "drop_anti": 1,
                                        "allow_root": True, "repeat": 1}},
                    use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    runs = store.list_runs()
    assert len(runs) == 1 and runs[0].results == 0 and store.results(runs[0].id) == []


@pytest.mark.parallel
@pytest.mark.integration
def test_a_run_stores_rates_counts_and_intervals(live_probe, mpi, tmp_path) -> None:
    store = Store(tmp_path / "r.db")
    res = session_run(["pdes"], {"pdes": {"lps": 256, "end": 400.0, "ranks": 2, "repeat": 3, "allow_root": True,
                                          "model": "qnet"}},
                      use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    figs = {r.metric: r for r in res.results}
    assert set(figs) == {"events_per_s", "runtime_s", "efficiency"}
    ev, rt = figs["events_per_s"], figs["runtime_s"]
    p = ev.params
    assert p["verified"]["digest"] == p["digest"] and p["verified"]["committed"] == p["committed"]
    assert len(ev.samples) == 3 and ev.value == pytest.approx(sorted(ev.samples)[1])
    for rate, t in zip(ev.samples, rt.samples):  # the rate is committed / runtime, per repeat
        assert rate == pytest.approx(p["committed"] / t)
    assert p["runtime"]["n"] == 3 and p["runtime"]["ci99_mean_s"][0] <= p["runtime"]["mean_s"] <= \
        p["runtime"]["ci99_mean_s"][1]
    assert p["runtime"]["ci99_median_s"] is None  # 3 repeats cannot give a 99% interval of the median
    assert 0 < p["efficiency"] <= 1 and 0 < p["remote_fraction"] < 0.25  # ~ remote x (1 - 1/2)
    assert len(p["per_repeat"]["rolled_back"]) == 3 and p["transport_used"] == "shm"
    assert store.results(store.list_runs()[0].id)


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clusterbench", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"})


@pytest.mark.parallel
@pytest.mark.integration
def test_cli_bad_input_exits_2_and_stores_nothing(tmp_path) -> None:
    db = os.environ["CLUSTERBENCH_DB"]
    r = _cli("run", "pdes", "--remote", "2")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--remote 2" in r.stderr, r.stderr
    assert not os.path.exists(db) or Store(db).list_runs() == []


@pytest.mark.parallel
@pytest.mark.integration
def test_exhausted_event_memory_names_the_option(live_probe, mpi, tmp_path) -> None:
    store = Store(tmp_path / "r.db")
    with pytest.raises(KernelFailed, match="exhausted its event memory.*raise --event-memory") as exc:
        session_run(["pdes"], {"pdes": {"lps": 4096, "end": 2000.0, "ranks": 2, "event_memory": 0.5,
                                        "batch": 4096, "gvt_interval": 1000, "repeat": 1, "verify": False,
                                        "allow_root": True}},
                    use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    assert "\n" not in str(exc.value) and "Traceback" not in str(exc.value)
    assert store.list_runs()[0].results == 0


def _pdes_processes() -> list[int]:
    """This test's kernel processes (tests/prockit.py: not another test's beside it)."""
    return prockit.kernels()


@pytest.mark.parallel  # its bound (30 s for a 6 s timeout) has room for a busy machine
@pytest.mark.integration
def test_a_hung_rank_is_bounded_and_leaves_nothing(live_probe, mpi, tmp_path) -> None:
    store = Store(tmp_path / "r.db")
    t0 = time.monotonic()
    with pytest.raises(KernelFailed, match="timed out"):
        session_run(["pdes"], {"pdes": {"end": 2000.0, "lps": 64, "ranks": 2, "hang_rank": 1, "hang_after": 0.0,
                                        "repeat": 1, "verify": False, "allow_root": True}},
                    use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"], timeout=6)
    assert time.monotonic() - t0 < 30
    assert store.list_runs()[0].results == 0
    assert prockit.gone_within(_pdes_processes) == []


@pytest.mark.parallel
@pytest.mark.integration
def test_two_node_virtual_cluster_over_tcp(live_probe, mpi, sim_cluster, tmp_path) -> None:
    """One rank per node of a 2-node virtual cluster over TCP: the same history, the messages
    that left the rank also left the node, and the figures say the transport."""
    c = sim_cluster(2, mtu=9000)
    hosts = ",".join(f"{n.name}:1" for n in c.nodes)
    res = session_run(["pdes"], {"pdes": {"lps": 256, "end": 300.0, "hosts": hosts, "transport": "tcp",
                                          "repeat": 2, "allow_root": True}},
                      use_store=True, store=Store(tmp_path / "r.db"), probe_data=live_probe, argv=["clusterbench"],
                      timeout=120)
    p = next(r for r in res.results if r.metric == "events_per_s").params
    assert p["nodes"] == 2 and p["ranks_per_node"] == 1 and p["transport_used"] == "tcp"
    assert p["verified"]["digest"] == p["digest"]
    assert p["offnode_fraction"] == pytest.approx(p["remote_fraction"]) and p["offnode_fraction"] > 0


@pytest.mark.integration
def test_compare_tcp_against_shm(live_probe, mpi, tmp_path) -> None:
    """Seed 003's experiment in one command: pdes over TCP against shared memory, compared."""
    if len(allowed_cpus(RunContext(probe=live_probe))) < 2:
        pytest.skip("needs 2 cpus")
    from clusterbench.report.compare import compare_sides

    store = Store(tmp_path / "r.db")
    for _ in range(2):
        for transport in ("tcp", "shm"):
            session_run(["pdes"], {"pdes": {"lps": 256, "end": 300.0, "ranks": 2, "transport": transport,
                                            "repeat": 2, "verify": False, "allow_root": True}},
                        use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"], tags=[transport])
    doc = compare_sides(store, "tcp", "shm")
    m = next(m for m in doc["matches"] if m["benchmark"] == "pdes" and m["metric"] == "events_per_s")
    assert m["comparison"]["ratio"] > 0
    assert any("transport" in e["label"].lower() for e in doc["env"]), doc["env"]
