"""The report's plots of MPI collectives (report/plots/kinds/coll_*.py) on hand-made figures of
issue 26's record contract: which plots, what each carries (the model curve, busbw, the efficiency
heat map). Pure (planning only; tests/integration/test_collmodel.py draws them)."""
from __future__ import annotations

import pytest

from clusterbench.report.plots import Source, plan

from collmodelkit import SIZES, coll_run_results
from reportkit import mpi_results, node_results, run


def _specs(kind: str, results=None):
    return [s for s in plan([Source("c", [run()], coll_run_results() if results is None else results)])
            if s.kind == kind]


def test_no_collective_no_collective_plots():
    kinds = {s.kind for s in plan([Source("x", [run()], node_results() + mpi_results())])}
    assert not kinds & {"coll_latency", "coll_busbw", "coll_efficiency"}


def test_latency_per_collective_with_the_models_best_curve():
    specs = _specs("coll_latency")
    assert [s.slug for s in specs] == ["coll-latency-allreduce", "coll-latency-bcast"]  # barrier: no size axis
    series = {s["label"]: s for s in specs[0].data["series"]}
    assert list(series) == ["4 ranks", "4 ranks: network model (best algorithm)"]
    meas, model = series["4 ranks"], series["4 ranks: network model (best algorithm)"]
    assert meas["x"] == SIZES and model["dashed"]
    assert model["x"] == [float(1 << k) for k in range(3, 21)]  # a curve: every power of two from 8 B to 1 MiB
    at = dict(zip(model["x"], model["y"]))
    assert meas["y"][0] == pytest.approx(at[8] / 0.9) and meas["y"][1] == pytest.approx(at[1024] / 0.2)
    assert model["algorithms"][0] == "recursive doubling"
    bcast = [s["label"] for s in specs[1].data["series"]]
    assert "4 ranks, non-blocking" in bcast and not any("non-blocking: network model" in b for b in bcast)


def test_busbw_every_collective_on_one_plot_with_the_links_bandwidth():
    (spec,) = _specs("coll_busbw")
    assert [s["label"] for s in spec.data["series"]] == ["allreduce, 4 ranks", "bcast, 4 ranks",
                                                         "bcast, 4 ranks, non-blocking"]
    assert spec.data["limits"] == [{"label": "ping-pong bandwidth of the model (1/beta)", "value": pytest.approx(1000.0)}]


def test_efficiency_heat_map_over_op_and_size():
    (spec,) = _specs("coll_efficiency")
    d = spec.data
    assert d["ops"] == ["allreduce", "bcast", "barrier"] and d["sizes"] == [0, *SIZES]
    assert d["efficiency"][0] == [None, pytest.approx(0.9), pytest.approx(0.2), pytest.approx(0.8), pytest.approx(0.7)]
    assert d["efficiency"][2] == [pytest.approx(0.5), None, None, None, None]
    assert d["efficiency"][1][2] == pytest.approx(0.7)  # the blocking figure, not the non-blocking one at 30%


def test_stored_figures_without_a_limit_are_judged_from_their_params():
    from dataclasses import replace

    bare = [replace(r, limits=[], limit=None) for r in coll_run_results()]
    (spec,) = _specs("coll_efficiency", bare)
    assert spec.data["efficiency"][0][2] == pytest.approx(0.2)


def test_two_sources_are_told_apart():
    srcs = [Source("a", [run()], coll_run_results()), Source("b", [run("r2" + "0" * 30)], coll_run_results())]
    specs = [s for s in plan(srcs) if s.kind.startswith("coll_")]
    assert [s.kind for s in specs].count("coll_efficiency") == 2
    assert len({s.slug for s in specs}) == len(specs)
    lat = next(s for s in specs if s.slug == "coll-latency-allreduce")
    assert lat.data["series"][0]["label"] == "a: 4 ranks"
