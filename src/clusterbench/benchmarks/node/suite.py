"""``node``: every node benchmark in one run. Its members are the benchmarks that declare
``suites = {"node": position}``, in an order that lets later figures be judged against earlier
ones (peak before dgemm, stream before membw)."""
from __future__ import annotations

from typing import Any

from clusterbench.analysis.summary import max_threads, pick
from clusterbench.benchmarks import get_benchmark, register
from clusterbench.benchmarks.base import Composite, Param, Result, RunContext
from clusterbench.errors import ClusterbenchError


def _balance(rs: list[Result]) -> list[str]:
    """Machine balance: flops the cores can do per byte the memory delivers (peak and stream)."""
    n, sn = max_threads(rs, "peak", "gflops"), max_threads(rs, "stream", "triad")
    peak = pick(rs, "peak", "gflops", threads=n) if n else None
    triad = pick(rs, "stream", "triad", threads=sn) if sn else None
    if not (peak and triad):
        return []
    return [f"balance  {peak.value * 1e9 / (triad.value * 1e6):.1f} flop per byte of memory traffic at peak "
            "(machine balance)"]


@register
class Node(Composite):
    name = "node"
    help = "characterise this node (--quick takes under a minute)"
    headlines = (_balance,)
    params = (Param("skip", "strlist", (), "benchmarks to leave out, e.g. dgemm,memlat"),
              Param("threads", int, None, "threads for the multi-threaded parts (default: one per core)", min=1))

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        members = self.members()
        skip = self.skipped(params, "a node benchmark")
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
