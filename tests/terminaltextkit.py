"""Helpers shared by tests/unit/test_terminal_text.py (pure tests) and tests/integration/test_terminal_text.py
(tests that start processes)."""
from __future__ import annotations


def _raw_controls(text: str) -> set[str]:
    """The characters of ``text`` a terminal would act on (newlines between lines are fine)."""
    return {c for c in text if not c.isprintable() and c != "\n"}
