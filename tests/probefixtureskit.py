"""Helpers shared by tests/unit/test_probe_fixtures.py (pure tests) and tests/integration/test_probe_fixtures.py
(tests that start processes)."""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest


#: hwloc's snapshots of real machines, vendored with hwloc's licence (tests/data/sysfs/README.md)
FIXTURES = Path(os.environ.get("CLUSTERBENCH_FIXTURES", Path(__file__).resolve().parent / "data" / "sysfs"))
TARBALLS = sorted(FIXTURES.glob("*.tar.bz2")) if FIXTURES.is_dir() else []
#: Where hwloc's recorded reading is known to be wrong, with the reason.
KNOWN_HWLOC_ERRORS = {
    # hwloc reports "intersection without inclusion" for this machine and drops
    # package 3 and one L3 instance; sysfs (physical_package_id, node3/cpulist,
    # core_siblings) clearly describes 4 packages of 10 cores.
    "40intel64-4n10c+pci-conflicts": {"packages": 4},
}
_UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "KB": 1024, "MB": 1024**2, "GB": 1024**3}


def _expected_file(tb: Path) -> Path | None:
    stem = tb.name[: -len(".tar.bz2")]
    for ext in (".console", ".xml"):
        if (tb.parent / (stem + ext)).exists():
            return tb.parent / (stem + ext)
    return None


def parse_console(text: str) -> dict:
    """Counts and cache sizes per level from lstopo's verbose console output."""
    out = {k: len(re.findall(rf"^\s*{k} L#", text, re.M)) for k in ("Package", "NUMANode", "Core", "PU")}
    sizes: dict[str, set[int]] = {}
    for name, num, unit in re.findall(r"\b(L\d[di]?)Cache L#\d+ \([^)]*?size=(\d+)(KiB|MiB|GiB)", text):
        sizes.setdefault(name, set()).add(int(num) * _UNITS[unit])
    out["caches"] = sizes
    return out


def parse_xml(text: str) -> dict:
    """Counts and cache sizes per level from an hwloc XML export."""
    root = ET.fromstring(text)
    objs = list(root.iter("object"))
    out = {k: sum(1 for o in objs if o.get("type") == k) for k in ("Package", "NUMANode", "Core", "PU")}
    sizes: dict[str, set[int]] = {}
    for o in objs:
        t = o.get("type", "")
        if t.endswith("Cache") and int(o.get("cache_size", "0")) > 0:
            level = t[1]
            kind = {"1": "d", "2": "i"}.get(o.get("cache_type", "0"), "")
            sizes.setdefault(f"L{level}{kind}", set()).add(int(o.get("cache_size")))
    out["caches"] = sizes
    return out


@pytest.fixture(params=TARBALLS, ids=[t.name[: -len(".tar.bz2")] for t in TARBALLS])
def snapshot(request, sysfs_snapshot) -> tuple[str, Path, dict]:
    tb: Path = request.param
    exp = _expected_file(tb)
    if exp is None:
        pytest.skip(f"no .console/.xml for {tb.name}")
    text = exp.read_text(errors="replace")
    expected = parse_xml(text) if exp.suffix == ".xml" else parse_console(text)
    name = tb.name[: -len(".tar.bz2")]
    return name, sysfs_snapshot(tb), expected
