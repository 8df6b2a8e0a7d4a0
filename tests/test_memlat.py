"""memlat: plateau detection on synthetic curves, and the real kernel at small sizes."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from clusterbench.analysis.plateaus import find_plateaus
from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.memlat import size_list
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.kernels.build import build_kernel

KIB, MIB = 1024, 1024 * 1024
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


def _sys_l1d() -> int | None:
    for idx in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (idx / "type").read_text().strip() == "Data" and (idx / "level").read_text().strip() == "1":
                txt = (idx / "size").read_text().strip()
                mult = {"K": KIB, "M": MIB}.get(txt[-1], 1)
                return int(txt.rstrip("KM")) * mult
        except OSError:
            continue
    return None


def test_memlat_finds_l1d_size_within_factor_2(ctx):
    l1 = _sys_l1d()
    if not l1:
        pytest.skip("no L1d size in /sys")
    bench = get_benchmark("memlat")
    params = bench.resolve(ctx, {"max_bytes": max(32 * l1, 4 * MIB), "per_octave": 4, "samples": 3,
                                 "min_time": 0.001, "hugepages": "off"})
    res = bench.run(ctx, params)
    curve = [r for r in res if r.metric == "latency"]
    assert len(curve) == len(size_list(params["min_bytes"], params["max_bytes"], 4, params["line_bytes"]))
    assert all(r.params["hugepages"] == "off" and r.params["threads"] == 1 for r in curve)
    assert any(r.metric == "latency_cycles" for r in res)
    l1r = [r for r in res if r.metric == "l1_latency"]
    assert l1r, "no L1 plateau found"
    implied = l1r[0].params["implied_size_bytes"]
    assert l1 / 2 <= implied <= 2 * l1, (implied, l1)
    assert 0.3 < l1r[0].value < 10


def test_memlat_hugepages_variant(ctx):
    bench = get_benchmark("memlat")
    params = bench.resolve(ctx, {"max_bytes": 4 * MIB, "min_bytes": 1 * MIB, "per_octave": 1, "samples": 1,
                                 "min_time": 0.0005, "hugepages": "on"})
    res = bench.run(ctx, params)
    curve = [r for r in res if r.metric == "latency"]
    assert curve and all("hugepages_obtained" in r.params for r in curve)


def test_memlat_corrupted_chain_is_caught(ctx):
    b = build_kernel("memlat")
    with pytest.raises(KernelFailed):
        ctx.run_kernel(b, ["--cpu=0", "--sizes=4096,65536", "--samples=1", "--min_time=0.0005", "--corrupt=1"])


def test_memlat_bad_input(ctx):
    bench = get_benchmark("memlat")
    for bad in ({"cpu": 10_000}, {"max_bytes": 1 << 50}, {"min_bytes": 64}, {"min_bytes": 8 * MIB, "max_bytes": MIB},
                {"hugepages": "maybe"}, {"samples": 0}, {"threads": 2}):
        with pytest.raises(UsageError):
            bench.resolve(ctx, bad)
