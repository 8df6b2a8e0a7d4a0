"""docs/adding-a-plot.md is true: its one block, loaded as a file of report/plots/kinds/ would be,
registers a plot kind that the planner picks where its data exists, in its place in the page, and that
the report renders (pure, drawing stubbed; and, marked integration because matplotlib may start fc-list,
drawn for real). The tree is not written: the block is loaded from a temporary file."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from clusterbench.report import html as H
from clusterbench.report.plots import REGISTRY, Source, plan, registered

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


def _res(bench: str, metric: str, value: float, unit: str, **params) -> dict:
    return {"benchmark": bench, "metric": metric, "value": value, "unit": unit, "higher_is_better": True,
            "params": params, "samples": [value], "summary": {"n": 1}, "limit": None, "limits": [], "warnings": []}


def _run(rid: str, command: str) -> dict:
    return {"id": rid, "started": "2026-01-01T00:00:00", "status": "complete", "host": "node1", "command": command,
            "argv": command.split(), "probe": {"hostname": "node1"}, "builds": {}, "warnings": [], "cluster": {},
            "clusterbench_version": "0.2.0"}


class Store:
    """The part of Store the report reads."""

    def __init__(self, runs: list[dict], results: dict[str, list[dict]]):
        self.runs, self.res = runs, results

    def get_run(self, ref: str) -> dict:
        return next(r for r in self.runs if r["id"].startswith(ref))

    def results(self, ref: str) -> list[dict]:
        return self.res[self.get_run(ref)["id"]]

    def list_runs(self) -> list[dict]:
        return [{k: r[k] for k in ("id", "command", "status", "started", "host")} for r in self.runs]


INTCPU = [_res("intcpu", "events_per_s", 900.0 * t, "events/s", threads=t, max_prime=10000) for t in (1, 2, 4)]
FPU = [_res("fpu", "latency_cycles", 4.0, "cycles", op="fma", precision="double", vector="scalar")]
PEAK = [_res("peak", "gflops", 76.0, "Gflop/s", threads=2)]


def _store() -> Store:
    a, b = _run("a" * 32, "clusterbench run intcpu"), _run("b" * 32, "clusterbench run node --quick")
    return Store([a, b], {a["id"]: INTCPU, b["id"]: FPU + PEAK})


def test_the_guides_kind_is_planned_where_its_data_is_in_its_place(guide_kind):
    assert guide_kind.kind == "intcpu_threads" and guide_kind in registered()
    run = _run("a" * 32, "clusterbench run intcpu")
    assert plan([Source("x", [run], FPU + PEAK)]) and "intcpu_threads" not in [s.kind for s in plan(
        [Source("x", [run], FPU + PEAK + INTCPU[:1])])]  # one thread count: nothing to draw against threads
    specs = plan([Source("x", [run], INTCPU + FPU + PEAK)])
    assert [s.kind for s in specs] == ["fpu", "intcpu_threads", "compute_rpeak"]
    assert specs[1].data["series"] == [{"label": "prime search", "x": [1, 2, 4], "y": [900.0, 1800.0, 3600.0]}]


def test_a_report_shows_the_guides_plot(guide_kind, tmp_path, monkeypatch):
    drawn = []

    def fake_render(spec, path):  # the page and its plan, not matplotlib (the integration test draws)
        drawn.append(spec.kind)
        Path(path).write_bytes(b"\x89PNG\r\n\x1a\n")
    monkeypatch.setattr(H, "render", fake_render)
    index = H.write_report(_store(), ["a" * 8, "b" * 8], tmp_path / "rep")
    text = index.read_text()
    assert drawn == ["fpu", "intcpu_threads", "compute_rpeak"]
    assert '<img src="plots/02-intcpu-threads.png" alt="Integer prime search against threads">' in text
    assert (tmp_path / "rep" / "plots" / "02-intcpu-threads.png").is_file()
    assert text.index('id="plot-fpu"') < text.index('id="plot-intcpu-threads"') < text.index('id="plot-compute-rpeak"')


@pytest.mark.integration  # matplotlib may start fc-list to build its font cache
def test_the_guides_plot_is_drawn(guide_kind, tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    index = H.write_report(_store(), ["a" * 8], tmp_path / "rep")
    assert "Not drawn" not in index.read_text()
    png = imread(tmp_path / "rep" / "plots" / "01-intcpu-threads.png")
    assert png.shape[0] > 100 and float(png.var()) > 1e-3


def test_every_file_in_kinds_is_a_registered_kind_in_page_order():
    from clusterbench.report.plots import KINDS

    folder = ROOT / "src" / "clusterbench" / "report" / "plots" / "kinds"
    files = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert {type(k).__module__.rsplit(".", 1)[1] for k in registered()} >= files
    assert KINDS == ("stream_threads", "stream_numa", "memlat", "fpu", "compute_rpeak", "roofline", "pingpong",
                     "multipair", "hpl_nb", "hpl_grid", "hpl_scaling", "comparison")
