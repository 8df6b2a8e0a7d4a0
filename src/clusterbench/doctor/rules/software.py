"""software-differs: nodes with different kernels, MPI, BLAS or OpenBLAS core types."""
from __future__ import annotations

from typing import Any, Mapping

from clusterbench.doctor.rule import CannotTell, Hit, Rule, get


def check_software_differs(evs: Mapping[str, Mapping[str, Any]]) -> Any:
    from clusterbench.analysis.consistency import diff  # pure

    if len(evs) < 2:
        return CannotTell("a cluster rule: needs --hosts with two or more nodes")
    sw = {n: get(ev, "software") for n, ev in evs.items()}
    readable = {n: it for n, it in sw.items() if it.get("readable")}
    if len(readable) < 2:
        return CannotTell("software unreadable on all but one node: "
                          + "; ".join(f"{n}: {it.get('why')}" for n, it in sw.items() if not it.get("readable")))
    diffs = diff({n: {"environment": dict(it["value"] or {})} for n, it in readable.items()})
    keep = [d for d in diffs if d["key"] in ("environment.kernel", "environment.mpi", "environment.blas")]
    cores = {n: (get(ev, "blas.openblas_core").get("value") or {}).get("core") for n, ev in evs.items()
             if get(ev, "blas.openblas_core").get("readable")}
    if len({c for c in cores.values()}) > 1:
        keep.append({"what": "OpenBLAS core type", "key": "blas.openblas_core", "values": cores,
                     "why": "OpenBLAS picks different kernels per node: DGEMM/HPL speed differs"})
    hits = [Hit(f"{d['what']} differ: " + ", ".join(f"{n}={v}" for n, v in d["values"].items()) + f" ({d['why']})",
                [{"key": d["key"], "value": d["values"], "source": "probe of each node"}],
                [("install the same versions on every node (same packages or the same modules), or pin the "
                  "library with LD_LIBRARY_PATH")], [], node=",".join(d["values"])) for d in keep]
    return hits or None


RULE = Rule(
    "software-differs", "nodes differ in kernel, MPI, BLAS or OpenBLAS core type",
    ("software", "blas.openblas_core"), check_software_differs,
    "different libraries per node: DGEMM/HPL speed depends on where ranks land, or mpirun cannot mix them",
    "install the same versions everywhere", "(nothing)",
    "cluster check --hosts {hosts}", scope="cluster",
    figures={"dgemm": ("gflops",), "hpl": ("rmax",)}, order=150)
