"""Terminal presentation: text tables and result lines (the progress bar is :mod:`clusterbench.progressbar`).

Nothing here decides anything; it renders what the library returns. Every line and table cell it
writes goes through :func:`clusterbench.text.terminal_text` (stored user text, host names, error
texts and benchmark strings may hold control characters: they are shown escaped, never sent raw).
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any

from clusterbench.text import terminal_text
from clusterbench.units import format_value, human_bytes

if TYPE_CHECKING:
    from clusterbench.benchmarks.declare import Result


def __getattr__(name: str) -> Any:
    """``RichProgress`` from :mod:`clusterbench.progressbar`, loaded when asked for: printing a table then
    loads no benchmark machinery (PEP 562)."""
    if name == "RichProgress":
        from clusterbench.progressbar import RichProgress

        return RichProgress
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _key_params(benchmark: str) -> tuple[str, ...]:
    """The parameters that tell one figure from another, as the benchmark declares them
    (``Benchmark.key_params``); none for a benchmark this version does not know."""
    from clusterbench.benchmarks import ALIASES, all_benchmarks

    cls = all_benchmarks().get(ALIASES.get(benchmark, benchmark))
    return cls.key_params if cls else ()


def param_text(k: str, v: Any) -> str:
    if k.endswith("_bytes") and isinstance(v, (int, float)):
        return f"{k.replace('_bytes', '')}={human_bytes(v)}"
    return f"{k}={v}"


def value_kind(r: Result) -> str:
    """What a result's ``value`` is, as its metric declares it (``Metric.value_is``: ``best`` sample
    by default, or e.g. ``whole run`` for intcpu's total rate); ``best`` for a metric this version
    does not know."""
    from clusterbench.benchmarks import ALIASES, all_benchmarks

    cls = all_benchmarks().get(ALIASES.get(r.benchmark, r.benchmark))
    metric = next((m for m in (cls.metrics if cls else ()) if m.name == r.metric), None)
    return getattr(metric, "value_is", "best") or "best"


def result_rows(results: Iterable[Result]) -> list[list[str]]:
    rows = []
    for r in results:
        p = r.params or {}
        params = " ".join(param_text(k, p[k]) for k in _key_params(r.benchmark) if k in p and p[k] is not None)
        s = r.summary or {}
        lim = r.limit
        lim_s = f"{lim['fraction']:.1%} of {lim['name']} {format_value(lim['value'])}" if lim else ""
        warn = ",".join(w["code"] for w in r.warnings or [])
        kind = value_kind(r)
        mark = "" if kind == "best" else f" ({kind})"
        rows.append([r.benchmark, r.metric, params, f"{format_value(r.value)} {r.unit}{mark}",
                     format_value(s.get("median", r.value)), f"{s.get('cv', 0):.1%}", lim_s, warn])
    return rows


HEADER = ["benchmark", "metric", "params", "best", "median", "cv", "limit", "warnings"]


def results_header(results: Iterable[Result]) -> list[str]:
    """:data:`HEADER`, whose value column says "best" only when every value in it is a best sample,
    else "value" with each other kind said beside its figure (once: intcpu's whole-run rate was
    printed under "best")."""
    return HEADER if all(value_kind(r) == "best" for r in results) else [*HEADER[:3], "value", *HEADER[4:]]


def write_lines(lines: Iterable[Any], out: IO[str] | None = None) -> None:
    """Write each of ``lines`` (one line each, without its newline) made safe for a terminal: a
    control character in one, a newline included, is shown escaped."""
    (out or sys.stdout).write("".join(f"{terminal_text(line)}\n" for line in lines))


def write_text(text: str, out: IO[str] | None = None) -> None:
    """Write ``text`` of several lines, each made safe for a terminal (its newlines kept)."""
    write_lines(text[:-1].split("\n") if text.endswith("\n") else text.split("\n"), out)


def print_table(rows: list[list[str]], header: list[str], out: IO[str] | None = None) -> None:
    """``rows`` under ``header`` in aligned columns; every cell made safe for a terminal first."""
    out = out or sys.stdout
    header = [terminal_text(h) for h in header]
    rows = [[terminal_text(c) for c in row] for row in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)] if rows else [len(h) for h in header]
    for row in [header, *rows]:
        out.write("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")


def print_results(results: Iterable[Result], out: IO[str] | None = None) -> None:
    out = out or sys.stdout
    results = list(results)
    print_table(result_rows(results), results_header(results), out)
    seen = set()
    for r in results:
        for w in r.warnings or []:
            key = (r.benchmark, w["code"])
            if key in seen:
                continue
            seen.add(key)
            write_lines([f"warning [{r.benchmark} {w['code']}]: {w['message']}; {w['remedy']}"], out)


def _json_default(obj: Any) -> Any:
    """A typed record (a run, a result) as its JSON form; anything else JSON cannot hold as text."""
    as_json = getattr(obj, "as_json", None)
    return as_json() if callable(as_json) else str(obj)


def dump_json(doc: Any, out: IO[str] | None = None) -> None:
    out = out or sys.stdout
    json.dump(doc, out, indent=1, sort_keys=False, default=_json_default)
    out.write("\n")


def format_probe(p: dict) -> str:
    """A human-readable summary of :func:`clusterbench.probe.probe`'s answer."""
    topo, cpu, mem = p.get("topology") or {}, p.get("cpu") or {}, p.get("memory") or {}
    rp, env = p.get("rpeak") or {}, p.get("environment") or {}
    emu = env.get("emulation")
    lines = [f"EMULATED    {emu.get('detail')}"] if emu else []
    lines += [f"host        {p.get('hostname')}  (source: {p.get('source')}, root {p.get('root')})",
             f"cpu         {cpu.get('vendor')} {cpu.get('model_name')}  [{cpu.get('arch')}]",
             f"uarch       {cpu.get('microarchitecture') or 'unknown'}",
             f"isa         {' '.join(cpu.get('isa') or []) or 'unknown'}",
             f"clock       nominal {cpu.get('freq_nominal_mhz') or '?'} MHz, max {cpu.get('freq_max_mhz') or '?'} MHz"
             f"  ({cpu.get('freq_source') or ''})",
             f"topology    {topo.get('packages')} package(s), {topo.get('numa_nodes')} NUMA node(s), "
             f"{topo.get('cores')} cores, {topo.get('pus')} PUs ({topo.get('smt_per_core')} per core)"]
    for kind in topo.get("core_kinds") or []:
        lines.append(f"core kind   #{kind.get('kind')} {kind.get('name') or ''}: cpus {kind.get('cpus')}"
                     f" max {kind.get('freq_max_mhz') or '?'} MHz")
    seen: dict[str, tuple[int, int]] = {}
    for c in topo.get("caches") or []:
        size, count = seen.get(c["name"], (c["size_bytes"], 0))
        seen[c["name"]] = (size, count + 1)
    if seen:
        lines.append("caches      " + ", ".join(f"{n} {human_bytes(s)} x{k}" for n, (s, k) in seen.items()))
    for node in topo.get("numa") or []:
        tot, av = node.get("memory_total_bytes"), node.get("memory_available_bytes")
        lines.append(f"numa node {node.get('os_index')} cpus {node.get('cpus')}  memory "
                     f"{human_bytes(tot) if tot else '?'} total, {human_bytes(av) if av else '?'} available")
    hp = mem.get("hugepage_sizes_bytes") or []
    lines.append(f"memory      {human_bytes(mem['total_bytes']) if mem.get('total_bytes') else '?'} total, "
                 f"{human_bytes(mem['available_bytes']) if mem.get('available_bytes') else '?'} available; "
                 f"huge pages {', '.join(human_bytes(h) for h in hp) or 'none'}")
    node_rp = rp.get("node") or {}
    if node_rp.get("dp_gflops_nominal"):
        lines.append(f"Rpeak node  DP {node_rp.get('dp_gflops_nominal'):.1f} Gflop/s nominal, "
                     f"{node_rp.get('dp_gflops_max') or 0:.1f} at max clock; SP {node_rp.get('sp_gflops_nominal') or 0:.1f}"
                     f"  ({rp.get('basis', '')})")
    else:
        lines.append("Rpeak       unknown")
    for note in rp.get("notes") or []:
        lines.append(f"  note: {note}")
    for key in ("kernel", "preemption", "governor", "turbo", "smt_active", "thp", "hypervisor", "container"):
        lines.append(f"{key:<11} {env.get(key)}")
    for nic in env.get("nics") or []:
        lines.append(f"nic         {nic.get('name')} {nic.get('speed_mbps')} Mb/s mtu {nic.get('mtu')} {nic.get('driver')}")
    for group in ("mpi", "blas", "compilers"):
        items = env.get(group) or []
        if items:
            shown = dict.fromkeys(f"{i.get('name')} {i.get('version') or ''}".strip() for i in items)  # one per name
            lines.append(f"{group:<11} " + "; ".join(shown))
    unknown = p.get("unknown") or {}
    if unknown:
        lines.append(f"unknown     {len(unknown)} item(s):")
        lines.extend(f"  {k}: {v}" for k, v in sorted(unknown.items()))
    return "\n".join(lines) + "\n"


def print_summary(results: list[Result], out: IO[str] | None = None) -> bool:
    """The run's headline (see :mod:`clusterbench.analysis.summary`): the rules its benchmarks declare.
    False when it has nothing to say (nothing printed)."""
    from clusterbench.benchmarks import summarize_results

    out = out or sys.stdout
    summ = summarize_results(results)
    if not summ["lines"] and not summ["findings"]:
        return False
    out.write("\nsummary\n")
    write_lines([f"  {line}" for line in summ["lines"]], out)
    if summ["findings"]:
        out.write("what holds it back / what to check\n")
        write_lines([f"  - {f}" for f in summ["findings"]], out)
    return True
