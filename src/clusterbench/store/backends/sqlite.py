"""The SQLite back end: one file, opened as a URI (read-only with ``mode=ro``), writers serialised by
``BEGIN IMMEDIATE`` and SQLite's busy wait; a hot journal left by a killed writer is rolled back on open."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from clusterbench.errors import StoreError
from clusterbench.store.opening import _check_path, _fix_for, _store_error


class SqliteBackend:
    """One SQLite file. ``location`` is its :class:`~pathlib.Path` (what ``Store.path`` is)."""

    scheme = "sqlite"
    #: what a foreign store is called in "X but not a clusterbench results store"
    kind = "an SQLite file"
    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def __init__(self, location: str | Path, timeout: float) -> None:
        self.location = Path(location)
        self.name = str(self.location)
        self.timeout = timeout

    def fix_for(self) -> str:
        return _fix_for(self.location)

    def connect(self, readonly: bool) -> sqlite3.Connection:
        path = self.location
        if readonly and not path.exists():
            raise StoreError(f"no results store at {path}", "run a benchmark first, or pass --db")
        _check_path(path, readonly)
        if not readonly:
            path.parent.mkdir(parents=True, exist_ok=True)
        uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
        db = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
        if readonly:
            try:
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.OperationalError as exc:
                if getattr(exc, "sqlite_errorname", "") != "SQLITE_READONLY_ROLLBACK":
                    raise
                db.close()
                self._roll_back_hot_journal(exc)
                db = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA foreign_keys = ON")
        return db

    def _roll_back_hot_journal(self, exc: sqlite3.Error) -> None:
        """A writer killed inside a transaction left a hot ``-journal``: SQLite undoes it on the next
        read, but only on a connection that may write (read-only ones fail, 'readonly database').
        Open it so once; nothing else is written, and what was committed stays as it was."""
        path = self.location
        journal = Path(f"{path}-journal")
        if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
            raise StoreError(f"results store {path} holds the unfinished write of a killed process "
                             f"({journal}), which only a user who can write the store can undo",
                             f"run 'clusterbench --db {path} results list' once as its owner") from exc
        rw = sqlite3.connect(f"file:{path}", uri=True, timeout=self.timeout, isolation_level=None)
        try:
            rw.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            rw.close()

    def error(self, exc: BaseException) -> StoreError:
        return _store_error(self.location, exc, self.timeout)  # type: ignore[arg-type]

    def tables(self, db: Any) -> set[str]:
        """The tables in the store, in one statement (one snapshot)."""
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def columns(self, db: Any, table: str) -> set[str]:
        return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}

    def ddl(self, stmt: str) -> str:
        return stmt

    def begin(self, db: Any) -> None:
        """Open a write transaction: the write lock at once, so two writers never interleave."""
        db.execute("BEGIN IMMEDIATE")

    def after_copy(self, db: Any) -> None:
        """Nothing to do: AUTOINCREMENT continues after the largest id inserted."""

    def analyze(self, db: Any, tables: Any) -> None:
        """Nothing: the store's queries on SQLite are planned from its indexes alone (it never keeps
        ``sqlite_stat1``), so a bulk write leaves no statistics stale."""
