"""The pure tests (they start no process) of what tests/integration/test_cluster_check.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import copy
import json

from clusterbench.analysis import consistency
from clusterbench.cluster import check as cluster_check
from clusterbench.probe import network


def _host(mtu: int = 1500, **over) -> dict:
    """A synthetic gather_probes() entry."""
    probe = {
        "probe_schema": 1,
        "cpu": {"arch": "x86_64", "model_name": "Intel(R) Xeon(R) Gold 6230", "microarchitecture": "Cascade Lake",
                "isa": ["avx2", "avx512f"], "freq_nominal_mhz": 2100.0, "freq_max_mhz": 3900.0},
        "topology": {"packages": 2, "numa_nodes": 2, "cores": 40, "pus": 80},
        "memory": {"total_bytes": 192 * 2**30},
        "environment": {"kernel": "6.1.0-18-amd64", "governor": "performance", "turbo": True, "smt_active": True,
                        "thp": "madvise", "thp_defrag": "madvise", "numa_balancing": False,
                        "preemption": "PREEMPT_DYNAMIC", "hypervisor": None, "cpu_mitigations": {"mds": "x"},
                        "mpi": [{"name": "Open MPI", "version": "4.1.4", "path": "/usr/bin/mpirun"}],
                        "blas": [{"name": "openblas", "path": "/usr/lib/libopenblas.so.0"}],
                        "compilers": [{"name": "gcc", "version": "12.2.0", "path": "/usr/bin/gcc"}],
                        "nics": [{"name": "eno1", "mtu": mtu, "speed_mbps": 25000, "driver": "ice"}]},
    }
    net = {"network_schema": 1,
           "nics": [{"name": "lo", "mtu": 65536, "driver": None},
                    {"name": "eno1", "mtu": mtu, "speed_mbps": 25000, "driver": "ice", "operstate": "up",
                     "rps": {"enabled": False, "cpus": [], "per_queue_cpus": {"rx-0": []}}, "rfs_flow_cnt": 0,
                     "offloads": {"gro": True, "tso": True}, "coalescing": {"rx_usecs": 50}}],
           "sysctls": {"net.core.rmem_max": 212992, "net.ipv4.tcp_rmem": [4096, 131072, 6291456],
                       "net.ipv4.tcp_congestion_control": "cubic"},
           "rps_sock_flow_entries": 0}
    for path, value in over.items():
        d = {"probe": probe, "network": net}
        keys = path.split("__")
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return {"probe": probe, "network": net}


def _keys(diffs: list[dict]) -> set[str]:
    return {d["key"] for d in diffs}


def test_identical_hosts_give_no_difference() -> None:
    assert consistency.diff({"a": _host(), "b": _host(), "c": _host()}) == []
    assert consistency.diff({"a": _host()}) == []  # one host: nothing to compare


def test_mtu_1500_vs_9000_is_found() -> None:
    diffs = consistency.diff({"a": _host(1500), "b": _host(9000)})
    mtu = [d for d in diffs if d["key"] == "network.nics.eno1.mtu"]
    assert len(mtu) == 1
    assert mtu[0]["values"] == {"a": 1500, "b": 9000}
    assert "MTU" in mtu[0]["what"] and mtu[0]["why"]
    assert _keys(diffs) == {"network.nics.eno1.mtu"}
    json.dumps(diffs)  # serialisable


def test_each_listed_setting_is_compared() -> None:
    base = _host()
    cases = {
        "probe__cpu__model_name": ("AMD EPYC 7742", "cpu.model_name"),
        "probe__cpu__microarchitecture": ("Zen 2", "cpu.microarchitecture"),
        "probe__topology__cores": (32, "topology.cores"),
        "probe__environment__smt_active": (False, "environment.smt_active"),
        "probe__environment__governor": ("powersave", "environment.governor"),
        "probe__environment__turbo": (False, "environment.turbo"),
        "probe__environment__thp": ("always", "environment.thp"),
        "probe__environment__kernel": ("5.10.0-28-amd64", "environment.kernel"),
        "probe__environment__mpi": ([{"name": "MPICH", "version": "4.0"}], "environment.mpi"),
        "probe__environment__blas": ([], "environment.blas"),
        "probe__environment__compilers": ([{"name": "gcc", "version": "10.2.1"}], "environment.compilers"),
        "network__sysctls__net.ipv4.tcp_rmem": ([4096, 87380, 6291456], "network.sysctls.net.ipv4.tcp_rmem"),
        "network__sysctls__net.core.rmem_max": (4194304, "network.sysctls.net.core.rmem_max"),
        "network__rps_sock_flow_entries": (32768, "network.rps_sock_flow_entries"),
    }
    for path, (value, key) in cases.items():
        other = _host(**{path: value})
        diffs = consistency.diff({"a": base, "b": other})
        assert _keys(diffs) == {key}, (path, diffs)
    # NIC fields
    other = _host()
    nic = other["network"]["nics"][1]
    nic.update(speed_mbps=10000, driver="mlx5_core",
               rps={"enabled": True, "cpus": [0, 1], "per_queue_cpus": {"rx-0": [0, 1]}})
    keys = _keys(consistency.diff({"a": base, "b": other}))
    assert {"network.nics.eno1.speed_mbps", "network.nics.eno1.driver", "network.nics.eno1.rps"} == keys


def test_memory_within_5_percent_is_alike() -> None:
    close = _host(**{"probe__memory": {"total_bytes": int(192 * 2**30 * 0.97)}})
    far = _host(**{"probe__memory": {"total_bytes": 128 * 2**30}})
    assert consistency.diff({"a": _host(), "b": close}) == []
    assert _keys(consistency.diff({"a": _host(), "b": far})) == {"memory.total_bytes"}


def test_failed_hosts_and_bare_probes() -> None:
    a, b = _host(1500), _host(9000)
    assert consistency.diff({"a": a, "b": {"error": "cannot reach b"}}) == []
    # bare probe documents: NICs from environment.nics
    diffs = consistency.diff({"a": copy.deepcopy(a["probe"]), "b": copy.deepcopy(b["probe"])})
    assert _keys(diffs) == {"network.nics.eno1.mtu"}
    # unknown vs known counts as a difference; lo is never compared
    c = _host(**{"probe__environment__governor": None})
    c["network"]["nics"][0]["mtu"] = 16384
    assert _keys(consistency.diff({"a": a, "c": c})) == {"environment.governor"}
    # a sysctl a namespace cannot see (None) is not a difference by itself
    d = _host(**{"network__sysctls__net.core.rmem_max": None, "network__rps_sock_flow_entries": None})
    assert consistency.diff({"a": a, "d": d}) == []


def test_nic_settings_snapshot_and_missing_root(tmp_path) -> None:
    empty = network.nic_settings(str(tmp_path / "nothing"))
    assert empty["nics"] == [] and "network.nics" in empty["unknown"]
    assert all(v is None for v in empty["sysctls"].values())
    base = tmp_path / "snap" / "sys/class/net/eth9"
    (base / "queues/rx-0").mkdir(parents=True)
    (base / "mtu").write_text("9000\n")
    (base / "speed").write_text("-1\n")
    (base / "queues/rx-0/rps_cpus").write_text("00000000,00000005\n")
    (base / "queues/rx-0/rps_flow_cnt").write_text("4096\n")
    sysdir = tmp_path / "snap" / "proc/sys/net/ipv4"
    sysdir.mkdir(parents=True)
    (sysdir / "tcp_rmem").write_text("4096\t87380\t6291456\n")
    (sysdir / "tcp_congestion_control").write_text("bbr\n")
    d = network.nic_settings(str(tmp_path / "snap"))
    nic = d["nics"][0]
    assert nic["mtu"] == 9000 and nic["speed_mbps"] is None
    assert nic["rps"]["cpus"] == [0, 2] and nic["rfs_flow_cnt"] == 4096
    assert nic["offloads"] is None and "snapshot" in d["unknown"]["network.nics.eth9.offloads"]
    assert d["sysctls"]["net.ipv4.tcp_rmem"] == [4096, 87380, 6291456]
    assert d["sysctls"]["net.ipv4.tcp_congestion_control"] == "bbr"


def test_ethtool_text_parsers() -> None:
    k = ("Features for eth0:\nrx-checksumming: on\ntx-checksumming: on\n\ttx-checksum-ipv4: off [fixed]\n"
         "scatter-gather: on\ntcp-segmentation-offload: off\ngeneric-segmentation-offload: on\n"
         "generic-receive-offload: on\nlarge-receive-offload: off [fixed]\n")
    assert network.parse_ethtool_features(k) == {"rx_checksum": True, "tx_checksum": True, "scatter_gather": True,
                                                 "tso": False, "gso": True, "gro": True, "lro": False}
    c = ("Coalesce parameters for eth0:\nAdaptive RX: on  TX: off\nstats-block-usecs: 0\nrx-usecs: 3\n"
         "rx-frames: 0\nrx-usecs-irq: 0\ntx-usecs: n/a\ntx-frames: 64\n")
    assert network.parse_ethtool_coalesce(c) == {"adaptive_rx": True, "adaptive_tx": False, "rx_usecs": 3,
                                                 "rx_frames": 0, "tx_usecs": None, "tx_frames": 64}


def _res(probes: dict, asked: list[str]) -> dict:
    errors = {h: d["error"] for h, d in probes.items() if "error" in d}
    return {"hosts": list(probes), "asked": asked, "answered": [h for h in probes if h not in errors],
            "differences": consistency.diff(probes), "errors": errors}


def test_keep_going_one_answered_claims_nothing() -> None:
    lines = cluster_check.format_check(_res({"n1": _host(), "n2": {"error": "n2: ssh timed out"}}, ["n1", "n2"]))
    text = "\n".join(lines)
    assert lines[0] == "1 of 2 hosts answered: n1"
    assert "did not answer: n2: n2: ssh timed out" in text
    assert "no differences" not in text and "nothing compared" in text


def test_keep_going_partial_comparison_names_its_scope() -> None:
    probes = {"n1": _host(), "n2": _host(), "n3": {"error": "n3: unreachable"}}
    lines = cluster_check.format_check(_res(probes, ["n1", "n2", "n3"]))
    assert lines[0] == "2 of 3 hosts answered: n1, n2"
    assert "no differences that change results across the 2 hosts that answered" in lines
    probes["n2"] = _host(mtu=9000)
    assert any(ln.startswith("NIC eno1 MTU") or "mtu" in ln.lower() for ln in
               cluster_check.format_check(_res(probes, ["n1", "n2", "n3"])))
