"""mtu-mismatch and jumbo-unused: the nodes' MTUs."""
from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from clusterbench.doctor.rule import CannotTell, Hit, Rule, cannot, here, nic_item, nics, per_nic, shown

JUMBO_MTU = 9000


def check_mtu_mismatch(evs: Mapping[str, Mapping[str, Any]]) -> Any:
    if len(evs) < 2:
        return CannotTell("a cluster rule: needs --hosts with two or more nodes")
    by_name: dict[str, dict[str, dict[str, Any]]] = {}
    for node, ev in evs.items():
        for name, items in nics(ev).items():
            it = nic_item(items, "mtu")
            if it.get("readable"):
                by_name.setdefault(name, {})[node] = it
    common = {n: d for n, d in by_name.items() if len(d) >= 2}
    if not common:
        return CannotTell("no interface name is up with a readable MTU on two or more nodes")
    hits = []
    for name, d in sorted(common.items()):
        counts = Counter(it["value"] for it in d.values())
        if len(counts) < 2:
            continue
        top = max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]  # most common; a tie: the largest
        odd = sorted(n for n, it in d.items() if it["value"] != top)
        values = ", ".join(f"{n}={it['value']}" for n, it in sorted(d.items()))
        hits.append(Hit(f"{name}: MTU differs between nodes ({values}); most nodes use {top}",
                        [{"key": f"nic.{name}.mtu", "value": {n: it["value"] for n, it in sorted(d.items())},
                          "source": f"/sys/class/net/{name}/mtu on each node"}],
                        [f"on {n}: ip link set dev {name} mtu {top}" for n in odd],
                        [f"on {n}: ip link set dev {name} mtu {d[n]['value']}" for n in odd], node=",".join(odd),
                        apply={n: {"do": [f"ip link set dev {name} mtu {top}"],
                                   "undo": [f"ip link set dev {name} mtu {d[n]['value']}"]} for n in odd}))
    return hits or None


def check_jumbo(ev: Mapping[str, Any]) -> Any:
    def one(name: str, items: dict[str, Any]) -> Any:
        mtu, mx = nic_item(items, "mtu"), nic_item(items, "max_mtu")
        if not mtu.get("readable"):
            return cannot(f"nic.{name}.mtu", mtu)
        if mtu["value"] >= JUMBO_MTU:
            return None
        if not mx.get("readable"):
            return cannot(f"nic.{name}.max_mtu", mx)
        if (mx["value"] or 0) < JUMBO_MTU:
            return None
        return Hit(f"{name}: MTU {mtu['value']} although the NIC takes up to {mx['value']}",
                   [shown(f"nic.{name}.mtu", mtu), shown(f"nic.{name}.max_mtu", mx)],
                   [f"ip link set dev {name} mtu {JUMBO_MTU}  # on every node, and the switch must pass jumbo frames"],
                   [f"ip link set dev {name} mtu {mtu['value']}"], severity="info",
                   apply=here([f"ip link set dev {name} mtu {JUMBO_MTU}"], [f"ip link set dev {name} mtu {mtu['value']}"]))

    return per_nic(ev, one)


RULES = [
    Rule("mtu-mismatch", "MTU differs between nodes", ("nic.*.mtu",), check_mtu_mismatch,
         "frames larger than a node's MTU are dropped or fragmented: large messages stall or time out, and "
         "bandwidth between the nodes is that of the smaller MTU", "set the common MTU on the odd nodes",
         "set the previous MTU back", "run pingpong --hosts {hosts}", scope="cluster",
         figures={"pingpong": ("latency", "bandwidth"), "bw": ("bw", "bibw"), "tcp": ("throughput",)}, order=100),
    Rule("jumbo-unused", "jumbo frames possible but unused", ("nic.*.mtu", "nic.*.max_mtu"), check_jumbo,
         "MTU 1500 needs six times the frames (and interrupts) of 9000 for the same bytes, so more CPU time per "
         "byte between the nodes", "ip link set dev IF mtu 9000 on every node (the switch too)",
         "ip link set dev IF mtu with the previous value", "run bw --hosts {hosts}", severity="info",
         figures={"bw": ("bw", "bibw"), "tcp": ("throughput",)}, order=110),
]
