"""The command line's shared pieces: its parser class, value types, and every option group that
more than one command takes, each declared once here."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any, NoReturn

from clusterbench import SCHEMA_VERSION
from clusterbench.benchmarks.declare import Param
from clusterbench.errors import UsageError
from clusterbench.store.names import NOTE_LIMIT, check_note
from clusterbench.text import terminal_text


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors that name the fix."""

    #: while set, a parse error is raised as a UsageError prefixed with this (a command line given as
    #: an option's value, e.g. doctor --verify --benchmark "run ...", checked before anything runs)
    nested: str | None = None

    def error(self, message: str) -> NoReturn:
        if Parser.nested is not None:
            raise UsageError(f"{Parser.nested}: {message}", f"see '{self.prog} --help'")
        sys.stderr.write(f"clusterbench: error: {terminal_text(message)}; see '{self.prog} --help'\n")
        raise SystemExit(2)


def subcommands(parser: argparse.ArgumentParser, dest: str, **kw: Any) -> Any:
    """The required sub-command of ``parser`` (its name in ``args.<dest>``)."""
    return parser.add_subparsers(dest=dest, required=True, parser_class=Parser, **kw)


# -- value types --

def intlist(text: str) -> list[int]:
    out: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                a, b = part.split("-", 1)
                out.extend(range(int(a), int(b) + 1))
            elif part:
                out.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a list like 1,2,4 or 0-3") from None
    return out


def strlist(text: str) -> list[str]:
    return [t for t in text.split(",") if t]


def note(text: str) -> str:
    """--note's value: at most NOTE_LIMIT characters, refused while the command line is read."""
    try:
        return check_note(text) or ""
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not allowed; use 1 or more")
    return value


# -- options from a benchmark's declaration --

def launcher_choices() -> tuple[str, ...]:
    """``--launcher``'s choices, from the launcher registry: 'auto' and every choice a registered
    launcher serves (the one place the command line takes them from)."""
    from clusterbench.launch.mpi import launchers

    own = getattr(launchers, "launcher_choices", None)  # the registry's own list, where it has one
    if own is not None:
        return tuple(own())
    return ("auto", *dict.fromkeys(launcher.serves for launcher in launchers.REGISTRY.values()))


#: parameters whose choices come from a registry rather than from each benchmark's declaration
REGISTRY_CHOICES = {"launcher": launcher_choices}


def add_param(sub: argparse.ArgumentParser, p: Param) -> None:
    """The option of a benchmark's declared parameter."""
    flag = "--" + p.name.replace("_", "-")
    default_note = "" if p.default is None else f" (default: {p.default})"
    p = replace(p, help=p.help.replace("%", "%%"))  # argparse formats help with %: "99% intervals" is text
    if p.type is bool:
        sub.add_argument(flag, dest=p.name, action=argparse.BooleanOptionalAction, default=None, help=p.help + default_note)
        return
    conv: Any = {"intlist": intlist, "strlist": strlist}.get(p.type, p.type)  # type: ignore[arg-type]
    choices = REGISTRY_CHOICES[p.name]() if p.choices and p.name in REGISTRY_CHOICES else p.choices
    if p.type in ("intlist", "strlist"):  # argparse would test the whole list against the choices: Param.check does
        text = f" (from: {', '.join(map(str, choices))})" if choices else ""
        sub.add_argument(flag, dest=p.name, type=conv, default=None, help=p.help + text + default_note)
        return
    sub.add_argument(flag, dest=p.name, type=conv, default=None, choices=choices, help=p.help + default_note)


# -- option groups --

def db_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--db", help="results store (default: $CLUSTERBENCH_DB or ~/.local/share/clusterbench/results.db)")


#: --json's usual help (a command may say more: its schema)
JSON_DOCUMENT = "print one JSON document"


def json_option(sub: argparse.ArgumentParser, help: str | None = None) -> None:  # noqa: A002 (argparse's word)
    sub.add_argument("--json", action="store_true", help=help)


HOSTS_HELP = "nodes, e.g. node1,node2, node1:4,node2:4 (slots) or cbsim-n1,cbsim-n2 (the virtual cluster)"
HOSTFILE_HELP = "Open MPI hostfile naming the nodes (name slots=N)"


def host_options(sub: argparse.ArgumentParser, default: str | None = None, *, required: bool = False,
                 hostfile: bool = True) -> None:
    """--hosts (and --hostfile): the nodes. ``default`` says which nodes without them."""
    sub.add_argument("--hosts", required=required, help=HOSTS_HELP + (f" (default: {default})" if default else ""))
    if hostfile:
        sub.add_argument("--hostfile", help=HOSTFILE_HELP)


def allow_root_option(sub: argparse.ArgumentParser, help: str = "let Open MPI run as root") -> None:  # noqa: A002
    sub.add_argument("--allow-root", action="store_true", help=help)


def mpi_option(sub: argparse.ArgumentParser, what: str = "the job") -> None:
    sub.add_argument("--mpi", default=None, help=f"which MPI launches {what} (openmpi or mpich; default: found)")


def tag_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--tag", dest="tags", action="append", default=[], metavar="TAG",
                     help="name the run (repeatable) to select it later in compare, report and results list")
    sub.add_argument("--note", type=note, help=f"free text stored with the run (what you changed; at most "
                     f"{NOTE_LIMIT} characters)")


def power_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--power", action="append", default=[], metavar="[NODE=]SPEC",
                     help="power source (repeatable, per node): rapl, ipmi, pmic (a Raspberry Pi 5's rails), "
                     "cmd:COMMAND (prints watts or joules), "
                     "csv:FILE (a time,watts log) or watts:W (declared); NODE=SPEC for one node, cluster=SPEC for "
                     "one meter of all; figures with a timed phase get their energy and Gflops/W")
    sub.add_argument("--watts", type=float, default=None, metavar="W",
                     help="declared power of every node in W (not measured; marked declared): watts:W")
    sub.add_argument("--power-interval", type=float, default=None, metavar="S",
                     help="seconds between power samples (default: rapl 0.1, cmd, ipmi and pmic 1)")


#: what an interrupted command left when it ran with --no-store (its INTERRUPTED speaks of a stored run)
NOT_STORED = "nothing was stored (--no-store)"


def common_run_options(sub: argparse.ArgumentParser) -> None:
    """What every `run BENCHMARK` takes besides its own parameters."""
    from clusterbench.session import (  # the session's machinery only for a command that runs
        DEFAULT_TIMEOUT, EMULATED_TIMEOUT_FACTOR)

    prof = sub.add_mutually_exclusive_group()
    prof.add_argument("--quick", dest="profile", action="store_const", const="quick", help="short run (node: under a minute)")
    prof.add_argument("--full", dest="profile", action="store_const", const="full", help="thorough run")
    json_option(sub, f"print one JSON document (schema {SCHEMA_VERSION})")
    sub.add_argument("--oversubscribe", action="store_true", help="allow more threads than PUs")
    sub.add_argument("--timeout", type=float, default=None,
                     help=f"seconds before a kernel is killed (default {DEFAULT_TIMEOUT:.0f}, {EMULATED_TIMEOUT_FACTOR} x that "
                     "under QEMU user mode, or longer when a benchmark such as a large hpl needs it)")
    sub.add_argument("--no-store", action="store_true", help="do not write the results store")
    sub.add_argument("-v", "--verbose", action="store_true",
                     help="a suite (node, mpi, hpcc) prints every figure's row too, not only its summary")
    tag_options(sub)
    power_options(sub)
