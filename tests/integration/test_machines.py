"""A cluster of separate machines (sim-cluster --machines): each node its own root filesystem, host
name, PID namespace and sshd, reached from the head by real ssh. Install, preflight and multi-node
runs as a user does them, and the faults a user meets (a host key not known, a password asked,
sshd stopped, a wrong host name, a node that cannot resolve another, no compiler, no MPI, another
clusterbench version, a full disk, a node killed mid-run): one line naming the node and the fix,
a non-zero exit, nothing stored, nothing left running or in any node's temporary folders."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from machinekit import leftovers, on, set_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # the emulated tier: separate machines

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, db: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    return subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


_on = on
_leftovers = leftovers


def _runs(db: Path) -> int:
    if not db.exists():
        return 0
    return sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0]


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    """Three machines, installed once for the module (the faults below bring up their own)."""
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.launch import simcluster

    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        pytest.skip("the virtual cluster needs root")
    state = tmp_path_factory.mktemp("sim-machines")
    restore_env = set_env(CLUSTERBENCH_SIM_STATE=str(state))
    try:
        try:
            c = simcluster.up(3, machines=True)
        except EnvironmentProblem as exc:
            pytest.skip(f"machines unusable here: {exc}")
        yield c
    finally:
        simcluster.down()
        restore_env()


def test_each_machine_is_a_machine_of_its_own(machines):
    c = machines
    for m in c.nodes:
        assert _on(c, m.name, "hostname").stdout.strip() == m.name
        # nothing of the head's: its checkout, its virtual environment, its home
        assert _on(c, m.name, "ls", "-A", "/root").stdout.strip() in ("", ".ssh")
        assert not _on(c, m.name, "test", "-e", str(REPO / "src")).returncode == 0
        assert not _on(c, m.name, "test", "-e", sys.prefix).returncode == 0
        assert _on(c, m.name, "sh", "-c", "echo $$").stdout.strip() != ""  # a PID namespace of its own:
        assert _on(c, m.name, "cat", "/proc/1/cmdline").stdout.startswith("python3")
    # what one machine writes, another does not see
    _on(c, "node1", "sh", "-c", "echo mine > /etc/cb-test")
    assert _on(c, "node2", "test", "-e", "/etc/cb-test").returncode != 0
    assert not Path("/etc/cb-test").exists()
    # the head reaches them by name through real ssh, its host keys recorded from the nodes themselves
    from clusterbench.launch import remote

    t = remote.transport("node2")
    assert t.kind == "ssh" and "ssh" in t.prefix
    assert remote.run_command(t, ["hostname"], timeout=20).stdout.strip() == "node2"


def test_one_shared_ssh_connection_per_machine_stopped_at_exit(machines):
    """A command's remote calls to a machine share one ssh connection (OpenSSH's ControlMaster:
    one key exchange, then ~20 ms a call); clusterbench stops it when it is done, so no ssh is
    left running in the head after a command, and ``sim-cluster down`` finds no job there."""
    from clusterbench.launch import remote, simcluster

    c = machines
    head = simcluster.exec_prefix(c.head, c)

    def masters() -> list[str]:
        ps = subprocess.run([*head, "sh", "-c", "ls ~/.ssh | grep '^cb-' || true"], capture_output=True,
                            text=True, timeout=10).stdout.split()
        return ps

    remote.stop_shared_connections()
    assert masters() == []
    t = remote.transport("node1")
    assert "ControlMaster=auto" in t.prefix
    remote.run_command(t, ["true"], timeout=20)
    assert len(masters()) == 1  # the first call left its connection for the next ones
    t0 = time.monotonic()
    for _ in range(5):
        assert remote.run_command(t, ["hostname"], timeout=20).stdout.strip() == "node1"
    shared = (time.monotonic() - t0) / 5
    assert len(masters()) == 1
    assert remote.stop_shared_connections() == 1
    deadline = time.monotonic() + 10
    while masters() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert masters() == [], "the shared connection outlived the stop"
    assert simcluster.processes() == []  # nothing of it left in the head
    # a command run as a user runs it: nothing left after it exits
    db = Path(os.environ.get("TMPDIR", "/tmp")) / f"cb-share-{os.getpid()}.db"
    p = _cli("cluster", "preflight", "--hosts", "node1,node2", "--no-mpi", "--json", db=db)
    assert p.returncode in (0, 3), p.stderr
    assert masters() == [] and simcluster.processes() == []
    print(f"a remote call over the shared connection: {1e3 * shared:.0f} ms")


def test_install_preflight_and_runs_across_machines(machines, mpi, tmp_path):
    c = machines
    db = tmp_path / "r.db"
    hosts = ",".join(m.name for m in c.nodes)
    p = _cli("cluster", "preflight", "--hosts", hosts, db=db)
    assert p.returncode == 3 and "clusterbench is not installed on node1" in p.stdout, p.stdout + p.stderr
    p = _cli("run", "pingpong", "--hosts", "node1,node2", "--quick", db=db)
    assert p.returncode == 3 and "clusterbench is not installed on node1" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and _runs(db) == 0
    t = time.monotonic()
    p = _cli("cluster", "install", "--hosts", hosts, "--json", db=db)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    assert {r["status"] for r in doc["nodes"].values()} == {"installed"}
    assert all("pingpong" in r["kernels"] and "hpl" in r["kernels"] for r in doc["nodes"].values())
    install_s = time.monotonic() - t
    again = json.loads(_cli("cluster", "install", "--hosts", hosts, "--json", db=db).stdout)
    assert {r["status"] for r in again["nodes"].values()} == {"already installed"}  # idempotent
    # the nodes run their own clusterbench from their own home
    assert _on(c, "node3", "sh", "-c", "~/.local/share/clusterbench/venv/bin/clusterbench --version").stdout.strip() \
        .endswith(doc["version"])
    # a hostfile as users write them wrong: a node by its address, a node given more slots than cpus
    hf = tmp_path / "nodes"
    hf.write_text(f"node1 slots=1\n{c.nodes[1].address} slots=1\nnode3 slots=64\n")
    p = _cli("cluster", "preflight", "--hostfile", str(hf), "--no-mpi", "--json", db=db)
    assert p.returncode == 3, p.stderr
    bad = {(x["node"], x["check"]): f"{x['problem']} -> {x['fix']}" for x in json.loads(p.stdout)["problems"]}
    assert f"names node2 by its address {c.nodes[1].address}" in bad[(c.nodes[1].address, "name")], bad
    assert "write node2 in the hostfile" in bad[(c.nodes[1].address, "name")], bad
    assert "gives node3 64 slots" in bad[("node3", "slots")] and "node3 slots=" in bad[("node3", "slots")], bad
    p = _cli("cluster", "preflight", "--hosts", hosts, "--json", db=db)
    pre = json.loads(p.stdout)
    assert p.returncode == 0 and pre["ok"], pre["problems"]
    assert pre["mpi"]["launch"]["ok"] and pre["mpi"]["hello"]["ok"] and pre["mpi"]["hello"]["ranks"] == 3
    assert set(pre["clock"]) == set(pre["hosts"])
    # multi-node runs, unchanged: kernels built on the nodes, results only on the head
    p = _cli("run", "pingpong", "--hosts", "node1,node2", "--quick", "--json", db=db)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    ranks = next(r for r in res["results"] if r["metric"] == "latency")["params"]["placement"]
    assert [r["host"] for r in ranks] == ["node1", "node2"]
    p = _cli("run", "hpl", "--hosts", "node1,node2", "--n", "1200", "--json", db=db)
    assert p.returncode == 0, p.stderr
    assert {r["metric"] for r in json.loads(p.stdout)["results"]} >= {"rmax", "residual"}
    assert _on(c, "node1", "sh", "-c", "ls ~/.cache/clusterbench/launch/node1").stdout.strip()  # its own build
    assert _on(c, "node1", "sh", "-c", "ls ~/.local/share/clusterbench/*.db 2>/dev/null || true").stdout == ""
    # MPICH's Hydra starts its proxies through ssh too (its own kernel build on each machine)
    p = _cli("run", "pingpong", "--hosts", "node1,node2", "--quick", "--mpi", "mpich", "--json", db=db)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["results"] and all(r["params"].get("transport_used") == "tcp" for r in res["results"]
                                  if r["metric"] == "latency"), res["results"][:2]
    # sweep node with no --remote-python: each machine's agent is its own installation's python
    p = _cli("sweep", "node", "--hosts", hosts, "--oversubscribe", "--benchmark", "intcpu --quick", "--json", db=db)
    assert p.returncode == 0, p.stderr
    sw = json.loads(p.stdout)
    assert sw["failed"] == {} and sorted(sw["hosts"]) == sorted(m.name for m in c.nodes), sw
    assert _leftovers(c) == {}
    print(f"install of {len(c.nodes)} machines: {install_s:.1f} s")


def _up(n: int, tmp_path: Path, monkeypatch, breaks: list[str]):
    from clusterbench.launch import simcluster

    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    return simcluster.up(n, machines=True, breaks=breaks)


def test_preflight_names_every_broken_machine_and_its_fix(tmp_path, monkeypatch, mpi):
    """Eight machines, seven broken as users find them: preflight names each, with its fix, in seconds;
    a run across a broken pair stops before anything starts, in one line naming the node."""
    from clusterbench.launch import simcluster

    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        pytest.skip("the virtual cluster needs root")
    c = _up(8, tmp_path, monkeypatch, ["node2:unknown-key", "node3:password", "node4:no-sshd",
                                       "node5:hostname=nodeX", "node6:hosts-missing=node1", "node7:no-compiler",
                                       "node8:no-mpi"])
    try:
        db = tmp_path / "r.db"
        hf = tmp_path / "hosts"
        hf.write_text("".join(f"{m.name} slots=1\n" for m in c.nodes) + "node1 slots=1\n")
        t = time.monotonic()
        p = _cli("cluster", "preflight", "--hostfile", str(hf), "--json", db=db, timeout=120)
        took = time.monotonic() - t
        assert p.returncode == 3, p.stderr
        doc = json.loads(p.stdout)
        by = {}
        for pr in doc["problems"]:
            by.setdefault(pr["node"], []).append(pr)
        text = {n: " | ".join(f"{x['problem']} -> {x['fix']}" for x in v) for n, v in by.items()}
        assert "not in known_hosts" in text["node2"] and "ssh-keyscan node2" in text["node2"]
        assert "asks for a password" in text["node3"] and "ssh-copy-id node3" in text["node3"]
        assert "sshd is not running" in text["node4"]
        assert "node5 calls itself 'nodeX'" in text["node5"] and "hostnamectl set-hostname node5" in text["node5"]
        assert "node6 cannot resolve node1" in text["node6"] and "/etc/hosts on node6" in text["node6"]
        assert "node7 has no compiler" in text["node7"]
        assert "node8 has no MPI" in text["node8"]
        assert "names node1 on lines 1, 9" in text["node1"]  # the hostfile's repeat
        assert not {"node2", "node3", "node4"} & {n for n, r in doc["nodes"].items() if r["reachable"]}
        assert took < 60, took
        p = _cli("cluster", "preflight", "--hostfile", str(hf), db=db, timeout=120)
        assert "problem [version] clusterbench is not installed on node1, node5, node6, node7, node8; fix: " \
            "clusterbench cluster install --hosts node1,node5,node6,node7,node8" in p.stdout, p.stdout
        # a run across a broken machine: one line naming it and the fix, nothing started or stored
        for pair, needle in (("node1,node2", "node2 over ssh: its host key is not in known_hosts"),
                             ("node1,node3", "node3 over ssh: it asks for a password"),
                             ("node1,node4", "node4 over ssh: nothing answers on the ssh port"),
                             ("node5,node1", "node5 calls itself 'nodeX'")):
            p = _cli("run", "pingpong", "--hosts", pair, "--quick", db=db, timeout=120)
            err = p.stderr.strip().splitlines()
            assert p.returncode == 3 and len(err) == 1 and needle in err[0], (pair, p.stderr)
        assert _runs(db) == 0
        assert _leftovers(simcluster.load()) == {}
    finally:
        simcluster.down()


def test_install_on_a_full_disk_and_another_version(tmp_path, monkeypatch, mpi):
    from clusterbench.launch import simcluster

    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        pytest.skip("the virtual cluster needs root")
    c = _up(3, tmp_path, monkeypatch, ["node3:disk=3m"])
    try:
        db = tmp_path / "r.db"
        p = _cli("cluster", "install", "--hosts", "node1,node2,node3", "--json", db=db)
        assert p.returncode == 3, p.stderr
        doc = json.loads(p.stdout)
        assert doc["nodes"]["node1"]["status"] == "installed" and doc["nodes"]["node2"]["status"] == "installed"
        assert doc["failed"] == ["node3"] and "no space left" in doc["nodes"]["node3"]["error"]
        assert "free space on node3" in doc["nodes"]["node3"]["error"]
        # node3 is left without a half install, and nothing in its temporary folders
        assert _on(c, "node3", "sh", "-c", "ls ~/.local/share/clusterbench/installed.json").returncode != 0
        assert _leftovers(c) == {}
        # another clusterbench on node2: named before anything runs
        _on(c, "node2", "sh", "-c", "sed -i 's/\"digest\": \"[0-9a-f]*\"/\"digest\": \"0000\"/' "
            "~/.local/share/clusterbench/installed.json")
        p = _cli("run", "pingpong", "--hosts", "node1,node2", "--quick", db=db)
        assert p.returncode == 3 and "node2 has another clusterbench" in p.stderr and \
            "cluster install --hosts node2" in p.stderr, p.stderr
        assert _runs(db) == 0
        p = _cli("cluster", "install", "--hosts", "node1,node2", "--json", db=db)
        st = {h: r["status"] for h, r in json.loads(p.stdout)["nodes"].items()}
        assert st == {"node1": "already installed", "node2": "installed"}
    finally:
        simcluster.down()


def test_a_machine_killed_during_hpl_ends_the_run_and_leaves_nothing(tmp_path, monkeypatch, mpi):
    from clusterbench.launch import machines as M
    from clusterbench.launch import simcluster

    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        pytest.skip("the virtual cluster needs root")
    c = _up(3, tmp_path, monkeypatch, [])
    try:
        db = tmp_path / "r.db"
        assert _cli("cluster", "install", "--hosts", "node1,node2,node3", db=db).returncode == 0
        run = subprocess.Popen([sys.executable, "-m", "clusterbench", "--db", str(db), "run", "hpl", "--hosts",
                                "node1,node2", "--n", "9000", "--timeout", "240"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"})
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # until node2's rank runs
            if "hpl" in _on(c, "node2", "ps", "-e", "-o", "comm=").stdout:
                break
            time.sleep(0.2)
        time.sleep(1.0)
        M.stop_node(c, c.node("node2"))
        out, err = run.communicate(timeout=120)
        # the user sees one line: the node lost, and what to do about it
        lines = err.strip().splitlines()
        assert run.returncode != 0 and len(lines) == 1, err
        assert "MPI lost node node2 in the middle of the run" in lines[0], err
        assert "clusterbench cluster preflight --hosts node2" in lines[0], err
        # no run with figures: at most the run's row, marked not complete, with no figure in it ...
        con = sqlite3.connect(db)
        rows = con.execute("SELECT id, status FROM runs").fetchall()
        assert len(rows) <= 1 and all(s != "complete" for _, s in rows), rows
        assert con.execute("SELECT count(*) FROM results").fetchone()[0] == 0
        con.close()
        if rows:  # ... which compare and report leave out unless told to include it
            rid = rows[0][0]
            p = _cli("compare", rid, rid, db=db)
            assert p.returncode != 0 and f"side '{rid}' has no complete run" in p.stderr, p.stdout + p.stderr
            p = _cli("report", "last", "-o", str(tmp_path / "rep"), db=db)
            assert p.returncode != 0 and "selector 'last' has no complete run" in p.stderr, p.stdout + p.stderr
            assert not (tmp_path / "rep" / "index.html").exists()
        time.sleep(1.0)
        left = {k: v for k, v in _leftovers(c).items() if k != "node2"}
        assert left == {}, left
    finally:
        simcluster.down()
