"""Which node or link slows a collective: the per-node evidence the network model's judge
(:func:`clusterbench.analysis.collmodel.judge`, its ``slow`` context) names.

Pure: numbers in, numbers out (no store, no launch, no process).

The collectives kernel (kernels/mpi/coll.c, ``--links``) ping-pongs between every pair of nodes
(one rank per node, one pair at a time, the others waiting), at 8 B and 256 KiB; a collective
figure carries those pairs in ``params.links`` (:func:`links_doc` builds it), each in the shape
``sweep network``'s judge reads (:func:`clusterbench.analysis.links.judge`): ``latency_us`` the
median half round trip at 8 B, ``bandwidth_MBps`` 256 KiB over the fastest half round trip at
256 KiB (larger than a tc tbf burst, so even the fastest pays a rate limit; noise on a loaded machine is one-sided: a preempted round trip is slower, nothing makes one
faster than the link allows, and a rate-limited link holds its rate on every one of them after the
untimed ones; ``within``: median / fastest, the pair's own spread). That judge's rule decides (the reference is
what the better half of the nodes reach, so one slow node among 3 or more stands out; with 2
nodes there is nothing to compare and nothing is said), and a node or link is named only from
:data:`MIN_FACTOR` times worse than the others (the pairs are measured once, in the collectives'
launch). The network model itself is fitted on
the pair rank 0 - rank P-1 (``params.p2p``): a slow node elsewhere makes the collectives slower
than the model, and this evidence names it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clusterbench.analysis import links as links_mod

#: the two sizes of the links' ping-pong (the kernel's 8 B and LINK_BYTES)
LATENCY_BYTES, BANDWIDTH_BYTES = 8, 262144
#: a node or link is named only this many times worse than the reference, on top of the judge's own
#: noise threshold: the pairs are measured once each, in the collectives' launch, and on this machine's
#: 2 shared cores at load 30 a healthy node's best link came out x3.2 below the others (a node at tc tbf
#: 100 Mbit/s among unlimited virtual links: x26-x30)
MIN_FACTOR = 5.0
DEFINITION = ("ping-pong between every pair of nodes (one rank each, one pair at a time, each round trip timed): "
              "latency_us the median half round trip at 8 B, bandwidth_MBps 256 KiB / the fastest half round trip "
              "at 256 KiB (1e6 B/s); within: median / fastest")


def pair_of(rec: Mapping[str, Any], node_of_rank: Mapping[int, str]) -> dict | None:
    """One kernel ``link`` record (``pair`` [ranks], ``size_bytes``, ``mean_us``, ``min_us``,
    ``median_us``) as a pair of :func:`clusterbench.analysis.links.judge`, or None if malformed."""
    try:
        ra, rb = (int(x) for x in rec["pair"])
        sizes = [int(s) for s in rec["size_bytes"]]
        mean, low, med = rec["mean_us"], rec["min_us"], rec["median_us"]
        i, j = sizes.index(LATENCY_BYTES), sizes.index(BANDWIDTH_BYTES)
        if not (low[i] > 0 and low[j] > 0 and med[i] > 0 and med[j] > 0 and mean[j] > 0):
            return None
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    a, b = node_of_rank.get(ra, f"rank {ra}"), node_of_rank.get(rb, f"rank {rb}")
    return {"pair": f"{a}-{b}", "nodes": [a, b], "ranks": [ra, rb], "latency_us": float(med[i]),
            "bandwidth_MBps": BANDWIDTH_BYTES / float(low[j]),
            "within": {"latency_us": float(med[i]) / float(low[i]), "bandwidth_MBps": float(med[j]) / float(low[j])}}


def judge(links: Mapping[str, Any] | None) -> dict | None:
    """:func:`clusterbench.analysis.links.judge` of ``params.links`` (``nodes``, ``pairs``), its
    flags kept from :data:`MIN_FACTOR` on, or None without two pairs."""
    if not isinstance(links, Mapping):
        return None
    pairs = [p for p in links.get("pairs") or [] if isinstance(p, Mapping) and p.get("nodes")]
    nodes = list(links.get("nodes") or dict.fromkeys(n for p in pairs for n in p["nodes"]))
    if len(pairs) < 2:
        return None
    got = links_mod.judge(nodes, pairs)
    # measured once per pair, in one launch: only what stands well clear of this machine's noise
    for key in ("nodes", "links"):
        got[key] = [f for f in got[key] if f["factor"] >= MIN_FACTOR]
    got["min_factor"] = MIN_FACTOR
    return got


def evidence(links: Mapping[str, Any] | None, verdict: Mapping[str, Any] | None = None) -> list[str]:
    """One line per slow node, then per slow link of no slow node (the judge's ``slow`` context), e.g.
    ``node n3 slow on bandwidth at 256 KiB: ...``; [] when nothing is slow or nothing could be compared."""
    got = verdict if verdict is not None else judge(links)
    if not got:
        return []
    at = {"latency": f"{LATENCY_BYTES} B", "bandwidth": f"{BANDWIDTH_BYTES // 1024} KiB"}
    out, slow_nodes = [], set()
    for f in got.get("nodes") or []:
        slow_nodes.add(f["node"])
        out.append(f"node {f['node']} slow on {f['metric']} at {at.get(f['metric'], '?')} "
                   f"(x{f['factor']:.3g} {'below' if f['metric'] == 'bandwidth' else 'above'} the other nodes' "
                   f"{links_mod.short_num(f['reference'])} {f['unit']}): {f['why']}")
    for f in got.get("links") or []:
        if not set(f["nodes"]) & slow_nodes:
            out.append(f"link {f['pair']} slow on {f['metric']} at {at.get(f['metric'], '?')}: {f['why']}")
    return out


def slowdowns(verdict: Mapping[str, Any] | None) -> list[tuple[str, float, float, str]]:
    """``(metric, factor, value, evidence line)`` of every slow node (its best link) and every slow
    link of no slow node: how many times it is worse than the others on that metric, and its own
    figure (latency: us, at 8 B; bandwidth: MB/s, at 256 KiB)."""
    lines = evidence(None, verdict or {})
    flags = [f for f in (verdict or {}).get("nodes") or []]
    nodes = {f["node"] for f in flags}
    flags += [f for f in (verdict or {}).get("links") or [] if not set(f["nodes"]) & nodes]
    return [(f["metric"], float(f["factor"]), float(f["value"]), line) for f, line in zip(flags, lines)]


def slow_nodes(verdict: Mapping[str, Any] | None) -> list[str]:
    """The nodes the verdict calls slow (any metric), in order."""
    return list(dict.fromkeys(f["node"] for f in (verdict or {}).get("nodes") or []))


def links_doc(records: Sequence[Mapping[str, Any]], placement: Sequence[Mapping[str, Any]] | None) -> dict | None:
    """``params.links`` of a collective run: the kernel's ``link`` records with node names from the
    placement (``node``, else ``host``, per ``rank``), the verdict's slow nodes and its evidence
    lines; None without link records."""
    if not records:
        return None
    names = {int(p["rank"]): str(p.get("node") or p.get("host") or f"rank {p['rank']}")
             for p in placement or [] if isinstance(p.get("rank"), int)}
    pairs = [q for q in (pair_of(r, names) for r in records) if q]
    doc: dict[str, Any] = {"definition": DEFINITION, "size_bytes": [LATENCY_BYTES, BANDWIDTH_BYTES],
                           "nodes": list(dict.fromkeys(n for p in pairs for n in p["nodes"])), "pairs": pairs}
    verdict = judge(doc)
    doc["slow_nodes"] = slow_nodes(verdict)
    doc["evidence"] = evidence(doc, verdict)
    return doc


__all__ = ["BANDWIDTH_BYTES", "DEFINITION", "LATENCY_BYTES", "MIN_FACTOR", "evidence", "judge", "links_doc", "pair_of", "slow_nodes",
           "slowdowns"]
