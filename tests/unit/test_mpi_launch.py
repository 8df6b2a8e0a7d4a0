"""The pure tests (they start no process) of what tests/integration/test_mpi_launch.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterbench.errors import EnvironmentProblem, KernelFailed, UsageError
from clusterbench.launch import mpi as M


def test_missing_mpirun_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem) as exc:
        M.detect_mpi(path=str(tmp_path))
    msg = str(exc.value)
    assert "\n" not in msg and "mpirun" in msg and "openmpi-bin" in msg


# -- hosts -----------------------------------------------------------------------------------------
def test_parse_hosts() -> None:
    assert M.parse_hosts("node1:4,node2:4") == [M.Host("node1", 4), M.Host("node2", 4)]
    assert M.parse_hosts("a,b:2,a") == [M.Host("a", 2), M.Host("b", 2)]
    for bad in ("node1:x", "node1:0", "a,,b", "", "no de:2"):
        with pytest.raises(UsageError):
            M.parse_hosts(bad)


def test_one_hosts_parser_for_every_command(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    """Issue 23: ``--hosts n:x`` was exit 3 (doctor tried to reach a host named "n:x") and ``n:0`` was
    accepted (sweep node, doctor, cluster check split the names themselves). One parser, exit 2, before
    any host is contacted (the unit tier refuses processes: nothing is started)."""
    from clusterbench import cli, doctor
    from clusterbench.sweep import node as sweep_node

    assert M.host_names("a:2,b,a") == ["a", "b", "a"]
    for bad, why in (("n:x", "slot count 'x'"), ("n:0", "slot count '0'"), ("a,,b", "empty entry"), ("", "empty")):
        with pytest.raises(UsageError, match=why):
            M.host_names(bad)
        with pytest.raises(UsageError, match=why):
            doctor.hosts_from(bad, None)
    with pytest.raises(UsageError, match="slot count '0'"):
        sweep_node.resolve_hosts(["a", "b:0", "c"])
    db = str(tmp_path / "r.db")
    for argv in (["doctor", "--hosts", "n:x"], ["doctor", "--hosts", "a,n:0"], ["cluster", "check", "--hosts", "a,n:x"],
                 ["sweep", "node", "--hosts", "a,b,n:0"], ["sweep", "network", "--hosts", "a,n:x"]):
        assert cli.main(["--db", db, *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is not a positive integer" in err, (argv, err)


def test_tcp_include_is_checked_the_same_for_every_host_kind() -> None:
    """Issue 23: ``--tcp-include 'eth0;id'`` was refused on this machine but passed on for remote and
    virtual-cluster hosts, where it reaches each node's daemon through a shell (the launch agent's
    ``sh -c``). Each part must be a CIDR or an interface name, whatever the hosts."""
    from clusterbench.benchmarks.mpi.common import check_tcp_include

    for hosts in ({}, {"hosts": "cbsim-n1,cbsim-n2"}, {"hosts": "node1:2,node2:2"}, {"hostfile": "/nonexistent"}):
        for bad in ("eth0;id", "eth0 x", "$(id)", "eth0,", "a" * 16, "10.0.0.0/99"):
            with pytest.raises(UsageError, match="is not a network \\(CIDR\\) or interface name"):
                check_tcp_include({"tcp_include": bad, **hosts})
        if hosts:  # the interface is on the nodes: not checked here
            check_tcp_include({"tcp_include": "eth1,198.18.0.0/24", **hosts})
    spec = M.LaunchSpec(nranks=2, tcp_include="cb0;id")
    with pytest.raises(UsageError):
        M.build_command(M.MpiInstall("openmpi", "4.1", "/usr/bin/mpirun", "/usr/bin/mpicc"), spec, ["true"], "/tmp")


def test_parse_hostfile(tmp_path: Path) -> None:
    f = tmp_path / "hosts"
    f.write_text("# cluster\n\nnode1 slots=4 max_slots=8\nnode2 slots=2   # the small one\nnode3\n")
    assert M.parse_hostfile(f) == [M.Host("node1", 4, 8), M.Host("node2", 2), M.Host("node3", 1)]


@pytest.mark.parametrize("line", ["node1 slots=four", "node1 slots=0", "node1 cores=4", "slots=4",
                                  "node1 slots=4 max_slots=2", "node1 slots"])
def test_malformed_hostfile_names_the_line(tmp_path: Path, line: str) -> None:
    f = tmp_path / "hosts"
    f.write_text(f"good slots=1\n{line}\n")
    with pytest.raises(UsageError) as exc:
        M.parse_hostfile(f)
    assert "line 2" in str(exc.value)


def test_missing_or_empty_hostfile(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        M.parse_hostfile(tmp_path / "nope")
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(UsageError):
        M.parse_hostfile(tmp_path / "empty")


def test_more_ranks_than_slots() -> None:
    hosts = [M.Host("a", 2), M.Host("b", 2)]
    M.check_slots(hosts, 4)
    with pytest.raises(UsageError, match="5 ranks need more than the 4 slots"):
        M.check_slots(hosts, 5)
    M.check_slots(hosts, 5, oversubscribe=True)
    with pytest.raises(UsageError, match="max_slots"):
        M.check_slots([M.Host("a", 2, 3)], 4, oversubscribe=True)


# -- proof -----------------------------------------------------------------------------------------
VADER = """[vm:03700] select: component ob1 selected
[vm:03701] mca: bml: Using vader btl for send to [[25235,1],0] on node vm
[vm:03701] mca: bml: Using self btl for send to [[25235,1],1] on node vm
[vm:03700] mca: bml: Using vader btl for send to [[25235,1],1] on node vm
[vm:03700] MCW rank 0 bound to socket 0[core 0[hwt 0]]: [B/.]
"""
TCP = """[vm:1] selected ob1 best priority 20
[n1:1] mca: bml: Using tcp btl for send to [[7,1],1] on node n2
[n2:2] mca: bml: Using tcp btl for send to [[7,1],0] on node n1
"""


def test_transport_proof_parsing_and_contradiction() -> None:
    p = M.parse_transport_proof(VADER)
    assert p.pml == "ob1" and p.btl == ["vader"] and p.covers([0, 1]) and M.used_transport(p) == "shm"
    assert p.bindings == {0: "socket 0[core 0[hwt 0]]: [B/.]"}
    M.check_transport("shm", p)
    M.check_transport("auto", p)
    with pytest.raises(KernelFailed, match="asked tcp, MPI used vader"):
        M.check_transport("tcp", p)
    t = M.parse_transport_proof(TCP)
    assert M.used_transport(t) == "tcp" and {s["node"] for s in t.sends} == {"n1", "n2"}
    with pytest.raises(KernelFailed, match="asked shm, MPI used tcp"):
        M.check_transport("shm", t)
    with pytest.raises(KernelFailed, match="asked rdma"):
        M.check_transport("rdma", t)
    u = M.parse_transport_proof("[h:1] select: component ucx selected\n")
    assert M.used_transport(u) == "rdma" and u.covers([0, 1])
    with pytest.raises(KernelFailed, match="asked tcp, MPI used pml ucx"):
        M.check_transport("tcp", u)



#: Open MPI's pml ucx over soft-RoCE (--transport rdma with UCX_LOG_LEVEL=info), two guests cba and cbb
UCX_RXE = """[cba:01234] select: component ucx selected
[1,0]<stderr>:[1764230000.123456] [cba:1240 :0]     ucp_worker.c:1783 UCX  INFO  ep_cfg[0]: tag(self/memory0 rc_verbs/rxe0:1);
[1,0]<stderr>:[1764230000.223456] [cba:1240 :0]     ucp_worker.c:1783 UCX  INFO  ep_cfg[1]: tag(rc_verbs/rxe0:1);
[1,1]<stderr>:[1764230000.323456] [cbb:877  :0]     ucp_worker.c:1783 UCX  INFO  ep_cfg[1]: tag(rc_verbs/rxe0:1);
"""


def test_pml_ucx_proof_names_the_verbs_lane() -> None:
    """--transport rdma on Open MPI: UCX's endpoint lines prove the lane (rc_verbs on rxe0), rank by rank;
    the self endpoint is not evidence; a tcp lane under pml ucx is refused."""
    head = "\n".join(UCX_RXE.splitlines()[:3]) + "\n"
    p = M.parse_transport_proof(head)
    assert p.pml == "ucx" and p.ucx == ["rc_verbs/rxe0:1"] and not p.covers([0, 1])  # one rank so far
    p = M.parse_transport_proof(UCX_RXE)
    assert p.covers([0, 1]) and M.used_transport(p) == "rdma"
    M.check_transport("rdma", p)
    assert any("rc_verbs/rxe0:1" in ln for ln in p.as_dict()["evidence"])
    from clusterbench.benchmarks.mpi.common import transport_note
    mpi = M.MpiInstall(name="openmpi", version="4.1.4", mpirun="mpirun", mpicc="mpicc")
    note = transport_note("pingpong", M.LaunchSpec(nranks=2, transport="rdma"), mpi, p)
    assert note.endswith("used pml ucx UCX rc_verbs/rxe0:1 (recorded as rdma)"), note
    t = M.parse_transport_proof(UCX_RXE.replace("rc_verbs/rxe0:1);\n[1,1]", "tcp/ens4);\n[1,1]"))
    assert M.used_transport(t).startswith("mixed(")
    with pytest.raises(KernelFailed, match="asked rdma, Open MPI's pml ucx used UCX tcp/ens4"):
        M.check_transport("rdma", t)


def test_rdma_on_open_mpi_asks_ucx_for_its_lines(tmp_path: Path) -> None:
    """The launcher sets UCX_TLS and the UCX proof environment, exported to every rank with -x."""
    from clusterbench.launch.mpi.launchers.openmpi import mpirun_command
    class WithUcx(M.MpiInstall):
        has_ucx = True  # what ompi_info says of Debian's Open MPI (built --with-ucx)
    mpi = WithUcx(name="openmpi", version="4.1.4", mpirun="mpirun", mpicc="mpicc")
    env: dict[str, str] = {}
    cmd = mpirun_command(mpi, M.LaunchSpec(nranks=2, transport="rdma", allow_root=True), ["k"], tmp_path, env)
    assert env["UCX_TLS"] == "rc,ud,self" and env["UCX_LOG_LEVEL"] == "info" and env["UCX_LOG_FILE"] == "stderr"
    assert ["-x", "UCX_LOG_LEVEL"] == cmd[cmd.index("UCX_LOG_LEVEL") - 1: cmd.index("UCX_LOG_LEVEL") + 1]
    assert cmd[cmd.index("pml") + 1] == "ucx"


def test_soft_roce_turns_ucx_ud_dgid_check_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rxe (a parent netdev, no device) gets UCX_UD_VERBS_ETH_DGID_CHECK=n with --transport rdma, unless the
    user set it; a hardware HCA (a device link) or no RDMA at all gets nothing."""
    from clusterbench.launch.mpi import transport as T
    from clusterbench.launch.mpi.launchers import openmpi
    sysfs = tmp_path / "infiniband"
    assert T.soft_roce_devices(sysfs) == [] and T.rdma_env(sysfs, {}) == {}
    (sysfs / "mlx5_0").mkdir(parents=True)
    (sysfs / "mlx5_0" / "device").mkdir()
    assert T.soft_roce_devices(sysfs) == [] and T.rdma_env(sysfs, {}) == {}
    (sysfs / "rxe0").mkdir()
    (sysfs / "rxe0" / "parent").write_text("ens5\n")
    assert T.soft_roce_devices(sysfs) == ["rxe0"]
    assert T.rdma_env(sysfs, {}) == {"UCX_UD_VERBS_ETH_DGID_CHECK": "n"}
    assert T.rdma_env(sysfs, {"UCX_UD_VERBS_ETH_DGID_CHECK": "y"}) == {}
    monkeypatch.setattr(openmpi, "rdma_env", lambda: T.rdma_env(sysfs, {}))

    class WithUcx(M.MpiInstall):
        has_ucx = True
    env: dict[str, str] = {}
    cmd = openmpi.mpirun_command(WithUcx(name="openmpi", version="4.1.4", mpirun="mpirun", mpicc="mpicc"),
                                 M.LaunchSpec(nranks=2, transport="rdma", allow_root=True), ["k"], tmp_path, env)
    assert env["UCX_UD_VERBS_ETH_DGID_CHECK"] == "n" and "UCX_UD_VERBS_ETH_DGID_CHECK" in cmd

def test_rdma_through_srun_gets_what_mpirun_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """srun exports the environment to every task: --transport rdma under srun gets the same UCX settings as
    under mpirun (UCX_TLS, soft-RoCE's GRH check off, UCX's endpoint lines for the proof), never over the
    user's own values."""
    from clusterbench.launch.mpi import transport as T
    from clusterbench.launch.mpi.launchers import srun
    sysfs = tmp_path / "infiniband"
    (sysfs / "rxe0").mkdir(parents=True)
    (sysfs / "rxe0" / "parent").write_text("ens5\n")
    monkeypatch.setattr(srun, "rdma_env", lambda: T.rdma_env(sysfs, {}))
    (tmp_path / "srun").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(srun, "srun_pmi", lambda mpi, path: "pmix")

    class WithUcx(M.MpiInstall):
        has_ucx = True
    mpi = WithUcx(name="openmpi", version="4.1.4", mpirun="mpirun", mpicc="mpicc")
    _, env = M.build_command(mpi, M.LaunchSpec(nranks=2, transport="rdma", launcher="srun"), ["k"], tmp_path)
    assert env["UCX_TLS"] == "rc,ud,self" and env["UCX_UD_VERBS_ETH_DGID_CHECK"] == "n"
    assert env["UCX_LOG_LEVEL"] == "info" and env["OMPI_MCA_pml"] == "ucx"
    _, env = M.build_command(mpi, M.LaunchSpec(nranks=2, transport="rdma", launcher="srun",
                                               env={"UCX_UD_VERBS_ETH_DGID_CHECK": "y"}), ["k"], tmp_path)
    assert env["UCX_UD_VERBS_ETH_DGID_CHECK"] == "y"


# -- placement -------------------------------------------------------------------------------------
def _ranks(*rows):
    return [{"rank": i, "host": h, "node": n, "cpus": c, "cpu": int(c.split(",")[0].split("-")[0])}
            for i, (h, n, c) in enumerate(rows)]


def test_verify_placement() -> None:
    want = [M.RankPlace(None, 0), M.RankPlace(None, 1)]
    M.verify_placement(_ranks(("vm", "", "0"), ("vm", "", "1")), want)
    with pytest.raises(KernelFailed, match="both bound to cpu 1"):
        M.verify_placement(_ranks(("vm", "", "1"), ("vm", "", "1")), None)
    M.verify_placement(_ranks(("vm", "", "1"), ("vm", "", "1")), None, allow_shared_cpu=True)
    with pytest.raises(KernelFailed, match="not to cpu 1"):
        M.verify_placement(_ranks(("vm", "", "0"), ("vm", "", "0-1")), want)
    # inter-node: virtual-cluster nodes share the host name, the node tells them apart
    M.verify_placement(_ranks(("vm", "n1", "0"), ("vm", "n2", "0")), None, [(0, 1)])
    with pytest.raises(KernelFailed, match="inter-node ranks 0 and 1 both ran on vm"):
        M.verify_placement(_ranks(("vm", "", "0"), ("vm", "", "1")), None, [(0, 1)])


def test_explain_known_errors() -> None:
    msg, fix = M.explain_failure("------\nThere are not enough slots available in the system to satisfy the 3\n", 1, "k")
    assert "not enough slots" in msg and "oversubscribe" in fix
    msg, fix = M.explain_failure("[vm:1] mca: base: noise\nsomething broke\n", 3, "k")
    assert msg == "k exited with status 3: something broke" and "smaller size" not in fix


OMPI_KILLED = ("--------------------------------------------------------------------------\n"
               "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal {sig} ({name}).\n"
               "--------------------------------------------------------------------------\n")


def test_explain_gives_advice_that_fits_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 23: a rank killed from outside, a crash and an out-of-memory kill all got "rerun with a
    smaller size or report it". The launcher's report names the rank, node and signal; a SIGKILL is the
    out-of-memory killer's only when /proc/vmstat's oom_kill count rose during the run (or memory is
    nearly exhausted), and only then is a smaller size the advice."""
    from clusterbench import process

    fine = {"oom_kills": 7, "available_bytes": 20 << 30, "total_bytes": 24 << 30}
    monkeypatch.setattr(process, "memory_state", lambda: dict(fine))
    msg, fix = M.explain_failure(OMPI_KILLED.format(sig=9, name="Killed"), 137, "pingpong", local=True, before=fine)
    assert msg.startswith("pingpong: rank 1 on vm was killed by SIGKILL from outside"), msg
    assert "no out-of-memory kill" in msg and "smaller size" not in fix and "the size is not the cause" in fix
    msg, fix = M.explain_failure(OMPI_KILLED.format(sig=11, name="Segmentation fault"), 139, "pingpong", local=True)
    assert "rank 1 on vm crashed with SIGSEGV" in msg and "smaller size" not in fix and "report it" in fix
    msg, fix = M.explain_failure(OMPI_KILLED.format(sig=15, name="Terminated"), 143, "pingpong", local=True)
    assert "SIGTERM, a signal from outside" in msg and "smaller size" not in fix
    monkeypatch.setattr(process, "memory_state", lambda: {**fine, "oom_kills": 8})  # the OOM killer struck
    msg, fix = M.explain_failure(OMPI_KILLED.format(sig=9, name="Killed"), 137, "pingpong", local=True, before=fine)
    assert "out-of-memory killer" in msg and "oom_kill 7 -> 8" in msg and "smaller size" in fix
    monkeypatch.setattr(process, "memory_state", lambda: {**fine, "available_bytes": 100 << 20})  # nearly full
    assert "nearly exhausted" in M.explain_failure(OMPI_KILLED.format(sig=9, name="Killed"), 137, "k", local=True,
                                            before=fine)[0]
    # on another machine this one's memory says nothing: both causes named, its kernel log to read
    msg, fix = M.explain_failure(OMPI_KILLED.format(sig=9, name="Killed"), 137, "k", local=False, before=fine)
    assert "out-of-memory killer or a signal from outside" in msg and "dmesg" in fix
    # srun's and MPICH's words for the same
    msg, _ = M.explain_failure("srun: error: node2: task 1: Killed\n", 137, "k", local=True, before=fine)
    assert "rank 1 on node2 was killed by SIGKILL" in msg
    msg, _ = M.explain_failure("=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   KILLED BY SIGNAL: 6 (Aborted)\n",
                        134, "k", local=True)
    assert "crashed with SIGABRT" in msg
    # the launcher itself killed; a local kernel (exit_problem shares the causes)
    monkeypatch.setattr(process, "memory_state", lambda: dict(fine))
    assert "the launcher was killed by SIGTERM" in M.explain_failure("", -15, "mpirun")[0]
    err = process.exit_problem("peak", -9, "", before=fine)
    assert "killed by SIGKILL from outside" in str(err) and "smaller size" not in str(err)
    assert "smaller size" not in str(process.exit_problem("peak", 3, "boom"))


def test_virtual_cluster_launch_retries_wait_longer_each_time() -> None:
    """A hung launch on the virtual cluster costs seconds; a slow one still gets its time."""
    from clusterbench.launch.mpi.run import SIM_LAUNCH_ATTEMPTS, SIM_LAUNCH_TIMEOUT, sim_launch_steps

    assert sim_launch_steps(2) == [7.0, 14.0, SIM_LAUNCH_TIMEOUT]
    assert sim_launch_steps(32) == [22.0, 44.0, 44.0]
    assert len(sim_launch_steps(4)) == SIM_LAUNCH_ATTEMPTS
    assert all(a < b or b >= SIM_LAUNCH_TIMEOUT for a, b in zip(sim_launch_steps(4), sim_launch_steps(4)[1:]))


def test_every_launcher_builds_one_tagged_process_per_node(tmp_path: Path, monkeypatch) -> None:
    """The launch mode sweep node's agents start in: one unbound process per host, its lines tagged
    with its rank in the launcher's own way (read back by Demux), the others kept running when one
    ends; every registered launcher builds it and says how it tags."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("CLUSTERBENCH_SSH_SHARE", "0")  # no shared ssh connection to look up for n1, n2
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    (tmp_path / "srun").write_text("#!/bin/sh\nexit 0\n")  # srun is looked for on PATH
    (tmp_path / "srun").chmod(0o755)
    assert all(launcher.tag is not None for launcher in M.REGISTRY.values())
    ompi = M.MpiInstall("openmpi", "4.1", "/usr/bin/mpirun", "/usr/bin/mpicc")
    mpich = M.MpiInstall("mpich", "4.0", "/usr/bin/mpiexec.mpich", "/usr/bin/mpicc.mpich", device="ch3:nemesis")
    built = {}
    for name, mpi, choice in (("mpirun", ompi, "mpirun"), ("mpiexec", mpich, "mpirun"), ("srun", None, "srun")):
        spec = M.per_node_spec(["n1", "n2"], launcher=choice, env={"A": "1"}, allow_root=True,
                               job_name="clusterbench-sweep")
        assert spec.per_node == 1 and spec.tagged and not spec.prove_transport
        cmd, env = M.build_command(mpi, spec, ["agent"], tmp_path)
        assert cmd[-1] == "agent" and env == {"A": "1"}
        built[name] = cmd
    assert built["mpirun"][-3:-1] == ["--tag-output", "--enable-recovery"] and "A" in built["mpirun"]  # -x A
    assert {"--map-by", "ppr:1:node", "--bind-to", "none", "--tag-output", "--enable-recovery"} <= set(built["mpirun"])
    assert "core" not in built["mpirun"]  # unbound: no binding given and then overridden
    assert built["mpiexec"][-8:-1] == ["-prepend-pattern", "[cbsweep-rank-%r]", "-disable-auto-cleanup",
                                       "-ppn", "1", "-bind-to", "none"]
    assert built["srun"] == [str(tmp_path / "srun"), "--nodes=2", "--ntasks=2", "--ntasks-per-node=1",
                             "--nodelist=n1,n2", "--cpu-bind=none", "--label", "--kill-on-bad-exit=0", "--mpi=none",
                             "--job-name=clusterbench-sweep", "agent"]
    # each launcher's tag reads its own output back, rank by rank
    ompi_tag, hydra_tag, srun_tag = (M.Demux.of(M.REGISTRY[n].tag) for n in ("mpirun", "mpiexec", "srun"))
    assert ompi_tag.feed(b"[1,1]<stdout>:hel[1,0]<stdout>:x\n") == [(0, b"x\n")]  # rank 1's line was cut
    assert ompi_tag.feed(b"[1,1]<stdout>:lo\n") == [(1, b"hello\n")]
    assert hydra_tag.feed(b"[cbsweep-rank-1]hi\n") == [(1, b"hi\n")]
    assert srun_tag.feed(b"  3: hi") == [(3, b"hi")]
    assert M.REGISTRY["srun"].exports_env and not M.REGISTRY["mpirun"].exports_env
    # an MPI program still needs its MPI; the tagged mode does not (srun starts any program)
    with pytest.raises(UsageError, match="needs its MPI"):
        M.build_command(None, M.LaunchSpec(nranks=2, launcher="srun"), ["k"], tmp_path)
