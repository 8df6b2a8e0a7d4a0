"""The Python API behind `clusterbench run`: the same run record with or without a store."""
from __future__ import annotations

import pytest

import uuid

from clusterbench import SCHEMA_VERSION, session
from clusterbench.store import Store

pytestmark = [pytest.mark.integration, pytest.mark.parallel]  # every test here starts real processes


def test_no_store_document_has_full_run_record(live_probe):
    rep = session.run(["fpu"], {"fpu": {"ops": "add"}}, profile="quick", use_store=False, probe_data=live_probe)
    doc = rep.document()
    assert doc["schema"] == SCHEMA_VERSION
    run = doc["run"]
    uuid.UUID(run["id"])
    for key in ("started", "ended", "host", "argv", "command", "clusterbench_version", "probe", "builds"):
        assert run[key], key
    assert run["status"] == "complete" and run["builds"]["fpu"]["flags"]
    assert doc["results"] and all(r["benchmark"] == "fpu" for r in doc["results"])


def test_stored_record_matches_returned(tmp_path, live_probe):
    st = Store(tmp_path / "r.db")
    rep = session.run(["fpu"], {"fpu": {"ops": "mul"}}, profile="quick", store=st, probe_data=live_probe)
    stored = st.get_run(rep.run.id)
    for key in ("id", "started", "ended", "status", "host", "command", "profile"):
        assert getattr(stored, key) == getattr(rep.run, key), key
    assert len(st.results(rep.run.id)) == len(rep.results)
