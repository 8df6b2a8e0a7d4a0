"""Preflight's and install's judgements, without a cluster: what one node's facts show wrong (name,
resolution back and forth, free memory), versions that differ between nodes (MPI, BLAS, compiler,
clusterbench), the clock limit, ssh's messages (a changed host key, a node that hangs), the quick
preflight's cache (a pass within CACHE_S is not run again), the new ``--break`` kinds, and install
on a node without the compiler or MPI (refused, one line with the command, nothing installed) or
with a shared $HOME (installed once, said)."""
from __future__ import annotations

import pytest

from clusterbench.cluster import facts as F
from clusterbench.cluster import install as I
from clusterbench.cluster import preflight as P
from clusterbench.cluster import rules as R
from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.launch import machines as M
from clusterbench.launch import remote

DEBIAN = {"ID": "debian", "ID_LIKE": "", "VERSION_ID": "12"}


def _facts(host: str, **over) -> dict:
    f = {"hostname": host, "python": "3.11.2", "python_ok": True, "mem_available": 8 << 30, "mem_total": 16 << 30,
         "cpus": 4, "cc": "cc (Debian 12.2.0-14) 12.2.0", "mpicc": "gcc 12.2.0",
         "mpirun": "mpirun (Open MPI) 4.1.4", "blas": ["libopenblas.so.0"], "hwloc": ["libhwloc.so.15"],
         "fftw": ["libfftw3.so.3"], "numa": ["libnuma.so.1"], "os": DEBIAN,
         "installed": {"version": "0.2.0", "digest": "d1"}, "venv_python": True, "marker": False, "resolve": {}}
    f.update(over)
    return f


def _by(problems: list[dict], node: str, check: str) -> list[str]:
    return [f"{p['problem']} -> {p['fix']}" for p in problems if p["node"] == node and p["check"] == check]


# --------------------------------------------------------------------------- one node's facts
def test_low_free_memory_is_flagged_and_enough_is_not():
    low = R.node_problems("node2", _facts("node2", mem_available=100 << 20))
    assert _by(low, "node2", "memory") == ["node2 has 100 MiB free -> stop what uses its memory before benchmarking"]
    assert _by(R.node_problems("node2", _facts("node2", mem_available=R.LOW_MEMORY)), "node2", "memory") == []
    assert R.node_problems("node2", _facts("node2", mem_available=None)) == []  # unknown: not judged


def test_reverse_resolution_to_another_name_is_named_with_its_fix():
    f = _facts("node2", resolve={"node1": {"address": "10.0.0.1", "name": "node1-alias"},
                                 "node3": {"address": "10.0.0.3", "name": "node3.cluster"},
                                 "head": {"address": None, "name": None}})
    probs = R.node_problems("node2", f)
    text = _by(probs, "node2", "resolve")
    assert len(text) == 2, probs  # node3's domain is the same name
    assert "on node2, node1 resolves to 10.0.0.1, which resolves back to node1-alias" in text[0]
    assert "make /etc/hosts on node2 name 10.0.0.1 as node1 first" in text[0]
    assert "node2 cannot resolve head" in text[1] and "add head to /etc/hosts on node2" in text[1]


def test_a_node_calling_itself_another_name():
    text = _by(R.node_problems("node5", _facts("nodeX")), "node5", "name")
    assert len(text) == 1 and "node5 calls itself 'nodeX'" in text[0] and "hostnamectl set-hostname node5" in text[0]


# --------------------------------------------------------------------------- between nodes
def _rows(**facts) -> dict:
    return {h: {"reachable": True, "facts": f} for h, f in facts.items()}


def test_mpi_blas_and_compiler_versions_that_differ_are_named_on_the_odd_node():
    rows = _rows(node1=_facts("node1"), node2=_facts("node2"),
                 node3=_facts("node3", mpirun="mpirun (Open MPI) 4.0.3", blas=["libblis.so.4"],
                              cc="cc (Debian 10.2.1-6) 10.2.1"))
    probs = R.differences(rows, "d1")
    assert {p["node"] for p in probs} == {"node3"}, probs
    text = " | ".join(f"{p['problem']} -> {p['fix']}" for p in probs)
    assert "node3 has MPI 'mpirun (Open MPI) 4.0.3', the others 'mpirun (Open MPI) 4.1.4'" in text
    assert "node3 has BLAS 'libblis.so.4', the others 'libopenblas.so.0'" in text
    assert "node3 has compiler 'cc (Debian 10.2.1-6) 10.2.1'" in text
    assert "install the same MPI on every node" in text
    assert R.differences(_rows(node1=_facts("node1"), node2=_facts("node2")), "d1") == []


def test_a_node_without_mpi_or_a_compiler_is_named_with_the_command_that_installs_it():
    rows = _rows(node1=_facts("node1"), node2=_facts("node2", mpirun=None, mpicc=None),
                 node3=_facts("node3", cc=None))
    probs = R.differences(rows, "d1")
    assert _by(probs, "node2", "software") == [
        "node2 has no MPI -> install it on node2: sudo apt-get install -y openmpi-bin libopenmpi-dev"]
    assert _by(probs, "node3", "software") == [
        "node3 has no compiler -> install it on node3: sudo apt-get install -y build-essential"]


def test_another_clusterbench_and_none_at_all():
    rows = _rows(node1=_facts("node1"), node2=_facts("node2", installed={"version": "0.0.0", "digest": "0000"}),
                 node3=_facts("node3", installed=None))
    probs = R.differences(rows, "d1")
    assert "node2 has another clusterbench (0.0.0, digest 0000)" in _by(probs, "node2", "version")[0]
    assert _by(probs, "node3", "version") == ["clusterbench is not installed on node3 -> "
                                              "clusterbench cluster install --hosts node3"]
    assert _by(probs, "node1", "version") == []


def test_clock_offset_beyond_the_limit_and_its_uncertainty():
    clock = {"node1": {"offset_s": 0.002, "uncertainty_s": 0.001},
             "node2": {"offset_s": -1.5, "uncertainty_s": 0.001},
             "node3": {"offset_s": 0.6, "uncertainty_s": 0.2}}  # within the limit once uncertain
    probs = R.clock_problems(clock)
    assert [p["node"] for p in probs] == ["node2"]
    assert "node2's clock is -1.50 s off the head's" in probs[0]["problem"] and "NTP" in probs[0]["fix"]


# --------------------------------------------------------------------------- ssh's words
def test_a_changed_host_key_is_named_as_changed_with_ssh_keygen_r():
    err = ("@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@@@@@@@\n"
           "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\n"
           "Host key for node1 has changed and you have requested strict checking.\n"
           "Host key verification failed.\n")
    problem, fix = remote.ssh_problem("node1", err)
    assert "host key changed" in problem and "ssh-keygen -R node1" in fix
    problem, fix = remote.ssh_problem("node1", "Host key verification failed.\n")
    assert "not in known_hosts" in problem and "ssh-keyscan node1" in fix


def test_a_node_that_accepts_and_never_answers_is_said_to_hang():
    problem, fix = remote.ssh_problem("node3", "Connection timed out during banner exchange\n")
    assert "never answers" in problem and "node3" in fix and "sshd" in fix
    problem, _ = remote.ssh_problem("node3", "ssh: connect to host node3 port 22: Connection timed out\n")
    assert "does not answer (down, or a firewall)" in problem


# --------------------------------------------------------------------------- the quick preflight's cache
def test_quick_preflight_is_cached_for_its_stated_time(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    from clusterbench.launch import nodes

    asked: list[str] = []

    def node(host, others, head):
        asked.append(host)
        return {"host": host, "reachable": True, "problems": [], "facts": _facts(host, rdma={})}

    monkeypatch.setattr(nodes, "separate", lambda hosts: list(dict.fromkeys(hosts)))
    monkeypatch.setattr(I, "prepare_wheels", lambda: ([], "d1"))
    monkeypatch.setattr(P, "head_name", lambda hosts: "head")
    monkeypatch.setattr(P, "_node", node)
    P.quick(["node1", "node2"])
    assert sorted(asked) == ["node1", "node2"]
    P.quick(["node2", "node1", "node1"])  # the same hosts within CACHE_S: not asked again
    assert len(asked) == 2
    monkeypatch.setattr(I, "prepare_wheels", lambda: ([], "d2"))  # another clusterbench here: asked again
    with pytest.raises(EnvironmentProblem, match="another clusterbench"):
        P.quick(["node1", "node2"])
    assert len(asked) == 4
    monkeypatch.setattr(I, "prepare_wheels", lambda: ([], "d1"))
    P.quick(["node1", "node3"])  # other hosts: asked
    assert len(asked) == 6
    monkeypatch.setattr(I, "prepare_wheels", lambda: ([], "d1"))
    P.quick(["node1", "node2"])  # back to the clusterbench that passed, within its time
    assert len(asked) == 6
    # a run with --transport rdma: a pass without the RDMA check does not count; a node without a port up
    # is named (these nodes have no RDMA device)
    with pytest.raises(EnvironmentProblem, match="node1 has no RDMA port up"):
        P.quick(["node1", "node2"], rdma=True)
    assert len(asked) == 8
    monkeypatch.setattr(P, "CACHE_S", 0.0)  # past its time: asked again
    P.quick(["node1", "node2"])
    assert len(asked) == 10


def test_quick_preflight_names_a_node_without_mpi_before_its_missing_install(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    from clusterbench.launch import nodes

    facts = {"node1": _facts("node1"), "node3": _facts("node3", mpirun=None, mpicc=None, installed=None)}
    monkeypatch.setattr(nodes, "separate", lambda hosts: list(hosts))
    monkeypatch.setattr(I, "prepare_wheels", lambda: ([], "d1"))
    monkeypatch.setattr(P, "head_name", lambda hosts: "head")
    monkeypatch.setattr(P, "_node", lambda h, o, hd: {"host": h, "reachable": True, "problems": [], "facts": facts[h]})
    with pytest.raises(EnvironmentProblem) as e:
        P.quick(["node1", "node3"])
    assert e.value.problem.startswith("node3 has no MPI (and 1 more problem(s)")
    assert e.value.fix == "install it on node3: sudo apt-get install -y openmpi-bin libopenmpi-dev"


# --------------------------------------------------------------------------- --break kinds
def test_new_break_kinds_parse_and_bad_ones_are_refused():
    names = ["node1", "node2", "node3"]
    got = M.parse_breaks(["node2:version", "node3:hang", "node1:changed-key", "node2:reverse=node1"], names)
    assert got == {"node2": {"version": "", "reverse": "node1"}, "node3": {"hang": ""}, "node1": {"changed-key": ""}}
    for bad in ("node2:reverse", "node2:reverse=node9", "node2:hang=1", "node2:version=1"):
        with pytest.raises(UsageError):
            M.parse_breaks([bad], names)
    assert '"digest": "0000000000000000"' in M.OTHER_VERSION


# --------------------------------------------------------------------------- install
def _fake_install(monkeypatch, tmp_path, facts_of):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(I, "prepare_wheels", lambda: ([], "d1"))
    installed: list[str] = []

    def install_one(host, wheels, digest, blob, timeout):
        installed.append(host)
        return {"status": "installed", "digest": digest}

    monkeypatch.setattr(I, "_install_one", install_one)
    monkeypatch.setattr(I, "node_facts", lambda host, names, marker, timeout=0: facts_of(host, installed))
    return installed


def test_install_refuses_a_node_without_the_compiler_or_mpi_in_one_line_and_installs_nothing_there(
        tmp_path, monkeypatch):
    facts = {"node1": _facts("node1", installed=None), "node2": _facts("node2", installed=None, cc=None, mpicc=None),
             "node3": _facts("node3", installed=None, mpicc=None, mpirun=None, fftw=[])}
    installed = _fake_install(monkeypatch, tmp_path, lambda h, _: facts[h])
    doc = I.install(["node1", "node2", "node3"], kernels=False)
    assert installed == ["node1"] and doc["failed"] == ["node2", "node3"]
    assert doc["nodes"]["node2"]["error"] == ("node2 lacks C compiler and MPI; install with (on node2): "
                                              "sudo apt-get install -y build-essential openmpi-bin libopenmpi-dev")
    assert doc["nodes"]["node3"]["error"] == ("node3 lacks MPI; install with (on node3): sudo apt-get install -y "
                                              "openmpi-bin libopenmpi-dev libfftw3-dev libfftw3-mpi-dev")
    lines = I.format_install(doc)
    assert [ln for ln in lines if ln.startswith("  node2")] == [f"  node2: failed: {doc['nodes']['node2']['error']}"]
    assert len([ln for ln in lines if ln.startswith("  node3")]) == 1
    # a missing optional library is said, the node installed
    facts["node1"] = _facts("node1", installed=None, fftw=[])
    doc = I.install(["node1"], kernels=False)
    assert doc["failed"] == [] and doc["nodes"]["node1"]["missing"] == ["FFTW"]
    assert "  node1: missing FFTW; install with: sudo apt-get install -y libfftw3-dev libfftw3-mpi-dev" \
        in I.format_install(doc)


def test_install_on_a_shared_home_installs_once_and_says_so(tmp_path, monkeypatch):
    # the nodes see the marker the head wrote in its home: the first one installs there, the others find it
    def facts_of(host, installed):
        return _facts(host, marker=True, installed={"version": "0.2.0", "digest": "d1"} if installed else None,
                      venv_python=bool(installed))

    installed = _fake_install(monkeypatch, tmp_path, facts_of)
    doc = I.install(["node1", "node2", "node3"], kernels=False)
    assert installed == ["node1"]
    assert {h: r["status"] for h, r in doc["nodes"].items()} == \
        {"node1": "installed", "node2": "already installed", "node3": "already installed"}
    assert all(r["shared_home"] for r in doc["nodes"].values())
    assert "  node2: already installed (shared home)" in I.format_install(doc)
    assert not list((tmp_path / "home" / ".cache" / "clusterbench").glob(".shared-home-*"))  # its marker removed


def test_missing_packages_can_look_at_the_required_ones_only():
    f = _facts("n", fftw=[], mpicc=None)
    assert F.missing_packages(f, only=F.REQUIRED) == (["MPI"], "sudo apt-get install -y openmpi-bin libopenmpi-dev")
    assert F.missing_packages(f)[0] == ["MPI", "FFTW"]


def test_preflight_bounds_scale_for_slow_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """$CLUSTERBENCH_PREFLIGHT_SCALE multiplies the node and MPI bounds (emulated nodes); never below 1."""
    for value, scale in (("4", 4.0), ("0.5", 1.0), ("x", 1.0), ("", 1.0)):
        monkeypatch.setenv("CLUSTERBENCH_PREFLIGHT_SCALE", value)
        assert P.timeout_scale() == scale
    monkeypatch.delenv("CLUSTERBENCH_PREFLIGHT_SCALE")
    assert P.timeout_scale() == 1.0 and P.NODE_TIMEOUT == 8.0 and P.MPI_TIMEOUT == 20.0


def _rows_with(addresses: dict[str, list[list[str]]]) -> dict:
    """Nodes that resolve each other to their eth0 address (as /etc/hosts would say)."""
    ip = {h: next(c for i, c in a if i == "eth0").split("/")[0] for h, a in addresses.items()}
    return {h: {"reachable": True, "facts": {"addresses": a, "resolve": {o: {"address": ip[o], "name": o}
                                                                         for o in addresses if o != h}}}
            for h, a in addresses.items()}


def test_an_address_several_nodes_share_is_named_with_the_network_to_give_mpi():
    # docker0 on every node and QEMU's user network on two: Open MPI's TCP transport may take either for a
    # way to another node (its FAQ: "received unexpected process identifier")
    rows = _rows_with({f"n{i}": [["eth0", f"198.18.0.{i}/24"], ["docker0", "172.17.0.1/16"]]
                       + ([["ens3", "10.0.2.15/24"]] if i < 3 else []) for i in range(1, 5)})
    assert R.cluster_network(rows) == "198.18.0.0/24"
    found = {w["address"]: w for w in R.shared_addresses(rows)}
    assert set(found) == {"172.17.0.1", "10.0.2.15"}
    assert found["10.0.2.15"]["nodes"] == ["n1", "n2"] and found["10.0.2.15"]["interfaces"] == {"n1": "ens3", "n2": "ens3"}
    assert "n1, n2, n3, n4 all have the address 172.17.0.1 (docker0)" in found["172.17.0.1"]["problem"]
    assert found["172.17.0.1"]["fix"].endswith("--tcp-include 198.18.0.0/24")
    lines = P.format_preflight({"hosts": list(rows), "head": "head", "ok": True, "problems": [], "seconds": 1.0,
                                "nodes": {}, "clock": {}, "warnings": R.shared_addresses(rows)})
    assert any(ln.startswith("warning [address] ") and "--tcp-include 198.18.0.0/24" in ln for ln in lines), lines


def test_distinct_addresses_give_no_warning_and_two_networks_no_single_fix():
    rows = _rows_with({"n1": [["eth0", "198.18.0.1/24"]], "n2": [["eth0", "198.18.0.2/24"]]})
    assert R.shared_addresses(rows) == [] and R.cluster_network(rows) == "198.18.0.0/24"
    rows = _rows_with({"n1": [["eth0", "198.18.0.1/24"], ["br0", "10.9.0.1/24"]],
                       "n2": [["eth0", "198.19.0.2/24"], ["br0", "10.9.0.1/24"]]})
    assert R.cluster_network(rows) is None
    (w,) = R.shared_addresses(rows)
    assert w["fix"].endswith("--tcp-include NETWORK (CIDR)")
    # a node that could not say (no `ip` there): nothing guessed
    rows["n2"]["facts"]["addresses"] = None
    assert R.shared_addresses(rows) == [] and R.cluster_network(rows) is None


def test_a_node_without_an_rdma_port_up_is_named_for_transport_rdma():
    rows = {"n1": {"reachable": True, "facts": {"rdma": {"rxe0": {"1": "4: ACTIVE"}}}},
            "n2": {"reachable": True, "facts": {"rdma": {"mlx5_0": {"1": "1: DOWN"}}}},
            "n3": {"reachable": True, "facts": {"rdma": {}}},
            "n4": {"reachable": False, "facts": None}}
    found = {p["node"]: p for p in R.rdma_problems(rows)}
    assert set(found) == {"n2", "n3"}
    assert found["n2"]["problem"] == "--transport rdma: n2 has no RDMA port up (devices: mlx5_0 port 1 down)"
    assert found["n3"]["problem"].endswith("(devices: none)") and "--transport tcp" in found["n3"]["fix"]
    assert "rdma link add rxe0 type rxe" in found["n3"]["fix"] and found["n3"]["check"] == "rdma"
