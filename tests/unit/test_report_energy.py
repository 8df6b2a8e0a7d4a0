"""The pure tests (they start no process) of what tests/integration/test_report_energy.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

from clusterbench.analysis.cost import check_model
from clusterbench.benchmarks.declare import Result
from clusterbench.records import Run
from clusterbench.report.energy import energy_cost


def test_missing_energy_shows_the_reason_never_a_number():
    e = {"scope": "timed phase", "missing": "vm: the meter failed 0.2 s into the interval"}
    results = [Result(benchmark="hpl", metric="rmax", value=40.0, unit="Gflop/s", higher_is_better=True,
                      params={"energy": e}, samples=[40.0], summary={})]
    doc = energy_cost([Run(id="r1", energy={})], results, check_model({"power_price_kwh": 0.3}))
    assert doc["per_watt"] == [] and doc["missing"][0]["reason"].startswith("vm: the meter failed")
    assert doc["cost"]["energy_cost"] == [] and doc["cost"]["run_energy_cost"] is None
    assert energy_cost([Run(id="r2")], [], None) == {"has_energy": False, "per_watt": [], "missing": [],
                                                      "benchmarks": [], "sources": [], "level": None, "cost": None}
