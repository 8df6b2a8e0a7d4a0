"""Seed 002's node, emulated (issue 27 section 2): a full-system Debian 12 guest with two sockets and two
NUMA nodes (tests/guestkit.py: QEMU TCG, 2 x 2 cores, 1 GiB per node), clusterbench installed in it the
README's way. Checked: probe's topology against hwloc's own reading; the STREAM NUMA matrix (threads on
each node, memory on each node), with the binding proven by where the threads ran (sched_getcpu) and
where the arrays' pages were (move_pages, and /proc/PID/numa_maps for numactl); the MPI ping-pong's
placement classes (same socket, other socket); doctor's NUMA-balancing rule. The mechanics, never the
bandwidth ratio (the guest's distances are what QEMU declares, its figures mean nothing).

One guest per module (booted once, ~15 s under TCG plus the install); every command is bounded, the guest
is killed on leaving (guestkit.guest). Skipped, in one line, where the machine lacks qemu, debootstrap,
root or Debian's registry.
"""
from __future__ import annotations

import json
import os
import sys
import time

import pytest

import guestkit

pytestmark = pytest.mark.emulated

CB = "cd /root/clusterbench && CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1 .venv/bin/clusterbench"
TIMES = guestkit.cache_root() / "numa-guest-times.json"


@pytest.fixture(scope="module")
def vm():
    why = guestkit.missing()
    if why:
        pytest.skip(f"two-socket guest skipped: {why}")
    t0 = time.monotonic()
    cold = not (guestkit.image_dir() / "ready").exists()
    image = guestkit.build_image()
    t_image = round(time.monotonic() - t0, 1)
    with guestkit.guest(life_s=float(os.environ.get("CLUSTERBENCH_EMU_LIFE_S", "2400"))) as g:
        t_install = guestkit.install_clusterbench(g)
        times = {"image_s": t_image, "image_cold": cold, "image_build_s": image.info.get("build_s"),
                 "image_steps": {k: v for k, v in image.info.items() if k.endswith(("_s", "_mb"))},
                 "boot_s": g.boot_s, "install_s": t_install}
        print(f"two-socket guest: {json.dumps(times)}", file=sys.stderr)
        with open(TIMES, "a") as f:
            f.write(json.dumps({**times, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
        yield g


def cb_json(vm, args: str, timeout: float = 900) -> dict:
    return json.loads(vm.run(f"{CB} {args}", timeout=timeout).stdout)


def test_probe_topology_is_hwlocs(vm):
    """probe sees 2 packages, 2 NUMA nodes with 2 cpus and about 1 GiB each, as hwloc-calc and sysfs do."""
    topo = cb_json(vm, "probe --json", 300)["topology"]
    hw = {q: int(vm.run(f"hwloc-calc --number-of {q} machine:0").stdout) for q in ("package", "numanode", "core", "pu")}
    assert hw == {"package": 2, "numanode": 2, "core": 4, "pu": 4}, hw
    assert (topo["packages"], topo["numa_nodes"], topo["cores"], topo["pus"]) == (2, 2, 4, 4), topo
    for node in topo["numa"]:
        i = node["os_index"]
        pus = vm.run(f"hwloc-calc --intersect pu numa:{i}").stdout.strip()
        assert node["cpus"] == [int(c) for c in pus.split(",")], (node, pus)
        mem_kb = int(vm.run(f"awk '/MemTotal/ {{print $4}}' /sys/devices/system/node/node{i}/meminfo").stdout)
        assert abs(node["memory_total_bytes"] - mem_kb * 1024) <= 64 << 20, (node, mem_kb)
        assert 700 << 20 < node["memory_total_bytes"] <= 1 << 30
    pkg_of = {c["pu"]: c["package"] for c in topo["cpus"]}
    numa_of = {c["pu"]: c["numa"] for c in topo["cpus"]}
    assert pkg_of == numa_of == {0: 0, 1: 0, 2: 1, 3: 1}, topo["cpus"]


def test_stream_numa_matrix_binding(vm):
    """run stream gives triad_numa for every (cpu node, memory node) pair, its threads on that node's cpus;
    then the same kernel run by hand proves each array's pages were on the bound node."""
    doc = cb_json(vm, "run stream --quick --json --no-store --no-sweep --variant regular "
                      "--array-elements 1048576 --ntimes 3", 1500)
    numa = [r for r in doc["results"] if r["metric"] == "triad_numa"]
    pairs = {(r["params"]["cpu_node"], r["params"]["mem_node"]): r for r in numa}
    assert set(pairs) == {(0, 0), (0, 1), (1, 0), (1, 1)}, [r["params"] for r in numa]
    for (cpu_node, _), r in pairs.items():
        assert r["params"]["cpus"] == [2 * cpu_node, 2 * cpu_node + 1], r["params"]
        assert r["value"] > 0
    # the kernel clusterbench built (linked with libnuma), run on node 1's cpus with memory on 0 then 1
    exe = vm.run("for f in $(find /root/.cache/clusterbench/kernels -type f -name 'stream*' -perm -u+x); do "
                 "ldd $f | grep -q libnuma && echo $f; done | head -1").stdout.strip()
    assert exe, "no libnuma-linked stream kernel in the guest's kernel cache"
    recs = [json.loads(line) for line in vm.run(f"{exe} --cpus=2,3 --elements=524288 --ntimes=3 --variant=regular "
                                                 "--mem_nodes=0,1 --cpu_node=1", 600).stdout.splitlines()]
    info = next(r for r in recs if r["type"] == "info")
    assert info["cpus_actual"] == [2, 3] and info["numa_nodes"] == 2 and info["libnuma"]
    val = [r for r in recs if r["type"] == "validation"]
    assert [v["mem_node"] for v in val] == [0, 1]
    for v in val:
        assert v["ok"] and v["pages_checked"] >= 3 * 524288 * 8 // 4096, v
        assert v["pages_on_mem_node"] == v["pages_checked"], v


def test_numactl_binding_seen_in_numa_maps(vm):
    """The guest's own mechanics, read from outside the process: memory bound by numactl to node 1 and
    touched from node 0's cpus sits on node 1 (numa_maps N1=), the thread on a node-0 cpu (/proc status)."""
    script = ("import re, sys; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]); "
              "maps = open('/proc/self/numa_maps').read(); "
              "big = max((l for l in maps.splitlines() if 'anon=' in l), key=lambda l: int(re.search('anon=(\\\\d+)', l)[1])); "
              "print(big); print(open('/proc/self/status').read().split('Cpus_allowed_list:')[1].split()[0]); "
              "print(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[36])")
    out = vm.run(f"numactl --cpunodebind=0 --membind=1 python3 -c \"{script}\"", 120).stdout.splitlines()
    line, allowed, cpu = out
    assert "bind:1" in line and "N1=" in line and "N0=" not in line, line
    assert allowed == "0-1" and int(cpu) in (0, 1), out


def test_placement_classes_same_and_other_socket(vm):
    """run placement measures a same-socket pair and an other-socket (remote NUMA) pair, each on the cpus
    its class says, their packages and NUMA nodes as the topology has them."""
    doc = cb_json(vm, "run placement --quick --json --no-store", 1500)
    lat = {r["params"]["class"]: r for r in doc["results"] if r["metric"] == "latency"}
    assert "remote-numa" in lat, sorted(lat)
    same = [c for c in lat if c in ("l2", "l3", "numa")]
    assert same, sorted(lat)
    socket_of = {0: 0, 1: 0, 2: 1, 3: 1}
    r = lat["remote-numa"]["params"]
    assert socket_of[r["cpu_a"]] != socket_of[r["cpu_b"]], r
    for c in same:
        p = lat[c]["params"]
        assert socket_of[p["cpu_a"]] == socket_of[p["cpu_b"]] and p["cpu_a"] != p["cpu_b"], p
    assert all(x["value"] > 0 for x in lat.values())


def test_doctor_numa_balancing_rule(vm):
    """With kernel.numa_balancing on, doctor's numa-balancing rule fires on the two-node guest and names the
    fix; off, it passes."""
    try:
        vm.run("sysctl -w kernel.numa_balancing=1")
        doc = cb_json(vm, "doctor --json", 300)
        hit = [f for f in doc["findings"] if f["rule"] == "numa-balancing"]
        assert hit and "2 NUMA nodes" in hit[0]["title"] + hit[0].get("summary", ""), doc["findings"]
        assert "sysctl -w kernel.numa_balancing=0" in json.dumps(hit[0])
        vm.run("sysctl -w kernel.numa_balancing=0")
        doc = cb_json(vm, "doctor --json", 300)
        assert "numa-balancing" in {p["rule"] for p in doc["passed"]}, doc["passed"]
    finally:
        vm.run("sysctl -w kernel.numa_balancing=0", check=False)
