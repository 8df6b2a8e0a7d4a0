"""Shared fixtures: the live probe (real hwloc/sysfs) and a run context with a real SQLite store."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterbench.benchmarks.base import RunContext

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CLUSTERBENCH_SHARED", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def live_probe() -> dict:
    from clusterbench.probe import probe

    return probe()


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own results store; the kernel cache is shared by the session."""
    cache = os.environ.get("CLUSTERBENCH_TEST_CACHE") or str(tmp_path_factory.getbasetemp() / "cache")
    monkeypatch.setenv("CLUSTERBENCH_CACHE", cache)
    monkeypatch.setenv("CLUSTERBENCH_DB", str(tmp_path_factory.mktemp("db") / "results.db"))


@pytest.fixture
def ctx(live_probe: dict) -> RunContext:
    return RunContext(probe=live_probe, profile="quick", timeout=300)
