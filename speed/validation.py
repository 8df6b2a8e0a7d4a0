#!/usr/bin/env python3
"""The measured figures of the docs, bound to the raw speed logs so that a figure cannot drift from its log.

docs/validation.md's tables are rendered from the logs; figures quoted in prose and excerpts of logs elsewhere
in docs/ and README.md are checked against them (and put right when the script rewrites).

The claims live in speed/claims.toml. Each table names its log file (speed/results-*.txt) and, optionally, a
regular expression that starts a session (a log may hold several runs of its script); each row is a list of
cells, a cell being either literal text or a figure:

    {expr = "max(ours)/max(ref)", fmt = ".2f", printed = "1.08"}

``expr`` is a small expression over the log: ``grep(PATTERN[, GROUP])`` (every match of a regular expression in
the session's text, multiline, as numbers: the capture group, 1 by default, commas dropped; with no group, one
1.0 per match; PATTERN may name a series, to take another of its groups), the table's named series
(``[table.series]``: name = pattern), ``max min median mean sum len first last``, ``ratios(a, b)`` (a[i] / b[i],
the per-round ratios) and arithmetic. ``fmt`` is a Python format spec; ``unit`` is appended; ``printed`` is the
figure as the docs print it, checked against the log. A cell ``{check = "EXPR >= 0.97", printed = "met"}``
renders met / not met.

    python3 speed/validation.py            # rewrite the tables, put quoted figures as the logs give them
    python3 speed/validation.py --check    # exit 1 when a page or a claim disagrees with the logs

The tables sit in docs/validation.md between ``<!-- validation:ID -->`` and ``<!-- /validation:ID -->``;
everything outside the markers is prose, kept as written.

A figure quoted in prose (README.md, any page of docs/) is a ``[[figure]]``: its page, its log (or a list of
logs, read as one; optionally ``sessions``/``session``/``series`` as a table has them), ``exprs`` (one
expression per figure) and ``quote`` (or a list of them), the words around the figures as the page has them,
each figure a format field:

    [[figure]]
    doc = "docs/sweep.md"
    log = "results-2026-11-26-amd-epyc-2vcpu-sweep-judge.txt"
    exprs = ["first(grep('orchestration: ([\\d.]+) s'))"]
    quote = "orchestration: {0:.1f} s of the sweep"

The quote is found in the page (its whitespace matches any whitespace, line breaks included; a figure matches
any number); each figure found there must be the one the log gives, and a quote the page no longer holds is a
problem too. Rewriting puts the log's figures in place. ``checks`` (comparisons, as a table's ``check``) hold
what the page claims in words ("over 100") and must all be true.

Program output copied into a page is bound whole: a fenced block right after ``<!-- excerpt: speed/LOG -->``
must be lines of LOG, in order (a line ``...`` or ``…`` skips any number of lines, a line ending in
`` ...`` is the start of its log line, lines starting with ``$`` are the command; leading and trailing
whitespace is not compared).
"""
from __future__ import annotations

import argparse
import ast
import functools
import math
import operator
import re
import statistics
import string
import sys
import warnings
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CLAIMS = HERE / "claims.toml"
_NUM = re.compile(r"^[-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?$")


class ClaimError(Exception):
    """A claim that cannot be evaluated or disagrees with its log."""


# -- the expression language -----------------------------------------------------------------------------

def _series(values) -> list[float]:
    if isinstance(values, (int, float)):
        return [float(values)]
    return [float(v) for v in values]


def _nonempty(name, f):
    def g(values):
        v = _series(values)
        if not v:
            raise ClaimError(f"{name}() of an empty series (the pattern matched nothing)")
        return f(v)
    return g


def _ratios(a, b) -> list[float]:
    a, b = _series(a), _series(b)
    if len(a) != len(b):
        raise ClaimError(f"ratios(): {len(a)} values against {len(b)}: the rounds do not pair up")
    return [x / y for x, y in zip(a, b)]


FUNCTIONS = {
    "max": _nonempty("max", max), "min": _nonempty("min", min),
    "median": _nonempty("median", statistics.median), "mean": _nonempty("mean", statistics.fmean),
    "first": _nonempty("first", lambda v: v[0]), "last": _nonempty("last", lambda v: v[-1]),
    "sum": lambda v: math.fsum(_series(v)), "len": lambda v: float(len(_series(v))),
    "ratios": _ratios, "pmin": lambda a, b: [min(x, y) for x, y in zip(_series(a), _series(b), strict=True)],
    "pmax": lambda a, b: [max(x, y) for x, y in zip(_series(a), _series(b), strict=True)],
}
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_CMPOPS = {ast.GtE: operator.ge, ast.LtE: operator.le, ast.Gt: operator.gt, ast.Lt: operator.lt, ast.Eq: operator.eq}


def grep(text: str, pattern: str, group: int | None = 1) -> list[float]:
    """Every match of ``pattern`` in ``text`` as a number (its ``group``; no group: 1.0 per match)."""
    return list(_grep(text, pattern, group))


@functools.lru_cache(maxsize=None)
def _grep(text: str, pattern: str, group: int | None) -> tuple[float, ...]:
    # memoised: a table's cells and the unit tests' many checks read the same series of the same logs again
    rx = re.compile(pattern, re.M)
    out = []
    for m in rx.finditer(text):
        if rx.groups == 0:
            out.append(1.0)
            continue
        s = m.group(group).replace(",", "")
        if not _NUM.match(s):
            raise ClaimError(f"pattern {pattern!r} captured {s!r}, not a number")
        out.append(float(s))
    return tuple(out)


def evaluate(expr: str, text: str, series: dict[str, str]):
    """The value of ``expr`` over a session's ``text``; ``series`` maps a name to its pattern."""
    try:
        with warnings.catch_warnings():  # '\d' in a pattern: an invalid escape, kept as written
            warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
            tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise ClaimError(f"cannot parse {expr!r}: {e.msg}") from None

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
            return node.value
        if isinstance(node, ast.List):
            return [float(ev(e)) for e in node.elts]
        if isinstance(node, ast.Name):
            if node.id not in series:
                raise ClaimError(f"unknown series {node.id!r} in {expr!r}")
            return grep(text, series[node.id])
        if isinstance(node, ast.Subscript):
            return _series(ev(node.value))[int(ev(node.slice))]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
            return _CMPOPS[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            if node.func.id == "grep":  # grep(SERIES, GROUP): a named series' pattern, another group of it
                args = [series[a.id] if isinstance(a, ast.Name) and a.id in series and i == 0 else ev(a)
                        for i, a in enumerate(node.args)]
                return grep(text, *args)
            args = [ev(a) for a in node.args]
            if node.func.id in FUNCTIONS:
                return FUNCTIONS[node.func.id](*args)
        raise ClaimError(f"{expr!r}: {ast.unparse(node)} is not allowed")

    try:
        return ev(tree)
    except (ZeroDivisionError, TypeError, IndexError, ValueError, re.error) as e:
        raise ClaimError(f"{expr!r}: {e}") from None


# -- the tables ------------------------------------------------------------------------------------------

def sessions(text: str, start: str | None) -> list[str]:
    """The log split at each line matching ``start`` (the whole log when none)."""
    if not start:
        return [text]
    starts = [m.start() for m in re.finditer(start, text, re.M)]
    if not starts:
        raise ClaimError(f"no session starts with {start!r}")
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


def render_cell(cell, text: str, series: dict[str, str], where: str, problems: list[str]) -> str:
    if isinstance(cell, str):
        return cell
    try:
        if "check" in cell:
            value = evaluate(cell["check"], text, series)
            if not isinstance(value, bool):
                raise ClaimError(f"check {cell['check']!r} is not a comparison")
            shown = "met" if value else "not met"
        elif "exprs" in cell:
            values = []
            for e in cell["exprs"]:
                v = evaluate(e, text, series)
                values.extend(v if isinstance(v, list) else [v])
            shown = cell["template"].format(*values)
        else:
            value = evaluate(cell["expr"], text, series)
            if isinstance(value, list):
                if len(value) != 1:
                    raise ClaimError(f"{cell['expr']!r} gives {len(value)} values, not one figure")
                value = value[0]
            shown = format(value, cell.get("fmt", ".2f"))
    except ClaimError as e:
        problems.append(f"{where}: {e}")
        return "?"
    printed = cell.get("printed")
    if printed is None:
        problems.append(f"{where}: no printed figure declared (the log gives {shown})")
    elif printed != shown:
        problems.append(f"{where}: the claim prints {printed!r}, the log gives {shown!r}"
                        f" ({cell.get('expr') or cell.get('check')})")
    return shown + cell.get("unit", "")


def _substitute(series: dict[str, str], vars_: dict[str, str]) -> dict[str, str]:
    """The table's series with a row's ``vars`` put in (``{name}``; other braces are the regex's own)."""
    out = {}
    for name, pattern in series.items():
        for k, v in vars_.items():
            pattern = pattern.replace("{" + k + "}", re.escape(str(v)))
        out[name] = pattern
    return out


def render_table(table: dict, logdir: Path, problems: list[str]) -> str:
    tid = table["id"]
    cache: dict[str, list[str]] = {}

    def parts_of(log: str) -> list[str]:
        if log not in cache:
            try:
                cache[log] = sessions((logdir / log).read_text(), table.get("sessions"))
            except OSError as e:
                raise ClaimError(f"cannot read its log {log}: {e.strerror}") from None
        return cache[log]

    header = table["header"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    logs = []
    for i, row in enumerate(table.get("row", [])):
        log = row.get("log", table["log"])
        if log not in logs:
            logs.append(log)
        series = _substitute(table.get("series", {}), row.get("vars", {}))
        cells = []
        for j, c in enumerate(row["cells"]):
            where = f"table {tid}, row {i + 1}, column {j + 1}"
            s = c.get("session", row.get("session", 0)) if isinstance(c, dict) else 0
            try:
                parts = parts_of(log)
                if not -len(parts) <= s < len(parts):
                    raise ClaimError(f"session {s}, the log {log} has {len(parts)}")
            except ClaimError as e:
                problems.append(f"{where}: {e}")
                cells.append("?")
                continue
            cells.append(render_cell(c, parts[s], series, where, problems))
        if len(cells) != len(header):
            problems.append(f"table {tid}, row {i + 1}: {len(cells)} cells for {len(header)} columns")
        lines.append("| " + " | ".join(cells) + " |")
    names = ", ".join(f"`speed/{log}`" for log in logs)
    source = f"Generated by `speed/validation.py` from {names} (claims: `speed/claims.toml`, table `{tid}`)."
    return "\n".join([source, "", *lines])


def load_claims(path: Path = CLAIMS) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


def render_doc(doc: str, claims: dict, logdir: Path = HERE) -> tuple[str, list[str]]:
    """``doc`` with every marked table rendered afresh, and the problems found."""
    problems: list[str] = []
    out = doc
    ids = []
    for table in claims.get("table", []):
        tid = table["id"]
        ids.append(tid)
        body = render_table(table, logdir, problems)
        rx = re.compile(rf"(<!-- validation:{re.escape(tid)} -->\n).*?(<!-- /validation:{re.escape(tid)} -->)", re.S)
        if not rx.search(out):
            problems.append(f"table {tid}: docs/validation.md has no <!-- validation:{tid} --> markers")
            continue
        out = rx.sub(lambda m: m.group(1) + body + "\n" + m.group(2), out)
    for tid in re.findall(r"<!-- validation:([\w.-]+) -->", doc):
        if tid not in ids:
            problems.append(f"docs/validation.md marks a table {tid!r} that speed/claims.toml does not declare")
    return out, problems


# -- figures in prose, excerpts of logs ---------------------------------------------------------------------

_FIGURE = r"([-+]?\d[\d,]*(?:\.\d+)?)"


@functools.lru_cache(maxsize=None)
def quote_pattern(quote: str) -> tuple[re.Pattern, list[tuple[str, str]]]:
    """A regex finding ``quote`` with any figures in its fields (whitespace matching any whitespace), and its
    fields (index, format spec) in order."""
    parts, fields = [], []
    for literal, name, spec, _conv in string.Formatter().parse(quote):
        parts.append(r"\s+".join(re.escape(w) for w in re.split(r"\s+", literal)))
        if name is not None:
            parts.append(_FIGURE)
            fields.append((name, spec or ""))
    return re.compile("".join(parts)), fields


def _short(quote: str) -> str:
    quote = " ".join(quote.split())
    return repr(quote if len(quote) <= 70 else quote[:67] + "...")


def render_figure(fig: dict, text: str, logdir: Path, where: str, problems: list[str]) -> str:
    """``text`` (a page) with ``fig``'s figures put as its log gives them; a problem for every figure the page
    prints otherwise, and for a quote the page does not hold."""
    logs = fig["log"] if isinstance(fig["log"], list) else [fig["log"]]
    try:
        parts = sessions("\n".join((logdir / log).read_text() for log in logs), fig.get("sessions"))
    except OSError as e:
        problems.append(f"{where}: cannot read its log {fig['log']}: {e.strerror}")
        return text
    except ClaimError as e:
        problems.append(f"{where}: {e}")
        return text
    s = fig.get("session", 0)
    if not -len(parts) <= s < len(parts):
        problems.append(f"{where}: session {s}, the log {fig['log']} has {len(parts)}")
        return text
    series = fig.get("series", {})
    try:
        values = []
        for e in fig.get("exprs", [fig.get("expr")]):
            v = evaluate(e, parts[s], series)
            if isinstance(v, list):
                if len(v) != 1:
                    raise ClaimError(f"{e!r} gives {len(v)} values, not one figure")
                v = v[0]
            values.append(v)
        for c in fig.get("checks", []):
            if evaluate(c, parts[s], series) is not True:
                problems.append(f"{where}: the log does not bear out {c!r}, which the page's words claim")
    except ClaimError as e:
        problems.append(f"{where}: {e}")
        return text
    quotes = fig["quote"] if isinstance(fig["quote"], list) else [fig["quote"]]
    for quote in quotes:
        rx, fields = quote_pattern(quote)
        try:
            shown = [format(values[int(name) if name else i], spec) for i, (name, spec) in enumerate(fields)]
        except (IndexError, ValueError) as e:
            problems.append(f"{where}: {_short(quote)}: {e}")
            continue
        matches = list(rx.finditer(text))
        if not matches:
            problems.append(f"{where}: {fig['doc']} no longer says {_short(quote)} (fix the page or the claim)")
            continue
        out, pos = [], 0
        for m in matches:
            for i, want in enumerate(shown):
                got = m.group(i + 1)
                if got != want:
                    problems.append(f"{where}: {fig['doc']} prints {got!r} (figure {i + 1} of {_short(quote)}),"
                                    f" the log gives {want!r}")
                out.append(text[pos:m.start(i + 1)])
                out.append(want)
                pos = m.end(i + 1)
        out.append(text[pos:])
        text = "".join(out)
    return text


_EXCERPT = re.compile(r"<!-- excerpt: speed/([\w./-]+) -->\n(`{3,})[^\n]*\n(.*?)\n\2", re.S)


def _excerpt_matches(want: list[str], lines: list[str], at: int | None, skip: bool) -> bool:
    """Whether ``want`` are lines of ``lines`` from ``at`` on (None: anywhere), consecutive but for the skips."""
    if not want:
        return True
    w = want[0]
    if w in ("...", "…"):
        return _excerpt_matches(want[1:], lines, at, True)
    same = (lambda line: line.startswith(w[:-3].rstrip())) if w.endswith(" ...") else (lambda line: line == w)
    if at is None or skip:
        lo = 0 if at is None else at
        return any(_excerpt_matches(want[1:], lines, j + 1, False) for j in range(lo, len(lines)) if same(lines[j]))
    if at < len(lines) and same(lines[at]):
        return _excerpt_matches(want[1:], lines, at + 1, False)
    return not w and _excerpt_matches(want[1:], lines, at, False)  # a blank line the log does not have


def check_excerpts(name: str, text: str, logdir: Path, problems: list[str]) -> int:
    """Every fenced block of ``text`` marked as an excerpt must be lines of its log, in order; the count of
    excerpts."""
    n = 0
    for m in _EXCERPT.finditer(text):
        n += 1
        log, block = m.group(1), m.group(3)
        line_no = text.count("\n", 0, m.start()) + 1
        try:
            lines = [ln.strip() for ln in (logdir / log).read_text().splitlines()]
        except OSError as e:
            problems.append(f"{name}:{line_no}: cannot read the excerpt's log {log}: {e.strerror}")
            continue
        want, command, continued = [], False, False
        for ln in block.splitlines():  # the command ($ ..., its continuation lines) is not output
            command = ln.startswith("$") or (command and continued)
            continued = ln.rstrip().endswith("\\")
            if not command:
                want.append(ln.strip())
        while want and not want[0]:
            want.pop(0)
        if not _excerpt_matches(want, lines, None, False):
            bad = next((w for w in want if w not in ("...", "…") and w not in lines), None)
            detail = f"a line the log does not have: {bad!r}" if bad else "lines the log does not have in that order"
            problems.append(f"{name}:{line_no}: the excerpt of {log} has {detail}")
    return n


def render_pages(pages: dict[str, str], claims: dict, logdir: Path = HERE) -> tuple[dict[str, str], list[str]]:
    """``pages`` (path relative to the repository: text) with every ``[[figure]]`` put as its log gives it, and
    the problems found (excerpts included)."""
    problems: list[str] = []
    out = dict(pages)
    for i, fig in enumerate(claims.get("figure", [])):
        where = f"figure {i + 1} ({fig.get('doc')})"
        if fig.get("doc") not in out:
            problems.append(f"{where}: no such page")
            continue
        out[fig["doc"]] = render_figure(fig, out[fig["doc"]], logdir, where, problems)
    for name, text in out.items():
        check_excerpts(name, text, logdir, problems)
    return out, problems


def pages_of(root: Path = ROOT) -> dict[str, Path]:
    """README.md and every page of docs/, by path relative to ``root``."""
    paths = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    return {p.relative_to(root).as_posix(): p for p in paths if p.exists()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if the docs or a claim disagree with the logs")
    ap.add_argument("--claims", type=Path, default=CLAIMS)
    ap.add_argument("--root", type=Path, default=ROOT, help="the tree whose README.md and docs/ the figures are in")
    ap.add_argument("--doc", type=Path, help="docs/validation.md (default: under --root)")
    args = ap.parse_args(argv)
    claims = load_claims(args.claims)
    paths = pages_of(args.root)
    paths["docs/validation.md"] = args.doc or args.root / "docs" / "validation.md"
    pages = {name: p.read_text() for name, p in paths.items()}
    new = dict(pages)
    new["docs/validation.md"], problems = render_doc(pages["docs/validation.md"], claims)
    new, more = render_pages(new, claims)
    problems += more
    for p in problems:
        print(f"validation: {p}", file=sys.stderr)
    changed = [name for name in pages if new[name] != pages[name]]
    if args.check:
        for name in changed:
            print(f"validation: {paths[name]} differs from what the logs give (run speed/validation.py)", file=sys.stderr)
        return 1 if problems or changed else 0
    for name in changed:
        paths[name].write_text(new[name])
        print(f"validation: {paths[name]} rewritten")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
