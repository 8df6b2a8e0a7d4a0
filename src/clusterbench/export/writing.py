"""Where an export goes, written safely (every format of :mod:`clusterbench.export`).

:func:`write`: ``-o -`` or no ``-o`` is stdout; a regular file that exists is refused
unless ``force`` (nothing is overwritten by accident); a regular file is written to a temporary file
beside it and renamed into place, so a failure (a full disk, Ctrl-C) never leaves a half-written or
truncated file, and an existing one is untouched until the new one is complete. Special files that
exist (``/dev/stdout``, a FIFO, a terminal, ``/dev/full``) are written directly and need no ``force``.
A write that fails (no space left, permission denied) is one :class:`EnvironmentProblem` (exit 3).
"""
from __future__ import annotations

import errno
import os
import stat
import sys

from clusterbench.errors import EnvironmentProblem, UsageError


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
        import tempfile  # here: with shutil, bz2 and lzma, most of what the export formats' registry imported

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
