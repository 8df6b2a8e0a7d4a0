"""Helpers shared by tests/unit/test_cli.py (pure tests) and tests/integration/test_cli.py
(tests that start processes), and by the tests that a command must end, not hang."""
from __future__ import annotations

import subprocess

import pytest


def run_or_fail(cmd: list[str], timeout: float, hung: str, **kw) -> subprocess.CompletedProcess:
    """``cmd`` run to its end within ``timeout`` s (text, output captured); a hang fails the test with
    ``hung``, the process killed (subprocess.run kills it on the timeout)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        pytest.fail(hung)


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("clusterbench: error:")
    return err[0]
