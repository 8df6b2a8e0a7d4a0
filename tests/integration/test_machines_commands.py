"""Every multi-node command on the virtual cluster of machines (sim-cluster --machines, issue 24):
each node a machine of its own reached from the head by real ssh, clusterbench installed on it by
``cluster install``. Every command runs at its smallest sensible size on ONE three-machine cluster
(installed once), and each test checks what users rely on: the ranks ran on the machines named, the
figure is there and plausible, each machine ran its own build of the kernel (not the head's path),
the results are stored on the head only, and nothing is left running or in any machine's /tmp.
The last test kills a machine during ``sweep network``.

Run time: 2 to 2.7 minutes on 2 shared cores (measured 126-159 s; the budget of this module is 4 minutes).
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from machinekit import leftovers, on, set_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # the emulated tier: separate machines

HOSTS = ("node1", "node2", "node3")
#: each machine's meter reads a file only that machine has: a figure proves the meter ran there
WATTS = {"node1": 7.5, "node2": 9.25, "node3": 11.0}


def _cli(*args: str, db: Path, timeout: float = 150) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    return subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _json(*args: str, db: Path, timeout: float = 150) -> dict:
    t = time.monotonic()
    p = _cli(*args, "--json", db=db, timeout=timeout)
    print(f"{time.monotonic() - t:5.1f} s  clusterbench {' '.join(args)}")
    assert p.returncode == 0, (args, p.stderr[-3000:])
    return json.loads(p.stdout)


def _runs(db: Path) -> list[tuple[str, str]]:
    if not db.exists():
        return []
    return sqlite3.connect(db).execute("SELECT id, status FROM runs ORDER BY started").fetchall()


def _results(db: Path, run_id: str) -> list[dict]:
    rows = sqlite3.connect(db).execute("SELECT params FROM results WHERE run_id=?", (run_id,)).fetchall()
    return [json.loads(p) for (p,) in rows]


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    """Three machines with their own prefix and state, clusterbench installed on each once; always
    taken down, and the test fails if any of its namespaces is left."""
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.launch import simcluster

    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        pytest.skip("the virtual cluster needs root")
    prefix = f"m{os.getpid() % 10_000_000}-"
    state = tmp_path_factory.mktemp("sim-machines-commands")
    # leftovers of an earlier run of this module that was killed (its pid is gone)
    if os.path.isdir("/run/netns"):
        for m in {m.group(0) for m in map(re.compile(r"^m(\d+)-").match, os.listdir("/run/netns"))
                  if m and not os.path.exists(f"/proc/{m.group(1)}")}:
            simcluster.down(prefix=m, state=state)
    restore_env = set_env(CLUSTERBENCH_SIM_PREFIX=prefix, CLUSTERBENCH_SIM_STATE=str(state))
    try:
        try:
            c = simcluster.up(len(HOSTS), machines=True)
        except EnvironmentProblem as exc:
            pytest.skip(f"machines unusable here: {exc}")
        db = tmp_path_factory.mktemp("machines-commands-db") / "install.db"
        p = _cli("cluster", "install", "--hosts", ",".join(HOSTS), "--json", db=db, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        assert {r["status"] for r in json.loads(p.stdout)["nodes"].values()} <= {"installed", "already installed"}
        for node, w in WATTS.items():
            on(c, node, "sh", "-c", f"echo {w} > /etc/cb-watts")
        yield c
    finally:
        simcluster.down()
        left = simcluster.list_namespaces(prefix)
        restore_env()
        assert not left, left


def _own_builds(c, doc: dict, hosts) -> None:
    """Every kernel of the run ran on each machine as that machine's own build: recorded per node,
    a path in the machine's home (not the head's kernel cache), present and executable there."""
    head_cache = os.environ["CLUSTERBENCH_CACHE"]
    staged = {k: b["nodes"] for k, b in doc["run"]["builds"].items() if b.get("nodes")}
    assert staged, doc["run"]["builds"]
    for kernel, per in staged.items():
        assert set(per) == set(hosts), (kernel, per)
        for host, b in per.items():
            assert b["compiler"] == doc["run"]["builds"][kernel]["compiler"], (host, b)  # the same MPI's wrapper
            assert b["binary"].startswith("/root/.cache/clusterbench/kernels/") and \
                not b["binary"].startswith(head_cache), b
            assert on(c, host, "test", "-x", b["binary"]).returncode == 0, (host, b)
            link = on(c, host, "readlink", "-f", f"{Path(b['launch']).parent}/{host}/{Path(b['launch']).name}")
            assert link.stdout.strip() == b["binary"], (host, link.stdout, b)
    assert leftovers(c) == {}  # after every command, not only at the end of a test


def _clean(c) -> None:
    """Nothing running or in /tmp on any machine; no results store anywhere but on the head."""
    from clusterbench.launch import machines as M

    assert leftovers(c) == {}
    for host in (m.name for m in c.nodes if M.node_alive(m)):
        assert on(c, host, "sh", "-c", "ls ~/.local/share/clusterbench/*.db 2>/dev/null || true").stdout == "", host


def _placed(res: dict) -> list[str]:
    """The host of each rank (multipair's ``placement`` is its class; its ranks are ``rank_placement``)."""
    prm = res["params"]
    ranks = prm.get("rank_placement") if isinstance(prm.get("placement"), str) else prm.get("placement")
    return [r["host"] for r in ranks or []]


def test_mpi_and_tcp_benchmarks_across_machines(machines, mpi, tmp_path):
    """pingpong (with a power meter run on each machine), bw, multipair, placement, tcp, and the
    interconnect suite (run mpi: ring and tcp here)."""
    c = machines
    db = tmp_path / "r.db"
    cmd = "cmd:cat /etc/cb-watts"
    doc = _json("run", "pingpong", "--hosts", "node1,node2", "--quick", "--max-size", "4096", "--oversubscribe",
                "--power", cmd, "--power-interval", "0.5", db=db)
    lat = [r for r in doc["results"] if r["metric"] == "latency"]
    assert lat and all(_placed(r) == ["node1", "node2"] for r in lat)
    assert 0.5 < min(r["value"] for r in lat) < 5000  # us, over TCP between two machines
    energy = doc["run"]["energy"]
    assert energy["basis"] == "measured" and set(energy["sources"]) == {"node1", "node2"}
    per_node = energy["benchmarks"][0]["per_node"]
    for node in ("node1", "node2"):  # each machine's own reading, so its meter ran there
        assert per_node[node]["avg_watts"] == pytest.approx(WATTS[node]) and per_node[node]["samples"] >= 2
    _own_builds(c, doc, ["node1", "node2"])

    doc = _json("run", "bw", "--hosts", "node1,node2", "--quick", "--max-size", "65536", "--oversubscribe", db=db)
    assert {r["metric"] for r in doc["results"]} == {"bw", "bibw"}
    assert all(_placed(r) == ["node1", "node2"] for r in doc["results"])
    assert 1 < max(r["value"] for r in doc["results"] if r["metric"] == "bw") < 1e6  # MB/s, at 64 KiB
    _own_builds(c, doc, ["node1", "node2"])

    doc = _json("run", "multipair", "--hosts", "node1:2,node2:2", "--quick", "--pairs", "1,2", "--max-size", "65536",
                "--oversubscribe", db=db)
    pairs = {r["params"].get("pairs") for r in doc["results"]}
    assert {1, 2} <= pairs, pairs
    two = next(r for r in doc["results"] if r["params"].get("pairs") == 2)
    assert _placed(two) == ["node1", "node1", "node2", "node2"], _placed(two)
    assert 1 < max(r["value"] for r in doc["results"] if r["metric"] == "aggregate_bandwidth") < 1e6
    _own_builds(c, doc, ["node1", "node2"])

    doc = _json("run", "placement", "--hosts", "node1,node2", "--quick", "--oversubscribe", db=db)
    node_pair = [r for r in doc["results"] if r["params"].get("class") == "node"]
    assert {r["metric"] for r in node_pair} == {"latency", "bandwidth"}
    assert all(_placed(r) == ["node1", "node2"] for r in node_pair)
    intra = [r for r in doc["results"] if r["params"].get("class") != "node"]
    assert intra and all(set(_placed(r)) == {"node1"} for r in intra)  # intra-node pairs on A
    _own_builds(c, doc, ["node1", "node2"])

    doc = _json("run", "tcp", "--hosts", "node2,node3", "--streams", "1", "--seconds", "0.5", "--repeats", "1",
                "--latency-iterations", "500", db=db)
    by = {r["metric"]: r for r in doc["results"]}
    assert set(by) == {"throughput", "rtt", "latency"}
    tp = by["throughput"]["params"]
    addr = {m.name: m.address for m in c.nodes}
    assert (tp["server"], tp["client"]) == ("node2", "node3")
    assert (tp["peer_address"], tp["local_address"]) == (addr["node2"], addr["node3"])
    assert 10 < by["throughput"]["value"] < 1e6 and 1 < by["latency"]["value"] < 1e5  # Mbit/s, us
    _own_builds(c, doc, ["node2", "node3"])

    doc = _json("run", "mpi", "--hosts", "node1,node2", "--quick", "--skip", "pingpong,bw,multipair,placement,coll",
                "--oversubscribe", db=db)
    benches = {r["benchmark"] for r in doc["results"]}
    assert benches == {"ring", "tcp"}, benches
    assert all(_placed(r) == ["node1", "node2"] for r in doc["results"] if r["benchmark"] == "ring")
    assert {r["params"]["server"] for r in doc["results"] if r["benchmark"] == "tcp"} == {"node1"}
    _own_builds(c, doc, ["node1", "node2"])
    assert [s for _, s in _runs(db)] == ["complete"] * 6
    _clean(c)


def test_hpl_family_across_machines(machines, mpi, tmp_path):
    """hpl pure and hybrid, hpl-scaling and tune hpl."""
    c = machines
    db = tmp_path / "r.db"
    doc = _json("run", "hpl", "--hosts", "node1,node2", "--n", "1000", "--oversubscribe", db=db)
    by = {r["metric"]: r for r in doc["results"]}
    assert by["residual"]["params"]["passed"] and 0.01 < by["rmax"]["value"] < 1000
    assert by["rmax"]["params"]["hosts"] == ["node1", "node2"] and _placed(by["rmax"]) == ["node1", "node2"]
    assert by["rmax"]["params"]["topology"] == "pure"
    _own_builds(c, doc, ["node1", "node2"])

    doc = _json("run", "hpl", "--hosts", "node2:2,node3:2", "--n", "1000", "--topology", "hybrid",
                "--oversubscribe", db=db)
    rmax = next(r for r in doc["results"] if r["metric"] == "rmax")
    prm = rmax["params"]
    assert prm["topology"] == "hybrid" and prm["ranks"] == 2 and prm["threads_per_rank"] == 2, prm
    assert prm["passed"] and _placed(rmax) == ["node2", "node3"]
    _own_builds(c, doc, ["node2", "node3"])

    doc = _json("run", "hpl-scaling", "--hosts", "node1,node2", "--nodes", "1,2", "--n-per-node", "800",
                "--quick", "--oversubscribe", db=db)
    rm = [r for r in doc["results"] if r["metric"] == "rmax"]
    assert {tuple(r["params"]["hosts"]) for r in rm} in ({("node1",), ("node1", "node2")},
                                                          {("node2",), ("node1", "node2")}), rm
    assert all(set(r["params"]["hosts"]) <= {"node1", "node2"} and r["value"] > 0.01 for r in rm)
    _own_builds(c, doc, ["node1", "node2"])

    tune = _json("tune", "hpl", "--hosts", "node1,node2", "--budget", "15s", "--n", "800", "--nb-list", "64,128",
                 "--top", "1", "--topologies", "pure", "--blas-list", "openblas", "--oversubscribe", db=db)["tune"]
    assert tune["best"]["status"] == "measured" and tune["best"]["value"] > 0.01
    assert tune["best_params"]["nb"] in (64, 128) and tune["best_params"]["grid"] in ("1x2", "2x1")
    hpl_trials = [t for t in tune["trials"] if t["kind"] == "hpl" and t["status"] == "measured"]
    assert hpl_trials
    for t in hpl_trials:  # every hpl trial ran across the two machines
        rows = [p for p in _results(db, t["run_id"]) if p.get("hosts")]
        assert rows and all(p["hosts"] == ["node1", "node2"] for p in rows), t["key"]
    assert all(s == "complete" for _, s in _runs(db))
    _clean(c)


def test_hpcc_hpcg_ptrans_pdes_across_machines(machines, mpi, tmp_path):
    c = machines
    db = tmp_path / "r.db"
    doc = _json("run", "hpcg", "--hosts", "node1,node2", "--quick", "--oversubscribe", db=db)
    rating = next(r for r in doc["results"] if r["metric"] == "rating")
    assert rating["params"]["hosts"] == ["node1", "node2"] and _placed(rating) == ["node1", "node2"]
    assert 0.001 < rating["value"] < 1000  # GFLOP/s
    _own_builds(c, doc, ["node1", "node2"])

    doc = _json("run", "ptrans", "--hosts", "node2,node3", "--n", "500", "--quick", "--oversubscribe", db=db)
    g = next(r for r in doc["results"] if r["metric"] == "gbs")
    assert 0.001 < g["value"] < 1000 and g["params"]["hosts"] == ["node2", "node3"]
    _own_builds(c, doc, ["node2", "node3"])

    # under MPICH (Hydra's ssh bootstrap; its own build of pdes with MPICH's mpicc on each machine)
    doc = _json("run", "pdes", "--hosts", "node1,node3", "--quick", "--oversubscribe", "--mpi", "mpich", db=db)
    ev = next(r for r in doc["results"] if r["metric"] == "events_per_s")
    assert ev["value"] > 1000 and _placed(ev) == ["node1", "node3"] and ev["params"]["hosts"] == ["node1", "node3"]
    assert "MPICH" in ev["params"]["mpi"]["library"] and ev["params"]["transport_used"] == "tcp"
    assert doc["run"]["builds"]["pdes"]["compiler"].endswith("mpicc.mpich"), doc["run"]["builds"]["pdes"]
    _own_builds(c, doc, ["node1", "node3"])

    doc = _json("run", "hpcc", "--hosts", "node1,node2", "--quick", "--oversubscribe",
                "--skip", "hpl,hpcg,fft,randomaccess,stream,dgemm", db=db, timeout=200)
    keys = {r["params"].get("hpcc_key") for r in doc["results"]}
    assert {"PTRANS_GBs", "MinPingPongLatency_usec", "NaturallyOrderedRingLatency_usec"} <= keys, keys
    assert all(_placed(r) == ["node1", "node2"] for r in doc["results"] if _placed(r))
    _own_builds(c, doc, ["node1", "node2"])
    assert [s for _, s in _runs(db)] == ["complete"] * 4
    _clean(c)


def test_check_doctor_and_a_fix_undone_on_one_machine(machines, tmp_path):
    c = machines
    db = tmp_path / "r.db"
    chk = _json("cluster", "check", "--hosts", ",".join(HOSTS), db=db)
    assert chk["answered"] == list(HOSTS) and chk["errors"] == {}
    assert {h: d["probe"]["hostname"] for h, d in chk["probes"].items()} == {h: h for h in HOSTS}

    doc = _json("doctor", "--hosts", ",".join(HOSTS), db=db)
    assert doc["hosts"] == list(HOSTS)
    rps = {f["node"] for f in doc["findings"] if f["rule"] == "rps-single-queue"}
    assert rps == set(HOSTS), doc["findings"]  # each machine's own NIC, read there
    rps_file = "/sys/class/net/cb0/queues/rx-0/rps_cpus"
    before = {h: on(c, h, "cat", rps_file).stdout.strip() for h in HOSTS}
    assert leftovers(c) == {}
    fix = _json("doctor", "--hosts", "node2", "--fix", "rps-single-queue", "--yes", db=db)["fix"]
    assert fix["status"] == "applied" and fix["hosts"] == ["node2"]
    after = {h: on(c, h, "cat", rps_file).stdout.strip() for h in HOSTS}
    assert int(after["node2"], 16) != 0 and int(before["node2"], 16) == 0  # changed on node2 itself
    assert after["node1"] == before["node1"] and after["node3"] == before["node3"]  # and there only
    undo = _json("doctor", "--undo", fix["id"], "--yes", db=db)["fix"]
    assert undo["status"] == "undone"
    assert {h: on(c, h, "cat", rps_file).stdout.strip() for h in HOSTS} == before
    _clean(c)


def test_sweep_network_across_machines(machines, mpi, tmp_path):
    c = machines
    db = tmp_path / "r.db"
    sw = _json("sweep", "network", "--hosts", ",".join(HOSTS), "--oversubscribe", db=db)
    assert sw["status"] == "complete" and sw["stored"] and sw["nodes"] == list(HOSTS)
    assert sorted(p["pair"] for p in sw["pairs"]) == ["node1-node2", "node1-node3", "node2-node3"]
    for p in sw["pairs"]:
        assert 1 < p["latency_us"] < 1e5 and 1 < p["bandwidth_MBps"] < 1e6, p
    assert sw["params"]["transport_used"] == "tcp"
    assert [(i, s) for i, s in _runs(db)] == [(sw["run_id"], "complete")]
    builds = json.loads(sqlite3.connect(db).execute("SELECT builds FROM runs").fetchone()[0])
    assert set(builds["allpairs"]["nodes"]) == set(HOSTS)
    _clean(c)


def test_transport_rdma_across_machines_names_the_one_without_an_rdma_port(machines, mpi, tmp_path):
    """--transport rdma across nodes: the quick preflight before the run reads every node's RDMA ports and
    names the node without one up, before anything starts or is stored. node1 is given a soft-RoCE
    device's sysfs entry (a tmpfs over its own /sys/class: its mount namespace only); node2 has none."""
    c = machines
    db = tmp_path / "r.db"
    assert on(c, "node1", "mount", "-t", "tmpfs", "cbfake", "/sys/class").returncode == 0
    try:
        assert on(c, "node1", "sh", "-c", "mkdir -p /sys/class/infiniband/rxe0/ports/1 && "
                  "echo '4: ACTIVE' > /sys/class/infiniband/rxe0/ports/1/state").returncode == 0
        p = _cli("run", "pingpong", "--hosts", "node1,node2", "--quick", "--transport", "rdma", db=db)
        assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "--transport rdma: node2 has no RDMA port up (devices: none)" in p.stderr, p.stderr
        assert "node1 has" not in p.stderr  # its port is up
        assert _runs(db) == []
    finally:
        on(c, "node1", "umount", "/sys/class")
    _clean(c)


def test_staged_kernels_found_by_their_stamps_and_asked_again_when_changed(machines, mpi):
    """A launch finds each machine's build by its stamp (a few shell commands in the ssh session, no
    Python on the machine) and asks the machine's clusterbench again where the binary is gone or the
    compiler changed; the next launch finds the new stamps."""
    from clusterbench.kernels.build import REQUESTS, build_kernel
    from clusterbench.launch import nodes, remote

    c = machines
    request = REQUESTS[str(build_kernel("pingpong", openmp=False, cc=mpi.mpicc).path)]

    def stage() -> dict[str, dict]:
        nodes.forget_staged()  # as the next clusterbench command starts: nothing known yet
        return {h: d[0] for h, d in nodes.stage_requests(list(HOSTS), [request]).items()}

    try:
        stage()  # built and stamped (by the earlier tests' launches, or now)
        docs = stage()
        assert all(d.get("stamped") for d in docs.values()), docs
        gone = docs["node1"]["binary"]
        assert on(c, "node1", "rm", gone).returncode == 0
        assert on(c, "node2", "touch", "/usr/bin/gcc").returncode == 0  # its own root: node2's compiler "upgraded"
        docs = stage()
        assert not docs["node1"].get("stamped") and on(c, "node1", "test", "-x", gone).returncode == 0, docs["node1"]
        assert not docs["node2"].get("stamped") and docs["node3"].get("stamped"), docs
        assert all(d.get("stamped") for d in stage().values())
    finally:
        remote.stop_shared_connections()
    for _ in range(50):  # the machines' ends of the stopped connections close
        if not leftovers(c):
            break
        time.sleep(0.1)
    _clean(c)


def test_a_machine_killed_during_sweep_network(machines, mpi, tmp_path):
    """Last: it kills node3. One line naming it, a non-zero exit, no figure stored, nothing left."""
    from clusterbench.launch import machines as M

    c = machines
    db = tmp_path / "r.db"
    run = subprocess.Popen([sys.executable, "-m", "clusterbench", "--db", str(db), "sweep", "network", "--hosts",
                            ",".join(HOSTS), "--oversubscribe", "--pair-budget", "3", "--timeout", "120"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until node3's agent runs
            if "allpairs" in on(c, "node3", "ps", "-e", "-o", "comm=").stdout:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the sweep never started on node3")
        time.sleep(1.0)
        M.stop_node(c, c.node("node3"))
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate(timeout=10)
    lines = err.strip().splitlines()
    assert run.returncode not in (0, None) and len(lines) == 1, err
    assert "MPI lost node node3 in the middle of the run" in lines[0], err
    assert "clusterbench cluster preflight --hosts node3" in lines[0], err
    assert all(s != "complete" for _, s in _runs(db))
    assert sqlite3.connect(db).execute("SELECT count(*) FROM results").fetchone()[0] == 0
    time.sleep(1.0)
    assert not M.node_alive(c.node("node3"))
    _clean(c)  # node1 and node2: nothing left (node3 is gone)
