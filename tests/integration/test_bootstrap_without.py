"""bootstrap.sh's CLUSTERBENCH_WITHOUT (install without the PostgreSQL parts, as the emulated tier's armhf and
ppc64el images must: psycopg has no wheels there): a value it cannot leave out is refused in one line naming
the accepted one, before anything is installed or a venv made. The subset itself is exercised by the emulated
tier (tests/emukit.py installs every image with CLUSTERBENCH_WITHOUT=postgresql)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_unknown_without_value_is_refused_before_any_install(tmp_path):
    venv = tmp_path / "venv"
    env = {**os.environ, "CLUSTERBENCH_WITHOUT": "slurm", "CLUSTERBENCH_VENV": str(venv)}
    p = subprocess.run([str(REPO / "bootstrap.sh"), "install"], env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "'slurm'" in lines[0] and "CLUSTERBENCH_WITHOUT=postgresql" in lines[0], lines
    assert not venv.exists()  # refused before the venv or pip
