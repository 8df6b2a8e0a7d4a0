"""The pure tests (they start no process) of what tests/integration/test_report.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from clusterbench.benchmarks.declare import Result
from clusterbench.errors import UsageError
from clusterbench.records import Run
from clusterbench.report import html as H
from clusterbench.report.plots import Source, comparison_rows, plan

from reportkit import COMPARISON, FakeStore, PROBE, _stream_store, every_kind_sources, mpi_results, node_results, numa_results, res, run, scaling_results, tune_results


def kinds(specs) -> list[str]:
    return [s.kind for s in specs]


# -- unit tests: which plots -------------------------------------------------------------------------
def test_no_data_no_plots():
    assert plan([Source("empty", [run()], [])]) == []
    assert plan([Source("other", [run()], [res("tcp", "throughput", 900.0, "Mbit/s")])]) == []


def test_node_run_gives_the_node_plots_only():
    got = kinds(plan([Source("node", [run()], node_results())]))
    assert got == ["stream_threads", "memlat", "fpu", "compute_rpeak", "roofline"]


def test_every_kind_where_its_data_exists():
    got = kinds(plan(every_kind_sources(), COMPARISON))
    assert got == ["stream_threads", "stream_numa", "memlat", "fpu", "compute_rpeak", "roofline", "pingpong",
                   "multipair", "hpl_nb", "hpl_grid", "hpl_scaling", "comparison"]


def test_stream_series_and_limit():
    (spec,) = [s for s in plan([Source("node", [run()], node_results())]) if s.kind == "stream_threads"]
    triad = next(s for s in spec.data["series"] if s["label"] == "triad")
    assert triad["x"] == [1, 2] and triad["y"] == [16000, 32000]
    assert spec.data["limits"] == [{"label": "best memory bandwidth measured here", "value": 40000.0}]


def test_numa_matrix_only_when_nodes_vary():
    one = [res("stream", "triad_numa", 1.0, "MB/s", cpu_node=0, mem_node=0)]
    assert "stream_numa" not in kinds(plan([Source("a", [run()], one)]))
    (spec,) = [s for s in plan([Source("a", [run()], numa_results())]) if s.kind == "stream_numa"]
    assert spec.data["cpu_nodes"] == [0, 1] and spec.data["mem_nodes"] == [0, 1]
    assert spec.data["matrix"] == [[30000.0, 18000.0], [18000.0, 30000.0]]


def test_memlat_caches_from_the_probe():
    (spec,) = [s for s in plan([Source("a", [run()], node_results())]) if s.kind == "memlat"]
    assert [(c["name"], c["size"]) for c in spec.data["caches"]] == [("L1d", 32768), ("L2", 1 << 20),
                                                                      ("L3", 32 << 20)]
    assert spec.data["series"][0]["x"] == [4096, 65536, 1 << 22, 1 << 28]
    bare = run(probe={})
    (spec,) = [s for s in plan([Source("a", [bare], node_results())]) if s.kind == "memlat"]
    assert spec.data["caches"] == []


def test_compute_bars_against_rpeak_leave_out_the_tuners_k_sweep():
    (spec,) = [s for s in plan([Source("a", [run()], node_results())]) if s.kind == "compute_rpeak"]
    labels = [b["label"] for b in spec.data["bars"]]
    assert labels == ["FMA peak, 2 cores", "DGEMM star openblas, 2 cores"]  # k=64 != n: a tuning sweep
    assert {lim["value"] for lim in spec.data["limits"]} == {80.0, 40.0}


def test_roofline_needs_peak_and_bandwidth_and_places_kernels():
    assert "roofline" not in kinds(plan([Source("a", [run()], [r for r in node_results()
                                                                if r.benchmark != "peak"])]))
    (spec,) = [s for s in plan([Source("a", [run()], node_results() + tune_results())]) if s.kind == "roofline"]
    assert spec.data["peak"] == 76.0 and spec.data["bw"] == 32.0  # GB/s: the best STREAM figure at 2 threads
    pts = {p["label"]: p for p in spec.data["points"]}
    assert pts["STREAM triad, 2 threads"]["ai"] == pytest.approx(1 / 12)
    assert pts["STREAM triad, 2 threads"]["gflops"] == pytest.approx(32.0 / 12)
    assert pts["DGEMM star, 2 cores, n=1200"]["ai"] == pytest.approx(1200 / 16)
    assert pts["HPL N=4000"]["ai"] == pytest.approx(4000 / 24)


def test_pingpong_log_axes_leave_out_zero_bytes():
    (spec,) = [s for s in plan([Source("m", [run()], mpi_results())]) if s.kind == "pingpong"]
    (lat,) = spec.data["latency"]
    assert lat["x"] == [1, 1024, 1 << 20] and lat["label"] == "ping-pong shm, intra-node"
    (mp,) = [s for s in plan([Source("m", [run()], mpi_results())]) if s.kind == "multipair"]
    assert [s["label"] for s in mp.data["per_pair"]] == ["1 pair", "2 pairs"]


def test_hpl_plots_need_more_than_one_nb_or_grid():
    one = [res("hpl", "rmax", 50.0, "Gflop/s", n=4000, nb=192, grid="1x2", topology="pure", blas="openblas")]
    assert not {"hpl_nb", "hpl_grid"} & set(kinds(plan([Source("h", [run()], one)])))
    specs = {s.kind: s for s in plan([Source("t", [run()], tune_results())])}
    assert [s["label"] for s in specs["hpl_nb"].data["series"]] == ["openblas hybrid 1x1, N=4000",
                                                                     "openblas pure 1x2, N=4000"]
    assert specs["hpl_nb"].data["limits"][0]["value"] == 80.0
    assert [b["grid"] for b in specs["hpl_grid"].data["bars"]] == ["1x2", "1x1"]  # best first
    assert specs["hpl_grid"].data["bars"][0]["nb"] == 192


def test_hpl_scaling():
    (spec,) = [s for s in plan([Source("s", [run()], scaling_results())]) if s.kind == "hpl_scaling"]
    assert spec.data["nodes"] == [1, 2, 3] and [r["value"] for r in spec.data["rpeak"]] == [80.0, 160.0, 240.0]


# -- unit tests: the comparison chart from Comparison.as_dict() ------------------------------------------
def test_comparison_chart_from_a_hand_made_dict():
    (spec,) = [s for s in plan([], COMPARISON) if s.kind == "comparison"]
    rows = spec.data["rows"]
    assert [r["label"] for r in rows] == ["pingpong bandwidth (size_bytes=4194304)", "pingpong latency (size_bytes=8)",
                                          "hpl rmax (nb=192)"]
    assert (rows[0]["ratio"], rows[0]["lo"], rows[0]["hi"], rows[0]["verdict"]) == (1.8, 1.6, 2.0, "better")
    assert spec.data["xlabel"] == "ratio jumbo / baseline"


@pytest.mark.parametrize("bad", [None, {}, {"matches": None}, {"matches": [{"benchmark": "x"}]},
                                 {"matches": [{"comparison": {"ratio": None}}]},
                                 {"matches": [{"comparison": {"ratio": "fast"}}]}, "text", []])
def test_comparison_without_its_keys_gives_no_chart(bad):
    assert comparison_rows(bad) == ([], 0)
    assert plan([], bad) == []


def test_comparison_tolerates_missing_interval_and_caps_rows():
    m = {"matches": [{"benchmark": "b", "metric": f"m{i}", "comparison": {"ratio": 1 + i / 100}} for i in range(50)]}
    rows, left = comparison_rows(m, most=10)
    assert left == 40 and len(rows) == 10
    assert all(r["lo"] == r["hi"] == r["ratio"] for r in rows)
    assert rows[0]["label"] == "b m49"  # the largest change first


# -- unit tests: figures as text, the page, the folder -------------------------------------------------
def test_headline_figures_best_by_direction_with_limit():
    rows = H.headline_figures(node_results() + mpi_results())
    by = {(r["benchmark"], r["metric"]): r for r in rows}
    assert by[("stream", "triad")]["value"] == "32,000" and by[("stream", "triad")]["params"].startswith("variant=")
    assert by[("stream", "triad")]["limit"] == "90% of best memory bandwidth measured here (40,000)"
    assert by[("pingpong", "latency")]["value"] == "0.2"  # the lowest latency: 0 B
    assert by[("memlat", "latency")]["value"] == "1.00"
    assert [H.format_value(v) for v in (0, 0.001234, 3.14159, 42.42, 12345.6)] == ["0", "0.00123", "3.14", "42.4",
                                                                                 "12,346"]


def test_page_is_escaped_and_needs_nothing_from_the_network():
    evil = run(command="clusterbench run node --note <script>alert(1)</script>")
    src = Source("<b>x</b>", [evil], [res("stream", "triad<i>", 1.0, "MB/s&")])
    text = H.page([src], [], "t <&> t", "now")
    assert "<script" not in text and "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text
    assert "triad&lt;i&gt;" in text and "MB/s&amp;" in text and "t &lt;&amp;&gt; t" in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "<link" not in text and "@import" not in text and "url(" not in text
    assert 'content="clusterbench report"' in text


def test_environment_rows_and_differences():
    other = json.loads(json.dumps(PROBE))
    other["environment"]["nics"][0]["mtu"] = 1500
    a, b = Source("a", [run()], []), Source("b", [run("r9" + "0" * 30, probe=other)], [])
    env = H.environment(a)
    assert env["NICs / MTU"] == "eth0 MTU 9000 10000 Mb/s mlx5 up"
    assert env["governor"] == "performance" and env["Rpeak (DP, nominal clock)"].startswith("80.0 Gflop/s")
    text = H.page([a, b], [], "t", "now")
    row = re.search(r'<tr class="differs"><th>NICs / MTU</th>', text)
    assert row and '<tr class="differs"><th>kernel</th>' not in text


def tune_store() -> FakeStore:
    cmd = "clusterbench --db /x.db tune hpl --budget 44s --tune-id=abc123 --tune-trial=1/hpl/nb{}"
    trials = [run(f"t{i}" + "0" * 30, cmd.format(i)) for i in range(3)]
    node = run("n0" + "0" * 30)
    return FakeStore(trials + [node], {t.id: [tune_results()[i]] for i, t in enumerate(trials)})


def test_a_tune_trial_brings_its_whole_tune():
    st = tune_store()
    srcs = H.collect(st, ["t1", "n0", "t2"])
    assert [s.label for s in srcs] == ["tune abc123", "run node n0000000"]
    assert len(srcs[0].runs) == 3 and len(srcs[0].results) == 3
    assert H.environment(srcs[0])["command"] == "clusterbench tune hpl --budget 44s (3 trial runs)"
    with pytest.raises(UsageError, match="no run 'zz'"):
        H.collect(st, ["zz"])
    with pytest.raises(UsageError, match="at least one run"):
        H.collect(st, [])


def _empty_store() -> FakeStore:
    return FakeStore([run()], {})


def test_write_report_replaces_an_earlier_report_and_leaves_no_temporary_folder(tmp_path):
    out = tmp_path / "rep"
    p = H.write_report(_empty_store(), ["r1"], out)
    assert p == out / "index.html" and "No figures stored" in p.read_text()
    manifest = json.loads((out / H.MANIFEST).read_text())
    assert manifest["files"] == ["index.html"]
    (out / "plots" / "01-old.png").write_bytes(b"x")  # a plot the earlier report wrote (its manifest says so)
    (out / H.MANIFEST).write_text(json.dumps({**manifest, "files": ["index.html", "plots/01-old.png"]}))
    (out / "plots" / "mine.png").write_bytes(b"y")  # the user's: kept
    H.write_report(_empty_store(), ["r1"], out, title="second")
    assert "<title>second</title>" in p.read_text() and not (out / "plots" / "01-old.png").exists()
    assert (out / "plots" / "mine.png").read_bytes() == b"y"
    assert json.loads((out / H.MANIFEST).read_text())["files"] == ["index.html"]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["rep"]


def test_write_report_refuses_what_it_must_not_overwrite(tmp_path):
    f = tmp_path / "file"
    f.write_text("keep")
    with pytest.raises(UsageError, match=f"-o {f} is a file, not a folder; choose a folder"):
        H.write_report(_empty_store(), ["r1"], f)
    d = tmp_path / "mine"
    d.mkdir()
    (d / "thesis.tex").write_text("keep")
    with pytest.raises(UsageError, match=r"holds files clusterbench did not write \(thesis.tex\)"):
        H.write_report(_empty_store(), ["r1"], d)
    assert (d / "thesis.tex").read_text() == "keep" and f.read_text() == "keep"
    with pytest.raises(UsageError) as e:  # a parent that is a file: nothing can be created there
        H.write_report(_empty_store(), ["r1"], f / "rep")
    assert str(f / "rep") in str(e.value) and "\n" not in str(e.value)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["file", "mine"]


def test_a_run_that_does_not_exist_writes_nothing(tmp_path):
    with pytest.raises(UsageError, match="no run 'nope'"):
        H.write_report(_empty_store(), ["nope"], tmp_path / "rep")
    assert list(tmp_path.iterdir()) == []


def test_comparison_chart_from_analysis_compare():
    """The chart reads what clusterbench.analysis.compare really produces."""
    compare = pytest.importorskip("clusterbench.analysis.compare")

    def side(rid: str, scale: float) -> tuple[Run, list[Result]]:
        r = res("stream", "triad", 100.0 * scale, "MB/s", threads=1, variant="regular")
        return run(rid), [replace(r, samples=[100.0 * scale * (1 + i / 1000) for i in range(10)])]
    (ra, xa), (rb, xb) = side("a" * 32, 1.0), side("b" * 32, 2.0)
    d = compare.compare([ra], {ra.id: xa}, [rb], {rb.id: xb}, {"stream": ("threads", "variant")}).as_dict()
    (spec,) = plan([], d)
    (row,) = spec.data["rows"]
    assert row["ratio"] == pytest.approx(2.0, rel=0.01) and row["lo"] <= row["ratio"] <= row["hi"]
    assert row["verdict"] in compare.VERDICTS and row["label"].startswith("stream triad")
    from clusterbench.report.plots.kinds.comparison import verdict_color as _verdict_color

    assert [_verdict_color(v) for v in (compare.BETTER, compare.WORSE, compare.SAME, compare.UNKNOWN)] == [
        "#2ca02c", "#d62728", "#7f7f7f", "#7f7f7f"]
    assert spec.data["xlabel"] == "ratio bbbbbbbb / aaaaaaaa"


def _report(db: Path, *args: str) -> int:
    from clusterbench.cli import main

    return main(["--db", str(db), "report", *args])


def _tree_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_report_force_keeps_the_users_notes_and_subfolder(tmp_path, capsys):
    db = _stream_store(tmp_path / "r.db")
    out = tmp_path / "rep"
    assert _report(db, "base", "-o", str(out)) == 0
    (out / "notes.txt").write_text("my notes")
    (out / "sub").mkdir()
    (out / "sub" / "data.csv").write_text("1,2")
    (out / "plots" / "mine.png").write_bytes(b"mine")
    capsys.readouterr()
    assert _report(db, "base", "-o", str(out)) == 2  # an earlier report: --force to replace it
    err = capsys.readouterr().err
    assert "--force" in err and err.count("\n") == 1
    assert _report(db, "last", "-o", str(out), "--force") == 0
    assert (out / "notes.txt").read_text() == "my notes" and (out / "sub" / "data.csv").read_text() == "1,2"
    assert (out / "plots" / "mine.png").read_bytes() == b"mine"
    assert "stream " in (out / "index.html").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.db", "rep"]  # no temporary folder left


def test_report_force_replaces_what_its_manifest_lists_and_nothing_else(tmp_path, capsys):
    db = _stream_store(tmp_path / "r.db")
    out = tmp_path / "rep"
    assert _report(db, "base", "-o", str(out)) == 0
    first = json.loads((out / H.MANIFEST).read_text())
    assert first["generator"] == H.GENERATOR and "index.html" in first["files"]
    assert all((out / f).is_file() for f in first["files"]) and any(f.startswith("plots/") for f in first["files"])
    assert _report(db, "base", "-o", str(out)) == 2
    assert "holds an earlier report; add --force" in capsys.readouterr().err
    # a plot of the earlier report that the new one does not draw goes; names outside the report's own never
    (out / H.MANIFEST).write_text(json.dumps({**first, "files": [*first["files"], "plots/99-gone.png", "../r.db",
                                                                   "notes.txt"]}))
    (out / "plots" / "99-gone.png").write_bytes(b"old plot")
    (out / "notes.txt").write_text("mine")
    assert _report(db, "last", "-o", str(out), "--force") == 0
    assert not (out / "plots" / "99-gone.png").exists() and db.is_file() and (out / "notes.txt").read_text() == "mine"
    now = json.loads((out / H.MANIFEST).read_text())["files"]
    assert "plots/99-gone.png" not in now and all((out / f).is_file() for f in now)


def test_a_folder_of_other_files_is_refused_even_with_force(tmp_path, capsys):
    db = _stream_store(tmp_path / "r.db")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("keep")
    (mine / "figs").mkdir()
    before = _tree_of(mine)
    for extra in ([], ["--force"]):
        assert _report(db, "base", "-o", str(mine), *extra) == 2
        err = capsys.readouterr().err
        assert "holds files clusterbench did not write (figs/, thesis.tex)" in err and err.count("\n") == 1
        assert "--force" not in err and _tree_of(mine) == before


def test_an_earlier_report_without_manifest_keeps_the_users_files(tmp_path):
    db = _stream_store(tmp_path / "r.db")
    out = tmp_path / "rep"
    assert _report(db, "base", "-o", str(out)) == 0
    (out / H.MANIFEST).unlink()  # as a report written before manifests
    (out / "notes.txt").write_text("keep")
    (out / "plots" / "07-old.png").write_bytes(b"old")
    assert _report(db, "last", "-o", str(out), "--force") == 0
    assert (out / "notes.txt").read_text() == "keep" and not (out / "plots" / "07-old.png").exists()


def test_a_manifest_or_page_that_is_not_a_regular_file_is_refused_in_one_line(tmp_path, capsys):
    """--force read the earlier report's manifest unbounded: a link to /dev/zero ran out of memory.
    (A FIFO, which hung, is tested with a real process in tests/integration/test_report.py.)"""
    db = _stream_store(tmp_path / "r.db")
    out = tmp_path / "rep"
    assert _report(db, "base", "-o", str(out)) == 0
    (out / H.MANIFEST).unlink()
    (out / H.MANIFEST).symlink_to("/dev/zero")
    before = _tree_of(out)
    capsys.readouterr()
    assert _report(db, "last", "-o", str(out), "--force") == 2
    err = capsys.readouterr().err
    assert f"{out / H.MANIFEST} is a character device, not a regular file" in err and err.count("\n") == 1
    assert "-o" in err and _tree_of(out) == before
    (out / H.MANIFEST).unlink()  # a report older than manifests, whose page is a device
    (out / "index.html").unlink()
    (out / "index.html").symlink_to("/dev/zero")
    assert _report(db, "last", "-o", str(out), "--force") == 2
    err = capsys.readouterr().err
    assert f"{out / 'index.html'} is a character device, not a regular file" in err and err.count("\n") == 1
    (out / H.MANIFEST).write_text(" " * (2 * 1024 * 1024))  # a regular file, but beyond the stated limit
    assert _report(db, "last", "-o", str(out), "--force") == 2
    err = capsys.readouterr().err
    assert "larger than the 1 MiB clusterbench reads of a report manifest" in err and err.count("\n") == 1


def test_report_to_a_file_names_a_fix_that_works(tmp_path, capsys):
    db = _stream_store(tmp_path / "r.db")
    f = tmp_path / "results.csv"
    f.write_text("keep")
    for extra in ([], ["--force"]):
        assert _report(db, "base", "-o", str(f), *extra) == 2
        err = capsys.readouterr().err
        assert f"-o {f} is a file, not a folder; choose a folder for the report" in err, err
        assert "--force" not in err and err.count("\n") == 1 and f.read_text() == "keep"
    fix = re.search(r"e\.g\. -o (\S+)", err)[1]
    assert _report(db, "base", "-o", fix) == 0 and (Path(fix) / "index.html").is_file()
