"""The store's back ends, by the scheme of the store's location: a file path is SQLite
(:mod:`.sqlite`), a ``postgresql://`` URL a PostgreSQL database (:mod:`.postgres`). A back end opens
the connection, names its errors in one line, lists tables and columns, translates the schema's
statements and opens write transactions; the store's SQL (:mod:`clusterbench.store.db`) is the same."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from clusterbench.errors import UsageError
from clusterbench.store.backends.postgres import PostgresBackend, is_url, masked, without_passwords
from clusterbench.store.backends.sqlite import SqliteBackend
from clusterbench.store.opening import default_path

#: scheme -> back end; a location that is no URL of these is an SQLite file
BACKENDS: dict[str, type] = {"postgresql": PostgresBackend, "postgres": PostgresBackend}

__all__ = ["BACKENDS", "PostgresBackend", "SqliteBackend", "backend_for", "is_url", "location", "masked", "without_passwords"]


def location(path: str | Path | None) -> str | Path:
    """Where the store is: ``path`` (``--db``), else ``$CLUSTERBENCH_DB``, else the default file."""
    if path:
        return path if isinstance(path, Path) else str(path)
    env = os.environ.get("CLUSTERBENCH_DB")
    if env and is_url(env):
        return env
    return default_path()


def backend_for(where: str | Path, timeout: float) -> Any:
    """The back end of a store location (a path or a URL)."""
    if isinstance(where, str) and re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", where):
        scheme = where.partition("://")[0]
        if scheme not in BACKENDS:
            raise UsageError(f"the results store {masked(where)} names an unknown kind of store ({scheme}://)",
                             "give a file path or a postgresql://USER@HOST[:PORT]/DB URL")
        return BACKENDS[scheme](where, timeout)
    return SqliteBackend(where, timeout)
