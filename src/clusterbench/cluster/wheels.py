"""Wheels of this clusterbench and of the Python packages a node needs, made on the head, offline.

A node may have no internet (a Raspberry Pi cluster behind its head, a university cluster's compute
nodes), so ``cluster install`` ships everything from the head: a wheel of this very clusterbench,
built from its installed package (sources, kernels' C files, data), and a wheel of each pure-Python
distribution it needs on a node (``rich`` and what ``rich`` needs), rebuilt from the files the head
has installed (their ``RECORD``), so no package index is asked. Both are plain PEP 427 wheels that
``pip install --no-index --find-links`` takes.

A node does not get matplotlib (and numpy): plots are drawn on the head, where ``report`` runs.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import io
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path

from clusterbench import __version__
from clusterbench.errors import EnvironmentProblem

#: the distributions a node needs (their own requirements follow), not the head's plotting stack
NODE_REQUIRES = ("rich",)
_PKG_ROOT = Path(__file__).resolve().parents[1]  # src/clusterbench (or site-packages/clusterbench)
_SKIP = re.compile(r"(^|/)__pycache__/|\.pyc$")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(dest: Path, dist: str, version: str, files: Iterable[tuple[str, bytes]], metadata: str,
                 wheel_text: str, extra_info: dict[str, str] | None = None) -> Path:
    """A wheel at ``dest/<dist>-<version>-py3-none-any.whl`` from ``(archive name, bytes)`` pairs."""
    norm = re.sub(r"[-_.]+", "_", dist)
    info = f"{norm}-{version}.dist-info"
    path = dest / f"{norm}-{version}-py3-none-any.whl"
    records = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        def add(name: str, data: bytes) -> None:
            zi = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible: same files, same wheel
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
            records.append(_record_line(name, data))

        for name, data in sorted(files):
            add(name, data)
        add(f"{info}/METADATA", metadata.encode())
        add(f"{info}/WHEEL", wheel_text.encode())
        for name, text in (extra_info or {}).items():
            add(f"{info}/{name}", text.encode())
        records.append(f"{info}/RECORD,,")
        z.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(records) + "\n")
    dest.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(path)
    return path


_WHEEL = "Wheel-Version: 1.0\nGenerator: clusterbench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def own_wheel(dest: Path) -> Path:
    """This clusterbench as a wheel (whatever way it was installed: editable, from a wheel)."""
    files = []
    for p in sorted(_PKG_ROOT.rglob("*")):
        rel = p.relative_to(_PKG_ROOT.parent).as_posix()
        if p.is_file() and not _SKIP.search(rel):
            files.append((rel, p.read_bytes()))
    reqs = "".join(f"Requires-Dist: {r}\n" for r in NODE_REQUIRES)
    meta = (f"Metadata-Version: 2.1\nName: clusterbench\nVersion: {__version__}\nRequires-Python: >=3.10\n{reqs}"
            "Summary: clusterbench, as installed on a node by `clusterbench cluster install` (no plotting)\n")
    entry = "[console_scripts]\nclusterbench = clusterbench.cli:main\n"
    return _write_wheel(dest, "clusterbench", __version__, files, meta, _WHEEL, {"entry_points.txt": entry})


def _requirements(dist: md.Distribution) -> list[str]:
    """The names of what ``dist`` requires outside its extras (markers on the Python version are
    kept: a node may run an older Python than the head)."""
    out = []
    for req in dist.requires or []:
        if "extra ==" in req or "extra==" in req:
            continue
        name = re.split(r"[\s;<>=!~\[(]", req.strip(), maxsplit=1)[0]
        if name:
            out.append(name)
    return out


def dep_wheel(dist: md.Distribution, dest: Path) -> Path:
    """A wheel of an installed pure-Python distribution, from the files its RECORD lists."""
    name, version = dist.metadata["Name"], dist.version
    wheel_text = dist.read_text("WHEEL") or _WHEEL
    if "Root-Is-Purelib: true" not in wheel_text:
        raise EnvironmentProblem(f"{name} {version} is not a pure-Python package: it cannot be shipped from this head "
                                 "to nodes of any CPU", f"install {name} on the nodes yourself")
    files = []
    info_dir = None
    for f in dist.files or []:
        rel = f.as_posix()
        if rel.startswith("..") or _SKIP.search(rel):
            continue  # console scripts (made again by pip on the node), byte code
        if ".dist-info/" in rel:
            info_dir = rel.split("/", 1)[0]
            if rel.endswith(("/RECORD", "/INSTALLER", "/REQUESTED", "/direct_url.json", "/METADATA", "/WHEEL")):
                continue
            rel = rel.split("/", 1)[1]  # written under the new dist-info by _write_wheel
            files.append(("@info@/" + rel, Path(f.locate()).read_bytes()))
            continue
        files.append((rel, Path(f.locate()).read_bytes()))
    if info_dir is None:
        raise EnvironmentProblem(f"{name} {version}: its installed files are not listed (no RECORD)",
                                 f"reinstall it on the head (pip install --force-reinstall {name})")
    norm = re.sub(r"[-_.]+", "_", name)
    info = f"{norm}-{version}.dist-info"
    files = [(n.replace("@info@", info), d) for n, d in files]
    return _write_wheel(dest, name, version, files, dist.read_text("METADATA") or "", wheel_text)


def node_wheels(dest: Path) -> list[Path]:
    """Every wheel a node needs, written into ``dest`` (built again only when missing)."""
    dest.mkdir(parents=True, exist_ok=True)
    out = [own_wheel(dest)]
    todo, seen = list(NODE_REQUIRES), set()
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # a requirement for another Python version, absent here
        norm = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
        have = dest / f"{norm}-{dist.version}-py3-none-any.whl"
        out.append(have if have.exists() else dep_wheel(dist, dest))
        todo += _requirements(dist)
    return out


#: The node's side of the install, with the node's own ``python3`` and its standard library only:
#: ``python3 -c INSTALL_SNIPPET VENV WHEEL...``. A virtual environment without pip (``venv
#: --without-pip``: no ensurepip, nothing from the internet) into which each pure-Python wheel is
#: installed as PEP 427 says (its files unpacked into site-packages, an INSTALLER file, a launcher
#: script per console entry point); about a third of a second a node, where ensurepip and pip took
#: 25 s on a busy 2-core machine.
INSTALL_SNIPPET = r"""
import os, subprocess, sys, venv, zipfile, configparser
target, wheels = os.path.abspath(sys.argv[1]), sys.argv[2:]
venv.EnvBuilder(clear=True, with_pip=False, symlinks=True).create(target)
py = os.path.join(target, "bin", "python")
site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True,
                      text=True, check=True).stdout.strip()  # the venv's own scheme (not a distro's local one)
os.makedirs(site, exist_ok=True)
for w in wheels:
    with zipfile.ZipFile(w) as z:
        info = None
        for n in z.namelist():
            if n.startswith("/") or ".." in n.split("/"):
                sys.exit(f"unsafe path {n!r} in {w}")
            if n.endswith(".dist-info/WHEEL"):
                info = n.rsplit("/", 1)[0]
        if info is None:
            sys.exit(f"{w} is not a wheel (no .dist-info)")
        z.extractall(site)
        with open(os.path.join(site, info, "INSTALLER"), "w") as fh:
            fh.write("clusterbench\n")
        ep = os.path.join(site, info, "entry_points.txt")
        if os.path.exists(ep):
            cp = configparser.ConfigParser(delimiters=("=",))
            cp.optionxform = str
            cp.read(ep)
            for name, ref in (cp["console_scripts"].items() if cp.has_section("console_scripts") else []):
                mod, _, fn = ref.strip().partition(":")
                path = os.path.join(target, "bin", name)
                with open(path, "w") as fh:
                    fh.write(f"#!{py}\nimport sys\nfrom {mod} import {fn.split('.')[0]}\n"
                             f"if __name__ == '__main__':\n    sys.exit({fn}())\n")
                os.chmod(path, 0o755)
print("installed", len(wheels), "wheels into", target)
"""
