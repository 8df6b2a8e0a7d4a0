"""Benchmark registry: each module in this package registers one benchmark.

Adding a benchmark means adding one C kernel under ``kernels/`` and one module here; nothing
else is edited. ``REGISTRY`` maps the name used on the command line to the class.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clusterbench.errors import UsageError
from clusterbench.plugins import import_package_modules
from clusterbench.benchmarks.declare import Metric, Param, Result

if TYPE_CHECKING:
    from clusterbench.benchmarks.base import Benchmark, RunContext


def __getattr__(name: str) -> Any:
    """``Benchmark`` and ``RunContext`` from :mod:`.base`, loaded when first asked for: importing a
    declaration (``benchmarks.declare.Result``, as analysis/ and records do) then loads no kernel
    builder or launcher (PEP 562)."""
    if name in ("Benchmark", "RunContext"):
        from clusterbench.benchmarks import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

REGISTRY: dict[str, type[Benchmark]] = {}
#: old name -> current name (a renamed benchmark keeps working under its old name)
ALIASES: dict[str, str] = {}
#: measured limit -> the (benchmark, metric) pairs that feed it (``Metric.provides``)
PROVIDERS: dict[str, set[tuple[str, str]]] = {}


def register(cls: type[Benchmark]) -> type[Benchmark]:
    """Add a benchmark class; its declared limits must exist (a typo fails at import, not mid-run)."""
    from clusterbench.analysis.limits import LIMITS

    for m in cls.metrics:
        unknown = [name for name in (*m.limits, *m.provides) if name not in LIMITS]
        if unknown:
            raise TypeError(f"{cls.__name__}.{m.name} names unknown limit(s) {unknown}; known: {sorted(LIMITS)}")
    declared = {m.name for m in cls.metrics}
    bad = [f"{a} -> {b}" for a, b in cls.per_watt.items() if a not in declared or b not in declared]
    if bad:
        raise TypeError(f"{cls.__name__}.per_watt names undeclared metric(s): {bad}")
    REGISTRY[cls.name] = cls
    for m in cls.metrics:
        for lim in m.provides:
            PROVIDERS.setdefault(lim, set()).add((cls.name, m.name))
    for alias in cls.aliases:
        ALIASES[alias] = cls.name
    return cls


#: the package paths whose modules are all imported (the walk is done once a process: building the
#: command line's parser asked for it ~16 times, each listing every family folder again)
_LOADED: set[tuple[str, ...]] = set()


def _load_all() -> None:
    """Import every benchmark module of every family folder (``node/``, ``mpi/``, ...); a module
    registers itself. Private modules (``_x``) and shared helpers are imported by their users."""
    key = tuple(__path__)
    if key not in _LOADED:
        import_package_modules(__path__, __name__, recursive=True)
        _LOADED.add(key)  # only once every module imported (a failed import is tried again next time)


def find_benchmark(name: str) -> type[Benchmark] | None:
    """The class registered as ``name`` (not an old name: :func:`get_benchmark` resolves those), None if
    none is. A module named after the benchmark (``node/fpu.py`` for fpu) is tried alone first: a command
    that reads one benchmark's declaration (``results table``) then imports its module, not every family's."""
    if name not in REGISTRY and tuple(__path__) not in _LOADED and name.isidentifier() and not name.startswith("_"):
        import importlib
        from pathlib import Path

        for family in sorted(p for base in __path__ for p in Path(base).iterdir() if (p / "__init__.py").is_file()):
            if (family / f"{name}.py").is_file():
                importlib.import_module(f"{__name__}.{family.name}.{name}")
                break
    if name not in REGISTRY:
        _load_all()
    return REGISTRY.get(name)


def get_benchmark(name: str) -> Benchmark:
    _load_all()
    name = ALIASES.get(name, name)
    if name not in REGISTRY:
        raise UsageError(f"unknown benchmark '{name}'",
                         f"choose one of: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]()


def summary_rules(results: list[Result]) -> tuple[list, list]:
    """(headline rules, finding rules) for these results: those of every benchmark present, in
    the order of the suites they belong to, then those of the suites themselves."""
    _load_all()
    present = {ALIASES.get(r.benchmark, r.benchmark) for r in results}
    benches = [REGISTRY[n] for n in present if n in REGISTRY]
    suites = {s for b in benches for s in b.suites}
    order = sorted(benches, key=lambda b: (sorted(b.suites.items()) or [("~", 0)], b.name))
    order += [REGISTRY[s] for s in sorted(suites) if s in REGISTRY]
    return [h for b in order for h in b.headlines], [f for b in order for f in b.findings]


def summarize_results(results: list[Result]) -> dict:
    """The summary of a run (``analysis.summary.summarize``) with the rules its benchmarks declare."""
    from clusterbench.analysis.summary import summarize

    headlines, findings = summary_rules(results)
    return summarize(results, headlines, findings)


def all_benchmarks() -> dict[str, type[Benchmark]]:
    _load_all()
    return dict(sorted(REGISTRY.items()))


__all__ = ["Benchmark", "Metric", "Param", "Result", "RunContext", "REGISTRY", "register",
           "find_benchmark", "get_benchmark", "all_benchmarks", "summary_rules", "summarize_results"]
