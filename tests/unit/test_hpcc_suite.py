"""`run hpcc`: hpcc's summary keys on clusterbench's figures (unit tier: declarations, the emit hook,
a real hpcc output read back into clusterbench's units)."""
from dataclasses import replace
from pathlib import Path

import pytest

from clusterbench.benchmarks import all_benchmarks, get_benchmark
from clusterbench.benchmarks.base import HpccKey, RunContext
from clusterbench.benchmarks.hpcc.suite import from_hpcc_summary
from clusterbench.benchmarks.hpl.engines import parse_hpcc_output
from clusterbench.records import Run

DATA = Path(__file__).resolve().parents[1] / "data" / "hpcc"


def test_emit_puts_hpccs_key_and_value_in_hpccs_unit_on_the_figure() -> None:
    ctx = RunContext(probe={})
    stream = get_benchmark("stream")
    one = ctx.emit(stream, "triad", [30000.0, 31000.0], {"threads": 1})
    star = ctx.emit(stream, "triad", [60000.0, 62000.0], {"threads": 2})
    assert one.params["hpcc_key"] == "SingleSTREAM_Triad" and one.params["hpcc_value"] == pytest.approx(31.0)
    # hpcc's Star figures are per process: 62,000 MB/s over 2 threads is 31 GB/s each
    assert star.params["hpcc_key"] == "StarSTREAM_Triad" and star.params["hpcc_value"] == pytest.approx(31.0)
    pp = get_benchmark("pingpong")
    lat = ctx.emit(pp, "latency", [0.4], {"size_bytes": 8})
    mid = ctx.emit(pp, "latency", [0.9], {"size_bytes": 1024})
    assert lat.params["hpcc_key"] == "MinPingPongLatency_usec" and "hpcc_key" not in mid.params


def test_hpcc_keys_are_declared_once_and_name_real_metrics() -> None:
    seen: dict[str, str] = {}
    for name, cls in all_benchmarks().items():
        metrics = {m.name for m in cls.metrics}
        for hk in cls.hpcc_keys:
            assert isinstance(hk, HpccKey) and hk.metric in metrics, (name, hk.key)
            assert hk.key not in seen, f"{hk.key} declared by {seen.get(hk.key)} and {name}"
            seen[hk.key] = name
    for key in ("HPL_Tflops", "SingleDGEMM_Gflops", "StarDGEMM_Gflops", "StarSTREAM_Triad", "SingleSTREAM_Triad",
                "MinPingPongLatency_usec", "MaxPingPongBandwidth_GBytes", "RandomlyOrderedRingBandwidth_GBytes"):
        assert key in seen, key


def test_the_suite_runs_hpl_dgemm_stream_and_the_mpi_figures() -> None:
    members = get_benchmark("hpcc").members()
    assert members[:3] == ("hpl", "dgemm", "stream")
    assert {"pingpong", "ring"} <= set(members)


def test_a_real_hpcc_summary_reads_back_in_clusterbench_units() -> None:
    summary = parse_hpcc_output((DATA / "hpccoutf-1x2-n1000-nb64.txt").read_text())["summary"]
    got = {hk.key: (bench, hk.metric, params, value) for bench, hk, params, value in from_hpcc_summary(summary, 2)}
    bench, metric, _, value = got["HPL_Tflops"]
    assert (bench, metric) == ("hpl", "rmax") and value == pytest.approx(13.2256)  # Gflop/s
    bench, metric, params, value = got["StarSTREAM_Triad"]
    assert (bench, metric, params["threads"]) == ("stream", "triad", 2)
    assert value == pytest.approx(24.1067 * 1000 * 2)  # MB/s over both processes
    assert got["SingleDGEMM_Gflops"][3] == pytest.approx(9.2979)
    assert got["StarDGEMM_Gflops"][1] == "gflops_per_core"
    assert got["MaxPingPongBandwidth_GBytes"][3] == pytest.approx(7847.66)  # MB/s
    assert got["RandomlyOrderedRingLatency_usec"][3] == pytest.approx(0.354308)
    # what a run of the suite with --engine hpcc stores: each value carries the same key back
    ctx = RunContext(probe={})
    for key, (bench, metric, params, value) in got.items():
        r = ctx.emit(get_benchmark(bench), metric, [value], params, check_cv=False)
        assert r.params["hpcc_key"] == key
        assert r.params["hpcc_value"] == pytest.approx(summary[key], rel=1e-9)


def test_hpccoutf_export_reads_back_with_hpccs_own_parser() -> None:
    """The export is parsed by the same reader as a real hpccoutf.txt, key by key, best figure per key."""
    from clusterbench.export.hpccoutf import hpccoutf

    ctx = RunContext(probe={})
    rs = [ctx.emit(get_benchmark("hpl"), "rmax", [80.0, 82.5], {"n": 9600, "nb": 192, "grid": "1x2"}),
          ctx.emit(get_benchmark("stream"), "triad", [40000.0], {"threads": 2, "variant": "regular"}),
          ctx.emit(get_benchmark("stream"), "triad", [42000.0], {"threads": 2, "variant": "nt"}),
          ctx.emit(get_benchmark("pingpong"), "latency", [0.2, 0.17], {"size_bytes": 8}),
          ctx.emit(get_benchmark("pingpong"), "latency", [0.5], {"size_bytes": 1024})]
    run = Run(id="abc", status="complete", host="h", clusterbench_version="0.3")
    text = hpccoutf(run, rs)
    summary = parse_hpcc_output(text)["summary"]
    assert summary["HPL_Tflops"] == pytest.approx(0.0825) and summary["HPL_N"] == 9600
    assert (summary["HPL_nprow"], summary["HPL_npcol"]) == (1, 2)
    assert summary["StarSTREAM_Triad"] == pytest.approx(21.0)  # the better of the two, per process
    assert summary["MinPingPongLatency_usec"] == pytest.approx(0.17)
    assert summary["Success"] == 1
    assert "Success=0" in hpccoutf(replace(run, status="incomplete"), rs)


def test_randomaccess_keys_read_back_and_export_with_their_sizes() -> None:
    """hpcc's six RandomAccess keys from its own output land on randomaccess's figures (Star per
    process, MPI in total), and the export writes them back with the table sizes hpcc prints."""
    from clusterbench.export.hpccoutf import summary_keys

    summary = parse_hpcc_output((DATA / "hpccoutf-1x2-n1000-nb64.txt").read_text())["summary"]
    got = {hk.key: (bench, hk.metric, params, value) for bench, hk, params, value in from_hpcc_summary(summary, 2)}
    for key, mode, variant, metric in (("SingleRandomAccess_GUPs", "single", "standard", "gups"),
                                       ("StarRandomAccess_GUPs", "star", "standard", "gups_per_process"),
                                       ("MPIRandomAccess_GUPs", "mpi", "standard", "gups"),
                                       ("StarRandomAccess_LCG_GUPs", "star", "lcg", "gups_per_process"),
                                       ("MPIRandomAccess_LCG_GUPs", "mpi", "lcg", "gups")):
        bench, m, params, value = got[key]
        assert (bench, m, params["mode"], params["variant"]) == ("randomaccess", metric, mode, variant)
        assert value == pytest.approx(summary[key])
    ctx = RunContext(probe={})
    ra = get_benchmark("randomaccess")
    rs = [ctx.emit(ra, "gups_per_process", [0.05], {"mode": "star", "variant": "standard", "table_words": 1 << 24,
                                                    "processes": 2}),
          ctx.emit(ra, "gups", [0.04], {"mode": "mpi", "variant": "lcg", "table_words": 1 << 25, "errors": 0,
                                        "updates": 4 << 25, "processes": 2})]
    keys = summary_keys(rs)
    assert keys["StarRandomAccess_GUPs"] == pytest.approx(0.05) and keys["RandomAccess_N"] == 1 << 24
    assert keys["MPIRandomAccess_LCG_GUPs"] == pytest.approx(0.04) and keys["MPIRandomAccess_LCG_N"] == 1 << 25
    assert keys["MPIRandomAccess_LCG_ExeUpdates"] == 4 << 25 and keys["MPIRandomAccess_LCG_Errors"] == 0


def test_ptrans_and_fft_keys_read_back_and_export_with_their_sizes() -> None:
    from clusterbench.export.hpccoutf import summary_keys

    summary = parse_hpcc_output((DATA / "hpccoutf-1x2-n1000-nb64.txt").read_text())["summary"]
    got = {hk.key: (bench, hk.metric, params, value) for bench, hk, params, value in from_hpcc_summary(summary, 2)}
    assert got["PTRANS_GBs"][:2] == ("ptrans", "gbs") and got["PTRANS_GBs"][3] == pytest.approx(2.57792)
    for key, mode, metric in (("SingleFFT_Gflops", "single", "gflops"), ("StarFFT_Gflops", "star", "gflops_per_process"),
                              ("MPIFFT_Gflops", "mpi", "gflops")):
        bench, m, params, value = got[key]
        assert (bench, m, params["mode"]) == ("fft", metric, mode) and value == pytest.approx(summary[key])
    ctx = RunContext(probe={})
    rs = [ctx.emit(get_benchmark("fft"), "gflops", [3.0], {"mode": "mpi", "n": 65536, "processes": 2}),
          ctx.emit(get_benchmark("fft"), "gflops_per_process", [1.5], {"mode": "star", "n": 32768, "processes": 2}),
          ctx.emit(get_benchmark("ptrans"), "gbs", [2.5], {"n": 500, "nb": 64, "grid": [1, 2], "residual_max_abs": 0.0,
                                                         "time_s_best": 0.0008})]
    keys = summary_keys(rs)
    assert keys["MPIFFT_Gflops"] == pytest.approx(3.0) and keys["MPIFFT_N"] == 65536
    assert keys["StarFFT_Gflops"] == pytest.approx(1.5) and keys["FFT_N"] == 32768
    assert (keys["PTRANS_GBs"], keys["PTRANS_n"], keys["PTRANS_nb"]) == (pytest.approx(2.5), 500, 64)
    assert (keys["PTRANS_nprow"], keys["PTRANS_npcol"]) == (1, 2)
