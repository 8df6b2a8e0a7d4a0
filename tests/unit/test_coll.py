"""The pure tests (they start no process) of the MPI collectives (benchmarks/mpi/coll.py): the
registry of ops, size lists and their rules, nccl-tests' bandwidth factors and byte counts, the
forced-algorithm record, the kernel's arguments and the figures built from a kernel record.
tests/integration/test_coll.py runs the kernel with Open MPI and MPICH."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.benchmarks.mpi import coll
from clusterbench.benchmarks.mpi.suite import MpiSuite
from clusterbench.errors import UsageError


def test_one_benchmark_per_op_and_the_set_in_run_mpi() -> None:
    assert coll.OPS == ("allreduce", "bcast", "alltoall", "allgather", "reduce", "reduce-scatter", "gather",
                        "scatter", "barrier")
    for op in coll.OPS:
        b = get_benchmark(op)
        assert b.name == op and b.kernel == "coll" and isinstance(b, coll.CollBase)
        assert [m.name for m in b.metrics] == (["latency"] if op == "barrier" else ["latency", "algbw", "busbw"])
        assert b.ops({}) == [op]
    assert "coll" in MpiSuite.members()
    assert get_benchmark("coll").ops({"ops": ["bcast", "bcast", "barrier"]}) == ["bcast", "barrier"]


def test_busbw_factors_and_byte_counts() -> None:
    f = coll.busbw_factor
    assert f("allreduce", 4) == pytest.approx(1.5) and f("allreduce", 2) == pytest.approx(1.0)
    for op in ("allgather", "reduce-scatter", "alltoall"):
        assert f(op, 4) == pytest.approx(0.75)
    for op in ("bcast", "reduce", "gather", "scatter"):
        assert f(op, 8) == 1.0
    assert f("barrier", 4) == 0.0
    for op in ("allgather", "alltoall", "gather", "scatter"):
        assert coll.algbw_bytes(op, 1024, 4) == 4096  # nccl-tests counts the whole P x block buffer
    for op in ("allreduce", "reduce", "reduce-scatter", "bcast"):
        assert coll.algbw_bytes(op, 1024, 4) == 1024


def test_size_lists_and_rules() -> None:
    assert coll.default_sizes("bcast") == [4 << i for i in range(19)]  # 4 B .. 1 MiB
    assert coll.default_sizes("allreduce")[:2] == [8, 16] and coll.default_sizes("allreduce")[-1] == 1 << 20
    assert coll.default_sizes("barrier") == [0]
    assert coll.check_op_sizes("barrier", [8, 16]) == [0]
    assert coll.check_op_sizes("alltoall", [24, 4, 24]) == [4, 24]  # no divisibility rule: per-rank blocks
    assert coll.check_op_sizes("reduce-scatter", [24]) == [24]  # split as OSU: no size % P rule
    for op, sizes, match in (("allreduce", [12], "not a multiple of 8"), ("reduce", [4], "multiple of 8"),
                             ("bcast", [0], "out of range"), ("bcast", [1 << 31], "out of range"),
                             ("gather", list(range(1, 70)), "too many"), ("allgatherv", [8], "unknown collective")):
        with pytest.raises(UsageError, match=match):
            coll.check_op_sizes(op, sizes)


def test_forced_algorithm_from_the_environment() -> None:
    f = coll.algorithm_from_env
    assert f("allreduce", "openmpi", {}) is None
    env = {"OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}
    assert f("allreduce", "openmpi", env) is None  # without dynamic rules Open MPI ignores it
    env["OMPI_MCA_coll_tuned_use_dynamic_rules"] = "1"
    assert f("allreduce", "openmpi", env) == {"mpi": "openmpi", "param": "coll_tuned_allreduce_algorithm",
                                              "value": 4}
    assert f("reduce-scatter", "openmpi", {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                                           "OMPI_MCA_coll_tuned_reduce_scatter_algorithm": "2"})["value"] == 2
    assert f("bcast", "mpich", {"MPIR_CVAR_BCAST_INTRA_ALGORITHM": "binomial"}) == {
        "mpi": "mpich", "param": "MPIR_CVAR_BCAST_INTRA_ALGORITHM", "value": "binomial"}
    assert f("bcast", "mpich", {"MPIR_CVAR_BCAST_INTRA_ALGORITHM": "auto"}) is None


def test_bad_input(ctx: RunContext) -> None:
    ctx.oversubscribe = True
    for name, given, match in (("allreduce", {"ranks": 1}, "ranks 1 is not allowed; use 2 to 4096"),
                               ("allreduce", {"sizes": [12]}, "multiple of 8"),
                               ("bcast", {"sizes": [0]}, "sizes 0 is not allowed"),
                               ("coll", {"ops": ["allreduce", "frob"]}, "not one of"),
                               ("alltoall", {"hosts": "n1:1"}, "2 or more ranks"),
                               ("gather", {"time_budget": 0}, "time-budget"),
                               ("scatter", {"validate_every": 0}, "validate-every"),
                               ("bcast", {"hosts": "a:2", "hostfile": "/nonexistent"}, "both given")):
        with pytest.raises(UsageError, match=match):
            get_benchmark(name).resolve(ctx, {**given, "allow_root": True})


def test_resolved_params_and_kernel_args(ctx: RunContext, monkeypatch: pytest.MonkeyPatch) -> None:
    quick = get_benchmark("coll").resolve(ctx, {"ranks": 2, "allow_root": True})
    assert quick["size_list"] == [8, 1024, 65536]  # ctx's profile is quick
    ctx = RunContext(probe=ctx.probe, profile="default", timeout=300, oversubscribe=True)
    bench = get_benchmark("coll")
    p = bench.resolve(ctx, {"ranks": 3, "ops": ["allreduce", "bcast", "barrier"], "allow_root": True})
    assert p["sizes_by_op"]["barrier"] == [0] and p["sizes_by_op"]["allreduce"][0] == 8
    assert p["size_list"][0] == 4 and p["size_list"][-1] == 1 << 20  # bcast's 4 B; the kernel skips it for allreduce
    monkeypatch.delenv(coll.CORRUPT_ENV, raising=False)
    args = bench.kernel_args(p)
    assert args[0] == "--ops=allreduce,bcast,barrier" and "--nonblocking=0" in args
    assert not any(a.startswith("--corrupt") for a in args)
    monkeypatch.setenv(coll.CORRUPT_ENV, "bcast:0")
    assert bench.kernel_args(p)[-1] == "--corrupt=bcast:0"
    hosts = get_benchmark("allgather").resolve(ctx, {"hosts": "a:2,b:2", "allow_root": True})
    assert hosts["ranks"] == 4 and [h for h, _ in hosts["places"]] == ["a", "a", "b", "b"]


class _Ctx:
    """What CollBase.figures needs of a RunContext: emit (recorded)."""

    def __init__(self) -> None:
        self.emitted: list[tuple] = []

    def emit(self, bench, metric, samples, params, times_s=None, value=None, check_cv=True):
        self.emitted.append((bench.name, metric, list(samples), params, value))
        return (bench.name, metric, value, params)


def test_figures_from_a_kernel_record() -> None:
    ctx = _Ctx()
    base = {"processes": 4, "nonblocking": True, "mpi": {"name": "openmpi", "version": "4.1"},
            "transport_used": "tcp", "placement": [{"node": "n1"}, {"node": "n1"}, {"node": "n2"}, {"node": "n2"}],
            "p2p": {"pair": [0, 3], "size_bytes": [0, 1], "half_rtt_us": [5.0, 5.1]}}
    kp = {"op": "allgather", "size": 1024, "avg_us": 10.0, "min_us": 9.0, "max_us": 11.0, "p50_us": 9.5,
          "p99_us": 20.0, "iterations": 100, "warmup": 10, "checked_iterations": 2, "overlap_pct": 40.0,
          "pure_comm_us": 8.0, "compute_us": 8.1}
    out = get_benchmark("coll").figures(ctx, "allgather", 1024, kp, [9.0, 10.0, 11.0], base)
    assert [(b, m) for b, m, *_ in out] == [("allgather", "latency"), ("allgather", "algbw"), ("allgather", "busbw")]
    lat, alg, bus = ({"value": v, "params": p} for _, _, v, p in out)
    assert lat["value"] == 10.0 and alg["value"] == pytest.approx(4096 / 10.0)  # B/us = MB/s
    assert bus["value"] == pytest.approx(4096 / 10.0 * 0.75)
    p = lat["params"]
    assert p["op"] == "allgather" and p["size_bytes"] == 1024 and p["processes"] == 4 and p["nodes"] == 2
    assert (p["min_us"], p["max_us"], p["p50_us"], p["p99_us"]) == (9.0, 11.0, 9.5, 20.0)
    assert p["overlap_pct"] == 40.0 and p["pure_comm_us"] == 8.0 and p["compute_us"] == 8.1
    assert p["validated"] and p["algorithm"] is None or p["algorithm"]["mpi"] == "openmpi"
    assert p["p2p"]["pair"] == [0, 3] and p["p2p"]["transport_used"] == "tcp"
    barrier = get_benchmark("coll").figures(ctx, "barrier", 0, {**kp, "op": "barrier", "size": 0}, [1.0], base)
    assert [m for _, m, *_ in barrier] == ["latency"] and not barrier[0][3]["validated"]


def test_every_collective_figure_is_judged_by_the_network_model():
    """The model's limit is declared on every metric of every op, and its findings are the ops' rule."""
    from clusterbench.analysis import collmodel
    from clusterbench.benchmarks import get_benchmark
    from clusterbench.benchmarks.mpi.coll import OPS
    for op in OPS:
        bench = get_benchmark(op)
        assert bench.metrics, op
        for m in bench.metrics:
            assert "collective_model" in m.limits, (op, m.name)
        assert collmodel.findings in bench.findings, op


def test_a_rules_file_in_the_environment_is_the_recorded_algorithm():
    from clusterbench.benchmarks.mpi.coll import algorithm_from_env
    env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_dynamic_rules_filename": "/t/a.rules"}
    assert algorithm_from_env("allreduce", "openmpi", env) == {
        "mpi": "openmpi", "param": "coll_tuned_dynamic_rules_filename", "value": "/t/a.rules"}
    # Open MPI 4.1 reads the file first; without it the forced id; without dynamic rules neither counts
    env["OMPI_MCA_coll_tuned_allreduce_algorithm"] = "4"
    assert algorithm_from_env("allreduce", "openmpi", env)["value"] == "/t/a.rules"
    del env["OMPI_MCA_coll_tuned_dynamic_rules_filename"]
    assert algorithm_from_env("allreduce", "openmpi", env)["value"] == 4
    env["OMPI_MCA_coll_tuned_use_dynamic_rules"] = "0"
    assert algorithm_from_env("allreduce", "openmpi", env) is None
