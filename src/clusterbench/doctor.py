"""``clusterbench doctor``: gather each node's evidence, apply the rules, report (read-only).

:func:`diagnose` reads this machine's evidence (``probe.evidence.gather``) or, given hosts, every
node's in one call per node through the path ``cluster check`` uses (``launch.remote.gather``:
the virtual cluster's namespaces, this machine, or ssh), then applies ``analysis.diagnosis.RULES``.
:func:`format_doctor` prints findings first (severity, node, title, evidence with its source, fix,
undo, verifying benchmark), then what it cannot tell and why, then how many checks passed.
Nothing is changed on any node.
"""
from __future__ import annotations

from typing import Any, Sequence

from clusterbench.analysis import diagnosis
from clusterbench.errors import UsageError

DOCTOR_SCHEMA = 1


def hosts_from(hosts: str | None, hostfile: str | None) -> list[str] | None:
    """``--hosts A,B`` or ``--hostfile F`` -> host names (None: this machine only)."""
    if hosts and hostfile:
        raise UsageError("--hosts and --hostfile both given", "give one of them")
    if hostfile:
        from clusterbench.launch.mpi.hosts import parse_hostfile

        return [h.name for h in parse_hostfile(hostfile)]
    if hosts is not None:
        names = [h.strip() for h in hosts.split(",") if h.strip()]
        if not names:
            raise UsageError("--hosts is empty", "e.g. --hosts node1,node2")
        return names
    return None


def diagnose(hosts: Sequence[str] | None = None, root: str = "/", *, timeout: float = 60.0,
             python: str | None = None) -> dict[str, Any]:
    """Evidence of this machine (``hosts`` None) or of every host, and the rules' verdicts.

    Returns ``{"doctor_schema": 1, "hosts": [...], "findings": [...], "cannot_tell": [...],
    "passed": [...], "rules": [rule descriptions], "evidence": {node: evidence document}}``.
    An unreachable host raises a one-line :class:`EnvironmentProblem` naming it (as ``cluster check``)."""
    from clusterbench.probe import evidence as ev

    if hosts:
        from clusterbench.launch import remote

        gathered = remote.gather(list(hosts), ev.SNIPPET, timeout=timeout, python=python)
        nodes = {h: d for h, d in gathered.items()}
    else:
        doc = ev.gather(root)
        nodes = {doc.get("host") or "localhost": doc}
    verdicts = diagnosis.evaluate(nodes, hosts_text=",".join(nodes) if len(nodes) > 1 else None)
    return {"doctor_schema": DOCTOR_SCHEMA, "hosts": list(nodes), "root": root if not hosts else None,
            **verdicts, "rules": [r.describe() for r in diagnosis.RULES], "evidence": nodes}


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
    for f in findings:
        lines.append("")
        lines.append(f"[{f['severity']}] {f['node']}: {f['title']} ({f['rule']})")
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
        for c in cannot:
            lines.append(f"  {c['node']}: {c['title']} ({c['rule']}): {c['why']}")
    lines.append("")
    lines.append(f"passed: {len(passed)} check{'s' if len(passed) != 1 else ''}"
                 + (f" ({', '.join(sorted({p['rule'] for p in passed}))})" if passed else ""))
    return lines
