"""``cluster preflight``: can this cluster run MPI? Every problem named, per node, in seconds.

Checked on every node at once, each bounded in time (a node that hangs is named, never waited for):

* **ssh** without prompts (BatchMode): a password prompt, an unknown or changed host key, a refused
  connection, a name that does not resolve, a node that does not answer: each named with its fix
  (:func:`clusterbench.launch.remote.ssh_problem`);
* the **name** each node calls itself against the name in the hostfile (Open MPI's daemons, and
  users, go by it), and every node resolving every other node and the head, forward and back
  (Open MPI's daemons and Hydra's proxies call back to the head);
* **versions**: clusterbench (the digest of its files), MPI, the compiler, BLAS: differences named;
* **addresses several nodes share** (a container or VM bridge): a warning with the network to give
  MPI's TCP transport (``--tcp-include``);
* **free memory** per node and the **clock offset** of each node to the head (midpoint of the ssh
  round trip; per-node energy and timelines depend on it), with its uncertainty;
* an **MPI launch** across every rank the hostfile allows (``hostname`` under the MPI's launcher),
  and, where clusterbench is installed on every node, an **MPI hello** (:file:`kernels/mpi/hello.c`:
  allreduce and ring exchange checked) with the time it took.

:func:`quick` is the subset every multi-node command runs first (ssh, names, versions), cached for
:data:`CACHE_S` seconds per host set.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clusterbench.cluster import rules
from clusterbench.errors import EnvironmentProblem, UsageError

PREFLIGHT_SCHEMA = 1


def timeout_scale() -> float:
    """``$CLUSTERBENCH_PREFLIGHT_SCALE`` (default 1, at least 1): the bounds below multiplied, for nodes
    slower than any real one (an emulated machine answers ssh and starts Python in seconds, not ms)."""
    try:
        return max(1.0, float(os.environ.get("CLUSTERBENCH_PREFLIGHT_SCALE", "1")))
    except ValueError:
        return 1.0


#: seconds one node may take to answer the facts query over ssh
NODE_TIMEOUT = 8.0 * timeout_scale()
#: seconds for the MPI launch and the hello
MPI_TIMEOUT = 20.0 * timeout_scale()
#: a passed quick preflight is trusted this long for the same hosts
CACHE_S = 600.0
_MAX_WORKERS = 64


def head_name(hosts: Sequence[str]) -> str:
    """The name the nodes know the head by: the virtual cluster's head, or this machine's name."""
    from clusterbench.launch import simcluster

    c = simcluster.load()
    if c is not None and c.machines and set(hosts) <= {n.name for n in c.nodes}:
        return c.head.name
    return socket.gethostname()


#: the node's side of the clock exchange: its time for every line the head sends
_CLOCK = "import sys, time\nfor _ in sys.stdin:\n    print(repr(time.time()), flush=True)\n"
CLOCK_ROUNDS = 8


class _Lines:
    """Lines from a child's stdout, each waited for until a deadline (os.read on the pipe: a line
    that never comes costs the time left, never a hang)."""

    def __init__(self, fd: int) -> None:
        import selectors

        self.fd, self.buf = fd, b""
        self.sel = selectors.DefaultSelector()
        self.sel.register(fd, selectors.EVENT_READ)

    def line(self, deadline: float) -> str | None:
        """The next line, or None: the child closed its stdout, or the deadline passed."""
        while b"\n" not in self.buf:
            if not self.sel.select(max(0.0, deadline - time.monotonic())):
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def close(self) -> None:
        self.sel.close()


def _clock_rounds(proc: Any, lines: _Lines, rounds: int, timeout: float) -> dict[str, float] | None:
    """The node's clock minus the head's, as NTP estimates it: ``rounds`` exchanges over the node's
    :data:`_CLOCK` loop; the one with the shortest round trip gives the offset (node time minus the
    midpoint of the round trip), half that round trip its uncertainty. None when it cannot answer."""
    best: tuple[float, float] | None = None
    deadline = time.monotonic() + timeout
    try:
        for _ in range(rounds):
            t0 = time.time()
            proc.stdin.write(b"t\n")
            proc.stdin.flush()
            line = lines.line(deadline)
            t1 = time.time()
            try:
                node_t = float(line or "")
            except ValueError:
                break
            rtt = t1 - t0
            if best is None or rtt < best[0]:
                best = (rtt, node_t - (t0 + t1) / 2)
    except (OSError, ValueError):
        pass
    if best is None:
        return None
    return {"offset_s": round(best[1], 5), "uncertainty_s": round(best[0] / 2, 5), "rounds": rounds}


def facts_and_clock(host: str, names: Sequence[str], timeout: float = NODE_TIMEOUT, rounds: int = CLOCK_ROUNDS
                    ) -> tuple[dict[str, Any], dict[str, float] | None]:
    """The node's facts (:data:`~clusterbench.cluster.facts.SNIPPET`, with ``rtt_s`` and the head's
    clock around it, as :func:`clusterbench.cluster.install.node_facts` gives them) and its clock
    offset (:func:`_clock_rounds`, None when it could not be measured), in one session and one
    Python on the node; EnvironmentProblem naming the host when it cannot say what it is."""
    import subprocess
    import tempfile

    from clusterbench import process
    from clusterbench.cluster import facts as F
    from clusterbench.launch import remote

    t = remote.transport(host)
    cmd = remote.command_argv(t, ["python3", "-S", "-u", "-c", F.SNIPPET + _CLOCK, *names])  # -S: stdlib only, no site (~40 ms less)
    env = None if t.kind == "ssh" else {**os.environ, **t.env}
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as err:
        t0 = time.time()
        try:
            with process.held_signals():
                proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                                        start_new_session=True, preexec_fn=process.die_with_parent(9))
        except FileNotFoundError as exc:
            raise EnvironmentProblem(f"cannot reach {t.host}: {exc.filename or cmd[0]} not found",
                                     "install it (ssh: openssh-client; ip: iproute2)") from exc
        assert proc.stdout is not None
        lines = _Lines(proc.stdout.fileno())
        doc: dict[str, Any] | None = None
        clock = None
        try:
            while doc is None:
                line = lines.line(deadline)
                if line is None:
                    break
                if line.startswith("{"):
                    try:
                        doc = json.loads(line)
                    except ValueError:
                        break
            t1 = time.time()
            if doc is not None:
                clock = _clock_rounds(proc, lines, rounds, timeout)
            else:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        finally:
            lines.close()
            rc = proc.poll()
            process.kill_session(proc)
            for fh in (proc.stdin, proc.stdout):
                try:
                    fh.close()  # type: ignore[union-attr]
                except OSError:
                    pass
        if doc is not None:
            doc.update(head_sent=t0, head_received=t1, rtt_s=t1 - t0, transport=t.kind)
            return doc, clock
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if rc is None:
        raise EnvironmentProblem(f"{t.host} did not answer within {timeout:g} s",
                                 f"check that the host is up and reachable (ssh {t.host} true)")
    if t.kind == "ssh" and rc == 255:
        raise EnvironmentProblem(*remote.ssh_problem(t.host, stderr))
    lines_err = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    if rc == 127 or (lines_err and "not found" in lines_err[-1]):
        raise EnvironmentProblem(f"{host} has no python3", "install Python 3.10 or newer there (apt-get install python3)")
    if rc != 0:
        raise EnvironmentProblem(f"{host}: asking it what it is failed: {lines_err[-1] if lines_err else f'exit {rc}'}",
                                 f"run `ssh {host} python3 -V` by hand")
    raise EnvironmentProblem(f"{host} printed no JSON about itself", f"run `ssh {host} python3 -V` by hand")


def _node(host: str, others: Sequence[str], head: str) -> dict[str, Any]:
    row: dict[str, Any] = {"host": host, "reachable": False, "problems": []}
    t0 = time.monotonic()
    try:
        f, clock = facts_and_clock(host, [*others, head])
    except EnvironmentProblem as exc:
        row["problems"].append(rules.problem(host, "ssh", exc.problem, exc.fix or ""))
        row["seconds"] = round(time.monotonic() - t0, 3)
        return row
    row.update(reachable=True, facts=f, clock=clock, seconds=round(time.monotonic() - t0, 3))
    row["problems"] += rules.node_problems(host, f)
    return row


def _clock(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    return {h: r["clock"] for h, r in rows.items() if r.get("clock")}


def _mpi_checks(hosts: Sequence[Any], installed: bool, allow_root: bool, mpi_kind: str | None) -> dict[str, Any]:
    """The MPI hello across every slot when clusterbench is installed everywhere: it proves the launch
    too (each rank reports its host), so the launch of ``hostname`` on every slot runs only where there
    is no hello, or to tell why the hello failed (one MPI launch across 32 machines instead of two)."""
    from clusterbench.benchmarks.mpi.common import sim_cluster_of
    from clusterbench.launch import mpi as M
    from clusterbench.launch import simcluster

    out: dict[str, Any] = {}
    mpi = M.detect_mpi(kind=mpi_kind)
    spec = M.LaunchSpec(nranks=sum(h.slots for h in hosts), hosts=list(hosts), transport="auto",
                        allow_root=allow_root, oversubscribe=True, prove_transport=False, launcher="mpirun")
    sim = sim_cluster_of(list(hosts))
    if sim is not None:
        spec.prefix = simcluster.exec_prefix(sim.head, sim)
        spec.sim = sim
        spec.tcp_include = sim.subnet
        # its machines share this machine's cpus: a rank waiting in MPI gives its core up instead of
        # spinning out its time slice (32 ranks on 2 cores: the hello's exchange 2 s -> 0.2 s)
        spec.yield_when_idle = spec.nranks > (os.cpu_count() or 1)
    if installed:
        out["hello"] = _hello(mpi, spec)
        if out["hello"].get("ok"):
            launch = {"command": "the MPI hello's launch", "by_hello": True, "seconds": out["hello"]["seconds"], "ok": True,
                      "ranks": out["hello"]["ranks"], "hosts": out["hello"].pop("hosts")}
            return {"launch": launch, "hello": out["hello"]}
    out["launch"] = launch = _hostname_launch(mpi, spec)
    if not installed or not launch["ok"]:  # the launch's own failure says why (as when the hello never ran)
        out["hello"] = {"skipped": "clusterbench is not installed on every node" if not installed
                        else "the MPI launch failed"}
    return {"launch": out["launch"], "hello": out["hello"]}


def _hostname_launch(mpi: Any, spec: Any) -> dict[str, Any]:
    """``hostname`` on every slot through the MPI's launcher: the ranks and hosts it reached, or why not."""
    import tempfile

    from clusterbench import process
    from clusterbench.launch import mpi as M

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cb-preflight-") as wd:
        cmd, env = M.build_command(mpi, spec, ["hostname"], wd)
        try:
            p = process.run([*spec.prefix, *cmd], env={**os.environ, **env}, timeout=MPI_TIMEOUT)
            rc, text = p.returncode, (p.stdout or "") + (p.stderr or "")
        except Exception as exc:  # a timeout, a missing launcher  # noqa: BLE001
            rc, text = None, str(exc)
    names = [ln.strip() for ln in text.splitlines() if ln.strip() and " " not in ln.strip()]
    launch = {"command": " ".join(cmd), "seconds": round(time.monotonic() - t0, 3), "ok": rc == 0,
              "ranks": len(names), "hosts": sorted(set(names))}
    if rc != 0:
        problem, fix = M.explain_failure(text, rc, "MPI launch of `hostname`")
        launch.update(problem=problem if rc is not None else f"MPI launch did not finish within {MPI_TIMEOUT:g} s",
                      fix=fix)
    return launch


def _hello(mpi: Any, spec: Any) -> dict[str, Any]:
    """The MPI hello kernel across every slot (an allreduce and a ring exchange, checked): its time,
    and the host every rank reported."""
    from clusterbench.kernels.build import build_kernel
    from clusterbench.launch import mpi as M

    b = build_kernel("hello", openmp=False, cc=mpi.mpicc)
    t0 = time.monotonic()
    try:
        run = M.run_mpi(mpi, spec, [str(b.path)], timeout=MPI_TIMEOUT, launch_timeout=MPI_TIMEOUT, name="hello")
        res = next((r for r in run.records if r.get("type") == "result"), None)
        return {"ok": res is not None, "seconds": round(time.monotonic() - t0, 3),
                "exchange_s": res["samples"][0] if res else None, "ranks": run.info.get("nranks"),
                "mpi_library": run.info.get("mpi_library"),
                "hosts": sorted({str(r.get("host")) for r in run.info.get("ranks") or []})}
    except EnvironmentProblem as exc:  # (the hostname launch then tells whether the launch itself works)
        return {"ok": False, "problem": exc.problem, "fix": exc.fix, "seconds": round(time.monotonic() - t0, 3)}
    except Exception as exc:  # KernelFailed: the launch or the exchange failed  # noqa: BLE001
        return {"ok": False, "problem": getattr(exc, "problem", str(exc)), "fix": getattr(exc, "fix", ""),
                "seconds": round(time.monotonic() - t0, 3)}


def preflight(hosts: Sequence[Any], *, mpi: bool = True, allow_root: bool = False, mpi_kind: str | None = None,
              repeats: dict[str, list[int]] | None = None, say: Callable[[str], None] = lambda s: None
              ) -> dict[str, Any]:
    """The full preflight of ``hosts`` (:class:`~clusterbench.launch.mpi.hosts.Host` list);
    ``repeats``: host names the hostfile lists on several lines (their line numbers)."""
    from clusterbench.cluster.install import prepare_wheels

    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        raise UsageError(f"the hostfile names {next(n for n in names if names.count(n) > 1)} twice",
                         "name each node once, with slots=N for its ranks")
    t0 = time.monotonic()
    head = head_name(names)
    with ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, len(names))) as pool:
        rows = dict(zip(names, pool.map(lambda h: _node(h, [n for n in names if n != h], head), names)))
    _, digest = prepare_wheels()
    problems = [p for r in rows.values() for p in r["problems"]]
    problems += rules.differences(rows, digest)
    for h, lines in (repeats or {}).items():
        slots = next((x.slots for x in hosts if x.name == h), None)
        problems.append(rules.problem(h, "hostfile", f"the hostfile names {h} on lines {', '.join(map(str, lines))}: "
                                 f"Open MPI adds their slots up ({slots})",
                                 f"name {h} once, with the slots you mean: {h} slots=N"))
    clock = _clock(rows)
    problems += rules.clock_problems(clock)
    for h in hosts:
        f = rows[h.name].get("facts") or {}
        if f.get("cpus") and h.slots > f["cpus"]:
            problems.append(rules.problem(h.name, "slots", f"the hostfile gives {h.name} {h.slots} slots, it has "
                                     f"{f['cpus']} cpus", f"write {h.name} slots={f['cpus']} (or fewer)"))
    reach = [h for h in hosts if rows[h.name]["reachable"]]
    installed = all((rows[h.name].get("facts") or {}).get("installed", {}) and
                    (rows[h.name]["facts"]["installed"] or {}).get("digest") == digest for h in hosts)
    mpi_doc: dict[str, Any] = {}
    if mpi and len(reach) == len(hosts) and not [p for p in problems if p["check"] in ("name", "resolve")]:
        mpi_doc = _mpi_checks(hosts, installed, allow_root, mpi_kind)
        for key in ("launch", "hello"):
            d = mpi_doc.get(key) or {}
            if d.get("problem"):
                problems.append(rules.problem("all", f"mpi-{key}", d["problem"], d.get("fix") or ""))
    elif mpi:
        mpi_doc = {"skipped": "fix the problems above first: MPI needs every node reachable and named right"}
    warnings = rules.shared_addresses(rows)
    doc = {"preflight_schema": PREFLIGHT_SCHEMA, "hosts": names, "head": head, "ok": not problems,
           "problems": problems, "warnings": warnings, "nodes": {h: {k: v for k, v in r.items() if k not in ("facts", "clock")} |
                                           {"facts": _brief(r.get("facts"))} for h, r in rows.items()},
           "clock": clock, "mpi": mpi_doc, "digest": digest, "seconds": round(time.monotonic() - t0, 3)}
    _remember(names, doc)
    return doc


def _brief(f: dict[str, Any] | None) -> dict[str, Any] | None:
    if not f:
        return None
    keep = ("hostname", "home", "user", "python", "machine", "cpus", "mem_available", "mem_total", "home_free", "cc",
            "mpirun", "blas", "installed", "os", "rdma")
    return {k: f.get(k) for k in keep}


def _cache_file(names: Sequence[str]) -> Path:
    base = os.environ.get("CLUSTERBENCH_CACHE")
    root = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clusterbench"
    from clusterbench.launch import simcluster

    ident: list[str] = []
    c = simcluster.load()
    if c is not None and set(names) & {n.name for n in c.nodes}:  # a virtual cluster brought up again is another
        ident = [c.state_file, c.created]
    key = hashlib.sha256(json.dumps([sorted(names), ident]).encode()).hexdigest()[:16]
    return root / "preflight" / f"{key}.json"


def _remember(names: Sequence[str], doc: dict[str, Any]) -> None:
    path = _cache_file(names)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(json.dumps({"time": time.time(), "ok": doc["ok"], "digest": doc["digest"],
                                    "rdma": bool(doc.get("rdma"))}))
        tmp.replace(path)
    except OSError:
        pass


def quick(hosts: Sequence[str], *, rdma: bool = False) -> None:
    """Before a multi-node run across separate machines: ssh, names, resolution and versions, on
    every node at once (cached for :data:`CACHE_S` s after a pass), and with ``rdma`` (the run asks
    ``--transport rdma``) an RDMA port up on every node. Raises EnvironmentProblem with the first
    problem, naming the node and the fix; nothing has been started or stored."""
    from clusterbench.cluster.install import prepare_wheels
    from clusterbench.launch import nodes

    remote_hosts = nodes.separate(hosts)
    if not remote_hosts:
        return
    names = list(dict.fromkeys(hosts))
    _, digest = prepare_wheels()
    try:
        cached = json.loads(_cache_file(names).read_text())
        if cached.get("ok") and cached.get("digest") == digest and time.time() - cached["time"] < CACHE_S \
                and (cached.get("rdma") or not rdma):
            return
    except (OSError, ValueError, KeyError):
        pass
    head = head_name(names)
    with ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, len(remote_hosts))) as pool:
        rows = dict(zip(remote_hosts, pool.map(lambda h: _node(h, [n for n in names if n != h], head), remote_hosts)))
    problems = [p for r in rows.values() for p in r["problems"] if p["check"] != "memory"]
    # a node without MPI or the compiler first: installing clusterbench there is no fix before that
    diffs = rules.differences(rows, digest)
    problems += [p for p in diffs if p["check"] == "software" and p["problem"].endswith(("no MPI", "no compiler"))]
    problems += [p for p in diffs if p["check"] == "version"]
    if rdma:
        problems += rules.rdma_problems(rows)
    if problems:
        p = problems[0]
        more = len(problems) - 1
        raise EnvironmentProblem(p["problem"] + (f" (and {more} more problem(s): clusterbench cluster preflight)"
                                                 if more else ""), p["fix"])
    _remember(names, {"ok": True, "digest": digest, "rdma": rdma})


def format_preflight(doc: dict[str, Any], hosts_arg: str | None = None) -> list[str]:
    """The report in lines; ``hosts_arg`` (e.g. ``--hostfile nodes``) is how a fix that concerns
    every node names them."""
    lines = [f"preflight of {len(doc['hosts'])} node(s) from {doc['head']}: "
             + ("ready" if doc["ok"] else f"{len(doc['problems'])} problem(s)") + f" ({doc['seconds']:.1f} s)"]
    for h, r in doc["nodes"].items():
        f = r.get("facts") or {}
        c = doc["clock"].get(h)
        inst = (f.get("installed") or {}) if f else {}
        lines.append(f"  {h}: " + (f"{f.get('hostname')}, {f.get('machine')}, {f.get('cpus')} cpus, "
                                   f"{(f.get('mem_available') or 0) / 2**30:.1f} GiB free, python {f.get('python')}, "
                                   f"clusterbench {inst.get('version') or '-'}"
                                   + (f", clock {1e3 * c['offset_s']:+.2f} ms (+-{1e3 * c['uncertainty_s']:.2f})"
                                      if c else "")
                                   + f", answered in {r['seconds']:.2f} s"
                                   if r["reachable"] else "unreachable"))
    m = doc.get("mpi") or {}
    if m.get("launch"):
        la = m["launch"]
        lines.append(f"  MPI launch: {'ok' if la['ok'] else 'FAILED'}, {la['ranks']} rank(s) on {len(la['hosts'])} node(s)"
                     + (" (the hello's)" if la.get("by_hello") else f" in {la['seconds']:.2f} s"))
    if m.get("hello"):
        he = m["hello"]
        lines.append("  MPI hello: " + (f"skipped ({he['skipped']})" if "skipped" in he else
                                        f"ok, {he.get('ranks')} ranks exchanged data, {he['seconds']:.2f} s"
                                        if he.get("ok") else "FAILED"))
    if m.get("skipped"):
        lines.append(f"  MPI: skipped ({m['skipped']})")
    # the same problem on several nodes is said once, with the nodes named
    groups: dict[tuple[str, str, str], list[str]] = {}
    for p in doc["problems"]:
        node = p["node"]
        key = (p["check"], p["problem"].replace(node, "{node}") if node != "all" else p["problem"],
               (p["fix"] or "").replace(node, "{node}") if node != "all" else p["fix"] or "")
        groups.setdefault(key, []).append(node)
    for (check, problem, fix), nodes in groups.items():
        if hosts_arg and set(nodes) == set(doc["hosts"]) and "--hosts {node}" in fix:
            fix = fix.replace("--hosts {node}", hosts_arg)
        lines.append(f"problem [{check}] {problem.replace('{node}', rules.nodes_text(nodes))}; "
                     f"fix: {fix.replace('{node}', ','.join(nodes))}")
    for w in doc.get("warnings") or []:
        lines.append(f"warning [{w['check']}] {w['problem']}; fix: {w['fix']}")
    return lines
