"""The command line: parse, call the library, print. No measuring logic lives here.

One module per command (its parser and its handler); :data:`COMMANDS` maps each command's name to
it, and a command with sub-commands maps those to their handlers in the same way. The option groups
several commands share are declared once, in :mod:`clusterbench.cli.options`.
"""
from __future__ import annotations

import argparse
import importlib
import os
import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType

from clusterbench import __version__
from clusterbench.cli.options import Parser, db_option, subcommands
from clusterbench.errors import ClusterbenchError, UsageError
from clusterbench.text import terminal_text


class _Commands(Mapping):
    """Command name -> its module, imported when first asked for: a command's start imports its own
    module, not every other command's (``run``'s launchers and kernel builders, ``check``'s suites...)."""

    def __init__(self, modules: dict[str, str]) -> None:
        self._modules = modules

    def __getitem__(self, name: str) -> ModuleType:
        return importlib.import_module(f"{__name__}.{self._modules[name]}")

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


#: command name -> its module (``add_parser(cmds)``, ``handle(args) -> exit code`` and ``INTERRUPTED``:
#: what an interruption leaves behind, None where the command records no run), in --help's order; each
#: module's NAME is its key (tests/unit/test_cli_table.py)
COMMANDS: Mapping[str, ModuleType] = _Commands({
    "probe": "probe", "run": "run", "list": "listing", "tune": "tune", "cluster": "cluster",
    "sim-cluster": "sim_cluster", "compare": "compare", "check": "check", "doctor": "doctor", "sweep": "sweep",
    "report": "report", "results": "results", "reproduce": "reproduce"})


def build_parser(names: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser: of every command, or of only the commands ``names``."""
    ap = Parser(prog="clusterbench", description="Characterise, tune and compare HPC clusters.")
    ap.add_argument("--version", action="version", version=f"clusterbench {__version__}")
    db_option(ap)
    cmds = subcommands(ap, "command")
    for name in COMMANDS if names is None else names:
        COMMANDS[name].add_parser(cmds)
    return ap


def command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names when nothing but ``--db`` comes before it, else None (``--help``,
    ``--version``, an unknown word or an abbreviated option: the whole parser must answer)."""
    i = 0
    while i < len(argv):
        if argv[i] == "--db":
            i += 2
        elif argv[i].startswith("--db="):
            i += 1
        else:
            return argv[i] if argv[i] in COMMANDS else None
    return None


_built: tuple[object, argparse.ArgumentParser] | None = None


def _registries() -> object:
    """What the parser reads from the registries: every benchmark (its class, parameters and aliases)
    and the launchers' choices. A plug-in registered since the last parse changes it."""
    from clusterbench.benchmarks import all_benchmarks
    from clusterbench.cli.options import launcher_choices

    return (tuple((name, id(cls), id(cls.params), tuple(cls.aliases)) for name, cls in all_benchmarks().items()),
            launcher_choices())


def parser() -> argparse.ArgumentParser:
    """The command line's parser, built once per process and again only when a registry it reads has
    changed (building it declares every benchmark's options: ~40 ms, most of a short command's start)."""
    global _built
    key = _registries()
    if _built is None or _built[0] != key:
        _built = (key, build_parser())
    return _built[1]


def check_command_line(argv: Sequence[str], what: str) -> argparse.Namespace:
    """Parse ``clusterbench ARGV`` as the command line would, without running it: a bad option or
    value is a UsageError naming ``what`` (the option that carried the command line)."""
    Parser.nested = what
    try:
        return parser().parse_args(list(argv))
    except SystemExit:  # --help or --version inside the nested command line
        raise UsageError(f"{what}: {shlex.join(argv)} is not a command to run", "drop --help/--version") from None
    finally:
        Parser.nested = None


def main(argv: Sequence[str] | None = None) -> int:
    name = command_named(sys.argv[1:] if argv is None else argv)
    # a command other than run parses with its own parser alone (a few ms; every command's, with every
    # benchmark's options, took ~0.2 s of a short command's start): the same arguments, errors and help
    args = (parser() if name in (None, "run") else build_parser([name])).parse_args(argv)
    from clusterbench import config
    config.set_argv(sys.argv[1:] if argv is None else argv)  # an error can show the command to retype
    from clusterbench.interrupts import interrupt_status, terminate_as_interrupt

    command = COMMANDS[args.command]
    try:
        with terminate_as_interrupt():
            return command.handle(args)
    except ClusterbenchError as exc:
        sys.stderr.write(f"clusterbench: error: {terminal_text(exc)}\n")
        return exc.exit_code
    except KeyboardInterrupt as exc:
        if argv is None:  # the command itself is exiting: a further Ctrl-C changes nothing
            import signal
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        what = getattr(exc, "outcome", None) or command.INTERRUPTED  # a command may say what it left
        sys.stderr.write(f"clusterbench: interrupted ({terminal_text(exc) or 'Ctrl-C'}){'; ' + what if what else ''}\n")
        return interrupt_status(exc)
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: still one line, with a way to get the traceback
        if os.environ.get("CLUSTERBENCH_DEBUG"):
            raise
        sys.stderr.write(f"clusterbench: internal error: {type(exc).__name__}: {terminal_text(exc)}; "
                         "rerun with CLUSTERBENCH_DEBUG=1 for a traceback and report it\n")
        return 1
    finally:
        config.set_argv([])
