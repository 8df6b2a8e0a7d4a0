"""doctor (issue 11, read-only part): every rule on hand-made evidence (fires / does not / cannot
tell), evidence read from real machines' /sys+/proc snapshots, the CLI on this machine, and the
virtual cluster with one node's MTU changed."""
from __future__ import annotations

import json
import subprocess

import pytest

from clusterbench.doctor import engine as D


# --------------------------------------------------------------------------- this machine, the CLI

@pytest.mark.integration
def test_cli_doctor_json_on_this_machine(capsys) -> None:
    from clusterbench.cli import main

    assert main(["doctor", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["doctor_schema"] == 1 and len(doc["hosts"]) == 1
    node = doc["hosts"][0]
    verdict = {}
    for kind in ("findings", "cannot_tell", "passed"):
        for x in doc[kind]:
            verdict.setdefault(x["rule"], set()).add(kind)
    assert set(verdict) == {r.id for r in D.RULES}  # every rule: a finding, passed or cannot tell
    for f in doc["findings"]:
        assert f["node"] == node and f["evidence"] and f["fix"] and f["verify"]
        assert all(e["source"] for e in f["evidence"])
    for c in doc["cannot_tell"]:
        assert c["why"]
    ev = doc["evidence"][node]
    assert ev["live"] is True and ev["items"]["steal"]["readable"]
    assert ev["items"]["steal"]["value"]["since"] == "interval"


@pytest.mark.integration
def test_cli_doctor_text_and_bad_input(capsys, tmp_path, monkeypatch) -> None:
    from clusterbench.cli import main

    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("doctor: 1 node") and "\npassed: " in out
    assert out.index("cannot tell:") < out.index("\npassed: ")
    # bad input: one line, non-zero
    assert main(["doctor", "--hostfile", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "hostfile" in err and "does not exist" in err and err.count("\n") == 1
    assert main(["doctor", "--hosts", "a,b", "--hostfile", "x"]) == 2
    capsys.readouterr()
    assert main(["doctor", "--hosts", "cb-no-such-host.invalid", "--timeout", "20"]) == 3
    err = capsys.readouterr().err
    assert "cb-no-such-host.invalid" in err and err.count("\n") == 1


@pytest.mark.integration
def test_doctor_finds_the_mtu_mismatch_on_the_virtual_cluster(sim_cluster, capsys) -> None:
    """Two virtual nodes at MTU 9000; one set to 1500 inside its namespace: doctor --hosts finds the
    mismatch, names that node, and gives the fix and undo for it."""
    import time

    from clusterbench.cli import main
    from clusterbench.launch import simcluster

    t0 = time.monotonic()
    c = sim_cluster(2, mtu=9000)
    odd = c.nodes[1]
    p = subprocess.run([*simcluster.exec_prefix(odd, c), "ip", "link", "set", "dev", "cb0", "mtu", "1500"],
                       capture_output=True, text=True, timeout=10, check=False)
    assert p.returncode == 0, p.stderr
    names = [n.name for n in c.nodes]
    assert main(["doctor", "--hosts", ",".join(names), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["hosts"] == names
    (mtu,) = [f for f in doc["findings"] if f["rule"] == "mtu-mismatch"]
    assert mtu["node"] == odd.name
    assert mtu["evidence"][0]["value"] == {names[0]: 9000, names[1]: 1500}
    assert mtu["fix"] == [f"on {odd.name}: ip link set dev cb0 mtu 9000"]
    assert mtu["undo"] == [f"on {odd.name}: ip link set dev cb0 mtu 1500"]
    assert mtu["verify"] == f"run pingpong --hosts {','.join(names)}"
    # every node rule gave a verdict for both nodes, the cluster rules once
    seen = {(x["rule"], x["node"]) for k in ("findings", "cannot_tell", "passed") for x in doc[k]}
    for r in D.RULES:
        if r.scope == "node":
            assert {(r.id, n) for n in names} <= seen, r.id
    assert ("software-differs", "cluster") in {(x["rule"], x["node"]) for x in doc["passed"]}  # same machine
    # the text report names it too
    assert main(["doctor", "--hosts", ",".join(names)]) == 0
    out = capsys.readouterr().out
    assert f"[warn] {odd.name}: MTU differs between nodes (mtu-mismatch)" in out
    assert time.monotonic() - t0 < 30
