"""The store's schema: its version, the tables (:data:`DDL`) and the upgrades that take an older file
to this version in place. The columns are described in :mod:`clusterbench.store.db`.

Schema history: 1 (first release; its earliest files lack ``runs.notes``, which the upgrade adds);
2 adds ``runs.cluster``; 3 adds ``runs.pid_start`` and ``runs.boot_id`` and renames stored
``bandwidth`` figures to ``membw`` (the benchmark's name since 0.3); 4 adds the user's ``runs.note`` and
the ``run_tags`` table; 5 adds ``fixes``; 6 adds ``runs.energy``; 7 adds ``fixes.pid``, ``pid_start`` and
``boot_id`` (a fix left ``applying`` by a process that is gone reads as ``interrupted``); 8 adds the indexes
``runs_started`` on ``runs(started)`` (the newest runs without sorting them all) and ``runs_id_lower`` on
``runs(lower(id))`` (a run by a prefix of its id without reading every id); 9 adds ``runs.figures``,
the run's number of rows in ``results`` (kept by ``Store.add_result``; ``results list`` reads it instead
of counting every run's figures). An older file is upgraded in place (1 -> 2 -> ... -> 9, one
transaction) when it is opened for writing, and read as it is when opened read-only (an old file has no
tags and no note; a schema-8 file's listing counts each run's figures).
"""
from __future__ import annotations

import re

STORE_SCHEMA = 9
#: older schemas this version reads, and upgrades when it writes: UPGRADES[v] takes v to v + 1
UPGRADES = {
    # 'notes' joined schema 1 after its first commit without a version bump: added when missing
    1: ("ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '[]'",
        "ALTER TABLE runs ADD COLUMN cluster TEXT NOT NULL DEFAULT '{}'"),
    2: ("ALTER TABLE runs ADD COLUMN pid_start INTEGER",
        "ALTER TABLE runs ADD COLUMN boot_id TEXT",
        "UPDATE results SET benchmark='membw' WHERE benchmark='bandwidth'"),
    3: ("ALTER TABLE runs ADD COLUMN note TEXT",
        "CREATE TABLE IF NOT EXISTS run_tags (run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
        " tag TEXT NOT NULL, PRIMARY KEY (run_id, tag))",
        "CREATE INDEX IF NOT EXISTS run_tags_tag ON run_tags(tag)"),
    4: ('''CREATE TABLE IF NOT EXISTS fixes (
    id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    rule TEXT NOT NULL,
    hosts TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('applying', 'applied', 'undone')),
    actions TEXT NOT NULL,
    finding TEXT NOT NULL,
    verify TEXT,
    ended TEXT,
    error TEXT
)''',),
    5: ("ALTER TABLE runs ADD COLUMN energy TEXT",),
    6: ("ALTER TABLE fixes ADD COLUMN pid INTEGER",
        "ALTER TABLE fixes ADD COLUMN pid_start INTEGER",
        "ALTER TABLE fixes ADD COLUMN boot_id TEXT"),
    # the runs in time order (results list, 'last', --since) without reading and sorting every run
    # and a run by a prefix of its id, whatever its case, without reading every id
    7: ("CREATE INDEX IF NOT EXISTS runs_started ON runs(started)",
        "CREATE INDEX IF NOT EXISTS runs_id_lower ON runs(lower(id))"),
    # each run's number of figures kept with it: a listing of every run counted each run's figures
    8: ("ALTER TABLE runs ADD COLUMN figures INTEGER NOT NULL DEFAULT 0",
        "UPDATE runs SET figures = (SELECT count(*) FROM results x WHERE x.run_id = runs.id)"),
}

DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    ended TEXT,
    status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'incomplete')),
    error TEXT,
    command TEXT NOT NULL,
    argv TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    clusterbench_version TEXT NOT NULL,
    profile TEXT,
    probe TEXT NOT NULL,
    builds TEXT NOT NULL DEFAULT '{}',
    warnings TEXT NOT NULL DEFAULT '[]',
    notes TEXT NOT NULL DEFAULT '[]',
    cluster TEXT NOT NULL DEFAULT '{}',
    pid_start INTEGER,
    boot_id TEXT,
    note TEXT,
    energy TEXT,
    figures INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_started ON runs(started);
CREATE INDEX IF NOT EXISTS runs_id_lower ON runs(lower(id));
CREATE TABLE IF NOT EXISTS run_tags (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (run_id, tag)
);
CREATE INDEX IF NOT EXISTS run_tags_tag ON run_tags(tag);
CREATE TABLE IF NOT EXISTS fixes (
    id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    rule TEXT NOT NULL,
    hosts TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('applying', 'applied', 'undone')),
    actions TEXT NOT NULL,
    finding TEXT NOT NULL,
    verify TEXT,
    ended TEXT,
    error TEXT,
    pid INTEGER,
    pid_start INTEGER,
    boot_id TEXT
);
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    benchmark TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL NOT NULL,
    unit TEXT NOT NULL,
    higher_is_better INTEGER NOT NULL,
    params TEXT NOT NULL,
    samples TEXT NOT NULL,
    summary TEXT NOT NULL,
    limit_json TEXT,
    limits TEXT NOT NULL,
    warnings TEXT NOT NULL,
    kernel TEXT,
    measured_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id, seq);
CREATE INDEX IF NOT EXISTS results_metric ON results(benchmark, metric);
"""


def upgraded_tables(since: int) -> list[str]:
    """The tables the upgrades from schema ``since`` to :data:`STORE_SCHEMA` change (their columns, indexes
    or rows): those whose planner statistics an upgrade renews."""
    names = (re.findall(r"(?:ALTER TABLE|CREATE TABLE IF NOT EXISTS|UPDATE) (\w+)|INDEX IF NOT EXISTS \w+ ON (\w+)", stmt)
             for v in range(since, STORE_SCHEMA) for stmt in UPGRADES.get(v, ()))
    return sorted({n for found in names for pair in found for n in pair if n})
