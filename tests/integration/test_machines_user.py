"""Separate machines reached as an ordinary user, as a Raspberry Pi cluster is (user ``pi``, key login,
no root on the nodes): the head's ``~/.ssh/config`` says ``User pi``, each machine has that user with
the head's key in its ``authorized_keys``. ``cluster install`` puts clusterbench in that user's home,
``preflight`` is ready, an MPI run across the machines is stored on the head, and nothing ran as root
on a node (root's home there stays empty). The emulated tier."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from machinekit import leftovers, on, set_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USER = "pi"


def _cli(*args: str, db: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    return subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def as_user(tmp_path_factory):
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.launch import machines as M
    from clusterbench.launch import simcluster

    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        pytest.skip("the virtual cluster needs root")
    restore_env = set_env(CLUSTERBENCH_SIM_STATE=str(tmp_path_factory.mktemp("sim-user")))
    try:
        try:
            c = simcluster.up(2, machines=True)
        except EnvironmentProblem as exc:
            pytest.skip(f"machines unusable here: {exc}")
        ssh = M.ssh_dir(c)
        key = (ssh / "id_ed25519.pub").read_text().strip()
        for n in c.nodes:  # what the nodes' administrator did once: a user, the head's key
            p = on(c, n.name, "sh", "-c", f"""set -e
useradd -m -s /bin/sh {USER}
mkdir -p /home/{USER}/.ssh && printf '%s\\n' '{key}' > /home/{USER}/.ssh/authorized_keys
chown -R {USER}:{USER} /home/{USER}/.ssh && chmod 700 /home/{USER}/.ssh && chmod 600 /home/{USER}/.ssh/authorized_keys""")
            assert p.returncode == 0, p.stderr
        cfg = ssh / "config"  # the head's user: every node as pi
        cfg.write_text(f"Host node*\n    User {USER}\n" + cfg.read_text())
        yield c
    finally:
        simcluster.down()
        restore_env()


def test_install_preflight_and_a_run_as_an_ordinary_user_on_the_nodes(as_user, tmp_path):
    c = as_user
    names = ",".join(n.name for n in c.nodes)
    db = tmp_path / "r.db"
    p = _cli("cluster", "install", "--hosts", names, db=db)
    assert p.returncode == 0, p.stdout + p.stderr
    p = _cli("cluster", "preflight", "--hosts", names, "--allow-root", "--json", db=db, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    pre = json.loads(p.stdout)
    assert pre["ok"] and pre["mpi"]["hello"]["ok"], pre["problems"]
    p = _cli("run", "pingpong", "--hosts", names, "--sizes", "8,65536", "--allow-root", "--json", db=db)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    assert doc["run"]["status"] == "complete" and {r["metric"] for r in doc["results"]} >= {"latency", "bandwidth"}
    for n in c.nodes:
        who = on(c, n.name, "sh", "-c", f"ls /home/{USER}/.local/share/clusterbench; ls -A /root").stdout.split()
        assert "installed.json" in who and "venv" in who, (n.name, who)
        assert ".local" not in who and ".cache" not in who, f"something ran as root on {n.name}: {who}"
    assert leftovers(c) == {}
