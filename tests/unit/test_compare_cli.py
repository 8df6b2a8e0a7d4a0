"""`clusterbench compare` and `clusterbench report` from the command line: sides by tag, run id and
'last~N', exit statuses, one-line errors. Unit tier: figures stored as a session stores them in a real
SQLite file (the statistics themselves are tested in test_compare_stats.py, real runs in
test_compare_runs.py); the CLI runs in-process."""
from __future__ import annotations

import json
import random
import sqlite3
import time
from pathlib import Path

import pytest

from clusterbench.benchmarks.base import Result
from clusterbench.cli import main
from clusterbench.session import new_run_record
from clusterbench.store import Store

from comparekit import _fig, _run, _samples


@pytest.fixture(scope="session")
def _db_made_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store of ``db``, written once a session (nine runs' commits took a second under load)."""
    path = tmp_path_factory.mktemp("compare-cli") / "c.db"
    rng = random.Random(7)
    st = Store(path)
    for i in range(3):
        _run(st, [_fig("triad", _samples(rng, 10000)), _fig("copy", _samples(rng, 9000))], tags=["before"])
    for i in range(3):
        _run(st, [_fig("triad", _samples(rng, 12000)), _fig("copy", _samples(rng, 9000))], tags=["after"])
    for i in range(3):
        _run(st, [_fig("triad", _samples(rng, 8000)), _fig("copy", _samples(rng, 9000))], tags=["slower"])
    st.close()
    return path


@pytest.fixture()
def db(_db_made_once: Path, tmp_path: Path) -> str:
    """Three runs each tagged before, after (triad +20%) and slower (triad -20%): this test's own copy."""
    import shutil

    for f in _db_made_once.parent.iterdir():
        shutil.copy2(f, tmp_path / f.name)
    return str(tmp_path / "c.db")


def test_compare_tags_pools_runs_and_judges(db: str, capsys) -> None:
    assert main(["--db", db, "compare", "before", "after", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["compare_schema"] == 1 and len(doc["sides"]["a"]["runs"]) == 3 and len(doc["sides"]["b"]["runs"]) == 3
    by = {m["metric"]: m["comparison"] for m in doc["matches"]}
    assert by["triad"]["verdict"] == "better" and 1.15 < by["triad"]["ratio"] < 1.25
    assert by["copy"]["verdict"] == "no significant difference"
    assert main(["--db", db, "compare", "before", "after"]) == 0
    out = capsys.readouterr().out
    assert "stream triad" in out and "better" in out and "method:" in out and "not shown (--all" in out


def test_fail_if_worse_exits_6_only_beyond_its_threshold(db: str, capsys) -> None:
    assert main(["--db", db, "compare", "before", "slower", "--fail-if-worse", "5"]) == 6
    assert "worse by more than 5%" in capsys.readouterr().out
    assert main(["--db", db, "compare", "before", "slower", "--fail-if-worse", "30"]) == 0
    assert main(["--db", db, "compare", "before", "after", "--fail-if-worse", "1"]) == 0
    assert main(["--db", db, "compare", "before", "slower", "--fail-if-worse", "-3"]) == 2


def test_compare_by_last_and_metric(db: str, capsys) -> None:
    assert main(["--db", db, "compare", "last~5,last~4,last~3", "last~2,last~1,last", "--metric", "triad", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {m["metric"] for m in doc["matches"]} == {"triad"} and doc["summary"]["worse"] == 1


@pytest.mark.parametrize("argv, words", [
    (["compare", "before", "nosuch"], "no run or tag 'nosuch'"),
    (["compare", "before", "before"], "is on both sides"),
    (["compare", "before", "after", "--metric", "latency"], "has no figure named 'latency'; its metrics: copy, triad"),
    (["compare", "before", "after", "--benchmark", "nosuch"], "unknown benchmark 'nosuch'"),
    (["report", "before", "after", "last", "--compare", "-o", "x"], "--compare needs exactly two selectors"),
])
def test_bad_compare_input_is_one_line(db: str, capsys, argv: list[str], words: str) -> None:
    assert main(["--db", db, *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_sides_with_nothing_in_common_say_so(db: str, tmp_path: Path, capsys) -> None:
    st = Store(db)
    lat = Result(benchmark="memlat", metric="latency", value=80.0, unit="ns", higher_is_better=False,
                 params={"size_bytes": 1 << 26}, samples=[80.0, 81.0], summary={})
    rec = new_run_record(["clusterbench", "run", "memlat"], {"hostname": "h"}, "default")
    rec["tags"] = ["lat"]
    rid = st.begin_run(rec)
    st.add_result(rid, lat)
    st.finish_run(rid, "complete")
    st.close()
    assert main(["--db", db, "compare", "before", "lat"]) == 2
    err = capsys.readouterr().err
    assert "nothing to compare" in err and "stream" in err and "memlat" in err


def test_environment_difference_is_named(tmp_path: Path, capsys) -> None:
    rng = random.Random(3)
    st = Store(tmp_path / "e.db")
    nic = lambda mtu: {"hostname": "h", "environment": {"kernel": "6.1", "nics": [{"name": "eth0", "mtu": mtu}]}}
    for mtu, tag in ((1500, "std"), (9000, "jumbo")):
        for _ in range(2):
            _run(st, [_fig("triad", _samples(rng, 10000))], tags=[tag], probe=nic(mtu))
    st.close()
    assert main(["--db", str(tmp_path / "e.db"), "compare", "std", "jumbo"]) == 0
    out = capsys.readouterr().out
    assert "what else changed" in out and "1500 -> 9000" in out and "eth0" in out


def test_compare_reads_a_schema3_store_read_only(db: str, capsys) -> None:
    """An older store (no tags table) compares by run ids, read as it is."""
    with sqlite3.connect(db) as c:
        c.execute("DROP TABLE run_tags")
        c.execute("ALTER TABLE runs DROP COLUMN note")
        c.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    assert main(["--db", db, "compare", "last~5,last~4,last~3", "last~2,last~1,last", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["worse"] == 1
    assert Store(db, readonly=True).schema == 3  # compare does not write


@pytest.mark.heavy(1.8)
def test_report_of_tags_with_comparison(db: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "rep"
    assert main(["--db", db, "report", "before", "after", "--compare", "-o", str(out)]) == 0
    assert (out / "index.html").is_file() and any((out / "plots").glob("*comparison*.png"))
    page = (out / "index.html").read_text()
    assert "stream" in page and "triad" in page
    assert main(["--db", db, "report", "before", "-o", str(out)]) == 2  # exists: --force to replace
    assert main(["--db", db, "report", "before", "-o", str(out), "--force"]) == 0
    capsys.readouterr()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["--db", db, "report", "before", "-o", str(blocker / "sub")]) == 2
    err = capsys.readouterr().err
    assert str(blocker) in err and err.count("\n") == 1


# -- issue 23: which runs may be pooled; absurd selectors; wording ---------------------------------------
def _unfinished(st: Store, tag: str, figs: list[Result], how: str) -> str:
    """A run left as ``how``: 'running' (this process records it and lives), 'killed' (recorded by a
    process that is gone: its start time is another's), or 'interrupted' (closed incomplete)."""
    rec = new_run_record(["clusterbench", "run", "stream"], {"hostname": "h"}, "default")
    rec["tags"] = [tag]
    if how == "killed":
        rec["pid_start"] = (rec["pid_start"] or 0) + 1
    rid = st.begin_run(rec)
    for f in figs:
        st.add_result(rid, f)
    if how == "interrupted":
        st.finish_run(rid, "incomplete", error="interrupted (Ctrl-C)")
    time.sleep(0.002)
    return rid


@pytest.fixture()
def mixed(db: str) -> tuple[str, dict[str, str]]:
    """'after' gains a running run with 1 of 2 figures, a killed one and an interrupted one, each far
    slower: pooled, they would make triad worse."""
    rng = random.Random(11)
    st = Store(db)
    ids = {how: _unfinished(st, "after", [_fig("triad", _samples(rng, 2000))], how)
           for how in ("running", "killed", "interrupted")}
    st.close()
    return db, ids


def test_compare_leaves_out_runs_that_are_not_complete_and_says_why(mixed, capsys) -> None:
    db, ids = mixed
    assert main(["--db", db, "compare", "before", "after", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    b = doc["sides"]["b"]
    assert doc["compare_schema"] == 1 and doc["options"]["include_incomplete"] is False
    assert len(b["runs"]) == 3 and all(r["status"] == "complete" for r in b["runs"])
    left = {x["id"]: x for x in b["left_out"]}
    assert set(left) == set(ids.values()) and doc["sides"]["a"]["left_out"] == []
    assert left[ids["running"]]["status"] == "running" and "still running" in left[ids["running"]]["reason"]
    assert "1 figure(s) so far" in left[ids["running"]]["reason"]
    assert "the process running it died" in left[ids["killed"]]["reason"]
    assert "interrupted (Ctrl-C)" in left[ids["interrupted"]]["reason"]
    by = {m["metric"]: m["comparison"] for m in doc["matches"]}
    assert by["triad"]["verdict"] == "better"  # the three slow partial runs did not weigh on it
    assert main(["--db", db, "compare", "before", "after"]) == 0
    out = capsys.readouterr().out
    assert "B: left out 3 run(s) not complete:" in out and "still running" in out and "--include-incomplete" in out


def test_include_incomplete_pools_them_and_says_so(mixed, capsys) -> None:
    db, ids = mixed
    assert main(["--db", db, "compare", "before", "after", "--include-incomplete", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["options"]["include_incomplete"] is True and doc["sides"]["b"]["left_out"] == []
    assert {r["id"] for r in doc["sides"]["b"]["runs"]} >= set(ids.values())
    assert main(["--db", db, "compare", "before", "after", "--include-incomplete"]) == 0
    assert "B: pooled 3 run(s) that are not complete" in capsys.readouterr().out


def test_a_side_with_no_complete_run_is_one_line(mixed, capsys) -> None:
    db, ids = mixed
    assert main(["--db", db, "compare", "before", ids["running"][:8]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no complete run" in err and "still running" in err
    assert "--include-incomplete" in err
    assert main(["--db", db, "compare", "before", ids["running"][:8], "--include-incomplete", "--json"]) == 0


@pytest.mark.heavy(0.9)
def test_the_report_comparison_pools_by_the_same_rule(mixed, tmp_path: Path, capsys) -> None:
    db, ids = mixed
    out = tmp_path / "rep"
    assert main(["--db", db, "report", "before", "after", "--compare", "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not set(ids.values()) & set(doc["runs"]) and {x["id"] for x in doc["left_out"]} == set(ids.values())
    page = (out / "index.html").read_text()
    assert "after: left out 3 run(s) not complete" in page and "comparison B: left out 3 run(s)" in page
    assert main(["--db", db, "report", ids["killed"][:8], "-o", str(tmp_path / "r2")]) == 2
    assert "has no complete run" in capsys.readouterr().err and not (tmp_path / "r2").exists()
    assert main(["--db", db, "report", ids["killed"][:8], "-o", str(tmp_path / "r2"), "--include-incomplete"]) == 0


@pytest.mark.parametrize("argv", [
    ["compare", "last~99999999999999999999999", "last"],
    ["compare", "last~" + "9" * 5000, "last"],
    ["compare", "before", "last~9223372036854775808"],
    ["compare", "tag:before", "run:last~99999999999999999999999"],
    ["report", "last~99999999999999999999999", "-o", "never"],
    ["results", "show", "last~99999999999999999999999"],
    ["results", "tag", "last~99999999999999999999999", "x"],
    ["results", "place", "last~99999999999999999999999"],
    ["results", "export", "last~99999999999999999999999", "--format", "json"],
    ["results", "table", "stream", "--rows", "threads", "--runs", "last~99999999999999999999999"],
])
def test_an_absurd_last_n_is_a_usage_error(db: str, argv: list[str], capsys) -> None:
    assert main(["--db", db, *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "selects nothing: the store holds 9 run(s)" in err and "internal" not in err


def test_last_n_names_a_run_wherever_a_run_is_asked_for(db: str, capsys) -> None:
    st = Store(db, readonly=True)
    second = st.select_runs("last~1")[0]
    assert st.resolve("last~1") == second and st.resolve("last~8") == st.select_runs("last~8")[0]
    assert main(["--db", db, "results", "show", "last~1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["id"] == second
    assert main(["--db", db, "results", "list", "--limit", "99999999999999999999999"]) == 0  # all of them
    assert capsys.readouterr().out.count("\n") == 10


def test_compare_help_and_bounds_agree(db: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "exit 6 when a figure" in text and "exit 1" not in text and "0 <= PCT < 100" in text
    for bad in ("100", "-1", "nan", "inf"):
        assert main(["--db", db, "compare", "before", "slower", "--fail-if-worse", bad]) == 2
        assert "from 0 up to (not including) 100" in capsys.readouterr().err
    assert main(["--db", db, "compare", "before", "slower", "--fail-if-worse", "99.9"]) == 0
    assert main(["--db", db, "compare", "before", "slower", "--fail-if-worse", "0"]) == 6


def test_an_unknown_metric_names_the_metrics_there(db: str, capsys) -> None:
    assert main(["--db", db, "compare", "before", "after", "--metric", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "no figure named 'nosuch'" in err and "copy, triad" in err and "stored nothing" not in err
    assert main(["--db", db, "compare", "before", "after", "--benchmark", "memlat"]) == 2
    assert "has no figures of memlat; its runs hold figures of stream" in capsys.readouterr().err


def test_results_list_refuses_an_unknown_benchmark_as_compare_does(db: str, capsys) -> None:
    assert main(["--db", db, "results", "list", "--benchmark", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err == "clusterbench: error: unknown benchmark 'nosuch'; see 'clusterbench list' for the benchmarks\n"
    assert main(["--db", db, "compare", "before", "after", "--benchmark", "nosuch"]) == 2
    assert capsys.readouterr().err == err
    assert main(["--db", db, "results", "list", "--benchmark", "memlat"]) == 0  # known, no runs: an empty list
    assert main(["--db", db, "results", "list", "--benchmark", "bandwidth"]) == 0  # membw's old name


def test_results_table_refuses_an_empty_selector(db: str, capsys) -> None:
    assert main(["--db", db, "results", "table", "stream", "--rows", "threads", "--runs", ""]) == 2
    assert "an empty run selector selects nothing" in capsys.readouterr().err
    assert main(["--db", db, "results", "table", "stream", "--rows", "threads", "--runs", " , "]) == 2
