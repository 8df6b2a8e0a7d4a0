"""External HPL engines (issue 4): the reference HPC Challenge (``hpcc``) and a user-built ``xhpl``.

A pure library: :func:`run_external` writes the engine's input for one :class:`HplCase`, launches it
through :mod:`clusterbench.launch.mpi` (one rank per grid cell, explicit placement), bounds it in
time, and parses what it printed into the same record the built-in engine makes, so the tuner can
drive any engine and users can compare them.

What the record means (conventions of HPL itself, ``testing/ptest/HPL_pdtest.c``):

* ``gflops`` = (2/3·N³ + 3/2·N²) / wall time, as HPL prints it; ``time_s`` is HPL's wall time of
  HPL_pdgesv (generation and the check are not timed).
* ``residual`` = ||Ax-b||_oo / (eps·(||A||_oo·||x||_oo + ||b||_oo)·N); ``passed`` is HPL's own
  verdict (residual < ``threshold``, 16.0 by default). A run whose check was skipped (threshold ≤ 0)
  or FAILED is never returned as a pass: :func:`run_external` raises :class:`KernelFailed`.
* ``variant`` is HPL's T/V code, e.g. ``WR11C2R4``: Wall time, Row-major mapping, DEPTH 1, BCAST 1
  (1rM), RFACT C(rout), NDIV 2, PFACT R(ight), NBMIN 4; decoded under ``algorithm``.

hpcc 1.5.0 cannot skip any of its tests (``HPCC_Init`` sets every ``Run*`` flag), and sizes them all
from HPL's largest N (memory per process = 8·N²/(P·Q)). The one free knob is the list of *extra*
PTRANS sizes, which :func:`hpcc_input` leaves empty, so PTRANS runs only its mandatory N/2. The other
tests therefore still cost time: measured on the 2-core test VM (1×2, loaded), N=1000 took 0.7 s in
all, N=6000 about 105 s of which HPL was 11 s (the two MPIRandomAccess runs took most of the rest).
Give ``timeout`` room for that; for HPL alone at large N, ``xhpl`` is the engine to use.

xhpl writes to stdout (HPL.dat device 6): mpirun forwards rank 0's stdout, so it works on nodes that
share no file system. hpcc always appends to ``hpccoutf.txt`` in rank 0's working directory, so on a
multi-node run the work directory must be on a file system rank 0 sees (``workdir=``).
"""
from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from clusterbench.errors import EnvironmentProblem, KernelFailed, UsageError
from clusterbench.launch import mpi as mpimod
from clusterbench import process
from clusterbench.text import seconds

ENGINES = ("hpcc", "xhpl")
INPUT_FILE = {"hpcc": "hpccinf.txt", "xhpl": "HPL.dat"}
ENGINE_FIX = {
    "hpcc": "apt-get install hpcc",
    "xhpl": "build HPL (netlib) and pass --engine-path PATH or put xhpl on PATH",
}
OUTPUT_TAIL = 16384  # characters of the engine's output kept with the record

PMAPS = {"row": 0, "col": 1}
_FACT = {"L": 0, "C": 1, "R": 2}
_BCAST = {"0": "1rg", "1": "1rM", "2": "2rg", "3": "2rM", "4": "Lng", "5": "LnM"}


# ---------------------------------------------------------------------------------------------
# The case and the input files
# ---------------------------------------------------------------------------------------------
@dataclass
class HplCase:
    """One HPL run: order ``n``, block ``nb``, a ``p`` × ``q`` grid mapped by ``pmap`` (row or col)."""

    n: int
    nb: int
    p: int
    q: int
    pmap: str = "row"

    def check(self) -> None:
        for name in ("n", "nb", "p", "q"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UsageError(f"HPL {name.upper()}={value!r} is not allowed", f"give {name.upper()} >= 1")
        if self.pmap not in PMAPS:
            raise UsageError(f"HPL process mapping {self.pmap!r} is not row or col",
                             "use pmap row (recommended) or col")
        if self.nb > self.n:
            raise UsageError(f"HPL NB={self.nb} is larger than N={self.n}", "choose NB <= N (NB is usually 32..256)")


#: HPL's algorithmic parameters, with hpcc's own defaults (variant WR11C2R4); ``extra`` overrides them.
ALGORITHM_DEFAULTS: dict[str, Any] = {
    "threshold": 16.0,    # residual threshold; <= 0 skips the check (run_external then refuses the run)
    "pfact": 2,           # 0 left, 1 Crout, 2 right
    "nbmin": 4,
    "ndiv": 2,
    "rfact": 1,           # 0 left, 1 Crout, 2 right
    "bcast": 1,           # 0 1rg, 1 1rM, 2 2rg, 3 2rM, 4 Lng, 5 LnM
    "depth": 1,
    "swap": 2,            # 0 binary exchange, 1 long, 2 mix
    "swap_threshold": 64,
    "l1": 0,              # 0 transposed
    "u": 0,               # 0 transposed
    "equil": 1,
    "align": 8,
}
#: hpcc only: extra PTRANS sizes (PTRANS always also runs N/2 with the HPL NBs)
HPCC_DEFAULTS: dict[str, Any] = {"ptrans_ns": [], "ptrans_nbs": []}
_RANGES = {"pfact": (0, 2), "rfact": (0, 2), "bcast": (0, 5), "swap": (0, 2), "l1": (0, 1), "u": (0, 1),
           "equil": (0, 1), "nbmin": (1, None), "ndiv": (2, None), "depth": (0, None),
           "swap_threshold": (0, None), "align": (1, None)}


def _params(extra: dict | None, allowed: dict[str, Any]) -> dict[str, Any]:
    out = dict(allowed)
    for key, value in (extra or {}).items():
        if key not in allowed:
            raise UsageError(f"unknown HPL parameter {key!r}", f"use one of: {', '.join(sorted(allowed))}")
        if key in ("pfact", "rfact") and isinstance(value, str):
            if value.upper()[:1] not in _FACT:
                raise UsageError(f"HPL {key}={value!r} is not L, C or R", "use L(eft), C(rout) or R(ight)")
            value = _FACT[value.upper()[:1]]
        if key == "threshold":
            value = float(value)
        elif key in ("ptrans_ns", "ptrans_nbs"):
            value = [int(v) for v in value]
            if any(v < 1 for v in value) or len(value) > 20:
                raise UsageError(f"HPL {key}={value} is not allowed", "give at most 20 sizes, each >= 1")
        else:
            if not isinstance(value, int) or isinstance(value, bool):
                raise UsageError(f"HPL {key}={value!r} is not an integer", "give an integer")
            lo, hi = _RANGES[key]
            if value < lo or (hi is not None and value > hi):
                raise UsageError(f"HPL {key}={value} is out of range", f"use {lo}..{hi if hi is not None else ''}")
        out[key] = value
    return out


def _hpl_dat_lines(case: HplCase, a: dict[str, Any], device: int) -> list[str]:
    """The 31 lines of HPL.dat (HPL 2.3 ``TUNING``: line 31 is the alignment)."""
    case.check()

    def line(value: object, text: str) -> str:
        return f"{value!s:<13}{text}"

    return [
        "HPLinpack benchmark input file",
        "written by clusterbench (one case per run)",
        line("HPL.out", "output file name (if any)"),
        line(device, "device out (6=stdout,7=stderr,file)"),
        line(1, "# of problems sizes (N)"),
        line(case.n, "Ns"),
        line(1, "# of NBs"),
        line(case.nb, "NBs"),
        line(PMAPS[case.pmap], "PMAP process mapping (0=Row-,1=Column-major)"),
        line(1, "# of process grids (P x Q)"),
        line(case.p, "Ps"),
        line(case.q, "Qs"),
        line(repr(float(a["threshold"])), "threshold"),
        line(1, "# of panel fact"),
        line(a["pfact"], "PFACTs (0=left, 1=Crout, 2=Right)"),
        line(1, "# of recursive stopping criterium"),
        line(a["nbmin"], "NBMINs (>= 1)"),
        line(1, "# of panels in recursion"),
        line(a["ndiv"], "NDIVs"),
        line(1, "# of recursive panel fact."),
        line(a["rfact"], "RFACTs (0=left, 1=Crout, 2=Right)"),
        line(1, "# of broadcast"),
        line(a["bcast"], "BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)"),
        line(1, "# of lookahead depth"),
        line(a["depth"], "DEPTHs (>=0)"),
        line(a["swap"], "SWAP (0=bin-exch,1=long,2=mix)"),
        line(a["swap_threshold"], "swapping threshold"),
        line(a["l1"], "L1 in (0=transposed,1=no-transposed) form"),
        line(a["u"], "U  in (0=transposed,1=no-transposed) form"),
        line(a["equil"], "Equilibration (0=no,1=yes)"),
        line(a["align"], "memory alignment in double (> 0)"),
    ]


def xhpl_input(case: HplCase, *, extra: dict | None = None) -> str:
    """HPL.dat for one case; results go to stdout (device 6), which mpirun forwards from any node."""
    return "\n".join(_hpl_dat_lines(case, _params(extra, ALGORITHM_DEFAULTS), device=6)) + "\n"


def hpcc_input(case: HplCase, *, extra: dict | None = None) -> str:
    """hpccinf.txt: HPL.dat's 31 lines (hpcc ignores lines 3-4 and appends to hpccoutf.txt), the
    separator, then PTRANS's extra sizes: none by default, so PTRANS runs only its mandatory N/2
    (hpcc 1.5.0 sizes its other tests from N and cannot skip them; see the module docstring)."""
    a = _params(extra, {**ALGORITHM_DEFAULTS, **HPCC_DEFAULTS})
    lines = _hpl_dat_lines(case, a, device=8)
    ns, nbs = a["ptrans_ns"], a["ptrans_nbs"]
    lines += [
        "##### This line (no. 32) is ignored (it serves as a separator). ######",
        f"{len(ns):<24}Number of additional problem sizes for PTRANS",
        f"{' '.join(map(str, ns)) or case.n // 2:<24}values of N",
        f"{len(nbs):<24}number of additional blocking sizes for PTRANS",
        f"{' '.join(map(str, nbs)) or case.nb:<24}values of NB",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Parsing HPL's and hpcc's output
# ---------------------------------------------------------------------------------------------
# HPL_pdtest: "W%c%1d%c%c%1d%c%1d%12d %5d %5d %5d %18.2f    %19.4e" (HPL 2.3; hpcc's HPL 2.0 prints
# Gflops as %15.3e: the regex takes any float). PTRANS's table rows start "WALL", never "W[RC]\d".
_RESULT_RE = re.compile(r"^(W([RC])(\d)([0-5])([LCR])(\d+)([LCR])(\d+))\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+"
                        r"(\S+)\s+(\S+)\s*$")
_RESID_RE = re.compile(r"^\|\|Ax-b\|\|_oo/\(eps\*\(\|\|A\|\|_oo\*\|\|x\|\|_oo\+\|\|b\|\|_oo\)\*N\)=\s*(\S+)"
                       r"\s+\.+\s+(PASSED|FAILED)")
#: HPL 2.1 and later (not hpcc's HPL 2.0): ctime() of time() just outside the timed HPL_pdgesv call
_PDGESV_TIME_RE = re.compile(r"^HPL_pdgesv\(\) (start|end) time\s+(.+)$")
_THRESH_RE = re.compile(r"Computational tests pass if scaled residuals are less than\s+(\S+)")
_HPL_VERSION_RE = re.compile(r"^HPLinpack (\S+)\s+--")
_HPL_ERROR_RE = re.compile(r"HPL ERROR|Illegal input|>>>.*<<<")


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def parse_ctime(text: str) -> float | None:
    """``ctime()``'s "Fri Sep  5 01:31:45 2025" (the printing machine's local time, read as this
    machine's) -> unix seconds, or None."""
    try:
        return float(time.mktime(time.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y")))
    except (ValueError, OverflowError):
        return None


def parse_hpl_output(text: str) -> list[dict]:
    """Every result of HPL's printer (xhpl's output, or the HPL section of ``hpccoutf.txt``).

    One dict per "T/V N NB P Q Time Gflops" line: {variant, n, nb, p, q, pmap, time_s, gflops,
    residual, passed, threshold, checked, algorithm, version}, and ``start_unix``/``end_unix`` when
    HPL printed its "HPL_pdgesv() start time ..."/"end time ..." lines (HPL 2.1 and later: whole
    seconds, local time). ``residual`` is None and
    ``passed`` False when HPL printed no residual line for it (threshold <= 0 skips the check, a
    crash cuts the output): only HPL's own PASSED makes ``passed`` True."""
    results: list[dict] = []
    threshold: float | None = None
    version: str | None = None
    open_result: dict | None = None
    for raw in text.splitlines():
        line = raw.strip()
        m = _HPL_VERSION_RE.match(line)
        if m:
            version = m.group(1)
            continue
        m = _THRESH_RE.search(line)
        if m:
            threshold = _num(m.group(1))
            continue
        m = _RESULT_RE.match(line)
        if m:
            g = m.groups()
            open_result = {
                "variant": g[0], "n": int(g[8]), "nb": int(g[9]), "p": int(g[10]), "q": int(g[11]),
                "pmap": "row" if g[1] == "R" else "col",
                "time_s": _num(g[12]), "gflops": _num(g[13]),
                "residual": None, "passed": False, "checked": False, "threshold": threshold,
                "algorithm": {"depth": int(g[2]), "bcast": _BCAST[g[3]], "rfact": g[4], "ndiv": int(g[5]),
                              "pfact": g[6], "nbmin": int(g[7])},
                "version": version,
            }
            results.append(open_result)
            continue
        m = _PDGESV_TIME_RE.match(line)
        if m and results:
            results[-1][f"{m.group(1)}_unix"] = parse_ctime(m.group(2))
            continue
        m = _RESID_RE.match(line)
        if m and open_result is not None:
            open_result["residual"] = _num(m.group(1))
            open_result["checked"] = True
            # HPL's verdict, with a NaN residual FAILED as HPL does (resid < thrsh is false)
            open_result["passed"] = m.group(2) == "PASSED" and not math.isnan(open_result["residual"])
            open_result = None
    return results


def hpl_errors(text: str) -> list[str]:
    """HPL's own error lines (illegal input, failed allocation), verbatim."""
    return [ln.strip() for ln in text.splitlines() if _HPL_ERROR_RE.search(ln)][:10]


def _typed(value: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


_SECTION_RE = re.compile(r"^(Begin|End) of (\S+) section\.")
# What each hpcc test prints when it fails (strings of hpcc 1.5.0: HPL/PTRANS "FAILED", RandomAccess
# "(failed)", STREAM "Failed Validation", the Star/Single runs "Node(s) with error N", allocations).
_FAIL_RES = (
    re.compile(r"\bFAILED\b"),
    re.compile(r"\(failed\)"),
    re.compile(r"Failed Validation"),
    re.compile(r"Node\(s\) with error [1-9]"),
    re.compile(r"Failed to allocate|allocation failed|Malloc fails", re.I),
    re.compile(r"HPL ERROR"),
    re.compile(r"^\s*[1-9]\d* tests completed and failed residual checks"),
)


def parse_hpcc_output(text: str) -> dict:
    """``hpccoutf.txt``: {"summary": every key=value of the Summary section (int, float or str),
    "hpl": parse_hpl_output of the HPL section, "failed": names of the tests that reported a failure
    (a section that began and never ended counts, as does ``Success=0``), "version": hpcc's}."""
    summary: dict[str, int | float | str] = {}
    sections: dict[str, list[str]] = {}
    failed: list[str] = []
    current: str | None = None
    for raw in text.splitlines():
        m = _SECTION_RE.match(raw.strip())
        if m:
            if m.group(1) == "Begin":
                current = m.group(2)
                sections[current] = []
            else:
                current = None
            continue
        if current is None:
            continue
        sections[current].append(raw)
        if current == "Summary":
            key, eq, value = raw.strip().partition("=")
            if eq and key:
                summary[key] = _typed(value.strip())
    ended = {m.group(2) for m in (_SECTION_RE.match(ln.strip()) for ln in text.splitlines())
             if m and m.group(1) == "End"}
    for name, lines in sections.items():
        if name == "Summary":
            continue
        if name not in ended or any(rx.search(ln) for ln in lines for rx in _FAIL_RES):
            failed.append(name)
    if summary.get("Success") == 0 and "HPL" not in failed:
        failed.append("HPL")  # hpcc sets Success=0 when HPL failed or its check was disabled
    hpl_text = "\n".join(sections.get("HPL", [])) or text
    m = re.search(r"HPC Challenge Benchmark version (\S+)", text)
    return {"summary": summary, "hpl": parse_hpl_output(hpl_text), "failed": failed,
            "version": m.group(1) if m else None}


def _refine_from_summary(record: dict, summary: dict) -> None:
    """hpcc's summary has HPL's time and rate at full precision (the result line rounds the time
    to 0.01 s): use them when they describe this record, keep the printed ones beside."""
    same = all(summary.get(k) == record[f] for k, f in (("HPL_N", "n"), ("HPL_NB", "nb"),
                                                           ("HPL_nprow", "p"), ("HPL_npcol", "q")))
    t, tf = summary.get("HPL_time"), summary.get("HPL_Tflops")
    if same and isinstance(t, (int, float)) and isinstance(tf, (int, float)) and t > 0 and tf > 0:
        record["printed"] = {"time_s": record["time_s"], "gflops": record["gflops"]}
        record["time_s"], record["gflops"] = float(t), float(f"{tf * 1e3:.6g}")  # %g: 6 digits


# ---------------------------------------------------------------------------------------------
# Finding and running an engine
# ---------------------------------------------------------------------------------------------
def _check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise UsageError(f"unknown HPL engine {engine!r}", f"use one of: {', '.join(ENGINES)} (or the built-in one)")


def find_engine(engine: str, path: str | None = None, verify: bool = True) -> str:
    """Absolute path of the engine's executable: ``path`` (a file, or a directory holding it) if
    given, else the one on $PATH. EnvironmentProblem naming how to get it when missing, or (with
    ``verify``) when the file is not the engine (see :func:`check_engine_binary`)."""
    _check_engine(engine)
    fix = ENGINE_FIX[engine]
    if path:
        p = Path(path).expanduser()
        if p.is_dir():
            p = p / engine
        if not p.is_file():
            raise EnvironmentProblem(f"{engine} not found at {path}", fix)
        if not os.access(p, os.X_OK):
            raise EnvironmentProblem(f"{p} is not executable", f"chmod +x {p}, or {fix}")
        if verify:
            check_engine_binary(engine, str(p.resolve()))
        return str(p.resolve())
    found = shutil.which(engine)
    if not found:
        raise EnvironmentProblem(f"{engine} not found on PATH", fix)
    if verify:
        check_engine_binary(engine, str(Path(found).resolve()))
    return str(Path(found).resolve())


def check_engine_binary(engine: str, path: str) -> None:
    """EnvironmentProblem unless ``path`` is an ELF executable that reads the engine's input file
    (so --engine-path /bin/true is refused before a run is opened, not after it failed)."""
    from clusterbench.errors import UsageError
    from clusterbench.files import read_bytes

    try:
        data = read_bytes(path, "engine binary", fix=f"give the path of the {engine} executable")
    except UsageError as exc:
        raise EnvironmentProblem(f"--engine-path: {exc.problem}", exc.fix) from None
    if data[:4] != b"\x7fELF":
        raise EnvironmentProblem(f"--engine-path {path} is not a compiled program (not an ELF file): not {engine}",
                                 f"give the {engine} executable itself, not a wrapper script; {ENGINE_FIX[engine]}")
    if INPUT_FILE[engine].encode() not in data:  # every build names the input file it reads
        raise EnvironmentProblem(f"--engine-path {path} is not {engine} (it never mentions "
                                 f"{INPUT_FILE[engine]}, the input file {engine} reads)",
                                 f"give the path of the {engine} executable; {ENGINE_FIX[engine]}")


def _tail(text: str, n: int = OUTPUT_TAIL) -> str:
    return text if len(text) <= n else text[-n:]


def run_external(engine: str, case: HplCase, *, mpi: mpimod.MpiInstall, spec: mpimod.LaunchSpec, timeout: float,
                 env: dict[str, str] | None = None, exe: str | None = None, workdir: str | None = None,
                 extra: dict | None = None) -> dict:
    """Run ``engine`` (hpcc or xhpl) on ``case`` under MPI and return its parsed result.

    The input file is written into a fresh directory (a temporary one, removed afterwards; or a new
    ``cb-hpl-*`` directory under ``workdir``, kept). ``spec`` must ask for ``p*q`` ranks; ``env`` is
    exported to every rank. The run is bounded by ``timeout`` seconds and its whole session (mpirun,
    daemons, ranks) is killed on timeout, failure or Ctrl-C.

    Returns {"engine", "exe", "version", "case", "hpl" (the record), "summary" (hpcc), "failed"
    (hpcc), "input", "command", "transport", "output_file" (tail of the engine's output), "wall_s",
    "workdir" (when kept)}. Raises KernelFailed when the engine exits non-zero, is killed or times
    out, prints no HPL result or one for another case, reports a failed test, or its residual
    check FAILED or was skipped (never a pass)."""
    _check_engine(engine)
    case.check()
    if timeout <= 0:
        raise UsageError(f"timeout {timeout} is not allowed", "give a positive number of seconds")
    if spec.nranks != case.p * case.q:
        raise UsageError(f"a {case.p}x{case.q} grid needs {case.p * case.q} ranks, the launch asks {spec.nranks}",
                         "launch P*Q ranks")
    text = hpcc_input(case, extra=extra) if engine == "hpcc" else xhpl_input(case, extra=extra)
    threshold = float((extra or {}).get("threshold", ALGORITHM_DEFAULTS["threshold"]))
    # not verified here: the benchmark checks the binary before the run opens; a program that
    # still prints no result is caught by the output parser (and tested with true/false)
    path = find_engine(engine, exe, verify=False)
    spec = replace(spec, env={**spec.env, **(env or {})})
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        wd = tempfile.mkdtemp(prefix="cb-hpl-", dir=workdir)
        return _run_in(engine, case, path, text, threshold, mpi, spec, timeout, wd, keep=True)
    with tempfile.TemporaryDirectory(prefix="cb-hpl-") as wd:
        return _run_in(engine, case, path, text, threshold, mpi, spec, timeout, wd, keep=False)


def _run_in(engine: str, case: HplCase, exe: str, text: str, threshold: float, mpi: mpimod.MpiInstall,
            spec: mpimod.LaunchSpec, timeout: float, wd: str, keep: bool) -> dict:
    Path(wd, INPUT_FILE[engine]).write_text(text)
    cmd, env_add = mpimod.build_command(mpi, spec, [exe], wd)
    cmd = [*spec.prefix, *cmd]
    started = time.monotonic()
    memory = process.memory_state()
    try:  # kill -9 of clusterbench: the launcher, the ranks and wd go too
        run = process.spawn(cmd, cwd=wd, env={**os.environ, **env_add}, launcher=True,
                            cleanup=[] if keep else [wd])
    except OSError as exc:
        raise EnvironmentProblem(f"cannot start {cmd[0]} ({exc.strerror})", mpimod.INSTALL_FIX) from exc
    proc = run.proc
    try:
        try:
            out_b, err_b = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise KernelFailed(f"{engine} timed out after {seconds(timeout)} s at N={case.n} (all its MPI processes "
                               "were killed)", "raise the timeout or choose a smaller N") from exc
    finally:
        run.end()  # the ranks live in process groups of their own: end the session
    wall = time.monotonic() - started
    out, err = out_b.decode(errors="replace"), err_b.decode(errors="replace")
    outfile = Path(wd, "hpccoutf.txt")
    output = (outfile.read_text(errors="replace") if outfile.is_file() else "") if engine == "hpcc" else out
    what = f"{engine} (N={case.n}, NB={case.nb}, {case.p}x{case.q})"
    if proc.returncode != 0:
        # a rank that died is named with its cause (out-of-memory killer: a smaller N; from outside: not)
        problem, fix = mpimod.explain_failure(err + "\n" + out, proc.returncode, what,
                                       local=not spec.hosts or spec.sim is not None, before=memory)
        errors = hpl_errors(output)
        raise KernelFailed(problem + (f" ({errors[0]})" if errors else ""), fix)
    proof = mpimod.parse_transport_proof(err)
    if spec.prove_transport and mpi.name == "openmpi":
        mpimod.check_transport(spec.transport, proof)
    result: dict[str, Any] = {"engine": engine, "exe": exe, "case": asdict(case)}
    if engine == "hpcc":
        if not output:
            raise KernelFailed(f"{what} wrote no hpccoutf.txt in {wd}",
                               "run from a directory rank 0 shares (workdir on a shared file system)")
        parsed = parse_hpcc_output(output)
        records, summary = parsed["hpl"], parsed["summary"]
        result.update(version=parsed["version"], summary=summary, failed=parsed["failed"])
    else:
        records, summary = parse_hpl_output(output), {}
        result["version"] = records[0]["version"] if records else None
    record = _one_record(what, case, records, output, threshold)
    if engine == "hpcc":
        _refine_from_summary(record, summary)
        others = [name for name in result["failed"] if name != "HPL"]
        if others:
            raise KernelFailed(f"{what}: hpcc test(s) {', '.join(others)} reported a failure",
                               "see the hpcc output; rerun, or check the node's memory and MPI")
    result.update(hpl=record, input=text, command=cmd, transport=proof.as_dict(),
                  output_file=_tail(output), wall_s=wall)
    if keep:
        result["workdir"] = wd
    return result


def _one_record(what: str, case: HplCase, records: list[dict], output: str, threshold: float) -> dict:
    """The single result for ``case``, passed; KernelFailed otherwise. ``threshold`` is the one
    written in the input (HPL prints it rounded to 0.1)."""
    if not records:
        errors = hpl_errors(output)
        raise KernelFailed(f"{what} printed no HPL result" + (f": {errors[0]}" if errors else ""),
                           "check N, NB and the grid against the ranks; see the engine's output")
    rec = records[-1]
    rec["threshold"] = threshold
    got = (rec["n"], rec["nb"], rec["p"], rec["q"], rec["pmap"])
    want = (case.n, case.nb, case.p, case.q, case.pmap)
    if got != want:
        raise KernelFailed(f"{what} reported N={got[0]} NB={got[1]} {got[2]}x{got[3]} {got[4]}-major, not the case "
                           "asked", "report this as a bug")
    if not rec["checked"]:
        raise KernelFailed(f"{what}: HPL printed no residual check (threshold {rec['threshold']}), so the "
                           "result is not validated", "use a positive threshold (HPL's is 16.0)")
    if not rec["passed"]:
        raise KernelFailed(f"{what}: HPL residual check FAILED: scaled residual {rec['residual']:g} is not below "
                           f"the threshold {rec['threshold']}", "the solution is wrong: check the BLAS, the MPI "
                           "and the node's memory (rerun; a repeatable failure is a fault)")
    return rec
