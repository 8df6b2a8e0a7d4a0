"""The search of ``tune coll``, pure: it sees the MPI only through a measurement callable.

``measure(op, sizes, setting) -> {size: latency_us}``: one launch measuring ``op`` at every size
with ``setting`` (None: the MPI's default; else an object the caller understands, e.g. an
:class:`~clusterbench.tuning.coll.algorithms.Algorithm`) and returning each size's figure (OSU's
latency). One launch gives one sample per size; launches are separate processes, so the samples
of one setting are independent replicates (``compare``'s unlabelled case).

Method:

1. **Interleaved rounds.** Each round launches the default and every candidate still in the
   race once, in an order rotated by one each round (a slow spell of a shared machine hits every
   setting, not one).
2. **The verdict per size** (from :data:`MIN_ROUNDS` rounds on): the candidate with the lowest
   median against the default, with ``compare``'s rule (:func:`clusterbench.analysis.verdict.
   compare_samples`: Mann-Whitney, bootstrap interval of the ratio of medians, the 1% minimum
   effect, the 10% noise gate). "better": that candidate wins the size; "worse": the best
   candidate is slower than the default, so the default wins; otherwise the size is undecided.
   A candidate that the size's best beats significantly at every size leaves the race.
3. **Stop** when every size is decided, or the next round would not fit in the budget (the
   caller's reserve for the verification kept), or after ``max_rounds``. An undecided size keeps
   the default.
4. **Verification** (:func:`verify`): the tuned configuration (one setting giving each size its
   winner) against the default in fresh interleaved rounds, judged the same way at the sizes
   where the tuned configuration differs from the default; a size is kept only where the tuned
   configuration is significantly better. :func:`ranges` groups consecutive sizes by winner.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterbench.analysis.verdict import BETTER, SAME, UNKNOWN, WORSE, SampleComparison, compare_samples

DEFAULT = "default"
#: rounds before anything is judged: 4 against 4 is the fewest that can reach p < 0.05
MIN_ROUNDS = 4
MAX_ROUNDS = 30
#: bootstrap resamples per judgement (many are made each round)
RESAMPLES = 1000

Measure = Callable[[str, Sequence[int], Any], Mapping[int, float]]
Progress = Callable[[dict], None]


@dataclass
class SizeVerdict:
    """One size: ``winner`` (a label, DEFAULT when the default is best or nothing was shown),
    the medians (us) and the comparison of the best candidate (``best``) against the default."""

    size: int
    winner: str
    best: str | None
    median_default: float | None
    median_best: float | None
    gain_pct: float | None
    verdict: str
    p_value: float | None
    n_default: int
    n_best: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Phase:
    """One loop of interleaved rounds (the search, or the verification)."""

    labels: list[str]
    samples: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    rounds: int = 0
    stopped: str = ""
    dropped: dict[str, str] = field(default_factory=dict)
    verdicts: dict[int, SizeVerdict] = field(default_factory=dict)
    wall_s: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"labels": self.labels, "rounds": self.rounds, "stopped": self.stopped, "dropped": self.dropped,
                "samples": {k: {str(s): v for s, v in d.items()} for k, d in self.samples.items()},
                "verdicts": [v.as_dict() for v in self.verdicts.values()]}


def judge(default: Sequence[float], cand: Sequence[float]) -> SampleComparison | None:
    """Candidate (B) against the default (A), lower latency better; None without two samples a side."""
    if len(default) < 2 or len(cand) < 2:
        return None
    return compare_samples(default, cand, higher_is_better=False, resamples=RESAMPLES)


def size_verdict(size: int, samples: Mapping[str, Mapping[int, Sequence[float]]], labels: Sequence[str]) -> SizeVerdict:
    """The verdict at ``size`` among the default and ``labels`` (see the module docstring)."""
    d = list(samples.get(DEFAULT, {}).get(size, []))
    meds = {lab: statistics.median(samples[lab][size]) for lab in labels
            if lab != DEFAULT and samples.get(lab, {}).get(size)}
    md = statistics.median(d) if d else None
    if not meds or md is None:
        return SizeVerdict(size, DEFAULT, None, md, None, None, UNKNOWN, None, len(d), 0)
    best = min(meds, key=lambda k: meds[k])
    b = samples[best][size]
    cmp = judge(d, b)
    verdict = cmp.verdict if cmp else UNKNOWN
    gain = (1.0 - meds[best] / md) * 100.0 if md > 0 else None
    return SizeVerdict(size, best if verdict == BETTER else DEFAULT, best, md, meds[best],
                       None if gain is None else round(gain, 2), verdict, cmp.p_decisive if cmp else None,
                       len(d), len(b))


def decided(v: SizeVerdict) -> bool:
    return v.verdict in (BETTER, WORSE)


def _losers(phase: Phase, sizes: Sequence[int], active: list[str]) -> dict[str, str]:
    """Candidates the best at each size beats significantly at every size."""
    out = {}
    for lab in active:
        if lab == DEFAULT:
            continue
        worse = 0
        for s in sizes:
            meds = {k: statistics.median(phase.samples[k][s]) for k in active if phase.samples[k].get(s)}
            top = min(meds, key=lambda k: meds[k])
            if top == lab:
                break
            cmp = judge(phase.samples[top][s], phase.samples[lab][s])
            if cmp is None or cmp.verdict != WORSE:
                break
            worse += 1
        if worse == len(sizes):
            out[lab] = "significantly slower than the best at every size"
    return out


def run_rounds(op: str, sizes: Sequence[int], settings: Mapping[str, Any], measure: Measure, *,
               judge_sizes: Sequence[int] | None = None, budget_s: float, reserve_s: float = 0.0,
               clock: Callable[[], float] = time.monotonic, progress: Progress | None = None,
               min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS, drop: bool = True,
               phase_name: str = "search") -> Phase:
    """Interleaved rounds of ``settings`` (label -> setting; DEFAULT must be one, with None) until
    every size of ``judge_sizes`` (default all) is decided, the budget (minus ``reserve_s``) has no
    room for another round, or ``max_rounds``."""
    if DEFAULT not in settings:
        raise ValueError("the default must be measured")
    t0 = clock()
    labels = list(settings)
    phase = Phase(labels, {lab: {s: [] for s in sizes} for lab in labels})
    active = list(labels)
    judged = list(judge_sizes if judge_sizes is not None else sizes)
    while True:
        if phase.rounds >= max_rounds:
            phase.stopped = "max-rounds"
            break
        round_s = sum(phase.wall_s.get(lab, 0.0) for lab in active)
        if phase.rounds and clock() - t0 + round_s + reserve_s > budget_s:
            phase.stopped = "budget"
            break
        k = phase.rounds % len(active)
        for lab in active[k:] + active[:k]:
            t = clock()
            got = measure(op, sizes, settings[lab])
            phase.wall_s[lab] = clock() - t
            for s in sizes:
                if got.get(s) is not None:
                    phase.samples[lab][s].append(float(got[s]))
        phase.rounds += 1
        left = judged
        if phase.rounds >= min_rounds:
            phase.verdicts = {s: size_verdict(s, phase.samples, active) for s in judged}
            left = [s for s in judged if not decided(phase.verdicts[s])]
            if drop and len(active) > 2:
                for lab, why in _losers(phase, judged, active).items():
                    active.remove(lab)
                    phase.dropped[lab] = why
        if progress:
            round_s = sum(phase.wall_s.get(lab, 0.0) for lab in active)
            rounds_left = max(min_rounds - phase.rounds, 1 if left else 0)
            eta = min(round_s * (rounds_left if phase.rounds < min_rounds else max_rounds - phase.rounds),
                      max(0.0, budget_s - reserve_s - (clock() - t0))) if left else 0.0
            progress({"event": "round", "phase": phase_name, "round": phase.rounds, "undecided": len(left),
                      "sizes": len(judged), "active": len(active), "elapsed_s": clock() - t0, "eta_s": eta})
        if phase.rounds >= min_rounds and not left:
            phase.stopped = "decided"
            break
    if phase.rounds < min_rounds or not phase.verdicts:
        phase.verdicts = {s: size_verdict(s, phase.samples, active) for s in judged}
    return phase


def winners(phase: Phase, sizes: Sequence[int]) -> dict[int, str]:
    """size -> the winning label (DEFAULT where nothing beat the default significantly)."""
    return {s: (phase.verdicts[s].winner if s in phase.verdicts else DEFAULT) for s in sizes}


def verify(op: str, sizes: Sequence[int], tuned: Any, chosen: Mapping[int, str], measure: Measure, *,
           budget_s: float, clock: Callable[[], float] = time.monotonic, progress: Progress | None = None,
           min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS) -> tuple[Phase, dict[int, str]]:
    """The tuned setting against the default at the sizes ``chosen`` gives a non-default winner;
    returns the phase and the kept winners (a size kept only where "tuned" is significantly better)."""
    judged = [s for s in sizes if chosen.get(s, DEFAULT) != DEFAULT]
    if not judged:
        return Phase([DEFAULT, "tuned"], stopped="nothing to verify"), {s: DEFAULT for s in sizes}
    phase = run_rounds(op, sizes, {DEFAULT: None, "tuned": tuned}, measure, judge_sizes=judged, budget_s=budget_s,
                       clock=clock, progress=progress, min_rounds=min_rounds, max_rounds=max_rounds, drop=False,
                       phase_name="verify")
    kept = {s: (chosen[s] if s in phase.verdicts and phase.verdicts[s].verdict == BETTER else DEFAULT)
            for s in sizes}
    return phase, kept


def ranges(by_size: Mapping[int, str]) -> list[tuple[int, int, str]]:
    """Consecutive sizes with one winner: [(first size, last size, label)], sizes ascending."""
    out: list[tuple[int, int, str]] = []
    for s in sorted(by_size):
        if out and out[-1][2] == by_size[s]:
            out[-1] = (out[-1][0], s, by_size[s])
        else:
            out.append((s, s, by_size[s]))
    return out


__all__ = ["DEFAULT", "MIN_ROUNDS", "MAX_ROUNDS", "BETTER", "WORSE", "SAME", "UNKNOWN", "Measure", "Phase",
           "SizeVerdict", "decided", "judge", "ranges", "run_rounds", "size_verdict", "verify", "winners"]
