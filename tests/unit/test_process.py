"""The pure tests (they start no process) of what tests/integration/test_process.py tests with real
processes; its docstring describes the whole."""
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


def test_records_keep_chatter_and_enforce_validate_before_result():
    from clusterbench.errors import KernelFailed
    from clusterbench.process import Records

    r = Records("k")
    assert r.feed_out(b"UCX WARN something") is None
    assert r.last_line() == "[stdout] UCX WARN something"
    with pytest.raises(KernelFailed, match="before validating"):
        r.feed_out(b'{"type":"result","metric":"m","samples":[1]}')
    r2 = Records("k")
    r2.feed_out(b'{"type":"validation","ok":true}')
    assert r2.feed_out(b'{"type":"result","metric":"m","samples":[1]}')["metric"] == "m"
    with pytest.raises(KernelFailed, match="computed a wrong result: off by 2"):
        r2.feed_out(b'{"type":"validation","ok":false,"detail":"off by 2"}')


def test_launchers_are_registered_and_chosen_by_mpi_and_launcher_choice(monkeypatch):
    """mpirun (Open MPI), mpiexec (MPICH's Hydra) and srun register themselves; build_command hands a
    spec to the one serving the --launcher choice for this MPI (launch/mpi/launchers/)."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert {"mpirun", "mpiexec", "srun"} <= set(M.REGISTRY)
    ompi = M.MpiInstall("openmpi", "4.1", "/usr/bin/mpirun", "/usr/bin/mpicc")
    mpich = M.MpiInstall("mpich", "4.0", "/usr/bin/mpiexec.mpich", "/usr/bin/mpicc.mpich", device="ch4:ucx")
    assert M.launcher_for(ompi, M.LaunchSpec(2)).name == "mpirun"
    assert M.launcher_for(mpich, M.LaunchSpec(2)).name == "mpiexec"
    assert M.launcher_for(ompi, M.LaunchSpec(2, launcher="srun")).name == "srun"
    assert M.launcher_for(mpich, M.LaunchSpec(2, launcher="srun")).name == "srun"
    with pytest.raises(UsageError, match="--launcher 'pbs'"):
        M.launcher_for(ompi, M.LaunchSpec(2, launcher="pbs"))


# Hydra's frame around a rank that called MPI_Abort (MPICH 4.0, as printed on stdout by mpiexec)
_HYDRA_FRAME = """
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   RANK 1 PID 4242 RUNNING AT node1
=   EXIT CODE: 1
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Aborted (signal 6)
This typically refers to a problem with your application.
Please see the FAQ page for debugging suggestions""".splitlines()


@pytest.mark.parametrize("rank_first", [True, False])
def test_failure_quotes_the_ranks_words_not_the_launchers_frame(rank_first):
    """The rank's stderr and the launcher's stdout arrive in either order (CI saw the FAQ pointer quoted
    as the reason): the message quotes the rank's line wherever it falls, locally and through MPI."""
    from clusterbench.launch.mpi.run import explain_failure
    from clusterbench.process import Records

    r = Records("allreduce")
    said = b"Abort(1) on node 1: Internal error"
    if rank_first:
        r.feed_err(said)
    for line in _HYDRA_FRAME:
        r.feed_out(line.encode())
    if not rank_first:
        r.feed_err(said)
    assert r.last_line() == said.decode()
    msg, _ = explain_failure(r.tail_text, 1, "MPI kernel 'allreduce'")
    assert msg == "MPI kernel 'allreduce' exited with status 1: Abort(1) on node 1: Internal error"
    only = Records("k")
    for line in _HYDRA_FRAME:
        only.feed_out(line.encode())
    assert only.last_line() == "[stdout] Please see the FAQ page for debugging suggestions"
