"""The pure tests (they start no process) of what tests/integration/test_hpl.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.hpl.builtin_engine import BuiltinEngine
from clusterbench.benchmarks.hpl.registry import ENGINES
from clusterbench.benchmarks.hpl.sizing import grids
from clusterbench.errors import UsageError

from hplkit import _ctx, _two_sockets


@pytest.fixture(autouse=True)
def _root_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")


def test_grids_and_engine_registry():
    assert grids(1) == [(1, 1)]
    assert grids(4) == [(2, 2), (1, 4)]
    assert sorted(grids(12)) == [(1, 12), (2, 6), (3, 4)]
    assert all(p <= q and p * q == 36 for p, q in grids(36))
    assert "builtin" in ENGINES and ENGINES["builtin"].name == "builtin"
    assert isinstance(ENGINES["builtin"], BuiltinEngine)


def test_declared_metrics_and_limits():
    bench = get_benchmark("hpl")
    m = bench.metric("rmax")
    assert m.unit == "Gflop/s" and m.higher_is_better and m.limits[0] == "rpeak" and "measured_peak" in m.limits
    assert not bench.metric("time_s").higher_is_better and not bench.metric("residual").higher_is_better
    assert "2/3" in (get_benchmark("hpl").__module__ and __import__("clusterbench.benchmarks.hpl.hpl",
                                                                      fromlist=["x"]).__doc__)
    assert os.path.isfile(Path(__file__).resolve().parents[2] / "src/clusterbench/kernels/hpl/hpl.c")


def test_hybrid_groups_refuses_uneven_sockets(live_probe):
    from clusterbench.benchmarks.hpl.placement import hybrid_groups

    probe = _two_sockets(live_probe)
    ctx = _ctx(probe)
    cpus = [c["pu"] for c in probe["topology"]["cpus"]]
    assert hybrid_groups(ctx, cpus, "node") == [cpus]
    half = len(cpus) // 2
    assert hybrid_groups(ctx, cpus, "socket") == [cpus[:half], cpus[half:]]
    if len(cpus) >= 3:
        with pytest.raises(UsageError, match="different numbers of usable cores"):
            hybrid_groups(ctx, cpus[:-1], "socket")
