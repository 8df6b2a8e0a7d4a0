"""The comparison chart: the ratio of each matched figure with its interval, coloured by verdict."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import number


def _short_params(params: Any, limit: int = 3) -> str:
    if not isinstance(params, Mapping):
        return ""
    items = [(k, v) for k, v in params.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    return ", ".join(f"{k}={v}" for k, v in items[:limit])


def comparison_rows(comparison: Any, most: int = 40) -> tuple[list[dict], int]:
    """(rows of the comparison chart, how many matches were left out) from ``Comparison.as_dict()``:
    ``{"matches": [{"benchmark", "metric", "params", "comparison": {"ratio", "ci_low", "ci_high",
    "verdict", "change_pct"}}]}``. Matches without a finite ratio are skipped; beyond ``most``
    rows, the largest changes are kept."""
    if not isinstance(comparison, Mapping) or not isinstance(comparison.get("matches"), list):
        return [], 0
    rows: list[dict[str, Any]] = []
    for m in comparison["matches"]:
        if not isinstance(m, Mapping) or not isinstance(m.get("comparison"), Mapping):
            continue
        c = m["comparison"]
        ratio = number(c.get("ratio"))
        if ratio is None or ratio <= 0:
            continue
        lo, hi = number(c.get("ci_low")), number(c.get("ci_high"))
        if lo is None or hi is None or not lo <= ratio <= hi:
            lo = hi = ratio
        label = f"{m.get('benchmark', '?')} {m.get('metric', '?')}"
        extra = _short_params(m.get("params"))
        label = m["label"] if isinstance(m.get("label"), str) and m["label"] else label + (f" ({extra})" if extra else "")
        rows.append({"label": label, "ratio": ratio, "lo": lo, "hi": hi,
                     "verdict": str(c.get("verdict") or ""), "change_pct": number(c.get("change_pct"))})
    left = max(0, len(rows) - most)
    if left:
        rows = sorted(rows, key=lambda r: -abs(math.log(float(r["ratio"]))))[:most]
    return rows, left


def verdict_color(verdict: str) -> str:
    v = verdict.lower()
    if any(w in v for w in ("worse", "slower", "regress")):
        return "#d62728"
    if any(w in v for w in ("better", "faster", "improv")):
        return "#2ca02c"
    return "#7f7f7f"


@register
class Comparison(PlotKind):
    kind = "comparison"
    order = 120

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        rows, left = comparison_rows(comparison)
        if not rows:
            return []
        sides = [comparison.get(k) for k in ("a", "b")]
        names = [s if isinstance(s, str) else (s.get("label") or s.get("name")) if isinstance(s, Mapping) else None
                 for s in sides]
        for i, key in enumerate(("runs_a", "runs_b")):  # Comparison.as_dict() names each side by its runs
            runs = comparison.get(key)
            if names[i] is None and isinstance(runs, list) and runs and all(isinstance(r, str) for r in runs):
                names[i] = ", ".join(r[:8] for r in runs[:3]) + (f" +{len(runs) - 3}" if len(runs) > 3 else "")
        what = f"{names[1]} / {names[0]}" if all(isinstance(n, str) for n in names) else "B / A"
        return [PlotSpec("comparison", "comparison", "Comparison: ratio per metric",
                         f"Ratio {what} of each matched figure with its confidence interval; the line at 1 is no change. "
                         "Colour: the verdict (green better, red worse, grey no significant difference)."
                         + (f" The {left} smallest changes are left out." if left else ""),
                         {"rows": rows, "xlabel": f"ratio {what}"})]

    def draw(self, data: dict, fig: Any) -> None:
        ax = fig.subplots()
        rows = data["rows"]
        ys = list(range(len(rows)))[::-1]
        for y, r in zip(ys, rows):
            ax.errorbar([r["ratio"]], [y], xerr=[[r["ratio"] - r["lo"]], [r["hi"] - r["ratio"]]], fmt="o",
                        color=verdict_color(r["verdict"]), capsize=3)
        ax.axvline(1.0, color="black", linewidth=1, label="no change (ratio 1)")
        ax.set_yticks(ys, [f"{r['label']}  [{r['verdict']}]" if r["verdict"] else r["label"] for r in rows], fontsize=8)
        ax.set_xlabel(data.get("xlabel") or "ratio")
        ax.grid(alpha=0.3, axis="x")
        ax.legend(fontsize=8, loc="best")

    def figure_size(self, spec: PlotSpec) -> tuple[float, float]:
        return 9.0, max(2.5, 0.3 * len(spec.data["rows"]) + 1.2)
