"""ptrans: the kernel's A^T + B against numpy from the same formulas (1x1, 1x2 and 2x1 grids, n not a
multiple of NB), a full run storing a figure whose GB/s is recomputed from its times and 8 n^2,
HPCC's defaults from HPL's derivation, the corruption hook caught with nothing stored, and bad input
refused in one line."""
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


def expected(n: int) -> tuple[float, float]:
    """The kernel's checksums of C = A^T + B, A and B from the kernel's formulas."""
    i, j = np.indices((n, n), dtype=np.int64)
    a = ((7 * i + 13 * j) % 101) / 50.0 - 1.0
    b = ((3 * i + 11 * j) % 97) / 48.0 - 1.0
    c = a.T + b
    return float((c * ((5 * i + j) % 17)).sum()), float((c * ((i + 3 * j) % 13)).sum())


def _ranks_or_skip(ctx: RunContext, n: int) -> None:
    if len(allowed_cpus(ctx)) < n:
        pytest.skip(f"needs {n} cpus")


@pytest.mark.integration
@pytest.mark.parametrize(("ranks", "grid", "n", "nb"), [(1, (1, 1), 37, 8), (1, (1, 1), 5, 8),
                                                      (2, (1, 2), 37, 8), (2, (2, 1), 37, 8),
                                                      (2, (1, 2), 9, 8)])
def test_selftest_matches_numpy(live_probe, mpi, ranks: int, grid: tuple[int, int], n: int, nb: int) -> None:
    """n=5 < NB: one partial block; n=9 on 1x2: the second rank holds one column."""
    ctx = RunContext(probe=live_probe, profile="quick", timeout=60)
    _ranks_or_skip(ctx, ranks)
    params = get_benchmark("ptrans").resolve(ctx, {"ranks": ranks, "n": max(n, nb), "nb": nb,
                                                   "grid": f"{grid[0]}x{grid[1]}", "allow_root": True})
    b = ctx.build("ptrans", openmp=False, cc=mpi.mpicc)
    spec = launch_spec(ctx, params, params["places"], params["host_list"])
    recs = M.run_mpi(mpi, spec, [str(b.path), f"--n={n}", f"--nb={nb}", f"--p={grid[0]}", f"--q={grid[1]}",
                                 "--selftest=1"], timeout=60).records
    got = next(r for r in recs if r["type"] == "selftest")
    want = expected(n)
    assert got["n"] == n and got["residual"] == 0
    assert got["checksum"] == pytest.approx(want[0], rel=1e-12, abs=1e-9)
    assert got["checksum2"] == pytest.approx(want[1], rel=1e-12, abs=1e-9)
    info = next(r for r in recs if r["type"] == "info")
    assert info["grid"] == list(grid) and info["nb"] == nb


@pytest.mark.integration
def test_run_stores_gbs_from_times(live_probe, mpi, tmp_path) -> None:
    ctx = RunContext(probe=live_probe)
    ranks = 2 if len(allowed_cpus(ctx)) >= 2 else 1
    store = Store(tmp_path / "r.db")
    n, nb = 301, 32
    session_run(["ptrans"], {"ptrans": {"ranks": ranks, "n": n, "nb": nb, "samples": 3, "allow_root": True}},
                profile="quick", use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    (run,) = store.list_runs()
    (row,) = store.results(run.id)
    p = row.params
    assert row.metric == "gbs" and row.unit == "GB/s"
    assert p["n"] == n and p["nb"] == nb and p["ranks"] == ranks and p["processes"] == ranks
    assert p["grid"] == ([1, 2] if ranks == 2 else [1, 1])  # HPL's default: the squarest with P <= Q
    assert p["residual"] == 0 and p["threshold"] == 16
    times = p["times_s"]  # the slowest rank's time of each sample
    assert len(row.samples) == len(times) == 3 and all(t > 0 for t in times)
    assert row.samples == pytest.approx([8 * n * n / t / 1e9 for t in times], rel=1e-9)
    assert row.value == pytest.approx(max(row.samples))
    assert p["hpcc_key"] == "PTRANS_GBs" and p["hpcc_value"] == pytest.approx(row.value)
    assert p["time_s_best"] == pytest.approx(min(times), rel=1e-9)


@pytest.mark.integration
def test_corrupted_result_fails_and_stores_nothing(live_probe, mpi, tmp_path) -> None:
    ctx = RunContext(probe=live_probe)
    ranks = 2 if len(allowed_cpus(ctx)) >= 2 else 1
    store = Store(tmp_path / "r.db")
    with pytest.raises(KernelFailed, match=r"residual .* above HPCC's threshold 16"):
        session_run(["ptrans"], {"ptrans": {"ranks": ranks, "n": 200, "nb": 16, "samples": 1, "corrupt": True,
                                            "allow_root": True}},
                    profile="quick", use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    runs = store.list_runs()
    assert len(runs) == 1 and runs[0].results == 0 and store.results(runs[0].id) == []


