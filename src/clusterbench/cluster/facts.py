"""What a node says about itself, asked over ssh before clusterbench is installed there.

:data:`SNIPPET` runs with the node's own ``python3`` and the standard library only (so it works on a
fresh node); it prints one JSON document: host name, home, Python, free memory and disk, the
clock, the compiler, MPI, BLAS, hwloc and FFTW it has, its network addresses and RDMA ports, the operating system, the clusterbench
installed by ``cluster install`` (version and digest), whether it sees a marker file the head
wrote in its own home (a shared ``$HOME``), and how it resolves the other nodes' names.
:func:`missing_packages` turns the document into the packages to install, with the command.
"""
from __future__ import annotations

from typing import Any

#: one JSON document on stdout; argv: [names to resolve..., "--marker", PATH]
SNIPPET = r"""
import fnmatch, glob, json, os, platform, shutil, socket, subprocess, sys, time
t0 = time.time()
args = sys.argv[1:]
marker = args[args.index("--marker") + 1] if "--marker" in args else ""
names = args[:args.index("--marker")] if "--marker" in args else args
def start(cmd):
    try:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError:
        return None
def output(p, deadline):
    # (stdout, stderr) of a command that succeeded by the deadline, else None
    if p is None:
        return None
    try:
        stdout, stderr = p.communicate(timeout=max(0.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None
    return (stdout, stderr) if p.returncode == 0 else None
def first(p, deadline):
    got = output(p, deadline)
    out = (got[0] or got[1] or "").strip().splitlines() if got else []
    return out[0].strip() if out else None
# the versions asked at once (each within 10 s), while the rest is looked at
asked = {k: start(c) for k, c in (("cc", ["cc", "--version"]), ("mpicc", ["mpicc", "--version"]),
                                  ("mpirun", ["mpirun", "--version"]),
                                  ("mpiexec_mpich", ["mpiexec.mpich", "--version"]))}
asked_at = time.time()
# every address of the node but loopback and link-local (two nodes with the same one: a NAT or container
# bridge, which MPI's TCP transport may take for a way to the other node)
addrs = start(["ip", "-o", "addr", "show"])
_dirs = {}
def listing(d):
    if d not in _dirs:
        try:
            _dirs[d] = [n for n in os.listdir(d) if not n.startswith(".")]
        except OSError:
            _dirs[d] = []
    return _dirs[d]
def libs(*patterns):
    # each folder listed once (as glob.glob(folder/pattern) would find them: no hidden names)
    dirs = ["/usr/lib", "/usr/lib64", "/usr/local/lib", "/lib"] + glob.glob("/usr/lib/*-linux-gnu*")
    return sorted({n for d in dirs for n in listing(d) for p in patterns if fnmatch.fnmatch(n, p)})
def meminfo():
    try:
        with open("/proc/meminfo") as fh:
            kv = dict(line.split(":", 1) for line in fh if ":" in line)
        return int(kv["MemAvailable"].split()[0]) * 1024, int(kv["MemTotal"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None, None
def osrel():
    try:
        with open("/etc/os-release") as fh:
            kv = dict(l.strip().split("=", 1) for l in fh if "=" in l)
        return {k: kv.get(k, "").strip('"') for k in ("ID", "ID_LIKE", "VERSION_ID", "PRETTY_NAME")}
    except OSError:
        return {}
home = os.path.expanduser("~")
venv = os.path.join(home, ".local/share/clusterbench/venv")
inst = None
try:
    with open(os.path.join(home, ".local/share/clusterbench/installed.json")) as fh:
        inst = json.load(fh)
except (OSError, ValueError):
    pass
def addresses(p, deadline):
    got = output(p, deadline)
    if got is None:
        return None
    out = []
    for line in got[0].splitlines():
        w = line.split()
        if len(w) > 3 and w[2] in ("inet", "inet6") and w[1] != "lo" and "scope host" not in line \
                and not w[3].startswith(("127.", "169.254.", "fe80:", "::1/")):
            out.append([w[1].split("@")[0], w[3]])
    return out
def rdma():
    # RDMA devices (InfiniBand, RoCE, soft-RoCE) and their ports' states ("4: ACTIVE"); {} when none
    out = {}
    for dev in sorted(glob.glob("/sys/class/infiniband/*")):
        ports = {}
        for port in sorted(glob.glob(dev + "/ports/*")):
            try:
                with open(port + "/state") as fh:
                    ports[os.path.basename(port)] = fh.read().strip()
            except OSError:
                ports[os.path.basename(port)] = None
        out[os.path.basename(dev)] = ports
    return out
resolved = {}
for n in names:
    try:
        ip = socket.gethostbyname(n)
    except OSError:
        ip = None
    back = None
    if ip:
        try:
            back = socket.gethostbyaddr(ip)[0]
        except OSError:
            pass
    resolved[n] = {"address": ip, "name": back}
avail, total = meminfo()
try:
    st = os.statvfs(home)
    disk = st.f_bavail * st.f_frsize
except OSError:
    disk = None
doc = {
    "hostname": socket.gethostname(), "home": home, "user": os.environ.get("USER") or str(os.getuid()),
    "python": sys.version.split()[0], "python_ok": sys.version_info >= (3, 10), "machine": platform.machine(),
    "os": osrel(), "cpus": os.cpu_count(), "mem_available": avail, "mem_total": total, "home_free": disk,
    **{k: first(p, asked_at + 10) for k, p in asked.items()},
    "orted": shutil.which("orted"), "lstopo": shutil.which("lstopo-no-graphics"),
    "blas": libs("libopenblas*.so*", "libblis*.so*", "libblas.so*", "libmkl_rt.so*"),
    "hwloc": libs("libhwloc.so*"), "fftw": libs("libfftw3.so*"), "fftw_mpi": libs("libfftw3_mpi.so*"),
    "fftw_h": os.path.exists("/usr/include/fftw3.h"), "numa": libs("libnuma.so*"),
    "installed": inst, "venv_python": os.path.exists(os.path.join(venv, "bin/python")),
    "marker": bool(marker) and os.path.exists(marker), "resolve": resolved,
    "addresses": addresses(addrs, asked_at + 10),
    "rdma": rdma(),
    "time_start": t0, "time": time.time(),
}
print(json.dumps(doc))
"""

#: what a node needs, as Debian/Ubuntu packages (and what to look for in the facts)
PACKAGES = (
    ("C compiler", "cc", ("build-essential",)),
    ("MPI", "mpicc", ("openmpi-bin", "libopenmpi-dev")),
    ("BLAS", "blas", ("libopenblas-dev",)),
    ("hwloc", "hwloc", ("hwloc",)),
    ("FFTW", "fftw", ("libfftw3-dev", "libfftw3-mpi-dev")),
    ("libnuma", "numa", ("libnuma-dev",)),
)
_MANAGERS = {"debian": "apt-get install -y", "ubuntu": "apt-get install -y", "raspbian": "apt-get install -y",
             "fedora": "dnf install -y", "rhel": "dnf install -y", "centos": "dnf install -y",
             "rocky": "dnf install -y", "almalinux": "dnf install -y", "opensuse": "zypper install -y",
             "sles": "zypper install -y"}
#: the same needs under RPM names
_RPM = {"build-essential": "gcc make", "openmpi-bin": "openmpi", "libopenmpi-dev": "openmpi-devel",
        "libopenblas-dev": "openblas-devel", "hwloc": "hwloc", "libfftw3-dev": "fftw-devel",
        "libfftw3-mpi-dev": "fftw-openmpi-devel", "libnuma-dev": "numactl-devel"}


#: what a node cannot do without: clusterbench builds its kernels there and MPI starts its ranks there
REQUIRED = ("C compiler", "MPI")


def missing_packages(facts: dict[str, Any], only: tuple[str, ...] | None = None) -> tuple[list[str], str | None]:
    """(what is missing, by name; the command that installs it on this node's OS, or None);
    ``only``: look at these needs only (names from :data:`PACKAGES`, e.g. :data:`REQUIRED`)."""
    missing, pkgs = [], []
    for what, key, deb in PACKAGES:
        if (only is None or what in only) and not facts.get(key):
            missing.append(what)
            pkgs += deb
    if not missing:
        return [], None
    os_ = facts.get("os") or {}
    ids = [os_.get("ID", "")] + os_.get("ID_LIKE", "").split()
    cmd = next((_MANAGERS[i] for i in ids if i in _MANAGERS), None)
    if cmd is None:
        return missing, None
    if not cmd.startswith("apt"):
        pkgs = [p for d in pkgs for p in _RPM.get(d, d).split()]
    return missing, f"sudo {cmd} {' '.join(dict.fromkeys(pkgs))}"
