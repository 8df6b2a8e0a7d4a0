"""docs/export.md's SQL views run on a real store and give a figure over time per node (pure: SQLite
in this process)."""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from bundlekit import make_store

DOC = Path(__file__).resolve().parents[2] / "docs" / "export.md"


def test_the_documented_views_give_each_figure_over_time_per_node(tmp_path: Path) -> None:
    ids = make_store(tmp_path / "r.db", runs=3)
    sql = re.search(r"```sql\n(.*?)```", DOC.read_text(), re.S)[1]
    db = sqlite3.connect(tmp_path / "r.db")
    db.executescript(sql)
    db.executescript(sql)  # IF NOT EXISTS: creating them again changes nothing
    rows = db.execute("SELECT time, node, benchmark, metric_name, unit, params, value, run_id, tags "
                      "FROM cb_figure_over_time ORDER BY time, params").fetchall()
    assert len(rows) == 6 and [r[7] for r in rows[::2]] == ids
    time, node, bench, metric, unit, params, value, _, tags = rows[0]
    assert (bench, metric, unit, tags) == ("stream", "triad", "MB/s", "base") and node and '"threads":1' in params
    assert time == "2026-11-23T00:00:00.000+00:00" and value > 29000
    db.close()
    from clusterbench.store import Store
    assert len(Store(tmp_path / "r.db").list_runs()) == 3  # the store opens, writable, with the views in it
