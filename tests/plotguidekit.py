"""The plot guide's kind, loaded from docs/adding-a-plot.md, and a small store of runs it plots: shared by
the guide's pure and drawing tests."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from clusterbench.benchmarks.declare import Result
from clusterbench.records import Run
from clusterbench.report.plots import REGISTRY

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "adding-a-plot.md"
REL = "report/plots/kinds/intcpu_threads.py"


def _block() -> str:
    m = re.search(rf"`src/clusterbench/{re.escape(REL)}`.*?```python\n(.*?)```", DOC.read_text(), re.S)
    assert m, f"{DOC.name} has no python block for {REL}"
    return m.group(1)


@pytest.fixture
def guide_kind(tmp_path: Path):
    """The guide's block as the module clusterbench.report.plots.kinds.intcpu_threads (from a temporary
    file), registered; unregistered afterwards."""
    name = "clusterbench.report.plots.kinds.intcpu_threads"
    assert "intcpu_threads" not in REGISTRY, "a real intcpu_threads kind exists: the guide's example would clash"
    path = tmp_path / "intcpu_threads.py"
    path.write_text(_block())
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
        yield REGISTRY["intcpu_threads"]
    finally:
        REGISTRY.pop("intcpu_threads", None)
        sys.modules.pop(name, None)


def _res(bench: str, metric: str, value: float, unit: str, **params) -> Result:
    return Result(benchmark=bench, metric=metric, value=value, unit=unit, higher_is_better=True,
                  params=params, samples=[value], summary={"n": 1}, limit=None, limits=[], warnings=[])


def _run(rid: str, command: str) -> Run:
    return Run.from_json({"id": rid, "started": "2026-01-01T00:00:00", "status": "complete", "host": "node1", "command": command,
            "argv": command.split(), "probe": {"hostname": "node1"}, "builds": {}, "warnings": [], "cluster": {},
            "clusterbench_version": "0.2.0"})


class Store:
    """The part of Store the report reads."""

    def __init__(self, runs: list[Run], results: dict[str, list[Result]]):
        self.runs, self.res = runs, results

    def get_run(self, ref: str) -> Run:
        return next(r for r in self.runs if r.id.startswith(ref))

    def results(self, ref: str) -> list[Result]:
        return self.res[self.get_run(ref).id]

    def list_runs(self) -> list[Run]:
        return [Run(id=r.id, command=r.command, status=r.status, started=r.started, host=r.host) for r in self.runs]


INTCPU = [_res("intcpu", "events_per_s", 900.0 * t, "events/s", threads=t, max_prime=10000) for t in (1, 2, 4)]
FPU = [_res("fpu", "latency_cycles", 4.0, "cycles", op="fma", precision="double", vector="scalar")]
PEAK = [_res("peak", "gflops", 76.0, "Gflop/s", threads=2)]


def _store() -> Store:
    a, b = _run("a" * 32, "clusterbench run intcpu"), _run("b" * 32, "clusterbench run node --quick")
    return Store([a, b], {a.id: INTCPU, b.id: FPU + PEAK})
