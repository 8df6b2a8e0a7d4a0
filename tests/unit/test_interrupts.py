"""SIGTERM as an interruption (clusterbench.interrupts): pure, in this process, no process started."""
from __future__ import annotations

import os
import signal
import sys

import pytest

from clusterbench.interrupts import Interrupted, interrupt_status, raise_pending, terminate_as_interrupt


class _Dropper:
    """An object whose finaliser is running when the signal comes: Python drops what a __del__ raises."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(1000))  # bytecode for the handler to run in, inside the finaliser


def test_a_sigterm_a_finaliser_swallowed_still_interrupts(monkeypatch):
    """Seen under load: a SIGTERM landing in a finaliser lost its exception and `run node` went on to the end,
    complete. The signal is remembered until seen: the block ends interrupted all the same, with its status."""
    dropped: list[type] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: dropped.append(u.exc_type))  # where Python puts it
    reached = False
    with pytest.raises(Interrupted) as ei:
        with terminate_as_interrupt():
            _Dropper()  # collected at once: its __del__ runs, the handler raises inside it, Python prints and goes on
            reached = True
    assert reached and ei.value.signum == signal.SIGTERM and interrupt_status(ei.value) == 143
    assert dropped == [Interrupted]  # the handler's own exception was lost in the finaliser
    raise_pending()  # nothing left pending: the interruption was delivered once


def test_a_sigterm_that_propagates_is_not_delivered_twice():
    with pytest.raises(Interrupted):
        with terminate_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(1000))
    raise_pending()
    with terminate_as_interrupt():
        pass  # a later block ends normally
