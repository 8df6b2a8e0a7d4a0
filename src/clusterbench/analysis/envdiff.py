"""What else changed between two sides of runs: the settings (hosts, NIC, build, BLAS, MPI,
parameters) whose values differ, so a comparison names its confounders. Pure."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clusterbench.analysis.consistency import dotted_get
from clusterbench.benchmarks.declare import Result
from clusterbench.records import Run

@dataclass(frozen=True)
class EnvChange:
    """A setting whose value differs between the sides. ``a``/``b`` are the sides' values as text
    (several runs with different values: joined by " | "), ``values_a``/``values_b`` the sorted
    distinct values, ``label`` one line for a person ("MTU of eth0: 1500 -> 9000")."""

    what: str
    a: str
    b: str
    values_a: tuple[str, ...]
    values_b: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.what}: {self.a} -> {self.b}"

    def as_dict(self) -> dict[str, Any]:
        return {"what": self.what, "a": self.a, "b": self.b, "values_a": list(self.values_a),
                "values_b": list(self.values_b), "label": self.label}


def _text(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, (list, tuple)):
        return ", ".join(_text(x) for x in v) if v else "none"
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, default=str)
    return str(v)


def _names(items: Any, fmt: Any) -> list[str] | None:
    if not isinstance(items, list):
        return None
    return sorted({fmt(i) for i in items if isinstance(i, dict)})


def _blas_name(b: dict) -> str:
    path = str(b.get("path") or "")
    return path.rsplit("/", 1)[-1] if path else str(b.get("name"))


def _hosts(run: Run) -> list[str]:
    hosts = (run.cluster or {}).get("hosts")
    return list(hosts) if hosts else [str(run.host)]


#: (what, getter(run)) for the run-wide settings, in report order. Noise (free memory, timestamps,
#: pids) is left out on purpose.
RUN_SETTINGS: list[tuple[str, Any]] = [
    ("node count", lambda r: len(_hosts(r))),
    ("hosts", _hosts),
    ("CPU model", lambda r: dotted_get(r.probe, "cpu.model_name")),
    ("CPU microarchitecture", lambda r: dotted_get(r.probe, "cpu.microarchitecture")),
    ("kernel", lambda r: dotted_get(r.probe, "environment.kernel")),
    ("preemption model", lambda r: dotted_get(r.probe, "environment.preemption")),
    ("CPU frequency governor", lambda r: dotted_get(r.probe, "environment.governor")),
    ("turbo", lambda r: dotted_get(r.probe, "environment.turbo")),
    ("SMT", lambda r: dotted_get(r.probe, "environment.smt_active")),
    ("transparent huge pages", lambda r: dotted_get(r.probe, "environment.thp")),
    ("NUMA balancing", lambda r: dotted_get(r.probe, "environment.numa_balancing")),
    ("hypervisor", lambda r: dotted_get(r.probe, "environment.hypervisor")),
    ("MPI", lambda r: _names(dotted_get(r.probe, "environment.mpi"), lambda m: f"{m.get('name')} {m.get('version')}")),
    ("BLAS libraries", lambda r: _names(dotted_get(r.probe, "environment.blas"), _blas_name)),
    ("compilers", lambda r: _names(dotted_get(r.probe, "environment.compilers"),
                                   lambda c: f"{c.get('name')} {c.get('version')}")),
]

#: figure params that name how a figure was produced
RESULT_PARAMS = ("transport", "transport_used", "mpi", "launcher", "blas", "openblas_coretype", "threads", "ranks")


def _nic_settings(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = {}
    nics = dotted_get(run.probe, "environment.nics") or []
    for nic in nics:
        if not isinstance(nic, dict) or nic.get("name") in (None, "lo"):
            continue
        for k, label in (("mtu", "MTU"), ("speed_mbps", "speed (Mb/s)"), ("driver", "driver")):
            out[f"{label} of {nic['name']}"] = nic.get(k)
    # a run across hosts: every node's NICs (runs.cluster), by interface name over the nodes (host
    # names may differ between the sides; a value that differs between nodes shows as a list)
    per_nic: dict[str, set] = {}
    for node in ((run.cluster or {}).get("nodes") or {}).values():
        for nic in dotted_get(node, "network.nics") or []:
            if not isinstance(nic, dict) or nic.get("name") in (None, "lo"):
                continue
            for k, label in (("mtu", "MTU"), ("speed_mbps", "speed (Mb/s)"), ("driver", "driver")):
                per_nic.setdefault(f"{label} of {nic['name']} on the nodes", set()).add(_text(nic.get(k)))
    for key, values in per_nic.items():
        out[key] = ", ".join(sorted(values))
    sim = (run.cluster or {}).get("sim_cluster")
    if isinstance(sim, dict):
        out["virtual cluster MTU"] = sim.get("mtu")
        out["virtual cluster offloads"] = sim.get("offload")
    return out


def _build_settings(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kernel, info in sorted((run.builds or {}).items()):
        if isinstance(info, dict):
            out[f"compiler of {kernel}"] = info.get("compiler_version") or info.get("compiler")
            out[f"build flags of {kernel}"] = " ".join(info.get("flags") or [])
    return out


def _param_settings(results: Sequence[Result]) -> dict[str, set]:
    out: dict[str, set] = {}
    for r in results:
        params = r.params or {}
        for k in RESULT_PARAMS:
            if k in params:
                out.setdefault(f"{k} ({r.benchmark})", set()).add(_text(params[k]))
    return out


def _change(what: str, va: set[str], vb: set[str]) -> EnvChange | None:
    if va == vb:
        return None
    sa, sb = tuple(sorted(va)), tuple(sorted(vb))
    return EnvChange(what, " | ".join(sa) or "none", " | ".join(sb) or "none", sa, sb)


def env_diff(runs_a: Sequence[Run], runs_b: Sequence[Run], results_a: Sequence[Result] = (),
             results_b: Sequence[Result] = ()) -> list[EnvChange]:
    """What else changed between the sides, besides the change under test.

    Run-wide settings (:data:`RUN_SETTINGS`: node count and hosts, CPU, kernel, preemption,
    governor, turbo, SMT, THP, NUMA balancing, hypervisor, MPI, BLAS, compilers), each NIC's MTU,
    speed and driver (``lo`` ignored; a NIC on one side only shows as "absent"), the compiler and
    flags of each kernel built on both sides, and, from the figures' params when ``results_*`` are
    given, :data:`RESULT_PARAMS` per benchmark present on both sides. A side's value is the set of
    its runs' values; a change is listed when the sets differ."""
    changes: list[EnvChange] = []
    for what, get in RUN_SETTINGS:
        c = _change(what, {_text(get(r)) for r in runs_a}, {_text(get(r)) for r in runs_b})
        if c:
            changes.append(c)
    for per_run in (_nic_settings, _build_settings):
        sa = [per_run(r) for r in runs_a]
        sb = [per_run(r) for r in runs_b]
        keys = sorted({k for s in sa + sb for k in s})
        if per_run is _build_settings:  # a kernel built on one side only is another benchmark, not a change
            keys = [k for k in keys if any(k in s for s in sa) and any(k in s for s in sb)]
        for k in keys:
            c = _change(k, {_text(s[k]) if k in s else "absent" for s in sa},
                        {_text(s[k]) if k in s else "absent" for s in sb})
            if c:
                changes.append(c)
    pa, pb = _param_settings(results_a), _param_settings(results_b)
    for k in sorted(set(pa) & set(pb)):
        c = _change(k, pa[k], pb[k])
        if c:
            changes.append(c)
    return changes
