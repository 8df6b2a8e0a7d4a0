"""The integration tier's parallel pass (``./bootstrap.sh test`` runs the tests marked ``parallel`` on 2
pytest-xdist workers, after the rest ran one at a time) holds only tests that another test beside
them cannot break: no figure measured against a limit, a time bound only with room for a busy machine,
nothing machine-wide, no virtual cluster shared by a module's tests (the workers split a module) or
shaped by ``tc`` (its figures are checked against the shaping). A test's own ``sim_cluster`` is allowed:
each worker is its own test session with its own prefix (``t<pid>-``, tests/conftest.py's _sim_prefix),
namespaces, bridge and state folder. A test that looks for what it left behind looks for its own
processes only (tests/prockit.py). Read from the source: a test marked ``parallel`` (or a file whose
``pytestmark`` says so) must not use any of these words, and every number of seconds it adds to or
compares with ``time.monotonic()`` is at least ROOM_S."""
from __future__ import annotations

import ast
from pathlib import Path

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"

#: what a parallel test must not do, by the words that do it
FORBIDDEN = {
    "perf_counter": "a duration measured (a figure another test's load changes)",
    "time.time(": "the wall clock (a duration measured, or a name two workers can share in one second)",
    "pgrep": "a machine-wide process search (look for this test's own: tests/prockit.py)",
    "module_sim_cluster": "a virtual cluster shared by the module's tests (the two workers split a module)",
    ", rate=": "a link shaped by tc (figures checked against its rate)",
    ", delay=": "a link shaped by tc (figures checked against its delay)",
    "mount": "a mount (machine-wide)",
    "sysctl": "a sysctl (machine-wide)",
    "doctor": "`doctor`, whose fixes change the machine",
    "slurm": "Slurm's daemons (machine-wide)",
    "mark.slow": "the slow tier",
    "REPO": "the source tree (another worker imports it)",
}


#: the least number of seconds a parallel test may give a bounded step (a hang cut off, a wait for a process):
#: on 2 cpus shared with the other worker a step of a second can take several
ROOM_S = 10


def _has_monotonic(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "monotonic" or isinstance(n, ast.Name) and n.id == "monotonic"
               for n in ast.walk(node))


def tight_bounds(src: str) -> list[str]:
    """The numbers under ROOM_S added to an expression of ``time.monotonic()`` (a deadline
    ``monotonic() + 5``) or that such an expression is asserted to stay under (``monotonic() - t0 < 5``,
    also in a chain); a lower bound (``0.25 < monotonic() - t0``: it did wait) has no such limit."""
    def small(x: ast.AST) -> bool:
        return isinstance(x, ast.Constant) and isinstance(x.value, (int, float)) and x.value < ROOM_S

    out = []
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)):
            if any(_has_monotonic(x) for x in (n.left, n.right)) and any(small(x) for x in (n.left, n.right)):
                out.append(ast.unparse(n))
        elif isinstance(n, ast.Compare):
            terms = [n.left, *n.comparators]
            for op, a, b in zip(n.ops, terms, terms[1:]):
                below, above = (a, b) if isinstance(op, (ast.Lt, ast.LtE)) else (b, a)
                if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) and _has_monotonic(below) and small(above):
                    out.append(ast.unparse(n))
    return out


def _marked(node: ast.AST) -> bool:
    return "mark.parallel" in ast.unparse(node)


def _parallel_sources() -> dict[str, str]:
    """``{file or file::test: the source a parallel test runs}``: the whole file when its pytestmark
    says parallel, else each marked test's own source."""
    out: dict[str, str] = {}
    for path in sorted(INTEGRATION.glob("test_*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        if any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
               and _marked(n.value) for n in tree.body):
            out[path.name] = text
            continue
        for n in tree.body:
            if isinstance(n, ast.FunctionDef) and any(_marked(d) for d in n.decorator_list):
                out[f"{path.name}::{n.name}"] = ast.get_source_segment(text, n) or ""
    return out


def test_parallel_tests_exist_and_do_nothing_a_neighbour_could_break() -> None:
    found = _parallel_sources()
    assert len(found) >= 20, f"only {len(found)} files or tests marked parallel: the pass would be empty"
    bad = [f"{where}: uses {word!r} ({why}): drop its parallel mark"
           for where, src in found.items() for word, why in FORBIDDEN.items() if word in src]
    bad += [f"{where}: {expr}: a time bound with under {ROOM_S} s of room; give it more or drop its parallel mark"
            for where, src in found.items() for expr in tight_bounds(_dedented(src))]
    assert not bad, "\n".join(bad)


def _dedented(src: str) -> str:
    import textwrap

    return textwrap.dedent(src)


def test_the_check_sees_a_forbidden_word() -> None:
    src = "@pytest.mark.parallel\ndef test_x(module_sim_cluster):\n    t = time.perf_counter()\n"
    fn = ast.parse(src).body[0]
    assert _marked(fn.decorator_list[0])
    assert [w for w in FORBIDDEN if w in src] == ["perf_counter", "module_sim_cluster"]
    shaped = "def test_y(sim_cluster):\n    c = sim_cluster(2, rate='100mbit')\n"
    assert [w for w in FORBIDDEN if w in shaped] == [", rate="]


def test_the_check_sees_a_tight_time_bound() -> None:
    src = ("t0 = time.monotonic()\nrun(timeout=3)\nassert time.monotonic() - t0 < 5\n"
           "deadline = time.monotonic() + 2.5\nassert time.monotonic() - t0 < 15\nend = monotonic() + limit\n"
           "assert 0.25 < time.monotonic() - t0 < 10\nassert 3 > time.monotonic() - t0\n")
    assert tight_bounds(src) == ["time.monotonic() - t0 < 5", "time.monotonic() + 2.5", "3 > time.monotonic() - t0"]
