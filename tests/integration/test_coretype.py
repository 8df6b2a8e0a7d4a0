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

AVX512 = {"sse3", "avx", "avx2", "fma", "avx512f", "avx512vl", "avx512bw", "avx512dq"}
#: Emerald Rapids (family 6 model 207): AVX-512 with BF16, AMX
EMERALD_RAPIDS = AVX512 | {"avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_tile", "amx_bf16"}
#: this machine: AMD EPYC Zen 4 (family 25 model 17)
ZEN4 = AVX512 | {"avx512_bf16", "avx512_vnni"}


@pytest.mark.parametrize("flags, vendor, reported, want", [
    (EMERALD_RAPIDS, "GenuineIntel", "Prescott", "Cooperlake"),   # 0.3.21 does not know it: SSE3 fallback
    (AVX512, "GenuineIntel", "Prescott", "SkylakeX"),             # AVX-512 without BF16 (Skylake-SP)
    (ZEN4, "AuthenticAMD", "Cooperlake", None),                   # OpenBLAS's own AVX-512 choice: keep
    ({"avx", "avx2", "fma"}, "GenuineIntel", "Nehalem", "Haswell"),
    ({"avx", "avx2", "fma"}, "AuthenticAMD", "Barcelona", "Zen"),
    ({"avx", "avx2", "fma"}, "AuthenticAMD", "Zen", None),
    ({"avx", "avx2", "fma"}, "GenuineIntel", "SandyBridge", "Haswell"),  # AVX below AVX2+FMA
    (EMERALD_RAPIDS, "GenuineIntel", "SapphireRapids", None),
    ({"sse3", "ssse3"}, "GenuineIntel", "Prescott", None),        # no AVX: nothing better to pick
    ({"sse3"}, "GenuineIntel", "Core2", None),
    (AVX512, "GenuineIntel", "NEOVERSEN1", None),                 # a name it does not know: no guessing
    (AVX512, "GenuineIntel", None, None),                         # not OpenBLAS / no name
])
def test_choose_coretype(flags, vendor, reported, want):
    assert choose_coretype(set(flags), vendor, reported) == want


def test_corename_of_config():
    assert corename_of("OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64") == "Cooperlake"
    assert corename_of("OpenBLAS 0.3.20 DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64") == "Prescott"
    assert corename_of("BLIS 0.9.0") is None


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


def test_coretype_warning_when_the_run_reports_another_core():
    from clusterbench.benchmarks.node.dgemm import coretype_warning

    cfg = "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64"
    w = coretype_warning({"openblas_corename_after": "Haswell"}, cfg)
    assert w is not None and w.code == "openblas-coretype-differs" and "Cooperlake" in w.message
    assert coretype_warning({"openblas_corename_after": "Cooperlake"}, cfg) is None
    assert coretype_warning({}, cfg) is None


def test_coretype_name_needs_openblas():
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.probe.blas import settle_coretype

    with pytest.raises(EnvironmentProblem, match="--openblas-coretype Haswell needs OpenBLAS, but --blas is blis"):
        settle_coretype("Haswell", "blis", "/x/libblis.so.4", set(), "GenuineIntel")
    assert settle_coretype("auto", "blis", "/x/libblis.so.4", set(), "GenuineIntel").params() == {}
