"""The pure tests (they start no process) of what tests/integration/test_ptrans.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import math

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext, available_memory
from clusterbench.benchmarks.hpcc.ptrans import local_bytes, node_bytes, numroc
from clusterbench.benchmarks.hpl.sizing import default_n, default_nb
from clusterbench.errors import UsageError


def test_defaults_follow_hpl(ctx) -> None:
    """HPCC: PTRANS on HPL's grid and NB, n = HPL's N / 2 (no --quick: the real default)."""
    c = RunContext(probe=ctx.probe, timeout=10_000)
    p = get_benchmark("ptrans").resolve(c, {"ranks": 1, "allow_root": True})
    nb = default_nb(ctx.probe)
    assert p["nb"] == nb and p["grid"] == [1, 1]
    mem = available_memory(ctx.probe)
    hpl_n = default_n(mem, nb, 1, 1)
    assert p["n"] == hpl_n // 2 or node_bytes(hpl_n // 2, nb, 1, 1, 1) > 0.8 * mem


def test_block_cyclic_sizes() -> None:
    assert [numroc(37, 8, r, 2) for r in range(2)] == [21, 16]  # blocks 0,2,4(5 rows) | 1,3
    assert [numroc(9, 8, r, 2) for r in range(2)] == [8, 1]
    assert sum(numroc(1000, 7, r, 3) for r in range(3)) == 1000
    assert local_bytes(37, 8, 1, 2) == 8 * 37 * 21


def test_bad_input_is_one_line(ctx) -> None:
    bench = get_benchmark("ptrans")
    for given, match in (({"ranks": 1, "grid": "1x2"}, r"--grid 1x2 has 2 processes and 1 ranks run"),
                         ({"ranks": 1, "grid": "two"}, "is not P x Q"),
                         ({"ranks": 1, "n": 100, "nb": 200}, "--nb 200 is larger than n=100"),
                         ({"ranks": 1, "nb": 0}, "--nb 0 is not allowed"),
                         ({"ranks": 1, "n": 0}, "--n 0 is not allowed"),
                         ({"ranks": 1, "n": 9_000_000}, r"above 80% of the .* GiB available.*use --n \d+ or less")):
        c = RunContext(probe=ctx.probe, timeout=10_000)
        with pytest.raises(UsageError, match=match) as exc:
            bench.resolve(c, {"allow_root": True, **given})
        assert "\n" not in str(exc.value)


def test_fitting_n_is_named(ctx) -> None:
    mem = available_memory(ctx.probe)
    c = RunContext(probe=ctx.probe, timeout=10_000)
    with pytest.raises(UsageError) as exc:
        get_benchmark("ptrans").resolve(c, {"allow_root": True, "ranks": 1, "n": 9_000_000, "nb": 64})
    fit = int(str(exc.value).rsplit("--n ", 1)[1].split()[0])
    assert node_bytes(fit, 64, 1, 1, 1) <= 0.8 * mem < node_bytes(fit + 64, 64, 1, 1, 1)
    assert math.isfinite(fit) and fit > 0
