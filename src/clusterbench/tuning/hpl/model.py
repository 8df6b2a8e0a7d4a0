"""The tune's records (one Trial per measurement, the TuneReport) and the time model that
predicts Rmax at full N from a short run."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from clusterbench.benchmarks.hpl.sizing import hpl_flops
from clusterbench.tuning.hpl.space import Config

SCHEMA = 1


# ---------------------------------------------------------------------------------------------
# Trials and the report
# ---------------------------------------------------------------------------------------------
@dataclass
class Trial:
    """One measurement of the tune (a stored run), or one that was planned and not made."""

    key: str
    stage: int
    kind: str  # "dgemm" | "hpl" | "peak"
    config: Config | None
    n: int | None
    status: str = "planned"  # measured | reused | failed | skipped
    value: float | None = None  # Gflop/s (hpl: Rmax; dgemm: single-core rate)
    time_s: float | None = None  # hpl's timed part
    wall_s: float | None = None  # the whole launch, as the budget sees it
    run_id: str | None = None
    percent_rpeak: float | None = None
    percent_measured_peak: float | None = None
    predicted: float | None = None  # Rmax predicted before it was measured (stage 2)
    predicted_model: float | None = None  # the model's own figure, before calibration
    breakdown_s: dict[str, float] | None = None
    note: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict:
        d = asdict(self)
        d["config"] = asdict(self.config) if self.config else None
        if self.config:
            d["config"]["grid"] = self.config.grid
        return d


@dataclass
class TuneReport:
    tune_id: str
    n: int
    n_small: int
    budget_s: float
    configs: int  # size of the space before pruning
    trials: list[Trial] = field(default_factory=list)
    pruned: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    coretypes: dict[str, str | None] = field(default_factory=dict)
    dgemm: dict[str, dict[int, float]] = field(default_factory=dict)  # stage 0: BLAS -> NB -> Gflop/s
    best: Trial | None = None
    calibration: float | None = None  # measured / model for the first confirmation
    elapsed_s: float = 0.0
    budget_stopped: bool = False

    @property
    def confirmed(self) -> bool:
        return self.best is not None and self.best.stage == 2

    def best_params(self) -> dict[str, Any] | None:
        """The ``hpl`` parameters of the best trial (what to run)."""
        if not self.best or not self.best.config:
            return None
        c = self.best.config
        out: dict[str, Any] = {"n": self.best.n, "nb": c.nb, "grid": c.grid, "pmap": c.pmap, "topology": c.topology,
                               "blas": c.blas}
        if self.coretypes.get(c.blas):
            out["openblas_coretype"] = self.coretypes[c.blas]
        return out

    def document(self) -> dict:
        return {"schema": SCHEMA, "tune": {
            "id": self.tune_id, "n": self.n, "n_small": self.n_small, "budget_s": self.budget_s,
            "elapsed_s": round(self.elapsed_s, 3), "budget_stopped": self.budget_stopped, "configs": self.configs,
            "dgemm_gflops": self.dgemm,
            "best": self.best.as_json() if self.best else None, "best_params": self.best_params(),
            "confirmed_at_full_n": self.confirmed, "calibration": self.calibration, "coretypes": self.coretypes,
            "pruned": self.pruned, "notes": self.notes, "trials": [t.as_json() for t in self.trials]}}


# ---------------------------------------------------------------------------------------------
# The time model
# ---------------------------------------------------------------------------------------------
def predict_rmax(small: Trial, n: int) -> float:
    """Rmax at N from one short run: the trailing update ~ N^3, the rest ~ N^2 (module docstring
    of clusterbench.tuning.hpl); without a breakdown the whole time scales as N^3."""
    s = n / (small.n or n)
    t = small.time_s or hpl_flops(small.n or n) / ((small.value or 1.0) * 1e9)
    bd = small.breakdown_s or {}
    upd = bd.get("update")
    if isinstance(upd, (int, float)) and 0 < upd:
        upd = min(float(upd), t)
        tn = upd * s ** 3 + (t - upd) * s ** 2
    else:
        tn = t * s ** 3
    return hpl_flops(n) / tn / 1e9
