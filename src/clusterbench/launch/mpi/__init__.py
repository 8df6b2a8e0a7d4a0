"""Launch MPI kernels: find the MPI, read hosts, place ranks, prove the transport, bound the run.

One module per concern: :mod:`.detect` (which MPI), :mod:`.hosts`, :mod:`.spec` (what a launch asks
for), :mod:`.launchers` (the registry; its modules :mod:`.launchers.openmpi`, :mod:`.launchers.mpich`,
:mod:`.launchers.srun` are found there and register themselves), :mod:`.transport` (transports and
their proof), :mod:`.placement` (verification), :mod:`.run` (a bounded run, through
:mod:`clusterbench.process`) and :mod:`.pernode` (one tagged process per node, through the
same launchers: ``sweep node``'s agents). Everything is re-exported
here: ``from clusterbench.launch import mpi`` is the public interface.

What this module guarantees (issue 3, "Launching"):

* :func:`detect_mpi` finds Open MPI (``mpirun``/``ompi_info``) or MPICH (``mpiexec``, Hydra) and its
  own ``mpicc``: the default on PATH, or the one asked for (``--mpi openmpi|mpich|PATH``; Debian
  keeps both as ``mpirun.openmpi``/``mpiexec.mpich``); a missing launcher, wrapper or ``mpi.h`` is an
  :class:`EnvironmentProblem` naming the Debian packages.
* MPICH (:func:`_mpich_command`): a Hydra hostfile in rank order, each rank pinned to its cpu by a
  wrapper keyed on ``PMI_RANK``, the virtual cluster's agent as ``-launcher-exec``; on ch4:ucx the
  transport maps to ``MPIR_CVAR_NOLOCAL``/``UCX_TLS`` and is proven from UCX's endpoint lines
  (``UCX_LOG_LEVEL=info``); other devices run ``auto`` only, recorded "unproven".
* :func:`parse_hosts` (``node1:4,node2:4``) and :func:`parse_hostfile` (Open MPI syntax:
  ``name slots=N [max_slots=M]``, comments, blank lines) give :class:`Host` lists; a malformed entry
  is a :class:`UsageError` naming it, and :func:`check_slots` refuses more ranks than slots unless
  oversubscribing.
* :func:`build_command` makes the ``mpirun`` line: a hostfile written from the parsed hosts, an
  explicit rankfile (``rank i=host slot=CPU``, physical cpu numbers) from the per-rank placement,
  the transport's MCA settings (:data:`TRANSPORTS`), the verbose switches that prove the transport,
  ``--allow-run-as-root`` only when the caller asks (as root without it: :class:`UsageError`), and
  extra arguments (the virtual cluster's ``plm_rsh_agent``).
* :func:`run_mpi` runs it in a session of its own, streams the JSON lines rank 0 prints (parsed and
  checked with the same rules as local kernels), holds them back until the transport is proven from
  the MPI library's own verbose output (:func:`parse_transport_proof`), refuses a contradiction
  (:func:`check_transport`), bounds the launch and the run in time, and kills the whole process
  group (mpirun, its daemons and the ranks) on timeout, failure or Ctrl-C.
* :func:`verify_placement` refuses a run whose ranks did not land where they were asked to.
"""
from __future__ import annotations

from clusterbench.launch.mpi.detect import (  # noqa: F401
    INSTALL_FIX, MPI_KINDS, MpiInstall, _ompi_components, run_text, detect_mpi)
from clusterbench.launch.mpi.hosts import Host, check_slots, host_names, parse_hostfile, parse_hosts  # noqa: F401
from clusterbench.launch.mpi.launchers import (  # noqa: F401
    REGISTRY, Launcher, OutputTag, build_command, launcher_choices, launcher_for, needs_mpi, register_launcher,
    resolve_launcher)
from clusterbench.launch.mpi.launchers.mpich import (  # noqa: F401
    MPICH_PROOF_ENV, MPICH_UCX_TRANSPORT_ENV, mpich_transport_env)
from clusterbench.launch.mpi.launchers.openmpi import mpirun_command  # noqa: F401
from clusterbench.launch.mpi.placement import node_key, verify_placement  # noqa: F401
from clusterbench.launch.mpi.run import (  # noqa: F401
    FINALIZE_GRACE, LAUNCH_TIMEOUT, SIM_LAUNCH_ATTEMPTS, SIM_LAUNCH_TIMEOUT, START_CRASH_ATTEMPTS, LaunchCrashed,
    LaunchHung, MpiRun, explain_failure, run_mpi)
from clusterbench.launch.mpi.pernode import Demux, PerNode, build_per_node, per_node_spec  # noqa: F401
from clusterbench.launch.mpi.spec import LaunchSpec, RankPlace, check_cidr  # noqa: F401
from clusterbench.launch.mpi.launchers.srun import srun_mpi_plugins, srun_pmi  # noqa: F401
from clusterbench.launch.mpi.transport import (  # noqa: F401
    OMPI_TRANSPORT_MCA, PROOF_ARGS, TRANSPORTS, TransportProof, check_transport, parse_transport_proof,
    ucx_kind, used_transport)

Record = dict
