"""Slow links and slow nodes of an all-pairs network sweep, judged against what the cluster itself
shows is possible (pure: no I/O). ``sweep network`` (sweep/network.py) calls :func:`judge`.

Why not "outliers among all links" (median and MAD): one slow node owns n-1 of the n(n-1)/2 links,
half of them on 4 nodes; two slow nodes own 5 of the 6. Median and MAD then sit among the slow links
and nothing is an outlier (on a 4-node virtual cluster with one node rate-limited to 50 Mbit/s and
another at MTU 1500, links of 12, 12, 12, 500, 500 and 906 MB/s: no flag, the rate-limited node's best
link at z = -2.3).

The rule, per metric (bandwidth: higher is better; latency: lower is better). A link's **factor** is
how many times worse than the reference its best measurement is; its **spread** is how far its own
figures are apart: between its measurements (the passes and the re-measurement, ``allpairs
--remeasure``), and within the one kept (bandwidth: best loop / mean loop; latency: median / fastest
round trip), whichever is wider.

* **reference** (what the cluster shows is possible): every node's best link; the median of the
  better half of those (the ceil(n/2) best node-bests). It stays a healthy link's figure while at most
  half the nodes are slow (4 nodes, 2 of them slow: the healthy pair's link).
* **this machine's noise**: ``typical`` = the median spread of all links, and the **floor** = the
  (m+1)-th widest spread, m = ceil(sqrt N) - 1 for N links. If k links are off by a factor f, a
  healthy link is off by f about k/N of the time and about N (k/N)^2 = k^2/N healthy links are off on
  both of their measurements, i.e. look slow; that is below one while k <= m (6 links: the third
  widest spread; 496 links: the 23rd).
* a link is **beyond** when its factor reaches ``SLOW[metric]`` x typical and the floor: bandwidth
  1.5 (MTU 1500 among 9000 without offloads carried half, a 100 Mb/s link among 1 Gb/s a tenth),
  latency 2 (a congested or mis-routed path, interrupt coalescing: round trips doubled). For
  bandwidth the factor is ``EVIDENCE_FACTOR`` (1.15) x typical on links of a node whose NIC says so
  (MTU or stated speed unlike the majority's, from the per-node probe stored with the run) or that run
  below a tenth of their NICs' stated speed: that is evidence of its own. It is **steady** when its
  factor is also larger than its own spread (12 and 400 MB/s has not shown which it is).
* a **node is slow** when its best link is beyond (every link it has is then worse: the node, its NIC,
  MTU, rate limit or CPU is the common cause, not a cable) and steady, or most of its links are steady
  (a node's best link measured 92 and 184 MB/s while its others were steady at x2 and x30 below is
  still a slow node), or its NIC is evidence (bandwidth noise is one-sided: a load slows a link and
  nothing makes it faster, so the best measurement is the one to trust once the threshold carries the
  machine's noise); or when more than half of its links, and at least ``MIN_BAD_LINKS`` (3), are slow.
  A node's best link beyond is not enough (unless its NIC is evidence): its typical link must be beyond
  the same threshold too, the median of its links to nodes that are not under suspicion against the
  better half of those nodes' medians (when most nodes are under suspicion, the reference itself was a
  lucky figure: every link counts then). On shared cores each round has a lucky pair or two, x2-x8 the
  round's median, and a node that drew none has a best link x2-x4 below the reference while its links
  are as good as anyone's: 32 healthy nodes on 2 cores had 4 such nodes called slow with their 118
  links (too noisy), and 8 nodes, one of them at 100 Mbit/s, all 8 (judged; the reference was two lucky
  pairs, 399 and 340 MB/s against healthy links of 104-207).
* a **link is slow** when it is beyond and a link of a slow node or of a node whose NIC is evidence;
  or, between two nodes that are neither (a cable), steady and also an outlier among those links
  (``outliers.flag``: modified z-score; there healthy links are the majority, so median and MAD hold,
  and they tell the spread between links of this machine from a bad cable).
* **too noisy to judge**: when the typical spread reaches ``NOISE_TYPICAL`` (x1.25) or the floor
  reaches the slow factor, the metric says "too noisy to judge below xT", T = max(slow factor x
  typical, floor); only nodes and links beyond T are flagged, and no cable is. On 2 shared cores
  with other work, a virtual node's 8-byte round trip waits for a time slice: round trips of 20 us
  and of 2 ms in one measurement, medians of 25 us to 4 ms, so latency there is too noisy below
  x15-x50 and nothing is flagged; 32 nodes oversubscribed had flagged 61 of 496 links on one
  measurement against the median.

With 2 nodes there is one link and nothing to compare: no flags.
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from clusterbench.analysis import outliers

#: (metric, key in a pair's dict, unit, higher is better)
METRICS = (("latency", "latency_us", "us", False), ("bandwidth", "bandwidth_MBps", "MB/s", True))
#: a link is slow when its best measurement is this many times worse than the reference
SLOW = {"bandwidth": 1.5, "latency": 2.0}
#: ... or this many times, for bandwidth, on a link of a node whose NIC is unlike the others'
EVIDENCE_FACTOR = 1.15
#: a link below this fraction of its NICs' stated speed is evidence of its own
NIC_FRACTION = 0.1
#: with links moving by this much at the median between measurements, many slow links between nodes that
#: are not slow are read as noise
NOISE_TYPICAL = 1.25
MIN_BAD_LINKS = 3

RULE = ("per metric: reference = the median of the better half of the nodes' best links (what the cluster shows is "
        "possible); noise = a link's spread (between its measurements, or its loops / round trips), typical = the "
        "median spread, floor = the (m+1)-th widest, m = ceil(sqrt(links)) - 1; a link is beyond when its best "
        f"measurement is x{SLOW['bandwidth']:g} (bandwidth) or x{SLOW['latency']:g} (latency) x typical, and the floor, "
        f"worse than the reference (bandwidth x{EVIDENCE_FACTOR:g} x typical on a node whose NIC MTU or speed is unlike "
        "the others'), steady when also worse by more than its own spread; a node is slow when its best link is beyond "
        "and steady and its median link too (against the better half of the nodes' medians), or "
        "most of its links are steady, or its NIC is unlike the others', or when more than half of its "
        f"links, and at least {MIN_BAD_LINKS}, are slow; a link is slow when beyond and of such a node, or, between "
        "two other nodes, steady and an outlier among those links (median/MAD); suspects (x1.15 from the best pair) "
        f"are measured again; typical >= x{NOISE_TYPICAL:g} or floor >= the slow factor: too noisy to judge below "
        "that, only what is beyond it is flagged")


def short_num(v: float | None) -> str:
    """A figure in three significant digits or so (1234, 12.3, 1.23); '-' for none."""
    if v is None:
        return "-"
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _fx(f: float) -> str:
    return f"x{f:.1f}" if f < 10 else f"x{f:.0f}"


# -- NIC evidence --------------------------------------------------------------------------------
def nic_evidence(nodes: Sequence[str], nics: Mapping[str, Any] | None) -> list[dict]:
    """Nodes whose NIC differs from the majority's: ``nics`` is ``{node: [{name, mtu, speed_mbps,
    operstate}, ...]}`` (the run's per-node ``nic_settings``). Per interface name present on three or
    more of the nodes (``lo`` and interfaces that are down excepted): a node whose MTU differs from the
    value most nodes have (more than half of them), or whose stated speed is below it. Returns
    ``[{"node", "iface", "what": "mtu"|"speed_mbps", "value", "majority", "why"}]``."""
    if not nics:
        return []
    by_if: dict[str, dict[str, dict]] = {}
    for nd in nodes:
        for nic in nics.get(nd) or []:
            name = nic.get("name")
            if not name or name == "lo" or (nic.get("operstate") or "up") == "down":
                continue
            by_if.setdefault(name, {})[nd] = nic
    out: list[dict] = []
    for ifname, have in sorted(by_if.items()):
        if len(have) < 3:
            continue
        for what, label in (("mtu", "MTU"), ("speed_mbps", "stated speed (Mb/s)")):
            vals = {nd: nic.get(what) for nd, nic in have.items() if nic.get(what) is not None}
            if len(vals) < 3:
                continue
            common, count = Counter(vals.values()).most_common(1)[0]
            if count * 2 <= len(vals):
                continue
            for nd, v in vals.items():
                odd = v != common if what == "mtu" else v < common
                if odd:
                    out.append({"node": nd, "iface": ifname, "what": what, "value": v, "majority": common,
                                "why": f"{ifname} {label} {v}, {count} of the {len(vals)} nodes have {common}"})
    return out


def _line_rate(a: str, b: str, nics: Mapping[str, Any] | None) -> float | None:
    """The lower stated speed of the two nodes' NIC (MB/s), when each has exactly one interface up
    besides ``lo`` and it states a speed; else None (which NIC carries the traffic is not known)."""
    if not nics:
        return None
    speeds = []
    for nd in (a, b):
        up = [n for n in nics.get(nd) or [] if n.get("name") != "lo" and (n.get("operstate") or "up") != "down"]
        if len(up) != 1 or not up[0].get("speed_mbps"):
            return None
        speeds.append(float(up[0]["speed_mbps"]))
    return min(speeds) / 8.0  # Mb/s -> MB/s


# -- the judge ----------------------------------------------------------------------------------
def judge(nodes: Sequence[str], pairs: Sequence[Mapping[str, Any]],
          nics: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Slow links and nodes per metric (the rule in the module docstring).

    ``pairs``: dicts with ``pair``, ``nodes`` [a, b], the metric keys (the kept figure) and optionally
    ``measurements`` ``{key: [every measurement of the link]}`` (the passes, then the re-measurement);
    without it the kept figure is the only measurement. ``nics``: ``{node: [nic dicts]}`` or None.

    Returns ``{"links": [...], "nodes": [...], "metrics": {metric: verdict}, "evidence": [...]}``: one
    entry per (link or node, metric) flagged, with value, reference, factor, threshold, spread,
    measurements and why; per metric the verdict (``status`` "judged", "too noisy" or "nothing to
    compare", the reference, thresholds, counts and ``why``)."""
    evidence = nic_evidence(nodes, nics)
    odd_nodes: dict[str, list[str]] = {}
    for e in evidence:
        odd_nodes.setdefault(e["node"], []).append(e["why"])
    link_flags: list[dict] = []
    node_flags: list[dict] = []
    verdicts: dict[str, dict] = {}
    for metric, key, unit, hib in METRICS:
        slow_f = SLOW[metric]
        links: dict[str, dict] = {}
        for p in pairs:
            v = p.get(key)
            if v is None:
                continue
            figs = [float(x) for x in ((p.get("measurements") or {}).get(key) or [v]) if x is not None and x > 0]
            if not figs or not v > 0:
                continue
            good = [x if hib else 1.0 / x for x in figs]
            best = max(good)
            within = float((p.get("within") or {}).get(key) or 1.0)
            between = max(good) / min(good)
            links[p["pair"]] = {"ends": tuple(p["nodes"]), "figs": figs, "best_g": best,
                                "best": best if hib else 1.0 / best, "between": between, "within": within,
                                "spread": max(between, within, 1.0), "n": len(figs)}
        verdict: dict[str, Any] = {"metric": metric, "unit": unit, "links": len(links), "slow_factor": slow_f}
        verdicts[metric] = verdict
        if len(links) < 2 or len({nd for L in links.values() for nd in L["ends"]}) < 3:
            verdict.update(status="nothing to compare", why="fewer than 3 nodes: one link, nothing to compare it with")
            continue
        node_best: dict[str, tuple[float, str]] = {}
        for name, L in links.items():
            for nd in L["ends"]:
                if nd not in node_best or L["best_g"] > node_best[nd][0]:
                    node_best[nd] = (L["best_g"], name)
        bests = sorted((g for g, _ in node_best.values()), reverse=True)
        upper = bests[: math.ceil(len(bests) / 2)]
        ref_g = statistics.median(upper)
        ref = ref_g if hib else 1.0 / ref_g
        worse = "below" if hib else "above"
        n_links = len(links)
        spreads = sorted((L["spread"] for L in links.values()), reverse=True)
        m = max(math.ceil(math.sqrt(n_links)) - 1, 0)  # m^2/N < 1 <= (m+1)^2/N
        floor = spreads[m] if len(spreads) > m else 1.0
        typical = statistics.median(spreads)
        for name, L in links.items():
            L["factor"] = ref_g / L["best_g"]
            a, b = L["ends"]
            thr = slow_f
            ev: list[str] = []
            if hib:
                ev = [f"{nd}: {w}" for nd in (a, b) for w in odd_nodes.get(nd, [])]
                line = _line_rate(a, b, nics)
                if line and L["best"] < NIC_FRACTION * line:
                    ev.append(f"{short_num(L['best'])} {unit} is {L['best'] / line:.0%} of the NICs' stated "
                              f"{short_num(line)} MB/s")
                if ev:
                    thr = min(thr, EVIDENCE_FACTOR)
            thr = max(thr * typical, floor)  # the slow factor on top of this machine's typical noise, and its tail
            L["threshold"], L["evidence"] = thr, ev
            L["beyond"] = L["factor"] >= thr  # worse than the reference and the noise
            L["steady"] = L["beyond"] and L["factor"] > L["spread"]  # ... by more than its own measurements differ
        noise = max(slow_f * typical, floor)
        noisy = typical >= NOISE_TYPICAL or floor >= slow_f
        # nodes whose best link is slow: the node is the common cause of all its links
        def by_links(nd: str) -> tuple[dict, list[dict], int]:
            B = links[node_best[nd][1]]
            mine = [L for L in links.values() if nd in L["ends"]]
            return B, mine, sum(1 for L in mine if L["steady"])

        # every link it has is beyond; the best one by more than its own spread, or most of them
        cands = {nd for nd in node_best for B, mine, steady in [by_links(nd)]
                 if B["beyond"] and (B["steady"] or steady * 2 > len(mine))}
        # a node's best link can be a lucky draw (the docstring): its typical link must be beyond too, the median of
        # its links to nodes that are not candidates against the better half of those nodes' medians; when most
        # nodes are candidates, the reference was the lucky one: every link counts then
        typical_ok = set(cands)
        typical_why: dict[str, str] = {}
        if cands:
            lucky_ref = len(cands) * 2 > len(node_best)
            clean = {nd: [L["best_g"] for L in links.values() if nd in L["ends"]
                          and (lucky_ref or not (set(L["ends"]) - {nd}) & cands)] for nd in node_best}
            med = {nd: statistics.median(v) for nd, v in clean.items() if v}
            peers = sorted((m for nd, m in med.items() if lucky_ref or nd not in cands), reverse=True)
            if peers:
                med_ref_g = statistics.median(peers[: math.ceil(len(peers) / 2)])
                typical_ok = {nd for nd in cands if nd not in med or med_ref_g / med[nd] >= noise}
                typical_why = {nd: f"; its typical link {_fx(med_ref_g / med[nd])} {worse} the typical node's"
                               for nd in typical_ok if nd in med}
        slow_nodes: dict[str, str] = {}
        for nd in nodes:
            if nd not in node_best:
                continue
            best_name = node_best[nd][1]
            B, mine, steady = by_links(nd)
            # ... or its NIC is evidence of its own (one-sided noise: a load slows a link, nothing makes it faster,
            # so the best of its measurements is the one to trust once the threshold carries this machine's noise)
            odd = hib and nd in odd_nodes
            if B["beyond"] and (nd in typical_ok or odd):
                slow_nodes[nd] = (f"even its best link ({best_name}, {short_num(B['best'])} {unit}) is {_fx(B['factor'])} "
                                  f"{worse} the reference {short_num(ref)} {unit}: every link it has is slow"
                                  + ("" if B["steady"] else f" ({steady} of its {len(mine)} links by more than "
                                     "their own spread)" if steady * 2 > len(mine) else
                                     " (its own measurements spread as wide, but its NIC is evidence)")
                                  + typical_why.get(nd, ""))
        # a link is explained by a slow node or, for bandwidth, by a NIC unlike the others' (its links are
        # slow once beyond the reference and the noise); any other link, a
        # cable between two healthy nodes, must also be an outlier among such links (they are the majority
        # there, so median and MAD hold, and they tell the machine's spread between links from a fault)
        suspect_nodes = set(slow_nodes) | (set(odd_nodes) if hib else set())
        slow_links: set[str] = set()
        cables: dict[str, float] = {}
        for name, L in links.items():
            ends = set(L["ends"])
            if ends & set(slow_nodes):
                L["slow"] = L["beyond"]
            elif ends & suspect_nodes:
                L["slow"] = L["beyond"]
            else:
                cables[name] = L["best_g"]
                L["slow"] = False
            if L["slow"]:
                slow_links.add(name)
        unexplained = [name for name in cables if links[name]["steady"]]
        outlying = {} if noisy else outliers.flag(cables, True)
        for name in unexplained:
            if name in outlying:
                links[name]["slow"] = True
                z = outlying[name]["z"]
                links[name]["cable"] = (f"an outlier among the {len(cables)} links between nodes that are not slow"
                                        + (f" (modified z {z:.1f})" if z is not None else ""))
                slow_links.add(name)
        for nd in nodes:
            if nd in slow_nodes:
                continue
            mine = [name for name, L in links.items() if nd in L["ends"]]
            bad = [name for name in mine if name in slow_links]
            if len(bad) >= MIN_BAD_LINKS and len(bad) * 2 > len(mine):
                slow_nodes[nd] = f"{len(bad)} of its {len(mine)} links are slow"
        twice = sum(1 for L in links.values() if L["n"] >= 2)
        verdict.update(reference=ref, remeasured=twice, typical_spread=typical, noise_floor=floor,
                       noise_factor=noise, unexplained=len(unexplained),
                       reference_why=f"median of the best links of the better half of the nodes "
                                     f"({len(upper)} of {len(bests)})")
        spread_txt = (f"a link's spread x{typical:.2f} at the median, x{floor:.2f} at the {_ordinal(m + 1)} widest "
                      f"({twice} of {n_links} links measured twice)")
        if noisy:
            verdict.update(status="too noisy", why=(
                f"too noisy to judge below x{noise:.3g}: {spread_txt}; only links and nodes beyond "
                f"x{noise:.3g} are flagged"))
        else:
            verdict.update(status="judged", why=f"reference {short_num(ref)} {unit}; {spread_txt}")
        for nd, why in slow_nodes.items():
            mine = [name for name, L in links.items() if nd in L["ends"]]
            B = links[node_best[nd][1]]
            if hib and odd_nodes.get(nd):
                why += "; its NIC: " + "; ".join(odd_nodes[nd])
            node_flags.append({"node": nd, "metric": metric, "unit": unit, "value": B["best"], "reference": ref,
                               "factor": B["factor"], "threshold": B["threshold"],
                               "links_flagged": sum(1 for x in mine if x in slow_links),
                               "links": len(mine), "rel": (B["best"] - ref) / ref, "why": why})
        for name, L in links.items():
            if name not in slow_links:
                continue
            figs = L["figs"]
            meas = (f"measured {'twice' if len(figs) == 2 else f'{len(figs)} times'}, {short_num(min(figs))}-"
                    f"{short_num(max(figs))} {unit}" if len(figs) > 1 else "measured once") + f" (spread x{L['spread']:.2f})"
            why = (f"{_fx(L['factor'])} {worse} the reference {short_num(ref)} {unit} (slow from "
                   f"x{max(L['threshold'], floor):.3g}); {meas}")
            if L.get("cable"):
                why += "; " + L["cable"]
            if L["evidence"]:
                why += "; evidence: " + "; ".join(L["evidence"])
            culprits = [nd for nd in L["ends"] if nd in slow_nodes]
            if culprits:
                why += f"; a link of slow node {', '.join(culprits)}"
            link_flags.append({"pair": name, "nodes": list(L["ends"]), "metric": metric, "unit": unit,
                               "value": L["best"], "reference": ref, "factor": L["factor"],
                               "threshold": max(L["threshold"], floor), "spread": L["spread"], "measurements": figs,
                               "rel": (L["best"] - ref) / ref, "why": why})
    link_flags.sort(key=lambda f: (f["metric"], -f["factor"]))
    return {"links": link_flags, "nodes": node_flags, "metrics": verdicts, "evidence": evidence}
