#!/usr/bin/env python3
"""Figures with units in README.md and docs/ that no claim binds to a log, so that none drifts in unseen.

speed/validation.py checks the figures it is told about (docs/validation.md's tables, ``[[figure]]`` quotes,
``<!-- excerpt: speed/LOG -->`` blocks). This audit finds the others: every number with a unit (s, ms, µs,
MB/s, Gflop/s, MiB, W, J, %, ×, ...) outside those, outside inline code (options, commands) and outside the
command lines of fenced blocks, and not introduced as a setting ("≤ 10 s", "within 15 s", "default 3%",
"every 10 s", "at least 1%", "up to 4 MiB": a bound, a default, an interval, a target). What is left must
be listed in speed/unbound-figures.txt, each with its kind:

    setting   a parameter, a size, a bound, a default, a model's constant: chosen, not measured
    spec      what a machine or a tool is (24 GiB, L2 2 MiB, 100 Mbit/s links)
    quoted    from a cited source or a user's report, not measured here
    unbound   a log in speed/ holds it, no claim binds it yet: to bind (the list names the debt)
    unlogged  measured once with no raw log kept, the page saying so: to rerun with a logged script, or to
              take out of the page (the list names the debt)

A line of the list is ``PAGE | KIND | CONTEXT``, the context being the words around the figure as the page
has them (whitespace folded), the figure in ``[brackets]``. The unit tier (tests/unit/test_figure_audit.py)
fails on a figure the list does not name, and on an entry whose figure the page no longer has.

    python3 speed/figure_audit.py            # the unlisted figures, and the stale entries; exit 1 if any
    python3 speed/figure_audit.py --write    # rewrite the list: kept entries keep their kind, new ones
                                             # come in as 'unreviewed' (a kind the test refuses)
"""
from __future__ import annotations

import argparse
import bisect
import functools
import importlib.util
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LIST = HERE / "unbound-figures.txt"
KINDS = ("setting", "spec", "quoted", "unbound", "unlogged")

_UNIT = (r"(?:ns|µs|us|ms|s|min|h|[kMGT]B/s|[KMG]iB/s|[MG]bit/s|[MG]b/s|[GMT]flop/s|[GMT]FLOP/s|"
         r"[kKMGT]B|[KMGT]iB|kJ|Wh|W|J|%|×|x|events/s|ops/s)")
FIGURE = re.compile(r"(?<![\w.\-/])\d[\d,]*(?:\.\d+)?(?:\s?[-–]\s?\d[\d,]*(?:\.\d+)?)?\s?" + _UNIT + r"(?![\w/])")
#: words that introduce a figure as a setting, not a measurement (looked for just before the figure)
_SETTING = re.compile(r"(?:[≤≥<>]|\bup to|\bwithin|\bat (?:least|most)|\bdefault(?:s|:)?|\bevery|\bbound(?:s|ed)?(?: it)?(?: at)?"
                      r"|\bbudget|\btarget|\blimit|\bbeyond|\b(?:more|less|fewer) than)\s*\(?$", re.I)
_CODE = re.compile(r"`[^`\n]*`")
_FENCE = re.compile(r"^(`{3,})[^\n]*\n(.*?)^\1\s*$", re.S | re.M)
_MARKED = re.compile(r"<!-- validation:([\w.-]+) -->.*?<!-- /validation:\1 -->", re.S)


@functools.lru_cache(maxsize=1)
def _validation():
    spec = importlib.util.spec_from_file_location("speed_validation", HERE / "validation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bound_spans(name: str, text: str, claims: dict, validation) -> list[tuple[int, int]]:
    """The parts of a page that speed/validation.py checks: its generated tables, its excerpts, the quotes
    of its ``[[figure]]`` claims (each match, as the check finds them)."""
    spans = [m.span() for m in _MARKED.finditer(text)]
    spans += [m.span() for m in validation._EXCERPT.finditer(text)]
    for fig in claims.get("figure", []):
        if fig.get("doc") == name:
            for quote in fig["quote"] if isinstance(fig["quote"], list) else [fig["quote"]]:
                spans += [m.span() for m in validation.quote_pattern(quote)[0].finditer(text)]
    return spans


def _skipped(text: str) -> list[tuple[int, int]]:
    """Inline code, and the command lines (``$ ...`` and their continuations) of fenced blocks."""
    spans = [m.span() for m in _CODE.finditer(text)]
    for m in _FENCE.finditer(text):
        pos, command, continued = m.start(2), False, False
        for line in m.group(2).splitlines(keepends=True):
            command = line.startswith("$") or (command and continued)
            continued = line.rstrip().endswith("\\")
            if command:
                spans.append((pos, pos + len(line)))
            pos += len(line)
    return spans


def context(text: str, start: int, end: int, words: int = 4) -> str:
    """The figure in ``[brackets]`` with up to ``words`` words either side on its line, whitespace folded."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    raw_before, raw_after = text[line_start:start], text[end:line_end if line_end >= 0 else len(text)]
    before = " ".join(raw_before.split()[-words:])
    after = " ".join(raw_after.split()[:words])
    before += " " if before and raw_before[-1].isspace() else ""
    after = (" " if after and raw_after[0].isspace() else "") + after
    return f"{before}[{' '.join(text[start:end].split())}]{after}"


def _merged(spans: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """The spans merged where they overlap, as sorted starts and their ends (for bisect)."""
    starts: list[int] = []
    ends: list[int] = []
    for a, b in sorted(spans):
        if starts and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return starts, ends


def unbound(pages: dict[str, str], claims: dict, validation) -> list[tuple[str, int, str]]:
    """(page, line, context) of every figure with a unit that no claim binds and no cue calls a setting."""
    out = []
    for name, text in pages.items():
        starts, ends = _merged(bound_spans(name, text, claims, validation) + _skipped(text))
        for m in FIGURE.finditer(text):
            i = bisect.bisect_right(starts, m.start()) - 1
            if i >= 0 and m.end() <= ends[i]:
                continue
            line_start = text.rfind("\n", 0, m.start()) + 1
            if _SETTING.search(text[max(line_start, m.start() - 24):m.start()]):
                continue
            out.append((name, text.count("\n", 0, m.start()) + 1, context(text, m.start(), m.end())))
    return out


def read_list(path: Path = LIST) -> dict[tuple[str, str], str]:
    """(page, context) -> kind, from the list (``#`` comments and blank lines skipped)."""
    entries = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ", 2)]
        if len(parts) != 3:
            raise ValueError(f"{path.name}:{n}: not 'PAGE | KIND | CONTEXT': {line!r}")
        entries[(parts[0], parts[2])] = parts[1]
    return entries


def audit(root: Path = ROOT, claims: dict | None = None, listed: dict | None = None) -> list[str]:
    """The problems: figures the list does not name, entries of an unknown kind, entries no page has."""
    validation = _validation()
    claims = validation.load_claims() if claims is None else claims
    listed = read_list() if listed is None else listed
    pages = {name: p.read_text() for name, p in validation.pages_of(root).items()}
    found = unbound(pages, claims, validation)
    problems = [f"{page}:{line}: {ctx} is bound to no log (bind it in speed/claims.toml, or list it in "
                f"speed/unbound-figures.txt with its kind)" for page, line, ctx in found if (page, ctx) not in listed]
    problems += [f"speed/unbound-figures.txt: {page} | {kind} | {ctx}: kind is not one of {', '.join(KINDS)}"
                 for (page, ctx), kind in listed.items() if kind not in KINDS]
    present = {(page, ctx) for page, _, ctx in found}
    problems += [f"speed/unbound-figures.txt: {page} no longer has {ctx} (drop the entry)"
                 for page, ctx in listed if (page, ctx) not in present]
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the list (new figures come in as 'unreviewed')")
    args = ap.parse_args(argv)
    if args.write:
        validation = _validation()
        listed = read_list() if LIST.exists() else {}
        pages = {name: p.read_text() for name, p in validation.pages_of(ROOT).items()}
        found = unbound(pages, validation.load_claims(), validation)
        head = [ln for ln in LIST.read_text().splitlines() if ln.startswith("#")] if LIST.exists() else []
        body = [f"{page} | {listed.get((page, ctx), 'unreviewed')} | {ctx}" for page, _, ctx in found]
        LIST.write_text("\n".join([*head, *dict.fromkeys(body)]) + "\n")
        print(f"figure_audit: {LIST} written, {len(set(body))} entries")
        return 0
    problems = audit()
    for p in problems:
        print(f"figure_audit: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
