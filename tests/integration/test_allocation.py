"""The allocation registry (launch/allocation): is this process inside a batch job, and which nodes
does the job hold. Slurm through its own ``scontrol show hostnames`` (and without it, the node list
read by clusterbench), PBS through its node file, nothing outside a job; every command that needs
"the nodes" when none are given asks it (the virtual cluster's Slurm tests run it for real)."""
from __future__ import annotations

import shutil

import pytest

from clusterbench.launch import allocation


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


