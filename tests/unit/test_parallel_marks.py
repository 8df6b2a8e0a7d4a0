"""The integration tier's parallel pass (``./bootstrap.sh test`` runs the tests marked ``parallel`` on 2
pytest-xdist workers, after the rest ran one at a time) holds only tests that another test beside
them cannot break: no time bound, nothing machine-wide, no virtual cluster shared by a module's tests
(the workers split a module) or shaped by ``tc`` (its figures are checked against the shaping). A test's
own ``sim_cluster`` is allowed: each worker is its own test session with its own prefix (``t<pid>-``,
tests/conftest.py's _sim_prefix), namespaces, bridge and state folder. Read from the source: a test
marked ``parallel`` (or a file whose ``pytestmark`` says so) must not use any of these words."""
from __future__ import annotations

import ast
from pathlib import Path

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"

#: what a parallel test must not do, by the words that do it
FORBIDDEN = {
    "monotonic": "a time bound (an elapsed time asserted or waited for)",
    "perf_counter": "a time bound (an elapsed time asserted or waited for)",
    "time.time(": "a time bound (an elapsed time asserted or waited for)",
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
    assert not bad, "\n".join(bad)


def test_the_check_sees_a_forbidden_word() -> None:
    src = "@pytest.mark.parallel\ndef test_x(module_sim_cluster):\n    t = time.monotonic()\n"
    fn = ast.parse(src).body[0]
    assert _marked(fn.decorator_list[0])
    assert [w for w in FORBIDDEN if w in src] == ["monotonic", "module_sim_cluster"]
    shaped = "def test_y(sim_cluster):\n    c = sim_cluster(2, rate='100mbit')\n"
    assert [w for w in FORBIDDEN if w in shaped] == [", rate="]
