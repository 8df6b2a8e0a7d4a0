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

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str, db: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    return subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _on(c, node: str, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run ``cmd`` inside a machine (as its root, not through ssh): to look at it or break it."""
    from clusterbench.launch import simcluster

    return subprocess.run([*simcluster.exec_prefix(node, c), *cmd], capture_output=True, text=True, timeout=timeout)


def _leftovers(c) -> dict[str, list[str]]:
    """Per machine: processes other than its init and sshd, and files in its /tmp and /var/tmp."""
    out = {}
    for m in c.nodes:
        ps = _on(c, m.name, "ps", "-e", "-o", "pid=,comm=").stdout.split("\n")
        procs = [ln.strip() for ln in ps if ln.strip() and ln.split()[1:2] not in (["python3"], ["sshd"], ["ps"])
                 and ln.split()[0] != "1"]
        tmp = _on(c, m.name, "sh", "-c", "ls -A /tmp /var/tmp | grep -v ':$' | grep -v '^$' || true").stdout.split()
        if procs or tmp:
            out[m.name] = procs + tmp
    return out


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
    old = os.environ.get("CLUSTERBENCH_SIM_STATE")
    os.environ["CLUSTERBENCH_SIM_STATE"] = str(state)
    try:
        c = simcluster.up(3, machines=True)
    except EnvironmentProblem as exc:
        pytest.skip(f"machines unusable here: {exc}")
    try:
        yield c
    finally:
        simcluster.down()
        if old is None:
            os.environ.pop("CLUSTERBENCH_SIM_STATE", None)
        else:
            os.environ["CLUSTERBENCH_SIM_STATE"] = old


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
    assert _leftovers(c) == {}
    print(f"install of {len(c.nodes)} machines: {install_s:.1f} s")
