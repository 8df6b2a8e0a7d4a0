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
import sysconfig

from clusterbench.errors import EnvironmentProblem, UsageError

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
            out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=10).stdout
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


def check_blas_file(path: str) -> None:
    """EnvironmentProblem unless ``path`` is an ELF shared library that exports a DGEMM.

    The symbol names are looked for in the file's bytes (its dynamic string table holds them):
    cheap, process-free, and enough to tell a BLAS from /bin/ls, a text file or libm."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
            if head[:4] != b"\x7fELF":
                raise EnvironmentProblem(f"--blas {path} is not a shared library (not an ELF file)",
                                         "give the path of a BLAS .so, e.g. libopenblas.so.0, or a name: "
                                         "--blas openblas")
            etype = int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")
            if etype != _ET_DYN:
                raise EnvironmentProblem(f"--blas {path} is an ELF program, not a shared library",
                                         "give the path of a BLAS .so, e.g. libopenblas.so.0, or a name: "
                                         "--blas openblas")
            f.seek(0)
            data = f.read()
    except OSError as exc:
        raise EnvironmentProblem(f"--blas {path} cannot be read ({exc.strerror})",
                                 "check the path and its permissions") from exc
    if not any(sym + b"\0" in data for sym in DGEMM_SYMBOLS):
        raise EnvironmentProblem(f"--blas {path} is an ELF file without cblas_dgemm or dgemm_: not a BLAS",
                                 "give the path of a BLAS library (OpenBLAS, BLIS, MKL, netlib libblas.so.3) "
                                 "or a name: --blas openblas")
