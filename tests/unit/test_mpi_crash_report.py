"""A rank that crashed says so in the error: the launcher names the rank, node and signal, and the
error quotes the rank's own report of where it was (allpairs.c's crash handler: phase, round, partner,
frames; the caller of a jump to null) or, without one, Open MPI's (address, frames). The one SIGSEGV of
allpairs' rank 0 under srun (the machines' Slurm tier) said only "rank 0 on node1 crashed with SIGSEGV"."""
from __future__ import annotations

from clusterbench.launch.mpi import run as M

#: what allpairs.c prints before it hands a SIGSEGV on, with Open MPI's report and srun's words after it
KERNEL_SAID = """[node1:01263] btl:tcp: now connected to 198.18.0.13, process [[34636,2831],2]
allpairs: rank 0 of 3 on node1 (pid 1263) got SIGSEGV (code 1, address 0x0) in gathering the host names, round -1 of pass -1, partner -1
allpairs: rank 0 jumped to 0x0 from:
allpairs: rank 0 frame: /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_tcp.so(+0x9a1c)[0x7ff7a1b3ea1c]
allpairs: rank 0 frame: /usr/lib/x86_64-linux-gnu/libopen-pal.so.40(opal_progress+0x2c)[0x7ff7a6b0be9c]
[node1:01263] *** Process received signal ***
[node1:01263] Signal: Segmentation fault (11)
[node1:01263] Failing at address: (nil)
[node1:01263] [ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x3c050)[0x7ff7a6855050]
[node1:01263] *** End of error message ***
srun: error: node1: task 0: Segmentation fault
srun: launch/slurm: _step_signal: Terminating StepId=1.26
srun: error: node3: task 2: Terminated
"""
#: the same crash with nothing but Open MPI's report (a kernel without its own handler)
OMPI_SAID = "\n".join(ln for ln in KERNEL_SAID.splitlines() if not ln.startswith("allpairs:")) + "\n"


def test_a_crash_quotes_the_ranks_own_report() -> None:
    msg, fix = M.explain_failure(KERNEL_SAID, 139, "MPI kernel 'allpairs'", local=True)
    assert msg.startswith("MPI kernel 'allpairs': rank 0 on node1 crashed with SIGSEGV (allpairs: rank 0 of 3 on "
                          "node1 (pid 1263) got SIGSEGV (code 1, address 0x0) in gathering the host names"), msg
    assert "frames: /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_tcp.so(+0x9a1c)" in msg, msg
    assert "opal_progress+0x2c" in msg and "report it" in fix


def test_a_crash_without_the_kernels_report_quotes_open_mpis() -> None:
    msg, _ = M.explain_failure(OMPI_SAID, 139, "k", local=True)
    assert msg == ("k: rank 0 on node1 crashed with SIGSEGV (Open MPI's report: Failing at address: (nil); "
                   "[ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x3c050)[0x7ff7a6855050])"), msg


def test_the_report_quoted_is_the_crashed_ranks_and_only_for_a_crash() -> None:
    other = KERNEL_SAID.replace("allpairs: rank 0", "allpairs: rank 2")  # srun still says task 0 crashed
    assert M.crash_report(other, "0").startswith("Open MPI's report: Failing at address: (nil)")
    assert M.crash_report(other, "2").startswith("allpairs: rank 2 of 3 on node1")
    assert M.crash_report(KERNEL_SAID, "0").startswith("allpairs: rank 0 of 3 on node1")
    assert M.crash_report("", "0") == ""
    # a rank killed from outside quotes nothing (its "report" would be another rank's)
    msg, _ = M.explain_failure(KERNEL_SAID.replace("task 0: Segmentation fault", "task 0: Killed"), 137, "k",
                               local=False)
    assert "was killed by SIGKILL" in msg and "allpairs: rank" not in msg, msg
    # frames are bounded
    many = KERNEL_SAID + "".join(f"allpairs: rank 0 frame: lib{i}.so(+0x{i})[0x{i}]\n" for i in range(40))
    assert len(M.crash_report(many, "0").split("; frames: ")[1].split()) == M.CRASH_FRAMES


def test_the_signal_a_rank_died_of_from_the_launchers_words_or_its_status() -> None:
    assert M.death_signal(KERNEL_SAID, 1) == 11  # srun's words beat the status
    assert M.death_signal("", 139) == 11 and M.death_signal("", 135) == 7  # mpirun without its banner
    assert M.death_signal("", 1) is None and M.death_signal("", None) is None and M.death_signal("", 255) is None
    assert M.START_CRASH_SIGNALS == {11, 7}  # SIGILL, SIGABRT would fail the same way again: not relaunched


def test_a_bare_status_of_128_plus_a_signal_is_named() -> None:
    msg, _ = M.explain_failure("", 139, "MPI kernel 'pingpong'")
    assert msg == "MPI kernel 'pingpong' exited with status 139 (128 + SIGSEGV: a process died of that signal)", msg
    msg, _ = M.explain_failure("", 3, "MPI kernel 'pingpong'")
    assert msg == "MPI kernel 'pingpong' exited with status 3", msg
