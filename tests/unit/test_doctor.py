"""The pure tests (they start no process) of what tests/integration/test_doctor.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from clusterbench.doctor import engine as D
from clusterbench.doctor import evidence as E

from doctorkit import _nic, bad, healthy, ok, with_items


#: hwloc's snapshots of real machines, vendored with hwloc's licence (tests/data/sysfs/README.md)
FIXTURES = Path(os.environ.get("CLUSTERBENCH_FIXTURES", Path(__file__).resolve().parents[1] / "data" / "sysfs"))
TARBALLS = sorted(FIXTURES.glob("*.tar.bz2")) if FIXTURES.is_dir() else []


def run_rule(rule_id: str, ev) -> object:
    r = D.rule(rule_id)
    return r.check(ev)


def fired(res) -> list[D.Hit]:
    assert isinstance(res, (D.Hit, list)), res
    return res if isinstance(res, list) else [res]


NODE_RULES = [r.id for r in D.RULES if r.scope == "node" and not r.needs_load]


@pytest.mark.parametrize("rule_id", NODE_RULES)
def test_no_node_rule_fires_on_a_healthy_node(rule_id) -> None:
    assert run_rule(rule_id, healthy()) is None


def test_every_rule_is_complete_data() -> None:
    ids = [r.id for r in D.RULES]
    assert len(ids) == len(set(ids))
    for r in D.RULES:
        assert r.title and r.why and r.fix and r.verify and r.reads and r.scope in ("node", "cluster")
        assert r.severity in ("warn", "info")
    json.dumps([r.describe() for r in D.RULES])
    # the ones the brief names
    assert {"tcp-buffers", "cpu-governor", "cpu-boost", "preemption", "thp", "swap-in-use", "numa-balancing",
            "rps-single-queue", "coalescing-off", "mtu-mismatch", "jumbo-unused", "steal-time", "thermal-hot",
            "openblas-generic", "software-differs", "softirq-concentrated"} <= set(ids)


def test_tcp_buffers() -> None:
    ev = with_items(sysctl__net__core__rmem_max=ok(212992, "/proc/sys/net/core/rmem_max"),
                    sysctl__net__ipv4__tcp_wmem=ok([4096, 16384, 4194304], "/proc/sys/net/ipv4/tcp_wmem"))
    (h,) = fired(run_rule("tcp-buffers", ev))
    assert "16777216" in h.summary and "net.core.rmem_max" in h.summary and "net.ipv4.tcp_wmem" in h.summary
    assert "sysctl -w net.core.rmem_max=16777216" in h.fix
    assert "sysctl -w net.ipv4.tcp_wmem='4096 65536 16777216'" in h.fix
    assert h.undo == ["sysctl -w net.core.rmem_max=212992", "sysctl -w net.ipv4.tcp_wmem='4096 16384 4194304'"]
    assert {e["source"] for e in h.evidence} == {"/proc/sys/net/core/rmem_max", "/proc/sys/net/ipv4/tcp_wmem"}
    # larger than the FAQ is never lowered
    ev = with_items(sysctl__net__ipv4__tcp_rmem=ok([4096, 131072, 33554432]))
    assert run_rule("tcp-buffers", ev) is None
    ev = with_items(sysctl__net__ipv4__tcp_rmem=ok([4096, 65536, 33554432]))
    assert fired(run_rule("tcp-buffers", ev))[0].fix == ["sysctl -w net.ipv4.tcp_rmem='4096 87380 33554432'"]
    # inside a namespace the net.core ones may be invisible: cannot tell, never ok
    res = run_rule("tcp-buffers", with_items(sysctl__net__core__rmem_max=bad("not per namespace")))
    assert isinstance(res, D.CannotTell) and "not per namespace" in res.why
    assert "Open MPI" in D.rule("tcp-buffers").why and "open-mpi.org" in D.rule("tcp-buffers").why


def test_governor() -> None:
    (h,) = fired(run_rule("cpu-governor", with_items(cpufreq__governors=ok({"ondemand": [0, 1], "performance": [2, 3]}))))
    assert "ondemand on 2 CPUs" in h.summary
    assert "echo performance" in h.fix[0]
    assert h.undo == ["echo ondemand > /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                      "echo ondemand > /sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"]
    (h,) = fired(run_rule("cpu-governor", with_items(cpufreq__governors=ok({"powersave": [0, 1, 2, 3]}))))
    assert "echo powersave > $f" in h.undo[0]
    res = run_rule("cpu-governor", with_items(cpufreq__governors=bad("no cpufreq in /sys")))
    assert isinstance(res, D.CannotTell) and "no cpufreq" in res.why


def test_boost() -> None:
    (h,) = fired(run_rule("cpu-boost", with_items(cpufreq__boost=ok(True, "/sys/devices/system/cpu/intel_pstate/no_turbo"))))
    assert h.fix == ["echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo"]
    assert h.undo == ["echo 0 > /sys/devices/system/cpu/intel_pstate/no_turbo"]
    (h,) = fired(run_rule("cpu-boost", with_items(cpufreq__boost=ok(True, "/sys/devices/system/cpu/cpufreq/boost"))))
    assert h.undo == ["echo 1 > /sys/devices/system/cpu/cpufreq/boost"]
    assert isinstance(run_rule("cpu-boost", with_items(cpufreq__boost=bad())), D.CannotTell)


def test_preemption() -> None:
    (h,) = fired(run_rule("preemption", with_items(kernel__preemption=ok("voluntary", "/sys/kernel/debug/sched/preempt"))))
    assert h.severity == "info" and h.fix == ["echo none > /sys/kernel/debug/sched/preempt"]
    assert h.undo == ["echo voluntary > /sys/kernel/debug/sched/preempt"]
    (h,) = fired(run_rule("preemption", with_items(kernel__preemption=ok("full", "uname -v (PREEMPT)"))))
    assert h.severity == "warn" and "CONFIG_PREEMPT_NONE" in h.fix[0]
    (h,) = fired(run_rule("preemption", with_items(kernel__preemption=ok("full", "/proc/cmdline preempt="))))
    assert "preempt=none" in h.fix[0] and "preempt=full" in h.undo[0]
    assert D.rule("preemption").needs_reboot
    assert isinstance(run_rule("preemption", with_items(kernel__preemption=bad("PREEMPT_DYNAMIC"))), D.CannotTell)


def test_preemption_from_kernel_strings() -> None:
    assert E.preemption_from("#1 SMP PREEMPT_DYNAMIC", "ro quiet preempt=full", None)[0] == "full"
    assert E.preemption_from("#1 SMP PREEMPT_DYNAMIC", "ro quiet", None)[0] is None
    assert E.preemption_from("#1 SMP PREEMPT_DYNAMIC", "", "none voluntary (full) lazy")[0] == "full"
    assert E.preemption_from("#1 SMP PREEMPT_RT", "", None)[0] == "rt"
    assert E.preemption_from("#1 SMP PREEMPT Debian", "", None)[0] == "full"
    model, why = E.preemption_from("#1 SMP Debian 6.1", "", None)
    assert model is None and "voluntary or none" in why


def test_thp() -> None:
    (h,) = fired(run_rule("thp", with_items(thp__enabled=ok("never"))))
    assert h.severity == "info" and "madvise" in h.fix[0] and "never" in h.undo[0]
    (h,) = fired(run_rule("thp", with_items(thp__enabled=ok("always"), thp__defrag=ok("always"))))
    assert h.fix == ["echo madvise > /sys/kernel/mm/transparent_hugepage/defrag"]
    assert run_rule("thp", with_items(thp__enabled=ok("always"), thp__defrag=ok("defer+madvise"))) is None
    assert isinstance(run_rule("thp", with_items(thp__enabled=bad())), D.CannotTell)


def test_swap() -> None:
    (h,) = fired(run_rule("swap-in-use", with_items(swap=ok({"total_kb": 2 << 20, "free_kb": (2 << 20) - 204800,
                                                              "used_kb": 204800, "devices": []}))))
    assert "200 MiB of swap in use" in h.summary and h.undo == ["swapon -a"]
    assert isinstance(run_rule("swap-in-use", with_items(swap=bad())), D.CannotTell)


def test_numa_balancing() -> None:
    (h,) = fired(run_rule("numa-balancing", with_items(sysctl__kernel__numa_balancing=ok(1))))
    assert h.fix == ["sysctl -w kernel.numa_balancing=0"] and h.undo == ["sysctl -w kernel.numa_balancing=1"]
    assert run_rule("numa-balancing", with_items(sysctl__kernel__numa_balancing=ok(1), numa__nodes=ok(1))) is None
    assert isinstance(run_rule("numa-balancing", with_items(sysctl__kernel__numa_balancing=ok(1), numa__nodes=bad())),
                      D.CannotTell)
    assert isinstance(run_rule("numa-balancing", with_items(sysctl__kernel__numa_balancing=bad())), D.CannotTell)


def test_rps_single_queue() -> None:
    ev = with_items(sysctl__net__core__rps_sock_flow_entries=ok(0))
    ev["nics"] = {"eth0": _nic(rx_queues=1, rps={"rx-0": []}, rfs_flow_cnt=0)}
    (h,) = fired(run_rule("rps-single-queue", ev))
    assert h.fix[0] == "echo f > /sys/class/net/eth0/queues/rx-0/rps_cpus"
    assert "sysctl -w net.core.rps_sock_flow_entries=32768" in h.fix
    assert h.undo == ["echo 0 > /sys/class/net/eth0/queues/rx-0/rps_cpus", "sysctl -w net.core.rps_sock_flow_entries=0",
                      "echo 0 > /sys/class/net/eth0/queues/rx-0/rps_flow_cnt"]
    ev["nics"] = {"eth0": _nic(rx_queues=1, rps={"rx-0": [0, 1, 2, 3]})}
    assert run_rule("rps-single-queue", ev) is None  # RPS on
    ev["nics"] = {"eth0": _nic(rx_queues=8)}
    assert run_rule("rps-single-queue", ev) is None  # RSS spreads flows
    ev["nics"] = {"eth0": {**_nic(rx_queues=1), "rps_cpus": bad("kernel without CONFIG_RPS")}}
    res = run_rule("rps-single-queue", ev)
    assert isinstance(res, D.CannotTell) and "CONFIG_RPS" in res.why and "eth0" in res.why
    ev["nics"] = {}
    assert isinstance(run_rule("rps-single-queue", ev), D.CannotTell)


def test_coalescing() -> None:
    ev = healthy()
    ev["nics"]["eno1"] = _nic(coalescing={"adaptive_rx": False, "adaptive_tx": False, "rx_usecs": 0, "rx_frames": 1})
    (h,) = fired(run_rule("coalescing-off", ev))
    assert h.fix == ["ethtool -C eno1 adaptive-rx on"]
    assert h.undo == ["ethtool -C eno1 adaptive-rx off rx-usecs 0 rx-frames 1"]
    ev["nics"]["eno1"] = _nic(coalescing={"adaptive_rx": False, "rx_usecs": 8, "rx_frames": 0})
    assert run_rule("coalescing-off", ev) is None
    ev["nics"]["eno1"] = {**_nic(), "coalescing": bad("ethtool is not installed")}
    res = run_rule("coalescing-off", ev)
    assert isinstance(res, D.CannotTell) and "ethtool is not installed" in res.why


def test_jumbo_unused() -> None:
    ev = healthy()
    ev["nics"]["eno1"] = _nic(mtu=1500, max_mtu=9216)
    (h,) = fired(run_rule("jumbo-unused", ev))
    assert h.severity == "info" and h.fix[0].startswith("ip link set dev eno1 mtu 9000")
    assert h.undo == ["ip link set dev eno1 mtu 1500"]
    ev["nics"]["eno1"] = _nic(mtu=1500, max_mtu=1500)
    assert run_rule("jumbo-unused", ev) is None
    ev["nics"]["eno1"] = {**_nic(mtu=1500), "max_mtu": bad("needs the running machine")}
    assert isinstance(run_rule("jumbo-unused", ev), D.CannotTell)


def test_steal() -> None:
    (h,) = fired(run_rule("steal-time", with_items(steal=ok({"percent": 12.5, "interval_s": 1.0, "since": "interval"}),
                                                    hypervisor=ok("kvm"))))
    assert "12.5%" in h.summary and "5%" in h.summary
    assert run_rule("steal-time", with_items(steal=ok({"percent": 4.9, "interval_s": 1.0, "since": "interval"}))) is None
    assert isinstance(run_rule("steal-time", with_items(steal=bad("no steal column"))), D.CannotTell)


def test_only_a_rule_that_reads_stolen_time_waits_for_it() -> None:
    """--fix, --undo and --verify judge one rule: gathering waits the stolen-time interval (a second on
    every node, each time) only when that rule reads it; the node's snippet carries the interval."""
    from clusterbench.doctor import fixes

    assert E.snippet() == E.SNIPPET and "steal_interval" not in E.SNIPPET
    assert "gather(steal_interval=0.0)" in E.snippet(0)
    assert fixes.steal_interval_for(D.rule("steal-time")) is None
    assert {fixes.steal_interval_for(r) for r in D.RULES if "steal" not in r.reads} == {0.0}


def test_thermal() -> None:
    zones = [{"zone": "thermal_zone0", "type": "cpu-thermal", "temp_c": 83.2},
             {"zone": "thermal_zone1", "type": "gpu", "temp_c": 60.0}]
    (h,) = fired(run_rule("thermal-hot", with_items(thermal=ok(zones))))
    assert "thermal_zone0 (cpu-thermal) 83.2 °C" in h.summary and "thermal_zone1" not in h.summary
    assert isinstance(run_rule("thermal-hot", with_items(thermal=bad("no thermal zone"))), D.CannotTell)


def test_openblas_generic() -> None:
    (h,) = fired(run_rule("openblas-generic", with_items(blas__openblas_core=ok({"path": "/x/libopenblas.so.0",
                                                                                 "core": "Prescott"}))))
    assert h.fix[0].startswith("export OPENBLAS_CORETYPE=SkylakeX") and h.undo == ["unset OPENBLAS_CORETYPE"]
    assert run_rule("openblas-generic", with_items(blas__openblas_core=ok({"path": None, "core": None}))) is None
    assert isinstance(run_rule("openblas-generic", with_items(blas__openblas_core=bad("snapshot"))), D.CannotTell)


def test_softirqs_needs_load() -> None:
    r = D.rule("softirq-concentrated")
    assert r.needs_load
    res = r.check(healthy())
    assert isinstance(res, D.CannotTell) and "--during" in res.why


def test_mtu_mismatch_cluster_rule() -> None:
    a, b, c = healthy(), healthy(), healthy()
    b["nics"]["eno1"] = _nic(mtu=1500)
    (h,) = fired(D.rule("mtu-mismatch").check({"n1": a, "n2": b, "n3": c}))
    assert h.node == "n2" and "n1=9000, n2=1500, n3=9000" in h.summary
    assert h.fix == ["on n2: ip link set dev eno1 mtu 9000"] and h.undo == ["on n2: ip link set dev eno1 mtu 1500"]
    assert D.rule("mtu-mismatch").check({"n1": a, "n3": c}) is None
    assert isinstance(D.rule("mtu-mismatch").check({"n1": a}), D.CannotTell)
    b["nics"] = {"eth7": _nic()}
    assert isinstance(D.rule("mtu-mismatch").check({"n1": a, "n2": b}), D.CannotTell)


def test_software_differs_cluster_rule() -> None:
    a, b = healthy(), healthy()
    assert D.rule("software-differs").check({"n1": a, "n2": b}) is None
    b["items"]["software"] = ok({**a["items"]["software"]["value"], "kernel": "5.10.0-28-amd64",
                                 "mpi": [{"name": "MPICH", "version": "4.0.2"}]})
    b["items"]["blas.openblas_core"] = ok({"path": "/usr/lib/libopenblas.so.0", "core": "Prescott"})
    hits = fired(D.rule("software-differs").check({"n1": a, "n2": b}))
    keys = {h.evidence[0]["key"] for h in hits}
    assert keys == {"environment.kernel", "environment.mpi", "blas.openblas_core"}
    assert all(h.node == "n1,n2" for h in hits)
    b["items"]["software"] = bad("snapshot")
    assert isinstance(D.rule("software-differs").check({"n1": a, "n2": b}), D.CannotTell)


def test_evaluate_sorts_every_rule_and_node() -> None:
    a, b = healthy(), copy.deepcopy(healthy())
    b["nics"]["eno1"] = _nic(mtu=1500, max_mtu=1500)
    b["items"]["thermal"] = bad("no zones")
    out = D.evaluate({"n1": a, "n2": b})
    seen = {(x["rule"], x["node"]) for k in ("findings", "cannot_tell", "passed") for x in out[k]}
    node_rules = [r.id for r in D.RULES if r.scope == "node"]
    assert {(r, n) for r in node_rules for n in ("n1", "n2")} <= seen
    assert {r.id for r in D.RULES if r.scope == "cluster"} <= {r for r, _ in seen}  # a finding names its node
    (mtu,) = [f for f in out["findings"] if f["rule"] == "mtu-mismatch"]
    assert mtu["node"] == "n2" and mtu["verify"] == "run pingpong --hosts n1,n2"
    assert ("thermal-hot", "n2") in {(c["rule"], c["node"]) for c in out["cannot_tell"]}
    # a rule that crashes says so instead of hiding the others
    boom = D.Rule("boom", "crash", ("x",), lambda ev: 1 / 0, "w", "f", "u", "run fpu")
    out = D.evaluate({"n1": a}, [boom])
    assert out["cannot_tell"][0]["why"].startswith("the rule failed: ZeroDivisionError")
    json.dumps(out)


def test_parsers() -> None:
    assert E.parse_meminfo_swap("SwapCached: 5 kB\nSwapTotal: 100 kB\nSwapFree: 40 kB\n") == \
        {"total_kb": 100, "free_kb": 40, "used_kb": 60}
    assert E.parse_swaps("Filename Type Size Used Priority\n/swap file 1024 10 -2\n") == \
        [{"name": "/swap", "type": "file", "size_kb": 1024, "used_kb": 10}]
    before = E.parse_stat_cpu("cpu  100 0 100 700 0 0 0 100 0 0\ncpu0 1 2 3\n")
    after = E.parse_stat_cpu("cpu  110 0 110 770 0 0 0 110 0 0\n")
    assert E.steal_percent(before, after) == pytest.approx(10.0)
    assert E.steal_percent([1, 2, 3, 4], [5, 6, 7, 8]) is None  # an old kernel: no steal column
    s = E.parse_softirqs("      CPU0 CPU1\n  HI: 0 0\n NET_TX: 3 4\n NET_RX: 100 2\n")
    assert s == {"NET_TX": [3, 4], "NET_RX": [100, 2]}


#: evidence item -> the file in a snapshot it comes from
SNAPSHOT_FILES = {"swap": "proc/meminfo", "steal": "proc/stat", "cpus.online": "sys/devices/system/cpu/online",
                  "kernel.preemption": "proc/version", "thp.enabled": "sys/kernel/mm/transparent_hugepage/enabled",
                  "softirqs.net": "proc/softirqs", "sysctl.kernel.numa_balancing": "proc/sys/kernel/numa_balancing"}


@pytest.mark.parametrize("tb", TARBALLS, ids=[t.name[: -len(".tar.bz2")] for t in TARBALLS])
def test_evidence_from_snapshots(tb, sysfs_snapshot) -> None:
    root = sysfs_snapshot(tb)
    ev = E.gather(str(root))
    json.dumps(ev)
    assert ev["live"] is False and set(E.ITEMS) == set(ev["items"])
    for key, it in ev["items"].items():
        assert it["readable"] or it["why"], key  # never unreadable without a reason
        assert it["source"], key
    # live-only items say so
    for key in ("blas.openblas_core", "software"):
        assert not ev["items"][key]["readable"] and "snapshot" in ev["items"][key]["why"]
    checked = 0
    for key, rel in SNAPSHOT_FILES.items():
        if not (root / rel).exists():
            continue  # this machine's snapshot lacks the file: the item must say unreadable
        checked += 1
        it = ev["items"][key]
        if key == "kernel.preemption" and not it["readable"]:
            assert "voluntary or none" in it["why"] or "PREEMPT_DYNAMIC" in it["why"]
        elif key != "swap" or "SwapTotal" in (root / rel).read_text():
            assert it["readable"], (key, it)
    assert checked >= 1  # every snapshot has at least /proc/stat
    # every rule gives a verdict on a snapshot (finding, passed or cannot tell)
    out = D.evaluate({"snap": ev})
    got = {x["rule"] for k in ("findings", "cannot_tell", "passed") for x in out[k]}
    assert got == {r.id for r in D.RULES}


def _fixture(name: str, sysfs_snapshot) -> Path:
    tb = FIXTURES / f"{name}.tar.bz2"
    assert tb.exists(), f"fixture {name} not in {FIXTURES} (the snapshots are part of the repository)"
    return sysfs_snapshot(tb)


def test_snapshot_findings(sysfs_snapshot) -> None:
    """Real machines' settings found by the rules: a hybrid laptop's powersave governor and turbo,
    a server with swap in use, an Arm server's preemptible kernel, a Raspberry-Pi-like board's
    ondemand governor."""
    cases = [("20em64t-hybrid-1p6c2t+2ca4co1t", "cpu-governor", "sys/devices/system/cpu/cpufreq/policy0/scaling_governor"),
             ("20em64t-hybrid-1p6c2t+2ca4co1t", "cpu-boost", "sys/devices/system/cpu/intel_pstate/no_turbo"),
             ("40intel64-4n10c+pci-conflicts", "swap-in-use", "proc/meminfo"),
             ("128arm-2pa2n8cluster4co", "preemption", "proc/version"),
             ("2arm-2c", "cpu-governor", "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")]
    done = 0
    for name, rule_id, rel in cases:
        root = _fixture(name, sysfs_snapshot)
        if not (root / rel).exists():
            continue  # the snapshot lacks the file this case reads
        ev = E.gather(str(root))
        hits = fired(D.rule(rule_id).check(ev))
        assert hits[0].fix and hits[0].evidence, (name, rule_id)
        done += 1
    assert done >= 4, f"only {done} of the {len(cases)} snapshot cases found the files they read"
    root = _fixture("20em64t-hybrid-1p6c2t+2ca4co1t", sysfs_snapshot)
    ev = E.gather(str(root))
    assert ev["items"]["cpufreq.governors"]["value"] == {"powersave": list(range(20))}
    root = _fixture("40intel64-4n10c+pci-conflicts", sysfs_snapshot)
    (h,) = fired(D.rule("swap-in-use").check(E.gather(str(root))))
    assert h.evidence[0]["value"]["used_kb"] == 15998968 - 15968444


def test_snapshot_without_cpufreq_cannot_tell(sysfs_snapshot) -> None:
    root = _fixture("16amd64-8n2c", sysfs_snapshot)
    if (root / "sys/devices/system/cpu/cpu0/cpufreq").exists():
        pytest.skip("this snapshot has cpufreq")
    res = D.rule("cpu-governor").check(E.gather(str(root)))
    assert isinstance(res, D.CannotTell) and "cpufreq" in res.why
