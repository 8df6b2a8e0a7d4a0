"""The tuner: stage 0 (dgemm against k = NB), stage 1 (short runs), stage 2 (confirmation at
full N) within a time budget; see the package docstring (clusterbench.tuning.hpl)."""
from __future__ import annotations

import hashlib
import json
import math
import shlex
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import Result, RunContext, allowed_cpus
from clusterbench.benchmarks.hpl.sizing import EST_EFFICIENCY, hpl_flops
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.probe.blas import installed_blas, resolve_blas
from clusterbench.store import Store
from clusterbench.text import seconds
from clusterbench.tuning.hpl.model import Trial, TuneReport, predict_rmax
from clusterbench.tuning.hpl.space import DEFAULT_BLAS, Config, Space, grid_options

#: stage 0: keep an NB whose dgemm rate is at least this fraction of its BLAS's best ...
NB_KEEP = 0.85
#: ... and at least this many NBs per BLAS whatever the rates (the dgemm is noisy on a shared node)
NB_MIN_KEPT = 3
#: stage 0: keep a BLAS whose best dgemm rate is at least this fraction of the best BLAS's
BLAS_KEEP = 0.8
#: stage 2: configurations confirmed at full N
TOP_K = 3
#: seconds a launch costs besides the kernel's timed part, until one has been measured
LAUNCH_GUESS_S = 1.5
#: seconds per stage-0 dgemm, until one has been measured
DGEMM_GUESS_S = 0.4
SCHEMA = 1

Progress = Callable[[dict], None]


# ---------------------------------------------------------------------------------------------
# The tuner
# ---------------------------------------------------------------------------------------------
def parse_budget(text: str | float | int) -> float:
    """'20m', '90s', '1h', '1h30m', '300' (seconds) -> seconds."""
    if isinstance(text, (int, float)):
        val = float(text)
    else:
        import re
        s = str(text).strip().lower()
        parts = re.findall(r"(\d+(?:\.\d+)?)\s*([hms]?)", s)
        if not s or "".join(a + b for a, b in parts) != s.replace(" ", ""):
            raise UsageError(f"--budget {text!r} is not a duration", "write it like 20m, 90s, 1h or 1h30m")
        val = sum(float(a) * {"h": 3600, "m": 60, "s": 1, "": 1}[u] for a, u in parts)
    if not val > 0:
        raise UsageError(f"--budget {text!r} is not allowed", "give a positive duration, e.g. --budget 20m")
    return val


def _flat(d: dict[str, Any]) -> str:
    return json.dumps(d, sort_keys=True, default=str)


def _words(command: str) -> list[str]:
    """A stored command line's words: shell-quoted (``shlex``) since the command is stored quoted,
    joined by spaces before (a quote in an old note: split at spaces)."""
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


class _Tuner:
    def __init__(self, space: Space, n: int | None, budget_s: float | str, store: Store, probe: dict, *,
                 mem: float, base: dict[str, Any], resume: bool, progress: Progress | None, top_k: int,
                 timeout: float, oversubscribe: bool, argv: Sequence[str] | None, n_small: int | None,
                 tags: Sequence[str] = (), note: str | None = None) -> None:
        space.check()
        from clusterbench.store.names import check_note, check_tag
        self.tags, self.note = [check_tag(t) for t in tags], check_note(note)
        if top_k < 1:
            raise UsageError(f"top_k {top_k} is not allowed", "confirm at least 1 configuration at full N")
        self.space, self.store, self.probe = space, store, probe
        self.budget_s = parse_budget(budget_s)
        self.base = {k: v for k, v in base.items() if v is not None}
        unknown = set(self.base) - {p.name for p in get_benchmark("hpl").params}
        if unknown or {"nb", "grid", "topology", "blas", "n", "pmap", "ranks"} & set(self.base):
            bad = sorted(unknown or {"nb", "grid", "topology", "blas", "n", "pmap", "ranks"} & set(self.base))[0]
            raise UsageError(f"hpl parameter {bad!r} cannot be fixed in a tune",
                             "the tuner sets nb, grid, topology, blas and n itself; give the space instead")
        self.resume, self.progress, self.top_k = resume, progress, top_k
        self.timeout, self.oversubscribe = timeout, oversubscribe
        self.argv = list(argv) if argv else ["clusterbench", "tune", "hpl"]
        self.ctx = RunContext(probe=probe, profile="default", timeout=timeout, oversubscribe=oversubscribe)
        self.bench = get_benchmark("hpl")
        self.t0 = time.monotonic()
        self.launch_s: list[float] = []
        self.done: dict[str, Trial] = {}
        self.dgemm_wall: list[float] = []
        self._blas_paths()
        self._configs()
        self._sizes(n, mem, n_small)
        self.tune_id = self._tune_id()
        self.report = TuneReport(self.tune_id, self.n, self.n_small, self.budget_s, len(self.configs))
        self.stored = self._stored() if resume else {}
        self._check_budget()

    # -- setting up (all before anything runs: bad input stores nothing) ------------------------
    def _blas_paths(self) -> None:
        names = list(self.space.blas) if self.space.blas else [b for b in DEFAULT_BLAS if b in installed_blas()]
        if not names:
            raise UsageError("no BLAS library found to tune with", "install libopenblas0 or libblis4, or give "
                             "--blas-list /path/to/libblas.so")
        self.blas_paths = {}
        for name in dict.fromkeys(names):
            label, path = resolve_blas(name)
            self.blas_paths[name if "/" not in name else label] = path

    def _configs(self) -> None:
        hosts = self.base.get("hosts") or self.base.get("hostfile")
        probe_params = {**self.base, "n": 64, "nb": 32}
        self.ranks: dict[str, int] = {}
        for topo in self.space.topologies:
            p = self.bench.resolve(self.ctx, {**probe_params, "topology": topo,
                                              "blas": next(iter(self.blas_paths.values()))})
            self.ranks[topo] = p["ranks"]
            self.cores = p["ranks"] * p["threads_per_rank"]
        self.hosts = hosts
        self.configs = [Config(b, topo, int(nb), gp, gq, pm)
                        for b in self.blas_paths for topo in self.space.topologies
                        for gp, gq, pm in grid_options(self.ranks[topo], self.space.pmaps)
                        for nb in sorted(dict.fromkeys(self.space.nbs))]

    def _sizes(self, n: int | None, mem: float, n_small: int | None) -> None:
        nbs = sorted(dict.fromkeys(int(x) for x in self.space.nbs))
        if n is None:  # hpl's own rule (a fraction of MemAvailable), with the largest NB's work space
            c = self.configs[0]
            p = self.bench.resolve(self.ctx, {**self.base, "mem": mem, "nb": nbs[-1], "topology": c.topology,
                                              "grid": c.grid, "blas": self.blas_paths[c.blas]})
            n = int(p["n"])
        if n < 2 * nbs[0]:
            raise UsageError(f"N={n} is too small to tune NB {nbs[0]}", f"give --n {4 * nbs[-1]} or more")
        self.n = n
        ns = n_small if n_small is not None else max(n // 2, min(n, 4 * nbs[-1]))
        if not 1 <= ns <= n:
            raise UsageError(f"the short-run size {ns} is not in 1..N={n}", "leave it to the tuner (about N/2)")
        self.n_small = ns
        # every run the tune may start must be acceptable to hpl (memory, timeout, grid): check now
        for c in self.configs:
            for size in {n, ns}:
                if c.nb <= size:
                    self.bench.resolve(self.ctx, self._given(c, size))
        if not any(c.nb <= ns for c in self.configs):
            raise UsageError(f"every NB is larger than the short-run size {ns}", "give smaller NBs or a larger --n")

    def _tune_id(self) -> str:
        cpu = (self.probe.get("cpu") or {}).get("model")
        ident = {"host": socket.gethostname(), "cpu": cpu, "cores": self.cores, "n": self.n, "n_small": self.n_small,
                 "space": [asdict(c) for c in self.configs], "blas": self.blas_paths,
                 "base": {k: v for k, v in self.base.items() if k not in ("allow_root", "launch_timeout")}}
        return hashlib.sha1(_flat(ident).encode()).hexdigest()[:12]

    def _stored(self) -> dict[str, dict]:
        """Trials of this tune already in the store: key -> {run, results}."""
        out: dict[str, dict] = {}
        tag = f"--tune-id={self.tune_id}"
        for run in self.store.list_runs():
            words = _words(run.command or "")
            if tag not in words:
                continue
            key = next((w.split("=", 1)[1] for w in words if w.startswith("--tune-trial=")), None)
            if key is None:
                continue
            if run.status == "complete" or not str(run.error or "").startswith("interrupted"):
                if key not in out or run.status == "complete":
                    out[key] = {"run": run, "results": self.store.results(run.id)
                                if run.status == "complete" else []}
        return out

    def _check_budget(self) -> None:
        blas = len(self.blas_paths)
        nbs = len(set(self.space.nbs))
        need = blas * (2 * nbs + 1) * DGEMM_GUESS_S + self._est_hpl(self._first_candidate(), self.n_small)
        if self.budget_s < need:
            raise UsageError(f"--budget {self.budget_s:g}s is too small for even one trial (stage 0's {2 * blas * nbs} "
                             f"dgemm runs and one short HPL run at N={self.n_small} need about {seconds(need)} s)",
                             f"give --budget {math.ceil(need * 2)}s or more")

    def _first_candidate(self) -> Config:
        return min((c for c in self.configs if c.nb <= self.n_small), key=lambda c: abs(c.nb - 192))

    # -- estimates -----------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.budget_s - self.elapsed()

    def _launch(self, n: int) -> float:
        """Wall seconds of a launch besides the timed part (start-up, matrix generation, check)."""
        base = max(self.launch_s) if self.launch_s else LAUNCH_GUESS_S
        return base + 1.5e-8 * n * n

    def _rate_guess(self, c: Config) -> float:
        """Gflop/s expected of c before it ran at all: half its dgemm rate per core, else 40% of Rpeak."""
        d = self.dgemm.get((c.blas, c.nb)) if hasattr(self, "dgemm") else None
        if d:
            return 0.5 * d * self.cores
        rp = ((self.probe.get("rpeak") or {}).get("per_core") or {}).get("dp_gflops_nominal") or 10.0
        return EST_EFFICIENCY * rp * self.cores

    def _est_hpl(self, c: Config, n: int, rate: float | None = None) -> float:
        return self._launch(n) + hpl_flops(n) / ((rate or self._rate_guess(c)) * 1e9)

    # -- running one trial ------------------------------------------------------------------------
    def _given(self, c: Config, n: int) -> dict[str, Any]:
        g = {**self.base, "n": n, "nb": c.nb, "grid": c.grid, "pmap": c.pmap, "topology": c.topology,
             "blas": self.blas_paths[c.blas]}
        ct = getattr(self, "coretypes", {}).get(c.blas) or self.base.get("openblas_coretype")
        if ct and c.blas == "openblas":
            g["openblas_coretype"] = ct
        elif "openblas_coretype" in g and c.blas != "openblas":
            del g["openblas_coretype"]
        return g

    def _emit(self, event: str, trial: Trial | None = None, **extra: Any) -> None:
        if self.progress:
            self.progress({"event": event, "trial": trial, "elapsed_s": self.elapsed(), **extra})

    def _measure(self, trial: Trial, bench: str, given: dict[str, Any], profile: str = "default") -> Trial:
        """Run (or take from the store) one trial; a failed kernel is recorded, not fatal."""
        from clusterbench import session

        if trial.key in self.done:  # the same measurement asked twice in one tune (stage 0's reference k)
            return self.done[trial.key]
        self.done[trial.key] = trial
        self.report.trials.append(trial)
        got = self.stored.get(trial.key)
        if got is not None:
            self._from_store(trial, got)
            self._emit("reused", trial)
            return trial
        self._emit("start", trial)
        argv = [*self.argv, f"--tune-id={self.tune_id}", f"--tune-trial={trial.key}"]
        t = time.monotonic()
        try:
            rep = session.run([bench], {bench: given}, profile=profile, store=self.store, argv=argv,
                              timeout=self.timeout, oversubscribe=self.oversubscribe, probe_data=self.probe,
                              tags=self.tags, note=self.note)
        except KernelFailed as exc:
            trial.status, trial.note = "failed", str(exc)
            trial.wall_s = time.monotonic() - t
            rep_ = getattr(exc, "report", None)
            trial.run_id = rep_.run.id if rep_ else None
            self._emit("failed", trial)
            return trial
        trial.wall_s = time.monotonic() - t
        trial.run_id = rep.run.id
        trial.status = "measured"
        self._fill(trial, rep.results)
        if trial.kind == "hpl" and trial.time_s:
            self.launch_s.append(max(0.0, trial.wall_s - trial.time_s - 1.5e-8 * (trial.n or 0) ** 2))
        elif trial.kind == "dgemm":
            self.dgemm_wall.append(trial.wall_s)
        self._emit("done", trial)
        return trial

    def _from_store(self, trial: Trial, got: dict) -> None:
        run = got["run"]
        trial.run_id = run.id
        if run.status != "complete":
            trial.status, trial.note = "failed", run.error
            return
        trial.status = "reused"
        self._fill(trial, got["results"])

    def _fill(self, trial: Trial, results: list[Result]) -> None:
        metric = {"hpl": "rmax", "dgemm": "gflops", "peak": "gflops"}[trial.kind]
        rs = [r for r in results if r.metric == metric]
        if trial.kind == "peak":
            rs = rs[-1:]
        if not rs:
            trial.status, trial.note = "failed", f"no {metric} result"
            return
        r = rs[0]
        trial.value = float(r.value)
        trial.params = {k: r.params.get(k) for k in ("blas_config", "openblas_coretype",
                                                          "openblas_coretype_applied", "cores", "threads",
                                                          "percent_of_rpeak", "grid", "topology", "nb", "n", "k")
                        if k in r.params}
        lim = {x["name"]: x for x in r.limits or []}
        trial.percent_rpeak = round(100 * lim["rpeak"]["fraction"], 2) if "rpeak" in lim else None
        if "measured_peak" in lim:
            trial.percent_measured_peak = round(100 * lim["measured_peak"]["fraction"], 2)
        if trial.kind == "hpl":
            trial.time_s = float(r.params.get("time_s") or 0) or None
            trial.breakdown_s = r.params.get("breakdown_s")
        trial.params["warnings"] = [w["code"] for w in r.warnings or []]

    # -- stage 0 ---------------------------------------------------------------------------------
    def stage0(self) -> None:
        self.coretypes: dict[str, str | None] = {}
        self.dgemm: dict[tuple[str, int], float] = {}
        self._ensure_peak()
        m = int(min(2000, max(1000, self.n // 2)))  # a local block of the matrix; >= 1000 so a sample is not µs
        nbs = sorted(dict.fromkeys(int(x) for x in self.space.nbs))
        ref_nb = min(nbs, key=lambda x: abs(x - 192))
        for blas, path in self.blas_paths.items():
            given = {"mode": "single", "n": m, "k": ref_nb, "samples": 5, "blas": path}
            ct = (self.base.get("openblas_coretype") or "auto") if blas == "openblas" else None
            if ct:
                given["openblas_coretype"] = ct
            first = self._measure(Trial(f"0/dgemm/{blas}/{ct or '-'}/k{ref_nb}/m{m}", 0, "dgemm", None, m,
                                        note=f"k={ref_nb}"), "dgemm", given)
            applied = first.params.get("openblas_coretype_applied")
            if ct == "auto" and applied:  # auto changed the kernels: the library's own choice is the rival
                second = self._measure(Trial(f"0/dgemm/{blas}/none/k{ref_nb}/m{m}", 0, "dgemm", None, m,
                                             note=f"k={ref_nb}, OpenBLAS's own core type"), "dgemm",
                                       {**given, "openblas_coretype": "none"})
                if (second.value or 0) > (first.value or 0):
                    ct = "none"
                self.report.notes.append(
                    f"OpenBLAS core type: auto set OPENBLAS_CORETYPE={applied} ({first.value or 0:.1f} Gflop/s at "
                    f"k={ref_nb}), the library's own choice gave {second.value or 0:.1f} Gflop/s: "
                    f"openblas:{ct} is used")
            self.coretypes[blas] = ct
            if ct:
                given["openblas_coretype"] = ct
            # two passes, the second in reverse order, best of both: a busy node only ever slows a
            # sample down, and a burst of someone else's work then hits one pass of an NB, not both
            for rnd, order in enumerate((nbs, nbs[::-1])):
                for nb in order:
                    key = f"0/dgemm/{blas}/{ct or '-'}/k{nb}/m{m}" + (f"/pass{rnd + 1}" if rnd else "")
                    t = self._measure(Trial(key, 0, "dgemm", None, m, note=f"k={nb}" + (" (pass 2)" if rnd else "")),
                                      "dgemm", {**given, "k": nb})
                    if t.value:
                        self.dgemm[(blas, nb)] = max(t.value, self.dgemm.get((blas, nb), 0.0))
        self.report.coretypes = dict(self.coretypes)
        for (b, nb), v in self.dgemm.items():
            self.report.dgemm.setdefault(b, {})[nb] = v
        self._prune(nbs)

    def _ensure_peak(self) -> None:
        """A stored FMA peak for this core count, so every HPL figure gets its % of the measured peak."""
        if self.hosts:
            return  # the peak of several nodes is not one node's peak kernel
        have = [h for h in self.store.history("peak", "gflops") if (h.params or {}).get("threads") == self.cores]
        if have:
            return
        threads = min(self.cores, len(allowed_cpus(self.ctx)))
        self._measure(Trial(f"0/peak/t{threads}", 0, "peak", None, None, note="FMA peak (for % of measured peak)"),
                      "peak", {"threads": threads, "sp": False}, profile="quick")

    def _prune(self, nbs: list[int]) -> None:
        best_blas = {b: max((v for (bb, _), v in self.dgemm.items() if bb == b), default=0.0) for b in self.blas_paths}
        top = max(best_blas.values(), default=0.0)
        self.survivors: list[Config] = []
        for b, best in best_blas.items():
            if best <= 0:
                self.report.pruned.append({"what": f"BLAS {b}", "why": "its dgemm did not run"})
                continue
            if best < BLAS_KEEP * top:
                self.report.pruned.append({"what": f"BLAS {b}", "why": f"best dgemm {best:.1f} Gflop/s is "
                                           f"{best / top:.0%} of the best BLAS's {top:.1f} (< {BLAS_KEEP:.0%})"})
                continue
            ranked = sorted((nb for nb in nbs if (b, nb) in self.dgemm), key=lambda nb: -self.dgemm[(b, nb)])
            keep = {nb for nb in ranked if self.dgemm[(b, nb)] >= NB_KEEP * best} | set(ranked[:NB_MIN_KEPT])
            for nb in ranked:
                if nb not in keep:
                    self.report.pruned.append({"what": f"{b} NB {nb}", "why": f"dgemm at k={nb} "
                                               f"{self.dgemm[(b, nb)]:.1f} Gflop/s is {self.dgemm[(b, nb)] / best:.0%} "
                                               f"of {b}'s best {best:.1f} (< {NB_KEEP:.0%})"})
            too_big = sorted(nb for nb in keep if nb > self.n_small)
            if too_big:
                self.report.pruned.append({"what": f"{b} NB {','.join(map(str, too_big))}",
                                           "why": f"larger than the short-run size N_s={self.n_small}"})
            self.survivors += [c for c in self.configs if c.blas == b and c.nb in keep and c.nb <= self.n_small]

    # -- stage 1 ---------------------------------------------------------------------------------
    def stage1(self, reserve: bool) -> None:
        order = sorted(self.survivors, key=lambda c: (-self.dgemm.get((c.blas, c.nb), 0.0),
                                                      self.space.topologies.index(c.topology), c))
        self.small: dict[Config, Trial] = {}
        for i, c in enumerate(order):
            key = f"1/hpl/{c.label()}/n{self.n_small}"
            if key not in self.stored:
                est = self._est_hpl(c, self.n_small, self._rate_seen(c))
                room = self._confirm_cost() if reserve else 0.0
                if est + room > self.left():
                    self._skip(order[i:], 1, self.n_small,
                               f"budget: about {est:.1f} s each, {seconds(self.left())} s left"
                               + (f" with {seconds(room)} s kept for a confirmation at full N" if room else ""))
                    return
            t = self._measure(Trial(key, 1, "hpl", c, self.n_small), "hpl", self._given(c, self.n_small))
            if t.value:
                self.small[c] = t

    def _rate_seen(self, c: Config) -> float | None:
        """Mean short-run Rmax measured so far for c's BLAS and topology (the best guess for c)."""
        seen = [t.value for cc, t in getattr(self, "small", {}).items()
                if cc.blas == c.blas and cc.topology == c.topology and t.value]
        return sum(seen) / len(seen) if seen else None

    def _confirm_cost(self) -> float:
        if not getattr(self, "small", None):
            return self._est_hpl(self._first_candidate(), self.n)
        best = max(self.small.values(), key=lambda t: self.predict(t))
        return self._launch(self.n) + hpl_flops(self.n) / (self.predict(best) * 1e9)

    def _skip(self, configs: Sequence[Config], stage: int, n: int, why: str) -> None:
        self.report.budget_stopped = True
        self.report.notes.append(f"stage {stage}: {len(configs)} trial(s) not started ({why})")
        for c in configs:
            self.report.trials.append(Trial(f"{stage}/hpl/{c.label()}/n{n}", stage, "hpl", c, n, status="skipped",
                                            note="budget"))
        self._emit("skipped", None, count=len(configs), stage=stage)

    # -- the model -------------------------------------------------------------------------------
    def predict(self, small: Trial, n: int | None = None) -> float:
        """Rmax at N (default the tune's) from one short run (model.predict_rmax)."""
        return predict_rmax(small, n or self.n)

    # -- stage 2 ---------------------------------------------------------------------------------
    def stage2(self) -> None:
        ranked = sorted(self.small.values(), key=lambda t: -self.predict(t))
        picks = ranked[: self.top_k]
        for i, st in enumerate(picks):
            c = st.config
            assert c is not None
            model = self.predict(st)
            pred = model * (self.report.calibration or 1.0)
            key = f"2/hpl/{c.label()}/n{self.n}"
            if key not in self.stored:
                est = self._launch(self.n) + hpl_flops(self.n) / (pred * 1e9)
                if est > self.left():
                    self._skip([p.config for p in picks[i:] if p.config], 2, self.n,
                               f"budget: about {est:.1f} s each, {seconds(self.left())} s left")
                    return
            t = self._measure(Trial(key, 2, "hpl", c, self.n, predicted=round(pred, 3),
                                    predicted_model=round(model, 3)), "hpl", self._given(c, self.n))
            if t.value and self.report.calibration is None:
                self.report.calibration = round(t.value / model, 4)

    # -- the whole tune ----------------------------------------------------------------------------
    def run(self, stop_after: int | None = None) -> TuneReport:
        rep = self.report
        try:
            self.stage0()
            self.stage1(reserve=stop_after is None or stop_after >= 2)
            if stop_after is None or stop_after >= 2:
                if self.small:
                    self.stage2()
                else:
                    rep.notes.append("no short run succeeded: nothing to confirm")
        finally:
            rep.elapsed_s = self.elapsed()
            full = [t for t in rep.trials if t.kind == "hpl" and t.stage == 2 and t.value]
            short = [t for t in rep.trials if t.kind == "hpl" and t.stage == 1 and t.value]
            rep.best = max(full or short, key=lambda t: t.value or 0.0, default=None)
            if rep.best is not None and not full:
                rep.notes.append(f"no run at full N={self.n} fitted the budget: the best is a short run at "
                                 f"N={self.n_small}, not confirmed")
        return rep


def tune(space: Space | None = None, n: int | None = None, budget_s: float | str = 1200.0, store: Store | None = None,
         probe: dict | None = None, *, mem: float = 0.8, base: dict[str, Any] | None = None, resume: bool = True,
         progress: Progress | None = None, top_k: int = TOP_K, timeout: float = 900.0, oversubscribe: bool = False,
         argv: Sequence[str] | None = None, n_small: int | None = None, stop_after: int | None = None,
         tags: Sequence[str] = (), note: str | None = None) -> TuneReport:
    """Tune HPL's NB x grid x topology (x BLAS) at order ``n`` (default: ``mem`` of MemAvailable)
    within ``budget_s`` seconds; every trial is stored in ``store``; see the module docstring.

    ``base`` holds the other ``hpl`` parameters (hosts, hostfile, allow_root, transport, engine,
    seed, openblas_coretype). ``progress(event)`` is called at each trial's start and end
    (``event["event"]`` in start, done, reused, failed, skipped; ``event["trial"]``). ``stop_after``
    ends after that stage (1: no confirmation). ``tags`` and ``note`` go with every trial's run. Raises UsageError before anything runs on bad
    input or a budget too small for one trial; an interruption keeps every finished trial stored
    and a rerun with ``resume=True`` takes them from the store."""
    from clusterbench.probe import probe as do_probe

    tuner = _Tuner(space or Space(), n, budget_s, store if store is not None else Store(), probe or do_probe(),
                   mem=mem, base=dict(base or {}), resume=resume, progress=progress, top_k=top_k, timeout=timeout,
                   oversubscribe=oversubscribe, argv=argv, n_small=n_small, tags=tags, note=note)
    return tuner.run(stop_after)
