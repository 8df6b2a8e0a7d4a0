"""Per-NIC and TCP-stack settings that change network results (``nic_settings``).

Why: two nodes with different MTUs, socket-buffer limits, congestion control, offloads, interrupt
coalescing or RPS give different latencies and bandwidths for the same hardware; a network figure
is only comparable, and a cluster only consistent, when these are recorded and alike.

Sources, per interface under ``/sys/class/net/IF``: ``mtu``, ``speed``, ``duplex``, ``operstate``,
``tx_queue_len``, ``gro_flush_timeout``, ``napi_defer_hard_irqs``, the driver (``device/driver``
link), RPS/RFS (``queues/rx-*/rps_cpus``, ``rps_flow_cnt``) and XPS (``queues/tx-*/xps_cpus``).
Globally: ``/proc/sys/net/core/rps_sock_flow_entries`` and the TCP sysctls in :data:`SYSCTLS`.
Interrupt coalescing and offloads (GRO, GSO, TSO, LRO, checksumming, scatter-gather) come from
``ethtool -c`` / ``ethtool -k`` when ethtool is installed (5 s limit per call), else from the
kernel's legacy ethtool ioctl (``SIOCETHTOOL``), which needs no tool; both only on the live
machine.

Inside a network namespace (``ip netns exec``) ``/sys/class/net`` and ``/proc/sys/net`` show the
namespace's own interfaces and (on kernels >= 4.15 for most of them) its own TCP sysctls, so the
same function describes a sim-cluster node.

Never raises: anything unknown is ``None`` and explained in ``result["unknown"][dotted_path]``.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import shutil
import socket
import struct
import subprocess
from typing import Any

from clusterbench.probe.sysfs import FsRoot
from clusterbench import process

NETWORK_SCHEMA = 1
TIMEOUT = 5.0
NOT_LIVE = "not on the live machine (snapshot root): offloads and coalescing need the running kernel"

#: sysctl name -> how to parse it ("int", "ints" = whitespace-separated triple, "str")
SYSCTLS: dict[str, str] = {
    "net.core.rmem_max": "int",
    "net.core.wmem_max": "int",
    "net.core.rmem_default": "int",
    "net.core.wmem_default": "int",
    "net.core.netdev_max_backlog": "int",
    "net.core.busy_poll": "int",
    "net.core.busy_read": "int",
    "net.ipv4.tcp_rmem": "ints",
    "net.ipv4.tcp_wmem": "ints",
    "net.ipv4.tcp_mem": "ints",
    "net.ipv4.tcp_congestion_control": "str",
    "net.ipv4.tcp_mtu_probing": "int",
    "net.ipv4.tcp_window_scaling": "int",
    "net.ipv4.tcp_timestamps": "int",
    "net.ipv4.tcp_sack": "int",
    "net.ipv4.tcp_low_latency": "int",
    "net.ipv4.tcp_slow_start_after_idle": "int",
    "net.ipv4.tcp_autocorking": "int",
    "net.core.default_qdisc": "str",
}

#: normalised offload name -> (ethtool -k feature name, legacy ioctl command)
OFFLOADS: dict[str, tuple[str, int]] = {
    "rx_checksum": ("rx-checksumming", 0x14),  # ETHTOOL_GRXCSUM
    "tx_checksum": ("tx-checksumming", 0x16),  # ETHTOOL_GTXCSUM
    "scatter_gather": ("scatter-gather", 0x18),  # ETHTOOL_GSG
    "tso": ("tcp-segmentation-offload", 0x1E),  # ETHTOOL_GTSO
    "gso": ("generic-segmentation-offload", 0x23),  # ETHTOOL_GGSO
    "gro": ("generic-receive-offload", 0x2B),  # ETHTOOL_GGRO
    "lro": ("large-receive-offload", 0x25),  # ETHTOOL_GFLAGS, bit ETH_FLAG_LRO
}
_ETH_FLAG_LRO = 1 << 15
_ETHTOOL_GCOALESCE = 0x0E
_SIOCETHTOOL = 0x8946
#: struct ethtool_coalesce after its cmd word, in order (22 u32)
_COALESCE_FIELDS = (
    "rx_usecs", "rx_frames", "rx_usecs_irq", "rx_frames_irq", "tx_usecs", "tx_frames", "tx_usecs_irq",
    "tx_frames_irq", "stats_block_usecs", "adaptive_rx", "adaptive_tx", "pkt_rate_low", "rx_usecs_low",
    "rx_frames_low", "tx_usecs_low", "tx_frames_low", "pkt_rate_high", "rx_usecs_high", "rx_frames_high",
    "tx_usecs_high", "tx_frames_high", "sample_interval")
#: the coalescing fields that matter for latency, kept in the result
COALESCE_KEYS = ("adaptive_rx", "adaptive_tx", "rx_usecs", "rx_frames", "tx_usecs", "tx_frames")
#: ethtool -c label -> normalised name
_ETHTOOL_C = {"rx-usecs": "rx_usecs", "rx-frames": "rx_frames", "tx-usecs": "tx_usecs", "tx-frames": "tx_frames"}


# --------------------------------------------------------------------------- parsing helpers


def _parse_sysctl(text: str | None, kind: str) -> Any:
    if text is None:
        return None
    try:
        if kind == "int":
            return int(text.split()[0])
        if kind == "ints":
            return [int(x) for x in text.split()]
    except (ValueError, IndexError):
        return text.strip() or None
    return text.strip() or None


def _cpumask_to_list(mask: str | None) -> list[int] | None:
    """``00000000,0000000f`` (sysfs hex mask, 32-bit words) -> [0, 1, 2, 3]."""
    if mask is None:
        return None
    try:
        value = int(mask.replace(",", "").strip() or "0", 16)
    except ValueError:
        return None
    return [i for i in range(value.bit_length()) if value >> i & 1]


def parse_ethtool_features(text: str) -> dict[str, bool | None]:
    """``ethtool -k`` output -> {gro, gso, tso, lro, rx_checksum, tx_checksum, scatter_gather}."""
    seen: dict[str, bool] = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z0-9-]+):\s+(on|off)\b", line.strip())
        if m and not line.startswith(("\t", " ")):  # top-level features only
            seen[m.group(1)] = m.group(2) == "on"
    return {key: seen.get(name) for key, (name, _) in OFFLOADS.items()}


def parse_ethtool_coalesce(text: str) -> dict[str, Any]:
    """``ethtool -c`` output -> {adaptive_rx, adaptive_tx, rx_usecs, rx_frames, tx_usecs, tx_frames}
    (a field the driver reports as ``n/a`` is None)."""
    out: dict[str, Any] = {k: None for k in COALESCE_KEYS}
    m = re.search(r"Adaptive RX:\s*(\S+)\s+TX:\s*(\S+)", text)
    if m:
        out["adaptive_rx"] = {"on": True, "off": False}.get(m.group(1))
        out["adaptive_tx"] = {"on": True, "off": False}.get(m.group(2))
    for line in text.splitlines():
        mm = re.match(r"^\s*([a-z-]+):\s*(\S+)", line)
        if mm and mm.group(1) in _ETHTOOL_C:
            try:
                out[_ETHTOOL_C[mm.group(1)]] = int(mm.group(2))
            except ValueError:
                out[_ETHTOOL_C[mm.group(1)]] = None
    return out


# --------------------------------------------------------------------------- live readers


def _ethtool(args: list[str]) -> tuple[str | None, str | None]:
    """(output, None) or (None, reason)."""
    exe = shutil.which("ethtool")
    if exe is None:
        return None, "ethtool is not installed"
    try:
        p = process.run([exe, *args], timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, f"`ethtool {' '.join(args)}` did not answer within {TIMEOUT:g} s"
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"ethtool failed: {exc}"
    if p.returncode != 0:
        err = (p.stderr or p.stdout).strip().splitlines()
        return None, f"`ethtool {' '.join(args)}`: {err[-1] if err else f'exit {p.returncode}'}"
    return p.stdout, None


def _ioctl(ifname: str, payload: bytes) -> tuple[bytes | None, str | None]:
    """SIOCETHTOOL with ``payload`` (starting with the cmd word); (answer, None) or (None, reason)."""
    name = ifname.encode()[:15]
    buf = ctypes.create_string_buffer(payload, len(payload))
    ifreq = struct.pack("16sP", name, ctypes.addressof(buf))
    ifreq += b"\0" * (40 - len(ifreq))
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            fcntl.ioctl(s.fileno(), _SIOCETHTOOL, ifreq)
    except OSError as exc:
        why = "not supported by the driver" if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL) else \
            "permission denied" if exc.errno == errno.EPERM else os.strerror(exc.errno or 0)
        return None, f"ethtool ioctl on {ifname}: {why}"
    except (ValueError, TypeError) as exc:  # odd interface name
        return None, f"ethtool ioctl on {ifname}: {exc}"
    return buf.raw, None


def _offloads_ioctl(ifname: str) -> tuple[dict[str, bool | None] | None, str | None]:
    out: dict[str, bool | None] = {}
    reasons = []
    for key, (_, cmd) in OFFLOADS.items():
        raw, why = _ioctl(ifname, struct.pack("II", cmd, 0))
        if raw is None:
            out[key] = None
            reasons.append(why)
            continue
        data = struct.unpack("II", raw[:8])[1]
        out[key] = bool(data & _ETH_FLAG_LRO) if key == "lro" else bool(data)
    if all(v is None for v in out.values()):
        return None, reasons[0] if reasons else "unknown"
    return out, None


def _coalesce_ioctl(ifname: str) -> tuple[dict[str, Any] | None, str | None]:
    raw, why = _ioctl(ifname, struct.pack("I", _ETHTOOL_GCOALESCE) + b"\0" * 4 * len(_COALESCE_FIELDS))
    if raw is None:
        return None, why
    vals = dict(zip(_COALESCE_FIELDS, struct.unpack(f"{len(_COALESCE_FIELDS)}I", raw[4:4 + 4 * len(_COALESCE_FIELDS)])))
    out: dict[str, Any] = {k: vals[k] for k in COALESCE_KEYS}
    out["adaptive_rx"] = bool(out["adaptive_rx"])
    out["adaptive_tx"] = bool(out["adaptive_tx"])
    return out, None


def _offloads(ifname: str) -> tuple[dict | None, str | None, str]:
    text, why = _ethtool(["-k", ifname])
    if text is not None:
        return parse_ethtool_features(text), None, "ethtool -k"
    got, why2 = _offloads_ioctl(ifname)
    return got, (None if got is not None else f"{why2} ({why})" if why else why2), "ethtool ioctl"


def _coalescing(ifname: str) -> tuple[dict | None, str | None, str]:
    text, why = _ethtool(["-c", ifname])
    if text is not None:
        return parse_ethtool_coalesce(text), None, "ethtool -c"
    got, why2 = _coalesce_ioctl(ifname)
    return got, (None if got is not None else f"{why2} ({why})" if why else why2), "ethtool ioctl"


# --------------------------------------------------------------------------- per NIC


def _nic(fs: FsRoot, name: str, live: bool, unknown: dict[str, str]) -> dict[str, Any]:
    base = f"/sys/class/net/{name}"
    speed = fs.read_int(f"{base}/speed")
    try:
        driver: str | None = os.path.basename(os.readlink(fs.path(f"{base}/device/driver")))
    except OSError:
        driver = None
    if driver is None and live:  # virtual devices have no device/: ask the driver itself
        raw, _ = _ioctl(name, struct.pack("I", 0x03) + b"\0" * 192)  # ETHTOOL_GDRVINFO
        if raw:
            driver = raw[4:36].split(b"\0")[0].decode(errors="replace") or None
    nic: dict[str, Any] = {
        "name": name,
        "mtu": fs.read_int(f"{base}/mtu"),
        "speed_mbps": speed if speed and speed > 0 else None,
        "duplex": fs.read(f"{base}/duplex"),
        "driver": driver,
        "operstate": fs.read(f"{base}/operstate"),
        "tx_queue_len": fs.read_int(f"{base}/tx_queue_len"),
        "gro_flush_timeout": fs.read_int(f"{base}/gro_flush_timeout"),
        "napi_defer_hard_irqs": fs.read_int(f"{base}/napi_defer_hard_irqs"),
    }
    where = f"network.nics.{name}"
    if nic["mtu"] is None:
        unknown[f"{where}.mtu"] = f"no {base}/mtu"
    if nic["speed_mbps"] is None:
        unknown[f"{where}.speed_mbps"] = "the driver reports no link speed (virtual NIC, or link down)"
    if nic["driver"] is None:
        unknown[f"{where}.driver"] = "no device/driver link (virtual interface)"
    # RPS / RFS / XPS
    queues = fs.listdir(f"{base}/queues")
    rx = [q for q in queues if q.startswith("rx-")]
    tx = [q for q in queues if q.startswith("tx-")]
    nic["rx_queues"] = len(rx) if queues else None
    nic["tx_queues"] = len(tx) if queues else None
    rps_cpus, flow = [], []
    for q in rx:
        rps_cpus.append(_cpumask_to_list(fs.read(f"{base}/queues/{q}/rps_cpus")))
        flow.append(fs.read_int(f"{base}/queues/{q}/rps_flow_cnt"))
    if rx and any(c is not None for c in rps_cpus):
        cpus = sorted({c for cs in rps_cpus if cs for c in cs})
        nic["rps"] = {"enabled": bool(cpus), "cpus": cpus,
                      "per_queue_cpus": {q: c for q, c in zip(rx, rps_cpus)}}
    else:
        nic["rps"] = None
        unknown[f"{where}.rps"] = "no queues/rx-*/rps_cpus (kernel without CONFIG_RPS, or no rx queues)"
    if rx and any(f is not None for f in flow):
        nic["rfs_flow_cnt"] = sum(f or 0 for f in flow)
    else:
        nic["rfs_flow_cnt"] = None
        unknown[f"{where}.rfs_flow_cnt"] = "no queues/rx-*/rps_flow_cnt"
    xps = [_cpumask_to_list(fs.read(f"{base}/queues/{q}/xps_cpus")) for q in tx]
    nic["xps_cpus"] = sorted({c for cs in xps if cs for c in cs}) if any(x is not None for x in xps) else None
    # offloads and coalescing (the running kernel only)
    if live:
        nic["offloads"], why, src = _offloads(name)
        nic["offloads_source"] = src if nic["offloads"] is not None else None
        if why:
            unknown[f"{where}.offloads"] = why
        nic["coalescing"], why, src = _coalescing(name)
        nic["coalescing_source"] = src if nic["coalescing"] is not None else None
        if why:
            unknown[f"{where}.coalescing"] = why
    else:
        nic["offloads"] = nic["coalescing"] = nic["offloads_source"] = nic["coalescing_source"] = None
        unknown[f"{where}.offloads"] = NOT_LIVE
        unknown[f"{where}.coalescing"] = NOT_LIVE
    return nic


def nic_settings(root: str = "/") -> dict[str, Any]:
    """Network settings of this machine (or of a /sys+/proc snapshot under ``root``).

    Returns (JSON-serialisable)::

      network_schema: 1   root: str   ethtool: path|None   live: bool
      nics: [{name, mtu, speed_mbps, duplex, driver, operstate, tx_queue_len, gro_flush_timeout,
              napi_defer_hard_irqs, rx_queues, tx_queues,
              rps: {enabled, cpus, per_queue_cpus} | None, rfs_flow_cnt, xps_cpus,
              offloads: {gro, gso, tso, lro, rx_checksum, tx_checksum, scatter_gather} | None,
              coalescing: {adaptive_rx, adaptive_tx, rx_usecs, rx_frames, tx_usecs, tx_frames} | None,
              offloads_source, coalescing_source}]     (``lo`` included)
      sysctls: {"net.core.rmem_max": int, "net.ipv4.tcp_rmem": [min, default, max], ...}
      rps_sock_flow_entries: int|None     (RFS global table; 0 = RFS off)
      unknown: {dotted_path: reason}
    """
    unknown: dict[str, str] = {}
    try:
        live = os.path.abspath(root or "/") == "/"
        fs = FsRoot(root or "/")
        names = fs.listdir("/sys/class/net")
        if not names:
            unknown["network.nics"] = "no /sys/class/net"
        nics = []
        for name in names:
            try:
                nics.append(_nic(fs, name, live, unknown))
            except Exception as exc:  # never crash on one odd interface
                unknown[f"network.nics.{name}"] = f"unreadable: {type(exc).__name__}: {exc}"
        sysctls: dict[str, Any] = {}
        for key, kind in SYSCTLS.items():
            path = "/proc/sys/" + key.replace(".", "/")
            sysctls[key] = _parse_sysctl(fs.read(path), kind)
            if sysctls[key] is None:
                unknown[f"network.sysctls.{key}"] = f"no {path} (kernel without it, or not per network namespace)"
        rfs = fs.read_int("/proc/sys/net/core/rps_sock_flow_entries")
        if rfs is None:
            unknown["network.rps_sock_flow_entries"] = (
                "no /proc/sys/net/core/rps_sock_flow_entries (kernel without RPS, or inside a network "
                "namespace: the table is global)")
        return {"network_schema": NETWORK_SCHEMA, "root": root, "live": live,
                "ethtool": shutil.which("ethtool") if live else None,
                "nics": nics, "sysctls": sysctls, "rps_sock_flow_entries": rfs, "unknown": unknown}
    except Exception as exc:  # the contract: never crash
        unknown["network"] = f"network probe failed: {type(exc).__name__}: {exc}"
        return {"network_schema": NETWORK_SCHEMA, "root": root, "live": None, "ethtool": None,
                "nics": None, "sysctls": None, "rps_sock_flow_entries": None, "unknown": unknown}
