"""Helpers shared by tests/unit/test_intcpu.py (pure tests) and tests/integration/test_intcpu.py
(tests that start processes)."""
from __future__ import annotations

import math


def sysbench_event(max_prime: int) -> tuple[int, int]:
    """sysbench's event in Python, for small max_prime: (primes counted, remainders computed)."""
    found = divs = 0
    for c in range(3, max_prime):
        root = math.sqrt(float(c))
        d = 2
        prime = True
        while float(d) <= root:
            divs += 1
            if c % d == 0:
                prime = False
                break
            d += 1
        found += prime
    return found, divs
