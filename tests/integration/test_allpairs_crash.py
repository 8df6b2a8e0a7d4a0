"""allpairs.c's crash report, with the kernel itself under mpirun: a rank that dies of a signal (the
--crash_round hook: a call to a null function pointer) says on stderr where it was (rank, node, phase,
round, partner) and who jumped to null, still dies of SIGSEGV, and the launch's error quotes it. (Issue:
allpairs' rank 0 once died of SIGSEGV under srun on the machines, and the error said no more than that.)"""
from __future__ import annotations

import subprocess

import pytest

from clusterbench.launch.mpi import run as M

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound, nothing machine-wide: the parallel pass


@pytest.mark.integration
@pytest.mark.parametrize("crash_rank", [0, 2])
def test_a_crashed_rank_says_where_and_still_dies_of_the_signal(mpi, live_probe, crash_rank: int) -> None:
    from clusterbench.benchmarks.base import RunContext

    b = RunContext(probe=live_probe).build("allpairs", openmp=False, cc=mpi.mpicc)
    p = subprocess.run([mpi.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "3", "--mca", "btl", "self,vader",
                        str(b.path), "--pair_budget=0.02", "--bw_size=65536", "--crash_round=1",
                        f"--crash_rank={crash_rank}"], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0, p.stdout[-2000:]
    said = [ln for ln in p.stderr.splitlines() if ln.startswith(f"allpairs: rank {crash_rank} ")]
    assert said and said[0].startswith(f"allpairs: rank {crash_rank} of 3 on "), p.stderr[-3000:]
    partner = {0: 2, 2: 0}[crash_rank]  # round 1 of 3 ranks pairs 0 and 2
    assert f"got SIGSEGV (code 1, address 0x0) in the barrier before the round, round 1 of pass 0, partner {partner}" \
        in said[0], said
    assert said[1].startswith(f"allpairs: rank {crash_rank} jumped to 0x0 with arguments 0x") and \
        said[1].endswith(" from:"), said
    assert said[2].startswith(f"allpairs: rank {crash_rank} frame: {b.path}("), said  # the kernel's own main()
    assert "on signal 11" in p.stderr, p.stderr[-2000:]  # still a SIGSEGV death (mpirun's words)
    msg, fix = M.explain_failure(p.stderr, p.returncode, "MPI kernel 'allpairs'", local=True)
    assert f"rank {crash_rank} on " in msg and "crashed with SIGSEGV (allpairs: rank" in msg, msg
    assert f"round 1 of pass 0, partner {partner}; frames: {b.path}(" in msg and "report it" in fix, msg
