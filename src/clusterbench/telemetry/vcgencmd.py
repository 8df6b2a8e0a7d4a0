"""Parsers for what a Raspberry Pi's ``vcgencmd`` prints (pure: text in, values out).

``get_throttled`` prints ``throttled=0x50005``: a bit mask whose low half is the state now and whose
high half is what has happened since boot (the firmware clears it at boot), :data:`THROTTLED_BITS`.
The kernel's ``/sys/devices/platform/soc/soc:firmware/get_throttled`` prints the same mask as bare hex
(``50005``); both are read. ``measure_temp`` prints ``temp=62.3'C``, ``measure_clock arm``
``frequency(48)=1500345728`` (Hz), and a Raspberry Pi 5's ``pmic_read_adc`` one line per channel,
``VDD_CORE_A current(7)=6.22421000A`` and ``VDD_CORE_V volt(15)=0.86173300V``: a rail's current and
voltage pair by its name (the channel numbers do not pair), and some rails have only a voltage
(``EXT5V_V``, the USB-C input; ``BATT_V``, the RTC battery).

Sources: the Raspberry Pi documentation, "vcgencmd" (get_throttled's bits); the recorded outputs the
tests parse are in tests/data/vcgencmd/ with where each was found.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Bit:
    bit: int
    key: str
    text: str
    #: what it points at: "power" (the supply), "thermal" (cooling), "either" (a throttle: from either)
    cause: str


#: get_throttled's bits, as the Raspberry Pi documentation lists them: 0-3 now, 16-19 since boot
THROTTLED_BITS: tuple[Bit, ...] = (
    Bit(0, "under_voltage", "under-voltage", "power"),
    Bit(1, "arm_capped", "arm frequency capped", "either"),
    Bit(2, "throttled", "throttled", "either"),
    Bit(3, "soft_temp_limit", "soft temperature limit", "thermal"),
)
#: the since-boot copy of bit N is bit N + 16
SINCE_BOOT_SHIFT = 16
KNOWN_MASK = sum((1 << b.bit) | (1 << (b.bit + SINCE_BOOT_SHIFT)) for b in THROTTLED_BITS)

_THROTTLED_RE = re.compile(r"^(?:throttled=)?(?:0x)?([0-9a-fA-F]{1,8})$")
_TEMP_RE = re.compile(r"^temp=([-+]?\d+(?:\.\d+)?)\s*'?C$")
_CLOCK_RE = re.compile(r"^frequency\((\d+)\)=(\d+)$")
_PMIC_RE = re.compile(r"^([A-Za-z0-9_]+)_([AV])\s+(current|volt)\((\d+)\)=([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)([AV])$")


def _one_line(text: str, what: str) -> str:
    lines = [ln.strip() for ln in (text or "").replace("\x00", "\n").splitlines() if ln.strip()]
    if len(lines) != 1:
        raise ValueError(f"{what}: expected one line, got {len(lines)}")
    return lines[0]


def parse_throttled(text: str) -> int:
    """``throttled=0x50005`` (vcgencmd), ``0x50005`` or ``50005`` (the kernel's sysfs file) -> the mask;
    ValueError for anything else."""
    line = _one_line(text, "get_throttled")
    m = _THROTTLED_RE.match(line)
    if not m:
        raise ValueError(f"get_throttled printed {line[:60]!r}, not throttled=0xN")
    return int(m.group(1), 16)


def throttled_flags(mask: int) -> dict[str, list[str]]:
    """``{"now": [key, ...], "since_boot": [key, ...], "unknown_bits": [n, ...]}`` of a mask."""
    now = [b.key for b in THROTTLED_BITS if mask >> b.bit & 1]
    since = [b.key for b in THROTTLED_BITS if mask >> (b.bit + SINCE_BOOT_SHIFT) & 1]
    unknown = [n for n in range(32) if mask >> n & 1 and not KNOWN_MASK >> n & 1]
    return {"now": now, "since_boot": since, "unknown_bits": unknown}


def bit_of(key: str) -> Bit:
    return next(b for b in THROTTLED_BITS if b.key == key)


def throttled_text(keys: list[str]) -> str:
    """``["under_voltage", "throttled"]`` -> ``"under-voltage, throttled"``."""
    return ", ".join(bit_of(k).text for k in keys) or "nothing"


def throttled_doc(mask: int) -> dict[str, Any]:
    """A reading as stored: the raw mask in hex and its flags."""
    return {"raw": f"0x{mask:x}", **throttled_flags(mask)}


def parse_temp(text: str) -> float:
    """``temp=62.3'C`` -> 62.3 (°C); ValueError otherwise."""
    line = _one_line(text, "measure_temp")
    m = _TEMP_RE.match(line)
    if not m:
        raise ValueError(f"measure_temp printed {line[:60]!r}, not temp=N'C")
    return float(m.group(1))


def parse_clock(text: str) -> float:
    """``frequency(48)=1500345728`` -> 1500345728.0 (Hz); ValueError otherwise."""
    line = _one_line(text, "measure_clock")
    m = _CLOCK_RE.match(line)
    if not m:
        raise ValueError(f"measure_clock printed {line[:60]!r}, not frequency(N)=HZ")
    return float(m.group(2))


@dataclass(frozen=True)
class Pmic:
    """A ``pmic_read_adc`` reading: ``rails`` (name -> (amps, volts)) for the rails with both, and
    ``voltage_only`` / ``current_only`` for the channels without a partner, names as printed."""

    rails: dict[str, tuple[float, float]]
    voltage_only: dict[str, float]
    current_only: dict[str, float]

    @property
    def watts(self) -> float:
        """The sum over the rails of current × voltage: what the board's rails carry (no supply loss,
        no USB devices)."""
        return sum(a * v for a, v in self.rails.values())

    def rail_watts(self) -> dict[str, float]:
        return {name: a * v for name, (a, v) in self.rails.items()}


def parse_pmic(text: str) -> Pmic:
    """``vcgencmd pmic_read_adc`` -> :class:`Pmic`; ValueError when no rail has both a current and a
    voltage (a board without the PMIC's ADC prints an error or nothing), or a line is not a channel."""
    amps: dict[str, float] = {}
    volts: dict[str, float] = {}
    for raw in (text or "").replace("\x00", "\n").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _PMIC_RE.match(line)
        if not m or m.group(2) != m.group(6) or (m.group(2) == "A") != (m.group(3) == "current"):
            raise ValueError(f"pmic_read_adc printed {line[:60]!r}, not NAME_A current(N)=XA or NAME_V volt(N)=XV")
        (amps if m.group(2) == "A" else volts)[m.group(1)] = float(m.group(5))
    rails = {n: (amps[n], volts[n]) for n in amps if n in volts}
    if not rails:
        raise ValueError("pmic_read_adc printed no rail with both a current and a voltage (not a Raspberry Pi 5?)")
    return Pmic(rails, {n: v for n, v in volts.items() if n not in amps},
                {n: a for n, a in amps.items() if n not in volts})
