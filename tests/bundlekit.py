"""Helpers shared by the result bundle's and the exporters' tests (tests/unit/test_bundle.py,
test_openmetrics.py, tests/integration/test_export_bundle.py): a real store holding runs with real
Results, and the hostile strings every field is tried with."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.session import new_run_record
from clusterbench.store import Store

#: a newline, quotes, a backslash, the end of an HTML script, a NUL, an escape sequence
HOSTILE = 'a\nb"c\'d\\e</script><b>\x00f\x1b[2J\r'


def ipmi_energy(nodes: list[str], rate_hz: float = 1.0, kind: str = "ipmi", declared: bool = False) -> dict[str, Any]:
    """A run record's ``energy`` as :func:`clusterbench.energy.run.run_record` writes it."""
    sources = {n: {"kind": kind, "spec": kind, "declared": declared, "rate_hz": rate_hz} for n in nodes}
    bench = {"benchmark": "stream", "scope": "whole benchmark", "phase_s": 2.0, "phase_unix": [100.0, 102.0],
             "joules": 200.0 * len(nodes), "avg_watts": 100.0 * len(nodes),
             "per_node": {n: {"joules": 200.0, "avg_watts": 100.0} for n in nodes}, "sources": sources,
             "declared": declared, "basis": "measured", "nodes": nodes}
    return {"sources": sources, "basis": "measured", "nodes": nodes, "method": "m", "level": "l",
            "benchmarks": [bench]}


def make_store(path: Path, *, hostile: bool = False, energy: dict | None = None, runs: int = 1,
               tags: tuple[str, ...] = ("base",)) -> list[str]:
    """``runs`` complete stream runs in a new store at ``path`` (two figures each, nine samples);
    ``hostile``: :data:`HOSTILE` in the note, the command, the host's probe, a parameter name and value,
    the error and a warning. Returns the run ids, oldest first."""
    st = Store(path)
    ctx = RunContext(probe={})
    stream = get_benchmark("stream")
    ids = []
    for i in range(runs):
        probe = {"environment": {"kernel": "6.1.0" + (HOSTILE if hostile else ""), "mpi": [], "blas": []}}
        rec = new_run_record(["clusterbench", "--db", str(path), "run", "stream", "--threads", "1",
                              "--tag", "old"] + ([HOSTILE] if hostile else []), probe, "quick")
        rec["started"] = f"2026-11-23T00:0{i}:00.000+00:00"
        rec["tags"] = list(tags)
        rec["note"] = HOSTILE if hostile else None
        st.begin_run(rec)
        for v in (30000.0, 60000.0):
            params: dict[str, Any] = {"threads": 1 if v < 40000 else 2}
            if hostile:
                params[HOSTILE] = HOSTILE
            if energy:
                params["energy"] = {"joules": 20.0, "avg_watts": 100.0, "phase_s": 0.2}
            samples = [v * (1 + 0.01 * ((k * 7) % 5 - 2)) for k in range(9)]
            st.add_result(rec["id"], ctx.emit(stream, "triad", samples, params))
        st.finish_run(rec["id"], "complete", error=HOSTILE if hostile else None,
                      warnings=[{"code": "x", "message": HOSTILE, "remedy": HOSTILE}] if hostile else None,
                      energy=energy)
        ids.append(rec["id"])
    st.close()
    return ids


def exported(path: Path, selector: str = "last") -> list[tuple[Any, list[Any]]]:
    st = Store(path, readonly=True)
    try:
        return [(r, st.results(r.id)) for r in st.get_runs(st.select_runs(selector))]
    finally:
        st.close()
