"""MPICH's per-size tuning file: its own default selection tree with one collective's branch replaced.

MPICH (4.x) reads a JSON selection tree from ``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``: nested
conditions (``collective=allreduce`` / ``comm_type=intra`` / ``comm_size<8`` / ``avg_msg_size<=8192``
/ ... / ``=any``, tried in the file's order, ``=any`` last) ending in ``algorithm=MPIR_<Op>_intra_<name>``.
A file given **replaces the whole built-in tree**, every collective's (MPICH 4.0 asserts in mpir_coll.c
when a collective finds no match), so the file written here is the library's own default tree with
only the tuned collective's ``comm_type=intra`` branch replaced:

* each size range the tuner kept, as ``avg_msg_size<=N`` (``N`` the byte count before the next range
  starts: a range applies from its first measured size up to the next one's, as in Open MPI's rules
  file), leading to ``algorithm=MPIR_<Op>_intra_<name>``;
* sizes below the smallest measured, above the largest (the last key, ``avg_msg_size=any``) and the
  ranges where the default won lead to the library's **own** intra branch, unchanged, so MPICH decides
  there exactly as without the file;
* a tuned algorithm is guarded (:data:`GUARDS`) by the conditions the tuner measured and the
  algorithm needs (reductions: a built-in commutative op; Rabenseifner's: ``count`` at least the
  power of two below the communicator size; ``smp``: ``comm_hierarchy=parent``), the library's own
  branch where they fail: MPICH runs a tree's algorithm without the fallback checks a CVAR gets.

The default tree is not shipped as a file: it is a JSON string compiled into libmpich (Debian's
4.0.2 has three, the ch4 POSIX one, the ch4 compositions and the MPIR-level one; the last is the one
whose algorithms are ``MPIR_*_intra_*``). :func:`find_default_tree` parses every candidate string of
the library's bytes and takes that one; a library without it gives None and the tuner keeps the one
CVAR for all sizes. MPICH computes ``avg_msg_size`` (src/mpi/coll/src/csel.c) only for allreduce,
bcast and reduce (type size x count: OSU's size) and alltoall (the per-rank block: OSU's size too),
so only those ops get a per-size file (:data:`SIZE_KEY`).
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: the tree key MPICH compares each op's size with, and which OSU size it equals (OSU's size of
#: these ops is MPICH's avg_msg_size); ops not here keep one CVAR for all sizes
SIZE_KEY = {"allreduce": "avg_msg_size", "bcast": "avg_msg_size", "reduce": "avg_msg_size",
            "alltoall": "avg_msg_size"}
#: conditions a tuned algorithm is guarded by, the library's own branch where they fail: what the
#: tuner measured (MPI_SUM on doubles: a built-in, commutative op) and what the algorithm needs
#: (Rabenseifner's needs count >= the power of two below the communicator size, as MPICH's own
#: tree and its CVAR fallback check say; smp a node-aware communicator)
GUARDS: dict[str, tuple[str, ...]] = {"allreduce": ("is_commutative", "is_op_built_in"),
                                      "reduce": ("is_commutative", "is_op_built_in")}
NEEDS_POW2_COUNT = {("allreduce", "reduce_scatter_allgather"), ("reduce", "reduce_scatter_gather")}
#: the environment variable that makes MPICH read the file
ENV = "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE"
#: where an MPI install keeps its libraries when ``mpicc -show`` names no -L directory
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")

_START = re.compile(rb'\{"collective=')


def mpich_name(op: str) -> str:
    """``reduce-scatter`` -> ``Reduce_scatter`` (the capitalisation of MPICH's function names)."""
    return op.replace("-", "_").capitalize()


def tree_algorithm(op: str, value: str) -> str:
    """The tree's spelling of a CVAR value: ``recursive_doubling`` -> ``MPIR_Allreduce_intra_recursive_doubling``
    (``nb``, the blocking op through its non-blocking schedule, is ``MPIR_Allreduce_allcomm_nb``)."""
    return f"MPIR_{mpich_name(op)}_{'allcomm' if value == 'nb' else 'intra'}_{value}"


def _algorithms(tree: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(tree, dict):
        for k, v in tree.items():
            if k.startswith("algorithm="):
                out.add(k[len("algorithm="):])
            out |= _algorithms(v)
    return out


def candidate_trees(data: bytes) -> list[dict]:
    """Every JSON object in ``data`` (a library's bytes) starting ``{"collective=`` and ending at a NUL."""
    out = []
    for m in _START.finditer(data):
        end = data.find(b"\0", m.start())
        try:
            doc = json.loads(data[m.start():end if end >= 0 else len(data)].decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def is_mpir_tree(tree: Mapping[str, Any]) -> bool:
    """The MPIR-level tree: every algorithm an ``MPIR_...`` one, allreduce's ``MPIR_Allreduce_intra_...``."""
    algs = _algorithms(tree)
    return "collective=allreduce" in tree and all(a.startswith("MPIR_") for a in algs) and any(
        a.startswith("MPIR_Allreduce_intra_") for a in algs)


def find_default_tree(data: bytes) -> dict | None:
    """MPICH's MPIR-level default selection tree in a library's bytes, or None."""
    trees = [t for t in candidate_trees(data) if is_mpir_tree(t)]
    return max(trees, key=len) if trees else None


def library_path(mpicc: str) -> str | None:
    """The libmpich the wrapper ``mpicc`` links (its ``-show``: -L directories, -l names), or None."""
    try:
        cp = subprocess.run([mpicc, "-show"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = shlex.split(cp.stdout)
    dirs = [w[2:] for w in words if w.startswith("-L")] + list(LIB_DIRS)
    names = [w[2:] for w in words if w.startswith("-l") and "mpi" in w] or ["mpich"]
    for name in names:
        for d in dirs:
            for f in (f"lib{name}.so", *sorted(os.listdir(d) if os.path.isdir(d) else [], reverse=True)):
                path = os.path.join(d, f)
                if (f == f"lib{name}.so" or f.startswith(f"lib{name}.so.")) and os.path.isfile(path):
                    return os.path.realpath(path)
    return None


_CACHE: dict[tuple[str, float], tuple[dict | None, frozenset]] = {}


def read_library(path: str) -> tuple[dict | None, frozenset]:
    """(the default tree or None, every ``MPIR_<Op>_intra|allcomm_*`` name in the library) of one library file,
    cached by path and modification time."""
    key = (path, os.path.getmtime(path))
    if key not in _CACHE:
        with open(path, "rb") as fh:
            data = fh.read()
        names = frozenset(m.decode() for m in re.findall(rb"MPIR_[A-Z][a-z_]*?_(?:intra|allcomm)_[a-z0-9_]+", data))
        _CACHE[key] = (find_default_tree(data), names)
    return _CACHE[key]


def known_algorithm(op: str, value: str, tree: Mapping[str, Any], names: frozenset = frozenset()) -> bool:
    """The tree spelling of ``value`` is in the default tree or among the library's names."""
    name = tree_algorithm(op, value)
    return name in _algorithms(tree) or name in names


def tuned_tree(default: Mapping[str, Any], op: str, ranges: Sequence[tuple[int, int, str | None]],
               names: frozenset = frozenset()) -> dict:
    """``default`` with ``op``'s ``comm_type=intra`` branch replaced by ``ranges``: (first size,
    last size, CVAR value or None for the library's own choice), sizes ascending, in OSU's
    convention (= MPICH's avg_msg_size for :data:`SIZE_KEY`'s ops). A value MPICH's tree cannot
    name, an op without a size key or without an intra branch is a ValueError."""
    if op not in SIZE_KEY:
        raise ValueError(f"MPICH's selection tree has no per-size key for {op}")
    coll = f"collective={op.replace('-', '_')}"
    own = (default.get(coll) or {}).get("comm_type=intra")
    if not isinstance(own, dict):
        raise ValueError(f"the default tree has no {coll} / comm_type=intra branch")
    key = SIZE_KEY[op]
    ranges = sorted(ranges)
    branch: dict[str, Any] = {}

    def put(upto: int | None, value: str | None) -> None:
        if value is None:
            leaf: Any = own
        else:
            if not known_algorithm(op, value, default, names):
                raise ValueError(f"MPICH's library names no {tree_algorithm(op, value)}: cannot write {value!r}")
            leaf = {f"algorithm={tree_algorithm(op, value)}": {}}
            if (op, value) in NEEDS_POW2_COUNT:
                leaf = {"count<pow2": own, "count=any": leaf}
            if value == "smp":
                leaf = {"comm_hierarchy=parent": leaf, "comm_hierarchy=any": own}
            for cond in reversed(GUARDS.get(op, ())):
                leaf = {f"{cond}=yes": leaf, f"{cond}=no": own}
        k = f"{key}=any" if upto is None else f"{key}<={upto}"
        branch[k] = leaf

    steps: list[tuple[int, str | None]] = []  # (from size, value), merged where equal
    for lo, _hi, value in ranges:
        if not steps or steps[-1][1] != value:
            steps.append((lo, value))
    if steps and steps[0][1] is not None and steps[0][0] > 0:
        put(steps[0][0] - 1, None)  # below the smallest size measured: the library's own choice
    for i, (lo, value) in enumerate(steps):
        if i + 1 < len(steps):
            put(steps[i + 1][0] - 1, value)
        elif value is not None:
            put(ranges[-1][1], value)
    put(None, None)  # above the largest size measured (and the default's last range): the library's own
    out = dict(default)
    out[coll] = {**default[coll], "comm_type=intra": branch}
    return out


def format_tree(tree: Mapping[str, Any]) -> str:
    """The file's text (JSON: no comment can go in; MPICH takes every key as a condition)."""
    return json.dumps(tree, indent=1) + "\n"


def parse_branch(tree: Mapping[str, Any], op: str) -> list[tuple[int | None, Any]]:
    """(upper bound or None for ``=any``, leaf) of ``op``'s intra branch, in order."""
    branch = tree[f"collective={op.replace('-', '_')}"]["comm_type=intra"]
    out = []
    for k, v in branch.items():
        m = re.match(r"\w+<=(\d+)$", k)
        out.append((int(m.group(1)) if m else None, v))
    return out


@dataclass(frozen=True)
class LibraryTree:
    """The default tree of one MPICH library (``names``: the algorithm names its bytes hold)."""

    library: str
    tree: dict
    names: frozenset

    def knows(self, op: str, value: str) -> bool:
        return known_algorithm(op, value, self.tree, self.names)

    def text(self, op: str, ranges: Sequence[tuple[int, int, str | None]]) -> str:
        return format_tree(tuned_tree(self.tree, op, ranges, self.names))


def default_for(mpicc: str, op: str) -> tuple[LibraryTree | None, str]:
    """The tree of the MPICH that ``mpicc`` links, for per-size tuning of ``op``, or (None, why in one line)."""
    if op not in SIZE_KEY:
        return None, (f"MPICH's selection tree compares no message size for {op} (avg_msg_size is defined for "
                      f"{', '.join(SIZE_KEY)} only): one CVAR for all sizes")
    lib = library_path(mpicc)
    if lib is None:
        return None, f"libmpich not found from '{mpicc} -show': one CVAR for all sizes"
    try:
        tree, names = read_library(lib)
    except OSError as exc:
        return None, f"cannot read {lib} ({exc.strerror}): one CVAR for all sizes"
    if tree is None:
        return None, f"no default collective selection tree found in {lib}: one CVAR for all sizes"
    if not isinstance(tree.get(f"collective={op.replace('-', '_')}", {}).get("comm_type=intra"), dict):
        return None, f"the default selection tree in {lib} has no intra branch for {op}: one CVAR for all sizes"
    return LibraryTree(lib, tree, names), f"per-size selection file built on the default tree in {lib}"


__all__ = ["ENV", "GUARDS", "SIZE_KEY", "LibraryTree", "candidate_trees", "default_for", "find_default_tree",
           "format_tree", "is_mpir_tree", "known_algorithm", "library_path", "mpich_name", "parse_branch",
           "read_library", "tree_algorithm", "tuned_tree"]
