"""The check as ReFrame performance-log lines, for sites that already feed ReFrame's perflogs to a
dashboard. One line per figure, ``|``-separated, in the fields of ReFrame's documented filelog
format (``%(asctime)s|reframe %(version)s|%(check_info)s|jobid=%(check_jobid)s|
%(check_perf_var)s=%(check_perf_value)s|ref=%(check_perf_ref)s (l=%(check_perf_lower_thres)s,
u=%(check_perf_upper_thres)s)|%(check_perf_unit)s``), then ``result=`` (ReFrame 4's
``check_result``: pass, fail or cannot judge)::

    2026-11-27T02:00:03+00:00|clusterbench 0.9.0|node:fpu throughput op=add on n1 using clusterbench|jobid=8c3a1d2e|throughput=0.412|ref=0.409 (l=None, u=0.03)|ns|result=pass

``asctime`` is ISO 8601 (ReFrame's default ``%FT%T%:z``); the program field names clusterbench
and its version; ``check_info`` is ``SUITE:FIGURE on HOSTS using clusterbench``; ``jobid`` the first
run of this check holding the figure; the value is this check's median and ``ref`` the baseline's;
the thresholds are fractions as in ReFrame, the lower one for a higher-is-better figure (the upper
one for a time), ``None`` for the other. A ``|`` or a control character inside a field is replaced
so that every line keeps its fields."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from clusterbench.check.verdict import Figure
from clusterbench.errors import EnvironmentProblem


def field(value: Any) -> str:
    """One field: no ``|`` (the separator) and nothing that is not printable (a newline would split
    the line)."""
    text = "" if value is None else str(value)
    return "".join(c if c.isprintable() and c != "|" else ("/" if c == "|" else repr(c)[1:-1]) for c in text)


def _num(x: Any) -> str:
    return "None" if x is None else f"{x:.6g}"


def lines(figures: Sequence[Figure], info: Mapping[str, Any]) -> list[str]:
    """``info``: ``suite``, ``version`` (clusterbench's), ``timestamp`` (ISO 8601), ``hosts`` (text),
    ``min_effect_pct``, ``jobids`` ({figure label: run id})."""
    frac = float(info.get("min_effect_pct") or 0) / 100.0
    out = []
    for f in figures:
        low, high = (-frac, None) if f.higher_is_better else (None, frac) if f.higher_is_better is False else (None, None)
        job = str((info.get("jobids") or {}).get(f.label) or "")[:8]
        out.append("|".join([
            field(info.get("timestamp")), field(f"clusterbench {info.get('version')}"),
            field(f"{info.get('suite')}:{f.label} on {info.get('hosts')} using clusterbench"), f"jobid={field(job)}",
            f"{field(f.metric)}={_num(f.median_b)}", f"ref={_num(f.median_a)} (l={_num(low)}, u={_num(high)})",
            field(f.unit or ""), f"result={field(f.outcome)}"]))
    return out


def append(path: str, text_lines: Sequence[str]) -> None:
    """Append the lines to ``path`` (created if missing) in one write, as ReFrame appends to its
    perflog: a reader never sees part of a line."""
    data = "".join(f"{line}\n" for line in text_lines).encode()
    if os.path.isdir(path):
        raise EnvironmentProblem(f"--perflog {path} is a directory", "give a file name")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot append to {path} ({exc.strerror or exc})",
                                 "choose a writable path for --perflog") from None
