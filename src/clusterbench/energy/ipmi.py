"""``ipmi``: ``ipmitool dcmi power reading``, the BMC's whole-node figure, on this machine."""
from __future__ import annotations

import re
import shutil
from typing import Sequence

from clusterbench.energy.command import run_bounded
from clusterbench.energy.source import LiveSource, Sample, SampleFailed
from clusterbench.energy.spec import Spec
from clusterbench.errors import UsageError

#: ipmitool talks to the BMC and gets longer than a meter command
IPMI_TIMEOUT = 5.0


_IPMI_RE = re.compile(r"Instantaneous power reading:\s*([0-9.]+)\s*Watts", re.I)


def parse_ipmi(text: str) -> float:
    m = _IPMI_RE.search(text or "")
    if not m:
        raise SampleFailed("ipmitool printed no 'Instantaneous power reading: N Watts' line")
    return float(m.group(1))


class IpmiSource(LiveSource):
    kind = "ipmi"
    ARGV = ("ipmitool", "dcmi", "power", "reading")

    def __init__(self, label: str, covers: Sequence[str], spec: Spec) -> None:
        super().__init__(label, covers, spec)
        self.timeout = IPMI_TIMEOUT

    def check(self) -> None:
        if shutil.which("ipmitool") is None:
            raise UsageError("ipmi: ipmitool is not installed",
                             "apt-get install ipmitool (the node needs a BMC with DCMI), or use rapl, cmd:, csv: or "
                             "--watts")
        try:
            parse_ipmi(run_bounded(self.ARGV, self.timeout))
        except SampleFailed as exc:
            raise UsageError(f"ipmi: 'ipmitool dcmi power reading' cannot read a power here ({exc})",
                             "check for a BMC (modprobe ipmi_devintf ipmi_si; ls /dev/ipmi0) with DCMI power "
                             "readings, or use rapl, cmd:, csv: or --watts") from None

    def read(self) -> Sample:
        return Sample(0.0, 0.0, watts=parse_ipmi(run_bounded(self.ARGV, self.timeout)))
