"""The plug-in seam: a benchmark declared in one module reaches the suites, the parameter checks,
the table printer, the limits and the summary with nothing else edited; and the declarations of
the benchmarks that ship are consistent. Pure: no compiler, no MPI."""
from __future__ import annotations

import pytest

from clusterbench import benchmarks as registry
from clusterbench.analysis import limits
from clusterbench.benchmarks import all_benchmarks, get_benchmark, register, summarize_results
from clusterbench.benchmarks.base import Composite, KernelBenchmark, Metric, Param, Result, RunContext
from clusterbench.benchmarks.node.suite import Node
from clusterbench.errors import UsageError
from clusterbench.ui import result_rows


def _headline(rs: list[Result]) -> list[str]:
    return [f"toy      {r.value:.0f} ops/s" for r in rs if r.benchmark == "toy"]


def _finding(rs: list[Result]) -> list[str]:
    return ["toy is slow"] if any(r.benchmark == "toy" and r.value < 10 for r in rs) else []


@pytest.fixture
def toy():
    """A benchmark as a new module would declare it; removed from the registry afterwards."""

    class Toy(KernelBenchmark):
        name = "toy"
        suites = {"node": 35}  # between stream (30) and membw (40)
        key_params = ("width", "threads")
        help = "a toy"
        kernel = "toy"
        metrics = (Metric("rate", "ops/s", True, "toy rate", ("best_bandwidth",), provides=("best_bandwidth",)),)
        params = (Param("width", int, 4, "toy width", min=1, max=64, why="toy limit"),
                  Param("names", "strlist", None, "toy names", ("a", "b")))
        headlines = (_headline,)
        findings = (_finding,)

    register(Toy)
    yield Toy
    registry.REGISTRY.pop("toy")
    registry.PROVIDERS["best_bandwidth"].discard(("toy", "rate"))


def test_a_new_module_reaches_suite_printer_limits_and_summary(toy) -> None:
    members = Node.members()
    assert members.index("stream") < members.index("toy") < members.index("membw")
    assert "toy" in Node.describe()
    assert ("toy", "rate") in registry.PROVIDERS["best_bandwidth"]
    # its figures feed the measured limit that other memory figures are judged by
    ctx = RunContext(probe={})
    ctx.results.append(Result("toy", "rate", 500.0, "ops/s", True, {"threads": 1}, [500.0], {}))
    judged = limits.judge(ctx, Result("stream", "triad", 250.0, "MB/s", True, {"threads": 1}, [250.0], {}),
                          ("best_bandwidth",), registry.PROVIDERS)
    assert judged[0]["value"] == 500.0 and judged[0]["fraction"] == 0.5
    row = result_rows([Result("toy", "rate", 5.0, "ops/s", True, {"threads": 2, "width": 8, "other": 1}, [5.0],
                              {})])[0]
    assert row[2] == "width=8 threads=2"  # its key parameters, in its order; "other" is not one
    summ = summarize_results([Result("toy", "rate", 5.0, "ops/s", True, {}, [5.0], {})])
    assert summ == {"lines": ["toy      5 ops/s"], "findings": ["toy is slow"]}


def test_declared_bounds_are_the_only_range_check(toy) -> None:
    ctx = RunContext(probe={})
    bench = get_benchmark("toy")
    assert bench.resolve(ctx, {"width": 64})["width"] == 64
    for given, message in (({"width": 0}, "--width 0 is not allowed; use 1 to 64 (toy limit)"),
                           ({"width": 65}, "--width 65 is not allowed; use 1 to 64 (toy limit)"),
                           ({"names": []}, "--names is empty"),
                           ({"names": ["a", "z"]}, "--names z is not one of a, b")):
        with pytest.raises(UsageError) as err:
            bench.resolve(ctx, given)
        assert str(err.value).startswith(message)


def test_user_parameters_are_kept_apart_from_derived_ones() -> None:
    ctx = RunContext(probe={})  # no topology: threads default to this process's cpus
    p = get_benchmark("stream").resolve(ctx, {"ntimes": 3})
    assert p.user["threads"] is None and p.user["ntimes"] == 3  # what was asked
    assert p["threads"] >= 1 and "threads" in p.derived and "cpus" in p.derived  # what check() worked out
    assert "ntimes" not in p.derived


def test_shipped_declarations_are_consistent() -> None:
    """Every suite member exists, key parameters and limits are declared once, and no two
    benchmarks claim one position in a suite."""
    benches = all_benchmarks()
    for name, cls in benches.items():
        assert len(set(cls.key_params)) == len(cls.key_params), name
        names = [p.name for p in cls.params]
        assert len(set(names)) == len(names), f"{name} declares a parameter twice"
        for p in cls.params:
            if p.min is not None and p.max is not None:
                assert p.min <= p.max, (name, p.name)
            if p.default is not None and p.type in (int, float):
                p.check(p.default)  # a default must satisfy its own bounds
    for suite in (n for n, c in benches.items() if issubclass(c, Composite)):
        positions = [c.suites[suite] for c in benches.values() if suite in c.suites]
        assert positions and len(set(positions)) == len(positions), suite
    assert {"node", "mpi"} <= set(benches)
    assert get_benchmark("bandwidth").name == "membw"  # the old name still selects it
