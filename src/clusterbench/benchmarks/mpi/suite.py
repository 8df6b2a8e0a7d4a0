"""``mpi``: the interconnect set for a cluster (or this node) in one run. Its members are the
benchmarks that declare ``suites = {"mpi": position}`` (pingpong, bw, multipair, ring,
placement, tcp, coll: the collectives, stored under each op's name), each given the hosts and the
options it understands."""
from __future__ import annotations

from typing import Any

from clusterbench.benchmarks import get_benchmark, register
from clusterbench.benchmarks.base import Composite, Param, RunContext
from clusterbench.errors import ClusterbenchError
from clusterbench.benchmarks.mpi.common import SUITE_PARAMS, SUITE_SHARED



@register
class MpiSuite(Composite):
    name = "mpi"
    help = "the interconnect set (--quick: about a minute on 2 virtual nodes)"
    params = (
        *SUITE_PARAMS,
        Param("skip", "strlist", (), "parts to leave out, e.g. tcp,placement"),
    )

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        members = self.members()
        skip = self.skipped(params, "an mpi part")
        parts: dict[str, dict] = {}
        for name in members:
            if name in skip:
                continue
            bench = get_benchmark(name)
            names = {p.name for p in bench.params}
            given = {k: params[k] for k in SUITE_SHARED if params.get(k) is not None and k in names}
            if name == "tcp" and params.get("hosts"):  # tcp takes two node names, without slots
                given["hosts"] = ",".join(h.split(":")[0] for h in params["hosts"].split(",")[:2])
            try:
                parts[name] = bench.resolve(ctx, given)
            except ClusterbenchError as exc:
                raise type(exc)(exc.problem, f"{exc.fix or 'fix it'}, or leave it out with --skip {name}") from exc
        return {"skip": skip, "parts": parts}
