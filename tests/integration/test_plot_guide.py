"""docs/adding-a-plot.md is true: its one block, loaded as a file of report/plots/kinds/ would be,
registers a plot kind that the planner picks where its data exists, in its place in the page, and that
the report renders (pure, drawing stubbed; and, marked integration because matplotlib may start fc-list,
drawn for real). The tree is not written: the block is loaded from a temporary file."""
from __future__ import annotations

import pytest

import plotguidekit
from clusterbench.report import html as H
from plotguidekit import _store

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

guide_kind = plotguidekit.guide_kind


@pytest.mark.integration  # matplotlib may start fc-list to build its font cache
def test_the_guides_plot_is_drawn(guide_kind, tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    index = H.write_report(_store(), ["a" * 8], tmp_path / "rep")
    assert "Not drawn" not in index.read_text()
    png = imread(tmp_path / "rep" / "plots" / "01-intcpu-threads.png")
    assert png.shape[0] > 100 and float(png.var()) > 1e-3
