"""The pure tests (they start no process) of what tests/integration/test_run_cluster.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.cluster import characterise as ch
from clusterbench.errors import KernelFailed, UsageError


GiB = 1 << 30


def test_budget_split_gives_every_stage_its_share_and_the_tune_comes_out_of_hpls():
    plan = ch.split_budget(900)
    assert list(plan) == list(ch.STAGES)
    assert sum(plan.values()) == pytest.approx(900)
    assert plan["hpl"] == max(plan.values())  # HPL is the largest part
    tuned = ch.split_budget(900, tune_share=0.3)
    assert tuned["tune"] == pytest.approx(0.3 * plan["hpl"]) and tuned["hpl"] == pytest.approx(0.7 * plan["hpl"])
    assert sum(tuned.values()) == pytest.approx(900)
    for bad in ((0, 0.0), (-5, 0.0), (900, 1.0), (900, -0.1)):
        with pytest.raises(UsageError):
            ch.split_budget(*bad)


def test_n_follows_the_time_left_and_the_smallest_nodes_memory():
    kw = dict(nb=192, ranks=4, p=2)
    small = ch.choose_n(60, 50.0, 64 * GiB, **kw)
    big = ch.choose_n(600, 50.0, 64 * GiB, **kw)
    assert small["bound"] == "time" and big["bound"] == "time"
    assert MIN_N_OK(small["n"]) and small["n"] < big["n"] and small["n"] % 192 == 0
    # HPL's 2/3 N^3 flops at the assumed share of the measured rate fit the seconds given
    for d, sec in ((small, 60), (big, 600)):
        assert d["expected_s"] <= sec
        assert ch.hpl_seconds(d["n"] + 2 * 192, 50.0) > sec * 0.9  # and N is not far below what fits
    # a faster cluster gets a larger N in the same time
    assert ch.choose_n(60, 500.0, 64 * GiB, **kw)["n"] > small["n"]
    # little memory bounds N whatever the time: at most the fraction of it for the matrix
    low = ch.choose_n(3600, 500.0, 1 * GiB, **kw)
    assert low["bound"] == "memory" and 8 * low["n"] ** 2 <= ch.MEM_FRACTION * GiB
    # unknown memory: the time alone
    assert ch.choose_n(60, 50.0, None, **kw)["n"] == small["n"]
    # a budget too small for any HPL worth running is refused, naming what is needed
    with pytest.raises(UsageError, match="larger --budget"):
        ch.choose_n(11, 1.0, 64 * GiB, **kw)
    with pytest.raises(UsageError):
        ch.choose_n(60, 0.0, 64 * GiB, **kw)


def MIN_N_OK(n: int) -> bool:
    return n >= ch.MIN_N


def test_the_slowest_nodes_dgemm_rate_sizes_hpl():
    doc = {"metrics": [{"benchmark": "peak", "metric": "gflops", "label": "peak gflops", "values": {"a": 30.0}},
                       {"benchmark": "dgemm", "metric": "gflops", "label": "dgemm gflops",
                        "values": {"a": 20.0, "b": 12.0, "c": 19.0}}]}
    rate, why = ch.node_rate(doc)
    assert rate == 12.0 and "(b)" in why
    assert ch.node_rate({"metrics": doc["metrics"][:1]})[0] == 30.0
    assert ch.node_rate({"metrics": []})[0] is None


def test_a_failing_stage_is_one_line_naming_it_and_the_runs_kept():
    exc = ch.StageFailed("network", KernelFailed("mpirun died", "rerun"), ["abcdef0123", "1234567890"])
    text = str(exc)
    assert "\n" not in text and "stage network failed: mpirun died" in text and "abcdef01, 12345678" in text
    assert exc.exit_code == KernelFailed.exit_code
    assert "nothing was stored" in str(ch.StageFailed("node", UsageError("bad"), []))


def test_summary_names_every_stage_and_what_holds_the_cluster_back():
    doc = {"hosts": ["n1", "n2", "n3"], "tag": "cluster-x", "budget_s": 240, "seconds": 200, "within_budget": True,
           "run_ids": ["a" * 32, "b" * 32, "c" * 32],
           "stages": {"preflight": {"ok": True, "problems": [], "seconds": 4.0},
                      "node": {"run_id": "a" * 32, "verdict": "outlier nodes: n2 (1 figure)",
                               "outlier_nodes": {"n2": ["peak gflops"]}, "seconds": 40},
                      "network": {"run_id": "b" * 32, "verdict": "slow links: n1-n2", "slow_nodes": [],
                                  "slow_links": ["n1-n2"], "seconds": 20,
                                  "median": {"latency": {"median": 40.0}, "bandwidth": {"median": 800.0}}},
                      "hpl": {"run_id": "c" * 32, "verdict": "Rmax 20 Gflop/s = 20.0% of Rpeak 100 Gflop/s",
                              "rmax_over_rpeak": 0.2, "n": 9600, "nb": 192, "grid": "1x3", "time_s": 50.0,
                              "sizing": {"bound": "time", "n_time": 9700, "n_mem": 40000}, "seconds": 60},
                      "doctor": {"verdict": "2 findings on 2 node(s)", "seconds": 2,
                                 "findings": {"n1": [{"severity": "warn", "title": "T", "rule": "r"}],
                                              "n2": [{"severity": "warn", "title": "T", "rule": "r"}], "n3": []}}}}
    doc["holds_back"] = ch.holds_back(doc)
    text = "\n".join(ch.format_summary(doc))
    for stage in ("preflight  ready", "node       outlier nodes: n2", "network    slow links: n1-n2",
                  "hpl        Rmax 20", "doctor     2 findings"):
        assert stage in text, text
    assert "slow link n1-n2" in text and "n1, n2: [warn] T (r)" in text and "20.0% of Rpeak" in text
    assert len(ch.format_summary(doc)) <= 24  # one screen
    # a tune's many trial runs are counted, not listed one by one
    doc["run_ids"] += [f"{i:08d}" + "0" * 24 for i in range(20)]
    doc["stages"]["tune"] = {"best": {"nb": 128, "grid": "1x3"}, "trials": 20, "n": 4224, "seconds": 24}
    text = "\n".join(ch.format_summary(doc))
    assert "runs tagged cluster-x: 23 (aaaaaaaa, bbbbbbbb, ..., 00000019)" in text
    assert "tune       best NB 128, grid 1x3 of 20 trial(s) at N=4224" in text
    assert max(map(len, ch.format_summary(doc))) < 160


def test_run_cluster_and_cluster_run_are_the_same_command():
    from clusterbench.cli import parser as build_parser

    a = build_parser().parse_args(["run", "cluster", "--hosts", "a,b", "--budget", "4m", "--tag", "t1"])
    b = build_parser().parse_args(["cluster", "run", "--hosts", "a,b", "--budget", "4m", "--tag", "t1"])
    keep = ("hosts", "hostfile", "budget", "tag", "tune_share", "oversubscribe", "allow_root", "remote_python", "json")
    assert {k: getattr(a, k) for k in keep} == {k: getattr(b, k) for k in keep}
    assert ch.default_tag(0).startswith("cluster-19")


def test_a_stage_leaves_the_launch_its_time_and_its_work_shrinks_to_fit():
    from clusterbench.cluster import fit

    assert fit.slowdown(8.0, 2) == 4.0 and fit.slowdown(0.5, 2) == 1.0
    # a short allotment on a loaded machine: the timeout grows to the launch plus the least work
    t = fit.stage_timeout("network", 34.0, 18.0, 4.0)
    assert t == 18.0 + (fit.BUILD_S + fit.MIN_WORK_S["network"]) * 4.0 and t > 34.0
    assert fit.stage_timeout("network", 200.0, 18.0, 1.0) == 200.0  # a long one stays as it was
    # what the stage measures shrinks instead: less per pair, never below the least
    pb = fit.pair_budget(3, fit.work_seconds("network", t, 18.0, 4.0))
    assert pb < 0.3 and fit.pair_budget(3, 1.0) == fit.PAIR_MIN_S and fit.pair_budget(3, 100.0) == fit.PAIR_MAX_S
    assert fit.allpairs_seconds(3, fit.pair_budget(3, 8.0)) == pytest.approx(8.0)
    # never below what the all-pairs benchmark itself asks (its estimate and launch allowance)
    assert fit.network_timeout(3, 34.0, 1.0) >= fit.allpairs_seconds(3, 1.0) + fit.ALLPAIRS_LAUNCH_S
    # the node profile leaves out its least needed parts first, never peak or dgemm
    est = {"peak": 3.0, "fpu": 1.0, "stream": 2.0, "membw": 4.0, "memlat": 5.0, "dgemm": 4.0}
    assert fit.node_skip(est, 100.0) == ()
    assert fit.node_skip(est, 12.0) == ("memlat", "membw")
    assert fit.node_skip(est, 1.0) == ("memlat", "membw", "fpu", "stream")


def test_a_stage_not_done_is_said_with_its_reason_and_the_others_kept():
    from clusterbench.cluster import fit

    doc = {"hosts": ["n1", "n2"], "tag": "t", "budget_s": 240, "seconds": 230, "within_budget": True,
           "run_ids": ["a" * 32, "c" * 32], "missing": ["network"],
           "stages": {"preflight": {"ok": True, "problems": [], "seconds": 3.0},
                      "node": {"run_id": "a" * 32, "verdict": "no outlier node", "outlier_nodes": {}, "seconds": 60,
                               "done": True, "skipped": ["memlat"]},
                      "network": {"done": False, "reason": "kernel 'allpairs' timed out after 53 s", "fix": "rerun",
                                  "exit_code": 4, "seconds": 53},
                      "hpl": {"run_id": "c" * 32, "verdict": "Rmax 2 Gflop/s", "seconds": 90, "done": True},
                      "doctor": {"verdict": "0 findings on 0 node(s)", "findings": {}, "seconds": 3, "done": True}}}
    doc["holds_back"] = ch.holds_back(doc)
    text = "\n".join(ch.format_summary(doc))
    assert "network    NOT DONE: kernel 'allpairs' timed out after 53 s" in text, text
    assert "missing: network" in text and "left out to fit its time: memlat" in text
    assert "hpl        Rmax 2" in text and "runs tagged t: aaaaaaaa, cccccccc" in text
    assert fit.missing_lines(doc["stages"], doc["missing"]) == [
        "stage network not done: kernel 'allpairs' timed out after 53 s (rerun)"]
    assert ch.exit_code(doc) == 4 and ch.exit_code({**doc, "missing": []}) == 0
