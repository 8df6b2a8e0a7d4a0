"""``results export --format hpccoutf``: a stored run as hpcc's ``hpccoutf.txt`` summary section, so
scripts written for HPC Challenge output read clusterbench's figures unchanged.

Only the ``Begin of Summary section.`` .. ``End of Summary section.`` block is written (the part
such scripts parse), one ``Key=value`` line per HPC Challenge key found in the run's results
(``params.hpcc_key``, value in hpcc's unit from ``params.hpcc_value``). Where a run holds several
figures for one key (e.g. the regular and the non-temporal-store STREAM), the best one is written,
as hpcc reports the best of its repetitions. The HPL problem (``HPL_N``, ``HPL_NB``, ``HPL_nprow``,
``HPL_npcol``) and ``PTRANS_n``/``PTRANS_nb`` come from the figures' parameters; ``Success`` is 1 only
for a complete run. Pure: no store, no process.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clusterbench.export import Exported, Format

if TYPE_CHECKING:
    from clusterbench.benchmarks.declare import Result
    from clusterbench.records import Run


def _grid(params: dict[str, Any]) -> tuple[int, int] | None:
    p, q = params.get("p"), params.get("q")
    if isinstance(p, int) and isinstance(q, int):
        return p, q
    grid = str(params.get("grid") or "")
    if "x" in grid:
        a, _, b = grid.partition("x")
        if a.isdigit() and b.isdigit():
            return int(a), int(b)
    return None


def summary_keys(results: list[Result]) -> dict[str, float | int | str]:
    """hpcc's summary keys from stored results (see the module docstring)."""
    best: dict[str, tuple[float, dict]] = {}
    for r in results:
        params = r.params or {}
        key = params.get("hpcc_key")
        if not key:
            continue
        value = float(params.get("hpcc_value", r.value))
        old = best.get(key)
        better = old is None or (value > old[0] if r.higher_is_better else value < old[0])
        if better:
            best[key] = (value, params)
    out: dict[str, float | int | str] = {}
    if "HPL_Tflops" in best:
        params = best["HPL_Tflops"][1]
        if params.get("n"):
            out["HPL_N"] = int(params["n"])
        if params.get("nb"):
            out["HPL_NB"] = int(params["nb"])
        grid = _grid(params)
        if grid:
            out["HPL_nprow"], out["HPL_npcol"] = grid
    if "PTRANS_GBs" in best:
        params = best["PTRANS_GBs"][1]
        for k in ("n", "nb"):
            if params.get(k):
                out[f"PTRANS_{k}"] = int(params[k])
    for key, (_, params) in sorted(best.items()):  # the size keys a figure's declaration names
        for k, v in _sizes(key, params).items():
            if v is not None:
                out.setdefault(k, v)
    for key in sorted(best):
        out[key] = best[key][0]
    return out


def _sizes(key: str, params: dict) -> dict[str, Any]:
    from clusterbench.benchmarks import all_benchmarks

    for cls in all_benchmarks().values():
        for hk in cls.hpcc_keys:
            if hk.key == key and hk.sizes is not None:
                try:
                    return dict(hk.sizes(params))
                except (KeyError, TypeError, ValueError):
                    return {}
    return {}


def hpccoutf(run: Run, results: list[Result]) -> str:
    """The text of an hpccoutf.txt summary section for ``run`` and its ``results`` (its command line
    shell-quoted, stored text with control characters escaped: it may go to a terminal)."""
    from clusterbench.text import run_command, terminal_text

    keys = summary_keys(results)
    lines = [terminal_text(f"clusterbench {run.clusterbench_version} run {run.id} "
                           f"({run.status}) on {run.host}, started {run.started}"),
             f"command: {terminal_text(run_command(run))}",
             "Begin of Summary section.",
             "VersionMajor=1", "VersionMinor=5", "VersionMicro=0", "VersionRelease=clusterbench",
             f"Success={1 if run.status == 'complete' else 0}"]
    for k, v in keys.items():
        lines.append(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}")
    lines.append("End of Summary section.")
    return "\n".join(lines) + "\n"


def _render(runs: list[Exported], **_: Any) -> str:
    return hpccoutf(*runs[0])


FORMAT = Format("hpccoutf", "hpccoutf (hpcc's summary keys)", _render)
