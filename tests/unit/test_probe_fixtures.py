"""The pure tests (they start no process) of what tests/integration/test_probe_fixtures.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

from clusterbench.probe import probe

import probefixtureskit
from probefixtureskit import FIXTURES, KNOWN_HWLOC_ERRORS, TARBALLS
snapshot = probefixtureskit.snapshot  # a fixture, shared with the other half of test_probe_fixtures.py


def test_fixture_discovery():
    assert FIXTURES.is_dir(), f"{FIXTURES} is missing: the snapshots are part of the repository"
    assert TARBALLS, "no *.tar.bz2 fixtures found"


def test_sysfs_matches_hwloc_reading(snapshot):
    name, root, exp = snapshot
    p = probe(sysfs_root=str(root), use_hwloc=False)
    t = p["topology"]
    assert p["source"] == "sysfs"
    want = {"packages": exp["Package"], "numa_nodes": exp["NUMANode"], "cores": exp["Core"], "pus": exp["PU"]}
    want.update(KNOWN_HWLOC_ERRORS.get(name, {}))
    got = {k: t[k] for k in want}
    assert got == want
    sizes: dict[str, set[int]] = {}
    for c in t["caches"]:
        sizes.setdefault(c["name"], set()).add(c["size_bytes"])
    if not any(n.endswith("i") for n in exp["caches"]):
        # hwloc's API (and XML exported through it) filters instruction caches by default; lstopo keeps them
        sizes = {n: v for n, v in sizes.items() if not n.endswith("i")}
    assert sizes == exp["caches"]
    # every cache instance covers CPUs that exist, and caches of one level do not overlap
    pus = {c["pu"] for c in t["cpus"]}
    for c in t["caches"]:
        assert set(c["cpus"]) <= pus


def test_snapshot_has_no_live_items(snapshot):
    _, root, _ = snapshot
    p = probe(sysfs_root=str(root), use_hwloc=False)
    for k in ("nics", "mpi", "blas", "compilers"):
        assert p["environment"][k] is None
        assert "snapshot" in p["unknown"][f"environment.{k}"]
