"""The check's outcome for a person: one line per figure (failures first), what else changed, the
baseline update, and the outcome line with its exit code."""
from __future__ import annotations

from typing import Any

from clusterbench.check.verdict import CANNOT_JUDGE, FAIL, PASS, Figure, stats_text

_ORDER = {FAIL: 0, CANNOT_JUDGE: 1, PASS: 2}
_WORD = {FAIL: "FAIL", CANNOT_JUDGE: "CANNOT JUDGE", PASS: "pass"}


def outcome_line(doc: dict[str, Any]) -> str:
    n, code = doc["counts"], doc["exit_code"]
    if doc["outcome"] == FAIL:
        return (f"check {doc['suite']['name']}: FAIL: {n[FAIL]} figure(s) significantly worse by at least "
                f"{doc['min_effect_pct']:g}% (exit {code})")
    if doc["outcome"] == CANNOT_JUDGE:
        why = doc.get("no_baseline") or f"{n[CANNOT_JUDGE]} figure(s) cannot be judged"
        return f"check {doc['suite']['name']}: CANNOT JUDGE: {why}; this is not a pass (exit {code})"
    return (f"check {doc['suite']['name']}: pass: {n[PASS]} figure(s), none significantly worse by "
            f"{doc['min_effect_pct']:g}% or more (exit {code})")


def lines(doc: dict[str, Any], verbose: bool = False) -> list[str]:
    """The lines to print; the figures that pass are counted, and listed only when ``verbose``."""
    s = doc["suite"]
    out = [f"check {s['name']} v{s['version']}: {len(s['runs'])} run(s) x {doc['repeat']} ({doc['repeat_why']}); "
           f"new runs tagged {doc['tag']}",
           f"baseline '{doc['baseline']}': " + (f"{len(doc['baseline_runs'])} run(s)" if doc["baseline_runs"]
                                                 else "none")
           + f"; fail on a figure significantly worse (alpha {doc['alpha']:g}, adjusted) by at least "
             f"{doc['min_effect_pct']:g}%"]
    for label, more in (doc.get("extra_runs") or {}).items():
        out.append(f"{label}: {more['runs']} runs ({more['why']})")
    if doc["cluster_differences"]:
        out.append("other cluster (--allow-different-cluster): "
                   + "; ".join(c["label"] for c in doc["cluster_differences"]))
    figures = sorted((Figure(**f) for f in doc["figures"]), key=lambda f: (_ORDER[f.outcome], f.label))
    for f in figures:
        if f.outcome == PASS and not verbose:
            continue
        stats = stats_text(f)
        out.append(f"{_WORD[f.outcome]:<12} {f.label}: " + (f"{stats}; " if stats else "") + f.reason)
    passed = doc["counts"][PASS]
    if passed and not verbose:
        out.append(f"{passed} figure(s) pass (--verbose lists them)")
    if doc["env"]:
        out.append("what else changed since the baseline: " + "; ".join(e["label"] for e in doc["env"]))
    moved = doc.get("baseline_update")
    if moved:
        out.append(f"--update-baseline: tag '{moved['tag']}' removed from {len(moved['removed_from'])} run(s)"
                   + (f" ({', '.join(r[:8] for r in moved['removed_from'][:6])})" if moved["removed_from"] else "")
                   + f" and put on this check's {len(moved['added_to'])} run(s) (tag {doc['tag']})")
    out.append(outcome_line(doc))
    return out
