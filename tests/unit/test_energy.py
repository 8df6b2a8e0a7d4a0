"""The pure tests (they start no process) of what tests/integration/test_energy.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from clusterbench.energy import figures as E
from clusterbench.energy import rapl
from clusterbench.energy.build import build_meter, this_host
from clusterbench.energy.command import parse_reading
from clusterbench.energy.csvlog import read_csv_log
from clusterbench.energy.ipmi import parse_ipmi
from clusterbench.energy.meter import Meter
from clusterbench.energy.phase import Phase
from clusterbench.energy.rapl import rapl_domains
from clusterbench.energy.source import Sample, SampleFailed
from clusterbench.energy.spec import check_specs, parse_spec
from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.errors import UsageError
from clusterbench.probe.sysfs import FsRoot

from energykit import _step_log, _write_step_csv


def test_a_step_in_power_integrates_within_one_percent():
    t0 = 1_795_000_000.0
    times, watts = _step_log(t0 + 5.0, t0 - 2, t0 + 12)
    got = E.integrate_power(times, watts, t0, t0 + 10)  # 5 s at 10 W + 5 s at 30 W
    assert got == pytest.approx(200.0, rel=0.01)
    # interval ends between samples: interpolated, not rounded to a sample
    got = E.integrate_power(times, watts, t0 + 0.05, t0 + 9.95)
    assert got == pytest.approx(4.95 * 10 + 4.95 * 30, rel=0.01)
    assert E.average_power(200.0, t0, t0 + 10) == 20.0


def test_trapezoid_is_exact_on_a_ramp_and_interpolates_the_ends():
    # 0 W at t=0 rising 1 W/s: energy over [2.5, 7.5] = (7.5^2 - 2.5^2) / 2 = 25
    assert E.integrate_power([0, 4, 10], [0, 4, 10], 2.5, 7.5) == pytest.approx(25.0)
    assert E.integrate_power([10, 0], [5, 5], 1, 9) == pytest.approx(40.0)  # any order


@pytest.mark.parametrize("times,t0,t1,needle", [
    ([5, 6, 7], 4.0, 6.5, "first power sample is 1 s after the start"),
    ([5, 6, 7], 5.0, 8.0, "last power sample is 1 s before the end"),
    ([], 1.0, 2.0, "no power sample"),
    ([1, 2], 2.0, 2.0, "empty"),
])
def test_samples_that_do_not_cover_the_interval_are_refused(times, t0, t1, needle):
    with pytest.raises(E.NotCovered, match=needle):
        E.integrate_power(times, [1.0] * len(times), t0, t1)


def test_a_negative_or_nan_power_is_refused():
    with pytest.raises(E.NotCovered, match="negative"):
        E.integrate_power([0, 1], [5, -1], 0, 1)
    with pytest.raises(E.NotCovered, match="finite"):
        E.integrate_power([0, 1], [5, float("nan")], 0, 1)


def test_counter_differences_are_wrap_aware():
    wrap = 1000.0  # J
    # 50 W sampled each second from 800 J: wraps between t=4 (1000 -> would be) and t=5
    times = list(range(11))
    values = [(800 + 50 * t) % wrap for t in times]
    assert values[4] == 0.0 and values[3] == 950.0
    assert E.counter_energy(times, values, 0.5, 9.5, wrap) == pytest.approx(450.0)
    with pytest.raises(E.NotCovered, match="went backwards"):
        E.counter_energy(times, values, 0.5, 9.5, None)
    assert E.unwrap([990.0, 10.0, 30.0], 1000.0) == [0.0, 20.0, 40.0]


def test_cluster_total_needs_every_node():
    assert E.cluster_total({"a": {"joules": 1.0}, "b": {"joules": 2.5}}) == (3.5, None)
    assert E.cluster_total({"a": {"joules": 1.0}, "b": {"missing": "the log ends early"}}) == (None, "b: the log ends early")
    assert E.per_watt(100.0, 50.0) == 2.0
    with pytest.raises(ValueError):
        E.per_watt(100.0, 0.0)
    assert "Level 1" in E.LEVEL and "switch" in E.LEVEL and "wall" in E.LEVEL


# -- energy/spec.py, build.py: specs -----------------------------------------------------------
@pytest.mark.parametrize("text,kind,node,arg", [
    ("rapl", "rapl", None, ""),
    ("n1=ipmi", "ipmi", "n1", ""),
    ("cmd:echo a=b", "cmd", None, "echo a=b"),
    ("n2=cmd:meter --x=1", "cmd", "n2", "meter --x=1"),
    ("n1=csv:n1.csv", "csv", "n1", "n1.csv"),
    ("watts:7.5", "watts", None, "7.5"),
    ("cluster=watts:30", "watts", "cluster", "30"),
])
def test_specs(text, kind, node, arg):
    s = parse_spec(text)
    assert (s.kind, s.node, s.arg) == (kind, node, arg)


@pytest.mark.parametrize("text,needle", [
    ("foo", "unknown power source 'foo'"),
    ("n1=joules:5", "unknown power source 'joules'"),
    ("watts:0", "'0' W is not a power a running node draws"),
    ("watts:-1", "'-1' W is not a power"),
    ("watts:1e-300", "give 0.1 to 20000 W per node"),
    ("watts:25000", "'25000' W is not a power"),
    ("watts:abc", "not a number of watts"),
    ("watts:inf", "is not a power"),
    ("cmd:", "needs a command"),
    ("csv: ", "needs a file"),
    ("rapl:0", "takes no argument"),
    ("=rapl", "names no node"),
    ("", "empty"),
])
def test_bad_specs_are_one_line_usage_errors(text, needle):
    with pytest.raises(UsageError, match=needle) as exc:
        parse_spec(text)
    assert "\n" not in str(exc.value)


def test_options_checked_alone():
    check_specs(["rapl"], None, 0.5)
    for args, needle in ((([], -1.0, None), "not a power"), (([], 0.0, None), "not a power"),
                         ((["rapl"], None, 0.0), "power-interval 0.0"), (([], None, 1.0), "without a power source")):
        with pytest.raises(UsageError, match=needle):
            check_specs(*args)


def test_meter_per_node_rules(tmp_path):
    me = this_host()
    m = build_meter(["watts:5"], nodes=["n1", "n2"])  # a bare watts applies to every node
    assert [(s.label, s.covers) for s in m.sources] == [("n1", ["n1"]), ("n2", ["n2"])]
    m = build_meter(["n2=watts:9"], watts=5, nodes=["n1", "n2"])
    assert {s.label: s.watts for s in m.sources} == {"n2": 9.0, "n1": 5.0}
    m = build_meter(["localhost=watts:3"])  # a run on this node: its name, localhost or local
    assert [s.label for s in m.sources] == [me]
    m = build_meter(["cluster=watts:30"], nodes=["n1", "n2"])
    assert [(s.label, s.covers) for s in m.sources] == [("cluster", ["n1", "n2"])]
    # the virtual cluster: one rapl for all of its nodes (they share this machine)
    m = build_meter(["rapl"], nodes=["v1", "v2"], local=["v1", "v2"], virtual=True)
    assert [(s.label, s.covers, s.interval) for s in m.sources] == [(me, ["v1", "v2"], 0.1)]
    m = build_meter(["cmd:echo 1"], nodes=["n1"], interval=0.25)
    assert m.sources[0].interval == 0.25 and m.sources[0].command == "echo 1"
    assert build_meter(["cmd:meter {node}"], nodes=["n'1"]).sources[0].command == "meter 'n'\"'\"'1'"
    bad = [
        (dict(specs=["n3=watts:5"], nodes=["n1", "n2"]), "n3 is not a node of this run"),
        (dict(specs=["n1=watts:5"], nodes=["n1", "n2"]), "no power source for n2"),
        (dict(specs=["n1=watts:5", "n1=watts:6"], nodes=["n1"]), "two power sources for n1"),
        (dict(specs=["watts:5", "cmd:x"], nodes=["n1"]), "two power sources for every node"),
        (dict(specs=["rapl"], nodes=["n1", "n2"]), "rapl reads only the machine clusterbench runs on"),
        (dict(specs=["n2=ipmi", "n1=watts:1"], nodes=["n1", "n2"]), "ipmi reads only the machine"),
        (dict(specs=["cluster=watts:5", "n1=watts:1"], nodes=["n1"]), "count twice"),
        (dict(specs=["v1=rapl", "v2=watts:1"], nodes=["v1", "v2"], local=["v1", "v2"], virtual=True),
         "share this machine"),
    ]
    for kw, needle in bad:
        specs = kw.pop("specs")
        with pytest.raises(UsageError, match=needle) as exc:
            build_meter(specs, **kw)
        assert "\n" not in str(exc.value)


# -- energy/rapl.py: RAPL on a powercap snapshot -----------------------------------------------
def _zone(root: Path, name: str, domain: str, energy_uj: int, max_uj: int) -> Path:
    d = root / "sys/class/powercap" / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "name").write_text(domain + "\n")
    (d / "energy_uj").write_text(f"{energy_uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    (d / "enabled").write_text("1\n")
    return d


def test_rapl_counter_wrap_on_a_powercap_snapshot(tmp_path):
    """package-0 at 50 W wraps mid-interval (range 1000 J), dram at 5 W (range 262143 J); core, uncore,
    psys and the mmio copy of the package are not added."""
    pkg_range, dram_range = 1_000_000_000, 262_143_328_850
    pkg = _zone(tmp_path, "intel-rapl:0", "package-0", 800_000_000, pkg_range)
    dram = _zone(tmp_path, "intel-rapl:0:2", "dram", 5_000_000, dram_range)
    _zone(tmp_path, "intel-rapl:0:0", "core", 1, pkg_range)
    _zone(tmp_path, "intel-rapl:0:1", "uncore", 1, pkg_range)
    _zone(tmp_path, "intel-rapl:1", "psys", 1, pkg_range)
    _zone(tmp_path, "intel-rapl-mmio:0", "package-0", 1, pkg_range)
    assert [(d.zone, d.name, d.max_range_j) for d in rapl_domains(FsRoot(str(tmp_path)))] == [
        ("intel-rapl:0", "package-0", 1000.0), ("intel-rapl:0:2", "dram", dram_range / 1e6)]
    meter = build_meter(["rapl"], nodes=[], interval=1.0)
    src = meter.sources[0]
    src.root = FsRoot(str(tmp_path))
    src.check()
    base = 1_795_000_000.0
    for t in range(11):  # one reading a second, as the sampler would make them
        (pkg / "energy_uj").write_text(f"{(800_000_000 + 50_000_000 * t) % pkg_range}\n")
        (dram / "energy_uj").write_text(f"{5_000_000 + 5_000_000 * t}\n")
        s = src.read()
        s.wall, s.mono = base + t, 100.0 + t
        src.samples.append(s)
    assert src.samples[4].joules["intel-rapl:0/package-0"] == 0.0  # wrapped
    e = meter.energy(base + 0.5, base + 9.5, wait=False)
    assert "missing" not in e, e["missing"]
    assert e["joules"] == pytest.approx(9 * 55.0) and e["avg_watts"] == pytest.approx(55.0)
    assert e["per_node"][this_host()]["samples"] == 11 and not e["declared"]
    assert e["sources"][this_host()]["domains"] == ["intel-rapl:0 (package-0)", "intel-rapl:0:2 (dram)"]


def test_rapl_unreadable_or_absent_says_how_to_grant_it(tmp_path, monkeypatch):
    src = build_meter(["rapl"]).sources[0]
    src.root = FsRoot(str(tmp_path))
    with pytest.raises(UsageError, match="no RAPL package or dram zone") as exc:
        src.check()
    assert "intel_rapl_msr" in exc.value.fix
    _zone(tmp_path, "intel-rapl:0", "package-0", 1, 10)
    real_open = open

    def denied(path, *a, **k):
        if str(path).endswith("energy_uj"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **k)

    monkeypatch.setattr(rapl, "open", denied, raising=False)
    with pytest.raises(UsageError, match="readable by root only") as exc:
        src.check()
    assert "run clusterbench as root" in exc.value.fix and "udev" in exc.value.fix and "chmod o+r" in exc.value.fix


# -- energy/: readings, logs, live samples ----------------------------------------------------
@pytest.mark.parametrize("text,want", [("7.5", (7.5, "W")), ("7.5 W\n", (7.5, "W")), (" 12 watts", (12.0, "W")),
                                       ("1234 J", (1234.0, "J")), ("5e1", (50.0, "W")), ("3 joules", (3.0, "J"))])
def test_meter_readings(text, want):
    assert parse_reading(text) == want


@pytest.mark.parametrize("text", ["", "hello", "7.5 kW", "7.5\n8.0", "-3 W", "nan", "W 7"])
def test_garbage_from_a_meter_fails_the_sample(text):
    with pytest.raises(SampleFailed, match="not a"):
        parse_reading(text)


def test_ipmi_line():
    out = ("    Instantaneous power reading:                   118 Watts\n"
           "    Minimum during sampling period:                 98 Watts\n")
    assert parse_ipmi(out) == 118.0
    with pytest.raises(SampleFailed, match="no 'Instantaneous power reading"):
        parse_ipmi("Error: DCMI power reading not supported")


@pytest.mark.parametrize("iso,sep,header", [(False, ",", "timestamp,watts"), (True, ";", "time,power (W)"),
                                            (False, "\t", "Time,W")])
def test_csv_log_of_a_step_through_the_source(tmp_path, iso, sep, header):
    t0 = 1_795_000_000.0
    log = tmp_path / "n1.csv"
    _write_step_csv(log, t0 + 5, t0 - 3, t0 + 13, iso=iso, sep=sep, header=header)
    meter = build_meter([f"csv:{tmp_path}/{{node}}.csv"], nodes=["n1"])
    meter.check()
    e = meter.energy(t0, t0 + 10, wait=False)
    assert e["joules"] == pytest.approx(200.0, rel=0.01) and e["per_node"]["n1"]["samples"] == 101
    assert e["sources"]["n1"] == {"kind": "csv", "spec": f"csv:{log}", "declared": False, "rate_hz": None}
    # the log ends before the phase does: missing, with the reason
    e = meter.energy(t0 + 10, t0 + 20, wait=False)
    assert "joules" not in e and "does not cover the interval" in e["missing"] and e["missing"].startswith("n1: ")


def test_csv_problems(tmp_path):
    with pytest.raises(UsageError, match="no file"):
        build_meter([f"csv:{tmp_path}/nope.csv"]).check()
    bad = tmp_path / "bad.csv"
    bad.write_text("when,amps\n1795000000,3\n")
    with pytest.raises(UsageError, match="names no time/timestamp column"):
        build_meter([f"csv:{bad}"]).check()
    bad.write_text("time,watts\n12.5,3\n")
    with pytest.raises(UsageError, match="not unix seconds"):
        build_meter([f"csv:{bad}"]).check()
    # garbage in a row: the energy is missing with the line named (never skipped over)
    bad.write_text("time,watts\n1795000000,3\n1795000001,oops\n1795000002,3\n")
    e = build_meter([f"csv:{bad}"]).energy(1795000000.5, 1795000001.5, wait=False)
    assert "line 3: 'oops' is not a number of watts" in e["missing"]
    # a last line still being written is left out, not an error
    assert read_csv_log("time,watts\n1795000000,3\n1795000001,4") == ([1795000000.0], [3.0])


def _live(meter: Meter, label: str, readings: list) -> None:
    """Give a live source these readings (wall, watts or an error) as if sampled."""
    src = next(s for s in meter.sources if s.label == label)
    for wall, w in readings:
        src.samples.append(Sample(wall, wall - 1000.0, watts=None if isinstance(w, str) else w,
                                    error=w if isinstance(w, str) else None))


def test_a_meter_failing_inside_the_interval_voids_it():
    m = build_meter(["cmd:meter"], nodes=["n1"])
    m.sources[0].unit = "W"
    _live(m, "n1", [(10.0, 50.0), (11.0, 50.0), (12.0, "exited with status 1"), (13.0, 50.0), (14.0, 50.0)])
    assert m.energy(10.0, 11.0, wait=False)["joules"] == pytest.approx(50.0)
    e = m.energy(10.5, 13.5, wait=False)
    assert e["missing"] == "n1: the meter failed 1.5 s into the interval: exited with status 1"
    assert m.energy(13.0, 14.0, wait=False)["joules"] == pytest.approx(50.0)
    e = m.energy(13.0, 15.0, wait=False)
    assert "no good sample at or after the end" in e["missing"]


def test_a_wall_clock_step_voids_the_interval():
    m = build_meter(["cmd:meter"], nodes=["n1"])
    src = m.sources[0]
    src.samples = [Sample(10.0, 0.0, watts=5.0), Sample(11.0, 1.0, watts=5.0), Sample(14.0, 2.0, watts=5.0)]
    assert "wall clock was stepped by 2.00 s" in m.energy(10.5, 13.5, wait=False)["missing"]


def test_hpl_start_and_end_lines_give_a_phase_of_one_second_resolution():
    from clusterbench.benchmarks.hpl.engines import parse_hpl_output
    from clusterbench.benchmarks.hpl.engine_plugins import phase_from_hpl_lines

    text = """HPLinpack 2.3  --  High-Performance Linpack benchmark  --   December 2, 2018
- Computational tests pass if scaled residuals are less than                16.0
================================================================================
T/V                N    NB     P     Q               Time                 Gflops
--------------------------------------------------------------------------------
WR11C2R4        8000   192     1     2               4.40             7.7576e+01
HPL_pdgesv() start time Fri Sep  5 01:31:45 2025

HPL_pdgesv() end time   Fri Sep  5 01:31:50 2025

--------------------------------------------------------------------------------
||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=   1.14792654e-03 ...... PASSED
"""
    rec = parse_hpl_output(text)[0]
    start = time.mktime((2025, 9, 5, 1, 31, 45, 0, 0, -1))
    assert rec["start_unix"] == start and rec["end_unix"] == start + 5 and rec["passed"]
    ph = phase_from_hpl_lines(rec["start_unix"], rec["end_unix"], rec["time_s"], "xhpl")
    # start in [45, 46) and end = start + 4.40 in [50, 51): start in [45.6, 46), placed at 45.8
    assert ph.t0 == pytest.approx(start + 0.8) and ph.t1 - ph.t0 == pytest.approx(4.40)
    assert ph.resolution_s == 1.0 and "whole seconds" in ph.source and ph.missing is None
    assert "HPL 2.0, as in hpcc" in phase_from_hpl_lines(None, None, 4.4, "hpcc").missing
    assert "do not agree" in phase_from_hpl_lines(start, start + 9, 4.4, "xhpl").missing


# -- the timed phase and the per-watt figures (energy/phase.py) -------------------------------
def _ctx_with(meter: Meter) -> tuple[RunContext, list]:
    stored: list = []
    ctx = RunContext(probe={}, profile="quick", timeout=60)
    ctx.meter, ctx.sink = meter, stored.append
    return ctx, stored


def test_a_figure_with_a_phase_waits_for_its_energy_and_gets_gflops_per_watt():
    bench = get_benchmark("hpl")
    ctx, stored = _ctx_with(build_meter(["cmd:meter"], nodes=["n1"]))
    ctx.meter.sources[0].unit = "W"
    _live(ctx.meter, "n1", [(100.0, 40.0), (101.0, 40.0), (102.0, 40.0)])
    with ctx.benchmark_span("hpl"):
        ctx.emit(bench, "rmax", [80.0], {"n": 1000}, phase=Phase(100.2, 101.8))
        ctx.emit(bench, "time_s", [1.6], {"n": 1000}, phase=(100.2, 101.8))
        assert stored == []  # held until the benchmark ends
    by = {r.metric: r for r in stored}
    assert list(by) == ["rmax", "time_s", "gflops_per_watt"] and [r.metric for r in ctx.results] == list(by)
    e = by["rmax"].params["energy"]
    assert e["scope"] == "timed phase" and e["joules"] == pytest.approx(64.0) and e["avg_watts"] == pytest.approx(40.0)
    assert e["phase_s"] == pytest.approx(1.6) and "Level 1" in e["level"] and e["sources"]["n1"]["rate_hz"] == 1.0
    assert by["gflops_per_watt"].value == pytest.approx(2.0) and by["gflops_per_watt"].unit == "Gflop/s/W"
    assert "hpcc_key" not in by["gflops_per_watt"].params and by["rmax"].params["hpcc_key"] == "HPL_Tflops"
    assert ctx.energy_log[0]["benchmark"] == "hpl" and "whole benchmark" in ctx.energy_log[0]["scope"]


def test_a_missing_energy_keeps_the_figure_with_a_warning_and_no_per_watt():
    bench = get_benchmark("hpcg")
    ctx, stored = _ctx_with(build_meter(["cmd:meter"], nodes=["n1"]))
    ctx.meter.sources[0].unit = "W"
    _live(ctx.meter, "n1", [(100.0, 40.0), (101.0, "no answer within 2 s (killed)"), (102.0, 40.0)])
    with ctx.benchmark_span("hpcg"):
        ctx.emit(bench, "rating", [3.0, 3.1], {}, phase=(100.2, 101.8))
        ctx.emit(bench, "ddot_gflops", [1.0], {}, phase=Phase.unknown("the kernel reported no timed phase"))
    assert [r.metric for r in stored] == ["rating", "ddot_gflops"]
    rating = stored[0]
    assert rating.value == 3.1 and rating.params["energy"]["missing"].startswith("n1: the meter failed 0.8 s into")
    assert [w["code"] for w in rating.warnings] == ["energy-missing"]
    assert stored[1].params["energy"]["missing"] == "the kernel reported no timed phase"


def test_declared_power_is_marked_declared():
    bench = get_benchmark("hpl")
    ctx, stored = _ctx_with(build_meter([], watts=7.5, nodes=["n1", "n2"]))
    with ctx.benchmark_span("hpl"):
        ctx.emit(bench, "rmax", [30.0], {}, phase=(10.0, 12.0))
    e = stored[0].params["energy"]
    assert e["declared"] and e["basis"] == "declared (not measured)" and e["joules"] == pytest.approx(30.0)
    assert e["per_node"]["n2"] == {"joules": 15.0, "avg_watts": 7.5, "declared": True}
    pw = stored[1]
    assert pw.value == pytest.approx(2.0) and [w["code"] for w in pw.warnings] == ["energy-declared"]
    assert "declared" in pw.warnings[0]["message"] and "not measured" in pw.warnings[0]["message"]


def test_without_a_meter_nothing_changes():
    stored: list = []
    ctx = RunContext(probe={}, profile="quick", timeout=60, sink=stored.append)
    with ctx.benchmark_span("hpl"):
        ctx.emit(get_benchmark("hpl"), "rmax", [30.0], {}, phase=(10.0, 12.0))
        assert len(stored) == 1
    assert "energy" not in stored[0].params and ctx.energy_log == []
