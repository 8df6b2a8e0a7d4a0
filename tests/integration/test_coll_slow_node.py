"""Issue 26's "on 8 virtual nodes with one node's link slowed, the model check flags the sizes and the
node": ``run coll`` across 8 virtual nodes, the 4th node's link rate-limited with tc tbf (this
kernel has no netem; the model's own pair, rank 0 - rank 7, stays fast). The kernel's links
ping-pong (every pair of nodes, 256 KiB) names that node (``params.links``), the 64 KiB figures far
off the model carry it as their likely reason, the 8-byte ones never do (its bytes cost next to
nothing even on the slow link), and the run's note says so. One run, as a user runs it, no retry:
on this machine (2 cores shared with other work, 8 ranks oversubscribed) the node measured x25.1 and
x32.3 below the others at 256 KiB in two runs at load 6-7 (speed/coll_slow_node.py, its log quoted in
docs/collectives.md)."""
from __future__ import annotations

import subprocess

import pytest

from clusterbench import session

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # 8 virtual nodes

RATE_BPS = 100_000_000
MTU = 9000


def _limit(namespace: str, rate_bps: int) -> None:
    from clusterbench.launch.simcluster.state import TBF_LATENCY

    burst = max(rate_bps // 8 // 500, 65536 + MTU)  # as sim-cluster's own --rate: 2 ms at the rate, a GSO packet
    subprocess.run(["tc", "-n", namespace, "qdisc", "replace", "dev", "cb0", "root", "tbf", "rate", f"{rate_bps}bit",
                    "burst", str(burst), "latency", TBF_LATENCY], check=True, timeout=30)


def test_a_slow_node_among_8_is_named_with_the_sizes_it_slows(mpi, live_probe, sim_cluster) -> None:
    c = sim_cluster(8, mtu=MTU)
    slow = c.nodes[3].name
    _limit(c.node(slow).namespace, RATE_BPS)
    given = {"hosts": ",".join(n.name for n in c.nodes), "ops": ["allreduce", "bcast", "alltoall"],
             "sizes": [8, 65536], "allow_root": True}
    report = session.run(["coll"], {"coll": given}, profile="quick", timeout=300, probe_data=live_probe,
                         oversubscribe=True)
    lat = [r for r in report.results if r.metric == "latency"]
    assert len(lat) == 6
    links = lat[0].params["links"]
    print("\n" + "\n".join(f"{p['pair']}: {p['bandwidth_MBps']:.0f} MB/s" for p in links["pairs"]))
    assert len(links["pairs"]) == 28 and links["nodes"] == [n.name for n in c.nodes]
    assert links["slow_nodes"] == [slow], links["evidence"]
    assert all(r.params["links"] == links for r in report.results)
    from clusterbench.analysis import collmodel

    judged = collmodel.judge_results(report.results)
    by_slow = {(j.op, int(j.size_bytes)) for j in judged if j.reason == "slow link or node"}
    print("\n".join(j.finding for j in judged if j.finding))
    assert by_slow and {size for _, size in by_slow} == {65536}, judged
    assert all(f"node {slow} slow on bandwidth" in j.finding for j in judged if j.reason == "slow link or node")
    note = next(n for n in report.run.notes if "far off the network model with it" in n)
    assert note.startswith(f"coll: node {slow} slow on bandwidth at 256 KiB") and all(
        f"{op} {size} B" in note for op, size in by_slow)
