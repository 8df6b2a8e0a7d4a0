"""preemption: the kernel's preemption model."""
from __future__ import annotations

from typing import Any, Mapping

from clusterbench.doctor.rule import Hit, Rule, cannot, get, here, shown

KCONFIG = "the kernel's Kconfig help for PREEMPT_NONE, kernel/Kconfig.preempt"


def check_preemption(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "kernel.preemption")
    if not it.get("readable"):
        return cannot("kernel.preemption", it)
    model = str(it["value"]).lower()
    if model in ("none", "no forced preemption"):
        return None
    src = str(it.get("source"))
    if "debug" in src:  # PREEMPT_DYNAMIC with debugfs: switchable at run time
        fix = ["echo none > /sys/kernel/debug/sched/preempt"]
        undo = [f"echo {model} > /sys/kernel/debug/sched/preempt"]
    elif "cmdline" in src:  # PREEMPT_DYNAMIC: the boot parameter decides
        fix = [f"replace preempt={model} by preempt=none in GRUB_CMDLINE_LINUX (/etc/default/grub)", "update-grub",
               "reboot"]
        undo = [f"put back preempt={model} in GRUB_CMDLINE_LINUX (/etc/default/grub)", "update-grub", "reboot"]
    else:  # fixed at build time
        fix = ["rebuild the kernel with CONFIG_PREEMPT_NONE=y (kernel/Kconfig.preempt), install it", "reboot"]
        undo = ["boot the previous kernel again (kept in the boot menu)"]
    sev = "info" if model == "voluntary" else "warn"
    return Hit(f"kernel preemption model is {model}, not none (no forced preemption)", [shown("kernel.preemption", it)],
               fix, undo, severity=sev, apply=here(fix, undo) if "debug" in src else None)


RULE = Rule(
    "preemption", "kernel preemption model not 'none'", ("kernel.preemption",), check_preemption,
    "a preemptible kernel switches away from ranks more often; no forced preemption is the model "
    f"\"geared towards throughput\", for \"a server or scientific/computation system\" ({KCONFIG})",
    "boot with no forced preemption (preempt=none, or a kernel built with CONFIG_PREEMPT_NONE)",
    "boot the previous model", "run hpl --hosts {hosts}", needs_reboot=True,
    figures={"peak": ("gflops",), "fpu": ("latency", "throughput"), "dgemm": ("gflops",),
             "memlat": ("latency", "dram_latency"), "hpl": ("rmax",)},
    order=40)
