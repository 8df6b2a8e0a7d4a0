"""Running doctor's rules over evidence (pure, no I/O).

:data:`RULES` is every rule of :mod:`clusterbench.doctor.rules` (discovered, in their order);
:func:`evaluate` applies them to ``{node: evidence}`` and sorts every (rule, node) into findings,
cannot-tell and passed. :func:`bearing_on` answers which rules bear on a benchmark's figures (what
``sweep node`` offers as an outlier's likely causes), from each rule's ``figures``.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from clusterbench.doctor.rule import CannotTell, Hit, Rule
from clusterbench.doctor.rules import discover

__all__ = ["RULES", "CannotTell", "Hit", "Rule", "rule", "evaluate", "bearing_on", "figures_table"]

RULES: list[Rule] = discover()


def rule(rule_id: str, rules: Sequence[Rule] | None = None) -> Rule:
    for r in RULES if rules is None else rules:
        if r.id == rule_id:
            return r
    raise KeyError(rule_id)


def figures_table(rules: Sequence[Rule] | None = None) -> dict[str, dict[str, tuple[str, ...]]]:
    """``{benchmark: {rule id: (metric, ...)}}``: which rules bear on which figures."""
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for r in RULES if rules is None else rules:
        for bench, metrics in r.figures.items():
            out.setdefault(bench, {})[r.id] = tuple(metrics)
    return out


def bearing_on(benchmark: str, rules: Sequence[Rule] | None = None, *,
               otherwise: Iterable[str] = ()) -> tuple[str, ...]:
    """The ids of the rules that bear on ``benchmark``'s figures, in rule order. When no rule names
    it: the rules that bear on any benchmark of ``otherwise`` (e.g. its family)."""
    rules = RULES if rules is None else rules
    named = tuple(r.id for r in rules if benchmark in r.figures)
    if named:
        return named
    family = set(otherwise)
    return tuple(r.id for r in rules if family & set(r.figures))


def _as_list(out: Any) -> list[Hit]:
    return out if isinstance(out, list) else [out]


def evaluate(evidence: Mapping[str, Mapping[str, Any]], rules: Sequence[Rule] | None = None,
             hosts_text: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Apply ``rules`` (default :data:`RULES`) to ``{node: evidence}`` -> ``{"findings", "cannot_tell",
    "passed"}``, each a list of dicts naming the rule and the node. ``hosts_text`` fills ``{hosts}``
    in the verifying benchmark (default: the nodes, comma-separated; ``A,B`` for one node)."""
    rules = RULES if rules is None else rules
    nodes = list(evidence)
    hosts = hosts_text or (",".join(nodes) if len(nodes) > 1 else "A,B")
    out: dict[str, list[dict[str, Any]]] = {"findings": [], "cannot_tell": [], "passed": []}

    def record(r: Rule, node: str, res: Any) -> None:
        verify = r.verify.format(hosts=hosts)
        if res is None:
            out["passed"].append({"rule": r.id, "node": node, "title": r.title})
        elif isinstance(res, CannotTell):
            out["cannot_tell"].append({"rule": r.id, "node": node, "title": r.title, "why": res.why})
        else:
            for h in _as_list(res):
                out["findings"].append({
                    "rule": r.id, "node": h.node or node, "severity": h.severity or r.severity, "title": r.title,
                    "summary": h.summary, "evidence": h.evidence, "why": r.why, "fix": h.fix, "undo": h.undo,
                    "verify": verify, "needs_reboot": r.needs_reboot and h.apply is None,
                    "apply": None if h.apply is None else
                    {(k if k is not None else (h.node or node)): v for k, v in h.apply.items()}})

    for r in rules:
        if r.scope == "cluster":
            try:
                res = r.check(evidence)
            except Exception as exc:  # a rule's bug must not hide the others: say so
                res = CannotTell(f"the rule failed: {type(exc).__name__}: {exc}")
            record(r, "cluster", res)
            continue
        for node, ev in evidence.items():
            try:
                res = r.check(ev)
            except Exception as exc:
                res = CannotTell(f"the rule failed: {type(exc).__name__}: {exc}")
            record(r, node, res)
    order = {"warn": 0, "info": 1}
    out["findings"].sort(key=lambda f: order.get(f["severity"], 2))  # stable: rule order within a severity
    return out
