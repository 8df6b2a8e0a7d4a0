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

**Found again without Python.** Every launch across separate machines asks each node whether its
build is still there (``ensure``); answered by Python that costs ~0.15 s of cpu per node here (the
interpreter, its imports, the compiler's version and ``-show``), more on a small board, at every
command. So linking a build also leaves a *stamp* beside its link: the answer, the files the build's
key depends on (the binary, the kernel's sources, this clusterbench, the compiler as found on PATH,
an MPI wrapper's compiler and data files, the package database) and their fingerprint
(:data:`FINGERPRINT`: size, times and inode of each, the environment a build reads, the boot). The
head first runs :func:`fast_ensure_script` (a few shell commands) and takes the stamp's answer while
the fingerprint is unchanged - the way ccache trusts a compiler by its size and time; anything else
(a file changed, moved or gone, a reboot, another PATH, no stamp) falls back to Python's ``ensure``
in the same ssh session.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import subprocess
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


def _write(path: Path, text: str, mode: int | None = None) -> None:
    """``text`` into ``path`` at once (a reader sees the old file or the new, never a part)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)


def _write_if_changed(path: Path, text: str) -> None:
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    _write(path, text, 0o755)


#: the fingerprint of the files listed in the file ``$1`` (one path per line, no blanks in a path) as
#: ``sh`` prints it: the boot (a CPU or kernel swap needs one), the environment a build reads, and
#: size, modification and change time and inode of every file (``stat -L``: through an alternatives
#: link to its target of the day)
FINGERPRINT = ('cat /proc/sys/kernel/random/boot_id; env | LC_ALL=C grep -E '
               '"^(PATH|CC|CFLAGS|LDFLAGS|CPATH|C_INCLUDE_PATH|LIBRARY_PATH|OMPI_[A-Z_]+|MPICH_[A-Z_]+|'
               'CLUSTERBENCH_CACHE|XDG_CACHE_HOME)="| LC_ALL=C sort; stat -L -c "%n %s %.9Y %.9Z %i" $(cat "$1")')
#: package databases: any package installed, removed or upgraded changes them
_PACKAGE_DBS = ("/var/lib/dpkg/status", "/var/lib/rpm/rpmdb.sqlite", "/var/lib/rpm/Packages")


def launch_name(request: dict[str, Any]) -> str:
    """The launch path's file name for ``request`` (``<name>-<tag>``), the same on every node."""
    return f"{request['name']}-{launch_tag(request)}"


def fast_ensure_script() -> str:
    """A one-line ``sh`` script, argv ``launch_name...``: prints the JSON list of the stamps' answers
    (what ``ensure`` would print, with ``"stamped": true``) when every one is there and its fingerprint unchanged; else exits 3
    having printed nothing. The cache folder is found as :func:`~clusterbench.kernels.build.cache_dir`
    finds it."""
    return ('read h < /proc/sys/kernel/hostname || exit 3; '
            'if [ -n "$CLUSTERBENCH_CACHE" ]; then b="$CLUSTERBENCH_CACHE/launch"; '
            'else b="${XDG_CACHE_HOME:-$HOME/.cache}/clusterbench/launch"; fi; '
            f'fp() {{ {FINGERPRINT}; }}; '
            'out=; for k in "$@"; do s="$b/$h/$k"; '
            '[ -x "$b/$k" ] && [ -x "$s" ] && [ -f "$s.answer" ] && [ -f "$s.check" ] || exit 3; '
            '[ "$(fp "$s.files" 2>&1)" = "$(cat "$s.check")" ] || exit 3; '
            'out="$out${out:+,}$(cat "$s.answer")"; done; printf "[%s]\\n" "$out"')


def _key_files(request: dict[str, Any], binary: Path, info: dict[str, Any]) -> list[str] | None:
    """The files whose change may change ``request``'s build key on this node (see the module's
    docstring), or None when one cannot be listed for the shell (a blank in its path)."""
    import clusterbench
    from clusterbench.kernels.build import INCLUDE_DIR, _wrapper_identity, kernel_source

    files = [str(binary), clusterbench.__file__, str(kernel_source(str(request["name"]))),
             *sorted(str(p) for p in INCLUDE_DIR.glob("*.h"))]
    words = shlex.split(str(info.get("compiler") or ""))
    if not words:
        return None
    # every word that is a program: "ccache gcc" (a launcher word), the wrapper as found on PATH
    files += [f for f in (shutil.which(w) for w in words if not w.startswith("-")) if f]
    if os.path.basename(words[-1]).startswith("mpi"):  # an MPI wrapper: the compiler it runs, its data
        show = _wrapper_identity(str(info["compiler"])).split("\n", 1)
        inner = shlex.split(show[1])[:1] if len(show) > 1 and show[1].strip() else []
        found = shutil.which(inner[0]) if inner else None
        if found:
            files.append(found)
        data = Path(os.path.realpath(words[0])).parents[1] / "share" / "openmpi"
        files += sorted(str(p) for p in data.glob(f"{os.path.basename(words[0])}*-wrapper-data.txt"))
    files += [db for db in _PACKAGE_DBS if os.path.exists(db)]
    files = list(dict.fromkeys(files))
    if any(not f or any(c.isspace() for c in f) for f in files):
        return None
    return files


def _stamp(request: dict[str, Any], link: Path, answer: dict[str, Any]) -> None:
    """Leave ``answer`` beside ``link`` with the fingerprint :func:`fast_ensure_script` checks; no
    stamp (the next launch asks Python) when the fingerprint cannot be taken whole."""
    stale = [Path(f"{link}.{ext}") for ext in ("check", "answer", "files")]
    for p in stale:  # first: no answer is ever taken for a build whose files are being replaced
        with contextlib.suppress(OSError):
            p.unlink()
    files = _key_files(request, Path(answer["binary"]), answer["info"])
    if files is None:
        return
    _write(Path(f"{link}.files"), "\n".join(files) + "\n")
    try:
        p = subprocess.run(["sh", "-c", FINGERPRINT, "cb-stamp", f"{link}.files"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return
    stats = (p.stdout or "").splitlines()[-len(files):]
    if p.returncode != 0 or p.stderr or [ln.split(" ", 1)[0] for ln in stats] != files:
        return  # no stat, a file gone already: Python answers every time
    _write(Path(f"{link}.answer"), json.dumps({**answer, "stamped": True}) + "\n")
    _write(Path(f"{link}.check"), p.stdout)


def _plan(request: dict[str, Any]):
    from clusterbench.kernels.build import plan_kernel

    return plan_kernel(str(request["name"]), tuple(request.get("libs") or ()), tuple(request.get("extra_flags") or ()),
                       bool(request.get("openmp", True)), request.get("cc"))


def _link(request: dict[str, Any], binary: Path, info: dict[str, Any]) -> dict[str, Any]:
    host = Path("/proc/sys/kernel/hostname").read_text().strip()
    base = cache_dir().parent / "launch"
    name = launch_name(request)
    (base / host).mkdir(parents=True, exist_ok=True)
    link = base / host / name
    tmp = base / host / f".{name}.{os.getpid()}"
    os.symlink(binary, tmp)
    os.replace(tmp, link)
    wrapper = base / name
    _write_if_changed(wrapper, _WRAPPER.format(name=request["name"], base=base, file=name))
    doc = {"host": host, "launch": str(wrapper), "binary": str(binary), "info": info, "version": __version__}
    _stamp(request, link, {**doc, "key": info["cache_key"], "built": True})
    return doc


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
