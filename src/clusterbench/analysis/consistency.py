"""Cluster consistency: which settings differ between nodes in a way that changes results.

A cluster whose nodes differ in CPU, clock policy, THP, kernel, MPI, BLAS, compilers or network
settings gives results that depend on where ranks land (Duffy 2020 checked the BLAS on every node by
hand). :func:`diff` compares the probes of several hosts (pure, no I/O);
:func:`clusterbench.cluster.check.check` gathers them first and is what ``clusterbench cluster check
--hosts ...`` runs.

Input of :func:`diff`: ``{host: data}`` where ``data`` is what ``gather_probes`` returns per host,
``{"probe": <probe document>, "network": <nic_settings()>}``, or a bare probe document (NICs then
come from ``probe["environment"]["nics"]``). A host whose data is ``{"error": ...}`` is skipped.

Output: a list of ``{"what", "key", "values": {host: value}, "why"}``, one per setting whose value
is not the same on every host compared, in a fixed order (CPU, memory, OS, software, network). A
value the probe could not determine is ``None``, and counts as different from a known value (a node
without cpufreq is not the same as one with the performance governor). NICs are compared by
interface name, across the hosts that have that interface (``lo`` excepted); memory totals only
when more than :data:`MEMORY_TOLERANCE` apart. Network sysctls and the RFS table size are compared
among the hosts that can read them (``None`` is shown but not counted: inside a network namespace
the global ones, e.g. ``net.core.netdev_max_backlog``, are not visible).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping

MEMORY_TOLERANCE = 0.05

Getter = Callable[[dict, dict], Any]  # (probe, network) -> value


def dotted_get(d: Any, path: str) -> Any:
    """``d["a"]["b"]`` for ``"a.b"``, or None where a level is missing or not a dict."""
    for part in path.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(part)
    return d


def _p(path: str) -> Getter:
    return lambda probe, net: dotted_get(probe, path)


def _sorted_set(items: Any, fmt: Callable[[dict], str]) -> list[str] | None:
    if items is None:
        return None
    return sorted({fmt(i) for i in items if isinstance(i, dict)})


def _mpi(probe: dict, net: dict) -> Any:
    return _sorted_set(dotted_get(probe, "environment.mpi"), lambda m: f"{m.get('name')} {m.get('version')}")


def _blas(probe: dict, net: dict) -> Any:
    return _sorted_set(dotted_get(probe, "environment.blas"),
                       lambda b: os.path.basename(b.get("path") or "") or str(b.get("name")))


def _compilers(probe: dict, net: dict) -> Any:
    return _sorted_set(dotted_get(probe, "environment.compilers"), lambda c: f"{c.get('name')} {c.get('version')}")


def _sysctl(name: str) -> Getter:
    return lambda probe, net: (net.get("sysctls") or {}).get(name) if net else None


#: (what, key, getter, why) for the node-wide settings, in report order
CHECKS: list[tuple[str, str, Getter, str]] = [
    ("CPU model", "cpu.model_name", _p("cpu.model_name"),
     "different CPUs: per-node compute and memory figures, and the slowest node sets the pace of a parallel job"),
    ("CPU microarchitecture", "cpu.microarchitecture", _p("cpu.microarchitecture"),
     "different FLOPs per cycle, caches and memory system: Rpeak and kernel speed differ per node"),
    ("CPU instruction sets", "cpu.isa", _p("cpu.isa"),
     "kernels built with -march=native use different vector instructions on each node"),
    ("CPU vendor/architecture", "cpu.arch", _p("cpu.arch"),
     "binaries and the kernel cache are not interchangeable between architectures"),
    ("maximum clock (MHz)", "cpu.freq_max_mhz", _p("cpu.freq_max_mhz"),
     "a different maximum clock changes compute throughput and latency in cycles"),
    ("nominal clock (MHz)", "cpu.freq_nominal_mhz", _p("cpu.freq_nominal_mhz"),
     "a different base clock changes Rpeak and every compute-bound figure"),
    ("sockets", "topology.packages", _p("topology.packages"),
     "a different socket count changes memory bandwidth, NUMA placement and Rpeak"),
    ("NUMA nodes", "topology.numa_nodes", _p("topology.numa_nodes"),
     "a different NUMA layout changes memory bandwidth and where ranks should be placed"),
    ("physical cores", "topology.cores", _p("topology.cores"),
     "different core counts: ranks per node, Rpeak and bandwidth per node differ"),
    ("logical CPUs", "topology.pus", _p("topology.pus"),
     "different hardware-thread counts: a one-rank-per-CPU layout oversubscribes some cores"),
    ("SMT active", "environment.smt_active", _p("environment.smt_active"),
     "SMT on some nodes only: ranks share cores there, halving per-rank compute"),
    ("CPU frequency governor", "environment.governor", _p("environment.governor"),
     "powersave/ondemand nodes clock down between messages and under load: slower and noisier"),
    ("turbo boost", "environment.turbo", _p("environment.turbo"),
     "turbo on some nodes only: their clock, and every compute figure, is higher and less stable"),
    ("transparent huge pages", "environment.thp", _p("environment.thp"),
     "THP changes TLB misses: memory latency and bandwidth of large arrays differ"),
    ("THP defrag", "environment.thp_defrag", _p("environment.thp_defrag"),
     "synchronous THP compaction adds stalls on some nodes only"),
    ("automatic NUMA balancing", "environment.numa_balancing", _p("environment.numa_balancing"),
     "page migration on some nodes only moves memory under running ranks"),
    ("kernel version", "environment.kernel", _p("environment.kernel"),
     "different kernels: schedulers, network stacks and mitigations differ"),
    ("kernel preemption model", "environment.preemption", _p("environment.preemption"),
     "a different preemption model changes scheduling latency and jitter"),
    ("CPU vulnerability mitigations", "environment.cpu_mitigations", _p("environment.cpu_mitigations"),
     "mitigations cost system-call and context-switch time: latency-bound figures differ"),
    ("virtualisation", "environment.hypervisor", _p("environment.hypervisor"),
     "virtual and bare-metal nodes differ in timer, memory and network overheads"),
    ("MPI libraries", "environment.mpi", _mpi,
     "different MPI implementations or versions: different protocols, thresholds and collectives, "
     "and mpirun cannot mix them in one job"),
    ("BLAS libraries found", "environment.blas", _blas,
     "a different BLAS (or none) on some nodes: DGEMM/HPL speed differs, or the run fails there"),
    ("compilers", "environment.compilers", _compilers,
     "different compiler versions generate different code for the same kernel"),
]

_SYSCTL_WHY = {
    "net.core.rmem_max": "caps the receive buffer an application may ask for: TCP bandwidth over long or fast links",
    "net.core.wmem_max": "caps the send buffer an application may ask for: TCP bandwidth over long or fast links",
    "net.core.rmem_default": "default socket receive buffer: bandwidth of applications that set none",
    "net.core.wmem_default": "default socket send buffer: bandwidth of applications that set none",
    "net.core.netdev_max_backlog": "packets queued per CPU before drops at high rates",
    "net.core.busy_poll": "busy polling trades CPU for lower latency",
    "net.core.busy_read": "busy polling trades CPU for lower latency",
    "net.ipv4.tcp_rmem": "TCP receive-buffer autotuning range: bandwidth-delay product the node can fill",
    "net.ipv4.tcp_wmem": "TCP send-buffer autotuning range: bandwidth-delay product the node can fill",
    "net.ipv4.tcp_mem": "global TCP memory pressure thresholds",
    "net.ipv4.tcp_congestion_control": "different congestion control (cubic, bbr, ...) changes throughput and fairness",
    "net.ipv4.tcp_mtu_probing": "path-MTU probing changes segment sizes when ICMP is filtered",
    "net.ipv4.tcp_window_scaling": "without window scaling the TCP window stops at 64 KiB: bandwidth collapses",
    "net.ipv4.tcp_timestamps": "timestamps change header size and RTT estimation",
    "net.ipv4.tcp_sack": "without SACK, loss recovery is slower",
    "net.ipv4.tcp_low_latency": "changes TCP receive processing",
    "net.ipv4.tcp_slow_start_after_idle": "restarting slow start after idle slows bursty (MPI-like) traffic",
    "net.ipv4.tcp_autocorking": "autocorking batches small writes: latency of small messages",
    "net.core.default_qdisc": "a different default queueing discipline changes pacing and queueing delay",
}

#: (what, nic field, why) for every interface present on several hosts
NIC_CHECKS: list[tuple[str, str, str]] = [
    ("MTU", "mtu", "a different MTU changes packet rate and bandwidth, and mismatched MTUs drop or fragment "
                   "large frames between nodes"),
    ("link speed (Mbit/s)", "speed_mbps", "a slower link caps bandwidth to and from that node"),
    ("driver", "driver", "different NIC drivers (or NICs) differ in latency, offloads and interrupt handling"),
    ("state", "operstate", "an interface down on some nodes: traffic takes another path there"),
    ("offloads (GRO/GSO/TSO/LRO/checksums)", "offloads",
     "offloads change CPU cost per byte, packet batching and latency"),
    ("interrupt coalescing", "coalescing", "coalescing trades latency for interrupt rate: small-message latency differs"),
    ("RPS", "rps", "receive packet steering moves protocol processing to other CPUs: latency and CPU load differ"),
    ("RFS flow count", "rfs_flow_cnt", "receive flow steering on some nodes only changes which CPU handles a flow"),
    ("transmit queue length", "tx_queue_len", "a different txqueuelen changes queueing delay under load"),
    ("GRO flush timeout", "gro_flush_timeout", "deferred GRO flushing adds latency to small messages"),
]


def unwrap(data: Any) -> tuple[dict, dict] | None:
    """(probe, network) from one host's data, or None for a failed host."""
    if not isinstance(data, Mapping) or "error" in data:
        return None
    if "probe" in data and isinstance(data["probe"], Mapping):
        return dict(data["probe"]), dict(data.get("network") or {})
    return dict(data), {}


def _nics(probe: dict, net: dict) -> dict[str, dict]:
    nics = net.get("nics") if net else None
    if nics is None:
        nics = dotted_get(probe, "environment.nics") or []
    return {n["name"]: dict(n) for n in nics if isinstance(n, Mapping) and n.get("name")}


def _norm(value: Any) -> str:
    """A hashable, order-stable form of a value for comparing (JSON-like)."""
    import json
    return json.dumps(value, sort_keys=True, default=str)


def _differ(values: Mapping[str, Any]) -> bool:
    return len({_norm(v) for v in values.values()}) > 1


def _known_differ(values: Mapping[str, Any]) -> bool:
    """Differ among the hosts that know the value (a sysctl absent inside a network namespace is a
    global one the namespace cannot see, not a different setting)."""
    return len({_norm(v) for v in values.values() if v is not None}) > 1


def _memory_differs(values: Mapping[str, Any]) -> bool:
    known = [v for v in values.values() if isinstance(v, (int, float))]
    if len(known) != len(values):
        return _differ(values)
    return bool(known) and max(known) > 0 and (max(known) - min(known)) / max(known) > MEMORY_TOLERANCE


def diff(probes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Settings that differ between hosts and change results (see the module docstring)."""
    hosts: dict[str, tuple[dict, dict]] = {}
    for h, data in probes.items():
        u = unwrap(data)
        if u is not None:
            hosts[h] = u
    if len(hosts) < 2:
        return []
    out: list[dict[str, Any]] = []

    def add(what: str, key: str, values: dict[str, Any], why: str, differs: Callable = _differ) -> None:
        if len(values) >= 2 and differs(values):
            out.append({"what": what, "key": key, "values": values, "why": why})

    for what, key, get, why in CHECKS:
        add(what, key, {h: get(p, n) for h, (p, n) in hosts.items()}, why)
        if key == "topology.pus":  # memory right after the topology
            add("memory total (bytes)", "memory.total_bytes",
                {h: dotted_get(p, "memory.total_bytes") for h, (p, _) in hosts.items()},
                f"more than {MEMORY_TOLERANCE:.0%} apart: different DIMM population, so different memory "
                "bandwidth and the largest problem (HPL N) that fits", _memory_differs)
    # network stack (only hosts whose network settings were gathered)
    with_net = {h: n for h, (_, n) in hosts.items() if n.get("sysctls") is not None}
    names = sorted({k for n in with_net.values() for k in (n.get("sysctls") or {})},
                   key=lambda k: (list(_SYSCTL_WHY).index(k) if k in _SYSCTL_WHY else len(_SYSCTL_WHY), k))
    for name in names:
        add(f"sysctl {name}", f"network.sysctls.{name}", {h: n["sysctls"].get(name) for h, n in with_net.items()},
            _SYSCTL_WHY.get(name, "TCP/IP stack setting that changes network results"), _known_differ)
    add("RFS table size (rps_sock_flow_entries)", "network.rps_sock_flow_entries",
        {h: n.get("rps_sock_flow_entries") for h, n in with_net.items()},
        "receive flow steering on some nodes only (0 = off): which CPU processes a flow differs", _known_differ)
    # per interface, by name
    nics = {h: _nics(p, n) for h, (p, n) in hosts.items()}
    all_names = sorted({name for d in nics.values() for name in d if name != "lo"})
    for ifname in all_names:
        have = {h: d[ifname] for h, d in nics.items() if ifname in d}
        if len(have) < 2:
            continue
        for what, fld, why in NIC_CHECKS:
            vals = {h: nic.get(fld) for h, nic in have.items() if fld in nic}
            if fld == "rps" and vals:  # compare what steering does, not the per-queue detail
                vals = {h: (None if v is None else {"enabled": v.get("enabled"), "cpus": v.get("cpus")})
                        for h, v in vals.items()}
            add(f"NIC {ifname} {what}", f"network.nics.{ifname}.{fld}", vals, why)
    return out
