"""The command line, in-process and as a user runs it: one-line errors, exit codes, a clean store."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench.cli import main

from clikit import _one_line_error

REPO = Path(__file__).resolve().parents[2]


def _runs(db: str) -> int:
    if not os.path.exists(db):
        return 0
    return sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0]


@pytest.mark.parametrize("argv, needle", [
    (["run", "stream", "--threads", "0"], "--threads 0"),
    (["run", "stream", "--threads", "4096"], "exceeds"),
    (["run", "membw", "--threads", "0"], "--threads 0"),
    (["run", "peak", "--threads", "4096"], "exceeds"),
    (["run", "stream", "--array-elements", str(10**13)], "memory"),
    (["run", "dgemm", "--blas", "nosuchblas"], "nosuchblas"),
    (["run", "node", "--skip", "nosuch"], "nosuch"),
])
@pytest.mark.integration
def test_bad_input_stores_nothing(capsys, argv, needle):
    db = os.environ["CLUSTERBENCH_DB"]
    rc = main(argv)
    assert rc != 0
    assert needle in _one_line_error(capsys)
    assert _runs(db) == 0


@pytest.mark.integration
def test_missing_compiler(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("CC", "no-such-cc")
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "empty-cache"))
    rc = main(["run", "fpu", "--quick"])
    assert rc == 3
    assert "no C compiler 'no-such-cc'" in _one_line_error(capsys)
    assert _runs(os.environ["CLUSTERBENCH_DB"]) == 0


@pytest.mark.integration
def test_probe_json(capsys):
    assert main(["probe", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["topology"]["pus"] >= 1


@pytest.mark.integration
def test_run_json_results_and_export(capsys, tmp_path):
    assert main(["run", "fpu", "--quick", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == 1
    assert doc["run"]["status"] == "complete"
    assert doc["run"]["builds"]["fpu"]["compiler_version"]
    r0 = doc["results"][0]
    for key in ("benchmark", "metric", "value", "unit", "higher_is_better", "params", "samples", "limit"):
        assert key in r0
    run_id = doc["run"]["id"]
    assert main(["results", "list", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert runs[0]["id"] == run_id and runs[0]["results"] == len(doc["results"])
    assert main(["results", "show", run_id[:8]]) == 0
    assert "fpu" in capsys.readouterr().out
    out = tmp_path / "x.csv"
    assert main(["results", "export", run_id, "--format", "csv", "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("run_id,benchmark,metric,value,unit")
    assert len(lines) == 1 + len(doc["results"])
    assert main(["results", "export", "last", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["id"] == run_id


@pytest.mark.integration
def test_unknown_run(capsys):
    main(["run", "fpu", "--quick", "--json"])
    capsys.readouterr()
    assert main(["results", "show", "zzzz"]) == 2  # a usage error: the name given matches no run
    assert "no run 'zzzz'" in _one_line_error(capsys)


@pytest.mark.integration
def test_console_script_plain_output_has_no_escape_codes(tmp_path):
    """Non-terminal output stays clean: no progress bar, no ANSI codes."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "clusterbench.cli", "run", "fpu", "--quick"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout and "\x1b[" not in proc.stderr
    assert "fpu" in proc.stdout and "stored in" in proc.stdout


@pytest.mark.integration
def test_missing_hwloc_when_required(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no lstopo-no-graphics here
    assert main(["probe", "--hwloc"]) == 3
    assert "lstopo-no-graphics is not installed" in _one_line_error(capsys)
    # without --hwloc the probe falls back to /sys and says so
    assert main(["probe", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] == "sysfs" and doc["topology"]["pus"] >= 1


@pytest.mark.integration
def test_known_but_missing_blas(capsys):
    import glob
    if glob.glob("/usr/lib/*/libmkl_rt.so*") or glob.glob("/opt/intel/**/libmkl_rt.so*", recursive=True):
        pytest.skip("MKL is installed here")
    rc = main(["run", "dgemm", "--blas", "mkl", "--quick"])
    assert rc in (2, 3)
    line = _one_line_error(capsys)
    assert "mkl" in line.lower()
    assert _runs(os.environ["CLUSTERBENCH_DB"]) == 0


@pytest.mark.integration
def test_node_without_blas_says_how_to_skip(capsys, monkeypatch):
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.probe import blas

    def missing(choice):
        raise EnvironmentProblem(f"BLAS '{choice}' is not installed", "apt-get install libopenblas-dev")

    monkeypatch.setattr(blas, "resolve_blas", missing)
    assert main(["run", "node", "--quick"]) == 3
    line = _one_line_error(capsys)
    assert "not installed" in line and "--skip dgemm" in line
    assert _runs(os.environ["CLUSTERBENCH_DB"]) == 0


@pytest.mark.integration
def test_cluster_check_unreachable_host(capsys):
    rc = main(["cluster", "check", "--hosts", "localhost,cb-no-such-host.invalid", "--timeout", "10"])
    assert rc == 3
    assert "cb-no-such-host.invalid" in _one_line_error(capsys)


@pytest.mark.integration
def test_run_across_an_unreachable_host_stores_nothing(capsys, tmp_path, monkeypatch):
    """An MPI run whose hosts cannot all be reached stops before measuring: one line naming the
    host, exit 3 (environment), and no run in the store."""
    import os
    import sqlite3
    import time

    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    t0 = time.monotonic()
    rc = main(["run", "pingpong", "--hosts", "localhost,cb-no-such-host.invalid", "--sizes", "8"])
    assert time.monotonic() - t0 < 60
    assert rc == 3
    assert "cb-no-such-host.invalid" in _one_line_error(capsys)
    db = os.environ["CLUSTERBENCH_DB"]
    if os.path.exists(db):
        assert sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == 0
