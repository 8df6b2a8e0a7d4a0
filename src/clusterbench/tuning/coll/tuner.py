"""``tune coll``: the search (:mod:`.search`) on the collectives benchmark, every launch a stored
run, and the file the MPI reads (:mod:`.rules`). See the package docstring."""
from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.benchmarks.mpi.coll import algbw_bytes, check_op_sizes
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.store import Store
from clusterbench.tuning.coll import mpich_tree
from clusterbench.tuning.coll import rules as rulesmod
from clusterbench.tuning.coll import search
from clusterbench.tuning.coll.algorithms import Algorithm, enumerate_algorithms, select
from clusterbench.tuning.hpl import parse_budget

SCHEMA = 1
#: seconds of timed iterations per size in a tune's launches (the benchmark's own default is 0.05)
TIME_PER_SIZE = 0.02
#: share of the budget kept for the verification
VERIFY_SHARE = 0.3
#: the benchmark's parameters ``tune coll`` passes through
BASE = ("ranks", "hosts", "hostfile", "mpi", "transport", "allow_root", "time_budget")


@dataclass(frozen=True)
class RulesFile:
    """Open MPI reading a dynamic rules file (the tuned configuration the verification runs)."""

    path: str

    def env(self) -> dict[str, str]:
        return {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_dynamic_rules_filename": self.path}

    def record(self) -> dict[str, Any]:
        return {"mpi": "openmpi", "param": "coll_tuned_dynamic_rules_filename", "value": self.path}


@dataclass(frozen=True)
class SelectionFile:
    """MPICH reading a JSON selection file (:mod:`.mpich_tree`: the tuned configuration the verification runs)."""

    path: str

    def env(self) -> dict[str, str]:
        return {mpich_tree.ENV: self.path}

    def record(self) -> dict[str, Any]:
        return {"mpi": "mpich", "param": mpich_tree.ENV, "value": self.path}


@dataclass
class CollTuneReport:
    """Everything ``tune coll`` found; :meth:`document` is its ``--json``."""

    tune_id: str
    op: str
    mpi: dict
    processes: int
    hosts: list | None
    sizes: list[int]
    candidates: list[dict]
    budget_s: float
    search: dict = field(default_factory=dict)
    verify: dict = field(default_factory=dict)
    per_size: list[dict] = field(default_factory=list)
    ranges: list[dict] = field(default_factory=list)
    default_best: list[int] = field(default_factory=list)
    undecided: list[int] = field(default_factory=list)
    output: dict = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    def document(self) -> dict[str, Any]:
        return {"tune_coll_schema": SCHEMA, **{k: getattr(self, k) for k in self.__dataclass_fields__}}


@contextmanager
def forced(env: Mapping[str, str]) -> Iterator[None]:
    """The process environment with ``env`` set (mpirun passes it to the ranks), restored after."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class StoredMeasure:
    """The measurement of :mod:`.search`: one stored ``<op>`` run per call, the algorithm forced
    through the environment (recorded by the benchmark as ``params.algorithm``)."""

    def __init__(self, store: Store, given: dict, probe: dict, *, argv: list[str], tune_id: str, timeout: float,
                 oversubscribe: bool, tags: Sequence[str], note: str | None, report: CollTuneReport) -> None:
        self.store, self.given, self.probe, self.argv, self.tune_id = store, given, probe, argv, tune_id
        self.timeout, self.oversubscribe, self.tags, self.note, self.report = timeout, oversubscribe, tags, note, report
        self.count = 0

    def __call__(self, op: str, sizes: Sequence[int], setting: Any) -> dict[int, float]:
        from clusterbench import session

        self.count += 1
        label = "default" if setting is None else (setting.label if isinstance(setting, Algorithm) else "tuned")
        argv = [*self.argv, f"--tune-id={self.tune_id}", f"--tune-trial={self.count}/{label}"]
        env = {} if setting is None else setting.env()
        try:
            with forced(env):
                rep = session.run([op], {op: {**self.given, "sizes": list(sizes)}}, store=self.store, argv=argv,
                                  timeout=self.timeout, oversubscribe=self.oversubscribe, probe_data=self.probe,
                                  tags=self.tags, note=self.note)
        except KernelFailed as exc:
            run = getattr(getattr(exc, "report", None), "run", None)
            self.report.failures.append({"setting": label, "error": str(exc).splitlines()[0][:200],
                                         "run": run.id if run else None})
            return {}
        self.report.runs.append(rep.run.id)
        return {int(r.params["size_bytes"]): float(r.value) for r in rep.results if r.metric == "latency"}


def _tune_id(op: str, mpi: Any, given: dict, sizes: list[int], cands: list[Algorithm]) -> str:
    ident = {"host": socket.gethostname(), "op": op, "mpi": [mpi.name, mpi.version, mpi.mpirun], "given": given,
             "sizes": sizes, "candidates": [a.label for a in cands], "t": time.time()}
    return hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:12]


def rules_for(op: str, p: int, by_size: Mapping[int, str], algs: Mapping[str, Algorithm]) -> list[rulesmod.MsgRule]:
    """Open MPI's message-size rules for the winners: each winner from its first size's byte
    count (Open MPI's count, :func:`algbw_bytes`) to the next change; Open MPI's own decision
    (0) below the smallest and above the largest size measured."""
    out = [rulesmod.MsgRule(0, 0)]
    for lo, _hi, lab in search.ranges(by_size):
        alg = 0 if lab == search.DEFAULT else int(algs[lab].value)
        b = algbw_bytes(op, lo, p)
        if out[-1].msg_size == b:
            out[-1] = rulesmod.MsgRule(b, alg)
        elif out[-1].algorithm != alg:
            out.append(rulesmod.MsgRule(b, alg))
    last = algbw_bytes(op, max(by_size), p) + 1
    if out[-1].algorithm != 0:
        out.append(rulesmod.MsgRule(last, 0))
    return out


def mpich_choice(by_size: Mapping[int, str]) -> str | None:
    """MPICH's CVAR holds for every size: the winner of the most sizes (None if none)."""
    wins = [lab for lab in by_size.values() if lab != search.DEFAULT]
    return max(sorted(set(wins)), key=wins.count) if wins else None


def tune(op: str, *, budget_s: float | str = "10m", base: dict[str, Any] | None = None, sizes: list[int] | None = None,
         algorithms: list[str] | None = None, output: str | None = None, store: Store | None = None,
         probe: dict | None = None, timeout: float = 300.0, oversubscribe: bool = False,
         progress: Callable[[dict], None] | None = None, argv: Sequence[str] | None = None, tags: Sequence[str] = (),
         note: str | None = None, measure: search.Measure | None = None,
         max_rounds: int = search.MAX_ROUNDS) -> CollTuneReport:
    """Tune ``op``'s algorithm per message size within ``budget_s``; see the package docstring.
    Bad input (unknown op, an algorithm the MPI lacks, an unwritable ``output``, a bad budget) is a
    UsageError before anything runs or is stored."""
    from clusterbench.benchmarks.mpi.common import detect
    from clusterbench.store.names import check_note, check_tag

    budget = parse_budget(budget_s)
    sizes = check_op_sizes(op, sizes)
    tags, note = [check_tag(t) for t in tags], check_note(note)
    given = {k: v for k, v in (base or {}).items() if v is not None and k in BASE}
    given.setdefault("time_budget", TIME_PER_SIZE)
    mpi = detect(given)
    label = f"{'Open MPI' if mpi.name == 'openmpi' else 'MPICH'} {mpi.version}"
    cands = select(enumerate_algorithms(mpi, op), algorithms, label, op)
    tree, tree_note, cands = _mpich_tree(mpi, op, cands, bool(algorithms), label)
    ext = "rules" if mpi.name == "openmpi" else ("json" if tree else "env")
    out_path = rulesmod.check_writable(output or f"tune-coll-{op}.{ext}")
    if probe is None:
        from clusterbench.probe import probe as do_probe
        probe = do_probe()
    ctx = RunContext(probe=probe, profile="default", timeout=timeout, oversubscribe=oversubscribe)
    p = get_benchmark(op).resolve(ctx, {**given, "sizes": sizes})  # ranks, hosts, sizes checked now
    procs = int(p["ranks"])
    algs = {a.label: a for a in cands}
    tid = _tune_id(op, mpi, given, sizes, cands)
    rep = CollTuneReport(tid, op, {"name": mpi.name, "version": mpi.version}, procs,
                         [h[0] for h in p.get("host_list") or []] or None, sizes,
                         [{"label": a.label, **a.record(), "name": a.name} for a in cands], budget)
    rep.notes.extend(tree_note)
    store = store if store is not None else Store()
    meas = measure or StoredMeasure(store, given, probe, argv=list(argv or ["clusterbench", "tune", "coll"]),
                                    tune_id=tid, timeout=timeout, oversubscribe=oversubscribe, tags=tags, note=note,
                                    report=rep)
    t0 = time.monotonic()
    settings: dict[str, Any] = {search.DEFAULT: None, **algs}
    ph = search.run_rounds(op, sizes, settings, meas, budget_s=budget, reserve_s=VERIFY_SHARE * budget,
                           progress=progress, max_rounds=max_rounds)
    rep.search = ph.as_dict()
    chosen = search.winners(ph, sizes)
    tmp = None
    try:
        if mpi.name == "openmpi":
            tmp = f"{out_path}.verify{os.getpid()}"
            rulesmod.write_file(tmp, rulesmod.format_ompi_rules(op, procs, rules_for(op, procs, chosen, algs)))
            tuned: Any = RulesFile(tmp)
        elif tree:
            tmp = f"{out_path}.verify{os.getpid()}"
            rulesmod.write_file(tmp, tree.text(op, _tree_ranges(chosen, algs)))
            tuned = SelectionFile(tmp)
        else:
            pick = mpich_choice(chosen)
            chosen = {s: (pick if pick and w != search.DEFAULT else search.DEFAULT) for s, w in chosen.items()}
            tuned = algs[pick] if pick else None
        left = max(0.0, budget - (time.monotonic() - t0))
        vph, kept = search.verify(op, sizes, tuned, chosen, meas, budget_s=left, progress=progress,
                                  max_rounds=max_rounds)
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    rep.verify = vph.as_dict()
    if mpi.name != "openmpi" and not tree and any(v.verdict == search.WORSE for v in vph.verdicts.values()):
        rep.notes.append("MPICH's CVAR holds for every size and the verification found sizes where it is slower: "
                         "not kept")
        kept = {s: search.DEFAULT for s in sizes}
    _fill(rep, ph, vph, chosen, kept, algs)
    rep.elapsed_s = round(time.monotonic() - t0, 2)
    _write(rep, op, procs, kept, algs, out_path, mpi.name, tree)
    return rep


def _mpich_tree(mpi: Any, op: str, cands: list[Algorithm], explicit: bool,
                label: str) -> tuple[mpich_tree.LibraryTree | None, list[str], list[Algorithm]]:
    """MPICH: the library's default selection tree for a per-size file (None: one CVAR for all
    sizes, with the one-line reason), and the candidates the tree can name (one it cannot: a
    UsageError if asked for by name, else left out with a note)."""
    if mpi.name == "openmpi":
        return None, [], cands
    tree, why = mpich_tree.default_for(mpi.mpicc, op)
    if tree is None:
        return None, [why], cands
    lacking = [a for a in cands if not tree.knows(op, str(a.value))]
    if lacking and explicit:
        a = lacking[0]
        raise UsageError(f"{label}'s selection tree cannot name {op} algorithm {a.value!r} "
                         f"({mpich_tree.tree_algorithm(op, str(a.value))} is not in {tree.library})",
                         f"choose from: {', '.join(str(c.value) for c in cands if c not in lacking) or 'none'}")
    notes = [why] + [f"{a.value}: {mpich_tree.tree_algorithm(op, str(a.value))} is not in {tree.library}, so a "
                     "selection file cannot name it: not tried" for a in lacking]
    kept = [a for a in cands if a not in lacking]
    if not kept:
        return None, notes + ["no candidate the selection tree can name: one CVAR for all sizes"], cands
    return tree, notes, kept


def _tree_ranges(by_size: Mapping[int, str], algs: Mapping[str, Algorithm]) -> list[tuple[int, int, str | None]]:
    """The size ranges of :func:`mpich_tree.tuned_tree`: (first size, last size, CVAR value or None)."""
    return [(lo, hi, None if lab == search.DEFAULT else str(algs[lab].value)) for lo, hi, lab in search.ranges(by_size)]


def _fill(rep: CollTuneReport, ph: search.Phase, vph: search.Phase, chosen: Mapping[int, str],
          kept: Mapping[int, str], algs: Mapping[str, Algorithm]) -> None:
    for s in rep.sizes:
        sv, vv = ph.verdicts.get(s), vph.verdicts.get(s)
        rep.per_size.append({"size_bytes": s, "msg_bytes": algbw_bytes(rep.op, s, rep.processes),
                             "search": sv.as_dict() if sv else None, "chosen": chosen.get(s),
                             "verify": vv.as_dict() if vv else None, "kept": kept.get(s)})
    for lo, hi, lab in search.ranges(kept):
        gains = [vph.verdicts[s].gain_pct for s in rep.sizes if lo <= s <= hi and s in vph.verdicts]
        rep.ranges.append({"from_bytes": lo, "to_bytes": hi, "algorithm": lab,
                           "setting": algs[lab].record() if lab in algs else None,
                           "verified_gain_pct": [g for g in gains if g is not None] if lab != search.DEFAULT else []})
    # the default is best where no candidate was significantly faster (the search judged the size,
    # or the verification did); undecided where the samples could not be judged at all
    for s in rep.sizes:
        if kept.get(s) != search.DEFAULT:
            continue
        sv = ph.verdicts.get(s)
        judged = (sv is not None and sv.verdict != search.UNKNOWN) or (chosen.get(s, search.DEFAULT) != search.DEFAULT
                                                                       and s in vph.verdicts)
        (rep.default_best if judged else rep.undecided).append(s)
    if ph.stopped == "budget" or vph.stopped == "budget":
        rep.notes.append("the budget ended the rounds before every size was decided: undecided sizes keep the default")


def _write(rep: CollTuneReport, op: str, procs: int, kept: Mapping[int, str], algs: Mapping[str, Algorithm],
           path: str, mpi_name: str, tree: mpich_tree.LibraryTree | None = None) -> None:
    if all(w == search.DEFAULT for w in kept.values()):
        rep.output = {"path": path, "written": False, "why": "the MPI's default was best (or not beaten "
                      "significantly) at every size: nothing to write"}
        return
    head = (f"clusterbench tune coll {rep.tune_id}: {op} on {procs} ranks, {rep.mpi['name']} {rep.mpi['version']}\n"
            + "\n".join(f"{r['from_bytes']}..{r['to_bytes']} B: {r['algorithm']} (verified gain % "
                        f"{', '.join(f'{g:.1f}' for g in r['verified_gain_pct'])})"
                        for r in rep.ranges if r["algorithm"] != search.DEFAULT))
    if mpi_name == "openmpi":
        text = rulesmod.format_ompi_rules(op, procs, rules_for(op, procs, kept, algs), comment=head)
        use = (f"mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename {path} ...")
        fmt = "openmpi-dynamic-rules"
    elif tree:
        text = tree.text(op, _tree_ranges(kept, algs))  # JSON: no comment (MPICH reads every key)
        use = f"{mpich_tree.ENV}={path} mpiexec ..."
        fmt = "mpich-selection-json"
    else:
        a = algs[next(w for w in kept.values() if w != search.DEFAULT)]
        text = rulesmod.format_mpich_env(a.param, str(a.value), comment=head)
        use = f"env $(grep -v '^#' {path}) mpiexec ..."
        fmt = "mpich-cvar-env"
    rulesmod.write_file(path, text)
    rep.output = {"path": path, "written": True, "format": fmt, "use": use}
    if tree:
        rep.output.update({"env": {mpich_tree.ENV: path}, "library": tree.library})


__all__ = ["CollTuneReport", "RulesFile", "SelectionFile", "StoredMeasure", "forced", "mpich_choice", "rules_for", "tune",
           "TIME_PER_SIZE", "BASE"]
