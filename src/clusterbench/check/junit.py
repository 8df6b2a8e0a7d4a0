"""The check as JUnit XML: one ``<testcase>`` per figure. A figure that fails carries a
``<failure>`` whose message names the figure, the ratio, its interval and p; one that cannot be
judged carries an ``<error type="cannot-judge">`` (CI shows it as neither passed nor failed).

Escaping is the standard library's (:mod:`xml.etree.ElementTree`); characters XML 1.0 cannot hold
at all (control characters from a hostile host name or note) are written as ``\\xNN`` text first."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from clusterbench.check.verdict import CANNOT_JUDGE, FAIL, Figure, counts, stats_text

#: what XML 1.0 cannot hold (tab, newline and carriage return it can)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(value: Any) -> str:
    """``value`` as text XML 1.0 can hold: a character it cannot is written as its escape."""
    text = "" if value is None else str(value)
    return _NOT_XML.sub(lambda m: repr(m.group())[1:-1], text)


def render(figures: Sequence[Figure], info: Mapping[str, Any]) -> str:
    """The document. ``info``: ``suite`` (name), ``version``, ``baseline``, ``tag``, ``timestamp``,
    ``hostname``, ``seconds``, ``min_effect_pct``, ``alpha``."""
    n = counts(figures)
    suite = xml_text(info.get("suite"))
    attrs = {"name": f"clusterbench check {suite}", "tests": str(len(figures)), "failures": str(n[FAIL]),
             "errors": str(n[CANNOT_JUDGE]), "skipped": "0", "time": f"{float(info.get('seconds') or 0):.3f}"}
    root = ET.Element("testsuites", attrs)
    ts = ET.SubElement(root, "testsuite", {**attrs, "name": suite, "timestamp": xml_text(info.get("timestamp")),
                                           "hostname": xml_text(info.get("hostname"))})
    props = ET.SubElement(ts, "properties")
    for key in ("version", "baseline", "tag", "min_effect_pct", "alpha", "outcome"):
        if info.get(key) is not None:
            ET.SubElement(props, "property", {"name": key, "value": xml_text(info.get(key))})
    for f in figures:
        case = ET.SubElement(ts, "testcase", {"classname": xml_text(f"clusterbench.{info.get('suite')}.{f.benchmark}"),
                                              "name": xml_text(f.label), "time": "0"})
        detail = xml_text(f"{f.label}: {stats_text(f)}; {f.reason}" if f.ratio is not None else f"{f.label}: {f.reason}")
        if f.outcome == FAIL:
            el = ET.SubElement(case, "failure", {"type": "regression", "message": detail})
            el.text = detail + (f"\nbaseline median {f.median_a} {f.unit or ''}, now {f.median_b} {f.unit or ''}; "
                                f"{f.runs_a} vs {f.runs_b} run(s), {f.n_a} vs {f.n_b} sample(s)")
        elif f.outcome == CANNOT_JUDGE:
            el = ET.SubElement(case, "error", {"type": "cannot-judge", "message": f"cannot judge: {detail}"})
            el.text = xml_text(f"cannot judge: {detail}")
        else:
            ET.SubElement(case, "system-out").text = detail
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
