"""A node's staged kernel found again by its stamp, without Python (kernels/stage.py): the shell check
answers exactly what Python's ``ensure`` answers while nothing the build's key depends on changed, and
hands over to Python (exit 3, nothing printed) as soon as anything did: the binary, the compiler, the
environment a build reads. Real compiler, real ``sh`` and ``stat``, this machine as the node."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from clusterbench.kernels import build, stage

pytestmark = [pytest.mark.integration, pytest.mark.parallel]  # nothing timing-sensitive, no time bound: the integration tier's parallel pass


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A kernel cache of its own and a compiler of its own (a script running gcc) whose file the test
    may touch."""
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    cc = tmp_path / "bin" / "cc"
    cc.parent.mkdir()
    cc.write_text('#!/bin/sh\nexec gcc "$@"\n')
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.delenv("CFLAGS", raising=False)
    return cc


REQUEST = {"name": "intcpu", "libs": [], "extra_flags": [], "openmp": False, "cc": None}


def _fast(**env: str) -> tuple[int, str]:
    p = subprocess.run(["sh", "-c", stage.fast_ensure_script(), "cb-stage", stage.launch_name(REQUEST)],
                       capture_output=True, text=True, timeout=30, env={**os.environ, **env})
    return p.returncode, p.stdout


def test_the_stamp_answers_as_ensure_does_until_anything_changes(node):
    built = stage.stage(REQUEST)
    assert build.is_program(built["binary"])
    answer = stage.ensure(REQUEST)
    rc, out = _fast()
    assert rc == 0, out
    assert json.loads(out) == [{**answer, "stamped": True}]
    files = Path(f"{Path(answer['launch']).parent}/{answer['host']}/{stage.launch_name(REQUEST)}.files")
    listed = files.read_text().split()
    assert str(node) in listed and answer["binary"] in listed
    assert any(f.endswith("/intcpu.c") for f in listed) and any(f.endswith("/cb_common.h") for f in listed)

    # the environment a build reads
    assert _fast(CFLAGS="-O0") == (3, "")
    assert _fast(PATH=f"/nonexistent:{os.environ['PATH']}") == (3, "")
    assert _fast(SSH_CONNECTION="10.0.0.1 5 10.0.0.2 22")[0] == 0  # what does not matter does not count

    # the compiler replaced (an upgrade, an alternatives switch): Python looks again, then stamps anew
    time.sleep(0.01)
    node.write_text('#!/bin/sh\n# upgraded\nexec gcc "$@"\n')
    assert _fast() == (3, "")
    again = stage.ensure(REQUEST)
    assert again["built"] and _fast()[0] == 0

    # the binary gone: no answer from the stamp, and Python's ensure says it is not built
    os.unlink(again["binary"])
    assert _fast() == (3, "")
    assert stage.ensure(REQUEST)["built"] is False
    rebuilt = stage.stage(REQUEST)
    assert build.is_program(rebuilt["binary"]) and _fast()[0] == 0


def test_no_stamp_where_the_shell_could_not_check_it(tmp_path, monkeypatch, node):
    # a cache folder with a blank in its path: the shell's word list would split it, so no stamp,
    # and every launch asks Python (which answers as before)
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "my cache"))
    doc = stage.stage(REQUEST)
    assert build.is_program(doc["binary"])
    assert _fast() == (3, "")
    assert stage.ensure(REQUEST)["built"] is True
    assert not list((tmp_path / "my cache").rglob("*.answer"))
