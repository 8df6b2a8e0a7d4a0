"""``hpcc``: the whole HPC Challenge suite in one run, every figure carrying hpcc's summary key.

Its members are the benchmarks that declare ``suites = {"hpcc": position}`` (hpl, dgemm, stream,
ptrans, randomaccess, fft, pingpong, ring, hpcg). Each figure that has an HPC Challenge name carries it
in ``params.hpcc_key`` with the value in hpcc's unit in ``params.hpcc_value`` (declared per benchmark
as :class:`~clusterbench.benchmarks.base.HpccKey`), so a run compares key by key with published HPCC
tables (Duffy (2020), Tables 5.6-5.10) and ``results export --format hpccoutf`` writes an hpccoutf.txt-style
summary that existing scripts read.

``--engine hpcc`` runs Debian's ``hpcc`` instead (one run, HPL N/NB/grid as ``run hpl`` derives them)
and stores every summary key it prints that one of the members declares, converted to clusterbench's
units, under that member's name and metric (``params.engine = "hpcc"``).
"""
from __future__ import annotations

from typing import Any

from clusterbench.benchmarks import all_benchmarks, get_benchmark, register
from clusterbench.benchmarks.base import Composite, HpccKey, Param, Result, RunContext
from clusterbench.errors import ClusterbenchError, KernelFailed, UsageError
from clusterbench.benchmarks.mpi.common import SUITE_PARAMS, SUITE_SHARED

#: what each part is given besides the shared options (hpcc's own choices)
PART_PARAMS: dict[str, dict[str, Any]] = {
    "pingpong": {"sizes": [8, 2_000_000]},  # hpcc: 8 B latency, 2,000,000 B bandwidth
    "dgemm": {"mode": "all"},
    "randomaccess": {"variant": "both"},  # hpcc: the polynomial stream and the LCG
}
ENGINES = ("builtin", "hpcc")


def _hints(key: str, procs: int) -> dict[str, Any]:
    """Parameters that select ``key``'s declaration (Single/Star/MPI, message size)."""
    h: dict[str, Any] = {}
    if key.startswith("Single"):
        h.update(mode="single", threads=1, processes=1)
    elif key.startswith("Star"):
        h.update(mode="star", threads=procs, processes=procs)
    elif key.startswith("MPI"):
        h.update(mode="mpi", ranks=procs, processes=procs)
    if "PingPongLatency" in key:
        h["size_bytes"] = 8
    if "PingPongBandwidth" in key:
        h["size_bytes"] = 2_000_000
    if "_LCG_" in key:
        h["variant"] = "lcg"
    elif "RandomAccess" in key:
        h["variant"] = "standard"
    return h


def from_hpcc_summary(summary: dict[str, Any], procs: int) -> list[tuple[str, HpccKey, dict[str, Any], float]]:
    """(benchmark, declaration, params, value in clusterbench's unit) for every summary key of an
    hpcc run that a registered benchmark declares (pure: no process, no store)."""
    out = []
    for name, cls in all_benchmarks().items():
        for hk in cls.hpcc_keys:
            raw = summary.get(hk.key)
            if not isinstance(raw, (int, float)):
                continue
            params = {"engine": "hpcc", **_hints(hk.key, procs)}
            if not hk.applies(hk.metric, params):
                continue
            value = float(raw) / hk.scale * (float(params[hk.per]) if hk.per else 1.0)
            out.append((name, hk, params, value))
    return out


@register
class HpccSuite(Composite):
    name = "hpcc"
    help = "the HPC Challenge suite in one run, every figure with hpcc's summary key (--quick: about 2 minutes on 2 cores)"
    key_params = ("hpcc_key",)
    params = (
        *SUITE_PARAMS,
        Param("engine", str, "builtin", "builtin (clusterbench's kernels) or hpcc (Debian's hpcc, one run)", ENGINES),
        Param("skip", "strlist", (), "parts to leave out, e.g. hpcg,ring"),
    )

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        members = self.members()
        skip = self.skipped(params, "an hpcc part")
        engine = params.get("engine") or "builtin"
        if engine == "hpcc" and skip:
            raise UsageError("--skip applies to the builtin engine only (hpcc runs all its tests at once)",
                             "drop --skip, or use --engine builtin")
        wanted = ("hpl",) if engine == "hpcc" else tuple(m for m in members if m not in skip)
        parts: dict[str, dict] = {}
        for name in wanted:
            bench = get_benchmark(name)
            names = {p.name for p in bench.params}
            given = {k: params[k] for k in SUITE_SHARED if params.get(k) is not None and k in names}
            given.update({k: v for k, v in PART_PARAMS.get(name, {}).items() if k in names})
            if engine == "hpcc":
                given["engine"] = "hpcc"
            try:
                parts[name] = bench.resolve(ctx, given)
            except ClusterbenchError as exc:
                hint = f", or leave it out with --skip {name}" if engine == "builtin" else ""
                raise type(exc)(exc.problem, f"{exc.fix or 'fix it'}{hint}") from exc
        return {"skip": skip, "engine": engine, "parts": parts}

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list[Result]:
        if params["engine"] == "builtin":
            return super().run(ctx, params)
        return self._run_hpcc(ctx, params["parts"]["hpl"])

    def _run_hpcc(self, ctx: RunContext, hp: dict[str, Any]) -> list[Result]:
        """Debian's hpcc once, at the N/NB/grid ``run hpl`` chose; every declared key stored."""
        from clusterbench.benchmarks.hpl import engines
        from clusterbench.benchmarks.hpl.builtin_engine import BuiltinEngine
        from clusterbench.launch import mpi as mpimod

        case = engines.HplCase(n=hp["n"], nb=hp["nb"], p=hp["p"], q=hp["q"], pmap=hp["pmap"])
        res = engines.run_external("hpcc", case, mpi=mpimod.detect_mpi(), spec=BuiltinEngine().launch_spec(ctx, hp),
                                   timeout=ctx.timeout, exe=hp.get("engine_exe"))
        summary = res.get("summary") or {}
        procs = int(summary.get("CommWorldProcs") or case.p * case.q)
        found = from_hpcc_summary(summary, procs)
        if not found:
            raise KernelFailed("hpcc printed no summary key clusterbench knows", "see hpccoutf.txt; rerun")
        out = []
        common = {"n": case.n, "nb": case.nb, "grid": f"{case.p}x{case.q}", "engine_version": res.get("version")}
        for name, hk, params, value in found:
            out.append(ctx.emit(get_benchmark(name), hk.metric, [value], {**common, **params}, check_cv=False))
        return out
