"""Helpers shared by tests/unit/test_memlat.py (pure tests) and tests/integration/test_memlat.py
(tests that start processes)."""
from __future__ import annotations


KIB, MIB = 1024, 1024 * 1024
