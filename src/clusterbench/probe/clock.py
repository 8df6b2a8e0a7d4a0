"""Clock and thermal readings taken before and after a run, to detect drift and throttling."""
from __future__ import annotations

import glob
import os
import re


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _per_cpu_mhz(name: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for path in glob.glob(f"/sys/devices/system/cpu/cpu[0-9]*/cpufreq/{name}"):
        m = re.search(r"cpu(\d+)/", path)
        val = _read(path)
        if m and val and val.isdigit():
            out[int(m.group(1))] = int(val) / 1000.0
    return out


def snapshot() -> dict:
    """cpufreq readings (MHz: current, and the cap ``scaling_max_freq``), the governor,
    thermal-throttle counters and thermal-zone temperatures (C)."""
    freq = _per_cpu_mhz("scaling_cur_freq")
    cap = _per_cpu_mhz("scaling_max_freq")
    governor = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    throttle: dict[int, int] = {}
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/thermal_throttle/core_throttle_count"):
        m = re.search(r"cpu(\d+)/", path)
        val = _read(path)
        if m and val and val.isdigit():
            throttle[int(m.group(1))] = int(val)
    temps: dict[str, float] = {}
    for zone in glob.glob("/sys/class/thermal/thermal_zone*"):
        val = _read(os.path.join(zone, "temp"))
        if val and val.lstrip("-").isdigit():
            temps[os.path.basename(zone)] = int(val) / 1000.0
    return {"freq_mhz": freq, "cap_mhz": cap, "governor": governor, "throttle": throttle, "temps_c": temps}
