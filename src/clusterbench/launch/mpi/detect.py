"""Which MPI: find Open MPI (``mpirun``/``ompi_info``) or MPICH (``mpiexec``, Hydra), its version,
its own ``mpicc`` and ``mpi.h``; a missing piece is one :class:`EnvironmentProblem` naming the
Debian packages."""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from clusterbench.errors import EnvironmentProblem
from clusterbench import process

INSTALL_FIX = "install Open MPI (apt-get install openmpi-bin libopenmpi-dev) or load an MPI module"


@dataclass(frozen=True)
class MpiInstall:
    """An MPI: ``name`` is ``openmpi`` or ``mpich``; ``device`` is MPICH's (``ch4:ucx``, ``ch4:ofi``,
    ``ch3:nemesis``; None when unknown or Open MPI)."""

    name: str
    version: str
    mpirun: str
    mpicc: str
    ompi_info: str | None = None
    device: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def has_ucx(self) -> bool:
        """Open MPI was built with the UCX pml (``ompi_info`` lists ``MCA pml: ucx``)."""
        return bool(self.ompi_info) and "ucx" in _ompi_components(self.ompi_info, "pml")


def run_text(cmd: Sequence[str], timeout: float = 20) -> str:
    try:
        out = process.run(list(cmd), timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"'{' '.join(cmd)}' does not run ({exc})", INSTALL_FIX) from exc
    return (out.stdout or "") + (out.stderr or "")


@functools.lru_cache(maxsize=8)
def _ompi_components(ompi_info: str, framework: str) -> tuple[str, ...]:
    text = run_text([ompi_info, "--parsable"], timeout=60)
    found = []
    for line in text.splitlines():  # mca:pml:ucx:version:...
        parts = line.split(":")
        if len(parts) > 3 and parts[0] == "mca" and parts[1] == framework and parts[2] not in found:
            found.append(parts[2])
    return tuple(found)


#: ``--mpi`` choices besides a path; the launcher and wrapper names tried for each, most specific
#: first (Debian installs both MPIs side by side as ``mpirun.openmpi`` and ``mpiexec.mpich``).
MPI_KINDS = ("openmpi", "mpich")
_LAUNCHERS = {"openmpi": ("mpirun.openmpi", "mpirun", "mpiexec"),
              "mpich": ("mpiexec.mpich", "mpiexec.hydra", "mpiexec", "mpirun")}
_PACKAGES = {"openmpi": "openmpi-bin libopenmpi-dev", "mpich": "mpich libmpich-dev"}
_LABEL = {"openmpi": "Open MPI", "mpich": "MPICH"}


def _identify(launcher: str) -> tuple[str, str] | None:
    """(kind, version) from ``launcher --version``, None if it is neither Open MPI nor MPICH."""
    text = run_text([launcher, "--version"])
    if "Open MPI" in text or "OpenRTE" in text:
        m = re.search(r"\((?:Open MPI|OpenRTE)\)\s+(\S+)", text)
        return "openmpi", m.group(1) if m else "unknown"
    if "HYDRA" in text.upper() or "MPICH" in text.upper():
        m = re.search(r"Version:\s+(\S+)", text)
        return "mpich", m.group(1) if m else "unknown"
    return None


def _find_launcher(kind: str, path: str | None) -> tuple[str, str]:
    """The first launcher on ``path`` that is the ``kind`` of MPI asked for, and its version."""
    tried = []
    for name in _LAUNCHERS[kind]:
        found = shutil.which(name, path=path)
        if not found or os.path.realpath(found) in tried:
            continue
        tried.append(os.path.realpath(found))
        ident = _identify(found)
        if ident and ident[0] == kind:
            return found, ident[1]
    raise EnvironmentProblem(f"no {_LABEL[kind]} launcher ({' or '.join(_LAUNCHERS[kind][:2])}) found on PATH",
                             f"install it (apt-get install {_PACKAGES[kind]}) or load an {_LABEL[kind]} module")


def _launcher_at(where: str) -> str:
    """``--mpi PATH``: a launcher, or a directory holding mpiexec or mpirun."""
    p = Path(where)
    if p.is_dir():
        for name in ("mpiexec", "mpirun"):
            if os.access(p / name, os.X_OK):
                return str(p / name)
        raise EnvironmentProblem(f"--mpi {where}: no mpiexec or mpirun in that directory",
                                 "give the launcher's path, or openmpi or mpich")
    if not p.is_file() or not os.access(p, os.X_OK):
        raise EnvironmentProblem(f"--mpi {where}: no such MPI launcher",
                                 "give the path of an mpiexec or mpirun, or openmpi or mpich")
    return str(p)


def _find_mpicc(kind: str, launcher: str, path: str | None) -> str:
    """The wrapper of the same MPI: beside the launcher with the same suffix (``mpiexec.mpich`` ->
    ``mpicc.mpich``), else ``mpicc`` beside it, else on PATH; one that belongs to the other MPI
    (``mpicc -show`` names it) is not taken."""
    base = os.path.basename(launcher)
    suffix = base.split(".", 1)[1] if "." in base else ""
    here = os.path.dirname(launcher)
    names = ([f"mpicc.{suffix}"] if suffix else []) + ["mpicc"]
    other = "mpich" if kind == "openmpi" else "openmpi"
    for cand in [shutil.which(n, path=here) for n in names] + [shutil.which(n, path=path) for n in names]:
        if cand and other not in run_text([cand, "-show"]).lower():
            return cand
    raise EnvironmentProblem(f"no {_LABEL[kind]} compiler wrapper ({' or '.join(names)}) found beside {launcher}",
                             f"install it (apt-get install {_PACKAGES[kind].split()[-1]}) or load an MPI module")


def _check_header(kind: str, mpicc: str) -> None:
    if kind == "openmpi":
        incdirs = run_text([mpicc, "-showme:incdirs"]).split()
    else:
        incdirs = [t[2:] for t in run_text([mpicc, "-show"]).split() if t.startswith("-I")]
    if incdirs and not any(Path(d, "mpi.h").is_file() for d in incdirs):
        raise EnvironmentProblem(f"{mpicc} is there but the MPI header mpi.h is missing",
                                 f"install it (apt-get install {_PACKAGES[kind].split()[-1]})")


def _mpich_device(launcher: str, path: str | None) -> str | None:
    """MPICH's device (``ch4:ucx``...) from ``mpichversion`` beside the launcher, None if unknown."""
    tool = shutil.which("mpichversion", path=os.path.dirname(launcher)) or shutil.which("mpichversion", path=path)
    if not tool:
        return None
    m = re.search(r"MPICH Device:\s+(\S+)", run_text([tool]))
    return m.group(1) if m else None


def detect_mpi(path: str | None = None, kind: str | None = None) -> MpiInstall:
    """Find an MPI: launcher, version and its own ``mpicc``.

    ``kind``: None (the ``mpirun``/``mpiexec`` first on ``path``, default ``$PATH``),
    ``openmpi`` or ``mpich`` (that MPI even when the other is the default, e.g. Debian's
    ``mpiexec.mpich``), or the path of a launcher or of its directory. Raises
    EnvironmentProblem (one line, naming the Debian package) when the launcher, the compiler
    wrapper or the MPI header is missing."""
    if kind in MPI_KINDS:
        launcher, version = _find_launcher(kind, path)
        name = kind
    else:
        if kind:
            launcher = _launcher_at(kind)
        else:
            found = shutil.which("mpirun", path=path) or shutil.which("mpiexec", path=path)
            if not found:
                raise EnvironmentProblem("no MPI launcher (mpirun or mpiexec) found on PATH", INSTALL_FIX)
            launcher = found
        ident = _identify(launcher)
        if ident is None:
            raise EnvironmentProblem(f"{launcher} is neither Open MPI nor MPICH",
                                     "put Open MPI's or MPICH's launcher first on PATH, or pass --mpi")
        name, version = ident
    mpicc = _find_mpicc(name, launcher, path)
    _check_header(name, mpicc)
    if name == "openmpi":
        return MpiInstall(name, version, launcher, mpicc, shutil.which("ompi_info", path=os.path.dirname(launcher)))
    return MpiInstall(name, version, launcher, mpicc, None, _mpich_device(launcher, path))
