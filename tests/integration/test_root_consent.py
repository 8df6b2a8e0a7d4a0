"""Root consent: one clean error with the exact command to retype, and the permanent ways
(CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1, allow_run_as_root = true in the config file)."""
from __future__ import annotations

import os
import sqlite3

import pytest

from clusterbench.cli import main

import rootconsentkit

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass
as_root = rootconsentkit.as_root  # a fixture, shared with the other half of test_root_consent.py


def _runs(db: str) -> int:
    if not os.path.exists(db):
        return 0
    with sqlite3.connect(db) as con:
        return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("clusterbench: error:")
    return err[0]


@pytest.mark.integration  # cli run probes the machine (systemd-detect-virt)
def test_root_error_gives_command_to_retype(as_root, capsys):
    assert main(["run", "bw", "--window", "32", "--tcp-include", "10.0.0.0/8 x"]) == 2
    line = _error(capsys)
    assert "retype: clusterbench run bw --window 32 --tcp-include '10.0.0.0/8 x' --allow-root" in line
    assert "CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1" in line and str(as_root) in line
    assert _runs(os.environ["CLUSTERBENCH_DB"]) == 0


@pytest.mark.integration  # cli run probes the machine (systemd-detect-virt)
def test_xdg_unset_uses_home_config(as_root, monkeypatch, capsys):
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert main(["run", "pingpong"]) == 2
    assert str(as_root.parents[2] / "home" / ".config" / "clusterbench" / "config.toml") in _error(capsys)


@pytest.mark.integration  # cli run probes the machine (systemd-detect-virt)
def test_malformed_config_is_one_line_usage_error(as_root, capsys):
    as_root.parent.mkdir(parents=True)
    as_root.write_text("allow_run_as_root = = yes\n")
    assert main(["run", "pingpong"]) == 2
    line = _error(capsys)
    assert str(as_root) in line and "not valid TOML" in line
    assert _runs(os.environ["CLUSTERBENCH_DB"]) == 0


@pytest.mark.integration  # cli run probes the machine (systemd-detect-virt)
def test_non_bool_config_value_refused(as_root, capsys):
    as_root.parent.mkdir(parents=True)
    as_root.write_text('allow_run_as_root = "yes"\n')
    assert main(["run", "pingpong"]) == 2
    assert "must be true or false" in _error(capsys)


@pytest.mark.integration
def test_probe_says_how_to_consent_as_root(as_root, capsys):
    assert main(["probe"]) == 0
    out = capsys.readouterr().out
    assert "running as root" in out and "CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1" in out


@pytest.mark.integration
def test_probe_silent_about_root_for_a_user(as_root, monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["probe"]) == 0
    assert "running as root" not in capsys.readouterr().out


@pytest.mark.integration
def test_probe_silent_about_root_when_consent_is_already_given(as_root, monkeypatch, capsys):
    """As root with CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1 (or the config file's consent), probe still said
    "MPI benchmarks need --allow-root; to make it permanent, export ...": it is already permanent."""
    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")
    assert main(["probe"]) == 0
    assert "running as root" not in capsys.readouterr().out
    monkeypatch.delenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT")
    as_root.parent.mkdir(parents=True)
    as_root.write_text("allow_run_as_root = true\n")
    assert main(["probe"]) == 0
    assert "running as root" not in capsys.readouterr().out
    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "0")  # consent withdrawn: the hint is back
    assert main(["probe"]) == 0
    assert "CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1" in capsys.readouterr().out
