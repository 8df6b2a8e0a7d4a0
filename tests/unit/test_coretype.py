"""The pure tests (they start no process) of what tests/integration/test_coretype.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.probe.blas import choose_coretype, corename_of


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
