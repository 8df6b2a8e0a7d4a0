"""The command line read by a command's own parser (a short command's start builds only that one, issue 28):
which command a command line names, and that its own parser reads it as the whole parser does.
tests/integration/test_cli_start.py checks the modules such a start imports, in a fresh interpreter."""
from __future__ import annotations

import pytest

from clusterbench.cli import build_parser, command_named, parser


@pytest.mark.parametrize("argv, name", [
    (["results", "list"], "results"), (["--db", "x.db", "compare", "a", "b"], "compare"),
    (["--db=x.db", "results", "table"], "results"), (["--help"], None), (["--version", "results"], None),
    (["--d", "x.db", "results"], None), (["nosuch"], None), (["--db"], None), ([], None)])
def test_the_command_is_read_before_the_parser_only_after_db(argv, name):
    assert command_named(argv) == name


@pytest.mark.parametrize("argv", [["results", "list", "--tag", "x", "--limit", "3"],
                                  ["--db", "x.db", "compare", "a", "b", "--min-effect", "2"],
                                  ["results", "table", "stream", "--rows", "threads", "--cols", "tag"]])
def test_a_commands_own_parser_reads_it_as_the_whole_parser_does(argv):
    assert vars(build_parser([command_named(argv)]).parse_args(argv)) == vars(parser().parse_args(argv))
