"""Stored comparison figures for tests: a stream Result from samples, a finished run holding
figures, noisy samples. Shared by tests/unit/test_compare_cli.py and tests/unit/test_cost.py."""
from __future__ import annotations

import random
import time

from clusterbench.benchmarks.base import Result
from clusterbench.session import new_run_record
from clusterbench.store import Store


def _fig(metric: str, samples: list[float], higher: bool = True, **params) -> Result:
    return Result(benchmark="stream", metric=metric, value=max(samples) if higher else min(samples), unit="MB/s",
                  higher_is_better=higher, params={"variant": "regular", "threads": 1, "order": "compact",
                                                   "cpu_node": None, "mem_node": None, **params},
                  samples=samples, summary={})


def _run(st: Store, figs: list[Result], tags=(), probe=None) -> str:
    rec = new_run_record(["clusterbench", "run", "stream"], probe or {"hostname": "h"}, "default")
    rec["tags"] = list(tags)
    rid = st.begin_run(rec)
    for f in figs:
        st.add_result(rid, f)
    st.finish_run(rid, "complete")
    time.sleep(0.002)
    return rid


def _samples(rng: random.Random, centre: float, n: int = 10, spread: float = 0.005) -> list[float]:
    return [centre * (1 + rng.gauss(0, spread)) for _ in range(n)]
