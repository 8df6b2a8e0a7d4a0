"""Reading the files a user names: one bounded reader for all of them.

A hostfile, the config file, a power meter's CSV log, an HPL engine binary: every file whose path
comes from the user is read through :func:`read_text` or :func:`read_bytes`, which

* refuse anything but a regular file (``/dev/zero``, a FIFO, ``/dev/stdin``, a directory) before
  reading a byte: the file is opened non-blocking, so opening a FIFO cannot hang, and checked with
  ``fstat`` on the open descriptor, so what is checked is what is read;
* read at most the stated limit for that kind of file (:data:`LIMITS`) and refuse a larger file in
  one line, instead of growing without bound (``--hostfile /dev/zero`` once grew to 24 GB before the
  kernel's out-of-memory killer ended it);
* decode text strictly as UTF-8 and refuse binary content, naming the first bad byte (so a binary
  file is never echoed into an error message or a terminal).

Errors are :class:`UsageError` (exit 2) naming the file, the problem and the fix.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from clusterbench.errors import UsageError
from clusterbench.text import terminal_text

KiB, MiB = 1024, 1024 * 1024

#: the largest file of each kind clusterbench reads, in bytes (stated in the error when exceeded)
LIMITS: dict[str, int] = {
    "hostfile": 1 * MiB,  # 10,000 nodes at 100 B a line
    "config file": 1 * MiB,
    "power log": 64 * MiB,  # a 1 Hz meter's log for about three weeks; rotate it beyond that
    "engine binary": 256 * MiB,
    "shared library": 1024 * MiB,  # MKL's largest are a few hundred MiB
    "benchmark file": 1 * MiB,
    "text file": 1 * MiB,
    "report manifest": 1 * MiB,  # an earlier report's list of its files (tens of thousands of plots)
}


def human_size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB and n % MiB == 0 else f"{n // KiB} KiB" if n % KiB == 0 else f"{n} B"


def kind_of_mode(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: str | os.PathLike, what: str, limit: int | None = None, fix: str | None = None,
               head: int | None = None) -> bytes:
    """The content of the regular file ``path`` (a ``what``: a key of :data:`LIMITS` or any name),
    at most ``limit`` bytes (default: the limit of ``what``); UsageError otherwise. With ``head``, only
    its first ``head`` bytes, whatever its size (a file of any size, but still only a regular one)."""
    p = Path(path)
    limit = LIMITS.get(what, LIMITS["text file"]) if limit is None else limit
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise UsageError(f"{what} {p} does not exist", fix or "check the path") from None
        raise UsageError(f"cannot read {what} {p} ({exc.strerror})", fix or "check the path and its permissions") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{what} {p} is {kind_of_mode(st.st_mode)}, not a regular file",
                             fix or f"give the path of a {what} on disk")
        if head is not None:
            os.set_blocking(fd, True)
            data = b""
            while len(data) < head and (chunk := os.read(fd, head - len(data))):
                data += chunk
            return data
        if st.st_size > limit:
            raise UsageError(f"{what} {p} is {st.st_size} bytes, larger than the {human_size(limit)} "
                             f"clusterbench reads of a {what}", fix or f"give a {what} under {human_size(limit)}")
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while True:  # a file that grows while read is still bounded
            chunk = os.read(fd, min(1 * MiB, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise UsageError(f"{what} {p} grew beyond the {human_size(limit)} clusterbench reads of a {what}",
                                 fix or f"give a {what} under {human_size(limit)}")
        return b"".join(chunks)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {p} ({exc.strerror})", fix or "check the file") from None
    finally:
        os.close(fd)


def decode_text(data: bytes, what: str, path: str | os.PathLike, fix: str | None = None) -> str:
    """``data`` as UTF-8 text; binary content (a NUL byte, invalid UTF-8) is a one-line UsageError
    naming the offset of the first bad byte, never echoed."""
    nul = data.find(b"\0")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path} is not text (byte {exc.start} is not UTF-8)",
                         fix or f"give a text {what}") from None
    if nul >= 0:
        raise UsageError(f"{what} {path} is not text (byte {nul} is a NUL)", fix or f"give a text {what}")
    return text


def read_text(path: str | os.PathLike, what: str, limit: int | None = None, fix: str | None = None) -> str:
    """The UTF-8 text of the regular file ``path``, bounded as :func:`read_bytes`."""
    return decode_text(read_bytes(path, what, limit, fix), what, path, fix)


def printable(text: str, most: int = 80) -> str:
    """``text`` cut to ``most`` characters with control characters escaped
    (:func:`clusterbench.text.terminal_text`): safe to put in an error message that a terminal shows."""
    return terminal_text(text[:most]) + ("..." if len(text) > most else "")
