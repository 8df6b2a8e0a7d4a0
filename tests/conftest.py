"""Shared fixtures: the live probe (real hwloc/sysfs) and a run context with a real SQLite store.

Two tiers, by folder. ``tests/unit/`` holds pure tests; ``tests/integration/`` holds the tests that
start real processes (compilers, kernels, Open MPI, MPICH, Slurm, network namespaces, hpcc, hwloc's
tools), and every test there is marked ``integration`` automatically; for a file left directly in
tests/ each test's own ``@pytest.mark.integration`` decides (put it in one of the two folders).
``pytest -m "not integration"`` runs the unit tier in seconds. In that tier a test that starts a
process fails, naming the marker it lacks, so the split cannot drift. A file of either folder may
have a namesake in the other (its pure half, its process half): both folders are packages. What
the two halves share lives in a kit module of tests/ (machinekit.py, slurmkit.py, reportkit.py, ...),
importable from both folders (pyproject's ``pythonpath``); a test module never imports another.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from clusterbench.benchmarks.base import RunContext

REPO = Path(__file__).resolve().parents[1]

# A stored run or figure read as a dict (clusterbench.dictreading, kept for users' old scripts) is an
# error in clusterbench's own code: pyproject's filterwarnings says so for this process, and this for
# every clusterbench a test starts (the CLI, a node's agent, a sweep's per-node run).
os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"),
                                                      "error:reading:DeprecationWarning"]))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: starts real processes (compilers, kernels, MPI, "
                                       "Slurm, namespaces, reference tools); deselect with -m 'not integration'")
    config.addinivalue_line("markers", "heavy(seconds): a unit test of about that many seconds of cpu, started "
                                       "first and longest first under --dist loadgroup (pytest_collection_modifyitems)")
    config.addinivalue_line("markers", "parallel: an integration test that measures nothing timing-sensitive, bounds "
                                       "time only with room for a busy machine (seconds to spare, not a figure), "
                                       "looks only for its own processes (tests/prockit.py) and changes nothing "
                                       "machine-wide (sysctls, links, daemons): ./bootstrap.sh test runs these on 2 "
                                       "pytest-xdist workers, the rest one at a time")
    config.addinivalue_line("markers", "slow: the emulated tier, run last by ./bootstrap.sh test: a virtual cluster of "
                                       "separate machines (own root, sshd, install), Slurm across them, run cluster, "
                                       "sweeps of 8 and more nodes; select with -m slow")
    _shared_home(config)
    if _xdist_controller(config):
        _compile_once()
        _rewrite_tests_once(config)
        return  # it runs no test: each worker builds the font cache below, before its first guard
    # matplotlib builds its font cache on first use by running fc-list; on a fresh machine that would
    # happen inside the first unit test that draws a plot, where processes are refused, and the plot
    # would be missing. Build it here, before any guard.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.font_manager  # noqa: F401


def _compile_once() -> None:
    """clusterbench's bytecode written before the pytest-xdist workers start: on a fresh clone each worker
    otherwise compiled every module it imports itself, both at once (about 3 s of cpu each on 2 cores),
    and the first to finish wrote the .pyc the other had no use for. Compiled here once, on 2 processes;
    on a tree already compiled it only compares times (milliseconds). Not when Python is told to write no
    bytecode (PYTHONDONTWRITEBYTECODE, -B)."""
    import sys

    if sys.dont_write_bytecode:
        return
    import compileall

    import clusterbench

    compileall.compile_dir(Path(clusterbench.__file__).parent, quiet=1, workers=2)
    compileall.compile_dir(Path(__file__).resolve().parent, maxlevels=0, quiet=1, workers=2)  # the kits


def _rewrite_tests_once(config: pytest.Config) -> None:
    """The test modules' asserts rewritten before the pytest-xdist workers start. pytest rewrites a test
    module's asserts when it imports it and keeps the result (a pyc in its __pycache__, checked against
    the source's hash); in a fresh clone both workers collect every module and rewrite all of them at once
    (about 3 s of cpu each on 2 cores, measured in speed/logs/suite-times.txt). Done here once on 2
    processes (this one and a fork), with pytest's own functions; they are private, so any change in them
    skips this step and the workers rewrite as before."""
    import sys

    if sys.dont_write_bytecode:
        return
    try:
        from _pytest.assertion import rewrite as rw

        rewrite_test, read_pyc, write_pyc = rw._rewrite_test, rw._read_pyc, rw._write_pyc_fp
        cache_dir, tail = rw.get_cache_dir, rw.PYC_TAIL
    except (ImportError, AttributeError):
        return
    files: list[Path] = []
    for arg in config.args or [str(TESTS)]:
        path = Path(arg.split("::", 1)[0]).resolve()
        files += [path] if path.is_file() else sorted(path.rglob("test_*.py")) if path.is_dir() else []
    todo = [f for f in files if f.name.startswith("test_")
            and read_pyc(f, cache_dir(f) / (f.name[:-3] + tail)) is None]

    def rewrite(chunk: list[Path]) -> None:
        for fn in chunk:
            try:
                source_hash, co = rewrite_test(fn, config)
                pyc = cache_dir(fn) / (fn.name[:-3] + tail)
                pyc.parent.mkdir(exist_ok=True)
                part = pyc.with_name(f"{pyc.name}.{os.getpid()}")
                with open(part, "wb") as out:
                    write_pyc(out, source_hash, co)
                os.replace(part, pyc)
            except Exception:  # noqa: BLE001 (a module that does not parse: its worker reports it)
                continue

    if len(todo) < 2:
        rewrite(todo)
        return
    pid = os.fork()
    if pid == 0:  # the child: the second half, then out without pytest's exit handlers
        try:
            rewrite(todo[1::2])
        finally:
            os._exit(0)
    rewrite(todo[::2])
    os.waitpid(pid, 0)


def _xdist_controller(config: pytest.Config) -> bool:
    """This process hands tests to pytest-xdist workers and runs none itself (``-n 2``)."""
    return (not hasattr(config, "workerinput") and config.getoption("dist", "no") != "no"
            and bool(config.getoption("tx", None)))


def _loadgroup(config: pytest.Config) -> bool:
    """The tests are handed out by pytest-xdist's ``--dist loadgroup`` (in a worker, xdist keeps that as
    ``option.loadgroup``); every worker orders its collection the same way, as xdist requires."""
    return bool(getattr(config.option, "loadgroup", False)) or config.getoption("dist", "no") == "loadgroup"


TESTS = Path(__file__).resolve().parent

@pytest.hookimpl(tryfirst=True)  # before -m and -k deselect by the markers set here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tier of a test is its folder's (see the module's docstring)."""
    errors: list[str] = []
    for item in items:
        folder = Path(str(item.path)).resolve().parent
        if folder == TESTS / "integration":
            item.add_marker(pytest.mark.integration)
        elif folder == TESTS / "unit":
            if item.get_closest_marker("integration"):
                errors.append(f"{item.nodeid} is marked integration in tests/unit/: move it to tests/integration/")
        # elsewhere (a file just added to tests/ by a branch made before the split): its own marks decide
    if errors:
        pytest.exit("\n".join(errors), returncode=pytest.ExitCode.USAGE_ERROR)
    if _loadgroup(config) and hasattr(config, "workerinput"):
        for item in items:
            _join_its_group(item)
    if _loadgroup(config):
        # the tests marked heavy first, longest first (the rest keep their order): --dist loadgroup hands
        # out one module (or one xdist_group) at a time as a worker frees up (pytest_xdist_make_scheduler),
        # in the order of their first test, so each worker starts on its share of the long ones and both
        # end on short ones together, instead of one worker finishing a long module alone at the end.
        # (Under --dist load the first quarter of the tests goes to one worker as a block: there this
        # order would put every long test on it, so it is left alone.)
        weight = {id(i): -float(m.args[0]) for i in items if (m := i.get_closest_marker("heavy"))}
        items.sort(key=lambda i: weight.get(id(i), 0.0))


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001 (xdist's Producer)
    """``--dist loadgroup`` with a test module as the unit of work where a test has no group: xdist's own
    loadgroup makes every other test its own unit and hands them out one by one, so each module's tests
    (and the modules they import: scipy, matplotlib, the store) land on both workers and both pay for
    them. A module or a group at a time keeps them on one worker and still balances (the heavy modules
    go first); measured in speed/logs/suite-times.txt. None (xdist's own scheduler) for any other mode."""
    if config.getoption("dist", "no") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleOrGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return nodeid.split("::", 1)[0] if scope == nodeid else "@" + scope

    return ModuleOrGroupScheduling(config, log)


def _xdist_group_of(item: pytest.Item) -> str | None:
    """The group name pytest-xdist's ``--dist loadgroup`` gives ``item`` (its ``xdist_group`` marks), or None."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    return "_".join(sorted(names)) if names else None


def _join_its_group(item: pytest.Item) -> None:
    """Put ``item`` in its xdist_group: pytest-xdist's scheduler reads the group from ``NODEID@GROUP``, and
    xdist 3.8 writes that suffix to ``item._nodeid``, which pytest 9 no longer reads (it keeps the id in
    ``item._id``): the groups were silently ignored, and every worker paid what a group is there to pay once
    (parsing the source, reading the speed logs). Written here where pytest keeps it; an id that already
    has the suffix (xdist's own, under older pytest: its rule, an '@' after any ']') is left alone."""
    group = _xdist_group_of(item)
    if group is None or item.nodeid.rfind("@") > item.nodeid.rfind("]") or not hasattr(item, "_id"):
        return
    item._id = type(item._id).parse(f"{item.nodeid}@{group}")


def _unit_tier(config: pytest.Config) -> bool:
    expr = (config.getoption("markexpr", "") or "").replace(" ", "")
    return expr == "notintegration"


_REAL_POPEN_INIT = subprocess.Popen.__init__
#: the other ways Python starts a process without subprocess.Popen (multiprocessing, pty, os.system)
_OS_STARTERS = {n: getattr(os, n) for n in ("fork", "forkpty", "system", "posix_spawn", "posix_spawnp",
                                           "execv", "execve") if hasattr(os, n)}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """In the unit tier, refuse processes from the start of a test's setup (so a module- or
    session-scoped fixture that spawns one is caught too) to the end of its teardown."""
    if _unit_tier(item.config) and not item.get_closest_marker("integration"):
        if "live_probe" in getattr(item, "fixturenames", ()):
            _probe_once()  # the machine is read once per session (hwloc's tools), before the guard
        # every ssh command line asks once which OpenSSH this is (`ssh -V`, cached): asked before the guard
        from clusterbench.launch import remote
        remote.kex_options()

        def refused(what: object) -> AssertionError:
            return AssertionError(f"{item.nodeid} starts a process ({what!r}) in the unit tier, in the test or "
                                  "one of its fixtures: mark it @pytest.mark.integration")

        def refuse(self: subprocess.Popen, args: object, *a: object, **k: object) -> None:
            raise refused(args)

        def refuse_os(name: str):
            def refuse(*a: object, **k: object) -> None:
                raise refused((f"os.{name}", *a))
            return refuse

        subprocess.Popen.__init__ = refuse  # type: ignore[method-assign]
        for name in _OS_STARTERS:
            setattr(os, name, refuse_os(name))
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item):
    yield
    subprocess.Popen.__init__ = _REAL_POPEN_INIT  # type: ignore[method-assign]
    for name, real in _OS_STARTERS.items():
        setattr(os, name, real)


_PROBE: list[dict] = []


def _probe_once() -> dict:
    if not _PROBE:
        from clusterbench.probe import probe

        _PROBE.append(probe())
    return _PROBE[0]


@pytest.fixture(scope="session")
def live_probe() -> dict:
    return _probe_once()


def _extract(tb: Path, dest: Path) -> None:
    """A sysfs snapshot's directories, files (with their modes) and relative symlinks that stay inside
    it, and nothing else (what tarfile's "data" filter allows, at a fraction of its cost: no realpath a
    member; the archive decompressed once into memory and each file's bytes sliced out of it)."""
    import bz2
    import io
    import tarfile

    raw = bz2.decompress(tb.read_bytes()) if tb.name.endswith(".bz2") else tb.read_bytes()
    made = {str(dest)}
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        for m in t:
            name = os.path.normpath(m.name)
            link = os.path.normpath(os.path.join(os.path.dirname(name), m.linkname)) if m.issym() else name
            if (os.path.isabs(name) or name.startswith("..") or os.path.isabs(m.linkname or "")
                    or link.startswith("..") or not (m.isdir() or m.isfile() or m.issym())):
                raise AssertionError(f"{tb.name}: {m.name!r} is not a plain file, folder or inner link")
            path = os.path.join(dest, name)
            if m.isdir():
                if path not in made:
                    os.makedirs(path, exist_ok=True)
                    made.add(path)
                continue
            parent = os.path.dirname(path)
            if parent not in made:
                os.makedirs(parent, exist_ok=True)
                made.add(parent)
            if m.issym():
                os.symlink(m.linkname, path)
                continue
            data = (t.extractfile(m).read() if m.issparse()  # type: ignore[union-attr]
                    else raw[m.offset_data: m.offset_data + m.size])
            with open(path, "wb") as fh:
                fh.write(data)
            if m.mode & 0o777 != 0o644:
                os.chmod(path, m.mode & 0o777)


#: the folder of this test run's shared read-only trees (:func:`shared_tree`: the sysfs snapshots, ...), shared by its pytest-xdist workers
#: (named by the first process, the controller, in pytest_configure; its workers inherit it)
_SHARED_ENV = "CLUSTERBENCH_TEST_SHARED_TREES"


def _shared_home(config: pytest.Config) -> None:
    """Name this run's folder of shared trees (made when a test first asks for one; in memory, /dev/shm,
    when there is one: the large snapshots are ~10 000 small files, twice as slow to write to a disk)."""
    import tempfile

    if hasattr(config, "workerinput") or os.environ.get(_SHARED_ENV):
        return  # a worker (its controller named it), or a pytest started by a test of this run
    shm = Path("/dev/shm")
    base = shm if os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    os.environ[_SHARED_ENV] = str(base / f"cb-test-trees-{os.getpid()}-{os.urandom(4).hex()}")
    config.stash[_SHARED_OWNED] = os.environ[_SHARED_ENV]


_SHARED_OWNED = pytest.StashKey[str]()


def pytest_unconfigure(config: pytest.Config) -> None:
    import shutil

    owned = config.stash.get(_SHARED_OWNED, None)
    if owned:
        shutil.rmtree(owned, ignore_errors=True)
        if os.environ.get(_SHARED_ENV) == owned:
            del os.environ[_SHARED_ENV]


@pytest.fixture(scope="session")
def shared_tree():
    """``get(name, build)``: a read-only folder of this test run, made once by ``build(folder)`` (the
    first pytest-xdist worker to need it makes it, the other reads the same copy; in memory when
    /dev/shm is there). Tests only read it. Removed when the run ends (pytest_unconfigure)."""
    import shutil
    import tempfile

    home = Path(os.environ[_SHARED_ENV])
    home.mkdir(parents=True, exist_ok=True)

    def get(name: str, build) -> Path:
        final = home / name
        if not final.is_dir():
            dest = Path(tempfile.mkdtemp(prefix=".part-", dir=home))
            build(dest)
            try:
                os.rename(dest, final)  # whole or not at all: the other worker may be making it too
            except OSError:
                if not final.is_dir():
                    raise
                shutil.rmtree(dest, ignore_errors=True)  # the other worker's copy came first
        return final

    return get


@pytest.fixture(scope="session")
def sysfs_snapshot(shared_tree):
    """``get(tarball)``: the top directory of a tests/data/sysfs snapshot, extracted once per test run
    (:func:`shared_tree`); tests only read it."""
    done: dict[Path, Path] = {}

    def get(tb: Path) -> Path:
        tb = Path(tb)
        if tb not in done:
            folder = shared_tree(tb.name[: -len(".tar.bz2")].replace("+", "_"), lambda dest: _extract(tb, dest))
            tops = [p for p in folder.iterdir() if p.is_dir()]
            assert len(tops) == 1, tops
            done[tb] = tops[0]
        return done[tb]

    return get


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own results store; the kernel cache is shared by the session (and by its
    pytest-xdist workers: a worker's base folder is ``popen-gwN`` inside the session's, and the cache
    takes concurrent builds of one kernel, each into a temporary name renamed into place)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = os.environ.get("CLUSTERBENCH_TEST_CACHE") or str(shared / "cache")
    monkeypatch.setenv("CLUSTERBENCH_CACHE", cache)
    monkeypatch.setenv("CLUSTERBENCH_DB", str(tmp_path_factory.mktemp("db") / "results.db"))


@pytest.fixture
def ctx(live_probe: dict) -> RunContext:
    return RunContext(probe=live_probe, profile="quick", timeout=300)


# -- MPI and the virtual cluster, shared by the MPI test files ---------------------------------
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
_SIM_PREFIX_RE = __import__("re").compile(r"^t(\d+)-")


@pytest.fixture(scope="session", autouse=True)
def _sim_prefix() -> str:
    """This test session's own sim-cluster prefix (``t<pid>-``), so two suites running side by
    side, or a user's ``cbsim-`` cluster, never see each other's namespaces. Leftovers of test
    sessions that were killed (their pid is gone) are removed first."""
    from clusterbench.launch import simcluster

    prefix = f"t{os.getpid() % 10_000_000}-"
    old = os.environ.get("CLUSTERBENCH_SIM_PREFIX")
    os.environ["CLUSTERBENCH_SIM_PREFIX"] = prefix
    if IS_ROOT and os.path.isdir("/run/netns"):
        dead = {m.group(0) for m in map(_SIM_PREFIX_RE.match, os.listdir("/run/netns"))
                if m and not os.path.exists(f"/proc/{m.group(1)}")}
        for p in dead:
            simcluster.down(prefix=p, state=Path(os.environ.get("TMPDIR", "/tmp")) / "cb-sweep")
    try:
        yield prefix
    finally:
        if old is None:
            os.environ.pop("CLUSTERBENCH_SIM_PREFIX", None)
        else:
            os.environ["CLUSTERBENCH_SIM_PREFIX"] = old


@pytest.fixture(scope="session")
def mpi():
    """Open MPI from the system, or a skip that says what to install."""
    import shutil

    from clusterbench.errors import EnvironmentProblem
    from clusterbench.launch import mpi as M

    if not shutil.which("mpirun"):
        pytest.skip("no mpirun on PATH: install openmpi-bin and libopenmpi-dev to run the MPI tests")
    try:
        found = M.detect_mpi()
    except EnvironmentProblem as exc:
        pytest.skip(f"MPI not usable: {exc}")
    if found.name != "openmpi":
        pytest.skip("these tests use Open MPI's MCA settings")
    return found


@contextlib.contextmanager
def _virtual_clusters(state: Path):
    """The factory behind ``sim_cluster`` and ``module_sim_cluster``: clusters of this session's prefix
    with their state in ``state``, taken down at the end (failing if anything of them is left)."""
    from clusterbench.errors import EnvironmentProblem
    from clusterbench.launch import simcluster

    if not IS_ROOT:
        pytest.skip("the virtual cluster needs root (ip netns)")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CLUSTERBENCH_SIM_STATE", str(state))
        simcluster.down()  # leftovers of an earlier test of this session

        def make(nodes: int = 2, **spec):
            try:
                return simcluster.up(nodes, **spec)
            except EnvironmentProblem as exc:
                pytest.skip(f"network namespaces unusable here: {exc}")

        try:
            yield make
        finally:
            simcluster.down()
            assert not simcluster.list_namespaces()


@pytest.fixture
def sim_cluster(tmp_path: Path):
    """A factory: ``sim_cluster(2, mtu=9000)`` brings up a virtual cluster with this session's
    prefix and a private state directory; it is always taken down afterwards, and the test fails
    if anything of it is left. Skips (with the reason) when not root or namespaces are unusable."""
    with _virtual_clusters(tmp_path / "sim") as make:
        yield make


@pytest.fixture(scope="module")
def module_sim_cluster(tmp_path_factory: pytest.TempPathFactory):
    """``sim_cluster`` for one module: a cluster brought up once and shared by the module's tests
    that leave it as they found it (bringing up 4 virtual nodes takes 3-7 s here), taken down after
    the module's last test. A test of the same module that uses ``sim_cluster`` takes it down first."""
    with _virtual_clusters(tmp_path_factory.mktemp("sim")) as make:
        yield make
