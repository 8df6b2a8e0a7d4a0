"""fft: the kernel's forward transform against numpy.fft.fft (single on 1 rank, the distributed
FFTW-MPI transform on 2 ranks, powers of two and not), a stored `fft --mode all` run whose
Gflop/s are recomputed from the recorded times and HPCC's 5 n log2 n, the corruption hook failing
validation with nothing stored, bad --n refused in one line, the default size rule, and a
missing FFTW header named with its Debian package."""
from __future__ import annotations

import math

import numpy as np
import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext, allowed_cpus
from clusterbench.benchmarks.hpcc.fft import LIBS, flops
from clusterbench.benchmarks.mpi.common import launch_spec
from clusterbench.errors import KernelFailed
from clusterbench.launch import mpi as M
from clusterbench.session import run as session_run
from clusterbench.store import Store

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass


def _ranks_or_skip(ctx: RunContext, n: int) -> None:
    if len(allowed_cpus(ctx)) < n:
        pytest.skip(f"needs {n} cpus")


def kernel_input(n: int) -> np.ndarray:
    """The kernel's input: x[j] = ((37 j) mod 101) / 50 - 1 + i (((53 j) mod 97) / 48 - 1)."""
    j = np.arange(n, dtype=np.int64)
    return ((j * 37) % 101) / 50.0 - 1.0 + 1j * (((j * 53) % 97) / 48.0 - 1.0)


@pytest.mark.integration
@pytest.mark.parametrize(("mode", "ranks", "n"), [("single", 1, 4096), ("single", 1, 1000),
                                                  ("mpi", 2, 4096), ("mpi", 2, 96)])
def test_selftest_matches_numpy(ctx, mpi, mode: str, ranks: int, n: int) -> None:
    _ranks_or_skip(ctx, ranks)
    bench = get_benchmark("fft")
    params = bench.resolve(ctx, {"ranks": ranks, "n": n, "mode": mode, "allow_root": True})
    b = ctx.build("fft", libs=LIBS, openmp=False, cc=mpi.mpicc)
    spec = launch_spec(ctx, params, params["places"], params["host_list"])
    recs = M.run_mpi(mpi, spec, [str(b.path), f"--mode={mode}", f"--n={n}", "--selftest=1"], timeout=120).records
    got = next(r for r in recs if r["type"] == "selftest")
    X = np.fft.fft(kernel_input(n))
    scale = np.abs(X).sum()
    assert got["n"] == n and got["mode"] == mode
    assert got["sum_re"] == pytest.approx(X.real.sum(), abs=1e-12 * scale)
    assert got["sum_im"] == pytest.approx(X.imag.sum(), abs=1e-12 * scale)
    assert got["weighted_abs"] == pytest.approx(float((np.abs(X) * (np.arange(n) % 7)).sum()), rel=1e-12)
    assert got["scaled_error"] < 16


@pytest.mark.integration
def test_stored_run_counts_flops_as_hpcc(live_probe, mpi, tmp_path) -> None:
    ctx = RunContext(probe=live_probe)
    two = len(allowed_cpus(ctx)) >= 2
    ranks = 2 if two else 1
    n = 1 << 16
    store = Store(tmp_path / "r.db")
    rep = session_run(["fft"], {"fft": {"mode": "all", "n": n, "ranks": ranks, "samples": 3, "plan_seconds": 0.2,
                                        "allow_root": True}},
                      profile="quick", use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    rows = store.results(rep.run.id)
    modes = ["single", "star", "mpi"] if two else ["single"]
    assert sorted((r.params["mode"], r.metric) for r in rows) == sorted(
        (m, k) for m in modes for k in ("gflops", "gflops_per_process"))
    F = 5 * n * math.log2(n)
    assert flops(n) == F
    by = {(r.params["mode"], r.metric): r for r in rows}
    for mode in modes:
        g, gp = by[(mode, "gflops")], by[(mode, "gflops_per_process")]
        p = g.params
        procs = 1 if mode == "single" else ranks
        assert p["n"] == n and p["processes"] == procs and p["flops_per_transform"] == F
        assert p["fftw_version"].startswith("fftw-3") and p["valid"] and p["scaled_error"] < 16
        assert p["plan_flags"] == ("FFTW_ESTIMATE" if mode == "mpi" else "FFTW_MEASURE")
        t = p["times_s"]
        want = [(procs if mode == "star" else 1) * F / s / 1e9 for s in t]
        assert g.samples == pytest.approx(want, rel=1e-9) and g.value == pytest.approx(max(want), rel=1e-9)
        if mode == "star":  # the mean of per-rank rates lies between the slowest's and the fastest's
            for s, slow, fast in zip(gp.samples, t, gp.params["times_s"]):
                assert F / slow / 1e9 * (1 - 1e-9) <= s <= F / fast / 1e9 * (1 + 1e-9)
        else:
            assert gp.samples == pytest.approx([s / procs for s in g.samples], rel=1e-12)
    assert by[("single", "gflops")].params["hpcc_key"] == "SingleFFT_Gflops"
    assert "hpcc_key" not in by[("single", "gflops_per_process")].params
    if two:
        assert by[("star", "gflops_per_process")].params["hpcc_key"] == "StarFFT_Gflops"
        assert by[("mpi", "gflops")].params["hpcc_key"] == "MPIFFT_Gflops"
        assert by[("mpi", "gflops")].params["local_n_in"] == n // 2


@pytest.mark.integration
def test_corrupted_output_fails_validation_and_stores_nothing(live_probe, mpi, tmp_path) -> None:
    store = Store(tmp_path / "r.db")
    with pytest.raises(KernelFailed, match="FFT validation failed"):
        session_run(["fft"], {"fft": {"corrupt": True, "mode": "single", "n": 4096, "samples": 1,
                                      "plan_seconds": 0.1, "allow_root": True}},
                    profile="quick", use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    runs = store.list_runs()
    assert len(runs) == 1 and runs[0].results == 0 and store.results(runs[0].id) == []


