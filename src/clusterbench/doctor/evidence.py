"""The evidence ``clusterbench doctor`` judges: one node's settings, each with where it was read.

``gather(root="/")`` reads this machine (or a ``/sys`` + ``/proc`` snapshot under ``root``) and
returns a JSON-serialisable document::

  evidence_schema: 1   host: str|None   root: str   live: bool
  items: {key: {value, source, readable, why}}       (node-wide, keys in :data:`ITEMS`)
  nics:  {ifname: {key: {value, source, readable, why}}}   (``lo`` and interfaces that are down skipped;
                                                            keys in :data:`NIC_ITEMS`)

Every item says where its value came from (a path or a command) and, when it could not be read,
why (``readable: False``): a rule that needs it then says "cannot tell", never "ok".

Most of it is what the machine probe and the NIC probe already read (``probe()`` and
``network.nic_settings()``); this module adds what they do not keep: swap in use, every CPU's
governor, stolen time over a short interval, thermal zones, NET_RX/NET_TX softirqs per CPU, the
largest MTU a NIC takes, the core type OpenBLAS picks, and a Raspberry Pi's ``get_throttled``.
Gathering on a node of a cluster is one call per node (:data:`SNIPPET`, run by
``launch.remote.gather``), never one per item.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from typing import Any

from clusterbench.probe.sysfs import FsRoot, parse_cpulist
from clusterbench import process

EVIDENCE_SCHEMA = 1
TIMEOUT = 5.0
#: seconds between the two reads of /proc/stat for stolen time (live machine only)
STEAL_INTERVAL = 1.0
LIVE_ONLY = "needs the running machine (not in a /sys+/proc snapshot)"

#: the node-wide evidence keys (what a rule may ask for)
ITEMS = (
    "sysctl.net.core.rmem_max", "sysctl.net.core.wmem_max", "sysctl.net.ipv4.tcp_rmem", "sysctl.net.ipv4.tcp_wmem",
    "sysctl.net.core.rps_sock_flow_entries", "sysctl.kernel.numa_balancing",
    "thp.enabled", "thp.defrag", "swap", "cpufreq.governors", "cpufreq.boost", "kernel.preemption",
    "cpus.online", "numa.nodes", "steal", "hypervisor", "thermal", "softirqs.net", "blas.openblas_core",
    "cpu.isa", "software", "pi.throttled",
)
#: per-NIC evidence keys
NIC_ITEMS = ("mtu", "max_mtu", "rx_queues", "rps_cpus", "rfs_flow_cnt", "coalescing", "speed_mbps", "driver")

#: prints gather()'s document as one JSON line (run on each node by launch.remote.gather)
SNIPPET = ("import json; from clusterbench.doctor.evidence import gather; "
           "print(json.dumps(gather()))")


def snippet(steal_interval: float = STEAL_INTERVAL) -> str:
    """:data:`SNIPPET` with stolen time read over ``steal_interval`` seconds (0: since boot, no wait)."""
    if steal_interval == STEAL_INTERVAL:
        return SNIPPET
    return ("import json; from clusterbench.doctor.evidence import gather; "
            f"print(json.dumps(gather(steal_interval={float(steal_interval)!r})))")


def item(value: Any, source: str, readable: bool = True, why: str | None = None) -> dict[str, Any]:
    """One piece of evidence."""
    return {"value": value, "source": source, "readable": bool(readable), "why": why}


def unreadable(source: str, why: str) -> dict[str, Any]:
    return item(None, source, False, why)


def _run(argv: list[str]) -> tuple[str | None, str | None]:
    """(stdout, None) or (None, why)."""
    exe = shutil.which(argv[0])
    if exe is None:
        return None, f"{argv[0]} is not installed"
    try:
        p = process.run([exe, *argv[1:]], timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, f"`{' '.join(argv)}` did not answer within {TIMEOUT:g} s"
    except OSError as exc:
        return None, f"`{' '.join(argv)}` failed: {exc}"
    if p.returncode != 0:
        err = (p.stderr or p.stdout or "").strip().splitlines()
        return None, f"`{' '.join(argv)}`: {err[-1] if err else f'exit {p.returncode}'}"
    return p.stdout, None


# --------------------------------------------------------------------------- parsers (pure)


def parse_meminfo_swap(text: str | None) -> dict[str, Any] | None:
    """SwapTotal/SwapFree/SwapCached (kB) from /proc/meminfo -> {total_kb, free_kb, used_kb}."""
    if not text:
        return None
    got: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^(SwapTotal|SwapFree|SwapCached):\s+(\d+)", line)
        if m:
            got[m.group(1)] = int(m.group(2))
    if "SwapTotal" not in got or "SwapFree" not in got:
        return None
    return {"total_kb": got["SwapTotal"], "free_kb": got["SwapFree"],
            "used_kb": max(0, got["SwapTotal"] - got["SwapFree"])}


def parse_swaps(text: str | None) -> list[dict[str, Any]] | None:
    """/proc/swaps -> [{name, type, size_kb, used_kb}]."""
    if text is None:
        return None
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) >= 4 and f[2].isdigit() and f[3].isdigit():
            out.append({"name": f[0], "type": f[1], "size_kb": int(f[2]), "used_kb": int(f[3])})
    return out


def parse_stat_cpu(text: str | None) -> list[int] | None:
    """The aggregate ``cpu`` line of /proc/stat -> its counters (user nice system idle iowait irq
    softirq steal ...), or None."""
    for line in (text or "").splitlines():
        if line.startswith("cpu "):
            try:
                return [int(x) for x in line.split()[1:]]
            except ValueError:
                return None
    return None


def steal_percent(before: list[int], after: list[int]) -> float | None:
    """Stolen share (%) of all CPU time between two /proc/stat readings (guest time excluded: it
    is already counted in user). None when the kernel reports no steal column or no time passed."""
    if len(before) < 8 or len(after) < 8:
        return None
    d = [a - b for a, b in zip(after[:8], before[:8])]
    total = sum(d)
    return 100.0 * d[7] / total if total > 0 else None


def parse_softirqs(text: str | None) -> dict[str, list[int]] | None:
    """/proc/softirqs -> {"NET_RX": [per CPU], "NET_TX": [...]}."""
    if not text:
        return None
    out: dict[str, list[int]] = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        if name.strip() in ("NET_RX", "NET_TX"):
            try:
                out[name.strip()] = [int(x) for x in rest.split()]
            except ValueError:
                return None
    return out or None


def preemption_from(uname_v: str | None, cmdline: str | None, debugfs: str | None) -> tuple[str | None, str]:
    """(model, how it was found): ``none``, ``voluntary``, ``full`` or ``rt``, or None.

    The effective model of a PREEMPT_DYNAMIC kernel is in /sys/kernel/debug/sched/preempt (root,
    debugfs mounted) or set by ``preempt=`` on the kernel command line; a kernel built without it
    says so in ``uname -v`` (PREEMPT_RT, PREEMPT = full, neither = none or voluntary, which uname
    cannot tell apart)."""
    if debugfs:
        m = re.search(r"\(([^)]+)\)", debugfs) or re.search(r"\[([^\]]+)\]", debugfs)
        if m:
            return m.group(1).strip(), "/sys/kernel/debug/sched/preempt"
    v = uname_v or ""
    if "PREEMPT_RT" in v:
        return "rt", "uname -v (PREEMPT_RT)"
    if "PREEMPT_DYNAMIC" in v:
        m = re.search(r"(?:^|\s)preempt=(\w+)", cmdline or "")
        if m:
            return m.group(1), "/proc/cmdline preempt= (PREEMPT_DYNAMIC kernel)"
        return None, ("PREEMPT_DYNAMIC kernel without preempt= on its command line: the effective model is "
                      "only in /sys/kernel/debug/sched/preempt (needs root and debugfs mounted)")
    if re.search(r"\bPREEMPT\b", v):
        return "full", "uname -v (PREEMPT)"
    if v:
        return None, ("uname -v names no PREEMPT option: the kernel is either voluntary or none, which uname "
                      "cannot tell apart (see CONFIG_PREEMPT_* in /boot/config-$(uname -r))")
    return None, "no kernel version string"


# --------------------------------------------------------------------------- readers


def _sysctl(fs: FsRoot, name: str, ints: bool) -> dict[str, Any]:
    path = "/proc/sys/" + name.replace(".", "/")
    text = fs.read(path)
    if text is None:
        why = (f"no {path}: inside a network namespace the global net.core values are not visible"
               if name.startswith("net.") else f"no {path}")
        return unreadable(path, why)
    try:
        vals = [int(x) for x in text.split()]
    except ValueError:
        return unreadable(path, f"{path} holds {text!r}, not numbers")
    it = item(vals if ints else vals[0], path)
    try:  # a global value shown read-only inside a network namespace (net.core.rmem_max on recent kernels)
        if not os.stat(fs.path(path)).st_mode & 0o222:
            it["read_only"] = True
    except OSError:
        pass
    return it


def _governors(fs: FsRoot) -> dict[str, Any]:
    """{governor: [cpus]} from every cpufreq policy (or per-CPU cpufreq directory)."""
    src = "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
    found: dict[str, list[int]] = {}
    for d in fs.listdir("/sys/devices/system/cpu"):
        m = re.fullmatch(r"cpu(\d+)", d)
        if not m:
            continue
        g = fs.read(f"/sys/devices/system/cpu/{d}/cpufreq/scaling_governor")
        if g:
            found.setdefault(g, []).append(int(m.group(1)))
    if not found:  # snapshots often keep only the policies
        src = "/sys/devices/system/cpu/cpufreq/policy*/scaling_governor"
        for d in fs.listdir("/sys/devices/system/cpu/cpufreq"):
            if not d.startswith("policy"):
                continue
            g = fs.read(f"/sys/devices/system/cpu/cpufreq/{d}/scaling_governor")
            cpus = parse_cpulist(fs.read(f"/sys/devices/system/cpu/cpufreq/{d}/affected_cpus")
                                 or fs.read(f"/sys/devices/system/cpu/cpufreq/{d}/related_cpus")) or set()
            if g:
                found.setdefault(g, []).extend(sorted(cpus) or [int(d[6:]) if d[6:].isdigit() else -1])
    if not found:
        return unreadable(src, "no cpufreq in /sys (a VM, where the host sets the clock, or no cpufreq driver)")
    return item({g: sorted(c) for g, c in sorted(found.items())}, src)


def _boost(fs: FsRoot) -> dict[str, Any]:
    no_turbo = fs.read_int("/sys/devices/system/cpu/intel_pstate/no_turbo")
    if no_turbo is not None:
        return item(no_turbo == 0, "/sys/devices/system/cpu/intel_pstate/no_turbo")
    boost = fs.read_int("/sys/devices/system/cpu/cpufreq/boost")
    if boost is not None:
        return item(bool(boost), "/sys/devices/system/cpu/cpufreq/boost")
    return unreadable("/sys/devices/system/cpu/intel_pstate/no_turbo, /sys/devices/system/cpu/cpufreq/boost",
                      "neither exists (no boost control: a VM, or a CPU without turbo)")


def _steal(fs: FsRoot, live: bool, interval: float) -> dict[str, Any]:
    first = parse_stat_cpu(fs.read("/proc/stat"))
    if first is None:
        return unreadable("/proc/stat", "no cpu line in /proc/stat")
    if len(first) < 8:
        return unreadable("/proc/stat", "this kernel's /proc/stat has no steal column")
    if not live or interval <= 0:
        pct = steal_percent([0] * len(first), first)
        return item({"percent": None if pct is None else round(pct, 2), "interval_s": None, "since": "boot"},
                    "/proc/stat (since boot: a snapshot has one reading)")
    time.sleep(interval)
    second = parse_stat_cpu(fs.read("/proc/stat"))
    pct = steal_percent(first, second) if second else None
    if pct is None:
        return unreadable("/proc/stat", "no CPU time passed between the two reads")
    return item({"percent": round(pct, 2), "interval_s": interval, "since": "interval"},
                f"/proc/stat read twice {interval:g} s apart")


def _thermal(fs: FsRoot) -> dict[str, Any]:
    zones = []
    for z in fs.listdir("/sys/class/thermal"):
        if not z.startswith("thermal_zone"):
            continue
        t = fs.read_int(f"/sys/class/thermal/{z}/temp")
        if t is None:
            continue
        zones.append({"zone": z, "type": fs.read(f"/sys/class/thermal/{z}/type"), "temp_c": t / 1000.0})
    if not zones:
        return unreadable("/sys/class/thermal/thermal_zone*/temp",
                          "no thermal zone with a readable temperature (a VM, or no thermal driver)")
    return item(zones, "/sys/class/thermal/thermal_zone*/temp, type")


#: the Raspberry Pi kernel's copy of get_throttled (bare hex), where its firmware driver provides it
PI_THROTTLED = "/sys/devices/platform/soc/soc:firmware/get_throttled"


def pi_throttled(fs: FsRoot, live: bool) -> dict[str, Any]:
    """A Raspberry Pi's get_throttled mask with its flags (sysfs, else ``vcgencmd get_throttled``);
    ``None`` (readable) on a machine that is not a Raspberry Pi."""
    from clusterbench.telemetry.vcgencmd import parse_throttled, throttled_doc

    model = (fs.read("/proc/device-tree/model") or "").strip("\x00 \n")
    is_pi = model.startswith("Raspberry Pi")
    raw, src = fs.read(PI_THROTTLED), PI_THROTTLED
    if raw is None and live:
        src = "vcgencmd get_throttled"
        raw, why = _run(["vcgencmd", "get_throttled"])
        if raw is None:
            if shutil.which("vcgencmd") is None and not is_pi:
                return item(None, f"{src} (not installed: not a Raspberry Pi)")
            return unreadable(src, f"{why} (install raspi-utils or libraspberrypi-bin; vcgencmd needs the video group)")
    if raw is None:
        return unreadable(src, LIVE_ONLY) if is_pi else item(None, f"{src} (absent: not a Raspberry Pi)")
    try:
        return item(throttled_doc(parse_throttled(raw)), src)
    except ValueError as exc:
        return unreadable(src, str(exc))


def _max_mtus(live: bool) -> tuple[dict[str, int] | None, str | None]:
    """{ifname: max_mtu} from ``ip -j -d link show`` (live only), or (None, why)."""
    if not live:
        return None, LIVE_ONLY
    out, why = _run(["ip", "-j", "-d", "link", "show"])
    if out is None:
        return None, why
    try:
        return {d["ifname"]: d["max_mtu"] for d in json.loads(out) if "max_mtu" in d}, None
    except (ValueError, KeyError, TypeError) as exc:
        return None, f"`ip -j -d link show` gave no usable JSON ({exc})"


def _openblas_core(live: bool) -> dict[str, Any]:
    src = "openblas_get_corename() of the OpenBLAS the dynamic linker finds"
    if not live:
        return unreadable(src, LIVE_ONLY)
    from clusterbench.errors import ClusterbenchError
    from clusterbench.probe import blas

    path = blas.installed_blas().get("openblas")
    if path is None:
        return item({"path": None, "core": None}, src)  # no OpenBLAS: nothing to judge
    try:
        core = blas.openblas_corename(path)
    except ClusterbenchError as exc:
        return unreadable(f"openblas_get_corename() of {path}", str(exc))
    return item({"path": path, "core": core}, f"openblas_get_corename() of {path}")


def _nic_items(n: dict[str, Any], unknown: dict[str, str], max_mtu: dict[str, int] | None,
               max_why: str | None) -> dict[str, dict[str, Any]]:
    name = n["name"]
    base = f"/sys/class/net/{name}"

    def why(key: str, default: str) -> str:
        return unknown.get(f"network.nics.{name}.{key}") or default

    out: dict[str, dict[str, Any]] = {}
    out["mtu"] = item(n["mtu"], f"{base}/mtu") if n.get("mtu") is not None else \
        unreadable(f"{base}/mtu", why("mtu", "not readable"))
    if max_mtu is not None and name in max_mtu:
        out["max_mtu"] = item(max_mtu[name], "ip -j -d link show (max_mtu)")
    else:
        out["max_mtu"] = unreadable("ip -j -d link show (max_mtu)", max_why or "the kernel reports no max_mtu")
    out["rx_queues"] = item(n["rx_queues"], f"{base}/queues/rx-*") if n.get("rx_queues") is not None else \
        unreadable(f"{base}/queues/rx-*", "no queues directory")
    rps = n.get("rps")
    out["rps_cpus"] = item(rps["per_queue_cpus"], f"{base}/queues/rx-*/rps_cpus") if rps is not None else \
        unreadable(f"{base}/queues/rx-*/rps_cpus", why("rps", "not readable"))
    out["rfs_flow_cnt"] = item(n["rfs_flow_cnt"], f"{base}/queues/rx-*/rps_flow_cnt") \
        if n.get("rfs_flow_cnt") is not None else \
        unreadable(f"{base}/queues/rx-*/rps_flow_cnt", why("rfs_flow_cnt", "not readable"))
    src = f"{n.get('coalescing_source') or 'ethtool -c'} {name}"
    out["coalescing"] = item(n["coalescing"], src) if n.get("coalescing") is not None else \
        unreadable(f"ethtool -c {name}", why("coalescing", "unreadable"))
    out["speed_mbps"] = item(n.get("speed_mbps"), f"{base}/speed", n.get("speed_mbps") is not None,
                             None if n.get("speed_mbps") is not None else why("speed_mbps", "no link speed"))
    out["driver"] = item(n.get("driver"), f"{base}/device/driver", n.get("driver") is not None,
                         None if n.get("driver") is not None else why("driver", "no driver link"))
    return out


def gather(root: str = "/", *, steal_interval: float = STEAL_INTERVAL) -> dict[str, Any]:
    """The evidence of this machine (or of a snapshot under ``root``); see the module docstring.
    Never raises for a missing file: the item is unreadable, with why."""
    from clusterbench.probe import probe
    from clusterbench.probe.network import nic_settings

    live = os.path.abspath(root or "/") == "/"
    fs = FsRoot(root or "/")
    p = probe(None if live else root, use_hwloc=False)
    net = nic_settings(root)
    env = p.get("environment") or {}
    unknown = {**(p.get("unknown") or {}), **(net.get("unknown") or {})}
    items: dict[str, dict[str, Any]] = {}
    for name in ("net.core.rmem_max", "net.core.wmem_max", "net.core.rps_sock_flow_entries", "kernel.numa_balancing"):
        items[f"sysctl.{name}"] = _sysctl(fs, name, ints=False)
    for name in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
        items[f"sysctl.{name}"] = _sysctl(fs, name, ints=True)
    thp = "/sys/kernel/mm/transparent_hugepage"
    for key in ("enabled", "defrag"):
        v = env.get("thp" if key == "enabled" else "thp_defrag")
        items[f"thp.{key}"] = item(v, f"{thp}/{key}") if v is not None else \
            unreadable(f"{thp}/{key}", f"no {thp}/{key} (kernel without THP)")
    swap = parse_meminfo_swap(fs.read("/proc/meminfo"))
    if swap is None:
        items["swap"] = unreadable("/proc/meminfo", "no SwapTotal/SwapFree in /proc/meminfo")
    else:
        swap["devices"] = parse_swaps(fs.read("/proc/swaps"))
        items["swap"] = item(swap, "/proc/meminfo (SwapTotal - SwapFree), /proc/swaps")
    items["cpufreq.governors"] = _governors(fs)
    items["cpufreq.boost"] = _boost(fs)
    model, how = preemption_from(os.uname().version if live else fs.read("/proc/version"), fs.read("/proc/cmdline"),
                                 fs.read("/sys/kernel/debug/sched/preempt"))
    items["kernel.preemption"] = item(model, how) if model else unreadable("uname -v, /proc/cmdline", how)
    online = parse_cpulist(fs.read("/sys/devices/system/cpu/online"))
    items["cpus.online"] = item(sorted(online), "/sys/devices/system/cpu/online") if online else \
        unreadable("/sys/devices/system/cpu/online", "not readable")
    nn = (p.get("topology") or {}).get("numa_nodes")
    items["numa.nodes"] = item(nn, "/sys/devices/system/node") if nn else \
        unreadable("/sys/devices/system/node", unknown.get("topology", "no NUMA information"))
    items["steal"] = _steal(fs, live, steal_interval)
    hv_src = "/sys/hypervisor/type, systemd-detect-virt, DMI, cpuinfo hypervisor flag"
    items["hypervisor"] = item(env.get("hypervisor"), hv_src)
    items["thermal"] = _thermal(fs)
    sirq = parse_softirqs(fs.read("/proc/softirqs"))
    items["softirqs.net"] = item(sirq, "/proc/softirqs (at rest)") if sirq else \
        unreadable("/proc/softirqs", "no NET_RX/NET_TX lines")
    items["blas.openblas_core"] = _openblas_core(live)
    items["pi.throttled"] = pi_throttled(fs, live)
    cpu = p.get("cpu") or {}
    items["cpu.isa"] = item({"isa": cpu.get("isa") or [], "vendor": cpu.get("vendor"),
                             "model_name": cpu.get("model_name")}, "/proc/cpuinfo")
    if live:
        items["software"] = item({k: env.get(k) for k in ("kernel", "mpi", "blas", "compilers")},
                                 "uname -r, mpirun --version, ldconfig -p, cc --version")
    else:
        items["software"] = unreadable("uname -r, mpirun --version, ldconfig -p", LIVE_ONLY)
    max_mtu, max_why = _max_mtus(live)
    nics: dict[str, dict[str, dict[str, Any]]] = {}
    for n in net.get("nics") or []:
        if n["name"] == "lo" or (n.get("operstate") or "").lower() == "down":
            continue
        nics[n["name"]] = _nic_items(n, unknown, max_mtu, max_why)
    return {"evidence_schema": EVIDENCE_SCHEMA, "host": p.get("hostname"), "root": p.get("root"), "live": live,
            "items": items, "nics": nics}
