"""``cluster install``: this exact clusterbench on every node, over ssh, with its kernels built there.

Per node, in parallel and bounded in time:

1. what the node is (:mod:`clusterbench.cluster.facts`, with its own ``python3``);
2. nothing to do when it already has this build (the digest of this clusterbench's files, kept in
   ``~/.local/share/clusterbench/installed.json``), or when it sees this head's home directory
   (a shared ``$HOME``: the head's own installation there serves it);
3. otherwise the wheels made on the head (:mod:`clusterbench.cluster.wheels`: no internet needed on
   the node) are copied into ``~/.cache/clusterbench/wheels/<digest>``, a virtual environment is
   made at ``~/.local/share/clusterbench/venv`` and they are installed into it with
   ``pip --no-index``; no root is needed;
4. the MPI kernels are built there (:func:`clusterbench.launch.nodes.stage_requests`: once per
   distinct node key, copied to the nodes that share it).

Per node it says what system packages are missing (compiler, MPI, BLAS, hwloc, FFTW, libnuma) with the
command that installs them on that node's OS. A node that fails (no Python 3.10, no space left) is
named with the reason; the others are installed; the exit status says whether all were.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import tarfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clusterbench import __version__
from clusterbench.cluster import facts as F
from clusterbench.cluster import wheels as W
from clusterbench.errors import EnvironmentProblem, UsageError

INSTALL_SCHEMA = 1
VENV = ".local/share/clusterbench/venv"
MARKER = ".local/share/clusterbench/installed.json"
WHEEL_DIR = ".cache/clusterbench/wheels"
#: seconds for one node's whole install (venv, pip) and its kernels
NODE_TIMEOUT = 600.0
FACTS_TIMEOUT = 30.0
_MAX_WORKERS = 32


def wheel_cache() -> Path:
    base = os.environ.get("CLUSTERBENCH_CACHE")
    root = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clusterbench"
    return root / "wheels"


def package_digest(wheels: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for w in sorted(wheels, key=lambda p: p.name):
        h.update(w.name.encode())
        h.update(w.read_bytes())
    return h.hexdigest()[:16]


def _fingerprint() -> str:
    """What the wheels are made of, cheaply: every file of this package (path, size, mtime) and the
    versions of the distributions shipped with it. Same fingerprint, same wheels."""
    import importlib.metadata as md

    h = hashlib.sha256()
    for p in sorted(W._PKG_ROOT.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
            st = p.stat()
            h.update(f"{p.relative_to(W._PKG_ROOT)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    for name in ("rich", "pygments", "markdown-it-py", "mdurl", "typing-extensions"):
        try:
            h.update(f"{name}={md.version(name)}\n".encode())
        except md.PackageNotFoundError:
            pass
    return h.hexdigest()[:24]


def prepare_wheels() -> tuple[list[Path], str]:
    """The node wheels (built into the head's wheel cache) and their digest; made again only when
    this package's files or the shipped distributions changed (a second of zipping otherwise, at
    every multi-node command's check)."""
    known = wheel_cache() / "fingerprints" / _fingerprint()
    try:
        digest = known.read_text().strip()
        wheels = sorted((wheel_cache() / digest).glob("*.whl"))
        if wheels:
            return wheels, digest
    except OSError:
        pass
    wheels, digest = _make_wheels()
    try:
        known.parent.mkdir(parents=True, exist_ok=True)
        known.write_text(digest + "\n")
    except OSError:
        pass
    return wheels, digest


def _make_wheels() -> tuple[list[Path], str]:
    tmp = wheel_cache() / f".build-{os.getpid()}"
    wheels = W.node_wheels(tmp)
    digest = package_digest(wheels)
    dest = wheel_cache() / digest
    if not dest.exists():
        tmp.rename(dest)
    else:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return sorted(dest.glob("*.whl")), digest


def _tar(paths: Sequence[Path]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for p in paths:
            t.add(p, arcname=p.name)
    return buf.getvalue()


def node_facts(host: str, names: Sequence[str], marker: str | None, timeout: float = FACTS_TIMEOUT) -> dict[str, Any]:
    """The node's :data:`~clusterbench.cluster.facts.SNIPPET` document (with ``rtt_s`` and the head's
    clock around it), or EnvironmentProblem naming the host."""
    from clusterbench.launch import remote

    t = remote.transport(host)
    argv = ["python3", "-c", F.SNIPPET, *names] + (["--marker", marker] if marker else [])
    t0 = time.time()
    p = remote.run_command(t, argv, timeout=timeout)
    t1 = time.time()
    if p.returncode != 0:
        err = [ln.strip() for ln in (p.stderr or "").splitlines() if ln.strip()]
        if p.returncode == 127 or (err and "not found" in err[-1]):
            raise EnvironmentProblem(f"{host} has no python3", "install Python 3.10 or newer there (apt-get install python3)")
        raise EnvironmentProblem(f"{host}: asking it what it is failed: {err[-1] if err else f'exit {p.returncode}'}",
                                 f"run `ssh {host} python3 -V` by hand")
    try:
        doc = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])
    except (IndexError, ValueError):
        raise EnvironmentProblem(f"{host} printed no JSON about itself", f"run `ssh {host} python3 -V` by hand") from None
    doc.update(head_sent=t0, head_received=t1, rtt_s=t1 - t0, transport=t.kind)
    return doc


def _install_one(host: str, wheels: list[Path], digest: str, blob: bytes, timeout: float) -> dict[str, Any]:
    from clusterbench.launch import remote

    t = remote.transport(host)
    wdir = f"{WHEEL_DIR}/{digest}"
    names = " ".join(shlex.quote(w.name) for w in wheels)
    marker = json.dumps({"version": __version__, "digest": digest, "installed": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    script = (
        "set -e; cd \"$HOME\"; "
        f"rm -rf {wdir}.part; mkdir -p {wdir}.part; tar xf - -C {wdir}.part; rm -rf {wdir}; mv {wdir}.part {wdir}; "
        f"rm -f {MARKER}; mkdir -p $(dirname {VENV}); "
        f"python3 -c {shlex.quote(W.INSTALL_SNIPPET)} {VENV} "
        f"$(for w in {names}; do printf '{wdir}/%s ' \"$w\"; done); "
        f"printf '%s\\n' {shlex.quote(marker)} > {MARKER}.part && mv {MARKER}.part {MARKER}"
    )
    p = remote.run_command(t, ["sh", "-c", script], timeout=timeout, input=blob)
    if p.returncode != 0:
        lines = [ln.strip() for ln in (p.stderr or "").splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit {p.returncode}"
        remote.run_command(t, ["sh", "-c", f'cd "$HOME"; rm -rf {wdir}.part {MARKER}.part'], timeout=30)
        if "No space left" in (p.stderr or ""):
            raise EnvironmentProblem(f"{host}: no space left in its home directory while installing",
                                     f"free space on {host} (clusterbench needs about 30 MB), then install again")
        if "ensurepip" in (p.stderr or "") or "venv" in why:
            raise EnvironmentProblem(f"{host}: python3 cannot make a virtual environment ({why})",
                                     "install python3-venv there (apt-get install python3-venv)")
        raise EnvironmentProblem(f"{host}: installing failed: {why}", f"run the install again; if it persists, "
                                 f"look at `ssh {host} {VENV}/bin/python -m pip --version`")
    return {"status": "installed", "digest": digest}


def mpi_kernel_requests() -> list[dict[str, Any]]:
    """How the head builds every MPI kernel (each multi-node benchmark's own ``prepare``, so what a
    node gets is what a run would ask it for)."""
    from clusterbench.benchmarks import all_benchmarks
    from clusterbench.benchmarks.base import RunContext
    from clusterbench.kernels.build import REQUESTS
    from clusterbench.probe import probe

    before = set(REQUESTS)
    ctx = RunContext(probe=probe(), profile="quick", timeout=600)
    for name, cls in all_benchmarks().items():
        if "hosts" not in {p.name for p in cls.params}:
            continue
        try:
            cls().prepare(ctx, {p.name: p.default for p in cls.params})
        except Exception:  # a benchmark this head cannot prepare (no FFTW, say): not shipped  # noqa: BLE001
            continue
    from clusterbench.kernels.build import build_kernel
    from clusterbench.launch.mpi import detect_mpi

    try:  # preflight's MPI hello too
        build_kernel("hello", openmp=False, cc=detect_mpi().mpicc)
    except Exception:  # noqa: BLE001
        pass
    return [r for k, r in REQUESTS.items() if k not in before and r.get("cc", "") and "mpi" in (r.get("cc") or "")]


def install(hosts: Sequence[str], *, kernels: bool = True, timeout: float = NODE_TIMEOUT,
            say: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Install on every host (see the module docstring); the per-node report."""
    from clusterbench.launch import nodes

    hosts = list(dict.fromkeys(hosts))
    if not hosts:
        raise UsageError("no hosts to install on", "give --hosts A,B or --hostfile FILE")
    t0 = time.monotonic()
    wheels, digest = prepare_wheels()
    say(f"wheels: {', '.join(w.name for w in wheels)} (digest {digest})")
    marker = Path.home() / ".cache" / "clusterbench" / f".shared-home-{uuid.uuid4().hex[:12]}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("clusterbench cluster install looks for this file on the nodes\n")
    blob = _tar(wheels)
    report: dict[str, dict[str, Any]] = {}

    def one(host: str) -> dict[str, Any]:
        row: dict[str, Any] = {"host": host}
        try:
            f = node_facts(host, [], str(marker))
        except EnvironmentProblem as exc:
            return {**row, "status": "failed", "error": str(exc)}
        missing, cmd = F.missing_packages(f)
        row.update(hostname=f.get("hostname"), home=f.get("home"), python=f.get("python"),
                   machine=f.get("machine"), missing=missing, install_command=cmd)
        if not f.get("python_ok"):
            return {**row, "status": "failed",
                    "error": f"{host} has Python {f.get('python')}; clusterbench needs 3.10 or newer; "
                             "install a newer python3 there"}
        inst = f.get("installed") or {}
        if f.get("marker"):
            row["shared_home"] = True
        lacking = [w for w in missing if w in F.REQUIRED]
        if lacking:  # nothing is installed on a node that could not run it: no half install
            return {**row, "status": "failed",
                    "error": f"{host} lacks {' and '.join(lacking)}"
                             + (f"; install with (on {host}): {cmd}" if cmd else
                                f"; install {', '.join(missing)} with its package manager")}
        if inst.get("digest") == digest and f.get("venv_python"):
            return {**row, "status": "already installed", "digest": digest}
        try:
            row.update(_install_one(host, wheels, digest, blob, timeout))
        except EnvironmentProblem as exc:
            return {**row, "status": "failed", "error": str(exc)}
        return row

    # the first host goes first: with a shared $HOME its install serves the others, which find it
    report[hosts[0]] = one(hosts[0])
    if len(hosts) > 1:
        with ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, len(hosts) - 1)) as pool:
            for h, r in zip(hosts[1:], pool.map(one, hosts[1:])):
                report[h] = r
    marker.unlink(missing_ok=True)
    ok = [h for h, r in report.items() if r["status"] != "failed"]
    kernel_note = None
    if kernels and ok:
        reqs = mpi_kernel_requests()
        if not reqs:
            kernel_note = "no MPI kernel could be prepared on this head (is an MPI installed here?); they are " \
                          "built on the nodes at the first run"
        try:
            staged = nodes.stage_requests(ok, reqs, say=say)
            for h in ok:
                report[h]["kernels"] = sorted({d["info"]["kernel"] for d in staged[h]})
        except EnvironmentProblem as exc:
            kernel_note = str(exc)
    failed = [h for h, r in report.items() if r["status"] == "failed"]
    return {"install_schema": INSTALL_SCHEMA, "version": __version__, "digest": digest,
            "wheels": [w.name for w in wheels], "nodes": report, "failed": failed, "kernels_error": kernel_note,
            "seconds": round(time.monotonic() - t0, 2)}


def format_install(doc: dict[str, Any]) -> list[str]:
    lines = [f"clusterbench {doc['version']} (digest {doc['digest']}) on {len(doc['nodes'])} node(s), "
             f"{doc['seconds']:.1f} s"]
    for h, r in doc["nodes"].items():
        state = r["status"] + (" (shared home)" if r.get("shared_home") else "")
        k = f"; kernels: {', '.join(r['kernels'])}" if r.get("kernels") else ""
        lines.append(f"  {h}: {state}" + (f": {r['error']}" if r.get("error") else "") + k)
        if r.get("missing") and r["status"] != "failed":  # a failed node's error says it, in one line
            lines.append(f"  {h}: missing {', '.join(r['missing'])}"
                         + (f"; install with: {r['install_command']}" if r.get("install_command") else ""))
    if doc.get("kernels_error"):
        lines.append(f"kernels: {doc['kernels_error']}")
    return lines
