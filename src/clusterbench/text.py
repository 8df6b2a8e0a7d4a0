"""Text shown to a person: stored user text made safe for a terminal, a run's command line as a
shell reads it, and numbers of seconds with the precision they need.

Whatever a printer shows that came from a user, the store, another host or a kernel (a ``--note``,
a tag, a stored command line or host name, an error or a benchmark's message) goes through
:func:`terminal_text`: control characters (ESC of an escape sequence or an OSC 52 clipboard write,
CR, backspace, BEL, DEL, C1 controls such as CSI U+009B, Unicode format characters such as
right-to-left overrides, and newlines and tabs) are shown escaped as Python writes them (``\\x1b``,
``\\r``, ``\\n``, ``\\u202e``), so a record is one line and nothing reaches the terminal as a
command. JSON output keeps the exact stored text (JSON escapes it).
"""
from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterbench.records import Run


def terminal_text(value: Any) -> str:
    """``value`` as text safe to print on a terminal: every character that is not printable (see
    :meth:`str.isprintable`: control and format characters, line and paragraph separators,
    newlines included) escaped as ``\\xNN``, ``\\r``, ``\\n``, ``\\uNNNN``; ``None`` is ``''``."""
    text = "" if value is None else str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def command_line(argv: Sequence[str]) -> str:
    """A run's argv as one shell-quoted command line (:func:`shlex.join`; the program named
    ``clusterbench``): pasted into a shell it runs the same command, and nothing in it (a
    ``$(...)`` in a note) is run; ``shlex.split`` gives the argv back."""
    words = [str(w) for w in argv]
    if words and words[0].endswith("clusterbench"):
        words[0] = "clusterbench"
    return shlex.join(words)


def run_command(run: Run) -> str:
    """The command line of a stored run, shell-quoted from its argv (also for runs stored before
    the command was stored quoted); its stored ``command`` when it has no argv."""
    argv = run.argv
    if isinstance(argv, list) and argv and all(isinstance(w, str) for w in argv):
        return command_line(argv)
    return str(run.command or "")


def seconds(s: float) -> str:
    """A number of seconds with the precision it needs (without the unit): whole seconds from 10 s
    or for a whole number, else two significant digits, so a sub-second value is never "0":
    ``seconds(0.2) == "0.2"``, ``seconds(1.25) == "1.2"``, ``seconds(34.4) == "34"``."""
    s = float(s)
    if s != s or s in (float("inf"), float("-inf")):
        return str(s)
    if abs(s) >= 10 or s == int(s):
        return f"{s:.0f}"
    return f"{s:.2g}"
