"""The text ``clusterbench doctor`` prints: the report of :func:`~clusterbench.doctor.gather.diagnose`
(findings first: severity, node, title, evidence with its source, fix, undo, verifying benchmark;
then what it cannot tell and why; then how many checks passed), and the lines of ``--fix``,
``--undo`` and ``--fixes``.
"""
from __future__ import annotations

from typing import Any, Sequence


def format_fix(res: dict[str, Any], *, applied: bool) -> list[str]:
    """Lines for ``--fix`` (``applied`` False: the plan only) and ``--undo``."""
    lines = []
    acts = res.get("actions") or {}
    if not applied:
        if not acts:
            return [f"{res['rule']}: nothing to fix: the rule passes on every node"]
        lines.append(f"{res['rule']} ({res['title']}): would run (nothing changed; add --yes to apply):")
    else:
        if res["status"] == "undone":
            lines.append(f"fix {res['id']} undone ({res['rule']}): the previous values are back")
        else:
            lines.append(f"fix {res['id']} applied ({res['rule']}); undo it with: clusterbench doctor --undo {res['id']}")
    for node, a in acts.items():
        if not applied or res["status"] != "undone":
            for c in a["do"]:
                lines.append(f"  {node}: {c}")
        for c in a["undo"]:
            lines.append(f"  {node} undo: {c}")
    for adv in res.get("advice") or []:
        for c in adv["fix"]:
            lines.append(f"  {adv['node']}: not applied (advice, do it by hand): {c}")
    if applied:
        after = res.get("after") or []
        lines.append(f"  {res['rule']} now: " + ("passes" if not after else
                                                   "still fires: " + "; ".join(f["summary"] for f in after)))
    return lines


def format_fixes(fixes: Sequence[dict[str, Any]]) -> list[str]:
    if not fixes:
        return ["no fixes recorded"]
    lines = []
    for f in fixes:
        v = f.get("verify") or {}
        ver = f"; verified: {'kept' if v.get('kept') else 'undone'} ({v.get('better')} better, {v.get('worse')} worse)" \
            if v else ""
        lines.append(f"{f['id']}  {f['status']:8s} {f['created'][:19]}  nodes {', '.join(f['actions'])}{ver}")
    return lines


def _value(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_value(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        if not v:
            return "none"
        return " ".join(map(str, v)) if all(not isinstance(x, (dict, list)) for x in v) else str(v)
    return str(v)


def format_doctor(doc: dict[str, Any]) -> list[str]:
    """The printed report of :func:`diagnose`."""
    lines: list[str] = []
    nodes = doc.get("hosts") or []
    findings, cannot, passed = doc["findings"], doc["cannot_tell"], doc["passed"]
    lines.append(f"doctor: {len(nodes)} node{'s' if len(nodes) != 1 else ''} ({', '.join(nodes)}); "
                 f"{len(findings)} finding{'s' if len(findings) != 1 else ''}, {len(cannot)} cannot tell, "
                 f"{len(passed)} passed (read-only: nothing was changed)")
    groups: dict[str, list[dict[str, Any]]] = {}
    for f in findings:  # the same finding with the same evidence on several nodes is printed once
        same = {k: f[k] for k in ("rule", "summary", "fix", "undo")}
        same["evidence"] = [(e["key"], _value(e["value"])) for e in f["evidence"]]
        groups.setdefault(repr(same), []).append(f)
    for members in groups.values():
        f = members[0]
        where = ", ".join(m["node"] for m in members)
        lines.append("")
        lines.append(f"[{f['severity']}] {where}: {f['title']} ({f['rule']})")
        lines.append(f"  {f['summary']}")
        for e in f["evidence"]:
            lines.append(f"  evidence: {e['key']} = {_value(e['value'])}  [{e['source']}]")
        lines.append(f"  why: {f['why']}")
        for c in f["fix"]:
            lines.append(f"  fix:  {c}")
        for c in f["undo"]:
            lines.append(f"  undo: {c}")
        if f.get("needs_reboot"):
            lines.append("  needs a reboot (advised, never applied by clusterbench)")
        lines.append(f"  verify: clusterbench {f['verify']} (before and after; clusterbench compare)")
    if cannot:
        lines.append("")
        lines.append("cannot tell:")
        same: dict[tuple[str, str], list[str]] = {}
        for c in cannot:
            same.setdefault((c["rule"], c["why"]), []).append(c["node"])
        titles = {c["rule"]: c["title"] for c in cannot}
        for (rule_id, why), where in same.items():
            lines.append(f"  {', '.join(where)}: {titles[rule_id]} ({rule_id}): {why}")
    lines.append("")
    lines.append(f"passed: {len(passed)} check{'s' if len(passed) != 1 else ''}"
                 + (f" ({', '.join(sorted({p['rule'] for p in passed}))})" if passed else ""))
    return lines
