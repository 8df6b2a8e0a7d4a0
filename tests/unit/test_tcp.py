"""The pure tests (they start no process) of what tests/integration/test_tcp.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.errors import EnvironmentProblem, UsageError


def test_bad_input_is_a_usage_error(ctx: RunContext) -> None:
    bench = get_benchmark("tcp")
    for given in ({"hosts": "local", "streams": [0]}, {"hosts": "local", "streams": []},
                  {"hosts": "local", "seconds": 0.0}, {"hosts": "local", "repeats": 0},
                  {"hosts": "local", "block": 10}, {"hosts": "local", "message_size": 0},
                  {"hosts": "cbsim-n1"}, {"hosts": "cbsim-n1,cbsim-n1"}, {"hosts": "nodeA,nodeB"},
                  {"hosts": "cbsim-n1,cbxx-n2"}):
        with pytest.raises((UsageError, EnvironmentProblem)):
            bench.resolve(ctx, given)
