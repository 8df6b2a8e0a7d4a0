"""``sweep network``: latency and bandwidth of every pair of nodes, as matrices, with slow links and
slow nodes flagged.

One launcher job: the ``allpairs`` benchmark (one rank per node, ``benchmarks/mpi/allpairs.py``) runs
through the normal session, so the run, every node's probe and every pair's two figures are stored
like any other run (``compare`` and ``results table allpairs --rows pair`` work on them). Its schedule
is a round-robin tournament (the circle method): each node takes part in one pair at a time, n-1
rounds for even n, n rounds for odd n with one node idle per round, all pairs of a round at once.
Per pair: latency = median half round trip at 8 B, bandwidth = the best timed loop at 4 MiB
(MB = 1e6 B/s), within a per-pair time budget.

Which links and nodes are slow, per metric (bandwidth: low is bad; latency: high is bad), with
:func:`clusterbench.analysis.links.judge` (its docstring has the rule, its thresholds and why): each
link is judged against what the cluster shows is possible, the median of the better half of the
nodes' best links, not against the median of all links (one slow node owns half the links of 4 nodes,
two own 5 of the 6, and median and MAD then see nothing); a node is slow when even its best link is
x1.5 (bandwidth) or x2 (latency) worse than that, times this machine's typical noise, by more than the
link's own spread; x1.15 for bandwidth when its NIC's MTU or stated speed is unlike the others' (from
the per-node probe stored with the run). Before that, the benchmark measures the suspects again in the
same job (``--remeasure``, 1.15: the rounds holding a pair more than x1.15 from the best pair run
again), and each link's measurements give its spread. When links spread as much as the factor to be
told, the metric is reported "too noisy to judge below xT" and only what is beyond T is flagged. With
2 nodes there is one link and nothing to compare: no flags.

``--json`` (``sweep_schema`` 2; 1 had ``median`` and ``z`` in each flag and no ``judge``): ``flags``
(``links``, ``nodes``: value, reference, factor, threshold, spread, measurements, rel, why),
``judge`` per metric (``status`` "judged" / "too noisy" / "nothing to compare", ``reference``,
``typical_spread``, ``noise_floor``, ``noise_factor`` (T), ``remeasured``, ``why``), ``evidence`` (nodes
whose NIC differs), ``nics`` (each node's NICs: name, MTU, stated speed), and per pair its
``measurements``, ``within`` (the kept measurement's own spread), ``remeasured`` and ``suspect``.

Orchestration cost: the wall time of the whole sweep (this machine's probe, each node's probe and NIC
settings, building, MPI's start and end, the barriers and gathers between rounds, storing) minus the
time spent measuring (per round the longest pair, summed over rounds and passes), in total and per node.
"""
from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from clusterbench.analysis import links as judge_links
from clusterbench.benchmarks.declare import Result
from clusterbench.errors import UsageError

SWEEP_SCHEMA = 2
BENCH = "allpairs"
METRICS = judge_links.METRICS
RULE = judge_links.RULE


def check_hosts(hosts: Sequence[str] | None) -> list[str]:
    """Two or more distinct nodes, or a one-line UsageError."""
    if not hosts:
        raise UsageError("sweep network needs the nodes", "give --hosts A,B,... or --hostfile F, or run it inside a "
                         "Slurm allocation")
    names = list(dict.fromkeys(h.split(":", 1)[0] for h in hosts))
    if len(names) < 2:
        raise UsageError(f"sweep network needs two or more distinct nodes (given: {', '.join(names)})",
                         "e.g. --hosts node1,node2,node3")
    return names


# -- pure: matrices and flags ------------------------------------------------------------------
def matrices(figures: Sequence[Result]) -> dict[str, Any]:
    """From allpairs figures: the nodes in rank order, the per-pair table and the n x n
    matrices (``None`` on the diagonal and where a pair is missing)."""
    names: dict[int, str] = {}
    pairs: dict[tuple[int, int], dict] = {}
    for f in figures:
        prm = f.params
        a, b = (int(x) for x in prm["ranks"])
        na, nb = prm["nodes"]
        names[a], names[b] = na, nb
        row = pairs.setdefault((a, b), {"pair": prm["pair"], "nodes": [na, nb], "ranks": [a, b],
                                        "round": prm.get("round"), "seconds": prm.get("pair_seconds"),
                                        "pass_seconds": prm.get("pass_seconds") or [prm.get("pair_seconds")]})
        for metric, key, _unit, _hib in METRICS:
            if f.metric == metric:
                row[key] = f.value
                row.setdefault("measurements", {})[key] = list(prm.get("measurements") or [f.value])
                # the kept measurement's own spread: median / fastest round trip, best / mean loop
                other = prm.get("min_us") if metric == "latency" else prm.get("batch_mean")
                if other and f.value:
                    row.setdefault("within", {})[key] = (f.value / other if metric == "latency"
                                                         else f.value / other)
                if prm.get("remeasured") is not None:
                    row["remeasured"], row["suspect"] = bool(prm.get("remeasured")), bool(prm.get("suspect"))
    n = max(names) + 1 if names else 0
    nodes = [names.get(i, f"rank{i}") for i in range(n)]
    mats: dict[str, list[list[float | None]]] = {}
    for _metric, key, _unit, _hib in METRICS:
        m: list[list[float | None]] = [[None] * n for _ in range(n)]
        for (a, b), row in pairs.items():
            m[a][b] = m[b][a] = row.get(key)
        mats[key] = m
    return {"nodes": nodes, "pairs": [pairs[k] for k in sorted(pairs, key=lambda k: (pairs[k]["round"] or 0, k))],
            "matrices": mats}


def flag_network(nodes: Sequence[str], pairs: Sequence[dict], nics: dict | None = None) -> dict[str, Any]:
    """Slow links and slow nodes per metric: :func:`clusterbench.analysis.links.judge` (the rule in
    its docstring). ``pairs``: dicts with ``pair``, ``nodes`` [a, b], the metric keys and
    ``measurements``; ``nics``: ``{node: [nic dicts]}`` from the run's per-node probe, or None."""
    return judge_links.judge(nodes, pairs, nics)


def nics_by_node(cluster: dict | None, hosts: Sequence[str], nodes: Sequence[str]) -> dict[str, list[dict]]:
    """The NICs of each node (rank order: the i-th host is the i-th node) from the run's ``cluster``
    record (``{"nodes": {host: {"probe", "network"}}}``); nodes without a probe are left out."""
    got = (cluster or {}).get("nodes") or {}
    out: dict[str, list[dict]] = {}
    for host, node in zip(hosts, nodes):
        data = got.get(host)
        if not isinstance(data, dict) or "error" in data:
            continue
        nics = (data.get("network") or {}).get("nics")
        if nics is None:
            nics = ((data.get("probe") or data).get("environment") or {}).get("nics")
        if nics:
            out[node] = [{k: n.get(k) for k in ("name", "mtu", "speed_mbps", "operstate")} for n in nics
                         if isinstance(n, dict)]
    return out


_num = judge_links.short_num


def method_text(params: dict[str, Any]) -> str:
    return ("round-robin schedule (circle method): each node in one pair at a time, n-1 rounds for even n, n for "
            f"odd n (one node idle per round), the pairs of a round measured at once; per pair within "
            f"{params.get('pair_budget_s', '?')} s: latency = median half round trip of a ping-pong at "
            f"{params.get('lat_size', 8)} B; bandwidth = size / half round trip of the best timed loop at "
            f"{params.get('bw_size', 4 << 20)} B (MB = 1e6 B/s)"
            + (f"; the tournament run {params['passes']} times, each pair's best pass kept"
               if (params.get("passes") or 1) > 1 else "")
            + (f"; pairs more than x{params['remeasure']:g} from the best pair measured again (the best measurement "
               "kept)" if params.get("remeasure") else "")
            + f"; {RULE}")


# -- the sweep ---------------------------------------------------------------------------------
def sweep_network(hosts: Sequence[str] | None, *, pair_budget: float | None = None, bw_size: int | None = None,
                  passes: int | None = None, remeasure: float | None = None,
                  lat_size: int | None = None, mpi: str | None = None, transport: str | None = None,
                  allow_root: bool = False, oversubscribe: bool = False, timeout: float | None = None,
                  store: Any = None, use_store: bool = True, tags: Sequence[str] = (), note: str | None = None,
                  argv: Sequence[str] | None = None, probe_data: dict | None = None,
                  progress: Any = None) -> dict[str, Any]:
    """Run the all-pairs benchmark across ``hosts`` (two or more) through the session (stored unless
    ``use_store`` is False) and return the sweep document (``sweep_schema: 2``): nodes, the
    latency and bandwidth matrices, every pair, the flags, the method, the run id and the
    orchestration cost. Bad input (fewer than two nodes, an unknown host) raises before anything is
    stored."""
    from clusterbench import session
    from clusterbench.benchmarks.mpi.allpairs import round_robin

    t0 = time.monotonic()
    names = check_hosts(hosts)
    given: dict[str, Any] = {"hosts": ",".join(names), "allow_root": bool(allow_root) or None}
    for k, v in (("pair_budget", pair_budget), ("bw_size", bw_size), ("lat_size", lat_size), ("passes", passes),
                 ("remeasure", remeasure), ("mpi", mpi),
                 ("transport", transport)):
        if v is not None:
            given[k] = v
    given = {k: v for k, v in given.items() if v is not None}
    report = session.run([BENCH], {BENCH: given}, store=store, use_store=use_store, argv=argv, timeout=timeout,
                         oversubscribe=oversubscribe, progress=progress, probe_data=probe_data, tags=tags, note=note)
    wall = time.monotonic() - t0
    figures = [r for r in report.results if r.benchmark == BENCH]
    m = matrices(figures)
    nics = nics_by_node(report.run.cluster, names, m["nodes"])
    flags = flag_network(m["nodes"], m["pairs"], nics)
    judged = {"metrics": flags.pop("metrics"), "evidence": flags.pop("evidence")}
    rounds: dict[tuple[int, int], float] = {}  # (pass, round) -> its longest pair
    for p in m["pairs"]:
        r = int(p.get("round") or 0)
        for q, sec in enumerate(p.get("pass_seconds") or []):
            rounds[(q, r)] = max(rounds.get((q, r), 0.0), float(sec or 0.0))
    measured = sum(rounds.values())
    first = figures[0].params if figures else {}
    lat = next((f.params for f in figures if f.metric == "latency"), {})
    bw = next((f.params for f in figures if f.metric == "bandwidth"), {})
    n = len(m["nodes"])
    params = {"pair_budget_s": first.get("pair_budget_s"), "passes": first.get("passes", 1),
              "remeasure": first.get("remeasure_factor"),
              "lat_size": lat.get("size_bytes"),
              "bw_size": bw.get("size_bytes"), "transport": first.get("transport"),
              "transport_used": first.get("transport_used"), "mpi": first.get("mpi"),
              "cpus_per_round": first.get("cpus_per_round"), "oversubscribed": bool(first.get("shared_cpus"))}
    sched = round_robin(n)
    return {
        "sweep_schema": SWEEP_SCHEMA, "sweep": "network", "run_id": report.run.id,
        "stored": bool(use_store), "status": report.run.status,
        "hosts": names, "nodes": m["nodes"],
        "schedule": {"method": "round-robin (circle method)", "rounds": len(sched),
                     "pairs": sum(len(r) for r in sched),
                     "by_round": [[f"{m['nodes'][a]}-{m['nodes'][b]}" for a, b in r] for r in sched] if n else []},
        "params": params,
        "matrices": m["matrices"], "units": {"latency_us": "us", "bandwidth_MBps": "MB/s"},
        "pairs": m["pairs"], "flags": flags, "judge": judged["metrics"], "evidence": judged["evidence"],
        "nics": nics,
        "slow_nodes": sorted({f["node"] for f in flags["nodes"]}, key=m["nodes"].index),
        "slow_links": list(dict.fromkeys(f["pair"] for f in flags["links"])),
        "rule": RULE, "method": method_text(params),
        "orchestration": {"wall_s": wall, "measured_s": measured, "seconds": wall - measured,
                          "per_node_s": (wall - measured) / n if n else None, "nodes": n,
                          "definition": "wall time of the whole sweep minus the time measuring (per round the "
                                        "longest pair, summed over rounds and passes)"},
        "notes": list(report.run.notes or []),
        "warnings": list(report.run.warnings or []),
    }


# -- text --------------------------------------------------------------------------------------
def _short_names(nodes: Sequence[str]) -> tuple[list[str], str]:
    """Column headers: the names less a prefix they all share (up to a '-', '.' or '_'), if that
    leaves them distinct and non-empty."""
    pre = os.path.commonprefix(list(nodes)) if len(nodes) > 1 else ""
    cut = max(pre.rfind("-"), pre.rfind("."), pre.rfind("_"))
    pre = pre[:cut + 1] if cut >= 0 else ""
    short = [n[len(pre):] for n in nodes]
    if not pre or any(not s for s in short) or len(set(short)) != len(short):
        return list(nodes), ""
    return short, pre


def format_sweep_network(doc: dict) -> list[str]:
    """The sweep as text: the two matrices (node names as row and column headers, '!' marking a slow
    link or node), the flags with their reasons, the rule and the orchestration cost."""
    nodes = doc["nodes"]
    n = len(nodes)
    sch = doc["schedule"]
    prm = doc.get("params") or {}
    passes = int(prm.get("passes") or 1)
    again = sum(1 for p in doc.get("pairs") or [] if p.get("suspect"))
    lines = [f"sweep network: {n} nodes, {sch['pairs']} pairs in {sch['rounds']} rounds"
             + (f" x {passes} passes (best kept)" if passes > 1 else "")
             + (f", {again} suspect pair(s) measured again (their rounds)" if prm.get("remeasure") else "")
             + f" (round-robin: each node in one pair at a time, the pairs of a round at once); transport "
             f"{prm.get('transport_used') or '?'}; "
             f"run {str(doc['run_id'])[:8]}" + ("" if doc.get("stored", True) else " (not stored)")]
    short, pre = _short_names(nodes)
    slow_nodes = set(doc.get("slow_nodes") or [])
    for metric, key, unit, _hib in METRICS:
        flagged = {tuple(f["nodes"]) for f in doc["flags"]["links"] if f["metric"] == metric}
        flagged |= {(b, a) for a, b in flagged}
        size = prm.get("lat_size") if metric == "latency" else prm.get("bw_size")
        what = "median half round trip" if metric == "latency" else "best loop, MB = 1e6 B/s"
        lines += ["", f"{metric} ({unit}, {_bytes(size)}, {what})" + (f"; columns without '{pre}'" if pre else "")]
        rows = [["", *short]]
        for i, a in enumerate(nodes):
            row = [a + (" !" if a in slow_nodes else "")]
            for j, b in enumerate(nodes):
                v = doc["matrices"][key][i][j]
                row.append("-" if i == j or v is None else _num(v) + ("!" if (a, b) in flagged else ""))
            rows.append(row)
        widths = [max(len(r[c]) for r in rows) for c in range(n + 1)]
        for r in rows:
            lines.append("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]).rstrip())
    lines.append("")
    for e in doc.get("evidence") or []:
        lines.append(f"NIC of {e['node']}: {e['why']}")
    for metric, _key, unit, _hib in METRICS:
        v = (doc.get("judge") or {}).get(metric)
        if not v:
            continue
        if v.get("status") == "judged":
            lines.append(f"{metric}: judged against the reference {_num(v['reference'])} {unit} "
                         f"({v['reference_why']}); " + v["why"].split("; ", 1)[-1])
        else:
            lines.append(f"{metric}: {v.get('why')}")
    if doc["flags"]["nodes"]:
        for f in doc["flags"]["nodes"]:
            lines.append(f"slow node {f['node']} ({f['metric']}): {f['why']}")
    else:
        lines.append("slow nodes: none")
    links = doc["flags"]["links"]
    if links:
        for f in links:
            lines.append(f"slow link {f['pair']} ({f['metric']} {_num(f['value'])} {f['unit']}): {f['why']}")
    else:
        lines.append("slow links: none")
    lines.append(f"rule: {doc['rule']}")
    o = doc["orchestration"]
    lines.append(f"orchestration: {o['seconds']:.1f} s of the sweep's {o['wall_s']:.1f} s outside the measured pairs "
                 f"({o['measured_s']:.1f} s measuring), {o['per_node_s']:.2f} s per node")
    for note in doc.get("notes") or []:
        lines.append(f"note: {note}")
    for w in doc.get("warnings") or []:
        lines.append(f"warning [{w['code']}]: {w['message']}; {w['remedy']}")
    return lines


def _bytes(n: Any) -> str:
    if not isinstance(n, int):
        return "? B"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"
