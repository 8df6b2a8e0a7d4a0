"""``cluster check`` and the provenance of a run across hosts: every host's probe and network settings
gathered the way MPI reaches the hosts (:mod:`clusterbench.launch.remote`), then compared by the pure
:func:`clusterbench.analysis.consistency.diff`."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clusterbench.analysis.consistency import diff, unwrap
from clusterbench.launch import remote, simcluster


def check(hosts: Sequence[str], *, timeout: float | None = None, keep_going: bool = False,
          python: str | None = None) -> dict[str, Any]:
    """Gather the probe and network settings of every host and compare them.

    Returns ``{"hosts": [names], "differences": diff(...), "probes": {host: {"probe", "network"}},
    "errors": {host: one-line message}}`` (``errors`` is only non-empty with ``keep_going``;
    otherwise an unreachable host raises a one-line :class:`EnvironmentProblem` naming it).
    """
    kw: dict[str, Any] = {"keep_going": keep_going, "python": python}
    if timeout is not None:
        kw["timeout"] = timeout
    probes = remote.gather_probes(list(hosts), **kw)
    errors = {h: d["error"] for h, d in probes.items() if isinstance(d, Mapping) and "error" in d}
    answered = [h for h in probes if h not in errors and unwrap(probes[h]) is not None]
    return {"hosts": list(probes), "asked": list(hosts), "answered": answered,
            "differences": diff(probes), "probes": probes, "errors": errors}


def format_check(res: Mapping[str, Any]) -> list[str]:
    """The printed report of :func:`check`: how many answered of how many asked, those that did
    not, and differences only across the hosts that were compared (never "no differences" when
    fewer than two answered)."""
    asked = list(res.get("asked") or res["hosts"])
    errors = dict(res.get("errors") or {})
    answered = list(res.get("answered") or [h for h in res["hosts"] if h not in errors])
    lines = [f"{len(answered)} of {len(asked)} hosts answered: {', '.join(answered) or 'none'}"]
    lines += [f"did not answer: {h}: {errors.get(h, 'no probe data')}" for h in asked if h not in answered]
    if len(answered) < 2:
        lines.append("nothing compared: at least two hosts must answer")
        return lines
    diffs = res["differences"]
    scope = f"the {len(answered)} hosts that answered" if len(answered) < len(asked) else f"{len(answered)} hosts"
    if not diffs:
        lines.append(f"no differences that change results across {scope}")
    for d in diffs:
        vals = ", ".join(f"{h}={v}" for h, v in d["values"].items())
        lines.append(f"{d['what']}: {vals} - {d['why']}")
    return lines


def provenance(hosts: Sequence[str], *, timeout: float | None = None) -> dict[str, Any]:
    """What a run across ``hosts`` stores beside its figures (``runs.cluster`` in the store, the
    ``run.cluster`` of ``--json``): ``{"hosts": [names as given], "sim_cluster": <the virtual
    cluster's definition, when every host is one of its nodes, else None>, "nodes": {host: {"probe",
    "network"}}, "differences": diff(...)}``. The probes are gathered the way the MPI launcher
    reaches the hosts (``ip netns exec`` on the virtual cluster, ssh otherwise); an unreachable host
    raises a one-line :class:`EnvironmentProblem` naming it, before anything is measured."""
    data = check(hosts, timeout=timeout)
    sim = simcluster.load()
    if sim is not None:
        try:
            for h in hosts:
                sim.node(h)
        except Exception:  # a host that is not one of its nodes: a real cluster
            sim = None
    return {"hosts": list(hosts), "sim_cluster": sim.to_json() if sim is not None else None,
            "nodes": data["probes"], "differences": data["differences"]}
