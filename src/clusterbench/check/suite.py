"""A check suite: a named, versioned list of runs in a TOML file, checked against the benchmark
registry's declared parameters before anything runs.

The form (``docs/check.md`` has it with examples)::

    name = "node"          # the suite's name (default: the file's name without .toml)
    version = 1            # a whole number, raised when the runs change (a baseline is per version)
    description = "..."    # optional
    repeat = 3             # optional: runs of each entry per check (2 or more; default DEFAULT_REPEAT)

    [[run]]
    benchmark = "fpu"                       # a benchmark clusterbench knows (or an alias of one)
    params = { ops = "add,fma", cpu = 0 }   # optional: its declared parameters, by name
    hosts = "node1,node2"                   # optional: its hosts (a benchmark with a hosts parameter)
    timeout = 300                           # optional: seconds before a kernel is killed

The standard suites (``node``, ``mpi``, ``hpl``, ``health``) are files in this package's
``suites/`` folder; a name that is not a file is looked up there.
"""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from clusterbench.benchmarks import ALIASES, all_benchmarks
from clusterbench.benchmarks.base import Composite, Param
from clusterbench.errors import UsageError

#: runs of each entry per check when the suite does not say: ``compare`` takes the run as the unit of
#: replication and needs 2 or more runs a side; with 3 against 3 its t-test on the run medians has 4
#: degrees of freedom, so a steady change can reach p < 0.01 (2 against 2 needs t > 9.9)
DEFAULT_REPEAT = 3
#: the fewest runs of an entry that compare can judge
MIN_REPEAT = 2
SUITE_KEYS = ("name", "version", "description", "repeat", "run")
RUN_KEYS = ("benchmark", "params", "hosts", "timeout")


@dataclass(frozen=True)
class Entry:
    """One run of a suite: a benchmark (its registry name) and the parameters given for it."""

    benchmark: str
    params: dict[str, Any]
    timeout: float | None = None

    @property
    def label(self) -> str:
        return " ".join([self.benchmark, *(f"{k}={_text(v)}" for k, v in self.params.items())])

    def argv(self) -> list[str]:
        """The ``clusterbench run`` command line this entry amounts to (stored as the run's command)."""
        out = ["clusterbench", "run", self.benchmark]
        for k, v in self.params.items():
            flag = "--" + k.replace("_", "-")
            if isinstance(v, bool):
                out.append(flag if v else "--no-" + k.replace("_", "-"))
            else:
                out += [flag, _text(v)]
        if self.timeout is not None:
            out += ["--timeout", f"{self.timeout:g}"]
        return out


@dataclass(frozen=True)
class Suite:
    name: str
    version: int
    entries: tuple[Entry, ...]
    repeat: int = DEFAULT_REPEAT
    description: str = ""
    path: str = ""
    standard: bool = False

    @property
    def benchmarks(self) -> set[str]:
        """Every benchmark whose figures the suite produces (a composite's members included)."""
        out: set[str] = set()
        for e in self.entries:
            out.add(e.benchmark)
            cls = all_benchmarks().get(e.benchmark)
            if cls is not None and issubclass(cls, Composite):
                out.update(cls.members())
        return out

    def with_hosts(self, hosts: str | None, hostfile: str | None) -> Suite:
        """The suite with ``--hosts``/``--hostfile`` given to every entry whose benchmark takes them
        and that names no hosts of its own."""
        if hosts is None and hostfile is None:
            return self
        entries = []
        for e in self.entries:
            declared = {p.name for p in all_benchmarks()[e.benchmark].params}
            params = dict(e.params)
            if "hosts" not in params and "hostfile" not in params:
                if hosts is not None and "hosts" in declared:
                    params["hosts"] = hosts
                elif hostfile is not None and "hostfile" in declared:
                    params["hostfile"] = hostfile
            entries.append(Entry(e.benchmark, params, e.timeout))
        return Suite(self.name, self.version, tuple(entries), self.repeat, self.description, self.path, self.standard)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "description": self.description, "path": self.path,
                "standard": self.standard, "repeat": self.repeat,
                "runs": [{"benchmark": e.benchmark, "params": dict(e.params), "timeout": e.timeout}
                         for e in self.entries]}


def _text(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def standard_suites() -> list[str]:
    """The names of the suites shipped with clusterbench."""
    folder = resources.files("clusterbench.check") / "suites"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def load(spec: str) -> Suite:
    """The suite ``spec`` names: a TOML file's path, or the name of a standard suite."""
    if os.path.exists(spec) or spec.endswith(".toml") or os.sep in spec:
        try:
            with open(spec, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise UsageError(f"cannot read suite file {spec} ({exc.strerror or exc})",
                             "give a readable TOML file or the name of a standard suite") from None
        return parse(data, spec, standard=False)
    names = standard_suites()
    if spec not in names:
        raise UsageError(f"unknown suite '{spec}'", f"give a suite file (.toml) or one of: {', '.join(names)}")
    data = (resources.files("clusterbench.check") / "suites" / f"{spec}.toml").read_bytes()
    return parse(data, f"{spec}.toml", standard=True)


def parse(data: bytes | str, where: str = "suite", *, standard: bool = False) -> Suite:
    """Parse and validate a suite file's text (``where`` names it in errors): every benchmark known,
    every parameter declared by it and within its bounds. A one-line UsageError otherwise."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"suite {where} is not valid TOML ({exc})", "fix the file; docs/check.md shows the form") from None
    unknown = [k for k in doc if k not in SUITE_KEYS]
    if unknown:
        raise UsageError(f"suite {where}: unknown key '{unknown[0]}'", f"a suite takes: {', '.join(SUITE_KEYS)}")
    base = os.path.basename(where)
    name = doc.get("name", base[:-5] if base.endswith(".toml") else base)
    if not isinstance(name, str) or not name.strip() or len(name) > 64 or not name.isprintable():
        raise UsageError(f"suite {where}: name {name!r} is not a name", "give name = \"...\" (1-64 printable characters)")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UsageError(f"suite {where}: version {version!r} is not a whole number of 1 or more",
                         "give version = 1 (raise it when the runs change)")
    repeat = doc.get("repeat", DEFAULT_REPEAT)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or not MIN_REPEAT <= repeat <= 1000:
        raise UsageError(f"suite {where}: repeat {repeat!r} is not allowed",
                         f"give {MIN_REPEAT} to 1000: compare needs {MIN_REPEAT} or more runs a side")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise UsageError(f"suite {where}: description must be text", "give description = \"...\"")
    runs = doc.get("run")
    if not isinstance(runs, list) or not runs:
        raise UsageError(f"suite {where} lists no run", "add one or more [[run]] tables, each with benchmark = \"NAME\"")
    entries = tuple(_entry(r, f"suite {where}: run {i}") for i, r in enumerate(runs, 1))
    return Suite(name.strip(), version, entries, repeat, description, where, standard)


def _entry(raw: Any, where: str) -> Entry:
    if not isinstance(raw, dict):
        raise UsageError(f"{where} is not a table", "write each run as [[run]] with benchmark = \"NAME\"")
    unknown = [k for k in raw if k not in RUN_KEYS]
    if unknown:
        raise UsageError(f"{where}: unknown key '{unknown[0]}'", f"a run takes: {', '.join(RUN_KEYS)} "
                         "(the benchmark's own parameters go in params = {...})")
    name = raw.get("benchmark")
    benches = all_benchmarks()
    if not isinstance(name, str) or ALIASES.get(name, name) not in benches:
        raise UsageError(f"{where}: unknown benchmark {name!r}",
                         "see 'clusterbench list' for the benchmarks")
    name = ALIASES.get(name, name)
    where = f"{where} ({name})"
    cls = benches[name]
    declared = {p.name: p for p in cls.params}
    params = raw.get("params", {})
    if not isinstance(params, dict):
        raise UsageError(f"{where}: params is not a table", "write params = { name = value, ... }")
    params = dict(params)
    if "hosts" in raw:
        if "hosts" not in declared:
            raise UsageError(f"{where}: {name} runs on this node only and takes no hosts", "drop hosts from this run")
        params["hosts"] = raw["hosts"]
    out: dict[str, Any] = {}
    for key, value in params.items():
        pname = key.replace("-", "_")
        if pname not in declared:
            raise UsageError(f"{where}: unknown parameter '{key}'",
                             f"{name} takes: {', '.join(declared) or 'no parameters'}")
        out[pname] = _value(declared[pname], value, where)
    timeout = raw.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0):
        raise UsageError(f"{where}: timeout {timeout!r} is not a number of seconds above 0", "e.g. timeout = 300")
    return Entry(name, out, None if timeout is None else float(timeout))


def _value(p: Param, value: Any, where: str) -> Any:
    """A TOML value as the parameter's declared type, checked against its declaration."""
    kind = p.type
    bad = UsageError(f"{where}: {p.name} = {value!r} is not {_kind_text(kind)}", f"e.g. {p.name} = {_example(p)}")
    if kind in ("intlist", "strlist"):
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list):
            raise bad
        try:
            if kind == "intlist":
                items = [int(x) if isinstance(x, str) else x for x in items]
                if not all(isinstance(x, int) and not isinstance(x, bool) for x in items):
                    raise bad
            elif not all(isinstance(x, str) for x in items):
                raise bad
        except ValueError:
            raise bad from None
        value = [x.strip() if isinstance(x, str) else x for x in items]
    elif kind is bool:
        if not isinstance(value, bool):
            raise bad
    elif kind is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad
    elif kind is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise bad
        value = float(value)
    elif kind is str:
        if not isinstance(value, str):
            raise bad
    try:
        p.check(value)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc.problem}", exc.fix) from None
    return value


def _kind_text(kind: Any) -> str:
    return {"intlist": "a list of whole numbers", "strlist": "a list of names", bool: "true or false",
            int: "a whole number", float: "a number", str: "text"}.get(kind, str(kind))


def _example(p: Param) -> str:
    if p.default is not None and not isinstance(p.default, (list, tuple)):
        return str(p.default).lower() if isinstance(p.default, bool) else repr(p.default).replace("'", '"')
    return {"intlist": "[1, 2]", "strlist": '["a", "b"]', bool: "true", int: "1", float: "1.0",
            str: '"..."'}.get(p.type, "...")


__all__ = ["Suite", "Entry", "DEFAULT_REPEAT", "MIN_REPEAT", "load", "parse", "standard_suites"]
