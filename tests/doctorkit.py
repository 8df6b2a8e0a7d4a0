"""Hand-made doctor evidence for tests: a healthy node on which no rule fires, and items to change."""
from __future__ import annotations

from clusterbench.doctor import evidence as E


def ok(value, source="test"):
    return E.item(value, source)


def bad(why="not there"):
    return E.unreadable("test", why)


def _nic(mtu=1500, max_mtu=9000, rx_queues=4, rps=None, coalescing=None, rfs_flow_cnt=0):
    return {"mtu": ok(mtu), "max_mtu": ok(max_mtu), "rx_queues": ok(rx_queues),
            "rps_cpus": ok(rps if rps is not None else {f"rx-{i}": [] for i in range(rx_queues)}),
            "rfs_flow_cnt": ok(rfs_flow_cnt),
            "coalescing": ok(coalescing or {"adaptive_rx": True, "adaptive_tx": True, "rx_usecs": 50, "rx_frames": 0}),
            "speed_mbps": ok(10000), "driver": ok("ice")}


def healthy() -> dict:
    """A node on which no rule fires."""
    return {"evidence_schema": 1, "host": "n", "live": True, "items": {
        "sysctl.net.core.rmem_max": ok(16777216), "sysctl.net.core.wmem_max": ok(16777216),
        "sysctl.net.ipv4.tcp_rmem": ok([4096, 87380, 16777216]), "sysctl.net.ipv4.tcp_wmem": ok([4096, 65536, 16777216]),
        "sysctl.net.core.rps_sock_flow_entries": ok(32768), "sysctl.kernel.numa_balancing": ok(0),
        "thp.enabled": ok("madvise"), "thp.defrag": ok("madvise"),
        "swap": ok({"total_kb": 1024, "free_kb": 1024, "used_kb": 0, "devices": []}),
        "cpufreq.governors": ok({"performance": [0, 1, 2, 3]}), "cpufreq.boost": ok(False, "/sys/devices/system/cpu/cpufreq/boost"),
        "kernel.preemption": ok("none", "uname -v"), "cpus.online": ok([0, 1, 2, 3]), "numa.nodes": ok(2),
        "steal": ok({"percent": 0.1, "interval_s": 1.0, "since": "interval"}), "hypervisor": ok(None),
        "thermal": ok([{"zone": "thermal_zone0", "type": "x86_pkg_temp", "temp_c": 55.0}]),
        "softirqs.net": ok({"NET_RX": [10, 10, 10, 10], "NET_TX": [1, 1, 1, 1]}),
        "blas.openblas_core": ok({"path": "/usr/lib/libopenblas.so.0", "core": "SkylakeX"}),
        "cpu.isa": ok({"isa": ["sse2", "avx", "avx2", "fma", "avx512f", "avx512vl", "avx512bw", "avx512dq"],
                       "vendor": "GenuineIntel", "model_name": "Xeon"}),
        "software": ok({"kernel": "6.1.0-18-amd64", "mpi": [{"name": "Open MPI", "version": "4.1.4"}],
                        "blas": [{"name": "openblas", "path": "/usr/lib/libopenblas.so.0"}], "compilers": []}),
        "pi.throttled": ok(None, "vcgencmd get_throttled (not installed: not a Raspberry Pi)"),
    }, "nics": {"eno1": _nic(mtu=9000)}}


def with_items(**items) -> dict:
    ev = healthy()
    for k, v in items.items():
        ev["items"][k.replace("__", ".")] = v
    return ev
