"""preflight's node checks in one session per node (:func:`preflight.facts_and_clock`): the facts and
the clock from one Python, and each way a node fails to answer named as before (a stand-in ssh)."""
from __future__ import annotations

import os
import time

import pytest

from clusterbench.cluster import preflight as P
from clusterbench.errors import EnvironmentProblem
from clusterbench.launch import remote

pytestmark = pytest.mark.integration


def test_facts_and_the_clock_from_one_python_here():
    f, clock = P.facts_and_clock("localhost", ["localhost"], timeout=30)
    assert f["hostname"] and f["python_ok"] and f["transport"] == "local"
    assert f["resolve"]["localhost"]["address"]
    # this machine's addresses, loopback and link-local left out (`ip` is on every machine here)
    assert f["addresses"] and all(a.split("/")[0] not in ("127.0.0.1", "::1") and not a.startswith("fe80:")
                                  for _, a in f["addresses"]), f["addresses"]
    assert 0 <= f["rtt_s"] < 30 and f["head_sent"] <= f["time_start"] + 1
    assert clock is not None and clock["rounds"] == P.CLOCK_ROUNDS
    assert abs(clock["offset_s"]) <= clock["uncertainty_s"] + 0.05  # the same clock


def _stand_in_ssh(tmp_path, monkeypatch, body: str) -> None:
    """An ``ssh`` on PATH that says it is OpenSSH 9.2 to ``-V`` and runs ``body`` for a remote command."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ssh").write_text('#!/bin/sh\n[ "$1" = "-V" ] && { echo "OpenSSH_9.2p1 Debian" >&2; exit 0; }\n' + body)
    (bindir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    monkeypatch.setenv("CLUSTERBENCH_SSH_SHARE", "0")


@pytest.mark.parametrize("body, problem, fix", [
    ('echo "ssh: connect to host node-x.example port 22: Connection refused" >&2; exit 255\n',
     "cannot reach node-x.example over ssh: nothing answers on the ssh port", "start sshd on node-x.example"),
    ('echo "sh: 1: python3: not found" >&2; exit 127\n', "node-x.example has no python3", "install Python 3.10"),
    ('echo "Traceback: boom" >&2; exit 1\n', "node-x.example: asking it what it is failed: Traceback: boom",
     "python3 -V"),
    ("echo hello; exit 0\n", "node-x.example printed no JSON about itself", "python3 -V"),
])
def test_a_node_that_cannot_say_what_it_is_is_named(tmp_path, monkeypatch, body, problem, fix):
    _stand_in_ssh(tmp_path, monkeypatch, body)
    with pytest.raises(EnvironmentProblem) as e:
        P.facts_and_clock("node-x.example", [], timeout=20)
    assert e.value.problem.startswith(problem) and fix in (e.value.fix or "")


def test_a_node_that_hangs_costs_the_timeout_and_is_named(tmp_path, monkeypatch):
    _stand_in_ssh(tmp_path, monkeypatch, "exec sleep 30\n")
    t0 = time.monotonic()
    with pytest.raises(EnvironmentProblem) as e:
        P.facts_and_clock("node-x.example", [], timeout=1.5)
    assert time.monotonic() - t0 < 8
    assert e.value.problem == "node-x.example did not answer within 1.5 s"


def test_the_stand_in_openssh_9_gets_curve25519_first_and_the_opt_out_keeps_its_order(tmp_path, monkeypatch):
    _stand_in_ssh(tmp_path, monkeypatch, "exit 0\n")
    assert remote.FAST_KEX[1] in remote.transport("node-x.example").prefix
    monkeypatch.setenv("CLUSTERBENCH_SSH_KEX", "default")
    assert remote.FAST_KEX[1] not in remote.transport("node-x.example").prefix
