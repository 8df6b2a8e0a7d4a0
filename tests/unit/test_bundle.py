"""The result bundle (issue 28 #4): its schema and checksum, every refusal in one line, hostile strings
in every field, import all or nothing, export -> import -> export identical but for the import time, the
energy level checked from the meters, and reproduce's plan. Pure: real stores, no process started."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bundlekit import HOSTILE, exported, ipmi_energy, make_store
from clusterbench.analysis.compare import compare
from clusterbench.bundle import BUNDLE_SCHEMA, build, dumps, loads, runs_of
from clusterbench.bundle.checker import schema, validate
from clusterbench.bundle.importing import import_bundle
from clusterbench.cli import main
from clusterbench.energy.levels import check_levels
from clusterbench.errors import UsageError
from clusterbench.reproduce import command_of, plan
from clusterbench.store import Store


def _bundle(tmp_path: Path, **kw) -> str:
    make_store(tmp_path / "a.db", **kw)
    return dumps(build(exported(tmp_path / "a.db", "base")))


def _refused(text: str, needle: str) -> str:
    with pytest.raises(UsageError) as ei:
        loads(text, "b.json")
    msg = f"{ei.value}"
    assert needle in msg and "\n" not in msg, msg
    return msg


def test_a_bundle_follows_its_schema_and_is_the_same_bytes_each_time(tmp_path: Path) -> None:
    text = _bundle(tmp_path, runs=2)
    assert text == dumps(build(exported(tmp_path / "a.db", "base")))
    doc = loads(text)
    assert validate(doc, schema()) is None and doc["bundle_schema"] == BUNDLE_SCHEMA and doc["imported"] == []
    entry = doc["runs"][0]
    assert set(entry) == {"run", "nodes", "software", "results", "power_trace", "energy_level"}
    fig = entry["results"][0]
    assert len(fig["samples"]) == 9 and fig["summary"]["n"] == 9 and fig["measured_at"]
    assert fig["intervals"]["confidence"] == 0.99 and fig["intervals"]["median"][0] <= fig["summary"]["median"]
    assert entry["software"]["nodes"][entry["run"]["host"]]["kernel"] == "6.1.0"
    assert entry["run"]["argv"][:3] == ["clusterbench", "--db", str(tmp_path / "a.db")]


@pytest.mark.parametrize("edit,needle", [
    (lambda t: t[: len(t) // 2], "is not valid JSON (line"),
    (lambda t: "[1, 2]", "is not a clusterbench bundle"),
    (lambda t: t.replace('"bundle_schema": 1', '"bundle_schema": 2'), "has bundle schema 2, newer than this"),
    (lambda t: t.replace('"value": 30', '"value": 31', 1), "checksum does not match its content"),
    (lambda t: t.replace('"status": "complete"', '"status": "running"', 1), "expected one of"),
    (lambda t: t.replace('"samples": [', '"samples": [NaN, ', 1), "NaN is not a JSON number"),
    (lambda t: t.replace('"higher_is_better": true', '"higher_is_better": "yes"', 1), "expected boolean"),
])
def test_bad_bundles_are_refused_in_one_line(tmp_path: Path, edit, needle) -> None:
    _refused(edit(_bundle(tmp_path)), needle)


def test_a_hostile_run_id_is_refused_by_the_schema(tmp_path: Path) -> None:
    doc = json.loads(_bundle(tmp_path))
    doc["runs"][0]["run"]["id"] = "../x\n"
    msg = _refused(json.dumps(doc), "$.runs[0].run.id")
    assert "\\n" in msg  # named escaped, never echoed raw


def test_hostile_strings_in_every_field_round_trip_exactly(tmp_path: Path) -> None:
    text = _bundle(tmp_path, hostile=True)
    assert "\x00" not in text and "\x1b" not in text and "\r" not in text  # ASCII, escaped
    assert "</script>" in text  # JSON keeps it; the HTML report escapes it (test below)
    import_bundle(Store(tmp_path / "b.db"), loads(text), now="2026-11-27T00:00:00.000+00:00")
    (run, results), = exported(tmp_path / "b.db")
    assert run.note == HOSTILE and run.error == HOSTILE and results[0].params[HOSTILE] == HOSTILE
    assert run.warnings[0]["message"] == HOSTILE and run.argv[-1] == HOSTILE


def test_the_report_escapes_an_imported_run_s_hostile_strings(tmp_path: Path) -> None:
    from clusterbench.report.html import write_report

    import_bundle(Store(tmp_path / "b.db"), loads(_bundle(tmp_path, hostile=True)))
    index = write_report(Store(tmp_path / "b.db", readonly=True), ["last"], tmp_path / "rep")
    html = index.read_text()
    # HTML-escaped wherever it is shown (control characters pass as they are: text to a browser)
    assert "</script><b>" not in html and "&lt;/script&gt;&lt;b&gt;" in html


def test_export_import_export_differs_only_by_the_import_time(tmp_path: Path, capsys) -> None:
    make_store(tmp_path / "a.db", energy=ipmi_energy(["n1"]), runs=2)
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    first = tmp_path / "1.json"
    assert main(["--db", a, "results", "export", "base", "--format", "bundle", "-o", str(first)]) == 0
    assert main(["--db", b, "results", "import", str(first), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert len(done["runs"]) == 2
    assert main(["--db", b, "results", "export", "base", "--format", "bundle"]) == 0
    second = capsys.readouterr().out
    old, new = json.loads(first.read_text()), json.loads(second)
    assert new["imported"] == [done["imported_at"]] and old["imported"] == []
    new["imported"] = []
    assert dumps(new) == first.read_text()
    # compare between the original and the imported runs finds nothing: no change, nothing else changed
    orig, back = exported(tmp_path / "a.db", "base"), exported(tmp_path / "b.db", "base")
    cmp = compare([r for r, _ in orig], [res for _, res in orig], [r for r, _ in back], [res for _, res in back],
                  {"stream": ("threads",)})
    assert cmp.env == () and cmp.only_a == () and cmp.only_b == ()
    assert {m.comparison.verdict for m in cmp.matches} == {"no significant difference"}
    assert all(m.comparison.ratio == 1.0 for m in cmp.matches)


def test_a_run_already_stored_is_refused_saying_how(tmp_path: Path, capsys) -> None:
    text = _bundle(tmp_path)
    (tmp_path / "1.json").write_text(text)
    b = str(tmp_path / "b.db")
    assert main(["--db", b, "results", "import", str(tmp_path / "1.json")]) == 0
    capsys.readouterr()
    assert main(["--db", b, "results", "import", str(tmp_path / "1.json")]) == 2
    assert "the same run: nothing imported" in capsys.readouterr().err
    doc = json.loads(text)
    doc["runs"][0]["run"]["note"] = "another"
    from clusterbench.bundle import checksum
    doc["checksum"] = checksum(doc)
    (tmp_path / "2.json").write_text(dumps(doc))
    assert main(["--db", b, "results", "import", str(tmp_path / "2.json")]) == 2
    assert "with other content; pass --force" in capsys.readouterr().err
    assert main(["--db", b, "results", "import", str(tmp_path / "2.json"), "--force"]) == 0
    assert "replaced the stored one" in capsys.readouterr().out
    assert Store(b, readonly=True).get_run("last").note == "another"


def test_import_is_all_or_nothing(tmp_path: Path, monkeypatch) -> None:
    doc = loads(_bundle(tmp_path, runs=3))
    st = Store(tmp_path / "b.db")
    bad = json.loads(json.dumps(doc))
    bad["runs"][2]["run"]["tags"] = ["last"]  # a tag the store refuses, on the third run
    with pytest.raises(UsageError, match="is not a valid tag"):
        import_bundle(st, bad)
    assert st.list_runs() == []
    import clusterbench.store.imports as imports
    real = imports.json.dumps
    calls = {"n": 0}

    def failing(*a, **k):  # the disk fills up while the second run's figures are written
        calls["n"] += 1
        if calls["n"] > 20:
            raise OSError(28, "No space left on device")
        return real(*a, **k)
    monkeypatch.setattr(imports.json, "dumps", failing)
    with pytest.raises(OSError):
        import_bundle(st, doc)
    monkeypatch.setattr(imports.json, "dumps", real)
    assert st.list_runs() == [] and st.figures("stream") == []
    import_bundle(st, doc)
    assert len(st.list_runs()) == 3


def test_the_energy_level_is_checked_from_the_meters() -> None:
    from clusterbench.benchmarks.declare import Result

    fig = Result("hpl", "rmax", 1.0, "Gflop/s", True, {"energy": {"joules": 1.0, "avg_watts": 5.0}}, [1.0], {})
    one = check_levels(ipmi_energy(["n1", "n2"]), [fig])
    assert one["level"] == 1 and one["levels"][0]["met"] and not one["levels"][1]["met"]
    assert "interconnect" in one["levels"][1]["why"][-1]
    for energy, why in ((ipmi_energy(["n1"], kind="rapl"), "CPU package and DRAM only"),
                        (ipmi_energy(["n1"], rate_hz=0.5), "below 1"),
                        (ipmi_energy(["n1"], kind="csv", rate_hz=None), "sampling rate is not known"),
                        (ipmi_energy(["n1"], kind="watts", declared=True), "declared, not measured"),
                        ({**ipmi_energy(["n1"]), "nodes": ["n1", "n2"]}, "not metered: n2")):
        got = check_levels(energy, [fig])
        assert got["level"] == 0 and any(why in w for w in got["levels"][0]["why"]), got
    missing = replace(fig, params={"energy": {"missing": "the meter stopped before the end"}})
    assert "1 of 1 core phases not covered" in check_levels(ipmi_energy(["n1"]), [missing])["levels"][0]["why"][0]
    assert check_levels(ipmi_energy(["n1"]), [])["level"] == 0
    assert check_levels(None)["levels"][0]["why"] == ["the run had no power meter (--power / --watts)"]


def test_the_bundle_carries_the_power_trace_and_the_level(tmp_path: Path) -> None:
    doc = loads(_bundle(tmp_path, energy=ipmi_energy(["n1"])))
    entry = doc["runs"][0]
    assert entry["power_trace"][0]["avg_watts"] == 100.0 and entry["power_trace"][0]["t0"] == 100.0
    assert entry["energy_level"]["level"] == 1


def test_reproduce_plans_the_recorded_command_without_the_old_store() -> None:
    from clusterbench.records import Run

    run = Run(id="abcdef0123", argv=["clusterbench", "--db", "/old.db", "run", "stream", "--threads", "1",
                                     "--tag", "old", "--note=x", "--json"])
    assert command_of(run) == ["run", "stream", "--threads", "1"]
    step, = plan([(run, [])])
    assert step.args == ["run", "stream", "--threads", "1", "--tag", "reproduce-abcdef01"]
    net = Run(id="abc", argv=["clusterbench", "run", "tcp", "--hosts=a,b", "--size", "1"])
    assert command_of(net, "x,y") == ["run", "tcp", "--size", "1", "--hosts", "x,y"]
    with pytest.raises(UsageError, match="recorded no clusterbench command line"):
        command_of(Run(id="abc", argv=[]))
    with pytest.raises(UsageError, match="run abcdef01's command"):
        plan([(Run(id="abcdef0123", argv=["clusterbench", "run", "nosuch"]), [])])


def test_runs_of_gives_back_the_stored_records(tmp_path: Path) -> None:
    make_store(tmp_path / "a.db")
    runs = exported(tmp_path / "a.db")
    back = runs_of(loads(dumps(build(runs))))
    assert back[0][0] == runs[0][0] and back[0][1] == runs[0][1]


def test_a_number_json_cannot_write_is_refused_on_export(tmp_path: Path) -> None:
    make_store(tmp_path / "a.db")
    (run, results), = exported(tmp_path / "a.db")
    bad = replace(results[0], samples=[float("nan"), 1.0])
    with pytest.raises(UsageError, match="a number JSON cannot write"):
        build([(run, [bad])])
