"""pdes: a Time Warp parallel discrete event simulation (kernels/apps/pdes.c, written afresh),
the latency-bound, irregular application Carver (2014) used to judge a cluster's network (with ROSS).

Models: ``phold`` (Fujimoto's synthetic benchmark, routed as ROSS routes it: every event schedules
one event, with probability ``--remote`` to an LP drawn uniformly from all LPs, else to itself, at
now + lookahead + Exp(mean); ROSS's ``--mean`` includes the lookahead, so our ``--mean M`` is
ROSS's ``--mean M+lookahead``) and ``qnet`` (a closed network of first-come-first-served servers:
about 300 B of state per LP, so state saving costs something). LPs are spread in contiguous
blocks over the ranks.

Engines (``--sync``): ``sequential`` (one rank, one heap), ``conservative`` (synchronous windows
of one lookahead above the global lowest timestamp), ``optimistic`` (Time Warp: copy state
saving, rollback on stragglers, aggressive cancellation with anti-messages, synchronous GVT by
message counting and a MIN allreduce every ``--gvt-interval`` scheduler iterations of up to
``--batch`` events, fossil collection below GVT, optimism bounded by ``--window`` above GVT).
The kernel's header says every rule.

Figures (one sample per repeat; the value is the median over ``--repeat`` runs, as Carver (2014)
reports): ``events_per_s`` = committed events / the simulation's wall time (the slowest rank's,
from a barrier to GVT >= end; ROSS's "event rate" uses the same numerator and denominator);
``runtime_s``; ``efficiency`` = committed / processed (WARPED2's; ROSS's 1 - rolled back /
committed is ``params.ross_efficiency``). Each figure carries every repeat's counts (rollbacks
primary and secondary, anti-messages, remote and off-node messages, GVT rounds and their time,
memory), the mean and median runtime with 99% intervals (t interval of the mean; order-statistic
interval of the median, from 8 repeats), and the digest of the committed history.

Correctness, before anything is stored: each run's own checks (processed = committed + rolled
back, nothing below --end left, the event population unchanged), the same digest and committed
count in every repeat and, for the parallel engines, the same as the sequential engine's for the
same model (``--verify``, on by default: one sequential run first, on the first rank's node).
"""
from __future__ import annotations

import math
import statistics
from typing import Any

from clusterbench.analysis.stats import mean_ci, median_ci
from clusterbench.benchmarks import register
from clusterbench.benchmarks.base import Metric, Param, RunContext, available_memory
from clusterbench.benchmarks.mpi.common import RANK_PARAMS, MpiBenchmark, place_ranks
from clusterbench.errors import KernelFailed, UsageError

SYNCS = ("sequential", "conservative", "optimistic")
MODELS = ("phold", "qnet")
#: bytes of one LP's state and of one event (as the kernel lays them out; for the memory check)
STATE_BYTES = {"phold": 32, "qnet": 304}
EVENT_BYTES = 96
#: a slow machine's committed events per second, for the run-time estimate
SLOW_RATE = 0.3e6
#: what the kernel's per-repeat record carries into params (lists over repeats)
COUNTS = ("committed", "processed", "rolled_back", "rollbacks_primary", "rollbacks_secondary", "anti_messages",
          "remote_events", "offnode_messages", "messages_sent", "gvt_rounds", "gvt_time_max_s", "gvt_time_mean_s",
          "gvt_round_max_s", "memory_blocked_rounds", "memory_bytes", "event_memory_peak_bytes_max")


def expected_events(p: dict[str, Any]) -> float:
    """About how many events a run commits: each of L x k chains advances by lookahead + mean
    per event (phold; qnet's waits make it fewer)."""
    return p["lps"] * p["start_events"] * p["end"] / (p["lookahead"] + p["mean"])


def runtime_stats(runtimes: list[float]) -> dict[str, Any]:
    """Mean and median runtime with 99% intervals (Carver (2014) reports both)."""
    ci_mean, ci_med = mean_ci(runtimes, 0.99), median_ci(runtimes, 0.99)
    return {"n": len(runtimes), "mean_s": statistics.fmean(runtimes), "median_s": statistics.median(runtimes),
            "ci99_mean_s": list(ci_mean) if ci_mean else None, "ci99_median_s": list(ci_med) if ci_med else None,
            "ci_method": "mean: Student t interval; median: distribution-free order-statistic interval "
                         "(needs 8 or more repeats at 99%)"}


def _runtime_note(rs: dict[str, Any]) -> str:
    """Carver (2014)'s two figures: the mean and the median runtime, each with its 99% interval."""
    def ci(v: list[float] | None, why: str) -> str:
        return f" [99% CI {v[0]:.4g}, {v[1]:.4g}]" if v else f" ({why})"
    return (f"pdes: runtime over {rs['n']} repeat(s): mean {rs['mean_s']:.4g} s"
            + ci(rs["ci99_mean_s"], "one repeat: no interval") + f", median {rs['median_s']:.4g} s"
            + ci(rs["ci99_median_s"], "the median's 99% interval needs 8 or more repeats"))


def _headline(results: list[dict]) -> list[str]:
    out = []
    for r in results:
        if r["benchmark"] != "pdes" or r["metric"] != "events_per_s":
            continue
        p = r["params"]
        rs = p.get("runtime") or {}
        ci = rs.get("ci99_mean_s")
        where = f"{p.get('ranks')} rank{'s' if p.get('ranks') != 1 else ''}"
        if p.get("nodes", 1) > 1:
            where += f" on {p['nodes']} nodes, {p.get('transport_used') or p.get('transport')}"
        out.append(f"pdes     {p.get('model')} {p.get('sync')} {where}: {r['value'] / 1e6:.3g} M committed "
                   f"events/s (median of {rs.get('n')}), efficiency {100 * (p.get('efficiency') or 0):.1f}%, "
                   f"runtime mean {rs.get('mean_s', 0):.3g} s"
                   + (f" [99% CI {ci[0]:.3g}, {ci[1]:.3g}]" if ci else "")
                   + f", median {rs.get('median_s', 0):.3g} s")
    return out


@register
class Pdes(MpiBenchmark):
    name = "pdes"
    help = "Time Warp parallel discrete event simulation (PHOLD, a queueing network): committed events/s"
    kernel = "pdes"
    suites: dict[str, int] = {}
    key_params = ("model", "sync", "lps", "remote", "lookahead", "mean", "start_events", "end", "ranks",
                  "ranks_per_node")
    metrics = (
        Metric("events_per_s", "events/s", True, "committed events / the simulation's wall time (the slowest "
               "rank's), per repeat; the value is the median over the repeats"),
        Metric("runtime_s", "s", False, "the simulation's wall time (barrier to GVT >= end, the slowest rank), per "
               "repeat; the value is the median"),
        Metric("efficiency", "fraction", True, "committed / processed events (1 = no event rolled back)"),
    )
    params = (
        Param("model", str, "phold", "phold (ROSS's PHOLD) or qnet (a queueing network with ~300 B of state per LP)",
              MODELS),
        Param("lps", int, 1024, "logical processes in all (spread over the ranks)", min=1, max=4_000_000_000),
        Param("remote", float, 0.25, "probability that an event goes to an LP drawn from all LPs (else to itself)",
              min=0, max=1),
        Param("lookahead", float, 1.0, "the least delay of an event (conservative needs > 0)", min=0, max=1e12),
        Param("mean", float, 1.0, "mean of the exponential delay added to the lookahead (qnet: the service time)",
              min=0, max=1e12, min_open=True),
        Param("start_events", int, 1, "events each LP starts with (the constant population per LP)", min=1,
              max=1_000_000),
        Param("end", float, 10000.0, "simulated time to run to (no event at or after it is processed)", min=0,
              max=1e15, min_open=True),
        Param("sync", str, "optimistic", "engine: sequential (one rank), conservative (lookahead windows), "
              "optimistic (Time Warp)", SYNCS),
        Param("batch", int, 32, "events a rank processes between network polls (optimistic)", min=1, max=1_000_000),
        Param("gvt_interval", int, 32, "scheduler iterations between GVT computations (optimistic)", min=1,
              max=1_000_000),
        Param("window", float, None, "optimism window: no event at or beyond GVT + WINDOW is processed "
              "(default: unbounded)", min=0, max=1e15, min_open=True),
        Param("event_memory", float, None, "MiB of events per rank (default: a quarter of the node's memory over "
              "its ranks, at most 1024)", min=0, max=1 << 24, min_open=True),
        Param("repeat", int, 3, "runs of the simulation (mean and median runtime with 99% intervals; 8 or more "
              "give the median's)", min=1, max=1000),
        Param("seed", int, 1, "random seed (the committed history depends on it alone)", min=0, max=2 ** 62),
        Param("verify", bool, True, "check the committed history against the sequential engine's (one sequential "
              "run first, on the first rank's node)"),
        *RANK_PARAMS,
        Param("drop_anti", int, None, "test hook: rank 0 does not send its N-th anti-message (the run must fail)",
              min=1),
        Param("hang_rank", int, None, "test hook: this rank stops answering --hang-after seconds into the run",
              min=0),
        Param("hang_after", float, 0.5, "test hook: seconds before --hang-rank hangs", min=0, max=3600),
    )
    profiles = {"quick": {"end": 1000.0, "repeat": 2}}
    headlines = (_headline,)

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        if p["sync"] == "sequential":
            if p.get("hosts") or p.get("hostfile") or (p.get("ranks") or 1) > 1:
                raise UsageError("--sync sequential runs one process on this node",
                                 "drop --ranks/--hosts, or use --sync optimistic or conservative")
            place_ranks(ctx, p, default_ranks=1)
        else:
            place_ranks(ctx, p)
        if p["end"] <= p["lookahead"]:  # every event, the first ones too, is at lookahead + Exp(mean) or later
            raise UsageError(f"--end {p['end']:g} is not past the lookahead {p['lookahead']:g}: no event can happen "
                             "before the end, so there would be no rate to measure",
                             f"give --end well above it, e.g. --end {max(1000.0, 100 * (p['lookahead'] + p['mean'])):g}")
        if p["sync"] == "conservative" and p["lookahead"] <= 0:
            raise UsageError("--sync conservative needs --lookahead above 0 (its windows are one lookahead wide)",
                             "give --lookahead 0.1 or more, or use --sync optimistic")
        n, per_node = p["ranks"], p["ranks_per_node"]
        if p["lps"] < n:
            raise UsageError(f"--lps {p['lps']} is fewer than the {n} ranks", f"use --lps {n} or more")
        if p["lps"] >= 2 ** 32:
            raise UsageError(f"--lps {p['lps']} is too many (LP numbers are 32-bit)", "use --lps 4000000000 or fewer")
        mem = available_memory(ctx.probe)
        state = STATE_BYTES[p["model"]]
        lps_node = math.ceil(p["lps"] / n) * per_node
        need = lps_node * (state + 48) + lps_node * p["start_events"] * (EVENT_BYTES + state)
        if mem and need > 0.8 * mem:
            fit = int(0.8 * mem / (state + 48 + p["start_events"] * (EVENT_BYTES + state)) * n / per_node)
            raise UsageError(f"--lps {p['lps']}: {p['model']}'s LPs and start events need {need / 2**30:.1f} GiB per "
                             f"node, above 80% of the {mem / 2**30:.1f} GiB available",
                             f"use --lps {max(n, fit)} or fewer (or fewer --start-events)")
        if p["event_memory"] is None:
            quarter = (mem / 4 / per_node / 2**20) if mem else 1024
            floor = 1.5 * math.ceil(p["lps"] / n) * p["start_events"] * (EVENT_BYTES + state) / 2**20 + 16
            p["event_memory"] = float(min(max(floor, min(1024.0, quarter)), max(floor, quarter)))
        elif mem and p["event_memory"] * 2**20 * per_node > 0.8 * mem:
            raise UsageError(f"--event-memory {p['event_memory']:g} MiB x {per_node} ranks per node is above 80% of "
                             f"the {mem / 2**30:.1f} GiB available",
                             f"use --event-memory {int(0.8 * mem / per_node / 2**20)} or less")
        if p.get("hang_rank") is not None and p["hang_rank"] >= n:
            raise UsageError(f"--hang-rank {p['hang_rank']}: there are {n} ranks", f"use 0 .. {n - 1}")
        p["verify_with_sequential"] = bool(p["verify"]) and p["sync"] != "sequential"
        ctx.fit_timeout("pdes", self.estimate_seconds(ctx, p), factor=3,
                        smaller="a smaller --end or --lps, or fewer --repeat")
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        one = expected_events(params) / SLOW_RATE
        return 3 + params["repeat"] * one + (one + 2 if params.get("verify_with_sequential") else 0)

    # -- running -----------------------------------------------------------------------------------
    def _args(self, p: dict[str, Any], sync: str, repeat: int) -> list[str]:
        args = [f"--model={p['model']}", f"--lps={p['lps']}", f"--remote={p['remote']!r}",
                f"--lookahead={p['lookahead']!r}", f"--mean={p['mean']!r}", f"--start-events={p['start_events']}",
                f"--end={p['end']!r}", f"--sync={sync}", f"--batch={p['batch']}",
                f"--gvt-interval={p['gvt_interval']}", f"--event-memory={p['event_memory']!r}",
                f"--repeat={repeat}", f"--seed={p['seed']}"]
        if p.get("window") is not None:
            args.append(f"--window={p['window']!r}")
        if sync != "sequential":
            if p.get("drop_anti") is not None:
                args.append(f"--drop-anti={p['drop_anti']}")
            if p.get("hang_rank") is not None:
                args += [f"--hang-rank={p['hang_rank']}", f"--hang-after={p['hang_after']!r}"]
        return args

    def _launch(self, ctx: RunContext, p: dict[str, Any], sync: str, repeat: int, base: dict[str, Any],
                local_one: bool = False) -> list[dict]:
        recs: list[dict] = []

        def on_result(rec: dict) -> None:
            if rec.get("metric") != "pdes":
                return
            if not rec.get("ok"):
                raise KernelFailed(f"pdes {sync}: the run failed its own check: {rec.get('why')} (repeat "
                                   f"{rec.get('repeat')})", "report this as a bug")
            recs.append(rec)
            ctx.progress.advance(1)

        if local_one and p["host_list"]:
            # the first rank's node, its own build: this node may be outside the run's nodes (a
            # login node outside the Slurm job, whose "this node" srun would put on a job's node)
            first = p["places"][0]
            places = [first]
            hosts = [next((h for h in p["host_list"] if h[0] == first[0]), p["host_list"][0])]
        elif local_one:  # this node ([] rather than None: no hosts)
            places, hosts = [(None, p["cpus"][0])], []
        else:
            places, hosts = p["places"], p["host_list"]
        self.launch(ctx, p, self._args(p, sync, repeat), base, on_result, places=places, host_list=hosts,
                    proof_ranks=(0, 1) if len(places) > 1 else (0,), name=f"pdes {sync}",
                    hold=False)  # on_result collects only: the figures are made after the launch
        if len(recs) != repeat:
            raise KernelFailed(f"pdes {sync} printed {len(recs)} of {repeat} runs", "rerun; report it if it persists")
        return recs

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        p = params
        ctx.progress.start("pdes", total=p["repeat"] + (1 if p["verify_with_sequential"] else 0))
        reference = None
        if p["verify_with_sequential"]:
            ref_base: dict[str, Any] = {}
            reference = self._launch(ctx, p, "sequential", 1, ref_base, local_one=True)[0]
        base: dict[str, Any] = {
            "model": p["model"], "sync": p["sync"], "lps": p["lps"], "remote": p["remote"],
            "lookahead": p["lookahead"], "mean": p["mean"], "start_events": p["start_events"], "end": p["end"],
            "batch": p["batch"] if p["sync"] == "optimistic" else None,
            "gvt_interval": p["gvt_interval"] if p["sync"] == "optimistic" else None,
            "window": p.get("window"), "event_memory_mib": p["event_memory"], "seed": p["seed"],
            "ranks": p["ranks"], "processes": p["ranks"], "ranks_per_node": p["ranks_per_node"],
            "nodes": len(set(p["rank_hosts"])), "cpus": p["cpus"],
            "hosts": [h[0] for h in p["host_list"]] if p["host_list"] else None,
            "model_definition": ("phold: each event schedules one event at now + lookahead + Exp(mean), to an LP "
                                 "drawn uniformly from all LPs with probability remote, else to itself (ROSS's routing; ROSS's --mean "
                                 "includes the lookahead)"
                                 if p["model"] == "phold" else
                                 "qnet: FCFS servers; a job arriving at t starts at max(t, busy_until), is served "
                                 "Exp(mean), and arrives at its next server (phold's routing) at departure + lookahead"),
            "rate_definition": "committed events / wall time of the slowest rank, barrier to GVT >= end",
        }
        recs = self._launch(ctx, p, p["sync"], p["repeat"], base)
        digests = {r["digest"] for r in recs}
        committed = {r["committed"] for r in recs}
        if len(digests) > 1 or len(committed) > 1:
            raise KernelFailed(f"pdes {p['sync']}: the repeats committed different histories "
                               f"({len(digests)} digests, committed {sorted(committed)})", "report this as a bug")
        verified = None
        if reference is not None:
            if reference["digest"] != recs[0]["digest"] or reference["committed"] != recs[0]["committed"]:
                raise KernelFailed(f"pdes {p['sync']}: the committed history differs from the sequential engine's "
                                   f"(committed {recs[0]['committed']} vs {reference['committed']}, digest "
                                   f"{recs[0]['digest']} vs {reference['digest']}): a lost or wrong event",
                                   "report this as a bug, with the command")
            verified = {"against": "sequential engine, same model and seed", "committed": reference["committed"],
                        "digest": reference["digest"], "sequential_runtime_s": reference["runtime_s"]}
        if recs[0]["committed"] == 0:  # a rate and an efficiency of nothing are undefined, not 0 and 1
            raise UsageError(f"pdes: the simulation committed no event before --end {p['end']:g} (the first events "
                             f"come at lookahead + Exp(mean) = {p['lookahead']:g} + Exp({p['mean']:g}))",
                             f"give a larger --end, e.g. --end {max(1000.0, 100 * (p['lookahead'] + p['mean'])):g}")
        runtimes = [float(r["runtime_s"]) for r in recs]
        rates = [r["committed"] / t for r, t in zip(recs, runtimes)]
        eff = [r["committed"] / r["processed"] if r["processed"] else 1.0 for r in recs]
        c0 = recs[0]["committed"]
        prm = {**base, "digest": recs[0]["digest"], "committed": c0, "verified": verified,
               "per_repeat": {k: [r.get(k) for r in recs] for k in COUNTS},
               "committed_per_rank": recs[0].get("committed_per_rank"),
               "efficiency": statistics.median(eff),
               "ross_efficiency": statistics.median(1 - r["rolled_back"] / r["committed"] if r["committed"] else 1.0
                                                    for r in recs),
               "remote_fraction": statistics.median(r["remote_events"] / r["processed"] if r["processed"] else 0.0
                                                    for r in recs),
               "offnode_fraction": statistics.median(r["offnode_messages"] / r["processed"] if r["processed"] else 0.0
                                                     for r in recs),
               "runtime": runtime_stats(runtimes)}
        if reference is not None:
            prm["speedup_over_sequential"] = reference["runtime_s"] / statistics.median(runtimes)
        out = [ctx.emit(self, "events_per_s", rates, prm, value=statistics.median(rates)),
               ctx.emit(self, "runtime_s", runtimes, prm, value=statistics.median(runtimes)),
               ctx.emit(self, "efficiency", eff, prm, value=statistics.median(eff), check_cv=False)]
        rb = statistics.median(r["rolled_back"] for r in recs)
        ctx.note(f"pdes: {p['model']} {p['sync']} on {p['ranks']} rank(s): {c0} events committed in every repeat"
                 + (", the same history as the sequential engine" if verified else "")
                 + f"; median {rb:.0f} rolled back, {statistics.median(r['gvt_rounds'] for r in recs):.0f} GVT rounds")
        ctx.note(_runtime_note(prm["runtime"]))
        return out
