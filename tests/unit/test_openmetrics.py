"""The exporters (issue 28 #3): a registry of formats, and ``--format openmetrics`` (Prometheus' text
format: one gauge per figure, labels escaped, the run's time as the timestamp, ``# EOF``). Pure: the
text is parsed here; tests/integration/test_export_bundle.py checks it with ``promtool``."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from bundlekit import HOSTILE, exported, make_store
from clusterbench.cli import main
from clusterbench.errors import UsageError
from clusterbench.export import formats, render
from clusterbench.export.openmetrics import escape_value, label_name, metric_name

SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>.*)\} (?P<value>\S+)(?: (?P<ts>-?\d+))?$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"(,|$)')


def parse(text: str) -> list[tuple[str, dict[str, str], float, int | None]]:
    """The samples of an exposition (the format's grammar; a line that breaks it fails the test)."""
    assert text.endswith("# EOF\n")
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* \S|^# EOF$", line), line
            continue
        m = SAMPLE.match(line)
        assert m, line
        labels, rest = {}, m["labels"]
        while rest:
            lm = LABEL.match(rest)
            assert lm, rest
            labels[lm[1]] = lm[2].replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
            rest = rest[lm.end():]
        out.append((m["name"], labels, float(m["value"]), int(m["ts"]) if m["ts"] else None))
    return out


def test_the_registry_holds_one_module_per_format() -> None:
    assert list(formats()) == ["json", "csv", "hpccoutf", "openmetrics", "bundle"]
    assert [f.several for f in formats().values()] == [False, False, False, True, True]
    with pytest.raises(UsageError, match="is not one of json, csv, hpccoutf, openmetrics, bundle"):
        render("xml", [])


def test_a_single_run_format_refuses_several_runs(tmp_path: Path) -> None:
    make_store(tmp_path / "r.db", runs=2)
    with pytest.raises(UsageError, match="exports one run, the selector names 2"):
        render("csv", exported(tmp_path / "r.db", "base"))


def test_one_gauge_per_figure_with_labels_and_the_run_time(tmp_path: Path) -> None:
    ids = make_store(tmp_path / "r.db")
    text = render("openmetrics", exported(tmp_path / "r.db"))
    assert text.splitlines()[:2] == [
        "# HELP clusterbench_stream_triad clusterbench stream triad (MB/s, higher is better)",
        "# TYPE clusterbench_stream_triad gauge"]
    samples = parse(text)
    assert [s[2] for s in samples] == [r.value for r in exported(tmp_path / "r.db")[0][1]]
    name, labels, _, ts = samples[0]
    assert name == "clusterbench_stream_triad" and ts == 1795392000000  # 2026-11-23T00:00:00Z in ms
    assert labels["benchmark"] == "stream" and labels["metric"] == "triad" and labels["unit"] == "MB/s"
    assert labels["run"] == ids[0] and labels["threads"] == "1" and labels["node"]
    assert "# EOF" not in render("openmetrics", exported(tmp_path / "r.db"), timestamps=False).splitlines()[2]
    assert all(s[3] is None for s in parse(render("openmetrics", exported(tmp_path / "r.db"), timestamps=False)))


def test_several_runs_by_tag_and_repeated_points_stay_distinct(tmp_path: Path) -> None:
    make_store(tmp_path / "r.db", runs=3)
    samples = parse(render("openmetrics", exported(tmp_path / "r.db", "base")))
    assert len(samples) == 6 and len({tuple(sorted(s[1].items())) for s in samples}) == 6
    run, results = exported(tmp_path / "r.db")[0]
    twice = parse(render("openmetrics", [(run, results + results)]))
    assert [s[1].get("repeat") for s in twice] == [None, None, "2", "2"]


def test_hostile_strings_cannot_end_a_line_or_a_value(tmp_path: Path) -> None:
    make_store(tmp_path / "r.db", hostile=True)
    text = render("openmetrics", exported(tmp_path / "r.db"))
    assert "\x00" not in text and "\r" not in text and "\x1b" not in text
    samples = parse(text)  # every sample still one line of the grammar
    labels = samples[0][1]
    key = label_name(HOSTILE)
    assert re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", key)
    # newline, quotes, backslash and </script> come back as they were; control characters as \xNN text
    assert labels[key] == 'a\nb"c\'d\\e</script><b>\\x00f\\x1b[2J\\x0d'


def test_names_are_valid_whatever_the_benchmark_or_parameter() -> None:
    assert metric_name("my-bench", "p50.lat") == "clusterbench_my_bench_p50_lat"
    assert label_name("node") == "param_node" and label_name("__x") == "param_x" and label_name("9a") == "param_9a"
    assert escape_value('\\"\n') == '\\\\\\"\\n'


def test_the_cli_exports_a_tag_for_openmetrics_only(tmp_path: Path, capsys) -> None:
    db = str(tmp_path / "r.db")
    make_store(tmp_path / "r.db", runs=2)
    assert main(["--db", db, "results", "export", "base", "--format", "openmetrics", "--no-timestamps"]) == 0
    assert len(parse(capsys.readouterr().out)) == 4
    assert main(["--db", db, "results", "export", "base", "--format", "json"]) == 2
    assert "no run 'base'" in capsys.readouterr().err
