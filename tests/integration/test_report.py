"""`clusterbench report`: the HTML page with plots (clusterbench.report.html / .plots).

Unit tests: which plots the data allows (each only where its data exists), on hand-made result
dicts; the comparison chart from a hand-made ``Comparison.as_dict()``; headline figures; the page
(escaped, nothing from the network); the output folder rules. Integration tests: real runs (`run node
--quick`, `run mpi --quick`, a short `tune hpl`) made once into a temporary store, their report
rendered by a real headless Chromium: a screenshot, no console or resource errors, every plot image
loaded and not blank, each run's headline figures in the page text.
"""
from __future__ import annotations

import html as htmllib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench.errors import UsageError
from clusterbench.report import html as H
from clusterbench.report.plots import Source, comparison_rows, plan

REPO = Path(__file__).resolve().parents[2]


# -- hand-made data -----------------------------------------------------------------------------------
def res(bench: str, metric: str, value: float, unit: str, hib: bool = True, limit: dict | None = None,
        **params) -> dict:
    return {"benchmark": bench, "metric": metric, "value": value, "unit": unit, "higher_is_better": hib,
            "params": params, "samples": [value], "summary": {"n": 1}, "limit": limit,
            "limits": [limit] if limit else [], "warnings": []}


PROBE = {
    "hostname": "node1",
    "cpu": {"model_name": "Test CPU", "microarchitecture": "Zen 4", "arch": "x86_64"},
    "rpeak": {"node": {"dp_gflops_nominal": 80.0}, "per_core": {"dp_gflops_nominal": 40.0}},
    "topology": {"packages": 1, "numa_nodes": 2, "cores": 2, "pus": 2, "caches": [
        {"level": 1, "type": "data", "name": "L1d", "size_bytes": 32768, "cpus": [0]},
        {"level": 1, "type": "data", "name": "L1d", "size_bytes": 32768, "cpus": [1]},
        {"level": 1, "type": "instruction", "name": "L1i", "size_bytes": 32768, "cpus": [0]},
        {"level": 2, "type": "unified", "name": "L2", "size_bytes": 1 << 20, "cpus": [0]},
        {"level": 3, "type": "unified", "name": "L3", "size_bytes": 32 << 20, "cpus": [0, 1]}]},
    "memory": {"total_bytes": 16 << 30},
    "environment": {"kernel": "6.1.0", "preemption": "voluntary", "governor": "performance", "turbo": True,
                    "smt_active": False, "thp": "madvise", "numa_balancing": False,
                    "nics": [{"name": "eth0", "mtu": 9000, "speed_mbps": 10000, "driver": "mlx5", "operstate": "up"}],
                    "mpi": [{"name": "Open MPI", "version": "4.1.4"}], "blas": [{"name": "openblas", "path": "/x"}],
                    "compilers": [{"name": "gcc", "version": "12.2.0"}]},
}


def run(rid: str = "r1" + "0" * 30, command: str = "clusterbench run node --quick", probe: dict | None = None,
        host: str = "node1") -> dict:
    return {"id": rid, "started": "2026-01-01T00:00:00", "status": "complete", "host": host, "command": command,
            "argv": command.split(), "probe": PROBE if probe is None else probe, "builds": {}, "warnings": [],
            "cluster": {}, "clusterbench_version": "0.2.0"}


def node_results() -> list[dict]:
    bw_lim = {"name": "best_bandwidth", "description": "best memory bandwidth measured here", "value": 40000.0,
              "fraction": 0.9}
    out = [res("stream", m, v * t, "MB/s", limit=bw_lim, threads=t, variant="regular")
           for m, v in (("copy", 15000), ("triad", 16000)) for t in (1, 2)]
    out += [res("memlat", "latency", lat, "ns", False, size_bytes=size, pattern="random")
            for size, lat in ((4096, 1.0), (65536, 4.0), (1 << 22, 15.0), (1 << 28, 100.0))]
    out += [res("fpu", "latency_cycles", 4.0, "cycles", False, op="fma", precision="double", vector="scalar"),
            res("fpu", "throughput_cycles", 0.5, "cycles", False, op="fma", precision="double", vector="scalar")]
    rp = {"name": "rpeak", "description": "Rpeak, 2 cores", "value": 80.0, "fraction": 0.95}
    out += [res("peak", "gflops", 76.0, "Gflop/s", limit=rp, threads=2),
            res("dgemm", "gflops", 70.0, "Gflop/s", mode="star", blas="openblas", n=1200, threads=2),
            res("dgemm", "gflops", 60.0, "Gflop/s", mode="single", blas="openblas", n=1000, k=64, threads=1)]
    return out


def mpi_results() -> list[dict]:
    out = []
    for size in (0, 1, 1024, 1 << 20):
        out.append(res("pingpong", "latency", 0.2 + size / 1e4, "us", False, size_bytes=size,
                       transport_used="shm", pair="intra-node"))
        out.append(res("pingpong", "bandwidth", size / (0.2 + size / 1e4), "MB/s", size_bytes=size,
                       transport_used="shm", pair="intra-node"))
        for k in (1, 2):
            out.append(res("multipair", "pair_bandwidth", 10.0 + size / 1e3 / k, "MB/s", size_bytes=size, pairs=k))
            out.append(res("multipair", "aggregate_bandwidth", 10.0 + size / 1e3, "MB/s", size_bytes=size, pairs=k))
    return out


def tune_results() -> list[dict]:
    return [res("hpl", "rmax", 40.0 + nb / 10 + (5 if topo == "pure" else 0), "Gflop/s", n=4000, nb=nb,
                grid="1x2" if topo == "pure" else "1x1", topology=topo, blas="openblas")
            for nb in (64, 128, 192) for topo in ("pure", "hybrid")]


def scaling_results() -> list[dict]:
    return [res("hpl-scaling", "rmax", 50.0 * k * 0.9 ** (k - 1), "Gflop/s", nodes=k, grid=f"1x{2 * k}",
                rmax_by_grid={f"1x{2 * k}": 50.0 * k * 0.9 ** (k - 1)}, rpeak_nodes_gflops=80.0 * k)
            for k in (1, 2, 3)]


def numa_results() -> list[dict]:
    return [res("stream", "triad_numa", 30000.0 if c == m else 18000.0, "MB/s", cpu_node=c, mem_node=m, threads=1)
            for c in (0, 1) for m in (0, 1)]


COMPARISON = {
    "schema": 1, "a": {"label": "baseline"}, "b": {"label": "jumbo"},
    "matches": [
        {"benchmark": "pingpong", "metric": "bandwidth", "params": {"size_bytes": 4194304},
         "comparison": {"ratio": 1.8, "ci_low": 1.6, "ci_high": 2.0, "verdict": "better", "change_pct": 80.0}},
        {"benchmark": "pingpong", "metric": "latency", "params": {"size_bytes": 8},
         "comparison": {"ratio": 1.01, "ci_low": 0.97, "ci_high": 1.05, "verdict": "no significant difference",
                        "change_pct": 1.0}},
        {"benchmark": "hpl", "metric": "rmax", "params": {"nb": 192},
         "comparison": {"ratio": 0.9, "ci_low": 0.85, "ci_high": 0.95, "verdict": "worse", "change_pct": -10.0}},
    ],
}


def every_kind_sources() -> list[Source]:
    return [Source("node", [run()], node_results() + numa_results()), Source("mpi", [run("r2" + "0" * 30)], mpi_results()),
            Source("tune", [run("r3" + "0" * 30)], tune_results()),
            Source("scaling", [run("r4" + "0" * 30)], scaling_results())]


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
                                                                if r["benchmark"] != "peak"])]))
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


class FakeStore:
    """The part of Store the report reads: get_run, results, list_runs."""

    def __init__(self, runs: list[dict], results: dict[str, list[dict]]):
        self.runs, self.res = runs, results

    def get_run(self, ref: str) -> dict:
        found = [r for r in self.runs if r["id"].startswith(ref)]
        if len(found) != 1:
            raise UsageError(f"no run '{ref}' in fake", "see 'clusterbench results list'")
        return found[0]

    def results(self, ref: str) -> list[dict]:
        return self.res.get(self.get_run(ref)["id"], [])

    def list_runs(self) -> list[dict]:
        return [{k: v for k, v in r.items() if k in ("id", "command", "status", "started", "host")} for r in self.runs]


def tune_store() -> FakeStore:
    cmd = "clusterbench --db /x.db tune hpl --budget 44s --tune-id=abc123 --tune-trial=1/hpl/nb{}"
    trials = [run(f"t{i}" + "0" * 30, cmd.format(i)) for i in range(3)]
    node = run("n0" + "0" * 30)
    return FakeStore(trials + [node], {t["id"]: [tune_results()[i]] for i, t in enumerate(trials)})


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


# -- integration: drawing, and the page in a real browser -----------------------------------------------
def png_variance(path: Path) -> float:
    from matplotlib.image import imread

    img = imread(str(path))
    return float(img[..., :3].var())


@pytest.mark.integration  # matplotlib may start fc-list to build its font cache
def test_every_plot_kind_draws_a_non_blank_png(tmp_path):
    st = FakeStore([], {})
    srcs = every_kind_sources()
    for s in srcs:
        st.runs += s.runs
        st.res[s.runs[0]["id"]] = s.results
    p = H.write_report(st, [s.runs[0]["id"] for s in srcs], tmp_path / "rep", comparison=COMPARISON)
    pngs = sorted((tmp_path / "rep" / "plots").glob("*.png"))
    assert len(pngs) == 12, pngs
    for png in pngs:
        assert png_variance(png) > 1e-3, png
    assert "Not drawn" not in p.read_text()


CHECKER = """<script>(function () {
  var errs = [];
  function rec(m) { errs.push(String(m)); document.documentElement.setAttribute('data-errors', JSON.stringify(errs)); }
  window.addEventListener('error', function (e) {
    var t = e.target;
    rec(t && t.tagName ? 'resource ' + t.tagName + ' ' + (t.src || t.href) : 'error ' + e.message);
  }, true);
  var ce = console.error;
  console.error = function () { rec('console.error ' + [].join.call(arguments, ' ')); ce.apply(console, arguments); };
  window.addEventListener('load', function () {
    var imgs = [].slice.call(document.images).map(function (i) {
      return {src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0, w: i.naturalWidth, h: i.naturalHeight};
    });
    document.documentElement.setAttribute('data-images', JSON.stringify(imgs));
    document.documentElement.setAttribute('data-errors', JSON.stringify(errs));
  });
})();</script>"""


def chromium(*args: str, timeout: float = 90) -> tuple[str, str]:
    """Run headless Chromium as root would need it, bounded and killed (its whole process group)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("no chromium: apt-get install chromium (bootstrap.sh test installs it)")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cb-chromium-") as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
               "--no-first-run", "--enable-logging=stderr", "--v=0", "--hide-scrollbars", *args]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            pytest.fail(f"chromium did not finish within {timeout} s")
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # helpers it left behind
            except ProcessLookupError:
                pass
    return out, err


def browser_check(index: Path) -> dict:
    """Load ``index`` (a copy with the checker script injected) in Chromium: the images as the
    browser saw them, errors the page raised, console lines, and the page's text."""
    check = index.with_name("check.html")
    text = index.read_text(encoding="utf-8")
    check.write_text(text.replace("<head>", "<head>" + CHECKER, 1), encoding="utf-8")
    try:
        dom, err = chromium("--virtual-time-budget=10000", "--dump-dom", check.as_uri())
    finally:
        check.unlink()

    def attr(name: str) -> list:
        m = re.search(rf'<html[^>]*\s{name}="([^"]*)"', dom)
        return json.loads(htmllib.unescape(m.group(1))) if m else None
    body = re.sub(r"<script.*?</script>|<style.*?</style>", " ", dom, flags=re.DOTALL)
    page_text = re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", " ", body)))
    console = [line for line in err.splitlines() if ":CONSOLE" in line]
    return {"images": attr("data-images"), "errors": attr("data-errors"), "console": console, "text": page_text}


@pytest.mark.integration
def test_the_browser_check_catches_a_broken_page(tmp_path):
    """The checks below would see a broken page: a missing image, a script error, console.error."""
    (tmp_path / "index.html").write_text('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
                                         '<p>hi &amp; bye</p><img src="plots/missing.png"><img src="ok.png">'
                                         '<script>console.error("boom"); nosuchfunction();</script></body></html>')
    from matplotlib.figure import Figure

    fig = Figure(figsize=(1, 1))
    fig.subplots().plot([0, 1])
    fig.savefig(tmp_path / "ok.png")
    got = browser_check(tmp_path / "index.html")
    assert [i["ok"] for i in got["images"]] == [False, True]
    assert any("missing.png" in e for e in got["errors"]) and any("boom" in e for e in got["errors"])
    assert any("nosuchfunction" in e for e in got["errors"])
    assert got["console"] and "hi & bye" in got["text"]


def _cli(db: Path, env: dict, *args: str, timeout: float = 300) -> None:
    p = subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], env=env, capture_output=True,
                       text=True, timeout=timeout, check=False)
    assert p.returncode == 0, f"clusterbench {' '.join(args)}: {p.stderr[-2000:]}"


@pytest.fixture(scope="module")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`run node --quick`, `run mpi --quick` and the shortest `tune hpl` into a fresh store (once),
    then the report of all three with a hand-made comparison."""
    if not shutil.which("mpirun"):
        pytest.skip("no mpirun: install openmpi-bin and libopenmpi-dev")
    from clusterbench.store import Store

    base = tmp_path_factory.mktemp("report")
    db = base / "results.db"
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1",
           "CLUSTERBENCH_CACHE": os.environ.get("CLUSTERBENCH_TEST_CACHE")
           or str(tmp_path_factory.getbasetemp() / "cache")}
    t0 = time.monotonic()
    _cli(db, env, "run", "node", "--quick")
    _cli(db, env, "run", "mpi", "--quick")
    _cli(db, env, "tune", "hpl", "--budget", "44s", "--n", "2000")  # the smallest budget the CLI allows there
    runs_s = time.monotonic() - t0
    st = Store(db, readonly=True)
    listed = st.list_runs()
    node = next(r["id"] for r in listed if " run node" in r["command"])
    mpi = next(r["id"] for r in listed if " run mpi" in r["command"])
    trial = next(r["id"] for r in listed if " tune hpl" in r["command"])  # one trial: its tune comes along
    t1 = time.monotonic()
    index = H.write_report(st, [node, mpi, trial], base / "out", comparison=COMPARISON)
    return {"store": st, "ids": {"node": node, "mpi": mpi, "trial": trial}, "index": index, "runs_s": runs_s,
            "report_s": time.monotonic() - t1, "all": listed}


@pytest.mark.integration
def test_report_of_real_runs_has_every_plot_they_allow(real_report):
    text = real_report["index"].read_text()
    pngs = sorted(p.name for p in (real_report["index"].parent / "plots").glob("*.png"))
    slugs = [re.sub(r"^\d+-", "", p)[:-4] for p in pngs]
    assert slugs == ["stream-threads", "memlat", "fpu", "compute-rpeak", "roofline-1", "pingpong", "multipair",
                     "hpl-nb", "hpl-grid", "comparison"], slugs
    for png in pngs:
        assert f'src="plots/{png}"' in text
        assert png_variance(real_report["index"].parent / "plots" / png) > 1e-3, png
    assert "Not drawn" not in text
    assert real_report["report_s"] < 30, real_report["report_s"]


@pytest.mark.integration
def test_report_renders_in_chromium(real_report):
    index = real_report["index"]
    got = browser_check(index)
    assert got["errors"] == [], got["errors"]
    assert got["console"] == [], got["console"]
    pngs = sorted((index.parent / "plots").glob("*.png"))
    assert len(got["images"]) == len(pngs) >= 10
    from matplotlib.image import imread

    for img in got["images"]:
        assert img["ok"], img
        h, w = imread(str(index.parent / img["src"])).shape[:2]
        assert (img["w"], img["h"]) == (w, h), img  # the browser decoded the whole PNG

    shot = index.parent.parent / "screenshot.png"
    chromium(f"--screenshot={shot}", "--window-size=1280,2400", index.as_uri())
    assert shot.stat().st_size > 10_000 and png_variance(shot) > 1e-3

    # each run's headline figures, as text
    st, ids, page_text = real_report["store"], real_report["ids"], got["text"]
    tune_ids = [r["id"] for r in real_report["all"] if " tune hpl" in r["command"]]
    node_rs, mpi_rs = st.results(ids["node"]), st.results(ids["mpi"])
    tune_rs = [r for t in tune_ids for r in st.results(t)]
    for rs in (node_rs, mpi_rs, tune_rs):
        for row in H.headline_figures(rs):
            assert row["value"] in page_text, row
    triad = max(r["value"] for r in node_rs if r["benchmark"] == "stream" and r["metric"] == "triad")
    lat = min(r["value"] for r in mpi_rs if r["benchmark"] == "pingpong" and r["metric"] == "latency")
    rmax = max(r["value"] for r in tune_rs if r["benchmark"] == "hpl" and r["metric"] == "rmax")
    for v in (triad, lat, rmax):
        assert H.format_value(v) in page_text, v
    assert f"{len(tune_ids)} trial runs" in page_text
    for word in ("kernel", "preemption", "governor", "NICs / MTU", "MPI used", "BLAS used", "Rpeak"):
        assert word in page_text


@pytest.mark.integration
def test_real_runs_take_under_90_s(real_report):
    # the budget for the three runs on 2 cores; a cold kernel cache and a shared machine add time
    assert real_report["runs_s"] < 150, real_report["runs_s"]


@pytest.mark.integration
def test_matplotlib_is_imported_only_by_the_report():
    code = ("import sys, clusterbench.cli, clusterbench.report.html, clusterbench.report.plots; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                         check=False)
    assert out.stdout.strip() == "False", out.stderr


def test_comparison_chart_from_analysis_compare():
    """The chart reads what clusterbench.analysis.compare really produces."""
    compare = pytest.importorskip("clusterbench.analysis.compare")

    def side(rid: str, scale: float) -> tuple[dict, list[dict]]:
        rs = [res("stream", "triad", 100.0 * scale, "MB/s", threads=1, variant="regular")]
        rs[0]["samples"] = [100.0 * scale * (1 + i / 1000) for i in range(10)]
        return run(rid), rs
    (ra, xa), (rb, xb) = side("a" * 32, 1.0), side("b" * 32, 2.0)
    d = compare.compare([ra], {ra["id"]: xa}, [rb], {rb["id"]: xb}, {"stream": ("threads", "variant")}).as_dict()
    (spec,) = plan([], d)
    (row,) = spec.data["rows"]
    assert row["ratio"] == pytest.approx(2.0, rel=0.01) and row["lo"] <= row["ratio"] <= row["hi"]
    assert row["verdict"] in compare.VERDICTS and row["label"].startswith("stream triad")
    from clusterbench.report.plots.kinds.comparison import verdict_color as _verdict_color

    assert [_verdict_color(v) for v in (compare.BETTER, compare.WORSE, compare.SAME, compare.UNKNOWN)] == [
        "#2ca02c", "#d62728", "#7f7f7f", "#7f7f7f"]
    assert spec.data["xlabel"] == "ratio bbbbbbbb / aaaaaaaa"


# -- issue 23: what --force replaces, temporary folders, signals ----------------------------------------
def _stream_store(path: Path, runs: int = 3, tag: str = "base") -> Path:
    """A real store of ``runs`` STREAM runs (as a session stores them) tagged ``tag``."""
    from clusterbench.benchmarks.base import Result
    from clusterbench.session import new_run_record
    from clusterbench.store import Store

    st = Store(path)
    for i in range(runs):
        rec = new_run_record(["clusterbench", "run", "stream"], {"hostname": "h"}, "default")
        rec["tags"] = [tag]
        rid = st.begin_run(rec)
        for t in (1, 2):
            st.add_result(rid, Result(benchmark="stream", metric="triad", value=1000.0 * t + i, unit="MB/s",
                                      higher_is_better=True, params={"threads": t, "variant": "regular"},
                                      samples=[1000.0 * t + i - 5, 1000.0 * t + i], summary={}))
        st.finish_run(rid, "complete")
        time.sleep(0.002)
    st.close()
    return path


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


def _temp_folders(parent: Path, name: str = "rep") -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


def _start_report(db: Path, out: Path) -> subprocess.Popen:
    """A real `clusterbench report`, with Ctrl-C's default action restored (a test runner started in
    the background ignores SIGINT, and children would inherit that)."""
    return subprocess.Popen([sys.executable, "-m", "clusterbench", "--db", str(db), "report", "base", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _when_writing(p: subprocess.Popen, parent: Path, timeout: float = 60) -> list[str]:
    """Wait until the report's temporary folder exists (it draws its plots there); [] if it ended first."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and p.poll() is None:
        found = [n for n in _temp_folders(parent) if ".tmp-" in n]
        if found:
            return found
        time.sleep(0.002)
    return []


@pytest.mark.integration
def test_report_killed_leaves_a_temp_folder_the_next_report_removes(tmp_path):
    db = _stream_store(tmp_path / "r.db")
    out = tmp_path / "rep"
    for _attempt in range(5):
        p = _start_report(db, out)
        tmp = _when_writing(p, tmp_path)
        if tmp:
            break
        p.communicate(timeout=60)
        shutil.rmtree(out, ignore_errors=True)
    assert tmp, "the report never showed its temporary folder"
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL and not out.exists()
    assert [n for n in _temp_folders(tmp_path) if ".tmp-" in n] == tmp  # left behind until a next report
    r = subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), "report", "base", "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert _temp_folders(tmp_path) == [] and (out / "index.html").is_file()  # the dead writer's folder: removed
    (pid, start), = {tuple(map(int, n.split(".tmp-")[1].split("-")[:2])) for n in tmp}
    assert pid == p.pid and start > 0  # it was named by its writer: pid and start time


@pytest.mark.integration
def test_report_never_touches_a_live_writers_temp_folder(tmp_path):
    from clusterbench.store.liveness import process_start

    db = _stream_store(tmp_path / "r.db")
    out = tmp_path / "rep"
    live = subprocess.Popen(["sleep", "120"])  # stands in for a report still drawing its plots
    dead = subprocess.Popen(["true"])
    dead.wait()
    try:
        theirs = tmp_path / f".rep.tmp-{live.pid}-{process_start(live.pid)}-abc123"
        gone = tmp_path / f".rep.tmp-{dead.pid}-12345-def456"
        other = tmp_path / f".other.tmp-{dead.pid}-12345-ghi789"  # another output's: not this report's to judge
        for d in (theirs, gone, other):
            d.mkdir()
            (d / "index.html").write_text("drawing")
        r = subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), "report", "base", "-o", str(out)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert (theirs / "index.html").read_text() == "drawing" and (other / "index.html").is_file()
        assert not gone.exists() and (out / "index.html").is_file()
    finally:
        live.kill()
        live.wait()


@pytest.mark.integration
def test_ctrl_c_during_report_writes_nothing_and_says_so(tmp_path):
    db = _stream_store(tmp_path / "r.db")
    out = tmp_path / "rep"
    for _attempt in range(5):
        p = _start_report(db, out)
        if _when_writing(p, tmp_path):
            break
        p.communicate(timeout=60)
        shutil.rmtree(out, ignore_errors=True)
    else:
        pytest.fail("the report never showed its temporary folder")
    p.send_signal(signal.SIGINT)
    _out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "interrupted (Ctrl-C)" in lines[0] and "the report was not written" in lines[0], err
    assert "marked incomplete" not in err and "Traceback" not in err
    assert not out.exists() and _temp_folders(tmp_path) == []
