"""Unit tests of the probe: robustness, Rpeak table, placement helpers, live machine."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterbench.probe import probe
from clusterbench.probe import hwloc as hw
from clusterbench.probe.rpeak import dp_rate

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass


@pytest.mark.integration
def test_empty_root_with_hwloc_does_not_crash(tmp_path):
    """An empty snapshot: nothing is invented (no cores, no Rpeak), and every gap says why."""
    p = probe(sysfs_root=str(tmp_path), use_hwloc=True)
    json.dumps(p)
    assert p["source"] == "sysfs"  # a snapshot root is read from its files, never by hwloc on this machine
    assert p["topology"]["cores"] == 0 and p["topology"]["pus"] == 0
    assert p["rpeak"]["node"]["dp_gflops_nominal"] is None
    assert "cpu.microarchitecture" in p["unknown"] and p["unknown"]["cpu.microarchitecture"]


@pytest.mark.integration
def test_live_probe_json_and_paths_agree():
    a = probe(use_hwloc=False)
    json.dumps(a)
    assert a["topology"]["pus"] >= 1 and a["hostname"]
    assert a["environment"]["kernel"]
    if hw.available():
        b = probe(use_hwloc=True)
        assert b["source"] == "hwloc"
        for key in ("packages", "numa_nodes", "cores", "pus", "cpus", "caches"):
            assert a["topology"][key] == b["topology"][key], key


@pytest.mark.integration
def test_live_rpeak_follows_this_cpus_own_table_entry():
    """On whatever CPU runs the tests (it once checked one KVM guest's model only, and skipped on every
    other machine): the live probe's FLOPs/cycle is the rate table's for this CPU's microarchitecture
    and flags, Rpeak per core is that rate times the nominal clock, and the clock says where it came from."""
    p = probe()
    cpu, rp = p["cpu"], p["rpeak"]
    uarch = cpu["microarchitecture"]
    info = Path("/proc/cpuinfo").read_text()
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith(("flags", "Features"))), [])
    rate, _, _ = dp_rate(uarch, set(flags), cpu.get("model_name"))
    if uarch is None or rate is None:
        assert not rp["dp_flops_per_cycle_per_core"], rp  # no rate is invented for an unknown CPU
        return
    assert rp["dp_flops_per_cycle_per_core"][uarch] == rate
    assert cpu["freq_nominal_mhz"] and cpu["freq_source"]
    assert rp["per_core"]["dp_gflops_nominal"] == pytest.approx(rate * rp["clock_nominal_mhz"] / 1e3, rel=1e-3)


