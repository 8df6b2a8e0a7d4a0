"""``clusterbench doctor --fix / --undo / --verify``: change a setting a rule found, record it, put it back.

:func:`plan_fix` / :func:`apply_fix` (``doctor --fix RULE [--yes]``): the rule is read afresh on
every node, so the undo commands hold the values there *now*; nothing runs without ``yes``; the fix
is recorded in the store (the journal: ``fixes``, as ``applying``) before the first command runs,
each command runs on its node (``sh -c``, bounded), a failing command rolls back what was done and
removes the record, and the rule is read again afterwards. A fix that is advice (reboot, kernel,
cooling) is refused with the advice. :func:`undo_fix` (``--undo FIX_ID``) runs the recorded undo
commands. :func:`verify_fix` (``--verify RULE --benchmark "run ..."``): the benchmark ``repeat``
times before, the fix, ``repeat`` times after (tagged runs in the store), ``compare`` of the two
tags, then the fix kept or undone as ``keep`` says (``if-better``: kept only when a figure is
significantly better and none significantly worse).
"""
from __future__ import annotations

import os
import shlex
import time
import uuid
from typing import Any, Callable, Sequence

from clusterbench.doctor import engine
from clusterbench.doctor.gather import diagnose, run_clusterbench
from clusterbench.doctor.rule import Rule
from clusterbench.errors import EnvironmentProblem, UsageError

#: seconds for one fix or undo command on one node
FIX_TIMEOUT = 30.0
KEEP = ("if-better", "always", "never")


def _rule(rule_id: str) -> Rule:
    try:
        return engine.rule(rule_id)
    except KeyError:
        raise UsageError(f"unknown rule '{rule_id}'",
                         "the rules: " + ", ".join(r.id for r in engine.RULES)) from None


def plan_fix(rule_id: str, hosts: Sequence[str] | None = None, *, timeout: float = 60.0, python: str | None = None,
             doc: dict[str, Any] | None = None) -> dict[str, Any]:
    """Read ``rule_id`` afresh on every node and say what ``--fix`` would run: ``{"rule", "hosts",
    "findings", "actions": {node: {"do": [...], "undo": [...]}}}`` (``actions`` empty: nothing to fix).
    A rule that cannot tell, or whose fix is advice, is a one-line error."""
    r = _rule(rule_id)
    doc = doc or diagnose(hosts, timeout=timeout, python=python, steal_interval=steal_interval_for(r))
    findings = [f for f in doc["findings"] if f["rule"] == r.id]
    cannot = [c for c in doc["cannot_tell"] if c["rule"] == r.id]
    if cannot and not findings:
        c = cannot[0]
        raise EnvironmentProblem(f"{r.id}: cannot tell on {c['node']}: {c['why']}",
                                 "doctor fixes only what it could read; see `clusterbench doctor`")
    advice = [f for f in findings if f.get("apply") is None]
    if advice and len(advice) == len(findings):
        f = advice[0]
        how = "needs a reboot" if f.get("needs_reboot") else "is advice, not a setting clusterbench changes"
        raise UsageError(f"{r.id} on {f['node']}: the fix {how}: {f['fix'][0] if f['fix'] else r.fix}",
                         "apply it by hand (doctor prints it), then verify with " + f"`clusterbench {f['verify']}`")
    actions: dict[str, dict[str, list[str]]] = {}
    for f in findings:
        for node, a in (f.get("apply") or {}).items():
            cur = actions.setdefault(node, {"do": [], "undo": []})
            cur["do"] += a["do"]
            cur["undo"] += a["undo"]
    return {"rule": r.id, "title": r.title, "hosts": list(hosts) if hosts else None, "findings": findings,
            "actions": actions, "advice": [{"node": f["node"], "fix": f["fix"]} for f in advice]}


def _where(node: str, hosts: Sequence[str] | None) -> str:
    return node if hosts else "localhost"


def _run_on(node: str, hosts: Sequence[str] | None, cmd: str, timeout: float) -> tuple[bool, str]:
    from clusterbench.launch import remote

    try:
        p = remote.run_command(_where(node, hosts), ["sh", "-c", cmd], timeout=timeout)
    except EnvironmentProblem as exc:
        return False, str(exc)
    err = [ln.strip() for ln in (p.stderr or "").splitlines() if ln.strip()]
    return p.returncode == 0, (err[-1] if err else f"exit {p.returncode}")


def _run_all(actions: dict[str, dict[str, list[str]]], which: str, hosts: Sequence[str] | None,
             timeout: float, stop_on_error: bool) -> list[str]:
    """Run every node's ``which`` commands; returns the failures as one line each."""
    failed = []
    for node, a in actions.items():
        for cmd in a[which]:
            ok, why = _run_on(node, hosts, cmd, timeout)
            if not ok:
                failed.append(f"on {node}: `{cmd}`: {why}")
                if stop_on_error:
                    return failed
    return failed


def apply_fix(plan: dict[str, Any], store: Any, *, timeout: float = FIX_TIMEOUT) -> dict[str, Any]:
    """Apply a :func:`plan_fix` plan (the caller has the user's ``--yes``); returns the fix record
    with ``after`` (the rule's findings read again). See the module docstring for the safeguards."""
    if not plan["actions"]:
        raise UsageError(f"{plan['rule']}: nothing to fix (the rule passes on every node)", "nothing was changed")
    hosts = plan["hosts"]
    fix_id = f"{plan['rule']}-{uuid.uuid4().hex[:8]}"
    store.add_fix({"id": fix_id, "rule": plan["rule"], "hosts": hosts, "actions": plan["actions"],
                   "finding": plan["findings"]})
    try:
        failed = _run_all(plan["actions"], "do", hosts, timeout, stop_on_error=True)
    except BaseException:  # Ctrl-C between two commands: put back what was done
        _run_all(plan["actions"], "undo", hosts, timeout, stop_on_error=False)
        store.drop_fix(fix_id)
        raise
    if failed:
        back = _run_all(plan["actions"], "undo", hosts, timeout, stop_on_error=False)
        if back:
            store.set_fix(fix_id, status="applied", error="; ".join(failed + back))
            raise EnvironmentProblem(f"fix {fix_id} failed {failed[0]}, and rolling it back failed {back[0]}",
                                     f"fix it by hand, then `clusterbench doctor --undo {fix_id}`")
        store.drop_fix(fix_id)
        root = "" if os.geteuid() == 0 else " (most fixes need root)"
        raise EnvironmentProblem(f"fix {plan['rule']} failed {failed[0]}; everything was rolled back{root}",
                                 "nothing was changed; apply the fix by hand to see why")
    store.set_fix(fix_id, status="applied")
    after = plan_after(plan["rule"], hosts)
    return {**store.get_fix(fix_id), "after": after, "advice": plan.get("advice") or []}


def steal_interval_for(r: Rule) -> float | None:
    """Wait the stolen-time interval only for a rule that reads stolen time (it is a second per gather)."""
    return None if "steal" in r.reads else 0.0


def plan_after(rule_id: str, hosts: Sequence[str] | None) -> list[dict[str, Any]]:
    """The rule's findings read again (after a fix or an undo)."""
    doc = diagnose(hosts, steal_interval=steal_interval_for(_rule(rule_id)))
    return [f for f in doc["findings"] if f["rule"] == rule_id]


def undo_fix(store: Any, ref: str, *, timeout: float = FIX_TIMEOUT) -> dict[str, Any]:
    """Run a recorded fix's undo commands on its nodes; the fix is then ``undone``."""
    fix = store.get_fix(ref)
    if fix["status"] == "undone":
        raise UsageError(f"fix {fix['id']} was already undone ({fix['ended']})", "nothing to do")
    failed = _run_all(fix["actions"], "undo", fix["hosts"], timeout, stop_on_error=False)
    if failed:
        store.set_fix(fix["id"], error="undo: " + "; ".join(failed))
        raise EnvironmentProblem(f"undo of {fix['id']} failed {failed[0]}",
                                 "run the undo commands by hand (`clusterbench doctor --fixes --json` lists them)")
    store.set_fix(fix["id"], status="undone")
    return {**store.get_fix(fix["id"]), "after": plan_after(fix["rule"], fix["hosts"])}


def benchmark_argv(text: str) -> list[str]:
    """``--benchmark "run hpl --n 20000"`` -> the argv after ``clusterbench`` (checked)."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"--benchmark {text!r}: {exc}", 'quote it as one argument, e.g. --benchmark "run hpl"') from None
    if len(argv) < 2 or argv[0] != "run":
        raise UsageError(f"--benchmark {text!r} is not a clusterbench run command",
                         'give e.g. --benchmark "run hpl --n 20000"')
    from clusterbench.benchmarks import ALIASES, all_benchmarks

    if ALIASES.get(argv[1], argv[1]) not in all_benchmarks():
        raise UsageError(f"--benchmark: unknown benchmark '{argv[1]}'", "see 'clusterbench list'")
    bad = [a for a in argv if a.split("=")[0] in ("--no-store", "--json", "--tag", "--db")]
    if bad:
        raise UsageError(f"--benchmark: {bad[0]} is set by --verify itself", f"drop {bad[0]}")
    return argv


def verify_fix(rule_id: str, benchmark: str, store: Any, hosts: Sequence[str] | None = None, *, repeat: int = 3,
               keep: str = "if-better", allow_root: bool = False, timeout: float = 60.0, python: str | None = None,
               run_timeout: float = 3600.0, say: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Before (``repeat`` runs), fix, after (``repeat`` runs), compare, keep or undo."""
    from clusterbench.report.compare import compare_sides

    if keep not in KEEP:
        raise UsageError(f"--keep {keep} is not one of {', '.join(KEEP)}", "e.g. --keep if-better")
    if repeat < 2:
        raise UsageError(f"--repeat {repeat}: the comparison needs at least 2 runs a side", "give --repeat 3")
    argv = benchmark_argv(benchmark)
    plan = plan_fix(rule_id, hosts, timeout=timeout, python=python)
    if not plan["actions"]:
        raise UsageError(f"{rule_id}: nothing to verify (the rule passes on every node)", "nothing was changed")
    base = f"verify-{rule_id}-{time.strftime('%Y%m%d-%H%M%S')}"
    tags = {"before": f"{base}-before", "after": f"{base}-after"}
    db = str(store.path)

    def runs(side: str) -> None:
        for i in range(repeat):
            say(f"{side} {i + 1}/{repeat}: clusterbench {' '.join(argv)} --tag {tags[side]}")
            run_clusterbench([*argv, "--tag", tags[side]], allow_root=allow_root, db=db, timeout=run_timeout,
                              what=f"--verify ({side} the fix)")

    runs("before")
    say(f"applying {rule_id}: " + "; ".join(f"{n}: {' && '.join(a['do'])}" for n, a in plan["actions"].items()))
    fix = apply_fix(plan, store)
    try:
        runs("after")
    except BaseException:
        undo_fix(store, fix["id"])
        raise
    cmp = compare_sides(store, tags["before"], tags["after"])
    better, worse = cmp["summary"].get("better", 0), cmp["summary"].get("worse", 0)
    kept = keep == "always" or (keep == "if-better" and better > 0 and worse == 0)
    if not kept:
        undo_fix(store, fix["id"])
    decision = {"kept": kept, "keep": keep, "better": better, "worse": worse, "tags": tags, "benchmark": argv,
                "repeat": repeat}
    store.set_fix(fix["id"], verify=decision)
    return {"fix": store.get_fix(fix["id"]), "comparison": cmp, "decision": decision}
