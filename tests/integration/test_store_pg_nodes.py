"""8 virtual nodes writing at once into one PostgreSQL store (issue 28 #2: "every run stored once").

A virtual cluster of 8 nodes (network namespaces, ``sim-cluster up --nodes 8``) and a PostgreSQL server of
the test's own (tests/pgkit.py) listening on the cluster's head address inside the head's namespace, where
every node routes (the nodes' only link is the cluster's bridge; this machine's own namespace has none).
Every node runs one real ``clusterbench --db postgresql://... run intcpu --quick`` at the same moment,
started in its namespace as clusterbench starts anything on a node (``remote.run_command``); then: every
run stored exactly once with all its figures, each from its own node's address (the server's log), the
server stopped and its folder gone, nothing left running in the cluster.

The nodes share this machine's UTS namespace, so every run records this machine's host name: which node
wrote which run is told by the client address PostgreSQL saw for the run's INSERT (log_statement=mod,
the address in every log line's prefix); the run's probe does show that it ran inside a node (its only
network interface the node's link to the bridge).
"""
from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pgkit
import pytest

from clusterbench.launch import remote, simcluster
from clusterbench.store import Store

NODES = 8
#: what the server logs: each connection, each INSERT/UPDATE with its first parameters, and in every line's
#: prefix the client's address
LOGGING = {"log_connections": "on", "log_statement": "mod", "log_line_prefix": "%m [%p] %h ",
           "log_parameter_max_length": "64"}
RUN_INSERT = re.compile(r"\[(\d+)\] (\S+) LOG:  execute [^:\n]*: INSERT INTO runs [^\n]*\n"
                        r"[^\n]*\[\1\] \2 DETAIL:  parameters: \$1 = '([0-9a-f-]{36})'")
CONNECTED = re.compile(r"\] (\S+) LOG:  connection received: host=(\S+)")
ACTIVITY = ("SELECT host(client_addr) FROM pg_stat_activity WHERE datname = '{db}'"
            " AND application_name = 'clusterbench' AND client_addr IS NOT NULL")


@pytest.fixture(autouse=True)
def _pg_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """This module's own sim-cluster prefix (``pg<pid>-``), set before ``sim_cluster`` brings one up."""
    monkeypatch.setenv("CLUSTERBENCH_SIM_PREFIX", f"pg{os.getpid() % 1_000_000}-")


def _run_on(node: simcluster.SimNode, c: simcluster.SimCluster, url: str, start: threading.Barrier) -> dict:
    """``clusterbench --db URL run intcpu --quick`` on ``node``, once every node is ready: its --json."""
    t = remote.transport(node.name, cluster=c)
    argv = t.python_argv("-m", "clusterbench", "--db", url, "run", "intcpu", "--quick", "--threads", "1",
                         "--no-sweep", "--time", "2", "--samples", "4", "--tag", "pgnodes", "--json")
    start.wait(timeout=60)
    p = remote.run_command(t, argv, timeout=100)
    assert p.returncode == 0, (node.name, p.returncode, p.stderr[-2000:])
    return json.loads(p.stdout)


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` has ended (or is a zombie), waiting up to ``within`` s: the postmaster
    removes its pid file, which pg_ctl stop waits for, a moment before it exits."""
    end = time.monotonic() + within
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state == "Z":
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.05)


@pytest.mark.integration
@pytest.mark.slow  # 8 virtual nodes, 20-60 s: the tier after the default suite
def test_eight_virtual_nodes_write_into_one_postgresql_store_at_once(sim_cluster, tmp_path: Path) -> None:
    c = sim_cluster(NODES)
    head = simcluster.exec_prefix(c.head, c)
    with pgkit.pg_server(listen=c.head.address, run_in=head, clients=[c.subnet], settings=LOGGING) as server:
        folder, postmaster = server.dir, int((server.data / "postmaster.pid").read_text().split()[0])
        db = server.new_database()
        url = server.url("cb", db)
        start = threading.Barrier(NODES)
        seen: set[str] = set()
        most = 0
        with ThreadPoolExecutor(NODES) as pool:
            futures = {n.name: pool.submit(_run_on, n, c, url, start) for n in c.nodes}
            while not all(f.done() for f in futures.values()):  # who is connected, while they run
                now = [r[0] for r in server.sql(ACTIVITY.format(db=db))]
                seen.update(now)
                most = max(most, len(set(now)))
                time.sleep(0.1)
            docs = {name: f.result() for name, f in futures.items()}
        log = server.log()
        st = Store(server.socket_url("cb", db), readonly=True)  # this namespace has no route to the head
        runs = {r.id: r for r in st.list_runs()}
        stored = {rid: [(x["seq"], x["metric"], x["value"]) for x in st.db.execute(
            "SELECT seq, metric, value FROM results WHERE run_id = ? ORDER BY seq", (rid,)).fetchall()]
            for rid in runs}
        nics = {rid: [n["name"] for n in (st.get_run(rid).probe or {})["environment"]["nics"]] for rid in runs}
        st.close()
    # the server stopped, its folder removed; nothing left in the cluster's namespaces
    assert not folder.exists() and _gone(postmaster), folder
    assert simcluster.processes() == []

    address = {n.name: n.address for n in c.nodes}
    acked = {name: d["run"]["id"] for name, d in docs.items()}
    # every node's run stored exactly once, complete, tagged
    assert len(set(acked.values())) == NODES and set(runs) == set(acked.values()), (acked, sorted(runs))
    assert all(r.status == "complete" and r.tags == ["pgnodes"] for r in runs.values()), runs
    # the nodes share this machine's UTS namespace: the recorded host is its name (or the node's, should
    # a node ever get a name of its own); what the run's environment does tell is that it ran inside a
    # node: its probe's only network interface is the node's link to the cluster's bridge
    assert all(runs[rid].host in (socket.gethostname(), name) for name, rid in acked.items()), runs
    assert all(n == [c.nodes[0].iface] for n in nics.values()), nics
    # no figure lost or duplicated: each run's figures as its node printed them, numbered 0..n-1
    for name, d in docs.items():
        printed = [(r["metric"], r["value"]) for r in d["results"]]
        mine = stored[acked[name]]
        assert printed and [(m, v) for _, m, v in mine] == printed, (name, printed, mine)
        assert [s for s, _, _ in mine] == list(range(len(printed))), mine
    # the server saw 8 different clients, the nodes' own addresses, and each run came from its node's
    clients = {a for _, a in CONNECTED.findall(log) if a != "[local]"}
    assert clients == set(address.values()) == seen, (clients, seen)
    inserted = {rid: host for _, host, rid in RUN_INSERT.findall(log)}
    assert inserted == {acked[name]: address[name] for name in address}, (inserted, acked)
    assert most > 1, f"the writers never overlapped (at most {most} connected at once)"
    print(f"{NODES} nodes, at most {most} connected at once, {sum(map(len, stored.values()))} figures")
