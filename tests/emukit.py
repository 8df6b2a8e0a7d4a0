"""The emulated tier's kit: Debian 12 root filesystems of foreign architectures, run under QEMU user mode.

An image is built once per (architecture, package list) with mmdebstrap (or debootstrap --foreign and its
second stage when mmdebstrap is absent), from Debian's package registry, into
/var/cache/clusterbench/emu/<arch>-<hash of the package list>/ (outside the tree; CLUSTERBENCH_EMU_CACHE
moves it), under a lock so two runs do not race; the times of each step are written beside it
(<image>/.clusterbench-emu.json). Inside, the checkout is bind-mounted read-write at /src and clusterbench
installed as the README says (./bootstrap.sh install, with the venv outside the tree at /opt/cbvenv and
Debian's python3-numpy/matplotlib/rich through --system-site-packages: PyPI has no armhf wheels).

Commands run in the image by `chroot` inside a private mount namespace (unshare): /proc, /dev, /sys and
/src are mounted there and vanish with the namespace. The foreign binaries run through the kernel's
binfmt_misc entries for qemu-user-static (registered with the F flag, so the interpreter works in the
chroot). Run as a script: `python tests/emukit.py build arm64` builds (or reuses) one image.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SUITE = "bookworm"
MIRROR = os.environ.get("CLUSTERBENCH_EMU_MIRROR", "http://deb.debian.org/debian")
CACHE = Path(os.environ.get("CLUSTERBENCH_EMU_CACHE", "/var/cache/clusterbench/emu"))
REPO = Path(__file__).resolve().parent.parent

# Debian architecture -> (uname -m inside, qemu-user binfmt entry, the seed core it stands for)
ARCHES = {
    "arm64": ("aarch64", "qemu-aarch64", "seed 000's Raspberry Pi 4 (Cortex-A72)"),
    "armhf": ("armv7l", "qemu-arm", "seed 003's ODROID boards (Cortex-A9, A15/A7)"),
    "ppc64el": ("ppc64le", "qemu-ppc64le", "seed 001's JULI (PowerPC 970MP; little-endian POWER8+ here)"),
}

# bootstrap.sh's APT_PKGS (what the README installs) and Debian's Python libraries in place of pip builds
PACKAGES = ("build-essential hwloc numactl libnuma-dev libopenblas-dev libblis-dev python3-venv "
            "openmpi-bin libopenmpi-dev iproute2 iputils-ping ethtool hpcc libfftw3-dev libfftw3-mpi-dev "
            "python3-pip python3-numpy python3-matplotlib python3-rich ca-certificates procps").split()

#: dpkg options of the image: no documentation, manual pages, info or translations (copyrights kept)
DPKG_EXCLUDE = ("path-exclude=/usr/share/doc/*", "path-include=/usr/share/doc/*/copyright",
                "path-exclude=/usr/share/man/*", "path-exclude=/usr/share/info/*",
                "path-exclude=/usr/share/locale/*", "path-include=/usr/share/locale/locale.alias")

#: commands whose work in the packages' maintainer scripts is architecture-independent and was half of a cold
#: build under emulation (arm64, 2634 s: byte-compiling Python packages about 1200 s, python3-sympy alone
#: 593 s; update-ca-certificates 414 s): during the install each is diverted (dpkg-divert) to a no-op, and
#: after it their work is done natively by :func:`finish_natively`
DEFERRED = ("/usr/bin/py3compile", "/usr/sbin/update-ca-certificates")

STAMP = ".clusterbench-emu.json"
BASE_STAMP = ".clusterbench-emu-base.json"
VENV = "/opt/cbvenv"


def image_dir(arch: str) -> Path:
    recipe = [SUITE, arch, *sorted(PACKAGES), *DPKG_EXCLUDE, *DEFERRED]
    digest = hashlib.sha256(" ".join(recipe).encode()).hexdigest()[:12]
    return CACHE / f"{arch}-{digest}"


def binfmt_ok(arch: str) -> str | None:
    """None when foreign binaries of `arch` run here; else why not (one line)."""
    entry = Path("/proc/sys/fs/binfmt_misc") / ARCHES[arch][1]
    if not Path("/proc/sys/fs/binfmt_misc/status").exists():
        return "binfmt_misc is not mounted (mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc)"
    if not entry.exists():
        return f"no binfmt entry {entry.name} (install qemu-user-static and binfmt-support)"
    text = entry.read_text()
    if "enabled" not in text.splitlines()[0]:
        return f"binfmt entry {entry.name} is disabled"
    flags = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("flags:")), "")
    if "F" not in flags:
        return f"binfmt entry {entry.name} lacks the F flag (the interpreter would not be found in a chroot)"
    return None


#: binfmt entries this process enabled or registered (removed again by :func:`restore_binfmt`)
_REGISTERED: list[str] = []


def prepare_binfmt(arch: str) -> str | None:
    """Make foreign `arch` binaries runnable (mount binfmt_misc, enable or import the qemu entry with
    update-binfmts, as Debian's qemu-user-static declares it: with the F flag); None, or why not."""
    if os.geteuid() == 0 and not Path("/proc/sys/fs/binfmt_misc/status").exists():
        subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", "/proc/sys/fs/binfmt_misc"],
                       capture_output=True, timeout=10)
    name = ARCHES[arch][1]
    entry = Path("/proc/sys/fs/binfmt_misc") / name
    if os.geteuid() == 0 and shutil.which("update-binfmts") and Path("/proc/sys/fs/binfmt_misc/status").exists():
        if not entry.exists():
            subprocess.run(["update-binfmts", "--import", name], capture_output=True, timeout=30)
            if entry.exists():
                _REGISTERED.append(name)
        elif "enabled" not in entry.read_text().splitlines()[0]:
            subprocess.run(["update-binfmts", "--enable", name], capture_output=True, timeout=30)
            _REGISTERED.append(name)
    return binfmt_ok(arch)


def restore_binfmt() -> None:
    """Disable the binfmt entries this process turned on (the machine as the tier found it)."""
    while _REGISTERED:
        subprocess.run(["update-binfmts", "--disable", _REGISTERED.pop()], capture_output=True, timeout=30)


def registry_reachable(timeout: float = 10) -> bool:
    import urllib.request
    try:
        with urllib.request.urlopen(f"{MIRROR}/dists/{SUITE}/Release", timeout=timeout) as r:
            return r.status == 200
    except OSError:
        return False


def machine_forbids(arch: str) -> str | None:
    """One line saying why this machine cannot run the tier for `arch`, or None."""
    if os.geteuid() != 0:
        return "not root (chroot and mounts need root)"
    if shutil.which("unshare") is None or shutil.which("chroot") is None:
        return "no unshare/chroot"
    why = prepare_binfmt(arch)
    if why:
        return why
    if not ready(arch):
        if not (shutil.which("mmdebstrap") or shutil.which("debootstrap")):
            return "no cached image and neither mmdebstrap nor debootstrap installed"
        if not registry_reachable():
            return f"no cached image and Debian's package registry ({MIRROR}) is unreachable"
    return None


def ready(arch: str) -> bool:
    return (image_dir(arch) / STAMP).exists()


def stamp(arch: str) -> dict:
    return json.loads((image_dir(arch) / STAMP).read_text())


def _run(cmd: list[str], timeout: float, log) -> None:
    """`cmd` with its output in `log`, each line prefixed by the seconds since it started (where a
    build's time goes: mmdebstrap's download, essential packages, unpacking, configuring)."""
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    t0 = time.monotonic()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace") as p:
        assert p.stdout is not None
        for line in p.stdout:
            log.write(f"[{time.monotonic() - t0:7.1f}s] {line}")
            log.flush()
            if time.monotonic() - t0 > timeout:
                p.kill()
                raise subprocess.TimeoutExpired(cmd, timeout)
        if p.wait() != 0:
            raise subprocess.CalledProcessError(p.returncode, cmd)


def build(arch: str, timeout: float = 7200) -> Path:
    """Build the image of `arch` unless cached; return its directory. Raises on failure."""
    target = image_dir(arch)
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second run waits here and then finds the image ready
        if (target / STAMP).exists():
            return target
        work = CACHE / f"{target.name}.building"
        base = work / BASE_STAMP  # the root filesystem is whole: a failed install resumes from here
        times: dict[str, float] = json.loads(base.read_text()) if base.exists() else {}
        with open(CACHE / f"{target.name}.log", "a") as log:
            if not times:
                if work.exists():
                    shutil.rmtree(work)
                times = _root_filesystem(arch, work, timeout, log)
                base.write_text(json.dumps(times))
            (work / "src").mkdir(exist_ok=True)
            t1 = time.monotonic()
            _install(work, timeout, log)
            times["clusterbench install"] = time.monotonic() - t1
            times["total"] = sum(v for k, v in times.items() if k != "total")
        (work / STAMP).write_text(json.dumps({
            "arch": arch, "suite": SUITE, "mirror": MIRROR, "packages": PACKAGES,
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": {k: round(v, 1) for k, v in times.items()}}, indent=1))
        work.rename(target)
        return target


def defer_natively(root: Path) -> None:
    """Divert DEFERRED in the image at `root` to no-ops, before its packages are installed."""
    for path in DEFERRED:
        subprocess.run(["chroot", str(root), "dpkg-divert", "--local", "--rename", "--divert",
                        f"{path}.cb-deferred", "--add", path], check=True, capture_output=True, timeout=600)
        stub = root / path.lstrip("/")
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text("#!/bin/sh\n# clusterbench's emulated image: done natively after the install "
                        "(tests/emukit.py)\nexit 0\n")
        stub.chmod(0o755)


def finish_natively(root: Path, log) -> None:
    """Undo :func:`defer_natively` and do the deferred work with this machine's own tools: byte-compile the
    image's Python packages with the host's Python of the same version (bytecode does not depend on the
    architecture; the paths recorded in it are the image's), and write the image's CA bundle from the
    certificates its /etc/ca-certificates.conf selects (what update-ca-certificates writes; no hash links:
    OpenSSL reads the bundle)."""
    for path in DEFERRED:
        (root / path.lstrip("/")).unlink(missing_ok=True)
        subprocess.run(["chroot", str(root), "dpkg-divert", "--local", "--rename", "--divert",
                        f"{path}.cb-deferred", "--remove", path], check=True, capture_output=True, timeout=600)
    version = os.readlink(root / "usr/bin/python3") if (root / "usr/bin/python3").is_symlink() else ""
    host = shutil.which(version) if version else None  # e.g. python3.11 on this machine
    dirs = [str(d) for d in (root / "usr/lib/python3/dist-packages", root / "usr/share/python3") if d.is_dir()]
    if host and dirs:  # what the packages' `py3compile -p <package>` would have compiled
        r = subprocess.run([host, "-m", "compileall", "-q", "-j", "0", "-s", str(root), "-p", "/", *dirs],
                           capture_output=True, text=True, timeout=1800)
        log.write(f"byte-compiled {' '.join(dirs)} natively with {host}: rc {r.returncode} "
                  f"{r.stdout[-2000:]}{r.stderr[-2000:]}\n")
    else:
        log.write(f"no native {version or 'python3'}: the image's Python packages compile on first import\n")
    conf = root / "etc/ca-certificates.conf"
    if conf.exists():
        names = [ln.strip() for ln in conf.read_text().splitlines() if ln.strip() and ln[0] not in "#!"]
        pems = [(root / "usr/share/ca-certificates" / n).read_text() for n in names
                if (root / "usr/share/ca-certificates" / n).exists()]
        bundle = root / "etc/ssl/certs/ca-certificates.crt"
        bundle.parent.mkdir(parents=True, exist_ok=True)
        bundle.write_text("".join(p if p.endswith("\n") else p + "\n" for p in pems))
        log.write(f"wrote {bundle} natively: {len(pems)} certificates\n")
    log.flush()


def _root_filesystem(arch: str, work: Path, timeout: float, log) -> dict[str, float]:
    """Debian with PACKAGES in `work`; the seconds of each step."""
    times: dict[str, float] = {}
    t0 = time.monotonic()
    if shutil.which("mmdebstrap") and shutil.which("arch-test"):  # mmdebstrap needs arch-test for foreign arches
        # without Recommends: matplotlib's and numpy's pull sympy, lxml, boost and more, whose emulated
        # byte-compiling and unpacking was most of a 60-minute cold build here
        # and without documentation, manual pages or translations: each file is one more emulated dpkg step
        hook = f"{_q(sys.executable)} {_q(str(Path(__file__).resolve()))} defer-natively \"$1\""
        _run(["nice", "-n", "10", "mmdebstrap", "--verbose", "--variant=apt", f"--architectures={arch}",
              "--aptopt=APT::Install-Recommends \"false\"", *(f"--dpkgopt={o}" for o in DPKG_EXCLUDE),
              f"--essential-hook={hook}", "--include=" + ",".join(PACKAGES), SUITE, str(work), MIRROR],
             timeout, log)
        times["mmdebstrap"] = time.monotonic() - t0
        t1 = time.monotonic()
        finish_natively(work, log)
        times["native byte-compile and CA bundle"] = time.monotonic() - t1
        return times
    _run(["nice", "-n", "10", "debootstrap", "--foreign", f"--arch={arch}", "--variant=minbase",
          SUITE, str(work), MIRROR], timeout, log)
    times["debootstrap first stage"] = time.monotonic() - t0
    t1 = time.monotonic()
    _run(["nice", "-n", "10", "chroot", str(work), "/debootstrap/debootstrap", "--second-stage"], timeout, log)
    times["debootstrap second stage"] = time.monotonic() - t1
    t1 = time.monotonic()
    (work / "etc/apt/sources.list").write_text(f"deb {MIRROR} {SUITE} main\n")
    defer_natively(work)
    _run(["nice", "-n", "10", "chroot", str(work), "sh", "-c",
          "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
          "--no-install-recommends " + " ".join(PACKAGES)], timeout, log)
    times["apt-get install"] = time.monotonic() - t1
    t1 = time.monotonic()
    finish_natively(work, log)
    times["native byte-compile and CA bundle"] = time.monotonic() - t1
    return times


def trust_host_ca(root: Path) -> None:
    """The host's trust store into the image at `root`, named in its /etc/pip.conf: where TLS to PyPI goes
    through an intercepting proxy, only the host's bundle holds its authority (public certificates only)."""
    bundle = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt"
    if os.path.exists(bundle):
        (root / "etc/ssl/certs").mkdir(parents=True, exist_ok=True)
        shutil.copy(bundle, root / "etc/ssl/certs/cb-host-ca-bundle.crt")
        (root / "etc/pip.conf").write_text("[global]\ncert = /etc/ssl/certs/cb-host-ca-bundle.crt\n")


def _install(root: Path, timeout: float, log) -> None:
    """clusterbench installed as the README says: ./bootstrap.sh install (its venv outside the tree)."""
    trust_host_ca(root)  # pip in the chroot: the image's own store lacks a proxy's authority
    if Path("/etc/resolv.conf").exists():  # pip reaches PyPI from inside (mmdebstrap removes its copy)
        (root / "etc/resolv.conf").unlink(missing_ok=True)
        shutil.copyfile("/etc/resolv.conf", root / "etc/resolv.conf")
    _run(["nice", "-n", "10", *_chroot_argv(root, "python3 -m venv --system-site-packages " + VENV
                                            + " && cd /src && CLUSTERBENCH_VENV=" + VENV
                                            + " CLUSTERBENCH_WITHOUT=postgresql ./bootstrap.sh install")],
         timeout, log)


#: directories a 32-bit guest lists with readdir() compiled without large-file support, per architecture: on
#: ext4, qemu-user (a 64-bit process) gets 64-bit directory cookies that the 32-bit readdir cannot hold, so it
#: fails with EOVERFLOW (QEMU's launchpad bug 1805913) and Open MPI finds no components at all (`mpirun:
#: Error: unknown option "--version"`). Each is copied to a tmpfs (small cookies) in the private namespace.
READDIR_TMPFS = {"armhf": ("usr/lib/arm-linux-gnueabihf/openmpi/lib/openmpi3",
                           "usr/lib/arm-linux-gnueabihf/pmix2/lib/pmix")}


def _chroot_argv(root: Path, script: str, env: dict[str, str] | None = None) -> list[str]:
    """argv running `script` (sh) in `root` within a private mount namespace holding /proc, /dev, /sys, /src
    (and, for 32-bit guests, READDIR_TMPFS's directories on a tmpfs)."""
    r = str(root)
    exports = " ".join(f"{k}={_q(v)}" for k, v in (env or {}).items())
    dirs = [d for d in READDIR_TMPFS.get(root.name.split("-")[0], ()) if (root / d).is_dir()]
    tmpfs = "".join(f" && mkdir -p {r}/mnt/cb-readdir/{d} && cp -a {r}/{d}/. {r}/mnt/cb-readdir/{d}/"
                    f" && mount --bind {r}/mnt/cb-readdir/{d} {r}/{d}" for d in dirs)
    inner = (f"mount -t proc proc {r}/proc && mount --rbind /dev {r}/dev && mount --rbind /sys {r}/sys"
             + (f" && mount -t tmpfs tmpfs {r}/mnt" + tmpfs if dirs else "")
             + f" && mount --bind {_q(str(REPO))} {r}/src"
             f" && exec chroot {r} /usr/bin/env -i HOME=/root PATH={VENV}/bin:/usr/sbin:/usr/bin:/sbin:/bin"
             f" LANG=C.UTF-8 TERM=dumb {exports} /bin/sh -c {_q(script)}")
    # --kill-child: when unshare dies (a timeout, an interrupt) the namespace's first process, and so all of it, dies too
    return ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "sh", "-c", inner]


def _q(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def run(arch: str, script: str, timeout: float = 600, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess:
    """Run shell `script` inside the image of `arch` (cwd /root); returns the completed process (text)."""
    argv = ["nice", "-n", "10", *_chroot_argv(image_dir(arch), "cd /root && " + script, env)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "defer-natively":  # mmdebstrap's essential hook (outside the chroot)
        defer_natively(Path(sys.argv[2]))
        sys.exit(0)
    if len(sys.argv) != 3 or sys.argv[1] != "build" or sys.argv[2] not in ARCHES:
        sys.exit(f"usage: {sys.argv[0]} build {{{','.join(ARCHES)}}}")
    why = machine_forbids(sys.argv[2])
    if why:
        restore_binfmt()
        sys.exit(f"emukit: cannot build {sys.argv[2]}: {why}")
    t = time.monotonic()
    try:
        path = build(sys.argv[2])
    finally:
        restore_binfmt()
    print(f"{path} ready ({time.monotonic() - t:.0f} s this call): {json.dumps(stamp(sys.argv[2])['seconds'])}")
