"""The text ``tune coll`` prints: per size the default against the best algorithm (search and
verification), the size ranges kept, where the default is already best, and the file written."""
from __future__ import annotations

import io

from clusterbench.text import seconds
from clusterbench.tuning.coll.tuner import CollTuneReport


def _f(v: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


TABLE_HEADER = ["size B", "default us", "best", "best us", "gain %", "search", "verified gain %", "verify", "kept"]


def _sizes(sizes: list[int]) -> str:
    return ", ".join(str(s) for s in sizes)


def table_rows(report: CollTuneReport) -> list[list[str]]:
    rows = []
    for row in report.per_size:
        s, v = row["search"] or {}, row["verify"] or {}
        rows.append([str(row["size_bytes"]), _f(s.get("median_default")), str(s.get("best") or "-"),
                     _f(s.get("median_best")), _f(s.get("gain_pct"), "{:+.1f}"), str(s.get("verdict") or "-"),
                     _f(v.get("gain_pct"), "{:+.1f}"), str(v.get("verdict") or "-"), str(row["kept"])])
    return rows


def format_report(report: CollTuneReport) -> str:
    from clusterbench.ui import print_table

    out = io.StringIO()
    cands = ", ".join(c["label"] for c in report.candidates)
    out.write(f"tune coll {report.tune_id}: {report.op} on {report.processes} ranks, {report.mpi['name']} "
              f"{report.mpi['version']}; candidates: default, {cands}\n")
    out.write(f"search: {report.search.get('rounds', 0)} interleaved round(s), stopped: {report.search.get('stopped')}; "
              f"verification: {report.verify.get('rounds', 0)} round(s), stopped: {report.verify.get('stopped')}\n")
    for lab, why in (report.search.get("dropped") or {}).items():
        out.write(f"dropped {lab}: {why}\n")
    out.write("latency medians over rounds (OSU's convention); gain = 1 - best/default; verdicts by compare's rule\n")
    print_table(table_rows(report), TABLE_HEADER, out)
    out.write("\n")
    for r in report.ranges:
        if r["algorithm"] != "default":
            gains = ", ".join(f"{g:+.1f}%" for g in r["verified_gain_pct"])
            out.write(f"{r['from_bytes']}..{r['to_bytes']} B: {r['algorithm']} (verified gain {gains})\n")
    if report.default_best:
        every = " (every size measured)" if len(report.default_best) == len(report.sizes) else ""
        out.write(f"the MPI's default choice is already best at {_sizes(report.default_best)} B{every}: no candidate "
                  "was significantly faster (in the search, or when verified)\n")
    if report.undecided:
        out.write(f"not decided at {_sizes(report.undecided)} B (cannot judge: too few rounds, or too noisy): the default "
                  "is kept; "
                  "a larger --budget gives more rounds\n")
    o = report.output
    if o.get("written"):
        out.write(f"wrote {o['path']} ({o['format']}); use it: {o['use']}\n")
    elif o:
        out.write(f"no file written: {o.get('why')}\n")
    for f in report.failures:
        out.write(f"failed launch ({f['setting']}): {f['error']}\n")
    for note in report.notes:
        out.write(f"note: {note}\n")
    out.write(f"{len(report.runs)} run(s) stored, {seconds(report.elapsed_s)} s of a {seconds(report.budget_s)} s "
              "budget\n")
    return out.getvalue()


__all__ = ["format_report", "table_rows", "TABLE_HEADER"]
