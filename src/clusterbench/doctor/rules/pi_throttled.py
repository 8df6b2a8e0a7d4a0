"""pi-throttled: a Raspberry Pi that has been under-voltage, frequency-capped or throttled since boot."""
from __future__ import annotations

from typing import Any, Mapping

from clusterbench.doctor.rule import Hit, Rule, cannot, get, shown
from clusterbench.telemetry import verdict
from clusterbench.telemetry.vcgencmd import throttled_text


def check_pi_throttled(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "pi.throttled")
    if not it.get("readable"):
        return cannot("pi.throttled", it)
    v = it["value"]
    if v is None:
        return None  # not a Raspberry Pi: nothing to judge
    since, now = list(v.get("since_boot") or []), list(v.get("now") or [])
    seen = list(dict.fromkeys(since + now))
    if not seen:
        return None
    fixes = [verdict.FIXES[c] for c in verdict.causes({"during": seen})]
    what = f"{throttled_text(since)} since boot" if since else ""
    if now:
        what += ("; " if what else "") + f"{throttled_text(now)} now"
    return Hit(f"{what} (get_throttled {v.get('raw')}): figures measured then are below what the board does",
               [shown("pi.throttled", it)],
               [*fixes, "then reboot (clears the since-boot bits) and rerun: clusterbench records get_throttled "
                "before and after every run and flags a run during which it was set"], [])


RULE = Rule(
    "pi-throttled", "Raspberry Pi under-voltage, capped or throttled since boot", ("pi.throttled",),
    check_pi_throttled,
    "a Raspberry Pi drops its clock when its supply sags below about 4.63 V (under-voltage) or it gets hot (80-85 "
    "°C; the soft limit earlier): every compute, memory and HPL figure drops with it and varies between runs "
    "(the Raspberry Pi documentation, vcgencmd get_throttled)",
    "a power supply that holds its voltage, cooling", "(nothing)", "run hpl",
    figures={"peak": ("gflops",), "fpu": ("throughput",), "dgemm": ("gflops",),
             "stream": ("copy", "scale", "add", "triad"), "membw": ("read", "write"), "hpl": ("rmax",),
             "hpcg": ("rating",)},
    order=125)
