"""sweep node's printed report."""
from __future__ import annotations


from clusterbench.analysis import outliers


# --------------------------------------------------------------------------- printing

def _num(*values: float | None) -> list[str]:
    """Figures of one unit as text with one precision for all (:func:`clusterbench.units.format_values`)."""
    from clusterbench.units import format_values

    return format_values(None, values)


#: above this many nodes the figures are listed one per line instead of as a node table
WIDE_MAX = 8


def format_sweep_node(doc: dict) -> list[str]:
    """The sweep as text: what ran, a table of figures by node (flagged values marked ``!``), the
    flagged nodes with their likely causes, the method, timing and where it was stored."""
    from io import StringIO

    from clusterbench.ui import print_table

    hosts = doc["hosts"]
    t = doc["timing"]
    what = "the quick node profile" if doc["benchmark"] == "node" else doc["benchmark"]
    shown = ", ".join(hosts) if len(hosts) <= 8 else f"{hosts[0]} .. {hosts[-1]}"
    head = f"sweep node: {what} on {len(hosts)} nodes ({shown}), one {doc['launcher']} job"
    if doc.get("virtual_cluster"):
        head += "; virtual cluster: cpus " + ", ".join(f"{h}={','.join(map(str, c or []))}"
                                                        for h, c in doc["node_cpus"].items())
    lines = [head, f"benchmark {t['bench_max_s']:.1f} s (slowest node), job {t['wall_s']:.1f} s, orchestration "
                   f"{t['orchestration_s']:.1f} s ({t['orchestration_per_node_s']:.2f} s per node)", ""]
    ok = [h for h in hosts if h not in doc["failed"]]
    rows = []
    if len(ok) <= WIDE_MAX:
        header = ["figure", "unit", "median", "MAD", *ok]
        for f in doc["metrics"]:
            med, mad, *vals = _num(f["median"], f["mad"], *(f["values"].get(h) for h in ok))
            rows.append([f["label"], f["unit"] or "", med, mad,
                         *[(v + (" !" if h in f["flags"] else "")) if h in f["values"] else "-"
                           for h, v in zip(ok, vals)]])
    else:
        header = ["figure", "unit", "median", "MAD", "worst node", "flagged"]
        for f in doc["metrics"]:
            vals = f["values"]
            worst = (min if f["higher_is_better"] else max)(vals, key=vals.get) if vals else None
            med, mad, worst_v, *flagged = _num(f["median"], f["mad"], vals[worst] if worst else None,
                                               *(fl["value"] for fl in f["flags"].values()))
            rows.append([f["label"], f["unit"] or "", med, mad, f"{worst} {worst_v}" if worst else "-",
                         ", ".join(f"{h} {v}" for h, v in zip(f["flags"], flagged)) or "-"])
    buf = StringIO()
    print_table(rows, header, buf)
    lines += buf.getvalue().rstrip("\n").splitlines()
    lines.append("")
    if doc["outliers"]:
        lines.append(f"outliers ({len(doc['outliers'])}):")
        for o in doc["outliers"]:
            z = "" if o["z"] is None else f", z {o['z']:+.1f}"
            value, median = _num(o["value"], o["median"])
            lines.append(f"  {o['node']}: {o['label']} {value} {o['unit']}, {abs(o['rel']):.0%} "
                         f"{'below' if o['rel'] < 0 else 'above'} the median {median}{z}")
        lines.append("likely causes (doctor's findings on the node alone that bear on those figures):")
        d = doc.get("doctor")
        for node in dict.fromkeys(o["node"] for o in doc["outliers"]):
            cs = doc["causes"].get(node) or []
            if cs:
                for c in cs:
                    lines.append(f"  {node}: {c['title']} ({c['rule']}): {c['summary']}")
            elif d and not d.get("ran"):
                lines.append(f"  {node}: doctor could not read the nodes: {d.get('error')}")
            elif d:
                lines.append(f"  {node}: none of doctor's rules fires on it alone (load from other programs, a "
                             "throttled or shared CPU, hardware?)")
            else:
                lines.append(f"  {node}: doctor was not asked")
    elif len(ok) < outliers.MIN_PEERS:
        lines.append(f"outliers: not judged: {len(ok)} node{'s' if len(ok) != 1 else ''} with figures, the method "
                     f"needs {outliers.MIN_PEERS} or more")
    else:
        lines.append(f"outliers: none among {len(doc['metrics'])} figures")
    lines.append(f"method: {doc['method']}")
    for h, e in doc["failed"].items():
        lines.append(f"failed: {h}: {e}")
    for text in doc.get("notes") or []:
        lines.append(f"note: {text}")
    if doc.get("run_id"):
        lines.append(f"run {doc['run_id']} stored in {doc['store']} (per node: clusterbench results table BENCHMARK "
                     f"--rows node --runs {doc['run_id'][:8]})")
    return lines
