"""The declarations a benchmark is made of: its metrics (unit, direction, limits), its parameters (type,
bounds, choices) and the result it emits. Re-exported by :mod:`clusterbench.benchmarks.base`, the
plug-in API."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from clusterbench.errors import UsageError
from clusterbench.dictreading import DictReading
from clusterbench.units import plain_number


@dataclass(frozen=True)
class Metric:
    """A figure a benchmark yields. ``limits`` name entries of ``analysis.limits.LIMITS``,
    the primary first; the first one that is known becomes the result's ``limit``."""

    name: str
    unit: str
    higher_is_better: bool
    description: str
    limits: tuple[str, ...] = ()
    #: the measured limits this metric's figures feed (e.g. ``best_bandwidth``, ``measured_peak``)
    provides: tuple[str, ...] = ()
    #: what a figure's ``value`` is: its ``best`` sample (``RunContext.emit``'s default) or, for a
    #: figure the benchmark computes otherwise, a few words the results table prints beside it
    #: (e.g. ``whole run``): the table's column says "best" only when every value there is one
    value_is: str = "best"


@dataclass(frozen=True)
class HpccKey:
    """An HPC Challenge summary key (hpccoutf.txt's ``Begin of Summary section``) that figures of
    one metric map to: a result of ``metric`` whose params satisfy ``when`` carries
    ``params.hpcc_key`` and ``params.hpcc_value`` (the value in hpcc's unit: ``value * scale``,
    divided by ``params[per]`` when hpcc reports a per-process figure), so a run compares key by key
    with published HPCC tables and ``results export --format hpccoutf`` writes them back."""

    key: str
    metric: str
    when: Callable[[dict], bool] = lambda params: True
    scale: float = 1.0
    per: str | None = None
    #: hpcc's size keys that go with this figure in a summary (e.g. RandomAccess_N), from its params
    sizes: Callable[[dict], dict[str, Any]] | None = None

    def applies(self, metric: str, params: dict) -> bool:
        return metric == self.metric and bool(self.when(params))

    def hpcc_value(self, value: float, params: dict) -> float:
        v = value * self.scale
        return v / float(params[self.per]) if self.per else v


_LIST_TYPES = ("intlist", "strlist")


@dataclass(frozen=True)
class Param:
    """A benchmark parameter, declared as data: the CLI builds ``--name`` from it, and
    :meth:`Benchmark.resolve` checks every value against it before anything runs.

    Bounds (``min``/``max``, inclusive unless ``min_open``) apply to a number, or to every item
    of an ``intlist``; ``why`` says where the bounds come from (shown in the error). A list that
    is given must not be empty (``--sizes ,,,`` is refused, not read as "the default"), and a
    string that is given must not be blank (``--hosts ''``)."""

    name: str
    type: type | str  # int, float, str, bool, "intlist" or "strlist" (comma-separated)
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    min: float | None = None
    max: float | None = None
    #: the lower bound itself is not allowed: (min, max]
    min_open: bool = False
    why: str = ""
    #: parameters that cannot be given together with this one
    excludes: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def bounds_text(self) -> str:
        lo, hi = plain_number(self.min), plain_number(self.max)
        if self.min is not None and self.max is not None:
            text = f"({lo}, {hi}]" if self.min_open else f"{lo} to {hi}"
        elif self.min is not None:
            text = f"above {lo}" if self.min_open else f"{lo} or more"
        else:
            text = f"{hi} or less"
        return text + (f" ({self.why})" if self.why else "")

    def check(self, value: Any, given: bool = True) -> None:
        """Raise a one-line UsageError when a value breaks the declaration (``given``: the user
        gave it, so an empty list or a blank string is refused rather than read as a default)."""
        if value is None:
            return
        if self.type in _LIST_TYPES:
            items = list(value)
            if not items and given:
                raise UsageError(f"{self.flag} is empty", f"give at least one value, or leave {self.flag} out")
            if self.choices:
                bad = [v for v in items if v not in self.choices]
                if bad:
                    raise UsageError(f"{self.flag} {bad[0]} is not one of {', '.join(map(str, self.choices))}",
                                     "pick from those")
            for v in items:
                self._check_number(v)
            return
        if self.type is str and isinstance(value, str) and not value.strip() and given:
            raise UsageError(f"{self.flag} is empty", f"give a value, or leave {self.flag} out")
        if self.choices and value not in self.choices:
            raise UsageError(f"{self.flag} {value!r} is not one of {', '.join(map(str, self.choices))}",
                             "pick one of those")
        self._check_number(value)

    def _check_number(self, v: Any) -> None:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return
        if isinstance(v, float) and not math.isfinite(v):
            raise UsageError(f"{self.flag} {v} is not allowed", "give a finite number")
        low = self.min is not None and (v <= self.min if self.min_open else v < self.min)
        high = self.max is not None and v > self.max
        if low or high:
            shown = repr(v) if isinstance(v, float) and len(repr(v)) < 12 else plain_number(v)  # as the user typed it
            raise UsageError(f"{self.flag} {shown} is not allowed", f"use {self.bounds_text()}")


@dataclass(frozen=True)
class Result(DictReading):
    """One metric at one parameter point, with its samples, summary, limit and warnings.

    Frozen: made once, complete, by :meth:`RunContext.emit` (judged and warned before it exists),
    so what is stored, printed and compared is the same record. The store hands it back as it was
    stored (with ``measured_at``, when it was committed); :meth:`from_json` reads :meth:`as_json`'s form."""

    benchmark: str
    metric: str
    value: float
    unit: str
    higher_is_better: bool
    params: dict
    samples: list[float]
    summary: dict
    limit: dict | None = None
    limits: list[dict] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)
    kernel: str | None = None
    measured_at: str | None = None

    def as_json(self) -> dict:
        d = asdict(self)
        if d["measured_at"] is None:  # not stored yet: the form `run --json` has always printed
            del d["measured_at"]
        return d

    @classmethod
    def from_json(cls, d: dict) -> Result:
        """From :meth:`as_json`'s form (a ``--json`` file, a bundle, a node's agent); keys this version
        does not know are ignored, missing optional ones take their defaults."""
        return cls(**{k: v for k, v in d.items() if k in _RESULT_FIELDS})


_RESULT_FIELDS = frozenset(Result.__dataclass_fields__)
