"""The pure tests (they start no process) of what tests/integration/test_root_consent.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

from clusterbench import config

import rootconsentkit
as_root = rootconsentkit.as_root  # a fixture, shared with the other half of test_root_consent.py


def test_config_file_gives_consent(as_root):
    as_root.parent.mkdir(parents=True)
    as_root.write_text("allow_run_as_root = true\n")
    assert config.allow_run_as_root() is True
    as_root.write_text("allow_run_as_root = false\n")
    assert config.allow_run_as_root() is False


def test_env_gives_consent_and_overrides_file(as_root, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")
    assert config.allow_run_as_root() is True
    as_root.parent.mkdir(parents=True)
    as_root.write_text("allow_run_as_root = true\n")
    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "0")
    assert config.allow_run_as_root() is False
