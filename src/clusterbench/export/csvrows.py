"""``--format csv``: one row per figure, with whether the run it belongs to completed."""
from __future__ import annotations

import csv
import io
import json
from typing import Any

from clusterbench.benchmarks.declare import Result
from clusterbench.export import Exported, Format
from clusterbench.records import Run

#: CSV columns; later additions are appended so existing positions never move
CSV_COLUMNS = ["run_id", "benchmark", "metric", "value", "unit", "higher_is_better", "n", "best", "median", "min",
               "max", "cv", "limit_name", "limit_value", "limit_fraction", "params", "samples",
               "run_status", "run_error"]


def to_csv(run: Run, results: list[Result]) -> str:
    """One row per figure; ``run_status``/``run_error`` say whether the run it belongs to completed."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    for r in results:
        s, lim = r.summary, r.limit or {}
        w.writerow([run.id, r.benchmark, r.metric, r.value, r.unit, int(r.higher_is_better),
                    s.get("n"), s.get("best"), s.get("median"), s.get("min"), s.get("max"), s.get("cv"),
                    lim.get("name", ""), lim.get("value", ""), lim.get("fraction", ""),
                    json.dumps(r.params, sort_keys=True), json.dumps(r.samples),
                    run.status, run.error or ""])
    return buf.getvalue()


def _render(runs: list[Exported], **_: Any) -> str:
    return to_csv(*runs[0])


FORMAT = Format("csv", "csv (one row per figure)", _render)
