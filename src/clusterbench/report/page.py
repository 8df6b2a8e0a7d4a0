"""The HTML text of a report: title and notes, a section per plot with its caption, each source's
headline figures, summary, findings and warnings, the "Energy and cost" section and the environment
side by side (rows that differ marked). No JavaScript and nothing from the network: inline CSS and
relative image paths, so the page opens offline from the file system."""
from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from clusterbench.report.figures import headline_figures
from clusterbench.report.plots import PlotSpec, Source
from clusterbench.report.sources import environment
from clusterbench.units import format_value

#: the marker by which an earlier report folder is recognised (and may be replaced)
GENERATOR = "clusterbench report"


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
             + ", ".join(f"{_e(s.label)} ({_e(s.runs[0].host or '?')}, {len(s.runs)} run"
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
            for w in t.warnings or []:
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


__all__ = ["CSS", "GENERATOR", "page"]
