"""What holds a node or a cluster back: rules over the evidence of ``probe.evidence`` (pure, no I/O).

A rule is data: one :class:`Rule` entry in :data:`RULES` says which evidence it reads, whether that
evidence must be read under load, why it matters and to which figures, the fix and its undo, the
benchmark that verifies the fix, and whether the fix needs a reboot. Its ``check`` looks at one
node's evidence (``scope="node"``) or at every node's (``scope="cluster"``) and returns

* ``None``: the rule passed;
* a :class:`Hit` (or a list of them, e.g. one per NIC): a finding, with the evidence shown (value
  and source) and the fix and undo as commands built from the values read, so the undo restores
  exactly what was there; ``apply`` holds the shell commands ``doctor --fix`` may run, per node
  (``None`` for the node the finding is about), when the fix is a setting that can be changed and
  changed back at run time. A fix that is advice (a reboot, a kernel, cooling, another host) has
  no ``apply``: it is printed, never run;
* :class:`CannotTell`: the evidence could not be read (or needs load, or more nodes), with why.
  A rule is never silently "ok" when it could not look.

:func:`evaluate` applies the rules to ``{node: evidence}`` and sorts every (rule, node) into
findings, cannot-tell and passed.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

#: the Open MPI documentation's TCP values for 10G/40G Ethernet ("Are there any Linux kernel TCP
#: parameters that I should set?", docs.open-mpi.org/en/main/tuning-apps/networking/tcp.html, the
#: former FAQ www.open-mpi.org/faq/?category=tcp that seed 000 §5.5.5 applied)
OMPI_FAQ_TCP: dict[str, int | tuple[int, int, int]] = {
    "net.core.rmem_max": 16777216,
    "net.core.wmem_max": 16777216,
    "net.ipv4.tcp_rmem": (4096, 87380, 16777216),
    "net.ipv4.tcp_wmem": (4096, 65536, 16777216),
}
OMPI_FAQ_CITE = ("Open MPI docs, TCP: \"Are there any Linux kernel TCP parameters that I should set?\" "
                 "(docs.open-mpi.org/en/main/tuning-apps/networking/tcp.html; formerly www.open-mpi.org/faq/?category=tcp)")
STEAL_THRESHOLD_PCT = 5.0
HOT_C = 80.0
JUMBO_MTU = 9000
RFS_ENTRIES = 32768  # the kernel's scaling.rst suggests 32768 for a moderately loaded server
SOFTIRQ_SHARE = 0.80   # one CPU handling this share of NET_RX (or NET_TX) softirqs under load is "concentrated"
SOFTIRQ_MIN = 1000     # fewer softirqs than this over the load: too little traffic to judge


@dataclass(frozen=True)
class CannotTell:
    why: str


@dataclass
class Hit:
    """A rule fired: ``summary`` in one sentence, the evidence shown, the fix and its undo."""
    summary: str
    evidence: list[dict[str, Any]]
    fix: list[str] = field(default_factory=list)
    undo: list[str] = field(default_factory=list)
    severity: str | None = None  # None: the rule's own
    node: str | None = None      # cluster rules: which node(s) the finding is about
    #: what ``doctor --fix`` runs: {node or None (this finding's node): {"do": [sh], "undo": [sh]}}
    apply: dict[str | None, dict[str, list[str]]] | None = None


def _here(do: Sequence[str], undo: Sequence[str]) -> dict[str | None, dict[str, list[str]]]:
    """``apply`` for a fix on the finding's own node (comments after ``#`` dropped)."""
    def bare(cmds: Sequence[str]) -> list[str]:
        return [c.split("  #")[0].strip() for c in cmds]
    return {None: {"do": bare(do), "undo": bare(undo)}}



@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    reads: tuple[str, ...]          # evidence keys; ``nic.*.KEY`` for per-NIC ones
    check: Callable[[Any], Any]     # node: evidence -> Hit | [Hit] | CannotTell | None; cluster: {node: evidence} -> same
    why: str                        # why it matters, and to which figures
    fix: str                        # the fix in words (the finding carries the commands)
    undo: str
    verify: str                     # the benchmark that verifies the fix ({hosts} filled in)
    severity: str = "warn"
    needs_load: bool = False
    needs_reboot: bool = False
    scope: str = "node"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "reads": list(self.reads), "why": self.why, "fix": self.fix,
                "undo": self.undo, "verify": self.verify, "severity": self.severity, "needs_load": self.needs_load,
                "needs_reboot": self.needs_reboot, "scope": self.scope}


# --------------------------------------------------------------------------- evidence access

def get(ev: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A node-wide item, or an unreadable one when it was not gathered."""
    it = (ev.get("items") or {}).get(key)
    if it is None:
        return {"value": None, "source": key, "readable": False, "why": f"{key} was not gathered"}
    return it


def shown(key: str, it: Mapping[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": it.get("value"), "source": it.get("source")}


def _cannot(key: str, it: Mapping[str, Any]) -> CannotTell:
    return CannotTell(f"{key} unreadable ({it.get('source')}): {it.get('why') or 'no reason given'}")


def _nics(ev: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(ev.get("nics") or {})


def _per_nic(ev: Mapping[str, Any], one: Callable[[str, dict[str, Any]], Any]) -> Any:
    """Apply ``one(ifname, nic_items)`` to every NIC: hits if any, else cannot-tell if any, else None."""
    nics = _nics(ev)
    if not nics:
        return CannotTell("no network interface that is up besides lo")
    hits: list[Hit] = []
    cannot: list[str] = []
    for name, items in sorted(nics.items()):
        r = one(name, items)
        if isinstance(r, Hit):
            hits.append(r)
        elif isinstance(r, CannotTell):
            cannot.append(f"{name}: {r.why}")
    if hits:
        return hits
    if cannot:
        return CannotTell("; ".join(cannot))
    return None


def _nic_item(items: Mapping[str, Any], key: str) -> dict[str, Any]:
    return items.get(key) or {"value": None, "source": key, "readable": False, "why": f"{key} was not gathered"}


# --------------------------------------------------------------------------- node rules

def check_tcp_buffers(ev: Mapping[str, Any]) -> Any:
    """Values below the FAQ's are raised, never lowered; one that is read-only here (a global value seen
    from a network namespace) is advice for the host, not something ``--fix`` runs."""
    low, show, fix, undo, unread = [], [], [], [], []
    do, do_undo = [], []
    for name, want in OMPI_FAQ_TCP.items():
        it = get(ev, f"sysctl.{name}")
        if not it.get("readable"):
            unread.append(f"{name} ({it.get('why')})")
            continue
        have = it["value"]
        if isinstance(want, tuple):
            have_t = tuple(have) if isinstance(have, (list, tuple)) else (have,)
            if len(have_t) != 3:
                unread.append(f"{name} holds {have!r}, not three numbers")
                continue
            if any(h < w for h, w in zip(have_t, want)):
                new = tuple(max(h, w) for h, w in zip(have_t, want))  # never lower a value
                cmd, back = f"sysctl -w {name}='{' '.join(map(str, new))}'", f"sysctl -w {name}='{' '.join(map(str, have_t))}'"
            else:
                continue
        elif have < want:
            cmd, back = f"sysctl -w {name}={want}", f"sysctl -w {name}={have}"
        else:
            continue
        low.append(name)
        show.append(shown(f"sysctl.{name}", it))
        if it.get("read_only"):
            fix.append(f"{cmd}  # on the host: global, read-only in this network namespace")
        else:
            fix.append(cmd)
            undo.append(back)
            do.append(cmd)
            do_undo.append(back)
    if low:
        wants = ", ".join(f"{n} {' '.join(map(str, w)) if isinstance(w, tuple) else w}" for n, w in OMPI_FAQ_TCP.items())
        return Hit(f"{', '.join(low)} below the Open MPI FAQ values ({wants})", show, fix, undo,
                   apply=_here(do, do_undo) if do else None)
    if unread:
        return CannotTell("unreadable: " + "; ".join(unread))
    return None


def check_governor(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "cpufreq.governors")
    if not it.get("readable"):
        return _cannot("cpufreq.governors", it)
    govs: dict[str, list[int]] = it["value"] or {}
    slow = {g: c for g, c in govs.items() if g != "performance"}
    if not slow:
        return None
    path = "/sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor"
    undo = [f"echo {g} > {path.format(c)}" for g, cpus in sorted(slow.items()) for c in cpus]
    if len(govs) == 1:  # one governor everywhere: the loop form
        undo = [f"for f in {path.format('*')}; do echo {next(iter(govs))} > $f; done"]
    desc = ", ".join(f"{g} on {len(c)} CPU{'s' if len(c) != 1 else ''}" for g, c in sorted(slow.items()))
    fix = [f"for f in {path.format('*')}; do echo performance > $f; done"]
    return Hit(f"CPU frequency governor is not performance ({desc})", [shown("cpufreq.governors", it)], fix, undo,
               apply=_here(fix, undo))


def check_boost(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "cpufreq.boost")
    if not it.get("readable"):
        return _cannot("cpufreq.boost", it)
    if not it["value"]:
        return None
    src = str(it.get("source"))
    if "no_turbo" in src:
        fix, undo = "echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo", \
            "echo 0 > /sys/devices/system/cpu/intel_pstate/no_turbo"
    else:
        fix, undo = "echo 0 > /sys/devices/system/cpu/cpufreq/boost", "echo 1 > /sys/devices/system/cpu/cpufreq/boost"
    return Hit("turbo/boost is on: the clock depends on temperature and on how many cores are busy",
               [shown("cpufreq.boost", it)], [fix], [undo], apply=_here([fix], [undo]))


def check_preemption(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "kernel.preemption")
    if not it.get("readable"):
        return _cannot("kernel.preemption", it)
    model = str(it["value"]).lower()
    if model in ("none", "no forced preemption"):
        return None
    src = str(it.get("source"))
    if "debug" in src:  # PREEMPT_DYNAMIC with debugfs: switchable at run time
        fix = ["echo none > /sys/kernel/debug/sched/preempt"]
        undo = [f"echo {model} > /sys/kernel/debug/sched/preempt"]
    elif "cmdline" in src:  # PREEMPT_DYNAMIC: the boot parameter decides
        fix = [f"replace preempt={model} by preempt=none in GRUB_CMDLINE_LINUX (/etc/default/grub)", "update-grub",
               "reboot"]
        undo = [f"put back preempt={model} in GRUB_CMDLINE_LINUX (/etc/default/grub)", "update-grub", "reboot"]
    else:  # fixed at build time
        fix = ["rebuild the kernel with CONFIG_PREEMPT_NONE=y (Duffy 2020, §5.5.1), install it", "reboot"]
        undo = ["boot the previous kernel again (kept in the boot menu)"]
    sev = "info" if model == "voluntary" else "warn"
    return Hit(f"kernel preemption model is {model}, not none (no forced preemption)", [shown("kernel.preemption", it)],
               fix, undo, severity=sev, apply=_here(fix, undo) if "debug" in src else None)


def check_thp(ev: Mapping[str, Any]) -> Any:
    en, de = get(ev, "thp.enabled"), get(ev, "thp.defrag")
    if not en.get("readable"):
        return _cannot("thp.enabled", en)
    path = "/sys/kernel/mm/transparent_hugepage"
    if en["value"] == "never":
        return Hit("transparent huge pages are off: large arrays pay a TLB miss every 4 KiB page",
                   [shown("thp.enabled", en)], [f"echo madvise > {path}/enabled"], [f"echo never > {path}/enabled"],
                   severity="info", apply=_here([f"echo madvise > {path}/enabled"], [f"echo never > {path}/enabled"]))
    if en["value"] == "always":
        if not de.get("readable"):
            return _cannot("thp.defrag", de)
        if de["value"] == "always":
            return Hit("THP always with synchronous defrag: page faults stall while the kernel compacts memory",
                       [shown("thp.enabled", en), shown("thp.defrag", de)],
                       [f"echo madvise > {path}/defrag"], [f"echo always > {path}/defrag"],
                       apply=_here([f"echo madvise > {path}/defrag"], [f"echo always > {path}/defrag"]))
    return None


def check_swap(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "swap")
    if not it.get("readable"):
        return _cannot("swap", it)
    v = it["value"] or {}
    if (v.get("used_kb") or 0) <= 0:
        return None
    return Hit(f"{v['used_kb'] / 1024:.0f} MiB of swap in use (of {v.get('total_kb', 0) / 1024:.0f} MiB)",
               [shown("swap", it)], ["swapoff -a  # needs that much free memory; pages come back into RAM"],
               ["swapon -a"], apply=_here(["swapoff -a"], ["swapon -a"]))


def check_numa_balancing(ev: Mapping[str, Any]) -> Any:
    nb, nodes = get(ev, "sysctl.kernel.numa_balancing"), get(ev, "numa.nodes")
    if not nb.get("readable"):
        return _cannot("sysctl.kernel.numa_balancing", nb)
    if not nb["value"]:
        return None
    if not nodes.get("readable"):
        return _cannot("numa.nodes", nodes)
    if (nodes["value"] or 0) < 2:
        return None
    return Hit(f"automatic NUMA balancing is on ({nb['value']}) on a node with {nodes['value']} NUMA nodes",
               [shown("sysctl.kernel.numa_balancing", nb), shown("numa.nodes", nodes)],
               ["sysctl -w kernel.numa_balancing=0"], [f"sysctl -w kernel.numa_balancing={nb['value']}"],
               apply=_here(["sysctl -w kernel.numa_balancing=0"], [f"sysctl -w kernel.numa_balancing={nb['value']}"]))


def _cpu_mask(cpus: Sequence[int]) -> str:
    return format(sum(1 << c for c in cpus), "x")


def check_rps(ev: Mapping[str, Any]) -> Any:
    online = get(ev, "cpus.online")
    rfs = get(ev, "sysctl.net.core.rps_sock_flow_entries")

    def one(name: str, items: dict[str, Any]) -> Any:
        q, rps = _nic_item(items, "rx_queues"), _nic_item(items, "rps_cpus")
        if not q.get("readable"):
            return _cannot(f"nic.{name}.rx_queues", q)
        if q["value"] != 1:
            return None  # several receive queues: the NIC spreads flows itself (RSS)
        if not rps.get("readable"):
            return _cannot(f"nic.{name}.rps_cpus", rps)
        if any(cpus for cpus in (rps["value"] or {}).values()):
            return None
        if not online.get("readable"):
            return _cannot("cpus.online", online)
        if len(online["value"] or []) < 2:
            return None  # one CPU: nowhere to steer to
        base = f"/sys/class/net/{name}/queues/rx-0"
        flow = _nic_item(items, "rfs_flow_cnt")
        fix = [f"echo {_cpu_mask(online['value'])} > {base}/rps_cpus"]
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
                   "that takes the interrupt", ev_shown, fix, undo, apply=_here(do, undo))

    return _per_nic(ev, one)


def check_coalescing(ev: Mapping[str, Any]) -> Any:
    def one(name: str, items: dict[str, Any]) -> Any:
        it = _nic_item(items, "coalescing")
        if not it.get("readable"):
            return _cannot(f"nic.{name}.coalescing", it)
        c = it["value"] or {}
        adaptive, usecs, frames = c.get("adaptive_rx"), c.get("rx_usecs"), c.get("rx_frames")
        if adaptive is None and usecs is None:
            return CannotTell(f"{it.get('source')} reports neither adaptive-rx nor rx-usecs for {name}")
        if adaptive or (usecs or 0) > 0 or (frames or 0) > 1:
            return None
        old = [f"adaptive-rx {'on' if adaptive else 'off'}" if adaptive is not None else "",
               f"rx-usecs {usecs}" if usecs is not None else "", f"rx-frames {frames}" if frames is not None else ""]
        fix = f"ethtool -C {name} adaptive-rx on" if adaptive is not None else f"ethtool -C {name} rx-usecs 50"
        undo = f"ethtool -C {name} {' '.join(o for o in old if o)}"
        return Hit(f"{name}: interrupt coalescing off (adaptive-rx {'off' if adaptive is False else 'n/a'}, "
                   f"rx-usecs {usecs}): one interrupt per received frame",
                   [shown(f"nic.{name}.coalescing", it)], [fix], [undo], apply=_here([fix], [undo]))

    return _per_nic(ev, one)


def check_jumbo(ev: Mapping[str, Any]) -> Any:
    def one(name: str, items: dict[str, Any]) -> Any:
        mtu, mx = _nic_item(items, "mtu"), _nic_item(items, "max_mtu")
        if not mtu.get("readable"):
            return _cannot(f"nic.{name}.mtu", mtu)
        if mtu["value"] >= JUMBO_MTU:
            return None
        if not mx.get("readable"):
            return _cannot(f"nic.{name}.max_mtu", mx)
        if (mx["value"] or 0) < JUMBO_MTU:
            return None
        return Hit(f"{name}: MTU {mtu['value']} although the NIC takes up to {mx['value']}",
                   [shown(f"nic.{name}.mtu", mtu), shown(f"nic.{name}.max_mtu", mx)],
                   [f"ip link set dev {name} mtu {JUMBO_MTU}  # on every node, and the switch must pass jumbo frames"],
                   [f"ip link set dev {name} mtu {mtu['value']}"], severity="info",
                   apply=_here([f"ip link set dev {name} mtu {JUMBO_MTU}"], [f"ip link set dev {name} mtu {mtu['value']}"]))

    return _per_nic(ev, one)


def check_steal(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "steal")
    if not it.get("readable"):
        return _cannot("steal", it)
    pct = (it["value"] or {}).get("percent")
    if pct is None:
        return CannotTell(f"no CPU time counted in {it.get('source')}")
    if pct <= STEAL_THRESHOLD_PCT:
        return None
    since = "since boot" if (it["value"] or {}).get("since") == "boot" else f"over {it['value'].get('interval_s')} s"
    return Hit(f"the hypervisor took {pct:.1f}% of this VM's CPU time {since} (threshold {STEAL_THRESHOLD_PCT:g}%)",
               [shown("steal", it), shown("hypervisor", get(ev, "hypervisor"))],
               ["ask for dedicated (pinned) vCPUs or a less loaded host; nothing inside the VM fixes it"], [])


def check_thermal(ev: Mapping[str, Any]) -> Any:
    it = get(ev, "thermal")
    if not it.get("readable"):
        return _cannot("thermal", it)
    hot = [z for z in it["value"] or [] if (z.get("temp_c") or 0) > HOT_C]
    if not hot:
        return None
    desc = ", ".join(f"{z['zone']} ({z.get('type')}) {z['temp_c']:.1f} °C" for z in hot)
    return Hit(f"above {HOT_C:g} °C at rest: {desc}", [shown("thermal", it)],
               [("improve cooling (heatsink, fan, airflow); on a Raspberry Pi `vcgencmd get_throttled` says "
                 "whether it has throttled")], [])


def check_openblas(ev: Mapping[str, Any]) -> Any:
    from clusterbench.probe.blas import choose_coretype  # pure

    it, isa = get(ev, "blas.openblas_core"), get(ev, "cpu.isa")
    if not it.get("readable"):
        return _cannot("blas.openblas_core", it)
    v = it["value"] or {}
    if not v.get("path"):
        return None  # no OpenBLAS on this node
    if not v.get("core"):
        return CannotTell(f"{v['path']} reports no core name (not a DYNAMIC_ARCH OpenBLAS?)")
    if not isa.get("readable"):
        return _cannot("cpu.isa", isa)
    best = choose_coretype(set((isa["value"] or {}).get("isa") or []), (isa["value"] or {}).get("vendor"), v["core"])
    if best is None:
        return None
    return Hit(f"OpenBLAS runs its {v['core']} kernels on a CPU that has {best}'s instructions",
               [shown("blas.openblas_core", it), {"key": "cpu.isa", "value": (isa["value"] or {}).get("model_name"),
                                                  "source": isa.get("source")}],
               [f"export OPENBLAS_CORETYPE={best}  # clusterbench's own runs do this with --openblas-coretype auto"],
               ["unset OPENBLAS_CORETYPE"])


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


# --------------------------------------------------------------------------- cluster rules

def check_mtu_mismatch(evs: Mapping[str, Mapping[str, Any]]) -> Any:
    if len(evs) < 2:
        return CannotTell("a cluster rule: needs --hosts with two or more nodes")
    by_name: dict[str, dict[str, dict[str, Any]]] = {}
    for node, ev in evs.items():
        for name, items in _nics(ev).items():
            it = _nic_item(items, "mtu")
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


def check_software_differs(evs: Mapping[str, Mapping[str, Any]]) -> Any:
    from clusterbench.probe.cluster import diff  # pure

    if len(evs) < 2:
        return CannotTell("a cluster rule: needs --hosts with two or more nodes")
    sw = {n: get(ev, "software") for n, ev in evs.items()}
    readable = {n: it for n, it in sw.items() if it.get("readable")}
    if len(readable) < 2:
        return CannotTell("software unreadable on all but one node: "
                          + "; ".join(f"{n}: {it.get('why')}" for n, it in sw.items() if not it.get("readable")))
    diffs = diff({n: {"environment": dict(it["value"] or {})} for n, it in readable.items()})
    keep = [d for d in diffs if d["key"] in ("environment.kernel", "environment.mpi", "environment.blas")]
    cores = {n: (get(ev, "blas.openblas_core").get("value") or {}).get("core") for n, ev in evs.items()
             if get(ev, "blas.openblas_core").get("readable")}
    if len({c for c in cores.values()}) > 1:
        keep.append({"what": "OpenBLAS core type", "key": "blas.openblas_core", "values": cores,
                     "why": "OpenBLAS picks different kernels per node: DGEMM/HPL speed differs"})
    hits = [Hit(f"{d['what']} differ: " + ", ".join(f"{n}={v}" for n, v in d["values"].items()) + f" ({d['why']})",
                [{"key": d["key"], "value": d["values"], "source": "probe of each node"}],
                [("install the same versions on every node (same packages or the same modules), or pin the "
                  "library with LD_LIBRARY_PATH")], [], node=",".join(d["values"])) for d in keep]
    return hits or None


# --------------------------------------------------------------------------- the registry

RULES: list[Rule] = [
    Rule("tcp-buffers", "TCP buffer sysctls below the Open MPI FAQ values",
         ("sysctl.net.core.rmem_max", "sysctl.net.core.wmem_max", "sysctl.net.ipv4.tcp_rmem", "sysctl.net.ipv4.tcp_wmem"),
         check_tcp_buffers,
         "small socket buffers cap TCP bandwidth (MPI over the tcp BTL, run tcp/bw/pingpong's large messages, "
         f"HPL across nodes); values from {OMPI_FAQ_CITE}",
         "sysctl -w each one to the FAQ value (persist in /etc/sysctl.d/)", "sysctl -w the previous values",
         "run bw --hosts {hosts} --transport tcp"),
    Rule("cpu-governor", "CPU frequency governor not performance", ("cpufreq.governors",), check_governor,
         "powersave/ondemand/schedutil clock down between messages and ramp up under load: lower and noisier "
         "compute figures (fpu, peak, dgemm, HPL) and higher small-message latency",
         "set the performance governor on every CPU", "set the previous governors back", "run hpl"),
    Rule("cpu-boost", "turbo/boost on", ("cpufreq.boost",), check_boost,
         "with boost the clock depends on temperature and busy cores: compute figures are higher but vary between "
         "runs and nodes, so an A/B comparison needs more repeats", "switch boost off for reproducible comparisons",
         "switch boost on again", "run fpu", severity="info"),
    Rule("preemption", "kernel preemption model not 'none'", ("kernel.preemption",), check_preemption,
         "a preemptible kernel switches away from ranks more often; Duffy (2020, §5.5.1) measured a higher HPL Rmax "
         "with a no-forced-preemption kernel than with Ubuntu's voluntary one",
         "boot with no forced preemption (preempt=none, or a kernel built with CONFIG_PREEMPT_NONE)",
         "boot the previous model", "run hpl --hosts {hosts}", needs_reboot=True),
    Rule("thp", "transparent huge pages off, or always with synchronous defrag", ("thp.enabled", "thp.defrag"),
         check_thp, "4 KiB pages make large arrays (stream, membw, dgemm, HPL) miss the TLB; synchronous defrag "
         "stalls page faults while memory is compacted", "madvise (or always without synchronous defrag)",
         "write the previous mode back", "run stream"),
    Rule("swap-in-use", "swap in use", ("swap",), check_swap,
         "pages of a benchmark or of the ranks may sit on disk: memory figures and HPL collapse when touched",
         "free memory, then swapoff -a", "swapon -a", "run membw"),
    Rule("numa-balancing", "automatic NUMA balancing on a multi-NUMA node",
         ("sysctl.kernel.numa_balancing", "numa.nodes"), check_numa_balancing,
         "the kernel migrates pages under pinned ranks and unmaps pages to sample them: memory bandwidth and "
         "latency figures vary", "sysctl -w kernel.numa_balancing=0", "sysctl -w the previous value", "run stream"),
    Rule("rps-single-queue", "RPS/RFS off on a NIC with a single receive queue",
         ("nic.*.rx_queues", "nic.*.rps_cpus", "nic.*.rfs_flow_cnt", "cpus.online",
          "sysctl.net.core.rps_sock_flow_entries"), check_rps,
         "all receive processing (NET_RX softirqs) on one CPU, as Duffy (2020, §5.5.3) found: that CPU is lost to the "
         "ranks and network bandwidth is capped by one core (HPL across nodes, bw, multipair)",
         "steer receive processing to all CPUs (rps_cpus) and enable RFS", "write the previous mask and counts back",
         "run multipair --hosts {hosts}"),
    Rule("coalescing-off", "interrupt coalescing off", ("nic.*.coalescing",), check_coalescing,
         "one interrupt per frame costs CPU time on busy links (Duffy 2020, §5.5.2: adaptive-rx raised HPL Rmax); "
         "coalescing trades a little small-message latency for it", "ethtool -C IF adaptive-rx on",
         "ethtool -C IF with the previous values", "run hpl --hosts {hosts}, then run pingpong --hosts {hosts}"),
    Rule("mtu-mismatch", "MTU differs between nodes", ("nic.*.mtu",), check_mtu_mismatch,
         "frames larger than a node's MTU are dropped or fragmented: large messages stall or time out, and "
         "bandwidth between the nodes is that of the smaller MTU", "set the common MTU on the odd nodes",
         "set the previous MTU back", "run pingpong --hosts {hosts}", scope="cluster"),
    Rule("jumbo-unused", "jumbo frames possible but unused", ("nic.*.mtu", "nic.*.max_mtu"), check_jumbo,
         "MTU 1500 needs six times the frames (and interrupts) of 9000 for the same bytes; Duffy (2020, §5.5.4) raised "
         "node-to-node bandwidth with jumbo frames", "ip link set dev IF mtu 9000 on every node (the switch too)",
         "ip link set dev IF mtu with the previous value", "run bw --hosts {hosts}", severity="info"),
    Rule("steal-time", "a VM's CPU time stolen by the hypervisor", ("steal", "hypervisor"), check_steal,
         "stolen time is time the benchmark did not run: every figure is lower and noisier, and varies with the "
         "neighbours", "dedicated vCPUs or a quieter host", "(nothing)", "run fpu"),
    Rule("thermal-hot", f"a thermal zone above {HOT_C:g} °C", ("thermal",), check_thermal,
         "a hot CPU throttles (the Raspberry Pi at 80-85 °C): compute figures drop during long runs (HPL)",
         "more cooling", "(nothing)", "run hpl"),
    Rule("openblas-generic", "OpenBLAS on kernels older than the CPU", ("blas.openblas_core", "cpu.isa"), check_openblas,
         "an OpenBLAS that does not know the CPU falls back to old (e.g. Prescott, SSE3) kernels: DGEMM and HPL "
         "run 4-5x below the cores", "OPENBLAS_CORETYPE set to the best core type the CPU supports",
         "unset OPENBLAS_CORETYPE", "run dgemm --openblas-coretype none, then run dgemm (auto)"),
    Rule("software-differs", "nodes differ in kernel, MPI, BLAS or OpenBLAS core type",
         ("software", "blas.openblas_core"), check_software_differs,
         "different libraries per node: DGEMM/HPL speed depends on where ranks land, or mpirun cannot mix them "
         "(Duffy 2020 checked the BLAS of each node by hand)", "install the same versions everywhere", "(nothing)",
         "cluster check --hosts {hosts}", scope="cluster"),
    Rule("softirq-concentrated", "NET_RX/NET_TX softirqs concentrated on one CPU during network load",
         ("softirqs.load",), check_softirqs,
         "Duffy (2020, §5.5) found NET_RX softirqs all on CPU0 under HPL: that CPU is lost to the ranks",
         "RPS/RFS, more receive queues or IRQ affinity", "write the previous masks back",
         "run hpl --hosts {hosts}", needs_load=True),
]


def rule(rule_id: str) -> Rule:
    for r in RULES:
        if r.id == rule_id:
            return r
    raise KeyError(rule_id)


# --------------------------------------------------------------------------- applying them

def _as_list(out: Any) -> list[Hit]:
    return out if isinstance(out, list) else [out]


def evaluate(evidence: Mapping[str, Mapping[str, Any]], rules: Sequence[Rule] | None = None,
             hosts_text: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Apply ``rules`` (default :data:`RULES`) to ``{node: evidence}`` -> ``{"findings", "cannot_tell",
    "passed"}``, each a list of dicts naming the rule and the node. ``hosts_text`` fills ``{hosts}``
    in the verifying benchmark (default: the nodes, comma-separated; ``A,B`` for one node)."""
    rules = RULES if rules is None else rules
    nodes = list(evidence)
    hosts = hosts_text or (",".join(nodes) if len(nodes) > 1 else "A,B")
    out: dict[str, list[dict[str, Any]]] = {"findings": [], "cannot_tell": [], "passed": []}

    def record(r: Rule, node: str, res: Any) -> None:
        verify = r.verify.format(hosts=hosts)
        if res is None:
            out["passed"].append({"rule": r.id, "node": node, "title": r.title})
        elif isinstance(res, CannotTell):
            out["cannot_tell"].append({"rule": r.id, "node": node, "title": r.title, "why": res.why})
        else:
            for h in _as_list(res):
                out["findings"].append({
                    "rule": r.id, "node": h.node or node, "severity": h.severity or r.severity, "title": r.title,
                    "summary": h.summary, "evidence": h.evidence, "why": r.why, "fix": h.fix, "undo": h.undo,
                    "verify": verify, "needs_reboot": r.needs_reboot and h.apply is None,
                    "apply": None if h.apply is None else
                    {(k if k is not None else (h.node or node)): v for k, v in h.apply.items()}})

    for r in rules:
        if r.scope == "cluster":
            try:
                res = r.check(evidence)
            except Exception as exc:  # a rule's bug must not hide the others: say so
                res = CannotTell(f"the rule failed: {type(exc).__name__}: {exc}")
            record(r, "cluster", res)
            continue
        for node, ev in evidence.items():
            try:
                res = r.check(ev)
            except Exception as exc:
                res = CannotTell(f"the rule failed: {type(exc).__name__}: {exc}")
            record(r, node, res)
    order = {"warn": 0, "info": 1}
    out["findings"].sort(key=lambda f: order.get(f["severity"], 2))  # stable: rule order within a severity
    return out
