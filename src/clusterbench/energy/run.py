"""What a measuring session asks of energy: the options checked, the run's meter, its record.

:func:`check_options` refuses bad ``--power``/``--watts``/``--power-interval`` syntax before anything is
probed or built; :func:`meter_for_run` builds the run's meter for the run's hosts and checks that every
source can be read (before anything is stored); :func:`run_record` is the run record's ``energy``
(the store's ``runs.energy``), whose ``benchmarks`` list fills as each benchmark ends.
"""
from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from clusterbench.energy.meter import Meter


def check_options(power: Sequence[str], watts: float | None, interval: float | None) -> None:
    """The power options' syntax alone; a one-line UsageError, nothing when none was given."""
    if power or watts is not None or interval is not None:
        from clusterbench.energy.spec import check_specs

        check_specs(power, watts, interval)


def meter_for_run(power: Sequence[str], watts: float | None, interval: float | None,
                  hosts: Sequence[str]) -> "Meter | None":
    """The run's power meter, checked (a meter command run once, bounded), or None; UsageError on bad
    input, before anything is stored."""
    if not power and watts is None:
        return None
    from clusterbench.energy.build import build_meter
    from clusterbench.launch import simcluster

    sim = simcluster.load() if hosts else None
    sim_names = {n.name for n in sim.nodes} if sim is not None else set()
    virtual = bool(hosts) and set(hosts) <= sim_names
    local = [h for h in hosts if h in sim_names or h in ("localhost", socket.gethostname())]
    meter = build_meter(power, watts, nodes=hosts, local=local, virtual=virtual, interval=interval)
    meter.check()
    return meter


def run_record(meter: "Meter", benchmarks: list[dict]) -> dict[str, Any]:
    """The run record's ``energy``: the sources, measured or declared, the method, and ``benchmarks``
    (the list every benchmark's whole energy is appended to)."""
    from clusterbench.energy.figures import LEVEL, METHOD
    from clusterbench.energy.meter import basis

    return {"sources": meter.describe(), "basis": basis(meter.sources), "nodes": meter.nodes,
            "method": METHOD, "level": LEVEL, "benchmarks": benchmarks}
