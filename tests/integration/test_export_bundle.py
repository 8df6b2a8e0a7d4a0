"""Issue 28 #3 and #4 with real processes: a real tiny stream run exported as openmetrics passes
``promtool check metrics``; its bundle goes through the CLI (export -> import into another store ->
export: identical but for the import time; refusals exit 2 with one line, nothing stored); reproduce
runs it again here and compares, naming the environment differences."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pgkit
from clikit import run_or_fail

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

pg_shared, pg_url = pgkit.pg_shared, pgkit.pg_url  # the fixtures: a PostgreSQL server of the tests' own

ENV = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
TINY = ["run", "stream", "--threads", "1", "--array-elements", "200000"]


def cb(db: Path | str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_or_fail([sys.executable, "-m", "clusterbench", "--db", str(db), *args], timeout,
                       f"clusterbench {' '.join(args)} did not end in {timeout} s", env=ENV)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("export") / "a.db"
    p = cb(db, *TINY, "--tag", "orig")
    assert p.returncode == 0, p.stderr
    return db


def test_a_real_run_as_openmetrics_passes_promtool(stored: Path, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool absent: ./bootstrap.sh install (Debian package prometheus)")
    for extra in ((), ("--no-timestamps",)):
        p = cb(stored, "results", "export", "orig", "--format", "openmetrics", *extra)
        assert p.returncode == 0 and p.stdout.count("\n# TYPE ") >= 3, p.stderr
        check = run_or_fail([promtool, "check", "metrics"], 30, "promtool hung", input=p.stdout)
        assert check.returncode == 0, check.stdout + check.stderr


def test_a_bundle_round_trips_through_the_cli(stored: Path, tmp_path: Path) -> None:
    first, b = tmp_path / "1.json", tmp_path / "b.db"
    assert cb(stored, "results", "export", "last", "--format", "bundle", "-o", str(first)).returncode == 0
    p = cb(b, "results", "import", str(first))
    assert p.returncode == 0 and p.stdout.startswith("imported run "), p.stderr
    again = cb(b, "results", "export", "last", "--format", "bundle").stdout
    old, new = json.loads(first.read_text()), json.loads(again)
    assert old["imported"] == [] and len(new["imported"]) == 1
    assert first.read_text().splitlines()[6:] == again.splitlines()[8:]  # only "imported" differs
    # the refusals: one line, exit 2, nothing stored
    bad = tmp_path / "bad.json"
    for text, needle in ((first.read_text().replace('"bundle_schema": 1', '"bundle_schema": 9'), "newer"),
                         (first.read_text()[:100], "not valid JSON"),
                         (first.read_text().replace('"unit": "MB/s"', '"unit": "GB/s"', 1), "checksum")):
        bad.write_text(text)
        p = cb(tmp_path / "c.db", "results", "import", str(bad))
        assert p.returncode == 2 and needle in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    assert not (tmp_path / "c.db").exists() or "no run" in cb(tmp_path / "c.db", "results", "show", "last").stderr
    p = cb(b, "results", "import", str(first))
    assert p.returncode == 2 and "the same run" in p.stderr


def test_reproduce_runs_the_bundle_again_and_compares(stored: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "r.json"
    assert cb(stored, "results", "export", "last", "--format", "bundle", "-o", str(bundle)).returncode == 0
    p = cb(tmp_path / "new.db", "reproduce", str(bundle), "--json", timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # one document: the run's own output went to stderr
    rep, = doc["reproduced"]
    assert len(rep["matches"]) == 8 and rep["only_a"] == [] and rep["only_b"] == []
    assert isinstance(rep["env"], list)  # this machine, this kernel: nothing else changed, or named
    assert rep["sides"]["b"]["runs"][0]["tags"] == ["reproduce-" + json.loads(bundle.read_text())["runs"][0]["run"]["id"][:8]]
    text = cb(tmp_path / "new2.db", "reproduce", str(bundle), timeout=120)
    assert text.returncode == 0 and "8 figure(s) matched" in text.stdout
    assert "nothing else changed between A and B" in text.stdout or "what else changed between A and B" in text.stdout


def test_a_bundle_round_trips_through_a_postgresql_store(stored: Path, tmp_path: Path, pg_url: str) -> None:
    """The import writes through the store's own connection: on PostgreSQL too, export -> import ->
    export gives the same document but for the import time."""
    first = tmp_path / "1.json"
    assert cb(stored, "results", "export", "last", "--format", "bundle", "-o", str(first)).returncode == 0
    p = cb(pg_url, "results", "import", str(first))
    assert p.returncode == 0 and p.stdout.startswith("imported run "), p.stderr
    again = cb(pg_url, "results", "export", "last", "--format", "bundle").stdout
    assert first.read_text().splitlines()[6:] == again.splitlines()[8:]
    p = cb(pg_url, "results", "import", str(first))  # the same run again: refused, nothing changed
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
