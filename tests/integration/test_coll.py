"""The MPI collectives (kernels/mpi/coll.c, benchmarks/mpi/coll.py) really run: with Open MPI and
MPICH on this node (2 and 3 ranks, oversubscribed on a 2-core machine), every op's result
validated by the kernel and cross-checked here against a NumPy reduction of the same generated
inputs (the kernel's --debug record); the corruption hook caught with an error naming op, size and
rank, nothing stored; non-blocking overlap; bad input from the command line; and ``run coll
--quick`` across a 2-node virtual cluster."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from clusterbench import session
from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.benchmarks.mpi import coll
from clusterbench.errors import EnvironmentProblem, KernelFailed
from clusterbench.launch import mpi as M
from clusterbench.store import Store

pytestmark = pytest.mark.integration  # every test here starts real processes
FAST = {"time_budget": 0.002, "max_iters": 40, "warmup": 2, "validate_every": 3, "allow_root": True}
SIZES = [8, 24, 64]  # 24 B: 3 doubles, split unevenly by reduce-scatter over 2 and 3 ranks


def _mpi(kind: str) -> M.MpiInstall:
    if kind == "mpich" and not shutil.which("mpiexec.mpich"):
        pytest.skip("no mpiexec.mpich on PATH: install mpich and libmpich-dev")
    try:
        found = M.detect_mpi(kind=kind)
    except EnvironmentProblem as exc:
        pytest.skip(f"{kind} not usable: {exc}")
    return found


def _ctx(live_probe: dict) -> RunContext:
    return RunContext(probe=live_probe, profile="quick", timeout=180, oversubscribe=True)


# -- the kernel's inputs and each op's definition, in NumPy ----------------------------------------
def dval(r: int, i: np.ndarray, it: int = 0) -> np.ndarray:
    return ((r * 31 + i * 7 + it * 13) % 64).astype(np.float64) - 16.0


def bval(r: int, i: np.ndarray, it: int = 0) -> np.ndarray:
    return ((r * 29 + i * 131 + it * 7 + 1) & 0xFF).astype(np.float64)


def expected(op: str, size: int, p: int, me: int) -> np.ndarray:
    """Rank ``me``'s result of iteration 0 (empty where the rank receives nothing)."""
    n = size // 8
    empty = np.zeros(0)
    if op in coll.REDUCTIONS:
        total = sum(dval(r, np.arange(n)) for r in range(p))
        if op == "allreduce":
            return total
        if op == "reduce":
            return total if me == 0 else empty
        counts = [n // p + (1 if r < n % p else 0) for r in range(p)]  # osu_reduce_scatter's split
        off = sum(counts[:me])
        return total[off:off + counts[me]]
    blk = np.arange(size)
    if op == "bcast":
        return bval(0, blk) if me else empty  # the root's buffer is its input
    if op in ("allgather", "gather"):
        return np.concatenate([bval(r, blk) for r in range(p)]) if op == "allgather" or me == 0 else empty
    if op == "alltoall":
        return np.concatenate([bval(r, me * size + blk) for r in range(p)])
    return bval(0, me * size + blk)  # scatter


def _debug_run(ctx: RunContext, mpi: M.MpiInstall, ranks: int, extra: tuple[str, ...] = ()) -> M.MpiRun:
    bench = get_benchmark("coll")
    params = bench.resolve(ctx, {**FAST, "ranks": ranks, "sizes": SIZES, "mpi": mpi.mpirun})
    b = ctx.build("coll", openmp=False, cc=mpi.mpicc)
    return M.run_mpi(mpi, bench.launch_spec(ctx, params), [str(b.path), *bench.kernel_args(params), "--debug=64",
                                                          *extra], timeout=120)


@pytest.mark.parallel
@pytest.mark.parametrize("kind,ranks", [("openmpi", 2), ("openmpi", 3), ("mpich", 2), ("mpich", 3)])
def test_every_op_validated_and_equal_to_numpy(kind: str, ranks: int, live_probe: dict) -> None:
    mpi = _mpi(kind)
    run = _debug_run(_ctx(live_probe), mpi, ranks)
    recs = run.records
    debug = {(r["op"], r["size"]): r for r in recs if r["type"] == "debug"}
    data_ops = [op for op in coll.OPS if op != "barrier"]
    assert set(debug) == {(op, s) for op in data_ops for s in SIZES}
    for (op, size), rec in debug.items():
        want = [expected(op, size, ranks, me) for me in range(ranks)]
        assert rec["checksums"] == pytest.approx([float(w.sum()) for w in want], abs=0), (op, size)
        assert rec["first"] == list(want[0][:64]), (op, size)
    checked = [r for r in recs if r["type"] == "validation"]
    assert len(checked) == len(data_ops) * len(SIZES) + 1 and all(r["ok"] for r in checked)
    assert [r["checked"] for r in checked].count(False) == 1  # barrier: no data
    results = [r for r in recs if r["type"] == "result"]
    assert {r["params"]["op"] for r in results} == set(coll.OPS)
    p2p = next(r for r in recs if r["type"] == "p2p")
    assert p2p["pair"] == [0, ranks - 1] and p2p["size_bytes"] == [0, 1, 2, 4, 8, 16, 32, 64]


@pytest.mark.parallel
@pytest.mark.parametrize("kind", ["openmpi", "mpich"])
def test_corruption_is_caught_naming_op_size_and_rank(kind: str, live_probe: dict) -> None:
    mpi = _mpi(kind)
    with pytest.raises(KernelFailed, match=r"alltoall 8 B: rank 1's result differs from the definition"):
        _debug_run(_ctx(live_probe), mpi, 3, ("--corrupt=alltoall:0:1",))
    with pytest.raises(KernelFailed, match=r"reduce 8 B: rank 0's result differs .* on iteration 3 "):
        _debug_run(_ctx(live_probe), mpi, 2, ("--corrupt=reduce:3",))  # the 3rd is checked (validate_every 3)


@pytest.mark.parallel
def test_figures_in_the_contract_shape_and_nothing_stored_on_corruption(tmp_path, monkeypatch, live_probe) -> None:
    mpi = _mpi("openmpi")
    store = Store(tmp_path / "r.db")
    p = {**FAST, "ranks": 2, "sizes": [64, 4096], "mpi": mpi.mpirun}
    rep = session.run(["allgather", "barrier"], {"allgather": p, "barrier": p}, profile="quick", store=store,
                      timeout=120)
    res = store.results(rep.run.id)
    assert {(r.benchmark, r.metric) for r in res} == {("allgather", m) for m in ("latency", "algbw", "busbw")} | {
        ("barrier", "latency")}
    for r in res:
        q = r.params
        assert q["op"] == r.benchmark and q["processes"] == 2 and q["nodes"] == 1 and q["nonblocking"] is False
        assert q["min_us"] <= q["max_us"] and q["p50_us"] <= q["p99_us"] and q["iterations"] >= 5
        assert q["transport_used"] == "shm" and q["mpi"]["name"] == "openmpi" and q["algorithm"] is None
        assert q["p2p"]["pair"] == [0, 1] and q["p2p"]["transport_used"] == "shm"
        assert len(q["p2p"]["half_rtt_us"]) == len(q["p2p"]["size_bytes"])
        assert q["validated"] == (r.benchmark != "barrier")
    lat = {r.params["size_bytes"]: r for r in res if r.metric == "latency" and r.benchmark == "allgather"}
    bus = {r.params["size_bytes"]: r for r in res if r.metric == "busbw"}
    assert bus[4096].value == pytest.approx(2 * 4096 / lat[4096].value * 0.5)  # P x size / t x (P-1)/P
    before = len(store.list_runs())
    monkeypatch.setenv(coll.CORRUPT_ENV, "allgather:0")
    with pytest.raises(KernelFailed, match="allgather 64 B: rank 1's result differs"):
        session.run(["allgather"], {"allgather": p}, profile="quick", store=store, timeout=120)
    runs = store.list_runs()
    assert all(store.count_results(r.id) == 0 for r in runs[: len(runs) - before])


def test_nonblocking_overlap(live_probe: dict) -> None:
    mpi = _mpi("openmpi")
    ctx = _ctx(live_probe)
    bench = get_benchmark("allreduce")
    params = bench.resolve(ctx, {**FAST, "ranks": 2, "sizes": [4096], "nonblocking": True, "mpi": mpi.mpirun})
    res = bench.run(ctx, params)
    lat = next(r for r in res if r.metric == "latency")
    q = lat.params
    assert q["nonblocking"] and 0 <= q["overlap_pct"] <= 100 and q["pure_comm_us"] > 0 and q["compute_us"] > 0
    assert lat.value >= q["compute_us"] * 0.5


@pytest.mark.parallel
def test_bad_input_one_line_and_nothing_stored(tmp_path) -> None:
    """Issue 26's bad input for `run`: sizes out of range (0, above 1 GiB) or not whole doubles for a
    reduction, too few ranks, an unknown op (no op needs a power-of-two size: OSU's conventions split
    any size, reduce-scatter as osu_reduce_scatter does). `tune coll`'s: tests/integration/test_coll_tune.py."""
    db = tmp_path / "r.db"
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    for args, match in ((["allreduce", "--sizes", "12"], "not a multiple of 8"),
                        (["alltoall", "--ranks", "1"], "use 2 to 4096"),
                        (["bcast", "--sizes", "0"], "sizes 0 is not allowed"),
                        (["allgather", "--sizes", "2147483648"], "use 1 to 1073741824 (1 GiB at most)"),
                        (["coll", "--sizes", "8,2147483648"], "use 1 to 1073741824 (1 GiB at most)"),
                        (["coll", "--ops", "allreduce,frob"], "not one of"),
                        (["reduce-scattr"], "invalid choice")):
        out = subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), "run", *args],
                             capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode != 0 and match in out.stderr, (args, out.stderr)
        assert len([ln for ln in out.stderr.splitlines() if ln.strip()]) <= 2, out.stderr
    if db.exists():
        store = Store(db)
        assert all(store.count_results(r.id) == 0 for r in store.list_runs())


@pytest.mark.parallel
def test_quick_set_on_a_two_node_virtual_cluster(mpi, live_probe, sim_cluster) -> None:
    c = sim_cluster(2)
    ctx = _ctx(live_probe)
    bench = get_benchmark("coll")
    params = bench.resolve(ctx, {"hosts": ",".join(n.name for n in c.nodes), "allow_root": True,
                                 **bench.profiles["quick"]})
    res = bench.run(ctx, params)
    assert {r.benchmark for r in res} == set(coll.OPS)
    for r in res:
        assert r.params["transport_used"] == "tcp" and r.params["nodes"] == 2 and r.params["processes"] == 2
        assert [p["node"] for p in r.params["placement"]] == [n.name for n in c.nodes]
        assert r.params["p2p"]["pair"] == [0, 1] and all(t > 0 for t in r.params["p2p"]["half_rtt_us"])
    assert {r.params["size_bytes"] for r in res if r.benchmark == "alltoall"} == {8, 1024, 65536}
