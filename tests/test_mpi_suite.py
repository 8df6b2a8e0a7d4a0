"""`run mpi`: the interconnect set as one run, each part given the options it understands."""
from __future__ import annotations

import shutil

import pytest

from clusterbench import session
from clusterbench.benchmarks import get_benchmark
from clusterbench.errors import UsageError

pytestmark = pytest.mark.skipif(not shutil.which("mpirun"), reason="no mpirun: install openmpi-bin")


def test_unknown_part_is_refused(ctx):
    with pytest.raises(UsageError, match="--skip nosuch"):
        get_benchmark("mpi").resolve(ctx, {"skip": ["nosuch"]})


def test_suite_runs_its_parts(live_probe, tmp_path):
    from clusterbench.store import Store

    st = Store(tmp_path / "r.db")
    rep = session.run(["mpi"], {"mpi": {"allow_root": True, "skip": ["bw", "multipair", "placement", "tcp"]}},
                      profile="quick", store=st, probe_data=live_probe)
    benches = {r.benchmark for r in rep.results}
    assert benches == {"pingpong", "ring"}
    assert rep.run["status"] == "complete"
    assert len(st.results(rep.run["id"])) == len(rep.results)
    ring = [r for r in rep.results if r.metric == "natural_ring_latency"]
    assert ring and ring[0].params.get("ranks", 2) >= 2
