"""Compile C kernels on the node they measure, into a per-user cache.

HPC users expect benchmarks built for the node under test, so kernels are compiled at first use
with the system compiler, ``-O3 -march=native`` (``-mcpu=native`` where that is the convention)
and OpenMP. The cache key hashes the sources, the compiler's identity and version, the flags,
the libraries and the CPU the build targets: a shared ``$HOME`` on a mixed cluster must not hand
an AVX-512 binary to a node without AVX-512.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.errors import EnvironmentProblem
from clusterbench import process

KERNEL_DIR = Path(__file__).resolve().parent
#: headers shared by the kernels (cb_common.h, cb_mpi.h, cb_blas.h)
INCLUDE_DIR = KERNEL_DIR / "include"
WARN_FLAGS = ("-Wall", "-Wextra")

#: Debian package that provides a library, for the "how to fix" half of an error message.
LIB_PACKAGES = {
    "numa": "libnuma-dev",
    "openblas": "libopenblas-dev",
    "blis": "libblis-dev",
    "m": "libc6-dev",
    "dl": "libc6-dev",
    "fftw3": "libfftw3-dev",
    "fftw3_mpi": "libfftw3-mpi-dev",
}


@dataclass(frozen=True)
class Build:
    """A compiled kernel and how it was made (stored with every result)."""

    name: str
    path: Path
    info: dict = field(compare=False)


#: binary path -> how it was asked for (name, libs, extra_flags, openmp, cc): what another node needs to
#: build the same kernel for itself (launch/nodes.py stages MPI kernels on separate machines)
REQUESTS: dict[str, dict] = {}


def request_for(path: str | os.PathLike) -> dict | None:
    """How the kernel at ``path`` was built (see :data:`REQUESTS`), or None for any other program."""
    return REQUESTS.get(str(path))


def cache_dir() -> Path:
    base = os.environ.get("CLUSTERBENCH_CACHE")
    if base:
        return Path(base) / "kernels"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "clusterbench" / "kernels"


def compiler(cc: str | None = None) -> str:
    """The C compiler command, shell-quoted (see :func:`compiler_argv`)."""
    return shlex.join(compiler_argv(cc))


def compiler_argv(cc: str | None = None) -> list[str]:
    """The C compiler: ``cc`` if given (e.g. an MPI's ``mpicc``), else ``$CC`` or ``cc``, split
    as make does (``CC="ccache gcc"``), its first word resolved on PATH; a clear error when there
    is none."""
    cc = cc or os.environ.get("CC", "cc")
    try:
        words = shlex.split(cc)
    except ValueError as exc:
        raise EnvironmentProblem(f"CC={cc!r} cannot be split into words ({exc})", "fix the quoting in CC") from None
    if not words:
        raise EnvironmentProblem("CC is set but empty", "unset CC or name a C compiler")
    cc = words[0]
    path = shutil.which(cc)
    if not path:
        if os.path.basename(cc).startswith("mpi"):
            raise EnvironmentProblem(f"no MPI compiler wrapper '{cc}' found",
                                     "install an MPI (apt-get install libopenmpi-dev) or load an MPI module")
        raise EnvironmentProblem(
            f"no C compiler '{cc}' found",
            "install one (apt-get install build-essential) or load a compiler module and set CC",
        )
    return [path, *words[1:]]


def is_program(path: Path | str) -> bool:
    """A non-empty ELF file (what a finished compile leaves; an interrupted one or CC=/bin/true
    leaves an empty or partial file)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF" and os.fstat(f.fileno()).st_size > 64
    except OSError:
        return False


@functools.lru_cache(maxsize=None)
def _compiler_version(cc: str) -> str:
    try:
        out = process.run([*shlex.split(cc), "--version"], timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"C compiler {cc} does not run ({exc})", "reinstall it or set CC") from exc
    return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else "unknown"


@functools.lru_cache(maxsize=None)
def _wrapper_identity(cc: str) -> str:
    """For an MPI compiler wrapper, which MPI it wraps: its real path (``/usr/bin/mpicc`` is an
    alternatives link that may point at Open MPI's or MPICH's) and the command it runs
    (``-show``: include and library paths). A plain compiler: its real path only."""
    words = shlex.split(cc)
    real = " ".join([os.path.realpath(words[0]), *words[1:]])
    if not os.path.basename(words[-1]).startswith("mpi"):
        return real
    try:
        out = process.run([*words, "-show"], timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return real
    return real + "\n" + (out.stdout or "").strip()


def arch_flags(machine: str | None = None, cpuinfo: str | None = None) -> list[str]:
    """-march=native on x86; -mcpu=native on Arm and POWER, where that is the convention.

    On 32-bit Arm, gcc's -mcpu=native reads the core from /proc/cpuinfo's 'CPU implementer' and 'CPU part';
    where it has none (QEMU user mode shows the host's x86 cpuinfo) gcc 12 falls back to an ARMv5TE core,
    whose Thumb-1 cannot use Debian armhf's hard-float ABI ("sorry, unimplemented"): no -mcpu then, the
    compiler's own default (armv7-a+fp on Debian armhf). Likewise on POWER, where gcc reads the platform
    from the auxiliary vector, which QEMU user mode leaves out: -mcpu=native becomes 'powerpc' ("'-m64'
    requires a PowerPC64 cpu"); no -mcpu there when /proc/cpuinfo names no POWER/PowerPC cpu (ppc64el's
    default is power8)."""
    machine = (machine if machine is not None else platform.machine()).lower()
    text = _cpuinfo(cpuinfo)
    if machine.startswith("arm") and "cpu implementer" not in text.lower():
        return []
    if machine.startswith(("ppc", "powerpc")) and not re.search(r"^cpu\s*:\s*(power|ppc|970)", text, re.I | re.M):
        return []
    if machine.startswith(("aarch64", "arm", "ppc", "powerpc")):
        return ["-mcpu=native"]
    return ["-march=native"]


def _cpuinfo(text: str | None) -> str:
    if text is not None:
        return text
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


@functools.lru_cache(maxsize=1)
def _cpu_identity() -> str:
    """What -march=native depends on: the CPU model and its feature flags."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.machine()
    keep = []
    for line in text.splitlines():
        key = line.split(":", 1)[0].strip().lower()
        if key in ("model name", "flags", "features", "cpu part", "cpu implementer", "cpu"):
            keep.append(line.strip())
        if not line.strip() and keep:
            break  # the first processor is enough; heterogeneous parts differ in 'cpu part' only
    return platform.machine() + "\n" + "\n".join(keep)


def kernel_source(name: str) -> Path | None:
    """``kernels/<family>/<name>.c``: kernels live in one folder per family (node, mpi, net,
    hpl, ...), so a new family is a new folder and nothing here changes."""
    found = sorted(KERNEL_DIR.glob(f"*/{name}.c"))
    return found[0] if found else None


@dataclass(frozen=True)
class Plan:
    """Where a kernel's build lives in the cache and what it is, before anything is compiled."""

    name: str
    binary: Path
    info: dict
    cc_argv: list
    src: Path

    @property
    def built(self) -> bool:
        b = self.binary
        return b.is_file() and os.access(b, os.X_OK) and is_program(b)


def plan_kernel(name: str, libs: tuple[str, ...] = (), extra_flags: tuple[str, ...] = (), openmp: bool = True,
                cc: str | None = None) -> Plan:
    """The cache entry ``build_kernel`` would use (its key: sources, compiler, flags, libraries,
    CPU), without compiling; raises when the source or the compiler is missing."""
    src = kernel_source(name)
    if src is None:
        raise EnvironmentProblem(f"kernel source {name}.c is missing under {KERNEL_DIR}", "reinstall clusterbench")
    asked_cc = cc
    cc_argv = compiler_argv(cc)
    cc = shlex.join(cc_argv)
    version = _compiler_version(cc)
    flags = ["-O3", *arch_flags(), *(["-fopenmp"] if openmp else []), *WARN_FLAGS, *extra_flags]
    link = [f"-l{lib}" for lib in libs] + ["-lm"]
    h = hashlib.sha256()
    for part in (src, *sorted(INCLUDE_DIR.glob("*.h"))):  # any header a kernel may include
        h.update(part.read_bytes())
    h.update(json.dumps([cc, _wrapper_identity(cc), version, flags, link, _cpu_identity()]).encode())
    key = h.hexdigest()[:16]
    binary = cache_dir() / f"{name}-{key}" / name
    info = {
        "kernel": name,
        "compiler": cc,
        "compiler_version": version,
        "flags": flags,
        "libs": link,
        "cache_key": key,
        "binary": str(binary),
    }
    REQUESTS[str(binary)] = {"name": name, "libs": list(libs), "extra_flags": list(extra_flags), "openmp": openmp,
                             "cc": os.path.basename(cc_argv[0]) if asked_cc else None}
    return Plan(name, binary, info, cc_argv, src)


def build_kernel(
    name: str,
    libs: tuple[str, ...] = (),
    extra_flags: tuple[str, ...] = (),
    openmp: bool = True,
    cc: str | None = None,
) -> Build:
    """Compile ``kernels/<family>/<name>.c`` (cached) and return the binary with its build info.

    ``cc`` overrides the compiler (MPI kernels use the MPI's ``mpicc``: one build per MPI, since
    the wrapper's path, real path, ``-show`` line and version are part of the cache key)."""
    plan = plan_kernel(name, libs, extra_flags, openmp, cc)
    binary, info, out_dir = plan.binary, plan.info, plan.binary.parent
    if plan.built:
        return Build(name, binary, info)  # a partial or empty file (from an old version) is rebuilt
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot create the kernel cache {out_dir} ({exc.strerror})",
            "set CLUSTERBENCH_CACHE to a writable directory",
        ) from exc
    # Build into a temporary name and rename only a verified program: concurrent builds and a
    # compile killed by Ctrl-C, SIGTERM or kill -9 never leave anything under the binary's name.
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out_dir)
    os.close(fd)
    try:
        proc, cmd = _compile(name, plan.cc_argv, info["flags"], tmp, plan.src, info["libs"], libs, openmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, binary)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    (out_dir / "build.json").write_text(json.dumps({**info, "command": cmd, "warnings": proc.stderr}, indent=1))
    return Build(name, binary, info)


def keep_binary(plan: Plan, data: bytes) -> Build:
    """Put a binary another node built under the same key into this node's cache (same sources,
    compiler, flags, libraries and CPU: the same program); refused unless it is a program."""
    out_dir = plan.binary.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{plan.name}.", dir=out_dir)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if not is_program(tmp):
            raise EnvironmentProblem(f"the copy of kernel '{plan.name}' is not a program", "report this as a bug")
        os.chmod(tmp, 0o755)
        os.replace(tmp, plan.binary)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    (out_dir / "build.json").write_text(json.dumps({**plan.info, "copied": "built on another node with this key"},
                                                   indent=1))
    return Build(plan.name, plan.binary, plan.info)


def _compile(name: str, cc_argv: list[str], flags: list[str], tmp: str, src: Path, link: list[str],
             libs: tuple[str, ...], openmp: bool) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run the compiler into ``tmp``; raise unless it exited 0 and left a program there."""
    cc = shlex.join(cc_argv)
    cmd = [*cc_argv, *flags, "-I", str(INCLUDE_DIR), "-o", tmp, str(src), *link]
    try:
        proc = process.run(cmd, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"compiling kernel '{name}' with {cc} failed ({exc})",
                                 "check the compiler (CC) and that the cache directory is usable") from exc
    if proc.returncode != 0:
        raise build_error(name, cc, proc.stderr or proc.stdout, libs, openmp, proc.returncode)
    if not is_program(tmp):
        raise EnvironmentProblem(f"compiling kernel '{name}' with {cc}: the compiler produced no program "
                                 "(it exited 0 but wrote no executable)", "set CC to a real C compiler (gcc, clang)")
    return proc, cmd


def build_error(name: str, cc: str, stderr: str, libs: tuple[str, ...], openmp: bool,
                status: int = 1) -> EnvironmentProblem:
    for lib in libs:  # a library's header (fftw3.h, fftw3-mpi.h for fftw3_mpi) missing
        for header in dict.fromkeys((f"{lib}.h", f"{lib.replace('_', '-')}.h")):
            if f"{header}: No such file" in stderr or f"'{header}' file not found" in stderr:
                pkg = LIB_PACKAGES.get(lib, f"lib{lib}-dev")
                return EnvironmentProblem(f"cannot compile kernel '{name}': header {header} not found",
                                          f"install it (apt-get install {pkg}) or load its module")
    for lib in libs:
        if f"-l{lib}" in stderr or f"lib{lib}" in stderr:
            pkg = LIB_PACKAGES.get(lib, f"lib{lib}-dev")
            return EnvironmentProblem(
                f"cannot link kernel '{name}': library {lib} not found",
                f"install it (apt-get install {pkg}) or load its module",
            )
    if openmp and ("omp" in stderr.lower()):
        return EnvironmentProblem(
            f"compiler {cc} cannot build OpenMP code for kernel '{name}'",
            "use GCC or Clang with libomp (apt-get install build-essential)",
        )
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    first = next((ln for ln in lines if "error" in ln), lines[0][:200] if lines else "")
    if not first:  # say something: the compiler printed nothing
        first = (f"{cc} printed nothing and exited with status {status}" if status >= 0
                 else f"{cc} was killed by signal {-status}")
    return EnvironmentProblem(f"kernel '{name}' failed to compile: {first}", "check CC and compiler modules")
