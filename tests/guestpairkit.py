"""Two full-system guests on a private link, for seed 003's experiment (issue 27 section 3): TCP against
soft-RoCE (``rdma_rxe``) between two machines.

Each guest is tests/guestkit.py's (Debian 12's kernel under QEMU TCG, the cached image, ssh from the host
over QEMU's user network on its first NIC) with a second virtio NIC on a guest-to-guest link: QEMU's
``-netdev socket`` in its unicast UDP form (``udp=PEER,localaddr=MINE``, both on 127.0.0.1), a
point-to-point Ethernet cable between the two qemu processes that needs no root, no bridge and no order
of start. On that NIC each guest gets a static address and a host name (:data:`NAMES`,
:data:`ADDRS`), both names are in both guests' /etc/hosts, and the image's key lets each reach the other
by ssh (Open MPI's mpirun on A starts its daemon on B that way).

:func:`pair` is the one context manager: both qemu processes are started at once, waited for, and always
killed on leaving it (and by their own timers, and by the kernel if this process dies).
:func:`rxe_up` brings soft-RoCE up on the link's NIC, Debian's way.
"""
from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import guestkit

NAMES = ("cba", "cbb")
ADDRS = ("10.77.0.1", "10.77.0.2")
#: the link NIC's MAC in each guest (the user NIC's is guestkit.USER_MAC)
LINK_MACS = ("52:54:00:cb:00:01", "52:54:00:cb:00:02")
#: each guest: 2 vcpus, 1.5 GiB, one NUMA node (two guests share the host's cores under TCG)
TOPOLOGY = guestkit.Topology(sockets=1, cores=2, mem_mb=1536)


@dataclass
class Pair:
    a: guestkit.Guest
    b: guestkit.Guest
    link: str  # the link NIC's name in the guests (the same in both: same image, same slot)

    def both(self) -> tuple[guestkit.Guest, guestkit.Guest]:
        return self.a, self.b


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def link_args(i: int, ports: tuple[int, int]) -> list[str]:
    """Guest ``i``'s second NIC: a UDP socket on ports[i] that sends to the other guest's."""
    return ["-netdev", f"socket,id=n1,udp=127.0.0.1:{ports[1 - i]},localaddr=127.0.0.1:{ports[i]}",
            "-device", f"virtio-net-pci,netdev=n1,mac={LINK_MACS[i]}"]


def _setup(g: guestkit.Guest, i: int) -> str:
    """Name, address and /etc/hosts of guest ``i``; returns the link NIC's name."""
    hosts = "".join(f"{a} {n}\n" for a, n in zip(ADDRS, NAMES))
    r = g.run(f"nic=$(grep -l '^{LINK_MACS[i]}$' /sys/class/net/*/address | cut -d/ -f5) && [ -n \"$nic\" ] && "
              f"ip link set \"$nic\" up && ip addr add {ADDRS[i]}/24 dev \"$nic\" && "
              f"hostname {NAMES[i]} && echo {NAMES[i]} > /etc/hostname && "
              f"printf '127.0.0.1 localhost\\n{hosts}' > /etc/hosts && echo \"$nic\"", timeout=120)
    return r.stdout.strip()


@contextlib.contextmanager
def pair(repo: Path = guestkit.REPO, life_s: float = 2400, boot_timeout_s: float | None = None,
         workdir: Path | None = None) -> Iterator[Pair]:
    """Boot guests A and B on a private link (the image built first if needed), wait for both sshd,
    name and address them, check that A reaches B by ssh; yield; always kill both qemu processes."""
    image = guestkit.build_image(repo)
    workdir = Path(workdir or os.environ.get("TMPDIR", "/tmp"))
    ports = (free_udp_port(), free_udp_port())
    started: list[guestkit.Guest] = []
    keep = True
    try:
        for i in range(2):
            started.append(guestkit.start(image, TOPOLOGY, repo, workdir, life_s, link_args(i, ports)))
        for g in started:
            guestkit.wait_ssh(g, guestkit.boot_timeout(boot_timeout_s))
        links = [_setup(g, i) for i, g in enumerate(started)]
        a, b = started
        # over the link, by name, with the image's key: what mpirun on A does to start B's daemon
        a.run(f"for i in 1 2 3 4 5 6; do ssh -o ConnectTimeout=30 {NAMES[1]} hostname && break; sleep 5; done "
              f"| grep -qx {NAMES[1]}", timeout=300)
        yield Pair(a, b, links[0] if links[0] == links[1] else ",".join(links))
        keep = False
    finally:
        for g in started:
            guestkit.stop(g, keep)


def rxe_up(g: guestkit.Guest, netdev: str, timeout: float = 300) -> str:
    """Soft-RoCE on ``netdev``: ``rdma_rxe`` (with ``crc32_generic``, which it needs and does not pull in),
    ``rdma link add rxe0 type rxe netdev ...``; returns ``ibv_devinfo -d rxe0``'s output (PORT_ACTIVE
    checked by the caller)."""
    g.run("modprobe crc32_generic && modprobe rdma_rxe && "
          f"(rdma link show rxe0/1 >/dev/null 2>&1 || rdma link add rxe0 type rxe netdev {netdev})",
          timeout=timeout)
    return g.run("for i in $(seq 30); do ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE && break; sleep 1; done; "
                 "ibv_devinfo -d rxe0", timeout=timeout).stdout


def rxe_down(g: guestkit.Guest, timeout: float = 120) -> None:
    """rxe0 removed (the module stays): a guest pair where rxe0 is absent."""
    g.run("rdma link delete rxe0 2>/dev/null || true; ! ibv_devices | grep -q rxe0", timeout=timeout)
