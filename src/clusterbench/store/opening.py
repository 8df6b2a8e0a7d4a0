"""Where the store lives and why it cannot be opened: the default path, the lock wait, and one-line
errors with their fix for a locked, unwritable, full or damaged file."""
from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from clusterbench.errors import StoreError, UsageError
from clusterbench.files import kind_of_mode


#: seconds to wait for another process's lock (CLUSTERBENCH_DB_TIMEOUT overrides)
DEFAULT_TIMEOUT = 30.0
#: SQLite keeps the wait in int milliseconds: a longer one (1e12, inf) silently became no wait at all
MAX_TIMEOUT = 2_147_483.0


def default_path() -> Path:
    env = os.environ.get("CLUSTERBENCH_DB")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "clusterbench" / "results.db"


def _fix_for(path: Path) -> str:
    return f"move {path} aside or set CLUSTERBENCH_DB (or --db) to another file"


def busy_timeout() -> float:
    """Seconds to wait for another process's lock: ``$CLUSTERBENCH_DB_TIMEOUT`` or 30."""
    raw = os.environ.get("CLUSTERBENCH_DB_TIMEOUT")
    if raw is None or raw.strip() == "":
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_TIMEOUT:  # also refuses nan and inf
        raise UsageError(f"CLUSTERBENCH_DB_TIMEOUT={raw!r} is not a number of seconds from 0 to "
                         f"{MAX_TIMEOUT:.0f}", "set it to e.g. 30, or unset it")
    return value


def _store_error(path: Path, exc: sqlite3.Error, waited: float) -> StoreError:
    """What an SQLite error means for the user, in one line: only a file SQLite cannot parse is
    'corrupted' (moving it aside is advice that can lose data, so it is never given for a lock)."""
    text = str(exc)
    low = text.lower()
    if "locked" in low or "busy" in low:
        return StoreError(f"results store {path} is locked by another process (waited {waited:g} s)",
                          "wait for the other clusterbench to finish, then retry "
                          "(CLUSTERBENCH_DB_TIMEOUT sets how long to wait)")
    if "readonly" in low or "read-only" in low:
        return StoreError(f"results store {path} is read-only ({text})",
                          "make the file and its folder writable, or choose another file with --db")
    if "unable to open" in low:
        return StoreError(f"cannot open the results store {path} ({text})",
                          "check that its folder exists and is writable, or choose another file with --db")
    if "full" in low:
        return StoreError(f"cannot write the results store {path} ({text})",
                          "free space on its file system, or choose another file with --db")
    if "disk i/o" in low:  # not a full disk (that is SQLITE_FULL): the device or file system failed
        return StoreError(f"cannot read or write the results store {path} ({text})",
                          "check its disk and file system (dmesg), or choose another file with --db")
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in low or "not a database" in low:
        return StoreError(f"results store {path} is unreadable or corrupted ({text})", _fix_for(path))
    # anything else (a constraint, a schema surprise) is not known to be the file's fault: keep it
    return StoreError(f"results store {path}: {text}",
                      f"retry; if it persists, check it with: sqlite3 {path} 'PRAGMA integrity_check'")


def _check_path(path: Path, readonly: bool) -> None:
    """Refuse, before SQLite does in its own words, what is plainly not a store file to use: the
    store is a regular file or does not exist yet. A FIFO made SQLite's first read block for good
    (SIGTERM ignored) and /dev/zero read as an empty store, so anything else is refused here,
    before SQLite opens it (``stat`` follows a symlink, as SQLite does)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None  # does not exist yet (created), or SQLite names why it cannot be opened
    if mode is not None and stat.S_ISDIR(mode):
        raise StoreError(f"results store {path} is a directory, not a file",
                         "give the path of a file (e.g. --db results.db), or set CLUSTERBENCH_DB")
    if mode is not None and not stat.S_ISREG(mode):
        raise StoreError(f"results store {path} is {kind_of_mode(mode)}, not a regular file",
                         "give the path of a file (e.g. --db results.db), or set CLUSTERBENCH_DB")
    if readonly:
        if not os.access(path, os.R_OK):
            raise StoreError(f"cannot read the results store {path} (permission denied)",
                             "ask its owner for read access, or choose another file with --db")
        return
    if path.exists():
        if not os.access(path, os.W_OK):
            raise StoreError(f"results store {path} is not writable ({_why_unwritable(path)})",
                             "make it writable, or choose another file with --db")
        folder = path.parent
    else:
        folder = next((p for p in [path.parent, *path.parent.parents] if p.exists()), path.parent)
        if folder.exists() and not folder.is_dir():
            raise StoreError(f"cannot create the results store {path}: {folder} is not a folder",
                             "choose another file with --db")
    if folder.exists() and not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(f"cannot write the results store {path}: its folder {folder} is not writable "
                         f"({_why_unwritable(folder)})", "choose a file in a writable folder with --db")


def _why_unwritable(path: Path) -> str:
    """Why access(W_OK) said no: a read-only mount is not fixed by changing permissions."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:
        pass
    return "permission denied"
