"""The user's standing choices: ``$XDG_CONFIG_HOME/clusterbench/config.toml`` (or
``~/.config/clusterbench/config.toml``) and the environment, plus the command line being run (so an
error can print the exact command to retype)."""
from __future__ import annotations

import os
import shlex
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterbench.errors import UsageError

if TYPE_CHECKING:
    from clusterbench.analysis.cost import CostModel

ROOT_ENV = "CLUSTERBENCH_ALLOW_RUN_AS_ROOT"

#: the arguments of the command being run (after "clusterbench"); set by cli.main
_argv: list[str] = []


def set_argv(argv: Sequence[str]) -> None:
    _argv[:] = list(argv)


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "clusterbench" / "config.toml"


def load() -> dict[str, Any]:
    """The config file's table ({} when there is none); a malformed file is a one-line UsageError."""
    from clusterbench.files import read_text

    path = config_path()
    if not os.path.lexists(path):
        return {}
    text = read_text(path, "config file", fix=f"fix or remove {path}")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file {path} is not valid TOML ({exc})", f"fix or remove {path}") from None
    unknown = sorted(set(doc) - set(KNOWN_KEYS))
    if unknown:
        raise UsageError(f"config file {path}: unknown key or table {unknown[0]!r}",
                         f"the known ones are {', '.join(KNOWN_KEYS)}; fix or remove it")
    return doc


#: the top-level keys and tables of config.toml (anything else is a typo, refused in one line)
KNOWN_KEYS = ("allow_run_as_root", "cost")


def allow_run_as_root() -> bool:
    """Standing consent to run MPI as root: CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1 or
    ``allow_run_as_root = true`` in the config file (the environment wins when set)."""
    env = os.environ.get(ROOT_ENV)
    if env is not None and env != "":
        return env.lower() in ("1", "yes", "true")
    value = load().get("allow_run_as_root", False)
    if not isinstance(value, bool):
        raise UsageError(f"allow_run_as_root in {config_path()} must be true or false, not {value!r}",
                         f"write allow_run_as_root = true in {config_path()}")
    return value


def cost_model() -> "CostModel":
    """The ``[cost]`` table (``analysis.cost``; an empty model when there is none); a bad value is a
    one-line UsageError naming the key."""
    from clusterbench.analysis.cost import CostModel, check_model

    table = load().get("cost")
    if table is None:
        return CostModel()
    if not isinstance(table, dict):
        raise UsageError(f"cost in {config_path()} must be a table ([cost])", f"fix {config_path()}")
    try:
        return check_model(table)
    except ValueError as exc:
        raise UsageError(f"{exc} in {config_path()}", f"fix {config_path()}") from None


def permanent_root_hint() -> str:
    return (f"to make it permanent, export {ROOT_ENV}=1 or put allow_run_as_root = true in "
            f"{config_path()}")


def retype_with(flag: str) -> str | None:
    """The command being run with ``flag`` added after the subcommand's operands, shell-quoted;
    None when no command line is being run (clusterbench called from Python)."""
    if not _argv:
        return None
    args = list(_argv)
    if flag in args:
        return shlex.join(["clusterbench", *args])
    if "--" in args:  # keep a literal "--" tail where it was
        i = args.index("--")
        args = args[:i] + [flag] + args[i:]
    else:
        args.append(flag)
    return shlex.join(["clusterbench", *args])
