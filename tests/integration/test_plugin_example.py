"""docs/adding-a-benchmark.md is true: its two blocks (one C kernel, one module), copied into the
tree with nothing else edited, give a working, validated, bounded benchmark that joins the node
suite, the listing and the summary. Real compiler, real kernel, real store."""
from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "adding-a-benchmark.md"
PKG = ROOT / "src" / "clusterbench"


def _blocks() -> dict[str, str]:
    text = DOC.read_text()
    found = {}
    for path, lang in (("kernels/node/daxpy.c", "c"), ("benchmarks/node/daxpy.py", "python")):
        m = re.search(rf"`src/clusterbench/{re.escape(path)}`.*?```{lang}\n(.*?)```", text, re.S)
        assert m, f"{DOC.name} has no {lang} block for {path}"
        found[path] = m.group(1)
    return found


@pytest.fixture
def daxpy_installed():
    written = []
    try:
        for rel, code in _blocks().items():
            dest = PKG / rel
            assert not dest.exists(), f"{dest} exists: the example would clobber a real benchmark"
            dest.write_text(code)
            written.append(dest)
        yield
    finally:
        for dest in written:
            dest.unlink(missing_ok=True)
        cache = PKG / "benchmarks" / "node" / "__pycache__"
        for stale in cache.glob("daxpy.*"):
            stale.unlink(missing_ok=True)


def _cb(*args: str, db: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLUSTERBENCH_DB": str(db)}
    return subprocess.run([sys.executable, "-m", "clusterbench", *args], capture_output=True, text=True,
                          env=env, timeout=180)


def test_the_documented_example_is_one_kernel_and_one_module(daxpy_installed, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    # runs, validated by its kernel, with its declared metric and key parameters
    p = _cb("run", "daxpy", "--elements", "200000", "--samples", "4", "--json", db=db)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    (r,) = [r for r in doc["results"] if r["benchmark"] == "daxpy"]
    assert r["metric"] == "rate" and r["unit"] == "MB/s" and len(r["samples"]) == 3
    assert 10 < r["value"] < 1e6  # one core: between a crawl and anything memory can do
    assert r["params"]["cpus"] == [r["params"]["cpu"]]
    assert doc["run"]["builds"]["daxpy"]["binary"]
    # the declared bound is the range check: refused before a run is opened
    bad = _cb("run", "daxpy", "--elements", "10", db=db)
    assert bad.returncode == 2
    assert "--elements 10 is not allowed" in bad.stderr and "2 GiB per vector" in bad.stderr
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    # listed with its declarations, and a member of the node suite after membw
    listed = json.loads(_cb("list", "--json", db=db).stdout)["benchmarks"]["daxpy"]
    assert listed["family"] == "node" and listed["suites"] == {"node": 45}
    assert [m["limits"] for m in listed["metrics"]] == [["best_bandwidth"]]
    code = ("from clusterbench.benchmarks import summarize_results, get_benchmark as g, Result;"
            "m = g('node').members(); print(m.index('membw') < m.index('daxpy'));"
            "print(summarize_results([Result('daxpy', 'rate', 5000.0, 'MB/s', True, {}, [5000.0], {}),"
            " Result('stream', 'triad', 40000.0, 'MB/s', True, {'threads': 2}, [40000.0], {})]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first, summary = out.stdout.splitlines()[:2]
    assert first == "True"
    assert "daxpy    5,000 MB/s on one core" in summary and "one core streams 12% of the node's triad" in summary
