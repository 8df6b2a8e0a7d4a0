"""The pure tests (they start no process) of what tests/integration/test_ring.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import allowed_cpus
from clusterbench.benchmarks.mpi.ring import assign_ranks
from clusterbench.errors import UsageError
from clusterbench.launch import mpi as M


def test_bad_input(ctx) -> None:
    bench = get_benchmark("ring")
    for given, match in (({"ranks": 1}, "ranks 1 is not allowed; use 2 to 4096 .a ring needs two ranks"),
                         ({"ranks": 0}, "ranks 0 is not allowed"), ({"random_rings": 0}, "random-rings"),
                         ({"measurements": 0}, "measurements"), ({"bw_size": 0}, "bw-size"),
                         ({"ranks": 2, "cpus": [0]}, "one cpu per rank"), ({"hosts": "n1:1", "ranks": 2}, "slots"),
                         ({"transport": "smoke"}, "not one of")):
        with pytest.raises(UsageError, match=match):
            bench.resolve(ctx, {**given, "allow_root": True})


def test_rank_assignment_and_defaults(ctx) -> None:
    hosts = M.parse_hosts("a:2,b:1")
    assert assign_ranks(hosts, 3) == ["a", "a", "b"]
    assert assign_ranks(hosts, 5) == ["a", "a", "b", "a", "b"]
    bench = get_benchmark("ring")
    p = bench.resolve(ctx, {"hosts": "a:2,b:2", "allow_root": True})  # real cluster: per-host cores
    assert p["ranks"] == 4 and [h for h, _ in p["places"]] == ["a", "a", "b", "b"]
    assert p["cpus"][0] == p["cpus"][2] and p["cpus"][0] != p["cpus"][1]
    if len(allowed_cpus(ctx)) >= 2:
        assert bench.resolve(ctx, {"allow_root": True})["ranks"] == min(ctx.n_cores, len(allowed_cpus(ctx)))
