"""doctor --fix / --undo / --verify / --during: the fix is recorded before anything changes, a failing
command is rolled back and forgotten, --undo writes back exactly what was read; on the virtual
cluster a namespace with RPS off and small TCP buffers is found, fixed and restored, an MTU 1500
among 9000 is fixed and undone, and --verify runs before/after and compares."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from clusterbench import doctor
from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.store import Store

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# --------------------------------------------------------------------------- store + apply/undo, for real

@pytest.mark.integration  # runs sh
def test_fix_applies_records_and_undoes_exactly(tmp_path: Path) -> None:
    f = tmp_path / "setting"
    f.write_text("old 1\n")
    st = Store(tmp_path / "r.db")
    plan = {"rule": "thp", "title": "t", "hosts": None, "findings": [{"summary": "s"}], "advice": [],
            "actions": {"here": {"do": [f"echo new > {f}"], "undo": [f"echo 'old 1' > {f}"]}}}
    import clusterbench.doctor.fixes as mod
    orig = mod.plan_after
    mod.plan_after = lambda rule, hosts: []  # the rule's re-read is the machine's, not this file's
    try:
        rec = doctor.apply_fix(plan, st)
        assert f.read_text() == "new\n" and rec["status"] == "applied" and rec["rule"] == "thp"
        assert [x["id"] for x in st.fixes()] == [rec["id"]]
        assert st.get_fix(rec["id"][:8])["actions"] == plan["actions"]  # a unique prefix finds it
        done = doctor.undo_fix(st, rec["id"])
        assert f.read_text() == "old 1\n" and done["status"] == "undone" and done["ended"]
        with pytest.raises(UsageError, match="already undone"):
            doctor.undo_fix(st, rec["id"])
        # a failing second command: the first is rolled back, nothing is left in the store
        plan["actions"] = {"here": {"do": [f"echo new > {f}", "exit 3"], "undo": [f"echo 'old 1' > {f}"]}}
        with pytest.raises(EnvironmentProblem, match="rolled back"):
            doctor.apply_fix(plan, st)
        assert f.read_text() == "old 1\n" and len(st.fixes()) == 1
        with pytest.raises(UsageError, match="no fix 'zzz'"):
            st.get_fix("zzz")
    finally:
        mod.plan_after = orig


# --------------------------------------------------------------------------- the virtual cluster

def _ns(c, node, *cmd: str) -> subprocess.CompletedProcess:
    from clusterbench.launch import simcluster

    p = subprocess.run([*simcluster.exec_prefix(node, c), *cmd], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    return p


def _read(c, node, path: str) -> str:
    return _ns(c, node, "cat", path).stdout.strip()


@pytest.mark.integration
def test_rps_and_tcp_buffers_found_fixed_and_restored(sim_cluster, capsys, tmp_path, monkeypatch) -> None:
    """Three nodes; the other two get RPS on and the FAQ's tcp_rmem/tcp_wmem; the odd one keeps RPS off
    and small buffers. doctor names both on that node only; --fix then --undo gives back the exact
    previous values."""
    from clusterbench.cli import main

    monkeypatch.setenv("CLUSTERBENCH_DB", str(tmp_path / "r.db"))
    c = sim_cluster(3)
    names = [n.name for n in c.nodes]
    odd = names[2]
    rps = "/sys/class/net/cb0/queues/rx-0/rps_cpus"
    small_r, small_w = "4096 131072 1048576", "4096 16384 1048576"
    for n in names[:2]:
        _ns(c, n, "sh", "-c", f"echo 1 > {rps}")
        _ns(c, n, "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 87380 16777216", "net.ipv4.tcp_wmem=4096 65536 16777216")
    _ns(c, odd, "sh", "-c", f"echo 0 > {rps}")
    _ns(c, odd, "sysctl", "-qw", f"net.ipv4.tcp_rmem={small_r}", f"net.ipv4.tcp_wmem={small_w}")
    before = {"rps": _read(c, odd, rps), "rmem": _read(c, odd, "/proc/sys/net/ipv4/tcp_rmem"),
              "wmem": _read(c, odd, "/proc/sys/net/ipv4/tcp_wmem")}
    hosts = ",".join(names)

    assert main(["doctor", "--hosts", hosts, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rps_hits = [f for f in doc["findings"] if f["rule"] == "rps-single-queue"]
    assert [f["node"] for f in rps_hits] == [odd]
    tcp = {f["node"]: f for f in doc["findings"] if f["rule"] == "tcp-buffers"}
    def low(n: str) -> set[str]:
        return {e["key"] for e in tcp[n]["evidence"]} if n in tcp else set()
    assert {"sysctl.net.ipv4.tcp_rmem", "sysctl.net.ipv4.tcp_wmem"} <= low(odd)
    for n in names[:2]:  # at most the host's global (read-only here) values, never the namespace's own
        assert not low(n) & {"sysctl.net.ipv4.tcp_rmem", "sysctl.net.ipv4.tcp_wmem"}

    for rule in ("tcp-buffers", "rps-single-queue"):
        assert main(["doctor", "--hosts", hosts, "--fix", rule, "--yes", "--json"]) == 0
        res = json.loads(capsys.readouterr().out)["fix"]
        assert list(res["actions"]) == [odd], res["actions"]
        assert res["status"] == "applied"
    assert _read(c, odd, rps) != before["rps"] and int(_read(c, odd, rps), 16) != 0
    assert _read(c, odd, "/proc/sys/net/ipv4/tcp_rmem").split()[2] == "16777216"
    assert main(["doctor", "--hosts", hosts, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not [f for f in doc["findings"] if f["rule"] == "rps-single-queue"]

    st = Store(tmp_path / "r.db", readonly=True)
    ids = [f["id"] for f in st.fixes(status="applied")]
    assert len(ids) == 2
    for fid in reversed(ids):
        assert main(["doctor", "--undo", fid]) == 0
    capsys.readouterr()
    after = {"rps": _read(c, odd, rps), "rmem": _read(c, odd, "/proc/sys/net/ipv4/tcp_rmem"),
             "wmem": _read(c, odd, "/proc/sys/net/ipv4/tcp_wmem")}
    assert after == before
    assert [f["status"] for f in Store(tmp_path / "r.db", readonly=True).fixes()] == ["undone", "undone"]


@pytest.mark.integration
def test_mtu_fix_verify_and_during(sim_cluster, mpi, capsys, tmp_path, monkeypatch) -> None:
    """MTU 1500 on one node among 9000: --fix mtu-mismatch sets 9000 there, --undo puts 1500 back;
    --verify jumbo-unused on two nodes at 1500 runs bw before and after and compares (kept or undone
    as --keep says); --during mpi reads softirq deltas on the nodes under load."""
    from clusterbench.cli import main

    monkeypatch.setenv("CLUSTERBENCH_DB", str(tmp_path / "r.db"))
    c = sim_cluster(2, mtu=9000)
    names = [n.name for n in c.nodes]
    hosts = ",".join(names)
    _ns(c, names[1], "ip", "link", "set", "dev", "cb0", "mtu", "1500")
    assert main(["doctor", "--hosts", hosts, "--fix", "mtu-mismatch", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "mtu-mismatch now: passes" in out
    assert _read(c, names[1], "/sys/class/net/cb0/mtu") == "9000"
    (fid,) = [f["id"] for f in Store(tmp_path / "r.db", readonly=True).fixes()]
    assert main(["doctor", "--undo", fid]) == 0
    assert _read(c, names[1], "/sys/class/net/cb0/mtu") == "1500"
    capsys.readouterr()

    # both at 1500: jumbo-unused fires on both; verify with a short bw at 4 MiB over TCP, never kept
    _ns(c, names[0], "ip", "link", "set", "dev", "cb0", "mtu", "1500")
    bench = f"run bw --hosts {hosts} --transport tcp --sizes 4194304 --time-budget 0.2 --direction uni"
    assert main(["doctor", "--hosts", hosts, "--verify", "jumbo-unused", "--benchmark", bench, "--repeat", "2",
                 "--keep", "never", "--yes", "--allow-root", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["decision"]["kept"] is False and res["fix"]["status"] == "undone"
    assert res["comparison"]["matches"], "the two sides' bw figures were matched"
    assert [_read(c, n, "/sys/class/net/cb0/mtu") for n in names] == ["1500", "1500"]
    st = Store(tmp_path / "r.db", readonly=True)
    assert len(st.select_runs(res["decision"]["tags"]["before"])) == 2
    assert len(st.select_runs(res["decision"]["tags"]["after"])) == 2

    assert main(["doctor", "--hosts", hosts, "--during", "mpi", "--allow-root", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    load = doc["evidence"][names[0]]["items"]["softirqs.load"]
    assert load["readable"] and sum(load["value"]["NET_RX"]) > 0 and "run bw" in doc["during"]["load"]
    assert ("softirq-concentrated" in {x["rule"] for k in ("findings", "passed", "cannot_tell") for x in doc[k]})
