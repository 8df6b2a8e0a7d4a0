"""Build a kernel on this node, for this node, and give it a path that is the same on every node.

``python -m clusterbench.kernels.stage REQUEST`` runs on each node of a multi-node launch (over ssh,
from :func:`clusterbench.launch.nodes.stage_program`); ``REQUEST`` is the JSON of how the head built
the kernel (:data:`clusterbench.kernels.build.REQUESTS`: name, libraries, flags, OpenMP, compiler
wrapper). The kernel is built here with this node's compiler for this node's CPU, cached under this
node's own key (:func:`~clusterbench.kernels.build.build_kernel`), never copied from the head.

One MPI launch names one program path for every rank, so each node also gets a *launch path*:
``<cache>/launch/<name>-<tag>``, a two-line shell script that is the same on every node and runs
``<cache>/launch/<host name>/<name>-<tag>``, a symlink to this node's own build. With separate home
directories each node has its own copies; with a shared ``$HOME`` on a mixed cluster the script is
shared and every node still runs the binary built for it. ``tag`` hashes the request and this
clusterbench's version (its kernel sources).

Prints one JSON line: ``{"host", "launch", "binary", "info", "version"}`` or ``{"error", "fix"}``.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from clusterbench import __version__
from clusterbench.errors import ClusterbenchError
from clusterbench.kernels.build import build_kernel, cache_dir

_WRAPPER = '#!/bin/sh\n# clusterbench: run this node\'s own build of {name}\nread h < /proc/sys/kernel/hostname\n' \
           'exec "{base}/$h/{file}" "$@"\n'


def launch_tag(request: dict[str, Any]) -> str:
    text = json.dumps([request, __version__], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _write_if_changed(path: Path, text: str) -> None:
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)


def _plan(request: dict[str, Any]):
    from clusterbench.kernels.build import plan_kernel

    return plan_kernel(str(request["name"]), tuple(request.get("libs") or ()), tuple(request.get("extra_flags") or ()),
                       bool(request.get("openmp", True)), request.get("cc"))


def _link(request: dict[str, Any], binary: Path, info: dict[str, Any]) -> dict[str, Any]:
    host = Path("/proc/sys/kernel/hostname").read_text().strip()
    base = cache_dir().parent / "launch"
    name = f"{request['name']}-{launch_tag(request)}"
    (base / host).mkdir(parents=True, exist_ok=True)
    link = base / host / name
    tmp = base / host / f".{name}.{os.getpid()}"
    os.symlink(binary, tmp)
    os.replace(tmp, link)
    wrapper = base / name
    _write_if_changed(wrapper, _WRAPPER.format(name=request["name"], base=base, file=name))
    return {"host": host, "launch": str(wrapper), "binary": str(binary), "info": info, "version": __version__}


def stage(request: dict[str, Any]) -> dict[str, Any]:
    """Build ``request`` here (or find it built) and return where a launcher finds it."""
    b = build_kernel(str(request["name"]), tuple(request.get("libs") or ()), tuple(request.get("extra_flags") or ()),
                     bool(request.get("openmp", True)), request.get("cc"))
    return _link(request, b.path, b.info)


def plan(request: dict[str, Any]) -> dict[str, Any]:
    """This node's cache key for ``request`` and whether it is built, without compiling."""
    p = _plan(request)
    return {"key": p.info["cache_key"], "built": p.built, "binary": str(p.binary), "version": __version__}


def ensure(request: dict[str, Any]) -> dict[str, Any]:
    """Linked as :func:`stage` when this node has the build already (``"built": true``); else its
    plan (``"built": false``, the key), so the head can copy it from a node with the same key."""
    p = _plan(request)
    if not p.built:
        return {"key": p.info["cache_key"], "built": False, "binary": str(p.binary), "version": __version__}
    return {**_link(request, p.binary, p.info), "key": p.info["cache_key"], "built": True}


def put(request: dict[str, Any], data: bytes) -> dict[str, Any]:
    """Keep ``data``, built by another node with the same key, then link it as :func:`stage` does."""
    from clusterbench.kernels.build import keep_binary

    b = keep_binary(_plan(request), data)
    return _link(request, b.path, b.info)


def main(argv: list[str] | None = None) -> int:
    """``stage [plan|ensure|build|put] JSON``: JSON is one request or a list of them (``put``: one, the
    binary on stdin); prints one JSON line (a document, or a list for a list)."""
    argv = sys.argv[1:] if argv is None else argv
    modes = {"plan": plan, "build": stage, "ensure": ensure}
    mode = argv[0] if argv and argv[0] in (*modes, "put") else "build"
    rest = argv[1:] if argv and argv[0] in (*modes, "put") else argv
    try:
        request = json.loads(rest[0])
        if mode == "put":
            out: Any = put(request, sys.stdin.buffer.read())
        else:
            fn = modes[mode]
            out = [fn(r) for r in request] if isinstance(request, list) else fn(request)
    except ClusterbenchError as exc:
        print(json.dumps({"error": exc.problem, "fix": exc.fix, "version": __version__}))
        return 3
    except (IndexError, ValueError, KeyError, TypeError) as exc:
        print(json.dumps({"error": f"bad stage request ({exc})", "fix": "report this as a bug",
                          "version": __version__}))
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
