"""The gate's rule, figure by figure, on ``compare``'s document (``Comparison.as_dict()``). Pure.

* **fail**: ``compare`` calls the figure "worse" (adjusted p below alpha, the interval of the ratio
  excluding 1) *and* it is worse by at least the threshold (``--min-effect``);
* **cannot judge**: ``compare`` could not judge it (too few runs or samples, a median that is not
  positive, ...), or it has no baseline figure, or the baseline has it and this check did not
  measure it;
* **pass**: no significant difference, better, or worse by less than the threshold.

The whole check fails when one figure fails; else it cannot judge when one figure cannot be
judged; else it passes. "cannot judge" is never a pass: its own exit code.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from clusterbench.analysis.stats import smallest_p

PASS, FAIL, CANNOT_JUDGE = "pass", "fail", "cannot judge"
OUTCOMES = (PASS, FAIL, CANNOT_JUDGE)

#: exit codes of ``clusterbench check`` (2-5 are the usual errors: bad input, environment, a kernel
#: failed, the store); FAIL is ``compare --fail-if-worse``'s code
EXIT_PASS = 0
EXIT_FAIL = 6
EXIT_CANNOT_JUDGE = 7
EXIT_CODES = {PASS: EXIT_PASS, FAIL: EXIT_FAIL, CANNOT_JUDGE: EXIT_CANNOT_JUDGE}

#: compare's verdict words (:mod:`clusterbench.analysis.verdict`), as its document spells them
_WORSE, _BETTER, _UNKNOWN = "worse", "better", "cannot judge"


@dataclass(frozen=True)
class Figure:
    """One figure's outcome: its label and identity, the medians (a: the baseline, b: this check),
    the ratio b/a with its interval, the decisive p (adjusted over the figures), the signed change
    (positive is better) and why it got its outcome."""

    label: str
    benchmark: str
    metric: str
    params: dict
    unit: str | None
    higher_is_better: bool | None
    outcome: str
    reason: str
    median_a: float | None = None
    median_b: float | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p: float | None = None
    change_pct: float | None = None
    n_a: int = 0
    n_b: int = 0
    runs_a: int = 0
    runs_b: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _num(x: Any) -> str:
    return "?" if x is None else f"{x:.4g}"


def stats_text(f: Figure) -> str:
    """``ratio 0.912 [0.897, 0.925], -8.8%, p=0.0021`` (what a failure's text names)."""
    if f.ratio is None:
        return ""
    change = "" if f.change_pct is None else f", {f.change_pct:+.1f}%"
    p = "" if f.p is None else f", p={f.p:.2g}"
    return f"ratio {_num(f.ratio)} [{_num(f.ci_low)}, {_num(f.ci_high)}]{change}{p}"


def _p(c: Mapping[str, Any]) -> float | None:
    if c.get("p_adjusted") is not None:
        return float(c["p_adjusted"])
    ps = [c.get("p_value"), c.get("p_runs")]
    ps = [float(x) for x in ps if x is not None]
    return max(ps) if ps else None


def judge_match(m: Mapping[str, Any], min_effect_pct: float) -> Figure:
    """The outcome of one figure found on both sides (an entry of the document's ``matches``)."""
    c = m.get("comparison") or {}
    base = dict(label=str(m.get("label")), benchmark=str(m.get("benchmark")), metric=str(m.get("metric")),
                params=dict(m.get("params") or {}), unit=m.get("unit"), higher_is_better=m.get("higher_is_better"))
    if not c:
        return Figure(**base, outcome=CANNOT_JUDGE, reason="not compared")
    stats = dict(median_a=c.get("median_a"), median_b=c.get("median_b"), ratio=c.get("ratio"),
                 ci_low=c.get("ci_low"), ci_high=c.get("ci_high"), p=_p(c), change_pct=c.get("change_pct"),
                 n_a=int(c.get("n_a") or 0), n_b=int(c.get("n_b") or 0),
                 runs_a=len(m.get("runs_a") or ()), runs_b=len(m.get("runs_b") or ()))
    verdict, change = c.get("verdict"), c.get("change_pct")
    if verdict == _UNKNOWN or verdict is None:
        why = "; ".join(str(w.get("message")) for w in c.get("warnings") or [] if w.get("code") != "noisy-runs")
        return Figure(**base, **stats, outcome=CANNOT_JUDGE, reason=why or "compare cannot judge it")
    if verdict == _WORSE and change is not None and change <= -abs(min_effect_pct):
        return Figure(**base, **stats, outcome=FAIL,
                      reason=f"significantly worse by {-change:.1f}%, at least the {min_effect_pct:g}% threshold")
    if verdict == _WORSE:
        return Figure(**base, **stats, outcome=PASS,
                      reason=f"worse by {-(change or 0):.1f}%, under the {min_effect_pct:g}% threshold")
    if verdict == _BETTER:
        return Figure(**base, **stats, outcome=PASS, reason=f"better by {change or 0:.1f}%")
    loss = possible_loss_pct(c, m.get("higher_is_better"))
    if loss is not None and loss >= abs(min_effect_pct):
        return Figure(**base, **stats, outcome=CANNOT_JUDGE,
                      reason=f"too noisy: no significant difference, but the 95% interval still allows a loss of "
                             f"{loss:.1f}%, beyond the {min_effect_pct:g}% threshold (more runs, or a quieter machine)")
    return Figure(**base, **stats, outcome=PASS, reason="no significant difference")


def possible_loss_pct(c: Mapping[str, Any], higher_is_better: Any) -> float | None:
    """The largest loss the 95% interval of the ratio B/A still allows, in percent (the interval's
    worse end: its low end for a rate, its high end for a time); None without an interval."""
    low, high = c.get("ci_low"), c.get("ci_high")
    if low is None or high is None:
        return None
    return (1.0 - float(low)) * 100.0 if higher_is_better is not False else (float(high) - 1.0) * 100.0


def judge(doc: Mapping[str, Any], min_effect_pct: float, benchmarks: Iterable[str] = ()) -> list[Figure]:
    """Every figure's outcome: the matched figures (:func:`judge_match`), the figures of this check
    with no baseline figure (``only_b``), and the baseline's figures of the suite's ``benchmarks``
    that this check did not measure (``only_a``): both "cannot judge"."""
    out = [judge_match(m, min_effect_pct) for m in doc.get("matches") or []]
    wanted = set(benchmarks)
    for key, why in (("only_b", "no baseline figure: the baseline has no such figure"),
                     ("only_a", "in the baseline, not measured by this check")):
        for u in doc.get(key) or []:
            if key == "only_a" and u.get("benchmark") not in wanted:
                continue  # a figure of another suite pooled under the same tag
            out.append(Figure(label=str(u.get("label")), benchmark=str(u.get("benchmark")),
                              metric=str(u.get("metric")), params=dict(u.get("params") or {}), unit=None,
                              higher_is_better=None, outcome=CANNOT_JUDGE, reason=why))
    return out


def runs_needed(per_run: int, baseline: int | None, alpha: float, done: int, most: int) -> int:
    """How many runs of an entry whose figures hold ``per_run`` samples a run let ``compare`` reach
    p < ``alpha`` at all against ``baseline`` samples of the figure (None: no baseline yet, so the
    new runs must be enough as a future baseline too): the Mann-Whitney test's smallest possible
    p is 2 / C(m + n, m). At least ``done``, at most ``most``; ``done`` when even ``most`` cannot."""
    for runs in range(done, most + 1):
        n = runs * max(per_run, 1)
        if smallest_p(baseline or n, n) < alpha:
            return runs
    return done


def overall(figures: Iterable[Figure]) -> str:
    """fail when any figure fails; else cannot judge when any cannot be judged (or there is none);
    else pass."""
    outcomes = [f.outcome for f in figures]
    if FAIL in outcomes:
        return FAIL
    if CANNOT_JUDGE in outcomes or not outcomes:
        return CANNOT_JUDGE
    return PASS


def counts(figures: Iterable[Figure]) -> dict[str, int]:
    out = {o: 0 for o in OUTCOMES}
    for f in figures:
        out[f.outcome] += 1
    return out
