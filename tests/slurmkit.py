"""What the two Slurm test modules share (test_slurm.py: one node on this host; test_slurm_cluster.py:
one slurmd per virtual-cluster namespace): the skip checks, slurm.conf's common body, munged, and
stopping and finding the daemons. Not a test module."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest


def skip_unless_slurm(tools: tuple[str, ...], install: str) -> None:
    """Skip unless root, every tool installed, and no other Slurm's step daemon running."""
    if os.geteuid() != 0:
        pytest.skip("starting slurmctld/slurmd/munged needs root")
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: apt-get install {install}")
    if subprocess.run(["pgrep", "-x", "slurmstepd"], capture_output=True).returncode == 0:
        pytest.skip("a slurmstepd of another Slurm runs here; this test cannot tell its steps apart")


def slurmd_node_line() -> str:
    """The ``NodeName=... CPUs=... RealMemory=...`` line slurmd -C prints for this machine."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30).stdout
    return next(ln for ln in out.splitlines() if ln.startswith("NodeName="))


def common_conf(d: Path) -> str:
    """slurm.conf lines both test Slurms use: munge in ``d``, root daemons, no accounting."""
    return f"""AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmctldPidFile={d}/slurmctld.pid
SlurmctldLogFile={d}/slurmctld.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
"""


def start_munge(d: Path, env: dict[str, str]) -> int:
    """munged with a fresh key and its socket in ``d``; returns its pid."""
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    subprocess.run(["munged", f"--key-file={key}", f"--socket={d}/munge.sock", f"--pid-file={d}/munged.pid",
                    f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed", "--force"],
                   check=True, timeout=20, env=env)
    return int((d / "munged.pid").read_text())


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def stop_munge(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def ours(d: Path) -> list[str]:
    """Processes of this Slurm: its daemons and steps (their command lines name ``d``)."""
    out = subprocess.run(["pgrep", "-af", str(d)], capture_output=True, text=True, timeout=10).stdout
    return [ln for ln in out.splitlines() if "pgrep" not in ln]


def alive(pid: int | None) -> bool:
    return bool(pid) and os.path.exists(f"/proc/{pid}")
