"""The allocation registry (launch/allocation): is this process inside a batch job, and which nodes
does the job hold. Slurm through its own ``scontrol show hostnames`` (and without it, the node list
read by clusterbench), PBS through its node file, nothing outside a job; every command that needs
"the nodes" when none are given asks it (the virtual cluster's Slurm tests run it for real)."""
from __future__ import annotations

import shutil

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


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("scontrol") is None, reason="scontrol not installed: apt-get install slurm-client")
def test_slurm_hosts_through_scontrol_itself(tmp_path):
    """Slurm's own expansion (``scontrol show hostnames`` needs a slurm.conf, not a controller) is used
    when it answers: a two-dimensional list that only Slurm expands proves it."""
    import os

    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\nSlurmctldHost=localhost\nNodeName=x\nPartitionName=p Nodes=x\n")
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "rpi[01-02]-[1-2],odroid[7,9]", "PATH": os.environ["PATH"],
           "SLURM_CONF": str(conf)}
    a = allocation.current(env)
    assert a is not None
    assert list(a.hosts) == ["rpi01-1", "rpi01-2", "rpi02-1", "rpi02-2", "odroid7", "odroid9"]


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
