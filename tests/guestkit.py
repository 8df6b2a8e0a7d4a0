"""A full-system Debian 12 guest under QEMU (TCG), for the emulated tier (issue 27).

The guest is the two-socket node of seed 002 by default: ``-smp 4`` as 2 sockets x 2 cores and 2 GiB
split into two NUMA nodes (one per socket), booted on Debian's own kernel and initramfs (the
``linux-image-amd64`` package's) from a root filesystem built by debootstrap with the packages
bootstrap.sh installs, plus sshd. The image is built once, cached outside the tree
(``$CLUSTERBENCH_EMU_CACHE``, default /var/cache/clusterbench/emu/guest-amd64-<hash>/, the hash of what
goes into it), under a lock, and then reused: every boot writes to a throw-away overlay
(``snapshot=on``), so the cached image never changes.

The repository is shared read-only into the guest over 9p (mount tag ``cbrepo``, at /mnt/repo); the guest
is reached by ssh over QEMU's user networking (hostfwd from a free loopback port to the guest's 22). The
guest's PID 1 is a small shell script (no systemd: it boots in seconds under TCG), which loads the
modules it needs, mounts the share, starts sshd and waits.

:func:`guest` is a context manager: the qemu process is killed on leaving it, however it is left, when its
own lifetime (``life_s``) runs out, and when the process that started it dies (PR_SET_PDEATHSIG), so a
failing or killed test leaves no qemu behind. KVM is never used (it hangs the guest kernel on the machine
this was written on); the figures a TCG guest gives mean nothing, the mechanics do.

:func:`missing` says in one line what this machine lacks (qemu, debootstrap, root, the registry), for a
test to skip with.

The other guests (``arch="arm64"``, ``"armhf"``, ``"armhf-a7"``, ``"armhf-a9"``, ``"ppc64el"``: :data:`ARCHES`)
boot the same way on QEMU's own machine for each (``virt``, ``pseries``; ``vexpress-a9`` for the Cortex-A9,
which ``virt`` refuses) with the emulated CPU set to the seed's core where QEMU has it, so the guest's
/proc/cpuinfo and /sys are that CPU's (under user mode they are the host's). Their
image is the user-mode tier's (tests/emukit.py: Debian with bootstrap.sh's packages and clusterbench
installed the README's way, editable from /src, venv /opt/cbvenv) plus Debian's kernel for the machine,
kmod, initramfs-tools and sshd, installed in it under user-mode emulation; the repository share is bound at
/src, so the guest runs the checkout's code.
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import emukit

REPO = Path(__file__).resolve().parents[1]
MIRROR = os.environ.get("CLUSTERBENCH_EMU_MIRROR", "http://deb.debian.org/debian")
SUITE = "bookworm"
#: bump when the recipe below changes what the image holds (it is part of the cache key)
RECIPE = 5
#: what the guest needs beyond bootstrap.sh's packages: its kernel, sshd, and the tools the tests read;
#: soft-RoCE's user space (rdma-core, the verbs providers with rxe's, UCX's tools, perftest, qperf)
GUEST_PKGS = ("linux-image-amd64", "initramfs-tools", "kmod", "udev", "openssh-server", "openssh-client",
              "procps", "util-linux", "ca-certificates", "python3", "python3-pip", "hwloc", "numactl",
              "iproute2", "less", "rdma-core", "ibverbs-providers", "ibverbs-utils", "rdmacm-utils",
              "perftest", "libucx0", "ucx-utils", "qperf")
#: the MAC of the guest's first NIC (QEMU's user network, ssh from the host); other NICs are left down
USER_MAC = "52:54:00:12:34:56"
QEMU = "qemu-system-x86_64"


@dataclass(frozen=True)
class Arch:
    """How QEMU runs one architecture's guest, and which of the seeds' machines it stands for."""
    name: str  # Debian's architecture
    qemu: str
    machine: str
    cpu: str
    console: str  # the kernel's console device on that machine
    kernel_pkg: str
    stands_for: str
    debian: str = ""  # the Debian architecture (its user-mode image) where the guest's name is not one
    #: how the machine attaches virtio devices: "pci" (virt, pseries) or "mmio" (vexpress: no PCI; QEMU adds
    #: its virtio-mmio transports to the board's device tree)
    bus: str = "pci"
    dtb: str = ""  # the device tree the kernel package ships for the board (vexpress has none built in)
    numa: bool = True  # vexpress has no NUMA description (-numa is refused)
    image: str = ""  # boots another guest's image (the same kernel and packages) where set

    @property
    def deb(self) -> str:
        return self.debian or self.name


ARCHES = {
    "amd64": Arch("amd64", QEMU, "pc", "max", "ttyS0", "linux-image-amd64", "seed 002's two-socket node"),
    "arm64": Arch("arm64", "qemu-system-aarch64", "virt", "cortex-a72", "ttyAMA0", "linux-image-arm64",
                  "seed 000's Raspberry Pi 4 (Cortex-A72)"),
    "armhf": Arch("armhf", "qemu-system-arm", "virt,highmem=off", "cortex-a15", "ttyAMA0", "linux-image-armmp-lpae",
                  "seed 003's ODROID-XU (Exynos 5410: Cortex-A15, 32-bit)"),
    # QEMU's virt refuses the Cortex-A9 ("mach-virt: CPU type cortex-a9-arm-cpu not supported": virt's device
    # tree gives the generic timer, which the A9 lacks); the A9's own board, the Versatile Express, with Debian's
    # non-LPAE kernel (the A9 has no LPAE) and the board's device tree; 1 GiB is the board's most
    "armhf-a9": Arch("armhf-a9", "qemu-system-arm", "vexpress-a9", "cortex-a9", "ttyAMA0", "linux-image-armmp",
                     "seed 003's ODROID-U2 (Exynos 4412: Cortex-A9, 32-bit)", debian="armhf", bus="mmio",
                     dtb="vexpress-v2p-ca9.dtb", numa=False),
    # the ODROID-XU's other four cores (big.LITTLE: QEMU emulates no such pairing, so the A7s on their own),
    # on the A15 guest's machine and image
    "armhf-a7": Arch("armhf-a7", "qemu-system-arm", "virt,highmem=off", "cortex-a7", "ttyAMA0",
                     "linux-image-armmp-lpae", "seed 003's ODROID-XU's little cores (Exynos 5410: Cortex-A7, 32-bit)",
                     debian="armhf", image="armhf"),
    # JULI's PowerPC 970MP is big-endian and 64-bit only as ppc64; Debian's ppc64el needs POWER8 or later, and
    # QEMU's pseries emulates POWER8, 9 and 10: POWER9 is the nearest it boots Debian 12 on
    "ppc64el": Arch("ppc64el", "qemu-system-ppc64", "pseries", "power9", "hvc0", "linux-image-powerpc64le",
                    "seed 001's JULI (PowerPC 970MP) as the nearest QEMU runs Debian ppc64el on: POWER9"),
}
#: bump when the foreign images' recipe changes (part of their cache key, with the user-mode image's name)
FOREIGN_RECIPE = 1
#: what a foreign guest adds to the user-mode tier's image (plus ARCHES[arch].kernel_pkg)
FOREIGN_PKGS = ("initramfs-tools", "kmod", "openssh-server", "util-linux", "mount", "iproute2", "procps")
#: the initramfs holds these and their dependencies only (MODULES=list: every module's emulated modinfo
#: under MODULES=most took minutes); the rest load from the root filesystem
INITRAMFS_MODULES = ("virtio_pci", "virtio_mmio", "virtio_blk", "ext4")


def cache_root() -> Path:
    return Path(os.environ.get("CLUSTERBENCH_EMU_CACHE", "/var/cache/clusterbench/emu"))


def bootstrap_packages(repo: Path = REPO) -> list[str]:
    """bootstrap.sh's base package list (APT_PKGS=(...)), read from the script itself."""
    text = (repo / "bootstrap.sh").read_text()
    m = re.search(r"^APT_PKGS=\(([^)]*)\)", text, re.M)
    if not m:
        raise RuntimeError("bootstrap.sh: no APT_PKGS=(...) list")
    return m.group(1).split()


def image_key(repo: Path = REPO) -> str:
    """The cache key: the recipe, the packages and clusterbench's Python dependencies."""
    pyproject = (repo / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies = (.*)$", pyproject, re.M)
    blob = json.dumps([RECIPE, SUITE, MIRROR, sorted(bootstrap_packages(repo)), sorted(GUEST_PKGS),
                       deps.group(1) if deps else ""])
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def missing(arch: str = "amd64") -> str | None:
    """One line saying what this machine lacks for a full-system guest of ``arch``, or None."""
    cached = (image_dir(arch=arch) / "ready").exists()
    qemu = ARCHES[arch].qemu
    for tool in (qemu, "ssh", *(() if cached else ("debootstrap", "mke2fs", "ssh-keygen"))):
        if not shutil.which(tool):
            return (f"no {tool} on PATH (./bootstrap.sh test installs qemu-system-x86, -arm, debootstrap and "
                    "openssh-client; test-emulated qemu-system-ppc too)")
    if arch != "amd64" and not cached:
        # the user-mode image it starts from, and emulated dpkg to add to it
        why = emukit.machine_forbids(ARCHES[arch].deb)
        if why:
            return f"the {arch} guest's image is not cached and cannot be built: {why}"
        return None
    if os.geteuid() != 0 and not (image_dir() / "ready").exists():
        return "building the guest image needs root (debootstrap, chroot) and it is not cached"
    if not (image_dir() / "ready").exists():
        host = re.sub(r"^\w+://", "", MIRROR).split("/")[0]
        try:
            socket.create_connection((host, 80), timeout=10).close()
        except OSError as e:
            return f"Debian's package registry {host} is unreachable ({e}) and the guest image is not cached"
    return None


def image_dir(repo: Path = REPO, arch: str = "amd64") -> Path:
    if arch in ARCHES and ARCHES[arch].image:
        return image_dir(repo, ARCHES[arch].image)
    if arch == "amd64":
        return cache_root() / f"guest-amd64-{image_key(repo)}"
    return cache_root() / f"guest-{arch}-{foreign_key(arch)}"


def foreign_key(arch: str) -> str:
    """A foreign guest's cache key: its recipe, packages, init, and the user-mode image it starts from."""
    a = ARCHES[arch]
    blob = json.dumps([FOREIGN_RECIPE, emukit.image_dir(a.deb).name, a.kernel_pkg, sorted(FOREIGN_PKGS),
                       INITRAMFS_MODULES, foreign_init(arch), *([a.dtb] if a.dtb else [])])
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass
class Image:
    dir: Path
    kernel: Path
    initrd: Path
    disk: Path
    key: Path
    info: dict = field(default_factory=dict)
    arch: str = "amd64"
    dtb: Path | None = None


def _run(cmd: list[str], log, timeout: float, **kw) -> None:
    log.write(f"$ {shlex.join(cmd)}\n")
    log.flush()
    subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, check=True, **kw)


INIT = r"""#!/bin/sh
# PID 1 of clusterbench's test guest (tests/guestkit.py): mounts, modules, network, the repo share, sshd.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mountpoint -q /proc || mount -t proc proc /proc; mountpoint -q /sys || mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp; mount -o remount,rw /
hostname cbguest
for m in virtio_net 9p 9pnet_virtio; do modprobe $m; done
mkdir -p /mnt/repo && mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 cbrepo /mnt/repo
# the user-network NIC (its MAC is USER_MAC), named eth0 or what udev renamed it to (ens3, enp0s3);
# any other NIC (a guest-to-guest link) is set up by whoever booted the guest, over ssh
nic=$(grep -l '^52:54:00:12:34:56$' /sys/class/net/*/address | head -n 1 | cut -d/ -f5)
[ -n "$nic" ] || nic=$(ls /sys/class/net | grep -v '^lo$' | head -n 1)
ip link set lo up; ip link set "$nic" up; ip addr add 10.0.2.15/24 dev "$nic"; ip route add default via 10.0.2.2
echo nameserver 10.0.2.3 > /etc/resolv.conf
mkdir -p /run/sshd; /usr/sbin/sshd -e
echo "cb-guest: up $(cut -d' ' -f1 /proc/uptime) s" > /dev/ttyS0
while true; do wait; sleep 3600; done
"""


def build_image(repo: Path = REPO, log_path: Path | None = None, timeout_s: float = 3600,
                arch: str = "amd64") -> Image:
    """The cached image, built first if it is not there (under a lock: one builder, the others wait)."""
    d = image_dir(repo, arch)
    d.parent.mkdir(parents=True, exist_ok=True)
    with open(d.parent / f"{d.name}.lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        if not (d / "ready").exists():
            if arch == "amd64":
                _build(d, repo, log_path or d.parent / f"{d.name}.log", timeout_s)
            else:
                _build_foreign(d, ARCHES[arch].image or arch, log_path or d.parent / f"{d.name}.log", timeout_s)
    dtb = ARCHES[arch].dtb if arch in ARCHES else ""
    return Image(d, d / "vmlinuz", d / "initrd.img", d / "root.ext4", d / "id_ed25519",
                 json.loads((d / "info.json").read_text()), arch, d / dtb if dtb else None)


def _build(d: Path, repo: Path, log_path: Path, timeout_s: float) -> None:
    t0 = time.monotonic()
    work = d.with_name(d.name + ".building")
    with open("/proc/mounts") as f:  # never delete through a bind mount of /dev or /sys left by a failed build
        left = [line.split()[1] for line in f if line.split()[1].startswith(str(work) + "/")]
    for m in sorted(left, reverse=True):
        subprocess.run(["umount", "-l", m], check=False)
    root = work / "rootfs"
    packages_done = work / "packages.done"  # a build that failed after its packages resumes from there
    if not packages_done.exists():
        shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(d, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    pkgs = sorted(set(bootstrap_packages(repo)) | set(GUEST_PKGS))
    with open(log_path, "a") as log:
        if not packages_done.exists():
            # debootstrap a minimal system, then apt-get the packages in it (debootstrap's own resolver
            # cannot install a list such as libopenmpi-dev's: alternatives and virtual packages)
            _run(["debootstrap", "--variant=minbase", "--include=ca-certificates", SUITE, str(root), MIRROR],
                 log, timeout_s)
        t_debootstrap = time.monotonic() - t0
        (root / "usr/sbin/policy-rc.d").write_text("#!/bin/sh\nexit 101\n")  # start no service in the chroot
        (root / "usr/sbin/policy-rc.d").chmod(0o755)
        shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
        emukit.trust_host_ca(root)  # for pip in the chroot and in the guest
        mounts = []
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
               "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C.UTF-8", "CLUSTERBENCH_VENV": ".venv"}
        try:
            for src, dst, extra in (("proc", "proc", ["-t", "proc"]), ("/dev", "dev", ["--bind"]),
                                    ("/sys", "sys", ["--bind"])):
                _run(["mount", *extra, src, str(root / dst)], log, 60)
                mounts.append(root / dst)
            if not packages_done.exists():
                _run(["chroot", str(root), "sh", "-c", "apt-get update -qq && apt-get install -y -q "
                      "--no-install-recommends " + " ".join(pkgs)], log, timeout_s, env=env)
                packages_done.write_text("")
            t_packages = time.monotonic() - t0
            # clusterbench's Python dependencies, installed the README's way once here (native, fast) so
            # the guest's ./bootstrap.sh install finds them: the repo copied in, bootstrap.sh install run
            shutil.rmtree(root / "root/clusterbench", ignore_errors=True)
            _copy_repo(repo, root / "root/clusterbench")
            _run(["chroot", str(root), "sh", "-c", "cd /root/clusterbench && ./bootstrap.sh install"],
                 log, timeout_s, env=env)
            t_install = time.monotonic() - t0
            _run(["chroot", str(root), "ssh-keygen", "-A"], log, 60, env=env)
        finally:
            for m in reversed(mounts):
                subprocess.run(["umount", "-l", str(m)], check=False)
        (root / "usr/sbin/policy-rc.d").unlink()
        ssh = _guest_access(root, work, INIT, log)
        # the same key in the guest, so one guest reaches another (mpirun from A starts B's daemon by ssh)
        shutil.copy(work / "id_ed25519", ssh / "id_ed25519")
        (ssh / "id_ed25519").chmod(0o600)
        (ssh / "config").write_text("Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
                                    "  LogLevel ERROR\n  BatchMode yes\n")
        boot = root / "boot"
        kernels = sorted(boot.glob("vmlinuz-*"))
        if not kernels:
            raise RuntimeError(f"no kernel in {boot}")
        version = kernels[-1].name.removeprefix("vmlinuz-")
        if not (boot / f"initrd.img-{version}").exists():
            _run(["chroot", str(root), "update-initramfs", "-c", "-k", version], log, 600)
        shutil.copy(kernels[-1], work / "vmlinuz")
        shutil.copy(boot / f"initrd.img-{version}", work / "initrd.img")
        # room for the kernels' builds, the store, a second copy of the repo
        packed = _pack(root, work, 2048, log)
        _finish(work, {"kernel": version, "packages": pkgs, "debootstrap_s": round(t_debootstrap, 1),
                       "packages_done_s": round(t_packages, 1), "install_done_s": round(t_install, 1), **packed}, t0)
    work.rename(d)


def _guest_access(root: Path, work: Path, init: str, log) -> Path:
    """The guest's own init, its names, and a test key (kept in ``work``) it accepts for root; the ssh folder."""
    (root / "sbin/cb-guest-init").write_text(init)
    (root / "sbin/cb-guest-init").chmod(0o755)
    (root / "etc/hostname").write_text("cbguest\n")
    (root / "etc/hosts").write_text("127.0.0.1 localhost\n127.0.1.1 cbguest\n")
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / "id_ed25519")], log, 60)
    ssh = root / "root/.ssh"
    ssh.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.copy(work / "id_ed25519.pub", ssh / "authorized_keys")
    return ssh


def _pack(root: Path, work: Path, room_mb: int, log) -> dict:
    """``root`` without apt's caches into ``work``/root.ext4 with ``room_mb`` free; the root folder removed."""
    subprocess.run(["rm", "-rf", str(root / "var/cache/apt/archives"), str(root / "var/lib/apt/lists")],
                   check=False)
    used = int(subprocess.run(["du", "-sb", str(root)], capture_output=True, text=True,
                              check=True).stdout.split()[0])
    size_mb = used // 2**20 + room_mb
    t_pack = time.monotonic()
    _run(["mke2fs", "-q", "-t", "ext4", "-L", "cbroot", "-d", str(root), str(work / "root.ext4"),
          f"{size_mb}M"], log, 1200)
    shutil.rmtree(root)
    return {"mke2fs_s": round(time.monotonic() - t_pack, 1), "used_mb": used // 2**20, "disk_mb": size_mb}


def _finish(work: Path, info: dict, t0: float) -> None:
    """The image's info.json (its steps' times) and its ready stamp."""
    info = {**info, "build_s": round(time.monotonic() - t0, 1)}
    (work / "info.json").write_text(json.dumps(info, indent=1) + "\n")
    (work / "ready").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))


def foreign_init(arch: str) -> str:
    """A foreign guest's PID 1: the amd64 guest's, its messages on the machine's console, and the
    repository share bound over /src, where the user-mode image's editable install looks for the package."""
    return (INIT.replace("/dev/ttyS0", "/dev/console")
            .replace("\n# the user-network NIC", "\nmount --bind /mnt/repo /src\n# the user-network NIC"))


def _build_foreign(d: Path, arch: str, log_path: Path, timeout_s: float) -> None:
    """The user-mode tier's image of ``arch`` (built first if needed), copied, with Debian's kernel for the
    machine, an initramfs, sshd and the guest's init added under user-mode emulation, packed as ext4."""
    t0 = time.monotonic()
    a = ARCHES[arch]
    base = emukit.build(a.deb, timeout_s)
    t_base = time.monotonic() - t0
    work = d.with_name(d.name + ".building")
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(d, ignore_errors=True)
    work.mkdir(parents=True)
    root = work / "rootfs"
    with open(log_path, "a") as log:
        _run(["cp", "-a", str(base), str(root)], log, 1200)
        t_copy = time.monotonic() - t0
        conf = root / "etc/initramfs-tools"
        (conf / "conf.d").mkdir(parents=True, exist_ok=True)
        (conf / "conf.d/cb-guest").write_text("MODULES=list\nCOMPRESS=gzip\n")
        (conf / "modules").write_text("\n".join(INITRAMFS_MODULES) + "\n")
        shutil.copyfile("/etc/resolv.conf", root / "etc/resolv.conf")
        (root / "usr/sbin/policy-rc.d").write_text("#!/bin/sh\nexit 101\n")  # start no service in the chroot
        (root / "usr/sbin/policy-rc.d").chmod(0o755)
        pkgs = " ".join([a.kernel_pkg, *FOREIGN_PKGS])
        # emukit's chroot: a private mount namespace with /proc, /dev, /sys; foreign binaries by binfmt
        _run(["nice", "-n", "10", *emukit._chroot_argv(root, "apt-get update -qq && apt-get install -y -q "
                                                       "--no-install-recommends -o Dpkg::Options::=--force-confold "
                                                       + pkgs, {"DEBIAN_FRONTEND": "noninteractive"})],
             log, timeout_s)
        t_packages = time.monotonic() - t0
        (root / "usr/sbin/policy-rc.d").unlink()
        _run(["ssh-keygen", "-A", "-f", str(root)], log, 60)  # the host's ssh-keygen, the guest's host keys
        _guest_access(root, work, foreign_init(arch), log)
        boot = root / "boot"
        kernels = sorted([*boot.glob("vmlinuz-*"), *boot.glob("vmlinux-*")])  # POWER's is an uncompressed vmlinux
        version = kernels[-1].name.split("-", 1)[1] if kernels else ""
        if not kernels or not (boot / f"initrd.img-{version}").exists():
            raise RuntimeError(f"no kernel and initramfs in {boot}: {sorted(p.name for p in boot.iterdir())}")
        shutil.copy(kernels[-1], work / "vmlinuz")
        shutil.copy(boot / f"initrd.img-{version}", work / "initrd.img")
        if a.dtb:  # Debian's kernel packages ship the boards' device trees beside the modules
            dtbs = sorted(root.glob(f"usr/lib/linux-image-{version}/**/{a.dtb}"))
            if not dtbs:
                raise RuntimeError(f"no {a.dtb} in {root}/usr/lib/linux-image-{version}")
            shutil.copy(dtbs[0], work / a.dtb)
        packed = _pack(root, work, 1024, log)  # room for the kernels' builds and the store
        _finish(work, {"arch": arch, "kernel": version, "base": base.name, "packages": pkgs.split(),
                       "base_s": round(t_base, 1), "copy_done_s": round(t_copy, 1),
                       "packages_done_s": round(t_packages, 1), **packed}, t0)
    work.rename(d)


def _copy_repo(repo: Path, dest: Path) -> None:
    """The working tree without .venv, .git and caches."""
    ignore = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", ".pytest_cache", "build")
    shutil.copytree(repo, dest, ignore=ignore, symlinks=True)


# -- boot ---------------------------------------------------------------------------------------------
@dataclass
class Topology:
    """What QEMU is told: sockets x cores, one NUMA node per socket, memory split evenly."""
    sockets: int = 2
    cores: int = 2
    mem_mb: int = 2048

    def args(self, numa: bool = True) -> list[str]:
        cpus = self.sockets * self.cores
        out = ["-smp", f"{cpus},sockets={self.sockets},cores={self.cores},threads=1", "-m", f"{self.mem_mb}M"]
        if not numa:
            if self.sockets > 1:
                raise ValueError(f"{self.sockets} sockets asked of a machine without NUMA")
            return out
        per = self.mem_mb // self.sockets
        for s in range(self.sockets):
            first = s * self.cores
            out += ["-object", f"memory-backend-ram,id=m{s},size={per}M",
                    "-numa", f"node,nodeid={s},cpus={first}-{first + self.cores - 1},memdev=m{s}"]
        return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the process that started qemu dies (PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    os.setsid()


class Guest:
    """A running guest: :meth:`run` a shell command in it over ssh."""

    def __init__(self, image: Image, port: int, proc: subprocess.Popen, console: Path):
        self.image, self.port, self.proc, self.console = image, port, proc, console
        self.boot_s: float | None = None
        self.stderr: Path = console.with_suffix(".stderr")
        self.t0 = time.monotonic()
        self.timer: threading.Timer | None = None

    def ssh_args(self) -> list[str]:
        return ["ssh", "-i", str(self.image.key), "-p", str(self.port), "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15", "root@127.0.0.1"]

    def run(self, cmd: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        """``cmd`` through the guest's /bin/sh (bash -lc), its output captured; fails with both streams."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"the guest is gone (qemu exit {self.proc.returncode}); console:\n{self.tail()}")
        r = subprocess.run([*self.ssh_args(), "bash -c " + shlex.quote(cmd)], capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"in the guest: {cmd}\nexit {r.returncode}\n--- stdout\n{r.stdout[-4000:]}"
                                 f"\n--- stderr\n{r.stderr[-4000:]}")
        return r

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.console.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no console log)"

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def qemu_command(image: Image, topo: Topology, port: int, console: Path, repo: Path,
                 extra: Sequence[str] = ()) -> list[str]:
    """qemu's command line; ``extra`` adds devices (e.g. a second NIC on a guest-to-guest link)."""
    a = ARCHES[image.arch]
    if a.bus == "pci":
        devices = ["-drive", f"file={image.disk},format=raw,if=virtio,snapshot=on",
                   "-device", f"virtio-net-pci,netdev=n0,mac={USER_MAC}",
                   "-virtfs", f"local,path={repo},mount_tag=cbrepo,security_model=none,readonly=on"]
    else:  # virtio-mmio: the same three devices by their -device names (QEMU fills the board's transports)
        devices = ["-drive", f"file={image.disk},format=raw,if=none,id=d0,snapshot=on",
                   "-device", "virtio-blk-device,drive=d0",
                   "-device", f"virtio-net-device,netdev=n0,mac={USER_MAC}",
                   "-fsdev", f"local,id=f0,path={repo},security_model=none,readonly=on",
                   "-device", "virtio-9p-device,fsdev=f0,mount_tag=cbrepo"]
    return ["nice", "-n", "10", a.qemu, "-machine", a.machine, "-accel", "tcg,thread=multi", "-cpu", a.cpu,
            *topo.args(a.numa), "-kernel", str(image.kernel), "-initrd", str(image.initrd),
            *(["-dtb", str(image.dtb)] if image.dtb else []),
            "-append", f"root=/dev/vda rw console={a.console} init=/sbin/cb-guest-init quiet loglevel=3",
            "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22", *devices,
            "-display", "none", "-monitor", "none", "-serial", f"file:{console}", "-no-reboot", *extra]


def start(image: Image, topo: Topology, repo: Path, workdir: Path, life_s: float,
          extra: Sequence[str] = ()) -> Guest:
    """Start qemu (not waiting for the guest): killed with its process group by :meth:`Guest.kill`, by
    its own timer after ``life_s``, and by the kernel when this process dies."""
    port = free_port()
    console = workdir / f"cb-guest-{port}.console"
    stderr = workdir / f"cb-guest-{port}.stderr"
    # nice runs qemu in place (exec), so the pid is qemu's; its own session, killed with its group
    with open(stderr, "w") as err:
        proc = subprocess.Popen(qemu_command(image, topo, port, console, repo, extra), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err, preexec_fn=_die_with_parent)
    g = Guest(image, port, proc, console)
    g.stderr, g.t0 = stderr, time.monotonic()
    g.timer = threading.Timer(life_s, g.kill)  # the guest's own lifetime, whatever the test does
    g.timer.daemon = True
    g.timer.start()
    return g


def wait_ssh(g: Guest, boot_timeout_s: float) -> None:
    """Until the guest's sshd answers (TimeoutError with the console's tail after ``boot_timeout_s``)."""
    deadline = g.t0 + boot_timeout_s
    while True:
        if g.proc.poll() is not None:
            raise RuntimeError(f"qemu exited {g.proc.returncode} while booting: "
                               f"{g.stderr.read_text()[-2000:]}\n{g.tail()}")
        r = subprocess.run([*g.ssh_args(), "true"], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        if r.returncode == 0:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the guest's sshd did not answer within {boot_timeout_s:.0f} s; console:\n"
                               f"{g.tail()}")
        time.sleep(2)
    g.boot_s = round(time.monotonic() - g.t0, 1)
    # what systemd would have mounted (probe and doctor read the cgroup's cpus and mems)
    g.run("mountpoint -q /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup", timeout=60)


def stop(g: Guest, keep_logs: bool) -> None:
    """Kill the guest; its console and qemu's stderr stay only for the reader of a failure."""
    if g.timer is not None:
        g.timer.cancel()
    g.kill()
    if not keep_logs:
        for f in (g.console, g.stderr):
            f.unlink(missing_ok=True)


def boot_timeout(boot_timeout_s: float | None = None) -> float:
    # TCG shares the host's cores: 15 s on an idle 2-core machine, 60-90 s at load 4, over 5 min at load 23
    return boot_timeout_s or float(os.environ.get("CLUSTERBENCH_EMU_BOOT_S", "900"))


@contextlib.contextmanager
def guest(topo: Topology | None = None, repo: Path = REPO, life_s: float = 1800,
          boot_timeout_s: float | None = None, workdir: Path | None = None, arch: str = "amd64") -> Iterator[Guest]:
    """Boot the guest (building its image first if needed), wait for its sshd, yield it; always kill it."""
    image = build_image(repo, arch=arch)
    workdir = Path(workdir or os.environ.get("TMPDIR", "/tmp"))
    g = start(image, topo or Topology(), repo, workdir, life_s)
    keep = True
    try:
        wait_ssh(g, boot_timeout(boot_timeout_s))
        yield g
        keep = False
    finally:
        stop(g, keep)


def install_clusterbench(g: Guest, timeout: float = 600) -> float:
    """clusterbench in the guest: the image holds the README's install (./bootstrap.sh install, run in
    the chroot when the image was built: packages present, .venv with the package editable); here the
    shared tree is copied over /root/clusterbench, which the editable install then runs. (Running
    bootstrap.sh install again in the guest is the same steps but takes minutes of pip under TCG: its
    `pip install --upgrade pip` alone took 4 min.) Returns its seconds."""
    t0 = time.monotonic()
    g.run("cd /mnt/repo && tar --exclude=./.venv --exclude=./.git --exclude=__pycache__ --exclude='*.egg-info' "
          "-cf - . | tar -C /root/clusterbench -xf - && cd /root/clusterbench && .venv/bin/clusterbench --help "
          ">/dev/null", timeout=timeout)
    return round(time.monotonic() - t0, 1)
