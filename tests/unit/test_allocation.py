"""The pure tests (they start no process) of what tests/integration/test_allocation.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.launch import allocation
from clusterbench.launch.allocation.slurm import expand_nodelist


def test_outside_every_scheduler_there_is_no_allocation():
    assert allocation.current({"PATH": "/usr/bin"}) is None
    assert allocation.hosts({}) is None
    assert not allocation.inside("slurm", {}) and not allocation.inside("pbs", {})
    assert set(allocation.REGISTRY) >= {"slurm", "pbs"}


def test_a_slurm_node_list_read_without_slurm():
    assert expand_nodelist("n[1-3,05],gpu01") == ["n1", "n2", "n3", "n05", "gpu01"]
    assert expand_nodelist("node[08-10]") == ["node08", "node09", "node10"]
    # on a login node whose PATH lacks Slurm's tools the job's nodes still come from its node list
    a = allocation.current({"SLURM_JOB_ID": "41", "SLURM_JOB_NODELIST": "c[1-2],c2", "PATH": ""})
    assert a is not None and a.scheduler == "slurm" and a.job_id == "41"
    assert a.hosts == ("c1", "c2") and a.launcher == "srun"  # each node once
    assert allocation.inside("slurm", {"SLURM_JOB_ID": "41"})


def test_pbs_nodes_come_from_its_node_file_once_each(tmp_path):
    nodefile = tmp_path / "aggregate" / "node-file"
    nodefile.parent.mkdir()
    nodefile.write_text("pi1\npi1\npi1\npi1\npi2\npi2\npi2\npi2\npi3.cluster\n")  # one line per slot, as PBS writes it
    a = allocation.current({"PBS_JOBID": "1234.head", "PBS_NODEFILE": str(nodefile)})
    assert a is not None and a.scheduler == "pbs" and a.job_id == "1234.head"
    assert a.hosts == ("pi1", "pi2", "pi3.cluster") and a.launcher is None  # mpirun reads the file itself
    assert a.as_dict()["hosts"] == ["pi1", "pi2", "pi3.cluster"]


def test_a_job_whose_nodes_cannot_be_read_is_one_line_with_the_fix(tmp_path):
    with pytest.raises(EnvironmentProblem, match="PBS_NODEFILE is not set") as e:
        allocation.current({"PBS_JOBID": "9"})
    assert "--hosts" in e.value.fix
    empty = tmp_path / "nodes"
    empty.write_text("\n# none\n")
    with pytest.raises(EnvironmentProblem, match="names no node"):
        allocation.current({"PBS_JOBID": "9", "PBS_NODEFILE": str(empty)})
    with pytest.raises(UsageError, match="does not exist"):
        allocation.current({"PBS_JOBID": "9", "PBS_NODEFILE": str(tmp_path / "gone")})
    with pytest.raises(UsageError, match="not a regular file"):
        allocation.current({"PBS_JOBID": "9", "PBS_NODEFILE": "/dev/zero"})


def test_each_scheduler_answers_inside_for_itself_and_names_its_own_launcher():
    """The cheap answers come from the registry (each scheduler's own check), not an if-chain: the
    launcher registry's ``--launcher auto`` asks :func:`allocation.own_launcher`."""
    assert allocation.REGISTRY["slurm"].launcher == "srun" and allocation.REGISTRY["pbs"].launcher is None
    assert allocation.inside("pbs", {"PBS_JOBID": "1.head"}) and not allocation.inside("slurm", {"PBS_JOBID": "1"})
    assert not allocation.inside("lsf", {"LSB_JOBID": "3"})  # no such scheduler registered: never inside
    assert allocation.own_launcher({"SLURM_JOB_ID": "5"}) == "srun"
    assert allocation.own_launcher({"PBS_JOBID": "5"}) is None  # mpirun reads PBS's node file itself
    assert allocation.own_launcher({"PBS_JOBID": "5", "SLURM_JOB_ID": "6"}) == "srun"
    assert allocation.own_launcher({}) is None


def test_cpus_the_slurm_job_holds_per_node_and_ranks_pinned_beyond_them():
    """``salloc -N 2`` holds one cpu per node: ranks pinned to two cpus of one node are named before
    srun starts them (slurmd refuses the binding and srun says only "Job step aborted")."""
    from clusterbench.launch.allocation.slurm import job_cpus
    from clusterbench.launch.mpi.launchers.srun import check_job_cpus
    from clusterbench.launch.mpi.spec import LaunchSpec, RankPlace

    assert job_cpus({"SLURM_JOB_CPUS_PER_NODE": "2(x2),1"}, ["a", "b", "c"]) == {"a": 2, "b": 2, "c": 1}
    assert job_cpus({"SLURM_JOB_CPUS_PER_NODE": "1(x2)"}, ["a", "b", "c"]) is None  # does not fit: unknown
    assert job_cpus({}, ["a"]) is None and job_cpus({"SLURM_JOB_CPUS_PER_NODE": "x"}, ["a"]) is None
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_CPUS_PER_NODE": "1(x2)", "PATH": ""}
    pair = LaunchSpec(2, places=[RankPlace("node1", 0), RankPlace("node1", 1)])
    with pytest.raises(EnvironmentProblem, match="pinned to 2 cpus of node1 .* job 7 holds 1") as e:
        check_job_cpus(pair, env)
    assert "--exclusive" in e.value.fix
    check_job_cpus(LaunchSpec(2, places=[RankPlace("node1", 0), RankPlace("node2", 1)]), env)  # one a node
    check_job_cpus(pair, {**env, "SLURM_JOB_CPUS_PER_NODE": "2(x2)"})
    check_job_cpus(pair, {"PATH": ""})  # outside a job: nothing to hold them to
