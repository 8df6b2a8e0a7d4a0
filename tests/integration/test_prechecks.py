"""Environment pre-checks of the MPI benchmarks: refused before the run is opened (exit 3, one
line naming the real problem, nothing stored)."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from clusterbench.cli import main

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass


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


@pytest.fixture
def db(tmp_path, monkeypatch) -> str:
    path = str(tmp_path / "results.db")
    monkeypatch.setenv("CLUSTERBENCH_DB", path)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return path


@pytest.mark.integration
@pytest.mark.skipif(os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband"),
                    reason="this machine has an RDMA device")
def test_rdma_without_device(db, capsys):
    assert main(["run", "pingpong", "--transport", "rdma", "--allow-root", "--sizes", "8"]) == 3
    line = _error(capsys)
    assert "no RDMA device/transport found" in line and "/sys/class/infiniband" in line
    assert "--transport tcp" in line and "report this as a bug" not in line
    assert _runs(db) == 0


@pytest.mark.integration
def test_tcp_include_unknown_interface(db, capsys):
    assert main(["run", "pingpong", "--transport", "tcp", "--tcp-include", "cbnosuch0", "--allow-root",
                 "--sizes", "8"]) == 3
    line = _error(capsys)
    assert "cbnosuch0" in line and "interface" in line and "lo" in line
    assert _runs(db) == 0


@pytest.mark.integration
def test_srun_missing(db, capsys, monkeypatch, tmp_path):
    bindir = tmp_path / "bin"  # everything on PATH except srun
    bindir.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        if os.path.isdir(d):
            for name in os.listdir(d):
                if name != "srun" and not (bindir / name).exists():
                    (bindir / name).symlink_to(Path(d) / name)
    monkeypatch.setenv("PATH", str(bindir))
    assert main(["run", "pingpong", "--launcher", "srun", "--allow-root", "--sizes", "8"]) == 3
    line = _error(capsys)
    assert "srun is not on PATH" in line and "--launcher mpirun" in line
    assert _runs(db) == 0
