"""The pure tests (they start no process) of what tests/integration/test_simcluster.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import json
import os

import pytest

from clusterbench.errors import UsageError
from clusterbench.launch import simcluster as sc
from clusterbench.launch.simcluster import lifecycle as sc_lifecycle


def test_parsers() -> None:
    assert sc.parse_rate("1gbit") == 10**9
    assert sc.parse_rate("100mbit") == 10**8
    assert sc.parse_rate("125mbps") == 10**9  # tc: bps = bytes per second
    assert sc.parse_rate(5_000_000) == 5_000_000
    assert sc.parse_rate(None) is None
    assert sc.parse_delay("1ms") == "1ms" and sc.parse_delay(2) == "2ms" and sc.parse_delay("250us") == "250us"
    with pytest.raises(UsageError):
        sc.parse_rate("1 lightyear")


def test_launch_arguments_and_host_lists() -> None:
    head, nodes = sc_lifecycle.plan_members("cbsim-", 2)
    c = sc.SimCluster(prefix="cbsim-", nodes=nodes, head=head, bridge_namespace="cbsim-br",
                      agent="/run/clusterbench/simcluster-agent.sh")
    args = sc.mpirun_args(c)
    assert "--allow-run-as-root" not in args
    assert args[args.index("plm_rsh_agent") + 1] == c.agent
    assert args[args.index("plm_rsh_no_tree_spawn") + 1] == "1"
    assert args[args.index("oob_tcp_if_include") + 1] == "198.18.0.0/24"
    assert args[args.index("btl_tcp_if_include") + 1] == "198.18.0.0/24"
    assert "--allow-run-as-root" in sc.mpirun_args(c, allow_root=True)
    m = sc.mpiexec_args(c)
    assert m[m.index("-launcher-exec") + 1] == c.agent and "-launcher" in m
    assert sc.host_arg(c, slots=2) == "cbsim-n1:2,cbsim-n2:2"
    assert sc.hostfile_text(c) == "cbsim-n1 slots=1\ncbsim-n2 slots=1\n"
    assert [h["address"] for h in sc.hosts(c)] == ["198.18.0.11", "198.18.0.12"]
    agent = sc.agent_script("cbsim-", "/run/cb/simcluster-tmp")
    assert "TMPBASE='/run/cb/simcluster-tmp'" in agent and "OMPI_MCA_orte_tmpdir_base" in agent
    with pytest.raises(UsageError):
        sc.agent_script("cbsim-", "/tmp/it's")
    assert sc.rankfile_text([("cbsim-n1", 0), ("cbsim-n2", 1)]) == \
        "rank 0=cbsim-n1 slot=0\nrank 1=cbsim-n2 slot=1\n"
    assert sc.exec_prefix("n2", c) == ["ip", "netns", "exec", "cbsim-n2"]
    assert sc.exec_prefix("head", c) == ["ip", "netns", "exec", "cbsim-head"]
    assert sc.SimCluster.from_json(json.loads(json.dumps(c.to_json()))) == c


def test_a_process_gone_between_listing_and_reading_is_no_error():
    """The speed script's install on 32 machines died with "internal error: FileNotFoundError
    /proc/PID/comm": an ssh client in the head's namespace ended between ``ip netns pids`` and the
    read of its name. A gone process has no name, and no error."""
    from clusterbench.launch import machines

    gone = 1 << 22  # above pid_max's largest value: never a live process
    assert machines.process_comm(gone) == "" and machines.process_comm(os.getpid()) != ""
