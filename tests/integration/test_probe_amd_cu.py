"""AMD compute units (Bulldozer family): the probe counts cores as hwloc does, Rpeak counts FPUs.

No snapshot of such a machine is in the fixtures folder (hwloc's own test snapshot of one,
``64amd64-4s2n4ca2co``, is a binary tarball not copied here), so the sysfs tree is built from the
documented layout of that machine (4 x Opteron 6276: per package two dies of four two-core modules;
Linux lists a module's two cores as thread siblings with distinct core ids, core ids restart at 0
on every die; L1i and L2 per module, L1d per core, L3 per die). hwloc's reading of the real
machine (its ``.console``): 4 packages, 8 NUMA nodes, 64 cores, 64 PUs, L1d 16 KiB, L1i 64 KiB,
L2 2 MiB, L3 6 MiB.
"""
from __future__ import annotations

import pytest

from clusterbench.probe import hwloc as hw
from clusterbench.probe import probe

from probeamdcukit import opteron_6276_x4

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass


@pytest.mark.integration
@pytest.mark.skipif(not hw.available(), reason="lstopo-no-graphics not installed")
def test_hwloc_reads_the_synthetic_tree_the_same_way(tmp_path):
    """hwloc itself, on the same tree: the sysfs reader and hwloc agree on every topology fact."""
    root = str(opteron_6276_x4(tmp_path))
    a = probe(sysfs_root=root, use_hwloc=False)["topology"]
    b = probe(sysfs_root=root, use_hwloc=True)
    assert b["source"] == "hwloc"
    for key in ("packages", "numa_nodes", "cores", "pus", "smt_per_core", "cpus", "caches"):
        assert a[key] == b["topology"][key], key
    assert b["rpeak"]["node"]["dp_gflops_nominal"] == pytest.approx(588.8)
