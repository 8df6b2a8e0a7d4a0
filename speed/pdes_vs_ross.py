#!/usr/bin/env python3
"""`clusterbench run pdes` (PHOLD on our Time Warp engine) beside ROSS's `phold` model, issue 13's speed targets.

The reference is ROSS (the simulator seed 003 used), built for measurement only in a temporary directory
from its source tarball in ``../shared/reference/ross-*.tar.gz`` (cmake -DROSS_BUILD_MODELS=ON,
CMAKE_C_COMPILER=mpicc, Release with -O3 -DNDEBUG) and never copied into the project; ``--ross PATH``
uses an existing ``phold`` binary instead (building, running and reading ROSS: speed/ross_phold.py).

Same model on both sides: PHOLD, 1024 LPs in all, each event schedules one event, to a uniformly chosen
LP with probability ``remote`` (else to itself) at now + delay. ROSS's delay is lookahead + Exp(mean -
lookahead) (its ``--mean`` includes the lookahead: phold.main.c subtracts it), so with ROSS's defaults
(lookahead 1, mean 1) every delay is exactly 1.0 (no randomness in time at all, ties everywhere). The
issue's reference figures (2.32 M events/s sequential, 2.02 M optimistic on 2 ranks) are of that
degenerate model. This script runs ROSS both ways:

* ``same``: ROSS ``--lookahead L --mean M+L`` (delay L + Exp(M)), the model our ``--lookahead L --mean M``
  runs (our kernel's header: delay = lookahead + Exp(mean)), so committed counts agree to RNG noise (the
  two draw different random streams: ROSS CLCG4 per LP, ours SplitMix64 counters);
* ``issue``: ROSS ``--mean 1`` exactly as the issue ran it (delay 1.0), for continuity with its figures.

Interleaved rounds: in each round every configuration runs once on each side, the side that goes first
alternating between rounds, so a noisy minute does not always fall on the same side. Configurations:

* sequential: ROSS ``mpirun -n 1 phold --synch=1 --nlp=1024`` vs ``run pdes --sync sequential``;
* optimistic, 2 ranks: ROSS ``mpirun -n 2 phold --synch=3 --nlp=512 --extramem=N`` vs
  ``run pdes --sync optimistic --ranks 2``;
* (``--conservative``) conservative, 2 ranks: ROSS ``--synch=2`` vs ``run pdes --sync conservative --ranks 2``.

Every ROSS run is ``mpirun -n R --bind-to core --map-by core`` (one rank per core, as our ranks are pinned)
with ROSS's own defaults otherwise (16 KPs per PE, --batch 16, --gvt-interval 16, no optimism limit); ours
run with their defaults (--batch 32, --gvt-interval 32, no --window). ROSS runs in a scratch directory (it
appends to ./ross.csv).

Figures: committed (ROSS "net") events per second = committed / max PE wall time, on both sides;
efficiency (ROSS prints 1 - rolled back / net; ours committed / processed; both are logged, and both are
computed for ROSS from its counts); rollbacks; GVT rounds. Reported per configuration: best and median of
each side, their ratios, and the median of the per-round ratios. Targets (issue 13): optimistic 2 ranks
>= 1.5 x ROSS optimistic 2 ranks; our optimistic 2 ranks > ROSS sequential; our sequential >= 1.0 x ROSS
sequential.

Our side runs as a user would: ``--repeat 1 --json --no-store`` and its default ``--verify`` (an optimistic
or conservative run first runs the sequential engine on this node, untimed, and refuses a different
committed history), so every parallel figure here is of a run checked against the sequential engine. A
warm-up run (not counted) builds our kernel before anything is timed.

Then (unless --no-cluster) the network section: optimistic PHOLD on a 2-node virtual cluster over TCP
(``sim-cluster up --nodes 2`` under its own prefix ``cbpdes-``, so another virtual cluster on the machine is
left alone; ``--hosts cbpdes-n1:1,cbpdes-n2:1`` and ``cbpdes-n1:2,cbpdes-n2:2``) beside the same rank counts on
this node over shared memory, and 2 ranks on this node over TCP (to separate the namespaces from the
transport): events/s and efficiency, ours and ROSS ("same" model; mpirun in the head namespace with
sim-cluster's mpirun options, ``--mca btl self,tcp``, one rank per node pinned to cores 0 and 1 by a
rankfile, 2 per node unbound). The virtual cluster's nodes share this machine's 2 cores, so 2 ranks per
node is 4 busy ranks on 2 cores here (and on one node ``--oversubscribe``). The cluster is brought down at
the end if this script brought it up. Open MPI's launch across the namespaces now and then hangs before
any rank starts: a ROSS launch that printed nothing within --launch-timeout s is killed and retried
(clusterbench's own launcher does the same).

    .venv/bin/python speed/pdes_vs_ross.py [--rounds 5] [--end 10000] [--ross PATH] [--extramem 8192]
        [--conservative] [--no-cluster] [--cluster-rounds 2] [--cluster-end T] [--log FILE]

The raw log goes to speed/results-<date>-<machine>-pdes.txt unless --log is given.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ross_phold import ROOT_MPI, RunFailed, build_ross, ross
from speedkit import RawLog, load, log_file

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
CB = str(REPO / ".venv" / "bin" / "clusterbench")
ROOT_CB = ["--allow-root"] if os.geteuid() == 0 else []
SIM_PREFIX = "cbpdes-"  # our own virtual cluster, beside any other engineer's cbsim-

TARGETS = {"opt2_vs_ross_opt2": 1.5, "opt2_vs_ross_seq": 1.0, "seq_vs_ross_seq": 1.0}


def machine_name() -> str:
    try:
        from clusterbench.probe import probe
        model = (probe().get("cpu") or {}).get("model_name") or "cpu"
    except Exception:  # noqa: BLE001 - the name is cosmetic
        model = "cpu"
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") + f"-{len(os.sched_getaffinity(0))}vcpu"


def machine_description() -> str:
    try:
        from clusterbench.probe import probe
        p = probe()
        cpu = p.get("cpu") or {}
        desc = f"{cpu.get('model_name')} ({cpu.get('microarchitecture')})"
    except Exception:  # noqa: BLE001
        desc = "cpu ?"
    mem = ""
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f", {kb / 1048576:.1f} GiB RAM"
    except Exception:  # noqa: BLE001
        pass
    mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()
    cc = subprocess.run(["mpicc", "--version"], capture_output=True, text=True).stdout.splitlines()
    return (f"{desc}, {len(os.sched_getaffinity(0))} cpus{mem}; kernel {os.uname().release}; "
            f"{mpi[0] if mpi else 'mpirun ?'}; mpicc -> {cc[0] if cc else '?'}")


# ----------------------------------------------------------------------------------------------- ours


def ours_cmd(sync: str, ranks: int, a, hosts: str | None = None, transport: str | None = None) -> list[str]:
    cmd = [CB, "run", "pdes", "--sync", sync, "--lps", str(a.lps), "--remote", f"{a.remote:g}",
           "--lookahead", f"{a.lookahead:g}", "--mean", f"{a.mean:g}", "--start-events", str(a.start_events),
           "--end", f"{a.end:g}", "--repeat", "1", "--json", "--no-store"]
    if hosts:
        cmd += ["--hosts", hosts]
    elif sync != "sequential":
        cmd += ["--ranks", str(ranks)]
    if transport:
        cmd += ["--transport", transport]
    if ranks > len(os.sched_getaffinity(0)) and not hosts:
        cmd.append("--oversubscribe")
    if getattr(a, "no_verify", False):
        cmd.append("--no-verify")
    cmd += ROOT_CB  # every run starts the kernel with mpirun (Open MPI refuses root without consent)
    cmd += a.ours_extra
    return cmd


def ours(sync: str, ranks: int, a, hosts: str | None = None, transport: str | None = None,
         env: dict | None = None) -> dict:
    cmd = ours_cmd(sync, ranks, a, hosts, transport)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise RunFailed(f"{shlex.join(cmd)}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[-1500:]}")
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise RunFailed(f"{shlex.join(cmd)}: not JSON ({e}): {p.stdout[:500]}") from e
    res = {r["metric"]: r for r in doc["results"] if r.get("benchmark") == "pdes"}
    if "events_per_s" not in res:
        raise RunFailed(f"{shlex.join(cmd)}: no events_per_s among {sorted(res)}")
    e = res["events_per_s"]
    prm = dict(e.get("params") or {})
    per = prm.get("per_repeat") or {}

    def first(key: str):
        v = per.get(key)
        return v[0] if isinstance(v, list) and v else prm.get(key)

    out = {"eps": e["value"], "samples": e.get("samples"), "params": prm, "cmd": shlex.join(cmd), "wall_s": wall,
           "committed": prm.get("committed"), "processed": first("processed"), "rolled_back": first("rolled_back"),
           "primary_rollbacks": first("rollbacks_primary"), "secondary_rollbacks": first("rollbacks_secondary"),
           "anti_messages": first("anti_messages"), "remote_events": first("remote_events"),
           "offnode_messages": first("offnode_messages"), "gvt_rounds": first("gvt_rounds"),
           "gvt_time_max_s": first("gvt_time_max_s"), "memory_bytes": first("memory_bytes"),
           "efficiency": prm.get("efficiency"), "ross_efficiency": prm.get("ross_efficiency"),
           "verified": bool(prm.get("verified")) if sync != "sequential" else "n/a (sequential)",
           "digest": prm.get("digest"),
           "transport_used": prm.get("transport_used") or prm.get("transport"), "nodes": prm.get("nodes")}
    if out["primary_rollbacks"] is not None:
        out["rollbacks"] = (out["primary_rollbacks"] or 0) + (out["secondary_rollbacks"] or 0)
    if "runtime_s" in res:
        out["runtime_s"] = res["runtime_s"]["value"]
    if "efficiency" in res:
        out["efficiency"] = res["efficiency"]["value"]
    return out


# ----------------------------------------------------------------------------------------------- report


def med(v: list[float]) -> float:
    return statistics.median(v) if v else float("nan")


def spread(v: list[float]) -> str:
    return f"{statistics.stdev(v) / statistics.fmean(v):.1%}" if len(v) > 1 else "-"


def fmt_ross(r: dict) -> str:
    return (f"{r['eps'] / 1e6:.3f} M ev/s (net {r['net']} of {r['processed']} processed in {r['running_time_s']:.4f} s; "
            f"rolled back {r.get('rolled_back', 0)}, committed/processed {r['efficiency']:.2%}, ROSS efficiency "
            f"{r.get('ross_efficiency_pct', float('nan')):.2f}%; rollbacks {r.get('rollbacks', 0)} (primary "
            f"{r.get('primary_rollbacks', 0)}, secondary {r.get('secondary_rollbacks', 0)}); GVT "
            f"{r.get('gvt_rounds', 0)}; remote (network) {r.get('remote_network', 0)}; process wall {r['wall_s']:.2f} s)")


def fmt_ours(o: dict) -> str:
    def pct(x) -> str:
        return f"{x:.2%}" if isinstance(x, (int, float)) else "?"
    keep = ("ranks", "ranks_per_node", "nodes", "cpus", "hosts", "transport", "transport_used", "batch", "gvt_interval",
            "window", "event_memory_mib", "seed", "remote_fraction", "offnode_fraction", "speedup_over_sequential",
            "runtime", "verified", "per_repeat")
    extra = {k: o["params"].get(k) for k in keep if k in o["params"]}
    return (f"{o['eps'] / 1e6:.3f} M ev/s (committed {o.get('committed')} of {o.get('processed')} processed, "
            f"runtime {o.get('runtime_s', float('nan')):.4f} s; rolled back {o.get('rolled_back')}, committed/processed "
            f"{pct(o.get('efficiency'))}, ROSS-style efficiency {pct(o.get('ross_efficiency'))}; rollbacks "
            f"{o.get('rollbacks')} (primary {o.get('primary_rollbacks')}, secondary {o.get('secondary_rollbacks')}); "
            f"anti-messages {o.get('anti_messages')}; GVT {o.get('gvt_rounds')} (max time {o.get('gvt_time_max_s')} s); "
            f"remote events {o.get('remote_events')}, off-node messages {o.get('offnode_messages')}; digest "
            f"{o.get('digest')}, verified against sequential: {o.get('verified')}; process wall {o['wall_s']:.2f} s)\n"
            f"      params {json.dumps(extra, sort_keys=True)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lps", type=int, default=1024, help="LPs in all (ROSS --nlp = lps / ranks)")
    ap.add_argument("--remote", type=float, default=0.25)
    ap.add_argument("--lookahead", type=float, default=1.0)
    ap.add_argument("--mean", type=float, default=1.0, help="our --mean (the exponential part of the delay)")
    ap.add_argument("--start-events", type=int, default=1)
    ap.add_argument("--end", type=float, default=10000)
    ap.add_argument("--ross", help="an existing ROSS phold binary (default: build one in a temp dir)")
    ap.add_argument("--extramem", type=int, default=8192,
                    help="ROSS --extramem for optimistic runs (doubled on 'Out of events'; 1024 LPs, end 10000 "
                         "needed about 800 here)")
    ap.add_argument("--ross-models", default="same,issue",
                    help="which ROSS PHOLD variants: same (delay = lookahead + Exp(mean), as ours), issue "
                         "(ROSS --mean 1: every delay 1.0, as the issue's figures)")
    ap.add_argument("--conservative", action="store_true", help="also conservative on 2 ranks")
    ap.add_argument("--no-cluster", action="store_true", help="skip the virtual-cluster TCP/shm section")
    ap.add_argument("--ross-only", action="store_true",
                    help="run only the ROSS side (e.g. before `run pdes` exists)")
    ap.add_argument("--cluster-rounds", type=int, default=2)
    ap.add_argument("--cluster-end", type=float, default=0,
                    help="--end for the virtual-cluster section (default 0: --end; ROSS with 4 busy ranks on 2 cores "
                         "over TCP ran at about 0.06 M events/s here, 90 s for end 10000)")
    ap.add_argument("--no-cluster-ross", dest="cluster_ross", action="store_false",
                    help="virtual-cluster section: ours only (default: ROSS too, same model)")
    ap.add_argument("--ours-extra", default="", help="extra options for `clusterbench run pdes` (shell words)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds before one run is killed")
    ap.add_argument("--launch-timeout", type=float, default=20,
                    help="seconds before a ROSS launch that printed nothing is killed and retried")
    ap.add_argument("--log", help="raw log (default: speed/results-<date>-<machine>-pdes.txt)")
    a = ap.parse_args()
    a.ours_extra = shlex.split(a.ours_extra)
    a.no_verify = False
    variants = [v for v in a.ross_models.split(",") if v]
    ross_means = {"same": a.mean + a.lookahead, "issue": 1.0}

    say = RawLog(log_file(a.log, f"{machine_name()}-pdes"))

    up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    say(f"# pdes_vs_ross.py {time.strftime('%Y-%m-%d %H:%M:%S')} on {machine_description()}")
    say(f"# git {subprocess.run(['git', '-C', str(REPO), 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()}; "
        f"uptime at start: {up}")
    say(f"# PHOLD: {a.lps} LPs, remote {a.remote:g}, lookahead {a.lookahead:g}, our mean {a.mean:g}, start events "
        f"{a.start_events}, end {a.end:g}; rounds {a.rounds}; ROSS variants {variants} (ROSS --mean: "
        + ", ".join(f"{v} {ross_means[v]:g}" for v in variants) + ")")
    say(f"# argv: {shlex.join(sys.argv)}")

    work_ctx = tempfile.TemporaryDirectory(prefix="cb-ross-build-")
    try:
        binary = Path(a.ross).resolve() if a.ross else build_ross(Path(work_ctx.name), say)
        if a.ross:
            say(f"ROSS binary given: {binary}")
        if not a.ross_only:  # build our kernel (its cache) before anything is timed; not recorded
            warm = argparse.Namespace(**{**vars(a), "end": min(a.end, 100.0)})
            try:
                w = ours("optimistic", 2, warm)
                say(f"warm-up (not counted): {w['cmd']} -> {w['eps'] / 1e6:.3f} M ev/s in {w['wall_s']:.1f} s")
            except (RunFailed, subprocess.TimeoutExpired) as e:
                say(f"warm-up failed: {e}")
        configs = [("seq", "sequential", 1, 1), ("opt2", "optimistic", 2, 3)]
        if a.conservative:
            configs.append(("cons2", "conservative", 2, 2))
        # res[config]["ours"] = [dict]; res[config][variant] = [dict]
        res: dict[str, dict[str, list]] = {c[0]: {"ours": [], **{v: [] for v in variants}} for c in configs}
        fails: list[str] = []
        for rnd in range(a.rounds):
            for name, sync, ranks, synch in configs:
                ours_first = rnd % 2 == 1
                sides = ["ours", *variants] if ours_first else [*variants, "ours"]
                if a.ross_only:
                    sides.remove("ours")
                for side in sides:
                    try:
                        if side == "ours":
                            r = ours(sync, ranks, a)
                            say(f"round {rnd} {name} ours: {fmt_ours(r)}; load {load()}")
                            say(f"    $ {r['cmd']}")
                        else:
                            r = ross(binary, synch, ranks, a, ross_means[side], say)
                            say(f"round {rnd} {name} ROSS[{side}]: {fmt_ross(r)}; load {load()}")
                            say(f"    $ {r['cmd']}")
                        res[name][side].append(r)
                    except (RunFailed, subprocess.TimeoutExpired) as e:
                        msg = f"round {rnd} {name} {side}: FAILED: {e}"
                        say(msg)
                        fails.append(msg.splitlines()[0])
        report(a, res, variants, say)
        if not a.no_cluster:
            cluster_section(a, say, binary, Path(work_ctx.name))
        if fails:
            say(f"{len(fails)} run(s) failed:")
            for f in fails:
                say(f"  {f}")
        say(f"load at the end: {load()}")
    finally:
        work_ctx.cleanup()
        say.close()
    print(f"raw log: {say.path}")
    return 0


def report(a, res: dict, variants: list[str], say) -> None:
    say("")
    say(f"## Summary ({a.rounds} interleaved rounds; committed events/s, M; best / median (CV))")
    say("| config | side | events/s best / median (CV) | committed (median) | efficiency committed/processed (median) "
        "| rollbacks (median) | GVT rounds (median) |")
    say("|---|---|---|---|---|---|---|")
    for name, sides in res.items():
        for side, runs in sides.items():
            if not runs:
                say(f"| {name} | {side} | no run | | | | |")
                continue
            eps = [r["eps"] for r in runs]
            label = "ours" if side == "ours" else f"ROSS[{side}]"
            say(f"| {name} | {label} | {max(eps) / 1e6:.3f} / {med(eps) / 1e6:.3f} ({spread(eps)}) | "
                f"{med([r.get('committed') or 0 for r in runs]):.0f} | "
                f"{med([r.get('efficiency') or float('nan') for r in runs]):.2%} | "
                f"{med([r.get('rollbacks') or 0 for r in runs]):.0f} | {med([r.get('gvt_rounds') or 0 for r in runs]):.0f} |")
    say("")
    say("## Ratios (ours / ROSS): of the bests, of the medians, median of the per-round ratios (range)")

    def ratio(num: list[dict], den: list[dict]) -> tuple[float, float, float, str] | None:
        if not num or not den:
            return None
        n, d = [r["eps"] for r in num], [r["eps"] for r in den]
        per = [x / y for x, y in zip(n, d)]
        return (max(n) / max(d), med(n) / med(d), med(per), f"{min(per):.2f}-{max(per):.2f}")

    checks = [("opt2", "opt2", TARGETS["opt2_vs_ross_opt2"], "optimistic 2 ranks vs ROSS optimistic 2 ranks"),
              ("opt2", "seq", TARGETS["opt2_vs_ross_seq"], "our optimistic 2 ranks vs ROSS sequential (> 1)"),
              ("seq", "seq", TARGETS["seq_vs_ross_seq"], "sequential vs ROSS sequential")]
    if "cons2" in res:
        checks.append(("cons2", "cons2", 0.0, "conservative 2 ranks vs ROSS conservative 2 ranks (no target)"))
    say("| ours | ROSS | variant | target | ratio best | ratio median | median per-round (range) | met (best / median) |")
    say("|---|---|---|---|---|---|---|---|")
    for ours_cfg, ross_cfg, target, what in checks:
        for v in variants:
            r = ratio(res[ours_cfg]["ours"], res[ross_cfg][v])
            if r is None:
                say(f"| {ours_cfg} | {ross_cfg} | {v} | {target:g} | - | - | - | no data |")
                continue
            met = lambda x: ("yes" if x >= target else "NO") if target else "-"  # noqa: E731
            say(f"| {ours_cfg} | {ross_cfg} | {v} | >= {target:g} | {r[0]:.3f} | {r[1]:.3f} | {r[2]:.3f} ({r[3]}) | "
                f"{met(r[0])} / {met(r[1])} |  <- {what}")
    say("")
    say("Parallel speedup over the same side's own sequential run (ratio of the medians of committed events/s):")
    for side in ["ours", *variants]:
        base = res.get("seq", {}).get(side) or []
        for cfg in [c for c in res if c != "seq"]:
            runs = res[cfg].get(side) or []
            if base and runs:
                say(f"  {'ours' if side == 'ours' else f'ROSS[{side}]'} {cfg}: "
                    f"{med([r['eps'] for r in runs]) / med([r['eps'] for r in base]):.3f}")
    say("")
    for name, sides in res.items():
        counts = {s: sorted({r.get("committed") for r in runs}) for s, runs in sides.items() if runs}
        say(f"committed counts, {name}: " + "; ".join(f"{s}: {', '.join(str(c) for c in cs)}" for s, cs in counts.items()))


# ------------------------------------------------------------------------------------- virtual cluster


def sim(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([CB, "sim-cluster", *args], capture_output=True, text=True, env=env, timeout=300)


def ross_launch(ranks: int, hosts: str | None, transport: str, sim_args: list[str], workdir: Path) -> list[str]:
    """mpirun and its options for ROSS in a network case: this node (one rank per core; 4 ranks on 2 cores
    unbound) or the virtual cluster (mpirun in its head namespace, one rank per node pinned to cores 0 and
    1 by a rankfile, or 2 per node unbound), with Open MPI's btl set to the transport."""
    btl = ["--mca", "btl", "self,vader" if transport == "shm" else "self,tcp"]
    cores = len(os.sched_getaffinity(0))
    if hosts is None:
        bind = ["--bind-to", "core", "--map-by", "core"] if ranks <= cores else ["--oversubscribe", "--bind-to", "none"]
        return ["mpirun", *ROOT_MPI, "-n", str(ranks), *bind, *btl]
    head = f"{SIM_PREFIX}head"
    nodes = [h.split(":")[0] for h in hosts.split(",")]
    per = int(hosts.split(",")[0].split(":")[1])
    if per == 1 and len(nodes) <= cores:
        rf = workdir / f"rankfile-{len(nodes)}"
        rf.write_text("".join(f"rank {k}={n} slot={k}\n" for k, n in enumerate(nodes)))
        bind = ["--rankfile", str(rf)]
    else:
        bind = ["--bind-to", "none"]
    return ["ip", "netns", "exec", head, "mpirun", *ROOT_MPI, *sim_args, *btl, "-n", str(ranks), "--host", hosts,
            *bind]


def cluster_section(a, say, binary: Path, workdir: Path) -> None:
    say("")
    say("## Network: optimistic PHOLD on a 2-node virtual cluster over TCP beside this node over shm (and tcp)")
    env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": SIM_PREFIX}
    was_up = SIM_PREFIX + "head" in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    if not was_up:
        p = sim(["up", "--nodes", "2"], env)
        say(f"$ CLUSTERBENCH_SIM_PREFIX={SIM_PREFIX} clusterbench sim-cluster up --nodes 2 -> exit {p.returncode}")
        if p.returncode != 0:
            say(f"  could not bring the virtual cluster up: {(p.stderr or p.stdout).strip()[-600:]}")
            return
    else:
        say(f"virtual cluster {SIM_PREFIX} was already up (left up at the end)")
    st = sim(["status"], env)
    for line in st.stdout.strip().splitlines():
        say(f"  {line}")
    hj = sim(["hosts", "--json"], env)
    sim_args = json.loads(hj.stdout)["mpirun_args"] if hj.returncode == 0 else []
    n1, n2 = f"{SIM_PREFIX}n1", f"{SIM_PREFIX}n2"
    cases = [  # (label, ranks, hosts, transport)
        ("2 ranks, 1 node, shm", 2, None, "shm"),
        ("2 ranks, 1 node, tcp", 2, None, "tcp"),
        ("2 nodes x 1 rank, tcp", 2, f"{n1}:1,{n2}:1", "tcp"),
        ("4 ranks, 1 node, shm", 4, None, "shm"),
        ("2 nodes x 2 ranks, tcp", 4, f"{n1}:2,{n2}:2", "tcp"),
    ]
    sides = ([] if a.ross_only else ["ours"]) + (["ross"] if a.cluster_ross else [])
    main_end, a.end = a.end, a.cluster_end or a.end
    say(f"PHOLD as above but end {a.end:g} (--cluster-end); {a.cluster_rounds} rounds, the case order reversed and the "
        f"side going first alternating each round; ROSS with the 'same' model")
    mean = a.mean + a.lookahead  # ROSS "same" model
    got: dict[tuple[str, str], list[dict]] = {(c[0], s): [] for c in cases for s in sides}
    try:
        for rnd in range(a.cluster_rounds):
            order = cases if rnd % 2 == 0 else list(reversed(cases))
            for label, ranks, hosts, transport in order:
                for side in (sides if rnd % 2 == 0 else list(reversed(sides))):
                    try:
                        if side == "ours":
                            try:
                                o = ours("optimistic", ranks, a, hosts=hosts, transport=transport, env=env)
                            except RunFailed as e:
                                if not hosts or a.no_verify or "verify" in " ".join(a.ours_extra):
                                    raise
                                say(f"round {rnd} {label} ours: FAILED with the sequential check (--verify, on by "
                                    f"default): {str(e).splitlines()[0][-300:]}; retrying with --no-verify")
                                a.no_verify = True
                                try:
                                    o = ours("optimistic", ranks, a, hosts=hosts, transport=transport, env=env)
                                finally:
                                    a.no_verify = False
                            say(f"round {rnd} {label} ours: {fmt_ours(o)}; load {load()}")
                        else:
                            o = ross(binary, 3, ranks, a, mean, say,
                                     launch=ross_launch(ranks, hosts, transport, sim_args, workdir))
                            say(f"round {rnd} {label} ROSS[same]: {fmt_ross(o)}; load {load()}")
                        say(f"    $ {o['cmd']}")
                        got[(label, side)].append(o)
                    except (RunFailed, subprocess.TimeoutExpired) as e:
                        say(f"round {rnd} {label} {side}: FAILED: {e}")
    finally:
        a.end = main_end
        if not was_up:
            p = sim(["down"], env)
            say(f"$ CLUSTERBENCH_SIM_PREFIX={SIM_PREFIX} clusterbench sim-cluster down -> exit {p.returncode}")
    say("")
    say("| case | side | events/s best / median (M) | efficiency committed/processed (median) | rollbacks (median) | "
        "GVT rounds (median) | committed |")
    say("|---|---|---|---|---|---|---|")
    for (label, side), runs in got.items():
        name = "ours" if side == "ours" else "ROSS[same]"
        if not runs:
            say(f"| {label} | {name} | no run | | | | |")
            continue
        eps = [r["eps"] for r in runs]
        say(f"| {label} | {name} | {max(eps) / 1e6:.3f} / {med(eps) / 1e6:.3f} | "
            f"{med([r.get('efficiency') or float('nan') for r in runs]):.2%} | "
            f"{med([r.get('rollbacks') or 0 for r in runs]):.0f} | {med([r.get('gvt_rounds') or 0 for r in runs]):.0f} | "
            f"{', '.join(str(c) for c in sorted({r.get('committed') for r in runs}))} |")
    for side in sides:
        base = got.get(("2 ranks, 1 node, shm", side)) or []
        for label in ("2 ranks, 1 node, tcp", "2 nodes x 1 rank, tcp", "4 ranks, 1 node, shm", "2 nodes x 2 ranks, tcp"):
            runs = got.get((label, side)) or []
            if base and runs:
                say(f"{'ours' if side == 'ours' else 'ROSS'}: {label} / 2 ranks 1 node shm, medians: "
                    f"{med([r['eps'] for r in runs]) / med([r['eps'] for r in base]):.3f}")


if __name__ == "__main__":
    sys.exit(main())
