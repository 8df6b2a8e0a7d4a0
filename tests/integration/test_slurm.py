"""Slurm's srun as the launcher, against a real Slurm (slurmctld + slurmd + munged) that this file
configures in a temporary directory on this machine: this host is the controller and the one
node, with the CPUs and RealMemory slurmd -C reports. Inside an allocation the ranks start
through srun (PMIx for Open MPI, PMI-2 for MPICH), each on the cpu asked for, the transport
proven as with mpirun; a hung rank is killed in bounded time; nothing of Slurm is left after."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench.benchmarks.base import RunContext, allowed_cpus
from clusterbench.errors import EnvironmentProblem, KernelFailed
from clusterbench.kernels.build import build_kernel
from clusterbench.launch import mpi as M
from slurmkit import alive, common_conf, ours, skip_unless_slurm, slurmd_node_line, start_munge, stop, stop_munge

pytestmark = pytest.mark.integration  # every test here starts real processes

REPO = Path(__file__).resolve().parents[2]
DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "salloc", "sinfo")
PARTITION = "cbtest"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _node_line() -> str:
    """``NodeName=... CPUs=... RealMemory=...`` as slurmd -C finds this machine."""
    return slurmd_node_line() + " NodeAddr=127.0.0.1 State=UNKNOWN"


def _conf(d: Path, ports: list[int], node: str, name: str) -> str:
    return f"""ClusterName=cbtest
SlurmctldHost={name}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmdSpoolDir={d}/spool
SlurmdPidFile={d}/slurmd.pid
SlurmdLogFile={d}/slurmd.log
{common_conf(d)}{node}
PartitionName={PARTITION} Nodes={name} Default=YES MaxTime=INFINITE State=UP
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    """A running one-node Slurm; yields the environment its clients need (SLURM_CONF)."""
    skip_unless_slurm(DAEMONS, "slurm-wlm munge")
    d = tmp_path_factory.mktemp("slurm")
    d.chmod(0o700)
    (d / "state").mkdir()
    (d / "spool").mkdir()
    node = _node_line()
    name = node.split()[0].split("=", 1)[1]
    conf = d / "slurm.conf"
    conf.write_text(_conf(d, _free_ports(2), node, name))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    env.pop("SLURM_JOB_ID", None)
    procs: list[subprocess.Popen] = []
    munge_pid = None
    try:
        munge_pid = start_munge(d, env)
        for daemon in ("slurmctld", "slurmd"):
            log = open(d / f"{daemon}.out", "wb")
            procs.append(subprocess.Popen([daemon, "-D", "-f", str(conf)], stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=env, start_new_session=True))
        deadline = time.monotonic() + 30
        state = ""
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in procs):
                break
            r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10, env=env)
            state = r.stdout.strip()
            if state == "idle":
                break
            time.sleep(0.5)
        if state != "idle":
            logs = " | ".join((d / f).read_text(errors="replace")[-300:] for f in ("slurmctld.out", "slurmd.out"))
            pytest.fail(f"Slurm did not come up within 30 s (node state {state!r}): {logs}")
        yield {"SLURM_CONF": str(conf), "dir": str(d)}
    finally:
        subprocess.run(["scancel", f"--partition={PARTITION}"], env=env, capture_output=True, timeout=20)
        for p in reversed(procs):
            stop(p)
        stop_munge(munge_pid)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (ours(d) or alive(munge_pid)):
            time.sleep(0.2)
    assert not ours(d) and not alive(munge_pid), "Slurm daemons left behind"
    assert subprocess.run(["pgrep", "-x", "slurmstepd"], capture_output=True).returncode != 0, "slurmstepd left"


@pytest.fixture
def allocation(slurm, monkeypatch: pytest.MonkeyPatch):
    """A 2-task allocation with no shell (``salloc --no-shell``), this process inside it as a
    batch script would be (SLURM_JOB_ID set); cancelled afterwards."""
    env = {**os.environ, "SLURM_CONF": slurm["SLURM_CONF"]}
    r = subprocess.run(["salloc", "--no-shell", "-n", "2", "--time=5", "--job-name=cbtest"], capture_output=True,
                       text=True, timeout=60, env=env)
    job = next((w for w in r.stderr.split() if w.isdigit()), None)
    assert r.returncode == 0 and job, r.stderr
    monkeypatch.setenv("SLURM_CONF", slurm["SLURM_CONF"])
    monkeypatch.setenv("SLURM_JOB_ID", job)
    try:
        yield job
    finally:
        subprocess.run(["scancel", job], env=env, capture_output=True, timeout=20)


@pytest.fixture
def two_cpus(live_probe: dict) -> list[int]:
    cpus = allowed_cpus(RunContext(probe=live_probe, profile="quick"))
    if len(cpus) < 2:
        pytest.skip("needs two cpus")
    return cpus[:2]


def test_pmi_plugins_shared_with_the_mpis(slurm, mpi, monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian's Slurm 22.05 offers pmix (v4) and pmi2; Open MPI 4.1 speaks PMIx, MPICH PMI-1 (pmi2 serves it)."""
    monkeypatch.setenv("SLURM_CONF", slurm["SLURM_CONF"])
    plugins = M.srun_mpi_plugins(shutil.which("srun"))
    assert "pmix" in plugins and "pmi2" in plugins
    assert M.srun_pmi(mpi, shutil.which("srun")) == "pmix"


def test_inside_an_allocation_ranks_start_through_srun(mpi, allocation, two_cpus) -> None:
    """auto -> srun (SLURM_JOB_ID is set); cpus asked in reverse order, and each rank reports the
    cpu Slurm bound it to (--cpu-bind=map_cpu); the vader btl proven from Open MPI's own lines."""
    b = build_kernel("pingpong", openmp=False, cc=mpi.mpicc)
    cpus = [two_cpus[1], two_cpus[0]]
    spec = M.LaunchSpec(nranks=2, places=[M.RankPlace(None, c) for c in cpus], transport="shm")
    run = M.run_mpi(mpi, spec, [str(b.path), "--sizes=8", "--time_budget=0.02"], timeout=60, launch_timeout=30)
    assert os.path.basename(run.command[0]) == "srun" and "--mpi=pmix" in run.command
    assert f"--cpu-bind=map_cpu:{cpus[0]},{cpus[1]}" in run.command
    ranks = run.info["ranks"]
    M.verify_placement(ranks, spec.places)
    assert [r["cpus"] for r in ranks] == [str(c) for c in cpus]
    assert M.used_transport(run.proof) == "shm" and "vader" in run.proof.btl


@pytest.mark.parametrize("which", ["openmpi", "mpich"])
def test_pingpong_cli_inside_salloc(slurm, which: str, tmp_path: Path) -> None:
    """The whole command inside ``salloc -n 2``: pingpong runs through srun, every rank reports
    its cpu, the transport is proven, the run is stored."""
    if which == "mpich" and not shutil.which("mpiexec.mpich"):
        pytest.skip("MPICH not installed (apt-get install mpich libmpich-dev)")
    env = {**os.environ, "SLURM_CONF": slurm["SLURM_CONF"], "PYTHONPATH": str(REPO / "src")}
    cmd = ["salloc", "-n", "2", "--time=5", sys.executable, "-m", "clusterbench.cli", "--db", str(tmp_path / "r.db"),
           "run", "pingpong", "--mpi", which, "--launcher", "srun", "--transport", "shm", "--sizes", "8",
           "--time-budget", "0.05", "--allow-root", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Granted job allocation" in r.stderr
    lat = [x for x in json.loads(r.stdout)["results"] if x["metric"] == "latency"]
    assert len(lat) == 1
    p = lat[0]["params"]
    assert p["mpi"]["name"] == which
    assert [(q["rank"], q["cpus"]) for q in p["placement"]] == [(0, str(p["cpus"][0])), (1, str(p["cpus"][1]))]
    assert p["transport_used"] == "shm"


def test_hung_rank_under_srun_is_killed(mpi, allocation, two_cpus, slurm) -> None:
    b = build_kernel("pingpong", openmp=False, cc=mpi.mpicc)
    spec = M.LaunchSpec(nranks=2, places=[M.RankPlace(None, c) for c in two_cpus])
    t0 = time.monotonic()
    with pytest.raises(KernelFailed, match="timed out after 5 s"):
        M.run_mpi(mpi, spec, [str(b.path), "--sizes=8", "--hang_rank=1"], timeout=5, name="pingpong")
    assert time.monotonic() - t0 < 20
    env = {**os.environ, "SLURM_CONF": slurm["SLURM_CONF"]}
    deadline = time.monotonic() + 20  # slurmd ends the step's tasks once srun is gone
    while time.monotonic() < deadline:
        steps = subprocess.run(["squeue", "-h", "-s", "-j", allocation], capture_output=True, text=True,
                               timeout=10, env=env).stdout.strip()
        left = subprocess.run(["pgrep", "-f", str(b.path)], capture_output=True, text=True).stdout.strip()
        if not steps and not left:
            break
        time.sleep(0.3)
    assert not steps and not left, (steps, left)


def test_srun_missing_is_one_line(mpi, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    spec = M.LaunchSpec(nranks=2, launcher="srun")
    with pytest.raises(EnvironmentProblem, match="srun is not on PATH"):
        M.build_command(mpi, spec, ["true"], tmp_path)
