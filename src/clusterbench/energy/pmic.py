"""``pmic``: a Raspberry Pi 5's own power figure, the sum over its PMIC's rails of current × voltage
(``vcgencmd pmic_read_adc``), read on this machine about once a second.

It is what the board's rails carry: not the power supply's losses, not what USB devices draw from the
5 V input, not the network switch. So it is labelled (:data:`MEASURES`) wherever its figures appear;
a wall meter (``csv:``, ``cmd:``) measures the whole node. The parsing is
:func:`clusterbench.telemetry.vcgencmd.parse_pmic` (rail names as printed).
"""
from __future__ import annotations

from typing import Any, Sequence

from clusterbench.energy.source import LiveSource, Sample, SampleFailed
from clusterbench.energy.spec import Spec
from clusterbench.errors import UsageError
from clusterbench.telemetry import board
from clusterbench.telemetry.vcgencmd import parse_pmic

#: what the figure covers, shown with it
MEASURES = "the board's PMIC rails: no supply loss, no USB devices, no switch"
_OTHERS = "or use rapl, ipmi, cmd:COMMAND, csv:FILE or --watts"


class PmicSource(LiveSource):
    kind = "pmic"

    def __init__(self, label: str, covers: Sequence[str], spec: Spec) -> None:
        super().__init__(label, covers, spec)
        self.timeout = board.TIMEOUT
        self.rails: list[str] = []

    def _read(self) -> float:
        try:
            return parse_pmic(board.call("pmic_read_adc", timeout=self.timeout)).watts
        except board.VcgencmdFailed as exc:
            raise SampleFailed(str(exc)) from None
        except ValueError as exc:
            raise SampleFailed(str(exc)) from None

    def check(self) -> None:
        if board.present() is None:
            raise UsageError("--power pmic: vcgencmd is not installed here (pmic reads a Raspberry Pi 5's PMIC)",
                             "run on a Raspberry Pi 5 with its firmware tools (apt install raspi-utils; the user in "
                             f"the video group), {_OTHERS}")
        try:
            reading = parse_pmic(board.call("pmic_read_adc", timeout=self.timeout))
        except (board.VcgencmdFailed, ValueError) as exc:
            raise UsageError(f"--power pmic: `vcgencmd pmic_read_adc` reads no power rails here ({exc})",
                             f"only a Raspberry Pi 5 (or a board with its PMIC) has them: {_OTHERS}") from None
        self.rails = sorted(reading.rails)

    def read(self) -> Sample:
        return Sample(0.0, 0.0, watts=self._read())

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "measures": MEASURES, "rails": self.rails}
