"""The pure tests (they start no process) of what tests/integration/test_hostile.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterbench import files
from clusterbench.energy import figures as E
from clusterbench.energy.build import build_meter
from clusterbench.energy.source import Sample
from clusterbench.energy.spec import check_specs
from clusterbench.errors import UsageError


# -- the bounded reader ------------------------------------------------------------------------
def test_devices_fifos_directories_and_missing_files_are_refused_without_reading(tmp_path, monkeypatch):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: a plain open() would block for good
    reads: list[int] = []
    real_read = os.read
    monkeypatch.setattr(files.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    for path, needle in ((Path("/dev/zero"), "is a character device, not a regular file"),
                         (fifo, r"is a FIFO \(pipe\), not a regular file"),
                         (tmp_path, "is a directory, not a regular file"),
                         (tmp_path / "nope", "does not exist")):
        with pytest.raises(UsageError, match=needle) as ei:
            files.read_text(path, "hostfile")
        assert reads == [] and "\n" not in str(ei.value) and str(path) in str(ei.value)  # not a byte read


def test_a_file_beyond_its_kind_s_limit_is_refused_in_one_line(tmp_path):
    big = tmp_path / "hosts"
    with open(big, "wb") as fh:  # sparse: 2 MiB of holes, nothing written
        fh.truncate(2 * files.MiB)
    with pytest.raises(UsageError, match=r"larger than the 1 MiB clusterbench reads of a hostfile"):
        files.read_text(big, "hostfile")
    assert len(files.read_bytes(big, "power log")) == 2 * files.MiB  # a power log may be larger


def test_binary_content_is_named_by_offset_and_never_echoed(tmp_path):
    f = tmp_path / "x"
    f.write_bytes(b"node1\n\x1b[2J\xff\xfe")
    with pytest.raises(UsageError) as ei:
        files.read_text(f, "hostfile")
    assert "is not text (byte 10 is not UTF-8)" in str(ei.value) and "\x1b" not in str(ei.value)
    f.write_bytes(b"node1\n\0node2\n")
    with pytest.raises(UsageError, match="byte 6 is a NUL"):
        files.read_text(f, "hostfile")
    assert files.printable("a\x1b[2Jb\rc" + "x" * 100, 10) == "a\\x1b[2Jb\\rcxx..."


def test_hostfile_and_config_go_through_the_reader(tmp_path, monkeypatch):
    from clusterbench import config
    from clusterbench.launch.mpi.hosts import parse_hostfile

    with pytest.raises(UsageError, match="hostfile /dev/zero is a character device"):
        parse_hostfile("/dev/zero")
    (tmp_path / "h").write_text("node1 slots=2\n\x1b]0;pwned\x07 slots=1\n")
    with pytest.raises(UsageError) as ei:
        parse_hostfile(tmp_path / "h")
    assert "\x1b" not in str(ei.value) and "\\x1b]0;pwned" in str(ei.value)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    cfg = tmp_path / "clusterbench" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_bytes(b"\x00\x01\xfftoml")
    with pytest.raises(UsageError, match="config file .* is not text"):
        config.load()
    cfg.write_text("allow_run_as_root = true\n[costs]\nnode = 35\n")
    with pytest.raises(UsageError, match="unknown key or table 'costs'.*the known ones are allow_run_as_root, cost"):
        config.load()
    cfg.write_text("allow_run_as_root = true\n[cost]\nnode = 35\n")
    assert config.load()["cost"] == {"node": 35}


def test_cli_config_binary_is_one_line_not_an_internal_error(tmp_path, monkeypatch, capsys):
    from clusterbench.cli import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "clusterbench").mkdir()
    (tmp_path / "clusterbench" / "config.toml").write_bytes(bytes(range(256)))
    assert main(["compare", "a", "b", "--per-dollar", "1,2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not text" in err and "internal error" not in err


# -- energy: zero, not finite, beyond a node ------------------------------------------------------
def test_power_a_node_cannot_draw_is_missing_with_its_reason(tmp_path):
    t0 = 1_795_000_000.0
    m = build_meter(["cmd:meter"], nodes=["n1"])
    src = m.sources[0]
    src.samples = [Sample(t0 + i, t0 + i - 1000, watts=0.0) for i in range(4)]
    e = m.energy(t0 + 0.5, t0 + 2.5, wait=False)
    assert "joules" not in e and "measured nothing" in e["missing"] and e["missing"].startswith("n1: ")
    log = tmp_path / "n1.csv"
    log.write_text("time,watts\n" + "".join(f"{t0 + i:.1f},{1.5e308 if i in (2, 3) else 30}\n" for i in range(5)))
    e = build_meter([f"csv:{log}"], nodes=["n1"]).energy(t0 + 0.5, t0 + 3.5, wait=False)
    assert "joules" not in e and "not a finite number" in e["missing"]  # the trapezoid overflowed to inf
    log.write_text("time,watts\n" + "".join(f"{t0 + i:.1f},{5e5 if i == 2 else 30}\n" for i in range(5)))
    e = build_meter([f"csv:{log}"], nodes=["n1"]).energy(t0 + 0.5, t0 + 3.5, wait=False)
    assert "a sample of 5e+05 W, above the 20000 W any node can draw" in e["missing"]
    assert E.implausible_power(30.0, 30.0) is None and E.implausible_power(30.0, 30.0, 4) is None
    assert "below the 0.4 W" in E.implausible_power(1.0, 0.3, 4)


def test_a_log_that_covers_the_interval_is_not_said_not_to_cover_it(tmp_path):
    """A CSV log reading 1e308 W was refused as "the log ... does not cover the interval:" though it
    covers it: the reason is the power, which is no physical power."""
    t0 = 1_795_000_000.0
    log = tmp_path / "n1.csv"
    log.write_text("time,watts\n" + "".join(f"{t0 + i:.1f},{1e308 if i in (1, 2, 3) else 30}\n" for i in range(5)))
    e = build_meter([f"csv:{log}"], nodes=["n1"]).energy(t0 + 0.5, t0 + 3.5, wait=False)
    assert "joules" not in e and "does not cover" not in e["missing"], e["missing"]
    assert e["missing"].startswith(f"n1: the log {log}: a power sample of 1e+308 W is not a physical power"), e
    e = build_meter([f"csv:{log}"], nodes=["n1"]).energy(t0 + 3.5, t0 + 9, wait=False)  # this one it does not
    assert "does not cover the interval: the last power sample is" in e["missing"], e["missing"]


def test_declared_power_is_bounded_per_node_and_per_cluster_meter():
    with pytest.raises(UsageError, match="1e-300 W is not a power a running node draws"):
        check_specs([], 1e-300)
    assert build_meter(["cluster=watts:40"], nodes=["a", "b", "c", "d"]).sources[0].watts == 40
    with pytest.raises(UsageError, match="give 0.4 to 80000 W for the 4 node"):
        build_meter(["cluster=watts:0.3"], nodes=["a", "b", "c", "d"])


def test_power_log_problems_refused_at_the_start(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    for spec, needle in ((f"csv:{empty}", "is empty"), ("csv:/dev/zero", "is a character device"),
                         (f"csv:{tmp_path}", "is a directory")):
        with pytest.raises(UsageError, match=needle) as ei:
            build_meter([spec]).check()
        assert "\n" not in str(ei.value)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"time,watts\n1795000000,3\n\x1b[31m\xff,\xfe\n")
    with pytest.raises(UsageError) as ei:
        build_meter([f"csv:{binary}"]).check()
    assert "is not text" in str(ei.value) and "\x1b" not in str(ei.value)
    back = tmp_path / "back.csv"
    back.write_text("time,watts\n1795000002,3\n1795000001,3\n")
    with pytest.raises(UsageError, match="line 3: its time '1795000001' is before the line above's"):
        build_meter([f"csv:{back}"]).check()


# -- pdes with nothing to measure ---------------------------------------------------------------
def test_pdes_end_not_past_the_lookahead_is_refused(ctx, monkeypatch):
    from clusterbench.benchmarks import get_benchmark

    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")
    with pytest.raises(UsageError, match="--end 1e-300 is not past the lookahead 1"):
        get_benchmark("pdes").resolve(ctx, {"end": 1e-300, "sync": "sequential"})


# -- a fix whose process was killed while applying it ---------------------------------------------
def test_a_fix_left_applying_by_a_dead_process_reads_interrupted(tmp_path):
    from clusterbench.store import Store

    st = Store(tmp_path / "r.db")
    st.add_fix({"id": "thp-1", "rule": "thp", "hosts": None, "actions": {"localhost": {"do": ["x"], "undo": ["y"]}},
                "finding": []})
    assert st.get_fix("thp-1")["status"] == "applying"  # this process lives: it is being applied
    st.db.execute("UPDATE fixes SET pid_start = pid_start + 1")  # the recording process is another one now
    st.db.commit()
    f = st.get_fix("thp-1")
    assert f["status"] == "interrupted" and "applying was interrupted" in f["error"] and "pid" not in f


def test_an_interrupted_sweep_with_no_store_does_not_speak_of_a_kept_run(monkeypatch, capsys):
    """(``run --no-store`` is tested with a real SIGTERM in tests/integration/test_hostile.py.)"""
    from clusterbench.cli import main, sweep

    def stopped(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(sweep.ACTIONS, "node", stopped)
    assert main(["sweep", "node", "--hosts", "a,b", "--no-store"]) == 130
    err = capsys.readouterr().err
    assert "interrupted (Ctrl-C); nothing was stored (--no-store)" in err and "kept" not in err, err
    assert main(["sweep", "node", "--hosts", "a,b"]) == 130
    assert "the run is marked incomplete" in capsys.readouterr().err
