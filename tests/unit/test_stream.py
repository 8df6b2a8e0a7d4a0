"""The pure tests (they start no process) of what tests/integration/test_stream.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.node._memory import size_arrays
from clusterbench.benchmarks.node.stream import plan_numa
from clusterbench.errors import UsageError
from clusterbench.probe.topology import llc_total_bytes


@pytest.mark.parametrize("given, match", [
    ({"threads": 0}, "--threads 0"),
    ({"threads": 10_000}, "exceeds"),
    ({"array_elements": 10**13}, "largest size that fits"),
    ({"array_elements": 0}, "not allowed"),
    ({"ntimes": 1}, "ntimes"),
    ({"variant": "fast"}, "not one of"),
    ({"cpus": [99999]}, "not an online cpu"),
    ({"cpus": [0], "threads": 2}, "does not match"),
    ({"cpus": [0, 0]}, "twice"),
    ({"cpus": []}, "empty"),
])
def test_bad_input_raises_usage_error_before_running(ctx, given, match, monkeypatch):
    import clusterbench.benchmarks.base as base
    import clusterbench.kernels.build as build

    def no_build(*a, **k):  # nothing may be compiled or run for bad input
        raise AssertionError("kernel built for bad input")

    monkeypatch.setattr(build, "build_kernel", no_build)
    monkeypatch.setattr(base, "build_kernel", no_build)
    with pytest.raises(UsageError, match=match):
        get_benchmark("stream").resolve(ctx, given)


def test_default_size_follows_run_rule(ctx):
    n, _ = size_arrays(ctx, None, 3)
    llc = llc_total_bytes(ctx.probe)
    avail = ctx.probe["memory"]["available_bytes"]
    if 3 * 8 * max(4 * llc // 8, 1_000_000) < 0.8 * avail - (256 << 20):
        assert n * 8 >= 4 * llc and n >= 1_000_000
    assert 3 * n * 8 <= avail


def _two_node_probe(avail0=8 << 30, avail1=8 << 30):
    cpus = [{"pu": p, "core": p, "package": p // 4, "numa": p // 4, "kind": None} for p in range(8)]
    return {"topology": {
        "pus": 8, "cores": 8, "cpus": cpus, "caches": [],
        "numa": [{"os_index": 0, "cpus": [0, 1, 2, 3], "memory_total_bytes": 16 << 30,
                  "memory_available_bytes": avail0},
                 {"os_index": 1, "cpus": [4, 5, 6, 7], "memory_total_bytes": 16 << 30,
                  "memory_available_bytes": avail1}]},
        "memory": {"available_bytes": avail0 + avail1}}


def test_numa_plan_two_nodes():
    """The CPU-node x memory-node matrix, planned without hardware: one run per CPU node on its
    cores, each binding the arrays to both memory nodes, so all four pairs are measured."""
    runs, notes = plan_numa(_two_node_probe(), 10_000_000)
    assert [(r["cpu_node"], r["cpus"], r["mem_nodes"]) for r in runs] == [
        (0, [0, 1, 2, 3], [0, 1]), (1, [4, 5, 6, 7], [0, 1])]
    assert sorted(p for r in runs for p in r["pairs"]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(r["array_elements"] == 10_000_000 for r in runs) and not notes
    # the affinity mask narrows each node's cpus; a node with no allowed cpu runs no threads
    runs, _ = plan_numa(_two_node_probe(), 10_000_000, allowed={0, 1})
    assert [(r["cpu_node"], r["cpus"], r["mem_nodes"]) for r in runs] == [(0, [0, 1], [0, 1])]
    # arrays lowered to fit the smallest node's free memory
    runs, notes = plan_numa(_two_node_probe(avail1=1 << 30), 100_000_000)
    assert runs[0]["array_elements"] < 100_000_000 and 3 * runs[0]["array_elements"] * 8 < 1 << 30
    assert notes and "lowered" in notes[0]
    # one node: no matrix
    one = _two_node_probe()
    one["topology"]["numa"] = one["topology"]["numa"][:1]
    assert plan_numa(one, 1000)[0] == []


def test_numa_pages_elsewhere_are_refused():
    """The NUMA matrix refuses a figure whose arrays' pages were not on the node they were bound to
    (the kernel's numa_move_pages query, in its validation record); all on the node passes."""
    from clusterbench.benchmarks.node.stream import check_pages
    from clusterbench.errors import KernelFailed

    check_pages({"type": "validation", "mem_node": 1, "pages_checked": 300, "pages_on_mem_node": 300})
    check_pages({"type": "validation", "mem_node": 1, "pages_checked": 0, "pages_on_mem_node": 0})
    with pytest.raises(KernelFailed, match="2 of 300 pages .* NUMA node 1"):
        check_pages({"type": "validation", "mem_node": 1, "pages_checked": 300, "pages_on_mem_node": 298})


def test_the_winning_variant_is_passed_back_by_the_kernels_name() -> None:
    """Where non-temporal stores are not native (POWER, 32-bit Arm) the nt figure is stored as
    "nt-emulated"; when it wins, the quick profile's later thread counts must ask the kernel for
    --variant=nt (the ppc64el tier's `run node --quick` failed on 'nt-emulated' before)."""
    from clusterbench.benchmarks.declare import Result
    from clusterbench.benchmarks.node.stream import Stream

    notes: list[str] = []

    class Ctx:
        def note(self, text: str) -> None:
            notes.append(text)

    def triad(variant: str, v: float) -> Result:
        return Result("stream", "triad", v, "MB/s", True, {"variant": variant}, [v], {})

    assert Stream.note_winner(Ctx(), [triad("regular", 100.0), triad("nt-emulated", 120.0)], 2) == "nt"
    assert "nt-emulated stores" in notes[-1]
    assert Stream.note_winner(Ctx(), [triad("regular", 130.0), triad("nt", 120.0)], 2) == "regular"
    assert Stream.note_winner(Ctx(), [triad("nt", 140.0), triad("regular", 120.0)], 2) == "nt"
