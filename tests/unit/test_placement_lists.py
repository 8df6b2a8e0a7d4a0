"""List placement (issue 12): the lists' data files (clusterbench/data/lists), the pure placement
(analysis/placement.py: exact inside the covered rows, bounded beyond them or between anchors, a figure
above #1 ranks 1) and `clusterbench results place` on a stored run (text, JSON, one-line errors, exit 2)."""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from clusterbench import data as D
from clusterbench.analysis.placement import caveats, place, to_list_units
from clusterbench.benchmarks.base import Result
from clusterbench.cli import main
from clusterbench.store import Store
from clusterbench.session import new_run_record

REPO = Path(__file__).resolve().parents[2]
LISTS_DIR = REPO / "src" / "clusterbench" / "data" / "lists"


# -- the data files -------------------------------------------------------------------------------------
def test_every_list_file_loads_with_its_source_edition_and_coverage():
    files = sorted(p.name for p in LISTS_DIR.iterdir() if p.suffix == ".csv")
    assert files and len(files) == len(D.editions())  # every file is named <list>-<yyyy>-<mm>.csv
    for ed in D.load_all():
        assert ed.list in D.LISTS and re.fullmatch(r"\d{4}-\d{2}", ed.edition)
        assert f"{ed.list}-{ed.edition}.csv" in files
        assert ed.sources and all(s.strip() for s in ed.sources) and ed.retrieved and ed.title
        assert ed.covers == [r["rank"] for r in ed.rows] and ed.coverage_note
        assert all(r[ed.metric] > 0 for r in ed.rows)
    # the lists and editions the issue asks about, as far as stored sources had them
    assert ("green500", "2020-06") in D.editions() and ("top500", "2025-06") in D.editions()
    assert D.load_edition("top500", "2018-11").covers == list(range(1, 501))


def test_data_files_are_in_the_package_build():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "data/lists/*.csv" in cfg["tool"]["setuptools"]["package-data"]["clusterbench"]


def test_a_file_without_a_source_is_refused():
    text = "# list: green500\n# edition: 2020-06\n# title: t\n# retrieved: r\n# covers: 1\n# metric: gflops_per_watt\n" \
           "rank,system,site,rmax_tflops,power_kw,gflops_per_watt,hpcg_tflops,top500_rank,note\n1,a,,,,2.0,,,\n"
    with pytest.raises(ValueError, match="no source"):
        D.parse(text, "x.csv")
    with pytest.raises(ValueError, match="ranks differ"):
        D.parse(text.replace("# retrieved", "# source: s\n# retrieved").replace("covers: 1", "covers: 1-2"), "x.csv")


# -- placement ------------------------------------------------------------------------------------------
def test_exact_inside_the_covered_rows():
    ed = D.load_edition("top500", "2018-11")
    p = place(1600.0, ed, ed.month_name)  # between #194 (1601) and #195 (1593.03)
    assert p.exact and p.rank_min == p.rank_max == 195 and p.list_size == 500
    assert p.text.startswith("rank 195 of 500 on the November 2018 TOP500")
    tie = place(1593.03, ed)  # level with #195: takes its place
    assert tie.exact and tie.rank_min == 195
    g = D.load_edition("green500", "2022-06")
    assert place(51.0, g).rank_min == 4 and place(51.0, g).exact  # below LUMI 51.63, above Adastra 50.03


def test_bounded_beyond_the_covered_rows_and_between_anchors():
    g = D.load_edition("green500", "2022-06")
    p = place(1.868, g, g.month_name)
    assert not p.exact and p.rank_min == 6 and p.rank_max is None
    assert "rank > 5" in p.text and "not in the data" in p.text
    a = D.load_edition("green500", "2020-06")  # seed 000's anchors: #1 21.1, #200 0.497
    p = place(1.868, a, a.month_name)
    assert (p.exact, p.rank_min, p.rank_max) == (False, 2, 200) and "rows 2-199 are not in the data" in p.text
    assert place(0.3, a).rank_min == 201 and place(0.3, a).rank_max is None
    t = D.load_edition("top500", "2018-11")  # the whole list: below #500 is off the list
    p = place(to_list_units("top500", 65.38), t)
    assert p.rank_min == 501 and p.rank_max is None and "would not make the list" in p.text
    t25 = D.load_edition("top500", "2025-06")
    p = place(0.065, t25)
    assert (p.rank_min, p.rank_max) == (5, 501) and "rows 5-500 are not in the data" in p.text


def test_a_figure_above_the_first_ranks_first_and_out_of_order_rows_are_said():
    for lst, ed in D.editions():
        e = D.load_edition(lst, ed)
        top = max(r[e.metric] for r in e.rows)
        p = place(top * 2, e)
        assert p.exact and p.rank_min == 1 and p.above is None
    t = D.load_edition("top500", "2018-11")  # row 69 (2843) above row 68 (2787.14) in the scraped data
    p = place(2800.0, t)
    assert p.out_of_order and not p.exact and (p.rank_min, p.rank_max) == (68, 70) and "out of order" in p.text
    with pytest.raises(ValueError):
        place(float("nan"), t)


def test_caveats_name_the_measurement_level_the_switch_and_a_partial_list():
    c = " ".join(caveats("green500", declared=True, sources="vm: watts:35 declared"))
    assert "EEHPC" in c and "switch" in c and "declared" in c and "only some rows" in c
    assert "not official" in " ".join(caveats("hpcg", official=False))
    assert not any("only some rows" in x for x in caveats("top500", partial=False))


# -- the command ------------------------------------------------------------------------------------------
def _store_run(db: Path, figures: list[tuple[str, str, float, str, dict]]) -> str:
    st = Store(db)
    rid = st.begin_run(new_run_record(["clusterbench", "run", "hpl"], {"hostname": "h"}, "default"))
    for bench, metric, value, unit, params in figures:
        st.add_result(rid, Result(benchmark=bench, metric=metric, value=value, unit=unit, higher_is_better=True,
                                  params=params, samples=[value], summary={}))
    st.finish_run(rid, "complete")
    st.close()
    return rid


ENERGY = {"scope": "timed phase", "joules": 77.11, "avg_watts": 35.0, "phase_s": 2.203, "declared": True,
          "sources": {"vm": {"kind": "watts", "spec": "watts:35", "declared": True}}}


def test_results_place_text_and_json(tmp_path, capsys):
    db = tmp_path / "r.db"
    rid = _store_run(db, [("hpl", "rmax", 65.38, "Gflop/s", {"n": 6000, "energy": ENERGY}),
                          ("hpl", "gflops_per_watt", 65.38 / 35, "Gflop/s/W", {"n": 6000, "energy": ENERGY})])
    assert main(["--db", str(db), "results", "place", "--list", "green500", "--edition", "2020-06"]) == 0
    out = capsys.readouterr().out
    assert "June 2020" in out and "rank 2 to 200" in out and "Duffy" in out and "declared" in out
    assert main(["--db", str(db), "results", "place", rid[:8], "--edition", "all", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"] == rid
    got = {(e["list"], e["edition"]): e for e in doc["placements"]}
    assert set(got) == set(D.editions("green500") + D.editions("top500"))  # no hpcg figure: not placed
    t = got[("top500", "2018-11")]
    assert t["value_in_list_unit"] == pytest.approx(0.06538) and t["placement"]["rank_min"] == 501
    g = got[("green500", "2007-11")]  # 1.868 Gflops/W beats 2007's #1 (0.357)
    assert g["placement"]["exact"] and g["placement"]["rank_min"] == 1
    assert g["sources"] == ["http://www.green500.org/lists/2007/11/green500/"] and g["caveats"]


@pytest.mark.parametrize("args, needle", [
    (["--list", "green500", "--edition", "2031-06"], "no green500 edition 2031-06"),
    (["--list", "hpcg"], "no hpcg rating figure"),
    (["--list", "green499"], "invalid choice: 'green499'"),
    (["--edition", "1999-06"], "no list edition 1999-06"),
])
def test_bad_list_or_edition_is_one_line_and_exit_2(tmp_path, capsys, args, needle):
    db = tmp_path / "r.db"
    _store_run(db, [("hpl", "rmax", 65.38, "Gflop/s", {"n": 6000}),
                    ("hpl", "gflops_per_watt", 1.868, "Gflop/s/W", {"n": 6000, "energy": ENERGY})])
    try:
        rc = main(["--db", str(db), "results", "place", *args])
    except SystemExit as exc:  # argparse's usage errors exit 2 with one line, as everywhere in the CLI
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and needle in err, err
