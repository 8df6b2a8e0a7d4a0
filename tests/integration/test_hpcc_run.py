"""`run hpcc --quick` end to end with the real kernels: on 2 ranks of this node and across a 2-node
virtual cluster, every HPC Challenge key the members declare is stored (HPCG beside them), and the
hpccoutf export of the run reads back with the parser used for real hpcc output.

What is checked here is the suite's plumbing (every key, its placement, the export), not a figure:
the parts that take most of --quick's time (HPL's N, RandomAccess's table, FFT's size and planning,
HPCG's box and time; 5 of --quick's 5.5 minutes per run on 2 loaded cores) get smaller --quick
values for these two tests (``small_parts``); each part's own sizes are tested in its own file."""
from __future__ import annotations

import pytest

from clusterbench import session
from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext, allowed_cpus
from clusterbench.benchmarks.hpl.engines import parse_hpcc_output
from clusterbench.export.hpccoutf import hpccoutf
from clusterbench.store import Store

#: the keys a 2-rank run must carry (hpcc's own summary names)
KEYS = {"HPL_Tflops", "SingleDGEMM_Gflops", "StarDGEMM_Gflops", "SingleSTREAM_Triad", "StarSTREAM_Triad",
        "PTRANS_GBs", "SingleRandomAccess_GUPs", "StarRandomAccess_GUPs", "MPIRandomAccess_GUPs",
        "SingleRandomAccess_LCG_GUPs", "StarRandomAccess_LCG_GUPs", "MPIRandomAccess_LCG_GUPs",
        "SingleFFT_Gflops", "StarFFT_Gflops", "MPIFFT_Gflops", "MinPingPongLatency_usec",
        "MaxPingPongBandwidth_GBytes", "NaturallyOrderedRingLatency_usec", "RandomlyOrderedRingBandwidth_GBytes"}
#: the keys of the parts that run across the nodes (stream and dgemm measure this node)
CROSS_NODE = {"HPL_Tflops", "PTRANS_GBs", "MPIRandomAccess_GUPs", "MPIFFT_Gflops", "MinPingPongLatency_usec",
              "NaturallyOrderedRingLatency_usec"}


#: --quick's values for these tests, per part (the profile of each part's class, restored after)
SMALL_QUICK = {"hpl": {"mem": 0.003},  # N ~ 2700 instead of ~8700 on this 24 GiB machine
               "randomaccess": {"log2_size": 18, "samples": 1},
               "fft": {"n": 1 << 16, "samples": 2, "plan_seconds": 0.5},
               "hpcg": {"local": "16x16x16", "time": 1.0}}


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, values in SMALL_QUICK.items():
        cls = type(get_benchmark(name))
        monkeypatch.setattr(cls, "profiles", {**cls.profiles, "quick": {**cls.profiles.get("quick", {}), **values}})


def _check(rep: session.RunReport, store: Store) -> dict[str, dict]:
    rows = store.results(rep.run.id)
    assert len(rows) == len(rep.results) > 0
    keys = {r.params["hpcc_key"]: r for r in rows if r.params.get("hpcc_key")}
    assert KEYS <= set(keys), sorted(KEYS - set(keys))
    assert any(r.benchmark == "hpcg" and r.metric == "rating" and r.params["valid"] for r in rows)
    run = store.list_runs()[0]
    summary = parse_hpcc_output(hpccoutf(run, rows))["summary"]
    assert summary["Success"] == 1
    for key in KEYS:  # the best figure of each key, in hpcc's unit
        values = [r.params["hpcc_value"] for r in rows if r.params.get("hpcc_key") == key]
        best = min(values) if "Latency" in key else max(values)
        assert summary[key] == pytest.approx(best, rel=1e-5)
    assert summary["RandomAccess_N"] > 0 and summary["MPIRandomAccess_N"] > 0
    return keys


def _two_ranks(live_probe: dict) -> None:
    if len(allowed_cpus(RunContext(probe=live_probe))) < 2:
        pytest.skip("needs 2 cpus")


@pytest.mark.parallel
@pytest.mark.integration
def test_run_hpcc_quick_on_two_ranks(live_probe, mpi, tmp_path) -> None:
    _two_ranks(live_probe)
    store = Store(tmp_path / "r.db")
    rep = session.run(["hpcc"], {"hpcc": {"allow_root": True}}, profile="quick", store=store,
                      probe_data=live_probe, argv=["clusterbench", "run", "hpcc", "--quick"])
    keys = _check(rep, store)
    assert keys["MPIFFT_Gflops"].params["processes"] == 2
    assert [m for m in get_benchmark("hpcc").members()][-1] == "hpcg"


@pytest.mark.parallel
@pytest.mark.integration
def test_run_hpcc_quick_across_a_two_node_virtual_cluster(live_probe, mpi, sim_cluster, tmp_path) -> None:
    _two_ranks(live_probe)
    c = sim_cluster(2)
    hosts = ",".join(f"{n.name}:1" for n in c.nodes)
    store = Store(tmp_path / "r.db")
    rep = session.run(["hpcc"], {"hpcc": {"allow_root": True, "hosts": hosts}}, profile="quick", store=store,
                      probe_data=live_probe, timeout=300, argv=["clusterbench", "run", "hpcc", "--quick"])
    keys = _check(rep, store)
    names = {n.name for n in c.nodes}
    for key in CROSS_NODE:  # these figures ran with a rank on each virtual node
        placed = keys[key].params.get("placement") or []
        assert {p.get("node") or p.get("host") for p in placed} == names, (key, placed)
