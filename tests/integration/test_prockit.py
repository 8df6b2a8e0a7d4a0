"""tests/prockit.py finds what a test started, and only that: the orphan checks of the parallel pass
stand on it (a check that could never see a leftover would pass every time)."""
from __future__ import annotations

import os
import subprocess

import pytest

import prockit

pytestmark = [pytest.mark.integration, pytest.mark.parallel]


def test_a_process_started_here_is_found_and_another_is_not() -> None:
    ours = subprocess.Popen(["sleep", "60"])  # inherits this test's CLUSTERBENCH_DB
    other = subprocess.Popen(["sleep", "60"], env={**os.environ, "CLUSTERBENCH_DB": "/elsewhere/results.db"})
    try:
        assert ours.pid in prockit.carrying() and other.pid not in prockit.carrying()
        assert prockit.named({"sleep"}) == [ours.pid] and prockit.comm(ours.pid) == "sleep"
        assert prockit.cmdline(ours.pid) == "sleep 60" and prockit.exe(ours.pid).endswith("sleep")
        assert other.pid in prockit.carrying("/elsewhere/results.db")
        assert prockit.gone_within(prockit.carrying, seconds=0.3) == [ours.pid]  # still there: named
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()
    assert prockit.gone_within(prockit.carrying) == []  # a reaped process is gone at once
    assert prockit.kernels() == []
