"""docs/adding-a-launcher.md is true: its one module, copied into the launchers' folder with nothing
else edited, is found by the registry, offered as a ``--launcher`` choice of the MPI benchmarks, builds
its command from a LaunchSpec, and builds the one-tagged-process-per-node mode whose lines the caller
reads back by its tag. A fresh interpreter, as a user's would be (discovery happens at import)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "adding-a-launcher.md"
LAUNCHERS = ROOT / "src" / "clusterbench" / "launch" / "mpi" / "launchers"
REL = "launch/mpi/launchers/flux.py"


def _block() -> str:
    m = re.search(rf"`src/clusterbench/{re.escape(REL)}`.*?```python\n(.*?)```", DOC.read_text(), re.S)
    assert m, f"{DOC.name} has no python block for {REL}"
    return m.group(1)


@pytest.fixture
def flux_installed(tmp_path: Path):
    dest = LAUNCHERS / "flux.py"
    assert not dest.exists(), f"{dest} exists: the example would clobber a real launcher"
    try:
        dest.write_text(_block())
        fake = tmp_path / "bin" / "flux"  # the launcher looks for its program on PATH, as srun's does
        fake.parent.mkdir()
        fake.write_text("#!/bin/sh\nexit 0\n")
        fake.chmod(0o755)
        yield fake
    finally:
        dest.unlink(missing_ok=True)
        for stale in (LAUNCHERS / "__pycache__").glob("flux.*"):
            stale.unlink(missing_ok=True)


CHECK = r"""
import json, sys, tempfile
from clusterbench.launch import mpi as M
from clusterbench.benchmarks import get_benchmark
from clusterbench.errors import UsageError

out = {"choices": list(M.launcher_choices()), "registered": "flux" in M.REGISTRY}
out["pingpong"] = [list(p.choices) for p in get_benchmark("pingpong").params if p.name == "launcher"][0]
mpich = M.MpiInstall("mpich", "4.0", "/usr/bin/mpiexec.mpich", "/usr/bin/mpicc.mpich")
with tempfile.TemporaryDirectory() as wd:
    spec = M.LaunchSpec(nranks=4, hosts=[M.Host("n1", 2), M.Host("n2", 2)], per_node=2, launcher="flux",
                        env={"OMP_NUM_THREADS": "2"})
    cmd, env = M.build_command(mpich, spec, ["./kernel", "--x=1"], wd)
    out["ranks"] = [cmd, env]
    agents = M.build_per_node(["n1", "n2", "n3"], ["agent"], wd, launcher="flux", env={"A": "1"},
                              head_only=("CLUSTERBENCH_DB",))
    out["agents"] = [agents.command, agents.env, agents.launcher, agents.unset, agents.mpi]
    out["lines"] = [[r, ln.decode()] for r, ln in agents.demux.feed(b"2: hello from n3")]
    try:
        M.build_command(mpich, M.LaunchSpec(nranks=2, places=[M.RankPlace("n1", 0), M.RankPlace("n2", 0)],
                                            launcher="flux"), ["k"], wd)
    except UsageError as exc:
        out["refused"] = str(exc)
print(json.dumps(out))
"""


def test_the_documented_launcher_is_one_module(flux_installed: Path) -> None:
    env = {**os.environ, "PATH": f"{flux_installed.parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SLURM_JOB_ID", None)
    p = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    flux = str(flux_installed)
    # found by the registry's discovery, offered wherever --launcher is
    assert out["registered"] and out["choices"] == ["auto", "flux", "mpirun", "srun"]
    assert out["pingpong"] == out["choices"]
    # its command from a LaunchSpec: 2 unbound ranks per node on the hosts asked for
    cmd, renv = out["ranks"]
    assert cmd == [flux, "run", "-n", "4", "--requires=host:n1,n2", "-N", "2", "--tasks-per-node=2",
                   "-o", "cpu-affinity=off", "./kernel", "--x=1"]
    assert renv == {"OMP_NUM_THREADS": "2"}
    # one tagged process per node: labelled, kept going, read back by its tag; no MPI looked for
    cmd, aenv, name, unset, mpi = out["agents"]
    assert cmd == [flux, "run", "-n", "3", "--requires=host:n1,n2,n3", "-N", "3", "--tasks-per-node=1",
                   "-o", "cpu-affinity=off", "--label-io", "-o", "exit-timeout=none", "agent"]
    assert aenv == {"A": "1"} and name == "flux" and mpi is None
    assert unset == ["CLUSTERBENCH_DB"]  # flux hands its whole environment on (exports_env)
    assert out["lines"] == [[2, "hello from n3"]]
    # what it cannot honour is one line with the fix
    assert "places ranks itself" in out["refused"]
