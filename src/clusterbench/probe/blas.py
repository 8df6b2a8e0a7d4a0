"""Which BLAS libraries this machine has, which one a name or path means, and whether a file
really is a BLAS: facts about the machine, shared by dgemm, hpl and the HPL tuner.

Checking a ``--blas`` path reads the ELF header and the library's bytes for the DGEMM entry
points (no dlopen: loading OpenBLAS here would start its thread pool in the CLI process), so a
wrong file is refused before any run is opened.
"""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from typing import Any

from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench import process

#: name -> (candidate paths, {lib} = a multiarch library directory; Debian package to install)
BLAS_CANDIDATES: dict[str, tuple[tuple[str, ...], str]] = {
    "openblas": (("{lib}/openblas-pthread/libopenblas.so.0", "{lib}/openblas-openmp/libopenblas.so.0",
                  "{lib}/openblas-serial/libopenblas.so.0", "{lib}/libopenblas.so.0", "{lib}/libopenblas.so"),
                 "libopenblas0-pthread"),
    "blis": (("{lib}/blis-openmp/libblis.so.4", "{lib}/blis-pthread/libblis.so.4", "{lib}/blis-serial/libblis.so.4",
              "{lib}/libblis.so.4", "{lib}/libblis.so.3", "{lib}/libblis.so"), "libblis4-openmp"),
    "mkl": (("{lib}/libmkl_rt.so.2", "{lib}/libmkl_rt.so", "/opt/intel/oneapi/mkl/latest/lib/intel64/libmkl_rt.so.2",
             "/opt/intel/oneapi/mkl/latest/lib/libmkl_rt.so.2"), "libmkl-rt"),
    "flexiblas": (("{lib}/libflexiblas.so.3",), "libflexiblas3"),
    "atlas": (("{lib}/atlas/libblas.so.3",), "libatlas3-base"),
    "netlib": (("{lib}/blas/libblas.so.3",), "libblas3"),
    "system": (("{lib}/libblas.so.3",), "libopenblas0-pthread"),  # whatever update-alternatives selects
}
#: soname patterns found through LD_LIBRARY_PATH and ldconfig -p (module systems, /opt installs)
SONAMES = {"openblas": r"libopenblas\w*\.so(\.\d+)*$", "blis": r"libblis\w*\.so(\.\d+)*$",
           "mkl": r"libmkl_rt\.so(\.\d+)*$", "flexiblas": r"libflexiblas\.so(\.\d+)*$",
           "system": r"libblas\.so\.3$"}
#: OpenBLAS cores that mean "CPU not recognised, generic kernels" on a recent x86 CPU
OPENBLAS_OLD_CORES = ("Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai", "Northwood")


def _libdirs() -> list[str]:
    dirs = []
    multi = sysconfig.get_config_var("MULTIARCH")
    if multi:
        dirs += [f"/usr/lib/{multi}", f"/lib/{multi}"]
    dirs += sorted(glob.glob("/usr/lib/*-linux-gnu*")) + ["/usr/lib64", "/usr/lib", "/usr/local/lib"]
    seen: list[str] = []
    for d in dirs:
        if os.path.isdir(d) and os.path.realpath(d) not in [os.path.realpath(s) for s in seen]:
            seen.append(d)
    return seen


def _ldconfig() -> list[str]:
    for exe in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        try:
            out = process.run([exe, "-p"], timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        return [m.group(1) for m in re.finditer(r"=>\s*(\S+)", out)]
    return []


def blas_name_of(path: str) -> str:
    """Which BLAS a library path is (by its real name)."""
    real = os.path.realpath(path).lower()
    for key in ("openblas", "blis", "mkl", "flexiblas", "atlas", "armpl"):
        if key in real:
            return key
    if "/blas/" in real:
        return "netlib"
    return "unknown"


def installed_blas() -> dict[str, str]:
    """BLAS libraries found on this machine: name -> path (first match of each)."""
    found: dict[str, str] = {}
    for name, (paths, _pkg) in BLAS_CANDIDATES.items():
        for d in _libdirs():
            for pat in paths:
                p = pat.format(lib=d)
                if name not in found and os.path.isfile(p):
                    found[name] = p
    extra = [os.path.join(d, f) for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if os.path.isdir(d)
             for f in sorted(os.listdir(d))] + _ldconfig()
    for path in extra:
        base = os.path.basename(path)
        for name, pat in SONAMES.items():
            if name not in found and re.match(pat, base) and os.path.exists(path):
                found[name] = path
    return found


def resolve_blas(choice: str) -> tuple[str, str]:
    """``--blas NAME|PATH`` -> (name, path); UsageError / EnvironmentProblem naming what exists."""
    choice = (choice or "openblas").strip()
    if "/" in choice:
        if not os.path.isfile(choice):
            raise UsageError(f"--blas {choice}: no such file", "give the path of a BLAS shared library (.so)")
        check_blas_file(choice)
        return blas_name_of(choice), choice
    found = installed_blas()
    have = ", ".join(f"{k} ({v})" for k, v in found.items()) or "none"
    key = choice.lower()
    if key in found:
        return (blas_name_of(found[key]) if key == "system" else key), found[key]
    if key in BLAS_CANDIDATES:
        raise EnvironmentProblem(f"BLAS '{choice}' is not installed (installed: {have})",
                                 f"install it (apt-get install {BLAS_CANDIDATES[key][1]}), load its module, "
                                 "or pass --blas /path/to/lib.so")
    raise UsageError(f"unknown --blas '{choice}' (installed: {have})",
                     f"use one of {', '.join(found) or ', '.join(BLAS_CANDIDATES)} or a path to a .so")


#: ELF type field (little/big endian alike for the values used): 3 = ET_DYN (shared object)
_ET_DYN = 3
#: the entry points the kernels call (kernels/include/cb_blas.h): CBLAS first, Fortran second
DGEMM_SYMBOLS = (b"cblas_dgemm", b"dgemm_")


#: the files check_blas_file found to be a BLAS in this process, as (device, inode, size, mtime): a tuner
#: resolves its BLAS for every trial, and reading a 30 MB library each time took a sixth of a small tune
_CHECKED: set[tuple[int, int, int, int]] = set()


def check_blas_file(path: str) -> None:
    """EnvironmentProblem unless ``path`` is an ELF shared library that exports a DGEMM.

    The symbol names are looked for in the file's bytes (its dynamic string table holds them):
    cheap, process-free, and enough to tell a BLAS from /bin/ls, a text file or libm. A file found to
    be one is not read again while it stays the same file (device, inode, size, mtime)."""
    from clusterbench.errors import UsageError
    from clusterbench.files import read_bytes

    try:
        st = os.stat(path)
        key: tuple[int, int, int, int] | None = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        key = None  # read_bytes below says why
    if key in _CHECKED:
        return
    try:
        data = read_bytes(path, "shared library", fix="give the path of a BLAS .so, e.g. libopenblas.so.0, or a "
                          "name: --blas openblas")
    except UsageError as exc:
        raise EnvironmentProblem(f"--blas: {exc.problem}", exc.fix) from None
    head = data[:18]
    if head[:4] != b"\x7fELF":
        raise EnvironmentProblem(f"--blas {path} is not a shared library (not an ELF file)",
                                 "give the path of a BLAS .so, e.g. libopenblas.so.0, or a name: "
                                 "--blas openblas")
    etype = int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")
    if etype != _ET_DYN:
        raise EnvironmentProblem(f"--blas {path} is an ELF program, not a shared library",
                                 "give the path of a BLAS .so, e.g. libopenblas.so.0, or a name: "
                                 "--blas openblas")
    if not any(sym + b"\0" in data for sym in DGEMM_SYMBOLS):
        raise EnvironmentProblem(f"--blas {path} is an ELF file without cblas_dgemm or dgemm_: not a BLAS",
                                 "give the path of a BLAS library (OpenBLAS, BLIS, MKL, netlib libblas.so.3) "
                                 "or a name: --blas openblas")
    if key is not None:
        _CHECKED.add(key)


# ---------------------------------------------------------------------------------------------
# OpenBLAS core type: the kernels a DYNAMIC_ARCH OpenBLAS picked, and a better one when it fell back
# ---------------------------------------------------------------------------------------------
#: OpenBLAS x86 core names (as openblas_get_corename reports them, lower-cased) -> the ISA level
#: their kernels use: 0 SSE only, 1 AVX, 2 AVX2+FMA, 3 AVX-512
OPENBLAS_CORE_LEVEL = {
    **{c: 0 for c in ("katmai", "coppermine", "northwood", "prescott", "banias", "core2", "penryn", "dunnington",
                      "nehalem", "atom", "athlon", "opteron", "opteron_sse3", "barcelona", "bobcat", "nano",
                      "generic")},
    **{c: 1 for c in ("sandybridge", "bulldozer", "piledriver", "steamroller", "excavator")},
    **{c: 2 for c in ("haswell", "zen")},
    **{c: 3 for c in ("skylakex", "cooperlake", "sapphirerapids")},
}
#: the ISA level OpenBLAS's core types of each level need from the CPU's flags
_LEVEL_FLAGS = ((3, {"avx512f", "avx512vl", "avx512bw", "avx512dq"}), (2, {"avx2", "fma"}), (1, {"avx"}))


def cpu_isa_level(flags: set[str]) -> int:
    """0..3 as in :data:`OPENBLAS_CORE_LEVEL`, from /proc/cpuinfo flags."""
    return next((lvl for lvl, need in _LEVEL_FLAGS if need <= flags), 0)


def best_coretype(flags: set[str], vendor: str | None) -> str | None:
    """The OpenBLAS core type whose kernels use the most of this CPU's ISA (None: nothing above SSE)."""
    level = cpu_isa_level(flags)
    amd = vendor in ("AuthenticAMD", "HygonGenuine")
    if level == 3:
        return "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    if level == 2:
        return "Zen" if amd else "Haswell"
    if level == 1:
        return "Bulldozer" if amd else "SandyBridge"
    return None


def choose_coretype(flags: set[str], vendor: str | None, corename: str | None) -> str | None:
    """``auto``: the core type to set, or None to keep OpenBLAS's own choice.

    A better core is chosen only when OpenBLAS reports a core it knows (an x86 one) whose kernels
    use a lower ISA level than the CPU has: Prescott on an AVX-512 Emerald Rapids (0.3.21 does not
    know it) -> SkylakeX/Cooperlake. An unknown name (ARM, a future core) is kept: no guessing."""
    level = OPENBLAS_CORE_LEVEL.get((corename or "").lower())
    if level is None:
        return None
    best = best_coretype(flags, vendor)
    if best is None or OPENBLAS_CORE_LEVEL[best.lower()] <= level:
        return None
    return best


def corename_of(config: str | None) -> str | None:
    """The core name in an OpenBLAS configuration string ("OpenBLAS 0.3.21 ... Cooperlake MAX_THREADS=64")."""
    if not config or "openblas" not in config.lower():
        return None
    return next((w for w in config.split() if w.lower() in OPENBLAS_CORE_LEVEL), None)


_REPORT = ("import ctypes, sys\n"
           "lib = ctypes.CDLL(sys.argv[1])\n"
           "f = getattr(lib, 'openblas_get_corename', None)\n"
           "f is not None and setattr(f, 'restype', ctypes.c_char_p)\n"
           "print((f() or b'').decode() if f is not None else '')\n")


#: openblas_corename's answers in this process, by (device, inode, size, mtime of the library, coretype):
#: a tuner settles the core for every trial (a Python started each time)
_CORENAMES: dict[tuple[Any, ...], str | None] = {}


def openblas_corename(path: str, coretype: str | None = None) -> str | None:
    """The core name the OpenBLAS at ``path`` reports when loaded (with OPENBLAS_CORETYPE set to
    ``coretype``, or unset): asked in a child process, so this one never loads the library; asked once
    per process while the library stays the same file."""
    try:
        st = os.stat(path)
        key: tuple[Any, ...] | None = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, coretype)
    except OSError:
        key = None
    if key is not None and key in _CORENAMES:
        return _CORENAMES[key]
    name = _ask_corename(path, coretype)
    if key is not None:
        _CORENAMES[key] = name
    return name


def _ask_corename(path: str, coretype: str | None) -> str | None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    try:
        out = process.run([sys.executable, "-c", _REPORT, path], timeout=30,
                          env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"could not load {path} to read its OpenBLAS core ({exc})",
                                 "check the library, or pass --openblas-coretype none") from exc
    if out.returncode != 0:
        raise EnvironmentProblem(f"loading {path} failed: {(out.stderr.strip().splitlines() or ['?'])[-1]}",
                                 "check the library, or pass --openblas-coretype none")
    return out.stdout.strip() or None


@dataclass(frozen=True)
class CoreChoice:
    """What ``--openblas-coretype`` did: recorded with every figure."""
    requested: str            # auto, none or a core name
    applied: str | None       # the OPENBLAS_CORETYPE set for the run (None: not set)
    before: str | None        # the core OpenBLAS picks by itself
    after: str | None         # the core it reports with ``applied`` set
    note: str                 # one sentence for the run's notes

    def env(self) -> dict[str, str]:
        return {"OPENBLAS_CORETYPE": self.applied} if self.applied else {}

    def params(self) -> dict[str, Any]:
        if not self.requested or self.requested == "none" and self.before is None:
            return {"openblas_coretype": self.requested} if self.requested else {}
        decision = f"set {self.applied} (was {self.before})" if self.applied else f"kept {self.before}"
        return {"openblas_coretype": self.requested, "openblas_coretype_applied": self.applied,
                "openblas_corename_before": self.before, "openblas_corename_after": self.after,
                "openblas_coretype_decision": decision}


def settle_for(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Settle ``params["openblas_coretype"]`` once per run (prepare, or run when called alone):
    stores the environment and the record in params, notes the decision; returns the record."""
    if "openblas_record" not in params:
        cpu = (ctx.probe.get("cpu") or {})
        choice = settle_coretype(params.get("openblas_coretype"), params["blas_name"], params["blas_path"],
                                 set(cpu.get("isa") or []), cpu.get("vendor"))
        params["openblas_env"], params["openblas_record"] = choice.env(), choice.params()
        if choice.note:
            ctx.note(choice.note)
    return params["openblas_record"]


def settle_coretype(requested: str | None, blas_name: str, blas_path: str, flags: set[str],
                    vendor: str | None) -> CoreChoice:
    """Decide (auto), check (a name) or skip (none) OPENBLAS_CORETYPE for a run on ``blas_path``.

    An explicit name OpenBLAS does not report back is refused (EnvironmentProblem); ``auto`` that
    chose a core the library then does not report is refused too (the figure would be mislabelled)."""
    req = (requested or "auto").strip()
    if req.lower() == "none" or blas_name != "openblas":
        if req.lower() not in ("none", "auto"):
            raise EnvironmentProblem(f"--openblas-coretype {req} needs OpenBLAS, but --blas is {blas_name} "
                                     f"({blas_path})", "use --blas openblas, or leave --openblas-coretype out")
        return CoreChoice(req.lower() if blas_name == "openblas" else "", None, None, None, "")
    before = openblas_corename(blas_path)
    if req.lower() == "auto":
        choice = choose_coretype(flags, vendor, before)
        if choice is None:
            return CoreChoice("auto", None, before, before, f"OpenBLAS core type: kept {before} (its own choice "
                              "uses what this CPU has)")
    else:
        choice = req
    after = openblas_corename(blas_path, choice)
    if (after or "").lower() != choice.lower():
        raise EnvironmentProblem(f"OPENBLAS_CORETYPE={choice} did not take effect: {blas_path} still reports "
                                 f"{after or 'no core name'}", "give a core type this OpenBLAS knows (e.g. Haswell, "
                                 "SkylakeX, Zen), or --openblas-coretype none")
    why = (f"OpenBLAS picked {before}, below this CPU's ISA" if req.lower() == "auto"
           else f"as asked (OpenBLAS itself picks {before})")
    return CoreChoice(req if req.lower() != "auto" else "auto", choice, before, after,
                      f"OpenBLAS core type: set OPENBLAS_CORETYPE={choice}, {why}; the library reports {after}")
