"""What a doctor rule is, and the helpers its check uses to read evidence (pure, no I/O).

A rule is one :class:`Rule` declared in one file of :mod:`clusterbench.doctor.rules`: which evidence
it reads, its check, why it matters (public sources cited by name), the figures it bears on, the fix
and its undo, the benchmark that verifies the fix, and whether the fix needs a reboot. Its ``check``
looks at one node's evidence (``scope="node"``) or at every node's (``scope="cluster"``) and returns

* ``None``: the rule passed;
* a :class:`Hit` (or a list of them, e.g. one per NIC): a finding, with the evidence shown (value
  and source) and the fix and undo as commands built from the values read, so the undo restores
  exactly what was there; ``apply`` holds the shell commands ``doctor --fix`` may run, per node
  (``None`` for the node the finding is about), when the fix is a setting that can be changed and
  changed back at run time. A fix that is advice (a reboot, a kernel, cooling, another host) has
  no ``apply``: it is printed, never run;
* :class:`CannotTell`: the evidence could not be read (or needs load, or more nodes), with why.
  A rule is never silently "ok" when it could not look.

The evidence document is :func:`clusterbench.doctor.evidence.gather`'s: ``{"items": {key: item},
"nics": {ifname: {key: item}}}``, each item ``{"value", "source", "readable", "why"}``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence


@dataclass(frozen=True)
class CannotTell:
    why: str


@dataclass
class Hit:
    """A rule fired: ``summary`` in one sentence, the evidence shown, the fix and its undo."""
    summary: str
    evidence: list[dict[str, Any]]
    fix: list[str] = field(default_factory=list)
    undo: list[str] = field(default_factory=list)
    severity: str | None = None  # None: the rule's own
    node: str | None = None      # cluster rules: which node(s) the finding is about
    #: what ``doctor --fix`` runs: {node or None (this finding's node): {"do": [sh], "undo": [sh]}}
    apply: dict[str | None, dict[str, list[str]]] | None = None


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    reads: tuple[str, ...]          # evidence keys; ``nic.*.KEY`` for per-NIC ones
    check: Callable[[Any], Any]     # node: evidence -> Hit | [Hit] | CannotTell | None; cluster: {node: evidence} -> same
    why: str                        # why it matters, and to which figures (public sources by name)
    fix: str                        # the fix in words (the finding carries the commands)
    undo: str
    verify: str                     # the benchmark that verifies the fix ({hosts} filled in)
    severity: str = "warn"
    needs_load: bool = False
    needs_reboot: bool = False
    scope: str = "node"
    #: the figures it bears on: {benchmark: (metric, ...)}; what ``sweep node`` offers as a likely
    #: cause of an outlier in that benchmark's figures
    figures: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: where it sits among the rules (the report's order within a severity, the rules list)
    order: int = 1000

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "reads": list(self.reads), "why": self.why, "fix": self.fix,
                "undo": self.undo, "verify": self.verify, "severity": self.severity, "needs_load": self.needs_load,
                "needs_reboot": self.needs_reboot, "scope": self.scope}


# --------------------------------------------------------------------------- evidence access

def get(ev: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A node-wide item, or an unreadable one when it was not gathered."""
    it = (ev.get("items") or {}).get(key)
    if it is None:
        return {"value": None, "source": key, "readable": False, "why": f"{key} was not gathered"}
    return it


def shown(key: str, it: Mapping[str, Any]) -> dict[str, Any]:
    """An item as a finding shows it."""
    return {"key": key, "value": it.get("value"), "source": it.get("source")}


def cannot(key: str, it: Mapping[str, Any]) -> CannotTell:
    """The verdict for an item that could not be read."""
    return CannotTell(f"{key} unreadable ({it.get('source')}): {it.get('why') or 'no reason given'}")


def here(do: Sequence[str], undo: Sequence[str]) -> dict[str | None, dict[str, list[str]]]:
    """``apply`` for a fix on the finding's own node (comments after ``#`` dropped)."""
    def bare(cmds: Sequence[str]) -> list[str]:
        return [c.split("  #")[0].strip() for c in cmds]
    return {None: {"do": bare(do), "undo": bare(undo)}}


def nics(ev: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(ev.get("nics") or {})


def nic_item(items: Mapping[str, Any], key: str) -> dict[str, Any]:
    return items.get(key) or {"value": None, "source": key, "readable": False, "why": f"{key} was not gathered"}


def per_nic(ev: Mapping[str, Any], one: Callable[[str, dict[str, Any]], Any]) -> Any:
    """Apply ``one(ifname, nic_items)`` to every NIC: hits if any, else cannot-tell if any, else None."""
    found = nics(ev)
    if not found:
        return CannotTell("no network interface that is up besides lo")
    hits: list[Hit] = []
    cannots: list[str] = []
    for name, items in sorted(found.items()):
        r = one(name, items)
        if isinstance(r, Hit):
            hits.append(r)
        elif isinstance(r, CannotTell):
            cannots.append(f"{name}: {r.why}")
    if hits:
        return hits
    if cannots:
        return CannotTell("; ".join(cannots))
    return None
