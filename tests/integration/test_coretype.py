"""--openblas-coretype: the pure decision (CPU flags + vendor + reported core -> choice) and, on
this machine's real OpenBLAS, that a set core type is what the library reports back."""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from clusterbench.cli import main
from clusterbench.probe.blas import choose_coretype, corename_of, installed_blas, openblas_corename

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass


OPENBLAS = installed_blas().get("openblas")
needs_openblas = pytest.mark.skipif(not OPENBLAS, reason="OpenBLAS not installed")


def _params(db: str) -> list[dict]:
    return [json.loads(r[0]) for r in sqlite3.connect(db).execute("SELECT params FROM results")]


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "store.db")
    monkeypatch.setenv("CLUSTERBENCH_DB", path)
    return path


@pytest.mark.integration
@needs_openblas
def test_explicit_coretype_is_reported_back(db: str) -> None:
    assert main(["run", "dgemm", "--mode", "single", "--n", "300", "--samples", "1",
                 "--openblas-coretype", "Haswell"]) == 0
    ps = _params(db)
    assert ps and all(p["openblas_corename_after"] == "Haswell" for p in ps)
    assert all(corename_of(p["blas_config"]) == "Haswell" for p in ps)  # what the kernel's library said


@pytest.mark.integration
@needs_openblas
def test_auto_records_its_decision(db: str, live_probe) -> None:
    cpu = live_probe["cpu"]
    own = openblas_corename(OPENBLAS)
    assert main(["run", "dgemm", "--mode", "single", "--n", "300", "--samples", "1"]) == 0
    better = choose_coretype(set(cpu.get("isa") or []), cpu.get("vendor"), own)
    want = f"kept {own}" if better is None else f"set {better} (was {own})"
    for p in _params(db):
        assert p["openblas_coretype"] == "auto" and p["openblas_coretype_decision"] == want
    if cpu.get("family") == 25 and cpu.get("model") == 17:  # the AMD EPYC Zen 4 this was written on
        assert want == "kept Cooperlake"


@pytest.mark.integration
@needs_openblas
def test_unknown_coretype_is_refused(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "dgemm", "--mode", "single", "--n", "300", "--openblas-coretype", "NoSuchCore"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "OPENBLAS_CORETYPE=NoSuchCore did not take effect" in err[0]
    assert not os.path.exists(db) or not sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0]


@pytest.mark.integration
@needs_openblas
@pytest.mark.parametrize("engine", ["builtin", "hpcc"])
def test_hpl_engines_run_with_the_core_type(engine: str, db: str) -> None:
    import shutil

    if engine == "hpcc" and not shutil.which("hpcc"):
        pytest.skip("hpcc not installed")
    assert main(["run", "hpl", "--engine", engine, "--ranks", "1", "--n", "400", "--allow-root",
                 "--openblas-coretype", "Haswell"]) == 0
    ps = _params(db)
    assert ps and all(p["openblas_coretype_applied"] == "Haswell" for p in ps)
    if engine == "builtin":  # the ranks' own library reports the core it ran
        assert all(corename_of(p["blas_config"]) == "Haswell" for p in ps)


