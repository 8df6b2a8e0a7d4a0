"""``clusterbench doctor``: what holds a node or a cluster back, and the fix.

The feature, one module per concern:

* :mod:`~clusterbench.doctor.evidence`: one node's settings, each with where it was read (I/O);
* :mod:`~clusterbench.doctor.rule`: what a rule is (:class:`Rule`, :class:`Hit`, :class:`CannotTell`)
  and the helpers a check reads evidence with (pure);
* :mod:`~clusterbench.doctor.rules`: the rules, one file per rule or small family, discovered;
* :mod:`~clusterbench.doctor.engine`: the rules run over evidence (pure), and which rules bear on
  which figures;
* :mod:`~clusterbench.doctor.gather`: :func:`diagnose` (every node's evidence, ``--during`` load),
  :func:`diagnose_evidence` (the verdicts on evidence read already, e.g. by sweep node's agents);
* :mod:`~clusterbench.doctor.fixes`: ``--fix`` / ``--undo`` / ``--verify`` and their journal in the store;
* :mod:`~clusterbench.doctor.format`: the text output.

Adding a rule: docs/adding-a-doctor-rule.md.
"""
from __future__ import annotations

from clusterbench.doctor.fixes import (
    FIX_TIMEOUT,
    KEEP,
    apply_fix,
    benchmark_argv,
    plan_after,
    plan_fix,
    undo_fix,
    verify_fix,
)
from clusterbench.doctor.format import format_doctor, format_fix, format_fixes
from clusterbench.doctor.gather import (
    DOCTOR_SCHEMA,
    LOADS,
    diagnose,
    diagnose_evidence,
    hosts_from,
    load_command,
    run_clusterbench,
    softirqs_during,
)
from clusterbench.doctor.rule import CannotTell, Hit, Rule

__all__ = ["FIX_TIMEOUT", "KEEP", "apply_fix", "benchmark_argv", "plan_after", "plan_fix", "undo_fix", "verify_fix",
           "format_doctor", "format_fix", "format_fixes", "DOCTOR_SCHEMA", "LOADS", "diagnose", "diagnose_evidence", "hosts_from",
           "load_command", "run_clusterbench", "softirqs_during", "CannotTell", "Hit", "Rule"]
