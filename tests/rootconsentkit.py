"""Helpers shared by tests/unit/test_root_consent.py (pure tests) and tests/integration/test_root_consent.py
(tests that start processes)."""
from __future__ import annotations

import os

import pytest


@pytest.fixture
def as_root(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.delenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "clusterbench" / "config.toml"
