"""The pure tests (they start no process) of what tests/integration/test_fft.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import allowed_cpus
from clusterbench.benchmarks.hpcc.fft import DEFAULT_CAP, LIBS, largest_n, node_bytes
from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.kernels.build import build_error


def test_bad_n_is_one_line(ctx) -> None:
    bench = get_benchmark("fft")
    cases = [({"n": 8, "mode": "single"}, "16"), ({"n": 1 << 31, "mode": "single"}, "1073741824"),
             ({"n": 1 << 30, "mode": "single", "ranks": 1}, r"above 80% of the .* GiB available")]
    if len(allowed_cpus(ctx)) >= 2:
        cases.append(({"n": 1000 + 2, "mode": "mpi", "ranks": 2}, r"not a multiple of ranks\^2 = 4.*--n 1000"))
    for given, match in cases:
        with pytest.raises(UsageError, match=match) as exc:
            bench.resolve(ctx, {"allow_root": True, **given})
        assert "\n" not in str(exc.value)


def test_default_n_rule() -> None:
    gib = 1 << 30
    # 16 GiB available, 1/8 = 2 GiB; star on 2 ranks: 64 n B per node -> 2^25
    assert largest_n(2 * gib, ["single", "star", "mpi"], 2, 2, DEFAULT_CAP) == 1 << 25
    assert largest_n(64 * gib, ["single"], 1, 1, DEFAULT_CAP) == DEFAULT_CAP
    # 3 ranks with mpi: a multiple of 9 (the odd part of 3^2) times a power of two
    n = largest_n(2 * gib, ["single", "star", "mpi"], 3, 3, DEFAULT_CAP)
    m = n // 9
    assert n % 9 == 0 and m & (m - 1) == 0
    assert node_bytes(n, ["star"], 3, 3) <= 2 * gib < node_bytes(2 * n, ["star"], 3, 3)
    assert largest_n(100, ["single"], 1, 1) == 16  # never below the minimum


def test_missing_fftw_header_names_its_package() -> None:
    for stderr, pkg in (("fft.c:38:10: fatal error: fftw3-mpi.h: No such file or directory", "libfftw3-mpi-dev"),
                        ("fft.c:37:10: fatal error: 'fftw3.h' file not found", "libfftw3-dev"),
                        ("/usr/bin/ld: cannot find -lfftw3_mpi: No such file or directory", "libfftw3-mpi-dev")):
        err = build_error("fft", "mpicc", f"In file included from x.c:1:\n{stderr}\ncompilation terminated.\n",
                           LIBS, False)
        assert isinstance(err, EnvironmentProblem)
        assert f"apt-get install {pkg}" in str(err.fix) and "\n" not in str(err)
