"""coalescing-off: one interrupt per received frame."""
from __future__ import annotations

from typing import Any, Mapping

from clusterbench.doctor.rule import CannotTell, Hit, Rule, cannot, here, nic_item, per_nic, shown


def check_coalescing(ev: Mapping[str, Any]) -> Any:
    def one(name: str, items: dict[str, Any]) -> Any:
        it = nic_item(items, "coalescing")
        if not it.get("readable"):
            return cannot(f"nic.{name}.coalescing", it)
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
                   [shown(f"nic.{name}.coalescing", it)], [fix], [undo], apply=here([fix], [undo]))

    return per_nic(ev, one)


RULE = Rule(
    "coalescing-off", "interrupt coalescing off", ("nic.*.coalescing",), check_coalescing,
    "one interrupt per frame costs CPU time on busy links (ethtool(8), -C: rx-usecs and rx-frames delay the "
    "interrupt, adaptive-rx lets the driver choose); coalescing trades a little small-message latency for it",
    "ethtool -C IF adaptive-rx on", "ethtool -C IF with the previous values",
    "run hpl --hosts {hosts}, then run pingpong --hosts {hosts}",
    figures={"hpl": ("rmax",), "pingpong": ("latency", "bandwidth")}, order=90)
