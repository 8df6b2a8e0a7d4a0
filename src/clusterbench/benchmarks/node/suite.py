"""``node``: every node benchmark in one run. Its members are the benchmarks that declare
``suites = {"node": position}``, in an order that lets later figures be judged against earlier
ones (peak before dgemm, stream before membw)."""
from __future__ import annotations

from typing import Any

from clusterbench.benchmarks import get_benchmark, register
from clusterbench.benchmarks.base import Composite, Param, RunContext
from clusterbench.errors import ClusterbenchError, UsageError


@register
class Node(Composite):
    name = "node"
    help = "characterise this node (--quick takes under a minute)"
    params = (Param("skip", "strlist", (), "benchmarks to leave out, e.g. dgemm,memlat"),
              Param("threads", int, None, "threads for the multi-threaded parts (default: one per core)", min=1))

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        members = self.members()
        skip = tuple(params.get("skip") or ())
        bad = [s for s in skip if s not in members]
        if bad:
            raise UsageError(f"--skip {bad[0]} is not a node benchmark", f"choose from {', '.join(members)}")
        parts: dict[str, dict] = {}
        for name in members:
            if name in skip:
                continue
            bench = get_benchmark(name)
            given = {}
            if params.get("threads") is not None and any(p.name == "threads" for p in bench.params):
                given["threads"] = params["threads"]
            try:
                parts[name] = bench.resolve(ctx, given)
            except ClusterbenchError as exc:  # e.g. no BLAS: say how to characterise the rest
                raise type(exc)(exc.problem, f"{exc.fix or 'fix it'}, or leave it out with --skip {name}") from exc
        return {"skip": skip, "threads": params.get("threads"), "parts": parts}
