"""The report's "Energy and cost" section and the cost lines after `run` (issue 12): on real HPL runs
metered by a meter command that prints 50 W, with and without a [cost] table; Gflops/W = rmax / 50, the
per-price and energy-cost figures equal the hand computation; a run without energy says nothing is
measured; missing energy shows its reason, never a number."""
from __future__ import annotations

import html as htmllib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench.analysis.cost import check_model
from clusterbench.report.energy import energy_cost
from clusterbench.report.html import format_value, write_report
from clusterbench.store import Store

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

COST = '[cost]\ncurrency = "EUR"\nnode_price = 600\nswitch_price = 25\npower_price_kwh = 0.30\nlifetime_years = 4\n'


def _cli(db: Path, cfg: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1", "XDG_CONFIG_HOME": str(cfg)}
    return subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=120, env=env)


def _text(index: Path) -> str:
    page = index.read_text()
    part = page[page.index('id="energy"'):page.index('id="environment"')]
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", part))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, mpi):
    """Two real runs in one store: hpl metered at 50 W (with [cost], so `run` prints the cost lines), and
    hpl without a meter."""
    tmp = tmp_path_factory.mktemp("energy")
    cfg = tmp / "cfg"
    (cfg / "clusterbench").mkdir(parents=True)
    (cfg / "clusterbench" / "config.toml").write_text(COST)
    db = tmp / "r.db"
    p = _cli(db, cfg, "run", "hpl", "--n", "1000", "--power", "cmd:echo 50")
    assert p.returncode == 0, p.stderr
    metered = Store(db, readonly=True).list_runs()[0].id
    q = _cli(db, cfg, "run", "hpl", "--n", "800")
    assert q.returncode == 0, q.stderr
    return {"db": db, "tmp": tmp, "cfg": cfg, "metered": metered, "run_out": p.stdout,
            "plain": Store(db, readonly=True).list_runs()[0].id}


@pytest.mark.integration
def test_report_shows_gflops_per_watt_and_energy_without_cost(runs):
    st = Store(runs["db"], readonly=True)
    by = {r.metric: r for r in st.results(runs["metered"])}
    rmax, gpw = by["rmax"].value, by["gflops_per_watt"].value
    assert gpw == pytest.approx(rmax / 50, rel=0.01)
    text = _text(write_report(st, [runs["metered"]], runs["tmp"] / "rep1"))
    assert "Gflops per watt" in text and format_value(gpw) in text and format_value(rmax) in text
    assert "cmd:echo 50 (measured, 1 Hz)" in text and "Energy per benchmark" in text
    whole = st.get_run(runs["metered"]).energy["benchmarks"][0]
    assert format_value(whole["joules"]) in text and "50.0" in text
    assert "EUR" not in text and "Performance per" not in text  # no cost model given: no price
    assert "List placement" in text and "Green500" in text and "TOP500" in text


@pytest.mark.integration
def test_report_with_a_cost_model_matches_the_hand_computation(runs):
    st = Store(runs["db"], readonly=True)
    by = {r.metric: r for r in st.results(runs["metered"])}
    model = check_model({"currency": "EUR", "node_price": 600, "switch_price": 25, "power_price_kwh": 0.30,
                         "lifetime_years": 4})
    text = _text(write_report(st, [runs["metered"]], runs["tmp"] / "rep2", cost=model))
    price = 600 + 25  # one node and the switch
    rmax, t = by["rmax"].value, by["time_s"].value
    assert f"{rmax / price:.4g} Gflop/s/EUR" in text  # Gflop/s per EUR
    assert f"{1 / (t * price):.4g} 1/(s*EUR)" in text  # seed 003: 1 / (time x price)
    joules = st.get_run(runs["metered"]).energy["benchmarks"][0]["joules"]
    assert f"{joules / 3.6e6 * 0.30:.3g}" in text  # kWh x price
    life = price + 50 * 4 * 24 * 365.25 / 1000 * 0.30  # 4 years at 50 W
    assert format_value(life) in text and f"{rmax / life:.4g} Gflop/s/EUR" in text
    # the same numbers through the pure function
    doc = energy_cost([st.get_run(runs["metered"])], st.results(runs["metered"]), model)
    pp = {p["metric"]: p["per_price"] for p in doc["cost"]["per_price"]}
    assert pp["rmax"] == pytest.approx(rmax / price) and pp["time_s"] == pytest.approx(1 / (t * price))
    # and printed after `run`
    out = runs["run_out"]
    assert "cost: 1 node(s) bought for 625 EUR" in out and f"{rmax / price:.4g} Gflop/s/EUR" in out
    assert "cost: energy of the run at 0.3 EUR/kWh" in out


@pytest.mark.integration
def test_a_run_without_energy_says_nothing_is_measured(runs, monkeypatch, capsys):
    st = Store(runs["db"], readonly=True)
    text = _text(write_report(st, [runs["plain"]], runs["tmp"] / "rep3"))
    assert "No energy measured in this run" in text and "Gflop/s/W" not in text.split("List placement")[0]
    # through the command, with the [cost] table: per-price rows, no energy cost
    monkeypatch.setenv("XDG_CONFIG_HOME", str(runs["cfg"]))
    from clusterbench.cli import main
    assert main(["--db", str(runs["db"]), "report", runs["plain"], "-o", str(runs["tmp"] / "rep4")]) == 0
    text = _text(runs["tmp"] / "rep4" / "index.html")
    assert "Performance per EUR" in text and "Energy cost" not in text


