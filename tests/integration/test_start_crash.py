"""A rank that crashes inside MPI_Init (before the kernel's first record: nothing measured) gets the
kernel launched once more, and the run says so; a second crash there is the run's error. Open MPI 4.1
under srun with PMIx does this now and then (a rank leaves MPI_Init's fence early and sends to one that
has not registered its receive callback: open-mpi/ompi#12495); here a wrapper makes rank 0 die of
SIGSEGV where MPI_Init would be, as that rank did, under the real mpirun."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.errors import KernelFailed
from clusterbench.launch import mpi as M

from pingpongkit import _cpus

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound, nothing machine-wide: the parallel pass

#: rank 0 dies of SIGSEGV before it starts the kernel while the file $1 holds fewer than $2 lines
#: (one line per launch), then execs the kernel; the other ranks wait, as they would in MPI_Init
WRAPPER = r'''
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
f=$1; n=$2; shift 2
if [ "$r" = 0 ]; then
  echo x >> "$f"
  if [ "$(wc -l < "$f")" -le "$n" ]; then kill -SEGV $$; fi
fi
exec "$@"
'''


def _launch(mpi, ctx, tmp_path, crashes: int):
    bench = get_benchmark("pingpong")
    params = bench.resolve(ctx, {"transport": "shm", "allow_root": True, "cpus": _cpus(ctx)})
    b = ctx.build("pingpong", openmp=False, cc=mpi.mpicc)
    count = tmp_path / "launches"
    count.write_text("")
    args = ["sh", "-c", WRAPPER, "wrapper", str(count), str(crashes), str(b.path), "--sizes=8", "--time_budget=0.01"]
    got: list[dict] = []
    try:
        return M.run_mpi(mpi, bench.launch_spec(ctx, params), args, timeout=60, launch_timeout=30,
                         on_record=got.append, name="pingpong"), got, count
    except KernelFailed as exc:
        return exc, got, count


@pytest.mark.integration
def test_a_crash_inside_mpi_init_is_launched_again_once_and_said(mpi, ctx, tmp_path) -> None:
    run, got, count = _launch(mpi, ctx, tmp_path, crashes=1)
    assert isinstance(run, M.MpiRun), run
    assert len(count.read_text().splitlines()) == 2  # the crashed launch and the one that ran
    assert any(r.get("type") == "result" for r in got), got  # measured by the second launch only
    assert len(run.restarts) == 1 and "launched again after a rank crashed while MPI started" in run.restarts[0], \
        run.restarts
    assert "SIGSEGV" in run.restarts[0], run.restarts  # mpirun names the rank at times, its status always says it


@pytest.mark.integration
def test_a_second_crash_inside_mpi_init_is_the_runs_error(mpi, ctx, tmp_path) -> None:
    run, got, count = _launch(mpi, ctx, tmp_path, crashes=2)
    assert isinstance(run, M.LaunchCrashed), run
    assert "SIGSEGV" in run.problem, run.problem
    assert len(count.read_text().splitlines()) == 2 and not got  # two launches, nothing passed on
