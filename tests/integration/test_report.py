"""`clusterbench report`: the HTML page with plots (clusterbench.report.html / .plots).

Unit tests: which plots the data allows (each only where its data exists), on hand-made
``Result`` objects; the comparison chart from a hand-made ``Comparison.as_dict()``; headline figures; the page
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
from clikit import run_or_fail

from clusterbench.report import html as H

from reportkit import COMPARISON, FakeStore, _stream_store, every_kind_sources

REPO = Path(__file__).resolve().parents[2]


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
        st.res[s.runs[0].id] = s.results
    p = H.write_report(st, [s.runs[0].id for s in srcs], tmp_path / "rep", comparison=COMPARISON)
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
    # the parts the report plots (pingpong, multipair, the collectives): bw, ring, placement and tcp add
    # no plot of their own and took half of the 111 s at a load of 7
    _cli(db, env, "run", "mpi", "--quick", "--skip", "bw,ring,placement,tcp")
    # two NBs (the NB plot's least) and both topologies (the grid plot's grids): the tune ends when they are
    # measured, well inside the budget, where the default sixteen NBs took all of it (44 s: the smallest
    # budget the CLI allows them)
    _cli(db, env, "tune", "hpl", "--budget", "44s", "--n", "2000", "--nb-list", "64,128")
    runs_s = time.monotonic() - t0
    st = Store(db, readonly=True)
    listed = st.list_runs()
    node = next(r.id for r in listed if " run node" in r.command)
    mpi = next(r.id for r in listed if " run mpi" in r.command)
    trial = next(r.id for r in listed if " tune hpl" in r.command)  # one trial: its tune comes along
    t1 = time.monotonic()
    index = H.write_report(st, [node, mpi, trial], base / "out", comparison=COMPARISON)
    return {"store": st, "ids": {"node": node, "mpi": mpi, "trial": trial}, "index": index, "runs_s": runs_s,
            "report_s": time.monotonic() - t1, "all": listed}


@pytest.mark.integration
def test_report_of_real_runs_has_every_plot_they_allow(real_report):
    text = real_report["index"].read_text()
    pngs = sorted(p.name for p in (real_report["index"].parent / "plots").glob("*.png"))
    slugs = [re.sub(r"^\d+-", "", p)[:-4] for p in pngs]
    # run mpi --quick holds the collectives too: their plots (one latency plot per op measured, busbw, the
    # model's efficiency) sit between multipair and hpl-nb in page order
    coll = [s for s in slugs if s.startswith("coll-")]
    assert [s for s in slugs if not s.startswith("coll-")] == [
        "stream-threads", "memlat", "fpu", "compute-rpeak", "roofline-1", "pingpong", "multipair",
        "hpl-nb", "hpl-grid", "comparison"], slugs
    assert slugs.index(coll[0]) == slugs.index("multipair") + 1 and slugs.index(coll[-1]) == slugs.index("hpl-nb") - 1
    assert "coll-latency-allreduce" in coll and "coll-busbw" in coll, slugs
    for png in pngs:
        assert f'src="plots/{png}"' in text
        assert png_variance(real_report["index"].parent / "plots" / png) > 1e-3, png
    assert "Not drawn" not in text


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
    tune_ids = [r.id for r in real_report["all"] if " tune hpl" in r.command]
    node_rs, mpi_rs = st.results(ids["node"]), st.results(ids["mpi"])
    tune_rs = [r for t in tune_ids for r in st.results(t)]
    for rs in (node_rs, mpi_rs, tune_rs):
        for row in H.headline_figures(rs):
            assert row["value"] in page_text, row
    triad = max(r.value for r in node_rs if r.benchmark == "stream" and r.metric == "triad")
    lat = min(r.value for r in mpi_rs if r.benchmark == "pingpong" and r.metric == "latency")
    rmax = max(r.value for r in tune_rs if r.benchmark == "hpl" and r.metric == "rmax")
    for v in (triad, lat, rmax):
        assert H.format_value(v) in page_text, v
    assert f"{len(tune_ids)} trial runs" in page_text
    for word in ("kernel", "preemption", "governor", "NICs / MTU", "MPI used", "BLAS used", "Rpeak"):
        assert word in page_text


@pytest.mark.integration
def test_matplotlib_is_imported_only_by_the_report():
    code = ("import sys, clusterbench.cli, clusterbench.report.html, clusterbench.report.plots; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                         check=False)
    assert out.stdout.strip() == "False", out.stderr


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


@pytest.mark.integration
def test_report_force_over_a_fifo_manifest_or_page_is_refused_not_a_hang(tmp_path):
    """``report -o DIR --force`` opened the earlier report's manifest (and, without one, its index.html)
    with a plain open(): a FIFO there hung the command. Now one line naming the file, at once."""
    db = _stream_store(tmp_path / "r.db")
    out = tmp_path / "rep"
    cmd = [sys.executable, "-m", "clusterbench", "--db", str(db), "report", "last", "-o", str(out), "--force"]
    assert subprocess.run(cmd, capture_output=True, timeout=300).returncode == 0
    (out / H.MANIFEST).unlink()
    os.mkfifo(out / H.MANIFEST)
    for name in (H.MANIFEST, "index.html"):
        if name == "index.html":  # a report older than manifests, whose page is a FIFO
            (out / H.MANIFEST).unlink()
            (out / "index.html").unlink()
            os.mkfifo(out / "index.html")
        proc = run_or_fail(cmd, 120, f"report --force hung on a FIFO {name}")
        err = proc.stderr
        assert proc.returncode == 2, err
        assert f"{out / name} is a FIFO (pipe), not a regular file" in err and err.count("\n") == 1, err
