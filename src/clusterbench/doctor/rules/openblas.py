"""openblas-generic: OpenBLAS running kernels older than the CPU."""
from __future__ import annotations

from typing import Any, Mapping

from clusterbench.doctor.rule import CannotTell, Hit, Rule, cannot, get, shown


def check_openblas(ev: Mapping[str, Any]) -> Any:
    from clusterbench.probe.blas import choose_coretype  # pure

    it, isa = get(ev, "blas.openblas_core"), get(ev, "cpu.isa")
    if not it.get("readable"):
        return cannot("blas.openblas_core", it)
    v = it["value"] or {}
    if not v.get("path"):
        return None  # no OpenBLAS on this node
    if not v.get("core"):
        return CannotTell(f"{v['path']} reports no core name (not a DYNAMIC_ARCH OpenBLAS?)")
    if not isa.get("readable"):
        return cannot("cpu.isa", isa)
    best = choose_coretype(set((isa["value"] or {}).get("isa") or []), (isa["value"] or {}).get("vendor"), v["core"])
    if best is None:
        return None
    return Hit(f"OpenBLAS runs its {v['core']} kernels on a CPU that has {best}'s instructions",
               [shown("blas.openblas_core", it), {"key": "cpu.isa", "value": (isa["value"] or {}).get("model_name"),
                                                  "source": isa.get("source")}],
               [f"export OPENBLAS_CORETYPE={best}  # clusterbench's own runs do this with --openblas-coretype auto"],
               ["unset OPENBLAS_CORETYPE"])


RULE = Rule(
    "openblas-generic", "OpenBLAS on kernels older than the CPU", ("blas.openblas_core", "cpu.isa"), check_openblas,
    "an OpenBLAS that does not know the CPU falls back to old (e.g. Prescott, SSE3) kernels: DGEMM and HPL "
    "run 4-5x below the cores", "OPENBLAS_CORETYPE set to the best core type the CPU supports",
    "unset OPENBLAS_CORETYPE", "run dgemm --openblas-coretype none, then run dgemm (auto)",
    figures={"dgemm": ("gflops", "gflops_per_core"), "hpl": ("rmax",)}, order=140)
