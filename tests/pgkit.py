"""A real PostgreSQL server of the tests' own: initdb in a temporary directory as an unprivileged user
(``nobody`` when the tests run as root: PostgreSQL refuses root), listening on 127.0.0.1 on a free port
with its unix socket in that directory, stopped (``pg_ctl stop -m immediate``) and removed at the end,
even when a test fails. Skipped with one line when the server's binaries are absent.

Elsewhere on request (:func:`pg_server`'s ``listen``, ``run_in``, ``clients``, ``settings``): on the
virtual cluster's head address inside the head's network namespace, say, logging every connection, with
password logins allowed from the cluster's subnet.

Roles: ``cbadmin`` (superuser, password ``admin-secret``), ``cb`` (owns each test's database, password
``cb-secret``) and ``cbro`` (may only read, password ``ro-secret``). Password logins over TCP
(scram-sha-256), as a site's server would ask.
"""
from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

SKIP = "PostgreSQL's server (initdb, pg_ctl) is not installed: ./bootstrap.sh install installs Debian's postgresql"
PASSWORDS = {"cbadmin": "admin-secret", "cb": "cb-secret", "cbro": "ro-secret"}
_names = itertools.count()


def server_bin() -> Path | None:
    """The folder of initdb and pg_ctl (Debian keeps them off PATH, in /usr/lib/postgresql/N/bin)."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One server: :meth:`start`, :meth:`stop`, :meth:`url` of a user and database, :meth:`sql` as its superuser."""

    def __init__(self, bindir: Path, *, listen: str = "127.0.0.1", run_in: Sequence[str] = (),
                 clients: Sequence[str] = (), settings: dict[str, str] | None = None) -> None:
        """``listen``: the address it listens on; ``run_in``: an argv prefix its programs run under (the
        head's ``ip netns exec NS``); ``clients``: subnets allowed password logins besides loopback;
        ``settings``: more ``-c NAME=VALUE`` (``log_connections``...). The log: :meth:`log`."""
        self.bindir = bindir
        self.listen, self.run_in, self.settings = listen, list(run_in), dict(settings or {})
        self.dir = Path(tempfile.mkdtemp(prefix="cb-pgkit-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.user = None if os.geteuid() else "nobody"
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        (self.dir / "pw").write_text(PASSWORDS["cbadmin"] + "\n")
        self._as_owner(["initdb", "-D", str(self.data), "-U", "cbadmin", "--pwfile", str(self.dir / "pw"),
                        "-E", "UTF8", "--locale=C.UTF-8", "--auth-local=trust", "--auth-host=scram-sha-256"],
                       timeout=120)
        if clients:  # as initdb's own loopback lines: passwords (scram-sha-256) over TCP
            with open(self.data / "pg_hba.conf", "a") as f:
                f.writelines(f"host all all {net} scram-sha-256\n" for net in clients)

    def _as_owner(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / argv[0]), *argv[1:]]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        cmd = [*self.run_in, *cmd]
        p = subprocess.run(cmd, cwd=self.dir, capture_output=True, text=True, timeout=timeout)
        if p.returncode:
            raise RuntimeError(f"{argv[0]} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
        return p

    def start(self) -> None:
        opts = (f"-h {self.listen} -p {self.port} -k {self.dir} -c fsync=off -c max_connections=60"
                " -c shared_buffers=16MB" + "".join(f" -c {k}={shlex.quote(str(v))}" for k, v in self.settings.items()))
        self._as_owner(["pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-w", "-t", "90",
                        "-o", opts, "start"], timeout=120)

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server (``immediate``: as if killed; the next start recovers from its log)."""
        try:
            self._as_owner(["pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop"], timeout=90)
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        self._kill_left()

    def _kill_left(self) -> None:
        pidfile = self.data / "postmaster.pid"
        if pidfile.exists():
            with contextlib.suppress(OSError, ValueError, IndexError):
                os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)

    def log(self) -> str:
        """The server's log so far."""
        try:
            return (self.dir / "log").read_text(errors="replace")
        except OSError:
            return ""

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, user: str = "cb", db: str = "postgres", password: str | None = None) -> str:
        pw = PASSWORDS.get(user, "") if password is None else password
        return f"postgresql://{user}:{pw}@{self.listen}:{self.port}/{db}"

    def socket_url(self, user: str = "cb", db: str = "postgres") -> str:
        """A URL through the server's unix socket (no password: ``local`` logins are trusted), which this
        machine reaches wherever the server listens (in another network namespace, say)."""
        return f"postgresql://{user}@/{db}?host={self.dir}&port={self.port}"

    def sql(self, *statements: str, db: str = "postgres") -> list:
        """Run statements as the superuser (over the unix socket); the last one's rows."""
        import psycopg

        rows: list = []
        with psycopg.connect(host=str(self.dir), port=self.port, user="cbadmin", dbname=db, autocommit=True) as c:
            for stmt in statements:
                cur = c.execute(stmt)
                rows = cur.fetchall() if cur.description else []
        return rows

    def roles(self) -> None:
        self.sql(f"CREATE ROLE cb LOGIN PASSWORD '{PASSWORDS['cb']}'",
                 f"CREATE ROLE cbro LOGIN PASSWORD '{PASSWORDS['cbro']}'")

    def new_database(self) -> str:
        """A fresh database owned by ``cb`` (cbro may connect and, once tables exist, read): its name."""
        name = f"t{os.getpid()}_{next(_names)}"
        self.sql(f"CREATE DATABASE {name} OWNER cb", f"GRANT CONNECT ON DATABASE {name} TO cbro")
        self.sql("ALTER DEFAULT PRIVILEGES FOR ROLE cb IN SCHEMA public GRANT SELECT ON TABLES TO cbro", db=name)
        return name


@contextlib.contextmanager
def pg_server(**where: object) -> Iterator[PgServer]:
    """A started server with its roles, stopped and removed at the end (skips when none is installed);
    ``where``: :class:`PgServer`'s ``listen``, ``run_in``, ``clients`` and ``settings``."""
    bindir = server_bin()
    if bindir is None:
        pytest.skip(SKIP)
    pytest.importorskip("psycopg", reason="psycopg is not installed: ./bootstrap.sh install installs it")
    server = PgServer(bindir, **where)  # type: ignore[arg-type]
    try:
        server.start()
        server.roles()
        yield server
    finally:
        server.remove()


@pytest.fixture(scope="session")
def pg_shared() -> Iterator[PgServer]:
    """One server for the session's tests that do not stop it."""
    with pg_server() as server:
        yield server


@pytest.fixture
def pg_own() -> Iterator[PgServer]:
    """A server of this test's own (it may stop, restart or break it)."""
    with pg_server() as server:
        yield server


@pytest.fixture
def pg_url(pg_shared: PgServer) -> str:
    """The URL of a fresh, empty database on the shared server, as the user ``cb``."""
    return pg_shared.url("cb", pg_shared.new_database())


@pytest.fixture(params=["sqlite", "postgresql"])
def store_at(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a new store goes, on each back end in turn: a file path, or the URL of a fresh database."""
    if request.param == "sqlite":
        return str(tmp_path / "r.db")
    server = request.getfixturevalue("pg_shared")
    return server.url("cb", server.new_database())
