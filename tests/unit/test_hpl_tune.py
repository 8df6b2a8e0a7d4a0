"""The pure tests (they start no process) of what tests/integration/test_hpl_tune.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import os

import pytest

from clusterbench.errors import UsageError
from clusterbench.tuning.hpl import grid_options, parse_budget


@pytest.fixture(autouse=True)
def _root_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")


def test_grid_options_and_budget_parsing() -> None:
    assert grid_options(8, True) == [(2, 4, "row"), (2, 4, "col"), (1, 8, "row")]
    assert grid_options(2, True) == [(1, 2, "row")]
    assert parse_budget("20m") == 1200 and parse_budget("1h30m") == 5400 and parse_budget("90") == 90
    with pytest.raises(UsageError, match="not a duration"):
        parse_budget("soon")


def test_env_is_restored() -> None:
    assert os.environ.get("CLUSTERBENCH_ALLOW_RUN_AS_ROOT") == "1"
