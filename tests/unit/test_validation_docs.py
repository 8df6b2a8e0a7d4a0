"""The docs' figures cannot drift from the raw speed logs: speed/validation.py --check re-renders docs/validation.md's
tables from speed/results-*.txt through the claims in speed/claims.toml, and checks the figures quoted in the prose
of README.md and docs/ (``[[figure]]``) and the log excerpts the pages mark (pure: reads files, starts nothing)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from speedscriptkit import speed_script

ROOT = Path(__file__).resolve().parents[2]
#: one worker runs them all (and test_figure_audit.py's): speed/validation.py memoises what it reads of the
#: logs, and every test re-reads them
pytestmark = pytest.mark.xdist_group("validation-docs")


@pytest.fixture
def validation():
    return speed_script("validation")  # one per process: its memo outlives this module's tests


@pytest.mark.heavy(0.7)
def test_docs_validation_matches_the_logs(validation, capsys):
    rc = validation.main(["--check"])
    assert rc == 0, capsys.readouterr().err


def test_every_table_is_in_the_docs_and_every_figure_declared(validation):
    claims = validation.load_claims()
    doc = (ROOT / "docs" / "validation.md").read_text()
    ids = [t["id"] for t in claims["table"]]
    assert len(ids) == len(set(ids))
    for tid in ids:
        assert f"<!-- validation:{tid} -->" in doc
    for t in claims["table"]:
        for row in t["row"]:
            for cell in row["cells"]:
                if isinstance(cell, dict):
                    assert "printed" in cell, (t["id"], cell)


def _tamper(validation, tmp_path, old: str, new: str):
    text = (ROOT / "speed" / "claims.toml").read_text()
    assert old in text
    claims_file = tmp_path / "claims.toml"
    claims_file.write_text(text.replace(old, new, 1))
    doc_file = tmp_path / "validation.md"
    doc_file.write_text((ROOT / "docs" / "validation.md").read_text())
    return claims_file, doc_file


def test_a_tampered_printed_figure_fails(validation, tmp_path, capsys):
    # the STREAM-vs-hpcc median over three rounds is 0.99: quoting it as 1.12 must fail
    claims_file, doc_file = _tamper(validation, tmp_path, 'expr = "median(ratios(th_o, th_r))", printed = "0.99"',
                                    'expr = "median(ratios(th_o, th_r))", printed = "1.12"')
    assert validation.main(["--check", "--claims", str(claims_file), "--doc", str(doc_file)]) == 1
    assert "the log gives '0.99'" in capsys.readouterr().err


def test_a_tampered_verdict_fails(validation, tmp_path, capsys):
    # run A's 8 B latency fails its target against the lower reference (NetPIPE): calling it met must fail
    claims_file, doc_file = _tamper(validation, tmp_path, 'printed = "not met"}]', 'printed = "met"}]')
    assert validation.main(["--check", "--claims", str(claims_file), "--doc", str(doc_file)]) == 1
    assert "the log gives 'not met'" in capsys.readouterr().err


def test_an_edited_table_in_the_docs_fails(validation, tmp_path, capsys):
    doc = (ROOT / "docs" / "validation.md").read_text()
    doc_file = tmp_path / "validation.md"
    doc_file.write_text(doc.replace("| 2.23 |", "| 1.00 |", 1))
    assert "| 2.23 |" in doc
    assert validation.main(["--check", "--doc", str(doc_file)]) == 1
    assert "differs from what the logs give" in capsys.readouterr().err


def test_a_pattern_that_matches_nothing_is_a_problem(validation, tmp_path):
    claims_file, doc_file = _tamper(validation, tmp_path, "tl_o = '^\\s+triad_vs_likwid\\s+ours",
                                    "tl_o = '^\\s+triad_vs_nothing\\s+ours")
    new, problems = validation.render_doc(doc_file.read_text(), validation.load_claims(claims_file))
    assert any("empty series" in p for p in problems)


def _tree_copy(tmp_path, page: str, old: str, new: str) -> Path:
    """README.md and docs/ copied under tmp_path, ``old`` replaced by ``new`` once in ``page``."""
    (tmp_path / "docs").mkdir()
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        (tmp_path / path.relative_to(ROOT)).write_text(path.read_text())
    text = (tmp_path / page).read_text()
    assert old in text
    (tmp_path / page).write_text(text.replace(old, new, 1))
    return tmp_path


@pytest.mark.heavy(0.7)
def test_a_figure_quoted_in_prose_is_bound_to_its_log(validation, tmp_path, capsys):
    # docs/check.md: the net check's nights took 12-19 s in its log; saying 12-18 must fail
    root = _tree_copy(tmp_path, "docs/check.md", "takes 12-19 s.", "takes 12-18 s.")
    assert validation.main(["--check", "--root", str(root)]) == 1
    assert "docs/check.md prints '18'" in capsys.readouterr().err
    # rewriting puts the log's figure back
    validation.main(["--root", str(root)])
    assert "takes 12-19 s." in (root / "docs" / "check.md").read_text()


def test_a_figure_whose_words_are_gone_is_a_problem(validation):
    claims = {"figure": [{"doc": "docs/x.md", "log": "results-2026-11-22-emr-2vcpu.txt",
                          "exprs": ["len(grep('^round \\d+/'))"], "quote": "in {0:.0f} rounds"}]}
    new, problems = validation.render_pages({"docs/x.md": "three rounds"}, claims)
    assert any("no longer says" in p for p in problems)
    new, problems = validation.render_pages({"docs/x.md": "in 9 rounds"}, claims)
    assert any("prints '9'" in p for p in problems)


def test_a_figure_check_holds_the_words(validation):
    claims = {"figure": [{"doc": "docs/x.md", "log": "results-2026-11-22-emr-2vcpu.txt",
                          "exprs": ["1"], "checks": ["len(grep('^round \\d+/')) > 1000"], "quote": "over {0:.0f}"}]}
    new, problems = validation.render_pages({"docs/x.md": "over 1"}, claims)
    assert any("does not bear out" in p for p in problems)


def test_an_excerpt_must_be_lines_of_its_log(validation):
    log = "results-2026-11-23-amd-epyc-2vcpu-faults-kill9.txt"
    good = (f"<!-- excerpt: speed/{log} -->\n```\n$ python3 speed/faults_kill9.py \\\n    --all\n"
            "scenario   where        processes  folders\n...\ntcp        sim-cluster          0        0  (2 processes ran at the kill)\n```\n")
    _, problems = validation.render_pages({"docs/x.md": good}, {})
    assert problems == []
    bad = good.replace("0        0  (2 processes", "1        0  (2 processes")
    _, problems = validation.render_pages({"docs/x.md": bad}, {})
    assert any("a line the log does not have" in p for p in problems)
    swapped = good.replace("scenario   where        processes  folders\n...\n", "").replace(
        "```\n```", "```\n").replace("(2 processes ran at the kill)\n", "(2 processes ran at the kill)\nscenario   where        processes  folders\n")
    _, problems = validation.render_pages({"docs/x.md": swapped}, {})
    assert any("in that order" in p for p in problems)


def test_the_expression_language_is_closed(validation):
    with pytest.raises(validation.ClaimError):
        validation.evaluate("__import__('os')", "", {})
    assert validation.evaluate("median(ratios(grep(r'a (\\d+)'), grep(r'b (\\d+)')))", "a 2 b 1\na 6 b 2\na 9 b 3", {}) == 3.0


def test_no_figure_without_a_log_is_quoted():
    """Figures the logs do not hold are named as not measured here, never quoted."""
    text = "\n".join((ROOT / p).read_text() for p in ["README.md", *[str(q.relative_to(ROOT)) for q in (ROOT / "docs").glob("*.md")]])
    assert "2.7–5×" not in text and "2.7-5x" not in text
    assert not re.search(r"29\.6 GB/s with 2 threads", text)
    assert "best sample), as STREAM,\nOSU and likwid do" not in text and "as STREAM, OSU and likwid do" not in text


def test_the_docs_call_the_release_by_the_package_version():
    import tomllib
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    readme = (ROOT / "README.md").read_text()
    assert f"This release, {version}," in readme
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for m in re.finditer(r"(?:[Rr]elease,? |What moved in |stored before |(?:name|quoted) since )(\d+\.\d+(?:\.\d+)?)\b", path.read_text()):
            assert m.group(1) == version, (path.name, m.group(0))


def test_user_docs_cite_public_sources_not_internal_numbers():
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        text = path.read_text()
        assert not re.search(r"\bseed 00\d", text), path.name
        assert not re.search(r"\bissue \d+", text), path.name


def test_every_relative_link_in_the_docs_resolves():
    """A page moved or renamed must not leave a link behind (the README and docs/ link to each other and
    to the tree)."""
    broken = []
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for m in re.finditer(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            target = m.group(1)
            if not re.match(r"[a-z]+:", target) and not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_every_test_and_speed_script_the_docs_name_exists():
    """A test or speed script moved (tests/ into unit/ and integration/, a script split) must not leave its
    old path in the docs. (Paths under src/ are left out: the guides name the files a reader creates.)"""
    missing = []
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for m in re.finditer(r"\b(?:tests|speed)/[\w./-]+\.(?:py|txt|toml|sh)\b", path.read_text()):
            if not (ROOT / m.group(0)).exists():
                missing.append(f"{path.relative_to(ROOT)} names {m.group(0)}")
    assert not missing, missing
