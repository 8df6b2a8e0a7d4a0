"""``mpi``: the interconnect set for a cluster (or this node) in one run. Its members are the
benchmarks that declare ``suites = {"mpi": position}`` (pingpong, bw, multipair, ring,
placement, tcp, coll: the collectives, stored under each op's name), each given the hosts and the
options it understands."""
from __future__ import annotations

from typing import Any

from clusterbench.benchmarks import get_benchmark, register
from clusterbench.benchmarks.base import Composite, Param, RunContext
from clusterbench.errors import ClusterbenchError, UsageError
from clusterbench.launch.mpi.launchers import launcher_choices

#: options of ``mpi`` handed to every part that declares a parameter of the same name
SHARED = ("hosts", "hostfile", "transport", "allow_root", "mpi", "launcher")


@register
class MpiSuite(Composite):
    name = "mpi"
    help = "the interconnect set (--quick: about a minute on 2 virtual nodes)"
    params = (
        Param("hosts", str, None, "hosts, e.g. node1:4,node2:4 or cbsim-n1,cbsim-n2 (default: this node)"),
        Param("hostfile", str, None, "Open MPI hostfile (name slots=N)"),
        Param("transport", str, None, "MPI transport for every part: auto, shm, tcp, rdma",
              ("auto", "shm", "tcp", "rdma")),
        Param("allow_root", bool, None, "let Open MPI run as root (--allow-run-as-root)"),
        Param("mpi", str, None, "which MPI: openmpi, mpich, or the path of its launcher (default: mpirun on PATH)"),
        Param("launcher", str, None, f"how ranks start: {', '.join(launcher_choices())}", launcher_choices()),
        Param("skip", "strlist", (), "parts to leave out, e.g. tcp,placement"),
    )

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        members = self.members()
        skip = tuple(params.get("skip") or ())
        bad = [s for s in skip if s not in members]
        if bad:
            raise UsageError(f"--skip {bad[0]} is not an mpi part", f"choose from {', '.join(members)}")
        parts: dict[str, dict] = {}
        for name in members:
            if name in skip:
                continue
            bench = get_benchmark(name)
            names = {p.name for p in bench.params}
            given = {k: params[k] for k in SHARED if params.get(k) is not None and k in names}
            if name == "tcp" and params.get("hosts"):  # tcp takes two node names, without slots
                given["hosts"] = ",".join(h.split(":")[0] for h in params["hosts"].split(",")[:2])
            try:
                parts[name] = bench.resolve(ctx, given)
            except ClusterbenchError as exc:
                raise type(exc)(exc.problem, f"{exc.fix or 'fix it'}, or leave it out with --skip {name}") from exc
        return {"skip": skip, "parts": parts}
