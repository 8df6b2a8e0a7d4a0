"""docs/adding-a-plot.md is true: its one block, loaded as a file of report/plots/kinds/ would be,
registers a plot kind that the planner picks where its data exists, in its place in the page, and that
the report renders (pure, drawing stubbed; and, marked integration because matplotlib may start fc-list,
drawn for real). The tree is not written: the block is loaded from a temporary file."""
from __future__ import annotations

from pathlib import Path

import plotguidekit
from clusterbench.report import html as H
from clusterbench.report.plots import Source, plan, registered
from plotguidekit import FPU, INTCPU, PEAK, ROOT, _run, _store

guide_kind = plotguidekit.guide_kind


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


def test_every_file_in_kinds_is_a_registered_kind_in_page_order():
    from clusterbench.report.plots import KINDS

    folder = ROOT / "src" / "clusterbench" / "report" / "plots" / "kinds"
    files = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert {type(k).__module__.rsplit(".", 1)[1] for k in registered()} >= files
    assert KINDS == ("stream_threads", "stream_numa", "memlat", "fpu", "compute_rpeak", "roofline", "pingpong",
                     "multipair", "coll_latency", "coll_busbw", "coll_efficiency", "hpl_nb", "hpl_grid", "hpl_scaling",
                     "comparison")
