"""Helpers shared by tests/unit/test_cli.py (pure tests) and tests/integration/test_cli.py
(tests that start processes)."""
from __future__ import annotations

import pytest


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("clusterbench: error:")
    return err[0]
