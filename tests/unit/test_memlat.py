"""The pure tests (they start no process) of what tests/integration/test_memlat.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import math
import random

import pytest

from clusterbench.analysis.plateaus import find_plateaus
from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext, available_memory
from clusterbench.benchmarks.node.memlat import llc_of_cpu, probe_cache_levels, size_list
from clusterbench.errors import UsageError

from memlatkit import KIB, MIB


PROBE = {1: 48 * KIB, 2: 2 * MIB, 3: 32 * MIB}


def synthetic(levels, lats, lo=KIB, hi=512 * MIB, per_octave=4, noise=0.0, seed=1):
    """Latency curve with smooth (one-octave) transitions between plateaus."""
    rnd = random.Random(seed)
    sizes = size_list(lo, hi, per_octave, 64)
    out = []
    for s in sizes:
        lat = lats[0]
        for cap, a, b in zip(levels, lats, lats[1:]):
            # fraction of misses grows from 0 at cap*0.9 to 1 at 2*cap
            f = min(1.0, max(0.0, (math.log2(s) - math.log2(cap * 0.9)) / 1.1))
            if f > 0:
                lat = a + (b - a) * f if lat <= a else lat + (b - a) * f
        out.append(lat * (1 + rnd.uniform(-noise, noise)))
    return sizes, out


def test_four_plateaus_found_and_named():
    sizes, lat = synthetic([48 * KIB, 2 * MIB, 32 * MIB], [1.6, 5.0, 30.0, 110.0], noise=0.03)
    plats = find_plateaus(sizes, lat, expected=4, probe_sizes=PROBE)
    assert [p.label for p in plats] == ["L1", "L2", "L3", "DRAM"]
    for p, want in zip(plats, [1.6, 5.0, 30.0, 110.0]):
        assert abs(p.latency / want - 1) < 0.06
    for p in plats[:3]:
        assert 0.5 <= p.implied_size_bytes / p.probe_size_bytes <= 2
    # the same without any hint: detection comes from the data
    assert [p.label for p in find_plateaus(sizes, lat)] == ["L1", "L2", "L3", "DRAM"]


def test_outlier_and_transition_points_are_not_plateaus():
    sizes, lat = synthetic([48 * KIB, 2 * MIB, 32 * MIB], [1.6, 5.0, 30.0, 110.0], noise=0.02, seed=3)
    lat[20] *= 5  # a preempted sample in the L2 region
    plats = find_plateaus(sizes, lat, expected=4, probe_sizes=PROBE)
    assert len(plats) == 4
    assert sizes[20] not in plats[1].sizes
    assert abs(plats[1].latency / 5.0 - 1) < 0.06


def test_truncated_curve_labels_by_size():
    # the curve stops inside L3: three plateaus, the last one is L3 not DRAM
    sizes, lat = synthetic([48 * KIB, 2 * MIB, 32 * MIB], [1.6, 5.0, 30.0, 110.0], hi=16 * MIB)
    plats = find_plateaus(sizes, lat, expected=4, probe_sizes=PROBE)
    assert [p.label for p in plats] == ["L1", "L2", "L3"]
    # a missing L2 (L1 straight to L3) keeps the L3 name
    sizes, lat = synthetic([48 * KIB, 32 * MIB], [1.6, 30.0, 110.0])
    plats = find_plateaus(sizes, lat, expected=4, probe_sizes=PROBE)
    assert [p.label for p in plats] == ["L1", "L3", "DRAM"]


def test_flat_and_tiny_curves():
    sizes = size_list(KIB, 64 * KIB, 4, 64)
    plats = find_plateaus(sizes, [2.0] * len(sizes))
    assert len(plats) == 1 and plats[0].label == "L1" and plats[0].latency == 2.0
    assert find_plateaus([1024], [1.0]) == []


def test_memlat_bad_input(ctx):
    bench = get_benchmark("memlat")
    for bad in ({"cpu": 10_000}, {"cpu": -1}, {"max_bytes": 1 << 50}, {"min_bytes": 64},
                {"min_bytes": 8 * MIB, "max_bytes": MIB}, {"hugepages": "maybe"},
                {"samples": 0}, {"threads": 2}):
        with pytest.raises(UsageError):
            bench.resolve(ctx, bad)


def test_quick_reaches_256_mib_where_memory_allows(ctx):
    bench = get_benchmark("memlat")
    params = bench.resolve(ctx, {})
    avail = available_memory(ctx.probe)
    if avail and avail // 4 < 256 * MIB:
        pytest.skip("not enough free memory for 256 MiB")
    assert params["max_bytes"] >= 256 * MIB
    sizes = bench.sizes(params)
    assert sizes[0] == KIB and sizes[-1] >= 256 * MIB
    assert len(sizes) >= 2 * 18  # two per octave over 18 octaves
    # default profile: at least 4 x the LLC of the pinned cpu (memory permitting)
    full = get_benchmark("memlat").resolve(RunContext(probe=ctx.probe, profile="default"), {})
    llc = llc_of_cpu(ctx.probe, full["cpu"])
    if llc and (not avail or 4 * llc <= avail // 4):
        assert full["max_bytes"] >= max(4 * llc, 256 * MIB)


def test_llc_is_the_instance_holding_the_pinned_cpu():
    """Two 32 MiB L3 instances (64 MiB in total): a cpu's working sets must exceed *its* L3."""
    probe = {"topology": {"cpus": [{"pu": p, "core": p, "package": 0, "numa": 0, "kind": None} for p in range(4)],
                          "caches": [
                              {"level": 1, "type": "data", "name": "L1d", "size_bytes": 48 * KIB, "cpus": [p]}
                              for p in range(4)] + [
                              {"level": 3, "type": "unified", "name": "L3", "size_bytes": 32 * MIB, "cpus": [0, 1]},
                              {"level": 3, "type": "unified", "name": "L3", "size_bytes": 16 * MIB, "cpus": [2, 3]}]}}
    assert llc_of_cpu(probe, 0) == 32 * MIB and llc_of_cpu(probe, 3) == 16 * MIB
    assert probe_cache_levels(probe, 2) == {1: 48 * KIB, 3: 16 * MIB}


def test_plateau_samples_are_the_representative_sizes_repeats(ctx):
    """A plateau's samples are the repeated chases of its median-size point (repeatability);
    flatness across the plateau goes in params; the no-hugepages note goes only with the
    huge-page variant."""
    from clusterbench.analysis.warnings import Warning_

    bench = get_benchmark("memlat")
    sizes, lat = synthetic([48 * KIB, 2 * MIB, 32 * MIB], [1.6, 5.0, 30.0, 110.0], noise=0.03)
    curve = [(s, v, [v, v * 1.01, v * 1.02]) for s, v in zip(sizes, lat)]
    base = {"threads": 1, "cpus": [0], "hugepages": "off"}
    note = Warning_("no-hugepages", "transparent huge pages are disabled", "enable them")
    res = bench.emit_plateaus(ctx, curve, PROBE, base, [])
    assert [r.metric for r in res] == ["l1_latency", "l2_latency", "l3_latency", "dram_latency"]
    for r in res:
        rep = r.params["size_bytes"]
        assert rep == sorted(r.params["plateau_sizes_bytes"])[len(r.params["plateau_sizes_bytes"]) // 2]
        v = dict((s, x) for s, x, _ in curve)[rep]
        assert r.samples == pytest.approx([v, v * 1.01, v * 1.02])
        assert r.value == pytest.approx(v)
        assert r.summary["cv"] < 0.02  # repeatability, not the spread along the plateau
        assert r.params["flatness"] == pytest.approx(max(r.params["plateau_latencies_ns"])
                                                     / min(r.params["plateau_latencies_ns"]))
        assert 1 <= r.params["flatness"] < 1.5
        assert not any(w["code"] == "no-hugepages" for w in r.warnings)
    on = bench.emit_plateaus(ctx, curve, PROBE, {**base, "hugepages": "on"}, [note])
    assert all(any(w["code"] == "no-hugepages" for w in r.warnings) for r in on)
