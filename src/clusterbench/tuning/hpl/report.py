"""The text ``tune hpl`` prints: every trial in a table, the pruning, the best and its prediction."""
from __future__ import annotations

import shlex

from clusterbench.text import seconds
from clusterbench.tuning.hpl.model import TuneReport

# ---------------------------------------------------------------------------------------------
# Text (the CLI prints this; Duffy (2020)'s Tables 5.4/5.5 with the stage and the % of the limits)
# ---------------------------------------------------------------------------------------------
def _f(v: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def table_rows(report: TuneReport) -> list[list[str]]:
    """Every HPL trial: stage, BLAS, topology, grid, pmap, NB, N, Gflop/s, % Rpeak, % measured peak,
    predicted, status."""
    hpl = [t for t in report.trials if t.kind == "hpl" and t.config]
    hpl.sort(key=lambda t: (t.stage, -(t.value or -1.0)))
    rows = []
    for t in hpl:
        c = t.config
        assert c is not None
        star = " *" if t is report.best else ""
        rows.append([str(t.stage), c.blas, c.topology, c.grid, c.pmap, str(c.nb), str(t.n), _f(t.value) + star,
                     _f(t.percent_rpeak, "{:.1f}"), _f(t.percent_measured_peak, "{:.1f}"), _f(t.predicted),
                     t.status if t.status != "failed" else f"failed: {(t.note or '')[:60]}"])
    return rows


TABLE_HEADER = ["stage", "blas", "topology", "grid", "pmap", "NB", "N", "Gflop/s", "%Rpeak", "%peak", "predicted",
                "status"]


def format_report(report: TuneReport) -> str:
    import io

    from clusterbench.ui import print_table

    out = io.StringIO()
    dg = [t for t in report.trials if t.kind == "dgemm"]
    if dg:
        out.write("stage 0: single-core dgemm, C (m x m) += A (m x k) B (k x m), k = NB\n")
        print_table([[t.key.split("/")[2], str(t.key.split("/")[3]), str(t.n), t.note or "", _f(t.value),
                      _f(t.percent_rpeak, "{:.1f}"), t.status] for t in dg],
                    ["blas", "coretype", "m", "k", "Gflop/s", "%Rpeak", "status"], out)
        out.write("\n")
    for pr in report.pruned:
        out.write(f"pruned: {pr['what']}: {pr['why']}\n")
    out.write(f"\nHPL trials (stage 1 at N_s={report.n_small}, stage 2 at N={report.n}; * = best; %peak = of the "
              "measured FMA peak)\n")
    print_table(table_rows(report), TABLE_HEADER, out)
    b = report.best
    out.write("\n")
    if b is None or b.config is None:
        out.write("no HPL trial succeeded\n")
    else:
        c = b.config
        bp = report.best_params() or {}
        opts = " ".join(f"--{k.replace('_', '-')} {shlex.quote(str(v))}" for k, v in bp.items())  # to paste
        val = b.value or 0.0
        out.write(f"best: NB={c.nb} grid {c.grid} ({c.pmap}) {c.topology} {c.blas}"
                  + (f" (OPENBLAS_CORETYPE={report.coretypes[c.blas]})" if report.coretypes.get(c.blas) else "")
                  + f": {val:.2f} Gflop/s at N={b.n}, {_f(b.percent_rpeak, '{:.1f}')}% of Rpeak (nominal clock), "
                  f"{_f(b.percent_measured_peak, '{:.1f}')}% of the measured peak"
                  + ("" if report.confirmed else " - a short run, NOT confirmed at full N") + "\n")
        if b.predicted is not None and b.value is not None:
            out.write(f"predicted {b.predicted:.2f} Gflop/s, measured {b.value:.2f} "
                      f"({b.value / b.predicted:.2f}x); model before calibration {_f(b.predicted_model)}\n")
        out.write(f"run it: clusterbench run hpl {opts}\n")
    conf = [t for t in report.trials if t.stage == 2 and t.value and t.predicted]
    if conf:
        out.write("predicted vs measured at full N: " + "; ".join(
            f"{t.config.label() if t.config else t.key}: {t.predicted:.2f} vs {t.value:.2f}" for t in conf) + "\n")
    for note in report.notes:
        out.write(f"note: {note}\n")
    measured = sum(1 for t in report.trials if t.status == "measured")
    reused = sum(1 for t in report.trials if t.status == "reused")
    out.write(f"tune {report.tune_id}: {measured} trial(s) measured, {reused} taken from the store, "
              f"{seconds(report.elapsed_s)} s of a {seconds(report.budget_s)} s budget; "
              f"space {report.configs} configurations\n")
    return out.getvalue()
