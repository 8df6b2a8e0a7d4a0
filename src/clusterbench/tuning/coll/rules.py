"""The files the MPI reads: Open MPI's dynamic rules file and an environment file of MPICH CVARs.

Open MPI 4.1's classic rules file (``coll_tuned_dynamic_rules_filename``, read by
ompi/mca/coll/tuned/coll_tuned_dynamic_file.c; numbers only, anything else between them skipped,
so ``#`` comments are allowed)::

    1             number of collectives
    2             collective id (OMPI_COLL_IDS: 2 = allreduce)
    1             number of communicator sizes
    4             communicator size (the rules apply to this size and larger, up to the next one)
    3             number of message sizes
    0 4 0 0       message size (bytes, Open MPI's count: dtype size x count, x comm size for the
    8192 3 0 0    per-rank-block ops), algorithm (0: Open MPI's own decision), fan in/out, segment size

A message-size line applies from its size up to the next line's. MPICH's CVARs have no per-size
form: the environment file sets one ``MPIR_CVAR_<OP>_INTRA_ALGORITHM`` for every size (used where
MPICH's per-size selection file, :mod:`.mpich_tree`, cannot be built).
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from clusterbench.errors import UsageError
from clusterbench.tuning.coll.algorithms import OMPI_COLL_IDS


@dataclass(frozen=True)
class MsgRule:
    """From ``msg_size`` bytes (Open MPI's count) up to the next rule: ``algorithm`` (0 = default)."""

    msg_size: int
    algorithm: int
    faninout: int = 0
    segsize: int = 0


def format_ompi_rules(op: str, comm_size: int, rules: Sequence[MsgRule], comment: str = "") -> str:
    """The text of a rules file for one collective and one communicator size."""
    if op not in OMPI_COLL_IDS:
        raise UsageError(f"unknown collective '{op}'", f"choose one of: {', '.join(OMPI_COLL_IDS)}")
    rules = sorted(rules, key=lambda r: r.msg_size)
    if not rules or rules[0].msg_size != 0:
        raise ValueError("the first message-size rule must start at 0 B")
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    lines = ["1 # collectives", f"{OMPI_COLL_IDS[op]} # {op}", "1 # communicator sizes",
             f"{comm_size} # communicator size", f"{len(rules)} # message sizes"]
    lines += [f"{r.msg_size} {r.algorithm} {r.faninout} {r.segsize}" for r in rules]
    return head + "\n".join(lines) + "\n"


def parse_ompi_rules(text: str) -> dict[str, dict[int, list[MsgRule]]]:
    """op -> comm size -> rules, from a rules file as Open MPI reads it (numbers; '#' to line end
    skipped); a truncated file is a ValueError."""
    ids = {v: k for k, v in OMPI_COLL_IDS.items()}
    nums = [int(x) for x in re.findall(r"-?\d+", re.sub(r"#[^\n]*", "", text))]
    it = iter(nums)
    out: dict[str, dict[int, list[MsgRule]]] = {}
    try:
        for _ in range(next(it)):
            cid = next(it)
            op = ids.get(cid, str(cid))
            for _ in range(next(it)):
                comm = next(it)
                out.setdefault(op, {})[comm] = [MsgRule(next(it), next(it), next(it), next(it))
                                                for _ in range(next(it))]
    except StopIteration:
        raise ValueError("the rules file ends early") from None
    return out


def format_mpich_env(param: str, value: str, comment: str = "") -> str:
    """An environment file (``set -a; . FILE`` or ``env $(cat FILE)``) forcing one CVAR."""
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    return head + f"{param}={value}\n"


def check_writable(path: str) -> str:
    """The absolute path if a file can be written there (checked before anything runs; nothing
    is created); a UsageError otherwise."""
    full = os.path.abspath(os.path.expanduser(path))
    parent = os.path.dirname(full) or "."
    if os.path.isdir(full):
        raise UsageError(f"the output {path} is a directory", "give a file name, e.g. --output allreduce.rules")
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write {path}: {parent} is not a directory", "give a path in an existing directory")
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(full) and not os.access(full, os.W_OK)):
        raise UsageError(f"cannot write {path}: permission denied", "give a path you can write")
    return full


def write_file(path: str, text: str) -> None:
    """Write atomically (a temporary file beside it, renamed): no half-written rules file."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


__all__ = ["MsgRule", "check_writable", "format_mpich_env", "format_ompi_rules", "parse_ompi_rules", "write_file"]
