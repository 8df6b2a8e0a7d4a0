"""MPICH 4 (Hydra, ch4:ucx) beside Open MPI: chosen with --mpi, built into its own cache entry,
pingpong placed and its transport proven from UCX's own log, locally and across the virtual
cluster (Hydra's -launcher-exec); a missing MPICH, an MPI that cannot start and a hung rank give
a clear error in bounded time and leave no process behind."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from clusterbench import session
from clusterbench.benchmarks.base import RunContext, allowed_cpus
from clusterbench.errors import EnvironmentProblem, KernelFailed
from clusterbench.kernels.build import build_kernel
from clusterbench.launch import mpi as M
from clusterbench.store import Store

pytestmark = pytest.mark.integration  # every test here starts real processes

@pytest.fixture(scope="session")
def mpich() -> M.MpiInstall:
    """MPICH from the system (Debian: mpiexec.mpich, mpicc.mpich), or a skip naming the packages."""
    if not shutil.which("mpiexec.mpich") and not shutil.which("mpiexec.hydra"):
        pytest.skip("no mpiexec.mpich on PATH: install mpich and libmpich-dev to run the MPICH tests")
    try:
        return M.detect_mpi(kind="mpich")
    except EnvironmentProblem as exc:
        pytest.skip(f"MPICH not usable: {exc}")


@pytest.fixture
def two_cpus(live_probe: dict) -> list[int]:
    cpus = allowed_cpus(RunContext(probe=live_probe, profile="quick"))
    if len(cpus) < 2:
        pytest.skip("pingpong needs two cpus")
    return cpus[:2]


def _leftovers(tag: str) -> str:
    out = subprocess.run(["pgrep", "-af", tag], capture_output=True, text=True, timeout=10)
    return "\n".join(ln for ln in out.stdout.splitlines() if "pgrep" not in ln)


def _pingpong(store: Store, **given) -> session.RunReport:
    p = {"sizes": [8, 65536], "time_budget": 0.05, "validate": True, "allow_root": True, "mpi": "mpich", **given}
    return session.run(["pingpong"], {"pingpong": p}, profile="quick", store=store, timeout=120)


def test_detect_mpich_beside_open_mpi(mpich: M.MpiInstall) -> None:
    assert mpich.name == "mpich" and mpich.version.split(".")[0] == "4"
    assert "mpich" in os.path.basename(mpich.mpicc) or "mpich" in M.run_text([mpich.mpicc, "-show"])
    assert mpich.device == "ch4:ucx", "Debian's MPICH 4 is built with ch4:ucx; the transport tests assume it"
    # the same MPICH by the launcher's path; Open MPI stays the default mpirun
    assert M.detect_mpi(kind=mpich.mpirun) == mpich
    if shutil.which("mpirun.openmpi"):
        assert M.detect_mpi().name == "openmpi"


def test_missing_mpich_is_one_line(tmp_path: Path) -> None:
    """A PATH without MPICH (only Open MPI's launcher, if any): one line naming the packages."""
    if shutil.which("mpirun.openmpi"):
        (tmp_path / "mpirun").symlink_to(shutil.which("mpirun.openmpi"))
    with pytest.raises(EnvironmentProblem) as exc:
        M.detect_mpi(kind="mpich", path=str(tmp_path))
    assert "\n" not in str(exc.value) and "apt-get install mpich libmpich-dev" in str(exc.value)
    with pytest.raises(EnvironmentProblem, match="no such MPI launcher"):
        M.detect_mpi(kind=str(tmp_path / "mpiexec.mpich"))


def test_missing_mpich_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from clusterbench.cli import main

    rc = main(["run", "pingpong", "--mpi", str(tmp_path / "no-mpiexec"), "--allow-root", "--sizes", "8"])
    err = capsys.readouterr().err.strip()
    assert rc == 3 and len(err.splitlines()) == 1 and "no such MPI launcher" in err


def test_build_cache_keeps_mpich_apart(mpich: M.MpiInstall) -> None:
    ompi = shutil.which("mpicc.openmpi")
    if not ompi:
        pytest.skip("Open MPI's mpicc.openmpi is not installed")
    a = build_kernel("pingpong", openmp=False, cc=mpich.mpicc)
    b = build_kernel("pingpong", openmp=False, cc=ompi)
    assert a.info["cache_key"] != b.info["cache_key"] and a.path != b.path
    needed = subprocess.run(["readelf", "-d", str(a.path)], capture_output=True, text=True).stdout
    assert "libmpich" in needed and "libmpi.so" not in needed


@pytest.mark.parametrize("transport,expect,lane", [("auto", "shm", "sysv/"), ("tcp", "tcp", "tcp/")])
def test_local_pingpong(mpich: M.MpiInstall, two_cpus: list[int], tmp_path: Path,
                        transport: str, expect: str, lane: str) -> None:
    """Two ranks on this node, each on its own cpu; the run record names MPICH and its version;
    the transport is proven from UCX's endpoint lines."""
    store = Store(tmp_path / "r.db")
    rep = _pingpong(store, transport=transport, cpus=two_cpus)
    lat = {r.params["size_bytes"]: r for r in rep.results if r.metric == "latency"}
    assert sorted(lat) == [8, 65536]
    r = lat[8]
    assert r.params["mpi"]["name"] == "mpich" and r.params["mpi"]["version"] == mpich.version
    assert "MPICH" in r.params["mpi"]["library"]
    assert [(p["rank"], p["cpus"]) for p in r.params["placement"]] == [(0, str(two_cpus[0])), (1, str(two_cpus[1]))]
    assert r.params["transport_used"] == expect
    assert any(lane in ln for ln in r.params["transport_proof"]["evidence"])
    assert 0 < r.value < (50 if expect == "shm" else 500)
    assert {res.params["mpi"]["name"] for res in store.results(rep.run.id)} == {"mpich"}


@pytest.mark.parallel
def test_inter_node_on_the_virtual_cluster(mpich: M.MpiInstall, sim_cluster, tmp_path: Path) -> None:
    """Hydra starts its proxies in the nodes' namespaces through the sim-cluster's agent
    (-launcher-exec); rank 0 on node 1, rank 1 on node 2, each on its cpu, TCP over the cluster
    link (cb0) proven."""
    c = sim_cluster(2)
    rep = _pingpong(Store(tmp_path / "r.db"), transport="tcp", hosts=",".join(n.name for n in c.nodes))
    lat = [r for r in rep.results if r.metric == "latency"]
    assert len(lat) == 2 and lat[0].params["pair"] == "inter-node"
    assert [p["node"] for p in lat[0].params["placement"]] == [n.name for n in c.nodes]
    assert all(r.params["transport_used"] == "tcp" for r in lat)
    assert any(f"tcp/{c.nodes[0].iface}" in ln for ln in lat[0].params["transport_proof"]["evidence"])


def _spec(cpus: list[int], transport: str = "auto") -> M.LaunchSpec:
    return M.LaunchSpec(nranks=2, places=[M.RankPlace(None, c) for c in cpus], transport=transport)


def test_mpi_that_cannot_start(mpich: M.MpiInstall, two_cpus: list[int]) -> None:
    """rdma with no RDMA device: UCX cannot start, a one-line error, fast, nothing left."""
    b = build_kernel("pingpong", openmp=False, cc=mpich.mpicc)
    t0 = time.monotonic()
    with pytest.raises(KernelFailed) as exc:
        M.run_mpi(mpich, _spec(two_cpus, "rdma"), [str(b.path), "--sizes=8"], timeout=60, launch_timeout=30)
    if "no RDMA transport" not in str(exc.value) and "did not start" not in str(exc.value):
        pytest.fail(f"unexpected error: {exc.value}")
    assert time.monotonic() - t0 < 45 and "\n" not in str(exc.value)
    assert _leftovers(str(b.path)) == ""


def test_hanging_rank_is_killed_without_orphans(mpich: M.MpiInstall, two_cpus: list[int]) -> None:
    b = build_kernel("pingpong", openmp=False, cc=mpich.mpicc)
    t0 = time.monotonic()
    with pytest.raises(KernelFailed, match="timed out after 4 s"):
        M.run_mpi(mpich, _spec(two_cpus), [str(b.path), "--sizes=8", "--hang_rank=1"], timeout=4, name="pingpong")
    assert time.monotonic() - t0 < 15
    assert _leftovers(str(b.path)) == "" and _leftovers("hydra_pmi_proxy.*" + str(b.path)) == ""


def test_transport_contradiction_is_refused(mpich: M.MpiInstall, two_cpus: list[int],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked shm, but the proof shows TCP (forced behind our back): no figure is passed on."""
    b = build_kernel("pingpong", openmp=False, cc=mpich.mpicc)
    spec = _spec(two_cpus, "shm")
    spec.env = {"UCX_TLS": "self,tcp", "MPIR_CVAR_NOLOCAL": "1"}  # the user's environment wins
    got: list[dict] = []
    with pytest.raises(KernelFailed, match="asked shm, MPICH used UCX tcp"):
        M.run_mpi(mpich, spec, [str(b.path), "--sizes=8", "--time_budget=0.02"], timeout=60,
                  on_record=got.append)
    assert not [r for r in got if r.get("type") == "result"]
    assert _leftovers(str(b.path)) == ""
