"""Allocations, registered: *where am I allocated*, beside the launcher registry's *how ranks start*.

A batch system that gives a job a set of nodes (Slurm, PBS/Torque) is one module here with one
function decorated by :func:`register_allocation`: given the environment, it answers whether this
process runs inside one of its jobs and, if so, which hosts the job holds (:class:`Allocation`).
Every command that needs "the nodes" when none are given (``sweep node``, ``sweep network``,
``cluster check``, ``doctor --hosts``) asks :func:`current`, and the launcher registry asks it
whether ``--launcher auto`` means the scheduler's own launcher (:func:`own_launcher`, e.g.
``srun``). Outside every registered scheduler :func:`current` is None.

Each scheduler registers two answers: the cheap one (:func:`inside`: is this process in one of its
jobs, from the environment alone) and the full one (its detector: the job's hosts, which may ask the
scheduler's tools). A new scheduler is one module in this package (found by :func:`discover`, as the
launchers are) and its test; a scheduler kept outside this tree is a module named in the entry-point
group :data:`ENTRY_POINTS`.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from clusterbench.plugins import import_package_modules, load_entry_points


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
#: the cheap answer: whether this process runs inside one of its jobs (its environment only)
InsideFn = Callable[[Mapping[str, str]], bool]


@dataclass(frozen=True)
class Scheduler:
    """One registered batch system."""

    name: str
    detect: DetectFn
    inside: InsideFn
    #: its own launcher (a ``--launcher`` choice, e.g. ``srun``), or None: the MPI's own is used
    launcher: str | None = None


REGISTRY: dict[str, Scheduler] = {}
#: the entry-point group whose entries name scheduler modules of other distributions (plug-ins)
ENTRY_POINTS = "clusterbench.allocations"


def register_allocation(name: str, *, inside: InsideFn, launcher: str | None = None
                        ) -> Callable[[DetectFn], DetectFn]:
    """Register the decorated function as scheduler ``name``'s detector, with its cheap ``inside``
    check and its own ``launcher`` (if it has one)."""
    def deco(fn: DetectFn) -> DetectFn:
        REGISTRY[name] = Scheduler(name, fn, inside, launcher)
        return fn
    return deco


def current(env: Mapping[str, str] | None = None) -> Allocation | None:
    """The allocation this process runs in (the first registered scheduler that answers), or None."""
    env = os.environ if env is None else env
    for scheduler in REGISTRY.values():
        found = scheduler.detect(env)
        if found is not None:
            return found
    return None


def inside(scheduler: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs inside a job of ``scheduler`` (cheap: its environment only)."""
    env = os.environ if env is None else env
    known = REGISTRY.get(scheduler)
    return known is not None and bool(known.inside(env))


def own_launcher(env: Mapping[str, str] | None = None) -> str | None:
    """The launcher of the first registered scheduler whose job this process runs in, when that
    scheduler has one of its own (``srun`` inside a Slurm job), else None (cheap: the environment)."""
    env = os.environ if env is None else env
    for scheduler in REGISTRY.values():
        if scheduler.launcher and scheduler.inside(env):
            return scheduler.launcher
    return None


def hosts(env: Mapping[str, str] | None = None) -> list[str] | None:
    """The current allocation's hosts, or None outside one."""
    a = current(env)
    return list(a.hosts) if a is not None else None


def discover() -> None:
    """Import every scheduler module of this package (each registers itself; ``_x`` modules are
    helpers) and those named in the :data:`ENTRY_POINTS` group (a broken plug-in is left out with a
    warning)."""
    import_package_modules(__path__, __name__)
    load_entry_points(ENTRY_POINTS, "scheduler plug-in")

discover()
