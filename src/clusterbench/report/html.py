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

Nothing is left half-written: everything goes into a temporary folder beside the output folder,
which then takes its place. An existing output folder is replaced only when it is empty or an
earlier clusterbench report (its ``index.html`` says so); anything else is refused, as is a path
that cannot be written (one-line :class:`UsageError` naming the path).
"""
from __future__ import annotations

import datetime as _dt
import errno
import html
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
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
    metric's direction) with its identifying parameters, unit and fraction of its limit."""
    best: dict[tuple[str, str], dict] = {}
    for r in results:
        if not isinstance(r.get("value"), (int, float)) or isinstance(r.get("value"), bool):
            continue
        k = (str(r.get("benchmark")), str(r.get("metric")))
        old = best.get(k)
        if old is None or (r["value"] != old["value"]
                           and (r["value"] > old["value"]) == bool(r.get("higher_is_better", True))):
            best[k] = r
    keys = _key_params()
    return [{"benchmark": r["benchmark"], "metric": r["metric"], "params": _params_text(r, keys),
             "value": format_value(r["value"]), "unit": r.get("unit") or "", "limit": _limit_text(r),
             "direction": "higher is better" if r.get("higher_is_better", True) else "lower is better"}
            for r in best.values()]


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


def collect(store: Any, run_ids: list[str]) -> list[Source]:
    """The report's sources, in the order given: each run, or the whole tune a run belongs to."""
    if not run_ids:
        raise UsageError("a report needs at least one run", "give run ids, tags or 'last'")
    runs: list[dict] = []
    seen: set[str] = set()
    for ref in run_ids:
        run = store.get_run(ref)
        if run["id"] not in seen:
            seen.add(run["id"])
            runs.append(run)
    tunes: dict[str, list[dict]] = {}
    for run in runs:
        tid = _tune_id(run)
        if tid and tid not in tunes:
            tunes[tid] = []
            for r in store.list_runs():
                if _tune_id(r) == tid and r["status"] == "complete":
                    tunes[tid].append(r if r["id"] not in seen else next(x for x in runs if x["id"] == r["id"]))
            tunes[tid] = [x if "probe" in x else store.get_run(x["id"]) for x in tunes[tid]]
            tunes[tid].sort(key=lambda x: x.get("started") or "")
    sources: list[Source] = []
    done: set[str] = set()
    for run in runs:
        tid = _tune_id(run)
        if tid:
            if tid in done:
                continue
            done.add(tid)
            trials = tunes[tid] or [run]
            results = [r for t in trials for r in store.results(t["id"])]
            sources.append(Source(f"tune {tid[:8]}", trials, results))
        else:
            words = _short_command(run).split()
            what = " ".join(w for w in words[:2] if not w.startswith("-"))
            sources.append(Source(f"{what or 'run'} {run['id'][:8]}".strip(), [run], store.results(run["id"])))
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
        "command": "clusterbench " + _short_command(run) + (f" ({len(src.runs)} trial runs)" if len(src.runs) > 1
                                                             else ""),
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
         generated: str, cost: Any = None) -> str:
    """The HTML text. ``figures``: (spec, relative PNG path or None, why it was not drawn)."""
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<meta name=\"generator\" content=\"{GENERATOR}\">",
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
             f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{_e(title)}</h1>",
             f"<p class=\"meta\">Written {_e(generated)} by clusterbench from {len(sources)} source(s): "
             + ", ".join(f"{_e(s.label)} ({_e(s.runs[0].get('host') or '?')}, {len(s.runs)} run"
                         f"{'s' if len(s.runs) != 1 else ''})" for s in sources) + ".</p>"]
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
        if rows:
            parts.append(_table(["benchmark", "metric", "parameters", "value", "unit", "of its limit"],
                                [[r["benchmark"], r["metric"], r["params"], r["value"], r["unit"], r["limit"]]
                                 for r in rows], num_cols=(3,)))
        else:
            parts.append("<p>No figures stored.</p>")
        if findings:
            parts.append("<p><b>Findings</b></p><ul class=\"summary\">"
                         + "".join(f"<li>{_e(x)}</li>" for x in findings) + "</ul>")
        warnings = [w for t in src.runs for w in t.get("warnings") or []]
        if warnings:
            parts.append("<p><b>Run warnings</b></p><ul class=\"summary\">"
                         + "".join(f"<li>{_e(w.get('message') if isinstance(w, Mapping) else w)}</li>"
                                   for w in warnings) + "</ul>")
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
                parts.append(f"<p><b>Performance per {_e(cur)}</b> (seed 003: a rate / price, a time 1 / (time x price)); "
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
def _unwritable(path: Path, exc: OSError) -> UsageError:
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return UsageError(f"cannot write the report to {path}: {why}", "free space there, or choose another -o")
    return UsageError(f"cannot write the report to {path} ({why})", "choose a writable directory for -o")


def _is_report(path: Path) -> bool:
    try:
        with open(path / "index.html", encoding="utf-8", errors="replace") as f:
            return f'content="{GENERATOR}"' in f.read(4096)
    except OSError:
        return False


def _check_outdir(outdir: Path) -> None:
    if outdir.is_symlink() or (outdir.exists() and not outdir.is_dir()):
        raise UsageError(f"-o {outdir} exists and is not a directory", "give a directory for the report")
    if outdir.is_dir() and any(outdir.iterdir()) and not _is_report(outdir):
        raise UsageError(f"-o {outdir} is a directory that holds other files, not an earlier report",
                         "give a new or empty directory for the report")


def write_report(store: Any, run_ids: list[str], outdir: Path, *, comparison: dict | None = None,
                 title: str | None = None, cost: Any = None) -> Path:
    """Write the report of ``run_ids`` (ids, unique prefixes or 'last'; a ``tune hpl`` trial brings
    its whole tune) into ``outdir`` (``index.html`` and ``plots/*.png``), with the comparison chart
    when ``comparison`` (``Comparison.as_dict()``) is given, and the performance per price and energy
    cost when ``cost`` (an :class:`clusterbench.analysis.cost.CostModel`) is. Returns ``outdir/index.html``."""
    outdir = Path(outdir).expanduser()
    if str(outdir).strip() in ("", "."):
        outdir = Path.cwd() / "report"
    outdir = outdir.absolute()
    sources = collect(store, list(run_ids))
    specs = plan(sources, comparison)
    _check_outdir(outdir)
    parent = outdir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.tmp-", dir=parent))
    except OSError as exc:
        raise _unwritable(outdir, exc) from None
    try:
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
                    generated, cost)
        with open(tmp / "index.html", "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o755)
        _swap(tmp, outdir)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _unwritable(outdir, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return outdir / "index.html"


def _swap(tmp: Path, outdir: Path) -> None:
    """Put the finished folder ``tmp`` in the place of ``outdir`` (an earlier report is moved
    aside first and removed only once the new one is in place)."""
    _check_outdir(outdir)  # again: something may have appeared while the plots were drawn
    old = None
    if outdir.is_dir():
        old = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.old-", dir=outdir.parent))
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


__all__ = ["collect", "environment", "format_value", "headline_figures", "page", "write_report"]
