"""``results copy``: a whole history from one store to another (SQLite or PostgreSQL, either way), losslessly.

Every row of ``runs``, ``run_tags``, ``fixes`` and ``results`` is copied as it is, column for column (a
result keeps its id), in one transaction of the target: a copy that fails or is killed leaves the
target as it was. ``meta`` (the schema version, who created the store) stays the target's own. A target
that already holds runs or fixes is refused unless ``merge``: then only the runs and fixes it lacks
(by id) are added, their results under new ids, and the rest is left as it is.

A source of an older schema is read as it is (it is opened read-only, so never upgraded): the columns
it lacks get the target's defaults, and the data upgrades of the versions between (e.g. schema 3's
renaming of stored ``bandwidth`` figures to ``membw``) are applied to what was copied.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterbench.errors import UsageError
from clusterbench.store.db import Store
from clusterbench.store.schema import STORE_SCHEMA, UPGRADES

#: tables copied, parents first, with the columns that order (and page through) their rows
TABLES = (("runs", ("id",)), ("run_tags", ("run_id", "tag")), ("fixes", ("id",)), ("results", ("id",)))
#: rows read and written at a time
PAGE = 2000


@dataclass
class Copied:
    """What a copy did: rows copied per table, and (merging) the runs and fixes the target already had."""

    source: str
    target: str
    rows: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"from": self.source, "to": self.target, "copied": self.rows, "skipped": self.skipped}


def copy_store(source: Store, target: Store, merge: bool = False) -> Copied:
    """Copy every run, tag, fix and figure of ``source`` (opened read-only) into ``target``."""
    held = {t: _count(target, t) for t in ("runs", "fixes")}
    src_tables = source._tables()
    if any(held.values()) and not merge:
        raise UsageError(f"the target store {target.name} is not empty ({held['runs']} runs, {held['fixes']} fixes)",
                         "copy into a new or empty store, or add --merge to add only the runs and fixes it lacks")
    done = Copied(source.name, target.name)
    with target._tx():
        have = {t: set() for t in ("runs", "fixes")}
        if merge:
            have = {t: {r[0] for r in target.db.execute(f"SELECT id FROM {t}")} for t in have}
        for table, key in TABLES:
            if table not in src_tables:
                done.rows[table] = 0
                continue
            cols = _common_columns(source, target, table)
            if merge and table == "results":
                cols = [c for c in cols if c != "id"]  # the target's own ids: the copied run's figures follow
            n = skipped = 0
            insert = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
            for page in _pages(source, table, key, cols):
                rows = [tuple(r[c] for c in cols) for r in page]
                keep = [row for row in rows if _wanted(table, dict(zip(cols, row)), have)]
                skipped += len(rows) - len(keep)
                if keep:
                    target.db.executemany(insert, keep)
                n += len(keep)
            done.rows[table] = n
            if table in have:
                done.skipped[table] = skipped
        for v in range(source.schema or STORE_SCHEMA, STORE_SCHEMA):  # the data upgrades since the source's schema
            for stmt in UPGRADES.get(v, ()):
                if stmt.startswith("UPDATE "):
                    target.db.execute(stmt)
        target.backend.after_copy(target.db)
    return done


def _wanted(table: str, row: dict, have: dict[str, set]) -> bool:
    """Merging: a run or fix the target holds is kept as it is there, with its tags and figures."""
    if table in have:
        return row["id"] not in have[table]
    return row["run_id"] not in have["runs"]


def _count(store: Store, table: str) -> int:
    if table not in store._tables():
        return 0
    return int(store._read(f"SELECT count(*) FROM {table}")[0][0])


def _common_columns(source: Store, target: Store, table: str) -> list[str]:
    theirs = target.backend.columns(target.db, table)
    try:
        mine = source.backend.columns(source.db, table)
    except source.backend.errors as exc:
        raise source.backend.error(exc) from exc
    return sorted(c for c in mine if c in theirs)


def _pages(store: Store, table: str, key: tuple[str, ...], cols: list[str]) -> Any:
    """The rows of ``table``, ``PAGE`` at a time in key order (no cursor held open between pages)."""
    select = ", ".join(dict.fromkeys([*key, *cols]))
    order = ", ".join(key)
    after: tuple = ()
    while True:
        # a row value compares as the primary key orders (SQLite 3.15+, PostgreSQL): one index range per page
        where = f" WHERE ({order}) > ({', '.join('?' * len(key))})" if after else ""
        args = after
        rows = store._read(f"SELECT {select} FROM {table}{where} ORDER BY {order} LIMIT {PAGE}", args)
        if not rows:
            return
        yield rows
        after = tuple(rows[-1][k] for k in key)
