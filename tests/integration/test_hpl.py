"""hpl, built-in engine: real Open MPI and OpenBLAS on this node (local ranks only, 4 ranks
oversubscribed on 2 cores). The solution is compared with LAPACK's (numpy) on the matrix the
kernel wrote out; the residual check passes over N, NB (N not a multiple of NB), grids 1x1, 1x2,
2x1, 2x2, both mappings and both topologies; a corrupted solution fails it and nothing is stored;
a rank killed mid-run fails the run; bad input is refused before anything runs."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext, allowed_cpus
from clusterbench.benchmarks.hpl.sizing import hpl_flops, largest_n, matrix_bytes
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.session import run as session_run
from clusterbench.store.db import Store

from hplkit import _ctx, _two_sockets


@pytest.fixture(autouse=True)
def _root_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")


def _solve(ctx: RunContext, tmp: Path, **given):
    """Run hpl; return (results by metric, x, A, b) with A and b as the kernel generated them."""
    bench = get_benchmark("hpl")
    params = bench.resolve(ctx, given)
    params["kernel_extra"] = [f"--xout={tmp / 'x.bin'}", f"--aout={tmp / 'a.bin'}"]
    bench.prepare(ctx, params)
    res = {r.metric: r for r in bench.run(ctx, params)}
    n = params["n"]
    x = np.fromfile(tmp / "x.bin", dtype=np.float64)
    ab = np.fromfile(tmp / "a.bin", dtype=np.float64).reshape(n + 1, n).T  # column major, b last
    return res, x, ab[:, :n], ab[:, n]


CASES = [  # n, nb, grid, pmap, topology, ranks
    (256, 64, "1x1", "row", "pure", 1),
    (301, 64, "1x2", "row", "pure", 2),       # N not a multiple of NB
    (250, 32, "2x1", "col", "pure", 2),
    (333, 40, "2x2", "row", "pure", 4),       # oversubscribed, 9 panels, last one 13 wide
    (200, 48, "2x2", "col", "pure", 4),
    (270, 64, "1x1", "row", "hybrid", 1),     # one rank, threaded BLAS on every core
    (5, 2, "2x2", "row", "pure", 4),          # tiny: ranks with one local row or column
    (97, 7, "1x4", "col", "pure", 4),         # a flat grid, the ring broadcast forwards
]


@pytest.mark.parallel
@pytest.mark.integration
@pytest.mark.parametrize("n,nb,grid,pmap,topology,ranks", CASES)
def test_solution_agrees_with_lapack_and_passes(mpi, live_probe, tmp_path, n, nb, grid, pmap, topology, ranks):
    ctx = _ctx(live_probe, oversubscribe=ranks > len(allowed_cpus(_ctx(live_probe))))
    res, x, a, b = _solve(ctx, tmp_path, n=n, nb=nb, grid=grid, pmap=pmap, topology=topology, ranks=ranks, seed=7)
    assert set(res) == {"rmax", "time_s", "residual"}
    r = res["rmax"]
    ref = np.linalg.solve(a, b)  # LAPACK dgesv
    assert np.max(np.abs(x - ref)) <= 1e-9 * max(1.0, np.max(np.abs(ref)))
    # the kernel's residual is HPL's formula on the same data. ||Ax-b|| is rounding noise, and the
    # kernel sums in another order than numpy (blocked, per rank), so the two agree in magnitude,
    # not in digits (0.083 vs 0.103 seen at N=5 on a 2x2 grid): a wrong formula (a missing N or
    # eps, a norm of the wrong kind) is off by orders of magnitude and still fails here
    eps = np.finfo(float).eps / 2
    mine = np.max(np.abs(a @ x - b)) / (eps * (np.max(np.abs(a).sum(axis=1)) * np.max(np.abs(x)) + np.max(np.abs(b))) * n)
    assert r.params["residual"] == pytest.approx(mine, rel=0.5, abs=0.05) and r.params["residual"] < 16
    assert r.params["passed"] and res["residual"].value == r.params["residual"]
    gp, gq = (int(v) for v in grid.split("x"))
    assert (r.params["p"], r.params["q"], r.params["n"], r.params["nb"], r.params["pmap"]) == (gp, gq, n, nb, pmap)
    assert r.params["topology"] == topology and r.params["engine"] == "builtin" and r.params["ranks"] == ranks
    assert r.value == pytest.approx(hpl_flops(n) / r.params["time_s"] / 1e9, rel=1e-6)
    assert res["time_s"].value == r.params["time_s"] > 0
    bd = r.params["breakdown_s"]
    assert set(bd) == {"pfact", "bcast", "swap", "update", "solve", "other"} and all(v >= 0 for v in bd.values())
    assert r.params["breakdown_of"] == "max over ranks"
    assert len(r.params["placement"]) == ranks and r.params["blas_loaded"]
    if topology == "hybrid":
        cores = min(ctx.n_cores, len(allowed_cpus(ctx)))
        assert r.params["threads_per_rank"] == cores
        assert r.params["placement"][0]["cpus"] == (str(allowed_cpus(ctx)[0]) if cores == 1
                                                    else f"{min(r.params['cpus'])}-{max(r.params['cpus'])}")
    else:
        assert r.params["threads_per_rank"] == 1 and r.params["blas_threads_reported"] in (1, -1)


@pytest.mark.integration
def test_hybrid_with_an_openmp_blas_reports_the_rank_cores(mpi, live_probe, tmp_path):
    """BLIS (OpenMP) with OMP_PROC_BIND binds the rank's main thread to its first place when it
    loads; the rank still reports (and is verified on) all the cores it was given."""
    from clusterbench.probe.blas import resolve_blas

    try:
        resolve_blas("blis")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"BLIS not installed: {exc}")
    ctx = _ctx(live_probe)
    res, x, a, b = _solve(ctx, tmp_path, n=300, nb=32, topology="hybrid", blas="blis", seed=3)
    r = res["rmax"]
    assert r.params["passed"] and np.allclose(a @ x, b)
    cores = min(ctx.n_cores, len(allowed_cpus(ctx)))
    assert r.params["threads_per_rank"] == cores
    if cores > 1:
        assert r.params["placement"][0]["cpus"] == f"{min(r.params['cpus'])}-{max(r.params['cpus'])}"


@pytest.mark.parallel
@pytest.mark.integration
def test_corrupted_run_fails_and_stores_nothing(mpi, live_probe, tmp_path):
    store = Store(tmp_path / "r.db")
    with pytest.raises(KernelFailed, match="wrong result.*FAILED"):
        session_run(["hpl"], {"hpl": {"corrupt": True, "n": 300, "nb": 32, "allow_root": True}}, profile="quick",
                    use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    runs = store.list_runs()
    assert len(runs) == 1 and runs[0].status == "incomplete" and runs[0].results == 0
    assert store.results(runs[0].id) == []


@pytest.mark.parallel
@pytest.mark.integration
def test_rank_killed_mid_run_fails(mpi, live_probe):
    ctx = _ctx(live_probe, oversubscribe=True)
    bench = get_benchmark("hpl")
    params = bench.resolve(ctx, {"n": 600, "nb": 32, "grid": "1x2", "ranks": 2})
    params["kernel_extra"] = ["--die_rank=1", "--die_step=3"]
    bench.prepare(ctx, params)
    with pytest.raises(KernelFailed):
        bench.run(ctx, params)
    assert ctx.results == []


@pytest.mark.parallel
@pytest.mark.parametrize("given,match", [
    ({"n": 10_000_000}, r"needs .* GiB .* use --n \d+ or less"),
    ({"n": 500, "nb": 0}, r"--nb 0 is not allowed"),
    ({"n": 500, "nb": -3}, r"--nb -3 is not allowed"),
    ({"n": 100, "nb": 128}, r"--nb 128 is larger than N=100"),
    ({"n": 500, "grid": "2x2", "ranks": 2}, r"--grid 2x2 has 4 processes and 2 ranks"),
    ({"n": 500, "grid": "two"}, r"not P x Q"),
    ({"n": 500, "ranks": 64}, r"64 ranks exceed"),
    ({"n": 500, "hosts": "localhost:1", "grid": "1x2", "ranks": 2}, r"slot"),
    ({"mem": 0.0}, r"--mem 0.0 is not allowed"),
    ({"mem": 1.5}, r"--mem 1.5 is not allowed"),
    ({"n": 500, "engine": "nope"}, r"--engine 'nope' is not available"),
    ({"n": 500, "seed": -1}, r"--seed -1"),
    ({"n": 30000}, r"timeout"),
])
@pytest.mark.integration
def test_bad_input_is_refused_before_running(live_probe, tmp_path, given, match):
    store = Store(tmp_path / "r.db")
    with pytest.raises(UsageError, match=match):
        session_run(["hpl"], {"hpl": {"allow_root": True, **given}}, profile="quick", use_store=True, store=store,
                    probe_data=live_probe, argv=["clusterbench"], timeout=60)
    assert store.list_runs() == []


@pytest.mark.parallel
@pytest.mark.integration
def test_n_from_memory_fraction_and_largest_n(live_probe):
    probe = {**live_probe, "memory": {**(live_probe.get("memory") or {}), "available_bytes": 2 << 30}}
    bench = get_benchmark("hpl")
    ctx = RunContext(probe=probe, profile="default", timeout=100_000)
    p = bench.resolve(ctx, {"nb": 100, "ranks": 1, "mem": 0.5})
    assert p["n"] == int(math.sqrt(0.5 * (2 << 30) / 8) // 100 * 100) and p["n"] % 100 == 0
    fit = largest_n(2 << 30, 100, 1, 1)
    assert matrix_bytes(fit, 100, 1, 1) <= 2 << 30 < matrix_bytes(fit + 1, 100, 1, 1)
    with pytest.raises(UsageError, match=f"use --n {fit} or less"):
        bench.resolve(ctx, {"n": fit + 1, "nb": 100, "ranks": 1})


@pytest.mark.parallel
@pytest.mark.integration
def test_hpcc_engine_through_the_same_benchmark(mpi, live_probe):
    import shutil

    if not shutil.which("hpcc"):
        pytest.skip("hpcc is not installed (apt-get install hpcc)")
    ctx = _ctx(live_probe)
    bench = get_benchmark("hpl")
    params = bench.resolve(ctx, {"n": 400, "nb": 32, "ranks": 1, "engine": "hpcc"})
    bench.prepare(ctx, params)
    res = {r.metric: r for r in bench.run(ctx, params)}
    r = res["rmax"]
    assert r.params["engine"] == "hpcc" and r.params["n"] == 400 and r.params["nb"] == 32
    assert r.params["residual"] < 16 and r.params["variant"].startswith("W")
    assert r.value > 0 and r.params["gflops"] == r.value  # HPL's own figure (its time is printed rounded)


@pytest.mark.parallel
@pytest.mark.integration
def test_mem_counts_one_machine_once_on_the_virtual_cluster(mpi, live_probe, sim_cluster):
    """The virtual cluster's nodes share this machine's memory: N from --mem must not count it
    once per node (that would swap)."""
    from clusterbench.benchmarks.base import available_memory

    c = sim_cluster(2)
    ctx = RunContext(probe=live_probe, profile="quick", timeout=120, timeout_given=False)  # sized, not run
    hosts = ",".join(f"{n.name}:1" for n in c.nodes)
    p = get_benchmark("hpl").resolve(ctx, {"hosts": hosts, "mem": 0.5, "nb": 128, "allow_root": True})
    assert p["mem_available_bytes"] == available_memory(live_probe)
    assert p["n"] * p["n"] * 8 <= 0.5 * available_memory(live_probe)
    assert "this machine" in p["n_from"]


@pytest.mark.integration
def test_hybrid_rank_per_socket(mpi, live_probe, tmp_path):
    """--hybrid-per socket: one rank per socket, each bound to its socket's cores (checked from
    every rank's own report), BLAS threads per rank = cores per socket; the solution is right."""
    if len(allowed_cpus(_ctx(live_probe))) < 2:
        pytest.skip("needs two cpus")
    probe = _two_sockets(live_probe)
    ctx = _ctx(probe)
    res, x, a, b = _solve(ctx, tmp_path, n=240, nb=32, topology="hybrid", hybrid_per="socket", seed=5)
    r = res["rmax"]
    assert r.params["passed"] and np.allclose(a @ x, b)
    groups = r.params.get("rank_cpu_groups") or [[c] for c in r.params["cpus"]]
    assert r.params["ranks"] == 2 and r.params["threads_per_rank"] == len(allowed_cpus(ctx)) // 2
    assert [p["cpus"] for p in r.params["placement"]] == [",".join(map(str, g)) if len(g) > 1 else str(g[0])
                                                          for g in groups]


