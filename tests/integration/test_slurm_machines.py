"""Slurm across a cluster of separate machines (sim-cluster --machines, issue 24): nothing shared
but the network. Three machines, clusterbench installed on each (``cluster install``), then Slurm
set up as on a real cluster: the same ``slurm.conf`` and munge key copied onto every machine, a
``munged`` inside each (its socket in the machine's own ``/run``), a ``slurmd`` inside each
machine's namespaces and ``slurmctld`` in the head, where ``salloc`` runs too (the login node).
Inside ``salloc -N 3`` ``sweep node`` starts its agents with srun, each the machine's own installed
Python; inside ``salloc -N 2`` ``run pingpong --quick`` on the allocation's nodes starts its ranks
with srun (PMIx), each the kernel its node built for itself. Results are stored on the head only.
Everything started is stopped: no slurmctld, slurmd, slurmstepd or munged, nothing in any machine.

What Slurm 22.05 (Debian 12) needed on these machines:

* ``/sys/fs/cgroup`` in the machine: slurmd initialises its cgroup plugin even with
  ``ProctrackType=proctrack/linuxproc`` and ``TaskPlugin=task/affinity``, and stops without a
  cgroup filesystem ("No filesystem mounted on /sys/fs/cgroup"; an empty tmpfs there: "can't stat
  /sys/fs/cgroup/systemd/"; a plain directory there: "Unexpected fs type"). The machines now have
  this host's cgroup filesystems, read-only (launch/machines.py: a node is started with
  ``nsenter --net`` instead of ``ip netns exec``, whose fresh /sys has none, and binds them);
* the daemons' files at one path on every machine, each machine's own copy (a directory under
  ``/run``: the nodes' /run is theirs, the head's is this host's, so the directory is made unique):
  slurm.conf, the munge key, munged's socket (``AuthInfo=socket=``), slurmd's spool, pid and log;
  ``srun`` exports the head's environment, ``SLURM_CONF`` among it, to the tasks;
* no ``NodeAddr``, no ``-N``: every slurmd has its machine's host name, and the names resolve
  through the machines' and the head's own /etc/hosts; ``SlurmctldHost=head``;
* the default ``TmpFS`` (/tmp) is every machine's own: PMIx's per-step directories do not collide.

Every other multi-node command runs inside ``salloc`` too (the MPI suite, tcp, a ``cmd:`` meter,
hpl hybrid, hpl-scaling, tune hpl, hpcg, ptrans, pdes, hpcc; cluster check and doctor with no
--hosts; a fix and its undo on one machine): 2.5 minutes on 2 shared cores (measured 144 s). A job
of ``salloc -N 2`` holds one cpu a node: placement's pinned pair on one node needs ``--exclusive``
(without it the launch is refused before srun, naming the node and the fix).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from machinekit import leftovers, on, set_env
from slurmkit import common_conf, ours, skip_unless_slurm

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # real processes; the emulated tier (Slurm across machines)

NODES = 3
PREFIX = "cbslm-"  # this module's virtual cluster: other tests run theirs at the same time
TOOLS = ("munged", "slurmctld", "slurmd", "srun", "salloc", "sinfo", "scontrol", "scancel", "nsenter", "sshd")


def _in(c, node: str, *cmd: str, data: bytes | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    """``cmd`` inside a machine (or ``head``) as its root, ``data`` on stdin (bytes in, bytes out)."""
    from clusterbench.launch import simcluster

    return subprocess.run([*simcluster.exec_prefix(node, c), *cmd], input=data, capture_output=True,
                          timeout=timeout)


def _conf(d: str, names: list[str], cpu_line: str) -> str:
    node_lines = "\n".join(f"NodeName={n} {cpu_line} RealMemory=1000 State=UNKNOWN" for n in names)
    return f"""ClusterName=cbmachines
SlurmctldHost=head
SlurmctldPort=6817
SlurmdPort=6818
SlurmdSpoolDir={d}/spool
SlurmdPidFile={d}/slurmd.pid
SlurmdLogFile={d}/slurmd.log
{common_conf(Path(d))}{node_lines}
PartitionName=cbmachines Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log, "wb") as fh:
        return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)


def _stop_group(p: subprocess.Popen) -> None:
    """SIGTERM to the process group started (nsenter and the daemon it forked into the machine's PID
    namespace: nsenter passes no signal on), SIGKILL after 15 s."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        deadline = time.monotonic() + wait  # the daemon itself, nsenter's child, may outlive nsenter
        while time.monotonic() < deadline:
            try:
                os.killpg(p.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@pytest.fixture(scope="module")
def slurm_machines(tmp_path_factory: pytest.TempPathFactory):
    """Three installed machines running Slurm; yields what the clients need."""
    skip_unless_slurm(TOOLS, "slurm-wlm munge util-linux openssh-server")
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.launch import simcluster

    restore_env = set_env(CLUSTERBENCH_SIM_STATE=str(tmp_path_factory.mktemp("sim")), CLUSTERBENCH_SIM_PREFIX=PREFIX)
    logs = tmp_path_factory.mktemp("slurm-logs")
    # one path for the daemons' files on every machine; the head's is this host's /run: unique
    d = tempfile.mkdtemp(prefix=PREFIX, dir="/run")
    os.chmod(d, 0o700)
    procs: list[subprocess.Popen] = []
    c = None
    names: list[str] = []
    env: dict[str, str] = {}
    started_munge: list[str] = []
    left: dict = {}
    slurm_left: list[str] = []
    try:
        simcluster.down()
        try:
            c = simcluster.up(NODES, machines=True)
        except EnvironmentProblem as exc:
            pytest.skip(f"machines unusable here: {exc}")
        names = [m.name for m in c.nodes]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["CLUSTERBENCH_ALLOW_RUN_AS_ROOT"] = "1"
        env["SLURM_CONF"] = f"{d}/slurm.conf"
        p = subprocess.run([sys.executable, "-m", "clusterbench", "--db", str(logs / "install.db"), "cluster",
                            "install", "--hosts", ",".join(names), "--no-kernels"], capture_output=True, text=True,
                           timeout=180, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        cpu = next(ln for ln in _in(c, names[0], "slurmd", "-C").stdout.decode().splitlines()
                   if ln.startswith("NodeName="))
        cpu_line = " ".join(w for w in cpu.split()[1:] if not w.startswith("RealMemory="))
        conf = _conf(d, names, cpu_line).encode()
        key = os.urandom(1024)
        # the head (this host's filesystem) and every machine: its own copy of the files, its own munged
        for member in ["head", *names]:
            r = _in(c, member, "sh", "-c", f"mkdir -p {d}/spool {d}/state && chmod 700 {d} && cat > {d}/slurm.conf",
                    data=conf)
            assert r.returncode == 0, r.stderr
            r = _in(c, member, "sh", "-c", f"umask 077 && cat > {d}/munge.key && chmod 400 {d}/munge.key", data=key)
            assert r.returncode == 0, r.stderr
            r = _in(c, member, "munged", f"--key-file={d}/munge.key", f"--socket={d}/munge.sock",
                    f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed",
                    "--force")
            assert r.returncode == 0, (member, r.stderr)
            started_munge.append(member)
        procs.append(_start([*simcluster.exec_prefix("head", c), "slurmctld", "-D", "-f", f"{d}/slurm.conf"],
                            logs / "slurmctld.out", env))
        for n in names:
            procs.append(_start([*simcluster.exec_prefix(n, c), "slurmd", "-D", "-f", f"{d}/slurm.conf"],
                                logs / f"slurmd-{n}.out", env))
        head = simcluster.exec_prefix("head", c)
        deadline = time.monotonic() + 45
        states = ""
        up = False
        while time.monotonic() < deadline and not any(p.poll() is not None for p in procs):
            r = subprocess.run([*head, "sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True,
                               timeout=20, env=env)
            states = r.stdout.strip()
            up = len(states.splitlines()) == NODES and all(ln.split()[-1] == "idle" for ln in states.splitlines())
            if up:
                break
            time.sleep(0.5)
        if not up:
            out = " | ".join(f"{f.name}: {f.read_text(errors='replace')[-400:]}" for f in sorted(logs.glob("*.out")))
            pytest.fail(f"Slurm did not come up within 45 s (sinfo: {states!r}): {out}")
        yield {"cluster": c, "env": env, "dir": d, "names": names, "head": head}
    finally:
        if c is not None:
            if env:
                subprocess.run([*simcluster.exec_prefix("head", c), "scancel", "--partition=cbmachines"],
                               env=env, capture_output=True, timeout=20)
            for p in reversed(procs):
                _stop_group(p)
            for member in started_munge:  # munged's pid as its machine numbers it
                _in(c, member, "sh", "-c", f"kill $(cat {d}/munged.pid)")
            deadline = time.monotonic() + 20
            # the daemons name their files' directory; a step daemon or task would be in a machine
            while time.monotonic() < deadline and (ours(d) or leftovers(c)):
                time.sleep(0.2)
            slurm_left = ours(d)
            left = leftovers(c)
            for n in names:
                _in(c, n, "rm", "-rf", d)
        subprocess.run([sys.executable, "-m", "clusterbench", "sim-cluster", "down", "--force"], capture_output=True,
                       timeout=60, env={**os.environ})
        shutil.rmtree(d, ignore_errors=True)
        down_left = simcluster.list_namespaces(PREFIX)
        restore_env()
    assert not slurm_left and not left, f"left behind: {slurm_left}, in the machines: {left}"
    assert not down_left, down_left


def _salloc(s: dict, nodes: int, argv: list[str], timeout: float = 120, opts: tuple[str, ...] = ()
            ) -> subprocess.CompletedProcess:
    """``salloc -N nodes [opts] argv`` from the head (the login node)."""
    cmd = [*s["head"], "salloc", "-N", str(nodes), *opts, "--time=5", "--job-name=cbtest", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=s["env"])


def _job(stderr: str) -> str:
    m = re.search(r"Granted job allocation (\d+)", stderr)
    assert m, stderr[-2000:]
    return m[1]


def _job_leftovers(c) -> dict[str, list[str]]:
    """What a job left on the machines: leftovers() but the machine's own munged and slurmd (each line
    ``pid name command``)."""
    return {n: [x for x in v if x.split()[1:2] not in (["munged"], ["slurmd"])] for n, v in leftovers(c).items()}


def _slurmd_log(s: dict, node: str) -> str:
    return on(s["cluster"], node, "cat", f"{s['dir']}/slurmd.log").stdout


def _results(db: Path) -> int:
    return sqlite3.connect(db).execute("SELECT count(*) FROM results").fetchone()[0] if db.exists() else 0


def _runs(db: Path) -> int:
    return sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] if db.exists() else 0


def test_sweep_node_inside_salloc_runs_each_machines_own_agent_through_srun(slurm_machines, tmp_path):
    s = slurm_machines
    c = s["cluster"]
    db = tmp_path / "r.db"
    r = _salloc(s, NODES, [sys.executable, "-m", "clusterbench", "--db", str(db), "sweep", "node", "--benchmark",
                           "intcpu --quick", "--oversubscribe", "--json"])
    assert r.returncode == 0, r.stderr[-3000:]
    job = _job(r.stderr)
    doc = json.loads(r.stdout)
    assert doc["launcher"] == "srun" and doc["hosts"] == s["names"], doc  # the allocation's nodes
    assert doc["failed"] == {}
    # each agent the machine's own installed python (the head's is not on the machines)
    assert sys.executable not in doc["command"] and "cb-python" in doc["command"], doc["command"]
    assert doc["metrics"] and all(set(f["values"]) == set(s["names"]) for f in doc["metrics"]), doc["metrics"]
    for n in s["names"]:  # each agent a task of this job's step on its own machine ...
        assert f"launch task StepId={job}." in _slurmd_log(s, n), n
    assert _runs(db) == 1
    for n in s["names"]:  # results on the head only
        assert on(c, n, "sh", "-c", "ls ~/.local/share/clusterbench/*.db 2>/dev/null || true").stdout == ""


def test_pingpong_inside_salloc_runs_each_machines_own_kernel_through_srun(slurm_machines, tmp_path):
    s = slurm_machines
    c = s["cluster"]
    db = tmp_path / "r.db"
    script = ('exec "$0" -m clusterbench --db "$1" run pingpong --quick --json '
              '--hosts "$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)"')
    r = _salloc(s, 2, ["sh", "-c", script, sys.executable, str(db)])
    assert r.returncode == 0, r.stderr[-3000:]
    job = _job(r.stderr)
    res = json.loads(r.stdout)
    lat = [x for x in res["results"] if x["metric"] == "latency"]
    assert lat and all(x["value"] > 0 for x in lat)
    hosts = [p["host"] for p in lat[0]["params"]["placement"]]
    assert hosts == s["names"][:2], hosts
    assert all(x["params"].get("transport_used") == "tcp" for x in lat)
    # the ranks started by srun itself (not by mpirun, whose daemons srun would start in an allocation)
    assert lat[0]["params"]["mpi"]["launcher"] == "srun", lat[0]["params"]["mpi"]
    for n in hosts:  # one rank on each machine, started by its slurmd ...
        assert f"launch task StepId={job}." in _slurmd_log(s, n), n
        # ... from the kernel that machine built for itself (the launch path leads to it; the head's
        # build is not on the machine)
        own = on(c, n, "sh", "-c", f"ls ~/.cache/clusterbench/launch/{n}/").stdout.split()
        assert any(f.startswith("pingpong-") for f in own), (n, own)
    assert _runs(db) == 1
    for n in s["names"]:  # results on the head only
        assert on(c, n, "sh", "-c", "ls ~/.local/share/clusterbench/*.db 2>/dev/null || true").stdout == ""


def test_hpl_and_sweep_network_inside_salloc_through_srun(slurm_machines, tmp_path):
    """The job's nodes, with no --hosts for the sweep (the allocation registry gives them) and srun
    starting the ranks of both: HPL across the three machines (each its own build) and the all-pairs
    network sweep; results on the head only, nothing left on any machine."""
    s = slurm_machines
    c = s["cluster"]
    db = tmp_path / "r.db"
    script = ('H="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)"; '
              '"$0" -m clusterbench --db "$1" run hpl --n 800 --hosts "$H" --oversubscribe --json > "$2/hpl.json" '
              '&& exec "$0" -m clusterbench --db "$1" sweep network --oversubscribe --pair-budget 0.2 --json '
              '> "$2/net.json"')
    r = _salloc(s, NODES, ["sh", "-c", script, sys.executable, str(db), str(tmp_path)], timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    job = _job(r.stderr)
    hpl = json.loads((tmp_path / "hpl.json").read_text())
    rmax = next(x for x in hpl["results"] if x["metric"] == "rmax")
    assert rmax["value"] > 0 and rmax["params"]["mpi"]["launcher"] == "srun", rmax["params"].get("mpi")
    assert {p["host"] for p in rmax["params"]["placement"]} == set(s["names"]), rmax["params"]["placement"]
    assert any(x["metric"] == "residual" for x in hpl["results"])
    net = json.loads((tmp_path / "net.json").read_text())
    assert net["hosts"] == s["names"] and len(net["pairs"]) == NODES * (NODES - 1) // 2, net["hosts"]
    assert all(p.get("latency_us") and p.get("bandwidth_MBps") for p in net["pairs"]), net["pairs"][:1]
    for n in s["names"]:  # every machine ran tasks of this job's steps, from its own builds
        assert f"launch task StepId={job}." in _slurmd_log(s, n), n
        own = on(c, n, "sh", "-c", f"ls ~/.cache/clusterbench/launch/{n}/").stdout.split()
        assert any(f.startswith("hpl-") for f in own) and any(f.startswith("allpairs-") for f in own), (n, own)
    assert _runs(db) == 2
    left = _job_leftovers(c)
    assert not any(left.values()), left  # the module's daemons stay for its other tests; nothing else


# -- every other multi-node command inside an allocation (issue 24, section 2) ---------------------
#: each machine's meter reads a file only that machine has: a figure proves the meter ran there
WATTS = {"node1": 7.5, "node2": 9.25, "node3": 11.0}


def _salloc_each(s: dict, nodes: int, cmds: dict[str, list[str]], db: Path, out: Path,
                 timeout: float, opts: tuple[str, ...] = ()) -> tuple[str, dict[str, dict]]:
    """``clusterbench --db db ARGS --json`` for each of ``cmds`` (name -> ARGS) in one ``salloc -N
    nodes``, in order, each going on after one failed; ``$H`` in ARGS is the job's nodes (a,b,c).
    Returns the job id and each command's JSON document; fails naming every command that failed."""
    import shlex

    lines = ['H="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)"']
    for name, argv in cmds.items():
        args = " ".join('"$H"' if a == "$H" else shlex.quote(a) for a in argv)
        lines.append(f'T=$(date +%s.%N); "$0" -m clusterbench --db "$1" {args} --json > "$2/{name}.json" '
                     f'2> "$2/{name}.err" || echo {name} >> "$2/failed"; '
                     f'echo "{name} $T $(date +%s.%N)" >> "$2/times"')
    out.mkdir(exist_ok=True)
    r = _salloc(s, nodes, ["sh", "-c", "\n".join(lines), sys.executable, str(db), str(out)], timeout=timeout,
                opts=opts)
    times = (out / "times").read_text() if (out / "times").exists() else ""
    print("\n".join(f"{float(b) - float(a):6.1f} s  {n}" for n, a, b in (ln.split() for ln in times.splitlines())))
    failed = (out / "failed").read_text().split() if (out / "failed").exists() else []
    assert r.returncode == 0 and not failed, (r.stderr[-1500:], {n: (out / f"{n}.err").read_text()[-2500:]
                                                                   for n in failed})
    return _job(r.stderr), {n: json.loads((out / f"{n}.json").read_text()) for n in cmds}


def _through_srun(s: dict, job: str, docs: dict[str, dict], hosts: list[str]) -> None:
    """Every rank-launching figure's ranks started by srun (not mpirun) on the job's nodes, whose
    slurmd each ran tasks of this job's steps."""
    for name, doc in docs.items():
        mpi = [r["params"]["mpi"] for r in doc.get("results", []) if isinstance(r["params"].get("mpi"), dict)]
        assert mpi and all(m.get("launcher") == "srun" for m in mpi), (name, mpi[:1])
    for n in hosts:
        assert f"launch task StepId={job}." in _slurmd_log(s, n), n


def _head_only_and_clean(s: dict) -> None:
    """No results store on any machine and nothing left but the module's daemons."""
    c = s["cluster"]
    for n in s["names"]:
        assert on(c, n, "sh", "-c", "ls ~/.local/share/clusterbench/*.db 2>/dev/null || true").stdout == "", n
    deadline = time.monotonic() + 10  # a step's tasks are reaped by their slurmstepd after srun returns
    while True:
        left = _job_leftovers(c)
        if not any(left.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert not any(left.values()), left


def _placed(res: dict) -> list[str]:
    prm = res["params"]
    ranks = prm.get("rank_placement") if isinstance(prm.get("placement"), str) else prm.get("placement")
    return [r["host"] for r in ranks or []]


def test_mpi_suite_tcp_and_cmd_power_inside_salloc(slurm_machines, tmp_path):
    """pingpong with a ``cmd:`` meter run on each machine, bw, multipair, placement, tcp and the
    interconnect suite (run mpi: ring here) inside ``salloc -N 2 --exclusive``: ranks started by
    srun. placement pins a pair of ranks to two cpus of one node: in ``salloc -N 2`` (one cpu a
    node) that is named before the launch, nothing stored."""
    s = slurm_machines
    c = s["cluster"]
    db = tmp_path / "r.db"
    two = s["names"][:2]
    script = 'exec "$0" -m clusterbench --db "$1" run placement --hosts "$(scontrol show hostnames | paste -sd, -)" --quick'
    refused = tmp_path / "refused.db"
    r = _salloc(s, 2, ["sh", "-c", script, sys.executable, str(refused)])
    assert r.returncode != 0 and f"cpus of {two[0]} (0,1) but Slurm job" in r.stderr, r.stderr[-2000:]
    assert "salloc --exclusive" in r.stderr and _results(refused) == 0
    for n in two:
        assert on(c, n, "sh", "-c", f"echo {WATTS[n]} > /etc/cb-watts").returncode == 0
    job, d = _salloc_each(s, 2, {
        "pingpong": ["run", "pingpong", "--hosts", "$H", "--quick", "--max-size", "4096", "--oversubscribe",
                     "--power", "cmd:cat /etc/cb-watts", "--power-interval", "0.5"],
        "bw": ["run", "bw", "--hosts", "$H", "--quick", "--max-size", "65536", "--oversubscribe"],
        "multipair": ["run", "multipair", "--hosts", f"{two[0]}:2,{two[1]}:2", "--quick", "--pairs", "1,2",
                      "--max-size", "65536", "--oversubscribe"],
        "placement": ["run", "placement", "--hosts", "$H", "--quick", "--oversubscribe"],
        "tcp": ["run", "tcp", "--hosts", "$H", "--streams", "1", "--seconds", "0.5", "--repeats", "1",
                "--latency-iterations", "500"],
        "ring": ["run", "mpi", "--hosts", "$H", "--quick", "--skip", "pingpong,bw,multipair,placement,tcp,coll",
                 "--oversubscribe"],
    }, db, tmp_path / "suite", timeout=300, opts=("--exclusive",))
    lat = [r for r in d["pingpong"]["results"] if r["metric"] == "latency"]
    assert lat and all(_placed(r) == two for r in lat)
    energy = d["pingpong"]["run"]["energy"]
    assert energy["basis"] == "measured" and set(energy["sources"]) == set(two), energy
    per_node = energy["benchmarks"][0]["per_node"]
    for n in two:  # each machine's own reading: its meter ran there
        assert per_node[n]["avg_watts"] == pytest.approx(WATTS[n]) and per_node[n]["samples"] >= 2, per_node
    assert {r["metric"] for r in d["bw"]["results"]} == {"bw", "bibw"}
    assert all(_placed(r) == two for r in d["bw"]["results"])
    pair2 = next(r for r in d["multipair"]["results"] if r["params"].get("pairs") == 2)
    assert _placed(pair2) == [two[0], two[0], two[1], two[1]], _placed(pair2)
    node_pair = [r for r in d["placement"]["results"] if r["params"].get("class") == "node"]
    assert node_pair and all(_placed(r) == two for r in node_pair)
    by = {r["metric"]: r for r in d["tcp"]["results"]}
    assert set(by) == {"throughput", "rtt", "latency"} and by["throughput"]["value"] > 0
    assert (by["throughput"]["params"]["server"], by["throughput"]["params"]["client"]) == tuple(two)
    assert {r["benchmark"] for r in d["ring"]["results"]} == {"ring"}
    assert all(_placed(r) == two for r in d["ring"]["results"])
    _through_srun(s, job, {k: v for k, v in d.items() if k != "tcp"}, two)
    assert _runs(db) == len(d)
    _head_only_and_clean(s)


def test_hpl_family_inside_salloc(slurm_machines, tmp_path):
    """hpl hybrid (threads per rank), hpl-scaling and tune hpl (its smallest budget) inside
    ``salloc -N 2``, every rank started by srun."""
    s = slurm_machines
    db = tmp_path / "r.db"
    two = s["names"][:2]
    job, d = _salloc_each(s, 2, {
        "hybrid": ["run", "hpl", "--hosts", f"{two[0]}:2,{two[1]}:2", "--n", "800", "--topology", "hybrid",
                   "--oversubscribe"],
        "scaling": ["run", "hpl-scaling", "--hosts", "$H", "--nodes", "1,2", "--n-per-node", "600", "--quick",
                    "--oversubscribe"],
        "tune": ["tune", "hpl", "--hosts", "$H", "--budget", "15s", "--n", "600", "--nb-list", "64,128", "--top",
                 "1", "--topologies", "pure", "--blas-list", "openblas", "--oversubscribe"],
    }, db, tmp_path, timeout=300)
    rmax = next(r for r in d["hybrid"]["results"] if r["metric"] == "rmax")
    prm = rmax["params"]
    assert prm["topology"] == "hybrid" and prm["ranks"] == 2 and prm["threads_per_rank"] == 2, prm
    assert prm["passed"] and _placed(rmax) == two
    rm = [r for r in d["scaling"]["results"] if r["metric"] == "rmax"]
    assert tuple(two) in {tuple(r["params"]["hosts"]) for r in rm} and any(len(r["params"]["hosts"]) == 1 for r in rm)
    assert all(set(r["params"]["hosts"]) <= set(two) and r["value"] > 0 for r in rm), rm
    tune = d["tune"]["tune"]
    assert tune["best"]["status"] == "measured" and tune["best"]["value"] > 0, tune["best"]
    trials = [t for t in tune["trials"] if t["kind"] == "hpl" and t["status"] == "measured"]
    assert trials
    con = sqlite3.connect(db)
    for t in trials:  # every hpl trial ran across the two machines, its ranks started by srun
        rows = [json.loads(p) for (p,) in con.execute("SELECT params FROM results WHERE run_id=?", (t["run_id"],))]
        rows = [p for p in rows if p.get("hosts")]
        assert rows and all(p["hosts"] == two and p["mpi"]["launcher"] == "srun" for p in rows), t["key"]
    _through_srun(s, job, {k: v for k, v in d.items() if k != "tune"}, two)
    _head_only_and_clean(s)


def test_hpcc_hpcg_ptrans_pdes_inside_salloc(slurm_machines, tmp_path):
    """hpcg, ptrans, pdes and hpcc at their smallest sizes inside ``salloc -N 2``, through srun."""
    s = slurm_machines
    db = tmp_path / "r.db"
    two = s["names"][:2]
    job, d = _salloc_each(s, 2, {
        "hpcg": ["run", "hpcg", "--hosts", "$H", "--quick", "--oversubscribe"],
        "ptrans": ["run", "ptrans", "--hosts", "$H", "--n", "500", "--quick", "--oversubscribe"],
        "pdes": ["run", "pdes", "--hosts", "$H", "--quick", "--oversubscribe"],
        "hpcc": ["run", "hpcc", "--hosts", "$H", "--quick", "--oversubscribe",
                 "--skip", "hpl,hpcg,fft,randomaccess,stream,dgemm"],
    }, db, tmp_path, timeout=300)
    rating = next(r for r in d["hpcg"]["results"] if r["metric"] == "rating")
    assert rating["value"] > 0 and _placed(rating) == two
    g = next(r for r in d["ptrans"]["results"] if r["metric"] == "gbs")
    assert g["value"] > 0 and g["params"]["hosts"] == two
    ev = next(r for r in d["pdes"]["results"] if r["metric"] == "events_per_s")
    assert ev["value"] > 0 and _placed(ev) == two
    keys = {r["params"].get("hpcc_key") for r in d["hpcc"]["results"]}
    assert {"PTRANS_GBs", "MinPingPongLatency_usec", "NaturallyOrderedRingLatency_usec"} <= keys, keys
    _through_srun(s, job, d, two)
    assert _runs(db) == len(d)
    _head_only_and_clean(s)


def test_check_doctor_fix_and_undo_on_the_allocations_nodes(slurm_machines, tmp_path):
    """cluster check and doctor with no --hosts inside ``salloc -N 3`` take the job's nodes; a fix
    on one of them and its undo change that machine only."""
    s = slurm_machines
    c = s["cluster"]
    db = tmp_path / "r.db"
    names = s["names"]
    rps_file = "/sys/class/net/cb0/queues/rx-0/rps_cpus"
    before = {h: on(c, h, "cat", rps_file).stdout.strip() for h in names}
    _, d = _salloc_each(s, NODES, {
        "check": ["cluster", "check"],
        "doctor": ["doctor"],
        "fix": ["doctor", "--hosts", names[1], "--fix", "rps-single-queue", "--yes"],
    }, db, tmp_path, timeout=200)
    assert d["check"]["answered"] == names and d["check"]["errors"] == {}, d["check"].get("errors")
    assert {h: x["probe"]["hostname"] for h, x in d["check"]["probes"].items()} == {h: h for h in names}
    assert d["doctor"]["hosts"] == names
    assert {f["node"] for f in d["doctor"]["findings"] if f["rule"] == "rps-single-queue"} == set(names)
    fix = d["fix"]["fix"]
    assert fix["status"] == "applied" and fix["hosts"] == [names[1]]
    after = {h: on(c, h, "cat", rps_file).stdout.strip() for h in names}
    assert int(after[names[1]], 16) != 0 and int(before[names[1]], 16) == 0
    assert all(after[h] == before[h] for h in names if h != names[1])
    _, d = _salloc_each(s, NODES, {"undo": ["doctor", "--undo", fix["id"], "--yes"]}, db, tmp_path / "u",
                        timeout=120)
    assert d["undo"]["fix"]["status"] == "undone"
    assert {h: on(c, h, "cat", rps_file).stdout.strip() for h in names} == before
    _head_only_and_clean(s)

