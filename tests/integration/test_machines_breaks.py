"""Separate machines broken in the ways the ``--break`` kinds added for them make (sim-cluster
--machines): a node that hangs (its sshd stopped: connections accepted, never answered), another
clusterbench installed, an ``/etc/hosts`` that maps an address back to another name, a host key in the
head's known_hosts that is not the node's, a node without MPI. Each is named per node with its fix,
in seconds; install installs nothing on a node that could not run it; a run across it stops in one
line with nothing stored. Two clusters of three machines, one per class."""
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


def _cli(*args: str, db: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    return subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _runs(db: Path) -> int:
    if not db.exists():
        return 0
    return sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0]


def _cluster(tmp_path_factory, breaks: list[str]):
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.launch import simcluster

    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        pytest.skip("the virtual cluster needs root")
    restore_env = set_env(CLUSTERBENCH_SIM_STATE=str(tmp_path_factory.mktemp("sim-breaks")))
    try:
        try:
            c = simcluster.up(3, machines=True, breaks=breaks)
        except EnvironmentProblem as exc:
            pytest.skip(f"machines unusable here: {exc}")
        yield c
    finally:
        simcluster.down()
        restore_env()


def _problems(doc: dict) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for p in doc["problems"]:
        key = (p["node"], p["check"])
        out[key] = (out[key] + " | " if key in out else "") + f"{p['problem']} -> {p['fix']}"
    return out


@pytest.fixture(scope="class")
def hung(tmp_path_factory):
    yield from _cluster(tmp_path_factory, ["node1:reverse=node2", "node2:version", "node3:hang"])


@pytest.fixture(scope="class")
def lacking(tmp_path_factory):
    yield from _cluster(tmp_path_factory, ["node2:no-mpi", "node3:changed-key"])


class TestPreflightOfBrokenMachines:
    def test_a_hanging_node_another_version_and_a_reverse_mismatch_named_in_seconds(self, hung, tmp_path):
        from clusterbench.cluster import preflight as P

        db = tmp_path / "r.db"
        t = time.monotonic()
        p = _cli("cluster", "preflight", "--hosts", "node1,node2,node3", "--no-mpi", "--json", db=db, timeout=60)
        took = time.monotonic() - t
        assert p.returncode == 3, p.stdout + p.stderr
        doc = json.loads(p.stdout)
        bad = _problems(doc)
        # the node that hangs: named with its fix, the command bounded by one node's time, not waiting for it
        assert "node3 over ssh: it accepts the connection and never answers" in bad[("node3", "ssh")], bad
        assert "restart sshd on node3" in bad[("node3", "ssh")]
        assert not doc["nodes"]["node3"]["reachable"] and doc["nodes"]["node3"]["seconds"] <= P.NODE_TIMEOUT + 1
        assert took < P.NODE_TIMEOUT + 12, took
        # another clusterbench on node2 (the version break's installed.json)
        assert "node2 has another clusterbench (0.0.0, digest 0000000000000000)" in bad[("node2", "version")], bad
        assert "cluster install --hosts node2" in bad[("node2", "version")]
        # node1's /etc/hosts maps node2's address back to another name
        addr = hung.node("node2").address
        assert f"on node1, node2 resolves to {addr}, which resolves back to node2-alias" in bad[("node1", "resolve")]
        assert f"make /etc/hosts on node1 name {addr} as node2 first" in bad[("node1", "resolve")]
        assert ("node2", "resolve") not in bad
        # the clock offset of every node that answered, in --json, with its uncertainty
        assert set(doc["clock"]) == {"node1", "node2"}
        for c in doc["clock"].values():
            assert isinstance(c["offset_s"], float) and 0 <= c["uncertainty_s"] < 0.5 and abs(c["offset_s"]) < 0.5
        # a run across the hanging node: one line naming it and the fix, in seconds, nothing stored
        t = time.monotonic()
        p = _cli("run", "pingpong", "--hosts", "node2,node3", "--quick", db=db, timeout=60)
        err = p.stderr.strip().splitlines()
        assert p.returncode == 3 and len(err) == 1 and "node3" in err[0] and "never answers" in err[0], p.stderr
        assert time.monotonic() - t < P.NODE_TIMEOUT + 12
        assert _runs(db) == 0
        assert leftovers(hung) == {}


class TestInstallOnBrokenMachines:
    def test_a_node_without_mpi_is_refused_by_install_and_by_a_run(self, lacking, tmp_path):
        db = tmp_path / "r.db"
        p = _cli("cluster", "install", "--hosts", "node1,node2", "--no-kernels", "--json", db=db)
        assert p.returncode != 0, p.stdout + p.stderr
        doc = json.loads(p.stdout)
        assert doc["nodes"]["node1"]["status"] == "installed" and doc["failed"] == ["node2"], doc
        err = doc["nodes"]["node2"]["error"]
        assert err.startswith("node2 lacks MPI; install with (on node2): sudo apt-get install -y openmpi-bin "
                              "libopenmpi-dev"), err
        p = _cli("cluster", "install", "--hosts", "node1,node2", "--no-kernels", db=db)
        node2 = [ln for ln in p.stdout.splitlines() if ln.startswith("  node2")]
        assert p.returncode != 0 and len(node2) == 1 and "apt-get install -y openmpi-bin" in node2[0], p.stdout
        # nothing of clusterbench on node2, not even half
        assert on(lacking, "node2", "sh", "-c", "ls -A ~/.local/share/clusterbench ~/.cache/clusterbench "
                  "2>/dev/null || true").stdout.strip() == ""
        # a run across it: one line naming node2 and the packages, nothing stored
        p = _cli("run", "pingpong", "--hosts", "node1,node2", "--quick", db=db)
        err_lines = p.stderr.strip().splitlines()
        assert p.returncode == 3 and len(err_lines) == 1, p.stderr
        assert "node2 has no MPI" in err_lines[0] and "install it on node2: sudo apt-get install -y openmpi-bin" \
            in err_lines[0], p.stderr
        assert _runs(db) == 0
        assert leftovers(lacking) == {}

    def test_a_changed_host_key_is_named_with_ssh_keygen_r(self, lacking, tmp_path):
        db = tmp_path / "r.db"
        p = _cli("cluster", "preflight", "--hosts", "node1,node3", "--no-mpi", "--json", db=db)
        assert p.returncode == 3, p.stdout + p.stderr
        bad = _problems(json.loads(p.stdout))
        assert "cannot reach node3 over ssh: its host key changed" in bad[("node3", "ssh")], bad
        assert "ssh-keygen -R node3" in bad[("node3", "ssh")]
        assert ("node1", "ssh") not in bad

    def test_an_address_two_machines_share_is_a_warning_with_the_network_to_give_mpi(self, lacking, tmp_path):
        # a bridge as docker0 or QEMU's user network makes: the same address on two machines (a veth pair
        # of the machine's own: this kernel has no dummy interfaces)
        c = lacking
        for node in ("node1", "node2"):
            for cmd in (["ip", "link", "add", "cbdup0", "type", "veth", "peer", "name", "cbdup1"],
                        ["ip", "addr", "add", "10.77.0.1/24", "dev", "cbdup0"], ["ip", "link", "set", "cbdup0", "up"]):
                assert on(c, node, *cmd).returncode == 0
        try:
            p = _cli("cluster", "preflight", "--hosts", "node1,node2", "--no-mpi", "--json", db=tmp_path / "r.db")
            doc = json.loads(p.stdout)
            (w,) = [w for w in doc["warnings"] if w["address"] == "10.77.0.1"]
            assert w["nodes"] == ["node1", "node2"] and w["interfaces"] == {"node1": "cbdup0", "node2": "cbdup0"}
            assert w["fix"] == f"give MPI the network the nodes reach each other on: --tcp-include {c.subnet}"
            text = _cli("cluster", "preflight", "--hosts", "node1,node2", "--no-mpi", db=tmp_path / "r.db").stdout
            assert "warning [address] node1, node2 all have the address 10.77.0.1 (cbdup0)" in text, text
        finally:
            for node in ("node1", "node2"):
                on(c, node, "ip", "link", "del", "cbdup0")
        assert leftovers(lacking) == {}
