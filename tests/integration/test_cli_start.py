"""A short command's start: `results list`, `results table` and `compare` import what they use, not every
command's machinery (issue 28: each within a second on a 100,000-run store, of which Python's start and
the parser were most). Each command runs in a fresh interpreter, as from the shell, and lists its modules;
tests/unit/test_cli_start.py checks the parser they are read with."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import storekit
from clusterbench.session import new_run_record
from clusterbench.store import Store

pytestmark = [pytest.mark.integration, pytest.mark.parallel]  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

SRC = Path(__file__).resolve().parents[2] / "src"
PROBE = """
import contextlib, io, json, sys
from clusterbench.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""
#: what none of the three may import: a session, MPI launchers, other commands, other benchmark families
NEVER = ("clusterbench.session", "clusterbench.launch.mpi", "clusterbench.probe", "clusterbench.cli.run", "clusterbench.cli.check", "clusterbench.cli.sweep", "clusterbench.check",
         "clusterbench.benchmarks.mpi", "clusterbench.benchmarks.hpl", "clusterbench.benchmarks.hpcc")


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("start") / "r.db")
    st = Store(path)
    for i in range(4):
        rec = new_run_record(["clusterbench", "run", "stream"], {}, "quick")
        rec["tags"] = ["side-a" if i < 2 else "side-b"]
        rid = st.begin_run(rec)
        for t in (1, 2):
            st.add_result(rid, storekit.result(100.0 + i + t, threads=t))
        st.finish_run(rid, "complete")
    st.close()
    return path


def _start(db: str, *argv: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    p = subprocess.run([sys.executable, "-c", PROBE, "--db", db, *argv], capture_output=True, text=True,
                       env=env, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("argv", [["results", "list", "--tag", "side-b"],
                                  ["results", "table", "stream", "--metric", "triad", "--rows", "run", "--runs", "side-a,side-b"],
                                  ["compare", "side-a", "side-b"]])
def test_a_short_command_imports_only_what_it_uses(db, argv):
    got = _start(db, *argv)
    assert got["rc"] == 0 and got["out"].strip(), got["out"]
    loaded = [m for m in got["modules"] if m.startswith(NEVER)]
    assert not loaded, f"{' '.join(argv)} imported {loaded}"
    if argv[0] == "results" and argv[1] == "list":  # no benchmark's class at all, so no kernel builder either
        assert not [m for m in got["modules"] if m.startswith(("clusterbench.benchmarks.base", "clusterbench.kernels",
                                                                "clusterbench.launch", "clusterbench.benchmarks.node"))]
    else:  # the one benchmark's class (stream's), not every family's
        assert "clusterbench.benchmarks.node.stream" in got["modules"], got["modules"]
