"""What preflight finds wrong in the nodes' answers, each a pure rule over the facts (no I/O): a
node's name and resolution, its Python and memory, clock offsets, versions that differ between nodes,
software a node lacks, and addresses several nodes share. Each finding is a dict ``{node, check,
problem, fix}`` (:func:`problem`)."""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from clusterbench import __version__

#: |clock offset| beyond this (plus the measurement's uncertainty) is a finding
CLOCK_LIMIT_S = 0.5
#: less free memory than this on a node is a finding
LOW_MEMORY = 512 * 1024 * 1024


def problem(node: str, check: str, text: str, fix: str) -> dict[str, str]:
    return {"node": node, "check": check, "problem": text, "fix": fix}


def is_address(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host.split("@")[-1].strip("[]"))
        return True
    except ValueError:
        return False


def node_problems(host: str, f: dict[str, Any]) -> list[dict[str, str]]:
    """What one node's facts (:data:`~clusterbench.cluster.facts.SNIPPET`) show wrong on their own:
    its name against the hostfile's, its resolution of the others (forward and back), its Python,
    its free memory."""
    probs: list[dict[str, str]] = []
    me = str(f.get("hostname") or "")
    if is_address(host):
        probs.append(problem(host, "name", f"the hostfile names {me or 'a node'} by its address {host}: MPI's "
                              "daemons and the ranks report host names, which would not match the hostfile",
                              f"write {me or 'its host name'} in the hostfile, and {me or 'it'} with its address "
                              "in every node's /etc/hosts"))
    elif me.split(".")[0] != host.split(".")[0]:
        probs.append(problem(host, "name", f"{host} calls itself {me!r}: MPI's daemons and the ranks' reports would "
                              "not match the hostfile",
                              f"set its host name (on {host}: hostnamectl set-hostname {host}), or name it {me} "
                              "in the hostfile"))
    for name, r in (f.get("resolve") or {}).items():
        if not r.get("address"):
            probs.append(problem(host, "resolve", f"{host} cannot resolve {name}",
                                  f"add {name} to /etc/hosts on {host} (every node must know every node and the head)"))
        elif r.get("name") and r["name"].split(".")[0] != name.split(".")[0] and name != "localhost":
            probs.append(problem(host, "resolve", f"on {host}, {name} resolves to {r['address']}, which resolves back "
                                  f"to {r['name']}",
                                  f"make /etc/hosts on {host} name {r['address']} as {name} first"))
    if not f.get("python_ok"):
        probs.append(problem(host, "python", f"{host} has Python {f.get('python')}: clusterbench needs 3.10+",
                              f"install a newer python3 on {host}"))
    if f.get("mem_available") is not None and f["mem_available"] < LOW_MEMORY:
        probs.append(problem(host, "memory", f"{host} has {f['mem_available'] / 2**20:.0f} MiB free",
                              "stop what uses its memory before benchmarking"))
    return probs


def clock_problems(clock: dict[str, dict[str, float]]) -> list[dict[str, str]]:
    """A node whose clock is off the head's by more than :data:`CLOCK_LIMIT_S` beyond the measurement's
    uncertainty."""
    return [problem(h, "clock", f"{h}'s clock is {c['offset_s']:+.2f} s off the head's",
                     f"run NTP (chrony or systemd-timesyncd) on {h} and the head")
            for h, c in clock.items() if abs(c["offset_s"]) > CLOCK_LIMIT_S + c["uncertainty_s"]]


def cluster_network(rows: dict[str, dict[str, Any]]) -> str | None:
    """The network (CIDR) every node has the address the other nodes resolve its name to on, when it
    is one network for all; else None."""
    import ipaddress

    nets = set()
    facts = {h: r.get("facts") or {} for h, r in rows.items() if r.get("reachable")}
    for h, f in facts.items():
        seen = {(o.get("resolve") or {}).get(h, {}).get("address") for o in facts.values() if o is not f} - {None}
        mine = [c for _, c in f.get("addresses") or [] if c.split("/")[0] in seen]
        if len(mine) != 1:
            return None
        nets.add(str(ipaddress.ip_interface(mine[0]).network))
    return nets.pop() if len(nets) == 1 else None


def shared_addresses(rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Addresses that more than one node has: a NAT, container or VM bridge (docker0's 172.17.0.1,
    QEMU's user network 10.0.2.15, libvirt's virbr0 192.168.122.1). MPI's TCP transport may take one
    for a way to another node and reach the node itself: Open MPI hangs or says "received unexpected
    process identifier" (its FAQ: exclude such interfaces). Each with the nodes, their interfaces and
    the fix: the network the nodes reach each other on, given to ``--tcp-include``."""
    by_ip: dict[str, dict[str, str]] = {}
    for h, r in rows.items():
        for iface, cidr in (r.get("facts") or {}).get("addresses") or []:
            by_ip.setdefault(cidr.split("/")[0], {})[h] = iface
    net = cluster_network(rows)
    out = []
    for ip, nodes in by_ip.items():
        if len(nodes) < 2:
            continue
        ifaces = sorted(set(nodes.values()))
        out.append({"check": "address", "address": ip, "nodes": sorted(nodes), "interfaces": nodes,
                    "problem": f"{nodes_text(sorted(nodes))} all have the address {ip} ({', '.join(ifaces)}): "
                               "MPI's TCP transport may take it for a way to another node and reach the node "
                               "itself (a hang, or Open MPI's \"received unexpected process identifier\")",
                    "fix": f"give MPI the network the nodes reach each other on: --tcp-include {net}" if net else
                           "give MPI the network the nodes reach each other on: --tcp-include NETWORK (CIDR)"})
    return out


def rdma_problems(rows: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    """For ``--transport rdma`` across nodes: a node without an RDMA device whose port is ACTIVE
    (/sys/class/infiniband/DEV/ports/N/state), named before the launch (UCX would fail there with its
    own words, or fall back)."""
    probs = []
    for h, r in rows.items():
        f = r.get("facts") or {}
        if not r.get("reachable") or "rdma" not in f:  # unreachable: named already; an old node: not asked
            continue
        devs = f.get("rdma") or {}
        if any("ACTIVE" in str(state) for ports in devs.values() for state in ports.values()):
            continue
        seen = ", ".join(f"{d} port {p} {str(s).split(':')[-1].strip().lower()}" for d, ports in devs.items()
                         for p, s in ports.items()) or "none"
        probs.append(problem(h, "rdma", f"--transport rdma: {h} has no RDMA port up (devices: {seen})",
                             f"bring an RDMA port up on {h} (ibv_devinfo; soft-RoCE: modprobe rdma_rxe && rdma link "
                             "add rxe0 type rxe netdev IFACE), or use --transport tcp"))
    return probs


#: the names preflight gives the software it compares -> their names in facts.PACKAGES
_NEEDS = {"MPI": "MPI", "compiler": "C compiler", "BLAS": "BLAS"}


def differences(rows: dict[str, dict[str, Any]], digest: str | None) -> list[dict[str, str]]:
    """Versions that differ between the nodes (and the head for clusterbench), named per node; a node
    without the compiler, MPI or BLAS named with the command that installs it there. ``rows``:
    ``{host: {"reachable": bool, "facts": facts}}``."""
    from clusterbench.cluster.facts import missing_packages

    probs = []
    checks = (("clusterbench", lambda f: (f.get("installed") or {}).get("digest")),
              ("MPI", lambda f: f.get("mpirun")), ("compiler", lambda f: f.get("cc")),
              ("BLAS", lambda f: ",".join(f.get("blas") or []) or None))
    facts = {h: r["facts"] for h, r in rows.items() if r.get("reachable")}
    for what, get in checks:
        vals = {h: get(f) for h, f in facts.items()}
        if what == "clusterbench":
            for h, v in vals.items():
                inst = facts[h].get("installed") or {}
                if v is None:
                    probs.append(problem(h, "version", f"clusterbench is not installed on {h}",
                                          f"clusterbench cluster install --hosts {h}"))
                elif digest is not None and v != digest:
                    probs.append(problem(h, "version", f"{h} has another clusterbench ({inst.get('version')}, "
                                          f"digest {v}) than this head ({__version__}, digest {digest})",
                                          f"clusterbench cluster install --hosts {h}"))
            continue
        missing = [h for h, v in vals.items() if not v]
        for h in missing:
            _, cmd = missing_packages(facts[h], only=(_NEEDS[what],))
            probs.append(problem(h, "software", f"{h} has no {what}",
                                  f"install it on {h}: {cmd}" if cmd else
                                  "see `clusterbench cluster install` for the packages to install"))
        present = {h: v for h, v in vals.items() if v}
        if len(set(present.values())) > 1:
            common = statistics.mode(present.values())
            for h, v in present.items():
                if v != common:
                    probs.append(problem(h, "version", f"{h} has {what} {v!r}, the others {common!r}",
                                          f"install the same {what} on every node"))
    return probs


def nodes_text(nodes: Sequence[str], most: int = 6) -> str:
    return ", ".join(nodes) if len(nodes) <= most else f"{len(nodes)} nodes ({nodes[0]} ... {nodes[-1]})"
