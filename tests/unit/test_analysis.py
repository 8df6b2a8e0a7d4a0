"""Statistics, warnings and limits: pure functions, checked on known inputs."""
from __future__ import annotations

import pytest

from clusterbench.analysis import limits, stats
from clusterbench.analysis import warnings as warn
from clusterbench.benchmarks.base import Benchmark, Metric, Result, RunContext


def test_summary_direction_and_cv():
    s = stats.summarize([10.0, 12.0, 11.0], higher_is_better=True)
    assert (s["best"], s["median"], s["min"], s["max"], s["n"]) == (12.0, 11.0, 10.0, 12.0, 3)
    assert s["cv"] == pytest.approx(1.0 / 11.0)
    assert stats.summarize([10.0, 12.0], higher_is_better=False)["best"] == 10.0
    with pytest.raises(ValueError):
        stats.summarize([1.0, float("nan")], True)


def test_unstable_threshold():
    assert warn.unstable(0.05) is None
    w = warn.unstable(0.051)
    assert w and w.code == "unstable" and w.remedy


def test_coarse_timer():
    assert warn.coarse_timer([1e-6], 1e-7) is not None  # 10 ticks < 20
    assert warn.coarse_timer([3e-6], 1e-7) is None
    assert warn.coarse_timer([1e-9], None) is None  # unknown resolution: no claim


def test_clock_changed_cap_throttle_heat():
    base = {"freq_mhz": {0: 800.0}, "cap_mhz": {0: 3000.0}, "governor": "schedutil", "throttle": {0: 5},
            "temps_c": {"thermal_zone0": 50.0}}
    # an idle-to-loaded clock change under schedutil is normal: no warning
    after = {**base, "freq_mhz": {0: 3000.0}}
    assert warn.clock_changed(base, after) == []
    # under performance it is not
    perf = {**base, "governor": "performance"}
    assert [w.code for w in warn.clock_changed(perf, {**perf, "freq_mhz": {0: 3000.0}})] == ["clock-changed"]
    codes = [w.code for w in warn.clock_changed(base, {**base, "cap_mhz": {0: 2000.0}, "throttle": {0: 9},
                                                       "temps_c": {"thermal_zone0": 90.0}})]
    assert codes == ["clock-changed", "throttled", "hot"]


class _Fake(Benchmark):
    name = "fake"
    metrics = (Metric("gflops", "Gflop/s", True, "", ("rpeak", "measured_peak")),)


def _probe(per_core: float) -> dict:
    return {"topology": {"pus": 4, "cores": 4, "cpus": [{"pu": i, "core": i, "kind": 0} for i in range(4)]},
            "rpeak": {"per_core": {"dp_gflops_nominal": per_core, "dp_gflops_max": per_core * 1.5},
                      "per_kind": [{"kind": 0, "dp_gflops_nominal": per_core}]}}


def test_limits_scale_with_cores_and_use_measured_peak():
    ctx = RunContext(probe=_probe(10.0))
    peak = Result("peak", "gflops", 35.0, "Gflop/s", True, {"threads": 4}, [35.0], {})
    ctx.results.append(peak)
    res = Result("fake", "gflops", 20.0, "Gflop/s", True, {"threads": 4}, [20.0], {})
    got = {d["name"]: d for d in limits.judge(ctx, res, ("rpeak", "measured_peak", "dram_theoretical"), {"measured_peak": {("peak", "gflops")}})}
    assert got["rpeak"]["value"] == 40.0 and got["rpeak"]["fraction"] == 0.5
    assert got["measured_peak"]["value"] == 35.0
    assert "dram_theoretical" not in got  # unknown here: skipped, never guessed
    one = Result("fake", "gflops", 5.0, "Gflop/s", True, {"threads": 1}, [5.0], {})
    got1 = {d["name"]: d for d in limits.judge(ctx, one, ("rpeak", "measured_peak"), {"measured_peak": {("peak", "gflops")}})}
    assert got1["rpeak"]["value"] == 10.0 and "measured_peak" not in got1  # no 1-thread peak measured


def test_unknown_rpeak_gives_no_limit():
    ctx = RunContext(probe={"topology": {}, "rpeak": {}})
    res = Result("fake", "gflops", 5.0, "Gflop/s", True, {"threads": 1}, [5.0], {})
    assert limits.judge(ctx, res, ("rpeak",)) == []


def test_emit_attaches_summary_limit_and_warnings():
    ctx = RunContext(probe=_probe(10.0))
    r = ctx.emit(_Fake(), "gflops", [8.0, 4.0, 6.0], {"threads": 1})
    assert r.value == 8.0 and r.summary["median"] == 6.0
    assert r.limit and r.limit["name"] == "rpeak" and r.limit["fraction"] == 0.8
    assert [w["code"] for w in r.warnings] == ["unstable"]


def _r(bench: str, metric: str, value: float, params: dict, limits: list | None = None,
       higher: bool = True, warnings: list | None = None) -> Result:
    return Result(benchmark=bench, metric=metric, value=value, unit="", higher_is_better=higher, params=params,
                  samples=[value], summary={}, limits=limits or [], limit=(limits or [None])[0], warnings=warnings or [])


def test_node_summary_diagnoses():
    """The rules the node benchmarks declare (peak, dgemm, stream, memlat, the node suite's balance)."""
    from clusterbench.benchmarks import summarize_results

    mp = [{"name": "measured_peak", "description": "measured peak", "value": 100.0, "fraction": 0.2}]
    rs = [_r("peak", "gflops", 50.0, {"threads": 1}), _r("peak", "gflops", 100.0, {"threads": 2}),
          _r("dgemm", "gflops", 20.0, {"mode": "single", "blas": "openblas", "n": 1000}, mp),
          _r("stream", "triad", 20000.0, {"threads": 1, "variant": "nt"}),
          _r("stream", "triad", 22000.0, {"threads": 2, "variant": "nt"}),
          _r("memlat", "l3_latency", 40.0, {"implied_size_bytes": 8 << 20, "probe_size_bytes": 300 << 20}, higher=False)]
    s = summarize_results(rs)
    text = "\n".join(s["findings"])
    assert "DGEMM reaches only single 20%" in text
    assert "barely grows from 1 to 2 threads (1.10x)" in text
    assert "L3 behaves like 8.0 MiB" in text
    assert any("FMA peak, 2 cores: 100.0" in ln for ln in s["lines"])
    assert any("balance  4.5 flop per byte" in ln for ln in s["lines"])


def test_rpeak_on_hybrid_cpus_sums_per_core_figures():
    probe = {"topology": {"pus": 3, "cores": 3, "cpus": [{"pu": 0, "kind": 1}, {"pu": 1, "kind": 1}, {"pu": 2, "kind": 0}]},
             "rpeak": {"per_core": {"dp_gflops_nominal": 99.0},
                       "per_kind": [{"kind": 1, "cores": 2, "dp_gflops_nominal": 60.0},   # P-cores: 30 each
                                    {"kind": 0, "cores": 1, "dp_gflops_nominal": 12.0}]}}  # E-core: 12
    ctx = RunContext(probe=probe)
    res = Result("fake", "gflops", 40.0, "Gflop/s", True, {"threads": 2, "cpus": [0, 2]}, [40.0], {})
    got = limits.judge(ctx, res, ("rpeak",))
    assert got[0]["value"] == 42.0


def test_in_cache_figures_never_feed_the_memory_limit():
    """Issue 14 defect 2: a cache-resident stream figure (flagged in_cache by the benchmark, or a
    stored one carrying the small-arrays warning) must not become 'the best bandwidth measured
    here' for later runs, nor be judged against it itself."""
    providers = {"best_bandwidth": {("stream", "triad"), ("membw", "read")}}
    stored = [Result("stream", "triad", 180_000.0, "MB/s", True, {"threads": 2}, [180_000.0], {},
                     warnings=[{"code": "small-arrays"}]),
              Result("stream", "triad", 15_000.0, "MB/s", True, {"threads": 2}, [15_000.0], {})]
    ctx = RunContext(probe={}, history=lambda b, m: stored if (b, m) == ("stream", "triad") else [])
    ctx.results.append(Result("stream", "triad", 170_000.0, "MB/s", True, {"threads": 2, "in_cache": True},
                              [170_000.0], {}))
    normal = Result("stream", "triad", 12_000.0, "MB/s", True, {"threads": 2, "in_cache": False}, [12_000.0], {})
    got = {d["name"]: d for d in limits.judge(ctx, normal, ("best_bandwidth",), providers)}
    assert got["best_bandwidth"]["value"] == 15_000.0  # the stored normal run, not 180,000 or 170,000
    cached = Result("stream", "triad", 190_000.0, "MB/s", True, {"threads": 2, "in_cache": True}, [190_000.0], {})
    assert limits.judge(ctx, cached, ("best_bandwidth",), providers) == []
