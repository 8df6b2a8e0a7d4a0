"""What a user may name a run with: tags, notes, and the selector syntax's small parsers."""
from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from clusterbench.errors import UsageError


#: a tag: letters, digits and ._+=@- (no spaces, commas or colons: 'tag:NAME' and 'a,b' are selector syntax)
TAG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@-]{0,63}")
#: 'last', or 'last~N' (the run N before the newest)
_LAST_RE = re.compile(r"last(?:~(\d+))?")


#: the most characters a run's note (``--note``, ``results tag --note``) may hold
NOTE_LIMIT = 1000


def check_note(note: Any) -> str | None:
    """``note`` when it is ``None`` or text of at most :data:`NOTE_LIMIT` characters; else a one-line
    UsageError (the note itself is not echoed). Any character is kept as given: printers show
    control characters escaped (:func:`clusterbench.text.terminal_text`)."""
    if note is None:
        return None
    if not isinstance(note, str):
        raise UsageError(f"a note must be text, not {type(note).__name__}", "give the note as a string")
    if len(note) > NOTE_LIMIT:
        raise UsageError(f"the note is {len(note)} characters, more than the {NOTE_LIMIT} a note may hold",
                         f"shorten it to {NOTE_LIMIT} characters or fewer")
    return note


def check_tag(tag: Any) -> str:
    if not isinstance(tag, str) or not TAG_RE.fullmatch(tag) or _LAST_RE.fullmatch(tag):
        raise UsageError(f"tag {tag!r} is not a valid tag",
                         "use 1-64 letters, digits or ._+=@- starting with a letter or digit (not 'last')")
    return tag


def _tag_hint(tags: dict[str, int]) -> str:
    if not tags:
        return "no run carries a tag yet: add --tag NAME to a run"
    shown = ", ".join(list(tags)[:8]) + (", ..." if len(tags) > 8 else "")
    return f"tags in the store: {shown}"


def _like_literal(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def id_prefix(ref: str) -> tuple[str, tuple]:
    """The condition (and its arguments) on ``runs.id`` of the runs whose id starts with ``ref``:
    literally (wildcards are characters) and ignoring ASCII case, as SQLite's LIKE (and PostgreSQL's ILIKE
    on a "C" column) does. The LIKE decides; the range on ``lower(id)`` (ASCII-only in SQLite and in
    PostgreSQL's "C" collation, as LIKE's case) only lets the database read the index ``runs_id_lower``
    (schema 8) instead of every run."""
    low = ref.translate(_ASCII_LOWER)
    nxt = ord(low[-1]) + 1 if low else 0x110000
    if 0xD800 <= nxt < 0xE000:  # no surrogates in text: the next character after them
        nxt = 0xE000
    like = "id LIKE ? ESCAPE '\\'"
    if not low or nxt > 0x10FFFF:
        return "lower(id) >= ? AND " + like, (low, _like_literal(ref) + "%")
    return "lower(id) >= ? AND lower(id) < ? AND " + like, (low, low[:-1] + chr(nxt), _like_literal(ref) + "%")


def run_filter(*, tag: str | None = None, benchmark: str | None = None, host: str | None = None,
               since: str | None = None, status: str | None = None) -> tuple[str, tuple]:
    """The WHERE clause (``""`` for none) and its arguments that select the runs ``r`` a listing names:
    ``tag`` (carried by the run), ``benchmark`` (has a figure of it, or its command names it), ``host``,
    ``since`` (an ISO date or date-time: started at or after it), ``status``."""
    where: list[str] = []
    args: list[str] = []
    if tag is not None:
        where.append("r.id IN (SELECT run_id FROM run_tags WHERE tag=?)")
        args.append(check_tag(tag))
    if benchmark is not None:
        where.append("(EXISTS (SELECT 1 FROM results x WHERE x.run_id=r.id AND x.benchmark=?)"
                     " OR r.command LIKE ? ESCAPE '\\')")
        args += [benchmark, "% run " + _like_literal(benchmark) + "%"]
    for cond, value in (("r.host=?", host), ("r.started >= ?", None if since is None else _since(since)),
                        ("r.status=?", status)):
        if value is not None:
            where.append(cond)
            args.append(value)
    return (" WHERE " + " AND ".join(where) if where else ""), tuple(args)


def _since(text: str) -> str:
    """An ISO date or date-time as the store's 'started' compares it (UTC, text order)."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--since {text!r} is not a date", "use YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc).replace(tzinfo=None)
    return when.isoformat(timespec="seconds")


#: what an ``applying`` fix whose process is gone reads as (``kill -9`` or a crash while applying)
