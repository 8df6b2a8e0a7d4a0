"""rps-single-queue and softirq-concentrated: which CPUs do a node's receive processing."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from clusterbench.doctor.rule import CannotTell, Hit, Rule, cannot, get, here, nic_item, per_nic, shown

RFS_ENTRIES = 32768  # the kernel's scaling.rst suggests 32768 for a moderately loaded server
SOFTIRQ_SHARE = 0.80   # one CPU handling this share of NET_RX (or NET_TX) softirqs under load is "concentrated"
SOFTIRQ_MIN = 1000     # fewer softirqs than this over the load: too little traffic to judge
SCALING = "the kernel's Documentation/networking/scaling.rst"
NETWORK = {"hpl": ("rmax",), "bw": ("bw", "bibw"), "multipair": ("pair_bandwidth", "aggregate_bandwidth")}


def cpu_mask(cpus: Sequence[int]) -> str:
    return format(sum(1 << c for c in cpus), "x")


def check_rps(ev: Mapping[str, Any]) -> Any:
    online = get(ev, "cpus.online")
    rfs = get(ev, "sysctl.net.core.rps_sock_flow_entries")

    def one(name: str, items: dict[str, Any]) -> Any:
        q, rps = nic_item(items, "rx_queues"), nic_item(items, "rps_cpus")
        if not q.get("readable"):
            return cannot(f"nic.{name}.rx_queues", q)
        if q["value"] != 1:
            return None  # several receive queues: the NIC spreads flows itself (RSS)
        if not rps.get("readable"):
            return cannot(f"nic.{name}.rps_cpus", rps)
        if any(cpus for cpus in (rps["value"] or {}).values()):
            return None
        if not online.get("readable"):
            return cannot("cpus.online", online)
        if len(online["value"] or []) < 2:
            return None  # one CPU: nowhere to steer to
        base = f"/sys/class/net/{name}/queues/rx-0"
        flow = nic_item(items, "rfs_flow_cnt")
        fix = [f"echo {cpu_mask(online['value'])} > {base}/rps_cpus"]
        undo = [f"echo 0 > {base}/rps_cpus"]
        ev_shown = [shown(f"nic.{name}.rx_queues", q), shown(f"nic.{name}.rps_cpus", rps), shown("cpus.online", online)]
        if rfs.get("readable") and not rfs["value"]:
            fix.append(f"sysctl -w net.core.rps_sock_flow_entries={RFS_ENTRIES}")
            undo.append(f"sysctl -w net.core.rps_sock_flow_entries={rfs['value']}")
            ev_shown.append(shown("sysctl.net.core.rps_sock_flow_entries", rfs))
        do = list(fix)  # what --fix runs: not the global sysctl this node cannot read (a namespace, a container)
        if not rfs.get("readable"):
            fix.append(f"sysctl -w net.core.rps_sock_flow_entries={RFS_ENTRIES}  # global: set it on the host")
        if flow.get("readable") and not flow["value"]:
            fix.append(f"echo {RFS_ENTRIES} > {base}/rps_flow_cnt")
            do.append(f"echo {RFS_ENTRIES} > {base}/rps_flow_cnt")
            undo.append(f"echo {flow['value']} > {base}/rps_flow_cnt")
            ev_shown.append(shown(f"nic.{name}.rfs_flow_cnt", flow))
        return Hit(f"{name}: one receive queue and RPS off: every packet's protocol work lands on the CPU "
                   "that takes the interrupt", ev_shown, fix, undo, apply=here(do, undo))

    return per_nic(ev, one)


def check_softirqs(ev: Mapping[str, Any]) -> Any:
    """``softirqs.load``: NET_RX/NET_TX per-CPU deltas of /proc/softirqs over a load (``doctor --during``)."""
    it = get(ev, "softirqs.load")
    if not it.get("readable"):
        return CannotTell("needs --during mpi (or hpl): NET_RX/NET_TX softirq deltas must be read while a network "
                          "benchmark runs" if it.get("why", "").endswith("not gathered") else
                          f"softirqs.load unreadable ({it.get('source')}): {it.get('why')}")
    v = it["value"] or {}
    online = get(ev, "cpus.online")
    cpus = set(online.get("value") or []) if online.get("readable") else None
    hits, quiet = [], []
    for kind in ("NET_RX", "NET_TX"):
        deltas = list(v.get(kind) or [])
        if cpus is not None:
            deltas = [d for c, d in enumerate(deltas) if c in cpus]
        total = sum(deltas)
        if len(deltas) < 2:
            return None  # one CPU: nowhere else to go
        if total < SOFTIRQ_MIN:
            quiet.append(f"{kind} {total}")
            continue
        top = max(range(len(deltas)), key=lambda c: deltas[c])
        share = deltas[top] / total
        if share >= SOFTIRQ_SHARE:
            hits.append((kind, top, share, total))
    if hits:
        desc = "; ".join(f"{k}: {share:.0%} of {total} on CPU {top}" for k, top, share, total in hits)
        return Hit(f"network softirqs concentrated during {v.get('load')} over {v.get('seconds', 0):.1f} s ({desc})",
                   [shown("softirqs.load", it)],
                   ["steer receive processing to all CPUs: see rule rps-single-queue (rps_cpus, RFS), or spread the "
                    "NIC's interrupts (/proc/irq/N/smp_affinity, several receive queues with ethtool -L)"], [])
    if len(quiet) == 2:  # NET_TX alone is often quiet (raised only when a send queue restarts): judge on NET_RX
        return CannotTell(f"too little network work during {v.get('load')} to judge ({', '.join(quiet)} softirqs; "
                          f"fewer than {SOFTIRQ_MIN})")
    return None


RULES = [
    Rule("rps-single-queue", "RPS/RFS off on a NIC with a single receive queue",
         ("nic.*.rx_queues", "nic.*.rps_cpus", "nic.*.rfs_flow_cnt", "cpus.online",
          "sysctl.net.core.rps_sock_flow_entries"), check_rps,
         "all receive processing (NET_RX softirqs) on one CPU: with one receive queue and no RPS the protocol "
         f"work runs on the CPU that takes the interrupt ({SCALING}): that CPU is lost to the "
         "ranks and network bandwidth is capped by one core (HPL across nodes, bw, multipair)",
         "steer receive processing to all CPUs (rps_cpus) and enable RFS", "write the previous mask and counts back",
         "run multipair --hosts {hosts}", figures=NETWORK, order=80),
    Rule("softirq-concentrated", "NET_RX/NET_TX softirqs concentrated on one CPU during network load",
         ("softirqs.load",), check_softirqs,
         "NET_RX softirqs all on one CPU under load (without RSS or RPS one CPU does the receive processing, "
         f"{SCALING}): that CPU is lost to the ranks",
         "RPS/RFS, more receive queues or IRQ affinity", "write the previous masks back",
         "run hpl --hosts {hosts}", needs_load=True, figures=NETWORK, order=160),
]
