"""clusterbench check end to end on this machine: a tiny suite (tcp over loopback, ~3 s a run)
checked against its own baseline: unchanged -> pass (exit 0); an injected slowdown (64-byte sends
instead of 128 KiB, the same figure at a fraction of the rate) -> fail (exit 6) with the figure named
in the JUnit failure; no baseline -> cannot judge (exit 7) before anything runs."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from clusterbench.cli import main
from clusterbench.store import Store

SUITE = """
name = "tiny"
version = 1
repeat = 3
[[run]]
benchmark = "tcp"
params = {{ streams = [1], seconds = 0.2, repeats = 3, latency_iterations = 0, block = {block} }}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    d = tmp_path_factory.mktemp("check")
    suite = d / "tiny.toml"
    suite.write_text(SUITE.format(block=131072))
    db = str(d / "r.db")
    # a baseline of 5 runs: one run knocked 10x low by a busy machine (seen at load 8) still leaves the
    # t-test on the runs' log medians its power against a 96% loss (3 a side gave p = 0.015 there)
    assert main(["--db", db, "check", str(suite), "--baseline", "base", "--update-baseline", "--repeat", "5"]) == 7
    return d, suite, db


def test_no_baseline_cannot_judge_and_runs_nothing(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE.format(block=131072))
    assert main(["--db", db, "check", str(suite), "--baseline", "nightly"]) == 7
    err = capsys.readouterr().err
    assert "cannot judge: no run is tagged 'nightly'" in err and "--update-baseline" in err
    assert Store(db).list_runs() == []


def test_update_baseline_tags_the_new_runs(site):
    _, _, db = site
    assert len(Store(db).select_runs("tag:base")) == 5


def test_unchanged_passes_and_writes_junit_and_perflog(site, capsys):
    d, suite, db = site
    junit, perf = d / "pass.xml", d / "perf.log"
    rc = main(["--db", db, "check", str(suite), "--baseline", "base", "--min-effect", "80%",
               "--junit", str(junit), "--perflog", str(perf)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "check tiny: pass" in out
    cases = ET.parse(junit).getroot().find("testsuite").findall("testcase")
    assert cases and all(c.find("failure") is None for c in cases)
    lines = perf.read_text().splitlines()
    assert len(lines) == len(cases) and all(line.endswith("|result=pass") for line in lines)


def test_an_injected_slowdown_fails(site, capsys):
    d, suite, db = site
    slow = d / "slow.toml"
    slow.write_text(SUITE.format(block=64))  # the same suite and figures, each send 64 bytes: far fewer Mbit/s
    junit = d / "fail.xml"
    rc = main(["--db", db, "check", str(slow), "--baseline", "base", "--min-effect", "80%", "--junit", str(junit),
               "--repeat", "4"])
    out = capsys.readouterr().out
    assert rc == 6, out
    assert "FAIL" in out and "tcp throughput" in out
    failure = ET.parse(junit).getroot().find("testsuite").find("testcase").find("failure")
    assert failure is not None and "tcp throughput" in failure.get("message") and "ratio" in failure.get("message")
    assert len(Store(db).select_runs("tag:base")) == 5  # the baseline did not move
