#!/usr/bin/env bash
# clusterbench bootstrap: install what is missing, then do one thing.
#
#   ./bootstrap.sh characterise   # probe this machine and run the quick node profile (< 1 min on 2 cores)
#   ./bootstrap.sh test           # run the test suite
#   ./bootstrap.sh test-emulated  # the emulated tier: Arm, POWER and a two-socket guest under QEMU
#   ./bootstrap.sh speed          # also install likwid and hpcc, then run speed/speed_node.py
#   ./bootstrap.sh install        # only install
#
# As root on Debian/Ubuntu it installs the system packages it needs with apt-get. Without root it
# checks for them and says what to install (or which modules to load); see README "Without root".
set -euo pipefail
cd "$(dirname "$0")"
ACTION="${1:-characterise}"
shift || true

APT_PKGS=(build-essential hwloc numactl libnuma-dev libopenblas-dev libblis-dev python3-venv
          openmpi-bin libopenmpi-dev iproute2 iputils-ping ethtool hpcc libfftw3-dev libfftw3-mpi-dev
          postgresql)
# postgresql: the server the tests start in a temporary directory of their own (tests/pgkit.py) for the shared
# store's tests; clusterbench itself only needs a server somewhere (--db postgresql://...) and psycopg (below)
# the test suite also runs MPICH beside Open MPI and a real one-node Slurm (tests/integration/test_mpich.py,
# tests/integration/test_slurm.py); slurm-wlm pulls slurmctld, slurmd, slurm-client and the PMIx/PMI-2 plugins;
# the HTML report is checked in headless Chromium (tests/integration/test_report.py); the virtual cluster of
# machines runs an sshd per node and reaches it with ssh (tests/integration/test_machines.py); prometheus
# brings promtool, which checks `results export --format openmetrics` (tests/integration/test_export_bundle.py)
# qemu-system-x86 and debootstrap: the x86-64 guests of the last tier (the two-socket node, the soft-RoCE pair);
# qemu-user-static, binfmt-support, mmdebstrap, arch-test and qemu-system-arm: its arm64 part (the Pi 4: a
# Debian arm64 image under QEMU user mode, then a Cortex-A72 guest under full-system emulation)
[ "$ACTION" = test ] && APT_PKGS+=(mpich libmpich-dev slurm-wlm munge chromium fonts-dejavu-core openssh-server openssh-client
                                  prometheus qemu-system-x86 debootstrap qemu-user-static binfmt-support mmdebstrap
                                  arch-test qemu-system-arm)
# the whole emulated tier (./bootstrap.sh test-emulated; `test` runs its x86-64 guests and arm64 only: each
# architecture's cold image and its tests add about 20 minutes): Debian root filesystems of arm64, armhf and
# ppc64el under QEMU user mode through binfmt_misc (tests/emukit.py), a two-socket x86-64 guest and Arm and
# POWER guests under QEMU full-system emulation (tests/guestkit.py)
[ "$ACTION" = test-emulated ] && APT_PKGS+=(mpich libmpich-dev openssh-server openssh-client
    qemu-user-static binfmt-support debootstrap mmdebstrap arch-test qemu-system-x86 qemu-system-arm qemu-system-ppc)
[ "$ACTION" = speed ] && APT_PKGS+=(likwid netpipe-openmpi)
VENV="${CLUSTERBENCH_VENV:-.venv}"
# CLUSTERBENCH_WITHOUT=postgresql: install without the shared store's PostgreSQL parts (the server package
# and psycopg; the results store stays SQLite), where they cannot be had or are not wanted: psycopg has no
# binary wheels for armhf or ppc64el (the emulated tier's images, tests/emukit.py). Nothing else is optional.
extras="[postgresql]"  # psycopg 3, for a shared store on PostgreSQL (docs/results.md)
case "${CLUSTERBENCH_WITHOUT:-}" in
  "") ;;
  postgresql)
    keep=(); for p in "${APT_PKGS[@]}"; do [ "$p" = postgresql ] || keep+=("$p"); done; APT_PKGS=("${keep[@]}")
    extras="" ;;
  *) echo "bootstrap: CLUSTERBENCH_WITHOUT='${CLUSTERBENCH_WITHOUT}' is not something it can leave out; use CLUSTERBENCH_WITHOUT=postgresql or unset it" >&2
     exit 2 ;;
esac

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # MPICH registers itself as an alternative for mpirun/mpicc; Open MPI stays the default MPI
    if [ -x /usr/bin/mpirun.openmpi ] && [ -x /usr/bin/mpicc.openmpi ]; then
      update-alternatives --set mpirun /usr/bin/mpirun.openmpi >/dev/null
      update-alternatives --set mpi /usr/bin/mpicc.openmpi >/dev/null
    fi
  else
    echo "bootstrap: missing system packages: ${missing[*]}" >&2
    echo "bootstrap: ask an administrator to install them, or load equivalent modules (compiler, hwloc, numactl, OpenBLAS); continuing" >&2
  fi
fi

PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
if [ "$ACTION" = test ] || [ "$ACTION" = test-emulated ] || [ "$ACTION" = speed ]; then
  extras="[test${extras:+,postgresql}]"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".$extras"
# An editable install leaves the sources uncompiled, and where PYTHONDONTWRITEBYTECODE is set (as on
# some CI images) every command would compile the package again (~0.3 s of cpu a command): compile once.
"$VENV/bin/python" -m compileall -q -j 0 src >/dev/null 2>&1 || true

case "$ACTION" in
  install) ;;
  characterise)
    "$VENV/bin/clusterbench" probe
    "$VENV/bin/clusterbench" run node --quick "$@"
    ;;
  test)
    # Python's compiled files (__pycache__, git-ignored) are written even where the environment says not
    # to: without them every `python -m clusterbench` a test starts compiles the package again, and
    # collecting the suite takes 8 s instead of 1.
    unset PYTHONDONTWRITEBYTECODE
    if [ $# -gt 0 ]; then  # a developer's own selection: one pytest, as given
      exec "$VENV/bin/python" -m pytest -q "$@"
    fi
    # Four tiers, each its own pytest, in this order; every tier runs and the first failure's status
    # is the exit status. unit: pure, both cpus (pytest-xdist: a test module or an xdist_group at a
    # time, the heavy ones first), seconds. integration: real processes, in two passes whose failures both count:
    # one at a time (the figures and time bounds they check need the cpus), then the tests marked
    # `parallel` (nothing timing-sensitive, a time bound only with room to spare, only its own processes
    # looked for, nothing machine-wide changed: bad input, faults, hangs, the store, validation) on 2 workers. slow: the emulated machines (a virtual
    # cluster of separate machines with their own root and sshd, Slurm across them, run cluster,
    # sweeps of 8 and more nodes), bounded to 45 minutes. emulated: the full-system x86-64 guests of the emulated
    # tier (seed 002's two-socket node, seed 003's soft-RoCE pair; their image is debootstrap's, native: about 4
    # minutes cold) and its arm64 part (seed 000's Pi 4: the user-mode image, about 10 minutes cold, its flow,
    # then the Cortex-A72 guest), bounded to 50 minutes. The whole emulated tier, armhf and ppc64el too, is its
    # own action (test-emulated).
    rc=0
    tier() { local name=$1; shift; echo "bootstrap: test tier $name" >&2; "$@" || { r=$?; [ $rc -ne 0 ] || rc=$r; }; }
    tier unit "$VENV/bin/python" -m pytest -q -m "not integration" -n 2 --dist loadgroup tests/unit
    # --durations: the slowest tests are named in every CI log, where the suite's time goes is there to read
    tier integration "$VENV/bin/python" -m pytest -q -m "integration and not slow and not parallel" --durations=15
    tier integration-parallel "$VENV/bin/python" -m pytest -q -m "integration and not slow and parallel" -n 2 \
      --durations=10
    tier slow timeout --signal=INT --kill-after=60 2700 "$VENV/bin/python" -m pytest -q -m "slow" --durations=10
    tier emulated env CLUSTERBENCH_EMU_ARCHES=arm64 CLUSTERBENCH_EMU_GUEST_ARCHES=arm64 \
      timeout --signal=INT --kill-after=60 3000 "$VENV/bin/python" -m pytest -q -m emulated \
      tests/emulated/test_numa_guest.py tests/emulated/test_rxe_pair.py tests/emulated/test_arches.py \
      tests/emulated/test_arch_guests.py --durations=10
    exit $rc
    ;;
  test-emulated)
    # the emulated tier: foreign architectures under QEMU user mode and a two-socket guest under QEMU
    # full-system emulation (tests/emulated/, docs/emulation.md), images cached in /var/cache/clusterbench/emu;
    # says in one line what it skipped and why. `test` runs its x86-64 guests and arm64 only (docs/emulation.md,
    # "Timings"). Bounded to 100 minutes: cold, it builds every architecture's image first (the parts timed
    # apart in docs/emulation.md add to well over an hour).
    exec timeout --signal=INT --kill-after=60 6000 "$VENV/bin/python" -m pytest -q -m emulated tests/emulated "$@"
    ;;
  speed)
    exec "$VENV/bin/python" speed/speed_node.py "$@"
    ;;
  *)
    echo "bootstrap: unknown action '$ACTION'; use characterise, test, test-emulated, speed or install" >&2
    exit 2
    ;;
esac
