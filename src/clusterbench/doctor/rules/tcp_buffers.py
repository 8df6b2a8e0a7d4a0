"""tcp-buffers: the TCP buffer sysctls below the Open MPI documentation's values."""
from __future__ import annotations

from typing import Any, Mapping

from clusterbench.doctor.rule import CannotTell, Hit, Rule, get, here, shown

#: the Open MPI documentation's TCP values for 10G/40G Ethernet ("Are there any Linux kernel TCP
#: parameters that I should set?", docs.open-mpi.org/en/main/tuning-apps/networking/tcp.html, the
#: former FAQ www.open-mpi.org/faq/?category=tcp)
OMPI_FAQ_TCP: dict[str, int | tuple[int, int, int]] = {
    "net.core.rmem_max": 16777216,
    "net.core.wmem_max": 16777216,
    "net.ipv4.tcp_rmem": (4096, 87380, 16777216),
    "net.ipv4.tcp_wmem": (4096, 65536, 16777216),
}
OMPI_FAQ_CITE = ("Open MPI docs, TCP: \"Are there any Linux kernel TCP parameters that I should set?\" "
                 "(docs.open-mpi.org/en/main/tuning-apps/networking/tcp.html; formerly www.open-mpi.org/faq/?category=tcp)")


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
                   apply=here(do, do_undo) if do else None)
    if unread:
        return CannotTell("unreadable: " + "; ".join(unread))
    return None


RULE = Rule(
    "tcp-buffers", "TCP buffer sysctls below the Open MPI FAQ values",
    ("sysctl.net.core.rmem_max", "sysctl.net.core.wmem_max", "sysctl.net.ipv4.tcp_rmem", "sysctl.net.ipv4.tcp_wmem"),
    check_tcp_buffers,
    "small socket buffers cap TCP bandwidth (MPI over the tcp BTL, run tcp/bw/pingpong's large messages, "
    f"HPL across nodes); values from {OMPI_FAQ_CITE}",
    "sysctl -w each one to the FAQ value (persist in /etc/sysctl.d/)", "sysctl -w the previous values",
    "run bw --hosts {hosts} --transport tcp",
    figures={"tcp": ("throughput",), "bw": ("bw", "bibw"), "pingpong": ("bandwidth",), "hpl": ("rmax",)},
    order=10)
