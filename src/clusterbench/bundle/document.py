"""The bundle document: made from runs and their figures, written as the same bytes every time."""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any

from clusterbench import __version__
from clusterbench.analysis.consistency import dotted_get
from clusterbench.analysis.stats import mean_ci, median_ci
from clusterbench.benchmarks.declare import Result
from clusterbench.energy.levels import check_levels, power_trace
from clusterbench.errors import UsageError
from clusterbench.records import Run

KIND = "clusterbench-bundle"
#: the bundle's schema version (``schema.json``); a newer one is refused on import
BUNDLE_SCHEMA = 1
#: a stored run's note saying when it was imported (``imported`` in its bundle, not a note there)
IMPORT_NOTE = "imported from a bundle at "
CONFIDENCE = 0.99
#: what ``software`` takes from every node's probe (``environment.<key>``)
SOFTWARE_KEYS = ("kernel", "mpi", "blas", "compilers", "hypervisor", "container", "emulation")
#: left out of the checksum: what an import adds
UNCHECKED = ("checksum", "imported")


def _probes(run: Run) -> dict[str, Any]:
    nodes = (run.cluster or {}).get("nodes")
    if isinstance(nodes, dict) and nodes:
        return {str(h): (v or {}).get("probe") if isinstance(v, dict) else None for h, v in sorted(nodes.items())}
    return {str(run.host): run.probe}


def _software(run: Run, probes: dict[str, Any]) -> dict[str, Any]:
    per_node = {h: {k: dotted_get(p or {}, f"environment.{k}") for k in SOFTWARE_KEYS} for h, p in probes.items()}
    return {"clusterbench": run.clusterbench_version, "builds": run.builds or {}, "nodes": per_node}


def _interval(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [ci[0], ci[1]]


def figure(r: Result) -> dict[str, Any]:
    """A figure as the bundle holds it: ``Result.as_json`` and its intervals."""
    d = r.as_json()
    finite = all(isinstance(s, (int, float)) and math.isfinite(s) for s in r.samples)
    d["intervals"] = {"confidence": CONFIDENCE,
                      "mean": _interval(mean_ci(r.samples, CONFIDENCE)) if finite else None,
                      "median": _interval(median_ci(r.samples, CONFIDENCE)) if finite else None}
    return d


def split_imports(run: Run) -> tuple[dict[str, Any], list[str]]:
    """The run record as the bundle holds it, and the times it was imported (taken from its notes)."""
    rec = run.as_json()
    notes = list(rec.get("notes") or [])
    imported = [n[len(IMPORT_NOTE):] for n in notes if isinstance(n, str) and n.startswith(IMPORT_NOTE)]
    rec["notes"] = [n for n in notes if not (isinstance(n, str) and n.startswith(IMPORT_NOTE))]
    return rec, imported


def run_entry(run: Run, results: Sequence[Result]) -> tuple[dict[str, Any], list[str]]:
    if run.status == "running":
        raise UsageError(f"run {run.id[:8]} is still running", "export it when it has finished")
    rec, imported = split_imports(run)
    probes = _probes(run)
    return {"run": rec, "nodes": probes, "software": _software(run, probes),
            "results": [figure(r) for r in results], "power_trace": power_trace(run.energy),
            "energy_level": check_levels(run.energy, results)}, imported


def canonical(doc: dict[str, Any]) -> bytes:
    """The bytes the checksum is taken over: the document without :data:`UNCHECKED`, keys sorted."""
    body = {k: v for k, v in doc.items() if k not in UNCHECKED}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode()


def checksum(doc: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical(doc)).hexdigest()


def build(runs: Sequence[tuple[Run, Sequence[Result]]]) -> dict[str, Any]:
    """The bundle of ``runs`` (oldest first, as given)."""
    entries, imported = [], []
    for run, results in runs:
        entry, times = run_entry(run, results)
        entries.append(entry)
        imported += times
    doc: dict[str, Any] = {"format": KIND, "bundle_schema": BUNDLE_SCHEMA, "created_by": f"clusterbench {__version__}",
                           "runs": entries}
    try:
        doc["checksum"] = checksum(doc)
    except ValueError:  # NaN or an infinity in a sample, a summary or the energy: not JSON
        raise UsageError("a run holds a number JSON cannot write (NaN or infinite)",
                         "export it with --format json, which writes them as NaN/Infinity") from None
    doc["imported"] = sorted(set(imported))
    return doc


def dumps(doc: dict[str, Any]) -> str:
    """The bundle's text: indented, keys sorted, ASCII only (every other character as ``\\uXXXX``)."""
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=True, allow_nan=False) + "\n"


def runs_of(doc: dict[str, Any]) -> list[tuple[Run, list[Result]]]:
    """The runs of a checked bundle (:func:`clusterbench.bundle.loads`), as the store hands them back."""
    out = []
    for entry in doc["runs"]:
        run = Run.from_json(entry["run"])
        out.append((run, [Result.from_json(r) for r in entry["results"]]))
    return out
