"""`run mpi`: the interconnect set as one run, each part given the options it understands."""
from __future__ import annotations

import shutil

import pytest

from clusterbench import session

pytestmark = pytest.mark.skipif(not shutil.which("mpirun"), reason="no mpirun: install openmpi-bin")


@pytest.mark.parallel
@pytest.mark.integration
def test_suite_runs_its_parts(live_probe, tmp_path):
    from clusterbench.store import Store

    st = Store(tmp_path / "r.db")
    rep = session.run(["mpi"], {"mpi": {"allow_root": True, "skip": ["bw", "multipair", "placement", "tcp", "coll"]}},
                      profile="quick", store=st, probe_data=live_probe)
    benches = {r.benchmark for r in rep.results}
    assert benches == {"pingpong", "ring"}
    assert rep.run.status == "complete"
    assert len(st.results(rep.run.id)) == len(rep.results)
    ring = [r for r in rep.results if r.metric == "natural_ring_latency"]
    assert ring and ring[0].params.get("ranks", 2) >= 2


@pytest.mark.integration
@pytest.mark.slow
def test_quick_suite_on_a_two_node_virtual_cluster(mpi, live_probe, sim_cluster, tmp_path):
    """What the README tells a user to run first: `run mpi --quick` across two virtual nodes. Every
    part measures across the nodes (TCP proven), and the stored run holds both nodes' probes.

    In the slow tier: two minutes, and each part is proven across two virtual nodes in its own file
    (test_pingpong, test_bw, test_ring, test_placement, test_tcp, test_coll), the suite's composition on
    one node above and across machines in test_machines_commands (slow)."""
    import time

    from clusterbench.store import Store

    c = sim_cluster(2)
    names = [n.name for n in c.nodes]
    st = Store(tmp_path / "r.db")
    t0 = time.monotonic()
    rep = session.run(["mpi"], {"mpi": {"hosts": ",".join(f"{n}:1" for n in names), "allow_root": True}},
                      profile="quick", store=st, probe_data=live_probe, timeout=300)
    wall = time.monotonic() - t0
    assert rep.run.status == "complete"
    from clusterbench.benchmarks.mpi.coll import OPS

    assert {r.benchmark for r in rep.results} == {"pingpong", "bw", "multipair", "ring", "placement", "tcp", *OPS}
    for r in rep.results:
        if r.benchmark != "tcp" and not (r.benchmark == "placement" and r.params["class"] != "node"):
            assert r.params["transport_used"] == "tcp", (r.benchmark, r.metric)
    cluster = st.get_run(rep.run.id).cluster
    assert cluster["hosts"] == names and set(cluster["nodes"]) == set(names)
    assert wall < 180, wall  # the target is 90 s on a quiet 2-core machine; CI machines are shared
