"""The pure tests (they start no process) of what tests/integration/test_hpl_engines.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from clusterbench.benchmarks.hpl.engines import HplCase, find_engine, hpcc_input, parse_hpcc_output, parse_hpl_output, xhpl_input
from clusterbench.errors import EnvironmentProblem, UsageError

from hplengineskit import hpl_flops


DATA = Path(__file__).resolve().parents[1] / "data" / "hpcc"
PASS_1x2 = DATA / "hpccoutf-1x2-n1000-nb64.txt"
PASS_1x1 = DATA / "hpccoutf-1x1-n800-nb64-col.txt"
FAILED = DATA / "hpccoutf-1x2-n1000-failed-threshold.txt"


# ---------------------------------------------------------------------------------------------
# Parsers on real hpcc output
# ---------------------------------------------------------------------------------------------
def summary_lines(text: str) -> list[str]:
    block = text.split("Begin of Summary section.", 1)[1].split("End of Summary section.", 1)[0]
    return [ln for ln in block.splitlines() if "=" in ln]


def test_hpcc_parser_passing_1x2_every_summary_key() -> None:
    text = PASS_1x2.read_text()
    out = parse_hpcc_output(text)
    s = out["summary"]
    lines = summary_lines(text)
    assert len(s) == len(lines) == 148  # every key of the summary, not only HPL's
    assert set(s) == {ln.split("=", 1)[0] for ln in lines}
    assert s["Success"] == 1 and s["CommWorldProcs"] == 2 and s["VersionRelease"] == "f"
    assert (s["HPL_N"], s["HPL_NB"], s["HPL_nprow"], s["HPL_npcol"]) == (1000, 64, 1, 2)
    assert isinstance(s["HPL_Tflops"], float) and isinstance(s["StarSTREAM_Triad"], float)
    assert s["HPL_cpfact"] == "R" and s["HPL_order"] == "R"
    for key in ("StarDGEMM_Gflops", "PTRANS_GBs", "MPIRandomAccess_GUPs", "MPIFFT_Gflops",
                "MinPingPongLatency_usec", "NaturallyOrderedRingBandwidth_GBytes"):
        assert s[key] > 0, key  # -1 would mean the test did not run
    assert out["failed"] == [] and out["version"] == "1.5.0"
    [rec] = out["hpl"]  # PTRANS's "WALL ..." rows are not HPL results
    assert (rec["n"], rec["nb"], rec["p"], rec["q"], rec["pmap"]) == (1000, 64, 1, 2, "row")
    assert rec["variant"] == "WR11C2R4" and rec["version"] == "2.0"
    assert rec["algorithm"] == {"depth": 1, "bcast": "1rM", "rfact": "C", "ndiv": 2, "pfact": "R", "nbmin": 4}
    assert rec["passed"] is True and rec["checked"] and rec["threshold"] == 16.0
    assert 0 < rec["residual"] < 16
    m = re.search(r"^WR11C2R4\s+1000\s+64\s+1\s+2\s+(\S+)\s+(\S+)$", text, re.M)
    assert m and rec["time_s"] == float(m.group(1)) and rec["gflops"] == float(m.group(2))
    # HPL's convention, checked on hpcc's own full-precision figures: Gflops = (2/3 N^3 + 3/2 N^2)/t
    assert hpl_flops(1000) / s["HPL_time"] / 1e12 == pytest.approx(s["HPL_Tflops"], rel=1e-4)
    assert rec["gflops"] == pytest.approx(s["HPL_Tflops"] * 1e3, rel=2e-3)


def test_hpcc_parser_1x1_column_major() -> None:
    out = parse_hpcc_output(PASS_1x1.read_text())
    [rec] = out["hpl"]
    assert (rec["n"], rec["nb"], rec["p"], rec["q"], rec["pmap"]) == (800, 64, 1, 1, "col")
    assert rec["variant"] == "WC11C2R4" and rec["passed"] is True
    assert out["summary"]["HPL_order"] == "C" and out["summary"]["CommWorldProcs"] == 1
    assert out["failed"] == []


def test_hpcc_parser_failed_residual() -> None:
    text = FAILED.read_text()
    out = parse_hpcc_output(text)
    [rec] = out["hpl"]
    assert rec["checked"] and rec["passed"] is False and rec["residual"] == pytest.approx(0.0046928)
    assert out["summary"]["Success"] == 0 and out["failed"] == ["HPL"]


def test_hpcc_parser_cut_output_and_a_failing_test() -> None:
    text = PASS_1x2.read_text()
    cut = text.split("End of HPL section.")[0]  # as if killed before HPL ended
    out = parse_hpcc_output(cut)
    assert "HPL" in out["failed"] and out["summary"] == {}
    # RandomAccess's own failure string (hpcc 1.5.0 prints "(failed)" when errors exceed 1 %)
    bad = text.replace("Found 0 errors in 524288 locations (passed).",
                       "Found 9999 errors in 524288 locations (failed).", 1)
    assert parse_hpcc_output(bad)["failed"] == ["MPIRandomAccess"]
    no_result = text.replace("WR11C2R4        1000", "garbled line    1000")
    assert parse_hpcc_output(no_result)["hpl"] == []


# xhpl (HPL 2.3): the same printer with these lines (testing/ptest/HPL_pdtest.c, HPL 2.3)
XHPL_RESULT = "W%c%1d%c%c%1d%c%1d%12d %5d %5d %5d %18.2f    %19.4e"
XHPL_BANNER = "HPLinpack 2.3  --  High-Performance Linpack benchmark  --   December 2, 2018"


def as_xhpl(hpcc_text: str) -> str:
    """The real HPL block of an hpcc output, printed as xhpl 2.3 prints it (see the module doc)."""
    block = hpcc_text.split("Begin of HPL section.", 1)[1].split("End of HPL section.", 1)[0]
    block = re.sub(r"^HPLinpack 2\.0 .*$", XHPL_BANNER, block, flags=re.M)
    out = []
    for line in block.splitlines():
        m = re.match(r"^W([RC])(\d)(\d)([LCR])(\d)([LCR])(\d)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)$", line)
        if m:
            g = m.groups()
            out.append(XHPL_RESULT % (g[0], int(g[1]), g[2], g[3], int(g[4]), g[5], int(g[6]), int(g[7]), int(g[8]),
                                      int(g[9]), int(g[10]), float(g[11]), float(g[12])))
            out.append("HPL_pdgesv() start time Sun Nov 22 01:26:38 2026\n")
            out.append("HPL_pdgesv() end time   Sun Nov 22 01:26:38 2026\n")
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def test_xhpl_parser_on_hpl_block() -> None:
    real = parse_hpcc_output(PASS_1x2.read_text())["hpl"][0]
    text = as_xhpl(PASS_1x2.read_text())
    assert "HPL_pdgesv() start time" in text and "Begin of" not in text
    [rec] = parse_hpl_output(text)
    assert rec["version"] == "2.3"
    for key in ("variant", "n", "nb", "p", "q", "pmap", "time_s", "gflops", "residual", "passed", "threshold"):
        assert rec[key] == real[key], key


def test_xhpl_parser_several_results_and_a_cut_run() -> None:
    # xhpl runs the cross product of HPL.dat's lists: one result block after another
    passing, failing = as_xhpl(PASS_1x2.read_text()), as_xhpl(FAILED.read_text())
    recs = parse_hpl_output(passing + failing + as_xhpl(PASS_1x1.read_text()))
    assert [r["passed"] for r in recs] == [True, False, True]
    assert [(r["n"], r["p"], r["q"], r["pmap"]) for r in recs] == [(1000, 1, 2, "row"), (1000, 1, 2, "row"),
                                                                   (800, 1, 1, "col")]
    assert recs[1]["threshold"] == 0.0  # as HPL printed 1e-30 (%.1f)
    cut = passing.split("HPL_pdgesv() end time")[0]  # killed before the check
    [rec] = parse_hpl_output(cut)
    assert rec["checked"] is False and rec["passed"] is False and rec["residual"] is None


# ---------------------------------------------------------------------------------------------
# Input files
# ---------------------------------------------------------------------------------------------
def test_input_files() -> None:
    case = HplCase(n=1000, nb=64, p=1, q=2)
    dat = xhpl_input(case).splitlines()
    assert len(dat) == 31
    values = [ln.split()[0] for ln in dat[2:]]
    assert values[1] == "6"  # device: stdout, forwarded by mpirun from any node
    assert values[3:10] == ["1000", "1", "64", "0", "1", "1", "2"]
    assert float(values[10]) == 16.0 and dat[30].split()[0] == "8"
    inf = hpcc_input(HplCase(n=2000, nb=128, p=2, q=1, pmap="col"), extra={"threshold": 1e-30, "bcast": 3}).splitlines()
    assert len(inf) == 36 and inf[31].startswith("#####")
    assert inf[5].split()[0] == "2000" and inf[8].split()[0] == "1" and float(inf[12].split()[0]) == 1e-30
    assert inf[22].split()[0] == "3" and inf[32].split()[0] == "0" and inf[34].split()[0] == "0"
    assert hpcc_input(case).splitlines()[:31] == xhpl_input(case).replace("\n6   ", "\n8   ", 1).splitlines()
    # the stored hpccinf.txt files are what hpcc_input makes (and hpcc ran them)
    assert (DATA / "hpccinf-1x2-n1000-nb64.txt").read_text() == hpcc_input(case)
    assert (DATA / "hpccinf-1x2-n1000-failed-threshold.txt").read_text() == hpcc_input(case, extra={"threshold": 1e-30})


@pytest.mark.parametrize("bad", [dict(n=0, nb=1, p=1, q=1), dict(n=10, nb=64, p=1, q=1),
                                 dict(n=100, nb=8, p=0, q=1), dict(n=100, nb=8, p=1, q=1, pmap="diag")])
def test_bad_case(bad: dict) -> None:
    with pytest.raises(UsageError):
        xhpl_input(HplCase(**bad))


def test_bad_extra() -> None:
    case = HplCase(100, 8, 1, 1)
    with pytest.raises(UsageError, match="unknown HPL parameter"):
        hpcc_input(case, extra={"nbs": 3})
    with pytest.raises(UsageError, match="out of range"):
        xhpl_input(case, extra={"bcast": 6})
    with pytest.raises(UsageError, match="unknown HPL parameter"):
        xhpl_input(case, extra={"ptrans_ns": [100]})  # hpcc only
    assert "\n0            PFACTs" in xhpl_input(case, extra={"pfact": "left"})


# ---------------------------------------------------------------------------------------------
# Finding the engines
# ---------------------------------------------------------------------------------------------
def test_missing_engines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EnvironmentProblem) as e:
        find_engine("xhpl", str(tmp_path / "nowhere" / "xhpl"))
    assert "--engine-path PATH" in (e.value.fix or "") and "not found" in e.value.problem
    with pytest.raises(EnvironmentProblem):
        find_engine("xhpl", str(tmp_path))  # a directory without xhpl
    plain = tmp_path / "xhpl"
    plain.write_text("#!/bin/sh\n")
    with pytest.raises(EnvironmentProblem, match="not executable"):
        find_engine("xhpl", str(plain))
    plain.chmod(0o755)
    with pytest.raises(EnvironmentProblem, match="not a compiled program"):
        find_engine("xhpl", str(tmp_path))  # a wrapper script is not the engine
    true = shutil.which("true")
    assert true
    with pytest.raises(EnvironmentProblem, match=r"is not xhpl \(it never mentions HPL.dat"):
        find_engine("xhpl", true)
    real = shutil.which("hpcc")
    if real:  # the real engine, found through its directory
        copy = tmp_path / "hpcc"
        shutil.copy(real, copy)
        assert find_engine("hpcc", str(tmp_path)) == str(copy)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(EnvironmentProblem) as e:
        find_engine("hpcc")
    assert e.value.fix == "apt-get install hpcc"
    with pytest.raises(EnvironmentProblem):
        find_engine("xhpl")
    with pytest.raises(UsageError):
        find_engine("linpack")
