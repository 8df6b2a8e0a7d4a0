"""Slurm across several nodes: a 3-node virtual cluster with one ``slurmd`` per node namespace and
``slurmctld`` in the head namespace, configured in a temporary directory (extends test_slurm.py's
one-node Slurm). Inside ``salloc -N 3`` run from the head (the login node), ``sweep node`` launches
its agents with srun, one per node; inside ``salloc -N 2`` a pingpong kernel runs through srun with
PMIx, one rank on each of two nodes, over TCP on the cluster's network. Everything started is stopped
and removed: no slurmctld, slurmd, slurmstepd or munged is left, and no process in the namespaces.

What several slurmds on one machine needed (Slurm 22.05, Debian 12):

* ``slurmd -N <node>`` for the NodeName (the nodes all have this machine's host name);
  ``SlurmdSpoolDir``, ``SlurmdPidFile`` and ``SlurmdLogFile`` with ``%n``, and the spool directories
  made beforehand (slurmd: "Domain socket directory ...: No such file or directory");
* ``TmpFS=<dir>/tmp-%n`` (made beforehand): PMIx puts each step's client directory under TmpFS
  (``spmix_appdir_<uid>_<job>.<step>``), which under the default /tmp is one path for every node's
  slurmstepd, and the second node's fails ("File exists", the step aborts);
* slurmd entered into its namespace with ``nsenter --net`` rather than ``ip netns exec``, which mounts a
  fresh /sys without /sys/fs/cgroup: slurmd initialises its cgroup plugin even with
  ``ProctrackType=proctrack/linuxproc`` and ``TaskPlugin=task/affinity`` and stops ("No filesystem
  mounted on /sys/fs/cgroup"). So the tasks see this machine's /sys (its NICs in a probe), in the
  node's network namespace;
* each NodeName with ``NodeAddr`` its 198.18.0.x address (one SlurmdPort serves all: each slurmd
  listens in its own namespace); ``SlurmctldHost=<this host name>(198.18.0.2)``, slurmctld in the head
  namespace, and salloc/srun/sinfo run there too (the root namespace has no route to the cluster);
* one munged for all of them: its socket is a path, which every network namespace sees.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from slurmkit import alive, common_conf, ours, skip_unless_slurm, slurmd_node_line, start_munge, stop, stop_munge

pytestmark = pytest.mark.integration  # every test here starts real processes

NODES = 3
TOOLS = ("munged", "slurmctld", "slurmd", "srun", "salloc", "sinfo", "scontrol", "scancel", "nsenter")


def _net_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _procs_in(namespaces: list[str]) -> list[str]:
    """Processes whose network namespace is one of ``namespaces`` ("pid cmdline")."""
    want = {_net_inode(f"/run/netns/{ns}") for ns in namespaces} - {None}
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino in want:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                out.append(f"{pid} {cmd[:100]}")
        except OSError:
            continue
    return out


def _conf(d: Path, head_addr: str, nodes: list[tuple[str, str]], cpu_line: str) -> str:
    node_lines = "\n".join(f"NodeName={n} NodeAddr={a} {cpu_line} RealMemory=1000 State=UNKNOWN" for n, a in nodes)
    return f"""ClusterName=cbsweep
SlurmctldHost={socket.gethostname()}({head_addr})
SlurmctldPort=6817
SlurmdPort=6818
SlurmdSpoolDir={d}/spool-%n
SlurmdPidFile={d}/slurmd-%n.pid
SlurmdLogFile={d}/slurmd-%n.log
TmpFS={d}/tmp-%n
{common_conf(d)}{node_lines}
PartitionName=cbsweep Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _cpu_line() -> str:
    """``CPUs=... Boards=... CoresPerSocket=...`` as slurmd -C finds this machine (every node is it)."""
    return " ".join(w for w in slurmd_node_line().split()[1:] if not w.startswith("RealMemory="))


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A running Slurm over a 3-node virtual cluster; yields what the clients need."""
    skip_unless_slurm(TOOLS, "slurm-wlm munge util-linux")
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.launch import simcluster

    old_state = os.environ.get("CLUSTERBENCH_SIM_STATE")
    os.environ["CLUSTERBENCH_SIM_STATE"] = str(tmp_path_factory.mktemp("sim"))
    d = Path(tempfile.mkdtemp(prefix="cbslc-"))  # short: unix socket paths live under it
    d.chmod(0o700)
    procs: list[subprocess.Popen] = []
    munge_pid = None
    namespaces: list[str] = []
    env: dict[str, str] = {}
    try:
        simcluster.down()
        try:
            c = simcluster.up(NODES)
        except EnvironmentProblem as exc:
            pytest.skip(f"network namespaces unusable here: {exc}")
        namespaces = [c.head.namespace, *[n.namespace for n in c.nodes]]
        names = [n.name for n in c.nodes]
        (d / "state").mkdir()
        for n in names:
            (d / f"spool-{n}").mkdir()
            (d / f"tmp-{n}").mkdir()
        conf = d / "slurm.conf"
        conf.write_text(_conf(d, c.head.address, [(n.name, n.address) for n in c.nodes], _cpu_line()))
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(conf)
        munge_pid = start_munge(d, env)
        head = ["ip", "netns", "exec", c.head.namespace]
        starts = [[*head, "slurmctld", "-D", "-f", str(conf)]] + [
            ["nsenter", f"--net=/run/netns/{n.namespace}", "slurmd", "-D", "-N", n.name, "-f", str(conf)]
            for n in c.nodes]
        for i, cmd in enumerate(starts):
            log = open(d / f"daemon{i}.out", "wb")
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=env, start_new_session=True))
            log.close()
        deadline = time.monotonic() + 45
        states = ""
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in procs):
                break
            r = subprocess.run([*head, "sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True,
                               timeout=20, env=env)
            states = r.stdout.strip()
            if states and all(ln.split()[-1] == "idle" for ln in states.splitlines()) \
                    and len(states.splitlines()) == NODES:
                break
            time.sleep(0.5)
        if not (states and all(ln.split()[-1] == "idle" for ln in states.splitlines())):
            logs = " | ".join(p.read_text(errors="replace")[-300:] for p in sorted(d.glob("daemon*.out")))
            pytest.fail(f"Slurm did not come up within 45 s (sinfo: {states!r}): {logs}")
        yield {"env": env, "dir": d, "head": head, "names": names, "cluster": c}
    finally:
        if env:
            subprocess.run([*["ip", "netns", "exec", namespaces[0]], "scancel", "--partition=cbsweep"], env=env,
                           capture_output=True, timeout=20)
        for p in reversed(procs):
            stop(p)
        stop_munge(munge_pid)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (ours(d) or _procs_in(namespaces) or alive(munge_pid)):
            time.sleep(0.2)
        left = ours(d) + _procs_in(namespaces)
        alive_munge = alive(munge_pid)
        simcluster.down()
        if old_state is None:
            os.environ.pop("CLUSTERBENCH_SIM_STATE", None)
        else:
            os.environ["CLUSTERBENCH_SIM_STATE"] = old_state
        shutil.rmtree(d, ignore_errors=True)
    assert not left and not alive_munge, f"left behind: {left}, munged alive: {alive_munge}"
    assert not simcluster.list_namespaces()


def _in_allocation(s: dict, nodes: int, argv: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """``salloc -N nodes argv`` from the head namespace (the login node)."""
    env = {**s["env"], **{k: v for k, v in os.environ.items() if k.startswith("CLUSTERBENCH_")}}
    cmd = [*s["head"], "salloc", "-N", str(nodes), "--time=5", "--job-name=cbtest", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def test_sweep_node_inside_salloc_runs_one_agent_per_node_through_srun(slurm_cluster, tmp_path):
    from clusterbench.store import Store

    s = slurm_cluster
    db = tmp_path / "r.db"
    t0 = time.monotonic()
    r = _in_allocation(s, NODES, [sys.executable, "-m", "clusterbench.cli", "--db", str(db), "sweep", "node",
                                  "--benchmark", "peak --seconds 0.2 --samples 2", "--oversubscribe", "--json"])
    wall = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Granted job allocation" in r.stderr
    doc = json.loads(r.stdout)
    assert doc["launcher"] == "srun" and doc["hosts"] == s["names"]  # the allocation's nodes
    assert doc["virtual_cluster"] and doc["failed"] == {}
    gflops = next(f for f in doc["metrics"] if f["metric"] == "gflops")
    assert set(gflops["values"]) == set(s["names"]) and all(v > 0 for v in gflops["values"].values())
    assert all(len(doc["node_cpus"][n]) == 1 for n in s["names"])  # the nodes share this machine: a cpu each
    # (3 nodes on 2 cpus: --oversubscribe, and a busy loop evens the cpus out, issue 23)
    for n in s["names"]:  # each agent was a task of this job's step on its own node
        assert "launch task StepId=" in (s["dir"] / f"slurmd-{n}.log").read_text()
    runs = Store(db).list_runs()
    assert len(runs) == 1
    assert {x.params["node"] for x in Store(db).results(runs[0].id)} == set(s["names"])
    print(f"\nsweep node inside salloc -N {NODES}: {wall:.1f} s; job {doc['timing']['wall_s']:.1f} s, "
          f"orchestration {doc['timing']['orchestration_per_node_s']:.2f} s per node")


PINGPONG = r"""
import json, os, sys
from clusterbench.kernels.build import build_kernel
from clusterbench.launch import mpi as M

hosts = sys.argv[1].split(",")
mpi = M.detect_mpi()
b = build_kernel("pingpong", openmp=False, cc=mpi.mpicc)
spec = M.LaunchSpec(nranks=2, hosts=[M.Host(h, 1) for h in hosts],
                    places=[M.RankPlace(hosts[0], 0), M.RankPlace(hosts[1], 1)], transport="tcp",
                    tcp_include=sys.argv[2], allow_root=True, launcher="srun")
run = M.run_mpi(mpi, spec, [str(b.path), "--sizes=8,65536", "--time_budget=0.05"], timeout=120, launch_timeout=60,
                name="pingpong")
print(json.dumps({"command": run.command, "transport": M.used_transport(run.proof), "btl": run.proof.btl,
                  "job": os.environ.get("SLURM_JOB_ID"),
                  "results": [[x["metric"], x["params"].get("size")] for x in run.records if x.get("type") == "result"]}))
"""


def test_pingpong_through_srun_across_two_slurm_nodes(slurm_cluster, mpi):
    """The launch path `run pingpong --launcher srun` takes (run_mpi with a srun LaunchSpec), across two
    of the Slurm nodes: srun --mpi=pmix starts one rank on each, TCP proven from Open MPI's own lines.
    (`run pingpong --hosts` itself refuses srun for the virtual cluster's nodes, which it reaches
    through the cluster's launch agent instead, and would gather a real host's probe over ssh.)"""
    s = slurm_cluster
    hosts = s["names"][:2]
    r = _in_allocation(s, 2, [sys.executable, "-c", PINGPONG, ",".join(hosts), s["cluster"].subnet], timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert os.path.basename(out["command"][0]) == "srun" and "--mpi=pmix" in out["command"]
    assert out["transport"] == "tcp" and out["btl"] == ["tcp"]
    assert [m for m, _ in out["results"]] == ["latency", "bandwidth", "latency", "bandwidth"]
    for n in hosts:  # one rank on each node: both slurmds launched a task of the step
        assert f"launch task StepId={out['job']}." in (s["dir"] / f"slurmd-{n}.log").read_text()
