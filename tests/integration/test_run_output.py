"""What `run` prints for a person: a suite (node, mpi, hpcc) prints its summary, about a screen, and
every figure's row only with --verbose (or later with `results show`); a single benchmark prints its
table. Real runs of the node suite, cut to STREAM so it takes seconds."""
from __future__ import annotations

import re

import pytest

from clusterbench.cli import main

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

NODE = ["run", "node", "--quick", "--skip", "dgemm,fpu,membw,memlat,peak"]


def _rows(text: str) -> list[str]:
    """The result table's rows: lines naming a stream metric with a value and a unit."""
    return [line for line in text.splitlines() if re.match(r"\s*stream\s+\S+", line)]


def test_a_suite_prints_its_summary_and_where_the_rows_are(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    assert main(["--db", db, *NODE]) == 0
    out = capsys.readouterr().out
    assert "summary" in out and "STREAM triad" in out and not _rows(out), out
    m = re.search(r"(\d+) figures from 1 benchmark; every figure's row: clusterbench results show (\w{8}) "
                  r"\(or --verbose\)", out)
    assert m and int(m.group(1)) > 0, out
    assert main(["--db", db, "results", "show", m.group(2)]) == 0
    assert len(_rows(capsys.readouterr().out)) == int(m.group(1))  # every row is there, stored


def test_verbose_prints_every_row_and_the_summary(tmp_path, capsys):
    assert main(["--db", str(tmp_path / "r.db"), *NODE, "--verbose"]) == 0
    out = capsys.readouterr().out
    assert _rows(out) and "summary" in out and "every figure's row" not in out, out


def test_without_a_store_it_says_to_rerun_with_verbose(tmp_path, capsys):
    assert main(["--db", str(tmp_path / "r.db"), *NODE, "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "every figure's row: rerun with --verbose" in out and not _rows(out), out
