"""The process-and-records layer (launch/process.py) and launch-layer input handling."""
import os

import pytest


def _script(tmp_path, body: str):
    from clusterbench.kernels.build import Build

    path = tmp_path / "kernel.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return Build("chatty", path, {})


@pytest.mark.integration
def test_library_chatter_on_stdout_is_kept_as_evidence_not_a_protocol_error(tmp_path):
    """UCX/Open MPI print warnings on the kernel's stdout: they must not break the records."""
    from clusterbench.launch import local

    b = _script(tmp_path, """echo '[1700000000.1] [vm:123:0] ucp_context.c:1 UCX WARN transport rc not available'
echo '{"type":"validation","ok":true}'
echo 'Warning: Open MPI could not find a component'
echo '{"type":"result","metric":"m","unit":"s","samples":[1.5]}'
""")
    got = []
    recs = local.run_kernel(b, [], timeout=10, on_record=got.append)
    assert [r["type"] for r in recs] == ["validation", "result"] == [r["type"] for r in got]
    assert recs[1]["samples"] == [1.5]


@pytest.mark.integration
def test_a_broken_record_is_still_a_protocol_error(tmp_path):
    from clusterbench.errors import KernelFailed
    from clusterbench.launch import local

    b = _script(tmp_path, """echo 'chatter first'
echo '{"type":"validation","ok":true'
""")
    with pytest.raises(KernelFailed, match="printed a line that is not JSON"):
        local.run_kernel(b, [], timeout=10)


@pytest.mark.integration
def test_chatter_shows_in_the_error_when_the_kernel_fails(tmp_path):
    from clusterbench.errors import KernelFailed
    from clusterbench.launch import local

    b = _script(tmp_path, "echo 'UCX ERROR no such device'\nexit 3\n")
    with pytest.raises(KernelFailed, match=r"exited with status 3: \[stdout\] UCX ERROR no such device"):
        local.run_kernel(b, [], timeout=10)


@pytest.mark.integration
def test_sub_second_timeout_is_printed_with_its_precision(tmp_path):
    from clusterbench.errors import KernelFailed
    from clusterbench.launch import local

    b = _script(tmp_path, "exec sleep 30\n")
    with pytest.raises(KernelFailed, match=r"timed out after 0\.3 s"):
        local.run_kernel(b, [], timeout=0.3)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.integration
def test_ending_a_session_reaches_children_in_process_groups_of_their_own():
    """As MPI ranks do: a child moved to its own process group is still in the session, and
    Spawned.end() kills it (killpg of the leader's group alone would miss it)."""
    import time

    from clusterbench import process

    import sys

    code = ("import os, subprocess, sys; p = subprocess.Popen(['sleep', '60'], preexec_fn=os.setpgrp); "
            "print(p.pid, flush=True); p.wait()")
    run = process.spawn([sys.executable, "-c", code])
    line = run.proc.stdout.readline()
    child = int(line)
    assert os.getpgid(child) != run.pid, "the test needs a child outside the leader's group"
    assert os.getsid(child) == run.pid
    run.end()
    time.sleep(0.1)
    assert not _alive(child) and not _alive(run.pid)


@pytest.mark.integration
def test_read_lines_yields_both_streams_and_the_last_unterminated_stderr_line():
    from clusterbench import process

    run = process.spawn(["sh", "-c", "echo out1; echo err1 >&2; printf 'out-partial'; printf 'err-last' >&2"])
    try:
        got = list(process.read_lines([run.proc], lambda: 5.0))
    finally:
        run.end()
    assert (0, "out", b"out1") in got and (0, "err", b"err1") in got
    assert (0, "err", b"err-last") in got
    assert all(line != b"out-partial" for _, _, line in got), "a partial stdout line is not a record"


@pytest.mark.integration
def test_a_tick_that_raises_bounds_the_read_and_end_leaves_nothing():
    import time

    from clusterbench.errors import KernelFailed
    from clusterbench import process

    run = process.spawn(["sh", "-c", "sleep 60"])
    deadline = time.monotonic() + 0.3

    def tick() -> float:
        if time.monotonic() >= deadline:
            raise KernelFailed("timed out", "raise --timeout")
        return deadline - time.monotonic()

    t0 = time.monotonic()
    with pytest.raises(KernelFailed):
        for _ in process.read_lines([run.proc], tick):
            pass
    run.end()
    assert time.monotonic() - t0 < 5
    assert process.session_pids(run.pid) == []


