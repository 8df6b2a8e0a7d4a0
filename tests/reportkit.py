"""Helpers shared by tests/unit/test_report.py (pure tests) and tests/integration/test_report.py
(tests that start processes)."""
from __future__ import annotations

import time
from pathlib import Path

from clusterbench.benchmarks.declare import Result
from clusterbench.errors import UsageError
from clusterbench.records import Run
from clusterbench.report.plots import Source


# -- hand-made data -----------------------------------------------------------------------------------
def res(bench: str, metric: str, value: float, unit: str, hib: bool = True, limit: dict | None = None,
        **params) -> Result:
    return Result(benchmark=bench, metric=metric, value=value, unit=unit, higher_is_better=hib,
                  params=params, samples=[value], summary={"n": 1}, limit=limit,
                  limits=[limit] if limit else [], warnings=[])


PROBE = {
    "hostname": "node1",
    "cpu": {"model_name": "Test CPU", "microarchitecture": "Zen 4", "arch": "x86_64"},
    "rpeak": {"node": {"dp_gflops_nominal": 80.0}, "per_core": {"dp_gflops_nominal": 40.0}},
    "topology": {"packages": 1, "numa_nodes": 2, "cores": 2, "pus": 2, "caches": [
        {"level": 1, "type": "data", "name": "L1d", "size_bytes": 32768, "cpus": [0]},
        {"level": 1, "type": "data", "name": "L1d", "size_bytes": 32768, "cpus": [1]},
        {"level": 1, "type": "instruction", "name": "L1i", "size_bytes": 32768, "cpus": [0]},
        {"level": 2, "type": "unified", "name": "L2", "size_bytes": 1 << 20, "cpus": [0]},
        {"level": 3, "type": "unified", "name": "L3", "size_bytes": 32 << 20, "cpus": [0, 1]}]},
    "memory": {"total_bytes": 16 << 30},
    "environment": {"kernel": "6.1.0", "preemption": "voluntary", "governor": "performance", "turbo": True,
                    "smt_active": False, "thp": "madvise", "numa_balancing": False,
                    "nics": [{"name": "eth0", "mtu": 9000, "speed_mbps": 10000, "driver": "mlx5", "operstate": "up"}],
                    "mpi": [{"name": "Open MPI", "version": "4.1.4"}], "blas": [{"name": "openblas", "path": "/x"}],
                    "compilers": [{"name": "gcc", "version": "12.2.0"}]},
}


def run(rid: str = "r1" + "0" * 30, command: str = "clusterbench run node --quick", probe: dict | None = None,
        host: str = "node1") -> Run:
    return Run.from_json({"id": rid, "started": "2026-01-01T00:00:00", "status": "complete", "host": host, "command": command,
            "argv": command.split(), "probe": PROBE if probe is None else probe, "builds": {}, "warnings": [],
            "cluster": {}, "clusterbench_version": "0.2.0"})


def node_results() -> list[Result]:
    bw_lim = {"name": "best_bandwidth", "description": "best memory bandwidth measured here", "value": 40000.0,
              "fraction": 0.9}
    out = [res("stream", m, v * t, "MB/s", limit=bw_lim, threads=t, variant="regular")
           for m, v in (("copy", 15000), ("triad", 16000)) for t in (1, 2)]
    out += [res("memlat", "latency", lat, "ns", False, size_bytes=size, pattern="random")
            for size, lat in ((4096, 1.0), (65536, 4.0), (1 << 22, 15.0), (1 << 28, 100.0))]
    out += [res("fpu", "latency_cycles", 4.0, "cycles", False, op="fma", precision="double", vector="scalar"),
            res("fpu", "throughput_cycles", 0.5, "cycles", False, op="fma", precision="double", vector="scalar")]
    rp = {"name": "rpeak", "description": "Rpeak, 2 cores", "value": 80.0, "fraction": 0.95}
    out += [res("peak", "gflops", 76.0, "Gflop/s", limit=rp, threads=2),
            res("dgemm", "gflops", 70.0, "Gflop/s", mode="star", blas="openblas", n=1200, threads=2),
            res("dgemm", "gflops", 60.0, "Gflop/s", mode="single", blas="openblas", n=1000, k=64, threads=1)]
    return out


def mpi_results() -> list[Result]:
    out = []
    for size in (0, 1, 1024, 1 << 20):
        out.append(res("pingpong", "latency", 0.2 + size / 1e4, "us", False, size_bytes=size,
                       transport_used="shm", pair="intra-node"))
        out.append(res("pingpong", "bandwidth", size / (0.2 + size / 1e4), "MB/s", size_bytes=size,
                       transport_used="shm", pair="intra-node"))
        for k in (1, 2):
            out.append(res("multipair", "pair_bandwidth", 10.0 + size / 1e3 / k, "MB/s", size_bytes=size, pairs=k))
            out.append(res("multipair", "aggregate_bandwidth", 10.0 + size / 1e3, "MB/s", size_bytes=size, pairs=k))
    return out


def tune_results() -> list[Result]:
    return [res("hpl", "rmax", 40.0 + nb / 10 + (5 if topo == "pure" else 0), "Gflop/s", n=4000, nb=nb,
                grid="1x2" if topo == "pure" else "1x1", topology=topo, blas="openblas")
            for nb in (64, 128, 192) for topo in ("pure", "hybrid")]


def scaling_results() -> list[Result]:
    return [res("hpl-scaling", "rmax", 50.0 * k * 0.9 ** (k - 1), "Gflop/s", nodes=k, grid=f"1x{2 * k}",
                rmax_by_grid={f"1x{2 * k}": 50.0 * k * 0.9 ** (k - 1)}, rpeak_nodes_gflops=80.0 * k)
            for k in (1, 2, 3)]


def numa_results() -> list[Result]:
    return [res("stream", "triad_numa", 30000.0 if c == m else 18000.0, "MB/s", cpu_node=c, mem_node=m, threads=1)
            for c in (0, 1) for m in (0, 1)]


COMPARISON = {
    "schema": 1, "a": {"label": "baseline"}, "b": {"label": "jumbo"},
    "matches": [
        {"benchmark": "pingpong", "metric": "bandwidth", "params": {"size_bytes": 4194304},
         "comparison": {"ratio": 1.8, "ci_low": 1.6, "ci_high": 2.0, "verdict": "better", "change_pct": 80.0}},
        {"benchmark": "pingpong", "metric": "latency", "params": {"size_bytes": 8},
         "comparison": {"ratio": 1.01, "ci_low": 0.97, "ci_high": 1.05, "verdict": "no significant difference",
                        "change_pct": 1.0}},
        {"benchmark": "hpl", "metric": "rmax", "params": {"nb": 192},
         "comparison": {"ratio": 0.9, "ci_low": 0.85, "ci_high": 0.95, "verdict": "worse", "change_pct": -10.0}},
    ],
}


def every_kind_sources() -> list[Source]:
    return [Source("node", [run()], node_results() + numa_results()), Source("mpi", [run("r2" + "0" * 30)], mpi_results()),
            Source("tune", [run("r3" + "0" * 30)], tune_results()),
            Source("scaling", [run("r4" + "0" * 30)], scaling_results())]


class FakeStore:
    """The part of Store the report reads: get_run, results, list_runs."""

    def __init__(self, runs: list[Run], results: dict[str, list[Result]]):
        self.runs, self.res = runs, results

    def get_run(self, ref: str) -> Run:
        found = [r for r in self.runs if r.id.startswith(ref)]
        if len(found) != 1:
            raise UsageError(f"no run '{ref}' in fake", "see 'clusterbench results list'")
        return found[0]

    def results(self, ref: str) -> list[Result]:
        return self.res.get(self.get_run(ref).id, [])

    def list_runs(self) -> list[Run]:
        return [Run(id=r.id, command=r.command, status=r.status, started=r.started, host=r.host) for r in self.runs]


# -- issue 23: what --force replaces, temporary folders, signals ----------------------------------------
def _stream_store(path: Path, runs: int = 3, tag: str = "base") -> Path:
    """A real store of ``runs`` STREAM runs (as a session stores them) tagged ``tag``."""
    from clusterbench.benchmarks.base import Result
    from clusterbench.session import new_run_record
    from clusterbench.store import Store

    st = Store(path)
    for i in range(runs):
        rec = new_run_record(["clusterbench", "run", "stream"], {"hostname": "h"}, "default")
        rec["tags"] = [tag]
        rid = st.begin_run(rec)
        for t in (1, 2):
            st.add_result(rid, Result(benchmark="stream", metric="triad", value=1000.0 * t + i, unit="MB/s",
                                      higher_is_better=True, params={"threads": t, "variant": "regular"},
                                      samples=[1000.0 * t + i - 5, 1000.0 * t + i], summary={}))
        st.finish_run(rid, "complete")
        time.sleep(0.002)
    st.close()
    return path
