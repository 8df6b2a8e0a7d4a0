"""Engines beside the built-in one: :func:`load_engine_plugins` finds ``engines.py`` (hpcc, xhpl)
and registers an :class:`ExternalEngine` for each; :func:`phase_from_hpl_lines` places their
timed phase from HPL's start/end time lines."""
from __future__ import annotations

import importlib
from typing import Any

from clusterbench.launch import mpi as mpimod
from clusterbench.benchmarks.base import RunContext
from clusterbench.energy.phase import Phase
from clusterbench.benchmarks.hpl.builtin_engine import BuiltinEngine
from clusterbench.benchmarks.hpl.registry import ENGINES, HplOutcome, register_engine


def phase_from_hpl_lines(start: float | None, end: float | None, time_s: float, engine: str) -> Phase:
    """The timed phase from HPL's "HPL_pdgesv() start time"/"end time" lines: whole seconds (time()
    truncated) around the HPL_pdgesv call HPL's own ``time_s`` measures. The phase is placed where both
    truncations allow ([max(start, end - t), min(start + 1, end + 1 - t)], its middle), so it is
    ``time_s`` long, its ends known to half a second or better; flagged as 1 s resolution. Without the
    lines (hpcc's HPL 2.0 prints none) the phase is unknown and says so."""
    if start is None or end is None:
        return Phase.unknown(f"{engine}'s HPL printed no 'HPL_pdgesv() start/end time' lines (HPL 2.0, as in "
                             "hpcc, has none), so its timed phase is not known; the whole benchmark's energy is in "
                             "the run's energy record",
                             "for Gflops/W use --engine builtin, or xhpl of HPL 2.1 or later (both state their timed phase)")
    lo, hi = max(start, end - time_s), min(start + 1.0, end + 1.0 - time_s)
    if hi < lo:
        return Phase.unknown(f"{engine}'s 'HPL_pdgesv() start/end time' lines ({end - start:.0f} s apart) do not "
                             f"agree with its time of {time_s:.2f} s (was the clock stepped?)")
    t0 = (lo + hi) / 2
    return Phase(t0, t0 + time_s, resolution_s=1.0,
                 source=f"{engine}'s 'HPL_pdgesv() start/end time' lines (whole seconds), placed by its time_s")


def load_engine_plugins() -> None:
    """Engines that live in ``engines.py`` (hpcc, xhpl), when that module exists: it either
    registers itself (``register_engine``) or offers ``run_external(engine, HplCase, ...)`` and an
    ``ENGINES`` tuple, which :class:`ExternalEngine` adapts."""
    try:
        mod = importlib.import_module(f"{__package__}.engines")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.engines":
            raise
        return
    if hasattr(mod, "run_external") and hasattr(mod, "HplCase"):
        for name in getattr(mod, "ENGINES", ()):
            if isinstance(name, str) and name not in ENGINES:
                register_engine(ExternalEngine(name, mod))


class ExternalEngine:
    """hpcc or xhpl through ``engines.run_external``: the same ranks, placement and BLAS
    environment as the built-in engine (the program links its own BLAS; ``--blas`` is not
    applied to it), its HPL result line and residual parsed; no time breakdown."""

    def __init__(self, name: str, module: Any) -> None:
        self.name = name
        self.module = module

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        params["engine_exe"] = self.module.find_engine(self.name, params.get("engine_path"))

    def run(self, ctx: RunContext, params: dict[str, Any]) -> HplOutcome:
        mpi = mpimod.detect_mpi()
        spec = BuiltinEngine().launch_spec(ctx, params)
        case = self.module.HplCase(n=params["n"], nb=params["nb"], p=params["p"], q=params["q"], pmap=params["pmap"])
        res = self.module.run_external(self.name, case, mpi=mpi, spec=spec, timeout=ctx.timeout,
                                       exe=params.get("engine_exe") or self.module.find_engine(
                                           self.name, params.get("engine_path")))
        rec = res["hpl"]
        extra = {"engine_exe": res.get("exe"), "engine_version": res.get("version"), "variant": rec.get("variant"),
                 "algorithm": rec.get("algorithm"), "transport_used": res.get("transport"),
                 "mpi": {"name": mpi.name, "version": mpi.version}, "engine_wall_s": res.get("wall_s")}
        return HplOutcome(n=int(rec["n"]), nb=int(rec["nb"]), p=int(rec["p"]), q=int(rec["q"]),
                          pmap=str(rec["pmap"]), time_s=float(rec["time_s"]), gflops=float(rec["gflops"]),
                          residual=float(rec["residual"]), params=extra,
                          phase=phase_from_hpl_lines(rec.get("start_unix"), rec.get("end_unix"),
                                                     float(rec["time_s"]), self.name))


