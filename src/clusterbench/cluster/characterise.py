"""``run cluster`` (also ``cluster run``): the whole cluster characterised in one command, within a
time budget; the cluster's counterpart of ``./bootstrap.sh characterise``.

Stages, in order, each with a share of the budget (:data:`SHARES`; what a stage leaves unused goes
to the next):

1. ``preflight`` (:func:`clusterbench.cluster.preflight.preflight`): a cluster that is not ready
   stops here with its problems (:class:`NotReady`), nothing stored;
2. ``node``: the quick node profile on every node at once (:func:`clusterbench.sweep.node.sweep_node`),
   outlier nodes flagged (one stored run);
3. ``network``: the all-pairs latency/bandwidth matrix (:func:`clusterbench.sweep.network.sweep_network`),
   slow links and nodes flagged (one stored run);
4. ``hpl``: HPL across all nodes (``session.run(["hpl"])``, one stored run), optionally after a short
   tune of NB and grid (:func:`clusterbench.tuning.hpl.tune`, ``tune_share`` of HPL's time; its trials
   are stored runs too). N is the smaller of: ``mem`` of the smallest node's free memory (per node,
   or once when the nodes share this machine's memory), and the N whose 2/3 N^3 flops take the time
   left for HPL at :data:`HPL_EFFICIENCY` of the node profile's measured DGEMM rate of the slowest
   node times the nodes (:func:`choose_n`), so a small budget gives a small N;
5. ``doctor``: :func:`clusterbench.doctor.diagnose` of the hosts; its findings per node.

Every stored run carries the one tag (``cluster-YYYYmmdd-HHMM`` unless given), so ``report TAG``
renders them and ``compare TAG1 TAG2`` compares two characterisations.

Each stage's timeout bounds it but leaves the launch its time on a slow machine; what the stage
measures shrinks to fit (:mod:`clusterbench.cluster.fit`: parts of the node profile left out, less
time per pair of the network matrix, a smaller N for HPL). A stage that still cannot finish (it
times out, a node is lost, the budget left is too small) is reported as not done, with its reason
and fix (``stages[STAGE]`` ``{"done": false, "reason", "fix"}``, ``missing``); the later stages still
run, the runs stored are kept, and the summary says what is missing (the command then exits non-zero,
with one line per stage not done: :func:`clusterbench.cluster.fit.missing_lines`). Ctrl-C ends the
command with one line naming the stage (a KeyboardInterrupt whose message names it); the runs
already stored are complete runs and are kept.
"""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any

from clusterbench.errors import ClusterbenchError, UsageError
from clusterbench.units import clock_duration

RUN_CLUSTER_SCHEMA = 1
DEFAULT_BUDGET = "15m"
STAGES = ("preflight", "node", "network", "hpl", "doctor")
#: each stage's share of the budget (what a stage leaves unused goes to the later ones)
SHARES = {"preflight": 0.06, "node": 0.22, "network": 0.14, "hpl": 0.50, "doctor": 0.08}
#: fraction of the node profile's DGEMM rate (slowest node x nodes) HPL is assumed to reach across
#: the nodes, when the time left chooses N (small N over TCP: well below DGEMM's rate; erring low
#: keeps the budget)
HPL_EFFICIENCY = 0.25
#: seconds of an HPL run besides its factorisation: launch, kernel staging, matrix generation, check
HPL_OVERHEAD_S = 10.0
#: the smallest N worth running (below it HPL measures its own start, not the cluster)
MIN_N = 1000
#: fraction of the smallest node's free memory the matrix may take (HPL's 0.8)
MEM_FRACTION = 0.8


class NotReady(ClusterbenchError):
    """Preflight found problems; ``doc`` is its report (each problem one line)."""

    exit_code = 3

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        super().__init__(f"run cluster: preflight found {len(doc['problems'])} problem(s); nothing was run or stored",
                         "fix them and rerun (clusterbench cluster preflight shows them)")


class StageFailed(ClusterbenchError):
    """A stage failed after others stored their runs (kept: ``run_ids``)."""

    def __init__(self, stage: str, cause: ClusterbenchError, run_ids: Sequence[str]) -> None:
        self.stage, self.cause, self.run_ids = stage, cause, list(run_ids)
        self.exit_code = cause.exit_code
        kept = f"; kept {len(run_ids)} complete run(s): {', '.join(r[:8] for r in run_ids)}" if run_ids else \
            "; nothing was stored"
        super().__init__(f"run cluster: stage {stage} failed: {cause.problem}{kept}", cause.fix)


# --------------------------------------------------------------------------- pure parts

def split_budget(budget_s: float, tune_share: float = 0.0) -> dict[str, float]:
    """Seconds per stage for a budget of ``budget_s``: :data:`SHARES` of it; with ``tune_share`` > 0
    that part of HPL's seconds goes to a ``tune`` stage before HPL."""
    if not budget_s > 0:
        raise UsageError(f"--budget {budget_s:g} s is not allowed", "give a positive duration, e.g. --budget 15m")
    if not 0 <= tune_share < 1:
        raise UsageError(f"--tune-share {tune_share:g} is not a fraction below 1", "give e.g. 0.3, or 0 for no tune")
    out = {s: budget_s * SHARES[s] for s in STAGES}
    if tune_share > 0:
        out["tune"] = out["hpl"] * tune_share
        out["hpl"] -= out["tune"]
    return out


def hpl_seconds(n: int, rate_gflops: float) -> float:
    """Expected seconds of an HPL run of order ``n`` at :data:`HPL_EFFICIENCY` of ``rate_gflops``."""
    from clusterbench.benchmarks.hpl.sizing import hpl_flops

    return HPL_OVERHEAD_S + hpl_flops(n) / (HPL_EFFICIENCY * rate_gflops * 1e9)


def choose_n(seconds: float, rate_gflops: float, mem_bytes: float | None, *, nb: int, ranks: int, p: int,
             mem: float = MEM_FRACTION) -> dict[str, Any]:
    """N for HPL in ``seconds`` at ``rate_gflops`` (the cluster's measured rate: slowest node x nodes)
    within ``mem`` of ``mem_bytes`` (all the matrix may use): the smaller of the two, a multiple of
    ``nb``. Raises UsageError when even :data:`MIN_N` does not fit the time."""
    from clusterbench.benchmarks.hpl.sizing import default_n

    if not rate_gflops > 0:
        raise UsageError("no measured rate to size HPL from", "rerun; the node profile gave no DGEMM figure")
    work = max(0.0, seconds - HPL_OVERHEAD_S) * HPL_EFFICIENCY * rate_gflops * 1e9
    n_time = int((1.5 * work) ** (1 / 3)) if work > 0 else 0
    n_mem = default_n(mem_bytes, nb, ranks, p, mem) if mem_bytes else None
    n = n_time if n_mem is None else min(n_time, n_mem)
    n = n // nb * nb
    if n < MIN_N:
        need = hpl_seconds(MIN_N, rate_gflops)
        raise UsageError(f"{seconds:.0f} s left for HPL give N={n}, below {MIN_N}, at {rate_gflops:.3g} Gflop/s "
                         f"(N={MIN_N} needs about {need:.0f} s)", "give a larger --budget")
    return {"n": n, "n_time": n_time, "n_mem": n_mem, "bound": "time" if n_mem is None or n_time <= n_mem else "memory",
            "seconds": seconds, "rate_gflops": rate_gflops, "efficiency": HPL_EFFICIENCY, "mem_fraction": mem,
            "mem_bytes": mem_bytes, "expected_s": hpl_seconds(n, rate_gflops)}


def default_tag(now: float | None = None) -> str:
    return time.strftime("cluster-%Y%m%d-%H%M", time.localtime(now))


def node_rate(node_doc: dict[str, Any]) -> tuple[float | None, str]:
    """(Gflop/s of the slowest node, what it is) from a node sweep document: DGEMM's rate, else peak's."""
    for bench, metric in (("dgemm", "gflops"), ("peak", "gflops")):
        for f in node_doc.get("metrics") or []:
            if f["benchmark"] == bench and f["metric"] == metric and f["values"]:
                low = min(f["values"], key=f["values"].get)
                return float(f["values"][low]), f"{f['label']} of the slowest node ({low})"
    return None, "no DGEMM or peak figure"


# --------------------------------------------------------------------------- the run

def _remote_python(pre: dict[str, Any], hosts: Sequence[str]) -> str | None:
    """The installed clusterbench's python on separate machines (``cluster install``'s venv in the
    nodes' home, the same path on all), or None (nodes sharing this filesystem run this Python)."""
    from clusterbench.cluster.install import VENV
    from clusterbench.launch import nodes

    if not nodes.separate(hosts):
        return None
    homes = {((pre["nodes"].get(h) or {}).get("facts") or {}).get("home") for h in hosts}
    if len(homes) != 1 or None in homes:
        return None
    return os.path.join(homes.pop(), VENV, "bin", "python")


def _shares_memory(hosts: Sequence[str]) -> bool:
    """The virtual cluster's nodes all take their memory from this machine."""
    from clusterbench.benchmarks.mpi.common import sim_cluster_of
    from clusterbench.launch import mpi as mpimod

    return sim_cluster_of([mpimod.Host(h, 1) for h in hosts]) is not None


def characterise(hosts: Sequence[Any], *, budget_s: float, tag: str | None = None, oversubscribe: bool = False,
                 allow_root: bool = False, tune_share: float = 0.0, remote_python: str | None = None,
                 store: Any = None, argv: Sequence[str] | None = None,
                 say: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Run the stages (module docstring) on ``hosts`` (:class:`~clusterbench.launch.mpi.hosts.Host`
    list) within ``budget_s`` seconds; returns the ``--json`` document (``run_cluster_schema`` 1)."""
    from clusterbench import doctor
    from clusterbench.cluster import fit
    from clusterbench.cluster.preflight import preflight
    from clusterbench.probe import probe as do_probe
    from clusterbench.store import Store
    from clusterbench.store.names import check_tag
    from clusterbench.sweep import network as sweep_network
    from clusterbench.sweep import node as sweep_node

    names = [h.name for h in hosts]
    if len(names) < 2:
        raise UsageError("run cluster needs two or more nodes", "give --hostfile FILE or --hosts A,B")
    tag = check_tag(tag or default_tag())
    plan = split_budget(budget_s, tune_share)
    order = [s for s in ("preflight", "node", "network", "tune", "hpl", "doctor") if s in plan]
    t0 = time.monotonic()
    store = store if store is not None else Store()
    argv = list(argv or ["clusterbench", "run", "cluster", "--hosts", ",".join(names)])
    doc: dict[str, Any] = {"run_cluster_schema": RUN_CLUSTER_SCHEMA, "tag": tag, "hosts": names,
                           "budget_s": budget_s, "plan_s": plan, "stages": {}, "run_ids": [], "ok": False}

    def left() -> float:
        return budget_s - (time.monotonic() - t0)

    def allot(stage: str) -> float:
        """This stage's seconds: the budget left less the later stages' shares (its share, plus what
        earlier stages left or less what they took over theirs), never more than the budget left."""
        later = sum(plan[s] for s in order[order.index(stage) + 1:])
        return max(0.0, left() - later)

    virtual = _shares_memory(names)  # the virtual cluster: launches and cpus of this one machine
    slow = fit.slowdown()
    launch_s = fit.launch_allowance(len(names), virtual=virtual)
    doc["slowdown"] = slow

    def bounded(stage: str, sec: float, launch: float = launch_s) -> float:
        """The stage's timeout (:func:`fit.stage_timeout`); a budget too short for even that is the
        stage's reason for not being done."""
        t = fit.stage_timeout(stage, sec, launch, slow)
        if t > left():
            raise UsageError(f"{max(0.0, left()):.0f} s of the budget left, and {stage} needs at least {t:.0f} s "
                             f"here (the launch {launch:.0f} s, at {slow:.1f}x this machine's idle speed)",
                             "give a larger --budget")
        return t

    def not_done(stage: str, exc: ClusterbenchError, since: float) -> None:
        doc["stages"][stage] = {"done": False, "reason": exc.problem, "fix": exc.fix,
                                "exit_code": exc.exit_code, "seconds": time.monotonic() - since}
        say(f"[{stage}] not done: {exc.problem}")

    def begin(stage: str) -> float:
        sec = allot(stage)
        say(f"[{order.index(stage) + 1}/{len(order)} {stage}] {clock_duration(sec)} for this stage, "
            f"{clock_duration(left())} of the {clock_duration(budget_s)} budget left")
        return sec

    stage = "preflight"
    stage_t = t0
    try:
        # 1. preflight: nothing is stored before the cluster is ready
        begin(stage)
        pre = preflight(hosts, mpi=True, allow_root=allow_root)
        doc["stages"]["preflight"] = {"ok": pre["ok"], "problems": pre["problems"], "seconds": pre["seconds"]}
        if not pre["ok"]:
            raise NotReady(pre)
        py = remote_python or _remote_python(pre, names)
        probe_data = do_probe()

        # 2. the quick node profile on every node at once, its parts fitting the stage's time
        stage, stage_t = "node", time.monotonic()
        sec = begin(stage)
        nd: dict[str, Any] = {}
        try:
            timeout = bounded(stage, sec)
            share = max(1.0, len(names) / (os.cpu_count() or 1)) if virtual else 1.0
            skip = fit.node_skip(fit.node_estimates(probe_data), fit.work_seconds(stage, timeout, launch_s,
                                                                                   slow * share))
            nd = sweep_node.sweep_node(names, None, given={"skip": list(skip)} if skip else None, profile="quick",
                                       allow_root=allow_root, timeout=timeout, store=store, python=py, tags=[tag],
                                       argv=argv, probe_data=probe_data, oversubscribe=oversubscribe)
            doc["run_ids"].append(nd["run_id"])
            doc["stages"]["node"] = {**_node_summary(nd, time.monotonic() - stage_t), "done": True,
                                     "timeout_s": timeout, "skipped": list(skip)}
        except ClusterbenchError as exc:
            not_done(stage, exc, stage_t)

        # 3. the network matrix, each pair measured for what the stage's time allows
        stage, stage_t = "network", time.monotonic()
        sec = begin(stage)
        try:
            net_launch = max(launch_s, fit.ALLPAIRS_LAUNCH_S)
            timeout = bounded(stage, sec, net_launch)
            pb = fit.pair_budget(len(names), fit.work_seconds(stage, timeout, net_launch, slow))
            timeout = fit.network_timeout(len(names), timeout, pb)
            nw = sweep_network.sweep_network(names, pair_budget=pb, allow_root=allow_root,
                                             oversubscribe=oversubscribe, timeout=timeout, store=store, tags=[tag],
                                             argv=argv, probe_data=probe_data)
            doc["run_ids"].append(nw["run_id"])
            doc["stages"]["network"] = {**_network_summary(nw, time.monotonic() - stage_t), "done": True,
                                        "timeout_s": timeout, "pair_budget_s": pb}
        except ClusterbenchError as exc:
            not_done(stage, exc, stage_t)

        # 4. HPL across all nodes, N from the time left and the smallest node's memory
        rate_node, rate_from = node_rate(nd)
        if rate_node is None:
            rp = ((probe_data.get("rpeak") or {}).get("per_core") or {}).get("dp_gflops_nominal") or 10.0
            rate_node, rate_from = 0.4 * rp, "0.4 x this machine's Rpeak per core (no node figure)"
        rate = rate_node * len(names)
        mems = [((pre["nodes"][h].get("facts") or {}).get("mem_available")) for h in names]
        low = min(m for m in mems if m) if all(mems) else None
        mem_bytes = None if low is None else float(low) * (1 if virtual else len(names))
        base = {"hosts": ",".join(f"{h.name}:{h.slots}" for h in hosts), "allow_root": allow_root or None}
        ranks = sum(h.slots for h in hosts)
        from clusterbench.benchmarks.hpl.sizing import choose_grid, default_nb
        nb = default_nb(probe_data)
        grid_p = choose_grid(None, ranks)[0]
        given: dict[str, Any] = {}
        if "tune" in plan:
            stage, stage_t = "tune", time.monotonic()
            sec = begin(stage)
            try:
                doc["stages"]["tune"] = {**_tune(sec, rate, mem_bytes, nb, ranks, grid_p, base, store, probe_data,
                                                 oversubscribe, argv, tag, doc), "done": True}
                best = doc["stages"]["tune"].get("best") or {}
                given.update({k: best[k] for k in ("nb", "grid") if best.get(k)})
                nb = int(given.get("nb") or nb)
            except ClusterbenchError as exc:
                not_done(stage, exc, stage_t)
        stage, stage_t = "hpl", time.monotonic()
        sec = begin(stage)
        try:
            # HPL's own start (launch, staging, generation) takes longer on a slow machine: N fits what is left
            sizing = choose_n(max(0.0, sec - (slow - 1.0) * HPL_OVERHEAD_S), rate, mem_bytes, nb=nb, ranks=ranks,
                              p=grid_p)
            given.update(base, n=sizing["n"], nb=nb)
            given = {k: v for k, v in given.items() if v is not None}
            say(f"[hpl] N={sizing['n']} ({sizing['bound']}-bound: {sec:.0f} s at {HPL_EFFICIENCY:.0%} of "
                f"{rate:.3g} Gflop/s, {rate_from} x {len(names)}), expected {sizing['expected_s']:.0f} s")
            from clusterbench import session
            rep = session.run(["hpl"], {"hpl": given}, store=store, argv=argv, timeout=max(sec, 60.0, launch_s + 30),
                              oversubscribe=oversubscribe, probe_data=probe_data, tags=[tag])
            doc["run_ids"].append(rep.run.id)
            doc["stages"]["hpl"] = {**_hpl_summary(rep, sizing, rate_from, time.monotonic() - stage_t), "done": True}
        except ClusterbenchError as exc:
            not_done(stage, exc, stage_t)

        # 5. doctor's findings per node
        stage, stage_t = "doctor", time.monotonic()
        sec = begin(stage)
        try:
            dx = doctor.diagnose(names, timeout=max(10.0, sec), python=py)
            doc["stages"]["doctor"] = {**_doctor_summary(dx, names, time.monotonic() - stage_t), "done": True}
        except ClusterbenchError as exc:
            not_done(stage, exc, stage_t)
    except NotReady:
        raise
    except ClusterbenchError as exc:
        raise StageFailed(stage, exc, doc["run_ids"]) from exc
    except KeyboardInterrupt as exc:
        from clusterbench.session import Interrupted

        kept = f"; kept {len(doc['run_ids'])} complete run(s) tagged {tag}" if doc["run_ids"] else ""
        raise Interrupted(f"run cluster: stage {stage}: {str(exc) or 'Ctrl-C'}{kept}",
                          getattr(exc, "signum", signal.SIGINT)) from exc
    doc["seconds"] = time.monotonic() - t0
    doc["within_budget"] = doc["seconds"] <= budget_s
    doc["missing"] = [s for s in order if (doc["stages"].get(s) or {}).get("done") is False]
    doc["ok"] = not doc["missing"]
    doc["holds_back"] = holds_back(doc)
    return doc


def _tune(sec: float, rate: float, mem_bytes: float | None, nb: int, ranks: int, p: int, base: dict,
          store: Any, probe_data: dict, oversubscribe: bool, argv: Sequence[str], tag: str,
          doc: dict[str, Any]) -> dict[str, Any]:
    """A short tune of NB and grid (the tuner's own stages, stopped before confirmation) at an N that
    fits a tenth of the tune's seconds."""
    from clusterbench.tuning import hpl as tuner

    t = time.monotonic()
    n = choose_n(max(HPL_OVERHEAD_S + 1, sec / 10), rate, mem_bytes, nb=nb, ranks=ranks, p=p)["n"]
    rep = tuner.tune(tuner.Space(nbs=(64, 128, 192, 256), topologies=["pure"]), n, sec, store, probe_data,
                     base={k: v for k, v in base.items() if v is not None}, oversubscribe=oversubscribe,
                     argv=argv, stop_after=1, tags=[tag], timeout=sec, resume=False)
    best = rep.best_params()
    ids = [tr.run_id for tr in rep.trials if tr.run_id]
    doc["run_ids"].extend(i for i in dict.fromkeys(ids) if i not in doc["run_ids"])
    return {"n": n, "best": {k: best[k] for k in ("nb", "grid") if k in best} if best else None,
            "trials": len(rep.trials), "seconds": time.monotonic() - t}


def _node_summary(nd: dict[str, Any], seconds: float) -> dict[str, Any]:
    flagged: dict[str, list[str]] = {}
    for o in nd["outliers"]:
        flagged.setdefault(o["node"], []).append(o["label"])
    verdict = ("outlier nodes: " + ", ".join(f"{n} ({len(v)} figure{'s' if len(v) > 1 else ''})"
                                             for n, v in flagged.items())) if flagged else "no outlier node"
    if nd["failed"]:
        verdict += "; failed: " + ", ".join(nd["failed"])
    return {"run_id": nd["run_id"], "verdict": verdict, "outlier_nodes": flagged, "failed": nd["failed"],
            "figures": len(nd["metrics"]), "causes": {n: [c["rule"] for c in cs] for n, cs in nd["causes"].items()},
            "seconds": seconds}


def _network_summary(nw: dict[str, Any], seconds: float) -> dict[str, Any]:
    verdict = ", ".join(filter(None, [f"slow nodes: {', '.join(nw['slow_nodes'])}" if nw["slow_nodes"] else None,
                                      f"slow links: {', '.join(nw['slow_links'])}" if nw["slow_links"] else None])) \
        or "no slow link or node"
    med = {}
    for metric, key, unit, _ in __import__("clusterbench.sweep.network", fromlist=["METRICS"]).METRICS:
        vals = [p[key] for p in nw["pairs"] if p.get(key) is not None]
        med[metric] = {"median": sorted(vals)[len(vals) // 2] if vals else None, "unit": unit}
    return {"run_id": nw["run_id"], "verdict": verdict, "slow_nodes": nw["slow_nodes"], "slow_links": nw["slow_links"],
            "median": med, "seconds": seconds}


def _hpl_summary(rep: Any, sizing: dict[str, Any], rate_from: str, seconds: float) -> dict[str, Any]:
    rmax = next((r for r in rep.results if r.metric == "rmax"), None)
    out: dict[str, Any] = {"run_id": rep.run.id, "sizing": {**sizing, "rate_from": rate_from}, "seconds": seconds}
    if rmax is None:
        return {**out, "verdict": "no Rmax"}
    lim = {x["name"]: x for x in rmax.limits or []}
    rpeak = (lim.get("rpeak") or {}).get("value")
    prm = rmax.params
    out.update(rmax_gflops=rmax.value, rpeak_gflops=rpeak,
               rmax_over_rpeak=(rmax.value / rpeak) if rpeak else None, n=prm.get("n"), nb=prm.get("nb"),
               grid=prm.get("grid"), time_s=prm.get("time_s"), shared_cpus=prm.get("shared_cpus"),
               rpeak_of=(lim.get("rpeak") or {}).get("description"))
    out["verdict"] = f"Rmax {rmax.value:.3g} Gflop/s" + (
        f" = {100 * out['rmax_over_rpeak']:.1f}% of Rpeak {rpeak:.4g} Gflop/s" if rpeak else " (Rpeak unknown)")
    return out


def _doctor_summary(dx: dict[str, Any], names: Sequence[str], seconds: float) -> dict[str, Any]:
    per: dict[str, list[dict[str, str]]] = {h: [] for h in names}
    for f in dx.get("findings") or []:
        per.setdefault(f["node"], []).append({"rule": f["rule"], "severity": f["severity"], "title": f["title"],
                                              "summary": f["summary"]})
    n = sum(len(v) for v in per.values())
    return {"verdict": f"{n} finding{'s' if n != 1 else ''} on {sum(1 for v in per.values() if v)} node(s)",
            "findings": per, "cannot_tell": len(dx.get("cannot_tell") or []), "seconds": seconds}


def holds_back(doc: dict[str, Any]) -> list[str]:
    """What holds the cluster back, most telling first: slow nodes and links, outlier nodes with their
    doctor findings, and how far HPL is from Rpeak."""
    st = doc["stages"]
    out: list[str] = []
    nw, nd, hp, dx = st.get("network") or {}, st.get("node") or {}, st.get("hpl") or {}, st.get("doctor") or {}
    for n in nw.get("slow_nodes") or []:
        out.append(f"slow node {n} on the network (all its links)")
    for link in nw.get("slow_links") or []:
        out.append(f"slow link {link}")
    for n, labels in (nd.get("outlier_nodes") or {}).items():
        out.append(f"node {n} is an outlier on {len(labels)} figure(s), e.g. {labels[0]}")
    same: dict[tuple[str, str, str], list[str]] = {}  # a finding on several nodes is said once
    for n, fs in (dx.get("findings") or {}).items():
        for f in fs:
            same.setdefault((f["severity"], f["title"], f["rule"]), []).append(n)
    for (sev, title, rule), ns in same.items():
        out.append(f"{', '.join(ns)}: [{sev}] {title} ({rule})")
    if hp.get("rmax_over_rpeak") is not None:
        out.append(f"HPL reaches {100 * hp['rmax_over_rpeak']:.1f}% of Rpeak"
                   + (" (the virtual nodes share this machine's cpus: Rpeak counts each rank's core)"
                      if hp.get("shared_cpus") else ""))
    return out


def format_summary(doc: dict[str, Any]) -> list[str]:
    """The one-screen summary."""
    st = doc["stages"]
    lines = [f"run cluster: {len(doc['hosts'])} nodes ({', '.join(doc['hosts'])}), tag {doc['tag']}, "
             f"{doc['seconds']:.0f} s of the {doc['budget_s']:.0f} s budget"
             + ("" if doc.get("within_budget", True) else " (OVER BUDGET)")]
    pre = st.get("preflight") or {}
    lines.append(f"  preflight  ready ({pre.get('seconds', 0):.1f} s)")
    for key, name in (("node", "node"), ("network", "network"), ("tune", "tune"), ("hpl", "hpl"), ("doctor", "doctor")):
        s = st.get(key)
        if not s:
            continue
        run = f", run {s['run_id'][:8]}" if s.get("run_id") else ""
        if s.get("done") is False:
            lines.append(f"  {name:<9}  NOT DONE: {s['reason']} ({s['seconds']:.0f} s)")
            continue
        if s.get("skipped"):
            run += f"; left out to fit its time: {', '.join(s['skipped'])}"
        if key == "tune":
            b = s.get("best") or {}
            text = (f"best NB {b.get('nb', '-')}, grid {b.get('grid', '-')}" if b else "no best") \
                + f" of {s['trials']} trial(s) at N={s['n']}"
        else:
            text = s["verdict"]
        lines.append(f"  {name:<9}  {text} ({s['seconds']:.0f} s{run})")
        if key == "network":
            m = s["median"]
            lines.append(f"             median link: latency {m['latency']['median'] or 0:.3g} us, bandwidth "
                         f"{m['bandwidth']['median'] or 0:.4g} MB/s")
        if key == "hpl" and s.get("n"):
            z = s["sizing"]
            lines.append(f"             N={s['n']} NB={s['nb']} grid {s['grid']}, {s['time_s']:.1f} s; N {z['bound']}-bound "
                         f"(time: {z['n_time']}, memory: {z['n_mem'] or '-'}); {s.get('rpeak_of') or 'Rpeak unknown'}")
    missing = doc.get("missing") or []
    if missing:
        lines.append(f"missing: {', '.join(missing)} (not done, see above; the other stages' results are kept, "
                     "and what holds the cluster back is what they found)")
    hb = doc.get("holds_back") or []
    lines.append("what holds the cluster back:" if hb else "what holds the cluster back: nothing found")
    lines += [f"  - {x}" for x in hb]
    ids = [r[:8] for r in doc["run_ids"]]
    shown = ", ".join(ids) if len(ids) <= 6 else f"{len(ids)} ({', '.join(ids[:2])}, ..., {ids[-1]})"
    lines.append(f"runs tagged {doc['tag']}: {shown}  "
                 f"(clusterbench report {doc['tag']}; clusterbench compare TAG {doc['tag']})")
    return lines


def not_ready_lines(doc: dict[str, Any], hosts_arg: str | None = None) -> list[str]:
    """Preflight's problems, one line each."""
    from clusterbench.cluster.preflight import format_preflight

    return [ln for ln in format_preflight(doc, hosts_arg) if ln.startswith("problem")]


def budget_seconds(text: str | float) -> float:
    from clusterbench.tuning.hpl import parse_budget

    return parse_budget(text)


def exit_code(doc: dict[str, Any]) -> int:
    """0 when every stage was done, else the exit code of the first stage not done (its cause's)."""
    for s in doc.get("missing") or []:
        return int(doc["stages"][s].get("exit_code") or 4)
    return 0


__all__ = ["characterise", "choose_n", "split_budget", "format_summary", "NotReady", "StageFailed",
           "RUN_CLUSTER_SCHEMA", "exit_code"]
