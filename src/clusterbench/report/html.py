"""``clusterbench report``: one self-contained HTML page with plots for one or several stored runs.

:func:`write_report` reads the runs from the store (:mod:`clusterbench.report.sources`), groups the trials of a ``tune hpl`` into one
source (a trial given alone brings its whole tune: the tune is the unit a user asks about), picks
the plots the data allows (:func:`clusterbench.report.plots.plan`), draws them as PNG files in
``plots/`` and writes ``index.html`` beside them: a section per plot with its caption, each
source's headline figures (benchmark, metric, value with unit, fraction of its limit) and summary,
the "Energy and cost" section (:mod:`clusterbench.report.energy`: Gflops/W with the power source, the energy
per benchmark, with a cost model the performance per price and the energy cost, and the list placement of
:mod:`clusterbench.report.placement`; without energy it says nothing is measured), and the environment of every source side by side, rows that differ marked. The page has no
JavaScript and no resource from the network (inline CSS, relative image paths): it opens offline
from the file system. The page itself is :mod:`clusterbench.report.page`, its figures
:mod:`clusterbench.report.figures`; this module writes it.

Nothing is left half-written: everything goes into a temporary folder beside the output folder
(``.NAME.tmp-PID-START-*``, named by its writer), which then takes its place; the temporary folders of a
writer that is dead (``kill -9``) are removed by the next report to that folder, a live writer's never.
The report lists what it wrote in ``.clusterbench-report.json`` (the manifest). An existing output
folder is written into only when it is empty or an earlier report (with ``force``): then only the files
its manifest lists are replaced and everything else in it is kept. A folder with other files and no
report is refused, as is a path that cannot be written (one-line :class:`UsageError` naming the path).
"""
from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import re
import shutil
import signal
import tempfile
from contextlib import contextmanager
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from clusterbench.errors import UsageError
from clusterbench.files import read_bytes
from clusterbench.report.figures import format_value, headline_figures
from clusterbench.report.page import GENERATOR, page
from clusterbench.report.plots import PlotSpec, plan, render
from clusterbench.report.sources import collect, environment

# -- writing ------------------------------------------------------------------------------------------
#: the file in a report folder that lists what the report wrote there (the only files --force replaces)
MANIFEST = ".clusterbench-report.json"
#: the names a report writes (a manifest entry that is not one of these is never touched)
_OWN = re.compile(r"index\.html|plots/\d{2,}-[A-Za-z0-9_.-]+\.png")


def _unwritable(path: Path, exc: OSError) -> UsageError:
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return UsageError(f"cannot write the report to {path}: {why}", "free space there, or choose another -o")
    return UsageError(f"cannot write the report to {path} ({why})", "choose a writable directory for -o")


#: what to do about a manifest or index.html in -o that cannot be read (a FIFO, /dev/zero, too large)
_UNREADABLE_FIX = "move it out of that folder, or choose another -o folder"


def _is_report(path: Path) -> bool:
    """An earlier report written before reports had a manifest (its index.html names the generator).
    Read through the bounded reader: a FIFO hung here, so anything but a regular file is refused."""
    page_file = path / "index.html"
    if not page_file.exists():
        return False
    head = read_bytes(page_file, "report page", fix=_UNREADABLE_FIX, head=4096)
    return f'content="{GENERATOR}"' in head.decode("utf-8", errors="replace")


def _own_files(outdir: Path) -> set[str] | None:
    """The files an earlier report wrote in ``outdir`` (relative paths), from its manifest; for a report
    older than manifests, its index.html and numbered plots; None when ``outdir`` holds no report.
    The manifest is read through the bounded reader (a link to /dev/zero ran out of memory, a FIFO
    hung): one that is not a regular file, or larger than its limit, is refused in one line."""
    manifest = outdir / MANIFEST
    if manifest.exists():
        data = read_bytes(manifest, "report manifest", fix=_UNREADABLE_FIX)
        try:
            doc = json.loads(data.decode("utf-8"))
            if isinstance(doc, dict) and doc.get("generator") == GENERATOR and isinstance(doc.get("files"), list):
                return {f for f in doc["files"] if isinstance(f, str) and _OWN.fullmatch(f)}
        except ValueError:  # not JSON, or not text: not a manifest this report wrote
            pass
    if _is_report(outdir):
        plots = outdir / "plots"
        return {"index.html"} | ({f"plots/{p.name}" for p in plots.iterdir() if _OWN.fullmatch(f"plots/{p.name}")}
                                 if plots.is_dir() and not plots.is_symlink() else set())
    return None


def _foreign(outdir: Path, own: set[str]) -> list[str]:
    """What is in ``outdir`` that the report did not write (relative paths, sorted)."""
    out = []
    for entry in sorted(outdir.iterdir()):
        name = entry.name
        if name == MANIFEST or name in own:
            continue
        if name == "plots" and entry.is_dir() and not entry.is_symlink():
            out += [f"plots/{p.name}" for p in sorted(entry.iterdir()) if f"plots/{p.name}" not in own]
            continue
        out.append(name + ("/" if entry.is_dir() else ""))
    return out


def _check_outdir(outdir: Path, force: bool) -> tuple[set[str] | None, list[str]]:
    """Whether the report may be written to ``outdir``: ``(None, [])`` for a new or empty folder,
    ``(its files, foreign entries)`` for an earlier report and ``--force``; else a one-line UsageError
    with a fix that works."""
    if outdir.is_symlink():
        raise UsageError(f"-o {outdir} is a symbolic link", "give the folder itself, or a new folder for -o")
    if outdir.exists() and not outdir.is_dir():
        raise UsageError(f"-o {outdir} is a file, not a folder",
                         f"choose a folder for the report, e.g. -o {outdir.parent / (outdir.stem + '-report')}")
    if not outdir.is_dir() or not any(outdir.iterdir()):
        return None, []
    own = _own_files(outdir)
    if own is None:
        shown = ", ".join(_foreign(outdir, set())[:3])
        raise UsageError(f"-o {outdir} holds files clusterbench did not write ({shown}) and no earlier report",
                         "choose a new or empty folder for -o")
    if not force:
        raise UsageError(f"-o {outdir} holds an earlier report",
                         "add --force to replace it (only the files the report wrote; anything else there is kept), "
                         "or choose another -o folder")
    return own, _foreign(outdir, own)


# the temporary folders a report writes beside its output: .NAME.tmp-PID-START-XXXX (the new report)
# and .NAME.old-PID-START-XXXX (an earlier report moved aside while the new one takes its place);
# PID and START (the writer's start time, /proc/PID/stat field 22) say whether its writer still lives
def _writer_tag() -> str:
    from clusterbench.store.liveness import process_start

    return f"{os.getpid()}-{process_start(os.getpid()) or 0}"


def _writer_alive(pid: int, start: int) -> bool:
    from clusterbench.store.liveness import process_alive

    return process_alive(pid, start)


def remove_stale(outdir: Path) -> list[Path]:
    """Remove the temporary folders of reports to ``outdir`` whose writer is dead (killed with -9, a
    power cut); an earlier report left moved aside is put back first when ``outdir`` is missing. A
    live writer's folders are never touched. Returns what was removed."""
    pattern = re.compile(rf"\.{re.escape(outdir.name)}\.(tmp|old)-(\d+)-(\d+)-[A-Za-z0-9_]+")
    removed = []
    try:
        entries = sorted(outdir.parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if not m or entry.is_symlink() or not entry.is_dir() or _writer_alive(int(m[2]), int(m[3])):
            continue
        if m[1] == "old" and (entry / "report").is_dir() and not outdir.exists():
            try:
                os.rename(entry / "report", outdir)
            except OSError:
                pass
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP for the block (delivered when it ends), so the folder is never
    left half-replaced nor a temporary folder half-removed (main thread only)."""
    sigs = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    except (ValueError, OSError):  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _manifest(files: Iterable[str]) -> dict:
    from clusterbench import __version__

    return {"generator": GENERATOR, "version": __version__, "files": sorted(set(files)),
            "note": "the files clusterbench report wrote here; report --force replaces only these"}


def write_report(store: Any, run_ids: list[Any], outdir: Path, *, comparison: dict | None = None,
                 title: str | None = None, cost: Any = None, force: bool = True) -> Path:
    """Write the report of ``run_ids`` (ids, unique prefixes or 'last', each its own source, or
    :class:`clusterbench.report.compare.Selection` objects, whose runs of one configuration are pooled;
    a ``tune hpl`` trial brings its whole tune) into ``outdir`` (``index.html``, ``plots/*.png`` and the
    manifest ``.clusterbench-report.json`` listing them), with the comparison chart when ``comparison``
    (``compare_sides``' document or ``Comparison.as_dict()``) is given, and the performance per price and
    energy cost when ``cost`` (an :class:`clusterbench.analysis.cost.CostModel`) is.

    ``outdir`` may be new, empty, or an earlier report (``force``, the default here; the command line
    asks for ``--force``): then only the files that report wrote are replaced, and whatever else is in the
    folder is kept. A folder with other files and no report is refused. Returns ``outdir/index.html``."""
    outdir = Path(outdir).expanduser()
    if str(outdir).strip() in ("", "."):
        outdir = Path.cwd() / "report"
    outdir = outdir.absolute()
    remove_stale(outdir)
    _check_outdir(outdir, force)
    sources = collect(store, list(run_ids))
    specs = plan(sources, comparison)
    notes = []
    for item in run_ids:
        left = getattr(item, "left_out", None)
        if left:
            from clusterbench.analysis.compare import left_out_text

            notes.append(f"{item.selector}: left out {left_out_text(left)} (--include-incomplete includes them)")
    if isinstance(comparison, Mapping) and isinstance(comparison.get("sides"), Mapping):
        from clusterbench.report.compare import side_lines

        notes += [f"comparison {line}" for line in side_lines(comparison) if " left out " in line
                  or " pooled " in line]
    parent = outdir.parent
    tmp: Path | None = None
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with _signals_held():  # a Ctrl-C just after the folder is made must find it named here to remove it
            tmp = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.tmp-{_writer_tag()}-", dir=parent))
        (tmp / "plots").mkdir()
        figures: list[tuple[PlotSpec, str | None, str | None]] = []
        for i, spec in enumerate(specs, 1):
            rel = f"plots/{i:02d}-{spec.slug}.png"
            try:
                render(spec, str(tmp / rel))
            except OSError:
                raise  # the disk, not the figure: the whole report fails (below)
            except Exception as exc:  # noqa: BLE001 - one odd figure must not cost the whole report: say so on the page
                figures.append((spec, None, f"{type(exc).__name__}: {exc}"))
                continue
            figures.append((spec, rel, None))
        generated = _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")
        text = page(sources, figures, title or "clusterbench report: " + ", ".join(s.label for s in sources),
                    generated, cost, notes)
        with open(tmp / "index.html", "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        files = ["index.html", *(rel for _, rel, _ in figures if rel)]
        _write_json(tmp / MANIFEST, _manifest(files))
        os.chmod(tmp, 0o755)
        try:
            with _signals_held():
                _put_in_place(tmp, outdir, files, force)
        except KeyboardInterrupt as exc:  # held during the swap, delivered after it: the report is there
            exc.outcome = f"the report was written first: {outdir / 'index.html'}"  # type: ignore[attr-defined]
            raise
    except OSError as exc:
        if tmp is not None:
            with _signals_held():
                shutil.rmtree(tmp, ignore_errors=True)
        raise _unwritable(outdir, exc) from None
    except BaseException:
        if tmp is not None:
            with _signals_held():
                shutil.rmtree(tmp, ignore_errors=True)
        raise
    return outdir / "index.html"


def _put_in_place(tmp: Path, outdir: Path, files: list[str], force: bool) -> None:
    """Move the finished report ``tmp`` to ``outdir``: a new or empty folder is replaced whole (one
    rename); into an earlier report, file by file, and its files that the new report does not write are
    removed, nothing else (the manifest first lists both, so an interruption leaves nothing unaccounted)."""
    own, foreign = _check_outdir(outdir, force)  # again: something may have appeared while the plots were drawn
    if own is None:
        old = None
        if outdir.is_dir():  # empty: moved aside, removed once the new one is in place
            old = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.old-{_writer_tag()}-", dir=outdir.parent))
            os.rename(outdir, old / "report")
        try:
            os.rename(tmp, outdir)
        except OSError:
            if old is not None:
                os.rename(old / "report", outdir)
                shutil.rmtree(old, ignore_errors=True)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return
    clash = [f for f in files if f in foreign or any(f.startswith(x) for x in foreign if x.endswith("/"))]
    plots = outdir / "plots"
    if plots.is_symlink() or (plots.exists() and not plots.is_dir()):
        clash.append("plots")
    if clash:
        raise UsageError(f"-o {outdir} holds {clash[0]}, which clusterbench did not write, where the report "
                         "writes its own", "move it away, or choose another -o folder")
    _write_json(outdir / MANIFEST, _manifest(own | set(files)))
    plots.mkdir(exist_ok=True)
    for rel in sorted(files, key=lambda f: f == "index.html"):  # the page last: it shows only plots in place
        os.replace(tmp / rel, outdir / rel)
    for rel in sorted(own - set(files)):
        target = outdir / rel
        if target.is_file() or target.is_symlink():
            target.unlink()
    _write_json(outdir / MANIFEST, _manifest(files))
    shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["GENERATOR", "MANIFEST", "collect", "environment", "format_value", "headline_figures", "page", "remove_stale",
           "write_report"]
