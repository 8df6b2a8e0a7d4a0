"""steal-time: a VM's CPU time taken by the hypervisor."""
from __future__ import annotations

from typing import Any, Mapping

from clusterbench.doctor.rule import CannotTell, Hit, Rule, cannot, get, shown

STEAL_THRESHOLD_PCT = 5.0


def check_steal(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "steal")
    if not it.get("readable"):
        return cannot("steal", it)
    pct = (it["value"] or {}).get("percent")
    if pct is None:
        return CannotTell(f"no CPU time counted in {it.get('source')}")
    if pct <= STEAL_THRESHOLD_PCT:
        return None
    since = "since boot" if (it["value"] or {}).get("since") == "boot" else f"over {it['value'].get('interval_s')} s"
    return Hit(f"the hypervisor took {pct:.1f}% of this VM's CPU time {since} (threshold {STEAL_THRESHOLD_PCT:g}%)",
               [shown("steal", it), shown("hypervisor", get(ev, "hypervisor"))],
               ["ask for dedicated (pinned) vCPUs or a less loaded host; nothing inside the VM fixes it"], [])


RULE = Rule(
    "steal-time", "a VM's CPU time stolen by the hypervisor", ("steal", "hypervisor"), check_steal,
    "stolen time is time the benchmark did not run: every figure is lower and noisier, and varies with the "
    "neighbours", "dedicated vCPUs or a quieter host", "(nothing)", "run fpu",
    figures={"peak": ("gflops",), "fpu": ("latency", "throughput"), "dgemm": ("gflops",),
             "stream": ("copy", "scale", "add", "triad"), "membw": ("read", "write"),
             "memlat": ("latency", "dram_latency"), "hpl": ("rmax",)},
    order=120)
