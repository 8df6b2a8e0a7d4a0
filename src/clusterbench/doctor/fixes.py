"""``clusterbench doctor``: gather each node's evidence, apply the rules, report; fix, undo, verify.

:func:`diagnose` reads this machine's evidence (``probe.evidence.gather``) or, given hosts, every
node's in one call per node through the path ``cluster check`` uses (``launch.remote.gather``:
the virtual cluster's namespaces, this machine, or ssh), then applies ``analysis.diagnosis.RULES``.
With ``during="mpi"`` (or ``"hpl"``) it also reads ``/proc/softirqs`` on every node before and
after a network load (:data:`LOADS`) and judges the per-CPU deltas (``softirqs.load``).
:func:`format_doctor` prints findings first (severity, node, title, evidence with its source, fix,
undo, verifying benchmark), then what it cannot tell and why, then how many checks passed.
Diagnosis changes nothing on any node.

:func:`plan_fix` / :func:`apply_fix` (``doctor --fix RULE [--yes]``): the rule is read afresh on
every node, so the undo commands hold the values there *now*; nothing runs without ``yes``; the fix
is recorded in the store (``fixes``, as ``applying``) before the first command runs, each command
runs on its node (``sh -c``, bounded), a failing command rolls back what was done and removes the
record, and the rule is read again afterwards. A fix that is advice (reboot, kernel, cooling) is
refused with the advice. :func:`undo_fix` (``--undo FIX_ID``) runs the recorded undo commands.
:func:`verify_fix` (``--verify RULE --benchmark "run ..."``): the benchmark ``repeat`` times before,
the fix, ``repeat`` times after (tagged runs in the store), ``compare`` of the two tags, then the fix
kept or undone as ``keep`` says (``if-better``: kept only when a figure is significantly better and
none significantly worse).
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import uuid
from typing import Any, Callable, Sequence

from clusterbench.analysis import diagnosis
from clusterbench.errors import ClusterbenchError, EnvironmentProblem, UsageError

#: seconds for one fix or undo command on one node
FIX_TIMEOUT = 30.0
#: the loads of ``--during`` (``{hosts}``: the first two hosts for mpi, all of them for hpl)
LOADS = {
    "mpi": "run bw --transport tcp --direction bi --max-size 4194304 --time-budget 0.3",
    "hpl": "run hpl --n 6000",
}
KEEP = ("if-better", "always", "never")

DOCTOR_SCHEMA = 1


def hosts_from(hosts: str | None, hostfile: str | None) -> list[str] | None:
    """``--hosts A,B`` or ``--hostfile F`` -> host names (None: this machine only)."""
    if hosts and hostfile:
        raise UsageError("--hosts and --hostfile both given", "give one of them")
    if hostfile:
        from clusterbench.launch.mpi.hosts import parse_hostfile

        return [h.name for h in parse_hostfile(hostfile)]
    if hosts is not None:
        from clusterbench.launch.mpi.hosts import host_names

        return host_names(hosts)  # the one --hosts parser (exit 2 on a bad entry)
    return None


def diagnose(hosts: Sequence[str] | None = None, root: str = "/", *, timeout: float = 60.0,
             python: str | None = None, during: str | None = None, allow_root: bool = False,
             db: str | None = None) -> dict[str, Any]:
    """Evidence of this machine (``hosts`` None) or of every host, and the rules' verdicts.

    Returns ``{"doctor_schema": 1, "hosts": [...], "findings": [...], "cannot_tell": [...],
    "passed": [...], "rules": [rule descriptions], "evidence": {node: evidence document}}``.
    An unreachable host raises a one-line :class:`EnvironmentProblem` naming it (as ``cluster check``)."""
    from clusterbench.probe import evidence as ev

    if hosts:
        from clusterbench.launch import remote

        gathered = remote.gather(list(hosts), ev.SNIPPET, timeout=timeout, python=python)
        nodes = {h: d for h, d in gathered.items()}
    else:
        doc = ev.gather(root)
        nodes = {doc.get("host") or "localhost": doc}
    load = None
    if during and during != "none":
        if root not in ("/", None) and not hosts:
            raise UsageError("--during needs the running machine, not a /sys+/proc snapshot", "drop --sysfs-root")
        load = softirqs_during(hosts, during, allow_root=allow_root, timeout=timeout, python=python, db=db)
        for node, it in load["items"].items():
            if node in nodes:
                nodes[node].setdefault("items", {})["softirqs.load"] = it
        if not hosts:  # this machine: the one node, whatever its name
            only = next(iter(nodes))
            nodes[only].setdefault("items", {})["softirqs.load"] = next(iter(load["items"].values()))
    verdicts = diagnosis.evaluate(nodes, hosts_text=",".join(nodes) if len(nodes) > 1 else None)
    return {"doctor_schema": DOCTOR_SCHEMA, "hosts": list(nodes), "root": root if not hosts else None,
            "during": None if load is None else {k: v for k, v in load.items() if k != "items"},
            **verdicts, "rules": [r.describe() for r in diagnosis.RULES], "evidence": nodes}


# --------------------------------------------------------------------------- --during

SOFTIRQ_SNIPPET = ("import json; from clusterbench.probe.evidence import parse_softirqs; "
                   "print(json.dumps({'softirqs': parse_softirqs(open('/proc/softirqs').read())}))")


def _read_softirqs(hosts: Sequence[str] | None, timeout: float, python: str | None) -> dict[str, Any]:
    from clusterbench.launch import remote
    from clusterbench.probe.evidence import parse_softirqs

    if not hosts:
        with open("/proc/softirqs") as f:
            return {"localhost": parse_softirqs(f.read())}
    return {h: d.get("softirqs") for h, d in remote.gather(list(hosts), SOFTIRQ_SNIPPET, timeout=timeout,
                                                            python=python).items()}


def load_command(during: str, hosts: Sequence[str] | None) -> list[str]:
    """The clusterbench command line (after ``clusterbench``) that loads the network for ``--during``."""
    if during not in LOADS:
        raise UsageError(f"--during {during} is not one of {', '.join(LOADS)}, none", "e.g. --during mpi")
    argv = shlex.split(LOADS[during])
    if hosts:
        argv += ["--hosts", ",".join(hosts[:2] if during == "mpi" else hosts)]
    return argv + ["--no-store"]


def softirqs_during(hosts: Sequence[str] | None, during: str, *, allow_root: bool = False, timeout: float = 60.0,
                    python: str | None = None, db: str | None = None, run_timeout: float = 900.0) -> dict[str, Any]:
    """NET_RX/NET_TX per-CPU softirq deltas on every node over one run of the ``during`` load.
    Returns ``{"load", "seconds", "items": {node: evidence item}}``."""
    argv = load_command(during, hosts)
    before = _read_softirqs(hosts, timeout, python)
    t0 = time.monotonic()
    _run_clusterbench(argv, allow_root=allow_root, db=db, timeout=run_timeout, what=f"--during {during}")
    dt = time.monotonic() - t0
    after = _read_softirqs(hosts, timeout, python)
    from clusterbench.probe.evidence import item, unreadable

    text = "clusterbench " + " ".join(argv)
    items = {}
    for node in before:
        b, a = before.get(node), after.get(node)
        if not b or not a:
            items[node] = unreadable("/proc/softirqs", "no NET_RX/NET_TX lines")
            continue
        delta = {k: [max(0, y - x) for x, y in zip(b.get(k) or [], a.get(k) or [])] for k in ("NET_RX", "NET_TX")}
        items[node] = item({**delta, "seconds": dt, "load": text},
                           f"/proc/softirqs before and after `{text}`")
    return {"load": text, "seconds": dt, "items": items}


def _root_hint(allow_root: bool) -> str:
    """' (as root add --allow-root)' when that is what the user would be missing, else ''."""
    from clusterbench import config

    if allow_root or not (hasattr(os, "geteuid") and os.geteuid() == 0):
        return ""
    try:
        if config.allow_run_as_root():
            return ""
    except UsageError:
        pass
    return " (as root add --allow-root)"


def _run_clusterbench(argv: Sequence[str], *, allow_root: bool, db: str | None, timeout: float, what: str) -> str:
    """Run ``clusterbench ARGV`` as a child (bounded, its process group killed on timeout or Ctrl-C);
    a failure is one line naming ``what`` and the child's last error line."""
    from clusterbench.launch import process

    cmd = [sys.executable, "-m", "clusterbench", *(["--db", db] if db else []), *argv]
    env = dict(os.environ)
    if allow_root:
        env["CLUSTERBENCH_ALLOW_RUN_AS_ROOT"] = "1"
    # a launcher: the child clusterbench (and, through it, its kernels and MPI jobs) dies with this
    # process however it dies: SIGTERM when it ends (the child closes its run as incomplete), a
    # watchdog's SIGKILL after the grace period if this process was killed outright
    run = process.spawn(cmd, env=env, text=True, launcher=True)
    try:
        out, err = run.proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{what}: `clusterbench {' '.join(argv)}` did not finish within {timeout:g} s",
                                 "give a smaller benchmark or a longer --timeout") from None
    finally:
        run.end()
    if run.proc.returncode != 0:
        lines = [ln.strip() for ln in (err or "").splitlines() if ln.strip()]
        raise EnvironmentProblem(f"{what}: `clusterbench {' '.join(argv)}` failed (exit {run.proc.returncode}): "
                                 f"{lines[-1] if lines else 'no message'}",
                                 "run that command by hand to see the whole error" + _root_hint(allow_root))
    return out


# --------------------------------------------------------------------------- --fix / --undo / --verify

def _rule(rule_id: str) -> diagnosis.Rule:
    try:
        return diagnosis.rule(rule_id)
    except KeyError:
        raise UsageError(f"unknown rule '{rule_id}'",
                         "the rules: " + ", ".join(r.id for r in diagnosis.RULES)) from None


def plan_fix(rule_id: str, hosts: Sequence[str] | None = None, *, timeout: float = 60.0, python: str | None = None,
             doc: dict[str, Any] | None = None) -> dict[str, Any]:
    """Read ``rule_id`` afresh on every node and say what ``--fix`` would run: ``{"rule", "hosts",
    "findings", "actions": {node: {"do": [...], "undo": [...]}}}`` (``actions`` empty: nothing to fix).
    A rule that cannot tell, or whose fix is advice, is a one-line error."""
    r = _rule(rule_id)
    doc = doc or diagnose(hosts, timeout=timeout, python=python)
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


def plan_after(rule_id: str, hosts: Sequence[str] | None) -> list[dict[str, Any]]:
    """The rule's findings read again (after a fix or an undo)."""
    doc = diagnose(hosts)
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
            _run_clusterbench([*argv, "--tag", tags[side]], allow_root=allow_root, db=db, timeout=run_timeout,
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


def format_fix(res: dict[str, Any], *, applied: bool) -> list[str]:
    """Lines for ``--fix`` (``applied`` False: the plan only) and ``--undo``."""
    lines = []
    acts = res.get("actions") or {}
    if not applied:
        if not acts:
            return [f"{res['rule']}: nothing to fix: the rule passes on every node"]
        lines.append(f"{res['rule']} ({res['title']}): would run (nothing changed; add --yes to apply):")
    else:
        if res["status"] == "undone":
            lines.append(f"fix {res['id']} undone ({res['rule']}): the previous values are back")
        else:
            lines.append(f"fix {res['id']} applied ({res['rule']}); undo it with: clusterbench doctor --undo {res['id']}")
    for node, a in acts.items():
        if not applied or res["status"] != "undone":
            for c in a["do"]:
                lines.append(f"  {node}: {c}")
        for c in a["undo"]:
            lines.append(f"  {node} undo: {c}")
    for adv in res.get("advice") or []:
        for c in adv["fix"]:
            lines.append(f"  {adv['node']}: not applied (advice, do it by hand): {c}")
    if applied:
        after = res.get("after") or []
        lines.append(f"  {res['rule']} now: " + ("passes" if not after else
                                                   "still fires: " + "; ".join(f["summary"] for f in after)))
    return lines


def format_fixes(fixes: Sequence[dict[str, Any]]) -> list[str]:
    if not fixes:
        return ["no fixes recorded"]
    lines = []
    for f in fixes:
        v = f.get("verify") or {}
        ver = f"; verified: {'kept' if v.get('kept') else 'undone'} ({v.get('better')} better, {v.get('worse')} worse)" \
            if v else ""
        lines.append(f"{f['id']}  {f['status']:8s} {f['created'][:19]}  nodes {', '.join(f['actions'])}{ver}")
    return lines


def _value(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_value(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        if not v:
            return "none"
        return " ".join(map(str, v)) if all(not isinstance(x, (dict, list)) for x in v) else str(v)
    return str(v)


def format_doctor(doc: dict[str, Any]) -> list[str]:
    """The printed report of :func:`diagnose`."""
    lines: list[str] = []
    nodes = doc.get("hosts") or []
    findings, cannot, passed = doc["findings"], doc["cannot_tell"], doc["passed"]
    lines.append(f"doctor: {len(nodes)} node{'s' if len(nodes) != 1 else ''} ({', '.join(nodes)}); "
                 f"{len(findings)} finding{'s' if len(findings) != 1 else ''}, {len(cannot)} cannot tell, "
                 f"{len(passed)} passed (read-only: nothing was changed)")
    groups: dict[str, list[dict[str, Any]]] = {}
    for f in findings:  # the same finding with the same evidence on several nodes is printed once
        same = {k: f[k] for k in ("rule", "summary", "fix", "undo")}
        same["evidence"] = [(e["key"], _value(e["value"])) for e in f["evidence"]]
        groups.setdefault(repr(same), []).append(f)
    for members in groups.values():
        f = members[0]
        where = ", ".join(m["node"] for m in members)
        lines.append("")
        lines.append(f"[{f['severity']}] {where}: {f['title']} ({f['rule']})")
        lines.append(f"  {f['summary']}")
        for e in f["evidence"]:
            lines.append(f"  evidence: {e['key']} = {_value(e['value'])}  [{e['source']}]")
        lines.append(f"  why: {f['why']}")
        for c in f["fix"]:
            lines.append(f"  fix:  {c}")
        for c in f["undo"]:
            lines.append(f"  undo: {c}")
        if f.get("needs_reboot"):
            lines.append("  needs a reboot (advised, never applied by clusterbench)")
        lines.append(f"  verify: clusterbench {f['verify']} (before and after; clusterbench compare)")
    if cannot:
        lines.append("")
        lines.append("cannot tell:")
        same: dict[tuple[str, str], list[str]] = {}
        for c in cannot:
            same.setdefault((c["rule"], c["why"]), []).append(c["node"])
        titles = {c["rule"]: c["title"] for c in cannot}
        for (rule_id, why), where in same.items():
            lines.append(f"  {', '.join(where)}: {titles[rule_id]} ({rule_id}): {why}")
    lines.append("")
    lines.append(f"passed: {len(passed)} check{'s' if len(passed) != 1 else ''}"
                 + (f" ({', '.join(sorted({p['rule'] for p in passed}))})" if passed else ""))
    return lines
