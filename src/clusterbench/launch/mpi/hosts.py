"""Hosts: ``--hosts node1:4,node2:4`` and Open MPI hostfiles (``name slots=N [max_slots=M]``) as
:class:`Host` lists; a malformed entry is a :class:`UsageError` naming it; :func:`check_slots` refuses
more ranks than slots unless oversubscribing."""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clusterbench.errors import UsageError

@dataclass(frozen=True)
class Host:
    name: str
    slots: int = 1
    max_slots: int | None = None


_HOST_RE = re.compile(r"^[A-Za-z0-9_.\-\[\]:@]+$")


def check_name(name: str, where: str) -> str:
    if not name or not _HOST_RE.match(name):
        from clusterbench.files import printable

        raise UsageError(f"{where}: '{printable(name)}' is not a host name", "use names like node1 or node1.cluster")
    return name


def _merge(hosts: list[Host]) -> list[Host]:
    """Open MPI adds up the slots of a host named twice."""
    out: dict[str, Host] = {}
    for h in hosts:
        if h.name in out:
            o = out[h.name]
            mx = None if o.max_slots is None or h.max_slots is None else o.max_slots + h.max_slots
            out[h.name] = Host(h.name, o.slots + h.slots, mx)
        else:
            out[h.name] = h
    return list(out.values())


def _entries(spec: str | None, option: str = "--hosts") -> list[Host]:
    """The entries of ``node1:4,node2`` in order, unmerged: the one parser of a host list on the
    command line (a malformed entry, a slot count that is not a positive integer or an empty list is
    a :class:`UsageError`, exit 2, before any host is contacted)."""
    if spec is None or not spec.strip():
        raise UsageError(f"{option} is empty", "give hosts like node1:4,node2:4")
    hosts = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            raise UsageError(f"{option} '{spec}' has an empty entry", "give hosts like node1:4,node2:4")
        name, sep, count = item.rpartition(":") if ":" in item else (item, "", "")
        if not sep:
            hosts.append(Host(check_name(item, f"{option} entry '{item}'"), 1))
            continue
        if not count.isdigit() or int(count) < 1:
            raise UsageError(f"{option} entry '{item}': slot count '{count}' is not a positive integer",
                             "write host:N with N >= 1, e.g. node1:4")
        hosts.append(Host(check_name(name, f"{option} entry '{item}'"), int(count)))
    return hosts


def parse_hosts(spec: str) -> list[Host]:
    """``node1:4,node2:4`` (a host without ``:N`` has 1 slot, as with mpirun --host); a host named
    twice has the slots of both, as Open MPI counts them."""
    return _merge(_entries(spec))


def host_names(spec: str | None, option: str = "--hosts") -> list[str]:
    """The host names of a ``--hosts`` list, in order, duplicates kept (callers that run one thing
    per node refuse them), parsed and checked as :func:`parse_hosts` does (slots are ignored)."""
    return [h.name for h in _entries(spec, option)]


def parse_hostfile(path: str | os.PathLike) -> list[Host]:
    """An Open MPI hostfile: ``name [slots=N] [max_slots=M]`` per line, ``#`` comments."""
    from clusterbench.files import printable, read_text

    p = Path(path)
    text = read_text(p, "hostfile", fix="pass a text file with one 'host [slots=N]' per line")
    hosts = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"hostfile {p.name} line {lineno} '{printable(raw.strip())}'"
        toks = line.split()
        name = check_name(toks[0], where)
        if "=" in name:
            raise UsageError(f"{where}: the line must start with a host name", "write: node1 slots=4")
        slots, max_slots = 1, None
        for tok in toks[1:]:
            key, eq, val = tok.partition("=")
            key = key.lower().replace("-", "_")
            if not eq or key not in ("slots", "max_slots", "count", "cpu"):
                raise UsageError(f"{where}: unknown attribute '{tok}'", "use slots=N and max_slots=M")
            if not val.isdigit() or int(val) < 1:
                raise UsageError(f"{where}: {key}='{val}' is not a positive integer", "use slots=N with N >= 1")
            if key == "max_slots":
                max_slots = int(val)
            else:
                slots = int(val)
        if max_slots is not None and max_slots < slots:
            raise UsageError(f"{where}: max_slots {max_slots} is below slots {slots}", "raise max_slots")
        hosts.append(Host(name, slots, max_slots))
    if not hosts:
        raise UsageError(f"hostfile {p} lists no hosts", "write one host per line: node1 slots=4")
    return _merge(hosts)


def hostfile_repeats(path: str | os.PathLike) -> dict[str, list[int]]:
    """Host names a hostfile lists on more than one line -> those line numbers (Open MPI adds their
    slots up, which is rarely what was meant: preflight names them)."""
    from clusterbench.files import read_text

    seen: dict[str, list[int]] = {}
    for lineno, raw in enumerate(read_text(path, "hostfile").splitlines(), 1):
        toks = raw.split("#", 1)[0].split()
        if toks:
            seen.setdefault(toks[0], []).append(lineno)
    return {h: lines for h, lines in seen.items() if len(lines) > 1}


def check_slots(hosts: Sequence[Host], nranks: int, oversubscribe: bool = False) -> None:
    total = sum(h.slots for h in hosts)
    if nranks > total and not oversubscribe:
        raise UsageError(f"{nranks} ranks need more than the {total} slots of "
                         f"{', '.join(f'{h.name}:{h.slots}' for h in hosts)}",
                         "add hosts or slots, run fewer ranks, or add --oversubscribe")
    if all(h.max_slots is not None for h in hosts):
        cap = sum(h.max_slots or 0 for h in hosts)
        if nranks > cap:
            raise UsageError(f"{nranks} ranks exceed the hostfile's max_slots total {cap}",
                             "raise max_slots or run fewer ranks")
