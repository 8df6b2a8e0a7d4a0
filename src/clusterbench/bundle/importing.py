"""A checked bundle into a store (``results import``): every run or none, each with a note of when it
was imported. A run id the store already holds is refused, saying whether it is the same run (then
there is nothing to import) or another with that id (``--force`` replaces the stored one)."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from clusterbench.bundle.document import IMPORT_NOTE, canonical, run_entry, runs_of
from clusterbench.errors import UsageError
from clusterbench.store import Store
from clusterbench.store.imports import check_importable, insert_runs


def _stored(store: Store, run_id: str) -> Any:
    try:
        return store.get_runs([run_id])[0]
    except UsageError:
        return None


def _same(store: Store, stored: Any, entry: dict[str, Any]) -> bool:
    mine, _ = run_entry(stored, store.results(stored.id))
    return canonical(mine) == canonical(entry)


def import_bundle(store: Store, doc: dict[str, Any], force: bool = False, now: str | None = None) -> dict[str, Any]:
    """Put the runs of ``doc`` (checked by :func:`clusterbench.bundle.loads`) into ``store``; returns
    ``{"runs": [ids], "imported_at": time, "replaced": [ids]}``."""
    at = now or datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    runs = runs_of(doc)
    replaced = []
    for (run, _), entry in zip(runs, doc["runs"]):
        check_importable(run)
        stored = _stored(store, run.id)
        if stored is None:
            continue
        if _same(store, stored, entry) and not force:
            more = ", or pass --force to import the bundle's other runs and this copy of it" if len(runs) > 1 else ""
            raise UsageError(f"run {run.id} is already in {store.path}, the same run: nothing imported",
                             f"see 'clusterbench results show {run.id[:8]}'{more}")
        if not force:
            raise UsageError(f"run {run.id} is already in {store.path} with other content",
                             "pass --force to replace the stored run with the bundle's")
        replaced.append(run.id)
    times = [*doc.get("imported", []), at]  # earlier imports of the run are kept
    noted = [(replace(run, notes=[*(run.notes or []), *(IMPORT_NOTE + t for t in times)]), results)
             for run, results in runs]
    ids = insert_runs(store, noted, replace=force)
    return {"runs": ids, "imported_at": at, "replaced": replaced}
