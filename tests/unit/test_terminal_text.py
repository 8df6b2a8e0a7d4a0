"""The pure tests (they start no process) of what tests/integration/test_terminal_text.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import json
import random
import shlex
import sqlite3
import time
from pathlib import Path

import pytest

from clusterbench import files
from clusterbench.benchmarks.base import Result
from clusterbench.cli import main
from clusterbench.records import Run
from clusterbench.errors import UsageError
from clusterbench.session import new_run_record
from clusterbench.store import Store
from clusterbench.store.names import NOTE_LIMIT, check_note
from clusterbench.text import command_line, run_command, seconds, terminal_text

from terminaltextkit import _raw_controls


#: an OSC 52 clipboard write, a carriage return hiding what came before, a backspace, a screen clear,
#: a C1 CSI and a right-to-left override
EVIL = "\x1b]52;c;aGk=\x07\r evil\x08\x1b[2J\x9b31m\u202e"


# -- the one function ---------------------------------------------------------------------------
def test_terminal_text_escapes_every_control_character_and_keeps_the_rest():
    assert terminal_text(EVIL) == "\\x1b]52;c;aGk=\\x07\\r evil\\x08\\x1b[2J\\x9b31m\\u202e"
    assert terminal_text("line 1\nline 2\ttab") == "line 1\\nline 2\\ttab"  # one record, one line
    assert terminal_text("Grüße, 東京 — ok $(x) \\ done") == "Grüße, 東京 — ok $(x) \\ done"
    assert terminal_text(None) == "" and terminal_text(3.5) == "3.5"
    every = "".join(chr(i) for i in range(0x10000) if not 0xD800 <= i < 0xE000)  # the BMP, controls and all
    assert not _raw_controls(terminal_text(every)) and "\n" not in terminal_text(every)
    assert files.printable("a\x1b[2Jb\rc" + "x" * 100, 10) == "a\\x1b[2Jb\\rcxx..."  # the same escaping


# -- every printer of stored text, in-process ---------------------------------------------------
def _fig(metric: str, samples: list[float], **params) -> Result:
    return Result(benchmark="stream", metric=metric, value=max(samples), unit="MB/s", higher_is_better=True,
                  params={"variant": "regular", "threads": 1, "order": "compact", "cpu_node": None,
                          "mem_node": None, **params},
                  samples=samples, summary={}, warnings=[{"code": "unstable", "message": f"kernel said {EVIL}",
                                                          "remedy": "rerun"}])


def _hostile_store(path: Path) -> Store:
    """Two runs of stream whose every stored text (host, note, command line, error, notes, warnings,
    a parameter, the probe's kernel) carries control characters."""
    st = Store(path)
    rng = random.Random(3)
    for i, tag in enumerate(("before", "after")):
        rec = new_run_record(["clusterbench", "run", "stream", "--note", EVIL], {
            "hostname": "h", "environment": {"kernel": f"6.{i}{EVIL}"}}, "default")
        rec.update(tags=[tag], note=EVIL, host=f"node{EVIL}")
        rid = st.begin_run(rec)
        for m in ("triad", "copy"):
            st.add_result(rid, _fig(m, [10000 * (1 + i / 5) * (1 + rng.gauss(0, 0.002)) for _ in range(8)],
                                    variant=f"regular{EVIL}"))
        st.finish_run(rid, "complete", error=f"a kernel error {EVIL}", notes=[f"note {EVIL}"],
                      warnings=[{"code": "x", "message": f"warned {EVIL}", "remedy": f"fix {EVIL}"}])
        time.sleep(0.002)
    st.add_fix({"id": "thp-1", "rule": "thp", "hosts": None, "actions": {f"n{EVIL}": {"do": ["x"], "undo": ["y"]}},
                "finding": []})
    return st


def test_every_printer_of_stored_text_escapes_it_and_json_keeps_it(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    _hostile_store(Path(db)).close()
    for argv in (["results", "show", "last"], ["results", "list"], ["compare", "before", "after", "--all"],
                 ["results", "tag", "last", "extra"],
                 ["results", "table", "stream", "--rows", "variant,host", "--cols", "tag"],
                 ["results", "export", "last", "--format", "hpccoutf"], ["doctor", "--fixes"]):
        assert main(["--db", db, *argv]) == 0, argv
        out = capsys.readouterr().out
        assert not _raw_controls(out), (argv, _raw_controls(out), out)
        if argv[1] in ("show", "list") or argv[0] == "compare":
            assert "\\x1b]52;c;aGk=\\x07\\r evil" in out, (argv, out)  # shown, escaped
    main(["--db", db, "results", "show", "last"])
    out = capsys.readouterr().out
    for needle in (f"host node{terminal_text(EVIL)}", f"note: {terminal_text(EVIL)}",
                   f"error: a kernel error {terminal_text(EVIL)}", f"warning [x]: warned {terminal_text(EVIL)}"):
        assert needle in out, (needle, out)
    main(["--db", db, "results", "show", "last", "--json"])
    run = json.loads(capsys.readouterr().out)["run"]
    assert run["note"] == EVIL and run["host"] == f"node{EVIL}" and run["argv"][-1] == EVIL  # exact
    main(["--db", db, "results", "list", "--json"])
    assert json.loads(capsys.readouterr().out)["runs"][0]["note"] == EVIL


def test_a_note_s_newlines_are_shown_escaped_on_its_one_line(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    _hostile_store(Path(db)).close()
    assert main(["--db", db, "results", "tag", "last", "--note", "first line\nwarning [fake]: second"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("note: first line\\nwarning [fake]: second")
    main(["--db", db, "results", "show", "last"])
    out = capsys.readouterr().out
    assert "note: first line\\nwarning [fake]: second" in out and "\nwarning [fake]" not in out
    main(["--db", db, "results", "list"])
    assert "# first line\\nwarning [fake]: second" in capsys.readouterr().out


# -- the command line, shell-quoted ---------------------------------------------------------------
def test_the_stored_command_line_is_shown_shell_quoted(tmp_path, capsys):
    marker = tmp_path / "pwned"
    argv = ["clusterbench", "--db", str(tmp_path / "r.db"), "run", "stream", "--note", f"$(touch {marker})",
            "--tag", "pre", "--note", "it's; rm -rf ~ `id` \"q\""]
    st = Store(tmp_path / "r.db")
    rid = st.begin_run(new_run_record(argv, {"hostname": "h"}, "default"))
    old = new_run_record(argv, {"hostname": "h"}, "default")  # a run stored before: command space-joined
    old_id = st.begin_run({**old, "command": " ".join(argv)})
    st.close()
    assert Store(tmp_path / "r.db", readonly=True).get_run(rid).command == command_line(argv)  # stored quoted
    for ref in (rid, old_id):
        assert main(["--db", str(tmp_path / "r.db"), "results", "show", ref]) == 0, capsys.readouterr().err
        line = next(ln for ln in capsys.readouterr().out.splitlines() if "  command: " in ln)
        shown = line.split("  command: ", 1)[1]
        assert shlex.split(shown) == argv and "'$(touch " in shown, shown
    assert run_command(Run(id="x", argv=["/x/bin/clusterbench", "run", "a b"])) == "clusterbench run 'a b'"
    assert run_command(Run(id="x", command="clusterbench run x")) == "clusterbench run x"  # no argv: as stored
    from clusterbench.export.hpccoutf import hpccoutf
    assert f"command: {command_line(argv)}\n" in hpccoutf(Store(tmp_path / "r.db", readonly=True).get_run(rid), [])
    assert not marker.exists()


# -- the note's limit -----------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["run", "intcpu", "--quick"], ["tune", "hpl", "--budget", "1m"],
                                  ["sweep", "network", "--hosts", "a,b"], ["sweep", "node", "--hosts", "a,b"],
                                  ["results", "tag", "last"]])
def test_an_over_long_note_is_refused_in_one_line_before_anything_runs(tmp_path, capsys, argv):
    db = tmp_path / "r.db"
    if argv[0] == "results":
        st = Store(db)
        rid = st.begin_run({**new_run_record(["clusterbench", "run", "stream"], {}, "default"), "note": "kept"})
        st.close()
    with pytest.raises(SystemExit) as ei:
        main(["--db", str(db), *argv, "--note", "x" * (NOTE_LIMIT + 1)])
    err = capsys.readouterr().err.strip().splitlines()
    assert ei.value.code == 2 and len(err) == 1, err
    assert f"the note is {NOTE_LIMIT + 1} characters, more than the {NOTE_LIMIT} a note may hold" in err[0]
    assert "x" * 20 not in err[0]  # the note is not echoed
    if argv[0] == "results":
        assert Store(db, readonly=True).get_run(rid).note == "kept"  # nothing changed
    else:
        assert not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_the_note_limit_holds_in_the_library_too(tmp_path):
    assert check_note("x" * NOTE_LIMIT) == "x" * NOTE_LIMIT and check_note(None) is None
    st = Store(tmp_path / "r.db")
    rec = {**new_run_record(["clusterbench", "run", "stream"], {}, "default"), "note": "y" * (NOTE_LIMIT + 1)}
    with pytest.raises(UsageError, match="more than the 1000 a note may hold"):
        st.begin_run(rec)
    assert st.list_runs() == []
    rid = st.begin_run({**rec, "note": "ok"})
    with pytest.raises(UsageError, match="shorten it to 1000 characters or fewer"):
        st.tag_run(rid, note="z" * 5000)
    assert st.get_run(rid).note == "ok"
    from clusterbench import session
    with pytest.raises(UsageError, match="a note may hold"):  # before the probe or any kernel
        session.run(["intcpu"], note="n" * 1001, store=st, probe_data={})


# -- seconds in messages -------------------------------------------------------------------------
def test_seconds_keep_the_precision_they_need():
    assert [seconds(x) for x in (0.2, 0.05, 1.25, 9.96, 10.4, 34.4, 300, 5.0)] == \
        ["0.2", "0.05", "1.2", "10", "10", "34", "300", "5"]


def test_a_sub_second_timeout_is_not_called_0_s(ctx):
    ctx.timeout, ctx.timeout_given = 0.2, True
    with pytest.raises(UsageError) as ei:
        ctx.fit_timeout("the all-pairs sweep", 33.4, how=" (1 x 1 rounds of 1 s)")
    assert "about 33 s (1 x 1 rounds of 1 s), above the 0.2 s timeout" in str(ei.value), str(ei.value)
    ctx.timeout, ctx.timeout_given = 0.3, False
    ctx.fit_timeout("x", 0.4)  # raised to 2 x the estimate: said so with its tenths
    assert ctx.notes[-1].startswith("x should take about 0.4 s: the timeout is 1 s"), ctx.notes
