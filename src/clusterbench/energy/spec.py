"""Power source specs: how ``--power`` names what each node of a run draws while a benchmark runs.

A source is named by a spec string (``--power SPEC``, repeatable; ``--watts W`` is ``watts:W``):

``rapl``
    The powercap sysfs (``/sys/class/powercap/intel-rapl:*``, and ``amd-rapl:*`` where a kernel
    names AMD's zones so; recent kernels expose AMD's RAPL as ``intel-rapl`` too): the ``package-N``
    and ``dram`` domains (``core``, ``uncore`` are inside the package and ``psys`` overlaps everything,
    so they are not added; ``intel-rapl-mmio`` repeats the package and is skipped). ``energy_uj`` is a
    cumulative counter in microjoules that wraps at ``max_energy_range_uj``: each step between two
    readings is taken modulo that range. Since Linux 5.10 (CVE-2020-8694) ``energy_uj`` is readable by
    root only: run as root, or grant read access (``chmod o+r`` on the files, until reboot, or a udev
    rule, see :data:`RAPL_GRANT`). Sampled at 10 Hz. RAPL sees the CPU packages and DRAM only: not the
    board, the disks, the fans or the power supply's losses.
``ipmi``
    ``ipmitool dcmi power reading`` ("Instantaneous power reading: N Watts", the BMC's whole-node
    figure), once a second.
``cmd:COMMAND``
    An external meter: ``sh -c COMMAND`` run at every sample (1 Hz), bounded by 2 s (its process
    group is killed after that); it must print one number, watts (``7.5``, ``7.5 W``) or joules of a
    cumulative counter (``1234 J``), and exit 0. ``{node}`` in COMMAND is replaced by the node's name.
    Garbage, a non-zero exit or a hang fail that sample; a failed sample inside a phase makes that
    phase's energy missing (with the reason), never guessed.
``csv:FILE``
    A log a meter writes (USB meters and smart plugs log CSV), read after each benchmark: a header
    row naming a time column (``time`` or ``timestamp``) and a power column (``watts``, ``power`` or
    ``W``; a unit suffix such as ``power (W)`` or ``power_w`` is allowed), separated by commas,
    semicolons or tabs; times in unix seconds (``1767225600.5``) or ISO 8601
    (``2026-01-01T00:00:00.5+00:00``, ``...Z``; without an offset: this machine's local time). A log
    that does not cover a phase leaves that phase's energy missing. ``{node}`` in FILE is replaced by
    the node's name.
``pmic``
    A Raspberry Pi 5's PMIC (``vcgencmd pmic_read_adc``): the sum over its rails of each rail's current
    times its voltage, once a second. It is the board's rails only: not the power supply's losses, not
    USB devices, not the switch (labelled so wherever it appears). Needs ``vcgencmd``; elsewhere it is
    refused in one line.
``watts:W``
    A declared constant (``--watts W``): not measured, and marked ``declared`` wherever it appears.

Per node: ``NODE=SPEC`` (``--power n1=csv:n1.csv --power n2=watts:7.5``); a bare SPEC is this node,
or, for a run across hosts, every node without its own (``watts:``, ``cmd:``, ``csv:``). ``rapl`` and
``ipmi`` read only the machine clusterbench runs on: asked for another node, they are refused in one
line; on the virtual cluster (whose nodes share this machine) a bare ``rapl`` or ``ipmi`` is this
machine's power for all of its nodes together. ``cluster=SPEC`` is one meter for all the nodes
together (a wall meter on the cluster's power strip). Every node of the run needs exactly one source.

The meter kinds, one module each: :mod:`.rapl`, :mod:`.ipmi`, :mod:`.pmic`, :mod:`.command`,
:mod:`.csvlog`, :mod:`.declared`; :mod:`.build` gives each node its source.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from clusterbench.energy import figures as E
from clusterbench.errors import UsageError

KINDS = ("rapl", "ipmi", "pmic", "cmd", "csv", "watts")
#: the kinds that read the machine clusterbench runs on (and take no argument)
THIS_MACHINE = ("rapl", "ipmi", "pmic")
#: seconds between samples, per live kind (``--power-interval`` overrides)
DEFAULT_INTERVAL = {"rapl": 0.1, "ipmi": 1.0, "pmic": 1.0, "cmd": 1.0}
MIN_INTERVAL, MAX_INTERVAL = 0.01, 60.0
#: a whole-cluster meter's node name
CLUSTER = "cluster"
_USAGE = "use rapl, ipmi, pmic, cmd:COMMAND, csv:FILE or watts:W, each optionally as NODE=SPEC"


@dataclass(frozen=True)
class Spec:
    node: str | None  # None: bare (this node, or every node without its own)
    kind: str
    arg: str
    text: str

    @property
    def source_text(self) -> str:
        return self.kind + (f":{self.arg}" if self.kind in ("cmd", "csv", "watts") else "")


def _kind_of(text: str) -> str | None:
    for k in KINDS:
        if text == k or text.startswith(k + ":"):
            return k
    return None


def parse_spec(text: str) -> Spec:
    """``[NODE=]KIND[:ARG]``; one-line UsageError for an unknown kind, an empty command or file,
    a declared power that is not a positive number of watts."""
    raw = str(text).strip()
    if not raw:
        raise UsageError("--power is empty", _USAGE)
    node: str | None = None
    body = raw
    if _kind_of(raw) is None and "=" in raw:
        node, body = (s.strip() for s in raw.split("=", 1))
        if not node:
            raise UsageError(f"--power {raw!r} names no node before '='", "write NODE=SPEC, e.g. n1=watts:7.5")
    kind = _kind_of(body)
    if kind is None:
        word = body.split(":", 1)[0] or body
        raise UsageError(f"--power {raw!r}: unknown power source '{word}'", _USAGE)
    arg = body[len(kind) + 1:] if body.startswith(kind + ":") else ""
    if kind in THIS_MACHINE and body != kind:
        raise UsageError(f"--power {raw!r}: {kind} takes no argument", f"write {kind} (or NODE={kind})")
    if kind in ("cmd", "csv") and not arg.strip():
        raise UsageError(f"--power {raw!r}: {kind}: needs a {'command' if kind == 'cmd' else 'file'}",
                         "e.g. cmd:'my-meter --watts' or csv:power.csv")
    if kind == "watts":  # one meter of the whole cluster: checked again against its node count
        check_watts(arg, f"--power {raw}", up_to=100_000 if node == CLUSTER else None)
    return Spec(node, kind, arg, raw)


def check_watts(value: Any, what: str = "--watts", nodes: int = 1, up_to: int | None = None) -> float:
    """A declared power: a finite number of watts a running node (``nodes`` of them, for one meter
    of several) can draw, within [E.MIN_NODE_WATTS, E.MAX_NODE_WATTS] per node."""
    try:
        w = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{what}: {value!r} is not a number of watts", "give the node's power in W, e.g. 7.5") from None
    lo, hi = E.MIN_NODE_WATTS * max(1, nodes), E.MAX_NODE_WATTS * max(1, up_to or nodes)
    if not (math.isfinite(w) and lo <= w <= hi):
        per = "per node" if nodes <= 1 and not up_to else f"for the {nodes} node(s) it covers"
        raise UsageError(f"{what}: {value!r} W is not a power a running node draws",
                         f"give {lo:g} to {hi:g} W {per}, e.g. 7.5 for a Raspberry Pi 4")
    return w


def check_interval(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not (MIN_INTERVAL <= v <= MAX_INTERVAL):
        raise UsageError(f"--power-interval {value!r} is not allowed",
                         f"give {MIN_INTERVAL:g} to {MAX_INTERVAL:g} seconds between samples (defaults: rapl 0.1, "
                         "cmd, ipmi and pmic 1)")
    return v


def check_specs(specs: Sequence[str], watts: float | None = None, interval: float | None = None) -> None:
    """The options' syntax alone (before the machine is probed or anything built): one-line UsageError."""
    for s in specs:
        parse_spec(s)
    if watts is not None:
        check_watts(watts)
    if interval is not None:
        if not specs and watts is None:
            raise UsageError("--power-interval was given without a power source", "add --power SPEC (or --watts W)")
        check_interval(interval)
