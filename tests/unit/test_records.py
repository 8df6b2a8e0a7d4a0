"""Runs and figures are typed after the store too: each round-trips through JSON, the store hands them
back as objects, and reading one as a dict still works for old scripts, with a DeprecationWarning (an
error in this suite)."""
from __future__ import annotations

import io
import json
import warnings

import pytest

from clusterbench.benchmarks.declare import Result
from clusterbench.records import Run, StoredFigure, with_run
from clusterbench.session import new_run_record
from clusterbench.store import Store
from clusterbench.ui import dump_json


def _result(value: float = 5.0, **params) -> Result:
    return Result("stream", "triad", value, "MB/s", True, {"threads": 2, **params}, [value * 0.9, value],
                  {"median": value * 0.95}, limit={"name": "best_bandwidth", "value": 10.0, "fraction": 0.5},
                  limits=[{"name": "best_bandwidth", "value": 10.0, "fraction": 0.5}],
                  warnings=[{"code": "unstable", "message": "m", "remedy": "r"}], kernel="stream")


def test_a_stored_run_and_its_figures_come_back_typed_and_round_trip(tmp_path) -> None:
    st = Store(tmp_path / "r.db")
    rid = st.begin_run(new_run_record(["clusterbench", "run", "stream"], {"hostname": "h"}, "quick"))
    st.add_result(rid, _result())
    st.finish_run(rid, "complete", notes=["n"])
    run, (res,) = st.get_run(rid), st.results(rid)
    assert isinstance(run, Run) and run.full and run.status == "complete" and run.notes == ["n"]
    assert run.probe == {"hostname": "h"} and run.argv == ["clusterbench", "run", "stream"]
    assert isinstance(res, Result) and res.measured_at and res.params == {"threads": 2}
    assert Run.from_json(run.as_json()) == run and Result.from_json(res.as_json()) == res
    assert json.loads(json.dumps(run.as_json())) == run.as_json()  # plain JSON all the way down
    listed = st.list_runs()[0]
    assert not listed.full and listed.results == 1 and "probe" not in listed.as_json()
    assert listed.as_json()["results"] == 1 and "results" not in run.as_json()
    (fig,) = st.figures("stream")
    assert isinstance(fig, StoredFigure) and fig.run_id == rid and fig.host == run.host and fig.value == 5.0
    (part,) = st.results_of([rid], full=False)[rid]
    assert part.value == 5.0 and part.summary == {} and part.params == {"threads": 2}


def test_a_fresh_result_prints_as_it_always_did_and_reads_back() -> None:
    r = _result()
    assert "measured_at" not in r.as_json()  # `run --json` has never printed it before storing
    assert Result.from_json({**r.as_json(), "from_a_newer_version": 1}) == r
    fig = with_run(r, "abc")
    assert isinstance(fig, StoredFigure) and fig.run_id == "abc" and fig.value == r.value
    assert with_run(fig, "abc") is fig and with_run(fig, "xyz").run_id == "xyz"


def test_dump_json_writes_a_typed_record_as_its_json_form() -> None:
    out = io.StringIO()
    dump_json({"run": Run(id="r1", status="complete"), "results": [_result()]}, out)
    doc = json.loads(out.getvalue())
    assert doc["run"]["id"] == "r1" and doc["results"][0]["metric"] == "triad"


def test_reading_a_record_as_a_dict_works_with_a_deprecation_warning() -> None:
    r, run = _result(), Run(id="r1", status="complete", tags=["a"])
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with pytest.warns(DeprecationWarning, match=r"reading Result\['value'\] as a dict is deprecated"):
            assert r["value"] == 5.0
        with pytest.warns(DeprecationWarning):
            assert r.get("params") == {"threads": 2} and r.get("nothing", 3) == 3
        with pytest.warns(DeprecationWarning):
            assert {**run}["tags"] == ["a"] and "status" in run
    with pytest.raises(DeprecationWarning):  # this suite's own setting: clusterbench's code may not do it
        r["value"]
