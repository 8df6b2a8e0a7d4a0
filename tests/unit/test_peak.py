"""The pure tests (they start no process) of what tests/integration/test_peak.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import platform

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.node.peak import fpc_for_isa, infer_fma_units
from clusterbench.errors import UsageError


@pytest.mark.parametrize("given", [{"threads": 0}, {"threads": 100000}, {"threads": -1}, {"samples": 0},
                                   {"seconds": 0.0}, {"isa": "mmx"}, {"cpus": [0], "threads": 2},
                                   {"cpus": [0, 0]}, {"cpus": [100000]}])
def test_peak_bad_input(ctx, given):
    with pytest.raises(UsageError):
        get_benchmark("peak").resolve(ctx, given)


@pytest.mark.parametrize("isa,family", [("vsx", ("ppc",)), ("neon", ("aarch64", "arm")), ("avx2", ("x86_64",))])
def test_peak_refuses_another_architectures_isa(ctx, isa, family):
    """Each architecture's own paths only (VSX on POWER, NEON and SVE on Arm, AVX on x86), in one line."""
    if not platform.machine().lower().startswith(family):
        with pytest.raises(UsageError, match=f"--isa {isa} does not exist on"):
            get_benchmark("peak").resolve(ctx, {"isa": isa})
        return
    try:  # this machine's own: taken, or refused only for this CPU's lack of it
        get_benchmark("peak").resolve(ctx, {"isa": isa})
    except UsageError as e:
        assert "not supported by this CPU" in str(e), e


def test_peak_threads_cpus_mismatch_message(ctx):
    with pytest.raises(UsageError, match="does not match"):
        get_benchmark("peak").resolve(ctx, {"threads": 2, "cpus": [0]})
    with pytest.raises(UsageError, match="twice"):
        get_benchmark("peak").resolve(ctx, {"cpus": [0, 0]})


def test_fma_unit_inference():
    assert infer_fma_units(28.5, [16, 32])[:2] == (2, 32)
    assert infer_fma_units(15.0, [16, 32]) == (1, 16, False)
    units, _cand, ambiguous = infer_fma_units(10.0, [16, 32])
    assert (units, ambiguous) == (1, True)
    assert fpc_for_isa(32, "avx512", "avx512", 512) == 32
    assert fpc_for_isa(32, "avx2", "avx512", 256) == 16
    assert fpc_for_isa(16, "avx2", "avx512", 256) == 16  # Zen 4: AVX-512 double-pumped
    assert fpc_for_isa(32, "scalar", "avx512", 64) == 4
