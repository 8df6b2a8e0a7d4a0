"""The layout's rules (docs/architecture.md), checked on the source: a rule the tree breaks fails here.

Pure (reads the source files with :mod:`ast`), so it runs in the unit tier.
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "clusterbench"
#: the trees beside the package held to the same size: the tests and the speed scripts
SCRIPTS = ("tests", "speed")

# one pytest-xdist worker runs them all (--dist loadgroup, as bootstrap.sh's unit tier): the source is parsed once
pytestmark = pytest.mark.xdist_group("architecture")

#: the most lines a Python module may have
MAX_LINES = 600
#: modules still over the limit, with the size they may not grow past (shrink the entry, then drop it)
OVER_LIMIT: dict[str, int] = {}

#: what analysis/ may not import: anything that reads or writes outside its arguments
IO_MODULES = ("clusterbench.store", "clusterbench.launch", "clusterbench.probe", "clusterbench.kernels",
              "clusterbench.session", "clusterbench.sweep", "clusterbench.cluster", "clusterbench.files",
              "clusterbench.config", "subprocess", "socket", "sqlite3", "shutil", "urllib", "http")


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def _rel(p: Path) -> str:
    return p.relative_to(SRC).as_posix()


@functools.lru_cache(maxsize=None)
def _tree(p: Path) -> ast.Module:
    return ast.parse(p.read_text(), str(p))


@pytest.fixture(scope="module", autouse=True)
def _trees_dropped_after():
    """The parsed source dropped when this module's tests are done: some 400,000 objects that would
    otherwise live as long as the worker, and every full garbage collection after (pytest makes two as the
    session ends) walked them all, a second each on a loaded machine."""
    yield
    _tree.cache_clear()


def _statements(tree: ast.AST):
    """Every statement of ``tree``, nested ones included: ast.walk without the expressions (an import
    is a statement, and only statements, handlers and match cases hold statements), a tenth of the nodes."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.stmt):
            yield node
        todo.extend(child for child in ast.iter_child_nodes(node)
                    if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)))


def _imports(p: Path) -> list[tuple[str, str | None, int]]:
    """(module, imported name or None, line) for every import in ``p``, relative imports resolved."""
    rel = p.relative_to(SRC)
    package = ["clusterbench", *rel.parts[:-1]]
    out = []
    for node in _statements(_tree(p)):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([mod] if mod else []))
            out += [(mod, a.name, node.lineno) for a in node.names]
    return out


def _top(module: str) -> str | None:
    """The package of clusterbench a module belongs to (``clusterbench.store.db`` -> ``store``)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "clusterbench" and len(parts) > 1 else None


def test_no_module_is_over_the_line_limit():
    assert _modules(), f"no modules under {SRC}"
    sizes = {_rel(p): len(p.read_text().splitlines()) for p in _modules()}
    over = {f: n for f, n in sizes.items() if n > MAX_LINES and n > OVER_LIMIT.get(f, 0)}
    assert not over, f"modules over {MAX_LINES} lines (split them by concern): {over}"
    stale = {f: sizes.get(f) for f in OVER_LIMIT if sizes.get(f, 0) <= MAX_LINES}
    assert not stale, f"no longer over the limit (drop them from OVER_LIMIT): {stale}"


def test_no_test_or_speed_script_is_over_the_line_limit():
    files = sorted(p for tree in SCRIPTS for p in (ROOT / tree).rglob("*.py") if "__pycache__" not in p.parts)
    assert files, f"no Python files under {ROOT} {SCRIPTS}"
    over = {p.relative_to(ROOT).as_posix(): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not over, f"files over {MAX_LINES} lines (split them by concern): {over}"


def test_the_readme_fits_about_300_lines():
    """The front door stays short: the quick start, the commands, a first look and the way to a cluster;
    the rest lives in docs/, one page per command family."""
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= 300, f"README.md has {n} lines: move the detail into docs/ and link to it"


def test_analysis_does_no_io():
    bad = [f"{_rel(p)}:{line} imports {mod}" for p in _modules() if _rel(p).startswith("analysis/")
           for mod, _name, line in _imports(p) if mod.startswith(IO_MODULES)]
    assert not bad, "analysis/ must stay pure (no store, launch, probe, processes, files): " + "; ".join(bad)


def _eager_imports(p: Path) -> list[str]:
    """The modules ``p`` imports when it is imported: its module-level imports (those inside a function
    run only when it is called; those under ``if TYPE_CHECKING:`` never), a name taken from a package
    counted as its submodule when it is one."""
    rel = p.relative_to(SRC)
    package = ["clusterbench", *rel.parts[:-1]]
    out, todo = [], list(_tree(p).body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                mod = ".".join(package[: len(package) - node.level + 1] + ([mod] if mod else []))
            out.append(mod)
            out += [f"{mod}.{a.name}" for a in node.names if _source(f"{mod}.{a.name}")]
        todo.extend(child for child in ast.iter_child_nodes(node)
                    if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)))
    return out


def _source(module: str) -> Path | None:
    """The file of a clusterbench module (``clusterbench.a.b`` -> a/b.py or a/b/__init__.py), or None."""
    parts = module.split(".")
    if parts[0] != "clusterbench":
        return None
    base = SRC.joinpath(*parts[1:])
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _loaded(module: str) -> set[str]:
    """Every module that importing ``module`` loads: its packages' ``__init__`` first, then what each
    loaded clusterbench module imports at its top level, transitively."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        mod = todo.pop()
        parts = mod.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name in seen:
                continue
            seen.add(name)
            f = _source(name)
            if f is not None:
                todo += _eager_imports(f)
    return seen


def test_analysis_loads_no_io_through_what_it_imports():
    """Importing an analysis module loads nothing that does I/O, not even through a package's
    ``__init__`` (importing ``clusterbench.x.y`` runs ``clusterbench/x/__init__.py`` first)."""
    bad = []
    for p in _modules():
        if not _rel(p).startswith("analysis/"):
            continue
        module = "clusterbench." + _rel(p).removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        io = sorted(m for m in _loaded(module) if m.startswith(IO_MODULES))
        if io:
            bad.append(f"{_rel(p)} loads {', '.join(io)}")
    assert not bad, "analysis/ must stay pure, and so must what it imports: " + "; ".join(bad)


def _private(name: str | None) -> bool:
    return bool(name) and name.startswith("_") and not name.startswith("__")


def test_no_private_name_is_imported_across_packages():
    """Neither ``from clusterbench.x import _name`` nor ``x._name`` on a module imported from another
    package."""
    bad = []
    for p in _modules():
        here = _rel(p).split("/")[0].removesuffix(".py")
        aliases = {}
        for mod, name, line in _imports(p):
            there = _top(f"{mod}.{name}" if name else mod)
            if _private(name) and there and there != here:
                bad.append(f"{_rel(p)}:{line} takes {name} from {mod}")
            elif there and there != here:
                aliases[name or mod.split(".")[-1]] = f"{mod}.{name}" if name else mod
        text = p.read_text()
        if not any(f"{alias}._" in text for alias in aliases):
            continue
        for node in ast.walk(_tree(p)):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr)
                    and node.value.id in aliases):
                bad.append(f"{_rel(p)}:{node.lineno} reads {node.value.id}.{node.attr} ({aliases[node.value.id]})")
    assert not bad, "make the name public, or move it where it is used: " + "; ".join(bad)


#: tests that may reach a private name of clusterbench, each with why the private hook is the point
#: ("path:name": reason); a test otherwise goes through the public function, or the name is made public
PRIVATE_IN_TESTS: dict[str, str] = {}
_PRIVATE_IMPORT = re.compile(r"from\s+clusterbench[\w.]*\s+import\s+(?:\([^)]*|[^\n]*)\b_[A-Za-z]")


def test_no_test_takes_a_private_name_of_the_package():
    """A test reads clusterbench as its users do: neither ``from clusterbench.x import _name`` nor
    ``x._name`` on a module of clusterbench (an object's own attributes, ``obj._x``, are not looked at;
    nor are ``monkeypatch.setattr(module, "_seam", ...)``'s seams, which replace I/O the test must not do)."""
    bad = []
    for p in sorted((ROOT / "tests").rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        rel = p.relative_to(ROOT).as_posix()
        text = p.read_text()
        # parsed only when the text may break the rule (a private name imported from clusterbench, or
        # NAME._x with NAME imported): a tenth of the files
        reads = set(re.findall(r"\b(\w+)\._[A-Za-z]", text)) - {"self", "cls"}
        if not (_PRIVATE_IMPORT.search(text) or any(re.search(rf"\bimport\b[^\n]*\b{n}\b", text) for n in reads)):
            continue
        aliases: dict[str, str] = {}
        for node in _statements(_tree(p)):
            if isinstance(node, ast.Import):
                aliases.update({a.asname or a.name.split(".")[0]: a.name for a in node.names
                                if a.name.split(".")[0] == "clusterbench"})
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "clusterbench":
                for a in node.names:
                    if _private(a.name) and f"{rel}:{a.name}" not in PRIVATE_IN_TESTS:
                        bad.append(f"{rel}:{node.lineno} takes {a.name} from {node.module}")
                    elif not _private(a.name):
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        if not any(f"{alias}._" in text for alias in aliases):
            continue
        for node in ast.walk(_tree(p)):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr)
                    and node.value.id in aliases and f"{rel}:{node.attr}" not in PRIVATE_IN_TESTS):
                bad.append(f"{rel}:{node.lineno} reads {node.value.id}.{node.attr} ({aliases[node.value.id]})")
    assert not bad, "test through the public function, or make the name public: " + "; ".join(bad)


#: programs that reach another node or start processes there: only launch/ names them in a command line
REACH_PROGRAMS = {"ssh", "scp", "sftp", "rsync", "srun", "salloc", "sbatch", "qsub", "pbsdsh", "flux", "nsenter"}


_NAMES_A_PROGRAM = re.compile(r"""["'](?:%s|ip)["']""" % "|".join(sorted(REACH_PROGRAMS)))


def _starts(node: ast.AST) -> str | None:
    """The program a list or tuple literal starts, when it is one that reaches a node (``ip netns exec``
    too; ``ip -n NS link`` configures a namespace, it runs nothing there)."""
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        return None
    words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts[:3]]
    if words[0] in REACH_PROGRAMS:
        return words[0]
    return "ip netns exec" if words == ["ip", "netns", "exec"] else None


def test_only_launch_reaches_a_node():
    """One way to reach a node: a command line (a list whose first item is a program's name) that
    starts ssh, a scheduler's launcher or ``ip netns exec`` is built in launch/ only; everyone else
    asks launch/ (remote.transport, the launcher registry, the tagged per-node mode)."""
    bad = []
    for p in _modules():
        if _rel(p).startswith("launch/"):
            continue
        if not _NAMES_A_PROGRAM.search(p.read_text()):
            continue  # no such program's name as a string literal: nothing to walk (a full walk is most of the cost)
        bad += [f"{_rel(p)}:{node.lineno} starts {_starts(node)}" for node in ast.walk(_tree(p)) if _starts(node)]
    assert not bad, "reach nodes through clusterbench.launch (remote.transport, a launcher): " + "; ".join(bad)


@pytest.mark.parametrize("rule", ["sizes", "sizes-scripts", "io", "io-through", "private", "private-attribute",
                                  "private-tests", "private-tests-attribute", "reach"])
def test_the_checks_catch_what_they_look_for(tmp_path, monkeypatch, rule):
    """Each rule fails on a tree that breaks it (a check that cannot fail is no check)."""
    pkg = tmp_path / "clusterbench"
    (pkg / "analysis").mkdir(parents=True)
    (pkg / "store").mkdir()
    if rule == "sizes":
        (pkg / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
        check = test_no_module_is_over_the_line_limit
    elif rule == "sizes-scripts":
        (tmp_path / "tests").mkdir()
        (tmp_path / "speed").mkdir()
        (tmp_path / "tests" / "test_small.py").write_text("x = 1\n")
        (tmp_path / "speed" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
        monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
        check = test_no_test_or_speed_script_is_over_the_line_limit
    elif rule == "io":
        (pkg / "analysis" / "a.py").write_text("from clusterbench.store import Store\n")
        check = test_analysis_does_no_io
    elif rule == "io-through":  # a pure-looking import whose package's __init__ reaches the store
        (pkg / "records").mkdir()
        (pkg / "records" / "__init__.py").write_text("from clusterbench.records.typed import Run\n"
                                                     "from clusterbench.store import Store\n")
        (pkg / "records" / "typed.py").write_text("class Run:\n    pass\n")
        (pkg / "store" / "__init__.py").write_text("import sqlite3\n")
        (pkg / "analysis" / "a.py").write_text("from clusterbench.records.typed import Run\n")
        check = test_analysis_loads_no_io_through_what_it_imports
    elif rule == "private":
        (pkg / "analysis" / "a.py").write_text("from clusterbench.store.db import _secret\n")
        check = test_no_private_name_is_imported_across_packages
    elif rule.startswith("private-tests"):
        (tmp_path / "tests").mkdir()
        (tmp_path / "tests" / "test_a.py").write_text(
            "from clusterbench.store import db\nx = db._secret\n" if rule.endswith("attribute")
            else "from clusterbench.store.db import _secret\n")
        monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
        check = test_no_test_takes_a_private_name_of_the_package
    elif rule == "reach":
        (pkg / "store" / "sync.py").write_text("import subprocess\nsubprocess.run(['ssh', 'node1', 'true'])\n")
        check = test_only_launch_reaches_a_node
    else:
        (pkg / "analysis" / "a.py").write_text("from clusterbench.store import db\nx = db._secret\n")
        check = test_no_private_name_is_imported_across_packages
    monkeypatch.setattr(f"{__name__}.SRC", pkg)
    monkeypatch.setattr(f"{__name__}.OVER_LIMIT", {})
    with pytest.raises(AssertionError):
        check()
