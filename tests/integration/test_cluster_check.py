"""Cluster consistency: diff() on synthetic probes, nic_settings() live, gather_probes() on the
virtual cluster and over ssh (unreachable host)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from clusterbench.analysis import consistency
from clusterbench.cluster import check as cluster_check
from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.launch import remote
from clusterbench.probe import network

IS_ROOT = os.geteuid() == 0


# --------------------------------------------------------------------------- nic_settings


@pytest.mark.integration
def test_nic_settings_live() -> None:
    d = network.nic_settings()
    json.dumps(d)
    nics = {n["name"]: n for n in d["nics"]}
    assert "lo" in nics and isinstance(nics["lo"]["mtu"], int) and nics["lo"]["mtu"] > 0
    assert set(network.SYSCTLS) == set(d["sysctls"])
    for key, value in d["sysctls"].items():
        assert value is not None or f"network.sysctls.{key}" in d["unknown"]
    for n in d["nics"]:
        assert n["offloads"] is not None or f"network.nics.{n['name']}.offloads" in d["unknown"]
        assert n["coalescing"] is not None or f"network.nics.{n['name']}.coalescing" in d["unknown"]


# --------------------------------------------------------------------------- remote


@pytest.mark.integration
def test_unreachable_ssh_host_is_one_line_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    host = "cb-no-such-host.invalid"
    with pytest.raises(EnvironmentProblem) as exc:
        remote.gather_probes([host], timeout=20)
    msg = str(exc.value)
    assert host in msg and "\n" not in msg
    if shutil.which("ssh") is None:
        assert "ssh is not installed" in msg
    # with keep_going the failure is recorded per host
    got = remote.gather_probes([host], timeout=20, keep_going=True)
    assert host in got[host]["error"] and "\n" not in got[host]["error"]
    # no ssh on PATH: said so
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match="ssh is not installed"):
        remote.gather_probes([host])
    with pytest.raises(UsageError):
        remote.gather_probes(["-oProxyCommand=x"])


@pytest.mark.integration
def test_gather_probes_localhost(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    got = remote.gather_probes(["localhost"], timeout=60)
    assert got["localhost"]["probe"]["probe_schema"] == 1
    assert any(n["name"] == "lo" for n in got["localhost"]["network"]["nics"])


@pytest.mark.integration
def test_check_on_the_virtual_cluster(sim_cluster) -> None:
    """Two sim-cluster nodes alike, then one node's tcp_rmem changed in its namespace: found."""
    from clusterbench.launch import simcluster

    c = sim_cluster(2)
    names = [n.name for n in c.nodes]
    first = cluster_check.check(names, timeout=60)
    assert first["hosts"] == names and first["errors"] == {}
    for h in names:
        nics = {n["name"]: n for n in first["probes"][h]["network"]["nics"]}
        assert nics["cb0"]["mtu"] == c.mtu  # the node's own namespace view
    assert first["differences"] == [], first["differences"]
    cmd = [*simcluster.exec_prefix(c.nodes[1], c), "sysctl", "-w", "net.ipv4.tcp_rmem=4096 65536 1048576"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    if p.returncode != 0:
        pytest.skip(f"net.ipv4.tcp_rmem is not per network namespace here: {p.stderr.strip()}")
    second = cluster_check.check(names, timeout=60)
    diffs = {d["key"]: d for d in second["differences"]}
    assert set(diffs) == {"network.sysctls.net.ipv4.tcp_rmem"}
    assert diffs["network.sysctls.net.ipv4.tcp_rmem"]["values"][names[1]] == [4096, 65536, 1048576]
    assert diffs["network.sysctls.net.ipv4.tcp_rmem"]["values"][names[0]] != [4096, 65536, 1048576]
    # short names work too, and a missing node is a one-line error naming it
    assert set(remote.gather_probes(["n1", "n2"], timeout=60)) == {"n1", "n2"}
    with pytest.raises(EnvironmentProblem, match=f"{c.prefix}n7"):
        remote.gather_probes([f"{c.prefix}n7"], timeout=20)


def _fake_ssh(tmp_path, keep_pythonpath: bool):
    """An ``ssh`` that checks its options and runs the remote command here with /bin/sh, as sshd does."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    unset = "" if keep_pythonpath else "unset PYTHONPATH; cd /\n"
    (bindir / "ssh").write_text(
        "#!/bin/sh\n"
        '[ "$1 $2 $3 $4" = "-o BatchMode=yes -o ConnectTimeout=5" ] || { echo "bad options: $*" >&2; exit 255; }\n'
        'shift 4\n'
        # the shared connection's options (remote.SHARE_OPTIONS) may follow, as -o NAME=VALUE pairs
        'while [ "$1" = "-o" ]; do shift 2; done\n'
        '[ "$#" -eq 2 ] || { echo "expected HOST COMMAND, got $#" >&2; exit 255; }\n'
        + unset + 'exec /bin/sh -c "$2"\n')
    (bindir / "ssh").chmod(0o755)
    return bindir


@pytest.mark.integration
def test_gather_probes_over_ssh_with_a_stand_in_ssh(monkeypatch, tmp_path) -> None:
    """The ssh path end to end: options, one quoted remote command, JSON back; and a host without
    clusterbench gives a one-line error saying so."""
    import sys
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    monkeypatch.setenv("CLUSTERBENCH_REMOTE_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", remote.SRC_DIR)
    bindir = _fake_ssh(tmp_path, keep_pythonpath=True)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    got = remote.gather_probes(["node-a.example", "user@node-b.example:4"], timeout=60)
    assert set(got) == {"node-a.example", "user@node-b.example"}
    assert consistency.diff(got) == []  # same machine twice
    (bindir / "ssh").unlink()
    _fake_ssh(tmp_path, keep_pythonpath=False)
    # a host whose python has no clusterbench: -S drops site-packages (where a venv may hold it)
    bare = tmp_path / "bare-python"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    monkeypatch.setenv("CLUSTERBENCH_REMOTE_PYTHON", str(bare))
    with pytest.raises(EnvironmentProblem, match="clusterbench is not installed on node-a.example") as exc:
        remote.gather_probes(["node-a.example"], timeout=60)
    assert "\n" not in str(exc.value)


@pytest.mark.integration
def test_a_host_that_hangs_is_cut_off(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pidfile = tmp_path / "pid"
    # an ssh that says its version (as a real one does at once; a hang there cost this test 10 s of
    # `ssh -V`'s own bound) and hangs on connecting
    (bindir / "ssh").write_text(f"#!/bin/sh\n[ \"$1\" = -V ] && {{ echo OpenSSH_9.2p1 >&2; exit 0; }}\n"
                                f"sleep 30 &\necho $! > {pidfile}\nwait\n")
    (bindir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    with pytest.raises(EnvironmentProblem, match=r"slow\.example did not answer within 1 s"):
        remote.gather_probes(["slow.example"], timeout=1)
    pid = int(pidfile.read_text())
    try:  # the whole session was killed: nothing left running (a zombie awaiting its reaper is dead)
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z", "X")


# --------------------------------------------------------------------------- --keep-going report (issue 14 defect 10)


@pytest.mark.integration
def test_cli_keep_going_with_one_host_down(monkeypatch, tmp_path, capsys) -> None:
    from clusterbench.cli import main

    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    bad = "cb-no-such-host.invalid"
    # one host answered: the report is printed, but nothing was compared, so the exit is 3 (not 0)
    assert main(["cluster", "check", "--hosts", f"localhost,{bad}", "--keep-going", "--timeout", "30"]) == 3
    out = capsys.readouterr().out
    assert out.startswith("1 of 2 hosts answered: localhost\n")
    assert f"did not answer: {bad}" in out
    assert "no differences" not in out and "2 hosts compared" not in out
