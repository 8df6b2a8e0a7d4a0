"""Signals as interruptions: SIGTERM and SIGHUP turned into :class:`Interrupted` (a KeyboardInterrupt), so
every command closes what it opened, and the exit status an interruption gives. Apart from
:mod:`clusterbench.session` (which re-exports it) so a command's start imports none of a session's machinery."""
from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled like Ctrl-C; ``signum`` says which (the exit status is 128 + it)."""

    def __init__(self, message: str = "", signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.signum = int(signum)


def interrupt_status(exc: BaseException) -> int:
    """The exit status of a command ended by ``exc`` (a KeyboardInterrupt): 128 + the signal, as a
    shell reports it (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into :class:`Interrupted` for the block, so every command closes what it
    opened (a run, a report's temporary folder, a launched job) and exits 128 + the signal."""
    with _terminate_as_interrupt():
        yield


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into an exception so the run is closed, not abandoned."""
    def handler(signum: int, _frame: Any) -> None:
        _pending[:] = [signum]  # kept until seen: Python drops an exception raised inside a __del__
        raise Interrupted(f"signal {signal.Signals(signum).name}", signum)

    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
        raise_pending()
    finally:
        _pending.clear()
        for s, h in old.items():
            signal.signal(s, h)


#: the signal whose :class:`Interrupted` was raised and not yet seen: the handler's exception is lost when the
#: signal lands while Python runs a finaliser or a weakref callback ("Exception ignored in ..."), and the run
#: would go on to its end as if nothing came (seen under load: a SIGTERM'd `run node` finishing complete)
_pending: list[int] = []


def raise_pending() -> None:
    """Raise again the :class:`Interrupted` of a signal whose exception Python swallowed; called where a run
    reads its kernels' output and between benchmarks, and at the end of :func:`terminate_as_interrupt`."""
    if _pending:
        signum = _pending.pop()
        raise Interrupted(f"signal {signal.Signals(signum).name}", signum)


def seen() -> None:
    """The interruption reached a handler: nothing is pending any more."""
    _pending.clear()
