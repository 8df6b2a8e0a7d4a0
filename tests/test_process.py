"""Launch-layer input handling: binary hostfiles (unit tier, no processes)."""
import pytest

from clusterbench.errors import UsageError
from clusterbench.launch import mpi as M


def test_binary_hostfile_is_one_line_usage_error(tmp_path):
    f = tmp_path / "hosts.bin"
    f.write_bytes(b"\xff\xfe\x00\x81garbage\x9c\n")
    with pytest.raises(UsageError) as ei:
        M.parse_hostfile(f)
    msg = str(ei.value)
    assert str(f) in msg and "not text" in msg
    assert "\n" not in msg



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
