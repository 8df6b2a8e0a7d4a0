"""What a virtual cluster is now: its members, links, shaping and what runs in it."""
from __future__ import annotations

import json
import os
from pathlib import Path

from clusterbench.launch.simcluster.state import SimCluster, SimNode, _check_prefix, _ip_json, _require_root, _run, list_namespaces, load


# --------------------------------------------------------------------------- status


def _qdisc_rate(ns: str, iface: str) -> tuple[int | None, str | None]:
    """(tbf rate in bit/s, netem delay) on ``iface`` in ``ns``, read from tc."""
    p = _run(["tc", "-n", ns, "-j", "qdisc", "show", "dev", iface], check=False)
    rate = delay = None
    try:
        qdiscs = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else []
    except ValueError:
        qdiscs = []
    for q in qdiscs:
        opts = q.get("options", {})
        if q.get("kind") == "tbf" and "rate" in opts:
            rate = int(opts["rate"]) * 8  # tc -j reports bytes/s
        if q.get("kind") == "netem" and opts.get("delay"):
            d = opts["delay"]
            delay = str(d.get("delay") if isinstance(d, dict) else d)
    return rate, delay


def _member_status(c: SimCluster, m: SimNode, existing: set[str], role: str) -> dict:
    row = {"name": m.name, "role": role, "namespace": m.namespace, "address": m.address, "iface": m.iface,
           "mtu": None, "mtu_expected": c.mtu, "rate_bps": None, "rate_expected_bps": c.rate_bps if role == "node"
           else None, "delay": None, "state": "down", "problems": []}
    probs = row["problems"]
    if m.namespace not in existing:
        probs.append(f"{m.namespace}: namespace missing")
        return row
    links = {ln.get("ifname"): ln for ln in _ip_json(["-n", m.namespace, "addr", "show"])}
    lo, link = links.get("lo"), links.get(m.iface)
    if lo is None or "UP" not in lo.get("flags", []):
        probs.append(f"{m.namespace}: loopback down")
    if link is None:
        probs.append(f"{m.namespace}: {m.iface} missing")
        return row
    row["mtu"] = link.get("mtu")
    if "UP" not in link.get("flags", []) or "LOWER_UP" not in link.get("flags", []):
        probs.append(f"{m.namespace}: {m.iface} is not up ({link.get('operstate')})")
    if row["mtu"] != c.mtu:
        probs.append(f"{m.namespace}: MTU {row['mtu']}, recorded {c.mtu}")
    if m.address not in [a.get("local") for a in link.get("addr_info", [])]:
        probs.append(f"{m.namespace}: address {m.address} missing on {m.iface}")
    if role == "node":
        row["rate_bps"], row["delay"] = _qdisc_rate(m.namespace, m.iface)
        if c.rate_bps and (row["rate_bps"] is None or abs(row["rate_bps"] - c.rate_bps) > 0.01 * c.rate_bps):
            probs.append(f"{m.namespace}: rate limit {row['rate_bps']} bit/s, recorded {c.rate_bps}")
        if not c.rate_bps and row["rate_bps"]:
            probs.append(f"{m.namespace}: unexpected rate limit {row['rate_bps']} bit/s")
        if c.delay and not row["delay"]:
            probs.append(f"{m.namespace}: netem delay missing")
    if not probs:
        row["state"] = "up"
    return row


def _status(c: SimCluster) -> dict:
    existing = set(list_namespaces(c.prefix))
    problems: list[str] = []
    bridge = {"namespace": c.bridge_namespace, "device": c.bridge, "mtu": None, "state": "down", "ports": []}
    if c.bridge_namespace not in existing:
        problems.append(f"{c.bridge_namespace}: namespace missing")
    else:
        links = {ln.get("ifname"): ln for ln in _ip_json(["-n", c.bridge_namespace, "link", "show"])}
        b = links.get(c.bridge)
        if b is None:
            problems.append(f"{c.bridge_namespace}: bridge {c.bridge} missing")
        else:
            bridge["mtu"] = b.get("mtu")
            if "UP" in b.get("flags", []):
                bridge["state"] = "up"
            else:
                problems.append(f"{c.bridge_namespace}: bridge {c.bridge} down")
            if b.get("mtu") != c.mtu:
                problems.append(f"{c.bridge_namespace}: bridge MTU {b.get('mtu')}, recorded {c.mtu}")
        for m in [c.head, *c.nodes]:
            port = links.get(m.peer)
            if port is None:
                problems.append(f"{c.bridge_namespace}: port {m.peer} missing")
                continue
            bridge["ports"].append(m.peer)
            if port.get("master") != c.bridge or "UP" not in port.get("flags", []):
                problems.append(f"{c.bridge_namespace}: port {m.peer} not up on {c.bridge}")
            if port.get("mtu") != c.mtu:
                problems.append(f"{c.bridge_namespace}: port {m.peer} MTU {port.get('mtu')}, recorded {c.mtu}")
    head = _member_status(c, c.head, existing, "head")
    nodes = [_member_status(c, m, existing, "node") for m in c.nodes]
    if c.machines:
        from clusterbench.launch import machines as M

        for row, m, pid_ns in [(head, c.head, False), *((r, m, True) for r, m in zip(nodes, c.nodes))]:
            if m.namespace in existing and M.holder_pid(m.namespace, pid_ns=pid_ns) is None:
                row["problems"].append(f"{m.name}: the machine is not running (its {'init' if pid_ns else 'holder'} "
                                       "is gone)")
                row["state"] = "down"
    for row in [head, *nodes]:
        problems += row["problems"]
    expected = set(c.namespaces())
    extra = sorted(existing - expected)
    if extra:
        problems.append("namespaces not in the state file: " + ", ".join(extra))
    if not c.machines and (not Path(c.agent).is_file() or not os.access(c.agent, os.X_OK)):
        problems.append(f"launch agent {c.agent} missing")
    return {"up": not problems, "spec": c.spec(), "subnet": c.subnet, "mtu": c.mtu, "rate_bps": c.rate_bps,
            "delay": c.delay, "agent": c.agent, "state_file": c.state_file, "created": c.created,
            "bridge": bridge, "head": head, "nodes": nodes, "problems": problems}


def status(*, prefix: str | None = None, state: str | os.PathLike | None = None) -> dict:
    """Check the recorded cluster against reality (namespaces, links up, MTU, addresses, qdiscs).

    Returns ``{"up": bool, "nodes": [{name, namespace, address, mtu, rate_bps, state: "up"|"down",
    problems}], "head": {...}, "bridge": {...}, "problems": [...], ...}``. With no state file,
    ``up`` is False, ``nodes`` is empty and ``leftovers`` lists namespaces with the prefix.
    """
    _require_root()
    prefix = _check_prefix(prefix)
    c = load(state, prefix=prefix)
    if c is None:
        left = list_namespaces(prefix)
        probs = [f"no sim-cluster recorded; leftovers: {', '.join(left)} (remove them with down)"] if left else []
        return {"up": False, "recorded": False, "nodes": [], "head": None, "bridge": None,
                "leftovers": left, "problems": probs}
    st = _status(c)
    st["recorded"] = True
    st["leftovers"] = []
    return st
