"""How kernels reach separate machines (launch/nodes.stage_requests), on a cluster of fake nodes: each
node answers ``ensure``/``build``/``put`` as the real ``clusterbench.kernels.stage`` does, from a key of
its own (its CPU, compiler, flags, libraries) and a cache. What is checked is the plan: a kernel is
compiled once per distinct key and copied to the other nodes with that key, a node whose key differs
compiles its own (never gets another key's binary), a node that has it already is only linked, and a
binary deleted from a node's cache is found at the next launch (the node says it is not built) and
put back before the launch."""
from __future__ import annotations

import pytest

from clusterbench.errors import EnvironmentProblem
from clusterbench.launch import nodes as N

REQ = {"name": "pingpong", "libs": [], "extra_flags": [], "openmp": False, "cc": "mpicc"}


class FakeNodes:
    def __init__(self, keys: dict[str, str]) -> None:
        self.keys = keys                                  # host -> its cache key
        self.cache: dict[str, bytes] = {}                 # host -> the binary it holds
        self.calls: list[tuple[str, str]] = []            # (host, mode)

    def doc(self, h: str) -> dict:
        return {"host": h, "launch": "/home/u/.cache/clusterbench/launch/pingpong-x", "binary": f"/c/{self.keys[h]}",
                "info": {"kernel": "pingpong", "cache_key": self.keys[h]}, "version": N.__version__}

    def call(self, h: str, mode: str, payload, timeout: float, data: bytes | None = None):
        self.calls.append((h, mode))
        if mode == "ensure":
            return [{**self.doc(h), "key": self.keys[h], "built": True} if h in self.cache else
                    {"key": self.keys[h], "built": False, "binary": f"/c/{self.keys[h]}", "version": N.__version__}
                    for _ in payload]
        if mode == "build":
            self.cache[h] = f"built on {h} for {self.keys[h]}".encode()
            return [self.doc(h) for _ in payload]
        if mode == "put":
            self.cache[h] = data
            return self.doc(h)
        raise AssertionError(mode)

    def fetch(self, h: str, path: str, timeout: float) -> bytes:
        self.calls.append((h, "fetch"))
        return self.cache[h]


@pytest.fixture
def fake(monkeypatch):
    def make(keys: dict[str, str]) -> FakeNodes:
        f = FakeNodes(keys)
        monkeypatch.setattr(N, "_call", f.call)
        monkeypatch.setattr(N, "_fetch", f.fetch)
        from clusterbench.kernels import stage as stage_mod

        def head_cannot_build(request):  # the head's own build is not one of these keys
            raise EnvironmentProblem("another MPI on the head", "-")

        monkeypatch.setattr(stage_mod, "plan", head_cannot_build)
        monkeypatch.setattr(N, "_STAGED", {})
        return f
    return make


def _modes(f: FakeNodes, mode: str) -> list[str]:
    return sorted(h for h, m in f.calls if m == mode)


def test_one_build_per_key_copied_to_its_group_and_a_different_node_builds_its_own(fake):
    f = fake({"n1": "armv8-gcc12", "n2": "armv8-gcc12", "n3": "armv8-gcc12", "n4": "armv7-gcc10"})
    out = N.stage_requests(["n1", "n2", "n3", "n4"], [REQ])
    assert set(out) == {"n1", "n2", "n3", "n4"}
    assert _modes(f, "build") == ["n1", "n4"]              # once for the three alike, once for the odd one
    assert _modes(f, "put") == ["n2", "n3"]                # copied within the group
    assert f.cache["n2"] == f.cache["n3"] == b"built on n1 for armv8-gcc12"
    assert f.cache["n4"] == b"built on n4 for armv7-gcc10"  # never another key's binary
    assert {out[h][0]["info"]["cache_key"] for h in ("n1", "n2", "n3")} == {"armv8-gcc12"}


def test_a_node_that_has_it_is_only_linked_and_a_deleted_binary_is_put_back_before_the_launch(fake):
    f = fake({"n1": "k", "n2": "k"})
    N.stage_requests(["n1", "n2"], [REQ])
    N.forget_staged()                                      # the next clusterbench process
    del f.cache["n2"]                                      # someone cleaned n2's kernel cache
    f.calls.clear()
    N.stage_requests(["n1", "n2"], [REQ])
    assert _modes(f, "ensure") == ["n1", "n2"] and _modes(f, "build") == []   # n1 linked what it had
    assert _modes(f, "put") == ["n2"] and f.cache["n2"] == b"built on n1 for k"
    f.calls.clear()
    N.stage_requests(["n1", "n2"], [REQ])                  # the same process again: nothing asked
    assert f.calls == []


def test_a_node_that_cannot_build_is_named_before_anything_starts(fake, monkeypatch):
    f = fake({"n1": "k1", "n2": "k2"})

    def call(h, mode, payload, timeout, data=None):
        if h == "n2" and mode == "build":
            raise EnvironmentProblem("building kernels on n2 failed: mpicc: not found", "install MPI on n2")
        return FakeNodes.call(f, h, mode, payload, timeout, data)

    monkeypatch.setattr(N, "_call", call)
    with pytest.raises(EnvironmentProblem) as exc:
        N.stage_requests(["n1", "n2"], [REQ])
    assert "n2" in exc.value.problem and "mpicc" in exc.value.problem
