"""``--format bundle``: the runs as one result bundle (see :mod:`clusterbench.bundle`)."""
from __future__ import annotations

from typing import Any

from clusterbench.export import Exported, Format


def to_bundle(runs: list[Exported], **_: Any) -> str:
    from clusterbench.bundle import build, dumps

    return dumps(build(runs))


FORMAT = Format("bundle", "bundle (a versioned, checksummed JSON document anyone can import or reproduce; "
                "several runs: a tag)", to_bundle, several=True)
