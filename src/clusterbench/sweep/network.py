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
:func:`clusterbench.analysis.outliers.flag` (modified z-score beyond 3.5 on the bad side and at least
10 % from the median, 3 or more peers):

* a **node** is slow when even its best link (highest bandwidth, lowest latency) is an outlier among
  the nodes' best links: every link it has is slow, so the node (its NIC, MTU, rate limit, CPU) is
  the common cause, not a cable; or when more than half of its links, and at least three, are
  outlier links (below; two noisy links that meet at one node are common on a few nodes);
* a **link** is slow when it is an outlier among all links, or when it is a link of a slow node.

Why not only "outliers among all links": one slow node owns n-1 of the n(n-1)/2 links, a fraction
2/n, which is half of them on 4 nodes, where the median and MAD break down (a slow half is no outlier
of itself); the nodes' best links stay a majority of healthy values as long as fewer than half the
nodes are slow. With 2 nodes there is one link and nothing to compare: no flags.

Orchestration cost: the wall time of the whole sweep (this machine's probe, each node's probe and NIC
settings, building, MPI's start and end, the barriers and gathers between rounds, storing) minus the
time spent measuring (per round the longest pair, summed over rounds and passes), in total and per node.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from clusterbench.analysis import outliers
from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.launch import process

SWEEP_SCHEMA = 1
BENCH = "allpairs"
#: a node is called slow from its outlier links only when it has at least this many (two noisy links
#: meeting at one node are common on 4 nodes, where any two links but three pairs share a node)
MIN_BAD_LINKS = 3
METRICS = (("latency", "latency_us", "us", False), ("bandwidth", "bandwidth_MBps", "MB/s", True))

RULE = ("a node is slow when even its best link is an outlier among the nodes' best links, or when more than half "
        f"of its links, and at least {MIN_BAD_LINKS}, are outlier links; a link is slow when it is an outlier among "
        "all links, or a link of a slow node; per metric (bandwidth: low is bad, latency: high is bad)")


def hosts_from_slurm(env: dict[str, str] | None = None) -> list[str] | None:
    """The nodes of the Slurm allocation this runs in ($SLURM_JOB_NODELIST expanded with
    ``scontrol show hostnames``), or None outside one."""
    env = os.environ if env is None else env
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        return None
    exe = shutil.which("scontrol")
    if exe is None:
        raise EnvironmentProblem(f"SLURM_JOB_NODELIST is set ({nodelist}) but scontrol is not on PATH to expand it",
                                 "give the nodes with --hosts or --hostfile")
    try:
        p = process.run([exe, "show", "hostnames", nodelist], timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentProblem(f"scontrol show hostnames {nodelist} failed ({exc})",
                                 "give the nodes with --hosts or --hostfile") from exc
    names = [ln.strip() for ln in p.stdout.splitlines() if ln.strip()]
    if p.returncode != 0 or not names:
        raise EnvironmentProblem(f"scontrol show hostnames {nodelist} failed: "
                                 f"{(p.stderr or p.stdout).strip() or f'exit {p.returncode}'}",
                                 "give the nodes with --hosts or --hostfile")
    return names


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
def matrices(figures: Sequence[dict]) -> dict[str, Any]:
    """From allpairs figures (result dicts): the nodes in rank order, the per-pair table and the n x n
    matrices (``None`` on the diagonal and where a pair is missing)."""
    names: dict[int, str] = {}
    pairs: dict[tuple[int, int], dict] = {}
    for f in figures:
        prm = f["params"]
        a, b = (int(x) for x in prm["ranks"])
        na, nb = prm["nodes"]
        names[a], names[b] = na, nb
        row = pairs.setdefault((a, b), {"pair": prm["pair"], "nodes": [na, nb], "ranks": [a, b],
                                        "round": prm.get("round"), "seconds": prm.get("pair_seconds"),
                                        "pass_seconds": prm.get("pass_seconds") or [prm.get("pair_seconds")]})
        for metric, key, _unit, _hib in METRICS:
            if f["metric"] == metric:
                row[key] = f["value"]
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


def flag_network(nodes: Sequence[str], pairs: Sequence[dict]) -> dict[str, Any]:
    """Slow links and slow nodes per metric (the rule in the module docstring). ``pairs``: dicts with
    ``pair``, ``nodes`` [a, b] and the metric keys. Returns ``{"links": [...], "nodes": [...]}``, one
    entry per (link or node, metric) with the value, the median it was judged against, ``rel``, ``z``
    and ``why``."""
    link_flags: list[dict] = []
    node_flags: list[dict] = []
    for metric, key, unit, hib in METRICS:
        vals = {p["pair"]: float(p[key]) for p in pairs if p.get(key) is not None}
        ends = {p["pair"]: tuple(p["nodes"]) for p in pairs if p.get(key) is not None}
        outlier_links = outliers.flag(vals, hib)
        best: dict[str, tuple[float, str]] = {}  # node -> (its best value, that link)
        for name, v in vals.items():
            for nd in ends[name]:
                if nd not in best or (v > best[nd][0] if hib else v < best[nd][0]):
                    best[nd] = (v, name)
        slow_best = outliers.flag({nd: v for nd, (v, _) in best.items()}, hib)
        slow: dict[str, dict] = {}
        for nd in nodes:
            mine = [name for name, e in ends.items() if nd in e]
            bad = [name for name in mine if name in outlier_links]
            if nd in slow_best:
                f = slow_best[nd]
                slow[nd] = {**f, "why": f"even its best link ({best[nd][1]}, {_num(f['value'])} {unit}) is "
                                        f"{abs(f['rel']):.0%} {'below' if hib else 'above'} the nodes' best links' "
                                        f"median ({_num(f['median'])} {unit})"}
            elif len(bad) >= MIN_BAD_LINKS and len(bad) * 2 > len(mine):
                rels = [outlier_links[b]["rel"] for b in bad]
                slow[nd] = {"value": statistics.median(vals[b] for b in mine),
                            "median": statistics.median(vals.values()), "rel": statistics.median(rels), "z": None,
                            "why": f"{len(bad)} of its {len(mine)} links are outliers among all links"}
            if nd in slow:
                slow[nd].update(links_flagged=len(bad), links=len(mine))
        for nd, f in slow.items():
            node_flags.append({"node": nd, "metric": metric, "unit": unit, **_clean(f)})
        for name, v in vals.items():
            culprits = [nd for nd in ends[name] if nd in slow]
            if name in outlier_links:
                f = outlier_links[name]
                why = (f"{abs(f['rel']):.0%} {'below' if hib else 'above'} the median of all links "
                       f"({_num(f['median'])} {unit})")
                if culprits:
                    why += f"; a link of slow node {', '.join(culprits)}"
                link_flags.append({"pair": name, "nodes": list(ends[name]), "metric": metric, "unit": unit,
                                   **_clean(f), "why": why})
            elif culprits:
                med = statistics.median(vals.values())
                link_flags.append({"pair": name, "nodes": list(ends[name]), "metric": metric, "unit": unit,
                                   "value": v, "median": med, "rel": (v - med) / abs(med) if med else None,
                                   "z": None, "why": f"a link of slow node {', '.join(culprits)}"})
    return {"links": link_flags, "nodes": node_flags}


def _clean(f: dict) -> dict:
    return {k: f.get(k) for k in ("value", "median", "rel", "z", "why", "links_flagged", "links") if k in f}


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def method_text(params: dict[str, Any]) -> str:
    return ("round-robin schedule (circle method): each node in one pair at a time, n-1 rounds for even n, n for "
            f"odd n (one node idle per round), the pairs of a round measured at once; per pair within "
            f"{params.get('pair_budget_s', '?')} s: latency = median half round trip of a ping-pong at "
            f"{params.get('lat_size', 8)} B; bandwidth = size / half round trip of the best timed loop at "
            f"{params.get('bw_size', 4 << 20)} B (MB = 1e6 B/s)"
            + (f"; the tournament run {params['passes']} times, each pair's best pass kept"
               if (params.get("passes") or 1) > 1 else "")
            + f"; outliers: {outliers.METHOD}; {RULE}")


# -- the sweep ---------------------------------------------------------------------------------
def sweep_network(hosts: Sequence[str] | None, *, pair_budget: float | None = None, bw_size: int | None = None,
                  passes: int | None = None,
                  lat_size: int | None = None, mpi: str | None = None, transport: str | None = None,
                  allow_root: bool = False, oversubscribe: bool = False, timeout: float | None = None,
                  store: Any = None, use_store: bool = True, tags: Sequence[str] = (), note: str | None = None,
                  argv: Sequence[str] | None = None, probe_data: dict | None = None,
                  progress: Any = None) -> dict[str, Any]:
    """Run the all-pairs benchmark across ``hosts`` (two or more) through the session (stored unless
    ``use_store`` is False) and return the sweep document (``sweep_schema: 1``): nodes, the
    latency and bandwidth matrices, every pair, the flags, the method, the run id and the
    orchestration cost. Bad input (fewer than two nodes, an unknown host) raises before anything is
    stored."""
    from clusterbench import session
    from clusterbench.benchmarks.mpi.allpairs import round_robin

    t0 = time.monotonic()
    names = check_hosts(hosts)
    given: dict[str, Any] = {"hosts": ",".join(names), "allow_root": bool(allow_root) or None}
    for k, v in (("pair_budget", pair_budget), ("bw_size", bw_size), ("lat_size", lat_size), ("passes", passes),
                 ("mpi", mpi),
                 ("transport", transport)):
        if v is not None:
            given[k] = v
    given = {k: v for k, v in given.items() if v is not None}
    report = session.run([BENCH], {BENCH: given}, store=store, use_store=use_store, argv=argv, timeout=timeout,
                         oversubscribe=oversubscribe, progress=progress, probe_data=probe_data, tags=tags, note=note)
    wall = time.monotonic() - t0
    figures = [r.as_json() for r in report.results if r.benchmark == BENCH]
    m = matrices(figures)
    flags = flag_network(m["nodes"], m["pairs"])
    rounds: dict[tuple[int, int], float] = {}  # (pass, round) -> its longest pair
    for p in m["pairs"]:
        r = int(p.get("round") or 0)
        for q, sec in enumerate(p.get("pass_seconds") or []):
            rounds[(q, r)] = max(rounds.get((q, r), 0.0), float(sec or 0.0))
    measured = sum(rounds.values())
    first = figures[0]["params"] if figures else {}
    lat = next((f["params"] for f in figures if f["metric"] == "latency"), {})
    bw = next((f["params"] for f in figures if f["metric"] == "bandwidth"), {})
    n = len(m["nodes"])
    params = {"pair_budget_s": first.get("pair_budget_s"), "passes": first.get("passes", 1),
              "lat_size": lat.get("size_bytes"),
              "bw_size": bw.get("size_bytes"), "transport": first.get("transport"),
              "transport_used": first.get("transport_used"), "mpi": first.get("mpi"),
              "cpus_per_round": first.get("cpus_per_round"), "oversubscribed": bool(first.get("shared_cpus"))}
    sched = round_robin(n)
    return {
        "sweep_schema": SWEEP_SCHEMA, "sweep": "network", "run_id": report.run["id"],
        "stored": bool(use_store), "status": report.run.get("status"),
        "hosts": names, "nodes": m["nodes"],
        "schedule": {"method": "round-robin (circle method)", "rounds": len(sched),
                     "pairs": sum(len(r) for r in sched),
                     "by_round": [[f"{m['nodes'][a]}-{m['nodes'][b]}" for a, b in r] for r in sched] if n else []},
        "params": params,
        "matrices": m["matrices"], "units": {"latency_us": "us", "bandwidth_MBps": "MB/s"},
        "pairs": m["pairs"], "flags": flags,
        "slow_nodes": sorted({f["node"] for f in flags["nodes"]}, key=m["nodes"].index),
        "slow_links": list(dict.fromkeys(f["pair"] for f in flags["links"])),
        "rule": RULE, "method": method_text(params),
        "orchestration": {"wall_s": wall, "measured_s": measured, "seconds": wall - measured,
                          "per_node_s": (wall - measured) / n if n else None, "nodes": n,
                          "definition": "wall time of the whole sweep minus the time measuring (per round the "
                                        "longest pair, summed over rounds and passes)"},
        "notes": list(report.run.get("notes") or []),
        "warnings": list(report.run.get("warnings") or []),
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
    lines = [f"sweep network: {n} nodes, {sch['pairs']} pairs in {sch['rounds']} rounds"
             + (f" x {passes} passes (best kept)" if passes > 1 else "")
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
    lines.append(f"rule: {doc['rule']}; outliers: {outliers.METHOD}")
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
