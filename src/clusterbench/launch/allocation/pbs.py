"""PBS Pro and Torque: inside a job when ``$PBS_JOBID`` is set; its nodes are the lines of
``$PBS_NODEFILE`` (one line per slot, so a node appears as many times as it has slots there),
each node taken once, in the file's order. Open MPI's mpirun reads the same file itself (its
``tm`` support), so the MPI's own launcher starts the ranks there."""
from __future__ import annotations

from collections.abc import Mapping

from clusterbench import files
from clusterbench.errors import EnvironmentProblem
from clusterbench.launch.allocation import Allocation, register_allocation

#: a node file of 100,000 slots is ~2 MB
NODEFILE_LIMIT = 4 << 20


def inside(env: Mapping[str, str]) -> bool:
    """Inside a PBS job: its id is set."""
    return bool(env.get("PBS_JOBID"))


@register_allocation("pbs", inside=inside)
def detect(env: Mapping[str, str]) -> Allocation | None:
    job = env.get("PBS_JOBID")
    if not job:
        return None
    path = env.get("PBS_NODEFILE")
    if not path:
        raise EnvironmentProblem(f"inside PBS job {job} but $PBS_NODEFILE is not set",
                                 "give the nodes with --hosts or --hostfile")
    text = files.read_text(path, "PBS node file", NODEFILE_LIMIT, "give the nodes with --hosts or --hostfile")
    names = [ln.split()[0] for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not names:
        raise EnvironmentProblem(f"PBS job {job}: its node file {path} names no node",
                                 "give the nodes with --hosts or --hostfile")
    return Allocation("pbs", job, tuple(dict.fromkeys(names)), None)
