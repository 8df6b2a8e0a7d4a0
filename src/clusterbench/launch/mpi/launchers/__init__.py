"""Launchers, registered: each turns a :class:`LaunchSpec` into the command that starts the ranks.

``mpirun`` (Open MPI, :mod:`.openmpi`), ``mpiexec`` (MPICH's Hydra, :mod:`.mpich`) and ``srun``
(Slurm's direct launch, :mod:`.srun`) register themselves with :func:`register_launcher`;
:func:`build_command` checks the spec and hands it to the one that serves the ``--launcher`` choice
(:func:`resolve_launcher`) for this MPI. The ``--launcher`` choices are :func:`launcher_choices`.

A new launcher is one module in this package with one decorated function (and its test): every
module here is imported when this package is (:func:`discover`), and so is every module named in the
entry-point group :data:`ENTRY_POINTS` of an installed distribution (a launcher kept outside this
tree). docs/adding-a-launcher.md walks through one. Local kernels need no launcher: they are started
by the process layer directly (:mod:`clusterbench.launch.local`).
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clusterbench.errors import UsageError
from clusterbench.launch import allocation
from clusterbench.launch.mpi.detect import MpiInstall
from clusterbench.launch.mpi.hosts import check_slots
from clusterbench.launch.mpi.spec import LaunchSpec, check_cidr
from clusterbench.launch.mpi.transport import TRANSPORTS
from clusterbench.plugins import import_package_modules, load_entry_points

#: the command for ``program`` (files it needs written into the work folder; ``env`` updated with
#: the variables the ranks must see). The MPI is None only for a ``tagged`` spec (the program is not
#: an MPI program) served by a launcher that starts any program (``mpi`` empty: srun).
CommandFn = Callable[["MpiInstall | None", LaunchSpec, Sequence[str], Path, dict], list]


@dataclass(frozen=True)
class OutputTag:
    """How a launcher tags each process's output in the ``tagged`` mode: ``pattern`` finds a tag
    and its group 1 is the rank; ``anywhere``: the launcher tags every chunk it forwards, so a tag
    may stand inside a line (Open MPI, Hydra), else it labels whole lines at their start (srun)."""

    pattern: bytes
    anywhere: bool


@dataclass(frozen=True)
class Launcher:
    name: str                 # mpirun, mpiexec, srun
    serves: str               # the --launcher choice it serves: mpirun (the MPI's own) or srun
    mpi: tuple[str, ...]      # the MPI kinds it starts (empty: any)
    command: CommandFn
    #: how it tags output in the one-tagged-process-per-node mode (``LaunchSpec.tagged``)
    tag: OutputTag | None = None
    #: it hands its own whole environment to the processes (srun): what must stay on this machine
    #: is taken out of its environment, not merely left unexported
    exports_env: bool = False


REGISTRY: dict[str, Launcher] = {}


def register_launcher(name: str, *, serves: str, mpi: tuple[str, ...] = (), tag: OutputTag | None = None,
                      exports_env: bool = False) -> Callable[[CommandFn], CommandFn]:
    """Register the decorated command builder as launcher ``name``: it serves the ``--launcher``
    choice ``serves``, for the MPI kinds ``mpi`` (empty: any); ``tag`` says how it tags each
    process's lines in the one-tagged-process-per-node mode, which every launcher is expected to
    build (:mod:`clusterbench.launch.mpi.pernode`)."""
    def deco(fn: CommandFn) -> CommandFn:
        REGISTRY[name] = Launcher(name, serves, mpi, fn, tag, exports_env)
        return fn
    return deco


#: the --launcher choice that picks for itself (:func:`resolve_launcher`)
AUTO = "auto"
#: the --launcher choice of the MPI's own launcher (Open MPI's mpirun, MPICH's Hydra mpiexec)
MPI_OWN = "mpirun"
#: the entry-point group whose entries name launcher modules of other distributions (plug-ins)
ENTRY_POINTS = "clusterbench.launchers"


def launcher_choices() -> tuple[str, ...]:
    """The ``--launcher`` choices: ``auto`` and what the registered launchers serve, sorted
    (``auto``, ``mpirun``, ``srun`` with the launchers of this package)."""
    return (AUTO, *sorted({launcher.serves for launcher in REGISTRY.values()}))


def through_agent(spec: LaunchSpec) -> bool:
    """Whether the ranks' nodes are the shared-filesystem virtual cluster's, which only its launch
    agent reaches. Its machines (``sim-cluster up --machines``) are reached as real hosts are, and
    can each run a slurmd of their own: srun starts ranks there (from the head, ``spec.prefix``)."""
    machines = spec.sim is not None and bool(getattr(spec.sim, "machines", False))
    return (spec.sim is not None or bool(spec.prefix)) and not machines


def resolve_launcher(spec: LaunchSpec) -> str:
    """The choice asked for; for ``auto`` the scheduler's own launcher inside one of its jobs
    (:func:`clusterbench.launch.allocation.own_launcher`: ``srun`` inside a Slurm allocation) when it
    is on PATH and the ranks' nodes are not the virtual cluster's agent-reached ones; else ``mpirun``
    (the MPI's own launcher: mpirun or Hydra's mpiexec)."""
    choices = launcher_choices()
    if spec.launcher not in choices:
        raise UsageError(f"--launcher {spec.launcher!r} is not one of {', '.join(choices)}", "pick one of those")
    if spec.launcher not in (AUTO, MPI_OWN) and through_agent(spec):  # only the MPI's own launcher has its agent
        raise UsageError(f"--launcher {spec.launcher} cannot start ranks on the virtual cluster",
                         f"use --launcher {MPI_OWN} there")
    if spec.launcher == AUTO:
        own = allocation.own_launcher()  # the scheduler's, inside a job of one that has its own
        usable = own in choices and not through_agent(spec) and shutil.which(own or "")
        return own if usable and own else MPI_OWN
    return spec.launcher



def launcher_for(mpi: MpiInstall | None, spec: LaunchSpec) -> Launcher:
    """The registered launcher for this spec's ``--launcher`` choice and this MPI (None: a launcher
    that starts any program)."""
    choice = resolve_launcher(spec)
    for launcher in REGISTRY.values():
        if launcher.serves == choice and (not launcher.mpi or (mpi is not None and mpi.name in launcher.mpi)):
            return launcher
    what = mpi.name if mpi is not None else "a program without its MPI"
    raise UsageError(f"no launcher for {what} with --launcher {choice}", "use --launcher auto")


def needs_mpi(choice: str) -> bool:
    """Whether the launchers serving ``choice`` are the MPI's own (the MPI must be found first to
    pick one: mpirun for Open MPI, mpiexec for MPICH), as opposed to one that starts any program."""
    return any(launcher.mpi for launcher in REGISTRY.values() if launcher.serves == choice)


def build_command(mpi: MpiInstall | None, spec: LaunchSpec, program: Sequence[str], workdir: str | os.PathLike
                  ) -> tuple[list[str], dict[str, str]]:
    """The launcher's argv and the environment changes for running ``program`` as described.

    Files the command needs (hostfile, rankfile) are written into ``workdir``."""
    if spec.transport not in TRANSPORTS:
        raise UsageError(f"--transport {spec.transport!r} is not one of {', '.join(TRANSPORTS)}", "pick one of those")
    if spec.nranks < 1:
        raise UsageError(f"{spec.nranks} ranks is not allowed", "run 1 or more ranks")
    if spec.places is not None and len(spec.places) != spec.nranks:
        raise UsageError(f"placement lists {len(spec.places)} ranks, {spec.nranks} requested", "give one per rank")
    if spec.hosts:
        check_slots(spec.hosts, spec.nranks, spec.oversubscribe)
    if spec.tcp_include:
        check_cidr(spec.tcp_include)
    launcher = launcher_for(mpi, spec)
    if spec.tagged and launcher.tag is None:
        raise UsageError(f"{launcher.name} cannot start one tagged process per node", "use another --launcher")
    if mpi is None and not spec.tagged:
        raise UsageError("an MPI program needs its MPI found first (detect_mpi)", "name it with --mpi")
    wd = Path(workdir)
    env: dict[str, str] = dict(spec.env)
    return launcher.command(mpi, spec, program, wd, env), env


def discover() -> None:
    """Import every launcher module: this package's own (each registers itself on import; a private
    module ``_x`` is a helper, imported by its users) and those named in the :data:`ENTRY_POINTS`
    group. A plug-in that fails to import is left out with a warning, never the whole launch."""
    import_package_modules(__path__, __name__)
    load_entry_points(ENTRY_POINTS, "launcher plug-in")

discover()
