"""thermal-hot: a thermal zone above the temperature where CPUs throttle."""
from __future__ import annotations

from typing import Any, Mapping

from clusterbench.doctor.rule import Hit, Rule, cannot, get, shown

HOT_C = 80.0


def check_thermal(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "thermal")
    if not it.get("readable"):
        return cannot("thermal", it)
    hot = [z for z in it["value"] or [] if (z.get("temp_c") or 0) > HOT_C]
    if not hot:
        return None
    desc = ", ".join(f"{z['zone']} ({z.get('type')}) {z['temp_c']:.1f} °C" for z in hot)
    return Hit(f"above {HOT_C:g} °C at rest: {desc}", [shown("thermal", it)],
               [("improve cooling (heatsink, fan, airflow); on a Raspberry Pi `vcgencmd get_throttled` says "
                 "whether it has throttled")], [])


RULE = Rule(
    "thermal-hot", f"a thermal zone above {HOT_C:g} °C", ("thermal",), check_thermal,
    "a hot CPU throttles (the Raspberry Pi at 80-85 °C): compute figures drop during long runs (HPL)",
    "more cooling", "(nothing)", "run hpl",
    figures={"peak": ("gflops",), "fpu": ("throughput",), "dgemm": ("gflops",),
             "stream": ("copy", "scale", "add", "triad"), "membw": ("read", "write"),
             "memlat": ("latency",), "hpl": ("rmax",)},
    order=130)
