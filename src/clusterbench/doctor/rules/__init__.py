"""doctor's rules: one module per rule or per small family, found by :func:`discover`.

A module here declares ``RULE`` (one :class:`~clusterbench.doctor.rule.Rule`) or ``RULES`` (a
list of them); nothing else registers it: adding a rule is adding a file (see
docs/adding-a-doctor-rule.md). Modules whose name starts with ``_`` are skipped.
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from clusterbench.doctor.rule import Rule


def rules_of(module: ModuleType) -> list[Rule]:
    """The rules a module declares (``RULE`` and/or ``RULES``)."""
    found = list(getattr(module, "RULES", []))
    if getattr(module, "RULE", None) is not None:
        found.append(module.RULE)
    bad = [r for r in found if not isinstance(r, Rule)]
    if bad:
        raise TypeError(f"{module.__name__}: RULE/RULES hold {bad[0]!r}, not a Rule")
    return found


def discover() -> list[Rule]:
    """Every rule of every module in this package, in their ``order`` (ties: by module name)."""
    found: list[Rule] = []
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if m.name.startswith("_"):
            continue
        found += rules_of(importlib.import_module(f"{__name__}.{m.name}"))
    seen: dict[str, Rule] = {}
    for r in found:
        if r.id in seen:
            raise ValueError(f"two doctor rules are called {r.id!r}")
        seen[r.id] = r
    return sorted(found, key=lambda r: r.order)
