"""hpcg: the kernel's matrix against an independent numpy construction (1 and 2 ranks), full runs
at 16^3 per rank (1 and 2 ranks: valid, 50 iterations or one more, HPCG's flop count recomputed here), the
corruption hook failing validation with nothing stored, and bad input refused in one line."""
from __future__ import annotations

import numpy as np
import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext, allowed_cpus
from clusterbench.benchmarks.mpi.common import launch_spec
from clusterbench.errors import KernelFailed
from clusterbench.launch import mpi as M
from clusterbench.session import run as session_run
from clusterbench.store import Store

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

METRICS = {"rating", "ddot_gflops", "waxpby_gflops", "spmv_gflops", "mg_gflops", "bandwidth_gbs"}


def stencil_apply(v: np.ndarray) -> np.ndarray:
    """27-point operator (26 on the diagonal, -1 to every existing neighbour) on a (z, y, x) grid."""
    pad = np.pad(v, 1)
    box = sum(pad[1 + dz:pad.shape[0] - 1 + dz, 1 + dy:pad.shape[1] - 1 + dy, 1 + dx:pad.shape[2] - 1 + dx]
              for dz in (-1, 0, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    return 27.0 * v - box


def nonzeros(shape: tuple[int, ...]) -> int:
    """Nonzeros of the 27-point matrix on a grid: each point's neighbours inside it, itself included
    (the stencil's box sum of ones)."""
    ones = np.ones(shape)
    return round(float((27.0 * ones - stencil_apply(ones)).sum()))


def _ranks_or_skip(ctx: RunContext, n: int) -> None:
    if len(allowed_cpus(ctx)) < n:
        pytest.skip(f"needs {n} cpus")


def _kernel(ctx: RunContext, mpi, ranks: int, args: list[str]) -> list[dict]:
    bench = get_benchmark("hpcg")
    params = bench.resolve(ctx, {"ranks": ranks, "local": "16", "allow_root": True})
    b = ctx.build("hpcg", openmp=False, cc=mpi.mpicc)
    spec = launch_spec(ctx, params, params["places"], params["host_list"])
    return M.run_mpi(mpi, spec, [str(b.path), *args], timeout=120).records


@pytest.mark.integration
@pytest.mark.parametrize("ranks", [1, 2])
def test_selftest_matches_numpy(ctx, mpi, ranks: int) -> None:
    """y = A v and b = A 1 of the kernel's sparse matrix on an 8x8x(8*ranks) global grid (grid
    1x1xranks) agree with the stencil applied by numpy, as does the nonzero count."""
    _ranks_or_skip(ctx, ranks)
    recs = _kernel(ctx, mpi, ranks, ["--nx=8", "--ny=8", "--nz=8", "--selftest=1"])
    info = next(r for r in recs if r["type"] == "info")
    assert info["grid"] == [1, 1, ranks] and info["local"] == [8, 8, 8]
    got = next(r for r in recs if r["type"] == "selftest")
    shape = (8 * ranks, 8, 8)  # (z, y, x): g = x + 8 (y + 8 z)
    g = np.arange(np.prod(shape)).reshape(shape)
    v = ((g * 7) % 11) / 4.0
    assert got["spmv_checksum"] == pytest.approx(float((stencil_apply(v) * (g % 13)).sum()), rel=1e-12)
    assert got["rhs_sum"] == pytest.approx(float(stencil_apply(np.ones(shape)).sum()), rel=1e-12)
    assert got["global_nonzeros"] == nonzeros(shape)


def hpcg_flops_per_set(local: tuple[int, int, int], grid: tuple[int, int, int], k: int) -> float:
    """HPCG's count for one set of k iterations, from the nonzeros of every level (numpy)."""
    dims = [tuple(d * p for d, p in zip(local[::-1], grid[::-1]))]
    for _ in range(3):
        dims.append(tuple(d // 2 for d in dims[-1]))
    n, nnz = float(np.prod(dims[0])), [float(nonzeros(d)) for d in dims]
    return (2 * (3 * k + 1) * 2 * n + (k + 1) * 2 * nnz[0] + k * sum(10 * z for z in nnz[:-1]) + k * 4 * nnz[-1])


@pytest.mark.integration
@pytest.mark.parametrize("ranks", [1, 2])
def test_run_is_valid_and_counts_flops_as_hpcg(live_probe, mpi, ranks: int) -> None:
    ctx = RunContext(probe=live_probe, profile="quick", timeout=120)
    _ranks_or_skip(ctx, ranks)
    bench = get_benchmark("hpcg")
    # exactly 3 sets whatever the load (0.5 s of sets held only 2 at a load of 9): --sets stops first
    params = bench.resolve(ctx, {"ranks": ranks, "local": "16", "time": 20.0, "sets": 3, "allow_root": True})
    bench.prepare(ctx, params)
    res = {r.metric: r for r in bench.run(ctx, params)}
    assert set(res) == METRICS
    rating = res["rating"]
    p = rating.params
    # the optimised kernels sum in another order than the reference ones: their 50th iteration may land
    # a rounding above the reference reduction, and then one more iteration is paid, as in HPCG
    assert p["valid"] and p["iterations"] in (50, 51) and p["penalty"] == p["iterations"] - 50
    assert p["grid"] == [1, 1, ranks]
    v = p["validation"]
    assert v["spmv_departure"] < 100 and v["mg_departure"] < 100
    assert v["spectral_iterations_plain"] <= 12 and v["spectral_iterations_mg"] <= 2
    assert v["reference_reduction"] < 1e-10 and v["reproducible"] and v["sets"] == 3 == len(rating.samples)
    assert p["flops_per_set"] == pytest.approx(hpcg_flops_per_set((16, 16, 16), (1, 1, ranks), p["iterations"]),
                                               rel=1e-12)
    assert p["credited_flops_per_set"] == pytest.approx(
        hpcg_flops_per_set((16, 16, 16), (1, 1, ranks), p["iterations"]) * 50 / p["iterations"], rel=1e-12)
    # HPCG 3.1's final rating: every set is charged a tenth of the setup and optimisation time
    assert p["optimisation_overhead_s"] == pytest.approx(3 * (p["setup_s"] + p["optimisation_s"]) / 10, rel=1e-5)
    assert p["optimisation_s"] > 0 and p["setup_s"] > 0
    assert rating.value == pytest.approx(
        p["credited_flops_per_set"] * 3 / (p["time_s"] + p["optimisation_overhead_s"]) / 1e9, rel=1e-5)
    assert not p["official"] and "run without --official" in p["not_official_because"]
    assert res["bandwidth_gbs"].value > 0 and all(res[m].value > 0 for m in METRICS)
    assert "VALID" in ctx.notes[-1] and "not official" in ctx.notes[-1]


@pytest.mark.integration
def test_corrupted_matrix_fails_validation_and_stores_nothing(live_probe, mpi, tmp_path) -> None:
    store = Store(tmp_path / "r.db")
    with pytest.raises(KernelFailed, match="symmetry departures"):
        session_run(["hpcg"], {"hpcg": {"corrupt": True, "local": "16", "ranks": 1, "time": 0.5,
                                        "allow_root": True}},
                    profile="quick", use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    runs = store.list_runs()
    assert len(runs) == 1 and runs[0].results == 0 and store.results(runs[0].id) == []


