"""The virtual cluster: real network namespaces, a real bridge, real Open MPI across them.

The live tests need root and a usable ``ip netns`` and are skipped with the reason otherwise. They use
their own prefix (``cbtst-``) and state directory, so a user's ``cbsim-`` cluster is never touched,
and every test takes its cluster down in a finally, even on failure.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.launch import simcluster as sc
from clusterbench.launch.simcluster import running as sc_running
from clusterbench.launch.simcluster import state as sc_state

PREFIX = "cbtst-"


def _sh(cmd: list[str], timeout: float = 10, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} failed ({p.returncode}): {p.stderr or p.stdout}")
    return p


@functools.lru_cache(maxsize=1)
def _netns_unusable() -> str | None:
    """Why the live tests cannot run, or None."""
    if os.geteuid() != 0:
        return "sim-cluster needs root (ip netns); run the suite as root to test it"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    probe = f"{PREFIX}probe"
    try:
        p = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
        if p.returncode != 0:
            return f"ip netns is unusable here: {p.stderr.strip()}"
        q = subprocess.run(["ip", "-n", probe, "link", "add", "cbt0", "type", "veth", "peer", "name", "cbt1"],
                           capture_output=True, text=True, timeout=10)
        if q.returncode != 0:
            return f"veth pairs cannot be created here: {q.stderr.strip()}"
    except subprocess.TimeoutExpired:
        return "ip netns did not answer within 10 s"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None


@pytest.fixture
def live_env(tmp_path: Path):
    """A state dir for a test cluster; everything with our prefix is removed afterwards."""
    why = _netns_unusable()
    if why:
        pytest.skip(why)
    state = tmp_path / "state"
    sc.down(prefix=PREFIX, state=state)  # leftovers of an earlier, killed test run
    try:
        yield state
    finally:
        sc.down(prefix=PREFIX, state=state)
        assert sc.list_namespaces(PREFIX) == []


def _ns_pids(c: sc.SimCluster) -> list[int]:
    pids = []
    for ns in c.namespaces():
        pids += [int(x) for x in _sh(["ip", "netns", "pids", ns], check=False).stdout.split()]
    return pids


# --------------------------------------------------------------------------- no root needed


@pytest.mark.integration
def test_non_root_is_refused_and_nothing_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = sc.list_namespaces(PREFIX)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for call in (lambda: sc.up(2, prefix=PREFIX, state=tmp_path),
                 lambda: sc.down(prefix=PREFIX, state=tmp_path),
                 lambda: sc.status(prefix=PREFIX, state=tmp_path)):
        with pytest.raises(EnvironmentProblem) as e:
            call()
        assert "needs root" in str(e.value) and "ip netns" in str(e.value)
        assert e.value.exit_code == 3
    assert sc.list_namespaces(PREFIX) == before
    assert list(tmp_path.iterdir()) == []


@pytest.mark.integration
def test_bad_specs_are_usage_errors(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the root check comes first")
    for kwargs in ({"nodes": 0}, {"nodes": 1000}, {"mtu": 100}, {"rate": "fast"}, {"delay": "soon"},
                   {"prefix": "Bad Prefix"}):
        kw = {"nodes": 2, "prefix": PREFIX, "state": tmp_path, **kwargs}
        with pytest.raises(UsageError):
            sc.up(**kw)
    assert sc.list_namespaces(PREFIX) == []


@pytest.mark.integration
def test_agent_script_is_valid_sh_and_skips_ssh_options(tmp_path: Path) -> None:
    agent = tmp_path / "agent.sh"
    # with `ip` replaced by echo, the agent prints what it would run (namespace check aside)
    text = sc.agent_script("cbsim-").replace('if [ ! -e "/run/netns/$ns" ]', 'if false')
    agent.write_text(text.replace(f"IP='{shutil.which('ip') or '/usr/sbin/ip'}'", "IP=echo"))
    agent.chmod(0o755)
    _sh(["sh", "-n", str(agent)])
    out = _sh([str(agent), "cbsim-n1", "orted -mca a b"]).stdout.split()
    assert out == ["netns", "exec", "cbsim-n1", "/bin/sh", "-c", "orted", "-mca", "a", "b"]
    # mpirun's own --mca orte_tmpdir_base reaches every daemon on its command line (it beats the
    # environment): the agent gives each node a subfolder of it
    base = tmp_path / "cb-mpi-x_1"
    for quote in ('"', ""):  # Open MPI 4.1 quotes the values it passes on
        out = _sh([str(agent), "cbsim-n1", f'orted -mca a "b" --mca orte_tmpdir_base {quote}{base}{quote} -mca c d']
                  ).stdout.split()
        assert out[5:] == ["orted", "-mca", "a", '"b"', "--mca", "orte_tmpdir_base", f"{base}/cbsim-n1", "-mca", "c", "d"]
        assert (base / "cbsim-n1").is_dir()
    out = _sh([str(agent), "-x", "n2", "hydra_pmi_proxy", "--control-port", "x:1"]).stdout.split()
    assert out[:3] == ["netns", "exec", "cbsim-n2"]
    assert _sh([str(agent), "bad;name", "true"], check=False).returncode == 255


@pytest.mark.integration
def test_names_resolving_locally_are_refused() -> None:
    with pytest.raises(EnvironmentProblem, match="local address"):
        sc_state.check_names_do_not_resolve_locally(["localhost"])
    assert shutil.which("getent") is None or \
        _sh(["getent", "hosts", "cbsim-n1", "cbtst-n1"], check=False).returncode != 0


# --------------------------------------------------------------------------- live


@pytest.mark.integration
def test_end_to_end_network_and_mpi(live_env: Path, tmp_path: Path) -> None:
    t0 = time.monotonic()
    c = sc.up(2, mtu=9000, prefix=PREFIX, state=live_env)
    n1, n2 = c.nodes
    st = sc.status(prefix=PREFIX, state=live_env)
    assert st["up"], st["problems"]
    assert [(r["name"], r["address"], r["mtu"], r["state"]) for r in st["nodes"]] == \
        [("cbtst-n1", "198.18.0.11", 9000, "up"), ("cbtst-n2", "198.18.0.12", 9000, "up")]
    assert st["bridge"]["mtu"] == 9000
    for m in (n1, n2, c.head):
        assert "mtu 9000" in _sh(["ip", "-n", m.namespace, "link", "show", m.iface]).stdout
        assert "UP" in _sh(["ip", "-n", m.namespace, "link", "show", "lo"]).stdout
    # nothing in the root namespace
    root_links = [ln["ifname"] for ln in json.loads(_sh(["ip", "-j", "link", "show"]).stdout)]
    assert not [n for n in root_links if n.startswith(("cbv-", "cbbr", "cb0"))]

    # reachability: ping where iputils is installed, else a TCP connect (refused = reached)
    if shutil.which("ping"):
        _sh([*sc.exec_prefix(n1), "ping", "-c1", "-W1", n2.address])
        _sh([*sc.exec_prefix(c.head), "ping", "-c1", "-W1", n1.address])
        # a 9000-byte frame crosses the bridge unfragmented; 9001 does not fit
        _sh([*sc.exec_prefix(n1), "ping", "-c1", "-W1", "-M", "do", "-s", "8972", n2.address])
        assert _sh([*sc.exec_prefix(n1), "ping", "-c1", "-W1", "-M", "do", "-s", "8973", n2.address],
                   check=False).returncode != 0
    # 1 MiB over TCP, n1 -> n2, with the big MTU on the path
    server = textwrap.dedent(f"""
        import socket, sys
        s = socket.socket(); s.bind(("{n2.address}", 0)); s.listen(1); s.settimeout(15)
        print(s.getsockname()[1], flush=True)
        c, _ = s.accept(); c.settimeout(15); n = 0
        while True:
            b = c.recv(1 << 16)
            if not b: break
            n += len(b)
        print(n, flush=True)
    """)
    srv = subprocess.Popen([*sc.exec_prefix(n2), sys.executable, "-c", server], stdout=subprocess.PIPE, text=True)
    try:
        port = int(srv.stdout.readline())
        client = (f"import socket; s = socket.create_connection(('{n2.address}', {port}), timeout=10); "
                  f"s.sendall(b'x' * (1 << 20)); s.close()")
        _sh([*sc.exec_prefix(n1), sys.executable, "-c", client], timeout=20)
        out, _ = srv.communicate(timeout=20)
        assert int(out.split()[-1]) == 1 << 20
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait(5)

    # MPI across the namespaces: each rank on its own node, on its own core
    if not (shutil.which("mpicc") and shutil.which("mpirun")):
        pytest.skip("Open MPI (mpicc, mpirun) is not installed: apt-get install openmpi-bin libopenmpi-dev")
    src = tmp_path / "hello.c"
    src.write_text(textwrap.dedent(r"""
        #include <mpi.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        int main(int argc, char **argv) {
            int rank; char cpus[256] = "?", line[512];
            MPI_Init(&argc, &argv);
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            FILE *f = fopen("/proc/self/status", "r");
            while (f && fgets(line, sizeof line, f))
                if (!strncmp(line, "Cpus_allowed_list:", 18)) sscanf(line + 18, "%255s", cpus);
            if (f) fclose(f);
            const char *node = getenv("CB_SIM_NODE");
            printf("rank=%d node=%s cpus=%s\n", rank, node ? node : "none", cpus);
            fflush(stdout);
            MPI_Finalize();
            return 0;
        }
    """))
    hello = tmp_path / "hello"
    _sh(["mpicc", "-o", str(hello), str(src)], timeout=60)
    rankfile = tmp_path / "rankfile"
    two_cores = len(os.sched_getaffinity(0)) >= 2
    rankfile.write_text(sc.rankfile_text([(n1.name, 0), (n2.name, 1 if two_cores else 0)]))
    cmd = [*sc.exec_prefix("head", c), "mpirun", *sc.mpirun_args(c, allow_root=True),
           "--host", sc.host_arg(c), "-np", "2", "--rankfile", str(rankfile), str(hello)]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30)
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, err
    ranks = {}
    for line in out.splitlines():
        if line.startswith("rank="):
            kv = dict(x.split("=", 1) for x in line.split())
            ranks[int(kv["rank"])] = kv
    assert sorted(ranks) == [0, 1], out + err
    assert ranks[0]["node"] == n1.name and ranks[1]["node"] == n2.name
    if two_cores:
        assert ranks[0]["cpus"] != ranks[1]["cpus"], "both ranks bound to the same core"
    # mpirun has exited: nothing is left in the namespaces
    assert _ns_pids(c) == []

    removed = sc.down(prefix=PREFIX, state=live_env)
    assert set(removed) == set(c.namespaces())
    assert sc.list_namespaces(PREFIX) == []
    assert _sh(["pgrep", "-f", str(hello)], check=False).stdout == ""
    assert not Path(c.state_file).exists() and not Path(c.agent).exists()
    assert time.monotonic() - t0 < 60


@pytest.mark.integration
def test_many_launches_in_a_row_none_hangs(live_env: Path) -> None:
    """Every node's Open MPI daemon has this machine's host name, so one session folder: two daemons
    racing on its files killed one, silently (--daemonize), and mpirun waited for it forever, about
    one launch in eight on 2 nodes (in 40: 99.5 %; this test failed 2 of 2 so). The agent gives each
    node its own folder; 40 launches of 3 daemons, none may hang. CI of 2026-11-27: clusterbench's own
    ``--mca orte_tmpdir_base`` (its run's folder) reached the daemons on their command line, beat
    the agent's folder and brought the race back (1 launch in 17 hung): launched here as clusterbench
    does, with it."""
    c = sc.up(3, prefix=PREFIX, state=live_env)
    cmd = [*sc.exec_prefix("head", c), "mpirun", *sc.mpirun_args(c, allow_root=True),
           "--mca", "orte_tmpdir_base", str(live_env / "cb-mpi-run"), "--host", sc.host_arg(c), "-np", "3", "true"]
    for i in range(40):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=20,
                               start_new_session=True)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"launch {i + 1} of 40 hung for 20 s") from None
        assert p.returncode == 0, (i, p.stderr)


@pytest.mark.integration
def test_up_is_idempotent_and_refuses_another_spec(live_env: Path) -> None:
    c = sc.up(2, prefix=PREFIX, state=live_env)
    again = sc.up(2, prefix=PREFIX, state=live_env)
    assert again.created == c.created and "nothing done" in again.notes[0]
    with pytest.raises(UsageError, match="down"):
        sc.up(2, mtu=9000, prefix=PREFIX, state=live_env)
    with pytest.raises(UsageError, match="down"):
        sc.up(3, prefix=PREFIX, state=live_env)
    assert sc.status(prefix=PREFIX, state=live_env)["up"]
    # a broken cluster with the same spec is rebuilt
    _sh(["ip", "netns", "del", c.nodes[1].namespace])
    st = sc.status(prefix=PREFIX, state=live_env)
    assert not st["up"] and st["nodes"][1]["state"] == "down"
    rebuilt = sc.up(2, prefix=PREFIX, state=live_env)
    assert "rebuilt" in rebuilt.notes[0] and sc.status(prefix=PREFIX, state=live_env)["up"]


@pytest.mark.integration
def test_down_after_a_crash_and_with_processes_left(live_env: Path) -> None:
    c = sc.up(2, prefix=PREFIX, state=live_env)
    # a process left running in a node (an orphaned daemon) and the state file lost
    sleeper = subprocess.Popen([*sc.exec_prefix(c.nodes[0]), "sleep", "60"])
    try:
        Path(c.state_file).unlink()
        st = sc.status(prefix=PREFIX, state=live_env)
        assert not st["up"] and set(st["leftovers"]) == set(c.namespaces())
        assert set(sc.down(prefix=PREFIX, state=live_env)) == set(c.namespaces())
        assert sleeper.wait(timeout=5) == -signal.SIGKILL
        assert sc.list_namespaces(PREFIX) == []
        assert not Path(c.agent).exists()
        # up over leftovers (crash, no state) cleans them and builds afresh
        sc.up(1, prefix=PREFIX, state=live_env)
        Path(sc.load(live_env, prefix=PREFIX).state_file).unlink()
        c2 = sc.up(2, prefix=PREFIX, state=live_env)
        assert "leftovers" in c2.notes[0] and sc.status(prefix=PREFIX, state=live_env)["up"]
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait(5)


@pytest.mark.integration
def test_rate_limit_and_delay(live_env: Path) -> None:
    c = sc.up(2, rate="100mbit", prefix=PREFIX, state=live_env)
    for n in c.nodes:
        q = _sh(["tc", "-n", n.namespace, "qdisc", "show", "dev", n.iface]).stdout
        assert "tbf" in q and "rate 100Mbit" in q, q
    st = sc.status(prefix=PREFIX, state=live_env)
    assert st["up"] and [r["rate_bps"] for r in st["nodes"]] == [10**8, 10**8]
    sc.down(prefix=PREFIX, state=live_env)

    try:
        c = sc.up(2, delay="1ms", rate="1gbit", prefix=PREFIX, state=live_env)
    except EnvironmentProblem as e:  # this kernel has no netem: say so, leave nothing
        assert "sch_netem" in str(e)
        assert sc.list_namespaces(PREFIX) == []
        assert sc.load(live_env, prefix=PREFIX) is None
    else:
        st = sc.status(prefix=PREFIX, state=live_env)
        assert st["up"], st["problems"]
        assert all(r["delay"] for r in st["nodes"])


@pytest.mark.integration
def test_status_exit_codes_and_down_with_a_job_inside(live_env: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    """Issue 23: ``status`` with nothing up exited 1, an undocumented code: "no cluster" is an answer
    (exit 0; ``up`` false in --json), a broken cluster an environment problem (exit 3). ``down`` while a
    job runs inside killed it without a word: it refuses (exit 2, naming what runs), ``--force`` kills
    and lists it."""
    from clusterbench import cli

    monkeypatch.setenv("CLUSTERBENCH_SIM_PREFIX", PREFIX)
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(live_env))
    assert cli.main(["sim-cluster", "status"]) == 0
    assert "no sim-cluster is up" in capsys.readouterr().out
    c = sc.up(2, prefix=PREFIX, state=live_env)
    assert cli.main(["sim-cluster", "status", "--json"]) == 0 and json.loads(capsys.readouterr().out)["up"]
    job = subprocess.Popen([*sc.exec_prefix(c.nodes[1]), "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while not sc.processes(prefix=PREFIX) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cli.main(["sim-cluster", "down"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "a job is using the virtual cluster" in err
        assert "1 sleep in cbtst-n2" in err and "--force" in err
        assert job.poll() is None and sc.status(prefix=PREFIX, state=live_env)["up"]
        _sh(["ip", "netns", "del", c.nodes[0].namespace])  # broken: a node's namespace gone
        assert cli.main(["sim-cluster", "status"]) == 3
        assert "problem: cbtst-n1: namespace missing" in capsys.readouterr().out
        assert cli.main(["sim-cluster", "down", "--force"]) == 0
        out = capsys.readouterr().out
        assert "killed 1 process(es)" in out and f"pid {job.pid} (cbtst-n2): sleep 60" in out
        assert job.wait(timeout=5) == -signal.SIGKILL
        assert sc.list_namespaces(PREFIX) == []
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(5)


@pytest.mark.integration
def test_a_long_python_path_still_names_the_module(tmp_path):
    """CI of 2026-11-26: in a clone at a long path, ``python -m clusterbench.sweep.agent`` was named by
    its command line cut to 60 characters (before its ``-m``), so ``sim-cluster down`` called the
    agents "clusterbe...". The program comes from the whole argv of a real process."""
    deep = tmp_path / ("clusterbench-" + "d" * 40) / "venv" / "bin"
    deep.mkdir(parents=True)
    py = deep / "python3"
    py.symlink_to(sys.executable)
    proc = subprocess.Popen([str(py), "-m", "timeit", "-n1", "-r1", "import time; time.sleep(30)"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=os.setpgrp)
    try:
        deadline = time.monotonic() + 10
        while "timeit" not in (argv := sc_running.argv_of(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait()
    assert argv[:3] == [str(py), "-m", "timeit"]
    assert len(str(py)) > 60 and sc_running.command_of(argv).startswith("python3 -m timeit -n1")
    assert sc_running.program_of(argv) == "timeit"
    assert sc.describe_processes([{"namespace": "t-n1", "pid": 1, "command": sc_running.command_of(argv),
                                   "program": sc_running.program_of(argv)}]) == "1 timeit in t-n1"




@pytest.mark.integration
@pytest.mark.slow
def test_down_after_a_crash_removes_the_machines_and_tells_their_own_processes_from_a_job(live_env: Path) -> None:
    """The virtual cluster of machines after a crash that lost its state file: the machines' own
    processes (init, sshd, the head's holder) are not taken for a job (`down` refused without --force,
    and named sshd by a piece of its retitled command line), a job's process still is, and `down`
    removes the namespaces and every machine's processes."""
    from clusterbench.launch import machines as M

    try:
        c = sc.up(2, prefix=PREFIX, state=live_env, machines=True)
    except EnvironmentProblem as exc:
        pytest.skip(f"machines unusable here: {exc}")
    inits = [M.holder_pid(n.namespace, pid_ns=True) for n in c.nodes]
    assert all(inits), inits
    _sh([*sc.exec_prefix(c.head, c), "ssh", "-o", "BatchMode=yes", "node1",
         "nohup sleep 120 >/dev/null 2>&1 </dev/null &"], timeout=30)
    Path(c.state_file).unlink()
    using = sc_running.processes(prefix=PREFIX)
    assert [p["program"] for p in using] == ["sleep"], using
    assert "sleep in cbtst-n1" in sc_running.describe_processes(using)
    assert set(sc.down(prefix=PREFIX, state=live_env)) == set(c.namespaces())
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{pid}") for pid in inits) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in inits), "a machine's init outlived down"
    assert sc.list_namespaces(PREFIX) == []
    assert str(live_env) not in Path("/proc/self/mounts").read_text()
