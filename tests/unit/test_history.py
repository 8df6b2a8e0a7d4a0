"""The pure tests (they start no process) of what tests/integration/test_history.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from clusterbench.analysis.table import format_table, pivot
from clusterbench.benchmarks.base import Result
from clusterbench.cli import main
from clusterbench.errors import UsageError
from clusterbench.session import new_run_record
from clusterbench.store import STORE_SCHEMA, Store


def _hpl(value: float, blas: str, topology: str, grid: str, nb: int = 192) -> Result:
    return Result(benchmark="hpl", metric="rmax", value=value, unit="Gflop/s", higher_is_better=True,
                  params={"blas": blas, "topology": topology, "grid": grid, "nb": nb, "n": 8000},
                  samples=[value], summary={"n": 1, "best": value})


def _run(st: Store, results: list[Result], tags=(), note=None, command="clusterbench run hpl", started=None) -> str:
    rec = new_run_record(command.split(), {"hostname": "h"}, "default")
    rec["tags"], rec["note"] = list(tags), note
    if started:
        rec["started"] = started
    rid = st.begin_run(rec)
    for r in results:
        st.add_result(rid, r)
    st.finish_run(rid, "complete")
    time.sleep(0.002)  # distinct start times (milliseconds)
    return rid


@pytest.fixture()
def store(tmp_path: Path) -> Store:
    st = Store(tmp_path / "h.db")
    yield st
    st.close()


def test_tags_and_note_are_stored_and_select_runs(store: Store) -> None:
    a1 = _run(store, [_hpl(10, "openblas", "pure", "1x2")], tags=["baseline"], note="MTU 1500")
    a2 = _run(store, [_hpl(11, "openblas", "pure", "1x2")], tags=["baseline", "repeat"])
    b = _run(store, [_hpl(14, "openblas", "pure", "1x2")], tags=["jumbo"])
    assert store.get_run(a1).tags == ["baseline"] and store.get_run(a1).note == "MTU 1500"
    assert store.select_runs("baseline") == [a1, a2]          # a tag pools its runs, oldest first
    assert store.select_runs("last") == [b] and store.select_runs("last~1") == [a2] and store.select_runs("last~2") == [a1]
    assert store.select_runs("last~1,last") == [a2, b]
    assert store.select_runs(b[:8]) == [b] and store.select_runs("tag:jumbo") == [b] and store.select_runs(f"run:{a1}") == [a1]
    assert store.all_tags() == {"baseline": 2, "jumbo": 1, "repeat": 1}
    assert [r.id for r in store.list_runs(tag="baseline")] == [a2, a1]  # newest first


@pytest.mark.parametrize("spec, words", [
    ("nosuch", "no run or tag 'nosuch'"), ("tag:nosuch", "no run is tagged 'nosuch'"), ("last~9", "selects nothing"),
    ("", "empty"), ("a,,b", "empty item"),
])
def test_bad_selectors_are_one_line_usage_errors(store: Store, spec: str, words: str) -> None:
    _run(store, [_hpl(10, "openblas", "pure", "1x2")], tags=["baseline"])
    with pytest.raises(UsageError, match=words) as err:
        store.select_runs(spec)
    assert "\n" not in str(err.value)


def test_a_word_that_is_both_tag_and_run_prefix_must_be_said(store: Store) -> None:
    rid = _run(store, [_hpl(10, "openblas", "pure", "1x2")])
    prefix = rid[:4]
    assert prefix.isalnum(), prefix  # a run id is hex, so its start is always a valid tag
    _run(store, [_hpl(11, "openblas", "pure", "1x2")], tags=[prefix])
    with pytest.raises(UsageError, match="both a tag and the start of a run id"):
        store.select_runs(prefix)
    assert store.select_runs(f"run:{prefix}") == [rid]


@pytest.mark.parametrize("tag", ["", "a b", "a,b", "tag:x", "last", "last~2", "-x", "x" * 65])
def test_bad_tags_are_refused_before_the_run_exists(store: Store, tag: str) -> None:
    rec = new_run_record(["clusterbench"], {}, "quick")
    rec["tags"] = [tag]
    with pytest.raises(UsageError, match="not a valid tag"):
        store.begin_run(rec)
    assert store.list_runs() == []  # the whole insert was one transaction


def test_results_tag_adds_removes_and_notes(store: Store, capsys) -> None:
    rid = _run(store, [_hpl(10, "openblas", "pure", "1x2")])
    db = str(store.path)
    assert main(["--db", db, "results", "tag", "last", "before", "mtu1500"]) == 0
    assert main(["--db", db, "results", "tag", rid[:8], "--remove", "mtu1500"]) == 0
    assert main(["--db", db, "results", "tag", "last", "--note", "stock kernel"]) == 0
    run = Store(db, readonly=True).get_run(rid)
    assert run.tags == ["before"] and run.note == "stock kernel"
    assert main(["--db", db, "results", "tag", "last"]) == 2
    assert "needs a TAG, --remove TAG or --note" in capsys.readouterr().err


def test_results_list_filters(store: Store, capsys) -> None:
    old = _run(store, [_hpl(10, "openblas", "pure", "1x2")], tags=["x"], started="2026-01-05T10:00:00.000+00:00")
    st_ = Result(benchmark="stream", metric="triad", value=1e4, unit="MB/s", higher_is_better=True, params={},
                 samples=[1e4], summary={})
    new = _run(store, [st_], command="clusterbench run stream")
    assert [r.id for r in store.list_runs(benchmark="hpl")] == [old]
    assert [r.id for r in store.list_runs(benchmark="stream")] == [new]
    assert [r.id for r in store.list_runs(since="2026-06-01")] == [new]
    assert [r.id for r in store.list_runs(host="nosuchhost")] == []
    assert main(["--db", str(store.path), "results", "list", "--tag", "x", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in doc["runs"]] == [old] and doc["runs"][0]["tags"] == ["x"]
    assert main(["--db", str(store.path), "results", "list", "--since", "yesterday"]) == 2
    assert "--since 'yesterday' is not a date" in capsys.readouterr().err


def test_results_table_in_seed_000s_shape(store: Store, capsys) -> None:
    for blas, topo, grid, v in [("openblas", "pure", "1x2", 10.0), ("openblas", "pure", "2x1", 9.0),
                                ("openblas", "hybrid", "1x1", 8.0), ("blis", "pure", "1x2", 7.0),
                                ("openblas", "pure", "1x2", 12.0)]:
        _run(store, [_hpl(v, blas, topo, grid)])
    t = pivot(store.figures("hpl", "rmax"), ["blas", "topology"], ["grid"], "best")
    assert t.row_keys == [("blis", "pure"), ("openblas", "hybrid"), ("openblas", "pure")]
    assert t.col_keys == [("1x1",), ("1x2",), ("2x1",)]
    assert t.cells[(("openblas", "pure"), ("1x2",))] == {"value": 12.0, "n": 2, "runs": t.cells[(("openblas", "pure"), ("1x2",))]["runs"]}
    assert pivot(store.figures("hpl", "rmax"), ["blas", "topology"], ["grid"], "mean").cells[(("openblas", "pure"), ("1x2",))]["value"] == 11.0
    assert format_table(t)[0] == ["blas", "topology", "grid=1x1", "grid=1x2", "grid=2x1"]
    assert main(["--db", str(store.path), "results", "table", "hpl", "--rows", "blas,topology", "--cols", "grid",
                 "--metric", "rmax"]) == 0
    out = capsys.readouterr().out
    assert "openblas  pure" in out and "12 (2)" in out
    assert main(["--db", str(store.path), "results", "table", "hpl", "--rows", "colour"]) == 2
    assert "'colour' is not a parameter of hpl rmax figures" in capsys.readouterr().err
    assert main(["--db", str(store.path), "results", "table", "hpl", "--rows", "blas", "--metric", "speed"]) == 2


def test_two_hundred_runs_list_filter_and_table_in_a_few_statements(store: Store) -> None:
    with store._tx():  # 200 runs with 5 figures each, written in one transaction to keep the test short
        for i in range(200):
            rec = new_run_record(["clusterbench", "run", "hpl"], {"hostname": "h", "pad": "x" * 20000}, "default")
            rec["started"] = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T10:00:{i % 60:02d}.000+00:00"
            store.db.execute("INSERT INTO runs (id, started, status, command, argv, host, pid, clusterbench_version,"
                             " probe, note) VALUES (?, ?, 'complete', ?, '[]', 'h', 1, 'x', ?, NULL)",
                             (rec["id"], rec["started"], rec["command"], json.dumps(rec["probe"])))
            store.db.execute("INSERT INTO run_tags VALUES (?, ?)", (rec["id"], f"t{i % 7}"))
            for k in range(5):
                r = _hpl(float(i + k), ["openblas", "blis"][i % 2], ["pure", "hybrid"][k % 2], f"{1 + (i // 2) % 2}x2", 64 * (k + 1))
                store.db.execute("INSERT INTO results (run_id, seq, benchmark, metric, value, unit, higher_is_better,"
                                 " params, samples, summary, limits, warnings, measured_at) VALUES"
                                 " (?, ?, 'hpl', 'rmax', ?, 'Gflop/s', 1, ?, ?, '{}', '[]', '[]', 'now')",
                                 (rec["id"], k, r.value, json.dumps(r.params), json.dumps([r.value] * 10)))
    st = Store(store.path, readonly=True)
    statements: list[str] = []
    st.db.set_trace_callback(statements.append)
    assert len(st.list_runs()) == 200
    assert len(st.list_runs(tag="t3", benchmark="hpl", since="2026-03-01")) > 0
    t = pivot(st.figures("hpl", "rmax"), ["blas", "topology"], ["grid"])
    assert len(t.cells) == 8
    assert len(st.select_runs("t2")) == len([i for i in range(200) if i % 7 == 2])
    st.db.set_trace_callback(None)
    # the cost is counted, not timed: a few statements whatever the number of runs (none a run), and
    # a run's figures are not counted at all: their number is kept with the run (schema 9)
    assert len(statements) <= 12, statements
    listing = next(s for s in statements if s.startswith("SELECT r."))  # after the columns' PRAGMA
    plan = " ".join(str(row[-1]) for row in st.db.execute("EXPLAIN QUERY PLAN " + listing))
    assert "results" not in listing and " x" not in plan, (listing, plan)
    # newest first by the index on runs.started (schema 8): no read and sort of every run
    assert "USING INDEX runs_started" in plan and "TEMP B-TREE" not in plan, plan


def test_old_store_read_only_has_no_tags(tmp_path: Path) -> None:
    """A schema-3 file opened read-only (no run_tags table): runs read with no tags, a tag selects nothing."""
    p = tmp_path / "s3.db"
    st = Store(p)
    rid = _run(st, [_hpl(10, "openblas", "pure", "1x2")])
    st.close()
    with sqlite3.connect(p) as db:
        db.execute("DROP TABLE run_tags")
        db.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    ro = Store(p, readonly=True)
    assert ro.schema == 3 and ro.get_run(rid).tags == [] and ro.list_runs(tag="x") == []
    with pytest.raises(UsageError, match="no run or tag"):
        ro.select_runs("baseline")
    ro.close()
    assert Store(p).schema == STORE_SCHEMA and Store(p, readonly=True).select_runs("last") == [rid]
