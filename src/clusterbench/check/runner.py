"""``clusterbench check``: validate the suite and the baseline, run the suite (every entry
``repeat`` times, interleaved), tag the new runs, compare them with the baseline through
``compare``'s analysis, judge every figure (:mod:`.verdict`) and, when asked, move the baseline tag.

Everything that can be refused is refused before the first run starts: a bad suite, a bad option,
a baseline with no run (or none of this suite), a baseline measured on another cluster (unless
``allow_different_cluster``), a parameter a benchmark rejects when it resolves it on this node."""
from __future__ import annotations

import re
import shlex
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from clusterbench.analysis import compare as cmp
from clusterbench.benchmarks import all_benchmarks
from clusterbench.benchmarks.base import Progress, RunContext
from clusterbench.check import baseline as base
from clusterbench.check.suite import MIN_REPEAT, Suite
from clusterbench.check.verdict import CANNOT_JUDGE, EXIT_CANNOT_JUDGE, EXIT_CODES, counts, judge, overall, runs_needed
from clusterbench.errors import ClusterbenchError, UsageError
from clusterbench.records import Run
from clusterbench.store import Store
from clusterbench.store.names import check_tag

#: version of the ``check --json`` document, under the key ``check_schema``
CHECK_SCHEMA = 1

#: the most runs of an entry a check adds so that its figures can be judged at all
MAX_REPEAT = 10

REPEAT_WHY = ("compare takes the run as the unit of replication: each side needs 2 or more runs of a figure, and "
              "its t-test on the run medians must agree; 3 against 3 gives that test 4 degrees of freedom")


class CannotJudge(ClusterbenchError):
    """The check cannot judge at all (no baseline to compare with): its own exit code, never a pass."""

    exit_code = EXIT_CANNOT_JUDGE


@dataclass
class Options:
    baseline: str
    min_effect_pct: float = 3.0
    alpha: float = 0.01
    repeat: int | None = None
    tag: str | None = None
    update_baseline: bool = False
    allow_different_cluster: bool = False
    timeout: float | None = None
    oversubscribe: bool = False


@dataclass
class Plan:
    """What a check will do, everything validated: each entry's benchmark and resolved parameters,
    the probe, the baseline's runs that concern the suite (empty: no baseline yet) and their
    results, and how the cluster differs from the baseline's (allowed when it is not empty)."""

    suite: Suite
    opts: Options
    repeat: int
    tag: str
    probe: dict
    baseline_runs: list[Run]
    baseline_results: dict[str, list]
    no_baseline: str = ""
    differences: list = field(default_factory=list)


def default_tag(suite: Suite, now: datetime | None = None) -> str:
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S")
    name = re.sub(r"[^A-Za-z0-9._+=@-]", "-", suite.name)[:40].strip("-.") or "suite"
    return f"check-{name}-{stamp}"


def check_options(opts: Options) -> None:
    if not 0 <= opts.min_effect_pct < 100:
        raise UsageError(f"--min-effect {opts.min_effect_pct:g} is not a percentage from 0 up to (not including) 100",
                         "e.g. --min-effect 3%")
    if not 0 < opts.alpha < 1:
        raise UsageError(f"--alpha {opts.alpha:g} is not a probability between 0 and 1", "e.g. --alpha 0.01")
    if opts.repeat is not None and not MIN_REPEAT <= opts.repeat <= 1000:
        raise UsageError(f"--repeat {opts.repeat} is not allowed", f"give {MIN_REPEAT} to 1000: {REPEAT_WHY}")
    check_tag(opts.baseline)
    if opts.tag is not None:
        check_tag(opts.tag)
        if opts.tag == opts.baseline:
            raise UsageError(f"--tag {opts.tag} is the baseline's tag", "give another --tag, or use --update-baseline")
    if opts.timeout is not None and not opts.timeout > 0:
        raise UsageError(f"--timeout {opts.timeout:g} is not allowed", "give a number of seconds above 0")


def _baseline(store: Store, suite: Suite, tag: str) -> tuple[list[Run], dict[str, list], str]:
    """The baseline's complete runs that hold a figure of the suite, their figures, and why there is
    no baseline ('' when there is one)."""
    from clusterbench.report.compare import select

    if not store.all_tags().get(tag):
        return [], {}, f"no run is tagged '{tag}' in {store.path}"
    sel = select(store, f"tag:{tag}", full=False)
    if not sel.runs:
        return [], {}, f"baseline '{tag}' has no complete run: {cmp.left_out_text(sel.left_out)}"
    runs = base.relevant(sel.runs, sel.results, suite.benchmarks)
    if not runs:
        held = sorted({r.benchmark for res in sel.results.values() for r in res})
        return [], {}, (f"baseline '{tag}' holds no figure of suite {suite.name} "
                        f"({', '.join(sorted(suite.benchmarks))}); it holds {', '.join(held) or 'nothing'}")
    return runs, {str(r.id): sel.results[str(r.id)] for r in runs}, ""


def plan(store: Store, suite: Suite, opts: Options, probe: dict | None = None) -> Plan:
    """Validate everything and say what will run; raises before anything runs or is stored."""
    from clusterbench import session

    check_options(opts)
    tag = opts.tag or default_tag(suite)
    taken = store.all_tags()
    if opts.tag is None:  # two checks started within the same second
        tag = next(t for t in (tag, *(f"{tag}-{i}" for i in range(2, 1000))) if not taken.get(t))
    if taken.get(tag):
        raise UsageError(f"tag '{tag}' already names {taken[tag]} run(s)",
                         "give a new --tag: a check's runs must be only its own")
    if probe is None:
        from clusterbench.probe import probe as do_probe
        probe = do_probe()
    ctx = RunContext(probe=probe, timeout=opts.timeout or session.DEFAULT_TIMEOUT,
                     timeout_given=opts.timeout is not None, oversubscribe=opts.oversubscribe, progress=Progress())
    planned: list[Run] = []
    for i, e in enumerate(suite.entries, 1):
        try:
            [(bench, params)] = session.plan([e.benchmark], {e.benchmark: dict(e.params)}, ctx)
        except UsageError as exc:
            raise UsageError(f"suite {suite.path}: run {i} ({e.benchmark}): {exc.problem}", exc.fix) from None
        record = session.new_run_record(e.argv(), probe, "default")
        hosts = bench.hosts(params)
        if hosts:
            record["cluster"] = {"hosts": hosts}
        planned.append(Run.from_json(record))
    runs, results, missing = _baseline(store, suite, opts.baseline)
    if missing and not opts.update_baseline:
        raise CannotJudge(f"cannot judge: {missing}",
                          f"make this cluster's baseline: clusterbench check {shlex.quote(suite.name if suite.standard else suite.path)} "
                          f"--baseline {opts.baseline} --update-baseline")
    differences = base.cluster_differences(runs, planned) if runs else []
    if differences and not opts.allow_different_cluster:
        raise UsageError(f"baseline '{opts.baseline}' was measured on another cluster: "
                         f"{base.differences_text(differences)}",
                         "compare like with like, or pass --allow-different-cluster to judge anyway")
    return Plan(suite, opts, opts.repeat or suite.repeat, tag, probe, runs, results, missing, differences)


def execute(store: Store, p: Plan, say: Callable[[str], None] = lambda _: None) -> tuple[list[str], dict[str, Any]]:
    """Run every entry ``repeat`` times, interleaved (entry 1, 2, ..., 1, 2, ...: a drift during the
    check spreads over every figure rather than landing on one); each run tagged with the plan's tag.
    Then an entry whose figures hold too few samples a run for ``compare`` to reach p < alpha (HPL:
    one a run) is run again until it can (:func:`runs_needed`, at most :data:`MAX_REPEAT` runs).
    Returns the run ids and, per entry run more often, how many runs and why."""
    note = f"clusterbench check {p.suite.name} v{p.suite.version}"
    ids: list[str] = []
    per_run: dict[int, int] = {}
    total = p.repeat * len(p.suite.entries)

    def one(i: int, rep: int, of: int) -> None:
        from clusterbench import session

        e = p.suite.entries[i]
        say(f"check {p.suite.name}: run {len(ids) + 1}/{total}: {e.label} (repeat {rep}/{of})")
        argv = [*e.argv(), "--tag", p.tag, "--note", note]
        report = session.run([e.benchmark], {e.benchmark: dict(e.params)}, store=store, argv=argv,
                             timeout=e.timeout or p.opts.timeout, oversubscribe=p.opts.oversubscribe,
                             probe_data=p.probe, tags=[p.tag], note=note)
        ids.append(str(report.run.id))
        counts_now = [len(r.samples or [r.value]) for r in report.results]
        per_run[i] = min([per_run.get(i, 10 ** 9), *counts_now]) if counts_now else per_run.get(i, 0)

    for rep in range(p.repeat):
        for i in range(len(p.suite.entries)):
            one(i, rep + 1, p.repeat)
    extra: dict[str, Any] = {}
    for i, e in enumerate(p.suite.entries):
        k = per_run.get(i, 0)
        if not k:
            continue
        base_n = _baseline_samples(p, e.benchmark)
        need = runs_needed(k, base_n, p.opts.alpha, p.repeat, MAX_REPEAT)
        if need > p.repeat:
            why = (f"{k} sample(s) a run" + (f" against {base_n} in the baseline" if base_n else "")
                   + f": {need} runs are the fewest with which p < {p.opts.alpha:g} can be reached")
            say(f"check {p.suite.name}: {e.label}: {why}")
            extra[e.label] = {"runs": need, "why": why}
            total += need - p.repeat
            for rep in range(p.repeat, need):
                one(i, rep + 1, need)
    return ids, extra


def _baseline_samples(p: Plan, benchmark: str) -> int | None:
    """The fewest samples the baseline pools for one figure of ``benchmark`` (None: no baseline)."""
    if not p.baseline_runs:
        return None
    keys = tuple(getattr(all_benchmarks().get(benchmark), "key_params", ()))
    pooled: dict[tuple, int] = {}
    for res in p.baseline_results.values():
        for r in res:
            if r.benchmark == benchmark:
                ident = (r.metric, repr([(k, (r.params or {}).get(k)) for k in keys]))
                pooled[ident] = pooled.get(ident, 0) + len(r.samples or [r.value])
    return min(pooled.values()) if pooled else None


def _unmatched(results: dict[str, list]) -> list[dict]:
    seen: dict[tuple, dict] = {}
    for run_id, res in results.items():
        for r in res:
            seen.setdefault((r.benchmark, r.metric), {"benchmark": r.benchmark, "metric": r.metric, "params": {},
                                                      "label": f"{r.benchmark} {r.metric}", "runs": []})
            seen[(r.benchmark, r.metric)]["runs"].append(run_id)
    return list(seen.values())


def compare_with_baseline(store: Store, p: Plan, run_ids: list[str]) -> dict[str, Any]:
    """``compare``'s document, baseline (A) against this check's runs (B), with the plan's alpha and
    threshold; when nothing matches, every new figure is on side B only."""
    runs_b = store.get_runs(run_ids)
    res_b = store.results_of(run_ids, full=False)
    if not p.baseline_runs:
        return {"matches": [], "only_a": [], "only_b": _unmatched(res_b), "env": [], "summary": {}}
    keys = {name: tuple(cls.key_params) for name, cls in all_benchmarks().items()}
    try:
        return cmp.compare(p.baseline_runs, p.baseline_results, runs_b, res_b, keys, alpha=p.opts.alpha,
                           min_effect=p.opts.min_effect_pct / 100.0).as_dict()
    except UsageError:  # nothing in common
        return {"matches": [], "only_a": _unmatched(p.baseline_results), "only_b": _unmatched(res_b), "env": [],
                "summary": {}}


def move_baseline(store: Store, p: Plan, run_ids: list[str]) -> dict[str, Any]:
    """``--update-baseline``: the baseline tag taken off its runs that concern this suite and put on
    this check's runs. Returns what was done (printed; never silent)."""
    removed = [str(r.id) for r in p.baseline_runs]
    for rid in removed:
        store.tag_run(rid, remove=[p.opts.baseline])
    for rid in run_ids:
        store.tag_run(rid, add=[p.opts.baseline])
    return {"tag": p.opts.baseline, "removed_from": removed, "added_to": list(run_ids)}


def run_check(store: Store, suite: Suite, opts: Options, say: Callable[[str], None] = lambda _: None,
              probe: dict | None = None) -> dict[str, Any]:
    """The whole check; returns the ``--json`` document (its ``exit_code`` the command's)."""
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    p = plan(store, suite, opts, probe)
    ids, extra = execute(store, p, say)
    doc = compare_with_baseline(store, p, ids)
    figures = judge(doc, opts.min_effect_pct, suite.benchmarks)
    outcome = CANNOT_JUDGE if p.no_baseline else overall(figures)
    moved = move_baseline(store, p, ids) if opts.update_baseline else None
    jobids = {m["label"]: (m.get("runs_b") or [""])[0] for m in doc.get("matches") or []}
    return {"check_schema": CHECK_SCHEMA, "suite": suite.as_dict(), "started": started.isoformat(timespec="seconds"),
            "seconds": round(time.monotonic() - t0, 3), "baseline": opts.baseline,
            "baseline_runs": [str(r.id) for r in p.baseline_runs], "no_baseline": p.no_baseline or None,
            "tag": p.tag, "runs": ids, "repeat": p.repeat, "repeat_why": REPEAT_WHY, "extra_runs": extra,
            "min_effect_pct": opts.min_effect_pct, "alpha": opts.alpha, "outcome": outcome,
            "exit_code": EXIT_CODES[outcome], "counts": counts(figures), "figures": [f.as_dict() for f in figures],
            "cluster_differences": [c.as_dict() for c in p.differences], "env": doc.get("env") or [],
            "baseline_update": moved, "jobids": jobids, "hostname": socket.gethostname(),
            "comparison": doc if doc.get("matches") else None}


__all__ = ["CHECK_SCHEMA", "CannotJudge", "Options", "Plan", "plan", "execute", "compare_with_baseline",
           "move_baseline", "run_check", "default_tag", "check_options"]
