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


def _fig(metric: str, samples: list[float], higher: bool = True, **params) -> Result:
    return Result(benchmark="stream", metric=metric, value=max(samples) if higher else min(samples), unit="MB/s",
                  higher_is_better=higher, params={"variant": "regular", "threads": 1, "order": "compact",
                                                   "cpu_node": None, "mem_node": None, **params},
                  samples=samples, summary={})


def _run(st: Store, figs: list[Result], tags=(), probe=None) -> str:
    rec = new_run_record(["clusterbench", "run", "stream"], probe or {"hostname": "h"}, "default")
    rec["tags"] = list(tags)
    rid = st.begin_run(rec)
    for f in figs:
        st.add_result(rid, f)
    st.finish_run(rid, "complete")
    time.sleep(0.002)
    return rid


def _samples(rng: random.Random, centre: float, n: int = 10, spread: float = 0.005) -> list[float]:
    return [centre * (1 + rng.gauss(0, spread)) for _ in range(n)]


@pytest.fixture()
def db(tmp_path: Path) -> str:
    rng = random.Random(7)
    st = Store(tmp_path / "c.db")
    for i in range(3):
        _run(st, [_fig("triad", _samples(rng, 10000)), _fig("copy", _samples(rng, 9000))], tags=["before"])
    for i in range(3):
        _run(st, [_fig("triad", _samples(rng, 12000)), _fig("copy", _samples(rng, 9000))], tags=["after"])
    for i in range(3):
        _run(st, [_fig("triad", _samples(rng, 8000)), _fig("copy", _samples(rng, 9000))], tags=["slower"])
    st.close()
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
    (["compare", "before", "after", "--metric", "latency"], "has no figures of latency"),
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


# -- issue 23: absurd selectors -------------------------------------------------------------------------
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
