"""Software/OS settings that change benchmark results (governor, THP, SMT, ...).

Why: a benchmark number is only comparable if the conditions are recorded.
Items that exist only on a live machine (uname, NICs, installed MPI/BLAS/
compilers) are ``None`` for a snapshot root, with reason "not in snapshot".
External commands use a 5 s timeout and never raise.
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from typing import Any

from clusterbench.probe.sysfs import FsRoot
from clusterbench import process

TIMEOUT = 5.0
NOT_IN_SNAPSHOT = "not in snapshot (live-only information)"


def _run(cmd: list[str]) -> str | None:
    """Output (stdout+stderr) of a command, or None on any failure."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        p = process.run(cmd, timeout=TIMEOUT)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    out = (p.stdout or "") + (p.stderr or "")
    return out if out.strip() else None


def _bracketed(text: str | None) -> str | None:
    """``always [madvise] never`` -> ``madvise``."""
    if not text:
        return None
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text.strip() or None


def _version_line(text: str | None) -> str | None:
    if not text:
        return None
    for line in text.splitlines():
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", line)
        if m:
            return m.group(1)
    return None


def detect_mpi() -> list[dict[str, Any]]:
    """MPI implementations on PATH (mpirun --version, mpichversion, ompi_info)."""
    out = []
    for cmd in (["mpirun", "--version"], ["mpichversion"], ["ompi_info", "--version"]):
        text = _run(cmd)
        if not text:
            continue
        low = text.lower()
        name = "Open MPI" if "open mpi" in low or "openrte" in low else "MPICH" if "mpich" in low else \
            "Intel MPI" if "intel" in low else "MVAPICH" if "mvapich" in low else cmd[0]
        entry = {"name": name, "version": _version_line(text), "path": shutil.which(cmd[0])}
        if not any(e["name"] == name and e["version"] == entry["version"] for e in out):
            out.append(entry)
    return out


def detect_blas() -> list[dict[str, Any]]:
    """BLAS libraries known to the dynamic linker (ldconfig -p)."""
    text = _run(["ldconfig", "-p"]) or _run(["/sbin/ldconfig", "-p"]) or ""
    out = []
    for line in text.splitlines():
        m = re.search(r"(lib(openblas|blis|mkl_rt|blas|flexiblas|armpl)[^\s]*)\s.*=>\s*(\S+)", line)
        if m:
            entry = {"name": m.group(2), "path": m.group(3)}
            if entry not in out:
                out.append(entry)
    return out


def detect_compilers() -> list[dict[str, Any]]:
    """C compilers on PATH with their versions."""
    out = []
    for name in ("cc", "gcc", "clang", "icx", "mpicc"):
        path = shutil.which(name)
        if not path:
            continue
        text = _run([name, "--version"])
        out.append({"name": name, "version": _version_line(text), "path": path})
    return out


def detect_nics(fs: FsRoot) -> list[dict[str, Any]]:
    """Network interfaces from /sys/class/net (loopback skipped)."""
    out = []
    for name in fs.listdir("/sys/class/net"):
        if name == "lo":
            continue
        base = f"/sys/class/net/{name}"
        speed = fs.read_int(f"{base}/speed")
        try:
            driver = os.path.basename(os.readlink(fs.path(f"{base}/device/driver")))
        except OSError:
            driver = None
        out.append({"name": name, "speed_mbps": speed if speed and speed > 0 else None,
                    "mtu": fs.read_int(f"{base}/mtu"), "driver": driver, "operstate": fs.read(f"{base}/operstate")})
    return out


def _hypervisor(fs: FsRoot, flags: set[str], live: bool) -> str | None:
    text = fs.read("/sys/hypervisor/type")
    if text:
        return text
    if live:
        v = _run(["systemd-detect-virt", "--vm"])
        if v and v.strip() not in ("none", ""):
            return v.strip()
    vendor = " ".join(filter(None, [fs.read("/sys/class/dmi/id/sys_vendor"), fs.read("/sys/class/dmi/id/product_name")]))
    for key, name in (("KVM", "kvm"), ("QEMU", "qemu"), ("VMware", "vmware"), ("VirtualBox", "oracle"),
                      ("Microsoft", "microsoft"), ("Xen", "xen"), ("Amazon EC2", "amazon"), ("Google", "google")):
        if key.lower() in vendor.lower():
            return name
    # QEMU's Arm 'virt' machine has no DMI, its device tree says so; its pseries machine says so in cpuinfo
    dt = "/sys/firmware/devicetree/base"
    if "linux,dummy-virt" in (fs.read(f"{dt}/compatible") or ""):
        return "qemu"
    # a real board's tree (QEMU's vexpress-a9 loads the Versatile Express's own) to which QEMU added its
    # virtio-mmio transports at the root: no such board has them
    if any(n.startswith("virtio_mmio@") and (fs.read(f"{dt}/{n}/compatible") or "").startswith("virtio,mmio")
           for n in fs.listdir(dt)):
        return "qemu"
    if "emulated by qemu" in (fs.read("/proc/cpuinfo") or "").lower():
        return "qemu"
    return "unknown hypervisor" if "hypervisor" in flags else None


def _container(fs: FsRoot, live: bool) -> str | None:
    if fs.exists("/.dockerenv"):
        return "docker"
    if fs.exists("/run/.containerenv"):
        return "podman"
    if live and os.environ.get("container"):
        return os.environ["container"]
    cg = fs.read("/proc/1/cgroup") or ""
    for key in ("kubepods", "docker", "lxc", "containerd"):
        if key in cg:
            return key
    return None


def read_environment(fs: FsRoot, live: bool, flags: set[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Build the ``environment`` section; returns (dict, unknown reasons)."""
    unknown: dict[str, str] = {}
    env: dict[str, Any] = {}
    version = fs.read("/proc/version")
    if live:
        env["kernel"] = platform.release()
        uname_v = platform.version()
    else:
        env["kernel"] = fs.read("/proc/sys/kernel/osrelease") or (version.split()[2] if version and len(version.split()) > 2 else None)
        uname_v = version or ""
    pre = fs.read("/sys/kernel/debug/sched/preempt")
    if pre:
        env["preemption"] = _bracketed(pre)
    else:
        m = re.search(r"PREEMPT_DYNAMIC|PREEMPT_RT|PREEMPT", uname_v or "")
        env["preemption"] = m.group(0) if m else ("none/voluntary" if uname_v else None)
    env["governor"] = fs.read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    no_turbo = fs.read_int("/sys/devices/system/cpu/intel_pstate/no_turbo")
    boost = fs.read_int("/sys/devices/system/cpu/cpufreq/boost")
    env["turbo"] = (no_turbo == 0) if no_turbo is not None else (bool(boost) if boost is not None else None)
    smt = fs.read_int("/sys/devices/system/cpu/smt/active")
    env["smt_active"] = bool(smt) if smt is not None else None
    env["thp"] = _bracketed(fs.read("/sys/kernel/mm/transparent_hugepage/enabled"))
    env["thp_defrag"] = _bracketed(fs.read("/sys/kernel/mm/transparent_hugepage/defrag"))
    nb = fs.read_int("/proc/sys/kernel/numa_balancing")
    env["numa_balancing"] = bool(nb) if nb is not None else None
    env["hypervisor"] = _hypervisor(fs, flags, live)
    env["container"] = _container(fs, live)
    vul = {}
    for name in fs.listdir("/sys/devices/system/cpu/vulnerabilities"):
        vul[name] = fs.read(f"/sys/devices/system/cpu/vulnerabilities/{name}")
    env["cpu_mitigations"] = vul or None
    reasons = {
        "kernel": "no /proc/sys/kernel/osrelease or /proc/version",
        "preemption": "kernel version string unavailable",
        "governor": "no cpufreq in /sys (VM or driver not loaded)",
        "turbo": "no intel_pstate/no_turbo nor cpufreq/boost",
        "smt_active": "no /sys/devices/system/cpu/smt/active (old kernel)",
        "thp": "no /sys/kernel/mm/transparent_hugepage",
        "thp_defrag": "no /sys/kernel/mm/transparent_hugepage",
        "numa_balancing": "no /proc/sys/kernel/numa_balancing",
        "cpu_mitigations": "no /sys/devices/system/cpu/vulnerabilities",
    }
    for k, why in reasons.items():
        if env.get(k) is None:
            unknown[f"environment.{k}"] = why
    if live:
        env["nics"] = detect_nics(fs)
        env["mpi"] = detect_mpi()
        env["blas"] = detect_blas()
        env["compilers"] = detect_compilers()
    else:
        for k in ("nics", "mpi", "blas", "compilers"):
            env[k] = None
            unknown[f"environment.{k}"] = NOT_IN_SNAPSHOT
    return env, unknown
