"""The pure tests (they start no process) of what tests/integration/test_pingpong.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import os

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.mpi.pingpong import sweep_sizes
from clusterbench.errors import UsageError

from pingpongkit import _cpus


IS_ROOT = os.geteuid() == 0


def test_sweep_sizes() -> None:
    s = sweep_sizes(16 << 20, True)
    assert s[:6] == [0, 1, 2, 4, 5, 8] and 13 in s and 16 << 20 in s and (16 << 20) + 3 not in s
    assert sweep_sizes(16, False) == [0, 1, 2, 4, 8, 16]


def test_two_ranks_on_one_cpu_is_refused(ctx) -> None:
    cpu = _cpus(ctx)[0]
    with pytest.raises(UsageError, match="both ranks on cpu"):
        get_benchmark("pingpong").resolve(ctx, {"cpus": [cpu, cpu], "allow_root": True})
    with pytest.raises(UsageError, match="two cpus"):
        get_benchmark("pingpong").resolve(ctx, {"cpus": [cpu], "allow_root": True})


def test_bad_hosts_input(ctx, tmp_path) -> None:
    bench = get_benchmark("pingpong")
    with pytest.raises(UsageError, match="slots"):
        bench.resolve(ctx, {"hosts": "node1:1", "allow_root": True})  # 2 ranks, 1 slot
    hf = tmp_path / "hosts"
    hf.write_text("node1 slots=2\nnode2 slots=two\n")
    with pytest.raises(UsageError, match="line 2"):
        bench.resolve(ctx, {"hostfile": str(hf), "allow_root": True})
    with pytest.raises(UsageError, match="not one of"):
        bench.resolve(ctx, {"transport": "carrier-pigeon", "allow_root": True})


@pytest.mark.skipif(not IS_ROOT, reason="the allow-run-as-root rule applies to root only")
def test_root_without_allow_root(ctx, monkeypatch) -> None:
    monkeypatch.delenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", raising=False)
    from clusterbench import config

    with pytest.raises(UsageError, match="running as root needs your consent, pass allow_root=True"):
        get_benchmark("pingpong").resolve(ctx, {"sizes": [8]})  # from Python: no command line to retype
    monkeypatch.setattr(config, "_argv", ["run", "pingpong", "--sizes", "8"])
    with pytest.raises(UsageError) as err:
        get_benchmark("pingpong").resolve(ctx, {"sizes": [8]})
    assert str(err.value).startswith("running as root needs your consent, retype: clusterbench run pingpong "
                                     "--sizes 8 --allow-root; to make it permanent, export "
                                     "CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1")
    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")
    assert get_benchmark("pingpong").resolve(ctx, {"sizes": [8]})["allow_root"] is True


def test_inter_node_spec_places_ranks_on_two_hosts(ctx) -> None:
    bench = get_benchmark("pingpong")
    p = bench.resolve(ctx, {"hosts": "n1:2,n2:2", "allow_root": True})
    spec = bench.launch_spec(ctx, p)
    assert p["pair"] == "inter-node" and [pl.host for pl in spec.places] == ["n1", "n2"]
    assert spec.places[0].cpu != spec.places[1].cpu  # virtual-cluster nodes share this machine's cores


def test_unknown_transport_in_list(ctx) -> None:
    with pytest.raises(UsageError, match="--transports carrier-pigeon"):
        get_benchmark("pingpong").resolve(ctx, {"transports": ["tcp", "carrier-pigeon"], "allow_root": True})


def test_buffers_parameter_declared_once_for_every_mpi_message_benchmark(ctx) -> None:
    from clusterbench.benchmarks.mpi.common import BUFFER_CONVENTIONS, BUFFERS

    assert BUFFERS.default == "separate" and set(BUFFERS.choices) == set(BUFFER_CONVENTIONS) == {"separate", "shared"}
    for name in ("pingpong", "bw", "multipair", "ring", "placement"):
        assert {p.name: p for p in get_benchmark(name).params}["buffers"] is BUFFERS, name
    with pytest.raises(UsageError, match="buffers"):
        get_benchmark("pingpong").resolve(ctx, {"buffers": "same", "allow_root": True})
