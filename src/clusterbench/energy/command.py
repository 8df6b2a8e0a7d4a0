"""``cmd:COMMAND``: an external meter run at every sample, bounded in time, that prints watts or
the joules of a cumulative counter; on a node that is a machine of its own it runs there."""
from __future__ import annotations

import math
import re
import shlex
import subprocess
from typing import Any, Sequence

from clusterbench.energy.source import LiveSource, Sample, SampleFailed
from clusterbench.energy.spec import CLUSTER, Spec
from clusterbench.errors import UsageError

#: a meter command's time limit per sample; ipmitool talks to the BMC and gets longer
CMD_TIMEOUT = 2.0


def separate_machine(node: str) -> Any:
    """The ssh transport of ``node`` when it is a machine of its own, else None (this machine, a
    namespace of it, or a name that is not a host: a meter command reads it from here)."""
    from clusterbench.errors import ClusterbenchError
    from clusterbench.launch import remote

    try:
        t = remote.transport(node)
    except ClusterbenchError:
        return None
    return t if t.kind == "ssh" else None

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
    from clusterbench import process

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
        self.on: Any = separate_machine(node) if node != CLUSTER else None
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
