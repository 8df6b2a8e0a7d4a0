"""clusterbench check (issue 28 section 1), the pure parts: suite files and their validation, the
gate's rule, JUnit XML and perflog lines, the baseline's refusals. No process is started."""
from __future__ import annotations

import json
import random
import time
import xml.etree.ElementTree as ET

import pytest

from clusterbench.benchmarks.base import Result
from clusterbench.check import junit, perflog
from clusterbench.check import suite as suites
from clusterbench.check.baseline import cluster_differences, relevant
from clusterbench.check.runner import CannotJudge, Options, Plan, check_options, compare_with_baseline, default_tag, plan
from clusterbench.check.verdict import (CANNOT_JUDGE, EXIT_CANNOT_JUDGE, EXIT_CODES, EXIT_FAIL, FAIL, PASS, Figure,
                                        judge, judge_match, overall)
from clusterbench.cli import main
from clusterbench.errors import UsageError
from clusterbench.records import Run
from clusterbench.session import new_run_record
from clusterbench.store import Store

GOOD = """
name = "tiny"
version = 2
repeat = 3
[[run]]
benchmark = "fpu"
params = { ops = "add", samples = 10, cpu = 0 }
[[run]]
benchmark = "tcp"
params = { streams = [1], seconds = 0.2 }
"""


# --------------------------------------------------------------------------- suites


def test_a_suite_is_parsed_with_its_params_typed():
    s = suites.parse(GOOD, "tiny.toml")
    assert (s.name, s.version, s.repeat) == ("tiny", 2, 3)
    assert s.entries[0].benchmark == "fpu" and s.entries[0].params == {"ops": "add", "samples": 10, "cpu": 0}
    assert s.entries[1].params == {"streams": [1], "seconds": 0.2}
    assert s.entries[0].argv() == ["clusterbench", "run", "fpu", "--ops", "add", "--samples", "10", "--cpu", "0"]
    assert {"fpu", "tcp"} <= s.benchmarks


def test_every_standard_suite_parses():
    names = suites.standard_suites()
    assert {"node", "mpi", "hpl", "health"} <= set(names)
    for name in names:
        s = suites.load(name)
        assert s.standard and s.entries and s.version >= 1


@pytest.mark.parametrize("text, words", [
    ('version = 1\n[[run]]\nbenchmark = "nosuch"\n', ["run 1", "unknown benchmark 'nosuch'", "clusterbench list"]),
    ('version = 1\n[[run]]\nbenchmark = "fpu"\nparams = { sampels = 3 }\n',
     ["run 1 (fpu)", "unknown parameter 'sampels'", "fpu takes:", "samples"]),
    ('version = 1\n[[run]]\nbenchmark = "fpu"\nparams = { samples = 0 }\n', ["run 1 (fpu)", "--samples 0", "1 to 64"]),
    ('version = 1\n[[run]]\nbenchmark = "fpu"\nparams = { samples = "ten" }\n', ["samples = 'ten' is not a whole number"]),
    ('version = 1\n[[run]]\nbenchmark = "tcp"\nparams = { streams = [0] }\n', ["--streams 0 is not allowed"]),
    ('version = 1\n[[run]]\nbenchmark = "fpu"\nhosts = "a,b"\n', ["takes no hosts"]),
    ('version = 1\n[[run]]\nbenchmark = "fpu"\nspeed = 3\n', ["unknown key 'speed'"]),
    ('version = 1\n', ["lists no run"]),
    ('[[run]]\nbenchmark = "fpu"\n', ["version None"]),
    ('version = 1\nrepeat = 1\n[[run]]\nbenchmark = "fpu"\n', ["repeat 1 is not allowed", "2 or more runs"]),
    ('version = 1\nnmae = "x"\n[[run]]\nbenchmark = "fpu"\n', ["unknown key 'nmae'"]),
    ('version = [\n', ["not valid TOML"]),
])
def test_a_bad_suite_is_one_line_naming_the_problem_and_the_fix(text, words):
    with pytest.raises(UsageError) as exc:
        suites.parse(text, "my.toml")
    msg = str(exc.value)
    assert "\n" not in msg and "my.toml" in msg and exc.value.fix
    for w in words:
        assert w in msg, msg


def test_an_unknown_suite_name_lists_the_standard_ones():
    with pytest.raises(UsageError, match="unknown suite 'nightly'.*node"):
        suites.load("nightly")


def test_a_bad_suite_exits_2_and_stores_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('version = 1\n[[run]]\nbenchmark = "fpu"\nparams = { samples = 1000 }\n')
    db = tmp_path / "r.db"
    assert main(["--db", str(db), "check", str(bad), "--baseline", "b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--samples 1000 is not allowed" in err[0]
    assert not db.exists()


def test_hosts_go_to_the_entries_that_take_them():
    s = suites.parse(GOOD, "tiny.toml").with_hosts("n1,n2", None)
    assert "hosts" not in s.entries[0].params and s.entries[1].params["hosts"] == "n1,n2"


# --------------------------------------------------------------------------- the rule


def _match(verdict, change, warnings=(), label="stream triad threads=1"):
    return {"label": label, "benchmark": "stream", "metric": "triad", "params": {"threads": 1}, "unit": "MB/s",
            "higher_is_better": True, "runs_a": ["a1", "a2", "a3"], "runs_b": ["b1", "b2", "b3"],
            "comparison": {"verdict": verdict, "change_pct": change, "ratio": 1 + change / 100,
                           "ci_low": 1 + change / 100 - 0.01, "ci_high": 1 + change / 100 + 0.01, "p_value": 0.001, "p_runs": 0.004, "p_adjusted": 0.008, "median_a": 100.0,
                           "median_b": 100 + change, "n_a": 30, "n_b": 30, "warnings": list(warnings)}}


def test_fail_only_when_significantly_worse_and_by_at_least_the_threshold():
    f = judge_match(_match("worse", -8.0), 3)
    assert f.outcome == FAIL and f.p == 0.008 and "8.0%" in f.reason
    assert judge_match(_match("worse", -2.0), 3).outcome == PASS  # significant, but under the threshold
    assert judge_match(_match("better", 10.0), 3).outcome == PASS


def test_too_noisy_to_exclude_a_loss_of_the_threshold_cannot_judge():
    wide = judge_match(_match("no significant difference", -20.0), 3)  # the interval allows a 21% loss
    assert wide.outcome == CANNOT_JUDGE and "too noisy" in wide.reason and "21.0%" in wide.reason
    assert judge_match(_match("no significant difference", -1.0), 3).outcome == PASS  # at most a 2% loss
    time_ = _match("no significant difference", 0.0)
    time_["higher_is_better"] = False  # a time: the interval's high end is the loss
    time_["comparison"].update(ci_low=0.5, ci_high=1.02)
    assert judge_match(time_, 3).outcome == PASS
    time_["comparison"].update(ci_low=0.99, ci_high=1.05)
    assert judge_match(time_, 3).outcome == CANNOT_JUDGE
    assert judge_match(_match("better", 10.0), 3).outcome == PASS


def test_cannot_judge_is_its_own_outcome_never_a_pass():
    w = [{"code": "too-few-samples", "message": "1 vs 1 samples", "remedy": "x"}]
    f = judge_match(_match("cannot judge", -1.0, w), 3)
    assert f.outcome == CANNOT_JUDGE and "1 vs 1 samples" in f.reason
    doc = {"matches": [_match("no significant difference", 0.1)],
           "only_b": [{"benchmark": "stream", "metric": "copy", "params": {}, "label": "stream copy"}],
           "only_a": [{"benchmark": "hpl", "metric": "rmax", "params": {}, "label": "hpl rmax"},
                      {"benchmark": "stream", "metric": "add", "params": {}, "label": "stream add"}]}
    figs = judge(doc, 3, {"stream"})
    assert [f.outcome for f in figs] == [PASS, CANNOT_JUDGE, CANNOT_JUDGE]  # hpl: another suite's figure
    assert "no baseline figure" in figs[1].reason and "not measured" in figs[2].reason
    assert overall(figs) == CANNOT_JUDGE and EXIT_CODES[CANNOT_JUDGE] == EXIT_CANNOT_JUDGE != 0
    assert overall([*figs, judge_match(_match("worse", -9.0), 3)]) == FAIL
    assert overall([]) == CANNOT_JUDGE
    assert overall(figs[:1]) == PASS and EXIT_CODES[PASS] == 0 and EXIT_CODES[FAIL] == EXIT_FAIL


# --------------------------------------------------------------------------- JUnit and perflog

HOSTILE = 'x<y>&"\'\x01\x1b[31m|\n]]>'


def _figures():
    return [judge_match(_match("worse", -8.0, label=f"stream triad note={HOSTILE}"), 3),
            judge_match(_match("no significant difference", 0.5), 3),
            Figure(label="stream copy", benchmark="stream", metric="copy", params={}, unit=None, higher_is_better=None,
                   outcome=CANNOT_JUDGE, reason="no baseline figure")]


def test_junit_is_valid_xml_one_case_per_figure_with_the_failure_named():
    text = junit.render(_figures(), {"suite": f"s{HOSTILE}", "version": 1, "baseline": "b", "tag": "t",
                                     "timestamp": "2026-11-27T00:00:00+00:00", "hostname": HOSTILE, "seconds": 1.5})
    root = ET.fromstring(text.encode())  # parses: every hostile character escaped
    ts = root.find("testsuite")
    assert ts.get("tests") == "3" and ts.get("failures") == "1" and ts.get("errors") == "1"
    cases = ts.findall("testcase")
    assert len(cases) == 3
    fail = cases[0].find("failure")
    msg = fail.get("message")
    assert "stream triad" in msg and "ratio 0.92 [0.91, 0.93]" in msg and "p=0.008" in msg
    assert "<y>&" in cases[0].get("name") and "\\x01" in cases[0].get("name")
    assert cases[2].find("error").get("type") == "cannot-judge"
    assert cases[1].find("failure") is None and cases[1].find("error") is None


def test_junit_is_written_atomically_and_replaced(tmp_path):
    from clusterbench.export.writing import write

    dest = tmp_path / "j.xml"
    for _ in range(2):
        write(junit.render(_figures(), {"suite": "s"}), str(dest), force=True)
    ET.parse(dest)
    assert [p.name for p in tmp_path.iterdir()] == ["j.xml"]


def test_perflog_lines_keep_their_fields_whatever_the_label():
    info = {"suite": "node", "version": "0.2", "timestamp": "2026-11-27T00:00:00+00:00", "hosts": "n1|n2",
            "min_effect_pct": 3, "jobids": {}}
    lines = perflog.lines(_figures(), info)
    assert len(lines) == 3
    for line in lines:
        assert "\n" not in line and line.count("|") == 7, line
    f = lines[0].split("|")
    assert f[1] == "clusterbench 0.2" and f[2].startswith("node:stream triad") and f[2].endswith("using clusterbench")
    assert f[4] == "triad=92" and f[5] == "ref=100 (l=-0.03, u=None)" and f[6] == "MB/s" and f[7] == "result=fail"
    assert lines[2].endswith("|result=cannot judge")


def test_perflog_appends(tmp_path):
    p = tmp_path / "perf.log"
    perflog.append(str(p), ["a|b"])
    perflog.append(str(p), ["c|d"])
    assert p.read_text() == "a|b\nc|d\n"


# --------------------------------------------------------------------------- baseline and options


def _fig(metric, samples, **params):
    return Result(benchmark="stream", metric=metric, value=max(samples), unit="MB/s", higher_is_better=True,
                  params={"variant": "regular", "threads": 1, "order": "compact", "cpu_node": None, "mem_node": None,
                          **params}, samples=samples, summary={})


def _stored(st, centre, tags=(), probe=None, seed=0):
    rng = random.Random(seed)
    rec = new_run_record(["clusterbench", "run", "stream"], probe or {"hostname": "h"}, "default")
    rec["tags"] = list(tags)
    rid = st.begin_run(rec)
    st.add_result(rid, _fig("triad", [centre * (1 + rng.gauss(0, 0.003)) for _ in range(10)]))
    st.finish_run(rid, "complete")
    time.sleep(0.002)
    return rid


def _plan(st, suite, base_ids, opts):
    runs = st.get_runs(base_ids)
    return Plan(suite, opts, 3, "t", {}, runs, st.results_of(base_ids, full=False))


@pytest.mark.parametrize("slower, outcome", [(1.0, PASS), (0.9, FAIL), (0.99, PASS)])
def test_a_stored_baseline_is_judged_through_compare(tmp_path, slower, outcome):
    st = Store(str(tmp_path / "r.db"))
    base = [_stored(st, 1000, ["base"], seed=i) for i in range(3)]
    new = [_stored(st, 1000 * slower, seed=10 + i) for i in range(3)]
    s = suites.parse('version = 1\n[[run]]\nbenchmark = "stream"\n', "s.toml")
    opts = Options("base", min_effect_pct=3, alpha=0.01)
    doc = compare_with_baseline(st, _plan(st, s, base, opts), new)
    figs = judge(doc, 3, s.benchmarks)
    assert [f.outcome for f in figs] == [outcome]
    json.dumps([f.as_dict() for f in figs])


def test_no_baseline_cannot_judge_before_anything_runs(tmp_path):
    st = Store(str(tmp_path / "r.db"))
    s = suites.parse(GOOD, "tiny.toml")
    with pytest.raises(CannotJudge) as exc:
        plan(st, s, Options("nightly"), probe={})
    assert exc.value.exit_code == EXIT_CANNOT_JUDGE and "--update-baseline" in str(exc.value)
    _stored(st, 1000, ["nightly"])  # a baseline of other figures only (stream)
    with pytest.raises(CannotJudge, match="holds no figure of suite tiny.*it holds stream"):
        plan(st, s, Options("nightly"), probe={})
    assert st.list_runs() and len(st.list_runs()) == 1  # nothing was run or stored


def test_a_baseline_of_another_cluster_is_refused_naming_the_differences():
    def run(host, cpu):
        rec = new_run_record(["clusterbench"], {"cpu": {"model_name": cpu}, "environment": {"kernel": "6.1"}},
                             "default")
        rec["host"] = host
        return Run.from_json(rec)
    same = cluster_differences([run("n1", "EPYC")], [run("n1", "EPYC")])
    assert same == []
    diff = cluster_differences([run("n1", "EPYC")], [run("n9", "Xeon")])
    assert {c.what for c in diff} == {"hosts", "CPU model"}
    assert "EPYC -> Xeon" in " ".join(c.label for c in diff)
    r = run("n1", "EPYC")
    assert relevant([r], {str(r.id): [_fig("triad", [1.0])]}, {"stream"}) == [r]
    assert relevant([r], {str(r.id): [_fig("triad", [1.0])]}, {"hpl"}) == []


@pytest.mark.parametrize("kw, words", [
    ({"min_effect_pct": 100}, "--min-effect 100"), ({"alpha": 0}, "--alpha 0"), ({"alpha": 1.5}, "--alpha 1.5"),
    ({"repeat": 1}, "--repeat 1"), ({"tag": "b"}, "baseline's tag"), ({"baseline": "bad tag"}, "not a valid tag"),
])
def test_bad_options_are_refused(kw, words):
    opts = Options(**{"baseline": "b", **kw})
    with pytest.raises(UsageError, match=words.replace("+", r"\+")):
        check_options(opts)


def test_the_default_tag_is_a_valid_tag():
    from datetime import datetime, timezone

    from clusterbench.store.names import check_tag

    s = suites.parse('name = "my suite/x"\nversion = 1\n[[run]]\nbenchmark = "fpu"\n', "x.toml")
    tag = default_tag(s, datetime(2026, 11, 27, 2, 0, tzinfo=timezone.utc))
    assert tag == "check-my-suite-x-20261127T020000" and check_tag(tag) == tag


def test_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    out = capsys.readouterr().out
    assert "exit codes: 0 pass; 6" in out.replace("\n", " ") and "7 cannot judge" in out.replace("\n", " ")


def test_runs_needed_reaches_a_reachable_p():
    from clusterbench.check.verdict import runs_needed

    assert runs_needed(10, None, 0.01, 3, 10) == 3  # 30 vs 30 samples: plenty
    assert runs_needed(1, None, 0.01, 3, 10) == 5  # HPL: 5 vs 5 gives 2/252 < 0.01
    assert runs_needed(1, 3, 0.01, 3, 10) == 9  # 3 baseline samples: 3 vs 9 gives 2/220
    assert runs_needed(1, 1, 0.01, 3, 10) == 3  # a single baseline sample: no number of runs helps


def _fpu_run(st, centre, tags=(), seed=0):
    rng = random.Random(seed)
    rec = new_run_record(["clusterbench", "run", "fpu"], {}, "default")
    rec["tags"] = list(tags)
    rid = st.begin_run(rec)
    samples = [centre * (1 + rng.gauss(0, 0.003)) for _ in range(10)]
    st.add_result(rid, Result(benchmark="fpu", metric="throughput", value=min(samples), unit="ns",
                              higher_is_better=False, params={"op": "add", "threads": 1}, samples=samples, summary={}))
    st.finish_run(rid, "complete")
    time.sleep(0.002)
    return rid


@pytest.mark.parametrize("slower, outcome, code", [(1.0, PASS, 0), (1.2, FAIL, EXIT_FAIL)])
def test_run_check_judges_tags_and_moves_the_baseline_only_when_asked(tmp_path, monkeypatch, slower, outcome, code):
    from clusterbench.check import runner
    from clusterbench.check.text import lines

    st = Store(str(tmp_path / "r.db"))
    base = [_fpu_run(st, 0.4, ["base"], seed=i) for i in range(3)]

    def fake_execute(store, p, say):
        return [_fpu_run(store, 0.4 * slower, [p.tag], seed=10 + i) for i in range(3)], {}

    monkeypatch.setattr(runner, "execute", fake_execute)
    s = suites.parse('name = "n"\nversion = 1\n[[run]]\nbenchmark = "fpu"\nparams = { ops = "add" }\n', "n.toml")
    doc = runner.run_check(st, s, Options("base"), probe={})
    assert (doc["outcome"], doc["exit_code"]) == (outcome, code)
    assert doc["baseline_runs"] == base and doc["baseline_update"] is None
    text = "\n".join(lines(doc))
    assert f"(exit {code})" in text.splitlines()[-1]
    if outcome == FAIL:
        assert "FAIL" in text and "fpu throughput op=add threads=1" in text
        assert "ratio 1.1" in text or "ratio 1.2" in text
    json.dumps(doc, default=str)
    moved = runner.run_check(st, s, Options("base", update_baseline=True), probe={})
    assert moved["baseline_update"]["removed_from"] == base
    assert st.select_runs("tag:base") == moved["runs"]
    assert "--update-baseline: tag 'base' removed from 3 run(s)" in "\n".join(lines(moved))


def test_plan_refuses_a_baseline_of_another_cluster_unless_allowed(tmp_path):
    st = Store(str(tmp_path / "r.db"))
    rec = new_run_record(["clusterbench", "run", "fpu"], {"cpu": {"model_name": "EPYC 7763"}}, "default")
    rec["tags"], rec["host"] = ["base"], "elsewhere"
    rid = st.begin_run(rec)
    st.add_result(rid, Result(benchmark="fpu", metric="throughput", value=0.4, unit="ns", higher_is_better=False,
                              params={"op": "add", "threads": 1}, samples=[0.4] * 10, summary={}))
    st.finish_run(rid, "complete")
    s = suites.parse('version = 1\n[[run]]\nbenchmark = "fpu"\n', "n.toml")
    here = {"cpu": {"model_name": "Xeon 8480"}}
    with pytest.raises(UsageError) as exc:
        plan(st, s, Options("base"), probe=here)
    msg = str(exc.value)
    assert "measured on another cluster" in msg and "CPU model: EPYC 7763 -> Xeon 8480" in msg
    assert "hosts: elsewhere ->" in msg and "--allow-different-cluster" in msg
    p = plan(st, s, Options("base", allow_different_cluster=True), probe=here)
    assert {c.what for c in p.differences} == {"hosts", "CPU model"} and len(st.list_runs()) == 1
