"""What the speed scripts share: the raw log (its default name, a log every line is printed to and appended
to, a log written at the end), and the machine in one line (cpu model, load). Imported by the scripts of
this folder (a script's own folder is on its import path); it measures nothing itself.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def log_file(given: str | None, name: str) -> Path:
    """``given`` (a script's ``--log``), else ``speed/results-<today>-<name>.txt``."""
    return Path(given) if given else REPO / "speed" / f"results-{time.strftime('%Y-%m-%d')}-{name}.txt"


class RawLog:
    """A raw log written as it goes: each line printed and appended to ``path`` (opened with ``mode``),
    flushed, so a run cut short keeps what it said. Without a path the lines are only printed."""

    def __init__(self, path: Path | str | None, mode: str = "a") -> None:
        self.path = Path(path) if path else None
        self._file = open(self.path, mode) if self.path else None

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        if self._file:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file:
            self._file.close()


def save_log(path: Path, lines: list[str], label: str = "raw log") -> None:
    """Write a log gathered in memory at the end of a script, and say where it is."""
    path.write_text("\n".join(lines) + "\n")
    print(f"{label}: {path}")


def cpu_model() -> str:
    """The cpu's model name from /proc/cpuinfo (the architecture where it has none)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def load() -> str:
    """The load averages over 1, 5 and 15 minutes."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class SimWorld:
    """A speed script's own virtual cluster and store: clusterbench commands (``cmd``) with their own
    prefix, state folder and store in a temporary folder (never the user's), a cluster brought up anew
    (``up``) and taken down (``down``), and a command timed into a raw log (``timed``: its wall time as
    the caller sees it, Python's start included, its exit status and the load average at its start)."""

    @classmethod
    def begin(cls, prefix: str, name: str, given_log: str | None, header: str, tail: str = "") -> SimWorld:
        """A script's start: root checked (the virtual cluster needs it), its raw log opened
        (:func:`log_file` ``given_log``, ``<machine>-name``) and headed ``# HEADER, <time>; <machine><tail>``."""
        if os.geteuid() != 0:
            sys.exit("needs root (the virtual cluster)")
        log = RawLog(log_file(given_log, f"{platform.node() or 'host'}-{name}"), "w")
        log(f"# {header}, {time.strftime('%Y-%m-%d %H:%M:%S')}; {cpu_model()}, {os.cpu_count()} cpus, "
            f"{platform.release()}{tail}")
        return cls(prefix, log)

    def __init__(self, prefix: str, log: RawLog) -> None:
        self.prefix, self.log = prefix, log
        self.tmp = Path(tempfile.mkdtemp(prefix=f"cb-{prefix.rstrip('-')}-"))
        self.cb = [sys.executable, "-m", "clusterbench"]
        self.env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": prefix, "CLUSTERBENCH_SIM_STATE": str(self.tmp / "sim"),
                    "CLUSTERBENCH_DB": str(self.tmp / "r.db"), "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1",
                    "PYTHONPATH": str(REPO / "src")}

    def cmd(self, argv: list[str], timeout: float = 900, check: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.cb, *argv], capture_output=True, text=True, env=self.env, timeout=timeout,
                              check=check)

    def up(self, n: int, *options: str) -> list[str]:
        """A fresh cluster of ``n`` nodes (``sim-cluster up`` ``options``); their names."""
        self.down()
        self.cmd(["sim-cluster", "up", "--nodes", str(n), *options], timeout=600, check=True)
        return [f"{self.prefix}n{i}" for i in range(1, n + 1)]

    def down(self) -> None:
        self.cmd(["sim-cluster", "down", "--force"], timeout=300)

    def timed(self, what: str, argv: list[str], detail=lambda p: "") -> subprocess.CompletedProcess[str]:
        """Run ``argv``; log ``what: WALL s, exit N, load L at its start`` and ``detail(process)``."""
        load_at = os.getloadavg()[0]
        t0 = time.monotonic()
        p = self.cmd(argv)
        self.log(f"{what}: {time.monotonic() - t0:.1f} s, exit {p.returncode}, load {load_at:.1f} at its start"
                 f"{detail(p)}")
        return p


#: hpcc's input file (hpccinf.txt): one HPL problem of size N, block NB, on a 1 x Q grid (HPL's usual panel,
#: broadcast and swap settings), and PTRANS at hpcc's own sizes
HPCCINF = """HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
{device}            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n}          Ns
1            # of NBs
{nb}         NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
1            Ps
{q}            Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                               Number of additional problem sizes for PTRANS
1200 10000 30000                values of N
0                               number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64        values of NB
"""


def hpccinf(n: int, nb: int, q: int, device: int = 6) -> str:
    """hpccinf.txt for N, NB and a 1 x Q grid; ``device`` 6 prints HPL's output, 8 writes it to HPL.out."""
    return HPCCINF.format(n=n, nb=nb, q=q, device=device)


def hpcc_summary(text: str) -> dict[str, float]:
    """The numeric ``key=value`` lines of hpccoutf.txt's summary section (after "Begin of Summary section.")."""
    keys: dict[str, float] = {}
    for line in text.split("Begin of Summary section.")[-1].splitlines():
        k, eq, v = line.partition("=")
        if eq:
            try:
                keys[k.strip()] = float(v)
            except ValueError:
                pass
    return keys
