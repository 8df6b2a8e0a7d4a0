"""``sweep node``: the quick node profile (or one node benchmark) on every node at once, as ONE launcher
job; the figures gathered to the caller; outlier nodes flagged per figure; their likely cause from
``doctor``'s rules.

What runs
    The kernels are built here first (the build cache, :mod:`clusterbench.kernels.build`), and the
    store is checked writable, so bad input or a missing compiler fails before anything starts. Then
    one job starts one process per node, :mod:`clusterbench.sweep.agent`, which runs the benchmarks
    in-process (``session.run``, no store) on its node's cpus and prints its probe and figures as short
    JSON lines tagged with its node name. The job is the launcher registry's one tagged process per
    node (:mod:`clusterbench.launch.mpi.pernode`): Open MPI's ``mpirun`` (``--map-by ppr:1:node
    --bind-to none --tag-output``; from the head namespace through the launch agent on the virtual
    cluster) or MPICH's ``mpiexec`` (``-prepend-pattern -ppn 1``), or, inside a Slurm allocation,
    ``srun --ntasks-per-node=1 --cpu-bind=none --label --mpi=none``. The agent is not an MPI program; these
    launchers start plain programs. The launcher's output interleaves the nodes' lines, and a line may
    be cut where the launcher read a pipe; each rank's own stream is rebuilt from the launcher's tags
    before it is parsed (:class:`Demux`), and every line carries a per-node sequence number, so a lost
    or garbled line is an error for that node, never a wrong figure. Nothing is gathered by one ssh per
    node; the job is bounded in time and ended as a whole (process group, watchdog) on timeout,
    failure or Ctrl-C.

A node that fails
    loses that node only: the launcher runs in recovery mode (``--enable-recovery``,
    ``-disable-auto-cleanup``, srun ``--kill-on-bad-exit=0``), each agent's supervisor reports its
    worker's death (the signal and its likely cause) and beats every second, a node silent for
    :data:`LOST_S` seconds (``--lost-after``) is failed as lost, and when the launcher ends early the
    nodes that reported are kept (:func:`run_job`). The figures of the others are judged and stored;
    the run is incomplete.

What real clusters need
    The agent runs ``python -m clusterbench.sweep.agent`` with this Python (``sys.executable``; on
    separate machines reached by ssh, the node's own ``cluster install`` virtual environment, else its
    ``python3``) unless ``python`` says otherwise: a shared filesystem holding this installation (e.g. a virtual environment
    in a shared ``$HOME``), or clusterbench installed on every node at the path given. Kernels are
    compiled on each node into its cache (``$CLUSTERBENCH_CACHE``, exported to the job) when the cache
    is not shared or the node's CPU differs from this one's, so the nodes need the C compiler too. The
    virtual cluster's nodes share this machine's filesystem and cache.

CPUs
    On a real cluster each node's agent uses every cpu of its node (``--bind-to none``; under Slurm,
    what the step gives it). The virtual cluster's nodes all share this machine's cpus, so each node is
    pinned to cpus of its own: ``node_cpus`` (``{node: [cpu, ...]}``), by default one cpu each, round
    robin; more nodes than cpus only with ``oversubscribe``, and then busy loops even out the cpus that
    carry a node fewer (:func:`filler_loops`), so every node has the same share and the output says so.
    There the nodes also start measuring together (a start barrier once every node has built
    and probed) and a node that finishes keeps its cpus busy until all have finished (see
    :mod:`clusterbench.sweep.agent`), so every node measures under the same sharing throughout.

Outliers
    Per figure (benchmark, metric and the benchmark's key params), the nodes' values are judged with
    :func:`clusterbench.analysis.outliers.flag` (modified z-score beyond 3.5 on the bad side and at
    least 10 % from the median, 3 or more nodes: :data:`outliers.METHOD`). Each node's agent reads
    doctor's evidence of its node where it runs, before the start barrier (the sweep's own launch, no
    second way to reach the nodes); when a node is flagged, doctor's rules judge that evidence
    (:func:`clusterbench.doctor.diagnose_evidence`) and the findings that fire on that node, bear on
    that benchmark and do not fire on every node are its likely causes.

Stored
    One run (unless ``use_store`` is False): each node's figures with ``params.node``, the nodes' probes
    and NIC settings as the run's cluster record (from the agents' own output), so ``results table
    BENCH --rows node`` and ``compare`` read it like any run.
"""
from __future__ import annotations

import dataclasses

import os
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from clusterbench.analysis import outliers
from clusterbench.benchmarks.base import Progress
from clusterbench.errors import (
    KernelFailed,
    UsageError,
)
from clusterbench.launch.mpi.pernode import Demux, sim_launch_timeout
from clusterbench.sweep import agent as agent_mod
from clusterbench.sweep.node.hosts import (cpu_shares, default_node_cpus, filler_loops, node_benchmarks, resolve_hosts,
                                           sharing_note, start_fillers)
from clusterbench.sweep.node.job import (FINALIZE_GRACE, LOST_S, OPENMPI_TAG, SRUN_LABEL, Gather, Job, NodeReport, build_job,
                                         run_job)
from clusterbench.sweep.node.judging import figure_label, figures, judge, likely_causes, relevant_rules
from clusterbench.sweep.node.text import format_sweep_node


#: the package's public face (the CLI, ``run cluster`` and the tests read these here)
__all__ = ["sweep_node", "parse_node_cpus", "format_sweep_node", "SWEEP_SCHEMA", "DEFAULT_TIMEOUT", "FINALIZE_GRACE",
           "LOST_S", "Gather", "Job", "NodeReport", "Demux", "OPENMPI_TAG", "SRUN_LABEL", "build_job", "run_job",
           "cpu_shares", "default_node_cpus", "filler_loops", "sharing_note", "start_fillers", "node_benchmarks",
           "resolve_hosts", "figures", "figure_label", "judge", "likely_causes", "relevant_rules"]

SWEEP_SCHEMA = 1
#: seconds the whole sweep may take unless the caller says otherwise
DEFAULT_TIMEOUT = 900.0

# --------------------------------------------------------------------------- the sweep

def parse_node_cpus(items: Sequence[str] | None) -> dict[str, list[int]] | None:
    """``["n1=0", "n2=0-1,3"]`` -> ``{"n1": [0], "n2": [0, 1, 3]}``."""
    if not items:
        return None
    from clusterbench.probe.sysfs import parse_cpulist

    out: dict[str, list[int]] = {}
    for item in items:
        node, sep, cpus = item.partition("=")
        parsed = parse_cpulist(cpus) if sep else None
        if not node.strip() or not parsed:
            raise UsageError(f"--node-cpus {item!r} is not NODE=CPUS", "e.g. --node-cpus cbsim-n1=0 --node-cpus cbsim-n2=1")
        out[node.strip()] = sorted(parsed)
    return out


def _resolve_benchmark(benchmark: str | None, given: dict | None) -> tuple[str, dict]:
    from clusterbench.benchmarks import ALIASES

    name = ALIASES.get(benchmark, benchmark) if benchmark else "node"
    allowed = node_benchmarks()
    if name not in allowed:
        raise UsageError(f"'{benchmark}' is not a node benchmark", f"choose from {', '.join(allowed)}")
    return name, dict(given or {})


def sweep_node(hosts: Sequence[str] | None = None, benchmark: str | None = None, *, given: dict | None = None,
               profile: str = "quick", mpi: str | None = None, allow_root: bool = False,
               timeout: float | None = None, launch_timeout: float | None = None, store: Any = None,
               use_store: bool = True, python: str | None = None, node_cpus: dict[str, list[int]] | None = None,
               diagnose: bool = True, tags: Sequence[str] = (), note: str | None = None,
               argv: Sequence[str] | None = None, progress: Progress | None = None,
               probe_data: dict | None = None, oversubscribe: bool = False,
               lost_after: float | None = None) -> dict:
    """Run ``benchmark`` (default: the quick node profile) on every host at once as one launcher job,
    gather the figures, flag outlier nodes per figure and store the run; returns the ``--json``
    document (``sweep_schema`` 1; see :func:`format_sweep_node`). ``hosts`` None: the Slurm allocation
    this process runs in. Raises a one-line :class:`ClusterbenchError` on bad input, an unreachable
    host or a launcher that fails, with nothing stored."""
    from clusterbench import session
    from clusterbench.benchmarks.base import RunContext, allowed_cpus
    from clusterbench.benchmarks.mpi.common import sim_cluster_of
    from clusterbench.launch import mpi as mpimod
    from clusterbench.launch.mpi.hosts import check_name
    from clusterbench.store.names import check_note, check_tag

    progress = progress or Progress()
    t_start = time.monotonic()
    names, _ = resolve_hosts(hosts)
    name, given = _resolve_benchmark(benchmark, given)
    tags = list(dict.fromkeys(check_tag(t) for t in tags))
    check_note(note)
    timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
    if not timeout > 0:
        raise UsageError(f"--timeout {timeout:g} is not allowed", "give a number of seconds above 0")
    lost_s = LOST_S if lost_after is None else float(lost_after)
    if not lost_s >= 2 * agent_mod.BEAT_S:
        beat = agent_mod.BEAT_S
        raise UsageError(f"--lost-after {lost_s:g} is not allowed",
                         f"give at least {2 * beat:g} seconds (an agent beats every {beat:g} s)")
    for h in names:
        check_name(h, f"host '{h}'")
    sim = sim_cluster_of([mpimod.Host(h, 1) for h in names])
    if sim is None:
        from clusterbench.launch import simcluster

        c = simcluster.load()
        if c is not None and any(h in {n.name for n in c.nodes} for h in names):
            odd = [h for h in names if h not in {n.name for n in c.nodes}]
            raise UsageError(f"{odd[0]} is not a node of the virtual cluster ({', '.join(n.name for n in c.nodes)})",
                             "sweep the virtual cluster's nodes or real hosts, not both")

    # validate and build here first: bad input or a missing compiler fails before anything starts
    probe_data = probe_data if probe_data is not None else __import__("clusterbench.probe", fromlist=["probe"]).probe()
    ctx = RunContext(probe=probe_data, profile=profile, timeout=timeout, oversubscribe=True)
    t_prep = time.monotonic()
    steps = session.plan([name], {name: given}, ctx)
    fillers: dict[int, int] = {}
    if sim is not None:
        cpus_here = allowed_cpus(ctx)
        node_cpus = dict(node_cpus or {})
        unknown = [n for n in node_cpus if n not in names]
        if unknown:
            raise UsageError(f"--node-cpus names {unknown[0]}, which is not one of the hosts", "name the hosts swept")
        bad = [(n, c) for n, cs in node_cpus.items() for c in cs if c not in cpus_here]
        if bad:
            raise UsageError(f"--node-cpus {bad[0][0]}={bad[0][1]}: cpu {bad[0][1]} is not one this process may use "
                             f"({','.join(map(str, cpus_here))})", "give cpus of this machine")
        placed = [h for h in names if h not in node_cpus]
        share = len(placed) > len(cpus_here)
        if share and not oversubscribe:
            raise UsageError(f"{len(placed)} virtual nodes need a cpu each and this process may use "
                             f"{len(cpus_here)} ({','.join(map(str, cpus_here))})",
                             f"sweep {len(cpus_here)} nodes or fewer, add --oversubscribe (the nodes then share every "
                             "cpu equally and each figure is per share), or place them with --node-cpus")
        taken = sorted({c for cs in node_cpus.values() for c in cs})
        node_cpus = {**default_node_cpus(placed, cpus_here, taken=taken), **node_cpus}
        node_cpus = {h: node_cpus[h] for h in names}
        if share:  # --oversubscribe: every node the same share of a cpu
            fillers = filler_loops(node_cpus)
    for bench, params in steps:
        bench.prepare(ctx, params)
    prepare_s = time.monotonic() - t_prep
    if use_store and store is None:
        from clusterbench.store import Store

        store = Store()
    if not use_store:
        store = None
    if store is not None:
        store.check_writable()

    spec = {"v": agent_mod.PROTOCOL, "benchmark": name, "given": given, "profile": profile, "timeout": timeout,
            "kernel_timeout": timeout, "hosts": names, "node_cpus": node_cpus or {}, "sync_dir": None,
            "evidence": bool(diagnose)}
    py = python or os.environ.get("CLUSTERBENCH_REMOTE_PYTHON")
    from clusterbench.launch import nodes as nodes_mod
    from clusterbench.launch import remote

    if py is None and not nodes_mod.separate(names):
        py = sys.executable  # nodes sharing this filesystem run this very Python
    # separate machines: the python of the node's own installation (`cluster install`), else python3
    python_argv = [py] if py else ["sh", "-c", remote.AUTO_PYTHON, "cb-python"]
    # the scheduler's own launcher (srun) for nodes of the job this runs in (a slurmd runs on each,
    # the virtual cluster's included); nodes outside the job are reached with mpirun
    from clusterbench.launch import allocation

    alloc = allocation.current()
    use_srun = alloc is not None and alloc.launcher == "srun" and set(names) <= set(alloc.hosts)
    n = len(names)
    lt = launch_timeout or (sim_launch_timeout(n) if sim is not None else mpimod.LAUNCH_TIMEOUT)
    attempts = mpimod.SIM_LAUNCH_ATTEMPTS if sim is not None else 1
    progress.start(f"sweep {n} nodes", 2 * n)
    for attempt in range(attempts):
        with tempfile.TemporaryDirectory(prefix="cb-sweep-") as wd:
            sync_dir = None
            # the virtual cluster shares this filesystem and these cpus; its machines (--machines) have
            # filesystems of their own, where the agents could never see the barrier's files: no barrier
            if sim is not None and not sim.machines:
                sync_dir = os.path.join(wd, "sync")
                os.mkdir(sync_dir)
            spec["sync_dir"] = sync_dir
            program = [*python_argv, "-m", "clusterbench.sweep.agent", agent_mod.encode_spec(spec)]
            job = build_job(names, program, wd, slurm=use_srun, sim=sim, mpi=mpi, allow_root=allow_root)
            try:
                gathered, wall, _ = run_job(job, names, timeout=timeout, launch_timeout=lt, sync_dir=sync_dir,
                                            progress=progress, fillers=fillers, lost_s=lost_s)
                break
            except mpimod.LaunchHung:
                if attempt + 1 >= attempts:
                    raise
    failed = [h for h in names if gathered.nodes[h].error is not None]
    if len(failed) == len(names):  # nothing to keep: nothing is stored
        h = failed[0]
        raise KernelFailed(f"sweep node: every node failed; {h}: {gathered.nodes[h].error}"
                           + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))
    doc = build_sweep_document(name, given, profile, names, job, gathered, wall, prepare_s, sim, fillers)
    if doc["outliers"] and diagnose:
        diagnose_outliers(doc, names, {h: gathered.nodes[h].evidence for h in names})
    if store is not None:
        doc["run_id"] = _store_run(store, doc, gathered, name, profile, probe_data, ctx, sim, tags, note, argv)
        doc["store"] = store.name  # a URL's password masked
    doc["timing"]["total_s"] = time.monotonic() - t_start
    return doc


def build_sweep_document(name: str, given: dict, profile: str, hosts: list[str], job: Job, g: Gather,
                         wall: float, prepare_s: float, sim: Any, fillers: dict[int, int] | None = None) -> dict:
    reports = {h: g.nodes[h] for h in hosts}
    ok = {h: r.results for h, r in reports.items() if r.error is None}
    figs = [judge(f) for f in figures(ok)]
    out_list = []
    for f in figs:
        for node, fl in f["flags"].items():
            out_list.append({"node": node, "benchmark": f["benchmark"], "metric": f["metric"], "label": f["label"],
                             "unit": f["unit"], "higher_is_better": f["higher_is_better"], **fl, "causes": []})
    bench = {h: float(r.done.get("bench_s") or 0.0) for h, r in reports.items() if r.done}
    slowest = max(bench.values()) if bench else 0.0
    orch = max(0.0, wall - slowest)
    per_node = {h: {"rank": r.rank, "cpus": r.cpus, "ready_s": r.ready_s, "done_s": r.done_s,
                    "bench_s": bench.get(h), "results": len(r.results), "error": r.error} for h, r in reports.items()}
    notes: dict[str, list[str]] = {}
    shared = sharing_note({h: r.cpus for h, r in reports.items() if r.cpus}, fillers) if sim is not None else None
    if shared:
        notes[shared] = list(hosts)
    for h, r in reports.items():
        for text in (r.done or {}).get("notes") or []:
            notes.setdefault(text, []).append(h)
    return {
        "sweep_schema": SWEEP_SCHEMA, "kind": "node", "benchmark": name, "given": given, "profile": profile,
        "hosts": hosts, "launcher": job.launcher, "mpi": job.mpi, "command": job.command,
        "virtual_cluster": sim is not None,
        "node_cpus": {h: r.cpus for h, r in reports.items()},
        "filler_loops": {str(c): k for c, k in (fillers or {}).items()},
        "failed": {h: r.error for h, r in reports.items() if r.error is not None},
        "metrics": figs, "outliers": out_list,
        "method": outliers.METHOD,
        "threshold": {"z": outliers.Z_THRESHOLD, "min_rel": outliers.MIN_REL, "min_peers": outliers.MIN_PEERS},
        "causes": {}, "doctor": None,
        "timing": {"wall_s": wall, "bench_max_s": slowest, "orchestration_s": orch,
                   "orchestration_per_node_s": orch / len(hosts) if hosts else None, "prepare_s": prepare_s,
                   "per_node": per_node},
        "notes": [f"{t} ({', '.join(ns)})" if len(ns) < len(hosts) else t for t, ns in notes.items()],
        "run_id": None, "store": None,
    }


def diagnose_outliers(doc: dict, hosts: list[str], evidence: dict[str, dict | None]) -> None:
    """doctor's findings on the nodes, from the evidence each node's agent read where it ran (the
    sweep's own launch: no second way to reach the nodes), and the ones that may explain an outlier."""
    from clusterbench import doctor

    flagged: dict[str, set[str]] = {}
    for o in doc["outliers"]:
        flagged.setdefault(o["node"], set()).add(o["benchmark"])
    read = {h: e for h, e in evidence.items() if e and not e.get("error")}
    if not read:
        why = next((e["error"] for e in evidence.values() if e and e.get("error")), "no node sent its evidence")
        doc["doctor"] = {"ran": False, "error": why}
        return
    res = doctor.diagnose_evidence(read)
    causes = likely_causes(flagged, res.get("findings") or [], hosts)
    doc["doctor"] = {"ran": True, "error": None, "findings": len(res.get("findings") or []),
                     "cannot_tell": len(res.get("cannot_tell") or [])}
    doc["causes"] = causes
    for o in doc["outliers"]:
        rules = relevant_rules(o["benchmark"])
        o["causes"] = [c["rule"] for c in causes.get(o["node"], []) if c["rule"] in rules]


def _store_run(store: Any, doc: dict, g: Gather, name: str, profile: str, probe_data: dict, ctx: Any, sim: Any,
               tags: list[str], note: str | None, argv: Sequence[str] | None) -> str:
    from clusterbench.analysis import consistency
    from clusterbench.session import new_run_record
    from clusterbench.store.db import now_iso

    hosts = doc["hosts"]
    record = new_run_record(list(argv) if argv else ["clusterbench", "sweep", "node", "--hosts", ",".join(hosts)],
                            probe_data, profile)
    nodes = {h: {"probe": g.nodes[h].probe, "network": g.nodes[h].network}
             for h in hosts if g.nodes[h].probe is not None}
    record["cluster"] = {"hosts": hosts, "sim_cluster": sim.to_json() if sim is not None else None, "nodes": nodes,
                         "differences": consistency.diff(nodes), "sweep": {"launcher": doc["launcher"],
                                                                           "node_cpus": doc["node_cpus"]}}
    record["builds"] = dict(ctx.builds)
    record["tags"], record["note"] = tags, note
    notes = list(doc["notes"])
    for o in doc["outliers"]:
        notes.append(f"sweep node: {o['node']} flagged on {o['label']}: {o['value']:.4g} {o['unit']}, "
                     f"{abs(o['rel']):.0%} {'below' if o['rel'] < 0 else 'above'} the median {o['median']:.4g}")
    for h, e in doc["failed"].items():
        notes.append(f"sweep node: {h} failed: {e}")
    store.begin_run(record)
    status, error = ("complete", None) if not doc["failed"] else ("incomplete", f"{len(doc['failed'])} node(s) failed")
    try:
        for h in hosts:
            for r in g.nodes[h].results if g.nodes[h].error is None else []:
                store.add_result(record["id"], dataclasses.replace(
                    r, params={**(r.params or {}), "node": h}, limits=r.limits or [], warnings=r.warnings or [],
                    measured_at=None))
    except BaseException as exc:
        status, error = "incomplete", f"storing failed: {exc}"
        raise
    finally:
        store.finish_run(record["id"], status, error, [], notes, ended=now_iso())
    return str(record["id"])
