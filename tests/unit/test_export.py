"""`results export` (issue 14 #8): stdout with `-o -`, no silent overwrite, a full device is one line,
the CSV says whether its run completed. In-process on a real store (unit tier: no process started)."""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.cli import main
from clusterbench.export.csvrows import CSV_COLUMNS
from clusterbench.session import new_run_record
from clusterbench.store import Store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Two runs: a complete stream run and an incomplete (interrupted) one, with real Results."""
    p = tmp_path / "r.db"
    st = Store(p)
    ctx = RunContext(probe={})
    stream = get_benchmark("stream")
    done = new_run_record(["clusterbench", "run", "stream"], {}, "quick")
    done["started"] = "2026-11-23T00:00:00.000+00:00"
    st.begin_run(done)
    for v in (30000.0, 60000.0):
        st.add_result(done["id"], ctx.emit(stream, "triad", [v, v * 0.98], {"threads": 1 if v < 40000 else 2}))
    st.finish_run(done["id"], "complete")
    cut = new_run_record(["clusterbench", "run", "stream"], {}, "quick")
    cut["started"] = "2026-11-23T00:01:00.000+00:00"
    st.begin_run(cut)
    st.add_result(cut["id"], ctx.emit(stream, "copy", [25000.0, 24000.0], {"threads": 1}))
    st.finish_run(cut["id"], "incomplete", "interrupted (Ctrl-C)")
    st.close()
    return p


def _err(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_dash_is_stdout_not_a_file(db: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--db", str(db), "results", "export", "last", "--format", "json", "-o", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["status"] == "incomplete" and doc["results"][0]["metric"] == "copy"
    assert not (tmp_path / "-").exists()


def test_an_existing_file_is_kept_unless_forced(db: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "x.csv"
    out.write_text("precious\n")
    assert main(["--db", str(db), "results", "export", "last", "--format", "csv", "-o", str(out)]) == 2
    assert f"{out} exists" in _err(capsys) and out.read_text() == "precious\n"
    assert main(["--db", str(db), "results", "export", "last", "--format", "csv", "-o", str(out), "--force"]) == 0
    assert out.read_text().startswith("run_id,")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".cb-export-")] == []  # no temp left


def test_a_full_device_is_one_line_and_nothing_else(db: Path, capsys) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    assert main(["--db", str(db), "results", "export", "last", "--format", "json", "-o", "/dev/full"]) == 3
    err = _err(capsys)
    assert "cannot write /dev/full: No space left on device" in err and "internal error" not in err


def test_an_unwritable_destination_is_one_line(db: Path, tmp_path: Path, capsys) -> None:
    assert main(["--db", str(db), "results", "export", "last", "--format", "csv",
                 "-o", str(tmp_path / "no" / "such" / "x.csv")]) == 3
    assert "cannot write" in _err(capsys)
    assert main(["--db", str(db), "results", "export", "last", "--format", "csv", "-o", str(tmp_path)]) == 2
    assert "is a directory" in _err(capsys)


def test_csv_says_whether_the_run_completed(db: Path, tmp_path: Path) -> None:
    rows = {}
    for ref, name in (("last", "cut.csv"), (None, "done.csv")):
        if ref is None:
            st = Store(db, readonly=True)
            ref = next(r.id for r in st.list_runs() if r.status == "complete")
            st.close()
        out = tmp_path / name
        assert main(["--db", str(db), "results", "export", ref, "--format", "csv", "-o", str(out)]) == 0
        table = list(csv.reader(io.StringIO(out.read_text())))
        assert table[0] == CSV_COLUMNS
        rows[name] = [dict(zip(table[0], r)) for r in table[1:]]
    assert [r["run_status"] for r in rows["done.csv"]] == ["complete", "complete"]
    assert {r["run_error"] for r in rows["done.csv"]} == {""}
    assert rows["cut.csv"][0]["run_status"] == "incomplete"
    assert rows["cut.csv"][0]["run_error"] == "interrupted (Ctrl-C)"
    # the columns that existed before keep their positions
    assert CSV_COLUMNS[:17] == ["run_id", "benchmark", "metric", "value", "unit", "higher_is_better", "n", "best",
                                "median", "min", "max", "cv", "limit_name", "limit_value", "limit_fraction",
                                "params", "samples"]


def test_hpccoutf_export_of_a_stored_run(db: Path, capsys) -> None:
    st = Store(db, readonly=True)
    done = next(r.id for r in st.list_runs() if r.status == "complete")
    st.close()
    assert main(["--db", str(db), "results", "export", done, "--format", "hpccoutf"]) == 0
    text = capsys.readouterr().out
    assert "Begin of Summary section." in text and "End of Summary section." in text
    assert "SingleSTREAM_Triad=30\n" in text and "StarSTREAM_Triad=30\n" in text  # 60,000 MB/s over 2 threads
    assert "Success=1" in text
