"""launch/mpi.py: MPI detection, hosts and hostfiles, the mpirun command, the transport proof,
placement verification and bounded runs (real Open MPI; no orphans after a hang)."""
from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

import prockit
from clusterbench.errors import EnvironmentProblem, KernelFailed, UsageError
from clusterbench.kernels.build import build_kernel
from clusterbench.launch import mpi as M

# every real run here looks only for its own processes (tests/prockit.py) and bounds its time with room for
# a busy machine: the parallel pass runs these beside another test
pytestmark = pytest.mark.parallel

IS_ROOT = os.geteuid() == 0


def _mpi_or_skip() -> M.MpiInstall:
    if not shutil.which("mpirun") and not shutil.which("mpiexec"):
        pytest.skip("no mpirun on PATH: install openmpi-bin and libopenmpi-dev to run the MPI tests")
    try:
        return M.detect_mpi()
    except EnvironmentProblem as exc:
        pytest.skip(f"MPI not usable: {exc}")


@pytest.fixture(scope="module")
def mpi() -> M.MpiInstall:
    return _mpi_or_skip()


@pytest.fixture(scope="module")
def kernel(mpi: M.MpiInstall, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pingpong kernel, copied under a name of its own (a test's leftovers are named by it)."""
    old = os.environ.get("CLUSTERBENCH_CACHE")
    os.environ["CLUSTERBENCH_CACHE"] = (os.environ.get("CLUSTERBENCH_TEST_CACHE")
                                        or str(tmp_path_factory.getbasetemp() / "cache"))
    try:
        b = build_kernel("pingpong", openmp=False, cc=mpi.mpicc)
    finally:
        if old is None:
            os.environ.pop("CLUSTERBENCH_CACHE", None)
        else:
            os.environ["CLUSTERBENCH_CACHE"] = old
    dst = tmp_path_factory.mktemp("bin") / f"cbpp_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    shutil.copy(b.path, dst)
    return dst


def _local_spec(**kw) -> M.LaunchSpec:
    return M.LaunchSpec(nranks=2, places=[M.RankPlace(None, 0), M.RankPlace(None, 1)], allow_root=True, **kw)


def _leftovers(tag: str) -> str:
    """This test's processes still running (tests/prockit.py), those whose command line names ``tag``
    first: "" when nothing is left."""
    left = prockit.gone_within(prockit.carrying)
    return "\n".join(sorted((f"{p} {prockit.cmdline(p)}" for p in left), key=lambda ln: tag not in ln))


# -- detection -------------------------------------------------------------------------------------
@pytest.mark.integration
def test_detect_open_mpi(mpi: M.MpiInstall) -> None:
    assert mpi.name in ("openmpi", "mpich")
    assert Path(mpi.mpirun).is_file() and Path(mpi.mpicc).is_file()
    if mpi.name == "openmpi":
        assert mpi.version.split(".")[0].isdigit()


@pytest.mark.integration
def test_missing_mpicc_names_the_package(tmp_path: Path, mpi: M.MpiInstall) -> None:
    (tmp_path / "mpirun").symlink_to(mpi.mpirun)
    with pytest.raises(EnvironmentProblem) as exc:
        M.detect_mpi(path=str(tmp_path))
    assert "mpicc" in str(exc.value) and "libopenmpi-dev" in str(exc.value)


@pytest.mark.integration
# -- the command -----------------------------------------------------------------------------------
def test_command_transports_rankfile_and_extras(tmp_path: Path, mpi: M.MpiInstall) -> None:
    if mpi.name != "openmpi":
        pytest.skip("Open MPI command line")
    spec = M.LaunchSpec(nranks=2, hosts=[M.Host("n1", 1), M.Host("n2", 1)],
                        places=[M.RankPlace("n1", 0), M.RankPlace("n2", 1)], transport="tcp",
                        tcp_include="198.18.0.0/15", allow_root=True, report_bindings=True,
                        extra_args=["--mca", "plm_rsh_agent", "/x/agent"], env={"CB_X": "1"})
    cmd, env = M.build_command(mpi, spec, ["./k", "--a=1"], tmp_path)
    line = " ".join(cmd)
    assert "--mca pml ob1 --mca btl self,tcp" in line and "--mca btl_tcp_if_include 198.18.0.0/15" in line
    assert "--report-bindings" in line and "-x CB_X" in line and line.endswith("/x/agent ./k --a=1")
    assert "--mca btl_base_verbose 30" in line
    assert (tmp_path / "rankfile").read_text() == "rank 0=n1 slot=0\nrank 1=n2 slot=1\n"
    assert (tmp_path / "hostfile").read_text() == "n1 slots=1\nn2 slots=1\n"
    assert ("--allow-run-as-root" in cmd) == IS_ROOT
    shm, _ = M.build_command(mpi, M.LaunchSpec(nranks=2, transport="shm", allow_root=True), ["k"], tmp_path)
    assert "self,vader" in " ".join(shm)
    auto, _ = M.build_command(mpi, M.LaunchSpec(nranks=2, allow_root=True, prove_transport=False), ["k"], tmp_path)
    assert "--mca pml" not in " ".join(auto) and "--mca btl" not in " ".join(auto)
    with pytest.raises(UsageError):
        M.build_command(mpi, M.LaunchSpec(nranks=2, transport="tcp", tcp_include="198.18.0.0/99",
                                          allow_root=True), ["k"], tmp_path)
    with pytest.raises(UsageError, match="slots"):
        M.build_command(mpi, M.LaunchSpec(nranks=3, hosts=[M.Host("n1", 1)], allow_root=True), ["k"], tmp_path)


@pytest.mark.integration
@pytest.mark.skipif(not IS_ROOT, reason="the allow-run-as-root rule applies to root only")
def test_root_without_allow_root_is_a_usage_error(tmp_path: Path, mpi: M.MpiInstall) -> None:
    if mpi.name != "openmpi":
        pytest.skip("Open MPI refuses root; MPICH does not")
    with pytest.raises(UsageError, match="as root, Open MPI needs --allow-run-as-root; add --allow-root"):
        M.build_command(mpi, M.LaunchSpec(nranks=2), ["k"], tmp_path)


@pytest.mark.integration
def test_rdma_without_ucx_or_device(tmp_path: Path, mpi: M.MpiInstall) -> None:
    if mpi.name != "openmpi":
        pytest.skip("Open MPI")
    spec = M.LaunchSpec(nranks=2, transport="rdma", allow_root=True)
    if not mpi.has_ucx:
        with pytest.raises(EnvironmentProblem, match="UCX"):
            M.build_command(mpi, spec, ["k"], tmp_path)
    else:
        cmd, env = M.build_command(mpi, spec, ["k"], tmp_path)
        assert "--mca pml ucx" in " ".join(cmd) and env["UCX_TLS"].startswith("rc")


# -- real runs -------------------------------------------------------------------------------------
@pytest.mark.integration
def test_bounded_run_records_and_proof(mpi: M.MpiInstall, kernel: Path) -> None:
    seen = []
    run = M.run_mpi(mpi, _local_spec(transport="shm"), [str(kernel), "--sizes=8", "--time_budget=0.01"],
                    timeout=60, on_record=seen.append, name="pingpong")
    assert [r["type"] for r in seen][:2] == ["info", "validation"]
    assert run.proof.btl == ["vader"] and run.info["ranks"][1]["cpus"] == "1"
    assert any(r["type"] == "result" and r["metric"] == "latency" for r in run.records)


@pytest.mark.integration
def test_mpirun_failure_is_explained(mpi: M.MpiInstall, kernel: Path) -> None:
    spec = M.LaunchSpec(nranks=3, allow_root=True, prove_transport=False)  # 3 ranks, 2 cores, no hostfile
    with pytest.raises(KernelFailed, match="not enough slots"):
        M.run_mpi(mpi, spec, [str(kernel), "--sizes=8"], timeout=60)


@pytest.mark.integration
def test_corrupted_data_is_caught(mpi: M.MpiInstall, kernel: Path) -> None:
    with pytest.raises(KernelFailed, match="wrong result"):
        M.run_mpi(mpi, _local_spec(), [str(kernel), "--sizes=4096", "--time_budget=0.01", "--validate=1",
                                       "--corrupt=1"], timeout=60)
    assert _leftovers(kernel.name) == ""


@pytest.mark.integration
def test_hanging_rank_is_killed_without_orphans(mpi: M.MpiInstall, kernel: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(KernelFailed, match="timed out after 3 s"):
        M.run_mpi(mpi, _local_spec(), [str(kernel), "--sizes=8", "--hang_rank=1"], timeout=3, name="pingpong")
    assert time.monotonic() - t0 < 15
    time.sleep(0.2)
    assert _leftovers(kernel.name) == "", "orphan mpirun/orted/rank processes"


@pytest.mark.integration
def test_teardown_that_hangs_after_done_keeps_the_results(mpi: M.MpiInstall, kernel: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank that never returns from the end of the kernel (after "done", before MPI_Finalize, as
    a transport's disconnect can hang): after FINALIZE_GRACE the run is killed, nothing is left,
    and the validated results stand (finalize_hung is set for the caller's note)."""
    monkeypatch.setattr(M.run, "FINALIZE_GRACE", 2.0)  # read by launch/mpi/run.py
    t0 = time.monotonic()
    run = M.run_mpi(mpi, _local_spec(), [str(kernel), "--sizes=8", "--time_budget=0.01", "--hang_at_exit=1"],
                    timeout=60, name="pingpong")
    assert time.monotonic() - t0 < 20
    assert run.finalize_hung
    assert any(r["type"] == "result" for r in run.records) and run.records[-1]["type"] == "done"
    time.sleep(0.2)
    assert _leftovers(kernel.name) == "", "orphan mpirun/orted/rank processes"


@pytest.mark.integration
def test_a_rank_killed_from_outside_is_named(mpi: M.MpiInstall, kernel: Path) -> None:
    """Issue 23: a ping-pong rank killed with SIGKILL gave "rerun with a smaller size or report it". The
    error names the rank, the signal and that it came from outside (memory was fine); nothing is left."""
    import signal
    import threading

    # past MPI_Init first (its first record, the placement report, needs every rank): a rank killed
    # inside MPI_Init is a crash at start, which is launched again once, and that launch then hangs
    started = threading.Event()

    def kill_rank_1() -> None:
        deadline = time.monotonic() + 30
        started.wait(30)
        while time.monotonic() < deadline:
            pids = [p for p in prockit.carrying() if prockit.exe(p) == str(kernel)]
            if len(pids) >= 2:
                os.kill(max(pids), signal.SIGKILL)  # the later-started rank
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_rank_1)
    killer.start()
    try:
        with pytest.raises(KernelFailed) as exc:
            M.run_mpi(mpi, _local_spec(), [str(kernel), "--sizes=8", "--hang_rank=1"], timeout=30, name="pingpong",
                      on_record=lambda rec: started.set())
    finally:
        started.set()
        killer.join()
    msg = str(exc.value)
    assert "killed by SIGKILL from outside" in msg and "rank" in msg, msg
    assert "smaller size" not in msg and "\n" not in msg
    time.sleep(0.2)
    assert _leftovers(kernel.name) == ""


@pytest.mark.integration
def test_interrupt_kills_the_group(mpi: M.MpiInstall, kernel: Path) -> None:
    def stop(rec: dict) -> None:
        if rec["type"] == "info":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        M.run_mpi(mpi, _local_spec(), [str(kernel), "--sizes=8", "--hang_rank=1"], timeout=30, on_record=stop)
    time.sleep(0.2)
    assert _leftovers(kernel.name) == ""


@pytest.mark.integration
def test_launch_timeout(mpi: M.MpiInstall, kernel: Path, tmp_path: Path) -> None:
    """A launcher that never starts the ranks (a stuck ssh) is given up after the launch timeout."""
    agent = tmp_path / f"stuck_{kernel.name}"
    agent.write_text("#!/bin/sh\nexec sleep 600\n")
    agent.chmod(0o755)
    fake = M.MpiInstall(mpi.name, mpi.version, str(agent), mpi.mpicc, mpi.ompi_info)
    t0 = time.monotonic()
    with pytest.raises(KernelFailed, match="did not start"):
        M.run_mpi(fake, _local_spec(prove_transport=False), [str(kernel)], timeout=60, launch_timeout=2)
    assert time.monotonic() - t0 < 12
    assert _leftovers(agent.name) == ""


