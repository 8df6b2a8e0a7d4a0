"""Run history: tags and notes (store schema 4), run selectors, results list filters, results table.

Unit tier: a real SQLite store in a temporary folder, figures stored as the session stores them; the
CLI is called in-process (no process is started)."""
from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.store import Store

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass


@pytest.mark.integration
def test_run_with_tags_and_note_then_select_it(tmp_path: Path) -> None:
    """A real `run fpu --quick --tag --note` stores its tags and note; a bad tag is refused before
    anything runs (exit 2, no run row)."""
    import subprocess
    import sys
    db = tmp_path / "r.db"
    cb = [sys.executable, "-m", "clusterbench", "--db", str(db)]
    done = subprocess.run([*cb, "run", "fpu", "--quick", "--tag", "base", "--tag", "mtu1500", "--note", "stock"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    bad = subprocess.run([*cb, "run", "fpu", "--quick", "--tag", "a b"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "not a valid tag" in bad.stderr and bad.stderr.count("\n") == 1
    st = Store(db, readonly=True)
    (run,) = st.list_runs()
    assert run.tags == ["base", "mtu1500"] and run.note == "stock"
    assert st.select_runs("mtu1500") == [run.id] and len(st.results(run.id)) > 0
