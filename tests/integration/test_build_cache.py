"""Kernel build cache defects (issue 14 defect 11): nothing partial is ever used, a compiler that
writes nothing is named, CC is split as make does, and a failure always says why. Real compilers."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench.errors import EnvironmentProblem
from clusterbench.kernels import build

pytestmark = pytest.mark.integration


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    return tmp_path / "kernels"


def test_cc_true_is_refused_and_caches_nothing(cache, monkeypatch):
    monkeypatch.setenv("CC", "/bin/true")
    with pytest.raises(EnvironmentProblem, match="the compiler produced no program"):
        build.build_kernel("stream")
    assert not [p for p in cache.rglob("*") if p.is_file()]


def test_cc_with_a_launcher_word_is_split(cache, monkeypatch, tmp_path):
    # "env gcc" stands for "ccache gcc": a wrapper word before the compiler, split as make does
    monkeypatch.setenv("CC", "env gcc")
    b = build.build_kernel("stream")
    assert build.is_program(b.path) and b.info["compiler"].endswith(" gcc")
    if shutil.which("ccache"):
        monkeypatch.setenv("CC", "ccache gcc")
        assert build.is_program(build.build_kernel("stream").path)


def test_silent_failure_says_exit_status(cache, monkeypatch):
    monkeypatch.setenv("CC", "/bin/false")
    with pytest.raises(EnvironmentProblem) as exc:
        build.build_kernel("stream")
    assert "exited with status 1" in str(exc.value) and "compile: ;" not in str(exc.value)


def test_empty_cached_binary_is_rebuilt(cache):
    b = build.build_kernel("stream")
    b.path.write_bytes(b"")  # what an interrupted build of an older version left
    again = build.build_kernel("stream")
    assert again.path == b.path and build.is_program(again.path)


def test_kill_9_during_compile_leaves_no_binary(cache, tmp_path):
    # a compiler killed mid-build: it has written part of its output (-o) when kill -9 arrives
    slow = tmp_path / "slowcc"
    slow.write_text('#!/bin/sh\nout=""; prev=""\nfor a; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
                    'if [ -n "$out" ] && [ -z "$SLOWCC_FAST" ]; then printf partial > "$out"; sleep 60; fi\n'
                    'exec gcc "$@"\n')
    slow.chmod(0o755)
    code = "from clusterbench.kernels import build; build.build_kernel('stream')"
    env = {**os.environ, "CC": str(slow)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    started = lambda: [p for p in cache.glob("stream-*/.stream.*") if p.stat().st_size]  # noqa: E731
    while time.monotonic() < deadline and not started():
        time.sleep(0.1)
    assert started(), "the build never started"
    build_dir = started()[0].parent
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not list(cache.glob("stream-*/stream")), "a killed build left something under the binary's name"
    # same CC, same cache key: the next run compiles afresh and never uses the partial file
    os.environ.update(CC=str(slow), SLOWCC_FAST="1")
    try:
        b = build.build_kernel("stream")
    finally:
        del os.environ["CC"], os.environ["SLOWCC_FAST"]
    assert b.path.parent == build_dir and build.is_program(b.path)


def test_every_shared_header_is_part_of_the_key(cache, monkeypatch, tmp_path):
    # the kernels' shared headers (options table, pinning, info record, vector layer) are compiled
    # into every kernel: a node whose headers differ must not reuse another build
    inc = tmp_path / "include"
    shutil.copytree(build.INCLUDE_DIR, inc)
    monkeypatch.setattr(build, "INCLUDE_DIR", inc)
    names = {p.name for p in inc.glob("*.h")}
    assert {"cb_common.h", "cb_mpi.h", "cb_simd.h"} <= names
    before = build.plan_kernel("stream").info["cache_key"]
    for name in sorted(names):
        header = inc / name
        text = header.read_text()
        header.write_text(text + "\n/* changed */\n")
        assert build.plan_kernel("stream").info["cache_key"] != before, name
        header.write_text(text)
    assert build.plan_kernel("stream").info["cache_key"] == before
