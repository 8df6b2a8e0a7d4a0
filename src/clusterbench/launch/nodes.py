"""Separate machines: what a launch across them needs on each node before it starts.

A node is reached the one way :func:`clusterbench.launch.remote.transport` says (``ssh`` for a
real node and for the virtual cluster's machines, the namespace agent for the shared-filesystem
virtual cluster, nothing for this machine). On nodes reached by ssh nothing of the head's can be
assumed: not its files, not its CPU. So an MPI kernel is built on every such node by that node's
own clusterbench (:mod:`clusterbench.kernels.stage`, in parallel, cached under the node's key), and
the launch names the path each node gave, the same on all (:func:`stage_program`). A node whose
clusterbench is another version, or that cannot build, stops the launch before it starts, named.
"""
from __future__ import annotations

import contextlib
import json
import shlex
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from clusterbench import __version__
from clusterbench.errors import EnvironmentProblem
from clusterbench.kernels.build import request_for

#: seconds a node may take to build one kernel (a Raspberry Pi compiling hpl.c takes a while)
STAGE_TIMEOUT = 600.0
_MAX_WORKERS = 32
#: (host, request) -> the node's answer, for this process (tune hpl launches the same kernel often)
_STAGED: dict[tuple[str, str], dict[str, Any]] = {}
_LOCK = threading.Lock()


def forget_staged() -> None:
    """Forget what this process learnt of the nodes' kernels, as a new clusterbench process starts
    knowing nothing (the next :func:`stage_requests` asks every node again)."""
    with _LOCK:
        _STAGED.clear()
#: called with (host, the node's answer) for every node a launch runs a staged kernel on (see :func:`recording`)
_LISTENERS: list[Callable[[str, dict[str, Any]], None]] = []


@contextlib.contextmanager
def recording(listener: Callable[[str, dict[str, Any]], None]) -> Iterator[None]:
    """While inside, ``listener(host, doc)`` is told which build every separate machine runs, at
    each launch that stages a kernel there (:func:`stage_program`): ``doc`` has the node's
    ``binary`` and ``launch`` paths and its build ``info``. A run records it as its provenance
    (the head's own build never runs on those nodes)."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)


def separate(hosts: Sequence[str]) -> list[str]:
    """The hosts among ``hosts`` that are machines of their own (reached by ssh)."""
    from clusterbench.launch import remote

    return [h for h in dict.fromkeys(hosts) if remote.transport(h).kind == "ssh"]


def _call(host: str, mode: str, payload: Any, timeout: float, data: bytes | None = None) -> Any:
    """``python -m clusterbench.kernels.stage MODE PAYLOAD`` on ``host`` (here, in this process, when
    it is this machine or shares its filesystem); its JSON answer, or EnvironmentProblem naming it."""
    from clusterbench.kernels import stage as stage_mod
    from clusterbench.launch import remote

    t = remote.transport(host)
    if t.kind != "ssh":
        if mode in ("plan", "ensure"):
            return [(stage_mod.plan if mode == "plan" else stage_mod.ensure)(r) for r in payload]
        if mode == "put":
            return stage_mod.put(payload, data or b"")
        return [stage_mod.stage(r) for r in payload]
    argv = t.python_argv("-m", "clusterbench.kernels.stage", mode, json.dumps(payload))
    if mode == "ensure":  # the stamps' answers when nothing changed (a few shell commands), else Python
        argv = ["sh", "-c", f"( {stage_mod.fast_ensure_script()} ) || exec {shlex.join(argv)}", "cb-stage",
                *[stage_mod.launch_name(r) for r in payload]]
    p = remote.run_command(t, argv, timeout=timeout, input=data)
    lines = [ln for ln in (p.stdout or "").splitlines() if ln.startswith(("{", "["))]
    err = [ln.strip() for ln in (p.stderr or "").splitlines() if ln.strip()]
    try:
        doc = json.loads(lines[-1]) if lines else None
    except ValueError:
        doc = None
    if doc is None:
        why = err[-1] if err else f"exit {p.returncode}"
        if "No module named" in why or p.returncode == 127:
            raise EnvironmentProblem(f"clusterbench is not installed on {host}: it cannot build kernels there",
                                     f"run `clusterbench cluster install --hosts {host}`")
        raise EnvironmentProblem(f"building kernels on {host} failed: {why}",
                                 f"run `clusterbench cluster preflight --hosts {host}` to see what it lacks")
    if isinstance(doc, dict) and "error" in doc:
        raise EnvironmentProblem(f"{host}: {doc['error']}", doc.get("fix") or "see `clusterbench cluster preflight`")
    for d in doc if isinstance(doc, list) else [doc]:
        if d.get("version") != __version__:
            raise EnvironmentProblem(f"{host} runs clusterbench {d.get('version')}, this head {__version__}: its "
                                     "kernels would not be the ones measured here",
                                     f"run `clusterbench cluster install --hosts {host}` to install {__version__} there")
    return doc


def _fetch(host: str, path: str, timeout: float) -> bytes:
    from clusterbench.launch import remote

    t = remote.transport(host)
    if t.kind != "ssh":
        with open(path, "rb") as fh:
            return fh.read()
    p = remote.run_command(t, ["cat", path], timeout=timeout, raw=True)
    if p.returncode != 0:
        raise EnvironmentProblem(f"cannot read the kernel {path} built on {host}: {p.stderr.strip()}",
                                 "rerun; if it persists, clear that node's kernel cache")
    return p.stdout


def _parallel(jobs: dict[str, Any], fn: Any) -> dict[str, Any]:
    """``fn(host, job)`` for every host at once; the first failure (in host order) is raised,
    naming the other hosts that failed too."""
    if not jobs:
        return {}
    with ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, len(jobs))) as pool:
        futures = {h: pool.submit(fn, h, job) for h, job in jobs.items()}
    out, failed = {}, []
    for h, f in futures.items():
        try:
            out[h] = f.result()
        except EnvironmentProblem as exc:
            failed.append((h, exc))
    if failed:
        h, exc = failed[0]
        more = f" (also: {', '.join(x for x, _ in failed[1:])})" if len(failed) > 1 else ""
        raise EnvironmentProblem(exc.problem + more, exc.fix)
    return out


HEAD = "@head"  # the head itself as the source of a binary (its own build, when its key is a node's)


def stage_requests(hosts: Sequence[str], requests: Sequence[dict[str, Any]], *, timeout: float = STAGE_TIMEOUT,
                   say: Any = None) -> dict[str, list[dict[str, Any]]]:
    """Every request built for every host and linked at its launch path: host -> one answer per
    request. A kernel is compiled once per distinct cache key (same sources, compiler, flags,
    libraries and CPU give the same program) and copied to the other nodes with that key: from the
    head when its own build has the key, else from a node that has it, else it is built on one
    node of the group (the builds of several kernels spread over the group's nodes); a node that
    differs builds its own."""
    from clusterbench.kernels import stage as stage_mod

    hosts = list(dict.fromkeys(hosts))
    requests = list(requests)
    keys = [json.dumps(r, sort_keys=True) for r in requests]
    with _LOCK:
        todo = {h: [i for i, k in enumerate(keys) if (h, k) not in _STAGED] for h in hosts}
    todo = {h: idx for h, idx in todo.items() if idx}
    if not todo:
        with _LOCK:
            return {h: [_STAGED[(h, k)] for k in keys] for h in hosts}
    # one round trip per node: what it has is linked at once, what it lacks comes back as its plan
    plans = _parallel({h: [requests[i] for i in idx] for h, idx in todo.items()},
                      lambda h, reqs: _call(h, "ensure", reqs, 120.0))
    with _LOCK:
        for h, idx in list(todo.items()):
            for i, pl in zip(idx, plans[h]):
                if pl.get("built") and "launch" in pl:
                    _STAGED[(h, keys[i])] = pl
    head_plan: dict[int, dict[str, Any]] = {}
    for i in {i for idx in todo.values() for i in idx}:
        try:
            head_plan[i] = stage_mod.plan(requests[i])
        except Exception:  # the head cannot build it (another MPI): nodes build their own  # noqa: BLE001
            pass
    link: dict[str, list[int]] = {}  # host -> requests it builds (or finds built) and links
    copy: list[tuple[str, int, str]] = []  # (host, request, from: a host or HEAD)
    load: dict[str, int] = {}
    for i in sorted({i for idx in todo.values() for i in idx}):
        groups: dict[str, list[str]] = {}
        state = {}
        for h, idx in todo.items():
            if i in idx:
                pl = plans[h][idx.index(i)]
                groups.setdefault(pl["key"], []).append(h)
                state[h] = pl
        for key, members in groups.items():
            have = [h for h in members if state[h]["built"]]
            hp = head_plan.get(i)
            if have:
                source = have[0]
            elif hp and hp["key"] == key and hp["built"]:
                source = HEAD
            else:  # nobody has it: the least busy member of the group builds it
                source = min(members, key=lambda h: (load.get(h, 0), members.index(h)))
                load[source] = load.get(source, 0) + 1
            for h in members:
                if state[h]["built"]:
                    continue  # linked already by "ensure"
                if h == source:
                    link.setdefault(h, []).append(i)
                else:
                    copy.append((h, i, source))
    if say:
        say(f"kernels: {sum(load.values())} compiled on the nodes, {len(copy)} copied to nodes with the same key "
            f"({sum(1 for c in copy if c[2] == HEAD)} from the head's own builds)")
    built = _parallel({h: [requests[i] for i in idx] for h, idx in link.items()},
                      lambda h, reqs: _call(h, "build", reqs, timeout))
    with _LOCK:
        for h, idx in link.items():
            for i, doc in zip(idx, built[h]):
                _STAGED[(h, keys[i])] = doc
    blobs: dict[tuple[str, int], bytes] = {}
    for h, i, src in copy:
        if (src, i) not in blobs:
            path = head_plan[i]["binary"] if src == HEAD else _STAGED[(src, keys[i])]["binary"]
            blobs[(src, i)] = _fetch(src, path, timeout) if src != HEAD else open(path, "rb").read()
    per_host: dict[str, list[tuple[int, str]]] = {}
    for h, i, src in copy:
        per_host.setdefault(h, []).append((i, src))

    def put_all(h: str, items: list[tuple[int, str]]) -> list[dict[str, Any]]:
        return [_call(h, "put", requests[i], timeout, blobs[(src, i)]) for i, src in items]

    done = _parallel(per_host, put_all)
    with _LOCK:
        for h, items in per_host.items():
            for (i, _), doc in zip(items, done[h]):
                _STAGED[(h, keys[i])] = doc
        return {h: [_STAGED[(h, k)] for k in keys] for h in hosts}


def stage_program(hosts: Sequence[str], program: Sequence[str], *, timeout: float = STAGE_TIMEOUT) -> list[str]:
    """``program`` with its kernel replaced by the launch path every node built for itself, when
    some of ``hosts`` are separate machines; ``program`` unchanged otherwise (a local or
    shared-filesystem launch, or a program that is not a clusterbench kernel: an installed hpcc,
    a Python)."""
    if not program:
        return list(program)
    request = request_for(program[0])
    if request is None or not separate(hosts):
        return list(program)
    docs = stage_requests(hosts, [request], timeout=timeout)
    for h, d in docs.items():
        for listener in list(_LISTENERS):
            listener(h, d[0])
    paths = {d[0]["launch"] for d in docs.values()}
    if len(paths) > 1:
        by = ", ".join(f"{h}: {d[0]['launch']}" for h, d in docs.items())
        raise EnvironmentProblem(f"the nodes keep kernels under different paths ({by}): one launch needs one path",
                                 "give every node the same home directory path (the same user), or set "
                                 "CLUSTERBENCH_CACHE to the same folder on every node")
    return [paths.pop(), *program[1:]]


def staged_builds() -> dict[str, dict[str, Any]]:
    """host -> kernel -> the build info each node reported (for the run's provenance)."""
    out: dict[str, dict[str, Any]] = {}
    for (host, _), doc in _STAGED.items():
        out.setdefault(host, {})[doc["info"]["kernel"]] = doc["info"]
    return out
