"""cpu-governor and cpu-boost: what sets the CPU clock."""
from __future__ import annotations

from typing import Any, Mapping

from clusterbench.doctor.rule import Hit, Rule, cannot, get, here, shown

COMPUTE = {"peak": ("gflops", "gflops_per_core", "effective_clock"), "fpu": ("latency", "throughput"),
           "dgemm": ("gflops", "gflops_per_core"), "hpl": ("rmax",)}


def check_governor(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "cpufreq.governors")
    if not it.get("readable"):
        return cannot("cpufreq.governors", it)
    govs: dict[str, list[int]] = it["value"] or {}
    slow = {g: c for g, c in govs.items() if g != "performance"}
    if not slow:
        return None
    path = "/sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor"
    undo = [f"echo {g} > {path.format(c)}" for g, cpus in sorted(slow.items()) for c in cpus]
    if len(govs) == 1:  # one governor everywhere: the loop form
        undo = [f"for f in {path.format('*')}; do echo {next(iter(govs))} > $f; done"]
    desc = ", ".join(f"{g} on {len(c)} CPU{'s' if len(c) != 1 else ''}" for g, c in sorted(slow.items()))
    fix = [f"for f in {path.format('*')}; do echo performance > $f; done"]
    return Hit(f"CPU frequency governor is not performance ({desc})", [shown("cpufreq.governors", it)], fix, undo,
               apply=here(fix, undo))


def check_boost(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "cpufreq.boost")
    if not it.get("readable"):
        return cannot("cpufreq.boost", it)
    if not it["value"]:
        return None
    src = str(it.get("source"))
    if "no_turbo" in src:
        fix, undo = "echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo", \
            "echo 0 > /sys/devices/system/cpu/intel_pstate/no_turbo"
    else:
        fix, undo = "echo 0 > /sys/devices/system/cpu/cpufreq/boost", "echo 1 > /sys/devices/system/cpu/cpufreq/boost"
    return Hit("turbo/boost is on: the clock depends on temperature and on how many cores are busy",
               [shown("cpufreq.boost", it)], [fix], [undo], apply=here([fix], [undo]))


RULES = [
    Rule("cpu-governor", "CPU frequency governor not performance", ("cpufreq.governors",), check_governor,
         "powersave/ondemand/schedutil clock down between messages and ramp up under load: lower and noisier "
         "compute figures (fpu, peak, dgemm, HPL) and higher small-message latency",
         "set the performance governor on every CPU", "set the previous governors back", "run hpl",
         figures={**COMPUTE, "stream": ("copy", "scale", "add", "triad"), "membw": ("read", "write"),
                  "memlat": ("latency", "dram_latency"), "pingpong": ("latency",)},
         order=20),
    Rule("cpu-boost", "turbo/boost on", ("cpufreq.boost",), check_boost,
         "with boost the clock depends on temperature and busy cores: compute figures are higher but vary between "
         "runs and nodes, so an A/B comparison needs more repeats", "switch boost off for reproducible comparisons",
         "switch boost on again", "run fpu", severity="info", figures=COMPUTE, order=30),
]
