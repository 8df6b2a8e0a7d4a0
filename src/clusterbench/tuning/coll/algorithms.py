"""The MPI's own algorithms for each collective, and how to force one.

* Open MPI: ``ompi_info --param coll tuned --level 9 --parsable`` lists, for each
  ``coll_tuned_<op>_algorithm``, its enumerator (``...:enumerator:value:<id>:<name>``); id 0
  ("ignore") is the MPI's own decision, i.e. the default. Forced with
  ``coll_tuned_use_dynamic_rules 1`` and ``coll_tuned_<op>_algorithm ID`` (here through the
  environment, ``OMPI_MCA_...``, which mpirun passes to every rank).
* MPICH: ``mpivars`` prints every control variable with its description; the description of
  ``MPIR_CVAR_<OP>_INTRA_ALGORITHM`` lists its values (``auto`` is the default), with the
  newlines of the source removed: the names after the first are padded to one width, which
  :func:`parse_mpivars` uses to cut them from the text glued to them. MPICH itself refuses an
  unknown value at MPI_Init ("Invalid MPIR_CVAR_... value"), so a wrong list cannot go unnoticed.

Enumerations are cached per MPI install (the tool's path and modification time) for the process.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any

from clusterbench.errors import EnvironmentProblem, UsageError

#: Open MPI's collective ids (enum COLLTYPE in ompi/mca/coll/base/coll_base_functions.h, 4.1),
#: the first number of a rule in the dynamic rules file
OMPI_COLL_IDS = {"allgather": 0, "allreduce": 2, "alltoall": 3, "barrier": 6, "bcast": 7, "gather": 9,
                 "reduce": 11, "reduce-scatter": 12, "scatter": 15}
DEFAULT_LABEL = "default"

_ENUM = re.compile(r"^mca:coll:tuned:param:coll_tuned_(\w+?)_algorithm:enumerator:value:(\d+):(\S+)\s*$")
_CVAR = re.compile(r"^\s*MPIR_CVAR_(\w+?)_INTRA_ALGORITHM\s*=\s*\S*\s.*?Variable to select \w+ algorithm(.*)$")


@dataclass(frozen=True)
class Algorithm:
    """One algorithm of ``op`` in ``mpi`` (openmpi: ``value`` the integer id; mpich: the CVAR's value)."""

    mpi: str
    op: str
    value: int | str
    name: str

    @property
    def param(self) -> str:
        u = self.op.replace("-", "_")
        return f"coll_tuned_{u}_algorithm" if self.mpi == "openmpi" else f"MPIR_CVAR_{u.upper()}_INTRA_ALGORITHM"

    def env(self) -> dict[str, str]:
        """The environment that forces it (what ``benchmarks.mpi.coll.algorithm_from_env`` reads back)."""
        if self.mpi == "openmpi":
            return {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", f"OMPI_MCA_{self.param}": str(self.value)}
        return {self.param: str(self.value)}

    def record(self) -> dict[str, Any]:
        """The contract's ``params.algorithm`` of a run that forced it."""
        return {"mpi": self.mpi, "param": self.param, "value": self.value}

    @property
    def label(self) -> str:
        return f"{self.value}:{self.name}" if self.mpi == "openmpi" else str(self.value)


def op_from_mpi(word: str) -> str:
    """``reduce_scatter`` / ``REDUCE_SCATTER`` -> ``reduce-scatter`` (the CLI's name)."""
    return word.lower().replace("_", "-")


def parse_ompi_info(text: str) -> dict[str, dict[int, str]]:
    """op -> {id: name} from ``ompi_info --param coll tuned --level 9 --parsable``; id 0 (ignore:
    Open MPI's own decision) is left out."""
    out: dict[str, dict[int, str]] = {}
    for line in text.splitlines():
        m = _ENUM.match(line)
        if m and int(m.group(2)) != 0:
            out.setdefault(op_from_mpi(m.group(1)), {})[int(m.group(2))] = m.group(3)
    return out


def _values_of(desc: str) -> list[str]:
    """The value names in one glued CVAR description (see the module docstring): ``auto - text``
    first, then names padded to a common width, each glued to the end of the previous text."""
    pieces = re.split(r"( +)- ", desc)  # text, spaces, text, spaces, ...
    texts, gaps = pieces[0::2], [len(s) for s in pieces[1::2]]
    if len(texts) < 2 or not texts[0].endswith("auto"):
        return []
    tails = [re.search(r"[a-z0-9_]*$", t).group(0) for t in texts[1:-1]]  # type: ignore[union-attr]
    if not tails:
        return []
    # the first name after auto follows ')' of auto's text, so it is cut exactly: it fixes the width
    width = len(tails[0]) + gaps[1]
    names = []
    for tail, gap in zip(tails, gaps[1:]):
        n = width - gap
        if n < 1 or n > len(tail):
            return []
        names.append(tail[-n:])
    return names


def parse_mpivars(text: str) -> dict[str, list[str]]:
    """op -> the values of ``MPIR_CVAR_<OP>_INTRA_ALGORITHM`` from MPICH's ``mpivars`` (``auto``,
    the default, left out), for the blocking collectives clusterbench measures."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = _CVAR.match(line)
        if m and op_from_mpi(m.group(1)) in OMPI_COLL_IDS:
            vals = _values_of(m.group(2).strip())
            if vals:
                out[op_from_mpi(m.group(1))] = vals
    return out


_CACHE: dict[tuple[str, float], dict] = {}


def _tool_output(tool: str, args: list[str]) -> tuple[str, str]:
    """(text, cache key) of one enumerating tool, cached by its path and mtime."""
    path = os.path.realpath(tool)
    key = (path + " " + " ".join(args), os.path.getmtime(path))
    if key not in _CACHE:
        try:
            cp = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EnvironmentProblem(f"{tool} could not list the collective algorithms: {exc}") from exc
        _CACHE[key] = {"text": cp.stdout}
    return _CACHE[key]["text"], key[0]


def enumerate_algorithms(mpi: Any, op: str) -> list[Algorithm]:
    """The algorithms ``mpi`` (an ``MpiInstall``) offers for ``op``, default excluded."""
    if mpi.name == "openmpi":
        tool = mpi.ompi_info or os.path.join(os.path.dirname(mpi.mpirun), "ompi_info")
        if not os.path.exists(tool):
            raise EnvironmentProblem(f"ompi_info not found beside {mpi.mpirun}: cannot list coll_tuned's algorithms")
        text, _ = _tool_output(tool, ["--param", "coll", "tuned", "--level", "9", "--parsable"])
        return [Algorithm("openmpi", op, i, n) for i, n in sorted(parse_ompi_info(text).get(op, {}).items())]
    tool = os.path.join(os.path.dirname(os.path.realpath(mpi.mpicc)), "mpivars")
    if not os.path.exists(tool):
        tool = os.path.join(os.path.dirname(mpi.mpirun), "mpivars")
    if not os.path.exists(tool):
        raise EnvironmentProblem(f"mpivars not found beside {mpi.mpirun}: cannot list MPICH's algorithm values")
    text, _ = _tool_output(tool, [])
    return [Algorithm("mpich", op, v, v) for v in parse_mpivars(text).get(op, [])]


def select(available: list[Algorithm], wanted: list[str] | None, mpi_label: str, op: str) -> list[Algorithm]:
    """The candidates: every available algorithm, or those ``wanted`` (ids or names); one the MPI
    lacks is a UsageError naming what it has."""
    if not available:
        raise UsageError(f"{mpi_label} offers no algorithm choice for {op}", "tune another op or another --mpi")
    if not wanted:
        return list(available)
    out = []
    for w in wanted:
        hit = [a for a in available if str(a.value) == str(w).strip() or a.name == str(w).strip()]
        if not hit:
            have = ", ".join(a.label for a in available)
            raise UsageError(f"{mpi_label} has no {op} algorithm {w!r}", f"choose from: {have}")
        if hit[0] not in out:
            out.append(hit[0])
    return out


__all__ = ["Algorithm", "OMPI_COLL_IDS", "DEFAULT_LABEL", "enumerate_algorithms", "parse_mpivars", "parse_ompi_info",
           "select", "op_from_mpi"]
