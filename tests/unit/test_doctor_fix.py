"""The pure tests (they start no process) of what tests/integration/test_doctor_fix.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench import doctor
from clusterbench.doctor import engine as D
from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.store import Store

from doctorkit import bad, healthy, ok, with_items


def _doc(nodes: dict) -> dict:
    return {"findings": [], "cannot_tell": [], "passed": [], **D.evaluate(nodes)}


def test_tcp_buffers_apply_holds_the_values_read_and_skips_read_only_globals() -> None:
    ev = with_items(sysctl__net__ipv4__tcp_rmem=ok([4096, 131072, 6291456]))
    ro = ok(212992)
    ro["read_only"] = True
    ev["items"]["sysctl.net.core.rmem_max"] = ro
    (f,) = [x for x in _doc({"n1": ev})["findings"] if x["rule"] == "tcp-buffers"]
    assert f["apply"] == {"n1": {"do": ["sysctl -w net.ipv4.tcp_rmem='4096 131072 16777216'"],
                                 "undo": ["sysctl -w net.ipv4.tcp_rmem='4096 131072 6291456'"]}}
    assert any("on the host" in c and "rmem_max" in c for c in f["fix"])  # printed, not run
    # only the read-only global is low: advice, nothing to run
    ev2 = healthy()
    ev2["items"]["sysctl.net.core.rmem_max"] = ro
    (f2,) = [x for x in _doc({"n1": ev2})["findings"] if x["rule"] == "tcp-buffers"]
    assert f2["apply"] is None


def test_cluster_rule_apply_names_the_odd_node() -> None:
    a, b, c = healthy(), healthy(), healthy()
    from doctorkit import _nic
    c["nics"]["eno1"] = _nic(mtu=1500)
    (f,) = [x for x in _doc({"a": a, "b": b, "c": c})["findings"] if x["rule"] == "mtu-mismatch"]
    assert f["apply"] == {"c": {"do": ["ip link set dev eno1 mtu 9000"], "undo": ["ip link set dev eno1 mtu 1500"]}}


def test_plan_fix_refuses_advice_unknown_rules_and_unreadable_evidence() -> None:
    hot = with_items(thermal=ok([{"zone": "z0", "type": "cpu", "temp_c": 91.0}]))
    with pytest.raises(UsageError, match="advice"):
        doctor.plan_fix("thermal-hot", doc=_doc({"n1": hot}))
    pre = with_items(kernel__preemption=ok("voluntary", "uname -v"))
    with pytest.raises(UsageError, match="needs a reboot"):
        doctor.plan_fix("preemption", doc=_doc({"n1": pre}))
    pre_dbg = with_items(kernel__preemption=ok("full", "/sys/kernel/debug/sched/preempt"))
    plan = doctor.plan_fix("preemption", doc=_doc({"n1": pre_dbg}))
    assert plan["actions"]["n1"] == {"do": ["echo none > /sys/kernel/debug/sched/preempt"],
                                     "undo": ["echo full > /sys/kernel/debug/sched/preempt"]}
    with pytest.raises(UsageError, match="unknown rule 'nope'"):
        doctor.plan_fix("nope", doc=_doc({"n1": healthy()}))
    with pytest.raises(EnvironmentProblem, match="cannot tell"):
        doctor.plan_fix("thp", doc=_doc({"n1": with_items(thp__enabled=bad("no THP"))}))
    assert doctor.plan_fix("thp", doc=_doc({"n1": healthy()}))["actions"] == {}


def test_softirq_rule_on_deltas() -> None:
    def load(rx, tx=(0, 0, 0, 0)):
        return with_items(**{"softirqs__load": ok({"NET_RX": list(rx), "NET_TX": list(tx), "seconds": 5.0,
                                                   "load": "clusterbench run bw"})})
    res = D.rule("softirq-concentrated").check(load([9000, 100, 50, 0]))
    assert isinstance(res, D.Hit) and "98% of 9150 on CPU 0" in res.summary
    assert D.rule("softirq-concentrated").check(load([3000, 2900, 3100, 2800])) is None
    res = D.rule("softirq-concentrated").check(load([300, 10, 0, 0]))
    assert isinstance(res, D.CannotTell) and "too little" in res.why
    # cpus offline are left out of the share
    ev = load([0, 0, 9000, 8000])
    ev["items"]["cpus.online"] = ok([2, 3])
    assert D.rule("softirq-concentrated").check(ev) is None


def test_benchmark_argv_checks() -> None:
    assert doctor.benchmark_argv("run hpl --n 2000") == ["run", "hpl", "--n", "2000"]
    for bad_text, msg in (("hpl", "not a clusterbench run"), ("run nosuch", "unknown benchmark"),
                          ("run stream --no-store", "set by --verify"), ("run stream 'x", "quote")):
        with pytest.raises(UsageError, match=msg):
            doctor.benchmark_argv(bad_text)


def test_cli_fix_without_yes_changes_nothing(capsys, tmp_path, monkeypatch) -> None:
    from clusterbench.cli import main

    monkeypatch.setenv("CLUSTERBENCH_DB", str(tmp_path / "r.db"))
    monkeypatch.setattr(doctor.fixes, "diagnose", lambda *a, **k: _doc(
        {"n1": with_items(thp__enabled=ok("never"))}))
    assert main(["doctor", "--fix", "thp"]) == 0
    out = capsys.readouterr().out
    assert "would run (nothing changed; add --yes" in out and "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled" in out
    assert not (tmp_path / "r.db").exists() or Store(tmp_path / "r.db").fixes() == []
    assert main(["doctor", "--fix", "nosuch"]) == 2
    assert main(["doctor", "--benchmark", "run hpl"]) == 2
    assert main(["doctor", "--verify", "thp"]) == 2  # no --benchmark
    assert main(["doctor", "--undo", "nothing-like-it"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 4 and "no fix 'nothing-like-it'" in err
