"""``results export``: a stored run as JSON (the ``--json`` document), CSV or hpccoutf.txt, written
safely.

Where it goes (:func:`write`): ``-o -`` or no ``-o`` is stdout; a regular file that exists is refused
unless ``force`` (nothing is overwritten by accident); a regular file is written to a temporary file
beside it and renamed into place, so a failure (a full disk, Ctrl-C) never leaves a half-written or
truncated file, and an existing one is untouched until the new one is complete. Special files that
exist (``/dev/stdout``, a FIFO, a terminal, ``/dev/full``) are written directly and need no ``force``.
A write that fails (no space left, permission denied) is one :class:`EnvironmentProblem` (exit 3).
"""
from __future__ import annotations

import csv
import errno
import io
import json
import os
import stat
import sys
import tempfile
from typing import Any

from clusterbench import SCHEMA_VERSION
from clusterbench.benchmarks.declare import Result
from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.records import Run

FORMATS = ("json", "csv", "hpccoutf")
#: CSV columns; later additions are appended so existing positions never move
CSV_COLUMNS = ["run_id", "benchmark", "metric", "value", "unit", "higher_is_better", "n", "best", "median", "min",
               "max", "cv", "limit_name", "limit_value", "limit_fraction", "params", "samples",
               "run_status", "run_error"]


def to_csv(run: Run, results: list[Result]) -> str:
    """One row per figure; ``run_status``/``run_error`` say whether the run it belongs to completed."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    for r in results:
        s, lim = r.summary, r.limit or {}
        w.writerow([run.id, r.benchmark, r.metric, r.value, r.unit, int(r.higher_is_better),
                    s.get("n"), s.get("best"), s.get("median"), s.get("min"), s.get("max"), s.get("cv"),
                    lim.get("name", ""), lim.get("value", ""), lim.get("fraction", ""),
                    json.dumps(r.params, sort_keys=True), json.dumps(r.samples),
                    run.status, run.error or ""])
    return buf.getvalue()


def render(fmt: str, run: Run, results: list[Result]) -> str:
    if fmt == "json":
        return json.dumps({"schema": SCHEMA_VERSION, "run": run.as_json(), "results": [r.as_json() for r in results]},
                          indent=1) + "\n"
    if fmt == "csv":
        return to_csv(run, results)
    if fmt == "hpccoutf":
        from clusterbench.report.hpccoutf import hpccoutf
        return hpccoutf(run, results)
    raise UsageError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}", "pick one of those")


def _failed(dest: str, exc: OSError) -> EnvironmentProblem:
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return EnvironmentProblem(f"cannot write {dest}: {why}", "free space there, or choose another -o")
    return EnvironmentProblem(f"cannot write {dest} ({why})", "choose a writable path for -o")


def write(text: str, dest: str | None, force: bool = False) -> None:
    """Write ``text`` to ``dest`` (see the module docstring)."""
    if dest in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    assert dest is not None
    try:
        st = os.stat(dest)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _failed(dest, exc) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UsageError(f"-o {dest} is a directory", "give a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):  # a device, FIFO or terminal: write straight to it
        try:
            with open(dest, "w") as fh:
                fh.write(text)
        except OSError as exc:
            raise _failed(dest, exc) from None
        return
    if st is not None and not force:
        raise UsageError(f"{dest} exists", "pass --force to overwrite it, or choose another -o")
    folder = os.path.dirname(os.path.abspath(dest))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".cb-export-", dir=folder)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if st is not None:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, dest)
        tmp = None
    except OSError as exc:
        raise _failed(dest, exc) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def export(run: Run, results: list[Result], fmt: str, dest: str | None, force: bool = False) -> dict[str, Any]:
    """Render and write; returns what was written where (for callers that report it)."""
    text = render(fmt, run, results)
    write(text, dest, force)
    return {"format": fmt, "output": dest or "-", "bytes": len(text.encode())}
