"""The emulated tier, section 1 of issue 27: clusterbench on arm64, armhf and ppc64el under QEMU user mode.

Each architecture's Debian 12 image (tests/emukit.py: built once, cached outside the tree) runs the user's
flow with the checkout installed as the README says: `probe`, `run node --quick` (every node kernel built
by the project's own build path with the flags it chooses there, each validated), the MPI and HPCC
benchmarks on 2 ranks over shared memory, the store and `compare`. The figures mean nothing (emulated);
the code paths, the validation and the flow do. Where a kernel has an architecture-specific path it must
be the one that ran; where it has none, the output must name the generic path.

When the machine forbids the tier (not root, no binfmt_misc, no image and no registry), the module is
skipped with ONE line saying why.
"""
from __future__ import annotations

import json
import os
import time

import pytest

import emukit

pytestmark = [pytest.mark.integration, pytest.mark.emulated]

ARCHES = [a for a in os.environ.get("CLUSTERBENCH_EMU_ARCHES", "arm64,armhf,ppc64el").split(",") if a]
#: every clusterbench run inside: the store and kernel cache of this session, as root (MPI needs consent)
ENV = {"CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1", "CLUSTERBENCH_DB": "/root/emu-tier/results.db",
       "CLUSTERBENCH_CACHE": "/root/emu-tier/cache"}
#: the path peak (kernels/node/peak.c) must take on each architecture: NEON where it has one, else scalar
PEAK_PATH = {"arm64": "neon", "armhf": "scalar", "ppc64el": "vsx"}
#: what QEMU's default CPU of each architecture declares in AT_HWCAP (the probe's emulated isa)
HWCAP = {"arm64": {"fp", "asimd"}, "armhf": {"neon", "vfpv3"}, "ppc64el": {"altivec", "vsx"}}
TIMES: dict[str, float] = {}
PDES = "run pdes --ranks 2 --lps 64 --end 100 --repeat 1 --event-memory 64"


def _grouped(whys: dict[str, str]) -> str:
    by: dict[str, list[str]] = {}
    for a, w in whys.items():
        by.setdefault(w, []).append(a)
    return "; ".join(f"{', '.join(arches)}: {w}" for w, arches in by.items())


FORBIDDEN = {a: w for a in ARCHES if (w := emukit.machine_forbids(a))}
if FORBIDDEN and len(FORBIDDEN) == len(ARCHES):
    pytest.skip(f"emulated tier skipped: {_grouped(FORBIDDEN)}", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def _binfmt_restored():
    yield
    emukit.restore_binfmt()
    if TIMES:
        print("\nemulated tier, seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in TIMES.items()))


#: images a run may build from nothing (a cold build is minutes of emulated dpkg: docs/emulation.md); the
#: others wait, cached, for the next run
COLD_BUILDS = int(os.environ.get("CLUSTERBENCH_EMU_COLD_BUILDS", "1"))
_COLD: list[str] = []


@pytest.fixture(scope="module", params=ARCHES)
def arch(request) -> str:
    a = request.param
    if a in FORBIDDEN:
        pytest.skip(f"emulated tier: {a} skipped: {FORBIDDEN[a]}")
    if not emukit.ready(a):
        if len(_COLD) >= COLD_BUILDS:
            pytest.skip(f"emulated tier: {a} skipped: no cached image, and this run already built {', '.join(_COLD)} "
                        f"(CLUSTERBENCH_EMU_COLD_BUILDS={COLD_BUILDS} keeps a cold run within 30 minutes); the next "
                        f"run builds it, or now: python tests/emukit.py build {a}")
        _COLD.append(a)
    t = time.monotonic()
    emukit.build(a)  # cached: returns at once; cold: minutes (docs/emulation.md)
    TIMES[f"{a} image"] = time.monotonic() - t
    p = emukit.run(a, "rm -rf /root/emu-tier && mkdir -p /root/emu-tier", timeout=60)
    assert p.returncode == 0, p.stderr
    return a


def cb(arch: str, args: str, timeout: float = 900) -> str:
    """`clusterbench <args>` inside the image; its stdout (the step's time kept in TIMES)."""
    t = time.monotonic()
    p = emukit.run(arch, f"clusterbench {args}", timeout=timeout, env=ENV)
    TIMES[f"{arch} {args.split(' --')[0]}"] = time.monotonic() - t
    assert p.returncode == 0, f"clusterbench {args} on {arch}: {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def cb_json(arch: str, args: str, timeout: float = 900) -> dict:
    return json.loads(cb(arch, args + " --json", timeout))


def test_probe_says_emulated_and_never_presents_the_host(arch):
    text = cb(arch, "probe")
    assert text.startswith("EMULATED "), text[:400]
    doc = cb_json(arch, "probe")
    emu = doc["environment"]["emulation"]
    assert emu["mode"] == "qemu-user" and emu["guest_arch"] == emukit.ARCHES[arch][0]
    assert emu["host_cpuinfo_arch"] == "x86"  # this tier runs on x86 hosts
    cpu = doc["cpu"]
    assert cpu["arch"] == emukit.ARCHES[arch][0]
    assert cpu["vendor"] is None and cpu["model_name"] is None and cpu["microarchitecture"] is None
    assert "emulated" in doc["unknown"]["cpu.vendor"] and "emulated" in doc["unknown"]["rpeak"]
    assert not (doc["rpeak"].get("node") or {}).get("dp_gflops_nominal")  # no host Rpeak passed off as this CPU's
    assert HWCAP[arch] <= set(cpu["isa"]), cpu["isa"]


def test_node_quick_every_kernel_built_here_and_validated(arch):
    doc = cb_json(arch, "run node --quick", timeout=1500)
    run = doc["run"]
    assert run["status"] == "complete", run
    assert run["probe"]["environment"]["emulation"]["guest_arch"] == emukit.ARCHES[arch][0]  # stored with the run
    builds = run["builds"]
    assert builds, "no kernel built"
    for name, info in builds.items():
        flags = " ".join(map(str, info.get("flags") or []))
        if arch in ("armhf", "ppc64el"):  # -mcpu=native finds no core of theirs in the host's cpuinfo or auxv:
            assert "-mcpu" not in flags and "-march" not in flags, (name, info)  # the compiler's default (arch_flags)
        else:
            assert "-mcpu=native" in flags or "-march=native" in flags, (name, info)
    benches = {r["benchmark"] for r in doc["results"]}
    assert {"peak", "fpu", "stream", "membw", "memlat", "dgemm"} <= benches, benches
    # the path peak took, as its own record says: NEON on arm64; where there is none, the generic one by name
    paths = {str(r["params"].get("isa")) for r in doc["results"] if r["benchmark"] == "peak"}
    assert paths == {PEAK_PATH[arch]}, paths
    print(f"{arch}: peak ran its {paths} path; builds: {sorted(builds)}")


def test_pingpong_two_ranks_shared_memory(arch):
    doc = cb_json(arch, "run pingpong --quick --transport shm --max-size 65536", timeout=900)
    assert doc["run"]["status"] == "complete"
    assert any(r["metric"].startswith("latency") for r in doc["results"]), [r["metric"] for r in doc["results"]]


def test_hpl_n1000_passes_its_residual_check(arch):
    doc = cb_json(arch, "run hpl --n 1000 --ranks 2", timeout=1200)
    assert doc["run"]["status"] == "complete"
    assert any(r["benchmark"] == "hpl" for r in doc["results"])


def test_hpcc_ptrans_fft_and_pdes_small(arch):
    for args in ("run ptrans --n 512 --samples 2 --ranks 2", "run fft --mode all --n 4096 --samples 2 --plan estimate --ranks 2",
                 PDES + " --tag emu-a"):
        doc = cb_json(arch, args, timeout=900)
        assert doc["run"]["status"] == "complete", args


def test_hpcg_tiny(arch):
    doc = cb_json(arch, "run hpcg --quick --ranks 2 --local 16x16x16 --time 5", timeout=1200)
    assert doc["run"]["status"] == "complete"


def test_store_and_compare(arch):
    cb_json(arch, PDES + " --tag emu-b")
    runs = json.loads(cb(arch, "results list --json"))["runs"]
    assert len(runs) >= 8 and all(r["status"] == "complete" for r in runs), runs
    doc = json.loads(cb(arch, "compare emu-a emu-b --json"))
    assert doc, doc
    assert "pdes" in cb(arch, "compare emu-a emu-b")
