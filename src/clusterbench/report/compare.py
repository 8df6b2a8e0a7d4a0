"""``clusterbench compare A B``: load the two sides from the store, compare them
(:mod:`clusterbench.analysis.compare`, pure) and print the result for a person.

The document (``compare_sides``) is the ``--json`` output: ``Comparison.as_dict()`` (its own
``compare_schema``) plus the selectors as given, each side's runs (id, started, command, tags, note,
status) and the runs it left out (``left_out``: id, status, error, figures, reason), and
``options.include_incomplete``. :func:`select` is the one place that decides which runs of a selector
are pooled, for ``compare`` and ``report`` alike.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from clusterbench.analysis import compare as cmp
from clusterbench.benchmarks import all_benchmarks, find_benchmark
from clusterbench.benchmarks.declare import Result
from clusterbench.errors import UsageError
from clusterbench.records import Run
from clusterbench.store import Store
from clusterbench.text import terminal_text
from clusterbench.units import format_value

#: what makes a left-out run count (the option of compare and report)
INCLUDE_FLAG = "--include-incomplete"


@dataclass
class Selection:
    """The runs one selector names, split by :func:`clusterbench.analysis.compare.poolable`: ``runs``
    (full records, oldest first) and ``results`` (run id -> figures) are the ones that may be pooled,
    ``left_out`` the others with the reason."""

    selector: str
    runs: list[Run]
    results: dict[str, list[Result]]
    left_out: list[dict] = field(default_factory=list)
    include_incomplete: bool = False


def check_benchmark(store: Store, name: str | None) -> None:
    """A benchmark name given to filter by (``compare --benchmark``, ``results list --benchmark``) must
    be one clusterbench knows (or an alias of one, or one the store holds figures of)."""
    if name is None:
        return
    known = set(all_benchmarks())
    known |= {a for cls in all_benchmarks().values() for a in cls.aliases}
    if name not in known and name not in store.benchmark_names():
        raise UsageError(f"unknown benchmark '{name}'", "see 'clusterbench list' for the benchmarks")


def select(store: Store, spec: str, *, include_incomplete: bool = False, full: bool = True) -> Selection:
    """The runs ``spec`` names with their figures (a few queries, whatever the number of runs), split
    into those that may be pooled and those left out (the one rule of ``compare`` and ``report``).
    Without ``full``, the figures hold only what a comparison reads (``Store.results_of``)."""
    ids = store.select_runs(spec)
    runs = store.get_runs(ids)
    results = store.results_of(ids, full=full)
    pooled, left = cmp.poolable(runs, {i: len(r) for i, r in results.items()}, include_incomplete=include_incomplete)
    return Selection(spec, list(pooled), {str(r.id): results[str(r.id)] for r in pooled}, left,
                     include_incomplete)


def require_runs(sel: Selection, what: str = "side") -> None:
    """A selection none of whose runs may be pooled is a one-line usage error naming why."""
    if not sel.runs:
        raise UsageError(f"{what} '{sel.selector}' has no complete run: {cmp.left_out_text(sel.left_out)}",
                         f"wait for it to finish or run it again, or add {INCLUDE_FLAG} to use it as it is")


def _side(store: Store, spec: str, benchmark: str | None, metric: str | None,
          include_incomplete: bool) -> Selection:
    sel = select(store, spec, include_incomplete=include_incomplete, full=False)
    require_runs(sel)
    in_bench = {i: [r for r in res if benchmark is None or r.benchmark == benchmark]
                for i, res in sel.results.items()}
    what = f"of {benchmark}" if benchmark else ""
    if not any(in_bench.values()):
        have = sorted({r.benchmark for res in sel.results.values() for r in res})
        raise UsageError(f"side '{spec}' has no figures {what}".rstrip(),
                         f"its runs hold figures of {', '.join(have)}" if have
                         else "its runs stored nothing (see 'clusterbench results show RUN')")
    if metric is not None:
        metrics = sorted({r.metric for res in in_bench.values() for r in res})
        if metric not in metrics:
            raise UsageError(f"side '{spec}' has no figure named '{metric}'" + (f" {what}" if what else ""),
                             f"its metrics{' ' + what if what else ''}: {', '.join(metrics)}")
        in_bench = {i: [r for r in res if r.metric == metric] for i, res in in_bench.items()}
    sel.results = in_bench
    return sel


def _priced(results: dict[str, list[Result]], price: float, currency: str) -> dict[str, list[Result]]:
    """Every figure as performance for cost (``analysis.cost.per_price``): a rate / price, or
    1 / (time * price) for a lower-is-better figure, so both read higher-is-better."""
    from clusterbench.analysis.cost import per_price

    cur = currency or "price unit"
    out: dict[str, list[Result]] = {}
    for run_id, res in results.items():
        out[run_id] = []
        for r in res:
            hib = bool(r.higher_is_better)
            try:
                samples = [per_price(float(x), hib, price) for x in r.samples or [r.value]]
                value = per_price(float(r.value), hib, price)
            except ValueError:
                continue  # a zero time cannot be priced: the figure is left out (it shows as one side only)
            unit = f"{r.unit}/{cur}" if hib else f"1/({r.unit}*{cur})"
            out[run_id].append(replace(r, value=value, samples=samples, unit=unit, higher_is_better=True))
    return out


def compare_sides(store: Store, a: str, b: str, *, benchmark: str | None = None, metric: str | None = None,
                  min_effect: float | None = None, prices: tuple[float, float] | None = None,
                  currency: str = "", include_incomplete: bool = False) -> dict[str, Any]:
    """Compare the runs selector ``a`` names (before) with those ``b`` names (after); ``min_effect``
    in percent. Only complete runs are pooled (:func:`clusterbench.analysis.compare.poolable`) unless
    ``include_incomplete``; each side lists the runs it left out and why. With ``prices`` (the price of
    side A's and side B's cluster), every figure is compared as performance for cost (Carver (2014) ch. 6);
    B/A is then how many times B's performance per currency unit is A's. Returns the ``--json`` document."""
    check_benchmark(store, benchmark)
    side_a = _side(store, a, benchmark, metric, include_incomplete)
    side_b = _side(store, b, benchmark, metric, include_incomplete)
    runs_a, res_a, runs_b, res_b = side_a.runs, side_a.results, side_b.runs, side_b.results
    shared = set(res_a) & set(res_b)
    if shared:
        raise UsageError(f"run {sorted(shared)[0][:8]} is on both sides ('{a}' and '{b}')",
                         "give two different runs or tags")
    if prices is not None:
        if len(prices) != 2 or any(not (p > 0) for p in prices):
            raise UsageError(f"prices {prices} must be two positive numbers", "e.g. --per-dollar 600,2400")
        res_a, res_b = _priced(res_a, prices[0], currency), _priced(res_b, prices[1], currency)
    # the key parameters of the benchmarks these figures are of (only their modules imported)
    present = sorted({r.benchmark for res in (res_a, res_b) for rs in res.values() for r in rs})
    keys = {name: tuple(cls.key_params) for name in present if (cls := find_benchmark(name)) is not None}
    opts = {} if min_effect is None else {"min_effect": min_effect / 100.0}
    doc = cmp.compare(runs_a, res_a, runs_b, res_b, keys, **opts).as_dict()
    doc["options"]["include_incomplete"] = include_incomplete

    def brief(run: Run) -> dict:
        return {k: getattr(run, k) for k in ("id", "started", "host", "command", "tags", "note", "status")}

    doc["sides"] = {k: {"selector": s.selector, "runs": [brief(r) for r in s.runs], "left_out": s.left_out}
                    for k, s in (("a", side_a), ("b", side_b))}
    doc["per_price"] = None if prices is None else {
        "price_a": prices[0], "price_b": prices[1], "currency": currency,
        "definition": "performance for cost (Carver 2014, ch. 6): value / price for a rate, 1 / (time * price) for a "
                      "time; B/A is B's performance per currency unit over A's (normalised so A = 1)"}
    return doc


def side_lines(doc: dict) -> list[str]:
    """Per side, what was pooled and what was left out (and why): the lines ``compare`` prints first,
    and the report beside its comparison chart."""
    out = []
    for side in ("a", "b"):
        s = doc["sides"][side]
        first = s["runs"][0]
        more = f" (+{len(s['runs']) - 1} more run(s))" if len(s["runs"]) > 1 else ""
        tags = f" [{terminal_text(', '.join(first['tags']))}]" if first.get("tags") else ""
        note = f"  # {terminal_text(first['note'])}" if first.get("note") else ""
        out.append(f"{side.upper()}: {terminal_text(s['selector'])}: {first['id'][:8]} {first['started'][:19]}{tags} "
                   f"{terminal_text(first['command'])}{more}{note}")
        if s.get("left_out"):
            out.append(f"{side.upper()}: left out {cmp.left_out_text(s['left_out'])} ({INCLUDE_FLAG} pools them)")
        not_complete = [r for r in s["runs"] if r.get("status") != cmp.POOLED_STATUS]
        if not_complete:
            out.append(f"{side.upper()}: pooled {len(not_complete)} run(s) that are not complete ({INCLUDE_FLAG}): "
                       + ", ".join(f"{r['id'][:8]} {r.get('status')}" for r in not_complete[:3])
                       + (", ..." if len(not_complete) > 3 else ""))
    return out


def format_comparison(doc: dict, show_all: bool = False) -> str:
    """The comparison as text: the sides, the judged figures (significant ones first; with ``show_all``
    also those without a significant difference), what else changed, and the method. Safe for a
    terminal: stored text (a note, a command line, host names) has its control characters escaped."""
    from io import StringIO

    from clusterbench.text import terminal_text
    from clusterbench.ui import print_table

    out = StringIO()
    out.write("".join(f"{line}\n" for line in side_lines(doc)))
    pp = doc.get("per_price")
    if pp:
        cur = pp.get("currency") or "price unit"
        out.write(f"per {cur}: A's cluster costs {pp['price_a']:g}, B's {pp['price_b']:g}; {pp['definition']}\n")
    summary = doc["summary"]
    out.write(f"{len(doc['matches'])} figure(s) matched: " + ", ".join(f"{n} {v}" for v, n in summary.items() if n)
              + "\n\n")
    order = {cmp.WORSE: 0, cmp.BETTER: 1, cmp.UNKNOWN: 2, cmp.SAME: 3}
    rows, hidden = [], 0
    for m in sorted(doc["matches"], key=lambda m: (order.get((m["comparison"] or {}).get("verdict"), 4), m["label"])):
        c = m["comparison"] or {}
        verdict = c.get("verdict", cmp.UNKNOWN)
        if verdict == cmp.SAME and not show_all:
            hidden += 1
            continue
        ci = (f"[{format_value(c.get('ci_low'))}, {format_value(c.get('ci_high'))}]"
              if c.get("ci_low") is not None else "")
        change = f"{c['change_pct']:+.1f}%" if c.get("change_pct") is not None else "-"
        p = c.get("p_adjusted") if c.get("p_adjusted") is not None else c.get("p_value")
        rows.append([m["label"], format_value(c.get("median_a")), format_value(c.get("median_b")), m.get("unit") or "",
                     f"{format_value(c.get('ratio'))} {ci}", change, verdict, f"{p:.2g}" if p is not None else "-",
                     f"{c.get('n_a', 0)}/{c.get('n_b', 0)}"])
    if rows:
        print_table(rows, ["figure", "A", "B", "unit", "B/A [95% CI]", "change", "verdict", "p", "n"], out)
    if hidden:
        out.write(f"{hidden} figure(s) with no significant difference not shown (--all shows them)\n")
    seen = set()
    for m in doc["matches"]:
        for w in (m["comparison"] or {}).get("warnings") or []:
            if w["code"] not in seen:
                seen.add(w["code"])
                out.write(f"warning [{w['code']}] ({m['label']}): {w['message']}; {w['remedy']}\n")
    for side, key in (("A", "only_a"), ("B", "only_b")):
        if doc[key]:
            names = ", ".join(u["label"] for u in doc[key][:5]) + (", ..." if len(doc[key]) > 5 else "")
            out.write(f"only on {side} ({len(doc[key])}): {names}\n")
    out.write("\nwhat else changed between A and B:\n" if doc["env"] else "\nnothing else changed between A and B "
              "(kernel, settings, NICs, MPI, BLAS, compilers and flags, nodes)\n")
    for e in doc["env"]:
        out.write(f"  {e['label']}\n")
    out.write(f"\nmethod: {doc['method']}\n")
    return "\n".join(terminal_text(line) for line in out.getvalue().split("\n"))
