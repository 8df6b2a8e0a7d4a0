"""Stored user text reaches a terminal escaped (issue from a hostile probe, round 3).

A ``--note``, a tag, a stored command line, host name, error text or benchmark string may hold escape
sequences (an OSC 52 clipboard write), carriage returns, backspaces: every printer shows them escaped
through one function (``clusterbench.text.terminal_text``), JSON keeps the exact text. A note has a
stated limit (1000 characters) refused in one line before anything runs. A stored command line is
shown shell-quoted from its argv: pasted, it runs no ``$(...)``. Seconds in messages keep the
precision they need (``--timeout 0.2`` is not "0 s").

Unit tier: a real SQLite store, the CLI in-process. Integration: real ``clusterbench`` processes and
a real (short) intcpu run, output read through a pipe."""
from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench.store.names import NOTE_LIMIT

from terminaltextkit import _raw_controls

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

#: a fast real run (about a second)
FAST = ("--quick", "--no-sweep", "--time", "0.3", "--samples", "3", "--max-prime", "2000")


def _cli(*args: str, db: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    return subprocess.run([sys.executable, "-m", "clusterbench", *(["--db", str(db)] if db else []), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.integration
def test_a_real_run_with_a_hostile_note_prints_no_control_characters(tmp_path):
    db = tmp_path / "r.db"
    hostile = "\x1b]52;c;aGk=\x07\r evil"
    for tag in ("pre", "post"):  # not hex: a tag like "a" is also the start of a run id 1 time in 16
        p = _cli("run", "intcpu", *FAST, "--tag", tag, "--note", hostile, db=db)
        assert p.returncode == 0 and not _raw_controls(p.stdout + p.stderr), (p.stdout, p.stderr)
    for args in (("results", "show", "last"), ("results", "list"), ("compare", "pre", "post", "--all"),
                 ("results", "tag", "last", "--note", hostile + " again")):
        p = _cli(*args, db=db)
        assert p.returncode == 0 and not _raw_controls(p.stdout + p.stderr), (args, p.stdout, p.stderr)
        assert "\\x1b]52;c;aGk=\\x07\\r evil" in p.stdout, (args, p.stdout)
    doc = json.loads(_cli("results", "show", "last", "--json", db=db).stdout)
    assert doc["run"]["note"] == hostile + " again" and doc["run"]["argv"][-1] == hostile  # exact in JSON


@pytest.mark.integration
def test_a_pasted_command_line_runs_no_command_substitution(tmp_path):
    """A real run whose note holds ``$(touch FILE)``: ``results show`` prints a command line a shell
    parses back into the run's argv, without running the substitution."""
    marker = tmp_path / "pwned"
    note = f"$(touch {marker}) `touch {marker}` it's"
    run = _cli("run", "intcpu", *FAST, "--note", note, db=tmp_path / "r.db")
    assert run.returncode == 0, run.stderr
    show = _cli("results", "show", "last", db=tmp_path / "r.db")
    shown = next(ln for ln in show.stdout.splitlines() if "  command: " in ln).split("  command: ", 1)[1]
    argv = ["clusterbench", "--db", str(tmp_path / "r.db"), "run", "intcpu", *FAST, "--note", note]
    assert shlex.split(shown) == argv, shown
    words = subprocess.run(["sh", "-c", f"set -- {shown}; printf '%s\\0' \"$@\""], capture_output=True,
                           timeout=10).stdout.decode().split("\0")[:-1]
    assert words == argv and not marker.exists()  # what a paste would run: the same words, nothing else


@pytest.mark.integration
def test_a_real_run_with_an_over_long_note_is_refused_and_stores_nothing(tmp_path):
    db = tmp_path / "r.db"
    p = _cli("run", "intcpu", *FAST, "--note", "n" * (NOTE_LIMIT + 1), db=db)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(err) == 1 and "a note may hold" in err[0], p.stderr
    assert not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    assert _cli("run", "intcpu", *FAST, "--note", "n" * NOTE_LIMIT, db=db).returncode == 0  # the limit itself


@pytest.mark.integration
def test_sweep_network_with_a_sub_second_timeout_says_so(tmp_path):
    """Refused before any host is contacted (the estimate is checked first): no cluster needed."""
    p = _cli("sweep", "network", "--hosts", "nodea,nodeb", "--timeout", "0.2", "--no-store", db=tmp_path / "r.db",
             timeout=60)
    assert p.returncode == 2 and "above the 0.2 s timeout" in p.stderr and " 0 s" not in p.stderr, p.stderr
