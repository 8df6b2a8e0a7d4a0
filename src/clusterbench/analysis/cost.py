"""Performance per dollar and the cost of energy (pure: no I/O).

The cost model is the ``[cost]`` table of the config file (``config.cost_model`` reads and checks
it), all prices in one currency::

    [cost]
    currency = "EUR"
    node_price = 75.0          # purchase price of one node (board, memory, storage, PSU share)
    nodes = 8                  # nodes the price covers (default: the run's node count)
    switch_price = 25.0        # the network (switch, cables), once
    other_price = 40.0         # anything else bought once (rack, fans)
    power_price_kwh = 0.30     # per kWh
    lifetime_years = 4         # for the lifetime energy cost (default 3)

Figures (Carver (2014) ch. 6, "performance for cost"):

* a throughput (higher is better: Gflop/s, events/s, MB/s) per currency unit: ``value / price``;
* a time (lower is better: runtime, latency): ``1 / (value * price)``, Carver (2014)'s definition, so
  that higher is better for both;
* :func:`normalise` scales a set of such figures so that the worst is 1 (Carver (2014)'s tables);
* :func:`energy_cost` is joules / 3.6e6 * price per kWh;
* :func:`lifetime_cost` adds the energy of ``lifetime_years`` at a given average power to the
  purchase price.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

HOURS_PER_YEAR = 24 * 365.25
J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class CostModel:
    currency: str = ""
    node_price: float | None = None
    nodes: int | None = None
    switch_price: float = 0.0
    other_price: float = 0.0
    power_price_kwh: float | None = None
    lifetime_years: float = 3.0

    def purchase(self, nodes: int | None = None) -> float | None:
        """Purchase price of ``nodes`` nodes (default: the model's ``nodes``, else 1) and the network."""
        if self.node_price is None:
            return None
        n = nodes if nodes is not None else (self.nodes or 1)
        return self.node_price * n + self.switch_price + self.other_price


FIELDS = {"currency": str, "node_price": float, "nodes": int, "switch_price": float, "other_price": float,
          "power_price_kwh": float, "lifetime_years": float}


def check_model(table: Mapping[str, object], where: str = "[cost]") -> CostModel:
    """A :class:`CostModel` from a config table; raises ``ValueError`` with a one-line reason
    (unknown key, wrong type, zero or negative price, count or lifetime)."""
    out: dict[str, object] = {}
    for key, value in table.items():
        if key not in FIELDS:
            raise ValueError(f"{where}: unknown key '{key}' (known: {', '.join(FIELDS)})")
        want = FIELDS[key]
        if want is str:
            if not isinstance(value, str):
                raise ValueError(f"{where}: {key} must be a string, not {value!r}")
            out[key] = value
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
            raise ValueError(f"{where}: {key} must be a number, not {value!r}")
        if want is int and float(value) != int(value):
            raise ValueError(f"{where}: {key} must be a whole number, not {value!r}")
        v = want(value)
        zero_ok = key in ("switch_price", "other_price")
        if v < 0 or (v == 0 and not zero_ok):
            raise ValueError(f"{where}: {key} = {value!r} must be {'>= 0' if zero_ok else '> 0'}")
        out[key] = v
    return CostModel(**out)  # type: ignore[arg-type]


def per_price(value: float, higher_is_better: bool, price: float) -> float:
    """Carver (2014)'s performance for cost: ``value / price`` for a rate, ``1 / (value * price)`` for a time."""
    if price <= 0 or not math.isfinite(price):
        raise ValueError(f"price {price!r} must be > 0")
    if higher_is_better:
        return value / price
    if value <= 0:
        raise ValueError(f"a time of {value!r} cannot be priced")
    return 1.0 / (value * price)


def normalise(values: Mapping[str, float]) -> dict[str, float]:
    """Scale per-price figures (higher is better) so that the worst is 1."""
    worst = min(values.values())
    if worst <= 0:
        raise ValueError("per-price figures must be positive")
    return {k: v / worst for k, v in values.items()}


def energy_cost(joules: float, price_kwh: float) -> float:
    return joules / J_PER_KWH * price_kwh


def lifetime_cost(model: CostModel, avg_watts: float, nodes: int | None = None) -> float | None:
    """Purchase price plus ``lifetime_years`` of energy at ``avg_watts`` (None without both prices)."""
    buy = model.purchase(nodes)
    if buy is None or model.power_price_kwh is None:
        return None
    kwh = avg_watts * model.lifetime_years * HOURS_PER_YEAR / 1000.0
    return buy + kwh * model.power_price_kwh
