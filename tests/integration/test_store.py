"""The results store: schema, transactions, corrupted and unwritable files, dead runs."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from clusterbench.store import Store


@pytest.mark.integration
def test_unwritable_store(tmp_path):
    """A folder the store cannot be written in: one StoreError, and an existing store there still reads.
    As root (CI) file modes do not stop a write, so the folder is made read-only the way a user meets
    it on a cluster, a read-only mount (a bind mount in a mount namespace of its own)."""
    d = tmp_path / "ro"
    d.mkdir()
    Store(d / "old.db").close()
    code = ("import sys; from clusterbench.store import Store; from clusterbench.errors import StoreError\n"
            "try:\n    Store(sys.argv[1] + '/sub/r.db')\nexcept StoreError as e:\n    print('refused:', e)\n"
            "try:\n    Store(sys.argv[1] + '/new.db')\nexcept StoreError as e:\n    print('refused:', e)\n"
            "s = Store(sys.argv[1] + '/old.db', readonly=True); print('read', len(s.list_runs())); s.close()\n")
    if os.geteuid() == 0:
        import shutil

        if not shutil.which("unshare"):
            pytest.fail("unshare (util-linux) is needed to make a read-only mount as root")
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"', "sh", str(d),
               sys.executable, "-c", code, str(d)]
    else:
        d.chmod(0o500)
        cmd = [sys.executable, "-c", code, str(d)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("refused:") and lines[1].startswith("refused:"), p.stdout
    assert lines[2] == "read 0", p.stdout
    assert not (d / "new.db").exists() and not (d / "sub").exists()  # nothing half-written


@pytest.mark.integration
def test_dead_running_run_shows_incomplete(tmp_path):
    """A run whose process was killed (no chance to close it) reads back as incomplete."""
    p = tmp_path / "r.db"
    code = ("import sys; from clusterbench.store import Store; from clusterbench.session import new_run_record;"
            "s=Store(sys.argv[1]); print(s.begin_run(new_run_record(['x'], {}, 'quick')))")
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, check=True)
    rid = out.stdout.strip()
    run = Store(p).get_run(rid)
    assert run.status == "incomplete" and "died" in run.error


