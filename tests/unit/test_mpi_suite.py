"""The pure tests (they start no process) of what tests/integration/test_mpi_suite.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import shutil

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.errors import UsageError


pytestmark = pytest.mark.skipif(not shutil.which("mpirun"), reason="no mpirun: install openmpi-bin")


def test_unknown_part_is_refused(ctx):
    with pytest.raises(UsageError, match="--skip nosuch"):
        get_benchmark("mpi").resolve(ctx, {"skip": ["nosuch"]})
