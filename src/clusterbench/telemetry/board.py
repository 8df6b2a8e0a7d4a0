"""Reading ``vcgencmd`` on this machine, bounded in time; :data:`SNIPPET` is what a node of a cluster
runs (through ``launch.remote``) to read its own.

``vcgencmd`` is the Raspberry Pi firmware's tool (Raspberry Pi OS: ``raspi-utils``; older releases and
Ubuntu: ``libraspberrypi-bin``); it needs read access to ``/dev/vcio`` (the ``video`` group). A machine
without it is not a Raspberry Pi, or lacks the tool: :func:`present` says so and nothing is read.
"""
from __future__ import annotations

import shutil
import subprocess
from typing import Any

from clusterbench.telemetry import vcgencmd as V

#: seconds a vcgencmd call may take (it answers in milliseconds; a hung firmware mailbox does not)
TIMEOUT = 3.0

#: prints this node's :func:`snapshot` as one JSON line (run on each node by launch.remote.gather)
SNIPPET = ("import json; from clusterbench.telemetry.board import snapshot; "
           "print(json.dumps({'telemetry': snapshot()}))")


class VcgencmdFailed(Exception):
    """One vcgencmd call failed; ``str(exc)`` says why, in one line."""


def present() -> str | None:
    """The path of ``vcgencmd`` on this machine's PATH, or None."""
    return shutil.which("vcgencmd")


def call(*args: str, timeout: float = TIMEOUT) -> str:
    """``vcgencmd ARGS``' output; VcgencmdFailed (not installed, no answer, non-zero exit)."""
    from clusterbench import process

    exe = present()
    if exe is None:
        raise VcgencmdFailed("vcgencmd is not installed here")
    try:
        p = process.run([exe, *args], timeout=timeout)
    except subprocess.TimeoutExpired:
        raise VcgencmdFailed(f"`vcgencmd {' '.join(args)}` did not answer within {timeout:g} s") from None
    except OSError as exc:
        raise VcgencmdFailed(f"`vcgencmd {' '.join(args)}` cannot start: {exc.strerror}") from None
    if p.returncode != 0:
        last = ((p.stderr or p.stdout or "").strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise VcgencmdFailed(f"`vcgencmd {' '.join(args)}`: {last[:120]}")
    return p.stdout


#: what one sample reads: key -> (vcgencmd arguments, parser)
READINGS = {
    "throttled": (("get_throttled",), V.parse_throttled),
    "temp_c": (("measure_temp",), V.parse_temp),
    "arm_hz": (("measure_clock", "arm"), V.parse_clock),
}


def sample(keys: tuple[str, ...] = tuple(READINGS)) -> dict[str, Any]:
    """One reading of ``keys`` (default all of :data:`READINGS`): ``{key: value}``, with
    ``errors: {key: why}`` for those that failed; ``throttled`` is the mask as an int."""
    out: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for key in keys:
        args, parse = READINGS[key]
        try:
            out[key] = parse(call(*args))
        except (VcgencmdFailed, ValueError) as exc:
            errors[key] = str(exc)
    if errors:
        out["errors"] = errors
    return out


def snapshot() -> dict[str, Any] | None:
    """This machine's reading for a run's record: ``{"throttled": {"raw", "now", "since_boot", ...},
    "temp_c", "arm_hz"}`` (and ``errors``), or None without vcgencmd."""
    if present() is None:
        return None
    s = sample()
    if isinstance(s.get("throttled"), int):
        s["throttled"] = V.throttled_doc(s["throttled"])
    return s


#: one sample on a node reached through launch.remote: the three readings in one shell call
SAMPLE_SH = "vcgencmd get_throttled; vcgencmd measure_temp; vcgencmd measure_clock arm"
#: a line's prefix -> (key, parser) in :data:`SAMPLE_SH`'s output
_PREFIXES = {"throttled=": ("throttled", V.parse_throttled), "temp=": ("temp_c", V.parse_temp),
             "frequency(": ("arm_hz", V.parse_clock)}


def parse_sample(text: str) -> dict[str, Any]:
    """:data:`SAMPLE_SH`'s output -> a :func:`sample` dict (lines it cannot read are left out)."""
    out: dict[str, Any] = {}
    for line in (text or "").splitlines():
        line = line.strip()
        for prefix, (key, parse) in _PREFIXES.items():
            if line.startswith(prefix):
                try:
                    out[key] = parse(line)
                except ValueError:
                    pass
    return out
