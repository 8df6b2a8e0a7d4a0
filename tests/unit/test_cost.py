"""Performance per dollar (seed 003 ch. 6) and the cost model: hand-computed values, bad prices refused,
and `compare --per-dollar` on a real SQLite store of two "clusters"."""
from __future__ import annotations

import json
import random

import pytest

from clusterbench.analysis import cost as C
from clusterbench.cli import main
from clusterbench.store import Store

from comparekit import _fig, _run, _samples


def test_per_price_and_normalise_by_hand() -> None:
    # seed 003's definition: 1 / (runtime * price); rates: value / price
    assert C.per_price(10.0, False, 50.0) == pytest.approx(1 / 500)
    assert C.per_price(100.0, True, 50.0) == pytest.approx(2.0)
    # an ARM cluster at 300 taking 20 s against an x86 one at 1500 taking 8 s: ARM is 2x per price
    arm, x86 = C.per_price(20, False, 300), C.per_price(8, False, 1500)
    assert C.normalise({"arm": arm, "x86": x86}) == pytest.approx({"arm": 2.0, "x86": 1.0})
    with pytest.raises(ValueError):
        C.per_price(1.0, True, 0)
    with pytest.raises(ValueError):
        C.per_price(0.0, False, 10)


def test_model_purchase_energy_and_lifetime() -> None:
    m = C.check_model({"currency": "EUR", "node_price": 75, "nodes": 8, "switch_price": 25, "power_price_kwh": 0.3,
                       "lifetime_years": 4})
    assert m.purchase() == 625 and m.purchase(4) == 325
    assert C.energy_cost(3.6e6, 0.3) == pytest.approx(0.3)  # 1 kWh
    # 50 W for 4 years: 50 * 4 * 8766 h / 1000 = 1753.2 kWh -> 525.96
    assert C.lifetime_cost(m, 50.0) == pytest.approx(625 + 1753.2 * 0.3)
    assert C.lifetime_cost(C.CostModel(node_price=1.0), 50.0) is None  # no power price


@pytest.mark.parametrize("table, msg", [
    ({"node_price": 0}, "must be > 0"), ({"node_price": -5}, "must be > 0"), ({"power_price_kwh": "x"}, "a number"),
    ({"nodes": 2.5}, "whole number"), ({"colour": 1}, "unknown key"), ({"switch_price": -1}, ">= 0"),
    ({"node_price": True}, "a number")])
def test_bad_models_refused(table, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        C.check_model(table)


def test_config_cost_table_errors_are_one_line(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "clusterbench").mkdir()
    (tmp_path / "clusterbench" / "config.toml").write_text("[cost]\nnode_price = -3\n")
    db = tmp_path / "x.db"
    st = Store(db)
    rng = random.Random(1)
    for tag in ("pre", "post"):  # not hex, so never also the start of a run id
        _run(st, [_fig("triad", _samples(rng, 100))], tags=[tag])
    st.close()
    assert main(["--db", str(db), "compare", "pre", "post", "--per-dollar", "1,2"]) == 2
    err = capsys.readouterr().err
    assert "node_price" in err and err.count("\n") == 1


def test_compare_per_dollar_two_clusters(tmp_path, monkeypatch, capsys) -> None:
    """Cluster B is 1.5x faster but costs 3x: per price it is half of A, judged on the same statistics."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "clusterbench").mkdir()
    (tmp_path / "clusterbench" / "config.toml").write_text('[cost]\ncurrency = "EUR"\n')
    rng = random.Random(3)
    st = Store(tmp_path / "c.db")
    for _ in range(3):
        _run(st, [_fig("triad", _samples(rng, 1000))], tags=["pi"])
        _run(st, [_fig("triad", _samples(rng, 1500))], tags=["x86"])
    st.close()
    db = str(tmp_path / "c.db")
    assert main(["--db", db, "compare", "pi", "x86", "--per-dollar", "600,1800", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (m,) = doc["matches"]
    assert m["unit"] == "MB/s/EUR" and m["comparison"]["ratio"] == pytest.approx(0.5, rel=0.02)
    assert m["comparison"]["verdict"] == "worse" and doc["per_price"]["price_b"] == 1800
    assert main(["--db", db, "compare", "pi", "x86", "--per-dollar", "600,1800"]) == 0
    assert "per EUR: A's cluster costs 600, B's 1800" in capsys.readouterr().out
    for bad in ("600", "0,5", "a,b", "600,-1"):
        assert main(["--db", db, "compare", "pi", "x86", "--per-dollar", bad]) == 2
    assert capsys.readouterr().err.count("\n") == 4
