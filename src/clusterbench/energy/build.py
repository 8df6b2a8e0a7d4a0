"""The run's meter from ``--power`` specs and ``--watts``: which node gets which source (exactly one
each), refused in one line otherwise; the meter kinds' registry (:data:`SOURCES`)."""
from __future__ import annotations

import socket
from typing import Callable, Sequence

from clusterbench.energy.command import CommandSource
from clusterbench.energy.csvlog import CsvSource
from clusterbench.energy.declared import ConstantSource
from clusterbench.energy.ipmi import IpmiSource
from clusterbench.energy.meter import Meter
from clusterbench.energy.pmic import PmicSource
from clusterbench.energy.rapl import RaplSource
from clusterbench.energy.source import Source
from clusterbench.energy.spec import (CLUSTER, DEFAULT_INTERVAL, THIS_MACHINE, Spec, check_interval, check_watts,
                                      parse_spec)
from clusterbench.errors import UsageError


def this_host() -> str:
    return socket.gethostname()


#: the meter kinds: kind -> its source from (spec, label, covers, node, root); ``label`` names it in the
#: figures, ``covers`` the run's nodes it measures, ``node`` the name ``{node}`` stands for, ``root`` the
#: filesystem RAPL is read under
SOURCES: dict[str, Callable[[Spec, str, Sequence[str], str, str], Source]] = {
    "watts": lambda spec, label, covers, node, root: ConstantSource(label, covers, spec),
    "rapl": lambda spec, label, covers, node, root: RaplSource(label, covers, spec, root=root),
    "ipmi": lambda spec, label, covers, node, root: IpmiSource(label, covers, spec),
    "pmic": lambda spec, label, covers, node, root: PmicSource(label, covers, spec),
    "cmd": lambda spec, label, covers, node, root: CommandSource(label, covers, spec, node),
    "csv": lambda spec, label, covers, node, root: CsvSource(label, covers, spec, node),
}


def _make(spec: Spec, label: str, covers: Sequence[str], node: str, root: str) -> Source:
    return SOURCES[spec.kind](spec, label, covers, node, root)


def _remote_refusal(spec: Spec, node: str) -> UsageError:
    return UsageError(f"--power {spec.text}: {spec.kind} reads only the machine clusterbench runs on "
                      f"({this_host()}), and {node} is another node",
                      f"give {node} a source that works from here: --power {node}=cmd:COMMAND, "
                      f"{node}=csv:FILE or {node}=watts:W")


def build_meter(specs: Sequence[str], watts: float | None = None, nodes: Sequence[str] = (),
                local: Sequence[str] = (), virtual: bool = False, interval: float | None = None,
                root: str = "/") -> "Meter":
    """The run's meter from ``--power`` specs and ``--watts``; ``nodes``: the run's nodes (empty: this
    node only); ``local``: those that are this machine; ``virtual``: they are the virtual cluster's
    (namespaces of this machine). Every node gets exactly one source; anything else is a one-line
    UsageError naming the fix."""
    parsed = [parse_spec(s) for s in specs]
    if watts is not None:
        w = check_watts(watts)
        parsed.append(Spec(None, "watts", f"{w:g}", f"--watts {w:g}"))
    if interval is not None:
        interval = check_interval(interval)
    me = this_host()
    run_nodes = list(nodes) or [me]
    local_set = set(local) | ({me} if not nodes else set())
    aliases = {"localhost": me, "local": me, me: me}
    bare = [s for s in parsed if s.node is None]
    if len(bare) > 1:
        raise UsageError(f"two power sources for every node ({bare[0].text!r} and {bare[1].text!r})",
                         "give one bare source (or --watts), and NODE=SPEC for the nodes that differ")
    per: dict[str, Spec] = {}
    whole: Spec | None = None
    for s in parsed:
        if s.node is None:
            continue
        if s.node == CLUSTER:
            whole = s
            continue
        node = s.node if s.node in run_nodes else aliases.get(s.node, s.node) if not nodes else s.node
        if node not in run_nodes:
            raise UsageError(f"--power {s.text}: {s.node} is not a node of this run ({', '.join(run_nodes)})",
                             "name one of the run's nodes (or 'cluster' for one meter of them all)")
        if node in per:
            raise UsageError(f"two power sources for {node} ({per[node].text!r} and {s.text!r})",
                             "give each node one source")
        per[node] = s
    sources: list[Source] = []
    if whole is not None:
        if per or bare:
            raise UsageError(f"--power {whole.text} meters every node together, and other sources were given too",
                             "give either one cluster= meter or a source per node, not both (it would count twice)")
        if whole.kind in THIS_MACHINE and not set(run_nodes) <= local_set:
            raise _remote_refusal(whole, next(n for n in run_nodes if n not in local_set))
        sources.append(_make(whole, CLUSTER, run_nodes, CLUSTER, root))
    else:
        rest = [n for n in run_nodes if n not in per]
        for node, s in per.items():
            if s.kind in THIS_MACHINE:
                if node not in local_set:
                    raise _remote_refusal(s, node)
                if virtual:
                    raise UsageError(f"--power {s.text}: the virtual cluster's nodes share this machine, whose "
                                     f"{s.kind} reading is all of them together",
                                     f"give {s.kind} once for all of them: a bare --power {s.kind}")
            sources.append(_make(s, node, [node], node, root))
        if rest and not bare:
            raise UsageError(f"no power source for {', '.join(rest)}",
                             f"add --power {rest[0]}=SPEC, or one bare --power SPEC / --watts W for every node")
        if rest and bare:
            b = bare[0]
            if b.kind in THIS_MACHINE:
                remote = [n for n in rest if n not in local_set]
                if remote:
                    raise _remote_refusal(b, remote[0])
                if per and virtual:
                    raise UsageError(f"--power {b.text} reads this machine, which hosts every virtual node, and "
                                     f"{', '.join(per)} have sources of their own", "it would count twice: give "
                                     "the virtual cluster one source")
                sources.append(_make(b, me, rest, me, root))
            else:
                sources.extend(_make(b, n, [n], n, root) for n in rest)
    for src in sources:
        if src.live:
            src.interval = interval or DEFAULT_INTERVAL[src.kind]
    return Meter(sources, nodes=run_nodes)
