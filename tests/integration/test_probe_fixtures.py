"""Acceptance test: the sysfs reader agrees with hwloc's own reading of real machines.

Fixtures are hwloc test-suite snapshots (tests/data/sysfs, vendored with hwloc's licence, or
$CLUSTERBENCH_FIXTURES): NAME.tar.bz2 plus hwloc's reading as NAME.console or NAME.xml.
"""
from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from clusterbench.probe import probe
from clusterbench.probe import hwloc as hw

import probefixtureskit
from probefixtureskit import KNOWN_HWLOC_ERRORS

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass
snapshot = probefixtureskit.snapshot  # a fixture, shared with the other half of test_probe_fixtures.py


def extract(tb: Path, dest: Path) -> Path:
    """Extract a snapshot; return its top directory (may differ from the tarball name)."""
    with tarfile.open(tb) as t:
        kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        t.extractall(dest, **kwargs)
    tops = [p for p in dest.iterdir() if p.is_dir()]
    assert len(tops) == 1, tops
    return tops[0]


@pytest.mark.integration
@pytest.mark.skipif(not hw.available(), reason="lstopo-no-graphics not installed")
def test_hwloc_and_sysfs_paths_agree(snapshot):
    name, root, _ = snapshot
    a = probe(sysfs_root=str(root), use_hwloc=False)
    b = probe(sysfs_root=str(root), use_hwloc=True)
    assert b["source"] == "hwloc"
    ta, tb = a["topology"], b["topology"]
    if name in KNOWN_HWLOC_ERRORS:
        # hwloc's reading is wrong here (see KNOWN_HWLOC_ERRORS); the automatic mode must keep sysfs
        auto = probe(sysfs_root=str(root))
        assert auto["source"] == "sysfs" and auto["topology"]["packages"] == KNOWN_HWLOC_ERRORS[name]["packages"]
        assert any("disagree" in n for n in auto["notes"])
        assert ta["cores"] == tb["cores"] and ta["pus"] == tb["pus"]
        return
    for key in ("packages", "numa_nodes", "cores", "pus", "smt_per_core", "cpus", "caches"):
        assert ta[key] == tb[key], key
    assert [n["cpus"] for n in ta["numa"]] == [n["cpus"] for n in tb["numa"]]
    assert [k["cpus"] for k in ta["core_kinds"]] == [k["cpus"] for k in tb["core_kinds"]]


