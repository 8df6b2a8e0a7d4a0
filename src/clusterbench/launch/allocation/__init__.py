"""Allocations, registered: *where am I allocated*, beside the launcher registry's *how ranks start*.

A batch system that gives a job a set of nodes (Slurm, PBS/Torque) is one module here with one
function decorated by :func:`register_allocation`: given the environment, it answers whether this
process runs inside one of its jobs and, if so, which hosts the job holds (:class:`Allocation`).
Every command that needs "the nodes" when none are given (``sweep node``, ``sweep network``,
``cluster check``, ``doctor --hosts``) asks :func:`current`, and the launcher registry asks it
whether ``--launcher auto`` means the scheduler's own launcher (:attr:`Allocation.launcher`, e.g.
``srun``). Outside every registered scheduler :func:`current` is None. A new scheduler is one
module (and its import at the end of this one) and its test.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Allocation:
    """A job's nodes, as its scheduler gives them."""

    scheduler: str             # slurm, pbs
    job_id: str
    hosts: tuple[str, ...]     # each node once, in the scheduler's order
    #: the scheduler's own launcher, which starts one task per node inside the job (``srun``), or
    #: None: the MPI's own launcher is used there (Open MPI's mpirun reads PBS's node file itself)
    launcher: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler, "job_id": self.job_id, "hosts": list(self.hosts),
                "launcher": self.launcher}


#: answers for one scheduler: the allocation this process runs in, or None outside its jobs; raises
#: EnvironmentProblem (one line, with the fix) when it is inside one whose nodes cannot be read
DetectFn = Callable[[Mapping[str, str]], "Allocation | None"]

REGISTRY: dict[str, DetectFn] = {}


def register_allocation(name: str) -> Callable[[DetectFn], DetectFn]:
    """Register the decorated function as scheduler ``name``'s detector."""
    def deco(fn: DetectFn) -> DetectFn:
        REGISTRY[name] = fn
        return fn
    return deco


def current(env: Mapping[str, str] | None = None) -> Allocation | None:
    """The allocation this process runs in (the first registered scheduler that answers), or None."""
    env = os.environ if env is None else env
    for detect in REGISTRY.values():
        found = detect(env)
        if found is not None:
            return found
    return None


def inside(scheduler: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs inside a job of ``scheduler`` (cheap: its environment only)."""
    env = os.environ if env is None else env
    return scheduler == "slurm" and bool(env.get("SLURM_JOB_ID")) or \
        scheduler == "pbs" and bool(env.get("PBS_JOBID"))


def hosts(env: Mapping[str, str] | None = None) -> list[str] | None:
    """The current allocation's hosts, or None outside one."""
    a = current(env)
    return list(a.hosts) if a is not None else None


from clusterbench.launch.allocation import pbs, slurm  # noqa: E402,F401  (they register themselves)
