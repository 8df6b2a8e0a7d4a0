"""Helpers shared by tests/unit/test_mpi_launch.py (pure tests) and tests/integration/test_mpi_launch.py
(tests that start processes)."""
from __future__ import annotations

import shutil

import pytest

from clusterbench.errors import EnvironmentProblem
from clusterbench.launch import mpi as M


def _mpi_or_skip() -> M.MpiInstall:
    if not shutil.which("mpirun") and not shutil.which("mpiexec"):
        pytest.skip("no mpirun on PATH: install openmpi-bin and libopenmpi-dev to run the MPI tests")
    try:
        return M.detect_mpi()
    except EnvironmentProblem as exc:
        pytest.skip(f"MPI not usable: {exc}")


@pytest.fixture(scope="module")
def mpi() -> M.MpiInstall:
    return _mpi_or_skip()
