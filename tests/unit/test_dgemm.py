"""The pure tests (they start no process) of what tests/integration/test_dgemm.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.node.dgemm import LATE_FRACTION, late_warning
from clusterbench.errors import EnvironmentProblem, UsageError


def test_dgemm_star_late_warning():
    results = {0: {"times_s": [0.2, 0.25]}, 1: {"times_s": [0.21, 0.3]}}
    on_time = {0: {"late_s": 0.0}, 1: {"late_s": 0.5 * LATE_FRACTION * 0.2}}
    assert late_warning(on_time, results) is None
    late = {0: {"late_s": 0.0}, 1: {"late_s": 2 * LATE_FRACTION * 0.2}}
    w = late_warning(late, results)
    assert w and w.code == "star-not-concurrent" and "process 1" in w.message and "not fully concurrent" in w.message
    assert w.remedy


def test_dgemm_missing_known_blas_names_package(ctx, monkeypatch):
    import clusterbench.probe.blas as b
    monkeypatch.setattr(b, "installed_blas", lambda: {"openblas": "/x/libopenblas.so.0"})
    with pytest.raises(EnvironmentProblem, match="apt-get install libmkl-rt"):
        get_benchmark("dgemm").resolve(ctx, {"blas": "mkl"})


@pytest.mark.parametrize("given", [{"threads": 0}, {"threads": 100000}, {"samples": 0}, {"n": 0},
                                   {"n": 10**6}, {"mode": "bogus"}, {"cpus": [0], "threads": 2},
                                   {"cpus": [0, 0]}, {"cpus": [100000]}])
def test_dgemm_bad_input(ctx, given):
    with pytest.raises(UsageError):
        get_benchmark("dgemm").resolve(ctx, given)


def test_dgemm_threads_cpus_mismatch(ctx):
    with pytest.raises(UsageError, match="does not match"):
        get_benchmark("dgemm").resolve(ctx, {"threads": 2, "cpus": [0]})
    with pytest.raises(UsageError, match="twice"):
        get_benchmark("dgemm").resolve(ctx, {"cpus": [0, 0]})


def test_openblas_on_old_kernels_is_named_by_dgemm_and_hpl_alike() -> None:
    """One rule for both: OpenBLAS that took an AVX2 CPU for an old core (Nehalem) is a warning with the
    coretype to force; a CPU without AVX2, or a library that chose its own kernels, is not."""
    from clusterbench.benchmarks.base import RunContext
    from clusterbench.benchmarks.hpl.builtin_engine import blas_warnings
    from clusterbench.benchmarks.node.dgemm import generic_kernels_warning

    avx2 = RunContext(probe={"cpu": {"isa": ["avx2"]}})
    w = generic_kernels_warning(avx2, "OpenBLAS 0.3.21 NO_AFFINITY Nehalem MAX_THREADS=64", "DGEMM runs")
    assert w is not None and w.code == "blas-generic-kernels" and "its Nehalem kernels" in w.message
    assert "DGEMM runs several times below" in w.message and "--openblas-coretype Haswell" in w.remedy
    hpl = blas_warnings(avx2, "OpenBLAS 0.3.21 Nehalem", [], "/x", None, 1)[0]
    assert hpl is not None and "the dgemm that HPL spends its time in runs several times below" in hpl.message
    assert generic_kernels_warning(RunContext(probe={"cpu": {"isa": ["sse4_2"]}}), "OpenBLAS Nehalem", "x") is None
    assert generic_kernels_warning(avx2, "OpenBLAS 0.3.21 Haswell", "x") is None
    assert "SkylakeX" in generic_kernels_warning(RunContext(probe={"cpu": {"isa": ["avx512f"]}}),
                                                 "OpenBLAS Core2", "x").remedy
