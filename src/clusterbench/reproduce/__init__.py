"""``clusterbench reproduce BUNDLE``: run a bundle's runs again here and compare.

For every run of the bundle (checked by :func:`clusterbench.bundle.read_file`): its recorded command
line (``run.argv``: the benchmarks and every option given, so the same parameters) without what
belonged to the old store (the global ``--db``, the run's ``--tag``/``--note``), on ``--hosts`` when
given (it replaces the recorded hosts), tagged ``reproduce-<run id>``; it runs as a process of its own
(:func:`rerun`, its output shown as it goes) into this store. Then the new run is compared with the
bundle's, figure by figure, as ``compare`` does (:func:`clusterbench.analysis.compare.compare`), and
every environment difference is named (the env diff: nodes, CPU, kernel, settings, NICs, MPI, BLAS,
compilers, build flags, the parameters a benchmark chose for itself such as threads and ranks).
:func:`plan` and :func:`judge` are pure; :func:`rerun` starts the process.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from clusterbench.benchmarks.declare import Result
from clusterbench.errors import UsageError
from clusterbench.records import Run

#: options of a recorded command line that belonged to the old run, not to what it measured
DROPPED = {"--tag": True, "--note": True, "--json": False, "--db": True}
TAG_PREFIX = "reproduce-"


@dataclass(frozen=True)
class Step:
    """One run to do again: the bundle's run, and the command line (after ``clusterbench``)."""

    run: Run
    results: list[Result]
    args: list[str]
    tag: str


def _strip(args: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in DROPPED:
            skip = DROPPED[name] and "=" not in a
            continue
        out.append(a)
    return out


def _with_hosts(args: list[str], hosts: str) -> list[str]:
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("--hosts", "--hostfile"):
            skip = True
            continue
        if a.startswith(("--hosts=", "--hostfile=")):
            continue
        out.append(a)
    return [*out, "--hosts", hosts]


def command_of(run: Run, hosts: str | None = None) -> list[str]:
    """The run's recorded command line (after ``clusterbench``), ready to run again here."""
    argv = list(run.argv or [])
    if len(argv) < 2 or not str(argv[0]).endswith("clusterbench"):
        raise UsageError(f"run {run.id[:8]} recorded no clusterbench command line to run again",
                         "reproduce runs made by 'clusterbench run' or 'clusterbench sweep'")
    args = _strip([str(a) for a in argv[1:]])
    if hosts:
        args = _with_hosts(args, hosts)
    return args


def plan(runs: list[tuple[Run, list[Result]]], hosts: str | None = None) -> list[Step]:
    """What :func:`rerun` will run, one :class:`Step` per run of the bundle (each checked by the parser)."""
    from clusterbench.cli import check_command_line

    steps = []
    for run, results in runs:
        tag = TAG_PREFIX + run.id[:8]
        args = [*command_of(run, hosts), "--tag", tag]
        check_command_line(args, f"run {run.id[:8]}'s command")
        steps.append(Step(run, results, args, tag))
    return steps


def rerun(step: Step, db: str | None, quiet_stdout: bool = False) -> int:
    """Run the step's command as a process of its own into store ``db``; its exit code. ``quiet_stdout``:
    its output goes to stderr (so ``reproduce --json`` prints one document)."""
    cmd = [sys.executable, "-m", "clusterbench", *(["--db", db] if db else []), *step.args]
    return subprocess.run(cmd, check=False, stdout=sys.stderr if quiet_stdout else None).returncode


def judge(step: Step, new_runs: list[Run], new_results: dict[str, list[Result]]) -> dict[str, Any]:
    """The comparison of the bundle's run (A) with the new one(s) (B), as ``compare --json`` prints it,
    and ``sides`` for its text. Pure."""
    from clusterbench.analysis import compare as cmp
    from clusterbench.benchmarks import all_benchmarks

    keys = {name: tuple(cls.key_params) for name, cls in all_benchmarks().items()}
    doc = cmp.compare([step.run], {step.run.id: step.results}, new_runs, new_results, keys).as_dict()

    def brief(run: Run) -> dict:
        return {k: getattr(run, k) for k in ("id", "started", "host", "command", "tags", "note", "status")}

    doc["sides"] = {"a": {"selector": "bundle", "runs": [brief(step.run)], "left_out": []},
                    "b": {"selector": step.tag, "runs": [brief(r) for r in new_runs], "left_out": []}}
    doc["per_price"] = None
    return doc
