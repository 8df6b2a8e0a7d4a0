"""Power sources: what each node of a run draws while a benchmark runs.

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
``watts:W``
    A declared constant (``--watts W``): not measured, and marked ``declared`` wherever it appears.

Per node: ``NODE=SPEC`` (``--power n1=csv:n1.csv --power n2=watts:7.5``); a bare SPEC is this node,
or, for a run across hosts, every node without its own (``watts:``, ``cmd:``, ``csv:``). ``rapl`` and
``ipmi`` read only the machine clusterbench runs on: asked for another node, they are refused in one
line; on the virtual cluster (whose nodes share this machine) a bare ``rapl`` or ``ipmi`` is this
machine's power for all of its nodes together. ``cluster=SPEC`` is one meter for all the nodes
together (a wall meter on the cluster's power strip). Every node of the run needs exactly one source.

:class:`Meter` samples the live sources (rapl, ipmi, cmd) in threads of their own from before the
first benchmark starts until after the last one ends, each sample stamped with ``time.time()``
(wall clock, to match the kernels' phases and CSV logs) and ``time.monotonic()``;
:meth:`Meter.energy` gives the energy over any interval (see :mod:`clusterbench.analysis.energy`).
"""
from __future__ import annotations

import csv
import io
import math
import os
import re
import shlex
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

from clusterbench.energy import figures as E
from clusterbench.errors import UsageError
from clusterbench.files import printable
from clusterbench.probe.sysfs import FsRoot

KINDS = ("rapl", "ipmi", "cmd", "csv", "watts")
#: seconds between samples, per live kind (``--power-interval`` overrides)
DEFAULT_INTERVAL = {"rapl": 0.1, "ipmi": 1.0, "cmd": 1.0}
#: a meter command's time limit per sample; ipmitool talks to the BMC and gets longer
CMD_TIMEOUT = 2.0
IPMI_TIMEOUT = 5.0
MIN_INTERVAL, MAX_INTERVAL = 0.01, 60.0
#: how long to wait for a CSV log to reach the end of a phase before calling it not covered
CSV_GRACE_S = 3.0
#: a whole-cluster meter's node name
CLUSTER = "cluster"
#: the wall clock moving against the monotonic clock by more than this inside a phase voids it
CLOCK_STEP_S = 0.5
POWERCAP = "/sys/class/powercap"
_ZONE_RE = re.compile(r"^(intel-rapl|amd-rapl):\d+(?::\d+)*$")
RAPL_GRANT = ("run clusterbench as root, or let users read the counters: chmod o+r "
              "/sys/class/powercap/intel-rapl:*/energy_uj (until reboot), or a udev rule such as "
              "ACTION==\"add\", SUBSYSTEM==\"powercap\", RUN+=\"/bin/chmod o+r /sys%p/energy_uj\"")
_USAGE = "use rapl, ipmi, cmd:COMMAND, csv:FILE or watts:W, each optionally as NODE=SPEC"


# ---------------------------------------------------------------------------------------------
# Specs
# ---------------------------------------------------------------------------------------------
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
    if kind in ("rapl", "ipmi") and body != kind:
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
                         "cmd and ipmi 1)")
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


# ---------------------------------------------------------------------------------------------
# Samples and sources
# ---------------------------------------------------------------------------------------------
@dataclass
class Sample:
    wall: float
    mono: float
    watts: float | None = None
    #: cumulative joules per counter (RAPL domains, a joule meter)
    joules: dict[str, float] | None = None
    error: str | None = None


class SampleFailed(Exception):
    """One reading failed; ``str(exc)`` says why."""


class Source:
    """One meter: ``label`` names it in the figures, ``covers`` the run's nodes it measures."""

    kind = ""
    live = False
    declared = False

    def __init__(self, label: str, covers: Sequence[str], spec: Spec) -> None:
        self.label = label
        self.covers = list(covers)
        self.spec = spec
        self.interval: float | None = None
        self.timeout = 0.0
        self.samples: list[Sample] = []

    def check(self) -> None:
        """Raise a one-line UsageError when the source cannot be read now (bounded in time)."""

    def read(self) -> Sample:
        raise NotImplementedError

    def take(self) -> Sample:
        """One reading, stamped at its middle (a meter command takes a while); a failure is a
        sample with ``error`` set."""
        w0, m0 = time.time(), time.monotonic()
        try:
            s = self.read()
            err = None
        except SampleFailed as exc:
            s, err = Sample(0.0, 0.0), str(exc)
        w1, m1 = time.time(), time.monotonic()
        s.wall, s.mono, s.error = (w0 + w1) / 2, (m0 + m1) / 2, err
        return s

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "spec": self.spec.source_text if self.kind != "cmd" else
                             f"cmd:{self.command_text}", "declared": self.declared,
                             "rate_hz": round(1.0 / self.interval, 6) if self.interval else None}
        if self.covers != [self.label]:
            d["covers"] = list(self.covers)
        return d

    @property
    def command_text(self) -> str:
        return self.spec.arg

    def energy(self, t0: float, t1: float) -> dict[str, Any]:
        """{"joules", "avg_watts", ...} over [t0, t1]; raises NotCovered with the reason."""
        raise NotImplementedError


class ConstantSource(Source):
    kind = "watts"
    declared = True

    def __init__(self, label: str, covers: Sequence[str], spec: Spec) -> None:
        super().__init__(label, covers, spec)
        self.watts = check_watts(spec.arg, f"--power {spec.text}", nodes=len(self.covers))

    def energy(self, t0: float, t1: float) -> dict[str, Any]:
        E._check_interval(t0, t1)
        return {"joules": self.watts * (t1 - t0), "avg_watts": self.watts, "declared": True}


class LiveSource(Source):
    """A source sampled by the meter's thread; energy from its samples."""

    live = True
    counter = False  # cumulative joules (True) or watts

    def _window(self, t0: float, t1: float) -> list[Sample]:
        """The samples between the last good one at or before t0 and the first good one at or
        after t1; a failure among them, or a wall clock step, voids the interval."""
        ss = sorted(list(self.samples), key=lambda s: s.wall)
        good = [i for i, s in enumerate(ss) if s.error is None]
        if not ss:
            raise E.NotCovered("the meter has no samples")
        lo = max((i for i in good if ss[i].wall <= t0), default=None)
        hi = min((i for i in good if ss[i].wall >= t1), default=None)
        first, last = (lo if lo is not None else 0), (hi if hi is not None else len(ss) - 1)
        for s in ss[first:last + 1]:
            if s.error is not None:
                at = s.wall - t0
                when = f"{at:.1f} s into the interval" if at >= 0 else f"{-at:.1f} s before it"
                raise E.NotCovered(f"the meter failed {when}: {s.error}")
        if lo is None:
            raise E.NotCovered("no good sample at or before the start of the interval"
                               + (f" (the first is {ss[good[0]].wall - t0:.2f} s after it)" if good else ""))
        if hi is None:
            raise E.NotCovered("no good sample at or after the end of the interval"
                               + (f" (the last is {t1 - ss[good[-1]].wall:.2f} s before it)" if good else ""))
        win = ss[lo:hi + 1]
        offsets = [s.wall - s.mono for s in win]
        if max(offsets) - min(offsets) > CLOCK_STEP_S:
            raise E.NotCovered(f"the wall clock was stepped by {max(offsets) - min(offsets):.2f} s during the "
                               "interval (NTP?)")
        gap = E.largest_gap([s.wall for s in win], t0, t1)
        limit = 5 * (self.interval or 1.0) + self.timeout
        if gap > limit:
            raise E.NotCovered(f"no sample for {gap:.1f} s (more than {limit:.1f} s) inside the interval")
        return win

    def energy(self, t0: float, t1: float) -> dict[str, Any]:
        win = self._window(t0, t1)
        times = [s.wall for s in win]
        if self.counter:
            keys = list(win[0].joules or {})
            if any(set(s.joules or {}) != set(keys) for s in win):
                raise E.NotCovered("the counters read changed during the interval")
            wraps = self.wraps()
            j = sum(E.counter_energy(times, [s.joules[k] for s in win], t0, t1, wraps.get(k))  # type: ignore[index]
                    for k in keys)
            return {"joules": j, "avg_watts": E.average_power(j, t0, t1), "samples": len(win)}
        watts = [s.watts for s in win]
        j = E.integrate_power(times, watts, t0, t1)  # type: ignore[arg-type]
        return {"joules": j, "avg_watts": E.average_power(j, t0, t1), "samples": len(win),
                "peak_watts": max(watts)}  # type: ignore[type-var]

    def wraps(self) -> dict[str, float | None]:
        return {}


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


_READING_RE = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(w|watts?|j|joules?)?$", re.I)


def parse_reading(text: str) -> tuple[float, str]:
    """A meter's output: one number of watts (``7.5``, ``7.5 W``, ``7.5 watts``) or joules of a
    cumulative counter (``1234 J``) -> (value, "W" | "J"); anything else raises SampleFailed."""
    body = (text or "").strip()
    m = _READING_RE.match(body)
    if not m:
        shown = body if len(body) <= 60 else body[:57] + "..."
        raise SampleFailed(f"the meter printed {shown!r}, not a number of watts (7.5, 7.5 W) or joules (1234 J)")
    value = float(m.group(1))
    unit = "J" if (m.group(2) or "w").lower().startswith("j") else "W"
    if not math.isfinite(value) or value < 0:
        raise SampleFailed(f"the meter printed {value!r} {unit}, not a power or energy")
    return value, unit


def run_bounded(argv: Sequence[str], timeout: float) -> str:
    """Run ``argv`` in a session of its own, bounded by ``timeout`` (its whole process group is
    killed after that); its stdout, or SampleFailed (cannot start, timeout, non-zero exit)."""
    from clusterbench.launch import process

    try:
        run = process.spawn(list(argv))
    except OSError as exc:
        raise SampleFailed(f"cannot start {argv[0]} ({exc.strerror})") from None
    try:
        try:
            out, err = run.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SampleFailed(f"no answer within {timeout:g} s (killed)") from None
    finally:
        run.end()
    text, etext = out.decode(errors="replace"), err.decode(errors="replace").strip()
    if run.proc.returncode != 0:
        last = etext.splitlines()[-1] if etext else ""
        raise SampleFailed(f"exited with status {run.proc.returncode}" + (f": {last[:120]}" if last else ""))
    return text


class CommandSource(LiveSource):
    kind = "cmd"

    def __init__(self, label: str, covers: Sequence[str], spec: Spec, node: str) -> None:
        super().__init__(label, covers, spec)
        self.command = spec.arg.replace("{node}", shlex.quote(node))
        self.timeout = CMD_TIMEOUT
        self.unit: str | None = None
        #: a node that is a machine of its own (reached by ssh) runs its meter command itself, where
        #: its meter is (a sensor on its board); the others run it here
        self.on: Any = _separate_machine(node) if node != CLUSTER else None
        if self.on is not None:
            self.timeout = CMD_TIMEOUT + 3.0  # an ssh connection per reading

    def _run(self) -> str:
        if self.on is None:
            return run_bounded(["sh", "-c", self.command], self.timeout)
        from clusterbench.errors import EnvironmentProblem
        from clusterbench.launch import remote

        try:
            p = remote.run_command(self.on, ["sh", "-c", self.command], timeout=self.timeout)
        except EnvironmentProblem as exc:
            raise SampleFailed(exc.problem) from None
        if p.returncode != 0:
            last = (p.stderr or "").strip().splitlines()[-1:] or [""]
            raise SampleFailed(f"exited with status {p.returncode} on {self.on.host}" + (f": {last[0][:120]}" if last[0] else ""))
        return p.stdout

    @property
    def command_text(self) -> str:
        return self.command

    def check(self) -> None:
        try:
            _, self.unit = parse_reading(self._run())
        except SampleFailed as exc:
            raise UsageError(f"--power {self.spec.text}: the meter command failed at the start: {exc}",
                             "check it by hand: it must print one number of watts (7.5, 7.5 W) or joules (1234 J) "
                             f"and exit 0 within {self.timeout:g} s") from None
        self.counter = self.unit == "J"

    def read(self) -> Sample:
        value, unit = parse_reading(self._run())
        if unit != self.unit:
            raise SampleFailed(f"the meter printed {unit} where it printed {self.unit} at the start")
        return Sample(0.0, 0.0, joules={"meter": value}) if unit == "J" else Sample(0.0, 0.0, watts=value)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "unit": self.unit, "timeout_s": self.timeout}


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


# -- CSV logs --------------------------------------------------------------------------------
_TIME_COLS = ("time", "timestamp")
_POWER_COLS = ("watts", "power", "w")


def _column(name: str) -> str:
    n = name.strip().strip('"').strip().lower()
    n = re.sub(r"\s*[\(\[]\s*w\s*[\)\]]$", "", n)  # "power (W)", "power [W]"
    n = re.sub(r"_w$", "", n)  # "power_w"
    return n


def parse_time(text: str) -> float:
    """Unix seconds, or ISO 8601 (an offset or Z; none: local time) -> unix seconds."""
    t = text.strip()
    try:
        v = float(t)
    except ValueError:
        pass
    else:
        if not (math.isfinite(v) and v >= 1e9):
            raise ValueError(f"'{printable(t, 40)}' is not unix seconds (1e9 or more) or ISO 8601")
        return v
    iso = t[:-1] + "+00:00" if t.endswith(("Z", "z")) else t
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(f"'{printable(t, 40)}' is not unix seconds or an ISO 8601 time") from None
    return when.timestamp()  # a naive time is this machine's local time


def read_csv_log(text: str) -> tuple[list[float], list[float]]:
    """(times, watts) of a power log; ValueError naming the line for anything it cannot read (a
    last line without its newline is a line still being written, and is left out)."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines = lines[:-1]
    body = "".join(lines)
    if not body.strip():
        raise ValueError("it has no header row yet")
    head = body.splitlines()[0]
    delim = next((d for d in (",", ";", "\t") if d in head), ",")
    rows = list(csv.reader(io.StringIO(body), delimiter=delim))
    cols = [_column(c) for c in rows[0]]
    ti = next((cols.index(c) for c in _TIME_COLS if c in cols), None)
    wi = next((cols.index(c) for c in _POWER_COLS if c in cols), None)
    if ti is None or wi is None:
        raise ValueError(f"its header '{printable(head.strip())}' names no {'time/timestamp' if ti is None else 'watts/power/W'} "
                         "column")
    times, watts = [], []
    for n, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        try:
            t = parse_time(row[ti])
            w = float(row[wi])
        except IndexError:
            raise ValueError(f"line {n} has fewer columns than its header") from None
        except ValueError as exc:
            raise ValueError(f"line {n}: {printable(str(exc))}" if "unix" in str(exc) else
                             f"line {n}: '{printable(row[wi].strip())}' is not a number of watts") from None
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"line {n}: {w!r} W is not a power")
        if times and t < times[-1]:
            raise ValueError(f"line {n}: its time {row[ti].strip()[:40]!r} is before the line above's: the log's "
                             "clock went backwards (or two logs were merged); a log must be in time order")
        times.append(t)
        watts.append(w)
    return times, watts


class CsvSource(Source):
    kind = "csv"

    def __init__(self, label: str, covers: Sequence[str], spec: Spec, node: str) -> None:
        super().__init__(label, covers, spec)
        self.path = os.path.abspath(os.path.expanduser(spec.arg.replace("{node}", node)))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "spec": f"csv:{self.path}", "rate_hz": None}

    def _read(self) -> str:
        from clusterbench.files import read_text

        return read_text(self.path, "power log", fix="give a CSV log of the meter with time and watts columns")

    def check(self) -> None:
        if not os.path.lexists(self.path):
            raise UsageError(f"--power {self.spec.text}: no file {self.path}",
                             "start the meter's log first (it is read after each benchmark), or fix the path")
        try:
            text = self._read()
        except UsageError as exc:
            raise UsageError(f"--power {self.spec.text}: {exc.problem}", exc.fix) from None
        if not text.strip():
            raise UsageError(f"--power {self.spec.text}: {self.path} is empty",
                             "start the meter's log first, so that it has its header row and a reading, "
                             "then start the run")
        try:
            read_csv_log(text)
        except ValueError as exc:
            raise UsageError(f"--power {self.spec.text}: {self.path}: {exc}",
                             "a header with time (unix seconds or ISO 8601) and watts columns, e.g. "
                             "'time,watts'") from None

    def energy(self, t0: float, t1: float) -> dict[str, Any]:
        try:
            times, watts = read_csv_log(self._read())
        except UsageError as exc:
            raise E.NotCovered(exc.problem) from None
        except ValueError as exc:
            raise E.NotCovered(f"{self.path}: {exc}") from None
        try:
            j = E.integrate_power(times, watts, t0, t1)
        except E.NotCovered as exc:
            raise E.NotCovered(f"the log {self.path} does not cover the interval: {exc}") from None
        inside = [w for t, w in zip(times, watts) if t0 <= t <= t1]
        return {"joules": j, "avg_watts": E.average_power(j, t0, t1), "samples": len(inside),
                "peak_watts": max(inside, default=None)}


# ---------------------------------------------------------------------------------------------
# The meter
# ---------------------------------------------------------------------------------------------
def this_host() -> str:
    return socket.gethostname()


def _separate_machine(node: str) -> Any:
    """The ssh transport of ``node`` when it is a machine of its own, else None (this machine, a
    namespace of it, or a name that is not a host: a meter command reads it from here)."""
    from clusterbench.errors import ClusterbenchError
    from clusterbench.launch import remote

    try:
        t = remote.transport(node)
    except ClusterbenchError:
        return None
    return t if t.kind == "ssh" else None


def _make(spec: Spec, label: str, covers: Sequence[str], node: str, root: str) -> Source:
    if spec.kind == "watts":
        return ConstantSource(label, covers, spec)
    if spec.kind == "rapl":
        return RaplSource(label, covers, spec, root=root)
    if spec.kind == "ipmi":
        return IpmiSource(label, covers, spec)
    if spec.kind == "cmd":
        return CommandSource(label, covers, spec, node)
    return CsvSource(label, covers, spec, node)


def _remote_refusal(spec: Spec, node: str) -> UsageError:
    return UsageError(f"--power {spec.text}: {spec.kind} reads only the machine clusterbench runs on "
                      f"({this_host()}), and {node} is another node",
                      f"give {node} a source that works from here: --power {node}=cmd:COMMAND, "
                      f"{node}=csv:FILE or {node}=watts:W")


def build_meter(specs: Sequence[str], watts: float | None = None, nodes: Sequence[str] = (),
                local: Sequence[str] = (), virtual: bool = False, interval: float | None = None,
                root: str = "/") -> "Meter":
    """The run's meter from ``--power`` specs and ``--watts``; ``nodes``: the run's nodes (empty: this
    node only); ``local``: those that are this machine; ``virtual``: they are the virtual cluster's
    (namespaces of this machine). Every node gets exactly one source; anything else is a one-line
    UsageError naming the fix."""
    parsed = [parse_spec(s) for s in specs]
    if watts is not None:
        w = check_watts(watts)
        parsed.append(Spec(None, "watts", f"{w:g}", f"--watts {w:g}"))
    if interval is not None:
        interval = check_interval(interval)
    me = this_host()
    run_nodes = list(nodes) or [me]
    local_set = set(local) | ({me} if not nodes else set())
    aliases = {"localhost": me, "local": me, me: me}
    bare = [s for s in parsed if s.node is None]
    if len(bare) > 1:
        raise UsageError(f"two power sources for every node ({bare[0].text!r} and {bare[1].text!r})",
                         "give one bare source (or --watts), and NODE=SPEC for the nodes that differ")
    per: dict[str, Spec] = {}
    whole: Spec | None = None
    for s in parsed:
        if s.node is None:
            continue
        if s.node == CLUSTER:
            whole = s
            continue
        node = s.node if s.node in run_nodes else aliases.get(s.node, s.node) if not nodes else s.node
        if node not in run_nodes:
            raise UsageError(f"--power {s.text}: {s.node} is not a node of this run ({', '.join(run_nodes)})",
                             "name one of the run's nodes (or 'cluster' for one meter of them all)")
        if node in per:
            raise UsageError(f"two power sources for {node} ({per[node].text!r} and {s.text!r})",
                             "give each node one source")
        per[node] = s
    sources: list[Source] = []
    if whole is not None:
        if per or bare:
            raise UsageError(f"--power {whole.text} meters every node together, and other sources were given too",
                             "give either one cluster= meter or a source per node, not both (it would count twice)")
        if whole.kind in ("rapl", "ipmi") and not set(run_nodes) <= local_set:
            raise _remote_refusal(whole, next(n for n in run_nodes if n not in local_set))
        sources.append(_make(whole, CLUSTER, run_nodes, CLUSTER, root))
    else:
        rest = [n for n in run_nodes if n not in per]
        for node, s in per.items():
            if s.kind in ("rapl", "ipmi"):
                if node not in local_set:
                    raise _remote_refusal(s, node)
                if virtual:
                    raise UsageError(f"--power {s.text}: the virtual cluster's nodes share this machine, whose "
                                     f"{s.kind} reading is all of them together",
                                     f"give {s.kind} once for all of them: a bare --power {s.kind}")
            sources.append(_make(s, node, [node], node, root))
        if rest and not bare:
            raise UsageError(f"no power source for {', '.join(rest)}",
                             f"add --power {rest[0]}=SPEC, or one bare --power SPEC / --watts W for every node")
        if rest and bare:
            b = bare[0]
            if b.kind in ("rapl", "ipmi"):
                remote = [n for n in rest if n not in local_set]
                if remote:
                    raise _remote_refusal(b, remote[0])
                if per and virtual:
                    raise UsageError(f"--power {b.text} reads this machine, which hosts every virtual node, and "
                                     f"{', '.join(per)} have sources of their own", "it would count twice: give "
                                     "the virtual cluster one source")
                sources.append(_make(b, me, rest, me, root))
            else:
                sources.extend(_make(b, n, [n], n, root) for n in rest)
    for src in sources:
        if src.live:
            src.interval = interval or DEFAULT_INTERVAL[src.kind]
    return Meter(sources, nodes=run_nodes)


class Meter:
    """The run's power sources, sampled from :meth:`start` to :meth:`stop`."""

    def __init__(self, sources: Sequence[Source], nodes: Sequence[str]) -> None:
        self.sources = list(sources)
        self.nodes = list(nodes)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.started: float | None = None

    @property
    def live(self) -> list[LiveSource]:
        return [s for s in self.sources if isinstance(s, LiveSource)]

    def check(self) -> None:
        """Every source readable now (a meter command run once, bounded); UsageError otherwise."""
        for s in self.sources:
            s.check()

    def describe(self) -> dict[str, Any]:
        return {s.label: s.describe() for s in self.sources}

    @property
    def declared(self) -> bool:
        return any(s.declared for s in self.sources)

    def start(self) -> None:
        """Sample every live source in a thread of its own; returns once each has its first sample
        (so there is one from before the benchmark starts)."""
        self.started = time.time()
        for src in self.live:
            t = threading.Thread(target=self._loop, args=(src,), name=f"cb-power-{src.label}", daemon=True)
            t.start()
            self._threads.append(t)
        limit = time.monotonic() + max([s.timeout + 1.0 for s in self.live] or [0])
        while any(not s.samples for s in self.live) and time.monotonic() < limit:
            time.sleep(0.005)

    def _loop(self, src: LiveSource) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            src.samples.append(src.take())
            due += src.interval or 1.0
            now = time.monotonic()
            if due < now:  # a slow reading: the next one now, not a burst to catch up
                due = now
            self._stop.wait(due - now)

    def wait_past(self, t_wall: float) -> None:
        """Wait (bounded: two intervals and a reading's time limit) until every live source has a
        reading stamped after ``t_wall``, so an interval ending there is bracketed."""
        limit = time.monotonic() + max([2 * (s.interval or 1.0) + s.timeout + 0.5 for s in self.live] or [0])
        while time.monotonic() < limit:
            if all(s.samples and s.samples[-1].wall >= t_wall for s in self.live):
                return
            if self._stop.is_set():
                return
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=IPMI_TIMEOUT + 1.0)
        self._threads = []

    def energy(self, t0: float, t1: float, wait: bool = True) -> dict[str, Any]:
        """The energy over [t0, t1] (wall clock): per node (source), the cluster's total, the
        average power; ``{"missing": reason, ...}`` when any node's figure is missing. ``wait``:
        first let the live sources sample past t1 and a CSV log catch up (bounded)."""
        if wait and self.live and self.started is not None and not self._stop.is_set():
            self.wait_past(t1)
        per: dict[str, dict[str, Any]] = {}
        for s in self.sources:
            grace = CSV_GRACE_S if wait and isinstance(s, CsvSource) and time.time() - t1 < CSV_GRACE_S else 0.0
            deadline = time.monotonic() + grace
            while True:
                try:
                    fig = s.energy(t0, t1)
                    why = E.implausible_power(fig["joules"], fig["avg_watts"], len(s.covers), fig.pop("peak_watts", None))
                    per[s.label] = {"missing": why} if why else fig
                    break
                except E.NotCovered as exc:
                    if time.monotonic() < deadline and "before the end" in str(exc):
                        time.sleep(0.25)  # a logger that writes once a second may not be there yet
                        continue
                    per[s.label] = {"missing": str(exc)}
                    break
        total, why = E.cluster_total(per)
        out: dict[str, Any] = {"phase_s": t1 - t0, "phase_unix": [t0, t1]}
        if total is None:
            out["missing"] = why
        else:
            out.update(joules=total, avg_watts=E.average_power(total, t0, t1))
        out.update(per_node=per, sources=self.describe(), declared=self.declared,
                   basis=basis(self.sources), nodes=list(self.nodes))
        return out


def basis(sources: Sequence[Source]) -> str:
    """'measured', 'declared (not measured)' or 'measured and declared' (which nodes: see sources)."""
    d = {s.declared for s in sources}
    return "declared (not measured)" if d == {True} else "measured and declared" if d == {True, False} else "measured"
