"""A --blas that is not a BLAS, an --engine-path that is not the engine: refused before a run
is opened (exit 3, a hint naming the real problem, nothing stored) - issue 14 defect 3."""
from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from clusterbench.cli import main
from clusterbench.errors import EnvironmentProblem
from clusterbench.probe.blas import check_blas_file, installed_blas

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

LIBM = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6", "/lib64/libm.so.6")
             if os.path.exists(p)), None)


def _runs(db: str) -> int:
    if not os.path.exists(db):
        return 0
    return sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0]


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "store.db")
    monkeypatch.setenv("CLUSTERBENCH_DB", path)
    return path


@pytest.fixture
def text_file(tmp_path: Path) -> str:
    p = tmp_path / "libblas.so"
    p.write_text("not a library\n")
    return str(p)


@pytest.mark.integration  # installed_blas() asks ldconfig
def test_check_blas_file_tells_the_cases_apart(text_file: str) -> None:
    with pytest.raises(EnvironmentProblem, match="not an ELF file"):
        check_blas_file(text_file)
    with pytest.raises(EnvironmentProblem, match="without cblas_dgemm or dgemm_"):
        check_blas_file("/bin/ls")
    if LIBM:
        with pytest.raises(EnvironmentProblem, match="without cblas_dgemm or dgemm_"):
            check_blas_file(LIBM)
    for path in installed_blas().values():  # every real BLAS found on this machine passes
        check_blas_file(path)


@pytest.mark.integration  # installed_blas() asks ldconfig
def test_a_blas_checked_once_is_read_again_only_when_it_changes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import clusterbench.files as files

    real = next(iter(installed_blas().values()), None)
    if real is None:
        pytest.skip("no BLAS installed")
    copy = tmp_path / "libcopy.so"
    shutil.copyfile(real, copy)
    check_blas_file(str(copy))
    reads: list[str] = []
    read_bytes = files.read_bytes
    monkeypatch.setattr(files, "read_bytes", lambda path, *a, **k: reads.append(str(path)) or read_bytes(path, *a, **k))
    check_blas_file(str(copy))
    assert reads == []  # the same file: not read again
    copy.write_text("not a library any more\n")  # the same inode, another size and mtime
    with pytest.raises(EnvironmentProblem, match="not an ELF file"):
        check_blas_file(str(copy))
    assert reads == [str(copy)]


@pytest.mark.integration
@pytest.mark.parametrize("bench", ["dgemm", "hpl"])
@pytest.mark.parametrize("which", ["/bin/ls", "text", "libm"])
def test_not_a_blas_is_refused_before_the_run(bench: str, which: str, db: str, text_file: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = {"/bin/ls": "/bin/ls", "text": text_file, "libm": LIBM}[which]
    if path is None:
        pytest.skip("no libm path known")
    extra = ["--mode", "single", "--n", "200"] if bench == "dgemm" else ["--ranks", "1", "--n", "200", "--allow-root"]
    assert main(["run", bench, "--blas", path, *extra]) == 3
    line = _error(capsys)
    assert f"--blas {path}" in line and ("not a BLAS" in line or "not a shared library" in line), line
    assert _runs(db) == 0


@pytest.mark.integration
def test_engine_path_not_the_engine_is_refused(db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    true = shutil.which("true")
    assert true
    assert main(["run", "hpl", "--engine", "hpcc", "--engine-path", true, "--ranks", "1", "--n", "200", "--allow-root"]) == 3
    line = _error(capsys)
    assert "is not hpcc" in line and "hpccinf.txt" in line, line
    assert _runs(db) == 0
    script = tmp_path / "hpcc"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    assert main(["run", "hpl", "--engine", "hpcc", "--engine-path", str(script), "--ranks", "1", "--n", "200", "--allow-root"]) == 3
    assert "not a compiled program" in _error(capsys)
    assert _runs(db) == 0
