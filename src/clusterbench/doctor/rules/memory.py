"""thp, swap-in-use, numa-balancing: what the kernel does with a node's memory."""
from __future__ import annotations

from typing import Any, Mapping

from clusterbench.doctor.rule import Hit, Rule, cannot, get, here, shown

MEMORY = {"stream": ("copy", "scale", "add", "triad"), "membw": ("read", "write"),
          "memlat": ("latency", "dram_latency")}


def check_thp(ev: Mapping[str, Any]) -> Any:
    en, de = get(ev, "thp.enabled"), get(ev, "thp.defrag")
    if not en.get("readable"):
        return cannot("thp.enabled", en)
    path = "/sys/kernel/mm/transparent_hugepage"
    if en["value"] == "never":
        return Hit("transparent huge pages are off: large arrays pay a TLB miss every 4 KiB page",
                   [shown("thp.enabled", en)], [f"echo madvise > {path}/enabled"], [f"echo never > {path}/enabled"],
                   severity="info", apply=here([f"echo madvise > {path}/enabled"], [f"echo never > {path}/enabled"]))
    if en["value"] == "always":
        if not de.get("readable"):
            return cannot("thp.defrag", de)
        if de["value"] == "always":
            return Hit("THP always with synchronous defrag: page faults stall while the kernel compacts memory",
                       [shown("thp.enabled", en), shown("thp.defrag", de)],
                       [f"echo madvise > {path}/defrag"], [f"echo always > {path}/defrag"],
                       apply=here([f"echo madvise > {path}/defrag"], [f"echo always > {path}/defrag"]))
    return None


def check_swap(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "swap")
    if not it.get("readable"):
        return cannot("swap", it)
    v = it["value"] or {}
    if (v.get("used_kb") or 0) <= 0:
        return None
    return Hit(f"{v['used_kb'] / 1024:.0f} MiB of swap in use (of {v.get('total_kb', 0) / 1024:.0f} MiB)",
               [shown("swap", it)], ["swapoff -a  # needs that much free memory; pages come back into RAM"],
               ["swapon -a"], apply=here(["swapoff -a"], ["swapon -a"]))


def check_numa_balancing(ev: Mapping[str, Any]) -> Any:
    nb, nodes = get(ev, "sysctl.kernel.numa_balancing"), get(ev, "numa.nodes")
    if not nb.get("readable"):
        return cannot("sysctl.kernel.numa_balancing", nb)
    if not nb["value"]:
        return None
    if not nodes.get("readable"):
        return cannot("numa.nodes", nodes)
    if (nodes["value"] or 0) < 2:
        return None
    return Hit(f"automatic NUMA balancing is on ({nb['value']}) on a node with {nodes['value']} NUMA nodes",
               [shown("sysctl.kernel.numa_balancing", nb), shown("numa.nodes", nodes)],
               ["sysctl -w kernel.numa_balancing=0"], [f"sysctl -w kernel.numa_balancing={nb['value']}"],
               apply=here(["sysctl -w kernel.numa_balancing=0"], [f"sysctl -w kernel.numa_balancing={nb['value']}"]))


RULES = [
    Rule("thp", "transparent huge pages off, or always with synchronous defrag", ("thp.enabled", "thp.defrag"),
         check_thp, "4 KiB pages make large arrays (stream, membw, dgemm, HPL) miss the TLB; synchronous defrag "
         "stalls page faults while memory is compacted", "madvise (or always without synchronous defrag)",
         "write the previous mode back", "run stream",
         figures={**MEMORY, "dgemm": ("gflops",), "hpl": ("rmax",)}, order=50),
    Rule("swap-in-use", "swap in use", ("swap",), check_swap,
         "pages of a benchmark or of the ranks may sit on disk: memory figures and HPL collapse when touched",
         "free memory, then swapoff -a", "swapon -a", "run membw",
         figures={**MEMORY, "dgemm": ("gflops",), "hpl": ("rmax", "time_s")}, order=60),
    Rule("numa-balancing", "automatic NUMA balancing on a multi-NUMA node",
         ("sysctl.kernel.numa_balancing", "numa.nodes"), check_numa_balancing,
         "the kernel migrates pages under pinned ranks and unmaps pages to sample them: memory bandwidth and "
         "latency figures vary", "sysctl -w kernel.numa_balancing=0", "sysctl -w the previous value", "run stream",
         figures={**MEMORY, "stream": ("copy", "scale", "add", "triad", "triad_numa")}, order=70),
]
