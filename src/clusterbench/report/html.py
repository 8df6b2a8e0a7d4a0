"""``clusterbench report``: one self-contained HTML page with plots for one or several stored runs.

:func:`write_report` reads the runs from the store, groups the trials of a ``tune hpl`` into one
source (a trial given alone brings its whole tune: the tune is the unit a user asks about), picks
the plots the data allows (:func:`clusterbench.report.plots.plan`), draws them as PNG files in
``plots/`` and writes ``index.html`` beside them: a section per plot with its caption, each
source's headline figures (benchmark, metric, value with unit, fraction of its limit) and summary,
the "Energy and cost" section (:mod:`clusterbench.report.energy`: Gflops/W with the power source, the energy
per benchmark, with a cost model the performance per price and the energy cost, and the list placement of
:mod:`clusterbench.report.placement`; without energy it says nothing is measured), and the environment of every source side by side, rows that differ marked. The page has no
JavaScript and no resource from the network (inline CSS, relative image paths): it opens offline
from the file system.

Nothing is left half-written: everything goes into a temporary folder beside the output folder
(``.NAME.tmp-PID-START-*``, named by its writer), which then takes its place; the temporary folders of a
writer that is dead (``kill -9``) are removed by the next report to that folder, a live writer's never.
The report lists what it wrote in ``.clusterbench-report.json`` (the manifest). An existing output
folder is written into only when it is empty or an earlier report (with ``force``): then only the files
its manifest lists are replaced and everything else in it is kept. A folder with other files and no
report is refused, as is a path that cannot be written (one-line :class:`UsageError` naming the path).
"""
from __future__ import annotations

import datetime as _dt
import errno
import html
import json
import os
import re
import shutil
import signal
import statistics
import tempfile
from contextlib import contextmanager
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from clusterbench.errors import UsageError
from clusterbench.report.plots import PlotSpec, Source, plan, render

#: the marker by which an earlier report folder is recognised (and may be replaced)
GENERATOR = "clusterbench report"


# -- figures as text ------------------------------------------------------------------------------
def format_value(v: Any) -> str:
    """A figure as the page prints it: thousands separated above 1000, three or four significant
    digits below."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def _key_params() -> dict[str, tuple[str, ...]]:
    try:
        from clusterbench.benchmarks import all_benchmarks

        return {name: tuple(b.key_params) for name, b in all_benchmarks().items()}
    except Exception:  # noqa: BLE001 - a benchmark module that fails to import must not cost the report
        return {}


def _params_text(r: dict, keys: Mapping[str, tuple[str, ...]]) -> str:
    p = r.get("params") or {}
    names = keys.get(r.get("benchmark") or "") or ("threads", "size_bytes", "n", "nb", "grid")
    return ", ".join(f"{k}={p[k]}" for k in names if k in p and p[k] is not None and not isinstance(p[k], (dict, list)))


def _limit_text(r: dict) -> str:
    lim = r.get("limit") or next(iter(r.get("limits") or []), None)
    if not isinstance(lim, Mapping) or not isinstance(lim.get("fraction"), (int, float)):
        return ""
    value = lim.get("value")
    return (f"{lim['fraction']:.0%} of {lim.get('description') or lim.get('name') or 'its limit'}"
            + (f" ({format_value(value)})" if isinstance(value, (int, float)) else ""))


def headline_figures(results: Iterable[dict]) -> list[dict]:
    """One row per (benchmark, metric), in the order they were measured: the best figure (by the
    metric's direction) with its identifying parameters, unit and fraction of its limit. Results of
    several pooled runs (each with its ``run_id``) also give ``runs`` (how many) and ``median``: the
    median over the runs of each run's best figure (the best of many repeats flatters)."""
    best: dict[tuple[str, str], dict] = {}
    per_run: dict[tuple[str, str], dict[str, float]] = {}
    for r in results:
        if not isinstance(r.get("value"), (int, float)) or isinstance(r.get("value"), bool):
            continue
        k = (str(r.get("benchmark")), str(r.get("metric")))
        hib = bool(r.get("higher_is_better", True))
        old = best.get(k)
        if old is None or (r["value"] != old["value"] and (r["value"] > old["value"]) == hib):
            best[k] = r
        if r.get("run_id") is not None:
            runs = per_run.setdefault(k, {})
            prev = runs.get(r["run_id"])
            runs[r["run_id"]] = r["value"] if prev is None else (max if hib else min)(prev, r["value"])
    keys = _key_params()
    out = []
    for k, r in best.items():
        row = {"benchmark": r["benchmark"], "metric": r["metric"], "params": _params_text(r, keys),
               "value": format_value(r["value"]), "unit": r.get("unit") or "", "limit": _limit_text(r),
               "direction": "higher is better" if r.get("higher_is_better", True) else "lower is better"}
        values = sorted((per_run.get(k) or {}).values())
        if len(values) > 1:
            row["runs"] = len(values)
            row["median"] = format_value(statistics.median(values))
        out.append(row)
    return out


# -- sources: runs and tunes --------------------------------------------------------------------------
def _tune_id(run: Mapping) -> str | None:
    for w in str(run.get("command") or "").split():
        if w.startswith("--tune-id="):
            return w.split("=", 1)[1]
    return None


def _short_command(run: Mapping) -> str:
    """The command without the program name and global options (``--db PATH``), nor a tune's
    trial key."""
    words = list(run.get("argv") or str(run.get("command") or "").split())
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


def _config_key(run: dict, results: list[dict]) -> tuple:
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
    return (" ".join(out), run.get("host"),
            tuple(sorted((k, v) for k, v in env.items() if k not in ("command", "started", "status"))))


def _what(run: dict) -> str:
    words = _short_command(run).split()
    return " ".join(w for w in words[:2] if not w.startswith("-")) or "run"


def _tune_runs(store: Any, tid: str, given: dict[str, dict]) -> list[dict]:
    """Every complete trial of the tune ``tid``, oldest first (full records)."""
    trials = [r for r in store.list_runs() if _tune_id(r) == tid and r["status"] == "complete"]
    full = [given.get(r["id"]) or store.get_run(r["id"]) for r in trials]
    return sorted(full, key=lambda x: x.get("started") or "")


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

    def add(label: str, runs: list[dict], results: list[dict]) -> None:
        labels[label] = labels.get(label, 0) + 1
        sources.append(Source(label if labels[label] == 1 else f"{label} #{labels[label]}", runs, results))

    def tune(run: dict, given: dict[str, dict]) -> bool:
        tid = _tune_id(run)
        if not tid:
            return False
        if tid not in tunes_done:
            tunes_done.add(tid)
            trials = _tune_runs(store, tid, given) or [run]
            results = store.results_of([t["id"] for t in trials]) if hasattr(store, "results_of") \
                else {t["id"]: store.results(t["id"]) for t in trials}
            add(f"tune {tid[:8]}", trials, [r for t in trials for r in results[t["id"]]])
        return True

    for item in run_ids:
        if isinstance(item, str):
            run = store.get_run(item)
            if run["id"] in seen:
                continue
            seen.add(run["id"])
            if not tune(run, {run["id"]: run}):
                add(f"{_what(run)} {run['id'][:8]}".strip(), [run], store.results(run["id"]))
            continue
        runs = [r for r in item.runs if r["id"] not in seen]
        seen.update(r["id"] for r in runs)
        given = {r["id"]: r for r in runs}
        groups: dict[tuple, list[dict]] = {}
        for run in runs:
            if not tune(run, given):
                groups.setdefault(_config_key(run, item.results.get(run["id"], [])), []).append(run)
        hosts = {k[1] for k in groups}
        for key, members in groups.items():
            first = members[0]
            if len(runs) == 1:
                label = f"{_what(first)} {first['id'][:8]}"
            else:
                label = f"{_what(first)} {item.selector}" + (f" on {first.get('host')}" if len(hosts) > 1 else "") \
                    + (f" ({len(members)} runs)" if len(members) > 1 else f" {first['id'][:8]}")
            results = [{**r, "run_id": m["id"]} for m in members for r in item.results.get(m["id"], [])]
            add(label, members, results)
    return sources


# -- the environment ----------------------------------------------------------------------------------
def _names(items: Any, fmt) -> str:
    if not isinstance(items, list):
        return ""
    return "; ".join(dict.fromkeys(fmt(x) for x in items if isinstance(x, Mapping)))


def _used(results: list[dict], key: str) -> str:
    vals = []
    for r in results:
        v = (r.get("params") or {}).get(key)
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
        for name, b in (t.get("builds") or {}).items():
            if isinstance(b, Mapping):
                builds[name] = b
    compilers_used = "; ".join(dict.fromkeys(
        f"{b.get('compiler_version') or b.get('compiler')} {' '.join(b.get('flags') or [])}".strip()
        for b in builds.values()))
    cluster = run.get("cluster") or {}
    sim = cluster.get("sim_cluster") if isinstance(cluster, Mapping) else None
    cluster_text = ""
    if isinstance(cluster, Mapping) and cluster.get("hosts"):
        cluster_text = f"{len(cluster['hosts'])} nodes: {', '.join(map(str, cluster['hosts']))}"
        if isinstance(sim, Mapping):
            cluster_text += f" (virtual cluster, MTU {sim.get('mtu')}, rate {sim.get('rate_bps') or 'unlimited'})"
        diffs = cluster.get("differences")
        if isinstance(diffs, list):
            cluster_text += f"; {len(diffs)} difference(s) between nodes"
    started = [t.get("started") or "" for t in src.runs]
    rows = {
        "host": str(run.get("host") or probe.get("hostname") or ""),
        "command": "clusterbench " + _short_command(run) + (
            "" if len(src.runs) == 1 else f" ({len(src.runs)} trial runs)" if _tune_id(run)
            else f" ({len(src.runs)} runs, figures pooled)"),
        "started": min(started) + (f" to {max(started)}" if len(set(started)) > 1 else ""),
        "status": ", ".join(dict.fromkeys(str(t.get("status")) for t in src.runs)),
        "clusterbench": str(run.get("clusterbench_version") or ""),
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


# -- the page -----------------------------------------------------------------------------------------
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 0 1.2em 2em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.6em; }
.meta { color: #555; font-size: 0.9em; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; margin-top: 0.3em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.differs th { background: #fde7c8; } tr.differs th::after { content: " \\2260"; color: #b35900; }
.env td { max-width: 28em; overflow-wrap: anywhere; }
ul.summary { font-size: 0.9em; } .note { color: #a33; }
nav ul { columns: 2; font-size: 0.9em; }
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _table(header: list[str], rows: list[list[str]], num_cols: Iterable[int] = (), cls: str = "") -> str:
    nums = set(num_cols)
    attr = f' class="{cls}"' if cls else ""
    out = [f"<table{attr}><thead><tr>"
           + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td class=\"num\">{_e(c)}</td>" if i in nums else f"<td>{_e(c)}</td>"
                                    for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _env_table(sources: list[Source]) -> str:
    envs = [environment(s) for s in sources]
    fields = list(dict.fromkeys(k for e in envs for k in e))
    out = ["<table class=\"env\"><thead><tr><th></th>" + "".join(f"<th>{_e(s.label)}</th>" for s in sources)
           + "</tr></thead><tbody>"]
    for f in fields:
        vals = [e.get(f, "") for e in envs]
        if not any(vals):
            continue
        differs = len(sources) > 1 and len(set(vals)) > 1 and f not in ("command", "started", "status")
        cls = ' class="differs"' if differs else ""
        out.append(f"<tr{cls}><th>{_e(f)}</th>"
                   + "".join(f"<td>{_e(v)}</td>" for v in vals) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _summary_lines(results: list[dict]) -> tuple[list[str], list[str]]:
    try:
        from clusterbench.benchmarks import summarize_results

        s = summarize_results(results)
        return list(s.get("lines") or []), list(s.get("findings") or [])
    except Exception:  # noqa: BLE001 - the summary rules are a bonus; the figures below are what counts
        return [], []


def page(sources: list[Source], figures: list[tuple[PlotSpec, str | None, str | None]], title: str,
         generated: str, cost: Any = None, notes: Iterable[str] = ()) -> str:
    """The HTML text. ``figures``: (spec, relative PNG path or None, why it was not drawn); ``notes``:
    lines shown under the title (the runs left out and why)."""
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<meta name=\"generator\" content=\"{GENERATOR}\">",
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
             f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{_e(title)}</h1>",
             f"<p class=\"meta\">Written {_e(generated)} by clusterbench from {len(sources)} source(s): "
             + ", ".join(f"{_e(s.label)} ({_e(s.runs[0].get('host') or '?')}, {len(s.runs)} run"
                         f"{'s' if len(s.runs) != 1 else ''})" for s in sources) + ".</p>"]
    parts += [f"<p class=\"note\">{_e(n)}</p>" for n in notes]
    parts.append("<nav><ul>" + "".join(f"<li><a href=\"#plot-{_e(spec.slug)}\">{_e(spec.title)}</a></li>"
                                       for spec, _, _ in figures)
                 + "<li><a href=\"#figures\">Headline figures</a></li><li><a href=\"#energy\">Energy and cost</a></li>"
                 "<li><a href=\"#environment\">Environment</a></li>"
                 "</ul></nav>")
    if figures:
        parts.append("<h2 id=\"plots\">Plots</h2>")
    for spec, rel, why in figures:
        parts.append(f"<section id=\"plot-{_e(spec.slug)}\"><h3>{_e(spec.title)}</h3><figure>")
        if rel:
            parts.append(f"<img src=\"{_e(rel)}\" alt=\"{_e(spec.title)}\">")
        else:
            parts.append(f"<p class=\"note\">Not drawn: {_e(why)}</p>")
        parts.append(f"<figcaption>{_e(spec.caption)}</figcaption></figure></section>")
    parts.append("<h2 id=\"figures\">Headline figures</h2>")
    for src in sources:
        parts.append(f"<h3>{_e(src.label)}</h3>")
        lines, findings = _summary_lines(src.results)
        if lines:
            parts.append("<ul class=\"summary\">" + "".join(f"<li>{_e(x)}</li>" for x in lines) + "</ul>")
        rows = headline_figures(src.results)
        if rows and any("runs" in r for r in rows):
            parts.append(_table(["benchmark", "metric", "parameters", "best", "median of the runs", "runs", "unit",
                                 "of its limit (best)"],
                                [[r["benchmark"], r["metric"], r["params"], r["value"], r.get("median", ""),
                                  str(r.get("runs", 1)), r["unit"], r["limit"]] for r in rows], num_cols=(3, 4, 5)))
        elif rows:
            parts.append(_table(["benchmark", "metric", "parameters", "value", "unit", "of its limit"],
                                [[r["benchmark"], r["metric"], r["params"], r["value"], r["unit"], r["limit"]]
                                 for r in rows], num_cols=(3,)))
        else:
            parts.append("<p>No figures stored.</p>")
        if findings:
            parts.append("<p><b>Findings</b></p><ul class=\"summary\">"
                         + "".join(f"<li>{_e(x)}</li>" for x in findings) + "</ul>")
        warnings: dict[str, int] = {}  # each message once, with how many runs gave it
        for t in src.runs:
            for w in t.get("warnings") or []:
                text = str(w.get("message") if isinstance(w, Mapping) else w)
                warnings[text] = warnings.get(text, 0) + 1
        if warnings:
            parts.append("<p><b>Run warnings</b></p><ul class=\"summary\">"
                         + "".join(f"<li>{_e(w)}{f' ({n} runs)' if n > 1 else ''}</li>" for w, n in warnings.items())
                         + "</ul>")
    parts.append(_energy_section(sources, cost))
    parts.append("<h2 id=\"environment\">Environment</h2>")
    if len(sources) > 1:
        parts.append("<p class=\"meta\">Rows marked \u2260 differ between the sources.</p>")
    parts.append(_env_table(sources))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _energy_section(sources: list[Source], cost: Any = None) -> str:
    """"Energy and cost": per-watt figures with their power source, missing energy with its reason, every
    benchmark's whole energy; with a cost model the per-price figures and the energy cost; the list
    placement of the ranked figures. Says so when nothing is measured: never a made-up number."""
    from clusterbench.report.energy import energy_cost

    parts = ["<h2 id=\"energy\">Energy and cost</h2>"]
    for src in sources:
        doc = energy_cost(src.runs, src.results, cost)
        parts.append(f"<h3>{_e(src.label)}</h3>")
        if not doc["has_energy"]:
            parts.append("<p>No energy measured in this run (run it with <code>--power SPEC</code> or "
                         "<code>--watts W</code>): no Gflops/W and no energy cost.</p>")
        if doc["per_watt"]:
            parts.append("<p><b>Gflops per watt</b> over each figure's timed phase</p>")
            parts.append(_table(["benchmark", "figure", "value", "Gflop/s/W", "energy (J)", "average power (W)",
                                 "phase (s)", "power source"],
                                [[pw["benchmark"], str(pw["metric"] or ""),
                                  f"{format_value(pw['value'])} {pw['unit'] or ''}".strip(),
                                  format_value(pw["gflops_per_watt"]) + (" (declared power)" if pw["declared"] else ""),
                                  format_value(pw["joules"]), format_value(pw["avg_watts"]), format_value(pw["phase_s"]),
                                  pw["sources"]] for pw in doc["per_watt"]], num_cols=(2, 3, 4, 5, 6)))
        for m in doc["missing"]:
            parts.append(f"<p class=\"note\">{_e(m['benchmark'])} {_e(m['metric'])}: energy missing "
                         f"({_e(m['reason'])}); the figure is kept, no per-watt figure.</p>")
        if doc["benchmarks"]:
            parts.append("<p><b>Energy per benchmark</b> (whole benchmark, from start to return)</p>")
            parts.append(_table(["run", "benchmark", "time (s)", "energy (J)", "average power (W)"],
                                [[b["run"], b["benchmark"], format_value(b["phase_s"]),
                                  "missing: " + str(b["missing"]) if b["missing"] else format_value(b["joules"]),
                                  "" if b["missing"] else format_value(b["avg_watts"])
                                  + (" (declared)" if b["declared"] else "")] for b in doc["benchmarks"]],
                                num_cols=(2, 3, 4)))
        if doc["sources"] or doc["level"]:
            parts.append("<p class=\"meta\">Power sources: " + _e("; ".join(doc["sources"]) or "-")
                         + (f". Method: {_e(doc['level'])}." if doc["level"] else "") + "</p>")
        c = doc["cost"]
        if c:
            cur = c["currency"]
            if c["purchase"] is not None:
                parts.append(f"<p><b>Performance per {_e(cur)}</b> (Carver 2014: a rate / price, a time 1 / (time x price)); "
                             f"price of {c['nodes']} node(s) and the network: {_e(format_value(c['purchase']))} {_e(cur)}"
                             + (f" (the run used {c['run_nodes']})" if c["run_nodes"] != c["nodes"] else "") + "</p>")
                if c["per_price"]:
                    parts.append(_table(["benchmark", "figure", "value", f"per {cur}", "definition"],
                                        [[p["benchmark"], p["metric"], f"{format_value(p['value'])} {p['unit']}",
                                          f"{p['per_price']:.4g} {p['per_price_unit']}", p["definition"]]
                                         for p in c["per_price"]], num_cols=(2, 3)))
                for lf in c["lifetime"]:
                    parts.append(f"<p>Lifetime cost ({c['lifetime_years']:g} years at {format_value(lf['avg_watts'])} W, "
                                 f"the timed phase's average): {_e(format_value(lf['lifetime_cost']))} {_e(cur)}; "
                                 f"{_e(lf['benchmark'])} {_e(lf['metric'])} per {_e(cur)} of it: "
                                 f"{lf['per_lifetime_cost']:.4g} {_e(lf['unit'])}/{_e(cur)}</p>")
            else:
                parts.append("<p class=\"meta\">No node_price in [cost]: no performance per price.</p>")
            if c["energy_cost"]:
                parts.append(f"<p><b>Energy cost</b> at {c['power_price_kwh']:g} {_e(cur)}/kWh (J / 3.6e6 x price)</p>")
                parts.append(_table(["run", "benchmark", "scope", "energy (J)", "kWh", f"cost ({cur})"],
                                    [[x["run"], x["benchmark"], x["scope"], format_value(x["joules"]), f"{x['kwh']:.3g}",
                                      f"{x['cost']:.3g}"] for x in c["energy_cost"]], num_cols=(3, 4, 5)))
                rc = c.get("run_energy_cost")
                if rc:
                    parts.append(f"<p>Energy cost of the run: {rc['cost']:.3g} {_e(cur)}"
                                 + ("" if rc["complete"] else " (a benchmark's energy is missing: not counted)") + "</p>")
            elif c["power_price_kwh"] is None:
                parts.append("<p class=\"meta\">No power_price_kwh in [cost]: no energy cost.</p>")
        parts.append(_placement_html(src))
    return "\n".join(parts)


def _placement_html(src: Source) -> str:
    from clusterbench.errors import ClusterbenchError
    from clusterbench.report.placement import best_figures, place_run

    figs = best_figures(src.results)
    if not figs:
        return ""
    try:
        entries = place_run(src.results, edition="all")
    except ClusterbenchError as exc:  # the data is the package's: say so rather than lose the page
        return f"<p class=\"note\">List placement not available: {_e(exc)}</p>"
    out = ["<p><b>List placement</b> (the lists' published figures as far as clusterbench's data holds them; "
           "<code>clusterbench results place</code>)</p>",
           _table(["list", "edition", "figure", "would rank", "rows in the data", "source"],
                  [[e["list_name"], e["edition_name"],
                    f"{e['figure']['metric']} {format_value(e['figure']['value'])} {e['figure']['unit']}",
                    e["placement"]["text"], e["coverage"]["rows"], " ; ".join(e["sources"])] for e in entries])]
    cav = list(dict.fromkeys(c for e in entries for c in e["caveats"]))
    out.append("<ul class=\"summary\">" + "".join(f"<li>{_e(c)}</li>" for c in cav) + "</ul>")
    return "\n".join(out)


# -- writing ------------------------------------------------------------------------------------------
#: the file in a report folder that lists what the report wrote there (the only files --force replaces)
MANIFEST = ".clusterbench-report.json"
#: the names a report writes (a manifest entry that is not one of these is never touched)
_OWN = re.compile(r"index\.html|plots/\d{2,}-[A-Za-z0-9_.-]+\.png")


def _unwritable(path: Path, exc: OSError) -> UsageError:
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return UsageError(f"cannot write the report to {path}: {why}", "free space there, or choose another -o")
    return UsageError(f"cannot write the report to {path} ({why})", "choose a writable directory for -o")


def _is_report(path: Path) -> bool:
    """An earlier report written before reports had a manifest (its index.html names the generator)."""
    try:
        with open(path / "index.html", encoding="utf-8", errors="replace") as f:
            return f'content="{GENERATOR}"' in f.read(4096)
    except OSError:
        return False


def _own_files(outdir: Path) -> set[str] | None:
    """The files an earlier report wrote in ``outdir`` (relative paths), from its manifest; for a report
    older than manifests, its index.html and numbered plots; None when ``outdir`` holds no report."""
    try:
        doc = json.loads((outdir / MANIFEST).read_text(encoding="utf-8"))
        if isinstance(doc, dict) and doc.get("generator") == GENERATOR and isinstance(doc.get("files"), list):
            return {f for f in doc["files"] if isinstance(f, str) and _OWN.fullmatch(f)}
    except (OSError, ValueError):
        pass
    if _is_report(outdir):
        plots = outdir / "plots"
        return {"index.html"} | ({f"plots/{p.name}" for p in plots.iterdir() if _OWN.fullmatch(f"plots/{p.name}")}
                                 if plots.is_dir() and not plots.is_symlink() else set())
    return None


def _foreign(outdir: Path, own: set[str]) -> list[str]:
    """What is in ``outdir`` that the report did not write (relative paths, sorted)."""
    out = []
    for entry in sorted(outdir.iterdir()):
        name = entry.name
        if name == MANIFEST or name in own:
            continue
        if name == "plots" and entry.is_dir() and not entry.is_symlink():
            out += [f"plots/{p.name}" for p in sorted(entry.iterdir()) if f"plots/{p.name}" not in own]
            continue
        out.append(name + ("/" if entry.is_dir() else ""))
    return out


def _check_outdir(outdir: Path, force: bool) -> tuple[set[str] | None, list[str]]:
    """Whether the report may be written to ``outdir``: ``(None, [])`` for a new or empty folder,
    ``(its files, foreign entries)`` for an earlier report and ``--force``; else a one-line UsageError
    with a fix that works."""
    if outdir.is_symlink():
        raise UsageError(f"-o {outdir} is a symbolic link", "give the folder itself, or a new folder for -o")
    if outdir.exists() and not outdir.is_dir():
        raise UsageError(f"-o {outdir} is a file, not a folder",
                         f"choose a folder for the report, e.g. -o {outdir.parent / (outdir.stem + '-report')}")
    if not outdir.is_dir() or not any(outdir.iterdir()):
        return None, []
    own = _own_files(outdir)
    if own is None:
        shown = ", ".join(_foreign(outdir, set())[:3])
        raise UsageError(f"-o {outdir} holds files clusterbench did not write ({shown}) and no earlier report",
                         "choose a new or empty folder for -o")
    if not force:
        raise UsageError(f"-o {outdir} holds an earlier report",
                         "add --force to replace it (only the files the report wrote; anything else there is kept), "
                         "or choose another -o folder")
    return own, _foreign(outdir, own)


# the temporary folders a report writes beside its output: .NAME.tmp-PID-START-XXXX (the new report)
# and .NAME.old-PID-START-XXXX (an earlier report moved aside while the new one takes its place);
# PID and START (the writer's start time, /proc/PID/stat field 22) say whether its writer still lives
def _writer_tag() -> str:
    from clusterbench.store.db import process_start

    return f"{os.getpid()}-{process_start(os.getpid()) or 0}"


def _writer_alive(pid: int, start: int) -> bool:
    from clusterbench.store.db import process_alive

    return process_alive(pid, start)


def remove_stale(outdir: Path) -> list[Path]:
    """Remove the temporary folders of reports to ``outdir`` whose writer is dead (killed with -9, a
    power cut); an earlier report left moved aside is put back first when ``outdir`` is missing. A
    live writer's folders are never touched. Returns what was removed."""
    pattern = re.compile(rf"\.{re.escape(outdir.name)}\.(tmp|old)-(\d+)-(\d+)-[A-Za-z0-9_]+")
    removed = []
    try:
        entries = sorted(outdir.parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if not m or entry.is_symlink() or not entry.is_dir() or _writer_alive(int(m[2]), int(m[3])):
            continue
        if m[1] == "old" and (entry / "report").is_dir() and not outdir.exists():
            try:
                os.rename(entry / "report", outdir)
            except OSError:
                pass
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP for the block (delivered when it ends), so the folder is never
    left half-replaced nor a temporary folder half-removed (main thread only)."""
    sigs = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    except (ValueError, OSError):  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _manifest(files: Iterable[str]) -> dict:
    from clusterbench import __version__

    return {"generator": GENERATOR, "version": __version__, "files": sorted(set(files)),
            "note": "the files clusterbench report wrote here; report --force replaces only these"}


def write_report(store: Any, run_ids: list[Any], outdir: Path, *, comparison: dict | None = None,
                 title: str | None = None, cost: Any = None, force: bool = True) -> Path:
    """Write the report of ``run_ids`` (ids, unique prefixes or 'last', each its own source, or
    :class:`clusterbench.report.compare.Selection` objects, whose runs of one configuration are pooled;
    a ``tune hpl`` trial brings its whole tune) into ``outdir`` (``index.html``, ``plots/*.png`` and the
    manifest ``.clusterbench-report.json`` listing them), with the comparison chart when ``comparison``
    (``compare_sides``' document or ``Comparison.as_dict()``) is given, and the performance per price and
    energy cost when ``cost`` (an :class:`clusterbench.analysis.cost.CostModel`) is.

    ``outdir`` may be new, empty, or an earlier report (``force``, the default here; the command line
    asks for ``--force``): then only the files that report wrote are replaced, and whatever else is in the
    folder is kept. A folder with other files and no report is refused. Returns ``outdir/index.html``."""
    outdir = Path(outdir).expanduser()
    if str(outdir).strip() in ("", "."):
        outdir = Path.cwd() / "report"
    outdir = outdir.absolute()
    remove_stale(outdir)
    _check_outdir(outdir, force)
    sources = collect(store, list(run_ids))
    specs = plan(sources, comparison)
    notes = []
    for item in run_ids:
        left = getattr(item, "left_out", None)
        if left:
            from clusterbench.analysis.compare import left_out_text

            notes.append(f"{item.selector}: left out {left_out_text(left)} (--include-incomplete includes them)")
    if isinstance(comparison, Mapping) and isinstance(comparison.get("sides"), Mapping):
        from clusterbench.report.compare import side_lines

        notes += [f"comparison {line}" for line in side_lines(comparison) if " left out " in line
                  or " pooled " in line]
    parent = outdir.parent
    tmp: Path | None = None
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with _signals_held():  # a Ctrl-C just after the folder is made must find it named here to remove it
            tmp = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.tmp-{_writer_tag()}-", dir=parent))
        (tmp / "plots").mkdir()
        figures: list[tuple[PlotSpec, str | None, str | None]] = []
        for i, spec in enumerate(specs, 1):
            rel = f"plots/{i:02d}-{spec.slug}.png"
            try:
                render(spec, str(tmp / rel))
            except OSError:
                raise  # the disk, not the figure: the whole report fails (below)
            except Exception as exc:  # noqa: BLE001 - one odd figure must not cost the whole report: say so on the page
                figures.append((spec, None, f"{type(exc).__name__}: {exc}"))
                continue
            figures.append((spec, rel, None))
        generated = _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")
        text = page(sources, figures, title or "clusterbench report: " + ", ".join(s.label for s in sources),
                    generated, cost, notes)
        with open(tmp / "index.html", "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        files = ["index.html", *(rel for _, rel, _ in figures if rel)]
        _write_json(tmp / MANIFEST, _manifest(files))
        os.chmod(tmp, 0o755)
        try:
            with _signals_held():
                _put_in_place(tmp, outdir, files, force)
        except KeyboardInterrupt as exc:  # held during the swap, delivered after it: the report is there
            exc.outcome = f"the report was written first: {outdir / 'index.html'}"  # type: ignore[attr-defined]
            raise
    except OSError as exc:
        if tmp is not None:
            with _signals_held():
                shutil.rmtree(tmp, ignore_errors=True)
        raise _unwritable(outdir, exc) from None
    except BaseException:
        if tmp is not None:
            with _signals_held():
                shutil.rmtree(tmp, ignore_errors=True)
        raise
    return outdir / "index.html"


def _put_in_place(tmp: Path, outdir: Path, files: list[str], force: bool) -> None:
    """Move the finished report ``tmp`` to ``outdir``: a new or empty folder is replaced whole (one
    rename); into an earlier report, file by file, and its files that the new report does not write are
    removed, nothing else (the manifest first lists both, so an interruption leaves nothing unaccounted)."""
    own, foreign = _check_outdir(outdir, force)  # again: something may have appeared while the plots were drawn
    if own is None:
        old = None
        if outdir.is_dir():  # empty: moved aside, removed once the new one is in place
            old = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.old-{_writer_tag()}-", dir=outdir.parent))
            os.rename(outdir, old / "report")
        try:
            os.rename(tmp, outdir)
        except OSError:
            if old is not None:
                os.rename(old / "report", outdir)
                shutil.rmtree(old, ignore_errors=True)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return
    clash = [f for f in files if f in foreign or any(f.startswith(x) for x in foreign if x.endswith("/"))]
    plots = outdir / "plots"
    if plots.is_symlink() or (plots.exists() and not plots.is_dir()):
        clash.append("plots")
    if clash:
        raise UsageError(f"-o {outdir} holds {clash[0]}, which clusterbench did not write, where the report "
                         "writes its own", "move it away, or choose another -o folder")
    _write_json(outdir / MANIFEST, _manifest(own | set(files)))
    plots.mkdir(exist_ok=True)
    for rel in sorted(files, key=lambda f: f == "index.html"):  # the page last: it shows only plots in place
        os.replace(tmp / rel, outdir / rel)
    for rel in sorted(own - set(files)):
        target = outdir / rel
        if target.is_file() or target.is_symlink():
            target.unlink()
    _write_json(outdir / MANIFEST, _manifest(files))
    shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["MANIFEST", "collect", "environment", "format_value", "headline_figures", "page", "remove_stale",
           "write_report"]
