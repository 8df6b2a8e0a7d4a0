"""The pure tests (they start no process) of what tests/integration/test_bw.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import os

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.mpi.common import KernelSession, power_sizes
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.launch import mpi as M


IS_ROOT = os.geteuid() == 0


def test_power_sizes() -> None:
    assert power_sizes(4 << 20)[:4] == [1, 2, 4, 8] and power_sizes(4 << 20)[-1] == 4 << 20
    assert len(power_sizes(4 << 20)) == 23


def test_wrong_placement_is_refused(ctx) -> None:
    spec = M.LaunchSpec(nranks=2, places=[M.RankPlace(None, 0), M.RankPlace(None, 1)])
    s = KernelSession(ctx, "bw", spec, None, {}, lambda rec: None)  # type: ignore[arg-type]
    bad = {"type": "info", "ranks": [{"rank": 0, "host": "h", "node": "", "cpus": "0", "cpu": 0},
                                     {"rank": 1, "host": "h", "node": "", "cpus": "0", "cpu": 0}]}
    with pytest.raises(KernelFailed, match="not to cpu 1"):
        s(bad)
    s2 = KernelSession(ctx, "multipair", spec, None, {}, lambda rec: None, different_nodes=[(0, 1)])  # type: ignore
    same = {"type": "info", "ranks": [{"rank": 0, "host": "h", "node": "n1", "cpus": "0", "cpu": 0},
                                      {"rank": 1, "host": "h", "node": "n1", "cpus": "1", "cpu": 1}]}
    with pytest.raises(KernelFailed, match="both ran on n1"):
        s2(same)
    with pytest.raises(KernelFailed, match="before reporting"):
        s({"type": "result", "metric": "bw", "params": {}, "samples": [1.0]})


def test_bad_input(ctx) -> None:
    bw = get_benchmark("bw")
    for given, match in (({"direction": "sideways"}, "not one of"), ({"sizes": [0, 8]}, "not allowed"),
                         ({"cpus": [0]}, "two cpus"), ({"window": 0}, "window"),
                         ({"time_budget": 0}, "time-budget"), ({"max_size": 2 << 30}, "max-size 2147483648 is not allowed; use 1 to 1073741824 .1 GiB")):
        with pytest.raises(UsageError, match=match):
            bw.resolve(ctx, {"allow_root": True, **given})
    mp = get_benchmark("multipair")
    with pytest.raises(UsageError, match="even count"):
        mp.resolve(ctx, {"allow_root": True, "cpus": [0, 1, 0]})
    with pytest.raises(UsageError, match="pairs 0"):
        mp.resolve(ctx, {"allow_root": True, "pairs": [0, 1]})
    with pytest.raises(UsageError, match="slots"):
        mp.resolve(ctx, {"allow_root": True, "hosts": "n1:1,n2:1", "pairs": [2]})


@pytest.mark.skipif(not IS_ROOT, reason="the allow-run-as-root rule applies to root only")
def test_root_without_allow_root(ctx, monkeypatch) -> None:
    monkeypatch.delenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", raising=False)
    for name in ("bw", "multipair"):
        with pytest.raises(UsageError, match=r"running as root needs your consent, pass allow_root=True"):
            get_benchmark(name).resolve(ctx, {"sizes": [8]})


def test_multipair_pair_limit_and_spec(ctx) -> None:
    mp = get_benchmark("multipair")
    ctx.oversubscribe = False
    p = mp.resolve(ctx, {"allow_root": True})
    half = min(len(p["side_a"]), len(p["side_b"]))
    assert p["pair_counts"][0] == 1 and p["pair_counts"][-1] <= half
    if half < 4:
        with pytest.raises(UsageError, match="exceeds"):
            mp.resolve(ctx, {"allow_root": True, "pairs": [4]})
    p = mp.resolve(ctx, {"allow_root": True, "hosts": "n1:4,n2:4", "pairs": [1, 2]})
    spec = mp.launch_spec(ctx, p, 2)
    assert p["placement"] == "inter-node" and [pl.host for pl in spec.places] == ["n1", "n1", "n2", "n2"]
    assert spec.places[0].cpu != spec.places[1].cpu  # pinned to distinct cores on each node
