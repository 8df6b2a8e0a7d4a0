"""``rapl``: the powercap sysfs counters of this machine's CPU packages and DRAM (see
:mod:`clusterbench.energy.spec` for what is added and what is left out)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from clusterbench.energy.source import LiveSource, Sample, SampleFailed
from clusterbench.energy.spec import Spec
from clusterbench.errors import UsageError
from clusterbench.probe.sysfs import FsRoot

POWERCAP = "/sys/class/powercap"
_ZONE_RE = re.compile(r"^(intel-rapl|amd-rapl):\d+(?::\d+)*$")
RAPL_GRANT = ("run clusterbench as root, or let users read the counters: chmod o+r "
              "/sys/class/powercap/intel-rapl:*/energy_uj (until reboot), or a udev rule such as "
              "ACTION==\"add\", SUBSYSTEM==\"powercap\", RUN+=\"/bin/chmod o+r /sys%p/energy_uj\"")


@dataclass(frozen=True)
class RaplDomain:
    zone: str
    name: str
    energy_path: str
    max_range_j: float | None


def rapl_domains(root: FsRoot) -> list[RaplDomain]:
    """The package and DRAM domains of the powercap tree under ``root`` (a snapshot directory in
    the same layout serves as well as the live ``/``)."""
    out = []
    for entry in root.listdir(POWERCAP):
        if not _ZONE_RE.match(entry):
            continue
        name = root.read(f"{POWERCAP}/{entry}/name") or ""
        if not (name.startswith("package") or name == "dram"):
            continue
        rng = root.read_int(f"{POWERCAP}/{entry}/max_energy_range_uj")
        out.append(RaplDomain(entry, name, root.path(f"{POWERCAP}/{entry}/energy_uj"),
                              rng / 1e6 if rng and rng > 0 else None))
    return out


class RaplSource(LiveSource):
    kind = "rapl"
    counter = True

    def __init__(self, label: str, covers: Sequence[str], spec: Spec, root: str = "/") -> None:
        super().__init__(label, covers, spec)
        self.root = FsRoot(root)
        self.domains: list[RaplDomain] = []

    def check(self) -> None:
        self.domains = rapl_domains(self.root)
        if not self.domains:
            where = self.root.path(POWERCAP)
            raise UsageError(f"rapl: no RAPL package or dram zone under {where} (a virtual machine, a CPU without "
                             "RAPL, or the intel_rapl_msr module not loaded)",
                             "modprobe intel_rapl_msr where the CPU has RAPL, or use cmd:COMMAND, csv:FILE, ipmi or "
                             "--watts W")
        for d in self.domains:
            try:
                with open(d.energy_path) as fh:
                    int(fh.read().split()[0])
            except PermissionError:
                raise UsageError(f"rapl: {d.energy_path} is readable by root only (Linux 5.10 and later)",
                                 RAPL_GRANT) from None
            except (OSError, ValueError, IndexError) as exc:
                raise UsageError(f"rapl: cannot read {d.energy_path} ({exc})",
                                 "check the powercap driver (dmesg), or use another source") from None

    def read(self) -> Sample:
        out = {}
        for d in self.domains:
            try:
                with open(d.energy_path) as fh:
                    out[f"{d.zone}/{d.name}"] = int(fh.read().split()[0]) / 1e6
            except (OSError, ValueError, IndexError) as exc:
                raise SampleFailed(f"cannot read {d.energy_path} ({exc})") from None
        return Sample(0.0, 0.0, joules=out)

    def wraps(self) -> dict[str, float | None]:
        return {f"{d.zone}/{d.name}": d.max_range_j for d in self.domains}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "domains": [f"{d.zone} ({d.name})" for d in self.domains]}
