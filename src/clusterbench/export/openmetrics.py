"""``--format openmetrics``: stored figures for Prometheus, in the text exposition format (0.0.4).

One gauge family per benchmark and metric (``clusterbench_<benchmark>_<metric>``, with ``# HELP`` and
``# TYPE`` lines), one sample per figure: the figure's value, labelled with ``benchmark``, ``metric``,
``unit``, ``node`` (the figure's ``params.node``, else the run's hosts), ``run`` (the run id) and its
key parameters (every parameter whose value is a string, number or boolean; a name that is not a valid
label name is rewritten to one, a name taken by the labels above gets ``param_`` in front), stamped
with the run's start time (milliseconds since the epoch, as that format has it). The text ends with
``# EOF`` (a comment to this format's parsers; it marks a file written whole). ``timestamps=False``
leaves the stamps out: node_exporter's textfile collector refuses a file that has them.

Label values are escaped as the format says (``\\`` ``\"`` ``\n``); any other control character
(a NUL, a carriage return) is written as the text ``\\xNN``, so a hostile string can end neither a
line nor a value. The same labels twice in a family (a run that measured the same point twice) get
a ``repeat`` label (1, 2, ...) so every series is unique. Pure: no store, no process.
"""
from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

from clusterbench.benchmarks.declare import Result
from clusterbench.export import Exported, Format
from clusterbench.records import Run

PREFIX = "clusterbench_"
#: the labels every sample has (parameters with these names get ``param_`` in front)
BASE_LABELS = ("benchmark", "metric", "unit", "node", "run")
_NAME_BAD = re.compile(r"[^a-zA-Z0-9_]")
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def metric_name(benchmark: str, metric: str) -> str:
    """A valid metric name ``[a-zA-Z_:][a-zA-Z0-9_:]*`` for a benchmark's metric."""
    name = _NAME_BAD.sub("_", f"{benchmark}_{metric}")
    return PREFIX + name


def label_name(key: str) -> str:
    """A valid label name for a parameter (``[a-zA-Z_][a-zA-Z0-9_]*``, not ``__``-prefixed)."""
    name = _NAME_BAD.sub("_", str(key)) or "_"
    if name[0].isdigit() or name.startswith("__") or name in BASE_LABELS or name == "repeat":
        name = "param_" + name.lstrip("_")
    return name


def escape_value(text: str) -> str:
    """A label value as the format writes it (between double quotes)."""
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return _CONTROL.sub(lambda m: f"\\\\x{ord(m[0]):02x}", text)


def escape_help(text: str) -> str:
    """HELP text: ``\\`` and newline escaped, other control characters as ``\\xNN``."""
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return _CONTROL.sub(lambda m: f"\\\\x{ord(m[0]):02x}", text)


def _number(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _node(run: Run, r: Result) -> str:
    node = r.params.get("node")
    if isinstance(node, str) and node:
        return node
    hosts = (run.cluster or {}).get("hosts")
    return ",".join(str(h) for h in hosts) if hosts else str(run.host or "")


def _param_text(v: Any) -> str | None:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v)
    return None  # nested values (params.energy) and lists are not labels


def _labels(run: Run, r: Result) -> dict[str, str]:
    labels = {"benchmark": r.benchmark, "metric": r.metric, "unit": r.unit, "node": _node(run, r), "run": run.id}
    for key in sorted(r.params, key=str):
        text = _param_text(r.params[key])
        if text is None:
            continue
        name = label_name(key)
        while name in labels:  # two parameters that rewrite to one name
            name += "_"
        labels[name] = text
    return labels


def _stamp(run: Run) -> str | None:
    if not run.started:
        return None
    try:
        return str(round(datetime.fromisoformat(run.started).timestamp() * 1000))
    except ValueError:
        return None


def to_openmetrics(runs: list[Exported], timestamps: bool = True, **_: Any) -> str:
    families: dict[str, list[str]] = {}
    helps: dict[str, str] = {}
    seen: dict[tuple, int] = {}
    for run, results in runs:
        stamp = _stamp(run) if timestamps else None
        for r in results:
            name = metric_name(r.benchmark, r.metric)
            helps.setdefault(name, f"clusterbench {r.benchmark} {r.metric} ({r.unit}, "
                                   f"{'higher' if r.higher_is_better else 'lower'} is better)")
            labels = _labels(run, r)
            key = (name, tuple(sorted(labels.items())))
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                labels["repeat"] = str(seen[key])
            body = ",".join(f'{k}="{escape_value(v)}"' for k, v in labels.items())
            line = f"{name}{{{body}}} {_number(r.value)}"
            families.setdefault(name, []).append(line + (f" {stamp}" if stamp else ""))
    out: list[str] = []
    for name in sorted(families):
        out += [f"# HELP {name} {escape_help(helps[name])}", f"# TYPE {name} gauge", *families[name]]
    out.append("# EOF")
    return "\n".join(out) + "\n"


FORMAT = Format("openmetrics", "openmetrics (Prometheus' text format: one gauge per figure; several runs: a tag)",
                to_openmetrics, several=True)
