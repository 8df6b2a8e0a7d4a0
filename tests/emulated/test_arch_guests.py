"""Issue 27 section 1, full-system: the seeds' cores as QEMU emulates them, each in its own Debian 12 guest
(tests/guestkit.py: ``qemu-system-aarch64 -M virt -cpu cortex-a72`` for the Raspberry Pi 4 of seed 000,
``qemu-system-arm -M virt -cpu cortex-a15`` for the ODROID-XU's big cores of seed 003, ``qemu-system-arm
-M vexpress-a9 -cpu cortex-a9`` for its ODROID-U2 (``virt`` refuses the A9), ``-M virt -cpu cortex-a7`` for the
ODROID-XU's little cores, ``qemu-system-ppc64
-M pseries -cpu power9`` as the nearest to JULI's PowerPC 970MP that Debian ppc64el boots on). Unlike
user mode (test_arches.py), the guest's /proc/cpuinfo and /sys are the emulated CPU's, so here the probe
must name the core, its FLOPs/cycle and Rpeak's inputs, and the build path must take the core's own
``-mcpu=native`` (which gcc resolves from that cpuinfo or, on POWER, the auxiliary vector), and the
kernels built so must run and validate. Figures mean nothing under TCG; the mechanics do.

One guest per architecture (booted once per module parameter; every command bounded; the guest killed on
leaving). Skipped in one line where the machine lacks the QEMU system emulator, root, binfmt or the
registry for a cold image.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest

import emukit
import guestkit

pytestmark = [pytest.mark.integration, pytest.mark.emulated]

ARCHES = [a for a in os.environ.get("CLUSTERBENCH_EMU_GUEST_ARCHES", "arm64,armhf,armhf-a9,armhf-a7,ppc64el").split(",")
          if a]
#: what the probe must find in each guest: uname -m, the core's name in rpeak.py's table, DP FLOPs/cycle/core
CORE = {"arm64": ("aarch64", "Cortex-A72", 4), "armhf": ("armv7l", "Cortex-A15", 2),
        "armhf-a9": ("armv7l", "Cortex-A9", 1), "armhf-a7": ("armv7l", "Cortex-A7", 1), "ppc64el": ("ppc64le", "POWER9", 8)}
#: the core gcc's -mcpu=native resolves to inside the guest
GCC_CPU = {"arm64": "cortex-a72", "armhf": "cortex-a15", "armhf-a9": "cortex-a9", "armhf-a7": "cortex-a7",
           "ppc64el": "power9"}
#: the path peak takes: NEON on arm64, VSX on POWER; ARMv7's NEON has no doubles: scalar there, named
PEAK_PATH = {"arm64": "neon", "armhf": "scalar", "armhf-a9": "scalar", "armhf-a7": "scalar",
             "ppc64el": "vsx"}
#: Arm's MIDR part number of the core (/proc/cpuinfo's "CPU part")
ARM_PART = {"arm64": "0xd08", "armhf": "0xc0f", "armhf-a9": "0xc09", "armhf-a7": "0xc07"}
CPUS = 4  # a Pi 4, an ODROID-XU's big and little clusters and an ODROID-U2 have four cores
CB = ("cd /root && CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1 CLUSTERBENCH_DB=/root/cbt/results.db "
      "CLUSTERBENCH_CACHE=/root/cbt/cache /opt/cbvenv/bin/clusterbench")
TIMES = guestkit.cache_root() / "arch-guest-times.json"


@pytest.fixture(scope="module", autouse=True)
def _binfmt_restored():
    """A cold guest image is built in the user-mode image under binfmt (guestkit.missing enables the entry
    it needs): the machine's binfmt entries as the module found them."""
    yield
    emukit.restore_binfmt()


@pytest.fixture(scope="module", params=ARCHES)
def vm(request):
    arch = request.param
    why = guestkit.missing(arch)
    if why:
        pytest.skip(f"{arch} full-system guest skipped: {why}")
    t0 = time.monotonic()
    cold = not (guestkit.image_dir(arch=arch) / "ready").exists()
    image = guestkit.build_image(arch=arch)
    t_image = round(time.monotonic() - t0, 1)
    # 1 GiB for the 32-bit guests: the most vexpress-a9 takes (an ODROID-U2 has 2 GiB)
    topo = guestkit.Topology(sockets=1, cores=CPUS, mem_mb=1024 if arch.startswith("armhf") else 2048)
    with guestkit.guest(topo, arch=arch, life_s=float(os.environ.get("CLUSTERBENCH_EMU_LIFE_S", "2400"))) as g:
        times = {"arch": arch, "image_s": t_image, "image_cold": cold, "image_build_s": image.info.get("build_s"),
                 "boot_s": g.boot_s}
        print(f"{arch} guest: {json.dumps(times)}", file=sys.stderr)
        with open(TIMES, "a") as f:
            f.write(json.dumps({**times, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
        g.arch = arch
        g.run("rm -rf /root/cbt && mkdir -p /root/cbt", timeout=60)
        yield g


def cb(vm, args: str, timeout: float = 900) -> str:
    return vm.run(f"{CB} {args}", timeout=timeout).stdout


def test_guest_is_the_emulated_core(vm):
    """The kernel's own view: the architecture and the core QEMU was told to be (MIDR on Arm, PVR on POWER)."""
    machine, name, _ = CORE[vm.arch]
    assert vm.run("uname -m").stdout.strip() == machine
    cpuinfo = vm.run("cat /proc/cpuinfo").stdout
    if vm.arch == "ppc64el":
        assert re.search(r"^cpu\s*:\s*POWER9", cpuinfo, re.M), cpuinfo[:600]
    else:  # Arm's implementer 0x41, part 0xd08 (A72) / 0xc0f (A15) / 0xc09 (A9) / 0xc07 (A7)
        assert re.search(r"^CPU part\s*:\s*" + ARM_PART[vm.arch], cpuinfo, re.M), cpuinfo[:600]
    assert int(vm.run("nproc").stdout) == CPUS


def test_probe_names_the_core_and_its_rpeak_inputs(vm):
    """Not EMULATED (the guest's cpuinfo is the emulated CPU's own) but a QEMU virtual machine: the core by
    name, its DP rate, four cores; Rpeak from cores x clock x rate where the guest states a clock (pseries' device tree does), else
    unknown with the reason (QEMU's Arm machine has no cpufreq and its cpuinfo no MHz): never the host's."""
    machine, name, rate = CORE[vm.arch]
    text = cb(vm, "probe", 600)
    assert not text.startswith("EMULATED"), text[:300]
    doc = json.loads(cb(vm, "probe --json", 600))
    assert not doc["environment"].get("emulation"), doc["environment"].get("emulation")
    assert doc["environment"]["hypervisor"] == "qemu"  # a virtual machine, said so (virt's device tree, pseries' cpuinfo)
    cpu, rp = doc["cpu"], doc["rpeak"]
    assert cpu["arch"] == machine and cpu["microarchitecture"] == name, cpu
    assert rp["dp_flops_per_cycle_per_core"] == {name: rate}, rp
    assert doc["topology"]["cores"] == CPUS, doc["topology"]
    mhz = rp.get("clock_nominal_mhz")
    if mhz:
        assert rp["node"]["dp_gflops_nominal"] == pytest.approx(CPUS * mhz * rate / 1000, rel=1e-3), rp
    else:
        assert rp["node"]["dp_gflops_nominal"] is None and "clock" in json.dumps(doc["unknown"]), doc["unknown"]
    # the seeds' figures from the same rate: a Pi 4 node 4 x 1.5 GHz x 4 = 24 Gflop/s (seed 000 section 5.1)
    if vm.arch == "arm64":
        assert CPUS * 1.5 * rate == 24
    print(f"{vm.arch}: probe {cpu['microarchitecture']} x {doc['topology']['cores']}, {rate} DP FLOPs/cycle, "
          f"clock {mhz} MHz, node Rpeak {rp['node']['dp_gflops_nominal']}")


def test_native_build_is_the_cores_and_peak_validates(vm):
    """gcc -mcpu=native in the guest resolves to the core; the build path chooses it there (under user mode
    armhf and ppc64el had to leave it out) and peak, built so, runs its path and validates."""
    resolved = vm.run("gcc -mcpu=native -Q --help=target | grep -E '^ +-mcpu=' | head -n 1", timeout=300).stdout
    assert GCC_CPU[vm.arch] in resolved, resolved
    doc = json.loads(cb(vm, "run peak --quick --json", 1800))
    assert doc["run"]["status"] == "complete", doc["run"]
    flags = " ".join(map(str, doc["run"]["builds"]["peak"].get("flags") or []))
    assert "-mcpu=native" in flags, flags
    paths = {str(r["params"].get("isa")) for r in doc["results"] if r["benchmark"] == "peak"}
    assert paths == {PEAK_PATH[vm.arch]}, paths  # a complete run: every record passed the kernel's own check
    print(f"{vm.arch}: gcc {' '.join(resolved.split())}; peak built with {flags}, ran its {sorted(paths)} path")
