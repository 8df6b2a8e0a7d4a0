"""Transports (``auto``, ``shm``, ``tcp``, ``rdma``) and their proof: what the MPI library's own verbose
output (Open MPI's bml/pml lines, UCX's endpoint configurations) shows it used, and the refusal of a
run whose transport contradicts the one asked for."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.errors import KernelFailed

TRANSPORTS = ("auto", "shm", "tcp", "rdma")
#: Open MPI MCA settings per transport (``rdma`` also sets UCX_TLS, see :class:`LaunchSpec`).
OMPI_TRANSPORT_MCA: dict[str, list[str]] = {
    "auto": [],
    "shm": ["--mca", "pml", "ob1", "--mca", "btl", "self,vader"],
    "tcp": ["--mca", "pml", "ob1", "--mca", "btl", "self,tcp"],
    "rdma": ["--mca", "pml", "ucx"],
}
#: what each transport's proof may show (btl names other than ``self``; pml)
_SHM_BTLS = {"vader", "sm", "smcuda"}
PROOF_ARGS = ["--mca", "btl_base_verbose", "30", "--mca", "pml_base_verbose", "10"]
#: UCX prints the transports of every endpoint configuration at this level (the proof), to stderr
#: (stdout carries the kernel's JSON lines; UCX logs to stdout by default). MPICH ch4:ucx and Open MPI's
#: pml ucx (``--transport rdma``: which verbs device, rc or ud) alike.
UCX_PROOF_ENV = {"UCX_LOG_LEVEL": "info", "UCX_LOG_FILE": "stderr"}
#: soft-RoCE (``rdma_rxe``): UCX 1.13's UD drops every packet rxe delivers by its GRH destination check, so
#: its wireup (and ``ud``) never completes ("UD endpoint ... unhandled timeout error"); measured between two
#: Debian 12 guests, where perftest's UD ran and ucx_perftest over ud_verbs ran only with this
SOFT_ROCE_UCX_ENV = {"UCX_UD_VERBS_ETH_DGID_CHECK": "n"}


def soft_roce_devices(sysfs: str | Path = "/sys/class/infiniband") -> list[str]:
    """The RDMA devices of this machine that are software (rxe, siw: a ``parent`` netdev, no ``device``)."""
    try:
        devs = sorted(Path(sysfs).iterdir())
    except OSError:
        return []
    return [d.name for d in devs if (d / "parent").is_file() and not (d / "device").exists()]


def rdma_env(sysfs: str | Path = "/sys/class/infiniband", environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What ``--transport rdma`` adds to UCX's environment on this machine: :data:`SOFT_ROCE_UCX_ENV` where
    a soft-RoCE device is (the launching machine's view; the ranks get it with ``-x``); never what the
    user already set."""
    environ = os.environ if environ is None else environ
    if not soft_roce_devices(sysfs):
        return {}
    return {k: v for k, v in SOFT_ROCE_UCX_ENV.items() if k not in environ}


_BML_RE = re.compile(r"mca: bml: Using (\S+) btl for send to \[\[\d+,\d+\],(\d+)\] on node (\S+)")
_PML_RE = re.compile(r"select: component (\S+) selected")
_PML_RE2 = re.compile(r"selected (\S+) best priority")
_BIND_RE = re.compile(r"MCW rank (\d+) bound to (.*)$")
#: UCX (UCX_LOG_LEVEL=info): ``[time] [host:pid:thread] ucp_worker.c:N UCX INFO ep_cfg[1]: tag(sysv/memory
#: cma/memory) ...``, one line per endpoint configuration; an endpoint to another rank has no
#: ``self`` lane. The lanes of ``tag`` (MPICH's tag matching; else ``am``) carry the messages.
_UCX_EP_RE = re.compile(r"\[[^\]:]*:\s*(\d+)\s*:\d+\].*UCX\s+INFO\s+ep_cfg\[\d+\]:(.*)$")  # pid is padded
_UCX_LANES_RE = re.compile(r"\b(tag|am)\(([^)]*)\)")
_UCX_SHM_TLS = {"sysv", "posix", "cma", "knem", "xpmem", "sm", "mm"}
_UCX_RDMA_TLS = {"rc", "rc_verbs", "rc_mlx5", "ud", "ud_verbs", "ud_mlx5", "dc", "dc_mlx5", "ib", "srd"}


def ucx_kind(lane: str) -> str:
    """``shm``, ``tcp``, ``rdma`` or the transport's own name, for a UCX lane such as ``tcp/eth0``."""
    tl = lane.split("/", 1)[0]
    return "shm" if tl in _UCX_SHM_TLS else "tcp" if tl == "tcp" else "rdma" if tl in _UCX_RDMA_TLS else tl


@dataclass
class TransportProof:
    """What the MPI library said it used: pml, btls towards other ranks (not ``self``)."""

    pml: str | None = None
    btl: list[str] = field(default_factory=list)
    sends: list[dict] = field(default_factory=list)  # {"btl", "to_rank", "node"}
    lines: list[str] = field(default_factory=list)   # the evidence, verbatim (bounded)
    bindings: dict[int, str] = field(default_factory=dict)
    ucx: list[str] = field(default_factory=list)      # UCX lanes towards other ranks, e.g. tcp/eth0
    ucx_pids: set[int] = field(default_factory=set)   # processes that reported such an endpoint
    local_shm: bool = False  # MPICH may also move data through its own shared memory (ranks share a node)

    def feed(self, line: str) -> None:
        m = _UCX_EP_RE.search(line)
        if m:
            lanes = dict(_UCX_LANES_RE.findall(m.group(2)))
            chosen = (lanes.get("tag") or lanes.get("am") or "").split()
            if chosen and not any(ln.startswith("self/") for ln in chosen):
                self.ucx_pids.add(int(m.group(1)))
                for lane in chosen:
                    if lane not in self.ucx:
                        self.ucx.append(lane)
                self._keep(line[line.index("ep_cfg"):] if "ep_cfg" in line else line)
            return
        m = _BML_RE.search(line)
        if m:
            btl, to, node = m.group(1), int(m.group(2)), m.group(3)
            if btl != "self":
                if btl not in self.btl:
                    self.btl.append(btl)
                if len(self.sends) < 256:
                    self.sends.append({"btl": btl, "to_rank": to, "node": node})
            self._keep(line)
            return
        m = _PML_RE.search(line) or _PML_RE2.search(line)
        if m:
            self.pml = m.group(1)
            self._keep(line)
            return
        m = _BIND_RE.search(line)
        if m:
            self.bindings[int(m.group(1))] = m.group(2).strip()

    def _keep(self, line: str) -> None:
        if len(self.lines) < 64:
            self.lines.append(line.strip())

    def evidence(self, n: int = 4) -> list[str]:
        """The most telling lines: btl selections towards other ranks first, then the pml's."""
        bml = [ln for ln in self.lines if "mca: bml:" in ln and "Using self btl" not in ln]
        pml = [ln for ln in self.lines if "mca: bml:" not in ln]
        return (bml[: max(1, n - 1)] + pml)[:n]

    def covers(self, ranks: Sequence[int]) -> bool:
        """Enough evidence to judge the transport between ``ranks`` (UCX: as many processes as
        ranks reported an endpoint to another rank; its lines do not name the peer)."""
        if self.ucx and self.pml is None:
            return len(self.ucx_pids) >= len(ranks)
        if self.pml is None:
            return False
        if self.pml == "ucx" and self.ucx:  # Open MPI's pml ucx with UCX's own lines: every rank's lanes
            return len(self.ucx_pids) >= len(ranks)
        if self.pml != "ob1":
            return True
        seen = {s["to_rank"] for s in self.sends}
        return all(r in seen for r in ranks)

    def as_dict(self) -> dict:
        return {"pml": self.pml, "btl": list(self.btl), "sends": list(self.sends), "ucx": list(self.ucx),
                "local_shm": self.local_shm, "evidence": self.evidence(64),
                "bindings": {str(k): v for k, v in sorted(self.bindings.items())}}


def parse_transport_proof(text: str) -> TransportProof:
    proof = TransportProof()
    for line in text.splitlines():
        proof.feed(line)
    return proof


def used_transport(proof: TransportProof) -> str | None:
    """``shm``, ``tcp``, ``rdma`` or ``mixed``/other, from the proof; None if not proven."""
    if proof.ucx and proof.pml is None:  # MPICH ch4:ucx
        kinds = {ucx_kind(lane) for lane in proof.ucx}
        if proof.local_shm and kinds != {"shm"}:
            return None  # MPICH's own shared memory may have carried part of it: not provable
        return kinds.pop() if len(kinds) == 1 else "mixed(" + ",".join(proof.ucx) + ")"
    if proof.pml == "ucx":  # Open MPI's pml ucx: UCX_TLS allows RDMA lanes only; its lines, where there, say which
        kinds = {ucx_kind(lane) for lane in proof.ucx} or {"rdma"}
        return kinds.pop() if len(kinds) == 1 else "mixed(" + ",".join(proof.ucx) + ")"
    if proof.pml in ("ob1", None) and proof.btl:
        kinds = {"shm" if b in _SHM_BTLS else "tcp" if b == "tcp" else "rdma" if b in ("openib", "uct", "ofi") else b
                 for b in proof.btl}
        return kinds.pop() if len(kinds) == 1 else "mixed(" + ",".join(sorted(proof.btl)) + ")"
    return None


def check_transport(requested: str, proof: TransportProof) -> None:
    """KernelFailed when the proof contradicts the requested transport (auto accepts anything)."""
    if requested == "auto":
        return
    if proof.ucx and proof.pml is None:  # MPICH ch4:ucx
        wrong = [lane for lane in proof.ucx if ucx_kind(lane) != requested]
        if wrong:
            raise KernelFailed(f"asked {requested}, MPICH used UCX {','.join(wrong)}",
                               "check UCX_TLS/UCX_NET_DEVICES and MPIR_CVAR_* in the environment")
        return
    if requested == "rdma":
        if proof.pml is not None and proof.pml != "ucx":
            raise KernelFailed(f"asked rdma, MPI used pml {proof.pml}" +
                               (f" with {','.join(proof.btl)}" if proof.btl else ""),
                               "check that an RDMA device is up (ibv_devinfo) and UCX sees it (ucx_info -d)")
        wrong = [lane for lane in proof.ucx if ucx_kind(lane) != "rdma"]
        if wrong:
            raise KernelFailed(f"asked rdma, Open MPI's pml ucx used UCX {','.join(wrong)}",
                               "check UCX_TLS/UCX_NET_DEVICES in the environment")
        return
    wrong = [b for b in proof.btl if (b not in _SHM_BTLS if requested == "shm" else b != "tcp")]
    if proof.pml not in (None, "ob1"):
        raise KernelFailed(f"asked {requested}, MPI used pml {proof.pml}", "report this as a bug")
    if wrong:
        raise KernelFailed(f"asked {requested}, MPI used {','.join(wrong)}",
                           "check the MCA settings in $OMPI_MCA_* and openmpi-mca-params.conf")
