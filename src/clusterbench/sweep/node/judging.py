"""Which nodes are outliers, figure by figure, and doctor's findings that may explain them."""
from __future__ import annotations

import statistics
from collections.abc import Sequence

from clusterbench.analysis import outliers
from clusterbench.benchmarks.declare import Result
from clusterbench.sweep.node.hosts import node_benchmarks


def relevant_rules(benchmark: str) -> set[str]:
    """doctor's rules that bear on ``benchmark``'s figures, from each rule's declared ``figures``; a
    benchmark no rule names: every rule that bears on some node benchmark (network rules are not)."""
    from clusterbench.doctor.engine import bearing_on

    return set(bearing_on(benchmark, otherwise=node_benchmarks()))


# --------------------------------------------------------------------------- judging

def _key_params(bench: str) -> tuple[str, ...]:
    from clusterbench.benchmarks import all_benchmarks

    cls = all_benchmarks().get(bench)
    return tuple(k for k in (cls.key_params if cls else ()) if k != "node")


def figure_label(bench: str, metric: str, params: dict) -> str:
    from clusterbench.ui import param_text

    return " ".join([bench, metric, *(param_text(k, v) for k, v in params.items() if v is not None)])


def figures(results: dict[str, list[Result]]) -> list[dict]:
    """The nodes' results grouped into figures (benchmark, metric, key params), each with its value
    per node, in the order they were measured."""
    out: dict[tuple, dict] = {}
    for node, rs in results.items():
        for r in rs:
            keys = _key_params(r.benchmark)
            params = {k: (r.params or {}).get(k) for k in keys}
            ident = (r.benchmark, r.metric, tuple((k, repr(v)) for k, v in params.items()))
            fig = out.setdefault(ident, {"benchmark": r.benchmark, "metric": r.metric, "unit": r.unit,
                                         "higher_is_better": bool(r.higher_is_better),
                                         "params": params, "label": figure_label(r.benchmark, r.metric, params),
                                         "values": {}, "spreads": {}})
            fig["values"][node] = float(r.value)
            fig["spreads"][node] = outliers.spread(r.samples)
    return list(out.values())


def judge(fig: dict) -> dict:
    """Median, MAD, each node's modified z-score and the flagged nodes of one figure."""
    vals = fig["values"]
    xs = list(vals.values())
    med = statistics.median(xs) if xs else None
    mad = statistics.median(abs(x - med) for x in xs) if xs else None
    zs = outliers.modified_z(vals)
    flags = outliers.flag(vals, fig["higher_is_better"], spreads=fig.get("spreads"))
    return {**fig, "median": med, "mad": mad, "z": zs, "flags": flags}


def likely_causes(flagged: dict[str, set[str]], findings: Sequence[dict], hosts: Sequence[str]) -> dict[str, list[dict]]:
    """For each flagged node (``{node: {benchmark, ...}}``), doctor's findings that fire on it, bear on
    one of its flagged benchmarks and do not fire on every node (those cannot tell it apart)."""
    fires: dict[str, set[str]] = {}
    for f in findings:
        for n in str(f.get("node") or "").split(","):
            fires.setdefault(f["rule"], set()).add(n.strip())
    everywhere = {r for r, ns in fires.items() if set(hosts) <= ns}
    out: dict[str, list[dict]] = {}
    for node, benches in flagged.items():
        rules: set[str] = set()
        for b in benches:
            rules.update(relevant_rules(b))
        seen = set()
        for f in findings:
            nodes = {n.strip() for n in str(f.get("node") or "").split(",")}
            if node in nodes and f["rule"] in rules and f["rule"] not in everywhere and f["rule"] not in seen:
                seen.add(f["rule"])
                out.setdefault(node, []).append({"rule": f["rule"], "title": f["title"], "summary": f.get("summary"),
                                                 "severity": f.get("severity"), "fix": f.get("fix") or []})
    return out
