"""docs/adding-a-doctor-rule.md is true: its block, dropped into a rules folder as one file with nothing
else edited, is found by the registry, judges hand-made evidence (fires, passes, cannot tell), runs
with the other rules, and is listed with its figures, down to sweep node's likely causes. Pure: no
process, nothing written into the source tree."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from clusterbench.doctor import engine, rules
from clusterbench.doctor.rule import CannotTell, Hit

from doctorkit import bad, healthy, ok, with_items  # the hand-made evidence

DOC = Path(__file__).resolve().parents[2] / "docs" / "adding-a-doctor-rule.md"
NAME = "thp_defrag"
SHIPPED = [r.id for r in engine.RULES]


def _block() -> str:
    m = re.search(rf"`src/clusterbench/doctor/rules/{NAME}\.py`.*?```python\n(.*?)```", DOC.read_text(), re.S)
    assert m, f"{DOC.name} has no python block for rules/{NAME}.py"
    return m.group(1)


@pytest.fixture
def guide_rules(tmp_path, monkeypatch):
    """The registry's rules with the guide's file added to the rules folder (a second folder on the
    package's path, so the source tree is untouched)."""
    (tmp_path / f"{NAME}.py").write_text(_block())
    monkeypatch.setattr(rules, "__path__", [*rules.__path__, str(tmp_path)])
    found = rules.discover()
    monkeypatch.setattr(engine, "RULES", found)
    yield found
    sys.modules.pop(f"{rules.__name__}.{NAME}", None)


def test_the_guide_rule_is_found_and_judges_evidence(guide_rules) -> None:
    r = engine.rule("thp-defrag-stall")
    ids = [x.id for x in guide_rules]
    assert sorted(ids) == sorted([*SHIPPED, "thp-defrag-stall"])  # one file added one rule
    assert ids.index("thp") < ids.index("thp-defrag-stall") < ids.index("swap-in-use")  # its order: 55
    assert r.title and r.why and r.fix and r.verify and "transhuge.rst" in r.why and "seed" not in r.why

    assert r.check(healthy()) is None
    assert isinstance(r.check(with_items(thp__defrag=bad("no THP"))), CannotTell)
    ev = with_items(thp__enabled=ok("madvise", "/sys/kernel/mm/transparent_hugepage/enabled"),
                    thp__defrag=ok("always", "/sys/kernel/mm/transparent_hugepage/defrag"))
    hit = r.check(ev)
    assert isinstance(hit, Hit) and "stall" in hit.summary
    assert hit.undo == ["echo always > /sys/kernel/mm/transparent_hugepage/defrag"]  # the value it read

    out = engine.evaluate({"n1": ev, "n2": healthy()})
    (f,) = [x for x in out["findings"] if x["rule"] == "thp-defrag-stall"]
    assert f["node"] == "n1" and f["severity"] == "warn" and f["verify"] == "run stream"
    assert f["apply"] == {"n1": {"do": ["echo defer > /sys/kernel/mm/transparent_hugepage/defrag"],
                                 "undo": ["echo always > /sys/kernel/mm/transparent_hugepage/defrag"]}}
    assert {"rule": "thp-defrag-stall", "node": "n2", "title": r.title} in out["passed"]


def test_the_guide_rule_is_listed_with_its_figures(guide_rules) -> None:
    from clusterbench.sweep import node as sw

    assert engine.figures_table()["stream"]["thp-defrag-stall"] == ("triad",)
    assert "thp-defrag-stall" in engine.bearing_on("membw") and "thp-defrag-stall" not in engine.bearing_on("fpu")
    assert "thp-defrag-stall" in sw.relevant_rules("dgemm")
    findings = [{"rule": "thp-defrag-stall", "node": "n2", "title": "t", "summary": "s", "severity": "warn"}]
    assert [c["rule"] for c in sw.likely_causes({"n2": {"stream"}}, findings, ["n1", "n2", "n3"])["n2"]] == \
        ["thp-defrag-stall"]
    assert sw.likely_causes({"n2": {"fpu"}}, findings, ["n1", "n2", "n3"]) == {}  # it does not bear on fpu


def test_rule_evaluation_imports_nothing_that_does_io() -> None:
    """The rules and the engine are pure: no store, launch, kernels, subprocess; from probe only the two
    pure functions they compare with (a core type's ISA, two nodes' environments)."""
    import ast

    pkg = Path(engine.__file__).parent
    io = ("clusterbench.store", "clusterbench.launch", "clusterbench.kernels", "clusterbench.probe",
          "clusterbench.doctor.evidence", "clusterbench.doctor.gather", "clusterbench.doctor.fixes",
          "clusterbench.session", "subprocess", "socket", "sqlite3", "shutil", "os")
    pure = {("clusterbench.probe.blas", "choose_coretype"), ("clusterbench.analysis.consistency", "diff")}
    for f in [pkg / "rule.py", pkg / "engine.py", *sorted((pkg / "rules").glob("*.py"))]:
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.ImportFrom):
                got = [(n.module or "", a.name) for a in n.names]
            elif isinstance(n, ast.Import):
                got = [(a.name, "") for a in n.names]
            else:
                continue
            for mod, name in got:
                assert (mod, name) in pure or not mod.startswith(io), f"{f.name} imports {mod} {name}"


def test_every_rule_bears_on_figures_that_exist() -> None:
    from clusterbench.benchmarks import all_benchmarks

    benches = all_benchmarks()
    for r in engine.RULES:
        assert r.figures, f"{r.id} names no figure"
        for bench, metrics in r.figures.items():
            assert bench in benches, f"{r.id}: no benchmark {bench!r}"
            known = {m.name for m in benches[bench].metrics}
            assert metrics and set(metrics) <= known, f"{r.id}: {bench} has no metric {set(metrics) - known}"
