"""The report's sources and their environment: which runs make one column (a run, the pooled runs of
one configuration of a selector, or every trial of one ``tune hpl``), and the rows of the environment
table of each (host, command, kernel and settings, CPU, memory, Rpeak, NICs, MPI, BLAS, compilers)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterbench.errors import UsageError
from clusterbench.records import Run, with_run
from clusterbench.benchmarks.declare import Result
from clusterbench.report.plots import Source
from clusterbench.units import format_value


def _tune_id(run: Run) -> str | None:
    for w in str(run.command or "").split():
        if w.startswith("--tune-id="):
            return w.split("=", 1)[1]
    return None


def _short_command(run: Run) -> str:
    """The command without the program name and global options (``--db PATH``), nor a tune's
    trial key."""
    words = list(run.argv or str(run.command or "").split())
    out, skip = [], False
    for i, w in enumerate(words):
        if skip:
            skip = False
            continue
        if i == 0 and w.endswith("clusterbench"):
            continue
        if w == "--db":
            skip = True
            continue
        if w.startswith(("--db=", "--tune-trial=", "--tune-id=")):
            continue
        out.append(w)
    return " ".join(out)


def _config_key(run: Run, results: list[Result]) -> tuple:
    """What must be equal for runs of one selector to share a column: the command (without its
    --tag and --note), the host and every environment row."""
    words, out, skip = _short_command(run).split(), [], False
    for w in words:
        if skip:
            skip = False
        elif w in ("--tag", "--note"):
            skip = True
        elif not w.startswith(("--tag=", "--note=")):
            out.append(w)
    env = environment(Source("", [run], results))
    return (" ".join(out), run.host,
            tuple(sorted((k, v) for k, v in env.items() if k not in ("command", "started", "status"))))


def _what(run: Run) -> str:
    words = _short_command(run).split()
    return " ".join(w for w in words[:2] if not w.startswith("-")) or "run"


def _tune_runs(store: Any, tid: str, given: dict[str, Run]) -> list[Run]:
    """Every complete trial of the tune ``tid``, oldest first (full records)."""
    trials = [r for r in store.list_runs() if _tune_id(r) == tid and r.status == "complete"]
    full = [given.get(r.id) or store.get_run(r.id) for r in trials]
    return sorted(full, key=lambda x: x.started or "")


def collect(store: Any, run_ids: list[Any]) -> list[Source]:
    """The report's sources, in the order given. Each item is a run reference (the run is a source of
    its own) or a :class:`clusterbench.report.compare.Selection` (a selector's runs that may be
    pooled): its runs of one configuration (:func:`_config_key`: command, host, environment) are one
    source, their figures pooled, so a tag of 3000 repeated runs is one column, not 3000. A ``tune
    hpl`` trial brings its whole tune either way."""
    if not run_ids:
        raise UsageError("a report needs at least one run", "give run ids, tags or 'last'")
    sources: list[Source] = []
    seen: set[str] = set()
    tunes_done: set[str] = set()
    labels: dict[str, int] = {}

    def add(label: str, runs: list[Run], results: list[Result]) -> None:
        labels[label] = labels.get(label, 0) + 1
        sources.append(Source(label if labels[label] == 1 else f"{label} #{labels[label]}", runs, results))

    def tune(run: Run, given: dict[str, Run]) -> bool:
        tid = _tune_id(run)
        if not tid:
            return False
        if tid not in tunes_done:
            tunes_done.add(tid)
            trials = _tune_runs(store, tid, given) or [run]
            results = store.results_of([t.id for t in trials]) if hasattr(store, "results_of") \
                else {t.id: store.results(t.id) for t in trials}
            add(f"tune {tid[:8]}", trials, [r for t in trials for r in results[t.id]])
        return True

    for item in run_ids:
        if isinstance(item, str):
            run = store.get_run(item)
            if run.id in seen:
                continue
            seen.add(run.id)
            if not tune(run, {run.id: run}):
                add(f"{_what(run)} {run.id[:8]}".strip(), [run], store.results(run.id))
            continue
        runs = [r for r in item.runs if r.id not in seen]
        seen.update(r.id for r in runs)
        given = {r.id: r for r in runs}
        groups: dict[tuple, list[Run]] = {}
        for run in runs:
            if not tune(run, given):
                groups.setdefault(_config_key(run, item.results.get(run.id, [])), []).append(run)
        hosts = {k[1] for k in groups}
        for key, members in groups.items():
            first = members[0]
            if len(runs) == 1:
                label = f"{_what(first)} {first.id[:8]}"
            else:
                label = f"{_what(first)} {item.selector}" + (f" on {first.host}" if len(hosts) > 1 else "") \
                    + (f" ({len(members)} runs)" if len(members) > 1 else f" {first.id[:8]}")
            results = [with_run(r, m.id) for m in members for r in item.results.get(m.id, [])]
            add(label, members, results)
    return sources


# -- the environment ----------------------------------------------------------------------------------
def _names(items: Any, fmt) -> str:
    if not isinstance(items, list):
        return ""
    return "; ".join(dict.fromkeys(fmt(x) for x in items if isinstance(x, Mapping)))


def _used(results: list[Result], key: str) -> str:
    vals = []
    for r in results:
        v = (r.params or {}).get(key)
        if isinstance(v, Mapping):
            v = " ".join(str(v[k]) for k in ("name", "version") if v.get(k))
        if v not in (None, "", [], {}):
            vals.append(str(v))
    return ", ".join(dict.fromkeys(vals))


def _onoff(v: Any) -> str:
    return "unknown" if v is None else "on" if v is True else "off" if v is False else str(v)


def environment(src: Source) -> dict[str, str]:
    """The rows of the environment table for one source (empty strings where unknown)."""
    run, probe = src.runs[0], src.probe
    env = probe.get("environment") or {}
    cpu = probe.get("cpu") or {}
    topo = probe.get("topology") or {}
    rpeak = probe.get("rpeak") or {}
    node_rp = (rpeak.get("node") or {}).get("dp_gflops_nominal")
    core_rp = (rpeak.get("per_core") or {}).get("dp_gflops_nominal")
    mem = (probe.get("memory") or {}).get("total_bytes")
    builds = {}
    for t in src.runs:
        for name, b in (t.builds or {}).items():
            if isinstance(b, Mapping):
                builds[name] = b
    compilers_used = "; ".join(dict.fromkeys(
        f"{b.get('compiler_version') or b.get('compiler')} {' '.join(b.get('flags') or [])}".strip()
        for b in builds.values()))
    cluster = run.cluster or {}
    sim = cluster.get("sim_cluster") if isinstance(cluster, Mapping) else None
    cluster_text = ""
    if isinstance(cluster, Mapping) and cluster.get("hosts"):
        cluster_text = f"{len(cluster['hosts'])} nodes: {', '.join(map(str, cluster['hosts']))}"
        if isinstance(sim, Mapping):
            cluster_text += f" (virtual cluster, MTU {sim.get('mtu')}, rate {sim.get('rate_bps') or 'unlimited'})"
        diffs = cluster.get("differences")
        if isinstance(diffs, list):
            cluster_text += f"; {len(diffs)} difference(s) between nodes"
    started = [t.started or "" for t in src.runs]
    rows = {
        "host": str(run.host or probe.get("hostname") or ""),
        "command": "clusterbench " + _short_command(run) + (
            "" if len(src.runs) == 1 else f" ({len(src.runs)} trial runs)" if _tune_id(run)
            else f" ({len(src.runs)} runs, figures pooled)"),
        "started": min(started) + (f" to {max(started)}" if len(set(started)) > 1 else ""),
        "status": ", ".join(dict.fromkeys(str(t.status) for t in src.runs)),
        "clusterbench": str(run.clusterbench_version or ""),
        "kernel": str(env.get("kernel") or ""),
        "preemption": str(env.get("preemption") or ""),
        "governor": str(env.get("governor") or "none (no cpufreq)") if "governor" in env else "",
        "turbo / SMT": f"turbo {_onoff(env.get('turbo'))}, SMT {'on' if env.get('smt_active') else 'off'}" if env else "",
        "THP / NUMA balancing": f"{env.get('thp')}, {'on' if env.get('numa_balancing') else 'off'}" if env else "",
        "virtualisation": ", ".join(str(env[k]) for k in ("hypervisor", "container") if env.get(k)),
        "CPU": " ".join(str(x) for x in (cpu.get("model_name"), f"({cpu['microarchitecture']})"
                                         if cpu.get("microarchitecture") else None, cpu.get("arch")) if x),
        "cores": (f"{topo.get('packages')} package(s), {topo.get('numa_nodes')} NUMA node(s), {topo.get('cores')} "
                  f"cores, {topo.get('pus')} PUs") if topo else "",
        "memory": f"{mem / 2 ** 30:.1f} GiB" if isinstance(mem, (int, float)) else "",
        "Rpeak (DP, nominal clock)": (f"{format_value(node_rp)} Gflop/s node, {format_value(core_rp)} per core"
                                      if isinstance(node_rp, (int, float)) else ""),
        "NICs / MTU": _names(env.get("nics"), lambda n: f"{n.get('name')} MTU {n.get('mtu')}"
                             + (f" {n['speed_mbps']} Mb/s" if n.get("speed_mbps") else "")
                             + (f" {n['driver']}" if n.get("driver") else "") + f" {n.get('operstate') or ''}".rstrip()),
        "cluster": cluster_text,
        "MPI installed": _names(env.get("mpi"), lambda m: f"{m.get('name')} {m.get('version') or ''}".strip()),
        "MPI used": _used(src.results, "mpi"),
        "transport used": _used(src.results, "transport_used"),
        "BLAS installed": _names(env.get("blas"), lambda b: str(b.get("path") or b.get("name"))),
        "BLAS used": _used(src.results, "blas_config") or _used(src.results, "blas"),
        "compilers installed": _names(env.get("compilers"), lambda c: f"{c.get('name')} {c.get('version') or ''}".strip()),
        "kernels built with": compilers_used,
    }
    return rows


__all__ = ["collect", "environment"]
