"""randomaccess: the kernel's table after one pass of HPCC's update stream against a Python replay of
the stream (both variants; local mode on 1 and 2 ranks, the MPI routing on 2 and 3 ranks), full runs
storing figures with HPCC's keys and GUPS recomputed from the times, the corruption hook caught with
nothing stored, and bad input refused in one line."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext, allowed_cpus
from clusterbench.benchmarks.mpi.common import launch_spec
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.launch import mpi as M
from clusterbench.session import run as session_run
from clusterbench.store import Store

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

MASK = (1 << 64) - 1


def replay(k: int, lcg: bool) -> int:
    """HPCC's stream written from its definition: T[i] = i, then 4 * 2^k updates T[idx(v)] ^= v with
    v_0 = 1; the checksum sum (T[g] ^ g) * (g % 7 + 1) mod 2^64 the kernel prints."""
    table = list(range(1 << k))
    v = 1
    for _ in range(4 << k):
        if lcg:
            v = (6364136223846793005 * v + 1) & MASK
            table[v >> (64 - k)] ^= v
        else:
            v = ((v << 1) & MASK) ^ (7 if v >> 63 else 0)
            table[v & ((1 << k) - 1)] ^= v
    return sum((t ^ g) * (g % 7 + 1) for g, t in enumerate(table)) & MASK


def _kernel(ctx: RunContext, mpi, ranks: int, args: list[str]) -> list[dict]:
    bench = get_benchmark("randomaccess")
    params = bench.resolve(ctx, {"ranks": ranks, "log2_size": 12, "allow_root": True})
    b = ctx.build("randomaccess", openmp=False, cc=mpi.mpicc)
    spec = launch_spec(ctx, params, params["places"], params["host_list"])
    return M.run_mpi(mpi, spec, [str(b.path), *args], timeout=60).records


@pytest.mark.integration
@pytest.mark.parametrize(("mode", "ranks", "variant"), [("local", 1, "standard"), ("local", 1, "lcg"),
                                                        ("local", 2, "standard"), ("mpi", 2, "standard"),
                                                        ("mpi", 2, "lcg"), ("mpi", 3, "standard")])
def test_table_matches_a_python_replay(live_probe, mpi, mode: str, ranks: int, variant: str) -> None:
    """Local mode on 2 ranks: two tables, each the replay's (the checksum doubles); MPI mode: one
    table split over the ranks (3: uneven blocks), routed, equal to the replay's."""
    ctx = RunContext(probe=live_probe, profile="quick", timeout=60, oversubscribe=ranks > len(allowed_cpus(
        RunContext(probe=live_probe))))
    k = 10
    recs = _kernel(ctx, mpi, ranks, [f"--mode={mode}", f"--variant={variant}", f"--log2={k}", "--selftest=1"])
    got = next(r for r in recs if r["type"] == "selftest")
    copies = ranks if mode == "local" else 1
    assert int(got["checksum"], 16) == (copies * replay(k, variant == "lcg")) & MASK
    assert got["updates"] == 4 << k


@pytest.mark.integration
def test_run_all_modes_stores_hpcc_keys(live_probe, mpi, tmp_path) -> None:
    ctx = RunContext(probe=live_probe)
    ranks = 2 if len(allowed_cpus(ctx)) >= 2 else 1
    store = Store(tmp_path / "r.db")
    session_run(["randomaccess"], {"randomaccess": {"ranks": ranks, "log2_size": 16, "samples": 2,
                                                    "variant": "both", "allow_root": True}},
                profile="quick", use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    (run,) = store.list_runs()
    rows = store.results(run.id)
    keys = {r.params.get("hpcc_key"): r for r in rows if r.params.get("hpcc_key")}
    want = {"SingleRandomAccess_GUPs", "SingleRandomAccess_LCG_GUPs"}
    if ranks == 2:
        want |= {"StarRandomAccess_GUPs", "MPIRandomAccess_GUPs", "StarRandomAccess_LCG_GUPs",
                 "MPIRandomAccess_LCG_GUPs"}
    assert set(keys) == want
    for r in rows:
        p = r.params
        assert p["errors"] == 0 and p["allowed_errors"] == (1 << 16) // 100 and p["log2_size"] == 16
        assert len(r.samples) == 2
    mpi_row = keys.get("MPIRandomAccess_GUPs")
    if mpi_row:  # all 4 x 2^16 updates over the slowest rank's time
        p = mpi_row.params
        assert p["updates"] == 4 << 16 and p["lookahead"] == 1024 and p["table_scope"] == "total"
    star = keys.get("StarRandomAccess_GUPs")
    if star:  # HPCC's Star figure is the mean per process: the per-process samples' mean
        per = star.params["per_process_gups"]
        assert len(per) == 2
        assert star.samples == pytest.approx([sum(c) / 2 for c in zip(*per)], rel=1e-9)
        assert star.params["hpcc_value"] == pytest.approx(star.value)


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["single", "mpi"])
def test_corrupted_table_fails_and_stores_nothing(live_probe, mpi, tmp_path, mode: str) -> None:
    ctx = RunContext(probe=live_probe)
    if mode == "mpi" and len(allowed_cpus(ctx)) < 2:
        pytest.skip("needs 2 cpus")
    store = Store(tmp_path / "r.db")
    with pytest.raises(KernelFailed, match="table words wrong after replaying the updates.*above HPCC's 1%"):
        session_run(["randomaccess"], {"randomaccess": {"corrupt": True, "mode": mode, "log2_size": 14,
                                                        "ranks": 2 if mode == "mpi" else 1, "allow_root": True}},
                    profile="quick", use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    runs = store.list_runs()
    assert len(runs) == 1 and runs[0].results == 0 and store.results(runs[0].id) == []


@pytest.mark.integration
def test_long_run_raises_the_default_timeout_and_refuses_a_given_one(live_probe) -> None:
    bench = get_benchmark("randomaccess")
    ctx = RunContext(probe=live_probe, timeout=10, timeout_given=False)
    bench.resolve(ctx, {"allow_root": True, "ranks": 1, "mode": "single", "log2_size": 28})
    assert ctx.timeout > 10 and "the timeout is" in ctx.notes[-1]
    given = RunContext(probe=live_probe, timeout=10, timeout_given=True)
    with pytest.raises(UsageError, match="randomaccess would take about .* above the 10 s timeout") as exc:
        bench.resolve(given, {"allow_root": True, "ranks": 1, "mode": "single", "log2_size": 28})
    assert "--timeout" in exc.value.fix
