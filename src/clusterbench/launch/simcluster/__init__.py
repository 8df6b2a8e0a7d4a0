"""A virtual cluster on one machine: network namespaces joined by a bridge (``sim-cluster``).

Layout (prefix ``cbsim-``)::

    cbsim-br     a namespace holding only the bridge ``cbbr0`` and one veth end per member
    cbsim-head   198.18.0.2/24 on ``cb0``: mpirun runs here, so the launcher is inside the cluster too
    cbsim-n1..N  198.18.0.(10+k)/24 on ``cb0``: the nodes (host name = namespace name)

Addresses come from the benchmarking range 198.18.0.0/15 (RFC 2544). Every veth pair is created
inside the bridge namespace with its peer moved straight into the member namespace, so no interface
ever appears in the root namespace and no sysctl outside our namespaces is changed. Deleting a
namespace deletes its veth end (and so the peer), which is how ``down`` cleans up, also after a crash:
it scans ``ip netns list`` for the prefix and kills the processes left inside first.

Open MPI starts its daemons on the nodes through ``plm_rsh_agent`` set to a generated agent script,
which Open MPI calls as ``<agent> <host> "<command>"``; the agent runs the command with
``ip netns exec <host>`` and ``CB_SIM_NODE=<host>`` (every fake node has the same real host name,
so ranks label themselves with that variable). MPICH Hydra uses the same script through
``-launcher-exec``. Two pitfalls (anchors-mpi.md section 6): a host name that resolves to a local
address is started without the agent (``up`` refuses such names), and every daemon binds its ranks
from core 0 unless ranks are placed explicitly (use :func:`rankfile_text` or ``--bind-to none``).

Everything here needs root (``ip netns``); without it a clear :class:`EnvironmentProblem` is raised
and nothing is done.
"""
from __future__ import annotations

from clusterbench.launch.simcluster.state import (BRIDGE, CMD_TIMEOUT, DEFAULT_PREFIX, HEAD_ADDRESS, IFACE, MAX_NODES,
                                                  NODE_BASE, SCHEMA, SUBNET, SimCluster, SimNode, TBF_LATENCY,
                                                  default_prefix, list_namespaces, load, parse_delay, parse_rate,
                                                  scratch_dir, state_dir)
from clusterbench.launch.simcluster.running import describe_processes, processes
from clusterbench.launch.simcluster.lifecycle import down, taken_down, up
from clusterbench.launch.simcluster.describe import status
from clusterbench.launch.simcluster.launching import (agent_script, exec_prefix, host_arg, hostfile_text, hosts,
                                                      mpiexec_args, mpirun_args, rankfile_text)

__all__ = ['BRIDGE', 'CMD_TIMEOUT', 'DEFAULT_PREFIX', 'HEAD_ADDRESS', 'IFACE', 'MAX_NODES', 'NODE_BASE', 'SCHEMA',
           'SUBNET', 'SimCluster', 'SimNode', 'TBF_LATENCY', 'agent_script', 'default_prefix', 'describe_processes',
           'down', 'exec_prefix', 'host_arg', 'hostfile_text', 'hosts', 'list_namespaces', 'load', 'mpiexec_args',
           'mpirun_args', 'parse_delay', 'parse_rate', 'processes', 'rankfile_text', 'scratch_dir', 'state_dir', 'status',
           'taken_down', 'up']
