"""What a measuring session asks of a Raspberry Pi's telemetry: ``get_throttled`` on every node before
and after the run, ``get_throttled``, ``measure_temp`` and ``measure_clock arm`` sampled while it runs
(every :data:`INTERVAL` s, so a short run has none: "during long runs"), and the verdict.

Nodes are read through ``launch.remote`` (this machine directly; a node of the virtual cluster or a
machine of its own by the path ``cluster check`` uses); a node without ``vcgencmd`` is left out after
the first reading, so a cluster of other machines pays one snippet per node per run. Telemetry never
fails a run: a node that cannot be read is a note.
"""
from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from clusterbench.telemetry import board, verdict

#: seconds between samples while a run measures ($CLUSTERBENCH_PI_SAMPLE_S overrides: 0.2 to 600)
INTERVAL = 10.0
ENV_INTERVAL = "CLUSTERBENCH_PI_SAMPLE_S"
#: seconds the before/after reading of every node may take
READ_TIMEOUT = 20.0


def interval() -> float:
    try:
        v = float(os.environ.get(ENV_INTERVAL, INTERVAL))
    except ValueError:
        return INTERVAL
    return min(600.0, max(0.2, v))


class Watch:
    """The run's Pi telemetry: :meth:`start` before the first benchmark, :meth:`stop` after the last."""

    def __init__(self, hosts: Sequence[str] = ()) -> None:
        self.hosts = list(hosts)
        #: node -> {"before", "after", "samples"} for the nodes with vcgencmd
        self.nodes: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- reading ---------------------------------------------------------------------------
    def _read_all(self, nodes: Sequence[str]) -> dict[str, Any]:
        """``{node: snapshot or None}``; a node that cannot be read is a note and left out."""
        if not self.hosts:
            return {socket.gethostname(): board.snapshot()}
        from clusterbench.errors import ClusterbenchError
        from clusterbench.launch import remote

        try:
            got = remote.gather(list(nodes), board.SNIPPET, timeout=READ_TIMEOUT, keep_going=True)
        except ClusterbenchError as exc:
            self.notes.append(f"pi: vcgencmd not read ({exc})")
            return {}
        out: dict[str, Any] = {}
        for node, doc in got.items():
            if "error" in doc:
                self.notes.append(f"pi: vcgencmd not read on {node} ({doc['error']})")
            else:
                out[node] = doc.get("telemetry")
        return out

    def _sample(self, node: str) -> dict[str, Any] | None:
        if not self.hosts:
            return board.sample()
        from clusterbench.errors import ClusterbenchError
        from clusterbench.launch import remote

        try:
            p = remote.run_command(node, ["sh", "-c", board.SAMPLE_SH], timeout=board.TIMEOUT * 3)
        except ClusterbenchError:
            return None
        return board.parse_sample(p.stdout or "") if p.returncode == 0 else None

    def _loop(self, every: float) -> None:
        while not self._stop.wait(every):
            for node, r in list(self.nodes.items()):
                if self._stop.is_set():
                    return
                s = self._sample(node)
                if s:
                    r["samples"].append(s)

    # -- the run -------------------------------------------------------------------------------
    def start(self) -> None:
        """Read every node before the run; sample the nodes with vcgencmd while it runs."""
        for node, snap in self._read_all(self.hosts).items():
            if snap is not None:
                self.nodes[node] = {"before": snap, "after": None, "samples": []}
        if self.nodes:
            self._thread = threading.Thread(target=self._loop, args=(interval(),), name="cb-pi-telemetry",
                                            daemon=True)
            self._thread.start()

    def stop(self, interrupted: bool = False) -> tuple[list[Any], list[str]]:
        """Stop sampling, read every node with vcgencmd again (not the remote ones of an interrupted
        run: the user is waiting) -> (warnings, notes) for the run's record."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=board.TIMEOUT * 3 + 1.0)
            self._thread = None
        if not self.nodes:
            return [], list(self.notes)
        if not (interrupted and self.hosts):
            for node, snap in self._read_all(list(self.nodes)).items():
                if node in self.nodes:
                    self.nodes[node]["after"] = snap
        warnings, notes, _ = verdict.judge(self.nodes)
        return warnings, [*self.notes, *notes]


def flag(results: Sequence[Any], warnings: Sequence[Any]) -> list[Any]:
    """The run's figures with the Pi warnings added (a figure measured while a node throttled carries it)."""
    if not warnings:
        return list(results)
    extra = [w.as_dict() for w in warnings]
    return [replace(r, warnings=[*r.warnings, *extra]) for r in results]
