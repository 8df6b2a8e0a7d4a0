"""The baseline a check is judged against: which of its runs concern the suite, whether they were
measured on the same cluster, and moving the tag to new runs (``--update-baseline``)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clusterbench.analysis.envdiff import EnvChange, env_diff
from clusterbench.records import Run

#: the settings (names of :data:`clusterbench.analysis.envdiff.RUN_SETTINGS`) that say which cluster
#: a run measured; the others (kernel, MPI, BLAS, governor, ...) are what a check is there to catch
CLUSTER_IDENTITY = ("node count", "hosts", "CPU model", "CPU microarchitecture")


def relevant(runs: Sequence[Run], results: Mapping[str, Sequence[Any]], benchmarks: Iterable[str]) -> list[Run]:
    """The baseline runs that hold a figure of one of ``benchmarks`` (a tag may pool several suites)."""
    wanted = set(benchmarks)
    return [r for r in runs if any(x.benchmark in wanted for x in results.get(str(r.id), ()))]


def cluster_differences(baseline: Sequence[Run], planned: Sequence[Run]) -> list[EnvChange]:
    """How the cluster of the baseline's runs differs from the one the check will measure (the
    planned runs: each entry's run record before it starts): :data:`CLUSTER_IDENTITY` only."""
    return [c for c in env_diff(baseline, planned) if c.what in CLUSTER_IDENTITY]


def differences_text(changes: Sequence[EnvChange], most: int = 4) -> str:
    shown = "; ".join(c.label for c in changes[:most])
    return shown + (f"; and {len(changes) - most} more" if len(changes) > most else "")
