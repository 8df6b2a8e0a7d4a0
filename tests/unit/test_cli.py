"""The pure tests (they start no process) of what tests/integration/test_cli.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import os

import pytest

from clusterbench.cli import main

from clikit import _one_line_error


def test_help_lists_benchmarks(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in ("stream", "membw", "memlat", "fpu", "peak", "dgemm", "node"):
        assert name in out


def test_every_benchmark_has_a_help_page(capsys):
    """``run NAME --help`` for every benchmark (a parameter's help with a % once broke argparse)."""
    from clusterbench.benchmarks import REGISTRY, all_benchmarks
    from clusterbench.cli import build_parser

    all_benchmarks()  # every benchmark module imported, each registered
    parser = build_parser()  # what main() parses its argv with (built once here: --help exits while parsing)
    for name, cls in sorted(REGISTRY.items()):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(["run", name, "--help"])
        assert exc.value.code == 0, name
        out = capsys.readouterr().out
        for p in cls.params:
            assert "--" + p.name.replace("_", "-") in out, (name, p.name)


@pytest.mark.parametrize("argv, needle", [
    (["run", "nosuch"], "invalid choice"),
    (["run", "fpu", "--bogus"], "unrecognized arguments"),
    (["run", "stream", "--threads", "zero"], "invalid int value"),
    (["results", "export", "x", "--format", "xml"], "invalid choice"),
])
def test_bad_arguments_one_line(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert needle in _one_line_error(capsys)


def test_corrupted_store(capsys, tmp_path, monkeypatch):
    bad = tmp_path / "bad.db"
    bad.write_bytes(os.urandom(4096))
    monkeypatch.setenv("CLUSTERBENCH_DB", str(bad))
    rc = main(["run", "fpu", "--quick"])
    assert rc == 5
    assert "corrupted" in _one_line_error(capsys)
    rc = main(["results", "list"])
    assert rc == 5


def test_sysfs_root_not_a_dir(capsys, tmp_path):
    rc = main(["probe", "--sysfs-root", str(tmp_path / "nope")])
    assert rc == 2
    assert "not a directory" in _one_line_error(capsys)


def test_unwritable_store_measures_nothing(capsys, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("CLUSTERBENCH_DB", str(blocker / "results.db"))  # parent is a regular file
    rc = main(["run", "fpu", "--quick"])
    assert rc == 5
    assert "results store" in _one_line_error(capsys)


def test_bad_timeout(capsys):
    assert main(["run", "fpu", "--timeout", "0"]) == 2
    assert "--timeout 0" in _one_line_error(capsys)


def test_sim_cluster_needs_root(capsys, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["sim-cluster", "up", "--nodes", "2"]) == 3
    assert "needs root" in _one_line_error(capsys)


def test_cluster_check_needs_two_hosts(capsys):
    assert main(["cluster", "check", "--hosts", "only-one"]) == 2
    assert "at least two hosts" in _one_line_error(capsys)


def test_the_parser_is_built_once_and_again_when_a_benchmark_registers(monkeypatch):
    """main() parses with one parser per process (building it declares every benchmark's options), and a
    benchmark registered later (a plug-in) is on the next command line."""
    from clusterbench import cli
    from clusterbench.benchmarks import REGISTRY, Param, all_benchmarks
    from clusterbench.benchmarks.base import Benchmark

    all_benchmarks()  # every benchmark module imported, each registered
    first = cli.parser()
    assert cli.parser() is first

    class Late(Benchmark):
        name = "late-plugin"
        help = "registered after the first parse"
        params = (Param("widgets", int, 3, "how many widgets", min=1, max=9),)
        metrics = ()

    monkeypatch.setitem(REGISTRY, Late.name, Late)
    again = cli.parser()
    assert again is not first
    assert again.parse_args(["run", "late-plugin", "--widgets", "4"]).widgets == 4
    monkeypatch.delitem(REGISTRY, Late.name)
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["run", "late-plugin"])
