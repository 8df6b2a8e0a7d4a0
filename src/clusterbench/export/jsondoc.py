"""``--format json``: the run as ``results show --json`` prints it (schema, run, results)."""
from __future__ import annotations

import json
from typing import Any

from clusterbench import SCHEMA_VERSION
from clusterbench.export import Exported, Format


def to_json(runs: list[Exported], **_: Any) -> str:
    run, results = runs[0]
    return json.dumps({"schema": SCHEMA_VERSION, "run": run.as_json(), "results": [r.as_json() for r in results]},
                      indent=1) + "\n"


FORMAT = Format("json", "json (the --json document)", to_json)
