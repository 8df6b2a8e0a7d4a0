"""``watts:W`` (``--watts W``): a declared constant power, not measured, marked ``declared`` wherever
it appears."""
from __future__ import annotations

from typing import Any, Sequence

from clusterbench.energy import figures as E
from clusterbench.energy.source import Source
from clusterbench.energy.spec import Spec, check_watts


class ConstantSource(Source):
    kind = "watts"
    declared = True

    def __init__(self, label: str, covers: Sequence[str], spec: Spec) -> None:
        super().__init__(label, covers, spec)
        self.watts = check_watts(spec.arg, f"--power {spec.text}", nodes=len(self.covers))

    def energy(self, t0: float, t1: float) -> dict[str, Any]:
        E.require_interval(t0, t1)
        return {"joules": self.watts * (t1 - t0), "avg_watts": self.watts, "declared": True}
